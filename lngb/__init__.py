"""lngb: a bit-exact CPU emulator of the Ascend AI Core vector unit running LayerNormGradBeta."""
from .errors import (LngbError, AlignmentError, OutOfBoundsError, CapacityError, TilingError,
                     UnsupportedProductError, InvalidArgumentError, UninitializedReadError,
                     HazardError, LngbWarning)
from .core import AICore
from .tensor import GlobalTensor, LocalTensor
from .products import PRODUCTS
from .tiling import (LayerNormGradBetaTiling, GetLayerNormGradBetaMaxMinTmpSize,
                     GetLayerNormGradBetaNDTilingInfo)
from . import vector_ops
from .operator import LayerNormGradBeta
from .host import EmulationResult, emulate
from .multicore import OperatorResult, emulate_operator, operator_tiling
from .cost import CostModel
from .sweeps import sweep
