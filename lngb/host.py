"""Host level: `emulate` runs the complete sample kernel on a fresh core.

GM -> UB DataCopy of inputDy and resForGamma, LayerNormGradBeta, UB -> GM DataCopy of the two
outputs, with the MTE2->V and V->MTE3 events a TQue-based kernel emits between them.
"""
import copy
from dataclasses import dataclass

import numpy as np

from .core import AICore
from .cost import CostModel
from .errors import AlignmentError, CapacityError, InvalidArgumentError, TilingError
from .operator import LayerNormGradBeta
from .products import PRODUCTS, get_product
from .tensor import GlobalTensor
from .tiling import (GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo,
                     LayerNormGradBetaTiling)
from .vector_ops import DataCopy, HardEvent, SetFlag, WaitFlag


class EmulationResult:
    """pd_gamma, pd_beta (input dtype, shape (H,)), the tiling used, the core, its trace (with
    trace=True), the executed instruction stream and its modelled device cost."""

    def __init__(self, pd_gamma, pd_beta, tiling, core, trace, rows):
        self.pd_gamma, self.pd_beta, self.core, self.trace = pd_gamma, pd_beta, core, trace
        self.rows = rows  # every instruction and event, in issue order
        self._tiling = tiling
        self._tiling_copy = None
        self._cost = None

    @property
    def cost(self):
        """Modelled device time (`.cycles`, `.microseconds`, `.timeline`) with the default
        constants; computed on first access."""
        if self._cost is None:
            self._cost = self.estimate_cost()
        return self._cost

    def estimate_cost(self, **overrides):
        """The modelled device time with some cost constants overridden (calibration)."""
        return CostModel(self.core.product, **overrides).estimate(self.rows)

    @property
    def tiling(self):
        """A copy of the tiling (the cached original is shared between calls)."""
        if self._tiling_copy is None:
            self._tiling_copy = copy.copy(self._tiling)
        return self._tiling_copy

    def __repr__(self):
        return f"EmulationResult(pd_gamma={self.pd_gamma!r}, pd_beta={self.pd_beta!r})"


def _round32(nbytes):
    return -(-nbytes // 32) * 32


def _check_inputs(input_dy, res_for_gamma, api="emulate"):
    for name, a in (("input_dy", input_dy), ("res_for_gamma", res_for_gamma)):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"{api}: {name} must be a numpy array")
        if a.dtype not in (np.float16, np.float32):
            raise InvalidArgumentError(f"{api}: {name} dtype {a.dtype} must be float16 or float32")
        if a.ndim != 3 or 0 in a.shape:
            raise InvalidArgumentError(f"{api}: {name} must be a non-empty [B, S, H] array, "
                                       f"got shape {a.shape}")
    if input_dy.shape != res_for_gamma.shape or input_dy.dtype != res_for_gamma.dtype:
        raise InvalidArgumentError(
            f"{api}: input_dy {input_dy.shape} {input_dy.dtype} and res_for_gamma "
            f"{res_for_gamma.shape} {res_for_gamma.dtype} must match")
    h, itemsize = input_dy.shape[2], input_dy.dtype.itemsize
    if h * itemsize % 32:
        raise AlignmentError(
            f"{api}: a row of H = {h} {input_dy.dtype} elements is {h * itemsize} bytes; "
            f"LayerNormGradBeta needs whole 32-byte blocks (H a multiple of {32 // itemsize}): "
            "pad H with zeros, as the API's documentation asks")


def free_temp_bytes(shape, dtype, product):
    """(UB bytes left for the temp buffer beside emulate's four tensors, bytes of the tensors)."""
    b, s, h = shape
    itemsize = np.dtype(dtype).itemsize
    tensors = 2 * _round32(b * s * h * itemsize) + 2 * _round32(h * itemsize)
    return (get_product(product).usable_ub - tensors) // 32 * 32, tensors


def choose_stack_buffer_size(shape, dtype, product, stack_buffer_size=None):
    """The temp-buffer bytes `emulate` uses: the largest legal size that fits beside the tensors,
    capped at the tiling's max; explicit sizes are checked against min and the free UB."""
    product = get_product(product)
    b, s, h = shape
    free, tensors = free_temp_bytes(shape, dtype, product)
    capacity = product.usable_ub
    max_size, min_size = GetLayerNormGradBetaMaxMinTmpSize(shape, np.dtype(dtype).itemsize, False)
    if free < min_size:
        bigger = [p.name for p in PRODUCTS.values() if p.usable_ub > capacity
                  and p.usable_ub - tensors >= min_size]
        raise CapacityError(
            f"emulate: [{b}, {s}, {h}] {np.dtype(dtype).name} needs {tensors} bytes of UB for "
            f"the tensors plus at least {min_size} of temp buffer = {tensors + min_size} bytes, "
            f"but {product.name} has {capacity} allocatable UB bytes. "
            + (f"It fits on {', '.join(bigger)}. " if bigger else "")
            + "Shapes larger than one UB are for lngb.emulate_operator(input_dy, res_for_gamma, "
            "product=..., block_dim=None, threads=None, mode='fast'), the multi-core operator "
            "over GM")
    if stack_buffer_size is None:
        return min(max_size, free)
    if isinstance(stack_buffer_size, bool) or not isinstance(stack_buffer_size, (int, np.integer)):
        raise InvalidArgumentError(f"emulate: stack_buffer_size must be an integer number of "
                                   f"bytes, got {stack_buffer_size!r}")
    size = int(stack_buffer_size)
    if size < min_size:
        raise TilingError(f"emulate: stack_buffer_size {size} is below the minimum {min_size} "
                          f"bytes (GetLayerNormGradBetaMaxMinTmpSize) for [{b}, {s}, {h}]")
    if _round32(size) > free:
        raise CapacityError(f"emulate: stack_buffer_size {size} does not fit: {free} UB bytes "
                            f"are free beside the tensors on {product.name}")
    return size


