"""Hand-computed checks of the independent oracles in tests/naive.py (no lngb here)."""

import numpy as np
import pytest

import naive

F16, F32 = np.float16, np.float32
SENT = -7.0  # sentinel for "not written"


def make_ub(size, *placements):
    ub = np.zeros(size, np.uint8)
    for addr, arr in placements:
        raw = np.ascontiguousarray(arr).view(np.uint8)
        ub[addr:addr + raw.size] = raw
    return ub


def rd(ub, addr, dtype, n):
    return ub[addr:addr + n * np.dtype(dtype).itemsize].copy().view(dtype)


def bits16(x):
    return int(np.asarray(x, F16).view(np.uint16))


# ------------------------------------------------------------------------------ geometry / masks

def test_lane_address_formula():
    # half: 16 per block; lane 17 of repeat 1 with blk stride 2, rep stride 16
    assert naive.lane_address(0, 2, 2, 16, 1, 17) == 32 * 16 + 32 * 2 * 1 + 2 * 1 == 578
    # float: 8 per block
    assert naive.lane_address(64, 4, 1, 8, 0, 9) == 64 + 32 + 4
    assert naive.lanes_per_repeat(F16) == 128
    assert naive.lanes_per_repeat(F32) == 64
    assert naive.lanes_per_repeat(F16, F32) == 64


def test_active_lanes():
    assert naive.active_lanes(64, mode="normal", mask=3, repeat=2, count=None) == [[0, 1, 2]] * 2
    assert naive.active_lanes(128, mode="normal", mask=(1 | 1 << 63, 0b10), repeat=1,
                              count=None) == [[0, 63, 65]]
    assert naive.active_lanes(64, mode="normal", mask=200, repeat=1, count=None) == [
        list(range(64))]
    c = naive.active_lanes(64, mode="counter", mask=None, repeat=9, count=70)
    assert len(c) == 2 and c[0] == list(range(64)) and c[1] == list(range(6))
    assert naive.active_lanes(64, mode="counter", mask=None, repeat=9, count=0) == []
    assert naive.active_lanes(64, mode="normal", mask=64, repeat=0, count=None) == []


# ------------------------------------------------------------------------------ binary

def test_add_partial_mask_two_repeats_leaves_other_lanes():
    src0 = np.arange(128, dtype=F32)
    src1 = 1000 + np.arange(128, dtype=F32)
    ub = make_ub(2048, (0, src0), (512, src1), (1024, np.full(128, SENT, F32)))
    before = ub.copy()
    out = naive.binary("Add", ub, F32, 1024, 0, 512, mask=3, repeat=2)
    np.testing.assert_array_equal(ub, before)  # input not mutated
    d = rd(out, 1024, F32, 128)
    expect = np.full(128, SENT, F32)
    for i in (0, 1, 2, 64, 65, 66):
        expect[i] = 1000 + 2 * i
    np.testing.assert_array_equal(d, expect)
    np.testing.assert_array_equal(out[:1024], before[:1024])


def test_add_bitwise_mask_half():
    src0 = np.arange(128, dtype=F16)
    ub = make_ub(1024, (0, src0), (256, np.ones(128, F16)), (512, np.full(128, SENT, F16)))
    out = naive.binary("Add", ub, F16, 512, 0, 256, mask=(1 | 1 << 63, 1 << 1))
    d = rd(out, 512, F16, 128)
    expect = np.full(128, SENT, F16)
    expect[0], expect[63], expect[65] = 1, 64, 66
    np.testing.assert_array_equal(d, expect)


def test_add_strides():
    # dst blk 2 / rep 16; src0 contiguous; src1 blk 0 / rep 0 (re-reads block 0 everywhere)
    src0 = np.arange(128, dtype=F32)
    src1 = np.array([100, 200, 300, 400, 500, 600, 700, 800], F32)
    ub = make_ub(4096, (0, src0), (512, src1), (1024, np.full(256, SENT, F32)))
    out = naive.binary("Add", ub, F32, 1024, 0, 512, mask=64, repeat=2,
                       strides=(2, 1, 0, 16, 8, 0))
    d = rd(out, 1024, F32, 256)
    assert d[0] == 100 and d[7] == 807          # repeat 0, block 0
    assert np.all(d[8:16] == SENT)              # gap left by dst blk stride 2
    assert d[16] == 8 + 100 and d[17] == 9 + 200  # repeat 0, lane 8 -> block 1 at 2 blocks
    assert d[128 + 16 + 1] == 73 + 200          # repeat 1, lane 9 -> 128 + 16 + 1
    assert d[128 + 112 + 7] == 127 + 800        # repeat 1, lane 63
    assert np.sum(d != SENT) == 128


def test_add_counter_mode_ignores_repeat():
    ub = make_ub(2048, (0, np.arange(128, dtype=F32)), (512, np.ones(128, F32)),
                 (1024, np.full(128, SENT, F32)))
    out = naive.binary("Add", ub, F32, 1024, 0, 512, mode="counter", count=70, repeat=9)
    d = rd(out, 1024, F32, 128)
    np.testing.assert_array_equal(d[:70], np.arange(70) + 1)
    assert np.all(d[70:] == SENT)


