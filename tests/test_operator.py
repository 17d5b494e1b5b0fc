"""LayerNormGradBeta and emulate() against the independent oracle in tests/naive.py."""

import numpy as np
import pytest

import lngb
from lngb import (AlignmentError, CapacityError, InvalidArgumentError, LngbWarning, TilingError,
                  UnsupportedProductError)
from lngb.vector_ops import MaskMode

import naive
from conftest import rejected, seed_of

pytestmark = pytest.mark.jitted

PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")
SATURATING = {"atlas-a2": False, "atlas-a3": False, "atlas-inference": True, "atlas-350": True}
SEED_GAMMA = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
SEED_BETA = [224 + 8 * h for h in range(8)]


def inputs(shape, dtype, seed, scale=4.0):
    rng = np.random.default_rng(seed)
    dy = (rng.standard_normal(shape) * scale).astype(dtype)
    rfg = rng.standard_normal(shape).astype(dtype)
    return dy, rfg


def same_bits(a, b):
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def assert_matches_oracle(result, dy, rfg, product):
    gamma, beta = naive.layer_norm_grad_beta(dy, rfg, sat=SATURATING[product])
    assert same_bits(result.pd_gamma, gamma), (result.pd_gamma, gamma)
    assert same_bits(result.pd_beta, beta), (result.pd_beta, beta)


def legal_sizes(shape, dtype, step=32):
    max_size, min_size = lngb.GetLayerNormGradBetaMaxMinTmpSize(shape, np.dtype(dtype).itemsize,
                                                                False)
    return range(min_size, max_size + 1, step)


@pytest.mark.parametrize("product", PRODUCTS)
def test_seed_example(product):
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    result = lngb.emulate(x, x, product=product)
    assert result.pd_gamma.tolist() == SEED_GAMMA
    assert result.pd_beta.tolist() == SEED_BETA


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 8, 16), (2, 16, 64), (4, 8, 512), (3, 5, 80)])
def test_random_inputs_match_oracle(product, dtype, shape):
    dy, rfg = inputs(shape, dtype, seed=seed_of(product, shape))
    assert_matches_oracle(lngb.emulate(dy, rfg, product=product), dy, rfg, product)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1, 8, 16), (2, 4, 32)])
def test_every_legal_temp_size_gives_the_same_bits(dtype, shape):
    dy, rfg = inputs(shape, dtype, seed=7)
    gamma, beta = naive.layer_norm_grad_beta(dy, rfg)
    loop_rounds = set()
    for size in legal_sizes(shape, dtype):
        result = lngb.emulate(dy, rfg, stack_buffer_size=size)
        loop_rounds.add(result.tiling.loopRound)
        assert same_bits(result.pd_gamma, gamma) and same_bits(result.pd_beta, beta), size
    assert len(loop_rounds) > 2  # the sizes really produced different chunkings


def test_tail_chunk_and_sampled_sizes_on_a_larger_shape():
    shape = (4, 8, 512)
    dy, rfg = inputs(shape, np.float32, seed=3)
    for size in list(legal_sizes(shape, np.float32, step=32 * 97))[:12]:
        result = lngb.emulate(dy, rfg, stack_buffer_size=size)
        assert_matches_oracle(result, dy, rfg, "atlas-a2")
    assert any(lngb.emulate(dy, rfg, stack_buffer_size=s).tiling.inputTailSize
               for s in (3 * 2048 + 32, 5 * 2048 * 4))


@pytest.mark.parametrize("product", PRODUCTS)
def test_half_overflow_follows_the_saturation_mode(product):
    dy = np.full((1, 8, 16), 300, np.float16)
    rfg = np.full((1, 8, 16), 60, np.float16)   # 8 * 18000 > 65504; pdBeta = 2400 fits
    result = lngb.emulate(dy, rfg, product=product)
    assert_matches_oracle(result, dy, rfg, product)
    expected = 65504.0 if SATURATING[product] else np.inf
    assert np.all(result.pd_gamma.astype(np.float64) == expected)


