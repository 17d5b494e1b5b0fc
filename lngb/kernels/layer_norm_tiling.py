"""Host tiling of LayerNorm, the forward (spec layernorm.md §3), exactly as CANN's
layernorm_tiling_impl.cpp and normalize_tiling_impl.cpp compute it, uint32 wraps included.

Form 1, [B, S, H] -> output, mean, variance: `LayerNormTiling`; its host functions have no product
branch (the 950's kernel reads only bLength, sLength and hLength). Form 2, [A, R] -> output, mean,
rstd: `LayerNormSeparateTiling`, with a branch for the Ascend 950. CANN's C++ overloads are one
Python function each, told apart by their argument count.

Where CANN logs an error and returns, these raise TilingError with every message CANN would have
logged; where it logs and goes on (or computes on a wrapped uint32), TilingError too, or with
strict=False a warning and CANN's values.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import InvalidArgumentError, check_flag
from ..products import get_product
from ..tensor import current_core
from .tiling import U32, HostLog, TilingStruct, uint32

__all__ = ["LayerNormTiling", "LayerNormSeparateTiling", "GetLayerNormMaxMinTmpSize",
           "GetLayerNormNDTilingInfo", "GetLayerNormNDTillingInfo"]

_API = "LayerNorm"
_MISSING = object()   # an argument of the form-2 overloads not given: form 1
VEC_REG_FLOATS = 64   # the 950's GetVecRegLen() / sizeof(float)


@dataclasses.dataclass
class LayerNormTiling(TilingStruct):
    """CANN's form-1 tiling: 25 uint32 fields and the fp32 1/originalH, same names and order
    (spec §3.2), 104 bytes. Positions and sizes count floats of the temp buffer."""

    bLength: int = 0
    sLength: int = 0
    hLength: int = 0
    originalHLength: int = 0
    inputXSize: int = 0
    meanVarSize: int = 0
    numberOfTmpBuf: int = 0
    meanTmpTensorPos: int = 0
    meanTmpTensorSize: int = 0
    varianceTmpTensorPos: int = 0
    varianceTmpTensorSize: int = 0
    tmpBufSize: int = 0
    oneTmpSize: int = 0
    firstTmpStartPos: int = 0
    secondTmpStartPos: int = 0
    thirdTmpStartPos: int = 0
    loopRound: int = 0
    inputRoundSize: int = 0
    inputTailSize: int = 0
    inputTailPos: int = 0
    meanVarRoundSize: int = 0
    meanVarTailSize: int = 0
    meanVarTailPos: int = 0
    bshCurLength: int = 0
    bsCurLength: int = 0
    lastDimValueBack: float = 0.0


@dataclasses.dataclass
class LayerNormSeparateTiling(TilingStruct):
    """CANN's form-2 ([A, R], rstd) tiling: 23 uint32 and 3 fp32 fields, same names and order
    (spec §3.5), 104 bytes. Fields a branch does not set stay 0, as in the fresh object CANN
    fills (halfAddRepeatTimes and thirdTmpStartPos are never set)."""

    aLength: int = 0
    rLength: int = 0
    halfAddRepeatTimes: int = 0
    rHeadLength: int = 0
    k2Rec: float = 0.0
    k2RRec: float = 0.0
    inputXSize: int = 0
    meanVarSize: int = 0
    numberOfTmpBuf: int = 0
    varianceTmpTensorPos: int = 0
    varianceTmpTensorSize: int = 0
    tmpBufSize: int = 0
    oneTmpSize: int = 0
    firstTmpStartPos: int = 0
    secondTmpStartPos: int = 0
    thirdTmpStartPos: int = 0
    loopRound: int = 0
    inputRoundSize: int = 0
    inputTailSize: int = 0
    inputTailPos: int = 0
    meanVarRoundSize: int = 0
    meanVarTailSize: int = 0
    meanVarTailPos: int = 0
    arCurLength: int = 0
    aCurLength: int = 0
    rValueBack: float = 0.0


def _roundup(value, unit):
    return (((value + unit - 1) & U32) // unit * unit) & U32


def _f32_div(a, b):
    """One correctly rounded fp32 division, as `float / float` in C (x / 0: inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float32(a) / np.float32(b))


