"""The multi-core LayerNormGradBeta operator's kernel, written like its Ascend C source.

Per core, phase 1: for each tile (rows in GM order, and within them the column slices), CopyIn
(AllocTensor, DataCopy GM -> UB on MTE2, EnQue; two buffers per input, so MTE2 fetches the next
tile while V computes) and Compute (DeQue, LayerNormGradBeta on the tile as [1, rows, cols],
FreeTensor, then fold the tile's partial into an fp32 accumulator); then CopyOut of the
accumulator to the core's row of a GM workspace [block_dim, 2, H] fp32. SyncAll. Phase 2: each
core adds the block_dim partials of its columns in core order 0, 1, ... in fp32, rounds once to
the input dtype and writes pdGamma / pdBeta.

Order of additions, per column (the numerics contract of this operator):
  tile partial  = the API's order within the tile (its row loop: ((row0 + 0) + row1) + ...), in
                  fp32; for half inputs the API rounds it to half (one rounding per tile);
  core partial  = ((tile0 + tile1) + tile2) + ... in fp32, tiles in row order (tile0 is copied,
                  not added to zero, so -0.0 survives);
  result        = ((core0 + core1) + core2) + ... in fp32, rounded to the input dtype (CAST_NONE:
                  to nearest, ties to even; saturating as the core's sat_mode says; always on
                  the 950, whose API saturates its half outputs).
With block_dim=1 and inputs that fit one tile the result equals `lngb.emulate`'s bits.

The host tiling is `operator_tiling.py`; running the kernel (live, or planned and replayed on
threads) is `lngb.runtime.schedule`.
"""
import numpy as np

from ..tensor import GlobalTensor
from ..vector_ops import (PIPE_V, Add, Cast, DataCopy, DataCopyParams, PipeBarrier, RoundMode,
                          SyncAll)
from ..vector_ops.program import GM_SLOTS
from .layer_norm_grad_beta import LayerNormGradBeta
from .operator_tiling import BUFFER_NUM
from .pipe import TBuf, TPipe, TQue
from .tiling import GetLayerNormGradBetaNDTilingInfo

F32 = np.dtype(np.float32)
DY, RFG, WORKSPACE, OUTPUT = range(GM_SLOTS)
SLOT_NAMES = ("inputDy", "resForGamma", "workspace", "pdGamma/pdBeta")


