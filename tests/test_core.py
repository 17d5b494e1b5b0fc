"""The core's guards: nothing a caller builds can make a kernel touch memory outside the UB/GM."""
import numpy as np
import pytest

import lngb
from lngb import InvalidArgumentError, OutOfBoundsError
from lngb.vector_ops import DataCopy, Duplicate


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
    with pytest.raises(InvalidArgumentError, match="outside 0 ~ 7"):
        core.vreg(8, np.float32)
    last = core.vreg(7, np.float32)
    Duplicate(last, 2.0, 64)
    assert core.ub[-4:].view(np.float32)[0] == 2.0


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
