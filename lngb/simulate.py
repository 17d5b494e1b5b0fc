"""`simulate_kernel`: run a user's Ascend C-style kernel, written in Python, on emulated cores.

The kernel is called once per core, that core current, with a GlobalTensor per input and output
(`kernel(*global_tensors)`), as an Ascend C kernel gets its GM addresses; inside it,
`GetBlockIdx()` / `GetBlockNum()` say which core it is and `TPipe()` binds the current core.
Inputs are copied (the caller's arrays are never modified); outputs start from zeros or from the
arrays given. With several cores they take turns in the calling thread (greenlets, CoreTurns):
a core runs until its next `SyncAll()` or its end, and passes a SyncAll once every core has
reached it; pdb breakpoints in the kernel stop on every core. `threads=` (a positive integer)
is accepted for the API's sake and changes nothing: a user's kernel is Python, which holds the
GIL, so threads gave no parallelism.

In fast mode a one-core kernel with at most four GM tensors is recorded once per (kernel,
shapes, dtypes) and replayed: it must issue the same instructions whatever the data (a GetValue
feeding a Duplicate is fine; a value used in Python makes it run live). Otherwise it runs live.
"""
import itertools
import threading

import greenlet
import numpy as np

from .arguments import check_int
from .core import AICore, resolve_mode
from .errors import CapacityError, HazardError, InvalidArgumentError, name_core
from .observers.cost import CostModel
from .products import get_product
from .runtime.cache import Exact, Uncacheable
from .runtime.recording import program_key, read_only, run_program
from .tensor import MAX_GM_BYTES, GlobalTensor, swap_core_stack
from .vector_ops.program import GM_SLOTS, N_COLS

_BLOCK = threading.local()
_TOKENS = itertools.count(1)


def GetBlockIdx():
    """The index of the core running the kernel (0 outside simulate_kernel)."""
    return getattr(_BLOCK, "idx", 0)


def GetBlockNum():
    """The number of cores running the kernel (1 outside simulate_kernel)."""
    return getattr(_BLOCK, "num", 1)


class SimulationResult:
    """`outputs` (numpy arrays, in the order given), `cores`, `trace` (a list per core in the
    observed and checked modes, else None), `rows` (each core's instruction stream), `cost` (the
    slowest core's modelled time) and `costs` (per core)."""

    def __init__(self, outputs, cores, rows):
        self.outputs, self.cores, self.rows = outputs, cores, [read_only(r) for r in rows]
        self.trace = [core.trace for core in cores] if cores[0].mode != "fast" else None
        self._costs = None

    @property
    def costs(self):
        if self._costs is None:
            model = CostModel(self.cores[0].product)
            self._costs = [model.estimate(rows) for rows in self.rows]
        return self._costs

    @property
    def cost(self):
        return max(self.costs, key=lambda c: c.cycles)

    def __repr__(self):
        shapes = ", ".join(f"{a.shape} {a.dtype}" for a in self.outputs)
        return f"SimulationResult(outputs=[{shapes}], cores={len(self.cores)})"


class _KernelKey:
    """A kernel function as part of a cache key: a token of its own (never reused, unlike id)."""

    def __init__(self, kernel):
        token = getattr(kernel, "_lngb_token", None)
        if token is None:
            token = next(_TOKENS)
            try:
                kernel._lngb_token = token
            except AttributeError:   # no attributes (a builtin, a method): not cacheable
                token = None
        self.token = token

    def cache_key(self):
        if self.token is None:
            raise Uncacheable("this kernel cannot carry a token")
        return Exact(("kernel", self.token))


def _arrays(api, inputs, outputs):
    ins = []
    for k, a in enumerate(inputs):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"{api}: input {k} must be a numpy array, got "
                                       f"{type(a).__name__}")
        ins.append(_copy(api, f"input {k}", a))   # the caller's array is never written
    outs = []
    if not isinstance(outputs, (list, tuple)):
        raise InvalidArgumentError(f"{api}: outputs must be a list of (shape, dtype) pairs or "
                                   f"arrays, got {outputs!r}")
    for k, o in enumerate(outputs):
        if isinstance(o, np.ndarray):
            outs.append(_copy(api, f"output {k}", o))
            continue
        try:
            shape, dtype = o
            layout = np.broadcast_to(np.zeros((), dtype), shape)   # no memory: checks both
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{api}: output {k} must be (shape, dtype) or an array, "
                                       f"got {o!r}") from None
        outs.append(_copy(api, f"output {k}", layout))
    return ins, outs


