"""The jitted kernels every table shares: element loads and stores, the reduction and DataCopy
families. A kernel gets the UB bytes (and GM bytes for DataCopy) and one resolved instruction
row; it never sees the core object. The element-wise walk and the executor that dispatches rows
to all of them are in `template.py`, copied per table by `table.py`.
"""
import numpy as np

from .._jit import njit
from .half import float_to_half, narrow_rint, widen
from .lanes import add
from .program import (BLOCK_COUNT, COPY_DIR, DST, DST_REP, DT_DST, EMPTY_GROUPS, EMPTY_ZERO, F32,
                      GM_TO_UB, GROUP_UNIT, GROUP_WIDTH, SAT, SCALAR, SRC0, SRC0_BLK, SRC0_REP,
                      UB_TO_GM)
from .types import RoundMode
from .walk import (burst, dtype_size, lane_active, lane_index,
                   repeat_count)

RINT, NONE = int(RoundMode.CAST_RINT), int(RoundMode.CAST_NONE)


@njit
def load(f32, u16, code, index):
    if code == F32:
        return f32[index]
    return widen(u16[index])


@njit
def store(f32, u16, code, index, value, round_mode, sat):
    if code == F32:
        f32[index] = value
    else:
        u16[index] = to_half(value, round_mode, sat)


@njit
def to_half(value, round_mode, sat):
    if round_mode == RINT or round_mode == NONE:
        return narrow_rint(value, sat)
    return float_to_half(value, round_mode, sat)


@njit
def scalar_value(row):
    """The scalar operand, stored as the bit pattern of the destination type."""
    bits = np.int64(row[SCALAR])
    if row[DT_DST] == F32:
        return np.uint32(bits & 0xFFFFFFFF).view(np.float32)
    return widen(np.uint16(bits & 0xFFFF))


# --- reductions ----------------------------------------------------------------------------

@njit
def _round_sum(a, b, code, sat):
    total = add(a, b, a)
    if code == F32:
        return total
    return widen(narrow_rint(total, sat))


@njit
def _tree_sum(values, present, start, width, code, sat):
    """Binary tree of adjacent pairs over values[start:start+width]; masked lanes are absent.

    Returns (sum, any lane present). A node with one absent child passes the other through.
    """
    v = values[start:start + width].copy()
    p = present[start:start + width].copy()
    n = width
    while n > 1:
        for i in range(n // 2):
            a, b = v[2 * i], v[2 * i + 1]
            pa, pb = p[2 * i], p[2 * i + 1]
            if pa and pb:
                v[i] = _round_sum(a, b, code, sat)
            elif pa:
                v[i] = a
            else:
                v[i] = b
            p[i] = pa or pb
        n //= 2
    return v[0], p[0]


@njit
def reduce(f32, u16, row):
    """Sums of groups of GROUP_WIDTH lanes, GROUP_UNIT outputs per unit of dstRepStride."""
    dt = row[DT_DST]
    size = dtype_size(dt)
    epr = 256 // size
    sat = row[SAT] != 0
    width, unit = row[GROUP_WIDTH], row[GROUP_UNIT]
    values = np.zeros(128, dtype=np.float32)
    present = np.zeros(128, dtype=np.bool_)
    dst = row[DST] // size
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            present[e] = lane_active(row, r, e, epr)
            if present[e]:
                values[e] = load(f32, u16, dt, lane_index(row[SRC0], size, row[SRC0_BLK],
                                                          row[SRC0_REP], r, e))
        for k in range(epr // width):
            total, any_present = _tree_sum(values, present, k * width, width, dt, sat)
            out = dst + r * row[DST_REP] * unit + k
            if any_present:
                store(f32, u16, dt, out, total, RINT, sat)
            elif row[EMPTY_GROUPS] == EMPTY_ZERO:
                store(f32, u16, dt, out, np.float32(0.0), RINT, sat)


# --- DataCopy ------------------------------------------------------------------------------

@njit
def copy(ub, gm, row):
    """BLOCK_COUNT bursts of BLOCK_LEN 32-byte blocks with gaps between them."""
    direction = row[COPY_DIR]
    src_buf = gm if direction == GM_TO_UB else ub
    dst_buf = gm if direction == UB_TO_GM else ub
    for i in range(row[BLOCK_COUNT]):
        s, d, length = burst(row, i)
        dv, sv = dst_buf[d:d + length], src_buf[s:s + length]
        for k in range(length):  # a plain loop: numba's slice assignment copies byte by byte
            dv[k] = sv[k]
