"""The rest of the reliability report (issue 27, item 6): DataCopy truncation warnings, aliasing
checks of every API, trace listings of every record kind, LNGB_CACHE_MB, empty sweeps, `lngb run`
options, `lngb debug --commands` bytes, Debugger.watch across cores, TPipe event ids, what the
caches count, and messages that name the API called."""
import gc
import os
import pathlib
import re
import subprocess
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

import lngb
from lngb import HazardError, InvalidArgumentError, LngbWarning
from lngb.cli import main
from lngb.trace import format_listing
from lngb.vector_ops import DataCopy, HardEvent, SetFlag, WaitFlag

pytestmark = pytest.mark.jitted

F32 = np.dtype(np.float32)
MODES = ("fast", "observed", "checked")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lng_inputs(shape=(1, 8, 8), dtype=F32):
    """dy, x, variance, mean, gamma of `shape` (small, exact values)."""
    b, s, h = shape
    dy = (np.arange(b * s * h) % 13 - 6).astype(dtype).reshape(shape)
    x = (np.arange(b * s * h) % 7).astype(dtype).reshape(shape)
    mean = x.astype(np.float32).mean(-1).astype(dtype)
    var = (x.astype(np.float32).var(-1) + 1).astype(dtype)
    return dy, x, var, mean, (np.arange(h) % 5).astype(dtype)


