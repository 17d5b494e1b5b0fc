"""Cast between half and float (spec vector_unit.md §3.4).

Lanes per repeat follow the wider type (64). half -> float is exact and takes only CAST_NONE;
float -> half rounds per RoundMode, and overflow follows the core's saturation mode.
"""
import numpy as np

from ..errors import InvalidArgumentError
from .base import FLOAT_TYPES, issue_elementwise
from .checks import check_local, enum_arg
from .memo import count_form_memo
from .program import CAST
from .scalar import unary_operands
from .types import RoundMode, UnaryRepeatParams

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
# 310P and 910 narrow only with CAST_NONE / CAST_ODD.
NARROWING_MODES_COMMON = tuple(RoundMode)
NARROWING_MODES_310P = (RoundMode.CAST_NONE, RoundMode.CAST_ODD)


@count_form_memo(4)
def Cast(dst, src, round_mode, mask, repeatTime=None, repeatParams=None, *, is_set_mask=True,
         sat_mode=None):
    """Cast(dst, src, RoundMode, count) or Cast(dst, src, RoundMode, mask, repeatTime,
    UnaryRepeatParams). `sat_mode` overrides the core's saturation mode for this instruction
    (the register-based Cast's SatMode template parameter)."""
    api = "Cast"
    core = dst.core
    check_local(api, "dst", dst, core, FLOAT_TYPES)
    check_local(api, "src", src, core, FLOAT_TYPES)
    round_mode = enum_arg(api, "round_mode", RoundMode, round_mode)
    if (src.dtype, dst.dtype) == (F16, F32):
        if round_mode != RoundMode.CAST_NONE:
            raise InvalidArgumentError(f"{api}: half -> float is exact and takes only CAST_NONE, "
                                       f"got {round_mode.name}")
    elif (src.dtype, dst.dtype) == (F32, F16):
        allowed = NARROWING_MODES_310P if core.product.arch == 2002 else NARROWING_MODES_COMMON
        if round_mode not in allowed:
            raise InvalidArgumentError(
                f"{api}: float -> half with {round_mode.name} is not available on "
                f"{core.product.name} (allowed: {', '.join(m.name for m in allowed)})")
    else:
        raise InvalidArgumentError(f"{api}: {src.dtype.name} -> {dst.dtype.name} is not "
                                   "supported (half <-> float only)")
    if repeatTime is None:  # the count form walks both operands contiguously (64 lanes/repeat)
        repeatParams = UnaryRepeatParams(1, 1, 2 * dst.dtype.itemsize, 2 * src.dtype.itemsize)
    d, s = unary_operands(api, dst, src, repeatParams)
    issue_elementwise(api, CAST, d, (s,), mask, repeatTime, is_set_mask=is_set_mask,
                      round_mode=int(round_mode), sat_mode=sat_mode)
