"""LayerNormGrad, written like the CANN source it emulates (spec layernorm_grad.md §4-6).

A2/A3/310P run `_common_path` (COMMON: a chunk loop of count-form instructions over temp
blocks, per-row hierarchical WholeReduceSums, broadcasts by Brcb on arch 2201 or by GetValue and
Duplicate on 2002); the Ascend 950 runs `_regbase_path` (R3510: each row in 64-lane column blocks
in vector registers, three passes). Checks happen before the first instruction (a rejected call
changes no byte), except where a kernel reads UB values on the scalar unit (GetValue): such a
kernel runs live, one instruction at a time.
"""
from dataclasses import dataclass

import numpy as np

from ..arguments import is_real
from ..errors import (AlignmentError, HazardError, InvalidArgumentError, OutOfBoundsError,
                      check_flag)
from ..runtime.recording import runs_live
from ..tensor import LocalTensor
from ..vector_ops import (MASK_PLACEHOLDER, PIPE_V, Add, Adds, BinaryRepeatParams, Brcb,
                          BrcbRepeatParams, Cast, DataCopy, Div, Duplicate, DuplicateLane,
                          HardEvent, MaskMode, Mul, Muls, PipeBarrier, RoundMode, SetFlag,
                          SetMaskCount, SetMaskNorm, SetVectorMask, Sqrt, Sub, UnaryRepeatParams,
                          WaitFlag, WholeReduceSum)
from .aliasing import Read, check_shared_bytes
from .tiling import (LNG_BLOCKS, LayerNormGradTiling, layer_norm_grad_blocks,
                     layer_norm_grad_largest_chunk, layer_norm_grad_tmp_bytes)

API = "LayerNormGrad"
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
API_POSITIONS = ("VECIN", "VECOUT", "VECCALC", "LCM")
NAMES = ("outputPdX", "resForGamma", "inputDy", "inputX", "inputVariance", "inputMean",
         "inputGamma", "sharedTmpBuffer")
# CANN's constants (B-CONST): floats per repeat, repeats per instruction, floats per Brcb call
ONE_REPEAT, MAX_REPEAT, BRCB_ROWS = 64, 255, 2040


@dataclass(frozen=True)
class LayerNormGradShapeInfo:
    """CANN's LayerNormGradShapeInfo: the data format (only "ND" is supported)."""
    dataFormat: str = "ND"


def LayerNormGrad(outputPdX, resForGamma, inputDy, inputX, inputVariance, inputMean, inputGamma,
                  *args, is_reuse_source=False):
    """LayerNormGrad(outputPdX, resForGamma, inputDy, inputX, inputVariance, inputMean,
    inputGamma, sharedTmpBuffer, epsilon, tiling[, shapeInfo]), or the same without
    sharedTmpBuffer (the temp buffer is then all UB not yet allocated, as PopStackBuffer).

    Shapes: pdX, resForGamma, dy, x [B, S, H]; variance, mean [B, S]; gamma [H]; one dtype, half
    or float. epsilon is a number, rounded to T first. With is_reuse_source (float) the kernel
    uses inputDy and inputX as scratch (spec §4.6; on the 950 only their first row)."""
    if not isinstance(inputDy, LocalTensor):
        raise InvalidArgumentError(f"{API}: inputDy must be a LocalTensor")
    core = inputDy.core
    if len(args) not in (2, 3, 4) or (len(args) == 2 and isinstance(args[0], LocalTensor)):
        raise TypeError(f"{API} takes (outputPdX, resForGamma, inputDy, inputX, inputVariance, "
                        "inputMean, inputGamma[, sharedTmpBuffer], epsilon, tiling[, shapeInfo])")
    # three trailing arguments: (epsilon, tiling, shapeInfo) or (sharedTmpBuffer, epsilon, tiling)
    has_tmp = len(args) == 4 or (len(args) == 3 and (
        isinstance(args[0], LocalTensor) or (not is_real(args[0]) and not isinstance(
            args[2], (LayerNormGradShapeInfo, type(None))))))
    shared_tmp, rest = (args[0], args[1:]) if has_tmp else (None, args)
    if has_tmp and not isinstance(shared_tmp, LocalTensor):
        raise InvalidArgumentError(f"{API}: sharedTmpBuffer must be a LocalTensor (leave it out "
                                   f"for the framework's buffer), got {type(shared_tmp).__name__}")
    epsilon, tiling = rest[:2]
    shape_info = rest[2] if len(rest) == 3 and rest[2] is not None else LayerNormGradShapeInfo()
    if not has_tmp:  # the framework-allocated overload: CANN's PopStackBuffer
        shared_tmp = core.pop_stack_buffer(np.uint8, "LCM")
    tensors = (outputPdX, resForGamma, inputDy, inputX, inputVariance, inputMean, inputGamma,
               shared_tmp)
    for name, t in zip(NAMES, tensors):
        if not isinstance(t, LocalTensor) or t.core is not core:
            raise InvalidArgumentError(f"{API}: {name} must be a LocalTensor on inputDy's core")
    _check_dtypes(tensors)
    tiling = LayerNormGradTiling.checked(API, tiling)
    if not isinstance(shape_info, LayerNormGradShapeInfo):
        raise InvalidArgumentError(f"{API}: shapeInfo must be a LayerNormGradShapeInfo")
    data_format = shape_info.dataFormat
    if not (isinstance(data_format, str) and data_format == "ND"):
        raise InvalidArgumentError(f"[{API}] Only support ND data format (shapeInfo.dataFormat "
                                   f"is {data_format!r}).")
    reuse = check_flag(API, "is_reuse_source", is_reuse_source)
    eps = epsilon_value(epsilon, inputDy.dtype)
    dtype = inputDy.dtype
    regbase = core.product.kernel_path == "regbase"

    def kernel():
        _check(core, tensors, tiling, reuse)
        if reuse and dtype == F16:
            core.warn(f"[{API}] The parameter of isReuseSource is true, may not be effective.")
        _check_temp_footprint(core, shared_tmp, tiling, dtype, reuse, regbase)
        path = _regbase_path if regbase else _common_path
        path(core, tiling, tensors[:7], shared_tmp.ReinterpretCast(F32), eps,
             reuse and dtype == F32)

    key = (API, tensors, tiling, int(eps.view(np.uint32)), reuse)
    with core:
        core.run_recorded(key, kernel, dry_run_first=runs_live(core) and _unusual(
            tensors, tiling, dtype, reuse, regbase))