def caught(call):
    """call()'s warnings, every one recorded."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return seen


# --- 1. DataCopy of a count that is not whole 32-byte blocks ------------------------------------

def truncating_kernel(x, z):
    """Copies 10 floats in (the device moves 32 bytes, dropping 8), three times from one line."""
    core = lngb.current_core()
    a = core.alloc(16, F32, "VECIN")
    for _ in range(3):
        DataCopy(a, x, 10)   # the truncating line
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(z, a, 8)


TRUNCATING_LINE = next(i for i, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
                       if line.endswith("# the truncating line"))


@pytest.mark.parametrize("mode", MODES)
def test_a_truncating_datacopy_warns_once_per_call_site_in_every_mode(mode):
    x = np.arange(16, dtype=F32)
    for _ in range(2):   # the second fast call replays the recording: it warns the same
        seen = caught(lambda: lngb.simulate_kernel(truncating_kernel, x, outputs=[((8,), F32)],
                                                   mode=mode))
        mine = [w for w in seen if issubclass(w.category, LngbWarning)]
        assert len(mine) == 1, [str(w.message) for w in seen]
        text = str(mine[0].message)
        assert "DataCopy" in text and "drops" in text and "8 bytes" in text
        assert f"test_reliability.py:{TRUNCATING_LINE}" in text


def test_whole_block_copies_do_not_warn():
    x = np.arange(16, dtype=F32)
    assert not caught(lambda: lngb.emulate(x.reshape(1, 2, 8), x.reshape(1, 2, 8)))


# --- 2. outputs that share bytes with what LayerNormGrad reads later ------------------------------

def lng_with_pd_x_at(shift_floats, mode):
    """LayerNormGrad with outputPdX starting `shift_floats` after inputX (one buffer): the core
    and the call."""
    shape = (1, 8, 8)
    data = lng_inputs(shape)
    size = 4
    least = lngb.GetLayerNormGradMaxMinTmpSize(shape, size, False)[1]
    tiling = lngb.GetLayerNormGradNDTilingInfo(shape, least, size, False)
    core = lngb.AICore(mode=mode)
    rfg, dy = core.alloc(shape, F32), core.alloc(shape, F32)
    both = core.alloc(64 + 64, F32)
    x, pd_x = both, both[shift_floats]
    var, mean, gamma = (core.alloc(8, F32) for _ in range(3))
    for tensor, array in zip((dy, x, var, mean, gamma), data):
        tensor.write(np.resize(array.reshape(-1), tensor.size))
    tmp = core.alloc(max(least, 32), np.uint8)
    return core, pd_x, lambda: lngb.LayerNormGrad(pd_x, rfg, dy, x, var, mean, gamma, tmp, 1e-5,
                                                  tiling)


@pytest.mark.parametrize("shift", [8, 32])
def test_layer_norm_grad_outputs_overlapping_inputs_warn_and_raise_in_checked_mode(shift):
    results = []
    for mode in ("fast", "observed"):
        core, pd_x, call = lng_with_pd_x_at(shift, mode)
        with pytest.warns(LngbWarning, match=r"LayerNormGrad: outputPdX \(UB bytes .* shares "
                                             r"bytes .* with inputX"):
            call()
        results.append(pd_x.read()[:64].copy())
    assert np.array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
    core, _, call = lng_with_pd_x_at(shift, "checked")
    with pytest.raises(HazardError, match="the results are wrong"):
        call()


def test_layer_norm_grad_in_place_on_its_inputs_is_no_hazard():
    """outputPdX exactly on inputX (element for element: each is read before it is written)
    gives the bits of an outputPdX apart (64 floats on: past the 64 of inputX it reads)."""
    bits = []
    for shift in (0, 64):
        core, pd_x, call = lng_with_pd_x_at(shift, "checked")
        assert not [w for w in caught(call) if issubclass(w.category, LngbWarning)]
        bits.append(pd_x.read()[:64].view(np.uint32).copy())
    assert np.array_equal(bits[0], bits[1])


def test_both_apis_share_one_aliasing_check():
    import inspect
    from lngb.kernels import aliasing, layer_norm_grad, layer_norm_grad_beta
    for module in (layer_norm_grad, layer_norm_grad_beta):
        assert module.check_shared_bytes is aliasing.check_shared_bytes
        assert "shares bytes" not in inspect.getsource(module)
    assert not hasattr(layer_norm_grad, "_check_reuse_aliasing")


# --- 3. trace listings of every record kind, product and API --------------------------------------

def getset_kernel(x, z):
    """GetValue / SetValue on the scalar unit between two copies."""
    core = lngb.current_core()
    a = core.alloc(8, F32, "VECIN")
    DataCopy(a, x, 8)
    SetFlag(HardEvent.MTE2_S, 0)
    WaitFlag(HardEvent.MTE2_S, 0)
    a.SetValue(1, a.GetValue(0))
    SetFlag(HardEvent.S_MTE3, 0)
    WaitFlag(HardEvent.S_MTE3, 0)
    DataCopy(z, a, 8)


@pytest.mark.parametrize("product", list(lngb.PRODUCTS))
def test_the_trace_listing_of_every_api_on_every_product_renders(product, recwarn):
    dy = np.arange(2 * 8 * 16, dtype=F32).reshape(2, 8, 16) % 11
    lng = lng_inputs((2, 8, 16))
    x = np.arange(8, dtype=F32)
    streams = {
        "emulate": [lngb.emulate(dy, dy, product=product, trace=True).trace],
        "emulate_operator": lngb.emulate_operator(dy, dy, product=product, block_dim=2,
                                                  mode="observed").trace,
        "emulate_layer_norm_grad": [lngb.emulate_layer_norm_grad(*lng, product=product,
                                                                 trace=True).trace],
        "emulate_layer_norm_backward": lngb.emulate_layer_norm_backward(
            *lng, product=product, block_dim=2, mode="observed").trace,
        "simulate_kernel": lngb.simulate_kernel(getset_kernel, x, outputs=[((8,), F32)],
                                                product=product, mode="observed").trace,
    }
    names = set()
    for api, traces in streams.items():
        for records in traces:
            lines = format_listing(records).splitlines()
            assert len(lines) == len(records) > 0, api
            names |= {r.name for r in records}
    assert {"GetValue", "SetValue", "DataCopy", "SetFlag"} <= names
    listing = format_listing(streams["simulate_kernel"][0])
    get_value = next(line for line in listing.splitlines() if "GetValue" in line)
    assert "PIPE_S" in get_value and "UB@" in get_value


# --- 4. LNGB_CACHE_MB ---------------------------------------------------------------------------

def run_python(code, value, *args):
    env = dict(os.environ, LNGB_CACHE_MB=value, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, *args, *(["-c", code] if code else [])], env=env,
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.process
def test_a_bad_lngb_cache_mb_never_breaks_import_and_is_one_clear_error_when_used():
    used = run_python("import lngb\ntry:\n    lngb.cache_info()\nexcept lngb.InvalidArgumentError "
                      "as e:\n    print('ERROR', e)\n", "abc")
    assert used.returncode == 0 and "Traceback" not in used.stderr, used.stderr
    assert used.stdout.startswith("ERROR") and "LNGB_CACHE_MB" in used.stdout
    assert repr("abc") in used.stdout


@pytest.mark.parametrize("value", ["inf", "abc", "-1", "nan"])
def test_each_bad_lngb_cache_mb_is_one_clear_error_naming_it(value):
    from lngb.runtime import cache
    with pytest.raises(InvalidArgumentError, match=rf"LNGB_CACHE_MB.*{re.escape(repr(value))}"):
        cache.limit_from_environment({"LNGB_CACHE_MB": value})


@pytest.mark.process
def test_a_bad_lngb_cache_mb_does_not_break_a_pytest_run_that_never_uses_lngb(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    env = dict(os.environ, LNGB_CACHE_MB="abc", PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "test_plain.py")], env=env, capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_set_cache_limit_overrides_a_bad_environment_value():
    from lngb.runtime import cache
    store = cache.Store(None, environ={"LNGB_CACHE_MB": "abc"})
    with pytest.raises(InvalidArgumentError, match="LNGB_CACHE_MB"):
        store.put("c", 1, "value", 10)
    store.set_limit(100)
    store.put("c", 1, "value", 10)
    assert store.limit == 100 and store.get("c", 1) == "value"


# --- 5. empty sweeps ----------------------------------------------------------------------------

def test_an_empty_sweep_renders_an_empty_csv_and_plot(tmp_path):
    from lngb import sweeps
    rows = lngb.sweep(shapes=[])
    assert rows == []
    sweeps.write_csv(rows, tmp_path / "empty.csv")
    lines = (tmp_path / "empty.csv").read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("product,shape,dtype,stack_buffer_size")
    sweeps.write_csv([], tmp_path / "op.csv", row_type=sweeps.OperatorSweepRow)
    assert (tmp_path / "op.csv").read_text().splitlines()[0].startswith(
        "product,shape,dtype,block_dim")
    pytest.importorskip("matplotlib")
    sweeps.plot(rows, tmp_path / "empty.png")
    assert (tmp_path / "empty.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sweeps.format_table(rows).count("\n") == 0 and sweeps.best_line(rows) == ""


# --- 6. lngb run --api layer-norm-grad | backward -----------------------------------------------

def bin_files(tmp_path, shape=(1, 8, 8)):
    """The five inputs as .bin files: {option: path}."""
    paths = {}
    for name, array in zip(("dy", "x", "variance", "mean", "gamma"), lng_inputs(shape)):
        paths[name] = tmp_path / f"{name}.bin"
        array.tofile(paths[name])
    return paths


def run_args(api, paths, out, *extra, shape="1,8,8"):
    args = ["run", "--api", api, "--shape", shape, "--out-dir", str(out)]
    for name, path in paths.items():
        args += [f"--{name}", str(path)]
    return args + list(extra)


@pytest.mark.parametrize("api, option", [
    ("layer-norm-grad", ["--res-for-gamma", "RFG"]), ("layer-norm-grad", ["--golden-gamma", "G"]),
    ("layer-norm-grad", ["--golden-beta", "G"]), ("layer-norm-grad", ["--reuse-buffer",
                                                                      "res_for_gamma"]),
    ("layer-norm-grad", ["--names", "ascend-sample"]),
    ("backward", ["--res-for-gamma", "RFG"]), ("backward", ["--stack-buffer-size", "4096"]),
    ("backward", ["--reuse-source"]), ("backward", ["--reuse-buffer", "res_for_gamma"]),
    ("layer-norm-grad-beta", ["--x", "X"]), ("layer-norm-grad-beta", ["--epsilon", "0.5"])])
def test_run_refuses_the_options_an_api_ignores(tmp_path, capsys, api, option):
    paths = bin_files(tmp_path)
    if api == "layer-norm-grad-beta":
        paths = {"dy": paths["dy"], "res-for-gamma": paths["x"]}
    out = tmp_path / "out"
    option = [str(paths["dy"]) if o in ("RFG", "G", "X") else o for o in option]
    assert main(run_args(api, paths, out, *option)) == 2
    err = capsys.readouterr().err
    assert option[0] in err and f"--api {api}" in err and "Traceback" not in err
    assert not out.exists()


def test_run_backward_checks_pd_gamma_and_pd_beta_against_golden_files(tmp_path, capsys):
    paths = bin_files(tmp_path)
    want = lngb.emulate_layer_norm_backward(*lng_inputs())
    want.pd_gamma.tofile(tmp_path / "g.bin")
    want.pd_beta.tofile(tmp_path / "b.bin")
    out = tmp_path / "out"
    assert main(run_args("backward", paths, out, "--golden-gamma", str(tmp_path / "g.bin"),
                         "--golden-beta", str(tmp_path / "b.bin"))) == 0
    text = capsys.readouterr().out
    assert "pdGamma vs golden: bit-identical" in text and "pdBeta vs golden: bit-identical" in text
    (want.pd_beta + 1).tofile(tmp_path / "b.bin")
    assert main(run_args("backward", paths, out, "--golden-beta", str(tmp_path / "b.bin"))) == 1
    assert "pdBeta vs golden: differs" in capsys.readouterr().out


@pytest.mark.parametrize("api", ["layer-norm-grad", "backward"])
def test_run_makes_no_out_dir_when_the_run_fails(tmp_path, capsys, api):
    paths = bin_files(tmp_path, (1, 8, 6))   # H = 6 floats: not whole 32-byte rows
    out = tmp_path / "a" / "out"
    assert main(run_args(api, paths, out, shape="1,8,6")) == 2
    assert "32-byte" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_run_removes_the_out_dir_it_made_when_the_write_fails(tmp_path, capsys, monkeypatch):
    import lngb.cli

    def fail(outputs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(lngb.cli, "write_outputs", fail)
    out = tmp_path / "a" / "out"
    assert main(run_args("layer-norm-grad", bin_files(tmp_path), out)) == 2
    assert "No space left" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


# --- 7. lngb debug --commands with bytes that are not UTF-8 ---------------------------------------

def test_debug_commands_that_are_not_utf8_are_a_clear_error(tmp_path, capsys):
    commands = tmp_path / "commands"
    commands.write_bytes(b"step\n\xff\xfe step\n")
    assert main(["debug", "--commands", str(commands)]) == 2
    err = capsys.readouterr().err
    assert str(commands) in err and "UTF-8" in err and "byte 5" in err


# --- 8. Debugger.watch of another core's tensor ---------------------------------------------------

def test_watch_refuses_a_tensor_of_another_core():
    seed = np.arange(2 * 8 * 16, dtype=F32).reshape(2, 8, 16)
    dbg = lngb.debug.OperatorDebugger(seed, seed, block_dim=2)
    other = next(iter(dbg[1].tensors.values()))
    with pytest.raises(InvalidArgumentError, match=r"watch: .*core 1.*core 0"):
        dbg[0].watch(other)
    dbg[1].watch(other)
    single = lngb.debug.Debugger(seed[:1], seed[:1])
    stranger = lngb.AICore().alloc(8, F32)
    with pytest.raises(InvalidArgumentError, match="another core"):
        single.watch(stranger)


# --- 9. event ids as CANN's TPipe hands them out ----------------------------------------------------

def test_tpipe_hands_out_the_lowest_event_id_not_allocated():
    core = lngb.AICore()
    with core:
        pipe = lngb.TPipe()
        ids = [pipe.AllocEventID(HardEvent.MTE2_V) for _ in range(3)]
        assert ids == [0, 1, 2]
        pipe.ReleaseEventID(HardEvent.MTE2_V, 1)
        pipe.ReleaseEventID(HardEvent.MTE2_V, 0)
        assert pipe.FetchEventID(HardEvent.MTE2_V) == 0   # fetched, not allocated
        assert [pipe.AllocEventID(HardEvent.MTE2_V) for _ in range(3)] == [0, 1, 3]
        assert pipe.FetchEventID(HardEvent.V_MTE2) == 0
        pipe.ReleaseEventID(HardEvent.MTE2_V, 2)
        pipe.ReleaseEventID(HardEvent.MTE2_V, 2)   # a free id's bit is clear already
        assert [pipe.AllocEventID(HardEvent.MTE2_V) for _ in range(2)] == [2, 4]
        pipe.ReleaseEventID(HardEvent.S_V, 3)     # an event nothing allocated yet
        assert pipe.AllocEventID(HardEvent.S_V) == 0
        with pytest.raises(InvalidArgumentError, match="ReleaseEventID: id"):
            pipe.ReleaseEventID(HardEvent.MTE2_V, 8)


def v_s_ids(records):
    return [r.row[lngb.vector_ops.program.SRC1] for r in records
            if r.name == "SetFlag" and "V->S" in format_listing([r])]


def test_layer_norm_grad_fetches_its_event_id_from_the_kernels_tpipe():
    """On the 310P the broadcast goes through the scalar unit, after SetFlag(V_S, FetchEventID)."""
    shape = (1, 8, 8)
    data = lng_inputs(shape)
    least = lngb.GetLayerNormGradMaxMinTmpSize(shape, 4, False, product="atlas-inference")[1]
    tiling = lngb.GetLayerNormGradNDTilingInfo(shape, least, 4, False, product="atlas-inference")
    core = lngb.AICore("atlas-inference", mode="observed")
    with core:
        pipe = lngb.TPipe()
        held = pipe.AllocEventID(HardEvent.V_S)   # the kernel holds id 0 of V_S
        tensors = [core.alloc(shape, F32) for _ in range(4)] + [core.alloc(8, F32)
                                                                for _ in range(3)]
        for tensor, array in zip(tensors[2:], data):
            tensor.write(array.reshape(-1))
        tmp = core.alloc(least, np.uint8)
        lngb.LayerNormGrad(*tensors, tmp, 1e-5, tiling)
    assert held == 0 and set(v_s_ids(core.trace)) == {1}


def test_the_sample_kernel_of_emulate_layer_norm_grad_owns_a_tpipe():
    result = lngb.emulate_layer_norm_grad(*lng_inputs(), product="atlas-inference", trace=True)
    assert isinstance(result.core.tpipe, lngb.TPipe) and result.core.tpipe.core is result.core
    assert set(v_s_ids(result.trace)) == {0}


# --- 10. what the caches count ------------------------------------------------------------------

def traced_bytes(make):
    """(make()'s result, the bytes tracemalloc sees it allocate and keep)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = make()
        gc.collect()
        return value, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_recorded_programs_nbytes_counts_what_it_holds_and_the_heaps_overhead():
    from lngb.runtime import recording
    from lngb.simulate import global_tensors
    dy = np.arange(4 * 8 * 64, dtype=F32).reshape(4, 8, 64) % 7
    lngb.emulate(dy, dy)   # compiled, set up: only the program is new below
    core, kernel, gms, _, _, _ = lngb.host.sample_kernel(dy, dy)

    def body():
        with core:
            kernel(*global_tensors(gms, [kernel.dtype] * len(gms)))
    program, held = traced_bytes(lambda: recording.record(core, body, gms))
    assert held <= program.nbytes <= 1.5 * held, (program.nbytes, held)


@pytest.mark.parametrize("mode", ["fast", "checked"])   # a checked plan keeps trace records
def test_an_operator_plans_nbytes_counts_what_it_holds_and_the_heaps_overhead(mode):
    # one thread: with two, whether the two lock-step jobs ran at once (a second spare UB block,
    # 820 KB, kept) depended on the threads' timing
    x = np.ones((1, 16, 128), F32)
    lngb.clear_caches()   # so that the next call checks its plan (and makes the thread's scratch)
    lngb.emulate_operator(x, x, block_dim=8, mode=mode, threads=1)   # compiled, a spare UB
    # block of lock step kept: only the new shape's plan is new below
    dy = np.ones((1, 64, 256), F32)

    def plans():
        return lngb.cache_info().get("operator plans", (0, 0))[1]
    before = plans()
    _, held = traced_bytes(lambda: lngb.emulate_operator(dy, dy, block_dim=8, mode=mode,
                                                         threads=1) and None)
    counted = plans() - before
    assert held <= counted + 4096 <= 1.5 * held, (counted, held)   # 4096: its tiling's entry


# --- 11. messages name the API the user called ------------------------------------------------------

def test_block_dim_errors_name_emulate_layer_norm_backward():
    data = lng_inputs()
    for block_dim in (99, 9):
        with pytest.raises(InvalidArgumentError) as err:
            lngb.emulate_layer_norm_backward(*data, block_dim=block_dim)
        assert str(err.value).startswith("emulate_layer_norm_backward: block_dim")
        assert "emulate_operator" not in str(err.value)
    with pytest.raises(InvalidArgumentError, match="^emulate_operator: block_dim"):
        lngb.emulate_operator(data[0], data[0], block_dim=99)


@pytest.mark.parametrize("api", ["emulate_layer_norm_grad", "emulate_layer_norm_backward"])
def test_unsupported_products_are_named_by_the_api_called(api):
    with pytest.raises(lngb.UnsupportedProductError) as err:
        getattr(lngb, api)(*lng_inputs(), product="atlas-training")
    text = str(err.value)
    assert text.startswith(f"{api}: product 'atlas-training'") and "LayerNormGrad " in text
    with pytest.raises(lngb.UnsupportedProductError, match="^emulate: product 'atlas-training'"):
        lngb.emulate(lng_inputs()[0], lng_inputs()[0], product="atlas-training")
