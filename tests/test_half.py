"""half.py against oracles built from numpy's float16 only (never the code under test).

With NUMBA_DISABLE_JIT=1 the functions run as plain Python, so the big sets are thinned.
"""
import platform

import numba
import numpy as np
import pytest

from llvmlite import binding as llvm

from lngb._jit import HARDWARE_HALF, host_converts_half
from lngb.errors import InvalidArgumentError
from lngb.vector_ops import half
from lngb.vector_ops.half import (float_array_to_half, float_to_half, half_array_to_float,
                                  half_to_float, narrow_array_rint, narrow_rint,
                                  narrow_rint_bits, narrow_rint_hardware, widen, widen_array,
                                  widen_bits, widen_hardware)
from lngb.vector_ops.types import RoundMode

pytestmark = pytest.mark.jitted

R = RoundMode
ALL_MODES = list(RoundMode)
NO_JIT = numba.config.DISABLE_JIT
N_RANDOM = 20_000 if NO_JIT else 2_000_000


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def with_negatives(x):
    x = np.asarray(x, dtype=np.float32)
    return np.concatenate([x, -x])


def thin(x):
    """Plain Python is ~100x slower: keep a deterministic 1-in-13 subset."""
    return x[::13] if NO_JIT else x


# ---------------------------------------------------------------- value sets
ALL_HALF_BITS = np.arange(65536, dtype=np.uint16)
ALL_HALVES_F32 = ALL_HALF_BITS.view(np.float16).astype(np.float32)


def _ties():
    """Every midpoint between adjacent non-negative halves (65504|inf taken as 65520), ±1 f32 ulp."""
    lo = ALL_HALVES_F32[:0x7C00].astype(np.float64)
    hi = np.append(lo[1:], 65536.0)
    mid = ((lo + hi) / 2).astype(np.float32)  # 12 significant bits: exact in f32
    assert np.array_equal(mid.astype(np.float64), (lo + hi) / 2)
    return with_negatives(np.concatenate([
        mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))]))


_OVERFLOW = with_negatives([65504, 65504.004, 65519.996, 65520, 65520.004, 65535.996, 65536,
                            65537, 1e5, 1e30, np.finfo(np.float32).max, np.inf])
_SMALLEST = 2.0 ** -24
_SUBNORMAL = with_negatives(np.concatenate([
    np.arange(0, 2049) * (_SMALLEST / 2),            # subnormal halves and their midpoints
    np.array([0.25, 0.5, 0.75, 1.25, 1.5]) * _SMALLEST,
    np.nextafter(np.float32(_SMALLEST / 2), np.float32([0, 1])),
    np.nextafter(np.float32(2.0 ** -14), np.float32([0, 1])),
    f32([1, 2, 3, 0x7FFFFF, 0x800000, 0x33000000, 0x33000001, 0x32FFFFFF, 0x32800000]),
    np.random.default_rng(1).uniform(0, 2.0 ** -14, 5000),
]))
_SPECIAL = np.concatenate([
    f32([0x00000000, 0x80000000]),
    f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7F801FFF, 0x7F802000, 0xFF802000,
         0x7FA00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FBFFFFF, 0x7FC00001]),
])


