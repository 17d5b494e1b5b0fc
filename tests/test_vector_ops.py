"""The vector instructions of lngb.vector_ops against the independent oracles of tests/naive.py.

1. Golden tables, one per instruction, one named case per row (STYLE.md 9: ``dst_eq_src0``,
   ``dst_eq_src1``, ``partial_mask``, ``counter_mask``, ``repeat_0``, ``stride_gt_1``, ``tail``,
   plus ``full`` and ``specials``), each run on the "fast" and the "observed" path. Method: a
   fresh core, the whole UB filled with random bytes (so lanes that must stay untouched are
   visibly untouched), random finite values written into the sources, ``before = core.ub.copy()``,
   the oracle run on ``before``, the instruction run, the WHOLE UB (vector registers included)
   compared byte for byte.
2. Every name in ``INSTRUCTIONS`` has golden rows, with the applicable edge-case names.
3. Hypothesis: random masks, repeats, strides, aliasing, dtypes, saturation, products.
4. Errors: the specific class, and no byte of the UB changed (validate, then mutate).
5. The mask register: what count-form and mask-form calls leave behind; counter mode.
6. The CANN row loop of LayerNormGradBeta typed line by line gives the oracle's bits.
"""
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lngb
from lngb.vector_ops import (INSTRUCTIONS, MASK_PLACEHOLDER, PIPE_S, PIPE_V, Add, Adds,
                             BinaryRepeatParams, BlockReduceSum, Cast, DataCopy, DataCopyParams,
                             Duplicate, HardEvent, MaskMode, Mul, Muls, PairReduceSum,
                             PipeBarrier, ResetMask, RoundMode, SetFlag, SetMaskCount,
                             SetMaskNorm, SetVectorMask, Sub, UnaryRepeatParams, WaitFlag,
                             WholeReduceSum)

import naive
from conftest import EXEC_MODES, fill_random, garbage_ub, put, random_finite, seed_of

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
EPR = {F32: 64, F16: 128}
DT_LABEL = {F32: "f32", F16: "f16"}
FULL64 = (1 << 64) - 1
INF, NAN = float("inf"), float("nan")
FMAX = float(np.finfo(np.float32).max)
EDGE_CASES = ("dst_eq_src0", "dst_eq_src1", "partial_mask", "counter_mask", "repeat_0",
              "stride_gt_1", "tail")
TENSOR_BYTES = 8192          # every operand tensor; >= any footprint used below
RED_DST_BYTES = 16384        # PairReduceSum with dstRepStride 16 over 8 repeats needs 14.5 KiB
ELEMENTWISE = {"Add": Add, "Sub": Sub, "Mul": Mul, "Adds": Adds, "Muls": Muls}
REDUCTIONS = {"BlockReduceSum": (BlockReduceSum, naive.block_reduce_sum),
              "WholeReduceSum": (WholeReduceSum, naive.whole_reduce_sum),
              "PairReduceSum": (PairReduceSum, naive.pair_reduce_sum)}
MASK_RNG = np.random.default_rng(20240611)  # fixed bitwise masks used by the tables


def rand_mask(dt, rng=MASK_RNG):
    """A random bitwise [mask0, mask1] (mask1 = 0 for float), never all zero."""
    m0 = int(rng.integers(1, 1 << 63)) << 1 | 1
    m1 = int(rng.integers(0, 1 << 63)) << 1 if dt == F16 else 0
    return (m0, m1)


def mask_words(mask, epr):
    """(high, low) register words of an int (continuous) or (mask0, mask1) mask."""
    if isinstance(mask, int):
        bits = (1 << min(mask, epr)) - 1
        return bits >> 64, bits & FULL64
    return mask[1], mask[0]


def f32v(*xs):
    return np.array(xs, dtype=np.float64).astype(F32)


# =============================================================================================
# Specs: one description of an instruction call, turned into (run, oracle) against a core


@dataclass(frozen=True)
class EW:
    """An element-wise call: Add Sub Mul Adds Muls Duplicate Cast.

    form: "count"      Op(dst, ..., count)                              (count form)
          "mask"       Op(dst, ..., mask, repeat, params)                (normal mode)
          "counter"    SetMaskCount; Op(dst, ..., count, repeat, params); SetMaskNorm
          "counter_ph" SetMaskCount; SetVectorMask(0, count, COUNTER); Op(MASK_PLACEHOLDER)
          "normal_ph"  SetVectorMask(high, low); Op(MASK_PLACEHOLDER, is_set_mask=False)
    strides: binary 6, unary/cast 4, Duplicate 2 (dstBlockStride, dstRepeatStride).
    """
    instr: str
    dtype: np.dtype
    form: str = "mask"
    mask: object = None
    repeat: int = 1
    count: int = None
    strides: tuple = None
    alias: str = None            # "src0" / "src1": dst is that source tensor
    scalar: float = None
    src_dtype: np.dtype = None   # Cast: the source dtype
    round_mode: str = "CAST_NONE"
    specials: tuple = ()         # arrays written at the start of src0 (and src1)
    sat_override: bool = None    # Cast(..., sat_mode=...)

    @property
    def n_src(self):
        return {"Duplicate": 0, "Adds": 1, "Muls": 1, "Cast": 1}.get(self.instr, 2)

    @property
    def sdt(self):
        return self.src_dtype if self.src_dtype is not None else self.dtype

    @property
    def epr(self):
        return 256 // max(self.dtype.itemsize, self.sdt.itemsize)

    def default_strides(self):
        if self.form == "count" and self.instr == "Cast":
            return (1, 1, 2 * self.dtype.itemsize, 2 * self.sdt.itemsize)
        return {0: (1, 8), 1: (1, 1, 8, 8), 2: (1, 1, 1, 8, 8, 8)}[self.n_src]


