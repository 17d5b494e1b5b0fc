"""lngb: Ascend C's LayerNormGradBeta (and LayerNormGrad, the whole LayerNorm backward) on an
emulated Ascend AI Core, bit for bit.

`lngb SUBCOMMAND --help` lists each one's options."""
import argparse
import importlib.metadata
import io
import json
import pathlib
import re
import sys

import numpy as np

from .errors import CapacityError, InvalidArgumentError, LngbError
from .files import read_bin, write_file, write_outputs
from .backward import emulate_layer_norm_backward, emulate_layer_norm_grad
from .host import emulate, emulate_operator, tiling_text
from .core import DIV_SQRT
from .products import PRODUCTS

DTYPES = {"float32": np.float32, "float": np.float32, "float16": np.float16, "half": np.float16}
# output file names: lngb's, or the Ascend sample's (LayerNormGradBeta's outputs)
NAMES = {"lngb": {"pdGamma": "output_pd_gamma.bin", "pdBeta": "output_pd_beta.bin",
                  "pdX": "output_pd_x.bin", "resForGamma": "output_res_for_gamma.bin"}}
NAMES["ascend-sample"] = dict(NAMES["lngb"], pdGamma="output_PdGamma.bin",
                              pdBeta="output_PdBeta.bin")
ONE_CORE_HINT = ("; on the command line, --block-dim N runs the multi-core operator, for shapes "
                 "of any size")


def version():
    """The installed package's version; from a source tree that is not installed, pyproject's."""
    try:
        return importlib.metadata.version("lngb")
    except importlib.metadata.PackageNotFoundError:
        pyproject = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        except OSError:
            found = None
        return f"{found.group(1)} (not installed)" if found else "unknown (not installed)"


def _common_options(parser):
    parser.add_argument("--product", default="atlas-a2", choices=list(PRODUCTS))
    parser.add_argument("--stack-buffer-size", type=int, default=None,
                        help="temp buffer bytes (default: the largest that fits, capped at max)")
    parser.add_argument("--reuse-source", action="store_true", help="isReuseSource=true")
    parser.add_argument("--reuse-buffer", default="input_dy", choices=["input_dy", "res_for_gamma"],
                        help="with --reuse-source: where the products go (default input_dy; "
                             "res_for_gamma = CANN's kernel)")


def _tiling_line(t):
    return f"tiling: {tiling_text(t)}"


APIS = ("layer-norm-grad-beta", "layer-norm-grad", "backward")
# LayerNormGrad's documented example ([1, 8, 8] float, epsilon 1e-4) as CANN's kernel computes
# it with correctly rounded Div/Sqrt (spec layernorm_grad.md §7.2): pdX row 0, resForGamma row 0
DOC_PD_X_ROW0 = "40438222 3edf60d8 bfa799d8 c00ba8f5 c00ba800 bfa79418 3edf8720 404388d0"
DOC_RFG_ROW = "bfc38579 bf8ba87b bf2796fa be5f73f8 3e5f73f8 3f2796fa 3f8ba87b 3fc38579"


def _hex(row):
    return " ".join(f"{v:08x}" for v in np.asarray(row, np.float32).view(np.uint32))


def _doc_example():
    """LayerNormGrad's documented inputs: dy = x = arange(64) as [1, 8, 8], mean 3.5 + 8r,
    variance 5.25, gamma arange(8)."""
    dy = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    return (dy, dy.copy(), np.full((1, 8), 5.25, np.float32),
            (3.5 + 8 * np.arange(8, dtype=np.float32)).reshape(1, 8),
            np.arange(8, dtype=np.float32))


