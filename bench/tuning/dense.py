"""Tuning sweep for the compute-bound kernels: n-body against the FP32 FMA peak, SGEMM against cuBLAS (TF32 off).

    python bench/tuning/dense.py [--quick] [--out dense_sweep.csv]

GPU only; never run by the test suite. In ONE run, so that every ratio compares numbers taken on the same GPU
minutes apart:

* ``nbody`` at n = 2^18: the chapter's best (:data:`labhelpers.kernels.nbody.BEST`) and neighbours of it, and the
  candidates of :mod:`labhelpers.kernels.nbody_candidates` (``unrolled``: explicit unroll of 4/8/16 j-bodies;
  ``streamk``: the same with the work split evenly over ``SMs x per_sm`` blocks). Rate = 20 n^2 flops / median
  time (GFLOP/s), yardstick = the FP32 FMA peak measured in this run (:func:`labhelpers.roofline.measure_fma_peak`,
  as ``bench/nbody.py`` does). Target of the next session: ratio >= 0.72.
* ``matmul`` at 4096^3: the chapter's ``register`` and ``double_buffered`` kernels (128x128x8, 8x8 per thread)
  against ``cupy.matmul`` with TF32 off (``CUPY_TF32=0``, set here before CuPy loads), and the candidates of
  :mod:`labhelpers.kernels.matmul_candidates` (the same kernels with the k-steps of a tile written out, double-
  and single-buffered, with the chapter's phase loop or peeled at one block per SM). Rate = 2 n^3 / time.
  Target: ratio >= 0.85.

Every kernel is checked before it is timed: n-body on 64 sampled bodies against float64 NumPy (the chapter's
tolerance, relative to each body's term sizes), matmul against a float64 product on the GPU (the chapter's relative
Frobenius tolerance). A configuration that fails gets ``ok = False`` (``note`` says why) and the sweep goes on.
Columns: kernel, config, n, median_ms, rate, yardstick, ratio, ok, note.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

os.environ["CUPY_TF32"] = "0"  # cuBLAS SGEMM in true FP32: the yardstick the chapter's kernels compete with

from _cli import import_labhelpers, run  # bench/tuning/_cli.py: the backend, the import, the command line

lh = import_labhelpers(__file__)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from numba import cuda  # noqa: E402

from labhelpers import counts  # noqa: E402
from labhelpers import roofline as rl  # noqa: E402
from labhelpers.kernels import matmul as mm  # noqa: E402
from labhelpers.kernels import matmul_candidates as mc  # noqa: E402
from labhelpers.kernels import nbody as nb  # noqa: E402
from labhelpers.kernels import nbody_candidates as nc  # noqa: E402

NBODY_N = 2**18
MATMUL_N = 4096
COLUMNS = ["kernel", "config", "n", "median_ms", "rate", "yardstick", "ratio", "ok", "note"]


def nbody_configs(quick: bool = False) -> list[tuple[str, dict]]:
    """``(kernel, params)``: ``chapter`` (a :class:`~labhelpers.kernels.nbody.Config`'s fields), ``unrolled``
    (tile, jstep) and ``streamk`` (tile, jstep, per_sm)."""
    out = [("chapter", {"tile": 512, "unroll": 4, "bodies": 4})]
    if not quick:
        out += [("chapter", {"tile": t, "unroll": 4, "bodies": b}) for t, b in ((256, 4), (256, 2), (128, 4))]
    out += [("unrolled", {"tile": t, "jstep": j}) for t in ((512,) if quick else (256, 512))
            for j in ((16,) if quick else (8, 16))]
    out += [("streamk", {"tile": t, "jstep": j, "per_sm": s}) for t in ((512,) if quick else (256, 512))
            for j in ((16,) if quick else (8, 16)) for s in ((2,) if quick else (1, 2, 4) if t == 256 else (1, 2))]
    if not quick:  # 8 bodies per thread: one shared load per 8 interactions instead of 4
        out += [("unrolled", {"tile": t, "jstep": 16, "bodies": 8}) for t in (128, 256)]
        out += [("streamk", {"tile": t, "jstep": j, "per_sm": s, "bodies": 8}) for t in (128, 256, 512)
                for j in (8, 16) for s in ((1, 2) if t == 512 else (2, 4))]
    return out


def matmul_candidates() -> list[tuple[mm.RegisterTiling, bool, bool]]:
    """``(tiling, double_buffered, peeled)`` of the SGEMM candidates: the chapter's 128 x 128 x 8 tiles with the
    k-steps written out (double- and single-buffered, peeled at one block per SM), then other block tiles, slices
    of k and register bounds: ``bk = 16`` halves the barriers and the phase overhead per FFMA; 128 x 64 and
    64 x 128 blocks of 128 threads make 2x the blocks (4 per SM); 8 x 16 and 16 x 8 per thread (128 x 256, 256 x
    128 blocks) halve the shared loads per FFMA at one block per SM."""
    out = [(mm.REGISTER, True, False), (mm.REGISTER, False, False), (mc.PEELED, True, True), (mc.PEELED, False, True)]
    for shape in ((128, 128, 16, 8, 8, 2), (128, 128, 8, 8, 8, 1), (128, 128, 16, 8, 8, 1), (128, 64, 8, 8, 8, 4),
                  (64, 128, 8, 8, 8, 4), (128, 64, 16, 8, 8, 4), (128, 256, 8, 8, 16, 1), (256, 128, 8, 16, 8, 1)):
        tiling = mm.RegisterTiling(*shape)
        out += [(tiling, True, False), (tiling, False, False)]
    return out


def _sample_error(acc: np.ndarray, pos: np.ndarray, eps2: float, sample: int = 64) -> float:
    """Largest error of ``sample`` bodies' accelerations against float64 NumPy, relative to their term sizes."""
    rng = np.random.default_rng(0)
    idx = rng.choice(pos.shape[0], size=sample, replace=False)
    p = pos.astype(np.float64)
    worst = 0.0
    for lo in range(0, sample, 8):  # 8 rows x n x 3 float64 at a time: bounded memory at n = 2^18
        rows = idx[lo:lo + 8]
        d = p[None, :, :3] - p[rows, None, :3]
        r2 = np.einsum("ijk,ijk->ij", d, d) + eps2
        w = p[None, :, 3] * r2**-1.5
        ref = np.einsum("ij,ijk->ik", w, d)
        scale = np.sum(w * np.sqrt(r2 - eps2), axis=1)
        err = np.max(np.abs(acc[rows].astype(np.float64) - ref), axis=1) / scale
        worst = max(worst, float(err.max()) if np.isfinite(err).all() else float("inf"))
    return worst


def _measure(row: dict, launch: Callable[[], None], result: Callable[[], bool], work: float, yardstick: float,
             repeat: int) -> dict:
    """Check (launch once, ``result()``), then time ``launch``; any exception goes into ``note``."""
    try:
        launch()
        cuda.synchronize()
        row["ok"] = bool(result())
        if not row["ok"]:
            row["note"] = "disagrees with the reference"
        t = lh.benchmark(launch, repeat=repeat, label=f"{row['kernel']} {row['config']}")
        row["median_ms"] = t.median_ms
        row["rate"] = work / (t.median_ms * 1e-3) / 1e9
        row["yardstick"] = yardstick
        row["ratio"] = row["rate"] / yardstick
    except Exception as exc:  # noqa: BLE001 (record and go on: one bad configuration must not end the sweep)
        row["ok"] = False
        row["note"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def nbody_rows(fma_gflops: float, quick: bool, repeat: int) -> list[dict]:
    """Every n-body configuration at :data:`NBODY_N`, against the FMA peak (GFLOP/s at 20 flops per interaction)."""
    n = NBODY_N
    pos = nb.random_bodies(n)
    eps2 = nb._eps2(nb.DEFAULT_EPS2)
    pos_d = cuda.to_device(pos)
    acc_d = cuda.device_array((n, 3), dtype=np.float32)
    flops = counts.nbody_flops(n)
    ok = lambda: _sample_error(acc_d.copy_to_host(), pos, float(eps2)) < nb.ACC_RTOL  # noqa: E731
    rows = []
    for kind, p in nbody_configs(quick):
        row = {"kernel": f"nbody {kind}", "config": ", ".join(f"{k} {v}" for k, v in p.items()), "n": n,
               "median_ms": np.nan, "rate": np.nan, "yardstick": fma_gflops, "ratio": np.nan, "ok": False, "note": ""}
        if kind == "chapter":
            cfg = nb.Config("tiled", **p)
            kernel, (blocks, threads) = cfg.kernel(), cfg.launch(n)
            launch = lambda k=kernel, b=blocks, t=threads: k[b, t](pos_d, eps2, acc_d)  # noqa: E731
        elif kind == "unrolled":
            launch = lambda p=p: nc.launch_unrolled(pos_d, eps2, acc_d, **p)  # noqa: E731
        else:
            blocks = nc.streamk_grid(p["per_sm"])
            row["config"] += f", blocks {blocks}"
            launch = lambda p=p, b=blocks: nc.launch_streamk(pos_d, eps2, acc_d, tile=p["tile"],  # noqa: E731
                                                             jstep=p["jstep"], blocks=b,
                                                             bodies=p.get("bodies", nc.BODIES))
        rows.append(_measure(row, launch, ok, flops, fma_gflops, repeat))
        print(f"  {row['kernel']:16s} {row['config']:40s} ratio {row['ratio']:.3f} ok {row['ok']} {row['note']}")
    return rows


def matmul_rows(repeat: int) -> list[dict]:
    """The chapter's register-tiled kernels at :data:`MATMUL_N` against ``cupy.matmul`` (TF32 off)."""
    import cupy as cp

    n = MATMUL_N
    rng = np.random.default_rng(1)
    a = cp.asarray(rng.random((n, n), dtype=np.float32))
    b = cp.asarray(rng.random((n, n), dtype=np.float32))
    c = cp.empty((n, n), dtype=cp.float32)
    ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
    ref_norm = float(cp.linalg.norm(ref))
    ok = lambda: float(cp.linalg.norm(c.astype(cp.float64) - ref)) / ref_norm <= mm.RELATIVE_TOLERANCE  # noqa: E731
    flops = 2.0 * n**3
    base = {"n": n, "median_ms": np.nan, "rate": np.nan, "yardstick": np.nan, "ratio": np.nan, "ok": False, "note": ""}
    cublas = _measure({**base, "kernel": "matmul cupy", "config": "cupy.matmul, CUPY_TF32=0"},
                      lambda: cp.matmul(a, b, out=c), ok, flops, 1.0, repeat)
    yard = cublas["rate"]
    cublas["yardstick"], cublas["ratio"] = yard, 1.0
    rows = [cublas]
    a_d, b_d, c_d = (cuda.as_cuda_array(x) for x in (a, b, c))
    for variant in ("register", "double_buffered"):
        p = mm.plan(variant, n, n, n)
        row = {**base, "kernel": f"matmul {variant}", "config": p.config + (" guarded" if p.guarded else "")}
        rows.append(_measure(row, lambda p=p: p.launch(a_d, b_d, c_d), ok, flops, yard, repeat))
        print(f"  {row['kernel']:16s} {row['config']:40s} ratio {row['ratio']:.3f} ok {row['ok']} {row['note']}")
    for tiling, double_buffered, peeled in matmul_candidates():
        try:
            p = mc.plan_candidate(n, n, n, tiling=tiling, double_buffered=double_buffered, peeled=peeled)
        except Exception as exc:  # noqa: BLE001  (a tiling the kernels refuse: recorded, the sweep goes on)
            rows.append({**base, "kernel": "matmul candidate", "config": tiling.label(),
                         "note": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        row = {**base, "kernel": f"matmul {p.variant}", "config": p.config + (" guarded" if p.guarded else "")}
        rows.append(_measure(row, lambda p=p: p.launch(a_d, b_d, c_d), ok, flops, yard, repeat))
        print(f"  {row['kernel']:16s} {row['config']:40s} ratio {row['ratio']:.3f} ok {row['ok']} {row['note']}")
    return rows


def sweep(quick: bool = False, *, repeat: int = 5) -> pd.DataFrame:
    """Both problems, one run: the FMA peak first (it is the n-body yardstick)."""
    fma = rl.measure_fma_peak()
    print(f"FP32 FMA peak, this run: {fma.value:,.0f} GFLOP/s ({fma.how})")
    rows = nbody_rows(fma.value, quick, repeat) + matmul_rows(repeat)
    return pd.DataFrame(rows, columns=COLUMNS)



def show(table: pd.DataFrame) -> None:
    """Print the table, best first."""
    with pd.option_context("display.max_rows", None, "display.width", 250, "display.max_colwidth", 60):
        print(table.sort_values(["kernel", "ratio"], ascending=[True, False]).to_string(index=False))


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, sweep, show, quick_help="a few configurations"))
