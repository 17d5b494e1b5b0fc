"""simulate_kernel (a user's kernel in Python on emulated cores), GetBlockIdx/GetBlockNum, TPipe()
on the current core, LNGB_MODE, and the pytest plugin (--lngb-mode, --lngb-product, the
lngb_core fixture, the lngb marker)."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import lngb
import naive
from lngb.vector_ops import (PIPE_V, Add, DataCopy, HardEvent, PipeBarrier, SetFlag, SyncAll,
                             WaitFlag)

pytestmark = pytest.mark.jitted

F32 = np.dtype(np.float32)


def add_kernel(x, y, z):
    """z = x + y, each core its share of the elements, through TPipe/TQue as in Ascend C."""
    n = x.size // lngb.GetBlockNum()
    start = lngb.GetBlockIdx() * n
    pipe = lngb.TPipe()
    qx, qy, qz = lngb.TQue("VECIN"), lngb.TQue("VECIN"), lngb.TQue("VECOUT")
    for q in (qx, qy, qz):
        pipe.InitBuffer(q, 1, n * 4)
    a, b = qx.AllocTensor(F32), qy.AllocTensor(F32)
    DataCopy(a, x[start], n)
    DataCopy(b, y[start], n)
    qx.EnQue(a)
    qy.EnQue(b)
    a, b, c = qx.DeQue(F32), qy.DeQue(F32), qz.AllocTensor(F32)
    Add(c, a, b, n)
    qz.EnQue(c)
    c = qz.DeQue(F32)
    DataCopy(z[start], c, n)
    qz.FreeTensor(c)
    pipe.Destroy()   # the TPipe destructor: waits for the frees nothing has waited for


@pytest.mark.parametrize("block_dim", [1, 4])
@pytest.mark.parametrize("mode", ["fast", "observed", "checked"])
def test_a_user_kernel_on_one_or_several_cores(block_dim, mode):
    x = np.arange(256, dtype=F32)
    y = np.full(256, 0.5, F32)
    before = x.copy()
    result = lngb.simulate_kernel(add_kernel, x, y, outputs=[((256,), F32)],
                                  block_dim=block_dim, mode=mode)
    assert np.array_equal(result.outputs[0], x + y)
    assert np.array_equal(x, before)
    assert len(result.cores) == block_dim and result.cost.cycles > 0
    assert (result.trace is None) == (mode == "fast")


def test_fast_mode_records_once_and_replays_new_data():
    x = np.arange(64, dtype=F32)
    first = lngb.simulate_kernel(add_kernel, x, x, outputs=[((64,), F32)])
    second = lngb.simulate_kernel(add_kernel, x * 3, x, outputs=[((64,), F32)])
    assert np.array_equal(second.outputs[0], 4 * x)
    assert second.cores[0].last_program is not None            # replayed
    assert np.array_equal(first.rows[0], second.rows[0])


def test_sync_all_waits_for_every_core():
    """Core k writes its block, SyncAll, then reads its neighbour's: only right if every core
    wrote before any read."""
    def kernel(x, out):
        k, n = lngb.GetBlockIdx(), lngb.GetBlockNum()
        core = lngb.current_core()
        buf = core.alloc(8, F32)
        DataCopy(buf, x[8 * k], 8)
        SetFlag(HardEvent.MTE2_MTE3, 0)
        WaitFlag(HardEvent.MTE2_MTE3, 0)
        DataCopy(out[8 * k], buf, 8)
        SyncAll()
        DataCopy(buf, out[8 * ((k + 1) % n)], 8)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        Add(buf, buf, buf, 8)
        PipeBarrier(PIPE_V)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(out[8 * (n + k)], buf, 8)

    x = np.arange(32, dtype=F32)
    result = lngb.simulate_kernel(kernel, x, outputs=[((64,), F32)], block_dim=4)
    out = result.outputs[0]
    assert np.array_equal(out[:32], x)
    assert np.array_equal(out[32:], 2 * np.roll(x, -8))


@pytest.mark.parametrize("mode", ["fast", "observed", "checked"])
def test_an_error_on_one_core_reaches_the_caller_with_its_index_and_the_others_stop(mode):
    after = []

    def kernel(x):
        if lngb.GetBlockIdx() == 1:
            raise ValueError("core 1 fails")
        SyncAll()
        after.append(lngb.GetBlockIdx())

    with pytest.raises(ValueError, match="core 1 fails") as caught:
        lngb.simulate_kernel(kernel, np.zeros(8, F32), outputs=[], block_dim=3, mode=mode)
    assert caught.value.block_idx == 1   # the original type, with the core's index
    if sys.version_info >= (3, 11):
        assert "on core 1 of 3" in "".join(caught.value.__notes__)
    assert after == []                   # no core went past the SyncAll
    with pytest.raises(lngb.InvalidArgumentError):   # nothing left current
        lngb.current_core()


def run_script(code, timeout=120, **kw):
    """`code` in a fresh interpreter (a hang there fails this test instead of stopping the
    run); the CompletedProcess."""
    env = dict(os.environ)
    env.pop("LNGB_MODE", None)
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                              text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the script hung ({timeout} s): {err.stdout} {err.stderr}")


@pytest.mark.process
def test_sync_all_that_cannot_complete_is_a_hazard_within_a_second():
    """Only some cores call SyncAll, or one calls it twice: a HazardError naming every core and
    the SyncAlls it reached, not a hang (today: a hang)."""
    run = run_script("""
        import time
        import numpy as np
        import lngb
        from lngb.vector_ops import SyncAll

        def only_core_0(x):
            if lngb.GetBlockIdx() == 0:
                SyncAll()

        def core_1_twice(x):
            SyncAll()
            if lngb.GetBlockIdx() == 1:
                SyncAll()

        for kernel, block_dim in ((only_core_0, 3), (core_1_twice, 2)):
            for mode in ("fast", "observed", "checked"):
                start = time.perf_counter()
                try:
                    lngb.simulate_kernel(kernel, np.zeros(8, np.float32), outputs=[],
                                         block_dim=block_dim, mode=mode)
                except lngb.HazardError as err:
                    print(kernel.__name__, mode, time.perf_counter() - start < 1, err)
    """, timeout=60)
    lines = run.stdout.splitlines()
    assert len(lines) == 6, run.stdout + run.stderr
    for line in lines[:3]:
        assert " True " in line and "core 0: 1, core 1: 0, core 2: 0" in line, line
    for line in lines[3:]:
        assert " True " in line and "core 0: 1, core 1: 2" in line, line


def test_the_sample_kernel_of_layer_norm_grad_beta_as_a_user_kernel():
    """LayerNormGradBeta in a user kernel gives emulate's bits."""
    def kernel(dy, rfg, gamma, beta):
        core = lngb.current_core()
        b, s, h = 2, 8, 64
        local = [core.alloc(b * s * h, F32) for _ in range(2)] + [core.alloc(h, F32)
                                                                  for _ in range(2)]
        tmp = core.alloc(4096, np.uint8)
        DataCopy(local[0], dy, b * s * h)
        DataCopy(local[1], rfg, b * s * h)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        tiling = lngb.GetLayerNormGradBetaNDTilingInfo((b, s, h), 4096, 4, False)
        lngb.LayerNormGradBeta(local[2], local[3], local[1], local[0], tmp, tiling)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(gamma, local[2], h)
        DataCopy(beta, local[3], h)

    rng = np.random.default_rng(0)
    dy, rfg = (rng.standard_normal((2, 8, 64)).astype(F32) for _ in range(2))
    for mode in ("fast", "checked"):
        result = lngb.simulate_kernel(kernel, dy, rfg, outputs=[((64,), F32)] * 2, mode=mode)
        want = naive.layer_norm_grad_beta(dy, rfg)
        assert np.array_equal(result.outputs[0], want[0])
        assert np.array_equal(result.outputs[1], want[1])


