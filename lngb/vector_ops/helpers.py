"""The executor's helper table: what runs each kind of row, compiled on first use.

The executor (executor.py) runs GM DataCopys and events itself, and calls everything else out
of line through `HELPERS.addresses`, the way QEMU's TCG calls its helpers: an element-wise
row, the helper of its instruction and variant (`variant_of`: the contiguous loops of its
types, or its lane, which the lane walk calls), at [opcode, variant]; the lane walk, a
reduction, a block broadcast, a UB -> UB DataCopy or a GetValue, its family's, in row 0 (no
instruction has opcode 0). An entry is 0 until a row needs it: the executor then stops before
that row and returns its index, and the caller installs the helper (`install`) and resumes
there. Installing compiles the helper, or loads it from Numba's disk cache (a few ms), so a
process compiles only what its programs run, and registering an instruction compiles nothing
until one of its rows runs.

Compiled, an entry is the address of the helper's C function (`_jit.c_helper`); under
NUMBA_DISABLE_JIT, the Python function itself.
"""
import hashlib
import importlib.util
import inspect
import os
import pathlib
import sys
import tempfile
import threading

import numba
import numpy as np

from .. import disk_cache
from .._jit import LANE_HELPER, ROW_HELPER, RUN_HELPER, c_helper, njit
from ..errors import InvalidArgumentError
from . import families
from .walk import python
from .program import (BROADCAST, COPY, COPY_DIR, DT_DST, DT_SRC, ELEMENTWISE, EVENT, F32, FLAT,
                      KIND, OP, REDUCE, SELECT, UB_TO_UB)

# an instruction's helpers (loops.py), by column: its lane (for the lane walk), its run loops
LANE, RUN_F32, RUN_HALF, RUN_MIXED = range(4)
VARIANT_NAMES = ("lane", "run_f32", "run_half", "run_mixed")
VARIANT_WHAT = {"lane": "lane, for the lane walk", "run_f32": "float loops",
                "run_half": "half loops", "run_mixed": "loops"}
# the families' columns in row 0 (families.py)
REDUCTIONS, BROADCASTS, UB_COPIES, SCALAR_READS, WALKS, SELECTS = range(6)
FAMILY_NAMES = {REDUCTIONS: "reductions", BROADCASTS: "broadcasts", UB_COPIES: "ub_copies",
                SCALAR_READS: "scalar_reads", WALKS: "walks", SELECTS: "selects"}

SIGNATURES = {"lane": LANE_HELPER, "run_f32": RUN_HELPER, "run_half": RUN_HELPER,
              "run_mixed": RUN_HELPER}   # the families' are ROW_HELPER
FAMILY_WHAT = {"reductions": "the reductions", "broadcasts": "Brcb and DuplicateLane",
               "ub_copies": "UB -> UB DataCopy", "scalar_reads": "GetValue and SetCmpMask",
               "walks": "the lane walk", "selects": "Select"}


@njit(inline="always")
def family_of(kind):
    """The column in row 0 of a row of `kind` that is no element-wise one, GM DataCopy or
    event."""
    if kind == REDUCE:
        return REDUCTIONS
    if kind == BROADCAST:
        return BROADCASTS
    if kind == SELECT:
        return SELECTS
    return UB_COPIES if kind == COPY else SCALAR_READS


@njit(inline="always")
def variant_of(flat, dt, st):
    """The helper of an element-wise row: its contiguous loops (FLAT >= 0) by its types, else
    its lane, which the lane walk calls."""
    if flat < 0:
        return LANE
    if dt == F32 and st == F32:
        return RUN_F32
    return RUN_HALF if dt == st else RUN_MIXED


def slots_of(row):
    """The [row, column]s of HELPERS.addresses that run an instruction row: none for the rows
    the executor runs itself; an element-wise row's lane and the lane walk for a walked one."""
    kind = int(row[KIND])
    if kind == ELEMENTWISE:
        slot = int(row[OP]), python(variant_of)(int(row[FLAT]), int(row[DT_DST]), int(row[DT_SRC]))
        return [slot, (0, WALKS)] if slot[1] == LANE else [slot]
    if kind == EVENT or (kind == COPY and row[COPY_DIR] != UB_TO_UB):
        return []
    return [(0, python(family_of)(kind))]


