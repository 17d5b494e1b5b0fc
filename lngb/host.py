"""Host level: `emulate` runs the sample kernel on a fresh core; `emulate_operator` runs the
multi-core operator over GM on fresh cores. Both read the caller's arrays in place as GM and
never write them; outputs are new arrays."""
import copy
import os
import threading
from functools import partial

import numpy as np

from .arguments import FLOAT_DTYPES, check_choice, is_int
from .core import MODE_OBSERVERS, AICore, resolve_mode
from .errors import CapacityError, InvalidArgumentError, TilingError, check_flag, warn
from .kernels.multicore import OUTPUT, SLOT_NAMES, WORKSPACE, LayerNormGradBetaKernel
from .kernels.operator_tiling import check_h, operator_tiling, round32
from .kernels.sample import SampleKernel
from .kernels.tiling import GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo
from .observers.cost import CostModel, operator_cost
from .observers.gm_check import check_gm
from .observers.sanitizer import check_cores
from .products import PRODUCTS, core_bytes, get_product
from .progress import progress_bar
from .runtime import recording, schedule
from .runtime.recording import read_only
from .runtime.cache import SETUP_BYTES, Cache, plain_key
from .simulate import run_on_core
from .tensor import gm_bytes
from .vector_ops import executor

REUSE_BUFFERS = ("input_dy", "res_for_gamma")
EMULATE_SETUPS = Cache("emulate setups")
_MAKING_CORES = threading.Lock()   # EmulationResult.core's first access


class EmulationResult:
    """pd_gamma, pd_beta (input dtype, shape (H,)), the tiling used, the core, its trace (with
    trace=True), the executed instruction stream and its modelled device cost."""

    def __init__(self, pd_gamma, pd_beta, tiling, core, trace, rows):
        # core: the AICore, or a function making it when first asked for (replay_fresh)
        self.pd_gamma, self.pd_beta, self._core, self.trace = pd_gamma, pd_beta, core, trace
        # every instruction and event, in issue order
        self.rows = rows if not rows.flags.writeable else read_only(rows)
        self._tiling = tiling
        self._tiling_copy = None
        self._cost = None

    @property
    def core(self):
        """The core the kernel ran on."""
        if not isinstance(self._core, AICore):
            with _MAKING_CORES:   # two threads asking first get the same core
                if not isinstance(self._core, AICore):
                    self._core = self._core()
        return self._core

    @core.setter
    def core(self, core):
        self._core = core

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

    def outputs(self):
        """{name: array} of the result's outputs (for repr and summary)."""
        return {"pd_gamma": self.pd_gamma, "pd_beta": self.pd_beta}

    def __repr__(self):
        outputs = ", ".join(f"{name}={preview(a)}" for name, a in self.outputs().items())
        return f"{type(self).__name__}({self.core.product.name}, {outputs})"

    def summary(self):
        """A few lines: product, tiling, the outputs (abridged) and the modelled device time."""
        lines = [f"{type(self).__name__} on {self.core.product.name}",
                 f"tiling: {tiling_text(self._tiling)}"]
        lines += [f"{name}: {preview(a)}" for name, a in self.outputs().items()]
        return "\n".join(lines + [self.cost.summary()])


def preview(array):
    """An array in a few characters: a 1-D one's first and last values, else its shape."""
    if array.ndim != 1:
        return f"<{list(array.shape)} {array.dtype}>"
    return np.array2string(array, threshold=6, edgeitems=3, precision=6, separator=", ")


def tiling_text(t):
    """A tiling's main fields in a line."""
    if hasattr(t, "block_dim"):   # the multi-core operator's
        return (f"block_dim={t.block_dim}, tiles of {t.tile_rows} x {t.tile_cols}, temp buffer "
                f"{t.tmp_bytes} bytes per core")
    if hasattr(t, "loopRound"):   # LayerNormGradBeta's
        return (f"stackBufferSize={t.stackBufferSize} floats, oneCalSize={t.oneCalSize}, "
                f"loopRound={t.loopRound}, inputTailSize={t.inputTailSize}, "
                f"bsCurLength={t.bsCurLength}")
    return type(t).__name__


def check_threads(api, threads):
    """OS threads for a multi-core run: a positive integer, by default the CPU count."""
    if threads is None:
        return os.cpu_count() or 1
    if not is_int(threads) or threads < 1:
        raise InvalidArgumentError(f"{api}: threads must be a positive integer, got {threads!r}")
    return int(threads)


