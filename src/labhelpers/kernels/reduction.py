"""Chapter "Parallel reduction": the classic sequence of sum kernels, and what comes after it.

Every kernel reduces a float32 vector. The classic ones (after Harris, *Optimizing Parallel
Reduction in CUDA*, NVIDIA 2007, and the Heidelberg GPU Computing lecture "Scheduling
optimizations") write one partial sum per block; :class:`Reducer` launches them again on
the partial sums until one value is left (kernel decomposition: a kernel boundary is the
only barrier across all blocks). The later ones loop over the input with a grid-stride loop
and finish with a second tiny pass or with one atomic addition per block.

=====  ==========================  ====================================================
 no.   variant key                 lesson
=====  ==========================  ====================================================
 1     ``interleaved_divergent``   ``tid % (2*stride) == 0``: active threads in every warp
 2     ``interleaved``             active threads packed, but strided shared memory: bank conflicts
 3     ``sequential``              ``s[tid] += s[tid + stride]``: no divergence, no conflicts
 4     ``first_add``               half the blocks, each thread adds two elements while loading
 5     ``unroll_last_warp``        the last 6 levels without block barriers (``syncwarp``: GPU only)
 6     ``full_unroll``             block size fixed at compile time, every level unrolled (GPU only)
 7     ``grid_stride``             many elements per thread, then one small tree per block
 --    ``warp_shuffle``            registers instead of shared memory inside a warp (GPU only)
 --    ``atomic_per_element``      one atomic per element: correct, and serialised
 --    ``atomic_per_block``        one atomic per block: a single launch
 --    ``best``                    all of it, tuned for bandwidth (GPU only)
=====  ==========================  ====================================================

Under Numba's CUDA simulator there are no warp intrinsics (``syncwarp``, ``shfl_*_sync``):
variants that need them raise :class:`~labhelpers.errors.GPUOnlyError` before launching.

Timing the variants and the tables the chapter shows are in :mod:`labhelpers.experiments.reduction`,
its figures in :mod:`labhelpers.figures.reduction`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda, float32, uint64

from .. import backend, validate
from ..launch import ConfiguredKernel, blocks_for
from ..arrays import to_device
from ..errors import GPUOnlyError, LabError, LaunchConfigError
from .. import device as device_mod

#: Largest block: the size of the statically allocated shared array of the classic kernels.
MAX_THREADS = 1024
#: Threads of a warp.
WARP = 32
#: Block sizes of the chapter's sweep (the classic lecture table's columns).
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
#: Every lane of a warp takes part in the shuffle.
FULL_MASK = 0xFFFFFFFF
#: Unit roundoff of float32: the relative error of one rounded addition is at most this.
UNIT_ROUNDOFF_F32 = 2.0**-24


class UnknownVariantError(LabError, ValueError):
    """The variant name is not one of :data:`VARIANTS`."""


# ---------------------------------------------------------------------------------------------
# 1-4: the tree in shared memory, one partial sum per block
# ---------------------------------------------------------------------------------------------


@cuda.jit
def reduce_interleaved_divergent(x, partial):
    """Variant 1: interleaved addressing, ``tid % (2*stride) == 0`` picks the adding threads.

    At every level the adding threads are spread over all warps, so every warp diverges
    (and ``%`` is a slow instruction).
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)  # guard the load (zero past the end), never the barrier
    cuda.syncthreads()  # RAW: every element is in shared memory before anyone adds
    stride = 1
    while stride < cuda.blockDim.x:
        if tid % (2 * stride) == 0:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride *= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_interleaved(x, partial):
    """Variant 2: the adding threads are ``0 .. blockDim/(2*stride) - 1``; no divergence, bank conflicts.

    Thread ``tid`` works on word ``2*stride*tid``: a warp touches every ``2*stride``-th
    word, so several of its addresses fall into the same shared-memory bank.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()  # RAW: every element is in shared memory before anyone adds
    stride = 1
    while stride < cuda.blockDim.x:
        index = 2 * stride * tid
        if index < cuda.blockDim.x:
            s[index] += s[index + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride *= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_sequential(x, partial):
    """Variant 3: sequential addressing, ``s[tid] += s[tid + stride]`` with the stride halving.

    The adding threads are contiguous (whole warps idle, none diverges) and a warp reads
    32 consecutive words (32 different banks).
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()  # RAW: every element is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_first_add(x, partial):
    """Variant 4: each block covers ``2 * blockDim`` elements; the first level happens during the load.

    Half as many blocks, and no thread is idle in the first addition.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (2 * cuda.blockDim.x) + tid
    v = float32(0)
    if i < x.size:
        v = x[i]
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


# ---------------------------------------------------------------------------------------------
# 5-6: the last warp without block barriers (needs cuda.syncwarp: GPU only)
# ---------------------------------------------------------------------------------------------


@cuda.jit(device=True)
def last_warp_level(s, lane, stride):
    """One level of the tree inside the last warp: read, wait for the warp, then write.

    Since Volta (independent thread scheduling) the lanes of a warp are not guaranteed to
    run in lockstep, so the warp needs its own barrier between the reads and the writes.
    """
    v = s[lane]
    if lane < stride:
        v += s[lane + stride]
    cuda.syncwarp()  # WAR: every lane has read its partner before any lane overwrites a word
    s[lane] = v
    cuda.syncwarp()  # RAW: the new sums are visible to the whole warp before the next level reads them


@cuda.jit
def reduce_unroll_last_warp(x, partial):
    """Variant 5: variant 4, with the levels of stride 32 .. 1 unrolled for the last warp.

    Those six levels need no ``syncthreads`` (one warp is left), only ``syncwarp``.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (2 * cuda.blockDim.x) + tid
    v = float32(0)
    if i < x.size:
        v = x[i]
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > WARP:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid < WARP:  # warp 0 finishes alone
        if cuda.blockDim.x >= 64:
            last_warp_level(s, tid, 32)
        last_warp_level(s, tid, 16)
        last_warp_level(s, tid, 8)
        last_warp_level(s, tid, 4)
        last_warp_level(s, tid, 2)
        last_warp_level(s, tid, 1)
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_last_warp_unsafe(x, partial):
    """PITFALL (do not use): variant 5 as the classic lectures wrote it, with no ``syncwarp``.

    It assumes the 32 lanes of a warp execute each line in lockstep and re-read shared
    memory on every line (the C++ original needs ``volatile`` for that). Neither holds:
    since Volta lanes may run apart, and the compiler may load every partner word before
    storing any sum. The result is then wrong.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (2 * cuda.blockDim.x) + tid
    v = float32(0)
    if i < x.size:
        v = x[i]
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > WARP:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid < WARP:  # WRONG from here on: a data race inside the warp
        if cuda.blockDim.x >= 64:
            s[tid] += s[tid + 32]
        s[tid] += s[tid + 16]
        s[tid] += s[tid + 8]
        s[tid] += s[tid + 4]
        s[tid] += s[tid + 2]
        s[tid] += s[tid + 1]
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


_FULL_UNROLL: dict[int, Any] = {}


def make_reduce_full_unroll(block: int):
    """Variant 6: variant 5 with the block size a compile-time constant and every level unrolled.

    CUDA C++ uses a template parameter; in Numba a kernel factory does the same job: the
    kernel closes over ``block``, Numba freezes closure variables as constants when it
    compiles, and the branches ``if block >= 512:`` disappear from the machine code. One
    kernel per block size, cached. Launch it with exactly ``block`` threads per block.
    """
    block = check_block_size(block)
    if block in _FULL_UNROLL:
        return _FULL_UNROLL[block]

    @cuda.jit
    def reduce_full_unroll(x, partial):
        s = cuda.shared.array(block, float32)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * (2 * block) + tid
        v = float32(0)
        if i < x.size:
            v = x[i]
        if i + block < x.size:
            v += x[i + block]
        s[tid] = v
        cuda.syncthreads()  # RAW: every pair sum is in shared memory before anyone adds
        if block >= 1024:
            if tid < 512:
                s[tid] += s[tid + 512]
            cuda.syncthreads()  # RAW: level written before the next level reads it
        if block >= 512:
            if tid < 256:
                s[tid] += s[tid + 256]
            cuda.syncthreads()  # RAW: level written before the next level reads it
        if block >= 256:
            if tid < 128:
                s[tid] += s[tid + 128]
            cuda.syncthreads()  # RAW: level written before the next level reads it
        if block >= 128:
            if tid < 64:
                s[tid] += s[tid + 64]
            cuda.syncthreads()  # RAW: level written before the next level reads it
        if tid < WARP:  # warp 0 finishes alone
            if block >= 64:
                last_warp_level(s, tid, 32)
            last_warp_level(s, tid, 16)
            last_warp_level(s, tid, 8)
            last_warp_level(s, tid, 4)
            last_warp_level(s, tid, 2)
            last_warp_level(s, tid, 1)
        if tid == 0:
            partial[cuda.blockIdx.x] = s[0]

    _FULL_UNROLL[block] = reduce_full_unroll
    return reduce_full_unroll


# ---------------------------------------------------------------------------------------------
# 7 and after: many elements per thread
# ---------------------------------------------------------------------------------------------


@cuda.jit
def reduce_grid_stride(x, partial):
    """Variant 7: each thread first sums ``x[i], x[i + gridsize], ...`` (a grid-stride loop).

    With a grid sized to fill the GPU once, every thread adds hundreds of elements before
    the block's tree, so the tree's cost (barriers, idle threads) hardly matters.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    v = float32(0)
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < x.size:
        v += x[i]
        i += step
    s[tid] = v
    cuda.syncthreads()  # RAW: every thread's sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit(device=True)