def test_negative_zero_in_row_zero_becomes_positive_zero():
    dy = np.zeros((1, 4, 8), np.float32)
    dy[0, 0] = -0.0
    rfg = np.ones((1, 4, 8), np.float32)
    result = lngb.emulate(dy, rfg)
    assert not np.signbit(result.pd_beta).any()
    assert_matches_oracle(result, dy, rfg, "atlas-a2")


def test_special_values_propagate_bit_exactly():
    dy, rfg = inputs((2, 4, 16), np.float32, seed=11)
    dy[0, 1, 0], dy[1, 2, 1], rfg[0, 0, 2], rfg[1, 3, 3] = np.inf, np.nan, -np.inf, 1e-45
    assert_matches_oracle(lngb.emulate(dy, rfg), dy, rfg, "atlas-a2")


def test_replay_uses_new_data():
    """The second call of a configuration replays the recorded program on fresh data."""
    for seed in range(3):
        dy, rfg = inputs((2, 16, 64), np.float32, seed=100 + seed)
        assert_matches_oracle(lngb.emulate(dy, rfg), dy, rfg, "atlas-a2")


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
def test_observed_mode_gives_the_fast_path_bits(dtype, product):
    dy, rfg = inputs((2, 8, 64), dtype, seed=5)
    fast = lngb.emulate(dy, rfg, product=product, stack_buffer_size=None)
    observed = lngb.emulate(dy, rfg, product=product, mode="observed")
    assert same_bits(fast.pd_gamma, observed.pd_gamma)
    assert same_bits(fast.pd_beta, observed.pd_beta)
    assert np.array_equal(fast.core.ub, observed.core.ub)
    assert observed.core.trace and fast.core.trace == []


def test_trace_flag_returns_the_records():
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    result = lngb.emulate(x, x, trace=True)
    names = [r.name for r in result.trace]
    assert names[:2] == ["DataCopy", "DataCopy"] and "Mul" in names and names[-1] == "DataCopy"


@pytest.mark.parametrize("reuse", [False, True])
def test_caller_arrays_are_never_modified(reuse):
    dy, rfg = inputs((2, 16, 64), np.float32, seed=9)
    dy_before, rfg_before = dy.copy(), rfg.copy()
    for buffer in ("input_dy", "res_for_gamma"):
        lngb.emulate(dy, rfg, is_reuse_source=reuse, reuse_buffer=buffer)
        assert same_bits(dy, dy_before) and same_bits(rfg, rfg_before)


def test_non_contiguous_and_read_only_inputs():
    dy, rfg = inputs((2, 8, 128), np.float32, seed=4)
    view = dy[:, :, ::2]
    frozen = rfg[:, :, ::2].copy()
    frozen.flags.writeable = False
    assert_matches_oracle(lngb.emulate(view, frozen), view, frozen, "atlas-a2")


def test_reuse_input_dy_writes_products_into_input_dy():
    dy, rfg = inputs((1, 10, 8), np.float32, seed=2)
    result = lngb.emulate(dy, rfg, is_reuse_source=True, stack_buffer_size=3 * 8 * 4)
    assert result.tiling.bsCurLength == 3
    assert_matches_oracle(result, dy, rfg, "atlas-a2")
    ub_dy = result.core.ub[:dy.nbytes].view(np.float32).reshape(10, 8)
    assert same_bits(ub_dy, (dy * rfg).reshape(10, 8))
    ub_rfg = result.core.ub[dy.nbytes:2 * dy.nbytes].view(np.float32).reshape(10, 8)
    assert same_bits(ub_rfg, rfg.reshape(10, 8))


def test_reuse_res_for_gamma_reproduces_cann_buffer_state():
    """Spec §3.6: [1, 10, 8] with 3-row chunks leaves rows 0/1/2 = products of rows 9/7/8."""
    dy, rfg = inputs((1, 10, 8), np.float32, seed=1)
    result = lngb.emulate(dy, rfg, is_reuse_source=True, reuse_buffer="res_for_gamma",
                          stack_buffer_size=3 * 8 * 4)
    assert_matches_oracle(result, dy, rfg, "atlas-a2")
    ub_rfg = result.core.ub[dy.nbytes:2 * dy.nbytes].view(np.float32).reshape(10, 8)
    assert same_bits(ub_rfg, naive.reuse_res_for_gamma_state(dy, rfg, 3))
    products = (dy * rfg).reshape(10, 8)
    assert same_bits(ub_rfg[:3], products[[9, 7, 8]])
    ub_dy = result.core.ub[:dy.nbytes].view(np.float32).reshape(10, 8)
    assert same_bits(ub_dy, dy.reshape(10, 8))


