"""emulate_operator, the multi-core operator over GM (lngb/kernels/multicore.py), and the TPipe /
TQue / TBuf emulation it is written with (lngb/kernels/pipe.py).

The numerics contract (multicore.py's docstring) is checked bit for bit against the independent
oracle naive.layer_norm_grad_beta_operator, fed with the operator's own tiling (whose sanity is
checked separately); accuracy is checked against float64 sums with a forward error bound.
"""
import dataclasses
import math

import numpy as np
import pytest

import lngb
from lngb import (CapacityError, HazardError, InvalidArgumentError, UninitializedReadError,
                  multicore)
from lngb.pipe import TBuf, TPipe, TQue
from lngb.host import prepare_operator
from lngb.runtime import schedule as scheduling
from lngb.vector_ops import PIPE_ALL, HardEvent, PipeBarrier, executor
from lngb.vector_ops.program import (BLOCK_COUNT, BLOCK_LEN, COPY, COPY_DIR, DST, EVENT, GM_SLOT,
                                     GM_TO_UB, KIND, SRC0, SRC1, SRC_GAP, UB_TO_GM)
from lngb.vector_ops.table import TABLE
from lngb.vector_ops.walk import GRANULE

import naive
from conftest import rejected, seed_of

pytestmark = pytest.mark.jitted

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
# (product, sat_mode argument) -> (saturation of the API's half outputs, of the final cast).
# The 950 kernel narrows with SatMode::SAT whatever the core's mode, and so does the operator's
# final Cast there; elsewhere it follows the core's sat_mode (always True on the 310P).
SAT = {("atlas-a2", None): (False, False),
       ("atlas-a3", None): (False, False),
       ("atlas-inference", None): (True, True),
       ("atlas-350", None): (True, True),
       ("atlas-a2", True): (True, True),
       ("atlas-350", True): (True, True)}
PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8),
                                                                        b.view(np.uint8))


def inputs(shape, dtype, seed, scale=4.0, zeros=True):
    """Random normal data; with `zeros`, signed zeros and columns whose sums are -0.0 or tiny:
    column 0: dy = -0.0 everywhere (pdBeta's first row + 0.0 must make it +0.0);
    column 1: dy = -2**-24, rfg = 2**-24 (half products underflow: pdGamma rounds to -0.0 in
    half, so a partial that is copied rather than added to +0.0 keeps its sign);
    plus scattered -0.0 / +0.0 in both inputs."""
    rng = np.random.default_rng(seed)
    dy = (rng.standard_normal(shape) * scale).astype(dtype)
    rfg = rng.standard_normal(shape).astype(dtype)
    if zeros:
        dy[..., 0] = -0.0
        dy[..., 1] = -(2.0 ** -24)
        rfg[..., 1] = 2.0 ** -24
        scatter = lambda: (rng.random(shape) < 0.05) & (np.arange(shape[2]) != 1)
        dy[scatter()] = -0.0
        rfg[scatter()] = 0.0
        rfg[scatter()] = -0.0
    return dy, rfg


def oracle(result, dy, rfg, product="atlas-a2", sat_mode=None):
    api_sat, final_sat = SAT[product, sat_mode]
    t = result.tiling
    return naive.layer_norm_grad_beta_operator(dy, rfg, t.core_rows, t.tile_rows,
                                               api_sat=api_sat, final_sat=final_sat)


def assert_matches_oracle(result, dy, rfg, product="atlas-a2", sat_mode=None):
    gamma, beta = oracle(result, dy, rfg, product, sat_mode)
    assert same_bits(result.pd_gamma, gamma), (result.pd_gamma, gamma)
    assert same_bits(result.pd_beta, beta), (result.pd_beta, beta)


def assert_tiling_sane(t, shape, dtype, product, block_dim=None):
    b, s, h = shape
    rows = b * s
    p = lngb.PRODUCTS[product]
    assert (t.rows, t.h, np.dtype(t.dtype), t.product) == (rows, h, np.dtype(dtype), product)
    expected_cores = min(p.vector_cores, rows) if block_dim is None else block_dim
    assert t.block_dim == expected_cores == len(t.core_rows)
    start = 0
    for first, count in t.core_rows:          # contiguous, in order, covering every row
        assert first == start and count >= 1
        start += count
    assert start == rows
    counts = [n for _, n in t.core_rows]
    assert max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)   # the first R % block_dim get one more
    assert 1 <= t.tile_rows <= max(counts)
    assert t.tile_cols == h or (0 < t.tile_cols < h and t.tile_cols % 128 == 0)
    start = 0
    for first, count in t.reduce_cols:        # phase 2 columns: contiguous, covering H
        assert first == start and count >= 0
        start += count
    assert start == h and t.reduce_chunk >= 1
    assert t == lngb.operator_tiling(shape, dtype, product, block_dim)
    # the chosen tile is one operator_tiling accepts when asked for explicitly
    assert lngb.operator_tiling(shape, dtype, product, block_dim, t.tile_rows, t.tile_cols) == t


def force_tiling(monkeypatch, tile_rows=None, tile_cols=None, min_tmp=False):
    """Make emulate_operator use operator_tiling(..., tile_rows, tile_cols); with `min_tmp`, the
    API's temp buffer is the minimum, so the API splits each tile into several chunks."""
    real = lngb.host.operator_tiling

    def tiling(shape, dtype, product, block_dim=None, *_):
        t = real(shape, dtype, product, block_dim, tile_rows, tile_cols)
        if min_tmp:
            s = np.dtype(dtype).itemsize
            _, least = lngb.GetLayerNormGradBetaMaxMinTmpSize((1, t.tile_rows, t.tile_cols), s,
                                                              False)
            least = max(least, 8 * t.tile_cols) if s == 2 else least  # half: the fp32 widening
            t = dataclasses.replace(t, tmp_bytes=least)
        return t
    monkeypatch.setattr(lngb.host, "operator_tiling", tiling)


# --- bits: the numerics contract ------------------------------------------------------------

SHAPES = [((2, 7, 64), 4),        # 14 rows on 4 cores: 4, 4, 3, 3
          ((3, 5, 80), None),     # one row per core (10 cores on the 310P: 2 x5, 1 x5)
          ((1, 37, 1024), 3)]     # 13, 12, 12 rows; several tiles per core on the A2 / A3


