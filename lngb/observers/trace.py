"""The trace: an observer that keeps every retired record in `core.trace`, and the renderers of
records (an assembly-like listing, JSON lines, Chrome trace JSON for Perfetto with one row per
pipe). Records are data; renderers only read them."""
import json
import weakref

import numpy as np

from ..files import write_file
from ..vector_ops import program as P

PIPES = ("PIPE_S", "PIPE_V", "PIPE_MTE2", "PIPE_MTE3", "PIPE_ALL")


class Trace:
    """Appends each retired record to core.trace (observed and checked modes)."""

    role = "trace"
    replays = True

    def __init__(self, core):
        self.core = weakref.proxy(core)  # no cycle: the core is freed as soon as it is unused

    def retire(self, record):
        self._list().append(record)

    def check_program(self, program):
        pass

    def retire_program(self, program):
        start = self.core.seq - len(program.records)  # records are numbered from 1
        records = program.records
        if start:
            records = [r.renumbered(start + r.seq) for r in records]
        self._list().extend(records)

    def _list(self):
        """core.trace as a list (a replayed plan's trace, PlannedTrace, is made a list once the
        core retires more)."""
        if not isinstance(self.core.trace, list):
            self.core.trace = list(self.core.trace)
        return self.core.trace


def _event_detail(record):
    row, name = record.row, record.name
    if name == "PipeBarrier":
        return f"pipe={PIPES[row[P.DST]]}"
    if name in ("SetFlag", "WaitFlag"):
        return f"{PIPES[row[P.DST]][5:]}->{PIPES[row[P.SRC0]][5:]} id={row[P.SRC1]}"
    if record.entry.cost_rule == "mask":
        mode, high, low = record.mask_after
        return f"mode={mode.name} mask={high:#x}:{low:#x}"
    if name == "GetValue":   # a scalar read: an instruction of the scalar pipe, no mask
        return f"UB@{row[P.DST]} {row[P.SRC0]} bytes -> scalar register @{row[P.SRC1]}"
    if name == "SetValue":
        return f"UB@{row[P.DST]}"
    if name == "SetCmpMask":
        return f"UB@{row[P.DST]} {row[P.SRC0]} bytes -> compare-mask register"
    if name == "SyncAll":
        return "every core waits for all the others"
    if name == "Undefine":
        return f"UB@{row[P.DST]} {row[P.SRC0]} bytes now undefined"
    return ""


def format_record(record):
    """One assembly-like line: seq, pipe, name.dtype, operands, mask or event detail, source."""
    name = record.name + (f".{record.dtype}" if record.dtype else "")
    operands = " ".join(f"{role}={where}" for role, where, _, _ in record.operands)
    mask = record.mask
    if mask is not None:
        detail = (f"count={mask[1]}" if mask[0] == "counter"
                  else f"mask={mask[1][0]:#x}:{mask[1][1]:#x} repeat={record.repeat}")
        used = len(record.operands)
        s = record.strides
        detail += (f" blk={'/'.join(map(str, s['blk'][:used]))}"
                   f" rep={'/'.join(map(str, s['rep'][:used]))}")
    elif record.copy_params is not None:
        c = record.copy_params
        detail = (f"bytes={record.bytes_moved[0]} blocks={c['blockCount']}x{c['blockLen']} "
                  f"gaps={c['srcStride']}/{c['dstStride']}")
    else:
        detail = _event_detail(record)
    return f"{record.seq:6d}  {record.pipe:9} {name:20} {operands:44} {detail:44} {record.source}"


def format_listing(records):
    return "\n".join(format_record(r) for r in records)


def jsonable(value):
    """What json.dumps makes of the numpy scalars and enums in trace records."""
    return value.item() if isinstance(value, np.generic) else str(value)


def write_jsonl(records, path):
    write_file("trace", path, "".join(json.dumps(record.to_dict(), default=jsonable) + "\n"
                                      for record in records))


def chrome_trace(records, cost=None):
    """Chrome trace JSON: one row per pipe. With a Cost of the same stream, events sit at their
    modelled times; without, each record takes one microsecond in issue order."""
    pipes = ["PIPE_S", "PIPE_V", "PIPE_MTE2", "PIPE_MTE3"]
    events = [{"ph": "M", "pid": 1, "tid": i, "name": "thread_name", "args": {"name": p}}
              for i, p in enumerate(pipes)]
    spans = {span.index: span for span in cost.timeline} if cost is not None else {}
    for index, record in enumerate(records):
        span = spans.get(index)
        if span is not None:
            ts, dur = span.start / cost.clock_mhz, (span.end - span.start) / cost.clock_mhz
        elif cost is not None:  # not a device instruction (e.g. Undefine): no time of its own
            continue
        else:
            ts, dur = float(index), 1.0
        events.append({"ph": "X", "pid": 1, "tid": pipes.index(record.pipe) if record.pipe in pipes
                       else 0, "name": record.name, "ts": ts, "dur": dur,
                       "args": record.to_dict()})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(records, path, cost=None):
    write_file("Chrome trace", path, json.dumps(chrome_trace(records, cost), default=jsonable))

