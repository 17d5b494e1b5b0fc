"""What one lane of each element-wise instruction computes: lane(a, b, s) -> fp32.

a and b are the lane's source values (src0, src1; 0 where the instruction has fewer sources),
s is the scalar operand, all as fp32 (half data is widened exactly first). The walk in
`kernels.elementwise_walk` reads the lanes, calls this, and stores the result rounded to the
destination type (Cast: with its round mode). Adding an element-wise instruction is a function
here plus its entry in `table.py`.
"""
import numpy as np

from .._jit import njit


@njit
def quiet(x):
    bits = np.int64(np.float32(x).view(np.uint32)) | 0x400000  # numba widens uint32 math
    return np.uint32(bits).view(np.float32)


@njit
def first_nan(a, b, r):
    """IEEE leaves open which NaN operand a NaN result carries (and the CPU's choice varies with
    how a loop compiles): here it is the first NaN operand's, quieted. Written as selects so
    loops vectorise."""
    nan_operand = quiet(a) if a != a else quiet(b)
    return nan_operand if (a != a) | (b != b) else r


@njit
def add(a, b, s):
    return first_nan(a, b, a + b)


@njit
def sub(a, b, s):
    return first_nan(a, b, a - b)


@njit
def mul(a, b, s):
    return first_nan(a, b, a * b)


@njit
def adds(a, b, s):
    return first_nan(a, s, a + s)


@njit
def muls(a, b, s):
    return first_nan(a, s, a * s)


@njit
def duplicate(a, b, s):
    return s


@njit
def convert(a, b, s):
    """Cast: the value itself; the conversion is the store's rounding to the destination type."""
    return a
