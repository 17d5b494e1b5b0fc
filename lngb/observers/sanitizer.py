"""mode="checked": shadow memory of initialised UB bytes and hazards between and within pipes,
an observer of the core (lngb.core).

Before an instruction executes, its exact read and write bytes (vector_ops.footprint, the same
walk as the kernels; a GM DataCopy's GM bursts too) are checked: reading a UB byte nothing has
written raises UninitializedReadError; touching bytes another pipe's instruction wrote or read
that is not yet known complete raises HazardError (RAW, WAR or WAW), naming both instructions
and the event that would order them. Ordered is only what the device orders (spec
vector_unit.md §7):

- program order within MTE2, within MTE3 and within S; V after V only across a
  PipeBarrier(PIPE_V) on A2/A3/310P (the 950 orders V after V in hardware);
- SetFlag(src -> dst) / WaitFlag: what src issued before the SetFlag, and what src knew
  complete, is known complete to dst after the WaitFlag (TQue's EnQue/DeQue/AllocTensor/
  FreeTensor emit these); a WaitFlag on S holds back every later instruction of every pipe;
- PipeBarrier(PIPE_ALL) and SyncAll: everything issued before them;
- a scalar read (GetValue) completes when issued, so nothing later can race with it; a scalar
  write (SetValue) is seen by another pipe only after an S -> pipe flag.

Nothing executes when a check fails. The check of a recorded program from a pristine core is
kept (in the shared cache) and reused by later pristine runs of it.
"""
import threading
import weakref

import numpy as np

from ..errors import HazardError, UninitializedReadError, name_core
from ..runtime.cache import Cache
from ..vector_ops.footprint import footprint
from ..vector_ops.program import COPY, DST, EVENT, KIND, OP, PIPE, SRC0, SRC1
from ..vector_ops.table import TABLE
from ..vector_ops.types import HardEvent, Pipe
from ..vector_ops.walk import gm_bursts

OPCODES = {name: TABLE[name].opcode for name in ("PipeBarrier", "SyncAll", "Undefine", "SetFlag",
                                                  "WaitFlag", "GetValue", "SetValue",
                                                  "SetCmpMask")}
