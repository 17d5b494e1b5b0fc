"""The runtime: the instruction table, the one retire point and its hooks, value-exact cache
keys, the byte-bounded caches, threads, and the layering of the package."""
import ast
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import warnings

import numba
import numpy as np
import pytest
from conftest import garbage_ub
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lngb
from lngb import InvalidArgumentError, LngbWarning
from lngb.runtime.cache import STORE, Store, Uncacheable, cache_key
from lngb.vector_ops import (MASK_PLACEHOLDER, Add, Adds, BinaryRepeatParams, Cast, Duplicate,
                             MaskMode, Mul, Muls, PipeBarrier, RoundMode, SetVectorMask, Sub,
                             UnaryRepeatParams)
from lngb.vector_ops import program as P
from lngb.vector_ops.table import BINARY, TABLE, Instruction

pytestmark = pytest.mark.jitted

LNGB = pathlib.Path(lngb.__file__).parent
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
NO_JIT = numba.config.DISABLE_JIT


# --- the instruction table ---------------------------------------------------------------------

def test_every_instruction_entry_names_its_footprint_and_cost():
    for entry in TABLE.entries:
        if entry.is_instruction:
            assert entry.family.footprint in ("lanes", "groups", "bursts", "blocks", "select",
                                              "register"), entry.name
            assert entry.cost_rule in ("rate", "copy", "cmpmask"), entry.name
            if entry.cost_rule == "rate":
                assert len(entry.rate) == 2 and min(entry.rate) > 0, entry.name
        else:
            assert entry.cost_rule in ("barrier", "set_flag", "wait_flag", "mask", "scalar",
                                       "sync_all", "none"), entry.name
    opcodes = [e.opcode for e in TABLE.entries]
    assert len(set(opcodes)) == len(opcodes) and 0 not in opcodes


def test_the_cost_model_reads_the_rates_of_the_table():
    rates = lngb.CostModel("atlas-a2").values["rates"]
    assert rates == {e.name: e.rate for e in TABLE.entries if e.rate is not None}


@numba.njit
def add_square(a, b, s):
    """The toy instruction's lane: a * a + b, each step rounded to fp32."""
    return np.float32(a * a) + b


@pytest.fixture(scope="module")
def toy():
    """Registered once: each table compiles a new executor module (seconds on a cold cache)."""
    wrapper = lngb.vector_ops.register_instruction(
        Instruction("AddSquare", BINARY, add_square, rate=(128, 64), doc="dst = src0^2 + src1"))
    yield wrapper
    lngb.vector_ops.unregister_instruction("AddSquare")


def toy_oracle(a, b, dtype):
    with np.errstate(all="ignore"):
        return (np.float32(a.astype(F32) * a.astype(F32)) + b.astype(F32)).astype(dtype)


