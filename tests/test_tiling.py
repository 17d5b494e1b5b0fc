"""Host tiling against spec §1, §2 (worked examples §2.4, UT-T §2.2/§7) and its invariants."""
import random
import re
import struct

import numpy as np
import pytest

from lngb.errors import InvalidArgumentError, TilingError
from lngb.tiling import (GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo,
                         LayerNormGradBetaTiling)

FLOAT, HALF = 4, 2
FIELDS = ["stackBufferSize", "bLength", "sLength", "hLength", "originalHLength", "bshLength",
          "bsLength", "oneCalSize", "numberOfTmpBuf", "loopRound", "inputTailSize", "inputTailPos",
          "bsTailSize", "bshCurLength", "bsCurLength", "gammaTempTensorPos", "betaTempTensorPos",
          "inputDyTmpTensorPos", "resForGammaTmpTensorPos", "reserved"]
PREFIX = "[LayerNormGradBeta][GetLayerNormGradBetaNDTilingInfo] "
MM_PREFIX = "[LayerNormGradBeta][GetLayerNormGradBetaMaxMinTmpSize] "

# spec §2.4, copied row by row:
# shape, typeSize, buffer bytes, sb, oneCal, loopRound, tail elems, tail rows, tail pos (None = no
# tail: pos is bsh), bsCur, (gamma, beta, dy, rfg) positions
TABLE = [
    ((1, 8, 8), FLOAT, 64, 16, 16, 4, 0, 0, None, 2, (0, 0, 0, 0)),
    ((1, 8, 8), FLOAT, 512, 128, 64, 1, 0, 0, None, 8, (0, 0, 0, 0)),
    ((1, 8, 8), HALF, 128, 32, 8, 8, 0, 0, None, 1, (0, 8, 16, 24)),
    ((2, 16, 64), HALF, 1024, 256, 64, 32, 0, 0, None, 1, (0, 64, 128, 192)),
    ((2, 16, 64), HALF, 32768, 8192, 2048, 1, 0, 0, None, 32, (0, 64, 128, 2176)),
    ((2, 16, 64), FLOAT, 512, 128, 128, 16, 0, 0, None, 2, (0, 0, 0, 0)),
    ((4, 128, 1024), FLOAT, 196608, 49152, 49152, 10, 32768, 32, 491520, 48, (0, 0, 0, 0)),
    ((4, 128, 1024), FLOAT, 192512, 48128, 48128, 10, 43008, 42, 481280, 47, (0, 0, 0, 0)),
    ((4, 128, 1024), HALF, 196608, 49152, 23552, 22, 6144, 6, 518144, 23, (0, 1024, 2048, 25600)),
    ((2, 32, 16), FLOAT, 128, 32, 32, 32, 0, 0, None, 2, (0, 0, 0, 0)),
    ((2, 32, 16), HALF, 256, 64, 16, 64, 0, 0, None, 1, (0, 16, 32, 48)),
    ((2, 16, 32), HALF, 1000, 250, 64, 16, 0, 0, None, 2, (0, 32, 64, 128)),
]

# spec §2.4 list under the table: shape -> {typeSize: (max, min)}
MAX_MIN = [
    ((1, 8, 8), FLOAT, 512, 64), ((1, 8, 8), HALF, 1024, 128),
    ((2, 16, 64), FLOAT, 16384, 512), ((2, 16, 64), HALF, 32768, 1024),
    ((4, 128, 1024), FLOAT, 4194304, 8192), ((4, 128, 1024), HALF, 8388608, 16384),
    # UT-T (§2.2): all dims 128
    ((128, 128, 128, 128), FLOAT, 16777216, 1024), ((128, 128, 128, 128), HALF, 33554432, 2048),
]


@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("row", TABLE,
                         ids=lambda r: f"{list(r[0])}-{'half' if r[1] == 2 else 'float'}-{r[2]}B")
def test_worked_examples(row, reuse):
    shape, ts, buf, sb, one, loop, tail, tail_rows, tail_pos, bs_cur, pos = row
    B, S, H = shape
    t = GetLayerNormGradBetaNDTilingInfo(shape, buf, ts, reuse)
    assert (t.bLength, t.sLength, t.hLength, t.originalHLength) == (B, S, H, H)
    assert (t.bshLength, t.bsLength) == (B * S * H, B * S)
    assert t.stackBufferSize == sb
    assert t.oneCalSize == one and t.bshCurLength == one
    assert t.loopRound == loop
    assert t.inputTailSize == tail and t.bsTailSize == tail_rows
    assert t.inputTailPos == (B * S * H if tail_pos is None else tail_pos)
    assert t.bsCurLength == bs_cur
    assert (t.gammaTempTensorPos, t.betaTempTensorPos, t.inputDyTmpTensorPos,
            t.resForGammaTmpTensorPos) == pos
    assert t.numberOfTmpBuf == (2 if ts == HALF else 1)
    assert t.reserved == 0
    assert t == GetLayerNormGradBetaNDTilingInfo(shape, buf, ts, not reuse)