def test_reuse_on_half_warns_and_changes_nothing():
    dy, rfg = inputs((1, 8, 16), np.float16, seed=6)
    for _ in range(2):  # the replay of a recorded call warns too
        with pytest.warns(LngbWarning, match="may not be effective") as caught:
            result = lngb.emulate(dy, rfg, is_reuse_source=True)
        assert caught[0].filename == __file__
    assert_matches_oracle(result, dy, rfg, "atlas-a2")
    assert same_bits(result.core.ub[:dy.nbytes].view(np.float16), dy.reshape(-1))


def test_atlas_350_ignores_the_temp_buffer_and_reuse():
    dy, rfg = inputs((1, 10, 16), np.float32, seed=8)
    with pytest.warns(LngbWarning, match="950 kernel ignores it"):
        result = lngb.emulate(dy, rfg, product="atlas-350", is_reuse_source=True,
                              reuse_buffer="res_for_gamma")
    assert_matches_oracle(result, dy, rfg, "atlas-350")
    assert same_bits(result.core.ub[dy.nbytes:2 * dy.nbytes].view(np.float32), rfg.reshape(-1))


# --- the operator on a core the caller set up ----------------------------------------------------

def setup(shape=(1, 8, 8), dtype=np.float32, tmp_bytes=None, product="atlas-a2"):
    core = lngb.AICore(product)
    x = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    dy, rfg = core.alloc(shape, dtype, "VECIN"), core.alloc(shape, dtype, "VECIN")
    dy.write(x)
    rfg.write(x)
    g, b = core.alloc(shape[2], dtype, "VECOUT"), core.alloc(shape[2], dtype, "VECOUT")
    max_size, min_size = lngb.GetLayerNormGradBetaMaxMinTmpSize(shape, np.dtype(dtype).itemsize,
                                                                False)
    tmp_bytes = min_size if tmp_bytes is None else tmp_bytes
    tmp = core.alloc(tmp_bytes, np.uint8)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, tmp_bytes, np.dtype(dtype).itemsize,
                                                   False)
    return core, g, b, rfg, dy, tmp, tiling


def test_both_overloads_and_the_mask_state_afterwards():
    core, g, b, rfg, dy, tmp, tiling = setup()
    with core:
        lngb.vector_ops.SetMaskCount()
    lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, tiling)
    assert g.read().tolist() == SEED_GAMMA and b.read().tolist() == SEED_BETA
    assert core.mask_mode == MaskMode.NORMAL and core.mask_low == core.mask_high == 2**64 - 1

    core, g, b, rfg, dy, _, _ = setup()
    free = core.free_bytes
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), free, 4, False)
    lngb.LayerNormGradBeta(g, b, rfg, dy, tiling)   # temp = all UB not yet allocated
    assert g.read().tolist() == SEED_GAMMA and core.free_bytes == free


