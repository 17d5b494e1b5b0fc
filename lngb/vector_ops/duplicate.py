"""Duplicate: every active lane of dst = scalar (spec vector_unit.md §3.6). It moves the
scalar's bits: the saturation mode does not apply."""
from .base import FLOAT_TYPES, Operand, issue_elementwise, scalar_bits
from .checks import check_local, check_range
from ..runtime.memo import count_form_memo


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, scalarValue, mask, repeatTime=None, dstBlockStride=1, dstRepeatStride=8, *,
                is_set_mask=True):
        check_local(api, "dst", dst, getattr(dst, "core", None), FLOAT_TYPES)
        d = Operand("dst", dst, check_range(api, "dstBlockStride", dstBlockStride, 0, 65535),
                    check_range(api, "dstRepeatStride", dstRepeatStride, 0, 255))
        issue_elementwise(entry, d, (), mask, repeatTime, is_set_mask=is_set_mask,
                          scalar=scalar_bits(api, scalarValue, dst.dtype), saturates=False)

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}: {entry.doc}.\n\n{api}(dst, scalar, count) or {api}(dst, scalar, "
                       "mask, repeatTime, dstBlockStride, dstRepeatStride).")
    return count_form_memo(entry, 3)(wrapper)
