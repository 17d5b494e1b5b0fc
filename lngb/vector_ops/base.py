"""What every vector instruction wrapper shares: mask resolution, operand checks, the row."""
import numpy as np

from ..arguments import check_int, is_real
from ..errors import InvalidArgumentError, check_flag
from ..runtime.recording import ScalarAccess, ScalarRef
from .checks import (UINT32_MAX, UINT64_MAX, Lanes, check_inside, check_no_partial_overlap,
                     check_range, footprint)
from .program import (COUNTER, DST, DST_BLK, DST_REP, DT_DST, DT_SRC, DTYPE_CODE, FLAT, MASK0,
                      MASK1, MASK_SETS, REPEAT, ROUND, SAT, SCALAR, SCALAR_AT, SOURCES, SRC0,
                      SRC0_BLK, SRC0_REP, SRC1, SRC1_BLK, SRC1_REP, as_int64, new_row,
                      set_register)
from .types import MASK_PLACEHOLDER, MaskMode
from .walk import flat_elements

FLOAT_TYPES = (np.dtype(np.float16), np.dtype(np.float32))
FULL = UINT64_MAX


def continuous_mask_bits(length):
    """SetMask(len): the low `len` lanes as (high, low) words."""
    if length >= 128:
        return FULL, FULL
    if length >= 64:
        return (1 << (length - 64)) - 1, FULL
    return 0, (1 << length) - 1


def mask_from_argument(api, mode, mask, epr):
    """The register value (high, low) an instruction's mask argument sets, as Ascend C."""
    if mode == MaskMode.COUNTER:
        count = mask[0] if isinstance(mask, (list, tuple)) and len(mask) else mask
        return 0, check_range(api, "mask (counter-mode count)", count, 0, UINT32_MAX)
    if isinstance(mask, (list, tuple)) or (isinstance(mask, np.ndarray) and mask.ndim):
        if len(mask) != 2:
            raise InvalidArgumentError(f"{api}: a bitwise mask is [mask0, mask1], got {len(mask)} "
                                       "words")
        low = check_range(api, "mask[0]", mask[0], 0, UINT64_MAX)
        high = check_range(api, "mask[1]", mask[1], 0, UINT64_MAX if epr == 128 else 0)
        return high, low
    return continuous_mask_bits(check_range(api, "mask", mask, 0, epr))


def resolve_mask(api, core, mask, is_set_mask, epr, mode=None):
    """-> (counter, word0, word1, register): the row's mask words and the (high, low) register
    value the call leaves behind (the core writes it when the row retires). `mode`: the mask
    mode to read the argument in (default: the core's)."""
    mode = core.mask_mode if mode is None else mode
    check_flag(api, "is_set_mask", is_set_mask)
    if is_set_mask:
        if mask is MASK_PLACEHOLDER:
            raise InvalidArgumentError(
                f"{api}: MASK_PLACEHOLDER needs is_set_mask=False (use the mask register as set)")
        high, low = mask_from_argument(api, mode, mask, epr)
    elif mask is not MASK_PLACEHOLDER:
        raise InvalidArgumentError(
            f"{api}: with is_set_mask=False the mask argument must be MASK_PLACEHOLDER")
    else:
        high, low = core.mask_high, core.mask_low
    if mode == MaskMode.COUNTER:
        return 1, check_range(api, "counter-mode mask count", low, 0, UINT32_MAX), 0, (high, low)
    return 0, low, high if epr == 128 else 0, (high, low)


class Operand:
    """A tensor with its block and repeat strides, as one instruction uses it."""

    __slots__ = ("name", "tensor", "blk", "rep", "extent")

    def __init__(self, name, tensor, blk=1, rep=8):
        self.name, self.tensor, self.blk, self.rep = name, tensor, blk, rep
        self.extent = None


def issue_elementwise(entry, dst, sources, mask, repeat, *, is_set_mask=True, scalar=0,
                      round_mode=0, sat_mode=None, saturates=True, reads=True):
    """Validate and issue one element-wise instruction (count form when `repeat` is None).
    `scalar`: the scalar operand's bits in dst's type (scalar_bits); `saturates=False`: the
    result moves bits and ignores the saturation mode (Duplicate); `reads=False`: the result
    does not depend on the sources, which the row then does not read."""
    row = elementwise_row(entry, dst, sources, mask, repeat, is_set_mask=is_set_mask,
                          scalar=scalar, round_mode=round_mode, sat_mode=sat_mode,
                          saturates=saturates, reads=reads)
    dst.tensor.core.issue(row, (dst, *sources))


