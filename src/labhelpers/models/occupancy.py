"""Occupancy: how many blocks and warps of a kernel an SM can hold at once, and what limits it.

An SM keeps every resident warp's registers and every resident block's shared memory
on chip, and has a fixed number of warp and block slots. A block is admitted only when
all of its resources fit, so the number of resident blocks is the *smallest* of four
limits:

* **threads** (warp slots): ``max_warps_per_sm // warps_per_block``;
* **blocks** (block slots): ``max_blocks_per_sm``;
* **registers**: registers are allocated per warp, ``registers_per_thread * 32``
  rounded up to the allocation unit (256 on every GPU since Kepler), and on GPUs with
  several schedulers per SM the register file is split evenly between them;
* **shared memory**: static plus dynamic shared memory of the block, plus what the
  driver reserves per block (1 KB since Ampere), rounded up to the allocation unit.

*Occupancy* is resident warps over the SM's maximum (Rossbach, *CUDA* lecture slides, UT Austin
CS378: "Occupancy = #active warps / #maximum active warps"). :func:`occupancy` computes it
and names the limiting resource, following the rules of NVIDIA's CUDA Occupancy
Calculator (``cuda_occupancy.h``, shipped with the CUDA toolkit). The per-SM limits come
from :class:`SMLimits`: presets for a Hopper H100 (NVIDIA CUDA C++ Programming Guide,
table "Technical Specifications per Compute Capability", column 9.0), for Fermi, and
for the Fermi numbers used in the classic lectures; :func:`device_limits` describes
the GPU the code runs on.

On a GPU, :func:`compare_with_driver` checks the calculator against the CUDA driver's
own answer (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) for a compiled kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd
from numba import cuda

from .. import validate
from ..device import DeviceInfo, device_info
from ..refdata import load_reference
from ..errors import GPUOnlyError, LaunchConfigError
from ..launch import warps_for
from .. import backend

#: The four resources, in the order they are reported.
THREADS, BLOCKS, REGISTERS, SHARED = "threads", "blocks", "registers", "shared memory"
RESOURCES = (THREADS, BLOCKS, REGISTERS, SHARED)
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
    max_threads_per_block: int = 1024
    warp_size: int = 32
    source: str = ""

    @property
    def max_warps_per_sm(self) -> int:
        """Warp slots of the SM: the denominator of occupancy."""
        return self.max_threads_per_sm // self.warp_size

    def resident_blocks(self, threads: int) -> int:
        """Blocks of ``threads`` threads the SM holds when threads and block slots are the only limits (at least 1)."""
        threads = validate.integer(threads, "threads", minimum=1)
        return max(1, min(self.max_threads_per_sm // threads, self.max_blocks_per_sm))

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


#: The reference data whose metadata names the reference GPU's compute capability (its device record).
REFERENCE_DEVICE_RECORD = "ch01_device_properties"


def limits_for(compute_capability: str | tuple[int, int]) -> SMLimits:
    """The :data:`STUDENT_GPUS` preset of a compute capability (``"7.5"`` or ``(7, 5)``), e.g. to label reference
    data with the SM of the GPU that measured it.

    Raises:
        ArgumentError: no preset for that compute capability.
    """
    cc = compute_capability
    if isinstance(cc, str):
        major, _, minor = cc.partition(".")
        cc = (int(major), int(minor or 0))
    if tuple(cc) not in STUDENT_GPUS:
        raise validate.ArgumentError(f"no SM preset for compute capability {compute_capability!r}: use one of "
                                     f"{sorted(STUDENT_GPUS)}, or device_limits() for the GPU you run on")
    return STUDENT_GPUS[tuple(cc)]


def device_limits(info: DeviceInfo | None = None) -> SMLimits:
    """The :class:`SMLimits` of the GPU the code runs on; under the simulator the reference GPU's SM
    (:func:`limits_for` of the compute capability the reference data was measured with: :data:`HOPPER_H100`).

    Counts (threads, blocks, registers, shared memory) come from the driver; the
    allocation units, which the driver does not report, from the compute capability.
    Architectures newer than the calculator's table are assumed to allocate like Hopper.
    """
    info = info or device_info()
    if info.is_simulator or info.compute_capability is None:
        return limits_for(load_reference(REFERENCE_DEVICE_RECORD).meta["compute_capability"])
    major, minor = info.compute_capability
    known = _ARCH.get(major, _ARCH[max(_ARCH)])
    unit, partitions, shared_unit, reserved, max_regs = known
    if (major, minor) == (6, 0):
        partitions = 2
    if "reserved_shared_per_block" in info.extra:
        reserved = int(info.extra["reserved_shared_per_block"])
    elif info == device_info():  # ask the driver only about the GPU it is running on
        reserved = _reserved_shared(reserved)
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


def _reserved_shared(default: int) -> int:
    """The driver's reserved shared memory per block, when it reports it."""
    try:
        return int(cuda.get_current_device().RESERVED_SHARED_MEMORY_PER_BLOCK)
    except Exception:  # older driver or numba-cuda without the attribute
        return default


