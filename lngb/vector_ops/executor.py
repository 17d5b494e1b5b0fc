"""The executor: runs instruction rows on one core, or on several in lock step.

`execute(ub, gms, rows)` runs rows on one core; `run_schedule(...)` runs the steps of a
multi-core schedule (lngb.runtime.schedule), and `run_steps`, the jitted function both call, is
the one entry point Numba compiles. It runs GM DataCopys and events itself, and calls every
other row's code out of line through the helper table (helpers.py): each element-wise
instruction's loops and lane, the lane walk, the reductions, the block broadcasts, UB -> UB
DataCopys and GetValues, compiled the first time a program runs one of their rows. Only what
runs is ever compiled, and this module compiles once whatever the table holds: the helpers'
addresses are data.

`execute_cores` runs a program on several cores in lock step: their UBs are interleaved in one
block, a granule at a time (walk.interleaved), and each row, decoded and dispatched once, runs
on every core before the next row (a core's bytes change in the order they would alone; cores
of one phase of a multi-core kernel never read what another writes). The kernels loop over the
cores inside, so a short row's fixed cost (~15 ns, the work of ~300 lanes) is paid once for all
of them, and a row's lanes in one granule on every core are one loop: lngb.runtime.schedule
chooses when. `execute_cores` takes its fields from the program as plain integers: a row view,
or an array made or passed per row, costs reference counts (~10-20 ns a row), as much as a
short row's work (a helper gets the rows and the row's index; its C entry point makes a carray
of the row, which counts no references).

Under NUMBA_DISABLE_JIT this is plain Python, to step in pdb, and the helpers are Python
functions.
"""
import numpy as np

from lngb._jit import call_row, call_run, njit, prefetch
from lngb.errors import InvalidArgumentError
from lngb.vector_ops.helpers import (ESTIMATE_S, HELPERS, WALKS, announce_compile,
                                     cached_on_disk, family_of, variant_of)
from lngb.vector_ops.program import (BLOCK_COUNT, BLOCK_LEN, COPY, COPY_DIR, DST,
                                     DST_GAP, DT_DST, DT_SRC, ELEMENTWISE, EVENT, FLAT, GM_SLOT,
                                     GM_SLOTS, GM_TO_UB, KIND, OP, SAT, SCALAR,
                                     SCALAR_AT, SCALAR_READ, SRC0, SRC1, SRC_GAP, UB_TO_UB)
from lngb.vector_ops.kernels import immediate, scalar_of
from lngb.vector_ops.walk import (G_BYTE, GRANULE, bursts, element_shift, granule_left,
                                  interleaved, piece)

DONE = -1   # run_steps' answer when every step ran (else: where it stopped, see run_steps)


@njit
def copy_gm(ub, cores, gm, bases, slot, to_ub, count, src, dst, length, src_step, dst_step):
    """A GM <-> UB DataCopy on every core of ub (a block of `cores` interleaved UBs), core c's
    GM buffer starting at byte bases[c, slot] of gm: `count` bursts of `length` bytes (whole
    32-byte blocks), burst i from src + i * src_step to dst + i * dst_step (walk.bursts; plain
    arguments, as a row costs reference counts). One core's bursts are one run each; on
    several, a burst of whole granules is one run of the block for all of them, which each
    core's GM bytes fill a granule at a time (whole host cache lines: interleaved 32 bytes at a
    time, half lines, the backward's GM copies took 60 ms instead of 5); other bursts go a piece
    at a time."""
    for i in range(count):   # u, g: the burst's UB address, its GM offset from a core's base
        u = dst + i * dst_step if to_ub else src + i * src_step
        g = src + i * src_step if to_ub else dst + i * dst_step
        if cores == 1:
            uv, gv = ub[u:u + length], gm[bases[0, slot] + g:bases[0, slot] + g + length]
            if to_ub:
                for k in range(length):
                    uv[k] = gv[k]
            else:
                for k in range(length):
                    gv[k] = uv[k]
            continue
        if (u | length) & (GRANULE - 1) == 0:   # whole granules: the burst on every core is
            at = interleaved(u, 0, cores, G_BYTE)   # one run, each core's granules in turn
            uv = ub[at:at + length * cores]
            for c in range(cores):
                gv = gm[bases[c, slot] + g:bases[c, slot] + g + length]
                if to_ub:
                    for j in range(length >> G_BYTE):
                        for k in range(GRANULE):
                            uv[GRANULE * (j * cores + c) + k] = gv[GRANULE * j + k]
                else:
                    for j in range(length >> G_BYTE):
                        for k in range(GRANULE):
                            gv[GRANULE * j + k] = uv[GRANULE * (j * cores + c) + k]
            continue
        for c in range(cores):   # a piece at a time, up to the end of each granule
            gv = gm[bases[c, slot] + g:bases[c, slot] + g + length]
            j = 0
            while j < length:
                m = min(granule_left(u + j, GRANULE), length - j)
                at = interleaved(u + j, c, cores, G_BYTE)
                uv = ub[at:at + m]
                if to_ub:
                    for k in range(m):
                        uv[k] = gv[j + k]
                else:
                    for k in range(m):
                        gv[j + k] = uv[k]
                j += m


