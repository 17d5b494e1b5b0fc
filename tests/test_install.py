"""Installs a user can trust (issue 26): compile notices show under pytest, a read-only install
with an unwritable HOME works (one warning, a temporary cache), `import lngb` compiles nothing,
a wheel built from a used checkout carries only lngb's sources, and `lngb cache info|clear`
report and remove every file lngb's compiled code left.

The CLI runs in subprocesses on a copy of the package: the cache directories of a process's
jitted functions are fixed when they are defined, so only a fresh process sees a cache root set
by the test, and only a copy can hold the leftovers `lngb cache clear` must remove."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import lngb
from lngb.cli import main
from lngb.vector_ops import helpers

pytest_plugins = ["pytester"]

PACKAGE = Path(lngb.__file__).resolve().parent
CHECKOUT = PACKAGE.parent
NOTICE = "lngb: compiling Probe's float loops (first use only, about 1 s)..."
PROBE = """
from lngb.vector_ops import helpers

def test_cold_compile():
    helpers.announce_compile("Probe's float loops", 1, cached=False)
    print("the test's own output")
"""


def run(args, env, cwd, timeout=300):
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def clean_env(**changes):
    """os.environ without the variables that choose lngb's cache root, with `changes`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONWARNINGS", "PYTHONPATH")}
    env.update({k: str(v) for k, v in changes.items()})
    return env


def copy_package(destination):
    """lngb's sources (no __pycache__) under destination/lngb."""
    shutil.copytree(PACKAGE, destination / "lngb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return destination / "lngb"


def numba_files(directory):
    return sorted(p for p in Path(directory).rglob("*") if p.suffix in (".nbi", ".nbc"))


# --- the pytest plugin ---------------------------------------------------------------------------

def test_plugin_shows_compile_notices_with_capture_on(pytester):
    """The notice of a cold compile reaches the terminal although the test's output is captured
    (it passes, so pytest never shows its captured output)."""
    before = list(helpers.COMPILE_LISTENERS)
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest()   # in-process; capture is on (fd)
    result.assert_outcomes(passed=1)
    assert NOTICE in result.outlines
    assert "the test's own output" not in result.stdout.str()   # capture really was on
    assert helpers.COMPILE_LISTENERS == before   # the inner session's unconfigure cleaned up


def test_without_the_plugin_the_notice_is_captured(pytester, monkeypatch):
    """The control: with no listener (the plugin off), announce_compile prints to stderr, which
    capture swallows; so the test above sees the plugin's work, not stderr leaking through."""
    monkeypatch.setattr(helpers, "COMPILE_LISTENERS", [])
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest("-p", "no:lngb")
    result.assert_outcomes(passed=1)
    assert NOTICE not in result.stdout.str() + result.stderr.str()


def test_plugin_listener_lives_as_long_as_the_session():
    """This session's plugin registered its listener (and only one)."""
    from lngb import pytest_plugin
    assert helpers.COMPILE_LISTENERS.count(pytest_plugin._show_compile) == 1


# --- a read-only install with an unwritable HOME -------------------------------------------------

IMPORT_PROBE = """
import lngb, lngb.pytest_plugin
from lngb import disk_cache
from lngb.vector_ops import executor
from lngb.vector_ops.helpers import HELPERS
print(disk_cache.root())
print(HELPERS.compiled(), list(executor.run_steps.signatures))
"""


@pytest.mark.parametrize("how", ["under a regular file", "read-only directory"])
def test_unwritable_home_falls_back_to_a_temporary_cache(tmp_path, how):
    if how == "under a regular file":   # no one, root included, can make a directory here
        (tmp_path / "a-file").write_text("")
        home = tmp_path / "a-file" / "home"
    else:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            pytest.skip("root writes to a directory of mode 0o500")
        home = tmp_path / "home"
        home.mkdir()
        home.chmod(0o500)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    try:
        result = run(["-W", "always", "-c", IMPORT_PROBE], cwd=tmp_path,
                     env=clean_env(HOME=home, XDG_CACHE_HOME=home / ".cache", TMPDIR=tmp))
    finally:
        if how == "read-only directory":
            home.chmod(0o700)
    assert result.returncode == 0, result.stderr
    fallback = tmp / f"lngb-cache-{os.getuid() if hasattr(os, 'getuid') else 0}"
    root, compiled = result.stdout.splitlines()
    assert root == str(fallback)
    assert result.stderr.count("LngbWarning") == 1, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "LngbWarning" in line)
    assert str(home / ".cache" / "lngb") in warning and str(fallback) in warning
    # importing lngb (and its pytest plugin) compiled nothing and wrote no compiled code
    assert compiled == "[] []"
    assert numba_files(tmp) == [] and not home.joinpath(".cache").exists()


