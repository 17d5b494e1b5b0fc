"""Every example in README.md and docs/ runs on its own, and prints what it says.

- A ```python block runs alone: a fresh namespace (`__name__ == "__main__"`), in a fresh
  directory, its `print(...)  # expected` lines checked. ```python no-run marks one that must
  not (none today).
- A ``` or ```sh block: each `lngb ...` command in it (also after `&&`) exits with status 0.
- A ```console block is a session: `$ lngb ...` and the lines it prints (`...` stands for any
  lines, and for the directory it runs in); `--commands FILE` is written from the `(lngb) `
  lines. It runs where the file block before it on its page (```python starting `# name.py`)
  was written and run.
- Links between the pages point to files and headings that exist.
"""
import contextlib
import io
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.jitted

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def page_blocks(page):
    """[(info, body, line)] of a page's fenced blocks, in order."""
    text = page.read_text()
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


BLOCKS = [(page, *block) for page in PAGES for block in page_blocks(page)]


def block_id(block):
    return f"{block[0].relative_to(ROOT)}:{block[3]}"


def of_kind(*infos):
    return [b for b in BLOCKS if b[1].split(" ")[0] in infos]


def python_blocks(page=None):
    return [b for b in of_kind("python") if page is None or b[0] == page]


def file_block(page, name):
    """The body of the ```python block of `page` that starts `# name`."""
    return next(b[2] for b in python_blocks(page) if re.match(rf"# {re.escape(name)}\b", b[2]))


def run_python(body, checks=None):
    """exec `body` in a fresh namespace; each `print(...)  # expected` adds (got, expected)."""
    checks = [] if checks is None else checks

    def check(expected, *values):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print(*values)
        checks.append((" ".join(out.getvalue().split()), " ".join(expected.split())))

    code = re.sub(r"^(\s*)print\((.*)\)\s+# (.*)$",
                  lambda m: f"{m.group(1)}_check({m.group(3)!r}, {m.group(2)})", body, flags=re.M)
    exec(compile(code, "<doc block>", "exec"), {"__name__": "__main__", "_check": check})
    return checks


@pytest.mark.parametrize("block", python_blocks(), ids=block_id)
def test_python_block_runs_alone_and_prints_what_it_says(block, tmp_path, monkeypatch):
    page, info, body, _ = block
    if "no-run" in info.split():
        pytest.skip("marked no-run")
    monkeypatch.chdir(tmp_path)               # the examples write files
    for got, expected in run_python(body):
        assert got == expected


def test_the_docs_check_what_they_print():
    checked = sum(len(re.findall(r"^\s*print\(.*\)\s+# ", b[2], re.M)) for b in python_blocks())
    assert checked >= 40 and not [b for b in python_blocks() if "no-run" in b[1]]


def prepare(page, line, cwd):
    """Write and run, in `cwd`, the file block just before line `line` of `page`, if any."""
    before = [b for b in BLOCKS if b[0] == page and b[3] < line]
    if before and before[-1][1] == "python":
        name = re.match(r"# (\S+\.py)\b", before[-1][2])
        if name:
            (cwd / name.group(1)).write_text(before[-1][2])
            run_python(before[-1][2])


def lngb_main(args):
    from lngb.cli import main
    try:
        return main(args)
    except SystemExit as stop:                # --help and --version exit through argparse
        return stop.code


SHELL = [(b, part.strip()) for b in of_kind("", "sh") for line in b[2].splitlines()
         for part in line.split("&&") if part.strip().startswith("lngb ")]


