"""Chapter 5 benchmark: the matrix-multiplication kernels against cuBLAS (through CuPy), FP32 without TF32, and FP64.

``collect(out_dir)`` writes the chapter's reference tables:

* ``ch05_matmul_sweep``: GFLOP/s of every kernel (naive, tiled 8/16/32, coarsened, register, double
  buffered, unrolled) and of cuBLAS FP32 and FP64 for ``n x n`` products, n = 256 ... 4096
  (:func:`labhelpers.experiments.matmul.measure_sweep`);
* ``ch05_ceilings``: the roofline of this GPU, measured in the same run: device-to-device copy bandwidth
  and cuBLAS FP32 / FP64 at n = 4096 and 8192;
* ``ch05_register_configs``: the register-tiled, double-buffered and unrolled kernels for several tile shapes
  at n = 4096 (and the unrolled kernel's own shape, :data:`~labhelpers.kernels.matmul.UNROLLED`), with the
  registers per thread the compiler gave them;
* ``ch05_cpu_loop_order``: the CPU side, the ijk / ikj / blocked loops (Numba ``njit``) and NumPy's BLAS,
  timed with the host clock on the GPU machine's CPU.

``bench(ctx)`` times the kernels at n = 4096 and returns rows with the two targets of the chapter: the
best Numba kernel at least 0.85 of cuBLAS FP32 without TF32 (issue 33), and at least 10x the naive kernel.
``collect`` measures only the tables :func:`common.wanted` names (all by default). Every kernel's
result is checked against an FP64 product first (relative error of the norm within 1e-5), and so is
cuBLAS FP32: TF32 tensor cores (10-bit mantissa) would miss that by two orders of magnitude, so a
passing check proves the yardstick is plain FP32.

GPU time: about two minutes for collect and bench together, most of it compiling kernels.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

# TF32 off for the FP32 yardstick: CuPy reads CUPY_TF32 when it first picks a compute type for float32,
# cuBLAS reads NVIDIA_TF32_OVERRIDE when it starts. Both before any product is taken.
os.environ["CUPY_TF32"] = "0"
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"


import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from common import Context, Row, lh, wanted  # noqa: E402

from labhelpers.experiments import matmul as mm_exp  # noqa: E402
from labhelpers.kernels import matmul as mm  # noqa: E402
from labhelpers.refdata import current_meta, save_reference  # noqa: E402

TOPIC = "matmul"
N = 4096
#: Tile shapes tried for the register-tiled and double-buffered kernels (the chapter's table of them).
CONFIGS: tuple[mm.RegisterTiling, ...] = (
    mm.REGISTER,
    mm.RegisterTiling(bm=128, bn=128, bk=16, tm=8, tn=8),
    mm.RegisterTiling(bm=64, bn=128, bk=8, tm=8, tn=8, min_blocks=4),
    mm.COARSENED,
)
#: The kernels of the tile-shape table: (name in the table, factory); every one for every shape of CONFIGS.
CONFIG_KERNELS = (("register", mm.register_tiled_kernel), ("double_buffered", mm.double_buffered_kernel),
                  ("unrolled", mm.unrolled_kernel))
#: Shapes measured for the unrolled kernel only: its own (one block per SM).
UNROLLED_ONLY: tuple[mm.RegisterTiling, ...] = (mm.UNROLLED,)
#: Shared buffers of each kernel of the table.
BUFFERS = {"register": 1, "double_buffered": 2, "unrolled": 2}
#: CPU sizes: the ijk order takes seconds at 1024 (one repetition) and is not run at 2048.
CPU_SIZES = (128, 256, 512, 1024, 2048)


def _cupy():
    import cupy as cp

    return cp


def ensure_plain_fp32() -> str:
    """Make CuPy's float32 matmul use the FP32 compute type (not TF32); return the type's name."""
    cp = _cupy()
    try:
        from cupy._core import _routines_linalg as rl

        current = rl.compute_type_to_str(rl.get_compute_type(np.float32))
        if current != "COMPUTE_TYPE_DEFAULT":
            default = next(i for i in range(16) if rl.compute_type_to_str(i) == "COMPUTE_TYPE_DEFAULT")
            rl.set_compute_type(np.float32, default)
            current = rl.compute_type_to_str(rl.get_compute_type(np.float32))
        return str(current)
    except Exception as exc:  # CuPy internals moved: the numerical check below still decides
        return f"unknown ({type(exc).__name__}); CUPY_TF32={os.environ.get('CUPY_TF32')}, cupy {cp.__version__}"


def _operands(n: int, seed: int = 0):
    cp = _cupy()
    rng = cp.random.default_rng(seed)
    a64 = rng.standard_normal((n, n), dtype=np.float64)
    b64 = rng.standard_normal((n, n), dtype=np.float64)
    return a64, b64


def _rel_error(c, ref) -> float:
    cp = _cupy()
    return float(cp.linalg.norm(c.astype(cp.float64) - ref) / cp.linalg.norm(ref))


def verify(n: int = N) -> dict[str, float]:
    """Relative error (norm) of every kernel and of cuBLAS FP32 at ``n``, against the FP64 product.

    Raises:
        AssertionError: a result outside :data:`~labhelpers.kernels.matmul.RELATIVE_TOLERANCE` (for cuBLAS
            FP32 that means TF32 is on).
    """
    cp = _cupy()
    from numba import cuda

    a64, b64 = _operands(n)
    ref = a64 @ b64
    a, b = a64.astype(cp.float32), b64.astype(cp.float32)
    errors = {"cublas_fp32": _rel_error(a @ b, ref)}
    for variant in mm.VARIANTS:
        c = cp.empty((n, n), dtype=cp.float32)
        mm.plan(variant, n, n, n).launch(cuda.as_cuda_array(a), cuda.as_cuda_array(b), cuda.as_cuda_array(c))
        errors[variant] = _rel_error(c, ref)
    for name, factory, tiling in config_kernels():
        c = cp.empty((n, n), dtype=cp.float32)
        factory(tiling, not mm.whole_tiles(tiling, n, n, n))[tiling.grid(n, n), tiling.block](
            cuda.as_cuda_array(a), cuda.as_cuda_array(b), cuda.as_cuda_array(c))
        errors[f"{factory.__name__}[{tiling.label()}, min_blocks {tiling.min_blocks}]"] = _rel_error(c, ref)
    bad = {k: v for k, v in errors.items() if not v <= mm.RELATIVE_TOLERANCE}
    assert not bad, (f"results outside the tolerance {mm.RELATIVE_TOLERANCE} at n={n}: {bad} "
                     "(cublas_fp32 failing means TF32 is on)")
    return errors


def config_kernels() -> list[tuple[str, object, mm.RegisterTiling]]:
    """``(name, factory, tiling)`` of the tile-shape table: :data:`CONFIG_KERNELS` x :data:`CONFIGS`, then the
    unrolled kernel's own shapes (:data:`UNROLLED_ONLY`)."""
    out = [(name, factory, tiling) for tiling in CONFIGS for name, factory in CONFIG_KERNELS]
    return out + [("unrolled", mm.unrolled_kernel, tiling) for tiling in UNROLLED_ONLY]


