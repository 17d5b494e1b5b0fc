"""LayerNorm, the forward's [B, S, H] form, written like the CANN source it emulates (spec
layernorm.md §4-5).

A2/A3/310P run `_common_path` (COMMON + BASIC: a chunk loop of counter-mode instructions over
three temp blocks, the row sums by a fold and WholeReduceSum, the row broadcasts by SetCmpMask
and Select); the Ascend 950 runs `_regbase_path` (R950: each row in 64-lane blocks of vector
registers). The 950 path is in lngb's representation of register code (ordinary instructions on
vector registers, spec regbase.md): the zeroing of inactive lanes its kernel relies on (§5.3) is
an explicit Duplicate of 0 before each tail block. Checks happen before the first instruction.
"""
import numpy as np

from ..errors import AlignmentError, InvalidArgumentError, check_flag
from ..tensor import LocalTensor
from ..vector_ops import (MASK_PLACEHOLDER, PIPE_V, Add, Adds, BinaryRepeatParams, Cast, DataCopy,
                          Div, Duplicate, DuplicateLane, MaskMode, Mul, Muls, PipeBarrier,
                          ResetMask, RoundMode, Select, SetCmpMask, SetMaskCount, SetMaskNorm,
                          SetVectorMask, Sqrt, Sub, UnaryRepeatParams, WholeReduceSum)
from .layer_norm_grad import epsilon_value
from .layer_norm_tiling import LayerNormSeparateTiling, LayerNormTiling

API = "LayerNorm"
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
API_POSITIONS = ("VECIN", "VECOUT", "VECCALC", "LCM")
NAMES = ("output", "outputMean", "outputVariance", "inputX", "gamma", "beta", "sharedTmpBuffer")
# CANN's "cannot be reused" groups (CHK-C L66-106), by index into NAMES
UNSHARED = ((0, 1, 2, 4, 6), (0, 1, 2, 5, 6), (1, 2, 3, 6))
ONE_REPEAT, MAX_REPEAT = 64, 255
_BINARY, _UNARY = BinaryRepeatParams(), UnaryRepeatParams()
_WIDEN, _NARROW = UnaryRepeatParams(srcRepStride=4), UnaryRepeatParams(dstRepStride=4)


def LayerNorm(output, outputMean, outputVariance, inputX, gamma, beta, *args,
              is_reuse_source=False):
    """LayerNorm(output, outputMean, outputVariance, inputX, gamma, beta, sharedTmpBuffer,
    epsilon, tiling), or the same without sharedTmpBuffer (the temp buffer is then all UB not
    yet allocated, as PopStackBuffer).

    Shapes: output, inputX [B, S, H]; outputMean, outputVariance [B, S]; gamma, beta [H]; one
    dtype, half or float. `tiling`: GetLayerNormNDTilingInfo's LayerNormTiling; on A2/A3/310P
    the kernel writes the tail's lengths into it (bshCurLength, bsCurLength), as CANN's does."""
    if not isinstance(inputX, LocalTensor):
        raise InvalidArgumentError(f"{API}: inputX must be a LocalTensor")
    core = inputX.core
    if len(args) not in (2, 3):
        raise TypeError(f"{API} takes (output, outputMean, outputVariance, inputX, gamma, beta"
                        "[, sharedTmpBuffer], epsilon, tiling)")
    shared_tmp, (epsilon, tiling) = (args[0], args[1:]) if len(args) == 3 else (None, args)
    if isinstance(tiling, LayerNormSeparateTiling):
        raise InvalidArgumentError(
            f"{API}: the [A, R] form (a LayerNormSeparateTiling) has its host side only so far; "
            "its kernels are not built (spec layernorm.md §6)")
    if shared_tmp is None:
        shared_tmp = core.pop_stack_buffer(np.uint8, "LCM")
    elif not isinstance(shared_tmp, LocalTensor):
        raise InvalidArgumentError(f"{API}: sharedTmpBuffer must be a LocalTensor (leave it out "
                                   f"for the framework's buffer), got {type(shared_tmp).__name__}")
    tensors = (output, outputMean, outputVariance, inputX, gamma, beta, shared_tmp)
    for name, t in zip(NAMES, tensors):
        if not isinstance(t, LocalTensor) or t.core is not core:
            raise InvalidArgumentError(f"{API}: {name} must be a LocalTensor on inputX's core")
    dtype = inputX.dtype
    if dtype not in (F16, F32) or any(t.dtype != dtype for t in tensors[:6]):
        raise InvalidArgumentError(
            f"{API}: output, outputMean, outputVariance, inputX, gamma and beta must share one "
            f"dtype, half or float; got {', '.join(t.dtype.name for t in tensors[:6])}")
    tiling = LayerNormTiling.checked(API, tiling)
    reuse = check_flag(API, "is_reuse_source", is_reuse_source)
    eps = epsilon_value(epsilon, dtype, API)
    regbase = core.product.kernel_path == "regbase"
    _check(core, tensors, tiling, dtype, reuse, regbase)
    if reuse and dtype == F16 and not regbase:
        core.warn(f"[{API}] The parameter of isReuseSource is true, may not be effective.")
    reuse = reuse and dtype == F32 and not regbase

    def kernel():
        if regbase:
            _regbase_path(core, tiling, tensors[:6], eps)
        else:
            _common_path(core, tiling, tensors, shared_tmp.ReinterpretCast(F32), eps, reuse)

    key = (API, tensors, tiling.to_bytes(), int(eps.view(np.uint32)), reuse)
    with core:
        core.run_recorded(key, kernel)
    write_tail_lengths(tiling, core.product)