def _product(product, func):
    """The product whose branch CANN's host takes: `product`, else the current core's, else the
    A2's."""
    if product is None:
        try:
            return current_core().product
        except InvalidArgumentError:
            product = "atlas-a2"
    return get_product(product, func)


def _dims(srcShape):
    if isinstance(srcShape, (str, bytes)):
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}")
    try:
        return [uint32(f"srcShape[{i}]", d) for i, d in enumerate(srcShape)]
    except TypeError:
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}") from None


def _check_common(log, dims, typeSize):
    """CheckLayerNormHostCommon: shape size, then 4 dims, then typeSize; each check logs and
    returns from the check only, so the first failure alone is logged."""
    if not dims or math.prod(dims) <= 0:
        log.log("Input Shape size must be greater than 0.")
    elif len(dims) != 4:
        log.log(f"The dims of srcShape is {len(dims)}, should be 4 (e.g. [B, S, storageHLength, "
                "originHLength])!")
    elif typeSize not in (2, 4):
        log.log(f"Type size {typeSize} is unsupported!")


def _form_1(func, srcShape, typeSize, isReuseSource, product, strict):
    """Checked (dims as B, S, H, originalH, typeSize, reuse, log) of a form-1 call; (B, S, H)
    means originalH = H."""
    dims = _dims(srcShape)
    typeSize = uint32("typeSize", typeSize)
    reuse = check_flag(func, "isReuseSource", isReuseSource)
    check_flag(func, "strict", strict)
    _product(product, func)   # validated; form 1 has no product branch
    if len(dims) == 3:
        dims.append(dims[2])
    log = HostLog(_API, func, strict)
    _check_common(log, dims, typeSize)
    if len(dims) < 4:   # CANN would read dims it was not given
        log.fail(f"srcShape needs [B, S, H] or [B, S, storageH, originH], got {len(dims)} dims")
    return dims, typeSize, reuse and typeSize == 4, log


def _form_1_max_min(dims, typeSize, reuse_float):
    B, S, H = dims[:3]
    mv = _roundup(B * S * 4 & U32, 32)
    inp = _roundup(B * S * H * 4 & U32, 32)
    hd = _roundup(H * 4 & U32, 32)
    n = 2 if reuse_float else 3
    return (n * inp + 2 * mv) & U32, (n * hd + 2 * mv) & U32


