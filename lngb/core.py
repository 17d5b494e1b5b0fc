"""The emulated AI Core: UB bytes, mask register, event flags, allocator, instruction hook point."""
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import CapacityError, HazardError, InvalidArgumentError
from .products import get_product
from .tensor import UB_POSITIONS, LocalTensor, pop_core, push_core
from .vector_ops.kernels import execute
from .vector_ops.program import (EVENT_BASE, GM_SLOT, GM_SLOTS, N_COLS, OP, SCALAR_ACCESS,
                                 SET_FLAG, WAIT_FLAG, event_row)
from .sanitizer import Sanitizer
from .trace import TraceRecord, call_site, describe_operands
from .vector_ops.types import MaskMode, Pipe

MODES = ("fast", "observed", "checked")
FULL_MASK = (1 << 64) - 1
NO_GM = np.zeros(0, dtype=np.uint8)
NO_GMS = (NO_GM,) * GM_SLOTS
# The Ascend 950's vector registers (register-based kernels), placed after the UB bytes so the
# same kernels can address them; the allocator never hands them out.
VREG_COUNT, VREG_BYTES = 8, 256


@dataclass
class Program:
    """A recorded instruction stream (events included), the core state it leaves behind, the
    GM buffer sizes it was recorded with and the warnings its body raised."""
    rows: np.ndarray
    end_state: dict
    gm_sizes: tuple
    warnings: tuple
    records: list  # a TraceRecord per row, for stepping through the program
    checked: Any = None  # the sanitizer state after checking it from a pristine core


PROGRAM_CACHE_SIZE = 512
_PROGRAMS = OrderedDict()
_LIVE_KEYS = set()  # kernels that use scalar accesses: they always run live


class _ScalarAccess(Exception):
    """GetValue/SetValue during a dry run: the body depends on UB data, so it runs live."""


def _remember(key, program):
    _PROGRAMS[key] = program
    if len(_PROGRAMS) > PROGRAM_CACHE_SIZE:
        _PROGRAMS.popitem(last=False)


