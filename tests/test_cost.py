"""The cost model and the tiling sweep."""
import itertools
import json

import numpy as np
import pytest

import lngb
from lngb.cost import CostModel, constants_table
from lngb.sweeps import format_table, sweep, write_csv
from lngb.vector_ops import (PIPE_V, Add, Cast,
                             DataCopy, PipeBarrier, RoundMode, WholeReduceSum)

pytestmark = pytest.mark.jitted


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


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_small_timeline_by_hand():
    """Each count-form Add first makes 4 mask-register writes on the scalar unit (1 cycle each),
    then dispatches (1 cycle); 128 floats take 2 cycles on V. The barrier makes the second Add
    wait for the first one's completion plus the drain (4)."""
    core = lngb.AICore()
    a, b, c = (core.alloc(128, np.float32) for _ in range(3))

    def body():
        with core:
            Add(c, a, b, 128)
            PipeBarrier(PIPE_V)
            Add(a, c, b, 128)

    cost = CostModel("atlas-a2").estimate(rows_of(core, body))
    spans = [(s.name, s.pipe, s.start, s.end) for s in cost.timeline]
    assert spans == [("Add", "PIPE_V", 4, 6), ("PipeBarrier", "PIPE_S", 5, 6),
                     ("Add", "PIPE_V", 10, 12)]
    assert cost.cycles == 12 and cost.microseconds == 12 / 1800
    assert cost.busy["PIPE_V"] == 4 and cost.instructions == 2


def observed_cost(kernel, product="atlas-a2"):
    core = lngb.AICore(product, mode="observed")
    with core:
        kernel(core)
    return CostModel(product).estimate([r.row for r in core.trace])


def test_pipe_all_waits_for_every_pipe():
    def kernel(core):
        a, b = core.alloc(8192, np.float32), core.alloc(64, np.float32)
        DataCopy(a, lngb.GlobalTensor(np.zeros(8192, np.float32)), 8192)   # MTE2 0..1054
        PipeBarrier(lngb.vector_ops.PIPE_ALL)
        Add(b, a, a, 64)
    spans = observed_cost(kernel).timeline
    assert spans[0].end == 30 + 32768 / 32
    assert spans[-1].name == "Add" and spans[-1].start >= spans[0].end + 4


def test_set_flag_fires_after_earlier_waits_of_its_pipe():
    from lngb.vector_ops import HardEvent, SetFlag, WaitFlag

    def kernel(core):
        a = core.alloc(8192, np.float32)
        DataCopy(a, lngb.GlobalTensor(np.zeros(8192, np.float32)), 8192)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        SetFlag(HardEvent.V_S, 0)        # no V work between: fires when V may proceed
        WaitFlag(HardEvent.V_S, 0)
        a.GetValue(0)
    spans = observed_cost(kernel).timeline
    copy_end = spans[0].end
    assert [s.name for s in spans[-3:]] == ["SetFlag", "WaitFlag", "GetValue"]
    assert spans[-3].start >= copy_end and spans[-1].start >= copy_end


def test_independent_copies_share_gm_bandwidth_without_waiting_in_issue_order():
    from lngb.vector_ops import HardEvent, SetFlag, WaitFlag

    def kernel(core):
        big, small = core.alloc(16384, np.float32), core.alloc(64, np.float32)
        small.write(np.zeros(64, np.float32))
        big.write(np.zeros(16384, np.float32))
        Add(big, big, big, 16384)                                   # V 0..256
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(lngb.GlobalTensor(np.zeros(64, np.float32)), small, 64)   # waits for V
        DataCopy(small, lngb.GlobalTensor(np.zeros(64, np.float32)), 64)   # independent MTE2
    spans = {s.pipe: s for s in observed_cost(kernel).timeline if s.name == "DataCopy"}
    assert spans["PIPE_MTE2"].end <= spans["PIPE_MTE3"].start   # ran while MTE3 waited
    assert spans["PIPE_MTE3"].start >= 256


