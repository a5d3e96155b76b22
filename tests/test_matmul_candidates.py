"""Candidate SGEMM kernel (kernels/matmul_candidates.py): correctness under the simulator on awkward sizes.

The candidate (the chapter's register-tiled kernels with the k-steps of a tile written out) must match the float64
product within the chapter's tolerance (:func:`labhelpers.kernels.matmul.matches_reference`) and element by
element, for sizes that leave the last tile partial in m, n and k (guarded kernel) and for whole tiles (the
unguarded kernel). ``@sim_only``: the GPU suite has not run this kernel yet (``bench/tuning/dense.py`` checks it
on a GPU before timing it). The chapter tests' small tiling (16 threads per block, bk = 4): the same code paths,
fast enough for the simulator.
"""

from __future__ import annotations

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.kernels import matmul as mm
from labhelpers.kernels import matmul_candidates as mc
from markers import full_only, sim_only

from numba import cuda  # noqa: E402  (after labhelpers chose the backend)

#: The chapter tests' small register tiling (tests/test_matmul.py): 16 x 16 x 4 per block, 4 x 4 per thread.
SMALL = mm.RegisterTiling(bm=16, bn=16, bk=4, tm=4, tn=4)
#: (m, k, n) for the 16 x 16 x 4 tiling: one element; partial tiles in m, k and n at once (17 x 9 x 5: two tiles
#: of k and a part; 18 x 7 x 17: 2 x 2 blocks, all partial at the far edges); k under one tile.
RAGGED = [(1, 1, 1), (17, 9, 5), (18, 7, 17), (5, 3, 20)]


def _inputs(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _assert_product(c, a, b):
    """c is a @ b: within the chapter's Frobenius tolerance, and each element within (k+2) eps (|A||B|)."""
    c = np.asarray(c, dtype=np.float64)
    assert np.isfinite(c).all(), "the result holds NaN or inf (an element never written?)"
    assert mm.matches_reference(c, a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (a.shape[1] + 2) * np.finfo(np.float32).eps * (np.abs(a64) @ np.abs(b64))
    assert (np.abs(c - a64 @ b64) <= bound + 1e-30).all()


#: (double_buffered, peeled): the four loop structures of the candidate.
# double-buffered and not peeled is the chapter's ``unrolled`` kernel now, tested in tests/test_matmul.py
STRUCTURES = [(False, False), (True, True), (False, True)]
STRUCTURE_IDS = ["single", "double-peeled", "single-peeled"]


@sim_only
@full_only
@pytest.mark.parametrize("double_buffered, peeled", STRUCTURES, ids=STRUCTURE_IDS)
@pytest.mark.parametrize("shape", RAGGED, ids=lambda s: "x".join(map(str, s)))
def test_candidate_matches_numpy_on_ragged_shapes(shape, double_buffered, peeled):
    a, b = _inputs(*shape, seed=sum(shape))
    assert mc.plan_candidate(*shape, tiling=SMALL).guarded
    got = mc.run_matmul_candidate(a, b, tiling=SMALL, double_buffered=double_buffered, peeled=peeled)
    _assert_product(got, a, b)


@sim_only
@full_only
@pytest.mark.parametrize("double_buffered, peeled", STRUCTURES, ids=STRUCTURE_IDS)
@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "unguarded"])
def test_candidate_on_whole_tiles_with_and_without_bounds_checks(guarded, double_buffered, peeled):
    """32 x 8 by 8 x 32: 2 x 2 blocks, 2 tiles of k; every element of C written (NaN-filled first)."""
    m, k, n = 32, 8, 32
    a, b = _inputs(m, k, n)
    c = cuda.to_device(np.full((m, n), np.nan, dtype=np.float32))
    kernel = mc.unrolled_kernel(SMALL, guarded, double_buffered, peeled)
    kernel[SMALL.grid(m, n), SMALL.block](cuda.to_device(a), cuda.to_device(b), c)
    _assert_product(c.copy_to_host(), a, b)


@sim_only
def test_whole_tiles_get_the_unguarded_kernel_and_agree_with_the_chapter():
    m, k, n = 16, 12, 16
    a, b = _inputs(m, k, n, seed=3)
    p = mc.plan_candidate(m, k, n, tiling=SMALL)
    assert not p.guarded and p.grid == SMALL.grid(m, n) and p.block == SMALL.block
    got = mc.run_matmul_candidate(a, b, tiling=SMALL)
    _assert_product(got, a, b)
    ref = mm.matmul(a, b, variant="double_buffered", tiling=SMALL)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@sim_only
def test_device_inputs_give_a_numpy_result():
    a, b = _inputs(5, 6, 7)
    got = mc.run_matmul_candidate(cuda.to_device(a), cuda.to_device(b), tiling=SMALL)
    assert isinstance(got, np.ndarray)
    _assert_product(got, a, b)


@pytest.mark.parametrize("shape", [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_empty_dimensions(shape):
    m, k, n = shape
    got = mc.run_matmul_candidate(np.ones((m, k), np.float32), np.ones((k, n), np.float32), tiling=SMALL)
    assert got.shape == (m, n) and not got.any()


@pytest.mark.parametrize("a, b, match", [
    (np.ones((3, 4), np.float32), np.ones((5, 2), np.float32), "inner dimensions differ: a is 3 x 4 and b is 5 x 2"),
    (np.ones((3, 4)), np.ones((4, 2), np.float32), r"float64.*astype\(np.float32\)"),
    (np.ones(4, np.float32), np.ones((4, 2), np.float32), "2 dimension"),
    (np.ones((4, 3), np.float32).T, np.ones((4, 2), np.float32), "ascontiguousarray"),
], ids=["inner", "dtype", "ndim", "contiguity"])
def test_the_arguments_are_validated_as_in_the_chapter(a, b, match):
    with pytest.raises(lh.ArrayArgumentError, match=match):
        mc.run_matmul_candidate(a, b, tiling=SMALL)


def test_the_chapter_structure_is_the_chapter_kernel():
    """One home per kernel: double-buffered with the phase loop, the candidate *is* the chapter's unrolled kernel."""
    for guarded in (True, False):
        assert mc.unrolled_kernel(SMALL, guarded, True, False) is mm.unrolled_kernel(SMALL, guarded)
    assert mc.unrolled_kernel(SMALL, True, False, False) is not mm.unrolled_kernel(SMALL, True)
