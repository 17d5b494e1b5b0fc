"""Trace records (one per executed instruction or event) and their renderers: an assembly-like
listing, JSON lines, and Chrome trace JSON (Perfetto) with one row per pipe.

Records are data; renderers only read them. Derived fields come from the resolved row.
"""
import json
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .products import PRODUCTS
from .vector_ops import program as P
from .vector_ops.footprint import footprint
from .vector_ops.types import MaskMode

_LNGB_DIR = os.path.dirname(os.path.abspath(__file__))
_INTERNAL = tuple(os.path.join(_LNGB_DIR, name) for name in ("core.py", "tensor.py", "trace.py", "pipe.py"))
_VECTOR_OPS = os.path.join(_LNGB_DIR, "vector_ops") + os.sep
DTYPE_NAMES = {P.F32: "f32", P.F16: "f16"}
COPY_OPS = (P.COPY_GM_TO_UB, P.COPY_UB_TO_GM, P.COPY_UB_TO_UB)


_SHOWN_NAMES = {}  # code file -> how a record shows it (None: inside the instruction layer)


def _shown_name(filename):
    if filename not in _SHOWN_NAMES:
        inside = filename.startswith(_VECTOR_OPS) or filename in _INTERNAL
        shown = (os.path.relpath(filename, os.path.dirname(_LNGB_DIR))
                 if filename.startswith(_LNGB_DIR) else filename)
        _SHOWN_NAMES[filename] = None if inside else shown
    return _SHOWN_NAMES[filename]


def call_site():
    """'file:line' of the innermost caller outside the emulator's instruction layer (the line
    of the operator, or of the user's kernel, that issued the instruction)."""
    frame = sys._getframe(2)
    while frame is not None:
        shown = _shown_name(frame.f_code.co_filename)
        if shown is not None:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


_DTYPE_NAMES = {}
_SCRATCH = threading.local()


def _footprint_scratch():
    """Zeroed read/written flag arrays covering any product's UB and vector registers."""
    if not hasattr(_SCRATCH, "pair"):
        size = max(p.ub_size for p in PRODUCTS.values()) + 8 * 256
        _SCRATCH.pair = (np.zeros(size, np.uint8), np.zeros(size, np.uint8))
    return _SCRATCH.pair


def describe_operands(operands):
    """(role, 'UB@address' or 'GM+offset', position, dtype) for each operand of a call."""
    out = []
    for i, operand in enumerate(operands):
        tensor = getattr(operand, "tensor", operand)
        role = getattr(operand, "name", ("dst", "src")[min(i, 1)])
        dtype = _DTYPE_NAMES.get(tensor.dtype) or _DTYPE_NAMES.setdefault(tensor.dtype,
                                                                          tensor.dtype.name)
        if hasattr(tensor, "address"):
            out.append((role, f"UB@{tensor.address}", tensor.position, dtype))
        else:
            out.append((role, f"GM+{tensor.offset}", "GM", dtype))
    return tuple(out)


