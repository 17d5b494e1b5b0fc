"""BlockReduceSum, WholeReduceSum, PairReduceSum (spec vector_unit.md §4).

Sums are binary trees of adjacent pairs, every step rounded to the data type. Where a group's
lanes are all masked off, A2/A3/310P leave the output untouched and the 950 writes 0.
"""
import numpy as np

from ..errors import InvalidArgumentError
from .base import FLOAT_TYPES, Operand, issue_with_mask, resolve_mask
from .checks import Lanes, check_inside, check_local, check_range, footprint, spans
from .program import (BLOCK_REDUCE_SUM, COUNTER, DST, DST_REP, DT_DST, DT_SRC, DTYPE_CODE,
                      FAMILY, FAMILY_KEEP, FAMILY_ZERO, MASK0, MASK1, MASK_SETS, OP,
                      PAIR_REDUCE_SUM, REPEAT, SAT, SRC0, SRC0_BLK, SRC0_REP, WHOLE_REDUCE_SUM,
                      as_int64, new_row)
from .walk import reduce_geometry


def _dst_spans(op, dst, dst_rep, lanes, writes_empty_groups):
    """Per-repeat byte ranges of the outputs actually written."""
    size = dst.dtype.itemsize
    width, unit = reduce_geometry(op, size, lanes.epr)
    groups = lanes.epr // width

    def written(mask):
        hit = mask.reshape(groups, width).any(axis=1) | writes_empty_groups
        return np.flatnonzero(hit)

    lo = np.zeros(lanes.repeats, dtype=np.int64)
    hi = np.zeros(lanes.repeats, dtype=np.int64)
    for r in range(lanes.repeats):
        mask = lanes.mask if r < lanes.full else np.arange(lanes.epr) < lanes.tail
        k = written(mask)
        base = dst.address + size * r * dst_rep * unit
        lo[r], hi[r] = (base + size * k[0], base + size * (k[-1] + 1)) if k.size else (base, base)
    return lo, hi


def _check_reads_before_writes(api, dlo, dhi, slo, shi):
    """Outputs of a repeat may not overwrite source data a later repeat still has to read."""
    if dlo.size == 0 or not (dlo.min() < shi.max() and slo.min() < dhi.max()):
        return
    for r in range(dlo.size - 1):
        later = (dlo[r] < shi[r + 1:]) & (slo[r + 1:] < dhi[r])
        if later.any():
            k = r + 1 + int(np.argmax(later))
            raise InvalidArgumentError(
                f"{api}: the outputs of repeat {r} (bytes [{dlo[r]}, {dhi[r]})) overwrite source "
                f"bytes that repeat {k} reads ([{slo[k]}, {shi[k]}))")


def _reduce(api, op, dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
            is_set_mask):
    core = dst.core
    size = src.dtype.itemsize
    dst_align = {BLOCK_REDUCE_SUM: 16 if size == 2 else 32, WHOLE_REDUCE_SUM: size,
                 PAIR_REDUCE_SUM: 32}[op]
    check_local(api, "src", src, core, FLOAT_TYPES)
    check_local(api, "dst", dst, core, FLOAT_TYPES, align=dst_align)
    if dst.dtype != src.dtype:
        raise InvalidArgumentError(f"{api}: dst dtype {dst.dtype.name} != src dtype {src.dtype.name}")
    repeat = check_range(api, "repeatTime", repeatTime, 0, 255)
    dst_rep = check_range(api, "dstRepStride", dstRepStride, 0, 255)
    s = Operand("src", src, check_range(api, "srcBlkStride", srcBlkStride, 0, 65535),
                check_range(api, "srcRepStride", srcRepStride, 0, 255))
    epr = 256 // size
    counter, word0, word1, register = resolve_mask(api, core, mask, is_set_mask, epr)
    lanes = Lanes.from_row_mask(epr, counter, word0, word1, repeat)
    family = FAMILY_ZERO if core.product.kernel_path == "regbase" else FAMILY_KEEP
    check_inside(api, "src", src, footprint(src.address, size, s.blk, s.rep, lanes))
    dlo, dhi = _dst_spans(op, dst, dst_rep, lanes, family == FAMILY_ZERO)
    written = dlo < dhi
    if written.any():
        check_inside(api, "dst", dst, (int(dlo[written].min()), int(dhi[written].max())))
    _check_reads_before_writes(api, dlo, dhi, *spans(src.address, size, s.blk, s.rep, lanes))

    row = new_row()
    row[OP], row[DT_DST], row[DT_SRC] = op, DTYPE_CODE[dst.dtype], DTYPE_CODE[src.dtype]
    row[DST], row[DST_REP] = dst.address, dst_rep
    row[SRC0], row[SRC0_BLK], row[SRC0_REP] = src.address, s.blk, s.rep
    row[COUNTER], row[MASK0], row[MASK1] = counter, as_int64(word0), as_int64(word1)
    row[REPEAT], row[SAT], row[FAMILY] = repeat, core.sat_mode, family
    row[MASK_SETS] = int(is_set_mask)
    issue_with_mask(core, api, row, (Operand("dst", dst, 1, dst_rep), s), register,
                    core.mask_mode)


def BlockReduceSum(dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride, *,
                   is_set_mask=True):
    """One sum per 32-byte block: 8 outputs per repeat; dstRepStride in units of 8 elements."""
    _reduce("BlockReduceSum", BLOCK_REDUCE_SUM, dst, src, mask, repeatTime, dstRepStride,
            srcBlkStride, srcRepStride, is_set_mask)


def WholeReduceSum(dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, *,
                   is_set_mask=True):
    """One sum per repeat; dstRepStride in elements. Note: mask comes before repeatTime."""
    _reduce("WholeReduceSum", WHOLE_REDUCE_SUM, dst, src, mask, repeatTime, dstRepStride,
            srcBlkStride, srcRepStride, is_set_mask)


def PairReduceSum(dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride, *,
                  is_set_mask=True):
    """Sums of adjacent lane pairs: epr/2 outputs per repeat; dstRepStride in 128-byte units."""
    _reduce("PairReduceSum", PAIR_REDUCE_SUM, dst, src, mask, repeatTime, dstRepStride,
            srcBlkStride, srcRepStride, is_set_mask)
