"""Asking the device in hand: the driver's record of the GPU, or the simulator, and the driver's answers about a
compiled kernel.

:func:`device_info` returns a :class:`DeviceInfo` for the current device (what the driver reports, as the
reference data ``ch01_device_properties`` stores it); :func:`banner` turns it into the one line printed at the top
of every chapter. :func:`kernel_resources` and :func:`driver_blocks_per_sm` ask the driver about a compiled kernel
(GPU only). This is the one module that queries the device; what a GPU *is* (its SM limits, peaks, the GPUs not in
hand) is described by :mod:`labhelpers.gpus`, built from a :class:`DeviceInfo`.
"""

from __future__ import annotations

import numbers
import platform
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from numba import cuda

from . import backend
from .errors import ArgumentError

#: Threads in a warp, on every NVIDIA GPU so far.
WARP_SIZE = 32
#: Threads per block on every CUDA GPU since compute capability 2.0.
MAX_THREADS_PER_BLOCK = 1024
#: Largest block along x, y and z.
MAX_BLOCK_DIMS = (1024, 1024, 64)
#: Largest grid along x, y and z (blocks).
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
#: Shared memory per block any GPU gives without an opt-in (bytes).
DEFAULT_SHARED_PER_BLOCK = 48 * 1024

BANNER_PREFIX = "[labhelpers]"
SIMULATOR_NAME = "Numba CUDA simulator (CPU)"


@dataclass(frozen=True)
class DeviceInfo:
    """Properties of the device kernels run on.

    Under the simulator the hardware fields are ``None``: there is no hardware to
    describe, and chapters show a reference GPU's properties instead (reference data
    ``ch01_device_properties``). :func:`labhelpers.gpus.current` turns it into the book's
    description of the GPU (:class:`labhelpers.gpus.GPU`, with its SM's limits).
    """

    backend: str
    name: str
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    total_memory_bytes: int | None = None
    driver_version: str | None = None
    runtime_version: str | None = None
    warp_size: int = WARP_SIZE
    max_threads_per_block: int = MAX_THREADS_PER_BLOCK
    max_block_dim_x: int = MAX_BLOCK_DIMS[0]
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    max_shared_per_block: int = DEFAULT_SHARED_PER_BLOCK
    max_shared_per_block_optin: int | None = None
    max_shared_per_sm: int | None = None
    registers_per_sm: int | None = None
    registers_per_block: int | None = None
    reserved_shared_per_block: int | None = None
    l2_bytes: int | None = None
    total_constant_bytes: int | None = None
    clock_khz: int | None = None
    memory_clock_khz: int | None = None
    memory_bus_bits: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def is_simulator(self) -> bool:
        """True for the CPU simulator."""
        return self.backend == backend.SIM

    @property
    def cc(self) -> str:
        """Compute capability as text, e.g. ``"9.0"`` (``"n/a"`` in the simulator)."""
        if self.compute_capability is None:
            return "n/a"
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    @property
    def peak_memory_bandwidth_gbs(self) -> float | None:
        """Theoretical DRAM bandwidth from memory clock and bus width (GB/s), if known.

        Double data rate is assumed (2 transfers per clock), which is how the driver
        reports HBM and GDDR clocks.
        """
        if not self.memory_clock_khz or not self.memory_bus_bits:
            return None
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9

    def resident_blocks(self, threads: int) -> int:
        """Blocks of ``threads`` threads one SM of this GPU holds when threads and block slots are the only limits
        (at least 1), from the driver's counts (:func:`resident_blocks`).

        Raises:
            ArgumentError: the record has no SM counts (the simulator's: use ``gpus.current().sm``).
        """
        if self.max_threads_per_sm is None or self.max_blocks_per_sm is None:
            raise ArgumentError(f"{self.name} reports no threads or blocks per SM: use gpus.current().sm, "
                                "the reference GPU's SM under the simulator")
        return resident_blocks(threads, self.max_threads_per_sm, self.max_blocks_per_sm)

    def as_dict(self) -> dict:
        """A plain dictionary, e.g. to store next to measurements."""
        data = asdict(self)
        data["compute_capability"] = self.cc
        return data

    def as_table(self) -> pd.DataFrame:
        """The record as a two-column table ``property``/``value``, as the reference ``ch01_device_properties``
        stores it (:meth:`as_dict`).

        Entries of ``extra`` are stored as ``extra.<key>``; the peak memory bandwidth computed from the
        memory clock and bus width is added as ``peak_memory_bandwidth_gbs``. :mod:`labhelpers.gpus` reads such
        a table (``gpus.describe_device``, ``gpus.reference``).
        """
        data = self.as_dict()
        extra = data.pop("extra", {}) or {}
        rows: list[tuple[str, Any]] = [(k, v) for k, v in data.items()]
        rows += [(f"extra.{k}", v) for k, v in extra.items()]
        rows.append(("peak_memory_bandwidth_gbs", self.peak_memory_bandwidth_gbs))
        return pd.DataFrame(rows, columns=["property", "value"])


