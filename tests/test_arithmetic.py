"""Element-wise arithmetic (Add, Sub, Mul, Div, Max, Min, Adds, Muls, Maxs, Mins, Sqrt, Abs,
Relu) and Duplicate against the independent oracles of tests/naive.py.

1. Golden tables, one named case per row (STYLE.md 9: ``dst_eq_src0``, ``dst_eq_src1``,
   ``partial_mask``, ``counter_mask``, ``repeat_0``, ``stride_gt_1``, ``tail``, plus ``full``
   and ``specials``), each run on the "fast", "observed" and "checked" paths; the method is
   golden.check_spec (whole UB compared byte for byte).
2. Hypothesis: random masks, repeats, strides, aliasing, dtypes, saturation, products, scalars,
   and a destination overlapping its source across whole repeats.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lngb
import naive
from conftest import EXEC_MODES, fill_random, garbage_ub
from golden import (BIN_SPECIALS, DT_LABEL, ELEMENTWISE, EPR, EW, F16, F32, HYP, INF, NAN,
                    SCALAR_SRC_SPECIALS, SCALARS, check_row, check_spec, draw_mask, draw_strides,
                    first_difference, golden_mode_params, mask_rng, rand_mask, row)

pytestmark = pytest.mark.jitted

GOLDEN = []
MASK_RNG = mask_rng()  # this module's bitwise masks

# ---- Add / Sub / Mul ------------------------------------------------------------------------

for op in ("Add", "Sub", "Mul"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, marks=(), **kw):
            row(GOLDEN, op, L, case, variant, EW(op, dt, **kw), nop=nop, product=product,
                sat=sat, marks=marks)

        r("full", "", mask=E, repeat=3)
        r("full", "", mask=E, repeat=2, product="atlas-a3")
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 5, alias="src0")
        r("dst_eq_src0", "mask_form", mask=E, repeat=2, alias="src0")
        r("dst_eq_src1", "", mask=E - 3, repeat=2, alias="src1")
        r("dst_eq_src1", "count_form", form="count", count=2 * E + 5, alias="src1")
        r("dst_eq_src1", "full_mask", mask=E, repeat=2, alias="src1")
        r("dst_eq_src1", "counter_placeholder", form="counter_ph", count=E + 9, alias="src1")
        r("dst_eq_src1", "accumulate_rep0", mask=E, repeat=4, strides=(1, 1, 1, 0, 8, 0),
          alias="src1")
        r("partial_mask", "continuous", mask=E // 2 + 5, repeat=3)
        r("partial_mask", "first_lanes_one_repeat", mask=E - 3, repeat=1)
        r("partial_mask", "first_lane_one_repeat", mask=1, repeat=1)
        r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("partial_mask", "bitwise_high_only" if dt == F16 else "bitwise_one_lane",
          mask=(0, 1 << 63) if dt == F16 else (1 << 63, 0), repeat=2)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "bitwise_zero", mask=(0, 0), repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("counter_mask", "", form="counter", count=2 * E + 17, repeat=1)
        r("counter_mask", "repeat_arg_ignored", form="counter", count=E + 1, repeat=7)
        r("counter_mask", "strided", form="counter", count=2 * E + 3,
          strides=(2, 1, 3, 24, 8, 30))
        r("counter_mask", "placeholder", form="counter_ph", count=3 * E - 1)
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("repeat_0", "count_0", form="count", count=0, nop=True)
        r("stride_gt_1", "", mask=E, repeat=3, strides=(2, 3, 1, 20, 24, 9))
        r("stride_gt_1", "src_overlapping_repeats", mask=E, repeat=3, strides=(1, 1, 1, 8, 4, 2))
        r("stride_gt_1", "src_blk_0", mask=E, repeat=2, strides=(1, 0, 2, 8, 1, 16))
        r("tail", "", form="count", count=2 * E + E // 3)
        r("tail", "short", form="count", count=5)
        sp = BIN_SPECIALS[dt]
        r("specials", "", form="count", count=len(sp[0]) + 3, specials=sp)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, sat=True)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, product="atlas-350")
        if dt == F16:
            r("specials", "", form="count", count=len(sp[0]), specials=sp,
              product="atlas-inference")
            r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=2, specials=sp,
              sat=True)

# ---- Adds / Muls ----------------------------------------------------------------------------

for op in ("Adds", "Muls"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, scalar=1.75, **kw):
            row(GOLDEN, op, L, case, variant, EW(op, dt, scalar=scalar, **kw), nop=nop,
                product=product, sat=sat)

        r("full", "", mask=E, repeat=3, scalar=-2.5)
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 9, alias="src0")
        r("dst_eq_src0", "rep_0", mask=E, repeat=3, strides=(1, 1, 0, 0), alias="src0")
        r("partial_mask", "continuous", mask=E - 7, repeat=2)
        r("partial_mask", "first_lanes_one_repeat", mask=E - 3, repeat=1)
        r("partial_mask", "first_lane_one_repeat", mask=1, repeat=1)
        r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=3)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("counter_mask", "", form="counter", count=E + 11, repeat=1)
        r("counter_mask", "placeholder_strided", form="counter_ph", count=2 * E + 1,
          strides=(3, 2, 25, 17))
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("repeat_0", "count_0", form="count", count=0, nop=True)
        r("stride_gt_1", "", mask=E, repeat=3, strides=(2, 3, 17, 26))
        r("stride_gt_1", "src_blk_0", mask=E, repeat=2, strides=(1, 0, 8, 1))
        r("tail", "", form="count", count=3 * E - 5, scalar=0.3)
        src_sp = (SCALAR_SRC_SPECIALS[dt],)
        for label, scalar in SCALARS.items():
            r("specials", f"scalar_{label}", form="count", count=len(src_sp[0]) + 2,
              specials=src_sp, scalar=scalar)
        for label in ("inf", "nan", "big_70000"):
            r("specials", f"scalar_{label}", form="count", count=len(src_sp[0]),
              specials=src_sp, scalar=SCALARS[label], sat=True)
        if dt == F16:
            r("specials", "scalar_three", form="count", count=len(src_sp[0]), specials=src_sp,
              scalar=3.0, product="atlas-inference")

# ---- Duplicate ------------------------------------------------------------------------------

for dt in (F32, F16):
    E, L = EPR[dt], DT_LABEL[dt]

    def r(case, variant, nop=False, product="atlas-a2", sat=None, scalar=-3.25, marks=(), **kw):
        row(GOLDEN, "Duplicate", L, case, variant, EW("Duplicate", dt, scalar=scalar, **kw),
            nop=nop, product=product, sat=sat, marks=marks)

    r("full", "", mask=E, repeat=3)
    r("partial_mask", "continuous", mask=E // 3, repeat=3)
    r("partial_mask", "first_lanes_one_repeat", mask=E - 3, repeat=1)
    r("partial_mask", "first_lane_one_repeat", mask=1, repeat=1)
    r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=2)
    r("partial_mask", "zero", mask=0, repeat=2, nop=True)
    r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt, MASK_RNG), repeat=2)
    r("counter_mask", "", form="counter", count=2 * E - 1, repeat=1)
    r("counter_mask", "placeholder_strided", form="counter_ph", count=2 * E + 7,
      strides=(2, 20))
    r("repeat_0", "", mask=E, repeat=0, nop=True)
    r("repeat_0", "count_0", form="count", count=0, nop=True)
    r("stride_gt_1", "", mask=E, repeat=3, strides=(3, 25))
    r("stride_gt_1", "rep_0", mask=E // 2, repeat=3, strides=(1, 0))
    r("tail", "", form="count", count=E + E // 2 + 1)
    for label, scalar in SCALARS.items():
        r("specials", f"scalar_{label}", form="count", count=E + 3, scalar=scalar)
    if dt == F16:
        for label in ("inf", "neg_inf", "nan", "big_70000"):
            r("specials", f"scalar_{label}", form="count", count=E, scalar=SCALARS[label],
              sat=True)
        r("specials", "scalar_tenth", form="count", count=E, scalar=0.1, sat=True)


# ---- Div / Max / Min: the rows of Add, and Div flushing subnormals (div_sqrt="ftz") ---------

SUBNORMALS = {F32: ([1e-45, -3e-39, 1e-38, 2.0**-126, 5e-39, 0.0, 1.0, 6e-39, 1e30, -1e-40],
                    [1.0, 2.0, 3.0, 0.5, -1e-39, 1e-39, 1e-40, 1e20, 1e-10, 4.0]),
              F16: ([2**-24, -2**-20, 2**-14, 6e-5, 1.0, 0.0, 3.0, -2**-24, 60000.0, 0.5],
                    [1.0, 2.0, 3.0, 0.5, -2**-24, 2**-24, 2**-20, 1e3, 1e-4, 4.0])}

for op in ("Div", "Max", "Min"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
            row(GOLDEN, op, L, case, variant, EW(op, dt, **kw), nop=nop, product=product,
                sat=sat)

        r("full", "", mask=E, repeat=3)
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 5, alias="src0")
        r("dst_eq_src1", "", mask=E - 3, repeat=2, alias="src1")
        r("partial_mask", "continuous", mask=E // 2 + 5, repeat=3)
        r("partial_mask", "first_lanes_one_repeat", mask=E - 3, repeat=1)
        r("partial_mask", "first_lane_one_repeat", mask=1, repeat=1)
        r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("counter_mask", "", form="counter", count=2 * E + 17, repeat=1)
        r("counter_mask", "placeholder", form="counter_ph", count=3 * E - 1)
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("repeat_0", "count_0", form="count", count=0, nop=True)
        r("stride_gt_1", "", mask=E, repeat=3, strides=(2, 3, 1, 20, 24, 9))
        r("stride_gt_1", "src_blk_0", mask=E, repeat=2, strides=(1, 0, 2, 8, 1, 16))
        r("tail", "", form="count", count=2 * E + E // 3)
        sp = BIN_SPECIALS[dt]
        r("specials", "", form="count", count=len(sp[0]) + 3, specials=sp)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, sat=True)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, product="atlas-350")
        if op == "Div":
            r("specials", "subnormals", form="count", count=10, specials=SUBNORMALS[dt])
            r("specials", "subnormals_ftz", form="count", count=10, specials=SUBNORMALS[dt],
              ftz=True)
        if dt == F16:
            r("specials", "", form="count", count=len(sp[0]), specials=sp,
              product="atlas-inference")

# ---- Maxs / Mins ----------------------------------------------------------------------------

for op in ("Maxs", "Mins"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, scalar=0.25, **kw):
            row(GOLDEN, op, L, case, variant, EW(op, dt, scalar=scalar, **kw), nop=nop,
                product=product, sat=sat)

        r("full", "", mask=E, repeat=3, scalar=-0.5)
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 9, alias="src0")
        r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=3)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("counter_mask", "placeholder_strided", form="counter_ph", count=2 * E + 1,
          strides=(3, 2, 25, 17))
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("stride_gt_1", "", mask=E, repeat=3, strides=(2, 3, 17, 26))
        r("tail", "", form="count", count=3 * E - 5)
        src_sp = (SCALAR_SRC_SPECIALS[dt],)
        for label, scalar in SCALARS.items():
            r("specials", f"scalar_{label}", form="count", count=len(src_sp[0]) + 2,
              specials=src_sp, scalar=scalar)
        r("specials", "scalar_zero", form="count", count=len(src_sp[0]), specials=src_sp,
          scalar=0.0)

# ---- Sqrt / Abs / Relu ----------------------------------------------------------------------

UNARY_SPECIALS = {dt: (np.concatenate([np.asarray(SCALAR_SRC_SPECIALS[dt], dtype=dt),
                                       np.asarray([-4.0, -1e-3, 2.0, 0.5, 1e4], dtype=dt)]),)
                  for dt in (F32, F16)}

for op in ("Sqrt", "Abs", "Relu"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
            row(GOLDEN, op, L, case, variant, EW(op, dt, **kw), nop=nop, product=product,
                sat=sat)

        r("full", "", mask=E, repeat=3)
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 9, alias="src0")
        r("dst_eq_src0", "rep_0", mask=E, repeat=3, strides=(1, 1, 0, 0), alias="src0")
        r("partial_mask", "continuous", mask=E - 7, repeat=2)
        r("partial_mask", "first_lanes_one_repeat", mask=E - 3, repeat=1)
        r("partial_mask", "first_lane_one_repeat", mask=1, repeat=1)
        r("partial_mask", "bitwise", mask=rand_mask(dt, MASK_RNG), repeat=3)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt, MASK_RNG), repeat=2)
        r("counter_mask", "", form="counter", count=E + 11, repeat=1)
        r("counter_mask", "placeholder_strided", form="counter_ph", count=2 * E + 1,
          strides=(3, 2, 25, 17))
        r("repeat_0", "", mask=E, repeat=0, nop=True)
        r("repeat_0", "count_0", form="count", count=0, nop=True)
        r("stride_gt_1", "", mask=E, repeat=3, strides=(2, 3, 17, 26))
        r("tail", "", form="count", count=3 * E - 5)
        sp = UNARY_SPECIALS[dt]
        r("specials", "", form="count", count=len(sp[0]) + 2, specials=sp)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, sat=True)
        r("specials", "", form="count", count=len(sp[0]), specials=sp, product="atlas-350")
        if op == "Sqrt":
            sub = (np.asarray(SUBNORMALS[dt][0], dtype=dt),)
            r("specials", "subnormals", form="count", count=10, specials=sub)
            r("specials", "subnormals_ftz", form="count", count=10, specials=sub, ftz=True)


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)


# =============================================================================================
# Hypothesis: random masks, repeats, strides, aliasing, dtypes, saturation


@HYP
@given(data=st.data())
def test_hypothesis_binary(data):
    op = data.draw(st.sampled_from(["Add", "Mul", "Sub", "Div", "Max", "Min"]), label="op")
    dt = data.draw(st.sampled_from([F32, F16]), label="dtype")
    form, mask, count, repeat = draw_mask(data, EPR[dt], dt)
    blk, rep = draw_strides(data, 3)
    alias = data.draw(st.sampled_from([None, "src0", "src1"]), label="alias")
    if alias:  # dst is that source exactly: same block and repeat strides
        k = int(alias[-1]) + 1
        blk[0], rep[0] = blk[k], rep[k]
    if data.draw(st.booleans(), label="count form") and form == "counter":
        form, blk, rep, alias = "count", [1] * 3, [8] * 3, alias
    spec = EW(op, dt, form=form, mask=mask, repeat=repeat, count=count, alias=alias,
              strides=None if form == "count" else (*blk, *rep))
    check_spec(spec, product=data.draw(st.sampled_from(["atlas-a2", "atlas-350"])),
               sat=data.draw(st.booleans(), label="sat"),
               mode=data.draw(st.sampled_from(EXEC_MODES), label="mode"),
               seed=data.draw(st.integers(0, 2**32 - 1), label="seed"))


@HYP
@given(data=st.data())
def test_hypothesis_adds_muls(data):
    op = data.draw(st.sampled_from(["Adds", "Muls", "Maxs", "Mins"]), label="op")
    dt = data.draw(st.sampled_from([F32, F16]), label="dtype")
    form, mask, count, repeat = draw_mask(data, EPR[dt], dt)
    blk, rep = draw_strides(data, 2)
    alias = data.draw(st.sampled_from([None, "src0"]), label="alias")
    if alias:
        blk[0], rep[0] = blk[1], rep[1]
    scalar = data.draw(st.one_of(st.floats(-1e5, 1e5, width=32),
                                 st.sampled_from([-0.0, INF, NAN, 70000.0, 1e-8])),
                       label="scalar")
    spec = EW(op, dt, form=form, mask=mask, repeat=repeat, count=count, alias=alias,
              scalar=scalar, strides=(*blk, *rep))
    check_spec(spec, sat=data.draw(st.booleans(), label="sat"),
               mode=data.draw(st.sampled_from(EXEC_MODES), label="mode"),
               seed=data.draw(st.integers(0, 2**32 - 1), label="seed"))


@HYP
@given(data=st.data())
def test_hypothesis_cross_repeat_overlap(data):
    """dst and a source in one tensor at different whole-repeat offsets: no overlap inside a
    repeat (accepted), but later repeats read what earlier ones wrote, in repeat order."""
    dt = data.draw(st.sampled_from([F32, F16]), label="dtype")
    E = EPR[dt]
    core = lngb.AICore("atlas-a2", mode=data.draw(st.sampled_from(EXEC_MODES)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    garbage_ub(core, rng)
    t = core.alloc(16 * E, dt)
    other = core.alloc(16 * E, dt)
    fill_random(core, t, rng)
    fill_random(core, other, rng)
    shift = data.draw(st.integers(1, 4), label="shift in repeats") * E
    forward = data.draw(st.booleans(), label="dst after src")
    dst, src = (t[shift], t) if forward else (t, t[shift])
    count = data.draw(st.integers(1, 16 * E - shift), label="count")
    op = data.draw(st.sampled_from(["Add", "Sub", "Mul"]), label="op")
    src0, src1 = (src, other) if data.draw(st.booleans(), label="as src0") else (other, src)
    before = core.ub[:core.ub_size].copy()
    expected = naive.binary(op, before, dt, dst.address, src0.address, src1.address,
                            mode="counter", count=count)
    with np.errstate(over="ignore", invalid="ignore"):
        ELEMENTWISE[op](dst, src0, src1, count)
    assert np.array_equal(core.ub[:core.ub_size], expected), first_difference(
        core.ub[:core.ub_size], expected)
