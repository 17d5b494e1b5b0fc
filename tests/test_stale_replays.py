"""simulate_kernel never replays a stale recording: whatever a user's kernel reads from Python
(globals, closure cells, attributes, defaults, helper functions, scalar arguments, GM read on
the host) gives, in fast and checked mode, the bits a live observed run gives."""
import types
import warnings

import numpy as np
import pytest

import lngb
from lngb.vector_ops import DataCopy, HardEvent, Muls, SetFlag, WaitFlag

pytestmark = pytest.mark.jitted

F32 = np.float32
X = np.arange(64, dtype=F32)
MODES = ("fast", "checked", "observed")


def scaled(x, y, scale):
    """y = x * scale through the UB, as the kernel of docs/testing.md."""
    ub = lngb.current_core().alloc(x.size, F32)
    DataCopy(ub, x, x.size)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Muls(ub, ub, scale, x.size)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(y, ub, x.size)


def run(kernel, *inputs, mode="fast"):
    return lngb.simulate_kernel(kernel, *inputs, outputs=[((64,), F32)], mode=mode).outputs[0]


SCALE = 2.0


def by_global(x, y):
    scaled(x, y, SCALE)


@pytest.mark.parametrize("mode", MODES)
def test_a_global_changed_between_calls(mode):
    global SCALE
    try:
        for value in (2.0, 5.0, -0.0, 2.0):
            SCALE = value
            assert np.array_equal(run(by_global, X, mode=mode), X * F32(value))
    finally:
        SCALE = 2.0


@pytest.mark.parametrize("mode", MODES)
def test_a_closure_cell_changed_between_calls(mode):
    scale = 3.0

    def kernel(x, y):
        scaled(x, y, scale)
    assert np.array_equal(run(kernel, X, mode=mode), 3 * X)
    scale = 7.0
    assert np.array_equal(run(kernel, X, mode=mode), 7 * X)


class Config:
    scale = 2.0


CONFIG = Config()
SETTINGS = types.ModuleType("settings")
SETTINGS.scale = 2.0


def by_attribute(x, y):
    scaled(x, y, CONFIG.scale)


def by_module_attribute(x, y):
    scaled(x, y, SETTINGS.scale)


def by_class_attribute(x, y):
    scaled(x, y, Config.scale)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel, holder", [(by_attribute, CONFIG),
                                             (by_module_attribute, SETTINGS),
                                             (by_class_attribute, Config)])
def test_an_attribute_changed_between_calls(mode, kernel, holder):
    try:
        for value in (2.0, 5.0):
            holder.scale = value
            assert np.array_equal(run(kernel, X, mode=mode), X * F32(value))
    finally:
        holder.scale = 2.0


def helper_scale():
    return SCALE * 2


def by_helper(x, y, factor=1.0):
    scaled(x, y, helper_scale() * factor)


@pytest.mark.parametrize("mode", MODES)
def test_a_helper_function_s_global_and_a_default_changed(mode):
    global SCALE
    try:
        assert np.array_equal(run(by_helper, X, mode=mode), 4 * X)
        SCALE = 3.0
        assert np.array_equal(run(by_helper, X, mode=mode), 6 * X)
        by_helper.__defaults__ = (10.0,)
        assert np.array_equal(run(by_helper, X, mode=mode), 60 * X)
    finally:
        SCALE, by_helper.__defaults__ = 2.0, (1.0,)


@pytest.mark.parametrize("mode", MODES)
def test_scalar_arguments_are_passed_and_keyed_by_value(mode):
    def kernel(x, scale, y):
        scaled(x, y, scale)
    for value in (2.0, 5.0, 2.0, -0.0):
        assert np.array_equal(run(kernel, X, value, mode=mode), X * F32(value))
    with pytest.raises(lngb.InvalidArgumentError, match="scalar argument"):
        run(kernel, X, object())


