"""LayerNormGrad host tiling against spec layernorm_grad.md §1.5-§3.6: every worked example, CANN's
tiling unit tests (UT-T), the struct's bytes, and bad requests."""
import dataclasses
import struct

import numpy as np
import pytest

from lngb import (GetLayerNormGradMaxMinTmpSize, GetLayerNormGradNDTilingInfo, LayerNormGradTiling,
                  LngbWarning, TilingError)
from lngb.errors import InvalidArgumentError
from lngb.kernels.tiling import layer_norm_grad_tmp_bytes

FLOAT, HALF = 4, 2
FIELDS = ("stackBufferSize bLength sLength hLength originalHLength oneCalSize nohCalSize loopNum "
          "tailSize nohTailSize tmpTensorBSHPos tmpTensorBSHSize pdVarTensorPos pdVarTensorSize "
          "pdMeanTensorPos pdMeanTensorSize x1TensorPos x1TensorSize x2TensorPos x2TensorSize "
          "x3TensorPos x3TensorSize tmpTensorPos tmpTensorSize tmpTensor1Pos tmpTensor1Size "
          "tmpTensor2Pos tmpTensor2Size lastDimValueBack lastDimValueBackMulTwo").split()
POSITIONS = ("tmpTensorBSHPos", "pdVarTensorPos", "pdMeanTensorPos", "x1TensorPos", "x2TensorPos",
             "x3TensorPos", "tmpTensorPos", "tmpTensor1Pos", "tmpTensor2Pos")

# spec §3.6: shape, typeSize, reuse, buffer, (max, min), one, noh, loopNum, tail, tail rows,
# positions in units of `one` (BSH, pdVar, pdMean, x1, x2, x3, tmp, tmp1, tmp2), bytes touched
FLOAT_POS, REUSE_POS, HALF_POS = (0, 1, 2, 3, 4, 5, 0, 0, 0), (0, 1, 2, 0, 0, 3, 0, 0, 0), range(9)
WORKED = [
    ((2, 32, 16), FLOAT, False, 6144, (24576, 6144), 256, 16, 4, 0, 0, FLOAT_POS, 6144),
    ((2, 32, 16), FLOAT, False, 24576, (24576, 6144), 1024, 64, 1, 0, 0, FLOAT_POS, 24576),
    ((2, 32, 16), FLOAT, True, 4096, (16384, 4096), 256, 16, 4, 0, 0, REUSE_POS, 4096),
    ((2, 32, 16), HALF, False, 4608, (18432, 4608), 256, 16, 4, 0, 0, HALF_POS, 9216),
    ((2, 32, 16), HALF, True, 4608, (18432, 4608), 256, 16, 4, 0, 0, HALF_POS, 9216),
    ((2, 32, 16), HALF, False, 18432, (18432, 4608), 512, 32, 2, 0, 0, HALF_POS, 18432),
    ((2, 16, 64), HALF, False, 36864, (73728, 36864), 1024, 16, 2, 0, 0, HALF_POS, 36864),
    ((2, 16, 64), HALF, False, 73728, (73728, 36864), 2048, 32, 1, 0, 0, HALF_POS, 73728),
    ((2, 16, 64), FLOAT, False, 49152, (98304, 49152), 2048, 32, 1, 0, 0, FLOAT_POS, 49152),
    ((2, 16, 64), FLOAT, True, 65536, (65536, 32768), 4096, 64, 0, 2048, 32, REUSE_POS, 57344),
    ((1, 2, 16), FLOAT, False, 768, (6144, 768), 128, 8, 0, 32, 2, FLOAT_POS, 2688),
    ((1, 2, 16), HALF, False, 576, (4608, 576), 256, 16, 0, 32, 2, HALF_POS, 8320),
    ((1, 8, 8), FLOAT, False, 1536, (1536, 1536), 64, 8, 1, 0, 0, FLOAT_POS, 1536),
    ((3, 7, 24), FLOAT, False, 4608, (13824, 12096), 192, 8, 2, 120, 5, FLOAT_POS, 4608),
    ((2, 5, 96), FLOAT, False, 18432, (221184, 23040), 768, 8, 1, 192, 2, FLOAT_POS, 18432),
    ((4, 128, 1024), FLOAT, False, 196608, (25165824, 12582912), 8192, 8, 64, 0, 0, FLOAT_POS,
     196608),
    ((4, 128, 1024), FLOAT, True, 196608, (16777216, 8388608), 16384, 16, 32, 0, 0, REUSE_POS,
     262144),
    ((4, 128, 1024), HALF, False, 196608, (18874368, 9437184), 16384, 16, 32, 0, 0, HALF_POS,
     589824),
]


