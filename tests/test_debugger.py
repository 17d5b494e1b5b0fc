"""The debuggers feel like pdb: next steps over a line (an instruction, or a whole API call),
step goes into it, breakpoints on instruction and API names are checked, clear, print, list,
where; every bad argument is one line; and a pdb breakpoint in a recorded kernel says it is in
the recording pass."""
import inspect
import io
import pathlib
import sys
import warnings

import numpy as np
import pytest

import lngb
from lngb.debug import DebugShell, Debugger, OperatorDebugger
from lngb.vector_ops import Add, DataCopy, HardEvent, SetFlag, SyncAll, WaitFlag

pytestmark = pytest.mark.jitted

SEED = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
OPERATOR_INPUT = np.arange(64, dtype=np.float32).reshape(1, 4, 16)
KERNEL_FILE = "lngb/kernels/sample.py"
API_FILE = "lngb/kernels/layer_norm_grad_beta.py"


def observed_trace():
    """The records as observed mode runs the kernel live: the oracle of what each line issues."""
    return lngb.emulate(SEED, SEED, mode="observed", trace=True).trace


def lines_of(function):
    """The source lines of a function, as records name them."""
    lines, first = inspect.getsourcelines(function)
    return range(first, first + len(lines))


def shell(commands, debugger=None):
    """Run the shell on `commands` (one a line); its output, one string."""
    out = io.StringIO()
    DebugShell(debugger or Debugger(SEED, SEED), stdin=io.StringIO(commands),
               stdout=out).cmdloop()
    return out.getvalue()


def answer(output, command):
    """The lines a command printed (the lines after its echo, up to the next command)."""
    lines = output.splitlines()
    i = lines.index(f"(lngb) {command}")
    rest = lines[i + 1:]
    end = next((k for k, line in enumerate(rest) if line.startswith("(lngb) ")), len(rest))
    return rest[:end]


# --- next, step, where ---------------------------------------------------------------------------

def test_next_steps_over_a_kernel_line_one_instruction_or_the_whole_api_call():
    trace = observed_trace()
    in_api = [r.seq for r in trace if r.source.startswith(API_FILE)]
    dbg = Debugger(SEED, SEED)
    while dbg.next.seq != in_api[0]:          # DataCopy, DataCopy, SetFlag, WaitFlag: one each
        before = len(dbg.executed)
        assert dbg.step_over() == ("next", dbg.next)
        assert len(dbg.executed) == before + 1
    # at the LayerNormGradBeta line of the kernel: next runs every record of the call
    assert dbg.where()[dbg.depth].file == KERNEL_FILE and dbg.depth == 0
    assert dbg.step_over()[0] == "next"
    assert [r.seq for r in dbg.executed[-len(in_api):]] == in_api
    assert dbg.next.seq == in_api[-1] + 1 and dbg.next.source.startswith(KERNEL_FILE)
    dbg.run()
    assert dbg.results()[0].tolist() == lngb.emulate(SEED, SEED).pd_gamma.tolist()


def test_step_goes_into_the_call_and_next_then_steps_over_its_lines():
    trace = observed_trace()
    in_reduce = tuple(f"{API_FILE}:{n}" for n in lines_of(lngb.operator._reduce_sum_first_n))
    dbg = Debugger(SEED, SEED)
    dbg.set_breakpoint("LayerNormGradBeta")
    reason, record = dbg.run()
    assert reason == "breakpoint" and record.source.startswith(API_FILE)
    assert dbg.where()[dbg.depth].file == KERNEL_FILE            # at the line that calls it
    assert len(dbg.step()) == 1                                  # step: one instruction, into it
    assert dbg.depth == len(dbg.where()) - 1 and dbg.where()[-1].file == API_FILE
    while dbg.next.source not in in_reduce:    # next: a line that issues an instruction itself
        before = len(dbg.executed)
        dbg.step_over()
        assert len(dbg.executed) == before + 1
    # ... and a line that calls _reduce_sum_first_n: all that observed mode attributes to it
    expected, first = [], trace[dbg.next.seq - 1]
    for r in trace[first.seq - 1:]:
        if r.source not in in_reduce or (expected and r.source == first.source):  # a new call
            break
        expected.append(r.seq)
    before = len(dbg.executed)
    dbg.step_over()
    assert [r.seq for r in dbg.executed[before:]] == expected and len(expected) > 2
    assert dbg.where()[dbg.depth].function == "_compute_process"   # still in the caller


