"""The source of every table's executor: the contiguous loops of each element-wise instruction,
the element-wise walk, the reduction, Brcb and DataCopy kernels, `execute_cores`, `run_schedule`
and `execute`.

`table.py` generates modules from this file: for each element-wise instruction, one with the
section "per lane" (or "per mixed lane", for those whose source and destination types differ),
LANE replaced by its opcode (so `lane_LANE` becomes `lane_12`, the instruction's lane function,
and the loops get names of their own); then the executor module, which imports those loops and
holds `lane_of`, `flat_f32_of`, `flat_half_of` and `flat_mixed_of`, dispatching on the opcode to
each instruction's loops (the loops are functions of their own: inlined into one function, they
cost ~30 ns a row more; the dispatchers are inlined where they are called), and the section
"executor" as it is. The loops call their lane by a global name, so they inline the lane's
arithmetic and vectorise, and every function of the generated modules is an ordinary
module-level function that Numba caches on disk; a table with one instruction more compiles
that instruction's loops and the executor, and loads the others' from the cache. (Passing a
jitted function to another as an argument would make neither cacheable; closures made by a
factory share one qualified name, so their cached machine code can bind the wrong lane.) A
module's name hashes its source, which carries a fingerprint of every file its code comes from
(the helpers it calls are compiled into it), so its disk cache is never stale. (A jitted helper
of another module that is not inlined, such as kernels.scalar_of, comes from that module's own
disk cache, which Numba keys on that file alone: after editing a constant it imports, such as
walk.G_F32, touch the file or clear the caches.)

`execute_cores` runs a program on several cores in lock step: their UBs are interleaved in one
block, a granule at a time (walk.interleaved), and each row, decoded and dispatched once, runs
on every core before the next row (a core's bytes change in the order they would alone; cores
of one phase of a multi-core kernel never read what another writes). The kernels loop over the
cores inside, so a short row's fixed cost (~15 ns, the work of ~300 lanes) is paid once for all
of them, and a row's lanes in one granule on every core are one loop: lngb.runtime.schedule
chooses when. `execute_cores` takes its fields from the program as plain integers and hands the
kernels plain arguments: a row view, or an array made or passed per row (a slice of the block,
an argument of a function not inlined), costs reference counts (~10-20 ns a row), as much as a
short row's work. An element-wise row's FLAT column, set at issue, says whether its contiguous
loops run; rows with strided operands or partial masks, rare on hot paths, take one walk that
calls `lane_of` per element.

`run_schedule` runs a sequence of programs (the steps of a multi-core schedule) and is the one
jitted entry point; `execute` is its one-step, one-core case, a plain function. Numba compiles
each entry point with its own copy of all the code it calls, and each jitted function that calls
others holds one more copy: with `execute` and `execute_cores` jitted functions of their own
and the dispatchers too, a first compile (emulate and the operator, cold cache) took 73 s on a
2-core AMD EPYC VM; with one entry point and `execute_cores` and the dispatchers inlined (Numba
IR inlining), 41 s.

As a module, this file is the executor of a table whose only element-wise instruction is Add.
"""
import numpy as np

from lngb._jit import njit, prefetch
from lngb.vector_ops.half import narrow_rint, widen
from lngb.vector_ops.kernels import RINT, immediate, load, scalar_of, store
from lngb.vector_ops.lanes import add
from lngb.vector_ops.lanes import add as lane_LANE
from lngb.vector_ops.program import (BLOCK_COUNT, BLOCK_LEN, BROADCAST, COPY, COPY_DIR, COUNTER,
                                     DST, DST_BLK, DST_GAP, DST_REP, DT_DST, DT_SRC, ELEMENTWISE,
                                     EMPTY_GROUPS, EMPTY_ZERO, EVENT, F32, FLAT, GM_SLOT, GM_SLOTS,
                                     GM_TO_UB, GROUP_UNIT, GROUP_WIDTH, KIND, MASK0, OP, REDUCE,
                                     REPEAT, ROUND, SAT, SCALAR, SCALAR_AT, SCALAR_READ, SOURCES,
                                     SRC0, SRC0_BLK, SRC0_REP, SRC1, SRC1_BLK, SRC1_REP, SRC_GAP,
                                     UB_TO_UB)
