"""Tuning sweep for chapter 10's single-pass scan: the look-back built as CUB's against the chapter's, CUB and the copy.

    python bench/tuning/scan.py [--quick] [--out scan_sweep.csv]

GPU only (CuPy too); never run by the test suite. In ONE run, for int32 and float32 at 2**24 and 2**28 elements:

* ``cub_scan``: CUB's own scan (``cub::DeviceScan::InclusiveSum`` in place,
  :func:`labhelpers.experiments.scan.cub_scan`);
* ``lookback_block``: the chapter's single pass (``Scan(x, "lookback")``, 256 threads x 16 items: flags and values
  in separate arrays, fences, the whole block per 32-tile window);
* ``lookback_warp``: the candidate (``Scan(x, "lookback", lookback="warp")``: status and value in one 64-bit word
  per tile, warp 0 alone with ballots and shuffles, ``ld.relaxed.gpu`` reads) for every tile shape that
  :func:`~labhelpers.kernels.scan.tiled.tile_kernels` accepts and that fits in 48 KB of static shared memory:
  128, 256, 512 threads x 8, 16, 32 items (12, 20, 24 items are not shapes the tiled kernels build: the padding
  and the 16-byte vectors want a power of two), up to 8,192 elements per tile;
* ``lookback_warp_atomic``: the same candidate reading the words with 64-bit atomics (what the read costs);
* ``copy``: a device-to-device copy of the same bytes (:func:`labhelpers.roofline.time_copy`).

Every timing is :func:`labhelpers.benchmark` (GPU time, stream held); every scan's result is compared with
``cupy.cumsum`` before AND after its timing (the timed calls run hundreds of epochs on the same descriptors).
Columns: kernel, config (threads x items), dtype, n, median_ms, gbps (8 n bytes / time), ratio_to_cub,
ratio_to_copy (same dtype and n), ok. Printed sorted by ratio_to_cub; ``--out`` writes the CSV.
"""

from __future__ import annotations

import sys
import time

from _cli import import_labhelpers, run  # bench/tuning/_cli.py: the backend, the import, the command line

lh = import_labhelpers(__file__)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from labhelpers import backend  # noqa: E402
from labhelpers.experiments import scan as ex  # noqa: E402
from labhelpers.kernels import scan as sk  # noqa: E402
from labhelpers.kernels.scan.definitions import scan_bytes  # noqa: E402
from labhelpers.kernels.scan.tiled import GPU_TILE, ITEMS_CHOICES  # noqa: E402
from labhelpers.roofline import format_table  # noqa: E402

#: Sizes (4-byte elements) and element types of the sweep.
SIZES = (2**24, 2**28)
DTYPES = (np.int32, np.float32)
#: Threads per block of the candidate's tile shapes.
THREADS = (128, 256, 512)
#: Largest tile (elements): the padded tile, the block scan's scratch and the look-back's words must fit in 48 KB of
#: static shared memory (512 x 32 needs 66 KB).
MAX_TILE = 8192
#: ``--quick``: one size, two shapes.
QUICK_SIZES = (2**24,)
QUICK_SHAPES = ((128, 16), GPU_TILE)


def shapes(quick: bool = False) -> list[tuple[int, int]]:
    """The candidate's tile shapes: (threads, items) with items >= 8 and a tile of at most :data:`MAX_TILE`."""
    if quick:
        return list(QUICK_SHAPES)
    return [(t, i) for t in THREADS for i in ITEMS_CHOICES if i >= 8 and t * i <= MAX_TILE]


def _time_scan(x, lookback: str, threads: int, items: int, repeat: int, number: int) -> dict:
    """Check, time and check again one single-pass scan of the CuPy array ``x``."""
    s = sk.Scan(x, "lookback", True, threads, items, lookback=lookback)
    s.launch()
    ok = ex._scan_ok(s.out, x)
    timing = lh.benchmark(s.launch, nbytes=s.nbytes, repeat=repeat, number=number, label=f"lookback {lookback}")
    ok = ok and ex._scan_ok(s.out, x)  # after hundreds of launches: the epochs keep old words from counting
    return {"median_ms": timing.median_ms, "ok": bool(ok)}


def sweep(quick: bool = False, *, repeat: int = 10, number: int = 5) -> pd.DataFrame:
    """Time CUB's scan, the chapter's single pass, the candidate per tile shape and the copy, in one run. GPU only.

    ``quick``: 2**24 only, shapes 128 x 16 and 256 x 16. Returns one row per (kernel, config, dtype, n), unsorted;
    see the module's docstring for the columns.

    Raises:
        GPUOnlyError: under the simulator, or without CuPy.
    """
    backend.require_gpu("the scan tuning sweep", needs_cupy=True,
                        instead="Run it on a GPU machine: python bench/tuning/scan.py --out scan_sweep.csv")
    rows = []
    for dtype in DTYPES:
        for n in (QUICK_SIZES if quick else SIZES):
            start = time.time()
            x = ex.random_values(n, dtype)
            name = np.dtype(dtype).name
            timing, ok = ex.time_cub_scan(x, repeat, number)
            rows.append({"kernel": "cub_scan", "config": "", "dtype": name, "n": n, "median_ms": timing.median_ms,
                         "ok": bool(ok)})
            copy = ex.time_copy(x, repeat, number)
            rows.append({"kernel": "copy", "config": "", "dtype": name, "n": n, "median_ms": copy.median_ms,
                         "ok": True})
            runs = [("lookback_block", "block", *GPU_TILE)]
            for threads, items in shapes(quick):
                runs.append(("lookback_warp", "warp", threads, items))
                runs.append(("lookback_warp_atomic", "warp_atomic", threads, items))
            for kernel, lookback, threads, items in runs:
                try:
                    row = _time_scan(x, lookback, threads, items, repeat, number)
                except Exception as exc:  # noqa: BLE001  (one shape that fails to compile must not end the sweep)
                    row = {"median_ms": float("nan"), "ok": False}
                    print(f"  {kernel} {threads}x{items}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                rows.append({"kernel": kernel, "config": f"{threads}x{items}", "dtype": name, "n": n, **row})
                print(f"  {kernel:22s} {threads}x{items:<3d} {name} 2^{int(np.log2(n))}: {row['median_ms']:.4f} ms "
                      f"(CUB {timing.median_ms:.4f}) ok {row['ok']}", flush=True)
            del x
            print(f"   {name} n=2^{int(np.log2(n))}: {time.time() - start:.1f} s", flush=True)
    table = pd.DataFrame(rows)
    table["gbps"] = [scan_bytes(n, np.dtype(d).itemsize) / (ms * 1e-3) / 1e9
                     for n, d, ms in zip(table["n"], table["dtype"], table["median_ms"])]
    for column, kernel in (("ratio_to_cub", "cub_scan"), ("ratio_to_copy", "copy")):
        yardstick = table[table["kernel"] == kernel].set_index(["dtype", "n"])["gbps"]
        table[column] = [g / yardstick[(d, n)] for g, d, n in zip(table["gbps"], table["dtype"], table["n"])]
    return table[["kernel", "config", "dtype", "n", "median_ms", "gbps", "ratio_to_cub", "ratio_to_copy", "ok"]]



def show(table: pd.DataFrame) -> None:
    """Print the table, best first."""
    table = table.sort_values(["ratio_to_cub"], ascending=False).reset_index(drop=True)
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200):
        print(format_table(table, {"ratio_to_cub": "{:.3f}", "ratio_to_copy": "{:.3f}", "median_ms": "{:.4f}"}))


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, sweep, show, quick_help="2**24 elements only, two tile shapes"))