def test_next_returns_to_the_caller_when_the_frame_is_done():
    dbg = Debugger(SEED, SEED)
    dbg.set_breakpoint("ResetMask")       # the last record of the API's _common_path
    dbg.run()
    assert dbg.where()[dbg.depth].function == "_common_path"
    dbg.step_over()
    assert dbg.where()[dbg.depth].function == "__call__" and dbg.depth == 0
    assert dbg.executed[-1].name == "ResetMask"


def test_where_lists_the_frames_from_the_kernel_to_the_instruction():
    out = shell("break Mul\ncontinue\nwhere\nquit\n")
    lines = answer(out, "where")
    frames = [line for line in lines if line.endswith("()")]
    assert frames[0].endswith("__call__()") and KERNEL_FILE in frames[0]
    assert frames[-1].startswith("> ") and frames[-1].endswith("_compute_process()")
    assert lines[-1].split()[:2] == ["7", "PIPE_V"]            # then the next record
    assert any(line.startswith("-> Mul(") for line in lines)


def test_shell_n_s_c_show_the_new_position():
    out = shell("n\ns\nbreak LayerNormGradBeta\nc\nn\nquit\n")
    assert answer(out, "n")[-2:] == [f"> {KERNEL_FILE}(36)__call__(), next #2 DataCopy",
                                     "-> DataCopy(rfg, gm_rfg, b * s * h)"]
    assert answer(out, "c")[0] == "stopped (breakpoint) at #5 SetMaskCount"
    assert answer(out, "c")[-1].startswith("-> LayerNormGradBeta(")
    after_call = [line for line in out.splitlines() if line.startswith("ran #")]
    assert after_call == ["ran #5 SetMaskCount ~ #44 ResetMask (40 records)"]


# --- breakpoints ---------------------------------------------------------------------------------

def test_break_refuses_unknown_names_with_close_matches_and_clear_deletes():
    dbg = Debugger(SEED, SEED)
    for bad, close in (("Foo", None), ("Mull", "Mul"), ("LayerNormGradBta", "LayerNormGradBeta")):
        with pytest.raises(lngb.InvalidArgumentError, match=f"no instruction, event or API "
                                                            f"named '{bad}'") as err:
            dbg.set_breakpoint(bad)
        assert (f"did you mean {close}" in str(err.value)) == (close is not None)
    for bad in (None, 3, ["Mul"]):
        with pytest.raises(lngb.InvalidArgumentError, match="break: no instruction"):
            dbg.set_breakpoint(bad)
    assert dbg.breakpoints == set()
    out = shell("break Foo\nbreak Mull\nbreak\ncontinue\nquit\n")
    assert answer(out, "break Foo")[0].startswith("error: break: no instruction, event or API "
                                                  "named 'Foo'")
    assert answer(out, "break") == ["breakpoints: none"]
    out = shell("b Mul\nb Adds\ncl Mul\ncl Mul\nc\ncl\nb\nquit\n")
    assert answer(out, "cl Mul")[0] == "breakpoints: Adds"
    assert answer(out, "c")[0] == "stopped (breakpoint) at #10 Adds"   # Mul was deleted
    assert answer(out, "cl") == ["breakpoints: none"]
    assert "error: clear: no breakpoint on 'Mul'; the breakpoints are Adds" in out


def test_a_breakpoint_on_the_current_record_does_not_stop_next_or_continue_there_again():
    dbg = Debugger(SEED, SEED)
    dbg.set_breakpoint("PipeBarrier")
    assert dbg.run()[1].name == "PipeBarrier"
    first = dbg.pc
    assert dbg.step_over()[0] == "next" and dbg.pc == first + 1
    dbg.run_until("PipeBarrier")
    at = dbg.pc
    assert dbg.run()[0] == "breakpoint" and dbg.pc > at   # the next one, not this one


