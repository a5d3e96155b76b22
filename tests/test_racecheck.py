"""lh.check_races: each kind of race and barrier problem is found, with the right array, element, threads and lines;
the book's correct shared-memory kernels raise no false alarm; bad input gets a clear error; the simulator is
restored after every call; the subprocess route (used on a GPU) gives the same report; at GPU sizes (16 blocks,
millions of accesses) a race is found in seconds, a long check says so and a too long one stops; a negative index into
a 2D array says what a GPU touches; the pairing of one element's accesses equals comparing every pair."""

from __future__ import annotations

import gc
import os
import pickle
import time

import numpy as np
import pytest
from numba import cuda, float32, int32

import labhelpers as lh
from labhelpers import racecheck as rc
from labhelpers.kernels import matmul as mm
from labhelpers.kernels import memory as mem
from labhelpers.kernels import reduction as red
from labhelpers.errors import SimulatorTooSlow
from markers import SIM, gpu_only, sim_only

BLOCK = 32
RADIUS = 1


# ------------------------------------------------------------------------------------ kernels with one bug each


@cuda.jit
def stencil_no_barrier(x, out):
    s = cuda.shared.array(BLOCK + 2 * RADIUS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid + RADIUS] = x[i] if i < x.size else float32(0)
    if tid < RADIUS:
        s[tid] = x[i - RADIUS] if i >= RADIUS else float32(0)
        s[tid + BLOCK + RADIUS] = x[i + BLOCK] if i + BLOCK < x.size else float32(0)
    if i < x.size:
        out[i] = s[tid] + s[tid + 1] + s[tid + 2]


@cuda.jit
def stencil(x, out):
    s = cuda.shared.array(BLOCK + 2 * RADIUS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid + RADIUS] = x[i] if i < x.size else float32(0)
    if tid < RADIUS:
        s[tid] = x[i - RADIUS] if i >= RADIUS else float32(0)
        s[tid + BLOCK + RADIUS] = x[i + BLOCK] if i + BLOCK < x.size else float32(0)
    cuda.syncthreads()  # RAW: the neighbours' elements are written before anyone reads them
    if i < x.size:
        out[i] = s[tid] + s[tid + 1] + s[tid + 2]


@cuda.jit
def fold_without_barrier(x, out):
    s = cuda.shared.array(2 * BLOCK, float32)
    tid = cuda.threadIdx.x
    s[tid] = x[tid]
    s[tid + BLOCK] = x[tid + BLOCK]
    cuda.syncthreads()  # RAW: both halves loaded
    v = s[2 * tid] + s[2 * tid + 1]
    s[tid] = v  # WAR: thread 1 overwrites s[1] while thread 0 may still have to read it
    cuda.syncthreads()
    if tid == 0:
        out[0] = s[0]


@cuda.jit
def last_writer_wins(out):
    s = cuda.shared.array((2, 4), int32)
    tid = cuda.threadIdx.x
    s[1, 2] = tid
    cuda.syncthreads()
    out[tid] = s[1, 2]


@cuda.jit
def barrier_in_if(out):
    s = cuda.shared.array(BLOCK, float32)
    tid = cuda.threadIdx.x
    s[tid] = tid
    if tid < 16:
        cuda.syncthreads()
    out[tid] = s[tid]


@cuda.jit
def barrier_in_uneven_loop(out):
    s = cuda.shared.array(BLOCK, float32)
    tid = cuda.threadIdx.x
    for k in range(tid % 4):
        s[tid] = k
        cuda.syncthreads()
    out[tid] = s[tid]