from lngb.vector_ops.walk import (GRANULE, G_BYTE, G_F32, G_HALF, G_WORD, bursts, contiguous,
                                  dtype_size, element_shift, granule_left, interleaved,
                                  lane_active, lane_index, lanes_per_repeat, piece,
                                  repeat_count)


# --- per lane --------------------------------------------------------------------------------

@njit
def flat_f32_LANE(f32, cores, on, d, a, b, s, n):
    """Contiguous float operands (element indices d, a, b) on the cores on[0] <= c < on[1] of
    f32, a block of `cores` interleaved UBs (walk.interleaved). One core: one run. Several: a
    piece of the row at a time, up to the end of any operand's granule, on each core in turn;
    a whole granule on every core is one run of the block. A one-lane row (the 950's per-row
    scalars) is read and written in place on each core, no loop to enter. Each core's lanes keep
    their order."""
    size, first, count = 1 << G_F32, on[0], on[1] - on[0]
    if n == 1:
        di, ai, bi = (interleaved(d, first, cores, G_F32), interleaved(a, first, cores, G_F32),
                      interleaved(b, first, cores, G_F32))
        for o in range(0, size * count, size):
            f32[di + o] = lane_LANE(f32[ai + o], f32[bi + o], s)
        return
    i = 0
    while i < n:
        m, runs, length, step = piece(d + i, a + i, b + i, n - i, cores, count, size)
        di, ai, bi = (interleaved(d + i, first, cores, G_F32),
                      interleaved(a + i, first, cores, G_F32),
                      interleaved(b + i, first, cores, G_F32))
        for r in range(runs):
            o = r * step
            run_f32_LANE(f32, di + o, ai + o, bi + o, s, length)
        i += m


@njit(inline="always")
def run_f32_LANE(f32, d, a, b, s, n):
    """n lanes of f32 from d, a, b. Slicing first lets the loops index from 0 without
    wrap-around checks, and naming an in-place operand as dst itself spares LLVM an alias check
    that would stop it vectorising the row accumulation (element-wise, so nothing is
    reassociated). Operands an instruction does not read are dst's own bytes, which its lane
    ignores, so their loads vanish: a unary instruction in place (d == a == b) takes the d == a
    loop, which then reads dst alone (taking the d == b loop, it read av and wrote dv, two
    slices of the same bytes, and LLVM's overlap check ran it lane by lane: 42 against 9 ns a
    64-lane Muls per core in lock step)."""
    if d == a:
        dv, bv = f32[d:d + n], f32[b:b + n]
        for i in range(n):
            dv[i] = lane_LANE(dv[i], bv[i], s)
    elif d == b:
        dv, av = f32[d:d + n], f32[a:a + n]
        for i in range(n):
            dv[i] = lane_LANE(av[i], dv[i], s)
    else:
        dv, av, bv = f32[d:d + n], f32[a:a + n], f32[b:b + n]
        for i in range(n):
            dv[i] = lane_LANE(av[i], bv[i], s)


@njit
def flat_half_LANE(u16, cores, on, d, a, b, s, n, sat):
    """Contiguous half operands on the cores `on` of u16, in flat_f32_LANE's pieces (a granule
    holds twice as many halves), each result rounded to nearest half (rows in a directed round
    mode take the walk: walk.flat_elements). One loop per run, vectorised behind LLVM's overlap
    check (in place, it runs lane by lane): flat_f32_LANE's in-place variants, with each
    instruction's half conversions, made the first compile ~8 s longer."""
    size, first, count = 1 << G_HALF, on[0], on[1] - on[0]
    i = 0
    while i < n:
        m, runs, length, step = piece(d + i, a + i, b + i, n - i, cores, count, size)
        di, ai, bi = (interleaved(d + i, first, cores, G_HALF),
                      interleaved(a + i, first, cores, G_HALF),
                      interleaved(b + i, first, cores, G_HALF))
        for r in range(runs):
            o = r * step
            dv, av, bv = u16[di + o:di + o + length], u16[ai + o:ai + o + length], \
                u16[bi + o:bi + o + length]
            for k in range(length):
                dv[k] = narrow_rint(lane_LANE(widen(av[k]), widen(bv[k]), s), sat)
        i += m


# --- per mixed lane (instructions whose source and destination types differ) -----------------