def check_inputs(input_dy, res_for_gamma, api="emulate"):
    for name, a in (("input_dy", input_dy), ("res_for_gamma", res_for_gamma)):
        if not isinstance(a, np.ndarray):
            raise InvalidArgumentError(f"{api}: {name} must be a numpy array, got "
                                       f"{type(a).__name__}")
        if a.dtype not in FLOAT_DTYPES:
            raise InvalidArgumentError(f"{api}: {name} dtype {a.dtype} must be float16 or float32")
        if a.ndim != 3 or 0 in a.shape:
            raise InvalidArgumentError(f"{api}: {name} must be a non-empty [B, S, H] array, "
                                       f"got shape {a.shape}")
    if input_dy.shape != res_for_gamma.shape or input_dy.dtype != res_for_gamma.dtype:
        raise InvalidArgumentError(
            f"{api}: input_dy {input_dy.shape} {input_dy.dtype} and res_for_gamma "
            f"{res_for_gamma.shape} {res_for_gamma.dtype} must match")
    check_h(api, input_dy.shape[2], input_dy.dtype)


def free_temp_bytes(shape, dtype, product):
    """(UB bytes left for the temp buffer beside emulate's four tensors, bytes of the tensors)."""
    b, s, h = shape
    itemsize = np.dtype(dtype).itemsize
    tensors = 2 * round32(b * s * h * itemsize) + 2 * round32(h * itemsize)
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
    size = check_stack_buffer_size("emulate", stack_buffer_size)
    if size < min_size:
        raise TilingError(f"emulate: stack_buffer_size {size} is below the minimum {min_size} "
                          f"bytes (GetLayerNormGradBetaMaxMinTmpSize) for [{b}, {s}, {h}]")
    if round32(size) > free:
        raise CapacityError(f"emulate: stack_buffer_size {size} does not fit: {free} UB bytes "
                            f"are free beside the tensors on {product.name}")
    return size


def check_stack_buffer_size(api, stack_buffer_size):
    """None (the default size) or an int (checked against the tiling and the UB later)."""
    if stack_buffer_size is not None and not is_int(stack_buffer_size):
        raise InvalidArgumentError(f"{api}: stack_buffer_size must be an integer number of bytes, "
                                   f"got {stack_buffer_size!r}")
    return None if stack_buffer_size is None else int(stack_buffer_size)


class EmulateSetup:
    """One emulate() configuration, checked and computed once: the fresh core's configuration,
    the temp bytes, the tiling, the key of the kernel's program on a fresh core (under which
    runtime.recording keeps it) and the checked flags."""

    __slots__ = ("config", "tmp_bytes", "tiling", "key", "is_reuse_source", "reuse_buffer")

    def __init__(self, config, tmp_bytes, tiling, key, is_reuse_source, reuse_buffer):
        self.config, self.tmp_bytes, self.tiling, self.key = config, tmp_bytes, tiling, key
        self.is_reuse_source, self.reuse_buffer = is_reuse_source, reuse_buffer


def _setup_key(shape, dtype, product, mode, sat_mode, is_reuse_source, reuse_buffer,
               stack_buffer_size):
    """The EMULATE_SETUPS key of these arguments (shape and dtype from checked inputs), or None
    when an argument is not a plain value (the call is then checked uncached)."""
    key = plain_key(product, mode, sat_mode, is_reuse_source, reuse_buffer, stack_buffer_size)
    # an array's dtype is its own exact key (equal dtypes compute alike; its .str took 0.5 µs)
    return None if key is None else key + (shape, dtype)


def _emulate_setup(shape, dtype, product, mode, sat_mode, is_reuse_source, reuse_buffer,
                   stack_buffer_size):
    """The EmulateSetup of one emulate() configuration (cached)."""
    key = _setup_key(shape, dtype, product, mode, sat_mode, is_reuse_source, reuse_buffer,
                     stack_buffer_size)
    setup = None if key is None else EMULATE_SETUPS.get(key)
    if setup is None:
        is_reuse_source = check_flag("emulate", "is_reuse_source", is_reuse_source)
        reuse_buffer = check_choice("emulate", "reuse_buffer", reuse_buffer, REUSE_BUFFERS)
        stack_buffer_size = check_stack_buffer_size("emulate", stack_buffer_size)
        core = AICore(get_product(product, "emulate"), mode,
                      sat_mode=sat_mode)   # fresh: every fresh core's state
        tmp_bytes = choose_stack_buffer_size(shape, dtype, core.product, stack_buffer_size)
        tiling = GetLayerNormGradBetaNDTilingInfo(shape, tmp_bytes, dtype.itemsize,
                                                  is_reuse_source)
        kernel_key = ("emulate", shape, dtype.str, tmp_bytes, is_reuse_source, reuse_buffer)
        setup = EmulateSetup(core.config, tmp_bytes, tiling,
                             recording.program_key(core, kernel_key), is_reuse_source,
                             reuse_buffer)
        if key is not None:
            EMULATE_SETUPS.put(key, setup, SETUP_BYTES)
    return setup