@cuda.jit
def return_before_barrier(x, out):
    s = cuda.shared.array(BLOCK, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i >= x.size:
        return
    s[tid] = x[i]
    cuda.syncthreads()
    out[i] = s[BLOCK - 1 - tid]


@cuda.jit
def barrier_in_each_branch(out):
    tid = cuda.threadIdx.x
    if tid % 2 == 0:
        cuda.syncthreads()
    else:
        cuda.syncthreads()
    out[tid] = tid


@cuda.jit
def shared_counter(out):
    s = cuda.shared.array(1, int32)
    tid = cuda.threadIdx.x
    if tid == 0:
        s[0] = 0
    cuda.syncthreads()  # RAW: the counter is zero before anyone adds
    cuda.atomic.add(s, 0, 1)
    cuda.syncthreads()  # RAW: every add is done before thread 0 reads the count
    if tid == 0:
        out[0] = s[0]


@cuda.jit
def read_while_counting(out):
    s = cuda.shared.array(1, int32)
    tid = cuda.threadIdx.x
    if tid == 0:
        s[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, 0, 1)
    out[tid] = s[0]


@cuda.jit
def dynamic_no_barrier(out):
    s = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    s[tid] = tid
    out[tid] = s[(tid + 1) % BLOCK]


@cuda.jit
def dynamic_one_race(out):
    s = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    s[tid] = tid
    cuda.syncthreads()
    if tid == 0:
        s[5] = 1  # RAW: thread 5 reads s[5] in the same phase
    out[tid] = s[tid]


@cuda.jit(device=True)
def neighbour(s, i):
    return s[i]


@cuda.jit
def raises_index_error(x, out):
    s = cuda.shared.array(BLOCK, float32)
    s[cuda.threadIdx.x] = x[cuda.grid(1)]  # no bounds check: x is shorter than the grid
    cuda.syncthreads()
    out[cuda.grid(1)] = s[0]


def _x(n=2 * BLOCK):
    return np.arange(n, dtype=np.float32)


# ------------------------------------------------------------------------------------------------- the races


def test_a_missing_barrier_between_write_and_neighbours_read_is_a_raw_race():
    x = _x(2 * BLOCK)
    report = lh.check_races(stencil_no_barrier, 2, BLOCK, x, np.zeros_like(x))
    assert not report.ok and set(report.race_counts) == {"RAW"}
    race = report.races[0]
    assert (race.kind, race.array, race.index, race.block) == ("RAW", "s", (1,), (0, 0, 0))
    assert race.threads == ((0, 0, 0), (1, 0, 0))  # thread 0 writes s[1], thread 1 reads it as its left neighbour
    assert race.lines[0].text == "s[tid + RADIUS] = x[i] if i < x.size else float32(0)"
    assert race.lines[1].text == "out[i] = s[tid] + s[tid + 1] + s[tid + 2]"
    assert race.lines[0].file == __file__ and race.lines[1].line == race.lines[0].line + 5
    assert race.count == 2 * BLOCK  # every element of the block's middle, in both blocks
    text = str(report)
    assert "RAW race on s[1] in block (0, 0, 0)" in text and "test_racecheck.py:" in text
    assert report.barrier_problems == ()


def test_a_thread_overwriting_what_another_still_reads_is_a_war_race():
    x = _x(2 * BLOCK)
    report = lh.check_races(fold_without_barrier, 1, BLOCK, x, np.zeros(1, np.float32))
    assert set(report.race_counts) == {"WAR"}
    race = report.races[0]
    assert (race.kind, race.array, race.index, race.threads) == ("WAR", "s", (1,), ((0, 0, 0), (1, 0, 0)))
    assert race.accesses == ("read", "write")
    assert race.lines[0].text == "v = s[2 * tid] + s[2 * tid + 1]"
    assert race.lines[1].text.startswith("s[tid] = v")
    assert race.count == BLOCK - 1  # s[1] .. s[31]: each read by thread i // 2, written by thread i


def test_two_threads_writing_one_element_is_a_waw_race():
    report = lh.check_races(last_writer_wins, 1, BLOCK, np.zeros(BLOCK, np.int32))
    assert set(report.race_counts) == {"WAW"} and report.race_counts["WAW"] == 1
    race = report.races[0]
    assert (race.array, race.index, race.threads) == ("s", (1, 2), ((0, 0, 0), (1, 0, 0)))
    assert race.element == "s[1, 2]"
    assert race.lines[0] == race.lines[1] and race.lines[0].text == "s[1, 2] = tid"


def test_atomics_do_not_race_but_a_plain_read_during_them_does():
    out = np.zeros(BLOCK, np.int32)
    ok = lh.check_races(shared_counter, 2, BLOCK, out)
    assert ok.ok, str(ok)
    assert out[0] == BLOCK  # the kernel really ran
    racy = lh.check_races(read_while_counting, 1, BLOCK, out)
    assert set(racy.race_counts) == {"RAW"}  # in lockstep the adds come first
    assert all(r.array == "s" and r.index == (0,) for r in racy.races)
    assert {r.lines[0].text for r in racy.races} | {r.lines[1].text for r in racy.races} == {
        "cuda.atomic.add(s, 0, 1)", "out[tid] = s[0]"}


def test_dynamic_shared_memory_and_device_functions_are_followed():
    report = lh.check_races(dynamic_no_barrier, 1, BLOCK, np.zeros(BLOCK, np.float32), shared_bytes=4 * BLOCK)
    assert report.races[0].kind == "RAW" and report.races[0].array == "s"
    assert report.race_counts == {"RAW": BLOCK}
    one = lh.check_races(dynamic_one_race, 1, BLOCK, np.zeros(BLOCK, np.float32), shared_bytes=4 * BLOCK)
    assert [(r.kind, r.element, r.threads) for r in one.races] == [("RAW", "s[5]", ((0, 0, 0), (5, 0, 0)))]


# --------------------------------------------------------------------------------------------- the barriers


def test_a_barrier_inside_an_if_is_reached_by_part_of_the_block():
    report = lh.check_races(barrier_in_if, 1, BLOCK, np.zeros(BLOCK, np.float32))
    (problem,) = report.barrier_problems
    assert (problem.kind, problem.reached, problem.total, problem.block) == ("partial", 16, BLOCK, (0, 0, 0))
    assert problem.waiting[0] == (0, 0, 0) and problem.others[0] == (16, 0, 0)
    assert problem.lines[0].text == "cuda.syncthreads()"
    assert "inside an `if`" in problem.context and "if tid < 16:" in problem.context
    assert "only 16 of the 32 threads" in str(problem)
    assert report.races == ()


def test_a_barrier_in_a_loop_whose_trip_count_differs_per_thread():
    report = lh.check_races(barrier_in_uneven_loop, 1, BLOCK, np.zeros(BLOCK, np.float32))
    (problem,) = report.barrier_problems
    assert (problem.kind, problem.reached) == ("partial", 24)  # tid % 4 == 0: no trip at all
    assert problem.others[:2] == ((0, 0, 0), (4, 0, 0))
    assert "`for` loop" in problem.context


def test_an_early_return_before_a_barrier():
    x = _x(BLOCK + 18)
    report = lh.check_races(return_before_barrier, 2, BLOCK, x, np.zeros_like(x))
    (problem,) = report.barrier_problems
    assert (problem.kind, problem.block, problem.reached) == ("partial", (1, 0, 0), 18)
    assert problem.others[0] == (18, 0, 0)
    assert "after the `return` at line" in problem.context and "returned early" in str(problem)


def test_threads_waiting_at_different_barriers():
    report = lh.check_races(barrier_in_each_branch, 1, BLOCK, np.zeros(BLOCK, np.float32))
    (problem,) = report.barrier_problems
    assert problem.kind == "divergent" and problem.reached == 16 and len(problem.lines) == 2
    assert "wait at different barriers" in str(problem)


def test_warp_intrinsics_say_the_detector_needs_the_simulator():
    with pytest.raises(lh.GPUOnlyError, match="uses cuda.syncwarp.*compute-sanitizer --tool racecheck"):
        lh.check_races(red.reduce_unroll_last_warp, 1, 64, np.ones(128, np.float32), np.zeros(1, np.float32))


def test_the_unsafe_last_warp_reduction_of_chapter_6_races():
    x = np.ones(256, np.float32)
    report = lh.check_races(red.reduce_last_warp_unsafe, 2, 64, x, np.zeros(2, np.float32))
    assert {"RAW", "WAR"} <= set(report.race_counts)
    assert all(r.array == "s" for r in report.races)


# ------------------------------------------------------------------------------- no false alarms in the book


def test_correct_stencil_and_counter_are_clean():
    x = _x(BLOCK + 5)
    out = np.zeros_like(x)
    report = lh.check_races(stencil, 2, BLOCK, x, out)
    assert report.ok, str(report)
    assert str(report).startswith("No races and no barrier problems in stencil[(2, 1, 1), (32, 1, 1)]")
    padded = np.concatenate([[0], x, [0]])
    assert np.allclose(out, padded[:-2] + padded[1:-1] + padded[2:])


def _matmul_inputs(m=20, k=40, n=24):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
            np.zeros((m, n), np.float32))


