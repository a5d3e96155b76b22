"""Chapter "The memory hierarchy": the sweeps that time each level, and the tables the chapter shows.

Each sweep times one kernel of :mod:`labhelpers.kernels.memory` over the parameter the chapter
varies and builds the exact table the chapter plots (``bench/memory.py`` stores it as reference
data):

* global memory, coalescing: :func:`coalescing_sweep`;
* shared memory, banks: :func:`bank_conflict_sweep`;
* caches and latency: :func:`pointer_chase_sweep`, read with :func:`latency_summary`;
* constant memory: :func:`constant_sweep`;
* registers and local memory: :func:`resource_table` (GPU only);
* host memory, pinned against pageable: :func:`transfer_sweep`;
* and the table of the whole hierarchy: :func:`hierarchy_table`.

Under the simulator every sweep runs its kernel (small sizes), so correctness is checked, and
returns its table with NaN timings: the chapter then plots reference data.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, gpus, validate
from ..device import DeviceInfo, device_info
from ..errors import GPUOnlyError
from ..kernels.memory import (
    LOADS_PER_ITERATION,
    LOOKUP_TABLE,
    SHARED_WORDS,
    WARP_SIZE,
    chase_chain,
    constant_lookup,
    copy_footprint,
    global_lookup,
    local_array_dynamic,
    local_array_static,
    offset_stride_copy,
    pointer_chase,
    run_local_array,
    run_lookup,
    run_offset_stride_copy,
    run_pointer_chase,
    run_shared_stride_read,
    shared_stride_read,
)
from ..launch import launch_1d
from ..measured import live_or_reference
from ..models import banks
from ..refdata import load_reference
from ..sweep import sweep
from ..timing import Timing, benchmark


def measured(live: pd.DataFrame | None, reference) -> pd.DataFrame:
    """The table to read numbers from: ``live``'s GPU-timed rows if it has any, else the reference's table.

    Shorthand for ``lh.live_or_reference(live, reference).table`` (typed columns either way).
    """
    return live_or_reference(live, reference).table


def _sim_or_gpu(gpu, sim):
    return sim if backend.is_simulator() else gpu


# =========================================================================== global memory: coalescing


def coalescing_sweep(kind: str, *, n: int | None = None, values: Sequence[int] | None = None,
                     threads: int | None = None, repeat: int = 20, progress: bool = True) -> pd.DataFrame:
    """Effective bandwidth of :func:`offset_stride_copy` over offsets 0..32 (stride 1) or strides 1..32 (offset 0).

    Args:
        kind: ``"offset"`` or ``"stride"``: which parameter varies (the other stays at 0 or 1).
        n: elements copied per point (useful work is the same at every point):
            2**24 on a GPU, so that even stride 1 streams 128 MiB, well past the L2; 64 in the simulator.
        values: the offsets or strides to try (default 0..32 or 1..32).
        threads: threads per block (256 on a GPU, 32 in the simulator).
        repeat: timed repetitions per point.

    Returns:
        The sweep table plus ``offset``, ``stride``, the model's ``sectors`` per warp request and
        ``sector_efficiency``, and ``relative`` (GB/s over the GB/s of the aligned, stride-1 point;
        NaN without GPU timings). ``gbps`` counts useful bytes: ``2 * n * 4`` per copy.
    """
    if kind not in ("offset", "stride"):
        raise ValueError(f"kind must be 'offset' or 'stride', got {kind!r}")
    n = n or _sim_or_gpu(2**24, 64)
    threads = threads or _sim_or_gpu(256, 32)
    if values is None:
        values = range(0, 33) if kind == "offset" else range(1, 33)
    values = [int(v) for v in values]
    if not values:
        raise ValueError("give at least one value to sweep")
    max_offset = max(values) if kind == "offset" else 0
    max_stride = max(values) if kind == "stride" else 1
    size = copy_footprint(n, max_offset, max_stride)
    src_d = cuda.device_array(size, dtype=np.float32)
    dst_d = cuda.device_array(size, dtype=np.float32)
    launch = launch_1d(n, threads)

    def run(**point) -> Timing:
        offset = point.get("offset", 0)
        stride = point.get("stride", 1)
        # number=5 launches between the events: the GPU's queue fills, so the host's launch time is not timed
        return benchmark(lambda: offset_stride_copy[launch.blocks, launch.threads](src_d, dst_d, n, offset, stride),
                         nbytes=2 * n * 4, repeat=repeat, number=5, label=f"copy offset={offset} stride={stride}")

    table = sweep(run, {kind: values}, progress=progress, desc=f"coalescing: {kind}")
    if kind == "offset":
        table.insert(1, "stride", 1)
    else:
        table.insert(0, "offset", 0)
    table["n"] = n
    table["sectors"] = [banks.sectors_per_request(o, s) for o, s in zip(table["offset"], table["stride"])]
    table["sector_efficiency"] = [banks.sector_efficiency(o, s) for o, s in zip(table["offset"], table["stride"])]
    base = table.loc[(table["offset"] == 0) & (table["stride"] == 1), "gbps"]
    table["relative"] = table["gbps"] / base.iloc[0] if len(base) else float("nan")
    return table


# =========================================================================== shared memory: banks


def bank_conflict_sweep(strides: Sequence[int] | None = None, *, reps: int | None = None,
                        blocks: int | None = None, threads: int | None = None, repeat: int = 10,
                        progress: bool = True) -> pd.DataFrame:
    """Time :func:`shared_stride_read` for each stride; add the model's conflict degree and the slowdown.

    On a GPU: 1024-thread blocks, as many per SM as it holds (every SM full: two on the reference GPU, one on a
    T4; :func:`labhelpers.gpus.current`), 2048 iterations of four loads.
    In the simulator: one block of 32 threads and 2 iterations (correctness only).

    Returns:
        The sweep table plus ``conflict_degree`` (``gcd(stride, 32)``), ``warp_requests``
        (shared-memory requests per SM) and ``slowdown`` (time over the time at stride 1).
    """
    strides = list(range(1, 34)) if strides is None else [int(s) for s in strides]
    reps = reps or _sim_or_gpu(2048, 2)
    threads = threads or _sim_or_gpu(1024, 32)
    if blocks is None:
        gpu = gpus.current()
        blocks = 1 if backend.is_simulator() else gpu.blocks_per_sm(threads) * gpu.sm_count
    out_d = cuda.device_array(blocks * threads, dtype=np.int32)

    def run(stride: int) -> Timing:
        return benchmark(lambda: shared_stride_read[blocks, threads](out_d, stride, reps), repeat=repeat, number=3,
                         label=f"shared stride {stride}")

    table = sweep(run, {"stride": strides}, check=lambda stride: validate.check_launch(threads, SHARED_WORDS * 4),
                  progress=progress, desc="bank conflicts")
    table["conflict_degree"] = [banks.strided_conflict_degree(s) for s in table["stride"]]
    sms = 1 if backend.is_simulator() else (device_info().sm_count or 1)
    table["warp_requests"] = blocks * (threads // WARP_SIZE) * reps * LOADS_PER_ITERATION // sms
    base = table.loc[table["stride"] == 1, "median_ms"]
    table["slowdown"] = table["median_ms"] / base.iloc[0] if len(base) else float("nan")
    return table


# =========================================================================== caches and latency: pointer chasing


def chase_sizes() -> list[int]:
    """Working sets for :func:`pointer_chase_sweep`: 4 KiB to 1 GiB in half-octaves on a GPU, 1-16 KiB simulated."""
    if backend.is_simulator():
        return [1024, 2048, 4096, 8192, 16384]
    sizes = []
    for k in range(12, 31):
        sizes.append(2**k)
        if k < 30:
            sizes.append(3 * 2 ** (k - 1))
    return sizes


def pointer_chase_sweep(sizes: Sequence[int] | None = None, *, stride_bytes: int = 128, steps: int | None = None,
                        max_warm_loads: int = 2**19, shuffle: bool = True, repeat: int = 5,
                        progress: bool = True) -> pd.DataFrame:
    """Nanoseconds per dependent load against working-set size.

    For each size the chain is built and copied to the GPU, walked once untimed (up to
    ``max_warm_loads`` loads, enough to bring a cache-sized working set in), then timed over
    ``steps`` loads (8192 on a GPU). The time of an empty launch is subtracted, so
    ``ns_per_load`` is the latency alone. The loads per point are capped, so the whole
    sweep stays within seconds even where each load goes to DRAM.
    """
    sizes = chase_sizes() if sizes is None else [int(s) for s in sizes]
    steps = steps or _sim_or_gpu(8192, 16)
    state_d = cuda.to_device(np.zeros(1, dtype=np.uint32))
    overhead_ms = 0.0
    if backend.is_gpu():
        empty = cuda.to_device(np.zeros(2, dtype=np.uint32))
        overhead_ms = benchmark(lambda: pointer_chase[1, 1](empty, state_d, 0), repeat=repeat).median_ms

    def run(working_set_bytes: int) -> Timing:
        chain_d = cuda.to_device(chase_chain(working_set_bytes, stride_bytes, shuffle=shuffle))
        state_d.copy_to_device(np.zeros(1, dtype=np.uint32))
        slots = working_set_bytes // stride_bytes
        pointer_chase[1, 1](chain_d, state_d, min(slots, max_warm_loads))  # bring the working set into the caches
        return benchmark(lambda: pointer_chase[1, 1](chain_d, state_d, steps), warmup=0, repeat=repeat,
                         label=f"chase {working_set_bytes} B")

    table = sweep(run, {"working_set_bytes": sizes}, progress=progress, desc="pointer chase")
    table["stride_bytes"] = stride_bytes
    table["steps"] = steps
    table["ns_per_load"] = (table["median_ms"] - overhead_ms) * 1e6 / steps
    return table


def latency_summary(table: pd.DataFrame, l1_bytes: float, l2_bytes: float) -> pd.DataFrame:
    """Median ns per load on each plateau of a pointer-chase table: inside L1, inside L2, far beyond L2.

    The plateaus are taken well inside each level (at most a quarter of L1; between four
    times L1 and a quarter of L2; at least four times L2) to stay clear of the transitions.
    """
    ws = table["working_set_bytes"]
    rows = [("L1", ws <= l1_bytes / 4), ("L2", (ws >= 4 * l1_bytes) & (ws <= l2_bytes / 4)),
            ("device memory", ws >= 4 * l2_bytes)]
    out = []
    for level, mask in rows:
        part = table.loc[mask, "ns_per_load"]
        out.append({"level": level, "working sets": f"{format_bytes(ws[mask].min())} to {format_bytes(ws[mask].max())}"
                    if mask.any() else "none measured", "ns per load": float(part.median()) if len(part) else math.nan})
    return pd.DataFrame(out)


# =========================================================================== constant memory


def constant_sweep(distincts: Sequence[int] = (1, 2, 4, 8, 16, 32), *, reps: int | None = None,
                   blocks: int | None = None, threads: int | None = None, repeat: int = 10,
                   progress: bool = True) -> pd.DataFrame:
    """Time both lookup kernels against the number of distinct addresses per warp load.

    On a GPU: 256-thread blocks, eight per SM, 4096 lookups per thread. Adds
    ``ns_per_warp_load``: kernel time over the warp loads each SM performs.
    """
    reps = reps or _sim_or_gpu(4096, 4)
    threads = threads or _sim_or_gpu(256, 32)
    if blocks is None:
        blocks = 1 if backend.is_simulator() else 8 * (device_info().sm_count or 1)
    out_d = cuda.device_array(blocks * threads, dtype=np.float32)
    table_d = cuda.to_device(LOOKUP_TABLE)
    for d in distincts:
        validate.power_of_two(d, "distinct", maximum=WARP_SIZE, what="addresses per warp")

    def run(memory: str, distinct: int) -> Timing:
        if memory == "constant":
            return benchmark(lambda: constant_lookup[blocks, threads](out_d, reps, distinct), repeat=repeat,
                             number=3, label=f"constant, {distinct} addresses")
        return benchmark(lambda: global_lookup[blocks, threads](table_d, out_d, reps, distinct), repeat=repeat,
                         number=3, label=f"global, {distinct} addresses")

    table = sweep(run, {"memory": ["constant", "global"], "distinct": list(distincts)}, progress=progress,
                  desc="constant memory")
    sms = 1 if backend.is_simulator() else (device_info().sm_count or 1)
    warp_loads = blocks * (threads // WARP_SIZE) * reps / sms
    table["ns_per_warp_load"] = table["median_ms"] * 1e6 / warp_loads
    return table


# =========================================================================== registers and local memory


def resource_usage(kernel) -> dict:
    """Registers per thread, local memory per thread and static shared memory per block of a compiled kernel.

    The kernel must have been launched (compiled) once; its first compiled signature is reported.

    Raises:
        GPUOnlyError: under the simulator, which never compiles a kernel.
        ValueError: the kernel has not been compiled yet.
    """
    backend.require_gpu("resource_usage", because="reads register and local-memory counts from the compiler, which "
                        "only runs on a GPU", instead="The chapter shows reference numbers measured on one "
                        "(`lh.load_reference`).")
    name = getattr(getattr(kernel, "py_func", kernel), "__name__", str(kernel))

    def first(value):
        if isinstance(value, dict):
            if not value:
                raise ValueError(f"{name} has not been compiled yet: launch it once first")
            return next(iter(value.values()))
        return value

    return {"kernel": name, "registers_per_thread": int(first(kernel.get_regs_per_thread())),
            "local_bytes_per_thread": int(first(kernel.get_local_mem_per_thread())),
            "shared_bytes_per_block": int(first(kernel.get_shared_mem_per_block()))}


def resource_table() -> pd.DataFrame:
    """Compile and run this chapter's kernels on tiny inputs and tabulate :func:`resource_usage` (GPU only)."""
    if backend.is_simulator():
        resource_usage(local_array_static)  # raises the explanatory GPUOnlyError
    x = np.arange(64, dtype=np.float32)
    run_local_array(x)
    run_local_array(x, k=5)
    run_offset_stride_copy(np.zeros(64, dtype=np.float32), 64, 0, 1)
    run_shared_stride_read(1, 1)
    run_lookup("constant", 1, 1)
    run_pointer_chase(chase_chain(1024, 128), 0, 1)
    kernels = [offset_stride_copy, local_array_static, local_array_dynamic, shared_stride_read, constant_lookup,
               pointer_chase]
    return pd.DataFrame([resource_usage(k) for k in kernels])


