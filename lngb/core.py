"""The emulated AI Core: UB bytes, mask register, event flags, an allocator, and the retire point.

Every instruction and event reaches the core as a validated row (`issue`). Recording, the row is
only collected; otherwise it retires in `_retire`: observers check it, it executes, the core's
state advances (sequence number, mask register, flags: the only place that writes them), and
observers and hooks see it. Replays of recorded programs and reissued rows retire in bulk
(`replay`, `reissue`), which only cores whose observers all accept whole programs do; a core with
a plain hook runs live. The core knows nothing of its observers but this protocol:

    check(record)             before the record's effects; may raise to reject it
    retire(record)            after it
    host_write(address, n)    the host wrote UB bytes (not an instruction)
    replays = True            also check_program(program) / retire_program(program)

Observers per mode are registered in MODE_OBSERVERS by lngb.observers.
"""
import contextlib
import os
import threading
import weakref

import greenlet
import numpy as np

from .arguments import check_choice, check_dtype, check_int, check_shape, is_int
from .errors import CapacityError, InvalidArgumentError, check_flag, warn
from .products import (SCALAR_REGISTERS, VREG_BYTES, VREG_COUNT, cmpmask_address, core_bytes,
                       get_product)
from .record import TraceRecord, call_site, describe_operands
from .runtime import recording
from .runtime.cache import Cache, Exact, plain_key
from .tensor import UB_POSITIONS, LocalTensor, pop_core, push_core
from .vector_ops.events import issue_event
from .vector_ops.program import DST, EVENT, GM_SLOT, GM_SLOTS, KIND, OP, SRC0, SRC1, register_after
from .vector_ops import executor
from .vector_ops.table import TABLE
from .vector_ops.types import HardEvent, MaskMode, Pipe

MODES = ("fast", "observed", "checked")


def environment(name):
    """os.environ.get(name). For an unset name that raises and catches a KeyError inside os (1.2
    µs, a tenth of a warm call's Python): CPython's os.environ keeps the encoded names in a dict
    of its own, `_data`, read here directly when there is one."""
    environ = os.environ
    if environ is not _ENVIRON:   # replaced (a test's dict, a subclass): its own get
        return environ.get(name)
    key = _ENCODED_NAMES.get(name)
    if key is None:
        key = _ENCODED_NAMES[name] = environ.encodekey(name)
    value = _ENVIRON_DATA.get(key)
    return None if value is None else environ.decodevalue(value)


# os.environ as the process started, when it is CPython's, with its dict of encoded names
_ENVIRON = os.environ if type(getattr(os.environ, "_data", None)) is dict else None
_ENVIRON_DATA = getattr(_ENVIRON, "_data", None)
_ENCODED_NAMES = {}   # name -> _ENVIRON.encodekey(name)


def default_mode():
    """The mode of every core and host call that passes none: $LNGB_MODE, else "fast"."""
    text = environment("LNGB_MODE")
    if text is None or text == "":
        return "fast"
    if text not in MODES:
        raise InvalidArgumentError(f"LNGB_MODE must be one of {', '.join(MODES)}, got {text!r}")
    return text


def resolve_mode(api, mode):
    """`mode` checked, or the default mode when it is None (an explicit mode wins)."""
    return default_mode() if mode is None else check_choice(api, "mode", mode, MODES)
# Div and Sqrt: "ieee" correctly rounded, subnormals kept; "ftz" subnormal operands and results
# flushed to zero (what the 950 documents; A2/A3/310P are not documented)
DIV_SQRT = ("ieee", "ftz")
MODE_OBSERVERS = {mode: () for mode in MODES}   # mode -> factories core -> observer
FULL_MASK = (1 << 64) - 1
NO_GM = np.zeros(0, dtype=np.uint8)
NO_GMS = (NO_GM,) * GM_SLOTS
# The Ascend 950's vector registers (register-based kernels), placed after the UB bytes so the
# same kernels can address them; the allocator never hands them out.
SET_FLAG, WAIT_FLAG = TABLE["SetFlag"].opcode, TABLE["WaitFlag"].opcode
FLAG_DELTA = {SET_FLAG: 1, WAIT_FLAG: -1}
MASK_MODES = tuple(MaskMode)


CONFIGS = Cache("core configurations")
NORMAL = MaskMode.NORMAL