@pytest.mark.parametrize("mode", ["fast", "observed", "checked"])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_a_toy_instruction_added_through_the_table_alone(toy, mode, dtype):
    """An entry and a lane function: the count form, the mask form with strides, a recorded
    kernel (replayed in fast mode), the trace, the sanitizer and the cost model all take it."""
    core = lngb.AICore("atlas-a2", mode=mode)
    rng = np.random.default_rng(5)
    n = 520
    a, b, c, d = (core.alloc(n, dtype) for _ in range(4))
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    a.write(x)
    b.write(y)
    toy(c, a, b, n)
    assert np.array_equal(c.read(), toy_oracle(x, y, dtype))
    barrier(core)
    toy(c, a, b, n)  # again: the count-form memo (fast mode) gives the same bits
    assert np.array_equal(c.read(), toy_oracle(x, y, dtype))
    epr = 256 // dtype.itemsize
    barrier(core)
    toy(d, a, b, epr // 2, 2, BinaryRepeatParams(1, 1, 1, 16, 8, 8))  # every other repeat
    want = d.read()
    for r in range(2):
        lanes = slice(r * epr, r * epr + epr // 2)
        out = slice(2 * r * epr, 2 * r * epr + epr // 2)
        want[out] = toy_oracle(x[lanes], y[lanes], dtype)
    assert np.array_equal(d.read(), want)

    def kernel():
        barrier(core)
        toy(c, b, a, n)
        barrier(core)
    for _ in range(2):
        core.run_recorded(("toy kernel", mode, dtype), kernel)
        assert np.array_equal(c.read(), toy_oracle(y, x, dtype))
    if mode != "fast":
        assert [r.name for r in core.trace if r.is_instruction].count("AddSquare") == 5
        first = next(r for r in core.trace if r.name == "AddSquare")
        assert lngb.CostModel().instruction_cycles(first.row) == -(-n // epr) * epr / (
            128 if dtype == F16 else 64)


def barrier(core):
    with core:
        PipeBarrier(lngb.vector_ops.PIPE_V)


def test_the_table_refuses_what_it_cannot_run(toy):
    with pytest.raises(InvalidArgumentError, match="already in the table"):
        lngb.vector_ops.register_instruction(Instruction("AddSquare", BINARY, add_square))
    with pytest.raises(InvalidArgumentError, match="needs a lane function"):
        lngb.vector_ops.register_instruction(Instruction("NoLane", BINARY))
    with pytest.raises(InvalidArgumentError, match="must all be the same type or all differ"):
        lngb.vector_ops.register_instruction(Instruction("Widen", BINARY, add_square,
                                                         dtypes=((P.F32, P.F16),
                                                                 (P.F32, P.F32))))



def walk_order(row, address, size, blk, rep):
    """The element indices (of `size` bytes) an operand's lanes take, in the lane walk's order
    (from walk.py's lane_active and lane_index, not from flat_elements)."""
    from lngb.vector_ops.walk import lane_active, lane_index, lanes_per_repeat, repeat_count
    epr = lanes_per_repeat(row)
    return [lane_index(address, size, blk, rep, r, e)
            for r in range(repeat_count(row, epr)) for e in range(epr)
            if lane_active(row, r, e, epr)]


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_prefix_lengths_of_every_mask_word_without_overflow():
    """walk.prefix_length: k for a word of the k lowest bits, else -1; never an integer overflow
    (2**63 - 1 + 1 overflowed int64, a warning in pure Python: an error in numpy's raise mode)."""
    from lngb.vector_ops.walk import prefix_length
    with np.errstate(all="raise"):
        for k in range(64):
            assert prefix_length(np.int64(P.as_int64(2**k - 1))) == k
            assert prefix_length(np.int64(P.as_int64((2**k - 1) ^ (1 << 63)))) == -1
        for word in (-1, -2, 2, 6, 2**62, 2**62 + 1):
            assert prefix_length(np.int64(word)) == -1
        core = lngb.AICore("atlas-a2")   # one repeat of the first 63 float / 127 half lanes
        a, b, c = (core.alloc(128, np.float32) for _ in range(3))
        h = core.alloc(128, np.float16)
        Add(c, a, b, 63, 1, BinaryRepeatParams())
        Adds(h, h, 1.0, 127, 1, UnaryRepeatParams())


@settings(max_examples=300 if not NO_JIT else 60, deadline=None)
@given(data=st.data())
def test_the_flat_loops_run_exactly_the_lanes_of_the_walk(data):
    """A row's FLAT column (walk.flat_elements) lets execute run its contiguous loops only when
    every operand's lanes, in the walk's order, are the elements base, base + 1, ... base + n - 1,
    and a half result rounds to nearest (the loops' only rounding)."""
    from lngb.vector_ops.walk import flat_elements
    entry = TABLE[data.draw(st.sampled_from(["Add", "Adds", "Duplicate", "Cast"]), label="op")]
    row = P.new_row(entry)
    row[P.DT_DST], row[P.DT_SRC] = (data.draw(st.sampled_from([(0, 0), (1, 1), (0, 1), (1, 0)]),
                                              label="types"))
    row[P.SOURCES] = entry.family.sources
    row[P.ROUND] = data.draw(st.sampled_from(list(RoundMode)), label="round mode")
    row[P.DST], row[P.SRC0], row[P.SRC1] = 1024, 4096, 8192
    row[P.COUNTER] = data.draw(st.booleans(), label="counter")
    word = st.one_of(st.sampled_from([0, 1, 3, 2**63 - 1, 2**64 - 1, 2**64 - 2, 2**62]),
                     st.integers(0, 2**64 - 1),
                     st.integers(0, 64).map(lambda k: 2**k - 1)).map(P.as_int64)
    row[P.MASK0] = data.draw(st.integers(0, 600) if row[P.COUNTER] else word, label="mask0")
    row[P.MASK1] = data.draw(word, label="mask1")
    row[P.REPEAT] = data.draw(st.sampled_from([0, 1, 1, 2, 3]), label="repeat")
    epr = 64 if P.F32 in (row[P.DT_DST], row[P.DT_SRC]) else 128
    every_operand_contiguous = data.draw(st.booleans(), label="every operand contiguous")
    for blk, rep, code in ((P.DST_BLK, P.DST_REP, row[P.DT_DST]),
                           (P.SRC0_BLK, P.SRC0_REP, row[P.DT_SRC]),
                           (P.SRC1_BLK, P.SRC1_REP, row[P.DT_SRC])):
        whole = epr * (4 if code == P.F32 else 2) // 32   # repeats follow each other
        row[blk], row[rep] = 1, whole
        if not every_operand_contiguous:
            row[blk] = data.draw(st.sampled_from([1, 1, 0, 2]), label="blk")
            row[rep] = data.draw(st.sampled_from([whole, whole, 2 * whole, 0, 1, 4, 8]),
                                 label="rep")
    n = flat_elements(row)
    if n < 0:
        return  # the walk runs it: always right
    operands = [(P.DST, P.DST_BLK, P.DST_REP), (P.SRC0, P.SRC0_BLK, P.SRC0_REP),
                (P.SRC1, P.SRC1_BLK, P.SRC1_REP)][:1 + row[P.SOURCES]]
    for address, blk, rep in operands:
        size = 4 if (row[P.DT_DST] if address == P.DST else row[P.DT_SRC]) == P.F32 else 2
        base = row[address] // size
        assert walk_order(row, row[address], size, row[blk], row[rep]) == list(
            range(base, base + n))
    assert row[P.DT_DST] == row[P.DT_SRC] or row[P.SOURCES] <= 1
    # the loops round to nearest only: directed roundings to half take the walk
    assert row[P.DT_DST] == P.F32 or row[P.ROUND] in (RoundMode.CAST_NONE, RoundMode.CAST_RINT)


# --- the retire point and hooks ------------------------------------------------------------------

def small_core(mode="fast"):
    core = lngb.AICore("atlas-a2", mode=mode)
    a, b = core.alloc(256, F32), core.alloc(256, F32)
    a.write(np.arange(256, dtype=F32))
    b.write(np.ones(256, F32))
    return core, a, b


def kernel_of(core, a, b):
    def kernel():
        with core:
            Add(b, a, b, 256)
            PipeBarrier(lngb.vector_ops.PIPE_V)
            Muls(b, b, 2.0, 256)
    return kernel


def test_a_hook_sees_every_retired_record_as_the_trace_holds_it():
    observed, oa, ob = small_core("observed")
    fast, fa, fb = small_core("fast")
    seen = []
    handle = fast.register_hook(seen.append)
    for core, a, b in ((observed, oa, ob), (fast, fa, fb)):
        Add(b, a, b, 256)
        Add(b, a, b, 256)              # a repeated count-form call: not skipped by the memo
        core.run_recorded("hooked kernel", kernel_of(core, a, b))
        core.run_recorded("hooked kernel", kernel_of(core, a, b))   # runs live while hooked
    assert [r.name for r in seen] == [r.name for r in observed.trace]
    assert [r.row.tolist() for r in seen] == [r.row.tolist() for r in observed.trace]
    assert [r.seq for r in seen] == list(range(1, len(seen) + 1)) and fast.seq == len(seen)
    assert np.array_equal(fast.ub, observed.ub)
    handle.remove()
    handle.remove()  # again: nothing
    Add(fb, fa, fb, 256)
    fast.run_recorded("hooked kernel", kernel_of(fast, fa, fb))
    assert len(seen) == observed.seq and fast.last_program is not None  # replayed again


def test_an_exception_in_a_hook_stops_the_kernel_with_the_state_consistent():
    core, a, b = small_core()
    calls = []

    def stop_at_the_second(record):
        calls.append(record.name)
        if len(calls) == 2:
            raise RuntimeError("stop here")
    core.register_hook(stop_at_the_second)
    with pytest.raises(RuntimeError, match="stop here"):
        core.run_recorded("stopped kernel", kernel_of(core, a, b))
    assert calls == ["Add", "PipeBarrier"] and core.seq == 2   # the barrier retired, no Muls
    assert np.array_equal(b.read(), np.arange(256, dtype=F32) + 1)
    assert core.mask_mode == MaskMode.NORMAL and core.mask_low == (1 << 64) - 1


def test_the_retire_point_advances_the_same_state_on_every_path():
    x = np.random.default_rng(1).standard_normal((2, 8, 64)).astype(np.float32)
    results = [lngb.emulate(x, x, mode=mode) for mode in ("fast", "fast", "observed", "checked")]
    for r in results:
        assert r.core.seq == len(r.rows) and r.core.flags == results[0].core.flags
        assert (r.core.mask_mode, r.core.mask_high, r.core.mask_low) == (
            results[0].core.mask_mode, results[0].core.mask_high, results[0].core.mask_low)
    dbg = lngb.debug.Debugger(x, x)
    dbg.run()
    assert dbg.core.seq == len(results[0].rows)
    assert dbg.mask == (results[0].core.mask_mode, results[0].core.mask_high,
                        results[0].core.mask_low)
    operator = lngb.emulate_operator(x, x, block_dim=2)
    for c, core in enumerate(operator.cores):
        assert core.seq == len(operator.rows[c])


def test_recorded_and_live_rows_are_the_same_rows():
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    live = lngb.emulate(x, x, trace=True).trace
    recorded = lngb.debug.Debugger(x, x).records
    assert [r.row.tolist() for r in recorded] == [r.row.tolist() for r in live]


def _broadcast_first_element(core, src, dst, *, in_python=False, as_half=None):
    """A kernel that reads src[0] on the scalar unit and fills dst with it (Duplicate)."""
    def body():
        with core:
            lngb.vector_ops.SetFlag(lngb.vector_ops.HardEvent.V_S, 0)
            lngb.vector_ops.WaitFlag(lngb.vector_ops.HardEvent.V_S, 0)
            value = src.GetValue(0)
            if in_python:
                value = value * 1.0       # its value used in Python
            Duplicate(as_half or dst, value, 64)
    core.run_recorded(("broadcast first", in_python, as_half is not None), body)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_kernel_that_broadcasts_a_getvalue_is_recorded_and_replays_new_data():
    """GetValue fills a scalar register; the Duplicate's row reads the register when it runs, so
    the program replays with whatever the UB holds then."""
    core = lngb.AICore()
    src, dst = core.alloc(64, np.float32), core.alloc(64, np.float32)
    for value in (3.5, -0.0, 7.25):
        src.write(np.full(64, value, np.float32))
        _broadcast_first_element(core, src, dst)
        assert dst.read().view(np.uint32).tolist() == [np.float32(value).view(np.uint32)] * 64
    assert core.last_program is not None                  # replayed, not run live
    assert [r.name for r in core.last_program.records][-2:] == ["GetValue", "Duplicate"]


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_getvalue_used_in_python_or_in_another_type_runs_live():
    core = lngb.AICore()
    src, dst = core.alloc(64, np.float32), core.alloc(64, np.float32)
    half = core.alloc(64, np.float16)
    for value in (3.5, 9.0):
        src.write(np.full(64, value, np.float32))
        _broadcast_first_element(core, src, dst, in_python=True)
        assert dst.read().tolist() == [value] * 64
        _broadcast_first_element(core, src, dst, as_half=half)   # converted: live
        assert half.read().tolist() == [value] * 64
    assert core.last_program is None


def test_getvalue_in_checked_mode_checks_what_it_reads():
    core = lngb.AICore(mode="checked")
    src, dst = core.alloc(64, np.float32), core.alloc(64, np.float32)
    with pytest.raises(lngb.UninitializedReadError, match="GetValue"):
        _broadcast_first_element(core, src, dst)


def test_only_the_core_writes_its_state():
    """seq, the mask register and the flags change in lngb/core.py alone (its retire point)."""
    writers = []
    for path in LNGB.rglob("*.py"):
        if path.name == "core.py" and path.parent == LNGB:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                       else [])
            for t in targets:
                for leaf in ast.walk(t):
                    if (isinstance(leaf, ast.Attribute) and leaf.attr in (
                            "mask_mode", "mask_high", "mask_low", "seq", "flags")
                            and not (isinstance(leaf.value, ast.Name) and leaf.value.id == "self"
                                     and path.name == "record.py")):
                        writers.append(f"{path.relative_to(LNGB)}:{leaf.lineno}")
    assert writers == []


# --- layout -----------------------------------------------------------------------------------

def test_no_module_imports_another_modules_private_names():
    private = []
    for path in LNGB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private += [f"{path.relative_to(LNGB)}: {a.name}" for a in node.names
                            if a.name.startswith("_")]
    assert private == []


def test_the_core_does_not_know_its_observers():
    imported = set()
    for node in ast.walk(ast.parse((LNGB / "core.py").read_text())):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert not any(m.startswith(("observers", "trace", "sanitizer", "debug", "cost"))
                   for m in imported), imported


# --- value-exact cache keys ---------------------------------------------------------------------

def test_cache_keys_are_value_exact():
    distinct = [0.0, -0.0, 64, 64.0, 1, True, np.int64(1), np.float32(1), 1.5, float("nan"),
                np.uint32(0x7FC00001).view(np.float32).item(), "1", None, (1,), [1], b"1"]
    keys = [cache_key(v) for v in distinct]
    assert len(set(keys)) == len(keys)
    assert cache_key(-0.0, (1, 2.5)) == cache_key(-0.0, (1, 2.5))
    assert cache_key(float("nan")) == cache_key(float("nan"))   # the same bits
    with pytest.raises(Uncacheable):
        cache_key(np.ones(3))
    with pytest.raises(Uncacheable):
        cache_key(object())


@pytest.mark.parametrize("mode", ["fast", "observed"])
def test_signed_zeros_are_different_calls(mode):
    core = lngb.AICore(mode=mode)
    t = core.alloc(64, F32)
    Duplicate(t, 0.0, 64)
    Duplicate(t, -0.0, 64)
    assert (t.read().view(np.uint32) == 0x80000000).all()


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_call_rejected_on_a_fresh_core_stays_rejected_after_a_valid_twin():
    core = lngb.AICore()
    a, b, c = (core.alloc(64, F32) for _ in range(3))
    Add(c, a, b, 64)
    with pytest.raises(InvalidArgumentError, match="count must be an integer"):
        Add(c, a, b, 64.0)
    Adds(c, a, 1, 64)
    with pytest.raises(InvalidArgumentError, match="not a number"):
        Adds(c, a, True, 64)


SCALARS = st.sampled_from([0.0, -0.0, 1, 1.0, 2, True, np.float32(2.5), np.float16(-3),
                           float("inf"), float("nan"), 65504.0, 70000.0, 1e-8, "x", None])
COUNTS = st.sampled_from([0, 1, 7, 64, 64.0, 100, 128, np.int32(64), True, -1, 2**32])


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.sampled_from(["Add", "Sub", "Mul", "Adds", "Muls",
                                                 "Duplicate", "Cast16", "Cast32", "Mask"]),
                                st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
                                COUNTS, SCALARS), min_size=1, max_size=25))
