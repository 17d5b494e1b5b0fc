"""Div and Sqrt on the Ascend 950 are the intrinsics (vdiv, vsqrt) by default: subnormal operands
and results are zeros of their sign (spec regbase.md §2.3, CANN's Div.md); div_sqrt="ieee"
keeps them. The other products keep them by default. emulate_layer_norm_grad,
emulate_layer_norm_backward and simulate_kernel take the switch."""
import numpy as np
import pytest

import lngb
from lngb import InvalidArgumentError
from lngb.vector_ops import (PIPE_V, DataCopy, Div, HardEvent, PipeBarrier, SetFlag, Sqrt,
                              WaitFlag)

import naive
from test_layer_norm_grad import same_bits

pytestmark = pytest.mark.jitted

F32 = np.dtype(np.float32)


def test_the_default_is_the_products():
    assert lngb.AICore("atlas-350").div_sqrt == "ftz"
    for product in ("atlas-a2", "atlas-a3", "atlas-inference"):
        assert lngb.AICore(product).div_sqrt == "ieee"
    assert lngb.AICore("atlas-350", div_sqrt="ieee").div_sqrt == "ieee"
    assert lngb.AICore("atlas-a2", div_sqrt="ftz").div_sqrt == "ftz"
    with pytest.raises(InvalidArgumentError, match="div_sqrt"):
        lngb.AICore("atlas-350", div_sqrt="fast")


def tiny_variance_inputs(dtype=F32, shape=(1, 2, 64)):
    """Rows of variance 1e-13 and epsilon 1e-30: the 950 kernel's (variance + eps)^3, about
    1e-39, is subnormal, so its Sqrt and Div see a subnormal operand (ftz: 1/sqrt(0) = inf)."""
    rng = np.random.default_rng(11)
    dy, x = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    mean = x.mean(-1).astype(dtype)
    variance = np.full(shape[:2], 1e-13, dtype)
    gamma = rng.standard_normal(shape[-1]).astype(dtype)
    return dy, x, variance, mean, gamma


def test_layer_norm_grad_on_the_950_flushes_by_default_and_ieee_keeps(mode):
    data = tiny_variance_inputs()
    eps = 1e-30
    flushed = naive.layer_norm_grad(*data, eps, regbase=True, ftz=True)
    kept = naive.layer_norm_grad(*data, eps, regbase=True, ftz=False)
    assert not np.array_equal(flushed[0], kept[0], equal_nan=True)   # the case can tell them
    default = lngb.emulate_layer_norm_grad(*data, epsilon=eps, product="atlas-350", mode=mode)
    ieee = lngb.emulate_layer_norm_grad(*data, epsilon=eps, product="atlas-350", mode=mode,
                                        div_sqrt="ieee")
    for got, want in ((default, flushed), (ieee, kept)):
        same_bits(got.pd_x, want[0])
        same_bits(got.res_for_gamma, want[1])
    assert default.core.div_sqrt == "ftz" and ieee.core.div_sqrt == "ieee"
    a2 = lngb.emulate_layer_norm_grad(*data, epsilon=eps, mode=mode)
    same_bits(a2.pd_x, naive.layer_norm_grad(*data, eps, ftz=False)[0])


def test_the_backward_takes_the_switch(mode):
    data = tiny_variance_inputs(shape=(2, 3, 64))
    eps = 1e-30
    runs = {d: lngb.emulate_layer_norm_backward(*data, epsilon=eps, product="atlas-350",
                                                block_dim=2, mode=mode, div_sqrt=d)
            for d in (None, "ftz", "ieee")}
    for d, ftz in ((None, True), ("ftz", True), ("ieee", False)):
        same_bits(runs[d].pd_x, naive.layer_norm_grad(*data, eps, regbase=True, ftz=ftz)[0])
    with pytest.raises(InvalidArgumentError, match="div_sqrt"):
        lngb.emulate_layer_norm_backward(*data, product="atlas-350", div_sqrt="exact")