CHECKS = Cache("sanitizer checks")
S, V, MTE2, MTE3 = (int(p) for p in (Pipe.PIPE_S, Pipe.PIPE_V, Pipe.PIPE_MTE2, Pipe.PIPE_MTE3))
PIPES = 4                 # S, V, MTE2, MTE3: the pipes that touch memory
# (pipe, is write) of the UB accesses that take time (a scalar read is done when issued)
UB_ACCESSES = ((S, True), (V, True), (MTE2, True), (V, False), (MTE3, False))
ALWAYS = np.iinfo(np.int32).max   # an ordering limit that orders every earlier access
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
        self.size = core.ub.size  # the UB bytes, registers included
        # the Ascend 950 orders V after V in hardware
        self.orders_v = core.product.kernel_path == "regbase"
        self._initialised = None   # per UB byte: written (made on first use)
        self._initialised_shared = False   # a snapshot's: copied before the first write
        self._ub = None        # the UB shadow (_shadow), made on first use
        self._saved_ub = None  # a restored snapshot's UB accesses, until the shadow is made
        self._used = set()     # the (pipe, is write) shadows holding any access
        self.gm = {}           # GM buffer -> [(clock, pipe, is write, starts, ends)] in flight
        self.clock = 0         # every access checked, numbered in issue order
        self.issued = [0] * PIPES           # the last access of each pipe
        self.known = [[0] * PIPES for _ in range(PIPES)]   # [p][q]: q's accesses done for p
        self.payloads = {}     # (src, dst, id) -> the known-complete lists pending SetFlags carry
        self.who = {}          # clock -> (seq, name, source) of the access
        self._who_shared = False
        self.pristine = True   # nothing checked or written yet: a recorded check may be reused
        self._unchecked = None   # records a reused check passed, checked again when needed
        self._bounds = np.zeros(2, dtype=np.int64)

    @property
    def initialised(self):
        """Per UB byte: whether anything has written it (read-only when a snapshot shares it)."""
        if self._unchecked is not None:
            self._catch_up()
        if self._initialised is None:
            self._initialised = np.zeros(self.size, dtype=bool)
        return self._initialised

    def _written(self):
        """`initialised`, to be written."""
        initialised = self.initialised
        if self._initialised_shared:
            self._initialised, self._initialised_shared = initialised.copy(), False
        return self._initialised

    def _shadow(self):
        """{(pipe, is write): the clock of that pipe's last write (read) of each UB byte}. A
        pipe's write stays after another's overwrites it: ordering is transitive (whoever knows
        the later write complete knows the earlier one), so it never clashes on its own."""
        if self._ub is None:
            self._ub = {key: np.zeros(self.size, np.int32) for key in UB_ACCESSES}
            for key, (index, at) in (self._saved_ub or {}).items():  # a restored check's
                self._ub[key][index] = at
            self._saved_ub = None
        return self._ub

    # --- what is ordered ----------------------------------------------------------------------
    def limits(self, pipe):
        """[q]: the last access of pipe q known complete before `pipe`'s next one."""
        lim = list(self.known[pipe])
        if pipe != V or self.orders_v:
            lim[pipe] = ALWAYS   # program order within the pipe
        return np.array(lim, dtype=np.int32)

    def _all_done(self):
        for row in self.known:
            row[:] = [self.clock] * PIPES

    def _event(self, row):
        op = row[OP]
        if op == OPCODES["SyncAll"] or op == OPCODES["PipeBarrier"] and row[DST] == Pipe.PIPE_ALL:
            self._all_done()
        elif op == OPCODES["PipeBarrier"] and row[DST] == Pipe.PIPE_V:
            self.known[V][V] = self.issued[V]
        elif op == OPCODES["SetFlag"]:
            src = int(row[DST])
            carried = list(self.known[src])
            carried[src] = self.issued[src]   # the SetFlag waits for src's earlier work
            self.payloads.setdefault((src, int(row[SRC0]), int(row[SRC1])), []).append(carried)
        elif op == OPCODES["WaitFlag"]:
            pending = self.payloads.get((int(row[DST]), int(row[SRC0]), int(row[SRC1])))
            carried = pending.pop(0) if pending else [0] * PIPES
            dst = int(row[SRC0])
            self.known[dst] = list(map(max, self.known[dst], carried))
            if dst == S:   # the scalar unit issues everything later only once it has passed
                for known in self.known:
                    known[:] = map(max, known, self.known[S])
        else:
            return
        if self.gm and (op != OPCODES["SetFlag"] and op != OPCODES["PipeBarrier"] or
                        row[DST] == Pipe.PIPE_ALL):
            self._retire_gm()   # what MTE2, MTE3 or S know has grown

    # --- the observer protocol ----------------------------------------------------------------
    @property
    def replays(self):
        """A program's check is reused only from the pristine state it was made from."""
        return self.pristine

    def catch_up_later(self, records):
        """The core retired `records` in a replay whose check an earlier run passed (a
        multi-core plan's): the state they leave is made, by checking them, only when something
        later needs it."""
        self._unchecked, self.pristine = records, False

    def _catch_up(self):
        records, self._unchecked = self._unchecked, None
        try:
            self._check_all(records)
        except BaseException:   # Ctrl-C: the catch-up starts again when next needed
            self._unchecked, self.pristine = records, False
            raise

    def _check_all(self, records):
        """Check records in order, all or nothing: after an error (Ctrl-C too) the state is as
        it was."""
        start = self.snapshot()
        try:
            for record in records:
                self.check_record(record, record.seq)
        except BaseException:
            self.restore(start)
            raise

    def host_write(self, start, nbytes):
        if self._unchecked is not None:
            self._catch_up()
        self.pristine = False
        self._written()[start:start + nbytes] = True

    def check(self, record):
        """Check a record before it executes."""
        if self._unchecked is not None:
            self._catch_up()
        self.check_record(record, record.seq, self.core.unbound_gm)

    def check_program(self, program):
        """Sanitize a program on a pristine core; the outcome is reused by later pristine runs.
        A program that leaves SetFlags nobody waits for is a hazard."""
        if self._unchecked is not None:
            self._catch_up()
        checked = CHECKS.get(program.key) if program.key is not None else None
        if checked is None:
            self._check_all(program.records)
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

    def snapshot(self):
        """Everything later checks depend on; the UB shadow as (index, values) of the bytes
        accessed."""
        if self._unchecked is not None:
            self._catch_up()
        ub = self._saved_ub
        if self._ub is not None:
            ub = {key: _accessed(c) for key, c in self._ub.items()}
        initialised = self.initialised
        initialised.setflags(write=False)   # shared with the snapshot: _written copies it
        self._initialised_shared = True
        return (initialised, ub, {k: list(v) for k, v in self.gm.items()},
                self.clock, list(self.issued), [list(k) for k in self.known],
                {k: [list(c) for c in v] for k, v in self.payloads.items()},
                self.who if self._who_shared else dict(self.who), self.pristine)

    def restore(self, state):
        (initialised, ub, gm, self.clock, issued, known, payloads, who,
         self.pristine) = state
        self._initialised, self._initialised_shared = initialised, True
        self.gm = {k: list(v) for k, v in gm.items()}
        self.issued, self.known = list(issued), [list(k) for k in known]
        self.payloads = {k: [list(c) for c in v] for k, v in payloads.items()}
        self.who, self._who_shared = who, True   # copied on the first access after
        self._ub, self._saved_ub = None, ub      # the shadow is made when next needed
        self._used = {key for key, (index, _) in (ub or {}).items() if index.size}

    # --- checks -------------------------------------------------------------------------------
    def check_record(self, record, seq, gm=None):
        """Check one instruction or event before it executes, then update the shadow state."""
        self.pristine = False
        row = record.row
        op = row[OP]
        if op == OPCODES["Undefine"]:
            self._written()[row[DST]:row[DST] + row[SRC0]] = False
            return
        if op == OPCODES["GetValue"] or op == OPCODES["SetValue"]:
            lo, hi = int(row[DST]), int(row[DST] + row[SRC0])
            if op == OPCODES["GetValue"] and not self.initialised[lo:hi].all():
                raise UninitializedReadError(
                    f"#{seq} GetValue ({record.source}) reads UB bytes [{lo}, {hi}) that "
                    "nothing has written")
            read = np.full(hi - lo, op == OPCODES["GetValue"])
            self._check_ub(record, seq, S, slice(lo, hi), read, ~read)
            self._commit_ub(self._next_clock(record, seq, S), S, slice(lo, hi), read, ~read)
            if op == OPCODES["SetValue"]:
                self._written()[lo:hi] = True
            return
        if row[KIND] == EVENT:
            self._event(row)
            return
        pipe = int(row[PIPE])
        self._bounds[:] = (self.size, 0)
        read_flags, written_flags = _scratch(self.size)
        footprint(row, read_flags, written_flags, self._bounds)
        lo, hi = int(self._bounds[0]), int(self._bounds[1])
        try:
            read = read_flags[lo:hi].view(bool)
            written = written_flags[lo:hi].view(bool)
            # SetCmpMask loads its 16 bytes with their state: CANN's LayerNorm loads a row sum
            # and 12 bytes nothing wrote, and its Select reads only the sum (layernorm.md §4.7)
            carries = op == OPCODES["SetCmpMask"]
            uninitialised = read & ~self.initialised[lo:hi]
            if uninitialised.any() and not carries:
                start, end = _first_run(uninitialised, lo)
                raise UninitializedReadError(
                    f"#{seq} {record.name} ({record.source}) reads UB bytes [{start}, {end}) "
                    f"that nothing has written; operands: {_operands(record)}")
            where, r, w = _compact(lo, read, written)
            self._check_ub(record, seq, pipe, where, r, w)
            gm_access = self._check_gm(record, seq, pipe, gm) if row[KIND] == COPY else None
            clock = self._next_clock(record, seq, pipe)
            self._commit_ub(clock, pipe, where, r, w)
            if gm_access is not None:
                key, write, starts, ends = gm_access
                self.gm.setdefault(key, []).append((clock, pipe, write, starts, ends))
            if carries:
                src, register, n = int(row[DST]), int(row[SRC1]), int(row[SRC0])
                initialised = self._written()
                initialised[register:register + n] = initialised[src:src + n]
            else:
                self._written()[lo:hi] |= written
        finally:
            read_flags[lo:hi] = 0
            written_flags[lo:hi] = 0
            _SCRATCH.pair = (read_flags, written_flags)

    def _next_clock(self, record, seq, pipe):
        if self._who_shared:
            self.who, self._who_shared = dict(self.who), False
        self.clock += 1
        self.issued[pipe] = self.clock
        self.who[self.clock] = (seq, record.name, record.source)
        return self.clock

    def _check_ub(self, record, seq, pipe, where, read, written):
        """A UB access of `pipe` (read / written: bool masks of the bytes at `where`, a slice
        or addresses: _compact) against the accesses of every pipe not known complete before
        it."""
        if not read.size:
            return
        lim = self.limits(pipe)
        for (other, is_write), clocks in self._shadow().items():
            if lim[other] == ALWAYS or (other, is_write) not in self._used:
                continue   # ordered by program order, or never accessed
            at = clocks[where]
            pending = at > lim[other]
            if not pending.any():   # (the common case: one pass, no masks)
                continue
            if is_write:
                self._clash(record, seq, pipe, read & pending, at, other, where, "RAW", "reads",
                            "written")
                self._clash(record, seq, pipe, written & pending, at, other, where, "WAW",
                            "writes", "written")
            else:
                self._clash(record, seq, pipe, written & pending, at, other, where, "WAR",
                            "writes", "read")

    def _commit_ub(self, clock, pipe, where, read, written):
        shadow = self._shadow()
        for mask, key in ((written, (pipe, True)), (read, (pipe, False))):
            if key in shadow:
                self._used.add(key)
                if isinstance(where, slice):
                    shadow[key][where][mask] = clock
                else:
                    shadow[key][where[mask]] = clock

    def _clash(self, record, seq, pipe, clash, at, by, where, kind, verb, other_verb):
        if clash.any():
            k = int(np.argmax(clash))
            start, end = _first_run(clash, where.start) if isinstance(where, slice) else (
                _run_at(where, clash, k))
            self._raise(record, seq, pipe, kind, verb, other_verb, "UB", start, end,
                        int(at[k]), by)

    def _raise(self, record, seq, pipe, kind, verb, other_verb, space, start, end, other,
               other_pipe):
        o_seq, o_name, o_source = self.who.get(other, ("?", "an earlier instruction", "?"))
        if other_pipe == pipe:
            fix = f"PipeBarrier({Pipe(pipe).name}) between them"
        else:
            event = HardEvent((Pipe(other_pipe), Pipe(pipe)))
            fix = f"SetFlag/WaitFlag(HardEvent.{event.name}) between them"
        raise HazardError(
            f"{kind} hazard: #{seq} {record.name} ({record.source}) on {Pipe(pipe).name} {verb} "
            f"{space} bytes [{start}, {end}) {other_verb} by #{o_seq} {o_name} ({o_source}) on "
            f"{Pipe(other_pipe).name}, and nothing orders them: add {fix}; operands: "
            f"{_operands(record)}")

    # --- GM -----------------------------------------------------------------------------------
    def _check_gm(self, record, seq, pipe, gm):
        """A GM DataCopy's bursts against the GM accesses in flight; (key, is write, starts,
        ends) of the access, or None if it moves no bytes."""
        bursts = gm_bursts(record.row)
        if bursts is None:
            return None
        write, slot, spans = bursts
        key = ("slot", slot) if gm is None else ("array", id(gm))
        starts, ends = (np.array(side, np.int64) for side in zip(*spans))
        lim = self.limits(pipe)
        for clock, other_pipe, other_write, o_starts, o_ends in self.gm.get(key, ()):
            if (write or other_write) and clock > lim[other_pipe]:
                hit = _overlap(starts, ends, o_starts, o_ends)
                if hit is not None:
                    kind = "WAW" if write and other_write else "RAW" if other_write else "WAR"
                    self._raise(record, seq, pipe, kind, "writes" if write else "reads",
                                "written" if other_write else "read", "GM", *hit, clock,
                                other_pipe)
        return key, write, starts, ends

    def _retire_gm(self):
        """Forget GM accesses every pipe that touches GM knows complete."""
        for key, accesses in self.gm.items():
            self.gm[key] = [a for a in accesses if not all(
                a[0] <= self.known[p][a[1]] for p in (MTE2, MTE3))]

    @staticmethod
    def finish(flags):
        """At the end of a kernel: every SetFlag it made must have been waited for (`flags`:
        (event, id) -> SetFlags still pending)."""
        pending = {k: n for k, n in flags.items() if n}
        if pending:
            names = ", ".join(f"SetFlag({event.name}, {event_id}) x{n}"
                              for (event, event_id), n in pending.items())
            raise HazardError(f"unpaired flags at the end of the kernel: {names} never waited for")


