"""The roofline model, and an empirical roofline toolkit that measures the GPU it runs on.

The model (Williams, Waterman and Patterson, *Roofline: An Insightful Visual Performance Model for
Multicore Architectures*, CACM 52(4), 2009): a kernel of arithmetic intensity ``I`` (flops per byte of
memory traffic) on a machine with bandwidth ``B`` and peak ``P`` attains at most::

    p = min(B * I, P)

:func:`attainable`, :func:`machine_balance` and :func:`bound` implement it; the counting functions
(:func:`saxpy_counts`, :func:`matmul_tiled_counts`, :func:`nbody_counts`...) and :func:`intensity_table` give
the flops and bytes of the chapter's worked examples.

The toolkit, in the spirit of the Empirical Roofline Toolkit (Lo et al., PMBS 2014):

* :func:`measure_ceilings` times the microbenchmarks of :mod:`labhelpers.kernels.roofline` (device-memory and
  L2 bandwidth, FP32 and FP64 FMA peaks) with a progress bar and caches the result per device in
  ``~/.cache/labhelpers/<device>/ceilings.json`` (or under ``$LABHELPERS_CACHE_DIR``), so every chapter reuses
  it. :func:`datasheet_ceilings` gives NVIDIA's published figures for known GPUs, to show beside them.
* :func:`record_point` appends a kernel measured on this GPU (by any chapter) to ``points.json`` in the same
  folder; :func:`load_points` reads them back and :func:`plot_roofline` draws ceilings and points.
* Without a GPU, :func:`reference_ceilings` and :func:`reference_points` return the ones measured on the
  reference GPU (reference data ``ch07_ceilings`` and ``ch07_roofline_points``), labelled with that GPU.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from . import backend
from .errors import GPUOnlyError
from .timing import Timing

# ------------------------------------------------------------------------------------------ the model


def attainable(intensity, bandwidth_gbs: float, peak_gflops: float):
    """The roofline: ``min(bandwidth * intensity, peak)`` in GFLOP/s.

    Args:
        intensity: arithmetic intensity in FLOP/byte (a number or an array).
        bandwidth_gbs: memory bandwidth in GB/s (10^9 bytes per second).
        peak_gflops: arithmetic peak in GFLOP/s.
    """
    intensity = np.asarray(intensity, dtype=float)
    if np.any(intensity < 0):
        raise ValueError(f"arithmetic intensity cannot be negative, got {intensity}")
    if bandwidth_gbs <= 0 or peak_gflops <= 0:
        raise ValueError(f"bandwidth and peak must be positive, got {bandwidth_gbs} GB/s and {peak_gflops} GFLOP/s")
    result = np.minimum(bandwidth_gbs * intensity, peak_gflops)
    return float(result) if result.ndim == 0 else result


def machine_balance(peak_gflops: float, bandwidth_gbs: float) -> float:
    """The machine balance (ridge point): the intensity ``P / B`` where the two roofs meet, in FLOP/byte."""
    if bandwidth_gbs <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth_gbs}")
    return peak_gflops / bandwidth_gbs


def bound(intensity: float, bandwidth_gbs: float, peak_gflops: float) -> str:
    """``"memory"`` if a kernel of this intensity sits under the slanted roof, ``"compute"`` under the flat one."""
    return "memory" if intensity < machine_balance(peak_gflops, bandwidth_gbs) else "compute"


#: Host-device link used when none is given: PCIe 5.0 x16, 64 GB/s per direction (theoretical; about
#: 50-55 GB/s is reached with pinned memory).
PCIE5_X16_GBS = 64.0


def time_bounds(flops: float, device_bytes: float, host_bytes: float, *, peak_gflops: float,
                bandwidth_gbs: float, link_gbs: float = PCIE5_X16_GBS) -> pd.DataFrame:
    """The three lower bounds on a kernel's time (compute, device memory, host transfer) and the binding one.

    Each resource alone needs ``amount / rate``; the work cannot finish before the slowest of them. A kernel
    whose inputs first cross PCIe is *transfer bound* when that crossing takes longest.

    Returns:
        A table with columns ``limit``, ``amount``, ``rate``, ``ms`` and ``binding`` (True on the slowest).
    """
    rows = [("compute", flops, f"{peak_gflops:,.0f} GFLOP/s", flops / (peak_gflops * 1e9) * 1e3),
            ("device memory", device_bytes, f"{bandwidth_gbs:,.0f} GB/s", device_bytes / (bandwidth_gbs * 1e9) * 1e3),
            ("host transfer", host_bytes, f"{link_gbs:,.0f} GB/s", host_bytes / (link_gbs * 1e9) * 1e3)]
    table = pd.DataFrame(rows, columns=["limit", "amount", "rate", "ms"])
    table["binding"] = table["ms"] == table["ms"].max()
    return table


# ----------------------------------------------------------------------------- counting flops and bytes


@dataclass(frozen=True)
class KernelCount:
    """Flops and bytes of one kernel under a stated assumption about what the caches catch."""

    kernel: str
    flops: float
    nbytes: float
    assumption: str

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP/byte."""
        return self.flops / self.nbytes


def _positive(**values) -> None:
    for name, v in values.items():
        if v is None or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")


def saxpy_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``y = a x + y``: 2 flops per element; read x and y, write y."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("SAXPY", 2 * n, 3 * n * itemsize, "each element read once, written once")


def reduction_counts(n: int, itemsize: int = 4) -> KernelCount:
    """Sum of ``n`` elements: ``n - 1`` additions; read every element once, write one result."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("sum reduction", n - 1, (n + 1) * itemsize, "each element read once")


def matmul_naive_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` (n x n), no reuse: every multiply-add fetches its two operands from device memory."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("matmul, naive", 2 * n**3, (2 * n**3 + n**2) * itemsize,
                       "no reuse: 2 loads per multiply-add, C written once")


def matmul_tiled_counts(n: int, tile: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` with ``tile x tile`` shared-memory tiles: each loaded element serves ``tile`` multiply-adds."""
    _positive(n=n, tile=tile, itemsize=itemsize)
    return KernelCount(f"matmul, {tile}x{tile} tiles", 2 * n**3, (2 * n**3 / tile + n**2) * itemsize,
                       f"A and B read n/{tile} times, C written once")


def matmul_ideal_counts(n: int, itemsize: int = 4) -> KernelCount:
    """``C = A B`` with perfect reuse: A and B read once, C written once (the algorithmic intensity)."""
    _positive(n=n, itemsize=itemsize)
    return KernelCount("matmul, perfect cache", 2 * n**3, 3 * n**2 * itemsize, "A, B read once, C written once")


