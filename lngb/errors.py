"""One error hierarchy for everything lngb raises, and its one way to warn."""
import os
import sys
import warnings

import numpy as np


class LngbError(Exception):
    """Base of every error lngb raises."""


class AlignmentError(LngbError):
    """An address or length is not aligned as the instruction or API requires."""


class OutOfBoundsError(LngbError):
    """An operand's footprint leaves its LocalTensor, the UB or its GM array."""


class CapacityError(LngbError):
    """The unified buffer (or a queue) has no room for the request."""


class TilingError(LngbError):
    """A tiling request that CANN's host code would only log as an error."""


class UnsupportedProductError(LngbError):
    """The product does not support the API, or the name is unknown."""


class InvalidArgumentError(LngbError, ValueError):
    """Any other bad argument: dtype, shape, aliasing, range."""


class UninitializedReadError(LngbError):
    """The sanitizer saw an instruction read UB bytes nothing has written."""


class HazardError(LngbError):
    """The sanitizer saw two vector instructions race without a PipeBarrier."""


class LngbWarning(UserWarning):
    """Something the caller asked for is ignored (e.g. isReuseSource on half)."""


_LNGB_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message, category=LngbWarning):
    """warnings.warn, attributed to the first caller outside lngb (the user's line)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_LNGB_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def name_core(err, c, count, api=None):
    """Tell which of `count` cores raised `err` (`err.block_idx`, and a note on Python 3.11+),
    keeping its type."""
    try:
        err.block_idx = c
    except AttributeError:   # an exception type without a __dict__
        return
    if hasattr(err, "add_note"):
        err.add_note(f"(on core {c} of {count}{', ' + api if api else ''})")


def check_flag(api, name, value, optional=False):
    """value as a bool, if it is one (numpy's too); 1 and 0 are not flags. `optional`: None is
    allowed too, and returned as it is."""
    if optional and value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"{api}: {name} must be {'None, ' if optional else ''}True or "
                                   f"False, got {value!r}")
    return bool(value)
