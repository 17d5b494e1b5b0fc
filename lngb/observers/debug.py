"""Step through a kernel one instruction, one source line or one API call at a time, like pdb.

The kernel is recorded once (a dry run that validates everything and executes nothing), with
the kernel source's call stack at each record; the debugger then executes the recorded rows one
by one on the core, so the UB, the mask register and the trace can be inspected between any two
instructions. `lngb debug` wraps it in a pdb-like command loop (DebugShell) that can read its
commands from a file.
"""
import cmd
import difflib
from collections.abc import Mapping
import inspect
import linecache
import re
import sys
from typing import NamedTuple

import numpy as np

from ..arguments import is_int
from ..backward import prepare_backward
from ..errors import HazardError, InvalidArgumentError, LngbError
from ..host import prepare_operator, sample_kernel
from ..runtime.recording import ScalarAccess
from ..simulate import global_tensors, prepare_kernel
from ..vector_ops.program import GM_SLOTS
from ..record import call_site, clear_footprint, footprint_flags
from ..tensor import LocalTensor
from ..vector_ops.types import MaskMode
from .trace import format_record

DTYPES = {"f32": np.float32, "f16": np.float16, "u8": np.uint8, "i32": np.int32}


class Frame(NamedTuple):
    """A frame of the kernel's source at a record: `file` as records show it, `line`, the
    `function`, `call` (a number per call: two calls of one function differ) and the code
    file's `path`."""
    file: str
    line: int
    function: str
    call: int
    path: str


class _Stacks:
    """The kernel frames at each record of a dry run, outermost first: the frames a record's
    `source` may name (call_site's: not lngb's machine), but not this module's."""

    def __init__(self, local_tensors=False):
        self.stacks, self._frames, self._calls, self._serial = [], [], [], 0
        # local_tensors: also, per record, the kernel frames' LocalTensor variables by name
        self.local_tensors = [] if local_tensors else None

    def capture(self, top):
        """The frames between `top` and the instruction being issued now."""
        frames, files, k = [], [], 1
        frame = sys._getframe(k)
        while frame is not None and frame is not top:
            # call_site started at `frame` names the first frame out from it that is not lngb's
            # machine: `frame` is the kernel's when that is `frame` itself
            file, _, line = call_site(k + 1).rpartition(":")
            path = frame.f_code.co_filename
            if path != __file__ and line == str(frame.f_lineno) and path.endswith(file):
                frames.append(frame)
                files.append(file)
            frame, k = frame.f_back, k + 1
        frames.reverse()
        files.reverse()
        calls = []   # the previous capture's frames are alive, so `is` tells the same call
        for i, f in enumerate(frames):
            if i < len(self._frames) and self._frames[i] is f:
                calls.append(self._calls[i])
            else:
                self._serial += 1
                calls.append(self._serial)
        self._frames, self._calls = frames, calls
        if self.local_tensors is not None:   # outermost first: an inner frame's name wins
            self.local_tensors.append({name: value for f in frames for name, value in
                                       f.f_locals.items() if isinstance(value, LocalTensor)})
        self.stacks.append(tuple(Frame(file, f.f_lineno, f.f_code.co_name, c, f.f_code.co_filename)
                                 for file, f, c in zip(files, frames, calls)))


def record_with_stacks(core, body, gms=(), stacks=None):
    """core.record(body, gms), and the kernel's call stack at each record (outermost first);
    `stacks`: the _Stacks to fill (default a new one)."""
    stacks = stacks or _Stacks()

    def body_with_stacks():
        top, recorder = sys._getframe(), core.recorder
        add = recorder.add

        def add_with_stack(row, record):
            stacks.capture(top)
            add(row, record)

        recorder.add = add_with_stack   # this dry run's recorder only
        body()

    return core.record(body_with_stacks, gms), stacks.stacks


def _shared_calls(a, b):
    """How many outermost frames two stacks share (the same calls)."""
    n = 0
    while n < min(len(a), len(b)) and a[n].call == b[n].call:
        n += 1
    return n


