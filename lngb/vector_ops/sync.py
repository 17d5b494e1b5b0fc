"""PipeBarrier, SetFlag, WaitFlag, SyncAll: recorded as events on the current core (spec §7.2)."""
from ..errors import InvalidArgumentError
from ..tensor import current_core
from .checks import check_range, enum_arg
from .program import PIPE_BARRIER, SYNC_ALL, event_row
from .types import HardEvent, Pipe


def PipeBarrier(pipe):
    pipe = enum_arg("PipeBarrier", "pipe", Pipe, pipe)
    if pipe == Pipe.PIPE_S:
        raise InvalidArgumentError("PipeBarrier: PIPE_S is not allowed (use PIPE_V, PIPE_MTE2, "
                                   "PIPE_MTE3 or PIPE_ALL)")
    current_core().issue("PipeBarrier", Pipe.PIPE_S, event_row(PIPE_BARRIER, pipe))


def _event(api, event, event_id):
    core = current_core()
    if not isinstance(event, HardEvent):
        raise InvalidArgumentError(f"{api}: event must be a HardEvent, got {event!r}")
    return core, check_range(api, "event_id", event_id, 0, core.product.event_ids - 1)


def SetFlag(event, event_id):
    core, event_id = _event("SetFlag", event, event_id)
    core.set_flag(event, event_id)


def WaitFlag(event, event_id):
    core, event_id = _event("WaitFlag", event, event_id)
    core.wait_flag(event, event_id)


def SyncAll():
    """Every core of a multi-core operator waits here until all have arrived (AscendC::SyncAll);
    on this core it drains every pipe, like PipeBarrier(PIPE_ALL). The multi-core runner
    (lngb.multicore) starts the next phase of any core only when all cores have issued it."""
    current_core().issue("SyncAll", Pipe.PIPE_ALL, event_row(SYNC_ALL))