def test_fast_mode_is_bit_identical_to_observed_on_any_call_sequence(calls):
    """Random sequences of count-form (memoised) and mask-form calls, valid and not, on a fast
    and an observed core with the same UB: the same errors, the same bytes."""
    ends = []
    for mode in ("fast", "observed"):
        core = lngb.AICore("atlas-a2", mode=mode)
        garbage_ub(core, np.random.default_rng(0))
        f32 = [core.alloc(512, F32) for _ in range(3)]
        f32.append(f32[0][64])   # a view: the same address as no tensor above
        f16 = [core.alloc(512, F16) for _ in range(3)]
        f16.append(f16[1][128])
        errors = []
        for name, i, j, k, count, scalar in calls:
            ops = {"Add": lambda: Add(f32[i], f32[j], f32[k], count),
                   "Sub": lambda: Sub(f16[i], f16[j], f16[k], count),
                   "Mul": lambda: Mul(f32[i], f32[j], f32[k], count),
                   "Adds": lambda: Adds(f16[i], f16[j], scalar, count),
                   "Muls": lambda: Muls(f32[i], f32[j], scalar, count),
                   "Duplicate": lambda: Duplicate(f16[i], scalar, count),
                   "Cast16": lambda: Cast(f16[i], f32[j], RoundMode.CAST_RINT, count),
                   "Cast32": lambda: Cast(f32[i], f16[j], RoundMode.CAST_NONE, count),
                   "Mask": lambda: mask_form(core, f32[i], f32[j], count)}
            try:
                with np.errstate(all="ignore"):
                    ops[name]()
                errors.append(None)
            except lngb.LngbError as err:
                errors.append(type(err))
        ends.append((core.ub.copy(), errors, (core.mask_mode, core.mask_high, core.mask_low)))
    (ub_fast, errors_fast, mask_fast), (ub_observed, errors_observed, mask_observed) = ends
    assert errors_fast == errors_observed
    assert mask_fast == mask_observed
    assert np.array_equal(ub_fast, ub_observed)


