"""Modelled device time: cycles per instruction and a per-pipe timeline (spec vector_unit.md §8.3).

Every constant is in `CONSTANTS` with its source; the ones no public source pins down are marked
unconfirmed. `CostModel(product, **overrides)` calibrates them. The model reads an instruction
stream (a recorded program or a trace): the scalar unit dispatches in order, each pipe runs its
instructions in order, and pipes overlap except where PipeBarrier and SetFlag/WaitFlag serialise
them.
"""
import bisect
import json
import math
from dataclasses import dataclass

import numpy as np

from ..arguments import check_number
from ..errors import InvalidArgumentError
from ..files import write_file
from ..products import PRODUCTS, get_product
from ..vector_ops.program import (COPY_DIR, DST, DT_DST, DT_SRC, F32, MASK_SETS, OP,
                                  REDUCE, SRC0, SRC1, UB_TO_UB)
from ..vector_ops.program import PIPE as PIPE_COL
from ..vector_ops.table import TABLE
from ..vector_ops.types import Pipe
from ..vector_ops.walk import copy_bytes, python, repeat_count

# the jitted geometry's Python bodies: the cost model walks rows as Python lists
_repeat_count = python(repeat_count)


@dataclass(frozen=True)
class Constant:
    value: float
    source: str
    unconfirmed: bool = False


CONSTANTS = {
    "issue_cycles": Constant(1, "scalar dispatch per instruction or event; no published "
                                "figure (spec §10.8)", True),
    "mask_setup_cycles": Constant(1, "mask setup ops take about one cycle [S43][S56]; count-form "
                                     "calls make 4, a mask argument 1"),
    "scalar_access_cycles": Constant(1, "GetValue/SetValue on the scalar pipe; no published "
                                        "figure", True),
    "cmpmask_load_cycles": Constant(1, "SetCmpMask, a 16-byte register load on the vector pipe; "
                                       "no published figure", True),
    "barrier_drain_cycles": Constant(4, "PipeBarrier drain after the pipe's last completion; "
                                        "no published figure", True),
    "reduce_latency_cycles": Constant(3, "reductions pay roughly 2-5 Add-equivalents of latency "
                                         "[S56]", True),
    "copy_setup_cycles": Constant(30, "DMA setup per GM DataCopy; no published figure", True),
    "ub_copy_bytes_per_cycle": Constant(256, "UB->UB DataCopy, 950 figure [S44], used for all",
                                        True),
    # GM bytes per cycle per core: the runtime ini's ddr_rate (units not stated) [S6-S9].
    "gm_bytes_per_cycle": Constant({"atlas-a2": 32, "atlas-a3": 32, "atlas-inference": 17,
                                    "atlas-350": 31}, "runtime ini ddr_rate [S6][S7][S8][S9]; "
                                   "units not stated; MTE2 and MTE3 share it", True),
    # The chip's GM bandwidth, shared by the cores of a multi-core operator: 1.6 TB/s [S54][S55]
    # at the product's clock; 310P: about 0.2 TB/s (LPDDR4X), an estimate.
    "gm_total_bytes_per_cycle": Constant({"atlas-a2": 1.6e6 / 1800, "atlas-a3": 1.6e6 / 1850,
                                          "atlas-inference": 0.2e6 / 1060,
                                          "atlas-350": 1.6e6 / 1800},
                                         "GM about 1.6 TB/s [S54][S55] / clock; 310P and 950 "
                                         "figures are estimates", True),
    "sync_all_cycles": Constant(1000, "SyncAll across the cores of an operator (a GM "
                                      "round trip); no published figure", True),
    "clock_mhz": Constant({name: p.clock_mhz for name, p in PRODUCTS.items()},
                          "the products table: runtime ini / npu-smi clocks [S6][S7][S8][S9]"),
    # Elements per cycle per core, (half, float), of each vector instruction: its table entry's
    # rate [S44] (Add-like instructions, Duplicate and pair reductions run one 256-byte repeat
    # per cycle; half block and whole reductions and float whole reductions take 7 cycles per
    # repeat).
    "rates": Constant(None, "Vector instruction rates [S44], from the instruction table "
                            "(lngb.vector_ops.table)"),
}
PER_PRODUCT = ("gm_bytes_per_cycle", "gm_total_bytes_per_cycle", "clock_mhz")
# Constants the model divides by: > 0. The others are cycle counts: >= 0.
RATES = ("ub_copy_bytes_per_cycle", "gm_bytes_per_cycle", "gm_total_bytes_per_cycle", "clock_mhz")
WORK_PIPES = (Pipe.PIPE_V, Pipe.PIPE_MTE2, Pipe.PIPE_MTE3)