def GetLayerNormMaxMinTmpSize(srcShape, typeSize, isReuseSource, isComputeRstd=_MISSING,
                              isOnlyOutput=_MISSING, *, product=None, strict=True):
    """(maxValue, minValue) temp-buffer bytes for LayerNorm. With three arguments, form 1:
    srcShape (B, S, storageH, originH) or (B, S, H). With isComputeRstd and isOnlyOutput, form 2:
    srcShape (A, R) (the 950 reads its first and last dims). `product`: the branch CANN's host
    takes (default: the current core's, else atlas-a2)."""
    func = "GetLayerNormMaxMinTmpSize"
    if isComputeRstd is _MISSING and isOnlyOutput is _MISSING:
        dims, typeSize, reuse_float, log = _form_1(func, srcShape, typeSize, isReuseSource,
                                                   product, strict)
        log.done()
        return _form_1_max_min(dims, typeSize, reuse_float)
    dims, typeSize, regbase, log = _form_2(func, srcShape, typeSize, isReuseSource,
                                           isComputeRstd, isOnlyOutput, product, strict)
    if regbase:
        padded = _roundup(dims[-1], VEC_REG_FLOATS)
        length = _roundup(padded // VEC_REG_FLOATS, 2 * VEC_REG_FLOATS) + dims[0]
        if not isComputeRstd:
            length += dims[0]
        size = length * 4 & U32
        return size, size
    A, R = dims
    padded = _roundup(R, 32 // typeSize)
    mv = _roundup(A * 4 & U32, 32)
    biggest = (2 * _roundup(A * padded * 4 & U32, 32) + mv) & U32
    smallest = (2 * _roundup(padded * 4 & U32, 32) + mv) & U32
    if not isComputeRstd:   # GetNormalizeMaxMinTmpSize returns with its outputs unset
        log.messages.append("isComputeRstd current only support true")
        log.stop()
    normalize_max, normalize_min = _normalize_max_min(A, R, typeSize)
    if (smallest - mv) & U32 <= normalize_min:
        smallest = (normalize_min + mv) & U32
    if (biggest - mv) & U32 <= normalize_max:
        biggest = (normalize_max + mv) & U32
    log.done()
    return biggest, smallest


def _normalize_max_min(A, R, typeSize):
    """GetNormalizeMaxMinTmpSize on A2/A3/310P (normalize_tiling_impl.cpp), with typeSizeU =
    typeSizeT = typeSize as LayerNorm calls it."""
    padded = _roundup(R, 32 // typeSize)
    r_bytes = _roundup(padded * 4 & U32, 32)
    ar_bytes = _roundup(_roundup(A, 8) * padded * 4 & U32, 32)
    a_bytes = _roundup(A * 4 & U32, 32)
    nr_bytes = (2 if typeSize == 4 else 4) * r_bytes & U32
    return (2 * r_bytes + 2 * ar_bytes) & U32, max(a_bytes, nr_bytes)


def _form_2(func, srcShape, typeSize, isReuseSource, isComputeRstd, isOnlyOutput, product,
            strict):
    """Checked (dims, typeSize, regbase, log) of a form-2 call."""
    dims = _dims(srcShape)
    typeSize = uint32("typeSize", typeSize)
    check_flag(func, "isReuseSource", isReuseSource)
    check_flag(func, "isComputeRstd", isComputeRstd)
    if isOnlyOutput is not None:
        check_flag(func, "isOnlyOutput", isOnlyOutput)
    check_flag(func, "strict", strict)
    product = _product(product, func)
    log = HostLog(_API, func, strict)
    if typeSize == 0:
        log.messages.append("typeSize can not be 0!")
        log.stop()
    if isOnlyOutput:
        log.messages.append("isOnlyOutput current only support false.")
        log.stop()
    if typeSize > 32:   # CANN's 32 / typeSize elements of alignment would be 0: a division by 0
        log.fail(f"Type size {typeSize} is unsupported!")
    if product.kernel_path == "regbase":
        if len(dims) < 2:
            log.fail(f"srcShape is [A, R] (at least 2 dims on the 950), got {len(dims)} dims")
        return dims, typeSize, True, log
    # CheckLayerNormHostCommon's first check; its "should be 4 dims" would be logged for the
    # documented {A, R} on every call, and its typeSize check is then never reached
    if not dims or math.prod(dims) <= 0:
        log.log("Input Shape size must be greater than 0.")
    if len(dims) != 2:
        log.fail(f"srcShape is [A, R]: 2 dims on {product.name}, got {len(dims)} dims")
    return dims, typeSize, False, log


def GetLayerNormNDTilingInfo(srcShape, stackBufferSize, typeSize, isReuseSource,
                             isComputeRstd=_MISSING, *, product=None, strict=True):
    """The tiling for a temp buffer of stackBufferSize **bytes**: with four arguments form 1's
    LayerNormTiling, with isComputeRstd form 2's LayerNormSeparateTiling (arguments as
    GetLayerNormMaxMinTmpSize). A request CANN's host returns from without setting anything (H of
    0, a buffer of not even one row) is a TilingError."""
    if isComputeRstd is _MISSING:
        return _form_1_tiling("GetLayerNormNDTilingInfo", srcShape, stackBufferSize, typeSize,
                              isReuseSource, product, strict)
    func = "GetLayerNormNDTilingInfo"
    dims, typeSize, regbase, log = _form_2(func, srcShape, typeSize, isReuseSource,
                                           isComputeRstd, None, product, strict)
    stackBufferSize = uint32("stackBufferSize", stackBufferSize)
    if regbase:
        return _regbase_separate_tiling(dims[-1], typeSize)
    A, R = dims
    padded = _roundup(R, 32 // typeSize)
    size, variance = A * padded & U32, _roundup(A, 8)
    floats = stackBufferSize // 4
    if floats < variance:
        log.log(f"stackBufferSize {stackBufferSize} bytes is below the variance scratch "
                f"({variance} floats): CANN's uint32 subtraction wraps, and the tiling claims "
                "more temp buffer than it has")
    one = min(((floats - variance) & U32) // 2 // padded * padded, size)
    if one == 0:
        log.fail(f"stackBufferSize {stackBufferSize} bytes holds not even one row: CANN's host "
                 "returns without setting the tiling")
    log.done()
    tail = size % one
    return LayerNormSeparateTiling(
        aLength=A, rLength=R, inputXSize=size, meanVarSize=A, numberOfTmpBuf=2,
        varianceTmpTensorPos=0, varianceTmpTensorSize=variance, tmpBufSize=floats, oneTmpSize=one,
        firstTmpStartPos=variance, secondTmpStartPos=(variance + one) & U32,
        loopRound=size // one, inputRoundSize=one, inputTailSize=tail, inputTailPos=size - tail,
        meanVarRoundSize=one // padded, meanVarTailSize=tail // padded,
        meanVarTailPos=(A - tail // padded) & U32, arCurLength=one, aCurLength=one // padded,
        rValueBack=_f32_div(1, R))


def _regbase_separate_tiling(R, typeSize):
    """The 950 branch: the binary folding's head (the largest power of two not above R, at least
    one vector of 64 floats), its log2 in oneTmpSize, and the folding's scales."""
    head, k = VEC_REG_FLOATS, 6
    for i in range(_roundup(R, 32 // typeSize)):
        if head * 2 > R:
            k += i
            break
        head *= 2
    over = 2 ** (k + (1 if 2 ** k < R else 0))
    return LayerNormSeparateTiling(rLength=R, oneTmpSize=k, rHeadLength=head,
                                   k2Rec=_f32_div(1, over), k2RRec=_f32_div(over, R))


def _form_1_tiling(func, srcShape, stackBufferSize, typeSize, isReuseSource, product, strict):
    dims, typeSize, reuse_float, log = _form_1(func, srcShape, typeSize, isReuseSource, product,
                                               strict)
    stackBufferSize = uint32("stackBufferSize", stackBufferSize)
    B, S, H, original = dims[:4]
    size, rows = B * S * H & U32, B * S & U32
    buffers = 2 if reuse_float else 3
    mean_size = _roundup(rows, 8)
    scratch = 0 if typeSize == 4 else 2 * mean_size & U32
    floats = stackBufferSize // 4
    if floats < scratch:
        log.log(f"stackBufferSize {stackBufferSize} bytes is below the mean and variance scratch "
                f"({scratch} floats): CANN's uint32 subtraction wraps, and the tiling claims more "
                "temp buffer than it has")
    one = ((floats - scratch) & U32) // buffers
    if H == 0:
        log.messages.append("the value of hLength should not be zero.")
        log.stop()
    one = min(one // H * H, size)
    if one == 0:
        log.fail(f"stackBufferSize {stackBufferSize} bytes holds not even one row of H={H} "
                 f"({buffers} fp32 blocks): CANN's host returns without setting the tiling; "
                 "GetLayerNormMaxMinTmpSize gives the minimum")
    log.done()
    tail = size % one
    return LayerNormTiling(
        bLength=B, sLength=S, hLength=H, originalHLength=original, inputXSize=size,
        meanVarSize=rows, numberOfTmpBuf=buffers, meanTmpTensorPos=0,
        meanTmpTensorSize=mean_size, varianceTmpTensorPos=mean_size,
        varianceTmpTensorSize=mean_size, tmpBufSize=floats, oneTmpSize=one,
        firstTmpStartPos=scratch, secondTmpStartPos=(scratch + one) & U32,
        thirdTmpStartPos=(scratch + 2 * one) & U32, loopRound=size // one, inputRoundSize=one,
        inputTailSize=tail, inputTailPos=size - tail, meanVarRoundSize=one // H,
        meanVarTailSize=tail // H, meanVarTailPos=(rows - tail // H) & U32, bshCurLength=one,
        bsCurLength=one // H, lastDimValueBack=_f32_div(1, original))


def GetLayerNormNDTillingInfo(srcShape, stackBufferSize, typeSize, isReuseSource, *,
                              product=None, strict=True):
    """CANN's deprecated spelling of form 1's GetLayerNormNDTilingInfo (its messages name it)."""
    return _form_1_tiling("GetLayerNormNDTillingInfo", srcShape, stackBufferSize, typeSize,
                          isReuseSource, product, strict)
