"""The binary family: dst = src0 op src1, lane by lane (Add, Sub, Mul; spec vector_unit.md
§2.3, §3.2). Call forms: op(dst, src0, src1, count) and
op(dst, src0, src1, mask, repeatTime, BinaryRepeatParams)."""
from .base import FLOAT_TYPES, Operand, check_dtypes, check_same_dtype, issue_elementwise
from .checks import check_local, check_range
from ..runtime.memo import count_form_memo
from .types import BinaryRepeatParams

STRIDES = ("dstBlkStride", "src0BlkStride", "src1BlkStride")
REPEAT_STRIDES = ("dstRepStride", "src0RepStride", "src1RepStride")


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, src0, src1, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
        core = getattr(dst, "core", None)
        operands = (("dst", dst), ("src0", src0), ("src1", src1))
        for name, t in operands:
            check_local(api, name, t, core, FLOAT_TYPES, operands)
        check_same_dtype(api, *operands)
        check_dtypes(entry, dst, src0)
        if repeatTime is None:  # the count form: contiguous operands
            blk, rep = (1, 1, 1), (8, 8, 8)
        else:
            p = BinaryRepeatParams() if repeatParams is None else repeatParams
            blk = [check_range(api, f, getattr(p, f, None), 0, 255) for f in STRIDES]
            rep = [check_range(api, f, getattr(p, f, None), 0, 255) for f in REPEAT_STRIDES]
        issue_elementwise(entry, Operand("dst", dst, blk[0], rep[0]),
                          (Operand("src0", src0, blk[1], rep[1]),
                           Operand("src1", src1, blk[2], rep[2])),
                          mask, repeatTime, is_set_mask=is_set_mask,
                          scalar=entry.lane_parameter(core, dst.dtype))

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}: {entry.doc}, lane by lane.\n\n{api}(dst, src0, src1, count) or "
                       f"{api}(dst, src0, src1, mask, repeatTime, BinaryRepeatParams).")
    return count_form_memo(entry, 4)(wrapper)
