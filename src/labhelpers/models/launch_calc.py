"""The numbers that decide a launch: blocks, idle threads and warps, and the device limits behind them.

* :func:`summarize_launch` turns ``(n, threads per block)`` into a :class:`LaunchSummary`
  (blocks, threads launched, idle threads, warps, lanes left empty);
  :func:`labhelpers.figures.cuda_intro.draw_launch` draws it, one rectangle per block, for chapter 1's
  calculator widget.
* :func:`launch_2d` is the 2D version of :func:`labhelpers.launch.launch_1d`: x along
  columns, y along rows.
* :func:`device_properties_table` stores a GPU's properties as a two-column table (the
  reference ``ch01_device_properties``); :func:`describe_device` makes it readable and
  :func:`compare_with_older_gpus` sets it next to the ``deviceQuery`` table of three older GPUs
  published in the *GPU Computing* course walkthrough, 2025 (GTX 480, Tesla K20c, RTX 2080 Ti).
* :data:`CC_FEATURES` lists the compute-capability features the book relies on;
  :func:`compute_capability_features` tabulates them, and says which a given GPU has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import validate
from ..device import DeviceInfo
from ..errors import LaunchConfigError
from ..launch import MAX_THREADS_PER_BLOCK, WARP_SIZE, blocks_for, launch_1d, launch_2d  # noqa: F401  (chapter 1 calls launch_calc.launch_2d)

#: Largest block extent per dimension (x, y, z) on every GPU since Fermi (CUDA C++ Programming Guide,
#: "Technical Specifications per Compute Capability").
MAX_BLOCK_DIMS = validate.MAX_BLOCK_DIMS


@dataclass(frozen=True)
class LaunchSummary:
    """What a 1D launch of ``blocks`` blocks of ``threads`` threads does for ``n`` elements."""

    n: int
    threads: int
    blocks: int
    total_threads: int
    idle_threads: int
    warps_per_block: int
    warps: int
    empty_lanes: int

    @property
    def lanes(self) -> int:
        """Warp lanes the launch occupies: ``warps * 32`` (a partly filled warp still takes 32)."""
        return self.warps * WARP_SIZE

    @property
    def lane_efficiency(self) -> float:
        """Fraction of the occupied lanes that have an element to work on: ``n / lanes``."""
        return self.n / self.lanes

    def as_table(self) -> pd.DataFrame:
        """The numbers as a one-column table, for display."""
        rows = {
            "elements n": self.n,
            "threads per block": self.threads,
            "blocks = ceil(n / threads)": self.blocks,
            "threads launched": self.total_threads,
            "idle threads (the bounds check stops them)": self.idle_threads,
            "warps per block": self.warps_per_block,
            "warps launched": self.warps,
            "empty lanes (threads per block not a multiple of 32)": self.empty_lanes,
            "lanes with work": f"{self.lane_efficiency:.1%}",
        }
        return pd.DataFrame({"value": list(rows.values())}, index=pd.Index(list(rows), name="launch"))


def summarize_launch(n: int, threads: int, *, max_threads: int = MAX_THREADS_PER_BLOCK) -> LaunchSummary:
    """Blocks, threads, idle threads and warps of the usual 1D launch for ``n`` elements.

    Args:
        n: number of elements, one thread each (at least 1).
        threads: threads per block.
        max_threads: the device's limit on threads per block.

    Raises:
        LaunchConfigError: ``n < 1`` or ``threads`` outside ``1..max_threads``.

    Example:
        >>> s = summarize_launch(257, 256)
        >>> s.blocks, s.total_threads, s.idle_threads, s.warps
        (2, 512, 255, 16)
    """
    if n < 1:
        raise LaunchConfigError(f"a launch needs at least one element, got n={n}")
    launch = launch_1d(n, threads, max_threads=max_threads)
    warps = launch.blocks * launch.warps_per_block
    return LaunchSummary(
        n=n,
        threads=threads,
        blocks=launch.blocks,
        total_threads=launch.total_threads,
        idle_threads=launch.idle_threads,
        warps_per_block=launch.warps_per_block,
        warps=warps,
        empty_lanes=warps * WARP_SIZE - launch.total_threads,
    )


# --- the calculator's picture -----------------------------------------------------------------


# --- device properties --------------------------------------------------------------------------

#: FP32 results per clock per SM (the "CUDA cores" of an SM) by compute capability, from the CUDA C++
#: Programming Guide's table of arithmetic instruction throughput.
FP32_LANES_PER_SM: dict[tuple[int, int], int] = {
    (2, 0): 32, (2, 1): 48, (3, 0): 192, (3, 5): 192, (3, 7): 192, (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
    (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128,
}

#: The ``deviceQuery`` table of three GPUs from the *GPU Computing* course walkthrough, 2025 (section
#: "Device Properties and Common Errors"), as published there.
SEED_DEVICE_QUERY: dict[str, dict[str, str]] = {
    "GeForce GTX 480 (CC 2.0)": {
        "global memory": "1.5 GB", "SMs": "15", "FP32 cores": "480", "shared memory per block": "48 KB",
        "registers per block": "32k", "warp size": "32", "max threads per block": "1024",
        "max block dimensions": "1024 x 1024 x 64"},
    "Tesla K20c (CC 3.5)": {
        "global memory": "5 GB", "SMs": "13", "FP32 cores": "2496", "shared memory per block": "48 KB",
        "registers per block": "64k", "warp size": "32", "max threads per block": "1024",
        "max block dimensions": "1024 x 1024 x 64"},
    "RTX 2080 Ti (CC 7.5)": {
        "global memory": "11 GB", "SMs": "68", "FP32 cores": "4352", "shared memory per block": "48 KB",
        "registers per block": "64k", "warp size": "32", "max threads per block": "1024",
        "max block dimensions": "1024 x 1024 x 64"},
}


def device_properties_table(info: DeviceInfo) -> pd.DataFrame:
    """A device's properties as a two-column table ``property``/``value`` (from :meth:`DeviceInfo.as_dict`).

    Entries of ``extra`` are stored as ``extra.<key>``; the peak memory bandwidth computed from the
    memory clock and bus width is added as ``peak_memory_bandwidth_gbs``.
    """
    data = info.as_dict()
    extra = data.pop("extra", {}) or {}
    rows: list[tuple[str, Any]] = [(k, v) for k, v in data.items()]
    rows += [(f"extra.{k}", v) for k, v in extra.items()]
    rows.append(("peak_memory_bandwidth_gbs", info.peak_memory_bandwidth_gbs))
    return pd.DataFrame(rows, columns=["property", "value"])


def _props(table: pd.DataFrame) -> dict[str, Any]:
    if list(table.columns[:2]) != ["property", "value"]:
        raise ValueError(f"expected a property/value table, got columns {list(table.columns)}")
    return {str(k): (None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
            for k, v in zip(table["property"], table["value"])}


def _cc_tuple(cc: Any) -> tuple[int, int] | None:
    try:
        major, minor = str(cc).split(".")
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def fp32_cores(table: pd.DataFrame) -> int | None:
    """SMs times FP32 lanes per SM for the device in ``table``, or None when unknown."""
    p = _props(table)
    lanes = FP32_LANES_PER_SM.get(_cc_tuple(p.get("compute_capability")))
    return int(p["sm_count"]) * lanes if lanes and p.get("sm_count") else None


def peak_fp32_gflops(table: pd.DataFrame) -> float | None:
    """Peak FP32 rate without tensor cores: 2 flops (one FMA) x cores x clock, in GFLOP/s, or None."""
    cores = fp32_cores(table)
    clock = _props(table).get("clock_khz")
    return 2 * cores * clock * 1e3 / 1e9 if cores and clock else None


def peak_memory_bandwidth(table: pd.DataFrame) -> float | None:
    """The datasheet-style memory bandwidth in GB/s (memory clock x bus width, as the driver reports them), or None."""
    bw = _props(table).get("peak_memory_bandwidth_gbs")
    return float(bw) if bw else None


def ridge_point(table: pd.DataFrame) -> float | None:
    """Flops per byte at which the device stops being memory-bound: peak FP32 rate over peak bandwidth."""
    flops = peak_fp32_gflops(table)
    bw = _props(table).get("peak_memory_bandwidth_gbs")
    return flops / bw if flops and bw else None


def _fmt_bytes(v: Any, unit: int, name: str) -> str:
    return "n/a" if v is None else f"{v / unit:,.1f} {name}".replace(".0 ", " ")


def _fmt(v: Any, suffix: str = "") -> str:
    return "n/a" if v is None else f"{v:,}{suffix}" if isinstance(v, int) else f"{v}{suffix}"


def describe_device(table: pd.DataFrame) -> pd.DataFrame:
    """The properties that matter for launching and timing kernels, with units, one row each."""
    p = _props(table)
    clock = p.get("clock_khz")
    mem_clock = p.get("memory_clock_khz")
    bw = p.get("peak_memory_bandwidth_gbs")
    flops = peak_fp32_gflops(table)
    rows = {
        "name": _fmt(p.get("name")),
        "compute capability": _fmt(p.get("compute_capability")),
        "SMs": _fmt(p.get("sm_count")),
        "FP32 cores (SMs x lanes per SM)": _fmt(fp32_cores(table)),
        "SM clock": "n/a" if clock is None else f"{clock / 1e3:,.0f} MHz",
        "peak FP32 (no tensor cores)": "n/a" if flops is None else f"{flops / 1e3:,.1f} TFLOP/s",
        "global memory": _fmt_bytes(p.get("total_memory_bytes"), 2**30, "GiB"),
        "memory clock x bus width": ("n/a" if mem_clock is None or p.get("memory_bus_bits") is None
                                     else f"{mem_clock / 1e3:,.0f} MHz x {p['memory_bus_bits']} bits"),
        "peak memory bandwidth": "n/a" if bw is None else f"{bw:,.0f} GB/s",
        "L2 cache": _fmt_bytes(p.get("l2_bytes"), 2**20, "MiB"),
        "warp size": _fmt(p.get("warp_size")),
        "max threads per block": _fmt(p.get("max_threads_per_block")),
        "max threads per SM": _fmt(p.get("max_threads_per_sm")),
        "max blocks per SM": _fmt(p.get("max_blocks_per_sm")),
        "shared memory per block (opt-in)": (
            f"{_fmt_bytes(p.get('max_shared_per_block'), 1024, 'KiB')} "
            f"({_fmt_bytes(p.get('max_shared_per_block_optin'), 1024, 'KiB')})"),
        "shared memory per SM": _fmt_bytes(p.get("max_shared_per_sm"), 1024, "KiB"),
        "32-bit registers per block / per SM": f"{_fmt(p.get('registers_per_block'))} / {_fmt(p.get('registers_per_sm'))}",
        "driver / runtime CUDA": f"{_fmt(p.get('driver_version'))} / {_fmt(p.get('runtime_version'))}",
    }
    return pd.DataFrame({"value": list(rows.values())}, index=pd.Index(list(rows), name="property"))


def compare_with_older_gpus(table: pd.DataFrame, label: str | None = None) -> pd.DataFrame:
    """The walkthrough's ``deviceQuery`` table of three older GPUs with one more column: the device in ``table``.

    Args:
        table: a property/value table (:func:`device_properties_table` or reference data).
        label: the new column's heading (default: the device's name and compute capability).
    """
    p = _props(table)
    cores = fp32_cores(table)
    reg = p.get("registers_per_block")
    mem = p.get("total_memory_bytes")
    shared = p.get("max_shared_per_block")
    dim_x = p.get("max_block_dim_x")
    def plain(v: Any) -> str:  # no thousands separators: the published columns have none
        return "n/a" if v is None else str(v)

    column = {
        "global memory": "n/a" if mem is None else f"{mem / 2**30:.1f} GiB",
        "SMs": plain(p.get("sm_count")),
        "FP32 cores": plain(cores),
        "shared memory per block": "n/a" if shared is None else f"{shared // 1024} KB",
        "registers per block": "n/a" if reg is None else f"{reg // 1024}k",
        "warp size": plain(p.get("warp_size")),
        "max threads per block": plain(p.get("max_threads_per_block")),
        "max block dimensions": "n/a" if dim_x is None else f"{dim_x} x {MAX_BLOCK_DIMS[1]} x {MAX_BLOCK_DIMS[2]}",
    }
    label = label or f"{p.get('name') or 'this device'} (CC {p.get('compute_capability') or 'n/a'})"
    data = {**SEED_DEVICE_QUERY, label: column}
    out = pd.DataFrame(data)
    out.index.name = "property"
    return out


#: Features of a compute capability that the book relies on: (first compute capability, architecture and year,
#: feature, where the book meets it). From NVIDIA's *CUDA C++ Programming Guide* ("Compute Capabilities",
#: "Feature Availability") and the architecture whitepapers.
CC_FEATURES: tuple[tuple[str, str, str, str], ...] = (
    ("2.0", "Fermi, 2010", "1024 threads per block; L1 and L2 caches; single-precision FMA; recursion, printf",
     "every launch (the 1024 limit); chapter 1 (recursion)"),
    ("3.0", "Kepler, 2012", "warp shuffles (shfl_*_sync): threads of a warp read each other's registers",
     "chapters 4 and 6 (the last steps of a reduction)"),
    ("3.5", "Kepler GK110, 2012", "up to 255 registers per thread; dynamic parallelism",
     "chapter 4 (registers limit occupancy)"),
    ("6.0", "Pascal, 2016", "double-precision atomicAdd; unified memory with page faults; compute preemption",
     "chapters 6 and 13 (atomics)"),
    ("7.0", "Volta, 2017", "independent thread scheduling: a warp's threads need not run in lockstep (syncwarp); "
     "tensor cores", "chapters 4, 6 and 13 (warps), 5 (cuBLAS)"),
    ("7.5", "Turing, 2018", "the oldest GPUs CUDA 13 compiles for (Colab's T4 is one)", "the setup cell"),
    ("8.0", "Ampere, 2020", "asynchronous copies global -> shared; L2 residency control; TF32 tensor cores",
     "chapter 5 (TF32 kept off for a fair FP32 comparison)"),
    ("9.0", "Hopper, 2022", "thread block clusters and distributed shared memory; TMA; 227 KiB shared memory "
     "per block", "chapters 3 and 4 (shared-memory limits)"),
)


def compute_capability_features(cc: Any = None) -> pd.DataFrame:
    """:data:`CC_FEATURES` as a table, one row per compute capability.

    Args:
        cc: a compute capability (``"9.0"``, ``(8, 6)`` or ``8.6``); when given, a last column says
            whether a GPU of that compute capability has each feature.
    """
    table = pd.DataFrame(CC_FEATURES, columns=["since compute capability", "architecture", "what it brought",
                                               "where the book uses it"])
    if cc is not None:
        have = _cc_tuple(".".join(str(v) for v in cc) if isinstance(cc, (tuple, list)) else cc)
        if have is None:
            raise ValueError(f"a compute capability looks like '9.0' or (9, 0), got {cc!r}")
        table[f"on CC {have[0]}.{have[1]}"] = ["yes" if _cc_tuple(v) <= have else "no"
                                              for v in table["since compute capability"]]
    return table.set_index("since compute capability")


#: The former name of :func:`compare_with_older_gpus`.
compare_with_seed = compare_with_older_gpus