@njit
def fetch_ahead(ahead):
    """Prefetch the next burst of ahead = (the GM arrays, (slot, byte offset from a step's base)
    points, each core's bases of the next step ([cores, slots]), cursor = [next point, points per
    burst]): point k is point k % len(points) of core k // len(points)."""
    gms, points, bases, cursor = ahead
    n = points.shape[0]
    start, stop = cursor[0], min(cursor[0] + cursor[1], n * bases.shape[0])
    cursor[0] = stop
    while start < stop:   # point j of core c, up to the burst's end or the core's last point
        c, j = start // n, start % n
        end = min(n, j + stop - start)
        for k in range(j, end):
            slot = points[k, 0]
            prefetch(gms[slot], bases[c, slot] + points[k, 1])
        start += end - j


@njit(inline="always")
def helper_slot(helpers, rows, i):
    """(row, column) of the helper table for row i, not a GM DataCopy or an event
    (helpers.slots_of); (-1, -1) for an instruction newer than the table (its row is added when
    it is installed)."""
    kind, op = rows[i, KIND], rows[i, OP]
    if kind == ELEMENTWISE:
        if op >= helpers.shape[0]:
            return -1, -1
        return op, variant_of(rows[i, FLAT], rows[i, DT_DST], rows[i, DT_SRC])
    return 0, family_of(kind)


@njit(inline="always")
def execute_cores(ub, gms, bases, program, ahead, helpers, start):
    """Run instruction rows start.. in order on every core of ub (the bytes of a block of
    interleaved UBs, one for each row of bases) in lock step: each row on every core, then the
    next row. Core c's GM buffer of slot k is gms[k] from byte bases[c, k]. Prefetch the next
    step's GM lines (`ahead`, run_steps') on the way. Returns DONE, or the index of the first
    row whose helper is not installed (nothing of it has run)."""
    cores = bases.shape[0]
    points, next_bases, cursor = ahead[1], ahead[2], ahead[3]
    prefetches = points.shape[0] * next_bases.shape[0]
    scratch = np.empty(256, dtype=np.float32)   # the reductions' work space
    flags = np.empty(256, dtype=np.bool_)
    # fields are read as rows[i, FIELD]: a row view (program[i]) costs ~9 ns a row in reference
    # counts, more than an event's whole cost
    rows = program
    for i in range(start, rows.shape[0]):
        kind = rows[i, KIND]
        if kind == EVENT:
            continue  # events do no work to hide a prefetch burst behind
        if kind == COPY and rows[i, COPY_DIR] != UB_TO_UB:
            src, dst, length, src_step, dst_step = bursts(rows[i, SRC0], rows[i, DST],
                                                          rows[i, BLOCK_LEN], rows[i, SRC_GAP],
                                                          rows[i, DST_GAP])
            slot = rows[i, GM_SLOT]
            copy_gm(ub, cores, gms[slot], bases, slot, rows[i, COPY_DIR] == GM_TO_UB,
                    rows[i, BLOCK_COUNT], src, dst, length, src_step, dst_step)
        else:
            r, c = helper_slot(helpers, rows, i)
            if r < 0 or helpers[r, c] == 0:
                return i
            helper = helpers[r, c]
            n = rows[i, FLAT]
            if kind != ELEMENTWISE:
                call_row(helper, ub, rows, i, cores, scratch, flags, 0)
                if kind == SCALAR_READ:
                    continue
            elif n < 0:   # helper is its lane, which the lane walk calls
                if helpers[0, WALKS] == 0:
                    return i
                call_row(helpers[0, WALKS], ub, rows, i, cores, scratch, flags, helper)
            else:
                # The contiguous loops, in runs (loops.py). Element indices by shifts:
                # addresses are non-negative, type-aligned. An immediate scalar: all cores in
                # one pass; a scalar register's value is each core's own (GetValue): one core
                # at a time. Written out here: as an inlined function, its array arguments
                # cost ~20 ns a row in reference counts.
                dt, st, at = rows[i, DT_DST], rows[i, DT_SRC], rows[i, SCALAR_AT]
                d = rows[i, DST] >> element_shift(dt)
                a = rows[i, SRC0] >> element_shift(st)
                b = rows[i, SRC1] >> element_shift(st) if dt == st else a   # Cast: one source
                dshift, sshift = G_BYTE - element_shift(dt), G_BYTE - element_shift(st)
                for core in range(cores if at != 0 else 1):
                    first, count = (core, 1) if at != 0 else (0, cores)
                    s = (immediate(dt, rows[i, SCALAR]) if at == 0
                         else scalar_of(ub, cores, core, dt, at, rows[i, SCALAR]))
                    done = 0
                    while done < n:
                        # the lanes up to any operand's granule end, a run on each core a
                        # granule apart, or, a whole granule on every core, one run of them all
                        m, runs, length, dstep, sstep = piece(d + done, a + done, b + done,
                                                              n - done, cores, count, dshift,
                                                              sshift)
                        call_run(helper, ub, interleaved(d + done, first, cores, dshift),
                                 interleaved(a + done, first, cores, sshift),
                                 interleaved(b + done, first, cores, sshift), s, length, runs,
                                 dstep, sstep, dt, rows[i, SAT])
                        done += m
        if cursor[0] < prefetches:   # a call passes its arrays' reference counts: only if due
            fetch_ahead(ahead)
    return DONE