@dataclass(frozen=True)
class Occupancy:
    """The result of :func:`occupancy` for one launch configuration.

    Attributes:
        threads_per_block, registers_per_thread, shared_per_block: the configuration.
        sm: the SM's limits used.
        limits: resource name -> blocks per SM that resource alone allows (None: no limit).
        blocks_per_sm: resident blocks: the smallest limit.
        limiting: the resources whose limit equals ``blocks_per_sm``.
        registers_per_block: registers allocated to one block (after rounding).
        shared_allocated_per_block: shared memory allocated to one block (reserved part and rounding included).
    """

    threads_per_block: int
    registers_per_thread: int
    shared_per_block: int
    sm: SMLimits
    limits: dict
    blocks_per_sm: int
    limiting: tuple
    registers_per_block: int
    shared_allocated_per_block: int

    @property
    def warps_per_block(self) -> int:
        """Warps of one block; a partly filled last warp takes a whole warp slot."""
        return warps_for(self.threads_per_block, self.sm.warp_size)

    @property
    def warps_per_sm(self) -> int:
        """Resident warps: the numerator of occupancy."""
        return self.blocks_per_sm * self.warps_per_block

    @property
    def threads_per_sm(self) -> int:
        """Resident threads."""
        return self.blocks_per_sm * self.threads_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's warp slots, between 0 and 1."""
        return self.warps_per_sm / self.sm.max_warps_per_sm

    def __str__(self) -> str:
        return (f"{self.threads_per_block} threads x {self.registers_per_thread} registers, "
                f"{self.shared_per_block:,} B shared per block on {self.sm.name}: {self.blocks_per_sm} blocks = "
                f"{self.warps_per_sm} of {self.sm.max_warps_per_sm} warps per SM, occupancy {self.occupancy:.3f} "
                f"(limited by {' and '.join(self.limiting)})")

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit  # not launch geometry: registers and shared memory in allocation units


