"""Where the backward's time goes: phase 1 of [8, 1024, 4096] float on the 950, replayed on 2
threads with every row, and with each kind of row left out in turn (the bytes are then wrong;
only the time is of interest). Medians of interleaved runs, in ms. The savings overlap: a row
left out also leaves the host's caches to the others.

    python bench/backward_breakdown.py
"""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from cases import OPERATOR_SHAPE, THREADS, backward_inputs  # noqa: E402
from operator_breakdown import interleaved_medians_ms, only  # noqa: E402

from lngb.backward import prepare_backward  # noqa: E402
from lngb.runtime import schedule  # noqa: E402
from lngb.vector_ops.program import (BROADCAST, COPY, COPY_DIR, ELEMENTWISE, EVENT, FLAT,  # noqa: E402
                                     KIND, OP, UB_TO_UB)
from lngb.vector_ops.table import TABLE  # noqa: E402

OPCODE = {entry.name: entry.opcode for entry in TABLE.entries}


def elementwise(program, lanes=None, names=None):
    keep = program[:, KIND] == ELEMENTWISE
    if lanes is not None:
        keep &= program[:, FLAT] == lanes
    if names is not None:
        keep &= np.isin(program[:, OP], [OPCODE[name] for name in names])
    return keep


def copies(program, ub_to_ub):
    return (program[:, KIND] == COPY) & ((program[:, COPY_DIR] == UB_TO_UB) == ub_to_ub)


LEFT_OUT = {
    "one-lane element-wise rows": lambda p: elementwise(p, lanes=1),
    "64-lane Mul, Add, Muls, Sub": lambda p: elementwise(p, 64, ["Mul", "Add", "Muls", "Sub"]),
    "64-lane Duplicate": lambda p: elementwise(p, 64, ["Duplicate"]),
    "broadcasts (Brcb)": lambda p: p[:, KIND] == BROADCAST,
    "UB -> UB copies (registers)": lambda p: copies(p, True),
    "GM <-> UB copies": lambda p: copies(p, False),
    "events": lambda p: p[:, KIND] == EVENT,
}


def main(repeat=5):
    data = backward_inputs(OPERATOR_SHAPE, np.float32)
    run = prepare_backward(data, 1e-5, "atlas-350", None, None, "fast", None)
    plan = schedule.plan(("backward breakdown", run.tiling), run.cores, run.kernel)
    variants = {"every row": (plan.rows, plan.starts, run.gms)}
    for name, rows in LEFT_OUT.items():
        variants[f"without {name}"] = (*only(plan, lambda p, rows=rows: ~rows(p)), run.gms)
    print(f"phase 1 of {list(OPERATOR_SHAPE)} float on the 950, {THREADS} threads, "
          f"median of {repeat}:")
    for name, ms in interleaved_medians_ms(run, plan, variants, repeat).items():
        print(f"  {name:40} {ms:6.1f} ms")


if __name__ == "__main__":
    main()
