"""Candidate kernels for the copy ceiling (kernels/stencil_candidates.py, kernels/saxpy_candidates.py): correctness.

Each candidate runs under the simulator on awkward sizes (one point, sizes that are no multiple of the block or
of four, rows that are and are not 16-byte aligned, partial last blocks, several chunks or slabs per thread)
and must agree bit for bit with the chapter's NumPy references; the shared-memory candidate runs under the
race detector. The winners (``jacobi_vec4_march``, ``stencil3d_march_vec4``, ``saxpy_vec4``) are the chapters'
kernels now, tested in ``tests/test_stencil.py`` and ``tests/test_cuda_intro.py``; the candidates that lost are
tested here ``@full_only`` (``LABHELPERS_FULL_TESTS=1``: CI's minutes go to the book's kernels), and
``bench/tuning/stencil.py`` checks each against the chapter's kernels on a GPU before it times it. The sizes are
small because the simulator runs about a thousand threads a second.
"""

from __future__ import annotations

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.kernels import cuda_intro as ci
from labhelpers.kernels import saxpy_candidates as sx
from labhelpers.kernels import stencil as st
from labhelpers.kernels import stencil_candidates as sc
from markers import full_only, sim_only

# (shape, block, work per thread): each block chosen so that the last block along x and y is partial
JACOBI_CASES = {
    "flat": [((1, 1), (4, 2), None), ((3, 5), (4, 2), None), ((17, 33), (16, 8), None),
             ((19, 26), (7, 5), None)],
    "vec4": [((1, 1), (4, 2), None), ((3, 5), (4, 2), None), ((17, 33), (4, 4), None), ((6, 16), (2, 4), None),
             ((66, 130), (8, 8), None)],
}
STENCIL3D_CASES = {
    "flat": [((1, 1, 1), (4, 2, 2), None), ((3, 3, 3), (2, 2, 2), None), ((5, 7, 9), (8, 4, 2), None),
             ((7, 11, 13), (5, 4, 3), None)],
    "march_regs": [((1, 1, 1), (4, 2), 1), ((3, 3, 3), (2, 2), 2), ((5, 7, 9), (8, 4), 2),
                   ((17, 18, 33), (16, 8), 5)],
    "march_shared": [((1, 1, 1), (4, 2), 1), ((3, 3, 3), (2, 2), 2), ((5, 7, 9), (8, 4), 2),
                     ((9, 12, 21), (8, 5), 4)],
}
SAXPY_SIZES = (1, 3, 4, 5, 1023, 4097)


def _field(shape, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(shape) * 100).astype(np.float32)


@sim_only
@full_only
@pytest.mark.parametrize("variant", list(JACOBI_CASES))
def test_jacobi_candidates_match_numpy_bit_for_bit(variant):
    # every candidate that is not a chapter kernel now (those are tested in tests/test_stencil.py)
    assert set(JACOBI_CASES) == {v for v, k in sc.JACOBI_CANDIDATES.items() if k not in st.JACOBI.values()}
    for shape, block, chunks in JACOBI_CASES[variant]:
        u = _field(shape, 1)
        steps = 1 if u.size > 2000 else 2  # two steps where the simulator is quick: the second reads the first's
        got = sc.run_jacobi_candidate(u, steps, variant, block, chunks)
        np.testing.assert_array_equal(got, st.jacobi_reference(u, steps), err_msg=f"{variant} {shape} {block}")


@sim_only
@full_only
@pytest.mark.parametrize("variant", list(STENCIL3D_CASES))
def test_stencil3d_candidates_match_numpy_bit_for_bit(variant):
    assert set(STENCIL3D_CASES) == {v for v, k in sc.STENCIL3D_CANDIDATES.items() if k not in st.STENCIL3D.values()}
    for shape, block, planes in STENCIL3D_CASES[variant]:
        u = _field(shape, 2)
        steps = 1 if u.size > 2000 else 2
        got = sc.run_stencil3d_candidate(u, steps, variant, block, planes)
        np.testing.assert_array_equal(got, st.stencil3d_reference(u, steps), err_msg=f"{variant} {shape} {block}")


@sim_only
@full_only
@pytest.mark.parametrize("variant", [v for v in sx.SAXPY_CANDIDATES if v != "vec4"])
def test_saxpy_candidates_match_numpy(variant):
    rng = np.random.default_rng(3)
    for n in SAXPY_SIZES:
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        blocks = None if variant == "flat" else 3  # grid-stride: a small grid, so threads loop several times
        got = sx.run_saxpy_candidate(1.5, x, y, variant, threads=64, blocks=blocks)
        np.testing.assert_array_equal(got, ci.saxpy_numpy(1.5, x, y), err_msg=f"{variant} n={n}")