def warp_sum(v):
    """Sum ``v`` over the 32 lanes of a warp with shuffles; lane 0 gets the total.

    ``shfl_down_sync(mask, v, k)`` hands each lane the ``v`` of the lane ``k`` above it:
    five steps (16, 8, 4, 2, 1) fold 32 values into one, registers only, no shared memory.
    """
    v += cuda.shfl_down_sync(FULL_MASK, v, 16)
    v += cuda.shfl_down_sync(FULL_MASK, v, 8)
    v += cuda.shfl_down_sync(FULL_MASK, v, 4)
    v += cuda.shfl_down_sync(FULL_MASK, v, 2)
    v += cuda.shfl_down_sync(FULL_MASK, v, 1)
    return v


@cuda.jit(device=True)
def block_sum(v, warp_sums):
    """Sum ``v`` over the block (a multiple of 32 threads); thread 0 gets the total.

    Each warp folds its 32 values with shuffles, lane 0 of each warp parks the warp's sum
    in ``warp_sums`` (shared memory, 32 words), and warp 0 folds those. Every thread of
    the block must call it (it contains a barrier).
    """
    lane = cuda.threadIdx.x % WARP
    warp = cuda.threadIdx.x // WARP
    v = warp_sum(v)
    if lane == 0:
        warp_sums[warp] = v
    cuda.syncthreads()  # RAW: every warp's sum is in shared memory before warp 0 reads them
    total = float32(0)
    if warp == 0:
        if lane < cuda.blockDim.x // WARP:
            total = warp_sums[lane]
        total = warp_sum(total)
    return total


