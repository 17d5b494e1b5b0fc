"""LocalTensor (a typed view into one core's UB), GlobalTensor (GM) and the current core."""
import threading

import numpy as np

from .errors import InvalidArgumentError, OutOfBoundsError

UB_POSITIONS = ("VECIN", "VECCALC", "VECOUT", "LCM")

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


class LocalTensor:
    """A typed view of `size` elements at UB byte `address` of `core` (Ascend C LocalTensor<T>)."""

    __slots__ = ("core", "address", "size", "dtype", "shape", "position")

    def __init__(self, core, address, size, dtype, shape=None, position="VECCALC"):
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

    def __getitem__(self, offset):
        """A 1-D view from element `offset` to the end, as Ascend C operator[]."""
        offset = int(offset)
        if not 0 <= offset < self.size:
            raise OutOfBoundsError(
                f"LocalTensor[{offset}]: offset must be in [0, {self.size}) for a tensor of "
                f"{self.size} {self.dtype.name} elements at UB address {self.address}")
        return LocalTensor(self.core, self.address + offset * self.dtype.itemsize,
                           self.size - offset, self.dtype, None, self.position)

    def ReinterpretCast(self, dtype):
        dtype = np.dtype(dtype)
        return LocalTensor(self.core, self.address, self.nbytes // dtype.itemsize, dtype,
                           None, self.position)

    def _host_view(self):
        return self.core.ub[self.address:self.address + self.nbytes].view(self.dtype)

    def GetValue(self, index):
        self._check_index(index, "GetValue")
        self.core._scalar_access("GetValue", self, index)
        return self._host_view()[index]

    def SetValue(self, index, value):
        self._check_index(index, "SetValue")
        self.core._scalar_access("SetValue", self, index)
        self._host_view()[index] = value
        self.core._host_write(self[index], self.dtype.itemsize)

    def _check_index(self, index, api):
        if not 0 <= index < self.size:
            raise OutOfBoundsError(
                f"{api}({index}): index outside the tensor's {self.size} elements")

    def read(self):
        """A host copy of the tensor's contents in its allocated shape (no instruction)."""
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
        self._host_view()[:array.size] = array.reshape(-1)
        self.core._host_write(self, array.size * self.dtype.itemsize)


class GlobalTensor:
    """GM: wraps a C-contiguous numpy array without copying (writes land in the caller's array)."""

    __slots__ = ("array", "gm", "offset", "size", "dtype")

    def __init__(self, array, *, _gm=None, _offset=0, _size=None):
        if _gm is None:
            array = np.asarray(array)
            if not array.flags.c_contiguous:
                raise InvalidArgumentError("GlobalTensor needs a C-contiguous array")
            _gm = array.reshape(-1).view(np.uint8)
            _size = array.size
        self.array = array
        self.gm = _gm
        self.offset = _offset
        self.size = _size
        self.dtype = array.dtype

    @classmethod
    def in_arena(cls, arena, offset, dtype, size):
        """A GM tensor of `size` elements at byte `offset` of a uint8 arena."""
        dtype = np.dtype(dtype)
        if offset < 0 or offset + size * dtype.itemsize > arena.size:
            raise OutOfBoundsError(f"GlobalTensor.in_arena: {size} x {dtype.name} at byte {offset} "
                                   f"does not fit the {arena.size}-byte arena")
        view = arena[offset:offset + size * dtype.itemsize].view(dtype)
        return cls(view, _gm=arena, _offset=offset, _size=size)

    def __getitem__(self, offset):
        offset = int(offset)
        if not 0 <= offset < self.size:
            raise OutOfBoundsError(f"GlobalTensor[{offset}]: offset outside [0, {self.size})")
        flat = self.array.reshape(-1)[offset:]
        return GlobalTensor(flat, _gm=self.gm, _offset=self.offset + offset * self.dtype.itemsize,
                            _size=self.size - offset)

    def __repr__(self):
        return f"GlobalTensor<{self.dtype.name}>(size={self.size}, offset={self.offset})"