def _copy(api, name, array):
    """A C-contiguous copy of `array`, its dtype and size checked first: a CapacityError, not
    numpy's MemoryError, for what cannot be held."""
    if array.dtype.kind not in "fiu" or array.dtype.itemsize > 4:
        raise InvalidArgumentError(f"{api}: {name} must be of a type the vector unit has "
                                   f"(float16/32, int/uint 8-32), got {array.dtype}")
    if array.nbytes > MAX_GM_BYTES:
        raise CapacityError(f"{api}: {name} needs {array.nbytes} bytes of GM; lngb holds at most "
                            f"{MAX_GM_BYTES} bytes per tensor")
    try:
        return np.array(array, order="C")
    except MemoryError:
        raise CapacityError(f"{api}: {name} needs {array.nbytes} bytes of GM, more than this "
                            "machine can allocate") from None


def simulate_kernel(kernel, *inputs, outputs, product="atlas-a2", block_dim=1, mode=None,
                    threads=None):
    """Run `kernel(*global_tensors)` once per core (see the module docstring); returns a
    SimulationResult whose `.outputs` are the outputs' final contents. `threads`: validated,
    otherwise unused (the cores take turns in the calling thread)."""
    api = "simulate_kernel"
    if threads is not None:
        check_int(api, "threads", threads, 1)
    run = prepare_kernel(api, kernel, inputs, outputs, product, block_dim,
                         resolve_mode(api, mode))
    cores = run.cores
    if len(cores) == 1:
        rows = [_run_one(cores[0], kernel, run.gms, run.dtypes)]
    else:
        rows = _run_cores(run)
    for core in cores:
        if core.sanitizer is not None:
            core.sanitizer.finish(core.flags)
    return SimulationResult(run.outputs, cores, rows)


class PreparedKernel:
    """A user's kernel set up on fresh cores: `gms` (every core's GM byte arrays, inputs then
    outputs), their `dtypes`, `outputs` (the output arrays the GM views) and `body(c)` (core
    c's kernel, that core current, as block c of len(cores))."""

    def __init__(self, kernel, cores, arrays, outputs):
        self.kernel, self.cores, self.outputs = kernel, cores, outputs
        self.gms = [a.reshape(-1).view(np.uint8) for a in arrays]
        self.dtypes = [a.dtype for a in arrays]

    def body(self, c):
        return _body(self.cores[c], self.kernel, self.gms, self.dtypes, c, len(self.cores))


def prepare_kernel(api, kernel, inputs, outputs, product, block_dim, mode):
    """Checks simulate_kernel's arguments (`mode` resolved) and sets up its run."""
    if not callable(kernel):
        raise InvalidArgumentError(f"{api}: kernel must be callable, got {kernel!r}")
    block_dim = check_int(api, "block_dim", block_dim, 1, get_product(product).vector_cores)
    ins, outs = _arrays(api, inputs, outputs)
    return PreparedKernel(kernel, [AICore(product, mode) for _ in range(block_dim)], ins + outs,
                          outs)


