"""TraceRecord: one retired instruction or event, as the core hands it to its observers and
hooks and as `core.trace` holds it. Everything but the sequence number, the operands' names and
the source line is derived from the resolved row and the instruction table."""
import os
import sys
import threading

import numpy as np

from .products import PRODUCTS, core_bytes
from .vector_ops import program as P
from .vector_ops.footprint import footprint
from .vector_ops.table import TABLE
from .vector_ops.types import MaskMode, Pipe
from .vector_ops.walk import copy_bytes

_LNGB_DIR = os.path.dirname(os.path.abspath(__file__))
_INTERNAL = tuple(os.path.join(_LNGB_DIR, name) for name in (
    "core.py", "tensor.py", "record.py", "simulate.py", os.path.join("kernels", "pipe.py")))
_LAYERS = tuple(os.path.join(_LNGB_DIR, d) + os.sep for d in ("vector_ops", "runtime"))
DTYPE_NAMES = {P.F32: "f32", P.F16: "f16", P.I16: "s16"}
_SHOWN_NAMES = {}  # code file -> how a record shows it (None: inside the machine)


def _shown_name(filename):
    if filename not in _SHOWN_NAMES:
        inside = filename.startswith(_LAYERS) or filename in _INTERNAL
        shown = (os.path.relpath(filename, os.path.dirname(_LNGB_DIR))
                 if filename.startswith(_LNGB_DIR) else filename)
        _SHOWN_NAMES[filename] = None if inside else shown
    return _SHOWN_NAMES[filename]


def call_site(depth=2):
    """'file:line' of the innermost caller outside the emulator's machine (the line of the
    operator, or of the user's kernel, that issued the instruction)."""
    frame = sys._getframe(depth)
    while frame is not None:
        shown = _shown_name(frame.f_code.co_filename)
        if shown is not None:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


_DTYPE_NAMES = {}


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


_SCRATCH = threading.local()


def footprint_flags(row):
    """(read, written, lo, hi): flag arrays of the UB bytes the row reads and writes, set in
    [lo, hi); the caller must zero them there (`clear_footprint`) when done. Until then they
    are out of the thread's store, so a caller stopped halfway (Ctrl-C) leaves no set flags to
    the next one (it makes a fresh pair)."""
    pair = vars(_SCRATCH).pop("pair", None)
    if pair is None:
        size = max(core_bytes(p.ub_size) for p in PRODUCTS.values())
        pair = (np.zeros(size, np.uint8), np.zeros(size, np.uint8))
    read, written = pair
    bounds = np.array([read.size, 0], dtype=np.int64)
    footprint(np.asarray(row, dtype=np.int64), read, written, bounds)
    return read, written, int(bounds[0]), int(bounds[1])


def clear_footprint(read, written, lo, hi):
    """Zero what footprint_flags set and give the pair back to the thread's store."""
    read[lo:hi] = written[lo:hi] = 0
    _SCRATCH.pair = (read, written)


class TraceRecord:
    """One executed instruction or event, in issue order."""

    __slots__ = ("seq", "row", "operands", "source")

    def __init__(self, seq, row, operands, source):
        self.seq = seq            # 1 + the instructions and events the core retired before it
        self.row = row            # the resolved row (lngb.vector_ops.program columns)
        self.operands = operands  # (role, location, position, dtype) per operand
        self.source = source      # 'file:line' of the call in the operator or kernel

    def __repr__(self):
        return f"TraceRecord(#{self.seq} {self.name} at {self.source})"

    @property
    def entry(self):
        return TABLE.by_opcode[int(self.row[P.OP])]

    @property
    def name(self):
        return self.entry.name

    @property
    def pipe(self):
        return Pipe(int(self.row[P.PIPE])).name

    @property
    def mask_after(self):
        """(mode, high word, low word) of the mask register after the record."""
        r = self.row
        return (MaskMode(int(r[P.REG_MODE])), P.as_uint64(r[P.REG_HIGH]),
                P.as_uint64(r[P.REG_LOW]))

    @property
    def is_instruction(self):
        """False for events (barriers, flags, mask setup, scalar accesses)."""
        return self.row[P.KIND] != P.EVENT

    @property
    def is_vector(self):
        return self.row[P.KIND] in (P.ELEMENTWISE, P.REDUCE, P.BROADCAST, P.SELECT)

    @property
    def dtype(self):
        if not self.is_vector:
            return None
        dst, src = DTYPE_NAMES[self.row[P.DT_DST]], DTYPE_NAMES[self.row[P.DT_SRC]]
        return dst if dst == src else f"{src}->{dst}"

    @property
    def mask(self):
        """('counter', count) or ('normal', (mask_high, mask_low)) as the instruction used it."""
        if not self.is_vector:
            return None
        if self.row[P.COUNTER]:
            return ("counter", int(self.row[P.MASK0]))
        return ("normal", (P.as_uint64(self.row[P.MASK1]), P.as_uint64(self.row[P.MASK0])))

    @property
    def repeat(self):
        return int(self.row[P.REPEAT]) if self.is_instruction else None

    @property
    def strides(self):
        """Block and repeat strides (dst, src0, src1) of a vector instruction."""
        if not self.is_vector:
            return None
        r = self.row
        return {"blk": (int(r[P.DST_BLK]), int(r[P.SRC0_BLK]), int(r[P.SRC1_BLK])),
                "rep": (int(r[P.DST_REP]), int(r[P.SRC0_REP]), int(r[P.SRC1_REP]))}

    @property
    def copy_params(self):
        """DataCopy bursts: blockCount, blockLen, srcStride, dstStride (32-byte units)."""
        if self.row[P.KIND] != P.COPY:
            return None
        r = self.row
        return {"blockCount": int(r[P.BLOCK_COUNT]), "blockLen": int(r[P.BLOCK_LEN]),
                "srcStride": int(r[P.SRC_GAP]), "dstStride": int(r[P.DST_GAP])}

    @property
    def bytes_moved(self):
        """(bytes read, bytes written) by the instruction (events: (0, 0))."""
        if not self.is_instruction:
            return (0, 0)
        if self.row[P.KIND] == P.COPY:
            n = int(copy_bytes(self.row))
            return (n, n)
        read, written, lo, hi = footprint_flags(self.row)
        counts = (int(read[lo:hi].sum()), int(written[lo:hi].sum())) if lo < hi else (0, 0)
        clear_footprint(read, written, lo, hi)
        return counts

    def renumbered(self, seq):
        return TraceRecord(seq, self.row, self.operands, self.source)

    def to_dict(self):
        read, written = self.bytes_moved
        mask = self.mask  # 64-bit words as hex strings: JSON readers keep 53 bits of integers
        if mask is not None and mask[0] == "normal":
            mask = ("normal", [f"{mask[1][0]:#x}", f"{mask[1][1]:#x}"])
        mode, high, low = self.mask_after
        return {"seq": self.seq, "pipe": self.pipe, "name": self.name, "dtype": self.dtype,
                "operands": [list(o) for o in self.operands], "mask": mask,
                "repeat": self.repeat, "strides": self.strides, "copy": self.copy_params,
                "bytes_read": read, "bytes_written": written, "source": self.source,
                "mask_after": {"mode": mode.name, "high": f"{high:#x}", "low": f"{low:#x}"}}
