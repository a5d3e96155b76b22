"""Chapter "Portability": the measurements the chapter shows, one table per machine.

* :func:`gpu_table`: SAXPY and the tiled matmul in every model that runs on the GPU (Numba, CUDA C through
  CuPy, OpenCL C through NVIDIA's OpenCL driver when it is installed), with a device-to-device copy and
  cuBLAS measured in the same run. GPU only.
* :func:`cpu_table`: the same kernels on the host CPU: NumPy, Numba ``parallel=True`` (every Numba thread:
  the CPU's best SAXPY), OpenCL C through PoCL, OpenACC C through ``gcc -fopenacc`` (host fallback) and the
  same C compiled without ``-fopenacc`` (serial ``-O3``), with the host memory ceiling
  (:func:`labhelpers.roofline.measure_host_bandwidth`: the best STREAM-style kernel, copies and an in-place add)
  as SAXPY's yardstick. Runs on any
  machine with the toolchains (timings of the host clock, or of OpenCL's profiling events for OpenCL).
* :func:`directives_table`: every version of ``saxpy_acc.c`` and ``matmul_acc.c`` timed on the host:
  the measured effect of each directive where the code runs.
* :func:`data_clause_table`: what the data clauses of the four SAXPY versions cost on a GPU: the host-device
  copies each version's clauses ask for, done with CuPy around CUDA C's SAXPY. GPU only.

Every result is checked against NumPy before it is timed. Each row carries the ``machine`` it was
measured on (the GPU's name, or the CPU's model and thread count) and a ``status`` column.
"""

from __future__ import annotations

import ctypes
import os
import statistics
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..host import cpu_model, host_cpu
from ..kernels import matmul as mm
from ..kernels import portability as pt
from ..launch import blocks_for
from ..roofline.measure import HOST_COPY_BYTES, measure_host_bandwidth, time_copy
from ..timing import Timing, benchmark, wall_time
from ..xp import xp as cp  # CuPy wherever backend.require_gpu(..., needs_cupy=True) passed
from .. import device as device_mod

#: Columns of every table of this module.
COLUMNS: tuple[str, ...] = ("machine", "device", "kernel", "model", "size", "median_ms", "min_ms", "gbps",
                            "gflops", "clock", "status")
#: GPU sizes: SAXPY elements (256 MiB per array) and the matmul's n (n x n times n x n).
GPU_SAXPY_N = 1 << 26
GPU_MATMUL_N = 4096
#: CPU sizes: SAXPY as on the GPU (256 MiB per array, beyond any CPU cache); a naive triple loop at 512^3
#: takes about a second on one core.
CPU_SAXPY_N = 1 << 26
CPU_MATMUL_N = 512
#: The model name of the host copy ceiling's row in :func:`cpu_table` (kernel ``"copy"``).
HOST_COPY_MODEL = "host copy (STREAM)"
#: Relative error (Frobenius) a float32 product must stay within (chapter 5's bound).
MATMUL_TOLERANCE = mm.RELATIVE_TOLERANCE


def cpu_name() -> str:
    """The host CPU's model name and thread count, e.g. ``AMD EPYC 9654 (16 threads)``."""
    return f"{cpu_model()} ({os.cpu_count()} threads)"


def _row(machine: str, device: str, kernel: str, model: str, size: str, t: Timing | None, *, nbytes=None,
         flops=None, ms: Sequence[float] | None = None, clock: str | None = None, status: str = "ok") -> dict:
    times = list(ms) if ms is not None else (list(t.times_ms) if t is not None and t.times_ms else [])
    clock = clock or (t.clock if t is not None else "")
    med = statistics.median(times) if times else float("nan")
    return {"machine": machine, "device": device, "kernel": kernel, "model": model, "size": size, "median_ms": med,
            "min_ms": min(times) if times else float("nan"),
            "gbps": nbytes / (med * 1e-3) / 1e9 if nbytes and times else float("nan"),
            "gflops": flops / (med * 1e-3) / 1e9 if flops and times else float("nan"),
            "clock": clock if times else "", "status": status}


