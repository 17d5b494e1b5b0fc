"""Element loads and stores of the kernels (template.py), inlined where they are used."""
import numpy as np

from .._jit import njit
from .half import float_to_half, narrow_rint, widen
from .program import DT_DST, F32, SCALAR, SCALAR_AT
from .types import RoundMode

RINT, NONE = int(RoundMode.CAST_RINT), int(RoundMode.CAST_NONE)


@njit(inline="always")
def load(f32, u16, code, index):
    if code == F32:
        return f32[index]
    return widen(u16[index])


@njit(inline="always")
def store(f32, u16, code, index, value, round_mode, sat):
    if code == F32:
        f32[index] = value
    else:
        u16[index] = to_half(value, round_mode, sat)


@njit(inline="always")
def to_half(value, round_mode, sat):
    if round_mode == RINT or round_mode == NONE:
        return narrow_rint(value, sat)
    return float_to_half(value, round_mode, sat)


@njit(inline="always")
def scalar_value(f32, u16, row):
    """The scalar operand: its bits in the destination type, or the scalar register a GetValue
    filled (SCALAR_AT)."""
    if row[SCALAR_AT] != 0:
        address = row[SCALAR_AT] - 1
        if row[DT_DST] == F32:
            return f32[address >> 2]
        return widen(u16[address >> 1])
    bits = np.int64(row[SCALAR])
    if row[DT_DST] == F32:
        return np.uint32(bits & 0xFFFFFFFF).view(np.float32)
    return widen(np.uint16(bits & 0xFFFF))