def sample_kernel(input_dy, res_for_gamma, *, product="atlas-a2", is_reuse_source=False,
                  reuse_buffer="input_dy", stack_buffer_size=None, mode=None, sat_mode=None):
    """The sample kernel (a simulate_kernel-style kernel) on a fresh core, its inputs as GM (in
    place) and new output arrays; returns (core, kernel, its GM arrays, the key of its program,
    pd_gamma, pd_beta)."""
    check_inputs(input_dy, res_for_gamma)
    dtype, shape = input_dy.dtype, input_dy.shape
    setup = _emulate_setup(shape, dtype, product, resolve_mode("emulate", mode), sat_mode,
                           is_reuse_source, reuse_buffer, stack_buffer_size)
    core = AICore(_config=setup.config)
    pd_gamma, pd_beta, outputs = _outputs(shape[2], dtype)
    gms = (gm_bytes(input_dy), gm_bytes(res_for_gamma), *outputs)
    kernel = SampleKernel(shape, dtype, setup.tmp_bytes, setup.tiling, setup.is_reuse_source,
                          setup.reuse_buffer)
    return core, kernel, gms, setup.key, pd_gamma, pd_beta


def _outputs(h, dtype):
    """(pd_gamma, pd_beta, their bytes): new arrays, adjacent in one allocation."""
    outputs = np.empty(2 * h, dtype)
    raw, n = outputs.view(np.uint8), h * outputs.itemsize   # slices cost less than views
    return outputs[:h], outputs[h:], (raw[:n], raw[n:])


def in_place_bytes(*arrays):
    """Each array's bytes, read in place as GM, when every one is a C-contiguous, writable
    ndarray (gm_bytes's common case; it copies or wraps the others), else None."""
    views = []
    for a in arrays:
        flags = a.flags
        if type(a) is not np.ndarray or not (flags.c_contiguous and flags.writeable):
            return None
        views.append(np.frombuffer(a, np.uint8))   # a.reshape(-1).view(np.uint8), 0.25 µs sooner
    return views


def replay_fresh(config, key, gms):
    """What a fresh fast core of `config` gives by replaying the program recorded under `key`
    (recording.program_key) on `gms`, without the core: (a function making that core,
    AICore.replayed, for a result to call when its `core` is first asked for; the program). The
    program's warnings are raised as run_program raises them. None when no such program is
    cached, or when fresh cores of this mode have observers (they need a core to watch). For a
    call whose checks an earlier call of the same configuration passed: nothing is checked,
    built or recorded again, and no core is made (that and its replay bookkeeping were a fifth
    of a warm call: bench/HISTORY.md)."""
    program = recording.PROGRAMS.get(key)
    product, mode = config[:2]
    if program is None or MODE_OBSERVERS[mode]:
        return None
    for message in program.warnings:
        warn(message)
    ub = np.zeros(core_bytes(product.ub_size), np.uint8)
    executor.execute(ub, gms, program.rows)
    return partial(AICore.replayed, config, ub, program), program


def _replay_warm(input_dy, res_for_gamma, setup_key):
    """emulate() in fast mode without a trace, once its configuration's program is recorded (the
    inputs' dtype and shape are the setup's key, so they passed check_inputs), or None: the
    general path then checks, records or replays as usual."""
    if (type(input_dy) is not np.ndarray or type(res_for_gamma) is not np.ndarray
            or input_dy.dtype != res_for_gamma.dtype or input_dy.shape != res_for_gamma.shape):
        return None
    key = _setup_key(input_dy.shape, input_dy.dtype, *setup_key)
    setup = None if key is None else EMULATE_SETUPS.get(key)
    inputs = None if setup is None else in_place_bytes(input_dy, res_for_gamma)
    if inputs is None:
        return None
    pd_gamma, pd_beta, outputs = _outputs(input_dy.shape[2], input_dy.dtype)
    replayed = replay_fresh(setup.config, setup.key, (*inputs, *outputs))
    if replayed is None:
        return None
    make_core, program = replayed
    return EmulationResult(pd_gamma, pd_beta, setup.tiling, make_core, None, program.view)


