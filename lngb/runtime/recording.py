"""Validate a whole kernel body, then run it; in fast mode, replay it.

`record(core, body, gms)` is the dry run: every instruction of `body()` is validated and its row
collected, nothing executes, and the core's state is left as it was. `run_recorded` keeps the
Program in the byte-bounded cache (`cache.STORE`) and replays it with one jitted call on every
later call with the same key and core state.
"""
import sys
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, warn
from ..products import SCALAR_REGISTERS
from ..vector_ops.program import GM_SLOTS, N_COLS
from .cache import SCALAR_REGISTER, Cache, Exact, Uncacheable, exact, held_bytes

NO_GM = np.zeros(0, dtype=np.uint8)
PROGRAMS = Cache("programs")
LIVE = Cache("live kernels")   # keys of kernels that use scalar accesses: they always run live
RECORD_BYTES = 500  # a TraceRecord with its row view and operand tuple, measured (tracemalloc)


class ScalarAccess(Exception):
    """The body depends on UB data (SetValue, or a GetValue's value used other than as a vector
    instruction's scalar) during a dry run, so it runs live."""


class ScalarRef:
    """What GetValue returns during a dry run: the scalar register it fills when the program
    runs. Vector instructions of the same recording take it as their scalar (Duplicate, Adds,
    Muls, ...); using its value in Python (arithmetic, comparisons, float(), an index) raises
    ScalarAccess, and the kernel runs live instead."""

    __slots__ = ("core", "address", "dtype", "recorder", "serial")

    def __init__(self, core, address, dtype, serial):
        self.core, self.address, self.dtype, self.serial = core, address, dtype, serial
        self.recorder = core.recorder

    def usable_by(self, core, dtype):
        """Whether an instruction of `core` in `dtype` can read it now: the same recording, the
        same type, and its register not yet taken by a later GetValue."""
        return (core is self.core and core.recorder is self.recorder and dtype == self.dtype
                and core.scalar_reads - self.serial <= SCALAR_REGISTERS)

    def cache_key(self):
        return Exact((SCALAR_REGISTER, self.address, self.dtype.str))

    def __repr__(self):
        return f"<the {self.dtype.name} GetValue read into scalar register @{self.address}>"

    def _value_needed(self, *args):
        raise ScalarAccess("GetValue")