def stencil_counts(points: int, npoints: int = 5, itemsize: int = 4, cached: bool = True) -> KernelCount:
    """A weighted ``npoints``-point stencil on ``points`` grid points: ``npoints`` multiplies, ``npoints - 1`` adds.

    ``cached=True``: neighbours come from cache or shared memory, so each input is read once;
    ``cached=False``: every neighbour is a separate device-memory read.
    """
    _positive(points=points, npoints=npoints, itemsize=itemsize)
    flops = (2 * npoints - 1) * points
    if cached:
        return KernelCount(f"{npoints}-point stencil, cached", flops, 2 * points * itemsize,
                           "each input read once (halo reuse), each output written once")
    return KernelCount(f"{npoints}-point stencil, no reuse", flops, (npoints + 1) * points * itemsize,
                       f"{npoints} reads and 1 write per point")


#: Flops per body-body interaction in the all-pairs n-body kernel, the count of Nyland, Harris and Prins,
#: *Fast N-Body Simulation with CUDA* (GPU Gems 3, ch. 31, 2007).
NBODY_FLOPS_PER_INTERACTION = 20


def nbody_counts(n: int, tile: int | None = None, body_bytes: int = 16, accel_bytes: int = 12) -> KernelCount:
    """All-pairs n-body accelerations: ``20 n^2`` flops.

    Each body is a float4 (x, y, z, mass: 16 bytes) and each result a float3 (12 bytes). Without tiles every
    interaction reads the other body from device memory; with shared-memory tiles of ``tile`` bodies each body
    is read ``n / tile`` times in all.
    """
    _positive(n=n, body_bytes=body_bytes, accel_bytes=accel_bytes)
    flops = NBODY_FLOPS_PER_INTERACTION * n * n
    if tile is None:
        return KernelCount("n-body, naive", flops, n * n * body_bytes + n * (body_bytes + accel_bytes),
                           "every interaction loads the other body")
    _positive(tile=tile)
    return KernelCount(f"n-body, tiles of {tile}", flops, n * n * body_bytes / tile + n * (body_bytes + accel_bytes),
                       f"bodies loaded once per tile of {tile}")


def intensity_table(n_vector: int = 2**26, n_matrix: int = 4096, n_grid: int = 4096, n_bodies: int = 65536,
                    itemsize: int = 4) -> pd.DataFrame:
    """The chapter's worked intensities: SAXPY, reduction, matmul (naive, tiled, ideal), stencil, n-body.

    Returns:
        One row per kernel: ``kernel``, ``flops``, ``bytes``, ``intensity`` (FLOP/byte) and ``assumption``.
    """
    counts = [
        saxpy_counts(n_vector, itemsize),
        reduction_counts(n_vector, itemsize),
        matmul_naive_counts(n_matrix, itemsize),
        matmul_tiled_counts(n_matrix, 16, itemsize),
        matmul_tiled_counts(n_matrix, 32, itemsize),
        matmul_ideal_counts(n_matrix, itemsize),
        stencil_counts(n_grid * n_grid, 5, itemsize, cached=False),
        stencil_counts(n_grid * n_grid, 5, itemsize, cached=True),
        nbody_counts(n_bodies),
        nbody_counts(n_bodies, tile=256),
    ]
    return pd.DataFrame([{"kernel": c.kernel, "flops": c.flops, "bytes": c.nbytes, "intensity": c.intensity,
                          "assumption": c.assumption} for c in counts])


# --------------------------------------------------------------------------------- peaks at a clock