def occupancy(
    threads_per_block: int,
    registers_per_thread: int = 32,
    shared_per_block: int = 0,
    sm: SMLimits = HOPPER_H100,
    *,
    opt_in: bool = False,
) -> Occupancy:
    """Resident blocks and warps per SM of a kernel, and the resource that limits them.

    Args:
        threads_per_block: threads of one block (1 to 1024).
        registers_per_thread: registers the compiler gave each thread (what
            ``kernel.get_regs_per_thread(sig)`` reports; 0 to 255).
        shared_per_block: shared memory of one block in bytes, static plus dynamic
            (without the part the driver reserves: that is added here).
        sm: the SM's limits (:data:`HOPPER_H100`, :data:`FERMI_LECTURE`, :func:`device_limits`...).
        opt_in: whether the kernel opted in to more than the default shared memory per block.

    Returns:
        An :class:`Occupancy`.

    Raises:
        LaunchConfigError: a configuration no launch can use (too many threads, registers
            or shared memory per block); the message says which and what to change.

    Example:
        >>> occupancy(256, 10, sm=FERMI_LECTURE).blocks_per_sm
        6
    """
    threads = validate.integer(threads_per_block, "threads_per_block", allow_float=False,
                              error=LaunchConfigError)
    regs = validate.integer(registers_per_thread, "registers_per_thread", allow_float=False,
                           error=LaunchConfigError)
    shared = validate.integer(shared_per_block, "shared_per_block", allow_float=False,
                             error=LaunchConfigError)
    if not 1 <= threads <= sm.max_threads_per_block:
        raise LaunchConfigError(f"{threads} threads per block: a block holds 1 to {sm.max_threads_per_block} threads "
                                "on this GPU; choose a multiple of 32 such as 128 or 256.")
    if not 0 <= regs <= sm.max_registers_per_thread:
        raise LaunchConfigError(
            f"{regs} registers per thread: the compiler gives a thread 0 to {sm.max_registers_per_thread} registers "
            "(it spills to local memory beyond that). Pass registers per thread, not per block.")
    shared_cap = sm.shared_per_block_optin if opt_in else sm.shared_per_block
    if shared < 0:
        raise LaunchConfigError(f"shared_per_block cannot be negative, got {shared}")
    if shared > shared_cap:
        hint = ("" if opt_in or sm.shared_per_block_optin <= sm.shared_per_block else
                f" without opting in (up to {sm.shared_per_block_optin:,} B with opt_in=True, which a kernel gets "
                "through cudaFuncSetAttribute)")
        raise LaunchConfigError(f"{shared:,} B of shared memory per block exceeds the {shared_cap:,} B a block may "
                                f"use{hint}: use less shared memory per block, or smaller tiles.")

    warp = sm.warp_size
    warps_per_block = warps_for(threads, warp)
    limits: dict[str, int | None] = {
        THREADS: sm.max_warps_per_sm // warps_per_block,
        BLOCKS: sm.max_blocks_per_sm,
        REGISTERS: None,
        SHARED: None,
    }

    regs_per_warp = _round_up(regs * warp, sm.register_unit)
    regs_per_block = regs_per_warp * warps_per_block
    # The hardware checks the per-block limit as if the block's warps were spread over all partitions.
    regs_checked = regs_per_warp * _round_up(warps_per_block, sm.register_partitions)
    if max(regs_per_block, regs_checked) > sm.max_registers_per_block:
        raise LaunchConfigError(
            f"{threads} threads x {regs} registers need {max(regs_per_block, regs_checked):,} registers per block, "
            f"more than the {sm.max_registers_per_block:,} a block may use: the launch would fail with 'too many "
            "resources requested'. Use fewer threads per block, or cap the registers "
            "(@cuda.jit(max_registers=...)).")
    if regs_per_warp:
        warps_per_partition = (sm.registers_per_sm // sm.register_partitions) // regs_per_warp
        limits[REGISTERS] = warps_per_partition * sm.register_partitions // warps_per_block

    shared_alloc = _round_up(shared + sm.reserved_shared_per_block, sm.shared_unit)
    if shared_alloc:
        limits[SHARED] = sm.shared_per_sm // shared_alloc

    blocks = min(v for v in limits.values() if v is not None)
    limiting = tuple(name for name in RESOURCES if limits[name] == blocks)
    return Occupancy(threads_per_block=threads, registers_per_thread=regs, shared_per_block=shared, sm=sm,
                     limits=limits, blocks_per_sm=blocks, limiting=limiting, registers_per_block=regs_per_block,
                     shared_allocated_per_block=shared_alloc)


def occupancy_table(
    threads: Iterable[int],
    registers_per_thread: int = 32,
    shared_per_block: int = 0,
    sm: SMLimits = HOPPER_H100,
) -> pd.DataFrame:
    """:func:`occupancy` for several block sizes, one row each (impossible ones get 0 blocks and the reason)."""
    rows = []
    for t in threads:
        try:
            r = occupancy(t, registers_per_thread, shared_per_block, sm)
            rows.append({"threads": t, "blocks_per_sm": r.blocks_per_sm, "warps_per_sm": r.warps_per_sm,
                         "occupancy": r.occupancy, "limiting": " and ".join(r.limiting), "reason": ""})
        except LaunchConfigError as exc:
            rows.append({"threads": t, "blocks_per_sm": 0, "warps_per_sm": 0, "occupancy": 0.0,
                         "limiting": "cannot launch", "reason": str(exc)})
    return pd.DataFrame(rows)


def shared_for_blocks(blocks: int, sm: SMLimits = HOPPER_H100, static_shared: int = 0) -> int:
    """The least dynamic shared memory per block that lets at most ``blocks`` blocks share an SM.

    Used to *throttle* occupancy on purpose: the block's allocation (dynamic plus
    ``static_shared`` plus the reserved part, rounded up) must exceed
    ``shared_per_sm / (blocks + 1)``, so that a further block no longer fits.

    Raises:
        LaunchConfigError: ``blocks`` is below 1, or needs more shared memory than a block may use
            without opting in.
    """
    blocks = validate.integer(blocks, "blocks", allow_float=False, error=LaunchConfigError)
    if blocks < 1:
        raise LaunchConfigError(f"blocks must be at least 1, got {blocks}")
    alloc = _round_up(sm.shared_per_sm // (blocks + 1) + 1, sm.shared_unit)
    dynamic = max(0, alloc - sm.reserved_shared_per_block - static_shared)
    if dynamic + static_shared > sm.shared_per_block:
        raise LaunchConfigError(
            f"limiting an SM of {sm.name} to {blocks} block(s) through shared memory needs "
            f"{dynamic + static_shared:,} B per block, more than the {sm.shared_per_block:,} B available without "
            "opting in: ask for more blocks.")
    return dynamic


def waves(blocks: int, blocks_per_sm: int, sm_count: int) -> pd.DataFrame:
    """How the block scheduler hands out a grid: one row per wave of blocks.

    The block scheduler places a block on an SM only when all of its resources fit there, and the
    block stays until all of its threads have finished; the blocks that do not fit yet wait in a queue
    and take the place of finished ones. With every block taking about the same time, the grid runs in
    waves of ``blocks_per_sm * sm_count`` blocks, and the last wave may leave SMs idle (the *tail*).

    Returns:
        A table with ``wave``, ``blocks`` (in that wave) and ``fill`` (its fraction of the GPU's block slots).
    """
    blocks = validate.integer(blocks, "blocks", minimum=1, allow_float=False)
    blocks_per_sm = validate.integer(blocks_per_sm, "blocks_per_sm", minimum=1, allow_float=False)
    sm_count = validate.integer(sm_count, "sm_count", minimum=1, allow_float=False)
    slots = blocks_per_sm * sm_count
    full, rest = divmod(blocks, slots)
    sizes = [slots] * full + ([rest] if rest else [])
    return pd.DataFrame({"wave": range(1, len(sizes) + 1), "blocks": sizes,
                         "fill": [size / slots for size in sizes]})


# --------------------------------------------------------------------------- the driver's answer (GPU only)
def _overload(kernel, signature=None):
    """The compiled kernel (numba-cuda's ``_Kernel``) for ``signature``, or the only one compiled."""

    if backend.is_simulator():
        raise GPUOnlyError(
            "registers and the driver's occupancy exist only for a kernel compiled for a real GPU; the CUDA "
            "simulator runs Python. The chapter shows the comparison measured on a GPU (reference data).")
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


def compare_with_driver(
    kernel,
    threads: Iterable[int] = (32, 64, 128, 256, 512, 1024),
    dynamic_shared: Iterable[int] = (0,),
    signature=None,
    sm: SMLimits | None = None,
) -> pd.DataFrame:
    """The calculator's blocks per SM next to the driver's, for every (threads, dynamic shared) pair (GPU only).

    Returns:
        One row per configuration: ``kernel``, ``threads``, ``dynamic_shared``, ``registers``,
        ``static_shared``, ``calc_blocks``, ``driver_blocks``, ``agree``, ``limiting``.
        A configuration the calculator rejects counts as 0 blocks (the driver reports 0 for it too).
    """
    sm = sm or device_limits()
    res = kernel_resources(kernel, signature)
    rows = []
    for t in threads:
        for dyn in dynamic_shared:
            try:
                r = occupancy(t, res.registers_per_thread, res.static_shared_per_block + dyn, sm)
                calc, limiting = r.blocks_per_sm, " and ".join(r.limiting)
            except LaunchConfigError:
                calc, limiting = 0, "cannot launch"
            if t > res.max_threads_per_block:
                calc, limiting = 0, "cannot launch"
            try:
                drv = driver_blocks_per_sm(kernel, t, dyn, signature)
            except Exception:  # the driver refuses the configuration outright
                drv = 0
            rows.append({"kernel": res.name, "threads": t, "dynamic_shared": dyn,
                         "registers": res.registers_per_thread, "static_shared": res.static_shared_per_block,
                         "calc_blocks": calc, "driver_blocks": drv, "agree": calc == drv, "limiting": limiting})
    return pd.DataFrame(rows)
