"""An instruction as data: one int64 row with every parameter resolved at issue time.

The Python wrappers validate a call and resolve it into a row: operands, mask, repeats, strides,
the family kernel that runs it (KIND), how many sources it reads, a reduction's grouping, and the
mask register it leaves behind. The core executes rows one by one or replays recorded programs;
either way `executor.execute` is the only code that gives instructions their semantics, and it
dispatches on KIND, never on the numeric order of opcodes.
"""
import numpy as np

N_COLS = 31
(OP, KIND, PIPE, DT_DST, DT_SRC, DST, SRC0, SRC1, SCALAR, COUNTER, MASK0, MASK1, REPEAT,
 DST_BLK, SRC0_BLK, SRC1_BLK, DST_REP, SRC0_REP, SRC1_REP, ROUND, SAT, SOURCES,
 EMPTY_GROUPS, GROUP_WIDTH, GROUP_UNIT, MASK_SETS, REG_MODE, REG_LOW, REG_HIGH,
 SCALAR_AT, FLAT) = range(N_COLS)
# SCALAR: the scalar operand's bits in dst's type; SCALAR_AT: 0, or 1 + the byte address of a
# scalar register a GetValue filled, whose value the instruction uses instead (at execution).
# PIPE: the pipe the row runs on (a Pipe; DataCopy by direction, SetFlag/WaitFlag by event).
# SOURCES: vector operands read (Duplicate 0, Adds/Cast 1, Add 2).
# EMPTY_GROUPS (reductions): what a group whose lanes are all masked off gets (EMPTY_KEEP: left
# untouched, A2/A3/310P; EMPTY_ZERO: written as 0, the 950). GROUP_WIDTH: lanes summed per output;
# GROUP_UNIT: outputs per unit of dstRepStride.
# MASK_SETS: mask-register writes the call makes itself (cost model only): the count form sets
# counter mode, the count, normal mode and the full mask (4); a mask argument sets the mask (1).
# REG_MODE, REG_LOW, REG_HIGH: the mask register after the instruction (every row, events too).
# FLAT (element-wise rows): how many elements the contiguous loops run, or -1 for the lane walk
# (walk.flat_elements, set once the row's fields are; decoded at every execution it cost ~35 ns).

# DataCopy rows reuse columns: the burst parameters, the direction and the GM buffer's slot.
BLOCK_COUNT, BLOCK_LEN, SRC_GAP, DST_GAP, GM_SLOT, COPY_DIR = (REPEAT, DST_BLK, SRC0_BLK,
                                                               SRC1_BLK, SRC1, ROUND)
GM_TO_UB, UB_TO_GM, UB_TO_UB = 0, 1, 2
GM_SLOTS = 4  # `execute` always gets this many GM byte arrays

# Families of kernels (the KIND column); events change no byte and `execute` skips them.
# SCALAR_READ copies SRC0 bytes at UB address DST into the register at SRC1: a scalar register
# (GetValue) or the compare-mask register (SetCmpMask). SELECT: Select's tensor-scalar mode,
# per lane src0 or the compare-mask register's scalar (SCALAR_AT) by the selMask bit at SRC1.
ELEMENTWISE, REDUCE, COPY, EVENT, BROADCAST, SCALAR_READ, SELECT = range(7)

# Data type codes used inside kernels. I16 rows (Muls on int16) take the lane walk.
F32, F16, I16 = 0, 1, 2
DTYPE_CODE = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(np.int16): I16}

EMPTY_KEEP, EMPTY_ZERO = 0, 1


def new_row(entry, pipe=None):
    """A zeroed row of the table entry `entry` on `pipe` (default: the entry's own)."""
    row = np.zeros(N_COLS, dtype=np.int64)
    row[OP], row[KIND], row[FLAT] = entry.opcode, entry.family.kind, -1
    row[PIPE] = entry.pipe if pipe is None else pipe
    return row


def as_int64(word):
    """A 64-bit mask word (0 .. 2**64-1) stored in an int64 column."""
    return word - (1 << 64) if word >= (1 << 63) else word


def as_uint64(value):
    return int(value) & 0xFFFFFFFFFFFFFFFF


def set_register(row, mode, high, low):
    """The mask register the row leaves behind."""
    row[REG_MODE], row[REG_HIGH], row[REG_LOW] = int(mode), as_int64(high), as_int64(low)
    return row


def register_after(row):
    """(mode, high, low) of the mask register a row leaves, as Python ints."""
    return int(row[REG_MODE]), as_uint64(row[REG_HIGH]), as_uint64(row[REG_LOW])
