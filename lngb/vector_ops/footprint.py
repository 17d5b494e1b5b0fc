"""The exact UB bytes an instruction row reads and writes, from the same walk as the kernels
(masked-off lanes are neither read nor written), one rule per family. The sanitizer's shadow
memory, the trace's byte counts and the debugger's watchpoints use it. Lock step's interleaved
copies need less: `extents`, byte ranges that cover every byte of a program's rows, in numpy
(compiling the exact walk for them cost a multi-core program's first run ~2.5 s)."""
import numpy as np

from .._jit import njit
from .program import (BLOCK_COUNT, BLOCK_LEN, BROADCAST, COPY, COPY_DIR, COUNTER, DST, DST_BLK,
                      DST_GAP, DST_REP, DT_DST, DT_SRC, ELEMENTWISE, EMPTY_GROUPS, EMPTY_ZERO, F32,
                      GM_TO_UB, GROUP_UNIT, GROUP_WIDTH, KIND, MASK0, N_COLS, REDUCE, REPEAT,
                      SCALAR_AT, SCALAR_READ, SELECT, SOURCES, SRC0, SRC0_BLK, SRC0_REP, SRC1, SRC1_BLK,
                      SRC1_REP, SRC_GAP, UB_TO_GM)
from .walk import burst, dtype_size, lane_active, lane_index, lanes_per_repeat, repeat_count


@njit
def _mark(flags, element, size, bounds):
    start = element * size
    flags[start:start + size] = 1
    bounds[0] = min(bounds[0], start)
    bounds[1] = max(bounds[1], start + size)


@njit
def footprint(row, read, written, bounds):
    """Set read[b] / written[b] for every UB byte b the row reads / writes (uint8 arrays), and
    widen bounds = [lo, hi) to cover them (start it at [UB size, 0])."""
    kind = row[KIND]
    if kind == ELEMENTWISE:
        _lanes(row, read, written, bounds)
    elif kind == REDUCE:
        _groups(row, read, written, bounds)
    elif kind == COPY:
        _bursts(row, read, written, bounds)
    elif kind == BROADCAST:
        _blocks(row, read, written, bounds)
    elif kind == SELECT:
        _selects(row, read, written, bounds)
    elif kind == SCALAR_READ:   # GetValue, SetCmpMask: UB bytes into a register
        for k in range(row[SRC0]):
            _mark(read, row[DST] + k, 1, bounds)
            _mark(written, row[SRC1] + k, 1, bounds)


