"""The mask register: SetMaskCount, SetMaskNorm, SetVectorMask, ResetMask (spec §2.4).

These act on the current core (`with core:`) and cost one scalar-pipe event each; the register
changes when the event retires.
"""
from ..arguments import check_dtype
from ..tensor import current_core
from .base import FULL, continuous_mask_bits
from .checks import UINT64_MAX, check_range, enum_arg
from .events import issue_event
from .types import MaskMode


def SetMaskCount():
    core = current_core()
    issue_event(core, "SetMaskCount", register=(MaskMode.COUNTER, core.mask_high, core.mask_low))


def SetMaskNorm():
    core = current_core()
    issue_event(core, "SetMaskNorm", register=(MaskMode.NORMAL, core.mask_high, core.mask_low))


def SetVectorMask(*words, dtype, mode=MaskMode.NORMAL):
    """SetVectorMask(maskHigh, maskLow, dtype=..., mode=...) or SetVectorMask(length, dtype=...).

    In counter mode the count goes in the low word (the length form writes it there too)."""
    api = "SetVectorMask"
    core = current_core()
    check_dtype(api, "dtype", dtype)  # the template parameter T; the words do not depend on it
    mode = enum_arg(api, "mode", MaskMode, mode)
    if len(words) == 2:
        high = check_range(api, "maskHigh", words[0], 0, UINT64_MAX)
        low = check_range(api, "maskLow", words[1], 0, UINT64_MAX)
    elif len(words) == 1 and mode == MaskMode.COUNTER:
        high, low = 0, check_range(api, "length", words[0], 0, UINT64_MAX)
    elif len(words) == 1:
        high, low = continuous_mask_bits(check_range(api, "length", words[0], 0, 1 << 32))
    else:
        raise TypeError("SetVectorMask takes (maskHigh, maskLow) or (length)")
    issue_event(core, api, register=(core.mask_mode, high, low))


def ResetMask():
    core = current_core()
    issue_event(core, "ResetMask", register=(core.mask_mode, FULL, FULL))
