"""Fuzz every public function and every instruction with hostile arguments.

Each target starts from a valid call (valid tensors on a fresh core whose UB is full of data,
valid numbers) and hypothesis replaces one to three of its arguments (positional, keyword, or a
field of a repeat-parameter / tiling struct) with values from a hostile pool: odd and huge ints,
NaN and infinities, bools, None, strings, bytes, containers, numpy scalars, dtypes and arrays of
every kind, arbitrary objects, tensors of another core or at odd offsets, GlobalTensors, enum
members of the wrong enum, ...

The contract checked on every call:

- it returns, or raises an `lngb.LngbError` (a `TypeError` only in `test_arity`, for a wrong
  number of positional arguments or an unknown keyword);
- on an error, the UB, the mask register (and the flags, the sequence number, the allocator and
  the trace) of every core involved are unchanged;
- the caller's numpy arrays (and lists, dicts and structs) are never modified, except the
  GlobalTensor destination of a successful DataCopy UB -> GM;
- no warning other than an `lngb.LngbWarning` (numpy floating-point warnings are off).

`LNGB_FUZZ_SCALE` (default 1) multiplies the number of examples; under NUMBA_DISABLE_JIT=1 the
file runs half as many.
"""
import collections
import copy
import dataclasses
import decimal
import enum
import fractions
import functools
import inspect
import os
import signal
import threading
import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lngb
from lngb import vector_ops as V
from lngb.vector_ops import (MASK_PLACEHOLDER, PIPE_ALL, PIPE_S, PIPE_V, BinaryRepeatParams,
                             BlockReduceSum, Cast, DataCopy, DataCopyParams, Duplicate, HardEvent,
                             MaskMode, PairReduceSum, PipeBarrier, ResetMask, RoundMode, SetFlag,
                             SetMaskCount, SetMaskNorm, SetVectorMask, SyncAll, UnaryRepeatParams,
                             WaitFlag, WholeReduceSum)

try:
    import resource
except ImportError:  # not on Windows: no address-space limit there
    resource = None

JIT = not numba.config.DISABLE_JIT
SCALE = float(os.environ.get("LNGB_FUZZ_SCALE", "1")) * (2.0 if JIT else 1.0)
CALL_SECONDS = 20 if JIT else 60   # a call running longer is reported as a hang
HEADROOM = 4 << 30                 # address space a call may take (MemoryError beyond)
PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")
MODES = ("fast", "observed", "checked")
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
GARBAGE = np.random.default_rng(2024).integers(0, 256, max(map(lngb.AICore.ub_bytes, PRODUCTS)),
                                               dtype=np.uint8)


# --- the hostile pool --------------------------------------------------------------------------

class H:
    """A hostile value: `make(ctx)` builds a fresh one (arrays and containers are new each time);
    `label` is how reports show it (a Python expression where possible)."""

    def __init__(self, label, make):
        self.label, self.make = label, make

    def __repr__(self):
        return self.label


def _value(label, value):
    """A pool entry for an immutable value."""
    return H(label, lambda ctx: value)


def _fresh(label, make):
    """A pool entry built anew for every call (mutable values, tensors)."""
    return H(label, make)


def _readonly(a):
    a.setflags(write=False)
    return a


def _unchecked_in_arena(arena, offset, dtype, size):
    """What GlobalTensor.in_arena made of these arguments before it checked them."""
    view = arena[offset:offset + size * np.dtype(dtype).itemsize].view(dtype)
    return lngb.GlobalTensor(view, _gm=arena, _offset=offset, _size=size)


INTS = [0, 1, -1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 4095, 4096,
        65535, 65536, 2**31 - 1, 2**31, -2**31, 2**32, 2**63, -2**63, 2**64 - 1, 2**64]
