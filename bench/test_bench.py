"""Emulator vs numpy golden, side by side in one run (`pytest bench --benchmark-only`).

Compare the two rows of each group; `python bench/ratios.py` prints the ratios directly.
"""
import subprocess
import sys

import pytest

from cases import CASES

COLD_START = ("import numpy as np, lngb; x = np.arange(64, dtype=np.float32).reshape(1, 8, 8); "
              "lngb.emulate(x, x)")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("side", ["emulator", "numpy"])
def test_speed(benchmark, case, side):
    emulator, golden = CASES[case]()
    func = emulator if side == "emulator" else golden
    func()  # compile / record outside the timing
    benchmark.group = case
    benchmark(func)


def test_cold_start_with_a_warm_numba_cache(benchmark):
    subprocess.run([sys.executable, "-c", COLD_START], check=True)  # warms the cache
    benchmark.group = "cold start"
    benchmark.pedantic(subprocess.run, args=([sys.executable, "-c", COLD_START],),
                       kwargs=dict(check=True), rounds=3, iterations=1)
