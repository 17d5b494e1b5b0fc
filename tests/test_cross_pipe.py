"""mode="checked" finds hazards between pipes (MTE2, MTE3, V, S): RAW, WAR and WAW on UB and
GM bytes with nothing ordering them, named with both instructions, their pipes and the event
that would order them; and every SetFlag/WaitFlag pair in lngb's kernels is needed (removing
any one of them is caught)."""
import numpy as np
import pytest

import lngb
from lngb import HazardError
from lngb.observers.sanitizer import Sanitizer
from lngb.vector_ops import (PIPE_ALL, Adds, DataCopy, Duplicate, HardEvent, Muls, PipeBarrier,
                             SetFlag, WaitFlag)

F32 = np.float32
X = np.arange(64, dtype=F32)
PRODUCTS = ("atlas-a2", "atlas-inference", "atlas-350")


def sync(event, event_id=0):
    SetFlag(event, event_id)
    WaitFlag(event, event_id)


def double(x, y, skip=()):
    """The kernel of docs/testing.md; `skip` names the events left out."""
    ub = lngb.current_core().alloc(x.size, F32)
    DataCopy(ub, x, x.size)
    if "MTE2_V" not in skip:
        sync(HardEvent.MTE2_V)
    Muls(ub, ub, 2.0, x.size)
    if "V_MTE3" not in skip:
        sync(HardEvent.V_MTE3)
    DataCopy(y, ub, x.size)


def checked(kernel, *inputs, outputs=(((64,), F32),), mode="checked", product="atlas-a2"):
    return lngb.simulate_kernel(kernel, *inputs, outputs=list(outputs), mode=mode,
                                product=product)


@pytest.mark.parametrize("product", PRODUCTS)
def test_the_readme_kernel_runs_clean_and_each_missing_flag_is_named(product):
    assert np.array_equal(checked(double, X, product=product).outputs[0], 2 * X)
    with pytest.raises(HazardError) as info:
        checked(lambda x, y: double(x, y, skip=("MTE2_V",)), X, product=product)
    message = str(info.value)
    assert message.startswith("RAW hazard: #2 Muls (") and "test_cross_pipe.py" in message
    assert "on PIPE_V reads UB bytes [0, 256) written by #1 DataCopy" in message
    assert "on PIPE_MTE2" in message and "add SetFlag/WaitFlag(HardEvent.MTE2_V)" in message
    with pytest.raises(HazardError, match=r"RAW hazard: #5 DataCopy .* on PIPE_MTE3 reads UB "
                                          r"bytes \[0, 256\) written by #4 Muls .* on PIPE_V.*"
                                          r"HardEvent\.V_MTE3"):
        checked(lambda x, y: double(x, y, skip=("V_MTE3",)), X, product=product)


def test_fast_and_observed_modes_do_not_check():
    for mode in ("fast", "observed"):
        out = checked(lambda x, y: double(x, y, skip=("MTE2_V", "V_MTE3")), X, mode=mode)
        assert np.array_equal(out.outputs[0], 2 * X)


def test_double_buffering_overwrite_of_a_buffer_v_still_reads_is_a_war():
    def kernel(x, y, free_it=False):
        core = lngb.current_core()
        buf, out = core.alloc(32, F32), core.alloc(32, F32)
        DataCopy(buf, x, 32)
        sync(HardEvent.MTE2_V)
        Adds(out, buf, 1.0, 32)
        if free_it:
            sync(HardEvent.V_MTE2)
        DataCopy(buf, x[32], 32)              # the next tile into the same buffer
        sync(HardEvent.MTE2_V)
        Adds(out, buf, 1.0, 32)
        sync(HardEvent.V_MTE3)
        DataCopy(y, out, 32)
    with pytest.raises(HazardError, match=r"WAR hazard: #5 DataCopy .* on PIPE_MTE2 writes UB "
                                          r"bytes \[0, 128\) read by #4 Adds .* on PIPE_V.*"
                                          r"HardEvent\.V_MTE2"):
        checked(kernel, X, outputs=[((32,), F32)])
    out = checked(lambda x, y: kernel(x, y, True), X, outputs=[((32,), F32)]).outputs[0]
    assert np.array_equal(out, X[32:] + 1)


