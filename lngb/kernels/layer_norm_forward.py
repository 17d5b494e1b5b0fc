"""The multi-core LayerNorm forward of `lngb.emulate_layer_norm_forward` (spec layernorm.md §9.4):
lngb's own kernel, as no CANN operator fixes one. Rows are split into `block_dim` contiguous
runs; each core streams its rows in tiles of whole rows (x double-buffered), and per tile copies
x in, runs `LayerNorm` on it as [1, rows, H] and copies output, mean and variance out. Rows are
independent: no SyncAll, no cross-core reduction.

GM slots: 0 the core's rows of x, 1 gamma | beta, 2 output, 3 each core's mean | variance in
turn (each padded to whole 32-byte blocks; the host gathers them). Tiles are whole blocks of mean
rows (8 float, 16 half) but a core's last, so no DataCopy writes another tile's bytes."""
import copy
from dataclasses import dataclass

import numpy as np

from ..errors import CapacityError
from ..runtime.cache import Cache, cache_key
from ..tensor import GlobalTensor
from ..vector_ops import PIPE_V, DataCopy, Duplicate, HardEvent, PipeBarrier, SetFlag, WaitFlag
from .layer_norm import LayerNorm
from .layer_norm_tiling import GetLayerNormMaxMinTmpSize, GetLayerNormNDTilingInfo
from .operator_tiling import BUFFER_NUM, check_block_dim, split_rows
from .pipe import TBuf, TPipe, TQue
from .sample import padded

API = "emulate_layer_norm_forward"
TILINGS = Cache("layer-norm forward tilings")
X, PARAMS, OUTPUT, STATS = range(4)
SLOT_NAMES = ("x", "gamma/beta", "output", "mean/variance")


@dataclass(frozen=True)
class ForwardTiling:
    """The forward's split: rows per core, rows per tile, the API's temp bytes per core."""
    rows: int                # B * S
    h: int
    dtype: str
    product: str
    block_dim: int
    core_rows: tuple         # (first row, row count) per core
    tile_rows: int
    tmp_bytes: int
    epsilon_bits: int        # epsilon as the kernel uses it (fp32 bits)

    @property
    def epsilon(self):
        return float(np.uint32(self.epsilon_bits).view(np.float32))

    def tiles(self, count):
        return [(r, min(self.tile_rows, count - r)) for r in range(0, count, self.tile_rows)]

    def stats_bytes(self, count):
        """A core's mean (then variance) region in slot 3."""
        return padded(count * np.dtype(self.dtype).itemsize)

    def stats_at(self, c):
        """Where core c's mean region starts in slot 3 (its variance's follows)."""
        return sum(2 * self.stats_bytes(n) for _, n in self.core_rows[:c])


def _ub_bytes(rows, h, itemsize):
    """UB bytes of the buffers beside the temp space for tiles of `rows` rows."""
    tile = rows * h * itemsize
    return (BUFFER_NUM + 1) * tile + 2 * padded(rows * itemsize) + 2 * padded(h * itemsize)


def forward_tiling(shape, dtype, product, block_dim=None, epsilon=1e-5):
    key = cache_key(shape, np.dtype(dtype), product.name, block_dim, epsilon)
    tiling = TILINGS.get(key)
    if tiling is None:
        tiling = TILINGS.put(key, _forward_tiling(shape, np.dtype(dtype), product, block_dim,
                                                  epsilon), 4096)
    return tiling