def _relative_error(c, a, b) -> float:
    return mm.relative_error(c, a, b)


def _check_matmul(name: str, c, a, b) -> None:
    err = _relative_error(c, a, b)
    if not (np.isfinite(err) and err <= MATMUL_TOLERANCE):
        raise AssertionError(f"{name}: relative error {err:.2e} against a float64 product (bound {MATMUL_TOLERANCE})")


def _check_saxpy(name: str, got, expected) -> None:
    got = np.asarray(got)
    if not np.allclose(got, expected, rtol=1e-6, atol=1e-6):
        bad = int(np.count_nonzero(~np.isclose(got, expected, rtol=1e-6, atol=1e-6)))
        raise AssertionError(f"{name}: {bad} of {got.size} SAXPY results differ from NumPy")


# -------------------------------------------------------------------------------------------- OpenCL timing


def opencl_time(kind: str, program_name: str, kernel_name: str, args: Sequence, global_size: tuple, local_size: tuple,
                *, warmup: int = 2, repeat: int = 10, tile: int = pt.TILE) -> list[float]:
    """Times in ms of ``repeat`` launches of an OpenCL kernel, from the queue's profiling events (device time)."""
    cl = pt.opencl_module()
    target = pt.opencl_target(kind)
    kernel = cl.Kernel(pt.opencl_program(program_name, kind, tile), kernel_name)
    kernel.set_args(*args)
    for _ in range(warmup):
        cl.enqueue_nd_range_kernel(target.queue, kernel, global_size, local_size)
    target.queue.finish()
    times = []
    for _ in range(repeat):
        ev = cl.enqueue_nd_range_kernel(target.queue, kernel, global_size, local_size)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    return times


def _opencl_saxpy(kind: str, a: float, x: np.ndarray, y: np.ndarray, repeat: int) -> tuple[np.ndarray, list[float]]:
    """Check ``saxpy.cl`` on ``kind`` against NumPy (one launch), then time ``repeat`` launches."""
    cl = pt.opencl_module()
    target = pt.opencl_target(kind)
    mf = cl.mem_flags
    n = x.size
    x_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    y_b = cl.Buffer(target.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y)
    gs, ls = (pt.global_size(n, pt.SAXPY_THREADS),), (pt.SAXPY_THREADS,)
    args = (np.int32(n), np.float32(a), x_b, y_b)
    opencl_time(kind, "saxpy.cl", "saxpy", args, gs, ls, warmup=0, repeat=1)
    got = np.empty_like(y)
    cl.enqueue_copy(target.queue, got, y_b)
    target.queue.finish()
    _check_saxpy(f"OpenCL SAXPY on {target.name}", got, pt.saxpy_reference(a, x, y))
    times = opencl_time(kind, "saxpy.cl", "saxpy", args, gs, ls, repeat=repeat)
    return got, times


def _opencl_matmul(kind: str, A: np.ndarray, B: np.ndarray, repeat: int) -> list[float]:
    cl = pt.opencl_module()
    target = pt.opencl_target(kind)
    mf = cl.mem_flags
    m, k = A.shape
    n = B.shape[1]
    A_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A)
    B_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=B)
    C = np.empty((m, n), np.float32)
    C_b = cl.Buffer(target.context, mf.WRITE_ONLY, C.nbytes)
    t = pt.TILE
    gs, ls = (pt.global_size(n, t), pt.global_size(m, t)), (t, t)
    args = (np.int32(m), np.int32(k), np.int32(n), A_b, B_b, C_b)
    opencl_time(kind, "matmul_tiled.cl", "matmul_tiled", args, gs, ls, warmup=0, repeat=1)
    cl.enqueue_copy(target.queue, C, C_b)
    target.queue.finish()
    _check_matmul(f"OpenCL tiled matmul on {target.name}", C, A, B)
    return opencl_time(kind, "matmul_tiled.cl", "matmul_tiled", args, gs, ls, warmup=1, repeat=repeat)


# ------------------------------------------------------------------------------------------------ the GPU


