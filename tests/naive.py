"""Independent oracles: slow, obvious, plain-numpy reference implementations.

Written from the spec (``spec/vector_unit.md`` §2-§4 and §6,
``spec/layernorm_grad_beta.md`` §3.5-§3.6 and §5, ``DESIGN.md`` "Numerics contract"), never
from the code under test. This module must never import ``lngb``.

Model
-----
* The unified buffer (UB) is a 1-D ``numpy.uint8`` array; addresses are byte offsets; values are
  stored little-endian. Every oracle copies its UB argument and returns the new array; the input
  is never modified.
* ``dtype`` arguments are ``np.float16`` (half) or ``np.float32`` (float).
* Lanes: ``epr = 256 // max(element sizes of the operands)`` lanes per repeat.
  ``mode="normal"``: ``mask`` is an int m (lanes 0..m-1, clamped to epr) or a pair
  ``(mask0, mask1)`` (bit e of mask0 = lane e < 64, bit e-64 of mask1 = lane e >= 64), applied to
  each of ``repeat`` repeats. ``mode="counter"``: ``count`` elements in ceil(count/epr) repeats,
  lane e of repeat r active iff r*epr + e < count (``repeat`` ignored).
* Lane e of repeat r of an operand with element size s, base b, block stride bs and repeat
  stride rs (strides in 32-byte blocks) lives at
  ``b + 32*rs*r + 32*bs*(e // (32//s)) + s*(e % (32//s))``.
* Repeats run in order; inside a repeat all active source lanes are read before any destination
  lane is written. Inactive lanes are neither read nor written.
* ``sat`` (half results only): False = IEEE (overflow -> +-inf, NaN stays NaN); True = saturation
  (+-inf -> +-65504, NaN -> +0). Float results are always IEEE.
"""

import math

import numpy as np

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
HALF_MAX = 65504.0

BINARY_OPS = ("Add", "Sub", "Mul", "Div", "Max", "Min")
SCALAR_OPS = {"Adds": "Add", "Muls": "Mul", "Maxs": "Max", "Mins": "Min"}
UNARY_OPS = ("Sqrt", "Abs", "Relu")
FLT_MIN = np.float32(2.0 ** -126)
ROUND_MODES = ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC",
               "CAST_ODD")


# ---------------------------------------------------------------------------------------------
# Basics: dtypes, UB access, lane geometry, masks


def _float_dtype(dtype):
    d = np.dtype(dtype)
    if d not in (F16, F32):
        raise ValueError(f"dtype must be float16 or float32, got {d}")
    return d


def _copy_ub(ub):
    ub = np.asarray(ub)
    if ub.dtype != np.uint8 or ub.ndim != 1:
        raise ValueError("the UB must be a 1-D uint8 array")
    return ub.copy()


def lanes_per_repeat(*dtypes):
    """epr = 256 // the widest operand's element size."""
    return 256 // max(np.dtype(d).itemsize for d in dtypes)


