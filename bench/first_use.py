"""The first-use figures (issue 26's targets), in CPU seconds of each process (user + sys).

    python bench/first_use.py            # the four process figures
    python bench/first_use.py --suite    # and the README's test command on a clean clone

"Cold" is a fresh copy of the package (no bytecode), an empty NUMBA_CACHE_DIR and an empty user
cache directory, made anew for each cold figure; "warm" runs again on what the cold runs left.
PYTHONDONTWRITEBYTECODE is unset, so that a second run has Python's bytecode, as a user's does.
"""
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent
SEED = "import numpy as np; x = np.arange(64, dtype=np.float32).reshape(1, 8, 8); "
THREE_APIS = SEED + """
import lngb
lngb.emulate(x, x.copy())
rng = np.random.default_rng(0)
a = rng.standard_normal((8, 64, 512)).astype(np.float32)
lngb.emulate_operator(a, a.copy(), block_dim=8)
b = rng.standard_normal((2, 16, 128)).astype(np.float32)
lngb.emulate_layer_norm_backward(b, b.copy(), np.ones((2, 16, 1), np.float32),
                                 np.zeros((2, 16, 1), np.float32), np.ones(128, np.float32),
                                 product="atlas-350")
"""
# a new element-wise instruction (its lane in a module of its own, as docs/design.md shows), timed
# from registering it to the end of its first call
LANE_MODULE = """import numba

@numba.njit
def absdiff(a, b, s):
    return abs(a - b)
"""
REGISTER = SEED + """
import sys, time
import lngb
lngb.emulate(x, x.copy())
sys.path.insert(0, {where!r})
from absdiff_lane import absdiff
from lngb.vector_ops import register_instruction
from lngb.vector_ops.table import BINARY, Instruction
start = time.process_time()
AbsDiff = register_instruction(Instruction("AbsDiff", BINARY, absdiff, rate=(128, 64)))
core = lngb.AICore()
a, b, c = (core.alloc(64, np.float32) for _ in range(3))
a.write(np.arange(64, dtype=np.float32))
AbsDiff(c, a, b, 64)
print(f"register_instruction and its first call: {{time.process_time() - start:.2f}} s")
"""


class Sandbox:
    """A fresh copy of lngb and empty caches in a temporary directory."""

    def __init__(self):
        self.directory = pathlib.Path(tempfile.mkdtemp(prefix="lngb-first-use-"))
        shutil.copytree(CHECKOUT / "lngb", self.directory / "src" / "lngb",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (self.directory / "absdiff_lane.py").write_text(LANE_MODULE)
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(PYTHONPATH=str(self.directory / "src"),
                        NUMBA_CACHE_DIR=str(self.directory / "numba-cache"),
                        XDG_CACHE_HOME=str(self.directory / "user-cache"))

    def cpu_seconds(self, *command):
        """(CPU seconds, stdout) of one process."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, *command], env=self.env, cwd=self.directory,
                              capture_output=True, text=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return seconds, done.stdout

    def remove(self):
        shutil.rmtree(self.directory, ignore_errors=True)


def main():
    demo = Sandbox()
    try:
        seconds, _ = demo.cpu_seconds("-m", "lngb", "demo")
        print(f"cold lngb demo: {seconds:.1f} s (target <= 10)")
    finally:
        demo.remove()
    three = Sandbox()
    try:
        seconds, _ = three.cpu_seconds("-c", THREE_APIS)
        print(f"cold emulate + emulate_operator + emulate_layer_norm_backward(atlas-350): "
              f"{seconds:.1f} s (target <= 25)")
        seconds, out = three.cpu_seconds("-c", REGISTER.format(where=str(three.directory)))
        print(f"{out.strip()} (process {seconds:.1f} s; target <= 3)")
        warm = sorted(three.cpu_seconds("-c", "import lngb; " + SEED + "lngb.emulate(x, x)")[0]
                      for _ in range(7))
        print(f"warm start, import lngb and emulate the seed: median of 7 {warm[3]:.2f} s, "
              f"lowest {warm[0]:.2f} s (target <= 0.9)")
    finally:
        three.remove()
    if "--suite" in sys.argv:
        suite()


def suite():
    """The README's test command (pytest) in a clean clone of HEAD, in a fresh venv-less run
    on this Python, with empty caches: wall seconds."""
    box = Sandbox()
    try:
        clone = box.directory / "clone"
        subprocess.run(["git", "clone", "-q", str(CHECKOUT), str(clone)], check=True)
        env = dict(box.env, PYTHONPATH=str(clone))
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
                              cwd=clone, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        print(f"the suite on a clean clone, cold caches: {wall:.0f} s wall (target <= 180); "
              f"{done.stdout.strip().splitlines()[-1]}")
    finally:
        box.remove()


if __name__ == "__main__":
    main()
