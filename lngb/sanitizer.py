"""mode="checked": shadow memory of initialised UB bytes and V-pipe hazards.

Before an instruction executes, its exact read and write bytes (vector_ops.footprint, the same
walk as the kernels) are checked: reading a byte nothing has written raises
UninitializedReadError; on A2/A3/310P, touching bytes another vector instruction wrote or read
since the last PipeBarrier(PIPE_V) raises HazardError (the 950 orders V after V in hardware).
Nothing executes when a check fails.
"""
import threading

import numpy as np

from .errors import HazardError, UninitializedReadError
from .vector_ops.footprint import footprint
from .vector_ops.program import (DST, EVENT_BASE, OP, PIPE_BARRIER, SET_FLAG, SRC0, SRC1,
                                 SYNC_ALL, UNDEFINE, WAIT_FLAG)
from .vector_ops.types import Pipe


_SCRATCH = threading.local()


def _scratch(size):
    """Zeroed uint8 read/written flag arrays, shared by the sanitizers of a thread (each check
    zeroes what it set)."""
    pair = getattr(_SCRATCH, "pair", None)
    if pair is None or pair[0].size != size:
        pair = _SCRATCH.pair = (np.zeros(size, np.uint8), np.zeros(size, np.uint8))
    return pair


def _first_run(mask, offset):
    """[start, end) of the first run of set entries, as UB byte addresses."""
    start = int(np.argmax(mask))
    rest = mask[start:]
    length = rest.size if rest.all() else int(np.argmin(rest))
    return offset + start, offset + start + length


class Sanitizer:
    def __init__(self, size, orders_v):
        """`size`: the UB bytes (registers included); `orders_v`: the hardware orders V after V
        (the Ascend 950), so there are no V hazards to find."""
        self.initialised = np.zeros(size, dtype=bool)
        self._seqs = None  # last V instruction writing / reading each byte, made on first use
        self.last_v_barrier = 0
        self.last_v_seq = 0          # the last vector instruction checked
        self.v_done_known = {}       # pipe -> the last V instruction it knows has completed
        self.flag_payloads = {}      # (src, dst, id) -> v_done_known carried by pending SetFlags
        self.pristine = True  # nothing checked or written yet: a recorded check may be reused
        self.orders_v = orders_v
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

    def host_write(self, start, nbytes):
        self.pristine = False
        self.initialised[start:start + nbytes] = True

    def check_scalar_read(self, address, size, seq, source):
        if not self.initialised[address:address + size].all():
            raise UninitializedReadError(f"#{seq} GetValue ({source}) reads UB bytes "
                                         f"[{address}, {address + size}) that nothing has written")

    def check(self, record, seq):
        """Check one instruction or event before it executes, then update the shadow state."""
        self.pristine = False
        row = record.row
        if row[OP] in (PIPE_BARRIER, SYNC_ALL):
            if row[OP] == SYNC_ALL or row[DST] in (Pipe.PIPE_V, Pipe.PIPE_ALL):
                self.last_v_barrier = seq
            return
        if row[OP] == UNDEFINE:
            self.initialised[row[DST]:row[DST] + row[SRC0]] = False
            return
        if row[OP] == SET_FLAG:  # carries how far V is known complete to the waiting pipe
            src = row[DST]
            known = self.last_v_seq if src == Pipe.PIPE_V else self.v_done_known.get(src, 0)
            self.flag_payloads.setdefault((row[DST], row[SRC0], row[SRC1]), []).append(known)
            return
        if row[OP] == WAIT_FLAG:
            pending = self.flag_payloads.get((row[DST], row[SRC0], row[SRC1]))
            known = pending.pop(0) if pending else 0
            dst = row[SRC0]
            self.v_done_known[dst] = max(self.v_done_known.get(dst, 0), known)
            if dst == Pipe.PIPE_V:  # a V -> X -> V round trip orders V like a barrier
                self.last_v_barrier = max(self.last_v_barrier, known)
            return
        if row[OP] >= EVENT_BASE:
            return
        self._bounds[:] = (self.initialised.size, 0)
        read_flags, written_flags = _scratch(self.initialised.size)
        footprint(row, read_flags, written_flags, self._bounds)
        lo, hi = int(self._bounds[0]), int(self._bounds[1])
        if lo >= hi:
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
