"""Bad or unusual input, aliasing and memory: each case an adversarial user found, as a test."""
import time
import tracemalloc

import numpy as np
import pytest
from conftest import rejected

import lngb
from lngb import (CapacityError, HazardError, InvalidArgumentError, LngbWarning, OutOfBoundsError)
from lngb.host import prepare_operator
from lngb.vector_ops import Add, Adds, DataCopy, Muls, SetVectorMask

pytestmark = pytest.mark.jitted

SEED = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
F32 = np.float32


# --- outputs that share bytes with what the kernel reads -------------------------------------

def api_call(mode, shape, place_outputs):
    """LayerNormGradBeta on `shape` float with the outputs placed by place_outputs(dy, rfg, core)
    -> (gamma, beta); returns (core, gamma, beta, call)."""
    core = lngb.AICore(mode=mode)
    dy, rfg = core.alloc(shape, F32), core.alloc(shape, F32)
    data = np.arange(np.prod(shape), dtype=F32).reshape(shape)
    dy.write(data)
    rfg.write(data)
    gamma, beta = place_outputs(dy, rfg, core)
    _, least = lngb.GetLayerNormGradBetaMaxMinTmpSize(shape, 4, False)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(shape, least, 4, False)
    tmp = core.alloc(least, np.uint8)
    return core, gamma, beta, lambda: lngb.LayerNormGradBeta(gamma, beta, rfg, dy, tmp, tiling)


ALIASES = {
    "gamma_on_dy": ((1, 8, 8), lambda dy, rfg, core: (dy, core.alloc(8, F32)),
                    r"outputPdGamma \(UB bytes \[0, 32\)\) shares bytes \[0, 32\) with inputDy"),
    "beta_inside_gamma": ((1, 8, 16), lambda dy, rfg, core: (lambda g: (g, g[8]))(
        core.alloc(32, F32)), r"outputPdGamma .* shares bytes \[\d+, \d+\) with outputPdBeta"),
}


@pytest.mark.parametrize("case", list(ALIASES))
def test_outputs_sharing_bytes_keep_the_device_bits_and_say_so(case):
    shape, place, message = ALIASES[case]
    results = []
    for mode in ("fast", "observed", "fast"):   # the replay warns too
        core, gamma, beta, call = api_call(mode, shape, place)
        with pytest.warns(LngbWarning, match=message):
            call()
        results.append((gamma.read().copy(), beta.read().copy()))
    assert all(np.array_equal(r[0], results[0][0]) and np.array_equal(r[1], results[0][1])
               for r in results)
    core, *_, call = api_call("checked", shape, place)
    assert "the results are wrong" in rejected(HazardError, call, core)


def test_outputs_apart_from_the_inputs_raise_nothing():
    core, gamma, beta, call = api_call("checked", (1, 8, 8), lambda dy, rfg, core: (
        core.alloc(8, F32), core.alloc(8, F32)))
    call()
    assert gamma.read()[1] == sum(float(r * 8 + 1) ** 2 for r in range(8))


def test_overflow_of_the_950_operator_does_not_depend_on_block_dim():
    h = np.full((1, 64, 64), 200, np.float16)
    want = lngb.emulate(h, h, product="atlas-350").pd_gamma
    assert (want == 65504).all()
    for block_dim in (1, 2):
        got = lngb.emulate_operator(h, h, product="atlas-350", block_dim=block_dim)
        assert np.array_equal(got.pd_gamma, want), block_dim


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_ub_to_ub_copy_onto_part_of_its_source_is_refused():
    core = lngb.AICore()
    a = core.alloc(128, F32)
    a.write(np.arange(128, dtype=F32))
    with core:
        message = rejected(InvalidArgumentError, lambda: DataCopy(a[8], a, 64), core)
        assert "overlap in part" in message
        DataCopy(a, a, 64)            # the same bytes: a no-op, allowed
        DataCopy(a[64], a, 64)        # next to each other: fine
    assert np.array_equal(a.read()[64:], np.arange(64))