# =========================================================================== host memory: pinned and pageable


def transfer_sizes() -> list[int]:
    """Transfer sizes: 4 KiB to 256 MiB in factors of 4 on a GPU; 4 KiB and 64 KiB in the simulator."""
    if backend.is_simulator():
        return [4096, 65536]
    return [4**k * 1024 for k in range(1, 10)]


def transfer_sweep(sizes: Sequence[int] | None = None, *, repeat: int = 10, progress: bool = True) -> pd.DataFrame:
    """Host-to-device and device-to-host bandwidth for pageable and pinned host buffers against size.

    Host buffers of the largest size are allocated once (the pageable one filled, so its
    pages exist); each point copies their first ``nbytes`` to or from a device buffer of
    that size. Pinned memory comes from ``cuda.pinned_array`` (page-locked: the GPU's copy
    engines read it directly); pageable memory is an ordinary NumPy array, which the driver
    copies through a pinned staging buffer. ``transfer`` names the line of the plot, e.g. ``"H2D pinned"``.
    """
    sizes = transfer_sizes() if sizes is None else [validate.integer(s, "size", minimum=1) for s in sizes]
    largest = max(sizes)
    hosts = {"pageable": np.ones(largest, dtype=np.uint8), "pinned": cuda.pinned_array(largest, dtype=np.uint8)}
    hosts["pinned"][:] = 1

    def run(direction: str, host_memory: str, nbytes: int) -> Timing:
        host, dev = hosts[host_memory][:nbytes], cuda.device_array(nbytes, dtype=np.uint8)
        copy = (lambda: dev.copy_to_device(host)) if direction == "H2D" else (lambda: dev.copy_to_host(host))
        # The Python clock on purpose: the fitted latency is what one copy costs from Python (pageable copies
        # synchronise anyway, so no stream could be held behind them).
        return benchmark(copy, nbytes=nbytes, repeat=repeat, label=f"{direction} {host_memory} {nbytes} B",
                         clock="python")

    table = sweep(run, {"direction": ["H2D", "D2H"], "host_memory": ["pageable", "pinned"], "nbytes": sizes},
                  progress=progress, desc="host transfers")
    table.insert(0, "transfer", table["direction"] + " " + table["host_memory"])
    return table


