"""Command line: `lngb demo` (the seed example) and `lngb run` (raw .bin files, as Ascend
samples' gen_data.py writes them)."""
import argparse
import errno
import os
import pathlib
import secrets
import shutil
import stat
import sys

import numpy as np

from .errors import InvalidArgumentError, LngbError
from .host import emulate
from .products import PRODUCTS

DTYPES = {"float32": np.float32, "float": np.float32, "float16": np.float16, "half": np.float16}


def _common_options(parser):
    parser.add_argument("--product", default="atlas-a2", choices=list(PRODUCTS))
    parser.add_argument("--stack-buffer-size", type=int, default=None,
                        help="temp buffer bytes (default: the largest that fits, capped at max)")
    parser.add_argument("--reuse-source", action="store_true", help="isReuseSource=true")
    parser.add_argument("--reuse-buffer", default="input_dy", choices=["input_dy", "res_for_gamma"],
                        help="with --reuse-source: where the products go (default input_dy; "
                             "res_for_gamma = CANN's kernel)")


def _tiling_line(t):
    return (f"tiling: stackBufferSize={t.stackBufferSize} floats, oneCalSize={t.oneCalSize}, "
            f"loopRound={t.loopRound}, inputTailSize={t.inputTailSize}, "
            f"bsCurLength={t.bsCurLength}")


def demo(args):
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


def _read_bin(what, path, shape, dtype):
    """The .bin file at `path` as a `shape` array of `dtype`. A regular file must hold exactly that
    many bytes; a pipe or character device (e.g. bash's `<(gen)`) must yield exactly that many."""
    dtype = np.dtype(dtype)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"{what}: shape {shape} has a negative dimension")
    nbytes = int(np.prod(shape)) * dtype.itemsize
    try:
        file = open(path, "rb")
    except IsADirectoryError:
        raise IsADirectoryError(errno.EISDIR, f"{what} file {path} is a directory, not a .bin "
                                "file") from None
    except OSError as err:
        raise _os_error(err, f"cannot read {what} file {path}: {_why(err)}") from None
    with file:
        st = os.fstat(file.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{what} file {path} is a directory, not a .bin "
                                    "file")
        size = st.st_size
        if not stat.S_ISREG(st.st_mode) or size == nbytes:
            data = file.read(nbytes + 1)  # one byte more: a file that grew meanwhile, a long stream
            size = len(data) if len(data) <= nbytes else f"more than {nbytes}"
    if size != nbytes:
        raise LngbError(f"{what} file {path} has {size} bytes; shape {shape} of "
                        f"{dtype.name} needs {nbytes}")
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def _os_error(err, message):
    """An OSError with err's errno (so OSError() picks the same subclass: PermissionError, ...)
    and `message`, which says which file failed and in what state the outputs are."""
    return OSError(message) if err.errno is None else OSError(err.errno, message)


def _why(err):
    return err.strerror or str(err)