def epsilon_value(value, dtype, api=API):
    """epsilon as the kernel uses it: a T (half: rounded to half), widened exactly to fp32."""
    if not is_real(value):
        raise InvalidArgumentError(f"{api}: epsilon must be a number (an int or a float), got "
                                   f"{value!r}")
    try:
        with np.errstate(over="ignore"):
            return np.float32(np.array(value, dtype=dtype))
    except OverflowError:   # an int beyond every float
        raise InvalidArgumentError(f"{api}: epsilon must be a number a float can hold, got "
                                   f"{value!r}") from None


def _unusual(tensors, tiling, dtype, reuse, regbase):
    """Tensors that share bytes (the temp buffer as far as the kernel touches it), or temp blocks
    that overlap, may make an instruction reject its operands (a partial overlap) half-way
    through a live run: only a dry run of the kernel can tell."""
    touched = _temp_touched(tiling, dtype, reuse, regbase)
    spans = sorted([(t.address, t.address + t.nbytes) for t in tensors[:7]]
                   + [(tensors[7].address, tensors[7].address + max(tensors[7].nbytes, touched))])
    if regbase:
        blocks = []
    else:
        chunk = layer_norm_grad_largest_chunk(tiling)
        blocks = sorted((pos, pos + chunk) for _, pos, _ in _used_blocks(tiling, dtype, reuse))
    return any(start < end for sorted_spans in (spans, blocks)
               for (_, end), (start, _) in zip(sorted_spans, sorted_spans[1:]))


# --- checks (spec §6.1: CANN's CPU-debug checks, plus what the kernel needs of its arguments) ----

def _check_dtypes(tensors):
    data, tmp = tensors[:7], tensors[7]
    dtype = data[2].dtype
    if dtype not in (F16, F32) or any(t.dtype != dtype for t in data):
        raise InvalidArgumentError(
            f"[{API}] The data type of the template parameter is incorrect, template parameter "
            f"(T) is not half or float! ({', '.join(f'{n}={t.dtype.name}' for n, t in zip(NAMES, data))})")
    if tmp.dtype != np.uint8:
        raise InvalidArgumentError(f"{API}: sharedTmpBuffer must be a uint8 LocalTensor "
                                   "(use .ReinterpretCast(np.uint8))")


