"""The scalar family: dst = src op scalar, the scalar first converted to the dtype (RNE)
(Adds, Muls; Muls also on int16). Call forms: op(dst, src, scalar, count) and
op(dst, src, scalar, mask, repeatTime, UnaryRepeatParams)."""
import numpy as np

from .base import Operand, check_dtypes, check_same_dtype, issue_elementwise, scalar_bits
from .checks import check_local, check_range
from ..runtime.memo import count_form_memo
from .types import UnaryRepeatParams


def checked_unary_operands(entry, dst, src, repeatParams):
    """dst and src checked (float LocalTensors on one core, of one dtype the entry takes), as
    Operands with their UnaryRepeatParams strides."""
    api = entry.name
    operands = (("dst", dst), ("src", src))
    types = tuple(dict.fromkeys(d for d, _ in entry.dtypes))
    for name, t in operands:
        check_local(api, name, t, getattr(dst, "core", None), types, operands)
    check_same_dtype(api, *operands)
    check_dtypes(entry, dst, src)
    return unary_operands(api, dst, src, repeatParams)


def unary_operands(api, dst, src, repeatParams):
    """dst and src as Operands with UnaryRepeatParams strides (block uint16, repeat uint8)."""
    p = UnaryRepeatParams() if repeatParams is None else repeatParams
    field = lambda name, hi: check_range(api, name, getattr(p, name, None), 0, hi)
    return (Operand("dst", dst, field("dstBlkStride", 65535), field("dstRepStride", 255)),
            Operand("src", src, field("srcBlkStride", 65535), field("srcRepStride", 255)))


def _integer_times_zero(entry, dst, scalar):
    """An integer Muls by 0 defines dst whatever src holds, so it reads nothing: CANN's LayerNorm
    zeroes a selMask this way over bytes nothing wrote (spec layernorm.md §4.7)."""
    return (entry.name == "Muls" and dst.dtype == np.int16 and isinstance(scalar, int)
            and scalar == 0)


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, src, scalarValue, mask, repeatTime=None, repeatParams=None, *,
                is_set_mask=True):
        d, s = checked_unary_operands(entry, dst, src, repeatParams)
        scalar = scalar_bits(api, scalarValue, dst.dtype)
        issue_elementwise(entry, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                          scalar=scalar, reads=not _integer_times_zero(entry, dst, scalar))

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}: {entry.doc}.\n\n{api}(dst, src, scalar, count) or "
                       f"{api}(dst, src, scalar, mask, repeatTime, UnaryRepeatParams).")
    return count_form_memo(entry, 4)(wrapper)
