"""The one table of flop and byte counts: the kernels, the roofline model and the benches read the same numbers."""

from __future__ import annotations

from labhelpers import counts, roofline
from labhelpers.kernels import cuda_intro, nbody
from labhelpers.models import nbody as nbody_model
import pytest

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def test_saxpy_counts_have_one_home():
    assert cuda_intro.saxpy_flops is counts.saxpy_flops and cuda_intro.saxpy_bytes is counts.saxpy_bytes
    c = roofline.saxpy_counts(1000)
    assert (c.flops, c.nbytes) == (counts.saxpy_flops(1000), counts.saxpy_bytes(1000)) == (2000, 12000)


def test_nbody_counts_have_one_home():
    assert nbody.flops is counts.nbody_flops and nbody.bytes_moved is counts.nbody_bytes
    assert nbody.FLOPS_PER_INTERACTION == nbody_model.FLOPS_PER_INTERACTION == roofline.NBODY_FLOPS_PER_INTERACTION == 20
    for n, tile in [(65536, None), (65536, 256), (1000, 256), (257, 256)]:
        c = roofline.nbody_counts(n, tile)
        assert (c.flops, c.nbytes) == (counts.nbody_flops(n), counts.nbody_bytes(n, tile))
    # a partial last block still reads every body: two blocks of 256 for 257 bodies
    assert counts.nbody_bytes(257, 256) == 16 * (2 * 257 + 257) + 12 * 257
