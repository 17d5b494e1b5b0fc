"""The README's commands and examples work as written."""
import contextlib
import io
import os
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


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README, re.S)


def test_python_examples_print_what_their_comments_say(tmp_path, monkeypatch):
    """Each `print(...)  # expected` line must print `expected` (whitespace-normalised)."""
    monkeypatch.chdir(tmp_path)  # the examples write files
    checks = []

    def check(expected, *values):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print(*values)
        checks.append((" ".join(out.getvalue().split()), " ".join(expected.split())))

    namespace = {"_check": check}
    for block in python_blocks():
        code = re.sub(r"^(\s*)print\((.*)\)\s+# (.*)$",
                      lambda m: f"{m.group(1)}_check({m.group(3)!r}, {m.group(2)})", block,
                      flags=re.M)
        exec(code, namespace)
    assert len(checks) >= 5
    for got, expected in checks:
        assert got == expected


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


def test_the_kernel_unit_test_passes_under_pytest(tmp_path):
    """The README's test_my_kernel.py, run by pytest as a user would."""
    import subprocess
    import sys
    block = next(b for b in python_blocks() if b.startswith("# test_my_kernel.py"))
    assert len(block.strip().splitlines()) <= 18
    (tmp_path / "test_my_kernel.py").write_text(block)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "test_my_kernel.py")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert "1 passed" in run.stdout, run.stdout + run.stderr


# --- the debugger walkthroughs, run as written ----------------------------------------------

def transcripts(command):
    """The README's sessions that start with `$ <command>`: (the command line, the lines)."""
    blocks = re.findall(r"```\n(\$ [^\n]*)\n(.*?)```", README, re.S)
    return [(line, body.splitlines()) for line, body in blocks if line.startswith(f"$ {command}")]


def test_the_pdb_walkthrough_runs_as_written(tmp_path):
    """my_test.py under `python -m pdb`, fed the session's commands: pdb prints what the README
    shows, line numbers included (`...` stands for the two directories)."""
    import subprocess
    import sys

    import lngb
    script = next(b for b in python_blocks() if b.startswith("# my_test.py"))
    (tmp_path / "my_test.py").write_text(script)
    [(_, shown)] = transcripts("python -m pdb my_test.py")
    commands = [line[len("(Pdb) "):] for line in shown if line.startswith("(Pdb) ")]
    run = subprocess.run([sys.executable, "-m", "pdb", "my_test.py"], cwd=tmp_path, text=True,
                         input="\n".join(commands) + "\n", capture_output=True, timeout=300)
    # pdb prompts without echoing what it reads: put each command back after its prompt
    first, *answers = run.stdout.split("(Pdb) ")
    got = first + "".join(f"(Pdb) {c}\n{a}" for c, a in zip(commands, answers))
    installed = pathlib.Path(lngb.__file__).resolve().parent.parent
    for directory in (tmp_path.resolve(), installed):
        got = got.replace(f"{directory}{os.sep}", f"...{os.sep}")
    assert got.splitlines() == shown, run.stderr


def test_the_lngb_run_session_runs_as_written(tmp_path, monkeypatch, capsys):
    """make_inputs.py as the README shows it, then the `lngb run` session: the same lines."""
    from lngb.cli import main
    monkeypatch.chdir(tmp_path)
    exec(next(b for b in python_blocks() if b.startswith("# make_inputs.py")), {})
    (command_line, shown), = transcripts("lngb run")
    assert main(command_line.split()[2:]) == 1
    assert capsys.readouterr().out.splitlines() == shown


def test_the_lngb_debug_sessions_run_as_written(tmp_path, capsys):
    from lngb.cli import main
    sessions = transcripts("lngb debug --commands")
    assert len(sessions) == 2
    for command_line, shown in sessions:
        commands = tmp_path / command_line.split()[-1]
        commands.write_text("".join(line[len("(lngb) "):] + "\n" for line in shown
                                    if line.startswith("(lngb) ")))
        assert main(["debug", "--commands", str(commands)]) == 0
        assert [line.rstrip() for line in capsys.readouterr().out.splitlines()] == shown