@pytest.mark.parametrize("row", WORKED, ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}-{r[3]}")
def test_worked_examples(row):
    shape, ts, reuse, buf, maxmin, one, noh, loops, tail, tail_rows, pos, touched = row
    assert GetLayerNormGradMaxMinTmpSize(shape, ts, reuse) == maxmin
    t = GetLayerNormGradNDTilingInfo(shape, buf, ts, reuse)
    assert (t.stackBufferSize, t.bLength, t.sLength, t.hLength, t.originalHLength) == (buf, *shape,
                                                                                      shape[2])
    assert (t.oneCalSize, t.nohCalSize, t.loopNum, t.tailSize, t.nohTailSize) == (one, noh, loops,
                                                                                  tail, tail_rows)
    assert [getattr(t, p) for p in POSITIONS] == [k * one for k in pos]
    assert all(getattr(t, f) == one for f in FIELDS if f.endswith("Size") and f.startswith(
        ("tmp", "pd", "x")))
    assert layer_norm_grad_tmp_bytes(t, ts) == touched


def test_the_not_enough_example_of_the_spec():
    with pytest.raises(TilingError, match=r"^\[LayerNormGrad\]\[GetLayerNormGradNDTilingInfo\] "
                                          "stackBufferSize is not enough."):
        GetLayerNormGradNDTilingInfo((2, 32, 128), 3000, FLOAT, False)


def test_half_with_one_row_rejects_the_hosts_own_minimum():
    """Spec §3.5: half with B*S = 1 and H > 1: min is floor(H/2) floats, less than one row."""
    _, minimum = GetLayerNormGradMaxMinTmpSize((1, 1, 64), HALF, False)
    with pytest.raises(TilingError, match="not enough"):
        GetLayerNormGradNDTilingInfo((1, 1, 64), minimum, HALF, False)


@pytest.mark.parametrize("h, inv, inv2", [(8, 0x3E000000, 0x3E800000), (16, 0x3D800000, 0x3E000000),
                                          (24, 0x3D2AAAAB, 0x3DAAAAAB), (128, 0x3C000000, 0x3C800000)])
def test_one_over_h_bits(h, inv, inv2):
    t = GetLayerNormGradNDTilingInfo((1, 8, h), 1 << 20, FLOAT, False)
    assert (t.lastDimValueBack, t.lastDimValueBackMulTwo) == (inv, inv2)
    assert t.one_over_h == np.float32(1) / np.float32(h)
    assert t.one_over_h.dtype == np.float32


def test_original_h_only_enters_the_reciprocals():
    t = GetLayerNormGradNDTilingInfo((1, 8, 32, 24), 1 << 16, FLOAT, False)
    u = GetLayerNormGradNDTilingInfo((1, 8, 32, 32), 1 << 16, FLOAT, False)
    assert t.lastDimValueBack == 0x3D2AAAAB
    assert dataclasses.replace(t, originalHLength=32, lastDimValueBack=u.lastDimValueBack,
                               lastDimValueBackMulTwo=u.lastDimValueBackMulTwo) == u


# ---------------------------------------------------------------- CANN's tiling unit tests (UT-T)

def test_ut_t_non_950_max_min_with_six_dims():
    """UT-T L5860-5888 passes a 6-dim shape, which CANN only logs: strict=False reproduces it."""
    shape = (128,) * 6
    expected = {(HALF, False): (37748736, 294912), (FLOAT, True): (33554432, 262144),
                (FLOAT, False): (50331648, 393216)}
    for (ts, reuse), maxmin in expected.items():
        with pytest.warns(LngbWarning, match="The dims of srcShape is 6, should be 4"):
            assert GetLayerNormGradMaxMinTmpSize(shape, ts, reuse, strict=False) == maxmin
        with pytest.raises(TilingError, match="The dims of srcShape is 6"):
            GetLayerNormGradMaxMinTmpSize(shape, ts, reuse)
    with pytest.warns(LngbWarning):
        t = GetLayerNormGradNDTilingInfo(shape, 102400, FLOAT, False, strict=False)
    assert t.stackBufferSize == 102400
    # the rest of that row of spec §3.6, computed there
    assert (t.oneCalSize, t.nohCalSize, t.loopNum, t.tailSize, t.nohTailSize) == (5120, 40, 409,
                                                                                  3072, 24)
    assert layer_norm_grad_tmp_bytes(t, FLOAT) == 122880


