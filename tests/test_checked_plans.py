"""Checked mode of the multi-core operators, planned and replayed as fast mode is: each core's
trace is the live run's record for record, the sanitizer and the GM checks see every record
of every core on the first call of a configuration, their verdict is reused by later calls,
and a kernel the checks refuse is refused on every call."""
import numpy as np
import pytest

import lngb
from lngb import HazardError
from lngb.kernels import pipe
from lngb.observers.sanitizer import Sanitizer
from lngb.tensor import LocalTensor
from lngb.vector_ops import (PIPE_ALL, Add, Adds, DataCopy, HardEvent, PipeBarrier, SetFlag,
                              SyncAll, WaitFlag)
from lngb.vector_ops.program import DST, SCALAR, SCALAR_AT

from test_layer_norm_grad import inputs as backward_inputs
from test_layer_norm_grad import same_bits
from test_multicore import inputs as operator_inputs

pytestmark = pytest.mark.jitted

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def operator(product, dtype):
    dy, rfg = operator_inputs((1, 29, 384), dtype, 7)
    return lambda mode: lngb.emulate_operator(dy, rfg, product=product, block_dim=4, mode=mode)


def backward(product, dtype, shape=(2, 9, 64), **kw):
    data = backward_inputs(shape, dtype)
    kw.setdefault("block_dim", 3)
    return lambda mode: lngb.emulate_layer_norm_backward(*data, product=product, mode=mode, **kw)


CALLS = [operator("atlas-a2", F32), operator("atlas-350", F16),
         backward("atlas-inference", F16), backward("atlas-350", F32),
         backward("atlas-a2", F32, (3, 5, 64), block_dim=4, tile_rows=2)]
IDS = ["operator-a2-f32", "operator-350-f16", "backward-310p-f16", "backward-350-f32",
       "backward-a2-f32-tail-core"]   # (the tail core's GetValues take other registers)


def fields(record, read_into=None):
    """What a record says. A scalar operand a GetValue read from the UB is, in a replayed
    program, the scalar register it was read into (SCALAR_AT), in a live run its value (the
    listing shows neither): `read_into` is the register a live record's scalar was read into."""
    row = [int(v) for v in record.row]
    if read_into:
        assert row[SCALAR_AT] == 0
        row[SCALAR], row[SCALAR_AT] = 0, read_into
    return (record.seq, record.name, tuple(row), record.operands, record.source)


def assert_same_traces(traces, live):
    assert len(traces) == len(live)
    for c, (trace, want) in enumerate(zip(traces, live)):
        assert len(trace) == len(want), c
        records = list(trace)
        assert [fields(r) for r in records] == [fields(w, int(r.row[SCALAR_AT]))
                                                for r, w in zip(records, want)], c
        assert fields(trace[-1]) == fields(records[-1])
        assert [fields(r) for r in trace[3:9]] == [fields(r) for r in records[3:9]]


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_checked_traces_are_the_live_runs_on_the_first_and_a_warm_call(call):
    lngb.clear_caches()
    live = call("observed")   # observed mode runs every core live
    for _ in range(2):
        checked = call("checked")
        assert_same_traces(checked.trace, live.trace)
        for name, value in checked.outputs().items():
            same_bits(value, live.outputs()[name])


def drop_the_first_wait(monkeypatch, event):
    """TQue's DeQue / AllocTensor without its WaitFlag of `event` the first time on each core."""
    real, waited = pipe.WaitFlag, set()

    def wait(hard_event, event_id):
        core = pipe.current_core()
        if hard_event == event and id(core) not in waited:
            waited.add(id(core))
            return
        real(hard_event, event_id)
    monkeypatch.setattr(pipe, "WaitFlag", wait)


@pytest.mark.parametrize("call", CALLS[:1] + CALLS[3:], ids=IDS[:1] + IDS[3:])
def test_a_missing_flag_is_refused_on_every_checked_call(monkeypatch, call):
    """V reading a tile MTE2 may still be writing: found on the first checked call and again on
    the next (a refused check is not kept), naming the core; fast mode does not check."""
    drop_the_first_wait(monkeypatch, HardEvent.MTE2_V)
    for _ in range(2):
        with pytest.raises(HazardError, match="RAW hazard.*on PIPE_V reads UB.*MTE2_V") as caught:
            call("checked")
        assert caught.value.block_idx == 0
    call("fast")


