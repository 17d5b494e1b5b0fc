"""Trace records, their renderers, and stepping through the kernel."""
import json
import pathlib

import numpy as np
import pytest

import lngb
from lngb.debug import DebugShell, Debugger
from lngb.trace import format_listing, write_chrome_trace, write_jsonl
from lngb.vector_ops import MaskMode

pytestmark = pytest.mark.jitted

SEED = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
MUL_LINE = next(i for i, line in enumerate(
    pathlib.Path(lngb.operator.__file__).read_text().splitlines(), 1) if "Mul(product, dy, rfg" in line)


def test_records_describe_each_instruction():
    trace = lngb.emulate(SEED, SEED, trace=True).trace
    assert [r.seq for r in trace] == list(range(1, len(trace) + 1))
    mul = next(r for r in trace if r.name == "Mul")
    assert mul.pipe == "PIPE_V" and mul.dtype == "f32" and mul.mask == ("counter", 64)
    assert [o[0] for o in mul.operands] == ["dst", "src0", "src1"]
    assert mul.operands[1][1:] == ("UB@0", "VECIN", "float32")
    assert mul.strides == {"blk": (1, 1, 1), "rep": (8, 8, 8)}
    assert mul.bytes_moved == (512, 256)
    assert mul.source == f"lngb/kernels/layer_norm_grad_beta.py:{MUL_LINE}"
    assert mul.mask_after == (MaskMode.COUNTER, 0, 64)
    copies = [r for r in trace if r.name == "DataCopy"]
    assert [r.pipe for r in copies] == ["PIPE_MTE2", "PIPE_MTE2", "PIPE_MTE3", "PIPE_MTE3"]
    assert copies[0].bytes_moved == (256, 256)
    events = [r.name for r in trace if not r.is_instruction]
    assert events[:3] == ["SetFlag", "WaitFlag", "SetMaskCount"] and "PipeBarrier" in events


