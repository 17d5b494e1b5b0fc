"""The multi-core LayerNorm backward operator: LayerNormGrad then LayerNormGradBeta per tile,
written like an Ascend C kernel around the two APIs.

Per core, phase 1: gamma is copied in once; for each tile of `tile_rows` whole rows (in GM
order), CopyIn of dy and x (double-buffered TQues) and of the rows' variance and mean,
LayerNormGrad (pdX and resForGamma), CopyOut of pdX, LayerNormGradBeta on the tile (dy and
resForGamma as [1, rows, H]) and the fold of its partial into the core's fp32 accumulator, as the
LayerNormGradBeta operator does; then its CopyOut to the workspace. SyncAll. Phase 2 is the
LayerNormGradBeta operator's: each core adds the block_dim partials of its columns in core order
and rounds once (lngb.kernels.multicore).

So pdX and resForGamma are LayerNormGrad's bits row by row, and pdGamma / pdBeta follow
`emulate_operator`'s order of additions on that resForGamma (equal bits with the same tiles).

GM slots: dy and x (each core's rows), PARAMS (variance | mean | gamma | workspace) and OUTPUT
(pdGamma | pdBeta | pdX); `BackwardTiling.layout` gives the offsets.
"""
from dataclasses import dataclass

import numpy as np

from ..vector_ops import (PIPE_V, Add, Cast, DataCopy, HardEvent, PipeBarrier, RoundMode,
                          SetFlag, WaitFlag)
from .layer_norm_grad import LayerNormGrad
from .layer_norm_grad_beta import LayerNormGradBeta
from ..errors import CapacityError
from ..runtime.cache import Cache, cache_key
from .multicore import F32, OUTPUT, WORKSPACE, LayerNormGradBetaKernel
from .operator_tiling import (BUFFER_NUM, OperatorTiling, check_block_dim, split_columns,
                              split_rows)
from .pipe import TBuf, TPipe, TQue
from .tiling import (GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo,
                     GetLayerNormGradNDTilingInfo, layer_norm_grad_tmp_bytes)

DY, X, PARAMS = 0, 1, WORKSPACE   # the workspace and the outputs sit where multicore has them
API = "emulate_layer_norm_backward"
TILINGS = Cache("layer-norm backward tilings")
SLOT_NAMES = ("inputDy", "inputX", "variance/mean/gamma/workspace", "pdGamma/pdBeta/pdX")