def test_counter_mode_half_130():
    ub = make_ub(2048, (0, np.ones(256, F16)), (512, np.ones(256, F16)),
                 (1024, np.full(256, SENT, F16)))
    out = naive.binary("Mul", ub, F16, 1024, 0, 512, mode="counter", count=130)
    d = rd(out, 1024, F16, 256)
    assert np.all(d[:130] == 1) and np.all(d[130:] == SENT)


def test_accumulate_in_place_repeats_in_order():
    # dst == src1 with repeat strides 0: dst += src0[r] for r = 0, 1, 2
    rows = np.repeat(np.array([1, 2, 3], F32), 8)
    ub = make_ub(512, (0, rows), (256, np.full(8, 10, F32)))
    out = naive.binary("Add", ub, F32, 256, 0, 256, mask=8, repeat=3, strides=(1, 1, 1, 0, 1, 0))
    np.testing.assert_array_equal(rd(out, 256, F32, 8), np.full(8, 16, F32))


def _half_op(op, a, b, sat=False):
    ub = make_ub(256, (0, np.array([a], F16)), (32, np.array([b], F16)))
    return rd(naive.binary(op, ub, F16, 64, 0, 32, mask=1, sat=sat), 64, F16, 1)[0]


def test_half_overflow_and_saturation():
    assert np.isposinf(_half_op("Add", 65504, 65504))
    assert _half_op("Add", 65504, 65504, sat=True) == 65504
    assert np.isneginf(_half_op("Sub", -65504, 65504))
    assert _half_op("Sub", -65504, 65504, sat=True) == -65504
    assert _half_op("Add", np.inf, 1, sat=True) == 65504          # inf input saturates too
    assert np.isnan(_half_op("Mul", np.inf, 0))
    r = _half_op("Mul", np.inf, 0, sat=True)
    assert r == 0 and not np.signbit(r)                             # NaN -> +0
    assert np.isnan(_half_op("Add", np.nan, 1))
    assert _half_op("Add", np.nan, 1, sat=True) == 0


def test_half_round_nearest_even():
    assert _half_op("Add", 2048, 1) == 2048   # 2049: tie -> even 2048
    assert _half_op("Add", 2048, 3) == 2052   # 2051: tie between 2050 (odd) and 2052
    assert _half_op("Add", 2048, 5) == 2052   # 2053: tie between 2052 (even) and 2054
    assert _half_op("Mul", 3, 7) == 21
    r = _half_op("Sub", -0.0, 0.0)
    assert r == 0 and np.signbit(r)
    r = _half_op("Sub", -0.0, -0.0)
    assert r == 0 and not np.signbit(r)


def test_float_round_nearest_even():
    ub = make_ub(256, (0, np.array([1, 1], F32)),
                 (32, np.array([2.0 ** -24, 3 * 2.0 ** -24], F32)))
    out = naive.binary("Add", ub, F32, 64, 0, 32, mask=2)
    np.testing.assert_array_equal(rd(out, 64, F32, 2), np.array([1, 1 + 2.0 ** -22], F32))


# ------------------------------------------------------------------------------ scalar / dup

def test_adds_converts_scalar_to_half_first():
    ub = make_ub(256, (0, np.array([2, 1], F16)))
    out = naive.unary_scalar("Adds", ub, F16, 64, 0, 2049.0, mode="normal", mask=2, repeat=1,
                             count=None)
    # 2049 -> half 2048 first; 2 + 2048 = 2050 (unconverted 2051 would round to 2052)
    np.testing.assert_array_equal(rd(out, 64, F16, 2), np.array([2050, 2048], F16))


def test_muls_float_and_strides():
    ub = make_ub(1024, (0, np.arange(64, dtype=F32)), (256, np.full(128, SENT, F32)))
    out = naive.unary_scalar("Muls", ub, F32, 256, 0, 0.1, mode="normal", mask=64, repeat=1,
                             count=None, strides=(2, 1, 8, 8))
    d = rd(out, 256, F32, 128)
    assert d[1] == np.float32(0.1) and d[7] == np.float32(7) * np.float32(0.1)
    assert d[16] == np.float32(8) * np.float32(0.1)   # lane 8 -> block 1 at 2 blocks
    assert d[17] == np.float32(9) * np.float32(0.1)
    assert np.all(d[8:16] == SENT)


def test_muls_half_sat():
    ub = make_ub(128, (0, np.array([40000, -40000], F16)))
    out = naive.unary_scalar("Muls", ub, F16, 64, 0, 2.0, mode="normal", mask=2, repeat=1,
                             count=None, sat=True)
    np.testing.assert_array_equal(rd(out, 64, F16, 2), np.array([65504, -65504], F16))


def test_duplicate():
    ub = make_ub(1024, (0, np.full(512, SENT, F16)))
    out = naive.duplicate(ub, F16, 0, 1 / 3, mode="normal", mask=(0b101, 0), repeat=2, count=None,
                          dst_rep=16)
    d = rd(out, 0, F16, 512)
    for i in (0, 2, 256, 258):
        assert bits16(d[i]) == 0x3555
    assert np.sum(d != SENT) == 4
    out = naive.duplicate(ub, F32, 0, 5.0, mode="counter", mask=None, repeat=1, count=5)
    d = rd(out, 0, F32, 16)
    assert np.all(d[:5] == 5)
    assert np.all(rd(out, 20, F16, 10) == SENT)


