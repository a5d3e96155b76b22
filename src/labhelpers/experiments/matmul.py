"""Chapter "Matrix multiplication": timing the kernels, and the tables and roofline points the chapter plots.

:func:`time_kernel` times one variant of :mod:`labhelpers.kernels.matmul` on ``n x n`` float32
matrices, :func:`time_cublas` the cuBLAS yardstick (through CuPy), :func:`measure_sweep` every
kernel over :data:`SWEEP_SIZES` (``bench/matmul.py`` stores it as reference ``ch05_matmul_sweep``),
:func:`roofline_points` places a sweep's kernels on the roofline, and :func:`unrolling_steps` reads the steps
from the double-buffered kernel to :func:`~labhelpers.kernels.matmul.unrolled_kernel` off the tile-shape table
(reference ``ch05_register_configs``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..kernels.matmul import COARSENED, DEFAULT_TILE, REGISTER, UNROLLED, RegisterTiling, plan
from ..models.tiling import ideal_intensity, kernel_intensity
from ..sweep import sweep
from ..timing import Timing, benchmark
from ..xp import HAS_CUPY, xp


def random_square(n: int, dtype=np.float32, seed: int = 0):
    """Two random ``n x n`` device arrays (CuPy's generator on a GPU, so nothing crosses PCIe)."""
    if HAS_CUPY:
        rng = xp.random.default_rng(seed)
        a = rng.standard_normal((n, n), dtype=np.float64).astype(dtype)
        b = rng.standard_normal((n, n), dtype=np.float64).astype(dtype)
        return cuda.as_cuda_array(a), cuda.as_cuda_array(b), (a, b)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    return cuda.to_device(a), cuda.to_device(b), (a, b)


def _repeats(variant: str, n: int) -> int:
    """Fewer repetitions where one run is long (the naive kernel at n >= 2048 takes tens of ms)."""
    return 3 if variant == "naive" and n >= 2048 else 10


def time_kernel(variant: str, n: int, *, tile: int = DEFAULT_TILE, tiling: RegisterTiling | None = None,
                repeat: int | None = None) -> Timing | None:
    """Time one variant on ``n x n`` float32 matrices with CUDA events (compilation excluded).

    Returns None under the simulator (nothing is launched: the sizes are a GPU's), so that
    :func:`labhelpers.sweep` records the point with NaN timings.
    """
    if backend.is_simulator():
        return None
    a_d, b_d, _keep = random_square(n)
    c_d = cuda.device_array((n, n), dtype=np.float32)
    p = plan(variant, n, n, n, tile=tile, tiling=tiling)
    launch = p.kernel[p.grid, p.block]
    return benchmark(lambda: launch(a_d, b_d, c_d), flops=2 * n**3, warmup=1,
                     repeat=repeat or _repeats(variant, n), label=f"{variant} ({p.config}), n={n}")


def time_cublas(n: int, dtype=np.float32, repeat: int = 10) -> Timing | None:
    """Time ``xp.matmul`` (cuBLAS through CuPy) on ``n x n`` matrices of ``dtype``; None under the simulator.

    For float32, TF32 tensor cores must be off for a fair yardstick: CuPy uses them only when the
    environment variable ``CUPY_TF32=1`` is set (its default compute type is plain FP32).

    Raises:
        GPUOnlyError: on a GPU without CuPy.
    """
    if backend.is_simulator():
        return None
    backend.require_gpu("time_cublas", needs_cupy=True, instead="cuBLAS is timed through CuPy.")
    rng = xp.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float64).astype(dtype)
    b = rng.standard_normal((n, n), dtype=np.float64).astype(dtype)
    c = xp.empty((n, n), dtype=dtype)
    return benchmark(lambda: xp.matmul(a, b, out=c), flops=2 * n**3, warmup=2, repeat=repeat,
                     label=f"cuBLAS {np.dtype(dtype).name}, n={n}")


#: The kernels :func:`measure_sweep` times, with their settings: (name, variant, tile or None).
SWEEP_KERNELS: tuple[tuple[str, str, int | None], ...] = (
    ("naive", "naive", None),
    ("tiled 8", "tiled", 8),
    ("tiled 16", "tiled", 16),
    ("tiled 32", "tiled", 32),
    ("coarsened", "coarsened", None),
    ("register", "register", None),
    ("double_buffered", "double_buffered", None),
    ("unrolled", "unrolled", None),
)
#: cuBLAS yardsticks in the sweep: (name, dtype).
SWEEP_CUBLAS: tuple[tuple[str, Any], ...] = (("cublas_fp32", np.float32), ("cublas_fp64", np.float64))
#: Matrix sizes of the chapter's sweep.
SWEEP_SIZES: tuple[int, ...] = (256, 512, 1024, 2048, 4096)