# =========================================================================== the hierarchy at a glance

#: Published figures of the H100 SXM5 (NVIDIA, *H100 Tensor Core GPU Architecture* whitepaper, 2022, and the
#: *CUDA C++ Programming Guide*, compute capability 9.0): the GH100 GPU of the reference H200, with 80 GB of HBM3
#: instead of its 141 GB of HBM3e. The table's column names them.
H100_SXM5 = {
    "registers": "64 Ki x 4 B = 256 KiB per SM (at most 255 per thread)",
    "local memory": "in device memory, cached in L1 and L2",
    "shared memory": "up to 228 KiB per SM (227 KiB per block)",
    "L1 cache": "256 KiB per SM, shared with shared memory",
    "constant memory": "64 KiB, cached per SM",
    "L2 cache": "50 MB, shared by all 132 SMs",
    "device memory": "80 GB HBM3, 3.35 TB/s",
    "host memory": "PCIe Gen5 x16: 64 GB/s each way",
}

#: Combined L1 + shared memory per SM (KiB) by compute capability (*CUDA C++ Programming Guide*).
UNIFIED_L1_SHARED_KIB = {(7, 0): 128, (7, 2): 128, (7, 5): 96, (8, 0): 192, (8, 6): 128, (8, 7): 192, (8, 9): 128,
                         (9, 0): 256}