@pytest.mark.parametrize("block, command", SHELL, ids=[f"{block_id(b)}:{c}" for b, c in SHELL])
def test_lngb_commands_exit_0(block, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    prepare(block[0], block[3], tmp_path)
    assert lngb_main(shlex.split(command)[1:]) == 0, capsys.readouterr().err


def matches(got, shown):
    """`got` lines as `shown`, a `...` line standing for any lines."""
    if not shown:
        return not got
    if shown[0] == "...":
        return any(matches(got[i:], shown[1:]) for i in range(len(got) + 1))
    return bool(got) and got[0] == shown[0] and matches(got[1:], shown[1:])


def sessions(prefix):
    return [b for b in of_kind("console") if b[2].startswith(f"$ {prefix}")]


@pytest.mark.parametrize("block", sessions("lngb "), ids=block_id)
def test_lngb_sessions_print_what_they_show(block, tmp_path, monkeypatch, capsys):
    page, _, body, line = block
    command, *shown = body.rstrip("\n").splitlines()
    args = shlex.split(command)[2:]
    monkeypatch.chdir(tmp_path)
    prepare(page, line, tmp_path)
    if "--commands" in args:
        (tmp_path / args[args.index("--commands") + 1]).write_text(
            "".join(s[len("(lngb) "):] + "\n" for s in shown if s.startswith("(lngb) ")))
    status = lngb_main(args)
    out = capsys.readouterr()
    assert status in (0, 1), out.err          # 1: a run whose outputs differ from the golden
    got = [s.rstrip().replace(f"{tmp_path.resolve()}{os.sep}", f"...{os.sep}")
           for s in out.out.splitlines()]
    if "..." in shown:
        assert matches(got, shown), "\n".join(got)
    else:
        assert got == shown


def test_the_docs_show_their_lngb_sessions():
    shown = [b[2].split("\n", 1)[0] for b in sessions("lngb ")]
    assert sum(s.startswith("$ lngb debug --commands") for s in shown) == 2
    assert any(s.startswith("$ lngb debug --kernel") for s in shown)
    assert any(s.startswith("$ lngb run") for s in shown)
    assert any(s.startswith("$ lngb sweep") for s in shown)


# --- what the examples say about themselves -------------------------------------------------

DEBUGGING = ROOT / "docs" / "debugging.md"
TESTING = ROOT / "docs" / "testing.md"


def test_the_kernel_unit_tests_pass_under_pytest(tmp_path):
    """testing.md's test files, run by pytest as a user would."""
    names = ["test_my_kernel.py", "test_with_the_fixture.py"]
    for name in names:
        (tmp_path / name).write_text(file_block(TESTING, name))
    assert len(file_block(TESTING, "test_my_kernel.py").strip().splitlines()) <= 18
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *names],
                         capture_output=True, text=True, cwd=tmp_path)
    assert "2 passed" in run.stdout, run.stdout + run.stderr


def test_the_pdb_walkthrough_runs_as_written(tmp_path):
    """my_test.py under `python -m pdb`, fed the session's commands: pdb prints what the page
    shows, line numbers included (`...` stands for the two directories), and the prose after it
    names the same lines."""
    import lngb
    (tmp_path / "my_test.py").write_text(file_block(DEBUGGING, "my_test.py"))
    [(_, _, session, _)] = sessions("python -m pdb my_test.py")
    shown = session.rstrip("\n").splitlines()[1:]
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
    text = DEBUGGING.read_text()
    defined = re.search(r"Breakpoint 1 at \S+:(\d+)", session).group(1)
    stopped = re.search(r"\.py\((\d+)\)_reduce_sum_first_n", session).group(1)
    until = re.findall(r"\(Pdb\) until (\d+)", session)[-1]
    assert f"`def` line ({defined})" in text
    assert f"first line that runs ({stopped})" in text
    assert f"`until {until}` runs on to line {until}" in text


# --- links ------------------------------------------------------------------------------------

def slug(heading):
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


LINKS = [(page, target) for page in PAGES
         for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", page.read_text()))
         if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page, target", LINKS,
                         ids=[f"{p.relative_to(ROOT)}->{t}" for p, t in LINKS])
def test_links_point_to_pages_and_headings_that_exist(page, target):
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), target
    if anchor:
        headings = re.findall(r"^#+ (.*)$", FENCE.sub("", file.read_text()), re.M)
        assert anchor in {slug(h) for h in headings}, target


def test_the_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    linked = {(ROOT / t.partition("#")[0]).resolve() for p, t in LINKS if p.name == "README.md"}
    assert set(PAGES[1:]) <= linked
