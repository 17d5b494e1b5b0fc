"""LayerNorm, the forward, form 1 (spec layernorm.md §1.6, §4, §5, §7): lngb.emulate_layer_norm and
lngb.LayerNorm bit for bit against the independent oracle naive.layer_norm on every product and
dtype (§7.5 item 1); the chunk loop and the caller's tiling (§4.4, §7.5 item 2); isReuseSource
(§4.6); the record stream (§4.4); the three modes; CANN's UT-K zeros (§10.3); the errors of §1.6;
and the multi-core forward (§9.4) against the oracle and the float64 bound of §7.3."""
import dataclasses

import numpy as np
import pytest

import lngb
import naive
from conftest import random_finite
from test_layer_norm_grad import same_bits

pytestmark = pytest.mark.jitted

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")
# §7.5 item 1: no fold, the tail-only fold (64 < H < 128), fold repeats with and without a tail,
# 65 blocks, and 1/H not a power of two; half needs H % 16 == 0 (32-byte rows)
FLOAT_HS = (8, 16, 24, 48, 64, 96, 128, 160, 200, 4160)
HALF_HS = tuple(h for h in FLOAT_HS if h % 16 == 0)


def make_data(shape, dtype, seed=0):
    """x ~ N(0.5, 3^2), gamma ~ 1 + N(0, 0.5^2), beta ~ N(0, 1) (the data of §7.3's test)."""
    rng = np.random.default_rng(seed)
    h = shape[2]
    x = rng.normal(0.5, 3.0, shape).astype(dtype)
    gamma = (1 + rng.normal(0, 0.5, h)).astype(dtype)
    beta = rng.normal(0, 1, h).astype(dtype)
    return x, gamma, beta


def oracle(x, gamma, beta, epsilon, product, core):
    """naive.layer_norm with the core's Div/Sqrt subnormal rule (AICore(div_sqrt=...))."""
    return naive.layer_norm(x, gamma, beta, epsilon, product=product,
                            ftz=core.div_sqrt == "ftz")


def assert_matches_oracle(result, x, gamma, beta, epsilon, product):
    """An emulate_layer_norm (`.core`) or emulate_layer_norm_forward (`.cores`) result."""
    b, s, h = x.shape
    core = result.cores[0] if hasattr(result, "cores") else result.core
    y, mean, var = oracle(x, gamma, beta, epsilon, product, core)
    assert result.output.shape == (b, s, h) and result.output.dtype == x.dtype
    assert result.mean.shape == (b, s) and result.mean.dtype == x.dtype
    assert result.variance.shape == (b, s) and result.variance.dtype == x.dtype
    same_bits(result.output, y)
    same_bits(result.mean, mean)
    same_bits(result.variance, var)


def min_max(shape, dtype, reuse=False):
    """(min, max) temp bytes of the host (the order GetLayerNormMaxMinTmpSize returns reversed)."""
    big, small = lngb.GetLayerNormMaxMinTmpSize(shape, np.dtype(dtype).itemsize, reuse)
    return small, big


# --- emulate_layer_norm bit for bit (§7.5 items 1 and 4) ------------------------------------------

CASES = ([(F32, h) for h in FLOAT_HS] + [(F16, h) for h in HALF_HS])


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("dtype, h", CASES, ids=lambda v: str(v))
def test_bit_exact_against_the_oracle(product, dtype, h):
    shape = (1, 2, h) if h > 1024 else (2, 2, h)
    x, gamma, beta = make_data(shape, dtype, seed=h)
    before = [a.copy() for a in (x, gamma, beta)]
    result = lngb.emulate_layer_norm(x, gamma, beta, epsilon=1e-5, product=product)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, product)
    assert all(np.array_equal(a, b) for a, b in zip((x, gamma, beta), before))


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("shape, dtype", [((1, 4, 24), F32), ((1, 2, 96), F32),
                                          ((1, 3, 64), F16), ((1, 2, 160), F16)])
