"""An instruction as data: one int64 row with every parameter resolved at issue time.

The Python wrappers validate a call, resolve the mask register into the row, and hand the row to
the core. The core executes rows one by one (observed) or replays a recorded program (fast);
either way `kernels.execute` is the only code that gives instructions their semantics.
"""
import numpy as np

N_COLS = 21
(OP, DT_DST, DT_SRC, DST, SRC0, SRC1, SCALAR, COUNTER, MASK0, MASK1, REPEAT,
 DST_BLK, SRC0_BLK, SRC1_BLK, DST_REP, SRC0_REP, SRC1_REP, ROUND, SAT, FAMILY,
 MASK_SETS) = range(N_COLS)
# MASK_SETS: mask-register writes the call makes itself (cost model only): the count form sets
# counter mode, the count, normal mode and the full mask (4); a mask argument sets the mask (1).

# DataCopy rows reuse columns: the burst parameters, and which of the GM buffers they use.
BLOCK_COUNT, BLOCK_LEN, SRC_GAP, DST_GAP, GM_SLOT = REPEAT, DST_BLK, SRC0_BLK, SRC1_BLK, SRC1
GM_SLOTS = 4  # `execute` always gets this many GM byte arrays

# Opcodes, grouped by kernel family.
ADD, SUB, MUL = 1, 2, 3
ADDS, MULS = 10, 11
DUPLICATE = 20
CAST = 30
BLOCK_REDUCE_SUM, WHOLE_REDUCE_SUM, PAIR_REDUCE_SUM = 40, 41, 42
COPY_GM_TO_UB, COPY_UB_TO_GM, COPY_UB_TO_UB = 50, 51, 52
# Events: rows in the stream that order or configure, but change no byte (`execute` skips them).
# PipeBarrier: DST = pipe; SetFlag/WaitFlag: DST = source pipe, SRC0 = destination pipe,
# SRC1 = event id; mask setup: SRC1 = which call (mask.MASK_APIS), COUNTER, MASK0, MASK1 = the
# mode and register after it;
# GetValue/SetValue: DST = the UB address; UNDEFINE (no device instruction: a call declaring bytes
# undefined, e.g. the buffers isReuseSource clobbers, for the sanitizer): DST = address,
# SRC0 = bytes; SyncAll (every core of the operator waits for all the others; a PIPE_ALL
# barrier on each core).
EVENT_BASE = 60
PIPE_BARRIER, SET_FLAG, WAIT_FLAG, SET_MASK, SCALAR_ACCESS, UNDEFINE, SYNC_ALL = range(60, 67)

# Data type codes used inside kernels.
F32, F16 = 0, 1
DTYPE_CODE = {np.dtype(np.float32): F32, np.dtype(np.float16): F16}

# Reduction behaviour for groups whose lanes are all masked off (spec vector_unit.md §4).
FAMILY_KEEP, FAMILY_ZERO = 0, 1


def new_row():
    return np.zeros(N_COLS, dtype=np.int64)


def event_row(op, dst=0, src0=0, src1=0):
    row = new_row()
    row[OP], row[DST], row[SRC0], row[SRC1] = op, dst, src0, src1
    return row


def as_int64(word):
    """A 64-bit mask word (0 .. 2**64-1) stored in an int64 column."""
    return word - (1 << 64) if word >= (1 << 63) else word