def resident_blocks(threads: int, max_threads_per_sm: int, max_blocks_per_sm: int) -> int:
    """Blocks of ``threads`` threads one SM holds when threads and block slots are the only limits (at least 1).

    The one statement of that rule: :meth:`DeviceInfo.resident_blocks` applies it to the driver's counts,
    :meth:`labhelpers.gpus.SMLimits.resident_blocks` to an SM's description.
    """
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise ArgumentError(f"threads must be a whole number of at least 1 (threads per block), got {threads!r}")
    threads = int(threads)
    return max(1, min(max_threads_per_sm // threads, max_blocks_per_sm))


def _format_version(v: int | tuple | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    return f"{v // 1000}.{(v % 1000) // 10}"


def _gpu_info() -> DeviceInfo:
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)

    def attr(attr_name: str) -> int | None:
        try:
            return int(getattr(dev, attr_name))
        except Exception:  # attribute unknown to this driver / numba version
            return None

    try:
        _free, total = cuda.current_context().get_memory_info()
    except Exception:
        total = None
    try:
        from numba.cuda.cudadrv.driver import driver  # the GPU driver's internals: used only on a GPU

        drv = _format_version(driver.get_version())
    except Exception:
        drv = None
    try:
        rt = _format_version(cuda.runtime.get_version())
    except Exception:
        rt = None

    return DeviceInfo(
        backend=backend.GPU,
        name=name,
        compute_capability=tuple(dev.compute_capability),
        sm_count=attr("MULTIPROCESSOR_COUNT"),
        total_memory_bytes=total,
        driver_version=drv,
        runtime_version=rt,
        warp_size=attr("WARP_SIZE") or WARP_SIZE,
        max_threads_per_block=attr("MAX_THREADS_PER_BLOCK") or MAX_THREADS_PER_BLOCK,
        max_block_dim_x=attr("MAX_BLOCK_DIM_X") or MAX_BLOCK_DIMS[0],
        max_threads_per_sm=attr("MAX_THREADS_PER_MULTIPROCESSOR"),
        max_blocks_per_sm=attr("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        max_shared_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK") or DEFAULT_SHARED_PER_BLOCK,
        max_shared_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_per_sm=attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        registers_per_sm=attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        registers_per_block=attr("MAX_REGISTERS_PER_BLOCK"),
        reserved_shared_per_block=attr("RESERVED_SHARED_MEMORY_PER_BLOCK"),  # None on an older driver or numba-cuda
        l2_bytes=attr("L2_CACHE_SIZE"),
        total_constant_bytes=attr("TOTAL_CONSTANT_MEMORY"),
        clock_khz=attr("CLOCK_RATE"),
        memory_clock_khz=attr("MEMORY_CLOCK_RATE"),
        memory_bus_bits=attr("GLOBAL_MEMORY_BUS_WIDTH"),
    )


def _simulator_info() -> DeviceInfo:
    return DeviceInfo(backend=backend.SIM, name=SIMULATOR_NAME, extra={"cpu": platform.processor() or platform.machine()})


_cached: DeviceInfo | None = None


def device_info() -> DeviceInfo:
    """Describe the current device (cached after the first call)."""
    global _cached
    if _cached is None:
        _cached = _gpu_info() if backend.is_gpu() else _simulator_info()
    return _cached


def banner(info: DeviceInfo | None = None) -> str:
    """One line saying what the notebook runs on, printed by :func:`labhelpers.setup`.

    On a GPU: name, compute capability, SM count, memory, driver and CUDA versions.
    Under the simulator: a plain warning that timings are not GPU timings.
    """
    info = info or device_info()
    if info.is_simulator:
        return (
            f"{BANNER_PREFIX} simulator: correctness only, timings are not GPU timings "
            "(no CUDA GPU found; plots show reference data measured on a real GPU)"
        )
    mem = f"{info.total_memory_bytes / 2**30:.0f} GiB" if info.total_memory_bytes else "? GiB"
    return (
        f"{BANNER_PREFIX} GPU: {info.name}, compute capability {info.cc}, {info.sm_count} SMs, "
        f"{mem}, driver CUDA {info.driver_version or '?'}, runtime CUDA {info.runtime_version or '?'}"
    )


# --------------------------------------------------------------------------- the driver's answers about a kernel
def _overload(kernel, signature=None):
    """The compiled kernel (numba-cuda's ``_Kernel``) for ``signature``, or the only one compiled."""

    backend.require_gpu("a kernel's registers and the driver's occupancy",
                        because="exist only for a kernel compiled for a GPU (the simulator runs Python)",
                        instead="The chapter shows the comparison measured on a GPU (reference data).")
    if signature is not None:
        return kernel.compile(signature)
    overloads = list(getattr(kernel, "overloads", {}).values())
    if len(overloads) != 1:
        raise ValueError(f"{getattr(kernel, '__name__', kernel)!r} has {len(overloads)} compiled versions: pass the "
                         "signature, e.g. 'void(float32[::1], float32[::1], float32)', or launch it once first.")
    return overloads[0]


@dataclass(frozen=True)
class KernelResources:
    """What the compiler gave one compiled kernel (numba-cuda's ``get_regs_per_thread`` and friends)."""

    name: str
    registers_per_thread: int
    static_shared_per_block: int
    local_per_thread: int
    max_threads_per_block: int


def kernel_resources(kernel, signature=None) -> KernelResources:
    """Registers, static shared memory and local memory of a compiled kernel (GPU only).

    Args:
        kernel: a ``@cuda.jit`` kernel.
        signature: which compiled version (e.g. ``"void(float32[::1], float32[::1], float32)"``);
            may be omitted when the kernel has been compiled for exactly one.

    Raises:
        GPUOnlyError: under the simulator.
    """
    ov = _overload(kernel, signature)
    return KernelResources(name=getattr(kernel, "__name__", str(kernel)), registers_per_thread=int(ov.regs_per_thread),
                           static_shared_per_block=int(ov.shared_mem_per_block),
                           local_per_thread=int(ov.local_mem_per_thread),
                           max_threads_per_block=int(ov.max_threads_per_block))


def driver_blocks_per_sm(kernel, threads_per_block: int, dynamic_shared: int = 0, signature=None) -> int:
    """The CUDA driver's resident blocks per SM for a compiled kernel (GPU only).

    This is ``cuOccupancyMaxActiveBlocksPerMultiprocessor``, reached through numba-cuda's
    ``cuda.current_context().get_active_blocks_per_multiprocessor(cufunc, threads, dynamic_shared)``.
    """

    ov = _overload(kernel, signature)
    cufunc = ov.library.get_cufunc()
    return int(cuda.current_context().get_active_blocks_per_multiprocessor(cufunc, int(threads_per_block),
                                                                           int(dynamic_shared)))

