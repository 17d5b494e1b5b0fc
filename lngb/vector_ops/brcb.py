"""The broadcast family: each source element fills 32-byte blocks of dst.

Brcb (spec layernorm_grad.md §4.9): each of 8 consecutive source elements per repeat fills one
32-byte block of dst. Brcb(dst, src, repeatTime, BrcbRepeatParams(dstBlkStride, dstRepStride)),
strides in 32-byte blocks. There is no lane mask; Ascend C's wrapper resets the mask register
(all ones, mode unchanged) before the instruction, and so does this one.

DuplicateLane (the Ascend 950's register ops, spec regbase.md §2.1, §2.4): every lane of a vector
register = element 0 of src, which is a register (Reg::Duplicate(dst, srcReg, mask), "broadcast
lane 0") or a UB address (LoadAlign<DIST_BRC_B32/B16>). The row is a Brcb whose source does not
advance (SRC0_BLK, the source step in elements, is 0; Brcb's is 1)."""
from ..errors import InvalidArgumentError
from ..tensor import LocalTensor
from .base import FLOAT_TYPES, FULL, Operand, check_same_dtype
from .checks import check_inside, check_local, check_range
from .program import (DST, DST_BLK, DST_REP, DT_DST, DT_SRC, DTYPE_CODE, MASK0, MASK1,
                      MASK_SETS, REPEAT, SRC0, SRC0_BLK, new_row, set_register)
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
        row[DST_BLK], row[DST_REP], row[SRC0_BLK] = blk, rep, 1
        row[MASK0] = row[MASK1] = -1  # every lane of every repeat (for the cost model)
        row[MASK_SETS] = 1            # the ResetMask of Ascend C's wrapper
        set_register(row, core.mask_mode, FULL, FULL)
        core.issue(row, (Operand("dst", dst), Operand("src", src)))

    return Brcb


def make_lane_wrapper(entry):
    api = entry.name

    def DuplicateLane(dst, src):
        """DuplicateLane(dst, src): every lane of the vector register dst = src[0] (a register,
        or a UB element: the 950's broadcast load). Lanes are all written; the mask register is
        neither read nor changed."""
        core = getattr(dst, "core", None)
        operands = (("dst", dst), ("src", src))
        check_local(api, "dst", dst, core, FLOAT_TYPES, operands)
        # a broadcast load needs element alignment only (spec regbase.md §2.1)
        check_local(api, "src", src, core, FLOAT_TYPES, operands,
                    align=src.dtype.itemsize if isinstance(src, LocalTensor) else 1)
        check_same_dtype(api, *operands)
        if dst.position != "VREG":
            raise InvalidArgumentError(f"{api}: dst must be a vector register (core.vreg), got a "
                                       f"{dst.position} tensor")
        size = dst.dtype.itemsize
        check_inside(api, "src", src, (src.address, src.address + size))
        row = new_row(entry)
        row[DT_DST] = row[DT_SRC] = DTYPE_CODE[dst.dtype]
        row[DST], row[SRC0], row[REPEAT] = dst.address, src.address, 1
        row[DST_BLK], row[DST_REP], row[SRC0_BLK] = 1, 8, 0
        row[MASK0] = row[MASK1] = -1
        set_register(row, core.mask_mode, core.mask_high, core.mask_low)
        core.issue(row, (Operand("dst", dst), Operand("src", src)))

    return DuplicateLane
