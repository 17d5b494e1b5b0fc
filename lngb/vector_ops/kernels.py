"""The jitted kernels of the instruction families, and `execute`, the one loop that runs rows.

A kernel gets the UB bytes (and GM bytes for DataCopy) and one resolved instruction row; it never
sees the core object. `execute` dispatches on the row's family (KIND). Element-wise rows go to
`elementwise`, the dispatcher that `table.py` generates from the instruction table: it calls the
walk `make_walk(lane)` built for each instruction's lane function (`lanes.py`), so the loops
call the lane directly and vectorise. The walk and the executor are built by factories: a
jitted function passed to another as an argument would make neither cacheable, and a free
variable of a closure is a constant Numba calls directly. The generated module holds the
cached entry points (`table.Table.kernels`).
"""
import numpy as np

from .._jit import njit, njit_closure, prefetch
from .half import float_to_half, narrow_rint, widen
from .lanes import add
from .program import (BLOCK_COUNT, COPY, COPY_DIR, DST, DST_BLK, DST_REP, DT_DST, DT_SRC, ELEMENTWISE,
                      EMPTY_GROUPS, EVENT, EMPTY_ZERO, F32, GM_SLOT, GM_TO_UB, GROUP_UNIT, GROUP_WIDTH,
                      KIND, REDUCE, ROUND, SAT, SCALAR, SOURCES, SRC0, SRC0_BLK, SRC0_REP,
                      SRC1, SRC1_BLK, SRC1_REP, UB_TO_GM)
from .types import RoundMode
from .walk import (burst, contiguous, dtype_size, flat_count, lane_active, lane_index,
                   lanes_per_repeat, repeat_count)

RINT, NONE = int(RoundMode.CAST_RINT), int(RoundMode.CAST_NONE)


@njit
def load(f32, u16, code, index):
    if code == F32:
        return f32[index]
    return widen(u16[index])


@njit
def store(f32, u16, code, index, value, round_mode, sat):
    if code == F32:
        f32[index] = value
    else:
        u16[index] = to_half(value, round_mode, sat)


@njit
def to_half(value, round_mode, sat):
    if round_mode == RINT or round_mode == NONE:
        return narrow_rint(value, sat)
    return float_to_half(value, round_mode, sat)


@njit
def scalar_value(row):
    """The scalar operand, stored as the bit pattern of the destination type."""
    bits = np.int64(row[SCALAR])
    if row[DT_DST] == F32:
        return np.uint32(bits & 0xFFFFFFFF).view(np.float32)
    return widen(np.uint16(bits & 0xFFFF))


# --- element-wise ---------------------------------------------------------------------------

