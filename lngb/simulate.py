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

Inputs that are not arrays are scalar arguments, passed to the kernel as they are. In fast and
checked mode a one-core kernel with at most four GM tensors is recorded once per (the shapes
and dtypes, the scalar arguments' values, and the values of everything its code reads from
Python: runtime.reads) and replayed; a kernel reading anything with no value-exact key runs
afresh on every call. Data read in Python (a GetValue's value used in Python, a host read of GM
or UB) makes it run live. Several cores replay under the same key (each recorded once, replayed
phase by phase between SyncAlls: _replay_cores); in checked mode every core's records pass its
sanitizer, phase by phase, once per recording (_checked_replay). Either way a call gives the
bits a live observed run gives.
"""
import contextlib
import threading
from functools import partial

import greenlet
import numpy as np

from .arguments import check_int
from .core import AICore, resolve_mode
from .errors import CapacityError, HazardError, InvalidArgumentError, name_core, warn
from .observers.cost import CostModel
from .observers.gm_check import check_gm, phases_of
from .observers.sanitizer import check_cores
from .products import get_product
from .runtime.cache import Exact, Uncacheable, exact
from .runtime.reads import kernel_key
from .runtime.recording import (LIVE, PROGRAMS, ScalarAccess, pad_gms, program_key, read_only,
                                record, run_program, runs_live)
from .tensor import MAX_GM_BYTES, GlobalTensor, swap_core_stack
from .vector_ops import executor
from .vector_ops.footprint import extents
from .vector_ops.program import GM_SLOTS, N_COLS, OP
from .vector_ops.table import TABLE

_BLOCK = threading.local()
SYNC_ALL = TABLE["SyncAll"].opcode


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
        # cores: AICores, or functions making one (a replay makes its cores when asked for)
        self.outputs, self._cores, self.rows = outputs, cores, [read_only(r) for r in rows]
        self.trace = [core.trace for core in cores] if cores[0].mode != "fast" else None
        self._costs = None

    @property
    def cores(self):
        self._cores = [c if isinstance(c, AICore) else c() for c in self._cores]
        return self._cores

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
        return f"SimulationResult(outputs=[{shapes}], cores={len(self._cores)})"


def _arrays(api, inputs, outputs):
    ins = []
    for k, a in enumerate(inputs):
        if not isinstance(a, np.ndarray):
            ins.append(_scalar_argument(api, k, a))
            continue
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


class Scalar:
    """A scalar argument of the kernel (passed as it is; its value is part of the replay key)."""

    __slots__ = ("value", "key")

    def __init__(self, value, key):
        self.value, self.key = value, key


def _scalar_argument(api, k, value):
    try:
        return Scalar(value, exact(value))
    except Uncacheable:
        raise InvalidArgumentError(
            f"{api}: input {k} must be a numpy array (a GM tensor) or a scalar argument (a "
            f"number, string, enum, tuple or dataclass such as a tiling struct), got "
            f"{type(value).__name__}") from None


def _with_scalars(kernel, ins):
    """`kernel` called with the GM tensors and the scalar arguments in the order given."""
    scalars = [(k, a.value) for k, a in enumerate(ins) if isinstance(a, Scalar)]
    if not scalars:
        return kernel

    def with_scalars(*tensors):
        args = list(tensors)
        for k, value in scalars:
            args.insert(k, value)
        return kernel(*args)
    return with_scalars


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
                    threads=None, div_sqrt=None):
    """Run `kernel(*global_tensors)` once per core (see the module docstring); returns a
    SimulationResult whose `.outputs` are the outputs' final contents. `threads`: validated,
    otherwise unused (the cores take turns in the calling thread). `div_sqrt`: as AICore's
    (None: the product's)."""
    api = "simulate_kernel"
    if threads is not None:
        check_int(api, "threads", threads, 1)
    run = prepare_kernel(api, kernel, inputs, outputs, product, block_dim,
                         resolve_mode(api, mode), div_sqrt)
    if run.block_dim == 1:
        rows = [_run_one(run)]
    else:
        replayed = _replay_cores(run)
        if replayed is not None:
            return SimulationResult(run.outputs, *replayed)
        rows = _run_cores(run)
    cores = run.cores
    for core in cores:
        if core.sanitizer is not None:
            core.sanitizer.finish(core.flags)
    if run.block_dim > 1 and run.first.mode == "checked":
        _check_gm_across_cores(run)
    return SimulationResult(run.outputs, cores, rows)


def _check_gm_across_cores(run):
    """Checked mode: GM bytes one core writes and another reads or writes between the same
    SyncAlls are a HazardError (gm_check.check_gm, from the cores' traces), when the GM tensors
    fit the slots a row names (more run unbound, and their rows do not say which)."""
    if len(run.gms) > GM_SLOTS:
        return
    inputs = len(run.gms) - len(run.outputs)
    names = [f"input {k}" for k in range(inputs)] + [f"output {k}"
                                                     for k in range(len(run.outputs))]
    check_gm(run.cores, [run.gms] * run.block_dim, range(len(run.gms)), names,
             inputs=[(slot, 0, gm.size) for slot, gm in enumerate(run.gms)])


class PreparedKernel:
    """A user's kernel set up on fresh cores: `gms` (every core's GM byte arrays, the input
    arrays then the outputs), their `dtypes`, `outputs` (the output arrays the GM views),
    `scalars` (the scalar arguments' keys), `cores` (made when first asked for: a replay needs
    only the first) and `body(c)` (core c's kernel, that core current, as block c of
    block_dim)."""

    def __init__(self, kernel, first, block_dim, ins, outputs):
        self.kernel, self.first, self.block_dim, self.outputs = kernel, first, block_dim, outputs
        arrays = [a for a in ins if not isinstance(a, Scalar)] + outputs
        self.gms = [a.reshape(-1).view(np.uint8) for a in arrays]
        self.dtypes = [a.dtype for a in arrays]
        self.scalars = Exact(a.key for a in ins if isinstance(a, Scalar))   # made exact already
        self.call = _with_scalars(kernel, ins)
        self._cores = None

    @property
    def cores(self):
        if self._cores is None:
            self._cores = [self.first] + [AICore(_config=self.first.config)
                                          for _ in range(self.block_dim - 1)]
        return self._cores

    def body(self, c):
        return _body(self.cores[c], self.call, self.gms, self.dtypes, c, self.block_dim)

    def key(self):
        """The replay key (the first core's state as it is now); Uncacheable if the kernel
        reads something with no value-exact key or its GM does not fit the slots."""
        if len(self.gms) > GM_SLOTS:
            raise Uncacheable("more GM tensors than slots")
        return program_key(self.first, ("simulate_kernel", self.block_dim,
                                        kernel_key(self.kernel), self.scalars,
                                        tuple((g.size, d.str)
                                              for g, d in zip(self.gms, self.dtypes))))


def prepare_kernel(api, kernel, inputs, outputs, product, block_dim, mode, div_sqrt=None):
    """Checks simulate_kernel's arguments (`mode` resolved) and sets up its run."""
    if not callable(kernel):
        raise InvalidArgumentError(f"{api}: kernel must be callable, got {kernel!r}")
    block_dim = check_int(api, "block_dim", block_dim, 1, get_product(product).vector_cores)
    ins, outs = _arrays(api, inputs, outputs)
    return PreparedKernel(kernel, AICore(product, mode, div_sqrt=div_sqrt), block_dim, ins, outs)


def global_tensors(gms, dtypes):
    """A GlobalTensor over each GM byte array, of its dtype."""
    return [GlobalTensor.in_arena(g, 0, d, g.size // d.itemsize) for g, d in zip(gms, dtypes)]


def _body(core, kernel, gms, dtypes, idx, num):
    def body():
        outer = (GetBlockIdx(), GetBlockNum())   # a kernel may run inside another's
        _BLOCK.idx, _BLOCK.num = idx, num
        core.running_kernel = True
        try:
            with core:
                kernel(*global_tensors(gms, dtypes))
        finally:
            _BLOCK.idx, _BLOCK.num = outer
            core.running_kernel = False
    return body


def _run_one(run):
    """One core: recorded and replayed in fast and checked mode when its replay key exists
    (PreparedKernel.key), else live."""
    try:
        key = run.key()
    except Uncacheable:
        key = None
    return run_on_core(run.first, run.call, run.gms, run.dtypes, key)


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


class CorePrograms:
    """Each core's recorded Program of a multi-core kernel, cut at its SyncAlls into phases."""

    def __init__(self, programs):
        self.programs = programs
        self.phases = [_phases(p.rows) for p in programs]
        self.touched = [_covering(p.rows) for p in programs]   # the UB ranges each may touch
        self.nbytes = sum(p.nbytes for p in programs) + 16 * sum(map(len, self.touched))
        self.checked = False   # (checked mode) every core's records passed the sanitizer


def _covering(rows):
    """Disjoint, sorted [lo, hi) UB ranges covering every byte `rows` may touch."""
    if not len(rows):
        return []
    lo, hi = extents(rows)
    merged = []
    for a, b in sorted(zip(lo.tolist(), hi.tolist())):
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _fresh_ub(size, touched):
    """A core's memory as a fresh core has it where `touched` lies (zeros), the rest not yet
    set: zeroing a whole UB per core (a heap allocation once glibc's mmap threshold has grown)
    was most of a warm 4-core replay."""
    ub = np.empty(size, np.uint8)
    for lo, hi in touched:
        ub[lo:hi] = 0
    return ub


def _replayed_core(config, ub, touched, program):
    """The replayed core, its memory outside `touched` zeroed as a fresh core's."""
    start = 0
    for lo, hi in touched:
        ub[start:lo] = 0
        start = hi
    ub[start:] = 0
    return AICore.replayed(config, ub, program)


def _phases(rows):
    cuts = np.flatnonzero(rows[:, OP] == SYNC_ALL) + 1
    return np.split(rows, cuts)


def _replay_cores(run):
    """Fast and checked mode, under the replay rule of one core (PreparedKernel.key): record
    each core's kernel once (a dry run, core by core: nothing executes, so no core waits at a
    SyncAll), then replay phase by phase, every core's rows up to its next SyncAll before any
    core's next phase (what the SyncAlls of a live run guarantee). (cores, rows) — in fast mode
    the first core and functions making the others, which a replay needs only as UBs; in
    checked mode the cores (_checked_replay) — or None for a live run."""
    first = run.first
    if first.mode == "observed" or runs_live(first):
        return None
    try:
        key = run.key()
    except Uncacheable:
        return None
    recorded = PROGRAMS.get(key)
    if recorded is None:
        recorded = _record_cores(run, key)
        if recorded is None:
            return None
    for message in dict.fromkeys(m for p in recorded.programs for m in p.warnings):
        warn(message)   # once per call, as one core's replay raises them
    if first.mode == "checked":
        return _checked_replay(run, recorded)
    ubs = [first.ub] + [_fresh_ub(first.ub.size, touched) for touched in recorded.touched[1:]]
    _execute_phases(ubs, run.gms, recorded)
    first.retired_in_bulk(len(recorded.programs[0].rows), recorded.programs[0].end_state)
    first.last_program = recorded.programs[0]
    cores = [first] + [partial(_replayed_core, first.config, ub, touched, program) for
                       ub, touched, program in zip(ubs[1:], recorded.touched[1:],
                                                   recorded.programs[1:])]
    return cores, [p.rows for p in recorded.programs]


def _checked_replay(run, recorded):
    """Checked mode: every core's records through its sanitizer, phase by phase as the cores'
    turns go, once per recording (later calls reuse the verdict: the records do not depend on
    the data), then the replay on the run's cores, each with its program's records as its
    trace."""
    cores, programs = run.cores, recorded.programs
    for core, program in zip(cores, programs):
        core.trace = list(program.records)
    if recorded.checked:
        for core in cores:
            core.sanitizer.catch_up_later(core.trace)
    else:
        check_cores(cores, [phases_of(core.trace) for core in cores],
                    [p.end_state for p in programs], "simulate_kernel")
        _check_gm_across_cores(run)
        recorded.checked = True
    _execute_phases([core.ub for core in cores], run.gms, recorded)
    for core, program in zip(cores, programs):
        core.retired_in_bulk(len(program.rows), program.end_state)
        core.last_program = program
    return cores, [p.rows for p in programs]


def _execute_phases(ubs, gms, recorded):
    """Every core's rows up to its next SyncAll before any core's next phase."""
    gms = pad_gms(gms)
    for phase in range(len(recorded.phases[0])):
        for ub, phases in zip(ubs, recorded.phases):
            executor.execute(ub, gms, phases[phase])


def _record_cores(run, key):
    """The CorePrograms of the kernel (cached under `key`, recorded on the run's cores: a dry
    run leaves them as they were), or None if it runs live."""
    if LIVE.get(key):
        return None
    programs = []
    for c, core in enumerate(run.cores):
        try:
            programs.append(record(core, run.body(c), run.gms))
        except ScalarAccess:
            LIVE.put(key, True, 256)
            return None
        except BaseException as err:
            name_core(err, c, run.block_dim, "simulate_kernel")
            raise
    recorded = CorePrograms(programs)
    if len({len(p) for p in recorded.phases}) != 1:
        return None   # the cores disagree on their SyncAlls: the live run says how
    PROGRAMS.put(key, recorded, recorded.nbytes)
    return recorded


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
        # the GM tensors in their slots, as a recording has them (more than fit stay unbound)
        bound = (cores[c].binding(pad_gms(run.gms)) if len(run.gms) <= GM_SLOTS
                 else contextlib.nullcontext())
        try:
            with bound:
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
