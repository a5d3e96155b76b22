"""Chapter 3, the memory hierarchy: reference tables for the chapter, and the benchmark rows.

``collect(out_dir)`` measures every table the chapter plots (each one is the output of the
same sweep function the notebook calls live) and stores them as ``ch03_*`` reference data,
with the GPU's memory properties in the metadata (``meta["device"]``) so that the chapter
can describe the reference GPU's hierarchy without one. About half a minute of GPU time,
plus compilation; the pointer chase caps its loads per point (8192 timed, 2**19 warm-up).

``bench(ctx)`` returns the rows of the benchmark report:

* the coalesced copy (offset 0, stride 1) as a fraction of the device-to-device copy ceiling,
  with the offset-1 and stride-2 copies beside it;
* host-to-device and device-to-host transfers of 256 MiB, pinned and pageable, each as a
  fraction of the best transfer measured in the same run.
"""

from __future__ import annotations

from common import Context, Row, lh  # noqa: F401  (common puts src/ on the path and asks for a GPU)

from labhelpers.experiments import memory as mem_exp
from labhelpers.kernels import memory as mem
from labhelpers.launch import launch_1d
from labhelpers.refdata import current_meta, save_reference

TOPIC = "memory"
COPY_N = 2**26  # 256 MiB per array: far beyond any L2
TRANSFER_BYTES = 256 * 2**20


def _meta() -> dict:
    meta = current_meta()
    meta["device"] = mem_exp.device_properties()
    return meta


def collect(out_dir: str) -> None:
    """Measure and save the chapter's reference tables into ``out_dir``."""
    meta = _meta()
    tables = {
        "ch03_coalescing_offset": lambda: mem_exp.coalescing_sweep("offset", progress=False),
        "ch03_coalescing_stride": lambda: mem_exp.coalescing_sweep("stride", progress=False),
        "ch03_bank_conflicts": lambda: mem_exp.bank_conflict_sweep(progress=False),
        "ch03_pointer_chase": lambda: mem_exp.pointer_chase_sweep(progress=False),
        "ch03_constant_memory": lambda: mem_exp.constant_sweep(progress=False),
        "ch03_transfers": lambda: mem_exp.transfer_sweep(progress=False),
        "ch03_resource_usage": mem_exp.resource_table,
    }
    for name, measure in tables.items():
        save_reference(name, measure(), out_dir, meta=meta)


def _copy_gbps(src_d, dst_d, offset: int, stride: int) -> float:
    launch = launch_1d(COPY_N, 256)
    timing = lh.benchmark(lambda: mem.offset_stride_copy[launch.blocks, launch.threads](src_d, dst_d, COPY_N, offset,
                                                                                        stride),
                          nbytes=2 * COPY_N * 4, repeat=30, number=3, label=f"copy offset={offset} stride={stride}")
    return timing.gbps


def bench(ctx: Context) -> list[Row]:
    """Benchmark rows: coalesced copy against the copy ceiling, transfers against the best transfer."""
    from numba import cuda
    import numpy as np

    ceiling = ctx.copy_bandwidth_gbs()
    size = mem.copy_footprint(COPY_N, 1, 2)
    src_d = cuda.device_array(size, dtype=np.float32)
    dst_d = cuda.device_array(size, dtype=np.float32)
    rows = []
    for offset, stride, name in [(0, 1, "coalesced copy (offset 0, stride 1)"), (1, 1, "copy, offset 1"),
                                 (0, 2, "copy, stride 2")]:
        rows.append(Row(TOPIC, name, "2^26 fp32", _copy_gbps(src_d, dst_d, offset, stride), "GB/s",
                        "CuPy device copy", ceiling))
    del src_d, dst_d

    transfers = mem_exp.transfer_sweep([TRANSFER_BYTES], progress=False)
    best = float(transfers["gbps"].max())
    for _, t in transfers.sort_values(["host_memory", "direction"], ascending=[False, False]).iterrows():
        rows.append(Row(TOPIC, f"{t['transfer']} transfer", "256 MiB", float(t["gbps"]), "GB/s",
                        "best transfer this run", best))
    return rows
