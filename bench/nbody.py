"""Chapter 8 (n-body) on the GPU: the tables the chapter plots, and the best kernel against the FP32 FMA peak.

``collect(out_dir)`` writes

* ``ch08_throughput``: every kernel of the chapter's sequence (``experiments.nbody.sequence``: the ladder, the
  best tiled configuration, the stream-K kernel) at n = 2^12 .. 2^18 (G interactions/s, GFLOP/s at 20 flops per
  interaction), with the FP32 FMA peak measured in the same run in its metadata;
* ``ch08_math_traps``: the tiled kernel with the four ways of writing ``1 / sqrt``, at n = 2^16;
* ``ch08_tuning``: tile size x bodies per thread at n = 2^18 (the best of them is the chapter's best kernel);
* ``ch08_cpu``: the CPU's best (the Numba float32 loop, ``parallel=True``, ``fastmath=True``, every thread,
  n = 2^12 .. 2^14), the same loop on one thread, and the NumPy float64 specification, on this machine's
  CPU; its metadata names the CPU, the usable CPUs and Numba's thread count and threading layer;
* ``ch08_alternatives``: the shared tile against the warp-shuffle broadcast and constant memory (n = 4096, 2^16, 2^18);
* ``ch08_instruction_mix``: instructions per interaction in each kernel's hot loop (PTX, and SASS where
  ``nvdisasm`` is installed).

``bench(ctx)`` returns, at n = 2^18: the chapter's fastest kernel (stream-K) against the FP32 FMA peak measured
in the same run (target 72%, issue 33), the best tiled configuration against the same peak, every kernel of the
sequence, the best tiled kernel's speedups over the naive kernel and over each CPU code (the CPU's best first),
and the CPU loop's parallel efficiency (its rate over the thread count times its one-thread rate).

Run: ``python bench/run_all.py --only nbody [--collect src/labhelpers/data/reference]``; re-collect only some
tables with ``LABHELPERS_COLLECT_ONLY=ch08_throughput,...`` (``bench/common.py``'s ``wanted``).
"""

from __future__ import annotations

import math

from common import Row, lh, wanted  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers import counts, host
from labhelpers import roofline as rl
from labhelpers.experiments import nbody as ex
from labhelpers.kernels import nbody as nb
from labhelpers.refdata import current_meta, save_reference

TOPIC = "nbody"
BENCH_N = 2**18
#: The chapter's fastest kernel (stream-K) against the FP32 FMA peak of the same run: issue 33's target.
TARGET = 0.72
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


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (each one only if ``wanted("ch08_<name>")``).

    The best tiled configuration comes from the tuning sweep when ``ch08_tuning`` is collected, else it is
    :data:`~labhelpers.kernels.nbody.BEST` (which a test keeps equal to the stored sweep's best).
    """
    meta = _meta()
    best = nb.BEST
    if wanted("ch08_tuning"):
        tuning = _table("tuning", ex.tuning_sweep)
        best = ex.best_config(tuning)
        save_reference("ch08_tuning", tuning, out_dir, meta={**meta, "best": best.label},
                       notes="tiled kernel, unroll 4, random bodies in the unit cube, eps2 = 0.0025, CUDA events, "
                             "median of 3 launches after one warm-up, each checked against float64 NumPy first")
    ladder = ex.sequence(best)
    if wanted("ch08_throughput"):
        table = _table("throughput", lambda: ex.throughput_sweep(kernels=ladder, progress=True))
        save_reference("ch08_throughput", table, out_dir, meta={**meta, "best": best.label,
                                                                "streamk": nb.STREAMK.label},
                       notes="one force evaluation per timing (stream-K: with the kernel that zeroes acc first); "
                             "ginteractions = n^2 / median time; gflops = "
                             f"{counts.NBODY_FLOPS_PER_INTERACTION} n^2 / median time; every kernel checked against "
                             "float64 NumPy (within ACC_RTOL) before timing")
    if wanted("ch08_math_traps"):
        save_reference("ch08_math_traps", _table("traps", ex.math_traps), out_dir, meta=meta,
                       notes=f"tiled 256, unroll 4, n = {ex.TRAP_SIZE}; slowdown = time / time of the rsqrt version")
    if wanted("ch08_alternatives"):
        save_reference("ch08_alternatives", _table("alternatives", ex.alternatives_table), out_dir, meta=meta,
                       notes="AoS, rsqrt, eps2 = 0.0025; tiled 256 unroll 4 (shared tile) against naive unroll 4, the "
                             "warp-shuffle broadcast (256 threads) and constant memory (every body a source, only "
                             "n <= 4096 = 64 KiB); CUDA events; each kernel checked against float64 NumPy first")
    if wanted("ch08_cpu"):
        cpu = _table("cpu", ex.cpu_rates)
        save_reference("ch08_cpu", cpu, out_dir, meta={**meta, **host.host_cpu().as_meta()},
                       notes="host clock (time.perf_counter), median of 5 calls after a warm-up (NumPy: 2); the "
                             "Numba loop (parallel=True, fastmath=True, float32) reads four contiguous arrays "
                             "(x, y, z, m) so that it vectorises, and is timed first, before NumPy's BLAS threads "
                             "run, on every Numba thread and on one; NumPy float64 builds (rows x n x 3) "
                             "temporaries in blocks of about 2^21 pairs")
    if wanted("ch08_instruction_mix"):
        kernels = {**ladder, **{f"tiled 256, unroll 4, {k}": v for k, v in ex.MATH_TRAPS.items() if k != "rsqrt"}}
        save_reference("ch08_instruction_mix", _table("mix", lambda: ex.instruction_mix(kernels)), out_dir,
                       meta=meta, notes="hot loop = the longest innermost loop of the compiled kernel; interactions "
                                        "per trip = float32 subtractions / 3; sass_* columns from nvdisasm")


def bench(ctx) -> list[Row]:
    """The fastest kernel against the FMA peak (target 72%), the best tiled one, the sequence, and the speedups."""
    fma = _fma_peak().value
    rows: list[Row] = []
    size = f"n=2^{int(math.log2(BENCH_N))}"
    tuning = _table("tuning", ex.tuning_sweep)
    best_cfg = ex.best_config(tuning)
    best = ex.time_config(best_cfg, BENCH_N)
    fastest = ex.time_config(nb.STREAMK, BENCH_N)
    peak_name = "FP32 FMA peak, same run"
    rows.append(Row(TOPIC, f"n-body best: {nb.STREAMK.label}", size, fastest.gflops, "GFLOP/s", peak_name, fma,
                    target=TARGET))
    rows.append(Row(TOPIC, f"best tiled: {best_cfg.label}", size, best.gflops, "GFLOP/s", peak_name, fma))
    throughput = _measured.get("throughput")
    if throughput is None:
        throughput = ex.throughput_sweep(sizes=(BENCH_N,), kernels=ex.sequence(best_cfg))
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