@dataclass(frozen=True)
class RED:
    """A reduction call (BlockReduceSum / WholeReduceSum / PairReduceSum)."""
    instr: str
    dtype: np.dtype
    form: str = "mask"           # "mask", "counter", "counter_ph", "normal_ph" (as EW)
    mask: object = None
    repeat: int = 1
    count: int = None
    dst_rep: int = 1
    src_blk: int = 1
    src_rep: int = 8
    alias: bool = False          # dst is src (in place)
    dst_offset: int = 0          # elements (reductions allow 2/4 B or 16 B aligned dst)
    specials: tuple = ()

    @property
    def epr(self):
        return EPR[self.dtype]


def _mask_prologue(form, mask, count, epr, dtype):
    """Mask-register calls before the instruction (inside `with core:`)."""
    if form in ("counter", "counter_ph"):
        SetMaskCount()
        if form == "counter_ph":
            SetVectorMask(0, count, dtype=dtype, mode=MaskMode.COUNTER)
    elif form == "normal_ph":
        high, low = mask_words(mask, epr)
        SetVectorMask(high, low, dtype=dtype)


def _mask_epilogue(form):
    if form in ("counter", "counter_ph"):
        SetMaskNorm()
    if form in ("counter_ph", "normal_ph"):
        ResetMask()


def _mask_call_args(form, mask, count, repeat):
    """(mask argument, repeat, keyword arguments) of a mask-form call."""
    if form == "mask":
        return mask, repeat, {}
    if form == "counter":
        return count, repeat, {}
    return MASK_PLACEHOLDER, repeat, {"is_set_mask": False}


def _oracle_mask(form, mask, count, repeat):
    if form in ("count", "counter", "counter_ph"):
        return dict(mode="counter", count=count, repeat=repeat)
    return dict(mode="normal", mask=mask, repeat=repeat)


def _write_sources(srcs, specials, rng):
    for k, src in enumerate(srcs):
        fill_random(src.core, src, rng)
        if k < len(specials):
            put(src, specials[k])


