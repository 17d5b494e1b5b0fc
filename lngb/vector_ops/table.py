"""The instruction table: one declarative entry per instruction and event.

An entry says what the rest of lngb needs to know about an instruction: its Ascend C name, its
family (which gives the call form, the kernel that runs it, the footprint rule and the cost
rule), its pipe, the dtypes it takes, its cost rate and, for element-wise instructions, its lane
function (`lanes.py`). The wrappers, the executor's dispatch, the footprint walk, the cost
model, the trace and the tests read it. Opcodes are handed out in table order.

Adding an instruction = its entry (in BUILTIN, or `TABLE.register(entry)` at run time) + its
lane function + its golden rows in the tests. The executor for the table as it is
(`TABLE.kernels`: `execute`, and `run_schedule`, its one jitted entry point) lives in a small
module generated from the table into a file, so that Numba can cache it (see `_generate`).
"""
import hashlib
import importlib.util
import inspect
import os
import pathlib
import sys
import tempfile
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InvalidArgumentError
from . import binary, brcb, cast, copy, duplicate, lanes, reduce, scalar, unary
from .program import BROADCAST, COPY, ELEMENTWISE, EVENT, NOT_VECTOR, REDUCE, SCALAR_READ
from .types import Pipe

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
SAME_FLOAT = ((F16, F16), (F32, F32))   # (dst, src) dtype pairs


@dataclass(frozen=True)
class Family:
    """What the instructions of one family share."""
    name: str
    kind: int                 # the kernel that runs its rows (program.KIND)
    sources: int = 0          # vector sources read
    footprint: str = "none"   # the footprint rule (vector_ops.footprint)
    cost: str = "rate"        # the cost rule (observers.cost)
    make_wrapper: Optional[Callable] = None   # entry -> the Ascend C call form


BINARY = Family("binary", ELEMENTWISE, 2, "lanes", "rate", binary.make_wrapper)
SCALAR = Family("scalar", ELEMENTWISE, 1, "lanes", "rate", scalar.make_wrapper)
UNARY = Family("unary", ELEMENTWISE, 1, "lanes", "rate", unary.make_wrapper)
DUPLICATE = Family("duplicate", ELEMENTWISE, 0, "lanes", "rate", duplicate.make_wrapper)
CAST = Family("cast", ELEMENTWISE, 1, "lanes", "rate", cast.make_wrapper)
REDUCTION = Family("reduce", REDUCE, 1, "groups", "rate", reduce.make_wrapper)
DATA_COPY = Family("copy", COPY, 1, "bursts", "copy", copy.make_wrapper)
BRCB = Family("brcb", BROADCAST, 1, "blocks", "rate", brcb.make_wrapper)
LANE_BROADCAST = Family("lane broadcast", BROADCAST, 1, "blocks", "rate", brcb.make_lane_wrapper)
EVENTS = Family("event", EVENT)   # each event entry names its cost rule
SCALAR_READS = Family("scalar read", SCALAR_READ)   # GetValue: UB bytes into a scalar register


@dataclass(frozen=True)
class Instruction:
    name: str
    family: Family
    lane: Any = None               # element-wise: the jitted lane function (lanes.py)
    dtypes: tuple = SAME_FLOAT     # (dst, src) dtype pairs it takes
    rate: Optional[tuple] = None   # elements per cycle (half, float) on the vector unit
    pipe: Optional[int] = Pipe.PIPE_V   # None: resolved per call (DataCopy, SetFlag, WaitFlag)
    cost: Optional[str] = None     # the cost rule, if not the family's
    group: Any = None              # reductions: a Grouping
    parameter: Optional[Callable] = None   # (core, dtype) -> the lane's scalar slot, for lanes
                                           # that take a switch rather than a scalar operand
    doc: str = ""
    opcode: int = field(default=0, compare=False)

    @property
    def cost_rule(self):
        return self.cost or self.family.cost

    @property
    def is_instruction(self):
        return self.family.kind not in NOT_VECTOR

    def lane_parameter(self, core, dtype):
        return 0 if self.parameter is None else self.parameter(core, dtype)


def denormal_switch(core, dtype):
    """Div and Sqrt find the core's div_sqrt switch in their scalar slot (lanes.div): a
    nonzero value flushes subnormals."""
    if core.div_sqrt == "ieee":
        return 0
    return 0x3F800000 if np.dtype(dtype) == F32 else 0x3C00   # 1.0