def test_special_values(product, shape, dtype):
    """Random finite bit patterns (subnormals, huge, -0) plus an inf and a NaN in one row each."""
    rng = np.random.default_rng(sum(shape))
    h = shape[2]
    x = random_finite(dtype, int(np.prod(shape)), rng).reshape(shape)
    x[0, 0, 3] = np.inf
    x[0, 1, 5] = np.nan
    gamma, beta = random_finite(dtype, h, rng), random_finite(dtype, h, rng)
    result = lngb.emulate_layer_norm(x, gamma, beta, epsilon=1e-5, product=product)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, product)


def test_the_documentation_example():
    """§8.1 through the emulator: arange(64) as [1, 8, 8], gamma = beta = arange(8), eps 1e-4."""
    x = np.arange(64, dtype=F32).reshape(1, 8, 8)
    g = np.arange(8, dtype=F32)
    for product in PRODUCTS:
        result = lngb.emulate_layer_norm(x, g, g.copy(), epsilon=1e-4, product=product)
        hexes = " ".join(f"{v:08x}" for v in result.output[0, 3].view(np.uint32))
        assert hexes == "00000000 bdba87b0 3f30d20c 40161a42 409bee7f 41045f2e 4148be5c 418d8a65"
        np.testing.assert_array_equal(result.mean[0], 3.5 + 8 * np.arange(8))
        np.testing.assert_array_equal(result.variance, np.full((1, 8), 5.25, F32))


def test_the_samples_data_on_a2_and_950():
    """§8.2: the 950 differs from A2 in 167 of the 1024 outputs of the sample's data."""
    np.random.seed(42)
    x = np.random.uniform(-100, 100, [2, 32, 16]).astype(F32)
    gamma = np.random.uniform(-100, 100, [16]).astype(F32)
    beta = np.random.uniform(-100, 100, [16]).astype(F32)
    a2 = lngb.emulate_layer_norm(x, gamma, beta, epsilon=1e-4, product="atlas-a2")
    r950 = lngb.emulate_layer_norm(x, gamma, beta, epsilon=1e-4, product="atlas-350")
    assert_matches_oracle(a2, x, gamma, beta, 1e-4, "atlas-a2")
    assert_matches_oracle(r950, x, gamma, beta, 1e-4, "atlas-350")
    assert int((a2.output.view(np.uint32) != r950.output.view(np.uint32)).sum()) == 167


@pytest.mark.parametrize("product", PRODUCTS)
def test_half_overflow_by_product(product):
    """§8.4: 310P saturates half outputs (fbff/7bff), A2/A3 and the 950 give +-inf."""
    x = np.tile(np.arange(16), 2).astype(F16).reshape(1, 2, 16)
    gamma, beta = np.full(16, 60000, F16), np.zeros(16, F16)
    result = lngb.emulate_layer_norm(x, gamma, beta, epsilon=1e-5, product=product)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, product)
    top = result.output[0, 0, 15].view(np.uint16)
    assert top == (0x7BFF if product == "atlas-inference" else 0x7C00)


# --- the result object and the default temp size (§1.6) --------------------------------------------

def test_result_fields_and_the_default_temp_size():
    x, gamma, beta = make_data((2, 32, 16), F32)
    result = lngb.emulate_layer_norm(x, gamma, beta, mode="fast")
    t = result.tiling
    assert isinstance(t, lngb.LayerNormTiling)
    small, big = min_max((2, 32, 16), F32)
    assert t.tmpBufSize * 4 == big                      # the max fits beside the tensors
    assert t.to_bytes() == lngb.GetLayerNormNDTilingInfo((2, 32, 16, 16), big, 4,
                                                         False).to_bytes()
    assert result.cost.cycles > 0
    assert result.trace is None                         # fast mode, trace=False
    assert isinstance(result.core, lngb.AICore) and result.core.product.name == "atlas-a2"
    traced = lngb.emulate_layer_norm(x, gamma, beta, mode="fast", trace=True)
    assert len(traced.trace) > 0
    same_bits(traced.output, result.output)


def test_the_default_temp_size_is_the_largest_that_fits_when_the_max_does_not():
    """[4, 64, 64] float: the max (198656 bytes) does not fit beside 2 x 64 KiB of x and y."""
    shape = (4, 64, 64)
    x, gamma, beta = make_data(shape, F32, seed=1)
    small, big = min_max(shape, F32)
    result = lngb.emulate_layer_norm(x, gamma, beta)
    size = result.tiling.tmpBufSize * 4
    assert small <= size < big
    assert result.tiling.loopRound > 1
    assert_matches_oracle(result, x, gamma, beta, 1e-5, "atlas-a2")
    with pytest.raises(lngb.CapacityError):
        lngb.emulate_layer_norm(x, gamma, beta, stack_buffer_size=size + 1024)


