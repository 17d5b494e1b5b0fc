"""Host tiling of LayerNormGradBeta (spec layernorm_grad_beta.md §1-2) and LayerNormGrad (spec
layernorm_grad.md §1.5-3), exactly as CANN's tiling sources compute them.

Where CANN only logs an error and carries on, we raise ``TilingError`` with every message CANN
would have logged, in CANN's order. Bad argument types or ranges raise ``InvalidArgumentError``.
"""
from __future__ import annotations

import dataclasses
import math
import struct

import numpy as np

from ..arguments import is_int
from ..errors import InvalidArgumentError, TilingError, check_flag, warn
from ..products import get_product

__all__ = ["LayerNormGradBetaTiling", "GetLayerNormGradBetaMaxMinTmpSize",
           "GetLayerNormGradBetaNDTilingInfo", "LayerNormGradTiling",
           "GetLayerNormGradMaxMinTmpSize", "GetLayerNormGradNDTilingInfo"]

U32 = 0xFFFFFFFF  # CANN computes every field in uint32_t; `& U32` emulates its wrap-around


class TilingStruct:
    """A tiling struct of uint32 fields and fp32 ones (annotated `float`), as the kernel reads
    it: little-endian, no padding."""

    @classmethod
    def _format(cls):
        return "<" + "".join("f" if f.type == "float" else "I" for f in dataclasses.fields(cls))

    def to_bytes(self) -> bytes:
        """The little-endian struct the kernel reads (4 bytes per field, in field order)."""
        values = [_field(f, f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return struct.pack(self._format(), *values)

    @classmethod
    def from_bytes(cls, b):
        """Inverse of ``to_bytes``; needs exactly 4 bytes per field."""
        name, size = cls.__name__, struct.calcsize(cls._format())
        try:
            if isinstance(b, np.ndarray) and b.dtype.hasobject:
                raise TypeError  # a numpy array of objects holds pointers, not the struct
            view = memoryview(b)
        except TypeError:
            raise InvalidArgumentError(
                f"{name}.from_bytes needs a bytes-like object, got {type(b).__name__}") from None
        if view.nbytes != size:  # before copying: a huge view would be copied whole
            raise InvalidArgumentError(f"{name}.from_bytes needs exactly {size} bytes "
                                       f"({size // 4} fields of 4 bytes), got {view.nbytes}")
        return cls(*struct.unpack(cls._format(), view.tobytes()))

    @classmethod
    def checked(cls, api, tiling):
        """`tiling` with every field checked to be a uint32 integer (what a kernel reads),
        before a kernel uses any: itself when its fields are plain ints already, else a new
        `cls` of plain ints."""
        if not isinstance(tiling, cls):
            raise InvalidArgumentError(f"{api}: tiling must be a {cls.__name__}, got "
                                       f"{type(tiling).__name__}")
        fields = dataclasses.fields(cls)
        values = [getattr(tiling, f.name) for f in fields]
        if all(type(v) is int and 0 <= v <= U32 or f.type == "float" and type(v) is float
               for f, v in zip(fields, values)):
            return tiling   # plain values already (what the host functions return)
        return cls(*(_field(f, f"{api}: tiling.{f.name}", v) for f, v in zip(fields, values)))


def _field(field, name, value):
    """A struct field's value checked: a uint32, or for a `float` field a real number (as the
    fp32 nearest to it, what the kernel reads)."""
    if field.type != "float":
        return uint32(name, value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                     np.floating)):
        raise InvalidArgumentError(f"{name} must be a real number (an fp32), got {value!r}")
    return float(np.float32(value))


@dataclasses.dataclass
class LayerNormGradBetaTiling(TilingStruct):
    """CANN's 20 uint32 tiling fields, same names and order (spec §1): 80 bytes."""

    stackBufferSize: int = 0
    bLength: int = 0
    sLength: int = 0
    hLength: int = 0
    originalHLength: int = 0
    bshLength: int = 0
    bsLength: int = 0
    oneCalSize: int = 0
    numberOfTmpBuf: int = 0
    loopRound: int = 0
    inputTailSize: int = 0
    inputTailPos: int = 0
    bsTailSize: int = 0
    bshCurLength: int = 0
    bsCurLength: int = 0
    gammaTempTensorPos: int = 0
    betaTempTensorPos: int = 0
    inputDyTmpTensorPos: int = 0
    resForGammaTmpTensorPos: int = 0
    reserved: int = 0


def uint32(name, value) -> int:
    """An int in [0, 2**32): rejects what arguments.is_int does (bools, floats, enum members,
    np.timedelta64, ...), negatives and overflow."""
    if not is_int(value):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if not 0 <= v <= U32:
        raise InvalidArgumentError(f"{name} = {v} is out of the uint32 range [0, 4294967295]")
    return v


def _args(srcShape, typeSize, isReuseSource):
    """Checked (dims, typeSize); a 3-dim (B, S, H) becomes (B, S, H, H) (spec §2.1)."""
    if isinstance(srcShape, (str, bytes)):
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}")
    try:
        dims = [uint32(f"srcShape[{i}]", d) for i, d in enumerate(srcShape)]
    except TypeError:
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}") from None
    check_flag("tiling", "isReuseSource", isReuseSource)
    if len(dims) == 3:
        dims.append(dims[2])
    return dims, uint32("typeSize", typeSize)


