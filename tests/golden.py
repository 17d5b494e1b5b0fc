"""The golden-table machinery shared by the instruction-family test modules (test_arithmetic,
test_cast, test_reductions, test_datacopy; test_golden_table checks their rows together), and
the helpers the other vector-instruction tests share. Not a test module.

A spec (EW, RED, COPY) describes one instruction call; BUILDERS turn it into (run, oracle)
against a core; ``check_spec`` runs it the golden way: a fresh core, the whole UB filled with
random bytes (so lanes that must stay untouched are visibly untouched), random finite values
written into the sources, ``before = core.ub.copy()``, the oracle run on ``before``, the
instruction run, the WHOLE UB (vector registers included) compared byte for byte. A family
module owns its rows: ``GOLDEN = []`` and ``row(GOLDEN, instr, dtype, case, variant, spec, ...)``,
and runs them with ``@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))``.
"""
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import lngb
from lngb.vector_ops import (MASK_PLACEHOLDER, Abs, Add, Adds, BinaryRepeatParams,
                             BlockReduceSum, Brcb, BrcbRepeatParams, Cast, DataCopy,
                             DataCopyParams, Div, Duplicate, DuplicateLane, MaskMode, Max, Maxs,
                             Min, Mins, Mul, Muls, PairReduceSum, Relu, ResetMask, RoundMode, SetMaskCount,
                             Select, SetCmpMask, SetMaskNorm, SetVectorMask, Sqrt, Sub,
                             UnaryRepeatParams, WholeReduceSum)

import naive
from conftest import F16, F32, fill_random, garbage_ub, put, random_finite, seed_of

EPR = {F32: 64, F16: 128}
DT_LABEL = {F32: "f32", F16: "f16"}
FULL64 = (1 << 64) - 1
INF, NAN = float("inf"), float("nan")
FMAX = float(np.finfo(np.float32).max)
EDGE_CASES = ("dst_eq_src0", "dst_eq_src1", "partial_mask", "counter_mask", "repeat_0",
              "stride_gt_1", "tail")
TENSOR_BYTES = 8192          # every operand tensor; >= any footprint the tables use
RED_DST_BYTES = 16384        # PairReduceSum with dstRepStride 16 over 8 repeats needs 14.5 KiB
ELEMENTWISE = {"Add": Add, "Sub": Sub, "Mul": Mul, "Div": Div, "Max": Max, "Min": Min,
               "Adds": Adds, "Muls": Muls, "Maxs": Maxs, "Mins": Mins,
               "Sqrt": Sqrt, "Abs": Abs, "Relu": Relu}
ONE_SOURCE = {"Duplicate": 0, "Adds": 1, "Muls": 1, "Maxs": 1, "Mins": 1, "Cast": 1,
              "Sqrt": 1, "Abs": 1, "Relu": 1}   # sources of the instructions with fewer than 2
REDUCTIONS = {"BlockReduceSum": (BlockReduceSum, naive.block_reduce_sum),
              "WholeReduceSum": (WholeReduceSum, naive.whole_reduce_sum),
              "PairReduceSum": (PairReduceSum, naive.pair_reduce_sum)}
MASK_SEED = 20240611         # the fixed bitwise masks used by the tables


def mask_rng():
    """A fresh stream of the tables' bitwise masks. Each family module draws from its own
    (``MASK_RNG = mask_rng()``), so its rows are the same whichever modules are imported, and
    in whatever order."""
    return np.random.default_rng(MASK_SEED)


