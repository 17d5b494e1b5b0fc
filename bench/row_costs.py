"""What one instruction row costs the executor: each row below, recorded once, is executed
20 000 times in one `TABLE.kernels.execute` call (one core), and in one
`TABLE.kernels.run_schedule` call on 16 cores in lock step (as the replay runs the 950's
backward; ns a row per core); medians of 15 runs.

    python bench/row_costs.py
"""
import time

import numpy as np

import lngb
from lngb.runtime.recording import NO_GM
from lngb.runtime.schedule import interleave
from lngb.vector_ops import (Add, BinaryRepeatParams, Cast, DataCopy, Duplicate, DuplicateLane,
                             Mul, Muls, PipeBarrier, PIPE_V, RoundMode, Sqrt, UnaryRepeatParams,
                             WholeReduceSum)
from lngb.vector_ops.table import TABLE
from lngb.vector_ops.walk import GRANULE

REPEAT = 20_000


def rows():
    core = lngb.AICore("atlas-350")
    a, b, c = (core.alloc(2048, np.float32) for _ in range(3))
    h, h2 = core.alloc(2048, np.float16), core.alloc(2048, np.float16)
    r0, r1 = core.vreg(0, np.float32), core.vreg(1, np.float32)
    calls = {
        "event (PipeBarrier)": lambda: PipeBarrier(PIPE_V),
        "64-lane float Add": lambda: Add(c, a, b, 64),
        "512-lane float Add": lambda: Add(c, a, b, 512),
        "one-lane float Mul (mask form)": lambda: Mul(r0, r1, r1, 1, 1, BinaryRepeatParams()),
        "one-lane Sqrt (mask form)": lambda: Sqrt(r0, r1, 1, 1, UnaryRepeatParams()),
        # doubles r0 on every repeat (inf after ~128 of them: inf * 2 costs what a number does)
        "64-lane float Muls in place (mask form)": lambda: Muls(r0, r0, 2.0, 64, 1,
                                                               UnaryRepeatParams()),
        "64-lane float Duplicate": lambda: Duplicate(c, 1.0, 64),
        "DuplicateLane": lambda: DuplicateLane(r0, r1),
        "256-byte UB -> UB DataCopy": lambda: DataCopy(c, a, 64),
        "2 KB UB -> UB DataCopy": lambda: DataCopy(c, a, 512),
        "64-lane half Mul": lambda: Mul(h, h2, h2, 64),
        "64-lane Cast half -> float": lambda: Cast(c, h, RoundMode.CAST_NONE, 64),
        "64-lane Cast float -> half": lambda: Cast(h, c, RoundMode.CAST_RINT, 64),
        "2048-lane Cast half -> float": lambda: Cast(c, h, RoundMode.CAST_NONE, 2048),
        "WholeReduceSum, 8 float repeats": lambda: WholeReduceSum(c, a, 64, 8, 1, 1, 8),
    }
    for name, call in calls.items():
        with core:
            yield name, core, core.record(call).rows


def main(cores=16):
    kernels = TABLE.kernels
    gms = (NO_GM,) * 4
    print(f"{'':34} {'one core':>10} {f'{cores} in lock step':>18}")
    for name, core, row in rows():
        program = np.ascontiguousarray(np.tile(row, (REPEAT, 1)))
        block = interleave(np.tile(core.ub, (cores, 1)), [(0, core.ub.size // GRANULE)])
        alone = median_seconds(kernels.execute, core.ub, gms, program)
        together = median_seconds(
            kernels.run_schedule, block, *gms, program, np.array([0, REPEAT]),
            np.zeros((0, 2), np.int64), np.zeros(2, np.int64), np.zeros(1, np.int64),
            np.zeros((1, cores, 4), np.int64))
        print(f"{name:34} {alone / REPEAT * 1e9:7.1f} ns "
              f"{together / REPEAT / cores * 1e9:12.1f} ns")


def median_seconds(function, *args, repeat=15):
    function(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return sorted(times)[repeat // 2]


if __name__ == "__main__":
    main()
