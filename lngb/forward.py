"""The LayerNorm forward on emulated cores: `emulate_layer_norm` runs CANN's LayerNorm ([B, S, H]
form) on one core, between DataCopys of its inputs and outputs (spec layernorm.md §1.6);
`emulate_layer_norm_forward` runs it per tile on many cores over GM (kernels.layer_norm_forward).
Both read the caller's arrays and never write them; outputs are new arrays."""
import copy

import numpy as np

from .arguments import FLOAT_DTYPES, check_int
from .core import AICore, resolve_mode
from .errors import AlignmentError, CapacityError, InvalidArgumentError, TilingError, check_flag
from .host import EmulationResult, OperatorResult, check_threads, run_cores
from .kernels import layer_norm_forward as multi
from .observers.gm_check import check_gm
from .runtime import schedule
from .kernels.layer_norm import LayerNorm, write_tail_lengths
from .kernels.layer_norm_grad import epsilon_value
from .kernels.layer_norm_tiling import GetLayerNormMaxMinTmpSize, GetLayerNormNDTilingInfo
from .kernels.pipe import TPipe
from .kernels.sample import padded
from .products import get_product
from .runtime import recording
from .tensor import GlobalTensor, gm_bytes
from .vector_ops import PIPE_V, DataCopy, Duplicate, HardEvent, PipeBarrier, SetFlag, WaitFlag

API = "emulate_layer_norm"
INPUTS = ("x", "gamma", "beta")


class LayerNormResult(EmulationResult):
    """output [B, S, H], mean and variance [B, S] (the input dtype), the tiling (a
    LayerNormTiling, as the kernel left it), the core, its trace and the modelled cost."""

    def __init__(self, output, mean, variance, tiling, core, trace, rows):
        super().__init__(None, None, tiling, core, trace, rows)
        self.output, self.mean, self.variance = output, mean, variance
        del self.pd_gamma, self.pd_beta

    def outputs(self):
        return {"output": self.output, "mean": self.mean, "variance": self.variance}


def check_forward_inputs(api, x, gamma, beta):
    """x [B, S, H]; gamma, beta [H]; one float dtype; rows of whole 32-byte blocks."""
    for name, a in zip(INPUTS, (x, gamma, beta)):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"{api}: {name} must be a numpy array, got "
                                       f"{type(a).__name__}")
        if a.dtype not in FLOAT_DTYPES or a.dtype != x.dtype:
            raise InvalidArgumentError(f"{api}: {name} is {a.dtype}; x, gamma and beta must be "
                                       "all float16 or all float32")
    if x.ndim != 3 or 0 in x.shape:
        raise InvalidArgumentError(f"{api}: x must be a non-empty [B, S, H] array, got shape "
                                   f"{x.shape}")
    h = x.shape[2]
    for name, a in (("gamma", gamma), ("beta", beta)):
        if a.shape != (h,):
            raise InvalidArgumentError(f"{api}: {name} has shape {a.shape}, expected ({h},) for "
                                       f"x {x.shape}")
    if h * x.dtype.itemsize % 32:
        raise AlignmentError(
            f"{api}: a row of H = {h} {x.dtype} elements is {h * x.dtype.itemsize} bytes; "
            f"LayerNorm needs whole 32-byte blocks (H a multiple of {32 // x.dtype.itemsize})")


def layout(shape, dtype):
    """Byte offsets of the GM slots' parts: gamma | beta, and output | mean | variance."""
    b, s, h = shape
    size = np.dtype(dtype).itemsize
    data, row, vec = padded(b * s * h * size), padded(b * s * size), padded(h * size)
    return {"gamma": 0, "beta": vec, "params": 2 * vec, "output": 0, "mean": data,
            "variance": data + row, "outputs": data + 2 * row}


def data_bytes(shape, dtype):
    """UB bytes of x and output, gamma and beta, mean and variance."""
    b, s, h = shape
    size = np.dtype(dtype).itemsize
    return 2 * (padded(b * s * h * size) + padded(h * size) + padded(b * s * size))