def extents(rows):
    """(lo, hi): [lo, hi) byte ranges that cover every byte the rows may read or write (an
    [rows, N_COLS] array): each operand's every lane of every repeat executed, masks ignored,
    DataCopys' UB bursts, GetValue's source and register, scalar register operands. A superset
    of footprint's bytes, from the same geometry (walk.lane_index: lane e of repeat r of an
    operand at address + 32 * (r * repStride + (e // lanes a block) * blkStride), 8 blocks a
    repeat)."""
    rows = np.asarray(rows, np.int64).reshape(-1, N_COLS)
    col = rows.T
    kind = col[KIND]
    dsize = np.where(col[DT_DST] == F32, 4, 2)
    ssize = np.where(col[DT_SRC] == F32, 4, 2)
    epr = np.where(kind == REDUCE, 256 // dsize, np.where((dsize == 4) | (ssize == 4), 64, 128))
    repeats = np.where(col[COUNTER] != 0, (col[MASK0] + epr - 1) // epr, col[REPEAT])
    some = repeats > 0
    ranges = []

    def add(which, lo, hi):
        ranges.append((lo[which], hi[which]))

    def strided(which, address, blk, rep):
        add(which, address, address + 32 * rep * (repeats - 1) + 32 * 7 * blk + 32)

    lanes = ((kind == ELEMENTWISE) | (kind == SELECT)) & some
    strided(lanes, col[DST], col[DST_BLK], col[DST_REP])
    strided(lanes & (col[SOURCES] >= 1), col[SRC0], col[SRC0_BLK], col[SRC0_REP])
    strided(lanes & (col[SOURCES] >= 2) & (kind != SELECT), col[SRC1], col[SRC1_BLK],
            col[SRC1_REP])
    register = ((kind == ELEMENTWISE) | (kind == SELECT)) & (col[SCALAR_AT] != 0)
    add(register, col[SCALAR_AT] - 1, col[SCALAR_AT] + 3)
    selects = (kind == SELECT) & some   # selMask: a bit per lane of every repeat
    add(selects, col[SRC1], col[SRC1] + (repeats * epr + 7) // 8)
    groups = (kind == REDUCE) & some
    strided(groups, col[SRC0], col[SRC0_BLK], col[SRC0_REP])
    outputs = epr // np.maximum(col[GROUP_WIDTH], 1)
    add(groups, col[DST], col[DST] + dsize * ((repeats - 1) * col[DST_REP] * col[GROUP_UNIT]
                                              + outputs))
    blocks = (kind == BROADCAST) & (col[REPEAT] > 0)
    add(blocks, col[SRC0], col[SRC0] + dsize * ((8 * col[REPEAT] - 1) * col[SRC0_BLK] + 1))
    add(blocks, col[DST], col[DST] + 32 * ((col[REPEAT] - 1) * col[DST_REP] + 7 * col[DST_BLK])
        + 32)
    copies = (kind == COPY) & (col[BLOCK_COUNT] > 0) & (col[BLOCK_LEN] > 0)
    length = 32 * ((col[BLOCK_COUNT] - 1) * (col[BLOCK_LEN] + col[SRC_GAP]) + col[BLOCK_LEN])
    add(copies & (col[COPY_DIR] != GM_TO_UB), col[SRC0], col[SRC0] + length)
    length = 32 * ((col[BLOCK_COUNT] - 1) * (col[BLOCK_LEN] + col[DST_GAP]) + col[BLOCK_LEN])
    add(copies & (col[COPY_DIR] != UB_TO_GM), col[DST], col[DST] + length)
    reads = kind == SCALAR_READ
    add(reads, col[DST], col[DST] + col[SRC0])
    add(reads, col[SRC1], col[SRC1] + col[SRC0])
    return (np.concatenate([lo for lo, _ in ranges]), np.concatenate([hi for _, hi in ranges]))


@njit
def _selects(row, read, written, bounds):
    """Select: the active lanes of src0 and dst, their selMask bits' bytes, and the first
    sizeof(T) bytes of the compare-mask register (SCALAR_AT - 1)."""
    size = dtype_size(row[DT_DST])
    epr = 256 // size
    any_lane = False
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            if lane_active(row, r, e, epr):
                any_lane = True
                _mark(read, lane_index(row[SRC0], size, row[SRC0_BLK], row[SRC0_REP], r, e), size,
                      bounds)
                _mark(read, row[SRC1] + ((r * epr + e) >> 3), 1, bounds)
                _mark(written, lane_index(row[DST], size, row[DST_BLK], row[DST_REP], r, e), size,
                      bounds)
    if any_lane:
        for k in range(size):
            _mark(read, row[SCALAR_AT] - 1 + k, 1, bounds)


@njit
def _blocks(row, read, written, bounds):
    size = dtype_size(row[DT_DST])
    for q in range(row[REPEAT]):
        for k in range(8):
            _mark(read, row[SRC0] // size + (8 * q + k) * row[SRC0_BLK], size, bounds)
            block = row[DST] + 32 * (q * row[DST_REP] + k * row[DST_BLK])
            for e in range(32 // size):
                _mark(written, block // size + e, size, bounds)


@njit
def _bursts(row, read, written, bounds):
    for i in range(row[BLOCK_COUNT]):
        s, d, length = burst(row, i)
        if row[COPY_DIR] != GM_TO_UB:
            read[s:s + length] = 1
            bounds[0], bounds[1] = min(bounds[0], s), max(bounds[1], s + length)
        if row[COPY_DIR] != UB_TO_GM:
            written[d:d + length] = 1
            bounds[0], bounds[1] = min(bounds[0], d), max(bounds[1], d + length)


@njit
def _lanes(row, read, written, bounds):
    dsize, ssize = dtype_size(row[DT_DST]), dtype_size(row[DT_SRC])
    epr = lanes_per_repeat(row)
    sources = row[SOURCES]
    for r in range(repeat_count(row, epr)):
        for e in range(epr):
            if lane_active(row, r, e, epr):
                if sources >= 1:
                    _mark(read, lane_index(row[SRC0], ssize, row[SRC0_BLK], row[SRC0_REP], r, e),
                          ssize, bounds)
                if sources >= 2:
                    _mark(read, lane_index(row[SRC1], ssize, row[SRC1_BLK], row[SRC1_REP], r, e),
                          ssize, bounds)
                _mark(written, lane_index(row[DST], dsize, row[DST_BLK], row[DST_REP], r, e),
                      dsize, bounds)


@njit
def _groups(row, read, written, bounds):
    size = dtype_size(row[DT_DST])
    epr = 256 // size
    width, unit = row[GROUP_WIDTH], row[GROUP_UNIT]
    for r in range(repeat_count(row, epr)):
        for k in range(epr // width):
            hit = row[EMPTY_GROUPS] == EMPTY_ZERO
            for e in range(k * width, (k + 1) * width):
                if lane_active(row, r, e, epr):
                    hit = True
                    _mark(read, lane_index(row[SRC0], size, row[SRC0_BLK], row[SRC0_REP], r, e),
                          size, bounds)
            if hit:
                _mark(written, row[DST] // size + r * row[DST_REP] * unit + k, size, bounds)