@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("shape, ts, mx, mn", MAX_MIN)
def test_max_min(shape, ts, mx, mn, reuse):
    assert GetLayerNormGradBetaMaxMinTmpSize(shape, ts, reuse) == (mx, mn)


def test_max_min_uses_storage_h_only():
    assert GetLayerNormGradBetaMaxMinTmpSize((2, 16, 64, 3), FLOAT, False) == (16384, 512)
    assert GetLayerNormGradBetaMaxMinTmpSize((2, 16, 64, 64), FLOAT, False) == (16384, 512)


@pytest.mark.parametrize("ts", [FLOAT, HALF])
def test_ut_t_stack_buffer_size(ts):
    # UT-T: 100 MiB buffer -> stackBufferSize field = 100 MiB / 4 (floats)
    t = GetLayerNormGradBetaNDTilingInfo((128, 128, 128, 128), 100 * 1024 * 1024, ts, False)
    assert t.stackBufferSize == 100 * 1024 * 1024 // 4
    assert t.oneCalSize == 128 ** 3 and t.loopRound == 1 and t.inputTailSize == 0


def test_shape_forms():
    ref = GetLayerNormGradBetaNDTilingInfo((2, 16, 32, 32), 1000, HALF, False)
    for shape in ([2, 16, 32], (2, 16, 32), np.zeros((2, 16, 32)).shape,
                  np.array([2, 16, 32]), [np.int32(2), np.uint64(16), 32]):
        assert GetLayerNormGradBetaNDTilingInfo(shape, 1000, HALF, False) == ref
    assert GetLayerNormGradBetaNDTilingInfo((2, 16, 32), np.uint32(1000), np.int64(2), np.True_) == ref
    # originalHLength is carried through; the chunking uses storage H only
    t = GetLayerNormGradBetaNDTilingInfo((2, 16, 32, 20), 1000, HALF, False)
    assert t.originalHLength == 20
    assert t == LayerNormGradBetaTiling(**{**ref.__dict__, "originalHLength": 20})


def test_stack_buffer_bytes_floor_to_floats():
    for extra in range(4):
        t = GetLayerNormGradBetaNDTilingInfo((1, 8, 8), 64 + extra, FLOAT, False)
        assert t.stackBufferSize == 16


def test_uint32_wrap_of_bsh():
    # CANN computes B*S*H in uint32: 65536*65537*1 wraps to 65536
    t = GetLayerNormGradBetaNDTilingInfo((65536, 65537, 1), 1024, FLOAT, False)
    assert t.bshLength == 65536 and t.bsLength == 65536
    assert t.oneCalSize == 256 and t.loopRound == 256 and t.inputTailSize == 0
    # ... and the max wraps the same way (2 * 2**32 * 4 mod 2**32 == 0)
    assert GetLayerNormGradBetaMaxMinTmpSize((65536, 65536, 1), FLOAT, False) == (0, 8)
    # a product that wraps to exactly 0 would make CANN divide by zero
    with pytest.raises(TilingError, match="divide by zero"):
        GetLayerNormGradBetaNDTilingInfo((65536, 65536, 1), 1024, FLOAT, False)


# ---------------------------------------------------------------- struct bytes

def test_field_names_and_order():
    import dataclasses
    assert [f.name for f in dataclasses.fields(LayerNormGradBetaTiling)] == FIELDS
    assert all(v == 0 for v in LayerNormGradBetaTiling().__dict__.values())
    assert LayerNormGradBetaTiling().to_bytes() == bytes(80)


def test_to_bytes_layout():
    values = {name: 0x11223300 + i for i, name in enumerate(FIELDS)}
    b = LayerNormGradBetaTiling(**values).to_bytes()
    assert isinstance(b, bytes) and len(b) == 80
    for i, name in enumerate(FIELDS):
        assert b[4 * i:4 * i + 4] == bytes([i, 0x33, 0x22, 0x11]), name  # little-endian
    assert list(struct.unpack("<20I", b)) == list(values.values())
    assert LayerNormGradBetaTiling(reserved=0xFFFFFFFF).to_bytes()[76:] == b"\xff" * 4


