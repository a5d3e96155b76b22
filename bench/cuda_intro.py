"""Chapter 1, "CUDA in Python": SAXPY three ways, and the GPU's properties.

``collect(out_dir)`` writes the chapter's reference tables:

* ``ch01_saxpy_three_ways``: SAXPY on 2^10..2^28 float32 elements, timed three ways (NumPy on the
  host; the GPU including host<->device transfers; the GPU kernel alone), columns ``n``, ``method``,
  ``median_ms``, ``min_ms``, ``spread``, ``gbps``, ``gflops``, ``status``, ``reason``.
* ``ch01_device_properties``: ``lh.device_info().as_dict()`` as a property/value table.

``bench(ctx)`` reports the kernel-only SAXPY at 2^26 float32 in GB/s against the device-to-device
copy bandwidth measured in the same run. Together they take well under a minute on an H100/H200
(the 2^28 points dominate: about 1 s of NumPy and 0.3 s of PCIe per repetition).

Usage on a GPU machine: ``python bench/run_all.py --only cuda_intro [--collect DIR]``.
"""

from __future__ import annotations

from pathlib import Path


from common import Context, Row  # noqa: E402  (puts src/ on the path and asks for the GPU backend)

import labhelpers as lh  # noqa: E402
from labhelpers import counts  # noqa: E402
from labhelpers.experiments import cuda_intro as intro  # noqa: E402
from labhelpers.refdata import save_reference  # noqa: E402

TOPIC = "cuda_intro"
BENCH_N = 2**26


def _require_gpu() -> None:
    if lh.is_simulator():
        raise RuntimeError("bench/cuda_intro.py measures a real GPU; the simulator has no timings to collect")


def collect(out_dir: str | Path) -> None:
    """Measure and save ``ch01_saxpy_three_ways`` and ``ch01_device_properties`` into ``out_dir``."""
    _require_gpu()
    table = intro.saxpy_three_ways(intro.SAXPY_SIZES, progress=False)
    bad = table[table["status"] != "ok"]
    if len(bad):
        raise RuntimeError(f"SAXPY sweep has untimed points:\n{bad}")
    save_reference("ch01_saxpy_three_ways", table, out_dir,
                   notes=f"SAXPY out = a*x + y, float32, 256 threads/block. gbps = {counts.saxpy_bytes(1)} n bytes "
                         "/ median time for all three methods. host: NumPy timed with the host clock (one core, preallocated output); "
                         "GPU incl. transfers = cuda.to_device(x), cuda.to_device(y), device_array, launch, "
                         "copy_to_host into pageable memory, timed with CUDA events; GPU kernel only = the launch "
                         "on resident device arrays, CUDA events.")
    props = lh.device_info().as_table()
    save_reference("ch01_device_properties", props, out_dir,
                   notes="labhelpers.device_info().as_dict() plus peak_memory_bandwidth_gbs "
                         "(2 x memory clock x bus width).")


def bench(ctx: Context) -> list[Row]:
    """SAXPY kernel only, 2^26 float32, in GB/s (``counts.saxpy_bytes(n)`` / time) against the CuPy copy bandwidth."""
    _require_gpu()
    timing = intro.time_saxpy(BENCH_N, intro.GPU_KERNEL_ONLY, repeat=50, clock="gpu")  # GPU time, stream held
    return [Row(topic=TOPIC, kernel="saxpy (numba, GPU time)", size="2^26 float32", value=timing.gbps,
                unit="GB/s", ceiling_name="CuPy D2D copy", ceiling=ctx.copy_bandwidth_gbs())]