@cuda.jit
def reduce_warp_shuffle(x, partial):
    """Grid-stride loop, then a block sum with warp shuffles (:func:`block_sum`): GPU only."""
    warp_sums = cuda.shared.array(WARP, float32)
    v = float32(0)
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < x.size:
        v += x[i]
        i += step
    total = block_sum(v, warp_sums)
    if cuda.threadIdx.x == 0:
        partial[cuda.blockIdx.x] = total


@cuda.jit
def reduce_atomic_per_element(x, out):
    """Every thread adds its element straight into ``out[0]``: one atomic per element.

    Correct (atomics never lose an update) but every addition to the same address is
    serialised in the L2 cache. ``out[0]`` must be zero before the launch.
    """
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def reduce_atomic_per_block(x, out):
    """Variant 7's grid-stride loop and tree, then one atomic per block into ``out[0]``: one launch.

    ``out[0]`` must be zero before the launch.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    v = float32(0)
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < x.size:
        v += x[i]
        i += step
    s[tid] = v
    cuda.syncthreads()  # RAW: every thread's sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, s[0])


_BEST: dict[tuple[int, int], Any] = {}


def make_reduce_best(block: int = 256, unroll: int = 8):
    """The chapter's fastest kernel, for ``block`` threads per block and ``unroll`` loads in flight.

    * The grid is sized to what the GPU can hold at once (:func:`resident_blocks`); each
      block walks over tiles of ``unroll * block`` consecutive elements (a grid-stride loop
      over tiles). Thread ``tid`` reads ``tile[tid + k*block]`` for ``k < unroll`` into
      ``unroll`` independent accumulators: ``unroll`` loads in flight per thread, each
      coalesced, none waiting for another (Little's law: bandwidth = bytes in flight / latency).
    * Indices are unsigned 64-bit integers: Numba adds a negative-index check to every
      signed index (a compare and a select per load); an unsigned index has none, and the
      unrolled loop becomes ``unroll`` loads at constant offsets from one address.
    * The block's total comes from :func:`block_sum` (shuffles, then 32 words of shared
      memory), and thread 0 adds it into ``out[slot]`` with ONE atomic: a single launch.
    * ``out`` has two slots used in turn. ``out[slot]`` must be zero at the launch; the
      kernel clears the *other* slot for the next call (thread 0 of block 0), so no separate
      zeroing launch (a few microseconds each) is ever needed. :class:`Reducer` alternates
      ``slot`` and zeroes both slots once, when it allocates them.
    """
    block = check_block_size(block)
    if unroll < 1 or unroll > 32:
        raise LaunchConfigError(f"unroll must be between 1 and 32 loads in flight, got {unroll}")
    key = (block, unroll)
    if key in _BEST:
        return _BEST[key]
    ublock = uint64(block)
    tile = uint64(block * unroll)
    last = uint64((unroll - 1) * block)

    @cuda.jit("void(float32[::1], float32[::1], int64)")
    def reduce_best(x, out, slot):
        if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
            out[1 - slot] = float32(0)  # the next call's slot; this call adds into out[slot]
        warp_sums = cuda.shared.array(WARP, float32)
        acc = cuda.local.array(unroll, float32)  # unroll accumulators: registers after unrolling
        for k in range(unroll):
            acc[k] = float32(0)
        n = uint64(x.size)
        base = uint64(cuda.blockIdx.x) * tile + uint64(cuda.threadIdx.x)
        step = uint64(cuda.gridDim.x) * tile
        while base + last < n:  # whole tiles: unroll independent loads, no bounds checks
            for k in range(unroll):
                acc[k] += x[base + uint64(k) * ublock]
            base += step
        for k in range(unroll):  # at most one partial tile per thread
            j = base + uint64(k) * ublock
            if j < n:
                acc[k] += x[j]
        v = float32(0)
        for k in range(unroll):
            v += acc[k]
        total = block_sum(v, warp_sums)
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(out, slot, total)

    _BEST[key] = reduce_best
    return reduce_best


@cuda.jit
def fill_zero(out):
    """``out[:] = 0`` on the device, asynchronously (for the atomic variants' accumulator)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = float32(0)


# ---------------------------------------------------------------------------------------------
# The variants and how to launch them
# ---------------------------------------------------------------------------------------------

#: How a variant is launched: once per tree level, grid-stride then a 1-block second pass,
#: one launch with atomics (per element, or per block over a resident grid).
LEVELS, TWO_PASS, ATOMIC_ELEMENT, ATOMIC_BLOCK = "levels", "two-pass", "atomic per element", "atomic per block"


@dataclass(frozen=True)
class Variant:
    """One reduction kernel of the chapter and how to launch it.

    Attributes:
        key: its name in :data:`VARIANTS` and in the reference tables.
        number: its place in the classic sequence (1-7), or None for the later ones.
        title: a short name for tables and plots.
        lesson: what it teaches, in one line.
        launch: :data:`LEVELS`, :data:`TWO_PASS`, :data:`ATOMIC_ELEMENT` or :data:`ATOMIC_BLOCK`.
        per_thread: elements each thread loads in a :data:`LEVELS` pass (1, or 2 with the first add).
        needs: the warp intrinsic that makes it GPU-only, or "" if the simulator can run it.
    """

    key: str
    number: int | None
    title: str
    lesson: str
    launch: str
    per_thread: int = 1
    needs: str = ""

    @property
    def gpu_only(self) -> bool:
        """True when the kernel uses warp intrinsics the simulator lacks."""
        return bool(self.needs)

    @property
    def label(self) -> str:
        """``"1. interleaved, divergent"`` style label."""
        return f"{self.number}. {self.title}" if self.number else self.title


VARIANTS: dict[str, Variant] = {v.key: v for v in [
    Variant("interleaved_divergent", 1, "interleaved, divergent",
            "tid % (2*stride) == 0: adding threads spread over every warp", LEVELS),
    Variant("interleaved", 2, "interleaved, no divergence",
            "index = 2*stride*tid: warps stay uniform, shared-memory banks conflict", LEVELS),
    Variant("sequential", 3, "sequential addressing",
            "s[tid] += s[tid + stride]: no divergence, no bank conflicts", LEVELS),
    Variant("first_add", 4, "first add during load",
            "each thread adds two elements while loading: half the blocks", LEVELS, per_thread=2),
    Variant("unroll_last_warp", 5, "unrolled last warp",
            "the last six levels with syncwarp instead of syncthreads", LEVELS, per_thread=2,
            needs="cuda.syncwarp()"),
    Variant("full_unroll", 6, "full unroll (compile-time block)",
            "a kernel factory fixes the block size: every level unrolled", LEVELS, per_thread=2,
            needs="cuda.syncwarp()"),
    Variant("grid_stride", 7, "several elements per thread",
            "a grid-stride loop sums many elements per thread before the tree", TWO_PASS),
    Variant("warp_shuffle", None, "warp shuffle",
            "shfl_down_sync folds a warp in registers; shared memory only across warps", TWO_PASS,
            needs="cuda.shfl_down_sync()"),
    Variant("atomic_per_element", None, "one atomic per element",
            "correct but serialised: every element is an atomic on one address", ATOMIC_ELEMENT),
    Variant("atomic_per_block", None, "one atomic per block",
            "grid-stride loop and tree, one atomic per block: one launch", ATOMIC_BLOCK),
    Variant("best", None, "best kernel",
            "independent loads in flight, resident grid, shuffles, one atomic per block: one launch", ATOMIC_BLOCK,
            needs="cuda.shfl_down_sync()"),
]}

#: The classic sequence, in order.
CLASSIC: tuple[str, ...] = tuple(k for k, v in VARIANTS.items() if v.number is not None)
#: The variants Numba's CUDA simulator can run.
SIMULATOR_VARIANTS: tuple[str, ...] = tuple(k for k, v in VARIANTS.items() if not v.gpu_only)


def variant(key: str) -> Variant:
    """Look up a variant by key.

    Raises:
        UnknownVariantError: with the list of valid keys.
    """
    try:
        return VARIANTS[key]
    except (KeyError, TypeError):
        raise UnknownVariantError(
            f"unknown reduction variant {key!r}: choose one of {', '.join(VARIANTS)}") from None


def check_block_size(threads: int) -> int:
    """Return ``threads`` if it is a power of two from 32 to 1024, else raise LaunchConfigError.

    The tree kernels halve the number of adding threads at every level, so the block must
    be a power of two; at least one warp, because the warp-level steps assume 32 lanes.
    """
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise LaunchConfigError(f"threads per block must be an integer, got {threads!r}")
    threads = int(threads)
    if threads < WARP or threads > MAX_THREADS or threads & (threads - 1):
        raise LaunchConfigError(
            f"this reduction needs a power-of-two block of 32 to 1024 threads, got {threads}: "
            f"choose one of {', '.join(map(str, BLOCK_SIZES))} (256 is a good default).")
    return threads


def kernel_for(key: str, threads: int = 256, unroll: int = 8):
    """The compiled kernel (dispatcher) of a variant; factories are called with ``threads``."""
    key = variant(key).key
    if key == "full_unroll":
        return make_reduce_full_unroll(threads)
    if key == "best":
        return make_reduce_best(threads, unroll)
    return {
        "interleaved_divergent": reduce_interleaved_divergent,
        "interleaved": reduce_interleaved,
        "sequential": reduce_sequential,
        "first_add": reduce_first_add,
        "unroll_last_warp": reduce_unroll_last_warp,
        "grid_stride": reduce_grid_stride,
        "warp_shuffle": reduce_warp_shuffle,
        "atomic_per_element": reduce_atomic_per_element,
        "atomic_per_block": reduce_atomic_per_block,
    }[key]


# ---------------------------------------------------------------------------------------------
# Grid sizes
# ---------------------------------------------------------------------------------------------

#: Under the simulator there is no GPU to fill: grid-stride kernels get this many blocks at most.
SIMULATOR_GRID = 4


def resident_blocks(threads: int, kernel=None) -> int:
    """How many blocks of ``threads`` threads the whole GPU holds at once (one "wave").

    With ``kernel`` (a dispatcher compiled for one signature) the CUDA occupancy calculator
    answers, taking its registers and shared memory into account; otherwise
    ``SMs * (max threads per SM // threads)``. Under the simulator: :data:`SIMULATOR_GRID`.
    """
    if backend.is_simulator():
        return SIMULATOR_GRID
    if kernel is not None and getattr(kernel, "overloads", None):
        overload = next(iter(kernel.overloads.values()))
        return int(overload.max_cooperative_grid_blocks(threads))

    info = device_mod.device_info()
    return (info.sm_count or 1) * info.resident_blocks(threads)  # this GPU's SM, from its driver


def level_sizes(n: int, threads: int, per_thread: int = 1) -> list[tuple[int, int]]:
    """The passes of kernel decomposition: ``[(elements in, blocks), ...]`` until one value is left.

    Each pass turns ``m`` values into ``ceil(m / (threads * per_thread))`` partial sums, one
    per block; the kernel boundary between passes is the barrier across all blocks that a
    kernel cannot have inside it.

    >>> level_sizes(2**20, 256)
    [(1048576, 4096), (4096, 16), (16, 1)]
    """
    if n < 0:
        raise ValueError(f"the number of elements cannot be negative, got {n}")
    out = []
    m = n
    while True:
        blocks = blocks_for(m, threads, per_thread)
        out.append((m, blocks))
        if blocks == 1:
            return out
        m = blocks


# ---------------------------------------------------------------------------------------------
# The host side: validate, plan, launch
# ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One kernel launch of a reduction: ``kernel[blocks, threads](src, dst)``."""

    kernel: Any
    blocks: int
    threads: int
    src: Any
    dst: Any
    _launch: ConfiguredKernel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._launch = ConfiguredKernel(self.kernel, self.blocks, self.threads)

    def __call__(self, *extra) -> None:
        self._launch(self.src, self.dst, *extra)


@dataclass
class Reducer:
    """A reduction of one float32 vector, planned once and launchable many times.

    All buffers are allocated when it is built, so :meth:`launch` only enqueues kernels
    (no allocation, no copy, no synchronisation): that is what a benchmark should time.

    >>> r = Reducer(x, "sequential", threads=256)   # doctest: +SKIP
    >>> r.launch(); total = r.result()               # doctest: +SKIP

    Args:
        x: a 1-D, C-contiguous float32 array (NumPy: copied to the device once; CuPy or a
            Numba device array: used in place).
        variant: a key of :data:`VARIANTS`.
        threads: threads per block: a power of two from 32 to 1024 (any 1..1024 for
            ``atomic_per_element``).
        blocks: grid of the first pass of grid-stride variants (default: what fills the GPU once).
        unroll: loads in flight per thread for ``best``.

    Raises:
        ArrayArgumentError: ``x`` is not a 1-D contiguous float32 array.
        LaunchConfigError: ``threads`` or ``blocks`` is not allowed for this variant.
        UnknownVariantError: no such variant.
        GPUOnlyError: the variant needs warp intrinsics and this is the simulator.
    """

    x: Any
    variant: str = "grid_stride"
    threads: int = 256
    blocks: int | None = None
    unroll: int = 8
    steps: list[Step] = field(init=False, default_factory=list)
    n: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        validate.array(self.x, "x", dtype=np.float32, ndim=1)
        v = variant(self.variant)
        if v.launch == ATOMIC_ELEMENT:
            if isinstance(self.threads, bool) or not isinstance(self.threads, (int, np.integer)) or not (
                    1 <= self.threads <= MAX_THREADS):
                raise LaunchConfigError(f"threads per block must be an integer from 1 to 1024, got {self.threads!r}")
        else:
            self.threads = check_block_size(self.threads)
        if self.blocks is not None and (not isinstance(self.blocks, (int, np.integer)) or self.blocks < 1):
            raise LaunchConfigError(f"blocks must be a positive integer (or None for a full GPU), got {self.blocks!r}")
        if v.gpu_only:
            backend.require_gpu(f"variant {v.key!r} ({v.label})",
                                because=f"uses {v.needs}, which Numba's CUDA simulator does not have",
                                instead="Its measured bandwidth is in lh.load_reference('ch06_reduction_sweep').")
        self.n = int(self.x.shape[0])
        self._variant = v
        x_d = to_device(self.x)
        self._x_d = x_d
        kernel = kernel_for(v.key, self.threads, self.unroll)
        self._zero_first = v.launch in (ATOMIC_ELEMENT, ATOMIC_BLOCK) and v.key != "best"
        self._slot = 0  # the best kernel's accumulator slot for the next launch
        if v.launch == LEVELS:
            src = x_d
            for _m, blocks in level_sizes(self.n, self.threads, v.per_thread):
                dst = cuda.device_array(blocks, dtype=np.float32)
                self.steps.append(Step(kernel, blocks, self.threads, src, dst))
                src = dst
        elif v.launch == TWO_PASS:
            blocks = self._grid(self.threads, None)
            partial = cuda.device_array(blocks, dtype=np.float32)
            self.steps.append(Step(kernel, blocks, self.threads, x_d, partial))
            if blocks > 1:  # a second pass of one block adds the partial sums
                self.steps.append(Step(kernel, 1, self.threads, partial, cuda.device_array(1, dtype=np.float32)))
        elif v.key == "best":  # two slots used in turn; the kernel clears the next one (no zeroing launch)
            out = cuda.to_device(np.zeros(2, dtype=np.float32))
            blocks = self._grid(self.threads, kernel)
            blocks = min(blocks, blocks_for(self.n, self.threads, self.unroll))  # no block without a tile
            self.steps.append(Step(kernel, blocks, self.threads, x_d, out))
        else:
            out = cuda.device_array(1, dtype=np.float32)
            if v.launch == ATOMIC_ELEMENT:
                blocks = blocks_for(self.n, self.threads)
            else:
                blocks = self._grid(self.threads, None)
            self.steps.append(Step(kernel, blocks, self.threads, x_d, out))
        self._out = self.steps[-1].dst
        self._zero_launch = None

    def _grid(self, threads: int, kernel) -> int:
        if self.blocks is not None:
            return int(self.blocks)
        return max(1, min(resident_blocks(threads, kernel), blocks_for(self.n, threads)))

    @property
    def launches(self) -> list[tuple[int, int]]:
        """``(blocks, threads)`` of every kernel launch, in order (the zeroing kernel not counted)."""
        return [(s.blocks, s.threads) for s in self.steps]

    @property
    def nbytes(self) -> int:
        """Bytes a reduction must read: ``4 n``. Effective bandwidth = nbytes / time."""
        return 4 * self.n

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous on a GPU): zero the accumulator if needed, then every pass."""
        if self._zero_first:
            if backend.is_simulator():
                fill_zero[1, WARP](self._out)
            else:
                if self._zero_launch is None:
                    self._zero_launch = fill_zero[1, WARP]
                self._zero_launch(self._out)
        if self._variant.key == "best":
            self.steps[0](self._slot)
            self._slot = 1 - self._slot
            return
        for step in self.steps:
            step()

    def result(self) -> np.float32:
        """Copy the sum of the last launch to the host (waits for the kernels)."""
        index = 1 - self._slot if self._variant.key == "best" else 0
        return np.float32(self._out.copy_to_host()[index])

    def __call__(self) -> np.float32:
        """Launch and return the sum."""
        self.launch()
        return self.result()


def reduce_sum(x, variant: str = "grid_stride", threads: int = 256, blocks: int | None = None) -> np.float32:
    """Sum a float32 vector on the GPU (or the simulator) with one of the chapter's kernels.

    Validates the input, plans the passes (kernel decomposition, or a grid-stride pass and
    a one-block second pass, or one launch with atomics) and returns the float32 sum.

    Args:
        x: 1-D, C-contiguous float32 array (NumPy, CuPy or Numba device array).
        variant: a key of :data:`VARIANTS` (see the module docstring).
        threads: threads per block, a power of two from 32 to 1024.
        blocks: first-pass grid of the grid-stride variants (default: fill the GPU once).

    Example:
        >>> reduce_sum(np.ones(1000, np.float32), "sequential", threads=64)   # doctest: +SKIP
        np.float32(1000.0)
    """
    return Reducer(x, variant, threads, blocks)()


# ---------------------------------------------------------------------------------------------
# Accuracy: the float64 reference, the error bound, exact test data
# ---------------------------------------------------------------------------------------------


def reference_sum(x) -> float:
    """The sum of ``x`` accumulated in float64 by NumPy: the reference every kernel is compared with."""
    return float(np.sum(np.asarray(x), dtype=np.float64))


def error_bound(x, depth: int | None = None) -> float:
    """A bound on ``|float32 sum - exact sum|``: ``depth * u * sum(|x|)`` with ``u = 2**-24``.

    Any order of summation in which every element passes through at most ``depth``
    rounded additions has an error at most about ``depth * u * sum|x_i|`` (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2002, section 4.2). A sequential loop
    has ``depth = n - 1`` (the default, valid for every kernel here); a tree over ``n``
    values has ``ceil(log2 n)``.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    if depth is None:
        depth = max(n - 1, 1)
    return float(depth * UNIT_ROUNDOFF_F32 * np.sum(np.abs(x)))


