"""Lock-step replay (lngb.runtime.schedule.lockstep_jobs, the executor's execute_cores): cores
whose programs are the same run each row on all of them before the next row. Each core must
get exactly the bytes it gets alone: outputs and every core's whole UB."""
import numba
import numpy as np
import pytest

import lngb
from lngb.backward import prepare_backward
from lngb.core import AICore
from lngb.runtime import schedule as scheduling
from lngb.vector_ops.footprint import extents, footprint
from lngb.vector_ops.program import (COPY, COPY_DIR, DST, ELEMENTWISE, EVENT, FLAT, GM_SLOTS,
                                     GM_TO_UB, KIND, N_COLS, REDUCE, BROADCAST, SCALAR_AT,
                                     SCALAR_READ, SOURCES, SRC0, SRC1, UB_TO_GM, UB_TO_UB)
from lngb.vector_ops.table import TABLE
from lngb.vector_ops.walk import GRANULE

from conftest import seed_of

pytestmark = pytest.mark.jitted

SHAPE = (2, 37, 64)   # 74 rows on 5 cores: 15, 15, 15, 15 and 14, two program sequences


def backward_inputs(dtype):
    rng = np.random.default_rng(seed_of("lock step"))
    b, s, h = SHAPE
    dy, x = (rng.standard_normal(SHAPE).astype(dtype) for _ in range(2))
    variance = (rng.random((b, s)) + 0.5).astype(dtype)
    mean = rng.standard_normal((b, s)).astype(dtype)
    return dy, x, variance, mean, rng.standard_normal(h).astype(dtype)


def run_backward(product, dtype, threads):
    result = lngb.emulate_layer_norm_backward(*backward_inputs(dtype), product=product,
                                              block_dim=5, threads=threads)
    return result, [result.pd_x, result.pd_gamma, result.pd_beta,
                    *(core.ub.copy() for core in result.cores)]


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_lock_step_gives_each_core_the_bytes_it_gets_alone(product, dtype, monkeypatch):
    lngb.clear_caches()
    result, together = run_backward(product, dtype, threads=2)
    plan = result.plan
    assert plan.lockstep == (scheduling.LOCKSTEP,) * 2   # short rows: lock step
    gms = [scheduling.pad_gms(g) for g in
           prepare_backward(backward_inputs(dtype), 1e-5, product, 5, None,
                                          "fast", None).gms]
    jobs = scheduling.lockstep_jobs(result.cores, gms, [s[0] for s in plan.schedules], 2)
    assert sorted(len(job[0]) for job in jobs) == [1, 2, 2]   # 4 alike, and the 14-row core
    monkeypatch.setattr(scheduling, "LOCKSTEP", 1)
    lngb.clear_caches()
    for threads in (1, 2):
        alone_result, alone = run_backward(product, dtype, threads)
        assert alone_result.plan.lockstep == (1, 1)
        for a, b in zip(together, alone):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_the_lock_step_test_covers_every_kind_of_row():
    """The A2 kernel's plan (test above) has every family the executor runs per core: walked
    and contiguous element-wise rows, scalar-register operands, reductions, Brcb, GetValue
    and DataCopy in all three directions."""
    lngb.clear_caches()
    rows = run_backward("atlas-a2", np.float32, 2)[0].plan.rows
    elementwise = rows[rows[:, KIND] == ELEMENTWISE]
    copies = rows[rows[:, KIND] == COPY, COPY_DIR]
    assert (elementwise[:, FLAT] < 0).any() and (elementwise[:, FLAT] >= 0).any()
    assert (elementwise[:, SCALAR_AT] != 0).any()
    assert {REDUCE, BROADCAST, SCALAR_READ} <= set(rows[:, KIND].tolist())
    assert {GM_TO_UB, UB_TO_GM, UB_TO_UB} <= set(copies.tolist())


def separate_ubs(count, nbytes):
    return [np.zeros(nbytes, np.uint8) for _ in range(count)]


