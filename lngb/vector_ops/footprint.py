"""The exact UB bytes an instruction row reads and writes, from the same walk as the kernels
(masked-off lanes are neither read nor written). The sanitizer's shadow memory uses it."""
from .._jit import njit
from .program import (ADD, BLOCK_COUNT, BLOCK_LEN, BLOCK_REDUCE_SUM, COPY_GM_TO_UB,
                      COPY_UB_TO_GM, DST, DST_BLK, DST_GAP, DST_REP, DT_DST, DT_SRC, DUPLICATE,
                      EVENT_BASE, F32, FAMILY, FAMILY_ZERO, MUL, OP, SRC0, SRC0_BLK, SRC0_REP,
                      SRC1, SRC1_BLK, SRC1_REP, SRC_GAP, SUB)
from .walk import lane_active, lane_index, lanes_per_repeat, reduce_geometry, repeat_count


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
    op = row[OP]
    if op >= EVENT_BASE:
        return
    if op >= COPY_GM_TO_UB:
        burst = 32 * row[BLOCK_LEN]
        for i in range(row[BLOCK_COUNT]):
            s = row[SRC0] + 32 * i * (row[BLOCK_LEN] + row[SRC_GAP])
            d = row[DST] + 32 * i * (row[BLOCK_LEN] + row[DST_GAP])
            if op != COPY_GM_TO_UB:
                read[s:s + burst] = 1
                bounds[0], bounds[1] = min(bounds[0], s), max(bounds[1], s + burst)
            if op != COPY_UB_TO_GM:
                written[d:d + burst] = 1
                bounds[0], bounds[1] = min(bounds[0], d), max(bounds[1], d + burst)
        return
    dsize = 4 if row[DT_DST] == F32 else 2
    ssize = 4 if row[DT_SRC] == F32 else 2
    if op < BLOCK_REDUCE_SUM:
        epr = lanes_per_repeat(dsize, ssize)
        sources = 0 if op == DUPLICATE else (2 if (op == ADD or op == SUB or op == MUL) else 1)
        for r in range(repeat_count(row, epr)):
            for e in range(epr):
                if lane_active(row, r, e, epr):
                    if sources >= 1:
                        _mark(read, lane_index(row[SRC0], ssize, row[SRC0_BLK], row[SRC0_REP],
                                               r, e), ssize, bounds)
                    if sources == 2:
                        _mark(read, lane_index(row[SRC1], ssize, row[SRC1_BLK], row[SRC1_REP],
                                               r, e), ssize, bounds)
                    _mark(written, lane_index(row[DST], dsize, row[DST_BLK], row[DST_REP], r, e),
                          dsize, bounds)
        return
    epr = 256 // dsize
    width, unit = reduce_geometry(op, dsize, epr)
    for r in range(repeat_count(row, epr)):
        for k in range(epr // width):
            hit = row[FAMILY] == FAMILY_ZERO
            for e in range(k * width, (k + 1) * width):
                if lane_active(row, r, e, epr):
                    hit = True
                    _mark(read, lane_index(row[SRC0], dsize, row[SRC0_BLK], row[SRC0_REP], r, e),
                          dsize, bounds)
            if hit:
                _mark(written, row[DST] // dsize + r * row[DST_REP] * unit + k, dsize, bounds)
