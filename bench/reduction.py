"""Chapter 6 (parallel reduction) on the GPU: the tables the chapter plots, and the best kernel vs its ceilings.

``collect(out_dir)`` writes

* ``ch06_reduction_sweep``: effective bandwidth (bytes read / time) of every variant at every block
  size 32..1024 on 2**26 float32, plus ``cupy.sum`` (CUB) and the device-to-device copy (bytes read +
  written) measured in the same run, and each kernel's relative error against a float64 sum (checked to
  be below 1e-3, except for one atomic per element, whose float32 total stalls at 2**24: a lesson);
* ``ch06_loads_in_flight``: the best kernel's bandwidth against the loads each thread keeps in flight
  (``unroll``) and the block size, with the bytes in flight over the whole GPU.

``bench(ctx)`` returns rows for 2**26 and 2**27 float32: the best kernel against ``cupy.sum``
(target 95%) and against the copy ceiling ``ctx.copy_bandwidth_gbs()`` (target 85%), and, at 2**26,
every classic variant (and the later ones) at 256 threads per block.

Run: ``python bench/run_all.py --only reduction [--collect src/labhelpers/data/reference]``.
"""

from __future__ import annotations

import math

import pandas as pd
from common import Row, lh  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import reduction as red_exp
from labhelpers import roofline
from labhelpers.kernels import reduction as red
from labhelpers.refdata import save_reference

TOPIC = "reduction"
SWEEP_N = 2**26
BENCH_SIZES = (2**26, 2**27)
#: The chapter's default configuration of the best kernel.
BEST_THREADS, BEST_UNROLL = 256, 8
#: Configurations tried for the loads-in-flight table.
FLIGHT_THREADS = (256, 1024)
FLIGHT_UNROLL = (1, 2, 4, 8, 16)


def _inputs(n: int, seed: int = 0):
    """Uniform [0, 1) float32 on the GPU (CuPy), its Numba view, and the exact (float64) sum."""
    import cupy as cp
    from numba import cuda

    x_cp = cp.random.default_rng(seed).random(n, dtype=cp.float32)
    exact = float(cp.sum(x_cp, dtype=cp.float64))
    return x_cp, cuda.as_cuda_array(x_cp), exact


def _cupy_sum(x_cp, repeat: int = 20, number: int = 10):
    import cupy as cp

    return lh.benchmark(lambda: cp.sum(x_cp), nbytes=x_cp.nbytes, repeat=repeat, number=number, label="cupy.sum")


def _copy(x_cp, repeat: int = 20, number: int = 10):
    """CuPy's copy of ``x_cp`` (bytes read + written), timed by the one copy measurement."""
    return roofline.time_copy(x_cp, repeat=repeat, number=number)


def _check(value: float, exact: float, what: str, rtol: float = 1e-3) -> None:
    if not abs(float(value) - exact) <= rtol * abs(exact):
        raise AssertionError(f"{what} returned {float(value)!r}, the float64 sum is {exact!r}: wrong result")


def _extra_row(variant: str, title: str, timing, result: float, exact: float) -> dict:
    row = {"variant": variant, "number": math.nan, "title": title, "threads": math.nan}
    row.update(timing.as_row())
    row.update(status="ok", reason="", result=result, rel_error=abs(result - exact) / abs(exact))
    return row