@pytest.mark.parametrize("product, sat_mode", list(SAT))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape, block_dim", SHAPES)
def test_matches_the_oracle(product, sat_mode, dtype, shape, block_dim):
    dy, rfg = inputs(shape, dtype, seed_of(product, dtype, shape))
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=block_dim,
                                   sat_mode=sat_mode)
    assert_tiling_sane(result.tiling, shape, dtype, product, block_dim)
    assert result.pd_gamma.shape == result.pd_beta.shape == (shape[2],)
    assert_matches_oracle(result, dy, rfg, product, sat_mode)
    if dtype == np.float16:   # every tile partial of column 1 is -0.0, and copies keep it
        assert result.pd_gamma[1] == 0 and np.signbit(result.pd_gamma[1])


def test_the_oracle_cases_cover_several_tiles_per_core():
    """A guard on SHAPES: if the tiling policy changes so that this no longer holds, pick a
    shape for which it does (the forced-tile test below covers several tiles regardless)."""
    t = lngb.operator_tiling((1, 37, 1024), np.float32, "atlas-a2", 3)
    assert max(len(t.tiles(n)) for _, n in t.core_rows) > 1


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_forced_small_tiles_column_slices_and_chunked_api(monkeypatch, product, dtype):
    """Tiles of 3 rows x 128 columns (the last tile, core and column slice shorter), and the
    API's minimum temp buffer, so the API runs each tile in several chunks (for half, it narrows
    the fp32 accumulators at the end of every chunk; the last narrowing is the result)."""
    shape, block_dim = (1, 29, 320), 4
    force_tiling(monkeypatch, tile_rows=3, tile_cols=128, min_tmp=True)
    dy, rfg = inputs(shape, dtype, seed_of("forced", product, dtype))
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=block_dim)
    t = result.tiling
    assert (t.tile_rows, t.tile_cols) == (3, 128)
    assert [n for _, n in t.core_rows] == [8, 7, 7, 7]
    assert t.col_slices() == [(0, 128), (128, 128), (256, 64)]
    if lngb.PRODUCTS[product].kernel_path == "common":
        api = lngb.GetLayerNormGradBetaNDTilingInfo((1, 3, 128), t.tmp_bytes,
                                                    np.dtype(dtype).itemsize, False)
        assert api.loopRound + (api.inputTailSize > 0) > 1
    assert_matches_oracle(result, dy, rfg, product)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rows_too_long_for_the_ub_are_sliced_into_columns(dtype):
    shape = (1, 4, 8192)
    dy, rfg = inputs(shape, dtype, seed_of("slices", dtype))
    result = lngb.emulate_operator(dy, rfg, block_dim=3)
    assert result.tiling.tile_cols < 8192
    assert_tiling_sane(result.tiling, shape, dtype, "atlas-a2", 3)
    assert_matches_oracle(result, dy, rfg)


@pytest.mark.parametrize("mode", ["fast", "checked"])
@pytest.mark.parametrize("shape, dtype, product, block_dim", [
    ((2, 4, 16), np.float32, "atlas-a2", 8),       # 2 reducers: 6 cores idle in phase 2
    ((1, 72, 16), np.float16, "atlas-350", None),  # all 72 cores, one row each
    ((1, 3, 8200), np.float32, "atlas-a2", None),  # slices of a row that is not 128-aligned
])
def test_edge_splits(mode, shape, dtype, product, block_dim):
    dy, rfg = inputs(shape, dtype, seed_of("edge", shape))
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=block_dim, mode=mode)
    assert_tiling_sane(result.tiling, shape, dtype, product, block_dim)
    assert_matches_oracle(result, dy, rfg, product)


@pytest.mark.parametrize("product", PRODUCTS)
def test_half_overflow_of_the_partials(product):
    """Each core's tile partial (8 x 18000) overflows half: inf without saturation, 65504 with;
    the fp32 sum of the saturated partials then overflows the final cast again (65504 on the
    950, whose API and final cast saturate, and on the 310P)."""
    dy = np.full((1, 32, 16), 300, np.float16)
    rfg = np.full((1, 32, 16), 60, np.float16)
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=4)
    assert_matches_oracle(result, dy, rfg, product)
    expected = {"atlas-a2": np.inf, "atlas-a3": np.inf, "atlas-inference": 65504.0,
                "atlas-350": 65504.0}[product]
    assert np.all(result.pd_gamma.astype(np.float64) == expected)
    assert np.all(result.pd_beta == 9600)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_special_values(dtype):
    dy, rfg = inputs((1, 12, 64), dtype, seed_of("special", dtype))
    dy[0, 0, 2], dy[0, 5, 2] = np.inf, -np.inf      # inf - inf across cores: NaN
    dy[0, 3, 3], rfg[0, 7, 4], rfg[0, 1, 5], dy[0, 1, 5] = np.nan, np.inf, 0.0, np.inf
    dy[0, 11, 6] = -np.inf
    with np.errstate(all="ignore"):
        for product in ("atlas-a2", "atlas-350"):
            result = lngb.emulate_operator(dy, rfg, product=product, block_dim=4)
            assert_matches_oracle(result, dy, rfg, product)
            if product == "atlas-a2" or dtype == np.float32:
                assert np.isnan(result.pd_gamma[[3, 5]]).all() and np.isnan(result.pd_beta[2])
            else:   # the 950 narrows its NaN partials with saturation: +0.0
                assert not np.isnan(result.pd_gamma).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 8, 16), (2, 16, 64), (3, 5, 80), (1, 1, 128)])
