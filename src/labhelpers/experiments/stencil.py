"""Chapter "Stencils, halos and connected components": the measurements the chapter plots.

* :func:`jacobi_table`: every Jacobi kernel (several block shapes; ``vec4_march``'s x counts quads of four
  columns) on an ``n x n`` float32 grid, its
  effective bandwidth (8 bytes per point: read once, written once) beside a CuPy slicing step and a
  device-to-device copy of the same grid, all in one run;
* :func:`filters_table`: the 3x3 box blur and the Sobel magnitude against ``cupyx.scipy.ndimage``;
* :func:`ccl_table`: label propagation (steps and time), union-find, ``cupyx.scipy.ndimage.label`` on the
  GPU and ``scipy.ndimage.label`` on the CPU, on random images of several densities;
* :func:`ccl_steps_table`: propagation steps against the image side for snakes, spirals and random
  images (deterministic: the same on every GPU);
* :func:`ccl_work_table`: label propagation's steps beside union-find's parent reads per pixel (host model,
  path halving and no compression) on spirals, snakes, rows and random images (deterministic, no GPU);
* :func:`uf_shapes_table`: union-find with and without path halving timed on 4096^2 spiral, snake, rows
  and random images;
* :func:`convergence_table`: Jacobi iterated with its convergence test every k steps, the maximum change
  reduced on the device (4 bytes back) or on the host (two fields back), against steps without a test;
* :func:`stencil3d_table`: the 3D 7-point step, naive, marching planes with a shared tile and marching planes
  in registers with 16-byte loads (``march_vec4``), against a copy of the volume;
* :func:`racecheck_table`: what ``compute-sanitizer --tool racecheck`` says about the stencil without
  its barrier, and about the fixed one.

All of them need a GPU (CuPy for the library baselines) and raise
:class:`~labhelpers.errors.GPUOnlyError` under the simulator; ``bench/stencil.py`` stores their tables
as reference data ``ch09_*``. Every kernel's result is checked before it is timed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..arrays import to_device
from ..errors import GPUOnlyError
from ..kernels import stencil_labelling as lbl
from ..kernels import stencil as st
from ..launch import ConfiguredKernel, grid_2d
from ..models import stencil as model
from ..roofline.measure import time_copy
from ..timing import benchmark, wall_time
from ..xp import xp as cp  # CuPy wherever backend.require_gpu(..., needs_cupy=True) passed
from .. import roofline as rl

#: Jacobi configurations timed: (variant, block x, block y).
JACOBI_CONFIGS: tuple[tuple[str, int, int], ...] = (
    ("naive", 32, 8), ("naive", 32, 4), ("naive", 64, 4), ("naive", 128, 2), ("naive", 32, 16),
    ("shared", 32, 8), ("shared", 32, 4),
    ("marching", 128, 1), ("marching", 64, 2), ("marching", 32, 4), ("marching", 256, 1),
    ("vec4_march", 64, 2), ("vec4_march", 32, 4), ("vec4_march", 128, 2), ("vec4_march", 256, 1),
)
#: Densities of the random images of the CCL comparison (the percolation threshold of the square lattice,
#: 4-connectivity, is about 0.593: just above it one component spans the image along a winding path).
DENSITIES: tuple[float, ...] = (0.3, 0.5, 0.6, 0.7, 0.9)
#: Image sides of the propagation-steps table.
STEP_SIDES: tuple[int, ...] = (16, 32, 64, 128, 256)


def _local_loads(kernel) -> float:
    """How many ``ld.local`` instructions the compiled kernel has (0: its local arrays live in registers)."""
    try:
        ptx = kernel.inspect_asm()
    except Exception:  # not compiled for exactly one signature, or no PTX access
        return float("nan")
    text = "\n".join(ptx.values()) if isinstance(ptx, dict) else str(ptx)
    return float(len(re.findall(r"\bld\.local\b", text)))


def jacobi_table(n: int = 8192, configs: Sequence[tuple[str, int, int]] = JACOBI_CONFIGS, *,
                 repeat: int = 20, number: int = 10, check_n: tuple[int, int] = (1023, 1029),
                 fma_peak: bool = True) -> pd.DataFrame:
    """Time one Jacobi step of every configuration on an ``n x n`` float32 grid. GPU only.

    Each kernel is first checked bit for bit against :func:`~labhelpers.kernels.stencil.jacobi_reference`
    on an awkward ``check_n`` grid (3 steps), and on the big grid against the CuPy step. Rows: ``kernel``
    (``variant`` + block), ``rows_per_thread``, ``cols_per_thread``, ``median_ms``, ``gbps`` (8 n^2 bytes / time),
    ``gpoints_s``, ``local_loads``;
    then ``cupy slicing`` (same 8 n^2 bytes credited, whatever it really moves), ``copy`` (a CuPy
    device-to-device copy of one grid, bytes read + written = 8 n^2 as well) and, with ``fma_peak``,
    the float32 FMA peak of chapter 7's kernel (``gflops`` only): the two roofs of the roofline.
    ``gflops`` of a step counts 4 flops per interior point.
    """
    backend.require_gpu("jacobi_table", needs_cupy=True)
    rng = np.random.default_rng(0)
    small = (rng.random(check_n, dtype=np.float32) * 100).astype(np.float32)
    expected = st.jacobi_reference(small, 3)
    u0 = cp.random.default_rng(0).random((n, n), dtype=cp.float32) * cp.float32(100)
    want = u0.copy()
    st.cupy_jacobi_step(u0, want)
    nbytes = st.JACOBI_BYTES_PER_POINT * n * n
    flops = st.jacobi_counts(n, n)["flops"]
    rows = []
    for variant, bx, by in configs:
        got = st.run_jacobi(small, 3, variant, (bx, by))
        if not np.array_equal(got, expected):
            raise AssertionError(f"jacobi {variant} {bx}x{by} disagrees with NumPy on a {check_n} grid")
        solver = st.Jacobi(u0, variant, (bx, by))
        solver.step()
        if not bool(cp.array_equal(cp.asarray(solver.current), want)):
            raise AssertionError(f"jacobi {variant} {bx}x{by} disagrees with the CuPy step on {n}x{n}")
        t = benchmark(solver.step, nbytes=nbytes, flops=flops, repeat=repeat, number=number,
                      label=f"{variant} {bx}x{by}")
        row = {"kernel": f"{variant} {bx}x{by}", "variant": variant, "block_x": bx, "block_y": by,
               "rows_per_thread": st.ROWS if variant in ("marching", "vec4_march") else 1,
               "cols_per_thread": 4 if variant == "vec4_march" else 1, "n": n}
        row.update(t.as_row())
        row["gpoints_s"] = n * n / (t.median_ms * 1e-3) / 1e9
        row["local_loads"] = _local_loads(st.JACOBI[variant])
        rows.append(row)
        del solver
    v = u0.copy()
    t = benchmark(lambda: st.cupy_jacobi_step(u0, v), nbytes=nbytes, flops=flops, repeat=repeat, number=number,
                  label="cupy slicing")
    rows.append(_extra("cupy slicing", t, n))
    t = time_copy(u0, repeat=repeat, number=number)  # the one copy measurement: bytes read + written
    rows.append(_extra("copy", t, n))
    if fma_peak:
        peak = rl.measure_fma_peak(np.float32)
        rows.append({"kernel": "fp32 FMA peak", "variant": "fp32 FMA peak", "block_x": float("nan"),
                     "block_y": float("nan"), "rows_per_thread": float("nan"), "cols_per_thread": float("nan"),
                     "n": n, "median_ms": float("nan"),
                     "min_ms": float("nan"), "spread": float("nan"), "gbps": float("nan"), "gflops": peak.value,
                     "gpoints_s": float("nan"), "local_loads": float("nan")})
    return pd.DataFrame(rows)


def _extra(name: str, timing, n: int) -> dict:
    row = {"kernel": name, "variant": name, "block_x": float("nan"), "block_y": float("nan"),
           "rows_per_thread": float("nan"), "cols_per_thread": float("nan"), "n": n}
    row.update(timing.as_row())
    row["gpoints_s"] = n * n / (timing.median_ms * 1e-3) / 1e9
    row["local_loads"] = float("nan")
    return row


def best_jacobi(table: pd.DataFrame) -> pd.Series:
    """The fastest kernel row of a :func:`jacobi_table` (library rows excluded)."""
    kernels = table[table["variant"].isin(list(st.JACOBI))].dropna(subset=["gbps"])
    return kernels.loc[kernels["gbps"].idxmax()]


def filters_table(n: int = 8192, *, repeat: int = 20, number: int = 5) -> pd.DataFrame:
    """The 3x3 box blur and the Sobel magnitude on an ``n x n`` float32 image, ours and ``cupyx.scipy.ndimage``'s.

    Effective bandwidth counts 8 bytes per pixel (read once, written once) for every row. Each result is
    compared with CuPy's: ``max_abs_diff``.
    """
    backend.require_gpu("filters_table", needs_cupy=True)
    from cupyx.scipy import ndimage as cnd  # optional: the GPU extra

    img = cp.random.default_rng(1).random((n, n), dtype=cp.float32)
    img_nb = to_device(img)
    nbytes = 8 * n * n
    grid = grid_2d((n, n), st.BLOCK_2D)
    out = cp.empty_like(img)
    out_nb = to_device(out)
    weights = cp.asarray(st.BOX_WEIGHTS)
    weights_nb = to_device(weights)
    rows = []

    def ours_blur():
        st.filter3x3[grid, st.BLOCK_2D](img_nb, weights_nb, out_nb)

    def ours_sobel():
        st.sobel_magnitude[grid, st.BLOCK_2D](img_nb, out_nb)

    def lib_blur():
        return cnd.uniform_filter(img, size=3, mode="nearest")

    def lib_sobel():
        return cp.hypot(cnd.sobel(img, axis=0, mode="nearest"), cnd.sobel(img, axis=1, mode="nearest"))

    for name, ours, lib in (("box blur 3x3", ours_blur, lib_blur), ("sobel magnitude", ours_sobel, lib_sobel)):
        ours()
        want = lib()
        diff = float(cp.abs(out - want).max())
        if not diff < 1e-4:
            raise AssertionError(f"{name}: our kernel differs from cupyx.scipy.ndimage by {diff}")
        for who, fn in (("ours", ours), ("cupyx.scipy.ndimage", lib)):
            t = benchmark(fn, nbytes=nbytes, repeat=repeat, number=number, label=f"{name}, {who}")
            row = {"filter": name, "implementation": who, "n": n, "max_abs_diff": diff}
            row.update(t.as_row())
            rows.append(row)
    return pd.DataFrame(rows)


def _partition_equal_gpu(a, b) -> bool:
    """:func:`~labhelpers.kernels.stencil_labelling.same_partition` on the GPU (CuPy arrays)."""
    import cupy as cp  # optional: the GPU extra

    a = a.ravel().astype(cp.int64)
    b = b.ravel().astype(cp.int64)
    if not bool(cp.array_equal(a == 0, b == 0)):
        return False
    fa, fb = a[a != 0], b[b != 0]
    if fa.size == 0:
        return True
    pairs = cp.unique(fa * (int(fb.max()) + 1) + fb)
    return int(pairs.size) == int(cp.unique(fa).size) == int(cp.unique(fb).size)


def ccl_table(n: int = 4096, densities: Sequence[float] = DENSITIES, *, repeat: int = 3,
              scipy_repeat: int = 2) -> pd.DataFrame:
    """Connected components of random ``n x n`` images: our two GPU algorithms, CuPy's and SciPy's.

    For each density: ``components``, propagation ``steps``, and the time of ``propagation`` (init +
    steps until no label changes, the host looking at the flags every 32 steps), ``union-find`` (3
    launches), ``cupyx.scipy.ndimage.label`` (GPU) and ``scipy.ndimage.label`` (CPU, host clock, the
    image already in host memory). GPU times are CUDA-event times of the whole call. Every GPU result
    is checked against CuPy's up to renaming, and ours against SciPy's exactly after renumbering.
    """
    backend.require_gpu("ccl_table", needs_cupy=True)
    from cupyx.scipy import ndimage as cnd  # optional: the GPU extra
    from scipy import ndimage as snd  # SciPy is slow to import: only where a CPU yardstick needs it

    rows = []
    for density in densities:
        mask_h = lbl.random_mask(n, n, density, seed=int(density * 1000))
        mask = cp.asarray(mask_h)
        lp = lbl.LabelPropagation(mask)
        uf = lbl.UnionFind(mask)
        steps = lp.run()
        uf.run()
        lib_labels, count = cnd.label(mask)
        prop = cp.asarray(lp.labels)
        unif = cp.asarray(uf.labels)
        if not (bool(cp.array_equal(prop, unif)) and _partition_equal_gpu(prop, lib_labels)):
            raise AssertionError(f"CCL at density {density}: our labels disagree with cupyx.scipy.ndimage.label")
        cpu_labels, cpu_count = snd.label(mask_h)
        if not np.array_equal(lbl.relabel_sequential(cp.asnumpy(unif)), cpu_labels):
            raise AssertionError(f"CCL at density {density}: our labels disagree with scipy.ndimage.label")
        common = {"n": n, "density": density, "components": int(cpu_count), "steps": steps}
        timings = (
            ("label propagation", benchmark(lp.run, repeat=repeat, warmup=1, label="propagation")),
            ("union-find", benchmark(uf.run, repeat=10, number=3, label="union-find")),
            ("cupyx.scipy.ndimage.label", benchmark(lambda: cnd.label(mask), repeat=10, number=1,
                                                    label="cupyx label")),
            ("scipy.ndimage.label (CPU)", wall_time(lambda: snd.label(mask_h), repeat=scipy_repeat,
                                                    label="scipy label")),
        )
        for method, t in timings:
            row = dict(common, method=method, clock=t.clock)
            row.update(t.as_row())
            rows.append(row)
        del lp, uf, mask
    return pd.DataFrame(rows)


def ccl_steps_table(sides: Sequence[int] = STEP_SIDES, densities: Sequence[float] = (0.3, 0.6, 0.9)) -> pd.DataFrame:
    """Label-propagation steps against the image side, for a spiral, a snake and random images. GPU only.

    The counts are exact and deterministic (ping-pong steps do not depend on thread timing).
    ``path_pixels`` is the number of foreground pixels of the spiral or snake (one path).
    Union-find always needs 3 launches.
    """
    backend.require_gpu("ccl_steps_table", needs_cupy=True)
    rows = []
    for side in sides:
        shapes = [("spiral", lbl.spiral_mask(side)), ("snake", lbl.snake_mask(side, side))]
        shapes += [(f"random {d:.1f}", lbl.random_mask(side, side, d, seed=side)) for d in densities]
        for name, mask in shapes:
            labels, steps = lbl.label_propagation(mask, check_every=64)
            if not np.array_equal(labels, lbl.label_reference(mask)):
                raise AssertionError(f"propagation labels wrong for {name} {side}x{side}")
            rows.append({"shape": name, "side": side, "pixels": side * side,
                         "foreground": int(np.count_nonzero(mask)), "steps": steps, "union_find_launches": 3})
    return pd.DataFrame(rows)


#: 3D configurations timed: (variant, block) with a 3D block for naive and a 2D block for the marching kernels
#: (``march_vec4``'s x counts quads of four columns; each of its blocks walks ``st.PLANES`` planes).
STENCIL3D_CONFIGS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("naive", (32, 8, 1)), ("naive", (32, 4, 2)), ("naive", (64, 4, 1)),
    ("marching", (32, 8)), ("marching", (32, 4)), ("marching", (16, 8)),
    ("march_vec4", (64, 4)), ("march_vec4", (32, 8)), ("march_vec4", (16, 16)),
)


def stencil3d_table(n: int = 512, configs: Sequence[tuple[str, tuple[int, ...]]] = STENCIL3D_CONFIGS, *,
                    repeat: int = 10, number: int = 5, check_shape: tuple[int, int, int] = (37, 45, 67)) -> pd.DataFrame:
    """Time one 3D 7-point step of each configuration on an ``n^3`` float32 volume. GPU only.

    Each kernel is checked bit for bit against :func:`~labhelpers.kernels.stencil.stencil3d_reference` on an
    awkward ``check_shape`` (2 steps) and on the big volume against the naive kernel. Rows: ``kernel``,
    ``variant``, ``block``, ``median_ms``, ``gbps`` (8 n^3 bytes / time), ``gpoints_s``; then ``copy`` (a
    device-to-device copy of one volume, bytes read + written, the same 8 n^3).
    """
    backend.require_gpu("stencil3d_table", needs_cupy=True)

    rng = np.random.default_rng(0)
    small = (rng.random(check_shape, dtype=np.float32) * 100).astype(np.float32)
    expected = st.stencil3d_reference(small, 2)
    shape = (n, n, n)
    u = to_device(cp.random.default_rng(0).random(shape, dtype=cp.float32) * cp.float32(100))
    v = cuda.device_array(shape, dtype=np.float32)
    want = cp.empty(shape, dtype=cp.float32)
    st.stencil3d_naive[st.stencil3d_grid("naive", shape, st.BLOCK_3D), st.BLOCK_3D](u, to_device(want))
    nbytes = 8 * n ** 3
    rows = []
    for variant, block in configs:
        if not np.array_equal(st.run_stencil3d(small, 2, variant, block), expected):
            raise AssertionError(f"stencil3d {variant} {block} disagrees with NumPy on {check_shape}")
        launch = ConfiguredKernel(st.STENCIL3D[variant], st.stencil3d_grid(variant, shape, block), block)
        args = st.step_args(variant, u, v)  # the 16-byte kernel takes the volumes flattened, and the sizes
        cp.asarray(v).fill(0)  # nothing left over from the previous kernel
        launch(*args)
        if not bool(cp.array_equal(cp.asarray(v), want)):
            raise AssertionError(f"stencil3d {variant} {block} disagrees with the naive kernel on {shape}")
        name = f"{variant} {'x'.join(map(str, block))}"
        t = benchmark(lambda: launch(*args), nbytes=nbytes, repeat=repeat, number=number, label=name)
        row = {"kernel": name, "variant": variant, "block": "x".join(map(str, block)), "n": n}
        row.update(t.as_row())
        row["gpoints_s"] = n ** 3 / (t.median_ms * 1e-3) / 1e9
        rows.append(row)
    t = time_copy(cp.asarray(u), repeat=repeat, number=number)
    row = {"kernel": "copy", "variant": "copy", "block": "", "n": n}
    row.update(t.as_row())
    row["gpoints_s"] = n ** 3 / (t.median_ms * 1e-3) / 1e9
    rows.append(row)
    return pd.DataFrame(rows)


def stencil3d_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The 3D table read against its own copy: per kernel ``median_ms``, ``gbps``, ``share_of_copy`` (of the copy
    row's GB/s, same run) and ``x_naive`` (time of the fastest naive configuration / this one's), plus ``issue_ms``
    (the host's cost of issuing one launch)."""
    copy = float(table.loc[table["variant"] == "copy", "gbps"].iloc[0])
    naive_ms = float(table.loc[table["variant"] == "naive", "median_ms"].min())
    out = table[["kernel", "median_ms", "gbps", "issue_ms"]].copy()
    out["share_of_copy"] = out["gbps"] / copy
    out["x_naive"] = naive_ms / out["median_ms"]
    return out.set_index("kernel")[["median_ms", "gbps", "share_of_copy", "x_naive", "issue_ms"]]


