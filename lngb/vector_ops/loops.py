"""The loops of one element-wise instruction, the source of a module per instruction.

`helpers.loops_module(entry)` makes each instruction's module from this file: the line binding
`lane` is replaced by the instruction's lane function, so that its loops call the lane by a
module-level name, inline its arithmetic, vectorise, and cache on disk, each module in a file of
its own named by a hash of its source (which holds a fingerprint of the lane's). (Passing a
jitted function to another as an argument would make neither cacheable; closures made by a
factory share one qualified name, so their cached machine code can bind the wrong lane.) As a
module, this file holds Add's loops.

A module has four helpers, each compiled the first time a program runs a row that needs it
(helpers.py), each with a C entry point `<name>_entry` of pointers (`_jit.c_helper`) that the
executor calls out of line, and called directly in pure Python. The helpers are inlined into
their entry points (a call between the two cost a short row 10-20 ns):

- `run_f32`, `run_half`, `run_mixed`: the contiguous loops of a row whose operands' lanes follow
  each other (its FLAT column), by its types, on the UB's float32 and uint16 elements: `runs`
  runs of n lanes, run r from elements
  d + r * dstep, a + r * sstep, b + r * sstep. The executor cuts a row into such pieces (on
  several cores in lock step, the pieces up to a granule's end: executor.contiguous_row), so one
  core and lock step share these loops.
- `walk`: every other row (strided operands, partial masks, directed roundings to half), lane
  by lane, on every core of ub, a block of `cores` interleaved UBs (walk.interleaved).
"""
import numpy as np
from numba import carray

from lngb._jit import njit
from lngb.vector_ops.half import narrow_rint, widen
from lngb.vector_ops.kernels import load, scalar_of, store
from lngb.vector_ops.lanes import add as lane
from lngb.vector_ops.program import (DST, DST_BLK, DST_REP, DT_DST, DT_SRC, F32, N_COLS, ROUND,
                                     SAT, SCALAR, SCALAR_AT, SOURCES, SRC0, SRC0_BLK, SRC0_REP,
                                     SRC1, SRC1_BLK, SRC1_REP)
from lngb.vector_ops.walk import (G_BYTE, dtype_size, element_shift, interleaved, lane_active,
                                  lane_index, lanes_per_repeat, repeat_count)


# --- the contiguous loops --------------------------------------------------------------------