def test_one_core_and_one_tile_equal_emulate(dtype, shape):
    dy, rfg = inputs(shape, dtype, seed_of("one", dtype, shape))
    dy[0, 0, 2:6] = -0.0                       # -0.0 in row 0 (and rows the API adds later)
    rfg[0, -1, 3:8] = -0.0
    result = lngb.emulate_operator(dy, rfg, block_dim=1)
    assert result.tiling.core_rows == ((0, shape[0] * shape[1]),)
    assert (result.tiling.tile_rows, result.tiling.tile_cols) == (shape[0] * shape[1], shape[2])
    single = lngb.emulate(dy, rfg)
    assert same_bits(result.pd_gamma, single.pd_gamma)
    assert same_bits(result.pd_beta, single.pd_beta)
    assert not np.signbit(result.pd_beta[0])   # -0.0 + 0.0 = +0.0 in the API's first row
    if dtype == np.float16:
        assert np.signbit(result.pd_gamma[1]) and result.pd_gamma[1] == 0


# --- execution: threads, modes, traces ------------------------------------------------------

def test_thread_count_and_mode_do_not_change_the_bits():
    dy, rfg = inputs((2, 20, 256), np.float16, seed_of("threads"))
    runs = [lngb.emulate_operator(dy, rfg, block_dim=5, threads=n) for n in (1, 2, 3)]
    runs += [lngb.emulate_operator(dy, rfg, block_dim=5, threads=2, mode=m)
             for m in ("observed", "checked")]
    for r in runs:
        assert same_bits(r.pd_gamma, runs[0].pd_gamma) and same_bits(r.pd_beta, runs[0].pd_beta)
    assert_matches_oracle(runs[0], dy, rfg)


def test_fresh_data_replays_the_cached_plan():
    for seed in range(3):
        dy, rfg = inputs((2, 7, 64), np.float32, seed_of("replay", seed))
        assert_matches_oracle(lngb.emulate_operator(dy, rfg, block_dim=4), dy, rfg)


def events(trace):
    """(name, source pipe, destination pipe, id) of each SetFlag / WaitFlag record."""
    return [(r.name, int(r.row[DST]), int(r.row[SRC0]), int(r.row[SRC1])) for r in trace
            if r.name in ("SetFlag", "WaitFlag")]


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_observed_traces_per_core():
    shape, block_dim = (1, 29, 384), 4
    dy, rfg = inputs(shape, np.float32, seed_of("trace"))
    fast = lngb.emulate_operator(dy, rfg, block_dim=block_dim)
    assert fast.trace is None
    result = lngb.emulate_operator(dy, rfg, block_dim=block_dim, mode="observed")
    assert len(result.trace) == block_dim
    t = result.tiling
    for c, trace in enumerate(result.trace):
        names = [r.name for r in trace]
        assert names.count("SyncAll") == 1
        cut = names.index("SyncAll")
        phase1, phase2 = trace[:cut], trace[cut + 1:]

        def ops(records, direction):
            return sum(r.name == "DataCopy" and r.row[COPY_DIR] == direction for r in records)
        slices = len(t.col_slices())
        assert ops(phase1, GM_TO_UB) == 2 * slices * len(t.tiles(t.core_rows[c][1]))
        assert ops(phase1, UB_TO_GM) == slices
        lo, width = t.reduce_cols[c]
        reduce_slices = len(t.col_slices(lo, width, t.reduce_chunk)) if width else 0
        assert ops(phase2, GM_TO_UB) == block_dim * reduce_slices
        assert ops(phase2, UB_TO_GM) == reduce_slices
        assert "DataCopy" in names
        # every WaitFlag has an earlier SetFlag of its own (event, id), and none is left over
        pending = {}
        for name, src, dst, event_id in events(trace):
            key = (src, dst, event_id)
            pending[key] = pending.get(key, 0) + (1 if name == "SetFlag" else -1)
            assert pending[key] >= 0, (c, name, key)
        assert pending and not any(pending.values())
    assert_matches_oracle(result, dy, rfg)


@pytest.mark.parametrize("product, dtype", [("atlas-a2", np.float16), ("atlas-a3", np.float32),
                                            ("atlas-inference", np.float32),
                                            ("atlas-350", np.float16)])
def test_checked_mode_runs_clean(product, dtype):
    dy, rfg = inputs((1, 29, 384), dtype, seed_of("checked", product))
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=4, mode="checked")
    assert len(result.trace) == 4
    assert_matches_oracle(result, dy, rfg, product)


# --- the GM checks across cores (checked mode) ----------------------------------------------

class Redirected:
    """A kernel's runner whose steps go through replace(kernel, fn, args, at) -> (fn, args, at)
    first: what a step does may depend only on its arguments, `at` and the core's state (fast
    and checked mode plan on them), so a core's own behaviour is a step of its own."""

    def __init__(self, runner, kernel, replace):
        vars(self).update(runner=runner, kernel=kernel, replace=replace)

    def step(self, fn, *args, at=(0, 0, 0, 0)):
        fn, args, at = self.replace(self.kernel, fn, args, at)
        self.runner.step(fn, *args, at=at)

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def __setattr__(self, name, value):
        setattr(self.runner, name, value)


def redirect_steps(monkeypatch, replace):
    real = multicore.LayerNormGradBetaKernel.__init__

    def init(self, *args):
        real(self, *args)
        self.run = Redirected(self.run, self, replace)
    monkeypatch.setattr(multicore.LayerNormGradBetaKernel, "__init__", init)


def test_two_cores_writing_the_same_workspace_is_a_hazard(monkeypatch):
    def every_core_writes_row_0(kernel, fn, args, at):
        if fn.__name__ == "CopyOutPartial":
            at = (at[0], at[1], at[multicore.WORKSPACE] - kernel.block_idx * 2 * kernel.t.h * 4,
                  at[3])
        return fn, args, at
    redirect_steps(monkeypatch, every_core_writes_row_0)
    dy, rfg = inputs((2, 7, 64), np.float32, seed_of("hazard"))
    with pytest.raises(HazardError, match="both write GM workspace"):
        lngb.emulate_operator(dy, rfg, block_dim=3, mode="checked")


def test_reading_a_partial_nobody_wrote_is_uninitialised(monkeypatch):
    def core_1_forgets_its_copy(kernel, fn, args, at):
        if fn.__name__ != "CopyOutPartial" or kernel.block_idx != 1:
            return fn, args, at

        def forgets_its_copy(cols, at):
            acc = kernel.member.pop("acc")
            kernel.acc_que.EnQue(acc)
            kernel.acc_que.FreeTensor(kernel.acc_que.DeQue(np.float32))
        return forgets_its_copy, args, at
    redirect_steps(monkeypatch, core_1_forgets_its_copy)
    dy, rfg = inputs((2, 7, 64), np.float32, seed_of("uninit"))
    with pytest.raises(UninitializedReadError, match="workspace.*no core has written"):
        lngb.emulate_operator(dy, rfg, block_dim=3, mode="checked")


