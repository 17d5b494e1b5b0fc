"""The mask register: SetMaskCount, SetMaskNorm, SetVectorMask, ResetMask (spec §2.4).

These act on the current core (`with core:`) and cost one scalar-pipe event each.
"""
import numpy as np

from ..tensor import current_core
from .base import FULL, continuous_mask_bits
from .checks import UINT64_MAX, check_range, enum_arg
from .program import COUNTER, MASK0, MASK1, SET_MASK, as_int64, event_row
from .types import MaskMode, Pipe


MASK_APIS = ("SetMaskCount", "SetMaskNorm", "SetVectorMask", "ResetMask")


def _issue(core, api):
    """A scalar-pipe event row holding which call it was and the mode and register it leaves."""
    row = event_row(SET_MASK, 0, 0, MASK_APIS.index(api))
    row[COUNTER], row[MASK0], row[MASK1] = (core.mask_mode, as_int64(core.mask_low),
                                            as_int64(core.mask_high))
    core.issue(api, Pipe.PIPE_S, row)


def SetMaskCount():
    core = current_core()
    core.mask_mode = MaskMode.COUNTER
    _issue(core, "SetMaskCount")


def SetMaskNorm():
    core = current_core()
    core.mask_mode = MaskMode.NORMAL
    _issue(core, "SetMaskNorm")


def SetVectorMask(*words, dtype, mode=MaskMode.NORMAL):
    """SetVectorMask(maskHigh, maskLow, dtype=..., mode=...) or SetVectorMask(length, dtype=...).

    In counter mode the count goes in the low word (the length form writes it there too)."""
    api = "SetVectorMask"
    core = current_core()
    np.dtype(dtype)  # the template parameter T; the words do not depend on it
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
    core.mask_high, core.mask_low = high, low
    _issue(core, api)


def ResetMask():
    core = current_core()
    core.mask_high = core.mask_low = FULL
    _issue(core, "ResetMask")