def same_state(a, b):
    """Two Sanitizer.snapshot()s equal in every part."""
    (init_a, ub_a, gm_a, *rest_a), (init_b, ub_b, gm_b, *rest_b) = a, b
    assert np.array_equal(init_a, init_b)
    assert ub_a.keys() == ub_b.keys()
    for key in ub_a:
        assert all(np.array_equal(x, y) for x, y in zip(ub_a[key], ub_b[key])), key
    assert gm_a.keys() == gm_b.keys()
    for key in gm_a:
        assert [(c, p, w, list(s), list(e)) for c, p, w, s, e in gm_a[key]] == [
            (c, p, w, list(s), list(e)) for c, p, w, s, e in gm_b[key]], key
    assert rest_a == rest_b


def test_a_reused_check_leaves_each_cores_sanitizer_where_the_check_left_it():
    """A core of a checked run whose check was reused goes on as if it had been checked: its
    sanitizer's state (bytes initialised, the shadows, GM in flight, clocks, what each pipe
    knows, pending flags, who did what) is the first call's, and a later instruction is checked
    against it."""
    lngb.clear_caches()
    call = CALLS[0]
    first, warm = call("checked"), call("checked")
    for c in (0, 3):
        same_state(*(r.cores[c].sanitizer.snapshot() for r in (first, warm)))
    initialised = warm.cores[0].sanitizer.initialised[:warm.cores[0].ub_size]
    written = int(np.flatnonzero(initialised)[0]) // 32 * 32
    hole = int(np.flatnonzero(~initialised)[-1]) // 32 * 32
    adds_at(warm.cores[0], written)
    with pytest.raises(lngb.UninitializedReadError):
        adds_at(warm.cores[0], hole)


@pytest.mark.parametrize("call", CALLS[:2], ids=IDS[:2])
def test_the_check_of_a_configuration_is_reused_not_redone(monkeypatch, call):
    """The second checked call of a configuration checks no record again."""
    from lngb.observers.sanitizer import Sanitizer
    lngb.clear_caches()
    call("checked")
    checked = []
    real = Sanitizer.check_record
    monkeypatch.setattr(Sanitizer, "check_record",
                        lambda self, *args: checked.append(1) or real(self, *args))
    result = call("checked")
    assert checked == []
    assert len(result.trace[0]) > 0


# --- a user's multi-core kernel (simulate_kernel) -----------------------------------------------

def neighbours(x, skip_wait, out):
    """Core k copies its block out, SyncAll, then doubles its neighbour's block."""
    k, n = lngb.GetBlockIdx(), lngb.GetBlockNum()
    buf = lngb.current_core().alloc(8, F32)
    DataCopy(buf, x[8 * k], 8)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(out[8 * k], buf, 8)
    SyncAll()
    DataCopy(buf, out[8 * ((k + 1) % n)], 8)
    SetFlag(HardEvent.MTE2_V, 0)
    if not (skip_wait and k == 2):
        WaitFlag(HardEvent.MTE2_V, 0)
    Add(buf, buf, buf, 8)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(out[8 * (n + k)], buf, 8)


def simulate(mode, skip_wait=False):
    x = np.arange(32, dtype=F32)
    return lngb.simulate_kernel(neighbours, x, skip_wait, outputs=[((64,), F32)], block_dim=4,
                                mode=mode)


def test_a_user_kernels_checked_traces_are_the_live_runs_and_its_check_is_reused(monkeypatch):
    from lngb.observers.sanitizer import Sanitizer
    live = simulate("observed")
    for _ in range(2):
        checked = simulate("checked")
        assert_same_traces(checked.trace, live.trace)
        assert np.array_equal(checked.outputs[0], live.outputs[0])
    calls = []
    real = Sanitizer.check_record
    monkeypatch.setattr(Sanitizer, "check_record",
                        lambda self, *args: calls.append(1) or real(self, *args))
    assert np.array_equal(simulate("checked").outputs[0], live.outputs[0])
    assert calls == []


def test_a_user_kernels_missing_flag_is_refused_on_every_checked_call():
    for _ in range(2):
        with pytest.raises(HazardError, match="RAW hazard.*Add.*MTE2_V") as caught:
            simulate("checked", skip_wait=True)
        assert caught.value.block_idx == 2
    simulate("fast", skip_wait=True)


def one_writes_another_reads(x, sync, out):
    """Core 0 copies x to out; core 1 reads out back, after a SyncAll or not."""
    buf = lngb.current_core().alloc(8, F32)
    if lngb.GetBlockIdx() == 0:
        DataCopy(buf, x, 8)
        SetFlag(HardEvent.MTE2_MTE3, 0)
        WaitFlag(HardEvent.MTE2_MTE3, 0)
        DataCopy(out, buf, 8)
    if sync:
        SyncAll()
    if lngb.GetBlockIdx() == 1:
        DataCopy(buf, out, 8)