@dataclass(frozen=True)
class _Plan:
    """Everything about one emulate() configuration that does not depend on the data."""
    tmp_bytes: int
    tiling: LayerNormGradBetaTiling


_PLANS = {}


def _plan(shape, dtype, product, stack_buffer_size, is_reuse_source):
    key = (shape, dtype.str, product.name, stack_buffer_size, bool(is_reuse_source))
    plan = _PLANS.get(key)
    if plan is None:
        tmp_bytes = choose_stack_buffer_size(shape, dtype, product, stack_buffer_size)
        tiling = GetLayerNormGradBetaNDTilingInfo(shape, tmp_bytes, dtype.itemsize,
                                                  is_reuse_source)
        plan = _Plan(tmp_bytes, tiling)
        _PLANS[key] = plan
    return plan


class SampleKernel:
    """The sample kernel around the API, on a fresh core: DataCopy GM -> UB of inputDy and
    resForGamma, LayerNormGradBeta, DataCopy UB -> GM of the outputs, with the MTE2 -> V and
    V -> MTE3 events a TQue-based kernel emits between them. Calling it runs the body; `tensors`
    names its LocalTensors once it has run (or been recorded)."""

    def __init__(self, input_dy, res_for_gamma, *, product="atlas-a2", is_reuse_source=False,
                 reuse_buffer="input_dy", stack_buffer_size=None, mode="fast", sat_mode=None):
        _check_inputs(input_dy, res_for_gamma)
        self.dtype, self.shape = input_dy.dtype, input_dy.shape
        self.core = AICore(product, mode, sat_mode=sat_mode)
        self.plan = _plan(self.shape, self.dtype, self.core.product, stack_buffer_size,
                          is_reuse_source)
        self.reuse = (bool(is_reuse_source), reuse_buffer)
        # GM: the inputs are only ever read (no instruction writes them), so they are used in
        # place; the outputs are fresh arrays the UB -> GM copies fill.
        h = self.shape[2]
        self.pd_gamma, self.pd_beta = np.empty(h, self.dtype), np.empty(h, self.dtype)
        self.gms = (_gm_bytes(input_dy), _gm_bytes(res_for_gamma), self.pd_gamma.view(np.uint8),
                    self.pd_beta.view(np.uint8))
        self.key = ("emulate", self.shape, self.dtype.str, self.plan.tmp_bytes, *self.reuse)
        self.tensors = {}

    def __call__(self):
        core, dtype, (b, s, h) = self.core, self.dtype, self.shape
        gm_dy, gm_rfg, gm_g, gm_b = (GlobalTensor.in_arena(g, 0, dtype, g.size // dtype.itemsize)
                                     for g in self.gms)
        dy = core.alloc(self.shape, dtype, "VECIN")
        rfg = core.alloc(self.shape, dtype, "VECIN")
        out_g = core.alloc(h, dtype, "VECOUT")
        out_b = core.alloc(h, dtype, "VECOUT")
        tmp = core.alloc(self.plan.tmp_bytes, np.uint8, "VECCALC")
        self.tensors.update(inputDy=dy, resForGamma=rfg, outputPdGamma=out_g, outputPdBeta=out_b,
                            sharedTmpBuffer=tmp)
        with core:
            DataCopy(dy, gm_dy, b * s * h)
            DataCopy(rfg, gm_rfg, b * s * h)
            SetFlag(HardEvent.MTE2_V, 0)
            WaitFlag(HardEvent.MTE2_V, 0)
            LayerNormGradBeta(out_g, out_b, rfg, dy, tmp, self.plan.tiling,
                              is_reuse_source=self.reuse[0], reuse_buffer=self.reuse[1])
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            DataCopy(gm_g, out_g, h)
            DataCopy(gm_b, out_b, h)


def emulate(input_dy, res_for_gamma, *, product="atlas-a2", is_reuse_source=False,
            reuse_buffer="input_dy", stack_buffer_size=None, mode="fast", trace=False,
            sat_mode=None):
    """Run the LayerNormGradBeta sample kernel on a fresh emulated core; see EmulationResult.

    The caller's arrays are never modified: the kernel only reads them (as GM), and outputs go to
    new arrays.
    """
    kernel = SampleKernel(input_dy, res_for_gamma, product=product,
                          is_reuse_source=is_reuse_source, reuse_buffer=reuse_buffer,
                          stack_buffer_size=stack_buffer_size,
                          mode="observed" if trace and mode == "fast" else mode, sat_mode=sat_mode)
    core = kernel.core
    core.run_recorded(kernel.key, kernel, kernel.gms)
    if core.sanitizer is not None:
        core.sanitizer.finish(core.flags)
    rows = (core.last_program.rows if core.last_program is not None  # replayed
            else np.array([record.row for record in core.trace]))
    return EmulationResult(kernel.pd_gamma, kernel.pd_beta, kernel.plan.tiling, core,
                           core.trace if trace else None, rows)


def _gm_bytes(array):
    """The array's bytes as a flat uint8 view (a private copy when it cannot be viewed so)."""
    if not (array.flags.c_contiguous and array.flags.writeable):
        array = np.ascontiguousarray(array).copy()
    return array.reshape(-1).view(np.uint8)