class LayerNormGradBetaKernel:
    """One core's kernel. `Process` is a generator: it yields at SyncAll, and the runner resumes
    it once every core has got there. Every instruction is issued inside `runner.step(fn, *args,
    at=...)`: fn may depend only on its arguments, `at` (the GM byte base of each slot) and the
    state of the core, the TPipe and `self.member` (what the planner keys on)."""

    def __init__(self, core, tiling, block_idx, gms, runner):
        self.core, self.t, self.block_idx, self.run = core, tiling, block_idx, runner
        self.dtype = np.dtype(tiling.dtype)
        self.gms = gms
        self.member = {}          # tensors kept between steps (Ascend C class members)
        self.tensors = {}         # every buffer by name, for debuggers
        self._tilings = {}

    def gm(self, slot, byte_offset, dtype):
        arena = self.gms[slot]
        return GlobalTensor.in_arena(arena, byte_offset, dtype,
                                     (arena.size - byte_offset) // np.dtype(dtype).itemsize)

    def api_tiling(self, rows, cols):
        key = (rows, cols)
        if key not in self._tilings:
            self._tilings[key] = GetLayerNormGradBetaNDTilingInfo(
                (1, rows, cols), self.t.tmp_bytes, self.dtype.itemsize, False)
        return self._tilings[key]

    def Process(self):
        t, s = self.t, self.dtype.itemsize
        _, count = t.core_rows[self.block_idx]   # the core's GM slots start at its first row
        self.Init()
        # the accumulator holds all of H (the rows stream in GM order) or one column slice
        # (the slices are the outer loop); either way each column adds its tiles in row order
        runs = ([t.col_slices()] if t.acc_cols == t.h
                else [[part] for part in t.col_slices()])
        for slices in runs:
            acc_col = slices[0][0]
            for i, (row, rows) in enumerate(t.tiles(count)):
                for col, cols in slices:
                    self.run.step(self.Tile, rows, col - acc_col, cols, i == 0,
                                  at=((row * t.h + col) * s,) * 2 + (0, 0))
            width = sum(cols for _, cols in slices)
            self.run.step(self.CopyOutPartial, width,
                          at=(0, 0, (self.block_idx * 2 * t.h + acc_col) * 4, 0))
        self.run.step(self.Sync)
        yield
        self.ReduceAcrossCores()

    def ReduceAcrossCores(self, workspace=0):
        """Phase 2: this core's columns of pdGamma / pdBeta, every core's partials (in the
        workspace from byte `workspace` of its slot) added in core order."""
        t, s = self.t, self.dtype.itemsize
        lo, width = t.reduce_cols[self.block_idx]
        if width == 0:
            return
        self.InitReduce()
        for col, cols in t.col_slices(lo, width, t.reduce_chunk):
            for k in range(t.block_dim):
                self.run.step(self.AddPartial, cols, k == 0,
                              at=(0, 0, workspace + (k * 2 * t.h + col) * 4, 0))
            self.run.step(self.CopyOutResult, cols, at=(0, 0, 0, col * s))
        self.run.step(self.Finish)

    # phase 1 ---------------------------------------------------------------------------------
    def Init(self):
        """TPipe and buffers (no instructions)."""
        t, s = self.t, self.dtype.itemsize
        self.pipe = TPipe(self.core)
        self.in_dy, self.in_rfg, self.acc_que = TQue("VECIN"), TQue("VECIN"), TQue("VECOUT")
        self.out_buf, self.tmp_buf = TBuf("VECCALC"), TBuf("VECCALC")
        self.pipe.InitBuffer(self.in_dy, BUFFER_NUM, t.tile_rows * t.tile_cols * s)
        self.pipe.InitBuffer(self.in_rfg, BUFFER_NUM, t.tile_rows * t.tile_cols * s)
        self.pipe.InitBuffer(self.acc_que, 1, 2 * t.acc_cols * 4)
        self.pipe.InitBuffer(self.out_buf, 2 * t.tile_cols * s)
        self.pipe.InitBuffer(self.tmp_buf, t.tmp_bytes)
        self._name_buffers(dy=(self.in_dy, self.dtype), rfg=(self.in_rfg, self.dtype),
                           acc=(self.acc_que, F32), out=(self.out_buf, self.dtype),
                           tmp=(self.tmp_buf, np.uint8))

    def _name_buffers(self, **queues):
        """Every buffer, typed, under a name for debuggers (dy0, dy1, ..., acc, ...)."""
        for name, (que, dtype) in queues.items():
            for i, buf in enumerate(que.buffers):
                self.tensors[name + (str(i) if len(que.buffers) > 1 else "")] = (
                    buf.ReinterpretCast(dtype))

    def copy_in(self, que, slot, rows, cols, at):
        local = que.AllocTensor(self.dtype)
        src = self.gm(slot, at[slot], self.dtype)
        s = self.dtype.itemsize
        if cols == self.t.h:
            DataCopy(local, src, rows * cols)
        else:
            DataCopy(local, src, DataCopyParams(rows, cols * s // 32, (self.t.h - cols) * s // 32, 0))
        que.EnQue(local)

    def Tile(self, rows, col, cols, first, at):
        """CopyIn and Compute of one tile; its columns are col .. col + cols of the accumulator
        [pdGamma acc_cols | pdBeta acc_cols], and the first tile of a slice starts them."""
        self.copy_in(self.in_dy, DY, rows, cols, at)
        self.copy_in(self.in_rfg, RFG, rows, cols, at)
        dy, rfg = self.in_dy.DeQue(self.dtype), self.in_rfg.DeQue(self.dtype)
        out = self.out_buf.Get(self.dtype, 2 * cols)
        LayerNormGradBeta(out, out[cols], rfg, dy, self.tmp_buf.Get(np.uint8),
                          self.api_tiling(rows, cols))
        self.in_dy.FreeTensor(dy)
        self.in_rfg.FreeTensor(rfg)
        if first and col == 0:
            self.member["acc"] = self.acc_que.AllocTensor(F32)
        acc, h, partial = self.member["acc"], self.t.acc_cols, out
        if self.dtype != F32:  # widen the half partial to fp32 in the (now free) temp buffer
            partial = self.tmp_buf.Get(F32, 2 * cols)
            Cast(partial, out, RoundMode.CAST_NONE, 2 * cols)
            PipeBarrier(PIPE_V)
        # gamma and beta are adjacent in both when the tile has all of H: one instruction
        parts = ([(acc, partial, 2 * h)] if cols == h
                 else [(acc[col], partial, cols), (acc[h + col], partial[cols], cols)])
        for dst, src, n in parts:
            (DataCopy(dst, src, n) if first else Add(dst, dst, src, n))
        PipeBarrier(PIPE_V)

    def CopyOutPartial(self, cols, at):
        """The accumulator's first `cols` columns of pdGamma and of pdBeta to this core's row
        [pdGamma H | pdBeta H] of the workspace."""
        acc = self.member.pop("acc")
        self.acc_que.EnQue(acc)
        acc = self.acc_que.DeQue(F32)
        t = self.t
        DataCopy(self.gm(WORKSPACE, at[WORKSPACE], F32), acc,
                 DataCopyParams(2, cols * 4 // 32, (t.acc_cols - cols) * 4 // 32,
                                (t.h - cols) * 4 // 32))
        self.acc_que.FreeTensor(acc)

    def Sync(self, at):
        self.pipe.Destroy()
        SyncAll()

    # phase 2 ---------------------------------------------------------------------------------
    def InitReduce(self):
        t, s = self.t, self.dtype.itemsize
        self.pipe = TPipe(self.core)
        self.in_part, self.out_que, self.total_buf = TQue("VECIN"), TQue("VECOUT"), TBuf("VECCALC")
        self.pipe.InitBuffer(self.in_part, BUFFER_NUM, 2 * t.reduce_chunk * 4)
        self.pipe.InitBuffer(self.total_buf, 2 * t.reduce_chunk * 4)
        self.pipe.InitBuffer(self.out_que, 1, 2 * t.reduce_chunk * s)
        self._name_buffers(part=(self.in_part, F32), total=(self.total_buf, F32),
                           result=(self.out_que, self.dtype))

    def AddPartial(self, cols, first, at):
        """Fold core k's partial of these columns into the fp32 total (core order)."""
        part = self.in_part.AllocTensor(F32)
        gap = (self.t.h - cols) * 4 // 32
        DataCopy(part, self.gm(WORKSPACE, at[WORKSPACE], F32),
                 DataCopyParams(2, cols * 4 // 32, gap, 0))
        self.in_part.EnQue(part)
        part = self.in_part.DeQue(F32)
        total = self.total_buf.Get(F32, 2 * cols)
        (DataCopy(total, part, 2 * cols) if first else Add(total, total, part, 2 * cols))
        PipeBarrier(PIPE_V)
        self.in_part.FreeTensor(part)

    def CopyOutResult(self, cols, at):
        s, n = self.dtype.itemsize, 2 * cols
        out = self.out_que.AllocTensor(self.dtype)
        total = self.total_buf.Get(F32, n)
        if self.dtype == F32:
            DataCopy(out, total, n)
        else:  # the 950's API saturates its half outputs; its operator does the same
            saturate = True if self.core.product.kernel_path == "regbase" else None
            Cast(out, total, RoundMode.CAST_NONE, n, sat_mode=saturate)
        PipeBarrier(PIPE_V)
        self.out_que.EnQue(out)
        out = self.out_que.DeQue(self.dtype)
        DataCopy(self.gm(OUTPUT, at[OUTPUT], self.dtype), out,
                 DataCopyParams(2, cols * s // 32, 0, (self.t.h - cols) * s // 32))
        self.out_que.FreeTensor(out)

    def Finish(self, at):
        self.pipe.Destroy()
