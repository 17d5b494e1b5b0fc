"""The README's two commands work as written. Its examples, and those of docs/, run in
tests/test_docs.py."""
import pathlib
import re

import numpy as np
import pytest

pytestmark = pytest.mark.jitted

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_command():
    first_block = re.search(r"```\n(.*?)```", README, re.S).group(1).strip().splitlines()
    assert first_block == ['pip install -e . && lngb demo',
                           'pip install -e ".[test]" && pytest -n auto']
    assert README.index("```") < README.index("\n## ")
    assert first_block[1] in (ROOT / ".ci" / "run").read_text()


def test_demo_command_prints_the_seed_example(capsys):
    from lngb.cli import main
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "[8960.0, 9416.0, 9888.0, 10376.0, 10880.0, 11400.0, 11936.0, 12488.0]" in out
    assert "matches the documented example" in out


def test_run_command_round_trips_bin_files(tmp_path, capsys):
    from lngb.cli import main
    rng = np.random.default_rng(0)
    dy = rng.integers(-10, 10, (4, 8, 512)).astype(np.float32)
    rfg = rng.integers(-10, 10, (4, 8, 512)).astype(np.float32)
    dy.tofile(tmp_path / "dy.bin")
    rfg.tofile(tmp_path / "rfg.bin")
    (dy * rfg).sum((0, 1)).astype(np.float32).tofile(tmp_path / "golden_gamma.bin")
    status = main(["run", "--dy", str(tmp_path / "dy.bin"), "--res-for-gamma",
                   str(tmp_path / "rfg.bin"), "--shape", "4,8,512", "--out-dir",
                   str(tmp_path / "out"), "--golden-gamma", str(tmp_path / "golden_gamma.bin")])
    assert status == 0 and "bit-identical" in capsys.readouterr().out
    gamma = np.fromfile(tmp_path / "out" / "output_pd_gamma.bin", dtype=np.float32)
    beta = np.fromfile(tmp_path / "out" / "output_pd_beta.bin", dtype=np.float32)
    assert np.array_equal(gamma, (dy * rfg).sum((0, 1))) and np.array_equal(beta, dy.sum((0, 1)))


def test_run_command_reports_bad_input(tmp_path, capsys):
    from lngb.cli import main
    np.zeros(10, np.float32).tofile(tmp_path / "dy.bin")
    assert main(["run", "--dy", str(tmp_path / "dy.bin"), "--res-for-gamma",
                 str(tmp_path / "dy.bin"), "--shape", "1,8,8"]) == 2
    assert "needs 256" in capsys.readouterr().err
    assert main(["run", "--dy", "x", "--res-for-gamma", "x", "--shape", "4x8x512"]) == 2
    assert "B,S,H" in capsys.readouterr().err