# --- errors that were raw Python or misleading -------------------------------------------------

def test_operator_arguments():
    x = np.ones((1, 8, 64), F32)
    with pytest.raises(InvalidArgumentError, match=r"block_dim must be an integer or None, got \[4\]"):
        lngb.emulate_operator(x, x, block_dim=[4])
    for shape in ((1, 8, 0), (0, 8, 64)):
        with pytest.raises(InvalidArgumentError, match="has no elements"):
            lngb.operator_tiling(shape, F32, "atlas-a2")
    with pytest.raises(InvalidArgumentError, match="shape must be"):
        lngb.operator_tiling((8, 64), F32, "atlas-a2")


def test_backward_arguments_that_numpy_counts_as_integers_are_refused():
    x, v, g = np.ones((1, 8, 16), F32), np.ones((1, 8), F32), np.ones(16, F32)
    for kwargs, name in ((dict(block_dim=np.timedelta64(2)), "block_dim"),
                         (dict(tile_rows=True), "tile_rows"),
                         (dict(epsilon=np.timedelta64(1)), "epsilon")):
        with pytest.raises(InvalidArgumentError, match=f"emulate_layer_norm_backward: {name}"):
            lngb.emulate_layer_norm_backward(x, x, v, v, g, **kwargs)
    for kwargs, name in ((dict(stack_buffer_size=np.timedelta64(2)), "stack_buffer_size"),
                         (dict(stack_buffer_size=-1), "stack_buffer_size"),
                         (dict(epsilon=10**400), "epsilon")):
        with pytest.raises(InvalidArgumentError, match=f"emulate_layer_norm_grad: {name}"):
            lngb.emulate_layer_norm_grad(x, x, v, v, g, **kwargs)


def test_a_huge_broadcast_input_is_refused_before_any_copy():
    a = np.broadcast_to(np.float32(1), (2**20, 2**20, 2**10))
    start = time.perf_counter()
    with pytest.raises(CapacityError, match="would have to be copied"):
        lngb.emulate_operator(a, a)
    with pytest.raises(CapacityError, match="input 0 needs 4398046511104 bytes"):
        lngb.simulate_kernel(lambda *gm: None, np.broadcast_to(F32(0), (2**20, 2**20)),
                             outputs=[])
    with pytest.raises(CapacityError, match="output 0 needs"):
        lngb.simulate_kernel(lambda *gm: None, outputs=[((2**30, 2**30), F32)])
    assert time.perf_counter() - start < 5


def test_count_form_operands_that_are_not_local_tensors():
    core = lngb.AICore()
    a, b = core.alloc(64, F32), core.alloc(64, F32)
    for bad in (np.ones(64, F32), [1.0] * 64, None):
        message = rejected(InvalidArgumentError, lambda bad=bad: Add(a, b, bad, 64), core)
        assert "src1 must be a LocalTensor" in message
    assert "dst must be a LocalTensor" in rejected(
        InvalidArgumentError, lambda: Add(np.ones(64, F32), a, b, 64), core)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_scalars_that_are_not_numbers_or_too_large():
    core = lngb.AICore()
    a, c = core.alloc(64, F32), core.alloc(64, F32)
    assert "not a number" in rejected(InvalidArgumentError, lambda: Adds(c, a, None, 64), core)
    assert "beyond the range of a double" in rejected(
        InvalidArgumentError, lambda: Muls(c, a, 10**400, 64), core)
    Muls(c, a, 10**39, 64)            # a double beyond float: infinity, as RNE gives


def test_scalar_accesses_check_their_arguments_before_any_record():
    core = lngb.AICore(mode="observed")
    t = core.alloc(64, F32)
    for call, text in ((lambda: t.GetValue(1.5), "index must be an integer"),
                       (lambda: t.SetValue(0, "x"), "must be a number"),
                       (lambda: t.SetValue(70, 1.0), "outside"),
                       (lambda: t[1.7], "index must be an integer")):
        with pytest.raises(InvalidArgumentError if "outside" not in text else OutOfBoundsError,
                           match=text):
            call()
    assert core.trace == []


