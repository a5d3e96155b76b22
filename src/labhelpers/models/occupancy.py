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
Calculator (``cuda_occupancy.h``, shipped with the CUDA toolkit). The per-SM limits are an argument, a
:class:`~labhelpers.gpus.SMLimits` from the one description of the hardware, :mod:`labhelpers.gpus`: a preset
(``gpus.HOPPER_H100``, ``gpus.FERMI_LECTURE``...) or the GPU the code runs on (``gpus.current().sm``). The
model asks no device: the driver's own answer for a compiled kernel
(``cuOccupancyMaxActiveBlocksPerMultiprocessor``) is :func:`labhelpers.device.driver_blocks_per_sm`, and
chapter 4 sets the two side by side (:func:`labhelpers.experiments.scheduling.compare_with_driver`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd

from .. import validate
from ..errors import LaunchConfigError
from ..gpus import HOPPER_H100, SMLimits
from ..launch import warps_for

#: The four resources, in the order they are reported.
THREADS, BLOCKS, REGISTERS, SHARED = "threads", "blocks", "registers", "shared memory"
RESOURCES = (THREADS, BLOCKS, REGISTERS, SHARED)


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
        sm: the SM's limits (``gpus.HOPPER_H100``, ``gpus.FERMI_LECTURE``, ``gpus.current().sm``...).
        opt_in: whether the kernel opted in to more than the default shared memory per block.

    Returns:
        An :class:`Occupancy`.

    Raises:
        LaunchConfigError: a configuration no launch can use (too many threads, registers
            or shared memory per block); the message says which and what to change.

    Example:
        >>> from labhelpers.gpus import FERMI_LECTURE
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