def _remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_all(fd, data):
    """os.write until every byte is written (a short write is no error; no progress is)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "a write made no progress")
        view = view[written:]


def _unique_name(directory, name, suffix, create):
    """create(path) on a fresh hidden name beside the output (it raises FileExistsError if taken)."""
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.{suffix}")
        try:
            return path, create(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name in {directory}")


_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class _Output:
    """One output file: where it really leads and how it is written there.

    Symlinks are followed, as open() follows them: the bytes go where the link points and the link
    stays. A regular file there (or none yet) is replaced atomically: a temporary file beside it,
    written, fsynced, then renamed over it. A character device or FIFO (a link to /dev/null, a named
    pipe a reader waits on) cannot be replaced, so it is written in place, and every write checked.
    Whatever can be checked without writing is checked when the _Output is made."""

    def __init__(self, what, path, array):
        self.what, self.path = what, os.fspath(path)
        self.data = np.ascontiguousarray(array).tobytes()  # the bytes ndarray.tofile writes
        self.real = os.path.realpath(self.path)
        self.shown = f"{self.path} (-> {self.real})" if os.path.islink(self.path) else self.path
        self.directory, self.name = os.path.split(self.real)
        try:
            self.st = os.stat(self.real)
        except FileNotFoundError:
            self.st = None  # a new file
        except OSError as err:  # a symlink loop, a directory on the way that can't be searched
            raise _os_error(err, f"{self.shown}: {_why(err)}") from None
        mode = None if self.st is None else self.st.st_mode
        self.in_place = mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode))
        if mode is None or stat.S_ISREG(mode):
            self._check_replaceable()
        elif stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, f"{self.shown} is a directory")
        elif not self.in_place:
            raise OSError(errno.EINVAL, f"{self.shown} is neither a regular file nor a character "
                                        "device or FIFO")

    def _check_replaceable(self):
        access = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(errno.ENOENT, f"{self.shown}: its directory {self.directory} "
                                                  "does not exist")
        if not os.access(self.directory, os.W_OK | os.X_OK, **access):
            raise PermissionError(errno.EACCES, f"{self.shown}: its directory {self.directory} is "
                                                "not writable")
        if self.st is None:
            return
        if not os.access(self.real, os.W_OK, **access):  # read-only mode, immutable, read-only fs
            raise PermissionError(errno.EACCES, f"{self.shown} is not writable (mode "
                                                f"{stat.S_IMODE(self.st.st_mode):04o})")
        directory = os.stat(self.directory)
        euid = os.geteuid() if hasattr(os, "geteuid") else 0
        if directory.st_mode & stat.S_ISVTX and euid not in (0, self.st.st_uid, directory.st_uid):
            raise PermissionError(errno.EPERM, f"{self.shown} belongs to another user in the sticky "
                                               f"directory {self.directory}: it cannot be replaced")

    def write_temp(self):
        """The bytes in a new file beside the target, on disk; returns its path."""
        temp, fd = _unique_name(self.directory, self.name, "tmp",
                                lambda path: os.open(path, _NEW_FILE_FLAGS, 0o666))  # umask applies
        try:
            try:
                if self.st is not None:  # the replacement keeps the old file's owner and mode
                    if (self.st.st_uid, self.st.st_gid) != tuple(os.fstat(fd))[4:6]:
                        try:
                            os.fchown(fd, self.st.st_uid, self.st.st_gid)
                        except OSError:
                            pass
                    os.fchmod(fd, stat.S_IMODE(self.st.st_mode))
                _write_all(fd, self.data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            _remove_quietly(temp)
            raise
        return temp

    def write_in_place(self):
        fd = os.open(self.real, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            _write_all(fd, self.data)
        finally:
            os.close(fd)

    def backup(self):
        """A second name for the file about to be replaced, from which undo() restores it: a hard
        link (the very file), else a copy (same bytes and mode). None if there is no file yet."""
        if self.st is None:
            return None
        try:
            return _unique_name(self.directory, self.name, "old",
                                lambda path: os.link(self.real, path))[0]
        except OSError:  # no hard links on this file system
            pass
        backup, fd = _unique_name(self.directory, self.name, "old",
                                  lambda path: os.open(path, _NEW_FILE_FLAGS, 0o600))
        try:
            os.close(fd)
            shutil.copy2(self.real, backup)
            with open(backup, "rb+") as file:
                os.fsync(file.fileno())
        except BaseException:
            _remove_quietly(backup)
            raise
        return backup

    def undo(self, backup):
        """Put back what the rename replaced (or remove what it created)."""
        if backup is None:
            os.unlink(self.real)
        else:
            os.replace(backup, self.real)


def _sync_directory(directory):
    """fsync a directory, so that renames in it are on disk (a no-op where directories can't be)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _write_outputs(outputs):
    """Write [(what, path, array)] all or nothing: every output is checked first; regular files
    are written to temporaries beside them (each write checked, fsynced) and only then renamed into
    place one after the other; the gap between the renames is covered by a backup of each file
    renamed over but the last, which puts it back if a later rename fails. On any failure the
    temporaries go and an OSError says what was (not) changed."""
    try:
        targets = [_Output(what, path, array) for what, path, array in outputs]
    except OSError as err:
        raise _os_error(err, f"{_why(err)}; no output was changed") from None
    replaced = [t for t in targets if not t.in_place]
    reals = [t.real for t in replaced]
    for t in replaced:
        if reals.count(t.real) > 1:
            raise InvalidArgumentError(f"{' and '.join(u.shown for u in replaced if u.real == t.real)}"
                                       " are the same file; no output was changed")
    changed = []  # what is already changed, said in words

    def state():
        return "; ".join(changed + ["the other outputs were not changed" if changed else
                                    "no output was changed"])

    temps = {}
    placed = []  # (target, backup) renamed into place
    current = None
    try:
        for current in replaced:
            temps[current] = current.write_temp()
        for current in targets:
            if current.in_place:
                current.write_in_place()
                changed.append(f"{current.what} was written to {current.shown} (in place: it "
                               "cannot be undone)")
        for k, current in enumerate(replaced):
            backup = current.backup() if k < len(replaced) - 1 else None
            try:
                os.replace(temps[current], current.real)
            except BaseException:
                if backup is not None:
                    _remove_quietly(backup)
                raise
            del temps[current]
            placed.append((current, backup))
    except BaseException as err:
        for temp in temps.values():
            _remove_quietly(temp)
        for target, backup in reversed(placed):
            try:
                target.undo(backup)
            except OSError as undo_err:
                changed.append(f"{target.what} in {target.shown} is the new one (restoring the old "
                               f"failed: {undo_err})")
        if not isinstance(err, OSError):
            raise
        raise _os_error(err, f"cannot write {current.what} to {current.shown}: {_why(err)}; "
                             f"{state()}") from err
    for _target, backup in placed:
        if backup is not None:
            try:
                os.unlink(backup)
            except OSError as err:
                print(f"lngb run: note: could not remove the backup {backup}: {err}",
                      file=sys.stderr)
    try:
        for directory in dict.fromkeys(t.directory for t in replaced):
            _sync_directory(directory)
    except OSError as err:
        raise _os_error(err, f"wrote {' and '.join(t.shown for t in targets)}, but syncing their "
                             f"directory failed ({_why(err)}): the renames may not be on disk") from err


def run(args):
    dtype = DTYPES[args.dtype]
    try:
        shape = tuple(int(d) for d in args.shape.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) <= 0:
        raise LngbError(f"--shape takes B,S,H (e.g. 4,8,512), got {args.shape!r}")
    dy = _read_bin("inputDy", args.dy, shape, dtype)
    rfg = _read_bin("resForGamma", args.res_for_gamma, shape, dtype)
    goldens = {name: _read_bin(f"golden {name}", path, (shape[2],), dtype)
               for name, path in (("pdGamma", args.golden_gamma), ("pdBeta", args.golden_beta))
               if path}
    result = emulate(dy, rfg, product=args.product, stack_buffer_size=args.stack_buffer_size,
                     is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer)
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # both or neither: a failed write is an OSError (exit 2), never "wrote"
    _write_outputs([("pdGamma", out / "output_pd_gamma.bin", result.pd_gamma),
                    ("pdBeta", out / "output_pd_beta.bin", result.pd_beta)])
    print(f"LayerNormGradBeta on {args.product}: [{shape[0]}, {shape[1]}, {shape[2]}] "
          f"{np.dtype(dtype).name}")
    print(_tiling_line(result.tiling))
    print(f"wrote {out / 'output_pd_gamma.bin'} and {out / 'output_pd_beta.bin'} "
          f"({shape[2]} x {np.dtype(dtype).name} each)")
    status = 0
    for name, got in (("pdGamma", result.pd_gamma), ("pdBeta", result.pd_beta)):
        if name in goldens:
            ref = goldens[name]
            same = np.array_equal(ref.view(np.uint8), got.view(np.uint8))
            diff = np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))
            print(f"{name} vs golden: {'bit-identical' if same else 'differs'}, "
                  f"max abs diff {diff:.6g}")
            status |= 0 if same else 1
    return status