def rand_mask(dt, rng):
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
    ftz: bool = False            # AICore(div_sqrt="ftz"): Div/Sqrt flush subnormals

    @property
    def n_src(self):
        return ONE_SOURCE.get(self.instr, 2)

    @property
    def unary(self):
        return self.instr in naive.UNARY_OPS

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
        elif spec.unary:
            ELEMENTWISE[instr](dst, srcs[0], *margs, **kw)
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
        if spec.unary:
            return naive.unary(instr, ub, dt, dst.address, srcs[0].address, strides=strides,
                               sat=sat, ftz=spec.ftz, **m)
        if spec.n_src == 1:
            return naive.unary_scalar(instr, ub, dt, dst.address, srcs[0].address, spec.scalar,
                                      strides=strides, sat=sat, **m)
        return naive.binary(instr, ub, dt, dst.address, srcs[0].address, srcs[1].address,
                            strides=strides, sat=sat, ftz=spec.ftz, **m)

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
        if spec.params or spec.count * size % 32 == 0:
            DataCopy(dst, src, arg)
            return
        with pytest.warns(lngb.LngbWarning, match=f"drops the last {spec.count * size % 32} "
                                                  "bytes"):   # the tail the device drops
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


@dataclass(frozen=True)
class BRCB:
    """Brcb(dst, src, repeat, BrcbRepeatParams(dst_blk, dst_rep)); src may be a view at an
    element offset."""
    dtype: np.dtype
    repeat: int = 1
    dst_blk: int = 1
    dst_rep: int = 8
    src_offset: int = 0
    instr: str = "Brcb"