# ------------------------------------------------------------------------------ cast

H = lambda v: np.float16(v)  # noqa: E731


@pytest.mark.parametrize("mode, pos, neg", [
    ("CAST_NONE", 0x3555, 0xB555),
    ("CAST_RINT", 0x3555, 0xB555),
    ("CAST_FLOOR", 0x3555, 0xB556),
    ("CAST_CEIL", 0x3556, 0xB555),
    ("CAST_ROUND", 0x3555, 0xB555),
    ("CAST_TRUNC", 0x3555, 0xB555),
    ("CAST_ODD", 0x3555, 0xB555),
])
def test_cast_one_third(mode, pos, neg):
    # 1/3 lies between 0x3555 = 0.333251953125 and 0x3556 = 0.33349609375, nearer 0x3555
    r = naive.f32_to_f16(np.array([1 / 3, -1 / 3], F32), mode, False)
    assert [bits16(v) for v in r] == [pos, neg]


@pytest.mark.parametrize("mode, p2049, p2051", [
    ("CAST_RINT", 2048, 2052),   # ties to even
    ("CAST_ROUND", 2050, 2052),  # ties away
    ("CAST_FLOOR", 2048, 2050),
    ("CAST_CEIL", 2050, 2052),
    ("CAST_TRUNC", 2048, 2050),
    ("CAST_ODD", 2050, 2050),    # 2048 is 0x6800 -> 0x6801 = 2050; 2050 already odd
])
def test_cast_ties_2049_2051(mode, p2049, p2051):
    r = naive.f32_to_f16(np.array([2049, 2051, -2049, -2051], F32), mode, False)
    neg = {"CAST_FLOOR": "CAST_CEIL", "CAST_CEIL": "CAST_FLOOR"}.get(mode, mode)
    rn = naive.f32_to_f16(np.array([2049, 2051], F32), neg, False)
    assert r[0] == p2049 and r[1] == p2051
    np.testing.assert_array_equal(r[2:], -rn)


def test_cast_overflow_and_sat():
    x = np.array([65519, 65520, 70000, -70000, np.inf, np.nan], F32)
    f = lambda m, s=False: naive.f32_to_f16(x, m, s)  # noqa: E731
    inf = np.inf
    np.testing.assert_array_equal(f("CAST_RINT"), [65504, inf, inf, -inf, inf, np.nan])
    np.testing.assert_array_equal(f("CAST_ROUND"), [65504, inf, inf, -inf, inf, np.nan])
    np.testing.assert_array_equal(f("CAST_TRUNC"), [65504, 65504, 65504, -65504, inf, np.nan])
    np.testing.assert_array_equal(f("CAST_ODD"), [65504, 65504, 65504, -65504, inf, np.nan])
    np.testing.assert_array_equal(f("CAST_FLOOR"), [65504, 65504, 65504, -inf, inf, np.nan])
    np.testing.assert_array_equal(f("CAST_CEIL"), [inf, inf, inf, -65504, inf, np.nan])
    for m in naive.ROUND_MODES:
        np.testing.assert_array_equal(f(m, True)[2:], [65504, -65504, 65504, 0])


def test_cast_tiny_and_signed_zero():
    x = np.array([1e-10, -1e-10, 2.0 ** -25, -0.0, 0.0, 2.0 ** -24], F32)
    tiny = 2.0 ** -24
    rint = naive.f32_to_f16(x, "CAST_RINT", False)
    np.testing.assert_array_equal(rint, [0, 0, 0, 0, 0, tiny])
    assert list(np.signbit(rint)) == [False, True, False, True, False, False]
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_ROUND", False)[2], tiny)
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_CEIL", False)[:2], [tiny, 0])
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_FLOOR", False)[:2], [0, -tiny])
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_ODD", False)[:3], [tiny, -tiny, tiny])
    assert np.signbit(naive.f32_to_f16(x, "CAST_TRUNC", False)[1])
    for m in naive.ROUND_MODES:  # exact values are unchanged in every mode
        np.testing.assert_array_equal(naive.f32_to_f16(x[3:], m, False), x[3:])
        assert np.signbit(naive.f32_to_f16(x[3:4], m, False)[0])


def test_cast_in_ub_counter_and_mask():
    src = np.full(128, 2049, F32)
    ub = make_ub(2048, (0, src), (1024, np.full(256, SENT, F16)))
    out = naive.cast(ub, F16, F32, 1024, 0, "CAST_ROUND", mode="counter", mask=None, repeat=1,
                     count=100, strides=(1, 1, 4, 8))
    d = rd(out, 1024, F16, 256)
    assert np.all(d[:100] == 2050) and np.all(d[100:] == SENT)
    # normal mode, mask 32, 2 repeats: dst rep 4 blocks = 64 halves
    out = naive.cast(ub, F16, F32, 1024, 0, "CAST_NONE", mode="normal", mask=32, repeat=2,
                     count=None, strides=(1, 1, 4, 8))
    d = rd(out, 1024, F16, 256)
    assert np.all(d[0:32] == 2048) and np.all(d[64:96] == 2048)
    assert np.sum(d != SENT) == 64
    # half -> float exact, src rep 4
    hs = (np.arange(128) * 0.5 + 0.25).astype(F16)
    ub = make_ub(2048, (0, hs), (1024, np.full(128, SENT, F32)))
    out = naive.cast(ub, F32, F16, 1024, 0, "CAST_NONE", mode="counter", mask=None, repeat=1,
                     count=100, strides=(1, 1, 8, 4))
    d = rd(out, 1024, F32, 128)
    np.testing.assert_array_equal(d[:100], hs[:100].astype(F32))
    assert np.all(d[100:] == SENT)
    with pytest.raises(ValueError):
        naive.cast(ub, F32, F16, 1024, 0, "CAST_RINT", mode="counter", mask=None, repeat=1,
                   count=8)