def make_walk(lane, jit=njit_closure):
    """walk(f32, u16, row) of an element-wise instruction whose lane function is `lane`:
    every active lane of every repeat gets dst = lane(src0, src1, scalar), rounded to dst's type.
    Contiguous operands take the flat loops; the order of lanes is the same either way. `lane`
    is a free variable of the loops, so they call it directly and vectorise."""

    @jit
    def flat_f32(f32, d, a, b, s, n):
        """Contiguous float operands. Slicing first lets the loops index from 0 without
        wrap-around checks, and naming an in-place operand as dst itself spares LLVM an alias
        check that would stop it vectorising the row accumulation (element-wise, so nothing is
        reassociated). Operands an instruction does not read are dst's own bytes, which its
        lane ignores."""
        dv, av, bv = f32[d:d + n], f32[a:a + n], f32[b:b + n]
        if d == b:
            for i in range(n):
                dv[i] = lane(av[i], dv[i], s)
        elif d == a:
            for i in range(n):
                dv[i] = lane(dv[i], bv[i], s)
        else:
            for i in range(n):
                dv[i] = lane(av[i], bv[i], s)

    @jit
    def flat_widen(f32, u16, d, a, s, n):
        """Half source, float destination (at most one source)."""
        dv, av = f32[d:d + n], u16[a:a + n]
        zero = np.float32(0.0)
        for i in range(n):
            dv[i] = lane(widen(av[i]), zero, s)

    @jit
    def flat_narrow(u16, f32, d, a, s, n, round_mode, sat):
        """Float source, half destination (at most one source)."""
        dv, av = u16[d:d + n], f32[a:a + n]
        zero = np.float32(0.0)
        if round_mode == RINT or round_mode == NONE:
            for i in range(n):
                dv[i] = narrow_rint(lane(av[i], zero, s), sat)
        else:
            for i in range(n):
                dv[i] = float_to_half(lane(av[i], zero, s), round_mode, sat)

    @jit
    def flat_f16(u16, d, a, b, s, n, round_mode, sat):
        for i in range(n):
            u16[d + i] = to_half(lane(widen(u16[a + i]), widen(u16[b + i]), s), round_mode, sat)

    @jit
    def walk(f32, u16, row):
        dt, st = row[DT_DST], row[DT_SRC]
        dsize, ssize = dtype_size(dt), dtype_size(st)
        epr = lanes_per_repeat(row)
        s = scalar_value(row)
        round_mode, sat, sources = row[ROUND], row[SAT] != 0, row[SOURCES]
        n = flat_count(row, epr)
        if (n >= 0 and contiguous(dsize, row[DST_BLK], row[DST_REP], epr)
                and (sources < 1 or contiguous(ssize, row[SRC0_BLK], row[SRC0_REP], epr))
                and (sources < 2 or contiguous(ssize, row[SRC1_BLK], row[SRC1_REP], epr))
                and (dt == st or sources <= 1)):
            d, a, b = row[DST] // dsize, row[SRC0] // ssize, row[SRC1] // ssize
            if dt == F32 and st == F32:
                flat_f32(f32, d, a, b, s, n)
            elif dt == F32:
                flat_widen(f32, u16, d, a, s, n)
            elif st == F32:
                flat_narrow(u16, f32, d, a, s, n, round_mode, sat)
            else:
                flat_f16(u16, d, a, b, s, n, round_mode, sat)
            return
        lanes = np.empty(128, dtype=np.float32)
        for r in range(repeat_count(row, epr)):
            for e in range(epr):  # read every source lane of the repeat before writing any
                if lane_active(row, r, e, epr):
                    x = np.float32(0.0)
                    y = np.float32(0.0)
                    if sources >= 1:
                        x = load(f32, u16, st, lane_index(row[SRC0], ssize, row[SRC0_BLK],
                                                          row[SRC0_REP], r, e))
                    if sources >= 2:
                        y = load(f32, u16, st, lane_index(row[SRC1], ssize, row[SRC1_BLK],
                                                          row[SRC1_REP], r, e))
                    lanes[e] = lane(x, y, s)
            for e in range(epr):
                if lane_active(row, r, e, epr):
                    store(f32, u16, dt, lane_index(row[DST], dsize, row[DST_BLK], row[DST_REP],
                                                   r, e), lanes[e], round_mode, sat)

    return walk


# --- reductions ----------------------------------------------------------------------------

@njit
def _round_sum(a, b, code, sat):
    total = add(a, b, a)
    if code == F32:
        return total
    return widen(narrow_rint(total, sat))


