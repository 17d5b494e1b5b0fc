"""LayerNormGrad (spec layernorm_grad.md) against the independent oracle of tests/naive.py: bit for
bit on every product, dtype, reuse mode and temp size; CANN's instruction lists (§4.8); the
temp-buffer overrun (§3.5); isReuseSource's side effects (§4.6, §5.3); CPU-debug checks (§6.1);
CANN's kernel unit tests (§6.3); special values (§7.3); the documentation's example (§7.2)."""
import dataclasses

import numpy as np
import pytest

import lngb
import naive
from lngb import (GetLayerNormGradMaxMinTmpSize, GetLayerNormGradNDTilingInfo, LayerNormGrad,
                  LayerNormGradShapeInfo)
from lngb.kernels.tiling import layer_norm_grad_tmp_bytes
from lngb.vector_ops import MaskMode
from lngb.vector_ops.program import COUNTER, MASK0, MASK_SETS

pytestmark = pytest.mark.jitted

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")


def inputs(shape, dtype, seed=0, spread=100.0):
    """dy, x, variance, mean, gamma as a LayerNorm forward would give them."""
    rng = np.random.default_rng(seed)
    b, s, h = shape
    dy = rng.uniform(-spread, spread, shape).astype(dtype)
    x = rng.uniform(-spread, spread, shape).astype(dtype)
    mean = x.astype(np.float32).mean(-1).astype(dtype)
    var = x.astype(np.float32).var(-1).astype(dtype)
    gamma = rng.uniform(-2, 2, h).astype(dtype)
    return dy, x, var, mean, gamma


