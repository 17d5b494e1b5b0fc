"""Exact float16 <-> float32 conversions on uint16 bit patterns.

Numba's CPU target has no float16, so half data lives in uint16 arrays and every
conversion is done with integer arithmetic on the IEEE bit patterns. Integer work is
done in int64: in Numba, mixing uint64 with signed ints promotes to float64.
"""
import numba
import numpy as np

from .._jit import HARDWARE_HALF, float_to_half_bits, half_bits_to_float, njit
from ..errors import InvalidArgumentError

HALF_MAX_BITS = 0x7BFF  # 65504
HALF_INF_BITS = 0x7C00
TWO_POW_M24 = np.float32(2.0 ** -24)


@njit
def half_to_float(bits):
    """uint16 bit pattern -> np.float32, exact (NaN payload kept: f32 mantissa = f16 mantissa << 13)."""
    h = np.int64(bits) & 0xFFFF
    sign = (h >> 15) << 31
    exp = (h >> 10) & 0x1F
    man = h & 0x3FF
    if exp == 0x1F:
        f = sign | 0x7F800000 | (man << 13)
    elif exp != 0:
        f = sign | ((exp + 112) << 23) | (man << 13)
    elif man == 0:
        f = sign
    else:
        # Subnormal: man * 2**-24; normalise so the leading 1 becomes the implicit bit.
        e = 113
        while man & 0x400 == 0:
            man <<= 1
            e -= 1
        f = sign | (e << 23) | ((man & 0x3FF) << 13)
    return np.uint32(f).view(np.float32)


@njit
def float_to_half(x, round_mode, saturate):
    """np.float32 -> uint16 bit pattern, rounded per RoundMode (IEEE gradual underflow).

    Overflow as IEEE: to +-inf unless the mode rounds toward zero for that sign (TRUNC, ODD,
    FLOOR of a positive, CEIL of a negative), which gives +-65504. A NaN stays a NaN with its
    sign and top 10 payload bits (0x200 if those are 0). saturate=True is the device's
    saturation mode: every +-inf result (inf inputs included) becomes +-65504, NaN becomes +0.
    """
    if round_mode < 0 or round_mode > 6:
        raise InvalidArgumentError("float_to_half: round_mode must be a RoundMode (0..6)")
    b = np.int64(np.float32(x).view(np.uint32))
    negative = b >> 31 != 0
    sign = (b >> 31) << 15
    a = b & 0x7FFFFFFF
    if a > 0x7F800000:  # NaN: keep the top 10 payload bits, but never turn into inf
        if saturate:
            return np.uint16(0)
        man = (a >> 13) & 0x3FF
        if man == 0:
            man = 0x200
        return np.uint16(sign | HALF_INF_BITS | man)
    if a == 0x7F800000:
        return np.uint16(sign | (HALF_MAX_BITS if saturate else HALF_INF_BITS))

    exp = a >> 23
    sig = (a & 0x7FFFFF) | (0x800000 if exp != 0 else 0)
    # |x| = sig * 2**(max(exp, 1) - 150); q = |x| / (half ulp at |x|), split into
    # integer part q and remainder rem over 2**shift.
    if exp >= 113:  # |x| >= 2**-14: half normal range (or beyond it)
        shift = 13
    else:
        shift = min(126 - max(exp, 1), 30)
    q = sig >> shift
    rem = sig & ((1 << shift) - 1)
    half = 1 << (shift - 1)

    if round_mode <= 1:  # CAST_NONE, CAST_RINT
        if rem > half or (rem == half and q & 1 == 1):
            q += 1
    elif round_mode == 2:  # CAST_FLOOR
        if rem != 0 and negative:
            q += 1
    elif round_mode == 3:  # CAST_CEIL
        if rem != 0 and not negative:
            q += 1
    elif round_mode == 4:  # CAST_ROUND
        if rem >= half:
            q += 1
    elif round_mode == 6:  # CAST_ODD
        if rem != 0:
            q |= 1
    # CAST_TRUNC (5): q as is

    if exp >= 113:
        # q is in [1024, 2048]; the carry of q == 2048 into the exponent field is correct.
        mag = ((exp - 113) << 10) + q
    else:
        mag = q  # subnormal; q == 1024 is the smallest normal
    if mag >= HALF_INF_BITS:
        toward_zero = (round_mode == 5 or round_mode == 6
                       or (round_mode == 2 and not negative)
                       or (round_mode == 3 and negative))
        mag = HALF_MAX_BITS if (saturate or toward_zero) else HALF_INF_BITS
    return np.uint16(sign | mag)


@njit
def half_array_to_float(bits_array):
    out = np.empty(bits_array.shape[0], dtype=np.float32)
    for i in range(bits_array.shape[0]):
        out[i] = half_to_float(bits_array[i])
    return out


@njit
def float_array_to_half(float32_array, round_mode, saturate):
    out = np.empty(float32_array.shape[0], dtype=np.uint16)
    for i in range(float32_array.shape[0]):
        out[i] = float_to_half(float32_array[i], round_mode, saturate)
    return out


# --- array conversions written without branches, so LLVM vectorises them (the Cast kernels) ---

# Numba widens integer arithmetic to int64 unless every operand is uint32: the casts keep the
# vectors 16 lanes wide.
U32 = np.uint32


@njit(inline="always")
def widen_bits(h):
    """The float32 value of half bit pattern h: the same bits as half_to_float, branch-free, in
    integer arithmetic."""
    h = U32(h)
    shifted = U32((h & U32(0x7FFF)) << U32(13))
    exp = U32(shifted & U32(0x0F800000))
    normal = U32(shifted + U32(0x38000000))            # rebias 15 -> 127
    special = U32(shifted + U32(0x70000000))           # inf / NaN: exponent 31 -> 255
    tiny = np.float32(np.float32(np.int32(h & U32(0x3FF))) * TWO_POW_M24)  # exact
    bits = special if exp == U32(0x0F800000) else (
        tiny.view(np.uint32) if exp == U32(0) else normal)
    return U32(bits | U32((h & U32(0x8000)) << U32(16))).view(np.float32)