@pytest.mark.parametrize("mode", ["checked", "checked-live"])
def test_a_user_kernel_reading_gm_another_core_writes_needs_a_sync_all(mode, monkeypatch):
    """Across cores, GM bytes one core writes and another reads between the same SyncAlls are a
    HazardError in checked mode, on the first call and on a replay; a SyncAll between is clean."""
    if mode == "checked-live":   # a kernel with a host read runs live
        from lngb import simulate
        monkeypatch.setattr(simulate, "_replay_cores", lambda run: None)
    x = np.arange(8, dtype=F32)
    for _ in range(2):
        with pytest.raises(HazardError, match="core 1 .* reads GM output 0 bytes \\[0, 32\\) that "
                                              "core 0 writes"):
            lngb.simulate_kernel(one_writes_another_reads, x, False, outputs=[((8,), F32)],
                                 block_dim=2, mode="checked")
        lngb.simulate_kernel(one_writes_another_reads, x, True, outputs=[((8,), F32)],
                             block_dim=2, mode="checked")
    lngb.simulate_kernel(one_writes_another_reads, x, False, outputs=[((8,), F32)], block_dim=2,
                         mode="fast")   # (fast mode does not check)


# --- state a caller or Ctrl-C cannot corrupt; numbering (an independent review's findings) ------

def adds_at(core, address):
    t = LocalTensor(core, address, 8, F32, None, "VECCALC")
    with core:
        PipeBarrier(PIPE_ALL)
        Adds(t, t, np.float32(1), 8)


def test_an_interrupted_catch_up_is_redone(monkeypatch):
    """sanitizer.py _catch_up clears _unchecked before checking: Ctrl-C inside it leaves a
    half-made state that later checks use."""
    lngb.clear_caches()
    good = operator("atlas-a2", F32)("checked").cores[0].sanitizer.snapshot()[0].copy()
    warm = operator("atlas-a2", F32)("checked")
    real, n = Sanitizer.check_record, [0]

    def interrupted(self, *args):
        n[0] += 1
        if n[0] == 20:
            raise KeyboardInterrupt
        return real(self, *args)
    monkeypatch.setattr(Sanitizer, "check_record", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _ = warm.cores[0].sanitizer.initialised
    monkeypatch.setattr(Sanitizer, "check_record", real)
    partial = warm.cores[0].sanitizer._initialised   # (no catch-up)
    written = int(np.flatnonzero(good & ~partial)[0]) // 32 * 32   # the kernel wrote them
    adds_at(warm.cores[0], written)   # UninitializedReadError today


def test_the_initialised_bytes_a_caller_gets_cannot_change_a_cached_check():
    """c4e35fd: Sanitizer.initialised is the CHECKS snapshot's array, writable."""
    x = np.random.default_rng(0).standard_normal((2, 16, 64)).astype(np.float16)
    lngb.clear_caches()
    lngb.emulate(x, x, mode="checked")
    warm = lngb.emulate(x, x, mode="checked")
    init = warm.core.sanitizer.initialised
    hole = int(np.flatnonzero(~init[:warm.core.ub_size])[0]) // 32 * 32
    try:
        init[:] = True
    except ValueError:
        return   # read-only: fine
    later = lngb.emulate(x, x, mode="checked")
    with pytest.raises(lngb.UninitializedReadError):
        adds_at(later.core, hole)


def test_a_checked_operators_trace_rows_are_its_own():
    lngb.clear_caches()
    first = operator("atlas-a2", F32)("checked")
    row = first.trace[0][0].row
    try:
        row[DST] += 64
    except ValueError:
        return   # read-only: fine
    assert operator("atlas-a2", F32)("checked").trace[0][0].row[DST] == row[DST] - 64


def test_an_issue_time_refusal_names_the_records_number_in_the_cores_trace(monkeypatch):
    """WaitFlag without SetFlag: "#<seq>" is the step's record number when planned."""
    real, count = pipe.SetFlag, {}

    def set_flag(event, event_id):
        if event == HardEvent.MTE2_V:
            n = count[id(pipe.current_core())] = count.get(id(pipe.current_core()), 0) + 1
            if n == 4:
                return
        real(event, event_id)
    monkeypatch.setattr(pipe, "SetFlag", set_flag)
    messages = []
    for mode in ("observed", "checked"):
        count.clear()
        lngb.clear_caches()
        with pytest.raises(Exception) as caught:
            operator("atlas-a2", F32)(mode)
        messages.append(str(caught.value).split()[0])
    assert messages[0] == messages[1]   # '#66' vs '#2'
