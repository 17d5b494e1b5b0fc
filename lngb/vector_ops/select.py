"""SetCmpMask and Select's tensor-scalar mode (spec layernorm.md §4.2).

SetCmpMask(src) loads the compare-mask register (CMPMASK, 16 bytes) from UB; the no-mask form
Select(dst, selMask, src0, repeatTime, BinaryRepeatParams) then gives each active lane src0's
element where the lane's selMask bit is 1, else CMPMASK's first sizeof(T) bytes as a T. The
bits move unchanged. Repeat r, lane l reads selMask bit r * (256 / sizeof(T)) + l (LSB first),
whatever the src1 strides (UNCONFIRMED); the mask register and mode apply as to any vector
instruction, and inactive lanes keep dst.
"""
from ..arguments import UNIT_DTYPES
from ..errors import AlignmentError, OutOfBoundsError
from ..products import CMPMASK_BYTES
from .base import FLOAT_TYPES, Operand, check_same_dtype, elementwise_row
from .checks import Lanes, check_local, check_range
from .program import (COUNTER, DST, MASK0, MASK1, REPEAT, SCALAR_AT, SRC0, SRC1, as_uint64,
                      new_row, set_register)
from .types import MASK_PLACEHOLDER, BinaryRepeatParams

MASK_TYPES = tuple(d for d in UNIT_DTYPES if d.kind == "u")


def make_set_cmp_mask_wrapper(entry):
    api = entry.name

    def SetCmpMask(src):
        """SetCmpMask(src): the compare-mask register := the 16 UB bytes at src (16-byte
        aligned)."""
        core = getattr(src, "core", None)
        check_local(api, "src", src, core, UNIT_DTYPES, align=1)
        if src.address % 16:
            raise AlignmentError(f"{api}: src start address {src.address} must be aligned to 16 "
                                 "bytes")
        if src.address + CMPMASK_BYTES > core.ub_size:
            raise OutOfBoundsError(f"{api}: src reads UB bytes [{src.address}, "
                                   f"{src.address + CMPMASK_BYTES}), beyond the UB")
        row = new_row(entry)
        row[DST], row[SRC0], row[SRC1] = src.address, CMPMASK_BYTES, core.cmpmask_address
        set_register(row, core.mask_mode, core.mask_high, core.mask_low)
        core.issue(row, (Operand("src", src),))

    return SetCmpMask


def make_select_wrapper(entry):
    api = entry.name

    def Select(dst, selMask, src0, repeatTime, repeatParams=None):
        """Select(dst, selMask, src0, repeatTime, BinaryRepeatParams): the tensor-scalar mode,
        under the mask register (set it first: SetVectorMask, or counter mode's count)."""
        core = getattr(dst, "core", None)
        operands = (("dst", dst), ("selMask", selMask), ("src0", src0))
        for name, t in (operands[0], operands[2]):
            check_local(api, name, t, core, FLOAT_TYPES, operands)
        check_local(api, "selMask", selMask, core, MASK_TYPES, operands)
        check_same_dtype(api, operands[0], operands[2])
        p = BinaryRepeatParams() if repeatParams is None else repeatParams
        field = lambda name: check_range(api, name, getattr(p, name, None), 0, 255)
        row = elementwise_row(
            entry, Operand("dst", dst, field("dstBlkStride"), field("dstRepStride")),
            (Operand("src0", src0, field("src0BlkStride"), field("src0RepStride")),),
            MASK_PLACEHOLDER, repeatTime, is_set_mask=False)
        _check_sel_mask(api, selMask, row, 256 // dst.dtype.itemsize)
        row[SRC1], row[SCALAR_AT] = selMask.address, core.cmpmask_address + 1
        core.issue(row, (Operand("dst", dst), Operand("src0", src0),
                         Operand("selMask", selMask)))

    return Select


def _check_sel_mask(api, sel_mask, row, epr):
    """selMask holds a bit for every active lane: the bits up to the last active lane's."""
    lanes = Lanes.from_row_mask(epr, int(row[COUNTER]), as_uint64(row[MASK0]),
                                as_uint64(row[MASK1]), int(row[REPEAT]))
    if lanes.tail:
        last = lanes.full * epr + lanes.tail - 1
    else:
        last = (lanes.full - 1) * epr + lanes.bits.bit_length() - 1 if lanes.full else -1
    needed = (last + 8) // 8
    if needed > sel_mask.nbytes:
        raise OutOfBoundsError(f"{api}: the active lanes read {needed} bytes of selMask (a bit "
                               f"per lane, {epr} a repeat), but it has {sel_mask.nbytes}")