# ------------------------------------------------------------------------------ reductions

def test_whole_reduce_tree_order_float():
    x = np.array([1e8, 1, -1e8, 1] + [np.nan] * 60, F32)
    ub = make_ub(512, (0, x), (256, np.full(8, SENT, F32)))
    out = naive.whole_reduce_sum(ub, F32, 256, 0, mask=4)
    # tree: (1e8+1) + (-1e8+1) = 1e8 + -1e8 = 0; NaNs in inactive lanes are absent
    assert rd(out, 256, F32, 1)[0] == 0.0
    seq = np.float32(0)
    for v in x[:4]:
        seq = np.float32(seq + v)
    assert seq == 1.0  # the sequential order would differ
    x[4:] = 0
    ub = make_ub(512, (0, x))
    assert rd(naive.whole_reduce_sum(ub, F32, 256, 0, mask=64), 256, F32, 1)[0] == 0.0


def test_whole_reduce_counter_and_dst_rep():
    ub = make_ub(1024, (0, np.arange(128, dtype=F32)), (512, np.full(8, SENT, F32)))
    out = naive.whole_reduce_sum(ub, F32, 512, 0, mode="counter", count=70, dst_rep=2)
    d = rd(out, 512, F32, 8)
    assert d[0] == 2016 and d[2] == 64 + 65 + 66 + 67 + 68 + 69
    assert d[1] == SENT and np.all(d[3:] == SENT)


def test_single_lane_passes_through_negative_zero():
    ub = make_ub(512, (0, np.array([-0.0, 5.0], F32)), (256, np.full(8, SENT, F32)))
    r = rd(naive.whole_reduce_sum(ub, F32, 256, 0, mask=1), 256, F32, 1)[0]
    assert r == 0 and np.signbit(r)


def test_fully_masked_family():
    ub = make_ub(512, (0, np.ones(64, F32)), (256, np.full(8, SENT, F32)))
    a2 = naive.block_reduce_sum(ub, F32, 256, 0, mask=(0xFF, 0))   # only block 0 is active
    assert rd(a2, 256, F32, 8).tolist() == [8.0] + [SENT] * 7
    r = rd(naive.block_reduce_sum(ub, F32, 256, 0, mask=(0xFF, 0), family="950"), 256, F32, 8)
    assert r.tolist() == [8.0] + [0.0] * 7 and not np.signbit(r).any()


def test_empty_mask_is_a_no_op_on_every_family():
    ub = make_ub(512, (0, np.ones(64, F32)), (256, np.full(8, SENT, F32)))
    for family in ("a2", "950"):
        out = naive.whole_reduce_sum(ub, F32, 256, 0, mask=(0, 0), family=family)
        assert np.array_equal(out, ub)


def test_block_reduce_float_partial_mask_and_dst_rep():
    src = np.arange(128, dtype=F32)
    ub = make_ub(1024, (0, src), (512, np.full(32, SENT, F32)))
    mask = (0xFF | 1 << 25, 0)  # block 0 fully, block 3 only lane 25
    out = naive.block_reduce_sum(ub, F32, 512, 0, mask=mask, repeat=2, dst_rep=2)
    d = rd(out, 512, F32, 32)
    assert d[0] == 28 and d[3] == 25
    assert d[16] == sum(range(64, 72)) and d[19] == 89
    untouched = [i for i in range(32) if i not in (0, 3, 16, 19)]
    assert np.all(d[untouched] == SENT)
    out = naive.block_reduce_sum(ub, F32, 512, 0, mask=mask, repeat=2, dst_rep=2, family="950")
    d = rd(out, 512, F32, 32)
    assert np.all(d[[1, 2, 4, 5, 6, 7, 17, 18, 20, 21, 22, 23]] == 0)
    assert np.all(d[8:16] == SENT) and np.all(d[24:] == SENT)


def test_block_reduce_half_overflow_and_doc_example():
    src = np.zeros(128, F16)
    src[:16] = 65504
    src[16:20] = [60000, 60000, -30000, 100]
    ub = make_ub(1024, (0, src), (512, np.full(8, SENT, F16)))
    d = rd(naive.block_reduce_sum(ub, F16, 512, 0, mask=128), 512, F16, 8)
    assert np.isposinf(d[0]) and np.isposinf(d[1]) and np.all(d[2:] == 0)
    d = rd(naive.block_reduce_sum(ub, F16, 512, 0, mask=128, sat=True), 512, F16, 8)
    # sat: (60000+60000 -> 65504) + (-30000+100 -> half -29904) = 35600 -> tie -> 35584
    assert d[0] == 65504 and d[1] == 35584