def mask_form(core, dst, src, count):
    with core:
        SetVectorMask(count, dtype=np.float32)
        Adds(dst, src, 1.0, MASK_PLACEHOLDER, 2, is_set_mask=False)


# --- the caches' byte budget -------------------------------------------------------------------

def test_the_store_keeps_the_most_recently_used_bytes():
    store = Store(100)
    store.put("a", 1, "one", 40)
    store.put("a", 2, "two", 40)
    assert store.get("a", 1) == "one"            # now the most recently used
    store.put("b", 3, "three", 40)                # evicts key 2, the least recently used
    assert store.get("a", 2) is None and store.get("a", 1) == "one" and store.nbytes == 80
    store.put("b", 4, "huge", 101)                # larger than the limit alone: not kept
    assert store.get("b", 4) is None and store.nbytes == 80
    store.set_limit(50)
    assert store.nbytes <= 50 and store.info() == {"a": (1, 40)}   # key 1, read last
    store.clear()
    assert store.nbytes == 0 and store.info() == {}


def test_cache_limit_clear_and_info():
    x = np.ones((1, 8, 64), np.float32)
    lngb.emulate(x, x)
    assert lngb.cache_info()["programs"][0] >= 1
    lngb.clear_caches()
    assert set(lngb.cache_info()) == {"limit"}
    before = STORE.limit
    try:
        lngb.set_cache_limit(0)
        lngb.emulate(x, x)
        assert set(lngb.cache_info()) == {"limit"} and lngb.cache_info()["limit"] == 0
    finally:
        lngb.set_cache_limit(before)
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(InvalidArgumentError, match="set_cache_limit"):
            lngb.set_cache_limit(bad)