def lane_address(base, size, blk_stride, rep_stride, r, e):
    """Byte address of lane e of repeat r (spec vector_unit.md §2.2)."""
    per_block = 32 // size
    return base + 32 * rep_stride * r + 32 * blk_stride * (e // per_block) + size * (e % per_block)


def active_lanes(epr, *, mode, mask, repeat, count):
    """One list of active lane numbers per executed repeat, in repeat order."""
    if mode == "normal":
        if isinstance(mask, (bool, np.bool_)):
            raise ValueError("mask must be an int or a (mask0, mask1) pair")
        if isinstance(mask, (int, np.integer)):
            m = int(mask)
            if m < 0:
                raise ValueError("continuous mask must be >= 0")
            lanes = list(range(min(m, epr)))
        else:
            mask0, mask1 = mask
            bits = int(mask0) | (int(mask1) << 64)
            lanes = [e for e in range(epr) if (bits >> e) & 1]
        if repeat < 0:
            raise ValueError("repeat must be >= 0")
        return [lanes for _ in range(repeat)]
    if mode == "counter":
        if count is None or count < 0:
            raise ValueError("counter mode needs count >= 0")
        n_rep = math.ceil(count / epr)
        return [[e for e in range(epr) if r * epr + e < count] for r in range(n_rep)]
    raise ValueError(f"mode must be 'normal' or 'counter', got {mode!r}")


def _load(ub, addrs, dtype):
    """Values of `dtype` at the byte addresses `addrs` (little-endian)."""
    d = np.dtype(dtype)
    s = d.itemsize
    addrs = np.asarray(addrs, dtype=np.int64).reshape(-1)
    if addrs.size and (addrs.min() < 0 or addrs.max() + s > ub.size):
        raise IndexError("read outside the UB")
    idx = addrs[:, None] + np.arange(s)
    return ub[idx].reshape(-1).view(d.newbyteorder("<")).astype(d)


def _store(ub, addrs, values, dtype):
    """Write `values` (converted to `dtype` without further rounding) at the byte addresses."""
    d = np.dtype(dtype)
    s = d.itemsize
    addrs = np.asarray(addrs, dtype=np.int64).reshape(-1)
    values = np.asarray(values, dtype=d).reshape(-1)
    if addrs.size != values.size:
        raise ValueError("address/value count mismatch")
    if addrs.size and (addrs.min() < 0 or addrs.max() + s > ub.size):
        raise IndexError("write outside the UB")
    raw = np.ascontiguousarray(values.astype(d.newbyteorder("<"))).view(np.uint8)
    ub[addrs[:, None] + np.arange(s)] = raw.reshape(-1, s)


# ---------------------------------------------------------------------------------------------
# Numerics


def half_saturate(x16, sat):
    """Apply the half saturation mode to a float16 array (no-op when sat is False)."""
    x16 = np.array(x16, dtype=F16)
    if sat:
        x16[np.isnan(x16)] = 0.0
        x16[np.isposinf(x16)] = HALF_MAX
        x16[np.isneginf(x16)] = -HALF_MAX
    return x16


def _round_to(x32, dtype, sat):
    """Round float32 values once to `dtype` (RNE), then the half saturation rules."""
    d = _float_dtype(dtype)
    x32 = np.asarray(x32, dtype=F32)
    if d == F32:
        return x32.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        return half_saturate(x32.astype(F16), sat)


def _signbit(x):
    return (np.asarray(x, dtype=F32).view(np.uint32) >> 31).astype(bool)


def _max(a, b):
    """max with -0 below +0 (spec vector_unit.md §3; DESIGN.md): NaNs are handled by the caller."""
    tie = a == b
    return np.where(tie, np.where(_signbit(a), b, a), np.where(a > b, a, b))


def _min(a, b):
    tie = a == b
    return np.where(tie, np.where(_signbit(a), a, b), np.where(a < b, a, b))


def flush_subnormals(x32):
    """Subnormal float32 values become zeros of their sign (the div_sqrt="ftz" switch)."""
    x32 = np.array(x32, dtype=F32)
    tiny = (np.abs(x32) < FLT_MIN) & (x32 != 0)
    x32[tiny] = np.copysign(np.float32(0), x32[tiny])
    return x32


def _arith(op, a, b, dtype, sat, ftz=False):
    """Element-wise a op b: float in float32; half in float32 from exact halves, rounded once.
    Div is correctly rounded (the division of float32 numbers, rounded to nearest even); with
    `ftz`, its subnormal operands and results are zeros."""
    a32 = np.asarray(a).astype(F32)
    b32 = np.asarray(b).astype(F32)
    if ftz and op == "Div":
        a32, b32 = flush_subnormals(a32), flush_subnormals(b32)
    with np.errstate(all="ignore"):
        if op == "Add":
            r = a32 + b32
        elif op == "Sub":
            r = a32 - b32
        elif op == "Mul":
            r = a32 * b32
        elif op == "Div":
            r = a32 / b32
        elif op == "Max":
            r = _max(a32, b32).astype(F32)
        elif op == "Min":
            r = _min(a32, b32).astype(F32)
        else:
            raise ValueError(f"unknown op {op!r}")
    if ftz and op == "Div":
        r = flush_subnormals(r)
    # A NaN result carries the first NaN operand's payload (src0, then src1), quieted.
    quiet = lambda x: (np.broadcast_to(x, r.shape).view(np.uint32) | np.uint32(0x400000)).view(F32)
    r = np.where(np.isnan(a32), quiet(a32), np.where(np.isnan(b32), quiet(b32), r))
    return _round_to(r, dtype, sat)


def _convert_scalar(scalar, dtype):
    """The scalar argument of Adds/Muls/Duplicate converted to the tensor dtype with RNE."""
    with np.errstate(over="ignore"):
        return np.asarray(scalar).astype(_float_dtype(dtype))


def f32_to_f16(x, round_mode, sat):
    """float32 -> float16 with an Ascend RoundMode, then the saturation rules (spec §3.4).

    lo <= x <= hi are the adjacent halves around x (+-inf standing for +-65536, the next step
    after 65504, so that IEEE overflow falls out of the same rules).
    """
    if round_mode not in ROUND_MODES:
        raise ValueError(f"unknown round mode {round_mode!r}")
    x = np.asarray(x, dtype=F32)
    shape = x.shape
    x = x.reshape(-1)
    with np.errstate(all="ignore"):
        xd = x.astype(F64)
        h = x.astype(F16)  # RNE: one of the two neighbours
        hd = h.astype(F64)
        exact = (hd == xd) | np.isnan(x)
        below = hd < xd
        lo = np.where(below, h, np.nextafter(h, F16.type(-np.inf)))
        hi = np.where(below, np.nextafter(h, F16.type(np.inf)), h)
        lo_d = np.where(np.isinf(lo), np.copysign(65536.0, lo.astype(F64)), lo.astype(F64))
        hi_d = np.where(np.isinf(hi), np.copysign(65536.0, hi.astype(F64)), hi.astype(F64))
        d_lo = xd - lo_d  # only used where x is finite and not exact
        d_hi = hi_d - xd
    lo_even = (lo.view(np.uint16) & 1) == 0
    toward_zero = np.where(xd > 0, lo, hi)

    if round_mode in ("CAST_NONE", "CAST_RINT"):
        pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & lo_even)
        r = np.where(pick_lo, lo, hi)
    elif round_mode == "CAST_ROUND":  # nearest, ties away from zero
        tie_lo = xd < 0
        pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & tie_lo)
        r = np.where(pick_lo, lo, hi)
    elif round_mode == "CAST_FLOOR":
        r = lo
    elif round_mode == "CAST_CEIL":
        r = hi
    elif round_mode == "CAST_TRUNC":
        r = toward_zero
    else:  # CAST_ODD: truncate toward zero, then set the last significand bit if inexact
        r = (toward_zero.view(np.uint16) | np.uint16(1)).view(F16)
    r = np.where(exact, h, r).astype(F16)
    return half_saturate(r, sat).reshape(shape)


def _tree_sum(values, present, dtype, sat):
    """Binary trees over adjacent pairs, one per row of `values` [groups, leaves].

    Level by level: (x0+x1), (x2+x3), ... then pairs of those. A node with both children present
    is their sum rounded to `dtype` (half: sat rules applied); with one child absent it is the
    other child unchanged; with both absent it is absent. Returns (values, present) per group.
    """
    vals = np.array(values, dtype=_float_dtype(dtype), ndmin=2)
    pres = np.array(present, dtype=bool, ndmin=2)
    n = vals.shape[1]
    if n & (n - 1):
        raise ValueError("tree size must be a power of two")
    while vals.shape[1] > 1:
        a, b = vals[:, 0::2], vals[:, 1::2]
        pa, pb = pres[:, 0::2], pres[:, 1::2]
        s = _arith("Add", a, b, dtype, sat)
        vals = np.where(pa & pb, s, np.where(pa, a, b)).astype(vals.dtype)
        pres = pa | pb
    return vals[:, 0], pres[:, 0]


# ---------------------------------------------------------------------------------------------
# Element-wise vector instructions


def binary(op, ub, dtype, dst, src0, src1, *, mode="normal", mask=None, repeat=1, count=None,
           strides=(1, 1, 1, 8, 8, 8), sat=False, ftz=False):
    """Add/Sub/Mul/Div/Max/Min: dst = src0 op src1 on the active lanes."""
    if op not in BINARY_OPS:
        raise ValueError(f"op must be one of {BINARY_OPS}")
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    dbs, s0bs, s1bs, drs, s0rs, s1rs = strides
    epr = lanes_per_repeat(d)
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        a_dst = [lane_address(dst, s, dbs, drs, r, e) for e in lanes]
        a_s0 = [lane_address(src0, s, s0bs, s0rs, r, e) for e in lanes]
        a_s1 = [lane_address(src1, s, s1bs, s1rs, r, e) for e in lanes]
        x = _load(out, a_s0, d)
        y = _load(out, a_s1, d)
        _store(out, a_dst, _arith(op, x, y, d, sat, ftz), d)
    return out