POOL = (
    [_value(repr(i), i) for i in INTS]
    + [_value("10**400", 10**400), _value("-10**400", -10**400)]
    + [_value(label, v) for label, v in (
        ("0.0", 0.0), ("-0.0", -0.0), ("0.5", 0.5), ("1.5", 1.5), ("64.0", 64.0), ("-1.0", -1.0),
        ("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")), ("1e300", 1e300),
        ("5e-324", 5e-324), ("2.0**64", 2.0**64),
        ("True", True), ("False", False), ("None", None),
        ("''", ""), ("'x'", "x"), ("'float32'", "float32"), ("'float16'", "float16"),
        ("'bogus'", "bogus"), ("'VECIN'", "VECIN"), ("'LCM'", "LCM"), ("'VREG'", "VREG"),
        ("'GM'", "GM"), ("'atlas-350'", "atlas-350"), ("'atlas-training'", "atlas-training"),
        ("'observed'", "observed"), ("'checked'", "checked"), ("'res_for_gamma'", "res_for_gamma"),
        ("'Mul'", "Mul"), ("'outputPdGamma'", "outputPdGamma"), ("'64'", "64"), ("'\\x00'", "\x00"),
        ("b''", b""), ("b'x'", b"x"), ("bytes(80)", bytes(80)),
        ("()", ()), ("(1, 8, 8)", (1, 8, 8)), ("(1, 8, 7)", (1, 8, 7)), ("(0, 8, 8)", (0, 8, 8)),
        ("(-1, 8, 8)", (-1, 8, 8)), ("(1, 8, 8, 16)", (1, 8, 8, 16)),
        ("(2**31, 2**31, 2**31)", (2**31, 2**31, 2**31)), ("(1.5, 8, 8)", (1.5, 8, 8)),
        ("frozenset()", frozenset()), ("range(3)", range(3)),
        ("1j", 1j), ("Fraction(1, 2)", fractions.Fraction(1, 2)),
        ("Decimal('1.5')", decimal.Decimal("1.5")), ("Ellipsis", Ellipsis), ("slice(1)", slice(1)),
        ("object", object), ("len", len), ("type", type),
        ("np.int8(-1)", np.int8(-1)), ("np.int32(64)", np.int32(64)), ("np.int64(64)", np.int64(64)),
        ("np.uint8(255)", np.uint8(255)), ("np.uint32(2**32-1)", np.uint32(2**32 - 1)),
        ("np.uint64(2**64-1)", np.uint64(2**64 - 1)), ("np.float16(nan)", np.float16(np.nan)),
        ("np.float16(1.5)", np.float16(1.5)), ("np.float32(64)", np.float32(64)),
        ("np.float64(inf)", np.float64(np.inf)), ("np.float64(0.5)", np.float64(0.5)),
        ("np.bool_(True)", np.bool_(True)), ("np.bool_(False)", np.bool_(False)),
        ("np.complex64(1j)", np.complex64(1j)), ("np.str_('float32')", np.str_("float32")),
        ("np.datetime64('2020')", np.datetime64("2020")), ("np.timedelta64(1)", np.timedelta64(1)),
        ("np.float32", np.float32), ("np.float16", np.float16), ("np.float64", np.float64),
        ("np.int32", np.int32), ("np.uint8", np.uint8), ("np.dtype('S')", np.dtype("S")),
        ("np.dtype('>f4')", np.dtype(">f4")), ("np.dtype([('a', 'f4')])", np.dtype([("a", "f4")])),
        ("np.dtype(object)", np.dtype(object)), ("complex", complex),
        ("MASK_PLACEHOLDER", MASK_PLACEHOLDER), ("RoundMode.CAST_FLOOR", RoundMode.CAST_FLOOR),
        ("RoundMode.CAST_NONE", RoundMode.CAST_NONE), ("MaskMode.COUNTER", MaskMode.COUNTER),
        ("PIPE_S", PIPE_S), ("PIPE_V", PIPE_V), ("PIPE_ALL", PIPE_ALL),
        ("HardEvent.V_S", HardEvent.V_S), ("HardEvent.MTE2_V", HardEvent.MTE2_V),
        ("lngb.PRODUCTS['atlas-350']", lngb.PRODUCTS["atlas-350"]),
        ("lngb.LngbError", lngb.LngbError))]
    + [_fresh(label, make) for label, make in (
        ("bytearray(80)", lambda c: bytearray(80)), ("memoryview(bytes(80))",
                                                     lambda c: memoryview(bytes(80))),
        ("[]", lambda c: []), ("[0]", lambda c: [0]), ("[64]", lambda c: [64]),
        ("[1, 2]", lambda c: [1, 2]), ("[0, 0]", lambda c: [0, 0]),
        ("[2**64-1, 2**64-1]", lambda c: [2**64 - 1, 2**64 - 1]), ("[1, 2, 3]", lambda c: [1, 2, 3]),
        ("[[1, 2]]", lambda c: [[1, 2]]), ("[0.5, 1.5]", lambda c: [0.5, 1.5]),
        ("[(1, 8, 8)]", lambda c: [(1, 8, 8)]), ("[(2**31, 2**31, 2**31)]",
                                                 lambda c: [(2**31, 2**31, 2**31)]),
        ("['float32']", lambda c: ["float32"]), ("['atlas-a2']", lambda c: ["atlas-a2"]),
        ("[None]", lambda c: [None]), ("{1, 2}", lambda c: {1, 2}),
        ("{}", lambda c: {}), ("{'a': 1}", lambda c: {"a": 1}), ("{0: 1}", lambda c: {0: 1}),
        ("object()", lambda c: object()), ("lambda *a: None", lambda c: lambda *a: None),
        ("np.array(5)", lambda c: np.array(5)), ("np.array(5.0, np.float32)",
                                                 lambda c: np.array(5.0, np.float32)),
        ("np.empty(0, np.float32)", lambda c: np.empty(0, np.float32)),
        ("np.array([64, 0])", lambda c: np.array([64, 0])),
        ("np.array([2**64-1, 0], np.uint64)", lambda c: np.array([2**64 - 1, 0], np.uint64)),
        ("np.arange(64, dtype=np.float32)", lambda c: np.arange(64, dtype=np.float32)),
        ("np.zeros(80, np.uint8)", lambda c: np.zeros(80, np.uint8)),
        ("np.ones((1, 8, 8), np.float32)", lambda c: np.ones((1, 8, 8), np.float32)),
        ("np.ones((1, 8, 8), np.float16)", lambda c: np.ones((1, 8, 8), np.float16)),
        ("np.ones((1, 8, 16), np.float16)", lambda c: np.ones((1, 8, 16), np.float16)),
        ("np.ones((1, 8, 8), np.float64)", lambda c: np.ones((1, 8, 8), np.float64)),
        ("np.ones((1, 8, 8), np.int32)", lambda c: np.ones((1, 8, 8), np.int32)),
        ("np.ones((1, 8, 8), np.complex64)", lambda c: np.ones((1, 8, 8), np.complex64)),
        ("np.full((1, 8, 8), None, object)", lambda c: np.full((1, 8, 8), None, object)),
        ("np.ones((1, 8, 8), '>f4')", lambda c: np.ones((1, 8, 8), ">f4")),
        ("np.zeros((1, 8, 8), [('a', 'f4')])", lambda c: np.zeros((1, 8, 8), [("a", "f4")])),
        ("np.ones((2, 3), np.float32)", lambda c: np.ones((2, 3), np.float32)),
        ("np.ones((1, 8, 7), np.float32)", lambda c: np.ones((1, 8, 7), np.float32)),
        ("np.ones((0, 8, 8), np.float32)", lambda c: np.ones((0, 8, 8), np.float32)),
        ("np.ones((1, 8, 16), np.float32)[:, :, ::2]",
         lambda c: np.ones((1, 8, 16), np.float32)[:, :, ::2]),
        ("np.asfortranarray(np.ones((1, 8, 8), np.float32))",
         lambda c: np.asfortranarray(np.ones((1, 8, 8), np.float32))),
        ("read-only np.ones((1, 8, 8), np.float32)",
         lambda c: _readonly(np.ones((1, 8, 8), np.float32))),
        ("np.broadcast_to(np.float32(1), (1, 8, 8))",
         lambda c: np.broadcast_to(np.float32(1), (1, 8, 8))),
        ("np.broadcast_to(np.float32(0), (1, 2**20, 2**20))",
         lambda c: np.broadcast_to(np.float32(0), (1, 2**20, 2**20))),
        ("np.full((1, 8, 8), np.nan, np.float32)", lambda c: np.full((1, 8, 8), np.nan, np.float32)),
        ("core", lambda c: c.core),
        ("BinaryRepeatParams()", lambda c: BinaryRepeatParams()),
        ("BinaryRepeatParams(255, 255, 255, 255, 255, 255)",
         lambda c: BinaryRepeatParams(255, 255, 255, 255, 255, 255)),
        ("UnaryRepeatParams()", lambda c: UnaryRepeatParams()),
        ("UnaryRepeatParams(65535, 65535, 255, 255)",
         lambda c: UnaryRepeatParams(65535, 65535, 255, 255)),
        ("DataCopyParams()", lambda c: DataCopyParams()),
        ("DataCopyParams(4095, 65535, 65535, 65535)",
         lambda c: DataCopyParams(4095, 65535, 65535, 65535)),
        ("LayerNormGradBetaTiling()", lambda c: lngb.LayerNormGradBetaTiling()),
        ("tiling((1, 8, 8), 64, 4)",
         lambda c: lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 64, 4, False)),
        ("tiling((1, 8, 8), 128, 2)",
         lambda c: lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 128, 2, False)),
        ("tiling((1, 8, 8), 64, 4) with hLength=2**32-1",
         lambda c: dataclasses.replace(lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 64, 4,
                                                                             False),
                                       hLength=2**32 - 1)),
        ("LayerNormGradTiling()", lambda c: lngb.LayerNormGradTiling()),
        ("lng_tiling((1, 24, 16), 6144, 4)",
         lambda c: lngb.GetLayerNormGradNDTilingInfo((1, 24, 16), 6144, 4, False)),
        ("lng_tiling((1, 24, 16), 4608, 2)",
         lambda c: lngb.GetLayerNormGradNDTilingInfo((1, 24, 16), 4608, 2, False)),
        ("lng_tiling((1, 8, 16), 2**20, 4)",
         lambda c: lngb.GetLayerNormGradNDTilingInfo((1, 8, 16), 2**20, 4, False)),
        ("lng_tiling((1, 24, 16), 128, 4, product='atlas-350')",
         lambda c: lngb.GetLayerNormGradNDTilingInfo((1, 24, 16), 128, 4, False,
                                                     product="atlas-350")),
        ("LayerNormGradShapeInfo('NZ')", lambda c: lngb.LayerNormGradShapeInfo("NZ")),
        ("<f32[256] on another core>", lambda c: c.other_tensor(256, F32)),
        ("<f16[128] on another core>", lambda c: c.other_tensor(128, F16)),
        ("<f32[256]>", lambda c: c.scratch(F32)),
        ("<f16[256]>", lambda c: c.scratch(F16)),
        ("<f32[256]>[1]", lambda c: c.scratch(F32)[1]),
        ("<f32[256]>[8]", lambda c: c.scratch(F32)[8]),
        ("<f32[256]>[255]", lambda c: c.scratch(F32)[255]),
        ("<f16[256]>[3]", lambda c: c.scratch(F16)[3]),
        ("<f32 view at byte +1>",
         lambda c: c.scratch(F32).ReinterpretCast(np.uint8)[1].ReinterpretCast(np.float32)),
        ("<i32[64]>", lambda c: c.scratch(np.int32)),
        ("<u8[256]>", lambda c: c.scratch(np.uint8)),
        ("core.vreg(0, np.float32)", lambda c: c.core.vreg(0, np.float32)),
        ("core.pop_stack_buffer()", lambda c: c.core.pop_stack_buffer()),
        ("GlobalTensor(np.zeros(64, np.float32))",
         lambda c: lngb.GlobalTensor(np.zeros(64, np.float32))),
        ("GlobalTensor(np.zeros(128, np.float16))",
         lambda c: lngb.GlobalTensor(np.zeros(128, np.float16))),
        ("GlobalTensor(read-only np.zeros(64, np.float32))",
         lambda c: lngb.GlobalTensor(_readonly(np.zeros(64, np.float32)))),
        ("GlobalTensor(np.zeros(0, np.float32))",
         lambda c: lngb.GlobalTensor(np.zeros(0, np.float32))),
        ("GlobalTensor(np.zeros(64, np.int64))",
         lambda c: lngb.GlobalTensor(np.zeros(64, np.int64))),
        ("GlobalTensor(np.zeros(64, np.float32))[1]",
         lambda c: lngb.GlobalTensor(np.zeros(64, np.float32))[1]),
        ("GlobalTensor.in_arena(np.zeros(512, np.uint8), 2, np.float32, 64)",
         lambda c: lngb.GlobalTensor.in_arena(np.zeros(512, np.uint8), 2, np.float32, 64)),
        # in_arena refuses these two (size < 0, an arena that is not uint8): built unchecked,
        # as it once built them, they stay hostile values for the calls that take GM tensors
        ("<unchecked in_arena(np.zeros(512, np.uint8), 0, np.float32, -1)>",
         lambda c: _unchecked_in_arena(np.zeros(512, np.uint8), 0, np.float32, -1)),
        ("<unchecked in_arena(np.zeros(256, np.float32), 0, np.float32, 64)>",
         lambda c: _unchecked_in_arena(np.zeros(256, np.float32), 0, np.float32, 64)),
    )]
    + ([_fresh("BrcbRepeatParams()", lambda c: V.BrcbRepeatParams())]
       if hasattr(V, "BrcbRepeatParams") else [])
)


