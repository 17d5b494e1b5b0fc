"""Running a multi-core kernel: live, core by core, or planned once and replayed on threads.

A kernel (lngb.kernels.multicore) issues every instruction inside `runner.step(fn, *args,
at=...)`: fn may depend only on its arguments, `at` (the GM byte base of each slot) and the state
of the core, its TPipe and `kernel.member`. `Live` runs each step as it comes (observed and
checked modes). `plan` records each distinct step once per state (a `Planner` per core, sharing
one `Recorded`) and lists each core's schedule of (program, GM bases) per phase; `replay` runs
the schedules in jitted, GIL-free calls (`kernels.run_schedule`) on `threads` OS threads, one
core to a call or, where the plan's rows are short, up to LOCKSTEP alike cores in lock step
(`lockstep_jobs`) on a copy of their UBs interleaved 128 bytes at a time (`interleave`), so
that a row's lanes on all of them are a few runs of memory. Results do not depend on the thread
count or on lock step: each core has its own UB, and the cores of a phase never read what
another writes.
"""
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .._jit import njit
from ..errors import InvalidArgumentError, OutOfBoundsError, name_core, warn
from ..record import TraceRecord
from ..tensor import LocalTensor
from ..products import SCALAR_REGISTERS
from ..vector_ops.program import (DST, ELEMENTWISE, FLAT, GM_SLOTS, KIND, N_COLS, OP, SCALAR_AT,
                                  SRC0, SRC1)
from ..vector_ops.table import TABLE
from ..vector_ops.footprint import extents
from ..vector_ops import executor
from ..vector_ops.walk import G_WORD, GRANULE, gm_bursts
from .cache import ALSO_CLEARED, Cache, cache_key, held_bytes
from .recording import RECORD_BYTES, pad_gms

PLANS = Cache("operator plans")
LOCKSTEP = 16     # cores a replay job runs in lock step, at most (bench/HISTORY.md)
SHORT_ROW = 256   # elements: plans whose element-wise rows average fewer go in lock step
GET_VALUE = TABLE["GetValue"].opcode
SPARE_BLOCKS = 4  # interleaved blocks kept for the next lock-step jobs (release), at most
_SPARE_BLOCKS, _SPARE_LOCK = [], threading.Lock()


_RETURNED = object()


def run_phases(kernels, bar=None):
    """Phase 1 of every core, then (after SyncAll) phase 2 of every core, in core order; `bar`
    (a progress bar) advances by one per core and phase."""
    runs = [k.Process() for k in kernels]
    for phase in range(2):
        for c, (kernel, run) in enumerate(zip(kernels, runs)):
            if bar is not None:
                bar.set_postfix_str(f"core {c} of {len(kernels)}, phase {phase + 1} of 2")
            kernel.run.phase = phase
            try:
                step = next(run, _RETURNED)
            except BaseException as err:   # the caller learns which core
                name_core(err, c, len(kernels))
                raise
            if step is _RETURNED and phase == 0:
                raise InvalidArgumentError(f"core {c}'s kernel returned before its SyncAll: "
                                           "every core's Process() must reach it (yield)")
            if bar is not None:
                bar.update()


class Live:
    """Steps execute as they are issued (observed and checked modes)."""

    def __init__(self, core, gms):
        self.core, self.gms, self.phase = core, pad_gms(gms), 0

    def step(self, fn, *args, at=(0, 0, 0, 0)):
        with self.core, self.core.binding(self.gms):
            fn(*args, at=at)


@dataclass
class Step:
    program: int
    end: tuple  # (core state, pipe state, members) after the step