WARM_CASES = [(F32, {}), (F32, {"is_reuse_source": True}),
              (F32, {"is_reuse_source": True, "reuse_buffer": "res_for_gamma"}),
              (F16, {"is_reuse_source": True}), (F32, {"stack_buffer_size": 512}),
              (F32, {"product": "atlas-350"}), (F16, {"product": "atlas-inference"})]


@pytest.mark.parametrize("dtype, options", WARM_CASES)
def test_a_warm_emulate_gives_the_bits_state_and_warnings_of_an_observed_run(dtype, options):
    """From its second call on, a fast emulate() of one configuration replays its recorded
    program at once (host._replay_warm), without checking, building or recording anything: it
    must leave what an observed run leaves, and raise the same warnings, every call."""
    rng = np.random.default_rng(7)
    dy, rfg = (rng.standard_normal((2, 8, 64)).astype(dtype) for _ in range(2))
    dy[0, 0, :3] = [np.nan, np.inf, -0.0]
    dy_before, rfg_before = dy.copy(), rfg.copy()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lngb.clear_caches()
        oracle = lngb.emulate(dy, rfg, mode="observed", **options)
        expected = [str(w.message) for w in seen]
        seen.clear()
        for _ in range(3):
            fast = lngb.emulate(dy, rfg, mode="fast", **options)
            assert [str(w.message) for w in seen] == expected
            seen.clear()
            for got, want in ((fast.pd_gamma, oracle.pd_gamma), (fast.pd_beta, oracle.pd_beta)):
                assert got.dtype == dtype and got.shape == (64,)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
            assert np.array_equal(fast.core.ub, oracle.core.ub)
            assert fast.core.seq == oracle.core.seq and fast.core.state() == oracle.core.state()
            assert np.array_equal(fast.rows, oracle.rows)
            assert fast.tiling.to_bytes() == oracle.tiling.to_bytes()
            assert fast.core.mode == "fast" and fast.trace is None
            assert fast.core is fast.core   # made once, on first access
    assert np.array_equal(dy, dy_before, equal_nan=True) and np.array_equal(rfg, rfg_before)


def test_a_warm_call_makes_its_core_when_asked_and_observers_of_fast_cores_see_it(monkeypatch):
    """A warm call runs the executor before any core exists and makes the result's core on
    first access; an observer that every fast core gets (core.MODE_OBSERVERS) needs a core to
    watch, so with one registered the general path runs and the observer sees the program."""
    from lngb import core as core_module
    x = np.arange(2 * 8 * 64, dtype=np.float32).reshape(2, 8, 64) % 13
    first = lngb.emulate(x, x, mode="fast")
    warm = lngb.emulate(x, x, mode="fast")
    later = lngb.emulate(x, x, mode="fast")
    assert not isinstance(warm._core, lngb.AICore)   # not made yet
    assert warm.core.seq == first.core.seq and isinstance(warm._core, lngb.AICore)
    seen = []

    class Watcher:
        replays = True

        def __init__(self, core):
            pass

        def check_program(self, program):
            seen.append(len(program.rows))

        def retire_program(self, program):
            seen.append("retired")
    monkeypatch.setitem(core_module.MODE_OBSERVERS, "fast", (Watcher,))
    assert later.core.replays and later.core.observer("sanitizer") is None
    assert later.core._observers == []   # registered after the run: it watched nothing
    watched = lngb.emulate(x, x, mode="fast")
    assert seen == [len(first.rows), "retired"] and isinstance(watched._core, lngb.AICore)
    assert np.array_equal(watched.pd_gamma, first.pd_gamma)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_the_warm_path_is_taken_and_only_where_it_applies(monkeypatch):
    """The second call of a configuration runs none of the general path; other inputs, modes
    and arguments take the general path again (sample_kernel), with their own results."""
    from lngb import host
    x = np.arange(2 * 8 * 64, dtype=np.float32).reshape(2, 8, 64) % 13
    lngb.clear_caches()
    lngb.emulate(x, x)
    general = host.sample_kernel
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return general(*args, **kwargs)
    monkeypatch.setattr(host, "sample_kernel", counted)
    warm = lngb.emulate(x, x)
    assert calls == []
    read_only = x.copy()
    read_only.flags.writeable = False
    strided = np.repeat(x, 2, axis=2)[:, :, ::2]
    for call in (lambda: lngb.emulate(read_only, read_only),
                 lambda: lngb.emulate(strided, strided),
                 lambda: lngb.emulate(x, x, trace=True),
                 lambda: lngb.emulate(x, x, stack_buffer_size=np.int64(512))):
        before = len(calls)
        assert np.array_equal(call().pd_gamma, warm.pd_gamma)
        assert len(calls) == before + 1
    smaller = x[:, :4].copy()
    assert np.array_equal(lngb.emulate(smaller, smaller).pd_beta, smaller.sum((0, 1)))
    with pytest.raises(InvalidArgumentError, match="must match"):
        lngb.emulate(x, x.astype(np.float16))
    with pytest.raises(InvalidArgumentError, match="trace must be"):
        lngb.emulate(x, x, trace=1)
    monkeypatch.setenv("LNGB_MODE", "observed")   # the default mode is read on every call
    before = len(calls)
    observed = lngb.emulate(x, x)
    assert observed.core.mode == "observed" and len(observed.core.trace) == len(warm.rows)
    assert len(calls) == before + 1


def layer_norm_grad_inputs(dtype, h=64, column=False):
    rng = np.random.default_rng(11)
    dy, x = (rng.standard_normal((2, 8, h)).astype(dtype) for _ in range(2))
    variance = (rng.random((2, 8)) + 0.5).astype(dtype)
    variance[0, 0] = -0.0   # with epsilon +-0.0: 1 / sqrt(-0.0 + eps) is -inf or +inf
    mean = rng.standard_normal((2, 8)).astype(dtype)
    if column:
        variance, mean = variance[..., None], mean[..., None]
    return [dy, x, variance, mean, rng.standard_normal(h).astype(dtype)]


