"""DataCopy (GM -> UB, UB -> GM, UB -> UB; count form and DataCopyParams) against the
independent oracles of tests/naive.py: golden rows, each run on the "fast", "observed" and
"checked" paths (golden.check_spec: the whole UB, and the GM buffer, compared byte for byte).
"""
import pytest

from golden import COPY, DT_LABEL, F16, F32, check_row, golden_mode_params, row

pytestmark = pytest.mark.jitted

GOLDEN = []

# ---- DataCopy -------------------------------------------------------------------------------

for dt in (F32, F16):
    L, per32 = DT_LABEL[dt], 32 // dt.itemsize
    for direction in ("gm_to_ub", "ub_to_gm", "ub_to_ub"):
        def r(case, variant, nop=False, **kw):
            row(GOLDEN, "DataCopy", L, case, f"{direction}{'-' + variant if variant else ''}",
                COPY(direction, dt, **kw), nop=nop)

        r("full", "count", count=per32 * 40)
        r("tail", "count_rounds_down", count=per32 * 25 + per32 - 1)
        r("tail", "count_below_one_block", count=per32 - 1, nop=True)
        r("repeat_0", "count_0", count=0, nop=True)
        r("stride_gt_1", "params", params=(3, 2, 1, 4))
        r("stride_gt_1", "params_src_views", params=(4, 1, 3, 0), src_offset=per32 * 3,
          dst_offset=per32 * 2)
        r("full", "params_contiguous", params=(1, 7, 0, 0))
        r("repeat_0", "params_block_count_0", params=(0, 4, 1, 1), nop=True)
        r("repeat_0", "params_block_len_0", params=(3, 0, 1, 1), nop=True)


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)
