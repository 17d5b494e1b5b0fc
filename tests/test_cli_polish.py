"""Progress and output (issue 14, part 5): progress bars, short reprs and summaries, --version,
--help, --out -, golden mismatch reports, --names, --block-dim on run and trace, the compile
message."""
import json
import os
import shutil
import subprocess
import sys

import numba
import numpy as np
import pytest

import lngb
from lngb import sweeps
from lngb.cli import golden_report, main, ulps, version
from lngb import disk_cache
from lngb.vector_ops import executor, helpers
from lngb.vector_ops.table import TABLE

pytestmark = pytest.mark.jitted

F32 = np.float32


def test_sweeps_show_a_tqdm_bar_with_eta_and_the_current_case(capsys):
    lngb.sweep([(1, 8, 64)], ["float32"], ["atlas-a2"], progress=True)
    err = capsys.readouterr().err
    assert "sweep 1/1 atlas-a2 1x8x64 float32" in err and "<" in err   # elapsed<remaining
    assert "bytes" in err   # the size it is on
    lngb.sweep_operator((2, 16, 256), "float32", block_dims=[1, 2], progress=True)
    err = capsys.readouterr().err
    assert "sweep_operator 2x16x256 float32" in err and "block_dim" in err and "<" in err
    assert not hasattr(sweeps, "_Progress")   # no hand-written bar


@pytest.mark.parametrize("mode", ["observed", "checked"])
def test_operator_runs_core_by_core_show_a_bar_with_the_current_core(mode, capsys):
    x = np.ones((1, 8, 64), F32)
    lngb.emulate_operator(x, x, block_dim=2, mode=mode, progress=True)
    err = capsys.readouterr().err
    assert f"emulate_operator ({mode}, 2 cores)" in err and "phase 2 of 2" in err and "<" in err
    v, g = np.ones((1, 8), F32), np.ones(64, F32)
    lngb.emulate_layer_norm_backward(x, x, v, v, g, block_dim=2, mode=mode, progress=True)
    err = capsys.readouterr().err
    assert f"emulate_layer_norm_backward ({mode}, 2 cores)" in err and "core 1 of 2" in err
    lngb.emulate_operator(x, x, block_dim=2, mode=mode)
    assert capsys.readouterr().err == ""
    with pytest.raises(lngb.InvalidArgumentError, match="progress must be True or False"):
        lngb.emulate_operator(x, x, progress="yes")


def test_no_bar_unless_asked(capsys):
    lngb.sweep([(1, 8, 64)], ["float32"], ["atlas-a2"])
    assert capsys.readouterr().err == ""


def test_printing_an_operators_cost_is_short():
    dy = np.ones((4, 64, 256), F32)
    result = lngb.emulate_operator(dy, dy, block_dim=8)
    assert len(str(result.cost)) < 200 and str(result.cost).startswith("OperatorCost(cycles=")
    assert len(repr(result)) < 300 and "OperatorResult(atlas-a2" in repr(result)
    summary = result.summary()
    assert "block_dim=8" in summary and "SyncAll" in summary and len(summary) < 1000
    assert "slowest core" in result.cost.summary()


def test_every_result_and_cost_has_a_short_repr_and_a_summary():
    x = np.arange(64, dtype=F32).reshape(1, 8, 8)
    variance, mean = np.full((1, 8), 5.25, F32), np.zeros((1, 8), F32)
    gamma = np.ones(8, F32)
    results = [lngb.emulate(x, x), lngb.emulate_operator(x, x, block_dim=2),
               lngb.emulate_layer_norm_grad(x, x, variance, mean, gamma),
               lngb.emulate_layer_norm_backward(x, x, variance, mean, gamma, block_dim=2)]
    for result in results:
        name = type(result).__name__
        assert repr(result).startswith(f"{name}(atlas-a2, ") and len(repr(result)) < 300
        lines = result.summary().splitlines()
        assert lines[0] == f"{name} on atlas-a2" and lines[1].startswith("tiling: ")
        assert any(line.startswith("modelled device time") for line in lines)
        assert len(repr(result.cost)) < 200 and result.cost.summary()
    assert "pd_gamma=[ 8960.,  9416.,  9888., ..., 11400., 11936., 12488.]" in repr(results[0])
    assert "pd_x=<[1, 8, 8] float32>" in repr(results[2])


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"lngb {version()}"
    assert version().split()[0][0].isdigit()


