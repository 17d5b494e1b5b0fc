"""Count-form calls repeat in loops with the same tensors and count. Their validation depends
only on the arguments (not on the mask register, which the count form sets itself), so once a
call has passed, the same call on a fast-mode core reissues its validated row directly."""
import functools

import numpy as np

from ..tensor import LocalTensor
from .kernels import execute
from .program import GM_SLOTS
from .types import MaskMode

MEMO_SIZE = 4096
FULL = (1 << 64) - 1
NO_GMS = (np.zeros(0, np.uint8),) * GM_SLOTS


def _argument_key(value):
    if isinstance(value, LocalTensor):
        return (value.address, value.size, value.dtype, value.position, id(value.core))
    return value


def count_form_memo(count_args):
    """Memoise a wrapper's count form: calls with exactly `count_args` positional arguments."""

    def decorate(wrapper):
        @functools.wraps(wrapper)
        def call(*args, **kwargs):
            core = args[0].core if isinstance(args[0], LocalTensor) else None
            if (len(args) != count_args or kwargs or core is None or core.mode != "fast"
                    or core._recording is not None):
                return wrapper(*args, **kwargs)
            key = (wrapper, core.sat_mode, *[_argument_key(a) for a in args])
            rows = core._call_memo.get(key)
            if rows is None:
                wrapper(*args)
                if len(core._call_memo) >= MEMO_SIZE:
                    core._call_memo.clear()
                core._call_memo[key] = core._last_row.reshape(1, -1)
                return None
            # what core.issue does for a fast-mode row, without its per-call checks
            core.mask_mode, core.mask_high, core.mask_low = MaskMode.NORMAL, FULL, FULL
            core.seq += 1
            execute(core.ub, NO_GMS, rows)
            return None
        return call
    return decorate