def demo(args):
    if args.api != "layer-norm-grad-beta":
        return _demo_layer_norm_grad(args)
    dy = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    result = emulate(dy, dy, product=args.product, stack_buffer_size=args.stack_buffer_size,
                     is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer)
    print(f"LayerNormGradBeta on {args.product}: inputDy = resForGamma = arange(64) as [1, 8, 8] "
          "float32")
    print(_tiling_line(result.tiling))
    print("pdGamma:", result.pd_gamma.tolist())
    print("pdBeta: ", result.pd_beta.tolist())
    expected_gamma = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]
    expected_beta = [224 + 8 * h for h in range(8)]
    ok = result.pd_gamma.tolist() == expected_gamma and result.pd_beta.tolist() == expected_beta
    print("matches the documented example" if ok else "DOES NOT match the documented example")
    return 0 if ok else 1


def _demo_layer_norm_grad(args):
    data = _doc_example()
    if args.api == "layer-norm-grad":
        result = emulate_layer_norm_grad(*data, epsilon=1e-4, product=args.product,
                                         stack_buffer_size=args.stack_buffer_size,
                                         is_reuse_source=args.reuse_source)
    else:
        result = emulate_layer_norm_backward(*data, epsilon=1e-4, product=args.product)
    rfg = result.res_for_gamma if args.api == "layer-norm-grad" else None
    print(f"{'LayerNormGrad' if rfg is not None else 'LayerNorm backward'} on {args.product}: the "
          "documented example, dy = x = arange(64) as [1, 8, 8] float32, mean 3.5 + 8r, variance "
          "5.25, gamma arange(8), epsilon 1e-4")
    print("pdX row 0:        ", result.pd_x[0, 0].tolist())
    print("pdX row 0 bits:   ", _hex(result.pd_x[0, 0]))
    ok = _hex(result.pd_x[0, 0]) == DOC_PD_X_ROW0
    if rfg is not None:
        print("resForGamma row 0:", rfg[0, 0].tolist())
        ok = ok and all(_hex(row) == DOC_RFG_ROW for row in rfg[0])
    else:
        print("pdGamma:", result.pd_gamma.tolist())
        print("pdBeta: ", result.pd_beta.tolist())
    print("matches the kernel's bits for the documented example (spec layernorm_grad.md §7.2)"
          if ok else "DOES NOT match the kernel's bits for the documented example")
    return 0 if ok else 1


# the options of `lngb run` that an API does not read (their defaults: RUN_DEFAULTS, else None)
IGNORED = {"layer-norm-grad-beta": ("x", "variance", "mean", "gamma", "epsilon", "div_sqrt"),
           "layer-norm-grad": ("res_for_gamma", "golden_gamma", "golden_beta", "reuse_buffer",
                               "names"),
           "backward": ("res_for_gamma", "stack_buffer_size", "reuse_source", "reuse_buffer")}
RUN_DEFAULTS = {"epsilon": 1e-5, "reuse_source": False, "reuse_buffer": "input_dy",
                "names": "lngb"}


def _refuse_ignored(args):
    """An option the API would ignore is an error naming it, before any work."""
    given = [f"--{name.replace('_', '-')} (read by --api "
             f"{' and '.join(api for api in APIS if name not in IGNORED[api])})"
             for name in IGNORED[args.api] if getattr(args, name) != RUN_DEFAULTS.get(name)]
    if given:
        raise InvalidArgumentError(f"--api {args.api} does not use {', '.join(given)}; leave "
                                   f"{'it' if len(given) == 1 else 'them'} out")


def _goldens(args, h, dtype):
    """{output: golden array} from --golden-gamma / --golden-beta, read before any work."""
    return {name: read_bin(f"golden {name}", path, (h,), dtype)
            for name, path in (("pdGamma", args.golden_gamma), ("pdBeta", args.golden_beta))
            if path}


def _compare(goldens, outputs):
    """Print each output against its golden; 0 if all are bit-identical, else 1."""
    status = 0
    for name, got in outputs:
        if name in goldens:
            line, same = golden_report(got, goldens[name])
            print(f"{name} vs golden: {line}")
            status |= 0 if same else 1
    return status