@njit(inline="always")
def widen_hardware(h):
    """widen_bits(h) by the CPU's conversion (HARDWARE_HALF), 1.5x as fast in the Cast loops; a
    NaN's bits are widen_bits' (the CPU would quiet a signalling NaN)."""
    h = U32(h)
    nan = U32(U32((h & U32(0x8000)) << U32(16)) | U32(0x7F800000)
              | U32((h & U32(0x3FF)) << U32(13)))
    return nan.view(np.float32) if (h & U32(0x7FFF)) > U32(0x7C00) else half_bits_to_float(h)


@njit(inline="always")
def narrow_rint_bits(x, saturate):
    """The half bit pattern of float32 x, CAST_RINT (or CAST_NONE): the same bits as
    float_to_half(x, CAST_RINT, saturate) for every input, branch-free, in integer arithmetic."""
    x = np.float32(x)
    b = x.view(np.uint32)
    big = U32(HALF_MAX_BITS) if saturate else U32(HALF_INF_BITS)
    a = U32(b & U32(0x7FFFFFFF))
    # ties to even: add just under half an ulp, plus one when the kept part is odd;
    # a carry into the exponent is the right result; infinity lands in `big`
    rounded = U32(U32(a + U32(0xFFF) + ((a >> U32(13)) & U32(1))) >> U32(13))
    normal = U32(rounded - U32(0x1C000))               # rebias 127 -> 15
    # below 2**-14: adding 0.5 rounds to a multiple of 2**-24 (ties to even) exactly
    tiny = U32(np.float32(np.abs(x) + np.float32(0.5)).view(np.uint32) - U32(0x3F000000))
    mag = tiny if a < U32(0x38800000) else (big if normal >= U32(HALF_INF_BITS) else normal)
    sign = U32((b >> U32(16)) & U32(0x8000))
    return np.uint16(half_nan(a, sign, saturate) if a > U32(0x7F800000) else U32(sign | mag))


@njit(inline="always")
def half_nan(a, sign, saturate):
    """The half a float NaN (|bits| a, sign bit already at bit 15) narrows to: its sign and top
    10 payload bits (0x200 if those are 0); +0 in saturation mode."""
    payload = U32((a >> U32(13)) & U32(0x3FF))
    return U32(0) if saturate else U32(sign | U32(HALF_INF_BITS) | (
        payload if payload != U32(0) else U32(0x200)))


@njit(inline="always")
def narrow_rint_hardware(x, saturate):
    """narrow_rint_bits(x, saturate) by the CPU's conversion (HARDWARE_HALF), 2x as fast in the
    Cast loops; NaNs and the saturation mode's results are narrow_rint_bits'."""
    x = np.float32(x)
    b = x.view(np.uint32)
    a = U32(b & U32(0x7FFFFFFF))
    sign = U32((b >> U32(16)) & U32(0x8000))
    rounded = U32(float_to_half_bits(x))
    infinite = (rounded & U32(0x7FFF)) == U32(HALF_INF_BITS)
    finite = U32(sign | U32(HALF_MAX_BITS)) if saturate and infinite else rounded
    return np.uint16(half_nan(a, sign, saturate) if a > U32(0x7F800000) else finite)


# the kernels' conversions: the CPU's where it has them (the same bits either way)
widen = widen_hardware if HARDWARE_HALF else widen_bits
narrow_rint = narrow_rint_hardware if HARDWARE_HALF else narrow_rint_bits

# Pure Python (NUMBA_DISABLE_JIT) takes these instead: the integer arithmetic costs about 10 µs a
# lane there (a sixth of the test suite's time run that way). The same bits (tests/test_half.py:
# widening on every pattern, narrowing on the test sets, in both modes).
def widened_table():
    """The float32 of every half pattern: numpy's cast, NaNs as half_to_float gives them (the
    payload kept, never quieted)."""
    bits = np.arange(65536, dtype=np.uint32)
    nans = ((bits & 0x8000) << 16) | 0x7F800000 | ((bits & 0x3FF) << 13)
    table = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return np.where(np.isnan(table), nans.view(np.float32), table)


WIDENED = widened_table()
HALF_MAX = np.float32(65504)
NARROW_RINT_BITS_PYTHON = getattr(narrow_rint_bits, "py_func", narrow_rint_bits)


def widen_python(h):
    return WIDENED[int(h) & 0xFFFF]


def narrow_rint_python(x, saturate):
    """Finite values below the largest half by numpy's conversion (round to nearest even,
    subnormals included: no overflow, so `saturate` does not matter); the rest by the integer
    arithmetic, as Python (a jitted call would take a signalling NaN through a double, quieting
    it)."""
    x = np.float32(x)
    if np.abs(x) < HALF_MAX:
        return np.float16(x).view(np.uint16)
    with np.errstate(invalid="ignore", over="ignore"):   # NaN and inf arithmetic, as compiled
        return NARROW_RINT_BITS_PYTHON(x, saturate)


if numba.config.DISABLE_JIT:
    widen, narrow_rint = widen_python, narrow_rint_python


@njit
def widen_array(dst, src):
    """dst[i] = the float32 value of half bit pattern src[i]."""
    for i in range(dst.size):
        dst[i] = widen(src[i])


@njit
def narrow_array_rint(dst, src, saturate):
    """dst[i] = the half bit pattern of src[i], CAST_RINT."""
    for i in range(dst.size):
        dst[i] = narrow_rint(src[i], saturate)