def build_ew(spec, core, rng):
    dt, sdt = spec.dtype, spec.sdt
    srcs = [core.alloc(TENSOR_BYTES // sdt.itemsize, sdt) for _ in range(spec.n_src)]
    dst = core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    _write_sources(srcs, spec.specials, rng)
    if spec.alias:
        dst = srcs[int(spec.alias[-1])]
    strides = spec.strides or spec.default_strides()
    sat = core.sat_mode if spec.sat_override is None else spec.sat_override
    instr = spec.instr

    def run():
        _mask_prologue(spec.form, spec.mask, spec.count, spec.epr, F32 if spec.epr == 64 else F16)
        if spec.form == "count":
            margs, kw = (spec.count,), {}
        else:
            m, rep, kw = _mask_call_args(spec.form, spec.mask, spec.count, spec.repeat)
            if instr == "Duplicate":
                margs = (m, rep, *strides)
            elif spec.n_src == 2:
                margs = (m, rep, BinaryRepeatParams(*strides))
            else:
                margs = (m, rep, UnaryRepeatParams(*strides))
        if instr == "Duplicate":
            Duplicate(dst, spec.scalar, *margs, **kw)
        elif instr == "Cast":
            if spec.sat_override is not None:
                kw["sat_mode"] = spec.sat_override
            Cast(dst, srcs[0], RoundMode[spec.round_mode], *margs, **kw)
        elif spec.n_src == 1:
            ELEMENTWISE[instr](dst, srcs[0], spec.scalar, *margs, **kw)
        else:
            ELEMENTWISE[instr](dst, srcs[0], srcs[1], *margs, **kw)
        _mask_epilogue(spec.form)

    def oracle(ub):
        m = _oracle_mask(spec.form, spec.mask, spec.count, spec.repeat)
        if instr == "Duplicate":
            return naive.duplicate(ub, dt, dst.address, spec.scalar, dst_blk=strides[0],
                                   dst_rep=strides[1], **m)
        if instr == "Cast":
            return naive.cast(ub, dt, sdt, dst.address, srcs[0].address, spec.round_mode,
                              strides=strides, sat=sat, **m)
        if spec.n_src == 1:
            return naive.unary_scalar(instr, ub, dt, dst.address, srcs[0].address, spec.scalar,
                                      strides=strides, sat=sat, **m)
        return naive.binary(instr, ub, dt, dst.address, srcs[0].address, srcs[1].address,
                            strides=strides, sat=sat, **m)

    return run, oracle


def build_red(spec, core, rng):
    dt = spec.dtype
    src = core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    dst = core.alloc(RED_DST_BYTES // dt.itemsize, dt)
    _write_sources([src], spec.specials, rng)
    if spec.alias:
        dst = src
    if spec.dst_offset:
        dst = dst[spec.dst_offset]
    api, oracle_fn = REDUCTIONS[spec.instr]
    family = "950" if core.product.kernel_path == "regbase" else "a2"
    sat = core.sat_mode

    def run():
        _mask_prologue(spec.form, spec.mask, spec.count, spec.epr, dt)
        m, rep, kw = _mask_call_args(spec.form, spec.mask, spec.count, spec.repeat)
        if spec.instr == "WholeReduceSum":   # mask before repeatTime
            api(dst, src, m, rep, spec.dst_rep, spec.src_blk, spec.src_rep, **kw)
        else:
            api(dst, src, rep, m, spec.dst_rep, spec.src_blk, spec.src_rep, **kw)
        _mask_epilogue(spec.form)

    def oracle(ub):
        return oracle_fn(ub, dt, dst.address, src.address, dst_rep=spec.dst_rep,
                         src_blk=spec.src_blk, src_rep=spec.src_rep, sat=sat, family=family,
                         **_oracle_mask(spec.form, spec.mask, spec.count, spec.repeat))

    return run, oracle


@dataclass(frozen=True)
class COPY:
    """DataCopy. direction: "gm_to_ub", "ub_to_gm", "ub_to_ub"; count or DataCopyParams fields."""
    direction: str
    dtype: np.dtype
    count: int = None
    params: tuple = None         # (blockCount, blockLen, srcStride, dstStride)
    src_offset: int = 0          # elements (a view of the source)
    dst_offset: int = 0


def build_copy(spec, core, rng):
    dt = spec.dtype
    n = TENSOR_BYTES // dt.itemsize
    size = dt.itemsize

    def side(kind):
        if kind == "gm":
            arr = random_finite(dt, n, rng)
            return arr, lngb.GlobalTensor(arr)
        t = core.alloc(n, dt)
        fill_random(core, t, rng)
        return None, t

    src_kind, dst_kind = {"gm_to_ub": ("gm", "ub"), "ub_to_gm": ("ub", "gm"),
                          "ub_to_ub": ("ub", "ub")}[spec.direction]
    src_arr, src = side(src_kind)
    dst_arr, dst = side(dst_kind)
    if dst_kind == "ub":  # the UB destination keeps the garbage bytes
        garbage_ub_range(core, dst, rng)
    if spec.src_offset:
        src = src[spec.src_offset]
    if spec.dst_offset:
        dst = dst[spec.dst_offset]
    arg = DataCopyParams(*spec.params) if spec.params else spec.count
    gm_arr = src_arr if src_arr is not None else dst_arr
    gm_bytes = None if gm_arr is None else gm_arr.view(np.uint8)
    gm_before = None if gm_arr is None else gm_bytes.copy()

    def addr(t):
        return t.offset if isinstance(t, lngb.GlobalTensor) else t.address

    def run():
        DataCopy(dst, src, arg)

    def oracle(ub):
        src_buf = gm_before if src_kind == "gm" else ub
        dst_buf = gm_before if dst_kind == "gm" else ub
        if spec.params:
            out = naive.data_copy_params(dst_buf, addr(dst), src_buf, addr(src), *spec.params)
        else:
            out = naive.data_copy_count(dst_buf, addr(dst), src_buf, addr(src), spec.count, size)
        if dst_kind == "gm":
            return ub, [(gm_bytes, out)]
        return out, ([] if gm_bytes is None else [(gm_bytes, gm_before)])

    return run, oracle


def garbage_ub_range(core, tensor, rng):
    """Random bytes over one UB tensor (a DataCopy destination: untouched bytes stay garbage)."""
    core.ub[tensor.address:tensor.address + tensor.nbytes] = rng.integers(
        0, 256, size=tensor.nbytes, dtype=np.uint8)


BUILDERS = {EW: build_ew, RED: build_red, COPY: build_copy}


# =============================================================================================
# The golden table


@dataclass(frozen=True)
class Row:
    instr: str
    dtype: str                   # "f32", "f16", "f32->f16", ...
    case: str                    # one of EDGE_CASES, or "full" / "specials"
    variant: str
    spec: object
    product: str = "atlas-a2"
    sat: bool = None             # AICore(sat_mode=...); None = the product's default
    nop: bool = False            # the row must change no byte
    marks: tuple = field(default=(), compare=False)

    @property
    def id(self):
        parts = [self.instr, self.dtype, self.case]
        if self.variant:
            parts.append(self.variant)
        if self.product != "atlas-a2":
            parts.append(self.product)
        if self.sat:
            parts.append("sat")
        return "-".join(parts)


GOLDEN = []


def row(instr, dtype, case, variant, spec, **kw):
    GOLDEN.append(Row(instr, dtype, case, variant, spec, **kw))


# ---- special values -------------------------------------------------------------------------

BIN_SPECIALS = {
    F32: (
        [-0.0, -0.0, 0.0, INF, INF, -INF, NAN, 1.0, 0.0, FMAX, FMAX, 1e-45, 2**-126,
         2**-130, 1.0, 1 + 2**-23, 2.0**24, 3e38, 1e-30, -2**-126, -NAN, 0.1],
        [-0.0, 0.0, -0.0, -INF, INF, 1.0, 1.0, NAN, INF, FMAX, -FMAX, 1e-45, -2**-127,
         3.0, 2**-24, 2**-24, 1.0, 10.0, 1e-30, 0.5, -0.0, 0.2]),
    F16: (
        [-0.0, -0.0, 0.0, INF, INF, -INF, NAN, 1.0, 0.0, 65504, 65504, 65504, 2048, 2048,
         -2048, 2**-24, 2**-24, 2**-14, 300, 1e-3, 2**-24, 3 * 2**-24, -60000, 0.1, 65504],
        [-0.0, 0.0, -0.0, -INF, INF, 1.0, 1.0, NAN, INF, 65504, 16, 15.99, 1.0, 3.0,
         -1.0, 2**-24, -2**-24, -2**-24, 300, 1e-3, 0.5, 0.5, -60000, 0.2, -1.0]),
}
SCALAR_SRC_SPECIALS = {
    F32: [-0.0, 0.0, INF, -INF, NAN, FMAX, -FMAX, 1e-45, 2**-126, 1.0, -1.0, 2.0**24, 0.1],
    F16: [-0.0, 0.0, INF, -INF, NAN, 65504, -65504, 2**-24, 2**-14, 1.0, -1.0, 2048, 0.1,
          60000],
}
SCALARS = {"neg_zero": -0.0, "inf": INF, "neg_inf": -INF, "nan": NAN, "tenth": 0.1,
           "big_70000": 70000.0, "tiny_4e-8": 4e-8, "three": 3.0}
F2H_SPECIALS = f32v(
    0.0, -0.0, INF, -INF, NAN, -NAN, 65504, np.nextafter(F32.type(65520), F32.type(0)), 65520,
    65536, 1e10, -65520, -1e10, 65505, 2049, 2051, -2049, -2051, 2**-24, 2**-25, 3 * 2**-25,
    2**-26, -2**-25, 1e-45, 2**-14, 2**-14 - 2**-25, 0.1, 1 / 3, -1 / 3, 1 + 2**-11,
    1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, 1 + 2**-11 - 2**-20, -(1 + 2**-11), 5e-8, 6e4,
    -5e-8, 1.5 * 2**-24, -1.5 * 2**-24)
H2F_SPECIALS = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D55,
                         0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00,
                         0x3555, 0xB555], dtype=np.uint16).view(F16)


def reduce_specials(dt):
    """One repeat of source lanes, block by block: overflow in the tree, inf-inf, signed zeros,
    the doc example, subnormals, NaN, ties."""
    if dt == F16:
        blocks = [[65504] * 16, [INF, -INF] * 8, [-0.0] * 16, [-0.0, 0.0] * 8,
                  [60000, 60000, -30000, 100] + [0.0] * 12, [2**-24] * 16,
                  [NAN] + [1.0] * 15, [2048] + [1.0] * 15]
    else:
        blocks = [[FMAX] * 8, [INF, -INF] * 4, [-0.0] * 8, [-0.0, 0.0] * 4,
                  [1.0] + [2**-24] * 7, [1e-45] * 8, [NAN] + [1.0] * 7, [2.0**24, 1.0] * 4]
    return (np.concatenate([np.asarray(b, dtype=np.float64) for b in blocks]).astype(dt),)


# ---- Add / Sub / Mul ------------------------------------------------------------------------

for op in ("Add", "Sub", "Mul"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, marks=(), **kw):
            row(op, L, case, variant, EW(op, dt, **kw), nop=nop, product=product, sat=sat,
                marks=marks)

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
        r("partial_mask", "bitwise", mask=rand_mask(dt), repeat=2)
        r("partial_mask", "bitwise_high_only" if dt == F16 else "bitwise_one_lane",
          mask=(0, 1 << 63) if dt == F16 else (1 << 63, 0), repeat=2)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "bitwise_zero", mask=(0, 0), repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt), repeat=2)
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
            r("partial_mask", "bitwise", mask=rand_mask(dt), repeat=2, specials=sp, sat=True)