def test_the_tiled_matmul_kernel_is_clean():
    a, b, c = _matmul_inputs()
    report = lh.check_races(mm.tiled_kernel(16), (2, 2), (16, 16), a, b, c)
    assert report.ok, str(report)
    assert [x.name for x in report.arrays] == ["As", "Bs"] and report.arrays[0].shape == (16, 16)
    assert np.allclose(c, a @ b, atol=1e-4)


@pytest.mark.parametrize("factory", [mm.register_tiled_kernel, mm.double_buffered_kernel])
def test_the_register_tiled_matmul_kernels_are_clean(factory):
    tiling = mm.RegisterTiling(bm=32, bn=32, bk=8, tm=4, tn=4)  # the chapter's shapes, small enough to simulate
    a, b, c = _matmul_inputs(20, 24, 40)
    report = lh.check_races(factory(tiling), tiling.grid(20, 40), tiling.block, a, b, c)
    assert report.ok, str(report)
    assert np.allclose(c, a @ b, atol=1e-4)


@pytest.mark.parametrize("key", red.SIMULATOR_VARIANTS)
def test_the_reduction_kernels_are_clean(key):
    x = np.arange(300, dtype=np.float32) % 7
    report = lh.check_races(red.kernel_for(key, 64), 3, 64, x, np.zeros(8, np.float32))
    assert report.ok, str(report)


def test_the_bank_conflict_kernel_is_clean():
    report = lh.check_races(mem.shared_stride_read, 2, 64, np.zeros(128, np.int32), 3, 2)
    assert report.ok, str(report)
    assert report.arrays[0].name == "buf"


# ------------------------------------------------------------------------------------------ the report's API


def test_raise_for_problems_and_the_caps():
    x = _x(2 * BLOCK)
    report = lh.check_races(stencil_no_barrier, 2, BLOCK, x, np.zeros_like(x), max_reported=1)
    assert len(report.races) == 1 and report.n_races == 2 and report.race_counts == {"RAW": 2 * BLOCK + 2}
    assert "and 1 more" in str(report)
    with pytest.raises(lh.CheckFailed, match=r"(?s)the stencil is not safe: .*RAW race on s\[1\].*RAW: put a "):
        report.raise_for_problems("the stencil")
    lh.check_races(stencil, 2, BLOCK, x, np.zeros_like(x)).raise_for_problems()  # ok: no exception
    assert "ok=False" in repr(report)


def test_the_report_is_the_same_on_every_run():
    x = _x(2 * BLOCK)
    texts = {str(lh.check_races(stencil_no_barrier, 2, BLOCK, x, np.zeros_like(x))) for _ in range(3)}
    assert len(texts) == 1


# ----------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kernel, what", [(None, "got None"), (print, "@cuda.jit"), (_x, "@cuda.jit"),
                                          (neighbour, "device function")])