def gpu_table(saxpy_n: int = GPU_SAXPY_N, matmul_n: int = GPU_MATMUL_N, *, repeat: int = 20,
              matmul_repeat: int = 10, opencl: bool = True) -> pd.DataFrame:
    """SAXPY and the tiled matmul in every GPU model, a copy and cuBLAS, all in one run. GPU only.

    Rows (``kernel`` / ``model``): ``saxpy`` / ``Numba``, ``CUDA C``, ``OpenCL C`` (NVIDIA's driver, when
    installed: otherwise a row with ``status`` saying why), ``copy`` (CuPy device-to-device copy of one
    array, bytes read + written); ``matmul`` / ``Numba`` (chapter 5's tiled kernel, tile 16), ``CUDA C``,
    ``OpenCL C``, ``cuBLAS``. SAXPY's ``gbps`` counts 12 bytes per element.
    """
    backend.require_gpu("gpu_table", needs_cupy=True)

    gpu = device_mod.device_info().name
    machine = f"GPU: {gpu}"
    rows = []
    rng = np.random.default_rng(0)
    a = 2.5
    x = rng.random(saxpy_n, dtype=np.float32)
    y = rng.random(saxpy_n, dtype=np.float32)
    expected = pt.saxpy_reference(a, x, y)
    size = f"n = 2^{int(np.log2(saxpy_n))}" if saxpy_n & (saxpy_n - 1) == 0 else f"n = {saxpy_n}"
    nbytes, flops = pt.saxpy_bytes(saxpy_n), pt.saxpy_flops(saxpy_n)
    threads = pt.SAXPY_THREADS
    blocks = blocks_for(saxpy_n, threads)

    # Numba
    x_d, y_d = cuda.to_device(x), cuda.to_device(y)
    pt.saxpy_numba[blocks, threads](np.float32(a), x_d, y_d)
    _check_saxpy("Numba SAXPY", y_d.copy_to_host(), expected)
    t = benchmark(lambda: pt.saxpy_numba[blocks, threads](np.float32(a), x_d, y_d), nbytes=nbytes, flops=flops,
                  repeat=repeat, label="Numba saxpy")
    rows.append(_row(machine, gpu, "saxpy", "Numba", size, t, nbytes=nbytes, flops=flops))
    del x_d, y_d

    # CUDA C
    fn = pt.cuda_c_function("saxpy.cu", "saxpy")
    xc, yc = cp.asarray(x), cp.asarray(y)
    fn((blocks,), (threads,), (np.int32(saxpy_n), np.float32(a), xc, yc))
    _check_saxpy("CUDA C SAXPY", cp.asnumpy(yc), expected)
    t = benchmark(lambda: fn((blocks,), (threads,), (np.int32(saxpy_n), np.float32(a), xc, yc)), nbytes=nbytes,
                  flops=flops, repeat=repeat, label="CUDA C saxpy")
    rows.append(_row(machine, gpu, "saxpy", "CUDA C", size, t, nbytes=nbytes, flops=flops))

    # the copy of one array (bytes read + written), same run
    t = time_copy(xc, repeat=repeat)
    rows.append(_row(machine, gpu, "copy", "copy (CuPy, D2D)", size, t, nbytes=t.nbytes))
    del xc, yc

    # OpenCL on NVIDIA's driver
    ocl_device = ""
    if opencl:
        try:
            ocl_device = pt.opencl_target("gpu").name
            _, ms = _opencl_saxpy("gpu", a, x, y, repeat)
            rows.append(_row(machine, ocl_device, "saxpy", "OpenCL C", size, None, nbytes=nbytes, flops=flops, ms=ms,
                             clock="opencl-events"))
        except pt.ToolMissing as exc:
            rows.append(_row(machine, "", "saxpy", "OpenCL C", size, None, status=f"not run: {exc}"))

    # matmul
    n = matmul_n
    A = rng.random((n, n), dtype=np.float32)
    B = rng.random((n, n), dtype=np.float32)
    msize = f"{n} x {n} x {n}"
    mflops = pt.matmul_flops(n, n, n)
    A_d, B_d = cp.asarray(A), cp.asarray(B)
    C_d = cp.empty((n, n), dtype=cp.float32)
    p = mm.plan("tiled", n, n, n, tile=pt.TILE)
    An, Bn, Cn = cuda.as_cuda_array(A_d), cuda.as_cuda_array(B_d), cuda.as_cuda_array(C_d)
    p.launch(An, Bn, Cn)
    _check_matmul("Numba tiled matmul", cp.asnumpy(C_d), A, B)
    t = benchmark(lambda: p.launch(An, Bn, Cn), flops=mflops, repeat=matmul_repeat, label="Numba tiled")
    rows.append(_row(machine, gpu, "matmul", "Numba", msize, t, flops=mflops))

    mfn = pt.cuda_c_function("matmul_tiled.cu", "matmul_tiled", pt.TILE)
    grid, block = (blocks_for(n, pt.TILE), blocks_for(n, pt.TILE)), (pt.TILE, pt.TILE)
    margs = (np.int32(n), np.int32(n), np.int32(n), A_d, B_d, C_d)
    C_d.fill(cp.nan)
    mfn(grid, block, margs)
    _check_matmul("CUDA C tiled matmul", cp.asnumpy(C_d), A, B)
    t = benchmark(lambda: mfn(grid, block, margs), flops=mflops, repeat=matmul_repeat, label="CUDA C tiled")
    rows.append(_row(machine, gpu, "matmul", "CUDA C", msize, t, flops=mflops))

    C_d.fill(cp.nan)
    cp.matmul(A_d, B_d, out=C_d)
    _check_matmul("cuBLAS", cp.asnumpy(C_d), A, B)
    t = benchmark(lambda: cp.matmul(A_d, B_d, out=C_d), flops=mflops, repeat=matmul_repeat, label="cuBLAS")
    rows.append(_row(machine, gpu, "matmul", "cuBLAS", msize, t, flops=mflops))
    del A_d, B_d, C_d

    if opencl:
        try:
            ms = _opencl_matmul("gpu", A, B, matmul_repeat)
            rows.append(_row(machine, ocl_device, "matmul", "OpenCL C", msize, None, flops=mflops, ms=ms,
                             clock="opencl-events"))
        except pt.ToolMissing as exc:
            rows.append(_row(machine, "", "matmul", "OpenCL C", msize, None, status=f"not run: {exc}"))
    return pd.DataFrame(rows, columns=list(COLUMNS))


