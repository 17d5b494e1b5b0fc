"""Host tiling of LayerNormGradBeta, exactly as CANN's TCPP computes it (spec §1, §2).

Where CANN only logs an error and carries on, we raise ``TilingError`` with every message CANN
would have logged, in CANN's order. Bad argument types or ranges raise ``InvalidArgumentError``.
"""
from __future__ import annotations

import dataclasses
import math
import operator
import struct

from ..errors import InvalidArgumentError, TilingError

__all__ = ["LayerNormGradBetaTiling", "GetLayerNormGradBetaMaxMinTmpSize",
           "GetLayerNormGradBetaNDTilingInfo"]

_U32 = 0xFFFFFFFF  # CANN computes every field in uint32_t; `& _U32` emulates its wrap-around
_API = "LayerNormGradBeta"
_FMT = "<20I"


@dataclasses.dataclass
class LayerNormGradBetaTiling:
    """CANN's 20 uint32 tiling fields, same names and order (spec §1)."""

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

    def to_bytes(self) -> bytes:
        """The 80-byte little-endian struct the kernel reads (spec §1)."""
        values = [_uint32(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return struct.pack(_FMT, *values)

    @classmethod
    def from_bytes(cls, b) -> LayerNormGradBetaTiling:
        """Inverse of ``to_bytes``; needs exactly 80 bytes (spec §1)."""
        try:
            data = memoryview(b).tobytes()
        except TypeError:
            raise InvalidArgumentError(
                f"LayerNormGradBetaTiling.from_bytes needs a bytes-like object, got {type(b).__name__}"
            ) from None
        if len(data) != struct.calcsize(_FMT):
            raise InvalidArgumentError(
                f"LayerNormGradBetaTiling.from_bytes needs exactly 80 bytes (20 uint32), got {len(data)}")
        return cls(*struct.unpack(_FMT, data))


def _uint32(name, value) -> int:
    """An int in [0, 2**32): rejects bools, floats, negatives and overflow."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, got bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}") from None
    if not 0 <= v <= _U32:
        raise InvalidArgumentError(f"{name} = {v} is out of the uint32 range [0, 4294967295]")
    return v


def _args(srcShape, typeSize, isReuseSource):
    """Checked (dims, typeSize); a 3-dim (B, S, H) becomes (B, S, H, H) (spec §2.1)."""
    if isinstance(srcShape, (str, bytes)):
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}")
    try:
        dims = [_uint32(f"srcShape[{i}]", d) for i, d in enumerate(srcShape)]
    except TypeError:
        raise InvalidArgumentError(f"srcShape must be a sequence of ints, got {srcShape!r}") from None
    if isReuseSource not in (True, False):
        raise InvalidArgumentError(f"isReuseSource must be a bool, got {isReuseSource!r}")
    if len(dims) == 3:
        dims.append(dims[2])
    return dims, _uint32("typeSize", typeSize)


class _Log:
    """Collects CANN's ASCENDC_HOST_ASSERT messages; raises TilingError with all of them."""

    def __init__(self, func):
        self.prefix = f"[{_API}][{func}] "
        self.messages = []

    def log(self, msg):
        self.messages.append(self.prefix + msg)

    def fail(self, msg):  # CANN logs and returns from the host function
        self.log(msg)
        self.done()

    def done(self):
        if self.messages:
            raise TilingError("\n".join(self.messages))

    def check_common(self, dims, typeSize):
        """CheckLayerNormGradBetaHostCommon: logs the first failing check only (spec §2.1)."""
        if typeSize not in (2, 4):
            self.log(f"Type size {typeSize} is unsupported!")
        elif not dims or math.prod(dims) <= 0:
            self.log("Input Shape size must be greater than 0.")
        elif len(dims) != 4:
            self.log(f"The dims of srcShape is {len(dims)}, should be 4 "
                     "(e.g. [B, S, storageHLength, originHLength])!")
        if len(dims) < 4:  # CANN: "srcShape dims must not be less than 4." and return
            self.fail("srcShape dims must not be less than 4.")


def _max_min(dims, typeSize):
    """CANN's max/min formulas in bytes, uint32 like CANN (spec §2.2)."""
    B, S, H = dims[0], dims[1], dims[2]
    n = 4 if typeSize == 2 else 2
    return (n * B * S * H * 4) & _U32, (n * H * 4) & _U32


def GetLayerNormGradBetaMaxMinTmpSize(srcShape, typeSize, isReuseSource):
    """(maxValue, minValue) temp-buffer bytes; isReuseSource is ignored (spec §2.2)."""
    dims, typeSize = _args(srcShape, typeSize, isReuseSource)
    log = _Log("GetLayerNormGradBetaMaxMinTmpSize")
    log.check_common(dims, typeSize)
    log.done()
    return _max_min(dims, typeSize)


def GetLayerNormGradBetaNDTilingInfo(srcShape, stackBufferSize, typeSize, isReuseSource):
    """The tiling for a temp buffer of stackBufferSize bytes; isReuseSource is ignored (spec §2.3)."""
    dims, typeSize = _args(srcShape, typeSize, isReuseSource)
    stackBufferSize = _uint32("stackBufferSize", stackBufferSize)
    log = _Log("GetLayerNormGradBetaNDTilingInfo")
    log.check_common(dims, typeSize)

    B, S, H, Ho = dims[:4]
    bsh = (B * S * H) & _U32  # uint32 product in CANN: wraps mod 2**32 for huge shapes
    bs = (B * S) & _U32
    sb = stackBufferSize // 4  # bytes -> floats
    not_enough = (
        "stackBufferSize is not enough. "
        f"Got {stackBufferSize} bytes; GetLayerNormGradBetaMaxMinTmpSize gives minValue = "
        f"{_max_min(dims, typeSize)[1]} bytes for srcShape {dims} and typeSize {typeSize}. "
        "Pass a stackBufferSize (in bytes, not elements) of at least minValue.")
    if sb < ((H + H) & _U32):
        log.fail(not_enough)

    one, nbuf = sb, 1
    if typeSize == 2:
        nbuf = 2
        one = ((one - H - H) & _U32) // nbuf
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