def test_the_breakpoints_of_the_operator_debugger_stop_before_a_sync_all_wait():
    dbg = OperatorDebugger(OPERATOR_INPUT, OPERATOR_INPUT.copy(), block_dim=2)
    dbg.set_breakpoint("SyncAll")
    assert dbg.run() == ("breakpoint", dbg.next) and dbg.next.name == "SyncAll"
    after = dbg.records[dbg.pc + 1]                      # where core 0 must wait for core 1
    dbg.set_breakpoint(after.name)
    assert dbg.run() == ("breakpoint", after)            # the breakpoint, not WaitingAtSyncAll
    with pytest.raises(lngb.debug.WaitingAtSyncAll, match=r"core 0 waits at SyncAll for cores "
                                                          r"\[1\]"):
        dbg.run()
    dbg.focus(1)                                         # the breakpoints are every core's
    assert dbg.run() == ("breakpoint", dbg.records[0]) and dbg.next.name == after.name
    dbg.clear_breakpoint(after.name)
    assert dbg.run()[1].name == "SyncAll"
    out = shell("break SyncAll\nrun\nquit\n",
                OperatorDebugger(OPERATOR_INPUT, OPERATOR_INPUT.copy(), block_dim=2))
    assert answer(out, "run")[0].startswith("stopped (breakpoint) at #")
    assert answer(out, "run")[0].endswith(" SyncAll")


# --- print, list ---------------------------------------------------------------------------------

def test_print_shows_tensors_by_name_and_the_registers():
    out = shell("n\nn\nn\np flags\nbreak Adds\nc\np outputPdGamma\nn\np outputPdGamma\n"
                "p outputPdGamma[2:4]\np outputPdGamma[-1]\np mask\nmask\nquit\n")
    assert answer(out, "p flags") == ["flags: MTE2_V id 0 set 1x"]
    lines = out.splitlines()
    printed = [lines[i + 1] for i, line in enumerate(lines) if line == "(lngb) p outputPdGamma"]
    assert printed == [str(np.zeros(8, np.float32)),
                       str((SEED[0, 0] * SEED[0, 0]).astype(np.float32))]
    assert answer(out, "p outputPdGamma[2:4]") == ["[4. 9.]"]
    assert answer(out, "p outputPdGamma[-1]") == ["49."]
    assert answer(out, "p mask") == answer(out, "mask") == ["mode=COUNTER mask_high=0x0 "
                                                            "mask_low=0x8"]


def test_list_shows_the_source_around_the_current_line():
    out = shell("break Mul\nc\nl\nl 3\nquit\n")
    mul = next(r for r in Debugger(SEED, SEED).records if r.name == "Mul")
    path, line = mul.source.rsplit(":", 1)
    source = inspect.getsourcefile(lngb.operator)
    text = pathlib.Path(source).read_text().splitlines()
    line = int(line)
    assert answer(out, "l") == [f"{n:4d} {'->' if n == line else '  '} {text[n - 1]}".rstrip()
                                for n in range(line - 5, line + 6)]
    assert answer(out, "l 3")[0].startswith("   1    ") and len(answer(out, "l 3")) == 8


# --- bad arguments -------------------------------------------------------------------------------

BAD = ["step x", "step -1", "step 1.5", "s 1 2", "n 3", "next x", "c 1", "continue now",
       "until", "until Foo", "until -5", "until 1.5", "unt 0", "break Foo", "b 12", "b a b",
       "clear Foo", "cl a b", "watch", "watch foo", "watch 1 2 3", "watch 5 1", "watch -1 4",
       "watch x y", "p", "p foo", "p outputPdGamma[99]", "p outputPdGamma[a]",
       "p outputPdGamma[1:2:3]", "p outputPdGamma[]", "p (x)", "p mask[0]", "print 1",
       "l x", "l 0", "l 100000", "list -3", "w 1", "where x", "ub", "ub x", "ub 0", "ub 0 4 f64",
       "ub -1 3", "ub 0 0", "ub 0 x", "ub 99999999 4", "ub 1 2 3 4", "ub 'unclosed",
       "mask 1", "trace 0", "trace x", "tensors x", "focus 1", "focus", "frobnicate", "stpe"]


@pytest.mark.parametrize("command", BAD)
def test_every_bad_argument_is_one_line_never_a_traceback(command):
    out = shell(f"{command}\nw\nquit\n")
    reply = answer(out, command)
    assert len(reply) == 1, reply
    assert reply[0].startswith(("error: ", "unknown command ")), reply
    assert answer(out, "w")[0].startswith("> lngb/kernels/sample.py(35)")   # nothing ran


def test_bad_arguments_of_the_operator_shell_are_one_line_too():
    dbg = OperatorDebugger(OPERATOR_INPUT, OPERATOR_INPUT.copy(), block_dim=2)
    out = shell("focus 2\nfocus -1\nfocus x\nub dy9\nquit\n", dbg)
    for command in ("focus 2", "focus -1", "focus x", "ub dy9"):
        assert len(answer(out, command)) == 1 and answer(out, command)[0].startswith("error: ")