def test_reading_another_cores_partial_without_sync_all_is_a_hazard(monkeypatch):
    """Without its SyncAll a core reads the workspace its own MTE3 may still be writing (a
    hazard between its pipes) and the other cores' partials (between cores); with the pipes
    drained, the second is still caught."""
    dy, rfg = inputs((2, 7, 64), np.float32, seed_of("nosync"))
    monkeypatch.setattr(multicore.LayerNormGradBetaKernel, "Sync",
                        lambda self, at: self.pipe.Destroy())
    with pytest.raises(HazardError, match=r"reads GM bytes .* on PIPE_MTE3.*MTE3_MTE2"):
        lngb.emulate_operator(dy, rfg, block_dim=3, mode="checked")
    lngb.clear_caches()
    monkeypatch.setattr(multicore.LayerNormGradBetaKernel, "Sync",
                        lambda self, at: (self.pipe.Destroy(), PipeBarrier(PIPE_ALL)))
    with pytest.raises(HazardError, match="a SyncAll must separate them"):
        lngb.emulate_operator(dy, rfg, block_dim=3, mode="checked")


# --- arguments and inputs ---------------------------------------------------------------------

def test_argument_errors():
    x = np.zeros((2, 4, 16), np.float32)
    with pytest.raises(InvalidArgumentError, match="block_dim 0"):
        lngb.emulate_operator(x, x, block_dim=0)
    with pytest.raises(InvalidArgumentError, match="vector cores"):
        lngb.emulate_operator(np.zeros((1, 64, 16), np.float32),
                              np.zeros((1, 64, 16), np.float32), block_dim=49)
    with pytest.raises(InvalidArgumentError, match="vector cores"):
        lngb.emulate_operator(x, x, product="atlas-inference", block_dim=11)
    with pytest.raises(InvalidArgumentError, match="rows"):
        lngb.emulate_operator(x, x, block_dim=9)
    with pytest.raises(InvalidArgumentError, match="integer"):
        lngb.emulate_operator(x, x, block_dim=2.0)
    for threads in (0, -1, True, 1.5):
        with pytest.raises(InvalidArgumentError, match="threads"):
            lngb.emulate_operator(x, x, threads=threads)
    with pytest.raises(InvalidArgumentError):
        lngb.emulate_operator(x, x.astype(np.float16))
    with pytest.raises(InvalidArgumentError):
        lngb.emulate_operator(x, np.zeros((2, 4, 24), np.float32))
    with pytest.raises(InvalidArgumentError):
        lngb.emulate_operator(x.reshape(8, 16), x.reshape(8, 16))
    with pytest.raises(InvalidArgumentError):
        lngb.emulate_operator(x.astype(np.float64), x.astype(np.float64))
    with pytest.raises(InvalidArgumentError, match="mode"):
        lngb.emulate_operator(x, x, mode="bogus")
    assert lngb.emulate_operator(x, x, block_dim=8).tiling.block_dim == 8   # the limits are legal


def test_caller_arrays_are_unchanged_and_views_work():
    dy, rfg = inputs((2, 7, 128), np.float32, seed_of("caller"))
    before = dy.copy(), rfg.copy()
    for mode in ("fast", "checked"):
        result = lngb.emulate_operator(dy, rfg, block_dim=3, mode=mode)
        assert same_bits(dy, before[0]) and same_bits(rfg, before[1])
    view, frozen = dy[:, :, ::2], rfg[:, :, ::2].copy()
    frozen.flags.writeable = False
    result = lngb.emulate_operator(view, frozen, block_dim=3)
    assert_matches_oracle(result, view, frozen)
    assert not np.shares_memory(result.pd_gamma, dy)


# --- cost -------------------------------------------------------------------------------------

def test_cost():
    dy, rfg = inputs((4, 64, 256), np.float32, seed_of("cost"), zeros=False)
    one = lngb.emulate_operator(dy, rfg, block_dim=1)
    four = lngb.emulate_operator(dy, rfg, block_dim=4)
    assert one.cost.cycles > 0 and four.cost.cycles > 0
    assert four.cost.cycles < one.cost.cycles
    assert four.cost.microseconds == pytest.approx(four.cost.cycles / 1800)
    assert sum(four.cost.phases) == pytest.approx(four.cost.cycles)
    assert len(four.cost.per_core) == 4
    slow = four.estimate_cost(gm_total_bytes_per_cycle=1.0)
    assert slow.cycles > four.cost.cycles


# --- accuracy: a forward error bound against float64 sums ------------------------------------

def gamma_k(k, u):
    return k * u / (1 - k * u)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("block_dim", [None, 4])
def test_error_bound_against_float64(dtype, block_dim):
    shape = (4, 96, 256)
    rng = np.random.default_rng(seed_of("accuracy", dtype))
    dy = rng.standard_normal(shape).astype(dtype)
    rfg = rng.standard_normal(shape).astype(dtype)
    result = lngb.emulate_operator(dy, rfg, block_dim=block_dim)
    t = result.tiling
    tiles = max(len(t.tiles(n)) for _, n in t.core_rows)
    d = (t.tile_rows - 1) + (tiles - 1) + (t.block_dim - 1) + 1
    u, uh = 2.0 ** -24, 2.0 ** -11
    dy64 = dy.astype(np.float64).reshape(-1, shape[2])
    terms = dy64 * rfg.astype(np.float64).reshape(-1, shape[2])  # exact in float64
    for got, x in ((result.pd_gamma, terms), (result.pd_beta, dy64)):
        exact = np.array([math.fsum(col) for col in x.T])
        magnitude = np.abs(x).sum(axis=0)
        error = np.abs(got.astype(np.float64) - exact)
        gamma_term = got is result.pd_gamma and dtype == np.float32   # fp32 products round
        if dtype == np.float32:
            bound = gamma_k(d + 1 if gamma_term else d, u) * magnitude
        else:
            g = gamma_k(d, u)
            bound = uh * np.abs(exact) + (1 + uh) * (uh * (1 + g) * magnitude + g * magnitude)
        assert (bound < 1e-2 * magnitude).all()                 # the bound says something
        worst = np.argmax(error / bound)
        assert (error <= bound).all(), (d, worst, error[worst], bound[worst])
        assert error.max() > 0                                  # and the data rounds


