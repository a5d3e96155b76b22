"""Chapter 9 (stencils, halos, connected components) on the GPU: reference tables and the bench rows.

``collect(out_dir)`` writes

* ``ch09_jacobi``: one Jacobi step of every kernel and block shape on an 8192^2 float32 grid, with a
  CuPy slicing step and a device-to-device copy of the same grid measured in the same run;
* ``ch09_filters``: 3x3 box blur and Sobel magnitude, ours and ``cupyx.scipy.ndimage``'s, on 8192^2;
* ``ch09_ccl``: label propagation, union-find, ``cupyx.scipy.ndimage.label`` and ``scipy.ndimage.label``
  on random 4096^2 images at several densities;
* ``ch09_ccl_steps``: propagation steps against the image side (spiral, snake, random);
* ``ch09_uf_shapes``: union-find with path halving and without compression on 4096^2 spiral, snake,
  rows and random (0.6) images;
* ``ch09_convergence``: 200 Jacobi steps on 4096^2 with the convergence test every 1, 10, 100 steps, the
  maximum change reduced on the device or on the host, and no test at all;
* ``ch09_stencil3d``: one 3D 7-point step, naive, marching planes with a shared tile and marching planes in
  registers with 16-byte loads (several blocks each), on 512^3 float32, beside a copy of the volume;
* ``ch09_racecheck``: the output of ``compute-sanitizer --tool racecheck`` on the 1D stencil without its
  barrier and with it.

``bench(ctx)`` returns the best Jacobi kernel against the copy of the same grid and the copy ceiling
``ctx.copy_bandwidth_gbs()`` (target 85% of each) and against the CuPy slicing step; every Jacobi kernel
against the copy; the best 3D kernel against the copy of the same volume and the copy ceiling (target 80%),
the best marching-planes kernel against the best naive one (target 1.0: at least as fast); Sobel and the box
blur against ``cupyx.scipy.ndimage``; union-find and propagation against ``cupyx.scipy.ndimage.label``
and ``scipy.ndimage.label`` at each density (ratios are time ratios: library time / our time). Each part
runs only where its table is wanted (``LABHELPERS_COLLECT_ONLY``, :func:`common.wanted`).

Run: ``python bench/run_all.py --only stencil [--collect src/labhelpers/data/reference]``; one table:
``LABHELPERS_COLLECT_ONLY=ch09_jacobi python bench/run_all.py --only stencil --collect ...``.
"""

from __future__ import annotations

import traceback

from common import Row, lh, wanted  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import stencil as ex
from labhelpers.refdata import save_reference

TOPIC = "stencil"
JACOBI_N = 8192
FILTER_N = 8192
CCL_N = 4096
CUBE_N = 512
_CACHE: dict = {}


def _jacobi():
    if "jacobi" not in _CACHE:
        _CACHE["jacobi"] = ex.jacobi_table(JACOBI_N)
    return _CACHE["jacobi"]


def _filters():
    if "filters" not in _CACHE:
        _CACHE["filters"] = ex.filters_table(FILTER_N)
    return _CACHE["filters"]


def _ccl():
    if "ccl" not in _CACHE:
        _CACHE["ccl"] = ex.ccl_table(CCL_N)
    return _CACHE["ccl"]


