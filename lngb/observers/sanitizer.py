"""mode="checked": shadow memory of initialised UB bytes and V-pipe hazards, an observer of the
core (lngb.core).

Before an instruction executes, its exact read and write bytes (vector_ops.footprint, the same
walk as the kernels) are checked: reading a byte nothing has written raises
UninitializedReadError; on A2/A3/310P, touching bytes another vector instruction wrote or read
since the last PipeBarrier(PIPE_V) raises HazardError (the 950 orders V after V in hardware).
Nothing executes when a check fails. The check of a recorded program from a pristine core is
kept (in the shared cache) and reused by later pristine runs of it.
"""
import threading
import weakref

import numpy as np

from ..errors import HazardError, UninitializedReadError
from ..runtime.cache import Cache
from ..vector_ops.footprint import footprint
from ..vector_ops.program import DST, EVENT, KIND, OP, SRC0, SRC1
from ..vector_ops.table import TABLE
from ..vector_ops.types import HardEvent, Pipe

OPCODES = {name: TABLE[name].opcode for name in ("PipeBarrier", "SyncAll", "Undefine", "SetFlag",
                                                  "WaitFlag", "GetValue", "SetValue")}
BARRIERS = (OPCODES["PipeBarrier"], OPCODES["SyncAll"])
CHECKS = Cache("sanitizer checks")


_SCRATCH = threading.local()


def _scratch(size):
    """Zeroed uint8 read/written flag arrays, shared by the sanitizers of a thread: taken out
    while a check uses them, given back (_SCRATCH.pair) once it has zeroed what it set, so a
    check stopped halfway (Ctrl-C) leaves no set flags to the next one."""
    pair = vars(_SCRATCH).pop("pair", None)
    if pair is None or pair[0].size != size:
        pair = (np.zeros(size, np.uint8), np.zeros(size, np.uint8))
    return pair


def _first_run(mask, offset):
    """[start, end) of the first run of set entries, as UB byte addresses."""
    start = int(np.argmax(mask))
    rest = mask[start:]
    length = rest.size if rest.all() else int(np.argmin(rest))
    return offset + start, offset + start + length


