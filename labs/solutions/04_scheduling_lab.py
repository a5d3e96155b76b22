"""Solutions of labs/04_scheduling_lab.ipynb (not shipped with the package: Colab users do not get them).

Every function keeps the lines of its skeleton and only adds lines (tests/test_labs.py checks it).
"""

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)

import math

from numba import cuda

from labhelpers.kernels.scheduling import lcg_steps


def blocks_per_sm(threads, registers, shared):
    """Resident blocks per SM on the lab's H100 SM (one register pool)."""
    warps_per_block = math.ceil(threads / 32)
    # FILL ME IN (roughly 8 lines): the blocks each of the four resources allows, then the smallest
    by_threads = 64 // warps_per_block
    by_blocks = 32
    regs_per_warp = math.ceil(registers * 32 / 256) * 256
    by_registers = (65536 // regs_per_warp) // warps_per_block if regs_per_warp else by_blocks
    shared_allocated = math.ceil((shared + 1024) / 128) * 128
    by_shared = (228 * 1024) // shared_allocated
    return min(by_threads, by_blocks, by_registers, by_shared)


def warps_to_hide(burst, stall):
    """Fewest warps that keep one scheduler issuing every cycle."""
    # FILL ME IN (roughly 1 line): Little's law, rounded up to whole warps
    return math.ceil((burst + stall) / burst)


@cuda.jit
def even_odd_sorted(x, out, who, steps):
    i = cuda.grid(1)
    n = x.size
    j = i  # the element this thread handles
    # FILL ME IN (roughly 5 lines): the first half of the threads take the even elements, the rest the odd ones
    half = (n + 1) // 2
    if i < half:
        j = 2 * i
    else:
        j = 2 * (i - half) + 1
    if j < n:
        who[j] = i
        if j % 2 == 0:
            out[j] = lcg_steps(x[j], steps)
        else:
            out[j] = x[j]


def shared_for_blocks(k, sm):
    """Dynamic shared bytes per block that let exactly k blocks share an SM with the limits sm."""
    # FILL ME IN (roughly 3 lines): just above sm.shared_per_sm / (k + 1) per block, reserved bytes included,
    # in units of sm.shared_unit
    allocation = (sm.shared_per_sm // (k + 1) // sm.shared_unit + 1) * sm.shared_unit
    return allocation - sm.reserved_shared_per_block


def choose_threads():
    """Threads per block for chapter 4's scale kernel, chosen with blocks_per_sm."""
    # blocks_per_sm(256, 22, 0) = 8: 64 of 64 warp slots; 32 threads stop at 32 blocks = half the slots.
    return 256


def resident_blocks(threads, registers, shared):
    """Resident blocks per SM on the lab's H100 SM: find the bug (fix it by adding lines)."""
    warps_per_block = math.ceil(threads / 32)
    blocks = min(64 // warps_per_block, 32)
    regs_per_warp = math.ceil(registers * 32 / 256) * 256
    if regs_per_warp:
        blocks = min(blocks, (65536 // regs_per_warp) // warps_per_block)
    shared_allocated = math.ceil((shared + 1024) / 128) * 128  # the block's shared memory, reserve included
    blocks = min(blocks, (228 * 1024) // shared_allocated)
    return blocks