def test_block_reduce_src_strides():
    src = np.arange(256, dtype=F32)
    ub = make_ub(2048, (0, src), (1024, np.full(8, SENT, F32)))
    # block stride 2: block k of repeat 0 reads elements 16k..16k+7
    d = rd(naive.block_reduce_sum(ub, F32, 1024, 0, mask=64, src_blk=2), 1024, F32, 8)
    np.testing.assert_array_equal(d, [sum(range(16 * k, 16 * k + 8)) for k in range(8)])


def test_pair_reduce():
    src = np.arange(128, dtype=F32) + 1
    ub = make_ub(1024, (0, src), (512, np.full(64, SENT, F32)))
    mask = (0b100111, 0)  # lanes 0,1,2,5: pair 0 full, pairs 1 and 2 one lane, pair 3 none
    d = rd(naive.pair_reduce_sum(ub, F32, 512, 0, mask=mask, repeat=2, dst_rep=1), 512, F32, 64)
    assert d[0] == 1 + 2 and d[1] == 3 and d[2] == 6 and d[3] == SENT
    assert d[32] == 65 + 66 and d[33] == 67 and d[34] == 70 and d[35] == SENT
    assert np.sum(d != SENT) == 6
    d950 = rd(naive.pair_reduce_sum(ub, F32, 512, 0, mask=mask, family="950"), 512, F32, 64)
    assert d950[3] == 0 and np.all(d950[32:] == SENT)


def test_pair_reduce_second_repeat_reads_next_row():
    src = np.arange(128, dtype=F32)
    ub = make_ub(1024, (0, src), (512, np.full(128, SENT, F32)))
    d = rd(naive.pair_reduce_sum(ub, F32, 512, 0, mask=64, repeat=2), 512, F32, 64)
    np.testing.assert_array_equal(d, src[0::2] + src[1::2])


# ------------------------------------------------------------------------------ DataCopy

def test_data_copy_count_rounds_down():
    src = np.arange(256, dtype=np.uint8)
    dst = np.zeros(128, np.uint8)
    out = naive.data_copy_count(dst, 32, src, 0, 10, 4)  # 40 B -> 32 B
    np.testing.assert_array_equal(out[32:64], src[:32])
    assert np.all(out[:32] == 0) and np.all(out[64:] == 0)
    assert np.all(dst == 0)
    assert np.all(naive.data_copy_count(dst, 0, src, 0, 15, 2) == 0)  # 30 B -> nothing


def test_data_copy_params():
    src = np.arange(256, dtype=np.uint8)
    dst = np.zeros(256, np.uint8)
    out = naive.data_copy_params(dst, 0, src, 0, 2, 1, 1, 2)
    np.testing.assert_array_equal(out[0:32], src[0:32])
    np.testing.assert_array_equal(out[96:128], src[64:96])
    assert np.all(out[32:96] == 0) and np.all(out[128:] == 0)
    assert np.all(naive.data_copy_params(dst, 0, src, 0, 0, 1, 0, 0) == 0)
    assert np.all(naive.data_copy_params(dst, 0, src, 0, 3, 0, 0, 0) == 0)


# ------------------------------------------------------------------------------ operator golden

SEED_GAMMA = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
SEED_BETA = [224, 232, 240, 248, 256, 264, 272, 280]


@pytest.mark.parametrize("dt", [F32, F16])
def test_seed_example(dt):
    x = np.arange(64).reshape(1, 8, 8).astype(dt)
    g, b = naive.layer_norm_grad_beta(x, x)
    assert g.dtype == dt and b.dtype == dt and g.shape == (8,)
    np.testing.assert_array_equal(g, SEED_GAMMA)
    np.testing.assert_array_equal(b, SEED_BETA)
    ng, nb = naive.numpy_golden(x.astype(F32), x.astype(F32))
    np.testing.assert_array_equal(ng, SEED_GAMMA)
    np.testing.assert_array_equal(nb, SEED_BETA)


def test_negative_zero_row0_becomes_positive():
    dy = np.full((1, 1, 8), -0.0, F32)
    g, b = naive.layer_norm_grad_beta(dy, np.ones((1, 1, 8), F32))
    assert np.all(g == 0) and not np.any(np.signbit(g))
    assert not np.any(np.signbit(b))
    dy16 = dy.astype(F16)
    g, b = naive.layer_norm_grad_beta(dy16, np.ones((1, 1, 8), F16))
    assert not np.any(np.signbit(b)) and not np.any(np.signbit(g))


def test_sequential_row_order():
    dy = np.array([1e8, 1, -1e8, 1], F32).reshape(1, 4, 1)
    g, b = naive.layer_norm_grad_beta(dy, np.ones_like(dy))
    assert b[0] == 1.0 and g[0] == 1.0  # (((1e8+0)+1)-1e8)+1; a pairwise tree gives 0


