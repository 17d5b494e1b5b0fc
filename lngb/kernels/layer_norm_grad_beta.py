"""LayerNormGradBeta, written like the CANN source it emulates (spec layernorm_grad_beta.md §3-5).

A2/A3/310P run `_common_path` (counter mode, chunk loop, per-row Add accumulation, the half
path's casts); the Ascend 950 runs `_regbase_path` (64-lane column blocks in vector registers).
All checks happen before the first instruction, so a rejected call changes no byte.
"""

import numpy as np

from ..arguments import check_choice
from ..errors import AlignmentError, InvalidArgumentError, LngbError, check_flag
from ..tensor import LocalTensor
from ..vector_ops import (MASK_PLACEHOLDER, PIPE_V, Add, Adds, BinaryRepeatParams, Cast, DataCopy,
                          Duplicate, MaskMode, Mul, PipeBarrier, ResetMask, RoundMode,
                          SetMaskCount, SetMaskNorm, SetVectorMask, UnaryRepeatParams)
from ..runtime.recording import runs_live
from ..vector_ops.events import issue_event
from .aliasing import Read, check_shared_bytes
from .tiling import GetLayerNormGradBetaNDTilingInfo, LayerNormGradBetaTiling

API = "LayerNormGradBeta"
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
REUSE_BUFFERS = ("input_dy", "res_for_gamma")
API_POSITIONS = ("VECIN", "VECOUT", "VECCALC", "LCM")


def LayerNormGradBeta(outputPdGamma, outputPdBeta, resForGamma, inputDy, *args,
                      is_reuse_source=False, reuse_buffer="input_dy"):
    """LayerNormGradBeta(outG, outB, resForGamma, inputDy, sharedTmpBuffer, tiling) or
    LayerNormGradBeta(outG, outB, resForGamma, inputDy, tiling) (temp = all UB not yet allocated).

    With is_reuse_source (float only) the products are written into inputDy by default, or,
    with reuse_buffer="res_for_gamma", to the start of resForGamma exactly as CANN's kernel does.
    """
    if len(args) == 2:
        shared_tmp, tiling = args
    elif len(args) == 1:
        shared_tmp, tiling = None, args[0]
    else:
        raise TypeError(f"{API} takes (outG, outB, resForGamma, inputDy[, sharedTmpBuffer], tiling)")
    if not isinstance(inputDy, LocalTensor):
        raise InvalidArgumentError(f"{API}: inputDy must be a LocalTensor")
    core = inputDy.core
    if shared_tmp is None:  # the framework-allocated overload: CANN's PopStackBuffer
        shared_tmp = core.pop_stack_buffer(np.uint8, "LCM")
    tensors = (("outputPdGamma", outputPdGamma), ("outputPdBeta", outputPdBeta),
               ("resForGamma", resForGamma), ("inputDy", inputDy),
               ("sharedTmpBuffer", shared_tmp))
    for name, t in tensors:
        if not isinstance(t, LocalTensor) or t.core is not core:
            raise InvalidArgumentError(f"{API}: {name} must be a LocalTensor on inputDy's core")
    tiling = LayerNormGradBetaTiling.checked(API, tiling)
    is_reuse_source = check_flag(API, "is_reuse_source", is_reuse_source)
    reuse_buffer = check_choice(API, "reuse_buffer", reuse_buffer, REUSE_BUFFERS)

    def kernel():
        dtype = inputDy.dtype
        reuse = reuse_buffer if (is_reuse_source and dtype == F32) else None
        _check(core, tensors, tiling, reuse)
        if is_reuse_source and (dtype == F16 or core.product.kernel_path == "regbase"):
            why = "half inputs ignore it" if dtype == F16 else "the Ascend 950 kernel ignores it"
            core.warn(f"{API}: The parameter of isReuseSource is true, may not be effective "
                      f"({why}).")
        path = _regbase_path if core.product.kernel_path == "regbase" else _common_path
        path(outputPdGamma, outputPdBeta, resForGamma, inputDy,
             shared_tmp.ReinterpretCast(np.float32), tiling, reuse)
        if reuse:
            # isReuseSource leaves inputDy (as documented) and resForGamma[0:oneCalSize] (what
            # CANN's kernel clobbers) undefined: the sanitizer catches later reads of either.
            for tensor, n in ((inputDy, inputDy.size), (resForGamma, tiling.oneCalSize)):
                issue_event(core, "Undefine", tensor.address, min(n, tensor.size) * 4)

    key = (API, tuple(t for _, t in tensors), tiling, is_reuse_source, reuse_buffer)
    with core:
        core.run_recorded(key, kernel, dry_run_first=runs_live(core) and _unusual(core, tensors,
                                                                                  tiling))


