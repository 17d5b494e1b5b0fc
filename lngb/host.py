"""Host level: `emulate` runs the complete sample kernel on a fresh core.

GM -> UB DataCopy of inputDy and resForGamma, LayerNormGradBeta, UB -> GM DataCopy of the two
outputs, with the MTE2->V and V->MTE3 events a TQue-based kernel emits between them.
"""
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .core import AICore
from .errors import CapacityError, InvalidArgumentError, TilingError
from .operator import LayerNormGradBeta
from .products import get_product
from .tensor import GlobalTensor
from .tiling import (GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo,
                     LayerNormGradBetaTiling)
from .vector_ops import DataCopy, HardEvent, SetFlag, WaitFlag


@dataclass
class EmulationResult:
    pd_gamma: np.ndarray
    pd_beta: np.ndarray
    tiling: LayerNormGradBetaTiling
    core: AICore
    trace: Optional[list] = None
    cost: Any = None  # modelled device time: not built yet


def _round32(nbytes):
    return -(-nbytes // 32) * 32


def _check_inputs(input_dy, res_for_gamma):
    arrays = []
    for name, a in (("input_dy", input_dy), ("res_for_gamma", res_for_gamma)):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"emulate: {name} must be a numpy array")
        if a.dtype not in (np.float16, np.float32):
            raise InvalidArgumentError(f"emulate: {name} dtype {a.dtype} must be float16 or float32")
        if a.ndim != 3 or 0 in a.shape:
            raise InvalidArgumentError(f"emulate: {name} must be a non-empty [B, S, H] array, "
                                       f"got shape {a.shape}")
        arrays.append(a)
    if input_dy.shape != res_for_gamma.shape or input_dy.dtype != res_for_gamma.dtype:
        raise InvalidArgumentError(
            f"emulate: input_dy {input_dy.shape} {input_dy.dtype} and res_for_gamma "
            f"{res_for_gamma.shape} {res_for_gamma.dtype} must match")


def choose_stack_buffer_size(shape, dtype, product, stack_buffer_size=None, reserved_bytes=None):
    """The temp-buffer bytes `emulate` uses: the largest legal size that fits beside the tensors,
    capped at the tiling's max; explicit sizes are checked against min and the free UB."""
    product = get_product(product)
    itemsize = np.dtype(dtype).itemsize
    b, s, h = shape
    tensors = 2 * _round32(b * s * h * itemsize) + 2 * _round32(h * itemsize)
    capacity = product.ub_size - (product.reserved_bytes if reserved_bytes is None
                                  else reserved_bytes)
    free = (capacity - tensors) // 32 * 32
    max_size, min_size = GetLayerNormGradBetaMaxMinTmpSize(shape, itemsize, False)
    if free < min_size:
        raise CapacityError(
            f"emulate: [{b}, {s}, {h}] {np.dtype(dtype).name} needs {tensors} bytes of UB for "
            f"the tensors plus at least {min_size} of temp buffer = {tensors + min_size} bytes, "
            f"but {product.name} has {capacity} allocatable UB bytes; shapes larger than one UB "
            f"are for lngb.emulate_operator (the multi-core operator over GM)")
    if stack_buffer_size is None:
        return min(max_size, free)
    size = int(stack_buffer_size)
    if size < min_size:
        raise TilingError(f"emulate: stack_buffer_size {size} is below the minimum {min_size} "
                          f"bytes (GetLayerNormGradBetaMaxMinTmpSize) for [{b}, {s}, {h}]")
    if _round32(size) > free:
        raise CapacityError(f"emulate: stack_buffer_size {size} does not fit: {free} UB bytes "
                            f"are free beside the tensors on {product.name}")
    return size


def emulate(input_dy, res_for_gamma, *, product="atlas-a2", is_reuse_source=False,
            reuse_buffer="input_dy", stack_buffer_size=None, mode="fast", trace=False,
            sat_mode=None):
    """Run the LayerNormGradBeta sample kernel on a fresh emulated core; see EmulationResult.

    The caller's arrays are copied into the emulator's own GM first and never modified.
    """
    _check_inputs(input_dy, res_for_gamma)
    dtype = input_dy.dtype
    shape = tuple(int(d) for d in input_dy.shape)
    b, s, h = shape
    core = AICore(product, "observed" if trace and mode == "fast" else mode, sat_mode=sat_mode)
    tmp_bytes = choose_stack_buffer_size(shape, dtype, core.product, stack_buffer_size)
    tiling = GetLayerNormGradBetaNDTilingInfo(shape, tmp_bytes, dtype.itemsize, is_reuse_source)

    n_in, n_out = _round32(b * s * h * dtype.itemsize), _round32(h * dtype.itemsize)
    arena = np.zeros(2 * n_in + 2 * n_out, dtype=np.uint8)
    gm_dy = GlobalTensor.in_arena(arena, 0, dtype, b * s * h)
    gm_rfg = GlobalTensor.in_arena(arena, n_in, dtype, b * s * h)
    gm_g = GlobalTensor.in_arena(arena, 2 * n_in, dtype, h)
    gm_b = GlobalTensor.in_arena(arena, 2 * n_in + n_out, dtype, h)
    gm_dy.array[:] = input_dy.reshape(-1)
    gm_rfg.array[:] = res_for_gamma.reshape(-1)

    def kernel():
        dy = core.alloc(shape, dtype, "VECIN")
        rfg = core.alloc(shape, dtype, "VECIN")
        out_g = core.alloc(h, dtype, "VECOUT")
        out_b = core.alloc(h, dtype, "VECOUT")
        tmp = core.alloc(tmp_bytes, np.uint8, "VECCALC")
        with core:
            DataCopy(dy, gm_dy, b * s * h)
            DataCopy(rfg, gm_rfg, b * s * h)
            SetFlag(HardEvent.MTE2_V, 0)
            WaitFlag(HardEvent.MTE2_V, 0)
            LayerNormGradBeta(out_g, out_b, rfg, dy, tmp, tiling, is_reuse_source=is_reuse_source,
                              reuse_buffer=reuse_buffer)
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            DataCopy(gm_g, out_g, h)
            DataCopy(gm_b, out_b, h)

    key = ("emulate", shape, dtype.str, tmp_bytes, bool(is_reuse_source), reuse_buffer)
    core.run_recorded(key, kernel, gm=arena)
    return EmulationResult(gm_g.array.copy(), gm_b.array.copy(), tiling, core,
                           core.trace if trace else None)


def emulate_operator(input_dy, res_for_gamma, *, product="atlas-a2", block_dim=None, threads=None,
                     mode="fast"):
    """The multi-core operator over GM for shapes larger than one UB: not built yet."""
    raise NotImplementedError("lngb.emulate_operator (the multi-core operator over GM) is not "
                              "built yet; lngb.emulate handles inputs that fit one UB")