def write_tail_lengths(tiling, product):
    """What LayerNormND leaves in the caller's struct on A2/A3/310P: the tail's lengths (COMMON
    L161-163); the 950 writes nothing."""
    if tiling.inputTailSize > 0 and product.kernel_path != "regbase":
        tiling.bshCurLength, tiling.bsCurLength = tiling.inputTailSize, tiling.meanVarTailSize


# --- checks (spec §4.7, §10.1) -----------------------------------------------------------------

def _check(core, tensors, t, dtype, reuse, regbase):
    rows, h = t.bLength * t.sLength, t.hLength
    for name, x in zip(NAMES, tensors):
        if x.position not in API_POSITIONS:
            raise InvalidArgumentError(
                f"[{API}] Failed to check tensor position of {name}, current api support "
                f"positions are UB(VECIN/VECOUT/VECCALC), current position is {x.position}.")
        if x.address % 32:
            raise AlignmentError(f"[{API}] Failed to check {name} physical address, address "
                                 f"must be 32-byte aligned, current physical address is "
                                 f"{x.address}.")
    for group in UNSHARED:
        spans = [(tensors[i].address, tensors[i].nbytes) for i in group]
        for k, i in enumerate(group):
            if spans[k] in spans[k + 1:]:
                j = group[k + 1 + spans[k + 1:].index(spans[k])]
                raise InvalidArgumentError(
                    f"[{API}] The input Tensor ({NAMES[i]}) and ({NAMES[j]}) cannot be reused, "
                    f"their start address is {spans[k][0]}, tensor size is {spans[k][1]}.")
    for name in ("gamma", "beta"):
        if tensors[NAMES.index(name)].nbytes % 32:
            raise AlignmentError(f"[{API}] The {name} length is {tensors[NAMES.index(name)].size},"
                                 " should be 32B aligned.")
    if h != t.originalHLength:
        raise InvalidArgumentError(f"{API}: the storage H ({h}) must equal the original H "
                                   f"({t.originalHLength}): lngb's LayerNorm has no padded rows")
    if rows == 0 or h == 0 or h * dtype.itemsize % 32:
        raise InvalidArgumentError(f"{API}: the tiling's [B, S, H] = [{t.bLength}, {t.sLength}, "
                                   f"{h}] needs rows of whole 32-byte blocks")
    needs = (rows * h, rows, rows, rows * h, h, h)
    for name, x, n in zip(NAMES, tensors, needs):
        if x.size < n:
            raise InvalidArgumentError(f"{API}: {name} holds {x.size} elements; the tiling's "
                                       f"[{t.bLength}, {t.sLength}, {h}] needs {n}")
    if regbase:
        return
    if t.oneTmpSize == 0:
        raise InvalidArgumentError(f"[{API}] tiling.oneTmpSize must > 0!")
    last = t.secondTmpStartPos if reuse and dtype == F32 else t.thirdTmpStartPos
    if last + t.oneTmpSize > t.tmpBufSize:
        raise InvalidArgumentError(f"[{API}] {'second' if reuse else 'third'}TmpStartPos + "
                                   f"oneTmpSize is ({last + t.oneTmpSize}) should <= tmpBufSize "
                                   f"is ({t.tmpBufSize})")
    floats = tensors[6].nbytes // 4
    if floats == 0 or floats < t.tmpBufSize:
        raise InvalidArgumentError(f"[{API}] stackBuffer.GetSize is ({floats}) should >= "
                                   f"tiling.tmpBufSize is ({t.tmpBufSize})")
    if t.bshCurLength > t.oneTmpSize or t.bshCurLength != t.bsCurLength * h:
        raise InvalidArgumentError(f"{API}: the tiling's chunk ({t.bsCurLength} rows, "
                                   f"{t.bshCurLength} elements) does not fit its temp blocks of "
                                   f"{t.oneTmpSize} floats")