def _write_run_outputs(args, outputs):
    """--out-dir, made only now that the outputs exist, and the outputs written all or nothing
    (a failed write removes the directories it made); their paths."""
    out = pathlib.Path(args.out_dir)
    made = [d for d in (out, *out.parents) if not d.exists()]
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / NAMES[args.names][what] for what, _ in outputs]
    try:   # a failed write is an OSError (exit 2), never "wrote"
        write_outputs([(what, path, array) for (what, array), path in zip(outputs, paths)])
    except BaseException:
        for directory in made:   # innermost first
            try:
                directory.rmdir()
            except OSError:
                break
        raise
    return paths


def _run_layer_norm_grad(args, shape, dtype):
    """--api layer-norm-grad / backward: the five inputs, pdX (and resForGamma, or pdGamma and
    pdBeta) written all or nothing; backward's pdGamma / pdBeta checked against golden files."""
    b, s, h = shape
    shapes = {"dy": shape, "x": shape, "variance": (b, s), "mean": (b, s), "gamma": (h,)}
    missing = [f"--{name.replace('_', '-')}" for name in shapes if getattr(args, name) is None]
    if missing:
        raise InvalidArgumentError(f"--api {args.api} needs {', '.join(missing)}")
    if args.api == "layer-norm-grad" and args.block_dim is not None:
        raise InvalidArgumentError("--block-dim runs a multi-core operator: --api "
                                   "layer-norm-grad-beta or backward, not layer-norm-grad")
    data = [read_bin(name, getattr(args, name), shapes[name], dtype) for name in shapes]
    goldens = _goldens(args, h, dtype)
    if args.api == "layer-norm-grad":
        result = emulate_layer_norm_grad(*data, epsilon=args.epsilon, product=args.product,
                                         div_sqrt=args.div_sqrt,
                                         stack_buffer_size=args.stack_buffer_size,
                                         is_reuse_source=args.reuse_source)
        outputs = [("pdX", result.pd_x), ("resForGamma", result.res_for_gamma)]
    else:
        result = emulate_layer_norm_backward(*data, epsilon=args.epsilon, product=args.product,
                                             div_sqrt=args.div_sqrt,
                                             block_dim=args.block_dim)
        outputs = [("pdX", result.pd_x), ("pdGamma", result.pd_gamma),
                   ("pdBeta", result.pd_beta)]
    paths = _write_run_outputs(args, outputs)
    print(f"{args.api} on {args.product}: [{b}, {s}, {h}] {np.dtype(dtype).name}")
    print(f"wrote {', '.join(map(str, paths))}")
    return _compare(goldens, outputs)


def run(args):
    dtype = DTYPES[args.dtype]
    try:
        shape = tuple(int(d) for d in args.shape.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) <= 0:
        raise LngbError(f"--shape takes B,S,H (e.g. 4,8,512), got {args.shape!r}")
    _refuse_ignored(args)
    if args.api != "layer-norm-grad-beta":
        return _run_layer_norm_grad(args, shape, dtype)
    if args.res_for_gamma is None:
        raise InvalidArgumentError("--api layer-norm-grad-beta needs --res-for-gamma")
    dy = read_bin("inputDy", args.dy, shape, dtype)
    rfg = read_bin("resForGamma", args.res_for_gamma, shape, dtype)
    goldens = _goldens(args, shape[2], dtype)
    result = _layer_norm_grad_beta(args, dy, rfg)
    outputs = [("pdGamma", result.pd_gamma), ("pdBeta", result.pd_beta)]
    paths = _write_run_outputs(args, outputs)
    print(f"LayerNormGradBeta on {args.product}: [{shape[0]}, {shape[1]}, {shape[2]}] "
          f"{np.dtype(dtype).name}")
    print(_tiling_line(result.tiling))
    print(f"wrote {paths[0]} and {paths[1]} ({shape[2]} x {np.dtype(dtype).name} each)")
    return _compare(goldens, outputs)