#: Steps between two convergence tests in :func:`convergence_table`.
CHECK_EVERY: tuple[int, ...] = (1, 10, 100)


def convergence_table(n: int = 4096, steps: int = 200, check_every: Sequence[int] = CHECK_EVERY, *,
                      repeat: int = 3) -> pd.DataFrame:
    """Jacobi with a convergence test every k steps, on the device or on the host, on an ``n x n`` plate. GPU only.

    Every run makes ``steps`` steps (``tol=0``: the test never stops it, so all rows do the same work).
    Rows: ``test`` (``device``: :func:`~labhelpers.kernels.stencil.jacobi_residual`, 4 bytes copied back per
    test; ``host``: both fields copied back and compared by NumPy; ``none``: the same steps, no test, one
    wait at the end), ``check_every``, ``median_ms`` (the whole run, timed from Python: every test waits
    for the GPU) and ``ms_per_step``. Device and host runs are checked to end on the same field.
    """
    backend.require_gpu("convergence_table", needs_cupy=True)

    u0 = st.hot_plate(n, n, top=100.0)
    rows = []
    plain = st.Jacobi(u0, "naive")

    def no_test():
        plain.step(steps)
        cuda.synchronize()

    t = benchmark(no_test, repeat=repeat, number=1, label="no test")
    rows.append(dict(test="none", check_every=steps, n=n, steps=steps, **t.as_row()))
    for k in check_every:
        fields = {}
        for test in st.CONVERGENCE_TESTS:
            solver = st.JacobiSolver(u0, test, k)
            solver.run(0.0, steps)
            fields[test] = solver.result()
            t = benchmark(lambda: solver.run(0.0, steps), repeat=repeat, number=1, label=f"{test} test every {k}")
            rows.append(dict(test=test, check_every=k, n=n, steps=solver.steps, **t.as_row()))
            del solver
        if not np.array_equal(fields["device"], fields["host"]):
            raise AssertionError(f"Jacobi with the test every {k} steps: device and host runs end on different fields")
    table = pd.DataFrame(rows)
    table["ms_per_step"] = table["median_ms"] / table["steps"]
    return table


