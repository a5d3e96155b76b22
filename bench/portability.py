"""Chapter 12 (portability: the same kernels in Numba, CUDA C, OpenCL C and OpenACC C) on the GPU machine.

``collect(out_dir)`` writes

* ``ch12_gpu``: SAXPY (2^26 floats) and the tiled matmul (4096^3, tile 16) in Numba, CUDA C (NVRTC through
  CuPy) and OpenCL C (NVIDIA's OpenCL driver, when an ICD file names it), a device-to-device copy and cuBLAS,
  all in one run;
* ``ch12_cpu``: the same kernels on the machine's host CPU: NumPy, Numba ``parallel=True`` (every Numba
  thread: the CPU's best SAXPY), OpenCL C through PoCL, OpenACC C (``gcc -fopenacc``, host fallback) and the
  same C without ``-fopenacc``, and the host memory ceiling (``roofline.measure_host_bandwidth``: the best of
  STREAM-style copies and an in-place add, which reads every line it writes as SAXPY does);
* ``ch12_directives``: every version of ``saxpy_acc.c`` and ``matmul_acc.c`` on the host, with GCC's report;
* ``ch12_data_clauses``: the copies each SAXPY version's data clauses ask for, done with CuPy around CUDA C;
* ``ch12_toolchain``: what ran where (compiler, OpenCL platforms and devices).

``bench(ctx)``: on the GPU, the OpenCL and CUDA C tiled matmul as ratios to chapter 5's Numba kernel and to
cuBLAS, every model's SAXPY against the copy ceiling ``ctx.copy_bandwidth_gbs()`` and against the CPU's
best SAXPY (Numba ``parallel=True``, same run: "times faster than the CPU"); on the CPU, every model's SAXPY
against the host memory ceiling, and every model's SAXPY and matmul against NumPy (ratio = NumPy's time / the
model's time).

Run: ``python bench/run_all.py --only portability [--collect src/labhelpers/data/reference]``
(``LABHELPERS_COLLECT_ONLY=ch12_cpu`` collects that table alone). On the lent GPU
machines run ``bash tools/ensure_opencl.sh`` first (it writes the NVIDIA ICD file when the library is there).
"""

from __future__ import annotations

import traceback

import pandas as pd

from common import Row, lh, wanted  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers import host
from labhelpers.experiments import portability as ex
from labhelpers.kernels import portability as pt
from labhelpers.refdata import current_meta, save_reference

TOPIC = "portability"
_CACHE: dict = {}


def _gpu() -> pd.DataFrame:
    if "gpu" not in _CACHE:
        _CACHE["gpu"] = ex.gpu_table()
    return _CACHE["gpu"]


def _cpu() -> pd.DataFrame:
    if "cpu" not in _CACHE:
        _CACHE["cpu"] = ex.cpu_table()
    return _CACHE["cpu"]