@dataclass(frozen=True)
class Grouping:
    """A reduction's groups: geometry(element size) -> (lanes per output, outputs per unit of
    dstRepStride, dst alignment in bytes); mask_first: Ascend C puts the mask before repeatTime."""
    geometry: Callable
    mask_first: bool = False


BLOCKS = Grouping(lambda size: (32 // size, 8, 16 if size == 2 else 32))
WHOLE = Grouping(lambda size: (256 // size, 1, size), mask_first=True)
PAIRS = Grouping(lambda size: (2, 128 // size, 32))


BUILTIN = (
    Instruction("Add", BINARY, lanes.add, rate=(128, 64), doc="dst = src0 + src1"),
    Instruction("Sub", BINARY, lanes.sub, rate=(128, 64), doc="dst = src0 - src1"),
    Instruction("Mul", BINARY, lanes.mul, rate=(128, 64), doc="dst = src0 * src1"),
    Instruction("Div", BINARY, lanes.div, rate=(32, 16), parameter=denormal_switch,
                doc="dst = src0 / src1, correctly rounded"),
    Instruction("Max", BINARY, lanes.max_, rate=(128, 64), doc="dst = max(src0, src1)"),
    Instruction("Min", BINARY, lanes.min_, rate=(128, 64), doc="dst = min(src0, src1)"),
    Instruction("Adds", SCALAR, lanes.adds, rate=(128, 64), doc="dst = src + scalar"),
    Instruction("Muls", SCALAR, lanes.muls, rate=(128, 64), doc="dst = src * scalar"),
    Instruction("Maxs", SCALAR, lanes.maxs, rate=(128, 64), doc="dst = max(src, scalar)"),
    Instruction("Mins", SCALAR, lanes.mins, rate=(128, 64), doc="dst = min(src, scalar)"),
    Instruction("Sqrt", UNARY, lanes.sqrt, rate=(32, 16), parameter=denormal_switch,
                doc="dst = sqrt(src), correctly rounded"),
    Instruction("Abs", UNARY, lanes.abs_, rate=(128, 64), doc="dst = |src|"),
    Instruction("Relu", UNARY, lanes.relu, rate=(128, 64), doc="dst = max(src, 0)"),
    Instruction("Duplicate", DUPLICATE, lanes.duplicate, rate=(128, 64), doc="dst = scalar"),
    Instruction("Cast", CAST, lanes.convert, dtypes=((F32, F16), (F16, F32)), rate=(64, 64),
                doc="dst = src converted (half <-> float)"),
    # half block and whole reductions and float whole reductions: 7 cycles per repeat [S44]
    Instruction("BlockReduceSum", REDUCTION, rate=(128 / 7, 64), group=BLOCKS,
                doc="one sum per 32-byte block"),
    Instruction("WholeReduceSum", REDUCTION, rate=(128 / 7, 64 / 7), group=WHOLE,
                doc="one sum per repeat"),
    Instruction("PairReduceSum", REDUCTION, rate=(128, 64), group=PAIRS,
                doc="sums of adjacent lane pairs"),
    Instruction("Brcb", BRCB, rate=(128, 64),
                doc="each source element fills a 32-byte block of dst"),
    Instruction("DuplicateLane", LANE_BROADCAST, rate=(128, 64),
                doc="every lane of a vector register = src[0] (the 950's lane broadcast)"),
    Instruction("DataCopy", DATA_COPY, pipe=None, doc="GM <-> UB and UB -> UB bursts"),
    Instruction("PipeBarrier", EVENTS, pipe=Pipe.PIPE_S, cost="barrier"),
    Instruction("SetFlag", EVENTS, pipe=None, cost="set_flag"),
    Instruction("WaitFlag", EVENTS, pipe=None, cost="wait_flag"),
    Instruction("SetMaskCount", EVENTS, pipe=Pipe.PIPE_S, cost="mask"),
    Instruction("SetMaskNorm", EVENTS, pipe=Pipe.PIPE_S, cost="mask"),
    Instruction("SetVectorMask", EVENTS, pipe=Pipe.PIPE_S, cost="mask"),
    Instruction("ResetMask", EVENTS, pipe=Pipe.PIPE_S, cost="mask"),
    Instruction("GetValue", SCALAR_READS, pipe=Pipe.PIPE_S, cost="scalar"),
    Instruction("SetValue", EVENTS, pipe=Pipe.PIPE_S, cost="scalar"),
    # no device instruction: declares UB bytes undefined (e.g. what isReuseSource clobbers)
    Instruction("Undefine", EVENTS, pipe=Pipe.PIPE_S, cost="none"),
    Instruction("SyncAll", EVENTS, pipe=Pipe.PIPE_ALL, cost="sync_all"),
)


class Table:
    """The entries by name and by opcode, the wrappers, and the generated dispatcher."""

    def __init__(self, entries):
        self._lock = threading.RLock()
        self.entries = []
        self.by_name = {}
        self.by_opcode = {}
        self._wrappers = {}
        self._kernels = None
        self._next_opcode = 1   # never reused: cached rows keep the opcode they were made with
        for entry in entries:
            self.register(entry)

    def register(self, entry):
        """Add an instruction; returns its wrapper (None for events)."""
        with self._lock:
            if entry.name in self.by_name:
                raise InvalidArgumentError(f"instruction {entry.name!r} is already in the table")
            if entry.family.kind == ELEMENTWISE:
                if entry.lane is None:
                    raise InvalidArgumentError(f"{entry.name}: an element-wise instruction needs "
                                               "a lane function")
                _fingerprint(entry.lane)
                if len({d == s for d, s in entry.dtypes}) > 1:
                    raise InvalidArgumentError(
                        f"{entry.name}: an element-wise instruction's (dst, src) dtype pairs must "
                        f"all be the same type or all differ (one loop per kind), got "
                        f"{entry.dtypes}; make two instructions")
            entry = replace(entry, opcode=self._next_opcode)
            self._next_opcode += 1
            self.entries.append(entry)
            self.by_name[entry.name] = self.by_opcode[entry.opcode] = entry
            self._kernels = None
            if entry.family.make_wrapper is None:
                return None
            wrapper = self._wrappers[entry.name] = entry.family.make_wrapper(entry)
            return wrapper

    def unregister(self, name):
        with self._lock:
            entry = self.by_name.pop(name)
            self.entries.remove(entry)
            del self.by_opcode[entry.opcode]
            self._wrappers.pop(name, None)
            self._kernels = None

    def __getitem__(self, name):
        return self.by_name[name]

    def wrapper(self, name):
        return self._wrappers[name]

    def instruction_names(self):
        return tuple(e.name for e in self.entries if e.is_instruction)

    @property
    def kernels(self):
        """The generated executor module of the table as it is now (template.py):
        `execute(ub, gms, rows)`, `run_schedule(...)`."""
        kernels = self._kernels
        if kernels is None:
            with self._lock:
                if self._kernels is None:
                    *loops, executor = _generate(self.entries)
                    for source in loops:   # each instruction's loops, imported by the executor
                        _load(source)
                    self._kernels = _load(executor)
                    announce_compile(self._kernels.run_schedule, "kernels")   # every run needs it
                kernels = self._kernels
        return kernels


def announce_compile(function, what):
    """A line on stderr before the first call of jitted `function` compiles it (its disk cache is
    cold and this process has not compiled it)."""
    if not getattr(function, "signatures", ()) and not _cached(function):
        print(f"lngb: compiling {what} (first run only)...", file=sys.stderr)


def _cached(function):
    """Whether Numba's disk cache holds `function` already (its index file exists); a plain
    Python function (NUMBA_DISABLE_JIT) needs no compiling."""
    cache = getattr(function, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    return index is None or os.path.exists(index)


def _fingerprint(lane):
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


TEMPLATE = pathlib.Path(__file__).with_name("template.py")
# every file the generated module's code comes from (the helpers it calls are compiled into it)
EXECUTOR_SOURCES = [pathlib.Path(__file__).with_name(name) for name in (
    "template.py", "kernels.py", "walk.py", "half.py", "lanes.py", "program.py", "types.py")] + [
    pathlib.Path(__file__).parent.parent / "_jit.py"]
PLACEHOLDER_LANE = "from lngb.vector_ops.lanes import add as lane_LANE\n"


def _section(template, title, next_title):
    return template[template.index(f"# --- {title}"):template.index(f"# --- {next_title}")]


def _generate(entries):
    """The sources of the table's executor modules from template.py, the executor's last. First
    one module per element-wise instruction: its lane (a global its loops call directly) and the
    section "per lane" (or "per mixed lane") with LANE = its opcode. Each is cached on disk on its
    own, so a new table compiles only its new instructions' loops (and the executor). Then the
    executor module: it imports those loops, and holds `lane_of` and the `flat_*_of` loops
    dispatching on the opcode, and the executor section. Each module carries a fingerprint of the
    sources its code comes from (lanes included) in a comment, and the executor module names the
    others by the hashes of theirs, so that any change to them makes new modules (and new disk
    caches)."""
    template = TEMPLATE.read_text()
    imports = template[template.index("import numpy"):template.index("# --- per lane")]
    per_lane = _section(template, "per lane", "per mixed lane")
    per_mixed_lane = _section(template, "per mixed lane", "dispatch")
    executor = template[template.index("# --- executor"):]
    chain = [e for e in entries if e.family.kind == ELEMENTWISE]
    mixed = {e.opcode for e in chain if all(d != s for d, s in e.dtypes)}
    sources = [p.read_bytes() for p in EXECUTOR_SOURCES]
    header = ['"""Generated by lngb.vector_ops.table from template.py and the instruction table; '
              'do not edit."""', imports.replace(PLACEHOLDER_LANE, "").rstrip()]
    modules, imported = [], []
    for e in chain:
        op = e.opcode
        fingerprint = hashlib.sha1(b"".join([*sources, _fingerprint(e.lane)])).hexdigest()
        section = per_mixed_lane if op in mixed else per_lane
        module = "\n".join([*header, "from lngb.vector_ops.table import TABLE", "",
                            f"# the sources of these loops and their lane: {fingerprint}",
                            f"lane_{op} = TABLE.by_opcode[{op}].lane  # {e.name}", "", "",
                            section.replace("LANE", str(op)) + f"# ({e.name})\n"])
        modules.append(module)
        loops = [f"flat_mixed_{op}"] if op in mixed else [f"flat_f32_{op}", f"flat_half_{op}"]
        imported.append(f"from {_module_name(module)} import {', '.join([f'lane_{op}', *loops])}"
                        f"  # {e.name}")
    executor_fingerprint = hashlib.sha1(b"".join(sources)).hexdigest()
    lines = [*header, "", f"# the sources of the executor: {executor_fingerprint}", *imported, "", ""]
    lines += ["# --- dispatch", "", "@njit", "def lane_of(op, a, b, s):"]
    lines += [f"    {'if' if k == 0 else 'elif'} op == {e.opcode}:  # {e.name}\n"
              f"        return lane_{e.opcode}(a, b, s)" for k, e in enumerate(chain)]
    same = [e for e in chain if e.opcode not in mixed]
    lines += ["    return np.float32(0.0)"]
    # one dispatcher per pair of types calls each instruction's loops (their own functions: with
    # every loop inlined in one function, a row cost ~30 ns more); the dispatchers themselves are
    # inlined where they are called (as functions, each held one more copy of the loops' code)
    for name, args, entries in (
            ("flat_f32", "f32, cores, on, d, a, b, s, n", same),
            ("flat_half", "u16, cores, on, d, a, b, s, n, sat", same),
            ("flat_mixed", "f32, u16, cores, on, dt, d, a, s, n, sat",
             [e for e in chain if e.opcode in mixed])):
        lines += ["", "", "@njit(inline=\"always\")", f"def {name}_of(op, {args}):"]
        lines += [f"    {'if' if k == 0 else 'elif'} op == {e.opcode}:  # {e.name}\n"
                  f"        {name}_{e.opcode}({args})" for k, e in enumerate(entries)]
        if not entries:
            lines += ["    pass"]
    return [*modules, "\n".join(lines) + "\n\n\n" + executor]


def _generated_dirs():
    if os.environ.get("LNGB_GENERATED_DIR"):
        yield pathlib.Path(os.environ["LNGB_GENERATED_DIR"])
    yield pathlib.Path(__file__).parent / "__pycache__" / "generated"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield pathlib.Path(base) / "lngb"
    yield pathlib.Path(tempfile.gettempdir()) / f"lngb-{os.getuid() if hasattr(os, 'getuid') else 0}"


def _module_name(source):
    return "lngb_kernels_" + hashlib.sha1(source.encode()).hexdigest()[:16]


def _load(source):
    """Import the generated source from a file named by its hash (written once, atomically, and
    never rewritten, so Numba's disk cache of it stays valid)."""
    name = _module_name(source)
    if name in sys.modules:
        return sys.modules[name]
    for directory in _generated_dirs():
        path = directory / f"{name}.py"
        try:
            if not path.exists() or path.read_text() != source:
                directory.mkdir(parents=True, exist_ok=True)
                fd, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
                with os.fdopen(fd, "w") as f:
                    f.write(source)
                os.replace(temporary, path)
        except OSError:
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    raise OSError("lngb: no writable directory for the generated instruction dispatcher (set "
                  "LNGB_GENERATED_DIR)")


TABLE = Table(BUILTIN)
