"""DataCopy between GM and UB, and UB to UB (spec vector_unit.md §6).

The count form copies floor(count * sizeof(T) / 32) whole 32-byte blocks; the DataCopyParams form
copies blockCount bursts of blockLen blocks, with srcStride/dstStride blocks between bursts.
"""
import numpy as np

from ..errors import AlignmentError, InvalidArgumentError, OutOfBoundsError
from ..tensor import GlobalTensor, LocalTensor
from .checks import check_local, check_range
from .program import (BLOCK_COUNT, BLOCK_LEN, COPY_DIR, DST, DST_GAP, GM_TO_UB, SRC0, SRC_GAP,
                      UB_TO_GM, UB_TO_UB, new_row, set_register)
from .types import DataCopyParams, Pipe
from .walk import burst_extent

DIRECTIONS = {(LocalTensor, GlobalTensor): (GM_TO_UB, Pipe.PIPE_MTE2),
              (GlobalTensor, LocalTensor): (UB_TO_GM, Pipe.PIPE_MTE3),
              (LocalTensor, LocalTensor): (UB_TO_UB, Pipe.PIPE_V)}


def _check_side(api, name, tensor, extent):
    if isinstance(tensor, LocalTensor):
        start, limit = tensor.address, tensor.nbytes
    else:
        start, limit = tensor.offset, tensor.size * tensor.dtype.itemsize
        if tensor.gm.dtype != np.uint8 or limit < 0:  # not made by GlobalTensor's checks
            raise InvalidArgumentError(f"{api}: {name} is a GlobalTensor of {tensor.size} elements "
                                       f"over a {tensor.gm.dtype} buffer; GM tensors are views "
                                       "of uint8 bytes (GlobalTensor(array), in_arena)")
        if start < 0 or start + limit > tensor.gm.size:
            raise OutOfBoundsError(f"{api}: {name} GM bytes [{start}, {start + limit}) lie outside "
                                   f"its {tensor.gm.size}-byte GM buffer")
    if extent > limit:
        raise OutOfBoundsError(
            f"{api}: {name} would be accessed over {extent} bytes from byte {start}, but the "
            f"tensor holds {limit} bytes; reduce blockCount/blockLen/gaps or the count")


def _check_ub_overlap(api, dst, src, extents):
    """UB -> UB: the two sides may coincide exactly or not overlap at all (as the vector
    instructions); anything else would smear data burst by burst."""
    (s_lo, s_hi), (d_lo, d_hi) = extents
    if s_lo < d_hi and d_lo < s_hi and (s_lo, s_hi) != (d_lo, d_hi):
        raise InvalidArgumentError(
            f"{api}: src UB bytes [{s_lo}, {s_hi}) and dst UB bytes [{d_lo}, {d_hi}) overlap in "
            "part; a UB -> UB copy needs disjoint (or identical) source and destination")


def _params(api, count_or_params, src):
    if isinstance(count_or_params, DataCopyParams):
        p = count_or_params
        return (check_range(api, "blockCount", p.blockCount, 0, 4095),
                check_range(api, "blockLen", p.blockLen, 0, 65535),
                check_range(api, "srcStride", p.srcStride, 0, 65535),
                check_range(api, "dstStride", p.dstStride, 0, 65535))
    count = check_range(api, "count", count_or_params, 0, (1 << 32) - 1)
    return 1, count * src.dtype.itemsize // 32, 0, 0


def _warn_if_truncated(api, core, count, itemsize):
    """The count form moves whole 32-byte blocks only, as the device does: say what it drops,
    once per call site (of a run on this core, or of a recording, whose replays say it again)."""
    dropped = count * itemsize % 32
    if dropped:
        from ..record import call_site   # here: lngb.record imports the instructions
        core.warn(f"{api} at {call_site(3)}: count {count} x {itemsize} bytes is {count * itemsize} "
                  f"bytes, not a whole number of 32-byte blocks: the device copies "
                  f"{count * itemsize - dropped} bytes and drops the last {dropped} bytes, as "
                  f"lngb does (a count that is a multiple of {32 // itemsize}, or DataCopyParams, "
                  "copies whole blocks)", once=True)


def make_wrapper(entry):
    api = entry.name

    def DataCopy(dst, src, count_or_params):
        """DataCopy(dst, src, count) or DataCopy(dst, src, DataCopyParams)."""
        kinds = (type(dst), type(src))
        if kinds not in DIRECTIONS:
            raise InvalidArgumentError(f"{api}: copies GM<->UB or UB->UB; got "
                                       f"{kinds[0].__name__} <- {kinds[1].__name__}")
        direction, pipe = DIRECTIONS[kinds]
        if dst.dtype != src.dtype:
            raise InvalidArgumentError(f"{api}: dst dtype {dst.dtype.str} != src dtype "
                                       f"{src.dtype.str}")
        if isinstance(dst, GlobalTensor) and dst.readonly:
            raise InvalidArgumentError(f"{api}: the destination GM array is read-only")
        local = [(name, t) for name, t in (("dst", dst), ("src", src))
                 if isinstance(t, LocalTensor)]
        core = local[0][1].core
        for name, t in local:
            check_local(api, name, t, core, (t.dtype,), local)
        gms = [t for t in (dst, src) if isinstance(t, GlobalTensor)]
        for g in gms:
            if g.offset % g.dtype.itemsize:
                raise AlignmentError(f"{api}: GM address must be aligned to sizeof(T) = "
                                     f"{g.dtype.itemsize} bytes, offset is {g.offset}")
        block_count, block_len, src_gap, dst_gap = _params(api, count_or_params, src)
        src_extent = burst_extent(block_count, block_len, src_gap)
        dst_extent = burst_extent(block_count, block_len, dst_gap)
        _check_side(api, "src", src, src_extent)
        _check_side(api, "dst", dst, dst_extent)
        if direction == UB_TO_UB and src_extent:
            _check_ub_overlap(api, dst, src, ((src.address, src.address + src_extent),
                                              (dst.address, dst.address + dst_extent)))

        if not isinstance(count_or_params, DataCopyParams):
            _warn_if_truncated(api, core, count_or_params, src.dtype.itemsize)
        row = new_row(entry, pipe)
        row[COPY_DIR] = direction
        row[DST] = dst.address if isinstance(dst, LocalTensor) else dst.offset
        row[SRC0] = src.address if isinstance(src, LocalTensor) else src.offset
        row[BLOCK_COUNT] = block_count if block_len else 0
        row[BLOCK_LEN], row[SRC_GAP], row[DST_GAP] = block_len, src_gap, dst_gap
        set_register(row, core.mask_mode, core.mask_high, core.mask_low)
        core.issue(row, (dst, src), gm=gms[0] if gms else None)

    return DataCopy