@pytest.mark.parametrize("value", [2.5, True, F32(3.0), np.dtype(np.float32), HardEvent.V_MTE3])
def test_a_kernel_with_a_scalar_argument_of_any_keyed_type_is_replayed(value):
    """Floats, bools, numpy scalars, dtypes and enums are keyed by value like ints: the second
    call replays the first's recording (they ran live on every call)."""
    def kernel(x, scalar, y):
        scaled(x, y, 2.0)
    calls = [lngb.simulate_kernel(kernel, X, value, outputs=[((64,), F32)]) for _ in range(2)]
    assert calls[1].cores[0].last_program is calls[0].cores[0].last_program is not None
    assert np.array_equal(calls[1].outputs[0], 2 * X)


def branch_on_gm(x, y):
    """A host read of GM: the device cannot do this, so the kernel runs live."""
    scaled(x, y, 2.0 if x.array[0] > 0 else 3.0)


@pytest.mark.parametrize("mode", ("fast", "observed"))
def test_a_host_read_of_gm_runs_live(mode):
    assert np.array_equal(run(branch_on_gm, X + 1, mode=mode), 2 * (X + 1))
    assert np.array_equal(run(branch_on_gm, X - 1, mode=mode), 3 * (X - 1))
    assert np.array_equal(run(branch_on_gm, X + 1, mode=mode), 2 * (X + 1))


def test_checked_mode_says_a_host_read_of_gm_is_not_on_the_device():
    with pytest.warns(lngb.LngbWarning, match="GlobalTensor.array.*GetValue"):
        run(branch_on_gm, X + 1, mode="checked")


def test_a_host_read_of_the_ub_in_a_kernel_runs_live():
    def kernel(x, y):
        ub = lngb.current_core().alloc(x.size, F32)
        DataCopy(ub, x, x.size)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        factor = 2.0 if ub.read()[0] > 0 else 3.0
        Muls(ub, ub, factor, x.size)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(y, ub, x.size)
    for sign, factor in ((1, 2), (-1, 3), (1, 2)):
        assert np.array_equal(run(kernel, sign * (X + 1)), factor * sign * (X + 1))


def test_a_kernel_reading_nothing_variable_still_replays():
    def kernel(x, y):
        scaled(x, y, 2.0)
    first = lngb.simulate_kernel(kernel, X, outputs=[((64,), F32)])
    again = lngb.simulate_kernel(kernel, 3 * X, outputs=[((64,), F32)])
    assert again.cores[0].last_program is not None     # replayed
    assert np.array_equal(again.outputs[0], 6 * X) and first.rows[0].shape == again.rows[0].shape


STATE = []


def by_mutable_global(x, y):
    scaled(x, y, float(len(STATE)))


def test_an_unkeyable_read_re_runs_the_kernel():
    """A list global is keyed by value; an object of no known kind makes the kernel run afresh."""
    STATE.clear()
    assert np.array_equal(run(by_mutable_global, X), 0 * X)
    STATE.append(1)
    assert np.array_equal(run(by_mutable_global, X), 1 * X)
    opaque = types.SimpleNamespace(scale=2.0)

    def kernel(x, y):
        scaled(x, y, opaque.scale)
    assert np.array_equal(run(kernel, X), 2 * X)
    opaque.scale = 4.0
    assert np.array_equal(run(kernel, X), 4 * X)


def test_every_mode_gives_observed_bits_on_a_call_sequence():
    global SCALE
    outcomes = {}
    try:
        for mode in MODES:
            outcomes[mode] = []
            for value in (2.0, 0.5, 1e30, 2.0):
                SCALE = value
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    outcomes[mode].append(run(by_global, X, mode=mode).tobytes())
    finally:
        SCALE = 2.0
    assert outcomes["fast"] == outcomes["observed"] == outcomes["checked"]