# --- a fresh core per example -------------------------------------------------------------------

def fill(core):
    """Data in every UB byte (and the vector registers), initialised for the sanitizer."""
    core.ub[:] = GARBAGE[:core.ub.size]
    core.host_write(0, core.ub.size)


class Ctx:
    """One example's world: a fresh core of `product` in `mode` with its UB full of data, and,
    on demand, another core and scratch tensors for the hostile pool."""

    def __init__(self, product, mode, pick):
        self.product, self.mode, self.pick = product, mode, pick
        self.core = lngb.AICore(product, mode)
        fill(self.core)
        self._other = None
        self._scratch = {}

    def t(self, n, dtype=F32, position="VECCALC"):
        return self.core.alloc(n, dtype, position)

    def scratch(self, dtype):
        dtype = np.dtype(dtype)
        if dtype not in self._scratch:
            self._scratch[dtype] = self.core.alloc(256 * 4 // dtype.itemsize, dtype)
        return self._scratch[dtype]

    def other_tensor(self, n, dtype):
        if self._other is None:
            self._other = lngb.AICore("atlas-a2")
            fill(self._other)
        return self._other.alloc(n, dtype)


def _kind(value):
    """A coarse type, to draw replacements of the same kind more often than the rest."""
    if isinstance(value, (lngb.LocalTensor, lngb.GlobalTensor)):
        return "tensor"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    for kind, types in (("int", (int, np.integer)), ("float", (float, np.floating)),
                        ("str", str), ("array", np.ndarray), ("enum", enum.Enum),
                        ("dtype", (type, np.dtype))):
        if isinstance(value, types):
            return kind
    return "struct" if _is_struct(value) else "other"


def _related_pools():
    ctx = Ctx("atlas-a2", "fast", lambda options, label: options[0])
    pools = {}
    for h in POOL:
        pools.setdefault(_kind(h.make(ctx)), []).append(h)
    return pools


# --- calls -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Call:
    """fn(*args, **kwargs); `fixed`: positional arguments that are the receiver (never replaced,
    their struct fields may be); `cores`: cores to check beyond those of the arguments;
    `gm_dst`: a DataCopy (a GlobalTensor destination may be written on success); `enter`: run
    inside `with core:`; `cleanup`: run after the call; `predicates`: arguments that are the
    caller's callables, predicates or kernels (a callable put there is wrapped so that what it
    raises is not lngb's doing)."""
    name: str
    fn: object
    args: list
    kwargs: dict = dataclasses.field(default_factory=dict)
    fixed: tuple = ()
    cores: tuple = ()
    gm_dst: bool = False
    enter: object = None
    cleanup: object = None
    labels: dict = dataclasses.field(default_factory=dict)
    predicates: tuple = ()

    def slots(self):
        out = [i for i in range(len(self.args)) if i not in self.fixed] + list(self.kwargs)
        for key, value in [*enumerate(self.args), *self.kwargs.items()]:
            if _is_struct(value):
                out += [(key, f.name) for f in dataclasses.fields(value)]
        return out

    def current(self, slot):
        """The value in `slot` now (None for the field of a struct that was replaced)."""
        if isinstance(slot, tuple):
            key, field = slot
            holder = self.args if isinstance(key, int) else self.kwargs
            return getattr(holder[key], field) if _has_field(holder[key], field) else None
        return self.args[slot] if isinstance(slot, int) else self.kwargs[slot]

    def replace(self, slot, h, ctx):
        value = h.make(ctx)
        if isinstance(slot, tuple):
            key, field = slot
            holder = self.args if isinstance(key, int) else self.kwargs
            if not _has_field(holder[key], field):
                return  # the struct itself was replaced already
            holder[key] = copy.copy(holder[key])
            object.__setattr__(holder[key], field, value)
        elif isinstance(slot, int):
            if slot in self.predicates and callable(value) and not isinstance(value, (int, str)):
                value = _predicate(value)
            self.args[slot] = value
        else:
            self.kwargs[slot] = value
        self.labels[slot] = h.label

    def describe(self):
        def show(key, value):
            if key in self.labels:
                return self.labels[key]
            text = _short(value)
            if _is_struct(value):
                fields = [f"{f.name}={self.labels[key, f.name]}" for f in dataclasses.fields(value)
                          if (key, f.name) in self.labels]
                if fields:
                    text = f"{type(value).__name__}(...) with {', '.join(fields)}"
            return text
        parts = [show(i, a) for i, a in enumerate(self.args)]
        parts += [f"{k}={show(k, v)}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"

    def run(self):
        if self.enter is not None:
            with self.enter:
                return self.fn(*self.args, **self.kwargs)
        return self.fn(*self.args, **self.kwargs)


def _predicate(fn):
    """fn as a predicate (or kernel) whose own exceptions (a type called with a record, ...) mean
    False."""
    def predicate(*args):   # a hook or predicate gets a record; a kernel its GlobalTensors
        try:
            return bool(fn(*args))
        except Exception:  # noqa: BLE001 - the caller's callable, not lngb
            return False
    return predicate


def _is_struct(value):
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _has_field(value, field):
    return _is_struct(value) and field in {f.name for f in dataclasses.fields(value)}


def _short(value):
    if isinstance(value, lngb.LocalTensor):
        return f"<{value.dtype.name}[{value.size}]@{value.address}>"
    if isinstance(value, np.ndarray):
        return f"<array {value.dtype} {value.shape}>"
    if isinstance(value, lngb.AICore):
        return "core"
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


# --- the checks --------------------------------------------------------------------------------

class FuzzFailure(AssertionError):
    pass


class CallTimeout(Exception):
    pass


def fail(message, cause=None):
    """Report a broken contract (a collector may replace this to gather them all)."""
    raise FuzzFailure(message) from cause


def _walk(value, seen, depth=0):
    """Every object reachable from an argument through containers, structs and GlobalTensors."""
    if id(value) in seen or depth > 4:
        return
    seen[id(value)] = value
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _walk(v, seen, depth + 1)
    elif isinstance(value, dict):
        for v in (*value.keys(), *value.values()):
            _walk(v, seen, depth + 1)
    elif isinstance(value, lngb.GlobalTensor):
        _walk(value.array, seen, depth + 1)
        _walk(value.gm, seen, depth + 1)
    elif _is_struct(value):
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), seen, depth + 1)