def test_overrides_and_unknown_constants():
    x = np.ones((2, 16, 64), np.float32)
    result = lngb.emulate(x, x)
    slow_gm = result.estimate_cost(gm_bytes_per_cycle=8)
    assert slow_gm.cycles > result.cost.cycles
    assert result.estimate_cost(clock_mhz=900).microseconds == pytest.approx(
        2 * result.cost.microseconds)
    with pytest.raises(ValueError, match="unknown constants"):
        CostModel("atlas-a2", warp_speed=9)
    faster_adds = CostModel("atlas-a2").values["rates"]
    faster_adds["Add"] = (256, 128)
    assert result.estimate_cost(rates=faster_adds).cycles < result.cost.cycles
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


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-inference"])
@pytest.mark.parametrize("shape,dtype", [((4, 8, 512), "float32"), ((2, 16, 64), "float16"),
                                         ((3, 7, 128), "float32")])
def test_more_temp_buffer_never_costs_more_when_rows_fill_whole_repeats(product, shape, dtype):
    rows = [r for r in sweep([shape], [dtype], [product]) if r.fits]
    cycles = [r.cycles for r in rows]
    assert len(rows) > 20 and len(set(cycles)) > 2
    assert all(later <= earlier for earlier, later in zip(cycles, cycles[1:]))


@pytest.mark.parametrize("shape", [(1, 8, 96), (2, 5, 40), (3, 9, 24)])
def test_with_partial_repeats_more_buffer_costs_at_most_one_repeat_per_chunk_more(shape):
    """A partial last repeat costs a whole cycle, so regrouping rows into fewer, larger chunks
    can cost a few cycles more (e.g. [1, 8, 96]: chunks 384 + 384 = 6 + 6 repeats, but
    480 + 288 = 8 + 5)."""
    rows = [r for r in sweep([shape], ["float32"], ["atlas-a2"]) if r.fits]
    for smaller in rows:
        for larger in rows:
            if larger.stack_buffer_size > smaller.stack_buffer_size:
                chunks = larger.loopRound + (1 if larger.inputTailSize else 0)
                assert larger.cycles <= smaller.cycles + chunks


def test_the_950_kernel_ignores_the_temp_buffer():
    rows = [r for r in sweep([(2, 16, 64)], ["float16"], ["atlas-350"]) if r.fits]
    assert len({r.cycles for r in rows}) == 1


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
    assert main(["sweep", "--shape", "1,8,64", "--dtype", "float", "--measure", "2", "--quiet",
                 "--csv", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out
    assert "temp-buffer sizes" in out and (tmp_path / "s.csv").exists()
    assert main(["sweep", "--shape", "1,8,64", "--step", "0", "--quiet"]) == 2
    assert "step (0)" in capsys.readouterr().err


def test_a_schedule_of_programs_costs_what_its_rows_cost():
    """CostModel.schedule_cycles reads each recorded program once and the schedule as a
    sequence of them: the same cycles as estimate() of the concatenated rows."""
    from lngb.observers.cost import CostModel
    from lngb.runtime import schedule
    dy = np.ones((2, 40, 256), np.float16)
    result = lngb.emulate_operator(dy, dy, block_dim=3, threads=1)
    plan, model = result.plan, CostModel("atlas-a2", gm_bytes_per_cycle=20)
    assert isinstance(plan, schedule.Plan)
    for phase in range(2):
        sequence = plan.schedules[0][phase][:, 0]
        rows = np.concatenate([plan.programs[p] for p in sequence])
        assert model.schedule_cycles(plan.programs, sequence) == model.estimate(rows).cycles


def test_the_gm_port_forgets_bookings_no_later_transfer_can_reach():
    from lngb.observers.cost import _SharedPort
    port = _SharedPort()
    assert port.book(0, 10) == 0 and port.book(5, 10) == 10 and port.book(40, 5) == 40
    assert port.book(20, 5, floor=20) == 20        # fits the gap [20, 40)
    assert port.busy == [(20, 25), (40, 45)]       # (0, 10) and (10, 20) ended by the floor
    assert port.book(21, 16) == 45                 # [25, 40) is too short