def table_rates():
    """{instruction name: (half, float) elements per cycle} of every rated table entry."""
    return {e.name: e.rate for e in TABLE.entries if e.rate is not None}


def check_overrides(api, overrides):
    """Cost-constant overrides as plain floats: known names; finite real numbers, > 0 for the
    rates the model divides by, >= 0 for cycle counts; `rates` a dict of some rated instructions'
    (half, float) elements per cycle, the others keeping the table's."""
    unknown = sorted(set(overrides) - set(CONSTANTS))
    if unknown:
        raise InvalidArgumentError(f"{api}: unknown constants {unknown}; known: "
                                   f"{sorted(CONSTANTS)}")
    checked = {name: check_number(api, name, value, positive=name in RATES)
               for name, value in overrides.items() if name != "rates"}
    if "rates" in overrides:
        checked["rates"] = _check_rates(api, overrides["rates"])
    return checked


def _check_rates(api, rates):
    known = table_rates()
    if not isinstance(rates, dict) or not all(isinstance(k, str) and k in known for k in rates):
        raise InvalidArgumentError(f"{api}: rates must be a dict from instruction names "
                                   f"({', '.join(known)}) to (half, float) elements per cycle, "
                                   f"got {rates!r}")
    out = dict(known)
    for name, pair in rates.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidArgumentError(f"{api}: rates[{name!r}] must be a (half, float) pair of "
                                       f"elements per cycle, got {pair!r}")
        out[name] = tuple(check_number(api, f"rates[{name!r}]", r, positive=True) for r in pair)
    return out


def vector_elements(row):
    """Lanes an element-wise or reduction row sweeps: repeats x lanes per repeat."""
    epr = 256 // (4 if F32 in (row[DT_DST], row[DT_SRC]) else 2)
    return _repeat_count(row, epr) * epr


@dataclass
class Span:
    index: int
    name: str
    pipe: str
    start: float
    end: float


@dataclass
class Cost:
    """Modelled device time of one instruction stream."""
    cycles: float
    microseconds: float
    timeline: list
    busy: dict            # pipe name -> cycles the pipe is occupied
    instructions: int     # rows that are instructions, not events
    clock_mhz: float

    def __repr__(self):
        return (f"Cost(cycles={self.cycles:g}, microseconds={self.microseconds:.3f}, "
                f"instructions={self.instructions}, {len(self.timeline)} spans)")

    def summary(self):
        """A few lines: the modelled time and how busy each pipe was."""
        busy = ", ".join(f"{pipe} {cycles:g} ({cycles / self.cycles:.0%})" if self.cycles else
                         f"{pipe} {cycles:g}" for pipe, cycles in self.busy.items())
        return (f"modelled device time: {self.cycles:g} cycles = {self.microseconds:.3f} us at "
                f"{self.clock_mhz:g} MHz; {self.instructions} instructions\n"
                f"busy: {busy}")

    def to_chrome_trace(self):
        """Chrome trace JSON (opens in Perfetto): one row per pipe, times in microseconds."""
        tids = {p.name: i for i, p in enumerate(Pipe)}
        events = [{"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": name}}
                  for name, tid in tids.items()]
        events += [{"ph": "X", "pid": 1, "tid": tids[s.pipe], "name": s.name,
                    "ts": s.start / self.clock_mhz, "dur": (s.end - s.start) / self.clock_mhz,
                    "args": {"index": s.index}} for s in self.timeline]
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def write_chrome_trace(self, path):
        write_file("Chrome trace", path, json.dumps(self.to_chrome_trace()))


