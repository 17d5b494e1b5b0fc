"""The reductions (BlockReduceSum, WholeReduceSum, PairReduceSum) against the independent
oracles of tests/naive.py.

1. Golden tables, one named case per row (STYLE.md 9 edge cases that apply, plus ``full`` and
   ``specials``), on the A2/A3 family and the 950 where they differ, each run on the "fast",
   "observed" and "checked" paths (golden.check_spec: whole UB byte for byte).
2. Saturation mode where a group has one active lane.
3. Hypothesis: random masks, repeats, strides, dtypes, products, saturation.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lngb
from conftest import EXEC_MODES, garbage_ub
from golden import (DT_LABEL, EPR, F16, F32, HYP, INF, NAN, RED, REDUCTIONS, check_row,
                    check_spec, draw_mask, first_difference, golden_mode_params, reduce_specials, row)

pytestmark = pytest.mark.jitted

GOLDEN = []

# ---- Reductions -----------------------------------------------------------------------------

# bitwise masks with whole blocks / pairs / repeats switched off, per dtype
RED_MASKS = {
    F32: {"blocks_off": (0x00FF00FF000000FF, 0), "pairs_off": (0x3333_0000_F0F0_3333, 0),
          "single_lanes": (0x5555_5555_5555_5555, 0)},
    F16: {"blocks_off": (0x0000FFFF0000FFFF, 0xFFFF00000000FFFF),
          "pairs_off": (0x3333_0000_F0F0_3333, 0x0000_3333_0F0F_0000),
          "single_lanes": (0x5555_5555_5555_5555, 0xAAAA_AAAA_AAAA_AAAA)},
}

for instr in REDUCTIONS:
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, both=False, **kw):
            row(GOLDEN, instr, L, case, variant, RED(instr, dt, **kw), nop=nop, product=product,
                sat=sat)
            if both:  # the 950 writes 0 where A2/A3 leave fully masked groups untouched
                row(GOLDEN, instr, L, case, variant, RED(instr, dt, **kw), product="atlas-350")

        r("full", "", mask=E, repeat=3)
        r("full", "", mask=E, repeat=3, product="atlas-inference")
        r("dst_eq_src0", "in_place", mask=E, repeat=3, alias=True)
        for name, m in RED_MASKS[dt].items():
            r("partial_mask", f"bitwise_{name}", mask=m, repeat=2, both=True)
        r("partial_mask", "continuous", mask=E // 2 + 3, repeat=2, both=True)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=RED_MASKS[dt]["blocks_off"],
          repeat=2, both=True)
        r("counter_mask", "", form="counter", count=2 * E + 20, repeat=1, both=True)
        r("counter_mask", "placeholder", form="counter_ph", count=E + 33, both=True)
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("repeat_0", "", mask=E, repeat=0, nop=True, product="atlas-350")
        r("stride_gt_1", "", mask=E, repeat=3, dst_rep=2, src_blk=2, src_rep=20)
        r("stride_gt_1", "src_blk_0_rep_0", mask=E, repeat=3, dst_rep=3, src_blk=0, src_rep=0)
        r("stride_gt_1", "partial", mask=RED_MASKS[dt]["pairs_off"], repeat=3, dst_rep=5,
          src_blk=3, src_rep=9, both=True)
        r("tail", "", form="counter", count=3 * E - 5, repeat=1, both=True)
        r("tail", "short", form="counter", count=7, repeat=1, both=True)
        r("specials", "", mask=E, repeat=1, specials=reduce_specials(dt), both=True)
        r("specials", "", mask=E, repeat=1, specials=reduce_specials(dt), sat=True)
        if instr == "WholeReduceSum":
            r("full", "dst_elem_aligned", mask=E, repeat=3, dst_offset=3, dst_rep=2)
        if instr == "BlockReduceSum" and dt == F16:
            r("full", "dst_16B_aligned", mask=E, repeat=3, dst_offset=8)

row(GOLDEN, "BlockReduceSum", "f32", "partial_mask", "zero",
    RED("BlockReduceSum", F32, mask=0, repeat=2), product="atlas-350", nop=True)


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)


# =============================================================================================
# Reductions in saturation mode where a group has one active lane: the lone lane passes the
# tree unchanged, but every half result is stored saturated (docs/fidelity.md)


LONE_LANE_MASKS = {  # every output group gets exactly one active lane
    "BlockReduceSum": [0x0001_0001_0001_0001] * 2,
    "WholeReduceSum": [1 << 5, 0],
    "PairReduceSum": [0x5555_5555_5555_5555] * 2,
}


@pytest.mark.parametrize("instr", list(REDUCTIONS))
@pytest.mark.parametrize("value,sat_bits", [(INF, 0x7BFF), (-INF, 0xFBFF), (NAN, 0x0000)])
def test_reduce_sat_single_active_lane_is_saturated(instr, value, sat_bits, mode):
    core = lngb.AICore("atlas-a2", mode=mode, sat_mode=True)
    garbage_ub(core, np.random.default_rng(9))
    src, dst = core.alloc(128, F16), core.alloc(128, F16)
    src.write(np.full(128, value, dtype=F16))
    mask = LONE_LANE_MASKS[instr]
    api, oracle = REDUCTIONS[instr]
    before = core.ub[:core.ub_size].copy()
    expected = oracle(before, F16, dst.address, src.address, mask=mask, repeat=1, sat=True)
    n = {"BlockReduceSum": 8, "WholeReduceSum": 1, "PairReduceSum": 64}[instr]
    assert (expected[dst.address:dst.address + 2 * n].view(np.uint16) == sat_bits).all()
    if instr == "WholeReduceSum":
        api(dst, src, mask, 1, 1, 1, 8)
    else:
        api(dst, src, 1, mask, 1, 1, 8)
    assert np.array_equal(core.ub[:core.ub_size], expected), first_difference(
        core.ub[:core.ub_size], expected)


# =============================================================================================
# Hypothesis: random masks, repeats, strides, dtypes, products, saturation


@HYP
@given(data=st.data())
def test_hypothesis_reductions(data):
    instr = data.draw(st.sampled_from(list(REDUCTIONS)), label="instr")
    dt = data.draw(st.sampled_from([F32, F16]), label="dtype")
    form, mask, count, repeat = draw_mask(data, EPR[dt], dt)
    spec = RED(instr, dt, form=form, mask=mask, repeat=repeat, count=count,
               dst_rep=data.draw(st.integers(0, 16), label="dst_rep"),
               src_blk=data.draw(st.integers(1, 3), label="src_blk"),
               src_rep=data.draw(st.integers(0, 16), label="src_rep"))
    check_spec(spec, product=data.draw(st.sampled_from(["atlas-a2", "atlas-350",
                                                        "atlas-inference"]), label="product"),
               sat=data.draw(st.sampled_from([None, True]), label="sat"),
               mode=data.draw(st.sampled_from(EXEC_MODES), label="mode"),
               seed=data.draw(st.integers(0, 2**32 - 1), label="seed"))
