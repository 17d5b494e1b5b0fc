"""The jitted semantics of every instruction, and `execute`, the one loop that runs them.

A kernel gets the UB bytes (and GM bytes for DataCopy) and one resolved instruction row; it never
sees the core object. Element-wise instructions share one walk: an instruction is one line of
`apply`; the fast loop in `_flat_f32` is the same arithmetic for contiguous float operands.
"""
import numpy as np

from .._jit import njit, prefetch
from .half import (HALF_TO_FLOAT_TABLE, float_to_half, half_to_float, narrow_array_rint,
                   widen_array)
from .program import (ADD, ADDS, BLOCK_COUNT, BLOCK_LEN, BLOCK_REDUCE_SUM, CAST, COPY_GM_TO_UB,
                      COPY_UB_TO_GM, DST, DST_BLK, DST_GAP, DST_REP, DT_DST, DT_SRC, DUPLICATE,
                      EVENT_BASE, F32, FAMILY, FAMILY_ZERO, GM_SLOT, MUL, MULS, OP, ROUND,
                      SAT, SCALAR, SRC0, SRC0_BLK, SRC0_REP, SRC1, SRC1_BLK, SRC1_REP, SRC_GAP,
                      SUB)
from .types import RoundMode
from .walk import (contiguous, flat_count, lane_active, lane_index, lanes_per_repeat,
                   reduce_geometry, repeat_count)

RINT, NONE = int(RoundMode.CAST_RINT), int(RoundMode.CAST_NONE)


@njit
def dtype_size(code):
    return 4 if code == F32 else 2


@njit
def load(f32, u16, code, index):
    if code == F32:
        return f32[index]
    return half_to_float(u16[index])


@njit
def store(f32, u16, code, index, value, round_mode, sat):
    if code == F32:
        f32[index] = value
    else:
        u16[index] = float_to_half(value, round_mode, sat)


@njit
def scalar_value(row):
    """The scalar operand, stored as the bit pattern of the destination type."""
    bits = np.int64(row[SCALAR])
    if row[DT_DST] == F32:
        return np.uint32(bits & 0xFFFFFFFF).view(np.float32)
    return half_to_float(np.uint16(bits & 0xFFFF))


@njit
def quiet(x):
    bits = np.int64(np.float32(x).view(np.uint32)) | 0x400000  # numba widens uint32 math
    return np.uint32(bits).view(np.float32)


@njit
def arith(op, a, b):
    """a op b in fp32. IEEE leaves open which NaN operand a NaN result carries (and the CPU's
    choice varies with how the loop compiles): it is the first NaN operand's, quieted."""
    if op == ADD:
        r = a + b
    elif op == SUB:
        r = a - b
    else:
        r = a * b
    nan_operand = quiet(a) if a != a else quiet(b)  # written as selects so loops vectorise
    return nan_operand if (a != a) | (b != b) else r


@njit
def apply(op, a, b, s):
    """One lane of an element-wise instruction, in fp32 (half results are rounded by `store`)."""
    if op == ADD or op == SUB or op == MUL:
        return arith(op, a, b)
    if op == ADDS:
        return arith(ADD, a, s)
    if op == MULS:
        return arith(MUL, a, s)
    if op == DUPLICATE:
        return s
    return a  # CAST: the conversion happens in `store`


@njit
def elementwise(f32, u16, row):
    op = row[OP]
    dt, st = row[DT_DST], row[DT_SRC]
    dsize, ssize = dtype_size(dt), dtype_size(st)
    epr = lanes_per_repeat(dsize, ssize)
    s = scalar_value(row)
    round_mode = row[ROUND]
    sat = row[SAT] != 0 and op != DUPLICATE  # Duplicate moves the scalar's bits unchanged
    n = flat_count(row, epr)
    binary = op == ADD or op == SUB or op == MUL
    if (n >= 0 and contiguous(dsize, row[DST_BLK], row[DST_REP], epr)
            and (op == DUPLICATE or contiguous(ssize, row[SRC0_BLK], row[SRC0_REP], epr))
            and (not binary or contiguous(ssize, row[SRC1_BLK], row[SRC1_REP], epr))):
        d, a, b = row[DST] // dsize, row[SRC0] // ssize, row[SRC1] // ssize
        if dt == F32 and st == F32:
            _flat_f32(op, f32, d, a, b, s, n)
        elif op == CAST and dt == F32:
            widen_array(f32[d:d + n], u16[a:a + n])
        elif op == CAST:
            _narrow(u16[d:d + n], f32[a:a + n], round_mode, sat)
        else:
            _flat_f16(op, u16, d, a, b, s, n, sat)
        return
    lanes = np.empty(128, dtype=np.float32)
    for r in range(repeat_count(row, epr)):
        for e in range(epr):  # read every source lane of the repeat before writing any
            if lane_active(row, r, e, epr):
                a = np.float32(0.0)
                b = np.float32(0.0)
                if op != DUPLICATE:
                    a = load(f32, u16, st, lane_index(row[SRC0], ssize, row[SRC0_BLK],
                                                      row[SRC0_REP], r, e))
                if binary:
                    b = load(f32, u16, st, lane_index(row[SRC1], ssize, row[SRC1_BLK],
                                                      row[SRC1_REP], r, e))
                lanes[e] = apply(op, a, b, s)
        for e in range(epr):
            if lane_active(row, r, e, epr):
                store(f32, u16, dt, lane_index(row[DST], dsize, row[DST_BLK], row[DST_REP], r, e),
                      lanes[e], round_mode, sat)