def test_renderers(tmp_path):
    result = lngb.emulate(SEED, SEED, trace=True)
    listing = format_listing(result.trace).splitlines()
    assert len(listing) == len(result.trace) and "Mul.f32" in listing[6]
    write_jsonl(result.trace, tmp_path / "t.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [d["name"] for d in lines] == [r.name for r in result.trace]
    assert lines[6]["bytes_read"] == 512 and lines[6]["mask"] == ["counter", 64]
    write_chrome_trace(result.trace, tmp_path / "t.json", result.cost)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(result.trace)
    assert {e["tid"] for e in spans} == {0, 1, 2, 3}   # S, V, MTE2, MTE3


def test_the_debugger_steps_through_the_same_stream_as_observed_mode():
    observed = lngb.emulate(SEED, SEED, trace=True).trace
    dbg = Debugger(SEED, SEED)

    def stream(records):  # a recorded DataCopy also names its GM buffer's slot
        rows = [r.row.copy() for r in records]
        for row, r in zip(rows, records):
            if r.name == "DataCopy":
                row[lngb.vector_ops.program.GM_SLOT] = 0
        return [(r.name, row.tolist()) for r, row in zip(records, rows)]

    assert stream(dbg.records) == stream(observed)
    dbg.breakpoints.add("Mul")
    assert dbg.run()[0] == "breakpoint" and dbg.next.name == "Mul"
    assert not dbg.view("sharedTmpBuffer").any()
    dbg.step()
    assert dbg.view("sharedTmpBuffer").view(np.float32)[:4].tolist() == [0, 1, 4, 9]
    dbg.watch(dbg.tensors["outputPdGamma"])
    reason, record = dbg.run()
    assert reason.startswith("watchpoint") and record.name == "Adds"
    assert dbg.mask == (MaskMode.COUNTER, 0, 8)
    assert dbg.run_until("DataCopy").name == "DataCopy"
    assert dbg.run_until(lambda r: False) is None and dbg.finished
    gamma, beta = dbg.results()
    assert gamma.tolist() == [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
    assert np.array_equal(dbg.core.ub, lngb.emulate(SEED, SEED).core.ub)


def test_observed_mode_changes_the_ub_instruction_by_instruction():
    from lngb.vector_ops import Add, Muls
    core = lngb.AICore(mode="observed")
    a, b = core.alloc(64, np.float32), core.alloc(64, np.float32)
    a.write(np.ones(64, np.float32))
    seen = []

    def kernel():
        Add(b, a, a, 64)
        seen.append(b.read()[0])   # a pdb session here sees the UB after the Add
        Muls(b, b, 3.0, 64)

    core.run_recorded("observed-kernel", kernel)
    assert seen == [2.0] and b.read()[0] == 6.0
    assert [r.name for r in core.trace] == ["Add", "Muls"]


def test_debug_command_reads_its_commands_from_a_file(tmp_path, capsys):
    from lngb.cli import main
    commands = tmp_path / "session.txt"
    commands.write_text("break Mul\nrun\nstep\nub 576 4 f32\nrun\nquit\n")
    assert main(["debug", "--commands", str(commands)]) == 0
    out = capsys.readouterr().out
    assert "stopped (breakpoint) at #7 Mul" in out
    assert "[0. 1. 4. 9.]" in out and "finished: pdGamma=" in out


def test_debug_shell_reports_bad_commands():
    import io
    dbg = Debugger(SEED, SEED)
    out = io.StringIO()
    DebugShell(dbg, stdin=io.StringIO("ub nosuch\nfrobnicate\nquit\n"), stdout=out).cmdloop()
    assert "error: view: no tensor named 'nosuch'" in out.getvalue()
    assert "unknown command 'frobnicate'" in out.getvalue()


def test_reduction_records_count_the_bytes_really_moved():
    from lngb.vector_ops import BlockReduceSum, PairReduceSum, WholeReduceSum
    core = lngb.AICore(mode="observed")
    src, dst = core.alloc(128, np.float32), core.alloc(64, np.float32)
    WholeReduceSum(dst, src, 1, 2, 1, 1, 8)     # 2 repeats x 1 lane -> 2 outputs
    BlockReduceSum(dst, src, 1, 4, 1, 1, 8)     # 4 lanes of block 0 -> 1 output
    PairReduceSum(dst, src, 1, 1, 1, 1, 8)      # 1 lane -> 1 pair output
    assert [r.bytes_moved for r in core.trace] == [(8, 8), (16, 4), (4, 4)]


def test_debugger_breakpoints_until_and_write_watchpoints():
    zeros = np.zeros((1, 8, 8), np.float32)
    dbg = Debugger(zeros, zeros)
    dbg.breakpoints.add("DataCopy")
    assert dbg.run() == ("breakpoint", dbg.records[0])          # the very first record
    assert dbg.run()[1].seq == 2                                 # then the next DataCopy
    with pytest.raises(lngb.InvalidArgumentError, match="no instruction or event named"):
        dbg.run_until("NoSuchInstruction")
    at = dbg.run_until("Add")
    assert at.name == "Add" and dbg.run_until("Add").seq > at.seq   # steps over the current one
    dbg.watch(dbg.tensors["outputPdBeta"])                       # zeros in, zeros out: still hit
    assert dbg.run()[0].startswith("watchpoint")


def test_trace_command_writes_each_format(tmp_path, capsys):
    from lngb.cli import main
    assert main(["trace"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 48 and "Mul.f32" in listing[6]
    assert main(["trace", "--format", "jsonl", "--out", str(tmp_path / "t.jsonl")]) == 0
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 48
    assert main(["trace", "--format", "chrome", "--out", str(tmp_path / "t.json")]) == 0
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 48


# --- the multi-core operator's debugger ---------------------------------------------------------

def _operator_inputs():
    rng = np.random.default_rng(7)
    dy = rng.standard_normal((1, 6, 32)).astype(np.float32)
    return dy, rng.standard_normal((1, 6, 32)).astype(np.float32)


def test_operator_debugger_holds_a_core_at_sync_all_until_every_core_is_there():
    from lngb.debug import OperatorDebugger, WaitingAtSyncAll
    dy, rfg = _operator_inputs()
    dbg = OperatorDebugger(dy, rfg, block_dim=3)
    assert dbg.run_until("SyncAll").name == "SyncAll"
    dbg.step()                                       # core 0 executes its SyncAll
    with pytest.raises(WaitingAtSyncAll, match=r"core 0 waits at SyncAll for cores \[1, 2\]"):
        dbg.step()
    dbg.focus(1)
    dbg.run_until("SyncAll")
    dbg.step()                                       # core 1 is at SyncAll; core 2 is not
    with pytest.raises(WaitingAtSyncAll, match=r"core 1 waits at SyncAll for cores \[2\]"):
        dbg.step()
    dbg.focus(2)
    assert dbg.run() == ("end", None)                # the last to arrive passes straight on
    for core in (0, 1):
        dbg.focus(core)
        assert dbg.run() == ("end", None)
    assert dbg.finished
    expected = lngb.emulate_operator(dy, rfg, block_dim=3)
    gamma, beta = dbg.results()
    assert np.array_equal(gamma, expected.pd_gamma) and np.array_equal(beta, expected.pd_beta)


def test_operator_debugger_stops_at_sync_all_and_raises_only_where_nothing_can_run():
    """step(n), run_until and run stop where the core must wait for the others and return what
    ran; called there, they raise WaitingAtSyncAll before executing anything."""
    from lngb.debug import OperatorDebugger, WaitingAtSyncAll
    dy, rfg = _operator_inputs()
    dbg = OperatorDebugger(dy, rfg, block_dim=2)
    assert dbg.run_until(10**6) is None and dbg.next.seq == dbg[0].barriers[0] + 1   # no such record
    dbg = OperatorDebugger(dy, rfg, block_dim=2)
    reason, record = dbg.run()
    assert "core 0 waits at SyncAll for cores [1]" in reason and record is dbg.next
    dbg = OperatorDebugger(dy, rfg, block_dim=2)
    done = dbg.step(10**6)
    assert len(done) == dbg[0].barriers[0] and done[-1].name == "SyncAll"
    ub, seq = dbg.core.ub.copy(), dbg.core.seq
    for call in (dbg.step, lambda: dbg.run_until("Add"), dbg.run):
        with pytest.raises(WaitingAtSyncAll, match=r"core 0 waits at SyncAll for cores \[1\]"):
            call()
        assert np.array_equal(dbg.core.ub, ub) and dbg.core.seq == seq
    assert dbg.step(0) == []
    dbg.focus(1)
    assert dbg.run() == ("end", None)    # the last to arrive passes straight on
    dbg.focus(0)
    assert dbg.run() == ("end", None) and dbg.finished


def test_operator_debugger_focus_views_and_run_all():
    from lngb.debug import OperatorDebugger
    dy, rfg = _operator_inputs()
    dbg = OperatorDebugger(dy, rfg, block_dim=2)
    with pytest.raises(ValueError, match="outside 0 ~ 1"):
        dbg.focus(2)
    assert dbg.focus(1) is dbg[1] and dbg.core is dbg[1].core
    assert {"dy0", "dy1", "rfg0", "rfg1", "acc", "out", "tmp", "part0", "total"} <= set(dbg.tensors)
    dbg.run_all()
    assert dbg.finished
    expected = lngb.emulate_operator(dy, rfg, block_dim=2)
    assert np.array_equal(dbg.results()[0], expected.pd_gamma)
    # the stream each core stepped through is the one observed mode traces
    observed = lngb.emulate_operator(dy, rfg, block_dim=2, mode="observed")
    for c in range(2):
        assert [r.name for r in dbg[c].executed] == [r.name for r in observed.trace[c]]


def test_debug_command_focuses_on_a_core_of_the_operator(tmp_path, capsys):
    from lngb.cli import main
    commands = tmp_path / "session.txt"
    commands.write_text("until SyncAll\nstep\nstep\nfocus 1\nrun\nfocus 0\nrun\nfocus 5\nquit\n")
    assert main(["debug", "--shape", "1,4,16", "--block-dim", "2",
                 "--commands", str(commands)]) == 0
    out = capsys.readouterr().out
    assert "error: core 0 waits at SyncAll for cores [1]" in out
    assert "core 1: next #1 DataCopy" in out
    assert "finished: pdGamma=" in out
    assert "error: focus: core 5 outside 0 ~ 1" in out
