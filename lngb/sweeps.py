"""Tiling vs throughput.

`sweep`: every temp-buffer size of a shape that fits one UB, its tiling, its modelled device time,
and the emulator's own speed for a sample of sizes. Sizes whose tiling fields agree (everything
but stackBufferSize) run the same instruction stream, so each distinct tiling is emulated and
costed once.

`sweep_operator`: the multi-core operator at any size, over block_dim, the column slice and the
tile rows, each configuration costed from its planned instruction streams without running it.
"""
import csv
import dataclasses
import io
import timeit
from dataclasses import asdict, dataclass, fields
from typing import Optional

import numpy as np

from .arguments import FLOAT_DTYPES, check_dtype, check_int, check_sequence, check_shape, is_int
from .observers.cost import CostModel, check_overrides, phase_models
from .errors import CapacityError, InvalidArgumentError, TilingError, check_flag
from .vector_ops.program import EVENT, KIND
from .files import write_file
from .host import emulate, emulate_operator, free_temp_bytes
from .core import AICore
from .products import get_product
from .progress import progress_bar
from .kernels.multicore import LayerNormGradBetaKernel
from .kernels.operator_tiling import COL_QUANTUM, check_h, operator_tiling
from .kernels.tiling import GetLayerNormGradBetaMaxMinTmpSize, GetLayerNormGradBetaNDTilingInfo
from .runtime import schedule

PLOT_INSTALL = 'pip install -e ".[plot]"'   # as docs/tiling-and-cost.md says


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
    best: bool = False              # the fewest modelled cycles of its product, shape and dtype


@dataclass
class OperatorSweepRow:
    product: str
    shape: tuple
    dtype: str
    block_dim: int
    tile_rows: int
    tile_cols: int                  # H, or the column slice
    tiles: int                      # tiles of the busiest core (row tiles x column slices)
    tmp_bytes: int                  # the API's temp buffer per core
    cycles: float
    microseconds: float
    emulator_us: Optional[float] = None  # median wall time of a warm run, when measured
    emulator_melem_per_s: Optional[float] = None  # B*S*H / emulator_us
    best: bool = False              # the fewest modelled cycles of the sweep


DTYPE_NAMES = {"float": "float32", "half": "float16"}


def _check_dtype(api, name, dtype):
    return check_dtype(api, name, DTYPE_NAMES.get(dtype, dtype) if isinstance(dtype, str)
                       else dtype, FLOAT_DTYPES)


def _check_counts(api, **values):
    """measure, repeat, step ...: integers >= their least value (given as (value, least))."""
    checked = []
    for name, (value, least) in values.items():
        if not is_int(value) or value < least:
            raise InvalidArgumentError(f"{api}: {name} ({value!r}) must be an integer >= {least}")
        checked.append(int(value))
    return checked


def sweep(shapes=((4, 8, 512),), dtypes=("float32",), products=("atlas-a2",), *, step=32,
          sizes=None, measure=0, repeat=7, progress=False, **cost_overrides):
    """One SweepRow per (product, shape, dtype, temp-buffer size), sizes from the tiling's min to
    its max in `step`-byte steps (or the given `sizes`). `measure` sizes, spread evenly over the
    ones that fit, also get the emulator's warm wall time (median of `repeat` timings).
    `cost_overrides` calibrate the cost model (lngb.cost.CONSTANTS). Shapes that do not fit one
    UB are for `sweep_operator`."""
    api = "sweep"
    step, repeat, measure = _check_counts(api, step=(step, 1), repeat=(repeat, 1),
                                          measure=(measure, 0))
    progress = check_flag(api, "progress", progress)
    if sizes is not None:
        sizes = [check_int(api, f"sizes[{i}]", size, 0)
                 for i, size in enumerate(check_sequence(api, "sizes", sizes))]
    shapes = [check_shape(api, f"shapes[{i}]", s, 3)
              for i, s in enumerate(check_sequence(api, "shapes", shapes))]
    dtypes = [_check_dtype(api, f"dtypes[{i}]", d)
              for i, d in enumerate(check_sequence(api, "dtypes", dtypes))]
    products = [get_product(p) for p in check_sequence(api, "products", products)]
    check_overrides(api, cost_overrides)
    configs = [(p, s, d) for p in products for s in shapes for d in dtypes]
    for product, shape, dtype in configs:   # refuse at once, before sweeping any
        _check_fits(product, shape, dtype)
    rows = []
    for i, (product, shape, dtype) in enumerate(configs):
        label = f"sweep {i + 1}/{len(configs)} {product.name} {_shape_text(shape)} {dtype.name}"
        rows += _sweep_one(product, shape, dtype, step, sizes, measure, repeat, cost_overrides,
                           label, progress)
    return rows


