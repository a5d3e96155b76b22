"""Which kernels chapter 10's yardstick runs: CUB's scan alone, then ``cupy.cumsum``, under a profiler. GPU only.

``labhelpers.experiments.scan.cub_scan`` (``cub::DeviceScan::InclusiveSum`` through CuPy's binding, in place)
should launch CUB's two kernels and nothing else: ``DeviceScanInitKernel`` (the tile states) and
``DeviceScanKernel`` (the single-pass scan). ``cupy.cumsum(x, out=out)`` launches an element-wise copy of
``x`` into ``out`` first (``cupy_copy``), then the same two kernels on ``out``. The profiled region holds
one call of each, in that order, each inside an NVTX range of its name; warm-up calls (compilation, CuPy's
memory pool) run before the region starts.

On the GPU machine (Nsight Compute; ``--profile-from-start off`` keeps only the region)::

    ncu --profile-from-start off --nvtx --metrics gpu__time_duration.sum python3 tools/profile_cub_scan.py

or, where Nsight Systems is installed::

    nsys profile --capture-range=cudaProfilerApi --stats=true python3 tools/profile_cub_scan.py

Expected: two kernels under ``cub_scan`` and three (``cupy_copy`` first) under ``cupy.cumsum``. The script
also prints each one's time (``lh.benchmark``, through the experiments' timers) beside the copy of the
same array: CUB's scan near the copy's time, ``cupy.cumsum`` near the copy plus the scan.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LABHELPERS_BACKEND", "gpu")

import labhelpers  # noqa: E402, F401  (first: chooses the backend before numba.cuda is imported)
from labhelpers.experiments import scan as ex  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=28, help="scan 2**LOG2N int32 values (default 28)")
    parser.add_argument("--no-timing", action="store_true", help="only the profiled calls, no lh.benchmark")
    args = parser.parse_args(argv)
    x = ex.random_values(2**args.log2n, np.int32)  # GPUOnlyError without a GPU and CuPy
    import cupy as cp  # present: random_values needed it
    from cupy.cuda import nvtx, runtime

    buf = x.copy()
    out = cp.empty_like(x)
    for _ in range(2):  # warm-up outside the profiled region
        ex.cub_scan(buf)
        cp.cumsum(x, dtype=x.dtype, out=out)
    cp.cuda.Device().synchronize()

    print(f"profiled region: 2^{args.log2n} int32; CuPy {cp.__version__}, accelerators {ex.cupy_accelerators()}",
          flush=True)
    runtime.profilerStart()  # ncu --profile-from-start off profiles from here...
    for name, call in (("cub_scan", lambda: ex.cub_scan(buf)),
                       ("cupy.cumsum", lambda: cp.cumsum(x, dtype=x.dtype, out=out))):
        print(f"-- {name}: one call (kernels profiled now belong to it)", flush=True)
        nvtx.RangePush(name)
        call()
        cp.cuda.Device().synchronize()
        nvtx.RangePop()
    runtime.profilerStop()  # ...to here
    print("end of the profiled region", flush=True)

    if not args.no_timing:
        copy = ex.time_copy(x)
        cub, ok = ex.time_cub_scan(x)
        cumsum = ex.time_cumsum(x)
        print(f"checked: CUB's scan equals cupy.cumsum: {ok}")
        for label, t in (("copy (read + write)", copy), ("CUB's scan", cub), ("cupy.cumsum", cumsum)):
            print(f"{label:22s} {t.median_ms:8.3f} ms  {t.gbps:8,.0f} GB/s (8 bytes per element)  "
                  f"{t.median_ms / copy.median_ms:5.2f} x the copy's time")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except labhelpers.GPUOnlyError as exc:
        sys.exit(f"profile_cub_scan.py runs on a GPU with CuPy: {exc}")