def _shape(text):
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3:
        raise argparse.ArgumentTypeError(f"a shape is B,S,H (e.g. 4,8,512), got {text!r}")
    return shape


def sweep_command(args):
    from .sweeps import format_table, plot, sweep, write_csv
    rows = sweep(args.shape or [(4, 8, 512)], [DTYPES[d] for d in args.dtype or ["float32"]],
                 args.product or ["atlas-a2"], step=args.step, measure=args.measure,
                 progress=not args.quiet and sys.stderr.isatty())
    print(format_table(rows))
    print(f"{len(rows)} temp-buffer sizes; modelled device time from lngb.cost (constants: "
          "lngb.cost.CONSTANTS)")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"wrote {args.csv}")
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _kernel_inputs(args):
    """inputDy and resForGamma from --dy/--res-for-gamma, or the documented example's arange."""
    dtype, shape = DTYPES[args.dtype], args.shape
    if args.dy:
        return (_read_bin("inputDy", args.dy, shape, dtype),
                _read_bin("resForGamma", args.res_for_gamma or args.dy, shape, dtype))
    x = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
    return x, x


def trace_command(args):
    from .trace import format_listing, write_chrome_trace, write_jsonl
    dy, rfg = _kernel_inputs(args)
    result = emulate(dy, rfg, product=args.product, stack_buffer_size=args.stack_buffer_size,
                     is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer,
                     trace=True)
    if args.format == "text":
        listing = format_listing(result.trace)
        if args.out:
            pathlib.Path(args.out).write_text(listing + "\n")
        else:
            print(listing)
    elif args.format == "jsonl":
        write_jsonl(result.trace, args.out or "trace.jsonl")
    else:
        write_chrome_trace(result.trace, args.out or "trace.json", result.cost)
    if args.out or args.format != "text":
        print(f"{len(result.trace)} records; modelled device time {result.cost.microseconds:.3f} "
              f"us; wrote {args.out or ('trace.jsonl' if args.format == 'jsonl' else 'trace.json')}")
    return 0


