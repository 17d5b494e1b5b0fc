"""Cast between half and float (spec vector_unit.md §3.4).

Lanes per repeat follow the wider type (64). half -> float is exact and takes only CAST_NONE;
float -> half rounds per RoundMode, and overflow follows the core's saturation mode.
"""
import numpy as np

from ..errors import InvalidArgumentError, check_flag
from .base import FLOAT_TYPES, check_dtypes, issue_elementwise
from .checks import check_local, enum_arg
from ..runtime.memo import count_form_memo
from .scalar import unary_operands
from .types import RoundMode, UnaryRepeatParams

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
# 310P (arch 2002) narrows only with CAST_NONE / CAST_ODD.
NARROWING_MODES_COMMON = tuple(RoundMode)
NARROWING_MODES_310P = (RoundMode.CAST_NONE, RoundMode.CAST_ODD)


def make_wrapper(entry):
    api = entry.name

    def wrapper(dst, src, round_mode, mask, repeatTime=None, repeatParams=None, *,
                is_set_mask=True, sat_mode=None):
        core = getattr(dst, "core", None)
        operands = (("dst", dst), ("src", src))
        for name, t in operands:
            check_local(api, name, t, core, FLOAT_TYPES, operands)
        round_mode = enum_arg(api, "round_mode", RoundMode, round_mode)
        check_dtypes(entry, dst, src)
        sat_mode = check_flag(api, "sat_mode", sat_mode, optional=True)
        if src.dtype == F16 and round_mode != RoundMode.CAST_NONE:
            raise InvalidArgumentError(f"{api}: half -> float is exact and takes only CAST_NONE, "
                                       f"got {round_mode.name}")
        allowed = NARROWING_MODES_310P if core.product.arch == 2002 else NARROWING_MODES_COMMON
        if src.dtype == F32 and round_mode not in allowed:
            raise InvalidArgumentError(
                f"{api}: float -> half with {round_mode.name} is not available on "
                f"{core.product.name} (allowed: {', '.join(m.name for m in allowed)})")
        if repeatTime is None:  # the count form walks both operands contiguously (64 lanes)
            repeatParams = UnaryRepeatParams(1, 1, 2 * dst.dtype.itemsize, 2 * src.dtype.itemsize)
        d, s = unary_operands(api, dst, src, repeatParams)
        issue_elementwise(entry, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                          round_mode=int(round_mode), sat_mode=sat_mode)

    wrapper.__name__ = wrapper.__qualname__ = api
    wrapper.__doc__ = (f"{api}(dst, src, RoundMode, count) or {api}(dst, src, RoundMode, mask, "
                       "repeatTime, UnaryRepeatParams). `sat_mode` overrides the core's "
                       "saturation mode for this instruction (the register-based Cast's SatMode "
                       "template parameter).")
    return count_form_memo(entry, 4)(wrapper)