def _check(core, tensors, tiling, reuse):
    """CANN's CPU-debug checks, and that every tensor, chunk and temp block holds what the
    tiling makes the kernel touch; the instructions' own checks run in the same dry run."""
    pdx, rfg, dy, x, var, mean, gamma, tmp = tensors
    data = tensors[:7]
    dtype = dy.dtype
    for name, t in zip(NAMES, tensors):
        if t.position not in API_POSITIONS:
            raise InvalidArgumentError(
                f"[{API}] Failed to check tensor position of {name}, current api support "
                f"positions are UB(VECIN/VECOUT/VECCALC), current position is {t.position}.")
    for name, t in zip(NAMES, tensors):
        if not 0 < t.nbytes < core.ub_size:
            raise InvalidArgumentError(
                f"[{API}] Failed to check tensor size of {name}, current tensor size is "
                f"{t.size}, should be greater than 0 and less than the hardware memory size.")
    for name, t in zip(NAMES, tensors):
        if t.address % 32:
            raise AlignmentError(f"[{API}] Failed to check {name} physical address, address "
                                 f"must be 32-byte aligned, current physical address is "
                                 f"{t.address}.")
    if pdx.address == rfg.address and pdx.nbytes == rfg.nbytes:
        raise InvalidArgumentError(
            f"[{API}] The input Tensor (outputPdX) and (resForGamma) cannot be reused, their "
            f"start address is {pdx.address}, tensor size is {pdx.nbytes}.")
    if gamma.nbytes % 32:
        raise AlignmentError(f"[{API}] The inputGamma length is {gamma.size}, should be 32B "
                             "aligned.")
    if tmp.nbytes < tiling.stackBufferSize:
        raise InvalidArgumentError(
            f"{API}: Stack buffer size not enough. sharedTmpBuffer has {tmp.nbytes} bytes, "
            f"tiling.stackBufferSize is {tiling.stackBufferSize} (both in bytes)")
    _check_tiling(core, tiling, dtype)
    _check_extents(tiling, data)
    regbase = core.product.kernel_path == "regbase"
    _check_footprint_fits(core, tmp, tiling, dtype, reuse, regbase)
    if not regbase:
        _check_chunks(core, tiling, tmp, dtype, reuse)
    _check_aliasing(core, tensors, tiling, reuse, regbase)


def _check_tiling(core, t, dtype):
    h = t.hLength
    if h == 0:
        raise InvalidArgumentError(f"{API}: error shape for layernormgrad. (tiling.hLength is 0; "
                                   "compute the tiling with GetLayerNormGradNDTilingInfo)")
    if t.originalHLength != h:
        raise InvalidArgumentError(
            f"{API}: storage H ({h}) != original H ({t.originalHLength}): a zero-padded column "
            "enters the sums (x2 = -mean), so only equal H is supported (spec §1.4)")
    if h * dtype.itemsize % 32:
        raise AlignmentError(f"{API}: every row must start on a 32-byte boundary: H * sizeof(T) "
                             f"= {h} * {dtype.itemsize} is not a multiple of 32; pad H with zeros")
    if core.product.kernel_path == "regbase":
        return
    bsh = t.bLength * t.sLength * h
    if (t.oneCalSize == 0 or t.oneCalSize != t.nohCalSize * h
            or t.loopNum * t.oneCalSize + t.tailSize != bsh or t.tailSize != t.nohTailSize * h):
        raise InvalidArgumentError(
            f"{API}: the tiling is inconsistent (oneCalSize = nohCalSize * H, loopNum * oneCalSize"
            " + tailSize = B * S * H, tailSize = nohTailSize * H must hold); compute it with "
            "GetLayerNormGradNDTilingInfo for this product")


def _check_extents(t, data):
    rows, h = t.bLength * t.sLength, t.hLength
    needs = (rows * h,) * 4 + (rows, rows, h)
    for name, tensor, need in zip(NAMES, data, needs):
        if tensor.size < need:
            raise InvalidArgumentError(f"{API}: {name} has {tensor.size} elements, the tiling "
                                       f"({t.bLength} x {t.sLength} x {h}) needs {need}")


def _chunks(t):
    """(first element, first row, elements, rows) of each chunk of the common kernel: loopNum
    chunks of oneCalSize elements, then the tail."""
    chunks = [(k * t.oneCalSize, k * t.nohCalSize, t.oneCalSize, t.nohCalSize)
              for k in range(t.loopNum)]
    if t.tailSize:
        chunks.append((t.loopNum * t.oneCalSize, t.loopNum * t.nohCalSize, t.tailSize,
                       t.nohTailSize))
    return chunks


def _used_blocks(tiling, dtype, reuse):
    """(name, position, size) of each temp block the common kernel uses, in floats."""
    return [(name, getattr(tiling, name + "Pos"), getattr(tiling, name + "Size"))
            for name in layer_norm_grad_blocks(dtype.itemsize, reuse)]


def _check_chunks(core, t, tmp, dtype, reuse):
    """Each chunk of the common kernel starts 32-byte aligned in every tensor (its data rows do:
    H fills whole blocks; its inputVariance / inputMean rows need nohCalSize to), and each temp
    block it uses starts 32-byte aligned, holds the largest chunk and lies inside the UB, so
    that no instruction fails half-way through."""
    for _, row, _, _ in _chunks(t):
        if row * dtype.itemsize % 32:
            raise AlignmentError(
                f"{API}: the tiling makes a chunk start at inputVariance[{row}] and "
                f"inputMean[{row}], {row * dtype.itemsize} bytes in: not a whole number of "
                f"32-byte blocks (nohCalSize = {t.nohCalSize}); compute the tiling with "
                "GetLayerNormGradNDTilingInfo")
    chunk = layer_norm_grad_largest_chunk(t)
    for name, pos, size in _used_blocks(t, dtype, reuse):
        if pos % 8:
            raise AlignmentError(f"{API}: tiling.{name}Pos = {pos} floats is {4 * pos} bytes into "
                                 "sharedTmpBuffer: not a whole number of 32-byte blocks")
        if size < chunk:
            raise InvalidArgumentError(
                f"{API}: tiling.{name}Size = {size} floats, but the kernel uses {chunk} of the "
                f"block (its largest chunk); compute the tiling with GetLayerNormGradNDTilingInfo")
        if tmp.address + 4 * (pos + size) > core.ub_size:
            raise OutOfBoundsError(
                f"{API}: tiling.{name}Pos = {pos} and {name}Size = {size} put the block at UB "
                f"bytes [{tmp.address + 4 * pos}, {tmp.address + 4 * (pos + size)}), past the "
                f"end of the UB ({core.ub_size} bytes)")
    if core.product.arch != 2201 or any(rows % 8 for _, _, _, rows in _chunks(t)):
        _fetch_event_id(core, HardEvent.V_S)   # the scalar broadcast needs a free V_S event id