def scalar_kernel(flag):
    def kernel(x, y):
        core = lngb.current_core()
        ub, out = core.alloc(64, F32), core.alloc(64, F32)
        DataCopy(ub, x, 64)
        sync(HardEvent.MTE2_V)
        Muls(ub, ub, 3.0, 64)
        if flag:
            sync(HardEvent.V_S)
        Duplicate(out, float(ub.GetValue(1)), 64)   # a value used in Python: runs live
        sync(HardEvent.V_MTE3)
        DataCopy(y, out, 64)
    return kernel


def test_a_scalar_read_of_what_v_wrote_needs_v_s():
    with pytest.raises(HazardError, match=r"RAW hazard: #\d+ GetValue .* on PIPE_S reads UB "
                                          r"bytes \[4, 8\) written by #\d+ Muls .* on PIPE_V.*"
                                          r"HardEvent\.V_S"):
        checked(scalar_kernel(False), X)
    assert np.array_equal(checked(scalar_kernel(True), X).outputs[0], np.full(64, 3, F32))


def test_a_scalar_write_read_by_v_needs_s_v_and_a_scalar_read_orders_what_follows():
    def kernel(x, y, flag):
        core = lngb.current_core()
        ub = core.alloc(64, F32)
        DataCopy(ub, x, 64)
        sync(HardEvent.MTE2_S)
        ub.SetValue(0, 5.0)
        if flag:
            sync(HardEvent.S_V)
        Muls(ub, ub, 2.0, 64)
        sync(HardEvent.V_MTE3)
        DataCopy(y, ub, 64)
    with pytest.raises(HazardError, match=r"RAW hazard: .* Muls .* on PIPE_V reads UB bytes "
                                          r"\[0, 4\) written by .* SetValue .*HardEvent\.S_V"):
        checked(lambda x, y: kernel(x, y, False), X)
    expected = 2 * X
    expected[0] = 10
    assert np.array_equal(checked(lambda x, y: kernel(x, y, True), X).outputs[0], expected)


def test_gm_written_by_mte3_and_read_back_by_mte2_needs_mte3_mte2():
    def kernel(x, y, flag):
        core = lngb.current_core()
        ub, back = core.alloc(64, F32), core.alloc(64, F32)
        DataCopy(ub, x, 64)
        sync(HardEvent.MTE2_MTE3)
        DataCopy(y, ub, 64)
        if flag:
            sync(HardEvent.MTE3_MTE2)
        DataCopy(back, y[16], 16)                       # reads GM bytes the MTE3 copy writes
        sync(HardEvent.MTE2_MTE3)
        DataCopy(y[32], back, 16)
    with pytest.raises(HazardError, match=r"RAW hazard: #\d+ DataCopy .* on PIPE_MTE2 reads GM "
                                          r"bytes \[64, 128\) written by #\d+ DataCopy .* on "
                                          r"PIPE_MTE3.*HardEvent\.MTE3_MTE2"):
        checked(lambda x, y: kernel(x, y, False), X)
    out = checked(lambda x, y: kernel(x, y, True), X).outputs[0]
    assert np.array_equal(out[32:48], X[16:32])


