"""The roofline model and the flops and bytes of the chapter's worked examples (no GPU involved).

The model (Williams, Waterman and Patterson, *Roofline: An Insightful Visual Performance Model for
Multicore Architectures*, CACM 52(4), 2009): a kernel of arithmetic intensity ``I`` (flops per byte of
memory traffic) on a machine with bandwidth ``B`` and peak ``P`` attains at most::

    p = min(B * I, P)

:func:`attainable`, :func:`machine_balance`, :func:`bound` and :func:`time_bounds` implement it; the
counting functions (:func:`saxpy_counts`, :func:`matmul_tiled_counts`, :func:`nbody_counts`...) and
:func:`intensity_table` give the flops and bytes of the chapter's worked examples; :func:`peak_at_clock_gflops`
turns a GPU's SM count and clock into its FMA peak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import counts
from ..counts import NBODY_FLOPS_PER_INTERACTION


def attainable(intensity, bandwidth_gbs: float, peak_gflops: float):
    """The roofline: ``min(bandwidth * intensity, peak)`` in GFLOP/s.

    Args:
        intensity: arithmetic intensity in FLOP/byte (a number or an array).
        bandwidth_gbs: memory bandwidth in GB/s (10^9 bytes per second).
        peak_gflops: arithmetic peak in GFLOP/s.
    """
    intensity = np.asarray(intensity, dtype=float)
    if np.any(intensity < 0):
        raise ValueError(f"arithmetic intensity cannot be negative, got {intensity}")
    if bandwidth_gbs <= 0 or peak_gflops <= 0:
        raise ValueError(f"bandwidth and peak must be positive, got {bandwidth_gbs} GB/s and {peak_gflops} GFLOP/s")
    result = np.minimum(bandwidth_gbs * intensity, peak_gflops)
    return float(result) if result.ndim == 0 else result


def machine_balance(peak_gflops: float, bandwidth_gbs: float) -> float:
    """The machine balance (ridge point): the intensity ``P / B`` where the two roofs meet, in FLOP/byte."""
    if bandwidth_gbs <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth_gbs}")
    return peak_gflops / bandwidth_gbs


def bound(intensity: float, bandwidth_gbs: float, peak_gflops: float) -> str:
    """``"memory"`` if a kernel of this intensity sits under the slanted roof, ``"compute"`` under the flat one."""
    return "memory" if intensity < machine_balance(peak_gflops, bandwidth_gbs) else "compute"


#: PCIe 5.0 x16, 64 GB/s per direction (theoretical; about 50-55 GB/s is reached with pinned memory): the host
#: link of an H100 SXM. A T4 has PCIe 3.0 x16 (16 GB/s); the link of the GPU you run on is
#: ``experiments.streams.link_table()``.
PCIE5_X16_GBS = 64.0


def time_bounds(flops: float, device_bytes: float, host_bytes: float, *, peak_gflops: float,
                bandwidth_gbs: float, link_gbs: float) -> pd.DataFrame:
    """The three lower bounds on a kernel's time (compute, device memory, host transfer) and the binding one.

    Each resource alone needs ``amount / rate``; the work cannot finish before the slowest of them. A kernel
    whose inputs first cross PCIe is *transfer bound* when that crossing takes longest. Pass the three rates of
    one GPU (``link_gbs``: its host link per direction, e.g. :data:`PCIE5_X16_GBS` for an H100 SXM).

    Returns:
        A table with columns ``limit``, ``amount``, ``rate``, ``ms`` and ``binding`` (True on the slowest).
    """
    rows = [("compute", flops, f"{peak_gflops:,.0f} GFLOP/s", flops / (peak_gflops * 1e9) * 1e3),
            ("device memory", device_bytes, f"{bandwidth_gbs:,.0f} GB/s", device_bytes / (bandwidth_gbs * 1e9) * 1e3),
            ("host transfer", host_bytes, f"{link_gbs:,.0f} GB/s", host_bytes / (link_gbs * 1e9) * 1e3)]
    table = pd.DataFrame(rows, columns=["limit", "amount", "rate", "ms"])
    table["binding"] = table["ms"] == table["ms"].max()
    return table


# ----------------------------------------------------------------------------- counting flops and bytes


@dataclass(frozen=True)
class KernelCount:
    """Flops and bytes of one kernel under a stated assumption about what the caches catch."""

    kernel: str
    flops: float
    nbytes: float
    assumption: str

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP/byte."""
        return self.flops / self.nbytes


def _positive(**values) -> None:
    for name, v in values.items():
        if v is None or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")


def saxpy_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``y = a x + y``: 2 flops per element; read x and y, write y."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("SAXPY", counts.saxpy_flops(n), counts.saxpy_bytes(n, itemsize),
                       "each element read once, written once")


def reduction_counts(n: int, itemsize: int = 4) -> KernelCount:
    """Sum of ``n`` elements: ``n - 1`` additions; read every element once, write one result."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("sum reduction", n - 1, (n + 1) * itemsize, "each element read once")


def matmul_naive_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` (n x n), no reuse: every multiply-add fetches its two operands from device memory."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("matmul, naive", 2 * n**3, (2 * n**3 + n**2) * itemsize,
                       "no reuse: 2 loads per multiply-add, C written once")


def matmul_tiled_counts(n: int, tile: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` with ``tile x tile`` shared-memory tiles: each loaded element serves ``tile`` multiply-adds."""
    _positive(n=n, tile=tile, itemsize=itemsize)
    return KernelCount(f"matmul, {tile}x{tile} tiles", 2 * n**3, (2 * n**3 / tile + n**2) * itemsize,
                       f"A and B read n/{tile} times, C written once")


