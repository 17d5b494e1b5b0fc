"""Rejected instruction calls: each raises its specific error class with a message, and changes
no byte of the UB (validate, then mutate), issues nothing, records nothing, moves no flag; on
the "fast", "observed" and "checked" paths. A rejected call leaves the mask register as it was.
"""
import numpy as np
import pytest

import lngb
from conftest import garbage_ub
from golden import BRP, F16, F32, FULL64, URP, first_difference, t16, t32
from lngb.vector_ops import (MASK_PLACEHOLDER, PIPE_S, Add, Adds, BlockReduceSum, Cast, DataCopy,
                             DataCopyParams, Duplicate, HardEvent, MaskMode, Mul, Muls,
                             PairReduceSum, PipeBarrier, RoundMode, SetFlag, SetMaskCount,
                             SetVectorMask, Sub, WaitFlag, WholeReduceSum)

pytestmark = pytest.mark.jitted


def _err(name, exc, setup, product="atlas-a2", marks=(), checked=None):
    """A row: `exc` on every path, or `checked` on the "checked" path where the sanitizer is the
    one to reject the call."""
    return pytest.param(exc, setup, product, checked or exc, id=name, marks=marks)


def _other_core_tensor():
    return lngb.AICore("atlas-a2").alloc(256, F32)


def _byte_view(t, byte_offset, dtype):
    return t.ReinterpretCast(np.uint8)[byte_offset].ReinterpretCast(dtype)