for _name in ("float", "int", "index", "bool", "complex", "eq", "ne", "lt", "le", "gt", "ge",
              "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "mod", "pow", "neg", "pos", "abs", "round", "format", "array"):
    setattr(ScalarRef, f"__{_name}__", ScalarRef._value_needed)
ScalarRef.__hash__ = object.__hash__


@dataclass
class Program:
    """A recorded instruction stream (events included), the core state it leaves behind, the
    GM buffer sizes it was recorded with and the warnings its body raised."""
    rows: np.ndarray
    records: list   # a TraceRecord per row, for traces, checks and stepping
    end_state: tuple
    gm_sizes: list
    warnings: tuple
    key: Any = field(default=None, compare=False)   # its cache key, once cached

    @property
    def nbytes(self):
        return held_bytes(self.rows.nbytes + RECORD_BYTES * len(self.records) + 1024)

    @cached_property
    def view(self):
        """A read-only view of its rows, for results to share (read_only)."""
        return read_only(self.rows)


class Recorder:
    def __init__(self):
        self.rows, self.records, self.warnings = [], [], []

    def add(self, row, record):
        self.rows.append(row)
        self.records.append(record)

    def warn(self, message):
        if message not in self.warnings:
            self.warnings.append(message)


def read_only(rows):
    """A read-only view of rows (a result's view of a cached program: writing to it would change
    every later replay)."""
    view = rows.view()
    view.setflags(write=False)
    return view


def pad_gms(gms):
    gms = tuple(gms)
    if len(gms) > GM_SLOTS:
        raise InvalidArgumentError(f"run_recorded: at most {GM_SLOTS} GM buffers, got {len(gms)}")
    return gms + (NO_GM,) * (GM_SLOTS - len(gms))


TRACED = ("a debugger traces this program (sys.gettrace() is set) while lngb records a kernel: "
          "this is the recording pass, a dry run that validates every instruction and executes "
          "none, so a breakpoint in the kernel stops here with tensors (dst.read()) not yet "
          "computed. Fast mode then replays the recording (later calls of the same configuration "
          "do not run the source again); mode=\"observed\" runs the kernel live, each "
          "instruction as it is issued")


def _warn_if_traced():
    """The TRACED warning when a debugger traces the program (coverage's tracer is no debugger)."""
    tracer = sys.gettrace()
    if tracer is not None and not type(getattr(tracer, "__self__", tracer)).__module__.startswith(
            "coverage"):
        warn(TRACED)


def record(core, body, gms=(), seq_base=None):
    """The dry run: validate every instruction of `body` and collect its rows, executing
    nothing; the core's state is left as it was. On an error the warnings raised so far are
    passed on. A body that uses GetValue/SetValue cannot be recorded (ScalarAccess). Under a
    debugger it warns that this is the recording pass (TRACED)."""
    _warn_if_traced()
    gms = pad_gms(gms)
    recorder = Recorder()
    core.start_recording(recorder, seq_base)
    try:
        with core.binding(gms):
            body()
    except ScalarAccess:
        raise
    except Exception:
        for message in recorder.warnings:
            warn(message)
        raise
    finally:
        end = core.stop_recording()
    rows = np.array(recorder.rows, dtype=np.int64).reshape(-1, N_COLS)
    rows.setflags(write=False)   # replays execute them: a trace's caller cannot change them
    for i, r in enumerate(recorder.records):
        r.row = rows[i]   # a view: the program holds each row once
    return Program(rows, recorder.records, end, [g.size for g in gms],
                   tuple(recorder.warnings))


def run_recorded(core, key, body, gms=(), dry_run_first=False):
    """Run a data-independent kernel `body()` all or nothing: every instruction is validated
    (a dry run that records the rows) before the first one executes, so a rejected body
    changes neither the UB nor the core's state.

    In fast and checked mode the Program is cached under `key` plus the core's product,
    saturation mode, reserve and state (`program_key`), and later calls replay it with one
    jitted call. `key` must determine the instruction stream. `gms` lists the GM byte arrays
    the DataCopy instructions use (at most GM_SLOTS); a replay takes new arrays of the same
    sizes in the same order. Warnings the body raised are raised again on every call. Kernels
    run live, one instruction at a time, inside an enclosing recording, in observed mode, while
    an observer needs every instruction (a hook; the sanitizer once it holds state), when `key`
    has no value-exact form, and when they read or write the UB from the scalar unit. A live
    run is all or nothing only as far as the body checks its arguments before its first
    instruction; `dry_run_first` validates it in a dry run first, for a body whose checks
    cannot tell (the body then runs twice: a pdb breakpoint in it stops in the dry run too)."""
    if core.recorder is not None:
        body()  # part of an enclosing recording
        return
    try:
        full_key = program_key(core, key)
    except Uncacheable:
        full_key = None
    run_program(core, full_key, body, gms, dry_run_first)


def program_key(core, key):
    """The key of `key`'s Program on this core as it is now. The mode is part of it: a kernel
    may check more in checked mode (a HazardError where fast mode warns)."""
    return Exact((exact(key), core.product.name, core.mode, core.sat_mode, core.div_sqrt,
                  core.reserved_bytes, core.state()))   # the core's parts: plain values


def runs_live(core):
    """Whether kernels run live on `core` now: in observed mode, and while an observer needs
    every instruction."""
    return core.mode == "observed" or not core.replays


def run_program(core, full_key, body, gms=(), dry_run_first=False):
    """run_recorded with the program's key known (None: no value-exact key, run live)."""
    gms = pad_gms(gms)
    if full_key is None or runs_live(core):
        if dry_run_first:
            try:
                record(core, body, gms)
            except ScalarAccess:
                pass  # its instruction stream depends on UB values: nothing validates it ahead
        _live(core, body, gms)
        return
    program = PROGRAMS.get(full_key)
    if program is None:
        if LIVE.get(full_key):
            _live(core, body, gms)
            return
        try:
            program = record(core, body, gms)
        except ScalarAccess:  # the body reads or writes the UB from the scalar unit
            LIVE.put(full_key, True, 256)
            _live(core, body, gms)
            return
        program.key = full_key
        PROGRAMS.put(full_key, program, program.nbytes)
    for message in program.warnings:
        warn(message)
    sizes = [g.size for g in gms]
    if sizes != program.gm_sizes:
        raise InvalidArgumentError(f"run_recorded: GM buffers of {sizes} bytes, the program "
                                   f"was recorded with {program.gm_sizes}")
    core.replay(program, gms)


def _live(core, body, gms):
    core.acquire()
    try:
        with core.binding(gms):
            body()
    finally:
        core.release()
