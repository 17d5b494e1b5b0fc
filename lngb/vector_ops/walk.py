"""The geometry of an instruction row, written once (spec vector_unit.md §2.2, §2.4, §6): which
lanes of which repeats are active, where lane e of repeat r of an operand lives, and where each
DataCopy burst starts. The kernels, the footprint walk, the cost model and the GM checks all
ask these functions; they are jitted and callable from Python alike. They are inlined where
they are used (inline="always"): a call Numba does not inline costs about 20 ns per row in
reference counting of the row it is passed, more than the work of a short vector row.
"""
from .._jit import njit
from .program import (BLOCK_COUNT, BLOCK_LEN, COPY, COPY_DIR, COUNTER, DST, DST_BLK, DST_GAP,
                      DST_REP, DT_DST, DT_SRC, F32, GM_SLOT, I16, KIND, MASK0, MASK1, REPEAT, ROUND,
                      SOURCES, SRC0, SRC0_BLK, SRC0_REP, SRC1_BLK, SRC1_REP, SRC_GAP, UB_TO_GM,
                      UB_TO_UB)
from .types import RoundMode

ROUND_NONE, ROUND_RINT = int(RoundMode.CAST_NONE), int(RoundMode.CAST_RINT)


@njit(inline="always")
def dtype_size(code):
    return 4 if code == F32 else 2


@njit(inline="always")
def element_shift(code):
    """log2 of the element size: byte address >> shift = element index."""
    return 2 if code == F32 else 1


# A block of several cores' UBs interleaves them a granule at a time: granule k of every core in
# core order, then granule k + 1 (lngb.runtime.schedule.interleave), so that a row's lanes in
# one granule on every core are one run of memory, and a core's DataCopy burst lands in whole
# host cache lines. (At 256 bytes, a 64-lane row whose operands lie 128 bytes apart in their
# granules, as a third of the 950 backward's do, would never be one loop of all cores.) Its
# elements, as log2:
GRANULE = 128
G_F32, G_HALF, G_BYTE, G_WORD = 5, 6, 7, 4   # floats, halves, bytes, 8-byte words


@njit(inline="always")
def interleaved(x, core, cores, shift):
    """Where element x of core `core` lies in a block of `cores` interleaved UBs whose granules
    hold 1 << shift such elements; x itself for one core. Element x of core c lies c << shift
    after core 0's."""
    return (((x >> shift) * cores + core) << shift) | (x & ((1 << shift) - 1))


@njit(inline="always")
def granule_left(x, size):
    """Elements from x to the end of its granule (`size` elements, a power of two)."""
    return size - (x & (size - 1))


@njit(inline="always")
def piece(d, a, b, n, cores, count, dshift, sshift):
    """(lanes, runs, lanes a run, dst step, src step) of the next piece of an element-wise row
    whose operands' next lanes are elements d, a, b, n lanes left, on `count` of the `cores` of
    an interleaved block whose granules hold 1 << dshift dst and 1 << sshift src elements: one
    run for one core; else the lanes up to any operand's granule end, a run on each core a
    granule apart, or, whole granules on every core (one type, every operand at a granule's
    start), one run of them all: granule k of every core, then granule k + 1, each core's lanes
    in the order they run alone."""
    if cores == 1:
        return n, 1, n, 0, 0
    size = 1 << dshift
    m = min(granule_left(d, size), granule_left(a, 1 << sshift), granule_left(b, 1 << sshift), n)
    if dshift == sshift and m == size and count == cores:
        whole = n - (n & (size - 1))
        return whole, 1, whole * cores, 0, 0
    return m, count, m, size, 1 << sshift


@njit(inline="always")
def lanes_per_repeat(row):
    """Lanes of one 256-byte repeat: set by the wider of the two types."""
    return 64 if row[DT_DST] == F32 or row[DT_SRC] == F32 else 128


@njit(inline="always")
def repeat_count(row, epr):
    """Repeats executed: repeatTime in normal mode, ceil(count / epr) in counter mode."""
    if row[COUNTER] != 0:
        return (row[MASK0] + epr - 1) // epr
    if row[MASK0] == 0 and row[MASK1] == 0:
        return 0  # no lane set: the instruction is a no-op
    return row[REPEAT]


@njit(inline="always")
def lane_active(row, r, e, epr):
    if row[COUNTER] != 0:
        return r * epr + e < row[MASK0]
    if e < 64:
        return (row[MASK0] >> e) & 1 == 1
    return (row[MASK1] >> (e - 64)) & 1 == 1