def test_not_a_kernel(kernel, what):
    with pytest.raises(lh.ArgumentError, match=what):
        lh.check_races(kernel, 1, BLOCK)


@pytest.mark.parametrize("grid, block, match", [(0, 32, "at least 1 block"), (1.5, 32, "whole number"),
                                                ("2", 32, "grid"), (1, 2048, "1024"), (1, (32, 32, 2), "1024"),
                                                (64, 512, "at most 16384 threads")])
def test_bad_launch(grid, block, match):
    with pytest.raises(lh.LaunchConfigError, match=match):
        lh.check_races(stencil, grid, block, _x(), _x())


def test_bad_options():
    with pytest.raises(lh.LaunchConfigError):
        lh.check_races(dynamic_no_barrier, 1, BLOCK, _x(), shared_bytes=-4)
    with pytest.raises(lh.ArgumentError, match="max_reported"):
        lh.check_races(stencil, 1, BLOCK, _x(), _x(), max_reported=0)


@sim_only
def test_the_simulator_is_restored_also_when_the_kernel_raises():
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    before = (kernelapi.FakeCUDAShared.array, sim_kernel.BlockThread.syncthreads)
    with pytest.raises(IndexError):
        lh.check_races(raises_index_error, 2, BLOCK, _x(BLOCK + 3), _x(2 * BLOCK))
    assert (kernelapi.FakeCUDAShared.array, sim_kernel.BlockThread.syncthreads) == before
    x = _x(BLOCK)
    out = np.zeros_like(x)
    stencil[1, BLOCK](x, out)  # a plain launch after it gets plain NumPy shared arrays again
    assert out[1] == 0 + 1 + 2


# -------------------------------------------------------------------------------- the route taken on a GPU


def test_the_subprocess_route_gives_the_same_report():
    x = _x(2 * BLOCK)
    here = lh.check_races(stencil_no_barrier, 2, BLOCK, x, np.zeros_like(x))  # in this process under the simulator
    out = np.zeros_like(x)
    there = rc._run_in_subprocess(stencil_no_barrier, (2, 1, 1), (BLOCK, 1, 1), (x, out), 0, 20)
    assert there == here and str(there) == str(here)
    assert np.count_nonzero(out) > BLOCK  # what the simulated launch wrote comes back into the arrays passed


def test_the_subprocess_route_rebuilds_closures_and_notebook_kernels_from_source(tmp_path):
    import linecache

    source = (
        "from numba import cuda, float32\n"
        "WIDTH = 32\n\n"
        "@cuda.jit(device=True)\n"
        "def left(s, i):\n"
        "    return s[(i + WIDTH - 1) % WIDTH]\n\n"
        "@cuda.jit\n"
        "def notebook_kernel(out):\n"
        "    s = cuda.shared.array(WIDTH, float32)\n"
        "    t = cuda.threadIdx.x\n"
        "    s[t] = t\n"
        "    out[t] = left(s, t)\n")
    cell = "/tmp/ipykernel_4242/2718281828.py"  # how IPython names a cell's code
    linecache.cache[cell] = (len(source), None, source.splitlines(True), cell)
    namespace = {"__name__": "__main__"}
    exec(compile(source, cell, "exec"), namespace)  # noqa: S102
    out = np.zeros(BLOCK, np.float32)
    report = rc._run_in_subprocess(namespace["notebook_kernel"], (1, 1, 1), (BLOCK, 1, 1), (out,), 0, 20)
    race = report.races[0]
    assert (race.kind, race.lines[0].where, race.lines[1].where) == ("RAW", "cell:12", "cell:6")
    assert race.lines[1].text == "return s[(i + WIDTH - 1) % WIDTH]"
    a, b, c = _matmul_inputs(9, 17, 9)
    tiled = rc._run_in_subprocess(mm.tiled_kernel(8), (2, 2, 1), (8, 8, 1), (a, b, c), 0, 20)  # a closure
    assert tiled.ok and [x.name for x in tiled.arrays] == ["As", "Bs"]
    namespace["lock"] = __import__("threading").Lock()
    exec(compile(source.replace("s[t] = t\n", "s[t] = t if lock else t\n"), cell, "exec"), namespace)  # noqa: S102
    with pytest.raises(lh.GPUOnlyError, match="'lock'.*LABHELPERS_BACKEND=sim.*compute-sanitizer --tool racecheck"):
        rc._run_in_subprocess(namespace["notebook_kernel"], (1, 1, 1), (BLOCK, 1, 1), (out,), 0, 20)


# ------------------------------------------------------------------------------ the matrix-multiply checkers

TILED = '''
from numba import cuda, float32
TILE = 8


@cuda.jit
def k(A, B, C):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    m, kd = A.shape
    n = B.shape[1]
    acc = float32(0)
    for k0 in range(0, kd, TILE):
        a = float32(0)
        if row < m and k0 + tx < kd:
            a = A[row, k0 + tx]
        As[ty, tx] = a
        b = float32(0)
        if k0 + ty < kd and col < n:
            b = B[k0 + ty, col]
        Bs[ty, tx] = b
        cuda.syncthreads()
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()
    if row < m and col < n:
        C[row, col] = acc
'''
WAR_BARRIER = "            acc += As[ty, kk] * Bs[kk, tx]\n        cuda.syncthreads()\n"
NO_WAR_BARRIER = TILED.replace(WAR_BARRIER, "            acc += As[ty, kk] * Bs[kk, tx]\n")


