"""Add, Sub, Mul: dst = src0 op src1, lane by lane (spec vector_unit.md §2.3, §3.2)."""
from .base import FLOAT_TYPES, Operand, check_same_dtype, issue_elementwise
from .checks import check_local, check_range
from .memo import count_form_memo
from .program import ADD, MUL, SUB
from .types import BinaryRepeatParams


def _binary(api, op, dst, src0, src1, mask, repeatTime, repeatParams, is_set_mask):
    core = dst.core
    for name, t in (("dst", dst), ("src0", src0), ("src1", src1)):
        check_local(api, name, t, core, FLOAT_TYPES)
    check_same_dtype(api, ("dst", dst), ("src0", src0), ("src1", src1))
    if repeatTime is None:  # the count form: contiguous operands
        blk, rep = (1, 1, 1), (8, 8, 8)
    else:
        p = repeatParams if repeatParams is not None else BinaryRepeatParams()
        blk = [check_range(api, f, getattr(p, f), 0, 255)
               for f in ("dstBlkStride", "src0BlkStride", "src1BlkStride")]
        rep = [check_range(api, f, getattr(p, f), 0, 255)
               for f in ("dstRepStride", "src0RepStride", "src1RepStride")]
    issue_elementwise(api, op, Operand("dst", dst, blk[0], rep[0]),
                      (Operand("src0", src0, blk[1], rep[1]), Operand("src1", src1, blk[2], rep[2])),
                      mask, repeatTime, is_set_mask=is_set_mask)


@count_form_memo(4)
def Add(dst, src0, src1, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
    """Add(dst, src0, src1, count) or Add(dst, src0, src1, mask, repeatTime, BinaryRepeatParams)."""
    _binary("Add", ADD, dst, src0, src1, mask, repeatTime, repeatParams, is_set_mask)


@count_form_memo(4)
def Sub(dst, src0, src1, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
    """Sub(dst, src0, src1, count) or Sub(dst, src0, src1, mask, repeatTime, BinaryRepeatParams)."""
    _binary("Sub", SUB, dst, src0, src1, mask, repeatTime, repeatParams, is_set_mask)


@count_form_memo(4)
def Mul(dst, src0, src1, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
    """Mul(dst, src0, src1, count) or Mul(dst, src0, src1, mask, repeatTime, BinaryRepeatParams)."""
    _binary("Mul", MUL, dst, src0, src1, mask, repeatTime, repeatParams, is_set_mask)
