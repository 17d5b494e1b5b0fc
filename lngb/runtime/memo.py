"""Count-form calls repeat in loops with the same tensors and count. Their validation depends
only on the arguments, the product and the saturation mode (not on the mask register, which the
count form sets itself), so once a call has passed, the same call on a fast-mode core with no
observers and no recording in progress (`core.memoises`) reissues its validated row directly.
Keys are value-exact (runtime.cache): 64 and
64.0, or 0.0 and -0.0, are different calls."""
import functools

from ..tensor import LocalTensor
from ..vector_ops.program import register_after
from .cache import Cache, Uncacheable, exact

MEMO = Cache("validated calls")
ENTRY_BYTES = 1024


def count_form_memo(entry, count_args):
    """Memoise a wrapper's count form: calls with exactly `count_args` positional arguments."""

    def decorate(wrapper):
        @functools.wraps(wrapper)
        def call(*args, **kwargs):
            first = args[0] if args else None
            if (len(args) != count_args or kwargs or type(first) is not LocalTensor
                    or not first.core.memoises):
                return wrapper(*args, **kwargs)
            core = first.core
            try:
                key = (entry.opcode, core.product.name, core.sat_mode, core.div_sqrt,
                       *map(exact, args))
            except Uncacheable:
                return wrapper(*args)
            if any(type(a) is LocalTensor and a.core is not core for a in args):
                return wrapper(*args)  # operands on two cores: the wrapper says why not
            validated = MEMO.get(key)
            if validated is not None:
                core.reissue(*validated)
                return
            core.acquire()  # no other thread's row between this call and last_issued
            try:
                wrapper(*args)
                row = core.last_issued
                MEMO.put(key, (row.reshape(1, -1), register_after(row)), ENTRY_BYTES)
            finally:
                core.release()
        return call
    return decorate