def test_ut_t_950():
    """UT-T L1095-1116 (the Ascend 950 branch): two fp32 rows, none for float with reuse."""
    shape = (128, 128, 128, 128)
    assert GetLayerNormGradMaxMinTmpSize(shape, HALF, False, product="atlas-350") == (1024, 1024)
    assert GetLayerNormGradMaxMinTmpSize(shape, FLOAT, True, product="atlas-350") == (0, 0)
    assert GetLayerNormGradMaxMinTmpSize(shape, FLOAT, False, product="atlas-350") == (1024, 1024)
    assert GetLayerNormGradMaxMinTmpSize((1, 1, 20), FLOAT, False, product="atlas-350") == (192, 192)
    t = GetLayerNormGradNDTilingInfo(shape, 1024, FLOAT, False, product="atlas-350")
    assert (t.oneCalSize, t.nohCalSize, t.loopNum, t.tailSize, t.nohTailSize) == (1, 1, 128 ** 3,
                                                                                  0, 0)
    assert [getattr(t, p) for p in POSITIONS] == list(FLOAT_POS)


# ---------------------------------------------------------------- the struct

def test_struct_fields_are_canns_thirty_in_order():
    assert [f.name for f in dataclasses.fields(LayerNormGradTiling)] == FIELDS
    assert LayerNormGradTiling().to_bytes() == bytes(120)


def test_to_bytes_layout_and_round_trip():
    values = {name: 0x11223300 + i for i, name in enumerate(FIELDS)}
    b = LayerNormGradTiling(**values).to_bytes()
    assert len(b) == 120 and list(struct.unpack("<30I", b)) == list(values.values())
    assert b[4:8] == bytes([1, 0x33, 0x22, 0x11])
    for row in WORKED:
        t = GetLayerNormGradNDTilingInfo(row[0], row[3], row[1], row[2])
        assert LayerNormGradTiling.from_bytes(t.to_bytes()) == t
        assert LayerNormGradTiling.from_bytes(memoryview(t.to_bytes())) == t


@pytest.mark.parametrize("n", [0, 80, 116, 124])
def test_from_bytes_needs_120(n):
    with pytest.raises(InvalidArgumentError, match="exactly 120 bytes"):
        LayerNormGradTiling.from_bytes(bytes(n))


@pytest.mark.parametrize("value", [-1, 2 ** 32, 1.5, None, True])
def test_to_bytes_rejects_non_uint32(value):
    with pytest.raises(InvalidArgumentError, match="nohCalSize"):
        LayerNormGradTiling(nohCalSize=value).to_bytes()


# ---------------------------------------------------------------- bad requests

@pytest.mark.parametrize("ts", [0, 1, 3, 8])
def test_type_size(ts):
    for call in (lambda: GetLayerNormGradMaxMinTmpSize((2, 16, 64), ts, False),
                 lambda: GetLayerNormGradNDTilingInfo((2, 16, 64), 1 << 16, ts, False)):
        with pytest.raises(TilingError, match=f"Type size {ts} is unsupported!"):
            call()


@pytest.mark.parametrize("shape, index", [((0, 16, 64), 0), ((2, 0, 64), 1), ((2, 16, 64, 0), 3)])
def test_zero_dims_name_the_first(shape, index):
    with pytest.raises(TilingError) as err:
        GetLayerNormGradMaxMinTmpSize(shape, FLOAT, False)
    assert "Input Shape size must be greater than 0." in str(err.value)
    assert f"\nsrcShape[{index}] must be greater than 0." in str(err.value)


def test_h_zero_never_divides():
    with pytest.raises(TilingError, match="hLength is 0"):
        GetLayerNormGradNDTilingInfo((2, 16, 0), 1 << 16, FLOAT, False, strict=False)


@pytest.mark.parametrize("shape", [(8,), (8, 8)])
def test_fewer_than_three_dims(shape):
    with pytest.raises(TilingError, match="srcShape dims must not be less than 4."):
        GetLayerNormGradNDTilingInfo(shape, 1 << 16, FLOAT, False, strict=False)


@pytest.mark.parametrize("kw", [dict(srcShape="abc"), dict(srcShape=(2, -1, 64)),
                                dict(stackBufferSize=-1), dict(stackBufferSize=1.5),
                                dict(isReuseSource=1), dict(typeSize=None), dict(strict="no")])
def test_bad_arguments(kw):
    args = dict(srcShape=(2, 16, 64), stackBufferSize=4096, typeSize=FLOAT, isReuseSource=False)
    args.update(kw)
    with pytest.raises(InvalidArgumentError):
        GetLayerNormGradNDTilingInfo(**args)


def test_uint32_wrap_like_cann():
    """B*S*H wraps mod 2**32 as in CANN: 65536 * 65537 * 8 = 2**35 + 2**19 -> 2**19."""
    t = GetLayerNormGradNDTilingInfo((65536, 65537, 8), 1 << 16, FLOAT, False)
    assert t.loopNum * t.oneCalSize + t.tailSize == (65536 * 65537 * 8) % 2 ** 32


def test_unknown_product():
    from lngb.errors import UnsupportedProductError
    with pytest.raises(UnsupportedProductError):
        GetLayerNormGradMaxMinTmpSize((2, 16, 64), FLOAT, False, product="atlas-9000")