def padded(nbytes):
    return -(-nbytes // 32) * 32


@dataclass(frozen=True)
class BackwardTiling(OperatorTiling):
    """The LayerNormGradBeta operator's tiling (whole rows: tile_cols = acc_cols = H; tmp_bytes is
    the temp buffer both APIs share), plus LayerNormGrad's stackBufferSize and epsilon."""
    lng_stack_bytes: int = 0
    epsilon_bits: int = 0

    @property
    def epsilon(self):
        return np.array(self.epsilon_bits, np.uint32).view(np.float32)[()]

    def layout(self):
        """Byte offsets in the PARAMS and OUTPUT slots, and their sizes."""
        s = np.dtype(self.dtype).itemsize
        row = padded(self.rows * s)
        out = {"variance": 0, "mean": row, "gamma": 2 * row}
        out["workspace"] = 2 * row + padded(self.h * s)
        out["params"] = out["workspace"] + self.block_dim * 2 * self.h * 4
        out["pd_x"] = padded(2 * self.h * s)
        out["outputs"] = out["pd_x"] + self.rows * self.h * s
        return out


class LayerNormBackwardKernel(LayerNormGradBetaKernel):
    """One core's kernel (see the module docstring); phase 2 and the workspace CopyOut are the
    LayerNormGradBeta operator's."""

    def Process(self):
        t, s = self.t, self.dtype.itemsize
        first, count = t.core_rows[self.block_idx]
        at = self.t.layout()
        self.Init()
        self.run.step(self.CopyInGamma, at=(0, 0, at["gamma"], 0))
        for i, (row, rows) in enumerate(t.tiles(count)):
            stats = (first + row) * s
            self.run.step(self.Tile, rows, i == 0,
                          at=(row * t.h * s, row * t.h * s, stats,
                              at["pd_x"] + (first + row) * t.h * s))
        self.run.step(self.CopyOutPartial, t.h,
                      at=(0, 0, at["workspace"] + self.block_idx * 2 * t.h * 4, 0))
        self.run.step(self.Sync)
        yield
        self.ReduceAcrossCores(at["workspace"])

    def Init(self):
        t, s = self.t, self.dtype.itemsize
        self.pipe = TPipe(self.core)
        tile = t.tile_rows * t.h * s
        stats = padded(t.tile_rows * s)
        self.in_dy, self.in_x = TQue("VECIN"), TQue("VECIN")
        self.in_var, self.in_mean = TQue("VECIN"), TQue("VECIN")
        self.out_pdx, self.acc_que = TQue("VECOUT"), TQue("VECOUT")
        self.gamma_buf, self.rfg_buf = TBuf("VECIN"), TBuf("VECCALC")
        self.beta_out, self.tmp_buf = TBuf("VECCALC"), TBuf("VECCALC")
        self.pipe.InitBuffer(self.in_dy, BUFFER_NUM, tile)
        self.pipe.InitBuffer(self.in_x, BUFFER_NUM, tile)
        self.pipe.InitBuffer(self.in_var, BUFFER_NUM, stats)
        self.pipe.InitBuffer(self.in_mean, BUFFER_NUM, stats)
        self.pipe.InitBuffer(self.out_pdx, 1, tile)
        self.pipe.InitBuffer(self.acc_que, 1, 2 * t.h * 4)
        self.pipe.InitBuffer(self.gamma_buf, padded(t.h * s))
        self.pipe.InitBuffer(self.rfg_buf, tile)
        self.pipe.InitBuffer(self.beta_out, 2 * t.h * s)
        self.pipe.InitBuffer(self.tmp_buf, t.tmp_bytes)   # last: LayerNormGrad may overrun it
        self._name_buffers(dy=(self.in_dy, self.dtype), x=(self.in_x, self.dtype),
                           var=(self.in_var, self.dtype), mean=(self.in_mean, self.dtype),
                           pdx=(self.out_pdx, self.dtype), acc=(self.acc_que, F32),
                           gamma=(self.gamma_buf, self.dtype), rfg=(self.rfg_buf, self.dtype),
                           out=(self.beta_out, self.dtype), tmp=(self.tmp_buf, np.uint8))

    def api_tilings(self, rows):
        key = rows
        if key not in self._tilings:
            t, s = self.t, self.dtype.itemsize
            product = self.core.product.name
            self._tilings[key] = (
                GetLayerNormGradNDTilingInfo((1, rows, t.h), t.lng_stack_bytes, s, False,
                                             product=product),
                GetLayerNormGradBetaNDTilingInfo((1, rows, t.h), t.tmp_bytes, s, False))
        return self._tilings[key]

    def CopyInGamma(self, at):
        t = self.t
        gamma = self.gamma_buf.Get(self.dtype)
        DataCopy(gamma, self.gm(PARAMS, at[PARAMS], self.dtype), t.h)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)

    def _copy_in(self, que, slot, offset, count, at):
        local = que.AllocTensor(self.dtype)
        DataCopy(local, self.gm(slot, at[slot] + offset, self.dtype),
                 padded(count * self.dtype.itemsize) // self.dtype.itemsize)
        que.EnQue(local)
        return que

    def Tile(self, rows, first, at):
        t = self.t
        layout = t.layout()
        n = rows * t.h
        self._copy_in(self.in_dy, DY, 0, n, at)
        self._copy_in(self.in_x, X, 0, n, at)
        self._copy_in(self.in_var, PARAMS, 0, rows, at)
        self._copy_in(self.in_mean, PARAMS, layout["mean"], rows, at)
        dy, x = self.in_dy.DeQue(self.dtype), self.in_x.DeQue(self.dtype)
        var, mean = self.in_var.DeQue(self.dtype), self.in_mean.DeQue(self.dtype)
        pdx = self.out_pdx.AllocTensor(self.dtype)
        rfg = self.rfg_buf.Get(self.dtype, n)
        lng_tiling, lngb_tiling = self.api_tilings(rows)
        tmp = self.tmp_buf.Get(np.uint8)
        LayerNormGrad(pdx, rfg, dy, x, var, mean, self.gamma_buf.Get(self.dtype), tmp,
                      t.epsilon, lng_tiling)
        self.in_x.FreeTensor(x)
        self.in_var.FreeTensor(var)
        self.in_mean.FreeTensor(mean)
        self.out_pdx.EnQue(pdx)
        pdx = self.out_pdx.DeQue(self.dtype)
        DataCopy(self.gm(OUTPUT, at[OUTPUT], self.dtype), pdx, n)
        self.out_pdx.FreeTensor(pdx)
        out = self.beta_out.Get(self.dtype, 2 * t.h)
        PipeBarrier(PIPE_V)
        LayerNormGradBeta(out, out[t.h], rfg, dy, tmp, lngb_tiling)
        self.in_dy.FreeTensor(dy)
        if first:
            self.member["acc"] = self.acc_que.AllocTensor(F32)
        acc, partial = self.member["acc"], out
        if self.dtype != F32:  # widen the half partial to fp32 in the (now free) temp buffer
            partial = self.tmp_buf.Get(F32, 2 * t.h)
            Cast(partial, out, RoundMode.CAST_NONE, 2 * t.h)
            PipeBarrier(PIPE_V)
        (DataCopy(acc, partial, 2 * t.h) if first else Add(acc, acc, partial, 2 * t.h))
        PipeBarrier(PIPE_V)


# --- host tiling ---------------------------------------------------------------------------------

def _phase1_bytes(rows, h, itemsize):
    """UB bytes of phase 1 beside the temp buffer for tiles of `rows` rows."""
    tile = rows * h * itemsize
    return (2 * BUFFER_NUM * tile + 2 * BUFFER_NUM * padded(rows * itemsize)   # dy, x, var, mean
            + 2 * tile                                                          # pdX, resForGamma
            + 2 * h * 4 + padded(h * itemsize) + 2 * h * itemsize)             # acc, gamma, out


def _temp_bytes(rows, h, itemsize, product):
    """(temp bytes the two APIs share for tiles of `rows` rows, LayerNormGrad's stackBufferSize):
    LayerNormGrad's footprint with a stackBufferSize of `rows` rows (its host rounds the rows up,
    spec layernorm_grad.md §3.5), at least LayerNormGradBeta's minimum, and room for the half
    partial widened to fp32."""
    if product.kernel_path == "regbase":
        stack = touched = 2 * 4 * (-(-h // 8) * 8)
    else:
        stack = 4 * (9 if itemsize == 2 else 6) * h * rows
        lng = GetLayerNormGradNDTilingInfo((1, rows, h), stack, itemsize, False,
                                           product=product.name)
        touched = layer_norm_grad_tmp_bytes(lng, itemsize)
    _, beta_min = GetLayerNormGradBetaMaxMinTmpSize((1, rows, h), itemsize, False)
    return padded(max(touched, beta_min, 8 * h if itemsize == 2 else 0)), stack


def backward_tiling(shape, dtype, product, block_dim=None, tile_rows=None, epsilon=1e-5):
    """The BackwardTiling of `emulate_layer_norm_backward`: rows split across `block_dim` cores,
    tiles of whole rows, the most rows that fit the UB beside the buffers (or `tile_rows`)."""
    key = cache_key(shape, np.dtype(dtype), product.name, block_dim, tile_rows, epsilon)
    tiling = TILINGS.get(key)
    if tiling is None:
        tiling = TILINGS.put(key, _backward_tiling(shape, np.dtype(dtype), product, block_dim,
                                                   tile_rows, epsilon), 4096)
    return tiling


def _backward_tiling(shape, dtype, product, block_dim, tile_rows, epsilon):
    b, s, h = shape
    rows, itemsize = b * s, dtype.itemsize
    block_dim = check_block_dim(block_dim, rows, product, API)
    core_rows = split_rows(rows, block_dim)
    most = max(n for _, n in core_rows)

    def fits(r):
        tmp, _ = _temp_bytes(r, h, itemsize, product)
        return _phase1_bytes(r, h, itemsize) + tmp <= product.usable_ub

    if tile_rows is None:
        tile_rows = next((r for r in range(min(most, 4095), 0, -1) if fits(r)), None)
        if tile_rows is None:
            tmp, _ = _temp_bytes(1, h, itemsize, product)
            raise CapacityError(
                f"{API}: not even one row of H = {h} {dtype.name} fits a {product.name} core: "
                f"the buffers take {_phase1_bytes(1, h, itemsize)} bytes and LayerNormGrad's temp "
                f"space {tmp} (CANN's host rounds its rows per chunk up to "
                f"{8 if itemsize == 4 else 16}), beside {product.usable_ub} usable UB bytes"
                + ("; the Ascend 950 (atlas-350) kernel needs two fp32 rows only"
                   if product.kernel_path == "common" else ""))
    elif not (1 <= tile_rows <= most and fits(tile_rows)):
        raise CapacityError(f"{API}: tile_rows {tile_rows} does not fit the UB of "
                            f"{product.name} (or exceeds the {most} rows of a core)")
    tmp, stack = _temp_bytes(tile_rows, h, itemsize, product)
    reduce_cols, chunk = split_columns(h, itemsize, block_dim, product.usable_ub)
    eps = np.float32(np.array(epsilon, dtype=dtype))
    return BackwardTiling(rows, h, dtype.str, product.name, block_dim, core_rows, tile_rows, h, h,
                          tmp, reduce_cols, chunk, stack, int(eps.view(np.uint32)))
