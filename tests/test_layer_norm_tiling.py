"""LayerNorm (forward) host tiling against spec layernorm.md §3: the worked examples (§3.4), CANN's
tiling unit tests (§3.6), both structs' fields and bytes (§3.2, §3.5), the form-2 product
branches, and the requests CANN only logs (§3.1)."""
import dataclasses
import struct

import numpy as np
import pytest

import lngb
from lngb import (GetLayerNormMaxMinTmpSize, GetLayerNormNDTilingInfo, GetLayerNormNDTillingInfo,
                  LayerNormSeparateTiling, LayerNormTiling, LngbWarning, TilingError)
from lngb.errors import InvalidArgumentError

import naive

FLOAT, HALF = 4, 2
FIELDS = ("bLength sLength hLength originalHLength inputXSize meanVarSize numberOfTmpBuf "
          "meanTmpTensorPos meanTmpTensorSize varianceTmpTensorPos varianceTmpTensorSize "
          "tmpBufSize oneTmpSize firstTmpStartPos secondTmpStartPos thirdTmpStartPos loopRound "
          "inputRoundSize inputTailSize inputTailPos meanVarRoundSize meanVarTailSize "
          "meanVarTailPos bshCurLength bsCurLength lastDimValueBack").split()
SEPARATE_FIELDS = ("aLength rLength halfAddRepeatTimes rHeadLength k2Rec k2RRec inputXSize "
                   "meanVarSize numberOfTmpBuf varianceTmpTensorPos varianceTmpTensorSize "
                   "tmpBufSize oneTmpSize firstTmpStartPos secondTmpStartPos thirdTmpStartPos "
                   "loopRound inputRoundSize inputTailSize inputTailPos meanVarRoundSize "
                   "meanVarTailSize meanVarTailPos arCurLength aCurLength rValueBack").split()

# spec §3.4: shape, typeSize, reuse, stackBufferSize, (max, min), one, loopRound, tail, tail
# rows, (first, second, third)
WORKED = [
    ((2, 32, 16), FLOAT, False, 6144, (12800, 704), 512, 2, 0, 0, (0, 512, 1024)),
    ((2, 32, 16), FLOAT, False, 704, (12800, 704), 48, 21, 16, 1, (0, 48, 96)),
    ((2, 32, 16), FLOAT, True, 640, (8704, 640), 80, 12, 64, 4, (0, 80, 160)),
    ((2, 16, 64), HALF, False, 1024, (24832, 1024), 64, 32, 0, 0, (64, 128, 192)),
    ((3, 7, 24), FLOAT, False, 1200, (6240, 480), 96, 5, 24, 1, (0, 96, 192)),
    ((1, 8, 8), FLOAT, False, 352, (832, 160), 24, 2, 16, 2, (0, 24, 48)),
    ((1, 300, 8), FLOAT, False, 28800, (31232, 2528), 2400, 1, 0, 0, (0, 2400, 4800)),
    ((128, 128, 128, 128), FLOAT, False, 102400, (25296896, 132608), 8448, 248, 2048, 16,
     (0, 8448, 16896)),
]


def f32_bits(value):
    return int(np.float32(value).view(np.uint32))