def test_mask_dtype_and_alloc_dtype():
    core = lngb.AICore()
    with core:
        with pytest.raises(InvalidArgumentError, match="'bogus' is not a numpy dtype"):
            SetVectorMask(1, 1, dtype="bogus")
    for dtype in (object, np.float64, np.complex64, "bogus"):
        with pytest.raises(InvalidArgumentError, match="alloc"):
            core.alloc(8, dtype)
    for shape in (0, -1, 1.5, (2, 0), "8", None):
        with pytest.raises(InvalidArgumentError, match="alloc"):
            core.alloc(shape, F32)


def test_operands_on_two_cores_are_named_with_their_cores():
    core_a, core_b = lngb.AICore(), lngb.AICore("atlas-350")
    a, b = core_a.alloc(64, F32), core_a.alloc(64, F32)
    dst = core_b.alloc(64, F32)
    message = rejected(InvalidArgumentError, lambda: Add(dst, a, b, 64), core_b)
    assert "dst on AICore('atlas-350'" in message and "src0 on AICore('atlas-a2'" in message


def test_the_debuggers_refuse_bad_arguments_in_words():
    dbg = lngb.debug.Debugger(SEED, SEED)
    for call, text in ((lambda: dbg.view("nope"), "no tensor named 'nope'"),
                       (lambda: dbg.watch(10, 5), r"\[10, 5\) is not a byte range"),
                       (lambda: dbg.watch(-1, 5), r"\[-1, 5\) is not a byte range"),
                       (lambda: dbg.watch("outputPdGamma"), "expects a LocalTensor"),
                       (lambda: dbg.step(-2), "n must be a whole number"),
                       (lambda: dbg.run_until("Muls"), "did you mean Mul"),
                       (lambda: dbg.results(), "only once it has run to the end")):
        with pytest.raises(InvalidArgumentError, match=text):
            call()
    dbg.run()
    assert dbg.results()[0][0] == 8960
    op = lngb.debug.OperatorDebugger(np.ones((1, 4, 32), F32), np.ones((1, 4, 32), F32),
                                     block_dim=2)
    for bad in (-1, 2, 1.0, "0"):
        with pytest.raises(InvalidArgumentError, match="focus: core"):
            op.focus(bad)
    with pytest.raises(InvalidArgumentError, match=r"cores \[0, 1\] have not run to the end"):
        op.results()
    op.run_all()
    assert (op.results()[0] == 4).all()


# --- memory ------------------------------------------------------------------------------------

@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_read_only_inputs_are_read_in_place():
    """prepare_operator is where emulate_operator makes its inputs GM: a 4 MB read-only input is
    not copied there; and a read-only input gives a writable copy's bits."""
    x = np.random.default_rng(0).standard_normal((1, 256, 4096)).astype(F32)
    x.flags.writeable = False
    tracemalloc.start()
    try:
        run = prepare_operator(x, x, "atlas-a2", 4, "fast")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes, f"{peak} bytes allocated for a {x.nbytes}-byte input"
    assert np.shares_memory(run.gms[0][0], x) and np.shares_memory(run.gms[3][1], x)
    small = x[:, :16, :512].copy()
    small.flags.writeable = False
    want = lngb.emulate_operator(small.copy(), small.copy(), block_dim=4)
    got = lngb.emulate_operator(small, small, block_dim=4)
    assert np.array_equal(got.pd_gamma, want.pd_gamma)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        core = lngb.AICore()
        with core:
            DataCopy(lngb.GlobalTensor(x.reshape(-1)[:64]), core.alloc(64, F32), 64)


def test_a_one_ub_sweep_of_a_model_size_shape_refuses_at_once():
    start = time.perf_counter()
    with pytest.raises(CapacityError, match="multi-core operator"):
        lngb.sweep([(8, 1024, 4096)], ["float32"], ["atlas-a2"])
    assert time.perf_counter() - start < 1