def unary_scalar(op, ub, dtype, dst, src, scalar, *, mode="normal", mask=None, repeat=1,
                 count=None, strides=(1, 1, 8, 8), sat=False):
    """Adds/Muls: dst = src op scalar, the scalar first converted to dtype (RNE)."""
    if op not in SCALAR_OPS:
        raise ValueError(f"op must be one of {tuple(SCALAR_OPS)}")
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    c = _convert_scalar(scalar, d)
    dbs, sbs, drs, srs = strides
    epr = lanes_per_repeat(d)
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        a_dst = [lane_address(dst, s, dbs, drs, r, e) for e in lanes]
        a_src = [lane_address(src, s, sbs, srs, r, e) for e in lanes]
        x = _load(out, a_src, d)
        y = np.full(len(lanes), c, dtype=d)
        _store(out, a_dst, _arith(SCALAR_OPS[op], x, y, d, sat), d)
    return out


def _unary(op, x, dtype, sat, ftz):
    """Sqrt (correctly rounded; with ftz, subnormals are zeros), Abs (the sign bit cleared,
    NaN payloads kept) and Relu (max(x, +0)); a NaN result of Sqrt/Relu carries the operand's
    payload, quieted."""
    x32 = np.asarray(x).astype(F32)
    if op == "Abs":
        r = (x32.view(np.uint32) & np.uint32(0x7FFFFFFF)).view(F32)
        return _round_to(r, dtype, sat)
    if op == "Sqrt":
        if ftz:
            x32 = flush_subnormals(x32)
        with np.errstate(invalid="ignore"):
            r = np.sqrt(x32)
        if ftz:
            r = flush_subnormals(r)
    elif op == "Relu":
        r = _max(x32, np.zeros_like(x32)).astype(F32)
    else:
        raise ValueError(f"unknown op {op!r}")
    quiet = (x32.view(np.uint32) | np.uint32(0x400000)).view(F32)
    return _round_to(np.where(np.isnan(x32), quiet, r), dtype, sat)


def unary(op, ub, dtype, dst, src, *, mode="normal", mask=None, repeat=1, count=None,
          strides=(1, 1, 8, 8), sat=False, ftz=False):
    """Sqrt/Abs/Relu: dst = op(src) on the active lanes."""
    if op not in UNARY_OPS:
        raise ValueError(f"op must be one of {UNARY_OPS}")
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    dbs, sbs, drs, srs = strides
    epr = lanes_per_repeat(d)
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        a_dst = [lane_address(dst, s, dbs, drs, r, e) for e in lanes]
        a_src = [lane_address(src, s, sbs, srs, r, e) for e in lanes]
        _store(out, a_dst, _unary(op, _load(out, a_src, d), d, sat, ftz), d)
    return out