# ---- Adds / Muls ----------------------------------------------------------------------------

for op in ("Adds", "Muls"):
    for dt in (F32, F16):
        E, L = EPR[dt], DT_LABEL[dt]

        def r(case, variant, nop=False, product="atlas-a2", sat=None, scalar=1.75, **kw):
            row(op, L, case, variant, EW(op, dt, scalar=scalar, **kw), nop=nop, product=product,
                sat=sat)

        r("full", "", mask=E, repeat=3, scalar=-2.5)
        r("dst_eq_src0", "count_form", form="count", count=2 * E + 9, alias="src0")
        r("dst_eq_src0", "rep_0", mask=E, repeat=3, strides=(1, 1, 0, 0), alias="src0")
        r("partial_mask", "continuous", mask=E - 7, repeat=2)
        r("partial_mask", "bitwise", mask=rand_mask(dt), repeat=3)
        r("partial_mask", "zero", mask=0, repeat=2, nop=True)
        r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt), repeat=2)
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
        row("Duplicate", L, case, variant, EW("Duplicate", dt, scalar=scalar, **kw), nop=nop,
            product=product, sat=sat, marks=marks)

    r("full", "", mask=E, repeat=3)
    r("partial_mask", "continuous", mask=E // 3, repeat=3)
    r("partial_mask", "bitwise", mask=rand_mask(dt), repeat=2)
    r("partial_mask", "zero", mask=0, repeat=2, nop=True)
    r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(dt), repeat=2)
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

# ---- Cast -----------------------------------------------------------------------------------

for rm in RoundMode:
    def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
        row("Cast", "f32->f16", case, f"{rm.name}{'-' + variant if variant else ''}",
            EW("Cast", F16, src_dtype=F32, round_mode=rm.name, **kw), nop=nop, product=product,
            sat=sat)

    r("specials", "", form="count", count=len(F2H_SPECIALS) + 5, specials=(F2H_SPECIALS,))
    r("specials", "", form="count", count=len(F2H_SPECIALS), specials=(F2H_SPECIALS,), sat=True)
    r("specials", "sat_override", form="count", count=len(F2H_SPECIALS),
      specials=(F2H_SPECIALS,), sat_override=True)
    r("full", "random", form="count", count=640)
    r("partial_mask", "bitwise", mask=rand_mask(F32), repeat=2, strides=(1, 1, 4, 8))
    if rm in (RoundMode.CAST_NONE, RoundMode.CAST_ODD):
        r("specials", "", form="count", count=len(F2H_SPECIALS), specials=(F2H_SPECIALS,),
          product="atlas-inference")