def test_gm_read_by_mte2_and_overwritten_by_mte3_needs_mte2_mte3():
    def kernel(x, ub_data, flag):
        core = lngb.current_core()
        ub, other = core.alloc(64, F32), core.alloc(64, F32)
        DataCopy(other, ub_data, 64)
        sync(HardEvent.MTE2_MTE3)
        DataCopy(ub, x, 64)                             # MTE2 reads x
        if flag:
            sync(HardEvent.MTE2_MTE3, 1)
        DataCopy(x, other, 64)                          # MTE3 overwrites x
    inputs = (X, np.ones(64, F32))
    with pytest.raises(HazardError, match=r"WAR hazard: .* on PIPE_MTE3 writes GM bytes "
                                          r"\[0, 256\) read by .* on PIPE_MTE2.*MTE2_MTE3"):
        checked(lambda x, u, y: kernel(x, u, False), *inputs)
    checked(lambda x, u, y: kernel(x, u, True), *inputs)


def test_pipe_barrier_all_and_flag_chains_order_everything_before_them():
    def with_barriers(x, y):
        ub = lngb.current_core().alloc(64, F32)
        DataCopy(ub, x, 64)
        PipeBarrier(PIPE_ALL)
        Muls(ub, ub, 2.0, 64)
        PipeBarrier(PIPE_ALL)
        DataCopy(y, ub, 64)

    def chained(x, y):   # MTE2 -> V -> MTE3: the MTE3 copy is ordered after the MTE2 one
        core = lngb.current_core()
        ub, out = core.alloc(64, F32), core.alloc(64, F32)
        DataCopy(ub, x, 64)
        sync(HardEvent.MTE2_V)
        Muls(out, ub, 2.0, 64)
        sync(HardEvent.V_MTE3)
        DataCopy(y, ub, 64)

    def scalar_wait(x, y):   # a wait on S holds back every later instruction
        ub = lngb.current_core().alloc(64, F32)
        DataCopy(ub, x, 64)
        sync(HardEvent.MTE2_S)
        Muls(ub, ub, 2.0, 64)
        sync(HardEvent.V_S)
        DataCopy(y, ub, 64)
    assert np.array_equal(checked(with_barriers, X).outputs[0], 2 * X)
    assert np.array_equal(checked(chained, X).outputs[0], X)
    assert np.array_equal(checked(scalar_wait, X).outputs[0], 2 * X)


def test_a_queue_kernel_double_buffered_runs_clean_and_its_flags_are_needed():
    def kernel(x, y):
        pipe = lngb.TPipe()
        qin, qout = lngb.TQue("VECIN", 2), lngb.TQue("VECOUT", 2)
        pipe.InitBuffer(qin, 2, 64)
        pipe.InitBuffer(qout, 2, 64)
        for tile in range(4):
            a = qin.AllocTensor(F32)
            DataCopy(a, x[16 * tile], 16)
            qin.EnQue(a)
            a, b = qin.DeQue(F32), qout.AllocTensor(F32)
            Muls(b, a, 2.0, 16)
            qin.FreeTensor(a)
            qout.EnQue(b)
            b = qout.DeQue(F32)
            DataCopy(y[16 * tile], b, 16)
            qout.FreeTensor(b)
        pipe.Destroy()
    assert np.array_equal(checked(kernel, X).outputs[0], 2 * X)
    assert_every_flag_is_needed([lngb.simulate_kernel(kernel, X, outputs=[((64,), F32)],
                                                      mode="observed").trace[0]])


# --- every flag of lngb's kernels is needed ----------------------------------------------------

def flag_pairs(records):
    """(SetFlag index, its WaitFlag's index) of each pair in a core's trace."""
    pending, pairs = {}, []
    for i, r in enumerate(records):
        if r.name in ("SetFlag", "WaitFlag"):
            key = tuple(int(v) for v in r.row[5:8])   # DST, SRC0, SRC1: src, dst, id
            if r.name == "SetFlag":
                pending.setdefault(key, []).append(i)
            else:
                pairs.append((pending[key].pop(0), i))
    return pairs


def sanitize(records, product, skip=()):
    """Check a core's records with a fresh sanitizer, the records at `skip` left out."""
    sanitizer = Sanitizer(lngb.AICore(product))
    for i, record in enumerate(records):
        if i not in skip:
            sanitizer.check_record(record, record.seq)