def test_version_falls_back_to_pyproject_when_not_installed(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert version().endswith("(not installed)")


def test_help_describes_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "run", "sweep", "trace", "debug"):
        line = next(line for line in out.splitlines() if line.strip().startswith(command + " "))
        assert len(line.split()) > 3, line   # the name and what it does
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "usage: lngb " + command in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["text", "jsonl", "chrome"])
def test_trace_out_dash_is_stdout(fmt, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "--format", fmt, "--out", "-"]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "-").exists() and not list(tmp_path.iterdir())
    if fmt == "jsonl":
        assert json.loads(out.splitlines()[0])["name"] == "DataCopy"
    elif fmt == "chrome":
        assert "traceEvents" in json.loads(out)
    else:
        assert "DataCopy" in out.splitlines()[0]


def test_trace_of_the_multi_core_operator(capsys, tmp_path):
    assert main(["trace", "--shape", "1,16,64", "--block-dim", "2"]) == 0
    out = capsys.readouterr().out
    assert "# core 0" in out and "# core 1" in out and "SyncAll" in out
    assert main(["trace", "--shape", "1,16,64", "--block-dim", "2", "--format", "jsonl",
                 "--out", str(tmp_path / "t.jsonl")]) == 0
    cores = {json.loads(line)["core"] for line in (tmp_path / "t.jsonl").read_text().splitlines()}
    assert cores == {0, 1}