def matmul_ideal_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` with perfect reuse: A and B read once, C written once (the algorithmic intensity)."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("matmul, perfect cache", 2 * n**3, 3 * n**2 * itemsize, "A, B read once, C written once")


def gemm_intensity(m: int, n: int, k: int, itemsize: int = 4) -> float:
    """Algorithmic intensity of ``C = A B`` (A: m x k, B: k x n): ``2mnk`` flops over A, B read and C written once."""
    _positive(m=m, n=n, k=k, itemsize=itemsize)
    return 2 * m * n * k / (itemsize * (m * k + k * n + m * n))


def stencil_counts(points: int, npoints: int = 5, itemsize: int = 4, cached: bool = True) -> KernelCount:
    """A weighted ``npoints``-point stencil on ``points`` grid points: ``npoints`` multiplies, ``npoints - 1`` adds.

    ``cached=True``: neighbours come from cache or shared memory, so each input is read once;
    ``cached=False``: every neighbour is a separate device-memory read.
    """
    _positive(points=points, npoints=npoints, itemsize=itemsize)
    flops = (2 * npoints - 1) * points
    if cached:
        return KernelCount(f"{npoints}-point stencil, cached", flops, 2 * points * itemsize,
                           "each input read once (halo reuse), each output written once")
    return KernelCount(f"{npoints}-point stencil, no reuse", flops, (npoints + 1) * points * itemsize,
                       f"{npoints} reads and 1 write per point")


def nbody_counts(n: int, tile: int | None = None) -> KernelCount:
    """All-pairs n-body accelerations: ``20 n^2`` flops, bytes by :func:`labhelpers.counts.nbody_bytes`.

    Each body is a float4 (x, y, z, mass: 16 bytes) and each result a float3 (12 bytes). Without tiles every
    interaction reads the other body from device memory; with shared-memory tiles of ``tile`` bodies each block
    reads every body once.
    """
    _positive(n=n)
    if tile is None:
        return KernelCount("n-body, naive", counts.nbody_flops(n), counts.nbody_bytes(n),
                           "every interaction loads the other body")
    _positive(tile=tile)
    return KernelCount(f"n-body, tiles of {tile}", counts.nbody_flops(n), counts.nbody_bytes(n, tile),
                       f"bodies loaded once per tile of {tile}")


def intensity_table(n_vector: int = 2**26, n_matrix: int = 4096, n_grid: int = 4096, n_bodies: int = 65536,
                    itemsize: int = 4) -> pd.DataFrame:
    """The chapter's worked intensities: SAXPY, reduction, matmul (naive, tiled, ideal), stencil, n-body.

    Returns:
        One row per kernel: ``kernel``, ``flops``, ``bytes``, ``intensity`` (FLOP/byte) and ``assumption``
        (flops and bytes as integers).
    """
    counts = [
        saxpy_counts(n_vector, itemsize),
        reduction_counts(n_vector, itemsize),
        matmul_naive_counts(n_matrix, itemsize),
        matmul_tiled_counts(n_matrix, 16, itemsize),
        matmul_tiled_counts(n_matrix, 32, itemsize),
        matmul_ideal_counts(n_matrix, itemsize),
        stencil_counts(n_grid * n_grid, 5, itemsize, cached=False),
        stencil_counts(n_grid * n_grid, 5, itemsize, cached=True),
        nbody_counts(n_bodies),
        nbody_counts(n_bodies, tile=256),
    ]
    return pd.DataFrame([{"kernel": c.kernel, "flops": int(c.flops), "bytes": int(round(c.nbytes)),
                          "intensity": c.flops / c.nbytes, "assumption": c.assumption} for c in counts])


# --------------------------------------------------------------------------------- peaks at a clock

#: FP32 add/multiply/FMA results per clock per SM (the "CUDA cores" of an SM), by compute capability (CUDA C++
#: Programming Guide, "Arithmetic Instructions", throughput table), with the Fermi (2.x) and Kepler (3.x) GPUs
#: chapter 1 compares with. The one table: :mod:`labhelpers.gpus` reads it too.
FP32_LANES_PER_SM = {(2, 0): 32, (2, 1): 48, (3, 0): 192, (3, 5): 192, (3, 7): 192, (5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128, (6, 2): 128, (7, 0): 64,
                     (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
                     (10, 0): 128, (12, 0): 128}
#: FP64 results per clock per SM (same source).
FP64_LANES_PER_SM = {(5, 0): 4, (5, 2): 4, (5, 3): 4, (6, 0): 32, (6, 1): 4, (6, 2): 4, (7, 0): 32, (7, 2): 4,
                     (7, 5): 2, (8, 0): 32, (8, 6): 2, (8, 7): 2, (8, 9): 2, (9, 0): 64}


def peak_at_clock_gflops(sm_count: int, clock_khz: int, lanes_per_sm: int) -> float:
    """Arithmetic peak ``SMs * lanes * 2 flops (an FMA) * clock``, in GFLOP/s."""
    return sm_count * lanes_per_sm * 2 * clock_khz * 1e3 / 1e9