#: FP32 add/multiply/FMA results per clock per SM, by compute capability (CUDA C++ Programming Guide,
#: "Arithmetic Instructions", throughput table).
FP32_LANES_PER_SM = {(5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128, (6, 2): 128, (7, 0): 64,
                     (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
                     (10, 0): 128, (12, 0): 128}
#: FP64 results per clock per SM (same source).
FP64_LANES_PER_SM = {(5, 0): 4, (5, 2): 4, (5, 3): 4, (6, 0): 32, (6, 1): 4, (6, 2): 4, (7, 0): 32, (7, 2): 4,
                     (7, 5): 2, (8, 0): 32, (8, 6): 2, (8, 7): 2, (8, 9): 2, (9, 0): 64}


def peak_at_clock_gflops(sm_count: int, clock_khz: int, lanes_per_sm: int) -> float:
    """Arithmetic peak ``SMs * lanes * 2 flops (an FMA) * clock``, in GFLOP/s."""
    return sm_count * lanes_per_sm * 2 * clock_khz * 1e3 / 1e9


def fp32_peak_at_clock(info=None) -> float | None:
    """The FP32 FMA peak of this GPU at the clock it reports (``device_info().clock_khz``), or None if unknown."""
    return _peak_from_info(info, FP32_LANES_PER_SM)


def fp64_peak_at_clock(info=None) -> float | None:
    """The FP64 FMA peak of this GPU at the clock it reports, or None if unknown."""
    return _peak_from_info(info, FP64_LANES_PER_SM)


def _peak_from_info(info, table: dict) -> float | None:
    from .device import device_info

    info = info or device_info()
    if info.is_simulator or not info.sm_count or not info.clock_khz or info.compute_capability is None:
        return None
    lanes = table.get(tuple(info.compute_capability))
    return None if lanes is None else peak_at_clock_gflops(info.sm_count, info.clock_khz, lanes)


# ------------------------------------------------------------------------------------------ ceilings

#: The four ceilings, their units and how plots name them.
CEILING_NAMES = {"dram_gbs": ("device memory (DRAM)", "GB/s"), "l2_gbs": ("L2 cache", "GB/s"),
                 "fp32_gflops": ("FP32 FMA", "GFLOP/s"), "fp64_gflops": ("FP64 FMA", "GFLOP/s")}
CACHE_ENV_VAR = "LABHELPERS_CACHE_DIR"
CEILINGS_FILE = "ceilings.json"
POINTS_FILE = "points.json"
#: Version of the cache files; 2: ceilings measured with the 16-byte copies and the list of copies tried
#: (a cache written by an older version is measured again).
_FORMAT = 2


@dataclass(frozen=True)
class Ceilings:
    """A GPU's roofline ceilings and where they come from.

    Attributes:
        gpu: the GPU's name.
        dram_gbs, l2_gbs: bandwidths in GB/s (None if unknown).
        fp32_gflops, fp64_gflops: FMA peaks in GFLOP/s (None if unknown).
        source: ``"measured"``, ``"reference"`` or ``"datasheet"``.
        label: how plots name them, e.g. ``"measured on NVIDIA H100 80GB HBM3 (2026-11-21)"``.
        details: how each was obtained (kernel, launch, clock, date...).
    """

    gpu: str
    dram_gbs: float | None
    l2_gbs: float | None
    fp32_gflops: float | None
    fp64_gflops: float | None
    source: str
    label: str
    details: dict = field(default_factory=dict)

    def value(self, name: str) -> float | None:
        """The ceiling called ``name`` (``"dram_gbs"``, ``"l2_gbs"``, ``"fp32_gflops"``, ``"fp64_gflops"``)."""
        if name not in CEILING_NAMES:
            raise KeyError(f"unknown ceiling {name!r}: use one of {', '.join(CEILING_NAMES)}")
        v = getattr(self, name)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    def balance(self, compute: str = "fp32_gflops", memory: str = "dram_gbs") -> float:
        """Machine balance (FLOP/byte) for one compute and one memory ceiling."""
        p, b = self.value(compute), self.value(memory)
        if p is None or b is None:
            return float("nan")
        return machine_balance(p, b)

    def attainable(self, intensity, compute: str = "fp32_gflops", memory: str = "dram_gbs"):
        """The roofline ``min(B I, P)`` of these ceilings."""
        return attainable(intensity, self.value(memory), self.value(compute))

    def fp32_peak_at_recorded_clock(self) -> tuple[float, float] | None:
        """``(peak GFLOP/s, clock MHz)``: SMs x FP32 lanes x 2 x the clock recorded with these ceilings, or None."""
        d = self.details
        sm, clock, cc = d.get("sm_count"), d.get("clock_khz"), d.get("compute_capability")
        try:
            lanes = FP32_LANES_PER_SM[tuple(int(v) for v in str(cc).split("."))]
        except (KeyError, ValueError):
            return None
        if not sm or not clock:
            return None
        return peak_at_clock_gflops(int(sm), int(clock), lanes), int(clock) / 1e3

    def as_table(self) -> pd.DataFrame:
        """One row per ceiling: ``ceiling``, ``value``, ``unit``, ``how``."""
        how = self.details.get("how", {})
        return pd.DataFrame([{"ceiling": key, "value": self.value(key), "unit": unit, "how": how.get(key, "")}
                             for key, (_name, unit) in CEILING_NAMES.items()])

    def to_json(self) -> dict:
        """A JSON-ready dict (what the cache file holds)."""
        return {"format": _FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> "Ceilings":
        """Rebuild from :meth:`to_json`'s dict."""
        keys = ("gpu", "dram_gbs", "l2_gbs", "fp32_gflops", "fp64_gflops", "source", "label", "details")
        return cls(**{k: data.get(k) if k != "details" else data.get(k) or {} for k in keys})


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "device"


def cache_root() -> Path:
    """Where measured ceilings and points are kept: ``$LABHELPERS_CACHE_DIR`` or ``~/.cache/labhelpers``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "labhelpers"


def device_cache_dir(device_name: str | None = None) -> Path:
    """The cache folder of one device (the current GPU by default): ``<cache_root>/<device name>/``."""
    if device_name is None:
        from .device import device_info

        device_name = device_info().name
    return cache_root() / _safe_name(device_name)


def _datasheets() -> list[dict]:
    text = resources.files("labhelpers.data").joinpath("datasheets.json").read_text()
    return json.loads(text)["gpus"]


def datasheet_entry(gpu_name: str) -> dict | None:
    """The datasheet record of the first known GPU whose pattern matches ``gpu_name``, or None."""
    for entry in _datasheets():
        if re.search(entry["match"], gpu_name, flags=re.IGNORECASE):
            return entry
    return None


def datasheet_ceilings(gpu_name: str | None = None) -> Ceilings | None:
    """NVIDIA's published ceilings for a known GPU (this one by default), or None for an unknown GPU.

    Datasheets give no L2 bandwidth, so ``l2_gbs`` is None.
    """
    if gpu_name is None:
        from .device import device_info

        info = device_info()
        if info.is_simulator:
            return None
        gpu_name = info.name
    entry = datasheet_entry(gpu_name)
    if entry is None:
        return None
    return Ceilings(gpu=gpu_name, dram_gbs=entry["dram_gbs"], l2_gbs=None, fp32_gflops=entry["fp32_gflops"],
                    fp64_gflops=entry["fp64_gflops"], source="datasheet", label=f"datasheet: {entry['key']}",
                    details={"source": entry["source"], "url": entry["url"], "key": entry["key"],
                             "boost_clock_mhz": entry.get("boost_clock_mhz"), "sm_count": entry.get("sm_count")})


def datasheet_table() -> pd.DataFrame:
    """Every known GPU's datasheet ceilings, with the source of each."""
    return pd.DataFrame([{k: e.get(k) for k in ("key", "dram_gbs", "fp32_gflops", "fp64_gflops", "sm_count",
                                                  "boost_clock_mhz", "source")} for e in _datasheets()])


@dataclass(frozen=True)
class CeilingMeasurement:
    """One measured ceiling: the best value over the configurations tried, and which one gave it."""

    value: float
    unit: str
    how: str
    tried: tuple = ()


def _gpu_only(what: str) -> None:
    if backend.is_simulator():
        raise GPUOnlyError(
            f"{what} measures this machine's GPU, and there is none here (the simulator's speed says nothing "
            "about a GPU). Use labhelpers.roofline.reference_ceilings() for the ceilings measured on the "
            "reference GPU, or datasheet_ceilings('H100 SXM') for a datasheet."
        )


def _free_bytes() -> int:
    from numba import cuda

    try:
        free, _total = cuda.current_context().get_memory_info()
        return int(free)
    except Exception:
        return 2**32


#: The copies :func:`measure_dram_bandwidth` tries: ``(kernel, element dtype, threads per block, grid)``.
#: ``"one wave"``: just enough blocks to fill every SM once, each thread looping over the array with four
#: loads in flight (a grid-stride loop); ``"one element per thread"``: one block per ``threads`` elements,
#: the shape of a library's element-wise kernel. The element size is the width of every load and store.
COPY_VARIANTS: tuple[tuple[str, str, int, str], ...] = (
    ("stream_copy", "float32", 256, "one element per thread"),
    ("stream_copy", "float32", 256, "one wave"),
    ("stream_copy", "float64", 256, "one wave"),
    ("stream_copy16", "complex128", 256, "one wave"),
    ("stream_copy16", "complex128", 512, "one wave"),
    ("stream_copy16", "complex128", 1024, "one wave"),
    ("stream_copy16", "complex128", 256, "one element per thread"),
)


def measure_dram_bandwidth(nbytes: int = 2**30,
                           variants: Sequence[tuple[str, str, int, str]] = COPY_VARIANTS) -> CeilingMeasurement:
    """Device-memory bandwidth: the best of a few streaming copies (:data:`COPY_VARIANTS`) of ``nbytes``.

    Every variant copies the same two buffers, viewed with the element size it moves (4, 8 or 16 bytes per
    access). Bytes are counted as read + written, like a device-to-device copy. Each is timed with CUDA
    events, five launches between two events so the host's launch overhead is not in the time.

    Returns:
        The best variant's GB/s; ``tried`` holds one dict per variant (``kernel``, ``access_bytes``,
        ``threads``, ``blocks``, ``grid``, ``gbps``, ``how``).
    """
    _gpu_only("measure_dram_bandwidth")
    from numba import cuda

    from .kernels import roofline as rk
    from .launch import blocks_for
    from .timing import benchmark

    nbytes = int(min(nbytes, _free_bytes() // 4)) // 16 * 16
    src = cuda.device_array(nbytes // 16, dtype=np.complex128)
    dst = cuda.device_array(nbytes // 16, dtype=np.complex128)
    tried = []
    for kernel_name, dtype, threads, grid in variants:
        kernel = getattr(rk, kernel_name)
        x, out = src.view(dtype), dst.view(dtype)
        n, itemsize = x.shape[0], np.dtype(dtype).itemsize
        blocks = rk.full_grid(threads)[0] if grid == "one wave" else blocks_for(n, threads)
        t = benchmark(lambda k=kernel, b=blocks, th=threads, x=x, out=out: k[b, th](x, out),
                      nbytes=rk.stream_copy_bytes(n, itemsize), warmup=2, repeat=10, number=5, label=kernel_name)
        how = (f"{kernel_name}, {itemsize}-byte accesses, {grid}: {blocks} blocks x {threads} threads, "
               f"{nbytes / 2**20:,.0f} MiB copied")
        tried.append({"kernel": kernel_name, "access_bytes": itemsize, "threads": threads, "blocks": blocks,
                      "grid": grid, "gbps": t.gbps, "how": how})
    best = max(tried, key=lambda row: row["gbps"])
    return CeilingMeasurement(best["gbps"], "GB/s", best["how"], tuple(tried))


def measure_l2_bandwidth(working_set: int | None = None, threads: int = 256,
                         dtypes: Sequence = (np.float32, np.float64)) -> CeilingMeasurement:
    """L2 bandwidth: :func:`~labhelpers.kernels.roofline.l2_read` over a buffer a quarter of the L2's size.

    Counts bytes read (the kernel stores nothing but one sum per thread).
    """
    _gpu_only("measure_l2_bandwidth")
    from numba import cuda

    from .device import device_info
    from .kernels.roofline import full_grid, l2_read, l2_read_bytes, l2_step
    from .timing import benchmark

    if working_set is None:
        l2 = device_info().l2_bytes or 2**24
        working_set = 2 ** int(math.floor(math.log2(max(l2 // 4, 2**16))))
    blocks, threads = full_grid(threads)
    total = blocks * threads
    best, tried = None, []
    for dtype in dtypes:
        itemsize = np.dtype(dtype).itemsize
        n = working_set // itemsize
        x = cuda.to_device(np.ones(n, dtype=dtype))
        out = cuda.device_array(total, dtype=np.float32)
        steps = 4 * max(1, int(8e9 / (total * itemsize)) // 4)  # about 8 GB read per launch
        step = l2_step(total)
        t = benchmark(lambda: l2_read[blocks, threads](x, out, steps, step),
                      nbytes=l2_read_bytes(total, steps, itemsize), warmup=2, repeat=10, number=3, label="l2_read")
        how = (f"l2_read, {np.dtype(dtype).name}, {working_set / 2**20:,.0f} MiB working set, "
               f"{blocks} blocks x {threads} threads")
        tried.append((how, t.gbps))
        if best is None or t.gbps > best[1]:
            best = (how, t.gbps)
    return CeilingMeasurement(best[1], "GB/s", best[0], tuple(tried))


def measure_fma_peak(dtype=np.float32, threads_options: Sequence[int] = (256, 1024),
                     target_ms: float = 5.0) -> CeilingMeasurement:
    """FMA peak: :func:`~labhelpers.kernels.roofline.fma_chains`, eight chains per thread, every SM full."""
    _gpu_only("measure_fma_peak")
    from numba import cuda

    from .kernels.roofline import fma_chains, fma_chains_flops, full_grid
    from .timing import benchmark

    dtype = np.dtype(dtype).type
    guess = (fp32_peak_at_clock() if dtype is np.float32 else fp64_peak_at_clock()) or 20_000.0
    best, tried = None, []
    for threads in threads_options:
        blocks, threads = full_grid(threads)
        total = blocks * threads
        iters = max(1, int(guess * 1e9 * target_ms * 1e-3 / fma_chains_flops(total, 1)))
        start = cuda.to_device(np.ones(total, dtype=dtype))
        a, b = dtype(0.999), dtype(0.001)
        t = benchmark(lambda: fma_chains[blocks, threads](start, iters, a, b), flops=fma_chains_flops(total, iters),
                      warmup=2, repeat=10, label="fma_chains")
        how = f"fma_chains, {np.dtype(dtype).name}, 8 chains/thread, {blocks} blocks x {threads} threads"
        tried.append((how, t.gflops))
        if best is None or t.gflops > best[1]:
            best = (how, t.gflops)
    return CeilingMeasurement(best[1], "GFLOP/s", best[0], tuple(tried))


def load_cached_ceilings(device_name: str | None = None) -> Ceilings | None:
    """The ceilings cached for this device (or ``device_name``), or None if none were measured yet."""
    path = device_cache_dir(device_name) / CEILINGS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("format") != _FORMAT:
            return None
        return Ceilings.from_json(data)
    except (ValueError, TypeError, KeyError):
        return None


def measure_ceilings(*, refresh: bool = False, cache: bool = True, progress: bool = True) -> Ceilings:
    """Measure (or read from the cache) the ceilings of the GPU this runs on.

    Args:
        refresh: measure again even if a cached result exists.
        cache: read and write ``<cache_root>/<device>/ceilings.json``.
        progress: show a progress bar.

    Raises:
        GPUOnlyError: under the simulator (use :func:`reference_ceilings`).
    """
    _gpu_only("measure_ceilings")
    from tqdm.auto import tqdm

    from .device import device_info

    info = device_info()
    if cache and not refresh:
        cached = load_cached_ceilings(info.name)
        if cached is not None:
            return cached
    steps: list[tuple[str, str, Callable[[], CeilingMeasurement]]] = [
        ("dram_gbs", "device-memory bandwidth", measure_dram_bandwidth),
        ("l2_gbs", "L2 bandwidth", measure_l2_bandwidth),
        ("fp32_gflops", "FP32 FMA peak", lambda: measure_fma_peak(np.float32)),
        ("fp64_gflops", "FP64 FMA peak", lambda: measure_fma_peak(np.float64)),
    ]
    values, how, tried = {}, {}, {}
    with tqdm(total=len(steps), desc="measuring ceilings", disable=not progress) as bar:
        for key, label, measure in steps:
            bar.set_postfix_str(label)
            result = measure()
            values[key], how[key] = result.value, result.how
            tried[key] = [row if isinstance(row, dict) else {"how": row[0], "value": row[1]} for row in result.tried]
            bar.update()
    today = _dt.date.today().isoformat()
    ceilings = Ceilings(gpu=info.name, source="measured", label=f"measured on {info.name} ({today})",
                        details={"how": how, "tried": tried, "date": today, "clock_khz": info.clock_khz,
                                 "sm_count": info.sm_count, "compute_capability": info.cc,
                                 "driver": info.driver_version}, **values)
    if cache:
        path = device_cache_dir(info.name) / CEILINGS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ceilings.to_json(), indent=1) + "\n")
    return ceilings


#: Columns of :func:`copy_variants_table` (and of reference data ``ch07_copy_variants``).
COPY_VARIANT_COLUMNS = ["kernel", "access_bytes", "threads", "blocks", "grid", "gbps"]


def copy_variants_table(ceilings: Ceilings) -> pd.DataFrame:
    """The streaming copies tried for the device-memory ceiling, fastest first (empty if none were recorded)."""
    rows = ceilings.details.get("tried", {}).get("dram_gbs", [])
    table = pd.DataFrame([r for r in rows if isinstance(r, dict) and "gbps" in r], columns=COPY_VARIANT_COLUMNS)
    return table.sort_values("gbps", ascending=False, ignore_index=True)


#: Reference data with the copies tried on the reference GPU (written by ``bench/roofline.py``).
REF_COPY_VARIANTS = "ch07_copy_variants"


def copy_variants_or_reference(ceilings: Ceilings) -> tuple[pd.DataFrame, str]:
    """The copies tried for ``ceilings``' DRAM figure when they were measured here; else the reference GPU's.

    Returns:
        ``(table, label)``; an empty table (and a label saying so) when neither exists.
    """
    if ceilings.source == "measured":
        table = copy_variants_table(ceilings)
        if len(table):
            return table, ceilings.label
    from .refdata import load_reference

    try:
        ref = load_reference(REF_COPY_VARIANTS)
    except FileNotFoundError:
        return (pd.DataFrame(columns=COPY_VARIANT_COLUMNS),
                f"no list of copy variants: reference data {REF_COPY_VARIANTS!r} has not been measured yet")
    return numeric_columns(ref.table), ref.label


#: Reference data names this module reads.
REF_CEILINGS = "ch07_ceilings"
REF_POINTS = "ch07_roofline_points"


def ceilings_from_table(table: pd.DataFrame, gpu: str, label: str, source: str = "reference",
                        details: dict | None = None) -> Ceilings:
    """Rebuild :class:`Ceilings` from :meth:`Ceilings.as_table`'s table (as reference data stores it)."""
    values = {}
    how = {}
    for _, row in table.iterrows():
        v = row["value"]
        values[row["ceiling"]] = float("nan") if v is None else float(v)  # NaN: not measured
        how[row["ceiling"]] = row.get("how", "")
    return Ceilings(gpu=gpu, source=source, label=label, details={"how": how, **(details or {})},
                    **{k: values.get(k) for k in CEILING_NAMES})


def reference_ceilings() -> Ceilings:
    """The ceilings measured on the reference GPU (reference data ``ch07_ceilings``), labelled with that GPU."""
    from .refdata import load_reference

    ref = load_reference(REF_CEILINGS)
    return ceilings_from_table(ref.table, ref.gpu, ref.label, details=dict(ref.meta))


def ceilings_or_reference(*, progress: bool = True) -> tuple[Ceilings, str | None]:
    """This GPU's ceilings (measured or cached) on a GPU; the reference GPU's without one.

    Returns:
        ``(ceilings, note)`` where ``note`` says why reference ceilings were used (None on a GPU).
    """
    try:
        return measure_ceilings(progress=progress), None
    except GPUOnlyError:
        ref = reference_ceilings()
        return ref, f"No GPU here: using the ceilings measured on the reference GPU, {ref.gpu}."


def compare_ceilings(measured: Ceilings, datasheet: Ceilings | None) -> pd.DataFrame:
    """Measured ceilings beside the datasheet's, with the ratio measured / datasheet."""
    rows = []
    for key, (name, unit) in CEILING_NAMES.items():
        m = measured.value(key)
        d = datasheet.value(key) if datasheet is not None else None
        rows.append({"ceiling": name, "unit": unit, "measured": m, "datasheet": d,
                     "measured / datasheet": (m / d) if (m is not None and d) else None})
    table = pd.DataFrame(rows)
    return table


# -------------------------------------------------------------------------------------------- points

POINT_COLUMNS = ["name", "chapter", "precision", "flops", "nbytes", "intensity", "median_ms", "gflops", "gbps", "date"]
PRECISIONS = ("fp32", "fp64")


def _read_points(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
        points = data.get("points", [])
        return [p for p in points if isinstance(p, dict) and "name" in p]
    except (ValueError, AttributeError):
        return []


def record_point(name: str, flops: float, nbytes: float, timing: Timing, chapter: str = "",
                 precision: str = "fp32") -> dict:
    """Add a kernel measured on this GPU to its roofline (``points.json`` in the device's cache folder).

    A point with the same ``name`` and ``chapter`` is replaced, so re-running a notebook does not duplicate it.

    Args:
        name: what was measured, e.g. ``"tiled matmul 2048 (32x32 tiles)"``.
        flops: floating-point operations of one run.
        nbytes: bytes one run moves through device memory (your count: state the assumption in the name).
        timing: a :class:`~labhelpers.timing.Timing` from :func:`~labhelpers.timing.benchmark` on this GPU.
        chapter: the chapter that measured it, e.g. ``"05"``.
        precision: ``"fp32"`` or ``"fp64"``: which arithmetic roof the point is read against.

    Returns:
        The stored record.

    Raises:
        GPUOnlyError: the timing is not a GPU timing (simulator, or a host clock).
        ValueError: flops or bytes are not positive.
    """
    if not isinstance(timing, Timing) or not timing.is_gpu_timing:
        raise GPUOnlyError(
            f"record_point({name!r}): only real GPU timings (CUDA events from lh.benchmark on a GPU) go on this "
            "GPU's roofline; this timing is from the simulator or a host clock, so it is not recorded."
        )
    if not flops or flops <= 0 or not nbytes or nbytes <= 0:
        raise ValueError(f"record_point({name!r}): flops and nbytes must be positive, got {flops} and {nbytes}: "
                         "a point on the roofline needs both (its intensity is flops / nbytes)")
    if precision not in PRECISIONS:
        raise ValueError(f"record_point({name!r}): precision must be one of {PRECISIONS}, got {precision!r}")
    seconds = timing.median_ms * 1e-3
    record = {"name": str(name), "chapter": str(chapter), "precision": precision, "flops": float(flops),
              "nbytes": float(nbytes),
              "intensity": flops / nbytes, "median_ms": timing.median_ms, "gflops": flops / seconds / 1e9,
              "gbps": nbytes / seconds / 1e9, "date": _dt.date.today().isoformat()}
    from .device import device_info

    path = device_cache_dir() / POINTS_FILE
    points = [p for p in _read_points(path) if not (p["name"] == record["name"] and
                                                    p.get("chapter", "") == record["chapter"])]
    points.append(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": _FORMAT, "device": device_info().name, "points": points}, indent=1) + "\n")
    return record


def load_points(device_name: str | None = None) -> pd.DataFrame:
    """Every point recorded on this GPU (or on ``device_name``), as a table (empty under the simulator)."""
    if device_name is None and backend.is_simulator():
        return pd.DataFrame(columns=POINT_COLUMNS)
    points = _read_points(device_cache_dir(device_name) / POINTS_FILE)
    return pd.DataFrame(points, columns=POINT_COLUMNS) if points else pd.DataFrame(columns=POINT_COLUMNS)


def clear_points(device_name: str | None = None) -> None:
    """Forget the points recorded on this GPU (or on ``device_name``)."""
    path = device_cache_dir(device_name) / POINTS_FILE
    if path.exists():
        path.unlink()


def fraction_of_roof(points: pd.DataFrame, ceilings: Ceilings, memory: str = "dram_gbs") -> pd.Series:
    """Each point's GFLOP/s over the roofline at its intensity (the FP64 roof for ``precision == "fp64"``)."""
    fractions = []
    for _, row in points.iterrows():
        compute = "fp64_gflops" if row.get("precision", "fp32") == "fp64" else "fp32_gflops"
        b, p = ceilings.value(memory), ceilings.value(compute)
        try:
            roof = attainable(float(row["intensity"]), b, p) if b and p else float("nan")
            fractions.append(float(row["gflops"]) / roof)
        except (TypeError, ValueError, ZeroDivisionError):
            fractions.append(float("nan"))
    return pd.Series(fractions, index=points.index, name="fraction of roof")


def numeric_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every column whose values are all numbers or missing (None) converted to floats.

    Reference files store a missing measurement as ``null``, which pandas reads as None in an object column.
    """
    table = table.copy()
    for column in table.columns:
        values = table[column]
        if values.dtype == object and all(v is None or isinstance(v, (int, float)) for v in values):
            table[column] = pd.to_numeric(values, errors="coerce")
    return table


def reference_points() -> tuple[pd.DataFrame, str]:
    """The reference GPU's roofline points (reference data ``ch07_roofline_points``) and their label."""
    from .refdata import load_reference

    ref = load_reference(REF_POINTS)
    return numeric_columns(ref.table), ref.label


def points_or_reference() -> tuple[pd.DataFrame, str]:
    """This GPU's recorded points when there are any; otherwise the reference GPU's. Returns ``(table, label)``."""
    if backend.is_gpu():
        from .device import device_info

        live = load_points()
        if len(live):
            return live, f"measured on this machine: {device_info().name}"
    return reference_points()


def measured_or_reference(measure: Callable[[], pd.DataFrame], reference_name: str) -> tuple[pd.DataFrame, str]:
    """Run ``measure()`` on a GPU; without one, load reference data ``reference_name``. Returns ``(table, label)``."""
    if backend.is_gpu():
        from .device import device_info

        try:
            return measure(), f"this machine: {device_info().name}"
        except GPUOnlyError as exc:  # e.g. CuPy missing on this GPU machine
            print(f"Not measured here ({exc}): showing reference data.")
    from .refdata import load_reference

    ref = load_reference(reference_name)
    return numeric_columns(ref.table), ref.label


# ------------------------------------------------------------------------------------------ plotting

_MEMORY_STYLE = {"dram_gbs": {"color": "C0"}, "l2_gbs": {"color": "C2"}}
_COMPUTE_STYLE = {"fp32_gflops": {"color": "C3"}, "fp64_gflops": {"color": "C1"}}


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _fmt(v: float) -> str:
    return f"{v / 1e3:,.1f} T" if v >= 1e4 else f"{v:,.0f} "


def plot_roofline(ax, ceilings: Ceilings, points: pd.DataFrame | None = None, *,
                  memory: Sequence[str] = ("dram_gbs", "l2_gbs"),
                  compute: Sequence[str] = ("fp32_gflops", "fp64_gflops"),
                  datasheet: Ceilings | None = None, points_label: str | None = None, highlight: str | None = None,
                  label_points: bool = True, xlim: tuple[float, float] | None = None, legend: str = "outside"):
    """Draw a roofline: bandwidth roofs (slanted), FMA roofs (flat), and measured points.

    Args:
        ax: matplotlib axes.
        ceilings: the roofs to draw (their ``label`` says where they come from).
        points: a table with ``name``, ``intensity`` (FLOP/byte) and ``gflops``; rows with NaN are skipped.
        memory, compute: which ceilings to draw.
        datasheet: optional datasheet ceilings, drawn as thin dashed grey lines.
        points_label: where the points come from (shown in the legend).
        highlight: name of a point to draw larger.
        label_points: write each point's name beside it.
        xlim: intensity range; by default it covers the points and the ridge points.
        legend: ``"outside"`` (right of the axes) or a matplotlib location such as ``"lower right"``.

    Returns:
        The axes.
    """
    mems = [(k, ceilings.value(k)) for k in memory if _finite(ceilings.value(k))]
    comps = [(k, ceilings.value(k)) for k in compute if _finite(ceilings.value(k))]
    pts = None
    if points is not None and len(points):
        pts = points[np.isfinite(pd.to_numeric(points["intensity"], errors="coerce")) &
                     np.isfinite(pd.to_numeric(points["gflops"], errors="coerce"))]
        pts = pts[(pts["intensity"].astype(float) > 0) & (pts["gflops"].astype(float) > 0)]
    if xlim is None:
        xs = [1 / 16, 1024.0]
        if pts is not None and len(pts):
            xs += [float(pts["intensity"].min()) / 2, float(pts["intensity"].max()) * 2]
        xlim = (min(xs), max(xs))
    lo, hi = xlim
    top = max([v for _, v in comps], default=None)
    grid = np.geomspace(lo, hi, 400)
    for key, bw in mems:
        y = bw * grid if top is None else np.minimum(bw * grid, top)
        ax.plot(grid, y, lw=2, label=f"{CEILING_NAMES[key][0]}: {bw:,.0f} GB/s", **_MEMORY_STYLE[key])
    fastest = max([v for _, v in mems], default=None)
    for key, peak in comps:
        start = peak / fastest if fastest else lo
        xs = np.geomspace(max(start, lo), hi, 50)
        ax.plot(xs, np.full_like(xs, peak), lw=2, label=f"{CEILING_NAMES[key][0]}: {_fmt(peak)}FLOP/s",
                **_COMPUTE_STYLE[key])
    if mems and comps:
        dram = ceilings.value("dram_gbs")
        fp32 = ceilings.value("fp32_gflops")
        if _finite(dram) and _finite(fp32) and "dram_gbs" in memory and "fp32_gflops" in compute:
            ridge = fp32 / dram
            ax.axvline(ridge, color="0.4", ls=":", lw=1)
            ax.annotate(f" ridge: {ridge:.1f} FLOP/B", (ridge, 0.98), xycoords=("data", "axes fraction"),
                        va="top", fontsize=8, color="0.3")
    if datasheet is not None:
        sheet_top = max([v for v in (datasheet.value(k) for k in compute) if _finite(v)], default=None)
        for key in memory:
            bw = datasheet.value(key)
            if _finite(bw):
                ax.plot(grid, bw * grid if sheet_top is None else np.minimum(bw * grid, sheet_top), ls="--",
                        lw=0.8, color="0.5")
        for key in compute:
            peak = datasheet.value(key)
            if _finite(peak):
                ax.axhline(peak, ls="--", lw=0.8, color="0.5")
        ax.plot([], [], ls="--", lw=0.8, color="0.5", label=datasheet.label)
    if pts is not None and len(pts):
        for i, (_, row) in enumerate(pts.iterrows()):
            big = highlight is not None and row["name"] == highlight
            marker = "s" if row.get("precision", "fp32") == "fp64" else "o"
            ax.plot(row["intensity"], row["gflops"], marker, color="k" if big else f"C{(i + 4) % 10}",
                    ms=9 if big else 5, zorder=5)
        fp64 = "precision" in pts and (pts["precision"] == "fp64").any()
        ax.plot([], [], "o", color="0.3", ms=5,
                label=(points_label or "measured kernels") + (" (squares: FP64)" if fp64 else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ymax = max([v for _, v in comps] + ([float(pts["gflops"].max())] if pts is not None and len(pts) else []),
               default=1e3)
    ax.set_ylim(bottom=max(1.0, (min(v for _, v in mems) if mems else 10) * lo / 2), top=ymax * 3)
    if label_points and pts is not None and len(pts):
        _label_points(ax, pts)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Roofline, ceilings {ceilings.label}", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        if legend == "outside":
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ax.legend(fontsize=7, loc=legend)
    if not mems and not comps:
        ax.text(0.5, 0.5, "no ceilings to draw (not measured yet)", transform=ax.transAxes, ha="center")
    return ax


#: Where a point's label may go, tried in order: right-above, right-below, left-above, left-below, then
#: further up and down (offsets in points, and the horizontal alignment).
_LABEL_SPOTS = ((5, 4, "left"), (5, -11, "left"), (-5, 4, "right"), (-5, -11, "right"), (5, 14, "left"),
                (5, -21, "left"), (-5, 14, "right"), (-5, -21, "right"))


def _label_points(ax, pts: pd.DataFrame) -> None:
    """Name each point, at the first spot where the label stays inside the axes and covers no other label and
    no roof; if there is no such spot, at the first one that at least covers no other label."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    roofs = [line.get_path().transformed(line.get_transform()) for line in ax.lines
             if line.get_linestyle() not in ("None", "", " ") and len(line.get_xdata()) > 1]
    placed = []
    for _, row in pts.iterrows():
        fallback = None
        chosen = None
        for dx, dy, ha in _LABEL_SPOTS:
            label = ax.annotate(str(row["name"]), (row["intensity"], row["gflops"]), textcoords="offset points",
                                xytext=(dx, dy), ha=ha, fontsize=7)
            box = label.get_window_extent(renderer)
            label.remove()
            free = not any(box.overlaps(other) for other in placed)
            within = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if free and within and not any(path.intersects_bbox(box, filled=False) for path in roofs):
                chosen = (dx, dy, ha)
                break
            if fallback is None and free and within:
                fallback = (dx, dy, ha)
        dx, dy, ha = chosen or fallback or _LABEL_SPOTS[0]
        label = ax.annotate(str(row["name"]), (row["intensity"], row["gflops"]), textcoords="offset points",
                            xytext=(dx, dy), ha=ha, fontsize=7)
        placed.append(label.get_window_extent(renderer))


def roofline_explorer(ceilings: Ceilings, points: pd.DataFrame, *, datasheet: Ceilings | None = None,
                      points_label: str | None = None):
    """A widget: pick which kernels and which ceilings the roofline shows."""
    import ipywidgets as widgets

    from .widgets import interactive_figure

    names = [str(n) for n in points["name"]] if points is not None and len(points) else []
    kernels = widgets.SelectMultiple(options=names, value=tuple(names), rows=min(8, max(2, len(names))),
                                     description="kernels")
    available = [k for k in CEILING_NAMES if _finite(ceilings.value(k))]
    roofs = widgets.SelectMultiple(options=available, value=tuple(available), rows=4, description="ceilings")
    sheet = widgets.Checkbox(value=datasheet is not None, description="datasheet", disabled=datasheet is None)

    def draw(ax, kernels, ceilings_shown, datasheet_shown):
        chosen = points[points["name"].astype(str).isin(kernels)] if names else None
        plot_roofline(ax, ceilings, chosen, memory=[k for k in ceilings_shown if k.endswith("gbs")],
                      compute=[k for k in ceilings_shown if k.endswith("gflops")],
                      datasheet=datasheet if datasheet_shown else None, points_label=points_label)

    return interactive_figure(draw, figsize=(8, 4.5), kernels=kernels, ceilings_shown=roofs, datasheet_shown=sheet)


def sweep_explorer(ceilings: Ceilings, table: pd.DataFrame, label: str):
    """A widget: a slider over the FMA count of the intensity sweep; the kernel's point moves along the roof."""
    import ipywidgets as widgets

    from .widgets import interactive_figure

    table = numeric_columns(table)
    values = [int(v) for v in table["nfma"]]
    start = values[len(values) // 2] if values else 0
    slider = widgets.SelectionSlider(options=values, value=start, description="FMA/elem", continuous_update=False)

    def draw(ax, nfma):
        plot_roofline(ax, ceilings, None, memory=("dram_gbs",), compute=("fp32_gflops",), label_points=False,
                      xlim=(1 / 8, 512))
        ok = table[np.isfinite(pd.to_numeric(table["gflops"], errors="coerce"))]
        if len(ok):
            ax.plot(ok["intensity"], ok["gflops"], "-", color="0.6", lw=1, label=f"sweep ({label})")
        row = table[table["nfma"] == nfma].iloc[0]
        intensity = float(row["intensity"])
        roof = ceilings.attainable(intensity) if _finite(ceilings.value("dram_gbs")) else float("nan")
        ax.axvline(intensity, color="0.8", lw=0.8)
        if math.isfinite(float(row["gflops"])):
            ax.plot([intensity], [row["gflops"]], "o", color="k", ms=9, zorder=6)
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B, {row['gflops']:,.0f} GFLOP/s"
            if math.isfinite(roof):
                which = bound(intensity, ceilings.value("dram_gbs"), ceilings.value("fp32_gflops"))
                text += f" ({row['gflops'] / roof:.0%} of the roof, {which} bound)"
        else:
            text = f"{nfma} FMA/element: I = {intensity:g} FLOP/B (no timing for this point)"
        ax.set_title(text, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

    return interactive_figure(draw, figsize=(8, 4.5), nfma=slider)


def plot_sweep_times(ax, table: pd.DataFrame, label: str, ridge_nfma: float | None = None,
                     ridge_label: str = "ridge"):
    """Time per launch against FMAs per element for the intensity sweep, with an optional ridge line."""
    table = numeric_columns(table)
    ms = table["median_ms"]
    ok = np.isfinite(ms) & (ms > 0)
    ax.plot(table["nfma"], ms, "o-", label=f"measured ({label})")
    if ridge_nfma is not None and math.isfinite(ridge_nfma) and ridge_nfma > 0:
        ax.axvline(ridge_nfma, color="C3", ls="--", label=f"{ridge_label}: {ridge_nfma:.0f} FMA/element")
    ax.set_xscale("log", base=2)
    if ok.any():
        ticker = plt_ticker()
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.text(0.5, 0.5, "no timings in this table", transform=ax.transAxes, ha="center")
    ax.set_xlabel("FMAs per element (nfma)")
    ax.set_ylabel("ms per launch")
    ax.set_title(f"fma_per_element, 2^26 float32 ({label})", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")
    return ax


def plt_ticker():
    """matplotlib's ticker module (imported when a plot needs it)."""
    import matplotlib.ticker

    return matplotlib.ticker


def plot_timing_hygiene(ax, table: pd.DataFrame, label: str):
    """Bar chart of :func:`~labhelpers.kernels.roofline.timing_hygiene`'s four numbers (log scale)."""
    ms = pd.to_numeric(table["ms"], errors="coerce")
    ax.barh(range(len(table)), ms.fillna(0), color=["C3", "C1", "C0", "C2"][: len(table)])
    ax.set_yticks(range(len(table)), table["measurement"], fontsize=8)
    ax.invert_yaxis()
    if (ms > 0).any():
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "no timings in this table", transform=ax.transAxes, ha="center")
    for i, v in enumerate(ms):
        if math.isfinite(v):
            ax.text(v, i, f" {v:,.3g} ms", va="center", fontsize=8)
    ax.set_xlabel("milliseconds (log scale)")
    ax.set_title(f"One kernel, four clocks ({label})", fontsize=9)
    return ax


def plot_copy_variants(ax, table: pd.DataFrame, label: str, datasheet_gbs: float | None = None):
    """Horizontal bars: GB/s of each streaming copy tried for the DRAM ceiling, fastest on top."""
    if not len(table):
        ax.text(0.5, 0.5, f"nothing to show ({label})", transform=ax.transAxes, ha="center", fontsize=8)
        ax.set_axis_off()
        return ax
    table = numeric_columns(table).sort_values("gbps", ascending=True, ignore_index=True)

    def name(row) -> str:
        if not _finite(row.get("access_bytes")):
            return str(row["kernel"])
        grid = ("one wave, grid-stride" if row["grid"] == "one wave" else str(row["grid"]))
        return f"{row['kernel']}: {int(row['access_bytes'])} B/access, {grid}, {int(row['threads'])} thr/block"

    ours = table["access_bytes"].map(_finite)
    best = table["gbps"].where(ours).idxmax() if ours.any() else None
    colors = ["C2" if i == best else ("C0" if mine else "0.6") for i, mine in zip(table.index, ours)]
    ax.barh(range(len(table)), table["gbps"].fillna(0), color=colors)
    ax.set_yticks(range(len(table)), [name(r) for _, r in table.iterrows()], fontsize=7)
    for i, v in enumerate(table["gbps"]):
        if _finite(v):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=7)
    if datasheet_gbs:
        ax.axvline(datasheet_gbs, color="0.4", ls="--", lw=1, label=f"datasheet: {datasheet_gbs:,.0f} GB/s")
        ax.legend(fontsize=7, loc="lower right")
    ax.set_xlim(0, max(float(table["gbps"].max()), datasheet_gbs or 0) * 1.12)
    ax.set_xlabel("GB/s (bytes read + written, 1 GiB copied)")
    ax.set_title(f"Copies tried for the device-memory ceiling, green: the one kept ({label})", fontsize=9)
    return ax


def plot_skewed_gemm(axes, table: pd.DataFrame, label: str, ceilings: Ceilings | None = None):
    """The skewed GEMM: GFLOP/s per shape (left) and the same shapes on the roofline (right)."""
    left, right = axes
    g = pd.to_numeric(table["gflops"], errors="coerce")
    left.bar(range(len(table)), g.fillna(0), color="C0")
    left.set_xticks(range(len(table)), table["shape"], rotation=60, ha="right", fontsize=7)
    left.set_ylabel("GFLOP/s")
    left.set_xlabel("m-n-k (m x n constant, k = %d)" % int(table["k"].iloc[0]))
    left.set_title(f"cupy.matmul, float32 ({label})", fontsize=9)
    if ceilings is not None:
        pts = table.assign(name=[f"n={int(v)}" for v in table["n"]])
        ok = np.isfinite(g) & (g > 0)
        if ok.any():  # the path the shapes take as n shrinks
            right.plot(pts["intensity"][ok], g[ok], "-", color="0.75", lw=1, zorder=4)
        plot_roofline(right, ceilings, pts, memory=("dram_gbs", "l2_gbs"), compute=("fp32_gflops",),
                      points_label=label, xlim=(1 / 4, 1024), legend="lower right")
        right.set_title("the same shapes on the roofline (labels: n; m x n and k = 1024 fixed)", fontsize=9)
    return axes