def cast_rows(dt, sdt, rm):
    L = f"{DT_LABEL[sdt]}->{DT_LABEL[dt]}"
    contig = (1, 1, 2 * dt.itemsize, 2 * sdt.itemsize)

    def r(case, variant, nop=False, product="atlas-a2", sat=None, **kw):
        row("Cast", L, case, variant, EW("Cast", dt, src_dtype=sdt, round_mode=rm, **kw),
            nop=nop, product=product, sat=sat)

    r("full", "", mask=64, repeat=3, strides=contig)
    r("full", "default_params", mask=64, repeat=2)
    r("partial_mask", "continuous", mask=37, repeat=3, strides=contig)
    r("partial_mask", "zero", mask=0, repeat=3, strides=contig, nop=True)
    r("partial_mask", "placeholder", form="normal_ph", mask=rand_mask(F32), repeat=2,
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
    row("Cast", "f16->f32", "specials", variant,
        EW("Cast", F32, src_dtype=F16, form="count", count=len(sp), specials=(sp,)))
    row("Cast", "f16->f32", "specials", variant,
        EW("Cast", F32, src_dtype=F16, form="count", count=len(sp), specials=(sp,)), sat=True)

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
            row(instr, L, case, variant, RED(instr, dt, **kw), nop=nop, product=product, sat=sat)
            if both:  # the 950 writes 0 where A2/A3 leave fully masked groups untouched
                row(instr, L, case, variant, RED(instr, dt, **kw), product="atlas-350")

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

row("BlockReduceSum", "f32", "partial_mask", "zero", RED("BlockReduceSum", F32, mask=0, repeat=2),
    product="atlas-350", nop=True)

# ---- DataCopy -------------------------------------------------------------------------------

for dt in (F32, F16):
    L, per32 = DT_LABEL[dt], 32 // dt.itemsize
    for direction in ("gm_to_ub", "ub_to_gm", "ub_to_ub"):
        def r(case, variant, nop=False, **kw):
            row("DataCopy", L, case, f"{direction}{'-' + variant if variant else ''}",
                COPY(direction, dt, **kw), nop=nop)

        r("full", "count", count=per32 * 40)
        r("tail", "count_rounds_down", count=per32 * 25 + per32 - 1)
        r("tail", "count_below_one_block", count=per32 - 1, nop=True)
        r("repeat_0", "count_0", count=0, nop=True)
        r("stride_gt_1", "params", params=(3, 2, 1, 4))
        r("stride_gt_1", "params_src_views", params=(4, 1, 3, 0), src_offset=per32 * 3,
          dst_offset=per32 * 2)
        r("full", "params_contiguous", params=(1, 7, 0, 0))
        r("repeat_0", "params_block_count_0", params=(0, 4, 1, 1), nop=True)
        r("repeat_0", "params_block_len_0", params=(3, 0, 1, 1), nop=True)

# ---- the test -------------------------------------------------------------------------------


def first_difference(actual, expected):
    idx = np.flatnonzero(actual != expected)
    return (f"{idx.size} bytes differ, first at {idx[:8].tolist()}: "
            f"got {actual[idx[:8]].tolist()} expected {expected[idx[:8]].tolist()}")


def check_spec(spec, *, product="atlas-a2", sat=None, mode="fast", seed=0, nop=None):
    """Fresh core, garbage UB, spec's tensors; oracle on `before`; instruction; whole-UB compare."""
    core = lngb.AICore(product, mode=mode, sat_mode=sat)
    rng = np.random.default_rng(seed)
    garbage_ub(core, rng)
    run, oracle = BUILDERS[type(spec)](spec, core, rng)
    before = core.ub.copy()
    result = oracle(before[:core.ub_size])
    expected_ub, extra = result if isinstance(result, tuple) else (result, [])
    expected = before.copy()
    expected[:core.ub_size] = expected_ub
    if nop is not None:  # guard against vacuous rows: a row changes bytes iff it is not a NOP
        changes = not np.array_equal(expected, before) or any(
            not np.array_equal(actual, want) for actual, want in extra)
        assert changes != nop, "the oracle's change does not match the row's nop flag"
    seq = core.seq
    with core, np.errstate(over="ignore", invalid="ignore"):
        run()
    assert np.array_equal(core.ub, expected), first_difference(core.ub, expected)
    for actual, want in extra:
        assert np.array_equal(actual, want), "GM: " + first_difference(actual, want)
    assert (core.mask_mode, core.mask_high, core.mask_low) == mask_register_after(spec)
    if mode == "observed":
        assert [rec.name for rec in core.trace if rec.is_instruction][-1] == spec_api(spec)
    assert core.seq > seq
    return core


def mask_register_after(spec):
    """What the mask register holds after a row: the count form and ResetMask restore normal
    mode and a full mask; an explicit mask argument stays in the register (Ascend C)."""
    form = getattr(spec, "form", "count")
    if form == "mask":
        return (MaskMode.NORMAL, *mask_words(spec.mask, spec.epr))
    if form == "counter":
        return (MaskMode.NORMAL, 0, spec.count)
    return (MaskMode.NORMAL, FULL64, FULL64)


def spec_api(spec):
    return "DataCopy" if isinstance(spec, COPY) else spec.instr


@pytest.mark.parametrize("golden", [pytest.param(g, id=g.id, marks=g.marks) for g in GOLDEN])
def test_golden(golden, mode):
    check_spec(golden.spec, product=golden.product, sat=golden.sat, mode=mode,
               seed=seed_of(golden.id), nop=golden.nop)


def test_golden_ids_unique():
    ids = [g.id for g in GOLDEN]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# Which STYLE.md edge cases apply to which instruction (no second source: no dst_eq_src1; no
# source: no aliasing; DataCopy: no masks, no in-place).
APPLICABLE = {
    "Add": EDGE_CASES, "Sub": EDGE_CASES, "Mul": EDGE_CASES,
    "Adds": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "Muls": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "Duplicate": tuple(c for c in EDGE_CASES if not c.startswith("dst_eq")),
    "Cast": tuple(c for c in EDGE_CASES if not c.startswith("dst_eq")),
    "BlockReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "WholeReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "PairReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "DataCopy": ("repeat_0", "stride_gt_1", "tail"),
}


@pytest.mark.parametrize("instr", INSTRUCTIONS)
def test_every_instruction_has_golden_rows(instr):
    rows = [g for g in GOLDEN if g.instr == instr]
    assert rows, f"{instr} has no golden row"
    assert instr in APPLICABLE, f"{instr}: say which edge cases apply"
    for dtype in {g.dtype for g in rows}:  # each dtype (Cast: each direction) on its own
        missing = set(APPLICABLE[instr]) - {g.case for g in rows if g.dtype == dtype}
        assert not missing, f"{instr} {dtype}: no golden rows for {sorted(missing)}"
    assert {g.dtype for g in rows} >= ({"f32->f16", "f16->f32"} if instr == "Cast"
                                       else {"f32", "f16"})
    assert {g.case for g in rows} <= set(EDGE_CASES) | {"full", "specials"}


def test_every_cast_round_mode_has_rows():
    narrowing = {g.spec.round_mode for g in GOLDEN if g.dtype == "f32->f16"}
    assert narrowing == {m.name for m in RoundMode}
    assert {g.product for g in GOLDEN if g.dtype == "f32->f16"} >= {"atlas-a2", "atlas-inference"}
    assert any(g.dtype == "f16->f32" for g in GOLDEN)


def test_both_paths_identical_bytes():
    """The same rows on "fast" and "observed" leave identical UB bytes (besides the oracle)."""
    picks = [g for g in GOLDEN if g.case in ("counter_mask", "stride_gt_1") and not g.marks][::3]
    assert len(picks) > 10
    for g in picks:
        a = check_spec(g.spec, product=g.product, sat=g.sat, mode="fast", seed=seed_of(g.id))
        b = check_spec(g.spec, product=g.product, sat=g.sat, mode="observed", seed=seed_of(g.id))
        assert np.array_equal(a.ub, b.ub), g.id
        assert a.trace == [] and len(b.trace) > 0


# =============================================================================================
# Reductions in saturation mode where a group has one active lane: the lone lane passes the
# tree unchanged, but every half result is stored saturated (README fidelity notes)


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
# Hypothesis: random masks, repeats, strides, aliasing, dtypes, saturation


HYP = settings(max_examples=100, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def draw_mask(data, epr, dtype, *, counter_forms=True):
    """(form, mask, count, repeat): continuous / bitwise / counter (argument or register)."""
    forms = ["mask_continuous", "mask_bitwise", "normal_ph"]
    if counter_forms:
        forms += ["counter", "counter_ph"]
    form = data.draw(st.sampled_from(forms), label="mask form")
    repeat = data.draw(st.integers(0, 8), label="repeat")
    if form == "mask_continuous":
        return "mask", data.draw(st.integers(0, epr), label="mask"), None, repeat
    if form in ("mask_bitwise", "normal_ph"):
        m0 = data.draw(st.one_of(st.integers(0, FULL64), st.sampled_from([0, FULL64, 1])),
                       label="mask0")
        m1 = 0
        if epr == 128:
            m1 = data.draw(st.one_of(st.integers(0, FULL64), st.sampled_from([0, FULL64])),
                           label="mask1")
        return ("mask" if form == "mask_bitwise" else form), (m0, m1), None, repeat
    return form, None, data.draw(st.integers(0, 8 * epr), label="count"), repeat


def draw_strides(data, n):
    blk = [data.draw(st.integers(1, 3), label="blk") for _ in range(n)]
    rep = [data.draw(st.integers(0, 16), label="rep") for _ in range(n)]
    return blk, rep


@HYP
@given(data=st.data())
def test_hypothesis_binary(data):
    op = data.draw(st.sampled_from(["Add", "Mul", "Sub"]), label="op")
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
    op = data.draw(st.sampled_from(["Adds", "Muls"]), label="op")
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


# =============================================================================================
# Errors: the specific class, and no UB byte changed (validate, then mutate)


def _cores():
    core = lngb.AICore("atlas-a2")
    garbage_ub(core, np.random.default_rng(3))
    return core


def t32(core, n=256):
    t = core.alloc(n, F32)
    fill_random(core, t, np.random.default_rng(n))
    return t


def t16(core, n=256):
    t = core.alloc(n, F16)
    fill_random(core, t, np.random.default_rng(n + 1))
    return t


BRP, URP = BinaryRepeatParams, UnaryRepeatParams


def _err(name, exc, setup, product="atlas-a2", marks=()):
    return pytest.param(exc, setup, product, id=name, marks=marks)


def _other_core_tensor():
    return lngb.AICore("atlas-a2").alloc(256, F32)


def _byte_view(t, byte_offset, dtype):
    return t.ReinterpretCast(np.uint8)[byte_offset].ReinterpretCast(dtype)


A2 = "atlas-a2"
ERRORS = [
    # --- alignment
    _err("misaligned_dst", lngb.AlignmentError, lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
         Add(a[1], b, d, 64))),
    _err("misaligned_src0_half", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b[3], d, 64, 1, BRP()))),
    _err("misaligned_src1_view_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Mul(a, b, d[4], 8))),
    _err("misaligned_adds", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): Adds(a[2], b, 1.0, 8))),
    _err("misaligned_duplicate", lngb.AlignmentError,
         lambda c: (lambda a=t16(c): Duplicate(a[15], 1.0, 64))),
    _err("misaligned_cast_src", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t32(c): Cast(a, b[1], RoundMode.CAST_RINT, 64))),
    _err("misaligned_block_reduce_src", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b[2], 1, 64, 1, 1, 8))),
    _err("misaligned_block_reduce_dst_f32_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a[4], b, 1, 64, 1, 1, 8))),
    _err("misaligned_block_reduce_dst_f16_8B", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c): BlockReduceSum(a[4], b, 1, 128, 1, 1, 8))),
    _err("misaligned_pair_reduce_dst_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): PairReduceSum(a[4], b, 1, 64, 1, 1, 8))),
    _err("misaligned_whole_reduce_dst_odd_byte", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c):
                    WholeReduceSum(_byte_view(a, 1, F16), b, 128, 1, 1, 1, 8))),
    _err("misaligned_datacopy_ub", lngb.AlignmentError,
         lambda c: (lambda a=t32(c): DataCopy(a[1], lngb.GlobalTensor(np.ones(64, F32)), 16))),
    _err("misaligned_datacopy_gm", lngb.AlignmentError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor.in_arena(
             np.zeros(512, np.uint8), 2, F32, 64), 16))),
    # --- footprints
    _err("repeat_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 64, 5, BRP()))),
    _err("rep_stride_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 2, BRP(1, 1, 1, 8, 8, 40)))),
    _err("blk_stride_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Sub(a, b, d, 64, 1, BRP(1, 5, 1, 8, 8, 8)))),
    _err("count_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 257))),
    _err("view_count_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a[8], b, d, 249))),
    _err("counter_count_too_large", lngb.OutOfBoundsError,
         lambda c: (SetMaskCount(), lambda a=t16(c), b=t16(c): Muls(a, b, 2.0, 300, 1, URP()))[1]),
    _err("partial_mask_still_past_end", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64), b=t32(c, 64), d=t32(c, 120):
                    Add(a, b, d[64], [1 << 63, 0], 1, BRP()))),
    _err("duplicate_rep_stride", lngb.OutOfBoundsError,
         lambda c: (lambda a=t16(c): Duplicate(a, 1.0, 128, 2, 1, 9))),
    _err("cast_dst_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t16(c, 128), b=t32(c): Cast(a, b, RoundMode.CAST_RINT, 200))),
    _err("block_reduce_src", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 5, 64, 1, 1, 8))),
    _err("block_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 8), b=t32(c): BlockReduceSum(a, b, 2, 64, 1, 1, 8))),
    _err("whole_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 8), b=t32(c): WholeReduceSum(a[6], b, 64, 3, 1, 1, 8))),
    _err("pair_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64), b=t32(c): PairReduceSum(a, b, 2, 64, 2, 1, 8))),
    _err("reduce_src_rep_stride", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c): WholeReduceSum(a, b, 64, 2, 1, 1, 40))),
    _err("view_offset_past_end", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): a[256])),
    _err("datacopy_gm_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(64, F32)), 72))),
    _err("datacopy_ub_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64): DataCopy(a, lngb.GlobalTensor(np.ones(256, F32)), 72))),
    _err("datacopy_params_gap", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(1024, F32)),
                                              DataCopyParams(4, 8, 0, 1)))),
    _err("datacopy_ub_to_gm", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(lngb.GlobalTensor(np.ones(128, F32))[64], a, 72))),
    # --- ranges
    *[_err(f"repeat_{rep}_{api}", lngb.InvalidArgumentError, setup) for rep in (256, -1)
      for api, setup in (
          ("Add", lambda c, rep=rep: (lambda a=t32(c), b=t32(c), d=t32(c):
                                      Add(a, b, d, 64, rep, BRP(1, 1, 1, 0, 0, 0)))),
          ("Adds", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                       Adds(a, b, 1.0, 64, rep, URP(1, 1, 0, 0)))),
          ("Duplicate", lambda c, rep=rep: (lambda a=t32(c): Duplicate(a, 1.0, 64, rep, 1, 0))),
          ("Cast", lambda c, rep=rep: (lambda a=t16(c), b=t32(c):
                                       Cast(a, b, RoundMode.CAST_RINT, 64, rep, URP(1, 1, 0, 0)))),
          ("BlockReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                 BlockReduceSum(a, b, rep, 64, 0, 1, 0))),
          ("WholeReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                 WholeReduceSum(a, b, 64, rep, 0, 1, 0))),
          ("PairReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                PairReduceSum(a, b, rep, 64, 0, 1, 0))))],
    _err("mask_65_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 65, 1, BRP()))),
    _err("mask_129_half", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, 129, 1, BRP()))),
    _err("mask_negative", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c): Adds(a, b, 1.0, -1, 1, URP()))),
    _err("mask1_nonzero_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, [FULL64, 1], 1, BRP()))),
    _err("mask1_nonzero_float_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 1, [1, 1], 1, 1, 8))),
    _err("mask0_over_64_bits", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, [1 << 64, 0], 1, BRP()))),
    _err("mask_three_words", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, [1, 1, 1], 1, BRP()))),
    _err("mask_float_value", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, 3.0, 1, BRP()))),
    _err("cast_mask_65", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): Cast(a, b, RoundMode.CAST_RINT, 65, 1, URP()))),
    _err("count_negative", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, -1))),
    _err("blk_stride_256", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 1, BRP(256, 1, 1, 8, 8, 8)))),
    _err("datacopy_block_count_4096", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(1024, F32)),
                                              DataCopyParams(4096, 0, 0, 0)))),
    _err("event_id_8", lngb.InvalidArgumentError, lambda c: (lambda: SetFlag(HardEvent.MTE2_V, 8))),
    _err("event_id_negative", lngb.InvalidArgumentError,
         lambda c: (lambda: SetFlag(HardEvent.V_MTE3, -1))),
    _err("wait_without_set", lngb.InvalidArgumentError,
         lambda c: (lambda: WaitFlag(HardEvent.MTE2_V, 0))),
    _err("wait_other_event_id", lngb.InvalidArgumentError,
         lambda c: (SetFlag(HardEvent.MTE2_V, 1), lambda: WaitFlag(HardEvent.MTE2_V, 0))[1]),
    _err("pipe_barrier_pipe_s", lngb.InvalidArgumentError, lambda c: (lambda: PipeBarrier(PIPE_S))),
    # --- dtypes and operands
    _err("dtype_mismatch_binary", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t16(c), d=t32(c): Add(a, b, d, 64))),
    _err("dtype_mismatch_adds", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): Adds(a, b, 1.0, 64))),
    _err("dtype_mismatch_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): WholeReduceSum(a, b, 64, 1, 1, 1, 8))),
    _err("dtype_mismatch_datacopy", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c): DataCopy(a, lngb.GlobalTensor(np.ones(256, F32)), 64))),
    _err("dtype_int32", lngb.InvalidArgumentError,
         lambda c: (lambda a=c.alloc(64, np.int32), b=c.alloc(64, np.int32),
                    d=c.alloc(64, np.int32): Add(a, b, d, 64))),
    _err("cast_same_dtype", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Cast(a, b, RoundMode.CAST_NONE, 64))),
    _err("cast_half_to_float_rint", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t16(c): Cast(a, b, RoundMode.CAST_RINT, 64))),
    *[_err(f"cast_half_to_float_{m.name}", lngb.InvalidArgumentError,
           lambda c, m=m: (lambda a=t32(c), b=t16(c): Cast(a, b, m, 64, 1, URP(1, 1, 8, 4))))
      for m in RoundMode if m != RoundMode.CAST_NONE and m != RoundMode.CAST_RINT],
    *[_err(f"cast_float_to_half_{m.name}_on_310P", lngb.InvalidArgumentError,
           lambda c, m=m: (lambda a=t16(c), b=t32(c): Cast(a, b, m, 64)),
           product="atlas-inference")
      for m in RoundMode if m not in (RoundMode.CAST_NONE, RoundMode.CAST_ODD)],
    _err("operands_on_two_cores", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Add(a, b, _other_core_tensor(), 64))),
    _err("dst_on_other_core", lngb.InvalidArgumentError,
         lambda c: (lambda b=t32(c): Adds(_other_core_tensor(), b, 1.0, 64))),
    _err("datacopy_ub_to_ub_two_cores", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): DataCopy(a, _other_core_tensor(), 64))),
    _err("datacopy_gm_to_gm", lngb.InvalidArgumentError,
         lambda c: (lambda: DataCopy(lngb.GlobalTensor(np.ones(64, F32)),
                                     lngb.GlobalTensor(np.ones(64, F32)), 64))),
    _err("partial_overlap_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Add(a[8], a, b, 64))),
    _err("partial_overlap_src1_half", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c): Mul(a, b, a[16], 128))),
    _err("partial_overlap_adds", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): Adds(a, a[8], 1.0, 64))),
    _err("overlap_same_address_other_blk_stride", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c, 512), b=t32(c, 512):
                    Add(a, a, b, 64, 1, BRP(1, 2, 1, 8, 8, 8)))),
    _err("partial_overlap_cast_in_place", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): Cast(a.ReinterpretCast(F16), a, RoundMode.CAST_RINT, 64))),
    _err("reduce_overwrites_unread_source", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): PairReduceSum(a[64], a, 2, 64, 1, 1, 8))),
    _err("placeholder_with_is_set_mask", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, MASK_PLACEHOLDER, 1, BRP()))),
    _err("placeholder_with_is_set_mask_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 1, MASK_PLACEHOLDER, 1, 1, 8))),
    _err("mask_value_with_is_set_mask_false", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 1, BRP(), is_set_mask=False))),
    _err("count_form_with_is_set_mask_false", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Muls(a, b, 1.0, 64, is_set_mask=False))),
]