# --- A2/A3/310P (COMMON + BASIC) -------------------------------------------------------------

def _common_path(core, t, tensors, stack, eps, reuse):
    """LayerNormImpl: the scratch blocks picked once (GetLayerNormNDTensorInfo), counter mode,
    the chunks of LayerNormND, then normal mode and a full mask."""
    output, mean, variance, x, gamma, beta, _ = tensors
    half = x.dtype == F16
    if reuse:
        a, b, c = x.ReinterpretCast(F32), stack[t.firstTmpStartPos], stack[t.secondTmpStartPos]
    else:
        a, b, c = (stack[p] for p in (t.firstTmpStartPos, t.secondTmpStartPos,
                                      t.thirdTmpStartPos))
    mean_tmp, var_tmp = ((stack[t.meanTmpTensorPos], stack[t.varianceTmpTensorPos]) if half
                         else (mean, variance))
    SetMaskCount()
    chunks = [(k * t.inputRoundSize, k * t.meanVarRoundSize, t.bshCurLength, t.bsCurLength)
              for k in range(t.loopRound)]
    if t.inputTailSize > 0:
        chunks.append((t.inputTailPos, t.meanVarTailPos, t.inputTailSize, t.meanVarTailSize))
    for at, mv, count, rows in chunks:
        _chunk(t, (a, b, c), x[at], output[at], mean_tmp[mv], var_tmp[mv], gamma, beta, eps,
               count, rows)
    if half:   # GetOutputMeanVariance
        SetVectorMask(0, t.meanVarSize, dtype=np.uint8, mode=MaskMode.COUNTER)
        Cast(mean, mean_tmp, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _NARROW, is_set_mask=False)
        PipeBarrier(PIPE_V)
        Cast(variance, var_tmp, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _NARROW,
             is_set_mask=False)
        PipeBarrier(PIPE_V)
    SetMaskNorm()
    ResetMask()


def _count(n):
    SetVectorMask(0, n, dtype=np.uint8, mode=MaskMode.COUNTER)


