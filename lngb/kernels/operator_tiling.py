"""The host tiling of the multi-core LayerNormGradBeta operator (`emulate_operator`).

The B*S rows are split into `block_dim` contiguous runs, one per vector core (the first
R % block_dim cores get one row more). Each core streams its rows through UB in tiles of
`tile_rows` rows x `tile_cols` columns: the column slice (H, H/2, H/4, ..., in multiples of 128)
and the most rows with which the API, double buffering beside it, computes a tile in one chunk,
preferring the fewest instructions per element (`_best_cols`); when no tile fits in one chunk,
the widest slice that fits a row and as many rows as fit. Phase 2 splits the columns of H across
the cores again (`reduce_cols`).
"""
from dataclasses import dataclass

from ..arguments import FLOAT_DTYPES, check_dtype, check_shape, is_int
from ..errors import AlignmentError, CapacityError, InvalidArgumentError
from ..products import get_product
from ..runtime.cache import Cache, cache_key
from .tiling import GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo

API = "emulate_operator"
BUFFER_NUM = 2          # double buffering of the inputs
COL_QUANTUM = 128       # column slices are multiples of 128 elements (whole repeats)
MAX_BURSTS = 4095       # DataCopyParams.blockCount
MAX_STRIDE = 65535      # DataCopyParams.srcStride / dstStride, in 32-byte blocks
TILINGS = Cache("operator tilings")