class Debugger:
    """A recorded run of the sample kernel, executed on demand.

    `records[pc]` is the next instruction or event and `where()` its kernel frames; `step`
    (pdb's step: one record), `step_over` (pdb's next: the statement at the current line of the
    frame `depth` picks), `run_until` and `run` execute them. `breakpoints` (instruction names,
    or functions and APIs of the kernel: set_breakpoint, clear_breakpoint) stop `run` and
    `step_over`, and so do `watchpoints` (UB byte ranges)."""

    def __init__(self, input_dy, res_for_gamma, **emulate_options):
        core, kernel, gms, _, pd_gamma, pd_beta = sample_kernel(input_dy, res_for_gamma,
                                                                **emulate_options)

        def body():
            with core:
                kernel(*global_tensors(gms, [kernel.dtype] * len(gms)))
        self._start(core, body, gms, kernel.tensors, lambda: (pd_gamma.copy(), pd_beta.copy()))

    def _start(self, core, body, gms, tensors, results, stacks=None):
        self.core, self.gms, self.tensors, self._results = core, gms, tensors, results
        program, self.stacks = record_with_stacks(core, body, gms, stacks)
        core.bind_gms(gms)
        self.rows, self.records, self.pc = program.rows, program.records, 0
        self.executed = []
        self.breakpoints, self.watchpoints = set(), []
        self.depth = 0          # the frame of where() whose line step_over executes
        self._arrived = None    # where the last move stopped: a breakpoint there is behind it

    @property
    def next(self):
        """The record the next step executes (None at the end)."""
        return self.records[self.pc] if self.pc < len(self.records) else None

    @property
    def finished(self):
        return self.pc == len(self.records)

    @property
    def mask(self):
        """(mode, mask_high, mask_low) of the mask register now."""
        return (self.core.mask_mode, self.core.mask_high, self.core.mask_low)

    def where(self):
        """The kernel frames of the next record, outermost first; `depth` indexes the current
        one. Empty at the end."""
        return list(self.stacks[self.pc]) if not self.finished else []

    def view(self, tensor):
        """A typed copy of a LocalTensor (or of a tensor named in `tensors`) as it is now."""
        if isinstance(tensor, str):
            if tensor not in self.tensors:
                raise InvalidArgumentError(
                    f"view: no tensor named {tensor!r}; the kernel's tensors are "
                    f"{', '.join(self.tensors)}" + _close_matches(tensor, self.tensors))
            tensor = self.tensors[tensor]
        if not isinstance(tensor, LocalTensor):
            raise InvalidArgumentError(f"view: expects a tensor name or a LocalTensor, got "
                                       f"{tensor!r}")
        return tensor.read()

    def results(self):
        """(pd_gamma, pd_beta), once the kernel has run to the end (the last DataCopys write
        them to GM)."""
        if not self.finished:
            raise InvalidArgumentError(
                f"results: the kernel is at #{self.next.seq} of {len(self.records)}; its outputs "
                "are in GM only once it has run to the end (run(), or step until finished)")
        return self._results()

    def finished_text(self):
        """The results, one line (the shell's at the end)."""
        *pd_x, gamma, beta = self.results()   # BackwardDebugger: pdX first
        return (f"finished: pdGamma={np.array2string(gamma, threshold=16)} "
                f"pdBeta={np.array2string(beta, threshold=16)}"
                + (f" pdX[0, 0]={np.array2string(pd_x[0][0, 0], threshold=16)}" if pd_x else ""))

    def step(self, n=1):
        """Execute the next n records, or fewer at the end or where the core must wait (a
        SyncAll of the multi-core operator); returns those executed. The current frame is
        then the innermost one of the next record."""
        if not is_int(n) or n < 0:
            raise InvalidArgumentError(f"step: n must be a whole number >= 0, got {n!r}")
        if n:
            self._check_not_blocked()
        done = []
        for _ in range(n):
            if self.finished or self._blocked():
                break
            done.append(self._execute_next())
        if done:
            self._stop()
        return done

    def step_over(self):
        """pdb's `next`: execute the statement at the current line of the frame `depth` picks:
        one record when that line issues it itself, the whole call when the line calls a
        function or an API (a LayerNormGradBeta line of the sample kernel: all its records).
        Then the frame is the same one or, if it returned, its caller. Like run, it stops
        earlier at a breakpoint, a watchpoint or a record the core must wait at. Returns
        (reason, record) as run does; reason "next" when the statement is done."""
        start, level = self.pc, self.depth
        if self.finished:
            return "end", None
        statement = self._statement(start, level)

        def done():  # the frame to stop in once the statement is done, else None
            if self._statement(self.pc, level) == statement:
                return None
            return max(min(level, _shared_calls(self.stacks[start], self.stacks[self.pc]) - 1), 0)

        self._arrived = start   # a breakpoint on the current line does not stop it
        return self._run(done)

    def run_until(self, target):
        """Execute until the next record matches `target` (a sequence number, an instruction
        name or a predicate on the record) and stop before it; a match at the current record
        is stepped over first. Returns the matching record, or None at the end or where the
        core must wait (a SyncAll of the multi-core operator)."""
        if is_int(target):
            matches = lambda r: r.seq == target
        elif isinstance(target, str):
            names = sorted({r.name for r in self.records})
            if target not in names:
                raise InvalidArgumentError(
                    f"run_until: no instruction or event named {target!r} in this kernel (it "
                    f"has {', '.join(names)})" + _close_matches(target, names))
            matches = lambda r: r.name == target
        elif callable(target):
            matches = target
        else:
            raise InvalidArgumentError(f"run_until: expects a sequence number, a name or a "
                                       f"predicate, got {target!r}")
        self._check_not_blocked()
        if not self.finished and matches(self.next):
            self._execute_next()
        while not self.finished and not matches(self.next) and not self._blocked():
            self._execute_next()
        self._stop()
        return None if self.finished or not matches(self.next) else self.next

    def watch(self, start, end=None):
        """Stop `run` after an instruction that writes UB bytes [start, end) (or a tensor)."""
        if end is None:
            if not isinstance(start, LocalTensor):
                raise InvalidArgumentError(f"watch: expects a LocalTensor or a byte range "
                                           f"(start, end), got {start!r}")
            if start.core is not self.core:
                cores = {d.core: f"core {d.index}" for d in getattr(
                    getattr(self, "owner", None), "debuggers", ())}
                raise InvalidArgumentError(
                    f"watch: {start!r} is a tensor of another core "
                    f"({cores.get(start.core, repr(start.core))}), not of "
                    f"{cores.get(self.core, repr(self.core))}, which this debugger steps"
                    + ("; focus its core to watch it" if cores else ""))
            start, end = start.address, start.address + start.nbytes
        for value in (start, end):
            if not is_int(value):
                raise InvalidArgumentError(f"watch: byte addresses must be integers, got "
                                           f"{value!r}")
        if not 0 <= start < end <= self.core.ub.size:
            raise InvalidArgumentError(f"watch: [{start}, {end}) is not a byte range of the UB "
                                       f"(0 <= start < end <= {self.core.ub.size})")
        self.watchpoints.append((int(start), int(end)))

    def set_breakpoint(self, name):
        """Stop `run` and `step_over` before each instruction or event called `name`, or before
        the first record of each call of the kernel's function or API `name` (in the frame of
        the line that calls it, so step_over then runs the whole call and step goes into it)."""
        instructions, functions = self._names()
        if not isinstance(name, str) or name not in instructions | functions:
            close = _close_matches(name, instructions | functions) if isinstance(name, str) else ""
            raise InvalidArgumentError(
                f"break: no instruction, event or API named {name!r} in this kernel{close} (it "
                f"has {', '.join(sorted(instructions))}; it calls {', '.join(sorted(functions))})")
        self.breakpoints.add(name)

    def clear_breakpoint(self, name=None):
        """Delete the breakpoint on `name`, or every breakpoint (None)."""
        if name is None:
            self.breakpoints.clear()
        elif name in self.breakpoints:
            self.breakpoints.discard(name)
        else:
            raise InvalidArgumentError(
                f"clear: no breakpoint on {name!r}; the breakpoints are "
                f"{', '.join(sorted(self.breakpoints)) or 'none'}")

    def run(self):
        """Execute until a breakpoint (stops before the instruction, or before a call of the
        function), a watchpoint (stops after an instruction that writes the bytes), a record
        the core must wait at (a SyncAll of the multi-core operator; the reason says why) or
        the end. Returns (reason, record)."""
        return self._run(lambda: None)

    def _run(self, done):
        """Execute until done() names the frame to stop in ("next"), a breakpoint, a
        watchpoint, a record the core must wait at or the end. Waiting before anything ran
        raises WaitingAtSyncAll, unless a breakpoint is there."""
        ran = False
        while not self.finished:
            depth = done()
            if depth is not None:
                return self._stop("next", self.next, depth)
            depth = self._breakpoint_depth() if self.pc != self._arrived else None
            if depth is not None:
                return self._stop("breakpoint", self.next, depth)
            blocked = self._blocked()
            if blocked:
                if not ran:
                    raise WaitingAtSyncAll(blocked)
                return self._stop(blocked, self.next)
            record, ran = self._execute_next(), True
            for a, b in self.watchpoints if record.is_instruction else ():
                if _writes(record.row, a, b):
                    return self._stop(f"watchpoint [{a}, {b})", record)
        return self._stop("end", None)

    def _stop(self, reason=None, record=None, depth=None):
        """Stop at the next record, in frame `depth` (None: the innermost)."""
        self._arrived = self.pc
        innermost = len(self.where()) - 1
        self.depth = max(innermost if depth is None else depth, 0)
        return reason, record

    def _statement(self, pc, level):
        """What the frame at `level` does at record pc: issue it itself (pc), or run a call on
        one of its lines ((its call, the line, the callee's call))."""
        stack = self.stacks[pc]
        if len(stack) <= level + 1:
            return pc
        return stack[level].call, stack[level].line, stack[level + 1].call

    def _breakpoint_depth(self):
        """The frame to stop in when a breakpoint is at the next record: the innermost for an
        instruction name, the caller's for a call of a function named; None: no breakpoint."""
        if not self.breakpoints:
            return None
        stack = self.stacks[self.pc]
        if self.next.name in self.breakpoints:
            return len(stack) - 1
        first_new = _shared_calls(self.stacks[self.pc - 1], stack) if self.pc else 0
        for level in range(first_new, len(stack)):
            if stack[level].function in self.breakpoints:
                return level - 1
        return None

    def _names(self):
        """(instruction and event names, names of the functions the kernel calls)."""
        return ({r.name for r in self.records},
                {f.function for stack in self.stacks for f in stack[1:]})

    def _blocked(self):
        """Why the next record cannot execute yet (None: it can)."""
        return None

    def _check_not_blocked(self):
        """WaitingAtSyncAll, before anything runs, when not even the next record can."""
        blocked = self._blocked()
        if blocked:
            raise WaitingAtSyncAll(blocked)

    def _execute_next(self):
        record = self.records[self.pc]
        self.core.retire(record)
        self.pc += 1
        self.executed.append(record)
        return record


