"""Event rows: entries of the table that order or configure but change no UB byte (barriers,
flags, mask setup, scalar accesses, SyncAll, Undefine). Columns: PipeBarrier DST = pipe;
SetFlag/WaitFlag DST = source pipe, SRC0 = destination pipe, SRC1 = event id; mask setup:
REG_* = the register it leaves; GetValue/SetValue: DST = UB address, SRC0 = bytes;
Undefine: DST = address, SRC0 = bytes."""
from .program import DST, SRC0, SRC1, new_row, set_register
from .table import TABLE


def issue_event(core, name, dst=0, src0=0, src1=0, *, pipe=None, register=None):
    """Issue event `name` on `core`; `register` = (mode, high, low) it leaves in the mask
    register (default: unchanged)."""
    row = new_row(TABLE[name], pipe)
    row[DST], row[SRC0], row[SRC1] = dst, src0, src1
    set_register(row, *(register or (core.mask_mode, core.mask_high, core.mask_low)))
    core.issue(row)