@pytest.mark.parametrize("row", WORKED, ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}-{r[3]}")
def test_worked_examples(row):
    shape, ts, reuse, size, max_min, one, loops, tail, tail_rows, starts = row
    assert GetLayerNormMaxMinTmpSize(shape, ts, reuse) == max_min
    t = GetLayerNormNDTilingInfo(shape, size, ts, reuse)
    b, s, h = shape[:3]
    bs, bsh, mvs = b * s, b * s * h, -(-b * s // 8) * 8
    assert (t.bLength, t.sLength, t.hLength, t.originalHLength) == (b, s, h, shape[-1])
    assert (t.inputXSize, t.meanVarSize) == (bsh, bs)
    assert t.numberOfTmpBuf == (2 if reuse and ts == FLOAT else 3)
    assert (t.meanTmpTensorPos, t.meanTmpTensorSize) == (0, mvs)
    assert (t.varianceTmpTensorPos, t.varianceTmpTensorSize) == (mvs, mvs)
    assert t.tmpBufSize == size // 4
    assert t.oneTmpSize == t.inputRoundSize == t.bshCurLength == one
    assert (t.firstTmpStartPos, t.secondTmpStartPos, t.thirdTmpStartPos) == starts
    assert (t.loopRound, t.inputTailSize, t.inputTailPos) == (loops, tail, bsh - tail)
    assert t.meanVarRoundSize == t.bsCurLength == one // h
    assert (t.meanVarTailSize, t.meanVarTailPos) == (tail_rows, bs - tail_rows)
    assert f32_bits(t.lastDimValueBack) == f32_bits(np.float32(1) / np.float32(shape[-1]))


def test_the_spec_s_tail_example_in_full():
    """[2, 32, 16] float at the minimum, 704 bytes (§3.4): every field."""
    t = GetLayerNormNDTilingInfo((2, 32, 16, 16), 704, FLOAT, False)
    assert dataclasses.astuple(t) == (2, 32, 16, 16, 1024, 64, 3, 0, 64, 64, 64, 176, 48, 0, 48,
                                      96, 21, 48, 16, 1008, 3, 1, 63, 48, 3, 0.0625)


@pytest.mark.parametrize("h, bits", [(8, 0x3E000000), (16, 0x3D800000), (24, 0x3D2AAAAB),
                                     (96, 0x3C2AAAAB), (200, 0x3BA3D70A), (1024, 0x3A800000)])
def test_last_dim_value_back_is_one_fp32_division(h, bits):
    t = GetLayerNormNDTilingInfo((1, 2, 512, h), 1 << 16, FLOAT, False)
    assert f32_bits(t.lastDimValueBack) == bits
    assert struct.unpack_from("<I", t.to_bytes(), 100)[0] == bits


def test_original_h_only_enters_the_reciprocal():
    a = GetLayerNormNDTilingInfo((2, 4, 32, 32), 4096, FLOAT, False)
    b = GetLayerNormNDTilingInfo((2, 4, 32, 20), 4096, FLOAT, False)
    assert dataclasses.replace(b, originalHLength=32, lastDimValueBack=a.lastDimValueBack) == a
    assert b.lastDimValueBack == np.float32(1) / np.float32(20)


def test_the_host_minimum_gives_one_row_and_the_maximum_one_chunk():
    for shape in [(2, 32, 16), (3, 7, 24), (1, 300, 8), (4, 9, 40)]:
        for ts, reuse in [(FLOAT, False), (FLOAT, True), (HALF, False)]:
            biggest, smallest = GetLayerNormMaxMinTmpSize(shape, ts, reuse)
            assert GetLayerNormNDTilingInfo(shape, smallest, ts, reuse).oneTmpSize >= shape[2]
            top = GetLayerNormNDTilingInfo(shape, biggest, ts, reuse)
            assert (top.loopRound, top.inputTailSize) == (1, 0)


def test_ut_t_non_950():
    """UT-T L4945-4973: float {128} x 6 (CANN reads the first four dims and logs the rest); ND
    with 0 bytes sets nothing; with 102400, tmpBufSize 25600, in every spelling."""
    six = [128] * 6
    with pytest.raises(TilingError, match=r"\[LayerNorm\]\[GetLayerNormMaxMinTmpSize\] The dims "
                                          r"of srcShape is 6, should be 4"):
        GetLayerNormMaxMinTmpSize(six, FLOAT, False)
    with pytest.warns(LngbWarning, match="should be 4"):
        assert GetLayerNormMaxMinTmpSize(six, FLOAT, False, strict=False) == (25296896, 132608)
    with pytest.raises(TilingError, match="not even one row"):
        GetLayerNormNDTilingInfo([128] * 4, 0, FLOAT, False)
    for function in (GetLayerNormNDTilingInfo, GetLayerNormNDTillingInfo):
        with pytest.warns(LngbWarning):
            assert function(six, 102400, FLOAT, False, strict=False).tmpBufSize == 25600
        assert function([128] * 4, 102400, FLOAT, False).tmpBufSize == 25600


def test_form_1_has_no_product_branch():
    """The 950 gets the A2 numbers (its kernel ignores the temp buffer)."""
    for product in ("atlas-a2", "atlas-inference", "atlas-350"):
        assert GetLayerNormMaxMinTmpSize((2, 16, 64), HALF, False, product=product) == (24832,
                                                                                       1024)
        assert GetLayerNormNDTilingInfo((2, 16, 64), 1024, HALF, False,
                                        product=product).oneTmpSize == 64


# --- form 2: [A, R] -------------------------------------------------------------------------------

def test_ut_t_950_form_2():
    """UT-T L1021-1091 (Ascend 950): {128, 88, 88} and {128, 88}, float."""
    p = dict(product="atlas-350")
    assert GetLayerNormMaxMinTmpSize((128, 88, 88), FLOAT, False, False, False, **p) == (1536,
                                                                                        1536)
    assert GetLayerNormMaxMinTmpSize((128, 88, 88), FLOAT, False, True, False, **p) == (1024,
                                                                                       1024)
    assert GetLayerNormMaxMinTmpSize((128, 88), FLOAT, False, True, False, **p) == (1024, 1024)
    for size in (100 * 1024, 0):
        t = GetLayerNormNDTilingInfo((128, 88), size, FLOAT, False, True, **p)
        assert isinstance(t, LayerNormSeparateTiling)
        assert (t.rLength, t.rHeadLength, t.oneTmpSize) == (88, 64, 6)
        assert t.k2Rec == np.float32(1) / np.float32(128)
        assert t.k2RRec == np.float32(128) / np.float32(88)
        assert t.aLength == t.tmpBufSize == t.inputXSize == t.rValueBack == 0   # never set


@pytest.mark.parametrize("r, head, k, over", [(8, 64, 6, 64), (64, 64, 6, 64), (65, 64, 6, 128),
                                              (127, 64, 6, 128), (128, 128, 7, 128),
                                              (129, 128, 7, 256), (4096, 4096, 12, 4096),
                                              (5000, 4096, 12, 8192)])
def test_950_form_2_head_is_the_largest_power_of_two_not_above_r(r, head, k, over):
    t = GetLayerNormNDTilingInfo((3, r), 0, HALF, False, True, product="atlas-350")
    assert (t.rHeadLength, t.oneTmpSize) == (head, k)
    assert t.k2Rec == np.float32(1) / np.float32(over)
    assert t.k2RRec == np.float32(over) / np.float32(r)


def test_ut_t_a2_form_2():
    """UT-T L8893-8931 (A2), float: {4, 32} and {32, 8}; ND {32, 8} with 4096 bytes, and with 0
    (CANN's uint32 wrap: a tiling that claims more buffer than it has)."""
    for _ in range(3):
        assert GetLayerNormMaxMinTmpSize((4, 32), FLOAT, False, True, False) == (2336, 288)
    assert GetLayerNormMaxMinTmpSize((32, 8), FLOAT, False, True, False) == (2240, 256)
    t = GetLayerNormNDTilingInfo((32, 8), 4096, FLOAT, False, True)
    assert dataclasses.astuple(t) == (32, 8, 0, 0, 0.0, 0.0, 256, 32, 2, 0, 32, 1024, 256, 32,
                                      288, 0, 1, 256, 0, 256, 32, 0, 32, 256, 32, 0.125)
    with pytest.raises(TilingError, match="wraps"):
        GetLayerNormNDTilingInfo((32, 8), 0, FLOAT, False, True)
    with pytest.warns(LngbWarning, match="wraps"):
        wrapped = GetLayerNormNDTilingInfo((32, 8), 0, FLOAT, False, True, strict=False)
    assert (wrapped.tmpBufSize, wrapped.oneTmpSize, wrapped.loopRound) == (0, 256, 1)


def test_a2_form_2_pads_r_to_32_bytes_and_takes_normalize_s_sizes():
    # half, R = 20 pads to 32: mv = 32, inp = 256, rd = 128 bytes: max 2*256 + 32, min 2*128 + 32;
    # Normalize: max = 2*128 + 2*(4*8*32) = 2304 and min = max(32, 4*128) = 512 are larger, so
    # max = 2304 + 32 and min = 512 + 32
    assert GetLayerNormMaxMinTmpSize((2, 20), HALF, False, True, False) == (2336, 544)
    t = GetLayerNormNDTilingInfo((2, 20), 4096, HALF, False, True)
    assert (t.inputXSize, t.oneTmpSize, t.firstTmpStartPos) == (64, 64, 8)
    assert t.rValueBack == np.float32(1) / np.float32(20)


def test_form_2_requests_canns_host_refuses():
    with pytest.raises(TilingError, match="isOnlyOutput current only support false"):
        GetLayerNormMaxMinTmpSize((4, 32), FLOAT, False, True, True)
    with pytest.raises(TilingError, match="isComputeRstd current only support true"):
        GetLayerNormMaxMinTmpSize((4, 32), FLOAT, False, False, False)   # A2: Normalize returns
    with pytest.raises(TilingError, match="typeSize can not be 0"):
        GetLayerNormNDTilingInfo((4, 32), 4096, 0, False, True, product="atlas-350")
    with pytest.raises(TilingError, match="2 dims"):
        GetLayerNormNDTilingInfo((4, 32, 8), 4096, FLOAT, False, True)
    with pytest.raises(TilingError, match="Input Shape size must be greater than 0"):
        GetLayerNormMaxMinTmpSize((0, 32), FLOAT, False, True, False)


# --- the structs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, names", [(LayerNormTiling, FIELDS),
                                        (LayerNormSeparateTiling, SEPARATE_FIELDS)])
