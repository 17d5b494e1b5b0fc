"""Where the operator's time goes: phase 1 of [8, 1024, 4096] float replayed on 2 threads with
every step's rows (with and without prefetching the next step's inputs), with only its GM -> UB
DataCopys, with everything but those (no prefetch), and with every core reading core 0's rows
(inputs hot in cache). Medians of interleaved runs, in ms.

    python bench/operator_breakdown.py
"""
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from cases import OPERATOR_SHAPE, THREADS  # noqa: E402

from lngb.host import prepare_operator  # noqa: E402
from lngb.runtime import schedule  # noqa: E402
from lngb.vector_ops.program import COPY, COPY_DIR, GM_TO_UB, KIND  # noqa: E402
from lngb.vector_ops.table import TABLE  # noqa: E402


def phase1_seconds(run, plan, rows, starts, gms, prefetch=True):
    jobs = schedule.lockstep_jobs(run.cores, [schedule.pad_gms(g) for g in gms],
                                  [s[0] for s in plan.schedules], THREADS, plan.lockstep[0])
    point_starts = plan.point_starts if prefetch else np.zeros_like(plan.point_starts)
    run_schedule = TABLE.kernels.run_schedule
    arrays = (rows, starts, plan.points, point_starts)
    start = time.perf_counter()
    schedule.in_parallel(jobs, THREADS, lambda job: schedule.run_job(
        plan, run_schedule, 0, *job, program_rows=arrays))
    return time.perf_counter() - start


def copies_in(program):
    return (program[:, KIND] == COPY) & (program[:, COPY_DIR] == GM_TO_UB)


def only(plan, keep):
    programs = [p[keep(p)] for p in plan.programs]
    return (np.concatenate(programs),
            np.cumsum([0] + [len(p) for p in programs]).astype(np.int64))


def main(repeat=9):
    rng = np.random.default_rng(0)
    dy, rfg = (rng.standard_normal(OPERATOR_SHAPE, np.float32) for _ in range(2))
    run = prepare_operator(dy, rfg, "atlas-a2", None, "fast")
    plan = schedule.plan(("operator breakdown", run.tiling), run.cores, run.kernel)
    variants = {
        "every row": (plan.rows, plan.starts, run.gms),
        "every row, no prefetch": (plan.rows, plan.starts, run.gms, False),
        "GM -> UB copies only": (*only(plan, copies_in), run.gms),
        "all but those copies": (*only(plan, lambda p: ~copies_in(p)), run.gms, False),
        "every row, inputs hot": (plan.rows, plan.starts, [run.gms[0]] * len(run.gms)),
    }
    print(f"phase 1 of {list(OPERATOR_SHAPE)} float, {THREADS} threads, median of {repeat}:")
    for name, ms in interleaved_medians_ms(run, plan, variants, repeat).items():
        print(f"  {name:24} {ms:6.1f} ms")


def interleaved_medians_ms(run, plan, variants, repeat):
    """Each variant's (phase1_seconds arguments) median phase-1 time in ms, over `repeat`
    rounds that run every variant in turn, after one round of warming up."""
    times = {name: [] for name in variants}
    for i in range(repeat + 1):
        for name, args in variants.items():
            seconds = phase1_seconds(run, plan, *args)
            if i:
                times[name].append(seconds)
    return {name: np.median(runs) * 1e3 for name, runs in times.items()}


if __name__ == "__main__":
    main()
