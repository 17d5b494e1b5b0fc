"""SetCmpMask, Select's tensor-scalar mode and Muls on int16 (spec layernorm.md §4.2, §7.5 item
8) against the oracles of tests/naive.py: golden rows on the "fast", "observed" and "checked"
paths, and the checks and the sanitizer's model of the compare-mask register."""
import numpy as np
import pytest

import lngb
from conftest import rejected
from golden import (DT_LABEL, F16, F32, FULL64, MULS16, SEL, check_row, golden_mode_params,
                    row)
from lngb.vector_ops import (PIPE_V, BinaryRepeatParams, MaskMode, Muls, PipeBarrier, Select,
                             SetCmpMask, SetMaskCount, SetMaskNorm, SetVectorMask)

pytestmark = pytest.mark.jitted

GOLDEN = []
NAN_BITS = {F32: np.array([0x7FC01234, 0xFF800001, 0x80000000], np.uint32).view(F32),
            F16: np.array([0x7E12, 0xFC01, 0x8000], np.uint16).view(F16)}

for dt in (F32, F16):
    L, epr = DT_LABEL[dt], 256 // dt.itemsize

    def cmp(case, variant, **kw):
        row(GOLDEN, "SetCmpMask", L, case, variant, SEL("SetCmpMask", dt, **kw))

    cmp("full", "", cmp_offset=0)
    cmp("tail", "a_row_sum_16_bytes_in", cmp_offset=16 // dt.itemsize)
    cmp("specials", "nan_payload", cmp_offset=0, specials=(NAN_BITS[dt],))

    def sel(case, variant, nop=False, **kw):
        row(GOLDEN, "Select", L, case, variant, SEL("Select", dt, **kw), nop=nop)

    sel("full", "", mask=epr, repeat=2)
    sel("dst_eq_src0", "layernorm_broadcast", alias=True, form="counter_ph", count=epr + 24)
    sel("partial_mask", "bitwise", mask=(0x0F0F_F00F_1234_8001, 0x8000_0000_0000_0001
                                         if epr == 128 else 0), repeat=3)
    sel("partial_mask", "continuous_5", mask=5, repeat=2)
    sel("counter_mask", "", form="counter_ph", count=3 * epr)
    sel("repeat_0", "", mask=epr, repeat=0, nop=True)
    sel("stride_gt_1", "dst", mask=epr, repeat=2, strides=(2, 1, 16, 8))
    sel("stride_gt_1", "src0_rep_0", mask=epr, repeat=3, strides=(1, 1, 8, 0))
    sel("tail", "counter_partial_repeat", form="counter_ph", count=2 * epr + 7)
    sel("specials", "bits_move_unchanged", mask=epr, repeat=1, specials=(NAN_BITS[dt],))
    sel("full", "sel_mask_uint8", mask=epr, repeat=2, sel_mask_dtype=np.dtype(np.uint8))


def muls16(case, variant, scalar, nop=False, **kw):
    row(GOLDEN, "Muls", "s16", case, variant, MULS16(scalar, **kw), nop=nop)


muls16("full", "by_zero", 0, mask=128, repeat=2)
muls16("full", "by_one", 1, form="count", count=300)
muls16("specials", "saturates", 3, mask=128, repeat=1)
muls16("specials", "by_minus_32768", -32768, form="count", count=64)
muls16("dst_eq_src0", "layernorm_zeroing", 0, alias=True, form="counter_ph", count=48)
muls16("partial_mask", "", -7, mask=(0x8000_0000_0000_0001, FULL64 >> 3), repeat=2)
muls16("counter_mask", "", 5, form="counter", count=200, repeat=1)
muls16("repeat_0", "", 2, mask=128, repeat=0, nop=True)
muls16("stride_gt_1", "", -1, mask=128, repeat=2, strides=(2, 1, 16, 8))
muls16("tail", "", 1, form="normal_ph", mask=(FULL64, FULL64 >> 60), repeat=1)


@pytest.mark.parametrize("golden, mode", golden_mode_params(GOLDEN))
def test_golden(golden, mode):
    check_row(golden, mode)


def test_select_after_set_cmp_mask_broadcasts_a_row_value():
    """CANN's BroadcastLastDim for one row: the selMask zeroed by an int16 Muls, then every lane
    := the compare-mask scalar."""
    core = lngb.AICore(mode="checked")
    src, dst = core.alloc(64, F32), core.alloc(64, F32)
    src[0].write(np.array([2.5], F32))   # a row sum: the other bytes are never written
    dst.write(np.arange(64, dtype=F32))
    with core:
        SetMaskCount()
        SetVectorMask(0, 24, dtype=np.uint8, mode=MaskMode.COUNTER)
        SetCmpMask(src)
        PipeBarrier(PIPE_V)
        mask = src.ReinterpretCast(np.int16)
        Muls(mask, mask, 0, lngb.vector_ops.MASK_PLACEHOLDER, 1,
             lngb.vector_ops.UnaryRepeatParams(), is_set_mask=False)
        PipeBarrier(PIPE_V)
        Select(dst, mask.ReinterpretCast(np.uint16), dst, 1, BinaryRepeatParams())
        SetMaskNorm()
    assert dst.read().tolist() == [2.5] * 24 + list(range(24, 64))
    assert [r.name for r in core.trace if r.is_instruction] == ["SetCmpMask", "Muls", "Select"]


def test_the_sanitizer_tracks_the_compare_mask_register():
    """SetCmpMask carries its bytes' state: a Select whose scalar was never written is an
    UninitializedReadError; a Select right after SetCmpMask, with no barrier, a HazardError."""
    core = lngb.AICore(mode="checked")
    src, dst, sel = core.alloc(64, F32), core.alloc(64, F32), core.alloc(64, np.uint16)
    src[4].write(np.array([1.0], F32))
    dst.write(np.zeros(64, F32))
    sel.write(np.zeros(64, np.uint16))
    with core:
        SetVectorMask(0, 8, dtype=F32)
        SetCmpMask(src)
        PipeBarrier(PIPE_V)
        message = rejected(lngb.UninitializedReadError,
                           lambda: Select(dst, sel, dst, 1, BinaryRepeatParams()), core)
        assert "Select" in message
        SetCmpMask(src[4])
        message = rejected(lngb.HazardError,
                           lambda: Select(dst, sel, dst, 1, BinaryRepeatParams()), core)
        assert "SetCmpMask" in message and "PipeBarrier(PIPE_V)" in message


def test_checks():
    core = lngb.AICore()
    x, sel = core.alloc(256, F32), core.alloc(8, np.uint16)
    halves = core.alloc(256, F16)
    with core:
        assert "aligned to 16" in rejected(lngb.AlignmentError, lambda: SetCmpMask(x[2]), core)
        assert "selMask" in rejected(lngb.OutOfBoundsError,
                                     lambda: Select(x, sel, x, 3, BinaryRepeatParams()), core)
        assert "dtype" in rejected(lngb.InvalidArgumentError,
                                   lambda: Select(x, x, x, 1, BinaryRepeatParams()), core)
        assert "share one dtype" in rejected(
            lngb.InvalidArgumentError, lambda: Select(x, sel, halves, 1, BinaryRepeatParams()),
            core)
        ints = core.alloc(128, np.int16)
        assert "integer" in rejected(lngb.InvalidArgumentError,
                                     lambda: Muls(ints, ints, 0.5, 128), core)
        assert "range" in rejected(lngb.InvalidArgumentError,
                                   lambda: Muls(ints, ints, 40000, 128), core)
        assert "int16" in rejected(lngb.InvalidArgumentError,
                                   lambda: lngb.vector_ops.Adds(ints, ints, 1, 128), core)