def convergence_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Milliseconds per step for each test and interval, and ``x_no_test``: that time over the run without a test."""
    none = float(table.loc[table["test"] == "none", "ms_per_step"].iloc[0])
    tested = table[table["test"] != "none"]
    out = tested.pivot_table(index="check_every", columns="test", values="ms_per_step")
    for test in list(out.columns):
        out[f"{test} x no test"] = out[test] / none
    out.columns.name = None
    return out


#: Image sides of the work-count table (host only: propagation in NumPy, union-find in the host model).
WORK_SIDES: tuple[int, ...] = (16, 32, 64, 128)


def ccl_shapes(side: int, density: float = 0.6) -> dict[str, np.ndarray]:
    """The chapter's test images of one side: spiral, snake, rows and a random image (``density``, seeded by side)."""
    return {"spiral": lbl.spiral_mask(side), "snake": lbl.snake_mask(side, side), "rows": lbl.rows_mask(side, side),
            f"random {density:.1f}": lbl.random_mask(side, side, density, seed=side)}


def ccl_work_table(sides: Sequence[int] = WORK_SIDES) -> pd.DataFrame:
    """Work per foreground pixel of the two labellings, on the host (deterministic; no GPU needed).

    ``propagation_steps``: steps label propagation takes (each step reads every pixel and its four
    neighbours); ``uf_halving`` and ``uf_plain``: union-find's parent reads per foreground pixel (merge
    and compress) in the host model :func:`~labhelpers.models.stencil.union_find_work`, threads one at a
    time in launch order, with path halving and without compression; ``uf_plain_max_find``: the longest
    single find without compression.
    """
    rows = []
    for side in sides:
        for name, mask in ccl_shapes(side).items():
            _labels, steps = lbl.propagation_steps_reference(mask)
            halving = model.union_find_work(mask, compress=True)
            plain = model.union_find_work(mask, compress=False)
            rows.append({"shape": name, "side": side, "foreground": halving["foreground"],
                         "propagation_steps": steps, "uf_halving": halving["reads_per_pixel"],
                         "uf_plain": plain["reads_per_pixel"], "uf_halving_max_find": halving["max_find"],
                         "uf_plain_max_find": plain["max_find"]})
    return pd.DataFrame(rows)