def test_struct_fields_are_canns_in_order(cls, names):
    assert [f.name for f in dataclasses.fields(cls)] == names
    assert len(cls().to_bytes()) == 104


def test_to_bytes_layout_and_round_trip():
    t = GetLayerNormNDTilingInfo((3, 7, 24), 1200, FLOAT, False)
    raw = t.to_bytes()
    assert struct.unpack("<25I", raw[:100]) == dataclasses.astuple(t)[:25]
    assert raw[100:] == np.float32(1 / np.float32(24)).tobytes()
    assert LayerNormTiling.from_bytes(raw) == t
    s = GetLayerNormNDTilingInfo((32, 8), 4096, FLOAT, False, True)
    raw = s.to_bytes()
    assert struct.unpack_from("<4I2f", raw) == dataclasses.astuple(s)[:6]
    assert LayerNormSeparateTiling.from_bytes(raw) == s
    t.oneTmpSize = 24   # writable, as the kernel writes two fields
    assert LayerNormTiling.from_bytes(t.to_bytes()).oneTmpSize == 24


@pytest.mark.parametrize("n", [0, 100, 103, 105, 120])
def test_from_bytes_needs_104(n):
    with pytest.raises(InvalidArgumentError, match="104"):
        LayerNormTiling.from_bytes(bytes(n))


