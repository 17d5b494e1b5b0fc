"""Checked mode of a multi-core kernel: GM accesses across cores, from every core's trace."""
import numpy as np

from ..errors import HazardError, UninitializedReadError
from ..vector_ops.walk import gm_bursts


def gm_accesses(records):
    """(is write, slot, [(start, end) bursts], record) of each GM DataCopy."""
    for record in records:
        bursts = gm_bursts(record.row)
        if bursts is not None:
            yield (*bursts, record)


def check_gm(cores, gms, shared, slot_names, inputs=()):
    """Between two SyncAlls no two cores may write the same GM bytes of the `shared` slots, no
    core may read bytes another writes, no core writes its input slots, and nothing may read
    shared bytes no core has written, except the (slot, start, end) byte ranges of `inputs` (the
    host's data in a shared slot). `gms[c]` are core c's GM buffers by slot (the shared ones the
    same arrays for every core)."""
    phases = [phases_of(core.trace) for core in cores]
    written = {slot: np.zeros(gms[0][slot].size, bool) for slot in shared}
    for slot, start, end in inputs:
        written[slot][start:end] = True
    for phase in range(max(map(len, phases))):
        writer = {slot: np.full(gms[0][slot].size, -1, np.int32) for slot in shared}
        for c in range(len(cores)):
            for write, slot, bursts, record in gm_accesses(_phase(phases[c], phase)):
                if write and slot not in shared:
                    raise HazardError(f"core {c} #{record.seq} {record.name} writes its "
                                      f"{slot_names[slot]} input GM")
                if not write or slot not in shared:
                    continue
                for a, b in bursts:
                    other = writer[slot][a:b]
                    clash = (other >= 0) & (other != c)
                    if clash.any():
                        raise HazardError(
                            f"cores {int(other[clash][0])} and {c} both write GM "
                            f"{slot_names[slot]} bytes [{a}, {b}) with no SyncAll between "
                            f"(core {c} #{record.seq} {record.name}, {record.source})")
                    other[:] = c
        for c in range(len(cores)):  # reads, in the core's order
            own = {slot: np.zeros(gms[0][slot].size, bool) for slot in shared}
            for write, slot, bursts, record in gm_accesses(_phase(phases[c], phase)):
                if slot not in shared:
                    continue
                for a, b in bursts:
                    if write:
                        own[slot][a:b] = True
                        continue
                    w = writer[slot][a:b]
                    if ((w >= 0) & (w != c)).any():
                        raise HazardError(
                            f"core {c} #{record.seq} {record.name} reads GM {slot_names[slot]} "
                            f"bytes [{a}, {b}) that core {int(w[(w >= 0) & (w != c)][0])} writes "
                            "in the same phase: a SyncAll must separate them")
                    if not (written[slot][a:b] | own[slot][a:b]).all():
                        raise UninitializedReadError(
                            f"core {c} #{record.seq} {record.name} reads GM {slot_names[slot]} "
                            f"bytes [{a}, {b}) that no core has written before")
        for slot in shared:
            written[slot] |= writer[slot] >= 0


def phases_of(records):
    """A core's records cut after each SyncAll (a last, maybe empty, phase after the last)."""
    phases, start = [], 0
    for i, record in enumerate(records):
        if record.name == "SyncAll":
            phases.append(records[start:i + 1])
            start = i + 1
    return phases + [records[start:]]


def _phase(phases, k):
    return phases[k] if k < len(phases) else ()
