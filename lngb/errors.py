"""One error hierarchy for everything lngb raises."""


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