# --- TPipe / TQue / TBuf ----------------------------------------------------------------------

def event(name, hard_event, event_id):
    src, dst = hard_event.value
    return (name, int(src), int(dst), event_id)


def test_queue_events_follow_alloc_enque_deque_free():
    core = lngb.AICore("atlas-a2", "observed")
    with core:
        pipe = TPipe(core)
        vecin, vecout = TQue("VECIN"), TQue("VECOUT")
        pipe.InitBuffer(vecin, 1, 100)
        pipe.InitBuffer(vecout, 1, 64)
        t = vecin.AllocTensor(np.float32)           # never freed: no wait
        vecin.EnQue(t)
        t = vecin.DeQue(np.float32)
        vecin.FreeTensor(t)
        again = vecin.AllocTensor(np.float32)       # waits for the free
        assert again.address == t.address
        o = vecout.AllocTensor(np.float16)
        vecout.EnQue(o)
        vecout.FreeTensor(vecout.DeQue(np.float16))
        pipe.Destroy()                              # waits for the pending VECOUT free
    assert events(core.trace) == [
        event("SetFlag", HardEvent.MTE2_V, 0), event("WaitFlag", HardEvent.MTE2_V, 0),
        event("SetFlag", HardEvent.V_MTE2, 0), event("WaitFlag", HardEvent.V_MTE2, 0),
        event("SetFlag", HardEvent.V_MTE3, 0), event("WaitFlag", HardEvent.V_MTE3, 0),
        event("SetFlag", HardEvent.MTE3_V, 0), event("WaitFlag", HardEvent.MTE3_V, 0)]
    assert not any(core.flags.values())


def test_event_ids_lowest_free_first_and_fifo_order():
    core = lngb.AICore("atlas-a2", "observed")
    with core:
        pipe = TPipe(core)
        que = TQue("VECIN", depth=2)
        pipe.InitBuffer(que, 2, 64)
        a, b = que.AllocTensor(np.float32), que.AllocTensor(np.float32)
        assert a.address != b.address
        que.EnQue(a)
        que.EnQue(b)
        assert que.DeQue(np.float32).address == a.address    # FIFO
        assert que.DeQue(np.float32).address == b.address
        que.FreeTensor(b)
        que.FreeTensor(a)
        c = que.AllocTensor(np.float32)                      # buffer 0 (a): its free had id 1
        assert c.address == a.address
    assert events(core.trace) == [
        event("SetFlag", HardEvent.MTE2_V, 0), event("SetFlag", HardEvent.MTE2_V, 1),
        event("WaitFlag", HardEvent.MTE2_V, 0), event("WaitFlag", HardEvent.MTE2_V, 1),
        event("SetFlag", HardEvent.V_MTE2, 0), event("SetFlag", HardEvent.V_MTE2, 1),
        event("WaitFlag", HardEvent.V_MTE2, 1)]


def test_tbuf_get_returns_the_buffer():
    core = lngb.AICore("atlas-a2")
    with core:
        pipe = TPipe(core)
        buf = TBuf("VECCALC")
        with pytest.raises(InvalidArgumentError, match="InitBuffer"):
            buf.Get(np.float32)
        start = core.allocated
        pipe.InitBuffer(buf, 100)                   # rounded up to 128 bytes
        assert core.allocated == start + 128
        whole = buf.Get(np.float32)
        assert (whole.address, whole.size, whole.dtype) == (start, 32, F32)
        part = buf.Get(np.float16, 10)
        assert (part.address, part.size, part.dtype) == (start, 10, F16)
        for bad in (0, 33):
            with pytest.raises(InvalidArgumentError, match="length"):
                buf.Get(np.float32, bad)
    assert core.trace == []


def test_pipe_destroy_gives_the_ub_back():
    core = lngb.AICore("atlas-a2", "observed")
    core.alloc(1000, np.uint8)
    before = core.allocated
    with core:
        pipe = TPipe(core)
        que, buf = TQue("VECIN"), TBuf()
        pipe.InitBuffer(que, 2, 4096)
        pipe.InitBuffer(buf, 512)
        assert core.allocated == before + 2 * 4096 + 512
        que.FreeTensor(que.AllocTensor(np.float32))          # a free nothing waited for
        que.FreeTensor(que.AllocTensor(np.float32))
        pipe.Destroy()
    assert core.allocated == before
    assert events(core.trace)[-2:] == [event("WaitFlag", HardEvent.V_MTE2, 0),
                                       event("WaitFlag", HardEvent.V_MTE2, 1)]
    assert not any(core.flags.values())


def test_pipe_capacity_errors():
    core = lngb.AICore("atlas-a2")
    with core:
        pipe = TPipe(core)
        big = TQue("VECIN")
        message = rejected(CapacityError,
                           lambda: pipe.InitBuffer(big, 1, core.free_bytes + 32), core)
        assert "exceeds the limit" in message
        assert core.allocated == 0
        pipe.InitBuffer(TQue("VECIN"), 5, 32)
        too_many = TQue("VECIN")
        message = rejected(CapacityError, lambda: pipe.InitBuffer(too_many, 4, 32), core)
        assert "max buffer number in same queue position is 8" in message
        pipe.InitBuffer(TQue("VECIN"), 3, 32)               # 8 VECIN buffers are allowed
        pipe.InitBuffer(TQue("VECOUT"), 8, 32)              # another position has its own 8
        assert core.allocated == 16 * 32