@njit
def run_steps(ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, programs, bases,
              helpers, first_step, first_row):
    """Replay recorded steps in lock step on the cores of ub, a block of bases.shape[1]
    interleaved UBs (lngb.runtime.schedule.interleave; one core's UB as it is), from row
    first_row of step first_step: step i runs program programs[i] with core c's GM buffer of
    slot k at byte bases[i, c, k] of gm<k>. Step programs hold GM offsets relative to their
    bases (lngb.runtime.schedule), and the caller has checked every base plus the program's GM
    extent against the buffers' sizes. Returns DONE, or step * 2**32 + row of the first row
    whose helper is not installed (`helpers`, the helper table's addresses).

    While a step runs, the GM lines the next one's DataCopys read (program p's prefetch points
    are points[point_starts[p]:point_starts[p + 1]] = (slot, offset)), on every core, are
    prefetched in a burst after each instruction, spread evenly: issued all at once, most
    prefetches are dropped (the CPU has only so many misses in flight) and the next step's
    DataCopys wait for RAM (bench/operator_breakdown.py measures the difference)."""
    gms = (gm0, gm1, gm2, gm3)
    cursor = np.zeros(2, np.int64)
    n = programs.shape[0]
    for i in range(first_step, n):
        p = programs[i]
        program = rows[starts[p]:starts[p + 1]]
        j = min(i + 1, n - 1)
        q = programs[j]
        upcoming = points[point_starts[q]:point_starts[q + 1]] if i + 1 < n else points[0:0]
        instructions = 0
        for r in range(program.shape[0]):
            instructions += program[r, KIND] != EVENT and program[r, KIND] != SCALAR_READ
        ahead = upcoming.shape[0] * bases.shape[1]
        cursor[0], cursor[1] = 0, -(-ahead // max(instructions, 1))
        stopped = execute_cores(ub, gms, bases[i], program, (gms, upcoming, bases[j], cursor),
                                helpers, first_row if i == first_step else 0)
        if stopped != DONE:
            return (i << 32) + stopped
    return DONE


def run_schedule(ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, programs, bases):
    """run_steps from the first row, installing each helper a row needs when it stops there.
    The helpers take the UB and a row by address: both must be C-contiguous."""
    if not (ub.flags.c_contiguous and rows.flags.c_contiguous):
        if not ub.flags.c_contiguous:
            raise InvalidArgumentError("the executor needs a C-contiguous UB")
        rows = np.ascontiguousarray(rows)
    arguments = (ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, programs, bases)
    if not _announced:
        announce_compile("the executor", ESTIMATE_S["executor"], compiled_on_disk())
        _announced.append(True)
    step, row = 0, 0
    while True:
        stopped = run_steps(*arguments, HELPERS.addresses, step, row)
        if stopped == DONE:
            return
        step, row = divmod(int(stopped), 1 << 32)
        HELPERS.install(rows[starts[programs[step]] + row])


_announced = []


def compiled_on_disk():
    """Whether run_steps is compiled in this process or in Numba's disk cache (or runs as
    Python)."""
    python = getattr(run_steps, "py_func", None)
    return python is None or bool(run_steps.signatures) or cached_on_disk(python)


def execute(ub, gms, program):
    """Run instruction rows in order on one core: its UB and the GM_SLOTS GM buffers (uint8
    arrays). run_schedule with one step and nothing to prefetch."""
    run_schedule(ub, *gms, program, EVERY_ROW, NO_POINTS, ONE_STEP_POINTS, ONE_STEP,
                 ONE_CORE_BASES)


# run_schedule's arguments for one step: program 0 is rows[0:2**62], i.e. every row (a slice
# stops at the end), with no prefetch points, on one core whose GM buffers start at byte 0
EVERY_ROW = np.array([0, 2 ** 62], np.int64)
NO_POINTS = np.zeros((0, 2), np.int64)
ONE_STEP_POINTS = np.zeros(2, np.int64)
ONE_STEP = np.zeros(1, np.int64)
ONE_CORE_BASES = np.zeros((1, 1, GM_SLOTS), np.int64)
