"""Validation shared by the instruction wrappers: validate everything, then mutate.

Footprints are exact: every active lane of every repeat, with block and repeat strides, is taken
into account (spec vector_unit.md §2.2, §5.1).
"""
import numpy as np

from ..arguments import check_int, is_int
from ..errors import AlignmentError, InvalidArgumentError, OutOfBoundsError
from ..tensor import UB_POSITIONS, LocalTensor

UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1


def check_range(api, name, value, lo, hi):
    """An integer in [lo, hi] (arguments.check_int with both bounds)."""
    return check_int(api, name, value, lo, hi)


def enum_arg(api, name, enum_cls, value):
    """`value` as a member of `enum_cls` (a member, or an integer one has as its value), or
    InvalidArgumentError listing the members."""
    if isinstance(value, enum_cls):
        return value
    if is_int(value) and int(value) in {m.value for m in enum_cls}:
        return enum_cls(int(value))
    raise InvalidArgumentError(f"{api}: {name} {value!r} is not one of "
                               f"{', '.join(m.name for m in enum_cls)}")


def check_local(api, name, tensor, core, dtypes, operands=(), align=32):
    """A vector operand: a LocalTensor on `core`, in a UB position, of an allowed dtype, aligned.
    `operands` ((name, tensor) pairs of the call) name the cores when they differ."""
    if not isinstance(tensor, LocalTensor):
        raise InvalidArgumentError(f"{api}: {name} must be a LocalTensor, got {type(tensor).__name__}")
    if tensor.core is not core:
        where = ", ".join(f"{n} on {t.core!r}" for n, t in operands if isinstance(t, LocalTensor))
        raise InvalidArgumentError(f"{api}: all operands must be on one AICore, but {where}")
    if tensor.position not in UB_POSITIONS + ("VREG",):
        raise InvalidArgumentError(
            f"{api}: {name} position is {tensor.position}; supported positions are "
            f"{'/'.join(UB_POSITIONS)}")
    if tensor.dtype not in dtypes:
        allowed = ", ".join(np.dtype(d).name for d in dtypes)
        raise InvalidArgumentError(f"{api}: {name} dtype {tensor.dtype.name} is not supported "
                                   f"(allowed: {allowed})")
    limit = tensor.core.ub.size if tensor.position == "VREG" else tensor.core.ub_size
    if tensor.address < 0 or tensor.address + tensor.nbytes > limit:
        raise OutOfBoundsError(
            f"{api}: {name} covers UB bytes [{tensor.address}, {tensor.address + tensor.nbytes}), "
            f"outside the UB's {limit} bytes")
    if tensor.address % align:
        raise AlignmentError(
            f"{api}: {name} start address {tensor.address} must be aligned to {align} bytes "
            f"(it is {tensor.address % align} bytes past a boundary); allocate with core.alloc "
            f"or offset views by whole {align}-byte blocks")


class Lanes:
    """Which lanes of which repeats an instruction touches: `full` repeats with the lanes set in
    `bits`, then optionally one last repeat with the first `tail` lanes (counter mode)."""

    __slots__ = ("epr", "bits", "full", "tail")

    def __init__(self, epr, bits, full, tail=0):
        self.epr, self.bits, self.full, self.tail = epr, bits, full, tail

    @classmethod
    def from_row_mask(cls, epr, counter, m0, m1, repeat):
        if counter:
            full, tail = divmod(m0, epr)
            return cls(epr, (1 << epr) - 1, full, tail)
        bits = (m0 | (m1 << 64)) & ((1 << epr) - 1)
        return cls(epr, bits, repeat if bits else 0)

    @property
    def repeats(self):
        return self.full + (1 if self.tail else 0)

    @property
    def mask(self):
        return np.array([(self.bits >> e) & 1 for e in range(self.epr)], dtype=bool)