def _layer_norm_grad_beta(args, dy, rfg, trace=False):
    """The sample kernel on one core, or with --block-dim the multi-core operator."""
    if args.block_dim is None:
        try:
            return emulate(dy, rfg, product=args.product, stack_buffer_size=args.stack_buffer_size,
                           is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer,
                           trace=trace)
        except CapacityError as err:
            raise CapacityError(f"{err}{ONE_CORE_HINT}") from None
    if args.stack_buffer_size is not None or args.reuse_source:
        raise InvalidArgumentError("--stack-buffer-size and --reuse-source are options of the "
                                   "one-core kernel, not of --block-dim")
    return emulate_operator(dy, rfg, product=args.product, block_dim=args.block_dim,
                            mode="observed" if trace else "fast",
                            progress=trace and sys.stderr.isatty())


def golden_report(got, ref):
    """(one line comparing `got` with the golden `ref` bit for bit, identical or not): the
    differing elements, the first, and the largest difference in ulps, absolute and relative."""
    differ = got.view(np.uint8).reshape(got.size, -1) != ref.view(np.uint8).reshape(ref.size, -1)
    bad = np.flatnonzero(differ.any(1))
    if not len(bad):
        return f"bit-identical ({got.size} elements)", True
    g, r = got.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore"):
        abs_diff = np.abs(g - r)[bad]
        rel_diff = abs_diff / np.abs(r[bad])
    first = bad[0]
    return (f"differs in {len(bad)} of {got.size} elements, the first at index {first} "
            f"(got {got[first]!s}, golden {ref[first]!s}); max diff {ulps(got, ref)[bad].max()} "
            f"ulp, abs {np.nanmax(abs_diff, initial=0):.6g}, rel {np.nanmax(rel_diff, initial=0):.6g}"
            ), False


def ulps(a, b):
    """Elementwise distance in units in the last place (representable values between them;
    +0 and -0 are 0 apart, a NaN is as far as its bits say)."""
    bits = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)

    def ordered(x):
        i = x.view(bits).astype(np.int64)
        return np.where(i < 0, -(i & (sign - 1)), i)
    return np.abs(ordered(a) - ordered(b))


def _shape(text):
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3:
        raise argparse.ArgumentTypeError(f"a shape is B,S,H (e.g. 4,8,512), got {text!r}")
    return shape


def _int_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a list of positive integers (e.g. 8,16,24,48), got "
                                         f"{text!r}")
    return values