class Planner:
    """Records each distinct step of a core once, keyed by (step, arguments, state), and lists
    the core's schedule of (program, GM bases) per phase. Programs are shared by all cores."""

    def __init__(self, recorded):
        self.recorded = recorded  # the Recorded shared by every core of the plan
        self.schedule = ([], [])
        self.phase = 0   # 1 once the kernel is past SyncAll (set by run_phases)
        self.issued = 0  # records of the core's steps so far (a live trace's numbering)

    def attach(self, core, kernel):
        self.core, self.kernel = core, kernel

    def state(self):
        pipe = getattr(self.kernel, "pipe", None)
        return (self.core.state(), pipe.state() if pipe is not None else None,
                tuple((k, v.address, v.size, v.dtype.str, v.position)
                      for k, v in self.kernel.member.items()))

    def step(self, fn, *args, at=(0, 0, 0, 0)):
        key = cache_key(fn.__name__, args, self.state())
        entry = self.recorded.steps.get(key)
        if entry is None:
            entry = self.recorded.steps[key] = self.recorded.record(self.core, self.kernel, fn,
                                                                    args, at, self.issued)
        else:
            self.restore(entry.end)
        self.recorded.check_bounds(entry.program, at, self.kernel.gms)
        self.schedule[self.phase].append((entry.program, *at))
        self.issued += len(self.recorded.programs[entry.program])

    def restore(self, end):
        core_state, pipe_state, members = end
        self.core.set_state(core_state)
        if pipe_state is not None:
            self.kernel.pipe.set_state(pipe_state)
        self.kernel.member = {k: LocalTensor(self.core, address, size, dtype, position=position)
                              for k, (address, size, dtype, position) in members.items()}


def prefetch_points(bursts):
    """Offsets 64 bytes apart, plus each burst's last byte, so that every host cache line of the
    bursts holds one point whatever the alignment of the GM base they are added to."""
    for start, end in bursts:
        yield from range(start, end - 1, 64)
        yield end - 1


class Recorded:
    """The programs of a plan: rows with GM offsets relative to the step's bases; with
    `keep_records`, also each program's trace records and the bases they were recorded at
    (PlannedTrace)."""

    def __init__(self, keep_records=False):
        self.steps = {}
        self.programs = []    # row arrays
        self.extents = []     # per program: GM bytes used past each slot's base
        self.points = []      # per program: (slot, offset) points, one per GM line it reads
        self.warnings = []
        # per program: (records, the GM bases and the core's GetValue count it was recorded at,
        # its GetValues)
        self.records = [] if keep_records else None

    def record(self, core, kernel, fn, args, at, seq_base=0):
        def body():
            with core:
                fn(*args, at=at)
        reads = core.scalar_reads
        program = core.record(body, kernel.gms, seq_base)
        self.warnings.extend(m for m in program.warnings if m not in self.warnings)
        rows = program.rows.copy()
        extent, points = [0] * GM_SLOTS, []
        for row in rows:
            bursts = gm_bursts(row)
            if bursts is None:
                continue
            write, slot, _ = bursts
            col = DST if write else SRC0
            row[col] -= at[slot]
            if row[col] < 0:
                raise RuntimeError(f"{fn.__name__}: a GM access lies before the step's base")
            write, slot, spans = gm_bursts(row)
            extent[slot] = max(extent[slot], spans[-1][1])
            if not write:
                points.extend((slot, point) for point in prefetch_points(spans))
        self.programs.append(rows)
        if self.records is not None:
            gets = int(np.count_nonzero(rows[:, OP] == GET_VALUE))
            self.records.append((program.records, at, reads, gets))
        self.extents.append(tuple(extent))
        self.points.append(np.array(points, dtype=np.int64).reshape(-1, 2))
        core.set_state(program.end_state)
        pipe = getattr(kernel, "pipe", None)
        end = (program.end_state, pipe.state() if pipe is not None else None,
               {k: (t.address, t.size, t.dtype, t.position) for k, t in kernel.member.items()})
        return Step(len(self.programs) - 1, end)

    def check_bounds(self, program, at, gms):
        for slot, extent in enumerate(self.extents[program]):
            if extent and at[slot] + extent > gms[slot].size:
                raise OutOfBoundsError(f"a replayed step would access GM slot {slot} bytes up "
                                       f"to {at[slot] + extent} of {gms[slot].size}")