def lane_offset(size, blk_stride, e):
    per_block = 32 // size
    return 32 * blk_stride * (e // per_block) + size * (e % per_block)


def footprint(address, size, blk_stride, rep_stride, lanes):
    """The bytes [first, last) an operand touches, or None when it touches nothing."""
    if lanes.repeats == 0:
        return None
    if blk_stride == 0:  # lane offsets are not monotonic: take the exact per-repeat spans
        lo, hi = spans(address, size, blk_stride, rep_stride, lanes)
        return int(lo.min()), int(hi.max())
    last = first = None
    if lanes.full:
        lowest, highest = (lanes.bits & -lanes.bits).bit_length() - 1, lanes.bits.bit_length() - 1
        first = address + lane_offset(size, blk_stride, lowest)
        last = (address + 32 * rep_stride * (lanes.full - 1)
                + lane_offset(size, blk_stride, highest) + size)
    if lanes.tail:
        start = address + 32 * rep_stride * lanes.full
        first = start if first is None else min(first, start)
        tail_last = start + lane_offset(size, blk_stride, lanes.tail - 1) + size
        last = tail_last if last is None else max(last, tail_last)
    return first, last


def spans(address, size, blk_stride, rep_stride, lanes):
    """Per-repeat byte ranges [lo, hi) of an operand (empty arrays when nothing is touched)."""
    e = np.arange(lanes.epr)
    offsets = 32 * blk_stride * (e // (32 // size)) + size * (e % (32 // size))
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


def block_spans(address, size, blk_stride, rep_stride, lanes):
    """Byte ranges [lo, hi) of the active lanes of each 32-byte block of each repeat, as
    [repeats, blocks] arrays (empty ranges for blocks with no active lane)."""
    per_block = 32 // size
    blocks = lanes.epr // per_block
    masks = np.tile(lanes.mask, (lanes.repeats, 1))
    if lanes.tail:
        masks[-1] = np.arange(lanes.epr) < lanes.tail
    masks = masks.reshape(lanes.repeats, blocks, per_block)
    e = np.arange(per_block)
    first = np.where(masks, e, per_block).min(axis=2)
    last = np.where(masks, e, -1).max(axis=2)
    starts = (address + 32 * rep_stride * np.arange(lanes.repeats)[:, None]
              + 32 * blk_stride * np.arange(blocks)[None, :])
    active = last >= 0
    return (np.where(active, starts + size * first, 0),
            np.where(active, starts + size * (last + 1), 0))


def check_inside(api, name, tensor, extent):
    """The footprint [first, last) lies in the tensor and in the UB."""
    if extent is None:
        return
    first, last = extent
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


def check_no_partial_overlap(api, dst, src, lanes):
    """Within one repeat a source and the destination overlap completely or not at all.

    dst and src are Operands whose `extent` is set; the exact per-repeat comparison runs only
    when their footprints meet and their layouts differ.
    """
    if dst.extent is None or src.extent is None:
        return
    if dst.extent[1] <= src.extent[0] or src.extent[1] <= dst.extent[0]:
        return
    geometry = lambda o: (o.tensor.address, o.tensor.dtype.itemsize, o.blk, o.rep)
    if geometry(dst) == geometry(src):
        return
    daddr, dsize, dblk, drep = geometry(dst)
    saddr, ssize, sblk, srep = geometry(src)
    dlo, dhi = block_spans(daddr, dsize, dblk, drep, lanes)
    slo, shi = block_spans(saddr, ssize, sblk, srep, lanes)
    meet = ((dlo[:, :, None] < shi[:, None, :]) & (slo[:, None, :] < dhi[:, :, None])).any(axis=(1, 2))
    r = np.arange(dlo.shape[0], dtype=np.int64)
    identical = (daddr + 32 * drep * r == saddr + 32 * srep * r) & (dsize == ssize) & (dblk == sblk)
    bad = np.flatnonzero(meet & ~identical)
    if bad.size:
        k = int(bad[0])
        raise InvalidArgumentError(
            f"{api}: {dst.name} and {src.name} share some but not all bytes in repeat {k} "
            f"({dst.name} from byte {daddr + 32 * drep * k}, {src.name} from byte "
            f"{saddr + 32 * srep * k}); within a repeat operands must coincide exactly or not "
            f"overlap at all")