def _tiled(tmp_path, name, source):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def test_the_matmul_checkers_report_a_missing_barrier_as_its_race(tmp_path):
    from labhelpers.exercises import matmul as ex

    no_war = _tiled(tmp_path, "no_war", NO_WAR_BARRIER)
    with pytest.raises(lh.CheckFailed) as failure:
        ex.check_tiled_square(no_war, 8)
    text = str(failure.value)
    assert "WAR race on As[0, 0] in block (0, 0, 0)" in text and "no_war.py:27: acc += As[ty, kk]" in text
    assert "no_war.py:20: As[ty, tx] = a" in text and "at the end of the loop body" in text
    with pytest.raises(lh.CheckFailed) as failure:  # exercise 4: the race, but not its kind (the next exercise)
        ex.check_barriers(no_war, 8)
    text = str(failure.value)
    assert "a race is still possible. The race detector found a race on As[0, 0]" in text
    assert "reads it" in text and "WAR" not in text and "RAW" not in text
    no_raw = _tiled(tmp_path, "no_raw", TILED.replace("        Bs[ty, tx] = b\n        cuda.syncthreads()\n",
                                                      "        Bs[ty, tx] = b\n"))
    raw = r"RAW race on As\[0, 0\].*thread \(0, 0, 0\) writes it and thread \(1, 0, 0\) reads it"
    with pytest.raises(lh.CheckFailed, match=raw):
        ex.check_tiled_rect(no_raw, 8)
    clean = _tiled(tmp_path, "clean", TILED)
    assert ex.race_report(clean, 8).ok


NO_SOURCE = ("from numba import cuda, float32\n\n"
             "@cuda.jit\n"
             "def k(out):\n"
             "    tile, unused = cuda.shared.array(32, float32), cuda.shared.array(4, float32)\n"
             "    t = cuda.threadIdx.x\n"
             "    tile[t] = t\n"
             "    out[t] = tile[31 - t]\n")


def _kernel_without_source():
    namespace: dict = {}
    exec(compile(NO_SOURCE, "<no source>", "exec"), namespace)  # noqa: S102  (linecache knows no such file)
    return namespace["k"]


@sim_only  # on a GPU the detector must rebuild the kernel from its source in a simulator subprocess
def test_arrays_are_named_from_the_kernel_even_without_its_source():
    report = lh.check_races(_kernel_without_source(), 1, BLOCK, np.zeros(BLOCK, np.float32))
    assert [a.name for a in report.arrays] == ["tile", "shared array #2 (float32, 4)"]
    race = report.races[0]
    assert race.element == "tile[0]" and race.lines[0].where == "<no source>:7" and race.lines[0].text == ""
    unnamed = rc.Race("RAW", "shared array #2 (float32, 4)", (1,), (0, 0, 0), ((0, 0, 0), (1, 0, 0)),
                      race.lines)
    assert unnamed.element == "shared array #2 (float32, 4) at [1]"


_CANNOT_REBUILD = "check_races cannot run k on a GPU.*source is not available.*LABHELPERS_BACKEND=sim.*compute-sanitizer"


def test_the_subprocess_route_refuses_a_kernel_without_source_clearly():
    # the route a GPU takes, tried directly (it runs on both backends)
    with pytest.raises(lh.GPUOnlyError, match=_CANNOT_REBUILD):
        rc._run_in_subprocess(_kernel_without_source(), (1, 1, 1), (BLOCK, 1, 1), (np.zeros(BLOCK, np.float32),),
                              0, 20)


@gpu_only
def test_a_kernel_without_source_gets_a_clear_gpu_only_error_on_a_gpu():
    with pytest.raises(lh.GPUOnlyError, match=_CANNOT_REBUILD):
        lh.check_races(_kernel_without_source(), 1, BLOCK, np.zeros(BLOCK, np.float32))


# ------------------------------------------------------------------------ the detector's holes (issue 23)

HOT = 12  # writes of one element by thread 0 in one phase, more than the pair budget the test sets


@cuda.jit
def one_writer_many_times(out):
    s = cuda.shared.array(4, int32)
    tid = cuda.threadIdx.x
    if tid == 0:
        for k in range(HOT):
            s[0] = k
    if tid == 1:
        out[0] = s[0]  # RAW: no barrier between thread 0's writes and this read


@cuda.jit
def left_neighbour_unguarded(x, out):
    s = cuda.shared.array(BLOCK, float32)
    tid = cuda.threadIdx.x
    s[tid] = x[tid]
    cuda.syncthreads()  # RAW: every element is written before the neighbours read it
    out[tid] = s[tid - 1]  # thread 0 reads s[-1]


@sim_only
def test_an_incomplete_recording_is_not_ok(monkeypatch):
    monkeypatch.setattr(rc, "MAX_ACCESSES", 10)
    report = lh.check_races(stencil, 2, BLOCK, np.ones(2 * BLOCK, np.float32), np.zeros(2 * BLOCK, np.float32))
    assert not report.complete
    assert not report.ok
    assert "incomplete" in report.summary() and "smaller launch" in report.summary()
    with pytest.raises(lh.CheckFailed, match="smaller launch"):
        report.raise_for_problems("the stencil")