def round32(n):
    return -(-n // 32) * 32


@dataclass(frozen=True)
class OperatorTiling:
    """How the operator splits the work (host side); see the module docstring."""
    rows: int                # B * S
    h: int
    dtype: str
    product: str
    block_dim: int
    core_rows: tuple         # (first row, row count) per core
    tile_rows: int
    tile_cols: int
    acc_cols: int            # columns of the fp32 accumulator: H, or tile_cols for long rows
    tmp_bytes: int           # the API's sharedTmpBuffer per core
    reduce_cols: tuple       # (first column, column count) each core reduces in phase 2
    reduce_chunk: int        # columns a core reduces at once

    def tiles(self, count):
        """(first row, rows) of each tile of a core's `count` rows, relative to its first."""
        return [(r, min(self.tile_rows, count - r)) for r in range(0, count, self.tile_rows)]

    def col_slices(self, first=0, count=None, width=None):
        count = self.h if count is None else count
        width = self.tile_cols if width is None else width
        return [(c, min(width, first + count - c)) for c in range(first, first + count, width)]


def _phase1_bytes(rows, cols, itemsize, acc_cols):
    """UB bytes of phase 1 for tiles of rows x cols and an accumulator of acc_cols columns, and
    the API's minimum temp buffer."""
    _, min_tmp = GetLayerNormGradBetaMaxMinTmpSize((1, rows, cols), itemsize, False)
    if itemsize == 2:  # the tile partials are widened to fp32 in the temp buffer
        min_tmp = max(min_tmp, 8 * cols)
    fixed = (2 * BUFFER_NUM * round32(rows * cols * itemsize)   # dy, resForGamma queues
             + round32(2 * cols * itemsize)                      # the API's two outputs
             + 2 * acc_cols * 4)                                  # fp32 accumulators
    return fixed, min_tmp


def operator_tiling(shape, dtype, product, block_dim=None, tile_rows=None, tile_cols=None):
    """The OperatorTiling of `emulate_operator` for [B, S, H] inputs of `dtype` on `product`.
    `tile_rows` / `tile_cols` (a multiple of 128, or H) override the choice of tile."""
    shape = check_shape(API, "the shape", shape, 3)
    dtype, product = check_dtype(API, "dtype", dtype, FLOAT_DTYPES), get_product(product, API)
    check_h(API, shape[2], dtype)
    for name, value in (("block_dim", block_dim), ("tile_rows", tile_rows),
                        ("tile_cols", tile_cols)):
        if value is not None and not is_int(value):
            raise InvalidArgumentError(f"{API}: {name} must be an integer or None, got "
                                       f"{value!r}")
    key = cache_key(shape, dtype, product.name, block_dim, tile_rows, tile_cols)
    tiling = TILINGS.get(key)
    if tiling is None:
        tiling = TILINGS.put(key, _operator_tiling(shape, dtype, product, block_dim, tile_rows,
                                                   tile_cols), 4096)
    return tiling


def check_h(api, h, dtype):
    """A row of H elements fills whole 32-byte blocks, as LayerNormGradBeta needs."""
    if h * dtype.itemsize % 32:
        raise AlignmentError(
            f"{api}: a row of H = {h} {dtype} elements is {h * dtype.itemsize} bytes; "
            f"LayerNormGradBeta needs whole 32-byte blocks (H a multiple of "
            f"{32 // dtype.itemsize}): pad H with zeros, as the API's documentation asks")


def _operator_tiling(shape, dtype, product, block_dim, tile_rows, tile_cols):
    b, s, h = shape
    rows, itemsize, usable = b * s, dtype.itemsize, product.usable_ub
    block_dim = check_block_dim(block_dim, rows, product)
    core_rows = split_rows(rows, block_dim)
    base, extra = divmod(rows, block_dim)

    full_acc = None   # set below, once fits() can tell

    def fits(r, w, one_chunk=False, acc_cols=None):
        """A tile of r x w fits beside its buffers (and the API computes it in one chunk)."""
        acc_cols = acc_cols or (h if full_acc else w)
        fixed, min_tmp = _phase1_bytes(r, w, itemsize, acc_cols)
        tmp = (usable - fixed) // 32 * 32
        if tmp < min_tmp:
            return False
        if not one_chunk:
            return True
        max_tmp, _ = GetLayerNormGradBetaMaxMinTmpSize((1, r, w), itemsize, False)
        api = GetLayerNormGradBetaNDTilingInfo((1, r, w), min(tmp, max_tmp), itemsize, False)
        return api.oneCalSize >= r * w

    limit = min(base + (extra > 0), MAX_BURSTS)
    # An accumulator for all of H lets the rows stream in GM order; for very long rows it holds
    # one column slice, and the slices are the outer loop.
    full_acc = fits(1, min(h, COL_QUANTUM), acc_cols=h)

    def most_rows(w, one_chunk=False):
        r = 0
        while r < limit and fits(r + 1, w, one_chunk):
            r += 1
        return r

    if tile_cols is not None:
        cols = int(tile_cols)
        if not (cols == h or (0 < cols < h and cols % COL_QUANTUM == 0)) or not fits(1, cols):
            raise CapacityError(f"{API}: tile_cols {tile_cols} must be H or a "
                                f"multiple of {COL_QUANTUM} below it whose row fits the UB")
    else:
        cols = _best_cols(h, most_rows)
        if cols is None:  # no tile fits in one chunk: the widest slice that fits a row
            cols = h if fits(1, h) else (h // COL_QUANTUM) * COL_QUANTUM
            while cols > 0 and not fits(1, cols):
                cols -= COL_QUANTUM
            if cols == 0:
                raise CapacityError(f"{API}: not even one row of {COL_QUANTUM} "
                                    f"columns fits the {usable}-byte UB of {product.name}")
    if tile_rows is None:
        tile_rows = most_rows(cols, one_chunk=True) or most_rows(cols)
    elif not (1 <= int(tile_rows) <= limit and fits(int(tile_rows), cols)):
        raise CapacityError(f"{API}: tile_rows {tile_rows} x {cols} columns does not "
                            f"fit the UB of {product.name} (or exceeds the rows per core)")
    tile_rows = int(tile_rows)
    acc_cols = h if full_acc else cols
    fixed, min_tmp = _phase1_bytes(tile_rows, cols, itemsize, acc_cols)
    max_tmp, _ = GetLayerNormGradBetaMaxMinTmpSize((1, tile_rows, cols), itemsize, False)
    tmp_bytes = max(min_tmp, min(max_tmp, (usable - fixed) // 32 * 32))

    reduce_cols, chunk = split_columns(h, itemsize, block_dim, usable)
    gaps = ((h - cols) * itemsize, (h - acc_cols) * 4, (h - chunk) * 4, (h - chunk) * itemsize)
    if max(gaps) // 32 > MAX_STRIDE:
        raise CapacityError(f"{API}: H = {h} is too long: a tile's DataCopy would skip "
                            f"{max(gaps) // 32} blocks between rows, more than the {MAX_STRIDE} "
                            "its stride fields hold")
    return OperatorTiling(rows, h, dtype.str, product.name, block_dim, tuple(core_rows),
                          tile_rows, cols, acc_cols, tmp_bytes, tuple(reduce_cols), chunk)


def check_block_dim(block_dim, rows, product, api=API):
    """block_dim as an int: by default one core per row, up to the product's vector cores;
    errors name `api`, the function the user called."""
    if block_dim is None:
        return min(product.vector_cores, rows)
    block_dim = int(block_dim)
    if not 1 <= block_dim <= product.vector_cores:
        raise InvalidArgumentError(
            f"{api}: block_dim {block_dim} outside 1 ~ {product.vector_cores}, the "
            f"vector cores of {product.name} (more logical cores than physical ones hang a "
            "kernel that uses SyncAll)")
    if block_dim > rows:
        raise InvalidArgumentError(f"{api}: block_dim {block_dim} is more than the "
                                   f"{rows} rows (B*S); every core needs at least one row")
    return block_dim


def split_rows(rows, block_dim):
    """(first row, row count) per core: contiguous runs, the first rows % block_dim one longer."""
    base, extra = divmod(rows, block_dim)
    core_rows, start = [], 0
    for c in range(block_dim):
        n = base + (c < extra)
        core_rows.append((start, n))
        start += n
    return tuple(core_rows)


def split_columns(h, itemsize, block_dim, usable):
    """Phase 2: (first column, column count) each core reduces (whole 32-byte blocks), and the
    columns a core reduces at once."""
    quantum = 32 // itemsize
    units = h // quantum
    reducers = min(block_dim, units)
    q, rem = divmod(units, reducers)
    reduce_cols, start = [], 0
    for c in range(block_dim):
        n = (q + (c < rem)) * quantum if c < reducers else 0
        reduce_cols.append((start, n))
        start += n
    per_col = 2 * BUFFER_NUM * 8 + 8 + 2 * itemsize   # partial queue, fp32 total, output queue
    chunk = min(max(n for _, n in reduce_cols), usable // per_col // quantum * quantum)
    return tuple(reduce_cols), chunk


# Instruction rows a tile costs beyond its API row loop, for choosing the tile (the emulator's
# cost per row is about 45 ns, the same order as a 1024-element Add).
TILE_FIXED_ROWS, ROWS_PER_TILE_ROW = 40, 4


def _best_cols(h, most_rows):
    """The column slice (H, H/2, H/4, ... down to multiples of 128) whose largest tile the API
    computes in one chunk with the fewest instruction rows per element; None if none does."""
    best, cols = None, h
    while cols == h or (cols % COL_QUANTUM == 0 and cols >= COL_QUANTUM):
        r = most_rows(cols, one_chunk=True)
        if r:
            score = (TILE_FIXED_ROWS + ROWS_PER_TILE_ROW * r) / (r * cols)
            if best is None or score < best[0]:
                best = (score, cols)
        if cols % 2:
            break
        cols //= 2
    return None if best is None else best[1]