def checked_config(product, mode, sat_mode, reserved_bytes, div_sqrt):
    """(Product, mode, sat_mode 0/1, div_sqrt, reserved_bytes) of AICore's arguments, validated
    once per distinct plain arguments (runtime.cache.plain_key: True and 1 are different)."""
    key = plain_key(product, mode, sat_mode, reserved_bytes, div_sqrt)
    config = None if key is None else CONFIGS.get(key)
    if config is None:
        config = _check_config(product, mode, sat_mode, reserved_bytes, div_sqrt)
        if key is not None:
            CONFIGS.put(key, config, 256)
    return config


def _check_config(product, mode, sat_mode, reserved_bytes, div_sqrt):
    product = get_product(product, "AICore")
    sat_mode = check_flag("AICore", "sat_mode", sat_mode, optional=True)
    if sat_mode is None:
        sat_mode = product.saturation_default
    if product.saturation_only and not sat_mode:
        raise InvalidArgumentError(f"AICore: {product.name} supports saturation mode "
                                   "only (sat_mode=True)")
    div_sqrt = (product.div_sqrt if div_sqrt is None
                else check_choice("AICore", "div_sqrt", div_sqrt, DIV_SQRT))
    if reserved_bytes is None:
        reserved_bytes = product.reserved_bytes
    reserved_bytes = check_int("AICore", "reserved_bytes", reserved_bytes, 0,
                               product.ub_size - 1)
    return product, mode, int(bool(sat_mode)), div_sqrt, reserved_bytes


class Hook:
    """A function called with each retired record (`AICore.register_hook`)."""

    replays = False  # it must see every instruction: the core runs live while it is attached

    def __init__(self, core, fn):
        self.core, self.fn = weakref.ref(core), fn

    def retire(self, record):
        self.fn(record)

    def remove(self):
        """Detach the hook (again, or once the core is gone, is a no-op)."""
        core = self.core()
        if core is not None:
            core.detach(self)