class CostModel:
    """The cost constants of one product; keyword arguments override CONSTANTS (calibration).
    Per-product constants take a number for the product at hand."""

    def __init__(self, product="atlas-a2", **overrides):
        self.product = get_product(product)
        overrides = check_overrides("CostModel", overrides)
        self.values = {name: (c.value[self.product.name] if name in PER_PRODUCT else c.value)
                       for name, c in CONSTANTS.items()}
        self.values["rates"] = table_rates()
        self.values.update(overrides)
        self._described = {}

    def instruction_cycles(self, row):
        """Cycles an instruction occupies its pipe (events: 0)."""
        entry = TABLE.by_opcode[int(row[OP])]
        v = self.values
        if entry.cost_rule == "rate":
            rate = v["rates"][entry.name][1 if F32 in (row[DT_DST], row[DT_SRC]) else 0]
            return float(vector_elements(row) / rate)
        if entry.cost_rule == "cmpmask":
            return float(v["cmpmask_load_cycles"])
        if entry.cost_rule == "copy":
            nbytes = int(copy_bytes(row))
            if row[COPY_DIR] == UB_TO_UB:
                return float(nbytes / v["ub_copy_bytes_per_cycle"])
            if nbytes == 0:
                return 0.0
            return float(v["copy_setup_cycles"] + nbytes / v["gm_bytes_per_cycle"])
        return 0.0

    def describe(self, row):
        """What the timeline needs of a row (a tuple), computed once per distinct row:
        (rule, name, a, b, c); see _Timeline.feed."""
        info = self._described.get(row)
        if info is None:
            info = self._described[row] = self._describe(row)
        return info

    def _describe(self, row):
        entry = TABLE.by_opcode[row[OP]]
        rule, name, v = entry.cost_rule, entry.name, self.values
        if rule in ("none", "mask", "scalar"):
            cycles = {"none": 0, "mask": v["mask_setup_cycles"]}.get(rule, v["scalar_access_cycles"])
            return ("none" if rule == "none" else "scalar", name, cycles, None, None)
        setup = v["mask_setup_cycles"] * row[MASK_SETS] if entry.is_instruction else 0
        if rule in ("barrier", "sync_all"):  # SyncAll: this core's side, a PIPE_ALL barrier
            every = rule == "sync_all" or row[DST] == Pipe.PIPE_ALL
            return "barrier", name, setup, WORK_PIPES if every else (Pipe(row[DST]),), every
        if rule == "set_flag":
            return rule, name, setup, Pipe(row[DST]), (row[DST], row[SRC0], row[SRC1])
        if rule == "wait_flag":
            return rule, name, setup, Pipe(row[SRC0]), (row[DST], row[SRC0], row[SRC1])
        cycles = self.instruction_cycles(row)
        gm = rule == "copy" and row[COPY_DIR] != UB_TO_UB and cycles > 0
        latency = v["reduce_latency_cycles"] if entry.family.kind == REDUCE else 0.0
        return "work", name, setup, Pipe(row[PIPE_COL]), (cycles, gm, latency)

    def schedule_cycles(self, programs, sequence):
        """`estimate(the rows of programs[p] for p in sequence).cycles`, each program's rows
        read once (a schedule of recorded steps repeats a few programs many times)."""
        timeline, described = _Timeline(self), {}
        for p in sequence:
            if p not in described:
                described[p] = [self.describe(tuple(row)) for row in programs[p].tolist()]
            timeline.feed_described(described[p])
        return timeline.total()

    def estimate(self, rows):
        """The per-pipe timeline of an instruction stream (rows in issue order)."""
        timeline = _Timeline(self, spans=True)
        timeline.feed(rows)
        total, v = timeline.total(), self.values
        busy = {p.name: sum(s.end - s.start for s in timeline.spans if s.pipe == p.name)
                for p in WORK_PIPES}
        return Cost(total, total / v["clock_mhz"], timeline.spans, busy, timeline.instructions,
                    v["clock_mhz"])


