"""Brcb: each of 8 consecutive source elements per repeat fills one 32-byte block of dst
(spec layernorm_grad.md §4.9). Brcb(dst, src, repeatTime, BrcbRepeatParams(dstBlkStride,
dstRepStride)), strides in 32-byte blocks. There is no lane mask; Ascend C's wrapper resets the
mask register (all ones, mode unchanged) before the instruction, and so does this one."""
from ..errors import InvalidArgumentError
from .base import FLOAT_TYPES, FULL, Operand, check_same_dtype
from .checks import check_inside, check_local, check_range
from .program import (DST, DST_BLK, DST_REP, DT_DST, DT_SRC, DTYPE_CODE, MASK0, MASK1,
                      MASK_SETS, REPEAT, SRC0, new_row, set_register)
from .types import BrcbRepeatParams


def make_wrapper(entry):
    api = entry.name

    def Brcb(dst, src, repeatTime, repeatParams=None):
        """Brcb(dst, src, repeatTime, BrcbRepeatParams(dstBlkStride, dstRepStride))."""
        core = getattr(dst, "core", None)
        operands = (("dst", dst), ("src", src))
        for name, t in operands:
            check_local(api, name, t, core, FLOAT_TYPES, operands)
        check_same_dtype(api, *operands)
        repeat = check_range(api, "repeatTime", repeatTime, 0, 255)
        p = BrcbRepeatParams() if repeatParams is None else repeatParams
        blk = check_range(api, "dstBlkStride", getattr(p, "dstBlkStride", None), 0, 65535)
        rep = check_range(api, "dstRepStride", getattr(p, "dstRepStride", None), 0, 65535)
        blk = blk or 1   # 0 is undefined; Ascend C's documentation walks it as 1
        size = dst.dtype.itemsize
        if repeat:
            check_inside(api, "src", src, (src.address, src.address + 8 * repeat * size))
            blocks = [32 * (q * rep + k * blk) for q in (0, repeat - 1) for k in (0, 7)]
            extent = (dst.address + min(blocks), dst.address + max(blocks) + 32)
            check_inside(api, "dst", dst, extent)
            if extent[0] < src.address + 8 * repeat * size and src.address < extent[1]:
                raise InvalidArgumentError(
                    f"{api}: dst (UB bytes [{extent[0]}, {extent[1]})) and src (UB bytes "
                    f"[{src.address}, {src.address + 8 * repeat * size})) overlap; Brcb's "
                    "operands must not")
        row = new_row(entry)
        row[DT_DST] = row[DT_SRC] = DTYPE_CODE[dst.dtype]
        row[DST], row[SRC0], row[REPEAT] = dst.address, src.address, repeat
        row[DST_BLK], row[DST_REP] = blk, rep
        row[MASK0] = row[MASK1] = -1  # every lane of every repeat (for the cost model)
        row[MASK_SETS] = 1            # the ResetMask of Ascend C's wrapper
        set_register(row, core.mask_mode, FULL, FULL)
        core.issue(row, (Operand("dst", dst), Operand("src", src)))

    return Brcb
