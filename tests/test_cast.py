"""Cast (float -> half in every round mode, half -> float) against the independent oracles of
tests/naive.py.

1. Golden tables, one named case per row (STYLE.md 9 edge cases that apply to Cast, plus
   ``full`` and ``specials``: overflow, ties, subnormals, NaN payloads, saturation), each run on
   the "fast", "observed" and "checked" paths (golden.check_spec: whole UB byte for byte).
2. Every round mode has rows, on the products that support it.
3. Hypothesis: random masks, repeats, strides, directions, round modes, saturation.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import EXEC_MODES
from golden import (DT_LABEL, EW, F2H_SPECIALS, F16, F32, H2F_SPECIALS, HYP, check_row,
                    check_spec, draw_mask, draw_strides, golden_mode_params, mask_rng, rand_mask, row)
from lngb.vector_ops import RoundMode

pytestmark = pytest.mark.jitted

GOLDEN = []
MASK_RNG = mask_rng()  # this module's bitwise masks

# ---- Cast -----------------------------------------------------------------------------------

for rm in RoundMode:
    def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
        row(GOLDEN, "Cast", "f32->f16", case, f"{rm.name}{'-' + variant if variant else ''}",
            EW("Cast", F16, src_dtype=F32, round_mode=rm.name, **kw), nop=nop, product=product,
            sat=sat)

    r("specials", "", form="count", count=len(F2H_SPECIALS) + 5, specials=(F2H_SPECIALS,))
    r("specials", "", form="count", count=len(F2H_SPECIALS), specials=(F2H_SPECIALS,), sat=True)
    r("specials", "sat_override", form="count", count=len(F2H_SPECIALS),
      specials=(F2H_SPECIALS,), sat_override=True)
    r("full", "random", form="count", count=640)
    r("partial_mask", "bitwise", mask=rand_mask(F32, MASK_RNG), repeat=2,
      strides=(1, 1, 4, 8))
    if rm in (RoundMode.CAST_NONE, RoundMode.CAST_ODD):
        r("specials", "", form="count", count=len(F2H_SPECIALS), specials=(F2H_SPECIALS,),
          product="atlas-inference")


def cast_rows(dt, sdt, rm):
    L = f"{DT_LABEL[sdt]}->{DT_LABEL[dt]}"
    contig = (1, 1, 2 * dt.itemsize, 2 * sdt.itemsize)

    def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
        row(GOLDEN, "Cast", L, case, variant, EW("Cast", dt, src_dtype=sdt, round_mode=rm, **kw),
            nop=nop, product=product, sat=sat)

    r("full", "", mask=64, repeat=3, strides=contig)
    r("full", "default_params", mask=64, repeat=2)
    r("partial_mask", "continuous", mask=37, repeat=3, strides=contig)
    r("partial_mask", "first_lanes_one_repeat", mask=37, repeat=1, strides=contig)
    r("partial_mask", "zero", mask=0, repeat=3, strides=contig, nop=True)
    r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(F32, MASK_RNG), repeat=2,
      strides=contig)
    r("counter_mask", "", form="counter", count=150, repeat=1, strides=contig)
    r("counter_mask", "placeholder", form="counter_ph", count=100, strides=contig)
    r("repeat_0", "", mask=64, repeat=0, strides=contig, nop=True)
    r("repeat_0", "count_0", form="count", count=0, nop=True)
    r("stride_gt_1", "", mask=64, repeat=3, strides=(2, 3, 19, 21))
    r("tail", "", form="count", count=3 * 64 + 13)
    r("tail", "short", form="count", count=3)


cast_rows(F16, F32, "CAST_RINT")
cast_rows(F32, F16, "CAST_NONE")
for variant, sp in (("", H2F_SPECIALS), ("random_bits", np.random.default_rng(7).integers(
        0, 1 << 16, size=2048, dtype=np.uint16).view(F16))):
    row(GOLDEN, "Cast", "f16->f32", "specials", variant,
        EW("Cast", F32, src_dtype=F16, form="count", count=len(sp), specials=(sp,)))
    row(GOLDEN, "Cast", "f16->f32", "specials", variant,
        EW("Cast", F32, src_dtype=F16, form="count", count=len(sp), specials=(sp,)), sat=True)


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)


def test_every_cast_round_mode_has_rows():
    narrowing = {g.spec.round_mode for g in GOLDEN if g.dtype == "f32->f16"}
    assert narrowing == {m.name for m in RoundMode}
    assert {g.product for g in GOLDEN if g.dtype == "f32->f16"} >= {"atlas-a2", "atlas-inference"}
    assert any(g.dtype == "f16->f32" for g in GOLDEN)


# =============================================================================================
# Hypothesis: random masks, repeats, strides, round modes, saturation


@HYP
@given(data=st.data())
def test_hypothesis_cast(data):
    narrowing = data.draw(st.booleans(), label="float->half")
    dt, sdt = (F16, F32) if narrowing else (F32, F16)
    rm = data.draw(st.sampled_from(list(RoundMode)), label="round mode") if narrowing \
        else RoundMode.CAST_NONE
    form, mask, count, repeat = draw_mask(data, 64, F32)
    blk, rep = draw_strides(data, 2)
    if data.draw(st.booleans(), label="count form") and form == "counter":
        form = "count"
    spec = EW("Cast", dt, src_dtype=sdt, round_mode=rm.name, form=form, mask=mask,
              repeat=repeat, count=count, strides=None if form == "count" else (*blk, *rep),
              sat_override=data.draw(st.sampled_from([None, True, False]), label="sat override"))
    check_spec(spec, sat=data.draw(st.booleans(), label="sat"),
               mode=data.draw(st.sampled_from(EXEC_MODES), label="mode"),
               seed=data.draw(st.integers(0, 2**32 - 1), label="seed"))