def _stack_buffer_size(api, shape, dtype, product, reuse, stack_buffer_size):
    """The temp bytes: by default the largest (whole 32-byte blocks) that fits beside the
    tensors, capped at the host's max; an explicit size as given."""
    size = np.dtype(dtype).itemsize
    largest, smallest = GetLayerNormMaxMinTmpSize((*shape, shape[2]), size, reuse,
                                                  product=product.name)
    free = (product.usable_ub - data_bytes(shape, dtype)) // 32 * 32
    if stack_buffer_size is None:
        if free < smallest:
            raise CapacityError(
                f"{api}: {list(shape)} {np.dtype(dtype).name} does not fit one {product.name} "
                f"core: the tensors take {data_bytes(shape, dtype)} of {product.usable_ub} UB "
                f"bytes, and LayerNorm needs at least {smallest} temp bytes beside them. Shapes "
                "larger than one UB are for lngb.emulate_layer_norm_forward(...), the multi-core "
                "forward over GM")
        return min(largest, free)
    if stack_buffer_size < smallest:
        raise TilingError(f"{api}: stack_buffer_size {stack_buffer_size} is below LayerNorm's "
                          f"minimum temp size {smallest} bytes for {list(shape)}")
    if padded(stack_buffer_size) > free:
        raise CapacityError(f"{api}: stack_buffer_size {stack_buffer_size} does not fit: {free} "
                            f"UB bytes are free beside the tensors on {product.name}")
    return stack_buffer_size