LNG_CASES = [(F32, {}, False), (F32, {"is_reuse_source": True}, False), (F16, {}, False),
             (F32, {"epsilon": 0.0}, False), (F32, {"epsilon": -0.0}, False),
             (F16, {"epsilon": np.float16(1e-3)}, True), (F32, {"product": "atlas-350"}, False),
             (F16, {"product": "atlas-inference"}, False),
             (F32, {"stack_buffer_size": 8192}, False)]


@pytest.mark.parametrize("dtype, options, column", LNG_CASES)
def test_a_warm_layer_norm_grad_gives_the_bits_state_and_warnings_of_an_observed_run(
        dtype, options, column):
    """emulate_layer_norm_grad's warm path (backward._replay_warm) against an observed run of
    the same call: pdX, resForGamma, the whole UB, the core's state, the warnings; the rows
    against the first fast call's (the general path: a live run writes a GetValue's value into
    its row, a recording the scalar register it reads)."""
    arrays = layer_norm_grad_inputs(dtype, column=column)
    before = [a.copy() for a in arrays]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lngb.clear_caches()
        oracle = lngb.emulate_layer_norm_grad(*arrays, mode="observed", **options)
        expected = [str(w.message) for w in seen]
        seen.clear()
        rows = None
        for _ in range(3):
            fast = lngb.emulate_layer_norm_grad(*arrays, mode="fast", **options)
            assert [str(w.message) for w in seen] == expected
            seen.clear()
            for got, want in ((fast.pd_x, oracle.pd_x), (fast.res_for_gamma, oracle.res_for_gamma)):
                assert got.dtype == dtype and got.shape == (2, 8, 64)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
            assert np.array_equal(fast.core.ub, oracle.core.ub)
            assert fast.core.seq == oracle.core.seq and fast.core.state() == oracle.core.state()
            rows = fast.rows.copy() if rows is None else rows
            assert np.array_equal(fast.rows, rows) and not fast.rows.flags.writeable
            assert fast.tiling.to_bytes() == oracle.tiling.to_bytes() and fast.trace is None
    for a, b in zip(arrays, before):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_the_layer_norm_grad_warm_path_is_taken_and_only_where_it_applies(monkeypatch):
    from lngb import backward
    arrays = layer_norm_grad_inputs(F32)
    lngb.clear_caches()
    lngb.emulate_layer_norm_grad(*arrays)
    general = backward.check_backward_inputs
    calls = []

    def counted(*args):
        calls.append(1)
        return general(*args)
    monkeypatch.setattr(backward, "check_backward_inputs", counted)
    warm = lngb.emulate_layer_norm_grad(*arrays)
    assert calls == []
    strided = [np.repeat(a, 2, axis=-1)[..., ::2] for a in arrays]
    read_only = [a.copy() for a in arrays]
    read_only[1].flags.writeable = False
    for other in ([strided[0], strided[1], *arrays[2:]], read_only):   # dy and x read in place
        before = len(calls)
        result = lngb.emulate_layer_norm_grad(*other)
        assert np.array_equal(result.pd_x, warm.pd_x) and len(calls) == before + 1
    before = len(calls)   # variance, mean and gamma are copied: any layout is warm
    result = lngb.emulate_layer_norm_grad(*arrays[:2], strided[2], strided[3], strided[4])
    assert np.array_equal(result.pd_x, warm.pd_x) and len(calls) == before
    before = len(calls)
    for call in (lambda: lngb.emulate_layer_norm_grad(*arrays, trace=True),
                 lambda: lngb.emulate_layer_norm_grad(*arrays, epsilon=np.float32(1e-5)),
                 lambda: lngb.emulate_layer_norm_grad(*arrays, mode="checked")):
        assert np.array_equal(call().pd_x, warm.pd_x)
    assert len(calls) == before + 3
    with pytest.raises(InvalidArgumentError, match="input_gamma is float16"):
        lngb.emulate_layer_norm_grad(*arrays[:4], arrays[4].astype(np.float16))
    with pytest.raises(InvalidArgumentError, match="input_mean has shape"):
        lngb.emulate_layer_norm_grad(*arrays[:3], arrays[3][:1], arrays[4])
    monkeypatch.setenv("LNGB_MODE", "fastest")   # the arrays' error first, as without a warm path
    with pytest.raises(InvalidArgumentError, match="input_gamma is float16"):
        lngb.emulate_layer_norm_grad(*arrays[:4], arrays[4].astype(np.float16))
    with pytest.raises(InvalidArgumentError, match="LNGB_MODE"):
        lngb.emulate_layer_norm_grad(*arrays)


def test_a_layer_norm_grad_call_reads_its_mode_once(monkeypatch):
    """The mode is resolved once a call: an LNGB_MODE that changes during one (here: the second
    read of it says checked) cannot file a checked core's configuration as a fast call's."""
    from lngb import backward
    arrays = layer_norm_grad_inputs(F32)
    reads = iter(["fast", "checked"] * 10)
    monkeypatch.setattr(backward, "resolve_mode", lambda api, mode: next(reads))
    lngb.clear_caches()
    first = lngb.emulate_layer_norm_grad(*arrays)
    assert first.core.mode == "fast"
    assert lngb.emulate_layer_norm_grad(*arrays).core.mode == "checked"
    assert lngb.emulate_layer_norm_grad(*arrays).core.mode == "fast"   # warm: a fast core


class Opaque:
    """An argument whose attributes all raise: nothing may look inside it before the checks."""

    def __getattr__(self, name):
        raise RuntimeError(f"looked at .{name}")


class TouchyMode(str):
    def __eq__(self, other):
        raise RuntimeError("compared")

    __hash__ = str.__hash__