@njit(inline="always")
def run_f32(f32, u16, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    """Float lanes. A one-lane run (the 950's per-row scalars, on each core in lock step) is
    read and written in place, no loop to enter. One run (one core, or a whole granule on
    every core) enters no loop of runs: LLVM's versioning of that loop cost a short row ~14 ns
    more."""
    if runs == 1:
        if n == 1:
            f32[d] = lane(f32[a], f32[b], s)
        else:
            lanes_f32(f32, d, a, b, s, n)
    elif n == 1:
        for r in range(runs):
            f32[d + r * dstep] = lane(f32[a + r * sstep], f32[b + r * sstep], s)
    else:
        for r in range(runs):
            lanes_f32(f32, d + r * dstep, a + r * sstep, b + r * sstep, s, n)


@njit(inline="always")
def lanes_f32(f32, d, a, b, s, n):
    """n lanes of f32 from d, a, b. Slicing first lets the loops index from 0 without
    wrap-around checks, and naming an in-place operand as dst itself spares LLVM an alias check
    that would stop it vectorising the row accumulation (element-wise, so nothing is
    reassociated). Operands an instruction does not read are dst's own bytes, which its lane
    ignores, so their loads vanish: a unary instruction in place (d == a == b) takes the d == a
    loop, which then reads dst alone (taking the d == b loop, it read av and wrote dv, two
    slices of the same bytes, and LLVM's overlap check ran it lane by lane: 42 against 9 ns a
    64-lane Muls per core in lock step)."""
    if d == a:
        dv, bv = f32[d:d + n], f32[b:b + n]
        for i in range(n):
            dv[i] = lane(dv[i], bv[i], s)
    elif d == b:
        dv, av = f32[d:d + n], f32[a:a + n]
        for i in range(n):
            dv[i] = lane(av[i], dv[i], s)
    else:
        dv, av, bv = f32[d:d + n], f32[a:a + n], f32[b:b + n]
        for i in range(n):
            dv[i] = lane(av[i], bv[i], s)


@njit(inline="always")
def run_half(f32, u16, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    """Half lanes, each result rounded to nearest half (rows in a directed round mode take the
    walk: walk.flat_elements). One loop per run, vectorised behind LLVM's overlap check (in
    place, it runs lane by lane): lanes_f32's in-place variants, with each instruction's half
    conversions, made the first compile ~8 s longer."""
    for r in range(runs):
        o, p = d + r * dstep, a + r * sstep
        q = b + r * sstep
        dv, av, bv = u16[o:o + n], u16[p:p + n], u16[q:q + n]
        for k in range(n):
            dv[k] = narrow_rint(lane(widen(av[k]), widen(bv[k]), s), sat != 0)


@njit(inline="always")
def run_mixed(f32, u16, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    """Lanes from one type to the other, one source: half to float (dt F32), or float to
    nearest half (rows in a directed round mode take the walk)."""
    zero = np.float32(0.0)
    for r in range(runs):
        o, p = d + r * dstep, a + r * sstep
        if dt == F32:
            dv, hv = f32[o:o + n], u16[p:p + n]
            for k in range(n):
                dv[k] = lane(widen(hv[k]), zero, s)
        else:
            hv, fv = u16[o:o + n], f32[p:p + n]
            for k in range(n):
                hv[k] = narrow_rint(lane(fv[k], zero, s), sat != 0)


# --- the lane walk ----------------------------------------------------------------------------

@njit(inline="always")
def walk(ub, row, cores, scratch, flags):
    """Any row, lane by lane, core by core."""
    f32, u16 = ub.view(np.float32), ub.view(np.uint16)
    for c in range(cores):
        walk_core(f32, u16, cores, c, row, scratch)


@njit
def walk_core(f32, u16, cores, core, row, lanes):
    """The element-wise instruction lane by lane on core `core` of f32, u16 (the elements of a
    block of `cores` interleaved UBs): strided operands, partial masks, and directed roundings
    to half (the rows whose FLAT is -1). `lanes`: 128 floats of work space."""
    dt, st = row[DT_DST], row[DT_SRC]
    dsize, ssize = dtype_size(dt), dtype_size(st)
    dshift, sshift = G_BYTE - element_shift(dt), G_BYTE - element_shift(st)
    epr = lanes_per_repeat(row)
    s = scalar_of(f32, u16, cores, core, dt, row[SCALAR_AT], row[SCALAR])
    round_mode, sat, sources = row[ROUND], row[SAT] != 0, row[SOURCES]
    for r in range(repeat_count(row, epr)):
        for e in range(epr):  # read every source lane of the repeat before writing any
            if lane_active(row, r, e, epr):
                x = np.float32(0.0)
                y = np.float32(0.0)
                if sources >= 1:
                    x = load(f32, u16, st, interleaved(lane_index(
                        row[SRC0], ssize, row[SRC0_BLK], row[SRC0_REP], r, e), core, cores, sshift))
                if sources >= 2:
                    y = load(f32, u16, st, interleaved(lane_index(
                        row[SRC1], ssize, row[SRC1_BLK], row[SRC1_REP], r, e), core, cores, sshift))
                lanes[e] = lane(x, y, s)
        for e in range(epr):
            if lane_active(row, r, e, epr):
                store(f32, u16, dt, interleaved(lane_index(
                    row[DST], dsize, row[DST_BLK], row[DST_REP], r, e), core, cores, dshift),
                      lanes[e], round_mode, sat)


# --- the C entry points ----------------------------------------------------------------------

def run_f32_entry(f32, u16, nbytes, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    run_f32(carray(f32, nbytes >> 2), carray(u16, nbytes >> 1), d, a, b, s, n, runs, dstep, sstep,
           dt, sat)


def run_half_entry(f32, u16, nbytes, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    run_half(carray(f32, nbytes >> 2), carray(u16, nbytes >> 1), d, a, b, s, n, runs, dstep, sstep,
            dt, sat)


def run_mixed_entry(f32, u16, nbytes, d, a, b, s, n, runs, dstep, sstep, dt, sat):
    run_mixed(carray(f32, nbytes >> 2), carray(u16, nbytes >> 1), d, a, b, s, n, runs, dstep, sstep,
             dt, sat)


def walk_entry(ub, nbytes, row, cores, scratch, flags):
    walk(carray(ub, nbytes), carray(row, N_COLS), cores, carray(scratch, 256), carray(flags, 256))