def global_tensors(gms, dtypes):
    """A GlobalTensor over each GM byte array, of its dtype."""
    return [GlobalTensor.in_arena(g, 0, d, g.size // d.itemsize) for g, d in zip(gms, dtypes)]


def _body(core, kernel, gms, dtypes, idx, num):
    def body():
        outer = (GetBlockIdx(), GetBlockNum())   # a kernel may run inside another's
        _BLOCK.idx, _BLOCK.num = idx, num
        try:
            with core:
                kernel(*global_tensors(gms, dtypes))
        finally:
            _BLOCK.idx, _BLOCK.num = outer
    return body


def _run_one(core, kernel, gms, dtypes):
    """One core: recorded and replayed in fast mode when its GM fits the slots, else live."""
    key = None
    if len(gms) <= GM_SLOTS:
        try:
            key = program_key(core, ("simulate_kernel", _KernelKey(kernel),
                                     tuple((g.size, d.str) for g, d in zip(gms, dtypes))))
        except Uncacheable:
            pass
    return run_on_core(core, kernel, gms, dtypes, key)


def run_on_core(core, kernel, gms, dtypes, key):
    """`kernel(*global_tensors)` on `core` (current while it runs, as block 0 of 1), a
    GlobalTensor of dtypes[k] over each GM byte array gms[k] (made only if the kernel runs:
    not for a replay); returns the rows it executed. `key` (recording.program_key; None:
    none) makes a fast-mode core record the kernel once and replay it, as lngb.emulate and
    simulate_kernel do."""
    body = _body(core, kernel, gms, dtypes, 0, 1)
    if key is None:   # live: its rows as they retire (a fast core keeps no trace)
        rows = []
        hook = core.register_hook(lambda record: rows.append(record.row))
        try:
            body()
        finally:
            hook.remove()
        return np.array(rows, dtype=np.int64).reshape(-1, N_COLS)
    run_program(core, key, body, gms)
    if core.last_program is not None:   # replayed
        return core.last_program.rows
    return np.array([r.row for r in core.trace], dtype=np.int64).reshape(-1, N_COLS)


def _run_cores(run):
    """Every core's kernel, in turns in the calling thread (CoreTurns); its rows per core."""
    cores = run.cores
    rows = [[] for _ in cores]
    turns = CoreTurns("simulate_kernel", len(cores))

    def body(c):
        def retire(record):
            rows[c].append(record.row)
            if record.name == "SyncAll":
                turns.sync(c)
        hook = cores[c].register_hook(retire)
        try:
            run.body(c)()
        finally:
            hook.remove()

    turns.run(body)
    return [np.array(r, dtype=np.int64).reshape(-1, N_COLS) for r in rows]


class CoreTurns:
    """Run body(c) for each core c as a greenlet of the calling thread, one at a time: a core
    runs until it reaches a SyncAll (`sync(c)`) or its end, then the next core runs; once every
    core waits at its n-th SyncAll they all pass it. So pdb and sys.settrace see every core's
    frames, and Ctrl-C stops them all. A SyncAll that cannot complete (some cores have finished,
    the others wait) is a HazardError at once, naming the SyncAlls each core reached; an
    exception on a core stops every core and reaches the caller as it is, with the core's index
    (`err.block_idx`, and a note). A body may call `sync(c)` itself between parts it runs whole
    (a per-core replay, phase by phase)."""

    def __init__(self, api, count):
        self.api, self.syncs, self.main = api, [0] * count, greenlet.getcurrent()

    def sync(self, c):
        """Core c's SyncAll: wait (in its greenlet) until every core has reached it."""
        self.syncs[c] += 1
        _keeping_current(self.main.switch)

    def run(self, body):
        count = len(self.syncs)
        cores = [greenlet.greenlet(lambda c=c: body(c), parent=self.main) for c in range(count)]
        try:
            waiting = range(count)
            while waiting:
                for c in waiting:
                    try:
                        _keeping_current(cores[c].switch)
                    except BaseException as err:
                        name_core(err, c, count, self.api)
                        raise
                waiting = [c for c in waiting if not cores[c].dead]
                if waiting and len(waiting) < count:
                    raise HazardError(self._stuck(waiting))
        finally:   # the others stop where they wait: their `with core:` blocks unwind
            for g in cores:
                if g:   # started and not finished
                    _keeping_current(g.throw, greenlet.GreenletExit)

    def _stuck(self, waiting):
        done = [c for c in range(len(self.syncs)) if c not in waiting]
        reached = ", ".join(f"core {c}: {n}" for c, n in enumerate(self.syncs))
        return (f"{self.api}: a SyncAll that cannot complete: {_cores(waiting)} wait at SyncAll "
                f"#{self.syncs[waiting[0]]}, {_cores(done)} finished; SyncAlls each core "
                f"reached: {reached}. Every core must call SyncAll the same number of times")


def _cores(indices):
    return ("core " if len(indices) == 1 else "cores ") + ", ".join(map(str, indices))


def _keeping_current(switch, *args):
    """switch(*args) to another greenlet, this one's current cores and block index as they
    were when it comes back (they are the thread's, which the greenlets share)."""
    stack, block = swap_core_stack([]), dict(vars(_BLOCK))
    try:
        return switch(*args)
    finally:
        swap_core_stack(stack)
        vars(_BLOCK).clear()
        vars(_BLOCK).update(block)
