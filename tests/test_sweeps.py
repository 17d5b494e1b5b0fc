"""Tiling studies at model size (issue 14, part 3): the multi-core operator's sweep over
block_dim, column slices and tile rows; the one-UB sweep's refusal, best mark and plot."""
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import lngb
from lngb.cli import main
from lngb.errors import CapacityError, InvalidArgumentError
from lngb.kernels.operator_tiling import operator_tiling
from lngb.observers.cost import operator_cost, phase_models
from lngb.products import get_product
from lngb.runtime import schedule
from lngb.sweeps import (OperatorSweepRow, _plan_streams, column_slices, figure, fitted_range,
                         format_operator_table, operator_cycles, sweep, sweep_operator, write_csv)

pytestmark = pytest.mark.jitted


def full_cycles(tiling):
    """The operator's modelled cycles from a plan of every core, whole (no shortened runs)."""
    recorded = schedule.Recorded()
    streams = _plan_streams(tiling, [n for _, n in tiling.core_rows],
                            [w for _, w in tiling.reduce_cols], recorded)
    rows = [tuple(np.concatenate([recorded.programs[p] for p in s]) if s
                  else np.zeros((0, recorded.programs[0].shape[1]), np.int64) for s in core)
            for core in streams]
    return operator_cost(tiling.product, rows).cycles


@pytest.mark.parametrize("shape,dtype,block_dim,tiles", [
    ((2, 64, 1024), np.float16, 4, (None, None)),
    ((3, 50, 384), np.float32, 7, (None, None)),
    ((8, 8, 1024), np.float32, 8, (1, 512)),   # 8 tiles of 2 column slices a core, as H = 4096
    ((2, 300, 256), np.float32, 5, (None, None))])
def test_a_configuration_costs_what_the_operator_run_costs(shape, dtype, block_dim, tiles):
    """The sweep's cycles for the operator's tiling are emulate_operator's cost, bit for bit,
    also where cores with many tiles are costed from shortened runs."""
    dy = np.ones(shape, dtype)
    want = lngb.emulate_operator(dy, dy, block_dim=block_dim, threads=1, tile_rows=tiles[0],
                                 tile_cols=tiles[1]).cost
    t = operator_tiling(shape, dtype, "atlas-a2", block_dim, *tiles)
    cycles, clock = operator_cycles(t)
    assert cycles == want.cycles and clock == want.clock_mhz


@pytest.mark.parametrize("shape,block_dim,tile_rows,tile_cols", [
    ((4, 100, 512), 3, 1, 128), ((2, 64, 1024), 5, 3, 256), ((1, 90, 2048), 2, 2, 1024),
    ((2, 40, 256), 1, 5, 256)])
def test_shortened_runs_give_the_whole_plans_cycles(shape, block_dim, tile_rows, tile_cols):
    t = operator_tiling(shape, np.float32, "atlas-a2", block_dim, tile_rows, tile_cols)
    assert operator_cycles(t)[0] == pytest.approx(full_cycles(t), rel=1e-12)


def test_the_sweep_covers_block_dims_column_slices_and_tile_rows_and_marks_the_best():
    rows = sweep_operator((2, 64, 1024), "float32", block_dims=[2, 8], tile_rows=[1, 4])
    assert {(r.block_dim, r.tile_rows, r.tile_cols) for r in rows} == {
        (b, r, c) for b in (2, 8) for r in (1, 4) for c in column_slices(1024)}
    assert column_slices(1024) == [1024, 512, 256, 128]
    best = [r for r in rows if r.best]
    assert len(best) == 1 and best[0].cycles == min(r.cycles for r in rows)
    clock = get_product("atlas-a2").clock_mhz
    assert all(r.microseconds == pytest.approx(r.cycles / clock) for r in rows)
    table = format_operator_table(rows)
    starred = [line for line in table.splitlines() if line.startswith("*")]
    assert len(starred) == 1 and f"{best[0].tile_rows} x {best[0].tile_cols}" in starred[0]