def test_half_fp32_accumulation_and_single_rounding():
    one = np.ones((1, 3, 1), F16)
    g, b = naive.layer_norm_grad_beta(np.array([2048, 1, 1], F16).reshape(1, 3, 1), one)
    assert b[0] == 2050  # half-by-half accumulation would stay at 2048
    g, b = naive.layer_norm_grad_beta(np.array([65504, 65504, -65504], F16).reshape(1, 3, 1), one)
    assert b[0] == 65504  # no intermediate half overflow
    dy = np.array([65504, 65504], F16).reshape(1, 2, 1)
    g, b = naive.layer_norm_grad_beta(dy, np.ones_like(dy))
    assert np.isposinf(b[0]) and np.isposinf(g[0])
    g, b = naive.layer_norm_grad_beta(dy, np.ones_like(dy), sat=True)
    assert b[0] == 65504 and g[0] == 65504


def test_reuse_res_for_gamma_example():
    dy = (np.arange(80, dtype=F32) + 1).reshape(1, 10, 8)
    rfg = (np.arange(80, dtype=F32) * 0.5 - 3).reshape(1, 10, 8)
    before = rfg.copy()
    st = naive.reuse_res_for_gamma_state(dy, rfg, 3)
    np.testing.assert_array_equal(rfg, before)
    prod = (dy * rfg).reshape(10, 8)
    assert st.shape == (10, 8)
    np.testing.assert_array_equal(st[0], prod[9])
    np.testing.assert_array_equal(st[1], prod[7])
    np.testing.assert_array_equal(st[2], prod[8])
    np.testing.assert_array_equal(st[3:], before.reshape(10, 8)[3:])
    # no tail: rows 0..2 hold the last chunk's products
    st = naive.reuse_res_for_gamma_state(dy[:, :9], rfg[:, :9], 3)
    np.testing.assert_array_equal(st[:3], prod[6:9])
    # one chunk covering everything: all rows in place
    np.testing.assert_array_equal(naive.reuse_res_for_gamma_state(dy, rfg, 99), prod)


def test_f32_to_f16_against_sorted_half_table():
    """Cross-check every mode against a search in the sorted table of all finite halves."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(F32)
    x = x[np.isfinite(x) & (np.abs(x) < 65504) & (np.abs(x) > 2.0 ** -30)]
    x = np.concatenate([x, (rng.standard_normal(5000) * 100).astype(F32)])
    table = np.arange(0x7C00, dtype=np.uint16).view(F16).astype(np.float64)  # +0 .. 65504
    table = np.unique(np.concatenate([-table, table]))
    xd = x.astype(np.float64)
    i = np.searchsorted(table, xd, side="right") - 1
    lo, hi = table[i], table[np.minimum(i + 1, table.size - 1)]
    hi = np.where(lo == xd, lo, hi)
    inexact = lo != xd
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_FLOOR", False).astype(float), lo)
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_CEIL", False).astype(float), hi)
    tz = np.where(xd > 0, lo, hi)
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_TRUNC", False).astype(float), tz)
    np.testing.assert_array_equal(naive.f32_to_f16(x, "CAST_RINT", False), x.astype(F16))
    nearest = np.where(xd - lo < hi - xd, lo, hi)
    tie = (xd - lo == hi - xd) & inexact
    rnd = naive.f32_to_f16(x, "CAST_ROUND", False).astype(float)
    np.testing.assert_array_equal(rnd[~tie], nearest[~tie])
    np.testing.assert_array_equal(rnd[tie], np.where(xd[tie] > 0, hi[tie], lo[tie]))
    odd = naive.f32_to_f16(x, "CAST_ODD", False)
    ob = odd.view(np.uint16)
    assert np.all(ob[inexact] & 1 == 1)
    assert np.all((odd.astype(float) == lo) | (odd.astype(float) == hi))


# ------------------------------------------------------------------------------ LayerNorm forward
# spec layernorm.md §8 (exact bits) and §7.3 (the error bound against float64)

LN_PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")


def hex32(a):
    return " ".join(f"{v:08x}" for v in np.asarray(a, F32).reshape(-1).view(np.uint32))


def hex16(a):
    return " ".join(f"{v:04x}" for v in np.asarray(a, F16).reshape(-1).view(np.uint16))


@pytest.mark.parametrize("product", LN_PRODUCTS)
def test_layer_norm_doc_example(product):
    """§8.1: arange(64) as [1, 8, 8], gamma = beta = arange(8), eps 1e-4, every row alike."""
    x = np.arange(64, dtype=F32).reshape(1, 8, 8)
    g = np.arange(8, dtype=F32)
    y, mean, var = naive.layer_norm(x, g, g.copy(), 1e-4, product=product)
    assert y.dtype == mean.dtype == var.dtype == F32
    assert y.shape == (1, 8, 8) and mean.shape == var.shape == (1, 8)
    for row in y[0]:
        assert hex32(row) == ("00000000 bdba87b0 3f30d20c 40161a42 409bee7f 41045f2e 4148be5c "
                              "418d8a65")
    np.testing.assert_array_equal(mean[0], 3.5 + 8 * np.arange(8))
    assert hex32(mean[0, :2]) == "40600000 41380000"
    assert hex32(var) == " ".join(["40a80000"] * 8)


def sample_data():
    """The layernorm sample's gen_data.py (§8.2, §9.1): seed 42, inputX, gamma, beta, dy."""
    np.random.seed(42)
    x = np.random.uniform(-100, 100, [2, 32, 16]).astype(F32)
    gamma = np.random.uniform(-100, 100, [16]).astype(F32)
    beta = np.random.uniform(-100, 100, [16]).astype(F32)
    dy = np.random.uniform(-100, 100, [2, 32, 16]).astype(F32)
    return x, gamma, beta, dy


