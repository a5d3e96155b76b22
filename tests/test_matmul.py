"""Chapter 5, matrix multiplication: kernels, host wrapper, traffic model, CPU loops and the lab's checkers.

Every GPU kernel runs under the simulator on awkward shapes (1 x 1, 17 x 33 times 33 x 5, sizes
no tile divides) and must match a float64 NumPy product within the stated tolerance
(:data:`labhelpers.kernels.matmul.RELATIVE_TOLERANCE`, a relative error of the Frobenius norm),
and element by element within the classical bound ``k * eps * (|A| @ |B|)``.
"""

from __future__ import annotations

import functools

import matplotlib
import numpy as np
import pytest

import labhelpers as lh
from labhelpers.exercises import matmul as ex
from labhelpers.experiments import matmul as mm_exp
from labhelpers.figures import matmul as mm_fig
from labhelpers.kernels import matmul as mm
from labhelpers.models import tiling
from markers import sim_only
from mutants import lab_skeletons, load_solutions, mutant

matplotlib.use("Agg")
from numba import cuda  # noqa: E402  (after labhelpers chose the backend)

#: A register tiling small enough for the simulator (16 threads per block) with the same code paths.
SMALL = mm.RegisterTiling(bm=16, bn=16, bk=4, tm=4, tn=4)
#: (m, k, n): a single element, the issue's 17x33 @ 33x5, thin and wide, sizes that divide no tile (8, 16, 32, 64, 128).
SHAPES = [(1, 1, 1), (17, 33, 5), (5, 3, 19), (20, 21, 19)]


def _inputs(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _assert_product(c, a, b):
    """c is a @ b: Frobenius relative error within the stated tolerance, and each element within k*eps*(|A||B|)."""
    c = np.asarray(c, dtype=np.float64)
    assert np.isfinite(c).all(), "the result holds NaN or inf (an element never written?)"
    assert mm.relative_error(c, a, b) <= mm.RELATIVE_TOLERANCE
    k = a.shape[1]
    bound = (k + 2) * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(c - a.astype(np.float64) @ b.astype(np.float64)) <= bound + 1e-30).all()


# ------------------------------------------------------------------------------------------ GPU kernels


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", ["naive", "tiled", "coarsened", "double_buffered"])
def test_every_variant_matches_numpy(variant, shape):
    a, b = _inputs(*shape)
    _assert_product(mm.matmul(a, b, variant=variant), a, b)


@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 5), (130, 9, 3)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", ["register", "unrolled"])
def test_the_fastest_kernels_match_numpy(variant, shape):
    """The 128 x 128, 8 x 8 per thread kernels themselves (256 threads per block; ``unrolled`` with its own
    128 x 128 x 16 shape), on shapes they have to guard (130 rows: two blocks, the second one row deep)."""
    a, b = _inputs(*shape)
    _assert_product(mm.matmul(a, b, variant=variant), a, b)


@pytest.mark.parametrize("tile", mm.TILES)
def test_tiled_kernel_for_every_tile(tile):
    a, b = _inputs(tile - 1, tile + 1, tile + 3)
    _assert_product(mm.matmul(a, b, variant="tiled", tile=tile), a, b)


@pytest.mark.parametrize("factory", [mm.register_tiled_kernel, mm.double_buffered_kernel, mm.unrolled_kernel])
@pytest.mark.parametrize("guarded", [True, False])
def test_register_kernels_with_and_without_bounds_checks(factory, guarded):
    """Whole tiles: both paths agree with NumPy (the unguarded one is only ever used on whole tiles)."""
    m, k, n = 32, 12, 48
    a, b = _inputs(m, k, n)
    c = cuda.to_device(np.full((m, n), np.nan, dtype=np.float32))
    factory(SMALL, guarded)[SMALL.grid(m, n), SMALL.block](cuda.to_device(a), cuda.to_device(b), c)
    _assert_product(c.copy_to_host(), a, b)


@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 5), (33, 7, 18)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("factory", [mm.register_tiled_kernel, mm.double_buffered_kernel, mm.unrolled_kernel])
def test_guarded_register_kernels_on_ragged_shapes(factory, shape):
    a, b = _inputs(*shape)
    m, _, n = shape
    c = cuda.to_device(np.full((m, n), np.nan, dtype=np.float32))
    factory(SMALL, True)[SMALL.grid(m, n), SMALL.block](cuda.to_device(a), cuda.to_device(b), c)
    _assert_product(c.copy_to_host(), a, b)


def test_unrolled_kernel_has_no_races_on_a_partial_last_block():
    """20 x 10 by 10 x 19 with 16 x 16 x 4 tiles: the last block is partial in m and n, the last tile in k, and the
    detector sees the accesses the device functions make (k_step's reads, tile_land's writes)."""
    m, k, n = 20, 10, 19
    a, b = _inputs(m, k, n, seed=5)
    c = np.zeros((m, n), np.float32)
    report = lh.check_races(mm.unrolled_kernel(SMALL), SMALL.grid(m, n), SMALL.block, a, b, c)
    assert report.ok, str(report)
    phases, per_phase = -(-k // SMALL.bk), SMALL.a_passes + SMALL.b_passes + SMALL.bk * (SMALL.tm + SMALL.tn)
    assert report.accesses == 4 * SMALL.threads * phases * per_phase, "accesses inside the device functions missed"
    _assert_product(c, a, b)


def test_the_unrolled_variant_refuses_bad_input_like_the_others():
    with pytest.raises(lh.ArrayArgumentError, match=r"float64.*astype\(np.float32\)"):
        mm.matmul(np.ones((3, 4)), np.ones((4, 2), np.float32), variant="unrolled")
    with pytest.raises(lh.ArrayArgumentError, match="inner dimensions differ: a is 3 x 4 and b is 5 x 2"):
        mm.matmul(np.ones((3, 4), np.float32), np.ones((5, 2), np.float32), variant="unrolled")
    with pytest.raises(lh.LaunchConfigError, match="multiples of 4"):
        mm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), variant="unrolled",
                  tiling=mm.RegisterTiling(tm=6))


def test_device_inputs_give_a_device_result():
    a, b = _inputs(9, 4, 11)
    c_d = mm.matmul(cuda.to_device(a), cuda.to_device(b), variant="tiled", tile=8)
    assert not isinstance(c_d, np.ndarray)
    _assert_product(c_d.copy_to_host(), a, b)


def test_out_argument_is_written():
    a, b = _inputs(6, 5, 7)
    out = np.full((6, 7), np.nan, dtype=np.float32)
    assert mm.matmul(a, b, variant="naive", out=out) is out
    _assert_product(out, a, b)


@pytest.mark.parametrize("shape", [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_empty_dimensions(shape):
    m, k, n = shape
    c = mm.matmul(np.ones((m, k), np.float32), np.ones((k, n), np.float32))
    assert c.shape == (m, n) and not c.any()


# ------------------------------------------------------------------------------------- wrapper validation


def test_inner_dimensions_must_agree():
    with pytest.raises(lh.ArrayArgumentError, match="inner dimensions differ: a is 3 x 4 and b is 5 x 2"):
        mm.matmul(np.ones((3, 4), np.float32), np.ones((5, 2), np.float32))


def test_dtype_is_float32():
    with pytest.raises(lh.ArrayArgumentError, match=r"float64.*astype\(np.float32\)"):
        mm.matmul(np.ones((3, 4)), np.ones((4, 2), np.float32))


def test_matrices_are_two_dimensional():
    with pytest.raises(lh.ArrayArgumentError, match="2 dimension"):
        mm.matmul(np.ones(4, np.float32), np.ones((4, 2), np.float32))


def test_contiguity_is_required():
    with pytest.raises(lh.ArrayArgumentError, match="ascontiguousarray"):
        mm.matmul(np.ones((4, 3), np.float32).T, np.ones((4, 2), np.float32))


def test_simulator_device_arrays_are_validated_too():
    with pytest.raises(lh.ArrayArgumentError, match="float64"):
        mm.matmul(cuda.to_device(np.ones((3, 4))), np.ones((4, 2), np.float32))


def test_out_must_have_the_result_shape():
    with pytest.raises(lh.ArrayArgumentError, match=r"shape \(3, 2\)"):
        mm.matmul(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), out=np.empty((2, 3), np.float32))


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ValueError, match="naive, tiled, coarsened, register, double_buffered, unrolled"):
        mm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), variant="fast")


@pytest.mark.parametrize("tile", [0, 33])
def test_impossible_tiles_are_refused(tile):
    with pytest.raises(lh.LaunchConfigError, match="tile"):
        mm.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), variant="tiled", tile=tile)


@pytest.mark.parametrize("kwargs, match", [
    (dict(tm=6, tn=8), "multiples of 4"),
    (dict(bm=100), "whole number of thread tiles"),
    (dict(bk=7), "even"),
    (dict(bm=256, bn=256, tm=4, tn=4), "exceeds the limit of 1024"),
    (dict(bn=64, bm=128, tm=8, tn=8, bk=6), "A tile"),
])
def test_register_tiling_validates(kwargs, match):
    with pytest.raises(lh.LaunchConfigError, match=match):
        mm.RegisterTiling(**kwargs)


def test_plan_geometry_and_guards():
    p = mm.plan("register", 4096, 4096, 4096)
    assert (p.grid, p.block, p.threads_per_block, p.guarded) == ((32, 32), (16, 16), 256, False)
    assert mm.plan("register", 4097, 4096, 4096).guarded
    assert mm.plan("register", 4096, 4100, 4096).guarded
    q = mm.plan("naive", 17, 33, 5)
    assert q.grid == (1, 2) and q.block == (16, 16)
    t = mm.plan("tiled", 17, 33, 5, tile=8)
    assert t.grid == (1, 3) and t.block == (8, 8)
    assert mm.REGISTER.shared_bytes() == 4 * 8 * (132 + 128)
    assert mm.REGISTER.a_passes == 4 and mm.REGISTER.b_passes == 4
    u = mm.plan("unrolled", 4096, 4096, 4096)
    assert (u.grid, u.block, u.guarded, u.config) == ((32, 32), (16, 16), False, "128x128x16, 8x8/thread")
    assert u.kernel is mm.unrolled_kernel(mm.UNROLLED, False) and mm.UNROLLED.min_blocks == 1
    assert mm.plan("unrolled", 4096, 4104, 4096).guarded  # k = 4104 is not a whole number of 16-step slices


def test_relative_error_sees_a_single_wrong_element():
    a, b = _inputs(64, 64, 64)
    c = a.astype(np.float64) @ b
    assert mm.matches_reference(c.astype(np.float32), a, b)
    c[10, 20] = 0.0
    assert not mm.matches_reference(c, a, b)
    c[10, 20] = np.nan
    assert not mm.matches_reference(c, a, b)


@sim_only
def test_timing_functions_do_nothing_under_the_simulator():
    assert mm_exp.time_kernel("register", 4096) is None
    assert mm_exp.time_cublas(4096) is None
    table = mm_exp.measure_sweep(sizes=[256, 4096], progress=False)
    assert list(table.columns[:4]) == ["kernel", "variant", "tile", "n"]
    assert len(table) == 2 * (len(mm_exp.SWEEP_KERNELS) + len(mm_exp.SWEEP_CUBLAS))
    assert (table["status"] == "simulator").all() and table["gflops"].isna().all()


def test_unrolling_steps_read_the_tile_shape_table():
    import pandas as pd

    rows = [dict(kernel=k, bm=t.bm, bn=t.bn, bk=t.bk, min_blocks=t.min_blocks, registers=100 + i, gflops=1000.0 * (i + 1))
            for i, (_, k, t) in enumerate(mm_exp.UNROLLING_STEPS)]
    steps = mm_exp.unrolling_steps(pd.DataFrame(rows), cublas_gflops=8000.0)
    assert list(steps["of cuBLAS FP32"]) == [0.125, 0.25, 0.375, 0.5]
    assert list(steps["tile"]) == ["128 x 128 x 8", "128 x 128 x 8", "128 x 128 x 16", "128 x 128 x 16"]
    with pytest.raises(KeyError, match="re-collect ch05_register_configs"):
        mm_exp.unrolling_steps(pd.DataFrame(rows[:2]), cublas_gflops=8000.0)


# ---------------------------------------------------------------------------------------- traffic model


def test_flops_and_naive_intensity():
    assert tiling.matmul_flops(2, 3, 4) == 48
    assert tiling.naive_loads(2, 3, 4) == 48
    assert tiling.kernel_intensity(4096, 4096, 4096) == pytest.approx(0.25, rel=1e-3)
    assert tiling.ideal_intensity(4096) == pytest.approx(2 * 4096 / 12)


@pytest.mark.parametrize("m, k, n, t", [(12, 12, 12, 4), (17, 33, 5, 8), (1, 1, 1, 16), (30, 7, 19, 4)])
def test_tiled_loads_equal_the_sum_over_blocks_and_phases(m, k, n, t):
    """The closed form counts exactly what tile_phase says each block loads in each phase."""
    total = 0
    for br in range(-(-m // t)):
        for bc in range(-(-n // t)):
            for p in range(tiling.phases(k, t)):
                ph = tiling.tile_phase(m, k, n, t, br, bc, p)
                total += ph.a_elements + ph.b_elements
    assert total == tiling.tiled_loads(m, k, n, t)


def test_multiply_adds_of_all_phases_add_up_to_the_product():
    m, k, n, t = 17, 33, 5, 8
    total = sum(tiling.tile_phase(m, k, n, t, br, bc, p).multiply_adds
                for br in range(3) for bc in range(1) for p in range(5))
    assert 2 * total == tiling.matmul_flops(m, k, n)


def test_reuse_factor_is_the_tile_for_whole_tiles():
    assert tiling.reuse_factor(64, 64, 64, 16) == pytest.approx(16)
    assert tiling.reuse_factor(4096, 4096, 4096, 128) == pytest.approx(128)
    assert tiling.kernel_intensity(4096, 4096, 4096, 16) == pytest.approx(4.0, rel=0.01)


def test_roofline():
    assert tiling.ridge_point(4000, 50000) == 12.5
    assert tiling.attainable_gflops(0.25, 4000, 50000) == 1000
    assert tiling.attainable_gflops(100, 4000, 50000) == 50000
    np.testing.assert_allclose(tiling.attainable_gflops(np.array([1, 12.5, 20]), 4000, 50000), [4000, 50000, 50000])
    with pytest.raises(ValueError):
        tiling.attainable_gflops(1, 0, 1)


@pytest.mark.parametrize("args", [(4, 4, 4, 2, 2, 0, 0), (4, 4, 4, 2, 0, 0, 2), (4, 4, 4, 2, -1, 0, 0)])
def test_tile_phase_rejects_positions_outside_the_grid(args):
    with pytest.raises(ValueError, match="must lie in"):
        tiling.tile_phase(*args)


def test_tile_phase_clips_at_the_edges():
    ph = tiling.tile_phase(10, 7, 5, 4, 2, 1, 1)
    assert (ph.a_rows, ph.a_cols, ph.b_rows, ph.b_cols, ph.phases) == ((8, 10), (4, 7), (4, 7), (4, 5), 2)


def test_drawings():
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2)
    assert mm_fig.draw_tiling(ax1, 12, 12, 12, 4, 1, 2, 1) is None  # a drawer returns nothing
    ph = tiling.tile_phase(12, 12, 12, 4, 1, 2, 1)  # what it drew
    assert ph.phase == 1 and "8.0x fewer" not in ax1.get_title() and "4.0x fewer" in ax1.get_title()
    ref = lh.load_reference("ch05_matmul_sweep")
    mm_fig.draw_roofline(ax2, 4096, table=ref.table, ceilings=rl.reference_ceilings(), cublas_gflops=50000.0,
                         label="reference")
    legend = [t.get_text() for t in ax2.get_legend().get_texts()]
    assert ax2.get_xscale() == "log" and any(s.startswith("cuBLAS FP32: 50.0 T") for s in legend)
    assert "  naive" in legend and not any("tiled 8" in s for s in legend)
    plt.close(fig)


def test_chapter_figures_draw_the_reference_data():
    import matplotlib.pyplot as plt

    cpu_ref = lh.load_reference("ch05_cpu_loop_order")
    fig = mm_fig.plot_cpu_loop_orders(cpu_ref.table.iloc[:0], cpu_ref)
    assert fig.axes[0].get_lines()
    plt.close(fig)
    ref = lh.load_reference("ch05_matmul_sweep")
    assert lh.interactive_figure(functools.partial(mm_fig.draw_sweep_widget, table=ref.table, label=ref.label),
                                 tile=[16, 8, 32], scale=["log", "linear"]).children
    assert lh.interactive_figure(mm_fig.draw_phase, block_row=(0, 2, 1, 1), block_col=(0, 3, 1, 1),
                                 phase=(0, 2, 1, 0)).children


# ----------------------------------------------------------------------------------------------- CPU loops


@pytest.mark.parametrize("order", mm.ORDERS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 5), (70, 65, 3)], ids=lambda s: "x".join(map(str, s)))
def test_cpu_loop_orders_match_numpy(order, shape):
    a, b = _inputs(*shape)
    _assert_product(mm.cpu_matmul(a, b, order=order, block=16), a, b)


def test_cpu_matmul_validates():
    with pytest.raises(lh.ArrayArgumentError, match="inner dimensions differ"):
        mm.cpu_matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="unknown loop order"):
        mm.cpu_matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), order="jik")
    with pytest.raises(lh.ArrayArgumentError, match="NumPy array"):
        mm.cpu_matmul(cuda.to_device(np.ones((2, 2), np.float32)), np.ones((2, 2), np.float32))


# ------------------------------------------------------------------------------------------------ the lab


SOL = load_solutions("05_matrix_multiply_lab")
SKEL = lab_skeletons("05_matrix_multiply_lab", "from numba import cuda, float32\nTILE = 8\n")
NAIVE, TILED = SOL.matmul_naive_kernel, SOL.matmul_rect_kernel  # the package's kernels (tests/test_lab_sources.py)

# Typical mistakes: a correct kernel with a line or two changed.
WRONG_NAIVE = {
    "rows and columns swapped": mutant(NAIVE, "col, row = cuda.grid(2)", "row, col = cuda.grid(2)"),
    "> instead of >= (the seed's bug)": mutant(NAIVE, "if row < C.shape[0] and col < C.shape[1]:",
                                               "if row <= C.shape[0] and col <= C.shape[1]:  # lets row == Width in"),
    "square assumption": mutant(NAIVE, "for p in range(A.shape[1]):", "for p in range(C.shape[1]):"),
}
RAW, WAR = "cuda.syncthreads()  # RAW", "cuda.syncthreads()  # WAR"
WRONG_TILED = {
    "no WAR barrier": mutant(TILED, WAR, ""),
    "no RAW barrier": mutant(TILED, RAW, ""),
    "unguarded loads (sizes assumed to divide the tile)": mutant(
        TILED, ("if row < m and k0 + tx < k:", "if True:"), ("if k0 + ty < k and col < n:", "if True:")),
    "barrier inside an if": mutant(TILED, RAW, "if row < m:\n    cuda.syncthreads()  # threads outside C skip it"),
}
EARLY_RETURN = mutant(TILED, "acc = float32(0)", "acc = float32(0)\nif row >= m or col >= n:\n    return")
BARRIER_FIRST = mutant(TILED, ("a = float32(0)", "cuda.syncthreads()  # WAR, at the top of the loop\na = float32(0)"),
                       (WAR, ""))
SQUARE_GUARDS = mutant(TILED, ("if row < m and k0 + tx < k:", "if row < m and k0 + tx < n:"),
                       ("if k0 + ty < k and col < n:", "if k0 + ty < n and col < n:"))


def test_a_correct_tiled_kernel_has_no_barrier_problems():
    assert ex.barrier_problems(TILED) == []
    ex.check_tiled_rect(TILED, 8)


def test_a_barrier_at_the_top_of_the_loop_also_prevents_the_war_hazard():
    assert ex.barrier_problems(BARRIER_FIRST) == []


@pytest.mark.parametrize("what, expected", [("no WAR barrier", "WAR"), ("no RAW barrier", "RAW"),
                                            ("barrier inside an if", "inside an `if`")])
def test_barrier_problems_name_the_hazard(what, expected):
    problems = ex.barrier_problems(WRONG_TILED[what])
    assert problems and any(expected in p for p in problems)


def test_an_early_return_is_reported():
    assert any("return" in p for p in ex.barrier_problems(EARLY_RETURN))


def test_check_naive():
    ex.check_naive(SOL.matmul_naive_kernel)
    with pytest.raises(lh.CheckFailed, match="never written"):
        ex.check_naive(SKEL["matmul_naive_kernel"])
    for wrong in WRONG_NAIVE.values():
        with pytest.raises(lh.CheckFailed):
            ex.check_naive(wrong)


def test_check_tiled_square():
    ex.check_tiled_square(SOL.matmul_tiled_kernel, 8)
    with pytest.raises(lh.CheckFailed, match="^Elements never written"):
        ex.check_tiled_square(SKEL["matmul_tiled_kernel"], 8)
    for wrong in WRONG_TILED.values():
        with pytest.raises(lh.CheckFailed):
            ex.check_tiled_square(wrong, 8)
    with pytest.raises(lh.CheckFailed, match="return"):
        ex.check_tiled_square(EARLY_RETURN, 8)


def test_check_tiled_rect():
    ex.check_tiled_rect(SOL.matmul_rect_kernel, 8)
    with pytest.raises(lh.CheckFailed):
        ex.check_tiled_rect(SKEL["matmul_rect_kernel"], 8)
    with pytest.raises(lh.CheckFailed, match="wrong|outside"):
        ex.check_tiled_rect(SQUARE_GUARDS, 8)


def test_check_barriers():
    ex.check_barriers(SOL.matmul_tiled_fixed, 8)
    with pytest.raises(lh.CheckFailed, match="a race is still possible") as failure:
        ex.check_barriers(SKEL["matmul_tiled_fixed"], 8)
    assert "WAR" not in str(failure.value), "the message must not give the exercise away"
    with pytest.raises(lh.CheckFailed, match="inside an `if`"):
        ex.check_barriers(WRONG_TILED["barrier inside an if"], 8)


def test_check_hazard():
    ex.check_hazard(SOL.missing_barrier_hazard)
    with pytest.raises(lh.CheckFailed, match="returned None"):
        ex.check_hazard(SKEL["missing_barrier_hazard"])
    for wrong in ("RAW", "waw", "race"):
        with pytest.raises(lh.CheckFailed):
            ex.check_hazard(lambda wrong=wrong: wrong)
    ex.check_hazard(lambda: " war ")


def test_checkers_reject_functions_that_are_not_kernels():
    with pytest.raises(lh.CheckFailed, match="@cuda.jit"):
        ex.check_naive(lambda A, B, C: None)


# =========================================================================== the chapter's prose against the reference data
# Every figure the chapter's text (and lab 5's) quotes from a measurement is recomputed here from the reference data:
# a re-measured reference file that changes a figure fails this test instead of silently contradicting the text.

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from labhelpers import roofline as rl  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "05_matrix_multiply.ipynb"
LAB = ROOT / "labs" / "05_matrix_multiply_lab.ipynb"


def _prose(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def _h(x: float) -> str:
    """A rate as the prose rounds it: to the hundred, with a thousands separator (32,124 -> 32,100)."""
    return f"{round(x, -2):,.0f}"


def _t(x: float) -> str:
    """A rate rounded to the ten (1,364 -> 1,360), as the prose quotes the smaller ones."""
    return f"{round(x, -1):,.0f}"


def _2g(x: float) -> str:
    """A rate to two significant figures (61.3 -> 61, 212.9 -> 210)."""
    return f"{float(f'{x:.2g}'):,.0f}"


def _at(n: int):
    t = lh.load_reference("ch05_matmul_sweep").table
    return t[t["n"] == n].set_index("kernel")["gflops"]


def test_chapter_names_the_reference_gpu_it_quotes():
    for name in ("ch05_matmul_sweep", "ch05_register_configs", "ch05_cpu_loop_order", "ch05_ceilings", "ch07_ceilings"):
        assert lh.load_reference(name).gpu == "NVIDIA H200", f"{name}: the chapter's prose calls its GPU the H200"


def test_chapter_prose_about_the_cpu_loops_matches_the_reference_data():
    cpu_t = lh.load_reference("ch05_cpu_loop_order").table.pivot(index="n", columns="order", values="gflops")
    upto512 = cpu_t.loc[[128, 256, 512]]
    ratio = upto512["ikj"] / upto512["ijk"]
    phrases = [
        f"the `ikj` order runs at {cpu_t['ikj'].min():.0f} to {cpu_t['ikj'].max():.0f} GFLOP/s, `ijk` at "
        f"{upto512['ijk'].min():.1f} to {upto512['ijk'].max():.1f}",
        f"about {ratio.min():.0f} to {ratio.max():.0f} times slower up to $n = 512$, and "
        f"{cpu_t.loc[1024, 'ikj'] / cpu_t.loc[1024, 'ijk']:.0f} times slower at $n = 1024$ "
        f"({cpu_t.loc[1024, 'ijk']:.2f} GFLOP/s)",
        f"(by {1 - cpu_t.loc[512, 'blocked'] / cpu_t.loc[512, 'ikj']:.0%} at $n = 512$)",
        f"by {cpu_t.loc[2048, 'blocked'] / cpu_t.loc[2048, 'ikj'] - 1:.0%} at $n = 2048$ "
        f"({cpu_t.loc[2048, 'blocked']:.1f} against {cpu_t.loc[2048, 'ikj']:.1f} GFLOP/s)",
        f"about {_t(cpu_t.loc[512, 'numpy'])} GFLOP/s at $n = 512$, "
        f"{cpu_t.loc[512, 'numpy'] / cpu_t.loc[512, 'ikj']:.0f} times `ikj`",
        f"caught it at {_2g(cpu_t.loc[1024, 'numpy'])} and {_2g(cpu_t.loc[2048, 'numpy'])} GFLOP/s",
    ]
    cpu = lh.load_reference("ch05_cpu_loop_order").table
    once = cpu[(cpu["order"] == "numpy") & cpu["n"].isin([1024, 2048])]
    assert (once["spread"] == 0).all(), "the text says the reference run timed NumPy only once at n = 1024 and 2048"
    blocked_gain = cpu_t["blocked"] / cpu_t["ikj"] - 1
    assert abs(blocked_gain[128]) < 0.02, "the text says blocking runs as fast as ikj at n = 128"
    assert (blocked_gain[[256, 512]] < 0).all() and (blocked_gain[[1024, 2048]] > 0).all(), (
        "the text says blocking is slower than ikj at n = 256 and 512 and faster from n = 1024 on")
    assert cpu_t.loc[[1024, 2048], "numpy"].max() < cpu_t.loc[512, "numpy"] / 2, (
        "the text says the single NumPy samples at n = 1024 and 2048 are far below its rate at n = 512")
    missing = _missing(_prose(CHAPTER), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)


def _configs():
    """The tile-shape table, indexed by (kernel, bm, bn, bk, min_blocks)."""
    return lh.load_reference("ch05_register_configs").table.set_index(["kernel", "bm", "bn", "bk", "min_blocks"])


def test_chapter_prose_about_the_gpu_kernels_matches_the_reference_data():
    a, a256, a1024 = _at(4096), _at(256), _at(1024)
    cfg = lh.load_reference("ch05_register_configs").table
    key = _configs()
    reg8, db8 = key.loc[("register", 128, 128, 8, 2)], key.loc[("double_buffered", 128, 128, 8, 2)]
    reg16, db16 = key.loc[("register", 128, 128, 16, 2)], key.loc[("double_buffered", 128, 128, 16, 2)]
    unrolled = key.loc[("unrolled", 128, 128, 16, 1)]
    small = cfg[(cfg["bm"] == 64) & (cfg["bn"] == 64)]
    peak = lh.load_reference("ch07_ceilings").meta["fp32_peak_at_clock_gflops"]
    bound = peak / 8  # two shared loads per FMA: an eighth of the FMA rate
    best = cfg["gflops"].max()
    assert best == unrolled["gflops"], "the text calls the unrolled kernel at 128 x 128 x 16, min_blocks 1, the best"
    gains = []  # the unrolled kernel over the double-buffered one of the same shape
    for (kernel, bm, bn, bk, mb), row in key.iterrows():
        if kernel == "unrolled" and ("double_buffered", bm, bn, bk, mb) in key.index:
            gains.append(row["gflops"] / key.loc[("double_buffered", bm, bn, bk, mb), "gflops"] - 1)
    slow3 = a256[["register", "double_buffered", "unrolled"]]
    assert slow3.max() < a256.drop(slow3.index).min(), "the text: the 128 x 128 kernels are the three slowest at 256"
    phrases = [
        f"({db8['registers']:.0f} against {reg8['registers']:.0f} per thread for the 128 × 128 × 8 shape",
        f"reaches {_h(a['double_buffered'])} GFLOP/s against {_h(a['register'])} for the register-tiled\nkernel, "
        f"{a['double_buffered'] / a['register'] - 1:.0%} more",
        f"34 MFLOP, {2 * 256**3 / a256['cublas_fp32'] / 1e3:.0f} to {2 * 256**3 / a256.min() / 1e3:.0f} µs of GPU time",
        f"runs below {_h(a256.max())} GFLOP/s",
        f"are the three slowest there ({slow3.min():,.0f} to {slow3.max():,.0f} GFLOP/s)",
        f"({_h(a1024['register'])} against {_h(a1024['coarsened'])} GFLOP/s",
        f"levels off at {_t(a['naive'])} GFLOP/s from $n = 2048$ on: {a['naive'] / a['cublas_fp32']:.1%} of cuBLAS",
        f"16 × 16 tiles reach {_h(a['tiled 16'])} GFLOP/s, {a['tiled 16'] / a['naive']:.1f} times naive, and 32 × 32 "
        f"tiles are no faster ({round(a['tiled 32'], -1):,.0f})",
        f"the H200's {peak / 1000:.0f} TFLOP/s FP32 peak, about {bound / 1000:.1f} TFLOP/s",
        f"both sit at {a[['tiled 16', 'tiled 32']].max() / bound:.0%} of that bound",
        f"The 8 × 8 tiles ({_h(a['tiled 8'])})",
        f"{_h(a['coarsened'])} GFLOP/s with 4 × 4 per thread ({a['coarsened'] / a['tiled 16']:.1f} times the tiled kernel)",
        f"{_h(a['register'])} with 8 × 8 per thread and 128 × 128 per block",
        f"{_h(a['double_buffered'])} ({a['double_buffered'] / a['cublas_fp32']:.0%} of cuBLAS FP32, "
        f"{a['double_buffered'] / a['naive']:.0f} times naive)",
        f"the kernel reaches {_h(a['unrolled'])} ({a['unrolled'] / a['cublas_fp32']:.0%} of cuBLAS FP32, "
        f"{a['unrolled'] / a['naive']:.0f} times naive)",
        f"{_h(a['cublas_fp64'])} against {_h(a['cublas_fp32'])} GFLOP/s at $n = 4096$",
        f"cuBLAS FP32 thus reaches about {a['cublas_fp32'] / peak:.0%} of the FP32 peak; our best kernel about "
        f"{best / peak:.0%}",
        f"({db8['gflops'] / reg8['gflops'] - 1:.0%} at `bk = 8` for 128 × 128, {db16['gflops'] / reg16['gflops'] - 1:.0%} "
        "at `bk = 16`",
        f"by {min(gains):.0%} to {max(gains):.0%} over the double-buffered kernel of the same shape",
        f"reaches {_h(best)} GFLOP/s, {best / a['cublas_fp32']:.0%} of cuBLAS FP32",
        f"needs only {small['registers'].min():.0f} to {small['registers'].max():.0f} registers",
        f"stays at {round(small['gflops'].min(), -3):,.0f} to {round(small['gflops'].max(), -3):,.0f}",
        f"{a['unrolled'] / a['cublas_fp32']:.0%} of cuBLAS instead of {a['double_buffered'] / a['cublas_fp32']:.0%}",
    ]
    missing = _missing(_prose(CHAPTER), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    for kernel in ("register", "unrolled"):
        assert a1024[kernel] < a1024["coarsened"] and _at(2048)[kernel] > _at(2048)["coarsened"], (
            "the text says the 128 x 128 kernels trail the 64 x 64 coarsened one up to n = 1024 and overtake it at 2048")


#: Nsight Compute's metrics of section 7 (bench/tuning/profile.py on the H200, November 2026).
NCU = ROOT / "bench" / "tuning" / "results" / "ncu-2026-11-29.csv"


def _ncu(kernel_prefix: str) -> dict[str, float]:
    """The metrics of the one launch whose kernel name starts with ``kernel_prefix`` (``matmul::...`` for Numba)."""
    import csv

    rows = [r for r in csv.reader(NCU.open()) if len(r) >= 15 and r[0] != "ID"]
    ids = {r[0] for r in rows if r[4].startswith(kernel_prefix)}
    assert len(ids) == 1, f"{kernel_prefix}: {len(ids)} launches in {NCU.name}"
    return {r[12]: float(r[14].replace(",", "")) for r in rows if r[0] in ids}


def test_chapter_prose_about_the_unrolled_kernel_matches_the_profile_and_the_reference_data():
    """Section 7: Nsight Compute's numbers (the CSV of the profiling run), the steps measured in the reference run."""
    db, cublas = _ncu("matmul::matmul_double_buffered"), _ncu("sm80_xmma_gemm_f32f32")
    single = _ncu("matmul_candidates::matmul_unrolled")  # the single-buffered candidate, written out
    inst, ffma = "smsp__inst_executed.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
    per = {k: m[inst] / (m[ffma] / 32) for k, m in (("db", db), ("cublas", cublas), ("single", single))}
    issue = {k: m["smsp__issue_active.avg.pct_of_peak_sustained_active"] for k, m in (("db", db), ("cublas", cublas))}
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    us = {k: m["gpu__time_duration.sum"] / 1e3 for k, m in (("db", db), ("cublas", cublas), ("single", single))}
    warps = "sm__warps_active.avg.pct_of_peak_sustained_active"
    static_unrolled16 = 1256 / 1024  # SASS of one tile, sm_90, numba-cuda 0.30.4 / CUDA 13.0 (not re-measured here)
    text = _prose(CHAPTER)
    phrases = [
        f"| time | {us['db']:,.0f} µs | {us['cublas']:,.0f} µs |",
        f"| warp instructions executed | {db[inst] / 1e9:.2f} billion | {cublas[inst] / 1e9:.2f} billion |",
        f"| of them `FFMA` | {db[ffma] / 32e9:.2f} billion | {cublas[ffma] / 32e9:.2f} billion |",
        f"| instructions per `FFMA` | {per['db']:.2f} | {per['cublas']:.2f} |",
        f"| issue slots busy | {issue['db']:.1f}% | {issue['cublas']:.1f}% |",
        f"| warps resident per SM (of 64) | {db[warps] * 0.64:.1f} | {cublas[warps] * 0.64:.1f} |",
        f"{issue['db']:.1f}% / {per['db']:.2f} = {issue['db'] / round(per['db'], 2):.0f}% for the\ndouble-buffered kernel, "
        f"{issue['cublas']:.1f}% / {per['cublas']:.2f} = {issue['cublas'] / round(per['cublas'], 2):.0f}% for cuBLAS, "
        f"a ratio of {(issue['db'] / per['db']) / (issue['cublas'] / per['cublas']):.2f}",
        f"on average {db[stall.format('not_selected')]:.2f} warps were ready and *not selected*",
        f"against {db[stall.format('short_scoreboard')]:.2f} waiting for shared memory",
        f"and {db[stall.format('barrier')]:.2f} at the barrier",
        f"issued {per['single']:.2f} per `FFMA` on the H200",
        f"1.23 per `FFMA`. If its issue slots stay as busy as\nthe double-buffered kernel's, the estimate above gives "
        f"{issue['db']:.1f}% / 1.23 = {issue['db'] / 1.23:.0f}% of the FMA peak, about "
        f"{(issue['db'] / 1.23) / (issue['cublas'] / round(per['cublas'], 2)):.2f} of\ncuBLAS",
        f"the same {db[ffma] / 32e9:.2f} billion `FFMA` warp instructions",
        f"yet cuBLAS needs {1 - us['cublas'] / us['db']:.0%} less time",
        f"({issue['db']:.1f}% / {per['db']:.2f} against {issue['cublas']:.1f}% / {per['cublas']:.2f})",
        f"1.23 per `FFMA` in our kernel's machine code, {per['cublas']:.2f} in cuBLAS's",
        f"({issue['cublas']:.1f}% against the double-buffered kernel's {issue['db']:.1f}%)",
    ]
    assert f"{static_unrolled16:.2f}" == "1.23"
    assert abs(db[ffma] / cublas[ffma] - 1) < 1e-3, "the text: both execute the same FFMA instructions"
    assert db[warps] > cublas[warps], "the text: cuBLAS runs with fewer warps"
    assert db[stall.format("not_selected")] > 2 * max(db[stall.format(s)] for s in ("short_scoreboard", "barrier"))
    missing = _missing(text, phrases)
    assert not missing, "section 7 no longer matches the profile:\n" + "\n".join(missing)

    sweep = _at(4096)
    steps = mm_exp.unrolling_steps(lh.load_reference("ch05_register_configs").table, sweep["cublas_fp32"])
    g = steps["GFLOP/s"]
    key = _configs()
    mb1, mb2 = key.loc[("unrolled", 128, 128, 16, 1)], key.loc[("unrolled", 128, 128, 16, 2)]
    assert mb1["registers"] <= 128 and mb2["registers"] <= 128, "the text: two blocks of 256 threads still fit"
    assert mb1["registers"] == mb2["registers"] - 1, "the text: one register fewer than under the bound of two blocks"
    phrases = [
        f"Writing the steps out gains {g[1] / g[0] - 1:.0%} ({_h(g[1])} GFLOP/s), the deeper slice another "
        f"{g[2] / g[1] - 1:.0%} ({_h(g[2])}), and the launch\nbound {g[3] / g[2] - 1:.0%} more: {_h(g[3])} GFLOP/s, "
        f"{steps['of cuBLAS FP32'].iloc[3]:.0%} of cuBLAS FP32 in the same run",
        f"allowed 255 registers, it used\n{mb1['registers']:.0f}",
    ]
    missing = _missing(text, phrases)
    assert not missing, "section 7 no longer matches the reference data:\n" + "\n".join(missing)
    assert steps["of cuBLAS FP32"].iloc[3] >= 0.85, "the text: above the benchmark's 85%"


def test_chapter_prose_about_the_roofline_matches_the_reference_data():
    a = _at(4096)
    copy = rl.reference_ceilings().dram_gbs
    peak = lh.load_reference("ch05_ceilings").table.set_index(["quantity", "n"])["value"][("cublas_fp32", 4096)]
    best = lh.load_reference("ch05_register_configs").table["gflops"].max()
    naive_roof = tiling.kernel_intensity(4096, 4096, 4096) * copy
    tiled_roof = tiling.kernel_intensity(4096, 4096, 4096, 16) * copy
    phrases = [
        f"with the ridge at {tiling.ridge_point(copy, peak):.0f} flop/byte",
        f"even {a['naive'] / naive_roof - 1:.0%} *above* the slope: {_t(a['naive'])} GFLOP/s where DRAM could feed a "
        f"quarter of the copy ceiling, about {round(naive_roof, -1):,.0f}",
        f"({_h(a['tiled 16'])} of {_h(tiled_roof)} GFLOP/s)",
        f"our best kernel ({_h(best)} GFLOP/s) and cuBLAS FP32 ({_h(a['cublas_fp32'])})",
        "about 6 times faster, not 16",
    ]
    assert round(a["tiled 16"] / a["naive"]) == 6
    missing = _missing(_prose(CHAPTER), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)


def test_lab_prose_matches_the_reference_data_and_the_checker():
    a = _at(4096)
    text = _prose(LAB)
    phrases = [f"{_t(a['naive'])} GFLOP/s for the naive kernel, {_h(a['tiled 16'])} for 16 × 16 tiles, "
               f"{_h(a['register'])} with 8 × 8 per thread, {_h(a['double_buffered'])} with double buffering "
               f"and {_h(a['unrolled'])} with the steps of $k$ written out, against {_h(a['cublas_fp32'])} for "
               "cuBLAS FP32"]
    assert not _missing(text, phrases)
    assert "followed in memory by a band of NaN" in text, (
        "the lab must say what follows the matrices the checker passes (the harness's guard bands)")


def test_chapter_computes_the_copy_ceiling_from_the_reference_data():
    text = _prose(CHAPTER)
    assert "4.2 TB/s" not in text and "4,150" not in text and "4,143" not in text
    cells = json.loads(CHAPTER.read_text())["cells"]
    assert any("rl.reference_ceilings()" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")