def sweep_command(args):
    from . import sweeps
    if args.plot:   # before any work: a missing matplotlib is an error in a second, not a minute
        sweeps.pyplot()
    progress = not args.quiet and sys.stderr.isatty()
    shapes, products = args.shape or [(4, 8, 512)], args.product or ["atlas-a2"]
    dtypes = [DTYPES[d] for d in args.dtype or ["float32"]]
    if args.block_dim or args.tile_rows:
        rows = []
        for product in products:
            for shape in shapes:
                for dtype in dtypes:
                    rows += sweeps.sweep_operator(shape, dtype, product, block_dims=args.block_dim,
                                                  tile_rows=args.tile_rows,
                                                  measure=args.measure or 0, progress=progress)
        print(sweeps.format_operator_table(rows))
        what = "configurations (block_dim x column slice x tile rows)"
    else:
        rows = sweeps.sweep(shapes, dtypes, products, step=args.step,
                            measure=8 if args.measure is None else args.measure,
                            progress=progress)
        print(sweeps.format_table(rows))
        what = "temp-buffer sizes"
    print(sweeps.best_line(rows))
    print(f"{len(rows)} {what}; * marks the best; modelled device time from lngb.cost "
          "(constants: lngb.cost.CONSTANTS)")
    if args.csv:
        sweeps.write_csv(rows, args.csv)
        print(f"wrote {args.csv}")
    if args.plot:
        sweeps.plot(rows, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _kernel_inputs(args):
    """inputDy and resForGamma from --dy/--res-for-gamma, or the documented example's arange."""
    dtype, shape = DTYPES[args.dtype], args.shape
    if args.dy:
        return (read_bin("inputDy", args.dy, shape, dtype),
                read_bin("resForGamma", args.res_for_gamma or args.dy, shape, dtype))
    x = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
    return x, x


def trace_command(args):
    from .observers.trace import chrome_trace, format_listing, jsonable
    dy, rfg = _kernel_inputs(args)
    result = _layer_norm_grad_beta(args, dy, rfg, trace=True)
    # the one-core trace is one stream; the operator's a stream per core
    streams = [result.trace] if args.block_dim is None else result.trace
    if args.format == "text":
        text = "\n".join((f"# core {c}\n" if args.block_dim is not None else "")
                         + format_listing(records) for c, records in enumerate(streams)) + "\n"
    elif args.format == "jsonl":
        text = "".join(json.dumps(dict(record.to_dict(), **({} if args.block_dim is None
                                                              else {"core": c})),
                                  default=jsonable) + "\n"
                       for c, records in enumerate(streams) for record in records)
    elif args.block_dim is None:
        text = json.dumps(chrome_trace(result.trace, result.cost), default=jsonable)
    else:   # one process per core at the modelled times
        text = json.dumps(result.cost.to_chrome_trace())
    out = args.out or ("-" if args.format == "text" else
                       "trace.jsonl" if args.format == "jsonl" else "trace.json")
    if out == "-":
        sys.stdout.write(text)
        return 0
    write_file("trace", out, text)
    print(f"{sum(map(len, streams))} records; modelled device time {result.cost.microseconds:.3f} "
          f"us; wrote {out}")
    return 0


def debug_command(args):
    from .debug import DebugShell, Debugger
    if args.kernel is not None:
        debugger = _kernel_debugger(args)
    elif args.input or args.output or args.mode is not None:
        raise InvalidArgumentError("lngb debug: --input, --output and --mode are options of "
                                   "--kernel FILE.py:FUNCTION (a kernel of your own)")
    else:
        debugger = _operator_debugger(args, Debugger)
    if args.commands:
        DebugShell(debugger, stdin=io.StringIO(_commands_text(args.commands))).cmdloop()
    else:
        DebugShell(debugger).cmdloop()
    return 0


def _kernel_debugger(args):
    """lngb debug --kernel FILE.py:FUNCTION: a KernelDebugger on the .npy inputs."""
    import importlib.util

    from .debug import KernelDebugger
    given = [name for name, default in (("dy", None), ("res_for_gamma", None),
                                        ("stack_buffer_size", None), ("reuse_source", False),
                                        ("shape", (1, 8, 8)), ("dtype", "float32"),
                                        ("api", APIS[0])) if getattr(args, name) != default]
    if given:
        raise InvalidArgumentError(
            f"lngb debug --kernel: --{given[0].replace('_', '-')} is an option of lngb's own "
            "kernels; a kernel of yours takes --input, --output, --block-dim, --mode, --product")
    path, _, function = args.kernel.rpartition(":")
    if not path or not function.isidentifier():
        raise InvalidArgumentError(f"lngb debug: --kernel must be FILE.py:FUNCTION, got "
                                   f"{args.kernel!r}")
    if not pathlib.Path(path).is_file():
        raise InvalidArgumentError(f"lngb debug: --kernel: no such file {path!r}")
    spec = importlib.util.spec_from_file_location("lngb_user_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, function, None)
    if not callable(kernel):
        raise InvalidArgumentError(f"lngb debug: --kernel: {path} has no function {function!r}")
    inputs = []
    for name in args.input:
        try:
            inputs.append(np.load(name, allow_pickle=False))
        except (OSError, ValueError) as err:
            raise InvalidArgumentError(f"lngb debug: --input {name}: not a readable .npy file "
                                       f"({err})") from None
    return KernelDebugger(kernel, *inputs, outputs=[_kernel_output(o) for o in args.output],
                          block_dim=1 if args.block_dim is None else args.block_dim,
                          product=args.product, mode=args.mode or "observed",
                          div_sqrt=args.div_sqrt)


def _kernel_output(text):
    """--output SHAPE:DTYPE (16:float32, 4,64:float16), or a .npy file (its initial contents)."""
    if text.endswith(".npy"):
        try:
            return np.load(text, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise InvalidArgumentError(f"lngb debug: --output {text}: not a readable .npy file "
                                       f"({err})") from None
    shape, _, dtype = text.rpartition(":")
    if not re.fullmatch(r"\d+(,\d+)*", shape) or dtype not in KERNEL_DTYPES:
        raise InvalidArgumentError(
            f"lngb debug: --output must be SHAPE:DTYPE (e.g. 16:float32 or 4,64:float16; "
            f"dtypes {', '.join(KERNEL_DTYPES)}) or a .npy file, got {text!r}")
    return tuple(int(n) for n in shape.split(",")), np.dtype(dtype)


KERNEL_DTYPES = ("float32", "float16", "int32", "uint32", "int16", "uint16", "int8", "uint8")


def _operator_debugger(args, Debugger):
    dy, rfg = _kernel_inputs(args)
    if args.api == "backward":
        from .debug import BackwardDebugger
        if (args.dy or args.res_for_gamma or args.stack_buffer_size is not None
                or args.reuse_source or args.shape != (1, 8, 8) or args.dtype != "float32"):
            raise InvalidArgumentError(
                "lngb debug --api backward steps LayerNormGrad's documented example ([1, 8, 8] "
                "float32, epsilon 1e-4; --product, --block-dim and --div-sqrt apply); for other inputs "
                "use lngb.debug.BackwardDebugger(dy, x, variance, mean, gamma, ...)")
        debugger = BackwardDebugger(*_doc_example(), epsilon=1e-4, product=args.product,
                                    block_dim=args.block_dim, div_sqrt=args.div_sqrt)
    elif args.div_sqrt is not None:
        raise InvalidArgumentError("lngb debug: --div-sqrt is an option of --api backward and "
                                   "--kernel (LayerNormGradBeta divides nothing)")
    elif args.block_dim is not None:
        from .debug import OperatorDebugger
        if args.stack_buffer_size is not None or args.reuse_source:
            raise InvalidArgumentError("lngb debug: --stack-buffer-size and --reuse-source are "
                                       "options of the one-core kernel, not of --block-dim")
        debugger = OperatorDebugger(dy, rfg, product=args.product, block_dim=args.block_dim)
    else:
        debugger = Debugger(dy, rfg, product=args.product,
                            stack_buffer_size=args.stack_buffer_size,
                            is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer)
    return debugger


def _commands_text(path):
    """The debugger commands in `path`, which must be UTF-8 text."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidArgumentError(f"--commands {path}: not UTF-8 text (byte {err.start} is "
                                   f"{data[err.start]:#04x}); write the commands as UTF-8, one a "
                                   "line") from None


def _size_text(nbytes):
    """1536 -> '1.5 KiB'."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024


def _count(files):
    return f"{files} file" if files == 1 else f"{files} files"


MEMORY_CACHES_NOTE = ("(the in-process memory caches are separate and last only as long as a "
                      "process:\n lngb.cache_info() reports them, lngb.clear_caches() empties "
                      "them)")


def cache_command(args):
    from . import disk_cache
    root = disk_cache.root()
    if args.action == "clear":
        files, nbytes = disk_cache.files_and_bytes(root)
        removed = disk_cache.clear()
        for path in removed:
            if path == root:
                print(f"removed {path} ({_count(files)}, {_size_text(nbytes)})")
            else:
                print(f"removed {path} (left inside the package by an earlier lngb)")
        if not removed:
            print(f"nothing to remove: {root} does not exist")
        print(MEMORY_CACHES_NOTE)
        return 0
    print(f"lngb's disk cache: {root} ({disk_cache.where_root_comes_from()})")
    rows = [(what, _count(files), _size_text(nbytes),
             "warm" if warm else "cold (empty)" if files == 0 else "cold", path)
            for what, path, files, nbytes, warm in disk_cache.info()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        what, files, size, state, path = row
        print(f"  {what:<{widths[0]}}  {files:>{widths[1]}}  {size:>{widths[2]}}  "
              f"{state:<{widths[3]}}  {path}")
    leftovers = disk_cache.leftovers()
    if leftovers:
        print(f"  and {len(leftovers)} Numba files an earlier lngb left inside the package "
              f"({disk_cache.PACKAGE}): lngb cache clear removes them")
    print(MEMORY_CACHES_NOTE)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lngb", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lngb {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    p = sub.add_parser("demo", help="the documented [1, 8, 8] example, checked against its "
                                    "published bits")
    p.add_argument("--api", default=APIS[0], choices=APIS,
                   help="LayerNormGradBeta (default), LayerNormGrad, or the whole backward")
    _common_options(p)
    p.set_defaults(func=demo)
    p = sub.add_parser("run", help="raw little-endian .bin inputs (as an Ascend sample's "
                                   "gen_data.py writes them) to .bin outputs, checked against "
                                   "golden files if given; --block-dim N: the multi-core operator")
    p.add_argument("--api", default=APIS[0], choices=APIS,
                   help="layer-norm-grad-beta (default: --dy, --res-for-gamma), layer-norm-grad "
                        "or backward (--dy, --x, --variance, --mean, --gamma)")
    p.add_argument("--dy", required=True, help="inputDy .bin file")
    p.add_argument("--res-for-gamma", help="resForGamma .bin file (layer-norm-grad-beta)")
    for name in ("x", "variance", "mean", "gamma"):
        p.add_argument(f"--{name}", help=f"input {name} .bin file (layer-norm-grad, backward)")
    p.add_argument("--epsilon", type=float, default=RUN_DEFAULTS["epsilon"],
                   help="default 1e-5 (layer-norm-grad, backward)")
    p.add_argument("--div-sqrt", choices=DIV_SQRT,
                   help="Div and Sqrt: ftz flushes subnormals, as the 950's intrinsics (its "
                        "default), ieee keeps them (the other products' default) "
                        "(layer-norm-grad, backward)")
    p.add_argument("--block-dim", type=int,
                   help="run the multi-core operator on this many cores (layer-norm-grad-beta: "
                        "lngb.emulate_operator, any size; backward: default the product's, at "
                        "most one per row)")
    p.add_argument("--names", default=RUN_DEFAULTS["names"], choices=list(NAMES),
                   help="output file names: lngb's (output_pd_gamma.bin, ...; the default) or "
                        "the Ascend sample's (output_PdGamma.bin, output_PdBeta.bin)")
    p.add_argument("--shape", required=True, help="B,S,H")
    p.add_argument("--dtype", default="float32", choices=list(DTYPES),
                   help="element type of the .bin files (default float32)")
    p.add_argument("--out-dir", default="output",
                   help="where the outputs go (default ./output)")
    p.add_argument("--golden-gamma", help="optional golden pdGamma .bin to compare with "
                                          "(layer-norm-grad-beta, backward)")
    p.add_argument("--golden-beta", help="optional golden pdBeta .bin to compare with "
                                         "(layer-norm-grad-beta, backward)")
    _common_options(p)
    p.set_defaults(func=run)
    p = sub.add_parser("sweep", help="tiling vs modelled device time: temp-buffer sizes on one "
                                     "UB, or block_dim x tile on the operator (--block-dim)")
    p.add_argument("--shape", type=_shape, action="append", help="B,S,H (repeatable; "
                   "default 4,8,512)")
    p.add_argument("--dtype", action="append", choices=list(DTYPES),
                   help="repeatable; default float32")
    p.add_argument("--product", action="append", choices=list(PRODUCTS),
                   help="repeatable; default atlas-a2")
    p.add_argument("--block-dim", type=_int_list,
                   help="sweep the multi-core operator over these block_dims (e.g. 8,16,24,48), "
                        "every column slice and --tile-rows; for shapes of any size")
    p.add_argument("--tile-rows", type=_int_list,
                   help="the operator's tile rows to sweep (default: the most the API computes "
                        "in one chunk, for each column slice)")
    p.add_argument("--step", type=int, default=32, help="bytes between sizes (default 32)")
    p.add_argument("--measure", type=int, default=None,
                   help="sizes (configurations) whose emulator wall time is measured (default 8; "
                        "0 with --block-dim)")
    p.add_argument("--csv", help="write every size as a CSV row here")
    p.add_argument("--plot", help="write a PNG plot here (needs matplotlib: "
                                  "pip install -e \".[plot]\")")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=sweep_command)
    for name, help_text in (("debug", "step through the kernel one instruction at a time"),
                            ("trace", "the kernel's instruction trace as text, JSON lines or "
                                      "Chrome trace JSON; --block-dim N: the operator's")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--shape", type=_shape, default=(1, 8, 8),
                       help="B,S,H (default 1,8,8: the documented example)")
        p.add_argument("--dtype", default="float32", choices=list(DTYPES))
        p.add_argument("--dy", help="inputDy .bin file (default: arange inputs)")
        p.add_argument("--res-for-gamma", help="resForGamma .bin file (default: --dy's)")
        _common_options(p)
    p.add_argument("--format", default="text", choices=["text", "jsonl", "chrome"],
                   help="chrome: open in Perfetto, one row per pipe at modelled times")
    p.add_argument("--out", help="output file, - for stdout (default: stdout for text, "
                                 "trace.jsonl, trace.json)")
    p.add_argument("--block-dim", type=int,
                   help="trace the multi-core operator on this many cores (any size; a stream "
                        "per core)")
    p.set_defaults(func=trace_command)
    sub.choices["debug"].add_argument("--api", default=APIS[0], choices=(APIS[0], APIS[2]),
                                      help="layer-norm-grad-beta (default), or backward: the "
                                           "whole backward on LayerNormGrad's documented example")
    sub.choices["debug"].add_argument("--commands", help="read debugger commands from this file")
    sub.choices["debug"].add_argument("--block-dim", type=int,
                                      help="step the multi-core operator (or --kernel) on this "
                                           "many cores (commands act on the core picked with "
                                           "`focus`)")
    debug = sub.choices["debug"]
    debug.add_argument("--kernel", metavar="FILE.py:FUNCTION",
                       help="step a kernel of your own (as lngb.simulate_kernel runs it) "
                            "instead of lngb's: FUNCTION(*global_tensors) in FILE.py, one call "
                            "per core, the inputs then the outputs as GlobalTensors")
    debug.add_argument("--input", action="append", default=[], metavar="FILE.npy",
                       help="with --kernel: an input array (repeatable, in the kernel's order)")
    debug.add_argument("--output", action="append", default=[], metavar="SHAPE:DTYPE",
                       help="with --kernel: an output, after the inputs (repeatable): its shape "
                            "and dtype, zero-filled (16:float32, 4,64:float16), or FILE.npy for "
                            "its initial contents; the shell prints them at the end")
    debug.add_argument("--mode", choices=["observed", "checked"],
                       help="with --kernel: observed (default) or checked (the sanitizer "
                            "checks each instruction as it executes)")
    debug.add_argument("--div-sqrt", choices=DIV_SQRT,
                       help="with --api backward or --kernel: Div and Sqrt flush subnormals "
                            "(ftz, the 950's default) or keep them (ieee)")
    debug.set_defaults(func=debug_command)
    p = sub.add_parser("cache", help="where lngb's compiled kernels are cached on disk, how big "
                                     "and whether warm (info, the default); clear removes them",
                       description="lngb compiles its kernels on first use and caches them on "
                                   "disk: in $NUMBA_CACHE_DIR/lngb if NUMBA_CACHE_DIR is set, "
                                   "else $XDG_CACHE_HOME/lngb or ~/.cache/lngb (a temporary "
                                   "directory, with a warning, if that cannot be written).")
    p.add_argument("action", nargs="?", default="info", choices=["info", "clear"],
                   help="info (the default): each cache's directory, size, file count and "
                        "whether it is warm; clear: remove them (the next run compiles again)")
    p.set_defaults(func=cache_command)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # e.g. `lngb sweep | head`
        sys.stderr.close()
        return 0
    except (LngbError, OSError, ImportError) as err:
        print(f"lngb {args.command}: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