def uf_shapes_table(n: int = 4096, *, repeat: int = 10, number: int = 3) -> pd.DataFrame:
    """Union-find (path halving, and without compression) timed on ``n x n`` spiral, snake, rows, random 0.6. GPU only.

    Each labelling is checked against ``cupyx.scipy.ndimage.label`` (same partition) before it is timed.
    Rows: ``shape``, ``find``, ``foreground``, ``median_ms`` (CUDA events around the three launches),
    ``ns_per_pixel`` (median time per foreground pixel).
    """
    backend.require_gpu("uf_shapes_table", needs_cupy=True)
    from cupyx.scipy import ndimage as cnd  # optional: the GPU extra

    rows = []
    for name, mask_h in ccl_shapes(n).items():
        mask = cp.asarray(mask_h)
        lib_labels, _count = cnd.label(mask)
        fg = int(np.count_nonzero(mask_h))
        for find in lbl.UF_FINDS:
            uf = lbl.UnionFind(mask, find=find)
            uf.run()
            if not _partition_equal_gpu(cp.asarray(uf.labels), lib_labels):
                raise AssertionError(f"union-find ({find}) on the {n}x{n} {name}: labels disagree with cupyx")
            t = benchmark(uf.run, repeat=repeat, number=number, label=f"union-find {find}, {name}")
            row = {"shape": name, "find": find, "n": n, "foreground": fg}
            row.update(t.as_row())
            row["ns_per_pixel"] = t.median_ms * 1e6 / max(fg, 1)
            rows.append(row)
            del uf
        del mask, lib_labels
    return pd.DataFrame(rows)