def _check_aliasing(core, tensors, t, reuse, regbase):
    """Outputs that share bytes with each other or with what the kernel reads after writing them
    (aliasing.check_shared_bytes): both kernels read gamma, the temp buffer, and variance and
    mean (each chunk or row again) after their first write of an output, and dy and x only
    before they write the same elements, unless isReuseSource (float): x1 and x2 then
    live in inputDy and inputX (spec §4.6; on the 950 in their first row) while the outputs are
    written."""
    pdx, rfg, dy, x, var, mean, gamma, tmp = tensors
    size, rows = dy.dtype.itemsize, t.bLength * t.sLength
    data = rows * t.hLength * size
    scratch = reuse and dy.dtype == F32
    why = ("the kernel keeps x1 / x2 in with is_reuse_source while it writes the outputs"
           if scratch else None)
    reads = [Read("inputDy", dy, data, not scratch, why), Read("inputX", x, data, not scratch, why),
             Read("inputVariance", var, rows * size), Read("inputMean", mean, rows * size),
             Read("inputGamma", gamma, t.hLength * size),
             Read("sharedTmpBuffer", tmp, _temp_touched(t, dy.dtype, reuse, regbase))]
    check_shared_bytes(core, API, [("outputPdX", pdx, data), ("resForGamma", rfg, data)], reads)