class HostLog:
    """Collects CANN's ASCENDC_HOST_ASSERT messages. Where CANN logs and returns, `stop` raises
    TilingError with every message so far; where CANN logs and goes on, `done` raises too, or,
    with strict=False, warns (LngbWarning) and goes on as CANN does."""

    def __init__(self, api, func, strict=True):
        self.prefix = f"[{api}][{func}] "
        self.messages = []
        self.strict = strict

    def log(self, msg):
        self.messages.append(self.prefix + msg)

    def fail(self, msg):  # CANN logs and returns from the host function
        self.log(msg)
        self.stop()

    def stop(self):
        raise TilingError("\n".join(self.messages))

    def done(self):
        if self.messages and self.strict:
            self.stop()
        if self.messages:
            warn("\n".join(self.messages))
            self.messages = []

    def check_common(self, dims, typeSize):
        """CheckLayerNormGrad(Beta)HostCommon: logs the first failing check only (LNGB spec
        §2.1; LayerNormGrad spec §3.1)."""
        if typeSize not in (2, 4):
            self.log(f"Type size {typeSize} is unsupported!")
        elif not dims or math.prod(dims) <= 0:
            self.log("Input Shape size must be greater than 0.")
        elif len(dims) != 4:
            self.log(f"The dims of srcShape is {len(dims)}, should be 4 "
                     "(e.g. [B, S, storageHLength, originHLength])!")

    def check_dims(self, dims):
        if len(dims) < 4:  # CANN: "srcShape dims must not be less than 4." and return
            self.fail("srcShape dims must not be less than 4.")

    def check_src_shape(self, dims):
        """LayerNormGrad's CheckSrcShape (spec §3.1): unprefixed messages, the first failure only;
        with fewer than 4 dims CANN would go on to read dims[3] out of range, so that stops here."""
        if len(dims) < 4:
            self.messages.append("srcShape dims must not be less than 4.")
            self.stop()
        bad = [i for i in range(4) if dims[i] == 0]
        if bad:
            self.messages.append(f"srcShape[{bad[0]}] must be greater than 0.")


def _max_min(dims, typeSize):
    """CANN's max/min formulas in bytes, uint32 like CANN (spec §2.2)."""
    B, S, H = dims[0], dims[1], dims[2]
    n = 4 if typeSize == 2 else 2
    return (n * B * S * H * 4) & U32, (n * H * 4) & U32


