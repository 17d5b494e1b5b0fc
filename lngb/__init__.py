"""lngb: a bit-exact CPU emulator of the Ascend AI Core vector unit running LayerNormGradBeta and
LayerNormGrad."""
import sys

from .errors import (LngbError, AlignmentError, OutOfBoundsError, CapacityError, TilingError,
                     UnsupportedProductError, InvalidArgumentError, UninitializedReadError,
                     HazardError, LngbWarning)
from .core import AICore
from . import observers
from .tensor import GlobalTensor, LocalTensor, current_core
from .products import PRODUCTS
from .kernels.tiling import (LayerNormGradBetaTiling, GetLayerNormGradBetaMaxMinTmpSize,
                             GetLayerNormGradBetaNDTilingInfo, LayerNormGradTiling,
                             GetLayerNormGradMaxMinTmpSize, GetLayerNormGradNDTilingInfo)
from .kernels.layer_norm_tiling import (LayerNormTiling, LayerNormSeparateTiling,
                                        GetLayerNormMaxMinTmpSize, GetLayerNormNDTilingInfo,
                                        GetLayerNormNDTillingInfo)
from . import vector_ops
from .kernels.layer_norm_grad_beta import LayerNormGradBeta
from .kernels.layer_norm_grad import LayerNormGrad, LayerNormGradShapeInfo
from .kernels.layer_norm import LayerNorm
from .kernels.operator_tiling import OperatorTiling, operator_tiling
from .host import EmulationResult, OperatorResult, emulate, emulate_operator
from .backward import (BackwardResult, LayerNormGradResult, emulate_layer_norm_backward,
                       emulate_layer_norm_grad)
from .forward import (ForwardResult, LayerNormResult, emulate_layer_norm,
                      emulate_layer_norm_forward)
from .observers.cost import CostModel
from .runtime.cache import cache_info, clear_caches, set_cache_limit
from .simulate import GetBlockIdx, GetBlockNum, SimulationResult, simulate_kernel
from .kernels.pipe import TBuf, TPipe, TQue
from .sweeps import sweep, sweep_operator
from .observers import cost, debug, sanitizer, trace
from .kernels import layer_norm_grad_beta as operator, multicore, pipe, tiling

# The modules' earlier names (lngb.trace, lngb.cost, lngb.debug, ...) keep working.
for _name, _module in (("trace", trace), ("cost", cost), ("debug", debug),
                       ("sanitizer", sanitizer), ("tiling", tiling), ("pipe", pipe),
                       ("operator", operator), ("multicore", multicore)):
    sys.modules[f"{__name__}.{_name}"] = _module