def emulate(input_dy, res_for_gamma, *, product="atlas-a2", is_reuse_source=False,
            reuse_buffer="input_dy", stack_buffer_size=None, mode=None, trace=False,
            sat_mode=None):
    """Run the LayerNormGradBeta sample kernel on a fresh emulated core, as simulate_kernel runs
    a user's kernel on one core; see EmulationResult.

    The caller's arrays are never modified: the kernel only reads them (as GM, in place), and
    outputs go to new arrays. `mode` None: $LNGB_MODE, else "fast".
    """
    trace = check_flag("emulate", "trace", trace)
    mode = resolve_mode("emulate", mode)
    if mode == "fast" and not trace:
        result = _replay_warm(input_dy, res_for_gamma, (product, mode, sat_mode, is_reuse_source,
                                                        reuse_buffer, stack_buffer_size))
        if result is not None:
            return result
    core, kernel, gms, key, pd_gamma, pd_beta = sample_kernel(
        input_dy, res_for_gamma, product=product, is_reuse_source=is_reuse_source,
        reuse_buffer=reuse_buffer, stack_buffer_size=stack_buffer_size,
        mode="observed" if trace and mode == "fast" else mode, sat_mode=sat_mode)
    rows = run_on_core(core, kernel, gms, [kernel.dtype] * len(gms), key)
    if core.sanitizer is not None:
        core.sanitizer.finish(core.flags)
    return EmulationResult(pd_gamma, pd_beta, kernel.tiling, core, core.trace if trace else None,
                           rows)


# --- the multi-core operator -------------------------------------------------------------------

class PreparedOperator:
    """An operator run set up: tiling, fresh cores and their GM buffers by slot."""

    def __init__(self, tiling, cores, gms, output):
        self.tiling, self.cores, self.gms, self.output = tiling, cores, gms, output

    def kernel(self, c, runner=None):
        """Core c's kernel, run live unless another runner (a schedule.Planner) is given."""
        if runner is None:
            runner = schedule.Live(self.cores[c], self.gms[c])
        return LayerNormGradBetaKernel(self.cores[c], self.tiling, c, self.gms[c], runner)

    def results(self):
        """(pd_gamma, pd_beta): views of the output GM (filled once every core is done)."""
        out = self.output.view(np.dtype(self.tiling.dtype))
        return out[:self.tiling.h], out[self.tiling.h:]


def prepare_operator(input_dy, res_for_gamma, product, block_dim, mode, sat_mode=None,
                     tile_rows=None, tile_cols=None):
    api = "emulate_operator"
    check_inputs(input_dy, res_for_gamma, api)
    dtype = input_dy.dtype
    tiling = operator_tiling(input_dy.shape, dtype, product, block_dim, tile_rows, tile_cols)
    ubs = schedule.core_ubs(tiling.block_dim, AICore.ub_bytes(tiling.product))
    cores = [AICore(tiling.product, mode, sat_mode=sat_mode, _ub=ub) for ub in ubs]
    row_bytes = tiling.h * dtype.itemsize
    dy, rfg = gm_bytes(input_dy, api), gm_bytes(res_for_gamma, api)
    workspace = np.empty(tiling.block_dim * 2 * tiling.h * 4, np.uint8)
    output = np.empty(2 * row_bytes, np.uint8)
    gms = [(dy[a * row_bytes:(a + n) * row_bytes], rfg[a * row_bytes:(a + n) * row_bytes],
            workspace, output) for a, n in tiling.core_rows]
    return PreparedOperator(tiling, cores, gms, output)


