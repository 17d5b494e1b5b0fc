"""The multi-core LayerNormGradBeta operator over GM: `emulate_operator`.

The kernel a real Ascend C operator wraps around the API, for [B, S, H] inputs of any size:

* Host tiling (`OperatorTiling`): the B*S rows are split into `block_dim` contiguous runs, one per
  vector core (the first R % block_dim cores get one row more). Each core streams its rows through
  UB in tiles of `tile_rows` rows x `tile_cols` columns: the column slice (H, H/2, H/4, ..., in
  multiples of 128) and the most rows with which the API, double buffering beside it, computes a
  tile in one chunk, preferring the fewest instructions per element (`_best_cols`); when no tile
  fits in one chunk, the widest slice that fits a row and as many rows as fit.
* Phase 1, per core and column slice: for each tile, CopyIn (AllocTensor, DataCopy GM -> UB on
  MTE2, EnQue; two buffers per input, so MTE2 fetches the next tile while V computes) and Compute
  (DeQue, LayerNormGradBeta on the tile as [1, rows, cols], FreeTensor, then fold the tile's
  partial into an fp32 accumulator); then CopyOut of the accumulator to the core's row of a GM
  workspace [block_dim, 2, H] fp32.
* SyncAll.
* Phase 2: the columns of H are split across the cores again; each core adds the block_dim
  partials of its columns in core order 0, 1, ... in fp32, rounds once to the input dtype and
  writes pdGamma / pdBeta.

Order of additions, per column (the numerics contract of this operator):
  tile partial  = the API's order within the tile (its row loop: ((row0 + 0) + row1) + ...), in
                  fp32; for half inputs the API rounds it to half (one rounding per tile);
  core partial  = ((tile0 + tile1) + tile2) + ... in fp32, tiles in row order (tile0 is copied,
                  not added to zero, so -0.0 survives);
  result        = ((core0 + core1) + core2) + ... in fp32, rounded to the input dtype (CAST_NONE:
                  to nearest, ties to even; saturating as the core's sat_mode says).
With block_dim=1 and inputs that fit one tile the result equals `lngb.emulate`'s bits.

Execution. mode="fast" records each distinct step once (a step's instruction stream depends only
on its arguments and the core's state: mask register, flags, TPipe queues) and replays the whole
schedule of a core in one jitted, GIL-free call; cores run on `threads` OS threads, each on its
own UB, so results do not depend on the thread count. mode="observed" / "checked" run the Python
kernel live, core by core, with traces and the sanitizer (plus GM checks across cores).
"""
import functools
import itertools
import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .core import AICore
from .cost import CONSTANTS, CostModel
from .errors import (CapacityError, HazardError, InvalidArgumentError, OutOfBoundsError,
                     UninitializedReadError)
from .host import EmulationResult, _check_inputs, _gm_bytes
from .operator import LayerNormGradBeta
from .pipe import TBuf, TPipe, TQue
from .products import get_product
from .tensor import GlobalTensor, LocalTensor
from .tiling import GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo
from .vector_ops import (PIPE_V, Add, Cast, DataCopy, DataCopyParams, PipeBarrier, RoundMode,
                         SyncAll)
from .vector_ops.kernels import run_schedule
from .vector_ops.program import (BLOCK_COUNT, BLOCK_LEN, COPY_GM_TO_UB, COPY_UB_TO_GM, DST,
                                 DST_GAP, GM_SLOT, GM_SLOTS, OP, SRC0, SRC_GAP, SYNC_ALL)

F32 = np.dtype(np.float32)
BUFFER_NUM = 2          # double buffering of the inputs
COL_QUANTUM = 128       # column slices are multiples of 128 elements (whole repeats)
MAX_BURSTS = 4095       # DataCopyParams.blockCount
MAX_STRIDE = 65535      # DataCopyParams.srcStride / dstStride, in 32-byte blocks
DY, RFG, WORKSPACE, OUTPUT = range(GM_SLOTS)


