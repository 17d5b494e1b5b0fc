"""LocalTensor (a typed view into one core's UB), GlobalTensor (GM) and the current core."""
import ctypes
import threading

import numpy as np

from .arguments import check_dtype, check_int, is_int, is_real
from .errors import CapacityError, InvalidArgumentError, OutOfBoundsError
from .runtime.cache import Exact

UB_POSITIONS = ("VECIN", "VECCALC", "VECOUT", "LCM")
MAX_GM_BYTES = 1 << 40   # a copy beyond this is refused before numpy tries it
GM_KINDS = "biufc"       # GM arrays hold numbers: bool, integer, float or complex

_local = threading.local()


def current_core():
    """The core made current by `with core:` (mask and sync calls act on it)."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise InvalidArgumentError(
            "no current AICore: mask and sync calls act on the core entered with `with core:`")
    return stack[-1]


def push_core(core):
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append(core)


def pop_core():
    _local.stack.pop()


def swap_core_stack(stack):
    """Make `stack` (a list) this thread's stack of current cores and return the one it had:
    for a runner that switches between kernels in one thread (lngb.simulate's greenlets)."""
    old = getattr(_local, "stack", [])
    _local.stack = stack
    return old


def _index(api, index, size):
    """An element index in [0, size): an integer, not a float or a bool."""
    if not is_int(index):
        raise InvalidArgumentError(f"{api}: the index must be an integer, got {index!r}")
    if not 0 <= index < size:
        raise OutOfBoundsError(f"{api}: index {index} outside the tensor's {size} elements "
                               f"(0 ~ {size - 1})")
    return int(index)


class LocalTensor:
    """A typed view of `size` elements at UB byte `address` of `core` (Ascend C LocalTensor<T>)."""

    __slots__ = ("core", "address", "size", "dtype", "shape", "position", "_key")

    def __init__(self, core, address, size, dtype, shape=None, position="VECCALC"):
        self._key = None
        self.core = core
        self.address = int(address)
        self.size = int(size)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape) if shape is not None else (self.size,)
        self.position = position

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __repr__(self):
        return (f"LocalTensor<{self.dtype.name}>(address={self.address}, size={self.size}, "
                f"shape={self.shape}, position={self.position})")

    def cache_key(self):
        """Its value-exact key (runtime.cache): every field is a str or an int."""
        if self._key is None:
            self._key = Exact(("LocalTensor", self.address, self.size, self.dtype.str,
                               self.shape, self.position))
        return self._key

    def __getitem__(self, offset):
        """A 1-D view from element `offset` to the end, as Ascend C operator[]."""
        offset = _index(f"LocalTensor[{offset!r}]", offset, self.size)
        return LocalTensor(self.core, self.address + offset * self.dtype.itemsize,
                           self.size - offset, self.dtype, None, self.position)

    def ReinterpretCast(self, dtype):
        """The same bytes as `dtype` elements (as many whole ones as they hold)."""
        dtype = check_dtype("ReinterpretCast", "dtype", dtype)
        if self.nbytes < dtype.itemsize:
            raise InvalidArgumentError(f"ReinterpretCast: the tensor's {self.nbytes} bytes hold no "
                                       f"{dtype.name} element")
        return LocalTensor(self.core, self.address, self.nbytes // dtype.itemsize, dtype,
                           None, self.position)

    def _host_view(self):
        return self.core.ub[self.address:self.address + self.nbytes].view(self.dtype)

    def GetValue(self, index):
        index = _index("GetValue", index, self.size)
        return self.core.get_value(self, index)

    def SetValue(self, index, value):
        index = _index("SetValue", index, self.size)
        if not is_real(value):
            raise InvalidArgumentError(f"SetValue: the value must be a number (not complex), "
                                       f"got {value!r}")
        with np.errstate(over="ignore"):
            try:
                value = np.array(value, dtype=self.dtype)
            except OverflowError:
                raise InvalidArgumentError(f"SetValue: {value!r} does not fit "
                                           f"{self.dtype.name}") from None
        self.core.scalar_access("SetValue", self, index)
        self._host_view()[index] = value

    def read(self):
        """A host copy of the tensor's contents in its allocated shape (no instruction)."""
        self.core.host_access("LocalTensor.read")
        return self._host_view().copy().reshape(self.shape)

    def write(self, array):
        """Host write of `array` (same dtype, at most `size` elements) into the tensor."""
        array = np.asarray(array)
        if array.dtype != self.dtype:
            raise InvalidArgumentError(
                f"LocalTensor.write: array dtype {array.dtype} != tensor dtype {self.dtype}")
        if array.size > self.size:
            raise OutOfBoundsError(
                f"LocalTensor.write: {array.size} elements do not fit in {self.size}")
        self.core.host_access("LocalTensor.write")
        self.core.acquire()
        try:
            self._host_view()[:array.size] = array.reshape(-1)
            self.core.host_write(self.address, array.size * self.dtype.itemsize)
        finally:
            self.core.release()