@njit
def _flat_f32(op, f32, d, a, b, s, n):
    """Contiguous float operands: the same lanes in the same order as the walk.

    Slicing first lets the loops index from 0 without wrap-around checks, and naming an in-place
    operand as dst itself spares LLVM an alias check that would stop it vectorising the row
    accumulation (element-wise, so no reassociation is involved)."""
    dv, av, bv = f32[d:d + n], f32[a:a + n], f32[b:b + n]
    if op == DUPLICATE or op == CAST:
        for i in range(n):
            dv[i] = apply(op, av[i], av[i], s)
    elif op == ADDS or op == MULS:
        base = ADD if op == ADDS else MUL
        for i in range(n):
            dv[i] = arith(base, av[i], s)
    elif d == b:
        for i in range(n):
            dv[i] = arith(op, av[i], dv[i])
    elif d == a:
        for i in range(n):
            dv[i] = arith(op, dv[i], bv[i])
    else:
        for i in range(n):
            dv[i] = arith(op, av[i], bv[i])


@njit
def _narrow(dst, src, round_mode, sat):
    if round_mode == RINT or round_mode == NONE:
        narrow_array_rint(dst, src, sat)
        return
    for i in range(dst.size):
        dst[i] = float_to_half(src[i], round_mode, sat)


@njit
def _flat_f16(op, u16, d, a, b, s, n, sat):
    for i in range(n):
        x = HALF_TO_FLOAT_TABLE[u16[a + i]]
        y = HALF_TO_FLOAT_TABLE[u16[b + i]]
        u16[d + i] = float_to_half(apply(op, x, y, s), RINT, sat)


@njit
def _round_sum(a, b, code, sat):
    total = arith(ADD, a, b)
    if code == F32:
        return total
    return half_to_float(float_to_half(total, RINT, sat))


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
    op, dt = row[OP], row[DT_DST]
    size = dtype_size(dt)
    epr = 256 // size
    sat = row[SAT] != 0
    width, unit = reduce_geometry(op, size, epr)
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
            elif row[FAMILY] == FAMILY_ZERO:
                store(f32, u16, dt, out, np.float32(0.0), RINT, sat)


@njit
def copy(ub, gm, row):
    """DataCopy bursts: BLOCK_COUNT bursts of BLOCK_LEN 32-byte blocks with gaps between them."""
    op = row[OP]
    src_buf = gm if op == COPY_GM_TO_UB else ub
    dst_buf = gm if op == COPY_UB_TO_GM else ub
    burst = 32 * row[BLOCK_LEN]
    for i in range(row[BLOCK_COUNT]):
        s = row[SRC0] + 32 * i * (row[BLOCK_LEN] + row[SRC_GAP])
        d = row[DST] + 32 * i * (row[BLOCK_LEN] + row[DST_GAP])
        dv, sv = dst_buf[d:d + burst], src_buf[s:s + burst]
        for k in range(burst):  # a plain loop: numba's slice assignment copies byte by byte
            dv[k] = sv[k]


@njit
def execute(ub, gms, program, ahead=None):
    """Run instruction rows in order on the UB and the GM_SLOTS GM buffers (uint8 arrays); with
    `ahead` (run_schedule), prefetch the next step's GM lines on the way."""
    f32 = ub.view(np.float32)
    u16 = ub.view(np.uint16)
    for i in range(program.shape[0]):
        row = program[i]
        op = row[OP]
        if op < BLOCK_REDUCE_SUM:
            elementwise(f32, u16, row)
        elif op < COPY_GM_TO_UB:
            reduce(f32, u16, row)
        elif op < EVENT_BASE:
            copy(ub, gms[row[GM_SLOT]], row)
        else:
            continue  # events do no work to hide a prefetch burst behind
        if ahead is not None:
            _fetch_ahead(ahead)


@njit
def _fetch_ahead(ahead):
    """Prefetch the next burst of ahead = (the GM arrays, (slot, byte offset from the slot's
    base) points, the slots' bases, cursor = [next point, points per burst])."""
    gms, points, bases, cursor = ahead
    stop = min(cursor[0] + cursor[1], points.shape[0])
    for k in range(cursor[0], stop):
        slot = points[k, 0]
        prefetch(gms[slot], bases[slot] + points[k, 1])
    cursor[0] = stop


@njit
def _step_gms(gms, bases):
    return gms[0][bases[0]:], gms[1][bases[1]:], gms[2][bases[2]:], gms[3][bases[3]:]


@njit
def run_schedule(ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, schedule):
    """Replay recorded steps: schedule[i] = (program, GM byte base of each of the four slots).
    Step programs hold GM offsets relative to their bases (lngb.multicore), and the caller has
    checked every base plus the program's GM extent against the buffers' sizes.

    While a step runs, the GM lines the next one's DataCopys read (program p's prefetch points
    are points[point_starts[p]:point_starts[p + 1]] = (slot, offset)) are prefetched in a burst
    after each instruction, spread evenly: issued all at once, most prefetches are dropped (the
    CPU has only so many misses in flight) and the next step's DataCopys wait for RAM
    (bench/operator_breakdown.py measures the difference)."""
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
            instructions += program[r, OP] < EVENT_BASE
        cursor[0], cursor[1] = 0, -(-upcoming.shape[0] // max(instructions, 1))
        execute(ub, _step_gms(gms, schedule[i, 1:]), program,
                (gms, upcoming, schedule[j, 1:], cursor))