def _unusual(core, tensors, tiling):
    """Tensors that share bytes, or (A2/A3/310P) temp positions not the host tiling's, may make
    an instruction reject its operands (a partial overlap) half-way through a live run: only a
    dry run of the kernel can tell. (The 950's kernel writes the UB only from registers.)"""
    spans = sorted((t.address, t.address + t.nbytes) for _, t in tensors)
    if any(start < end for (_, end), (start, _) in zip(spans, spans[1:])):
        return True
    return (core.product.kernel_path == "common"
            and _not_cann_tiling(tiling, tensors[3][1].dtype) is not None)


# --- checks (spec §4: the CPU-debug checks, plus everything an instruction would reject later) ---

def _check(core, tensors, tiling, reuse):
    """The CPU-debug checks of CANN, and that every tensor holds what the tiling makes the kernel
    touch (`reuse`: where float products go with isReuseSource, else None); the instructions'
    own checks run in the same dry run."""
    for name, t in tensors:
        if t.position not in API_POSITIONS:
            raise InvalidArgumentError(
                f"[{API}] Failed to check tensor position of {name}: {t.position} (supported: "
                "VECIN/VECOUT/VECCALC; LCM is VECCALC)")
        if not 0 < t.nbytes < core.ub_size:
            raise InvalidArgumentError(f"[{API}] Failed to check tensor size of {name}: "
                                       f"{t.nbytes} bytes")
        if t.address % 32:
            raise AlignmentError(f"[{API}] {name} address must be 32-byte aligned, it is "
                                 f"{t.address}")
    (_, out_g), (_, out_b), (_, rfg), (_, dy), (_, tmp) = tensors
    dtype = dy.dtype
    if dtype not in (F16, F32) or any(t.dtype != dtype for t in (out_g, out_b, rfg)):
        raise InvalidArgumentError(
            f"[{API}] template parameter (T) is not half or float, or the four data tensors "
            f"differ: {', '.join(f'{n}={t.dtype.name}' for n, t in tensors[:4])}")
    if tmp.dtype != np.uint8:
        raise InvalidArgumentError(f"{API}: sharedTmpBuffer must be a uint8 LocalTensor "
                                   "(use .ReinterpretCast(np.uint8))")
    if out_g.address == out_b.address and out_g.size == out_b.size:
        raise InvalidArgumentError(f"[{API}] The input Tensor (outputPdGamma) and (outputPdBeta) "
                                   "cannot be reused")
    for name, t in tensors[:2]:
        if t.nbytes % 32:
            raise AlignmentError(f"[{API}] The {name} length is {t.size}, should be 32B aligned.")
    if tiling.oneCalSize == 0:
        raise InvalidArgumentError(f"{API}: tiling.oneCalSize must > 0! (compute the tiling with "
                                   "GetLayerNormGradBetaNDTilingInfo)")
    if tmp.size // 4 < tiling.stackBufferSize:
        raise InvalidArgumentError(
            f"{API}: stackBuffer.GetSize is ({tmp.size // 4}) >= tiling.stackBufferSize is "
            f"({tiling.stackBufferSize}) does not hold: the temp buffer has {tmp.size} bytes, the "
            f"tiling was computed for {4 * tiling.stackBufferSize}")
    h = tiling.hLength
    if h == 0:
        raise InvalidArgumentError(f"{API}: tiling.hLength is 0; compute the tiling with "
                                   "GetLayerNormGradBetaNDTilingInfo")
    if tiling.originalHLength != h:
        raise InvalidArgumentError(f"{API}: storage H ({h}) != original H "
                                   f"({tiling.originalHLength}); only equal H is supported")
    if h * dtype.itemsize % 32:
        raise AlignmentError(f"{API}: The value of hLength * sizeof(T) must be an integer "
                             f"multiple of 32 (H={h}, sizeof(T)={dtype.itemsize})")
    _check_extents(tiling, out_g, out_b, rfg, dy, tmp, dtype)
    _check_aliasing(core, tensors, tiling)
    if core.product.kernel_path == "common":
        _warn_if_not_cann_tiling(core, tiling, dtype)
    _check_chunks(core, tiling, tensors, reuse)


