"""The loops of one element-wise instruction, the source of a module per instruction.

`helpers.loops_module(entry)` makes each instruction's module from this file: the line binding
`lane` is replaced by the instruction's lane function, so that its loops call the lane by a
module-level name, inline its arithmetic, vectorise, and cache on disk, each module in a file of
its own named by a hash of its source (which holds a fingerprint of the lane's). (Passing a
jitted function to another as an argument would make neither cacheable; closures made by a
factory share one qualified name, so their cached machine code can bind the wrong lane.) As a
module, this file holds Add's loops.

A module has four helpers, each compiled the first time a program runs a row that needs it
(helpers.py), each with a C entry point `<name>_entry` (`_jit.c_helper`) that the executor calls
out of line, and called directly in pure Python. The helpers are inlined into their entry points
(a call between the two cost a short row 10-20 ns):

- `run_f32`, `run_half`, `run_mixed`: the contiguous loops of a row whose operands' lanes follow
  each other (its FLAT column), by its types, on the UB's float32 and uint16 elements: `runs`
  runs of n lanes, run r from elements
  d + r * dstep, a + r * sstep, b + r * sstep. The executor cuts a row into such pieces (on
  several cores in lock step, the pieces up to a granule's end: executor.contiguous_row), so one
  core and lock step share these loops.
- `lane`: the lane itself, which the lane walk (families.walks: every other row, i.e. strided
  operands, partial masks, directed roundings to half) calls per lane through its pointer: one
  walk for every instruction, compiled once (a walk per instruction cost each instruction's
  first strided row 1.5-2 s).
"""
import numpy as np
from numba import carray

from lngb._jit import njit
from lngb.vector_ops.half import narrow_rint, widen
from lngb.vector_ops.lanes import add as lane
from lngb.vector_ops.program import F32


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


def lane_entry(a, b, s):
    return lane(a, b, s)