def uf_shapes_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per shape: nanoseconds per foreground pixel of both finds, and ``halving_speedup`` (no compression's time
    over path halving's: above 1 where halving pays), sorted by halving's cost."""
    ns = table.pivot_table(index="shape", columns="find", values="ns_per_pixel")
    ms = table.pivot_table(index="shape", columns="find", values="median_ms")
    out = pd.DataFrame({"halving ns/px": ns["path halving"], "no compression ns/px": ns["no compression"],
                        "halving ms": ms["path halving"], "no compression ms": ms["no compression"],
                        "halving_speedup": ms["no compression"] / ms["path halving"]})
    return out.sort_values("halving ns/px")


#: The program compute-sanitizer runs: the stencil without its barrier, then with it, one launch each.
RACECHECK_SCRIPT = textwrap.dedent("""
    import numpy as np
    import labhelpers  # chooses the GPU before numba.cuda is imported
    from numba import cuda
    from labhelpers.kernels import stencil as st

    which = {which!r}
    kernel = cuda.jit(lineinfo=True)(getattr(st, which).py_func)  # line numbers in the report
    x = cuda.to_device(np.arange(256, dtype=np.float32))
    out = cuda.device_array(256, dtype=np.float32)
    kernel[2, 128](x, out, 3)
    cuda.synchronize()
    print(which, "ran")
""")


def racecheck_table(kernels: Sequence[str] = ("stencil1d_no_barrier", "stencil1d_shared"),
                    timeout: int = 240) -> pd.DataFrame:
    """Run ``compute-sanitizer --tool racecheck`` on one launch of each kernel; one row per output line.

    Columns ``kernel``, ``line_no``, ``line``. The sanitizer ships with the CUDA toolkit
    (``/usr/local/cuda/bin``); GPU only.
    """
    backend.require_gpu("racecheck_table", needs_cupy=True)
    exe = None
    for candidate in ("compute-sanitizer", "/usr/local/cuda/bin/compute-sanitizer"):
        if subprocess.run(["which", candidate], capture_output=True).returncode == 0 or os.path.exists(candidate):
            exe = candidate
            break
    if exe is None:
        raise GPUOnlyError("compute-sanitizer was not found (it comes with the CUDA toolkit, in /usr/local/cuda/bin)")
    rows = []
    for which in kernels:
        proc = subprocess.run(
            [exe, "--tool", "racecheck", "--racecheck-report", "analysis", "--print-limit", "6",
             sys.executable, "-c", RACECHECK_SCRIPT.format(which=which)],
            capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
        text = (proc.stdout + proc.stderr).splitlines()
        keep = [line.rstrip() for line in text if line.strip() and "NumbaPerformanceWarning" not in line]
        for k, line in enumerate(keep[:60]):
            rows.append({"kernel": which, "line_no": k, "line": line, "returncode": proc.returncode})
    return pd.DataFrame(rows)


__all__ = ["DENSITIES", "JACOBI_CONFIGS", "RACECHECK_SCRIPT", "STEP_SIDES", "WORK_SIDES", "CHECK_EVERY", "STENCIL3D_CONFIGS", "stencil3d_table", "best_jacobi", "convergence_table",
           "ccl_shapes", "ccl_steps_table", "ccl_table", "ccl_work_table", "filters_table", "jacobi_table",
           "racecheck_table", "uf_shapes_table"]
