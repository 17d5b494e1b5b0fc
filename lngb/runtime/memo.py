"""Count-form calls repeat in loops with the same tensors and count. Their validation depends
only on the arguments, the product and the saturation mode (not on the mask register, which the
count form sets itself), so once a call has passed, the same call on a fast-mode core with no
observers reissues its validated row directly. Keys are value-exact (runtime.cache): 64 and
64.0, or 0.0 and -0.0, are different calls."""
import functools

from ..tensor import LocalTensor
from .cache import Cache, Uncacheable, cache_key

MEMO = Cache("validated calls")
ENTRY_BYTES = 1024


def count_form_memo(entry, count_args):
    """Memoise a wrapper's count form: calls with exactly `count_args` positional arguments."""

    def decorate(wrapper):
        @functools.wraps(wrapper)
        def call(*args, **kwargs):
            first = args[0] if args else None
            if (len(args) != count_args or kwargs or type(first) is not LocalTensor
                    or first.core.mode != "fast" or first.core.recorder is not None
                    or first.core.has_observers):
                return wrapper(*args, **kwargs)
            core = first.core
            try:
                key = cache_key(entry.opcode, core.product.name, core.sat_mode,
                                *[(a, a.core is core) if type(a) is LocalTensor else a
                                  for a in args])
            except Uncacheable:
                return wrapper(*args)
            row = MEMO.get(key)
            if row is not None:
                core.reissue(row)
                return
            core.acquire()  # no other thread's row between this call and last_issued
            try:
                wrapper(*args)
                MEMO.put(key, core.last_issued, ENTRY_BYTES)
            finally:
                core.release()
        return call
    return decorate
