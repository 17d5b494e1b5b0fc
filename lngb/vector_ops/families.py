"""The kernel families the executor calls out of line, each compiled the first time a program
runs one of its rows (`helpers`): the reductions (BlockReduceSum, WholeReduceSum,
PairReduceSum), the block broadcasts (Brcb, DuplicateLane), UB -> UB DataCopys, register loads
(GetValue, SetCmpMask), Select, and the lane walk of element-wise rows. Each is a body (ub,
row, cores, scratch, flags, lane) on every core of ub, a block of `cores` interleaved UBs
(walk.interleaved), inlined into its C entry point `<body>_entry` of pointers (see loops.py)."""
import numpy as np
from numba import carray

from .._jit import call_lane, njit
from .half import narrow_rint, widen
from .kernels import RINT, load, scalar_of, store
from .lanes import add
from .program import (BLOCK_COUNT, BLOCK_LEN, COUNTER, DST, DST_BLK, DST_GAP, DST_REP, DT_DST, DT_SRC,
                      EMPTY_GROUPS, EMPTY_ZERO, F32, GROUP_UNIT, GROUP_WIDTH, MASK0, N_COLS, REPEAT, ROUND,
                      SAT, SCALAR, SCALAR_AT, SOURCES, SRC0, SRC0_BLK, SRC0_REP, SRC1, SRC1_BLK, SRC1_REP,
                      SRC_GAP)
from .walk import (G_BYTE, G_F32, G_HALF, G_WORD, bursts, contiguous, dtype_size, element_shift,
                   interleaved, lane_active, lane_index, lanes_per_repeat, repeat_count)


@njit(inline="always")
def reductions(ub, row, cores, scratch, flags, lane):
    f32, u16 = ub.view(np.float32), ub.view(np.uint16)
    for c in range(cores):
        reduce(f32, u16, cores, c, row, scratch, flags)


@njit(inline="always")
def broadcasts(ub, row, cores, scratch, flags, lane):
    size = dtype_size(row[DT_DST])
    brcb = (row[DST] // size, row[SRC0] // size, row[SRC0_BLK], row[REPEAT], row[DST_REP],
            row[DST_BLK], 32 // size)
    if size == 4:
        broadcast(ub.view(np.float32), cores, *brcb)
    else:
        broadcast(ub.view(np.uint16), cores, *brcb)


@njit(inline="always")
def ub_copies(ub, row, cores, scratch, flags, lane):
    """A UB -> UB DataCopy: 32-byte blocks at 32-byte addresses, so 8-byte words."""
    src, dst, length, src_step, dst_step = bursts(row[SRC0], row[DST], row[BLOCK_LEN],
                                                  row[SRC_GAP], row[DST_GAP])
    copy_ub(ub.view(np.uint64), cores, row[BLOCK_COUNT], src >> 3, dst >> 3, length >> 3,
            src_step >> 3, dst_step >> 3)


@njit(inline="always")
def scalar_reads(ub, row, cores, scratch, flags, lane):
    scalar_read(ub, cores, row)


@njit(inline="always")
def selects(ub, row, cores, scratch, flags, lane):
    bits = scratch.view(np.uint32)
    for c in range(cores):
        if dtype_size(row[DT_DST]) == 4:
            select_core(ub, ub.view(np.uint32), cores, c, row, bits, G_F32, 4)
        else:
            select_core(ub, ub.view(np.uint16), cores, c, row, bits, G_HALF, 2)


def ub_copies_entry(ub, nbytes, row, cores, scratch, flags, lane):
    ub_copies(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256),
              carray(flags, 256), lane)


def scalar_reads_entry(ub, nbytes, row, cores, scratch, flags, lane):
    scalar_reads(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256),
                 carray(flags, 256), lane)


def selects_entry(ub, nbytes, row, cores, scratch, flags, lane):
    selects(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256),
            carray(flags, 256), lane)


def walks_entry(ub, nbytes, row, cores, scratch, flags, lane):
    walks(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256), carray(flags, 256),
          lane)


def reductions_entry(ub, nbytes, row, cores, scratch, flags, lane):
    reductions(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256),
               carray(flags, 256), lane)


def broadcasts_entry(ub, nbytes, row, cores, scratch, flags, lane):
    broadcasts(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256),
               carray(flags, 256), lane)


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


@njit(inline="always")
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


@njit(inline="always")
def scalar_read(ub, cores, row):
    """GetValue on every core of ub (a block of `cores` interleaved UBs): SRC0 bytes at UB
    address DST into the scalar register at SRC1."""
    for c in range(cores):
        for k in range(row[SRC0]):
            ub[interleaved(row[SRC1] + k, c, cores, G_BYTE)] = ub[interleaved(row[DST] + k, c,
                                                                               cores, G_BYTE)]


@njit
def select_core(ub, elements, cores, core, row, bits, shift, size):
    """Select's tensor-scalar mode on core `core` (elements: the UB as dst's type, uint32 or
    uint16, so bits move unchanged): an active lane takes src0's element where its selMask bit
    (SRC1; bit r * epr + e) is 1, else the first `size` bytes of the compare-mask register
    (SCALAR_AT - 1). Every lane of a repeat is read (into `bits`) before any is written."""
    epr = 256 // size
    scalar = np.int64(0)
    for k in range(size):
        scalar |= np.int64(ub[interleaved(row[SCALAR_AT] - 1 + k, core, cores, G_BYTE)]) << (8 * k)
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            if lane_active(row, r, e, epr):
                bit = r * epr + e
                byte = ub[interleaved(row[SRC1] + (bit >> 3), core, cores, G_BYTE)]
                if (byte >> (bit & 7)) & 1:
                    bits[e] = elements[interleaved(lane_index(
                        row[SRC0], size, row[SRC0_BLK], row[SRC0_REP], r, e), core, cores, shift)]
                else:
                    bits[e] = scalar
        for e in range(epr):
            if lane_active(row, r, e, epr):
                elements[interleaved(lane_index(row[DST], size, row[DST_BLK], row[DST_REP], r, e),
                                     core, cores, shift)] = bits[e]


@njit(inline="always")
def walks(ub, row, cores, scratch, flags, lane):
    """An element-wise row lane by lane, core by core, calling its instruction's lane helper
    `lane` (loops.lane_entry) on each."""
    f32, u16 = ub.view(np.float32), ub.view(np.uint16)
    for c in range(cores):
        walk_core(ub, f32, u16, cores, c, row, scratch, lane)


@njit
def walk_core(ub, f32, u16, cores, core, row, lanes, lane):
    """The element-wise instruction lane by lane on core `core` of f32, u16 (the elements of a
    block of `cores` interleaved UBs): strided operands, partial masks, and directed roundings
    to half (the rows whose FLAT is -1). `lanes`: 128 floats of work space."""
    dt, st = row[DT_DST], row[DT_SRC]
    dsize, ssize = dtype_size(dt), dtype_size(st)
    dshift, sshift = G_BYTE - element_shift(dt), G_BYTE - element_shift(st)
    epr = lanes_per_repeat(row)
    s = scalar_of(ub, cores, core, dt, row[SCALAR_AT], row[SCALAR])
    round_mode, sat, sources = row[ROUND], row[SAT] != 0, row[SOURCES]
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
                lanes[e] = call_lane(lane, x, y, s)
        for e in range(epr):
            if lane_active(row, r, e, epr):
                store(f32, u16, dt, interleaved(lane_index(
                    row[DST], dsize, row[DST_BLK], row[DST_REP], r, e), core, cores, dshift),
                      lanes[e], round_mode, sat)