def measure_sweep(sizes: Sequence[int] = SWEEP_SIZES, kernels: Sequence[tuple[str, str, int | None]] = SWEEP_KERNELS,
                  cublas: Sequence[tuple[str, Any]] = SWEEP_CUBLAS, progress: bool = True) -> pd.DataFrame:
    """GFLOP/s of every kernel and of cuBLAS for ``n x n`` products: the table the chapter plots.

    Columns: ``kernel``, ``variant``, ``tile`` (the shared tile edge; 0 where it does not apply), ``n``,
    and the timing columns of :func:`labhelpers.sweep` (NaN under the simulator). On a GPU without CuPy
    the cuBLAS rows are left out.
    """
    if backend.is_gpu() and not HAS_CUPY:
        cublas = ()
    parts = []
    for name, variant, tile in kernels:
        table = sweep(lambda n, variant=variant, tile=tile: time_kernel(variant, n, tile=tile or DEFAULT_TILE),
                      {"n": list(sizes)}, progress=progress, desc=name)
        table.insert(0, "tile", tile or 0)
        table.insert(0, "variant", variant)
        table.insert(0, "kernel", name)
        parts.append(table)
    for name, dtype in cublas:
        table = sweep(lambda n, dtype=dtype: time_cublas(n, dtype), {"n": list(sizes)}, progress=progress, desc=name)
        table.insert(0, "tile", 0)
        table.insert(0, "variant", name)
        table.insert(0, "kernel", name)
        parts.append(table)
    return pd.concat(parts, ignore_index=True)


# ------------------------------------------------------------------------------------------- roofline points


def block_tile(kernel: str) -> tuple[int, int] | None:
    """The ``(bm, bn)`` tile of C a block computes, for a kernel name of :data:`SWEEP_KERNELS` (None: naive, cuBLAS)."""
    for name, variant, tile in SWEEP_KERNELS:
        if name == kernel:
            if variant == "naive":
                return None
            if variant == "tiled":
                return (tile, tile)
            t = {"coarsened": COARSENED, "unrolled": UNROLLED}.get(variant, REGISTER)
            return (t.bm, t.bn)
    return None


def roofline_points(table: pd.DataFrame, n: int) -> dict[str, tuple[float, float]]:
    """``name -> (intensity, GFLOP/s)`` for every kernel of a sweep table at size ``n``.

    The intensity counts a kernel's requests to global memory (:func:`labhelpers.models.tiling.kernel_intensity`
    with its block tile; 0.25 flop/byte for the naive kernel); cuBLAS, whose tiles we do not know, is placed at
    the intensity of the minimum traffic (each matrix moved once). GFLOP/s are the table's (NaN when not measured).
    """
    points = {}
    rows = table[table["n"] == n]
    for _, row in rows.iterrows():
        name = row["kernel"]
        if name.startswith("cublas"):
            itemsize = 8 if name.endswith("fp64") else 4
            x = ideal_intensity(n, itemsize)
        else:
            tile = block_tile(name)
            x = kernel_intensity(n, n, n) if tile is None else kernel_intensity(n, n, n, *tile)
        points[name] = (float(x), float(row["gflops"]))
    return points


# ------------------------------------------------------------------------------- the steps to the unrolled kernel

#: The steps from the double-buffered kernel to the unrolled one: (what changed, kernel in the tile-shape table,
#: its tiling). Each row changes one thing of the row before.
UNROLLING_STEPS: tuple[tuple[str, str, RegisterTiling], ...] = (
    ("double buffering (section 6)", "double_buffered", REGISTER),
    ("the 8 steps of k written out", "unrolled", REGISTER),
    ("16 steps of k per tile", "unrolled", RegisterTiling(bm=128, bn=128, bk=16, tm=8, tn=8, min_blocks=2)),
    ("launch bound of 1 block per SM", "unrolled", UNROLLED),
)


def unrolling_steps(configs: pd.DataFrame, cublas_gflops: float) -> pd.DataFrame:
    """The rows of :data:`UNROLLING_STEPS` from a tile-shape table (``ch05_register_configs``), against cuBLAS.

    Columns: ``step``, ``kernel``, ``tile`` (``bm x bn x bk``), ``min_blocks``, ``registers``, ``GFLOP/s`` and
    ``of cuBLAS FP32`` (``cublas_gflops``: cuBLAS FP32 at the same size, from the same run).

    Raises:
        KeyError: a step the table does not hold (a table collected before the unrolled kernel existed).
    """
    rows = []
    for step, kernel, t in UNROLLING_STEPS:
        hit = configs[(configs["kernel"] == kernel) & (configs["bm"] == t.bm) & (configs["bn"] == t.bn)
                      & (configs["bk"] == t.bk) & (configs["min_blocks"] == t.min_blocks)]
        if len(hit) != 1:
            raise KeyError(f"the tile-shape table has {len(hit)} rows for {kernel} {t.label()}, min_blocks "
                           f"{t.min_blocks}: re-collect ch05_register_configs (bench/matmul.py)")
        r = hit.iloc[0]
        rows.append({"step": step, "kernel": kernel, "tile": f"{t.bm} x {t.bn} x {t.bk}", "min_blocks": t.min_blocks,
                     "registers": int(r["registers"]), "GFLOP/s": float(r["gflops"]),
                     "of cuBLAS FP32": float(r["gflops"]) / cublas_gflops})
    return pd.DataFrame(rows)