class WaitingAtSyncAll(LngbError):
    """The focused core has reached SyncAll and other cores have not."""


class OperatorDebugger:
    """Step through the multi-core operator (lngb.multicore) one core at a time.

    Each core's whole kernel is recorded (validated, nothing executed) and executed on demand by
    a per-core Debugger; `focus(c)` picks the core that `step`, `step_over`, `run_until`, `run`,
    `view` and the `tensors` act on (`debugger[c]` is core c's Debugger); the breakpoints are
    every core's. A core cannot pass SyncAll before every core has reached it: `step`,
    `step_over`, `run_until` and `run` stop there, and raise WaitingAtSyncAll, naming the cores
    to step, when the core is there already (nothing runs)."""

    def __init__(self, input_dy, res_for_gamma, *, product="atlas-a2", block_dim=None,
                 sat_mode=None):
        self._attach(prepare_operator(input_dy, res_for_gamma, product, block_dim, "fast",
                                      sat_mode))

    def _attach(self, run):
        """A core debugger per core of `run` (host.PreparedOperator or PreparedBackward)."""
        self.tiling, self._run = run.tiling, run
        kernels = [run.kernel(c) for c in range(len(run.cores))]  # recorded, never run live
        self._attach_cores(run.cores, run.gms,
                           [lambda k=k: list(k.Process()) for k in kernels],
                           [k.tensors for k in kernels])

    def _attach_cores(self, cores, gms, bodies, tensors, stacks=None):
        """A _CoreDebugger per core: body c (run on core c, GM gms[c]) recorded, its tensors
        tensors[c], the kernel stacks recorded into stacks[c] (default new _Stacks)."""
        self.debuggers, breakpoints = [], set()
        for c, core in enumerate(cores):
            dbg = _CoreDebugger.__new__(_CoreDebugger)
            dbg.owner, dbg.index = self, c
            dbg._start(core, bodies[c], gms[c], tensors[c], self.results,
                       stacks[c] if stacks else None)
            # the record after each SyncAll: the core passes it once every core has got there
            dbg.barriers = [i + 1 for i, r in enumerate(dbg.records) if r.name == "SyncAll"]
            dbg.breakpoints = breakpoints
            self.debuggers.append(dbg)
        self.focused = 0

    def __getitem__(self, c):
        return self.debuggers[c]

    def __getattr__(self, name):  # step, run_until, run, view, tensors, next... of the focus
        if name in ("debuggers", "focused"):
            raise AttributeError(name)
        return getattr(self.debuggers[self.focused], name)

    def focus(self, c):
        if not is_int(c) or not 0 <= c < len(self.debuggers):
            raise InvalidArgumentError(f"focus: core {c!r} outside 0 ~ {len(self.debuggers) - 1}")
        self.focused = int(c)
        return self.debuggers[self.focused]

    def results(self):
        """(pd_gamma, pd_beta) (BackwardDebugger: (pd_x, pd_gamma, pd_beta)), once every core has
        run to the end."""
        if not self.finished:
            behind = [d.index for d in self.debuggers if not d.finished]
            raise InvalidArgumentError(f"results: cores {behind} have not run to the end; the "
                                       "outputs are in GM only then (run_all())")
        return tuple(a.copy() for a in self._run.results())

    @property
    def finished(self):
        return all(d.finished for d in self.debuggers)

    def run_all(self):
        """Execute every core to the end, SyncAll by SyncAll."""
        while not self.finished:
            for d in self.debuggers:
                while not d.finished and not d._blocked():
                    d._execute_next()