def _check_aliasing(core, tensors, tiling):
    """Outputs that share bytes with the other output, or with a buffer the kernel reads after
    its first write of that output (aliasing.check_shared_bytes). The kernel reads inputDy and
    its temp buffer after the first write of each output; it reads resForGamma after one only
    when it has more than one chunk (common path) or column block (the 950)."""
    (_, out_g), (_, out_b), (_, rfg), (_, dy), (_, tmp) = tensors
    t, size = tiling, dy.dtype.itemsize
    regbase = core.product.kernel_path == "regbase"
    several = (t.hLength > 64 if regbase
               else t.loopRound + (t.inputTailSize > 0) > 1)
    reads = [Read("inputDy", dy, t.bshLength * size)]
    if several:
        reads.append(Read("resForGamma", rfg, t.bshLength * size))
    if not regbase:
        reads.append(Read("sharedTmpBuffer", tmp, 4 * t.stackBufferSize))
    check_shared_bytes(core, API, [("outputPdGamma", out_g, t.hLength * size),
                                   ("outputPdBeta", out_b, t.hLength * size)], reads)


def _warn_if_not_cann_tiling(core, tiling, dtype):
    """The kernel uses the fields as given, as on the device; say so when they are not what the
    host tiling computes for this shape, type and buffer."""
    t, reason = tiling, _not_cann_tiling(tiling, dtype)
    if reason:
        core.warn(f"{API}: the tiling is not what GetLayerNormGradBetaNDTilingInfo computes for "
                  f"{[t.bLength, t.sLength, t.hLength, t.originalHLength]}, typeSize "
                  f"{dtype.itemsize}, {4 * t.stackBufferSize} bytes: {reason}. The kernel uses it "
                  "as given.")


def _not_cann_tiling(tiling, dtype):
    """How the tiling differs from what the host computes for its shape and buffer (None: it
    does not)."""
    t = tiling
    shape = (t.bLength, t.sLength, t.hLength, t.originalHLength)
    try:
        expected = GetLayerNormGradBetaNDTilingInfo(shape, 4 * t.stackBufferSize, dtype.itemsize,
                                                    False)
    except LngbError as err:
        return str(err)
    wrong = [f"{f}={getattr(t, f)} (expected {getattr(expected, f)})"
             for f in t.__dataclass_fields__ if getattr(t, f) != getattr(expected, f)]
    return ", ".join(wrong) or None


def _check_extents(tiling, out_g, out_b, rfg, dy, tmp, dtype):
    """Every tensor holds what the tiling makes the kernel touch."""
    t = tiling
    if (t.loopRound * t.oneCalSize + t.inputTailSize != t.bshLength or t.oneCalSize % t.hLength
            or t.bshLength != t.bLength * t.sLength * t.hLength):
        raise InvalidArgumentError(f"{API}: the tiling is inconsistent (loopRound * oneCalSize + "
                                   "inputTailSize != bshLength); compute it with "
                                   "GetLayerNormGradBetaNDTilingInfo")
    for name, tensor, need in (("outputPdGamma", out_g, t.hLength),
                               ("outputPdBeta", out_b, t.hLength),
                               ("resForGamma", rfg, t.bshLength), ("inputDy", dy, t.bshLength)):
        if tensor.size < need:
            raise InvalidArgumentError(f"{API}: {name} has {tensor.size} elements, the tiling "
                                       f"needs {need}")
    if dtype == F16:
        need = t.resForGammaTmpTensorPos + t.oneCalSize
    else:
        need = t.oneCalSize
    if need > t.stackBufferSize:
        raise InvalidArgumentError(f"{API}: tiling positions need {need} floats of temp buffer "
                                   f"but stackBufferSize is {t.stackBufferSize}")


