"""Chapter 10 (scan and the patterns built on it) on the GPU: the chapter's reference tables, and the verdicts.

``collect(out_dir)`` writes (names prefixed ch10_):

* ``ch10_scan_methods``: every scan method at 2**24 int32 (the chained scan at 2**22; the two single passes
  ``lookback``, the whole block looking back, and ``lookback_warp``, warp 0 alone on one 64-bit word), CUB's scan
  (``cub_scan``: ``cub::DeviceScan::InclusiveSum`` in place, no copy), ``cupy.cumsum`` (a copy, then CUB's
  scan) and the copy, effective bandwidth = 8 n bytes / time, each result checked against ``cupy.cumsum``;
* ``ch10_scan_sizes``: both single passes, the tiled three-kernel scan, CUB's scan, ``cupy.cumsum`` and
  the copy from 2**16 to 2**28 elements, int32 and float32;
* ``ch10_block_scans``: the in-block kernels alone (Hillis-Steele, Blelloch padded and not, shuffles);
* ``ch10_lookback_tiles``: both single passes for several tile shapes, with and without 16-byte loads;
* ``ch10_compaction``: one-pass and three-kernel compaction against CuPy's boolean-mask indexing;
* ``ch10_radix_sort``: the LSD radix sort of 2**26 uint32 keys for several digit widths, and ``cupy.sort``;
* ``ch10_spmv``: four SpMV kernels and cuSPARSE on a 2D Laplacian, a power-law graph and a matrix with
  empty and very long rows;
* ``ch10_histogram``: global against shared-memory atomics.

``bench(ctx)`` returns the rows of the chapter's targets (ratios measured in the same run): the
single-pass scan (the warp look-back, ``lookback_warp``) at 2**28 against CUB's own scan (target 90%; the
block look-back, the three-kernel scan, ``cupy.cumsum``, which adds a copy, and the copy ceiling beside it),
compaction against ``x[x > t]``
(target 100%), the radix sort of 2**26 keys against ``cupy.sort`` (target 30%), and the best SpMV kernel
per matrix against cuSPARSE (target 70%). When ``collect`` ran first in the same process, ``bench`` reads
its tables instead of measuring again.

Run: ``python bench/run_all.py --only scan [--collect src/labhelpers/data/reference]``; with
``LABHELPERS_COLLECT_ONLY=ch10_scan_sizes,...`` only the tables named (``common.wanted``).
"""

from __future__ import annotations

import math
import os
import time

from common import Row, lh, wanted  # noqa: F401  (common puts src/ on sys.path and asks for the GPU backend)

from labhelpers.experiments import scan as ex
from labhelpers.refdata import current_meta, save_reference

TOPIC = "scan"
_TABLES: dict = {}


def _measure(name: str, build):
    if name not in _TABLES:
        t0 = time.time()
        _TABLES[name] = build()
        print(f"   {name}: {time.time() - t0:.1f} s", flush=True)
    return _TABLES[name]


def _tables():
    return {
        "ch10_scan_sizes": (lambda: ex.sizes_table(),
                            "8 n bytes / median time; lookback = single pass with the block look-back, 256 "
                            "threads x 16 items; lookback_warp = single pass with the warp look-back (one 64-bit "
                            "word per tile), 128 threads x 32 items; cub_scan = cub::DeviceScan::InclusiveSum in "
                            "place (no copy); cupy_cumsum = copy + CUB scan"),
        "ch10_compaction": (lambda: ex.compaction_table(),
                            "2**28 float32, keep x > 1 - fraction; 4 (n + kept) bytes / time, count copied to host"),
        "ch10_radix_sort": (lambda: ex.radix_table(),
                            "2**26 uniform uint32 keys; gbps = all passes' bytes (12 n + histograms) / time"),
        "ch10_spmv": (lambda: ex.spmv_table(),
                      "float32 CSR; bytes = 8 nnz + 4 (rows + 1) + 4 cols + 4 rows; err_over_bound <= 1 is correct"),
        "ch10_scan_methods": (lambda: ex.methods_table(),
                              "effective bandwidth = 8 n bytes / median time (n = 2**24 int32; chained: 2**22); "
                              "bytes_per_element = what the method moves; ok = equal to cupy.cumsum; cub_scan = "
                              "cub::DeviceScan::InclusiveSum in place (cupy.cuda.cub.device_scan, no copy); "
                              "cupy_cumsum = an element-wise copy into out, then the same CUB scan there"),
        "ch10_lookback_tiles": (lambda: ex.lookback_tiles_table(),
                                "single-pass scan of 2**28 int32 per look-back and tile shape; lookback = block "
                                "(method lookback) or warp (method lookback_warp); vector = 16-byte loads/stores; "
                                "ok = checked before and after the timed launches"),
        "ch10_block_scans": (lambda: ex.block_scans_table(),
                             "in-block kernels only (no carry between blocks), 2**24 int32, 8 n bytes / time"),
        "ch10_histogram": (lambda: ex.histogram_table(), "2**26 int32 values, 4 n bytes / time"),
        "ch10_segmented": (lambda: ex.segmented_table(),
                           "2**24 float32 (small integers), 256 threads; segmented = Hillis-Steele on (flag, value) "
                           "pairs + recursive carries + propagate, heads random with probability 1 / segment_length; "
                           "ratio_hillis_steele = time / the unsegmented scan of the same structure (the notes' "
                           "'3x slower' claim), ratio_lookback = time / the single-pass scan; ok = equal to CuPy"),
    }