QUIET = ("SetFlag", "WaitFlag", "PipeBarrier", "SetMaskCount", "SetMaskNorm", "SetVectorMask",
         "ResetMask")   # records that touch no memory


def _dst_accesses(records, start, end, pipe):
    return any(r.name not in QUIET and int(r.row[2]) == pipe for r in records[start:end])


def orders_nothing_more(records, pair, pairs):
    """Whether the pair's ordering is given anyway, whatever the sanitizer says: a later
    SetFlag of the same event is waited for before the destination pipe touches memory (a
    double buffer's waits back to back: the source pipe runs in order), or nothing of the
    destination pipe follows before a SyncAll, PipeBarrier(PIPE_ALL) or the kernel's end (the
    TPipe destructor's waits)."""
    s1, w1 = pair
    key = tuple(records[s1].row[5:8])
    dst = int(records[w1].row[2])
    for s2, w2 in pairs:
        if (s2, w2) != pair and tuple(records[s2].row[5:8])[:2] == key[:2] and s2 > s1 and (
                w2 < w1 or not _dst_accesses(records, w1, w2, dst)):
            return True
    end = next((i for i in range(w1, len(records)) if records[i].name == "SyncAll" or (
        records[i].name == "PipeBarrier" and records[i].row[5] == PIPE_ALL)), len(records))
    return not _dst_accesses(records, w1, end, dst)


def assert_every_flag_is_needed(traces, product="atlas-a2"):
    """Each SetFlag/WaitFlag pair left out in turn: the sanitizer must catch it, unless the
    ordering it gives is given anyway (orders_nothing_more)."""
    missed = []
    for c, records in enumerate(traces):
        sanitize(records, product)
        pairs = flag_pairs(records)
        for pair in pairs:
            try:
                sanitize(records, product, pair)
            except HazardError:
                continue
            if not orders_nothing_more(records, pair, pairs):
                missed.append((c, records[pair[0]].seq, records[pair[0]].source))
    assert not missed, f"flag pairs whose removal nothing catches: {missed}"


def case(dtype, shape=(2, 8, 64), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(2)]


# The flags are the kernels' own, alike on A2 and A3 and in either dtype: a case per kernel path
# (A2/A3, the 310P's scalar broadcasts, the 950's), each dtype once.
CASES = [("atlas-a2", np.float32), ("atlas-inference", np.float16), ("atlas-350", np.float32),
         ("atlas-350", np.float16)]


@pytest.mark.parametrize("product, dtype", [("atlas-a2", np.float32), ("atlas-350", np.float16)])
def test_every_flag_of_emulate_is_needed(product, dtype):
    dy, rfg = case(dtype)
    assert_every_flag_is_needed([lngb.emulate(dy, rfg, product=product,
                                              mode="observed").core.trace], product)


def backward_inputs(dtype, shape=(1, 4, 64)):
    rng = np.random.default_rng(3)
    dy, x = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    mean = x.mean(-1).astype(dtype)
    variance = x.var(-1).astype(dtype)
    gamma = rng.standard_normal(shape[-1]).astype(dtype)
    return dy, x, variance, mean, gamma


@pytest.mark.parametrize("product, dtype", CASES)
def test_every_flag_of_the_layer_norm_grad_kernels_is_needed(product, dtype):
    args = backward_inputs(dtype)
    one = lngb.emulate_layer_norm_grad(*args, product=product, mode="observed")
    assert_every_flag_is_needed([one.trace], product)
    many = lngb.emulate_layer_norm_backward(*args, product=product, block_dim=2,
                                            mode="observed")
    assert_every_flag_is_needed(many.trace, product)


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
def test_every_flag_of_the_operator_is_needed(product):
    dy, rfg = case(np.float32, (2, 7, 64))
    result = lngb.emulate_operator(dy, rfg, product=product, block_dim=3, mode="observed")
    assert_every_flag_is_needed(result.trace, product)
