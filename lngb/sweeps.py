"""Tiling vs throughput: every temp-buffer size of a shape, its tiling, its modelled device time,
and the emulator's own speed for a sample of sizes.

Sizes whose tiling fields agree (everything but stackBufferSize) run the same instruction stream,
so each distinct tiling is emulated and costed once.
"""
import csv
import io
import sys
import time
import timeit
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from .arguments import FLOAT_DTYPES, check_dtype, check_int, check_sequence, check_shape, is_int
from .observers.cost import CostModel, check_overrides
from .errors import CapacityError, InvalidArgumentError, TilingError, check_flag
from .vector_ops.program import EVENT, KIND
from .files import write_file
from .host import emulate, free_temp_bytes
from .products import get_product
from .kernels.tiling import GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo


@dataclass
class SweepRow:
    product: str
    shape: tuple
    dtype: str
    stack_buffer_size: int          # bytes
    fits: bool                      # the temp buffer fits beside the tensors in this UB
    oneCalSize: int
    loopRound: int
    inputTailSize: int
    instructions: Optional[int] = None
    events: Optional[int] = None
    cycles: Optional[float] = None
    microseconds: Optional[float] = None
    emulator_us: Optional[float] = None  # median wall time of a warm emulate, when measured
    emulator_melem_per_s: Optional[float] = None  # B*S*H / emulator_us


DTYPE_NAMES = {"float": "float32", "half": "float16"}


def sweep(shapes=((4, 8, 512),), dtypes=("float32",), products=("atlas-a2",), *, step=32,
          sizes=None, measure=0, repeat=7, progress=False, **cost_overrides):
    """One SweepRow per (product, shape, dtype, temp-buffer size), sizes from the tiling's min to
    its max in `step`-byte steps (or the given `sizes`). `measure` sizes, spread evenly over the
    ones that fit, also get the emulator's warm wall time (median of `repeat` timings).
    `cost_overrides` calibrate the cost model (lngb.cost.CONSTANTS)."""
    api = "sweep"
    for name, value, least in (("step", step, 1), ("repeat", repeat, 1), ("measure", measure, 0)):
        if not is_int(value) or value < least:
            raise InvalidArgumentError(f"{api}: {name} ({value!r}) must be an integer >= {least}")
    step, repeat, measure = int(step), int(repeat), int(measure)
    progress = check_flag(api, "progress", progress)
    if sizes is not None:
        sizes = [check_int(api, f"sizes[{i}]", size, 0)
                 for i, size in enumerate(check_sequence(api, "sizes", sizes))]
    shapes = [check_shape(api, f"shapes[{i}]", s, 3)
              for i, s in enumerate(check_sequence(api, "shapes", shapes))]
    dtypes = [check_dtype(api, f"dtypes[{i}]", DTYPE_NAMES.get(d, d) if isinstance(d, str) else d,
                          FLOAT_DTYPES) for i, d in enumerate(check_sequence(api, "dtypes", dtypes))]
    products = [get_product(p) for p in check_sequence(api, "products", products)]
    check_overrides(api, cost_overrides)
    configs = [(p, s, d) for p in products for s in shapes for d in dtypes]
    rows = []
    for i, (product, shape, dtype) in enumerate(configs):
        rows += _sweep_one(product, shape, dtype, step, sizes, measure, repeat, cost_overrides,
                           _Progress(progress, f"sweep {i + 1}/{len(configs)}"))
    return rows