def check_cores(cores, phases, end_states, api=None, bar=None):
    """A multi-core kernel's records through each core's sanitizer in a live run's order: phase
    k (up to its k-th SyncAll) of every core before phase k + 1 of any; then no SetFlag may be
    left unwaited at a core's end. phases[c]: core c's records, phase by phase; end_states[c]:
    its state() after them; `bar`: a progress bar, a step per core and phase. An error names
    its core (err.block_idx)."""
    for k in range(max(map(len, phases))):
        for c, core in enumerate(cores):
            if bar is not None:
                bar.set_postfix_str(f"core {c} of {len(cores)}, phase {k + 1} of {len(phases[c])}")
            try:
                for record in phases[c][k] if k < len(phases[c]) else ():
                    core.sanitizer.check_record(record, record.seq)
            except BaseException as err:   # the caller learns which core
                name_core(err, c, len(cores), api)
                raise
            if bar is not None:
                bar.update()
    for core, state in zip(cores, end_states):
        core.sanitizer.finish(core.flags_in(state))


def _accessed(clocks):
    """(index, clocks there) of the bytes a shadow array has an access for."""
    index = np.flatnonzero(clocks)
    return index, clocks[index]


def _compact(lo, read, written):
    """(where, read, written) of a footprint's window from `lo`: the window as a slice, or, when
    it spans far more bytes than it touches (a vector register beside a tensor), the addresses
    touched, with their masks."""
    touched = read | written
    if 4 * np.count_nonzero(touched) >= touched.size:
        return slice(lo, lo + touched.size), read, written
    where = np.flatnonzero(touched)
    return where + lo, read[where], written[where]