# --- the wheel ------------------------------------------------------------------------------------

JUNK = ["lngb/vector_ops/__pycache__/x.nbi", "lngb/vector_ops/__pycache__/x.nbc",
        "lngb/vector_ops/__pycache__/table.cpython-311.pyc", "lngb/__pycache__/x.cpython-311.pyc",
        "lngb/__pycache__/generated/lngb_kernels_abc.py", "lngb/stray.pyc",
        "lngb/runtime/__pycache__/schedule.lngb_run-12.py311.nbi"]


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None
                    or importlib.util.find_spec("pip") is None,
                    reason="building a wheel offline needs pip and setuptools installed")
def test_a_wheel_from_a_used_checkout_holds_only_the_sources(tmp_path):
    source = tmp_path / "checkout"
    copy_package(source)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    sources = sorted(p.relative_to(source).as_posix() for p in (source / "lngb").rglob("*.py"))
    for name in JUNK:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("x = 1\n")
    out = tmp_path / "wheels"
    result = run(["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "--no-cache-dir", "--disable-pip-version-check", "-q", "-w", str(out),
                  str(source)], env=clean_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("lngb-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    metadata = [n for n in names if re.match(r"lngb-[^/]+\.dist-info/", n)]
    assert sorted(set(names) - set(metadata)) == sources
    assert not any(n in names for n in JUNK)
    entry_points = next(n for n in metadata if n.endswith("/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "lngb = lngb.cli:main" in text and "lngb = lngb.pytest_plugin" in text


# --- lngb cache info | clear ---------------------------------------------------------------------

def test_cache_help_documents_the_default(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "{info,clear}" in text and "info (the default)" in text and "NUMBA_CACHE_DIR" in text


@pytest.fixture
def used_install(tmp_path):
    """A copy of lngb with Numba files an earlier lngb left in its __pycache__, and a cache root
    (NUMBA_CACHE_DIR/lngb) holding a compiled kernel's files and a loop module, beside a cache
    of someone else's code that must survive."""
    package = copy_package(tmp_path / "src")
    leftovers = [package / "vector_ops" / "__pycache__" / f"executor.run-1.py311.{ext}"
                 for ext in ("nbi", "nbc")]
    cache = tmp_path / "numba-cache"
    root = cache / "lngb"
    files = {root / "numba" / "vector_ops_0" / "executor.run_steps-9.py311.nbi": 1000,
             root / "generated" / "lngb_loops_0123456789abcdef.py": 2048,
             cache / "someone_else" / "f-1.py311.nbi": 10}
    for path, size in {**dict.fromkeys(leftovers, 5), **files}.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)

    class Install:
        env = clean_env(NUMBA_CACHE_DIR=cache, PYTHONPATH=tmp_path / "src")

        def cli(self, *args):
            result = run(["-m", "lngb", "cache", *args], env=self.env, cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            assert "Warning" not in result.stderr, result.stderr
            return result.stdout
    install = Install()
    install.package, install.cache, install.root, install.leftovers = (package, cache, root,
                                                                       leftovers)
    return install


def test_cache_info_and_clear(used_install):
    u = used_install
    info = u.cli()   # no action: info
    lines = info.splitlines()
    assert lines[0] == f"lngb's disk cache: {u.root} ($NUMBA_CACHE_DIR/lngb)"
    kernels = next(line for line in lines if "compiled kernels" in line)
    # one fake index file: there, counted, but no compiled executor, so not warm
    assert kernels.split() == ["compiled", "kernels", "1", "file", "1000", "bytes", "cold",
                               str(u.root / "numba")]
    modules = next(line for line in lines if "generated loop modules" in line)
    assert modules.split() == ["generated", "loop", "modules", "1", "file", "2.0", "KiB", "warm",
                               str(u.root / "generated")]
    assert f"2 Numba files an earlier lngb left inside the package ({u.package})" in info
    assert "lngb.cache_info()" in info
    assert u.cli("info") == info

    cleared = u.cli("clear")
    assert f"removed {u.root} (2 files, 3.0 KiB)" in cleared.splitlines()
    for path in u.leftovers:
        assert f"removed {path} (left inside the package by an earlier lngb)" in cleared
    # nothing of lngb is left, in the cache root or the package; someone else's cache stays
    assert not u.root.exists()
    assert numba_files(u.package) == []
    assert [p.relative_to(u.cache).as_posix() for p in u.cache.rglob("*") if p.is_file()] == [
        "someone_else/f-1.py311.nbi"]

    after = u.cli("info")
    assert after.count("0 files  0 bytes  cold (empty)") == 2, after
    assert "inside the package" not in after
    assert numba_files(u.root) == []   # info made the root's (empty) directories, nothing else