# --- the chunk loop and the caller's tiling (§4.4, §7.5 item 2, §8.5) -------------------------------

@pytest.mark.parametrize("shape, size, cur", [
    ((3, 7, 24), 1200, (24, 1)),       # 5 chunks of 4 rows, a 1-row tail (§8.5)
    ((2, 32, 16), 704, (16, 1)),       # the host's min: 21 chunks of 3 rows, a 1-row tail
    ((1, 300, 8), 28800, (2400, 300)),  # 300 rows (> 255) in one chunk, no tail
])
def test_the_chunk_loop_and_the_tail_rewrite_of_the_tiling(shape, size, cur):
    x, gamma, beta = make_data(shape, F32, seed=size)
    result = lngb.emulate_layer_norm(x, gamma, beta, stack_buffer_size=size)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, "atlas-a2")
    t = result.tiling
    assert (t.bshCurLength, t.bsCurLength) == cur
    host = lngb.GetLayerNormNDTilingInfo((*shape, shape[2]), size, 4, False)
    assert t.to_bytes() == dataclasses.replace(host, bshCurLength=cur[0],
                                               bsCurLength=cur[1]).to_bytes()


def test_the_950_does_not_write_the_tiling():
    """§5.5 item 7: the 950 reads only b, s, h; the tail's lengths are not written back."""
    x, gamma, beta = make_data((3, 7, 24), F32)
    result = lngb.emulate_layer_norm(x, gamma, beta, product="atlas-350", stack_buffer_size=1200)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, "atlas-350")
    assert (result.tiling.bshCurLength, result.tiling.bsCurLength) == (96, 4)


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-inference", "atlas-350"])
@pytest.mark.parametrize("shape, dtype, reuse", [((3, 7, 24), F32, False), ((3, 7, 24), F32, True),
                                                 ((2, 16, 64), F16, False), ((1, 5, 96), F32, False)])