def _run_at(addresses, mask, k):
    """[start, end) of the run of consecutive addresses with `mask` set from index k."""
    end = k + 1
    while end < addresses.size and mask[end] and addresses[end] == addresses[end - 1] + 1:
        end += 1
    return int(addresses[k]), int(addresses[end - 1]) + 1


def _operands(record):
    return ", ".join(f"{role}={where}" for role, where, _, _ in record.operands) or "-"


def _overlap(starts, ends, o_starts, o_ends):
    """[start, end) of the first bytes two sorted sets of disjoint spans share, or None."""
    i = np.searchsorted(o_ends, starts, side="right")
    inside = i < o_starts.size
    j = np.minimum(i, o_starts.size - 1)
    lo, hi = np.maximum(starts, o_starts[j]), np.minimum(ends, o_ends[j])
    hits = np.flatnonzero(inside & (lo < hi))
    if not hits.size:
        return None
    k = hits[0]
    return int(lo[k]), int(hi[k])

def _snapshot_bytes(snapshot):
    initialised, ub, gm = snapshot[:3]
    nbytes = initialised.nbytes + 4096 + 200 * len(snapshot[7])
    nbytes += sum(i.nbytes + a.nbytes for i, a in (ub or {}).values())
    return nbytes + sum(s.nbytes + e.nbytes + 100 for v in gm.values() for _, _, _, s, e in v)