def sweep_table(n: int = SWEEP_N) -> pd.DataFrame:
    """Every variant at every block size, then cupy.sum and the copy, all on the same 2**26 float32."""
    import cupy as cp

    x_cp, x_nb, exact = _inputs(n)
    keys = [k for k in red.VARIANTS if k != "atomic_per_element"]
    table = red_exp.sweep_variants(x_nb, keys, red.BLOCK_SIZES, reference=exact, repeat=10, number=3, progress=False)
    slow = red_exp.sweep_variants(x_nb, ["atomic_per_element"], red.BLOCK_SIZES, reference=exact, repeat=3, number=1,
                              progress=False)
    cupy_t = _cupy_sum(x_cp)
    copy_t = _copy(x_cp)
    extra = pd.DataFrame([
        _extra_row("cupy_sum", "cupy.sum (CUB)", cupy_t, float(cp.sum(x_cp)), exact),
        _extra_row("copy", "device-to-device copy (bytes read + written)", copy_t, math.nan, exact),
    ])
    table = pd.concat([table, slow, extra], ignore_index=True)
    table.insert(0, "n", n)
    # One atomic per element is a float32 loop in random order: on 2**26 values in [0, 1) its total stalls
    # at 2**24 (every later addition rounds away). That is a lesson of the chapter, not a bug: not checked.
    checked = (table["status"] == "ok") & (table["variant"] != "atomic_per_element")
    bad = table[checked & (table["rel_error"] > 1e-3)]
    if len(bad):
        raise AssertionError(f"wrong sums in the sweep:\n{bad[['variant', 'threads', 'result', 'rel_error']]}")
    return table


def loads_in_flight_table(n: int = SWEEP_N) -> pd.DataFrame:
    """The best kernel's GB/s against loads in flight per thread, with the grid it got and the bytes in flight."""
    x_cp, x_nb, exact = _inputs(n)
    rows = []
    for threads in FLIGHT_THREADS:
        for unroll in FLIGHT_UNROLL:
            timing, value = red_exp.time_variant(x_nb, "best", threads, unroll=unroll, repeat=20, number=10)
            _check(value, exact, f"best kernel ({threads} threads, unroll {unroll})")
            blocks = red.Reducer(x_nb, "best", threads, unroll=unroll).launches[0][0]
            row = {"n": n, "threads": threads, "unroll": unroll, "blocks": blocks,
                   "resident_threads": blocks * threads, "bytes_in_flight": blocks * threads * unroll * 4}
            row.update(timing.as_row())
            rows.append(row)
    return pd.DataFrame(rows)


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (names prefixed ch06_)."""
    save_reference("ch06_reduction_sweep", sweep_table(), out_dir,
                   notes="effective bandwidth = 4 n bytes read / median time; copy counts bytes read + written; "
                         "timed callable = every launch of one reduction (no allocation, no host copy)")
    save_reference("ch06_loads_in_flight", loads_in_flight_table(), out_dir,
                   notes="best kernel (grid = resident blocks, one atomic per block); bytes_in_flight = "
                         "blocks * threads * unroll * 4")


def bench(ctx) -> list[Row]:
    """The best kernel against cupy.sum and the copy ceiling, and every variant at 256 threads."""
    rows: list[Row] = []
    copy = ctx.copy_bandwidth_gbs()
    for n in BENCH_SIZES:
        size = f"2^{int(math.log2(n))} f32"
        x_cp, x_nb, exact = _inputs(n)
        best, value = red_exp.time_variant(x_nb, "best", BEST_THREADS, unroll=BEST_UNROLL, repeat=20, number=20)
        _check(value, exact, "best kernel")
        cub = _cupy_sum(x_cp, repeat=20, number=20)
        label = f"best ({BEST_THREADS} thr, unroll {BEST_UNROLL})"
        rows.append(Row(TOPIC, label, size, best.gbps, "GB/s", "cupy.sum (CUB), same run", cub.gbps, target=0.95))
        rows.append(Row(TOPIC, label, size, best.gbps, "GB/s", "D2D copy (read+write), 1 GiB", copy, target=0.85))
        rows.append(Row(TOPIC, "cupy.sum", size, cub.gbps, "GB/s", "D2D copy (read+write), 1 GiB", copy))
        if n == BENCH_SIZES[0]:
            for key in red.VARIANTS:
                if key in ("best", "atomic_per_element"):
                    continue
                timing, value = red_exp.time_variant(x_nb, key, 256, repeat=10, number=3)
                _check(value, exact, key)
                name = f"{red.VARIANTS[key].number or '-'} {key} (256 thr)"
                rows.append(Row(TOPIC, name, size, timing.gbps, "GB/s", "D2D copy (read+write), 1 GiB", copy))
        del x_cp, x_nb
    return rows
