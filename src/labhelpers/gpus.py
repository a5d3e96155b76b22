"""What a GPU is: the one description of the hardware the book's numbers are about.

* :class:`SMLimits` is one streaming multiprocessor: resident threads and blocks, registers, shared memory and
  how they are allocated; :data:`STUDENT_GPUS` and the other presets give the SMs of GPUs not in hand (the CUDA
  C++ Programming Guide's table per compute capability), :func:`limits_for` finds one by compute capability and
  :func:`sm_limits` builds one from the driver's record of the GPU in hand (:class:`~labhelpers.device.DeviceInfo`).
* :class:`GPU` is the whole GPU: its name, compute capability, SMs, its :class:`SMLimits`, bandwidth and peaks.
  Every default that depends on the hardware (SMs, resident threads and blocks per SM, the FP64 peak, the memory
  bandwidth) comes from one :class:`GPU`:

  * :func:`current` is the GPU the code runs on (the driver's numbers, asked by :mod:`labhelpers.device`), and
    under the simulator the **reference GPU** (:func:`reference`): the one that measured the shipped reference
    data, read from its device record ``ch01_device_properties``, so simulator output quotes that GPU by name;
  * :func:`student_gpu` describes the GPUs a student gets (Colab's T4, L4 and A100, and the H100 and H200) from
    NVIDIA's datasheets (``data/datasheets.json``) and the SM presets of :data:`STUDENT_GPUS`.

Peaks without a datasheet figure (the FP64 peak of a T4 or an L4) follow from the FP32 peak and the FP64:FP32
lane ratio of the compute capability (:data:`~labhelpers.roofline.model.FP64_LANES_PER_SM`).

A device record as a table (``DeviceInfo.as_table()``, the reference ``ch01_device_properties``) is read by
:func:`describe_device` (chapter 1's readable table), :func:`compare_with_older_gpus` (beside the ``deviceQuery``
of three older GPUs, :data:`SEED_DEVICE_QUERY`), :func:`fp32_cores`, :func:`peak_fp32_gflops`,
:func:`peak_memory_bandwidth` and :func:`ridge_point`; :data:`CC_FEATURES` and :func:`compute_capability_features`
say what each compute capability brought.

This module describes; asking the device in hand is :mod:`labhelpers.device`'s job (``device_info()``, which
:func:`current` reads), and the models (:mod:`labhelpers.models.occupancy`...) take an :class:`SMLimits` or a
:class:`GPU`'s figures as an argument.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from . import refdata, validate
from .device import DeviceInfo, device_info, resident_blocks
from .launch import WARP_SIZE
from .roofline.ceilings import datasheet_entry, fp32_peak_at_clock
from .roofline import model as _roofline_model
from .roofline.model import FP64_LANES_PER_SM, peak_at_clock_gflops

#: The reference data that carries the reference GPU's device record (``labhelpers.device_info().as_dict()``); its
#: metadata names the reference GPU's compute capability.
DEVICE_RECORD = "ch01_device_properties"

#: The GPUs students get, by datasheet name: (name as the driver reports it, compute capability).
STUDENT_GPU_NAMES: dict[str, tuple[str, str]] = {
    "T4": ("Tesla T4", "7.5"),
    "L4": ("NVIDIA L4", "8.9"),
    "A100": ("NVIDIA A100-SXM4-40GB", "8.0"),
    "H100": ("NVIDIA H100 80GB HBM3", "9.0"),
    "H200": ("NVIDIA H200", "9.0"),
}
#: The GPUs Colab offers (free tier first).
COLAB_GPUS = ("T4", "L4", "A100")
#: FP32 results per clock per SM by compute capability: the roofline's one table (Fermi on).
FP32_LANES_PER_SM: dict[tuple[int, int], int] = _roofline_model.FP32_LANES_PER_SM
#: Below this FP64:FP32 ratio a GPU is *FP64-poor* (a T4 has 1/32, an L4 1/64; an A100 or H100 1/2).
FP64_POOR_RATIO = 1 / 8

# --------------------------------------------------------------------------- one SM
#: Bytes in a KiB (shared-memory sizes are written in KiB).
KIB = 1024


@dataclass(frozen=True)
class SMLimits:
    """What one streaming multiprocessor (SM) offers, and how it hands it out.

    Attributes:
        name: the GPU (or model) described.
        compute_capability: e.g. ``"9.0"``.
        max_threads_per_sm: resident threads (warp slots times 32).
        max_blocks_per_sm: resident blocks (block slots).
        registers_per_sm: 32-bit registers in the register file.
        max_registers_per_block: registers one block may use.
        max_registers_per_thread: the most the compiler gives one thread (it spills beyond).
        register_unit: registers are allocated per warp in multiples of this.
        register_partitions: the register file is split evenly between this many
            schedulers; a warp's registers come from its scheduler's share.
        shared_per_sm: shared memory of the SM, in bytes (the largest carve-out).
        shared_per_block: shared memory one block may use without opting in.
        shared_per_block_optin: the same after opting in (``cudaFuncSetAttribute``).
        shared_unit: shared memory is allocated per block in multiples of this.
        reserved_shared_per_block: shared memory the driver reserves for every block.
        max_threads_per_block: the largest block.
        warp_size: threads per warp.
        source: where the numbers come from.
    """

    name: str
    compute_capability: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_unit: int
    register_partitions: int
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    shared_unit: int
    reserved_shared_per_block: int
    max_threads_per_block: int = validate.MAX_THREADS_PER_BLOCK
    warp_size: int = WARP_SIZE
    source: str = ""

    @property
    def max_warps_per_sm(self) -> int:
        """Warp slots of the SM: the denominator of occupancy."""
        return self.max_threads_per_sm // self.warp_size

    def resident_blocks(self, threads: int) -> int:
        """Blocks of ``threads`` threads the SM holds when threads and block slots are the only limits (at least 1)."""
        return resident_blocks(threads, self.max_threads_per_sm, self.max_blocks_per_sm)

    def describe(self) -> str:
        """The limits as a few readable lines."""
        return "\n".join([
            f"{self.name} (compute capability {self.compute_capability}), per SM:",
            f"  {self.max_threads_per_sm} threads = {self.max_warps_per_sm} warps, {self.max_blocks_per_sm} blocks",
            f"  {self.registers_per_sm:,} registers (at most {self.max_registers_per_block:,} per block and "
            f"{self.max_registers_per_thread} per thread; allocated per warp in units of {self.register_unit})",
            f"  {self.shared_per_sm // KIB} KB shared memory (at most {self.shared_per_block // KIB} KB per block, "
            f"{self.shared_per_block_optin // KIB} KB after opt-in; allocated in units of {self.shared_unit} B, "
            f"{self.reserved_shared_per_block} B reserved per block)",
        ])



_GUIDE = ("NVIDIA CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability'; allocation units "
          "and reserved shared memory from NVIDIA's CUDA Occupancy Calculator (cuda_occupancy.h)")

#: Hopper H100 SXM/PCIe and H200 (compute capability 9.0): the simulator's preset.
HOPPER_H100 = SMLimits(
    name="NVIDIA H100 (Hopper)", compute_capability="9.0",
    max_threads_per_sm=2048, max_blocks_per_sm=32,
    registers_per_sm=65536, max_registers_per_block=65536, max_registers_per_thread=255,
    register_unit=256, register_partitions=4,
    shared_per_sm=228 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=227 * KIB,
    shared_unit=128, reserved_shared_per_block=1 * KIB,
    source=_GUIDE + " (column 9.0)",
)

#: Turing T4 (compute capability 7.5): Colab's free GPU. 1024 threads and 16 blocks per SM, 64 KB of shared memory.
TURING_T4 = SMLimits(
    name="NVIDIA T4 (Turing)", compute_capability="7.5",
    max_threads_per_sm=1024, max_blocks_per_sm=16,
    registers_per_sm=65536, max_registers_per_block=65536, max_registers_per_thread=255,
    register_unit=256, register_partitions=4,
    shared_per_sm=64 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=64 * KIB,
    shared_unit=256, reserved_shared_per_block=0,
    source=_GUIDE + " (column 7.5)",
)

#: Ampere A100 (compute capability 8.0).
AMPERE_A100 = SMLimits(
    name="NVIDIA A100 (Ampere)", compute_capability="8.0",
    max_threads_per_sm=2048, max_blocks_per_sm=32,
    registers_per_sm=65536, max_registers_per_block=65536, max_registers_per_thread=255,
    register_unit=256, register_partitions=4,
    shared_per_sm=164 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=163 * KIB,
    shared_unit=128, reserved_shared_per_block=1 * KIB,
    source=_GUIDE + " (column 8.0)",
)

#: Ampere GA10x (compute capability 8.6: RTX 30xx, A10, A40): 1536 threads and 16 blocks per SM, 100 KB shared.
AMPERE_GA10X = SMLimits(
    name="NVIDIA A10 / RTX 30xx (Ampere GA10x)", compute_capability="8.6",
    max_threads_per_sm=1536, max_blocks_per_sm=16,
    registers_per_sm=65536, max_registers_per_block=65536, max_registers_per_thread=255,
    register_unit=256, register_partitions=4,
    shared_per_sm=100 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=99 * KIB,
    shared_unit=128, reserved_shared_per_block=1 * KIB,
    source=_GUIDE + " (column 8.6)",
)

#: Ada L4 (compute capability 8.9): Colab's L4. 1536 threads and 24 blocks per SM, 100 KB shared.
ADA_L4 = SMLimits(
    name="NVIDIA L4 (Ada)", compute_capability="8.9",
    max_threads_per_sm=1536, max_blocks_per_sm=24,
    registers_per_sm=65536, max_registers_per_block=65536, max_registers_per_thread=255,
    register_unit=256, register_partitions=4,
    shared_per_sm=100 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=99 * KIB,
    shared_unit=128, reserved_shared_per_block=1 * KIB,
    source=_GUIDE + " (column 8.9)",
)

#: Fermi GF100 (compute capability 2.0), as NVIDIA documents it.
FERMI_GF100 = SMLimits(
    name="NVIDIA Fermi GF100", compute_capability="2.0",
    max_threads_per_sm=1536, max_blocks_per_sm=8,
    registers_per_sm=32768, max_registers_per_block=32768, max_registers_per_thread=63,
    register_unit=64, register_partitions=2,
    shared_per_sm=48 * KIB, shared_per_block=48 * KIB, shared_per_block_optin=48 * KIB,
    shared_unit=128, reserved_shared_per_block=0,
    source=_GUIDE + " (column 2.x)",
)

#: The SM of the cs378 lecture's worked examples (Rossbach, *CUDA* lecture slides): Fermi's 1536 threads and
#: 8 blocks, but a register file of 16 K registers (the size of the previous
#: generation, GT200), which is what makes "+2 registers -> one block fewer" true.
FERMI_LECTURE = dataclasses.replace(
    FERMI_GF100, name="Fermi as in the lecture (16 K registers)",
    registers_per_sm=16384, max_registers_per_block=16384, register_partitions=1,
    source="Rossbach, CUDA lecture slides, UT Austin CS378: 1536 threads/SM, 8 blocks/SM, 16K registers/SM",
)

#: The SMs chapter 4's occupancy widget switches between, by the name it shows.
PRESETS = {"H100 (Hopper, 9.0)": HOPPER_H100, "Fermi GF100 (2.0)": FERMI_GF100,
           "Fermi, lecture numbers": FERMI_LECTURE}

#: The GPUs students get, by compute capability (T4, A100, A10/RTX 30xx, L4, H100): tools/compile_check checks every
#: kernel the book launches against these.
STUDENT_GPUS = {(7, 5): TURING_T4, (8, 0): AMPERE_A100, (8, 6): AMPERE_GA10X, (8, 9): ADA_L4, (9, 0): HOPPER_H100}

# Per-architecture constants the driver does not report: (register unit, register partitions,
# shared allocation unit, reserved shared memory per block, max registers per thread), by major
# compute capability, from cuda_occupancy.h.
_ARCH = {
    3: (256, 4, 256, 0, 255),
    5: (256, 4, 256, 0, 255),
    6: (256, 4, 256, 0, 255),
    7: (256, 4, 256, 0, 255),
    8: (256, 4, 128, 1 * KIB, 255),
    9: (256, 4, 128, 1 * KIB, 255),
}


def limits_for(compute_capability: str | tuple[int, int]) -> SMLimits:
    """The :data:`STUDENT_GPUS` preset of a compute capability (``"7.5"`` or ``(7, 5)``), e.g. to label reference
    data with the SM of the GPU that measured it.

    Raises:
        ArgumentError: no preset for that compute capability.
    """
    cc = _cc_tuple(compute_capability) if isinstance(compute_capability, str) else tuple(compute_capability)
    if cc not in STUDENT_GPUS:
        raise validate.ArgumentError(f"no SM preset for compute capability {compute_capability!r}: use one of "
                                     f"{sorted(STUDENT_GPUS)}, or gpus.current().sm for the GPU you run on")
    return STUDENT_GPUS[cc]


def sm_limits(info: DeviceInfo) -> SMLimits:
    """The :class:`SMLimits` of a GPU from the driver's record of it (``labhelpers.device_info()`` or a faked one).

    Counts (threads, blocks, registers, shared memory, the reserved shared memory per block where the driver
    reports it) come from the record; the allocation units, which the driver does not report, from the compute
    capability. Architectures newer than the calculator's table are assumed to allocate like Hopper.

    Raises:
        ArgumentError: ``info`` describes the simulator (use :func:`current`, which gives the reference GPU's SM).
    """
    if info.is_simulator or info.compute_capability is None:
        raise validate.ArgumentError("the simulator has no SM: use gpus.current().sm, which gives the reference "
                                     "GPU's there, or gpus.reference().sm")
    major, minor = info.compute_capability
    unit, partitions, shared_unit, reserved, max_regs = _ARCH.get(major, _ARCH[max(_ARCH)])
    if (major, minor) == (6, 0):
        partitions = 2
    if info.reserved_shared_per_block is not None:
        reserved = int(info.reserved_shared_per_block)
    base = HOPPER_H100
    return SMLimits(
        name=info.name, compute_capability=info.cc,
        max_threads_per_sm=info.max_threads_per_sm or base.max_threads_per_sm,
        max_blocks_per_sm=info.max_blocks_per_sm or base.max_blocks_per_sm,
        registers_per_sm=info.registers_per_sm or base.registers_per_sm,
        max_registers_per_block=info.registers_per_block or base.max_registers_per_block,
        max_registers_per_thread=max_regs, register_unit=unit, register_partitions=partitions,
        shared_per_sm=info.max_shared_per_sm or base.shared_per_sm,
        shared_per_block=info.max_shared_per_block or base.shared_per_block,
        shared_per_block_optin=info.max_shared_per_block_optin or info.max_shared_per_block or base.shared_per_block,
        shared_unit=shared_unit, reserved_shared_per_block=reserved,
        max_threads_per_block=info.max_threads_per_block, warp_size=info.warp_size,
        source="CUDA driver attributes of this GPU; allocation units from cuda_occupancy.h",
    )


# --------------------------------------------------------------------------- the whole GPU
@dataclass(frozen=True)
class GPU:
    """What the book needs to know of one GPU.

    Attributes:
        name: the GPU as the driver names it, e.g. ``"Tesla T4"``.
        compute_capability: e.g. ``"7.5"``.
        sm_count: streaming multiprocessors.
        sm: the limits of one SM (:class:`~labhelpers.models.SMLimits`).
        dram_gbs: device-memory bandwidth in GB/s (datasheet, else from memory clock and bus width), or None.
        fp32_gflops, fp64_gflops: FMA peaks in GFLOP/s (datasheet, else from SMs, lanes and clock), or None.
        where: ``"this GPU"``, ``"reference GPU"`` or ``"datasheet"``: whose numbers these are.
    """

    name: str
    compute_capability: str
    sm_count: int
    sm: SMLimits
    dram_gbs: float | None
    fp32_gflops: float | None
    fp64_gflops: float | None
    where: str

    @property
    def is_live(self) -> bool:
        """True when these are the numbers of the GPU the code runs on."""
        return self.where == "this GPU"

    @property
    def label(self) -> str:
        """How text and legends name it: ``"this GPU (Tesla T4)"``, ``"reference GPU (NVIDIA H200)"``."""
        return f"{self.where} ({self.name})"

    @property
    def resident_threads(self) -> int:
        """Threads the whole GPU holds at once: SMs times threads per SM."""
        return self.sm_count * self.sm.max_threads_per_sm

    @property
    def fp64_ratio(self) -> float:
        """FP64 peak over FP32 peak (1/2 on an A100 or H100, 1/32 on a T4, 1/64 on an L4)."""
        if self.fp64_gflops and self.fp32_gflops:
            return self.fp64_gflops / self.fp32_gflops
        return _lane_ratio(self.compute_capability) or 1.0

    @property
    def fp64_poor(self) -> bool:
        """True when FP64 runs at less than :data:`FP64_POOR_RATIO` of FP32 (T4, L4, consumer GPUs)."""
        return self.fp64_ratio < FP64_POOR_RATIO

    def blocks_per_sm(self, threads: int) -> int:
        """Blocks of ``threads`` threads one SM holds when threads and block slots are the only limits."""
        return self.sm.resident_blocks(threads)


def _cc_tuple(cc: str) -> tuple[int, int]:
    major, _, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def _lane_ratio(cc: str) -> float | None:
    key = _cc_tuple(cc)
    if key in FP32_LANES_PER_SM and key in FP64_LANES_PER_SM:
        return FP64_LANES_PER_SM[key] / FP32_LANES_PER_SM[key]
    return None


def _peaks(name: str, cc: str, fallback_dram: float | None, fallback_fp32: float | None):
    """(DRAM GB/s, FP32, FP64 GFLOP/s): the datasheet's where it has them, else the fallbacks and lane ratio."""
    entry = datasheet_entry(name) or {}
    dram = entry.get("dram_gbs") or fallback_dram
    fp32 = entry.get("fp32_gflops") or fallback_fp32
    fp64 = entry.get("fp64_gflops")
    ratio = _lane_ratio(cc)
    if fp64 is None and fp32 and ratio:
        fp64 = fp32 * ratio
    return (None if dram is None else float(dram), None if fp32 is None else float(fp32),
            None if fp64 is None else float(fp64))


def from_device_info(info: DeviceInfo, where: str = "this GPU") -> GPU:
    """A :class:`GPU` from the driver's properties (``labhelpers.device_info()`` or a faked one)."""
    if info.is_simulator or info.compute_capability is None:
        raise validate.ArgumentError("the simulator is no GPU: use gpus.current(), which gives the reference GPU "
                                     "there, or gpus.reference()")
    sm = sm_limits(info)
    dram, fp32, fp64 = _peaks(info.name, info.cc, info.peak_memory_bandwidth_gbs, fp32_peak_at_clock(info))
    return GPU(name=info.name, compute_capability=info.cc, sm_count=int(info.sm_count or 1), sm=sm, dram_gbs=dram,
               fp32_gflops=fp32, fp64_gflops=fp64, where=where)


def reference() -> GPU:
    """The reference GPU (the one that measured the chosen reference set), from its device record."""
    ref = refdata.load_reference(DEVICE_RECORD)
    props = _props(ref.table)
    cc = str(props.get("compute_capability") or ref.meta["compute_capability"])
    name = str(props.get("name") or ref.gpu)
    sm_count = int(props.get("sm_count") or ref.meta.get("sm_count") or 1)
    sm = limits_for(cc)
    lanes = FP32_LANES_PER_SM.get(_cc_tuple(cc))
    clock = props.get("clock_khz")
    fp32_at_clock = peak_at_clock_gflops(sm_count, float(clock), lanes) if lanes and clock else None
    dram, fp32, fp64 = _peaks(name, cc, props.get("peak_memory_bandwidth_gbs"), fp32_at_clock)
    return GPU(name=name, compute_capability=cc, sm_count=sm_count, sm=sm, dram_gbs=dram, fp32_gflops=fp32,
               fp64_gflops=fp64, where="reference GPU")


def from_record(name: str, compute_capability: str, sm_count: int, where: str = "recorded GPU") -> GPU:
    """A :class:`GPU` from the few fields a measurement records (its name, compute capability and SMs), with the
    datasheet's peaks where the name is known."""
    cc = str(compute_capability)
    dram, fp32, fp64 = _peaks(name, cc, None, None)
    return GPU(name=name, compute_capability=cc, sm_count=int(sm_count), sm=limits_for(cc), dram_gbs=dram,
               fp32_gflops=fp32, fp64_gflops=fp64, where=where)


def current(info: DeviceInfo | None = None) -> GPU:
    """The GPU the code runs on; under the simulator, the reference GPU (:func:`reference`)."""
    info = info or device_info()
    if info.is_simulator:
        return reference()
    return from_device_info(info)


def student_gpu(key: str) -> GPU:
    """A GPU students get, by its datasheet name: ``"T4"``, ``"L4"``, ``"A100"``, ``"H100"`` or ``"H200"``."""
    key = validate.choice(key, "key", tuple(STUDENT_GPU_NAMES))
    name, cc = STUDENT_GPU_NAMES[key]
    entry = datasheet_entry(name) or {}
    dram, fp32, fp64 = _peaks(name, cc, None, None)
    return GPU(name=name, compute_capability=cc, sm_count=int(entry.get("sm_count") or 1),
               sm=limits_for(cc), dram_gbs=dram, fp32_gflops=fp32, fp64_gflops=fp64, where="datasheet")

# --------------------------------------------------------------------------- a GPU's properties as tables
# What chapter 1 shows of a device record (``DeviceInfo.as_table()``, the reference ``ch01_device_properties``):
# the figures derived from it, a readable table, the walkthrough's older GPUs beside it, the features by compute
# capability.

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


def _props(table: pd.DataFrame) -> dict[str, Any]:
    if list(table.columns[:2]) != ["property", "value"]:
        raise ValueError(f"expected a property/value table, got columns {list(table.columns)}")
    return {str(k): (None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
            for k, v in zip(table["property"], table["value"])}


def _cc_or_none(cc: Any) -> tuple[int, int] | None:
    """``"9.0"`` as ``(9, 0)``; None for anything that is not a compute capability."""
    try:
        return _cc_tuple(cc)
    except (ValueError, TypeError):
        return None


def fp32_cores(table: pd.DataFrame) -> int | None:
    """SMs times FP32 lanes per SM for the device in ``table``, or None when unknown."""
    p = _props(table)
    lanes = FP32_LANES_PER_SM.get(_cc_or_none(p.get("compute_capability")))
    return int(p["sm_count"]) * lanes if lanes and p.get("sm_count") else None


def peak_fp32_gflops(table: pd.DataFrame) -> float | None:
    """Peak FP32 rate without tensor cores: 2 flops (one FMA) x cores x clock, in GFLOP/s, or None."""
    p = _props(table)
    lanes = FP32_LANES_PER_SM.get(_cc_or_none(p.get("compute_capability")))
    clock = p.get("clock_khz")
    return peak_at_clock_gflops(int(p["sm_count"]), clock, lanes) if lanes and p.get("sm_count") and clock else None


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
        table: a property/value table (:meth:`DeviceInfo.as_table <labhelpers.device.DeviceInfo.as_table>` or reference data).
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
        "max block dimensions": ("n/a" if dim_x is None
                                 else f"{dim_x} x {validate.MAX_BLOCK_DIMS[1]} x {validate.MAX_BLOCK_DIMS[2]}"),
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
        have = _cc_or_none(".".join(str(v) for v in cc) if isinstance(cc, (tuple, list)) else cc)
        if have is None:
            raise ValueError(f"a compute capability looks like '9.0' or (9, 0), got {cc!r}")
        table[f"on CC {have[0]}.{have[1]}"] = ["yes" if _cc_or_none(v) <= have else "no"
                                              for v in table["since compute capability"]]
    return table.set_index("since compute capability")


#: The former name of :func:`compare_with_older_gpus`.
compare_with_seed = compare_with_older_gpus