# ------------------------------------------------------------------------------------------------ the CPU


def serial_c(name: str) -> pt.CompiledC:
    """Listing ``name`` compiled as plain C, ``-O3`` without ``-fopenacc`` (GCC ignores the directives)."""
    return pt.compile_c(pt.listing(name), ("-O3", "-shared", "-fPIC"), name)


def cpu_table(saxpy_n: int = CPU_SAXPY_N, matmul_n: int = CPU_MATMUL_N, *, repeat: int = 5,
              matmul_repeat: int = 3, models: Sequence[str] | None = None,
              copy_bytes: int = HOST_COPY_BYTES) -> pd.DataFrame:
    """SAXPY and matmul on the host CPU in each model, with the host copy and NumPy as yardsticks. Any machine.

    Models: ``NumPy`` (``y += a * x`` through a temporary; ``@`` is BLAS), ``Numba CPU`` (``parallel=True``
    on every Numba thread, its ``device`` says how many: the CPU's best SAXPY), ``OpenCL C`` (PoCL or another
    CPU driver: profiling events; a row saying why when missing), ``OpenACC C`` (``gcc -fopenacc``, host
    fallback), ``C -O3`` (the same file without ``-fopenacc``), and ``host copy``: the row ``kernel="copy"``,
    ``model=HOST_COPY_MODEL``, the host memory ceiling over ``copy_bytes`` buffers
    (:func:`~labhelpers.roofline.measure_host_bandwidth`: the fastest of several copies and an in-place add
    ``y += x``, which like SAXPY's ``y = a x + y`` reads every line it writes; bytes read + written, STREAM's
    best rate; ``device`` names the stream that won), SAXPY's memory ceiling on the CPU. Host-clock times include no copies: the data stays in host memory throughout.
    """
    wanted = tuple(models) if models is not None else ("NumPy", "Numba CPU", "OpenCL C", "OpenACC C", "C -O3",
                                                       "host copy")
    machine = f"CPU: {cpu_name()}"
    rows = []
    rng = np.random.default_rng(1)
    a = 2.5
    n = saxpy_n
    x = rng.random(n, dtype=np.float32)
    y0 = rng.random(n, dtype=np.float32)
    expected = pt.saxpy_reference(a, x, y0)
    size = f"n = 2^{int(np.log2(n))}" if n & (n - 1) == 0 else f"n = {n}"
    nbytes, flops = pt.saxpy_bytes(n), pt.saxpy_flops(n)
    cpu = machine[5:]
    numba_device = f"{cpu}, Numba {host_cpu().numba_threads} threads"

    def host(model: str, fn: Callable[[np.ndarray], None], device: str = cpu) -> None:
        y = y0.copy()
        fn(y)
        _check_saxpy(f"{model} SAXPY", y, expected)
        t = wall_time(lambda: fn(y), warmup=1, repeat=repeat, nbytes=nbytes, flops=flops, label=model)
        rows.append(_row(machine, device, "saxpy", model, size, t, nbytes=nbytes, flops=flops, clock="host-clock"))

    a32 = np.float32(a)
    if "NumPy" in wanted:
        host("NumPy", lambda y: np.add(y, a32 * x, out=y))
    if "Numba CPU" in wanted:
        host("Numba CPU", lambda y: pt.saxpy_cpu(a32, x, y), device=numba_device)
    if "host copy" in wanted:
        ceiling = measure_host_bandwidth(copy_bytes)
        best = max(ceiling.tried, key=lambda r: r["gbps"])
        rows.append(_row(machine, f"{cpu}, {best['threads']} threads, best stream: {best['kernel']}", "copy",
                         HOST_COPY_MODEL, f"{copy_bytes / 2**20:,.0f} MiB", None, nbytes=best["nbytes"],
                         ms=[best["min_ms"]], clock="host-clock"))  # the ceiling's best rate (STREAM's)
    if "OpenCL C" in wanted:
        try:
            dev = pt.opencl_target("cpu").name
            _, ms = _opencl_saxpy("cpu", a, x, y0.copy(), repeat)
            rows.append(_row(machine, dev, "saxpy", "OpenCL C", size, None, nbytes=nbytes, flops=flops, ms=ms,
                             clock="opencl-events"))
        except pt.ToolMissing as exc:
            rows.append(_row(machine, "", "saxpy", "OpenCL C", size, None, status=f"not run: {exc}"))
    saxpy_args = [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p]
    for model, lib in (("OpenACC C", lambda: pt.compile_listing("saxpy_acc.c")), ("C -O3", lambda: serial_c("saxpy_acc.c"))):
        if model in wanted:
            try:
                f = lib().function("saxpy", saxpy_args)
                host(model, lambda y, f=f: f(n, a, x.ctypes.data, y.ctypes.data), device=f"{cpu}, one thread")
            except (pt.ToolMissing, pt.BuildError) as exc:
                rows.append(_row(machine, "", "saxpy", model, size, None, status=f"not run: {exc}"))

    m = matmul_n
    A = rng.random((m, m), dtype=np.float32)
    B = rng.random((m, m), dtype=np.float32)
    msize = f"{m} x {m} x {m}"
    mflops = pt.matmul_flops(m, m, m)

    def host_mm(model: str, fn: Callable[[np.ndarray], None], device: str = cpu) -> None:
        C = np.full((m, m), np.nan, np.float32)
        fn(C)
        _check_matmul(f"{model} matmul", C, A, B)
        t = wall_time(lambda: fn(C), warmup=0, repeat=matmul_repeat, flops=mflops, label=model)
        rows.append(_row(machine, device, "matmul", model, msize, t, flops=mflops, clock="host-clock"))

    if "NumPy" in wanted:
        host_mm("NumPy", lambda C: np.matmul(A, B, out=C))
    if "Numba CPU" in wanted:
        host_mm("Numba CPU", lambda C: pt.matmul_cpu(A, B, C), device=numba_device)
    if "OpenCL C" in wanted:
        try:
            dev = pt.opencl_target("cpu").name
            ms = _opencl_matmul("cpu", A, B, matmul_repeat)
            rows.append(_row(machine, dev, "matmul", "OpenCL C", msize, None, flops=mflops, ms=ms,
                             clock="opencl-events"))
        except pt.ToolMissing as exc:
            rows.append(_row(machine, "", "matmul", "OpenCL C", msize, None, status=f"not run: {exc}"))
    mm_args = [ctypes.c_int] * 3 + [ctypes.c_void_p] * 3
    for model, lib, fname in (("OpenACC C", lambda: pt.compile_listing("matmul_acc.c"), "matmul_collapse"),
                              ("C -O3", lambda: serial_c("matmul_acc.c"), "matmul_serial")):
        if model in wanted:
            try:
                f = lib().function(fname, mm_args)
                host_mm(model, lambda C, f=f: f(m, m, m, A.ctypes.data, B.ctypes.data, C.ctypes.data),
                        device=f"{cpu}, one thread")
            except (pt.ToolMissing, pt.BuildError) as exc:
                rows.append(_row(machine, "", "matmul", model, msize, None, status=f"not run: {exc}"))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def directives_table(saxpy_n: int = CPU_SAXPY_N, matmul_n: int = CPU_MATMUL_N, *, repeat: int = 3) -> pd.DataFrame:
    """Every function of ``saxpy_acc.c`` and ``matmul_acc.c`` timed on the host (gcc -fopenacc), checked first.

    Columns: ``listing``, ``version``, ``directive`` (what the version adds), ``parallelism`` (GCC's report
    for its loops), ``median_ms``, ``gbps`` or ``gflops``, ``machine``. On the host fallback every version
    runs in one thread, so the times should agree: the directives change where code may run, not this
    compiler's host code.
    """
    machine = f"CPU: {cpu_name()}"
    rng = np.random.default_rng(2)
    rows = []
    x = rng.random(saxpy_n, dtype=np.float32)
    y0 = rng.random(saxpy_n, dtype=np.float32)
    expected = pt.saxpy_twice_reference(2.0, 3.0, x, y0)
    report = pt.openacc_report("saxpy_acc.c")
    what = {"naive": "no directive", "kernels": "kernels", "parallel": "parallel loop (x2)",
            "data": "data region + parallel loop present (x2)"}
    lib = pt.compile_listing("saxpy_acc.c")
    for v in pt.ACC_SAXPY_VERSIONS:
        f = lib.function(f"saxpy_{v}", [ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_void_p,
                                        ctypes.c_void_p])
        y = y0.copy()
        f(saxpy_n, 2.0, 3.0, x.ctypes.data, y.ctypes.data)
        _check_saxpy(f"saxpy_{v}", y, expected)
        t = wall_time(lambda f=f, y=y: f(saxpy_n, 2.0, 3.0, x.ctypes.data, y.ctypes.data), warmup=1, repeat=repeat,
                      nbytes=2 * pt.saxpy_bytes(saxpy_n), flops=2 * pt.saxpy_flops(saxpy_n))
        par = report.loc[report["function"] == f"saxpy_{v}", "parallelism"].tolist()
        rows.append({"listing": "saxpy_acc.c", "version": v, "directive": what[v],
                     "parallelism": ", ".join(par) or "(no OpenACC loop)", "median_ms": t.median_ms,
                     "gbps": t.gbps, "gflops": float("nan"), "machine": machine})
    m = matmul_n
    A = rng.random((m, m), dtype=np.float32)
    B = rng.random((m, m), dtype=np.float32)
    report = pt.openacc_report("matmul_acc.c")
    what = {"serial": "no directive", "parallel": "parallel loop (rows)", "collapse": "parallel loop collapse(2)",
            "gang_vector": "loop gang (rows) + loop vector (columns)", "kernels": "kernels"}
    lib = pt.compile_listing("matmul_acc.c")
    for v in pt.ACC_MATMUL_VERSIONS:
        f = lib.function(f"matmul_{v}", [ctypes.c_int] * 3 + [ctypes.c_void_p] * 3)
        C = np.full((m, m), np.nan, np.float32)
        f(m, m, m, A.ctypes.data, B.ctypes.data, C.ctypes.data)
        _check_matmul(f"matmul_{v}", C, A, B)
        t = wall_time(lambda f=f, C=C: f(m, m, m, A.ctypes.data, B.ctypes.data, C.ctypes.data), warmup=0,
                      repeat=repeat, flops=pt.matmul_flops(m, m, m))
        par = report.loc[report["function"] == f"matmul_{v}", "parallelism"].tolist()
        rows.append({"listing": "matmul_acc.c", "version": v, "directive": what[v],
                     "parallelism": ", ".join(par) or "(no OpenACC loop)", "median_ms": t.median_ms,
                     "gbps": float("nan"), "gflops": t.gflops, "machine": machine})
    return pd.DataFrame(rows)