def GetLayerNormGradBetaMaxMinTmpSize(srcShape, typeSize, isReuseSource):
    """(maxValue, minValue) temp-buffer bytes; isReuseSource is ignored (spec §2.2)."""
    dims, typeSize = _args(srcShape, typeSize, isReuseSource)
    log = HostLog("LayerNormGradBeta", "GetLayerNormGradBetaMaxMinTmpSize")
    log.check_common(dims, typeSize)
    log.check_dims(dims)
    log.done()
    return _max_min(dims, typeSize)


def GetLayerNormGradBetaNDTilingInfo(srcShape, stackBufferSize, typeSize, isReuseSource):
    """The tiling for a temp buffer of stackBufferSize bytes; isReuseSource is ignored (spec §2.3)."""
    dims, typeSize = _args(srcShape, typeSize, isReuseSource)
    stackBufferSize = uint32("stackBufferSize", stackBufferSize)
    log = HostLog("LayerNormGradBeta", "GetLayerNormGradBetaNDTilingInfo")
    log.check_common(dims, typeSize)
    log.check_dims(dims)

    B, S, H, Ho = dims[:4]
    bsh = (B * S * H) & U32  # uint32 product in CANN: wraps mod 2**32 for huge shapes
    bs = (B * S) & U32
    sb = stackBufferSize // 4  # bytes -> floats
    not_enough = (
        "stackBufferSize is not enough. "
        f"Got {stackBufferSize} bytes; GetLayerNormGradBetaMaxMinTmpSize gives minValue = "
        f"{_max_min(dims, typeSize)[1]} bytes for srcShape {dims} and typeSize {typeSize}. "
        "Pass a stackBufferSize (in bytes, not elements) of at least minValue.")
    if sb < ((H + H) & U32):
        log.fail(not_enough)

    one, nbuf = sb, 1
    if typeSize == 2:
        nbuf = 2
        one = ((one - H - H) & U32) // nbuf
    if H == 0:
        log.fail("the value of hLength should not be zero.")
    one = one // H * H  # whole rows only
    if one == 0:
        log.fail(not_enough)
    if one >= bsh:
        one = bsh
    if bsh == 0:  # only after a logged zero dim or a uint32 wrap; CANN would divide by zero
        log.fail(f"bshLength = B*S*H mod 2**32 = 0 (B*S*H = {B * S * H}); CANN would divide by zero.")
    log.done()  # errors CANN only logs (bad typeSize, zero dim, dims != 4) still raise

    tail = bsh % one
    t = LayerNormGradBetaTiling(
        stackBufferSize=sb, bLength=B, sLength=S, hLength=H, originalHLength=Ho,
        bshLength=bsh, bsLength=bs, oneCalSize=one, numberOfTmpBuf=nbuf,
        loopRound=bsh // one, inputTailSize=tail, inputTailPos=bsh - tail,
        bsTailSize=tail // H, bshCurLength=one, bsCurLength=one // H)
    if typeSize == 2:
        t.betaTempTensorPos = H
        t.inputDyTmpTensorPos = 2 * H
        t.resForGammaTmpTensorPos = 2 * H + one
    return t


# --- LayerNormGrad (spec layernorm_grad.md §1.5-§3) ----------------------------------------------

_LNG = "LayerNormGrad"
# Temp blocks of `oneCalSize` floats (TH L22-32): half 9, float 6, float reusing inputDy/inputX 4;
# the Ascend 950 kernel needs two fp32 rows (x1, x2).
_HALF_BUFS, _FLOAT_BUFS, _REUSE_FLOAT_BUFS, _REGBASE_ROWS = 9, 6, 4, 2
LNG_BLOCKS = ("tmpTensorBSH", "pdVarTensor", "pdMeanTensor", "x1Tensor", "x2Tensor", "x3Tensor",
              "tmpTensor", "tmpTensor1", "tmpTensor2")


def layer_norm_grad_blocks(typeSize, isReuseSource):
    """The temp blocks the A2/A3/310P kernel uses, in the host's order of positions: float with
    isReuseSource keeps x1 and x2 in inputDy and inputX; half needs tmpTensor, tmpTensor1 and
    tmpTensor2 too (spec §3.4)."""
    if typeSize == 2:
        return LNG_BLOCKS
    return LNG_BLOCKS[:3] + (("x3Tensor",) if isReuseSource and typeSize == 4
                             else LNG_BLOCKS[3:6])


@dataclasses.dataclass
class LayerNormGradTiling(TilingStruct):
    """CANN's 30 uint32 tiling fields, same names and order (spec §1.5): 120 bytes. Positions and
    sizes are in floats from the start of the temp buffer; the last two fields hold the bits of
    the fp32 values 1/originalH and 2/originalH (see `one_over_h`, `two_over_h`)."""

    stackBufferSize: int = 0
    bLength: int = 0
    sLength: int = 0
    hLength: int = 0
    originalHLength: int = 0
    oneCalSize: int = 0
    nohCalSize: int = 0
    loopNum: int = 0
    tailSize: int = 0
    nohTailSize: int = 0
    tmpTensorBSHPos: int = 0
    tmpTensorBSHSize: int = 0
    pdVarTensorPos: int = 0
    pdVarTensorSize: int = 0
    pdMeanTensorPos: int = 0
    pdMeanTensorSize: int = 0
    x1TensorPos: int = 0
    x1TensorSize: int = 0
    x2TensorPos: int = 0
    x2TensorSize: int = 0
    x3TensorPos: int = 0
    x3TensorSize: int = 0
    tmpTensorPos: int = 0
    tmpTensorSize: int = 0
    tmpTensor1Pos: int = 0
    tmpTensor1Size: int = 0
    tmpTensor2Pos: int = 0
    tmpTensor2Size: int = 0
    lastDimValueBack: int = 0
    lastDimValueBackMulTwo: int = 0

    @property
    def one_over_h(self):
        """lastDimValueBack read as the kernel reads it: an fp32 (spec §1.5 field 28)."""
        return _f32_of_bits(self.lastDimValueBack)

    @property
    def two_over_h(self):
        return _f32_of_bits(self.lastDimValueBackMulTwo)


def _f32_of_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)[()]