def collect(out_dir) -> None:
    """Measure and save the chapter's reference tables (one failing table does not stop the others)."""
    failed = []
    meta_extra = {"cupy_accelerators": ex.cupy_accelerators()}
    for name, (build, notes) in _tables().items():
        if not wanted(name):
            continue
        try:
            table = _measure(name, build)
        except Exception as exc:  # keep going: report at the end
            import traceback

            traceback.print_exc()
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        meta = current_meta()
        meta.update(meta_extra)
        save_reference(name, table, out_dir, meta=meta, notes=notes)
    if failed:
        raise RuntimeError("some ch10 tables failed: " + "; ".join(failed))


def _gbps(at, method: str, dtype: str) -> float:
    """The checked effective bandwidth of ``method`` in the rows ``at`` (one size, one dtype)."""
    r = at[at["method"] == method].iloc[0]
    if not bool(r["ok"]):
        raise AssertionError(f"{method} returned a wrong scan at {int(r['n'])} {dtype}")
    return float(r["gbps"])


def _best(table, column: str = "gbps"):
    table = table[table["ok"].astype(bool)]
    return table.loc[table[column].idxmax()]


def bench(ctx) -> list[Row]:
    """The chapter's four verdicts, each a ratio to a library measured in the same run.

    Each verdict stands on one table (sizes, compaction, radix sort, SpMV) and is left out when ``wanted`` says
    this run does not collect that table (``LABHELPERS_COLLECT_ONLY``).
    """
    rows: list[Row] = []
    if os.environ.get("SCAN_BENCH") == "spmv":  # SCAN_BENCH=spmv: only the SpMV verdicts
        return _spmv_rows(rows)
    if wanted("ch10_scan_sizes"):
        _scan_rows(rows, ctx.copy_bandwidth_gbs())
    if wanted("ch10_compaction"):
        _compaction_rows(rows)
    if wanted("ch10_radix_sort"):
        _radix_rows(rows)
    return _spmv_rows(rows) if wanted("ch10_spmv") else rows


def _scan_rows(rows: list[Row], copy: float) -> None:
    """The single passes (the warp look-back against the target), the three kernels, CUB and cupy.cumsum at 2**28."""
    sizes = _measure("ch10_scan_sizes", lambda: ex.sizes_table())
    for dtype in ("int32", "float32"):
        at = sizes[(sizes["n"] == sizes["n"].max()) & (sizes["dtype"] == dtype)]
        cub = _gbps(at, "cub_scan", dtype)
        cumsum = _gbps(at, "cupy_cumsum", dtype)
        size = f"2^{int(math.log2(at['n'].iloc[0]))} {dtype}"
        for method, label in (("lookback_warp", "scan: single pass, warp look-back"),
                              ("lookback", "scan: single pass, block look-back"),
                              ("tiled_reduce_then_scan", "scan: reduce-then-scan, 3 kernels")):
            value = _gbps(at, method, dtype)
            target = 0.90 if method == "lookback_warp" else None
            rows.append(Row(TOPIC, label, size, value, "GB/s", "CUB's scan (no copy), same run", cub, target))
            rows.append(Row(TOPIC, label, size, value, "GB/s", "cupy.cumsum (copy + CUB scan), same run", cumsum))
            rows.append(Row(TOPIC, label, size, value, "GB/s", "D2D copy (read+write), 1 GiB", copy))
        rows.append(Row(TOPIC, "CUB's scan (DeviceScan, in place)", size, cub, "GB/s", "D2D copy (read+write), 1 GiB",
                        copy))
        rows.append(Row(TOPIC, "cupy.cumsum (copy + CUB scan)", size, cumsum, "GB/s", "D2D copy (read+write), 1 GiB",
                        copy))


def _compaction_rows(rows: list[Row]) -> None:
    comp = _measure("ch10_compaction", lambda: ex.compaction_table())
    for frac in sorted(comp["keep_fraction"].unique()):
        at = comp[comp["keep_fraction"] == frac]
        mine = at[at["method"] == "single_pass"].iloc[0]
        if not bool(mine["ok"]):
            raise AssertionError(f"compaction returned a wrong result (keep {frac})")
        cupy_mask = float(at.loc[at["method"] == "cupy_mask", "gbps"].iloc[0])
        size = f"2^{int(math.log2(mine['n']))} f32"
        rows.append(Row(TOPIC, f"compaction, one pass (keep {frac:.0%})", size, float(mine["gbps"]), "GB/s",
                        "cupy x[x > t], same run", cupy_mask, 1.0 if frac == 0.5 else None))


def _radix_rows(rows: list[Row]) -> None:
    radix = _measure("ch10_radix_sort", lambda: ex.radix_table())
    cub_sort = float(radix.loc[radix["method"] == "cupy_sort", "gkeys"].iloc[0])
    best = _best(radix[radix["method"] == "radix"], "gkeys")
    rows.append(Row(TOPIC, f"radix sort, {int(best['bits'])}-bit digits ({int(best['threads'])}x{int(best['items'])})",
                    f"2^{int(math.log2(best['n']))} u32", float(best["gkeys"]), "Gkeys/s", "cupy.sort, same run",
                    cub_sort, 0.30))


def _spmv_rows(rows: list[Row]) -> list[Row]:
    spmv = _measure("ch10_spmv", lambda: ex.spmv_table())
    for matrix in spmv["matrix"].unique():
        at = spmv[spmv["matrix"] == matrix]
        cus = float(at.loc[at["method"] == "cusparse", "gbps"].iloc[0])
        mine = _best(at[at["method"] != "cusparse"])
        rows.append(Row(TOPIC, f"SpMV {mine['method']}: {matrix}"[:34], f"{int(mine['nnz']):,} nnz", float(mine["gbps"]),
                        "GB/s", "cuSPARSE (cupyx), same run", cus, 0.70))
    return rows


if __name__ == "__main__":  # quick look: python bench/scan.py
    from common import Context, report

    print(report(bench(Context())))