def _stencil3d():
    if "stencil3d" not in _CACHE:
        _CACHE["stencil3d"] = ex.stencil3d_table(CUBE_N)
    return _CACHE["stencil3d"]


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch09_), each only if :func:`wanted`."""
    if wanted("ch09_jacobi"):
        save_reference("ch09_jacobi", _jacobi(), out_dir,
                       notes="one Jacobi step, 8192^2 float32; gbps = 8 bytes per point (read once, written once) / "
                             "median time, credited alike to the CuPy slicing step; copy = CuPy device-to-device "
                             "copy of one grid, bytes read + written; vec4_march: block x in quads of 4 columns, "
                             "8 rows per thread; 10 steps per timing")
    if wanted("ch09_filters"):
        save_reference("ch09_filters", _filters(), out_dir,
                       notes="8192^2 float32 image; gbps = 8 bytes per pixel / median time; library = "
                             "cupyx.scipy.ndimage (uniform_filter size 3, hypot of two sobel calls), mode nearest")
    if wanted("ch09_ccl"):
        save_reference("ch09_ccl", _ccl(), out_dir,
                       notes="random 4096^2 images; GPU times = CUDA events around the whole call (propagation "
                             "includes its host checks every 32 steps); scipy = host clock, image in host memory")
    if wanted("ch09_ccl_steps"):
        save_reference("ch09_ccl_steps", ex.ccl_steps_table(), out_dir,
                       notes="label-propagation steps until no label changes (the last step changes nothing); "
                             "deterministic")
    if wanted("ch09_uf_shapes"):
        save_reference("ch09_uf_shapes", ex.uf_shapes_table(CCL_N), out_dir,
                       notes="union-find (init + merge + compress), 4096^2 images, CUDA events around the three "
                             "launches; find = path halving (compare-and-swap) or no compression; labels checked "
                             "against cupyx.scipy.ndimage.label")
    if wanted("ch09_convergence"):
        _CACHE["convergence"] = ex.convergence_table(CCL_N)
        save_reference("ch09_convergence", _CACHE["convergence"], out_dir,
                       notes="200 Jacobi steps (naive kernel) on a 4096^2 hot plate, tol=0 so every run makes them "
                             "all; test = where max |change| is computed: device (jacobi_residual: block tree + "
                             "atomic max, 4 bytes copied back), host (both fields copied back, NumPy), none; timed "
                             "from Python")
    if wanted("ch09_stencil3d"):
        save_reference("ch09_stencil3d", _stencil3d(), out_dir,
                       notes="one 3D 7-point Jacobi step, 512^3 float32; gbps = 8 bytes per point / median time; "
                             "copy = device-to-device copy of one volume, bytes read + written; march_vec4: block x "
                             "in quads of 4 columns, each block walks 8 planes")
    if wanted("ch09_racecheck"):
        try:  # the sanitizer is a separate tool: if it is missing or fails, keep the other tables and the bench
            save_reference("ch09_racecheck", ex.racecheck_table(), out_dir,
                           notes="compute-sanitizer --tool racecheck --racecheck-report analysis, one launch of 2 "
                                 "blocks of 128 threads, radius 3, kernels compiled with lineinfo=True")
        except Exception:
            traceback.print_exc()
            print("-- stencil: ch09_racecheck NOT collected (see the traceback above)")


def bench(ctx) -> list[Row]:
    """Jacobi against the copy ceiling and CuPy; filters against cupyx; CCL against cupyx and SciPy."""
    rows: list[Row] = []
    copy = ctx.copy_bandwidth_gbs()
    if wanted("ch09_jacobi"):
        jac = _jacobi()
        size = f"{JACOBI_N}^2 f32"
        best = ex.best_jacobi(jac)
        cupy_step = float(jac.loc[jac["variant"] == "cupy slicing", "gbps"].iloc[0])
        same_run_copy = float(jac.loc[jac["variant"] == "copy", "gbps"].iloc[0])
        rows.append(Row(TOPIC, f"jacobi best ({best['kernel']})", size, float(best["gbps"]), "GB/s",
                        "D2D copy (read+write), 1 GiB", copy, target=0.85))
        rows.append(Row(TOPIC, f"jacobi best ({best['kernel']})", size, float(best["gbps"]), "GB/s",
                        "copy of the same grid", same_run_copy, target=0.85))
        rows.append(Row(TOPIC, f"jacobi best ({best['kernel']})", size, float(best["gbps"]), "GB/s",
                        "CuPy slicing step (8 B/pt)", cupy_step))
        for _, r in jac.iterrows():
            if r["variant"] in ("copy", "fp32 FMA peak"):
                continue
            rows.append(Row(TOPIC, f"jacobi {r['kernel']}", size, float(r["gbps"]), "GB/s",
                            "D2D copy (read+write), 1 GiB", copy))
    if wanted("ch09_stencil3d"):
        s3 = _stencil3d()
        size = f"{CUBE_N}^3 f32"
        copy3d = float(s3.loc[s3["variant"] == "copy", "gbps"].iloc[0])
        kernels = s3[s3["variant"] != "copy"]
        best = kernels.loc[kernels["gbps"].idxmax()]
        marching = kernels[kernels["variant"] != "naive"]
        best_march = marching.loc[marching["gbps"].idxmax()]
        naive = float(kernels.loc[kernels["variant"] == "naive", "gbps"].max())
        rows.append(Row(TOPIC, f"stencil3d best ({best['kernel']})", size, float(best["gbps"]), "GB/s",
                        "copy of the same volume", copy3d, target=0.80))
        rows.append(Row(TOPIC, f"stencil3d best ({best['kernel']})", size, float(best["gbps"]), "GB/s",
                        "D2D copy (read+write), 1 GiB", copy, target=0.80))
        rows.append(Row(TOPIC, f"stencil3d marching ({best_march['kernel']})", size, float(best_march["gbps"]),
                        "GB/s", "best naive 3D kernel, same run", naive, target=1.0))
        for _, r in kernels.iterrows():
            rows.append(Row(TOPIC, f"stencil3d {r['kernel']}", size, float(r["gbps"]), "GB/s",
                            "copy of the same volume", copy3d))
    conv = _CACHE.get("convergence")
    if conv is not None:
        for k in sorted(set(conv.loc[conv["test"] == "device", "check_every"])):
            part = conv[conv["check_every"] == k].set_index("test")["ms_per_step"]
            # value: steps per ms with the test on the device; ceiling: with the test on the host (ratio = speedup)
            rows.append(Row(TOPIC, f"jacobi + device test every {k}", "4096^2 f32", 1 / part["device"], "steps/ms",
                            "host test (fields copied back)", 1 / part["host"]))
    filt = _filters() if wanted("ch09_filters") else None
    for name in ([] if filt is None else filt["filter"].unique()):
        part = filt[filt["filter"] == name]
        ours = part[part["implementation"] == "ours"].iloc[0]
        lib = part[part["implementation"] != "ours"].iloc[0]
        # ratio = our bandwidth / the library's = the library's time / ours
        rows.append(Row(TOPIC, f"{name} (ours)", f"{FILTER_N}^2 f32", float(ours["gbps"]), "GB/s",
                        "cupyx.scipy.ndimage", float(lib["gbps"])))
        rows.append(Row(TOPIC, f"{name} (ours)", f"{FILTER_N}^2 f32", float(ours["gbps"]), "GB/s",
                        "D2D copy (read+write), 1 GiB", copy))
    ccl = _ccl() if wanted("ch09_ccl") else None
    for density in ([] if ccl is None else ccl["density"].unique()):
        part = ccl[ccl["density"] == density].set_index("method")
        ms = part["median_ms"].astype(float)
        size = f"{CCL_N}^2 p={density:g}"
        for ours in ("union-find", "label propagation"):
            # value: our speed in labellings per second; ceilings: the libraries' (ratio > 1: we are faster)
            speed = 1e3 / ms[ours]
            rows.append(Row(TOPIC, f"ccl {ours}", size, speed, "labels/s", "cupyx.scipy.ndimage.label",
                            1e3 / ms["cupyx.scipy.ndimage.label"]))
            rows.append(Row(TOPIC, f"ccl {ours}", size, speed, "labels/s", "scipy.ndimage.label (CPU)",
                            1e3 / ms["scipy.ndimage.label (CPU)"]))
    return rows