@njit(inline="always")
def lane_index(address, size, blk_stride, rep_stride, r, e):
    """Element index (in units of `size` bytes) of lane e of repeat r of an operand."""
    per_block = 32 // size
    byte = address + 32 * rep_stride * r + 32 * blk_stride * (e // per_block)
    return byte // size + e % per_block


@njit(inline="always")
def contiguous(size, blk_stride, rep_stride, epr):
    """True when the operand's lanes follow each other in memory across repeats."""
    return blk_stride == 1 and rep_stride * 32 == epr * size


def prefix_length(mask):
    """k when the mask word has exactly its k lowest bits set (k < 64), else -1. (No mask + 1:
    at 2**63 - 1 it overflows, and numpy warns in pure Python.)"""
    if mask < 0:
        return -1
    k = 0
    while mask & 1:
        mask >>= 1
        k += 1
    return k if mask == 0 else -1


def flat_count(row, epr):
    """Elements touched when the active lanes are one run from lane 0 of the first repeat (every
    lane of every repeat, counter mode's count, or one repeat whose mask sets its first lanes),
    else -1."""
    if row[COUNTER] != 0:
        return row[MASK0]
    low, high = row[MASK0], row[MASK1]
    if low == -1 and (epr <= 64 or high == -1):
        return row[REPEAT] * epr
    if row[REPEAT] != 1:
        return -1
    if epr > 64 and low == -1:
        k = prefix_length(high)
        return 64 + k if k >= 0 else -1
    if epr <= 64 or high == 0:
        return prefix_length(low)
    return -1


def flat_elements(row):
    """An element-wise row's FLAT column: the elements its contiguous loops run (its active
    lanes are one run from lane 0, every operand's lanes follow each other in memory, its types
    are one, or it has one source, a half result rounds to nearest, and it is no int16 row),
    else -1: the lane walk.
    Both visit the same lanes in the same order. (Directed roundings to half, rare, take the
    walk: their code in the loops' functions cost every Cast row ~30 ns.) Plain Python, on the
    row's values as Python ints: only the wrappers call it, at issue (jitted, its first compile
    cost 0.4-0.6 s, and a call from Python costs as much as this)."""
    row = row.tolist()
    size_of, lanes_of, runs_on = map(python, (dtype_size, lanes_per_repeat, contiguous))
    dt, st, sources = row[DT_DST], row[DT_SRC], row[SOURCES]
    if dt == I16 or dt != F32 and row[ROUND] != ROUND_RINT and row[ROUND] != ROUND_NONE:
        return -1
    dsize, ssize = size_of(dt), size_of(st)
    epr = lanes_of(row)
    n = flat_count(row, epr)
    if (n >= 0 and runs_on(dsize, row[DST_BLK], row[DST_REP], epr)
            and (sources < 1 or runs_on(ssize, row[SRC0_BLK], row[SRC0_REP], epr))
            and (sources < 2 or runs_on(ssize, row[SRC1_BLK], row[SRC1_REP], epr))
            and (dt == st or sources <= 1)):
        return n
    return -1


@njit(inline="always")
def bursts(src, dst, block_len, src_gap, dst_gap):
    """(first source byte, first destination byte, bytes per burst, source step, destination
    step) of a DataCopy's bursts from its columns SRC0, DST, BLOCK_LEN, SRC_GAP, DST_GAP: burst
    i starts at first + i * step."""
    length = 32 * block_len
    return src, dst, length, length + 32 * src_gap, length + 32 * dst_gap


@njit(inline="always")
def burst(row, i):
    """(source byte, destination byte, bytes) of burst i of a DataCopy row."""
    src, dst, length, src_step, dst_step = bursts(row[SRC0], row[DST], row[BLOCK_LEN],
                                                  row[SRC_GAP], row[DST_GAP])
    return src + i * src_step, dst + i * dst_step, length


def burst_extent(block_count, block_len, gap):
    """Bytes from the first to the last byte one side of a DataCopy touches (Python: the
    wrappers' checks)."""
    if block_count == 0 or block_len == 0:
        return 0
    return 32 * ((block_count - 1) * (block_len + gap) + block_len)


def copy_bytes(row):
    return 32 * row[BLOCK_COUNT] * row[BLOCK_LEN]


def gm_bursts(row):
    """(is write, slot, [(start, end) byte range of each burst]) of a GM DataCopy row, else None
    (for the GM checks and the multi-core plans; not jitted)."""
    if row[KIND] != COPY or row[COPY_DIR] == UB_TO_UB or not row[BLOCK_COUNT]:
        return None
    write = row[COPY_DIR] == UB_TO_GM
    spans = []
    for i in range(row[BLOCK_COUNT]):
        s, d, length = python(burst)(row, i)
        start = int(d if write else s)
        spans.append((start, start + int(length)))
    return write, int(row[GM_SLOT]), spans


def python(function):
    """A jitted helper's Python function, for Python callers (called from Python, a jitted
    function compiles on its own)."""
    return getattr(function, "py_func", function)

