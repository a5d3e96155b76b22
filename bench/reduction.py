"""Chapter 6 (parallel reduction) on the GPU: the tables the chapter plots, and the best kernel vs its yardsticks.

``collect(out_dir)`` writes

* ``ch06_reduction_sweep``: effective bandwidth (bytes read / time) of every variant at every block
  size 32..1024 on 2**26 float32, plus ``cupy.sum`` (CUB) measured in the same run, and each kernel's
  relative error against a float64 sum (checked to be below 1e-3, except for one atomic per element,
  whose float32 total stalls at 2**24: a lesson) (``labhelpers.experiments.reduction.reduction_sweep``);
* ``ch06_loads_in_flight``: the best kernel's bandwidth against the loads each thread keeps in flight
  (``unroll``) and the block size, with the bytes in flight over the whole GPU
  (``labhelpers.experiments.reduction.loads_in_flight``).

The copy ceiling the chapter compares with is not measured here: it has one definition,
``labhelpers.roofline.measure_dram_bandwidth``, and one reference value, ``ch07_ceilings`` (bench/roofline.py).

``bench(ctx)`` returns rows for 2**26 and 2**27 float32: the best kernel against ``cupy.sum``
(target 95%) and against the copy ceiling ``ctx.copy_bandwidth_gbs()`` (target 85%), and, at 2**26,
every classic variant (and the later ones) at 256 threads per block.

Run: ``python bench/run_all.py --only reduction [--collect src/labhelpers/data/reference]``.
"""

from __future__ import annotations

import math

from common import COPY_CEILING, Row, lh  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import reduction as red_exp
from labhelpers.kernels import reduction as red
from labhelpers.refdata import save_reference

TOPIC = "reduction"
BENCH_SIZES = (2**26, 2**27)
BEST_THREADS, BEST_UNROLL = red_exp.BEST_THREADS, red_exp.BEST_UNROLL


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch06_)."""
    save_reference("ch06_reduction_sweep", red_exp.reduction_sweep(), out_dir,
                   notes=f"effective bandwidth = 4 n bytes read / median time, {red_exp.SWEEP_NUMBER} calls per "
                         f"timing ({red_exp.FLIGHT_NUMBER} for cupy.sum); timed callable = every launch of one "
                         "reduction (no allocation, no host copy)")
    save_reference("ch06_loads_in_flight", red_exp.loads_in_flight(), out_dir,
                   notes=f"best kernel (grid = resident blocks, one atomic per block), {red_exp.FLIGHT_NUMBER} calls "
                         "per timing; bytes_in_flight = blocks * threads * unroll * 4")


def bench(ctx) -> list[Row]:
    """The best kernel against cupy.sum and the copy ceiling, and every variant at 256 threads."""
    rows: list[Row] = []
    copy = ctx.copy_bandwidth_gbs()
    for n in BENCH_SIZES:
        size = f"2^{int(math.log2(n))} f32"
        x_cp, x_nb, exact = red_exp.gpu_inputs(n)
        best, value = red_exp.time_variant(x_nb, "best", BEST_THREADS, unroll=BEST_UNROLL, repeat=20, number=20)
        red_exp.check_sum(value, exact, "best kernel")
        cub = red_exp.time_cupy_sum(x_cp, repeat=20, number=20)
        label = f"best ({BEST_THREADS} thr, unroll {BEST_UNROLL})"
        rows.append(Row(TOPIC, label, size, best.gbps, "GB/s", "cupy.sum (CUB), same run", cub.gbps, target=0.95))
        rows.append(Row(TOPIC, label, size, best.gbps, "GB/s", COPY_CEILING, copy, target=0.85))
        rows.append(Row(TOPIC, "cupy.sum", size, cub.gbps, "GB/s", COPY_CEILING, copy))
        if n == BENCH_SIZES[0]:
            for key in red.VARIANTS:
                if key in ("best", "atomic_per_element"):
                    continue
                timing, value = red_exp.time_variant(x_nb, key, 256, repeat=10, number=3)
                red_exp.check_sum(value, exact, key)
                name = f"{red.VARIANTS[key].number or '-'} {key} (256 thr)"
                rows.append(Row(TOPIC, name, size, timing.gbps, "GB/s", COPY_CEILING, copy))
        del x_cp, x_nb
    return rows