def test_getattr_with_a_computed_name_re_runs_the_kernel():
    name = "scale"

    def kernel(x, y):
        scaled(x, y, getattr(SETTINGS, name))
    try:
        for value in (2.0, 6.0):
            SETTINGS.scale = value
            assert np.array_equal(run(kernel, X), X * F32(value))
    finally:
        SETTINGS.scale = 2.0


def test_the_key_follows_chains_in_nested_functions_and_comprehensions():
    from lngb.runtime.reads import chains

    def kernel(x, y):
        values = [SETTINGS.scale for _ in range(1)]
        scaled(x, y, (lambda: CONFIG.scale)() * values[0])
    found = chains(kernel.__code__)
    assert ("global", "SETTINGS", ("scale",)) in found and ("global", "CONFIG", ("scale",)) in found


# --- several cores: fast mode replays them under the same rule ----------------------------------

def neighbours(x, out):
    """Core k copies its block out, SyncAll, then doubles its neighbour's block: right only if
    every core's first phase ran before any core's second."""
    k, n = lngb.GetBlockIdx(), lngb.GetBlockNum()
    buf = lngb.current_core().alloc(8, F32)
    DataCopy(buf, x[8 * k], 8)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(out[8 * k], buf, 8)
    lngb.vector_ops.SyncAll()
    DataCopy(buf, out[8 * ((k + 1) % n)], 8)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Muls(buf, buf, SCALE, 8)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(out[8 * (n + k)], buf, 8)


def run_cores(mode, x=X[:32]):
    return lngb.simulate_kernel(neighbours, x, outputs=[((64,), F32)], block_dim=4, mode=mode)


def test_several_cores_replay_phase_by_phase_with_observed_bits():
    global SCALE
    try:
        for value in (2.0, 3.0):
            SCALE = value
            want = run_cores("observed").outputs[0]
            assert np.array_equal(want[32:], F32(value) * np.roll(X[:32], -8))
            first, again = run_cores("fast"), run_cores("fast", X[:32] + 1)
            assert np.array_equal(first.outputs[0], want)
            assert all(core.last_program is not None for core in again.cores)   # replayed
            assert np.array_equal(again.outputs[0][32:],
                                  F32(value) * np.roll(X[:32] + 1, -8))
            assert [r.shape for r in again.rows] == [r.shape for r in first.rows]
    finally:
        SCALE = 2.0


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_several_cores_reading_data_in_python_run_live():
    def kernel(x, out):
        scaled(x, out, 2.0 if x.array[0] > 0 else 3.0)   # every core writes the same: fine
    for sign, factor in ((1, 2), (-1, 3)):
        got = lngb.simulate_kernel(kernel, sign * (X + 1), outputs=[((64,), F32)],
                                   block_dim=2).outputs[0]
        assert np.array_equal(got, factor * sign * (X + 1))


def test_a_module_imported_inside_the_kernel_is_followed_or_re_run():
    import sys
    sys.modules["lngb_test_settings"] = SETTINGS

    def kernel(x, y):
        import lngb_test_settings
        scaled(x, y, lngb_test_settings.scale)
    try:
        for value in (2.0, 9.0):
            SETTINGS.scale = value
            assert np.array_equal(run(kernel, X), X * F32(value))
    finally:
        SETTINGS.scale = 2.0
        del sys.modules["lngb_test_settings"]


def test_a_callable_object_replays_only_with_a_key_of_its_own():
    class Scaled:
        def __init__(self, scale):
            self.scale = scale

        def __call__(self, x, y):
            scaled(x, y, self.scale)

    class Keyed(Scaled):
        def cache_key(self):
            return ("Keyed", self.scale)
    for kind in (Scaled, Keyed):
        kernel = kind(2.0)
        assert np.array_equal(run(kernel, X), 2 * X)
        kernel.scale = 5.0
        again = lngb.simulate_kernel(kernel, X, outputs=[((64,), F32)])
        assert np.array_equal(again.outputs[0], 5 * X)
        assert (again.cores[0].last_program is not None) == (kind is Keyed)
