"""The mask register and the synchronisation calls of lngb.vector_ops.

1. The mask register: what count-form and mask-form calls leave behind; counter mode; the
   SetVectorMask forms.
2. Flags pair up (SetFlag / WaitFlag); mask and sync calls need a current core.
3. The CANN row loop of LayerNormGradBeta typed line by line gives the oracle's bits.
"""
import numpy as np
import pytest

import lngb
import naive
from conftest import UNCHECKED_MODES, fill_random, garbage_ub, random_finite, seed_of
from golden import BRP, EPR, F16, F32, FULL64
from lngb.vector_ops import (MASK_PLACEHOLDER, PIPE_V, Add, Adds, BinaryRepeatParams, Cast,
                             DataCopy, Duplicate, HardEvent, MaskMode, Mul, Muls, PipeBarrier,
                             ResetMask, RoundMode, SetFlag, SetMaskCount, SetMaskNorm,
                             SetVectorMask, Sub, UnaryRepeatParams, WaitFlag)

pytestmark = pytest.mark.jitted


# =============================================================================================
# The mask register


def _three(core, dt, n=512):
    rng = np.random.default_rng(11)
    ts = [core.alloc(n, dt) for _ in range(3)]
    for t in ts:
        fill_random(core, t, rng)
    return ts


COUNT_FORM_CALLS = {
    "Add": lambda d, a, b: Add(d, a, b, 100),
    "Sub": lambda d, a, b: Sub(d, a, b, 100),
    "Mul": lambda d, a, b: Mul(d, a, b, 100),
    "Adds": lambda d, a, b: Adds(d, a, 2.0, 100),
    "Muls": lambda d, a, b: Muls(d, a, 2.0, 100),
    "Duplicate": lambda d, a, b: Duplicate(d, 2.0, 100),
    "Cast": lambda d, a, b: Cast(d.ReinterpretCast(F16), a, RoundMode.CAST_RINT, 100),
}


@pytest.mark.parametrize("api", list(COUNT_FORM_CALLS))
@pytest.mark.parametrize("prior", ["counter", "normal_partial"])
def test_count_form_restores_normal_mode_and_full_mask(api, prior, mode):
    core = lngb.AICore("atlas-a2", mode=mode)
    d, a, b = _three(core, F32)
    with core:
        if prior == "counter":
            SetMaskCount()
            SetVectorMask(0, 5, dtype=F32, mode=MaskMode.COUNTER)
        else:
            SetVectorMask(3, 0xFF, dtype=F16)
        COUNT_FORM_CALLS[api](d, a, b)
    assert core.mask_mode == MaskMode.NORMAL
    assert core.mask_low == core.mask_high == 2**64 - 1


@pytest.mark.parametrize("dt,mask,words", [
    (F32, 37, (0, (1 << 37) - 1)),
    (F32, 64, (0, FULL64)),
    (F16, 100, ((1 << 36) - 1, FULL64)),
    (F16, 128, (FULL64, FULL64)),
    (F16, 64, (0, FULL64)),
    (F16, [0x1234, 0xABCD], (0xABCD, 0x1234)),
    (F32, [0xFFFF0000FFFF0000, 0], (0, 0xFFFF0000FFFF0000)),
])
def test_mask_form_leaves_its_mask_in_the_register(dt, mask, words, mode):
    core = lngb.AICore("atlas-a2", mode=mode)
    garbage_ub(core, np.random.default_rng(5))
    d, a, b = _three(core, dt)
    d2 = core.alloc(512, dt)
    E = EPR[dt]
    with core:
        Add(d, a, b, mask, 1, BRP())
        assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.NORMAL, *words)
        before = core.ub[:core.ub_size].copy()
        Mul(d2, a, b, MASK_PLACEHOLDER, 3, BRP(), is_set_mask=False)
    assert (core.mask_high, core.mask_low) == words
    expected = naive.binary("Mul", before, dt, d2.address, a.address, b.address,
                            mask=(words[1], words[0]) if E == 128 else (words[1], 0), repeat=3)
    assert np.array_equal(core.ub[:core.ub_size], expected)
    # the same bits as the mask argument itself
    expected_direct = naive.binary("Mul", before, dt, d2.address, a.address, b.address,
                                   mask=mask if isinstance(mask, int) else tuple(mask), repeat=3)
    assert np.array_equal(expected, expected_direct)


@pytest.mark.parametrize("dt", [F32, F16])
@pytest.mark.parametrize("how", ["two_words", "length_form", "instruction_argument"])
# not "checked": Add then Sub write d with no PipeBarrier(PIPE_V) between them, a WAW hazard
@pytest.mark.parametrize("mode", UNCHECKED_MODES)
def test_counter_mode(dt, how, mode):
    core = lngb.AICore("atlas-a2", mode=mode)
    garbage_ub(core, np.random.default_rng(6))
    d, a, b = _three(core, dt, 1024)
    E = EPR[dt]
    count = 2 * E + 7
    before = core.ub[:core.ub_size].copy()
    with core:
        SetMaskCount()
        assert core.mask_mode == MaskMode.COUNTER
        if how == "two_words":
            SetVectorMask(0, count, dtype=dt, mode=MaskMode.COUNTER)
            Add(d, a, b, MASK_PLACEHOLDER, 1, BRP(), is_set_mask=False)
        elif how == "length_form":
            SetVectorMask(count, dtype=dt, mode=MaskMode.COUNTER)
            Add(d, a, b, MASK_PLACEHOLDER, 0, BRP(), is_set_mask=False)  # repeatTime ignored
        else:
            Add(d, a, b, count, 1, BRP())
        # counter mode and the count stay in the register until changed
        assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.COUNTER, 0, count)
        expected = naive.binary("Add", before, dt, d.address, a.address, b.address,
                                mode="counter", count=count)
        assert np.array_equal(core.ub[:core.ub_size], expected)
        Sub(d, a, b, MASK_PLACEHOLDER, 1, BRP(), is_set_mask=False)
        expected = naive.binary("Sub", expected, dt, d.address, a.address, b.address,
                                mode="counter", count=count)
        assert np.array_equal(core.ub[:core.ub_size], expected)
        SetMaskNorm()
        ResetMask()
    assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.NORMAL, FULL64, FULL64)