@pytest.mark.parametrize("exc,setup,product", ERRORS)
def test_errors_leave_ub_untouched(exc, setup, product, mode):
    core = lngb.AICore(product, mode=mode)
    garbage_ub(core, np.random.default_rng(3))
    with core:
        call = setup(core)
        before = core.ub.copy()
        state = (core.mask_mode, core.mask_high, core.mask_low, dict(core.flags), core.seq,
                 len(core.trace))
        with pytest.raises(exc) as info:
            call()
    assert type(info.value) is exc, repr(info.value)
    assert len(str(info.value)) > 20  # a message saying what is wrong
    assert np.array_equal(core.ub, before), first_difference(core.ub, before)
    # nothing was issued or recorded, no flag moved (the mask register: see the next test)
    assert (dict(core.flags), core.seq, len(core.trace)) == (state[3], state[4], state[5])


def test_error_classes_are_distinct():
    assert issubclass(lngb.InvalidArgumentError, ValueError)
    assert not issubclass(lngb.OutOfBoundsError, lngb.InvalidArgumentError)
    assert not issubclass(lngb.AlignmentError, lngb.InvalidArgumentError)


def test_mask_and_sync_calls_need_a_current_core():
    for call in (SetMaskCount, SetMaskNorm, ResetMask, lambda: PipeBarrier(PIPE_V),
                 lambda: SetVectorMask(0, 5, dtype=F32), lambda: SetFlag(HardEvent.MTE2_V, 0)):
        with pytest.raises(lngb.InvalidArgumentError):
            call()