def registers_per_thread(kernel) -> int:
    """Registers per thread of a kernel's (first) compiled version; -1 if Numba cannot say."""
    try:
        regs = kernel.get_regs_per_thread()
        if isinstance(regs, dict):  # one entry per compiled signature
            regs = next(iter(regs.values()))
        return int(regs)
    except Exception:
        return -1


def measure_configs(n: int = N) -> pd.DataFrame:
    """GFLOP/s of the register-tiled, double-buffered and unrolled kernels for each shape (:func:`config_kernels`).

    Under the simulator: the same columns, nothing launched, NaN timings and registers -1.
    """
    from numba import cuda

    sim = lh.is_simulator()
    if not sim:
        a_d, b_d, _keep = mm_exp.random_square(n)
        c_d = cuda.device_array((n, n), dtype=np.float32)
    rows = []
    for name, factory, tiling in config_kernels():
        kernel = factory(tiling, not mm.whole_tiles(tiling, n, n, n))
        regs = -1
        if sim:
            t = lh.Timing(label=name, times_ms=None)
        else:
            launch = kernel[tiling.grid(n, n), tiling.block]
            t = lh.benchmark(lambda: launch(a_d, b_d, c_d), flops=2 * n**3, warmup=1, repeat=10,
                             label=f"{name} {tiling.label()}")
            regs = registers_per_thread(kernel)
        rows.append(dict(kernel=name, bm=tiling.bm, bn=tiling.bn, bk=tiling.bk, tm=tiling.tm, tn=tiling.tn,
                         threads=tiling.threads, min_blocks=tiling.min_blocks, registers=regs,
                         shared_bytes=tiling.shared_bytes(BUFFERS[name]), n=n, **t.as_row()))
    return pd.DataFrame(rows)


def measure_ceilings(ctx: Context) -> pd.DataFrame:
    """This GPU's roofline: copy bandwidth, cuBLAS FP32 and FP64 GFLOP/s at n = 4096 and 8192 (NaN in the simulator)."""
    sim = lh.is_simulator()
    nan = float("nan")
    rows = [dict(quantity="copy_bandwidth", n=0, value=nan if sim else ctx.copy_bandwidth_gbs(), unit="GB/s")]
    for n in (4096, 8192):
        for name, dtype in (("cublas_fp32", np.float32), ("cublas_fp64", np.float64)):
            t = mm_exp.time_cublas(n, dtype)
            rows.append(dict(quantity=name, n=n, value=nan if t is None else t.gflops, unit="GFLOP/s"))
    return pd.DataFrame(rows)