def divide_and_root(a, b, out):
    """out = [a / b | sqrt(a)] over 64 floats each."""
    core = lngb.current_core()
    x, y, r = (core.alloc(64, F32) for _ in range(3))
    DataCopy(x, a, 64)
    DataCopy(y, b, 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Div(r, x, y, 64)
    PipeBarrier(PIPE_V)
    Sqrt(x, x, 64)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(out, r, 64)
    DataCopy(out[64], x, 64)


def test_simulate_kernel_takes_the_switch(mode):
    a = np.full(64, 1e-39, F32)       # subnormal
    b = np.full(64, 3.0, F32)
    b[:8] = 1e-37                     # a / b is normal there: the flush of the operand shows
    flush = np.float32(0.0)
    want_ftz = np.concatenate([np.full(64, flush, F32), np.zeros(64, F32)])
    want_ieee = np.concatenate([(a / b).astype(F32), np.sqrt(a).astype(F32)])
    for product, div_sqrt, want in (("atlas-350", None, want_ftz), ("atlas-350", "ieee", want_ieee),
                                    ("atlas-a2", None, want_ieee), ("atlas-a2", "ftz", want_ftz)):
        out = lngb.simulate_kernel(divide_and_root, a, b, outputs=[((128,), F32)],
                                   product=product, mode=mode, div_sqrt=div_sqrt).outputs[0]
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), (product, div_sqrt)


def run_to_the_end(debugger, cores):
    """Every core run until its end, each waiting at a SyncAll for the others."""
    from lngb.debug import WaitingAtSyncAll
    ended = set()
    while len(ended) < cores:
        for c in sorted(set(range(cores)) - ended):
            debugger.focus(c)
            try:
                if debugger.run()[0] == "end":
                    ended.add(c)
            except WaitingAtSyncAll:
                pass


def test_the_debuggers_take_the_switch():
    from lngb.debug import BackwardDebugger, KernelDebugger
    data = tiny_variance_inputs(shape=(2, 3, 64))
    for div_sqrt, ftz in ((None, True), ("ieee", False)):
        debugger = BackwardDebugger(*data, epsilon=1e-30, product="atlas-350", block_dim=2,
                                    div_sqrt=div_sqrt)
        run_to_the_end(debugger, 2)
        same_bits(debugger.results()[0],
                  naive.layer_norm_grad(*data, 1e-30, regbase=True, ftz=ftz)[0])
    a, b = np.full(64, 1e-39, F32), np.full(64, 3.0, F32)
    debugger = KernelDebugger(divide_and_root, a, b, outputs=[((128,), F32)],
                              product="atlas-350", div_sqrt="ieee")
    run_to_the_end(debugger, 1)
    assert np.array_equal(debugger.results()[0][64:], np.sqrt(a))


def test_lngb_run_takes_div_sqrt(tmp_path, capsys):
    from lngb.cli import main
    data = tiny_variance_inputs()
    names = ("dy", "x", "variance", "mean", "gamma")
    files = []
    for name, array in zip(names, data):
        path = tmp_path / f"{name}.bin"
        array.tofile(path)
        files += [f"--{name}", str(path)]
    for div_sqrt, ftz in (("ftz", True), ("ieee", False)):
        out = tmp_path / div_sqrt
        assert main(["run", "--api", "layer-norm-grad", "--shape", "1,2,64", "--product",
                     "atlas-350", "--epsilon", "1e-30", "--div-sqrt", div_sqrt,
                     "--out-dir", str(out), *files]) == 0
        pd_x = np.fromfile(out / "output_pd_x.bin", F32).reshape(1, 2, 64)
        same_bits(pd_x, naive.layer_norm_grad(*data, 1e-30, regbase=True, ftz=ftz)[0])
    with pytest.raises(SystemExit):
        main(["run", "--api", "layer-norm-grad", "--shape", "1,2,64", "--div-sqrt", "fast",
              *files])
    capsys.readouterr()


def test_lngb_debug_takes_div_sqrt_where_something_divides(tmp_path, capsys):
    from lngb.cli import main
    commands = tmp_path / "commands.txt"
    commands.write_text("continue\n")
    assert main(["debug", "--api", "backward", "--product", "atlas-350", "--div-sqrt", "ieee",
                 "--commands", str(commands)]) == 0
    assert "instructions and events recorded" in capsys.readouterr().out
    assert main(["debug", "--div-sqrt", "ieee", "--commands", str(commands)]) != 0
    assert "--div-sqrt is an option of --api backward and --kernel" in capsys.readouterr().err