@pytest.mark.parametrize("dtype, reuse", [(np.float32, False), (np.float32, True), (np.float16, False)])
def test_emulate_is_its_sample_kernel_run_by_simulate_kernel(dtype, reuse):
    """lngb.emulate runs CANN's sample kernel as simulate_kernel runs a user's: the public
    simulate_kernel, given that kernel, executes the same instructions with the same bits."""
    from lngb.kernels.sample import SampleKernel
    rng = np.random.default_rng(1)
    dy, rfg = (rng.standard_normal((2, 16, 32)).astype(dtype) for _ in range(2))
    want = lngb.emulate(dy, rfg, is_reuse_source=reuse)
    size = 4 * want.tiling.stackBufferSize   # floats
    kernel = SampleKernel(dy.shape, dtype, size, want.tiling, reuse)
    for mode in ("fast", "checked"):
        got = lngb.simulate_kernel(kernel, dy, rfg, outputs=[((32,), dtype)] * 2, mode=mode)
        assert np.array_equal(got.rows[0], want.rows)
        assert got.outputs[0].tobytes() == want.pd_gamma.tobytes()
        assert got.outputs[1].tobytes() == want.pd_beta.tobytes()
    assert set(kernel.tensors) == {"inputDy", "resForGamma", "outputPdGamma", "outputPdBeta",
                                   "sharedTmpBuffer"}


