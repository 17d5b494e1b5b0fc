"""TPipe, TQue and TBuf: Ascend C's UB buffer management and its automatic synchronisation.

`TPipe.InitBuffer` carves a queue's buffers (or a TBuf's one buffer) out of the core's UB. A TQue
moves tensors between pipes and emits the events of spec vector_unit.md §7.4: EnQue = SetFlag
(producer -> consumer), DeQue = WaitFlag of it, FreeTensor = SetFlag (consumer -> producer),
AllocTensor = WaitFlag of the buffer's last FreeTensor. Event ids come from the pipe's pool of
`product.event_ids` ids per event, the lowest not allocated first, as CANN's TPipe hands them
out (AllocEventID / FetchEventID: sff0 of the pool's occupancy bits). A TPipe is its core's pipe
(`core.tpipe`, CANN's GetTPipePtr()) from its construction to its Destroy. `TPipe.Destroy`
waits for the frees nothing waited for, as the TPipe destructor does.
"""
import numpy as np

from ..arguments import check_choice, check_int
from ..errors import CapacityError, InvalidArgumentError
from ..tensor import LocalTensor, current_core
from ..vector_ops import HardEvent, SetFlag, WaitFlag

# GetQueEvt: (EnQue/DeQue event, FreeTensor/AllocTensor event) per queue position.
QUEUE_EVENTS = {"VECIN": (HardEvent.MTE2_V, HardEvent.V_MTE2),
                "VECOUT": (HardEvent.V_MTE3, HardEvent.MTE3_V),
                "VECCALC": (None, None)}
FREE, ALLOCATED, QUEUED = "free", "allocated", "queued"