@pytest.mark.parametrize("mode", ["fast", "observed"])
def test_odd_arguments_get_the_errors_of_the_checks_in_their_order(mode):
    arrays = layer_norm_grad_inputs(F32)
    bad_gamma = [*arrays[:4], arrays[4].astype(np.float16)]
    lngb.clear_caches()
    lngb.emulate_layer_norm_grad(*arrays, mode=mode)
    for epsilon in (Opaque(), [1e-5], "1e-5", None):
        with pytest.raises(InvalidArgumentError, match="epsilon must be a number"):
            lngb.emulate_layer_norm_grad(*arrays, epsilon=epsilon, mode=mode)
        with pytest.raises(InvalidArgumentError, match="input_gamma is float16"):
            lngb.emulate_layer_norm_grad(*bad_gamma, epsilon=epsilon, mode=mode)
    with pytest.raises(InvalidArgumentError, match="input_gamma is float16"):
        lngb.emulate_layer_norm_grad(*bad_gamma, mode=TouchyMode(mode))


def test_warm_layer_norm_grads_of_signed_zero_epsilons_stay_apart():
    """epsilon 0.0 and -0.0 are two configurations (value-exact keys): with a variance of -0.0,
    resForGamma is -inf in one where it is +inf in the other, warm calls included."""
    arrays = layer_norm_grad_inputs(F32)
    lngb.clear_caches()
    plus, minus = (lngb.emulate_layer_norm_grad(*arrays, epsilon=eps, mode="observed")
                   .res_for_gamma.view(np.uint32) for eps in (0.0, -0.0))
    assert not np.array_equal(plus, minus)   # (a dict keyed by epsilon would hold one of them)
    for _ in range(3):
        for eps, want in ((0.0, plus), (-0.0, minus), (0, plus)):
            got = lngb.emulate_layer_norm_grad(*arrays, epsilon=eps).res_for_gamma
            assert np.array_equal(got.view(np.uint32), want)


def test_a_budget_that_holds_one_program_records_it_once(monkeypatch):
    """Warm calls and general ones (read-only inputs) of one configuration, under a budget with
    room for its program and a little more: the program is recorded once, not once a call."""
    from lngb.runtime import recording
    recorded = []
    record = recording.record
    monkeypatch.setattr(recording, "record", lambda *a, **k: recorded.append(1) or record(*a, **k))
    x = np.ones((2, 8, 64), np.float32)
    read_only = x.copy()
    read_only.flags.writeable = False
    lngb.clear_caches()
    size = lngb.emulate(x, x).core.last_program.nbytes
    before = STORE.limit
    try:
        lngb.clear_caches()
        lngb.set_cache_limit(size + 8192)
        recorded.clear()
        for _ in range(5):
            lngb.emulate(x, x)
            lngb.emulate(read_only, read_only)
        assert len(recorded) == 1
    finally:
        lngb.set_cache_limit(before)


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_a_result_cannot_change_the_program_later_calls_replay():
    """result.rows is the cached program's rows, read-only: writing to them raises, and later
    calls give the same bits (simulate_kernel's rows too)."""
    x = np.arange(1024, dtype=np.float32).reshape(2, 8, 64) % 7
    lngb.clear_caches()
    first = lngb.emulate(x, x)
    again = lngb.emulate(x, x)
    for rows in (first.rows, again.rows):
        with pytest.raises(ValueError, match="read-only"):
            rows[:] = 0
    assert np.array_equal(lngb.emulate(x, x).pd_beta, first.pd_beta)

    def double(src, dst):
        ub = lngb.current_core().alloc(64, F32)
        lngb.vector_ops.DataCopy(ub, src, 64)
        lngb.vector_ops.Muls(ub, ub, 2.0, 64)
        lngb.vector_ops.DataCopy(dst, ub, 64)
    y = np.arange(64, dtype=np.float32)
    for _ in range(2):
        result = lngb.simulate_kernel(double, y, outputs=[((64,), np.float32)])
        with pytest.raises(ValueError, match="read-only"):
            result.rows[0][:] = 0
        assert np.array_equal(result.outputs[0], 2 * y)


def run_python(code, **env):
    """`code` in a new interpreter, with the environment changed by `env` (None: unset)."""
    import os
    environment = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, env=environment, timeout=600)
    return result


def test_the_environment_sets_the_budget():
    default = run_python("import lngb; print(lngb.cache_info()['limit'])", LNGB_CACHE_MB=None)
    assert default.returncode == 0 and default.stdout.strip() == str(256 * 2**20)
    ok = run_python("import lngb; print(lngb.cache_info()['limit'])", LNGB_CACHE_MB="1.5")
    assert ok.returncode == 0 and ok.stdout.strip() == str(int(1.5 * 2**20))
    # a bad value never breaks `import lngb` (issue 27): it is an error once a cache is used
    assert run_python("import lngb", LNGB_CACHE_MB="lots").returncode == 0
    bad = run_python("import lngb; lngb.cache_info()", LNGB_CACHE_MB="lots")
    assert bad.returncode != 0 and "LNGB_CACHE_MB='lots'" in bad.stderr
    assert "must be a number" in bad.stderr


