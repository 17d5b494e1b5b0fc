"""lngb: a bit-exact CPU emulator of the Ascend AI Core vector unit running LayerNormGradBeta."""
from .errors import (LngbError, AlignmentError, OutOfBoundsError, CapacityError, TilingError,
                     UnsupportedProductError, InvalidArgumentError, UninitializedReadError,
                     HazardError, LngbWarning)
