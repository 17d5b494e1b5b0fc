"""`simulate_kernel`: run a user's Ascend C-style kernel, written in Python, on emulated cores.

The kernel is called once per core, that core current, with a GlobalTensor per input and output
(`kernel(*global_tensors)`), as an Ascend C kernel gets its GM addresses; inside it,
`GetBlockIdx()` / `GetBlockNum()` say which core it is and `TPipe()` binds the current core.
Inputs are copied (the caller's arrays are never modified); outputs start from zeros or from the
arrays given. With several cores each runs in its own thread and `SyncAll()` waits for all.

Inputs that are not arrays are scalar arguments, passed to the kernel as they are. In fast and
checked mode a one-core kernel with at most four GM tensors is recorded once per (the shapes
and dtypes, the scalar arguments' values, and the values of everything its code reads from
Python: runtime.reads) and replayed; a kernel reading anything with no value-exact key runs
afresh on every call. Data read in Python (a GetValue's value used in Python, a host read of GM
or UB) makes it run live. Either way a call gives the bits a live observed run gives.
"""
import threading
from functools import partial

import numpy as np

from .arguments import check_int
from .core import AICore, resolve_mode
from .errors import CapacityError, InvalidArgumentError, warn
from .observers.cost import CostModel
from .products import get_product
from .runtime.cache import Uncacheable, exact
from .runtime.reads import kernel_key
from .runtime.recording import (LIVE, PROGRAMS, ScalarAccess, pad_gms, program_key, read_only,
                                record, run_program, runs_live)
from .tensor import MAX_GM_BYTES, GlobalTensor
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
                    threads=None):
    """Run `kernel(*global_tensors)` once per core (see the module docstring); returns a
    SimulationResult whose `.outputs` are the outputs' final contents."""
    api = "simulate_kernel"
    if not callable(kernel):
        raise InvalidArgumentError(f"{api}: kernel must be callable, got {kernel!r}")
    block_dim = check_int(api, "block_dim", block_dim, 1, get_product(product).vector_cores)
    if threads is not None:
        check_int(api, "threads", threads, 1)
        if threads < block_dim:
            raise InvalidArgumentError(
                f"{api}: {block_dim} cores need {block_dim} threads (each waits at SyncAll for "
                f"the others), got threads={threads}")
    mode = resolve_mode(api, mode)
    ins, outs = _arrays(api, inputs, outputs)
    arrays = [a for a in ins if not isinstance(a, Scalar)] + outs
    gms = [a.reshape(-1).view(np.uint8) for a in arrays]
    dtypes = [a.dtype for a in arrays]
    cores = [AICore(product, mode)]
    body = _with_scalars(kernel, ins)
    scalars = [a.key for a in ins if isinstance(a, Scalar)]
    if block_dim == 1:
        rows = [_run_one(cores[0], kernel, body, scalars, gms, dtypes)]
    else:
        replayed = _replay_cores(cores[0], block_dim, kernel, body, scalars, gms, dtypes)
        if replayed is not None:
            return SimulationResult(outs, *replayed)
        cores += [AICore(_config=cores[0].config) for _ in range(block_dim - 1)]
        rows = _run_cores(cores, body, gms, dtypes, min(threads or block_dim, block_dim))
    for core in cores:
        if core.sanitizer is not None:
            core.sanitizer.finish(core.flags)
    return SimulationResult(outs, cores, rows)


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


def _run_one(core, kernel, body, scalars, gms, dtypes):
    """One core: recorded and replayed in fast mode when its GM fits the slots and everything
    `kernel` reads from Python has a value-exact key (runtime.reads), else live."""
    key = None
    if len(gms) <= GM_SLOTS:
        try:
            key = program_key(core, ("simulate_kernel", kernel_key(kernel), tuple(scalars),
                                     tuple((g.size, d.str) for g, d in zip(gms, dtypes))))
        except Uncacheable:
            pass
    return run_on_core(core, body, gms, dtypes, key)


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