def test_round_trip():
    for row in TABLE:
        t = GetLayerNormGradBetaNDTilingInfo(row[0], row[2], row[1], False)
        b = t.to_bytes()
        assert LayerNormGradBetaTiling.from_bytes(b) == t
        assert LayerNormGradBetaTiling.from_bytes(bytearray(b)) == t
        assert LayerNormGradBetaTiling.from_bytes(memoryview(b)) == t
        assert LayerNormGradBetaTiling.from_bytes(np.frombuffer(b, dtype=np.uint32)) == t
    t = LayerNormGradBetaTiling(*range(20))
    assert LayerNormGradBetaTiling.from_bytes(t.to_bytes()) == t


@pytest.mark.parametrize("n", [0, 1, 76, 79, 81, 84, 160])
def test_from_bytes_wrong_length(n):
    with pytest.raises(InvalidArgumentError, match="80 bytes"):
        LayerNormGradBetaTiling.from_bytes(bytes(n))


@pytest.mark.parametrize("bad", [80, None, "x" * 80])
def test_from_bytes_not_bytes(bad):
    with pytest.raises(InvalidArgumentError):
        LayerNormGradBetaTiling.from_bytes(bad)


@pytest.mark.parametrize("value", [-1, 2 ** 32, 2 ** 40, 1.5, 3.0, "7", None, True])
def test_to_bytes_rejects_out_of_range(value):
    with pytest.raises(InvalidArgumentError, match="loopRound"):
        LayerNormGradBetaTiling(loopRound=value).to_bytes()


# ---------------------------------------------------------------- TilingError cases

@pytest.mark.parametrize("ts", [0, 1, 3, 8])
def test_type_size_unsupported(ts):
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaNDTilingInfo((2, 16, 64), 4096, ts, False)
    assert PREFIX + f"Type size {ts} is unsupported!" in str(e.value)
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaMaxMinTmpSize((2, 16, 64), ts, False)
    assert MM_PREFIX + f"Type size {ts} is unsupported!" in str(e.value)


@pytest.mark.parametrize("shape", [(8,), (8, 8), (2, 2, 2, 2, 2), (128,) * 6])
def test_dims_not_4(shape):
    text = (f"The dims of srcShape is {len(shape)}, should be 4 "
            "(e.g. [B, S, storageHLength, originHLength])!")
    for call, prefix in ((lambda: GetLayerNormGradBetaNDTilingInfo(shape, 2 ** 20, FLOAT, False), PREFIX),
                         (lambda: GetLayerNormGradBetaMaxMinTmpSize(shape, FLOAT, False), MM_PREFIX)):
        with pytest.raises(TilingError) as e:
            call()
        assert prefix + text in str(e.value)


def test_empty_shape():
    with pytest.raises(TilingError):
        GetLayerNormGradBetaNDTilingInfo((), 1024, FLOAT, False)
    with pytest.raises(TilingError):
        GetLayerNormGradBetaMaxMinTmpSize([], FLOAT, False)


@pytest.mark.parametrize("shape", [(0, 16, 64), (2, 0, 64), (2, 16, 64, 0), (0, 0, 0, 0)])
@pytest.mark.parametrize("ts", [FLOAT, HALF])
def test_zero_dim(shape, ts):
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaNDTilingInfo(shape, 1 << 20, ts, False)
    assert PREFIX + "Input Shape size must be greater than 0." in str(e.value)
    with pytest.raises(TilingError, match=re.escape("Input Shape size must be greater than 0.")):
        GetLayerNormGradBetaMaxMinTmpSize(shape, ts, False)


@pytest.mark.parametrize("ts", [FLOAT, HALF])
def test_h_zero(ts):
    # CANN logs both: the common shape-size check, then the hLength check
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaNDTilingInfo((2, 16, 0, 0), 4096, ts, False)
    msg = str(e.value)
    assert PREFIX + "Input Shape size must be greater than 0." in msg
    assert PREFIX + "the value of hLength should not be zero." in msg


@pytest.mark.parametrize("shape, ts, buf", [
    ((2, 16, 64), FLOAT, 511),   # sb < 2H floats
    ((2, 16, 64), FLOAT, 0),
    ((2, 16, 64), HALF, 511),    # sb < 2H floats
    ((2, 16, 64), HALF, 512),    # sb == 2H but (sb - 2H)/2 < H: oneCalSize == 0
    ((2, 16, 64), HALF, 1023),   # one byte below min
    ((1, 8, 8), HALF, 127),
])
def test_stack_buffer_not_enough(shape, ts, buf):
    mn = GetLayerNormGradBetaMaxMinTmpSize(shape, ts, False)[1]
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaNDTilingInfo(shape, buf, ts, False)
    msg = str(e.value)
    assert PREFIX + "stackBufferSize is not enough." in msg
    assert f"minValue = {mn} bytes" in msg and f"Got {buf} bytes" in msg
    assert "at least minValue" in msg
    GetLayerNormGradBetaNDTilingInfo(shape, mn, ts, False)  # the min itself is enough


