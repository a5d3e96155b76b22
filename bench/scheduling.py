"""Chapter 4 (scheduling: warps, divergence, occupancy) on the GPU: reference tables and benchmark rows.

``collect(out_dir)`` measures and saves the tables the chapter and its lab plot:

* ``ch04_divergence``: the five divergence kernels (time, and the SIMT model's serialized bodies);
* ``ch04_occupancy_throttle``: scale kernels (1 and 4 loads in flight per thread) with dynamic
  shared memory limiting the resident blocks per SM, 12.5% to 100% occupancy;
* ``ch04_block_size_sweep``: the same kernels for every block size from 32 to 1024;
* ``ch04_register_caps``: a kernel holding 16 float64 chains, compiled under several register caps
  (registers, spills, occupancy, GFLOP/s);
* ``ch04_occupancy_driver``: the occupancy calculator next to the driver's
  ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for the chapter's kernels.

``bench(ctx)`` returns rows: the best block size's bandwidth against the CuPy copy ceiling,
and the bandwidth of the throttled kernel at low and full occupancy. Together they take
well under a minute on an H100.
"""

from __future__ import annotations

import common  # noqa: F401  (puts src/ on the path and asks for the GPU backend)
from common import Context, Row

from labhelpers.experiments import scheduling
from labhelpers.refdata import save_reference

TOPIC = "scheduling"
#: Elements of the memory-bound kernels: 2**26 float32 (256 MiB per array, 512 MiB moved per call).
N_STREAM = 2**26
#: Elements and LCG steps of the divergence kernels: 2**22 threads, 131,072 warps.
N_DIVERGENCE = 2**22
DIVERGENCE_STEPS = 64
#: Elements and steps of the register-cap experiment (16 float64 chains per element).
N_REGISTERS = 2**24
REGISTER_STEPS = 64


def collect(out_dir: str) -> None:
    """Measure the chapter's tables on this GPU and save them into ``out_dir``."""
    table = scheduling.measure_divergence(N_DIVERGENCE, DIVERGENCE_STEPS, progress=False)
    save_reference("ch04_divergence", table, out_dir,
                   notes=f"{N_DIVERGENCE} int64 elements, {DIVERGENCE_STEPS} Park-Miller steps in the expensive "
                         "branch, 256 threads per block")
    table = scheduling.measure_throttle(N_STREAM, progress=False)
    save_reference("ch04_occupancy_throttle", table, out_dir,
                   notes=f"scale kernels on {N_STREAM} float32, {scheduling.THROTTLE_THREADS}-thread blocks, one full "
                         "wave; dynamic shared memory limits the resident blocks per SM")
    table = scheduling.measure_block_sizes(N_STREAM, progress=False)
    save_reference("ch04_block_size_sweep", table, out_dir,
                   notes=f"scale kernels on {N_STREAM} float32, one full wave of blocks, no extra shared memory")
    table = scheduling.measure_register_caps(N_REGISTERS, REGISTER_STEPS, progress=False)
    save_reference("ch04_register_caps", table, out_dir,
                   notes=f"sixteen_accumulators on {N_REGISTERS} float64, {REGISTER_STEPS} steps, 256 threads per "
                         "block, compiled with @cuda.jit(max_registers=...)")
    table = scheduling.compare_calculator_with_driver()
    save_reference("ch04_occupancy_driver", table, out_dir,
                   notes="labhelpers.models.occupancy against cuOccupancyMaxActiveBlocksPerMultiprocessor")


def bench(ctx: Context) -> list[Row]:
    """Best block size against the copy ceiling; throttled bandwidth at low and full occupancy."""
    ceiling = ctx.copy_bandwidth_gbs()
    rows = []
    sizes = scheduling.measure_block_sizes(N_STREAM, threads=(64, 128, 256, 512, 1024), progress=False)
    for ilp in (1, 4):
        ok = sizes[(sizes["ilp"] == ilp) & (sizes["status"] == "ok")]
        best = ok.loc[ok["gbps"].idxmax()]
        rows.append(Row(TOPIC, f"scale ilp{ilp}, best block ({int(best['threads'])})", "2^26 f32", float(best["gbps"]),
                        "GB/s", "cupy copy", ceiling))
    throttle = scheduling.measure_throttle(N_STREAM, blocks_per_sm=(8, scheduling.throttle_blocks()[-1]), progress=False)
    for _, r in throttle[throttle["status"] == "ok"].iterrows():
        rows.append(Row(TOPIC, f"scale ilp{int(r['ilp'])}, occupancy {r['occupancy']:.0%}", "2^26 f32",
                        float(r["gbps"]), "GB/s", "cupy copy", ceiling))
    return rows
