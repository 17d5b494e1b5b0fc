"""DataCopy between GM and UB, and UB to UB (spec vector_unit.md §6).

The count form copies floor(count * sizeof(T) / 32) whole 32-byte blocks; the DataCopyParams form
copies blockCount bursts of blockLen blocks, with srcStride/dstStride blocks between bursts.
"""
from ..errors import AlignmentError, InvalidArgumentError, OutOfBoundsError
from ..tensor import GlobalTensor, LocalTensor
from .checks import check_local, check_range
from .program import (BLOCK_COUNT, BLOCK_LEN, COPY_GM_TO_UB, COPY_UB_TO_GM, COPY_UB_TO_UB, DST,
                      DST_GAP, OP, SRC0, SRC_GAP, new_row)
from .types import DataCopyParams, Pipe

def _burst_extent(block_count, block_len, gap):
    """Bytes from the first to the last byte touched on one side."""
    if block_count == 0 or block_len == 0:
        return 0
    return 32 * ((block_count - 1) * (block_len + gap) + block_len)


def _check_side(api, name, tensor, extent):
    if isinstance(tensor, LocalTensor):
        start, limit = tensor.address, tensor.nbytes
    else:
        start, limit = tensor.offset, tensor.size * tensor.dtype.itemsize
        if start < 0 or start + limit > tensor.gm.size:
            raise OutOfBoundsError(f"{api}: {name} GM bytes [{start}, {start + limit}) lie outside "
                                   f"its {tensor.gm.size}-byte GM buffer")
    if extent > limit:
        raise OutOfBoundsError(
            f"{api}: {name} would be accessed over {extent} bytes from byte {start}, but the "
            f"tensor holds {limit} bytes; reduce blockCount/blockLen/gaps or the count")


def DataCopy(dst, src, count_or_params):
    """DataCopy(dst, src, count) or DataCopy(dst, src, DataCopyParams)."""
    api = "DataCopy"
    kinds = (type(dst), type(src))
    op, pipe = {(LocalTensor, GlobalTensor): (COPY_GM_TO_UB, Pipe.PIPE_MTE2),
                (GlobalTensor, LocalTensor): (COPY_UB_TO_GM, Pipe.PIPE_MTE3),
                (LocalTensor, LocalTensor): (COPY_UB_TO_UB, Pipe.PIPE_V)}.get(kinds, (None, None))
    if op is None:
        raise InvalidArgumentError(f"{api}: copies GM<->UB or UB->UB; got "
                                   f"{kinds[0].__name__} <- {kinds[1].__name__}")
    if dst.dtype != src.dtype:
        raise InvalidArgumentError(f"{api}: dst dtype {dst.dtype.str} != src dtype {src.dtype.str}")
    if isinstance(dst, GlobalTensor) and not dst.gm.flags.writeable:
        raise InvalidArgumentError(f"{api}: the destination GM array is read-only")
    local = [t for t in (dst, src) if isinstance(t, LocalTensor)]
    core = local[0].core
    for t in local:
        check_local(api, "dst" if t is dst else "src", t, core, (t.dtype,))
    gms = [t for t in (dst, src) if isinstance(t, GlobalTensor)]
    for g in gms:
        if g.offset % g.dtype.itemsize:
            raise AlignmentError(f"{api}: GM address must be aligned to sizeof(T) = "
                                 f"{g.dtype.itemsize} bytes, offset is {g.offset}")
    if isinstance(count_or_params, DataCopyParams):
        p = count_or_params
        block_count = check_range(api, "blockCount", p.blockCount, 0, 4095)
        block_len = check_range(api, "blockLen", p.blockLen, 0, 65535)
        src_gap = check_range(api, "srcStride", p.srcStride, 0, 65535)
        dst_gap = check_range(api, "dstStride", p.dstStride, 0, 65535)
    else:
        count = check_range(api, "count", count_or_params, 0, (1 << 32) - 1)
        block_count, block_len, src_gap, dst_gap = 1, count * src.dtype.itemsize // 32, 0, 0
    _check_side(api, "src", src, _burst_extent(block_count, block_len, src_gap))
    _check_side(api, "dst", dst, _burst_extent(block_count, block_len, dst_gap))

    row = new_row()
    row[OP] = op
    row[DST] = dst.address if isinstance(dst, LocalTensor) else dst.offset
    row[SRC0] = src.address if isinstance(src, LocalTensor) else src.offset
    row[BLOCK_COUNT], row[BLOCK_LEN], row[SRC_GAP], row[DST_GAP] = (block_count, block_len,
                                                                    src_gap, dst_gap)
    if block_len == 0:
        row[BLOCK_COUNT] = 0
    core.issue(api, pipe, row, (dst, src), gm=gms[0].gm if gms else None)
