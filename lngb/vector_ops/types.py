"""Ascend C enums, constants and repeat-parameter structs, with their Ascend C names."""
import enum
from dataclasses import dataclass


class RoundMode(enum.IntEnum):
    CAST_NONE = 0   # RINT when the conversion loses precision, exact otherwise
    CAST_RINT = 1   # nearest, ties to even
    CAST_FLOOR = 2
    CAST_CEIL = 3
    CAST_ROUND = 4  # nearest, ties away from zero
    CAST_TRUNC = 5
    CAST_ODD = 6    # von Neumann: truncate, set the last bit if inexact


class MaskMode(enum.IntEnum):
    NORMAL = 0
    COUNTER = 1


class Pipe(enum.IntEnum):
    PIPE_S = 0
    PIPE_V = 1
    PIPE_MTE2 = 2
    PIPE_MTE3 = 3
    PIPE_ALL = 4


PIPE_S, PIPE_V, PIPE_MTE2, PIPE_MTE3, PIPE_ALL = Pipe


class HardEvent(enum.Enum):
    """SetFlag/WaitFlag events as (source pipe, destination pipe)."""
    MTE2_V = (Pipe.PIPE_MTE2, Pipe.PIPE_V)
    V_MTE2 = (Pipe.PIPE_V, Pipe.PIPE_MTE2)
    V_MTE3 = (Pipe.PIPE_V, Pipe.PIPE_MTE3)
    MTE3_V = (Pipe.PIPE_MTE3, Pipe.PIPE_V)
    S_V = (Pipe.PIPE_S, Pipe.PIPE_V)
    V_S = (Pipe.PIPE_V, Pipe.PIPE_S)
    MTE2_S = (Pipe.PIPE_MTE2, Pipe.PIPE_S)
    S_MTE2 = (Pipe.PIPE_S, Pipe.PIPE_MTE2)
    MTE3_S = (Pipe.PIPE_MTE3, Pipe.PIPE_S)
    S_MTE3 = (Pipe.PIPE_S, Pipe.PIPE_MTE3)
    MTE2_MTE3 = (Pipe.PIPE_MTE2, Pipe.PIPE_MTE3)
    MTE3_MTE2 = (Pipe.PIPE_MTE3, Pipe.PIPE_MTE2)

    @property
    def src(self):
        return self.value[0]

    @property
    def dst(self):
        return self.value[1]


class _MaskPlaceholder:
    """Stands for the mask argument when the mask register is used as set (is_set_mask=False)."""

    def __repr__(self):
        return "MASK_PLACEHOLDER"


MASK_PLACEHOLDER = _MaskPlaceholder()


@dataclass
class BinaryRepeatParams:
    dstBlkStride: int = 1
    src0BlkStride: int = 1
    src1BlkStride: int = 1
    dstRepStride: int = 8
    src0RepStride: int = 8
    src1RepStride: int = 8


@dataclass
class UnaryRepeatParams:
    dstBlkStride: int = 1
    srcBlkStride: int = 1
    dstRepStride: int = 8
    srcRepStride: int = 8


@dataclass
class BrcbRepeatParams:
    """Brcb's destination strides, in 32-byte blocks."""
    dstBlkStride: int = 1
    dstRepStride: int = 8


@dataclass
class DataCopyParams:
    """Strided bursts between GM and UB; lengths and gaps in 32-byte blocks."""
    blockCount: int = 1
    blockLen: int = 0
    srcStride: int = 0
    dstStride: int = 0