def duplicate_lane(ub, dtype, dst, src):
    """The 950's lane broadcast (spec regbase.md §2.1 DIST_BRC, §2.4 Duplicate from a register):
    the 256 bytes at dst are all copies of the element at src."""
    d = _float_dtype(dtype)
    out = _copy_ub(ub)
    value = _load(out, [src], d)[0]
    _store(out, [dst + d.itemsize * i for i in range(256 // d.itemsize)],
           np.full(256 // d.itemsize, value, dtype=d), d)
    return out


def brcb(ub, dtype, dst, src, *, repeat, dst_blk=1, dst_rep=8):
    """Brcb (spec layernorm_grad.md §4.9): src[8q + k] fills the 32-byte block at
    dst + 32 * (q * dst_rep + k * dst_blk), for q < repeat and k < 8 (dst_blk 0 walks as 1)."""
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    dst_blk = dst_blk or 1
    values = _load(out, [src + s * i for i in range(8 * repeat)], d)
    for q in range(repeat):
        for k in range(8):
            block = dst + 32 * (q * dst_rep + k * dst_blk)
            _store(out, [block + s * i for i in range(32 // s)],
                   np.full(32 // s, values[8 * q + k], dtype=d), d)
    return out


def duplicate(ub, dtype, dst, scalar, *, mode="normal", mask=None, repeat=1, count=None,
              dst_blk=1, dst_rep=8):
    """Duplicate: active dst lanes <- scalar (converted to dtype with RNE)."""
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    c = _convert_scalar(scalar, d)
    epr = lanes_per_repeat(d)
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        a_dst = [lane_address(dst, s, dst_blk, dst_rep, r, e) for e in lanes]
        _store(out, a_dst, np.full(len(lanes), c, dtype=d), d)
    return out


def cast(ub, dst_dtype, src_dtype, dst, src, round_mode, *, mode="normal", mask=None, repeat=1,
         count=None, strides=(1, 1, 8, 8), sat=False):
    """Cast half<->float (64 lanes per repeat; each operand addressed with its own size)."""
    dd = _float_dtype(dst_dtype)
    sd = _float_dtype(src_dtype)
    if dd == sd:
        raise ValueError("only half<->float casts are modelled")
    if round_mode not in ROUND_MODES:
        raise ValueError(f"unknown round mode {round_mode!r}")
    if sd == F16 and round_mode != "CAST_NONE":
        raise ValueError("half->float only supports CAST_NONE")
    out = _copy_ub(ub)
    dbs, sbs, drs, srs = strides
    epr = lanes_per_repeat(dd, sd)
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        a_dst = [lane_address(dst, dd.itemsize, dbs, drs, r, e) for e in lanes]
        a_src = [lane_address(src, sd.itemsize, sbs, srs, r, e) for e in lanes]
        x = _load(out, a_src, sd)
        if sd == F16:
            y = x.astype(F32)  # exact
        else:
            y = f32_to_f16(x, round_mode, sat)
        _store(out, a_dst, y, dd)
    return out


# ---------------------------------------------------------------------------------------------
# Reductions (adjacent-pair trees, every intermediate rounded to the data type)


def _reduce_walk(ub, dtype, src, group, out_index, *, mode, mask, repeat, count, src_blk,
                 src_rep, dst, sat, family):
    """Shared walk: per repeat, split the epr lanes into groups of `group` adjacent lanes, tree-sum
    each group, write group g of repeat r at element out_index(r, g) from dst."""
    if family not in ("a2", "950"):
        raise ValueError("family must be 'a2' or '950'")
    d = _float_dtype(dtype)
    s = d.itemsize
    out = _copy_ub(ub)
    epr = lanes_per_repeat(d)
    repeats = active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)
    if mode == "normal" and not any(len(lanes) for lanes in repeats):
        return out  # a mask with no lane set makes the instruction a no-op, 950 included
    for r, lanes in enumerate(repeats):
        vals = np.zeros(epr, dtype=d)      # inactive lanes are absent: value unused
        pres = np.zeros(epr, dtype=bool)
        a_src = [lane_address(src, s, src_blk, src_rep, r, e) for e in lanes]
        vals[lanes] = _load(out, a_src, d)  # read every active lane before writing anything
        pres[lanes] = True
        sums, present = _tree_sum(vals.reshape(-1, group), pres.reshape(-1, group), d, sat)
        if d == F16:  # a lone lane passes the tree unchanged, but every half result saturates
            sums = half_saturate(sums, sat)
        # a fully masked group: a2 leaves dst untouched, 950 writes +0
        w_addr, w_val = [], []
        for g in range(epr // group):
            if present[g]:
                w_addr.append(dst + s * out_index(r, g))
                w_val.append(sums[g])
            elif family == "950":
                w_addr.append(dst + s * out_index(r, g))
                w_val.append(0.0)
        _store(out, w_addr, np.array(w_val, dtype=d), d)
    return out


def block_reduce_sum(ub, dtype, dst, src, *, mode="normal", mask=None, repeat=1, count=None,
                     dst_rep=1, src_blk=1, src_rep=8, sat=False, family="a2"):
    """BlockReduceSum: 8 outputs per repeat (one per 32-byte block), at r*dst_rep*8 + k."""
    d = _float_dtype(dtype)
    return _reduce_walk(ub, d, src, 32 // d.itemsize, lambda r, k: r * dst_rep * 8 + k,
                        mode=mode, mask=mask, repeat=repeat, count=count, src_blk=src_blk,
                        src_rep=src_rep, dst=dst, sat=sat, family=family)


def whole_reduce_sum(ub, dtype, dst, src, *, mode="normal", mask=None, repeat=1, count=None,
                     dst_rep=1, src_blk=1, src_rep=8, sat=False, family="a2"):
    """WholeReduceSum: one output per repeat (tree over all epr lanes), at r*dst_rep."""
    d = _float_dtype(dtype)
    return _reduce_walk(ub, d, src, lanes_per_repeat(d), lambda r, k: r * dst_rep,
                        mode=mode, mask=mask, repeat=repeat, count=count, src_blk=src_blk,
                        src_rep=src_rep, dst=dst, sat=sat, family=family)


def pair_reduce_sum(ub, dtype, dst, src, *, mode="normal", mask=None, repeat=1, count=None,
                    dst_rep=1, src_blk=1, src_rep=8, sat=False, family="a2"):
    """PairReduceSum: epr/2 outputs x[2i] + x[2i+1] per repeat, at r*dst_rep*(epr//2) + i."""
    d = _float_dtype(dtype)
    half_epr = lanes_per_repeat(d) // 2
    return _reduce_walk(ub, d, src, 2, lambda r, i: r * dst_rep * half_epr + i,
                        mode=mode, mask=mask, repeat=repeat, count=count, src_blk=src_blk,
                        src_rep=src_rep, dst=dst, sat=sat, family=family)


# ---------------------------------------------------------------------------------------------
# DataCopy (spec §6)


def _check_buf(buf):
    buf = np.asarray(buf)
    if buf.dtype != np.uint8 or buf.ndim != 1:
        raise ValueError("buffers must be 1-D uint8 arrays")
    return buf


def data_copy_count(dst_buf, dst_off, src_buf, src_off, count, itemsize):
    """DataCopy(dst, src, count): floor(count*itemsize/32)*32 contiguous bytes."""
    src_buf = _check_buf(src_buf)
    out = _check_buf(dst_buf).copy()
    n = (count * itemsize) // 32 * 32
    if n:
        if src_off + n > src_buf.size or dst_off + n > out.size or min(src_off, dst_off) < 0:
            raise IndexError("copy outside a buffer")
        out[dst_off:dst_off + n] = src_buf[src_off:src_off + n]
    return out


def data_copy_params(dst_buf, dst_off, src_buf, src_off, block_count, block_len, src_gap, dst_gap):
    """DataCopy(dst, src, DataCopyParams): block_count bursts of 32*block_len bytes."""
    src_buf = _check_buf(src_buf)
    out = _check_buf(dst_buf).copy()
    n = 32 * block_len
    for i in range(block_count):
        s = src_off + 32 * i * (block_len + src_gap)
        t = dst_off + 32 * i * (block_len + dst_gap)
        if n:
            if s + n > src_buf.size or t + n > out.size or min(s, t) < 0:
                raise IndexError("copy outside a buffer")
            out[t:t + n] = src_buf[s:s + n].copy()
    return out


# ---------------------------------------------------------------------------------------------
# The operator (numerics contract, spec layernorm_grad_beta.md §3.5)


def _as_rows(a):
    a = np.asarray(a)
    if a.ndim != 3:
        raise ValueError("inputs must be [B, S, H]")
    return a.reshape(-1, a.shape[2])


def layer_norm_grad_beta(dy, res_for_gamma, *, sat=False):
    """(pd_gamma, pd_beta) in the input dtype: sequential fp32 row loop, rounded once to half."""
    dy = np.asarray(dy)
    rfg = np.asarray(res_for_gamma)
    d = _float_dtype(dy.dtype)
    if rfg.dtype != d or rfg.shape != dy.shape:
        raise ValueError("dy and res_for_gamma must have the same dtype and shape")
    dy_rows = _as_rows(dy).astype(F32)   # half -> float is exact
    rfg_rows = _as_rows(rfg).astype(F32)
    n_rows = dy_rows.shape[0]
    with np.errstate(all="ignore"):
        acc_g = None
        acc_b = None
        for r in range(n_rows):
            p = dy_rows[r] * rfg_rows[r]          # fp32 product (exact for half inputs)
            if r == 0:
                acc_g = p + F32.type(0.0)         # Adds(row0, 0): -0.0 becomes +0.0
                acc_b = dy_rows[0] + F32.type(0.0)
            else:
                acc_g = p + acc_g
                acc_b = dy_rows[r] + acc_b
    if d == F32:
        return acc_g.astype(F32), acc_b.astype(F32)
    return f32_to_f16(acc_g, "CAST_RINT", sat), f32_to_f16(acc_b, "CAST_RINT", sat)


def numpy_golden(dy, rfg):
    """Plain numpy sums (reference only; not the device's order of additions)."""
    dy = np.asarray(dy)
    rfg = np.asarray(rfg)
    return (dy * rfg).sum((0, 1)), dy.sum((0, 1))


def reuse_res_for_gamma_state(dy, res_for_gamma, one_cal_rows):
    """Final resForGamma [B*S, H] after CANN's float isReuseSource kernel (spec §3.6).

    Chunks of one_cal_rows rows (capped at B*S); chunk k's products dy*rfg, computed from the
    chunk's original rows, are written to rows 0..rows_k-1, in chunk order, the tail last.
    """
    dy_rows = _as_rows(dy)
    rfg_rows = _as_rows(res_for_gamma)
    if dy_rows.dtype != F32 or rfg_rows.dtype != F32:
        raise ValueError("isReuseSource only acts on float inputs")
    n_rows = dy_rows.shape[0]
    if one_cal_rows <= 0:
        raise ValueError("one_cal_rows must be > 0")
    one = min(one_cal_rows, n_rows)
    buf = rfg_rows.copy()
    chunks = [(k * one, one) for k in range(n_rows // one)]
    if n_rows % one:
        chunks.append((n_rows - n_rows % one, n_rows % one))
    with np.errstate(all="ignore"):
        for start, rows in chunks:
            # products from the chunk's ORIGINAL rows (only rows [0, one) are ever written and
            # chunk 0 is those rows themselves, so this equals reading buf; inputDy never changes)
            prod = dy_rows[start:start + rows] * rfg_rows[start:start + rows]
            buf[0:rows] = prod
    return buf


def layer_norm_grad_beta_operator(dy, res_for_gamma, core_rows, tile_rows, *, api_sat, final_sat):
    """(pd_gamma, pd_beta) of the multi-core operator (lngb/multicore.py's order of additions).

    Rows flattened to [B*S, H]. Core c owns rows core_rows[c] = (first row, count), cut into
    tiles of `tile_rows` consecutive rows (the last may be shorter). A tile's partial is the API's
    result on the tile as [1, rows, H] (`layer_norm_grad_beta`, half outputs saturating as
    `api_sat` says), widened to fp32. Core partial = tile 0 copied, then acc = acc + tile k in
    fp32, tiles in row order; result = core 0's partial copied, then acc = acc + core k in fp32,
    cores in order; rounded once to the input dtype (half: RINT, saturating as `final_sat` says).
    Column slices do not change any column's order of additions, so they are not modelled.
    """
    dy = np.asarray(dy)
    rfg = np.asarray(res_for_gamma)
    d = _float_dtype(dy.dtype)
    if rfg.dtype != d or rfg.shape != dy.shape:
        raise ValueError("dy and res_for_gamma must have the same dtype and shape")
    tile_rows = int(tile_rows)
    if tile_rows < 1:
        raise ValueError("tile_rows must be >= 1")
    dy_rows = _as_rows(dy)
    rfg_rows = _as_rows(rfg)
    total_g = None
    total_b = None
    for first, count in core_rows:
        if count < 1:
            raise ValueError("every core needs at least one row")
        core_g = None
        core_b = None
        for start in range(first, first + count, tile_rows):
            stop = min(start + tile_rows, first + count)
            tile_g, tile_b = layer_norm_grad_beta(dy_rows[None, start:stop],
                                                  rfg_rows[None, start:stop], sat=api_sat)
            tile_g = tile_g.astype(F32)   # half -> float is exact
            tile_b = tile_b.astype(F32)
            if core_g is None:            # tile 0 is copied (a -0.0 stays -0.0)
                core_g = tile_g.copy()
                core_b = tile_b.copy()
            else:                         # acc = acc + tile
                core_g = _arith("Add", core_g, tile_g, F32, False)
                core_b = _arith("Add", core_b, tile_b, F32, False)
        if total_g is None:               # core 0's partial is copied
            total_g = core_g.copy()
            total_b = core_b.copy()
        else:                             # total = total + core partial
            total_g = _arith("Add", total_g, core_g, F32, False)
            total_b = _arith("Add", total_b, core_b, F32, False)
    if total_g is None:
        raise ValueError("core_rows is empty")
    if d == F32:
        return total_g.astype(F32), total_b.astype(F32)
    return f32_to_f16(total_g, "CAST_RINT", final_sat), f32_to_f16(total_b, "CAST_RINT", final_sat)


# ---------------------------------------------------------------------------------------------
# LayerNormGrad (spec layernorm_grad.md §2, §4.4-4.5, §5.2-5.3, §7.1)


def _f32(x):
    return np.asarray(x, dtype=F32)


def _div_sqrt(x, ftz):
    """1 / sqrt(x), each step correctly rounded to float32 (DIV(1.0f, SQRT(x)) of §7.1); with
    `ftz`, subnormal operands and results of both are zeros."""
    fl = flush_subnormals if ftz else (lambda v: v)
    with np.errstate(all="ignore"):
        root = fl(np.sqrt(fl(_f32(x))))
        return fl(np.float32(1.0) / root)


def _common_row_sums(v):
    """ReduceSumImpl (§4.3) of each row of v [rows, H]: 64-lane adjacent-pair trees over
    consecutive 64-element blocks (the last block's missing lanes absent), then the same over the
    block partials, until one value remains."""
    v = _f32(v)
    rows = v.shape[0]
    while v.shape[1] > 1:
        m = v.shape[1]
        blocks = -(-m // 64)
        padded = np.zeros((rows, blocks * 64), dtype=F32)
        padded[:, :m] = v
        present = np.arange(blocks * 64) < m
        sums, _ = _tree_sum(padded.reshape(rows * blocks, 64),
                            np.broadcast_to(present, (rows, blocks * 64)).reshape(-1, 64), F32,
                            False)
        v = sums.reshape(rows, blocks)
    return v[:, 0]


def _regbase_row_sums(v):
    """The 950's order (§5.3): lane l sums its column blocks in order from +0.0, then one
    adjacent-pair tree over min(H, 64) lanes."""
    v = _f32(v)
    rows, h = v.shape
    lanes = np.zeros((rows, 64), dtype=F32)
    with np.errstate(all="ignore"):
        for start in range(0, h, 64):
            block = v[:, start:start + 64]
            lanes[:, :block.shape[1]] = lanes[:, :block.shape[1]] + block
    present = np.broadcast_to(np.arange(64) < min(h, 64), (rows, 64))
    sums, _ = _tree_sum(lanes, present, F32, False)
    return sums


def _layer_norm_grad_rows(dy, x, variance, mean, gamma, epsilon, regbase, ftz, original_h):
    """The float32 intermediates of §7.1, per row [rows, H]: x2, x3, y = (2/H*pdVar)*x2 + pdMean/H,
    pd_x = y + x3 and res_for_gamma."""
    dy, x = np.asarray(dy), np.asarray(x)
    d = _float_dtype(dy.dtype)
    b, s, h = dy.shape
    ho = h if original_h is None else original_h
    rows = b * s
    dy32, x32 = _f32(dy.reshape(rows, h)), _f32(x.reshape(rows, h))
    var32 = _f32(np.asarray(variance).reshape(rows, 1))
    mean32 = _f32(np.asarray(mean).reshape(rows, 1))
    g32 = _f32(np.asarray(gamma).reshape(1, h))
    eps = np.float32(np.asarray(epsilon, dtype=d))     # half: rounded to half first
    inv_h, two_inv_h = np.float32(1.0) / np.float32(ho), np.float32(2.0) / np.float32(ho)
    row_sums = _regbase_row_sums if regbase else _common_row_sums
    with np.errstate(all="ignore"):
        x1 = dy32 * g32
        x2 = x32 - mean32
        t = var32 + eps
        r3 = _div_sqrt((t * t) * t, ftz)
        pd_var = row_sums((x1 * (x2 * r3)) * np.float32(-0.5))[:, None]
        rstd = _div_sqrt(t, ftz)
        rfg = x2 * rstd
        x3 = x1 * rstd
        a = row_sums(x3 * np.float32(-1.0))[:, None]
        s2 = row_sums(x2 * np.float32(-2.0))[:, None]
        pd_mean = a + pd_var * (s2 * inv_h)
        y = (pd_var * two_inv_h) * x2 + pd_mean * inv_h
        pd_x = y + x3
    return x2, x3, y, pd_x, rfg


def layer_norm_grad(dy, x, variance, mean, gamma, epsilon, *, regbase=False, sat=False,
                    ftz=False, original_h=None):
    """(pd_x, res_for_gamma) in the input dtype, in CANN's order of operations (§7.1): every step
    one float32 rounding; half inputs widened exactly and outputs rounded once to half (RNE; the
    A2/A3/310P kernel under the saturation mode `sat`, the 950 (`regbase`) never saturates)."""
    shape, d = np.shape(dy), _float_dtype(np.asarray(dy).dtype)
    *_, pd_x, rfg = _layer_norm_grad_rows(dy, x, variance, mean, gamma, epsilon, regbase, ftz,
                                          original_h)
    outputs = []
    for v in (pd_x, rfg):
        v = _f32(v).reshape(shape)
        outputs.append(v if d == F32 else f32_to_f16(v, "CAST_RINT", sat and not regbase))
    return tuple(outputs)


def layer_norm_grad_reuse_state(dy, x, variance, mean, gamma, epsilon):
    """(inputDy, inputX) after the A2/A3/310P float kernel with isReuseSource (§4.6):
    inputDy = (2/H * pdVar) * x2 + pdMean / H and inputX = x2 = x - mean, in every row."""
    x2, _, y, _, _ = _layer_norm_grad_rows(dy, x, variance, mean, gamma, epsilon, False, False,
                                           None)
    return y.reshape(np.shape(dy)), x2.reshape(np.shape(dy))


def layer_norm_grad_regbase_reuse_state(dy, x, variance, mean, gamma, epsilon):
    """(inputDy[:H], inputX[:H]) after the 950 float kernel with isReuseSource (§5.3 item 7): row
    0's storage holds x3 and x2 of the last row; the rest is untouched."""
    x2, x3, _, _, _ = _layer_norm_grad_rows(dy, x, variance, mean, gamma, epsilon, True, False,
                                            None)
    return x3[-1], x2[-1]


# --- LayerNorm (forward) form-1 host tiling (spec layernorm.md §3.3), for shapes that never wrap --

def layer_norm_tiling(b, s, h, original_h, stack_buffer_size, type_size, reuse):
    """{field: value} of GetLayerNormNDTilingInfo, or None where CANN sets nothing (no row fits),
    for buffers at or above the mean/variance scratch (no uint32 wrap)."""
    bsh, bs = b * s * h, b * s
    nbuf = 2 if (reuse and type_size == 4) else 3
    mvs = math.ceil(bs / 8) * 8
    mv_total = 0 if type_size == 4 else 2 * mvs
    tmp = stack_buffer_size // 4
    one = min((tmp - mv_total) // nbuf // h * h, bsh)
    if one == 0:
        return None
    tail = bsh % one
    return dict(bLength=b, sLength=s, hLength=h, originalHLength=original_h, inputXSize=bsh,
                meanVarSize=bs, numberOfTmpBuf=nbuf, meanTmpTensorPos=0, meanTmpTensorSize=mvs,
                varianceTmpTensorPos=mvs, varianceTmpTensorSize=mvs, tmpBufSize=tmp,
                oneTmpSize=one, firstTmpStartPos=mv_total, secondTmpStartPos=mv_total + one,
                thirdTmpStartPos=mv_total + 2 * one, loopRound=bsh // one, inputRoundSize=one,
                inputTailSize=tail, inputTailPos=bsh - tail, meanVarRoundSize=one // h,
                meanVarTailSize=tail // h, meanVarTailPos=bs - tail // h, bshCurLength=one,
                bsCurLength=one // h,
                lastDimValueBack=float(np.float32(1.0) / np.float32(original_h)))


def layer_norm_max_min(b, s, h, type_size, reuse):
    """(max, min) bytes of form 1's GetLayerNormMaxMinTmpSize (spec §3.3)."""
    def up32(n):
        return math.ceil(n / 32) * 32
    mv, inp, hd = up32(4 * b * s), up32(4 * b * s * h), up32(4 * h)
    n = 2 if (reuse and type_size == 4) else 3
    return n * inp + 2 * mv, n * hd + 2 * mv


# ---------------------------------------------------------------------------------------------
# LayerNorm (forward) form 1 (spec layernorm.md §7.1; §4 the A2/A3/310P kernel, §5 the 950's)

LAYER_NORM_PRODUCTS = ("atlas-a2", "atlas-a3", "atlas-inference", "atlas-350")


def _fold_64(v):
    """COMMON's fold (§4.3) of each row of v [rows, H] into its first w = min(H, 64) lanes:
    acc = block 0, then acc[l] = f(v[64k + l] + acc[l]) for the full blocks k = 1 .. H/64 - 1,
    then once more for the first H % 64 lanes with the tail block."""
    v = _f32(v)
    h = v.shape[1]
    if h <= 64:
        return v.copy()
    acc = v[:, :64].copy()
    with np.errstate(all="ignore"):
        for k in range(1, h // 64):
            acc = v[:, 64 * k:64 * k + 64] + acc
        t = h % 64
        if t:
            start = 64 * (h // 64)
            acc[:, :t] = v[:, start:start + t] + acc[:, :t]
    return acc


def _tree_absent(acc):
    """WholeReduceSum of each row of acc [rows, w] under the continuous mask w (w <= 64): the
    adjacent-pair tree over 64 lanes, lanes w..63 absent."""
    rows, w = acc.shape
    lanes = np.zeros((rows, 64), dtype=F32)
    lanes[:, :w] = acc
    present = np.broadcast_to(np.arange(64) < w, (rows, 64))
    sums, _ = _tree_sum(lanes, present, F32, False)
    return sums


def _blocks_950(v):
    """The 950's BLOCKS (§5.2, §7.1) of each row of v [rows, H]: 64-lane blocks; with K = H/64 > 0
    acc = block 0, then acc = f(acc + block k) for k < K; with K = 0 acc = +0; then, if H % 64,
    acc = f(acc + the tail block padded with +0 to 64 lanes). All 64 lanes of acc."""
    v = _f32(v)
    rows, h = v.shape
    full, t = divmod(h, 64)
    with np.errstate(all="ignore"):
        if full:
            acc = v[:, :64].copy()
            for k in range(1, full):
                acc = acc + v[:, 64 * k:64 * k + 64]
        else:
            acc = np.zeros((rows, 64), dtype=F32)
        if t:
            tail = np.zeros((rows, 64), dtype=F32)
            tail[:, :t] = v[:, 64 * full:]
            acc = acc + tail
    return acc


def _tree_64(acc):
    """Reg::ReduceSum over all 64 lanes (no lane absent)."""
    sums, _ = _tree_sum(acc, np.ones(acc.shape, dtype=bool), F32, False)
    return sums


def _layer_norm_epsilon(epsilon, dtype):
    """The kernel's fp32 epsilon: `const T epsilon`, so for half the caller's value is rounded to
    half first, then widened."""
    with np.errstate(over="ignore"):
        return np.float32(np.asarray(epsilon, dtype=dtype))


def _check_layer_norm_inputs(x, gamma, beta, product):
    x, gamma, beta = np.asarray(x), np.asarray(gamma), np.asarray(beta)
    d = _float_dtype(x.dtype)
    if x.ndim != 3:
        raise ValueError("x must be [B, S, H]")
    h = x.shape[2]
    for name, a in (("gamma", gamma), ("beta", beta)):
        if a.dtype != d or a.shape != (h,):
            raise ValueError(f"{name} must be [{h}] of {d}")
    if product not in LAYER_NORM_PRODUCTS:
        raise ValueError(f"product must be one of {LAYER_NORM_PRODUCTS}")
    return x, gamma, beta, d


def layer_norm_fp32(x, gamma, beta, epsilon, *, product="atlas-a2", ftz=False):
    """The fp32 values of §7.1 per row, before any rounding to half: a dict of
    `mean`, `variance`, `scale` [rows] (rstd = 1/sqrt(var + e) on A2/A3/310P, sd = sqrt(var + e)
    on the 950), `normed` [rows, H] (f(f(rstd*d)*gamma) or f(f(d/sd)*gamma)) and `y` [rows, H].
    `ftz`: Div and Sqrt flush subnormal operands and results (AICore(div_sqrt="ftz"))."""
    x, gamma, beta, d = _check_layer_norm_inputs(x, gamma, beta, product)
    h = x.shape[2]
    x32 = _f32(x.reshape(-1, h))            # half -> float is exact
    g32, b32 = _f32(gamma)[None, :], _f32(beta)[None, :]
    e = _layer_norm_epsilon(epsilon, d)
    fl = flush_subnormals if ftz else (lambda v: v)
    with np.errstate(all="ignore"):
        if product == "atlas-350":
            hd = np.float32(h)
            mean = _tree_64(_blocks_950(fl(fl(x32) / hd)))
            dd = x32 - mean[:, None]
            var = _tree_64(_blocks_950(fl(fl(dd * dd) / hd)))
            scale = fl(np.sqrt(fl(var + e)))
            normed = fl(fl(dd) / scale[:, None]) * g32
        else:
            inv_h = np.float32(1.0) / np.float32(h)   # lastDimValueBack
            mean = _tree_absent(_fold_64(x32 * inv_h))
            dd = x32 - mean[:, None]
            var = _tree_absent(_fold_64((dd * dd) * inv_h))
            scale = fl(np.float32(1.0) / fl(np.sqrt(fl(var + e))))
            normed = (scale[:, None] * dd) * g32
        y = normed + b32
    return dict(mean=_f32(mean), variance=_f32(var), scale=_f32(scale), normed=_f32(normed),
                y=_f32(y))


def layer_norm(x, gamma, beta, epsilon, *, product="atlas-a2", ftz=False):
    """(y [B, S, H], mean [B, S], variance [B, S]) of LayerNorm form 1 in x's dtype, bit for bit
    (§7.1). Half outputs are rounded once from fp32 (RNE); the 310P's saturate (overflow ->
    +-65504, NaN -> +0), A2/A3's do not (INF/NaN mode), the 950's never (NO_SAT)."""
    x = np.asarray(x)
    d = _float_dtype(x.dtype)
    b, s, h = x.shape
    v = layer_norm_fp32(x, gamma, beta, epsilon, product=product, ftz=ftz)
    sat = product == "atlas-inference"
    out = []
    for value, shape in ((v["y"], (b, s, h)), (v["mean"], (b, s)), (v["variance"], (b, s))):
        value = value.reshape(shape)
        out.append(value.copy() if d == F32 else f32_to_f16(value, "CAST_NONE", sat))
    return tuple(out)


def layer_norm_reuse_state(x, gamma, beta, epsilon, one_rows):
    """inputX [B*S, H] after the A2/A3/310P float kernel with isReuseSource (§4.6, §8.5): chunks
    of `one_rows` rows (capped at B*S), the tail last; chunk k's f(f(rstd*d)*gamma) lands in
    rows 0 .. rows_k - 1 of inputX, in chunk order; the other rows keep x."""
    x = np.asarray(x)
    if x.dtype != F32:
        raise ValueError("isReuseSource only acts on float inputs")
    rows = x.reshape(-1, x.shape[2])
    normed = layer_norm_fp32(x, gamma, beta, epsilon)["normed"]   # rows are independent
    n = rows.shape[0]
    one = min(int(one_rows), n)
    if one <= 0:
        raise ValueError("one_rows must be > 0")
    chunks = [(k * one, one) for k in range(n // one)]
    if n % one:
        chunks.append((n - n % one, n % one))
    buf = rows.copy()
    for start, count in chunks:
        buf[:count] = normed[start:start + count]
    return buf


def layer_norm_float64(x, gamma, beta, epsilon):
    """(y, mean, variance) in float64 (the reference of §7.3), with the kernel's epsilon (rounded
    to x's dtype, then to fp32): mean and biased variance per row."""
    x = np.asarray(x)
    e = float(_layer_norm_epsilon(epsilon, x.dtype))
    x64 = x.astype(F64)
    mu = x64.mean(-1)
    var = ((x64 - mu[..., None]) ** 2).mean(-1)
    x_hat = (x64 - mu[..., None]) / np.sqrt(var[..., None] + e)
    y = np.asarray(gamma, F64) * x_hat + np.asarray(beta, F64)
    return y, mu, var


def layer_norm_error_bound(x, gamma, beta, epsilon):
    """(|y - y64| bound [B, S, H], |mean - mu| bound [B, S], |var - var64| bound [B, S]) of §7.3
    for fp32 results; half inputs add one rounding to half, 2^-11 |value| + 2^-25, with |value|
    bounded by the reference plus the fp32 bound."""
    x = np.asarray(x)
    h = x.shape[-1]
    u = 2.0 ** -24
    gam = lambda j: j * u / (1 - j * u)
    k = (math.ceil(h / 64) - 1) + math.ceil(math.log2(min(h, 64)))
    e = float(_layer_norm_epsilon(epsilon, x.dtype))
    y64, mu, var = layer_norm_float64(x, gamma, beta, epsilon)
    x64, g64 = x.astype(F64), np.asarray(gamma, F64)
    dev = np.abs(x64 - mu[..., None])
    r0 = 1.0 / np.sqrt(var + e)
    x_hat = dev * r0[..., None]                       # |x_hat|
    e_mu = gam(k + 2) * np.abs(x64).mean(-1)
    e_var = e_mu ** 2 + gam(k + 4) * (var + e_mu ** 2)
    rho_t = e_var / (var + e) + 2 * u
    rho_r = 0.5 * rho_t * (1 + rho_t) + 3 * u
    big_e = (x_hat * (rho_r + 2 * u)[..., None]
             + 1.01 * r0[..., None] * (e_mu[..., None] + u * (dev + e_mu[..., None])))
    bound_y = np.abs(g64) * big_e * (1 + 4 * u) + 2 * u * (np.abs(g64) * x_hat + np.abs(y64))
    bound_mean = e_mu + u * np.abs(mu)
    bound_var = e_var + u * var
    if x.dtype == F16:
        widen = lambda b, ref: b + 2.0 ** -11 * (np.abs(ref) + b) + 2.0 ** -25
        bound_y, bound_mean, bound_var = (widen(bound_y, y64), widen(bound_mean, mu),
                                          widen(bound_var, var))
    return bound_y, bound_mean, bound_var

# SetCmpMask, Select's tensor-scalar mode, Muls on int16 (spec layernorm.md §4.2)

CMPMASK_BYTES = 16


def set_cmp_mask(memory, src, register):
    """The compare-mask register (16 bytes at byte `register` of the core's memory) := the 16
    bytes at `src`."""
    out = _copy_ub(memory)
    out[register:register + CMPMASK_BYTES] = out[src:src + CMPMASK_BYTES]
    return out


def select_tensor_scalar(memory, dtype, dst, sel_mask, src0, register, *, mode="normal",
                         mask=None, repeat=1, count=None, strides=(1, 1, 8, 8)):
    """Select mode 1: each active lane := src0's element where its selMask bit is 1, else the
    first sizeof(T) bytes of the compare-mask register; bit r * epr + e for lane e of repeat r,
    LSB first; the bits move unchanged. strides = (dstBlk, src0Blk, dstRep, src0Rep)."""
    bits_type = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
    s = np.dtype(bits_type).itemsize
    out = _copy_ub(memory)
    scalar = _load(out, [register], bits_type)[0]
    dbs, sbs, drs, srs = strides
    epr = 256 // s
    for r, lanes in enumerate(active_lanes(epr, mode=mode, mask=mask, repeat=repeat, count=count)):
        picked = []
        for e in lanes:
            bit = r * epr + e
            if (out[sel_mask + bit // 8] >> (bit % 8)) & 1:
                picked.append(_load(out, [lane_address(src0, s, sbs, srs, r, e)], bits_type)[0])
            else:
                picked.append(scalar)
        _store(out, [lane_address(dst, s, dbs, drs, r, e) for e in lanes], picked, bits_type)
    return out


def muls_int16(ub, dst, src, scalar, *, mode="normal", mask=None, repeat=1, count=None,
               strides=(1, 1, 8, 8)):
    """Muls on int16: the exact product, saturated to int16 (lngb's assumption: the device's
    overflow behaviour is not documented)."""
    out = _copy_ub(ub)
    dbs, sbs, drs, srs = strides
    for r, lanes in enumerate(active_lanes(128, mode=mode, mask=mask, repeat=repeat, count=count)):
        x = _load(out, [lane_address(src, 2, sbs, srs, r, e) for e in lanes], np.int16)
        product = np.clip(x.astype(np.int64) * int(scalar), -32768, 32767).astype(np.int16)
        _store(out, [lane_address(dst, 2, dbs, drs, r, e) for e in lanes], product, np.int16)
    return out
