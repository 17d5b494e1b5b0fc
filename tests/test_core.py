"""The core's guards: nothing a caller builds can make a kernel touch memory outside the UB/GM."""
import numpy as np
import pytest

import lngb
from lngb import InvalidArgumentError, OutOfBoundsError
from lngb.vector_ops import DataCopy, Duplicate

pytestmark = pytest.mark.jitted


def test_a_tensor_outside_the_ub_is_rejected():
    core = lngb.AICore()
    before = core.ub.copy()
    for address in (-256, core.ub_size - 128):
        outside = lngb.LocalTensor(core, address, 128, np.float32)
        with pytest.raises(OutOfBoundsError, match="outside the UB"):
            Duplicate(outside, 1.0, 128)
    assert np.array_equal(core.ub, before)


def test_vector_registers_are_range_checked():
    core = lngb.AICore()
    with pytest.raises(InvalidArgumentError, match="outside 0 ~ 31"):
        core.vreg(32, np.float32)
    last = core.vreg(31, np.float32)
    Duplicate(last, 2.0, 64)
    assert core.ub[last.address + 252:last.address + 256].view(np.float32)[0] == 2.0
    assert last.address + 256 <= core.ub.size


def test_gm_tensors_cannot_claim_more_than_their_buffer():
    arena = np.zeros(64, np.uint8)
    with pytest.raises(OutOfBoundsError, match="does not fit"):
        lngb.GlobalTensor.in_arena(arena, 0, np.float32, 1024)
    core = lngb.AICore()
    local = core.alloc(64, np.float32)
    with pytest.raises(OutOfBoundsError):
        DataCopy(lngb.GlobalTensor(np.zeros(16, np.float32)), local, 64)


def test_read_only_gm_can_be_read_not_written():
    core = lngb.AICore()
    local = core.alloc(64, np.float32)
    source = np.arange(64, dtype=np.float32)
    source.flags.writeable = False
    DataCopy(local, lngb.GlobalTensor(source), 64)
    assert np.array_equal(local.read(), source)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        DataCopy(lngb.GlobalTensor(source), local, 64)


def test_nan_results_carry_the_first_nan_operand_on_every_path():
    """The contiguous loop and the strided walk pick the same NaN: src0's, then src1's, quieted."""
    from lngb.vector_ops import Add, BinaryRepeatParams
    core = lngb.AICore()
    a, b, flat, walk = (core.alloc(128, np.float32) for _ in range(4))
    nan_a = np.uint32(0x7F800001).view(np.float32)   # signalling, payload 1
    nan_b = np.uint32(0xFFC00002).view(np.float32)   # quiet, negative, payload 2
    a.write(np.array([nan_a, 1.0, nan_a, np.inf] * 32, np.float32))
    b.write(np.array([nan_b, nan_b, 1.0, -np.inf] * 32, np.float32))
    Add(flat, a, b, 64)
    Add(walk, a, b, 64, 1, BinaryRepeatParams(2, 2, 2, 8, 8, 8))   # every other block
    flat_bits = flat.read()[:4].view(np.uint32)
    walk_bits = walk.read()[:4].view(np.uint32)
    assert [hex(x) for x in flat_bits[:3]] == ["0x7fc00001", "0xffc00002", "0x7fc00001"]
    assert np.isnan(flat.read()[3])                    # inf - inf: the CPU's default NaN
    assert np.array_equal(flat_bits[:3], walk_bits[:3])


def test_interleaved_operands_that_share_no_byte_are_accepted():
    from lngb.vector_ops import Adds, UnaryRepeatParams
    core = lngb.AICore()
    buf = core.alloc(256, np.float32)
    buf.write(np.arange(256, dtype=np.float32))
    Adds(buf, buf[8], 100.0, 64, 2, UnaryRepeatParams(2, 2, 16, 16))  # even blocks <- odd blocks
    out = buf.read().reshape(-1, 8)
    assert np.array_equal(out[0], np.arange(8, 16) + 100) and np.array_equal(out[1], np.arange(8, 16))
    with pytest.raises(InvalidArgumentError, match="share some but not all"):
        Adds(buf, buf[8], 1.0, 64, 1, UnaryRepeatParams(2, 1, 16, 8))


def test_bad_enum_and_scalar_arguments_are_invalid_argument_errors():
    from lngb.vector_ops import Adds, Cast, MaskMode, PipeBarrier, SetVectorMask
    core = lngb.AICore()
    a, h = core.alloc(64, np.float32), core.alloc(64, np.float16)
    with core:
        for call, text in ((lambda: PipeBarrier(99), "pipe 99"),
                           (lambda: Cast(h, a, 9, 64), "round_mode 9"),
                           (lambda: Adds(a, a, "x", 64), "not a number"),
                           (lambda: SetVectorMask(5, dtype=np.float32, mode=7), "mode 7")):
            with pytest.raises(InvalidArgumentError, match=text):
                call()
        assert core.mask_mode == MaskMode.NORMAL


@pytest.mark.lngb(mode="fast")   # about fast mode, or data a checked run refuses
def test_repeated_count_form_calls_reuse_their_validation():
    from lngb.vector_ops import Add, Cast, Duplicate, MaskMode, RoundMode
    lngb.clear_caches()
    core = lngb.AICore()
    a, b, c = (core.alloc(256, np.float32) for _ in range(3))
    h = core.alloc(256, np.float16)
    rng = np.random.default_rng(0)
    memo = lambda: lngb.cache_info().get("validated calls", (0, 0))[0]
    for _ in range(3):   # new data every time: the replayed row must still compute it
        x, y = rng.standard_normal(256).astype(np.float32), rng.standard_normal(256).astype(np.float32)
        a.write(x)
        b.write(y)
        Add(c, a, b, 200)
        assert np.array_equal(c.read()[:200], x[:200] + y[:200])
        Cast(h, c, RoundMode.CAST_RINT, 256)
        assert np.array_equal(h.read(), c.read().astype(np.float16))
        Duplicate(a, 7.0, 16)
        assert np.all(a.read()[:16] == 7.0) and np.array_equal(a.read()[16:], x[16:])
    assert memo() == 3 and core.seq == 9
    assert core.mask_mode == MaskMode.NORMAL
    with pytest.raises(OutOfBoundsError):   # another view: validated afresh
        Add(c, a[64], b, 256)
    Add(c[64], a[64], b[64], 192)
    assert memo() == 4