@pytest.mark.parametrize("product, y4", [
    ("atlas-a2", "c199c3e7 424ace70 41a18da0 424c0cbe"),
    ("atlas-a3", "c199c3e7 424ace70 41a18da0 424c0cbe"),
    ("atlas-inference", "c199c3e7 424ace70 41a18da0 424c0cbe"),
    ("atlas-350", "c199c3e8 424ace70 41a18da4 424c0cbe"),
])
def test_layer_norm_sample_data(product, y4):
    x, gamma, beta, _ = sample_data()
    y, mean, var = naive.layer_norm(x, gamma, beta, 1e-4, product=product)
    assert hex32(y[0, 0, :4]) == y4
    assert hex32(mean.reshape(-1)[:2]) == "c09f4038 c1a696ad"
    assert hex32(var.reshape(-1)[:2]) == "4587bd8d 44c36501"


def test_layer_norm_sample_data_950_differs_in_167_outputs():
    x, gamma, beta, _ = sample_data()
    a2 = naive.layer_norm(x, gamma, beta, 1e-4)
    r950 = naive.layer_norm(x, gamma, beta, 1e-4, product="atlas-350")
    assert int((a2[0].view(np.uint32) != r950[0].view(np.uint32)).sum()) == 167
    np.testing.assert_array_equal(a2[1].view(np.uint32), r950[1].view(np.uint32))   # H = 16
    np.testing.assert_array_equal(a2[2].view(np.uint32), r950[2].view(np.uint32))
    # the sample's own acceptance against its numpy golden (layernorm.asc: |err| and rel err)
    mean64 = x.mean(2, keepdims=True)
    golden = gamma * ((x - mean64) * (1.0 / np.sqrt(((x - mean64) ** 2).mean(2, keepdims=True)
                                                    + 1e-4))) + beta
    for y in (a2[0], r950[0]):
        err = np.abs(y - golden)
        with np.errstate(divide="ignore", invalid="ignore"):
            assert not ((err > 1e-4) & (err / np.abs(golden) > 1e-4)).any()


def h24_data():
    """§8.3: x = 0.7 * arange(48) - 5 in fp32 arithmetic (0.7f * i - 5f), as [1, 2, 24];
    gamma = linspace(0.5, 2, 24), beta = linspace(-1, 1, 24) rounded to fp32."""
    x = (np.float32(0.7) * np.arange(48, dtype=F32) - np.float32(5)).reshape(1, 2, 24)
    return x, np.linspace(0.5, 2, 24).astype(F32), np.linspace(-1, 1, 24).astype(F32)


@pytest.mark.parametrize("product, mean, var, scale, y8", [
    ("atlas-a2", "40433334 419ecccd", "41bbd556 41bbd556", "3e535428",
     "bfea5324 bfe29c78 bfd87c58 bfcbf2c7 bfbcffc2 bfaba34c bf97dd64 bf81ae07"),
    ("atlas-inference", "40433334 419ecccd", "41bbd556 41bbd556", "3e535428",
     "bfea5324 bfe29c78 bfd87c58 bfcbf2c7 bfbcffc2 bfaba34c bf97dd64 bf81ae07"),
    ("atlas-350", "40433333 419ecccc", "41bbd554 41bbd555", "409b0e98",
     "bfea5324 bfe29c78 bfd87c58 bfcbf2c6 bfbcffc2 bfaba34c bf97dd63 bf81ae07"),
])
def test_layer_norm_h24_products_differ(product, mean, var, scale, y8):
    x, gamma, beta = h24_data()
    assert hex32(np.float32(1) / np.float32(24)) == "3d2aaaab"
    y, m, v = naive.layer_norm(x, gamma, beta, 1e-5, product=product)
    assert hex32(m) == mean and hex32(v) == var
    assert hex32(y[0, 0, :8]) == y8
    fp32 = naive.layer_norm_fp32(x, gamma, beta, 1e-5, product=product)
    assert hex32(fp32["scale"][:1]) == scale   # rstd on A2/A3/310P, sd on the 950
    np.testing.assert_array_equal(fp32["y"].reshape(y.shape), y)


@pytest.mark.parametrize("product, y16", [
    ("atlas-a2", "fc00 fc00 fc00 fb26 f990 f7f2 f4c4 ee5b 6e5b 74c4 77f2 7990 7b26 7c00 7c00 7c00"),
    ("atlas-a3", "fc00 fc00 fc00 fb26 f990 f7f2 f4c4 ee5b 6e5b 74c4 77f2 7990 7b26 7c00 7c00 7c00"),
    ("atlas-inference",
     "fbff fbff fbff fb26 f990 f7f2 f4c4 ee5b 6e5b 74c4 77f2 7990 7b26 7bff 7bff 7bff"),
    ("atlas-350", "fc00 fc00 fc00 fb26 f990 f7f2 f4c4 ee5b 6e5b 74c4 77f2 7990 7b26 7c00 7c00 7c00"),
])
def test_layer_norm_half_overflow_by_product(product, y16):
    """§8.4: arange(16) as two identical half rows, gamma 60000, beta 0, eps 1e-5."""
    x = np.tile(np.arange(16), 2).astype(F16).reshape(1, 2, 16)
    gamma, beta = np.full(16, 60000, F16), np.zeros(16, F16)
    y, mean, var = naive.layer_norm(x, gamma, beta, 1e-5, product=product)
    assert y.dtype == mean.dtype == var.dtype == F16
    assert hex16(y[0, 0]) == y16 and hex16(y[0, 1]) == y16
    assert hex16(mean) == "4780 4780" and hex16(var) == "4d50 4d50"
    y32 = naive.layer_norm_fp32(x, gamma, beta, 1e-5, product=product)["y"]
    assert y32[0, 15] == np.float32(97618.69) and y32[0, 0] == -np.float32(97618.69)


