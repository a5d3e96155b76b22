"""Chapter "Scan and the patterns built on it": prefix sums, and what they make parallel.

A scan turns ``x`` into its running totals: the **inclusive** scan ``y[i] = x[0] + ... + x[i]``, the
**exclusive** scan ``y[i] = x[0] + ... + x[i-1]`` (``y[0]`` = the identity), for any associative
operator. This package holds every kernel the chapter shows, their host wrappers and the NumPy
specifications they are tested against, one module per part; the names the book, labs, benches and tests
use are re-exported here (``from labhelpers.kernels import scan as sk; sk.scan(...)``).

=================================  ===========================================================
 module                            kernels and wrappers
=================================  ===========================================================
 :mod:`.definitions`               :func:`sequential_scan` (the loop), :func:`scan_reference` (NumPy),
                                   the operators, :class:`~.definitions.TypedKernel` (written once with
                                   ``T``, compiled per element type)
 :mod:`.scans`                     one block: :data:`hillis_steele_scan` (double-buffered),
                                   :data:`blelloch_scan` (work-efficient, bank-conflict padding),
                                   :func:`block_scan_shuffle` (warp shuffles, GPU only); across blocks:
                                   :data:`add_block_offsets`, :data:`chained_scan` (single pass)
 :mod:`.tiled`                     :func:`tile_kernels`: many items per thread, 16-byte loads, the
                                   decoupled look-back (single pass: the block's, then one warp's on
                                   one 64-bit word per tile, the fast one), tiled compaction and radix
                                   kernels
 :mod:`.planner`                   :class:`Scan` with ``method`` = scan-then-propagate, reduce-then-scan
                                   (three kernels), chained, decoupled look-back (``"lookback"``: the
                                   whole block looks back; ``"lookback_warp"``: warp 0 alone, built as
                                   CUB's); :func:`scan`, :func:`block_scan`
 :mod:`.patterns`                  :func:`compact`, :func:`radix_split`, :class:`RadixSorter`,
                                   :func:`histogram`
 :mod:`.sparse`                    :func:`spmv` (scalar, warp per row, segmented scan, merge-based), CSR
                                   matrices; the segmented scan on its own (:class:`SegmentedScan`,
                                   :func:`segmented_scan`) and *distribute* built on it
=================================  ===========================================================

Imports go one way: definitions <- scans <- tiled <- planner <- patterns, sparse.

Element types: the teaching kernels are written once with a type name ``T`` and compiled for int32
and float32 (:class:`~.definitions.TypedKernel`); the tiled kernels are built by :func:`tile_kernels` for
one element type, block size and number of items per thread. Under Numba's CUDA simulator there are no
warp intrinsics: the kernels that need them raise :class:`~labhelpers.errors.GPUOnlyError`, and the
tiled kernels use a shared-memory block scan there instead of shuffles.
"""

from __future__ import annotations

from ...errors import LaunchConfigError
from .definitions import (
    IntegerOverflowWarning, OPERATORS, SLIDE_INPUT, SLIDE_OUTPUT_AS_PRINTED, UnknownMethodError, integer_valued,
    scan_error_bound, scan_reference, sequential_scan, warn_if_wraps,
)
from .scans import (
    add_block_offsets, blelloch_scan, blelloch_scan_unpadded, blelloch_sweeps, block_scan_shuffle, chained_scan,
    hillis_steele_scan, hillis_steele_single_buffer, warp_inclusive_scan,
)
from .tiled import (
    block_exclusive_scan, lookback, lookback_warp, radix_downsweep, radix_upsweep, tile_compact, tile_kernels,
    tile_scan_lookback, tile_scan_warp_lookback,
)
from .planner import (
    LOOKBACKS, METHODS, SIMULATOR_METHODS, TILED_METHODS, Scan, block_scan, block_scan_reference, scan,
)
from .patterns import (
    Compactor, RadixSorter, SPLIT_KEYS, enumerate_flags, enumerate_reference, SPLIT_TABLE, compact, compact_reference, histogram,
    histogram_global_atomics, histogram_shared_atomics, radix_counter_bytes, radix_pass_bytes, radix_passes,
    radix_sort, radix_split, scatter_kept, split_reference, split_table,
)
from .sparse import (
    CSR, MERGE_ITEMS, SLIDE_CSR_INDEX, SLIDE_CSR_VALUES, SLIDE_ROW_PTR, SLIDE_ROW_PTR_AS_PRINTED, SPMV_METHODS,
    SpMV, check_csr, csr_from_dense, empty_and_long_rows, laplacian_2d, merge_stage_tile, power_law_matrix,
    SegmentedScan, distribute, distribute_reference, plan_segmented_scan, segmented_scan, segmented_scan_reference,
    segmented_scan_block, spmv, spmv_bytes, spmv_csr_scalar, spmv_error_bound, spmv_gather_row_ends, spmv_merge,
    spmv_reference,
)

__all__ = [
    "CSR", "Compactor", "IntegerOverflowWarning", "LaunchConfigError", "LOOKBACKS", "MERGE_ITEMS", "METHODS",
    "OPERATORS", "RadixSorter", "SIMULATOR_METHODS", "SLIDE_CSR_INDEX", "SLIDE_CSR_VALUES", "SLIDE_INPUT",
    "SLIDE_OUTPUT_AS_PRINTED", "SLIDE_ROW_PTR", "SLIDE_ROW_PTR_AS_PRINTED", "SPLIT_KEYS", "SPLIT_TABLE",
    "SPMV_METHODS", "Scan", "SpMV", "TILED_METHODS", "UnknownMethodError", "add_block_offsets", "blelloch_scan",
    "blelloch_scan_unpadded", "blelloch_sweeps", "block_exclusive_scan", "block_scan", "block_scan_reference",
    "block_scan_shuffle", "chained_scan", "check_csr", "compact", "compact_reference", "csr_from_dense",
    "empty_and_long_rows", "hillis_steele_scan", "hillis_steele_single_buffer", "histogram",
    "histogram_global_atomics", "histogram_shared_atomics", "integer_valued", "laplacian_2d", "lookback",
    "lookback_warp", "merge_stage_tile", "power_law_matrix", "radix_counter_bytes", "radix_downsweep",
    "radix_pass_bytes", "radix_passes", "radix_sort", "radix_split", "radix_upsweep", "scan", "scan_error_bound",
    "scan_reference",
    "scatter_kept", "SegmentedScan", "distribute", "distribute_reference", "enumerate_flags",
    "enumerate_reference", "plan_segmented_scan", "segmented_scan", "segmented_scan_reference", "segmented_scan_block", "sequential_scan", "split_reference", "split_table", "spmv",
    "spmv_bytes", "spmv_csr_scalar", "spmv_error_bound", "spmv_gather_row_ends", "spmv_merge", "spmv_reference",
    "tile_compact", "tile_kernels", "tile_scan_lookback", "tile_scan_warp_lookback", "warn_if_wraps",
    "warp_inclusive_scan",
]