class Helpers:
    """The table of helpers, filled on first use (see the module's docstring)."""

    def __init__(self):
        self._lock = threading.RLock()
        # (module, helper) -> its C function, kept alive: the table holds its address
        self._compiled = {}
        dtype = object if numba.config.DISABLE_JIT else np.int64
        self.addresses = np.zeros((256, max(len(VARIANT_NAMES), len(FAMILY_NAMES))), dtype)

    def install(self, row):
        """Compile (or load) the helpers that run `row`, if the table lacks them."""
        for slot in slots_of(row):
            with self._lock:
                opcode, column = slot
                self._grow(opcode)
                if _filled(self.addresses[slot]):
                    continue
                if opcode == 0:
                    module, name = families, FAMILY_NAMES[column]
                    what = FAMILY_WHAT[name]
                else:
                    from .table import TABLE
                    entry = TABLE.by_opcode[opcode]
                    module, name = loops_module(entry), VARIANT_NAMES[column]
                    what = f"{entry.name}'s {VARIANT_WHAT[name]}"
                self.addresses[slot] = self._compile(module, name, what)

    def _compile(self, module, name, what):
        if numba.config.DISABLE_JIT:
            return getattr(module, name)
        function = self._compiled.get((module.__name__, name))
        if function is None:
            entry = getattr(module, name + "_entry")
            announce_compile(what, ESTIMATE_S[name], cached=cached_on_disk(entry))
            signature = SIGNATURES.get(name, ROW_HELPER)
            function = self._compiled[(module.__name__, name)] = c_helper(entry, signature)
        return function.address

    def _grow(self, opcode):
        rows = self.addresses.shape[0]
        if opcode >= rows:
            grown = np.zeros((max(2 * rows, opcode + 1), self.addresses.shape[1]),
                             self.addresses.dtype)
            grown[:rows] = self.addresses
            self.addresses = grown

    def forget(self, opcode):
        """An instruction left the table: its row of helpers goes too (opcodes are never
        reused)."""
        with self._lock:
            if opcode < self.addresses.shape[0]:
                self.addresses[opcode] = 0

    def compiled(self):
        """The helpers this process has installed: [(module, helper name)]."""
        return sorted(self._compiled)


HELPERS = Helpers()


def _filled(entry):
    return not (isinstance(entry, (int, np.integer)) and entry == 0)


# the CPU seconds a cold compile of each helper took on the 2-core machine (the notice's estimate)
ESTIMATE_S = {"lane": 1, "walks": 2, "run_f32": 1, "run_half": 1, "run_mixed": 1, "reductions": 3,
              "broadcasts": 1, "ub_copies": 1, "scalar_reads": 1, "selects": 1, "executor": 4}
COMPILE_LISTENERS = []   # callables (message) that show compile notices; stderr when empty


def announce_compile(what, seconds, cached):
    """One line before a cold compile (nothing in Numba's disk cache): what, and about how long."""
    if cached:
        return
    message = f"lngb: compiling {what} (first use only, about {seconds} s)..."
    for listener in COMPILE_LISTENERS or [lambda m: print(m, file=sys.stderr, flush=True)]:
        listener(message)


def cached_on_disk(python_function):
    """Whether Numba's disk cache holds a compiled form of the module-level `python_function`
    (its index file exists)."""
    from numba.core.caching import FunctionCache
    try:
        index = FunctionCache(python_function)._cache_file._index_path
    except Exception:   # no locator: it cannot be cached, so it compiles
        return False
    return os.path.exists(index)


# --- each element-wise instruction's loop module -----------------------------------------------

LOOPS = pathlib.Path(__file__).with_name("loops.py")
PLACEHOLDER_LANE = "from lngb.vector_ops.lanes import add as lane\n"


def lane_fingerprint(lane):
    """What a lane's compiled code depends on: its module's source file (helpers included), or,
    for a lane defined where there is no file (a REPL), its bytecode."""
    function = getattr(lane, "py_func", lane)
    if not callable(function) or not hasattr(function, "__code__"):
        raise InvalidArgumentError(f"the lane function {lane!r} is not a jitted Python function")
    try:
        return pathlib.Path(inspect.getsourcefile(function)).read_bytes()
    except (TypeError, OSError):
        pass

    def code_bytes(code):
        parts = [code.co_code, repr(code.co_names).encode()]
        for const in code.co_consts:
            parts.append(code_bytes(const) if inspect.iscode(const) else repr(const).encode())
        return b"".join(parts)
    return code_bytes(function.__code__)


def loops_source(entry):
    """loops.py with `lane` bound to the instruction's lane function (the module's only
    difference), and a fingerprint of the lane's source in a comment: the module's file is
    named by a hash of its source, so a changed lane makes a new module and a new disk cache
    (a change to lngb's own jitted sources changes every cached function's stamp:
    disk_cache.SOURCES_FINGERPRINT)."""
    source = LOOPS.read_text()
    if PLACEHOLDER_LANE not in source:
        raise AssertionError("loops.py lost its placeholder lane import")
    function = getattr(entry.lane, "py_func", entry.lane)
    # the lane's file and its name in it: two lanes of one file make two modules
    fingerprint = hashlib.sha1(lane_fingerprint(entry.lane)
                               + function.__qualname__.encode()).hexdigest()
    binding = ("from lngb.vector_ops.table import TABLE\n"
               f"lane = TABLE.by_opcode[{entry.opcode}].lane  # {entry.name}; its source: "
               f"{fingerprint}\n")
    return ('"""Generated by lngb.vector_ops.helpers from loops.py; do not edit."""\n'
            + source.replace(PLACEHOLDER_LANE, binding))


def loops_module(entry):
    """The loop module of element-wise instruction `entry` (made and imported once)."""
    source = loops_source(entry)
    name = "lngb_loops_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    directory = disk_cache.generated_dir()
    path = directory / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        # written once, atomically, and never rewritten, so Numba's disk cache of it stays valid
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(temporary, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
