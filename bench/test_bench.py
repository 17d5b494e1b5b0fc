"""Emulator vs numpy golden, side by side in one run (`pytest bench --benchmark-only`).

Compare the two rows of each group; `python bench/ratios.py` prints the ratios directly.
"""
import os
import subprocess
import sys

import pytest

from cases import CASES, torch_case

COLD_START = ("import numpy as np, lngb; x = np.arange(64, dtype=np.float32).reshape(1, 8, 8); "
              "lngb.emulate(x, x)")


def warm_caches():
    """Run COLD_START once, so that what a user's second run of Python finds cached is cached:
    Numba's kernels and Python's bytecode. The warm-up writes bytecode even where
    PYTHONDONTWRITEBYTECODE is set (it is on the machines of bench/HISTORY.md: every start then
    compiled lngb's modules from source, 0.2 s); the timed runs keep the environment as it is."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", COLD_START], check=True, env=environment)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("side", ["emulator", "numpy"])
def test_speed(benchmark, case, side):
    emulator, golden = CASES[case]()
    func = emulator if side == "emulator" else golden
    func()  # compile / record outside the timing
    benchmark.group = case
    benchmark(func)


@pytest.mark.parametrize("mode", ["fast", "observed", "checked"])
def test_modes_on_4_8_512_float(benchmark, mode):
    """Observed mode: a few microseconds of tracing per instruction on top of validation;
    checked mode: within 10x of fast (target)."""
    import numpy as np
    import lngb
    x = np.random.default_rng(0).standard_normal((4, 8, 512)).astype(np.float32)
    lngb.emulate(x, x, mode=mode)
    benchmark.group = "modes [4,8,512] float"
    benchmark(lambda: lngb.emulate(x, x, mode=mode))


@pytest.mark.parametrize("mode", ["fast", "checked"])
def test_operator_modes_on_8_64_256_float(benchmark, mode):
    """Checked mode of a multi-core operator replays its plan once the plan's check has
    passed: within 3x of fast (target)."""
    import numpy as np
    import lngb
    y = np.random.default_rng(0).standard_normal((8, 64, 256)).astype(np.float32)
    lngb.emulate_operator(y, y, mode=mode)
    benchmark.group = "operator modes [8,64,256] float"
    benchmark(lambda: lngb.emulate_operator(y, y, mode=mode))


def test_sweep_of_every_temp_size_for_4_8_512_float(benchmark):
    """About 4 000 tilings in 32-byte steps, cost model included (target: under 10 s)."""
    import lngb
    benchmark.group = "sweep"
    benchmark.pedantic(lngb.sweep, args=([(4, 8, 512)], ["float32"], ["atlas-a2"]),
                       setup=lngb.clear_caches, rounds=3, iterations=1)


MODEL_SIZE_SWEEP = [sys.executable, "-m", "lngb", "sweep", "--shape", "8,1024,4096",
                    "--block-dim", "8,16,24,48"]


def test_model_size_sweep_in_a_new_process(benchmark):
    """The operator sweep of issue 14's example, in a new process (target: under 5 s)."""
    benchmark.group = "sweep"
    benchmark.pedantic(subprocess.run, args=(MODEL_SIZE_SWEEP,),
                       kwargs=dict(check=True, capture_output=True), rounds=3, iterations=1)


def test_cold_start_with_a_warm_numba_cache(benchmark):
    warm_caches()
    benchmark.group = "cold start"
    benchmark.pedantic(subprocess.run, args=([sys.executable, "-c", COLD_START],),
                       kwargs=dict(check=True), rounds=3, iterations=1)


@pytest.mark.parametrize("side", ["emulator", "torch"])
def test_operator_against_torch(benchmark, side):
    """emulate_operator [8,1024,4096] float vs torch's native_layer_norm_backward (gamma and
    beta), both on 2 threads (target: at least half of torch's throughput)."""
    case = torch_case()
    if case is None:
        pytest.skip("torch is not installed (pip install torch==2.13.0)")
    func = case[0] if side == "emulator" else case[1]
    func()
    benchmark.group = "operator [8,1024,4096] float vs torch, 2 threads"
    benchmark(func)


def test_operator_breakdown_runs(capsys):
    """bench/operator_breakdown.py still runs (it uses the operator's internals)."""
    import operator_breakdown
    operator_breakdown.main(repeat=1)
    assert "GM -> UB copies only" in capsys.readouterr().out


def test_backward_breakdown_runs(capsys):
    """bench/backward_breakdown.py still runs (it uses the backward's internals)."""
    import backward_breakdown
    backward_breakdown.main(repeat=1)
    assert "without one-lane element-wise rows" in capsys.readouterr().out


def readme_kernel(x, y):
    """The one-core kernel of docs/testing.md, each core its share."""
    import numpy as np
    import lngb
    from lngb.vector_ops import DataCopy, HardEvent, Muls, SetFlag, WaitFlag
    n = x.size // lngb.GetBlockNum()
    x, y = x[n * lngb.GetBlockIdx()], y[n * lngb.GetBlockIdx()]
    ub = lngb.current_core().alloc(n, np.float32)
    DataCopy(ub, x, n)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Muls(ub, ub, 2.0, n)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(y, ub, n)


@pytest.mark.parametrize("block_dim", [1, 4])
def test_a_user_kernel_on_one_and_four_cores(benchmark, block_dim):
    """simulate_kernel, warm, fast mode: the replay key's cost on one core, and four cores
    replayed phase by phase (target: four within 6x of one)."""
    import numpy as np
    import lngb
    x = np.arange(256, dtype=np.float32)

    def call():
        return lngb.simulate_kernel(readme_kernel, x, outputs=[((256,), np.float32)],
                                    block_dim=block_dim)
    call()
    benchmark.group = "simulate_kernel, the kernel of docs/testing.md"
    benchmark(call)
