"""The mask / repeat / block-stride walk, written once (spec vector_unit.md §2.2, §2.4).

Every vector kernel asks these helpers which lanes are active and where lane e of repeat r of an
operand lives; the kernels themselves only say what happens to one lane.
"""
from .._jit import njit
from .program import BLOCK_REDUCE_SUM, COUNTER, MASK0, MASK1, REPEAT, WHOLE_REDUCE_SUM


@njit
def reduce_geometry(op, size, epr):
    """(lanes summed per output, outputs per unit of dstRepStride) of a reduction."""
    if op == BLOCK_REDUCE_SUM:
        return 32 // size, 8
    if op == WHOLE_REDUCE_SUM:
        return epr, 1
    return 2, epr // 2  # PairReduceSum


@njit
def lanes_per_repeat(dst_size, src_size):
    return 256 // max(dst_size, src_size)


@njit
def repeat_count(row, epr):
    """Repeats executed: repeatTime in normal mode, ceil(count / epr) in counter mode."""
    if row[COUNTER] != 0:
        return (row[MASK0] + epr - 1) // epr
    if row[MASK0] == 0 and row[MASK1] == 0:
        return 0  # no lane set: the instruction is a no-op
    return row[REPEAT]


@njit
def lane_active(row, r, e, epr):
    if row[COUNTER] != 0:
        return r * epr + e < row[MASK0]
    if e < 64:
        return (row[MASK0] >> e) & 1 == 1
    return (row[MASK1] >> (e - 64)) & 1 == 1


@njit
def lane_index(address, size, blk_stride, rep_stride, r, e):
    """Element index (in units of `size` bytes) of lane e of repeat r of an operand."""
    per_block = 32 // size
    byte = address + 32 * rep_stride * r + 32 * blk_stride * (e // per_block)
    return byte // size + e % per_block


@njit
def contiguous(size, blk_stride, rep_stride, epr):
    """True when the operand's lanes follow each other in memory across repeats."""
    return blk_stride == 1 and rep_stride * 32 == epr * size


@njit
def flat_count(row, epr):
    """Elements touched when every lane of every repeat is active, else -1 (counter mode: count)."""
    if row[COUNTER] != 0:
        return row[MASK0]
    full_low = row[MASK0] == -1
    full_high = epr <= 64 or row[MASK1] == -1
    if full_low and full_high:
        return row[REPEAT] * epr
    return -1
