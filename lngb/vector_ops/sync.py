"""PipeBarrier, SetFlag, WaitFlag, SyncAll: events on the current core (spec §7.2)."""
from ..errors import HazardError, InvalidArgumentError
from ..tensor import current_core
from .checks import check_range, enum_arg
from .events import issue_event
from .types import HardEvent, Pipe


def PipeBarrier(pipe):
    pipe = enum_arg("PipeBarrier", "pipe", Pipe, pipe)
    if pipe == Pipe.PIPE_S:
        raise InvalidArgumentError("PipeBarrier: PIPE_S is not allowed (use PIPE_V, PIPE_MTE2, "
                                   "PIPE_MTE3 or PIPE_ALL)")
    issue_event(current_core(), "PipeBarrier", pipe)


def _event(api, event, event_id):
    core = current_core()
    if not isinstance(event, HardEvent):
        raise InvalidArgumentError(f"{api}: event must be a HardEvent, got {event!r}")
    return core, check_range(api, "event_id", event_id, 0, core.product.event_ids - 1)


def SetFlag(event, event_id):
    core, event_id = _event("SetFlag", event, event_id)
    issue_event(core, "SetFlag", event.src, event.dst, event_id, pipe=event.src)


def WaitFlag(event, event_id):
    core, event_id = _event("WaitFlag", event, event_id)
    if not core.flags.get((event, event_id)):
        error = HazardError if core.mode == "checked" else InvalidArgumentError
        raise error(f"#{core.next_seq()} WaitFlag({event.name}, {event_id}) has no matching "
                    "SetFlag: the device would wait forever")
    issue_event(core, "WaitFlag", event.src, event.dst, event_id, pipe=event.dst)


def SyncAll():
    """Every core of a multi-core operator waits here until all have arrived (AscendC::SyncAll);
    on this core it drains every pipe, like PipeBarrier(PIPE_ALL). The multi-core runner
    starts the next phase of any core only when all cores have issued it."""
    issue_event(current_core(), "SyncAll")