def debug_command(args):
    from .debug import DebugShell, Debugger
    dy, rfg = _kernel_inputs(args)
    if args.block_dim is not None:
        from .debug import OperatorDebugger
        if args.stack_buffer_size is not None or args.reuse_source:
            raise InvalidArgumentError("lngb debug: --stack-buffer-size and --reuse-source are "
                                       "options of the one-core kernel, not of --block-dim")
        debugger = OperatorDebugger(dy, rfg, product=args.product, block_dim=args.block_dim)
    else:
        debugger = Debugger(dy, rfg, product=args.product,
                            stack_buffer_size=args.stack_buffer_size,
                            is_reuse_source=args.reuse_source, reuse_buffer=args.reuse_buffer)
    if args.commands:
        with open(args.commands) as commands:
            DebugShell(debugger, stdin=commands).cmdloop()
    else:
        DebugShell(debugger).cmdloop()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lngb", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="run the documented [1, 8, 8] float example")
    _common_options(p)
    p.set_defaults(func=demo)
    p = sub.add_parser("run", help="run on raw little-endian .bin inputs, write .bin outputs")
    p.add_argument("--dy", required=True, help="inputDy .bin file")
    p.add_argument("--res-for-gamma", required=True, help="resForGamma .bin file")
    p.add_argument("--shape", required=True, help="B,S,H")
    p.add_argument("--dtype", default="float32", choices=list(DTYPES),
                   help="element type of the .bin files (default float32)")
    p.add_argument("--out-dir", default="output",
                   help="where output_pd_gamma.bin and output_pd_beta.bin go (default ./output)")
    p.add_argument("--golden-gamma", help="optional golden pdGamma .bin to compare with")
    p.add_argument("--golden-beta", help="optional golden pdBeta .bin to compare with")
    _common_options(p)
    p.set_defaults(func=run)
    p = sub.add_parser("sweep", help="every temp-buffer size: tiling, modelled device time, "
                                     "emulator speed")
    p.add_argument("--shape", type=_shape, action="append", help="B,S,H (repeatable; "
                   "default 4,8,512)")
    p.add_argument("--dtype", action="append", choices=list(DTYPES),
                   help="repeatable; default float32")
    p.add_argument("--product", action="append", choices=list(PRODUCTS),
                   help="repeatable; default atlas-a2")
    p.add_argument("--step", type=int, default=32, help="bytes between sizes (default 32)")
    p.add_argument("--measure", type=int, default=8,
                   help="sizes whose emulator wall time is measured (default 8)")
    p.add_argument("--csv", help="write every size as a CSV row here")
    p.add_argument("--plot", help="write a PNG plot here (needs lngb[plot])")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=sweep_command)
    for name, help_text in (("debug", "step through the kernel one instruction at a time"),
                            ("trace", "the kernel's instruction trace as text, JSON lines or "
                                      "Chrome trace JSON")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--shape", type=_shape, default=(1, 8, 8),
                       help="B,S,H (default 1,8,8: the documented example)")
        p.add_argument("--dtype", default="float32", choices=list(DTYPES))
        p.add_argument("--dy", help="inputDy .bin file (default: arange inputs)")
        p.add_argument("--res-for-gamma", help="resForGamma .bin file (default: --dy's)")
        _common_options(p)
    p.add_argument("--format", default="text", choices=["text", "jsonl", "chrome"],
                   help="chrome: open in Perfetto, one row per pipe at modelled times")
    p.add_argument("--out", help="output file (default: stdout for text, trace.jsonl, "
                                 "trace.json)")
    p.set_defaults(func=trace_command)
    sub.choices["debug"].add_argument("--commands", help="read debugger commands from this file")
    sub.choices["debug"].add_argument("--block-dim", type=int,
                                      help="step the multi-core operator on this many cores "
                                           "(commands act on the core picked with `focus`)")
    sub.choices["debug"].set_defaults(func=debug_command)
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