@dataclass
class TraceRecord:
    """One executed instruction or event, in issue order."""
    seq: int
    pipe: str
    name: str
    row: Any                 # the resolved instruction row (lngb.vector_ops.program columns)
    operands: tuple          # (role, location, position, dtype) per operand
    source: str              # 'file:line' of the call in the operator or kernel
    mask_after: tuple        # (mode, high word, low word) of the mask register afterwards

    @property
    def is_instruction(self):
        """False for events (barriers, flags, mask setup, scalar accesses)."""
        return self.row[P.OP] < P.EVENT_BASE

    @property
    def dtype(self):
        if not self.is_instruction or self.row[P.OP] in COPY_OPS:
            return None
        dst, src = DTYPE_NAMES[self.row[P.DT_DST]], DTYPE_NAMES[self.row[P.DT_SRC]]
        return dst if dst == src else f"{src}->{dst}"

    @property
    def mask(self):
        """('counter', count) or ('normal', (mask_high, mask_low)) as the instruction used it."""
        if not self.is_instruction or self.row[P.OP] in COPY_OPS:
            return None
        if self.row[P.COUNTER]:
            return ("counter", int(self.row[P.MASK0]))
        return ("normal", (int(self.row[P.MASK1]) & (2**64 - 1), int(self.row[P.MASK0]) & (2**64 - 1)))

    @property
    def repeat(self):
        return int(self.row[P.REPEAT]) if self.is_instruction else None

    @property
    def strides(self):
        """Block and repeat strides (dst, src0, src1) of a vector instruction."""
        if not self.is_instruction or self.row[P.OP] in COPY_OPS:
            return None
        r = self.row
        return {"blk": (int(r[P.DST_BLK]), int(r[P.SRC0_BLK]), int(r[P.SRC1_BLK])),
                "rep": (int(r[P.DST_REP]), int(r[P.SRC0_REP]), int(r[P.SRC1_REP]))}

    @property
    def copy_params(self):
        """DataCopy bursts: blockCount, blockLen, srcStride, dstStride (32-byte units)."""
        if self.row[P.OP] not in COPY_OPS:
            return None
        r = self.row
        return {"blockCount": int(r[P.BLOCK_COUNT]), "blockLen": int(r[P.BLOCK_LEN]),
                "srcStride": int(r[P.SRC_GAP]), "dstStride": int(r[P.DST_GAP])}

    @property
    def bytes_moved(self):
        """(bytes read, bytes written) by the instruction (events: (0, 0))."""
        r, op = self.row, self.row[P.OP]
        if not self.is_instruction:
            return (0, 0)
        if op in COPY_OPS:
            n = 32 * int(r[P.BLOCK_COUNT]) * int(r[P.BLOCK_LEN])
            return (n, n)
        read, written = _footprint_scratch()
        bounds = np.array([read.size, 0], dtype=np.int64)
        footprint(np.asarray(r, dtype=np.int64), read, written, bounds)
        lo, hi = int(bounds[0]), int(bounds[1])
        counts = (int(read[lo:hi].sum()), int(written[lo:hi].sum())) if lo < hi else (0, 0)
        read[lo:hi] = written[lo:hi] = 0
        return counts

    def to_dict(self):
        read, written = self.bytes_moved
        mask = self.mask  # 64-bit words as hex strings: JSON readers keep 53 bits of integers
        if mask is not None and mask[0] == "normal":
            mask = ("normal", [f"{mask[1][0]:#x}", f"{mask[1][1]:#x}"])
        return {"seq": self.seq, "pipe": self.pipe, "name": self.name, "dtype": self.dtype,
                "operands": [list(o) for o in self.operands], "mask": mask,
                "repeat": self.repeat, "strides": self.strides, "copy": self.copy_params,
                "bytes_read": read, "bytes_written": written, "source": self.source,
                "mask_after": {"mode": MaskMode(self.mask_after[0]).name,
                               "high": f"{self.mask_after[1]:#x}",
                               "low": f"{self.mask_after[2]:#x}"}}


PIPES = ("PIPE_S", "PIPE_V", "PIPE_MTE2", "PIPE_MTE3", "PIPE_ALL")


def _event_detail(row):
    op = row[P.OP]
    if op == P.PIPE_BARRIER:
        return f"pipe={PIPES[row[P.DST]]}"
    if op in (P.SET_FLAG, P.WAIT_FLAG):
        return f"{PIPES[row[P.DST]][5:]}->{PIPES[row[P.SRC0]][5:]} id={row[P.SRC1]}"
    if op == P.SET_MASK:
        return (f"mode={MaskMode(row[P.COUNTER]).name} mask="
                f"{int(row[P.MASK1]) & (2**64 - 1):#x}:{int(row[P.MASK0]) & (2**64 - 1):#x}")
    if op == P.SCALAR_ACCESS:
        return f"UB@{row[P.DST]}"
    if op == P.SYNC_ALL:
        return "every core waits for all the others"
    if op == P.UNDEFINE:
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
    elif record.is_instruction:
        c = record.copy_params
        detail = (f"bytes={record.bytes_moved[0]} blocks={c['blockCount']}x{c['blockLen']} "
                  f"gaps={c['srcStride']}/{c['dstStride']}")
    else:
        detail = _event_detail(record.row)
    return f"{record.seq:6d}  {record.pipe:9} {name:20} {operands:44} {detail:44} {record.source}"


def format_listing(records):
    return "\n".join(format_record(r) for r in records)


def write_jsonl(records, path):
    with open(path, "w") as f:
        for record in records:
            f.write(json.dumps(record.to_dict(), default=_jsonable) + "\n")


def _jsonable(value):
    return value.item() if isinstance(value, np.generic) else str(value)


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
    with open(path, "w") as f:
        json.dump(chrome_trace(records, cost), f, default=_jsonable)
