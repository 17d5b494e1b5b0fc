"""Adds, Muls: dst = src op scalar, the scalar first converted to the dtype (RNE)."""
from .base import FLOAT_TYPES, Operand, check_same_dtype, issue_elementwise
from .checks import check_local, check_range
from .memo import count_form_memo
from .program import ADDS, MULS
from .types import UnaryRepeatParams


def unary_operands(api, dst, src, repeatParams):
    """dst and src as Operands with UnaryRepeatParams strides (block uint16, repeat uint8)."""
    p = UnaryRepeatParams() if repeatParams is None else repeatParams
    return (Operand("dst", dst, check_range(api, "dstBlkStride", p.dstBlkStride, 0, 65535),
                    check_range(api, "dstRepStride", p.dstRepStride, 0, 255)),
            Operand("src", src, check_range(api, "srcBlkStride", p.srcBlkStride, 0, 65535),
                    check_range(api, "srcRepStride", p.srcRepStride, 0, 255)))


def _scalar(api, op, dst, src, scalarValue, mask, repeatTime, repeatParams, is_set_mask):
    core = dst.core
    check_local(api, "dst", dst, core, FLOAT_TYPES)
    check_local(api, "src", src, core, FLOAT_TYPES)
    check_same_dtype(api, ("dst", dst), ("src", src))
    d, s = unary_operands(api, dst, src, repeatParams)
    issue_elementwise(api, op, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                      scalar=scalarValue)


@count_form_memo(4)
def Adds(dst, src, scalarValue, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
    """Adds(dst, src, scalar, count) or Adds(dst, src, scalar, mask, repeatTime, UnaryRepeatParams)."""
    _scalar("Adds", ADDS, dst, src, scalarValue, mask, repeatTime, repeatParams, is_set_mask)


@count_form_memo(4)
def Muls(dst, src, scalarValue, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
    """Muls(dst, src, scalar, count) or Muls(dst, src, scalar, mask, repeatTime, UnaryRepeatParams)."""
    _scalar("Muls", MULS, dst, src, scalarValue, mask, repeatTime, repeatParams, is_set_mask)