class AICore:
    """One AI Core vector unit. `mode`: "fast", "observed" (trace) or "checked" (sanitizer);
    None: $LNGB_MODE, else "fast". `sat_mode`: None (the product's), True or False; `div_sqrt`:
    how Div and Sqrt treat subnormals, None (the product's: "ftz" on the 950, whose intrinsics
    flush them to zeros, else "ieee"), "ieee" or "ftz" (DIV_SQRT)."""

    @staticmethod
    def ub_bytes(product):
        """Bytes of a core's UB array: the physical UB, then the vector and scalar registers."""
        return core_bytes(get_product(product).ub_size)

    def __init__(self, product="atlas-a2", mode=None, *, sat_mode=None, reserved_bytes=None,
                 div_sqrt=None, _ub=None, _config=None, _observers=None):
        # _config: `core.config` of a core made with the same arguments (lngb.host caches it);
        # _observers: factories to attach instead of the mode's (MODE_OBSERVERS)
        self.config = _config or checked_config(product, resolve_mode("AICore", mode), sat_mode,
                                                reserved_bytes, div_sqrt)
        self.product, self.mode, self.sat_mode, self.div_sqrt, self.reserved_bytes = self.config
        mode = self.mode
        self.ub_size = self.product.ub_size
        # _ub: a zeroed array of ub_bytes(product) (the multi-core operator's cores share one)
        self.ub = np.zeros(core_bytes(self.ub_size), np.uint8) if _ub is None else _ub
        self.allocated = 0
        self.mask_mode = NORMAL
        self.mask_high = self.mask_low = FULL_MASK
        self.flags = {}
        self.seq = 0
        self.trace = []
        self.recorder = None       # the dry run in progress (runtime.recording)
        self.seq_base = 0          # (while recording) the trace's records before the recording's
        self.scalar_reads = 0      # GetValues so far: they take the scalar registers in turn
        self.last_issued = None    # the row of the last issue (runtime.memo keeps it)
        self.last_program = None   # the program the last replay executed
        self.running_kernel = False  # simulate_kernel's kernel runs on it (host_access warns)
        self.unbound_gm = None       # the retiring DataCopy's GM buffer, if bound to no slot
        self.warned = set()        # messages warned once (warn(once=True)) by live runs
        self.tpipe = None          # the TPipe made last on this core (CANN's GetTPipePtr())
        self.gms = NO_GMS          # GM buffers bound to the slots of DataCopy rows
        self._owner = threading.RLock()
        self._holder, self._holders = None, 0   # the greenlet inside, and how deep
        self._observers = []
        self._checks, self._retires = [], []
        self.memoises = mode == "fast"  # runtime.memo may reissue validated rows
        for factory in MODE_OBSERVERS[mode] if _observers is None else _observers:
            self.attach(factory(self))

    def __repr__(self):
        return (f"AICore({self.product.name!r}, mode={self.mode!r}, ub_size={self.ub_size}, "
                f"allocated={self.allocated})")

    # --- one thread at a time ---------------------------------------------------------------
    def acquire(self):
        """Enter the core from this thread; InvalidArgumentError if another thread, or another
        greenlet of this one (another core's kernel in simulate_kernel), is inside an
        instruction, a kernel or a `with core:` block of it."""
        if not self._owner.acquire(blocking=False):
            raise InvalidArgumentError(
                f"{self!r} is in use by another thread (inside an instruction, a kernel or a "
                "`with core:` block): a core runs one thread's work at a time; give each thread "
                "its own AICore")
        here = greenlet.getcurrent()
        if self._holders and self._holder is not here:
            self._owner.release()
            raise InvalidArgumentError(
                f"{self!r} is in use by another core's kernel (simulate_kernel's cores take "
                "turns in one thread): a kernel may use only its own core's tensors")
        self._holder, self._holders = here, self._holders + 1

    def release(self):
        self._holders -= 1
        if not self._holders:
            self._holder = None
        self._owner.release()

    def __enter__(self):
        self.acquire()
        push_core(self)
        return self

    def __exit__(self, *exc):
        pop_core()
        self.release()

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
        shape = check_shape("alloc", "shape", shape)
        dtype = check_dtype("alloc", "dtype", dtype)
        position = check_choice("alloc", "position", position, UB_POSITIONS)
        size = int(np.prod(shape, dtype=object))
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
        dtype = check_dtype("PopStackBuffer", "dtype", dtype)
        position = check_choice("PopStackBuffer", "position", position, UB_POSITIONS)
        size = self.free_bytes // dtype.itemsize
        if size == 0:
            raise CapacityError("PopStackBuffer Error! no UB is left beside the allocated tensors")
        return LocalTensor(self, self.allocated, size, dtype, None, position)

    def vreg(self, index, dtype):
        """Vector register `index` as a 256-byte tensor (used by the Ascend 950 kernel path)."""
        if not is_int(index) or not 0 <= index < VREG_COUNT:
            raise InvalidArgumentError(f"vreg: index {index!r} outside 0 ~ {VREG_COUNT - 1}")
        dtype = check_dtype("vreg", "dtype", dtype)
        return LocalTensor(self, self.ub_size + VREG_BYTES * int(index),
                           VREG_BYTES // dtype.itemsize, dtype, None, "VREG")

    # --- observers and hooks --------------------------------------------------------------
    def register_hook(self, fn):
        """Call fn(record) after each instruction or event retires, with the record
        `core.trace` holds; returns a handle (`handle.remove()`). While a hook is registered
        the core runs every kernel live, fast mode included. An exception raised by fn stops
        the kernel and reaches the caller; the instruction it saw has retired."""
        if not callable(fn):
            raise InvalidArgumentError(f"register_hook: {fn!r} is not callable")
        return self.attach(Hook(self, fn))

    def attach(self, observer):
        self._observers.append(observer)
        self._sort_observers()
        return observer

    def detach(self, observer):
        if observer in self._observers:
            self._observers.remove(observer)
            self._sort_observers()

    def _sort_observers(self):
        self._checks = [o.check for o in self._observers if hasattr(o, "check")]
        self._retires = [o.retire for o in self._observers if hasattr(o, "retire")]
        self.memoises = self.mode == "fast" and not self._observers and self.recorder is None

    @property
    def replays(self):
        """Whether every observer takes recorded programs whole (else kernels run live)."""
        return not self._observers or all(o.replays for o in self._observers)

    def observer(self, role):
        """The attached observer with this `role` attribute (e.g. "sanitizer"), or None."""
        if not self._observers:
            return None
        return next((o for o in self._observers if getattr(o, "role", None) == role), None)

    @property
    def sanitizer(self):
        return self.observer("sanitizer")

    # --- the retire point -----------------------------------------------------------------
    def issue(self, row, operands=(), gm=None):
        """A validated instruction or event row from the instruction layer (`operands`: what
        the trace shows; `gm`: a DataCopy's GlobalTensor). Recording, it is collected;
        otherwise it retires now."""
        self.acquire()
        try:
            self.last_issued = row
            data = None
            if gm is not None:
                data = gm.gm
                row[GM_SLOT] = self._gm_slot(data)
            record = None
            if self.recorder is not None or self._observers:
                record = TraceRecord(self.seq + 1, row, describe_operands(operands),
                                     call_site(3))
            if self.recorder is not None:
                self.recorder.add(row, record)
                self._advance(row)
                return
            self._retire(row, record, data)
        finally:
            self.release()

    def retire(self, record):
        """Retire a record validated earlier (a recorded program stepped one by one)."""
        self.acquire()
        try:
            self._retire(record.row, record, None)
        finally:
            self.release()

    def _retire(self, row, record, gm):
        unbound = gm if gm is not None and self.gms[row[GM_SLOT]] is not gm else None
        self.unbound_gm = unbound   # a GM buffer bound to no slot, for the checks to name
        for check in self._checks:
            check(record)
        if row[KIND] != EVENT:
            gms = self.gms
            if unbound is not None:
                gms = gms[:row[GM_SLOT]] + (gm,) + gms[row[GM_SLOT] + 1:]
            executor.execute(self.ub, gms, row.reshape(1, -1))
        self._advance(row)
        for retire in self._retires:
            retire(record)

    def _advance(self, row, register=None):
        """The state a retired row leaves: the only writer of seq, mask register and flags.
        `register`: register_after(row), when the caller has it already."""
        self.seq += 1
        mode, self.mask_high, self.mask_low = register or register_after(row)
        self.mask_mode = MASK_MODES[mode]
        delta = FLAG_DELTA.get(int(row[OP]))
        if delta is not None:
            key = (HardEvent((Pipe(int(row[DST])), Pipe(int(row[SRC0])))), int(row[SRC1]))
            count = self.flags.get(key, 0) + delta
            if count:
                self.flags[key] = count
            else:
                del self.flags[key]  # as a replay leaves it: pending flags only

    def replay(self, program, gms):
        """Retire a recorded program in one jitted call (its observers take it whole)."""
        self.acquire()
        try:
            for observer in self._observers:
                observer.check_program(program)
            executor.execute(self.ub, gms, program.rows)
            self.seq += len(program.rows)
            self.set_state(program.end_state)
            self.last_program = program
            for observer in self._observers:
                observer.retire_program(program)
        finally:
            self.release()

    def reissue(self, rows, register):
        """Retire a vector instruction (rows: its row as a [1, N_COLS] array) validated by an
        identical earlier call (runtime.memo); `register` = register_after(its row)."""
        self.acquire()
        try:
            executor.execute(self.ub, self.gms, rows)
            self.seq += 1
            mode, self.mask_high, self.mask_low = register
            self.mask_mode = MASK_MODES[mode]
        finally:
            self.release()

    def retired_in_bulk(self, count, state):
        """`count` rows retired outside the core (a multi-core schedule), leaving `state`."""
        self.seq += count
        self.set_state(state)

    @classmethod
    def replayed(cls, config, ub, program):
        """A fresh core of `config` on `ub`, where the executor has run `program` outside any
        core (lngb.host's warm calls make a core only when asked for one): the program's rows
        retired, its end state the core's. It has no observers, as the run had none (one
        registered for the mode since would not have seen the program)."""
        core = cls(_config=config, _ub=ub, _observers=())
        core.retired_in_bulk(len(program.rows), program.end_state)
        core.last_program = program
        return core

    def _gm_slot(self, data):
        for slot, bound in enumerate(self.gms):
            if bound is data:
                return slot
        if self.recorder is not None:
            raise InvalidArgumentError("run_recorded: a DataCopy used a GM buffer not passed in "
                                       "gms")
        return 0  # live, unbound: the row carries its buffer in slot 0

    def bind_gms(self, gms):
        """Bind GM byte arrays to the slots of DataCopy rows (at most GM_SLOTS)."""
        gms = tuple(gms)
        if len(gms) > GM_SLOTS:
            raise InvalidArgumentError(f"bind_gms: at most {GM_SLOTS} GM buffers, got {len(gms)}")
        self.gms = gms + NO_GMS[len(gms):]

    @contextlib.contextmanager
    def binding(self, gms):
        """Bind GM byte arrays to the slots of DataCopy rows for the duration."""
        before = self.gms
        self.bind_gms(gms)
        try:
            yield self.gms
        finally:
            self.gms = before

    # --- what is not an instruction ---------------------------------------------------------
    def warn(self, message, once=False):
        """A kernel's LngbWarning: kept with a recording (once, and raised again on every
        replay), raised in the calling thread otherwise (`once`: the first time only on this
        core)."""
        if self.recorder is not None:
            self.recorder.warn(message)
        elif not once or message not in self.warned:
            if once:
                self.warned.add(message)
            warn(message)

    def get_value(self, tensor, index):
        """GetValue: the scalar unit reads one element into a scalar register. In a recording
        its value is not known yet: it returns a ScalarRef, which vector instructions take as
        their scalar (their row reads the register when it executes); any other use of it makes
        the kernel run live (recording.ScalarAccess)."""
        size = tensor.dtype.itemsize
        serial, self.scalar_reads = self.scalar_reads, self.scalar_reads + 1
        register = self.scalar_register(serial)
        issue_event(self, "GetValue", tensor.address + index * size, size, register)
        if self.recorder is not None:
            return recording.ScalarRef(self, register, tensor.dtype, serial)
        return tensor._host_view()[index]

    @property
    def cmpmask_address(self):
        """Where the compare-mask register (SetCmpMask, Select) lies in the core's memory."""
        return cmpmask_address(self.ub_size)

    def scalar_register(self, serial):
        """The UB address of the scalar register the `serial`-th GetValue fills (they take the
        SCALAR_REGISTERS in turn)."""
        return self.ub_size + VREG_COUNT * VREG_BYTES + 4 * (serial % SCALAR_REGISTERS)

    def scalar_access(self, api, tensor, index):
        """GetValue/SetValue: a scalar-pipe event. A recording cannot hold one (the kernel's
        stream then depends on UB data): it raises recording.ScalarAccess and runs live."""
        if self.recorder is not None:
            raise recording.ScalarAccess(api)
        size = tensor.dtype.itemsize
        issue_event(self, api, tensor.address + index * size, size)

    def host_access(self, api):
        """A host read or write of tensor data while the core runs a kernel: a recording cannot
        hold one (its stream may depend on the data: recording.ScalarAccess, the kernel runs
        live), and checked mode warns that the device has no such access."""
        if self.recorder is not None:
            raise recording.ScalarAccess(api)
        if self.mode == "checked" and self.running_kernel:
            self.warn(f"{api} inside a kernel: the device cannot touch tensor data from the "
                      "host; move data with DataCopy and read single values with GetValue",
                      once=True)

    def host_write(self, address, nbytes):
        """Host writes are not instructions, but observers see the bytes they initialise."""
        for observer in self._observers:
            if hasattr(observer, "host_write"):
                observer.host_write(address, nbytes)

    # --- state, for recordings and plans ----------------------------------------------------
    def state(self):
        """(mask mode, high, low, allocated bytes, flags) as a hashable tuple."""
        flags = tuple(sorted(((e.name, i), n) for (e, i), n in self.flags.items())) if (
            self.flags) else ()
        # plain ints and strs: already a value-exact key (runtime.cache)
        return Exact((int(self.mask_mode), self.mask_high, self.mask_low, self.allocated, flags))

    def set_state(self, state):
        mode, self.mask_high, self.mask_low, self.allocated, _ = state
        self.mask_mode = MASK_MODES[mode]
        self.flags = self.flags_in(state)

    @staticmethod
    def flags_in(state):
        """The pending SetFlags a `state()` holds: {(HardEvent, id): count}."""
        return {(HardEvent[e], i): n for (e, i), n in state[4]} if state[4] else {}

    def start_recording(self, recorder, seq_base=None):
        """Collect the rows issued from now on in `recorder` instead of retiring them; the
        core's state advances as if they had, and its records are numbered from 1. `seq_base`:
        the records the core's trace holds before them, for messages (next_seq; default: the
        core's own count)."""
        self.acquire()
        self._before_recording = self.state(), self.seq
        self.seq_base = self.seq if seq_base is None else seq_base
        self.recorder, self.seq, self.memoises = recorder, 0, False

    def stop_recording(self):
        """The state the recorded rows leave; the core is back as it was before them."""
        end = self.state()
        state, self.seq = self._before_recording
        self.set_state(state)
        self.recorder, self.seq_base = None, 0
        self._sort_observers()
        self.release()
        return end

    # --- kernels ----------------------------------------------------------------------------
    def run_recorded(self, key, body, gms=(), dry_run_first=False):
        """Run the data-independent kernel `body()` all or nothing (lngb.runtime.recording)."""
        recording.run_recorded(self, key, body, gms, dry_run_first)

    def record(self, body, gms=(), seq_base=None):
        """The dry run of `body()`: its Program, nothing executed (lngb.runtime.recording)."""
        return recording.record(self, body, gms, seq_base)

    def next_seq(self):
        """The number the next record takes in the core's trace (a recording's are numbered
        from 1, its messages as the trace will number them)."""
        return self.seq_base + self.seq + 1