class TPipe:
    """The UB buffer manager of one core (Ascend C TPipe)."""

    def __init__(self, core=None):
        """TPipe(): the pipe of the current core (the one a kernel runs on, or `with core:`)."""
        self.core = current_core() if core is None else core
        self.base = self.core.allocated  # Destroy gives the UB from here on back
        self.buffers_per_position = {}
        self.queues = []
        self.owned = []     # every TQue and TBuf given buffers
        self.free_ids = {}  # HardEvent -> ids not in use, lowest first
        self.core.tpipe = self   # the core's pipe, as the constructor sets GetTPipePtr()'s

    def InitBuffer(self, que_or_buf, *args):
        """InitBuffer(que, num, len) carves `num` buffers of `len` bytes (rounded up to 32) for a
        TQue; InitBuffer(tbuf, len) one buffer for a TBuf."""
        obj = que_or_buf
        if isinstance(obj, TQue):
            if len(args) != 2:
                raise TypeError("InitBuffer(que, num, len) takes the buffer count and length")
            num, length = args
        elif isinstance(obj, TBuf):
            if len(args) != 1:
                raise TypeError("InitBuffer(tbuf, len) takes the length in bytes")
            num, length = 1, args[0]
        else:
            raise InvalidArgumentError(f"InitBuffer: expects a TQue or TBuf, got {obj!r}")
        if obj.pipe is not None:
            raise InvalidArgumentError(f"InitBuffer: this {type(obj).__name__} already has "
                                       "buffers; InitBuffer it once")
        num, length = check_int("InitBuffer", "num", num, 1), check_int("InitBuffer", "len", length, 1)
        limit = self.core.product.event_ids
        count = self.buffers_per_position.get(obj.position, 0) + num
        if isinstance(obj, TQue) and count > limit:
            raise CapacityError(f"InitBuffer: current size is {count}, max buffer number in same "
                                f"queue position is {limit} ({obj.position} buffers each need "
                                f"an event id on {self.core.product.name})")
        nbytes = -(-length // 32) * 32
        if num * nbytes > self.core.free_bytes:
            raise CapacityError(
                f"InitBuffer: buffer size is {self.core.allocated + num * nbytes}, exceeds the "
                f"limit {self.core.capacity} ({num} x {nbytes} bytes for a {obj.position} "
                f"{type(obj).__name__}; {self.core.free_bytes} bytes are free)")
        if isinstance(obj, TQue):
            self.buffers_per_position[obj.position] = count
            self.queues.append(obj)
        self.owned.append(obj)
        obj.pipe = self
        obj.buffers = [self.core.alloc(nbytes, np.uint8, obj.position) for _ in range(num)]
        obj.reset()

    def AllocEventID(self, event):
        """The lowest id of `event` not allocated (CANN: sff0 of the pool's bits), now
        allocated."""
        event_id = self.FetchEventID(event, "AllocEventID")
        self.free_ids[event].pop(0)
        return event_id

    def FetchEventID(self, event, api="FetchEventID"):
        """The lowest id of `event` not allocated, left free (CANN's FetchEventID)."""
        ids = self.free_ids.setdefault(event, list(range(self.core.product.event_ids)))
        if not ids:
            raise CapacityError(f"{api}: all {self.core.product.event_ids} ids of "
                                f"{event.name} are in use (too many buffers in flight)")
        return ids[0]

    def ReleaseEventID(self, event, event_id):
        """`event_id` of `event` free again (CANN clears its bit: releasing a free id changes
        nothing)."""
        event_id = check_int("ReleaseEventID", "id", event_id, 0, self.core.product.event_ids - 1)
        ids = self.free_ids.setdefault(event, list(range(self.core.product.event_ids)))
        if event_id not in ids:
            ids.append(event_id)
            ids.sort()

    def Destroy(self):
        """Wait for every FreeTensor nothing has waited for and give the UB back (the TPipe
        destructor); its queues and buffers must not be used afterwards."""
        for que in self.queues:
            if que.queued:
                raise InvalidArgumentError(
                    f"TPipe.Destroy: {len(que.queued)} tensor(s) still enqueued in a "
                    f"{que.position} queue; DeQue and FreeTensor them first")
        for que in self.queues:
            que.wait_all_frees()
        for obj in self.owned:  # the buffers go back to the UB: later use is an error
            obj.pipe, obj.buffers = None, []
        self.core.allocated = self.base
        if self.core.tpipe is self:
            self.core.tpipe = None

    # --- state, so a recorded step can be recognised and replayed (multicore planner) ---------
    def state(self):
        return (tuple((e.name, tuple(ids)) for e, ids in sorted(self.free_ids.items(),
                                                                key=lambda kv: kv[0].name)),
                tuple(q.state() for q in self.queues))

    def set_state(self, state):
        ids, queues = state
        self.free_ids = {HardEvent[name]: list(v) for name, v in ids}
        for que, s in zip(self.queues, queues):
            que.set_state(s)


class TQue:
    """TQue<position, depth>: AllocTensor / EnQue / DeQue / FreeTensor with auto-sync events."""

    def __init__(self, position, depth=1):
        self.position = check_choice("TQue", "position", position, tuple(QUEUE_EVENTS))
        self.depth = check_int("TQue", "depth", depth, 1)
        self.enque_event, self.free_event = QUEUE_EVENTS[position]
        self.pipe, self.buffers = None, []

    def reset(self):
        self.status = [FREE] * len(self.buffers)
        self.free_ids = [None] * len(self.buffers)   # the event id of the buffer's last free
        self.queued = []                              # (buffer index, enque event id), FIFO
        self.cursor = 0

    def state(self):
        return tuple(self.status), tuple(self.free_ids), tuple(self.queued), self.cursor

    def set_state(self, state):
        status, free_ids, queued, self.cursor = state
        self.status, self.free_ids, self.queued = list(status), list(free_ids), list(queued)

    def _ready(self, api):
        if self.pipe is None:
            raise InvalidArgumentError(f"TQue.{api}: the queue has no buffers (none given yet, or "
                                       "its TPipe was destroyed); call pipe.InitBuffer(que, "
                                       "num, len) first")

    def _index_of(self, api, tensor):
        for i, buf in enumerate(self.buffers):
            if isinstance(tensor, LocalTensor) and tensor.address == buf.address:
                return i
        raise InvalidArgumentError(f"TQue.{api}: {tensor!r} is not a buffer of this "
                                   f"{self.position} queue")

    def AllocTensor(self, dtype):
        """The next free buffer as a LocalTensor of `dtype`; waits for its last FreeTensor."""
        self._ready("AllocTensor")
        n = len(self.buffers)
        for k in range(n):
            i = (self.cursor + k) % n
            if self.status[i] == FREE:
                break
        else:
            raise InvalidArgumentError(
                f"TQue.AllocTensor: all {n} buffers of the {self.position} queue are in use; "
                "FreeTensor one first (the device would hang)")
        self.cursor = (i + 1) % n
        if self.free_ids[i] is not None:
            self._wait(self.free_event, self.free_ids[i])
            self.free_ids[i] = None
        self.status[i] = ALLOCATED
        return self.buffers[i].ReinterpretCast(dtype)

    def EnQue(self, tensor):
        self._ready("EnQue")
        i = self._index_of("EnQue", tensor)
        if self.status[i] != ALLOCATED:
            raise InvalidArgumentError(f"TQue.EnQue: buffer {i} is {self.status[i]}, not "
                                       "allocated: AllocTensor it first and EnQue it once")
        if len(self.queued) >= self.depth:
            raise InvalidArgumentError(f"TQue.EnQue: the queue already holds depth={self.depth} "
                                       "tensors; DeQue first")
        event_id = None
        if self.enque_event is not None:
            event_id = self.pipe.AllocEventID(self.enque_event)
            SetFlag(self.enque_event, event_id)
        self.status[i] = QUEUED
        self.queued.append((i, event_id))

    def DeQue(self, dtype):
        """The oldest enqueued tensor, as `dtype`; waits for its EnQue's event."""
        self._ready("DeQue")
        if not self.queued:
            raise InvalidArgumentError(f"TQue.DeQue: the {self.position} queue is empty (the "
                                       "device would wait forever); EnQue a tensor first")
        i, event_id = self.queued.pop(0)
        if event_id is not None:
            self._wait(self.enque_event, event_id)
        self.status[i] = ALLOCATED
        return self.buffers[i].ReinterpretCast(dtype)

    def FreeTensor(self, tensor):
        self._ready("FreeTensor")
        i = self._index_of("FreeTensor", tensor)
        if self.status[i] != ALLOCATED:
            raise InvalidArgumentError(f"TQue.FreeTensor: buffer {i} is {self.status[i]}; only "
                                       "an allocated (or dequeued) tensor can be freed")
        if self.free_event is not None:
            self.free_ids[i] = self.pipe.AllocEventID(self.free_event)
            SetFlag(self.free_event, self.free_ids[i])
        self.status[i] = FREE

    def _wait(self, event, event_id):
        """WaitFlag on an event this queue set, and give its id back to the pipe."""
        WaitFlag(event, event_id)
        self.pipe.ReleaseEventID(event, event_id)

    def wait_all_frees(self):
        for i, event_id in enumerate(self.free_ids):
            if event_id is not None:
                self._wait(self.free_event, event_id)
                self.free_ids[i] = None


class TBuf:
    """TBuf<position>: one buffer with no queue semantics (no events, no free)."""

    def __init__(self, position="VECCALC"):
        self.position = check_choice("TBuf", "position", position, tuple(QUEUE_EVENTS))
        self.pipe, self.buffers = None, []

    def reset(self):
        pass

    def Get(self, dtype, length=None):
        """The buffer as a LocalTensor of `dtype` (`length` elements, default all of it)."""
        if self.pipe is None:
            raise InvalidArgumentError("TBuf.Get: no buffer (none given yet, or its TPipe was "
                                       "destroyed); call pipe.InitBuffer(tbuf, len) first")
        tensor = self.buffers[0].ReinterpretCast(dtype)
        if length is None:
            return tensor
        length = check_int("TBuf.Get", "length", length, 1, tensor.size)
        return LocalTensor(tensor.core, tensor.address, length, tensor.dtype, None,
                           tensor.position)