class AICore:
    """One AI Core vector unit. `mode`: "fast", "observed" (trace) or "checked" (sanitizer)."""

    @staticmethod
    def ub_bytes(product):
        """Bytes of a core's UB array: the physical UB, then the vector registers."""
        return get_product(product).ub_size + VREG_COUNT * VREG_BYTES

    def __init__(self, product="atlas-a2", mode="fast", *, sat_mode=None, reserved_bytes=None,
                 _ub=None):
        self.product = get_product(product)
        if mode not in MODES:
            raise InvalidArgumentError(f"AICore: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        if sat_mode is None:
            sat_mode = self.product.saturation_default
        if sat_mode not in (True, False):
            raise InvalidArgumentError(f"AICore: sat_mode must be None, True or False, got "
                                       f"{sat_mode!r}")
        if self.product.saturation_only and not sat_mode:
            raise InvalidArgumentError(f"AICore: {self.product.name} supports saturation mode "
                                       "only (sat_mode=True)")
        self.sat_mode = int(bool(sat_mode))
        self.ub_size = self.product.ub_size
        # _ub: a zeroed array of ub_bytes(product) (the multi-core operator's cores share one)
        self.ub = np.zeros(self.ub_bytes(self.product), np.uint8) if _ub is None else _ub
        self.reserved_bytes = (self.product.reserved_bytes if reserved_bytes is None
                               else int(reserved_bytes))
        if not 0 <= self.reserved_bytes < self.ub_size:
            raise InvalidArgumentError(f"AICore: reserved_bytes must be in [0, {self.ub_size})")
        self.allocated = 0
        self.mask_mode = MaskMode.NORMAL
        self.mask_high = self.mask_low = FULL_MASK
        self.flags = {}
        self.seq = 0
        self.trace = []
        self._recording = None
        self._recording_gms = NO_GMS
        self.sanitizer = (Sanitizer(self.ub.size, self.product.kernel_path == "regbase")
                          if mode == "checked" else None)
        self.last_program = None  # the program the last replaying run_recorded executed
        self._call_memo = {}      # validated count-form calls (vector_ops.memo)
        self.gm_slots = ()        # live runs of multi-core kernels: the GM buffers by slot
        self._last_row = None

    def __repr__(self):
        return (f"AICore({self.product.name!r}, mode={self.mode!r}, ub_size={self.ub_size}, "
                f"allocated={self.allocated})")

    def __enter__(self):
        push_core(self)
        return self

    def __exit__(self, *exc):
        pop_core()

    # --- allocation -----------------------------------------------------------------------
    @property
    def capacity(self):
        """UB bytes the allocator may hand out (physical size minus CANN's reserve)."""
        return self.ub_size - self.reserved_bytes

    @property
    def free_bytes(self):
        return self.capacity - self.allocated

    def alloc(self, shape, dtype, position="VECCALC"):
        """A new LocalTensor, 32-byte aligned; CapacityError when the UB is full."""
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        if position not in UB_POSITIONS:
            raise InvalidArgumentError(f"alloc: position must be one of {UB_POSITIONS}")
        size = int(np.prod(shape))
        if size <= 0:
            raise InvalidArgumentError(f"alloc: shape {shape} has no elements")
        nbytes = -(-size * dtype.itemsize // 32) * 32
        if nbytes > self.free_bytes:
            raise CapacityError(
                f"alloc: {shape} x {dtype.name} needs {nbytes} bytes but only {self.free_bytes} "
                f"of the {self.capacity} allocatable UB bytes are free on {self.product.name}")
        tensor = LocalTensor(self, self.allocated, size, dtype, shape, position)
        self.allocated += nbytes
        return tensor

    def pop_stack_buffer(self, dtype=np.uint8, position="LCM"):
        """All UB not yet allocated, as one temporary tensor (CANN's PopStackBuffer): the
        allocator does not count it, so later allocations may reuse the space."""
        dtype = np.dtype(dtype)
        size = self.free_bytes // dtype.itemsize
        if size == 0:
            raise CapacityError("PopStackBuffer Error! no UB is left beside the allocated tensors")
        return LocalTensor(self, self.allocated, size, dtype, None, position)

    def vreg(self, index, dtype):
        """Vector register `index` as a 256-byte tensor (used by the Ascend 950 kernel path)."""
        if not 0 <= index < VREG_COUNT:
            raise InvalidArgumentError(f"vreg: index {index} outside 0 ~ {VREG_COUNT - 1}")
        dtype = np.dtype(dtype)
        return LocalTensor(self, self.ub_size + VREG_BYTES * index, VREG_BYTES // dtype.itemsize,
                           dtype, None, "VREG")

    # --- the hook point: every instruction and event comes through here ----------------------
    def issue(self, api, pipe, row, operands=(), gm=None):
        """Execute one validated instruction or event row (while recording, only append it).

        `operands` describe the call for the trace; `gm` is a DataCopy's GM byte array."""
        self._last_row = row
        if self._recording is not None:
            if gm is not None:
                row[GM_SLOT] = self._gm_slot(gm)
            self._recording.append(row)
            self._recorded.append(self._trace_record(len(self._recording), api, pipe, row,
                                                     operands))
            return
        if gm is not None and self.gm_slots:  # name the slot in the row, for checks across cores
            row[GM_SLOT] = next((k for k, g in enumerate(self.gm_slots) if g is gm), 0)
        record = None
        if self.mode != "fast":
            record = self._trace_record(self.seq + 1, api, pipe, row, operands)
            if self.sanitizer is not None:
                self.sanitizer.check(record, self.seq + 1)
        self.seq += 1
        if row[OP] < EVENT_BASE:
            gms = NO_GMS
            if gm is not None:
                if not gm.flags.writeable:
                    gm = gm.copy()  # a read-only source: numba wants one array type for all GM
                gms = tuple(gm if k == row[GM_SLOT] else NO_GM for k in range(GM_SLOTS))
            execute(self.ub, gms, row.reshape(1, -1))
        if record is not None:
            self.trace.append(record)

    def _trace_record(self, seq, api, pipe, row, operands):
        return TraceRecord(seq, Pipe(pipe).name, api, row.copy(), describe_operands(operands),
                           call_site(), (int(self.mask_mode), self.mask_high, self.mask_low))

    def set_flag(self, event, event_id):
        self.flags[event, event_id] = self.flags.get((event, event_id), 0) + 1
        self.issue("SetFlag", event.src, event_row(SET_FLAG, event.src, event.dst, event_id))

    def wait_flag(self, event, event_id):
        if not self.flags.get((event, event_id)):
            error = HazardError if self.sanitizer is not None else InvalidArgumentError
            raise error(f"#{self.seq + 1} WaitFlag({event.name}, {event_id}) ({call_site()}) has "
                        "no matching SetFlag: the device would wait forever")
        self.flags[event, event_id] -= 1
        self.issue("WaitFlag", event.dst, event_row(WAIT_FLAG, event.src, event.dst, event_id))

    def _scalar_access(self, api, tensor, index):
        if self._recording is not None:
            raise _ScalarAccess(api)
        if self.sanitizer is not None and api == "GetValue":
            self.sanitizer.check_scalar_read(tensor.address + index * tensor.dtype.itemsize,
                                             tensor.dtype.itemsize, self.seq + 1, call_site())
        self.issue(api, Pipe.PIPE_S, event_row(SCALAR_ACCESS,
                                               tensor.address + index * tensor.dtype.itemsize))

    def _host_write(self, tensor, nbytes):
        """Host writes are not instructions, but they initialise UB bytes."""
        if self.sanitizer is not None:
            self.sanitizer.host_write(tensor.address, nbytes)

    # --- validate a whole kernel body, then run it; in fast mode, replay it -------------------
    def _state(self):
        return dict(mask_mode=self.mask_mode, mask_high=self.mask_high, mask_low=self.mask_low,
                    allocated=self.allocated, flags=dict(self.flags))

    def _set_state(self, state):
        self.mask_mode, self.mask_high, self.mask_low = (state["mask_mode"], state["mask_high"],
                                                         state["mask_low"])
        self.allocated, self.flags = state["allocated"], dict(state["flags"])

    def run_recorded(self, key, body, gms=()):
        """Run a data-independent kernel `body()` all or nothing: every instruction is validated
        (a dry run that records the rows) before the first one executes, so a rejected body
        changes neither the UB nor the core's state.

        In fast mode the recorded program is kept under `key` and later calls replay it with one
        jitted call. `key` must determine the instruction stream; the product, saturation mode,
        allocator, mask register and event flags are added here. `gms` lists the GM byte arrays
        the DataCopy instructions use (at most GM_SLOTS); a replay takes new arrays of the same
        sizes in the same order. Warnings the body raised are raised again on every call.
        """
        full_key = (key, self.product.name, self.sat_mode, self.reserved_bytes, self.mask_mode,
                    self.mask_high, self.mask_low, self.allocated,
                    tuple(sorted(self.flags.items(), key=repr)) if self.flags else ())
        if (self._recording is not None or self.mode == "observed" or full_key in _LIVE_KEYS
                or (self.sanitizer is not None and not self.sanitizer.pristine)):
            body()  # part of an enclosing recording, or live: one instruction at a time
            return
        gms = tuple(gms) + NO_GMS[len(gms):]
        program = _PROGRAMS.get(full_key)
        if program is not None:
            _PROGRAMS.move_to_end(full_key)
        else:
            try:
                program = self.record(body, gms)
            except _ScalarAccess:  # the body reads or writes the UB from the scalar unit
                _LIVE_KEYS.add(full_key)
                body()
                return
            _remember(full_key, program)
        for message in program.warnings:
            warnings.warn(message, stacklevel=3)
        if tuple([g.size for g in gms]) != program.gm_sizes:
            raise InvalidArgumentError(f"run_recorded: GM buffers of {[g.size for g in gms]} "
                                       f"bytes, the program was recorded with {program.gm_sizes}")
        if self.sanitizer is not None:
            self._check_program(program)
            left = {k: n - self.flags.get(k, 0) for k, n in program.end_state["flags"].items()}
            self.sanitizer.finish({k: n for k, n in left.items() if n > 0})
        execute(self.ub, gms, program.rows)
        self.seq += len(program.rows)
        self.last_program = program
        self._set_state(program.end_state)

    def _check_program(self, program):
        """Sanitize a program on a pristine core; the outcome is reused by later pristine runs."""
        if program.checked is None:
            start = self.sanitizer.snapshot()
            try:
                for record in program.records:
                    self.sanitizer.check(record, record.seq)
            except Exception:
                self.sanitizer.restore(start)
                raise
            program.checked = self.sanitizer.snapshot()
        else:
            self.sanitizer.restore(program.checked)
        self.trace.extend(program.records)

    def _gm_slot(self, gm):
        for slot, candidate in enumerate(self._recording_gms):
            if candidate is gm:
                return slot
        raise InvalidArgumentError("run_recorded: a DataCopy used a GM buffer not passed in gms")

    def record(self, body, gms=()):
        """The dry run: validate every instruction of `body` and collect its rows, executing
        nothing; the core's state is left as it was. On an error the warnings raised so far are
        passed on. A body that uses GetValue/SetValue cannot be recorded (_ScalarAccess)."""
        gms = tuple(gms) + NO_GMS[len(gms):]
        start = self._state()
        self._recording, self._recording_gms, self._recorded = [], gms, []
        error = None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    body()
                except Exception as exc:  # re-raised below, after the state is restored
                    error = exc
        finally:
            rows, self._recording = self._recording, None
        end_state = self._state()
        self._set_state(start)
        messages = tuple(w.message for w in caught)
        if error is not None:
            if not isinstance(error, _ScalarAccess):
                for message in messages:
                    warnings.warn(message, stacklevel=4)
            raise error
        return Program(np.array(rows, dtype=np.int64).reshape(-1, N_COLS), end_state,
                       tuple(g.size for g in gms), messages, self._recorded)