ERRORS = [
    # --- alignment
    _err("misaligned_dst", lngb.AlignmentError, lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
         Add(a[1], b, d, 64))),
    _err("misaligned_src0_half", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b[3], d, 64, 1, BRP()))),
    _err("misaligned_src1_view_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Mul(a, b, d[4], 8))),
    _err("misaligned_adds", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): Adds(a[2], b, 1.0, 8))),
    _err("misaligned_duplicate", lngb.AlignmentError,
         lambda c: (lambda a=t16(c): Duplicate(a[15], 1.0, 64))),
    _err("misaligned_cast_src", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t32(c): Cast(a, b[1], RoundMode.CAST_RINT, 64))),
    _err("misaligned_block_reduce_src", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b[2], 1, 64, 1, 1, 8))),
    _err("misaligned_block_reduce_dst_f32_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a[4], b, 1, 64, 1, 1, 8))),
    _err("misaligned_block_reduce_dst_f16_8B", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c): BlockReduceSum(a[4], b, 1, 128, 1, 1, 8))),
    _err("misaligned_pair_reduce_dst_16B", lngb.AlignmentError,
         lambda c: (lambda a=t32(c), b=t32(c): PairReduceSum(a[4], b, 1, 64, 1, 1, 8))),
    _err("misaligned_whole_reduce_dst_odd_byte", lngb.AlignmentError,
         lambda c: (lambda a=t16(c), b=t16(c):
                    WholeReduceSum(_byte_view(a, 1, F16), b, 128, 1, 1, 1, 8))),
    _err("misaligned_datacopy_ub", lngb.AlignmentError,
         lambda c: (lambda a=t32(c): DataCopy(a[1], lngb.GlobalTensor(np.ones(64, F32)), 16))),
    _err("misaligned_datacopy_gm", lngb.AlignmentError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor.in_arena(
             np.zeros(512, np.uint8), 2, F32, 64), 16))),
    # --- footprints
    _err("repeat_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 64, 5, BRP()))),
    _err("rep_stride_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 2, BRP(1, 1, 1, 8, 8, 40)))),
    _err("blk_stride_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Sub(a, b, d, 64, 1, BRP(1, 5, 1, 8, 8, 8)))),
    _err("count_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 257))),
    _err("view_count_too_large", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a[8], b, d, 249))),
    _err("counter_count_too_large", lngb.OutOfBoundsError,
         lambda c: (SetMaskCount(), lambda a=t16(c), b=t16(c): Muls(a, b, 2.0, 300, 1, URP()))[1]),
    _err("partial_mask_still_past_end", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64), b=t32(c, 64), d=t32(c, 120):
                    Add(a, b, d[64], [1 << 63, 0], 1, BRP()))),
    _err("duplicate_rep_stride", lngb.OutOfBoundsError,
         lambda c: (lambda a=t16(c): Duplicate(a, 1.0, 128, 2, 1, 9))),
    _err("cast_dst_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t16(c, 128), b=t32(c): Cast(a, b, RoundMode.CAST_RINT, 200))),
    _err("block_reduce_src", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 5, 64, 1, 1, 8))),
    _err("block_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 8), b=t32(c): BlockReduceSum(a, b, 2, 64, 1, 1, 8))),
    _err("whole_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 8), b=t32(c): WholeReduceSum(a[6], b, 64, 3, 1, 1, 8))),
    _err("pair_reduce_dst", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64), b=t32(c): PairReduceSum(a, b, 2, 64, 2, 1, 8))),
    _err("reduce_src_rep_stride", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c), b=t32(c): WholeReduceSum(a, b, 64, 2, 1, 1, 40))),
    _err("view_offset_past_end", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): a[256])),
    _err("datacopy_gm_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(64, F32)), 72))),
    _err("datacopy_ub_too_small", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c, 64): DataCopy(a, lngb.GlobalTensor(np.ones(256, F32)), 72))),
    _err("datacopy_params_gap", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(1024, F32)),
                                              DataCopyParams(4, 8, 0, 1)))),
    _err("datacopy_ub_to_gm", lngb.OutOfBoundsError,
         lambda c: (lambda a=t32(c): DataCopy(lngb.GlobalTensor(np.ones(128, F32))[64], a, 72))),
    # --- ranges
    *[_err(f"repeat_{rep}_{api}", lngb.InvalidArgumentError, setup) for rep in (256, -1)
      for api, setup in (
          ("Add", lambda c, rep=rep: (lambda a=t32(c), b=t32(c), d=t32(c):
                                      Add(a, b, d, 64, rep, BRP(1, 1, 1, 0, 0, 0)))),
          ("Adds", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                       Adds(a, b, 1.0, 64, rep, URP(1, 1, 0, 0)))),
          ("Duplicate", lambda c, rep=rep: (lambda a=t32(c): Duplicate(a, 1.0, 64, rep, 1, 0))),
          ("Cast", lambda c, rep=rep: (lambda a=t16(c), b=t32(c):
                                       Cast(a, b, RoundMode.CAST_RINT, 64, rep, URP(1, 1, 0, 0)))),
          ("BlockReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                 BlockReduceSum(a, b, rep, 64, 0, 1, 0))),
          ("WholeReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                 WholeReduceSum(a, b, 64, rep, 0, 1, 0))),
          ("PairReduceSum", lambda c, rep=rep: (lambda a=t32(c), b=t32(c):
                                                PairReduceSum(a, b, rep, 64, 0, 1, 0))))],
    _err("mask_65_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, 65, 1, BRP()))),
    _err("mask_129_half", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, 129, 1, BRP()))),
    _err("mask_negative", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c): Adds(a, b, 1.0, -1, 1, URP()))),
    _err("mask1_nonzero_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, [FULL64, 1], 1, BRP()))),
    _err("mask1_nonzero_float_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 1, [1, 1], 1, 1, 8))),
    _err("mask0_over_64_bits", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, [1 << 64, 0], 1, BRP()))),
    _err("mask_three_words", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, [1, 1, 1], 1, BRP()))),
    _err("mask_float_value", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c), d=t16(c): Add(a, b, d, 3.0, 1, BRP()))),
    _err("cast_mask_65", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): Cast(a, b, RoundMode.CAST_RINT, 65, 1, URP()))),
    _err("count_negative", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c): Add(a, b, d, -1))),
    _err("blk_stride_256", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 1, BRP(256, 1, 1, 8, 8, 8)))),
    _err("datacopy_block_count_4096", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): DataCopy(a, lngb.GlobalTensor(np.ones(1024, F32)),
                                              DataCopyParams(4096, 0, 0, 0)))),
    _err("event_id_8", lngb.InvalidArgumentError, lambda c: (lambda: SetFlag(HardEvent.MTE2_V, 8))),
    _err("event_id_negative", lngb.InvalidArgumentError,
         lambda c: (lambda: SetFlag(HardEvent.V_MTE3, -1))),
    # a WaitFlag that would wait forever: a HazardError under the sanitizer (vector_ops.sync)
    _err("wait_without_set", lngb.InvalidArgumentError,
         lambda c: (lambda: WaitFlag(HardEvent.MTE2_V, 0)), checked=lngb.HazardError),
    _err("wait_other_event_id", lngb.InvalidArgumentError,
         lambda c: (SetFlag(HardEvent.MTE2_V, 1), lambda: WaitFlag(HardEvent.MTE2_V, 0))[1],
         checked=lngb.HazardError),
    _err("pipe_barrier_pipe_s", lngb.InvalidArgumentError, lambda c: (lambda: PipeBarrier(PIPE_S))),
    # --- dtypes and operands
    _err("dtype_mismatch_binary", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t16(c), d=t32(c): Add(a, b, d, 64))),
    _err("dtype_mismatch_adds", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): Adds(a, b, 1.0, 64))),
    _err("dtype_mismatch_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t32(c): WholeReduceSum(a, b, 64, 1, 1, 1, 8))),
    _err("dtype_mismatch_datacopy", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c): DataCopy(a, lngb.GlobalTensor(np.ones(256, F32)), 64))),
    _err("dtype_int32", lngb.InvalidArgumentError,
         lambda c: (lambda a=c.alloc(64, np.int32), b=c.alloc(64, np.int32),
                    d=c.alloc(64, np.int32): Add(a, b, d, 64))),
    _err("cast_same_dtype", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Cast(a, b, RoundMode.CAST_NONE, 64))),
    _err("cast_half_to_float_rint", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t16(c): Cast(a, b, RoundMode.CAST_RINT, 64))),
    *[_err(f"cast_half_to_float_{m.name}", lngb.InvalidArgumentError,
           lambda c, m=m: (lambda a=t32(c), b=t16(c): Cast(a, b, m, 64, 1, URP(1, 1, 8, 4))))
      for m in RoundMode if m != RoundMode.CAST_NONE and m != RoundMode.CAST_RINT],
    *[_err(f"cast_float_to_half_{m.name}_on_310P", lngb.InvalidArgumentError,
           lambda c, m=m: (lambda a=t16(c), b=t32(c): Cast(a, b, m, 64)),
           product="atlas-inference")
      for m in RoundMode if m not in (RoundMode.CAST_NONE, RoundMode.CAST_ODD)],
    _err("operands_on_two_cores", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Add(a, b, _other_core_tensor(), 64))),
    _err("dst_on_other_core", lngb.InvalidArgumentError,
         lambda c: (lambda b=t32(c): Adds(_other_core_tensor(), b, 1.0, 64))),
    _err("datacopy_ub_to_ub_two_cores", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): DataCopy(a, _other_core_tensor(), 64))),
    _err("datacopy_gm_to_gm", lngb.InvalidArgumentError,
         lambda c: (lambda: DataCopy(lngb.GlobalTensor(np.ones(64, F32)),
                                     lngb.GlobalTensor(np.ones(64, F32)), 64))),
    _err("partial_overlap_float", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Add(a[8], a, b, 64))),
    _err("partial_overlap_src1_half", lngb.InvalidArgumentError,
         lambda c: (lambda a=t16(c), b=t16(c): Mul(a, b, a[16], 128))),
    _err("partial_overlap_adds", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): Adds(a, a[8], 1.0, 64))),
    _err("overlap_same_address_other_blk_stride", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c, 512), b=t32(c, 512):
                    Add(a, a, b, 64, 1, BRP(1, 2, 1, 8, 8, 8)))),
    _err("partial_overlap_cast_in_place", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): Cast(a.ReinterpretCast(F16), a, RoundMode.CAST_RINT, 64))),
    _err("reduce_overwrites_unread_source", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c): PairReduceSum(a[64], a, 2, 64, 1, 1, 8))),
    _err("placeholder_with_is_set_mask", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, MASK_PLACEHOLDER, 1, BRP()))),
    _err("placeholder_with_is_set_mask_reduce", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): BlockReduceSum(a, b, 1, MASK_PLACEHOLDER, 1, 1, 8))),
    _err("mask_value_with_is_set_mask_false", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c), d=t32(c):
                    Add(a, b, d, 64, 1, BRP(), is_set_mask=False))),
    _err("count_form_with_is_set_mask_false", lngb.InvalidArgumentError,
         lambda c: (lambda a=t32(c), b=t32(c): Muls(a, b, 1.0, 64, is_set_mask=False))),
]


