"""The golden tables of the instruction families (test_arithmetic, test_cast, test_reductions,
test_datacopy, test_brcb, test_select) checked together:

1. Row ids are unique across all families (they name the tests and seed the rows).
2. Every name in ``INSTRUCTIONS`` has golden rows, with the applicable edge-case names.
3. The same rows on the "fast", "observed" and "checked" paths leave identical bytes.
"""
import numpy as np
import pytest

from conftest import seed_of
from golden import EDGE_CASES, check_spec
from lngb.vector_ops import INSTRUCTIONS
from test_arithmetic import GOLDEN as ARITHMETIC_ROWS
from test_brcb import GOLDEN as BRCB_ROWS
from test_cast import GOLDEN as CAST_ROWS
from test_datacopy import GOLDEN as DATACOPY_ROWS
from test_reductions import GOLDEN as REDUCTION_ROWS
from test_select import GOLDEN as SELECT_ROWS

pytestmark = pytest.mark.jitted

# every family's rows, in the order of the table before it was split by family
GOLDEN = ARITHMETIC_ROWS + CAST_ROWS + REDUCTION_ROWS + DATACOPY_ROWS + BRCB_ROWS + SELECT_ROWS


def test_golden_ids_unique():
    ids = [g.id for g in GOLDEN]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# Which STYLE.md edge cases apply to which instruction (no second source: no dst_eq_src1; no
# source: no aliasing; DataCopy: no masks, no in-place).
APPLICABLE = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Max", "Min"), EDGE_CASES),
    **dict.fromkeys(("Adds", "Muls", "Maxs", "Mins", "Sqrt", "Abs", "Relu"),
                    tuple(c for c in EDGE_CASES if c != "dst_eq_src1")),
    "Duplicate": tuple(c for c in EDGE_CASES if not c.startswith("dst_eq")),
    "Cast": tuple(c for c in EDGE_CASES if not c.startswith("dst_eq")),
    "BlockReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "WholeReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "PairReduceSum": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),
    "DataCopy": ("repeat_0", "stride_gt_1", "tail"),
    "Brcb": ("repeat_0", "stride_gt_1", "tail"),   # no mask, no in-place (no overlap allowed)
    "DuplicateLane": ("tail",),   # one element to every lane: no mask, repeat or stride
    "Select": tuple(c for c in EDGE_CASES if c != "dst_eq_src1"),   # selMask is no lane source
    "SetCmpMask": ("tail",),      # 16 bytes into a register: no mask, repeat or stride
}


@pytest.mark.parametrize("instr", INSTRUCTIONS)
def test_every_instruction_has_golden_rows(instr):
    rows = [g for g in GOLDEN if g.instr == instr]
    assert rows, f"{instr} has no golden row"
    assert instr in APPLICABLE, f"{instr}: say which edge cases apply"
    for dtype in {g.dtype for g in rows}:  # each dtype (Cast: each direction) on its own
        missing = set(APPLICABLE[instr]) - {g.case for g in rows if g.dtype == dtype}
        assert not missing, f"{instr} {dtype}: no golden rows for {sorted(missing)}"
    assert {g.dtype for g in rows} >= ({"f32->f16", "f16->f32"} if instr == "Cast"
                                       else {"f32", "f16"})
    assert {g.case for g in rows} <= set(EDGE_CASES) | {"full", "specials"}


def test_both_paths_identical_bytes():
    """The same rows on "fast", "observed" and "checked" leave identical UB bytes (besides the
    oracle); the two paths that keep a trace record the same instructions."""
    picks = [g for g in GOLDEN if g.case in ("counter_mask", "stride_gt_1") and not g.marks][::3]
    assert len(picks) > 10
    for g in picks:
        a = check_spec(g.spec, product=g.product, sat=g.sat, mode="fast", seed=seed_of(g.id))
        b = check_spec(g.spec, product=g.product, sat=g.sat, mode="observed", seed=seed_of(g.id))
        c = check_spec(g.spec, product=g.product, sat=g.sat, mode="checked", seed=seed_of(g.id))
        assert np.array_equal(a.ub, b.ub), g.id
        assert np.array_equal(a.ub, c.ub), g.id
        assert a.trace == [] and len(b.trace) > 0
        assert [r.name for r in c.trace] == [r.name for r in b.trace], g.id
