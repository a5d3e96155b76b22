"""The roofline model, and an empirical roofline toolkit that measures the GPU it runs on.

One module per job (``from labhelpers import roofline as rl`` gives every public name below):

* :mod:`~labhelpers.roofline.model`: the model ``p = min(B I, P)`` (Williams, Waterman and Patterson, 2009),
  time bounds, the flops and bytes of the chapter's worked examples, peaks at a clock. No GPU.
* :mod:`~labhelpers.roofline.ceilings`: :class:`Ceilings`, datasheets, the reference GPU's ceilings, the
  per-device cache of measured ones.
* :mod:`~labhelpers.roofline.measure`: measuring, in one place: this GPU's ceilings with the kernels of
  :mod:`labhelpers.kernels.roofline`, including the one definition of the copy ceiling, the yardstick
  (:func:`measure_dram_bandwidth`, every copy timed by :func:`time_copy`), the device-memory ceiling, the
  roofline's memory roof (:func:`measure_stream_bandwidth`: the fastest of the copies and a triad, timed by
  :func:`time_triad`), the host's memory ceiling (:func:`measure_host_bandwidth`), and a kernel's point
  (:func:`measure_point`: time a checked launch, then record it).
* :mod:`~labhelpers.roofline.points`: recording kernels on this GPU's roofline, refusing impossible
  measurements (:class:`~labhelpers.errors.ImpossibleMeasurement`), lab points kept apart.
* :mod:`~labhelpers.roofline.draw`: drawing a roofline, in one place: :func:`draw_roofline` (chapter 7's
  other figures and its widgets are in :mod:`labhelpers.figures.roofline`);
  :mod:`~labhelpers.roofline.tables`: tables formatted for reading.
* :mod:`~labhelpers.roofline.cache`: where this machine keeps what it measured.

The measurements chapter 7 shows (timing hygiene, the intensity sweep, the skewed GEMM, representative
points) are in :mod:`labhelpers.experiments.roofline`.
"""

from ..errors import ImpossibleMeasurement
from .cache import CACHE_ENV_VAR, CEILINGS_FILE, LAB_POINTS_FILE, POINTS_FILE, cache_root, device_cache_dir
from .ceilings import (
    CEILING_NAMES,
    COPY_VARIANT_COLUMNS,
    LIBRARY,
    LIBRARY_COPY_NAME,
    REF_CEILINGS,
    REF_COPY_VARIANTS,
    Ceilings,
    ceilings_from_table,
    compare_ceilings,
    copy_variants_or_reference,
    copy_variants_table,
    datasheet_ceilings,
    datasheet_entry,
    datasheet_table,
    fp32_peak_at_clock,
    fp64_peak_at_clock,
    load_cached_ceilings,
    reference_ceilings,
    save_cached_ceilings,
)
from .measure import (
    COPY_BYTES,
    COPY_VARIANTS,
    HOST_COPY_BYTES,
    HOST_COPY_VARIANTS,
    HOST_STREAM_VARIANTS,
    TRIAD_VARIANTS,
    CeilingMeasurement,
    ceilings_or_reference,
    measure_ceilings,
    measure_dram_bandwidth,
    measure_fma_peak,
    measure_host_bandwidth,
    measure_l2_bandwidth,
    measure_point,
    measure_stream_bandwidth,
    time_copy,
    time_host_copy,
    time_triad,
)
from .model import (
    FP32_LANES_PER_SM,
    FP64_LANES_PER_SM,
    NBODY_FLOPS_PER_INTERACTION,
    PCIE5_X16_GBS,
    KernelCount,
    attainable,
    bound,
    gemm_intensity,
    intensity_table,
    machine_balance,
    matmul_ideal_counts,
    matmul_naive_counts,
    matmul_tiled_counts,
    nbody_counts,
    peak_at_clock_gflops,
    reduction_counts,
    saxpy_counts,
    stencil_counts,
    time_bounds,
)
from .draw import draw_roofline, roofline_title
from .points import (
    CEILING_TOLERANCE,
    POINT_COLUMNS,
    PRECISIONS,
    REF_POINTS,
    SOURCES,
    check_against_ceilings,
    clear_points,
    fraction_of_roof,
    load_points,
    points_or_reference,
    record_point,
)
from .tables import format_table

__all__ = [
    "CACHE_ENV_VAR", "CEILINGS_FILE", "CEILING_NAMES", "CEILING_TOLERANCE", "COPY_BYTES", "COPY_VARIANTS",
    "COPY_VARIANT_COLUMNS", "FP32_LANES_PER_SM", "HOST_COPY_BYTES", "HOST_COPY_VARIANTS", "HOST_STREAM_VARIANTS", "FP64_LANES_PER_SM", "LAB_POINTS_FILE", "LIBRARY",
    "LIBRARY_COPY_NAME", "NBODY_FLOPS_PER_INTERACTION", "PCIE5_X16_GBS", "POINTS_FILE", "POINT_COLUMNS",
    "PRECISIONS", "REF_CEILINGS", "REF_COPY_VARIANTS", "REF_POINTS", "SOURCES", "CeilingMeasurement", "Ceilings",
    "ImpossibleMeasurement", "KernelCount", "attainable", "bound", "cache_root", "ceilings_from_table",
    "ceilings_or_reference", "check_against_ceilings", "clear_points", "compare_ceilings",
    "copy_variants_or_reference", "copy_variants_table", "datasheet_ceilings", "datasheet_entry",
    "datasheet_table", "device_cache_dir", "format_table", "fp32_peak_at_clock", "fp64_peak_at_clock",
    "fraction_of_roof", "gemm_intensity", "intensity_table", "load_cached_ceilings", "load_points",
    "machine_balance", "matmul_ideal_counts", "matmul_naive_counts", "matmul_tiled_counts", "measure_ceilings",
    "measure_dram_bandwidth", "measure_fma_peak", "measure_host_bandwidth",
    "measure_l2_bandwidth", "measure_point", "measure_stream_bandwidth", "TRIAD_VARIANTS", "nbody_counts", "peak_at_clock_gflops",
    "draw_roofline",
    "points_or_reference", "record_point", "reduction_counts", "reference_ceilings",
    "roofline_title", "save_cached_ceilings", "saxpy_counts", "stencil_counts", "time_bounds",
    "time_copy", "time_host_copy", "time_triad",
]