def test_outputs_do_not_depend_on_the_temp_size(product, shape, dtype, reuse):
    small, big = min_max(shape, dtype, reuse)
    sizes = sorted({small, small + 96, (small + big) // 2 // 32 * 32, big})
    x, gamma, beta = make_data(shape, dtype, seed=7)
    runs = [lngb.emulate_layer_norm(x, gamma, beta, product=product, is_reuse_source=reuse,
                                    stack_buffer_size=size) for size in sizes]
    assert len({r.tiling.oneTmpSize for r in runs}) > 1   # really different chunkings
    for r in runs:
        assert_matches_oracle(r, x, gamma, beta, 1e-5, product)


# --- isReuseSource (§4.6, §1.2) --------------------------------------------------------------------

@pytest.mark.parametrize("product", PRODUCTS)
def test_float_reuse_gives_the_same_outputs(product):
    x, gamma, beta = make_data((3, 7, 24), F32)
    plain = lngb.emulate_layer_norm(x, gamma, beta, product=product, stack_buffer_size=1200)
    reuse = lngb.emulate_layer_norm(x, gamma, beta, product=product, stack_buffer_size=1200,
                                    is_reuse_source=True)
    for a, b in ((plain.output, reuse.output), (plain.mean, reuse.mean),
                 (plain.variance, reuse.variance)):
        same_bits(a, b)
    assert_matches_oracle(reuse, x, gamma, beta, 1e-5, product)
    assert reuse.tiling.numberOfTmpBuf == 2


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-a3", "atlas-inference"])
def test_half_reuse_warns_and_computes_as_without(product):
    x, gamma, beta = make_data((2, 16, 32), F16)
    with pytest.warns(lngb.LngbWarning, match="may not be effective"):
        result = lngb.emulate_layer_norm(x, gamma, beta, product=product, is_reuse_source=True)
    assert_matches_oracle(result, x, gamma, beta, 1e-5, product)


# --- the record stream (§4.4, §7.5 item 5) ----------------------------------------------------------

PB = "PipeBarrier"


def reduce_sum_names(n):
    """LayerNormReduceSumImpl for H <= 64 and n <= 254 rows (§4.3): no fold, one group."""
    assert 1 <= n <= 254
    return ["ResetMask", "SetMaskNorm", "WholeReduceSum", "WholeReduceSum", PB, "SetMaskCount"]


def broadcast_names(n):
    """BroadcastLastDim of n rows (§4.3): 7 + 4 (n - 1) records."""
    return (["SetVectorMask", "SetCmpMask", PB, "Muls", PB, "Select", PB]
            + ["SetCmpMask", PB, "Select", PB] * (n - 1))


def chunk_names(n, dtype):
    """One chunk of n rows, H <= 64, §4.4's table, steps 0 (half) to 11."""
    head = ["SetVectorMask", "Cast", PB] if dtype == F16 else []
    body = (["SetVectorMask", "Muls", PB] + reduce_sum_names(n) + broadcast_names(n)
            + ["SetVectorMask", "Sub", PB, "Mul", PB, "Muls", PB] + reduce_sum_names(n) + [PB]
            + broadcast_names(n) + ["SetVectorMask", "Adds", PB, "Sqrt", PB]
            + ["SetVectorMask", "Duplicate", PB] + ["SetVectorMask", "Div", PB] + ["Mul", PB])
    if dtype == F32:
        tail = ["SetVectorMask"] + ["Mul"] * n + [PB] + ["Add"] * n + [PB]
    else:
        tail = (["SetVectorMask", "Cast", PB] + ["Mul"] * n + [PB, "Cast", PB] + ["Add"] * n
                + [PB, "SetVectorMask", "Cast", PB])
    return head + body + tail


def call_names(chunks, dtype):
    """The whole call: SetMaskCount, the chunks, (half) the mean and variance casts, SetMaskNorm,
    ResetMask."""
    names = ["SetMaskCount"]
    for n in chunks:
        names += chunk_names(n, dtype)
    if dtype == F16:
        names += ["SetVectorMask", "Cast", PB, "Cast", PB]
    return names + ["SetMaskNorm", "ResetMask"]


def test_the_record_lists_transcribe_the_specs_counts():
    assert len(chunk_names(8, F32)) == 45 + 10 * 8
    assert len(call_names([8], F32)) == 128
    assert len(call_names([4] * 5 + [1], F32)) == 483


class Direct:
    """LayerNorm's tensors on a fresh core (data first, the temp buffer last) and a host tiling."""

    def __init__(self, shape, dtype, product="atlas-a2", *, size=None, reuse=False, mode=None,
                 data=None, epsilon=1e-5, tmp=True):
        self.shape, self.dtype, self.product, self.reuse = shape, np.dtype(dtype), product, reuse
        self.epsilon = epsilon
        self.data = make_data(shape, dtype) if data is None else data
        b, s, h = shape
        item = self.dtype.itemsize
        self.core = core = lngb.AICore(product, mode=mode)
        self.y, self.x = core.alloc(shape, dtype), core.alloc(shape, dtype)
        self.mean, self.var = (core.alloc(max(b * s, 32 // item), dtype) for _ in range(2))
        self.gamma, self.beta = core.alloc(h, dtype), core.alloc(h, dtype)
        for tensor, array in zip((self.x, self.gamma, self.beta), self.data):
            tensor.write(array.reshape(-1))
        if size is None:
            size = min_max(shape, dtype, reuse)[0]
        self.tmp = core.alloc(size, np.uint8) if tmp else None
        if not tmp:
            size = core.free_bytes
        self.tiling = lngb.GetLayerNormNDTilingInfo(shape, size, item, reuse, product=product)

    def run(self, output=None):
        output = self.y if output is None else output
        tmp = () if self.tmp is None else (self.tmp,)
        lngb.LayerNorm(output, self.mean, self.var, self.x, self.gamma, self.beta, *tmp,
                       self.epsilon, self.tiling, is_reuse_source=self.reuse)
        b, s, _ = self.shape
        return (output.read().reshape(self.shape), self.mean.read()[:b * s].reshape(b, s),
                self.var.read()[:b * s].reshape(b, s))

    def expected(self):
        return oracle(*self.data, self.epsilon, self.product, self.core)


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-inference"])
@pytest.mark.parametrize("shape, dtype, size, chunks", [
    ((1, 8, 8), F32, 832, [8]),                  # the max: one chunk
    ((3, 7, 24), F32, 1200, [4] * 5 + [1]),      # §8.5
    ((1, 2, 16), F16, 1024, [2]),
])
def test_the_record_stream(product, shape, dtype, size, chunks):
    """Every call is one record (an instruction's own mask setting is not); 2201 and 2002 alike."""
    d = Direct(shape, dtype, product, size=size, mode="observed")
    got = d.run()
    assert [r.name for r in d.core.trace] == call_names(chunks, dtype)
    for a, b in zip(got, d.expected()):
        same_bits(a, b)


def test_the_record_stream_of_emulate_layer_norm():
    """With trace=True the API's records (SetMaskCount .. ResetMask) are 128 for [1, 8, 8]."""
    x, gamma, beta = make_data((1, 8, 8), F32)
    result = lngb.emulate_layer_norm(x, gamma, beta, trace=True)
    names = [r.name for r in result.trace]
    first = names.index("SetMaskCount")
    last = len(names) - 1 - names[::-1].index("ResetMask")
    assert last - first + 1 == 128
    assert names[first:last + 1] == call_names([8], F32)


# --- the three modes (§7.5 item 6) ------------------------------------------------------------------

@pytest.mark.parametrize("product, shape, dtype, size", [
    ("atlas-a2", (3, 7, 24), F32, 1200),
    ("atlas-a2", (2, 16, 32), F16, None),
    ("atlas-inference", (1, 2, 96), F32, None),
    ("atlas-350", (3, 7, 24), F32, None),         # the tail block's loads read past the tensor
    ("atlas-350", (1, 3, 80), F16, None),
])
def test_the_three_modes_give_the_same_bits(product, shape, dtype, size):
    x, gamma, beta = make_data(shape, dtype, seed=3)
    runs = {mode: lngb.emulate_layer_norm(x, gamma, beta, product=product, mode=mode,
                                          stack_buffer_size=size)
            for mode in ("fast", "observed", "checked")}
    for mode, r in runs.items():
        assert_matches_oracle(r, x, gamma, beta, 1e-5, product)
        assert (r.trace is None) == (mode == "fast")
    assert len(runs["observed"].trace) == len(runs["checked"].trace)


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("with_tmp", [True, False])
def test_checked_mode_is_clean_on_canns_kernel_called_directly(product, dtype, with_tmp):
    """§4.7: the broadcast reads never-written UB by design; a fresh core raises nothing."""
    d = Direct((2, 8, 32), dtype, product, mode="checked", tmp=with_tmp, size=2048)
    for a, b in zip(d.run(), d.expected()):
        same_bits(a, b)


# --- lngb.LayerNorm on a core: both overloads (§1.6), reuse state, output == inputX ----------------

@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("shape, dtype, size", [((3, 7, 24), F32, 1200), ((2, 16, 64), F16, 1024),
                                                ((1, 3, 200), F32, 8192)])
@pytest.mark.parametrize("with_tmp", [True, False], ids=["sharedTmpBuffer", "framework"])
def test_layer_norm_on_a_core(product, shape, dtype, size, with_tmp):
    d = Direct(shape, dtype, product, size=size, tmp=with_tmp)
    for a, b in zip(d.run(), d.expected()):
        same_bits(a, b)
    same_bits(d.x.read().reshape(shape), d.data[0])   # no reuse: inputX unchanged


def test_the_caller_tiling_is_rewritten_for_a_tail():
    d = Direct((3, 7, 24), F32, size=1200)
    assert (d.tiling.bshCurLength, d.tiling.bsCurLength) == (96, 4)
    d.run()
    assert (d.tiling.bshCurLength, d.tiling.bsCurLength) == (24, 1)


def test_float_reuse_leaves_chunks_of_rstd_d_gamma_in_input_x():
    """§8.5: [3, 7, 24] with isReuseSource and 1200 bytes: one = 144 (6 rows), 3 chunks and a
    3-row tail; inputX's first rows end as the tail's and the third chunk's (rstd*d)*gamma."""
    d = Direct((3, 7, 24), F32, size=1200, reuse=True)
    assert d.tiling.oneTmpSize == 144 and d.tiling.numberOfTmpBuf == 2
    for a, b in zip(d.run(), d.expected()):
        same_bits(a, b)
    state = naive.layer_norm_reuse_state(*d.data, 1e-5, 6)
    same_bits(d.x.read().reshape(21, 24), state)


def test_the_950_ignores_reuse():
    d = Direct((3, 7, 24), F32, "atlas-350", size=1200, reuse=True)
    for a, b in zip(d.run(), d.expected()):
        same_bits(a, b)
    same_bits(d.x.read().reshape(3, 7, 24), d.data[0])


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
def test_output_may_be_input_x(product):
    """DOC: output and inputX may share memory (without reuse x is last read before y is
    written)."""
    d = Direct((3, 7, 24), F32, product, size=1200)
    y, mean, var = d.run(output=d.x)
    want = d.expected()
    same_bits(y, want[0])
    same_bits(mean, want[1])
    same_bits(var, want[2])


# --- CANN's kernel unit test UT-K (§10.3) -----------------------------------------------------------

@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
@pytest.mark.parametrize("shape", [(2, 32, 16), (2, 16, 32)])
@pytest.mark.parametrize("dtype", [F16, F32])
@pytest.mark.parametrize("reuse", [False, True])
def test_ut_k_zero_inputs_give_zero_bytes(product, shape, dtype, reuse, recwarn):
    """All-zero x, gamma, beta; epsilon (T)0.001; the framework-temp overload with a tiling of
    the popped stack's size passed in floats (a quarter of it); every output byte 0x00."""
    zeros = (np.zeros(shape, dtype), np.zeros(shape[2], dtype), np.zeros(shape[2], dtype))
    d = Direct(shape, dtype, product, data=zeros, epsilon=0.001, reuse=reuse, tmp=False)
    d.tiling = lngb.GetLayerNormNDTilingInfo(shape, d.core.free_bytes // 4, dtype.itemsize, reuse,
                                             product=product)
    for t in (d.y, d.mean, d.var):      # garbage first, so that "0" means "written 0"
        t.write(np.full(t.size, -3.0, dtype))
    if dtype == F16 and reuse and product != "atlas-350":
        with pytest.warns(lngb.LngbWarning, match="may not be effective"):
            outputs = d.run()
    else:
        outputs = d.run()
    for a in outputs:
        assert not a.view(np.uint8).any()


# --- errors (§1.6) ----------------------------------------------------------------------------------

def test_a_temp_size_below_the_min_is_a_tiling_error():
    x, gamma, beta = make_data((3, 7, 24), F32)
    small, _ = min_max((3, 7, 24), F32)
    lngb.emulate_layer_norm(x, gamma, beta, stack_buffer_size=small)   # the min itself is fine
    for size in (small - 32, small - 4):
        with pytest.raises(lngb.TilingError):
            lngb.emulate_layer_norm(x, gamma, beta, stack_buffer_size=size)


def test_a_temp_size_that_does_not_fit_is_a_capacity_error():
    shape = (4, 64, 64)
    x, gamma, beta = make_data(shape, F32)
    _, big = min_max(shape, F32)    # legal for the host, but not beside 128 KiB of x and y
    with pytest.raises(lngb.CapacityError):
        lngb.emulate_layer_norm(x, gamma, beta, stack_buffer_size=big)


def test_inputs_that_do_not_fit_one_ub_name_the_multi_core_forward():
    x, gamma, beta = make_data((8, 64, 1024), F32)
    with pytest.raises(lngb.CapacityError, match="emulate_layer_norm_forward"):
        lngb.emulate_layer_norm(x, gamma, beta)


@pytest.mark.parametrize("change", [
    dict(x=np.ones((1, 2, 16), np.float64), gamma=np.ones(16, np.float64),
         beta=np.zeros(16, np.float64)),
    dict(x=np.ones((1, 2, 16), np.int32), gamma=np.ones(16, np.int32), beta=np.zeros(16, np.int32)),
    dict(gamma=np.ones(16, F16)),                     # x float, gamma half
    dict(gamma=np.ones(32, F32)),                     # gamma's length is not H
    dict(x=np.ones((2, 16), F32)),                    # not [B, S, H]
    dict(epsilon="1e-5"),
], ids=["float64", "int32", "mixed", "gamma-length", "2-d", "epsilon"])
def test_bad_arguments_are_invalid(change):
    args = dict(zip(("x", "gamma", "beta"), make_data((1, 2, 16), F32)))
    kw = {k: v for k, v in change.items() if k not in args}
    args.update({k: v for k, v in change.items() if k in args})
    with pytest.raises(lngb.InvalidArgumentError):
        lngb.emulate_layer_norm(args["x"], args["gamma"], args["beta"], **kw)


def test_bad_dtype_on_a_core_is_invalid():
    core = lngb.AICore()
    t = [core.alloc(64, np.int32) for _ in range(6)] + [core.alloc(2048, np.uint8)]
    tiling = lngb.GetLayerNormNDTilingInfo((1, 8, 8), 2048, 4, False)
    with pytest.raises(lngb.InvalidArgumentError):
        lngb.LayerNorm(*t, 1e-5, tiling)


def test_unsupported_products():
    x, gamma, beta = make_data((1, 2, 16), F32)
    for product in ("atlas-training", "atlas-9000"):
        with pytest.raises(lngb.UnsupportedProductError):
            lngb.emulate_layer_norm(x, gamma, beta, product=product)


# --- the multi-core forward (§9.4, §7.3) ------------------------------------------------------------

def assert_within_the_bound(result, x, gamma, beta, epsilon):
    y64, mu, var64 = naive.layer_norm_float64(x, gamma, beta, epsilon)
    by, bm, bv = naive.layer_norm_error_bound(x, gamma, beta, epsilon)
    assert (np.abs(result.output.astype(np.float64) - y64) <= by).all()
    assert (np.abs(result.mean.astype(np.float64) - mu) <= bm).all()
    assert (np.abs(result.variance.astype(np.float64) - var64) <= bv).all()


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
def test_the_forward_on_4_64_256(product):
    """The issue's shape, on 1, 3 and 8 cores with 1 and 2 threads: the oracle's bits and the
    float64 bound (numerics only: fast mode whatever --lngb-mode says)."""
    x, gamma, beta = make_data((4, 64, 256), F32, seed=11)
    first = None
    for block_dim in (1, 3, 8):
        for threads in (1, 2):
            r = lngb.emulate_layer_norm_forward(x, gamma, beta, product=product,
                                                block_dim=block_dim, threads=threads, mode="fast")
            assert len(r.cores) == block_dim
            if first is None:
                first = r
                assert_matches_oracle(r, x, gamma, beta, 1e-5, product)
                assert_within_the_bound(r, x, gamma, beta, 1e-5)
            for a, b in ((r.output, first.output), (r.mean, first.mean),
                         (r.variance, first.variance)):
                same_bits(a, b)


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("shape, dtype, block_dim", [((3, 7, 24), F32, 4), ((2, 16, 64), F16, 3),
                                                     ((2, 8, 256), F32, 8)])
def test_the_forward_equals_emulate_layer_norm(product, shape, dtype, block_dim):
    x, gamma, beta = make_data(shape, dtype, seed=5)
    single = lngb.emulate_layer_norm(x, gamma, beta, product=product)
    multi = lngb.emulate_layer_norm_forward(x, gamma, beta, product=product, block_dim=block_dim)
    for a, b in ((multi.output, single.output), (multi.mean, single.mean),
                 (multi.variance, single.variance)):
        same_bits(a, b)
    assert_matches_oracle(multi, x, gamma, beta, 1e-5, product)


def test_the_forward_in_checked_mode_keeps_one_trace_per_core():
    x, gamma, beta = make_data((2, 8, 64), F32)
    r = lngb.emulate_layer_norm_forward(x, gamma, beta, block_dim=3, mode="checked")
    assert len(r.cores) == 3 and len(r.trace) == 3 and all(len(t) > 0 for t in r.trace)
    assert_matches_oracle(r, x, gamma, beta, 1e-5, "atlas-a2")
    assert r.cost.cycles > 0
