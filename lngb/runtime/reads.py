"""What a user's kernel reads from Python, as part of its replay key.

A recorded kernel may be replayed only when a new call would issue the same rows. Its rows can
depend on anything its code reads from Python, so `kernel_key(kernel)` is the value, now, of
everything its code can name: each global and closure cell it loads, and each chain of
attributes loaded from one (`cfg.scale`, `lngb.vector_ops.Add`), in the kernel and, recursively,
in every Python function and class those names reach. A value becomes part of the key by value
(runtime.cache.exact: numbers by bit pattern, strings, tuples, lists, dataclasses, enums, small
arrays by their bytes); functions, classes and modules by identity, their own reads added.
lngb's and numpy's own functions (and the builtins) are trusted to depend on nothing hidden.

Anything else (an object of another kind, a large array, a function of another library, a
callable object that names no key of its own) raises Uncacheable: the caller then records the
kernel afresh on every call instead of replaying (always right, slower). Host reads of GM and
scalar reads of the UB used in Python are caught at run time instead (recording.ScalarAccess:
the kernel runs live).
"""
import dis
import enum
import sys
import types
from functools import lru_cache

import numpy as np

from .cache import Exact, Uncacheable, exact

TRUSTED_MODULES = ("lngb", "numpy", "math", "builtins", "operator", "functools", "itertools",
                   "enum", "dataclasses")
UNTRUSTED_MODULES = ("numpy.random",)   # trusted names that keep hidden state
UNTRUSTED_BUILTINS = frozenset(("open", "input", "getattr", "vars", "globals", "locals", "eval",
                                "exec", "__import__"))   # reads the key cannot follow
SMALL_ARRAY = 4096   # bytes: a global array up to this size is keyed by its contents
_ROOTS = {"LOAD_GLOBAL": "global", "LOAD_NAME": "global", "LOAD_DEREF": "cell",
          "LOAD_CLASSDEREF": "cell", "IMPORT_NAME": "import"}
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD")
_NEUTRAL = ("CACHE", "EXTENDED_ARG", "NOP", "PRECALL")


def kernel_key(kernel):
    """The value-exact key of everything `kernel` reads from Python now (Uncacheable if some of
    it has no value-exact form)."""
    method = getattr(kernel, "cache_key", None)
    if method is not None and not isinstance(kernel, types.FunctionType):
        return Exact(("kernel", type(kernel), method()))   # lngb's own kernels know their key
    if not isinstance(kernel, types.FunctionType):
        raise Uncacheable(f"a {type(kernel).__name__} kernel names no key of its own (define "
                          "cache_key() or pass a function)")
    return Exact(("kernel", _freeze(kernel, {})))


def _trusted(value):
    if getattr(value, "__name__", None) in UNTRUSTED_BUILTINS and getattr(
            value, "__self__", None) is sys.modules["builtins"]:
        return False
    module = getattr(value, "__module__", None) or ""
    if isinstance(value, types.ModuleType):
        module = value.__name__
    if module.startswith(UNTRUSTED_MODULES):
        return False
    return module.split(".")[0] in TRUSTED_MODULES


_KEPT = (("trusted",), ("module",))
_STABLE = {}   # id -> (value, key part) of values whose part never changes (held: no id reuse)


def _freeze(value, seen):
    """`value` as a key part; functions and classes with their own reads."""
    stable = _STABLE.get(id(value))
    if stable is not None and stable[0] is value:
        return stable[1]
    part = _part(value, seen)
    if isinstance(value, (enum.Enum, np.dtype)) or type(part) is tuple and part[:1] in _KEPT:
        if len(_STABLE) > 65536:
            _STABLE.clear()
        _STABLE[id(value)] = (value, part)
    return part


def _part(value, seen):
    if isinstance(value, (types.FunctionType, type)):
        if id(value) in seen:
            return ("seen", id(value))
        seen[id(value)] = value
        if _trusted(value):
            return ("trusted", id(value))
        if isinstance(value, type):
            return ("class", id(value), *(_freeze(f, seen) for f in _methods(value)))
        return ("function", value.__code__, _freeze_reads(value, seen))
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__, id(value))   # its attributes read are chains of their own
    if isinstance(value, types.MethodType):
        return ("method", _freeze(value.__func__, seen), _freeze(value.__self__, seen))
    if isinstance(value, (types.BuiltinFunctionType, np.ufunc)) or callable(value) and (
            type(value).__module__ or "").split(".")[0] in ("numpy", "builtins"):
        if _trusted(value) or isinstance(value, np.ufunc):
            return ("trusted", id(value))
        raise Uncacheable(f"the kernel calls {value!r}, which may keep hidden state")
    if isinstance(value, np.ndarray):
        if value.nbytes > SMALL_ARRAY:
            raise Uncacheable(f"the kernel reads a {value.nbytes}-byte array from Python")
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return ("dict", *((_freeze(k, seen), _freeze(v, seen)) for k, v in value.items()))
    if isinstance(value, (tuple, list, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return (type(value).__name__, *(_freeze(v, seen) for v in items))
    return exact(value)


def _methods(cls):
    return [v for k, v in vars(cls).items() if isinstance(v, types.FunctionType)]


def _freeze_reads(function, seen):
    """The values of every name `function`'s code loads from its globals or closure."""
    cells = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
    parts = [_freeze(function.__defaults__, seen), _freeze(function.__kwdefaults__, seen)]
    for kind, name, attrs in chains(function.__code__):
        try:
            if kind == "import":   # what it reads of the module is then on a local
                if not _trusted(sys.modules.get(name) or __import__(name)):
                    raise Uncacheable(f"{function.__qualname__} imports {name}")
                continue
            if kind == "cell":
                if name not in cells:
                    continue   # a cell of the function's own: one of its locals
                value = cells[name].cell_contents
            else:
                value = _global(function, name)
            for attr in attrs:
                value = getattr(value, attr)
        except (AttributeError, KeyError, ValueError, NameError, ImportError):
            raise Uncacheable(f"{function.__qualname__} reads {'.'.join((name, *attrs))}, "
                              "which does not resolve before the call") from None
        parts.append((name, attrs, _freeze(value, seen)))
    return tuple(parts)


def _global(function, name):
    namespace = function.__globals__
    if name in namespace:
        return namespace[name]
    builtins = namespace.get("__builtins__", sys.modules["builtins"])
    builtins = builtins if isinstance(builtins, dict) else vars(builtins)
    if name in builtins:
        return builtins[name]
    raise NameError(name)


@lru_cache(maxsize=4096)
def chains(code):
    """(root kind, root name, attributes) of each chain of loads in `code` and the code
    objects nested in it: a global or cell, then the attributes loaded from it in a row."""
    found = []
    current = None
    for instruction in dis.get_instructions(code):
        op = instruction.opname
        if op in _NEUTRAL:
            continue
        if op in _ATTRS and current is not None:
            current[2].append(instruction.argval)
            continue
        if current is not None:
            found.append((current[0], current[1], tuple(current[2])))
            current = None
        if op in _ROOTS:
            current = (_ROOTS[op], instruction.argval, [])
    if current is not None:
        found.append((current[0], current[1], tuple(current[2])))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found.extend(chains(const))
    return tuple(dict.fromkeys(found))