def core_state(core):
    return {"UB": core.ub.copy(),
            "mask register": (core.mask_mode, core.mask_high, core.mask_low),
            "flags": dict(core.flags), "seq": core.seq, "allocated": core.allocated,
            "trace length": len(core.trace)}


def _differences(before, core):
    now = core_state(core)
    out = []
    for key, value in before.items():
        if key == "UB":
            if not np.array_equal(value, now[key]):
                changed = np.flatnonzero(value != now[key])
                out.append(f"UB bytes [{changed[0]}, {changed[-1] + 1}) changed")
        elif value != now[key]:
            out.append(f"{key} {value!r} -> {now[key]!r}")
    return out


def _array_state(a):
    """What must not change: the array's layout and the bytes of the memory it views (for a huge
    view such as a broadcast, the bytes of the array that owns the memory)."""
    owner = a
    while a.nbytes > 1 << 24 and isinstance(owner.base, np.ndarray):
        owner = owner.base
    data = a.tobytes() if owner is a else (owner.nbytes, owner.tobytes())
    return (a.dtype, a.shape, a.strides, a.flags.writeable, data)


@dataclasses.dataclass
class Snapshot:
    cores: list
    arrays: list
    others: list


def snapshot(call, ctx):
    seen = {}
    for value in [*call.args, *call.kwargs.values()]:
        _walk(value, seen)
    objs = list(seen.values())
    cores = {id(c): c for c in [ctx.core, *call.cores]}
    for o in objs:
        if isinstance(o, lngb.LocalTensor):
            cores[id(o.core)] = o.core
        if isinstance(o, lngb.AICore):
            cores[id(o)] = o
    arrays = [(a, _array_state(a)) for a in objs if isinstance(a, np.ndarray)]
    others = [(o, repr(o)) for o in objs
              if isinstance(o, (list, dict, set, bytearray)) or _is_struct(o)]
    return Snapshot([(c, core_state(c)) for c in cores.values()], arrays, others)


def _timeout(signum, frame):
    raise CallTimeout(f"the call ran for more than {CALL_SECONDS} s")


class Guard:
    """Around one call: numpy FP warnings off, warnings recorded (`other_warnings`: those that
    are not LngbWarnings), a time limit and an address-space limit (so a runaway allocation is
    a MemoryError, not a dead machine)."""

    def __enter__(self):
        self.errstate = np.errstate(all="ignore")
        self.errstate.__enter__()
        self.warnings = warnings.catch_warnings(record=True)
        self.log = self.warnings.__enter__()
        warnings.simplefilter("always")
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            self.old_handler = signal.signal(signal.SIGALRM, _timeout)
            signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
        self.limits = None
        try:
            if resource is None:
                raise OSError("no resource module")
            with open("/proc/self/statm") as f:
                vm = int(f.read().split()[0]) * resource.getpagesize()
            self.limits = resource.getrlimit(resource.RLIMIT_AS)
            hard = self.limits[1]
            soft = vm + HEADROOM if hard == resource.RLIM_INFINITY else min(vm + HEADROOM, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        except (OSError, ValueError):
            self.limits = None
        return self

    def __exit__(self, *exc):
        if self.limits is not None:
            resource.setrlimit(resource.RLIMIT_AS, self.limits)
        if self.main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old_handler)
        self.warnings.__exit__(*exc)
        self.errstate.__exit__(*exc)
        self.other_warnings = [f"{w.category.__name__}: {w.message}" for w in self.log
                               if not issubclass(w.category, lngb.LngbWarning)]
        return False


def check_call(call, ctx, allow_type_error=False):
    """Run the call and check the contract (see the module docstring)."""
    before = snapshot(call, ctx)
    error = None
    guard = Guard()
    try:
        with guard:
            try:
                call.run()
            finally:
                if call.cleanup is not None:
                    call.cleanup()
    except Exception as exc:  # noqa: BLE001 - every exception is judged below
        error = exc
    allowed = (lngb.LngbError, TypeError) if allow_type_error else (lngb.LngbError,)
    problems = [f"it warned {w}" for w in getattr(guard, "other_warnings", ())]
    exclude = []
    if error is None and call.gm_dst and call.args and isinstance(call.args[0], lngb.GlobalTensor):
        exclude = [call.args[0].gm]  # written as asked
    if error is not None:
        for core, state in before.cores:
            problems += [f"core {core!r}: {d}" for d in _differences(state, core)]
    for a, state in before.arrays:
        if any(np.may_share_memory(a, e) for e in exclude):
            continue
        if _array_state(a) != state:
            problems.append(f"a caller's array {_short(a)} was modified")
    for o, text in before.others:
        if repr(o) != text:
            problems.append(f"a caller's {type(o).__name__} changed: {text} -> {o!r}")
    what = call.describe()
    if error is not None and not isinstance(error, allowed):
        extra = f" (and: {'; '.join(problems)})" if problems else ""
        fail(f"{what} raised {type(error).__name__}: {error}{extra}", error)
    elif problems:
        outcome = "succeeded" if error is None else f"raised {type(error).__name__}: {error}"
        fail(f"{what} {outcome}, but: {'; '.join(problems)}", error)


# --- the targets: a valid call each -------------------------------------------------------------

def _have(*names):
    """The instructions of lngb.vector_ops among `names` (later versions add some)."""
    return [getattr(V, n) for n in names if hasattr(V, n)]


BINARY_OPS = _have("Add", "Sub", "Mul", "Div", "Max", "Min")
SCALAR_OPS = _have("Adds", "Muls", "Maxs", "Mins")
UNARY_OPS = _have("Sqrt", "Abs", "Relu")

TARGETS = {}


def target(name, examples=40, products=PRODUCTS, modes=MODES):
    def register(build):
        TARGETS[name] = (build, examples, products, modes)
        return build
    return register


def _floats(ctx):
    return ctx.pick([F32, F16], "dtype")


@target("binary", 120)
def _binary(ctx):
    op = ctx.pick(BINARY_OPS, "op")
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    d, s0, s1 = ctx.t(n, dtype), ctx.t(n, dtype), ctx.t(n, dtype)
    form = ctx.pick(["count", "continuous", "bitwise", "placeholder"], "form")
    if form == "count":
        return Call(op.__name__, op, [d, s0, s1, n])
    mask = {"continuous": n // 2, "bitwise": [2**64 - 1, 2**64 - 1 if n == 128 else 0],
            "placeholder": MASK_PLACEHOLDER}[form]
    return Call(op.__name__, op, [d, s0, s1, mask, 1, BinaryRepeatParams()],
                {"is_set_mask": form != "placeholder"}, enter=ctx.core)


@target("scalar", 80)
def _scalar(ctx):
    op = ctx.pick(SCALAR_OPS, "op")
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    d, s = ctx.t(n, dtype), ctx.t(n, dtype)
    if ctx.pick(["count", "mask"], "form") == "count":
        return Call(op.__name__, op, [d, s, 1.5, n])
    return Call(op.__name__, op, [d, s, 1.5, n, 1, UnaryRepeatParams()], {"is_set_mask": True},
                enter=ctx.core)


if UNARY_OPS:
    @target("unary", 80)
    def _unary(ctx):
        op = ctx.pick(UNARY_OPS, "op")
        dtype = _floats(ctx)
        n = 256 // dtype.itemsize
        d, s = ctx.t(n, dtype), ctx.t(n, dtype)
        if ctx.pick(["count", "mask"], "form") == "count":
            return Call(op.__name__, op, [d, s, n])
        return Call(op.__name__, op, [d, s, n, 1, UnaryRepeatParams()], {"is_set_mask": True},
                    enter=ctx.core)


if hasattr(V, "Brcb"):
    @target("Brcb", 60)
    def _brcb(ctx):
        dtype = _floats(ctx)
        dst, src = ctx.t(256 // dtype.itemsize, dtype), ctx.t(64, dtype)
        return Call("Brcb", V.Brcb, [dst, src, 1, V.BrcbRepeatParams(1, 8)], enter=ctx.core)


if hasattr(V, "DuplicateLane"):
    @target("DuplicateLane", 60)
    def _duplicate_lane(ctx):
        dtype = _floats(ctx)
        dst = ctx.core.vreg(5, dtype)
        if ctx.pick(["UB", "register"], "src") == "UB":  # any element-aligned address
            src = ctx.t(64, dtype)[ctx.pick([0, 1, 7, 63], "src element")]
        else:
            src = ctx.core.vreg(6, dtype)
        return Call("DuplicateLane", V.DuplicateLane, [dst, src], enter=ctx.core)


@target("SetCmpMask", 40)
def _set_cmp_mask(ctx):
    src = ctx.t(64, _floats(ctx))
    return Call("SetCmpMask", V.SetCmpMask, [src], enter=ctx.core)


@target("Select", 60)
def _select(ctx):
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    d, s0, sel = ctx.t(n, dtype), ctx.t(n, dtype), ctx.t(16, np.uint8)
    return Call("Select", V.Select, [d, sel, s0, 1, BinaryRepeatParams()], enter=ctx.core)


@target("Duplicate", 60)
def _duplicate(ctx):
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    d = ctx.t(n, dtype)
    if ctx.pick(["count", "mask"], "form") == "count":
        return Call("Duplicate", Duplicate, [d, 1.5, n])
    return Call("Duplicate", Duplicate, [d, 1.5, n, 1, 1, 8], {"is_set_mask": True},
                enter=ctx.core)


@target("Cast", 80)
def _cast(ctx):
    narrowing = ctx.pick([True, False], "narrowing")
    dst, src = (ctx.t(64, F16), ctx.t(64, F32)) if narrowing else (ctx.t(64, F32), ctx.t(64, F16))
    if ctx.pick(["count", "mask"], "form") == "count":
        return Call("Cast", Cast, [dst, src, RoundMode.CAST_NONE, 64])
    params = UnaryRepeatParams(dstRepStride=4) if narrowing else UnaryRepeatParams(srcRepStride=4)
    return Call("Cast", Cast, [dst, src, RoundMode.CAST_NONE, 64, 1, params],
                {"is_set_mask": True, "sat_mode": None}, enter=ctx.core)


@target("BlockReduceSum-PairReduceSum", 80)
def _block_pair_reduce(ctx):
    op = ctx.pick([BlockReduceSum, PairReduceSum], "op")
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    dst, src = ctx.t(n, dtype), ctx.t(n, dtype)
    return Call(op.__name__, op, [dst, src, 1, n, 1, 1, 8], {"is_set_mask": True},
                enter=ctx.core)


@target("WholeReduceSum", 60)
def _whole_reduce(ctx):
    dtype = _floats(ctx)
    n = 256 // dtype.itemsize
    dst, src = ctx.t(16, dtype), ctx.t(n, dtype)
    return Call("WholeReduceSum", WholeReduceSum, [dst, src, n, 1, 1, 1, 8], {"is_set_mask": True},
                enter=ctx.core)


@target("DataCopy", 120)
def _datacopy(ctx):
    direction = ctx.pick(["GM->UB", "UB->GM", "UB->UB"], "direction")
    ub = ctx.t(64, F32)
    if direction == "UB->UB":
        dst, src = ctx.t(64, F32), ub
    else:
        gm = lngb.GlobalTensor(np.arange(64, dtype=np.float32))
        dst, src = (ub, gm) if direction == "GM->UB" else (gm, ub)
    count = ctx.pick([64, DataCopyParams(1, 8, 0, 0)], "count_or_params")
    return Call("DataCopy", DataCopy, [dst, src, count], gm_dst=True, enter=ctx.core)


@target("SetVectorMask", 60)
def _set_vector_mask(ctx):
    form = ctx.pick(["words", "length", "counter"], "form")
    if form == "words":
        return Call("SetVectorMask", SetVectorMask, [2**64 - 1, 2**63],
                    {"dtype": np.float32, "mode": MaskMode.NORMAL}, enter=ctx.core)
    if form == "length":
        return Call("SetVectorMask", SetVectorMask, [100], {"dtype": np.float16}, enter=ctx.core)
    return Call("SetVectorMask", SetVectorMask, [0, 300],
                {"dtype": np.float32, "mode": MaskMode.COUNTER}, enter=ctx.core)


@target("PipeBarrier", 30)
def _pipe_barrier(ctx):
    return Call("PipeBarrier", PipeBarrier, [PIPE_V], enter=ctx.core)


@target("SetFlag-WaitFlag", 60)
def _flags(ctx):
    op = ctx.pick([SetFlag, WaitFlag], "op")
    with ctx.core:
        SetFlag(HardEvent.MTE2_V, 1)  # so WaitFlag has one to wait for
    return Call(op.__name__, op, [HardEvent.MTE2_V, 1], enter=ctx.core)


@target("AICore", 60)
def _aicore(ctx):
    kwargs = {"sat_mode": None, "reserved_bytes": None}
    if "div_sqrt" in inspect.signature(lngb.AICore).parameters:
        kwargs["div_sqrt"] = "ieee"
    return Call("lngb.AICore", lngb.AICore, [ctx.product, ctx.mode], kwargs)


@target("core.alloc", 60)
def _alloc(ctx):
    return Call("core.alloc", ctx.core.alloc, [(2, 64), np.float32, "VECIN"])


@target("core.vreg", 40)
def _vreg(ctx):
    return Call("core.vreg", ctx.core.vreg, [3, np.float32])


@target("core.pop_stack_buffer", 40)
def _pop_stack_buffer(ctx):
    return Call("core.pop_stack_buffer", ctx.core.pop_stack_buffer, [np.uint8, "LCM"])


@target("core.register_hook", 30)
def _register_hook(ctx):
    return Call("core.register_hook", ctx.core.register_hook, [lambda record: None])


def _tensor(ctx):
    return ctx.t(64, _floats(ctx))


@target("LocalTensor.getitem", 40)
def _getitem(ctx):
    t = _tensor(ctx)
    return Call("t.__getitem__", t.__getitem__, [8])


@target("LocalTensor.ReinterpretCast", 40)
def _reinterpret(ctx):
    t = _tensor(ctx)
    return Call("t.ReinterpretCast", t.ReinterpretCast, [np.uint8])


@target("LocalTensor.GetValue", 40)
def _get_value(ctx):
    t = _tensor(ctx)
    return Call("t.GetValue", t.GetValue, [3])


@target("LocalTensor.SetValue", 60)
def _set_value(ctx):
    t = _tensor(ctx)
    return Call("t.SetValue", t.SetValue, [3, 1.5])


@target("LocalTensor.write", 60)
def _write(ctx):
    t = _tensor(ctx)
    return Call("t.write", t.write, [np.arange(64, dtype=t.dtype)])


@target("GlobalTensor", 40)
def _global_tensor(ctx):
    return Call("lngb.GlobalTensor", lngb.GlobalTensor, [np.zeros(64, np.float32)])


@target("GlobalTensor.getitem", 40)
def _global_getitem(ctx):
    g = lngb.GlobalTensor(np.zeros(64, np.float32))
    return Call("g.__getitem__", g.__getitem__, [3])


@target("GlobalTensor.in_arena", 60)
def _in_arena(ctx):
    return Call("lngb.GlobalTensor.in_arena", lngb.GlobalTensor.in_arena,
                [np.zeros(512, np.uint8), 32, np.float32, 64])


@target("GetLayerNormGradBetaMaxMinTmpSize", 60)
def _max_min(ctx):
    return Call("lngb.GetLayerNormGradBetaMaxMinTmpSize", lngb.GetLayerNormGradBetaMaxMinTmpSize,
                [(1, 8, 8), 4, False])


@target("GetLayerNormGradBetaNDTilingInfo", 60)
def _nd_tiling(ctx):
    return Call("lngb.GetLayerNormGradBetaNDTilingInfo", lngb.GetLayerNormGradBetaNDTilingInfo,
                [(1, 8, 8), 256, 4, False])


@target("LayerNormGradBetaTiling.from_bytes", 40)
def _from_bytes(ctx):
    data = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 256, 4, False).to_bytes()
    return Call("lngb.LayerNormGradBetaTiling.from_bytes", lngb.LayerNormGradBetaTiling.from_bytes,
                [data])