def emulate_operator(input_dy, res_for_gamma, *, product="atlas-a2", block_dim=None,
                     threads=None, mode=None, sat_mode=None, tile_rows=None, tile_cols=None,
                     progress=False):
    """Run the multi-core LayerNormGradBeta operator (lngb.kernels.multicore) on `block_dim`
    emulated vector cores (default: the product's, at most one per row) using `threads` OS
    threads (default: the CPU count); `tile_rows` / `tile_cols` override the tile
    (operator_tiling). Returns an OperatorResult: `.pd_gamma`, `.pd_beta`,
    `.tiling` (the OperatorTiling), `.cores`, `.trace` (per core, observed and checked modes),
    `.cost`. `progress`: a progress bar on stderr while an observed run, or a configuration's
    first checked run, goes core by core (fast mode, and checked mode once checked, replay
    every core in one call).

    The caller's arrays are only read (as GM, in place); outputs are new arrays.
    """
    threads = check_threads("emulate_operator", threads)
    mode = resolve_mode("emulate_operator", mode)
    progress = check_flag("emulate_operator", "progress", progress)
    run = prepare_operator(input_dy, res_for_gamma, product, block_dim, mode, sat_mode,
                           tile_rows, tile_cols)
    plan = run_cores("emulate_operator", ("LayerNormGradBeta operator", run.tiling), run,
                     threads, progress,
                     lambda cores: check_gm(cores, run.gms, (WORKSPACE, OUTPUT), SLOT_NAMES))
    return OperatorResult(*run.results(), run.tiling, run.cores, plan,
                          [core.trace for core in run.cores] if mode != "fast" else None)


def run_cores(api, key, run, threads, progress, gm_check):
    """Run a multi-core kernel on `run.cores` (run.kernel(c, runner): core c's kernel; run.gms:
    its GM buffers) as the cores' mode says, and return its Plan (None when run live).

    Fast mode replays the plan (cached under `key`, which must determine it) on `threads`
    threads. Checked mode replays it too, once every record of every core has passed the
    sanitizer, phase by phase as a live run checks them, and `gm_check(cores)`: the verdict is
    the plan's, so later calls of the configuration reuse it; each core's trace is the live
    run's (PlannedTrace). Observed mode runs the cores live, one after another."""
    cores, mode = run.cores, run.cores[0].mode
    if mode == "observed":
        with core_progress(api, mode, len(cores), progress) as bar:
            schedule.run_phases([run.kernel(c) for c in range(len(cores))], bar)
        return None
    plan = schedule.plan(key, cores, run.kernel)
    if mode == "checked":
        for c, core in enumerate(cores):
            core.trace = schedule.PlannedTrace(plan, c)
        if plan.checked:
            for core in cores:
                core.sanitizer.catch_up_later(core.trace)
        else:
            with core_progress(api, mode, len(cores), progress) as bar:
                check_cores(cores, [(core.trace.phase(0), core.trace.phase(1)) for core in cores],
                            plan.end_states, bar=bar)
            gm_check(cores)
            plan.checked = True
    schedule.replay(plan, cores, run.gms, min(threads, len(cores)))
    return plan


def core_progress(api, mode, cores, enabled):
    """The progress bar of an operator run core by core: one step per core and phase."""
    return progress_bar(2 * cores, f"{api} ({mode}, {cores} cores)", enabled, "core-phase")


class OperatorResult(EmulationResult):
    """What `emulate` returns, for the whole operator: pd_gamma, pd_beta (input dtype, shape
    (H,)), `tiling` (the OperatorTiling), `core` (core 0) and `cores`, `trace` (a list per core in
    the observed and checked modes, else None), `rows` (a stream per core) and `cost` (an
    OperatorCost)."""

    def __init__(self, pd_gamma, pd_beta, tiling, cores, plan, trace):
        self.pd_gamma, self.pd_beta, self._tiling, self._tiling_copy = pd_gamma, pd_beta, tiling, None
        self.cores, self._core, self.trace = cores, cores[0], trace
        self.plan, self._cost = plan, None

    def core_rows(self, c):
        """(phase 1 rows, phase 2 rows) core c executed: every instruction and event."""
        if self.plan is not None:
            programs = self.plan.programs
            return tuple(np.concatenate([programs[p] for p in s[:, 0]]) if len(s)
                         else np.zeros((0, programs[0].shape[1]), np.int64)
                         for s in self.plan.schedules[c])
        records = self.cores[c].trace
        cut = next((i + 1 for i, r in enumerate(records) if r.name == "SyncAll"), len(records))
        rows = np.array([r.row for r in records])
        return rows[:cut], rows[cut:]

    @property
    def rows(self):
        """Every core's instruction stream, phases joined."""
        return [np.concatenate(self.core_rows(c)) for c in range(len(self.cores))]

    def estimate_cost(self, **overrides):
        """The modelled device time with some cost constants overridden (calibration)."""
        return operator_cost(self.core.product, [self.core_rows(c) for c in range(len(self.cores))],
                             **overrides)