def regbase_tmp_bytes(tiling, dtype_size, reuse):
    """Bytes of temp buffer the 950 kernel uses: two fp32 rows (x1, x2), none for float with
    isReuseSource (spec §5.1)."""
    return 0 if reuse and dtype_size == 4 else 2 * 4 * (-(-tiling.hLength // 8) * 8)


def _temp_touched(tiling, dtype, reuse, regbase):
    """Bytes of sharedTmpBuffer the kernel touches with this tiling."""
    return (regbase_tmp_bytes(tiling, dtype.itemsize, reuse) if regbase
            else layer_norm_grad_tmp_bytes(tiling, dtype.itemsize, reuse))


def _check_footprint_fits(core, tmp, tiling, dtype, reuse, regbase):
    """The temp space the kernel touches lies inside the UB (before the checks of each block, so
    that a host tiling too large for the UB is told so in the host's terms)."""
    touched = _temp_touched(tiling, dtype, reuse, regbase)
    if tmp.address + touched > core.ub_size:
        raise OutOfBoundsError(
            f"{API}: with this tiling the kernel touches {touched} bytes of temp space from UB "
            f"byte {tmp.address}, past the end of the UB ({core.ub_size} bytes); the host rounds "
            "rows per chunk up to 8 (float) / 16 (half), so pass a smaller stackBufferSize")


def _check_temp_footprint(core, tmp, tiling, dtype, reuse, regbase):
    """The kernel touches what its tiling says, whatever sharedTmpBuffer's size: CANN's host
    rounds rows per chunk up to 8 (float) / 16 (half), so that can be more than the buffer (spec
    §3.5). The device would write past it: so do we (a LngbWarning says so; a HazardError in
    checked mode); _check_footprint_fits has made sure it stays inside the UB."""
    touched = _temp_touched(tiling, dtype, reuse, regbase)
    if touched > tmp.nbytes:
        message = (f"{API}: the kernel touches {touched} bytes of temp space but sharedTmpBuffer "
                   f"has {tmp.nbytes}: it writes UB bytes [{tmp.address + tmp.nbytes}, "
                   f"{tmp.address + touched}) past the buffer, as CANN's kernel does on the device "
                   "(the host rounds rows per chunk up to 8 for float, 16 for half; spec §3.5). "
                   f"Give the kernel {touched} bytes to avoid it.")
        if core.mode == "checked":
            raise HazardError(message)
        core.warn(message)


# --- A2 / A3 / 310P: the COMMON kernel (spec §4) -------------------------------------------------

@dataclass
class _Blocks:
    """The temp blocks of spec §3.4 (float views of the temp buffer, `oneCalSize` floats each)."""
    bsh: LocalTensor
    pd_var: LocalTensor
    pd_mean: LocalTensor
    x1: LocalTensor
    x2: LocalTensor
    x3: LocalTensor
    tmp: LocalTensor
    tmp1: LocalTensor
    tmp2: LocalTensor


def _block(stack, pos, size):
    """stackBuffer[pos] with SetSize(size), as CANN builds each block: bounded by the UB only
    (spec §1.5), so a block can reach past the temp buffer (§3.5)."""
    return LocalTensor(stack.core, stack.address + 4 * pos, size, F32, None, stack.position)


def _blocks(stack, t):
    return _Blocks(*(_block(stack, getattr(t, n + "Pos"), getattr(t, n + "Size"))
                     for n in LNG_BLOCKS))


def _common_path(core, t, tensors, stack, eps, reuse):
    """LayerNormGradComputeND (L482-505): full chunks of oneCalSize elements, then the tail."""
    pdx, rfg, dy, x, var, mean, gamma = tensors
    blocks = _blocks(stack, t)
    process = _compute_process_half if dy.dtype == F16 else _compute_process_float
    for off0, off1, cal, rows in _chunks(t):
        chunk = _Chunk(core, t.hLength, cal, rows, t.one_over_h, t.two_over_h, eps)
        process(chunk, blocks, pdx[off0], rfg[off0], dy[off0], x[off0], var[off1], mean[off1],
                gamma, reuse)


@dataclass
class _Chunk:
    core: object
    h: int
    cal: int        # elements
    rows: int
    inv_h: np.float32
    two_inv_h: np.float32
    eps: np.float32


def _compute_process_float(c, b, pdx, rfg, dy, x, var, mean, gamma, reuse):
    """ComputeProcess<float> (L458-480): outputPdX is `tmp`; with isReuseSource x1 and x2 live in
    inputDy and inputX."""
    x1, x2 = (dy, x) if reuse else (b.x1, b.x2)
    _x1(c, x1, dy, gamma)
    _x2(c, b, x2, x, mean)
    _pd_var_and_mean(c, b, x1, x2, pdx, var, rfg)
    PipeBarrier(PIPE_V)                                               # L475
    _pd_x(c, b, x1, x2, pdx)


def _compute_process_half(c, b, pdx, rfg, dy, x, var, mean, gamma, reuse):
    """ComputeProcess<half> (L424-456): inputs widened into tmp1/tmp2, everything in fp32 in the
    temp blocks, the two outputs narrowed at the end (RNE, under the saturation mode)."""
    Cast(b.tmp1, dy, RoundMode.CAST_NONE, c.cal)
    Cast(b.tmp2, gamma, RoundMode.CAST_NONE, c.h)
    PipeBarrier(PIPE_V)
    _x1(c, b.x1, b.tmp1, b.tmp2)
    Cast(b.tmp1, x, RoundMode.CAST_NONE, c.cal)
    Cast(b.tmp2, mean, RoundMode.CAST_NONE, c.rows)
    PipeBarrier(PIPE_V)
    _x2(c, b, b.x2, b.tmp1, b.tmp2)
    Cast(b.tmp1, var, RoundMode.CAST_NONE, c.rows)
    PipeBarrier(PIPE_V)
    _pd_var_and_mean(c, b, b.x1, b.x2, b.tmp, b.tmp1, b.tmp2)
    _pd_x(c, b, b.x1, b.x2, b.tmp)
    Cast(pdx, b.tmp, RoundMode.CAST_NONE, c.cal)
    Cast(rfg, b.tmp2, RoundMode.CAST_NONE, c.cal)
    PipeBarrier(PIPE_V)


def _x1(c, x1, dy, gamma):
    """x1 = dy * gamma, one instruction per row (L254-256)."""
    for r in range(c.rows):
        Mul(x1[r * c.h], dy[r * c.h], gamma, c.h)
    PipeBarrier(PIPE_V)


def _x2(c, b, x2, x, mean):
    """x2 = x - mean, the mean broadcast along the rows first (L265-269)."""
    _duplicate_tensor(c, b.bsh, mean)
    PipeBarrier(PIPE_V)
    Sub(x2, x, b.bsh, c.cal)
    PipeBarrier(PIPE_V)


def _pd_var_and_mean(c, b, x1, x2, tmp, var, rfg):
    """Steps 6-28 of spec §4.4: pdVar, resForGamma, x3 and pdMean."""
    n, cal = c.rows, c.cal
    Adds(tmp, var, c.eps, n)                                          # t = var + eps
    PipeBarrier(PIPE_V)
    Mul(b.bsh, tmp, tmp, n)
    PipeBarrier(PIPE_V)
    Mul(tmp, b.bsh, tmp, n)                                           # t^3
    PipeBarrier(PIPE_V)
    Sqrt(tmp, tmp, n)
    PipeBarrier(PIPE_V)
    _do_one_div(c, tmp, b.bsh, tmp)                                   # r3 = 1 / sqrt(t^3)
    _duplicate_tensor(c, b.bsh, tmp)
    PipeBarrier(PIPE_V)
    Mul(b.bsh, x2, b.bsh, cal)
    PipeBarrier(PIPE_V)
    Mul(b.bsh, x1, b.bsh, cal)
    PipeBarrier(PIPE_V)
    Muls(b.bsh, b.bsh, -0.5, cal)
    PipeBarrier(PIPE_V)
    _reduce_sum(c, b.pd_var, b.bsh)                                   # pdVar
    PipeBarrier(PIPE_V)
    Adds(tmp, var, c.eps, n)
    PipeBarrier(PIPE_V)
    Sqrt(tmp, tmp, n)
    PipeBarrier(PIPE_V)
    _do_one_div(c, tmp, b.bsh, tmp)                                   # rstd = 1 / sqrt(t)
    _duplicate_tensor(c, b.bsh, tmp)
    PipeBarrier(PIPE_V)
    Mul(rfg, x2, b.bsh, cal)                                          # resForGamma
    PipeBarrier(PIPE_V)
    Mul(b.x3, x1, b.bsh, cal)                                         # x3 = x1 * rstd
    PipeBarrier(PIPE_V)
    Muls(b.bsh, b.x3, -1.0, cal)
    PipeBarrier(PIPE_V)
    _reduce_sum(c, b.pd_mean, b.bsh)                                  # sum of -x3
    Muls(b.bsh, x2, -2.0, cal)
    PipeBarrier(PIPE_V)
    _reduce_sum(c, tmp, b.bsh)                                        # S2 = sum of -2 * x2
    PipeBarrier(PIPE_V)
    Muls(tmp, tmp, c.inv_h, n)
    PipeBarrier(PIPE_V)
    Mul(tmp, b.pd_var, tmp, n)
    PipeBarrier(PIPE_V)
    Add(b.pd_mean, b.pd_mean, tmp, n)                                 # pdMean
    PipeBarrier(PIPE_V)


def _pd_x(c, b, x1, x2, pdx):
    """Steps 30-36: pdX = ((2/H * pdVar) * x2 + pdMean / H) + x3."""
    Muls(b.pd_var, b.pd_var, c.two_inv_h, c.rows)
    PipeBarrier(PIPE_V)
    _duplicate_tensor(c, b.bsh, b.pd_var)
    PipeBarrier(PIPE_V)
    Mul(x1, b.bsh, x2, c.cal)
    PipeBarrier(PIPE_V)
    Muls(b.pd_mean, b.pd_mean, c.inv_h, c.rows)
    PipeBarrier(PIPE_V)
    _duplicate_tensor(c, b.bsh, b.pd_mean)
    Add(x1, x1, b.bsh, c.cal)
    PipeBarrier(PIPE_V)
    Add(pdx, x1, b.x3, c.cal)
    PipeBarrier(PIPE_V)


def _do_one_div(c, dst, ones, src):
    """DoOneDiv (L272-286): dst = 1 / src on `rows` elements, in counter mode, reading 1.0 from
    ones[lane % 8] (src0 strides 0). It leaves normal mode with the count still in the register."""
    SetMaskCount()
    SetVectorMask(0, 8, dtype=F32, mode=MaskMode.COUNTER)
    Duplicate(ones, 1.0, MASK_PLACEHOLDER, 1, 1, 8, is_set_mask=False)
    PipeBarrier(PIPE_V)
    SetVectorMask(0, c.rows, dtype=F32, mode=MaskMode.COUNTER)
    Div(dst, ones, src, MASK_PLACEHOLDER, 1, BinaryRepeatParams(1, 0, 1, 8, 0, 8),
        is_set_mask=False)
    PipeBarrier(PIPE_V)
    SetMaskNorm()


def _reduce_sum(c, dst, src):
    """ReduceSumImpl (L181-238): each row's sum into dst[row], by 64-lane WholeReduceSums over
    its blocks, then over the partials (in dst, used as scratch), until one value remains."""
    h = c.h
    for i in range(c.cal // h):
        m, base, s = h, i * h, src
        while m > 1:
            repeats, tail = divmod(m, ONE_REPEAT)
            full, rest = divmod(repeats, MAX_REPEAT)
            for j in range(full):
                WholeReduceSum(dst[base + MAX_REPEAT * j], s[base + MAX_REPEAT * ONE_REPEAT * j],
                               ONE_REPEAT, MAX_REPEAT, 1, 1, 8)
            PipeBarrier(PIPE_V)
            if rest:
                d = dst[i] if m == ONE_REPEAT else dst[base + MAX_REPEAT * full]
                WholeReduceSum(d, s[base + MAX_REPEAT * ONE_REPEAT * full], ONE_REPEAT, rest,
                               1, 1, 8)
                PipeBarrier(PIPE_V)
            if tail:
                d = dst[i] if m < ONE_REPEAT else dst[base + repeats]
                WholeReduceSum(d, s[base + ONE_REPEAT * repeats], tail, 1, 1, 1, 8)
                PipeBarrier(PIPE_V)
            m, s = -(-m // ONE_REPEAT), dst


def _duplicate_tensor(c, dst, src):
    """DuplicateTensor (L240-246): dst[r * H + h] = src[r] for every row r of the chunk."""
    if c.core.product.arch == 2201:
        _brcb_last_dim(c, dst, src)
    else:
        _duplicate_last_dim(c, dst, src, c.rows)
    PipeBarrier(PIPE_V)


def _brcb_last_dim(c, dst, src):
    """BrcbLastDimImpl (L130-168), arch 2201: Brcb by 8-float column blocks, 8 rows a repeat;
    the last rows % 8 by scalar reads."""
    h, n = c.h, c.rows
    full_rows, tail_rows = divmod(n, 8)
    params = BrcbRepeatParams(h // 8, h)
    calls, rest = divmod(full_rows, MAX_REPEAT)
    for col in range(h // 8):
        for j in range(calls):
            Brcb(dst[8 * col + BRCB_ROWS * h * j], src[BRCB_ROWS * j], MAX_REPEAT, params)
        if rest:
            Brcb(dst[8 * col + BRCB_ROWS * h * calls], src[BRCB_ROWS * calls], rest, params)
        PipeBarrier(PIPE_V)
    if tail_rows:
        _duplicate_last_dim(c, dst[(n - tail_rows) * h], src[n - tail_rows], tail_rows)
        PipeBarrier(PIPE_V)


def _duplicate_last_dim(c, dst, src, rows):
    """DuplicateLastDimImpl (L101-128): the vector unit's writes made visible to the scalar unit,
    then per group of 8 rows, 8 GetValues and 8 count-form Duplicates."""
    event = _fetch_event_id(c.core, HardEvent.V_S)
    SetFlag(HardEvent.V_S, event)
    WaitFlag(HardEvent.V_S, event)
    for first in range(0, rows, 8):
        values = [src.GetValue(r) for r in range(first, min(first + 8, rows))]
        for k, value in enumerate(values):
            Duplicate(dst[(first + k) * c.h], value, c.h)


def _fetch_event_id(core, event):
    """GetTPipePtr()->FetchEventID: the lowest id of `event` the kernel's TPipe has not
    allocated, without reserving it. A core with no TPipe (LayerNormGrad called on a bare
    AICore; the device needs one) takes the lowest id with no SetFlag waiting."""
    if core.tpipe is not None:
        return core.tpipe.FetchEventID(event)
    for event_id in range(core.product.event_ids):
        if not core.flags.get((event, event_id)):
            return event_id
    raise InvalidArgumentError(f"{API}: FetchEventID: every {event.name} event id is in use")


# --- Ascend 950: the register kernel (spec §5) --------------------------------------------------

_WIDEN, _NARROW = UnaryRepeatParams(srcRepStride=4), UnaryRepeatParams(dstRepStride=4)
_BINARY, _UNARY = BinaryRepeatParams(), UnaryRepeatParams()


class _Registers:
    """The vector registers of LayerNormGradVF, fp32 (and one half register for loads)."""

    NAMES = ("x1", "x2", "t", "t2", "one", "b", "pd_var", "pd_mean", "res2", "var", "mu", "g",
             "d", "xx", "out")

    def __init__(self, core):
        for k, name in enumerate(self.NAMES):
            setattr(self, name, core.vreg(k, F32))
        self.half = core.vreg(len(self.NAMES), F16)


def _regbase_path(core, t, tensors, stack, eps, reuse):
    """LayerNormGradVF (R3510 L252-293): per row, three passes over 64-lane column blocks. x1 and
    x2 go to two fp32 scratch rows (the temp buffer, or with isReuseSource the first row of inputDy
    and inputX) between the passes; pdVar, pdMean and sum(-2 * x2) accumulate lane-wise from +0.0
    and are reduced by one 64-lane tree."""
    pdx, rfg, dy, x, var, mean, gamma = tensors
    h, rows = t.hLength, t.bLength * t.sLength
    regs = _Registers(core)
    row = -(-h // 8) * 8
    x1_tmp, x2_tmp = (dy, x) if reuse else (_block(stack, 0, row), _block(stack, row, row))
    half = dy.dtype == F16
    for j in range(rows):
        base = j * h
        for acc in (regs.pd_var, regs.pd_mean, regs.res2):
            Duplicate(acc, 0.0, 64, 1, 1, 8)
        _broadcast_load(regs, regs.var, var[j], half)
        _broadcast_load(regs, regs.mu, mean[j], half)
        for col in range(0, h, 64):                                   # ComputePdVar
            lanes = min(64, h - col)
            g = _load(regs.g, gamma[col], lanes, half)
            d = _load(regs.d, dy[base + col], lanes, half)
            xx = _load(regs.xx, x[base + col], lanes, half)
            Mul(regs.x1, d, g, lanes, 1, _BINARY)
            Sub(regs.x2, xx, regs.mu, lanes, 1, _BINARY)
            _one_over_root(regs, eps, cube=True)                      # lane 0 = r3
            DuplicateLane(regs.b, regs.t)
            Mul(regs.b, regs.x2, regs.b, lanes, 1, _BINARY)
            Mul(regs.b, regs.x1, regs.b, lanes, 1, _BINARY)
            Muls(regs.b, regs.b, -0.5, lanes, 1, _UNARY)
            Add(regs.pd_var, regs.pd_var, regs.b, lanes, 1, _BINARY)
            DataCopy(x1_tmp[col], regs.x1, lanes)
            DataCopy(x2_tmp[col], regs.x2, lanes)
        WholeReduceSum(regs.pd_var, regs.pd_var, min(h, 64), 1, 1, 1, 8)
        for col in range(0, h, 64):                                   # ComputePdMean
            lanes = min(64, h - col)
            _one_over_root(regs, eps, cube=False)                     # lane 0 = rstd
            DuplicateLane(regs.b, regs.t)
            Mul(regs.out, x2_tmp[col], regs.b, lanes, 1, _BINARY)    # resForGamma
            Mul(regs.x1, x1_tmp[col], regs.b, lanes, 1, _BINARY)     # x3
            DataCopy(x1_tmp[col], regs.x1, lanes)
            Muls(regs.b, regs.x1, -1.0, lanes, 1, _UNARY)
            Add(regs.pd_mean, regs.pd_mean, regs.b, lanes, 1, _BINARY)
            Muls(regs.b, x2_tmp[col], -2.0, lanes, 1, _UNARY)
            Add(regs.res2, regs.res2, regs.b, lanes, 1, _BINARY)
            _store(rfg[base + col], regs.out, lanes, half)
        WholeReduceSum(regs.pd_mean, regs.pd_mean, min(h, 64), 1, 1, 1, 8)
        WholeReduceSum(regs.res2, regs.res2, min(h, 64), 1, 1, 1, 8)
        Muls(regs.res2, regs.res2, t.one_over_h, 1, 1, _UNARY)
        Mul(regs.res2, regs.pd_var, regs.res2, 1, 1, _BINARY)
        Add(regs.pd_mean, regs.pd_mean, regs.res2, 1, 1, _BINARY)
        Muls(regs.pd_var, regs.pd_var, t.two_over_h, 1, 1, _UNARY)   # ComputePdX
        Muls(regs.pd_mean, regs.pd_mean, t.one_over_h, 1, 1, _UNARY)
        for col in range(0, h, 64):
            lanes = min(64, h - col)
            DuplicateLane(regs.b, regs.pd_var)
            Mul(regs.x2, regs.b, x2_tmp[col], lanes, 1, _BINARY)
            DuplicateLane(regs.b, regs.pd_mean)
            Add(regs.x2, regs.x2, regs.b, lanes, 1, _BINARY)
            Add(regs.out, regs.x2, x1_tmp[col], lanes, 1, _BINARY)
            _store(pdx[base + col], regs.out, lanes, half)


def _one_over_root(regs, eps, cube):
    """Lane 0 of regs.t = 1 / sqrt(t^3) (cube) or 1 / sqrt(t), t = var + eps (pregOne ops)."""
    Adds(regs.t, regs.var, eps, 1, 1, _UNARY)
    if cube:
        Mul(regs.t2, regs.t, regs.t, 1, 1, _BINARY)
        Mul(regs.t, regs.t2, regs.t, 1, 1, _BINARY)
    Sqrt(regs.t, regs.t, 1, 1, _UNARY)
    Duplicate(regs.one, 1.0, 1, 1, 1, 8)
    Div(regs.t, regs.one, regs.t, 1, 1, _BINARY)


def _broadcast_load(regs, dst, element, half):
    """LoadAlign<DIST_BRC_B32> (float) or <DIST_BRC_B16> + Cast (half) of one UB element."""
    if half:
        DuplicateLane(regs.half, element)
        Cast(dst, regs.half, RoundMode.CAST_NONE, 64, 1, _WIDEN)
    else:
        DuplicateLane(dst, element)


def _load(reg, src, lanes, half):
    """A float operand read in place; a half one widened into `reg` (LoadAlign UNPACK + Cast)."""
    if not half:
        return src
    Cast(reg, src, RoundMode.CAST_NONE, lanes, 1, _WIDEN)
    return reg


def _store(dst, reg, lanes, half):
    """StoreAlign of the active lanes; half outputs go through Cast CAST_RINT, NO_SAT (spec
    §5.2: overflow is inf whatever the saturation mode)."""
    if half:
        Cast(dst, reg, RoundMode.CAST_RINT, lanes, 1, _NARROW, sat_mode=False)
    else:
        DataCopy(dst, reg, lanes)
