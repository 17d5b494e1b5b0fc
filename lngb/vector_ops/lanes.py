"""What one lane of each element-wise instruction computes: lane(a, b, s) -> fp32.

a and b are the lane's source values (src0, src1; 0 where the instruction has fewer sources),
s is the scalar operand, all as fp32 (half data is widened exactly first). `families.walks` (or
an instruction's contiguous loops) reads the lanes, calls this, and stores the result rounded to
the destination type (Cast: with its round mode). Adding an element-wise instruction is a function
here plus its entry in `table.py`.
"""
import numba
import numpy as np

from .._jit import njit


@njit
def first_nan(a, b, r):
    """IEEE leaves open which NaN operand a NaN result carries (and the CPU's choice varies with
    how a loop compiles): here it is the first NaN operand's, quieted. The payload is picked as
    integer bits and quieted once, so the loops vectorise without masked loads (written as
    `quiet(a) if a != a else quiet(b)`, LLVM loaded b only where a is ordered, with vmaskmovps:
    4x slower on AMD hosts)."""
    a_bits = np.int64(np.float32(a).view(np.uint32))   # numba widens uint32 math
    b_bits = np.int64(np.float32(b).view(np.uint32))
    nan_operand = np.uint32((a_bits if a != a else b_bits) | 0x400000).view(np.float32)
    return nan_operand if (a != a) | (b != b) else r


if numba.config.DISABLE_JIT:
    first_nan_of_any = first_nan

    def first_nan(a, b, r):
        """Pure Python (NUMBA_DISABLE_JIT): ordered operands give r before the bit arithmetic,
        which costs 6 µs a lane there (half of the test suite's time run that way). Compiled,
        the branch-free form stays: with this early return, LLVM made the float Add and Mul
        loops 1.4x slower."""
        return r if (a == a) & (b == b) else first_nan_of_any(a, b, r)


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


# --- Div and Sqrt: correctly rounded; s != 0 flushes subnormal operands and results to zero ---
# (AICore(div_sqrt="ftz"): the 950 documents its vdiv/vsqrt as not supporting denormals; what
# A2/A3/310P do is not public, and the default keeps them, as IEEE does.)

FLT_MIN = np.float32(2.0 ** -126)


@njit
def flush(x):
    """x, or a zero of its sign when x is subnormal (branch-free)."""
    return np.float32(x * np.float32(0.0)) if np.abs(x) < FLT_MIN else x


@njit
def div(a, b, s):
    if s != 0:
        a, b = flush(a), flush(b)
    r = first_nan(a, b, a / b)
    return flush(r) if s != 0 else r


@njit
def sqrt(a, b, s):
    if s != 0:
        a = flush(a)
    r = first_nan(a, a, np.sqrt(a))
    return flush(r) if s != 0 else r


# --- exact lanes: Max Min Maxs Mins Abs Relu -------------------------------------------------

@njit
def larger(a, b):
    """max(a, b) with -0 below +0 in either order (NaNs are handled by the caller)."""
    if a == b:  # equal, or +0 and -0: the one whose sign bit is clear
        return a if np.float32(a).view(np.uint32) < np.float32(b).view(np.uint32) else b
    return a if a > b else b


@njit
def smaller(a, b):
    if a == b:
        return a if np.float32(a).view(np.uint32) > np.float32(b).view(np.uint32) else b
    return a if a < b else b


@njit
def max_(a, b, s):
    return first_nan(a, b, larger(a, b))


@njit
def min_(a, b, s):
    return first_nan(a, b, smaller(a, b))


@njit
def maxs(a, b, s):
    return first_nan(a, s, larger(a, s))


@njit
def mins(a, b, s):
    return first_nan(a, s, smaller(a, s))


@njit
def abs_(a, b, s):
    """The sign bit cleared (a NaN keeps its payload, as IEEE abs does)."""
    return np.uint32(np.int64(np.float32(a).view(np.uint32)) & 0x7FFFFFFF).view(np.float32)


@njit
def relu(a, b, s):
    """max(a, +0): -0 gives +0, a NaN stays a NaN (quieted)."""
    zero = np.float32(0.0)
    return first_nan(a, a, larger(a, zero))
