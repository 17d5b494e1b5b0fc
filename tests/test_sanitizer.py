"""mode="checked": every check proven on a deliberately broken kernel; the real operator runs
clean on every product and dtype."""
import numpy as np
import pytest

import lngb
from conftest import rejected
from lngb import HazardError, OutOfBoundsError, UninitializedReadError
from lngb.vector_ops import (PIPE_V, Add, BinaryRepeatParams, DataCopy,
                             HardEvent, Mul, PipeBarrier, SetFlag, WaitFlag)

pytestmark = pytest.mark.jitted

PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")


def checked_core(product="atlas-a2"):
    core = lngb.AICore(product, mode="checked")
    a, b, c = (core.alloc(128, np.float32) for _ in range(3))
    a.write(np.ones(128, np.float32))
    b.write(np.full(128, 2, np.float32))
    return core, a, b, c


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("reuse", [None, "input_dy", "res_for_gamma"])
def test_the_operator_runs_clean(product, dtype, reuse):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 64)).astype(dtype)
    kwargs = dict(is_reuse_source=reuse is not None, reuse_buffer=reuse or "input_dy")
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", lngb.LngbWarning)
            for size in (None, lngb.GetLayerNormGradBetaMaxMinTmpSize((2, 16, 64),
                                                                      np.dtype(dtype).itemsize,
                                                                      False)[1]):
                checked = lngb.emulate(x, x, product=product, mode="checked",
                                       stack_buffer_size=size, **kwargs)
                fast = lngb.emulate(x, x, product=product, stack_buffer_size=size, **kwargs)
                assert np.array_equal(checked.pd_gamma, fast.pd_gamma)
                assert np.array_equal(checked.core.ub, fast.core.ub)


def test_uninitialised_accumulator():
    core, a, b, acc = checked_core()
    message = rejected(UninitializedReadError, lambda: Add(acc, a, acc, 64), core)
    assert "#1 Add" in message and f"[{acc.address}, {acc.address + 256})" in message
    assert "test_sanitizer.py" in message  # the line of the kernel that issued it


def test_masked_off_lanes_are_not_reads():
    core, a, b, c = checked_core()
    half_init = core.alloc(64, np.float32)
    half_init.write(np.ones(32, np.float32))             # only lanes 0..31 are initialised
    Add(c, a, half_init, 32, 1, BinaryRepeatParams())    # continuous mask: lanes 0..31
    rejected(UninitializedReadError,
             lambda: Add(c, a, half_init, 33, 1, BinaryRepeatParams()), core)


def test_misaligned_tail_is_never_copied_in():
    core = lngb.AICore(mode="checked")
    x = core.alloc(20, np.float32)
    y = core.alloc(20, np.float32)
    with core:
        with pytest.warns(lngb.LngbWarning, match="drops the last 16 bytes"):
            DataCopy(x, lngb.GlobalTensor(np.ones(20, np.float32)), 20)  # 80 B: 64 B arrive
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
    Add(y, x, x, 16)                                     # the copied part is fine
    message = rejected(UninitializedReadError, lambda: Add(y, x, x, 20), core)
    assert f"[{x.address + 64}, {x.address + 80})" in message


def test_out_of_bounds_stride_is_rejected_in_every_mode():
    core, a, b, c = checked_core()
    rejected(OutOfBoundsError, lambda: Add(c, a, b, 64, 2, BinaryRepeatParams(1, 1, 1, 8, 8, 16)),
             core)


@pytest.mark.parametrize("product,hazard", [("atlas-a2", True), ("atlas-inference", True),
                                            ("atlas-350", False)])
def test_missing_barrier(product, hazard):
    core, a, b, c = checked_core(product)
    d = core.alloc(128, np.float32)
    Mul(c, a, b, 128)
    raw = lambda: Add(d, c, a, 128)                      # reads Mul's output, no barrier
    if hazard:
        message = rejected(HazardError, raw, core)
        assert message.startswith("RAW hazard: #2 Add") and "written by #1" in message
        with core:
            PipeBarrier(PIPE_V)
    raw()  # after a barrier (or on the 950, which orders V after V) it is fine
    waw = lambda: Mul(d, a, b, 128)
    if hazard:
        assert rejected(HazardError, waw, core).startswith("WAW hazard")
        with core:
            PipeBarrier(PIPE_V)
        war = lambda: Mul(a, b, b, 128)                  # overwrites what the Add below reads
        Add(c, a, b, 128)
        assert rejected(HazardError, war, core).startswith("WAR hazard")


def test_in_place_accumulation_within_one_instruction_is_not_a_hazard():
    core, a, b, c = checked_core()
    Add(b, a, b, 64, 2, BinaryRepeatParams())