def test_ub_without_an_argument_prints_its_usage():
    assert answer(shell("ub\nquit\n"), "ub") == [
        "error: usage: ub <tensor> | ub <address> <count> [f32|f16|u8|i32]"]


# --- pdb in a recorded kernel --------------------------------------------------------------------

def _record_under(tracer):
    core = lngb.AICore()
    a, b = core.alloc(64, np.float32), core.alloc(64, np.float32)
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        core.record(lambda: Add(b, a, a, 64))
    finally:
        sys.settrace(previous)


def test_a_debugger_during_a_recording_is_told_it_is_the_recording_pass():
    def tracer(frame, event, arg):   # any tracer: pdb's, an IDE's
        return None

    with pytest.warns(lngb.LngbWarning, match='recording pass.*mode="observed" runs the kernel '
                                              'live') as caught:
        _record_under(tracer)
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _record_under(None)                       # no debugger: no warning


def test_coverage_measurement_is_not_a_debugger():
    class Tracer:
        def __call__(self, frame, event, arg):
            return None

    Tracer.__module__ = "coverage.tracer"        # what coverage's CTracer reports
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _record_under(Tracer())


def test_observed_mode_under_a_debugger_does_not_warn():
    previous = sys.gettrace()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sys.settrace(lambda frame, event, arg: None)
        try:
            result = lngb.emulate(SEED, SEED, mode="observed")
        finally:
            sys.settrace(previous)
    assert result.pd_gamma[0] == 8960


# --- a user's kernel: KernelDebugger -------------------------------------------------------------

F32 = np.dtype(np.float32)


def neighbour_kernel(x, out):
    """Core k doubles its 8 elements into out[8k], SyncAll, then copies its neighbour's block
    to out[8(n + k)]; twice the SyncAll with `twice`."""
    k, n = lngb.GetBlockIdx(), lngb.GetBlockNum()
    pipe = lngb.TPipe()
    buf = lngb.TBuf("VECCALC")
    pipe.InitBuffer(buf, 32)
    block = buf.Get(F32)
    DataCopy(block, x[8 * k], 8)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Add(block, block, block, 8)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(out[8 * k], block, 8)
    SyncAll()
    DataCopy(block, out[8 * ((k + 1) % n)], 8)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(out[8 * (n + k)], block, 8)
    pipe.Destroy()


X = np.arange(16, dtype=F32)
EXPECTED = np.concatenate([2 * X, np.roll(2 * X, -8)])


@pytest.mark.parametrize("mode", ["observed", "checked"])
def test_kernel_debugger_steps_a_user_kernel_on_every_core(mode):
    dbg = lngb.debug.KernelDebugger(neighbour_kernel, X, outputs=[((32,), F32)], block_dim=2,
                                    mode=mode)
    assert dbg.run_until("Add").name == "Add"
    assert set(dbg.tensors) >= {"block"}                 # the kernel's variables, by name
    before = dbg.view("block").copy()
    dbg.watch(dbg.tensors["block"])
    assert dbg.run()[0].startswith("watchpoint")
    assert np.array_equal(dbg.view("block"), 2 * before)
    assert dbg.where()[-1].function == "neighbour_kernel"
    assert dbg.run()[0].startswith("core 0 waits at SyncAll for cores [1]")
    with pytest.raises(lngb.debug.WaitingAtSyncAll):
        dbg.step()
    dbg.focus(1)
    assert dbg.run() == ("end", None)        # core 0 is at the SyncAll already: core 1 passes
    with pytest.raises(lngb.InvalidArgumentError, match="cores \\[0\\] have not run"):
        dbg.results()
    dbg.focus(0)
    assert dbg.run()[0] == "watchpoint [0, 32)"   # the neighbour's block copied in
    assert dbg.run() == ("end", None)
    assert np.array_equal(dbg.results()[0], EXPECTED)
    assert len(dbg[0].executed) == len(dbg[1].executed) > 10
    if mode == "checked":
        assert dbg[0].core.sanitizer is not None


def test_kernel_debugger_results_equal_simulate_kernel_and_run_all():
    dbg = lngb.debug.KernelDebugger(neighbour_kernel, X, outputs=[((32,), F32)], block_dim=2)
    dbg.run_all()
    sim = lngb.simulate_kernel(neighbour_kernel, X, outputs=[((32,), F32)], block_dim=2)
    assert np.array_equal(dbg.results()[0], sim.outputs[0])


