"""The whole LayerNorm backward on emulated cores: `emulate_layer_norm_grad` runs LayerNormGrad
on one core (pdX and resForGamma); `emulate_layer_norm_backward` (below) runs LayerNormGrad and
LayerNormGradBeta per tile on many cores over GM. Both read the caller's arrays and never write
them; outputs are new arrays."""
import numpy as np

from .arguments import FLOAT_DTYPES, check_int
from .core import AICore, resolve_mode
from .errors import AlignmentError, CapacityError, InvalidArgumentError, check_flag
from .host import (EmulationResult, OperatorResult, check_threads, in_place_bytes,
                   replay_fresh, run_cores)
from .kernels.backward import (OUTPUT, SLOT_NAMES, WORKSPACE, API, LayerNormBackwardKernel,
                               backward_tiling)
from .observers.gm_check import check_gm
from .products import get_product
from .runtime import schedule
from .kernels.layer_norm_grad import epsilon_value, regbase_tmp_bytes
from .kernels.sample import LayerNormGradSampleKernel, padded
from .kernels.tiling import (GetLayerNormGradMaxMinTmpSize, GetLayerNormGradNDTilingInfo,
                             layer_norm_grad_tmp_bytes)
from .runtime import recording
from .runtime.cache import SETUP_BYTES, Cache, exact, plain_key
from .tensor import gm_bytes

PLANS = Cache("layer-norm-grad tilings")
SETUPS = Cache("layer-norm-grad setups")   # a fast call's checked configuration (_replay_warm)
INPUTS = ("input_dy", "input_x", "input_variance", "input_mean", "input_gamma")


class LayerNormGradResult(EmulationResult):
    """pd_x and res_for_gamma (input dtype and shape), the tiling, the core, its trace (with
    trace=True) and the modelled device cost."""

    def __init__(self, pd_x, res_for_gamma, tiling, core, trace, rows):
        super().__init__(None, None, tiling, core, trace, rows)
        self.pd_x, self.res_for_gamma = pd_x, res_for_gamma
        del self.pd_gamma, self.pd_beta

    def outputs(self):
        return {"pd_x": self.pd_x, "res_for_gamma": self.res_for_gamma}


def check_backward_inputs(api, arrays):
    """dy, x [B, S, H]; variance, mean [B, S]; gamma [H]; one float dtype; rows 32-byte aligned."""
    dy = arrays[0]
    for name, a in zip(INPUTS, arrays):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"{api}: {name} must be a numpy array, got "
                                       f"{type(a).__name__}")
        if a.dtype not in FLOAT_DTYPES or a.dtype != dy.dtype:
            raise InvalidArgumentError(f"{api}: {name} is {a.dtype}; all five inputs must be "
                                       "float16, or all float32")
    if dy.ndim != 3 or 0 in dy.shape:
        raise InvalidArgumentError(f"{api}: input_dy must be a non-empty [B, S, H] array, got "
                                   f"shape {dy.shape}")
    b, s, h = dy.shape
    expected = (dy.shape, dy.shape, (b, s), (b, s), (h,))
    for name, a, shape in zip(INPUTS, arrays, expected):
        if a.shape != shape and not (name in ("input_variance", "input_mean")
                                     and a.shape == (b, s, 1)):
            raise InvalidArgumentError(f"{api}: {name} has shape {a.shape}, expected {shape} "
                                       f"for input_dy {dy.shape}")
    if h * dy.dtype.itemsize % 32:
        raise AlignmentError(
            f"{api}: a row of H = {h} {dy.dtype} elements is {h * dy.dtype.itemsize} bytes; "
            f"LayerNormGrad needs whole 32-byte blocks (H a multiple of "
            f"{32 // dy.dtype.itemsize}): pad H with zeros, as the API's documentation asks")


def _data_bytes(shape, dtype):
    b, s, h = shape
    size = np.dtype(dtype).itemsize
    return 4 * padded(b * s * h * size) + 2 * padded(b * s * size) + padded(h * size)


def _touched(shape, dtype, product, reuse, stack_buffer_size):
    """(tiling, temp bytes the kernel touches) for a temp buffer of stack_buffer_size bytes."""
    size = np.dtype(dtype).itemsize
    tiling = GetLayerNormGradNDTilingInfo(shape, stack_buffer_size, size, reuse,
                                          product=product.name)
    if product.kernel_path == "regbase":
        return tiling, regbase_tmp_bytes(tiling, size, reuse)
    return tiling, layer_norm_grad_tmp_bytes(tiling, size)