def build_brcb(spec, core, rng):
    dt = spec.dtype
    src = core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    dst = core.alloc(4 * TENSOR_BYTES // dt.itemsize, dt)
    _write_sources([src], (), rng)
    if spec.src_offset:
        src = src[spec.src_offset]

    def run():
        Brcb(dst, src, spec.repeat, BrcbRepeatParams(spec.dst_blk, spec.dst_rep))

    def oracle(ub):
        return naive.brcb(ub, dt, dst.address, src.address, repeat=spec.repeat,
                          dst_blk=spec.dst_blk, dst_rep=spec.dst_rep)

    return run, oracle


def garbage_ub_range(core, tensor, rng):
    """Random bytes over one UB tensor (a DataCopy destination: untouched bytes stay garbage)."""
    core.ub[tensor.address:tensor.address + tensor.nbytes] = rng.integers(
        0, 256, size=tensor.nbytes, dtype=np.uint8)


@dataclass(frozen=True)
class LANE:
    """DuplicateLane(vreg dst_reg, src): src is a UB tensor at an element offset, or, with
    src_reg, vector register src_reg (filled with random data first)."""
    dtype: np.dtype
    dst_reg: int = 3
    src_offset: int = 0
    src_reg: int = None
    specials: tuple = ()
    instr: str = "DuplicateLane"


def build_lane(spec, core, rng):
    dt = spec.dtype
    src = core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    _write_sources([src], spec.specials, rng)
    if spec.src_reg is not None:
        reg = core.vreg(spec.src_reg, dt)
        core.ub[reg.address:reg.address + 256] = core.ub[src.address:src.address + 256]
        src = reg
    dst = core.vreg(spec.dst_reg, dt)
    if spec.src_offset:
        src = src[spec.src_offset]

    def run():
        DuplicateLane(dst, src)

    def oracle(ub):
        return naive.duplicate_lane(ub, dt, dst.address, src.address)

    return run, oracle


@dataclass(frozen=True)
class SEL:
    """SetCmpMask(cmp[cmp_offset]) alone (instr "SetCmpMask"), or Select(dst, selMask, src0,
    repeat, BinaryRepeatParams) (instr "Select") on the compare-mask register as the UB
    garbage left it. form: "normal_ph" (SetVectorMask(mask)) or "counter_ph" (counter mode,
    SetVectorMask(0, count)); Select takes no mask argument. strides = (dstBlk, src0Blk,
    dstRep, src0Rep); sel_bits: selMask's bytes (random if None)."""
    instr: str
    dtype: np.dtype
    form: str = "normal_ph"
    mask: object = None
    repeat: int = 1
    count: int = None
    strides: tuple = (1, 1, 8, 8)
    alias: bool = False          # dst is src0
    cmp_offset: int = 0          # SetCmpMask: elements of dtype into its source
    sel_mask_dtype: np.dtype = np.dtype(np.uint16)
    specials: tuple = ()

    @property
    def epr(self):
        return EPR[self.dtype]


def build_sel(spec, core, rng):
    dt = spec.dtype
    src0 = core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    _write_sources([src0], spec.specials, rng)
    dst = src0 if spec.alias else core.alloc(TENSOR_BYTES // dt.itemsize, dt)
    sel = core.alloc(512 // spec.sel_mask_dtype.itemsize, spec.sel_mask_dtype)
    register = core.cmpmask_address
    cmp_src = src0[spec.cmp_offset]

    def run():
        if spec.instr == "SetCmpMask":
            SetCmpMask(cmp_src)
            return
        _mask_prologue(spec.form, spec.mask, spec.count, spec.epr, dt)
        dblk, sblk, drep, srep = spec.strides
        Select(dst, sel, src0, spec.repeat, BinaryRepeatParams(dblk, sblk, 1, drep, srep, 8))
        _mask_epilogue(spec.form)

    def oracle(memory):
        if spec.instr == "SetCmpMask":
            return naive.set_cmp_mask(memory, cmp_src.address, register)
        return naive.select_tensor_scalar(
            memory, dt, dst.address, sel.address, src0.address, register, strides=spec.strides,
            **_oracle_mask(spec.form, spec.mask, spec.count, spec.repeat))

    return run, oracle


@dataclass(frozen=True)
class MULS16:
    """Muls on int16 (the EW forms: "count", "mask", "counter", "counter_ph", "normal_ph")."""
    scalar: int
    form: str = "mask"
    mask: object = None
    repeat: int = 1
    count: int = None
    strides: tuple = (1, 1, 8, 8)
    alias: bool = False
    instr: str = "Muls"
    dtype: np.dtype = np.dtype(np.int16)
    epr: int = 128


def build_muls16(spec, core, rng):
    i16 = np.dtype(np.int16)
    src = core.alloc(TENSOR_BYTES // 2, i16)
    src.write(rng.integers(-32768, 32768, size=src.size).astype(i16))
    put(src, [0, 1, -1, 32767, -32768, 181, -182, 256])
    dst = src if spec.alias else core.alloc(TENSOR_BYTES // 2, i16)

    def run():
        _mask_prologue(spec.form, spec.mask, spec.count, spec.epr, i16)
        if spec.form == "count":
            Muls(dst, src, spec.scalar, spec.count)
        else:
            m, rep, kw = _mask_call_args(spec.form, spec.mask, spec.count, spec.repeat)
            Muls(dst, src, spec.scalar, m, rep, UnaryRepeatParams(*spec.strides), **kw)
        _mask_epilogue(spec.form)

    def oracle(ub):
        return naive.muls_int16(ub, dst.address, src.address, spec.scalar, strides=spec.strides,
                                **_oracle_mask(spec.form, spec.mask, spec.count, spec.repeat))

    return run, oracle


BUILDERS = {EW: build_ew, RED: build_red, COPY: build_copy, BRCB: build_brcb, LANE: build_lane,
            SEL: build_sel, MULS16: build_muls16}


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


def row(table, instr, dtype, case, variant, spec, **kw):
    """Append a golden row to `table` (a family module's GOLDEN list)."""
    table.append(Row(instr, dtype, case, variant, spec, **kw))


def stratum(g):
    """What the observed and checked paths can depend on in a golden row: the instruction (its
    trace record, the sanitizer's footprint rule), the dtype, the edge case (mask form, repeat,
    strides, aliasing) and the product (UB size; the 950 orders V after V)."""
    return g.instr, g.dtype, g.case, g.product


def golden_mode_params(table):
    """`table`'s rows as (golden, mode) parameters, ids "<mode>-<row id>" as the `mode` fixture
    gave them. The modes execute a row with the same kernels (lngb.core: every row retires
    through executor.execute); what differs is around it: "fast" may reissue a memoised
    count-form row and has no observers, "observed" makes trace records, "checked" adds the
    sanitizer's footprint and hazard checks. So every row runs in "fast" (the default), and
    "checked" and "observed" each run one row of every stratum (instruction, dtype, edge case,
    product): the first of the stratum in table order in "checked", its last in "observed" (the
    same row when it is alone). test_golden_table.test_both_paths_identical_bytes compares the
    modes' bytes and traces on a sample besides."""
    first, last = {}, {}
    for g in table:
        first.setdefault(stratum(g), g)
        last[stratum(g)] = g
    runs = {"fast": table, "observed": [g for g in table if last[stratum(g)] is g],
            "checked": [g for g in table if first[stratum(g)] is g]}
    return [pytest.param(g, mode, id=f"{mode}-{g.id}", marks=g.marks)
            for mode, rows in runs.items() for g in rows]   # in the fixture's order


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


# =============================================================================================
# Running a spec


def first_difference(actual, expected):
    idx = np.flatnonzero(actual != expected)
    return (f"{idx.size} bytes differ, first at {idx[:8].tolist()}: "
            f"got {actual[idx[:8]].tolist()} expected {expected[idx[:8]].tolist()}")


def check_spec(spec, *, product="atlas-a2", sat=None, mode="fast", seed=0, nop=None):
    """Fresh core, garbage UB, spec's tensors; oracle on `before`; instruction; whole-UB compare."""
    core = lngb.AICore(product, mode=mode, sat_mode=sat,
                       div_sqrt="ftz" if getattr(spec, "ftz", False) else "ieee")
    rng = np.random.default_rng(seed)
    garbage_ub(core, rng)
    run, oracle = BUILDERS[type(spec)](spec, core, rng)
    before = core.ub.copy()
    # the oracles see the UB, and the vector registers after it if the instruction uses them
    result = oracle(before if isinstance(spec, (LANE, SEL)) else before[:core.ub_size])
    expected_ub, extra = result if isinstance(result, tuple) else (result, [])
    expected = before.copy()
    expected[:expected_ub.size] = expected_ub
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
    if mode in ("observed", "checked"):  # both keep a trace
        assert [rec.name for rec in core.trace if rec.is_instruction][-1] == spec_api(spec)
    assert core.seq > seq
    return core


def mask_register_after(spec):
    """What the mask register holds after a row: the count form and ResetMask restore normal
    mode and a full mask; an explicit mask argument stays in the register (Ascend C)."""
    if isinstance(spec, LANE):  # a register op: the mask register is left as it was
        return (MaskMode.NORMAL, FULL64, FULL64)
    form = getattr(spec, "form", "count")   # Brcb resets the mask, as the count form does
    if form == "mask":
        return (MaskMode.NORMAL, *mask_words(spec.mask, spec.epr))
    if form == "counter":
        return (MaskMode.NORMAL, 0, spec.count)
    return (MaskMode.NORMAL, FULL64, FULL64)


def spec_api(spec):
    return "DataCopy" if isinstance(spec, COPY) else spec.instr


# =============================================================================================
# Hypothesis: random masks, repeats, strides


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


# =============================================================================================
# Small tensors for the error and mask-register tests


def t32(core, n=256):
    t = core.alloc(n, F32)
    fill_random(core, t, np.random.default_rng(n))
    return t


def t16(core, n=256):
    t = core.alloc(n, F16)
    fill_random(core, t, np.random.default_rng(n + 1))
    return t


BRP, URP = BinaryRepeatParams, UnaryRepeatParams


def check_row(golden, mode):
    """One golden row on `mode`: check_spec with the row's product, saturation mode and nop
    flag, seeded by its id."""
    return check_spec(golden.spec, product=golden.product, sat=golden.sat, mode=mode,
                      seed=seed_of(golden.id), nop=golden.nop)
