"""What every vector instruction wrapper shares: mask resolution, operand checks, the row."""
import numpy as np

from ..errors import InvalidArgumentError
from .checks import (UINT32_MAX, UINT64_MAX, Lanes, check_inside, check_no_partial_overlap,
                     check_range, footprint)
from .program import DTYPE_CODE, as_int64
from .types import MASK_PLACEHOLDER, MaskMode, Pipe

FLOAT_TYPES = (np.dtype(np.float16), np.dtype(np.float32))
FULL = UINT64_MAX


def continuous_mask_bits(length):
    """SetMask(len): the low `len` lanes as (high, low) words."""
    if length >= 128:
        return FULL, FULL
    if length >= 64:
        return (1 << (length - 64)) - 1, FULL
    return 0, (1 << length) - 1


def mask_from_argument(api, core, mask, epr):
    """The register value (high, low) an instruction's mask argument sets, as Ascend C."""
    if core.mask_mode == MaskMode.COUNTER:
        count = mask[0] if isinstance(mask, (list, tuple)) else mask
        return 0, check_range(api, "mask (counter-mode count)", count, 0, UINT32_MAX)
    if isinstance(mask, (list, tuple, np.ndarray)):
        if len(mask) != 2:
            raise InvalidArgumentError(f"{api}: a bitwise mask is [mask0, mask1], got {len(mask)} words")
        low = check_range(api, "mask[0]", mask[0], 0, UINT64_MAX)
        high = check_range(api, "mask[1]", mask[1], 0, UINT64_MAX if epr == 128 else 0)
        return high, low
    return continuous_mask_bits(check_range(api, "mask", mask, 0, epr))


def resolve_mask(api, core, mask, is_set_mask, epr):
    """-> (counter, word0, word1, register): the row's mask words and the (high, low) register
    value the call leaves behind. The caller writes the register once every check has passed."""
    if is_set_mask:
        if mask is MASK_PLACEHOLDER:
            raise InvalidArgumentError(
                f"{api}: MASK_PLACEHOLDER needs is_set_mask=False (use the mask register as set)")
        high, low = mask_from_argument(api, core, mask, epr)
    elif mask is not MASK_PLACEHOLDER:
        raise InvalidArgumentError(
            f"{api}: with is_set_mask=False the mask argument must be MASK_PLACEHOLDER")
    else:
        high, low = core.mask_high, core.mask_low
    if core.mask_mode == MaskMode.COUNTER:
        return 1, check_range(api, "counter-mode mask count", low, 0, UINT32_MAX), 0, (high, low)
    return 0, low, high if epr == 128 else 0, (high, low)


class Operand:
    """A tensor with its block and repeat strides, as one instruction uses it."""

    __slots__ = ("name", "tensor", "blk", "rep", "extent")

    def __init__(self, name, tensor, blk=1, rep=8):
        self.name, self.tensor, self.blk, self.rep = name, tensor, blk, rep
        self.extent = None


def issue_elementwise(api, op, dst, sources, mask, repeat, *, is_set_mask=True, scalar=None,
                      round_mode=0, sat_mode=None):
    """Validate and issue one element-wise instruction (count form when `repeat` is None)."""
    core = dst.tensor.core
    epr = 256 // max(o.tensor.dtype.itemsize for o in (dst, *sources))
    count_form = repeat is None
    if count_form:
        if not is_set_mask:
            raise InvalidArgumentError(f"{api}: the count form always sets the mask itself")
        counter, word0, word1 = 1, check_range(api, "count", mask, 0, UINT32_MAX), 0
        repeat, register = 1, (FULL, FULL)  # the count form leaves normal mode and a full mask
    else:
        repeat = check_range(api, "repeatTime", repeat, 0, 255)
        counter, word0, word1, register = resolve_mask(api, core, mask, is_set_mask, epr)
    lanes = Lanes.from_row_mask(epr, counter, word0, word1, repeat)
    for operand in (dst, *sources):
        operand.extent = footprint(operand.tensor.address, operand.tensor.dtype.itemsize,
                                   operand.blk, operand.rep, lanes)
        check_inside(api, operand.name, operand.tensor, operand.extent)
    for src in sources:
        check_no_partial_overlap(api, dst, src, lanes)

    src0, src1 = (tuple(sources) + (Operand("none", dst.tensor, 0, 0),) * 2)[:2]
    row = np.array((
        op, DTYPE_CODE[dst.tensor.dtype], DTYPE_CODE[(sources[0] if sources else dst).tensor.dtype],
        dst.tensor.address, src0.tensor.address, src1.tensor.address,
        scalar_bits(api, scalar, dst.tensor.dtype) if scalar is not None else 0,
        counter, as_int64(word0), as_int64(word1), repeat,
        dst.blk, src0.blk, src1.blk, dst.rep, src0.rep, src1.rep,
        round_mode, core.sat_mode if sat_mode is None else int(bool(sat_mode)), 0,
        4 if count_form else int(is_set_mask)), dtype=np.int64)
    issue_with_mask(core, api, row, (dst, *sources), register,
                    MaskMode.NORMAL if count_form else core.mask_mode)


def issue_with_mask(core, api, row, operands, register, mode):
    """Issue a vector row with the mask register as the call leaves it (the trace shows it);
    restored if the core rejects the row (the sanitizer)."""
    before = core.mask_mode, core.mask_high, core.mask_low
    core.mask_mode, (core.mask_high, core.mask_low) = mode, register
    try:
        core.issue(api, Pipe.PIPE_V, row, operands)
    except Exception:
        core.mask_mode, core.mask_high, core.mask_low = before
        raise


def scalar_bits(api, value, dtype):
    """The scalar converted to the tensor's dtype (RNE; out of range -> inf), as its bits."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise InvalidArgumentError(f"{api}: the scalar {value!r} is not a number")
    with np.errstate(over="ignore"):
        if dtype == np.float32:
            return int(np.array(value, dtype=np.float32).view(np.uint32))
        return int(np.array(value, dtype=np.float16).view(np.uint16))


def check_same_dtype(api, *named_tensors):
    dtypes = {t.dtype for _, t in named_tensors}
    if len(dtypes) > 1:
        raise InvalidArgumentError(
            f"{api}: operands must share one dtype, got "
            + ", ".join(f"{n}={t.dtype.name}" for n, t in named_tensors))