def test_several_cann_logs_in_one_error():
    # 6 dims and a too-small buffer: CANN logs both, we report both
    with pytest.raises(TilingError) as e:
        GetLayerNormGradBetaNDTilingInfo((128,) * 6, 4, FLOAT, False)
    assert "The dims of srcShape is 6" in str(e.value)
    assert "stackBufferSize is not enough." in str(e.value)


# ---------------------------------------------------------------- InvalidArgumentError cases

@pytest.mark.parametrize("shape", [(-1, 16, 64), (2, 16.0, 64), (2, True, 64), (2, 16, "64"),
                                   (2, 16, 2 ** 32), "2,16,64", 64, None, (2, 16, None)])
def test_bad_shape_argument(shape):
    with pytest.raises(InvalidArgumentError):
        GetLayerNormGradBetaNDTilingInfo(shape, 4096, FLOAT, False)
    with pytest.raises(InvalidArgumentError):
        GetLayerNormGradBetaMaxMinTmpSize(shape, FLOAT, False)


@pytest.mark.parametrize("kw", [{"stackBufferSize": -4}, {"stackBufferSize": 4096.0},
                                {"stackBufferSize": 2 ** 32}, {"stackBufferSize": None},
                                {"typeSize": -2}, {"typeSize": 4.0}, {"typeSize": "4"},
                                {"isReuseSource": "yes"}, {"isReuseSource": None},
                                {"isReuseSource": 2}])
def test_bad_scalar_argument(kw):
    args = {"srcShape": (2, 16, 64), "stackBufferSize": 4096, "typeSize": FLOAT,
            "isReuseSource": False, **kw}
    with pytest.raises(InvalidArgumentError, match=next(iter(kw))):
        GetLayerNormGradBetaNDTilingInfo(**args)


# ---------------------------------------------------------------- invariants

def _cases():
    rng = random.Random(1234)
    for B in (1, 2, 3, 7):
        for S in (1, 5, 16):
            for H in (1, 8, 16, 24, 64, 1000, 1024):
                for ts in (FLOAT, HALF):
                    mx, mn = GetLayerNormGradBetaMaxMinTmpSize((B, S, H), ts, False)
                    bufs = {mn, mn + 1, mn + 4, mn + 4 * H - 1, 2 * mn, 3 * mn + 12, mx, mx + 100,
                            2 * mx, 192 * 1024}
                    bufs |= {rng.randrange(mn, 2 * mx + 64) for _ in range(8)}
                    for buf in sorted(bufs):
                        yield (B, S, H), ts, buf, mn


def test_invariants():
    n = 0
    for shape, ts, buf, mn in _cases():
        B, S, H = shape
        bsh = B * S * H
        t = GetLayerNormGradBetaNDTilingInfo(shape, buf, ts, False)
        one, sb = t.oneCalSize, t.stackBufferSize
        assert sb == buf // 4
        assert one > 0 and one % H == 0 and one <= bsh
        assert t.loopRound >= 1
        assert t.loopRound * one + t.inputTailSize == bsh
        assert t.inputTailSize % H == 0 and t.inputTailSize < one
        assert t.bsTailSize * H == t.inputTailSize and t.bsCurLength * H == one
        assert t.inputTailPos == t.loopRound * one and t.bshCurLength == one
        if ts == HALF:
            assert (t.gammaTempTensorPos, t.betaTempTensorPos, t.inputDyTmpTensorPos) == (0, H, 2 * H)
            assert t.resForGammaTmpTensorPos == 2 * H + one
            assert t.resForGammaTmpTensorPos + one <= sb
            fits_one_more_row = 2 * H + 2 * (one + H) <= sb
        else:
            assert t.resForGammaTmpTensorPos == 0 and one <= sb
            fits_one_more_row = one + H <= sb
        # oneCalSize is as large as the buffer allows, unless capped at B*S*H
        assert one == bsh or not fits_one_more_row
        assert LayerNormGradBetaTiling.from_bytes(t.to_bytes()) == t
        # the min from GetLayerNormGradBetaMaxMinTmpSize is tight: one byte less fails
        with pytest.raises(TilingError, match="not enough"):
            GetLayerNormGradBetaNDTilingInfo(shape, mn - 1, ts, False)
        n += 1
    assert n > 1000
