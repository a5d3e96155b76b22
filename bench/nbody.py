"""Chapter 8 (n-body) on the GPU: the tables the chapter plots, and the best kernel against the FP32 FMA peak.

``collect(out_dir)`` writes

* ``ch08_throughput``: every kernel of the chapter's sequence at n = 2^12 .. 2^18 (G interactions/s,
  GFLOP/s at 20 flops per interaction), with the FP32 FMA peak measured in the same run in its metadata;
* ``ch08_math_traps``: the tiled kernel with the four ways of writing ``1 / sqrt``, at n = 2^16;
* ``ch08_tuning``: tile size x bodies per thread at n = 2^18 (the best of them is the chapter's best kernel);
* ``ch08_cpu``: the CPU's best (the Numba float32 loop, ``parallel=True``, ``fastmath=True``, every thread,
  n = 2^12 .. 2^14), the same loop on one thread, and the NumPy float64 specification, on this machine's
  CPU; its metadata names the CPU, the usable CPUs and Numba's thread count and threading layer;
* ``ch08_alternatives``: the shared tile against the warp-shuffle broadcast and constant memory (n = 4096, 2^16, 2^18);
* ``ch08_instruction_mix``: instructions per interaction in each kernel's hot loop (PTX, and SASS where
  ``nvdisasm`` is installed).

``bench(ctx)`` returns, at n = 2^18: the best kernel's GFLOP/s against the FP32 FMA peak measured in
the same run (target 60%), every kernel of the sequence against the same peak, and the best kernel's
speedups over the naive kernel and over each CPU code (the CPU's best first), and the CPU loop's parallel
efficiency (its rate over the thread count times its one-thread rate).

Run: ``python bench/run_all.py --only nbody [--collect src/labhelpers/data/reference]``.
"""

from __future__ import annotations

import math
import os

import pandas as pd
from common import Row, lh  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers import counts, host
from labhelpers import roofline as rl
from labhelpers.experiments import nbody as ex
from labhelpers.kernels import nbody as nb
from labhelpers.refdata import current_meta, save_reference

TOPIC = "nbody"
BENCH_N = 2**18
TARGET = 0.60
#: Measurements made by collect(), reused by bench() in the same run.
_measured: dict = {}


def _fma_peak():
    """The FP32 FMA peak (chapter 7's fma_chains), measured once per run."""
    if "fma" not in _measured:
        _measured["fma"] = rl.measure_fma_peak()
    return _measured["fma"]


def _table(name: str, build):
    if name not in _measured:
        _measured[name] = build()
    return _measured[name]


def _meta() -> dict:
    fma = _fma_peak()
    if "dram" not in _measured:
        _measured["dram"] = rl.measure_dram_bandwidth()
    dram = _measured["dram"]
    return {**current_meta(), "fp32_fma_peak_gflops": fma.value, "fp32_fma_peak_how": fma.how,
            "dram_gbs": dram.value, "dram_how": dram.how, "flops_per_interaction": counts.NBODY_FLOPS_PER_INTERACTION}


#: The tables collect() writes (names without the "ch08_" prefix).
TABLES = ("tuning", "throughput", "math_traps", "cpu", "instruction_mix", "alternatives")