def ubs_at_odd_stride(count, nbytes):
    """Rows of one block, but 4 bytes apart: lock step interleaves whole granules
    (walk.GRANULE bytes), so these cores replay one at a time."""
    return [row[:nbytes] for row in np.zeros((count, nbytes + 4), np.uint8)]


@pytest.mark.parametrize("make_ubs", [separate_ubs, ubs_at_odd_stride])
def test_cores_outside_one_ub_block_replay_alone(make_ubs, monkeypatch):
    lngb.clear_caches()
    _, together = run_backward("atlas-350", np.float32, 2)
    monkeypatch.setattr(scheduling, "core_ubs", make_ubs)
    lngb.clear_caches()
    result, alone = run_backward("atlas-350", np.float32, 2)
    gms = [scheduling.pad_gms(g) for g in
           prepare_backward(backward_inputs(np.float32), 1e-5, "atlas-350", 5,
                                          None, "fast", None).gms]
    jobs = scheduling.lockstep_jobs(result.cores, gms, [s[0] for s in result.plan.schedules], 2)
    assert [len(job[0]) for job in jobs] == [1] * 5
    for a, b in zip(together, alone):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_long_rows_replay_one_core_at_a_time(monkeypatch):
    """Tiles of thousands of lanes gain nothing from lock step and would crowd the host's
    caches: the LayerNormGradBeta operator's phase 1 on [1, 16, 1024] float (a row of 1 024
    lanes a core) runs cores alone; its phase 2 (the cross-core sums, 64 columns a core) runs
    them in lock step, with the bits of a replay one core at a time."""
    dy = np.arange(16 * 1024, dtype=np.float32).reshape(1, 16, 1024) % 97 - 40
    lngb.clear_caches()
    result = lngb.emulate_operator(dy, dy[:, ::-1].copy(), threads=2)
    assert result.plan.lockstep == (1, scheduling.LOCKSTEP)
    ubs = [core.ub.copy() for core in result.cores]
    alone = [result.pd_gamma.copy(), result.pd_beta.copy(), *ubs]
    monkeypatch.setattr(scheduling, "LOCKSTEP", 1)
    lngb.clear_caches()
    again = lngb.emulate_operator(dy, dy[:, ::-1].copy(), threads=2)
    assert again.plan.lockstep == (1, 1)
    together = [again.pd_gamma, again.pd_beta, *(core.ub for core in again.cores)]
    for a, b in zip(alone, together):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_jobs_cut_runs_into_equal_chunks_a_multiple_of_threads():
    """72 cores, 56 with one program sequence and 16 with another, on 2 threads: every core
    once, in order; chunks of one run differ by at most one core, are at most LOCKSTEP, and
    come a multiple of 2 to a run."""
    count, steps = 72, 3
    ubs = scheduling.core_ubs(count, AICore.ub_bytes("atlas-350"))
    cores = [AICore("atlas-350", _ub=ub) for ub in ubs]
    gm = np.zeros(count * 64, np.uint8)
    gms = [scheduling.pad_gms((gm[64 * c:64 * (c + 1)],)) for c in range(count)]
    schedules = [np.zeros((steps, 5), np.int64) + (c >= 56) for c in range(count)]
    jobs = scheduling.lockstep_jobs(cores, gms, schedules, threads=2)
    assert [core for job in jobs for core in job[0]] == cores
    sizes = [len(job[0]) for job in jobs]
    assert sizes == [14] * 4 + [8] * 2
    for job_cores, block, roots, programs, bases in jobs:
        first = cores.index(job_cores[0])
        assert block.shape[0] == len(job_cores) and block.flags.c_contiguous
        assert [row.ctypes.data for row in block] == [c.ub.ctypes.data for c in job_cores]
        assert (programs == (first >= 56)).all()
        # core c's GM slot 0 starts at byte 64 c of the shared array; the steps' bases add on
        assert (bases[:, :, 0] == 64 * np.arange(first, first + len(job_cores)) + programs[:, None]
                ).all()
        assert roots[0].ctypes.data == gm.ctypes.data