def test_checks_raise_before_any_byte_changes():
    core, g, b, rfg, dy, tmp, tiling = setup()
    op = lngb.LayerNormGradBeta
    assert "cannot be reused" in rejected(InvalidArgumentError,
                                          lambda: op(g, g, rfg, dy, tmp, tiling), core)
    assert "32-byte aligned" in rejected(AlignmentError,
                                         lambda: op(g, b, rfg, dy, tmp[16], tiling), core)
    bad = lngb.LayerNormGradBetaTiling(**{**tiling.__dict__, "oneCalSize": 0})
    assert "oneCalSize must > 0" in rejected(InvalidArgumentError,
                                             lambda: op(g, b, rfg, dy, tmp, bad), core)
    bigger = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 512, 4, False)
    assert "stackBufferSize" in rejected(InvalidArgumentError,
                                         lambda: op(g, b, rfg, dy, tmp, bigger), core)
    other_h = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8, 7), 64, 4, False)
    assert "original H" in rejected(InvalidArgumentError,
                                    lambda: op(g, b, rfg, dy, tmp, other_h), core)
    short = core.alloc(4, np.float32)
    assert "should be 32B aligned" in rejected(AlignmentError,
                                               lambda: op(g, short, rfg, dy, tmp, tiling), core)
    too_many_rows = lngb.GetLayerNormGradBetaNDTilingInfo((2, 8, 8), 64, 4, False)
    assert "needs 128" in rejected(InvalidArgumentError,
                                   lambda: op(g, b, rfg, dy, tmp, too_many_rows), core)
    assert "uint8" in rejected(InvalidArgumentError,
                               lambda: op(g, b, rfg, dy, tmp.ReinterpretCast(np.float32), tiling),
                               core)
    other = lngb.AICore()
    foreign = other.alloc(8, np.float32)
    rejected(InvalidArgumentError, lambda: op(foreign, b, rfg, dy, tmp, tiling), core)


def test_half_h_must_fill_whole_blocks():
    core, _, _, rfg, dy, tmp, tiling = setup((1, 8, 8), np.float16)
    g, b = core.alloc(16, np.float16), core.alloc(16, np.float16)   # 32-byte outputs, H = 8
    assert "hLength * sizeof(T)" in rejected(
        AlignmentError, lambda: lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, tiling), core)


def test_emulate_capacity_and_tiling_errors():
    too_big = np.zeros((8, 64, 128), np.float32)          # 2 x 256 KiB of inputs
    with pytest.raises(CapacityError, match="emulate_operator"):
        lngb.emulate(too_big, too_big)
    x = np.zeros((1, 8, 8), np.float32)
    with pytest.raises(TilingError, match="below the minimum 64"):
        lngb.emulate(x, x, stack_buffer_size=32)
    with pytest.raises(CapacityError, match="does not fit"):
        lngb.emulate(x, x, stack_buffer_size=300_000)
    with pytest.raises(InvalidArgumentError):
        lngb.emulate(x, x.astype(np.float16))
    with pytest.raises(InvalidArgumentError):
        lngb.emulate(x.reshape(8, 8), x.reshape(8, 8))
    with pytest.raises(AlignmentError, match="multiple of 8"):
        lngb.emulate(np.zeros((1, 8, 12), np.float32), np.zeros((1, 8, 12), np.float32))
    with pytest.raises(AlignmentError, match="multiple of 16"):
        lngb.emulate(np.zeros((1, 8, 8), np.float16), np.zeros((1, 8, 8), np.float16))
    fits_on_bigger_ub = np.zeros((1, 200, 128), np.float32)
    with pytest.raises(CapacityError, match="It fits on atlas-inference, atlas-350"):
        lngb.emulate(fits_on_bigger_ub, fits_on_bigger_ub)
    with pytest.raises(InvalidArgumentError, match="integer number of bytes"):
        lngb.emulate(x, x, stack_buffer_size=64.0)
    with pytest.raises(InvalidArgumentError, match="sat_mode"):
        lngb.emulate(x, x, sat_mode="bogus")


def test_products():
    with pytest.raises(UnsupportedProductError, match="Atlas training series"):
        lngb.AICore("atlas-training")
    with pytest.raises(UnsupportedProductError, match="atlas-a2, atlas-a3"):
        lngb.AICore("atlas-a5")
    with pytest.raises(InvalidArgumentError, match="saturation mode only"):
        lngb.AICore("atlas-inference", sat_mode=False)
    sizes = {p: lngb.AICore(p).ub_size for p in PRODUCTS}
    assert sizes == {"atlas-a2": 196608, "atlas-a3": 196608, "atlas-inference": 262144,
                     "atlas-350": 262144}
    assert lngb.AICore("atlas-a2", reserved_bytes=0).capacity == 196608