@sim_only
def test_same_thread_pairs_do_not_use_up_the_pair_budget(monkeypatch):
    monkeypatch.setattr(rc, "MAX_PAIRS_PER_ELEMENT", HOT - 2)
    report = lh.check_races(one_writer_many_times, 1, 2, np.zeros(1, np.int32))
    assert not report.ok
    assert report.race_counts.get("RAW") == 1
    assert report.races[0].threads == ((0, 0, 0), (1, 0, 0))


def test_a_negative_shared_index_is_reported():
    x = np.arange(BLOCK, dtype=np.float32)
    with pytest.raises(IndexError, match=r"negative index into the shared array s: \[-1\].*if tid > 0"):
        lh.check_races(left_neighbour_unguarded, 1, BLOCK, x, np.zeros(BLOCK, np.float32))


def test_check_in_simulator_is_a_no_op_under_the_simulator():
    """On a GPU it runs a checker in a simulator subprocess first (tests/test_lab_mutants_11_13.py proves the
    messages there); under the simulator the checker's own run is that run, so nothing happens twice."""
    from labhelpers.racecheck import check_in_simulator

    calls = []
    if lh.is_simulator():
        assert check_in_simulator(lambda *a: calls.append(a), object()) is False
        assert calls == []


@gpu_only
def test_check_in_simulator_reraises_the_simulators_verdict_on_a_gpu():
    from labhelpers.exercises import consistency as ex13
    from labhelpers.racecheck import check_in_simulator

    @cuda.jit
    def plain_counter(x, threshold, counter):
        i = cuda.grid(1)
        if i < x.size and x[i] > threshold:
            c = counter
            cuda.atomic.add(counter, 0, 0)
            c[0] += 1

    with pytest.raises(lh.CheckFailed, match="plain store"):
        check_in_simulator(ex13._check_counting, plain_counter, "your atomic counter", False)


# ------------------------------------------------------------------- at GPU sizes, and the right neighbour

SCALE_BLOCKS = 16
SCALE_REPS = 512  # reads per thread in the loop: 16 blocks x 32 threads x 512 = 262,144 (the full test: 4,194,304)
FULL_SCALE = SIM and os.environ.get("LABHELPERS_FULL_TESTS", "") not in ("", "0")


@cuda.jit
def many_reads_last_block_races(out, reps):
    s = cuda.shared.array(BLOCK, float32)
    tid = cuda.threadIdx.x
    s[tid] = tid
    cuda.syncthreads()  # RAW: every element is written before the loop reads them
    acc = float32(0)
    for k in range(reps):
        acc += s[(tid + k) % BLOCK]
    if cuda.blockIdx.x == cuda.gridDim.x - 1 and tid == 0:
        s[5] = acc  # WAR, in the last block only: the other threads may still be reading s[5]
    out[cuda.grid(1)] = acc


def _scale_check(reps: int) -> tuple[rc.RaceReport, float, float]:
    """The race in the last of 16 blocks, checked; the check's CPU seconds and a plain launch's, same kernel."""
    out = np.zeros(SCALE_BLOCKS * BLOCK, np.float32)
    many_reads_last_block_races[1, BLOCK](out, 1)  # warm: the first launch pays for setting up
    start = time.process_time()
    many_reads_last_block_races[SCALE_BLOCKS, BLOCK](out, reps)
    plain = time.process_time() - start
    start = time.process_time()
    report = lh.check_races(many_reads_last_block_races, SCALE_BLOCKS, BLOCK, out, reps)
    return report, time.process_time() - start, plain


def _assert_the_last_blocks_race(report: rc.RaceReport, reps: int) -> None:
    assert report.complete and not report.ok
    assert report.accesses == SCALE_BLOCKS * BLOCK * (1 + reps) + 1  # every access counted, none dropped
    assert report.race_counts == {"WAR": 1}
    (race,) = report.races
    assert (race.kind, race.element, race.block) == ("WAR", "s[5]", (SCALE_BLOCKS - 1, 0, 0))
    assert race.threads == ((1, 0, 0), (0, 0, 0))  # thread 1 reads s[5] in the loop, thread 0 then overwrites it
    assert race.lines[0].text == "acc += s[(tid + k) % BLOCK]" and race.lines[1].text.startswith("s[5] = acc")


@sim_only
def test_a_race_in_the_last_of_16_blocks_is_found_in_seconds(monkeypatch, capsys):
    """Issue: past 4 million recorded accesses the race in the last block was missed, then the check took minutes.
    What a race needs is kept per thread, phase, element and line (first and last position), and each block is
    analysed and dropped as it ends: the work per access is a dict update, the memory one block's elements."""
    held = []
    done = rc._Recorder.block_done

    def block_done(recorder):
        held.append(sum(len(phase) for st in recorder.pending for phase in st.phases))
        done(recorder)

    monkeypatch.setattr(rc._Recorder, "block_done", block_done)
    report, seconds, plain = _scale_check(SCALE_REPS)
    _assert_the_last_blocks_race(report, SCALE_REPS)
    assert len(held) == SCALE_BLOCKS and max(held) <= BLOCK * (1 + BLOCK + 1)  # <= 32 threads x 34 entries
    assert report.accesses > 200 * max(held)  # 262,657 accesses, at most 1,088 entries held at once
    assert seconds < 4 * plain + 2, f"the check took {seconds:.1f} s of CPU, a plain launch {plain:.1f} s"
    assert capsys.readouterr().out == ""  # a short check says nothing
    assert gc.isenabled()  # switched off while recording, on again after