def test_queue_misuse_is_rejected():
    core = lngb.AICore("atlas-a2")
    with core:
        pipe = TPipe(core)
        que, other = TQue("VECIN"), TQue("VECIN")
        with pytest.raises(InvalidArgumentError, match="InitBuffer"):
            que.AllocTensor(np.float32)
        pipe.InitBuffer(que, 1, 64)
        pipe.InitBuffer(other, 1, 64)
        with pytest.raises(InvalidArgumentError, match="once"):
            pipe.InitBuffer(que, 1, 64)
        with pytest.raises(InvalidArgumentError, match="empty"):
            que.DeQue(np.float32)
        foreign = other.AllocTensor(np.float32)
        with pytest.raises(InvalidArgumentError, match="not a buffer of this"):
            que.EnQue(foreign)
        t = que.AllocTensor(np.float32)
        with pytest.raises(InvalidArgumentError, match="in use"):
            que.AllocTensor(np.float32)
        que.FreeTensor(t)
        with pytest.raises(InvalidArgumentError, match="not allocated"):
            que.EnQue(t)                                     # freed, not allocated
        with pytest.raises(InvalidArgumentError, match="only an allocated"):
            que.FreeTensor(t)                                # twice
        t = que.AllocTensor(np.float32)
        que.EnQue(t)
        with pytest.raises(InvalidArgumentError, match="not allocated"):
            que.EnQue(t)                                     # twice
        with pytest.raises(InvalidArgumentError, match="only an allocated"):
            que.FreeTensor(t)                                # still queued
        with pytest.raises(InvalidArgumentError):
            TQue("GM")
        with pytest.raises(InvalidArgumentError):
            pipe.InitBuffer(TQue("VECOUT"), 0, 64)


# --- review findings ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rows_longer_than_an_accumulator_of_h_fits(dtype):
    """Past about 23 K columns (A2) the fp32 accumulator holds one column slice at a time."""
    shape = (1, 2, 32768 if dtype == np.float32 else 40000)
    dy, rfg = inputs(shape, dtype, seed_of("long rows", dtype))
    for mode in ("fast", "checked"):
        result = lngb.emulate_operator(dy, rfg, block_dim=2, mode=mode)
        t = result.tiling
        assert t.acc_cols == t.tile_cols < shape[2]
        assert_matches_oracle(result, dy, rfg)


def test_reading_workspace_before_this_core_writes_it_is_uninitialised(monkeypatch):
    real = multicore.LayerNormGradBetaKernel.CopyOutPartial

    def read_the_row_first(self, cols, at):
        acc = self.member["acc"]
        spare = self.core.product.event_ids - 1   # an id the kernel's queues leave free
        lngb.vector_ops.SetFlag(HardEvent.V_MTE2, spare)   # the accumulator's V writes done
        lngb.vector_ops.WaitFlag(HardEvent.V_MTE2, spare)
        lngb.vector_ops.DataCopy(acc, self.gm(multicore.WORKSPACE, at[multicore.WORKSPACE],
                                              np.float32), cols)
        lngb.vector_ops.SetFlag(HardEvent.MTE2_MTE3, spare)   # before the copy out reads it
        lngb.vector_ops.WaitFlag(HardEvent.MTE2_MTE3, spare)
        return real(self, cols, at=at)
    monkeypatch.setattr(multicore.LayerNormGradBetaKernel, "CopyOutPartial", read_the_row_first)
    dy, rfg = inputs((1, 4, 64), np.float32, seed_of("read first"))
    with pytest.raises(UninitializedReadError, match="workspace.*no core has written"):
        lngb.emulate_operator(dy, rfg, block_dim=2, mode="checked")


def test_replayed_member_tensors_keep_their_position():
    """A step replayed from the plan restores the kernel's member tensors as observed mode has
    them (position included)."""
    dy, rfg = inputs((1, 40, 64), np.float32, seed_of("members"))   # five tiles of 8 rows
    seen = []
    real = multicore.LayerNormGradBetaKernel.CopyOutPartial

    def spy(self, cols, at):
        acc = self.member["acc"]
        seen.append((acc.address, acc.size, acc.dtype, acc.position, acc.shape))
        return real(self, cols, at=at)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(multicore.LayerNormGradBetaKernel, "CopyOutPartial", spy)
        lngb.clear_caches()
        fast = lngb.emulate_operator(dy, rfg, block_dim=1, tile_rows=8, mode="fast")
        lngb.emulate_operator(dy, rfg, block_dim=1, tile_rows=8, mode="observed")
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0][3] == "VECOUT"
    steps = fast.plan.schedules[0][0][:, 0]
    assert len(set(steps)) < len(steps)   # a recorded step was replayed (members restored)


def test_a_destroyed_pipe_s_queues_and_buffers_are_unusable():
    core = lngb.AICore("atlas-a2")
    with core:
        pipe = TPipe(core)
        que, buf = TQue("VECOUT"), TBuf()
        pipe.InitBuffer(que, 1, 64)
        pipe.InitBuffer(buf, 64)
        t = que.AllocTensor(np.float32)
        que.EnQue(t)
        with pytest.raises(InvalidArgumentError, match="still enqueued"):
            pipe.Destroy()
        que.FreeTensor(que.DeQue(np.float32))
        pipe.Destroy()
        with pytest.raises(InvalidArgumentError, match="TPipe was destroyed"):
            que.AllocTensor(np.float32)
        with pytest.raises(InvalidArgumentError, match="TPipe was destroyed"):
            buf.Get(np.float32)
        TPipe(core).InitBuffer(que, 1, 64)     # a queue may be given buffers again
        assert que.AllocTensor(np.float32).address == 0


def test_operator_debugger_tensors_are_typed():
    from lngb.debug import OperatorDebugger
    dy, rfg = inputs((1, 4, 32), np.float16, seed_of("typed"))
    dbg = OperatorDebugger(dy, rfg, block_dim=2)
    types = {name: t.dtype for name, t in dbg.tensors.items()}
    assert types["dy0"] == types["out"] == types["result"] == np.float16
    assert types["acc"] == types["total"] == types["part0"] == np.float32
    assert dbg.view("acc").dtype == np.float32


def test_debug_command_rejects_block_dim_0_and_one_core_options(capsys):
    from lngb.cli import main
    assert main(["debug", "--block-dim", "0"]) == 2
    assert "block_dim 0 outside 1 ~ 48" in capsys.readouterr().err
    assert main(["debug", "--block-dim", "2", "--reuse-source"]) == 2
    assert "not of --block-dim" in capsys.readouterr().err


