"""Chapter 1, "CUDA in Python": SAXPY three ways, and the GPU's properties.

``collect(out_dir)`` writes the chapter's reference tables:

* ``ch01_saxpy_three_ways``: SAXPY on 2^10..2^28 float32 elements, timed three ways (NumPy on the
  host; the GPU including host<->device transfers; the GPU kernel alone), columns ``n``, ``method``,
  ``median_ms``, ``min_ms``, ``spread``, ``gbps``, ``gflops``, ``status``, ``reason``.
* ``ch01_saxpy_kernels``: the chapter's two SAXPY kernels at 2^26 float32, GPU time only (``saxpy`` at
  128, 256 and 1024 threads, ``saxpy_vec4`` at 256), and the copy of the same run
  (``experiments.cuda_intro.saxpy_kernels``), columns ``kernel``, ``threads``, ``elements_per_thread``,
  ``blocks``, ``n``, ``median_ms``, ``gbps``, ``of_copy``, ``status``, ``how``.
* ``ch01_device_properties``: ``lh.device_info().as_dict()`` as a property/value table.

Each table is measured only when ``wanted`` (``LABHELPERS_COLLECT_ONLY``, ``bench/common.py``).

``bench(ctx)`` reports both kernels at 2^26 float32 in GB/s against the device-to-device copy measured in the
same run (the issue's yardstick: ``saxpy_vec4`` has the target 0.90 of it), and ``saxpy_vec4`` against the
device-memory ceiling of the same run (the fastest stream, copies and a triad: a correct kernel stays at or
below 1). Together they take well under a minute on an H100/H200 (the 2^28 points dominate: about 1 s of
NumPy and 0.3 s of PCIe per repetition).

Usage on a GPU machine: ``python bench/run_all.py --only cuda_intro [--collect DIR]``.
"""

from __future__ import annotations

from pathlib import Path


from common import Context, Row, wanted  # noqa: E402  (puts src/ on the path and asks for the GPU backend)

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
    """Measure and save ``ch01_saxpy_three_ways``, ``ch01_saxpy_kernels`` and ``ch01_device_properties``."""
    _require_gpu()
    if wanted("ch01_saxpy_three_ways"):
        table = intro.saxpy_three_ways(intro.SAXPY_SIZES, progress=False)
        bad = table[table["status"] != "ok"]
        if len(bad):
            raise RuntimeError(f"SAXPY sweep has untimed points:\n{bad}")
        save_reference("ch01_saxpy_three_ways", table, out_dir,
                       notes=f"SAXPY out = a*x + y, float32, 256 threads/block. gbps = {counts.saxpy_bytes(1)} n "
                             "bytes / median time for all three methods. host: NumPy timed with the host clock (one "
                             "core, preallocated output); GPU incl. transfers = cuda.to_device(x), cuda.to_device(y), "
                             "device_array, launch, copy_to_host into pageable memory, timed with CUDA events; GPU "
                             "kernel only = the launch on resident device arrays, CUDA events.")
    if wanted("ch01_saxpy_kernels"):
        table = intro.saxpy_kernels(BENCH_N, repeat=50)
        save_reference("ch01_saxpy_kernels", table, out_dir,
                       notes=f"SAXPY out = a*x + y, 2^26 float32, gbps = {counts.saxpy_bytes(1)} n bytes / median GPU "
                             "time (lh.benchmark, stream held), every result checked bit for bit against saxpy at "
                             "256 threads first; saxpy: one element per thread; saxpy_vec4: one group of four per "
                             "thread, 16-byte loads and stores; last row: the copy yardstick of the same run "
                             "(roofline.measure_dram_bandwidth, best D2D copy of 1 GiB, bytes read + written); "
                             "of_copy = gbps / that copy.")
    if wanted("ch01_device_properties"):
        props = lh.device_info().as_table()
        save_reference("ch01_device_properties", props, out_dir,
                       notes="labhelpers.device_info().as_dict() plus peak_memory_bandwidth_gbs "
                             "(2 x memory clock x bus width).")


def bench(ctx: Context) -> list[Row]:
    """SAXPY at 2^26 float32 in GB/s (``counts.saxpy_bytes(n)`` / GPU time) against the copy and the DRAM ceiling.

    Rows: the chapter's ``saxpy`` (256 threads) and ``saxpy_vec4`` (256 threads, target 0.90) against the copy
    yardstick of the run (``ctx.copy_bandwidth_gbs()``); ``saxpy_vec4`` against the device-memory ceiling of
    the run (``ctx.dram_ceiling_gbs()``, the best of the copies and a triad), which it must not exceed.
    """
    _require_gpu()
    t = intro.saxpy_kernels(BENCH_N, (("saxpy", 256), ("saxpy_vec4", 256)), repeat=50, copy=False)
    gbps = dict(zip(t["kernel"], t["gbps"]))
    copy = ctx.copy_bandwidth_gbs()
    size = "2^26 float32"
    return [
        Row(topic=TOPIC, kernel="saxpy (1 element/thread, GPU time)", size=size, value=gbps["saxpy"],
            unit="GB/s", ceiling_name="D2D copy (yardstick), same run", ceiling=copy),
        Row(topic=TOPIC, kernel="saxpy_vec4 (4 elements/thread)", size=size, value=gbps["saxpy_vec4"],
            unit="GB/s", ceiling_name="D2D copy (yardstick), same run", ceiling=copy, target=0.90),
        Row(topic=TOPIC, kernel="saxpy_vec4 (4 elements/thread)", size=size, value=gbps["saxpy_vec4"],
            unit="GB/s", ceiling_name="DRAM ceiling (best stream: copies, triad), same run",
            ceiling=ctx.dram_ceiling_gbs()),
    ]