def test_gm_buffers_of_mixed_writability_replay_alone():
    """A GM slot whose cores' buffers are partly read-only has no one span to share."""
    count = 3
    cores = [AICore("atlas-350", _ub=ub)
             for ub in scheduling.core_ubs(count, AICore.ub_bytes("atlas-350"))]
    gm = np.zeros(count * 64, np.uint8)
    views = [gm[64 * c:64 * (c + 1)] for c in range(count)]
    views[1] = views[1].view()
    views[1].flags.writeable = False
    gms = [scheduling.pad_gms((view,)) for view in views]
    schedules = [np.zeros((2, 5), np.int64) for _ in range(count)]
    assert [len(job[0]) for job in scheduling.lockstep_jobs(cores, gms, schedules, 1)] == [1] * 3
    views[1] = gm[64:128]
    gms = [scheduling.pad_gms((view,)) for view in views]
    assert [len(job[0]) for job in scheduling.lockstep_jobs(cores, gms, schedules, 1)] == [3]


def test_lockstep_width_counts_contiguous_rows_only():
    """Walked rows (FLAT -1) do not pull a plan of long rows under SHORT_ROW."""
    rows = np.zeros((12, N_COLS), np.int64)
    rows[:, KIND] = ELEMENTWISE
    rows[0, FLAT], rows[1:, FLAT] = 2048, -1
    assert scheduling.lockstep_width(rows) == 1
    rows[0, FLAT] = 64
    assert scheduling.lockstep_width(rows) == scheduling.LOCKSTEP


def test_a_plan_keeps_the_jobs_of_two_thread_counts_at_most():
    """Plan.nbytes counts the jobs' arrays for two thread counts (lockstep_parts)."""
    lngb.clear_caches()
    for threads in (1, 2, 3, 2):
        plan = run_backward("atlas-350", np.float32, threads)[0].plan
        assert len(plan.parts) <= 4 and (0, threads) in plan.parts


SHIFTS = (0, 32, 64, 96)   # bytes: operands at every 32-byte place of a 128-byte granule


def shifted(row, rng, nbytes):
    """The row with each UB operand moved by one of SHIFTS, or None if it would then leave
    the UB (footprint.footprint's bounds). An element-wise row's operands it does not read
    stay its dst (as the wrappers name them)."""
    moved = row.copy()
    if moved[KIND] == ELEMENTWISE:
        moved[DST] += rng.choice(SHIFTS)
        for k, col in enumerate((SRC0, SRC1)):
            moved[col] = moved[col] + rng.choice(SHIFTS) if moved[SOURCES] > k else moved[DST]
    elif moved[KIND] in (REDUCE, BROADCAST):
        moved[DST] += rng.choice(SHIFTS)
        moved[SRC0] += rng.choice(SHIFTS)
    elif moved[KIND] == COPY:
        ub_cols = {GM_TO_UB: (DST,), UB_TO_GM: (SRC0,), UB_TO_UB: (DST, SRC0)}[moved[COPY_DIR]]
        for col in ub_cols:
            moved[col] += rng.choice(SHIFTS)
    bounds = np.array([nbytes, 0], np.int64)
    scratch = np.zeros(nbytes + 4096, np.uint8)
    footprint(moved, scratch, scratch, bounds)
    return moved if bounds[1] <= nbytes else None