class BackwardDebugger(OperatorDebugger):
    """OperatorDebugger for `lngb.emulate_layer_norm_backward` (same arguments, mode aside):
    each core's LayerNormGrad and LayerNormGradBeta, instruction by instruction, with the same
    focus, SyncAll and breakpoint rules; `results()` gives (pd_x, pd_gamma, pd_beta)."""

    def __init__(self, input_dy, input_x, input_variance, input_mean, input_gamma, *,
                 epsilon=1e-5, product="atlas-a2", block_dim=None, tile_rows=None,
                 sat_mode=None, div_sqrt=None):
        self._attach(prepare_backward((input_dy, input_x, input_variance, input_mean,
                                       input_gamma), epsilon, product, block_dim, tile_rows,
                                      "fast", sat_mode, api="BackwardDebugger",
                                      div_sqrt=div_sqrt))


class KernelDebugger(OperatorDebugger):
    """Step a user's kernel, as `lngb.simulate_kernel(kernel, *inputs, outputs=...,
    block_dim=..., product=..., mode=...)` runs it, with OperatorDebugger's methods (`focus`,
    `step`, `step_over`, `run_until`, `run`, `watch`, `view`, breakpoints) and rules: each
    core's kernel is recorded (validated, nothing executed), then executed on demand; a core
    passes its n-th SyncAll once every core has reached theirs. `tensors` (and `view`,
    `watch`, the shell's `p`) name the kernel's LocalTensor variables at the next record.
    `results()` is the list of outputs once every core has run to the end. mode "observed"
    (a trace) or "checked" (the sanitizer checks each record as it executes).

    The kernel must record: its instructions may not depend on UB values (a GetValue used in
    Python) and it may use at most four GM tensors, as fast mode's replay needs; cores that
    call SyncAll a different number of times are a HazardError at once."""

    def __init__(self, kernel, *inputs, outputs, block_dim=1, product="atlas-a2",
                 mode="observed", div_sqrt=None):
        api = "KernelDebugger"
        if mode not in ("observed", "checked"):
            raise InvalidArgumentError(f"{api}: mode must be 'observed' or 'checked', got "
                                       f"{mode!r}")
        run = prepare_kernel(api, kernel, inputs, outputs, product, block_dim, mode, div_sqrt)
        self._outputs = run.outputs
        if len(run.gms) > GM_SLOTS:
            raise InvalidArgumentError(f"{api}: the kernel has {len(run.gms)} GM tensors; the "
                                       f"debugger records kernels of at most {GM_SLOTS}")
        count = len(run.cores)
        stacks = [_Stacks(local_tensors=True) for _ in range(count)]
        try:
            self._attach_cores(run.cores, [run.gms] * count,
                               [run.body(c) for c in range(count)],
                               [_Locals(stacks[c]) for c in range(count)], stacks)
        except ScalarAccess:
            raise InvalidArgumentError(
                f"{api}: the kernel uses a GetValue's value in Python (or SetValue), so its "
                "instructions depend on UB data and cannot be recorded ahead; step it with pdb "
                "in simulate_kernel(..., mode='observed') instead") from None
        for dbg in self.debuggers:
            dbg.tensors.debugger = dbg
        syncs = [len(d.barriers) for d in self.debuggers]
        if len(set(syncs)) > 1:
            reached = ", ".join(f"core {c}: {n}" for c, n in enumerate(syncs))
            raise HazardError(f"{api}: the cores call SyncAll a different number of times "
                              f"({reached}): a SyncAll cannot complete")

    def results(self):
        """The outputs (copies, in the order given), once every core has run to the end."""
        if not self.finished:
            behind = [d.index for d in self.debuggers if not d.finished]
            raise InvalidArgumentError(f"results: cores {behind} have not run to the end; the "
                                       "outputs are in GM only then (run_all())")
        return [a.copy() for a in self._outputs]

    def finished_text(self):
        return "finished: " + " ".join(f"output{k}={np.array2string(a.reshape(-1), threshold=16)}"
                                       for k, a in enumerate(self.results()))


