"""Chapter 2 (BSP and Amdahl) on the GPU: parallel slackness and a measured speedup.

``collect(out_dir)`` measures and saves the two tables the chapter plots:

* ``ch02_slackness``: the fixed-work kernel (``labhelpers.kernels.bsp.fixed_work``, 8
  multiply-adds per element) over a fixed 2**25-element array, launched from one warp
  up to 32 blocks of 256 threads per SM (four times what the GPU holds at once).
* ``ch02_speedup``: a program made of a serial step (one thread, 20,000 dependent
  multiply-adds) and a parallel step (the fixed-work kernel, 256 multiply-adds per element
  over 2**22 elements) on 1, 2, 4, ... blocks of 1024 threads, at most one block per SM.

``bench(ctx)`` reports the fixed-work kernel at full occupancy (blocks of 256 threads filling every
thread slot of every SM: 8 per SM on the reference GPU, 4 on a T4) against the device-to-device copy bandwidth measured in the same
run, and the one-warp launch beside it. Together they take well under a minute of GPU time.

Usage on a GPU machine: ``python bench/run_all.py --only bsp [--collect DIR]``.
"""

from __future__ import annotations

from pathlib import Path


from common import Context, Row, report  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers import gpus  # noqa: E402
from labhelpers.experiments import bsp  # noqa: E402
from labhelpers.refdata import save_reference  # noqa: E402

TOPIC = "bsp"
SLACK_N = 2**25  # 128 MiB per array: input plus output is several times the 50-60 MB L2
SLACK_REPS = 8
SPEEDUP_N = 2**22
SPEEDUP_REPS = 256  # compute-bound: one SM's share never waits on DRAM bandwidth
SPEEDUP_THREADS = 1024
SERIAL_STEPS = 20_000


def _sm_count() -> int:
    info = lh.device_info()
    if info.is_simulator or not info.sm_count:
        raise RuntimeError("bench/bsp.py measures a real GPU: run it on a machine with a CUDA GPU")
    return int(info.sm_count)


def _threads_per_sm() -> int:
    return gpus.current().sm.max_threads_per_sm


def collect(out_dir: str | Path) -> None:
    """Measure ``ch02_slackness`` and ``ch02_speedup`` and save them in ``out_dir``."""
    sms = _sm_count()
    slack = bsp.measure_slackness(SLACK_N, bsp.slackness_grid(sms), sm_count=sms, reps=SLACK_REPS,
                                  threads_per_sm=_threads_per_sm(), progress=False)
    save_reference("ch02_slackness", slack, out_dir,
                   notes=f"fixed_work, n={SLACK_N} float32, {SLACK_REPS} FMAs/element, bytes = read + write; "
                         f"fill = total threads / (SMs * {_threads_per_sm()}); median of 3-10 CUDA-event timings per launch")
    speed = bsp.measure_speedup(SPEEDUP_N, bsp.speedup_blocks(sms), threads=SPEEDUP_THREADS, reps=SPEEDUP_REPS,
                                serial_steps=SERIAL_STEPS, progress=False)
    save_reference("ch02_speedup", speed, out_dir,
                   notes=f"program = serial_chain ({SERIAL_STEPS} dependent FMAs, 1 thread) + fixed_work "
                         f"(n={SPEEDUP_N}, {SPEEDUP_REPS} FMAs/element, {SPEEDUP_THREADS} threads/block) on 1..{sms} "
                         "blocks; speedup = program_ms(1 block) / program_ms; empty_ms = one empty launch "
                         "(10 back to back per event pair); medians of 10 CUDA-event timings")


def bench(ctx: Context) -> list[Row]:
    """The fixed-work kernel at full occupancy and on one warp, in GB/s against the copy bandwidth."""
    sms = _sm_count()
    full = (sms * _threads_per_sm() // 256, 256)  # blocks of 256 threads taking every thread slot
    rows = []
    for (blocks, threads), repeat in [(full, 20), ((1, 32), 3)]:  # one warp takes about a second per run
        table = bsp.measure_slackness(SLACK_N, [(blocks, threads)], sm_count=sms, reps=SLACK_REPS,
                                      threads_per_sm=_threads_per_sm(), repeat=repeat, progress=False)
        rows.append(Row(topic=TOPIC, kernel=f"fixed_work 8 FMA, {blocks}x{threads}", size="2^25 f32",
                        value=float(table["gbps"].iloc[0]), unit="GB/s", ceiling_name="cupy copy (same run)",
                        ceiling=ctx.copy_bandwidth_gbs()))
    return rows


if __name__ == "__main__":
    print(report(bench(Context())))