class _Timeline:
    """The model's state while it reads a stream: when the scalar unit dispatches next (t_s),
    and per work pipe when it is free, when all it issued has completed and what barriers and
    waits hold it to; pending SetFlags; the GM port's bookings."""

    def __init__(self, model, spans=False):
        self.v = model.values
        self.model = model
        self.t_s = 0.0
        self.free = {p: 0.0 for p in WORK_PIPES}       # the pipe is occupied until
        self.done = {p: 0.0 for p in WORK_PIPES}       # every issued instruction has completed at
        self.ready = {p: 0.0 for p in WORK_PIPES}      # barriers and waits: no start before
        self.pending = {}   # SetFlags not waited for yet, by flag
        self.gm = _SharedPort()
        self.spans = [] if spans else None
        self.instructions = 0
        self.index = 0   # rows read so far

    def total(self):
        return max([self.t_s, *self.done.values()])

    def span(self, name, pipe, start, end):
        if self.spans is not None:
            self.spans.append(Span(self.index, name, pipe, start, end))

    def feed(self, rows):
        describe = self.model.describe
        self.feed_described([describe(tuple(row)) for row in np.asarray(rows).tolist()])

    def feed_described(self, described):
        """Rows as CostModel.describe gives them."""
        v, free, done, ready, flags = self.v, self.free, self.done, self.ready, self.pending
        t_s = self.t_s
        for rule, name, a, b, c in described:
            if rule == "none":
                pass  # a declaration for the sanitizer, not a device instruction
            elif rule == "scalar":  # mask setup or a scalar access: a cycles
                self.span(name, "PIPE_S", t_s, t_s + a)
                t_s += a
            else:
                t_s += a   # an instruction's own mask setup runs on the scalar unit first
                dispatch, t_s = t_s, t_s + v["issue_cycles"]
                if rule == "barrier":  # b: the pipes it waits for, c: the scalar unit too
                    after = max(done[p] for p in b) + v["barrier_drain_cycles"]
                    for p in b:
                        ready[p] = max(ready[p], after)
                    if c:
                        t_s = max(t_s, after)
                    self.span(name, "PIPE_S", dispatch, dispatch + v["issue_cycles"])
                elif rule == "set_flag":  # b: the source pipe, c: the flag
                    when = t_s if b == Pipe.PIPE_S else max(done[b], ready[b], dispatch)
                    flags.setdefault(c, []).append(when)
                    self.span(name, b.name, when, when)
                elif rule == "wait_flag":  # b: the waiting pipe, c: the flag
                    pending = flags.get(c)
                    when = pending.pop(0) if pending else dispatch
                    if b == Pipe.PIPE_S:
                        t_s = max(t_s, when)
                    else:
                        ready[b] = max(ready[b], when)
                    self.span(name, b.name, when, when)
                else:  # b: the pipe, c: (cycles, over the GM port, completion latency)
                    self.instructions += 1
                    cycles, gm, latency = c
                    start = max(dispatch, free[b], ready[b])
                    if gm:
                        # MTE2 and MTE3 share the core's GM bandwidth: after its setup, a
                        # transfer takes the first time the port is free for its whole duration
                        # (no later transfer can start before this dispatch).
                        setup = v["copy_setup_cycles"]
                        start = self.gm.book(start + setup, cycles - setup, dispatch) - setup
                    end = start + cycles
                    free[b] = end
                    done[b] = max(done[b], end + latency)
                    self.span(name, b.name, start, end)
            self.index += 1
        self.t_s = t_s


class _SharedPort:
    """Busy intervals of a resource that serves one transfer at a time."""

    def __init__(self):
        self.busy = []  # sorted, disjoint (start, end)

    def book(self, earliest, duration, floor=0.0):
        """Reserve `duration` at the first free time >= earliest; returns its start. No later
        call asks for a time before `floor`: bookings that end by then are forgotten."""
        busy = self.busy
        if busy and busy[0][1] <= floor:
            del busy[:self._first_ending_after(floor)]
        start = earliest
        at = self._first_ending_after(start)  # the bookings before it change nothing
        for a, b in busy[at:]:
            if start + duration <= a:
                break
            start = max(start, b)
            at += 1
        busy.insert(at, (start, start + duration))
        return start

    def _first_ending_after(self, t):
        """The index of the first booking that ends after t (they are sorted and disjoint)."""
        i = bisect.bisect_right(self.busy, (t, math.inf))
        return i - 1 if i and self.busy[i - 1][1] > t else i


def constants_table():
    """Markdown table of every constant with its source (for the docs and the CLI)."""
    lines = ["| constant | value | source |", "|---|---|---|"]
    for name, c in CONSTANTS.items():
        mark = " (UNCONFIRMED)" if c.unconfirmed else ""
        if name == "rates":
            value = "; ".join(f"{op} {h:g}/{f:g}" for op, (h, f) in table_rates().items())
            value = f"elements/cycle half/float: {value}"
        elif isinstance(c.value, dict):
            value = ", ".join(f"{k}: {x}" for k, x in c.value.items())
        else:
            value = f"{c.value:g}"
        lines.append(f"| {name} | {value} | {c.source}{mark} |")
    return "\n".join(lines)


