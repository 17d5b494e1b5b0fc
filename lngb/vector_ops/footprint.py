"""The exact UB bytes an instruction row reads and writes, from the same walk as the kernels
(masked-off lanes are neither read nor written), one rule per family. The sanitizer's shadow
memory, the trace's byte counts, the debugger's watchpoints and lock step's interleaved copies
(`touched`) use it."""
import numpy as np

from .._jit import njit
from .program import (BLOCK_COUNT, BROADCAST, COPY, COPY_DIR, DST, DST_BLK, DST_REP, DT_DST, DT_SRC,
                      ELEMENTWISE, EMPTY_GROUPS, EMPTY_ZERO, GM_TO_UB, GROUP_UNIT, GROUP_WIDTH,
                      KIND, REDUCE, REPEAT, SCALAR_AT, SCALAR_READ, SOURCES, SRC0, SRC0_BLK,
                      SRC0_REP, SRC1, SRC1_BLK, SRC1_REP, UB_TO_GM)
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


@njit
def touched(rows, marks):
    """Set marks[b] (a uint8 array of a core's memory size) for every byte any of the rows reads
    or writes: footprint's, and GetValue's and scalar operands' registers."""
    bounds = np.zeros(2, np.int64)
    for i in range(rows.shape[0]):
        row = rows[i]
        footprint(row, marks, marks, bounds)
        if row[KIND] == SCALAR_READ:
            marks[row[DST]:row[DST] + row[SRC0]] = 1
            marks[row[SRC1]:row[SRC1] + row[SRC0]] = 1
        elif row[KIND] == ELEMENTWISE and row[SCALAR_AT] != 0:
            marks[row[SCALAR_AT] - 1:row[SCALAR_AT] + 3] = 1


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
