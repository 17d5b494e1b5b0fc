"""The cost model and the tiling sweep."""
import itertools
import json

import numpy as np
import pytest

import lngb
from lngb.cost import CONSTANTS, CostModel, constants_table
from lngb.sweep import format_table, sweep, write_csv
from lngb.vector_ops import (MASK_PLACEHOLDER, PIPE_V, Add, BinaryRepeatParams, Cast,
                             DataCopy, PipeBarrier, RoundMode, WholeReduceSum)


KEYS = itertools.count()


def rows_of(core, body):
    core.run_recorded(("test-cost", next(KEYS)), body)  # a fresh key: always a new recording
    return core.last_program.rows


def one_instruction_cycles(call, product="atlas-a2"):
    core = lngb.AICore(product, mode="observed")
    call(core)
    return [CostModel(product).instruction_cycles(r.row) for r in core.trace if r.is_instruction]


@pytest.mark.parametrize("call,expected", [
    # Add/Mul: one 256-byte repeat per cycle
    (lambda c: Add(*(c.alloc(1000, np.float32) for _ in range(3)), 1000), [16.0]),  # ceil(1000/64)
    (lambda c: Add(*(c.alloc(1000, np.float16) for _ in range(3)), 1000), [8.0]),   # ceil(1000/128)
    # Cast runs 64 lanes per repeat at 64 elements per cycle
    (lambda c: Cast(c.alloc(1000, np.float32), c.alloc(1000, np.float16), RoundMode.CAST_NONE,
                    1000), [16.0]),
    # WholeReduceSum float: 64/7 elements per cycle, 4 repeats -> 28 cycles
    (lambda c: WholeReduceSum(c.alloc(8, np.float32), c.alloc(256, np.float32), 64, 4, 1, 1, 8),
     [28.0]),
    # DataCopy GM -> UB: 30 setup cycles + 2048 bytes at 32 bytes per cycle
    (lambda c: DataCopy(c.alloc(512, np.float32), lngb.GlobalTensor(np.zeros(512, np.float32)),
                        512), [94.0]),
])
def test_per_instruction_cycles_match_hand_computed_values(call, expected):
    assert one_instruction_cycles(call) == expected


def test_a_small_timeline_by_hand():
    """Add(128 floats) = 2 cycles on V; the barrier makes the second Add wait for the first one's
    completion plus the drain; each row costs one cycle of scalar dispatch."""
    core = lngb.AICore()
    a, b, c = (core.alloc(128, np.float32) for _ in range(3))

    def body():
        with core:
            Add(c, a, b, 128)
            PipeBarrier(PIPE_V)
            Add(a, c, b, 128)

    cost = CostModel("atlas-a2").estimate(rows_of(core, body))
    spans = [(s.name, s.pipe, s.start, s.end) for s in cost.timeline]
    drain = CONSTANTS["barrier_drain_cycles"].value
    assert spans == [("Add", "PIPE_V", 0, 2), ("PipeBarrier", "PIPE_S", 1, 2),
                     ("Add", "PIPE_V", 2 + drain, 4 + drain)]
    assert cost.cycles == 4 + drain and cost.microseconds == cost.cycles / 1800
    assert cost.busy["PIPE_V"] == 4 and cost.instructions == 2


def test_overrides_and_unknown_constants():
    x = np.ones((2, 16, 64), np.float32)
    result = lngb.emulate(x, x)
    slow_gm = result.estimate_cost(gm_bytes_per_cycle=8)
    assert slow_gm.cycles > result.cost.cycles
    assert result.estimate_cost(clock_mhz=900).microseconds == pytest.approx(
        2 * result.cost.microseconds)
    with pytest.raises(ValueError, match="unknown constants"):
        CostModel("atlas-a2", warp_speed=9)
    assert "UNCONFIRMED" in constants_table()


def test_observed_and_fast_runs_cost_the_same():
    x = np.ones((2, 8, 64), np.float16)
    fast, observed = lngb.emulate(x, x), lngb.emulate(x, x, mode="observed")
    assert fast.cost.cycles == observed.cost.cycles > 0


def test_chrome_trace_has_one_row_per_pipe(tmp_path):
    x = np.ones((1, 8, 8), np.float32)
    cost = lngb.emulate(x, x).cost
    path = tmp_path / "trace.json"
    cost.write_chrome_trace(path)
    trace = json.loads(path.read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"PIPE_V", "PIPE_MTE2", "PIPE_MTE3", "PIPE_S"} <= names
    busy = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "X" and e["dur"] > 0}
    assert len(busy) >= 3


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
@pytest.mark.parametrize("shape,dtype", [((4, 8, 512), "float32"), ((2, 16, 64), "float16")])
def test_more_temp_buffer_never_costs_more(product, shape, dtype):
    rows = [r for r in sweep([shape], [dtype], [product]) if r.fits]
    cycles = [r.cycles for r in rows]
    assert len(rows) > 50
    assert all(later <= earlier for earlier, later in zip(cycles, cycles[1:]))


def test_larger_inputs_cost_more():
    costs = [lngb.emulate(np.ones(s, np.float32), np.ones(s, np.float32)).cost.cycles
             for s in ((1, 8, 64), (2, 8, 64), (4, 8, 64), (4, 8, 128))]
    assert costs == sorted(costs) and len(set(costs)) == 4


def test_sweep_rows_table_and_csv(tmp_path):
    rows = sweep([(4, 8, 512)], ["float32"], ["atlas-a2"], measure=3, repeat=2)
    assert rows[0].stack_buffer_size == 4096 and rows[-1].stack_buffer_size == 131072
    assert len(rows) == (131072 - 4096) // 32 + 1
    fits = [r for r in rows if r.fits]
    assert fits[-1].stack_buffer_size == 52992 and not rows[-1].fits and rows[-1].cycles is None
    assert sum(r.emulator_us is not None for r in rows) == 3
    assert all(r.loopRound * r.oneCalSize + r.inputTailSize == 4 * 8 * 512 for r in rows)
    table = format_table(rows)
    assert "4096-6112" in table and "does not fit" in table
    write_csv(rows, tmp_path / "sweep.csv")
    lines = (tmp_path / "sweep.csv").read_text().splitlines()
    assert len(lines) == len(rows) + 1 and lines[1].startswith("atlas-a2,4x8x512,float32,4096,")


def test_sweep_command(tmp_path, capsys):
    from lngb.cli import main
    assert main(["sweep", "--shape", "1,8,64", "--measure", "2", "--quiet",
                 "--csv", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert "temp-buffer sizes" in out and (tmp_path / "s.csv").exists()