@target("LayerNormGradBetaTiling.to_bytes", 60)
def _to_bytes(ctx):
    t = lngb.GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 256, 4, False)
    return Call("LayerNormGradBetaTiling.to_bytes", lngb.LayerNormGradBetaTiling.to_bytes, [t],
                fixed=(0,))


@target("LayerNormGradBeta", 150)
def _layer_norm_grad_beta(ctx):
    dtype = _floats(ctx)
    x = (1, 8, 16)
    dy, rfg = ctx.t(x, dtype), ctx.t(x, dtype)
    gamma, beta = ctx.t(16, dtype), ctx.t(16, dtype)
    _, min_bytes = lngb.GetLayerNormGradBetaMaxMinTmpSize(x, dtype.itemsize, False)
    tiling = lngb.GetLayerNormGradBetaNDTilingInfo(x, min_bytes, dtype.itemsize, False)
    kwargs = {"is_reuse_source": False, "reuse_buffer": "input_dy"}
    if ctx.pick(["shared tmp", "framework tmp"], "overload") == "shared tmp":
        tmp = ctx.t(min_bytes, np.uint8)
        args = [gamma, beta, rfg, dy, tmp, tiling]
    else:
        args = [gamma, beta, rfg, dy, tiling]
    return Call("lngb.LayerNormGradBeta", lngb.LayerNormGradBeta, args, kwargs)


LNG_SHAPE = (1, 24, 16)   # with the host's minimum buffer: a full chunk and a shorter tail


def _lng_tiling(ctx, dtype, reuse):
    """LayerNormGrad's tiling for LNG_SHAPE with the host's minimum buffer on ctx.product, and
    the temp bytes its kernel touches (more than the buffer: the host rounds rows up)."""
    size, product = dtype.itemsize, ctx.product
    _, min_bytes = lngb.GetLayerNormGradMaxMinTmpSize(LNG_SHAPE, size, reuse, product=product)
    tiling = lngb.GetLayerNormGradNDTilingInfo(LNG_SHAPE, min_bytes, size, reuse,
                                               product=product)
    if product == "atlas-350":
        touched = lngb.kernels.layer_norm_grad.regbase_tmp_bytes(tiling, size, reuse)
    else:
        touched = lngb.kernels.tiling.layer_norm_grad_tmp_bytes(tiling, size)
    return tiling, max(touched, min_bytes, 32)


