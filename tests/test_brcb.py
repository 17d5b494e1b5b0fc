"""Brcb (each of 8 source elements per repeat fills a 32-byte block of dst) and DuplicateLane (a
vector register filled with one element) against the independent oracles of tests/naive.py:
golden rows on the "fast", "observed" and "checked" paths, and their checks."""
import numpy as np
import pytest
from conftest import rejected

import lngb
from golden import BRCB, DT_LABEL, F16, F32, LANE, check_row, golden_mode_params, row
from lngb.vector_ops import Brcb, BrcbRepeatParams, DuplicateLane, MaskMode

pytestmark = pytest.mark.jitted

GOLDEN = []

for dt in (F32, F16):
    L = DT_LABEL[dt]

    def r(case, variant, nop=False, **kw):
        row(GOLDEN, "Brcb", L, case, variant, BRCB(dt, **kw), nop=nop)

    r("full", "", repeat=3)
    r("repeat_0", "", repeat=0, nop=True)
    r("stride_gt_1", "layernorm_grad_columns", repeat=2, dst_blk=2, dst_rep=16)   # H = 16 floats
    r("stride_gt_1", "blk_0_walks_as_1", repeat=2, dst_blk=0, dst_rep=8)
    r("stride_gt_1", "rep_0", repeat=3, dst_blk=1, dst_rep=0)
    r("tail", "source_view", repeat=5, src_offset=3 * 32 // dt.itemsize)   # 3 blocks in
    r("specials", "wide_strides", repeat=2, dst_blk=9, dst_rep=3)

    def lane(case, variant, **kw):
        row(GOLDEN, "DuplicateLane", L, case, variant, LANE(dt, **kw))

    lane("full", "from_ub")
    lane("tail", "ub_element_13", src_offset=13)
    lane("full", "from_register", src_reg=5, src_offset=0)
    lane("tail", "register_lane_7_in_place", src_reg=3, dst_reg=3, src_offset=7)
    for k, special in enumerate((-0.0, float("inf"), float("nan"))):
        lane("specials", f"bits_{k}", specials=([special],))


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)


def test_brcb_resets_the_mask_register_and_refuses_overlap():
    core = lngb.AICore()
    src, dst = core.alloc(512, F32), core.alloc(512, F32)
    src.write(np.arange(512, dtype=F32))
    with core:
        lngb.vector_ops.SetMaskCount()
        lngb.vector_ops.SetVectorMask(0, 8, dtype=F32, mode=MaskMode.COUNTER)
        Brcb(dst, src, 1, BrcbRepeatParams(1, 8))
        assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.COUNTER,
                                                                   2**64 - 1, 2**64 - 1)
        assert "overlap" in rejected(lngb.InvalidArgumentError,
                                     lambda: Brcb(src, src[8], 1, BrcbRepeatParams()), core)
        assert "outside its valid range" in rejected(
            lngb.InvalidArgumentError, lambda: Brcb(dst, src, 256, BrcbRepeatParams()), core)
        assert "touches UB bytes" in rejected(
            lngb.OutOfBoundsError, lambda: Brcb(dst, src, 9, BrcbRepeatParams()), core)


def test_duplicate_lane_needs_a_register_destination_and_leaves_the_mask_register():
    core = lngb.AICore(product="atlas-350")
    src, dst = core.alloc(64, F32), core.alloc(64, F32)
    src.write(np.arange(64, dtype=F32))
    with core:
        lngb.vector_ops.SetVectorMask(0, 5, dtype=F32)
        DuplicateLane(core.vreg(31, F32), src[9])
        assert core.vreg(31, F32).read().tolist() == [9.0] * 64
        assert (core.mask_high, core.mask_low) == (0, 5)
        assert "vector register" in rejected(lngb.InvalidArgumentError,
                                             lambda: DuplicateLane(dst, src), core)
        assert "share one dtype" in rejected(
            lngb.InvalidArgumentError, lambda: DuplicateLane(core.vreg(1, F16), src), core)