def same_bits(actual, expected):
    """Bit-equal, NaNs of any payload counting as equal."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape
    nan = np.isnan(a) & np.isnan(e)
    bits = a.view(np.uint16 if a.dtype == F16 else np.uint32)
    want = e.view(bits.dtype)
    bad = ~nan & (bits != want)
    assert not bad.any(), (f"{int(bad.sum())} of {a.size} differ; first at "
                           f"{np.argwhere(bad)[0].tolist()}: {a[bad][0]!r} vs {e[bad][0]!r}")


class Setup:
    """LayerNormGrad's tensors on a fresh core, data first and the temp buffer last."""

    def __init__(self, shape, dtype, product="atlas-a2", *, reuse=False, stack_buffer_size=None,
                 tmp_bytes=None, mode="fast", data=None, epsilon=1e-5):
        self.shape, self.dtype, self.product, self.reuse = shape, np.dtype(dtype), product, reuse
        self.data = inputs(shape, dtype) if data is None else data
        self.epsilon = epsilon
        size = self.dtype.itemsize
        if stack_buffer_size is None:
            stack_buffer_size = GetLayerNormGradMaxMinTmpSize(shape, size, reuse,
                                                              product=product)[1]
        self.tiling = GetLayerNormGradNDTilingInfo(shape, stack_buffer_size, size, reuse,
                                                   product=product)
        self.core = core = lngb.AICore(product, mode=mode)
        b, s, h = shape
        self.pd_x, self.rfg, self.dy, self.x = (core.alloc(shape, dtype) for _ in range(4))
        self.var, self.mean = (core.alloc(max(b * s, 32 // size), dtype) for _ in range(2))
        self.gamma = core.alloc(h, dtype)
        for tensor, array in zip((self.dy, self.x, self.var, self.mean, self.gamma), self.data):
            tensor.write(array.reshape(-1))
        self.tmp = core.alloc(max(tmp_bytes or stack_buffer_size, 32), np.uint8)

    def run(self, **kw):
        LayerNormGrad(self.pd_x, self.rfg, self.dy, self.x, self.var, self.mean, self.gamma,
                      self.tmp, self.epsilon, self.tiling, is_reuse_source=self.reuse, **kw)
        return self.pd_x.read().reshape(self.shape), self.rfg.read().reshape(self.shape)

    def expected(self):
        return naive.layer_norm_grad(*self.data, self.epsilon,
                                     regbase=self.product == "atlas-350", sat=self.core.sat_mode,
                                     ftz=self.core.div_sqrt == "ftz")


# --- bit for bit against the oracle --------------------------------------------------------------

# H: one block (8, 16, 24, 64), two levels of the reduction (96, 128, 200, 512), float and half
CASES = [((1, 8, 16), F32), ((1, 2, 16), F32), ((3, 7, 24), F32), ((2, 5, 96), F32),
         ((1, 8, 128), F32), ((1, 3, 200), F32), ((1, 8, 512), F32), ((2, 4, 8), F32),
         ((1, 8, 16), F16), ((1, 2, 16), F16), ((2, 5, 96), F16), ((1, 16, 64), F16),
         ((1, 3, 128), F16)]


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("shape, dtype", CASES, ids=lambda v: str(v))
def test_bit_exact_against_the_oracle(product, shape, dtype, recwarn):
    setup = Setup(shape, dtype, product)
    pd_x, rfg = setup.run()
    want_x, want_rfg = setup.expected()
    same_bits(pd_x, want_x)
    same_bits(rfg, want_rfg)


@pytest.mark.parametrize("shape, dtype, sizes", [
    ((3, 7, 24), F32, (2304, 4608, 12096, 13824, 1 << 16)),   # 1 row per chunk .. one chunk
    ((2, 5, 96), F32, (2304, 18432, 23040, 60000)),
    ((2, 16, 64), F16, (2304, 36864, 73728)),
])
def test_results_do_not_depend_on_the_temp_size(shape, dtype, sizes, recwarn):
    """Rows are independent (§4.2): every chunking gives the oracle's bits."""
    for size in sizes:
        setup = Setup(shape, dtype, stack_buffer_size=size, tmp_bytes=size + 64 * 1024)
        pd_x, rfg = setup.run()
        want_x, want_rfg = setup.expected()
        same_bits(pd_x, want_x)
        same_bits(rfg, want_rfg)


@pytest.mark.parametrize("h", [64, 128, 4096, 4160])
def test_the_950_sums_lanes_over_blocks_then_one_tree(h):
    """§5.3: the 950's order differs from COMMON's beyond one 64-lane block; H = 4096 and 4160
    (3 levels on COMMON) only fit the 950's two-row temp buffer."""
    setup = Setup((1, 2, h), F32, "atlas-350", data=inputs((1, 2, h), F32, seed=h))
    pd_x, rfg = setup.run()
    want = setup.expected()
    same_bits(pd_x, want[0])
    same_bits(rfg, want[1])
    common = naive.layer_norm_grad(*setup.data, 1e-5)
    assert np.array_equal(common[1], want[1])           # resForGamma: no sums
    if h > 64:
        assert not np.array_equal(common[0], want[0])   # pdX: a different order of additions


def test_the_doc_example_gives_the_specs_bits():
    """§7.2: [1,8,8] float, eps 1e-4, with correctly rounded Div/Sqrt (the documentation's
    printed numbers are a numpy golden, not the kernel's order, so they are not a bit test)."""
    dy = np.arange(64, dtype=F32).reshape(1, 8, 8)
    data = (dy, dy.copy(), np.full((1, 8), 5.25, F32),
            (3.5 + 8 * np.arange(8)).astype(F32).reshape(1, 8), np.arange(8, dtype=F32))
    setup = Setup((1, 8, 8), F32, data=data, epsilon=1e-4)
    pd_x, rfg = setup.run()
    hexes = lambda row: " ".join(f"{v:08x}" for v in row.view(np.uint32))
    assert hexes(pd_x[0, 0]) == "40438222 3edf60d8 bfa799d8 c00ba8f5 c00ba800 bfa79418 3edf8720 404388d0"
    assert hexes(pd_x[0, 7]) == "40436780 3edec940 bfa7b060 c00baca0 c00ba420 bfa77d00 3ee02000 4043a3c0"
    for row in rfg[0]:
        assert hexes(row) == "bfc38579 bf8ba87b bf2796fa be5f73f8 3e5f73f8 3f2796fa 3f8ba87b 3fc38579"


# --- CANN's instruction lists (spec §4.8) ----------------------------------------------------------

def compact(record):
    """A trace record as §4.8 lists it: the name, and a count-form instruction's count, a
    WholeReduceSum's mask or a counter-mode SetVectorMask's count."""
    row = record.row
    if record.name == "SetVectorMask":
        return f"SetVectorMask {record.mask_after[2]}"
    if record.is_vector and row[COUNTER] and row[MASK_SETS] == 4:
        return f"{record.name} {row[MASK0]}"
    if record.name == "WholeReduceSum":
        return f"WholeReduceSum {bin(int(row[MASK0])).count('1')}"
    return record.name


def _broadcast(rows):
    return (["PipeBarrier", "PipeBarrier", "SetFlag", "WaitFlag"] + ["GetValue"] * rows
            + ["Duplicate 16"] * rows + ["PipeBarrier", "PipeBarrier"])


def _reduce(rows):
    return ["PipeBarrier", "WholeReduceSum 16", "PipeBarrier"] * rows


def _float_list(n, bcast, reduce):
    """Transcribed from spec §4.8 (a) (n = 2 rows, H = 16): the same list with n rows,
    `bcast` for each of the five broadcasts and `reduce` for each of the three ReduceSumImpls."""
    c = 16 * n
    pb = "PipeBarrier"
    div = ["SetMaskCount", "SetVectorMask 8", "Duplicate", pb, f"SetVectorMask {n}", "Div", pb,
           "SetMaskNorm"]
    return (["Mul 16"] * n + [pb] + bcast + [pb, f"Sub {c}", pb, f"Adds {n}", pb, f"Mul {n}", pb,
            f"Mul {n}", pb, f"Sqrt {n}", pb] + div + bcast + [pb, f"Mul {c}", pb, f"Mul {c}", pb,
            f"Muls {c}", pb] + reduce + [pb, f"Adds {n}", pb, f"Sqrt {n}", pb] + div + bcast
            + [pb, f"Mul {c}", pb, f"Mul {c}", pb, f"Muls {c}", pb] + reduce + [f"Muls {c}", pb]
            + reduce + [pb, f"Muls {n}", pb, f"Mul {n}", pb, f"Add {n}", pb, pb, f"Muls {n}", pb]
            + bcast + [pb, f"Mul {c}", pb, f"Muls {n}", pb] + bcast + [f"Add {c}", pb,
                                                                       f"Add {c}", pb])


# (a) float [1,2,16], transcribed entry by entry from spec §4.8 (138 entries)
FLOAT_A = _float_list(2, _broadcast(2), _reduce(2))
# (b) half [1,2,16] (148 entries): casts at both ends, var widened before its use, no L475 barrier
HALF_B = (["Cast 32", "Cast 16", "PipeBarrier"] + FLOAT_A[:3] + ["Cast 32", "Cast 2", "PipeBarrier"]
          + FLOAT_A[3:16] + ["Cast 2", "PipeBarrier"] + FLOAT_A[16:106] + FLOAT_A[107:]
          + ["Cast 32", "Cast 32", "PipeBarrier"])
# (c) float [1,8,16] on 2201 (173 entries): each broadcast is two column-block Brcbs
FLOAT_C = _float_list(8, ["Brcb", "PipeBarrier", "Brcb", "PipeBarrier", "PipeBarrier"], _reduce(8))
# (d) 310P float [1,2,16] (123 entries): no column-loop barriers, no L166 barrier
FLOAT_D = _float_list(2, ["SetFlag", "WaitFlag", "GetValue", "GetValue", "Duplicate 16",
                          "Duplicate 16", "PipeBarrier"], _reduce(2))


@pytest.mark.parametrize("shape, dtype, product, expected, entries", [
    ((1, 2, 16), F32, "atlas-a2", FLOAT_A, 138),
    ((1, 2, 16), F16, "atlas-a2", HALF_B, 148),
    ((1, 8, 16), F32, "atlas-a2", FLOAT_C, 173),
    ((1, 2, 16), F32, "atlas-inference", FLOAT_D, 123),
], ids=["a-float", "b-half", "c-brcb", "d-310p"])
def test_trace_is_canns_instruction_list(shape, dtype, product, expected, entries, recwarn):
    assert len(expected) == entries
    setup = Setup(shape, dtype, product, mode="observed", tmp_bytes=16384)
    setup.run()
    assert [compact(r) for r in setup.core.trace] == expected


def test_the_mask_register_state_machine():
    """§4.7: DoOneDiv leaves normal mode with the count in the register, Brcb resets it, and the
    API exits in normal mode with a full mask."""
    setup = Setup((1, 8, 16), F32, mode="observed")
    setup.run()
    trace = setup.core.trace
    full = 2 ** 64 - 1
    norms = [i for i, r in enumerate(trace) if r.name == "SetMaskNorm"]
    assert len(norms) == 2
    for i in norms:
        assert trace[i].mask_after == (MaskMode.NORMAL, 0, 8)
        assert trace[i + 1].name == "Brcb" and trace[i + 1].mask_after == (MaskMode.NORMAL, full,
                                                                           full)
    reduce = next(r for r in trace if r.name == "WholeReduceSum")
    assert reduce.mask_after == (MaskMode.NORMAL, 0, 2 ** 16 - 1)
    core = setup.core
    assert (core.mask_mode, core.mask_high, core.mask_low) == (MaskMode.NORMAL, full, full)


def test_the_950_uses_registers_not_the_mask_register():
    setup = Setup((1, 2, 96), F32, "atlas-350", mode="observed")
    setup.run()
    names = {r.name for r in setup.core.trace}
    assert {"DuplicateLane", "WholeReduceSum", "Div", "Sqrt"} <= names
    assert not names & {"SetMaskCount", "SetVectorMask", "Brcb", "GetValue", "PipeBarrier"}
    assert all(r.mask_after == (MaskMode.NORMAL, 2 ** 64 - 1, 2 ** 64 - 1)
               for r in setup.core.trace)


# --- the temp-buffer overrun (spec §3.5) -------------------------------------------------------

@pytest.mark.parametrize("shape, dtype, touched", [((1, 2, 16), F32, 2688), ((1, 2, 16), F16, 8320),
                                                   ((2, 32, 16), F16, 9216)])
def test_the_hosts_own_minimum_overruns_the_buffer(shape, dtype, touched):
    """Fast mode gives the device's bits (the overrun lands in free UB) and says so; checked mode
    refuses with the byte range."""
    setup = Setup(shape, dtype)
    size = setup.tiling.stackBufferSize
    assert layer_norm_grad_tmp_bytes(setup.tiling, dtype.itemsize) == touched
    with pytest.warns(lngb.LngbWarning, match=f"touches {touched} bytes of temp space"):
        pd_x, rfg = setup.run()
    same_bits(pd_x, setup.expected()[0])
    start = setup.tmp.address + size
    assert np.any(setup.core.ub[start:setup.tmp.address + touched])   # written past the buffer
    checked = Setup(shape, dtype, mode="checked")
    before = checked.core.ub.copy()
    with pytest.raises(lngb.HazardError, match=rf"\[{start}, {setup.tmp.address + touched}\)"):
        checked.run()
    assert np.array_equal(checked.core.ub, before)


def test_a_buffer_of_the_kernels_footprint_is_clean_in_checked_mode():
    for product in PRODUCTS:
        for dtype in (F32, F16):
            for reuse in (False, True):
                setup = Setup((2, 8, 32), dtype, product, reuse=reuse, mode="checked",
                              tmp_bytes=32768)
                if reuse and dtype == F16:
                    with pytest.warns(lngb.LngbWarning, match="isReuseSource"):
                        pd_x, rfg = setup.run()
                else:
                    pd_x, rfg = setup.run()
                same_bits(pd_x, setup.expected()[0])


# --- isReuseSource (spec §4.6, §5.3) -----------------------------------------------------------

def test_reuse_overwrites_dy_and_x_in_every_row_on_common():
    setup = Setup((2, 16, 64), F32, reuse=True)
    pd_x, _ = setup.run()
    new_dy, new_x = naive.layer_norm_grad_reuse_state(*setup.data, 1e-5)
    same_bits(setup.dy.read().reshape(setup.shape), new_dy)
    same_bits(setup.x.read().reshape(setup.shape), new_x)
    same_bits(pd_x, setup.expected()[0])
    assert setup.tiling.x3TensorPos == 3 * setup.tiling.oneCalSize   # 4 blocks, not 6


def test_reuse_on_the_950_overwrites_only_the_first_row():
    setup = Setup((2, 3, 96), F32, "atlas-350", reuse=True)
    setup.run()
    x3, x2 = naive.layer_norm_grad_regbase_reuse_state(*setup.data, 1e-5)
    dy, x = setup.dy.read().reshape(-1, 96), setup.x.read().reshape(-1, 96)
    same_bits(dy[0], x3)
    same_bits(x[0], x2)
    same_bits(dy[1:], setup.data[0].reshape(-1, 96)[1:])
    same_bits(x[1:], setup.data[1].reshape(-1, 96)[1:])


def test_half_ignores_reuse_with_a_warning():
    setup = Setup((1, 16, 64), F16, reuse=True, tmp_bytes=65536)
    with pytest.warns(lngb.LngbWarning, match="isReuseSource is true, may not be effective"):
        pd_x, _ = setup.run()
    same_bits(setup.dy.read().reshape(setup.shape), setup.data[0])
    same_bits(pd_x, setup.expected()[0])


def test_reuse_with_pd_x_on_dy_is_a_hazard():
    setup = Setup((1, 8, 16), F32, reuse=True, mode="checked")
    with pytest.raises(lngb.HazardError, match=r"outputPdX \(UB bytes \[\d+, \d+\)\) shares bytes "
                                               r"\[\d+, \d+\) with inputDy .*is_reuse_source"):
        LayerNormGrad(setup.dy, setup.rfg, setup.dy, setup.x, setup.var, setup.mean, setup.gamma,
                      setup.tmp, 1e-5, setup.tiling, is_reuse_source=True)


# --- CANN's kernel unit tests (§6.3) and special values (§7.3) --------------------------------

@pytest.mark.parametrize("shape", [(2, 32, 16), (2, 16, 32)])
@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("reuse", [False, True])
def test_ut_k_zero_inputs_give_zero_bytes(shape, dtype, reuse, recwarn):
    """UT-K: all-zero inputs, epsilon (T)0.001, the framework-allocated temp buffer."""
    zeros = (np.zeros(shape, dtype), np.zeros(shape, dtype), np.zeros(shape[:2], dtype),
             np.zeros(shape[:2], dtype), np.zeros(shape[2], dtype))
    setup = Setup(shape, dtype, data=zeros, epsilon=0.001, tmp_bytes=32, reuse=reuse)
    core = setup.core
    free = core.free_bytes
    setup.tiling = GetLayerNormGradNDTilingInfo(shape, free, dtype.itemsize, reuse)
    LayerNormGrad(setup.pd_x, setup.rfg, setup.dy, setup.x, setup.var, setup.mean, setup.gamma,
                  0.001, setup.tiling, is_reuse_source=reuse)
    assert not setup.pd_x.read().view(np.uint8).any()
    assert not setup.rfg.read().view(np.uint8).any()


SPECIALS = {
    "var_0": dict(var=0.0),
    "var_plus_eps_0": dict(var=0.0, eps=0.0),          # rstd = inf: resForGamma +-inf / NaN
    "t_cubed_overflows": dict(var=1e13),               # r3 = 0
    "t_cubed_underflows": dict(var=1e-14, eps=0.0),    # r3 = inf
    "negative_zeros": dict(zero=True),
    "nan_in_dy": dict(nan=True),
}


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-inference", "atlas-350"])
@pytest.mark.parametrize("case", SPECIALS)
def test_special_values(product, case, recwarn):
    spec = SPECIALS[case]
    dy, x, var, mean, gamma = inputs((1, 8, 16), F32)
    if "var" in spec:
        var = np.full_like(var, spec["var"])
    if spec.get("zero"):
        dy[0, :4] = -0.0
        x[0, :4] = mean[0, :4, None]
        gamma[:] = -0.0
    if spec.get("nan"):
        dy[0, 3, 5] = np.nan
    setup = Setup((1, 8, 16), F32, product, data=(dy, x, var, mean, gamma),
                  epsilon=spec.get("eps", 1e-5))
    pd_x, rfg = setup.run()
    want_x, want_rfg = setup.expected()
    same_bits(pd_x, want_x)
    same_bits(rfg, want_rfg)


@pytest.mark.parametrize("product, expected", [("atlas-a2", np.inf), ("atlas-inference", 65504.0),
                                               ("atlas-350", np.inf)])
def test_half_outputs_beyond_65504(product, expected, recwarn):
    """Overflow is inf in INF/NaN mode (A2), 65504 under saturation (310P); the 950 casts with
    NO_SAT, so inf whatever the mode."""
    dy, x, var, mean, gamma = inputs((1, 16, 64), F16)
    var[:] = 1e-4
    x[0, 0, :] = 0
    x[0, 0, 0] = 60000
    mean[0, 0] = 0
    setup = Setup((1, 16, 64), F16, product, data=(dy, x, var, mean, gamma))
    pd_x, rfg = setup.run()
    assert rfg[0, 0, 0] == expected
    same_bits(rfg, setup.expected()[1])
    same_bits(pd_x, setup.expected()[0])


def test_half_epsilon_is_rounded_to_half_first():
    setup = Setup((1, 16, 64), F16, epsilon=1e-5, tmp_bytes=65536)
    assert np.float16(1e-5) != np.float32(1e-5)
    pd_x, rfg = setup.run()
    same_bits(rfg, naive.layer_norm_grad(*setup.data, np.float16(1e-5))[1])


# --- CPU-debug checks (§6.1) and bad calls -----------------------------------------------------

def rejects(setup, error, match, *args, **kw):
    core = setup.core
    before = (core.ub.copy(), core.seq)
    with pytest.raises(error, match=match):
        LayerNormGrad(*args, **kw)
    assert np.array_equal(core.ub, before[0]) and core.seq == before[1]


def test_cpu_debug_checks():
    s = Setup((1, 8, 16), F32)
    args = [s.pd_x, s.rfg, s.dy, s.x, s.var, s.mean, s.gamma, s.tmp, 1e-5, s.tiling]
    rejects(s, lngb.AlignmentError, "inputX physical address, address must be 32-byte aligned",
            *args[:3], s.x[1], *args[4:])
    rejects(s, lngb.InvalidArgumentError, r"\(outputPdX\) and \(resForGamma\) cannot be reused",
            s.pd_x, s.pd_x, *args[2:])
    rejects(s, lngb.AlignmentError, "inputGamma length is 12, should be 32B aligned",
            *args[:6], s.core.alloc(12, F32), *args[7:])
    rejects(s, lngb.InvalidArgumentError, "Only support ND data format",
            *args, LayerNormGradShapeInfo("NZ"))
    small = GetLayerNormGradNDTilingInfo((1, 8, 16), 4096, 4, False)
    rejects(s, lngb.InvalidArgumentError, "Stack buffer size not enough", *args[:9], small)
    other = lngb.AICore().alloc(128, F32)
    rejects(s, lngb.InvalidArgumentError, "inputMean must be a LocalTensor on inputDy's core",
            *args[:5], other, *args[6:])
    rejects(s, lngb.InvalidArgumentError, "epsilon must be a number", *args[:8], "1e-5",
            args[9])
    rejects(s, lngb.InvalidArgumentError, "is_reuse_source must be True or False", *args,
            is_reuse_source=1)
    odd = GetLayerNormGradNDTilingInfo((1, 8, 16, 12), s.tmp.nbytes, 4, False)
    rejects(s, lngb.InvalidArgumentError, r"storage H \(16\) != original H \(12\)", *args[:9], odd)


def test_tilings_the_kernel_cannot_use_are_refused_before_any_instruction():
    """Fields that are not uint32, and temp blocks or chunks the kernel would fail on half-way
    (misaligned, smaller than a chunk, past the UB), are refused up front."""
    s = Setup((1, 24, 16), F32)
    args = [s.pd_x, s.rfg, s.dy, s.x, s.var, s.mean, s.gamma, s.tmp, 1e-5]
    chunk = max(s.tiling.oneCalSize, s.tiling.tailSize)
    for changes, error, match in (
            (dict(hLength=-1), lngb.InvalidArgumentError, r"tiling.hLength = -1 is out of the "
                                                          "uint32 range"),
            (dict(bLength=1.0), lngb.InvalidArgumentError, "tiling.bLength must be an integer"),
            (dict(x1TensorPos=s.tiling.x1TensorPos + 4), lngb.AlignmentError,
             "tiling.x1TensorPos = .* not a whole number of 32-byte blocks"),
            (dict(x2TensorSize=chunk - 8), lngb.InvalidArgumentError,
             f"tiling.x2TensorSize = {chunk - 8} floats, but the kernel uses {chunk}"),
            (dict(x3TensorPos=2**26), lngb.OutOfBoundsError, "past the end of the UB")):
        rejects(s, error, match, *args, dataclasses.replace(s.tiling, **changes))
    with pytest.raises(lngb.InvalidArgumentError, match="tiling must be a LayerNormGradTiling"):
        LayerNormGrad(*args, s.tiling.to_bytes())


def test_data_type_check():
    core = lngb.AICore()
    t = [core.alloc(128, F32) for _ in range(6)] + [core.alloc(16, F16), core.alloc(4096, np.uint8)]
    tiling = GetLayerNormGradNDTilingInfo((1, 8, 16), 4096, 4, False)
    with pytest.raises(lngb.InvalidArgumentError, match=r"template parameter \(T\) is not half or "
                                                        "float"):
        LayerNormGrad(*t, 1e-5, tiling)


def test_inputs_smaller_than_the_tiling_are_refused():
    s = Setup((1, 8, 16), F32)
    big = GetLayerNormGradNDTilingInfo((2, 8, 16), s.tmp.nbytes, 4, False)
    rejects(s, lngb.InvalidArgumentError, "outputPdX has 128 elements, the tiling",
            s.pd_x, s.rfg, s.dy, s.x, s.var, s.mean, s.gamma, s.tmp, 1e-5, big)


# --- emulate_layer_norm_grad -------------------------------------------------------------------

@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("mode", ["fast", "checked"])
def test_emulate_layer_norm_grad(product, mode):
    data = inputs((3, 7, 24), F32)
    before = [a.copy() for a in data]
    result = lngb.emulate_layer_norm_grad(*data, product=product, mode=mode)
    want = naive.layer_norm_grad(*data, 1e-5, regbase=product == "atlas-350")
    same_bits(result.pd_x, want[0])
    same_bits(result.res_for_gamma, want[1])
    assert all(np.array_equal(a, b) for a, b in zip(data, before))
    assert result.cost.cycles > 0 and isinstance(result.tiling, lngb.LayerNormGradTiling)


def test_emulate_layer_norm_grad_then_emulate_gives_the_gradients_of_gamma_and_beta():
    dy, x, var, mean, gamma = inputs((2, 8, 64), F32)
    rfg = lngb.emulate_layer_norm_grad(dy, x, var, mean, gamma).res_for_gamma
    result = lngb.emulate(dy, rfg)
    want_g, want_b = naive.layer_norm_grad_beta(dy, naive.layer_norm_grad(dy, x, var, mean,
                                                                           gamma, 1e-5)[1])
    same_bits(result.pd_gamma, want_g)
    same_bits(result.pd_beta, want_b)


def test_emulate_layer_norm_grad_refuses_what_does_not_fit_one_core():
    data = inputs((8, 64, 1024), F32)
    with pytest.raises(lngb.CapacityError, match="emulate_layer_norm_backward"):
        lngb.emulate_layer_norm_grad(*data)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_emulate_layer_norm_grad_with_the_hosts_minimum_warns_of_the_overrun():
    data = inputs((1, 2, 16), F32)
    with pytest.warns(lngb.LngbWarning, match="touches 2688 bytes"):
        result = lngb.emulate_layer_norm_grad(*data, stack_buffer_size=768)
    same_bits(result.pd_x, naive.layer_norm_grad(*data, 1e-5)[0])
    with pytest.raises(lngb.HazardError):
        lngb.emulate_layer_norm_grad(*data, stack_buffer_size=768, mode="checked")


@pytest.mark.parametrize("bad, match", [
    (dict(input_gamma=np.ones(8, F32)), "input_gamma has shape"),
    (dict(input_x=np.ones((1, 2, 16), F16)), "all five inputs"),
    (dict(input_dy=np.ones((1, 2, 12), F32)), "input_x has shape"),
    (dict(epsilon="x"), "epsilon must be a number"),
    (dict(stack_buffer_size=1.5), "stack_buffer_size"),
    (dict(stack_buffer_size=10 ** 9), "does not fit"),
    (dict(product="atlas-9000"), "unknown product"),
])
def test_emulate_layer_norm_grad_bad_arguments(bad, match):
    data = dict(zip(("input_dy", "input_x", "input_variance", "input_mean", "input_gamma"),
                    inputs((1, 2, 16), F32)))
    kw = {k: v for k, v in bad.items() if k not in data}
    data.update({k: v for k, v in bad.items() if k in data})
    with pytest.raises(lngb.LngbError, match=match):
        lngb.emulate_layer_norm_grad(*data.values(), **kw)


def test_variance_and_mean_may_carry_a_trailing_axis():
    dy, x, var, mean, gamma = inputs((2, 4, 32), F32)
    a = lngb.emulate_layer_norm_grad(dy, x, var, mean, gamma)
    b = lngb.emulate_layer_norm_grad(dy, x, var[..., None], mean[..., None], gamma)
    same_bits(a.pd_x, b.pd_x)


def test_trace_and_replay_agree():
    data = inputs((2, 8, 64), F32)
    fast = [lngb.emulate_layer_norm_grad(*data) for _ in range(2)]   # recorded, then replayed
    observed = lngb.emulate_layer_norm_grad(*data, trace=True)
    for r in fast:
        same_bits(r.pd_x, observed.pd_x)
    assert len(observed.trace) == len(fast[1].rows)


def test_the_overloads_are_told_apart_and_give_the_same_bits():
    """(sharedTmpBuffer, epsilon, tiling[, shapeInfo]) or (epsilon, tiling[, shapeInfo]); shapeInfo
    None is the default; a None buffer or a buffer without a tiling is an error, not a guess."""
    outputs = []
    for trailing in (lambda s: (s.tmp, 1e-5, s.tiling),
                     lambda s: (s.tmp, np.float32(1e-5), s.tiling, LayerNormGradShapeInfo()),
                     lambda s: (s.tmp, 1e-5, s.tiling, None),
                     lambda s: (1e-5, s.tiling),
                     lambda s: (np.float32(1e-5), s.tiling, LayerNormGradShapeInfo()),
                     lambda s: (1e-5, s.tiling, None)):
        s = Setup((1, 8, 16), F32, tmp_bytes=8192)
        LayerNormGrad(s.pd_x, s.rfg, s.dy, s.x, s.var, s.mean, s.gamma, *trailing(s))
        outputs.append(np.concatenate([s.pd_x.read(), s.rfg.read()]).tobytes())
    assert len(set(outputs)) == 1
    s = Setup((1, 8, 16), F32)
    data = [s.pd_x, s.rfg, s.dy, s.x, s.var, s.mean, s.gamma]
    rejects(s, lngb.InvalidArgumentError, "sharedTmpBuffer must be a LocalTensor", *data, None,
            1e-5, s.tiling)
    with pytest.raises(TypeError, match="LayerNormGrad takes"):
        LayerNormGrad(*data, s.tmp, 1e-5)


def test_a_host_tiling_whose_footprint_passes_the_ub_is_told_in_the_hosts_terms():
    x, v, g = np.ones((1, 16, 128), F16), np.ones((1, 16), F16), np.ones(128, F16)
    with pytest.raises(lngb.OutOfBoundsError, match="touches 204800 bytes of temp space .* pass "
                                                    "a smaller stackBufferSize"):
        lngb.emulate_layer_norm_grad(x, x, v, v, g, stack_buffer_size=165888)