@target("LayerNormGrad", 150)
def _layer_norm_grad(ctx):
    dtype = _floats(ctx)
    reuse = ctx.pick([False, True], "is_reuse_source")
    b, s, h = LNG_SHAPE
    pdx, rfg, dy, x = (ctx.t(LNG_SHAPE, dtype) for _ in range(4))
    var, mean = (ctx.t(max(b * s, 32 // dtype.itemsize), dtype) for _ in range(2))
    gamma = ctx.t(h, dtype)
    tiling, tmp_bytes = _lng_tiling(ctx, dtype, reuse)
    args = [pdx, rfg, dy, x, var, mean, gamma]
    if ctx.pick(["shared tmp", "framework tmp"], "overload") == "shared tmp":
        args.append(ctx.t(tmp_bytes, np.uint8))
    args += [1e-5, tiling]
    if ctx.pick([False, True], "shapeInfo given"):
        args.append(lngb.LayerNormGradShapeInfo())
    return Call("lngb.LayerNormGrad", lngb.LayerNormGrad, args, {"is_reuse_source": reuse})


@target("GetLayerNormGradMaxMinTmpSize", 60)
def _lng_max_min(ctx):
    return Call("lngb.GetLayerNormGradMaxMinTmpSize", lngb.GetLayerNormGradMaxMinTmpSize,
                [LNG_SHAPE, 4, False], {"product": ctx.product, "strict": True})


@target("GetLayerNormGradNDTilingInfo", 60)
def _lng_nd_tiling(ctx):
    return Call("lngb.GetLayerNormGradNDTilingInfo", lngb.GetLayerNormGradNDTilingInfo,
                [LNG_SHAPE, 6144, 4, False], {"product": ctx.product, "strict": True})


@target("LayerNormGradTiling.from_bytes", 40)
def _lng_from_bytes(ctx):
    data = lngb.GetLayerNormGradNDTilingInfo(LNG_SHAPE, 6144, 4, False).to_bytes()
    return Call("lngb.LayerNormGradTiling.from_bytes", lngb.LayerNormGradTiling.from_bytes, [data])


@target("LayerNormGradTiling.to_bytes", 60)
def _lng_to_bytes(ctx):
    t = lngb.GetLayerNormGradNDTilingInfo(LNG_SHAPE, 6144, 4, False)
    return Call("LayerNormGradTiling.to_bytes", lngb.LayerNormGradTiling.to_bytes, [t],
                fixed=(0,))


def _backward_inputs(dtype, shape):
    b, s, h = shape
    x = (np.arange(b * s * h) % 7).astype(dtype).reshape(shape)
    var, mean = np.full((b, s), 2.0, dtype), np.full((b, s), 3.0, dtype)
    return [x[..., ::-1].copy(), x, var, mean, np.linspace(-1, 1, h).astype(dtype)]


@target("emulate_layer_norm_grad", 80)
def _emulate_layer_norm_grad(ctx):
    return Call("lngb.emulate_layer_norm_grad", lngb.emulate_layer_norm_grad,
                _backward_inputs(_floats(ctx), (1, 8, 16)),
                {"epsilon": 1e-5, "product": ctx.product, "is_reuse_source": False,
                 "stack_buffer_size": None, "mode": ctx.mode, "trace": False, "sat_mode": None})


@target("emulate_layer_norm_backward", 60)
def _emulate_layer_norm_backward(ctx):
    return Call("lngb.emulate_layer_norm_backward", lngb.emulate_layer_norm_backward,
                _backward_inputs(_floats(ctx), (1, 8, 16)),
                {"epsilon": 1e-5, "product": ctx.product, "block_dim": 2, "tile_rows": None,
                 "threads": 1, "mode": ctx.mode, "sat_mode": None})


def _add_kernel(*tensors):
    """z = x + y on 64 floats, each core its share (a user's kernel for simulate_kernel); with
    other than three GlobalTensors (a hostile input is a scalar argument) it does nothing."""
    if len(tensors) != 3 or not all(isinstance(t, lngb.GlobalTensor) for t in tensors):
        return
    x, y, z = tensors
    n = 64 // lngb.GetBlockNum()
    start = lngb.GetBlockIdx() * n
    core = lngb.current_core()
    a, b = core.alloc(n, F32), core.alloc(n, F32)
    DataCopy(a, x[start], n)
    DataCopy(b, y[start], n)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    V.Add(a, a, b, n)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(z[start], a, n)


def _simulate_kernel_one_output(kernel, x, y, output, **kwargs):
    """simulate_kernel with outputs=[output], so that the fuzz reaches the output itself."""
    return lngb.simulate_kernel(kernel, x, y, outputs=[output], **kwargs)


@target("simulate_kernel", 80)
def _simulate_kernel(ctx):
    x = np.arange(64, dtype=np.float32)
    kwargs = {"product": ctx.product, "block_dim": ctx.pick([1, 2], "block_dim"),
              "mode": ctx.mode, "threads": None}
    if ctx.pick(["outputs", "one output"], "form") == "outputs":
        return Call("lngb.simulate_kernel", lngb.simulate_kernel, [_add_kernel, x, x * 0.5],
                    {"outputs": [((64,), np.float32)], **kwargs}, predicates=(0,))
    output = ctx.pick([((64,), np.float32), "array"], "output")
    output = np.zeros(64, np.float32) if output == "array" else output
    return Call("lngb.simulate_kernel(outputs=[output])", _simulate_kernel_one_output,
                [_add_kernel, x, x * 0.5, output], kwargs, predicates=(0,))


SEED = np.arange(128, dtype=np.float32).reshape(1, 8, 16)
OPERATOR_INPUT = (np.arange(8 * 64, dtype=np.float32) % 7).reshape(1, 8, 64)


@target("emulate", 120)
def _emulate(ctx):
    dtype = _floats(ctx)
    x = SEED.astype(dtype)
    return Call("lngb.emulate", lngb.emulate, [x, x.copy()],
                {"product": ctx.product, "is_reuse_source": False, "reuse_buffer": "input_dy",
                 "stack_buffer_size": None, "mode": ctx.mode, "trace": False, "sat_mode": None})


@target("emulate_operator", 60)
def _emulate_operator(ctx):
    x = OPERATOR_INPUT.astype(_floats(ctx))
    return Call("lngb.emulate_operator", lngb.emulate_operator, [x, x.copy()],
                {"product": ctx.product, "block_dim": 2, "threads": 1, "mode": ctx.mode,
                 "sat_mode": None})


@target("operator_tiling", 60)
def _operator_tiling(ctx):
    return Call("lngb.operator_tiling", lngb.operator_tiling,
                [(1, 8, 64), np.float32, ctx.product, 2, None, None])


@target("sweep", 40, products=("atlas-a2",), modes=("fast",))
def _sweep(ctx):
    return Call("lngb.sweep", lngb.sweep, [[(1, 8, 8)], ["float32"], [ctx.product]],
                {"step": 32, "sizes": None, "measure": 0})


@functools.cache
def cost_rows():
    """The rows of one small emulate() call, for the CostModel targets: made on first use (the
    module fixture below), not at import, so that collecting the tests compiles nothing."""
    return lngb.emulate(SEED, SEED).rows


@pytest.fixture(scope="module", autouse=True)
def _kernels_loaded():
    """Numba's first compile (or cache load) before the first guarded call: CALL_SECONDS limits
    a call, not the kernels' compile of a cold cache."""
    cost_rows()


def _cost_estimate(product, **overrides):
    return lngb.CostModel(product, **overrides).estimate(cost_rows())


@target("CostModel", 40, modes=("fast",))
def _cost_model(ctx):
    fn = ctx.pick([lngb.CostModel, _cost_estimate], "then estimate")
    return Call("lngb.CostModel" if fn is lngb.CostModel else "lngb.CostModel(...).estimate(rows)",
                fn, [ctx.product], {"issue_cycles": 1, "gm_bytes_per_cycle": 32,
                                    "clock_mhz": 1800, "rates": lngb.cost.table_rates()})


@target("EmulationResult.estimate_cost", 40, modes=("fast",))
def _estimate_cost(ctx):
    if ctx.pick(["emulate", "emulate_operator"], "result of") == "emulate":
        result = lngb.emulate(SEED, SEED, product=ctx.product)
    else:
        result = lngb.emulate_operator(OPERATOR_INPUT, OPERATOR_INPUT, product=ctx.product,
                                       block_dim=2, threads=1)
    return Call("result.estimate_cost", result.estimate_cost, [],
                {"issue_cycles": 1, "sync_all_cycles": 1000, "gm_bytes_per_cycle": 32})


@target("set_cache_limit", 30, products=("atlas-a2",), modes=("fast",))
def _set_cache_limit(ctx):
    limit = lngb.cache_info()["limit"]
    return Call("lngb.set_cache_limit", lngb.set_cache_limit, [limit],
                cleanup=lambda: lngb.set_cache_limit(limit))


@target("Debugger", 60)
def _debugger(ctx):
    dtype = _floats(ctx)
    x = SEED.astype(dtype)
    return Call("lngb.debug.Debugger", lngb.debug.Debugger, [x, x.copy()],
                {"product": ctx.product, "mode": ctx.mode, "stack_buffer_size": None,
                 "is_reuse_source": False, "reuse_buffer": "input_dy", "sat_mode": None})


def _fresh_debugger(ctx):
    return lngb.debug.Debugger(SEED, SEED.copy(), product=ctx.product, mode=ctx.mode)


@target("Debugger-methods", 120)
def _debugger_methods(ctx):
    dbg = _fresh_debugger(ctx)
    dbg.step(3)
    tensor = dbg.tensors["outputPdGamma"]
    method = ctx.pick(["step", "run_until name", "run_until seq", "watch range", "watch tensor",
                       "view name", "view tensor"], "method")
    fn, args = {"step": (dbg.step, [1]), "run_until name": (dbg.run_until, ["Mul"]),
                "run_until seq": (dbg.run_until, [8]), "watch range": (dbg.watch, [0, 64]),
                "watch tensor": (dbg.watch, [tensor]), "view name": (dbg.view, ["outputPdGamma"]),
                "view tensor": (dbg.view, [tensor])}[method]
    return Call(f"Debugger.{method.split()[0]}", fn, args, cores=(dbg.core,),
                predicates=(0,) if method.startswith("run_until") else ())


@target("OperatorDebugger", 40)
def _operator_debugger(ctx):
    x = OPERATOR_INPUT.astype(_floats(ctx))
    return Call("lngb.debug.OperatorDebugger", lngb.debug.OperatorDebugger, [x, x.copy()],
                {"product": ctx.product, "block_dim": 2, "sat_mode": None})


@target("BackwardDebugger", 30)
def _backward_debugger(ctx):
    return Call("lngb.debug.BackwardDebugger", lngb.debug.BackwardDebugger,
                _backward_inputs(_floats(ctx), (1, 4, 16)),
                {"epsilon": 1e-5, "product": ctx.product, "block_dim": 2, "tile_rows": None,
                 "sat_mode": None})


@target("OperatorDebugger-methods", 60, modes=("fast",))
def _operator_debugger_methods(ctx):
    dbg = lngb.debug.OperatorDebugger(OPERATOR_INPUT, OPERATOR_INPUT.copy(), product=ctx.product,
                                      block_dim=2)
    cores = tuple(d.core for d in dbg.debuggers)
    method = ctx.pick(["focus", "step", "run_until", "view"], "method")
    fn, args = {"focus": (dbg.focus, [1]), "step": (dbg.step, [2]),
                "run_until": (dbg.run_until, ["SyncAll"]),
                "view": (dbg.view, [next(iter(dbg.tensors))])}[method]
    return Call(f"OperatorDebugger.{method}", fn, args, cores=cores,
                predicates=(0,) if method == "run_until" else ())


# Calls without arguments: only the arity test makes them (with one argument too many).
NO_ARGUMENTS = {
    "SetMaskCount": lambda ctx: Call("SetMaskCount", SetMaskCount, [], enter=ctx.core),
    "SetMaskNorm": lambda ctx: Call("SetMaskNorm", SetMaskNorm, [], enter=ctx.core),
    "ResetMask": lambda ctx: Call("ResetMask", ResetMask, [], enter=ctx.core),
    "SyncAll": lambda ctx: Call("SyncAll", SyncAll, [], enter=ctx.core),
    "LocalTensor.read": lambda ctx: Call("t.read", ctx.t(64).read, []),
    "hook-handle.remove": lambda ctx: Call("handle.remove",
                                           ctx.core.register_hook(lambda r: None).remove, []),
    "lngb.cache_info": lambda ctx: Call("lngb.cache_info", lngb.cache_info, []),
    "lngb.GetBlockIdx": lambda ctx: Call("lngb.GetBlockIdx", lngb.GetBlockIdx, []),
    "lngb.GetBlockNum": lambda ctx: Call("lngb.GetBlockNum", lngb.GetBlockNum, []),
    "lngb.clear_caches": lambda ctx: Call("lngb.clear_caches", lngb.clear_caches, []),
    "Debugger.run": lambda ctx: (lambda d: Call("Debugger.run", d.run, [], cores=(d.core,)))(
        _fresh_debugger(ctx)),
    "Debugger.results": lambda ctx: (lambda d: Call("Debugger.results", d.results, [],
                                                    cores=(d.core,)))(_fresh_debugger(ctx)),
}


# --- the tests ---------------------------------------------------------------------------------

RELATED = _related_pools()


def _examples(n):
    return max(3, int(n * SCALE))


# Strategies made once per distinct arguments: hypothesis validates a new strategy object and
# works out its label on its first draw, which took about half the fuzz tests' time. The same
# strategy draws the same values whether it is new or not, so the examples are unchanged.
STRATEGIES = collections.OrderedDict()   # key -> (the arguments, kept alive; the strategy)
PLAIN = (int, str, bool, type(None))


def _identity(value):
    """Plain values (and tuples of them) by type and value; anything else by identity (its
    entry keeps it alive, so no other object takes its id while the entry is cached)."""
    if type(value) in PLAIN:
        return type(value), value
    if type(value) is tuple:
        return tuple, tuple(map(_identity, value))
    return id, id(value)


def strategy(make, *args):
    """make(*args), cached under the identities of `args` (a list argument by its items)."""
    key = (make, *(("list", tuple(map(_identity, a))) if type(a) is list else _identity(a)
                   for a in args))
    hit = STRATEGIES.get(key)
    if hit is None:   # (a copy of a list argument keeps its items alive)
        hit = STRATEGIES[key] = (tuple(tuple(a) if type(a) is list else a for a in args),
                                 make(*args))
        if len(STRATEGIES) > 4096:
            STRATEGIES.popitem(last=False)
    else:
        STRATEGIES.move_to_end(key)
    return hit[1]


def _sampled(options):
    return strategy(st.sampled_from, options)


def _one_to_three_of(slots):
    return st.lists(st.sampled_from(slots), min_size=1, max_size=min(3, len(slots)), unique=True)


def _related_or_any(related):
    """Half the time a value of the same kind (a deeper path), else any pool value."""
    return st.one_of(st.sampled_from(related), st.sampled_from(POOL))


def _values(related):
    return strategy(_related_or_any, related) if related else _sampled(POOL)


def _run_target(name, data, replace):
    build, _, products, modes = TARGETS[name]
    draw = lambda what, label: data.draw(what, label=label)
    pick = lambda options, label: draw(_sampled(options), label)
    ctx = Ctx(pick(products, "product"), pick(modes, "mode"), pick)
    call = build(ctx)
    if replace:
        slots = call.slots()
        chosen = draw(strategy(_one_to_three_of, slots), "replaced")
        for slot in chosen:
            values = _values(RELATED.get(_kind(call.current(slot))))
            call.replace(slot, draw(values, f"value for {slot!r}"), ctx)
    return call, ctx


# Every instruction lngb.vector_ops exports, and the fuzz target that calls it.
FUZZED_INSTRUCTIONS = {op.__name__ for op in [*BINARY_OPS, *SCALAR_OPS, *UNARY_OPS]} | {
    "Duplicate", "Cast", "BlockReduceSum", "PairReduceSum", "WholeReduceSum", "DataCopy",
    "SetCmpMask", "Select", *(["Brcb"] if hasattr(V, "Brcb") else []),
    *(["DuplicateLane"] if hasattr(V, "DuplicateLane") else [])}


# The targets (and calls without arguments) whose valid call runs lngb's jitted code: an
# instruction, a kernel, a debugger's recording, the walks of a DataCopy's checks. Only these
# run another code path with NUMBA_DISABLE_JIT=1 (the `jitted` marker, tests/conftest.py).
JITTED_TARGETS = {
    "binary", "scalar", "unary", "Duplicate", "DuplicateLane", "Cast", "Brcb", "SetCmpMask",
    "Select", "BlockReduceSum-PairReduceSum", "WholeReduceSum", "DataCopy", "LocalTensor.GetValue",
    "LayerNormGradBeta", "LayerNormGrad", "emulate", "emulate_operator",
    "emulate_layer_norm_grad", "emulate_layer_norm_backward", "simulate_kernel", "sweep",
    "EmulationResult.estimate_cost", "Debugger", "Debugger-methods", "OperatorDebugger",
    "OperatorDebugger-methods", "BackwardDebugger", "Debugger.run", "Debugger.results"}


def marked(names):
    """`names` as parameters, the jitted targets' with the `jitted` marker."""
    return [pytest.param(n, marks=pytest.mark.jitted) if n in JITTED_TARGETS else n
            for n in names]


def test_the_jitted_targets_are_targets():
    assert JITTED_TARGETS <= set(TARGETS) | set(NO_ARGUMENTS)


def test_every_instruction_is_fuzzed():
    """A new instruction in lngb.vector_ops needs a fuzz target here."""
    missing = set(V.INSTRUCTIONS) - FUZZED_INSTRUCTIONS
    assert not missing, f"no fuzz target calls {sorted(missing)}: add them to test_fuzz.py"


@pytest.mark.parametrize("name", marked(TARGETS))
def test_baseline_is_valid(name):
    """The starting call of every target succeeds, on every product and mode it is fuzzed on
    (else the fuzz would only ever see rejections)."""

    @settings(max_examples=_examples(10), deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        call, ctx = _run_target(name, data, replace=False)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", lngb.LngbWarning)
            try:
                call.run()
            finally:
                if call.cleanup is not None:
                    call.cleanup()

    run()


@pytest.mark.parametrize("name", marked(TARGETS))
def test_fuzz(name):
    """Hostile values in one to three arguments: a result or an LngbError, and on an error no
    state changed; never a modified caller array."""

    @settings(max_examples=_examples(TARGETS[name][1]), deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        call, ctx = _run_target(name, data, replace=True)
        check_call(call, ctx)

    run()


ARITY_EXTRAS = [H("1", lambda c: 1), H("None", lambda c: None)]


def arity_variants(call):
    """The call with trailing positional arguments dropped, one argument too many, or an unknown
    keyword."""
    out = []
    for k in range(1, len(call.args) + 1):
        out.append((f"without its last {k} positional argument(s)", call.args[:-k], call.kwargs))
    for h in ARITY_EXTRAS:
        out.append((f"with an extra positional argument {h.label}", [*call.args, h], call.kwargs))
    out.append(("with an unknown keyword bogus=1", call.args, {**call.kwargs, "bogus": 1}))
    return out


@pytest.mark.parametrize("name", marked([*TARGETS, *NO_ARGUMENTS]))
def test_arity(name):
    """Wrong numbers of arguments: TypeError or an LngbError, and no state changed."""
    build = NO_ARGUMENTS[name] if name in NO_ARGUMENTS else TARGETS[name][0]
    first = lambda options, label: options[0]
    failures = []
    for k in range(len(arity_variants(build(Ctx("atlas-a2", "fast", first))))):
        ctx = Ctx("atlas-a2", "fast", first)  # a fresh core for each variant
        base = build(ctx)
        label, args, kwargs = arity_variants(base)[k]
        args = [a.make(ctx) if isinstance(a, H) else a for a in args]
        call = dataclasses.replace(base, args=list(args), kwargs=dict(kwargs),
                                   name=f"{base.name} {label}:")
        try:
            check_call(call, ctx, allow_type_error=True)
        except FuzzFailure as failure:
            failures.append(str(failure))
    assert not failures, "\n".join(failures)