class LayerNormSampleKernel:
    """The kernel around LayerNorm that emulate_layer_norm runs: DataCopy GM -> UB of x, gamma
    and beta, LayerNorm, DataCopy UB -> GM of output, mean and variance, with the events a
    TQue-based kernel emits between them. GM slots: x, (gamma | beta), (output | mean |
    variance)."""

    def __init__(self, core, shape, dtype, tmp_bytes, tiling, gms, epsilon, is_reuse_source):
        self.core, self.shape, self.dtype = core, shape, np.dtype(dtype)
        self.tmp_bytes, self.tiling, self.gms = tmp_bytes, tiling, gms
        self.epsilon, self.reuse = epsilon, is_reuse_source

    def __call__(self):
        core, dtype, (b, s, h) = self.core, self.dtype, self.shape
        size, at = dtype.itemsize, layout(self.shape, dtype)
        gm_x, gm_params, gm_out = self.gms[:3]
        pipe = TPipe(core)
        counts = {"x": b * s * h, "gamma": h, "beta": h, "output": b * s * h, "mean": b * s,
                  "variance": b * s}
        local = {name: core.alloc(padded(n * size) // size, dtype,
                                  "VECIN" if name in INPUTS else "VECOUT")
                 for name, n in counts.items()}
        tmp = core.alloc(padded(self.tmp_bytes), np.uint8, "VECCALC")

        def gm(slot, name):
            offset = 0 if name == "x" else at[name]
            return GlobalTensor.in_arena(slot, offset, dtype, padded(counts[name] * size) // size)

        with core:
            for name, slot in (("x", gm_x), ("gamma", gm_params), ("beta", gm_params)):
                DataCopy(local[name], gm(slot, name), local[name].size)
            for name in ("mean", "variance"):   # the bytes padding them to whole blocks
                t, per_block = local[name], 32 // size
                if counts[name] % per_block:
                    Duplicate(t[t.size - per_block], 0.0, per_block)
            PipeBarrier(PIPE_V)
            event = pipe.FetchEventID(HardEvent.MTE2_V)
            SetFlag(HardEvent.MTE2_V, event)
            WaitFlag(HardEvent.MTE2_V, event)
            LayerNorm(local["output"], local["mean"], local["variance"], local["x"],
                      local["gamma"], local["beta"], tmp, self.epsilon, self.tiling,
                      is_reuse_source=self.reuse)
            event = pipe.FetchEventID(HardEvent.V_MTE3)
            SetFlag(HardEvent.V_MTE3, event)
            WaitFlag(HardEvent.V_MTE3, event)
            for name in ("output", "mean", "variance"):
                DataCopy(gm(gm_out, name), local[name], local[name].size)


def emulate_layer_norm(x, gamma, beta, *, epsilon=1e-5, product="atlas-a2",
                       is_reuse_source=False, stack_buffer_size=None, mode=None, trace=False,
                       sat_mode=None, div_sqrt=None):
    """Run LayerNorm on a fresh emulated core (copy in, the API, copy out); returns a
    LayerNormResult with `.output` [B, S, H], `.mean` and `.variance` [B, S] (x's dtype),
    `.tiling` (GetLayerNormNDTilingInfo's for the temp size used, with the tail's lengths the
    kernel writes into it), `.cost`, `.trace` (trace=True, or observed/checked mode), `.core`.

    x [B, S, H], gamma and beta [H], all half or all float. `stack_buffer_size` (bytes)
    defaults to the largest that fits beside the tensors, capped at the host's max; `mode`
    None: $LNGB_MODE, else "fast"; `div_sqrt`, `sat_mode`: as AICore's."""
    resolved = resolve_mode(API, mode)
    check_forward_inputs(API, x, gamma, beta)
    reuse = check_flag(API, "is_reuse_source", is_reuse_source)
    trace = check_flag(API, "trace", trace)
    if stack_buffer_size is not None:
        stack_buffer_size = check_int(API, "stack_buffer_size (bytes)", stack_buffer_size, lo=0)
    eps = epsilon_value(epsilon, x.dtype, API)
    core = AICore(get_product(product, API), "observed" if trace and resolved == "fast"
                  else resolved, sat_mode=sat_mode, div_sqrt=div_sqrt)
    shape, dtype = x.shape, x.dtype
    tmp_bytes = _stack_buffer_size(API, shape, dtype, core.product, reuse,
                                         stack_buffer_size)
    tiling = GetLayerNormNDTilingInfo((*shape, shape[2]), tmp_bytes, dtype.itemsize, reuse,
                                      product=core.product.name)
    at = layout(shape, dtype)
    params = np.zeros(at["params"], np.uint8)
    for name, a in (("gamma", gamma), ("beta", beta)):
        raw = np.ascontiguousarray(a).view(np.uint8)
        params[at[name]:at[name] + raw.size] = raw
    outputs = np.empty(at["outputs"], np.uint8)
    gms = (gm_bytes(x, API), params, outputs)
    # the kernel's own copy: a replay runs no Python, so the tail's rewrite is made here
    kernel = LayerNormSampleKernel(core, shape, dtype, tmp_bytes, copy.copy(tiling), gms, eps,
                                   reuse)
    key = (API, shape, dtype.str, tmp_bytes, reuse, int(eps.view(np.uint32)))
    recording.run_program(core, recording.program_key(core, key), kernel, gms)
    if core.sanitizer is not None:
        core.sanitizer.finish(core.flags)
    write_tail_lengths(tiling, core.product)
    rows = (core.last_program.rows if core.last_program is not None
            else np.array([record.row for record in core.trace]))
    b, s, h = shape
    view = lambda name, n, *dims: outputs[at[name]:at[name] + n * dtype.itemsize].view(
        dtype).reshape(dims)
    return LayerNormResult(view("output", b * s * h, b, s, h), view("mean", b * s, b, s),
                           view("variance", b * s, b, s), tiling, core,
                           core.trace if core.mode != "fast" else None, rows)


# --- the multi-core forward --------------------------------------------------------------------

class ForwardResult(OperatorResult):
    """output [B, S, H], mean and variance [B, S] (the input dtype), the ForwardTiling, the
    cores, their traces (observed and checked modes) and the modelled cost (`.cost`)."""

    def __init__(self, output, mean, variance, tiling, cores, plan, trace):
        super().__init__(None, None, tiling, cores, plan, trace)
        self.output, self.mean, self.variance = output, mean, variance
        del self.pd_gamma, self.pd_beta

    def outputs(self):
        return {"output": self.output, "mean": self.mean, "variance": self.variance}


class PreparedForward:
    """A forward run set up: tiling, fresh cores, their GM buffers by slot, and `kernel(c,
    runner)`."""

    def __init__(self, tiling, cores, gms, shape):
        self.tiling, self.cores, self.gms, self.shape = tiling, cores, gms, shape

    def kernel(self, c, runner=None):
        runner = runner or schedule.Live(self.cores[c], self.gms[c])
        return multi.LayerNormForwardKernel(self.cores[c], self.tiling, c, self.gms[c], runner)

    def results(self):
        """(output, mean, variance): the output GM, and each core's statistics gathered."""
        t, dtype = self.tiling, np.dtype(self.tiling.dtype)
        b, s, h = self.shape
        output, stats = self.gms[0][multi.OUTPUT], self.gms[0][multi.STATS]

        def gather(second):
            parts = []
            for c, (_, count) in enumerate(t.core_rows):
                at = t.stats_at(c) + second * t.stats_bytes(count)
                parts.append(stats[at:at + count * dtype.itemsize].view(dtype))
            return np.concatenate(parts).reshape(b, s)

        return output.view(dtype).reshape(b, s, h), gather(False), gather(True)


def emulate_layer_norm_forward(x, gamma, beta, *, epsilon=1e-5, product="atlas-a2",
                               block_dim=None, threads=None, mode=None, sat_mode=None,
                               progress=False, div_sqrt=None):
    """The LayerNorm forward on `block_dim` emulated cores over GM, for any size
    (lngb.kernels.layer_norm_forward): rows split across the cores, LayerNorm per tile of whole
    rows. Returns a ForwardResult: `.output`, `.mean`, `.variance`, `.tiling`, `.cores`,
    `.trace` (a list per core in observed and checked modes), `.cost`. Rows are independent, so
    the bits equal `emulate_layer_norm`'s whatever `block_dim` and `threads` (default: the CPU
    count)."""
    api = multi.API
    mode = resolve_mode(api, mode)
    threads = check_threads(api, threads)
    progress = check_flag(api, "progress", progress)
    check_forward_inputs(api, x, gamma, beta)
    dtype, shape = x.dtype, x.shape
    eps = epsilon_value(epsilon, dtype, api)
    product = get_product(product, api)
    if block_dim is not None:
        check_int(api, "block_dim", block_dim)
    tiling = multi.forward_tiling(shape, dtype, product, block_dim, float(eps))
    size, h = dtype.itemsize, shape[2]
    vec = padded(h * size)
    params = np.zeros(2 * vec, np.uint8)
    for k, a in enumerate((gamma, beta)):
        params[k * vec:k * vec + h * size] = np.ascontiguousarray(a).view(np.uint8)
    xs = gm_bytes(x, api)
    output = np.empty(x.nbytes, np.uint8)
    stats = np.empty(tiling.stats_at(tiling.block_dim), np.uint8)
    row = h * size
    gms = [(xs[a * row:(a + n) * row], params, output, stats) for a, n in tiling.core_rows]
    ubs = schedule.core_ubs(tiling.block_dim, AICore.ub_bytes(product))
    cores = [AICore(product, mode, sat_mode=sat_mode, div_sqrt=div_sqrt, _ub=ub) for ub in ubs]
    run = PreparedForward(tiling, cores, gms, shape)
    plan = run_cores(api, ("LayerNorm forward", tiling), run, threads, progress,
                     lambda cores: check_gm(cores, run.gms, (multi.PARAMS, multi.OUTPUT,
                                                            multi.STATS), multi.SLOT_NAMES,
                                            inputs=[(multi.PARAMS, 0, params.size)]))
    return ForwardResult(*run.results(), tiling, cores, plan,
                         [core.trace for core in cores] if mode != "fast" else None)
