"""Checks of the arguments of the public API, each in one place.

Every check takes the API's name, the argument's name and the value; it looks at the value's type
before comparing it with anything (an array, or an object with its own `==`, never reaches an `in`
or a dict lookup) and returns the value in a plain form (int, str, float, np.dtype, tuple), or
raises InvalidArgumentError naming the API, the argument, the value and what is allowed. Flags
(True/False) are checked by errors.check_flag.
"""
import enum
import math

import numpy as np

from .errors import InvalidArgumentError

# The element types the vector unit has instructions for (native byte order).
UNIT_DTYPES = tuple(np.dtype(d) for d in (np.float16, np.float32, np.uint8, np.int8, np.uint16,
                                          np.int16, np.uint32, np.int32))
FLOAT_DTYPES = UNIT_DTYPES[:2]


def _spellings(dtype):
    """The strings numpy reads as `dtype` (names, type codes), none of them deprecated."""
    names = {dtype.name, dtype.char, dtype.str, dtype.str[1:], "=" + dtype.str[1:],
             "<" + dtype.str[1:], *(k for k, v in np.sctypeDict.items()
                                    if isinstance(k, str) and v is dtype.type)}
    return {name: dtype for name in names if np.dtype(name) == dtype}


DTYPE_SPELLINGS = {name: d for dtype in UNIT_DTYPES for name, d in _spellings(dtype).items()}
DTYPE_TYPES = {dtype.type: dtype for dtype in UNIT_DTYPES}   # np.float32 -> dtype('float32')


def is_int(value):
    """A real integer: a Python int or a numpy integer, not a bool, a float, an enum member or a
    np.timedelta64 (which numpy counts among its integers)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.timedelta64,
                                                                           enum.Enum))


def is_real(value):
    """A real number: an integer (is_int) or a Python or numpy float."""
    return is_int(value) or isinstance(value, (float, np.floating))


def check_int(api, name, value, lo=None, hi=None):
    """`value` as an int in [lo, hi] (None: unbounded)."""
    if not is_int(value):
        raise InvalidArgumentError(f"{api}: {name} must be an integer, got {value!r}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        limits = (f"outside its valid range {lo} ~ {hi}" if lo is not None and hi is not None
                  else f"below its minimum {lo}" if lo is not None else f"above its maximum {hi}")
        raise InvalidArgumentError(f"{api}: {name} = {value} is {limits}")
    return value


def check_number(api, name, value, positive=False):
    """`value` as a finite float >= 0 (> 0 with `positive`)."""
    number = None
    if is_real(value):
        try:
            number = float(value)
        except OverflowError:
            pass
    if number is None or not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise InvalidArgumentError(f"{api}: {name} must be a finite real number "
                                   f"{'> 0' if positive else '>= 0'}, got {value!r}")
    return number


def check_choice(api, name, value, choices):
    """`value` as one of the strings `choices`."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(f"{api}: {name} must be one of "
                                   f"{', '.join(map(repr, choices))}, got {value!r}")
    return str(value)


def as_dtype(value):
    """The unit dtype `value` names (a np.dtype, a numpy scalar type or a string numpy reads as
    one), else None. Nothing reaches np.dtype(): it reads attributes of arbitrary objects, fails
    on abstract types and warns about some strings."""
    if isinstance(value, np.dtype):
        return value if value in UNIT_DTYPES else None
    if isinstance(value, type):
        return DTYPE_TYPES.get(value)
    if isinstance(value, str):
        return DTYPE_SPELLINGS.get(value)
    return None


def check_dtype(api, name, value, allowed=UNIT_DTYPES):
    """`value` as one of the dtypes `allowed` (by default every dtype the vector unit has)."""
    dtype = as_dtype(value)
    if dtype is None or dtype not in allowed:
        raise InvalidArgumentError(f"{api}: {name} {value!r} is not a numpy dtype {api} takes "
                                   f"(allowed: {', '.join(d.name for d in allowed)})")
    return dtype


def check_sequence(api, name, value):
    """`value` as a list: it must be a list, a tuple or a range (a string or a dict is not)."""
    if not isinstance(value, (list, tuple, range)):
        raise InvalidArgumentError(f"{api}: {name} must be a list or a tuple, got {value!r}")
    return list(value)


def check_shape(api, name, shape, ndim=None):
    """`shape` as a tuple of ints >= 1 (`ndim` of them when given); a single int is a 1-D
    shape when ndim is not given."""
    values = (shape,) if ndim is None and is_int(shape) else shape
    if not isinstance(values, (list, tuple)):
        raise InvalidArgumentError(f"{api}: {name} must be a tuple of integers, got {shape!r}")
    if ndim is not None and len(values) != ndim:
        raise InvalidArgumentError(f"{api}: {name} must be {ndim} integers, got {shape!r}")
    if not values or not all(is_int(v) for v in values):
        raise InvalidArgumentError(f"{api}: {name} must be a non-empty tuple of integers, got "
                                   f"{shape!r}")
    if any(v < 1 for v in values):
        raise InvalidArgumentError(f"{api}: {name} {tuple(int(v) for v in values)} has no "
                                   "elements (every dimension must be at least 1)")
    return tuple(int(v) for v in values)