def test_layer_norm_half_epsilon_is_rounded_to_half():
    x = (np.arange(32) % 3).astype(F16).reshape(1, 2, 16)
    g, b = np.ones(16, F16), np.zeros(16, F16)
    assert np.float32(np.float16(1e-3)) != np.float32(1e-3)
    got = naive.layer_norm_fp32(x, g, b, 1e-3)["scale"]
    var = naive.layer_norm_fp32(x, g, b, 1e-3)["variance"]
    np.testing.assert_array_equal(got, np.float32(1) / np.sqrt(var + np.float32(np.float16(1e-3))))


def test_layer_norm_fold_and_tree_order():
    """The A2 fold adds block k into lane l in block order, then a pair tree over w lanes; the
    950 adds blocks the same way, then a 64-lane tree. Checked on one row where the order shows:
    H = 72 (one fold add on 8 lanes), values chosen so that fp32 sums round."""
    v = np.zeros((1, 72), F32)
    v[0, 0], v[0, 64], v[0, 1] = 1e8, 1.0, -1e8
    acc = naive._fold_64(v)
    assert acc.shape == (1, 64) and acc[0, 0] == np.float32(1e8) + np.float32(1)
    assert naive._tree_absent(acc)[0] == (np.float32(1e8) + np.float32(1)) - np.float32(1e8)
    assert naive._tree_absent(acc)[0] == 0.0   # a sequential sum would give 1
    # w < 64: absent lanes pass a lone -0 through; the 950's tree adds +0 lanes
    neg = np.full((1, 8), -0.0, F32)
    assert np.signbit(naive._tree_absent(neg)[0])
    assert not np.signbit(naive._tree_64(naive._blocks_950(neg))[0])


def test_layer_norm_all_negative_zero_rows():
    """§7.4: x = all -0 (H = 8): COMMON's mean is -0 (absent lanes), the 950's +0 (its tree and
    its H < 64 start add +0s)."""
    x = np.full((1, 2, 8), -0.0, F32)
    g, b = np.ones(8, F32), np.zeros(8, F32)
    assert np.signbit(naive.layer_norm(x, g, b, 1e-5)[1]).all()
    assert not np.signbit(naive.layer_norm(x, g, b, 1e-5, product="atlas-350")[1]).any()


@pytest.mark.parametrize("h", [8, 24, 64, 96, 200])
@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
def test_layer_norm_within_the_float64_bound(h, product):
    """§7.3: every output within the documented bound of the float64 closed form."""
    rng = np.random.default_rng(h)
    x = rng.normal(0.5, 3.0, (2, 3, h)).astype(F32)
    gamma = (1 + rng.normal(0, 0.5, h)).astype(F32)
    beta = rng.normal(0, 1, h).astype(F32)
    y, mean, var = naive.layer_norm(x, gamma, beta, 1e-5, product=product)
    y64, mu, var64 = naive.layer_norm_float64(x, gamma, beta, 1e-5)
    by, bm, bv = naive.layer_norm_error_bound(x, gamma, beta, 1e-5)
    assert (np.abs(y - y64) <= by).all()
    assert (np.abs(mean - mu) <= bm).all()
    assert (np.abs(var - var64) <= bv).all()
    assert (np.abs(y - y64) > 0).any()   # the bound is not vacuous: fp32 really rounds


def test_layer_norm_reuse_state_example():
    """§8.5: [3, 7, 24] float, one = 144 (6 rows): rows 0-2 the tail's (rstd*d)*gamma, rows 3-5
    the third chunk's, the rest x unchanged."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 2, (3, 7, 24)).astype(F32)
    g, b = rng.normal(1, 0.3, 24).astype(F32), rng.normal(0, 1, 24).astype(F32)
    before = x.copy()
    st = naive.layer_norm_reuse_state(x, g, b, 1e-5, 6)
    np.testing.assert_array_equal(x, before)
    normed = naive.layer_norm_fp32(x, g, b, 1e-5)["normed"]
    np.testing.assert_array_equal(st[0:3], normed[18:21])
    np.testing.assert_array_equal(st[3:6], normed[15:18])
    np.testing.assert_array_equal(st[6:], before.reshape(21, 24)[6:])
    rstd = naive.layer_norm_fp32(x, g, b, 1e-5)["scale"]
    mean = naive.layer_norm_fp32(x, g, b, 1e-5)["mean"]
    d = x.reshape(21, 24) - mean[:, None]
    np.testing.assert_array_equal(normed, (rstd[:, None] * d) * g)