class Sanitizer:
    """The checked-mode observer of one core."""

    role = "sanitizer"

    def __init__(self, core):
        self.core = weakref.proxy(core)  # no cycle: the core is freed as soon as it is unused
        size = core.ub.size  # the UB bytes, registers included
        # the Ascend 950 orders V after V in hardware: no V hazards to find there
        self.orders_v = core.product.kernel_path == "regbase"
        self.initialised = np.zeros(size, dtype=bool)
        self._seqs = None  # last V instruction writing / reading each byte, made on first use
        self.last_v_barrier = 0
        self.last_v_seq = 0          # the last vector instruction checked
        self.v_done_known = {}       # pipe -> the last V instruction it knows has completed
        self.flag_payloads = {}      # (src, dst, id) -> v_done_known carried by pending SetFlags
        self.pristine = True  # nothing checked or written yet: a recorded check may be reused
        self._bounds = np.zeros(2, dtype=np.int64)

    @property
    def v_write_seq(self):
        return self._seq_arrays()[0]

    @property
    def v_read_seq(self):
        return self._seq_arrays()[1]

    def _seq_arrays(self):
        if self._seqs is None:
            size = self.initialised.size
            self._seqs = (np.zeros(size, dtype=np.int32), np.zeros(size, dtype=np.int32))
        return self._seqs

    def snapshot(self):
        """The state that matters for later checks: initialised bytes, and the V reads and
        writes since the last barrier (older ones can no longer clash)."""
        recent = [np.flatnonzero(a > self.last_v_barrier) for a in (self.v_write_seq,
                                                                    self.v_read_seq)]
        return (self.initialised.copy(), [(i, a[i]) for i, a in
                                                zip(recent, (self.v_write_seq, self.v_read_seq))],
                self.last_v_barrier, self.pristine, self.last_v_seq, dict(self.v_done_known),
                {k: list(v) for k, v in self.flag_payloads.items()})

    def restore(self, state):
        was_pristine = self.pristine
        (initialised, recent, self.last_v_barrier, self.pristine, self.last_v_seq, known,
         payloads) = state
        self.v_done_known = dict(known)
        self.flag_payloads = {k: list(v) for k, v in payloads.items()}
        self.initialised = initialised.copy()
        if not was_pristine:
            self._seqs = None
        for which, (index, values) in enumerate(recent):
            if index.size:
                self._seq_arrays()[which][index] = values

    # --- the observer protocol ----------------------------------------------------------------
    @property
    def replays(self):
        """A program's check is reused only from the pristine state it was made from."""
        return self.pristine

    def host_write(self, start, nbytes):
        self.pristine = False
        self.initialised[start:start + nbytes] = True

    def check(self, record):
        self.check_record(record, record.seq)

    def check_program(self, program):
        """Sanitize a program on a pristine core; the outcome is reused by later pristine runs.
        A program that leaves SetFlags nobody waits for is a hazard."""
        checked = CHECKS.get(program.key) if program.key is not None else None
        if checked is None:
            start = self.snapshot()
            try:
                for record in program.records:
                    self.check_record(record, record.seq)
            except Exception:
                self.restore(start)
                raise
            checked = self.snapshot()
            if program.key is not None:
                CHECKS.put(program.key, checked, _snapshot_bytes(checked))
        else:
            self.restore(checked)
        flags = self.core.flags
        left = {(HardEvent[e], i): n - flags.get((HardEvent[e], i), 0)
                for (e, i), n in program.end_state[4]}
        self.finish({k: n for k, n in left.items() if n > 0})

    def retire_program(self, program):
        pass

    # --- checks -------------------------------------------------------------------------------
    def check_record(self, record, seq):
        """Check one instruction or event before it executes, then update the shadow state."""
        self.pristine = False
        row = record.row
        op = row[OP]
        if op in BARRIERS:
            if op == OPCODES["SyncAll"] or row[DST] in (Pipe.PIPE_V, Pipe.PIPE_ALL):
                self.last_v_barrier = seq
            return
        if op == OPCODES["Undefine"]:
            self.initialised[row[DST]:row[DST] + row[SRC0]] = False
            return
        if op == OPCODES["GetValue"]:
            address, size = row[DST], row[SRC0]
            if not self.initialised[address:address + size].all():
                raise UninitializedReadError(
                    f"#{seq} GetValue ({record.source}) reads UB bytes [{address}, "
                    f"{address + size}) that nothing has written")
            return
        if op == OPCODES["SetValue"]:
            self.initialised[row[DST]:row[DST] + row[SRC0]] = True
            return
        if op == OPCODES["SetFlag"]:  # carries how far V is known complete to the waiting pipe
            src = row[DST]
            known = self.last_v_seq if src == Pipe.PIPE_V else self.v_done_known.get(src, 0)
            self.flag_payloads.setdefault((row[DST], row[SRC0], row[SRC1]), []).append(known)
            return
        if op == OPCODES["WaitFlag"]:
            pending = self.flag_payloads.get((row[DST], row[SRC0], row[SRC1]))
            known = pending.pop(0) if pending else 0
            dst = row[SRC0]
            self.v_done_known[dst] = max(self.v_done_known.get(dst, 0), known)
            if dst == Pipe.PIPE_V:  # a V -> X -> V round trip orders V like a barrier
                self.last_v_barrier = max(self.last_v_barrier, known)
            return
        if row[KIND] == EVENT:
            return
        self._bounds[:] = (self.initialised.size, 0)
        read_flags, written_flags = _scratch(self.initialised.size)
        footprint(row, read_flags, written_flags, self._bounds)
        lo, hi = int(self._bounds[0]), int(self._bounds[1])
        if lo >= hi:
            _SCRATCH.pair = (read_flags, written_flags)
            return
        read = read_flags[lo:hi].view(bool)
        written = written_flags[lo:hi].view(bool)
        try:
            uninitialised = read & ~self.initialised[lo:hi]
            if uninitialised.any():
                start, end = _first_run(uninitialised, lo)
                raise UninitializedReadError(
                    f"#{seq} {record.name} ({record.source}) reads UB bytes [{start}, {end}) "
                    f"that nothing has written; operands: {self._operands(record)}")
            if record.pipe == "PIPE_V" and not self.orders_v:
                writes, reads = self.v_write_seq[lo:hi], self.v_read_seq[lo:hi]
                self._hazard(record, seq, read, writes, lo, "reads", "written", "RAW")
                self._hazard(record, seq, written, writes, lo, "writes", "written", "WAW")
                self._hazard(record, seq, written, reads, lo, "writes", "read", "WAR")
                writes[written] = seq
                reads[read] = seq
                self.last_v_seq = seq
            self.initialised[lo:hi] |= written
        finally:
            read_flags[lo:hi] = 0
            written_flags[lo:hi] = 0
            _SCRATCH.pair = (read_flags, written_flags)

    def _hazard(self, record, seq, touched, last_seq, lo, verb, other_verb, kind):
        clash = touched & (last_seq > self.last_v_barrier)
        if clash.any():
            start, end = _first_run(clash, lo)
            raise HazardError(
                f"{kind} hazard: #{seq} {record.name} ({record.source}) {verb} UB bytes "
                f"[{start}, {end}) {other_verb} by #{int(last_seq[start - lo])} with no "
                f"PipeBarrier(PIPE_V) between them; operands: {self._operands(record)}")

    @staticmethod
    def _operands(record):
        return ", ".join(f"{role}={where}" for role, where, _, _ in record.operands) or "-"

    @staticmethod
    def finish(flags):
        """At the end of a kernel: every SetFlag it made must have been waited for (`flags`:
        (event, id) -> SetFlags still pending)."""
        pending = {k: n for k, n in flags.items() if n}
        if pending:
            names = ", ".join(f"SetFlag({event.name}, {event_id}) x{n}"
                              for (event, event_id), n in pending.items())
            raise HazardError(f"unpaired flags at the end of the kernel: {names} never waited for")


def _snapshot_bytes(snapshot):
    initialised, recent = snapshot[0], snapshot[1]
    return initialised.nbytes + sum(i.nbytes + v.nbytes for i, v in recent) + 4096
