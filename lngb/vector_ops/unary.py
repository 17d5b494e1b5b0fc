"""The unary family: dst = op(src), lane by lane (Sqrt, Abs, Relu; spec vector_unit.md §3.5).
Call forms: op(dst, src, count) and op(dst, src, mask, repeatTime, UnaryRepeatParams)."""
from ..runtime.memo import count_form_memo
from .base import issue_elementwise
from .scalar import checked_unary_operands


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, src, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True):
        d, s = checked_unary_operands(entry, dst, src, repeatParams)
        issue_elementwise(entry, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                          scalar=entry.lane_parameter(dst.core, dst.dtype))

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}: {entry.doc}.\n\n{api}(dst, src, count) or "
                       f"{api}(dst, src, mask, repeatTime, UnaryRepeatParams).")
    return count_form_memo(entry, 3)(wrapper)
