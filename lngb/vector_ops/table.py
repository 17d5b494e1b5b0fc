"""The instruction table: one declarative entry per instruction and event.

An entry says what the rest of lngb needs to know about an instruction: its Ascend C name, its
family (which gives the call form, the kernel that runs it, the footprint rule and the cost
rule), its pipe, the dtypes it takes, its cost rate and, for element-wise instructions, its lane
function (`lanes.py`). The wrappers, the executor's dispatch, the footprint walk, the cost
model, the trace and the tests read it. Opcodes are handed out in table order.

Adding an instruction = its entry (in BUILTIN, or `TABLE.register(entry)` at run time) + its
lane function + its golden rows in the tests. The executor (executor.py) runs every table: an
instruction's loops are compiled the first time one of its rows runs (helpers.py), so
registering one compiles nothing until it is used.
"""
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InvalidArgumentError
from . import binary, brcb, cast, copy, duplicate, lanes, reduce, scalar, select, unary
from .helpers import HELPERS, lane_fingerprint
from .program import BROADCAST, COPY, ELEMENTWISE, EVENT, REDUCE, SCALAR_READ, SELECT
from .types import Pipe

F16, F32, I16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int16)
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
    instruction: bool = True  # a vector or MTE instruction, not an event or a scalar access


BINARY = Family("binary", ELEMENTWISE, 2, "lanes", "rate", binary.make_wrapper)
SCALAR = Family("scalar", ELEMENTWISE, 1, "lanes", "rate", scalar.make_wrapper)
UNARY = Family("unary", ELEMENTWISE, 1, "lanes", "rate", unary.make_wrapper)
DUPLICATE = Family("duplicate", ELEMENTWISE, 0, "lanes", "rate", duplicate.make_wrapper)
CAST = Family("cast", ELEMENTWISE, 1, "lanes", "rate", cast.make_wrapper)
REDUCTION = Family("reduce", REDUCE, 1, "groups", "rate", reduce.make_wrapper)
DATA_COPY = Family("copy", COPY, 1, "bursts", "copy", copy.make_wrapper)
BRCB = Family("brcb", BROADCAST, 1, "blocks", "rate", brcb.make_wrapper)
LANE_BROADCAST = Family("lane broadcast", BROADCAST, 1, "blocks", "rate", brcb.make_lane_wrapper)
SELECTS = Family("select", SELECT, 1, "select", "rate", select.make_select_wrapper)
# SetCmpMask: 16 UB bytes into the compare-mask register, on the vector pipe
CMPMASK_LOADS = Family("cmpmask load", SCALAR_READ, 1, "register", "cmpmask",
                       select.make_set_cmp_mask_wrapper)
EVENTS = Family("event", EVENT, instruction=False)   # each event entry names its cost rule
# GetValue: UB bytes into a scalar register
SCALAR_READS = Family("scalar read", SCALAR_READ, instruction=False)


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
        return self.family.instruction

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
    Instruction("Muls", SCALAR, lanes.muls, dtypes=SAME_FLOAT + ((I16, I16),), rate=(128, 64),
                doc="dst = src * scalar (int16: saturated)"),
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
    Instruction("SetCmpMask", CMPMASK_LOADS, doc="the compare-mask register = 16 UB bytes"),
    # one 256-byte repeat per cycle, as Add (UNCONFIRMED)
    Instruction("Select", SELECTS, rate=(128, 64),
                doc="dst = src0 where the selMask bit is 1, else the compare-mask scalar"),
)


class Table:
    """The entries by name and by opcode, and the wrappers."""

    def __init__(self, entries):
        self._lock = threading.RLock()
        self.entries = []
        self.by_name = {}
        self.by_opcode = {}
        self._wrappers = {}
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
                lane_fingerprint(entry.lane)
                if len({d == s for d, s in entry.dtypes}) > 1:
                    raise InvalidArgumentError(
                        f"{entry.name}: an element-wise instruction's (dst, src) dtype pairs must "
                        f"all be the same type or all differ (one loop per kind), got "
                        f"{entry.dtypes}; make two instructions")
            entry = replace(entry, opcode=self._next_opcode)
            self._next_opcode += 1
            self.entries.append(entry)
            self.by_name[entry.name] = self.by_opcode[entry.opcode] = entry
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
            HELPERS.forget(entry.opcode)

    def __getitem__(self, name):
        return self.by_name[name]

    def wrapper(self, name):
        return self._wrappers[name]

    def instruction_names(self):
        return tuple(e.name for e in self.entries if e.is_instruction)

    @property
    def kernels(self):
        """The executor (executor.py: `execute(ub, gms, rows)`, `run_schedule(...)`), which
        runs every table: each instruction's loops are compiled when a row first needs them."""
        from . import executor
        return executor


TABLE = Table(BUILTIN)
