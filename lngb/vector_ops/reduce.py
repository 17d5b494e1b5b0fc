"""BlockReduceSum, WholeReduceSum, PairReduceSum (spec vector_unit.md §4).

Sums are binary trees of adjacent pairs, every step rounded to the data type. Where a group's
lanes are all masked off, A2/A3/310P leave the output untouched and the 950 writes 0. The table
entry's `group` (table.Grouping) gives the grouping: lanes per output, outputs per unit of
dstRepStride, the alignment of dst, and the argument order.
"""
import numpy as np

from ..errors import InvalidArgumentError
from .base import FLOAT_TYPES, Operand, resolve_mask
from .checks import Lanes, check_inside, check_local, check_range, footprint, spans
from .program import (COUNTER, DST, DST_REP, DT_DST, DT_SRC, DTYPE_CODE, EMPTY_GROUPS, EMPTY_KEEP,
                      EMPTY_ZERO, GROUP_UNIT, GROUP_WIDTH, MASK0, MASK1, MASK_SETS, REPEAT, SAT,
                      SOURCES, SRC0, SRC0_BLK, SRC0_REP, as_int64, new_row, set_register)
from .types import MaskMode


def _dst_spans(dst, dst_rep, lanes, width, unit, writes_empty_groups):
    """Per-repeat byte ranges of the outputs actually written."""
    size = dst.dtype.itemsize
    groups = lanes.epr // width
    lo = np.zeros(lanes.repeats, dtype=np.int64)
    hi = np.zeros(lanes.repeats, dtype=np.int64)
    for r in range(lanes.repeats):
        mask = lanes.mask if r < lanes.full else np.arange(lanes.epr) < lanes.tail
        k = np.flatnonzero(mask.reshape(groups, width).any(axis=1) | writes_empty_groups)
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


def issue_reduce(entry, dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                 is_set_mask):
    api = entry.name
    core = getattr(src, "core", None)
    operands = (("dst", dst), ("src", src))
    check_local(api, "src", src, core, FLOAT_TYPES, operands)
    size = src.dtype.itemsize
    width, unit, dst_align = entry.group.geometry(size)
    check_local(api, "dst", dst, core, FLOAT_TYPES, operands, align=dst_align)
    if dst.dtype != src.dtype:
        raise InvalidArgumentError(f"{api}: dst dtype {dst.dtype.name} != src dtype {src.dtype.name}")
    repeat = check_range(api, "repeatTime", repeatTime, 0, 255)
    # the repeat strides are int32 in Ascend C, and CANN's LayerNorm passes H and H / 8 for
    # rows of up to H = 6712: lngb takes what a uint16 holds (the hardware field's width is
    # not documented)
    dst_rep = check_range(api, "dstRepStride", dstRepStride, 0, 65535)
    s = Operand("src", src, check_range(api, "srcBlkStride", srcBlkStride, 0, 65535),
                check_range(api, "srcRepStride", srcRepStride, 0, 65535))
    epr = 256 // size
    # on the 950's vector registers the mask is a MaskReg: the mask register is not used or set
    on_registers = "VREG" in (dst.position, src.position)
    mode = MaskMode.NORMAL if on_registers else core.mask_mode
    counter, word0, word1, register = resolve_mask(api, core, mask, is_set_mask, epr, mode)
    if on_registers:
        mode, register = core.mask_mode, (core.mask_high, core.mask_low)
    lanes = Lanes.from_row_mask(epr, counter, word0, word1, repeat)
    empty = EMPTY_ZERO if core.product.kernel_path == "regbase" else EMPTY_KEEP
    check_inside(api, "src", src, footprint(src.address, size, s.blk, s.rep, lanes))
    dlo, dhi = _dst_spans(dst, dst_rep, lanes, width, unit, empty == EMPTY_ZERO)
    written = dlo < dhi
    if written.any():
        check_inside(api, "dst", dst, (int(dlo[written].min()), int(dhi[written].max())))
    _check_reads_before_writes(api, dlo, dhi, *spans(src.address, size, s.blk, s.rep, lanes))

    row = new_row(entry)
    row[DT_DST], row[DT_SRC] = DTYPE_CODE[dst.dtype], DTYPE_CODE[src.dtype]
    row[DST], row[DST_REP] = dst.address, dst_rep
    row[SRC0], row[SRC0_BLK], row[SRC0_REP] = src.address, s.blk, s.rep
    row[COUNTER], row[MASK0], row[MASK1] = counter, as_int64(word0), as_int64(word1)
    row[REPEAT], row[SAT], row[SOURCES] = repeat, core.sat_mode, 1
    row[EMPTY_GROUPS], row[GROUP_WIDTH], row[GROUP_UNIT] = empty, width, unit
    row[MASK_SETS] = int(is_set_mask)
    set_register(row, mode, *register)
    core.issue(row, (Operand("dst", dst, 1, dst_rep), s))


def make_wrapper(entry):
    """Ascend C's argument orders: WholeReduceSum takes the mask before repeatTime
    (group.mask_first), the other two repeatTime first."""
    api = entry.name
    if entry.group.mask_first:
        def wrapper(dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, *,
                    is_set_mask=True):
            issue_reduce(entry, dst, src, mask, repeatTime, dstRepStride, srcBlkStride,
                         srcRepStride, is_set_mask)
    else:
        def wrapper(dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride, *,
                    is_set_mask=True):
            issue_reduce(entry, dst, src, mask, repeatTime, dstRepStride, srcBlkStride,
                         srcRepStride, is_set_mask)
    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = f"{api}: {entry.doc}; dstRepStride in units of the group's outputs."
    return wrapper