def _round32(n):
    return -(-n // 32) * 32


# --- host tiling -----------------------------------------------------------------------------

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
    fixed = (2 * BUFFER_NUM * _round32(rows * cols * itemsize)   # dy, resForGamma queues
             + _round32(2 * cols * itemsize)                      # the API's two outputs
             + 2 * acc_cols * 4)                                  # fp32 accumulators
    return fixed, min_tmp


def operator_tiling(shape, dtype, product, block_dim=None, tile_rows=None, tile_cols=None):
    """The OperatorTiling of `emulate_operator` for [B, S, H] inputs of `dtype` on `product`.
    `tile_rows` / `tile_cols` (a multiple of 128, or H) override the choice of tile."""
    return _operator_tiling(tuple(int(n) for n in shape), np.dtype(dtype).str,
                            get_product(product).name, block_dim, tile_rows, tile_cols)


@functools.lru_cache(maxsize=256)
def _operator_tiling(shape, dtype, product, block_dim, tile_rows, tile_cols):
    product = get_product(product)
    dtype = np.dtype(dtype)
    b, s, h = shape
    rows, itemsize, usable = b * s, dtype.itemsize, product.usable_ub
    if block_dim is None:
        block_dim = min(product.vector_cores, rows)
    if isinstance(block_dim, bool) or not isinstance(block_dim, (int, np.integer)):
        raise InvalidArgumentError(f"emulate_operator: block_dim must be an integer, got "
                                   f"{block_dim!r}")
    block_dim = int(block_dim)
    if not 1 <= block_dim <= product.vector_cores:
        raise InvalidArgumentError(
            f"emulate_operator: block_dim {block_dim} outside 1 ~ {product.vector_cores}, the "
            f"vector cores of {product.name} (more logical cores than physical ones hang a "
            "kernel that uses SyncAll)")
    if block_dim > rows:
        raise InvalidArgumentError(f"emulate_operator: block_dim {block_dim} is more than the "
                                   f"{rows} rows (B*S); every core needs at least one row")
    base, extra = divmod(rows, block_dim)
    core_rows, start = [], 0
    for c in range(block_dim):
        n = base + (c < extra)
        core_rows.append((start, n))
        start += n

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
            raise CapacityError(f"emulate_operator: tile_cols {tile_cols} must be H or a "
                                f"multiple of {COL_QUANTUM} below it whose row fits the UB")
    else:
        cols = _best_cols(h, most_rows)
        if cols is None:  # no tile fits in one chunk: the widest slice that fits a row
            cols = h if fits(1, h) else (h // COL_QUANTUM) * COL_QUANTUM
            while cols > 0 and not fits(1, cols):
                cols -= COL_QUANTUM
            if cols == 0:
                raise CapacityError(f"emulate_operator: not even one row of {COL_QUANTUM} "
                                    f"columns fits the {usable}-byte UB of {product.name}")
    if tile_rows is None:
        tile_rows = most_rows(cols, one_chunk=True) or most_rows(cols)
    elif not (1 <= int(tile_rows) <= limit and fits(int(tile_rows), cols)):
        raise CapacityError(f"emulate_operator: tile_rows {tile_rows} x {cols} columns does not "
                            f"fit the UB of {product.name} (or exceeds the rows per core)")
    tile_rows = int(tile_rows)
    acc_cols = h if full_acc else cols
    fixed, min_tmp = _phase1_bytes(tile_rows, cols, itemsize, acc_cols)
    max_tmp, _ = GetLayerNormGradBetaMaxMinTmpSize((1, tile_rows, cols), itemsize, False)
    tmp_bytes = max(min_tmp, min(max_tmp, (usable - fixed) // 32 * 32))

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
    gaps = ((h - cols) * itemsize, (h - acc_cols) * 4, (h - chunk) * 4, (h - chunk) * itemsize)
    if max(gaps) // 32 > MAX_STRIDE:
        raise CapacityError(f"emulate_operator: H = {h} is too long: a tile's DataCopy would skip "
                            f"{max(gaps) // 32} blocks between rows, more than the {MAX_STRIDE} "
                            "its stride fields hold")
    return OperatorTiling(rows, h, dtype.str, product.name, block_dim, tuple(core_rows),
                          tile_rows, cols, acc_cols, tmp_bytes, tuple(reduce_cols), chunk)


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


# --- the kernel, written like its Ascend C source --------------------------------------------

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
        lo, width = t.reduce_cols[self.block_idx]
        if width == 0:
            return
        self.InitReduce()
        for col, cols in t.col_slices(lo, width, t.reduce_chunk):
            for k in range(t.block_dim):
                self.run.step(self.AddPartial, cols, k == 0, at=(0, 0, (k * 2 * t.h + col) * 4, 0))
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
        (DataCopy(out, total, n) if self.dtype == F32
         else Cast(out, total, RoundMode.CAST_NONE, n))
        PipeBarrier(PIPE_V)
        self.out_que.EnQue(out)
        out = self.out_que.DeQue(self.dtype)
        DataCopy(self.gm(OUTPUT, at[OUTPUT], self.dtype), out,
                 DataCopyParams(2, cols * s // 32, 0, (self.t.h - cols) * s // 32))
        self.out_que.FreeTensor(out)

    def Finish(self, at):
        self.pipe.Destroy()


# --- running kernels: live, or planned once and replayed ---------------------------------------

class _Live:
    """Steps execute as they are issued (observed and checked modes)."""

    def __init__(self, core, gms):
        self.core, self.phase = core, 0
        core.gm_slots = gms

    def step(self, fn, *args, at=(0, 0, 0, 0)):
        with self.core:
            fn(*args, at=at)


@dataclass
class _Step:
    program: int
    end: tuple  # (core state, pipe state, members) after the step


class _Planner:
    """Records each distinct step of a core once, keyed by (step, arguments, state), and lists
    the core's schedule of (program, GM bases) per phase. Programs are shared by all cores."""

    def __init__(self, recorded):
        self.recorded = recorded  # the _Recorded shared by every core of the plan
        self.schedule = ([], [])
        self.phase = 0   # 1 once the kernel is past SyncAll (set by _run_phases)

    def attach(self, core, kernel):
        self.core, self.kernel = core, kernel

    def _state(self):
        core, kernel = self.core, self.kernel
        pipe = getattr(kernel, "pipe", None)
        flags = tuple(sorted(((e.name, i), n) for (e, i), n in core.flags.items() if n))
        return ((core.mask_mode, core.mask_high, core.mask_low, core.allocated, flags),
                pipe.state() if pipe is not None else None,
                tuple((k, v.address, v.size, v.dtype.str, v.position)
                      for k, v in kernel.member.items()))

    def step(self, fn, *args, at=(0, 0, 0, 0)):
        key = (fn.__name__, args, self._state())
        entry = self.recorded.steps.get(key)
        if entry is None:
            entry = self.recorded.record(self.core, self.kernel, fn, args, at)
            self.recorded.steps[key] = entry
        else:
            self._restore(entry.end)
        self.recorded.check_bounds(entry.program, at, self.kernel.gms)
        self.schedule[self.phase].append((entry.program, *at))

    def _restore(self, end):
        core_state, pipe_state, members = end
        self.core._set_state(core_state)
        if pipe_state is not None:
            self.kernel.pipe.set_state(pipe_state)
        self.kernel.member = {k: LocalTensor(self.core, address, size, dtype, position=position)
                              for k, (address, size, dtype, position) in members.items()}


def _gm_bursts(row):
    """(is write, slot, [(start, end) byte range of each burst]) of a GM DataCopy row, else None."""
    if row[OP] not in (COPY_GM_TO_UB, COPY_UB_TO_GM) or not row[BLOCK_COUNT]:
        return None
    write = row[OP] == COPY_UB_TO_GM
    base, gap = (row[DST], row[DST_GAP]) if write else (row[SRC0], row[SRC_GAP])
    step, length = 32 * (row[BLOCK_LEN] + gap), 32 * row[BLOCK_LEN]
    return write, int(row[GM_SLOT]), [(int(base + i * step), int(base + i * step + length))
                                      for i in range(row[BLOCK_COUNT])]


def _prefetch_points(bursts):
    """Offsets 64 bytes apart, plus each burst's last byte, so that every host cache line of the
    bursts holds one point whatever the alignment of the GM base they are added to."""
    for start, end in bursts:
        yield from range(start, end - 1, 64)
        yield end - 1


class _Recorded:
    """The programs of a plan: rows with GM offsets relative to the step's bases."""

    def __init__(self):
        self.steps = {}
        self.programs = []    # row arrays
        self.extents = []     # per program: GM bytes used past each slot's base
        self.points = []      # per program: (slot, offset) points, one per GM line it reads
        self.warnings = []

    def record(self, core, kernel, fn, args, at):
        def body():
            with core:
                fn(*args, at=at)
        program = core.record(body, kernel.gms)
        self.warnings.extend(m for m in program.warnings if m not in self.warnings)
        rows = program.rows.copy()
        extent, points = [0] * GM_SLOTS, []
        for row in rows:
            if _gm_bursts(row) is None:
                continue
            slot = row[GM_SLOT]
            col = SRC0 if row[OP] == COPY_GM_TO_UB else DST
            row[col] -= at[slot]
            if row[col] < 0:
                raise RuntimeError(f"{fn.__name__}: a GM access lies before the step's base")
            write, slot, bursts = _gm_bursts(row)
            extent[slot] = max(extent[slot], bursts[-1][1])
            if not write:
                points.extend((slot, point) for point in _prefetch_points(bursts))
        self.programs.append(rows)
        self.extents.append(tuple(extent))
        self.points.append(np.array(points, dtype=np.int64).reshape(-1, 2))
        core._set_state(program.end_state)
        pipe = getattr(kernel, "pipe", None)
        end = (program.end_state, pipe.state() if pipe is not None else None,
               {k: (t.address, t.size, t.dtype, t.position) for k, t in kernel.member.items()})
        return _Step(len(self.programs) - 1, end)

    def check_bounds(self, program, at, gms):
        for slot, extent in enumerate(self.extents[program]):
            if extent and at[slot] + extent > gms[slot].size:
                raise OutOfBoundsError(f"a replayed step would access GM {SLOT_NAMES[slot]} "
                                       f"bytes up to {at[slot] + extent} of {gms[slot].size}")


# --- plans (fast mode) -------------------------------------------------------------------------

@dataclass
class _Plan:
    tiling: OperatorTiling
    rows: np.ndarray      # every step program, concatenated
    starts: np.ndarray    # program p is rows[starts[p]:starts[p + 1]]
    points: np.ndarray    # each program's prefetch points (_prefetch_points), concatenated
    point_starts: np.ndarray
    programs: list
    schedules: list       # per core: (phase 1, phase 2) int64 arrays of (program, 4 GM bases)
    end_states: list      # per core: the core's state after the kernel
    warnings: tuple


PLAN_CACHE_SIZE = 16
_PLANS = OrderedDict()


def _run_phases(kernels):
    """Phase 1 of every core, then (after SyncAll) phase 2 of every core, in core order."""
    runs = [k.Process() for k in kernels]
    for run in runs:
        next(run)
    for kernel, run in zip(kernels, runs):
        kernel.run.phase = 1
        next(run, None)


def _plan(tiling, cores, gms):
    key = (tiling, cores[0].sat_mode, cores[0].reserved_bytes)
    plan = _PLANS.get(key)
    if plan is not None:
        _PLANS.move_to_end(key)
        return plan
    recorded, planners, kernels = _Recorded(), [], []
    for c, core in enumerate(cores):
        planner = _Planner(recorded)
        kernel = LayerNormGradBetaKernel(core, tiling, c, gms[c], planner)
        planner.attach(core, kernel)
        planners.append(planner)
        kernels.append(kernel)
    _run_phases(kernels)
    starts = np.cumsum([0] + [len(p) for p in recorded.programs]).astype(np.int64)
    point_starts = np.cumsum([0] + [len(x) for x in recorded.points]).astype(np.int64)
    schedules = [tuple(np.array(s, dtype=np.int64).reshape(-1, 1 + GM_SLOTS) for s in p.schedule)
                 for p in planners]
    plan = _Plan(tiling, np.concatenate(recorded.programs), starts,
                 np.concatenate(recorded.points), point_starts, recorded.programs, schedules,
                 [core._state() for core in cores], tuple(recorded.warnings))
    _PLANS[key] = plan
    if len(_PLANS) > PLAN_CACHE_SIZE:
        _PLANS.popitem(last=False)
    return plan


def _replay(plan, cores, gms, threads):
    for phase in range(2):
        jobs = [(core, g, s[phase]) for core, g, s in zip(cores, gms, plan.schedules)
                if len(s[phase])]
        _in_parallel(jobs, threads, lambda job: run_schedule(
            job[0].ub, *job[1], plan.rows, plan.starts, plan.points, plan.point_starts, job[2]))
    lengths = np.diff(plan.starts)
    for core, state, s in zip(cores, plan.end_states, plan.schedules):
        core._set_state(state)
        core.seq = int(sum(lengths[x[:, 0]].sum() for x in s))


def _in_parallel(jobs, threads, run):
    """run(job) for every job on `threads` threads (this one included), each taking the next
    job when it is free; the first error is raised once all have stopped."""
    if threads == 1 or len(jobs) == 1:
        for job in jobs:
            run(job)
        return
    next_job, errors = itertools.count(), []

    def worker():
        for i in next_job:  # itertools.count hands out each index once, even across threads
            if i >= len(jobs) or errors:
                return
            try:
                run(jobs[i])
            except BaseException as err:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(err)
    helpers = [threading.Thread(target=worker) for _ in range(min(threads, len(jobs)) - 1)]
    for helper in helpers:
        helper.start()
    worker()
    for helper in helpers:
        helper.join()
    if errors:
        raise errors[0]


# --- GM checks across cores (checked mode) -----------------------------------------------------

SLOT_NAMES = ("inputDy", "resForGamma", "workspace", "pdGamma/pdBeta")


def _gm_accesses(records):
    """(is write, slot, [(start, end) bursts], record) of each GM DataCopy."""
    for record in records:
        bursts = _gm_bursts(record.row)
        if bursts is not None:
            yield (*bursts, record)


def check_gm(cores, gms):
    """Between two SyncAlls no two cores may write the same GM bytes, no core may read bytes
    another writes, and nothing may read workspace or output bytes no core has written."""
    phases = []
    for core in cores:
        cut = next((i + 1 for i, r in enumerate(core.trace) if r.row[OP] == SYNC_ALL),
                   len(core.trace))
        phases.append((core.trace[:cut], core.trace[cut:]))
    shared = (WORKSPACE, OUTPUT)
    written = {slot: np.zeros(gms[0][slot].size, bool) for slot in shared}
    for phase in range(2):
        writer = {slot: np.full(gms[0][slot].size, -1, np.int32) for slot in shared}
        for c in range(len(cores)):
            for write, slot, bursts, record in _gm_accesses(phases[c][phase]):
                if write and slot not in shared:
                    raise HazardError(f"core {c} #{record.seq} {record.name} writes its "
                                      f"{SLOT_NAMES[slot]} input GM")
                if not write or slot not in shared:
                    continue
                for a, b in bursts:
                    other = writer[slot][a:b]
                    clash = (other >= 0) & (other != c)
                    if clash.any():
                        raise HazardError(
                            f"cores {int(other[clash][0])} and {c} both write GM "
                            f"{SLOT_NAMES[slot]} bytes [{a}, {b}) with no SyncAll between "
                            f"(core {c} #{record.seq} {record.name}, {record.source})")
                    other[:] = c
        for c in range(len(cores)):  # reads, in the core's order
            own = {slot: np.zeros(gms[0][slot].size, bool) for slot in shared}
            for write, slot, bursts, record in _gm_accesses(phases[c][phase]):
                if slot not in shared:
                    continue
                for a, b in bursts:
                    if write:
                        own[slot][a:b] = True
                        continue
                    w = writer[slot][a:b]
                    if ((w >= 0) & (w != c)).any():
                        raise HazardError(
                            f"core {c} #{record.seq} {record.name} reads GM {SLOT_NAMES[slot]} "
                            f"bytes [{a}, {b}) that core {int(w[(w >= 0) & (w != c)][0])} writes "
                            "in the same phase: a SyncAll must separate them")
                    if not (written[slot][a:b] | own[slot][a:b]).all():
                        raise UninitializedReadError(
                            f"core {c} #{record.seq} {record.name} reads GM {SLOT_NAMES[slot]} "
                            f"bytes [{a}, {b}) that no core has written before")
        for slot in shared:
            written[slot] |= writer[slot] >= 0


# --- emulate_operator ------------------------------------------------------------------------

@dataclass
class _Prepared:
    """An operator run set up: tiling, fresh cores and their GM buffers by slot."""
    tiling: OperatorTiling
    cores: list
    gms: list        # per core: (its inputDy rows, its resForGamma rows, workspace, output)
    output: np.ndarray

    def kernel(self, c):
        return LayerNormGradBetaKernel(self.cores[c], self.tiling, c, self.gms[c],
                                       _Live(self.cores[c], self.gms[c]))


def prepare_operator(input_dy, res_for_gamma, product, block_dim, mode, sat_mode=None):
    _check_inputs(input_dy, res_for_gamma, "emulate_operator")
    dtype = input_dy.dtype
    tiling = operator_tiling(input_dy.shape, dtype, product, block_dim)
    ub_bytes = AICore.ub_bytes(tiling.product)
    ubs = np.zeros((tiling.block_dim, ub_bytes), np.uint8)  # one block: zero pages on demand
    cores = [AICore(tiling.product, mode, sat_mode=sat_mode, _ub=ub) for ub in ubs]
    row_bytes = tiling.h * dtype.itemsize
    dy, rfg = _gm_bytes(input_dy), _gm_bytes(res_for_gamma)
    workspace = np.empty(tiling.block_dim * 2 * tiling.h * 4, np.uint8)
    output = np.empty(2 * row_bytes, np.uint8)
    gms = [(dy[a * row_bytes:(a + n) * row_bytes], rfg[a * row_bytes:(a + n) * row_bytes],
            workspace, output) for a, n in tiling.core_rows]
    return _Prepared(tiling, cores, gms, output)


def emulate_operator(input_dy, res_for_gamma, *, product="atlas-a2", block_dim=None,
                     threads=None, mode="fast", sat_mode=None):
    """Run the multi-core LayerNormGradBeta operator (module docstring) on `block_dim` emulated
    vector cores (default: the product's, at most one per row) using `threads` OS threads
    (default: the CPU count). Returns an OperatorResult: `.pd_gamma`, `.pd_beta`, `.tiling` (the
    OperatorTiling), `.cores`, `.trace` (per core, observed and checked modes), `.cost`.

    The caller's arrays are only read (as GM, in place); outputs are new arrays.
    """
    if threads is None:
        threads = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise InvalidArgumentError(f"emulate_operator: threads must be a positive integer, got "
                                   f"{threads!r}")
    run = prepare_operator(input_dy, res_for_gamma, product, block_dim, mode, sat_mode)
    tiling, cores, gms = run.tiling, run.cores, run.gms
    plan = None
    if mode == "fast":
        plan = _plan(tiling, cores, gms)
        for message in plan.warnings:
            warnings.warn(message, stacklevel=2)
        _replay(plan, cores, gms, min(int(threads), tiling.block_dim))
    else:
        _run_phases([run.kernel(c) for c in range(len(cores))])
        for core in cores:
            if core.sanitizer is not None:
                core.sanitizer.finish(core.flags)
        if mode == "checked":
            check_gm(cores, gms)
    out = run.output.view(input_dy.dtype)
    return OperatorResult(out[:tiling.h], out[tiling.h:], tiling, cores, plan,
                          [core.trace for core in cores] if mode != "fast" else None)


class OperatorResult(EmulationResult):
    """What `emulate` returns, for the whole operator: pd_gamma, pd_beta (input dtype, shape
    (H,)), `tiling` (the OperatorTiling), `core` (core 0) and `cores`, `trace` (a list per core in
    the observed and checked modes, else None), `rows` (a stream per core) and `cost` (an
    OperatorCost)."""

    def __init__(self, pd_gamma, pd_beta, tiling, cores, plan, trace):
        self.pd_gamma, self.pd_beta, self._tiling, self._tiling_copy = pd_gamma, pd_beta, tiling, None
        self.cores, self.core, self.trace = cores, cores[0], trace
        self._plan, self._cost = plan, None

    def __repr__(self):
        return f"OperatorResult(pd_gamma={self.pd_gamma!r}, pd_beta={self.pd_beta!r})"

    def core_rows(self, c):
        """(phase 1 rows, phase 2 rows) core c executed: every instruction and event."""
        if self._plan is not None:
            programs = self._plan.programs
            return tuple(np.concatenate([programs[p] for p in s[:, 0]]) if len(s)
                         else np.zeros((0, programs[0].shape[1]), np.int64)
                         for s in self._plan.schedules[c])
        rows = np.array([r.row for r in self.cores[c].trace])
        cut = next((i + 1 for i, r in enumerate(rows) if r[OP] == SYNC_ALL), len(rows))
        return rows[:cut], rows[cut:]

    @property
    def rows(self):
        """Every core's instruction stream, phases joined."""
        return [np.concatenate(self.core_rows(c)) for c in range(len(self.cores))]

    def estimate_cost(self, **overrides):
        """The modelled device time with some cost constants overridden (calibration)."""
        return operator_cost(self.core.product, [self.core_rows(c) for c in range(len(self.cores))],
                             **overrides)


# --- the cost of the whole operator -----------------------------------------------------------

@dataclass
class OperatorCost:
    """Modelled device time of the operator: the slowest core of phase 1, SyncAll, the slowest
    core of phase 2; `per_core[c]` = (phase 1 Cost, phase 2 Cost)."""
    cycles: float
    microseconds: float
    phases: tuple
    per_core: list
    clock_mhz: float
    gm_bytes_per_cycle: tuple  # what each core's MTE2/MTE3 got in each phase

    def to_chrome_trace(self):
        """One process per core, one row per pipe; times in microseconds."""
        events = []
        start2 = self.phases[0] + self.phases[1]
        for c, costs in enumerate(self.per_core):
            for offset, cost in zip((0.0, start2), costs):
                for event in cost.to_chrome_trace()["traceEvents"]:
                    event = dict(event, pid=c)
                    if event["ph"] == "X":
                        event["ts"] += offset / self.clock_mhz
                    events.append(event)
            events.append({"ph": "M", "pid": c, "name": "process_name",
                           "args": {"name": f"core {c}"}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}


def operator_cost(product, core_rows, **overrides):
    """Each core's streams through CostModel, with the GM bandwidth shared: a core's MTE2/MTE3
    get min(its own rate, the chip's GM rate / the cores active in the phase)."""
    product = get_product(product)
    sync = overrides.pop("sync_all_cycles", CONSTANTS["sync_all_cycles"].value)
    total_rate = overrides.pop("gm_total_bytes_per_cycle",
                               CONSTANTS["gm_total_bytes_per_cycle"].value[product.name])
    own_rate = overrides.pop("gm_bytes_per_cycle",
                             CONSTANTS["gm_bytes_per_cycle"].value[product.name])
    per_core = [[None, None] for _ in core_rows]
    phase_cycles, rates = [], []
    for phase in range(2):
        active = [c for c, rows in enumerate(core_rows) if len(rows[phase])] or [0]
        rate = min(own_rate, total_rate / len(active))
        rates.append(rate)
        model = CostModel(product, gm_bytes_per_cycle=rate, **overrides)
        seen = {}
        for c, rows in enumerate(core_rows):
            key = rows[phase].tobytes()
            if key not in seen:
                seen[key] = model.estimate(rows[phase])
            per_core[c][phase] = seen[key]
        phase_cycles.append(max(per_core[c][phase].cycles for c in range(len(core_rows))))
        clock = model.values["clock_mhz"]
    cycles = phase_cycles[0] + sync + phase_cycles[1]
    return OperatorCost(cycles, cycles / clock, (phase_cycles[0], sync, phase_cycles[1]),
                        [tuple(p) for p in per_core], clock, tuple(rates))