@njit
def flat_mixed_LANE(f32, u16, cores, on, dt, d, a, s, n, sat):
    """Contiguous operands, one source, on the cores `on`: half to float, or float to nearest
    half (rows in a directed round mode take the walk). One core: one run; several: pieces up
    to the end of either operand's granule (which holds twice as many halves as floats), on
    each core in turn."""
    zero = np.float32(0.0)
    first, count = on[0], on[1] - on[0]
    dshift, ashift = (G_F32, G_HALF) if dt == F32 else (G_HALF, G_F32)
    i = 0
    while i < n:
        m, runs = n - i, 1
        if cores > 1:
            m = min(granule_left(d + i, 1 << dshift), granule_left(a + i, 1 << ashift), n - i)
            runs = count
        di, ai = interleaved(d + i, first, cores, dshift), interleaved(a + i, first, cores, ashift)
        for r in range(runs):
            dr, ar = di + (r << dshift), ai + (r << ashift)
            if dt == F32:
                dv, hv = f32[dr:dr + m], u16[ar:ar + m]
                for k in range(m):
                    dv[k] = lane_LANE(widen(hv[k]), zero, s)
            else:
                hv, fv = u16[dr:dr + m], f32[ar:ar + m]
                for k in range(m):
                    hv[k] = narrow_rint(lane_LANE(fv[k], zero, s), sat)
        i += m


# --- dispatch (generated: a branch per element-wise instruction) -------------------------------

@njit
def lane_of(op, a, b, s):
    """One lane of instruction `op` (the strided walk's per-element call)."""
    return lane_LANE(a, b, s)


@njit
def flat_f32_of(op, f32, cores, on, d, a, b, s, n):
    """The float loops of instruction `op`."""
    flat_f32_LANE(f32, cores, on, d, a, b, s, n)


@njit
def flat_half_of(op, u16, cores, on, d, a, b, s, n, sat):
    """The half loops of instruction `op`."""
    flat_half_LANE(u16, cores, on, d, a, b, s, n, sat)


@njit
def flat_mixed_of(op, f32, u16, cores, on, dt, d, a, s, n, sat):
    """The loops of instruction `op` from one type to the other (Cast)."""
    flat_mixed_LANE(f32, u16, cores, on, dt, d, a, s, n, sat)


# --- executor --------------------------------------------------------------------------------

@njit
def walk(f32, u16, cores, core, row):
    """The element-wise instruction lane by lane on core `core` of f32, u16 (the elements of a
    block of `cores` interleaved UBs): strided operands, partial masks, and directed roundings
    to half (the rows whose FLAT is -1)."""
    op, dt, st = row[OP], row[DT_DST], row[DT_SRC]
    dsize, ssize = dtype_size(dt), dtype_size(st)
    dshift, sshift = G_BYTE - element_shift(dt), G_BYTE - element_shift(st)
    epr = lanes_per_repeat(row)
    s = scalar_of(f32, u16, cores, core, dt, row[SCALAR_AT], row[SCALAR])
    round_mode, sat, sources = row[ROUND], row[SAT] != 0, row[SOURCES]
    lanes = np.empty(128, dtype=np.float32)
    for r in range(repeat_count(row, epr)):
        for e in range(epr):  # read every source lane of the repeat before writing any
            if lane_active(row, r, e, epr):
                x = np.float32(0.0)
                y = np.float32(0.0)
                if sources >= 1:
                    x = load(f32, u16, st, interleaved(lane_index(
                        row[SRC0], ssize, row[SRC0_BLK], row[SRC0_REP], r, e), core, cores, sshift))
                if sources >= 2:
                    y = load(f32, u16, st, interleaved(lane_index(
                        row[SRC1], ssize, row[SRC1_BLK], row[SRC1_REP], r, e), core, cores, sshift))
                lanes[e] = lane_of(op, x, y, s)
        for e in range(epr):
            if lane_active(row, r, e, epr):
                store(f32, u16, dt, interleaved(lane_index(
                    row[DST], dsize, row[DST_BLK], row[DST_REP], r, e), core, cores, dshift),
                      lanes[e], round_mode, sat)



@njit
def round_sum(a, b, code, sat):
    total = add(a, b, a)
    if code == F32:
        return total
    return widen(narrow_rint(total, sat))