def test_by_default_each_slice_gets_the_operators_own_tile_rows():
    rows = sweep_operator((4, 64, 512), "float16", block_dims=[4])
    for r in rows:
        t = operator_tiling((4, 64, 512), np.float16, "atlas-a2", 4, tile_cols=r.tile_cols)
        assert (r.tile_rows, r.tmp_bytes) == (t.tile_rows, t.tmp_bytes)


def test_default_block_dims_are_powers_of_two_and_the_cores():
    rows = sweep_operator((8, 1024, 4096), "float32", tile_rows=[3])
    assert sorted({r.block_dim for r in rows}) == [1, 2, 4, 8, 16, 32, 48]


def test_measured_configurations_get_the_emulators_time():
    rows = sweep_operator((2, 64, 256), "float32", block_dims=[1, 4], measure=2, repeat=1)
    timed = [r for r in rows if r.emulator_us is not None]
    assert len(timed) == 2 and all(r.emulator_melem_per_s > 0 for r in timed)


def test_cost_overrides_reach_every_phase():
    base = sweep_operator((2, 64, 256), "float32", block_dims=[4])
    slower = sweep_operator((2, 64, 256), "float32", block_dims=[4], sync_all_cycles=5000)
    assert [s.cycles - b.cycles for s, b in zip(slower, base)] == [4000] * len(base)


@pytest.mark.parametrize("kwargs,match", [
    (dict(block_dims=[0]), "block_dims"), (dict(block_dims=[49]), "block_dims"),
    (dict(tile_rows=[1.5]), "tile_rows"), (dict(measure=-1), "measure"),
    (dict(bogus=1), "unknown constants")])
def test_bad_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        sweep_operator((8, 64, 256), "float32", **kwargs)


def test_a_tile_that_fits_nowhere_is_a_capacity_error():
    with pytest.raises(CapacityError, match="no configuration"):
        sweep_operator((1, 8, 4096), "float32", block_dims=[1], tile_rows=[4000])


def test_sweep_operator_is_public():
    assert lngb.sweep_operator is sweep_operator