def _wanted() -> set[str]:
    """The tables to collect: $NBODY_COLLECT (comma-separated, without "ch08_"), or all of them."""
    names = {n.strip().removeprefix("ch08_") for n in os.environ.get("NBODY_COLLECT", "").split(",") if n.strip()}
    unknown = names - set(TABLES)
    if unknown:
        raise ValueError(f"NBODY_COLLECT names unknown tables {sorted(unknown)}: choose from {', '.join(TABLES)}")
    return names or set(TABLES)


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (all, or those named in $NBODY_COLLECT)."""
    meta = _meta()
    wanted = _wanted()
    if wanted & {"tuning", "throughput"}:
        tuning = _table("tuning", ex.tuning_sweep)
        best = ex.best_config(tuning)
    else:
        best = nb.BEST
    if "tuning" in wanted:
        save_reference("ch08_tuning", tuning, out_dir, meta={**meta, "best": best.label},
                       notes="tiled kernel, unroll 4, random bodies in the unit cube, eps2 = 0.0025, CUDA events, "
                             "median of 3 launches after one warm-up, each checked against float64 NumPy first")
    ladder = {**ex.LADDER, f"best: {best.label}": best}
    if "throughput" in wanted:
        table = _table("throughput", lambda: ex.throughput_sweep(kernels=ladder, progress=True))
        save_reference("ch08_throughput", table, out_dir, meta={**meta, "best": best.label},
                       notes="one force evaluation per timing; ginteractions = n^2 / median time; gflops = "
                             f"{counts.NBODY_FLOPS_PER_INTERACTION} n^2 / "
                             "median time; every kernel checked against float64 NumPy before timing")
    if "math_traps" in wanted:
        save_reference("ch08_math_traps", _table("traps", ex.math_traps), out_dir, meta=meta,
                       notes=f"tiled 256, unroll 4, n = {ex.TRAP_SIZE}; slowdown = time / time of the rsqrt version")
    if "alternatives" in wanted:
        save_reference("ch08_alternatives", _table("alternatives", ex.alternatives_table), out_dir, meta=meta,
                       notes="AoS, rsqrt, eps2 = 0.0025; tiled 256 unroll 4 (shared tile) against naive unroll 4, the "
                             "warp-shuffle broadcast (256 threads) and constant memory (every body a source, only "
                             "n <= 4096 = 64 KiB); CUDA events; each kernel checked against float64 NumPy first")
    if "cpu" in wanted:
        cpu = _table("cpu", ex.cpu_rates)
        save_reference("ch08_cpu", cpu, out_dir, meta={**meta, **host.host_cpu().as_meta()},
                       notes="host clock (time.perf_counter), median of 5 calls after a warm-up (NumPy: 2); the "
                             "Numba loop (parallel=True, fastmath=True, float32) reads four contiguous arrays "
                             "(x, y, z, m) so that it vectorises, and is timed first, before NumPy's BLAS threads "
                             "run, on every Numba thread and on one; NumPy float64 builds (rows x n x 3) "
                             "temporaries in blocks of about 2^21 pairs")
    if "instruction_mix" in wanted:
        kernels = {**ladder, **{f"tiled 256, unroll 4, {k}": v for k, v in ex.MATH_TRAPS.items() if k != "rsqrt"}}
        save_reference("ch08_instruction_mix", _table("mix", lambda: ex.instruction_mix(kernels)), out_dir,
                       meta=meta, notes="hot loop = the longest innermost loop of the compiled kernel; interactions "
                                        "per trip = float32 subtractions / 3; sass_* columns from nvdisasm")


def bench(ctx) -> list[Row]:
    """The best kernel against the FMA peak (target 60%), the sequence, and the speedups."""
    fma = _fma_peak().value
    rows: list[Row] = []
    size = f"n=2^{int(math.log2(BENCH_N))}"
    tuning = _table("tuning", ex.tuning_sweep)
    best_cfg = ex.best_config(tuning)
    best = ex.time_config(best_cfg, BENCH_N)
    peak_name = "FP32 FMA peak, same run"
    rows.append(Row(TOPIC, f"best: {best_cfg.label}", size, best.gflops, "GFLOP/s", peak_name, fma, target=TARGET))
    throughput = _measured.get("throughput")
    if throughput is None:
        throughput = ex.throughput_sweep(sizes=(BENCH_N,))
    at_n = throughput[throughput["n"] == BENCH_N]
    for _, r in at_n.iterrows():
        rows.append(Row(TOPIC, f"  {r['kernel']}", size, float(r["gflops"]), "GFLOP/s", peak_name, fma))
    best_rate = counts.nbody_interactions(BENCH_N) / (best.median_ms * 1e-3) / 1e9
    naive = at_n[at_n["kernel"] == "naive, unroll 1"]
    if len(naive):
        rows.append(Row(TOPIC, "best vs naive (speedup)", size, best_rate, "Gint/s", "naive, unroll 1",
                        float(naive["ginteractions"].iloc[0])))
    cpu = _table("cpu", ex.cpu_rates)
    summary = ex.cpu_summary(cpu)
    rows.append(Row(TOPIC, "best vs CPU's best (speedup)", size, best_rate, "Gint/s",
                    f"{summary['best_kernel']}, same run", summary["best"]))
    for name, group in cpu.groupby("kernel", sort=False):
        if name == summary["best_kernel"]:
            continue
        rate = float(group["ginteractions"].max())
        rows.append(Row(TOPIC, "best vs CPU (speedup)", size, best_rate, "Gint/s", f"{name}, same run", rate))
    rows.append(Row(TOPIC, "CPU loop: parallel efficiency", f"{summary['threads']} threads", summary["best"],
                    "Gint/s", "threads x one-thread rate", summary["threads"] * summary["per_thread"]))
    return rows


if __name__ == "__main__":
    import sys

    from common import Context, report

    if len(sys.argv) > 1:
        collect(sys.argv[1])
    print(report(bench(Context())))