def test_set_vector_mask_forms():
    core = lngb.AICore("atlas-a2")
    with core:
        SetVectorMask(70, dtype=F16)
        assert (core.mask_high, core.mask_low) == ((1 << 6) - 1, FULL64)
        SetVectorMask(64, dtype=F32)
        assert (core.mask_high, core.mask_low) == (0, FULL64)
        SetVectorMask(5, 9, dtype=F16)
        assert (core.mask_high, core.mask_low) == (5, 9)
        ResetMask()
        assert (core.mask_high, core.mask_low) == (FULL64, FULL64)
        SetMaskCount()
        SetVectorMask(1000, dtype=F32, mode=MaskMode.COUNTER)
        assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.COUNTER, 0, 1000)
        SetMaskNorm()
        assert core.mask_mode == MaskMode.NORMAL


# =============================================================================================
# Flags, and the current core


def test_flags_pair_up():
    core = lngb.AICore("atlas-a2", mode="observed")
    with core:
        SetFlag(HardEvent.MTE2_V, 3)
        SetFlag(HardEvent.MTE2_V, 3)
        WaitFlag(HardEvent.MTE2_V, 3)
        WaitFlag(HardEvent.MTE2_V, 3)
        with pytest.raises(lngb.InvalidArgumentError):
            WaitFlag(HardEvent.MTE2_V, 3)
        PipeBarrier(PIPE_V)
    assert [r.name for r in core.trace] == ["SetFlag", "SetFlag", "WaitFlag", "WaitFlag",
                                            "PipeBarrier"]


def test_mask_and_sync_calls_need_a_current_core():
    for call in (SetMaskCount, SetMaskNorm, ResetMask, lambda: PipeBarrier(PIPE_V),
                 lambda: SetVectorMask(0, 5, dtype=F32), lambda: SetFlag(HardEvent.MTE2_V, 0)):
        with pytest.raises(lngb.InvalidArgumentError):
            call()


# =============================================================================================
# The CANN row loop (spec layernorm_grad_beta.md 3.3) typed line by line


@pytest.mark.parametrize("shape", [(2, 8, 64), (3, 5, 72)])
def test_cann_row_loop_matches_naive(shape, mode):
    B, S, H = shape
    rows, n = B * S, B * S * H
    rng = np.random.default_rng(seed_of("cann", shape))
    dy_np = random_finite(F32, n, rng).reshape(shape)
    rfg_np = random_finite(F32, n, rng).reshape(shape)
    dy_np.reshape(-1)[:3] = [-0.0, -0.0, 1.0]   # row 0: -0.0 products (+0 added by Adds)
    rfg_np.reshape(-1)[:3] = [1.0, -0.0, -0.0]
    core = lngb.AICore("atlas-a2", mode=mode)
    garbage_ub(core, rng)
    dy, rfg, P = (core.alloc(n, F32) for _ in range(3))
    out_g, out_b = core.alloc(H, F32), core.alloc(H, F32)
    with core:
        DataCopy(dy, lngb.GlobalTensor(dy_np), n)
        DataCopy(rfg, lngb.GlobalTensor(rfg_np), n)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        SetMaskCount()
        SetVectorMask(0, n, dtype=np.float32, mode=MaskMode.COUNTER)
        Mul(P, dy, rfg, MASK_PLACEHOLDER, 1, BinaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)
        SetVectorMask(0, H, dtype=np.float32, mode=MaskMode.COUNTER)
        Adds(out_g, P, 0.0, MASK_PLACEHOLDER, 1, UnaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)
        for r in range(1, rows):
            Add(out_g, P[r * H], out_g, MASK_PLACEHOLDER, 1, BinaryRepeatParams(),
                is_set_mask=False)
            PipeBarrier(PIPE_V)
        SetVectorMask(0, H, dtype=np.float32, mode=MaskMode.COUNTER)
        Adds(out_b, dy, 0.0, MASK_PLACEHOLDER, 1, UnaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)
        for r in range(1, rows):
            Add(out_b, dy[r * H], out_b, MASK_PLACEHOLDER, 1, BinaryRepeatParams(),
                is_set_mask=False)
            PipeBarrier(PIPE_V)
        SetMaskNorm()
        ResetMask()
        SetFlag(HardEvent.V_MTE3, 0)   # the copies out wait for the sums
        WaitFlag(HardEvent.V_MTE3, 0)
        g_gm, b_gm = np.zeros(H, F32), np.zeros(H, F32)
        DataCopy(lngb.GlobalTensor(g_gm), out_g, H)
        DataCopy(lngb.GlobalTensor(b_gm), out_b, H)
    want_g, want_b = naive.layer_norm_grad_beta(dy_np, rfg_np)
    assert np.array_equal(g_gm.view(np.uint32), want_g.view(np.uint32))
    assert np.array_equal(b_gm.view(np.uint32), want_b.view(np.uint32))
    with np.errstate(over="ignore"):
        products = (dy_np * rfg_np).reshape(-1)
    assert np.array_equal(P.read().view(np.uint32), products.view(np.uint32))