@pytest.mark.parametrize("value", [-1, 2 ** 32, 1.5, True, "1"])
def test_to_bytes_rejects_a_non_uint32_field(value):
    with pytest.raises(InvalidArgumentError, match="oneTmpSize"):
        LayerNormTiling(oneTmpSize=value).to_bytes()


@pytest.mark.parametrize("value", ["0.5", None, 1j])
def test_to_bytes_rejects_a_non_number_float_field(value):
    with pytest.raises(InvalidArgumentError, match="lastDimValueBack"):
        LayerNormTiling(lastDimValueBack=value).to_bytes()


# --- form 1's requests CANN only logs (§3.1) -------------------------------------------------------

@pytest.mark.parametrize("ts", [0, 1, 3, 8])
def test_type_size(ts):
    with pytest.raises(TilingError, match=f"Type size {ts} is unsupported"):
        GetLayerNormMaxMinTmpSize((2, 4, 16), ts, False)


def test_the_first_failing_check_only_is_logged_in_canns_order():
    """CheckLayerNormHostCommon: shape size, then dims, then typeSize; each returns."""
    with pytest.raises(TilingError) as err:
        GetLayerNormMaxMinTmpSize((2, 0, 16, 16, 1), 3, False)
    assert str(err.value) == ("[LayerNorm][GetLayerNormMaxMinTmpSize] Input Shape size must be "
                              "greater than 0.")