def _check_chunks(core, tiling, tensors, reuse):
    """Each chunk of the kernel (the 950: each row) starts 32-byte aligned and touches elements
    inside its tensors and temp positions, so that no instruction fails half-way through."""
    t, touched = tiling, []   # (tensor, first element, elements); the temp buffer in floats
    h = t.hLength
    regbase = core.product.kernel_path == "regbase"
    if regbase:
        touched += [("resForGamma", 0, t.bsLength * h), ("inputDy", 0, t.bsLength * h)]
    for off, n, rows, clear in () if regbase else _chunks(t):
        span = max(n, (max(rows, 1) if clear else rows) * h)   # Mul's n, then the row sums
        if tensors[3][1].dtype == F16:
            touched += [("inputDy", off, n), ("resForGamma", off, n),
                        ("sharedTmpBuffer", t.inputDyTmpTensorPos, span),
                        ("sharedTmpBuffer", t.resForGammaTmpTensorPos, span),
                        ("sharedTmpBuffer", t.gammaTempTensorPos, h),
                        ("sharedTmpBuffer", t.betaTempTensorPos, h)]
        else:
            touched += [("inputDy", off, span), ("resForGamma", off, n),
                        {None: ("sharedTmpBuffer", t.resForGammaTmpTensorPos, span),
                         "res_for_gamma": ("resForGamma", 0, span),
                         "input_dy": ("inputDy", off, span)}[reuse]]
    sizes = {name: (t.size // 4 if name == "sharedTmpBuffer" else t.size) for name, t in tensors}
    itemsize = {name: (4 if name == "sharedTmpBuffer" else t.dtype.itemsize) for name, t in tensors}
    for name, first, count in touched:
        if first * itemsize[name] % 32:
            raise AlignmentError(f"{API}: the tiling makes the kernel start at {name}[{first}], "
                                 f"{first * itemsize[name]} bytes in: not a whole number of "
                                 "32-byte blocks")
        if first + max(count, 1) > sizes[name]:
            unit = "floats" if name == "sharedTmpBuffer" else "elements"
            raise InvalidArgumentError(
                f"{API}: the tiling makes the kernel touch {name}[{first}:{first + count}] but "
                f"{name} holds {sizes[name]} {unit}; compute the tiling with "
                "GetLayerNormGradBetaNDTilingInfo for these tensors")


def _chunks(t):
    """(first element, elements, rows, clears the outputs) of the chunks of the common kernel
    whose extents bound every chunk's: the first and the last full chunk, and the tail."""
    full = [(k * t.oneCalSize, t.bshCurLength, t.bsCurLength, k == 0)
            for k in sorted({0, t.loopRound - 1}) if t.loopRound]
    tail = [(t.inputTailPos, t.inputTailSize, t.bsTailSize, not t.loopRound)]
    return full + (tail if t.inputTailSize > 0 else [])


# --- A2 / A3 / 310P: the common kernel (spec §3) ------------------------------------------------

def _common_path(out_g, out_b, rfg, dy, stack, tiling, reuse):
    t = tiling
    SetMaskCount()
    offsets = [k * t.oneCalSize for k in range(t.loopRound)]
    chunks = [(off, t.bshCurLength, t.bsCurLength) for off in offsets]
    if t.inputTailSize > 0:
        chunks.append((t.inputTailPos, t.inputTailSize, t.bsTailSize))
    for k, (off, n, rows) in enumerate(chunks):
        chunk = (rfg[off], dy[off], n, rows, t.originalHLength, k == 0)
        if dy.dtype == F16:
            _compute_process_half(out_g, out_b, stack, t, *chunk)
        else:
            product = {None: stack[t.resForGammaTmpTensorPos], "res_for_gamma": rfg,
                       "input_dy": chunk[1]}[reuse]
            _compute_process(out_g, out_b, product, *chunk, beta_first=reuse == "input_dy")
    SetMaskNorm()
    ResetMask()


def _compute_process(out_g, out_b, product, rfg, dy, n, rows, h, clear, beta_first=False):
    """One chunk in float: products, then the row loops of pdGamma and pdBeta."""
    if beta_first:  # products overwrite inputDy, so pdBeta sums dy first
        _reduce_sum_first_n(out_b, dy, rows, h, clear)
    SetVectorMask(0, n, dtype=np.float32, mode=MaskMode.COUNTER)
    Mul(product, dy, rfg, MASK_PLACEHOLDER, 1, BinaryRepeatParams(), is_set_mask=False)
    PipeBarrier(PIPE_V)
    _reduce_sum_first_n(out_g, product, rows, h, clear)
    if not beta_first:
        _reduce_sum_first_n(out_b, dy, rows, h, clear)


def _reduce_sum_first_n(dst, src, rows, h, clear):
    """dst = row_0 + 0, then dst = row_r + dst for each later row (CANN's ReduceSumFirstN)."""
    SetVectorMask(0, h, dtype=np.float32, mode=MaskMode.COUNTER)
    start = 0
    if clear:
        Adds(dst, src, 0.0, MASK_PLACEHOLDER, 1, UnaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)
        start = 1
    for r in range(start, rows):
        Add(dst, src[r * h], dst, MASK_PLACEHOLDER, 1, BinaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)


def _compute_process_half(out_g, out_b, stack, t, rfg, dy, n, rows, h, clear):
    """Widen the chunk to fp32, run the float process on fp32 accumulators, narrow the outputs."""
    gamma_acc, beta_acc = stack[t.gammaTempTensorPos], stack[t.betaTempTensorPos]
    dy_f32, rfg_f32 = stack[t.inputDyTmpTensorPos], stack[t.resForGammaTmpTensorPos]
    SetVectorMask(0, n, dtype=np.float16, mode=MaskMode.COUNTER)
    widen = UnaryRepeatParams(srcRepStride=4)
    Cast(dy_f32, dy, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, widen, is_set_mask=False)
    PipeBarrier(PIPE_V)
    Cast(rfg_f32, rfg, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, widen, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _compute_process(gamma_acc, beta_acc, rfg_f32, rfg_f32, dy_f32, n, rows, h, clear)
    SetVectorMask(0, h, dtype=np.float32, mode=MaskMode.COUNTER)
    narrow = UnaryRepeatParams(dstRepStride=4)
    Cast(out_g, gamma_acc, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, narrow, is_set_mask=False)
    PipeBarrier(PIPE_V)
    Cast(out_b, beta_acc, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, narrow, is_set_mask=False)
    PipeBarrier(PIPE_V)


# --- Ascend 950: the register-based kernel (spec §5) -------------------------------------------

def _regbase_path(out_g, out_b, rfg, dy, stack, tiling, reuse):
    """64-lane column blocks in vector registers; accumulators start at +0.0. The temp buffer,
    isReuseSource and the global mask register are not used by this kernel (instructions on
    vector registers take their masks as MaskRegs)."""
    core = dy.core
    h, rows = tiling.hLength, tiling.bsLength
    acc_g, acc_b, prod = (core.vreg(i, np.float32) for i in range(3))
    dy_r, rfg_r = core.vreg(3, np.float32), core.vreg(4, np.float32)
    for col in range(0, h, 64):
        lanes = min(64, h - col)
        Duplicate(acc_g, 0.0, lanes, 1, 1, 8)
        Duplicate(acc_b, 0.0, lanes, 1, 1, 8)
        for j in range(rows):
            x, g = dy[j * h + col], rfg[j * h + col]
            if dy.dtype == F16:
                widen = UnaryRepeatParams(srcRepStride=4)
                Cast(dy_r, x, RoundMode.CAST_NONE, lanes, 1, widen)
                Cast(rfg_r, g, RoundMode.CAST_NONE, lanes, 1, widen)
                x, g = dy_r, rfg_r
            Mul(prod, x, g, lanes, 1, BinaryRepeatParams())
            Add(acc_g, acc_g, prod, lanes, 1, BinaryRepeatParams())
            Add(acc_b, acc_b, x, lanes, 1, BinaryRepeatParams())
        if dy.dtype == F16:  # CAST_RINT with SatMode::SAT, whatever the core's mode
            narrow = UnaryRepeatParams(dstRepStride=4)
            Cast(out_g[col], acc_g, RoundMode.CAST_RINT, lanes, 1, narrow, sat_mode=True)
            Cast(out_b[col], acc_b, RoundMode.CAST_RINT, lanes, 1, narrow, sat_mode=True)
        else:
            DataCopy(out_g[col], acc_g, lanes)
            DataCopy(out_b[col], acc_b, lanes)