def test_the_model_size_sweep_prints_a_table_with_the_best_marked():
    """(Its speed target, under 5 s, is bench/test_bench.py's model-size sweep case.)"""
    done = subprocess.run([sys.executable, "-m", "lngb", "sweep", "--shape", "8,1024,4096",
                           "--block-dim", "8,16,24,48"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    starred = [line for line in done.stdout.splitlines() if line.startswith("*")]
    assert len(starred) == 1 and "8x1024x4096" in starred[0]
    assert "best for atlas-a2 8x1024x4096 float32: block_dim 48" in done.stdout


def test_a_one_ub_sweep_that_cannot_fit_refuses_at_once_pointing_to_the_operator_sweep(capsys):
    start = time.perf_counter()
    assert main(["sweep", "--shape", "8,1024,4096", "--quiet"]) == 2
    assert time.perf_counter() - start < 1
    err = capsys.readouterr().err
    assert "CapacityError" in err and "--block-dim" in err and "sweep_operator" in err
    # nothing of a mixed sweep runs when one of its shapes cannot
    start = time.perf_counter()
    with pytest.raises(CapacityError):
        sweep([(1, 8, 64), (8, 1024, 4096)])
    assert time.perf_counter() - start < 1


def test_the_cli_sweeps_the_operator_with_tile_rows_and_writes_the_best_to_csv(tmp_path, capsys):
    path = tmp_path / "op.csv"
    assert main(["sweep", "--shape", "2,64,512", "--block-dim", "2,4", "--tile-rows", "2,8",
                 "--quiet", "--csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert "configurations (block_dim x column slice x tile rows)" in out
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    assert header[-1] == "best" and "block_dim" in header and "tile_rows" in header
    flags = [line.split(",")[-1] for line in lines[1:]]
    assert flags.count("True") == 1 and len(flags) == 2 * 2 * len(column_slices(512))


def test_the_one_ub_table_and_csv_mark_the_best_size(tmp_path):
    rows = sweep([(4, 8, 512)], ["float32"], ["atlas-a2"])
    best = [r for r in rows if r.best]
    assert len(best) == 1 and best[0].cycles == min(r.cycles for r in rows if r.fits)
    assert best[0].stack_buffer_size == min(r.stack_buffer_size for r in rows
                                            if r.cycles == best[0].cycles)
    write_csv(rows, tmp_path / "s.csv")
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0].endswith(",best") and sum(line.endswith(",True") for line in lines) == 1


# --- the plot ------------------------------------------------------------------------------

def test_the_plot_puts_device_time_and_throughput_in_fitted_separate_panels():
    pytest.importorskip("matplotlib")
    rows = sweep([(4, 8, 512)], ["float32"], ["atlas-a2"], measure=3, repeat=1)
    fig = figure(rows)
    device, emulator = fig.axes
    assert "modelled device time" in device.get_ylabel()
    assert "throughput" in emulator.get_ylabel()
    cycles_us = [r.microseconds for r in rows if r.fits]
    lo, hi = device.get_ylim()
    assert lo > 0.9 * min(cycles_us) and hi < 1.1 * max(cycles_us)  # 2.987-3.018 us, not from 0
    assert lo <= min(cycles_us) and hi >= max(cycles_us)
    labels = [line.get_label() for line in device.get_lines()]
    assert any(label.startswith("best: 32768 bytes") for label in labels)
    assert emulator.get_lines() and not device.get_shared_y_axes().joined(device, emulator)


def test_the_plot_has_one_colour_per_product_and_dtype_and_explains_a_flat_series():
    pytest.importorskip("matplotlib")
    rows = sweep([(2, 16, 64)], ["float16", "float32"], ["atlas-a2", "atlas-350"])
    fig = figure(rows)
    device = fig.axes[0]
    curves = {line.get_label(): line.get_color() for line in device.get_lines()
              if not line.get_label().startswith("best")}
    assert len(curves) == 4 and len(set(curves.values())) == 4
    flat = [label for label in curves if "flat" in label]
    assert flat and all(label.startswith("atlas-350") for label in flat)
    assert all("computes without the temp buffer" in label for label in flat)
    assert "flat" in " ".join(t.get_text() for t in fig.texts)


def test_the_operator_plot_shows_the_best_tile_per_block_dim():
    pytest.importorskip("matplotlib")
    rows = sweep_operator((2, 64, 512), "float32", block_dims=[1, 2, 4, 8])
    device = figure(rows).axes[0]
    curve = [line for line in device.get_lines() if not line.get_label().startswith("best")][0]
    assert list(curve.get_xdata()) == [1, 2, 4, 8]
    best_per_dim = [min(r.microseconds for r in rows if r.block_dim == b) for b in (1, 2, 4, 8)]
    assert list(curve.get_ydata()) == best_per_dim
    assert "block_dim" in figure(rows).axes[1].get_xlabel()


def test_fitted_range_is_not_from_zero_for_a_narrow_span():
    assert fitted_range([5376, 5432]) == pytest.approx((5370.4, 5437.6))
    lo, hi = fitted_range([7.0, 7.0])
    assert 6.9 < lo < 7 < hi < 7.1


def test_plot_without_matplotlib_stops_before_sweeping_with_the_docs_command(
        monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib fails
    called = []
    monkeypatch.setattr("lngb.sweeps.sweep", lambda *a, **k: called.append(1))
    assert main(["sweep", "--shape", "1,8,64", "--quiet", "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert not called and 'pip install -e ".[plot]"' in err
    assert 'pip install -e ".[plot]"' in (pathlib.Path(__file__).parent.parent / "docs"
                                          / "tiling-and-cost.md").read_text()


def test_a_plot_is_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "op.png"
    assert main(["sweep", "--shape", "2,64,256", "--block-dim", "1,2", "--quiet",
                 "--plot", str(path)]) == 0
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_rows_are_the_documented_dataclass():
    rows = sweep_operator((1, 16, 256), "float32", block_dims=[2])
    assert all(isinstance(r, OperatorSweepRow) for r in rows)
    sync, models, rates = phase_models(get_product("atlas-a2"), (2, 2))
    assert sync == 1000 and len(models) == 2 and rates[0] == rates[1]
