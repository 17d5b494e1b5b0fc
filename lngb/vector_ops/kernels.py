"""Element loads and stores and the scalar operand of the kernels (loops.py, families.py,
executor.py), inlined where they are used (scalar_of excepted)."""
import numpy as np

from .._jit import njit
from .half import float_to_half, narrow_rint, widen
from .program import F32, I16
from .types import RoundMode
from .walk import G_BYTE, interleaved

RINT, NONE = int(RoundMode.CAST_RINT), int(RoundMode.CAST_NONE)


@njit(inline="always")
def load(f32, u16, code, index):
    if code == F32:
        return f32[index]
    if code == I16:
        return int16_value(u16[index])
    return widen(u16[index])


@njit(inline="always")
def store(f32, u16, code, index, value, round_mode, sat):
    if code == F32:
        f32[index] = value
    elif code == I16:
        u16[index] = int16_bits(value)
    else:
        u16[index] = to_half(value, round_mode, sat)


@njit(inline="always")
def int16_value(bits):
    """An int16's bits as fp32 (exact)."""
    value = np.int64(bits) & 0xFFFF
    return np.float32(value - 65536 if value >= 32768 else value)


@njit(inline="always")
def int16_bits(value):
    """An integer-valued fp32 lane result as int16 bits, saturated to the int16 range. (The
    products and sums of int16 values are exact in fp32 below 2**24, and beyond that rounding
    keeps them beyond the range, so saturation is exact; whether the device saturates or wraps
    is not documented, spec layernorm.md §11 item 5.)"""
    clamped = min(max(value, np.float32(-32768.0)), np.float32(32767.0))
    return np.uint16(np.int64(clamped) & 0xFFFF)


@njit(inline="always")
def to_half(value, round_mode, sat):
    if round_mode == RINT or round_mode == NONE:
        return narrow_rint(value, sat)
    return float_to_half(value, round_mode, sat)


@njit(inline="always")
def immediate(code, bits):
    """The value of a row's immediate scalar (its SCALAR bits in type `code`), as fp32."""
    if code == F32:
        return np.uint32(np.int64(bits) & 0xFFFFFFFF).view(np.float32)
    if code == I16:
        return int16_value(bits)
    return widen(np.uint16(np.int64(bits) & 0xFFFF))


@njit
def scalar_of(ub, cores, core, code, at, bits):
    """The scalar operand of a row in type `code` on core `core` of ub, a block of `cores`
    interleaved UBs (bytes): the immediate's bits (SCALAR), or the scalar register a GetValue
    filled (SCALAR_AT = 1 + its byte address), read byte by byte (so that the executor needs no
    float view of the UB, whose code cost its first compile 0.6 s). Not inlined: the executor's
    hot loop stays small."""
    if at == 0:
        return immediate(code, bits)
    register = 0
    for k in range(4 if code == F32 else 2):
        register |= np.int64(ub[interleaved(at - 1 + k, core, cores, G_BYTE)]) << (8 * k)
    return immediate(code, register)
