"""The emulated vector instructions, by their Ascend C names, built from the instruction table
(`table.py`)."""
from .mask import ResetMask, SetMaskCount, SetMaskNorm, SetVectorMask
from .sync import PipeBarrier, SetFlag, SyncAll, WaitFlag
from .table import TABLE, Instruction
from .types import (MASK_PLACEHOLDER, PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_S, PIPE_V,
                    BinaryRepeatParams, BrcbRepeatParams, DataCopyParams, HardEvent, MaskMode,
                    Pipe, RoundMode, UnaryRepeatParams)

Add, Sub, Mul, Div = (TABLE.wrapper(n) for n in ("Add", "Sub", "Mul", "Div"))
Max, Min = TABLE.wrapper("Max"), TABLE.wrapper("Min")
Adds, Muls, Maxs, Mins = (TABLE.wrapper(n) for n in ("Adds", "Muls", "Maxs", "Mins"))
Sqrt, Abs, Relu = (TABLE.wrapper(n) for n in ("Sqrt", "Abs", "Relu"))
Duplicate, Cast, Brcb = TABLE.wrapper("Duplicate"), TABLE.wrapper("Cast"), TABLE.wrapper("Brcb")
DuplicateLane = TABLE.wrapper("DuplicateLane")
BlockReduceSum = TABLE.wrapper("BlockReduceSum")
WholeReduceSum = TABLE.wrapper("WholeReduceSum")
PairReduceSum = TABLE.wrapper("PairReduceSum")
DataCopy = TABLE.wrapper("DataCopy")
SetCmpMask, Select = TABLE.wrapper("SetCmpMask"), TABLE.wrapper("Select")

INSTRUCTIONS = TABLE.instruction_names()


def register_instruction(entry):
    """Add an instruction to the table at run time (an `Instruction` with a module-level lane
    function for element-wise families); returns its wrapper."""
    return TABLE.register(entry)


def unregister_instruction(name):
    TABLE.unregister(name)