def measure_cpu(sizes=CPU_SIZES) -> pd.DataFrame:
    """Host-clock GFLOP/s of the three loop orders and of NumPy (BLAS) on this machine's CPU."""
    rng = np.random.default_rng(0)
    small = rng.standard_normal((8, 8)).astype(np.float32)
    for order in mm.ORDERS:  # compile once, outside the timings
        mm.cpu_matmul(small, small, order=order)
    rows = []
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        for order in (*mm.ORDERS, "numpy"):
            if order == "ijk" and n > 1024:
                continue
            fn = (lambda: a @ b) if order == "numpy" else (lambda order=order: mm.cpu_matmul(a, b, order=order))
            slow = n >= 1024
            t = lh.wall_time(fn, warmup=0 if slow else 1, repeat=1 if slow else 3, flops=2 * n**3, label=order)
            rows.append(dict(order=order, n=n, **t.as_row()))
    return pd.DataFrame(rows)


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (see the module docstring)."""
    fp32 = ensure_plain_fp32()
    meta = current_meta()
    meta["cupy_fp32_compute_type"] = fp32
    errors = verify()
    meta["relative_errors_n4096"] = {k: float(f"{v:.3g}") for k, v in errors.items()}
    t0 = time.time()
    if wanted("ch05_matmul_sweep"):
        sweep = mm_exp.measure_sweep(progress=False)
        save_reference("ch05_matmul_sweep", sweep, out_dir, meta=meta,
                       notes="n x n float32 products (cuBLAS FP64: float64), CUDA events, compilation excluded")
    if wanted("ch05_ceilings"):
        save_reference("ch05_ceilings", measure_ceilings(Context()), out_dir, meta=meta,
                       notes="copy bandwidth: CuPy device-to-device copy of 1 GiB, bytes read + written")
    if wanted("ch05_register_configs"):
        save_reference("ch05_register_configs", measure_configs(), out_dir, meta=meta)
    print(f"-- {TOPIC}: GPU tables in {time.time() - t0:.1f} s", flush=True)
    if wanted("ch05_cpu_loop_order"):
        cpu_meta = dict(meta)
        cpu_meta["cpu"] = _cpu_name()
        save_reference("ch05_cpu_loop_order", measure_cpu(), out_dir, meta=cpu_meta,
                       notes="host clock (time.perf_counter) on the CPU of the GPU machine; numba njit, float32")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def bench(ctx: Context) -> list[Row]:
    """Rows at n = 4096: every kernel against cuBLAS FP32, the best one against both targets."""
    fp32 = ensure_plain_fp32()
    print(f"-- {TOPIC}: CuPy's float32 compute type: {fp32}", flush=True)
    verify()
    cublas32 = mm_exp.time_cublas(N, np.float32).gflops
    cublas64 = mm_exp.time_cublas(N, np.float64).gflops
    size = f"n={N}"
    rows = [
        Row(TOPIC, "cuBLAS FP32 (no TF32, checked)", size, cublas32, "GFLOP/s"),
        Row(TOPIC, "cuBLAS FP64", size, cublas64, "GFLOP/s", "cuBLAS FP32", cublas32),
    ]
    rates = {}
    for variant in mm.VARIANTS:
        rates[variant] = mm_exp.time_kernel(variant, N).gflops
    configs = measure_configs(N)
    for _, r in configs.iterrows():
        rates[f"{r['kernel']} {r['bm']}x{r['bn']}x{r['bk']}, {r['tm']}x{r['tn']}/thread, "
              f"min_blocks {r['min_blocks']}"] = r["gflops"]
    for name, value in rates.items():
        rows.append(Row(TOPIC, name, size, value, "GFLOP/s", "cuBLAS FP32", cublas32))
    best_name = max((k for k in rates if k != "naive"), key=lambda k: rates[k])
    best = rates[best_name]
    rows.append(Row(TOPIC, f"best / cuBLAS (no TF32), 4096: {best_name}", size, best, "GFLOP/s",
                    "cuBLAS FP32 (no TF32, checked, same run)", cublas32, target=0.85))
    rows.append(Row(TOPIC, f"best vs naive: {best_name}", size, best, "GFLOP/s", "naive kernel", rates["naive"],
                    target=10.0))
    return rows


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collect", default=None, help="folder to write the reference tables into")
    args = parser.parse_args()
    if lh.is_simulator():
        sys.exit("error: benchmarks need a CUDA GPU")
    from common import report

    if args.collect:
        collect(args.collect)
    print(report(bench(Context())))
