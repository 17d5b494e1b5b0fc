"""The scalar family: dst = src op scalar, the scalar first converted to the dtype (RNE)
(Adds, Muls). Call forms: op(dst, src, scalar, count) and
op(dst, src, scalar, mask, repeatTime, UnaryRepeatParams)."""
from .base import (FLOAT_TYPES, Operand, check_dtypes, check_same_dtype, issue_elementwise,
                   scalar_bits)
from .checks import check_local, check_range
from ..runtime.memo import count_form_memo
from .types import UnaryRepeatParams


def checked_unary_operands(entry, dst, src, repeatParams):
    """dst and src checked (float LocalTensors on one core, of one dtype the entry takes), as
    Operands with their UnaryRepeatParams strides."""
    api = entry.name
    operands = (("dst", dst), ("src", src))
    for name, t in operands:
        check_local(api, name, t, getattr(dst, "core", None), FLOAT_TYPES, operands)
    check_same_dtype(api, *operands)
    check_dtypes(entry, dst, src)
    return unary_operands(api, dst, src, repeatParams)


def unary_operands(api, dst, src, repeatParams):
    """dst and src as Operands with UnaryRepeatParams strides (block uint16, repeat uint8)."""
    p = UnaryRepeatParams() if repeatParams is None else repeatParams
    field = lambda name, hi: check_range(api, name, getattr(p, name, None), 0, hi)
    return (Operand("dst", dst, field("dstBlkStride", 65535), field("dstRepStride", 255)),
            Operand("src", src, field("srcBlkStride", 65535), field("srcRepStride", 255)))


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, src, scalarValue, mask, repeatTime=None, repeatParams=None, *,
                is_set_mask=True):
        d, s = checked_unary_operands(entry, dst, src, repeatParams)
        issue_elementwise(entry, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                          scalar=scalar_bits(api, scalarValue, dst.dtype))

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}: {entry.doc}.\n\n{api}(dst, src, scalar, count) or "
                       f"{api}(dst, src, scalar, mask, repeatTime, UnaryRepeatParams).")
    return count_form_memo(entry, 4)(wrapper)