def integer_valued(n: int, rng: np.random.Generator | None = None, low: int = -8, high: int = 8) -> np.ndarray:
    """``n`` float32 values that are small integers: every partial sum is exact in float32.

    As long as every partial sum stays below ``2**24`` in magnitude, float32 adds such values
    without rounding, whatever the order: a kernel that gets the sum wrong has a bug, not a
    rounding error.
    """
    rng = rng or np.random.default_rng(0)
    if n * max(abs(low), abs(high)) >= 2**24:
        raise ValueError(f"n={n} values up to {max(abs(low), abs(high))} could leave float32's exact integer range")
    return rng.integers(low, high + 1, size=n).astype(np.float32)


def run_last_warp_unsafe(x, threads: int = 256) -> np.float32:
    """Sum ``x`` with the PITFALL kernel :func:`reduce_last_warp_unsafe` (one launch per level). GPU only.

    The answer may be right or wrong: the kernel has a data race, so the outcome depends on
    the compiler and the scheduler. Under the simulator the question cannot be asked (its
    "warps" are 32 independent Python threads), so it raises GPUOnlyError.
    """
    if backend.is_simulator():
        raise GPUOnlyError(
            "the last-warp race is about how a real GPU schedules the 32 lanes of a warp and how the compiler "
            "orders their shared-memory loads and stores; the simulator runs each lane as a separate Python "
            "thread, so whatever it printed would say nothing about a GPU. Run this cell on a GPU.")
    validate.array(x, "x", dtype=np.float32, ndim=1)
    threads = check_block_size(threads)
    src = to_device(x)
    for _m, blocks in level_sizes(int(x.shape[0]), threads, per_thread=2):
        dst = cuda.device_array(blocks, dtype=np.float32)
        reduce_last_warp_unsafe[blocks, threads](src, dst)
        src = dst
    return np.float32(src.copy_to_host()[0])


__all__ = [
    "BLOCK_SIZES", "CLASSIC", "MAX_THREADS", "Reducer", "SIMULATOR_VARIANTS", "Step", "UnknownVariantError",
    "VARIANTS", "Variant", "block_sum", "check_block_size", "error_bound", "fill_zero", "integer_valued",
    "kernel_for", "level_sizes", "make_reduce_best", "make_reduce_full_unroll", "reduce_atomic_per_block",
    "reduce_atomic_per_element", "reduce_first_add", "reduce_grid_stride", "reduce_interleaved",
    "reduce_interleaved_divergent", "reduce_last_warp_unsafe", "reduce_sequential", "reduce_sum",
    "reduce_unroll_last_warp", "reduce_warp_shuffle", "reference_sum", "resident_blocks",
    "run_last_warp_unsafe", "warp_sum", "last_warp_level",
]
