"""Quick check of labhelpers on a real GPU: banner, properties, self-test, one timed kernel, the copy ceiling.

Usage: python tools/gpu_smoke.py   (needs a CUDA GPU; exits 2 without one)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LABHELPERS_BACKEND", "gpu")

import numpy as np  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers.kernels import cuda_intro as intro  # noqa: E402


def main() -> int:
    lh.setup()
    info = lh.device_info()
    for key, value in info.as_dict().items():
        print(f"  {key}: {value}")
    print(f"  peak memory bandwidth (clock x bus): {info.peak_memory_bandwidth_gbs}")
    n = 2**26
    x = lh.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    y = lh.to_device(np.ones(n, dtype=np.float32))
    out = lh.to_device(np.zeros(n, dtype=np.float32))
    launch = lh.launch_1d(n, 256)
    t = lh.benchmark(lambda: intro.saxpy[launch.blocks, launch.threads](np.float32(2.0), x, y, out),
                     nbytes=intro.saxpy_bytes(n), flops=intro.saxpy_flops(n), label="saxpy 2^26")
    print(t)
    host = out.copy_to_host()
    print("saxpy correct:", np.allclose(host, 2 * x.copy_to_host() + 1, rtol=1e-6))
    from labhelpers.xp import HAS_CUPY, xp

    print("cupy:", HAS_CUPY, getattr(xp, "__version__", ""))
    if HAS_CUPY:
        from labhelpers import roofline

        print(roofline.time_copy(xp.ones(2**28, dtype=xp.float32)))  # CuPy copies 1 GiB (read + write)
    table = lh.sweep(lambda threads: lh.benchmark(
        lambda: intro.saxpy[lh.blocks_for(n, threads), threads](np.float32(2.0), x, y, out),
        nbytes=intro.saxpy_bytes(n)),
        {"threads": [32, 128, 256, 1024, 2048]}, check=lambda threads: lh.check_launch(threads), progress=False)
    print(table[["threads", "gbps", "status", "reason"]].to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
