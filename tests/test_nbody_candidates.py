"""Candidate n-body kernels (kernels/nbody_candidates.py): correctness under the simulator on awkward sizes.

Each candidate must match the chapter's float64 NumPy specification within the chapter's tolerance
(:data:`labhelpers.kernels.nbody.ACC_RTOL`, relative to the size of each body's terms) for sizes that leave the
last tile partial. The stream-K kernel moved into the chapter (``kernels/nbody.py``; its tests are in
``tests/test_nbody.py``): here only the wrappers that keep the sweep's ``jstep`` and ``blocks`` are run. ``@sim_only``: the GPU suite has not run these kernels yet (``bench/tuning/dense.py`` checks them on a GPU
before timing them). Small tiles and sizes: the simulator runs about a thousand threads a second.
"""

from __future__ import annotations

import numpy as np
import pytest

from labhelpers.errors import ArgumentError
from labhelpers.kernels import nbody as nb
from labhelpers.kernels import nbody_candidates as nc
from markers import full_only, sim_only


@sim_only
@full_only
@pytest.mark.parametrize("n, tile, jstep", [(1, 32, 4), (70, 32, 8), (150, 32, 16)])
def test_unrolled_matches_numpy(n, tile, jstep):
    pos = nb.random_bodies(n, np.random.default_rng(n))
    got = nc.run_unrolled(pos, tile=tile, jstep=jstep)
    assert nb.acceleration_error(got, pos) < nb.ACC_RTOL


@sim_only
def test_streamk_forwards_to_the_chapters_kernel():
    """The chapter's stream-K kernel (tests/test_nbody.py tests it) through this module's ``jstep`` and ``blocks``:
    more blocks than work units, whose empty ranges must leave the result alone."""
    pos = nb.random_bodies(5, np.random.default_rng(3))
    got = nc.run_streamk(pos, tile=32, jstep=4, blocks=4)  # 1 i-block x 1 tile = 1 unit, 4 blocks
    assert nb.acceleration_error(got, pos) < nb.ACC_RTOL


def test_candidates_validate_like_the_chapter():
    pos = nb.random_bodies(8)
    with pytest.raises(ArgumentError):
        nc.run_unrolled(pos, eps2=0.0)
    with pytest.raises(ArgumentError):
        nc.run_unrolled(pos, tile=100)
    with pytest.raises(ArgumentError):
        nc.run_streamk(pos, blocks=0)
    with pytest.raises(ArgumentError):
        nc.run_unrolled(pos, bodies=3)
    with pytest.raises(ArgumentError):
        nc.run_streamk(nb.to_soa(pos))