@dataclass
class Plan:
    rows: np.ndarray      # every step program, concatenated
    starts: np.ndarray    # program p is rows[starts[p]:starts[p + 1]]
    points: np.ndarray    # each program's prefetch points (prefetch_points), concatenated
    point_starts: np.ndarray
    programs: list
    schedules: list       # per core: (phase 1, phase 2) int64 arrays of (program, 4 GM bases)
    end_states: list      # per core: the core's state after the kernel
    warnings: tuple
    lockstep: tuple       # per phase: cores a replay job runs in lock step (lockstep_width)
    retired: list         # per core: the rows it executes
    touched: tuple        # per phase in lock step: the granules its rows use (touched_runs)
    records: list = None  # per program (checked mode): (trace records, GM bases, Recorded's)
    registers: int = 0    # the first scalar register's UB address (AICore.scalar_register)
    checked: bool = False   # the cores' checks passed (checked mode: reused by later runs)
    parts: dict = field(default_factory=dict)   # (phase, threads) -> lockstep_parts

    @property
    def nbytes(self):
        """Its bytes, lockstep_parts included (they take about as many as the schedules, per
        thread count a replay uses, and are made after the plan enters the cache: counted
        twice ahead)."""
        records = sum(len(r[0]) for r in self.records) if self.records is not None else 0
        return held_bytes(2 * self.rows.nbytes + self.points.nbytes
                          + 3 * sum(s.nbytes for p in self.schedules for s in p)
                          + sum(t.nbytes for t in self.touched if t is not None)
                          + (RECORD_BYTES + 8 * N_COLS) * records + 4096)   # (and its row)


def plan(key, cores, make_kernel):
    """The Plan of a kernel on `cores` (cached under `key`, which must determine it):
    make_kernel(c, runner) builds core c's kernel."""
    checked = cores[0].mode == "checked"
    key = cache_key(key, cores[0].sat_mode, cores[0].div_sqrt, cores[0].reserved_bytes, checked)
    cached = PLANS.get(key)
    if cached is not None:
        return cached
    recorded, planners, kernels = Recorded(keep_records=checked), [], []
    for c, core in enumerate(cores):
        planner = Planner(recorded)
        kernel = make_kernel(c, planner)
        planner.attach(core, kernel)
        planners.append(planner)
        kernels.append(kernel)
    run_phases(kernels)
    starts = np.cumsum([0] + [len(p) for p in recorded.programs]).astype(np.int64)
    point_starts = np.cumsum([0] + [len(x) for x in recorded.points]).astype(np.int64)
    schedules = [tuple(np.array(s, dtype=np.int64).reshape(-1, 1 + GM_SLOTS) for s in p.schedule)
                 for p in planners]
    rows = np.concatenate(recorded.programs)
    lengths = np.diff(starts)
    by_phase = [phase_rows(recorded.programs, [s[phase] for s in schedules])
                for phase in range(2)]
    widths = tuple(lockstep_width(r) for r in by_phase)
    result = Plan(rows, starts, np.concatenate(recorded.points), point_starts, recorded.programs,
                  schedules, [core.state() for core in cores], tuple(recorded.warnings), widths,
                  [int(sum(lengths[s[:, 0]].sum() for s in p)) for p in schedules],
                  tuple(touched_runs(r, cores[0].ub.size) if w > 1 else None
                        for r, w in zip(by_phase, widths)), recorded.records,
                  cores[0].scalar_register(0))
    return PLANS.put(key, result, result.nbytes)