def bins(tmp_path, shape, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    dy, rfg = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    dy.tofile(tmp_path / "dy.bin")
    rfg.tofile(tmp_path / "rfg.bin")
    return dy, rfg


def test_run_block_dim_runs_the_operator_at_any_size(tmp_path, capsys):
    dy, rfg = bins(tmp_path, (1, 32, 1024))
    args = ["run", "--dy", str(tmp_path / "dy.bin"), "--res-for-gamma", str(tmp_path / "rfg.bin"),
            "--shape", "1,32,1024", "--out-dir", str(tmp_path / "out")]
    assert main(args) == 2   # one UB is too small; the error says what to do
    assert "--block-dim N runs the multi-core operator" in capsys.readouterr().err
    assert main(args + ["--block-dim", "8"]) == 0
    want = lngb.emulate_operator(dy, rfg, block_dim=8)
    got = np.fromfile(tmp_path / "out" / "output_pd_gamma.bin", F32)
    assert np.array_equal(got.view(np.uint32), want.pd_gamma.view(np.uint32))
    assert "block_dim=8" in capsys.readouterr().out
    assert main(args + ["--block-dim", "8", "--stack-buffer-size", "4096"]) == 2
    assert "not of --block-dim" in capsys.readouterr().err


def test_run_names_ascend_sample_writes_the_samples_file_names(tmp_path, capsys):
    bins(tmp_path, (1, 8, 64))
    args = ["run", "--dy", str(tmp_path / "dy.bin"), "--res-for-gamma", str(tmp_path / "rfg.bin"),
            "--shape", "1,8,64", "--out-dir", str(tmp_path / "out")]
    assert main(args + ["--names", "ascend-sample"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["output_PdBeta.bin",
                                                                   "output_PdGamma.bin"]
    assert main(args + ["--out-dir", str(tmp_path / "default")]) == 0
    assert sorted(p.name for p in (tmp_path / "default").iterdir()) == ["output_pd_beta.bin",
                                                                       "output_pd_gamma.bin"]


def test_a_golden_mismatch_reports_count_first_index_and_max_ulp_abs_rel(tmp_path, capsys):
    dy, rfg = bins(tmp_path, (1, 8, 64))
    golden = lngb.emulate(dy, rfg).pd_gamma.copy()
    golden[[5, 9, 40]] = np.nextafter(golden[[5, 9, 40]], np.inf)   # 1 ulp each
    golden[40] = np.nextafter(golden[40], np.inf)                    # 2 ulp
    golden.tofile(tmp_path / "golden.bin")
    assert main(["run", "--dy", str(tmp_path / "dy.bin"), "--res-for-gamma",
                 str(tmp_path / "rfg.bin"), "--shape", "1,8,64", "--out-dir",
                 str(tmp_path / "out"), "--golden-gamma", str(tmp_path / "golden.bin")]) == 1
    line = next(line for line in capsys.readouterr().out.splitlines() if "vs golden" in line)
    assert "differs in 3 of 64 elements, the first at index 5" in line
    assert "max diff 2 ulp" in line and "abs " in line and "rel " in line


def test_golden_report_and_ulps():
    a = np.array([1.0, -0.0, 2.0, np.inf], F32)
    b = np.array([1.0, 0.0, np.nextafter(F32(2), F32(0)), np.inf], F32)
    assert list(ulps(a, b)) == [0, 0, 1, 0]
    line, same = golden_report(a, b)
    assert not same and "differs in 2 of 4 elements, the first at index 1" in line
    assert golden_report(a, a.copy()) == ("bit-identical (4 elements)", True)
    h = np.array([1, 2], np.float16)
    assert list(ulps(h, np.nextafter(h, np.float16(9)))) == [1, 1]


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="nothing is compiled without the JIT")
def test_a_cold_compile_says_so_once(tmp_path):
    """A helper missing from Numba's disk cache is compiled in the first process that needs it,
    which says so in one line, and loaded by the next, which says nothing. The rest of the cache
    is this process's, copied to a fresh NUMBA_CACHE_DIR (compiling it all took ~10 s)."""
    x = np.ones((1, 8, 8), np.float32)
    lngb.emulate(x, x)   # the cache holds what the child runs
    copy = tmp_path / "lngb"
    for directory in (disk_cache.numba_dir() / disk_cache.SOURCES_FINGERPRINT[:16],
                      disk_cache.generated_dir()):
        shutil.copytree(directory, copy / directory.relative_to(disk_cache.root()),
                        copy_function=copy_if_there)
    add = helpers.loops_module(TABLE["Add"]).__name__
    dropped = list(copy.rglob(f"{add}.run_f32_entry-*.nbi"))
    assert len(dropped) == 1, "Add's float loops are not in the cache: the test needs rewriting"
    dropped[0].unlink()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    code = "import lngb, numpy as np; x = np.ones((1, 8, 8), np.float32); lngb.emulate(x, x)"
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stderr.splitlines() == [
        "lngb: compiling Add's float loops (first use only, about 1 s)..."]
    assert runs[1].stderr == ""


def copy_if_there(source, destination):
    try:   # (another process may be replacing it: Numba writes a file then renames it)
        shutil.copy2(source, destination)
    except FileNotFoundError:
        pass


def test_the_executors_cold_compile_is_announced(monkeypatch):
    """The first run of a process whose executor is in no disk cache says it compiles it."""
    heard = []
    monkeypatch.setattr(executor, "_announced", [])
    monkeypatch.setattr(executor, "compiled_on_disk", lambda: False)
    monkeypatch.setattr(helpers, "COMPILE_LISTENERS", [heard.append])
    x = np.ones((1, 8, 8), np.float32)
    lngb.emulate(x, x)
    lngb.emulate(x, x)
    assert heard == [f"lngb: compiling the executor (first use only, about "
                     f"{helpers.ESTIMATE_S['executor']} s)..."]
