"""Chapter 13 (memory consistency) on the GPU: lost updates, atomic throughput, litmus outcomes, fences.

``collect(out_dir)`` writes

* ``ch13_counter_runs``: the racy counter run 50 times on 2**20 threads (and the correct counters);
* ``ch13_atomic_throughput``: increments per second on one contended address, one per warp, one per
  thread, the warp- and block-aggregated counters and a spin lock (2**24 threads, the lock 2**14);
* ``ch13_last_block``: the last-block single-pass sum against ``cupy.sum`` and a copy;
* ``ch13_last_block_failures``: wrong sums in 2000 launches with and without fences;
* ``ch13_litmus``: outcome counts of every litmus configuration (200 launches of 65,536 instances),
  with the rate; ``ch13_litmus_single``: the rate with one instance pair per launch;
* ``ch13_racecheck``: the output of ``compute-sanitizer --tool racecheck`` on the racy shift kernel;
* ``ch13_wait_loop_ptx``: the PTX of a spin on a plain load and on an atomic;
* ``ch13_lock_trick``: the lecture's lock_trick (a barrier, thread 0 alone) against a global lock, 20 runs each.

``bench(ctx)`` returns atomics per second (ratios to one address per thread, the uncontended
case), the warp-aggregated counter against one contended address (the usual lesson: at least
10x), the last-block sum against ``cupy.sum`` (target 90%) and the copy, and litmus instances
per second against one instance pair per launch.

Run: ``python bench/run_all.py --only consistency [--collect src/labhelpers/data/reference]``.
"""

from __future__ import annotations

import math

from common import Row, lh  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import consistency as exp
from labhelpers.refdata import save_reference

TOPIC = "consistency"
LITMUS_LAUNCHES = 200
_CACHE: dict = {}


def _throughput():
    if "throughput" not in _CACHE:
        _CACHE["throughput"] = exp.atomic_throughput()
    return _CACHE["throughput"]


def _last_block():
    if "last_block" not in _CACHE:
        _CACHE["last_block"] = exp.last_block_table()
    return _CACHE["last_block"]


def _litmus():
    if "litmus" not in _CACHE:
        _CACHE["litmus"] = exp.litmus_campaign(launches=LITMUS_LAUNCHES)
        _CACHE["single"] = exp.litmus_single_rate()
    return _CACHE["litmus"], _CACHE["single"]


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch13_)."""
    save_reference("ch13_counter_runs", exp.counter_runs(), out_dir,
                   notes="count returned by each counter kernel for n = 2**20 threads (256 per block); lost = n - count")
    save_reference("ch13_atomic_throughput", _throughput(), out_dir,
                   notes="one launch of n threads, each one increment (1 atomic, or one per warp/block when "
                         "aggregated); median of CUDA-event timings; every kernel checked for the exact count")
    save_reference("ch13_last_block", _last_block(), out_dir,
                   notes="gbps = 4 n bytes read / median time (copy: read + write); 10 calls per timing")
    save_reference("ch13_last_block_failures", exp.last_block_failures(), out_dir,
                   notes="partial sums poisoned with NaN before every launch; small-integer input (exact in any order)")
    litmus, single = _litmus()
    save_reference("ch13_litmus", litmus, out_dir,
                   notes=f"{LITMUS_LAUNCHES} launches per row, 256 testing blocks x 256 threads (65,536 instances), "
                         "64 stress blocks, fresh random block order, thread and location permutations per launch; "
                         "seconds = wall time including the reset and tally kernels")
    save_reference("ch13_litmus_single", single, out_dir,
                   notes="2 blocks of 1 thread per launch (2 instances), no stress, no line-up spin")
    try:
        save_reference("ch13_racecheck", exp.racecheck_report(), out_dir,
                       notes="compute-sanitizer --tool racecheck --racecheck-report hazard on the racy and the "
                             "synchronised shift kernels (256 threads per block, 1024 elements)")
    except Exception as exc:  # the sanitizer is a tool of the machine, not of the package: report, go on
        print(f"racecheck not collected: {type(exc).__name__}: {exc}")
    save_reference("ch13_lock_trick", exp.lock_trick_table(), out_dir,
                   notes="2**20 int32 ones, 256 threads per block, 20 runs each: the lecture's lock_trick "
                         "(syncthreads, thread 0 updates the pair, syncthreads) against pair_update_locked")
    try:
        save_reference("ch13_wait_loop_ptx", exp.wait_loop_table(), out_dir,
                       notes="cuda.compile_ptx of wait_plain / wait_atomic for (int32[::1], int32[::1])")
    except Exception as exc:
        print(f"PTX not collected: {type(exc).__name__}: {exc}")


def bench(ctx) -> list[Row]:
    """Atomics per second, the last-block sum against cupy.sum and the copy, litmus instances per second."""
    rows: list[Row] = []
    t = _throughput().set_index("kind")
    spread = float(t.loc["one address per thread", "increments_per_s"])
    for kind in t.index:
        rows.append(Row(TOPIC, kind, f"2^{int(math.log2(t.loc[kind, 'increments']))} incr", 
                        float(t.loc[kind, "increments_per_s"]) / 1e9, "G incr/s",
                        "one address per thread, same run", spread / 1e9))
    contended = float(t.loc["one address", "increments_per_s"])
    rows.append(Row(TOPIC, "counter: warp-aggregated", "2^24 incr",
                    float(t.loc["counter: warp-aggregated", "increments_per_s"]) / 1e9, "G incr/s",
                    "one contended address, same run", contended / 1e9, target=10.0))
    lb = _last_block()
    copy = ctx.copy_bandwidth_gbs()
    for n, part in lb.groupby("n"):
        g = part.set_index("what")["gbps"]
        ours = float(g["last-block sum (threadfence + ticket)"])
        size = f"2^{int(math.log2(n))} f32"
        rows.append(Row(TOPIC, "last-block sum (1 launch)", size, ours, "GB/s", "cupy.sum (CUB), same run",
                        float(g["cupy.sum (CUB)"]), target=0.90))
        rows.append(Row(TOPIC, "last-block sum (1 launch)", size, ours, "GB/s", "D2D copy (read+write), 1 GiB", copy))
    litmus, single = _litmus()
    one = float(single["instances_per_s"].iloc[0])
    for _, r in litmus[litmus["fence"] == "none"].iterrows():
        rows.append(Row(TOPIC, f"litmus {r['test']} {r['access']} ({r['pairing'][:4]})", "65,536/launch",
                        float(r["instances_per_s"]) / 1e6, "M inst/s", "1 instance pair per launch",
                        one / 1e6))
    return rows