def _sweep_one(product, shape, dtype, step, sizes, measure, repeat, cost_overrides, progress):
    max_size, min_size = GetLayerNormGradBetaMaxMinTmpSize(shape, dtype.itemsize, False)
    sizes = range(min_size, max_size + 1, step) if sizes is None else sorted(sizes)
    if not sizes or sizes[0] < min_size:
        raise TilingError(f"sweep: temp-buffer sizes for {list(shape)} {dtype.name} start at "
                          f"the minimum {min_size} bytes")
    free, tensors = free_temp_bytes(shape, dtype, product)
    if free < min_size:
        raise CapacityError(
            f"sweep: {list(shape)} {dtype.name} needs {tensors} bytes of UB for its tensors plus "
            f"at least {min_size} of temp buffer, more than the {product.usable_ub} allocatable "
            f"bytes of one {product.name} UB, so no temp-buffer size of this sweep can run. "
            "Shapes larger than one UB run on the multi-core operator: "
            "lngb.emulate_operator(...) and its tiling lngb.operator_tiling(...)")
    model = CostModel(product, **cost_overrides)
    zeros = np.zeros(shape, dtype)
    costs = {}
    rows = []
    for k, size in enumerate(sizes):
        progress.update(k, len(sizes))
        t = GetLayerNormGradBetaNDTilingInfo(shape, size, dtype.itemsize, False)
        row = SweepRow(product.name, shape, dtype.name, size, size <= free, t.oneCalSize,
                       t.loopRound, t.inputTailSize)
        if row.fits:
            stream = t.to_bytes()[4:]  # every field but stackBufferSize
            if stream not in costs:
                result = emulate(zeros, zeros, product=product.name, stack_buffer_size=size)
                cost = model.estimate(result.rows)
                events = int((result.rows[:, KIND] == EVENT).sum())
                costs[stream] = (cost.instructions, events, cost.cycles, cost.microseconds)
            row.instructions, row.events, row.cycles, row.microseconds = costs[stream]
        rows.append(row)
    progress.done()
    fitting = [r for r in rows if r.fits]
    if measure and fitting:
        rng = np.random.default_rng(0)
        dy, rfg = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
        picks = np.unique(np.linspace(0, len(fitting) - 1, min(measure, len(fitting))).round()
                          .astype(int))
        for k, index in enumerate(picks):
            progress.update(k, len(picks), "measuring")
            row = fitting[index]
            run = lambda size=row.stack_buffer_size: emulate(dy, rfg, product=product.name,
                                                             stack_buffer_size=size)
            run()
            number = max(1, int(0.002 / max(timeit.timeit(run, number=1), 1e-7)))
            times = sorted(timeit.repeat(run, number=number, repeat=repeat))
            row.emulator_us = times[len(times) // 2] / number * 1e6
            row.emulator_melem_per_s = zeros.size / row.emulator_us
        progress.done()
    return rows


class _Progress:
    """A one-line progress bar on stderr, redrawn at most every 0.2 s."""

    def __init__(self, enabled, label):
        self.enabled, self.label, self.last = enabled, label, 0.0

    def update(self, k, total, what="tilings"):
        now = time.monotonic()
        if self.enabled and now - self.last > 0.2:
            self.last = now
            filled = int(30 * k / max(total, 1))
            sys.stderr.write(f"\r{self.label} {what} [{'#' * filled}{'.' * (30 - filled)}] "
                             f"{k}/{total}  ")
            sys.stderr.flush()

    def done(self):
        if self.enabled and self.last:
            sys.stderr.write("\r" + " " * 60 + "\r")


def format_table(rows):
    """One line per distinct tiling of each configuration, with the size range that gives it."""
    lines = [f"{'product':16} {'shape':14} {'dtype':8} {'temp bytes':>17} {'oneCal':>7} "
             f"{'loops':>5} {'tail':>6} {'instr':>6} {'cycles':>9} {'device us':>9} "
             f"{'emulator us':>11} {'Melem/s':>8}"]
    groups = []
    for row in rows:
        key = (row.product, row.shape, row.dtype, row.fits, row.oneCalSize, row.inputTailSize)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(row)
        else:
            groups.append((key, [row]))
    for _, group in groups:
        first, last = group[0], group[-1]
        measured = [r for r in group if r.emulator_us is not None]
        span = f"{first.stack_buffer_size}-{last.stack_buffer_size}"
        fmt = lambda v, spec: format(v, spec) if v is not None else "-"
        lines.append(
            f"{first.product:16} {'x'.join(map(str, first.shape)):14} {first.dtype:8} "
            f"{span:>17} {first.oneCalSize:>7} {first.loopRound:>5} {first.inputTailSize:>6} "
            f"{fmt(first.instructions, 'd'):>6} {fmt(first.cycles, '.0f'):>9} "
            f"{fmt(first.microseconds, '.3f'):>9} "
            f"{fmt(measured[0].emulator_us if measured else None, '.1f'):>11} "
            f"{fmt(measured[0].emulator_melem_per_s if measured else None, '.0f'):>8}"
            + ("" if first.fits else "  (does not fit beside the tensors)"))
    return "\n".join(lines)


def write_csv(rows, path):
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(asdict(rows[0])))
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        record["shape"] = "x".join(map(str, row.shape))
        writer.writerow(record)
    write_file("sweep CSV", path, text.getvalue())


def plot(rows, path):
    """PNG of modelled device time and emulator throughput against temp-buffer size (needs
    matplotlib: pip install "lngb[plot]")."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("lngb sweep --plot needs matplotlib: pip install \"lngb[plot]\"") from None
    fig, device_ax = plt.subplots(figsize=(9, 5))
    emulator_ax = device_ax.twinx()
    configs = sorted({(r.product, r.shape, r.dtype) for r in rows})
    for k, (product, shape, dtype) in enumerate(configs):
        color = f"C{k % 10}"
        mine = [r for r in rows if (r.product, r.shape, r.dtype) == (product, shape, dtype)
                and r.fits]
        label = f"{product} {'x'.join(map(str, shape))} {dtype}"
        device_ax.plot([r.stack_buffer_size for r in mine], [r.microseconds for r in mine],
                       color=color, label=f"modelled device, {label}")
        measured = [r for r in mine if r.emulator_us is not None]
        emulator_ax.plot([r.stack_buffer_size for r in measured],
                         [r.emulator_melem_per_s for r in measured], "o--", color=color,
                         label=f"emulator throughput, {label}")
    device_ax.set_xlabel("temp buffer (bytes)")
    device_ax.set_ylabel("modelled device time (us)")
    emulator_ax.set_ylabel("emulator throughput (M elements / s)")
    device_ax.set_ylim(bottom=0)
    emulator_ax.set_ylim(bottom=0)
    handles = device_ax.get_legend_handles_labels()
    extra = emulator_ax.get_legend_handles_labels()
    device_ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=8)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    write_file("plot", path, png.getvalue())