@pytest.mark.skipif(not FULL_SCALE, reason="4 million accesses, about 10 s: set LABHELPERS_FULL_TESTS=1")
def test_a_race_in_the_last_of_16_blocks_past_4_million_accesses():
    reps = 8192  # 16 x 32 x 8192 = 4,194,304 reads, past the 4,000,000 the recorder used to stop at
    report, seconds, plain = _scale_check(reps)
    _assert_the_last_blocks_race(report, reps)
    assert seconds < 10, f"the check took {seconds:.1f} s of CPU (a plain launch {plain:.1f} s)"


@sim_only
def test_a_long_check_says_so_in_one_line_and_a_too_long_one_stops(monkeypatch, capsys):
    x = _x(2 * BLOCK)
    monkeypatch.setattr(rc, "LONG_RUN_SECONDS", 0.0)  # every check counts as long
    report = lh.check_races(stencil_no_barrier, 4, BLOCK, _x(4 * BLOCK), np.zeros(4 * BLOCK, np.float32))
    assert not report.ok
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("check_races: stencil_no_barrier[(4, 1, 1), (32, 1, 1)]")
    assert "smaller grid" in lines[0]
    monkeypatch.setattr(rc, "MAX_RUN_SECONDS", 0.0)
    with pytest.raises(SimulatorTooSlow, match=r"stopped stencil_no_barrier.*block 1 of 2 took.*smaller grid"):
        lh.check_races(stencil_no_barrier, 2, BLOCK, x, np.zeros_like(x))
    monkeypatch.setattr(rc, "MAX_RUN_SECONDS", 300.0)
    assert lh.check_races(stencil, 2, BLOCK, x, np.zeros_like(x)).ok  # the simulator is restored after the refusal


def _notice_and_chatter(kernel, *args):
    """Run in the simulator process by the test below: a long check's notice, and other output."""
    print("the kernel printed this")
    print(f"{rc.NOTICE_PREFIX} {kernel.__name__}: a notice from the simulator process")


def test_the_subprocess_route_passes_the_long_check_notice_on(capsys):
    payload = pickle.dumps({"check": (__name__, "_notice_and_chatter"), "spec": rc._kernel_spec(stencil, {}),
                            "args": []})
    assert rc._child_process(payload, "stencil")[0] == "ok"
    assert capsys.readouterr().out == "check_races: stencil: a notice from the simulator process\n"


def _sleep_check(kernel, seconds):
    """Run in the simulator process by the test below: a check that outlasts the backstop."""
    import time

    time.sleep(seconds)


def test_the_simulator_process_is_kept_between_checks_and_replaced_when_it_dies(monkeypatch):
    """A lab's check cell on a GPU checks several kernels: the process (seconds to start) serves them all; one that
    dies, or runs past the backstop, is replaced at the next check."""
    from labhelpers import racecheck_gpu as rg

    x = _x(2 * BLOCK)
    first = rc._run_in_subprocess(stencil_no_barrier, (2, 1, 1), (BLOCK, 1, 1), (x, np.zeros_like(x)), 0, 20)
    pid = rg._SIMULATOR.pid
    again = rc._run_in_subprocess(stencil_no_barrier, (2, 1, 1), (BLOCK, 1, 1), (x, np.zeros_like(x)), 0, 20)
    assert again == first and rg._SIMULATOR.pid == pid is not None
    monkeypatch.setattr(rg, "CHILD_TIMEOUT_SECONDS", 1)
    payload = pickle.dumps({"check": (__name__, "_sleep_check"), "spec": rc._kernel_spec(stencil, {}), "args": [30]})
    with pytest.raises(lh.GPUOnlyError, match="was stopped: check a smaller launch"):
        rc._child_process(payload, "stencil")
    assert rg._SIMULATOR.pid is None
    monkeypatch.undo()  # a fresh process takes longer than one second to start
    assert rc._run_in_subprocess(stencil_no_barrier, (2, 1, 1), (BLOCK, 1, 1), (x, np.zeros_like(x)), 0, 20) == first
    assert rg._SIMULATOR.pid not in (None, pid)


@cuda.jit
def tile_left_neighbour(out, row):
    sA = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sA[ty, tx] = ty * 8 + tx
    cuda.syncthreads()
    if ty == row:  # one row of threads, so that the message is about that row
        out[ty, tx] = sA[ty, tx - 1]  # tx = 0: column -1