@njit(inline="always")
def tree_sum(values, present, v, p, start, width, code, sat):
    """Binary tree of adjacent pairs over values[start:start+width]; masked lanes are absent.
    v and p are scratch of `width` entries (the tree is built in them, so nothing allocates).

    Returns (sum, any lane present). A node with one absent child passes the other through.
    """
    for i in range(width):
        v[i] = values[start + i]
        p[i] = present[start + i]
    n = width
    while n > 1:
        for i in range(n // 2):
            a, b = v[2 * i], v[2 * i + 1]
            pa, pb = p[2 * i], p[2 * i + 1]
            if pa and pb:
                v[i] = round_sum(a, b, code, sat)
            elif pa:
                v[i] = a
            else:
                v[i] = b
            p[i] = pa or pb
        n //= 2
    return v[0], p[0]


@njit
def reduce(f32, u16, cores, core, row, scratch, flags):
    """Sums of groups of GROUP_WIDTH lanes, GROUP_UNIT outputs per unit of dstRepStride, on core
    `core` of f32, u16 (a block of `cores` interleaved UBs). scratch (float32) and flags (bool),
    256 entries each, are the caller's work space."""
    dt = row[DT_DST]
    size = dtype_size(dt)
    shift = G_BYTE - element_shift(dt)
    epr = 256 // size
    sat = row[SAT] != 0
    width, unit = row[GROUP_WIDTH], row[GROUP_UNIT]
    values, v = scratch[:128], scratch[128:]
    present, p = flags[:128], flags[128:]
    dst = row[DST] // size
    if (dt == F32 and row[COUNTER] == 0 and row[MASK0] == -1 and width == 64
            and contiguous(size, row[SRC0_BLK], row[SRC0_REP], epr)
            and (cores == 1 or (row[SRC0] >> 2) & ((1 << G_F32) - 1) == 0)):
        # whole float repeats read in a row (ReduceSumImpl's first level): no lane bookkeeping
        src = row[SRC0] // size
        for r in range(repeat_count(row, epr)):
            for g in range(0, 64, 1 << G_F32):   # the repeat's granules on this core
                at = interleaved(src + 64 * r + g, core, cores, G_F32)
                for e in range(1 << G_F32):
                    values[g + e] = f32[at + e]
            for i in range(32):
                v[i] = add(values[2 * i], values[2 * i + 1], v[0])
            n = 32
            while n > 1:
                n //= 2
                for i in range(n):
                    v[i] = add(v[2 * i], v[2 * i + 1], v[0])
            f32[interleaved(dst + r * row[DST_REP] * unit, core, cores, G_F32)] = v[0]
        return
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            present[e] = lane_active(row, r, e, epr)
            if present[e]:
                values[e] = load(f32, u16, dt, interleaved(lane_index(
                    row[SRC0], size, row[SRC0_BLK], row[SRC0_REP], r, e), core, cores, shift))
        for k in range(epr // width):
            total, any_present = tree_sum(values, present, v, p, k * width, width, dt, sat)
            out = interleaved(dst + r * row[DST_REP] * unit + k, core, cores, shift)
            if any_present:
                store(f32, u16, dt, out, total, RINT, sat)
            elif row[EMPTY_GROUPS] == EMPTY_ZERO:
                store(f32, u16, dt, out, np.float32(0.0), RINT, sat)


@njit
def broadcast(buf, cores, dst, src, step, repeat, dst_rep, dst_blk, per_block):
    """Brcb on every core of buf (the elements of a block of `cores` interleaved UBs): element
    (8q + k) * step of src fills the 32-byte block k of repeat q of dst (element indices of
    buf's type; step = SRC0_BLK: 1 for Brcb, 0 for DuplicateLane). A DuplicateLane repeat at a
    granule's start is whole granules on each core, each granule of every core one slice. Each
    core's bytes change in the order they do alone."""
    shift = G_F32 if per_block == 8 else G_HALF
    size = 1 << shift
    for q in range(repeat):
        start = dst + per_block * q * dst_rep
        if step == 0 and dst_blk == 1 and start & (size - 1) == 0:
            for g in range(0, 8 * per_block, size):   # granule g of every core: one slice
                out = interleaved(start + g, 0, cores, shift)
                granules = buf[out:out + size * cores]
                for c in range(cores):
                    value = buf[interleaved(src, c, cores, shift)]
                    for e in range(size):
                        granules[size * c + e] = value
            continue
        for c in range(cores):
            for k in range(8):
                block = start + per_block * k * dst_blk
                value = buf[interleaved(src + (8 * q + k) * step, c, cores, shift)]
                if block & (per_block - 1) == 0:   # a whole block lies in one granule
                    out = interleaved(block, c, cores, shift)
                    for e in range(per_block):
                        buf[out + e] = value
                else:
                    for e in range(per_block):
                        buf[interleaved(block + e, c, cores, shift)] = value


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
def copy_ub(u64, cores, count, src, dst, length, src_step, dst_step):
    """A UB -> UB DataCopy on every core of u64 (a block of `cores` interleaved UBs, in 8-byte
    words); copy_gm's bursts, in words. Bursts of whole granules, whole granules apart, are one
    run of the block for every core (each core's words in the order it copies them alone);
    others go word by word."""
    if cores == 1 or (src | dst | length | src_step | dst_step) & ((1 << G_WORD) - 1) == 0:
        for i in range(count):
            s, d, n = (src + i * src_step) * cores, (dst + i * dst_step) * cores, length * cores
            dv, sv = u64[d:d + n], u64[s:s + n]
            for k in range(n):
                dv[k] = sv[k]
        return
    for c in range(cores):
        for i in range(count):
            s, d = src + i * src_step, dst + i * dst_step
            for k in range(length):
                u64[interleaved(d + k, c, cores, G_WORD)] = u64[interleaved(s + k, c, cores,
                                                                            G_WORD)]


@njit
def scalar_read(ub, cores, row):
    """GetValue on every core of ub (a block of `cores` interleaved UBs): SRC0 bytes at UB
    address DST into the scalar register at SRC1."""
    for c in range(cores):
        for k in range(row[SRC0]):
            ub[interleaved(row[SRC1] + k, c, cores, G_BYTE)] = ub[interleaved(row[DST] + k, c,
                                                                               cores, G_BYTE)]


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


def execute(ub, gms, program):
    """Run instruction rows in order on one core: its UB and the GM_SLOTS GM buffers (uint8
    arrays). run_schedule with one step and nothing to prefetch (a plain function: see the
    module's docstring)."""
    run_schedule(ub, *gms, program, EVERY_ROW, NO_POINTS, ONE_STEP_POINTS, ONE_STEP,
                 ONE_CORE_BASES)


# run_schedule's arguments for one step: program 0 is rows[0:2**62], i.e. every row (a slice
# stops at the end), with no prefetch points, on one core whose GM buffers start at byte 0
EVERY_ROW = np.array([0, 2 ** 62], np.int64)
NO_POINTS = np.zeros((0, 2), np.int64)
ONE_STEP_POINTS = np.zeros(2, np.int64)
ONE_STEP = np.zeros(1, np.int64)
ONE_CORE_BASES = np.zeros((1, 1, GM_SLOTS), np.int64)


@njit(inline="always")
def execute_cores(ub, gms, bases, program, ahead):
    """Run instruction rows in order on every core of ub (the bytes of a block of interleaved
    UBs, one for each row of bases) in lock step: each row on every core, then the next row
    (each core's own bytes in the same order as alone; the row's decoding and dispatch are paid
    once for all). Core c's GM buffer of slot k is gms[k] from byte bases[c, k]. Prefetch the
    next step's GM lines (`ahead`, run_schedule's) on the way."""
    cores = bases.shape[0]
    points, next_bases, cursor = ahead[1], ahead[2], ahead[3]
    prefetches = points.shape[0] * next_bases.shape[0]
    f32 = ub.view(np.float32)
    u16 = ub.view(np.uint16)
    u64 = ub.view(np.uint64)
    scratch = np.empty(256, dtype=np.float32)   # the reductions' work space
    flags = np.empty(256, dtype=np.bool_)
    # fields are read as rows[i, FIELD]: a row view (program[i]) costs ~9 ns a row in reference
    # counts, more than an event's whole cost
    rows = program
    for i in range(rows.shape[0]):
        kind = rows[i, KIND]
        if kind == ELEMENTWISE:
            # Every active lane of every repeat: dst = lane(src0, src1, scalar), rounded to
            # dst's type. Rows whose FLAT column says so take the instruction's contiguous
            # loops (a float row with an immediate scalar, the hot case, makes one call with
            # plain arguments), others the walk: the same lanes in the same order. Written out
            # here: as an inlined function, its array arguments cost ~20 ns a row in reference
            # counts.
            n = rows[i, FLAT]
            if n < 0:
                for c in range(cores):
                    walk(f32, u16, cores, c, rows[i])
            else:   # element indices by shifts: addresses are non-negative, type-aligned
                dt, st, op = rows[i, DT_DST], rows[i, DT_SRC], rows[i, OP]
                d = rows[i, DST] >> element_shift(dt)
                a, b = rows[i, SRC0] >> element_shift(st), rows[i, SRC1] >> element_shift(st)
                at, bits, sat = rows[i, SCALAR_AT], rows[i, SCALAR], rows[i, SAT] != 0
                # an immediate scalar: all cores in one call; a scalar register's value is each
                # core's own: one core at a time
                for c in range(cores if at != 0 else 1):
                    on = (c, c + 1) if at != 0 else (0, cores)
                    s = (immediate(dt, bits) if at == 0
                         else scalar_of(f32, u16, cores, c, dt, at, bits))
                    if dt == F32 and st == F32:
                        flat_f32_of(op, f32, cores, on, d, a, b, s, n)
                    elif dt == st:   # to half: round to nearest (FLAT is -1 for other modes)
                        flat_half_of(op, u16, cores, on, d, a, b, s, n, sat)
                    else:
                        flat_mixed_of(op, f32, u16, cores, on, dt, d, a, s, n, sat)
        elif kind == REDUCE:
            for c in range(cores):
                reduce(f32, u16, cores, c, rows[i], scratch, flags)
        elif kind == COPY:
            direction, count = rows[i, COPY_DIR], rows[i, BLOCK_COUNT]
            src, dst, length, src_step, dst_step = bursts(rows[i, SRC0], rows[i, DST],
                                                          rows[i, BLOCK_LEN], rows[i, SRC_GAP],
                                                          rows[i, DST_GAP])
            if direction == UB_TO_UB:   # 32-byte blocks at 32-byte addresses: 8-byte words
                copy_ub(u64, cores, count, src >> 3, dst >> 3, length >> 3, src_step >> 3,
                        dst_step >> 3)
            else:
                slot = rows[i, GM_SLOT]
                copy_gm(ub, cores, gms[slot], bases, slot, direction == GM_TO_UB, count, src,
                        dst, length, src_step, dst_step)
        elif kind == BROADCAST:
            size = dtype_size(rows[i, DT_DST])
            brcb = (rows[i, DST] // size, rows[i, SRC0] // size, rows[i, SRC0_BLK],
                    rows[i, REPEAT], rows[i, DST_REP], rows[i, DST_BLK], 32 // size)
            if size == 4:
                broadcast(f32, cores, *brcb)
            else:
                broadcast(u16, cores, *brcb)
        elif kind == SCALAR_READ:
            scalar_read(ub, cores, rows[i])
            continue
        else:
            continue  # events do no work to hide a prefetch burst behind
        if cursor[0] < prefetches:   # a call passes its arrays' reference counts: only if due
            fetch_ahead(ahead)


@njit
def run_schedule(ub, gm0, gm1, gm2, gm3, rows, starts, points, point_starts, programs, bases):
    """Replay recorded steps in lock step on the cores of ub, a block of bases.shape[1]
    interleaved UBs (lngb.runtime.schedule.interleave; one core's UB as it is): step i runs
    program programs[i] with core c's GM buffer of slot k at byte bases[i, c, k] of gm<k>. Step
    programs hold GM offsets relative to their bases (lngb.runtime.schedule), and the caller has
    checked every base plus the program's GM extent against the buffers' sizes.

    While a step runs, the GM lines the next one's DataCopys read (program p's prefetch points
    are points[point_starts[p]:point_starts[p + 1]] = (slot, offset)), on every core, are
    prefetched in a burst after each instruction, spread evenly: issued all at once, most
    prefetches are dropped (the CPU has only so many misses in flight) and the next step's
    DataCopys wait for RAM (bench/operator_breakdown.py measures the difference)."""
    gms = (gm0, gm1, gm2, gm3)
    cursor = np.zeros(2, np.int64)
    n = programs.shape[0]
    for i in range(n):
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
        execute_cores(ub, gms, bases[i], program, (gms, upcoming, bases[j], cursor))