@njit
def _tree_sum(values, present, start, width, code, sat):
    """Binary tree of adjacent pairs over values[start:start+width]; masked lanes are absent.

    Returns (sum, any lane present). A node with one absent child passes the other through.
    """
    v = values[start:start + width].copy()
    p = present[start:start + width].copy()
    n = width
    while n > 1:
        for i in range(n // 2):
            a, b = v[2 * i], v[2 * i + 1]
            pa, pb = p[2 * i], p[2 * i + 1]
            if pa and pb:
                v[i] = _round_sum(a, b, code, sat)
            elif pa:
                v[i] = a
            else:
                v[i] = b
            p[i] = pa or pb
        n //= 2
    return v[0], p[0]


@njit
def reduce(f32, u16, row):
    """Sums of groups of GROUP_WIDTH lanes, GROUP_UNIT outputs per unit of dstRepStride."""
    dt = row[DT_DST]
    size = dtype_size(dt)
    epr = 256 // size
    sat = row[SAT] != 0
    width, unit = row[GROUP_WIDTH], row[GROUP_UNIT]
    values = np.zeros(128, dtype=np.float32)
    present = np.zeros(128, dtype=np.bool_)
    dst = row[DST] // size
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            present[e] = lane_active(row, r, e, epr)
            if present[e]:
                values[e] = load(f32, u16, dt, lane_index(row[SRC0], size, row[SRC0_BLK],
                                                          row[SRC0_REP], r, e))
        for k in range(epr // width):
            total, any_present = _tree_sum(values, present, k * width, width, dt, sat)
            out = dst + r * row[DST_REP] * unit + k
            if any_present:
                store(f32, u16, dt, out, total, RINT, sat)
            elif row[EMPTY_GROUPS] == EMPTY_ZERO:
                store(f32, u16, dt, out, np.float32(0.0), RINT, sat)


# --- DataCopy ------------------------------------------------------------------------------

@njit
def copy(ub, gm, row):
    """BLOCK_COUNT bursts of BLOCK_LEN 32-byte blocks with gaps between them."""
    direction = row[COPY_DIR]
    src_buf = gm if direction == GM_TO_UB else ub
    dst_buf = gm if direction == UB_TO_GM else ub
    for i in range(row[BLOCK_COUNT]):
        s, d, length = burst(row, i)
        dv, sv = dst_buf[d:d + length], src_buf[s:s + length]
        for k in range(length):  # a plain loop: numba's slice assignment copies byte by byte
            dv[k] = sv[k]


# --- the executor --------------------------------------------------------------------------

def make_executor(elementwise, jit=njit_closure, prefetch=prefetch):
    """(execute, run_schedule) around `elementwise`, the table's generated dispatcher.

    execute(ub, gms, program, ahead=None) runs instruction rows in order on the UB and the
    GM_SLOTS GM buffers (uint8 arrays), dispatching on each row's family; with `ahead`
    (run_schedule) it prefetches the next step's GM lines on the way."""

    @jit
    def fetch_ahead(ahead):
        """Prefetch the next burst of ahead = (the GM arrays, (slot, byte offset from the
        slot's base) points, the slots' bases, cursor = [next point, points per burst])."""
        gms, points, bases, cursor = ahead
        stop = min(cursor[0] + cursor[1], points.shape[0])
        for k in range(cursor[0], stop):
            slot = points[k, 0]
            prefetch(gms[slot], bases[slot] + points[k, 1])
        cursor[0] = stop

    @jit
    def execute(ub, gms, program, ahead=None):
        f32 = ub.view(np.float32)
        u16 = ub.view(np.uint16)
        for i in range(program.shape[0]):
            row = program[i]
            kind = row[KIND]
            if kind == ELEMENTWISE:
                elementwise(f32, u16, row)
            elif kind == REDUCE:
                reduce(f32, u16, row)
            elif kind == COPY:
                copy(ub, gms[row[GM_SLOT]], row)
            else:
                continue  # events do no work to hide a prefetch burst behind
            if ahead is not None:
                fetch_ahead(ahead)

    @jit
    def run_schedule(ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, schedule):
        """Replay recorded steps: schedule[i] = (program, GM byte base of each of the four
        slots). Step programs hold GM offsets relative to their bases (lngb.runtime.schedule),
        and the caller has checked every base plus the program's GM extent against the
        buffers' sizes.

        While a step runs, the GM lines the next one's DataCopys read (program p's prefetch
        points are points[point_starts[p]:point_starts[p + 1]] = (slot, offset)) are prefetched
        in a burst after each instruction, spread evenly: issued all at once, most prefetches
        are dropped (the CPU has only so many misses in flight) and the next step's DataCopys
        wait for RAM (bench/operator_breakdown.py measures the difference)."""
        gms = (gm0, gm1, gm2, gm3)
        cursor = np.zeros(2, np.int64)
        n = schedule.shape[0]
        for i in range(n):
            p = schedule[i, 0]
            program = rows[starts[p]:starts[p + 1]]
            j = min(i + 1, n - 1)
            q = schedule[j, 0]
            upcoming = points[point_starts[q]:point_starts[q + 1]] if i + 1 < n else points[0:0]
            instructions = 0
            for r in range(program.shape[0]):
                instructions += program[r, KIND] != EVENT
            cursor[0], cursor[1] = 0, -(-upcoming.shape[0] // max(instructions, 1))
            execute(ub, step_gms(gms, schedule[i, 1:]), program,
                    (gms, upcoming, schedule[j, 1:], cursor))

    return execute, run_schedule


@njit
def step_gms(gms, bases):
    return gms[0][bases[0]:], gms[1][bases[1]:], gms[2][bases[2]:], gms[3][bases[3]:]