def elementwise_row(entry, dst, sources, mask, repeat, *, is_set_mask=True, scalar=0,
                    round_mode=0, sat_mode=None, saturates=True, reads=True):
    """issue_elementwise's row, validated, not issued.

    An instruction on the 950's vector registers (VREG operands) stands for a register-based
    op: its mask is a MaskReg (a normal-mode mask), and the global mask register is left as is."""
    api = entry.name
    core = dst.tensor.core
    epr = 256 // max(o.tensor.dtype.itemsize for o in (dst, *sources))
    on_registers = any(o.tensor.position == "VREG" for o in (dst, *sources))
    count_form = repeat is None
    if count_form:
        if is_set_mask is not True:
            raise InvalidArgumentError(f"{api}: the count form always sets the mask itself")
        counter, word0, word1 = 1, check_range(api, "count", mask, 0, UINT32_MAX), 0
        repeat, register, mode = 1, (FULL, FULL), MaskMode.NORMAL  # as on A2/A3
    else:
        repeat = check_range(api, "repeatTime", repeat, 0, 255)
        mode = MaskMode.NORMAL if on_registers else core.mask_mode
        counter, word0, word1, register = resolve_mask(api, core, mask, is_set_mask, epr, mode)
    if on_registers:
        mode, register = core.mask_mode, (core.mask_high, core.mask_low)
    lanes = Lanes.from_row_mask(epr, counter, word0, word1, repeat)
    for operand in (dst, *sources):
        operand.extent = footprint(operand.tensor.address, operand.tensor.dtype.itemsize,
                                   operand.blk, operand.rep, lanes)
        check_inside(api, operand.name, operand.tensor, operand.extent)
    for src in sources:
        check_no_partial_overlap(api, dst, src, lanes)

    # operands the instruction does not read are named as dst (kernels never use them)
    src0, src1 = (tuple(sources) + (Operand("none", dst.tensor, 0, 0),) * 2)[:2]
    row = new_row(entry)
    row[DT_DST] = DTYPE_CODE[dst.tensor.dtype]
    row[DT_SRC] = DTYPE_CODE[(sources[0] if sources else dst).tensor.dtype]
    row[DST], row[SRC0], row[SRC1] = dst.tensor.address, src0.tensor.address, src1.tensor.address
    if isinstance(scalar, ScalarRef):
        if scalar.core is not core:
            raise ScalarAccess(api)
        row[SCALAR_AT] = scalar.address + 1
    else:
        row[SCALAR] = scalar
    row[COUNTER], row[MASK0], row[MASK1] = counter, as_int64(word0), as_int64(word1)
    row[REPEAT] = repeat
    row[DST_BLK], row[SRC0_BLK], row[SRC1_BLK] = dst.blk, src0.blk, src1.blk
    row[DST_REP], row[SRC0_REP], row[SRC1_REP] = dst.rep, src0.rep, src1.rep
    row[ROUND] = round_mode
    row[SAT] = 0 if not saturates else (core.sat_mode if sat_mode is None else int(bool(sat_mode)))
    row[SOURCES] = entry.family.sources if reads else 0
    row[MASK_SETS] = 4 if count_form else int(is_set_mask)
    row[FLAT] = flat_elements(row)
    set_register(row, mode, *register)
    return row


def scalar_bits(api, value, dtype):
    """The scalar converted to the tensor's dtype (RNE; beyond the type's range -> inf), as its
    bits; a GetValue's ScalarRef of the same recording and type is passed on as it is. An int16
    scalar must be an integer in int16's range."""
    if isinstance(value, ScalarRef):
        if not value.usable_by(value.core, np.dtype(dtype)):
            raise ScalarAccess(api)   # converted, stale or foreign: the kernel runs live
        return value
    if dtype == np.int16:
        return check_int(api, "the int16 scalar", value, -32768, 32767) & 0xFFFF
    if not is_real(value):
        raise InvalidArgumentError(f"{api}: the scalar {value!r} is not a number")
    try:
        with np.errstate(over="ignore"):
            as_dtype = np.array(value, dtype=dtype)
    except OverflowError:
        raise InvalidArgumentError(f"{api}: the scalar {value} is beyond the range of a double "
                                   "(about 1.8e308), so it has no value to convert to "
                                   f"{np.dtype(dtype).name}") from None
    return int(as_dtype.view(np.uint32 if dtype == np.float32 else np.uint16))


def check_same_dtype(api, *named_tensors):
    dtypes = {t.dtype for _, t in named_tensors}
    if len(dtypes) > 1:
        raise InvalidArgumentError(
            f"{api}: operands must share one dtype, got "
            + ", ".join(f"{n}={t.dtype.name}" for n, t in named_tensors))


def check_dtypes(entry, dst, src):
    """(dst, src) dtypes are a pair the table entry takes."""
    if (dst.dtype, src.dtype) not in entry.dtypes:
        allowed = ", ".join(f"{s.name} -> {d.name}" for d, s in entry.dtypes)
        raise InvalidArgumentError(f"{entry.name}: {src.dtype.name} -> {dst.dtype.name} is not "
                                   f"supported (allowed: {allowed})")


def docstring(entry, call_forms):
    return f"{entry.name}: {entry.doc}.\n\n{call_forms}"
