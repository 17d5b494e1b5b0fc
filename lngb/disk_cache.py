"""Where lngb keeps what it compiles: one directory, found once, that `lngb cache` reports and
clears.

Numba caches a jitted function beside its source file (`__pycache__`) or in a user-wide
directory; lngb's own functions go instead to one root of lngb's, through a cache locator of
its own put first in Numba's list (`install_locator`, called by `lngb._jit` before anything is
jitted). The root is, in order:

- `$NUMBA_CACHE_DIR/lngb`, when `NUMBA_CACHE_DIR` is set (so that a CI step that keeps
  `NUMBA_CACHE_DIR` between jobs keeps lngb's compiled code too);
- `$XDG_CACHE_HOME/lngb`, or `~/.cache/lngb`;
- if that cannot be written (a read-only install with an unwritable HOME), a directory in the
  system's temporary directory, with one LngbWarning saying where.

Under the root, `numba/` holds Numba's index and data files (by version of lngb's jitted
sources) and `generated/` each element-wise instruction's loop module (vector_ops.loops).
Nothing is written inside the installed package, so `pip uninstall lngb` and `lngb cache
clear` leave nothing of lngb on disk.

A compiled function is valid while its own file and every file of lngb's jitted code are
unchanged (`SOURCES_FINGERPRINT`, part of every function's source stamp): Numba alone checks
only the defining file, which missed an edited helper inlined from another one.
"""
import functools
import hashlib
import os
import pathlib
import shutil
import tempfile
import threading
import warnings

PACKAGE = pathlib.Path(__file__).resolve().parent
# the files lngb's jitted code is compiled from (each jitted function inlines helpers of others)
JITTED_SOURCES = sorted([PACKAGE / "_jit.py", PACKAGE / "runtime" / "schedule.py",
                         *(PACKAGE / "vector_ops").glob("*.py")])
SOURCES_FINGERPRINT = hashlib.sha1(b"".join(p.read_bytes() for p in JITTED_SOURCES)).hexdigest()

_lock = threading.Lock()
_root = None
_made = set()   # the cache directories made (each is made once a process)


def _preferred_root():
    if os.environ.get("NUMBA_CACHE_DIR"):
        return pathlib.Path(os.environ["NUMBA_CACHE_DIR"]) / "lngb"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "lngb"


def _fallback_root():
    user = os.getuid() if hasattr(os, "getuid") else 0
    return pathlib.Path(tempfile.gettempdir()) / f"lngb-cache-{user}"


def _writable(directory):
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=directory).close()
        return True
    except OSError:
        return False


def root():
    """lngb's cache directory, made if need be (see the module's docstring)."""
    global _root
    with _lock:
        if _root is None:
            preferred = _preferred_root()
            if _writable(preferred):
                _root = preferred
            else:
                fallback = _fallback_root()
                if not _writable(fallback):
                    raise OSError(f"lngb: neither {preferred} nor {fallback} can be written; set "
                                  "NUMBA_CACHE_DIR to a writable directory")
                from .errors import LngbWarning
                warnings.warn(f"lngb: {preferred} cannot be written; compiled kernels are cached "
                              f"in {fallback} for now (set NUMBA_CACHE_DIR to keep them)",
                              LngbWarning, stacklevel=2)
                _root = fallback
        return _root


def numba_dir():
    return root() / "numba"


def generated_dir():
    return root() / "generated"


def forget_root():
    """Find the root again on next use (after the environment changed: tests)."""
    global _root
    with _lock:
        _root = None
        _cache_subdir.cache_clear()


@functools.cache
def _cache_subdir(path):
    """Where under numba_dir() the cache of source file `path` goes, or None for a file not
    lngb's: <SOURCES_FINGERPRINT>/<its folder in the package, or "generated">. Relative, so
    that a cache directory restored elsewhere (a CI cache) still serves; by version, so that two
    versions of lngb never overwrite each other's entries."""
    folder = pathlib.Path(path).resolve().parent
    if folder == generated_dir().resolve():
        name = "generated"
    elif folder == PACKAGE or PACKAGE in folder.parents:
        name = "_".join(("lngb",) + folder.relative_to(PACKAGE).parts)
    else:
        return None
    return pathlib.Path(SOURCES_FINGERPRINT[:16]) / name


def install_locator():
    """Put lngb's locator first in Numba's list (once)."""
    from numba.core import caching

    # the names of Numba 0.68; earlier releases had them with a leading underscore
    implementation = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    base = getattr(caching, "CacheLocator", None) or caching._CacheLocator
    if any(getattr(c, "_lngb", False) for c in implementation._locator_classes):
        return

    class LngbCacheLocator(base):
        """lngb's functions (and its generated loop modules') are cached under root()/numba,
        stamped with their file's hash and SOURCES_FINGERPRINT."""
        _lngb = True

        def __init__(self, py_func, py_file, subdir):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._path = str(numba_dir() / subdir)

        def ensure_cache_path(self):
            if self._path not in _made:
                os.makedirs(self._path, exist_ok=True)
                _made.add(self._path)

        def get_cache_path(self):
            return self._path

        def get_source_stamp(self):
            digest = hashlib.sha256(pathlib.Path(self._py_file).read_bytes()).hexdigest()
            return digest, SOURCES_FINGERPRINT

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            subdir = _cache_subdir(py_file) if os.path.exists(py_file) else None
            if subdir is None:
                return None
            locator = cls(py_func, py_file, subdir)
            locator.ensure_cache_path()
            return locator

    implementation._locator_classes.insert(0, LngbCacheLocator)


def where_root_comes_from():
    """Which rule of the module's docstring gave root(), in words."""
    if root() != _preferred_root():
        return f"a temporary directory: {_preferred_root()} cannot be written"
    if os.environ.get("NUMBA_CACHE_DIR"):
        return "$NUMBA_CACHE_DIR/lngb"
    return "$XDG_CACHE_HOME/lngb" if os.environ.get("XDG_CACHE_HOME") else "~/.cache/lngb"


def files_and_bytes(directory):
    files = [p for p in directory.rglob("*") if p.is_file()] if directory.is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def leftovers():
    """Numba cache files an earlier lngb left inside the package (its __pycache__ dirs)."""
    return sorted(p for pattern in ("*.nbi", "*.nbc") for p in PACKAGE.rglob(pattern))


def info():
    """[(what, path, files, bytes, warm)] of each cache lngb keeps on disk; warm: the executor
    (vector_ops.executor) is compiled for this version of lngb's sources."""
    from .vector_ops import executor
    rows = []
    for what, directory in (("compiled kernels", numba_dir()),
                            ("generated loop modules", generated_dir())):
        files, size = files_and_bytes(directory)
        rows.append((what, directory, files, size))
    warm = executor.compiled_on_disk()
    return [(what, path, files, size, warm if what == "compiled kernels" else files > 0)
            for what, path, files, size in rows]


def clear():
    """Remove lngb's cache root and any Numba files an earlier lngb left in the package;
    returns the paths removed."""
    removed = []
    _made.clear()
    _cache_subdir.cache_clear()
    directory = root()
    if directory.exists():
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    for path in leftovers():
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed
