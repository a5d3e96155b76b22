"""Chapter 9 (stencils, halos, connected components): kernels, wrappers, references, checkers, figures, data.

Under the simulator every kernel runs on small awkward sizes (one element, fewer elements than the
radius, sizes that are no multiple of the block, one-row and one-column grids); on a GPU
(``LABHELPERS_BACKEND=gpu``) the same tests run with larger sizes added, and the experiments run small.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import ndimage

import labhelpers as lh
from labhelpers.exercises import stencil as ex
from labhelpers.kernels import stencil_labelling as lbl
from labhelpers.kernels import stencil as st
from labhelpers.launch import grid_2d
from markers import SIM, gpu_only, sim_only
from prose import figure as _g

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
SIZES_1D = (1, 2, 31, 33, 100) if SIM else (1, 2, 31, 33, 100, 1023, 100_003)
SHAPES_2D = ((1, 1), (1, 5), (6, 1), (2, 3), (3, 3), (17, 33), (33, 17)) if SIM else \
    ((1, 1), (1, 5), (6, 1), (2, 3), (3, 3), (17, 33), (33, 17), (130, 257), (1001, 1003))


# --- 1D stencil -----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["global", "shared", "any_radius"])
def test_stencil1d_matches_numpy_exactly(variant):
    rng = np.random.default_rng(1)
    for n in SIZES_1D:
        for radius in (0, 1, 3, 7):
            x = st.integer_valued(n, rng)
            got = st.run_stencil1d(x, radius, variant, threads=32)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, st.stencil1d_reference(x, radius), err_msg=f"{variant} n={n} R={radius}")


def test_any_radius_handles_a_radius_larger_than_the_block():
    x = st.integer_valued(45, np.random.default_rng(2))
    for threads, radius in ((8, 12), (1, 16), (3, 5)):
        np.testing.assert_array_equal(st.run_stencil1d(x, radius, "any_radius", threads),
                                      st.stencil1d_reference(x, radius))


def test_reference_by_hand():
    x = np.arange(1, 6, dtype=np.float32)  # 1 2 3 4 5
    np.testing.assert_array_equal(st.stencil1d_reference(x, 1), [3, 6, 9, 12, 9])
    np.testing.assert_array_equal(st.stencil1d_reference(x, 0), x)
    np.testing.assert_array_equal(st.stencil1d_reference(x, 10), [15] * 5)


def test_local_halo_pitfall_is_wrong_exactly_at_the_edges_of_later_blocks():
    x = st.integer_valued(48, np.random.default_rng(3))
    got = st.run_stencil1d(x, 3, "local_halo", threads=16)
    wrong = np.flatnonzero(got != st.stencil1d_reference(x, 3))
    assert wrong.size and (wrong >= 16 - 3).all()  # block 0's left halo is right (it really is block 0's)
    assert set(wrong % 16) <= {0, 1, 2, 13, 14, 15}


@sim_only
def test_global_index_pitfall_overflows_the_tile():
    x = np.ones(40, dtype=np.float32)
    with pytest.raises(IndexError):
        st.stencil1d_global_index[3, st.SEED_BLOCK](lh.to_device(x), lh.to_device(np.zeros_like(x)))
    rows = st.seed_tile_indices(40)
    assert rows[0] == (0, 0, 15, 22) and rows[1][2] >= 22


def test_race_detector_finds_the_missing_barrier():
    from labhelpers.racecheck import check_races

    x = np.arange(40, dtype=np.float32)
    report = check_races(st.stencil1d_no_barrier, 2, 32, x, np.zeros_like(x), 3)
    assert not report.ok and {r.kind for r in report.races} == {"RAW"}
    assert check_races(st.stencil1d_shared, 2, 32, x, np.zeros_like(x), 3).ok
    assert check_races(st.stencil1d_shared_any_radius, 2, 8, x, np.zeros_like(x), 12).ok


@pytest.mark.parametrize("kwargs, match", [
    (dict(x=np.ones(4, np.float64)), "float32"),
    (dict(x=np.ones((2, 2), np.float32)), "dimension"),
    (dict(x=np.ones(0, np.float32)), "empty"),
    (dict(radius=-1), "radius"),
    (dict(radius=st.MAX_RADIUS + 1), "radius"),
    (dict(radius=2.5), "radius"),
    (dict(radius=9, threads=8, variant="shared"), "any_radius"),
    (dict(threads=0), "thread"),
    (dict(threads=2000), "1024"),
    (dict(variant="fast"), "variant"),
])
def test_stencil1d_bad_input(kwargs, match):
    args = dict(x=np.ones(4, np.float32), radius=1, variant="shared", threads=32)
    args.update(kwargs)
    with pytest.raises(lh.LabError, match=match):
        st.run_stencil1d(**args)


# --- Jacobi ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", list(st.JACOBI))
def test_jacobi_matches_numpy_bit_for_bit(variant):
    rng = np.random.default_rng(4)
    block = None if not SIM else {"marching": (8, 1), "vec4_march": (2, 2)}.get(variant, (8, 4))
    # vec4_march: rows whose width is a multiple of 4 take the 16-byte path, the others four scalar accesses
    extra = ((5, 8), (19, 36)) if variant == "vec4_march" else ()
    for shape in SHAPES_2D + extra:
        u = (rng.random(shape) * 100).astype(np.float32)
        got = st.run_jacobi(u, 2, variant, block)
        np.testing.assert_array_equal(got, st.jacobi_reference(u, 2), err_msg=f"{variant} {shape}")


# (1, 1) only on a GPU: a one-thread block per point is slow under the simulator, and (5, 3) already leaves
# partial blocks and a tree of odd sizes.
@pytest.mark.parametrize("block", [(8, 4), (5, 3)] + ([] if SIM else [(1, 1), (32, 8), (32, 32)]))
def test_jacobi_residual_step_and_its_maximum_match_numpy(block):
    rng = np.random.default_rng(4)
    for shape in SHAPES_2D:
        u = (rng.random(shape) * 100).astype(np.float32)
        v = lh.to_device(np.zeros(shape, np.float32))
        change = lh.to_device(np.zeros(1, np.float32))
        st.jacobi_residual[grid_2d(shape, block), block](lh.to_device(u), v, change)
        want, want_change = st.jacobi_residual_reference(u)
        np.testing.assert_array_equal(v.copy_to_host(), want, err_msg=f"{shape} {block}")
        assert change.copy_to_host()[0] == want_change, (shape, block)


def test_jacobi_residual_has_no_race_with_a_partial_block():
    u = (np.random.default_rng(5).random((11, 13)) * 100).astype(np.float32)
    report = lh.check_races(st.jacobi_residual, (2, 4), (8, 3), u, np.zeros_like(u), np.zeros(1, np.float32))
    assert report.ok, report


@pytest.mark.parametrize("test", st.CONVERGENCE_TESTS)
def test_jacobi_solver_stops_where_numpy_does(test):
    plate = st.hot_plate(12, 10, top=100.0)
    for k in (1, 7):
        solver = st.JacobiSolver(plate, test, check_every=k, block=(8, 4))
        steps = solver.run(2.0)  # 11 steps: enough for k = 7 to overshoot
        field, want_steps, want_change = st.solve_jacobi_reference(plate, 2.0, k)
        assert steps == want_steps and solver.change == want_change
        np.testing.assert_array_equal(solver.result(), field)
    assert solver.run(0.0, max_steps=10) == 14  # tol=0: max_steps rounded up to whole batches of 7
    with pytest.raises(RuntimeError, match="max_steps"):
        solver.run(1e-6, max_steps=7)


@pytest.mark.parametrize("kwargs, match", [
    ({"test": "gpu"}, "test"),
    ({"check_every": 0}, "check_every"),
    ({"block": (64, 32)}, "1024"),
    ({"u": np.ones((3, 3))}, "float32"),
])
def test_jacobi_solver_bad_input(kwargs, match):
    args = {"u": np.ones((3, 3), np.float32)} | kwargs
    with pytest.raises(lh.LabError, match=match):
        st.JacobiSolver(**args)
    with pytest.raises(lh.LabError, match="tol"):
        st.JacobiSolver(np.ones((3, 3), np.float32)).run(-1.0)


SHAPES_3D = ((1, 1, 1), (2, 3, 4), (3, 3, 3), (5, 9, 17), (7, 13, 10)) if SIM else \
    ((1, 1, 1), (2, 3, 4), (3, 3, 3), (5, 9, 17), (7, 13, 10), (37, 45, 67), (130, 33, 257))


@pytest.mark.parametrize("variant, block", [("naive", (8, 4, 2)), ("naive", (5, 3, 1)), ("marching", (8, 4)),
                                            ("marching", (5, 3)), ("march_vec4", (2, 2)), ("march_vec4", (3, 4))])
def test_stencil3d_matches_numpy_bit_for_bit(variant, block):
    rng = np.random.default_rng(6)
    # march_vec4: an aligned row width (16-byte path) and more planes than one block walks (st.PLANES)
    extra = ((11, 5, 12), (st.PLANES + 1, 3, 4)) if variant == "march_vec4" else ()
    for shape in SHAPES_3D + extra:
        u = (rng.random(shape) * 100).astype(np.float32)
        np.testing.assert_array_equal(st.run_stencil3d(u, 2, variant, block), st.stencil3d_reference(u, 2),
                                      err_msg=f"{variant} {block} {shape}")


def test_stencil3d_marching_has_no_race_and_needs_both_barriers():
    from mutants import mutant

    u = (np.random.default_rng(7).random((4, 7, 11)) * 100).astype(np.float32)
    args = ((2, 2), (8, 4), u, np.zeros_like(u))  # a partial block in x and in y, 4 planes
    assert lh.check_races(st.stencil3d_marching, *args).ok
    no_war = mutant(st.stencil3d_marching, "cuda.syncthreads()  # WAR: every thread has read the previous plane's "
                    "tile before it is overwritten", "pass")
    assert "WAR" in str(lh.check_races(no_war, *args))


def test_vec4_kernels_on_partial_last_blocks_need_no_barrier_and_write_every_point():
    """The 16-byte kernels share nothing between threads: the race detector finds nothing to order, and threads past
    the edge (a partial quad, a short strip, a short slab, blocks partly outside) leave no point unwritten."""
    u2 = (np.random.default_rng(8).random((9, 14)) * 100).astype(np.float32)  # 14 columns: the last quad has 2
    v2 = np.full_like(u2, np.nan)
    block2 = (3, 2)  # 4 quads -> blocks of 3 and 1; 2 strips of 8 rows, the second of 1 row
    report = lh.check_races(st.jacobi_vec4_march, st.jacobi_grid("vec4_march", u2.shape, block2), block2,
                            *st.step_args("vec4_march", u2, v2))
    assert report.ok, report
    np.testing.assert_array_equal(v2, st.jacobi_reference(u2, 1))
    u3 = (np.random.default_rng(9).random((st.PLANES + 2, 5, 14)) * 100).astype(np.float32)  # 2 slabs: 8, then 2
    v3 = np.full_like(u3, np.nan)
    block3 = (3, 2)  # rows: blocks of 2, 2 and 1
    report = lh.check_races(st.stencil3d_march_vec4, st.stencil3d_grid("march_vec4", u3.shape, block3), block3,
                            *st.step_args("march_vec4", u3, v3))
    assert report.ok, report
    np.testing.assert_array_equal(v3, st.stencil3d_reference(u3, 1))


def test_step_args_flatten_only_for_the_16_byte_kernels():
    u, v = np.zeros((3, 8), np.float32), np.zeros((3, 8), np.float32)
    assert st.step_args("naive", u, v) == (u, v)
    a, b, ny, nx, chunks = st.step_args("vec4_march", u, v)
    assert a.shape == (24,) and np.shares_memory(a, u) and np.shares_memory(b, v)
    assert (ny, nx, chunks) == (3, 8, st.VEC_CHUNKS) and all(isinstance(x, np.uint64) for x in (ny, nx, chunks))
    assert st.VEC_ROWS * st.VEC_CHUNKS == st.ROWS  # 8 rows per thread, as jacobi_marching
    assert st.step_args("march_vec4", u[None], v[None])[2:] == (1, 3, 8, st.PLANES)


def test_stencil3d_defaults_and_bad_input():
    u = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_array_equal(st.run_stencil3d(u, 0), u)
    np.testing.assert_array_equal(st.run_stencil3d(u, 1, "marching"), st.stencil3d_reference(u, 1))
    np.testing.assert_array_equal(st.run_stencil3d(u, 3, "march_vec4"), st.stencil3d_reference(u, 3))
    for kwargs, match in (({"variant": "tiled"}, "variant"), ({"variant": "marching", "block": (8, 4, 1)}, "2D block"),
                          ({"variant": "march_vec4", "block": (8, 4, 1)}, "2D block"),
                          ({"variant": "march_vec4", "block": (64, 32)}, "1024"),
                          ({"block": (8, 4)}, "3D block"), ({"variant": "marching", "block": (64, 8)}, "shared tile")):
        with pytest.raises(lh.LabError, match=match):
            st.run_stencil3d(u, 1, **kwargs)
    with pytest.raises(lh.LabError, match="float32"):
        st.run_stencil3d(u.astype(np.float64))
    with pytest.raises(lh.LabError, match="at least one point"):
        st.run_stencil3d(np.zeros((0, 2, 2), np.float32))


def test_stencil3d_loads_model():
    from labhelpers.models import stencil as model

    row = model.stencil3d_loads(32, 8)
    assert row["naive_loads"] == 7 and row["ideal_bytes"] == 8
    assert row["marching_loads"] == pytest.approx(1 + 80 / 256)
    assert row["marching_dram_bytes"] == pytest.approx(4 * (1 + 80 / 256) + 4)
    # in sectors: halo rows 2 x 128 B, halo columns 2 x 8 sectors of 32 B, for 256 points; 8 x 8: 2 x 32 + 2 x 8 x 32
    assert row["marching_sector_bytes"] == pytest.approx(8 + (256 + 512) / 256)
    assert model.stencil3d_loads(8, 8)["marching_sector_bytes"] == pytest.approx(8 + (64 + 512) / 64)
    assert list(model.stencil3d_loads_table()["bx"])[:2] == [32, 32]


def test_jacobi_default_blocks_and_zero_steps():
    u = st.hot_plate(9, 11, top=1.0)
    assert st.Jacobi(u, "naive").block == st.BLOCK_2D
    assert st.Jacobi(u, "marching").block == st.MARCH_BLOCK
    assert st.Jacobi(u, "vec4_march").block == st.VEC_BLOCK
    np.testing.assert_array_equal(st.run_jacobi(u, 3, "vec4_march"), st.jacobi_reference(u, 3))
    np.testing.assert_array_equal(st.run_jacobi(u, 0), u)
    s = st.Jacobi(u, "shared", (8, 4))
    s.step(3)
    assert s.steps_done == 3 and s.nbytes == 8 * 99
    np.testing.assert_array_equal(s.result(), st.jacobi_reference(u, 3))


def test_jacobi_reference_converges_to_the_linear_profile():
    u = st.hot_plate(3, 12, top=0.0, left=10.0, right=0.0)
    u[0, :] = u[-1, :] = np.linspace(10, 0, 12, dtype=np.float32)
    out = st.jacobi_reference(u, 400)
    np.testing.assert_allclose(out[1], np.linspace(10, 0, 12), atol=1e-3)


def test_jacobi_counts_and_grid():
    c = st.jacobi_counts(8192, 8192)
    assert c["nbytes"] == 8 * 8192**2 and c["flops"] == 4 * 8190**2
    assert st.jacobi_counts(1, 5)["flops"] == 0
    assert st.jacobi_grid("naive", (33, 17), (8, 4)) == (3, 9)
    assert st.jacobi_grid("marching", (33, 17), (8, 1)) == (3, 5)
    assert st.jacobi_grid("vec4_march", (33, 17), (2, 2)) == (3, 3)  # 5 quads of 4 columns, 5 strips of 8 rows


@pytest.mark.parametrize("kwargs, match", [
    (dict(u=np.ones((4, 4), np.float64)), "float32"),
    (dict(u=np.ones(4, np.float32)), "dimension"),
    (dict(u=np.ones((0, 4), np.float32)), "at least one point"),
    (dict(u=np.full((3, 3), np.nan, np.float32)), "NaN"),
    (dict(u=np.ones((8, 8), np.float32).T[::2]), "contiguous"),
    (dict(variant="shared", block=(64, 8)), "tile"),
    (dict(block=(8, 4, 2)), "two dimensions"),
    (dict(variant="vec4_march", block=(8, 4, 2)), "two dimensions"),
    (dict(variant="vec4_march", block=(64, 32)), "1024"),
    (dict(block=(0, 4)), "at least 1"),
    (dict(steps=-1), "steps"),
    (dict(variant="gauss-seidel"), "variant"),
])
def test_jacobi_bad_input(kwargs, match):
    args = dict(u=np.ones((4, 4), np.float32), steps=1, variant="naive", block=None)
    args.update(kwargs)
    with pytest.raises(lh.LabError, match=match):
        st.run_jacobi(**args)


def test_snapshots_and_hot_plate():
    u = st.hot_plate(6, 7, top=100.0)
    assert u[0].tolist() == [100.0] * 7 and u[1:, 0].max() == 0
    snaps = st.jacobi_snapshots(u, [0, 5, 2])
    assert sorted(snaps) == [0, 2, 5]
    np.testing.assert_array_equal(snaps[5], st.jacobi_reference(u, 5))


# --- image filters --------------------------------------------------------------------------------

def test_filters_match_scipy():
    rng = np.random.default_rng(5)
    block = (8, 4) if SIM else st.BLOCK_2D
    for shape in SHAPES_2D:
        img = rng.random(shape).astype(np.float32)
        np.testing.assert_allclose(st.run_box_blur(img, block), ndimage.uniform_filter(img.astype(np.float64), 3),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.run_filter3x3(img, st.BINOMIAL_WEIGHTS, block),
                                   ndimage.correlate(img.astype(np.float64), st.BINOMIAL_WEIGHTS.astype(np.float64),
                                                     mode="nearest"), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.run_sobel(img, block), ex.sobel_scipy(img), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(st.sobel_reference(img), ex.sobel_scipy(img), rtol=1e-12, atol=1e-12)


def test_sample_photo_is_grayscale_float32():
    img = st.sample_photo()
    assert img.shape == (600, 512) and img.dtype == np.float32 and 0 <= img.min() and img.max() <= 1
    assert st.grayscale(np.full((2, 2, 3), 255, np.uint8)).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(lh.LabError, match="image of shape"):
        st.grayscale(np.ones((2, 2, 5)))


@pytest.mark.parametrize("call, match", [
    (lambda: st.run_sobel(np.ones((3, 3), np.float64)), "float32"),
    (lambda: st.run_sobel(np.ones((0, 3), np.float32)), "at least one pixel"),
    (lambda: st.run_box_blur(np.array([[np.inf]], np.float32)), "NaN or infinite"),
    (lambda: st.run_filter3x3(np.ones((3, 3), np.float32), np.ones((2, 2))), "shape"),
    (lambda: st.run_filter3x3(np.ones((3, 3), np.float32), np.full((3, 3), np.nan)), "NaN"),
    (lambda: st.run_sobel(np.ones((3, 3), np.float32), block=(2048, 1)), "1024"),
])
def test_filter_bad_input(call, match):
    with pytest.raises(lh.LabError, match=match):
        call()


# --- connected components -------------------------------------------------------------------------

def _masks():
    out = [lbl.random_mask(9, 13, d, seed=3) for d in (0.3, 0.6, 0.9)]
    out += [lbl.snake_mask(5, 6), lbl.spiral_mask(7), np.ones((1, 1), np.uint8), np.zeros((3, 4), np.uint8),
            np.ones((1, 6), bool)]
    if not SIM:
        out += [lbl.random_mask(300, 301, d, seed=4) for d in (0.5, 0.6)] + [lbl.spiral_mask(65)]
    return out


def test_both_labellings_match_scipy():
    for mask in _masks():
        ref = lbl.label_reference(mask)
        labels, steps = lbl.label_propagation(mask, block=(8, 4) if SIM else (32, 8))
        np.testing.assert_array_equal(labels, ref)
        np.testing.assert_array_equal(lbl.label_union_find(mask, block=(8, 4) if SIM else (32, 8)), ref)
        np.testing.assert_array_equal(lbl.relabel_sequential(labels), ndimage.label(mask)[0])
        if mask.size <= 400:
            assert steps == lbl.propagation_steps_reference(mask)[1]


@pytest.mark.parametrize("find", list(lbl.UF_FINDS))
def test_union_find_with_and_without_path_halving_matches_scipy(find):
    masks = [lbl.spiral_mask(9), lbl.snake_mask(6, 7), lbl.rows_mask(5, 9), lbl.random_mask(11, 13, 0.6, seed=5)]
    for mask in masks:
        np.testing.assert_array_equal(lbl.label_union_find(mask, block=(8, 4), find=find), lbl.label_reference(mask))
    with pytest.raises(lh.ArgumentError, match="find"):
        lbl.UnionFind(masks[0], find="splitting")


def test_path_halving_leaves_every_parent_an_ancestor_and_smaller():
    """After merge (with halving), every parent pointer is <= its pixel and leads to the component's root."""
    mask = lbl.random_mask(12, 15, 0.65, seed=9)
    uf = lbl.UnionFind(mask, block=(8, 4))
    uf.run()
    parent = uf._parent.copy_to_host()
    fg = np.flatnonzero(mask.ravel())
    assert (parent[fg] <= fg).all()
    np.testing.assert_array_equal(uf.labels.copy_to_host(), lbl.label_reference(mask))


def test_union_find_work_model():
    from labhelpers.models import stencil as model

    rows = model.union_find_work(lbl.rows_mask(3, 5), compress=False)
    # rows of 5, two full rows: pixel 0 of a row merges nothing; pixel 1's union reads itself (1) and pixel 0, a
    # root (1); pixels 2..4 read themselves (1) and their left neighbour, whose parent is the row start (2).
    # Compress: the row start 1 read, every other pixel 2.
    assert rows["foreground"] == 10
    assert rows["merge_reads"] == 2 * (2 + 3 * 3) and rows["compress_reads"] == 2 * (1 + 4 * 2)
    empty = model.union_find_work(np.zeros((2, 2), np.uint8))
    assert empty["reads_per_pixel"] == 0.0
    big = lbl.spiral_mask(64)
    plain, halving = model.union_find_work(big, compress=False), model.union_find_work(big, compress=True)
    assert plain["reads_per_pixel"] > halving["reads_per_pixel"] and halving["max_find"] <= 12


def test_ccl_work_table_is_deterministic_and_shape_independent_with_halving():
    from labhelpers.experiments import stencil as exp

    table = exp.ccl_work_table(sides=(16, 32))
    assert set(table["shape"]) == {"spiral", "snake", "rows", "random 0.6"}
    spiral = table[table["shape"] == "spiral"].set_index("side")
    assert spiral.loc[32, "propagation_steps"] == int(lbl.spiral_mask(32).sum())
    assert table["uf_halving"].max() < 9
    table.equals(exp.ccl_work_table(sides=(16, 32)))


def test_check_every_does_not_change_the_count():
    mask = lbl.snake_mask(3, 5)
    assert lbl.label_propagation(mask, check_every=4)[1] == lbl.label_propagation(mask, check_every=1)[1]


def test_snake_and_spiral_are_one_long_path():
    for mask in (lbl.snake_mask(7, 9), lbl.spiral_mask(11)):
        labels, count = ndimage.label(mask)
        assert count == 1
        path = int(mask.sum())
        assert lbl.propagation_steps_reference(mask)[1] == path  # path - 1 steps to the end, one quiet step
    assert lbl.spiral_mask(1).tolist() == [[1]]


def test_partition_helpers():
    a = np.array([[1, 1, 0], [0, 5, 5]])
    assert lbl.same_partition(a, a * 7)
    assert not lbl.same_partition(a, np.array([[1, 1, 0], [0, 1, 1]]))
    assert not lbl.same_partition(a, np.array([[1, 1, 1], [0, 5, 5]]))
    assert lbl.min_index_labels(np.array([[9, 9, 0], [0, 4, 4]])).tolist() == [[1, 1, 0], [0, 5, 5]]
    assert lbl.relabel_sequential(np.array([[1, 1, 0], [0, 5, 5]])).tolist() == [[1, 1, 0], [0, 2, 2]]
    new, changed = lbl.propagate_reference(lbl.initial_labels(np.ones((1, 3))))
    assert new.tolist() == [[1, 1, 2]] and changed


@pytest.mark.parametrize("mask, match", [
    (np.ones((3, 3), np.float32), "boolean or uint8"),
    (np.ones(3, bool), "dimension"),
    (np.ones((0, 3), bool), "at least one pixel"),
])
def test_ccl_bad_input(mask, match):
    with pytest.raises(lh.LabError, match=match):
        lbl.label_union_find(mask)
    with pytest.raises(lh.LabError, match=match):
        lbl.label_propagation(mask)


def test_mask_generators_validate():
    with pytest.raises(lh.LabError, match="density"):
        lbl.random_mask(3, 3, 1.5)
    with pytest.raises(lh.LabError, match="n"):
        lbl.spiral_mask(0)


@sim_only
def test_gpu_measurements_say_gpu_only():
    from labhelpers.experiments import stencil as exp

    for fn in (exp.jacobi_table, exp.filters_table, exp.ccl_table, exp.ccl_steps_table, exp.racecheck_table,
               exp.uf_shapes_table, exp.convergence_table, exp.stencil3d_table):
        with pytest.raises(lh.GPUOnlyError):
            fn()
    with pytest.raises(lh.GPUOnlyError):
        st.cupy_jacobi_step(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32))


@pytest.mark.judges_no_timing
@gpu_only
def test_experiments_run_small_on_a_gpu():
    from labhelpers.experiments import stencil as exp

    jac = exp.jacobi_table(512, configs=(("naive", 32, 8), ("shared", 32, 8), ("marching", 128, 1),
                                         ("vec4_march", 64, 2)), repeat=3, number=2, fma_peak=False)
    assert set(jac["variant"]) >= {"naive", "shared", "marching", "vec4_march", "cupy slicing", "copy"}
    assert (jac["gbps"] > 0).all()
    assert exp.best_jacobi(jac)["variant"] in st.JACOBI
    filt = exp.filters_table(512, repeat=3, number=2)
    assert (filt["max_abs_diff"] < 1e-4).all()
    ccl = exp.ccl_table(256, densities=(0.6,), repeat=1, scipy_repeat=1)
    assert set(ccl["method"]) == {"label propagation", "union-find", "cupyx.scipy.ndimage.label",
                                  "scipy.ndimage.label (CPU)"}
    s3 = exp.stencil3d_table(64, repeat=2, number=1)
    assert set(s3["variant"]) == {"naive", "marching", "march_vec4", "copy"} and (s3["gbps"] > 0).all()
    conv = exp.convergence_table(256, steps=20, check_every=(1, 10), repeat=2)
    assert set(conv["test"]) == {"none", "device", "host"} and (conv["ms_per_step"] > 0).all()
    uf = exp.uf_shapes_table(64, repeat=2, number=1)
    assert set(uf["find"]) == set(lbl.UF_FINDS) and (uf["median_ms"] > 0).all()
    steps = exp.ccl_steps_table(sides=(16,), densities=(0.6,))
    assert steps.loc[steps["shape"] == "spiral", "steps"].iloc[0] == int(lbl.spiral_mask(16).sum())


# --- lab checkers: tests/test_lab_mutants_08_10.py (one mutant per bug class is rejected; solutions: test_labs) -


# --- reference data -------------------------------------------------------------------------------

REFERENCES = ("ch09_jacobi", "ch09_filters", "ch09_ccl", "ch09_ccl_steps", "ch09_racecheck", "ch09_stencil3d",
              "ch09_convergence", "ch09_uf_shapes")


@pytest.mark.parametrize("name", REFERENCES)
def test_reference_data_loads(name):
    path = ROOT / "src" / "labhelpers" / "data" / "reference" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{name} not measured yet")
    ref = lh.load_reference(name)
    assert len(ref.table) and json.loads(path.read_text())["meta"]["gpu"]


# --- models and figures ---------------------------------------------------------------------------

def test_models():
    from labhelpers.models import stencil as model

    m = model.tile_1d(128, 4)
    assert m["words"] == 136 and m["global_reads_per_output"] == 9
    t = model.tile_2d(32, 8)
    assert t["halo_words"] == 80 and t["column_sectors"] == 16 and t["row_sectors"] == 40
    assert 0 < t["sector_efficiency"] < 1
    r = model.jacobi_roofline(2000.0, 60000.0)
    assert r["intensity"] == 0.5 and r["bound"] == "memory" and r["gpoints_s"] == 250.0
    assert model.propagation_steps_bound(49) == int(lbl.spiral_mask(9).sum())
    assert len(model.tile_1d_table()) == 20 and len(model.tile_2d_table()) == 6
    with pytest.raises(lh.LabError):
        model.tile_1d(0, 1)
    with pytest.raises(lh.LabError):
        model.jacobi_roofline(0.0, 1.0)


def test_figures_draw():
    import matplotlib.pyplot as plt
    from labhelpers.figures import stencil as fg

    fig, ax = plt.subplots()
    assert fg.draw_tile_1d(ax, 16, 3) is None
    assert "22 loads" in ax.get_title()
    assert fg.draw_heat(ax, 7, snapshots=st.jacobi_snapshots(st.hot_plate(8, 8), [0, 10])) is None
    assert "10 Jacobi steps" in ax.get_title()
    assert fg.plot_tile_2d(8, 4, ax=ax) is fig
    assert fg.plot_labels(lbl.label_reference(lbl.snake_mask(4, 5)), "snake", ax=ax) is fig
    plt.close(fig)
    img = np.random.default_rng(0).random((6, 7)).astype(np.float32)
    figs = [fg.plot_photo_filters(img, img, img), fg.plot_propagation_frames(lbl.spiral_mask(5), (0, 3)),
            fg.plot_tile_2d(), fg.plot_heat(img, 3), fg.plot_labels(lbl.label_reference(lbl.snake_mask(4, 5)))]
    for name, plot in (("ch09_jacobi", fg.plot_jacobi_bandwidth), ("ch09_jacobi", fg.plot_jacobi_roofline),
                       ("ch09_ccl_steps", fg.plot_ccl_steps), ("ch09_ccl", fg.plot_ccl_times)):
        ref = lh.load_reference(name)
        figs.append(plot(ref.table, label=ref.label))
        fig, ax = plt.subplots()
        assert plot(ref.table, ax=ax, label=ref.label) is fig
        plt.close(fig)
    for f in figs:
        assert isinstance(f, matplotlib.figure.Figure)
        plt.close(f)
    assert fg.label_colors(np.array([[0, 3]])).shape == (1, 2, 3)


# --- what the chapter says about the reference data -----------------------------------------------

def _ref(name):
    return lh.live_or_reference(None, name).table


def _prose(path: Path = ROOT / "book" / "09_stencils.ipynb") -> str:
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def _share(t, variant: str | None = None, kernel: str | None = None) -> float:
    """The best GB/s of ``variant`` (or of the row ``kernel``) over the table's copy of the same grid or volume."""
    copy = float(t.loc[t["variant"] == "copy", "gbps"].iloc[0])
    rows = t[t["variant"] == variant] if kernel is None else t[t["kernel"] == kernel]
    return float(rows["gbps"].max()) / copy


def test_chapter_claims_about_jacobi_hold_in_the_reference_data():
    from labhelpers.experiments import stencil as exp

    t = _ref("ch09_jacobi")
    copy = float(t.loc[t["variant"] == "copy", "gbps"].iloc[0])
    first = t[t["variant"] != "vec4_march"]  # the kernels the chapter measures before the profile
    best_first, best = exp.best_jacobi(first), exp.best_jacobi(t)
    per = t.groupby("variant")["gbps"].max()
    assert best_first["variant"] == "marching" and best_first["gbps"] < 0.85 * copy  # "short of ... 85%"
    assert best["variant"] == "vec4_march" and best["gbps"] >= 0.85 * copy  # "the chapter's target ... is met"
    assert per["cupy slicing"] < min(per["naive"], per["shared"], per["marching"])  # "the slowest by far"
    assert per["shared"] <= per["naive"]  # "tiling a 5-point stencil does not pay"
    assert t.loc[t["variant"].isin(["marching", "vec4_march"]), "local_loads"].max() == 0  # "no ld.local"
    marching = t.loc[t["variant"] == "marching", "gbps"]
    assert len(marching) == 4
    vec = t.loc[t["variant"] == "vec4_march", "gbps"]
    assert len(vec) == 4
    bx, by = int(best["block_x"]), int(best["block_y"])
    phrases = [
        f"It is the fastest of the three, {per['marching'] / per['naive']:.1f} times the naive one, but it reaches "
        f"only {best_first['gbps'] / copy:.0%} of the copy of the same grid, short of this chapter's benchmark "
        "target, 85% of the copy.",
        f"`jacobi_vec4_march` reaches {best['gbps'] / copy:.0%} of the copy of the same grid ({_g(best['gbps'])} GB/s "
        f"with blocks of {bx} x {by}), {per['vec4_march'] / per['naive']:.1f} times the naive kernel and "
        f"{per['vec4_march'] / per['marching']:.1f} times the marching one: the chapter's target, 85% of the copy, "
        "is met.",
        f"Its four block shapes lie within {vec.max() / vec.min() - 1:.1%} of each other",
        f"the four block shapes run within {marching.max() / marching.min() - 1:.1%} of each other",
        f"and the 2D step runs at {best['gbps'] / copy:.0%} of the copy.",
        f"the kernels that follow from it, at {best['gbps'] / copy:.0%} and "
        f"{_share(_ref('ch09_stencil3d'), 'march_vec4'):.0%} of the copy",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)


def test_chapter_claims_about_filters_and_ccl_hold_in_the_reference_data():
    f = _ref("ch09_filters").set_index(["filter", "implementation"])["median_ms"]
    assert f[("sobel magnitude", "cupyx.scipy.ndimage")] > 1.5 * f[("sobel magnitude", "ours")]  # "wins"
    assert 0.7 < f[("box blur 3x3", "cupyx.scipy.ndimage")] / f[("box blur 3x3", "ours")] < 1.3  # "even"
    c = _ref("ch09_ccl").pivot_table(index="density", columns="method", values="median_ms")
    assert (c["union-find"] < c["cupyx.scipy.ndimage.label"]).all()  # "faster than CuPy at every density"
    assert (c["scipy.ndimage.label (CPU)"] > 100 * c["union-find"]).all()  # "two orders of magnitude"
    above = c.index > 0.5927
    assert (c.loc[above, "label propagation"] > c.loc[above, "scipy.ndimage.label (CPU)"]).all()
    assert c["union-find"].is_monotonic_increasing and c["union-find"].max() < 5 * c["union-find"].min()
    ccl = _ref("ch09_ccl")
    clocks = ccl.groupby("method")["clock"].unique().map(list).to_dict()
    # "Union-find's times are GPU time; label propagation and CuPy's labelling ... are timed from Python"
    assert clocks == {"union-find": ["gpu-held"], "label propagation": ["python-launch"],
                      "cupyx.scipy.ndimage.label": ["python-launch"], "scipy.ndimage.label (CPU)": ["host-clock"]}
    phrases = [f"from {c['union-find'].iloc[0]:.2f} ms on the sparsest image to {c['union-find'].iloc[-1]:.2f} ms "
               "on the densest"]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    s = _ref("ch09_ccl_steps")
    paths = s[s["shape"].isin(["spiral", "snake"])]
    assert (paths["steps"] == paths["foreground"]).all()  # one step per pixel of the path


def test_racecheck_reference_reports_the_race_and_no_race_with_the_barrier():
    t = _ref("ch09_racecheck")
    bad = " ".join(t.loc[t["kernel"] == "stencil1d_no_barrier", "line"])
    good = " ".join(t.loc[t["kernel"] == "stencil1d_shared", "line"])
    assert "Race reported" in bad and "0 hazards displayed" in good
    # the chapter says the report points at the tile's writes and the sum's reads: the line numbers must still
    # point there in kernels/stencil.py (after editing the kernels above them, collect ch09_racecheck again)
    source = (ROOT / "src" / "labhelpers" / "kernels" / "stencil.py").read_text().splitlines()
    for kind, line_no in re.findall(r"(Write|Read) access at .*? in stencil\.py:(\d+)", bad):
        line = source[int(line_no) - 1]
        assert ("s[" in line and "= x[" in line) if kind == "Write" else "acc += s[" in line, (kind, line_no, line)


# --- the 3D stencil, the convergence test and union-find's shapes (H200 run of 2026-11-28) -------------------

def _book_figures_3d() -> list[str]:
    from labhelpers.experiments import stencil as exp
    from labhelpers.models import stencil as model

    s = exp.stencil3d_summary(_ref("ch09_stencil3d"))
    naive, marching = s[s.index.str.startswith("naive")], s[s.index.str.startswith("marching")]
    vec = s[s.index.str.startswith("march_vec4")]
    copy = float(s.loc["copy", "gbps"])
    assert marching["gbps"].max() < naive["gbps"].min()  # "marching ... is the **slower** one"
    assert naive["share_of_copy"].max() < 0.25  # "neither comes near the copy"
    kernels = pd.concat([naive, marching])  # the two kernels of the first measurement
    assert kernels["median_ms"].min() > 1.0 and kernels["issue_ms"].max() < 0.05  # "more than a millisecond"
    # the targets: 80% of the copy, a marching-planes kernel at least as fast as the naive one
    assert vec["share_of_copy"].max() >= 0.80 and vec["x_naive"].max() >= 1.0
    best = vec.loc[vec["gbps"].idxmax()]
    loads = model.stencil3d_loads_table().set_index(["bx", "by"])
    pct = lambda v: f"{v:.0%}"  # noqa: E731
    x = f"{marching['x_naive'].min():.2f} to {marching['x_naive'].max():.2f}"
    lo, hi = f"{kernels['issue_ms'].min():.2f}", f"{kernels['issue_ms'].max():.2f}"
    issue = lo if lo == hi else f"{lo} to {hi}"
    return [
        f"Counted in words, that is {loads['marching_dram_bytes'].min():.0f} to "
        f"{loads['marching_dram_bytes'].max():.0f} bytes per point",
        f"a 32x8 block moves about {model.stencil3d_loads(32, 8)['marching_sector_bytes']:.0f} bytes per point and "
        f"an 8x8 block {model.stencil3d_loads(8, 8)['marching_sector_bytes']:.0f}",
        f"**slower** one: {marching['gbps'].min():,.0f} to {marching['gbps'].max():,.0f} GB/s against the naive "
        f"kernel's {naive['gbps'].min():,.0f} to {naive['gbps'].max():,.0f}, {x} times its speed.",
        f"({copy:,.0f} GB/s): the naive kernel reaches {pct(naive['share_of_copy'].max())} of it, marching "
        f"{pct(marching['share_of_copy'].min())} to {pct(marching['share_of_copy'].max())}.",
        f"issuing a launch took {issue} ms",
        f"Marching planes moves about {model.stencil3d_loads(32, 8)['marching_sector_bytes']:.0f} bytes per point "
        "with 32 x 8 blocks (counting sectors), the naive 3D kernel up to "
        f"{model.stencil3d_loads(32, 8)['naive_dram_bytes_worst']:.0f}",
        f"marching with its shared tile runs at {x} times its speed, and the naive kernel reaches only "
        f"{pct(naive['share_of_copy'].max())} of the copy",
        f"`stencil3d_march_vec4` reaches {pct(best['share_of_copy'])} of the copy of the same volume "
        f"({_g(best['gbps'])} GB/s with blocks of {best.name.split()[1].replace('x', ' x ')}), "
        f"{best['x_naive']:.1f} times the naive kernel and {best['gbps'] / marching['gbps'].max():.1f} times the "
        "marching kernel with its shared tile: the chapter's targets, 80% of the copy and a marching-planes kernel "
        "at least as fast as the naive one, are met.",
        f"Its three block shapes lie within {vec['gbps'].max() / vec['gbps'].min() - 1:.1%} of each other.",
        f"reaches {pct(best['share_of_copy'])} of the copy, {best['x_naive']:.1f} times the naive kernel.",
    ]


def _book_figures_convergence() -> list[str]:
    import math

    from labhelpers.experiments import stencil as exp

    t = _ref("ch09_convergence")
    s = exp.convergence_summary(t)
    none = float(t.loc[t["test"] == "none", "ms_per_step"].iloc[0])
    n = int(t["n"].iloc[0])
    host1 = t[(t["test"] == "host") & (t["check_every"] == 1)]
    dev1, x10, x100 = s.loc[1, "device"], s.loc[10, "device x no test"], s.loc[100, "device x no test"]
    factor = 2 * n * n / math.pi ** 2
    blocks = (n // st.BLOCK_2D[0]) * (n // st.BLOCK_2D[1])
    assert n % st.BLOCK_2D[0] == 0 and n % st.BLOCK_2D[1] == 0
    assert s["host"].min() > s["device"].max()  # the host test is the dearer one at every interval
    return [
        f"One run with the host test at every step takes about {float(host1['median_ms'].iloc[0]) / 1e3:.0f} seconds",
        f"costs {dev1:.3f} ms per step against {none:.3f} ms without any test: {dev1 / none:.1f} times as long.",
        f"Every 10 steps the run takes {x10:.2f} times as long as without a test, every 100 steps {x100:.2f} times.",
        f"{s.loc[1, 'host']:.0f} ms per step when every step is tested, {s.loc[1, 'host x no test']:,.0f} times the "
        f"untested run; even every 100 steps the run takes {s.loc[100, 'host x no test']:.0f} times as long.",
        f"Why 4 bytes cost {dev1 - none:.2f} ms per test",
        f"all {blocks:,} blocks ({n} x {n} points in blocks of {st.BLOCK_2D[0]} x {st.BLOCK_2D[1]})",
        f"the test adds {x10 - 1:.0%} or {x100 - 1:.0%} to the run",
        f"At $n = {n}$ that factor is about {factor / 1e6:.1f} million",
        f"may still be about {factor * 1e-6:.1f} degrees from the solution",
        f"a test every step makes a step {dev1 / none:.1f} times as long, every 10 steps {x10:.2f} times",
        f"about {factor / 1e6:.1f} million at $n = {n}$, so the field may still be about {factor * 1e-6:.1f} "
        "degrees off",
    ]


def _book_figures_union_find() -> list[str]:
    from labhelpers.experiments import stencil as exp

    s = exp.uf_shapes_summary(_ref("ch09_uf_shapes"))
    ns = s["halving ns/px"]
    densities = _ref("ch09_ccl")["density"]
    assert densities.max() / densities.min() == pytest.approx(3)  # "three times as many foreground pixels"
    assert ns.idxmin() == "random 0.6" and ns.idxmax() == "snake"  # the cheapest and the dearest shape
    assert s.loc["random 0.6", "halving_speedup"] < 1  # "on the random image it is slower"
    assert (s.drop(index="random 0.6")["halving_speedup"] > 1).all()  # halving pays on the three long shapes
    return [
        f"a pixel costs {ns['random 0.6']:.3f} ns on the random image and {ns['snake']:.3f} ns on the snake, "
        f"{ns['snake'] / ns['random 0.6']:.1f} times as much; the spiral ({ns['spiral']:.3f} ns) and the rows "
        f"({ns['rows']:.3f} ns) lie between.",
        f"it is {s.loc['spiral', 'halving_speedup']:.1f} times faster than no compression on the spiral",
        f"{s.loc['random 0.6', 'halving ms']:.2f} ms against {s.loc['random 0.6', 'no compression ms']:.2f} ms.",
    ]


# --- the profile and the tuning sweep behind the 16-byte kernels (H200, 2026-11-29) ---------------------------

TUNING = ROOT / "bench" / "tuning" / "results"
#: The kernels of the chapter's profile table, with the block the table names (checked against the profile).
PROFILED = {"jacobi_naive": "32x8", "jacobi_marching": "128x1", "stencil3d_naive": "32x8x1",
            "stencil3d_marching": "32x4"}


def _ncu() -> dict[str, dict[str, float]]:
    """Nsight Compute's metrics of each stencil kernel of ``ncu-2026-11-29.csv`` (one launch each), and its block."""
    lines = (TUNING / "ncu-2026-11-29.csv").read_text().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith('"ID"'))
    out: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        name = r["Kernel Name"].split("[")[0].split("::")[-1]
        if name.startswith(("jacobi", "stencil3d")):
            d = out.setdefault(name, {"block": r["Block Size"]})
            d[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    for name, d in out.items():
        points = 8192 ** 2 if name.startswith("jacobi") else 512 ** 3
        d["ipp"] = d["smsp__inst_executed.sum"] * 32 / points  # thread-instructions per point
        d["bpp"] = (d["dram__bytes_read.sum"] + d["dram__bytes_write.sum"]) / points
        d["dram"] = d["dram__throughput.avg.pct_of_peak_sustained_elapsed"]
        d["issue"] = d["smsp__issue_active.avg.pct_of_peak_sustained_active"]
        d["us"] = d["gpu__time_duration.sum"] / 1e3  # reported in ns
        d["stall"] = {k.split("stalled_")[1].split("_per_issue")[0]: v for k, v in d.items()
                      if isinstance(v, float) and k.startswith("smsp__average_warps_issue_stalled_")}
    return out


def _book_figures_profile() -> list[str]:
    p = _ncu()
    jt, t3 = _ref("ch09_jacobi"), _ref("ch09_stencil3d")
    meta = lh.load_reference("ch09_jacobi").meta
    sweep = pd.read_csv(TUNING / "tuning-stencil.csv")
    swept = sweep.groupby("kernel")["ratio_to_copy"].max()
    clock = statistics.median(d["sm__cycles_elapsed.avg.per_second"] for d in p.values()) / 1e9
    copy = float(jt.loc[jt["variant"] == "copy", "gbps"].iloc[0])
    rate = meta["sm_count"] * 4 * 32 * round(clock, 2) * 1e9  # thread-instructions per second
    budget = rate / (copy / 8 * 1e9)  # per point at the copy's rate
    assert meta["gpu"] == "NVIDIA H200" and meta["sm_count"] == 132  # "the H200's 132 SMs"
    rows = []
    for name, block in PROFILED.items():
        d = p[name]
        launched = tuple(int(v) for v in d["block"].strip("()").split(","))
        named = tuple(int(v) for v in block.split("x"))
        assert launched == named + (1,) * (3 - len(named)), (name, d["block"])
        rows.append(f"| `{name}`, {block} | {_g(d['us'])} | {d['bpp']:.1f} | {d['dram']:.0f}% | {d['issue']:.0f}% | "
                    f"{d['ipp']:.0f} |")
    assert all(7.5 < d["bpp"] < 8.5 for d in p.values())  # "about 8 bytes per point", every kernel
    names = list(PROFILED)
    ceiling = [budget / p[n]["ipp"] for n in names]
    issue = [p[n]["issue"] / 100 for n in names]
    measured = [_share(jt, kernel="naive 32x8"), _share(jt, kernel="marching 128x1"),
                _share(t3, kernel="naive 32x8x1"), _share(t3, kernel="marching 32x4")]
    two = lambda vals: ", ".join(f"{v:.2f}" for v in vals[:-1]) + f" and {vals[-1]:.2f}"  # noqa: E731
    vec2, vec3, naive2 = p["jacobi_vec4_march"], p["stencil3d_march_vec4"], p["jacobi_naive"]
    assert 2.5 < p["stencil3d_marching"]["ipp"] / budget and p["stencil3d_naive"]["ipp"] / budget < 3.5  # "about three"
    assert budget / vec2["ipp"] > 1 and budget / vec3["ipp"] > 1  # the winners fit the issue budget
    rows_best = {r: sweep[(sweep["kernel"] == "jacobi_vec4_march") & sweep["config"].str.endswith(f"rows={r}")]
                 ["ratio_to_copy"].max() for r in (4, 8, 16)}
    assert max(rows_best, key=rows_best.get) == 8  # "8 rows per thread" is the sweep's best
    assert st.ROWS == 8 and st.VEC_ROWS == 4 and st.PLANES == 8  # "a strip of 8 rows in chunks of 4", "= 8 planes"
    return rows + [
        f"Each of the H200's {meta['sm_count']} SMs has four schedulers",
        f"at about {clock:.2f} GHz: {rate / 1e12:.0f} tera thread-instructions per second.",
        f"At the copy's rate, {copy / 8:,.0f} G points per second (8 bytes each), that leaves about {budget:.0f} "
        "instructions per point.",
        f"`jacobi_naive` would reach at most {ceiling[0]:.2f} of the copy's rate, `jacobi_marching` {ceiling[1]:.2f}, "
        f"the two 3D kernels {ceiling[2]:.2f} and {ceiling[3]:.2f}.",
        f"Their schedulers issue only {min(issue):.0%} to {max(issue):.0%} of the cycles, which leaves "
        f"{two([c * i for c, i in zip(ceiling, issue)])} of the copy; the measurements above give {two(measured)}.",
        f"{naive2['stall']['not_selected']:.1f} warps on average were passed over for another, and "
        f"{naive2['stall']['math_pipe_throttle']:.1f} waited for the arithmetic pipe",
        f"{p['stencil3d_marching']['stall']['barrier']:.1f} warps waited at a barrier and "
        f"{p['stencil3d_marching']['stall']['long_scoreboard']:.1f} for a load from memory",
        f"from {swept['jacobi_naive']:.2f} to {swept['jacobi_flat']:.2f} of the copy, and the 3D step from "
        f"{swept['stencil3d_naive']:.2f} to {swept['stencil3d_flat']:.2f} ({p['stencil3d_flat']['ipp']:.0f} "
        f"instructions per point instead of {p['stencil3d_naive']['ipp']:.0f}).",
        f"{p['jacobi_vec4']['ipp']:.0f} instructions per point, {swept['jacobi_vec4']:.2f} of the copy.",
        f"{rows_best[4]:.2f}, {rows_best[8]:.2f} and {rows_best[16]:.2f} of the copy at their best blocks.",
        f"{vec2['ipp']:.0f} instructions per point, the issue slots busy {vec2['issue']:.0f}% of the time, DRAM "
        f"throughput at {vec2['dram']:.0f}% of its peak",
        f"{vec2['stall']['long_scoreboard']:.1f} warps waiting for a load, against "
        f"{naive2['stall']['long_scoreboard']:.1f} for `jacobi_naive`",
        f"reached {swept['stencil3d_flat']:.2f} of the copy ({p['stencil3d_flat']['ipp']:.0f} instructions per "
        f"point); marching in registers, one column per thread, {swept['stencil3d_march_regs']:.2f} "
        f"({p['stencil3d_march_regs']['ipp']:.0f}); with 16-byte loads and four columns per thread, the kernel "
        f"below ({vec3['ipp']:.0f}).",
        f"reached only {swept['stencil3d_march_shared']:.2f}",
        f"Its profile: {vec3['ipp']:.0f} instructions per point, the issue slots busy {vec3['issue']:.0f}% of the "
        f"time, DRAM throughput at {vec3['dram']:.0f}% of its peak.",
        f"and {min(p[n]['ipp'] for n in names):.0f} to {max(p[n]['ipp'] for n in names):.0f} instructions per point "
        f"where the GPU can issue about {budget:.0f} at the copy's rate.",
        f"cut that to {vec2['ipp']:.0f}, and the 2D step",
        f"executing {p['stencil3d_marching']['ipp']:.0f} to {p['stencil3d_naive']['ipp']:.0f} instructions per point",
        f"`stencil3d_march_vec4`, at {vec3['ipp']:.0f} instructions per point, reaches "
        f"{_share(t3, 'march_vec4'):.0%} of the copy.",
    ]


def test_chapter_claims_about_the_profile_hold_in_the_profile_and_the_sweep():
    """The profile table, the issue budget and the tuning ladder the chapter quotes (bench/tuning/results)."""
    missing = _missing(_prose(), _book_figures_profile())
    assert not missing, "the chapter's text no longer matches the profile or the sweep:\n" + "\n".join(missing)


def test_chapter_claims_about_3d_convergence_and_union_find_hold_in_the_reference_data():
    phrases = _book_figures_3d() + _book_figures_convergence() + _book_figures_union_find()
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    assert "Not measured yet" not in (ROOT / "book" / "09_stencils.ipynb").read_text()