@pytest.mark.parametrize("exc,setup,product,checked_exc", ERRORS)
def test_errors_leave_ub_untouched(exc, setup, product, checked_exc, mode):
    if mode == "checked":
        exc = checked_exc
    core = lngb.AICore(product, mode=mode)
    garbage_ub(core, np.random.default_rng(3))
    with core:
        call = setup(core)
        before = core.ub.copy()
        state = (core.mask_mode, core.mask_high, core.mask_low, dict(core.flags), core.seq,
                 len(core.trace))
        with pytest.raises(exc) as info:
            call()
    assert type(info.value) is exc, repr(info.value)
    assert len(str(info.value)) > 20  # a message saying what is wrong
    assert np.array_equal(core.ub, before), first_difference(core.ub, before)
    # nothing was issued or recorded, no flag moved (the mask register: see the next test)
    assert (dict(core.flags), core.seq, len(core.trace)) == (state[3], state[4], state[5])


def test_error_classes_are_distinct():
    assert issubclass(lngb.InvalidArgumentError, ValueError)
    assert not issubclass(lngb.OutOfBoundsError, lngb.InvalidArgumentError)
    assert not issubclass(lngb.AlignmentError, lngb.InvalidArgumentError)


@pytest.mark.parametrize("counter", [False, True], ids=["normal", "counter"])
@pytest.mark.parametrize("kind", [
    "out_of_bounds",
    "partial_overlap",
    "reduce_out_of_bounds",
    "misaligned", "mask_out_of_range"])
def test_rejected_call_leaves_mask_register(kind, counter):
    core = lngb.AICore("atlas-a2")
    a, b, d = (core.alloc(256, F32) for _ in range(3))
    with core:
        if counter:
            SetMaskCount()
            SetVectorMask(0, 100, dtype=F32, mode=MaskMode.COUNTER)
        else:
            SetVectorMask(0, 0xF0F0, dtype=F32)
        state = (core.mask_mode, core.mask_high, core.mask_low)
        m = 300 if counter else 37
        calls = {
            "out_of_bounds": lambda: Add(a, b, d, m, 5, BRP(1, 1, 1, 8, 8, 16)),
            "partial_overlap": lambda: Add(a[8], a, b, m, 1, BRP()),
            "reduce_out_of_bounds": lambda: WholeReduceSum(d, a, m, 6, 1, 1, 8),
            "misaligned": lambda: Add(a[1], b, d, m, 1, BRP()),
            "mask_out_of_range": lambda: Add(a, b, d, 1 << 40 if counter else 65, 1, BRP()),
        }
        with pytest.raises(lngb.LngbError):
            calls[kind]()
        assert (core.mask_mode, core.mask_high, core.mask_low) == state