_PROPERTY_KEYS = ("name", "compute_capability", "sm_count", "registers_per_sm", "max_shared_per_sm",
                  "max_shared_per_block_optin", "l2_bytes", "total_memory_bytes", "peak_memory_bandwidth_gbs",
                  "clock_khz", "total_constant_bytes")


def device_properties(info: DeviceInfo | None = None) -> dict:
    """The properties :func:`hierarchy_table` needs, as plain values (``bench/memory.py`` stores them as metadata)."""
    info = info or device_info()
    if info.is_simulator:
        raise GPUOnlyError("the simulator has no memory hierarchy to describe: use the reference GPU's properties "
                           "(the metadata of the chapter's reference data)")
    props = {key: getattr(info, key, None) for key in _PROPERTY_KEYS}
    props["compute_capability"] = info.cc
    props["peak_memory_bandwidth_gbs"] = info.peak_memory_bandwidth_gbs
    if props["total_constant_bytes"] is None:  # attribute unknown to this driver: every CUDA GPU so far has 64 KiB
        props["total_constant_bytes"] = 64 * 1024
    return props


#: The reference table whose metadata carries the reference GPU's properties (written by ``bench/memory.py``).
PROPERTIES_REFERENCE = "ch03_pointer_chase"


def hierarchy_properties() -> dict:
    """This GPU's :func:`device_properties`, or under the simulator those of the GPU the reference data comes from."""
    if backend.is_gpu():
        return device_properties()
    ref = load_reference(PROPERTIES_REFERENCE)
    props = dict(ref.meta.get("device") or {})
    props.setdefault("name", ref.gpu)
    return props