@pytest.mark.parametrize("counter", [False, True], ids=["normal", "counter"])
@pytest.mark.parametrize("kind", [
    "out_of_bounds",
    "partial_overlap",
    "reduce_out_of_bounds",
    "misaligned", "mask_out_of_range"])
def test_rejected_call_leaves_mask_register(kind, counter):
    core = lngb.AICore("atlas-a2")
    a, b, d = (core.alloc(256, F32) for _ in range(3))
    with core:
        if counter:
            SetMaskCount()
            SetVectorMask(0, 100, dtype=F32, mode=MaskMode.COUNTER)
        else:
            SetVectorMask(0, 0xF0F0, dtype=F32)
        state = (core.mask_mode, core.mask_high, core.mask_low)
        m = 300 if counter else 37
        calls = {
            "out_of_bounds": lambda: Add(a, b, d, m, 5, BRP(1, 1, 1, 8, 8, 16)),
            "partial_overlap": lambda: Add(a[8], a, b, m, 1, BRP()),
            "reduce_out_of_bounds": lambda: WholeReduceSum(d, a, m, 6, 1, 1, 8),
            "misaligned": lambda: Add(a[1], b, d, m, 1, BRP()),
            "mask_out_of_range": lambda: Add(a, b, d, 1 << 40 if counter else 65, 1, BRP()),
        }
        with pytest.raises(lngb.LngbError):
            calls[kind]()
        assert (core.mask_mode, core.mask_high, core.mask_low) == state


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
        g_gm, b_gm = np.zeros(H, F32), np.zeros(H, F32)
        DataCopy(lngb.GlobalTensor(g_gm), out_g, H)
        DataCopy(lngb.GlobalTensor(b_gm), out_b, H)
    want_g, want_b = naive.layer_norm_grad_beta(dy_np, rfg_np)
    assert np.array_equal(g_gm.view(np.uint32), want_g.view(np.uint32))
    assert np.array_equal(b_gm.view(np.uint32), want_b.view(np.uint32))
    with np.errstate(over="ignore"):
        products = (dy_np * rfg_np).reshape(-1)
    assert np.array_equal(P.read().view(np.uint32), products.view(np.uint32))
