"""The emulated vector instructions, by their Ascend C names."""
from .binary import Add, Mul, Sub
from .cast import Cast
from .copy import DataCopy
from .duplicate import Duplicate
from .mask import ResetMask, SetMaskCount, SetMaskNorm, SetVectorMask
from .reduce import BlockReduceSum, PairReduceSum, WholeReduceSum
from .scalar import Adds, Muls
from .sync import PipeBarrier, SetFlag, SyncAll, WaitFlag
from .types import (MASK_PLACEHOLDER, PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_S, PIPE_V,
                    BinaryRepeatParams, DataCopyParams, HardEvent, MaskMode, Pipe, RoundMode,
                    UnaryRepeatParams)

INSTRUCTIONS = ("Add", "Sub", "Mul", "Adds", "Muls", "Duplicate", "Cast", "BlockReduceSum",
                "WholeReduceSum", "PairReduceSum", "DataCopy")