def _bits_of_f32(value):
    return int(np.float32(value).view(np.uint32))


def _lng_args(srcShape, typeSize, isReuseSource, product, strict, func):
    dims, typeSize = _args(srcShape, typeSize, isReuseSource)
    regbase = get_product(product, func).kernel_path == "regbase"
    check_flag(func, "strict", strict)
    log = HostLog(_LNG, func, strict)
    log.check_common(dims, typeSize)
    log.check_src_shape(dims)
    return dims, typeSize, regbase, log


def GetLayerNormGradMaxMinTmpSize(srcShape, typeSize, isReuseSource, *, product="atlas-a2",
                                  strict=True):
    """(maxValue, minValue) temp-buffer bytes for LayerNormGrad (spec §3.2). `product` picks CANN's
    branch: the Ascend 950 (atlas-350) needs two fp32 rows, or none for float with isReuseSource;
    the others count `oneCalSize`-float blocks of min/max(B*S*H, H*H) elements.

    srcShape is (B, S, storageH, originalH), or (B, S, H). Where CANN logs an error and goes on
    (a bad typeSize, a zero dim, more than 4 dims), this raises TilingError, or with strict=False
    warns and goes on as CANN does (CANN's tiling tests pass 6 dims)."""
    dims, typeSize, regbase, log = _lng_args(srcShape, typeSize, isReuseSource, product, strict,
                                             "GetLayerNormGradMaxMinTmpSize")
    log.done()
    return _lng_max_min(dims, typeSize, isReuseSource, regbase)