def choose_temp_bytes(shape, dtype, product, reuse, stack_buffer_size=None):
    """(temp bytes to allocate, tiling) for emulate_layer_norm_grad. By default the tiling of the
    largest stackBufferSize up to the host's max whose footprint (the host rounds rows per chunk
    up, spec §3.5) fits the UB beside the data, and a buffer of that footprint; an explicit size
    is the tiling's and the buffer's, as a kernel would use it (the kernel may overrun it)."""
    api = "emulate_layer_norm_grad"
    b, s, h = shape
    size = np.dtype(dtype).itemsize
    free = (product.usable_ub - _data_bytes(shape, dtype)) // 32 * 32
    n_blocks = 9 if size == 2 else (4 if reuse else 6)
    if stack_buffer_size is not None:
        requested = stack_buffer_size
        if padded(requested) > max(free, 0):
            raise CapacityError(f"{api}: stack_buffer_size {requested} does not fit: {free} UB "
                                f"bytes are free beside the data tensors on {product.name}")
        return requested, _touched(shape, dtype, product, reuse, requested)[0]
    largest, _ = GetLayerNormGradMaxMinTmpSize(shape, size, reuse, product=product.name)
    if product.kernel_path == "regbase":
        candidates = [max(largest, 32)]   # an empty tensor cannot be allocated
    else:  # whole rows, from the most that fit down to one
        row_bytes = 4 * n_blocks * h
        rows = min(b * s, max(free, 0) // row_bytes)
        candidates = dict.fromkeys(min(row_bytes * r, largest) for r in range(rows, 0, -1))
    for candidate in candidates:
        tiling, touched = _touched(shape, dtype, product, reuse, candidate)
        if max(touched, padded(candidate)) <= free:   # allocate what the kernel touches
            return max(touched, candidate), tiling
    raise CapacityError(
        f"{api}: [{b}, {s}, {h}] {np.dtype(dtype).name} does not fit one {product.name} core: "
        f"the data tensors take {_data_bytes(shape, dtype)} of {product.usable_ub} UB bytes and "
        f"LayerNormGrad's temp space for even one chunk (CANN rounds its rows up to "
        f"{8 if size == 4 else 16}) does not fit beside them. Shapes larger than one UB are for "
        "lngb.emulate_layer_norm_backward(...), the multi-core operator over GM")


def emulate_layer_norm_grad(input_dy, input_x, input_variance, input_mean, input_gamma, *,
                            epsilon=1e-5, product="atlas-a2", is_reuse_source=False,
                            stack_buffer_size=None, mode=None, trace=False, sat_mode=None,
                            div_sqrt=None):
    """Run LayerNormGrad on a fresh emulated core (its sample kernel: copy in, the API, copy
    out); returns a LayerNormGradResult with `.pd_x`, `.res_for_gamma`, `.tiling`, `.cost`,
    `.trace` (trace=True, or observed/checked mode) and `.core`.

    Shapes: dy, x [B, S, H]; variance, mean [B, S] (or [B, S, 1]); gamma [H]; all half or all
    float. `stack_buffer_size` (bytes) defaults to the largest buffer whose footprint fits;
    `mode` None: $LNGB_MODE, else "fast"; `div_sqrt`: as AICore's (None: the product's).
    resForGamma feeds `lngb.emulate(input_dy, res_for_gamma, ...)` for pdGamma and pdBeta."""
    api = "emulate_layer_norm_grad"
    arrays = (input_dy, input_x, input_variance, input_mean, input_gamma)
    try:   # once per call (LNGB_MODE may change meanwhile); an error comes after the arrays'
        resolved, mode_error = resolve_mode(api, mode), None
    except Exception as error:   # noqa: BLE001 - raised below, where the checks reach it
        resolved, mode_error = None, error
    warm = None
    if trace is False and resolved == "fast":   # a configuration run before: _replay_warm
        warm = _setup_key(arrays, epsilon, product, is_reuse_source, stack_buffer_size, sat_mode,
                          div_sqrt)
        result = None if warm is None else _replay_warm(arrays, warm)
        if result is not None:
            return result
    check_backward_inputs(api, arrays)
    reuse = check_flag(api, "is_reuse_source", is_reuse_source)
    trace = check_flag(api, "trace", trace)
    if stack_buffer_size is not None:
        stack_buffer_size = check_int(api, "stack_buffer_size (bytes)", stack_buffer_size, lo=0)
    eps = epsilon_value(epsilon, input_dy.dtype, api)
    if mode_error is not None:
        raise mode_error
    mode = resolved
    core = AICore(get_product(product, api), "observed" if trace and mode == "fast" else mode,
                  sat_mode=sat_mode, div_sqrt=div_sqrt)
    dtype, shape = input_dy.dtype, input_dy.shape
    key = (shape, dtype.str, core.product.name, stack_buffer_size, reuse)
    plan = PLANS.get(key)
    if plan is None:
        plan = PLANS.put(key, choose_temp_bytes(shape, dtype, core.product, reuse,
                                                stack_buffer_size), SETUP_BYTES)
    tmp_bytes, tiling = plan
    at = LayerNormGradSampleKernel.layout(shape, dtype)
    params, outputs = _slots(arrays, at)
    gms = (gm_bytes(input_dy, api), gm_bytes(input_x, api), params, outputs)
    kernel = LayerNormGradSampleKernel(core, shape, dtype, tmp_bytes, tiling, gms, eps, reuse)
    kernel_key = ("emulate_layer_norm_grad", shape, dtype.str, tmp_bytes, reuse,
                  int(eps.view(np.uint32)))
    program_key = recording.program_key(core, kernel_key)
    recording.run_program(core, program_key, kernel, gms)
    if core.sanitizer is not None:
        core.sanitizer.finish(core.flags)
    if warm is not None and core.last_program is not None:
        SETUPS.put(warm, (core.config, tiling, program_key, at), SETUP_BYTES)
    rows = (core.last_program.rows if core.last_program is not None
            else np.array([record.row for record in core.trace]))
    return LayerNormGradResult(*_results(outputs, shape, dtype, at), tiling, core,
                               core.trace if core.mode != "fast" else None, rows)


def _slots(arrays, at):
    """The sample kernel's GM slots 2 and 3 (`at`: its layout): variance, mean and gamma packed
    (a copy), and the outputs pdX | resForGamma (new)."""
    params = np.zeros(at["params"], np.uint8)
    for name, a in zip(("inputVariance", "inputMean", "inputGamma"), arrays[2:]):
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        params[at[name]:at[name] + raw.size] = raw
    return params, np.empty(at["outputs"], np.uint8)


def _results(outputs, shape, dtype, at):
    """(pd_x, res_for_gamma): views of the output slot."""
    cut = at["resForGamma"]
    return (outputs[:cut].view(dtype).reshape(shape), outputs[cut:].view(dtype).reshape(shape))


EPSILON_TYPES = (int, float, np.float16, np.float32, np.float64)


def _setup_key(arrays, epsilon, *plain):
    """The SETUPS key of a fast emulate_layer_norm_grad call: its plain arguments, epsilon's
    exact value and the arrays' dtype and shapes; None for arguments of other types (the call
    then runs the general path, which checks them: nothing here runs their code)."""
    key = plain_key(*plain)
    if (key is None or type(epsilon) not in EPSILON_TYPES
            or any(type(a) is not np.ndarray for a in arrays)):
        return None
    return key + (exact(epsilon), arrays[0].dtype, *(a.shape for a in arrays))


def _replay_warm(arrays, key):
    """emulate_layer_norm_grad() once a call with the same key has replayed its program: the
    arrays are of the key's dtype and shapes (so they passed check_backward_inputs); or None."""
    setup = SETUPS.get(key)
    dtype = arrays[0].dtype
    if setup is None or any(a.dtype != dtype for a in arrays):
        return None
    data = in_place_bytes(*arrays[:2])
    if data is None:
        return None
    config, tiling, program_key, at = setup   # the layout too: a warm call works out nothing
    params, outputs = _slots(arrays, at)
    replayed = replay_fresh(config, program_key, (*data, params, outputs))
    if replayed is None:
        return None
    make_core, program = replayed
    return LayerNormGradResult(*_results(outputs, arrays[0].shape, dtype, at), tiling, make_core,
                               None, program.view)


# --- the multi-core operator -------------------------------------------------------------------

class BackwardResult(OperatorResult):
    """pd_x ([B, S, H]), pd_gamma and pd_beta ([H]) in the input dtype, the BackwardTiling, the
    cores, their traces (observed and checked modes) and the modelled cost (`.cost`)."""

    def __init__(self, pd_x, pd_gamma, pd_beta, tiling, cores, plan, trace):
        super().__init__(pd_gamma, pd_beta, tiling, cores, plan, trace)
        self.pd_x = pd_x

    def outputs(self):
        return {"pd_x": self.pd_x, "pd_gamma": self.pd_gamma, "pd_beta": self.pd_beta}


class PreparedBackward:
    """A backward run set up: tiling, fresh cores, their GM buffers by slot, and `kernel(c,
    runner)` (core c's kernel, live unless another runner is given)."""

    def __init__(self, tiling, cores, gms, outputs, shape):
        self.tiling, self.cores, self.gms, self.outputs, self.shape = (tiling, cores, gms,
                                                                       outputs, shape)

    def kernel(self, c, runner=None):
        runner = runner or schedule.Live(self.cores[c], self.gms[c])
        return LayerNormBackwardKernel(self.cores[c], self.tiling, c, self.gms[c], runner)

    def results(self):
        """(pd_x, pd_gamma, pd_beta): views of the output GM (filled once every core is done)."""
        dtype, h = np.dtype(self.tiling.dtype), self.tiling.h
        at = self.tiling.layout()
        results = self.outputs[:at["pd_x"]].view(dtype)
        return (self.outputs[at["pd_x"]:].view(dtype).reshape(self.shape), results[:h],
                results[h:2 * h])


def prepare_backward(arrays, epsilon, product, block_dim, tile_rows, mode, sat_mode, api=API,
                     div_sqrt=None):
    """Checks the backward's inputs and sets up its run (PreparedBackward) in `mode`."""
    check_backward_inputs(api, arrays)
    dtype, (b, s, h) = arrays[0].dtype, arrays[0].shape
    eps = epsilon_value(epsilon, dtype, api)
    product = get_product(product, api)
    for name, value in (("block_dim", block_dim), ("tile_rows", tile_rows)):
        if value is not None:
            check_int(api, name, value)
    tiling = backward_tiling((b, s, h), dtype, product, block_dim, tile_rows, float(eps))
    at = tiling.layout()
    params = np.zeros(at["params"], np.uint8)
    for name, a in zip(("variance", "mean", "gamma"), arrays[2:]):
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        params[at[name]:at[name] + raw.size] = raw
    outputs = np.empty(at["outputs"], np.uint8)
    dy, x = gm_bytes(arrays[0], api), gm_bytes(arrays[1], api)
    row_bytes = h * dtype.itemsize
    gms = [(dy[a * row_bytes:(a + n) * row_bytes], x[a * row_bytes:(a + n) * row_bytes], params,
            outputs) for a, n in tiling.core_rows]
    ubs = schedule.core_ubs(tiling.block_dim, AICore.ub_bytes(product))
    cores = [AICore(product, mode, sat_mode=sat_mode, div_sqrt=div_sqrt, _ub=ub) for ub in ubs]
    return PreparedBackward(tiling, cores, gms, outputs, (b, s, h))


def emulate_layer_norm_backward(input_dy, input_x, input_variance, input_mean, input_gamma, *,
                                epsilon=1e-5, product="atlas-a2", block_dim=None,
                                tile_rows=None, threads=None, mode=None, sat_mode=None,
                                progress=False, div_sqrt=None):
    """The whole LayerNorm backward on `block_dim` emulated cores over GM
    (lngb.kernels.backward): per tile of whole rows, LayerNormGrad then LayerNormGradBeta, and
    the cross-core reduction of pdGamma / pdBeta in the order of `emulate_operator`. Returns a
    BackwardResult: `.pd_x`, `.pd_gamma`, `.pd_beta`, `.tiling`, `.cores`, `.trace`, `.cost`.
    Results do not depend on `threads` (default: the CPU count). `div_sqrt`: as AICore's (None:
    the product's). `progress`: a progress bar on
    stderr while an observed run, or a configuration's first checked run, goes core by core.
    `lngb.debug.BackwardDebugger` steps through the same run."""
    api = API
    mode = resolve_mode(api, mode)
    threads = check_threads(api, threads)
    progress = check_flag(api, "progress", progress)
    run = prepare_backward((input_dy, input_x, input_variance, input_mean, input_gamma), epsilon,
                           product, block_dim, tile_rows, mode, sat_mode, div_sqrt=div_sqrt)
    tiling = run.tiling
    plan = run_cores(api, ("LayerNorm backward", tiling), run, threads, progress,
                     lambda cores: check_gm(cores, run.gms, (WORKSPACE, OUTPUT), SLOT_NAMES,
                                            inputs=[(WORKSPACE, 0, tiling.layout()["workspace"])]))
    return BackwardResult(*run.results(), tiling, run.cores, plan,
                          [core.trace for core in run.cores] if mode != "fast" else None)