def _chunk(t, blocks, x, output, mean, variance, gamma, beta, eps, count, rows):
    """LayerNormExe on one chunk of `rows` rows (`count` elements)."""
    a, b, c = blocks
    h = t.hLength
    if x.dtype == F16:
        _count(count)
        Cast(a, x, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _WIDEN, is_set_mask=False)
        PipeBarrier(PIPE_V)
        x = a
    _count(count)                                                    # GetLayerNormOutputMean
    Muls(c, x, t.lastDimValueBack, MASK_PLACEHOLDER, 1, _UNARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _reduce_sum(mean, b, c, rows, h)
    _broadcast_last_dim(c, b, rows, h)                               # GetLayerNormOutputVariance
    _count(count)
    Sub(b, x, c, MASK_PLACEHOLDER, 1, _BINARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    Mul(c, b, b, MASK_PLACEHOLDER, 1, _BINARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    Muls(a, c, t.lastDimValueBack, MASK_PLACEHOLDER, 1, _UNARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _reduce_sum(variance, c, a, rows, h)
    PipeBarrier(PIPE_V)
    _broadcast_last_dim(a, c, rows, h)                               # GetLayerNormOutputPre
    _count(count)
    Adds(c, a, eps, MASK_PLACEHOLDER, 1, _UNARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    Sqrt(a, c, MASK_PLACEHOLDER, 1, _UNARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _count(8)
    Duplicate(c, 1.0, MASK_PLACEHOLDER, 1, 1, 8, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _count(count)
    Div(a, c, a, MASK_PLACEHOLDER, 1, BinaryRepeatParams(1, 0, 1, 8, 0, 8), is_set_mask=False)
    PipeBarrier(PIPE_V)
    Mul(c, a, b, MASK_PLACEHOLDER, 1, _BINARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _output(t, blocks, output, c, gamma, beta, count, rows)


def _output(t, blocks, output, y, gamma, beta, count, rows):
    """GetLayerNormOutput: y = (rstd * d) * gamma + beta per row (half: through fp32 copies of
    gamma and beta, and one rounding of y)."""
    a, b, c = blocks
    h = t.hLength
    _count(h)
    if output.dtype == F32:
        _rows(Mul, a, y, gamma, rows, h)
        _rows(Add, output, a, beta, rows, h)
        return
    Cast(a, gamma, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _WIDEN, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _rows(Mul, b, y, a, rows, h)
    Cast(c, beta, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _WIDEN, is_set_mask=False)
    PipeBarrier(PIPE_V)
    _rows(Add, a, b, c, rows, h)
    _count(count)
    Cast(output, a, RoundMode.CAST_NONE, MASK_PLACEHOLDER, 1, _NARROW, is_set_mask=False)
    PipeBarrier(PIPE_V)


def _rows(op, dst, src0, src1, rows, h):
    """DuplicateMulImpl / DuplicateAddImpl: dst[r * H] = src0[r * H] op src1, a row at a time."""
    for r in range(rows):
        op(dst[r * h], src0[r * h], src1, MASK_PLACEHOLDER, 1, _BINARY, is_set_mask=False)
    PipeBarrier(PIPE_V)


def _reduce_sum(sums, dst, src, rows, h):
    """LayerNormReduceSumImpl: each row of src folded into its first 64 lanes (src is
    overwritten), then one WholeReduceSum per row into sums[r] and into dst[r * H]."""
    ResetMask()
    SetMaskNorm()
    if h > ONE_REPEAT:
        repeats, tail, tail_at = h // 64 - 1, h % 64, h // 64 * 64
        fold = BinaryRepeatParams(1, 1, 1, 0, 8, 0)
        for base in range(0, rows * h, h):
            if repeats > 0:
                Add(src[base], src[base + 64], src[base], 64, repeats, fold)
                PipeBarrier(PIPE_V)
            if tail:
                Add(src[base], src[base + tail_at], src[base], tail, 1, fold)
                PipeBarrier(PIPE_V)
    width = min(h, ONE_REPEAT)
    for first in range(0, rows, MAX_REPEAT):
        n = min(MAX_REPEAT, rows - first)
        WholeReduceSum(sums[first], src[first * h], width, n, 1, 1, h // 8)
        WholeReduceSum(dst[first * h], src[first * h], width, n, h, 1, h // 8)
        PipeBarrier(PIPE_V)
    SetMaskCount()


def _broadcast_last_dim(dst, src, rows, h):
    """BroadcastLastDim: dst[r * H + i] = src[r * H] for every row, by SetCmpMask and Select
    under an all-zero selMask (made by an int16 Muls by 0 over src's first 2H bytes)."""
    _count(h)
    SetCmpMask(src)
    PipeBarrier(PIPE_V)
    mask = src.ReinterpretCast(np.int16)
    Muls(mask, mask, 0, MASK_PLACEHOLDER, 1, _UNARY, is_set_mask=False)
    PipeBarrier(PIPE_V)
    sel = mask.ReinterpretCast(np.uint16)
    Select(dst, sel, dst, 1, _BINARY)
    PipeBarrier(PIPE_V)
    for r in range(1, rows):
        SetCmpMask(src[r * h])
        PipeBarrier(PIPE_V)
        Select(dst[r * h], sel, dst, 1, _BINARY)
        PipeBarrier(PIPE_V)


# --- the Ascend 950 (R950) ---------------------------------------------------------------------

class _Registers:
    NAMES = ("hd", "acc", "v", "sum", "m", "s", "sd", "r", "x")

    def __init__(self, core):
        for k, name in enumerate(self.NAMES):
            setattr(self, name, core.vreg(k, F32))


def _regbase_path(core, t, tensors, eps):
    """LayerNormImplVf: per row, the mean and the variance as lane-wise sums over 64-lane blocks
    (divided by H first) and one 64-lane tree, then y = (x - mean) / sqrt(var + eps) * gamma +
    beta, block by block. Half data is widened per block; outputs are rounded to nearest, NO_SAT."""
    output, mean, variance, x, gamma, beta = tensors
    h, rows = t.hLength, t.bLength * t.sLength
    regs = _Registers(core)
    Duplicate(regs.hd, float(h), 64, 1, 1, 8)
    blocks = [(col, min(64, h - col)) for col in range(0, h, 64)]
    for j in range(rows):
        base = j * h

        for centred, out, broadcast in ((False, mean, regs.m), (True, variance, regs.s)):
            full = [b for b in blocks if b[1] == 64]
            if full:
                _term(regs, x[base], regs.acc, 0, 64, centred)
                for col, _ in full[1:]:
                    _term(regs, x[base], regs.v, col, 64, centred)
                    Add(regs.acc, regs.acc, regs.v, 64, 1, _BINARY)
            else:
                Duplicate(regs.acc, 0.0, 64, 1, 1, 8)
            if h % 64:   # the tail under its mask, inactive lanes zero (ZEROING)
                Duplicate(regs.v, 0.0, 64, 1, 1, 8)
                _term(regs, x[base], regs.v, h // 64 * 64, h % 64, centred)
                Add(regs.acc, regs.acc, regs.v, 64, 1, _BINARY)
            WholeReduceSum(regs.sum, regs.acc, 64, 1, 1, 1, 8)
            DuplicateLane(broadcast, regs.sum)
            _store_lane(out, j, broadcast)
        Adds(regs.sd, regs.s, eps, 64, 1, _UNARY)
        Sqrt(regs.sd, regs.sd, 64, 1, _UNARY)
        for col, lanes in blocks:
            src = _load(regs.x, x[base + col], lanes)
            Sub(regs.r, src, regs.m, lanes, 1, _BINARY)
            Div(regs.r, regs.r, regs.sd, lanes, 1, _BINARY)
            Mul(regs.r, regs.r, _load(regs.v, gamma[col], lanes), lanes, 1, _BINARY)
            Add(regs.r, regs.r, _load(regs.v, beta[col], lanes), lanes, 1, _BINARY)
            _store(output[base + col], regs.r, lanes)


def _term(regs, row, dst, col, lanes, centred):
    """dst[:lanes] = x / H, or (x - mean)^2 / H, of the block of `row` at col."""
    src = _load(regs.x, row[col], lanes)
    if centred:
        Sub(dst, src, regs.m, lanes, 1, _BINARY)
        Mul(dst, dst, dst, lanes, 1, _BINARY)
        src = dst
    Div(dst, src, regs.hd, lanes, 1, _BINARY)


def _load(reg, src, lanes):
    """A float operand read in place; a half one widened into `reg` (LoadAlign UNPACK + Cast)."""
    if src.dtype == F32:
        return src
    Cast(reg, src, RoundMode.CAST_NONE, lanes, 1, _WIDEN)
    return reg


def _store(dst, reg, lanes):
    """StoreAlign of the active lanes; half through Cast CAST_RINT, NO_SAT (spec §5.4)."""
    if dst.dtype == F16:
        Cast(dst, reg, RoundMode.CAST_RINT, lanes, 1, _NARROW, sat_mode=False)
    else:
        DataCopy(dst, reg, lanes)


def _store_lane(dst, j, reg):
    """StoreAlign<DIST_FIRST_ELEMENT> of a broadcast register into dst[j]: lane j % block of
    the 32-byte block holding it (float: times 1.0, which keeps every value's bits but a NaN's
    payload; half: Cast CAST_RINT, NO_SAT)."""
    per_block = 32 // dst.dtype.itemsize
    lane = [1 << (j % per_block), 0]
    block = dst[j - j % per_block]
    if dst.dtype == F16:
        Cast(block, reg, RoundMode.CAST_RINT, lane, 1, _NARROW, sat_mode=False)
    else:
        Muls(block, reg, 1.0, lane, 1, _UNARY)