@pytest.mark.parametrize("bad, match", [
    (dict(kernel=None), "kernel must be callable"),
    (dict(outputs="x"), "outputs must be a list"),
    (dict(outputs=[(1, 2, 3)]), r"output 0 must be \(shape, dtype\)"),
    (dict(block_dim=0), "block_dim"),
    (dict(block_dim=2, threads=0), "threads"),
    (dict(mode="fast!"), "mode must be one of"),
])
def test_bad_arguments(bad, match):
    kw = dict(kernel=add_kernel, outputs=[((64,), F32)])
    kw.update(bad)
    kernel = kw.pop("kernel")
    with pytest.raises(lngb.LngbError, match=match):
        lngb.simulate_kernel(kernel, np.zeros(64, F32), np.zeros(64, F32), **kw)


def test_block_idx_outside_a_simulation():
    assert (lngb.GetBlockIdx(), lngb.GetBlockNum()) == (0, 1)


# --- LNGB_MODE ---------------------------------------------------------------------------------

def test_lngb_mode_sets_the_default_and_an_explicit_mode_wins(monkeypatch):
    x = np.arange(64, dtype=F32).reshape(1, 8, 8)
    monkeypatch.setenv("LNGB_MODE", "checked")
    assert lngb.AICore().mode == "checked"
    assert lngb.emulate(x, x).core.mode == "checked"
    assert lngb.emulate(x, x, mode="fast").core.mode == "fast"
    assert lngb.emulate_operator(x, x).core.mode == "checked"
    monkeypatch.setenv("LNGB_MODE", "turbo")
    with pytest.raises(lngb.InvalidArgumentError, match="LNGB_MODE must be one of"):
        lngb.emulate(x, x)


# --- the pytest plugin -------------------------------------------------------------------------

INNER = textwrap.dedent('''
    import numpy as np
    import pytest
    import lngb
    from lngb.vector_ops import Add

    def test_defaults(lngb_core):
        x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
        print("MODE", lngb_core.mode, lngb_core.product.name, lngb.emulate(x, x).core.mode)

    @pytest.mark.lngb(product="atlas-350", mode="observed")
    def test_marker(lngb_core):
        x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
        print("MARKER", lngb_core.mode, lngb_core.product.name, lngb.emulate(x, x).core.mode)

    def test_fails_in_checked_mode(lngb_core):
        a, b = lngb_core.alloc(64, np.float32), lngb_core.alloc(64, np.float32)
        a.write(np.ones(64, np.float32))
        Add(a, a, a, 64)
        Add(b, b, a, 64)       # b was never written
''')


def run_inner(tmp_path, *options):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ)
    env.pop("LNGB_MODE", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider",
                           "-W", "ignore::DeprecationWarning", str(tmp_path / "test_inner.py"),
                           *options], capture_output=True, text=True, cwd=tmp_path, env=env)


@pytest.mark.process
def test_plugin_options_marker_and_fixture(tmp_path):
    run = run_inner(tmp_path, "--lngb-mode=checked", "--lngb-product=atlas-inference")
    out = run.stdout
    assert "MODE checked atlas-inference checked" in out
    assert "MARKER observed atlas-350 observed" in out
    assert "1 failed, 2 passed" in out
    assert "UninitializedReadError" in out
    assert "lngb: the last instructions of AICore('atlas-inference', mode='checked'" in out


@pytest.mark.process
def test_plugin_defaults_to_fast_without_options(tmp_path):
    run = run_inner(tmp_path, "-k", "defaults")
    assert "MODE fast atlas-a2 fast" in run.stdout, run.stdout + run.stderr


def test_a_kernel_inside_another_keeps_the_outer_block_index():
    """emulate (a one-core kernel) called inside a user's multi-core kernel leaves the
    kernel's GetBlockIdx / GetBlockNum as they were."""
    seen = []

    def kernel(out):
        before = (lngb.GetBlockIdx(), lngb.GetBlockNum())
        x = np.ones((1, 8, 64), F32)
        lngb.emulate(x, x)
        seen.append((before, (lngb.GetBlockIdx(), lngb.GetBlockNum())))

    lngb.simulate_kernel(kernel, outputs=[((64,), F32)], block_dim=2)
    assert sorted(seen) == [((0, 2), (0, 2)), ((1, 2), (1, 2))]
    assert (lngb.GetBlockIdx(), lngb.GetBlockNum()) == (0, 1)


def test_a_multicore_kernel_that_never_reaches_sync_all_is_an_error():
    from lngb.runtime import schedule

    class Returns:
        run = schedule.Live(lngb.AICore(), ())

        def Process(self):
            return
            yield

    with pytest.raises(lngb.InvalidArgumentError, match="core 0's kernel returned before its "
                                                        "SyncAll"):
        schedule.run_phases([Returns()])


