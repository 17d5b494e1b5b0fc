"""Validation shared by the instruction wrappers: validate everything, then mutate.

Footprints are exact: every active lane of every repeat, with block and repeat strides, is taken
into account (spec vector_unit.md §2.2, §5.1).
"""
import numpy as np

from ..errors import AlignmentError, InvalidArgumentError, OutOfBoundsError
from ..tensor import UB_POSITIONS, LocalTensor

UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1


def check_range(api, name, value, lo, hi):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"{api}: {name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidArgumentError(
            f"{api}: {name} = {value} is outside its valid range {lo} ~ {hi}")
    return int(value)


def check_local(api, name, tensor, core, dtypes, align=32):
    """A vector operand: a LocalTensor on `core`, in a UB position, of an allowed dtype, aligned."""
    if not isinstance(tensor, LocalTensor):
        raise InvalidArgumentError(f"{api}: {name} must be a LocalTensor, got {type(tensor).__name__}")
    if tensor.core is not core:
        raise InvalidArgumentError(f"{api}: {name} lives on another AICore; all operands must "
                                   "be on one core")
    if tensor.position not in UB_POSITIONS + ("VREG",):
        raise InvalidArgumentError(
            f"{api}: {name} position is {tensor.position}; supported positions are "
            f"{'/'.join(UB_POSITIONS)}")
    if tensor.dtype not in dtypes:
        allowed = ", ".join(np.dtype(d).name for d in dtypes)
        raise InvalidArgumentError(f"{api}: {name} dtype {tensor.dtype.name} is not supported "
                                   f"(allowed: {allowed})")
    if tensor.address % align:
        raise AlignmentError(
            f"{api}: {name} start address {tensor.address} must be aligned to {align} bytes "
            f"(it is {tensor.address % align} bytes past a boundary); allocate with core.alloc "
            f"or offset views by whole {align}-byte blocks")


class Lanes:
    """Which lanes of which repeats an instruction touches: `full` repeats with `mask` lanes,
    then optionally one last repeat with the first `tail` lanes (counter mode)."""

    __slots__ = ("epr", "mask", "full", "tail")

    def __init__(self, epr, mask, full, tail=0):
        self.epr, self.mask, self.full, self.tail = epr, mask, full, tail

    @classmethod
    def from_row_mask(cls, epr, counter, m0, m1, repeat):
        if counter:
            full, tail = divmod(m0, epr)
            return cls(epr, np.ones(epr, dtype=bool), full, tail)
        bits = np.array([(m0 >> e) & 1 if e < 64 else (m1 >> (e - 64)) & 1 for e in range(epr)],
                        dtype=bool)
        return cls(epr, bits, repeat if bits.any() else 0)

    @property
    def repeats(self):
        return self.full + (1 if self.tail else 0)


def lane_offsets(size, blk_stride, epr):
    e = np.arange(epr)
    per_block = 32 // size
    return 32 * blk_stride * (e // per_block) + size * (e % per_block)


def spans(address, size, blk_stride, rep_stride, lanes):
    """Per-repeat byte ranges [lo, hi) of an operand (empty arrays when nothing is touched)."""
    offsets = lane_offsets(size, blk_stride, lanes.epr)
    starts = address + 32 * rep_stride * np.arange(lanes.repeats, dtype=np.int64)
    lo = np.empty(lanes.repeats, dtype=np.int64)
    hi = np.empty(lanes.repeats, dtype=np.int64)
    if lanes.full:
        active = offsets[lanes.mask]
        lo[:lanes.full] = starts[:lanes.full] + active.min()
        hi[:lanes.full] = starts[:lanes.full] + active.max() + size
    if lanes.tail:
        active = offsets[:lanes.tail]
        lo[-1] = starts[-1] + active.min()
        hi[-1] = starts[-1] + active.max() + size
    return lo, hi


def check_inside(api, name, tensor, lo, hi):
    """The footprint [lo.min(), hi.max()) lies in the tensor and in the UB."""
    if lo.size == 0:
        return
    first, last = int(lo.min()), int(hi.max())
    end = tensor.address + tensor.nbytes
    if first < tensor.address or last > end:
        raise OutOfBoundsError(
            f"{api}: {name} touches UB bytes [{first}, {last}) but its LocalTensor covers "
            f"[{tensor.address}, {end}) ({tensor.size} x {tensor.dtype.name}); reduce the count, "
            f"repeatTime or strides, or allocate a larger tensor")
    limit = tensor.core.ub.size if tensor.position == "VREG" else tensor.core.ub_size
    if last > limit:
        raise OutOfBoundsError(f"{api}: {name} touches UB bytes up to {last}, beyond the UB "
                               f"size {limit}")


def check_no_partial_overlap(api, dst_name, dst, src_name, src):
    """Within one repeat a source and the destination overlap completely or not at all.

    dst and src are (lo, hi, address, size, blk_stride, rep_stride) of each operand.
    """
    dlo, dhi, daddr, dsize, dblk, drep = dst
    slo, shi, saddr, ssize, sblk, srep = src
    n = min(dlo.size, slo.size)
    if n == 0:
        return
    r = np.arange(n, dtype=np.int64)
    intersect = (dlo[:n] < shi[:n]) & (slo[:n] < dhi[:n])
    identical = ((daddr + 32 * drep * r == saddr + 32 * srep * r)
                 & (dsize == ssize) & (dblk == sblk))
    bad = np.flatnonzero(intersect & ~identical)
    if bad.size:
        k = int(bad[0])
        raise InvalidArgumentError(
            f"{api}: {dst_name} bytes [{dlo[k]}, {dhi[k]}) partially overlap {src_name} bytes "
            f"[{slo[k]}, {shi[k]}) in repeat {k}; within a repeat operands must coincide "
            f"exactly or not overlap at all")