def test_emulate_on_the_largest_shape_that_fits():
    for product in PRODUCTS:
        capacity = lngb.AICore(product).capacity
        h = 64
        rows = (capacity - 2 * h * 4 - 2 * h * 4) // (2 * h * 4)
        dy, rfg = inputs((1, rows, h), np.float32, seed=12)
        assert_matches_oracle(lngb.emulate(dy, rfg, product=product), dy, rfg, product)
        with pytest.raises(CapacityError):
            lngb.emulate(*inputs((1, rows + 1, h), np.float32, seed=12), product=product)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_kernel_rejected_midway_changes_nothing():
    """outputPdBeta overlapping inputDy passes the API checks; the instruction that would
    overlap partially is found in the dry run, before any instruction executes."""
    core = lngb.AICore()
    shape = (1, 4, 16)
    dy, rfg = core.alloc(shape, np.float32), core.alloc(shape, np.float32)
    dy.write(np.ones(shape, np.float32))
    rfg.write(np.ones(shape, np.float32))
    g = core.alloc(16, np.float32)
    tmp = core.alloc(512, np.uint8)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, 512, 4, False)
    with pytest.warns(LngbWarning, match=r"outputPdBeta .* shares bytes \[32, 96\) with inputDy"):
        message = rejected(InvalidArgumentError,
                           lambda: lngb.LayerNormGradBeta(g, dy[8], rfg, dy, tmp, tiling), core)
    assert "share some but not all bytes" in message
    assert core.mask_mode == MaskMode.NORMAL and core.mask_low == 2**64 - 1


def test_observed_mode_rejects_operands_that_overlap_in_part_before_any_instruction():
    """Observed mode runs the kernel live: tensors that share bytes, or temp positions that are
    not the host tiling's, are validated in a dry run first, so the partial overlap an
    instruction would reject half-way is found before the first one executes."""
    shape = (1, 4, 16)
    core = lngb.AICore(mode="observed")
    dy, rfg = core.alloc(shape, np.float32), core.alloc(shape, np.float32)
    g, tmp = core.alloc(16, np.float32), core.alloc(512, np.uint8)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, 512, 4, False)
    with pytest.warns(LngbWarning, match="shares bytes"):
        rejected(InvalidArgumentError, lambda: lngb.LayerNormGradBeta(g, dy[8], rfg, dy, tmp, tiling),
                 core)
    core = lngb.AICore(mode="observed")
    dy, rfg = core.alloc(shape, np.float16), core.alloc(shape, np.float16)
    g, b, tmp = core.alloc(16, np.float16), core.alloc(16, np.float16), core.alloc(512, np.uint8)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, 512, 2, False)
    shifted = lngb.LayerNormGradBetaTiling(**{**tiling.__dict__, "inputDyTmpTensorPos": 8})
    with pytest.warns(LngbWarning, match=r"inputDyTmpTensorPos=8"):
        rejected(InvalidArgumentError, lambda: lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, shifted),
                 core)
    assert core.trace == [] and core.seq == 0 and core.mask_mode == MaskMode.NORMAL


def test_tiling_fields_the_host_would_not_compute():
    core, g, b, rfg, dy, tmp, tiling = setup((1, 10, 8), tmp_bytes=96)
    bad_tail = lngb.LayerNormGradBetaTiling(**{**tiling.__dict__, "inputTailPos": 76})
    with pytest.warns(LngbWarning, match=r"inputTailPos=76 \(expected 72\)"):
        rejected(lngb.AlignmentError,
                 lambda: lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, bad_tail), core)
    core, g, b, rfg, dy, tmp, _ = setup((1, 8, 16), np.float16, tmp_bytes=512)
    float_tiling = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 16), 512, 4, False)
    with pytest.warns(LngbWarning, match="numberOfTmpBuf=1 \\(expected 2\\)"):
        lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, float_tiling)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_replay_checks_the_gm_sizes():
    core = lngb.AICore()
    t = core.alloc(64, np.float32)
    gm = np.zeros(256, np.uint8)

    def body():
        with core:
            lngb.vector_ops.DataCopy(t, lngb.GlobalTensor.in_arena(gm, 0, np.float32, 64), 64)

    core.run_recorded("copy", body, (gm,))
    with pytest.raises(InvalidArgumentError, match="recorded with"):
        core.run_recorded("copy", lambda: None, (np.zeros(64, np.uint8),))
