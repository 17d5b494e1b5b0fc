"""Step through the sample kernel one instruction or event at a time.

The kernel is recorded once (a dry run that validates everything and executes nothing); the
debugger then executes the recorded rows one by one on the core, so the UB, the mask register
and the trace can be inspected between any two instructions. `lngb debug` wraps it in a small
command loop (step, until, break, watch, run, ub, mask, trace, next, tensors, quit) that can read
its commands from a file.
"""
import cmd
import difflib
import shlex

import numpy as np

from ..arguments import is_int
from ..errors import InvalidArgumentError, LngbError
from ..host import prepare_operator, sample_kernel
from ..record import clear_footprint, footprint_flags
from ..tensor import LocalTensor
from ..vector_ops.types import MaskMode
from .trace import format_record

DTYPES = {"f32": np.float32, "f16": np.float16, "u8": np.uint8, "i32": np.int32}


class Debugger:
    """A recorded run of the sample kernel, executed on demand.

    `records[pc]` is the next instruction or event; `step`, `run_until` and `run` execute them,
    `breakpoints` (instruction names) and `watchpoints` (UB byte ranges) stop `run`."""

    def __init__(self, input_dy, res_for_gamma, **emulate_options):
        kernel, _, pd_gamma, pd_beta = sample_kernel(input_dy, res_for_gamma, **emulate_options)
        self._start(kernel.core, kernel, kernel.gms, kernel.tensors,
                    lambda: (pd_gamma.copy(), pd_beta.copy()))

    def _start(self, core, body, gms, tensors, results):
        self.core, self.gms, self.tensors, self._results = core, gms, tensors, results
        program = core.record(body, gms)
        core.bind_gms(gms)
        self.rows, self.records, self.pc = program.rows, program.records, 0
        self.executed = []
        self.breakpoints, self.watchpoints = set(), []
        self._stopped_at_breakpoint = None

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

    def step(self, n=1):
        """Execute the next n records, or fewer at the end or where the core must wait (a
        SyncAll of the multi-core operator); returns those executed."""
        if not is_int(n) or n < 0:
            raise InvalidArgumentError(f"step: n must be a whole number >= 0, got {n!r}")
        if n:
            self._check_not_blocked()
        done = []
        for _ in range(n):
            if self.finished or self._blocked():
                break
            done.append(self._execute_next())
        return done

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
        while not self.finished:
            if matches(self.next):
                return self.next
            if self._blocked():
                return None
            self._execute_next()
        return None

    def watch(self, start, end=None):
        """Stop `run` after an instruction that writes UB bytes [start, end) (or a tensor)."""
        if end is None:
            if not isinstance(start, LocalTensor):
                raise InvalidArgumentError(f"watch: expects a LocalTensor or a byte range "
                                           f"(start, end), got {start!r}")
            start, end = start.address, start.address + start.nbytes
        for value in (start, end):
            if not is_int(value):
                raise InvalidArgumentError(f"watch: byte addresses must be integers, got "
                                           f"{value!r}")
        if not 0 <= start < end <= self.core.ub.size:
            raise InvalidArgumentError(f"watch: [{start}, {end}) is not a byte range of the UB "
                                       f"(0 <= start < end <= {self.core.ub.size})")
        self.watchpoints.append((int(start), int(end)))

    def run(self):
        """Execute until a breakpoint (stops before the instruction), a watchpoint (stops after
        an instruction that writes the bytes), a record the core must wait at (a SyncAll of the
        multi-core operator; the reason says why) or the end. Returns (reason, record)."""
        self._check_not_blocked()
        while not self.finished:
            if (self.next.name in self.breakpoints
                    and self._stopped_at_breakpoint != self.pc):
                self._stopped_at_breakpoint = self.pc
                return "breakpoint", self.next
            blocked = self._blocked()
            if blocked:
                return blocked, self.next
            record = self._execute_next()
            if self.watchpoints and record.is_instruction:
                for a, b in self.watchpoints:
                    if _writes(record.row, a, b):
                        return f"watchpoint [{a}, {b})", record
        return "end", None

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
    a per-core Debugger; `focus(c)` picks the core that `step`, `run_until`, `run`, `view` and
    the `tensors` act on (`debugger[c]` is core c's Debugger). A core cannot pass SyncAll before
    every core has reached it: `step`, `run_until` and `run` stop there, and raise
    WaitingAtSyncAll, naming the cores to step, when the core is there already (nothing runs)."""

    def __init__(self, input_dy, res_for_gamma, *, product="atlas-a2", block_dim=None,
                 sat_mode=None):
        run = prepare_operator(input_dy, res_for_gamma, product, block_dim, "fast", sat_mode)
        self.tiling, self.output = run.tiling, run.output
        self.debuggers = []
        for c, (core, gms) in enumerate(zip(run.cores, run.gms)):
            kernel = run.kernel(c)  # recorded below, never run live
            dbg = _CoreDebugger.__new__(_CoreDebugger)
            dbg.owner, dbg.index = self, c
            dbg._start(core, lambda k=kernel: list(k.Process()), gms, kernel.tensors,
                       self.results)
            dbg.barrier = 1 + next(i for i, r in enumerate(dbg.records) if r.name == "SyncAll")
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
        """(pd_gamma, pd_beta), once every core has run to the end."""
        if not self.finished:
            behind = [d.index for d in self.debuggers if not d.finished]
            raise InvalidArgumentError(f"results: cores {behind} have not run to the end; the "
                                       "outputs are in GM only then (run_all())")
        out = self.output.view(np.dtype(self.tiling.dtype))
        return out[:self.tiling.h].copy(), out[self.tiling.h:].copy()

    @property
    def finished(self):
        return all(d.finished for d in self.debuggers)

    def run_all(self):
        """Execute every core to the end, phase by phase."""
        for phase in ("barrier", "end"):
            for d in self.debuggers:
                while not d.finished and (phase == "end" or d.pc < d.barrier):
                    d._execute_next()


def _close_matches(word, words):
    close = difflib.get_close_matches(word, list(words), n=3)
    return f"; did you mean {' or '.join(close)}?" if close else ""


class _CoreDebugger(Debugger):
    def _blocked(self):
        if self.pc == self.barrier:
            behind = [d.index for d in self.owner.debuggers if d.pc < d.barrier]
            if behind:
                return (f"core {self.index} waits at SyncAll for cores {behind}: focus them and "
                        "step them there first")
        return None


def _writes(row, start, end):
    """Whether an instruction row writes any UB byte in [start, end)."""
    read, written, lo, hi = footprint_flags(row)
    hit = bool(written[start:end].any())
    clear_footprint(read, written, lo, hi)
    return hit


class DebugShell(cmd.Cmd):
    """The `lngb debug` command loop."""

    intro = ("lngb debug: step, until, break, watch, run, ub, mask, trace, next, tensors, focus, "
             "quit")
    prompt = "(lngb) "

    def __init__(self, debugger, stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        if stdin is not None:  # commands from a file: echo each one instead of a prompt
            self.use_rawinput, self.prompt = False, ""
        self.dbg = debugger

    def say(self, text):
        self.stdout.write(text + "\n")

    def show(self, records):
        for record in records:
            self.say(format_record(record))

    def do_step(self, arg):
        """step [n]: execute the next n instructions or events (default 1)."""
        self.show(self.dbg.step(int(arg) if arg else 1))
        if self.dbg._blocked():
            self.say(f"stopped: {self.dbg._blocked()}")
        self._at_end()

    do_s = do_step

    def do_until(self, arg):
        """until <seq | name>: execute until the next record has that sequence number or name."""
        if not arg:
            raise ValueError("until needs a sequence number or an instruction name")
        record = self.dbg.run_until(int(arg) if arg.isdigit() else arg)
        if record:
            self.say(f"at #{record.seq} {record.name}")
        else:
            self.say("reached the end (no match)" if self.dbg.finished else
                     f"stopped before #{self.dbg.next.seq}: {self.dbg._blocked()}")

    def do_break(self, arg):
        """break <name>: stop `run` before every instruction of that name; no argument: list."""
        if arg:
            self.dbg.breakpoints.add(arg)
        self.say("breakpoints: " + (", ".join(sorted(self.dbg.breakpoints)) or "none"))

    def do_watch(self, arg):
        """watch <tensor> | watch <start> <end>: stop `run` when those UB bytes change."""
        parts = arg.split()
        if len(parts) == 1:
            self.dbg.watch(self.dbg.tensors[parts[0]])
        else:
            self.dbg.watch(int(parts[0]), int(parts[1]))
        self.say("watchpoints: " + ", ".join(f"[{a}, {b})" for a, b in self.dbg.watchpoints))

    def do_run(self, arg):
        """run: execute until a breakpoint, a watchpoint or the end."""
        reason, record = self.dbg.run()
        if record is None:
            self.say("reached the end")
            self._at_end()
        else:
            self.say(f"stopped ({reason}) at #{record.seq} {record.name} ({record.source})")

    do_c = do_continue = do_run

    def do_next(self, arg):
        """next: show the record the next step executes."""
        record = self.dbg.next
        self.show([record]) if record else self.say("reached the end")

    def do_ub(self, arg):
        """ub <tensor> | ub <address> <count> [f32|f16|u8|i32]: show UB contents now."""
        parts = shlex.split(arg)
        if len(parts) == 1:
            values = self.dbg.view(parts[0])
        else:
            dtype = np.dtype(DTYPES[parts[2] if len(parts) > 2 else "f32"])
            start, count = int(parts[0]), int(parts[1])
            if start < 0 or count <= 0 or start + count * dtype.itemsize > self.dbg.core.ub.size:
                raise ValueError(f"ub: {count} x {dtype.name} at {start} is not inside the UB")
            values = self.dbg.core.ub[start:start + count * dtype.itemsize].view(dtype)
        self.say(np.array2string(np.asarray(values).reshape(-1), threshold=64))

    def do_mask(self, arg):
        """mask: the mask register's mode and words now."""
        mode, high, low = self.dbg.mask
        self.say(f"mode={MaskMode(mode).name} mask_high={high:#x} mask_low={low:#x}")

    def do_trace(self, arg):
        """trace [n]: the last n executed records (default 10)."""
        n = int(arg) if arg else 10
        if n <= 0:
            raise ValueError("trace takes a positive count")
        self.show(self.dbg.executed[-n:])

    def do_tensors(self, arg):
        """tensors: the kernel's LocalTensors."""
        for name, t in self.dbg.tensors.items():
            self.say(f"{name:16} UB@{t.address:<7} {t.size} x {t.dtype.name} ({t.position})")

    def do_focus(self, arg):
        """focus <core>: step core <core> of the multi-core operator (lngb debug --block-dim)."""
        if not hasattr(self.dbg, "focus"):
            raise ValueError("focus needs the multi-core operator (lngb debug --block-dim N)")
        self.dbg.focus(int(arg))
        self.say(f"core {self.dbg.focused}: next #{self.dbg.next.seq} {self.dbg.next.name}"
                 if self.dbg.next else f"core {self.dbg.focused}: at the end")

    def do_quit(self, arg):
        """quit: leave the debugger."""
        return True

    do_q = do_exit = do_EOF = do_quit

    def default(self, line):
        self.say(f"unknown command {line.split()[0]!r}; try help")

    def emptyline(self):
        pass

    def onecmd(self, line):
        if line.lstrip().startswith("#"):
            return None  # a comment in a commands file
        if self.use_rawinput is False and line.strip() and line != "EOF":
            self.say(f"(lngb) {line.rstrip()}")
        try:
            return super().onecmd(line)
        except (ValueError, KeyError, IndexError, LngbError) as err:
            self.say(f"error: {err}")

    def _at_end(self):
        if self.dbg.finished:
            gamma, beta = self.dbg.results()
            self.say(f"finished: pdGamma={np.array2string(gamma, threshold=16)} "
                     f"pdBeta={np.array2string(beta, threshold=16)}")
