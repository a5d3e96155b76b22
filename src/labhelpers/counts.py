"""Flop and byte counts of the course's kernels: the one table that kernels, experiments, benches and the
roofline model read.

Counts are algorithmic: flops by the usual convention, bytes as the global-memory loads and stores the kernel
issues when no cache helps (what a shared-memory tile saves is counted, what L1 or L2 might catch is not).

==========  ======================================  ==================================================
kernel      flops                                   bytes
==========  ======================================  ==================================================
SAXPY       ``2 n`` (a multiply and an add)          ``3 n itemsize``: read x and y, write the result
n-body      ``20 n^2`` (20 per interaction)          ``16 n (reads + 1) + 12 n``: see :func:`nbody_bytes`
==========  ======================================  ==================================================
"""

from __future__ import annotations

from .launch import tiles_for

#: Flops per body-body interaction in the all-pairs n-body kernel, the count of Nyland, Harris and Prins,
#: *Fast N-Body Simulation with CUDA* (GPU Gems 3, ch. 31, 2007).
NBODY_FLOPS_PER_INTERACTION = 20
#: Bytes of one body (x, y, z, mass: a float4) and of one result (ax, ay, az: a float3).
NBODY_BODY_BYTES = 16
NBODY_ACCEL_BYTES = 12


def saxpy_flops(n: int) -> int:
    """Floating-point operations of SAXPY: one multiply and one add per element."""
    return 2 * int(n)


def saxpy_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes SAXPY moves through device memory: read x and y, write out."""
    return 3 * int(n) * int(itemsize)


def nbody_interactions(n: int) -> int:
    """Body-body interactions of one all-pairs evaluation: ``n^2`` (the self terms included)."""
    return int(n) * int(n)


def nbody_flops(n: int) -> int:
    """Flops of one all-pairs evaluation by the 20-flop convention: ``20 n^2``."""
    return NBODY_FLOPS_PER_INTERACTION * nbody_interactions(n)


def nbody_bytes(n: int, tile: int | None = None) -> int:
    """Device-memory bytes of one all-pairs evaluation, counted as the loads and stores the kernel issues.

    Every thread loads its own body once (16 B) and stores its result (12 B). Naive (``tile=None``): every
    thread also loads all ``n`` bodies. Tiled: every block loads all ``n`` bodies once into shared memory, and
    there are ``ceil(n / tile)`` blocks (``tile``: the bodies a block owns): a partial last block still walks
    every tile, so the count rounds up.
    """
    n = int(n)
    reads = n * n if tile is None else n * tiles_for(n, int(tile))
    return NBODY_BODY_BYTES * (reads + n) + NBODY_ACCEL_BYTES * n


__all__ = ["NBODY_ACCEL_BYTES", "NBODY_BODY_BYTES", "NBODY_FLOPS_PER_INTERACTION", "nbody_bytes", "nbody_flops",
           "nbody_interactions", "saxpy_bytes", "saxpy_flops"]