def l1_capacity_bytes(props: dict) -> int | None:
    """Combined L1 + shared memory of one SM for the compute capability in ``props`` (None if unknown)."""
    cc = str(props.get("compute_capability") or "")
    try:
        key = tuple(int(part) for part in cc.split("."))
    except ValueError:
        return None
    kib = UNIFIED_L1_SHARED_KIB.get(key)
    return kib * 1024 if kib else None


def format_bytes(n) -> str:
    """``n`` bytes as text in binary units: ``"256 KiB"``, ``"1.5 MiB"`` (``"?"`` when unknown)."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "?"
    n = float(n)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


def hierarchy_table(props: dict) -> pd.DataFrame:
    """The memory hierarchy of one GPU (from :func:`device_properties`) beside the published H100 SXM5 figures."""

    def get(key):
        return props.get(key)

    regs = get("registers_per_sm")
    unified = l1_capacity_bytes(props)
    bandwidth = get("peak_memory_bandwidth_gbs")
    rows = [
        ("registers", "thread", f"{regs} x 4 B = {format_bytes(regs * 4)} per SM" if regs else "?"),
        ("local memory", "thread", "in device memory, cached in L1 and L2"),
        ("shared memory", "block", f"up to {format_bytes(get('max_shared_per_sm'))} per SM"),
        ("L1 cache", "SM", f"{format_bytes(unified)} per SM, shared with shared memory" if unified
         else "shares its SRAM with shared memory"),
        ("constant memory", "grid (read-only)", f"{format_bytes(get('total_constant_bytes'))}, cached per SM"),
        ("L2 cache", "device", f"{format_bytes(get('l2_bytes'))}, shared by all {get('sm_count') or '?'} SMs"),
        ("device memory", "device", f"{format_bytes(get('total_memory_bytes'))}"
         + (f", {bandwidth / 1000:.2f} TB/s peak" if bandwidth else "")),
        ("host memory", "system", "over PCIe or NVLink-C2C (measured below)"),
    ]
    return pd.DataFrame(
        [(level, scope, here, H100_SXM5[level]) for level, scope, here in rows],
        columns=["level", "visible to", str(get("name") or "this GPU"), "H100 SXM5 (published)"],
    ).set_index("level")