def data_clause_table(n: int = GPU_SAXPY_N, *, repeat: int = 5) -> pd.DataFrame:
    """What the data clauses of the four SAXPY versions cost on a GPU, done by hand with CuPy. GPU only.

    For each version, the copies its clauses ask for (:func:`~labhelpers.kernels.portability.acc_transfers`)
    from and to pageable host arrays, around CUDA C's SAXPY (two launches), timed with the host clock after a
    synchronisation: ``naive`` is the serial C on the host; ``parallel`` copies x and y in and y out around
    each of its two loops; ``data`` and ``kernels`` once around both. The result is checked each time.
    """
    backend.require_gpu("data_clause_table", needs_cupy=True)

    machine = f"GPU: {device_mod.device_info().name}"
    rng = np.random.default_rng(3)
    x = rng.random(n, dtype=np.float32)
    y0 = rng.random(n, dtype=np.float32)
    expected = pt.saxpy_twice_reference(2.0, 3.0, x, y0)
    fn = pt.cuda_c_function("saxpy.cu", "saxpy")
    blocks, threads = (blocks_for(n, pt.SAXPY_THREADS),), (pt.SAXPY_THREADS,)

    def launch(a, xd, yd):
        fn(blocks, threads, (np.int32(n), np.float32(a), xd, yd))

    def region(y: np.ndarray, coeffs) -> None:  # copyin(x) copy(y) around the loops of one region
        xd, yd = cp.asarray(x), cp.asarray(y)
        for a in coeffs:
            launch(a, xd, yd)
        yd.get(out=y)

    serial = serial_c("saxpy_acc.c").function("saxpy_naive", [ctypes.c_int, ctypes.c_float, ctypes.c_float,
                                                               ctypes.c_void_p, ctypes.c_void_p])
    versions = {
        "naive": lambda y: serial(n, 2.0, 3.0, x.ctypes.data, y.ctypes.data),
        "parallel": lambda y: (region(y, (2.0,)), region(y, (3.0,))),
        "data": lambda y: region(y, (2.0, 3.0)),
        "kernels": lambda y: region(y, (2.0, 3.0)),
    }
    rows = []
    for v, work in versions.items():
        y = y0.copy()
        work(y)
        cp.cuda.Device().synchronize()
        _check_saxpy(f"{v} (data clauses by hand)", y, expected)

        def timed(work=work):
            y = y0.copy()
            work(y)
            cp.cuda.Device().synchronize()

        t = wall_time(timed, warmup=1, repeat=repeat)
        moved = pt.acc_transfers(v, n)
        rows.append({"version": v, "h2d_copies": moved["h2d_copies"], "d2h_copies": moved["d2h_copies"],
                     "transfer_mb": moved["bytes"] / 1e6, "median_ms": t.median_ms, "min_ms": t.min_ms,
                     "where": "host CPU, serial C" if v == "naive" else "GPU, CUDA C with the clauses' copies",
                     "machine": machine})
    return pd.DataFrame(rows)


__all__ = ["COLUMNS", "cpu_name", "cpu_table", "data_clause_table", "directives_table", "gpu_table", "opencl_time",
           "serial_c"]