@sim_only
def test_candidates_keep_the_chapters_defaults_working():
    u2 = _field((9, 12), 4)
    for variant in sc.JACOBI_CANDIDATES:
        np.testing.assert_array_equal(sc.run_jacobi_candidate(u2, 1, variant), st.jacobi_reference(u2, 1))
    np.testing.assert_array_equal(sc.run_jacobi_candidate(u2, 0), u2)
    u3 = _field((4, 5, 8), 5)
    for variant in sc.STENCIL3D_CANDIDATES:
        np.testing.assert_array_equal(sc.run_stencil3d_candidate(u3, 1, variant), st.stencil3d_reference(u3, 1))
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(sx.run_saxpy_candidate(2.0, x, x), ci.saxpy_numpy(2.0, x, x))


@sim_only
@full_only
def test_stencil3d_march_shared_has_no_race_on_a_partial_last_block():
    from mutants import mutant

    u = _field((5, 7, 11), 6)
    sizes = (np.uint64(5), np.uint64(7), np.uint64(11), np.uint64(3))  # 2 slabs: 3 planes, then 2
    args = ((2, 2, 2), (8, 4), u.reshape(-1), np.zeros(u.size, np.float32), *sizes)  # partial in x and in y
    report = lh.check_races(sc.stencil3d_march_shared, *args)
    assert report.ok, report
    np.testing.assert_array_equal(args[3].reshape(u.shape), st.stencil3d_reference(u, 1))
    # the double buffer is what makes one barrier per plane enough: one tile for every plane races
    single = mutant(sc.stencil3d_march_shared, "p = 1 - p", "p = 0")
    assert "WAR" in str(lh.check_races(single, *args))


@sim_only
@pytest.mark.parametrize("call, match", [
    (lambda: sc.run_jacobi_candidate(np.ones((3, 3)), 1), "float32"),
    (lambda: sc.run_jacobi_candidate(np.zeros((0, 3), np.float32)), "at least one point"),
    (lambda: sc.run_jacobi_candidate(np.ones((3, 3), np.float32), 1, "tiled"), "variant"),
    (lambda: sc.run_jacobi_candidate(np.ones((3, 3), np.float32), 1, "flat", (8, 4, 2)), "2D block"),
    (lambda: sc.run_jacobi_candidate(np.ones((3, 3), np.float32), 1, "flat", None, 2), "chunks"),
    (lambda: sc.run_jacobi_candidate(np.ones((3, 3), np.float32), 1, "vec4_march", None, 0), "chunks"),
    (lambda: sc.run_jacobi_candidate(np.full((3, 3), np.nan, np.float32)), "NaN"),
    (lambda: sc.run_stencil3d_candidate(np.ones((3, 3, 3), np.float32), 1, "flat", (8, 4)), "3D block"),
    (lambda: sc.run_stencil3d_candidate(np.ones((3, 3, 3), np.float32), 1, "march_regs", (8, 4, 1)), "2D block"),
    (lambda: sc.run_stencil3d_candidate(np.ones((3, 3, 3), np.float32), 1, "march_shared", (128, 4)), "shared"),
    (lambda: sc.run_stencil3d_candidate(np.ones((3, 3, 3), np.float32), 1, "march_vec4", None, 0), "planes"),
    (lambda: sc.run_stencil3d_candidate(np.ones((3, 3), np.float32)), "3 dimension"),
    (lambda: sx.run_saxpy_candidate(1.0, np.ones(4), np.ones(4)), "float32"),
    (lambda: sx.run_saxpy_candidate(1.0, np.ones(4, np.float32), np.ones(5, np.float32)), "shape"),
    (lambda: sx.run_saxpy_candidate(1.0, np.ones(4, np.float32), np.ones(4, np.float32), "flat", blocks=2),
     "blocks"),
    (lambda: sx.run_saxpy_candidate(1.0, np.ones(4, np.float32), np.ones(4, np.float32), threads=2048), "1024"),
])
def test_candidate_wrappers_refuse_bad_input_saying_what_to_change(call, match):
    with pytest.raises(lh.LabError, match=match):
        call()


@sim_only
def test_a_misaligned_device_view_is_refused_before_a_16_byte_access():
    class View:  # what a sliced device array reports: its data 4 bytes past a 16-byte boundary
        __cuda_array_interface__ = {"data": (1028, False)}

    assert not sx.aligned16(View()) and sx.aligned16(np.ones(3, np.float32))
    with pytest.raises(lh.LabError, match="16-byte boundary"):
        sc._check_aligned(View(), "u")