def test_unpaired_flags():
    core, *_ = checked_core()
    with core:
        with pytest.raises(HazardError, match="no matching SetFlag"):
            WaitFlag(HardEvent.V_MTE3, 1)
        SetFlag(HardEvent.V_MTE3, 1)
    with pytest.raises(HazardError, match=r"SetFlag\(V_MTE3, 1\) x1 never waited for"):
        core.sanitizer.finish(core.flags)


def test_reuse_clobbers_are_caught_when_read_later():
    core = lngb.AICore(mode="checked")
    shape = (1, 8, 64)
    x = np.ones(shape, np.float32)
    dy, rfg = core.alloc(shape, np.float32), core.alloc(shape, np.float32)
    dy.write(x)
    rfg.write(x)
    g, b = core.alloc(64, np.float32), core.alloc(64, np.float32)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, 1024, 4, False)
    tmp = core.alloc(1024, np.uint8)
    lngb.LayerNormGradBeta(g, b, rfg, dy, tmp, tiling, is_reuse_source=True)
    out = core.alloc(64, np.float32)
    with core:
        PipeBarrier(PIPE_V)
    for clobbered in (dy, rfg):                          # documented, and CANN's actual one
        assert "nothing has written" in rejected(UninitializedReadError,
                                                 lambda: Add(out, clobbered, g, 64), core)
    Add(out, rfg[4 * 64], g, 64)                         # beyond oneCalSize: still defined


def test_a_replayed_check_restores_the_verified_state():
    x = np.random.default_rng(0).standard_normal((4, 8, 512)).astype(np.float32)
    first = lngb.emulate(x, x, mode="checked")
    again = lngb.emulate(x, x, mode="checked")
    assert [r.name for r in again.core.trace] == [r.name for r in first.core.trace]
    assert np.array_equal(again.core.sanitizer.initialised, first.core.sanitizer.initialised)
    assert again.core.sanitizer.initialised[:x.nbytes].all()


def test_flag_round_trips_order_vector_instructions():
    core = lngb.AICore(mode="checked")
    x, out = core.alloc(64, np.float32), core.alloc(64, np.float32)
    x.write(np.ones(64, np.float32))
    gm = lngb.GlobalTensor(np.zeros(64, np.float32))
    with core:
        for _ in range(3):   # a queue-style loop: V -> MTE3 -> V orders the Muls
            lngb.vector_ops.Muls(out, x, 2.0, 64)
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            DataCopy(gm, out, 64)
            SetFlag(HardEvent.MTE3_V, 0)
            WaitFlag(HardEvent.MTE3_V, 0)
        SetFlag(HardEvent.MTE2_V, 1)   # a flag that carries nothing about V
        WaitFlag(HardEvent.MTE2_V, 1)
        Mul(out, x, x, 64)
        rejected(HazardError, lambda: Add(out, out, x, 64), core)


def test_rejected_instruction_leaves_the_mask_register():
    core, a, b, c = checked_core()
    before = (core.mask_mode, core.mask_high, core.mask_low)
    rejected(UninitializedReadError,
             lambda: Add(c, core.alloc(64, np.float32), a, 33, 1, BinaryRepeatParams()), core)
    assert (core.mask_mode, core.mask_high, core.mask_low) == before


def test_a_recorded_kernel_must_wait_for_its_flags():
    core = lngb.AICore(mode="checked")

    def kernel():
        with core:
            SetFlag(HardEvent.V_MTE3, 2)
    with pytest.raises(HazardError, match="never waited for"):
        core.run_recorded("leaky-kernel", kernel)


def test_kernels_with_scalar_access_run_live_in_every_mode():
    results = []
    for mode in ("fast", "observed", "checked", "fast"):
        core = lngb.AICore(mode=mode)
        a, b = core.alloc(64, np.float32), core.alloc(64, np.float32)
        gm = np.arange(64, dtype=np.float32).view(np.uint8).copy()

        def kernel():
            with core:
                DataCopy(a, lngb.GlobalTensor.in_arena(gm, 0, np.float32, 64), 64)
                SetFlag(HardEvent.MTE2_S, 0)   # the scalar unit waits for the copy
                WaitFlag(HardEvent.MTE2_S, 0)
                a.SetValue(0, 99.0)
                lngb.vector_ops.Duplicate(b, float(a.GetValue(5)), 64)
        core.run_recorded("scalar-kernel", kernel, (gm,))
        results.append((a.read()[:2].tolist(), b.read()[0]))
    assert results == [([99.0, 1.0], 5.0)] * 4