def _offload_targets() -> str:
    """What ``gcc -v`` says it can offload to (``OFFLOAD_TARGET_NAMES``), or that it runs compute regions on the host."""
    import re
    import subprocess

    try:
        out = subprocess.run(["gcc", "-v"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown: gcc -v failed ({type(exc).__name__})"
    m = re.search(r"OFFLOAD_TARGET_NAMES=(\S+)", out)
    targets = m.group(1) if m else ""
    if "nvptx" in targets:  # built for offloading; it offloads only if the offload compiler package is installed
        return f"gcc built for {targets}; offload compiler {'present' if _nvptx_installed() else 'not installed'}"
    return "none: gcc -fopenacc runs the compute regions on the host"


def _nvptx_installed() -> bool:
    import glob

    return bool(glob.glob("/usr/lib/gcc/x86_64-linux-gnu/*/accel/nvptx-none"))


def toolchain_table() -> pd.DataFrame:
    """What ran where: the compiler, and every OpenCL device found."""
    rows = [{"what": "C compiler (OpenACC)", "value": pt.compiler_version()}]
    try:
        for r in pt.opencl_devices().itertuples():
            rows.append({"what": f"OpenCL device ({r.type})", "value": f"{r.platform}: {r.device}, {r.OpenCL}"})
    except pt.ToolMissing as exc:
        rows.append({"what": "OpenCL", "value": str(exc)})
    rows.append({"what": "host CPU", "value": ex.cpu_name()})
    rows.append({"what": "OpenACC offload", "value": _offload_targets()})
    return pd.DataFrame(rows)


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch12_), each only when ``wanted``."""
    if wanted("ch12_gpu"):
        save_reference("ch12_gpu", _gpu(), out_dir,
                       notes="SAXPY y = a*x + y, 12 bytes per element; matmul n x n x n float32, tile 16; CUDA events "
                             "(Numba, CUDA C, cuBLAS, copy) or OpenCL profiling events; copy = CuPy D2D copy of one "
                             "array, bytes read + written; every result checked against NumPy first")
    if wanted("ch12_cpu"):
        save_reference("ch12_cpu", _cpu(), out_dir,
                       notes="host CPU of the GPU machine; host clock (NumPy, Numba, C) or OpenCL profiling events "
                             "(PoCL); Numba CPU = parallel=True on every Numba thread (device names the count); "
                             "OpenACC = gcc -fopenacc host fallback (one thread); C -O3 = same file without "
                             "-fopenacc; copy / host copy (STREAM) = the host memory ceiling "
                             "(roofline.measure_host_bandwidth): the fastest of a Numba prange copy, np.copyto in "
                             "one thread and in as many threads as Numba's, and an in-place add y += x in as many "
                             "threads (read 2, write 1, like SAXPY's y = a*x + y: no write-allocate traffic), "
                             "2 x 512 MiB float64 buffers first written by the threads that stream them, bytes "
                             "read + written, STREAM's best rate (the fastest of 10 calls); device names the "
                             "stream that won",
                       meta={**current_meta(), **host.host_cpu().as_meta()})
    for name, make in (("ch12_directives", ex.directives_table), ("ch12_data_clauses", ex.data_clause_table),
                       ("ch12_toolchain", toolchain_table)):
        if not wanted(name):
            continue
        try:
            save_reference(name, make(), out_dir)
        except Exception:
            traceback.print_exc()
            print(f"-- portability: {name} NOT collected (see the traceback above)")


def _value(table: pd.DataFrame, kernel: str, model: str, column: str) -> float:
    part = table[(table["kernel"] == kernel) & (table["model"] == model) & (table["status"] == "ok")]
    return float(part[column].iloc[0]) if len(part) else float("nan")


def bench(ctx) -> list[Row]:
    """GPU: tiled matmul vs Numba and cuBLAS, SAXPY vs the copy ceiling; CPU: each model vs NumPy."""
    rows: list[Row] = []
    gpu = _gpu()
    copy = ctx.copy_bandwidth_gbs()
    numba_mm = _value(gpu, "matmul", "Numba", "gflops")
    cublas = _value(gpu, "matmul", "cuBLAS", "gflops")
    msize = gpu.loc[gpu["kernel"] == "matmul", "size"].iloc[0]
    for model in ("OpenCL C", "CUDA C", "Numba"):
        v = _value(gpu, "matmul", model, "gflops")
        if model != "Numba":
            rows.append(Row(TOPIC, f"GPU matmul tiled16 {model}", msize, v, "GFLOP/s", "Numba tiled16 (ch05)",
                            numba_mm))
        rows.append(Row(TOPIC, f"GPU matmul tiled16 {model}", msize, v, "GFLOP/s", "cuBLAS FP32", cublas))
    ssize = gpu.loc[gpu["kernel"] == "saxpy", "size"].iloc[0]
    same_run_copy = _value(gpu, "copy", "copy (CuPy, D2D)", "gbps")
    for model in ("Numba", "CUDA C", "OpenCL C"):
        v = _value(gpu, "saxpy", model, "gbps")
        rows.append(Row(TOPIC, f"GPU saxpy {model}", ssize, v, "GB/s", "D2D copy (read+write), 1 GiB", copy))
        rows.append(Row(TOPIC, f"GPU saxpy {model}", ssize, v, "GB/s", "copy of one array, same run",
                        same_run_copy))
    cpu = _cpu()
    cpu_best = _value(cpu, "saxpy", "Numba CPU", "gbps")
    threads = host.host_cpu().numba_threads
    for model in ("Numba", "CUDA C", "OpenCL C"):
        rows.append(Row(TOPIC, f"GPU saxpy {model}", ssize, _value(gpu, "saxpy", model, "gbps"), "GB/s",
                        f"CPU's best SAXPY (Numba, {threads} threads)", cpu_best))
    host_copy = _value(cpu, "copy", ex.HOST_COPY_MODEL, "gbps")
    csize = cpu.loc[cpu["kernel"] == "saxpy", "size"].iloc[0]
    for model in ("Numba CPU", "OpenCL C", "NumPy", "C -O3"):
        rows.append(Row(TOPIC, f"CPU saxpy {model}", csize, _value(cpu, "saxpy", model, "gbps"), "GB/s",
                        "host memory ceiling (best STREAM kernel), same run", host_copy))
    for kernel, column, unit in (("saxpy", "gbps", "GB/s"), ("matmul", "gflops", "GFLOP/s")):
        base = _value(cpu, kernel, "NumPy", column)
        size = cpu.loc[cpu["kernel"] == kernel, "size"].iloc[0]
        for model in ("Numba CPU", "OpenCL C", "OpenACC C", "C -O3"):
            rows.append(Row(TOPIC, f"CPU {kernel} {model}", size, _value(cpu, kernel, model, column), unit,
                            f"NumPy on the CPU ({kernel})", base))
    return rows