def test_kernel_debugger_uneven_sync_alls_and_unrecordable_kernels_are_clear_errors():
    def only_core_0(x):
        if lngb.GetBlockIdx() == 0:
            SyncAll()

    with pytest.raises(lngb.HazardError, match="core 0: 1, core 1: 0"):
        lngb.debug.KernelDebugger(only_core_0, X, outputs=[], block_dim=2)

    def branches_on_ub(x):
        t = lngb.current_core().alloc(8, F32)
        DataCopy(t, x[0], 8)
        if t.GetValue(0) > 0:
            Add(t, t, t, 8)

    with pytest.raises(lngb.InvalidArgumentError, match="GetValue's value in Python"):
        lngb.debug.KernelDebugger(branches_on_ub, X, outputs=[])
    with pytest.raises(lngb.InvalidArgumentError, match="mode must be"):
        lngb.debug.KernelDebugger(neighbour_kernel, X, outputs=[((32,), F32)], mode="fast")


def test_kernel_debugger_in_the_shell():
    dbg = lngb.debug.KernelDebugger(neighbour_kernel, X, outputs=[((32,), F32)], block_dim=2)
    out = shell("break Add\nc\np block\nn\np block[0:2]\nc\nfocus 1\nc\nc\nfocus 0\nc\nquit\n",
                dbg)
    assert answer(out, "p block") == [str(X[:8])]
    assert answer(out, "p block[0:2]") == ["[0. 2.]"]
    assert out.rstrip().splitlines()[-2].startswith("finished: output0=[ 0.  2.  4.")


# --- lngb debug --kernel -------------------------------------------------------------------------

KERNEL_SOURCE = '''
import numpy as np
import lngb
from lngb.vector_ops import Add, DataCopy, HardEvent, SetFlag, SyncAll, WaitFlag


def double(x, out):
    k = lngb.GetBlockIdx()
    t = lngb.current_core().alloc(8, np.float32)
    DataCopy(t, x[8 * k], 8)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Add(t, t, t, 8)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(out[8 * k], t, 8)
    SyncAll()
'''


def test_lngb_debug_kernel_opens_a_users_kernel_with_npy_inputs(tmp_path, capsys):
    from lngb.cli import main
    (tmp_path / "kern.py").write_text(KERNEL_SOURCE)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "cmds").write_text("break Add\nc\np t\nfocus 1\nc\nfocus 0\nc\nfocus 1\nc\n"
                                   "quit\n")
    assert main(["debug", "--kernel", f"{tmp_path / 'kern.py'}:double",
                 "--input", str(tmp_path / "x.npy"), "--output", "16:float32",
                 "--block-dim", "2", "--mode", "checked",
                 "--commands", str(tmp_path / "cmds")]) == 0
    out = capsys.readouterr().out
    assert answer(out, "p t") == [str(X[:8])]
    assert f"finished: output0={np.array2string(2 * X, threshold=16)}" in out


@pytest.mark.parametrize("argv, match", [
    (["--kernel", "nowhere.py:f"], "no such file"),
    (["--kernel", "KERN"], "FILE.py:FUNCTION"),
    (["--kernel", "KERN:missing"], "no function 'missing'"),
    (["--kernel", "KERN:double", "--output", "16:complex"], "--output"),
    (["--kernel", "KERN:double", "--output", "16"], "--output"),
    (["--kernel", "KERN:double", "--input", "none.npy"], "--input"),
    (["--kernel", "KERN:double", "--dy", "x.bin"], "--dy"),
    (["--input", "x.npy"], "--kernel"),
])
def test_lngb_debug_kernel_refuses_bad_options_in_one_line(argv, match, tmp_path, capsys):
    from lngb.cli import main
    (tmp_path / "kern.py").write_text(KERNEL_SOURCE)
    argv = [a.replace("KERN", str(tmp_path / "kern.py")) for a in argv]
    assert main(["debug", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err, err


def test_lngb_debug_help_describes_kernel_inputs_and_outputs(capsys):
    from lngb.cli import main
    with pytest.raises(SystemExit):
        main(["debug", "--help"])
    out = capsys.readouterr().out
    for option in ("--kernel FILE.py:FUNCTION", "--input", "--output", "--mode"):
        assert option in out