def test_threads_is_validated_and_the_cores_take_turns_in_the_calling_thread():
    """threads= is kept (a positive integer) but changes nothing: every core runs in the
    calling thread (today: threads=1 with 4 cores was refused)."""
    seen = []

    def kernel(x, y, z):
        seen.append(threading.get_ident())
        add_kernel(x, y, z)

    x = np.arange(256, dtype=F32)
    for threads in (None, 1, 8):
        result = lngb.simulate_kernel(kernel, x, x, outputs=[((256,), F32)], block_dim=4,
                                      threads=threads)
        assert np.array_equal(result.outputs[0], 2 * x)
    assert set(seen) == {threading.get_ident()}


PDB_KERNEL = '''
import numpy as np
import lngb
from lngb.vector_ops import SyncAll

def kernel(x):
    k = lngb.GetBlockIdx()
    breakpoint()
    SyncAll()
    after = k
    breakpoint()

lngb.simulate_kernel(kernel, np.zeros(8, np.float32), outputs=[], block_dim=3, mode="observed")
print("DONE")
'''


@pytest.mark.process
def test_pdb_breakpoints_fire_on_every_core_before_and_after_sync_all(tmp_path):
    """breakpoint() in a user's kernel stops on each of its 3 cores, before and after SyncAll
    (today only in the main thread: with block_dim > 1, never)."""
    (tmp_path / "kernel.py").write_text(PDB_KERNEL)
    commands = "p ('HIT', k, 'after' in dir())\nc\n" * 6
    run = run_script(f"import runpy; runpy.run_path({str(tmp_path / 'kernel.py')!r})",
                     timeout=120, input=commands)
    hits = [line for line in run.stdout.splitlines() if "'HIT'" in line]
    assert hits == [f"(Pdb) ('HIT', {k}, {after})" for after in (False, True)
                    for k in range(3)], run.stdout + run.stderr
    assert "DONE" in run.stdout


CTRL_C = '''
import signal, threading, time
ctrl_c = lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)   # as a terminal's
workers = lambda: [t for t in threading.enumerate()
                   if t.is_alive() and t is not threading.main_thread()
                   and not isinstance(t, threading.Timer)]
import numpy as np
import lngb
from lngb.vector_ops import PIPE_V, PipeBarrier, SyncAll
from test_simulate import add_kernel

def spins(x, y, z):
    if lngb.GetBlockIdx() == 2:
        while True:
            PipeBarrier(PIPE_V)
    SyncAll()

x = np.arange(256, dtype=np.float32)
def press(stopped):   # Ctrl-C again every 0.1 s: numpy's probe for __array_ufunc__ on an
    while not stopped.wait(0.1):   # IntEnum swallows a KeyboardInterrupt raised inside it
        ctrl_c()

for mode in ("fast", "observed", "checked"):
    stopped = threading.Event()
    threading.Timer(0.3, press, (stopped,)).start()
    start = time.perf_counter()
    try:
        lngb.simulate_kernel(spins, x, x, outputs=[((256,), np.float32)], block_dim=4, mode=mode)
    except KeyboardInterrupt as err:
        stopped.set()
        within = time.perf_counter() - start - 0.3 < 1   # of the first Ctrl-C
        time.sleep(0.2)   # the presser has stopped (a Timer, not counted)
        print(mode, "stopped:", within, "core", err.block_idx, "threads left:", len(workers()))
    result = lngb.simulate_kernel(add_kernel, x, x, outputs=[((256,), np.float32)], block_dim=4,
                                  mode=mode)
    print(mode, "then right:", np.array_equal(result.outputs[0], 2 * x))
'''


@pytest.mark.process
def test_ctrl_c_stops_every_core_and_later_calls_are_right():
    """Ctrl-C while core 2 spins and the others wait at SyncAll: the KeyboardInterrupt reaches
    the caller with the core's index, no thread is left and the process exits within the
    timeout (today the cores' threads ran on and the process could not exit)."""
    run = run_script(CTRL_C, timeout=30, cwd=os.path.dirname(__file__))
    for mode in ("fast", "observed", "checked"):
        assert f"{mode} stopped: True core 2 threads left: 0" in run.stdout, run.stdout + run.stderr
        assert f"{mode} then right: True" in run.stdout
    assert run.returncode == 0


def test_a_kernel_using_another_cores_tensors_is_refused():
    """The cores take turns in one thread: core 1 may not issue on core 0's tensors while core
    0's kernel waits at SyncAll (with threads, the core's lock refused it)."""
    shared = {}

    def kernel(x, out):
        core = lngb.current_core()
        if lngb.GetBlockIdx() == 0:
            shared["ub"] = core.alloc(64, F32)
        else:   # core 0 runs first, up to its SyncAll
            lngb.vector_ops.Duplicate(shared["ub"], 1.0, 64)
        SyncAll()
    with pytest.raises(lngb.InvalidArgumentError, match="in use by another core's kernel"):
        lngb.simulate_kernel(kernel, np.zeros(64, F32), outputs=[((64,), F32)], block_dim=2,
                             mode="observed")