def row_kind(row):
    """A row's family, with a copy's direction and whether an element-wise row is walked or
    contiguous and takes a scalar register operand."""
    if row[KIND] == COPY:
        return COPY, int(row[COPY_DIR])
    if row[KIND] == ELEMENTWISE:
        return ELEMENTWISE, bool(row[FLAT] < 0), bool(row[SCALAR_AT] != 0)
    return int(row[KIND]),


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_row_on_interleaved_ubs_gives_each_core_its_bytes_alone(product, dtype):
    """Each row of the backward's plan (every family the executor has), as recorded and with
    its UB operands moved across a granule, run once on 3 cores interleaved in one block
    (schedule.interleave) and once on each core alone, from the same random UB and GM bytes
    (NaN patterns included): each core's UB and GM bytes come out the same."""
    rng = np.random.default_rng(seed_of("interleaved rows"))
    result, _ = run_backward(product, dtype, threads=2)
    run_schedule = TABLE.kernels.run_schedule
    nbytes, cores, gm_bytes = result.cores[0].ub.size, 3, 1 << 16
    all_granules = [(0, nbytes // GRANULE)]
    rows = [r for row in result.plan.rows for r in (row, shifted(row, rng, nbytes))
            if r is not None and r[KIND] != EVENT]
    # each distinct row once, where it first comes (the plan repeats rows from tile to tile:
    # of the 950's, a row in three is new)
    rows = list({r.tobytes(): r for r in rows}.values())
    if numba.config.DISABLE_JIT:   # pure Python: 1 in 10 rows, and the first of every kind
        firsts = {id(r) for r in {row_kind(r): r for r in reversed(rows)}.values()}
        rows = [r for k, r in enumerate(rows) if k % 10 == 0 or id(r) in firsts]
    bases = np.zeros((1, cores, GM_SLOTS), np.int64) + (gm_bytes * np.arange(cores))[:, None]
    gm_size = cores * gm_bytes + 4096
    # each row's UB and GM bytes: windows at random offsets of one pool of random bytes (drawing
    # a megabyte anew for every row took most of the test's time)
    pool = rng.integers(0, 256, 2 * (cores * nbytes + GM_SLOTS * gm_size), dtype=np.uint8)

    def random_bytes(n):
        start = int(rng.integers(0, pool.size - n))
        return pool[start:start + n].copy()
    for row in rows:
        ubs = random_bytes(cores * nbytes).reshape(cores, nbytes)
        gms = [random_bytes(gm_size) for _ in range(GM_SLOTS)]
        step = (np.ascontiguousarray(row[None]), np.array([0, 1]), np.zeros((0, 2), np.int64),
                np.zeros(2, np.int64), np.zeros(1, np.int64))
        alone, alone_gms = ubs.copy(), [g.copy() for g in gms]
        for c in range(cores):
            run_schedule(alone[c], *alone_gms, *step, bases[:, c:c + 1])
        block = scheduling.interleave(ubs, all_granules)
        run_schedule(block, *gms, *step, bases)
        scheduling.deinterleave(block, ubs, all_granules)
        assert np.array_equal(ubs, alone), row
        assert all(np.array_equal(a, b) for a, b in zip(gms, alone_gms)), row


def test_interleave_moves_only_the_given_granules_and_back(monkeypatch):
    monkeypatch.setattr(scheduling, "_SPARE_BLOCKS", [])   # a new block: zeros elsewhere
    rng = np.random.default_rng(seed_of("interleave"))
    ubs = rng.integers(0, 256, (3, 4 * GRANULE), dtype=np.uint8)
    block = scheduling.interleave(ubs, [(1, 3)])
    by_granule = block.reshape(4, 3, GRANULE)
    assert not by_granule[[0, 3]].any()
    for c in range(3):
        for k in (1, 2):
            assert np.array_equal(by_granule[k, c], ubs[c, k * GRANULE:(k + 1) * GRANULE])
    back = np.zeros_like(ubs)
    scheduling.deinterleave(block, back, [(1, 3)])
    assert np.array_equal(back[:, GRANULE:3 * GRANULE], ubs[:, GRANULE:3 * GRANULE])
    assert not back[:, :GRANULE].any() and not back[:, 3 * GRANULE:].any()


def test_touched_runs_cover_every_byte_a_row_uses():
    """The granules a plan's phase touches, by footprint.extents: element-wise operands, a
    scalar register operand, and GetValue's source and register."""
    rows = np.zeros((3, N_COLS), np.int64)
    lngb.clear_caches()
    plan = run_backward("atlas-a2", np.float32, 2)[0].plan
    elementwise = plan.rows[(plan.rows[:, KIND] == ELEMENTWISE) & (plan.rows[:, SCALAR_AT] != 0)]
    getvalue = plan.rows[plan.rows[:, KIND] == SCALAR_READ]
    rows[0], rows[1], rows[2] = elementwise[0], getvalue[0], elementwise[0]
    rows[2, SCALAR_AT] = 0
    nbytes = AICore.ub_bytes("atlas-a2")
    runs = scheduling.touched_runs(rows, nbytes)
    used = np.zeros(nbytes // GRANULE, bool)
    for first, last in runs:
        used[first:last] = True
    for at in (elementwise[0, DST], elementwise[0, SCALAR_AT] - 1, getvalue[0, DST],
               getvalue[0, SRC1]):
        assert used[at // GRANULE]
    assert used.sum() < len(used)


@pytest.mark.parametrize("product", ["atlas-a2", "atlas-350"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_extents_cover_every_byte_footprint_finds(product, dtype):
    """footprint.extents (which granules lock step copies) covers every byte footprint's exact
    walk finds for each row of the backward's plan, as recorded and with its operands moved
    across a granule, and the registers of GetValue and scalar operands."""
    rng = np.random.default_rng(seed_of("extents", product, dtype))
    result, _ = run_backward(product, dtype, threads=2)
    nbytes = result.cores[0].ub.size
    rows = [r for row in result.plan.rows for r in (row, shifted(row, rng, nbytes))
            if r is not None and r[KIND] != EVENT]
    if numba.config.DISABLE_JIT:
        rows = rows[::29]
    marks = np.zeros(nbytes + 4096, np.uint8)
    for row in rows:
        bounds = np.array([nbytes, 0], np.int64)
        footprint(row, marks, marks, bounds)
        if row[KIND] == SCALAR_READ:
            marks[row[DST]:row[DST] + row[SRC0]] = marks[row[SRC1]:row[SRC1] + row[SRC0]] = 1
        if row[KIND] == ELEMENTWISE and row[SCALAR_AT]:
            marks[row[SCALAR_AT] - 1:row[SCALAR_AT] + 3] = 1
        covered = np.zeros_like(marks)
        for lo, hi in zip(*extents(row)):
            covered[lo:hi] = 1
        assert not np.any(marks & ~covered), row
        marks[:] = 0


def test_lock_step_on_blocks_left_by_jobs_before_gives_the_same_bits(monkeypatch):
    """interleave takes a block a job before gave back (release) when there is one: its
    granules outside this phase's footprint hold old bytes, which the executor never touches.
    With spare blocks of random bytes, every output and every core's whole UB are the same."""
    lngb.clear_caches()
    _, fresh = run_backward("atlas-350", np.float32, 2)
    rng = np.random.default_rng(seed_of("spare blocks"))
    size = 2 * AICore.ub_bytes("atlas-350")   # the 2-core jobs' blocks
    monkeypatch.setattr(scheduling, "_SPARE_BLOCKS",
                        [rng.integers(0, 256, size, dtype=np.uint8) for _ in range(2)])
    lngb.clear_caches()
    assert scheduling._SPARE_BLOCKS == []   # clear_caches drops them
    monkeypatch.setattr(scheduling, "_SPARE_BLOCKS",
                        [rng.integers(0, 256, size, dtype=np.uint8) for _ in range(2)])
    _, reused = run_backward("atlas-350", np.float32, 2)
    assert len(scheduling._SPARE_BLOCKS) == 2
    for a, b in zip(fresh, reused):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