def _forward_tiling(shape, dtype, product, block_dim, epsilon):
    b, s, h = shape
    rows, itemsize = b * s, dtype.itemsize
    block_dim = check_block_dim(block_dim, rows, product, API)
    core_rows = split_rows(rows, block_dim)
    most = max(n for _, n in core_rows)
    unit = 32 // itemsize

    def temp(r):
        return GetLayerNormMaxMinTmpSize((1, r, h, h), itemsize, False, product=product.name)[0]

    def fits(r):
        return _ub_bytes(r, h, itemsize) + padded(temp(r)) <= product.usable_ub

    candidates = [most] + list(range(most // unit * unit, 0, -unit))
    tile_rows = next((r for r in candidates if r and fits(r)), None)
    if tile_rows is None:
        raise CapacityError(f"{API}: not even {min(unit, most)} rows of H = {h} {dtype.name} fit "
                            f"a {product.name} core beside LayerNorm's temp space")
    eps = np.float32(np.array(epsilon, dtype=dtype))
    return ForwardTiling(rows, h, dtype.str, product.name, block_dim, core_rows, tile_rows,
                         padded(temp(tile_rows)), int(eps.view(np.uint32)))


class LayerNormForwardKernel:
    """One core's kernel; `Process` is a generator (the runner's protocol) with an empty second
    phase. Every instruction is issued inside `runner.step(fn, *args, at=...)`."""

    def __init__(self, core, tiling, block_idx, gms, runner):
        self.core, self.t, self.block_idx, self.run = core, tiling, block_idx, runner
        self.dtype = np.dtype(tiling.dtype)
        self.gms = gms
        self.member, self.tensors, self._tilings = {}, {}, {}

    def gm(self, slot, byte_offset):
        arena = self.gms[slot]
        return GlobalTensor.in_arena(arena, byte_offset, self.dtype,
                                     (arena.size - byte_offset) // self.dtype.itemsize)

    def api_tiling(self, rows):
        """A fresh copy each call: LayerNorm writes the tail's lengths into it."""
        if rows not in self._tilings:
            self._tilings[rows] = GetLayerNormNDTilingInfo(
                (1, rows, self.t.h, self.t.h), self.t.tmp_bytes, self.dtype.itemsize, False,
                product=self.core.product.name)
        return copy.copy(self._tilings[rows])

    def Process(self):
        t, s = self.t, self.dtype.itemsize
        first, count = t.core_rows[self.block_idx]
        stats = t.stats_at(self.block_idx)
        self.Init()
        self.run.step(self.CopyInParams, at=(0, 0, 0, 0))
        for row, rows in t.tiles(count):
            self.run.step(self.Tile, rows, at=(row * t.h * s, 0, (first + row) * t.h * s,
                                               stats + row * s))
        self.run.step(self.Finish, at=(0, 0, 0, 0))
        yield

    def Finish(self, at):
        self.pipe.Destroy()

    def Init(self):
        t, s = self.t, self.dtype.itemsize
        self.pipe = TPipe(self.core)
        tile, stats = t.tile_rows * t.h * s, padded(t.tile_rows * s)
        self.in_x, self.out_y = TQue("VECIN"), TQue("VECOUT")
        self.out_mean, self.out_var = TQue("VECOUT"), TQue("VECOUT")
        self.params, self.tmp_buf = TBuf("VECIN"), TBuf("VECCALC")
        self.pipe.InitBuffer(self.in_x, BUFFER_NUM, tile)
        self.pipe.InitBuffer(self.out_y, 1, tile)
        self.pipe.InitBuffer(self.out_mean, 1, stats)
        self.pipe.InitBuffer(self.out_var, 1, stats)
        self.pipe.InitBuffer(self.params, 2 * padded(t.h * s))
        self.pipe.InitBuffer(self.tmp_buf, t.tmp_bytes)

    def CopyInParams(self, at):
        t = self.t
        params = self.params.Get(self.dtype)
        n = padded(t.h * self.dtype.itemsize) // self.dtype.itemsize
        DataCopy(params, self.gm(PARAMS, 0), 2 * n)
        self.member["gamma"], self.member["beta"] = params, params[n]
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)

    def Tile(self, rows, at):
        t, s = self.t, self.dtype.itemsize
        n, per_block = rows * t.h, 32 // s
        x = self.in_x.AllocTensor(self.dtype)
        DataCopy(x, self.gm(X, at[X]), n)
        self.in_x.EnQue(x)
        x = self.in_x.DeQue(self.dtype)
        y, mean, var = (q.AllocTensor(self.dtype) for q in (self.out_y, self.out_mean,
                                                            self.out_var))
        if rows % per_block:   # the bytes padding a partial block of rows, copied out with it
            for stat in (mean, var):
                Duplicate(stat[rows - rows % per_block], 0.0, per_block)
            PipeBarrier(PIPE_V)
        LayerNorm(y, mean, var, x, self.member["gamma"], self.member["beta"],
                  self.tmp_buf.Get(np.uint8), t.epsilon, self.api_tiling(rows))
        self.in_x.FreeTensor(x)
        _, count = t.core_rows[self.block_idx]
        stats = t.stats_bytes(count)
        for que, tensor, slot, offset, length in (
                (self.out_y, y, OUTPUT, at[OUTPUT], n),
                (self.out_mean, mean, STATS, at[STATS], padded(rows * s) // s),
                (self.out_var, var, STATS, stats + at[STATS], padded(rows * s) // s)):
            que.EnQue(tensor)
            tensor = que.DeQue(self.dtype)
            DataCopy(self.gm(slot, offset), tensor, length)
            que.FreeTensor(tensor)