def _random(n):
    rng = np.random.default_rng(20240601)
    any_bits = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    # exponents around the half range, where the directed modes differ most
    near = rng.integers(0, 2 ** 23, n // 4, dtype=np.uint32)
    near |= rng.integers(100, 145, near.size, dtype=np.uint32) << 23
    near |= rng.integers(0, 2, near.size, dtype=np.uint32) << 31
    return np.concatenate([f32(any_bits), f32(near)])


SETS = {
    "halves": thin(ALL_HALVES_F32),
    "ties": thin(_ties()),
    "overflow": _OVERFLOW,
    "subnormal": thin(_SUBNORMAL),
    "special": _SPECIAL,
    "random": _random(N_RANDOM),
}
SET_NAMES = list(SETS)
# The float64 oracle is slower than numpy's cast: the mode tests take a smaller random sample.
ORACLE_SETS = {**SETS, "random": _random(N_RANDOM // 5)}


# ---------------------------------------------------------------- oracles
def nan_bits(x, saturate):
    """Spec for NaN in: sign, 0x7C00 and the top 10 payload bits; 0x200 if those are all 0."""
    b = x.view(np.uint32)
    payload = ((b >> 13) & 0x3FF).astype(np.uint16)
    payload[payload == 0] = 0x200
    out = ((b >> 16) & 0x8000).astype(np.uint16) | np.uint16(0x7C00) | payload
    return np.zeros_like(out) if saturate else out


def numpy_rne_bits(x):
    """numpy's astype(float16) (RNE). For a NaN whose top 10 payload bits are 0 numpy gives
    sign|0x7C01 (a signalling NaN); the spec asks for the quiet bit instead, so patch only that."""
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(np.float16).view(np.uint16).copy()
    nan = np.isnan(x)
    ref[nan] = nan_bits(x[nan], False)
    return ref


def _wide(h):
    w = h.astype(np.float64)
    return np.where(np.isinf(w), np.copysign(65536.0, w), w)


def oracle_bits(x, mode, saturate):
    """Pick between the adjacent halves lo <= x <= hi (65536 standing for the first value past
    65504), decided in float64, where every value and midpoint involved is exact."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        xf = x.astype(np.float64)
    neg = np.signbit(xf)
    # every |x| >= 65536 overflows in every mode, so clipping there changes no result
    xc = np.clip(np.nan_to_num(xf, nan=0.0), -65536.0, 65536.0)
    with np.errstate(over="ignore"):
        r16 = xc.astype(np.float32).astype(np.float16)
        rf = _wide(r16)
        up = _wide(np.nextafter(r16, np.float16(np.inf)))
        down = _wide(np.nextafter(r16, np.float16(-np.inf)))
    lo = np.where(rf <= xc, rf, down)
    hi = np.where(rf >= xc, rf, up)
    mid = (lo + hi) / 2
    with np.errstate(over="ignore"):
        lo_odd = (lo.astype(np.float16).view(np.uint16) & 1) == 1
    nearest = lambda tie: np.where(xc < mid, lo, np.where(xc > mid, hi, tie))
    if mode in (R.CAST_NONE, R.CAST_RINT):
        res = nearest(np.where(lo_odd, hi, lo))
    elif mode == R.CAST_ROUND:
        res = nearest(np.where(neg, lo, hi))
    elif mode == R.CAST_FLOOR:
        res = lo
    elif mode == R.CAST_CEIL:
        res = hi
    elif mode == R.CAST_TRUNC:
        res = np.where(neg, hi, lo)
    else:  # CAST_ODD
        res = np.where(lo == hi, lo, np.where(lo_odd, lo, hi))
    res = np.copysign(res, xf)  # rounding never changes the sign (gives -0 for tiny negatives)

    toward_zero = {R.CAST_TRUNC: True, R.CAST_ODD: True,
                   R.CAST_FLOOR: ~neg, R.CAST_CEIL: neg}.get(mode, False)
    over = np.abs(res) > 65504
    res = np.where(over, np.where(saturate | toward_zero, 65504.0, np.inf), np.abs(res))
    res = np.copysign(res, xf)
    out = res.astype(np.float16).view(np.uint16).copy()
    inf = np.isinf(x)
    out[inf] = np.where(neg[inf], 0x8000, 0) | (0x7BFF if saturate else 0x7C00)
    nan = np.isnan(x)
    out[nan] = nan_bits(x[nan], saturate)
    return out


def assert_bits_equal(x, got, want):
    bad = np.flatnonzero(got != want)
    if bad.size:
        rows = [f"x={x[i]!r} (0x{x[i:i+1].view(np.uint32)[0]:08X}): got 0x{got[i]:04X} want 0x{want[i]:04X}"
                for i in bad[:10]]
        pytest.fail(f"{bad.size} of {x.size} differ:\n" + "\n".join(rows))


# ---------------------------------------------------------------- hand-computed values
HAND = [  # (x, mode, expected bits)
    (1 / 3, R.CAST_FLOOR, 0x3555), (1 / 3, R.CAST_CEIL, 0x3556), (1 / 3, R.CAST_RINT, 0x3555),
    (-1 / 3, R.CAST_FLOOR, 0xB556), (-1 / 3, R.CAST_CEIL, 0xB555), (-1 / 3, R.CAST_TRUNC, 0xB555),
    (2049, R.CAST_RINT, 0x6800), (2051, R.CAST_RINT, 0x6802), (2049, R.CAST_NONE, 0x6800),
    (2049, R.CAST_ROUND, 0x6801), (-2049, R.CAST_ROUND, 0xE801), (2049, R.CAST_TRUNC, 0x6800),
    (2049, R.CAST_ODD, 0x6801), (2050, R.CAST_ODD, 0x6801), (2048, R.CAST_ODD, 0x6800),
    (2052.5, R.CAST_ODD, 0x6803),
    (65520, R.CAST_RINT, 0x7C00), (65519.996, R.CAST_RINT, 0x7BFF), (65520, R.CAST_ROUND, 0x7C00),
    (65520, R.CAST_TRUNC, 0x7BFF), (65520, R.CAST_ODD, 0x7BFF), (65505, R.CAST_CEIL, 0x7C00),
    (-65505, R.CAST_CEIL, 0xFBFF), (-65505, R.CAST_FLOOR, 0xFC00), (1e30, R.CAST_FLOOR, 0x7BFF),
    (2.0 ** -25, R.CAST_RINT, 0x0000), (5.96e-8 / 2, R.CAST_RINT, 0x0000),
    (2.0 ** -25, R.CAST_ROUND, 0x0001), (3 * 2.0 ** -26, R.CAST_RINT, 0x0001),
    (3 * 2.0 ** -25, R.CAST_RINT, 0x0002), (2.0 ** -25, R.CAST_CEIL, 0x0001),
    (-(2.0 ** -25), R.CAST_FLOOR, 0x8001), (-(2.0 ** -25), R.CAST_CEIL, 0x8000),
    (1e-30, R.CAST_ODD, 0x0001), (-1e-30, R.CAST_TRUNC, 0x8000),
    (2.0 ** -14 - 2.0 ** -30, R.CAST_RINT, 0x0400), (2.0 ** -14 - 2.0 ** -30, R.CAST_TRUNC, 0x03FF),
]


@pytest.mark.parametrize("x, mode, want", HAND)
def test_hand_values(x, mode, want):
    xs = np.array([x], dtype=np.float32)
    assert int(oracle_bits(xs, mode, False)[0]) == want, "oracle"
    assert int(float_to_half(np.float32(x), mode, False)) == want, "float_to_half"


def test_numpy_oracle_assumptions():
    assert int(np.float32(2049).astype(np.float16).view(np.uint16)) == 0x6800
    assert int(np.float32(2051).astype(np.float16).view(np.uint16)) == 0x6802
    assert int(np.float32(2.0 ** -25).astype(np.float16).view(np.uint16)) == 0
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(65520).astype(np.float16))
    # the only place the spec departs from numpy
    assert numpy_rne_bits(f32([0x7F800001]))[0] == 0x7E00


# ---------------------------------------------------------------- 1. half -> float
def test_half_to_float_all_patterns():
    want = ALL_HALVES_F32.view(np.uint32)
    # half_to_float runs compiled inside the array loop: exact for every pattern, NaNs included
    assert np.array_equal(half_array_to_float(ALL_HALF_BITS).view(np.uint32), want)
    got = np.array([np.float32(half_to_float(b)) for b in ALL_HALF_BITS], dtype=np.float32)
    got = got.view(np.uint32)
    if not NO_JIT:
        # Returning a float32 to Python boxes it as a double, and the CPU quiets a signalling
        # NaN on the way (0x7F802000 -> 0x7FC02000); only the quiet bit may differ there.
        snan = np.isnan(ALL_HALVES_F32) & ((want & 0x400000) == 0)
        assert np.array_equal(got[snan], want[snan] | 0x400000)
        got[snan] = want[snan]
    assert np.array_equal(got, want)


# the kernels' conversions (half.widen, half.narrow_rint) are one of two implementations, by
# the host (HARDWARE_HALF): both must give the same bits; the array loops run the host's. In pure
# Python (NUMBA_DISABLE_JIT) the kernels take a third, a table and numpy's conversion (plain
# Python, tested in both modes).
IMPLEMENTATIONS = ["bits", "python"] + (["hardware"] if HARDWARE_HALF else [])
KERNEL_WIDENING = {"bits": widen_bits, "hardware": widen_hardware,
                   "python": half.widen_python}
KERNEL_NARROWING = {"bits": narrow_rint_bits, "hardware": narrow_rint_hardware,
                    "python": half.narrow_rint_python}


def in_python(implementation):
    """Whether `implementation` is plain Python, not callable from the jitted loops below."""
    return implementation == "python" and not NO_JIT


@numba.njit
def widen_with(implementation, out, src):
    for i in range(out.size):
        out[i] = implementation(src[i])


@numba.njit
def narrow_with(implementation, out, src, saturate):
    for i in range(out.size):
        out[i] = implementation(src[i], saturate)


def test_the_kernels_convert_half_in_hardware_where_the_cpu_can(monkeypatch):
    features = {} if NO_JIT else llvm.get_host_cpu_features()
    assert HARDWARE_HALF == (not NO_JIT and (platform.machine().lower() in ("aarch64", "arm64")
                                             or bool(features.get("f16c", False))))
    # code for another CPU (NUMBA_CPU_NAME, e.g. "generic" for a portable cache) may lack the
    # instructions, and LLVM's library calls for them do not link in numba's JIT (a segfault)
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not host_converts_half()
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    if platform.machine().lower() not in ("aarch64", "arm64"):
        monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,-f16c")
        assert not host_converts_half()
        monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,+f16c")
        assert host_converts_half()
    if NO_JIT:
        assert (widen, narrow_rint) == (half.widen_python, half.narrow_rint_python)
    else:
        assert (widen, narrow_rint) == ((widen_hardware, narrow_rint_hardware) if HARDWARE_HALF
                                        else (widen_bits, narrow_rint_bits))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_the_branch_free_widening_of_the_kernels_all_patterns(implementation):
    """widen (the kernels' half loads, and Cast half -> float) gives numpy's bits for every
    pattern, NaN payloads included."""
    if in_python(implementation):
        out = np.array([half.widen_python(h) for h in ALL_HALF_BITS], np.float32)
    else:
        out = np.empty(65536, np.float32)
        widen_with(KERNEL_WIDENING[implementation], out, ALL_HALF_BITS)
    assert np.array_equal(out.view(np.uint32), ALL_HALVES_F32.view(np.uint32))
    widen_array(out, ALL_HALF_BITS)
    assert np.array_equal(out.view(np.uint32), ALL_HALVES_F32.view(np.uint32))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("name", SET_NAMES)
@pytest.mark.parametrize("saturate", [False, True])
def test_the_branch_free_narrowing_of_the_kernels(name, saturate, implementation):
    """narrow_rint (the kernels' half stores with CAST_RINT / CAST_NONE) gives float_to_half's
    bits for every input of every set."""
    x = SETS[name]
    if in_python(implementation):   # a Python call a value: 1 in 13, as pure Python thins them
        x = x[::13]
        out = np.array([half.narrow_rint_python(v, saturate) for v in x], np.uint16)
    else:
        out = np.empty(x.size, np.uint16)
        narrow_with(KERNEL_NARROWING[implementation], out, x, saturate)
    assert_bits_equal(x, out, float_array_to_half(x, R.CAST_RINT, saturate))
    narrow_array_rint(out, x, saturate)
    assert_bits_equal(x, out, float_array_to_half(x, R.CAST_RINT, saturate))


# ---------------------------------------------------------------- 2. RNE vs numpy
@pytest.mark.parametrize("name", SET_NAMES)
@pytest.mark.parametrize("mode", [R.CAST_NONE, R.CAST_RINT])
def test_rne_matches_numpy(mode, name):
    x = SETS[name]
    assert_bits_equal(x, float_array_to_half(x, mode, False), numpy_rne_bits(x))


# ---------------------------------------------------------------- 3. all modes vs oracle
@pytest.mark.parametrize("name", SET_NAMES)
def test_oracle_rne_matches_numpy(name):
    x = ORACLE_SETS[name]
    assert_bits_equal(x, oracle_bits(x, R.CAST_RINT, False), numpy_rne_bits(x))


@pytest.mark.parametrize("name", SET_NAMES)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_modes_match_oracle(mode, name):
    x = ORACLE_SETS[name]
    assert_bits_equal(x, float_array_to_half(x, mode, False), oracle_bits(x, mode, False))


def test_unknown_round_mode_rejected():
    with pytest.raises(InvalidArgumentError):
        float_to_half(np.float32(1.0), 7, False)


# ---------------------------------------------------------------- 4. saturation
@pytest.mark.parametrize("name", SET_NAMES)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_saturate(mode, name):
    x = ORACLE_SETS[name]
    got = float_array_to_half(x, mode, True)
    assert_bits_equal(x, got, oracle_bits(x, mode, True))
    plain = float_array_to_half(x, mode, False)
    in_range = (plain & 0x7FFF) < 0x7C00
    assert np.array_equal(got[in_range], plain[in_range])
    assert np.all(got[np.isnan(x)] == 0)
    assert np.all((got[~np.isnan(x)] & 0x7FFF) <= 0x7BFF)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_saturate_specials(mode):
    for x, want in [(np.inf, 0x7BFF), (-np.inf, 0xFBFF), (65520, 0x7BFF), (-1e30, 0xFBFF),
                    (np.nan, 0x0000), (-np.nan, 0x0000), (65504, 0x7BFF), (1.0, 0x3C00)]:
        assert int(float_to_half(np.float32(x), mode, True)) == want, (x, mode)


# ---------------------------------------------------------------- 5. arrays vs scalars
def test_arrays_match_scalars():
    not_nan = ALL_HALF_BITS[~np.isnan(ALL_HALVES_F32)]  # NaNs: see test_half_to_float_all_patterns
    assert np.array_equal(half_array_to_float(not_nan).view(np.uint32),
                          np.array([np.float32(half_to_float(b)) for b in not_nan]).view(np.uint32))
    x = np.concatenate([SETS["ties"][::211], SETS["overflow"], SETS["subnormal"][::29],
                        SETS["special"], SETS["random"][:1000], SETS["random"][-1000:]])
    snan = np.isnan(x) & ((x.view(np.uint32) & 0x400000) == 0)
    assert snan.any()
    for mode in ALL_MODES:
        for saturate in (False, True):
            scalar = np.array([float_to_half(v, mode, saturate) for v in x], dtype=np.uint16)
            array = float_array_to_half(x, mode, saturate)
            if not NO_JIT and not saturate:
                # Passing a float32 in from Python goes through a double, and the CPU quiets a
                # signalling NaN on the way: only the quiet bit may differ there.
                array[snan] |= 0x200
            assert_bits_equal(x, array, scalar)