class _Locals(Mapping):
    """The kernel's LocalTensor variables at a core debugger's next record (its last at the
    end), by name: `tensors` of KernelDebugger's cores."""

    def __init__(self, stacks):
        self.stacks, self.debugger = stacks, None

    def _now(self):
        tensors = self.stacks.local_tensors
        return tensors[min(self.debugger.pc, len(tensors) - 1)] if tensors else {}

    def __getitem__(self, name):
        return self._now()[name]

    def __iter__(self):
        return iter(self._now())

    def __len__(self):
        return len(self._now())


def _close_matches(word, words):
    close = difflib.get_close_matches(word, sorted(words), n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


class _CoreDebugger(Debugger):
    def _blocked(self):
        if self.pc in self.barriers:   # just past its n-th SyncAll: the others must be too
            n = self.barriers.index(self.pc)
            behind = [d.index for d in self.owner.debuggers if d.pc < d.barriers[n]]
            if behind:
                return (f"core {self.index} waits at SyncAll for cores {behind}: focus them and "
                        "step them there first")
        return None

    def _names(self):  # every core's
        names = [Debugger._names(d) for d in self.owner.debuggers]
        return set().union(*(n[0] for n in names)), set().union(*(n[1] for n in names))


def _writes(row, start, end):
    """Whether an instruction row writes any UB byte in [start, end)."""
    read, written, lo, hi = footprint_flags(row)
    hit = bool(written[start:end].any())
    clear_footprint(read, written, lo, hi)
    return hit


# --- the command loop ---------------------------------------------------------------------------

def _whole(command, what, text, low=0):
    """`text` as an integer >= low, or a one-line error naming the argument."""
    if not re.fullmatch(r"[+-]?\d+", text) or int(text) < low:
        raise InvalidArgumentError(f"{command}: {what} must be a whole number >= {low}, got "
                                   f"{text!r}")
    return int(text)


def _no_argument(command, arg):
    if arg.strip():
        raise InvalidArgumentError(f"{command} takes no argument, got {arg.strip()!r}")


PRINTED = re.compile(r"(\w+)\s*(?:\[([^\]]*)\])?")
REGISTERS = ("mask", "flags")


class DebugShell(cmd.Cmd):
    """The `lngb debug` command loop, with pdb's commands and names: s(tep), n(ext),
    c(ontinue), unt(il), b(reak), cl(ear), p(rint), l(ist), w(here), q(uit); and ub, watch,
    mask, trace, tensors, focus."""

    prompt = "(lngb) "

    def __init__(self, debugger, stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        if stdin is not None:  # commands from a file: echo each one instead of a prompt
            self.use_rawinput, self.prompt = False, ""
        self.dbg = debugger
        self.intro = "\n".join([f"lngb debug: {len(debugger.records)} instructions and events "
                                "recorded; help lists the commands"] + self._position())

    def say(self, text):
        self.stdout.write(text + "\n")

    def show(self, records):
        for record in records:
            self.say(format_record(record))

    # --- moving -----------------------------------------------------------------------------
    def do_step(self, arg):
        """s(tep) [n]: execute the next n instructions or events (default 1), into any call;
        shows them, then where the kernel is."""
        self.show(self.dbg.step(_whole("step", "n", arg) if arg.strip() else 1))
        self._report()

    do_s = do_step

    def do_next(self, arg):
        """n(ext): execute the current line: its instruction, or the whole call it makes (a
        LayerNormGradBeta line: every instruction of it); stops early at a breakpoint or
        watchpoint."""
        _no_argument("next", arg)
        before = len(self.dbg.executed)
        reason, record = self.dbg.step_over()
        ran = self.dbg.executed[before:]
        if len(ran) == 1:
            self.show(ran)
        elif ran:
            self.say(f"ran #{ran[0].seq} {ran[0].name} ~ #{ran[-1].seq} {ran[-1].name} "
                     f"({len(ran)} records)")
        self._report(reason, record)

    do_n = do_next

    def do_continue(self, arg):
        """c(ontinue) | run: execute until a breakpoint, a watchpoint or the end."""
        _no_argument("continue", arg)
        self._report(*self.dbg.run())

    do_c = do_cont = do_run = do_continue

    def do_until(self, arg):
        """unt(il) <seq | name>: execute until the next record has that sequence number or
        instruction name (a match at the current record is executed first)."""
        if not arg.strip():
            raise InvalidArgumentError("until: needs a sequence number or an instruction name "
                                       "(until 12, until Mul)")
        arg = arg.strip()
        self.dbg.run_until(_whole("until", "a sequence number", arg, 1)
                           if arg[0] in "+-0123456789" else arg)
        self._report()

    do_unt = do_until

    def do_break(self, arg):
        """b(reak) [name]: stop before every instruction or event of that name, or before each
        call of that API or function (at its caller's line); no argument: list them."""
        if arg.strip():
            self.dbg.set_breakpoint(_one_word("break", arg))
        self.say("breakpoints: " + (", ".join(sorted(self.dbg.breakpoints)) or "none"))

    do_b = do_break

    def do_clear(self, arg):
        """cl(ear) [name]: delete the breakpoint on name; no argument: delete them all."""
        self.dbg.clear_breakpoint(_one_word("clear", arg) if arg.strip() else None)
        self.say("breakpoints: " + (", ".join(sorted(self.dbg.breakpoints)) or "none"))

    do_cl = do_clear

    def do_watch(self, arg):
        """watch <tensor> | watch <start> <end>: stop `continue` after an instruction that
        writes those UB bytes."""
        parts = arg.split()
        if len(parts) == 1:
            self.dbg.view(parts[0])   # names the tensors when it is not one
            self.dbg.watch(self.dbg.tensors[parts[0]])
        elif len(parts) == 2:
            self.dbg.watch(_whole("watch", "start", parts[0]), _whole("watch", "end", parts[1]))
        else:
            raise InvalidArgumentError("usage: watch <tensor> | watch <start> <end> (UB bytes)")
        self.say("watchpoints: " + ", ".join(f"[{a}, {b})" for a, b in self.dbg.watchpoints))

    def do_focus(self, arg):
        """focus <core>: step core <core> of the multi-core operator (lngb debug --block-dim)."""
        if not hasattr(self.dbg, "focus"):
            raise InvalidArgumentError("focus needs the multi-core operator (lngb debug "
                                       "--block-dim N)")
        self.dbg.focus(_whole("focus", "core", arg.strip()))
        self.say(f"core {self.dbg.focused}: next #{self.dbg.next.seq} {self.dbg.next.name}"
                 if self.dbg.next else f"core {self.dbg.focused}: at the end")

    # --- looking ----------------------------------------------------------------------------
    def do_where(self, arg):
        """w(here): the kernel's frames at the next record (> marks the one `next` steps
        in), then that record."""
        _no_argument("where", arg)
        frames = self.dbg.where()
        if not frames:
            return self._report()
        for i, frame in enumerate(frames):
            self.say(f"{'>' if i == self.dbg.depth else ' '} {_frame_line(frame)}")
            self.say(f"-> {_source(frame)}")
        self.show([self.dbg.next])

    do_w = do_bt = do_where

    def do_list(self, arg):
        """l(ist) [line]: the source around the current line (or around that line of its
        file); -> marks the current line."""
        frames = self.dbg.where()
        if not frames:
            raise InvalidArgumentError("list: no current line (the kernel has run to the end, "
                                       "or this record comes from no kernel source)")
        frame = frames[self.dbg.depth]
        centre = _whole("list", "line", arg.strip(), 1) if arg.strip() else frame.line
        lines = linecache.getlines(frame.path)
        if centre > len(lines):
            raise InvalidArgumentError(f"list: {frame.file} has {len(lines)} lines, not {centre}")
        for n in range(max(centre - 5, 1), min(centre + 5, len(lines)) + 1):
            self.say(f"{n:4d} {'->' if n == frame.line else '  '} {lines[n - 1]}".rstrip())

    do_l = do_list

    def do_print(self, arg):
        """p(rint) <tensor>[i] | <tensor>[start:stop] | mask | flags: a tensor's elements (by
        the names `tensors` lists) or a register, now."""
        match = PRINTED.fullmatch(arg.strip())
        if not match:
            raise InvalidArgumentError(f"usage: p <tensor>, p <tensor>[i], p <tensor>[start:stop], "
                                       f"p mask or p flags; got {arg.strip()!r}")
        name, index = match.groups()
        if name in REGISTERS and name not in self.dbg.tensors and index is None:
            return self.say(self._mask() if name == "mask" else self._flags())
        if name not in self.dbg.tensors:
            raise InvalidArgumentError(
                f"print: no tensor or register named {name!r}; the tensors are "
                f"{', '.join(self.dbg.tensors)}, the registers {', '.join(REGISTERS)}"
                + _close_matches(name, [*self.dbg.tensors, *REGISTERS]))
        values = self.dbg.view(name).reshape(-1)
        if index is not None:
            values = values[_index(name, index, values.size)]
        self.say(np.array2string(np.asarray(values), threshold=64))

    do_p = do_print

    def do_ub(self, arg):
        """ub <tensor> | ub <address> <count> [f32|f16|u8|i32]: show UB contents now."""
        parts = arg.split()
        if len(parts) == 1:
            return self.say(np.array2string(self.dbg.view(parts[0]).reshape(-1), threshold=64))
        if len(parts) not in (2, 3):
            raise InvalidArgumentError("usage: ub <tensor> | ub <address> <count> "
                                       "[f32|f16|u8|i32]")
        name = parts[2] if len(parts) == 3 else "f32"
        if name not in DTYPES:
            raise InvalidArgumentError(f"ub: the type must be one of {', '.join(DTYPES)}, got "
                                       f"{name!r}")
        dtype = np.dtype(DTYPES[name])
        start, count = _whole("ub", "address", parts[0]), _whole("ub", "count", parts[1], 1)
        if start + count * dtype.itemsize > self.dbg.core.ub.size:
            raise InvalidArgumentError(f"ub: {count} x {name} at {start} is not inside the UB "
                                       f"({self.dbg.core.ub.size} bytes)")
        values = self.dbg.core.ub[start:start + count * dtype.itemsize].view(dtype)
        self.say(np.array2string(values, threshold=64))

    def do_mask(self, arg):
        """mask: the mask register's mode and words now (as p mask)."""
        _no_argument("mask", arg)
        self.say(self._mask())

    def do_trace(self, arg):
        """trace [n]: the last n executed records (default 10)."""
        self.show(self.dbg.executed[-(_whole("trace", "n", arg.strip(), 1) if arg.strip()
                                      else 10):])

    def do_tensors(self, arg):
        """tensors: the kernel's LocalTensors."""
        _no_argument("tensors", arg)
        for name, t in self.dbg.tensors.items():
            self.say(f"{name:16} UB@{t.address:<7} {t.size} x {t.dtype.name} ({t.position})")

    def do_quit(self, arg):
        """q(uit): leave the debugger."""
        return True

    do_q = do_exit = do_EOF = do_quit

    # --- the loop ---------------------------------------------------------------------------
    def do_help(self, arg):
        """help [command]: the commands, or what one does."""
        method = getattr(self, "do_" + arg.strip(), None) if arg.strip() else None
        if method is None or method.__doc__ is None:
            return super().do_help(arg)
        self.say(inspect.cleandoc(method.__doc__))

    def default(self, line):
        word = line.split()[0]
        commands = [name[3:] for name in self.get_names() if name.startswith("do_")]
        self.say(f"unknown command {word!r}; try help" + _close_matches(word, commands))

    def emptyline(self):
        pass

    def onecmd(self, line):
        if line.lstrip().startswith("#"):
            return None  # a comment in a commands file
        if self.use_rawinput is False and line.strip() and line != "EOF":
            self.say(f"(lngb) {line.rstrip()}")
        try:
            return super().onecmd(line)
        except LngbError as err:
            self.say(f"error: {err}")

    def _report(self, reason=None, record=None):
        """After a move: why it stopped early, then where the kernel is (or its results)."""
        if reason in (None, "next") and self.dbg.next is not None:
            reason, record = self.dbg._blocked(), self.dbg.next
        if reason not in (None, "next", "end"):
            where = "after" if reason.startswith("watchpoint") else "at"
            self.say(f"stopped ({reason}) {where} #{record.seq} {record.name}")
        for line in self._position():
            self.say(line)

    def _position(self):
        """Where the kernel is: the current frame's line and the next record; at the end, the
        results."""
        if self.dbg.next is None:
            if not self.dbg.finished:   # this core of the multi-core operator
                return [f"core {self.dbg.focused} reached the end; focus another core"]
            return [self.dbg.finished_text()]
        record, frames = self.dbg.next, self.dbg.where()
        if not frames:
            return [f"> next #{record.seq} {record.name} ({record.source})"]
        frame = frames[self.dbg.depth]
        return [f"> {_frame_line(frame)}, next #{record.seq} {record.name}",
                f"-> {_source(frame)}"]

    def _mask(self):
        mode, high, low = self.dbg.mask
        return f"mode={MaskMode(mode).name} mask_high={high:#x} mask_low={low:#x}"

    def _flags(self):
        flags = self.dbg.core.flags   # {(HardEvent, id): SetFlags not yet waited for}
        return "flags: " + (", ".join(f"{event.name} id {i} set {n}x"
                                      for (event, i), n in flags.items()) or "none set")


def _one_word(command, arg):
    words = arg.split()
    if len(words) != 1:
        raise InvalidArgumentError(f"{command} takes one name, got {arg.strip()!r}")
    return words[0]


def _index(name, text, size):
    """A tensor index `i` or slice `start:stop` (element offsets, negative from the end)."""
    parts = [p.strip() for p in text.split(":")]
    if len(parts) > 2 or not all(re.fullmatch(r"[+-]?\d*", p) for p in parts) or \
            (len(parts) == 1 and not parts[0]):
        raise InvalidArgumentError(f"print: {name}[{text}] is not an element index i or a "
                                   "slice start:stop")
    bounds = [int(p) if p else None for p in parts]
    if len(bounds) == 2:
        return slice(*bounds)
    if not -size <= bounds[0] < size:
        raise InvalidArgumentError(f"print: index {bounds[0]} is outside {name}'s {size} "
                                   "elements")
    return bounds[0]


def _frame_line(frame):
    return f"{frame.file}({frame.line}){frame.function}()"


def _source(frame):
    return linecache.getline(frame.path, frame.line).strip()