def test_a_negative_column_in_a_later_row_is_the_previous_rows_last_element():
    with pytest.raises(IndexError) as failure:
        lh.check_races(tile_left_neighbour, 1, (8, 8), np.zeros((8, 8), np.float32), 3)
    text = str(failure.value)
    assert "negative index into the shared array sA: [3, -1]" in text
    assert "not the memory before the array: it reads sA[2, 7] (row-major: offset 3*8 - 1 = 23)" in text
    assert "the last element of the previous row, a neighbour's" in text and "race" in text
    assert "wrap it to sA[3, 7]" in text and "`if tx > 0:` before reading sA[ty, tx - 1]" in text


def test_a_negative_column_in_the_first_row_is_before_the_array():
    with pytest.raises(IndexError) as failure:
        lh.check_races(tile_left_neighbour, 1, (8, 8), np.zeros((8, 8), np.float32), 0)
    text = str(failure.value)
    assert "negative index into the shared array sA: [0, -1]" in text
    assert "reads the memory before the array (row-major: offset 0*8 - 1 = -1): before sA[0, 0]" in text
    assert "in a later row it is the previous row's last element" in text and "`if tx > 0:`" in text


@pytest.mark.parametrize("args, got", [((), "got none"), ((_x(),), "got 1")])
def test_the_kernels_arguments_are_asked_for_by_name(args, got):
    with pytest.raises(lh.ArgumentError, match=rf"needs stencil's 2 argument\(s\) after the launch; {got}\. .*"
                                               r"lh\.check_races\(stencil, 2, 32, x, out\)"):
        lh.check_races(stencil, 2, BLOCK, *args)


def _every_pair(accesses: list) -> dict:
    """What rc._pairs must equal: every write against every access of another thread, in order, first pair per key."""
    found: dict = {}
    for w in (a for a in accesses if a[2]):
        for a in accesses:
            if a[0] == w[0] or (a[3] and w[3]):
                continue
            if a[2]:
                if (a[1], a[0]) < (w[1], w[0]):
                    continue
                kind, first, second = "WAW", w, a
            elif w[1] <= a[1]:
                kind, first, second = "RAW", w, a
            else:
                kind, first, second = "WAR", a, w
            found.setdefault((kind, first[4], second[4]), (first, second))
    return found


def test_the_pairs_of_an_element_are_those_of_comparing_every_pair():
    rng = np.random.default_rng(2024)
    for _ in range(500):
        threads, lines = int(rng.integers(1, 8)), [("k.py", line) for line in range(int(rng.integers(1, 4)))]
        position: dict = {}
        accesses = []
        for _ in range(int(rng.integers(1, 40))):
            t = int(rng.integers(0, threads))
            position[t] = position.get(t, -1) + int(rng.integers(1, 3))
            accesses.append((t, position[t], bool(rng.random() < 0.4), bool(rng.random() < 0.2),
                             lines[int(rng.integers(0, len(lines)))], 0, (t, 0, 0)))
        accesses.sort(key=lambda a: (a[0], a[1]))
        assert rc._pairs(accesses) == _every_pair(accesses), accesses


# A device function whose module is not the kernel's (a package's device function, a kernel rebuilt in the GPU
# route's simulator process): built here in globals of its own.
_OTHER_MODULE: dict = {"__name__": "another_module"}
exec("def plus_one(x):\n    return x + 1\n", _OTHER_MODULE)  # noqa: S102
_plus_one = cuda.jit(device=True)(_OTHER_MODULE["plus_one"])


@cuda.jit
def _calls_another_modules_device_function(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _plus_one(i)


@sim_only  # the swap is the simulator's; on a GPU the same code runs in the simulator process
def test_a_device_function_of_another_module_is_swapped_once_per_launch(monkeypatch):
    """The simulator swaps a device function's module's ``cuda`` at every call: with another module than the
    kernel's and hundreds of threads that cost minutes (lab 8's naive n-body, 256 threads). A checked launch swaps
    each module once and gives it back at the end."""
    from numba.cuda.simulator import kernel as sim_kernel

    entered = []
    original = sim_kernel.swapped_cuda_module

    def counting(fn, fake):
        entered.append(fn.__globals__.get("__name__"))
        return original(fn, fake)

    monkeypatch.setattr(sim_kernel, "swapped_cuda_module", counting)
    out = np.zeros(130, np.int32)
    report = lh.check_races(_calls_another_modules_device_function, 3, 64, out)
    assert report.ok and (out == np.arange(1, 131)).all()
    assert sorted(entered) == ["another_module", __name__], entered  # once each, not once per thread and call
    assert sim_kernel.swapped_cuda_module is counting and globals()["cuda"] is cuda  # all given back


def test_gpu_route_imports_a_device_function_built_under_another_name():
    """On a GPU the race detector rebuilds the kernel in a simulator process. A device function that a module builds
    from a differently named function (``interaction_rsqrt = cuda.jit(...)(body_body_rsqrt)``) must be imported
    there, so that the module's simulator fallback applies (``rsqrt`` without libdevice, whose simulator stub returns
    None), not rebuilt from its source with the GPU process's globals (the H200 run of 2026-11-29 failed so)."""
    from labhelpers import racecheck_gpu as rg
    from labhelpers.kernels import nbody as nb

    spec = rg._kernel_spec(nb.interaction_rsqrt, {})
    assert spec == {"how": "import", "module": "labhelpers.kernels.nbody", "qualname": "interaction_rsqrt"}