def _replay_cores(first, block_dim, kernel, body, scalars, gms, dtypes):
    """Fast mode, under the replay rule of one core (`_run_one`): record each core's kernel once (a dry
    run, core by core: nothing executes, so no core waits at a SyncAll), then replay phase by
    phase, every core's rows up to its next SyncAll before any core's next phase (what the
    SyncAlls of a live run guarantee). (cores, rows) — `first` and functions making the other
    cores, which a replay needs only as UBs — or None for a live run."""
    if len(gms) > GM_SLOTS or first.mode != "fast" or runs_live(first):
        return None   # (checked mode checks every core live)
    try:
        key = program_key(first, ("simulate_kernel cores", block_dim, kernel_key(kernel),
                                  tuple(scalars),
                                  tuple((g.size, d.str) for g, d in zip(gms, dtypes))))
    except Uncacheable:
        return None
    recorded = PROGRAMS.get(key)
    if recorded is None:
        recorded = _record_cores(first, block_dim, key, body, gms, dtypes)
        if recorded is None:
            return None
    for program in recorded.programs:
        for message in program.warnings:
            warn(message)
    ubs = [first.ub] + [_fresh_ub(first.ub.size, touched) for touched in recorded.touched[1:]]
    padded = pad_gms(gms)
    for phase in range(len(recorded.phases[0])):
        for ub, phases in zip(ubs, recorded.phases):
            executor.execute(ub, padded, phases[phase])
    first.retired_in_bulk(len(recorded.programs[0].rows), recorded.programs[0].end_state)
    first.last_program = recorded.programs[0]
    cores = [first] + [partial(_replayed_core, first.config, ub, touched, program) for
                       ub, touched, program in zip(ubs[1:], recorded.touched[1:],
                                                   recorded.programs[1:])]
    return cores, [p.rows for p in recorded.programs]


def _record_cores(first, block_dim, key, body, gms, dtypes):
    """The CorePrograms of the kernel (cached under `key`), or None if it runs live."""
    if LIVE.get(key):
        return None
    cores = [first] + [AICore(_config=first.config) for _ in range(block_dim - 1)]
    try:
        recorded = CorePrograms([record(core, _body(core, body, gms, dtypes, c, block_dim), gms)
                                 for c, core in enumerate(cores)])
    except ScalarAccess:
        LIVE.put(key, True, 256)
        return None
    if len({len(p) for p in recorded.phases}) != 1:
        return None   # the cores disagree on their SyncAlls: the live run says how
    PROGRAMS.put(key, recorded, recorded.nbytes)
    return recorded


def _run_cores(cores, kernel, gms, dtypes, threads):
    """Each core in a thread of its own (at most `threads` at once): a SyncAll retires only when
    every core has issued it."""
    barrier = threading.Barrier(len(cores))
    rows = [[] for _ in cores]
    errors = [None] * len(cores)

    def run(c):
        def retire(record):
            rows[c].append(record.row)
            if record.name == "SyncAll":
                barrier.wait()
        hook = cores[c].register_hook(retire)
        try:
            _body(cores[c], kernel, gms, dtypes, c, len(cores))()
        except threading.BrokenBarrierError as err:
            errors[c] = errors[c] or err
        except BaseException as err:   # the others must not wait for this core at SyncAll
            errors[c] = err
            barrier.abort()
        finally:
            hook.remove()

    workers = [threading.Thread(target=run, args=(c,)) for c in range(len(cores))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    first = next((e for e in errors if e is not None
                  and not isinstance(e, threading.BrokenBarrierError)), None)
    if first is not None:
        raise first
    if any(errors):
        raise InvalidArgumentError("simulate_kernel: the cores did not all reach the same SyncAlls")
    return [np.array(r, dtype=np.int64).reshape(-1, N_COLS) for r in rows]