class PlannedTrace(Sequence):
    """Core c's trace of a replayed plan, as a live run's `core.trace` holds it: each step's
    recorded records in the core's order, numbered from 1, with the core's GM offsets. Records
    are made when read (a checked replay of 48 cores has some 14 000: made at once they would
    cost about as much as the replay)."""

    def __init__(self, plan, c):
        self._plan = plan
        self._steps = np.concatenate(plan.schedules[c])
        self._phase_steps = len(plan.schedules[c][0])
        self._ends = np.cumsum(np.diff(plan.starts)[self._steps[:, 0]])
        # the core's GetValues before each step: a live run's scalar register serials
        self._reads = np.cumsum([0] + [plan.records[p][3] for p in self._steps[:-1, 0]])

    def __len__(self):
        return int(self._ends[-1]) if len(self._ends) else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i) + n if i < 0 else int(i)
        if not 0 <= i < n:
            raise IndexError("trace index out of range")
        s = int(np.searchsorted(self._ends, i, side="right"))
        first = int(self._ends[s - 1]) if s else 0
        return self._record(s, i - first, first)

    def __iter__(self):
        return self.steps(0, len(self._steps))

    def phase(self, phase):
        """The records of phase 0 (up to SyncAll, included) or 1."""
        cut = self._phase_steps
        return self.steps(0, cut) if phase == 0 else self.steps(cut, len(self._steps))

    def steps(self, first, last):
        for s in range(first, last):
            start = int(self._ends[s - 1]) if s else 0
            for k in range(int(self._ends[s]) - start):
                yield self._record(s, k, start)

    def _record(self, s, k, first):
        """Record k of step s, whose first record is the core's record `first` (from 0)."""
        program, *bases = (int(v) for v in self._steps[s])
        records, recorded_at, reads, _ = self._plan.records[program]
        record = records[k]
        row, operands = record.row, record.operands
        shift = (int(self._reads[s]) - reads) % SCALAR_REGISTERS
        if shift and (row[OP] == GET_VALUE or row[SCALAR_AT]):
            row = self._registers_moved(row, shift)
        bursts = gm_bursts(row)
        if bursts is not None:
            write, slot, _ = bursts
            delta = bases[slot] - recorded_at[slot]
            if delta:
                row = row.copy()   # (the recorded row is read-only)
                row[DST if write else SRC0] += delta
                operands = tuple((role, f"GM+{int(where[3:]) + delta}", position, dtype)
                                 if position == "GM" else (role, where, position, dtype)
                                 for role, where, position, dtype in operands)
        return TraceRecord(first + k + 1, row, operands, record.source)

    def _registers_moved(self, row, shift):
        """The row with the scalar registers its step's GetValues fill (SRC1) and read
        (SCALAR_AT, 1 + the address) `shift` registers on, as the live run numbers them: a
        replayed step keeps the registers of its recording."""
        base, row = self._plan.registers, row.copy()

        def moved(address):
            return base + 4 * (((address - base) // 4 + shift) % SCALAR_REGISTERS)
        if row[OP] == GET_VALUE:
            row[SRC1] = moved(row[SRC1])
        if row[SCALAR_AT]:
            row[SCALAR_AT] = 1 + moved(row[SCALAR_AT] - 1)
        return row


def phase_rows(programs, schedules):
    """The rows of every distinct program the cores' schedules of one phase run."""
    used = np.unique(np.concatenate([s[:, 0] for s in schedules]))
    return np.concatenate([programs[p] for p in used]) if len(used) else programs[0][:0]


def lockstep_width(rows):
    """Cores a replay job runs in lock step: LOCKSTEP when the contiguous element-wise rows (of
    one phase's distinct steps, each once) average fewer than SHORT_ROW elements, else 1. Lock
    step pays the executor's fixed cost per row (~15 ns, the work of ~300 lanes) once for all of
    them, but multiplies the UB bytes a job keeps in the host's caches: it pays for short rows
    (the 950's 64-lane register ops), not for tiles of thousands of lanes (bench/HISTORY.md,
    lock-step replay)."""
    flat = rows[(rows[:, KIND] == ELEMENTWISE) & (rows[:, FLAT] >= 0), FLAT]
    return LOCKSTEP if len(flat) and flat.mean() < SHORT_ROW else 1


def touched_runs(rows, nbytes):
    """[first, last) runs of the granules (walk.GRANULE bytes) of a core's `nbytes` of memory
    that cover every byte the rows may read or write (footprint.extents), as an [runs, 2]
    array."""
    granules = nbytes // GRANULE
    lo, hi = extents(rows)
    keep = hi > lo
    starts = np.minimum(lo[keep] // GRANULE, granules)
    ends = np.minimum((hi[keep] + GRANULE - 1) // GRANULE, granules)
    depth = np.zeros(granules + 1, np.int64)
    np.add.at(depth, starts, 1)
    np.add.at(depth, ends, -1)
    used = np.concatenate([[False], np.cumsum(depth[:-1]) > 0, [False]])
    edges = np.flatnonzero(used[1:] != used[:-1])
    return edges.reshape(-1, 2).astype(np.int64)


def interleave(ubs, runs):
    """A block of the cores' UBs (the rows of ubs, [cores, bytes]) interleaved a granule at a
    time: granule k of every core in core order, then granule k + 1 (walk.interleaved, what the
    executor indexes for several cores). Only the granules of `runs` (touched_runs) are copied
    in: the others hold what a job before left there (a block given back with `release`), or
    zeros, and the executor, which touches only bytes footprint.extents covers, never sees them."""
    block = None
    with _SPARE_LOCK:   # (by index: list.remove would compare arrays element-wise)
        for i, spare in enumerate(_SPARE_BLOCKS):
            if spare.size == ubs.size:
                block = _SPARE_BLOCKS.pop(i)
                break
    if block is None:
        block = np.zeros(ubs.size, np.uint8)
    _move_granules(ubs.view(np.uint64), block.view(np.uint64), np.asarray(runs, np.int64), True)
    return block


def release(block):
    """Keep a block interleave made for the next job, in place of the oldest kept once there
    are SPARE_BLOCKS (about 4 MB each for 16 cores of the 950): a new one's first touches of its
    pages took about 3 ms of a 14-core job's 3.5 ms of copying in. clear_caches drops them."""
    with _SPARE_LOCK:
        if len(_SPARE_BLOCKS) >= SPARE_BLOCKS:
            _SPARE_BLOCKS.pop(0)
        _SPARE_BLOCKS.append(block)


def _drop_spare_blocks():
    with _SPARE_LOCK:
        _SPARE_BLOCKS.clear()


ALSO_CLEARED.append(_drop_spare_blocks)


def deinterleave(block, ubs, runs):
    """interleave's inverse: the granules of `runs` back into the rows of ubs."""
    _move_granules(ubs.view(np.uint64), block.view(np.uint64), np.asarray(runs, np.int64), False)


@njit
def _move_granules(by_core, block, runs, into_block):
    """The granules of `runs` from the rows of by_core ([cores, words]) into the interleaved
    block (words), or back. (numpy's transposed copy of 32-byte blocks took 1.2-7.8 ms for 14
    cores' 216 KB each.)"""
    cores, words = by_core.shape[0], 1 << G_WORD
    for r in range(runs.shape[0]):
        for k in range(runs[r, 0], runs[r, 1]):
            for c in range(cores):
                granule, row = block[words * (k * cores + c):], by_core[c, words * k:]
                if into_block:
                    for w in range(words):
                        granule[w] = row[w]
                else:
                    for w in range(words):
                        row[w] = granule[w]


def core_ubs(count, ub_bytes):
    """`count` zeroed UBs, rows of one block (zero pages on demand) that `replay` runs in lock
    step."""
    return list(np.zeros((count, ub_bytes), np.uint8))


def replay(plan, cores, gms, threads):
    """Every core's schedule, phase by phase, on `threads` threads; the plan's warnings are
    raised once in the calling thread. Consecutive cores with the same programs, UBs in one
    block (core_ubs) and GM buffers in shared arrays run in lock step, LOCKSTEP or fewer to a
    job (the executor decodes and dispatches each row once for all of them)."""
    for message in plan.warnings:
        warn(message)
    run_schedule = executor.run_schedule
    gms = [pad_gms(g) for g in gms]
    # cores that run alone need no shared block (working it out costs ~0.3 ms on 48 cores); in a
    # plan with a phase in lock step, the other phase's one-core jobs use it too (the same bytes)
    layout = (_ub_block(cores), _shared_gms(gms)) if max(plan.lockstep) > 1 else (None, None)
    for phase in range(2):
        schedules = [s[phase] for s in plan.schedules]
        key = (phase, threads)   # the cut into jobs is the plan's: computed once
        parts = plan.parts.get(key)
        if parts is None:
            if len(plan.parts) >= 4:   # two thread counts at most, as Plan.nbytes counts
                plan.parts.clear()
            parts = plan.parts[key] = lockstep_parts(schedules, threads, plan.lockstep[phase])
        jobs = lockstep_jobs(cores, gms, schedules, threads, layout=layout, parts=parts)
        in_parallel(jobs, threads,
                    lambda job, phase=phase: run_job(plan, run_schedule, phase, *job))
    for core, state, count in zip(cores, plan.end_states, plan.retired):
        core.retired_in_bulk(count, state)


def lockstep_jobs(cores, gms, schedules, threads, width=LOCKSTEP, layout=None, parts=None):
    """Jobs (cores, their UBs as a [cores, stride] block, the GM arrays, programs, [steps,
    cores, slots] GM bases) of one phase. When every core's UB is a row of one block (core_ubs)
    and each GM slot of every core lies in one array, the jobs are lockstep_parts(schedules,
    threads, width) (or `parts`); otherwise each core is a job of its own. `layout`: the cores'
    (_ub_block, _shared_gms), if the caller has them ((None, None): every core alone)."""
    block, shared = layout or (_ub_block(cores), _shared_gms(gms))
    if block is None or shared is None:   # one core to a job, on its own UB and GM buffers
        if parts is None or any(last - first > 1 for first, last, _, _ in parts):
            parts = lockstep_parts(schedules, threads, 1)
        return [(cores[first:last], cores[first].ub.reshape(1, -1), gms[first], programs, bases)
                for first, last, programs, bases in parts]
    roots, offsets = shared
    return [(cores[first:last], block[first:last], roots, programs, bases + offsets[first:last])
            for first, last, programs, bases in parts or lockstep_parts(schedules, threads, width)]


def lockstep_parts(schedules, threads, width):
    """(first core, last core + 1, programs, [steps, cores, slots] step bases) of each job:
    runs of consecutive cores with the same programs, each cut into near-equal chunks of at
    most `width` cores, a multiple of `threads` of them (one a core, in a run of fewer)."""
    parts = []
    for run in _runs([s[:, 0] for s in schedules]):
        pieces = threads * -(-len(run) // (threads * width))
        for chunk in np.array_split(np.array(run), min(pieces, len(run))):
            first, last = int(chunk[0]), int(chunk[-1]) + 1
            bases = np.stack([schedules[c][:, 1:] for c in range(first, last)], axis=1)
            parts.append((first, last, schedules[first][:, 0].copy(), bases))
    return parts


def _runs(programs):
    """Runs of consecutive indices with equal, non-empty program sequences."""
    runs = []
    for c, p in enumerate(programs):
        if len(p) and runs and runs[-1][-1] == c - 1 and np.array_equal(programs[c - 1], p):
            runs[-1].append(c)
        elif len(p):
            runs.append([c])
    return runs


def _owner(array):
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _span(views):
    """(one uint8 array over every view's bytes, each view's byte offset in it) for 1-D
    C-contiguous uint8 arrays, all writable or all read-only, that lie inside the C-contiguous
    allocation the first one views (so the span does too), else None. The span keeps the
    lowest view alive, not the others: use it while the caller holds them."""
    first = views[0]
    if first.dtype != np.uint8 or first.ndim != 1 or not first.flags.c_contiguous:
        return None
    if all(v is first for v in views):   # a buffer every core shares (a workspace, an output)
        return first, [0] * len(views)
    owner = _owner(first)
    starts = []
    for v in views:
        if (v.dtype != np.uint8 or v.ndim != 1 or not v.flags.c_contiguous
                or v.flags.writeable != first.flags.writeable):
            return None
        starts.append(v.__array_interface__["data"][0])
    low, high = min(starts), max(s + v.size for s, v in zip(starts, views))
    owner_low = owner.__array_interface__["data"][0]
    if not owner.flags.c_contiguous or low < owner_low or high > owner_low + owner.nbytes:
        return None
    return (as_strided(views[starts.index(low)], shape=(high - low,), strides=(1,)),
            [s - low for s in starts])


def _shared_gms(gms):
    """(the GM arrays of each slot, [cores, slots] byte offsets of each core's buffers in them)
    or None."""
    roots, offsets = [], np.zeros((len(gms), GM_SLOTS), np.int64)
    for slot in range(GM_SLOTS):
        span = _span([g[slot] for g in gms])
        if span is None:
            return None
        roots.append(span[0])
        offsets[:, slot] = span[1]
    return tuple(roots), offsets


def _ub_block(cores):
    """The cores' UBs, all of one size, as the rows of one C-contiguous [cores, stride] array
    (core_ubs), or None. The stride is whole granules, as `interleave` moves them."""
    ubs = [core.ub for core in cores]
    span = _span(ubs)
    if span is None or any(ub.size != ubs[0].size for ub in ubs):
        return None
    block, offsets = span
    stride = offsets[1] if len(ubs) > 1 else ubs[0].size
    if (offsets != [c * stride for c in range(len(ubs))] or stride < ubs[0].size
            or stride % GRANULE):
        return None
    owner = _owner(ubs[0])
    start = ubs[0].__array_interface__["data"][0]
    if start + len(ubs) * stride > owner.__array_interface__["data"][0] + owner.nbytes:
        return None
    return as_strided(block, shape=(len(ubs), stride), strides=(stride, 1))


def run_job(plan, run_schedule, phase, cores, ubs, roots, programs, bases, program_rows=None):
    """One job of lockstep_jobs: its cores' schedules of `phase` in one run_schedule call, on an
    interleaved copy of their UBs (the granules the phase touches) when there are several,
    copied back after. `program_rows`: (rows, starts, points, point_starts) other than the plan's (the
    benchmarks' variants of it)."""
    acquired = []
    arguments = (*roots, *(program_rows or (plan.rows, plan.starts, plan.points,
                                            plan.point_starts)), programs, bases)
    try:
        for core in cores:
            core.acquire()
            acquired.append(core)
        if len(ubs) == 1:
            run_schedule(ubs[0], *arguments)
            return
        runs = plan.touched[phase]
        if runs is None:
            runs = np.array([[0, ubs.shape[1] // GRANULE]], np.int64)
        block = interleave(ubs, runs)
        try:
            run_schedule(block, *arguments)
        finally:
            deinterleave(block, ubs, runs)
            release(block)
    finally:
        for core in acquired:
            core.release()


def in_parallel(jobs, threads, run):
    """run(job) for every job on `threads` threads (this one included), each taking the next
    job when it is free; the first error is raised once all have stopped. An error or Ctrl-C
    (KeyboardInterrupt) in any of them stops the others after the job they are in (a jitted
    call cannot be stopped halfway), and the call returns only once they have; the helper
    threads are daemons, so that the process can exit even while one is in a job."""
    if threads == 1 or len(jobs) <= 1:
        for job in jobs:
            run(job)
        return
    next_job, errors = itertools.count(), []

    def worker():
        for i in next_job:  # itertools.count hands out each index once, even across threads
            if i >= len(jobs) or errors:
                return
            try:
                run(jobs[i])
            except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(err)
    def helper(done):
        try:
            worker()
        finally:
            done.set()

    running = []   # an Event per helper started, set when it stops (Thread.join, interrupted,
    try:           # takes the thread for stopped on Python 3.11)
        for _ in range(min(threads, len(jobs)) - 1):
            done = threading.Event()
            threading.Thread(target=helper, args=(done,), daemon=True).start()
            running.append(done)
        worker()
        for done in running:
            done.wait()
    except BaseException as err:   # Ctrl-C while this thread waits: the helpers stop too
        errors.append(err)
        for done in running:
            done.wait()
        raise
    if errors:
        raise errors[0]