def gm_bytes(array, api="GlobalTensor"):
    """The array's bytes as a flat, writable uint8 view of the same memory, read-only arrays
    included (lngb never writes a read-only GM array: DataCopy refuses it as a destination).
    A non-contiguous array is copied, after checking the copy's size."""
    array = np.asarray(array)
    flags = array.flags
    if flags.c_contiguous and flags.writeable:
        return array.reshape(-1).view(np.uint8)
    if not flags.c_contiguous:
        if array.nbytes > MAX_GM_BYTES:
            raise CapacityError(f"{api}: a non-contiguous array of {array.nbytes} bytes would "
                                f"have to be copied; lngb copies at most {MAX_GM_BYTES} bytes "
                                "(pass a C-contiguous array)")
        array = np.ascontiguousarray(array)
    flat = array.reshape(-1).view(np.uint8)
    if flat.flags.writeable or flat.size == 0:
        return flat
    buffer = (ctypes.c_uint8 * flat.size).from_address(flat.ctypes.data)
    buffer.lngb_readonly_owner = array  # keeps the memory alive, and marks it read-only
    return np.ctypeslib.as_array(buffer)


def is_readonly(array):
    """Whether `array` (or the array it views) may not be written: not writeable, or a view
    of a read-only array made by gm_bytes."""
    while isinstance(array, np.ndarray):
        if not array.flags.writeable:
            return True
        base = array.base
        if isinstance(base, memoryview):
            return getattr(base.obj, "lngb_readonly_owner", None) is not None
        array = base
    return False


def _describe(value):
    if isinstance(value, np.ndarray):
        return f"a {value.ndim}-D {value.dtype} array"
    return type(value).__name__


class GlobalTensor:
    """GM: wraps a C-contiguous numpy array without copying (writes land in the caller's array)."""

    __slots__ = ("_array", "gm", "offset", "size", "dtype", "readonly")

    def __init__(self, array, *, _gm=None, _offset=0, _size=None):
        if _gm is None:
            if not isinstance(array, np.ndarray):
                raise InvalidArgumentError(f"GlobalTensor wraps a numpy array, got "
                                           f"{type(array).__name__}")
            if array.dtype.kind not in GM_KINDS or array.dtype.itemsize == 0:
                raise InvalidArgumentError(f"GlobalTensor: an array of {array.dtype} has no bytes "
                                           "a DataCopy could move (pass an array of numbers)")
            if not array.flags.c_contiguous:
                raise InvalidArgumentError("GlobalTensor needs a C-contiguous array")
            _gm = gm_bytes(array)
            _size = array.size
        self._array = array
        self.gm = _gm
        self.offset = _offset
        self.size = _size
        self.dtype = array.dtype
        self.readonly = is_readonly(array) or is_readonly(_gm)

    @classmethod
    def in_arena(cls, arena, offset, dtype, size):
        """A GM tensor of `size` elements at byte `offset` of a uint8 arena (a 1-D, C-contiguous
        uint8 array)."""
        api = "GlobalTensor.in_arena"
        if not (isinstance(arena, np.ndarray) and arena.dtype == np.uint8 and arena.ndim == 1
                and arena.flags.c_contiguous):
            raise InvalidArgumentError(f"{api}: the arena must be a 1-D C-contiguous uint8 array, "
                                       f"got {_describe(arena)}")
        offset = check_int(api, "offset", offset, 0)
        dtype = check_dtype(api, "dtype", dtype)
        size = check_int(api, "size", size, 0)
        if offset + size * dtype.itemsize > arena.size:
            raise OutOfBoundsError(f"GlobalTensor.in_arena: {size} x {dtype.name} at byte {offset} "
                                   f"does not fit the {arena.size}-byte arena")
        view = arena[offset:offset + size * dtype.itemsize].view(dtype)
        return cls(view, _gm=arena, _offset=offset, _size=size)

    def __getitem__(self, offset):
        offset = _index(f"GlobalTensor[{offset!r}]", offset, self.size)
        flat = self._array.reshape(-1)[offset:]
        return GlobalTensor(flat, _gm=self.gm, _offset=self.offset + offset * self.dtype.itemsize,
                            _size=self.size - offset)

    @property
    def array(self):
        """The host's numpy view of the tensor. Inside a kernel this is a host read of GM, which
        the device cannot do (its way is a DataCopy): the kernel then runs live, and checked
        mode warns."""
        stack = getattr(_local, "stack", None)
        if stack:
            stack[-1].host_access("GlobalTensor.array (a host read of GM)")
        return self._array

    def __array__(self, dtype=None, copy=None):
        array = self.array
        return array if dtype is None else array.astype(dtype)

    def __repr__(self):
        return f"GlobalTensor<{self.dtype.name}>(size={self.size}, offset={self.offset})"