def _lng_max_min(dims, typeSize, isReuseSource, regbase):
    B, S, H = dims[:3]
    if regbase:
        if isReuseSource and typeSize == 4:
            return 0, 0
        size = (_REGBASE_ROWS * (((H + 7) & U32) // 8 * 8) * 4) & U32
        return size, size
    bsh, hh = (B * S * H) & U32, (H * H) & U32
    if typeSize == 2:
        return (_HALF_BUFS * max(bsh, hh) * 2) & U32, (min(bsh, hh) * _HALF_BUFS * 2) & U32
    n = _REUSE_FLOAT_BUFS if isReuseSource else _FLOAT_BUFS
    return (n * max(bsh, hh) * typeSize) & U32, (min(bsh, hh) * n * typeSize) & U32


def GetLayerNormGradNDTilingInfo(srcShape, stackBufferSize, typeSize, isReuseSource, *,
                                 product="atlas-a2", strict=True):
    """The LayerNormGradTiling for a temp buffer of stackBufferSize **bytes** (spec §3.3-3.4);
    arguments as GetLayerNormGradMaxMinTmpSize.

    Rows per chunk are rounded *up* to 8 (float) / 16 (half), as CANN does: the kernel can then
    touch more than stackBufferSize bytes (spec §3.5; `layer_norm_grad_tmp_bytes` gives how much)."""
    dims, typeSize, regbase, log = _lng_args(srcShape, typeSize, isReuseSource, product, strict,
                                             "GetLayerNormGradNDTilingInfo")
    stackBufferSize = uint32("stackBufferSize", stackBufferSize)
    B, S, H, Ho = dims[:4]
    bsh = (B * S * H) & U32
    if H == 0:
        log.fail("hLength is 0: CANN would divide by zero.")
    nbuf = _HALF_BUFS if typeSize == 2 else (_REUSE_FLOAT_BUFS if isReuseSource else _FLOAT_BUFS)
    if regbase:  # the 950 kernel ignores sizes and positions
        one = noh = 1
    else:
        one = stackBufferSize // 4 // nbuf // H * H
        if one == 0:
            minimum = _lng_max_min(dims, typeSize, isReuseSource, regbase)[1]
            log.fail(f"stackBufferSize is not enough. Got {stackBufferSize} bytes; one row of "
                     f"H={H} needs {4 * nbuf * H} ({nbuf} fp32 blocks); "
                     f"GetLayerNormGradMaxMinTmpSize gives minValue = {minimum} for srcShape "
                     f"{dims}. Pass a stackBufferSize in bytes, not elements.")
        block = 8 if typeSize == 4 else 16
        noh = -(-(one // H) // block) * block
        one = (noh * H) & U32
    log.done()
    positions = {f"{name}Pos": (k * one) & U32
                 for k, name in enumerate(layer_norm_grad_blocks(typeSize, isReuseSource))}
    sizes = {f"{name}Size": one for name in LNG_BLOCKS}
    with np.errstate(divide="ignore"):
        inv = np.float32(1.0) / np.float32(Ho), np.float32(2.0) / np.float32(Ho)
    return LayerNormGradTiling(
        stackBufferSize=stackBufferSize, bLength=B, sLength=S, hLength=H, originalHLength=Ho,
        oneCalSize=one, nohCalSize=noh, loopNum=bsh // one, tailSize=bsh % one,
        nohTailSize=bsh % one // H, **positions, **sizes,
        lastDimValueBack=_bits_of_f32(inv[0]), lastDimValueBackMulTwo=_bits_of_f32(inv[1]))


def layer_norm_grad_largest_chunk(tiling):
    """Elements of the largest chunk of the A2/A3/310P kernel: what it touches of each block."""
    t = tiling
    return max(t.oneCalSize if t.loopNum else 0, t.tailSize)


def layer_norm_grad_tmp_bytes(tiling, dtype_size, reuse=False):
    """Bytes of temp buffer CANN's A2/A3/310P kernel touches with this tiling (spec §3.4-3.5): the
    end of the furthest block it uses (with the host's positions x3 for float, tmpTensor2 for
    half) in the largest chunk. It can exceed tiling.stackBufferSize."""
    chunk = layer_norm_grad_largest_chunk(tiling)
    return 4 * max(getattr(tiling, f"{name}Pos") + chunk
                   for name in layer_norm_grad_blocks(dtype_size, reuse))
