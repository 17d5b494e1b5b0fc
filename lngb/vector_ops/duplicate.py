"""Duplicate: every active lane of dst = scalar (spec vector_unit.md §3.6)."""
from .base import FLOAT_TYPES, Operand, issue_elementwise
from .checks import check_local, check_range
from .memo import count_form_memo
from .program import DUPLICATE


@count_form_memo(3)
def Duplicate(dst, scalarValue, mask, repeatTime=None, dstBlockStride=1, dstRepeatStride=8, *,
              is_set_mask=True):
    """Duplicate(dst, scalar, count) or Duplicate(dst, scalar, mask, repeatTime, dstBlockStride,
    dstRepeatStride)."""
    api = "Duplicate"
    check_local(api, "dst", dst, dst.core, FLOAT_TYPES)
    d = Operand("dst", dst, check_range(api, "dstBlockStride", dstBlockStride, 0, 65535),
                check_range(api, "dstRepeatStride", dstRepeatStride, 0, 255))
    issue_elementwise(api, DUPLICATE, d, (), mask, repeatTime, is_set_mask=is_set_mask,
                      scalar=scalarValue)