def test_rows_too_long_for_datacopy_strides_are_a_capacity_error():
    with pytest.raises(CapacityError, match="H = 600000 is too long"):
        lngb.operator_tiling((1, 2, 600000), np.float32, "atlas-a2")
    assert lngb.operator_tiling((1, 2, 500000), np.float32, "atlas-a2").acc_cols < 500000


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("h", [4096, 1008])
def test_prefetch_points_hit_exactly_the_cache_lines_each_step_copies_in(dtype, h):
    """Whatever the alignment of the GM base, the 64-byte host cache lines a step's prefetch
    points fall in are exactly those its GM -> UB DataCopys read."""
    dy, rfg = inputs((1, 12, h), dtype, seed_of("lines", h))
    lngb.clear_caches()
    plan = lngb.emulate_operator(dy, rfg, block_dim=2).plan
    for p, rows in enumerate(plan.programs):
        read = set()
        for row in rows[(rows[:, KIND] == COPY) & (rows[:, COPY_DIR] == GM_TO_UB)]:
            for i in range(row[BLOCK_COUNT]):
                start = row[SRC0] + 32 * i * (row[BLOCK_LEN] + row[SRC_GAP])
                read |= {(row[GM_SLOT], x) for x in range(start, start + 32 * row[BLOCK_LEN])}
        points = plan.points[plan.point_starts[p]:plan.point_starts[p + 1]]
        for base in (0, 16, 32, 48):
            assert ({(slot, (base + x) // 64) for slot, x in read}
                    == {(slot, (base + x) // 64) for slot, x in points})


def test_run_schedule_prefetches_the_next_steps_points_spread_over_this_step(monkeypatch):
    """During step i, run_schedule prefetches step i + 1's points at step i + 1's bases of each
    core of the lock-step group in turn (nothing during the last step), at most
    ceil(points * cores / instructions) after each instruction."""
    dy, rfg = inputs((1, 24, 4096), np.float32, seed_of("prefetch order"))
    run = prepare_operator(dy, rfg, "atlas-a2", 2, "fast")
    plan = scheduling.plan(("prefetch order", run.tiling), run.cores, run.kernel)
    kernels = executor   # its Python functions, spied on; the rows' helpers do nothing here
    python = {name: getattr(getattr(kernels, name), "py_func", getattr(kernels, name))
              for name in ("run_steps", "execute_cores", "fetch_ahead")}
    calls, steps, bursts = [], [], []
    monkeypatch.setattr(kernels, "prefetch", lambda array, offset: calls.append(
        array.ctypes.data + offset))
    monkeypatch.setattr(kernels, "execute_cores", lambda *args: (
        steps.append((len(calls), len(bursts))), python["execute_cores"](*args))[1])
    monkeypatch.setattr(kernels, "fetch_ahead", lambda ahead: (
        python["fetch_ahead"](ahead), bursts.append(len(calls))))
    for name in ("call_row", "call_run"):
        monkeypatch.setattr(kernels, name, lambda *args: None)
    every_helper = np.ones((max(e.opcode for e in TABLE.entries) + 1, 5), np.int64)
    gms = [scheduling.pad_gms(g) for g in run.gms]
    for phase in range(2):
        schedules = [s[phase] for s in plan.schedules]
        jobs = scheduling.lockstep_jobs(run.cores, gms, schedules, threads=1)
        assert [len(job[0]) for job in jobs] == [2]   # both cores in one lock-step group
        for cores, ubs, roots, programs, bases in jobs:
            del calls[:], steps[:], bursts[:]
            block = scheduling.interleave(ubs, [(0, ubs.shape[1] // GRANULE)])
            python["run_steps"](block, *roots, plan.rows, plan.starts, plan.points,
                                plan.point_starts, programs, bases, every_helper, 0, 0)
            steps.append((len(calls), len(bursts)))
            for i, p in enumerate(programs):
                want = []
                if i + 1 < len(programs):
                    q = programs[i + 1]
                    want = [gms[c][slot].ctypes.data + schedules[c][i + 1, 1 + slot] + offset
                            for c in range(len(cores)) for slot, offset in
                            plan.points[plan.point_starts[q]:plan.point_starts[q + 1]]]
                assert calls[steps[i][0]:steps[i + 1][0]] == want
                program = plan.programs[p]
                most = -(-len(want) // max(np.count_nonzero(program[:, KIND] != EVENT), 1))
                ends = [steps[i][0]] + bursts[steps[i][1]:steps[i + 1][1]]
                assert max(np.diff(ends), default=0) <= most


# --- Ctrl-C ------------------------------------------------------------------------------------

def test_an_interrupted_check_leaves_nothing_for_the_next_checked_run(monkeypatch):
    """Ctrl-C arriving just after the sanitizer marked an instruction's bytes in its per-thread
    scratch (here: raised there) must not leave them marked: the next checked run reported an
    UninitializedReadError on bytes a DataCopy reads (about 1 interrupt in 8, by Ctrl-C)."""
    from lngb.observers import sanitizer
    dy, rfg = inputs((2, 64, 64), F32, 5)
    expected = lngb.emulate_operator(dy, rfg, block_dim=4, mode="fast")
    real, calls = sanitizer.footprint, []

    def interrupted(*args):
        real(*args)
        calls.append(1)
        if len(calls) == 40:
            raise KeyboardInterrupt

    monkeypatch.setattr(sanitizer, "footprint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lngb.emulate_operator(dy, rfg, block_dim=4, mode="checked")
    result = lngb.emulate_operator(dy, rfg, block_dim=4, mode="checked")
    assert same_bits(result.pd_gamma, expected.pd_gamma)
    assert same_bits(result.pd_beta, expected.pd_beta)


INTERRUPTED_REPLAY = '''
import signal, threading, time
ctrl_c = lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)   # as a terminal's
import numpy as np
import lngb
from lngb.runtime import schedule

rng = np.random.default_rng(3)
dy, x = (rng.standard_normal((1, 256, 128)).astype(np.float32) for _ in range(2))
variance = rng.random((1, 256)).astype(np.float32) + 0.5
mean, gamma = rng.standard_normal((1, 256)).astype(np.float32), rng.standard_normal(128).astype(np.float32)
calls = {"emulate_operator": lambda **kw: lngb.emulate_operator(dy, x, **kw),
         "emulate_layer_norm_backward": lambda **kw: lngb.emulate_layer_norm_backward(
             dy, x, variance, mean, gamma, **kw)}
real, busy = schedule.run_job, []

def slow_helpers(*args, **kw):   # the helper threads' jobs take 0.5 s: Ctrl-C finds the caller
    if threading.current_thread() is threading.main_thread():   # waiting for them
        return real(*args, **kw)
    busy.append(1)
    try:
        time.sleep(0.5)
        return real(*args, **kw)
    finally:
        busy.pop()

for api, call in calls.items():
    expected = call(block_dim=8, threads=1)
    schedule.run_job = slow_helpers
    threading.Timer(0.2, ctrl_c).start()
    try:
        call(block_dim=8, threads=2)
    except KeyboardInterrupt:
        print(api, "helpers in a job:", len(busy))
    schedule.run_job = real
    again = call(block_dim=8, threads=2)
    print(api, "same bits:", all(np.array_equal(a.view(np.uint8), b.view(np.uint8))
                                  for a, b in zip(expected.outputs().values(), again.outputs().values())))
'''


@pytest.mark.process
def test_ctrl_c_during_a_threaded_replay_stops_its_threads_and_later_calls_are_right():
    """emulate_operator / emulate_layer_norm_backward with threads > 1: Ctrl-C while the
    calling thread waits for the others returns only once they have stopped (today they ran on
    after the KeyboardInterrupt reached the caller), and the next call gives the same bits.
    (Not Thread.is_alive: after an interrupted join, Python 3.11 takes the thread for stopped.)"""
    from test_simulate import run_script
    run = run_script(INTERRUPTED_REPLAY, timeout=300)
    for api in ("emulate_operator", "emulate_layer_norm_backward"):
        assert f"{api} helpers in a job: 0" in run.stdout, run.stdout + run.stderr
        assert f"{api} same bits: True" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0


INTERRUPTED_ANYWHERE = '''
import signal, threading, time
ctrl_c = lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)   # as a terminal's
import numpy as np
import lngb

rng = np.random.default_rng(4)
dy, x = (rng.standard_normal((1, 128, 64)).astype(np.float32) for _ in range(2))
variance = rng.random((1, 128)).astype(np.float32) + 0.5
mean, gamma = rng.standard_normal((1, 128)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
calls = {"emulate_operator": lambda **kw: lngb.emulate_operator(dy, x, **kw),
         "emulate_layer_norm_backward": lambda **kw: lngb.emulate_layer_norm_backward(
             dy, x, variance, mean, gamma, **kw)}
bits = lambda r: [a.view(np.uint8).tobytes() for a in r.outputs().values()]
for api, call in calls.items():
    expected = bits(call(block_dim=4, threads=2, mode="fast"))
    for mode in ("checked", "observed"):
        start = time.perf_counter()
        call(block_dim=4, threads=2, mode=mode)
        took = time.perf_counter() - start
        wrong = 0
        for k in range(4):   # Ctrl-C at 4 points spread over the call
            timer = threading.Timer(took * (k + 0.5) / 4, ctrl_c)
            timer.start()
            try:
                call(block_dim=4, threads=2, mode=mode)
                timer.join()
                time.sleep(0.01)
            except KeyboardInterrupt:
                pass
            wrong += bits(call(block_dim=4, threads=2, mode=mode)) != expected
        print(api, mode, "wrong:", wrong)
'''


@pytest.mark.process
def test_ctrl_c_anywhere_in_observed_and_checked_runs_leaves_later_calls_right():
    """Ctrl-C at 4 points of a checked or observed run of each operator: every later call
    gives the fast mode's bits and reports nothing (today a checked call after some interrupts
    raised UninitializedReadError)."""
    from test_simulate import run_script
    run = run_script(INTERRUPTED_ANYWHERE, timeout=500)
    for api in ("emulate_operator", "emulate_layer_norm_backward"):
        for mode in ("checked", "observed"):
            assert f"{api} {mode} wrong: 0" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0


def test_an_interrupted_footprint_count_leaves_nothing_for_the_next(monkeypatch):
    """The same for the trace records' scratch (bytes_moved, the debugger's watchpoints)."""
    from lngb import record as records
    from lngb.vector_ops import Add, BinaryRepeatParams
    core = lngb.AICore(mode="observed")
    ub = core.alloc(256, F32)
    with core:
        Add(ub[64], ub[64], ub[64], 64)      # UB bytes [256, 512)
        # [0, 256) and [512, 768): the first one's bytes lie between
        Add(ub, ub, ub, 64, 2, BinaryRepeatParams(1, 1, 1, 16, 16, 16))
    first, second = core.trace
    expected = second.bytes_moved
    real = records.footprint

    def interrupted(*args):
        real(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(records, "footprint", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _ = first.bytes_moved
    monkeypatch.setattr(records, "footprint", real)
    assert second.bytes_moved == expected == (512, 512)


@pytest.mark.parametrize("mode", ["fast", "observed", "checked"])
def test_an_error_on_one_core_carries_its_index(monkeypatch, mode):
    """emulate_operator run (or planned) core by core: an error on core 2 reaches the caller
    as it is, with the core's index."""
    real = multicore.LayerNormGradBetaKernel.ReduceAcrossCores

    def fails_on_core_2(self, *args):
        if self.block_idx == 2:
            raise ValueError("core 2 fails")
        return real(self, *args)
    monkeypatch.setattr(multicore.LayerNormGradBetaKernel, "ReduceAcrossCores", fails_on_core_2)
    lngb.clear_caches()   # fast mode plans it again
    dy, rfg = inputs((2, 7, 64), np.float32, seed_of("core index"))
    with pytest.raises(ValueError, match="core 2 fails") as caught:
        lngb.emulate_operator(dy, rfg, block_dim=3, mode=mode)
    assert caught.value.block_idx == 2
