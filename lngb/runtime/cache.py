"""Cache keys and the one byte budget every cache of lngb shares.

`cache_key(*parts)` turns call arguments into a key that is equal only for equal values of the
same type: floats by bit pattern (so 0.0 and -0.0, or two NaN payloads, differ), and bool,
float, numpy scalar and int tagged apart (so 1, True, 1.0 and np.int64(1) are four keys; the
tags are objects no argument can equal). Objects it does not know raise `Uncacheable`, and the
caller runs uncached.

`STORE` holds every cached value with its size in bytes; when the total passes the limit the
least recently used entries go, whichever cache they belong to. The limit is 256 MiB unless the
environment variable LNGB_CACHE_MB says otherwise (a bad value is an error when a cache is first
used, never at import); `set_cache_limit(nbytes)` changes it and
`clear_caches()` empties every cache.
"""
import dataclasses
import enum
import math
import os
import struct
import threading
from collections import OrderedDict

import numpy as np

from ..arguments import is_int
from ..errors import InvalidArgumentError

DEFAULT_LIMIT = 256 << 20


class Uncacheable(Exception):
    """A part of a key has no value-exact form: the call runs without the cache."""


class _Tag:
    """A type tag inside a key: no value a caller passes can equal it."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name}>"


FLOAT, BOOL, LIST, BYTES, DTYPE, SCALAR_REGISTER = (
    _Tag(n) for n in ("float", "bool", "list", "bytes", "dtype", "scalar register"))
PLAIN = frozenset((int, str, type(None)))


class Exact(tuple):
    """A key already made value-exact (cache_key's result): used as it is inside other keys."""

    __slots__ = ()


def cache_key(*parts):
    return Exact(map(exact, parts))


def plain_key(*values):
    """A value-exact key of plain arguments (int, str, bool, None: each tagged with its type, so
    1 and True differ) without cache_key's walk, for the hot paths; None when a value is of any
    other type (the caller then checks its arguments uncached)."""
    types = tuple(map(type, values))
    return types + values if PLAIN_ARGUMENTS.issuperset(types) else None


PLAIN_ARGUMENTS = PLAIN | {bool}


def exact(value):
    """One value's exact form, as a part of a key."""
    kind = type(value)
    if kind in PLAIN or kind is Exact:
        return value  # nothing else hashes equal to them once the other types are tagged
    if kind is tuple:
        if all(map(PLAIN.__contains__, map(type, value))):
            return value   # what the walk below would build: plain values are their own form
        return tuple(map(exact, value))
    if kind is float:
        return (FLOAT, struct.pack("<d", value))
    if kind is bool:
        return (BOOL, value)
    if kind is list:
        return (LIST, *map(exact, value))
    method = getattr(value, "cache_key", None)   # objects that know their exact key
    if method is not None:
        return method()
    if isinstance(value, np.generic):
        return (value.dtype.str, value.tobytes())
    if isinstance(value, np.dtype):
        return (DTYPE, value.str)
    if isinstance(value, enum.Enum):
        return (kind, exact(value.value))
    if kind is bytes:
        return (BYTES, value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (kind, *[exact(getattr(value, f.name)) for f in dataclasses.fields(value)])
    raise Uncacheable(f"a {kind.__name__} has no value-exact cache key")


def limit_from_environment(environ=os.environ):
    """The budget LNGB_CACHE_MB gives (megabytes, a finite number >= 0), or the default when it
    is unset; a bad value is an InvalidArgumentError naming the variable."""
    text = environ.get("LNGB_CACHE_MB")
    if text is None:
        return DEFAULT_LIMIT
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = math.nan
    if not (math.isfinite(megabytes) and megabytes >= 0):
        raise InvalidArgumentError(
            f"LNGB_CACHE_MB={text!r}: the environment variable must be a number of megabytes "
            f">= 0 (the default is {DEFAULT_LIMIT >> 20}); fix or unset it, or call "
            "lngb.set_cache_limit(nbytes)")
    return int(megabytes * (1 << 20))


class Store:
    """Values of every cache, least recently used first, with their sizes; thread-safe. The limit
    is LNGB_CACHE_MB's (read when a cache is first used, so that a bad value never breaks
    `import lngb`) until set_limit sets one."""

    def __init__(self, limit=None, environ=os.environ):
        self._entries = OrderedDict()  # (cache, key) -> (value, nbytes)
        self._lock = threading.Lock()
        self.nbytes = 0
        self._limit, self._environ = limit, environ

    @property
    def limit(self):
        if self._limit is None:
            self._limit = limit_from_environment(self._environ)
        return self._limit

    def get(self, cache, key):
        # no lock: each OrderedDict operation is atomic, and an entry evicted by another thread
        # between the two is simply not moved
        entry = self._entries.get((cache, key))
        if entry is None:
            return None
        try:
            self._entries.move_to_end((cache, key))
        except KeyError:
            pass
        return entry[0]

    def put(self, cache, key, value, nbytes):
        """Keep `value` unless it alone is larger than the limit; evict to stay within it."""
        with self._lock:
            old = self._entries.pop((cache, key), None)
            if old is not None:
                self.nbytes -= old[1]
            if nbytes <= self.limit:
                self._entries[cache, key] = (value, nbytes)
                self.nbytes += nbytes
            self._evict()
        return value

    def set_limit(self, nbytes):
        with self._lock:
            self._limit = nbytes
            self._evict()

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def info(self):
        """{cache name: (entries, bytes)}."""
        with self._lock:
            out = {}
            for (cache, _), (_, nbytes) in self._entries.items():
                entries, total = out.get(cache, (0, 0))
                out[cache] = (entries + 1, total + nbytes)
            return out

    def _evict(self):
        while self.nbytes > self.limit:
            _, (_, nbytes) = self._entries.popitem(last=False)
            self.nbytes -= nbytes


STORE = Store()


def set_cache_limit(nbytes):
    """The byte budget all of lngb's caches share (default 256 MiB, env LNGB_CACHE_MB)."""
    if not is_int(nbytes) or nbytes < 0:
        raise InvalidArgumentError(f"set_cache_limit: nbytes must be an integer >= 0, got "
                                   f"{nbytes!r}")
    STORE.set_limit(int(nbytes))


ALSO_CLEARED = []   # functions clear_caches calls too: what is kept outside the store


def clear_caches():
    """Empty every cache (recorded programs, plans, tilings, validated calls) and what
    ALSO_CLEARED names (lock step's spare blocks)."""
    STORE.clear()
    for clear in ALSO_CLEARED:
        clear()


def cache_info():
    """{cache name: (entries, bytes)} of what the caches hold now, and the limit under 'limit'."""
    return {**STORE.info(), "limit": STORE.limit}


SETUP_BYTES = 2048   # what a cached configuration (a tiling, keys, a core's config) counts
# The process's bytes (RSS) per byte tracemalloc sees for entries made of many small objects and
# arrays (programs, plans): the heap's own overhead and the holes evicted entries leave. Measured
# with a full 64 MiB cache of distinct shapes (bench/cache_rss.py; glibc, a fixed mmap threshold:
# 1.27-1.50x with the traced bytes counted, 0.91-1.23x with them times this).
HEAP_OVERHEAD = 1.25


def held_bytes(traced):
    """What an entry of `traced` bytes (as tracemalloc counts them) costs the process."""
    return int(traced * HEAP_OVERHEAD)


class Cache:
    """One named cache in the shared store."""

    def __init__(self, name):
        self.name = name

    def get(self, key):
        return STORE.get(self.name, key)

    def put(self, key, value, nbytes):
        return STORE.put(self.name, key, value, nbytes)