def _shape_text(shape):
    return "x".join(map(str, shape))


def _check_fits(product, shape, dtype):
    max_size, min_size = GetLayerNormGradBetaMaxMinTmpSize(shape, dtype.itemsize, False)
    free, tensors = free_temp_bytes(shape, dtype, product)
    if free < min_size:
        raise CapacityError(
            f"sweep: {list(shape)} {dtype.name} needs {tensors} bytes of UB for its tensors plus "
            f"at least {min_size} of temp buffer, more than the {product.usable_ub} allocatable "
            f"bytes of one {product.name} UB, so no temp-buffer size of this sweep can run. "
            "Sweep the multi-core operator instead (block_dim, tile rows, column slices): "
            f"lngb sweep --shape {','.join(map(str, shape))} --block-dim 8,16,24,48, or "
            "lngb.sweep_operator(shape, dtype, product, block_dims=...)")
    return max_size, min_size, free


def _sweep_one(product, shape, dtype, step, sizes, measure, repeat, cost_overrides, label,
               progress):
    max_size, min_size, free = _check_fits(product, shape, dtype)
    sizes = range(min_size, max_size + 1, step) if sizes is None else sorted(sizes)
    if not sizes or sizes[0] < min_size:
        raise TilingError(f"sweep: temp-buffer sizes for {list(shape)} {dtype.name} start at "
                          f"the minimum {min_size} bytes")
    model = CostModel(product, **cost_overrides)
    zeros = np.zeros(shape, dtype)
    costs = {}
    rows = []
    with progress_bar(len(sizes), label, progress, "size") as bar:
        for size in sizes:
            bar.set_postfix_str(f"{size} bytes", refresh=bar.n == 0)
            t = GetLayerNormGradBetaNDTilingInfo(shape, size, dtype.itemsize, False)
            row = SweepRow(product.name, shape, dtype.name, size, size <= free, t.oneCalSize,
                           t.loopRound, t.inputTailSize)
            if row.fits:
                stream = t.to_bytes()[4:]  # every field but stackBufferSize
                if stream not in costs:
                    result = emulate(zeros, zeros, product=product.name, stack_buffer_size=size,
                                     mode="fast")
                    cost = model.estimate(result.rows)
                    events = int((result.rows[:, KIND] == EVENT).sum())
                    costs[stream] = (cost.instructions, events, cost.cycles, cost.microseconds)
                row.instructions, row.events, row.cycles, row.microseconds = costs[stream]
            rows.append(row)
            bar.update()
    fitting = [r for r in rows if r.fits]
    if fitting:
        min(fitting, key=lambda r: r.cycles).best = True
    if measure and fitting:
        rng = np.random.default_rng(0)
        dy, rfg = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
        picks = _spread(len(fitting), measure)
        with progress_bar(len(picks), f"{label} measuring", progress) as bar:
            for index in picks:
                row = fitting[index]
                bar.set_postfix_str(f"{row.stack_buffer_size} bytes", refresh=bar.n == 0)
                run = lambda size=row.stack_buffer_size: emulate(dy, rfg, product=product.name,
                                                                 stack_buffer_size=size,
                                                                 mode="fast")
                row.emulator_us = _wall_us(run, repeat)
                row.emulator_melem_per_s = zeros.size / row.emulator_us
                bar.update()
    return rows


def _spread(n, k):
    """Indices of k of n items, spread evenly (first and last included)."""
    return np.unique(np.linspace(0, n - 1, min(k, n)).round().astype(int)).tolist()


def _wall_us(run, repeat):
    """Median wall time of a warm run() in microseconds (each timing at least ~2 ms long)."""
    run()
    number = max(1, int(0.002 / max(timeit.timeit(run, number=1), 1e-7)))
    times = sorted(timeit.repeat(run, number=number, repeat=repeat))
    return times[len(times) // 2] / number * 1e6


# --- the multi-core operator ---------------------------------------------------------------

# A core with more row tiles than DIRECT_TILES is costed from shortened runs of FIRST_TILES (or one
# more), + 2 and + 4 tiles ( two tiles restore the double buffers): once the pipeline is full, every two
# tiles add the same cycles, which the three runs confirm.
DIRECT_TILES, FIRST_TILES = 6, 2


def column_slices(h):
    """The column slices the operator's tiling considers: H, H/2, H/4, ... (multiples of 128)."""
    cols = [h]
    while cols[-1] % 2 == 0 and cols[-1] // 2 % COL_QUANTUM == 0:
        cols.append(cols[-1] // 2)
    return cols


def default_block_dims(product, rows):
    """1, 2, 4, ... up to the product's vector cores, and that number; at most one per row."""
    top = min(product.vector_cores, rows)
    dims = [1 << k for k in range(top.bit_length()) if 1 << k < top]
    return dims + [top]


def sweep_operator(shape, dtype, product="atlas-a2", *, block_dims=None, tile_rows=None,
                   measure=0, repeat=3, progress=False, **cost_overrides):
    """The multi-core operator (`emulate_operator`) over block_dim x column slice x tile rows:
    one OperatorSweepRow per configuration whose tile fits the UB, with its modelled cycles
    (the cost model on the configuration's planned instruction streams; nothing is emulated) and
    a `best` flag on the fewest. `block_dims` default to 1, 2, 4, ... and the product's vector
    cores; the column slices are H, H/2, ... (multiples of 128); `tile_rows` default to the most
    rows the API computes in one chunk (the operator's own choice). `measure` configurations,
    spread evenly, also get the emulator's warm wall time (median of `repeat` runs).
    `cost_overrides` calibrate the cost model (lngb.cost.CONSTANTS)."""
    api = "sweep_operator"
    measure, repeat = _check_counts(api, measure=(measure, 0), repeat=(repeat, 1))
    progress = check_flag(api, "progress", progress)
    shape = check_shape(api, "shape", shape, 3)
    dtype = _check_dtype(api, "dtype", dtype)
    product = get_product(product)
    check_h(api, shape[2], dtype)
    overrides = check_overrides(api, cost_overrides)
    rows = shape[0] * shape[1]
    top = min(product.vector_cores, rows)
    block_dims = (default_block_dims(product, rows) if block_dims is None else
                  [check_int(api, f"block_dims[{i}]", b, 1, top)
                   for i, b in enumerate(check_sequence(api, "block_dims", block_dims))])
    tile_rows = ([None] if tile_rows is None else
                 [check_int(api, f"tile_rows[{i}]", r, 1)
                  for i, r in enumerate(check_sequence(api, "tile_rows", tile_rows))])
    tilings = {}
    for block_dim in block_dims:
        for cols in column_slices(shape[2]):
            for r in tile_rows:
                try:
                    t = operator_tiling(shape, dtype, product, block_dim, r, cols)
                except CapacityError:  # the tile does not fit the UB, or has too many rows
                    continue
                tilings.setdefault((t.block_dim, t.tile_cols, t.tile_rows), t)
    if not tilings:
        raise CapacityError(f"{api}: no configuration of {list(shape)} {dtype.name} fits the UB "
                            f"of {product.name} (block_dims {block_dims}, tile_rows "
                            f"{tile_rows})")
    out, recorded = [], schedule.Recorded()
    with progress_bar(len(tilings), f"{api} {_shape_text(shape)} {dtype.name}",
                      progress) as bar:
        for t in tilings.values():
            bar.set_postfix_str(_config_text(t), refresh=bar.n == 0)
            cycles, clock = operator_cycles(t, overrides, recorded)
            tiles = -(-max(n for _, n in t.core_rows) // t.tile_rows) * -(-t.h // t.tile_cols)
            out.append(OperatorSweepRow(product.name, shape, dtype.name, t.block_dim, t.tile_rows,
                                        t.tile_cols, tiles, t.tmp_bytes, cycles,
                                        cycles / clock))
            bar.update()
    min(out, key=lambda r: r.cycles).best = True
    if measure:
        _measure_operator(out, [tilings[(r.block_dim, r.tile_cols, r.tile_rows)] for r in out],
                          shape, dtype, measure, repeat, progress)
    return out


def _config_text(t):
    return f"block_dim {t.block_dim}, tiles {t.tile_rows} x {t.tile_cols}"


def operator_cycles(tiling, overrides=None, recorded=None):
    """(modelled cycles, clock MHz) of the operator with this tiling, as
    `emulate_operator(...).cost` models them, from plans of its distinct cores alone: one core
    per distinct row count (phase 1) and per distinct column count (phase 2). A core with more
    than DIRECT_TILES row tiles is planned shortened (see FIRST_TILES). `recorded` (a
    schedule.Recorded) shares the recorded steps between tilings of one shape, dtype and
    product."""
    recorded = schedule.Recorded() if recorded is None else recorded
    t = tiling
    counts = sorted({n for _, n in t.core_rows})
    widths = sorted({w for _, w in t.reduce_cols if w})
    runs = {count: _shortened(count, t.tile_rows) for count in counts}
    plan_rows = [c for count in counts for _, c in runs[count]]
    plan_rows += [plan_rows[0]] * (len(widths) - len(plan_rows))
    plan_widths = widths + [0] * (len(plan_rows) - len(widths))
    streams = _plan_streams(t, plan_rows, plan_widths, recorded)
    sync, models, _ = phase_models(get_product(t.product),
                                   (t.block_dim, sum(1 for _, w in t.reduce_cols if w)),
                                   **(overrides or {}))
    phase1, k = [], 0
    for count in counts:
        n_tiles = -(-count // t.tile_rows)
        costs = [models[0].schedule_cycles(recorded.programs, streams[k + j][0])
                 for j in range(len(runs[count]))]
        k += len(runs[count])
        if len(costs) == 1:
            phase1.append(costs[0])
            continue
        first, step = costs[0], costs[1] - costs[0]
        if abs(costs[2] - costs[1] - step) > 1e-9 * max(abs(step), 1.0):
            # not periodic yet: plan the whole core (exact, slower)
            phase1.append(models[0].schedule_cycles(
                recorded.programs, _plan_streams(t, [count], [0], recorded)[0][0]))
        else:
            phase1.append(first + (n_tiles - runs[count][0][0]) // 2 * step)
    phase2 = [models[1].schedule_cycles(recorded.programs, streams[plan_widths.index(w)][1])
              for w in widths]
    return max(phase1) + sync + max(phase2, default=0.0), models[0].values["clock_mhz"]


def _shortened(count, tile_rows):
    """[(row tiles, rows)] of the runs that stand for a core of `count` rows: itself, or three
    shortened ones with the same last tile."""
    n = -(-count // tile_rows)
    if n <= DIRECT_TILES:
        return [(n, count)]
    first = FIRST_TILES + (n - FIRST_TILES) % 2
    return [(m, count - (n - m) * tile_rows) for m in (first, first + 2, first + 4)]


def _plan_streams(tiling, rows, widths, recorded):
    """[(phase 1 programs, phase 2 programs)] (indices into recorded.programs) of the
    operator's kernel on fresh cores, core c with
    rows[c] rows in phase 1 and widths[c] columns to reduce in phase 2, as schedule.plan plans
    them (a dry run: nothing executes), with the steps `recorded` already holds."""
    t = dataclasses.replace(tiling, rows=sum(rows), core_rows=tuple((0, n) for n in rows),
                            reduce_cols=tuple((0, w) for w in widths))
    itemsize = np.dtype(t.dtype).itemsize
    ubs = np.zeros((len(rows), AICore.ub_bytes(t.product)), np.uint8)
    cores = [AICore(t.product, "fast", _ub=ub) for ub in ubs]
    data = np.zeros(max(rows) * t.h * itemsize, np.uint8)
    workspace = np.zeros(max(t.block_dim, len(rows)) * 2 * t.h * 4, np.uint8)
    output = np.zeros(2 * t.h * itemsize, np.uint8)
    gms = [(data[:n * t.h * itemsize], data[:n * t.h * itemsize], workspace, output)
           for n in rows]
    planners = [schedule.Planner(recorded) for _ in cores]
    kernels = [LayerNormGradBetaKernel(core, t, c, gms[c], planner)
               for c, (core, planner) in enumerate(zip(cores, planners))]
    for core, kernel, planner in zip(cores, kernels, planners):
        planner.attach(core, kernel)
    schedule.run_phases(kernels)
    return [tuple([p for p, *_ in s] for s in planner.schedule) for planner in planners]


def _measure_operator(rows, tilings, shape, dtype, measure, repeat, progress):
    rng = np.random.default_rng(0)
    dy, rfg = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    picks = _spread(len(rows), measure)
    with progress_bar(len(picks), "sweep_operator measuring", progress) as bar:
        for index in picks:
            row, t = rows[index], tilings[index]
            bar.set_postfix_str(_config_text(t), refresh=bar.n == 0)
            row.emulator_us = _wall_us(lambda t=t: emulate_operator(
                dy, rfg, product=t.product, block_dim=t.block_dim, mode="fast",
                tile_rows=t.tile_rows, tile_cols=t.tile_cols), repeat)
            row.emulator_melem_per_s = dy.size / row.emulator_us
            bar.update()


# --- rendering -------------------------------------------------------------------------------

def format_table(rows):
    """One line per distinct tiling of each configuration, with the size range that gives it;
    `*` marks the best (fewest modelled cycles) of each product, shape and dtype."""
    lines = [f"  {'product':16} {'shape':14} {'dtype':8} {'temp bytes':>17} {'oneCal':>7} "
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
        lines.append(
            f"{'*' if any(r.best for r in group) else ' '} "
            f"{first.product:16} {_shape_text(first.shape):14} {first.dtype:8} "
            f"{span:>17} {first.oneCalSize:>7} {first.loopRound:>5} {first.inputTailSize:>6} "
            f"{_fmt(first.instructions, 'd'):>6} {_fmt(first.cycles, '.0f'):>9} "
            f"{_fmt(first.microseconds, '.3f'):>9} "
            f"{_fmt(measured[0].emulator_us if measured else None, '.1f'):>11} "
            f"{_fmt(measured[0].emulator_melem_per_s if measured else None, '.0f'):>8}"
            + ("" if first.fits else "  (does not fit beside the tensors)"))
    return "\n".join(lines)


def _fmt(value, spec):
    return format(value, spec) if value is not None else "-"


def format_operator_table(rows):
    """One line per configuration; `*` marks the best (fewest modelled cycles)."""
    lines = [f"  {'product':16} {'shape':14} {'dtype':8} {'block_dim':>9} {'tile':>11} "
             f"{'tiles/core':>10} {'temp bytes':>10} {'cycles':>11} {'device us':>10} "
             f"{'emulator us':>11} {'Melem/s':>8}"]
    for r in rows:
        lines.append(
            f"{'*' if r.best else ' '} {r.product:16} {_shape_text(r.shape):14} {r.dtype:8} "
            f"{r.block_dim:>9} {f'{r.tile_rows} x {r.tile_cols}':>11} {r.tiles:>10} "
            f"{r.tmp_bytes:>10} {r.cycles:>11.0f} {r.microseconds:>10.2f} "
            f"{_fmt(r.emulator_us, '.0f'):>11} {_fmt(r.emulator_melem_per_s, '.1f'):>8}")
    return "\n".join(lines)


def best_line(rows):
    """The best row of each product, shape and dtype, in words."""
    out = []
    for r in (r for r in rows if r.best):
        what = (f"block_dim {r.block_dim}, tiles of {r.tile_rows} x {r.tile_cols}"
                if isinstance(r, OperatorSweepRow) else f"temp buffer {r.stack_buffer_size} bytes")
        out.append(f"best for {r.product} {_shape_text(r.shape)} {r.dtype}: {what}: "
                   f"{r.cycles:.0f} cycles ({r.microseconds:.3f} us modelled)")
    return "\n".join(out)


def write_csv(rows, path, row_type=SweepRow):
    """One CSV line per row, under a header of the rows' fields (`row_type`'s when there are
    none: an empty sweep is a header alone)."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=[f.name for f in fields(
        type(rows[0]) if rows else row_type)])
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        record["shape"] = _shape_text(row.shape)
        writer.writerow(record)
    write_file("sweep CSV", path, text.getvalue())


def pyplot():
    """matplotlib.pyplot with a file backend, or an ImportError saying how to install it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(f"plots need matplotlib: {PLOT_INSTALL}") from None
    return plt


def flat_reason(rows):
    """Why a series of one product, shape and dtype has the same modelled time everywhere."""
    first = rows[0]
    if isinstance(first, OperatorSweepRow):
        return "every configuration models the same time"
    if get_product(first.product).kernel_path == "regbase":
        return (f"{first.product}'s kernel computes without the temp buffer, so every size runs "
                "the same instructions")
    if len({(r.oneCalSize, r.inputTailSize) for r in rows}) == 1:
        return "every size gives the same tiling"
    return "these tilings cost the same"


def figure(rows):
    """The sweep's figure: modelled device time (top) and emulator throughput (bottom) against
    the temp-buffer size (one-UB sweeps) or block_dim (operator sweeps, the best tile of each);
    one colour per product and dtype, the best point starred, flat series explained."""
    plt = pyplot()
    operator = bool(rows) and isinstance(rows[0], OperatorSweepRow)
    fig, (device_ax, emulator_ax) = plt.subplots(2, 1, sharex=True, figsize=(9, 7))
    colours = {pd: f"C{k % 10}" for k, pd in
               enumerate(sorted({(r.product, r.dtype) for r in rows}))}
    styles = ["-", "--", ":", "-."]
    shapes = sorted({r.shape for r in rows})
    device_y, emulator_y, notes = [], [], []
    for product, shape, dtype in sorted({(r.product, r.shape, r.dtype) for r in rows}):
        mine = [r for r in rows if (r.product, r.shape, r.dtype) == (product, shape, dtype)
                and getattr(r, "fits", True)]
        if not mine:
            continue
        colour, style = colours[product, dtype], styles[shapes.index(shape) % len(styles)]
        name = label = f"{product} {_shape_text(shape)} {dtype}"
        x_of = (lambda r: r.block_dim) if operator else (lambda r: r.stack_buffer_size)
        if operator:   # the best tile at each block_dim
            points = {}
            for r in mine:
                if r.block_dim not in points or r.cycles < points[r.block_dim].cycles:
                    points[r.block_dim] = r
            curve = [points[b] for b in sorted(points)]
        else:
            curve = mine
        ys = [r.microseconds for r in curve]
        if len(curve) > 1 and max(ys) == min(ys):
            label += f" (flat: {flat_reason(mine)})"
            notes.append(f"{product} {_shape_text(shape)} {dtype} is flat: {flat_reason(mine)}")
        device_ax.plot([x_of(r) for r in curve], ys, style, color=colour, label=label)
        device_y += ys
        best = [r for r in mine if r.best]
        for r in best:
            device_ax.plot([x_of(r)], [r.microseconds], "*", color=colour, markersize=15,
                           markeredgecolor="black", label=f"best: {_best_text(r)}")
        measured = sorted((r for r in mine if r.emulator_melem_per_s is not None), key=x_of)
        if measured:
            emulator_ax.plot([x_of(r) for r in measured],
                             [r.emulator_melem_per_s for r in measured], "o" + style,
                             color=colour, label=name)
            emulator_y += [r.emulator_melem_per_s for r in measured]
    device_ax.set_ylabel("modelled device time (us)")
    device_ax.set_title("modelled device time (lngb.cost)" + ("; the best tile per block_dim"
                                                               if operator else ""))
    emulator_ax.set_ylabel("emulator throughput\n(M elements / s)")
    emulator_ax.set_title("the emulator's own speed (measured on this machine)")
    emulator_ax.set_xlabel("block_dim" if operator else "temp buffer (bytes)")
    for ax, ys in ((device_ax, device_y), (emulator_ax, emulator_y)):
        if ys:
            ax.set_ylim(*fitted_range(ys))
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not measured (measure=0)" if rows else "the sweep is empty",
                    transform=ax.transAxes, ha="center", va="center")
    if notes:
        fig.text(0.01, 0.005, "; ".join(notes), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.03 if notes else 0, 1, 1))
    return fig


def _best_text(r):
    if isinstance(r, OperatorSweepRow):
        return f"block_dim {r.block_dim}, {r.tile_rows} x {r.tile_cols} ({r.microseconds:.2f} us)"
    return f"{r.stack_buffer_size} bytes ({r.microseconds:.3f} us)"


def fitted_range(values):
    """A y-range around the data with a 10% margin (half a percent of the value when flat), not
    from 0 when the data span little of it."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.005 or 1.0
    return lo - pad, hi + pad


def plot(rows, path):
    """PNG of `figure(rows)` (needs matplotlib: PLOT_INSTALL)."""
    plt = pyplot()
    fig = figure(rows)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    plt.close(fig)
    write_file("plot", path, png.getvalue())
