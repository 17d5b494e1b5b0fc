"""Outputs that share bytes with what an API's kernel reads after writing them: one check for
every API (LayerNormGradBeta, LayerNormGrad). The device computes such calls without a word and
gives wrong bits; lngb gives the same bits and says so (a LngbWarning), or raises HazardError in
checked mode."""
from typing import NamedTuple

from ..errors import HazardError


class Read(NamedTuple):
    """A tensor the kernel reads after its first write of an output: `nbytes` from its address.
    `in_place`: an output exactly on it (the same address) is fine, each element being read
    before it is written; `why`: what the kernel does with it, if not just reading it."""
    name: str
    tensor: object
    nbytes: int
    in_place: bool = False
    why: str = None


def check_shared_bytes(core, api, outputs, reads):
    """`outputs`: (name, tensor, bytes the kernel writes from its address), in the kernel's
    order; `reads`: a Read each. An output that shares bytes with one of `reads`, or with a
    later output, makes the results wrong: a LngbWarning on `core` says so (HazardError in
    checked mode)."""
    for k, (name, out, nbytes) in enumerate(outputs):
        later = [Read(n, o, b, why="the kernel writes too") for n, o, b in outputs[k + 1:]]
        for read in list(reads) + later:
            other = read.tensor
            if read.in_place and other.address == out.address:
                continue
            start = max(out.address, other.address)
            end = min(out.address + nbytes, other.address + read.nbytes)
            if start < end:
                why = read.why or f"the kernel reads after its first write of {name}"
                message = (f"{api}: {name} (UB bytes [{out.address}, {out.address + nbytes})) "
                           f"shares bytes [{start}, {end}) with {read.name} (UB bytes "
                           f"[{other.address}, {other.address + read.nbytes})), which {why}: "
                           "the results are wrong, as they would be on the device")
                if core.mode == "checked":
                    raise HazardError(message)
                core.warn(message)