def test_h_zero_and_too_small_a_buffer():
    with pytest.raises(TilingError, match="the value of hLength should not be zero"):
        GetLayerNormNDTilingInfo((2, 4, 0, 16), 4096, FLOAT, False, strict=False)
    with pytest.raises(TilingError, match="not even one row"):
        GetLayerNormNDTilingInfo((2, 4, 64), 64 * 4 * 3 - 4, FLOAT, False)


def test_half_below_the_mean_variance_scratch_wraps_as_canns_uint32():
    """[2, 16, 64] half with 64 bytes (§3.1): CANN's subtraction wraps, oneTmpSize is clamped to
    the input, and the tiling claims buffers beyond tmpBufSize."""
    with pytest.raises(TilingError, match="wraps"):
        GetLayerNormNDTilingInfo((2, 16, 64), 64, HALF, False)
    with pytest.warns(LngbWarning, match="wraps"):
        t = GetLayerNormNDTilingInfo((2, 16, 64), 64, HALF, False, strict=False)
    assert (t.oneTmpSize, t.tmpBufSize, t.loopRound) == (2048, 16, 1)


@pytest.mark.parametrize("kw", [dict(srcShape="2,4,16"), dict(srcShape=(2, -1, 16)),
                                dict(typeSize=4.0), dict(isReuseSource=1),
                                dict(product="atlas-9000")])
def test_bad_arguments(kw):
    args = dict(srcShape=(2, 4, 16), typeSize=FLOAT, isReuseSource=False)
    product = kw.pop("product", "atlas-a2")
    args.update(kw)
    with pytest.raises(lngb.LngbError):
        GetLayerNormMaxMinTmpSize(args["srcShape"], args["typeSize"], args["isReuseSource"],
                                  product=product)


def test_the_product_defaults_to_the_current_core_s():
    core = lngb.AICore("atlas-350")
    with core:
        assert GetLayerNormMaxMinTmpSize((128, 88), FLOAT, False, True, False) == (1024, 1024)
    assert GetLayerNormMaxMinTmpSize((128, 88), FLOAT, False, True, False) != (1024, 1024)


def test_form_1_against_the_spec_s_formulas_on_random_requests():
    """Every field, on 3000 random shapes, buffers (from below the minimum to above the maximum),
    dtypes and reuse flags (naive.layer_norm_tiling, written from §3.3)."""
    rng = np.random.default_rng(5)
    for _ in range(3000):
        b, s, h = (int(v) for v in rng.integers(1, [9, 65, 520]))
        original, ts, reuse = int(rng.integers(1, h + 1)), int(rng.choice([2, 4])), bool(
            rng.integers(2))
        biggest, smallest = GetLayerNormMaxMinTmpSize((b, s, h, original), ts, reuse)
        assert (biggest, smallest) == naive.layer_norm_max_min(b, s, h, ts, reuse)
        scratch = 0 if ts == 4 else 4 * 2 * 8 * -(-b * s // 8)   # bytes: below, CANN wraps
        size = int(rng.integers(scratch, biggest + 4096))
        want = naive.layer_norm_tiling(b, s, h, original, size, ts, reuse)
        if want is None:
            with pytest.raises(TilingError, match="not even one row"):
                GetLayerNormNDTilingInfo((b, s, h, original), size, ts, reuse)
        else:
            got = GetLayerNormNDTilingInfo((b, s, h, original), size, ts, reuse)
            assert dataclasses.asdict(got) == want, (b, s, h, original, size, ts, reuse)