# --- the cost of a multi-core operator ---------------------------------------------------------

@dataclass
class OperatorCost:
    """Modelled device time of the operator: the slowest core of phase 1, SyncAll, the slowest
    core of phase 2; `per_core[c]` = (phase 1 Cost, phase 2 Cost)."""
    cycles: float
    microseconds: float
    phases: tuple
    per_core: list
    clock_mhz: float
    gm_bytes_per_cycle: tuple  # what each core's MTE2/MTE3 got in each phase

    def __repr__(self):
        return (f"OperatorCost(cycles={self.cycles:g}, microseconds={self.microseconds:.3f}, "
                f"phases=({', '.join(f'{p:g}' for p in self.phases)}), "
                f"cores={len(self.per_core)})")

    def summary(self):
        """A few lines: the modelled time, its phases and their slowest cores."""
        lines = [f"modelled device time: {self.cycles:g} cycles = {self.microseconds:.3f} us at "
                 f"{self.clock_mhz:g} MHz on {len(self.per_core)} cores"]
        for phase, what in ((0, "phase 1 (tiles, partials)"), (1, "phase 2 (reduction)")):
            cycles = [costs[phase].cycles for costs in self.per_core]
            slowest = int(np.argmax(cycles))
            lines.append(f"{what}: {self.phases[2 * phase]:g} cycles (slowest core {slowest}), "
                         f"GM {self.gm_bytes_per_cycle[phase]:.3g} bytes/cycle per core")
            if phase == 0:
                lines.append(f"SyncAll: {self.phases[1]:g} cycles")
        return "\n".join(lines)

    def to_chrome_trace(self):
        """One process per core, one row per pipe; times in microseconds."""
        events = []
        start2 = self.phases[0] + self.phases[1]
        for c, costs in enumerate(self.per_core):
            for offset, cost in zip((0.0, start2), costs):
                for event in cost.to_chrome_trace()["traceEvents"]:
                    event = dict(event, pid=c)
                    if event["ph"] == "X":
                        event["ts"] += offset / self.clock_mhz
                    events.append(event)
            events.append({"ph": "M", "pid": c, "name": "process_name",
                           "args": {"name": f"core {c}"}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}


def phase_models(product, active, **overrides):
    """(SyncAll cycles, the CostModel of each phase of an operator, the GM bytes per cycle each
    core's MTE2/MTE3 get in it): min(the core's own rate, the chip's GM rate / the `active[phase]`
    cores that stream in the phase). `overrides` as checked by check_overrides."""
    overrides = dict(overrides)
    sync = overrides.pop("sync_all_cycles", CONSTANTS["sync_all_cycles"].value)
    total_rate = overrides.pop("gm_total_bytes_per_cycle",
                               CONSTANTS["gm_total_bytes_per_cycle"].value[product.name])
    own_rate = overrides.pop("gm_bytes_per_cycle",
                             CONSTANTS["gm_bytes_per_cycle"].value[product.name])
    rates = [min(own_rate, total_rate / max(n, 1)) for n in active]
    return sync, [CostModel(product, gm_bytes_per_cycle=r, **overrides) for r in rates], rates


def operator_cost(product, core_rows, **overrides):
    """Each core's streams through CostModel, with the GM bandwidth shared (phase_models)."""
    product = get_product(product)
    overrides = check_overrides("estimate_cost", overrides)
    active = [sum(1 for rows in core_rows if len(rows[phase])) for phase in range(2)]
    sync, models, rates = phase_models(product, active, **overrides)
    per_core = [[None, None] for _ in core_rows]
    phase_cycles = []
    for phase, model in enumerate(models):
        seen = {}
        for c, rows in enumerate(core_rows):
            key = rows[phase].tobytes()
            if key not in seen:
                seen[key] = model.estimate(rows[phase])
            per_core[c][phase] = seen[key]
        phase_cycles.append(max(per_core[c][phase].cycles for c in range(len(core_rows))))
    clock = models[0].values["clock_mhz"]
    cycles = phase_cycles[0] + sync + phase_cycles[1]
    return OperatorCost(cycles, cycles / clock, (phase_cycles[0], sync, phase_cycles[1]),
                        [tuple(p) for p in per_core], clock, tuple(rates))