@pytest.mark.skipif(NO_JIT, reason="replays 12 programs of 19 000 rows: minutes in pure Python")
def test_many_distinct_shapes_keep_memory_within_the_budget():
    """Each call records a new program of about 12 MB (half [1, 1000+k, 32] at the minimum temp
    buffer: 19 000 rows); before the budget, 400 such calls kept 8.5 GB. Under a budget of 32 MB
    (LNGB_CACHE_MB; the default, 256 MiB, is test_the_environment_sets_the_budget's), 12 calls
    would keep about 150 MB without it; the cache holds 2 programs and the process grows by
    about 27 MB. (It was 60 calls under the default budget: 25 s for the same check.)"""
    result = run_python("""
        import numpy as np, lngb
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
        def call(k):
            shape = (1, 1000 + k, 32)
            x = np.ones(shape, np.float16)
            size = lngb.GetLayerNormGradBetaMaxMinTmpSize(shape, 2, False)[1]
            lngb.emulate(x, x, stack_buffer_size=size)
        call(0)
        start = rss()
        for k in range(1, 13):
            call(k)
        info = lngb.cache_info()
        total = sum(v[1] for name, v in info.items() if name != "limit")
        print(rss() - start, total, info["limit"])
    """, LNGB_CACHE_MB="32")
    assert result.returncode == 0, result.stderr
    growth, total, limit = map(float, result.stdout.split())
    assert total <= limit == 32 * 2**20
    # the bound of 60 calls under 256 MiB (400 MB) scaled to 32 MB
    assert growth < 50, f"RSS grew by {growth:.0f} MB"


# --- threads ----------------------------------------------------------------------------------

def test_threads_leave_the_warning_filters_alone_and_lose_no_warning():
    half = np.ones((1, 8, 16), np.float16)
    caught, lock = [], threading.Lock()

    def record(message, category, *args, **kwargs):
        with lock:
            caught.append(category)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        saved, warnings.showwarning = warnings.showwarning, record
        try:
            def work():
                for _ in range(60):
                    lngb.emulate(half, half, is_reuse_source=True)
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            warnings.showwarning = saved
        assert warnings.filters == filters
    assert caught == [LngbWarning] * 240


def test_a_core_in_use_by_another_thread_refuses_instead_of_mixing_state():
    core, a, b = small_core()
    inside, leave = threading.Event(), threading.Event()

    def holder():
        with core:
            inside.set()
            leave.wait(10)
    thread = threading.Thread(target=holder)
    thread.start()
    inside.wait(10)
    try:
        with pytest.raises(InvalidArgumentError, match="in use by another thread"):
            Add(b, a, b, 64)
        with pytest.raises(InvalidArgumentError, match="in use by another thread"):
            with core:
                pass
        with pytest.raises(InvalidArgumentError, match="in use by another thread"):
            core.run_recorded("busy", kernel_of(core, a, b))
    finally:
        leave.set()
        thread.join()
    Add(b, a, b, 64)   # free again


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_two_threads_with_different_masks_on_one_core_never_mix_them():
    core = lngb.AICore()
    src = core.alloc(64, F32)
    src.write(np.arange(64, dtype=F32))
    outs = [core.alloc(64, F32) for _ in range(2)]
    wrong, refused = [], []

    def work(k):
        for _ in range(300):
            try:
                with core:
                    SetVectorMask(16 * (k + 1), dtype=np.float32)
                    Adds(outs[k], src, float(k), MASK_PLACEHOLDER, 1, is_set_mask=False)
                    got = outs[k].read()[:16 * (k + 1)]
                    if not np.array_equal(got, np.arange(16 * (k + 1)) + k):
                        wrong.append(k)
            except InvalidArgumentError:
                refused.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_separate_cores_on_separate_threads_do_not_interfere():
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((2, 16, 64)).astype(np.float32) for _ in range(4)]
    want = [lngb.emulate(x, x).pd_gamma for x in inputs]
    got = [None] * 4

    def work(k):
        for _ in range(30):
            got[k] = lngb.emulate(inputs[k], inputs[k], mode="checked" if k % 2 else "fast")
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(g.pd_gamma, w) for g, w in zip(got, want))


def test_the_environment_is_read_as_os_environ_reads_it(monkeypatch):
    """core.environment (the default mode's read of $LNGB_MODE on every call) gives what
    os.environ.get gives: set, unset, changed, non-ASCII, and with os.environ replaced."""
    from lngb.core import environment
    for name in ("LNGB_MODE", "LNGB_TEST_\u00e9", "HOME"):
        assert environment(name) == os.environ.get(name)
        monkeypatch.setenv(name, "observed \u00e9")
        assert environment(name) == "observed \u00e9"
        monkeypatch.delenv(name)
        assert environment(name) is None
    monkeypatch.setattr(os, "environ", {"LNGB_MODE": "checked"})
    assert environment("LNGB_MODE") == "checked" and lngb.AICore().mode == "checked"

    class Overridden(dict):
        def get(self, name, default=None):
            return "observed"
    monkeypatch.setattr(os, "environ", Overridden())
    assert environment("LNGB_MODE") == "observed"


def test_the_executor_takes_rows_that_are_not_contiguous():
    """The helpers read a row by its address: a strided program runs as its contiguous copy,
    and a UB that is not contiguous is refused."""
    from lngb.vector_ops import executor
    core = lngb.AICore("atlas-a2", mode="observed")
    a, b = core.alloc(64, np.float32), core.alloc(128, np.float32)
    a.write(np.arange(64, dtype=np.float32))
    lngb.vector_ops.Muls(b, a, 3.0, 64)   # the run loops take their row's fields as arguments,
    lngb.vector_ops.WholeReduceSum(b[64], b, 64, 1, 1, 1, 8)   # a family its address
    rows = np.array([r.row for r in core.trace])
    strided = np.zeros((2 * len(rows), rows.shape[1]), np.int64)
    strided[::2] = rows
    gms = [np.zeros(64, np.uint8) for _ in range(4)]
    want, got = core.ub.copy(), core.ub.copy()
    want[:b.address + 512] = got[:b.address + 512] = 0
    want[a.address:a.address + 256] = got[a.address:a.address + 256] = core.ub[
        a.address:a.address + 256]
    executor.execute(want, gms, rows)
    executor.execute(got, gms, strided[::2])
    assert np.array_equal(got, want) and np.array_equal(want, core.ub)
    with pytest.raises(lngb.InvalidArgumentError, match="C-contiguous UB"):
        executor.execute(np.zeros((2, want.size), np.uint8)[:, 0], gms, rows)
