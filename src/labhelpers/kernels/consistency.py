"""Chapter "Memory consistency and coherence": lost updates, atomics, CAS, locks, fences, litmus tests.

Every kernel here teaches one thing about what threads see of each other's memory accesses:

================================  ====================================================================
 kernel                            lesson
================================  ====================================================================
 ``count_racy``                    ``counter[0] += 1`` is a load, an add and a store: updates get lost
 ``count_atomic``                  ``cuda.atomic.add``: one indivisible read-modify-write per thread
 ``count_warp_aggregated``         one atomic per warp (``activemask``/``popc``): GPU only
 ``count_block_aggregated``        shared-memory atomics, then one global atomic per block
 ``atomic_add_grouped``            atomic throughput: ``group`` threads share one address
 ``max_cas``                       a compare-and-swap loop: float32 max on order-preserving int32 keys
 ``count_locked``                  a spin lock taken by every thread (deadlocked before Volta)
 ``pair_update_locked``            a lock that keeps two words consistent (one holder per block)
 ``make_sum_last_block``           single-pass sum: ``threadfence`` + atomic ticket, the last block finishes
 ``make_litmus_kernel``            MP, SB, LB, CoRR litmus tests, many instances per launch
 ``shift_racy`` / ``shift_synced`` a missing ``syncthreads`` between a shared write and a read
================================  ====================================================================

Numba's atomics (``cuda.atomic.add``, ``cas``, ``exch``...) are *relaxed* (LLVM ``monotonic``,
PTX ``atom`` without ``.acquire``/``.release``): indivisible, but they order nothing else.
Ordering comes from fences: ``cuda.threadfence_block()``, ``cuda.threadfence()`` and
``cuda.threadfence_system()`` compile to PTX ``membar.cta``, ``membar.gl`` and ``membar.sys``,
which since compute capability 7.0 mean ``fence.sc.cta``, ``fence.sc.gpu`` and ``fence.sc.sys``.
Numba has no ``volatile``: a flag another thread sets must be read with an atomic (e.g.
``cuda.atomic.or_(flag, 0, 0)``), or the compiler may keep it in a register.

Under Numba's CUDA simulator blocks run one after the other and the threads of a block are
Python threads: races between blocks never show, races inside a block rarely. Kernels that
need warp intrinsics raise :class:`~labhelpers.errors.GPUOnlyError` there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda, float32, int32, uint32, uint64

from .. import backend, validate
from ..arrays import to_device
from ..errors import ArgumentError, ArrayArgumentError, LaunchConfigError
from ..launch import blocks_for, tiles_for

#: Threads of a warp.
WARP = 32
#: Largest block (the shared arrays of the block-level kernels have this many words).
MAX_THREADS = 1024
#: Block size of the last-block reduction (a compile-time constant of its kernels).
SUM_THREADS = 256
#: Independent loads in flight per thread in the last-block reduction.
SUM_UNROLL = 8
#: ``b ^ FLIP`` maps the int32 bits of a negative float32 onto an increasing key (see :func:`float_key`).
FLIP = 0x7FFFFFFF
#: The key of -inf: the starting value of a max.
KEY_MINUS_INF = -2139095041


class UnknownVariantError(ArgumentError):
    """The name is not one of the known variants."""


# ---------------------------------------------------------------------------------------------
# Argument checks shared by the host wrappers
# ---------------------------------------------------------------------------------------------


def _int(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int in range, else :class:`~labhelpers.errors.ArgumentError` naming the fix."""
    return validate.integer(value, name, minimum=minimum, maximum=maximum, allow_float=False)


def _threads(value, name: str = "threads") -> int:
    return validate.threads_per_block(value, name)


def _choice(value, name: str, options) -> str:
    if value not in options:
        raise UnknownVariantError(f"unknown {name} {value!r}: choose one of {', '.join(map(str, options))}")
    return value


# ---------------------------------------------------------------------------------------------
# 1. Lost updates, and four counters that do not lose them
# ---------------------------------------------------------------------------------------------


@cuda.jit
def count_racy(counter, n):
    """WRONG: every thread ``i < n`` does ``counter[0] += 1``: load, add, store, not atomic.

    Two threads that load the same old value both store old + 1: one update is lost.
    """
    i = cuda.grid(1)
    if i < n:
        counter[0] += 1


@cuda.jit
def count_atomic(counter, n):
    """Every thread ``i < n`` adds 1 with ``cuda.atomic.add``: one indivisible read-modify-write."""
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(counter, 0, 1)


@cuda.jit
def count_warp_aggregated(counter, n):
    """One atomic per warp: the lowest active lane adds the number of active lanes. GPU only.

    ``activemask()`` has a bit for every lane that runs this line with us; ``popc`` counts
    them; ``ffs`` finds the lowest one (1-based), the warp's leader.
    """
    i = cuda.grid(1)
    if i < n:
        mask = cuda.activemask()
        leader = cuda.ffs(mask) - 1
        if cuda.laneid == leader:
            cuda.atomic.add(counter, 0, cuda.popc(mask))


@cuda.jit
def count_block_aggregated(counter, n):
    """Shared-memory atomics inside the block, then one global atomic per block.

    Shared-memory atomics are executed by the SM itself, close to the threads; only one
    update per block travels to the L2 cache.
    """
    block_count = cuda.shared.array(1, int32)
    if cuda.threadIdx.x == 0:
        block_count[0] = 0
    cuda.syncthreads()  # RAW: the zero is written before any thread adds to it
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(block_count, 0, 1)
    cuda.syncthreads()  # RAW: every thread's addition is done before thread 0 reads the total
    if cuda.threadIdx.x == 0 and block_count[0] > 0:
        cuda.atomic.add(counter, 0, block_count[0])


#: The counters of the chapter, by name.
COUNTERS: dict[str, Any] = {
    "racy": count_racy,
    "atomic": count_atomic,
    "warp_aggregated": count_warp_aggregated,
    "block_aggregated": count_block_aggregated,
}
#: Counters that need warp intrinsics (not in Numba's simulator).
GPU_ONLY_COUNTERS = ("warp_aggregated",)

#: What chapter 13 shows in place of a GPU-only counter under the simulator: the ``instead`` of
#: :func:`labhelpers.backend.require_gpu`, the one "needs a GPU" guard (its message is the chapter's output,
#: and the lines below keep their numbers: ch13_racecheck's report names a line of run_shift).
WITHOUT_A_GPU = "Without a GPU, the chapter shows reference data."


def run_counter(variant: str, n: int, threads: int = 256) -> int:
    """Launch counter ``variant`` with ``n`` counting threads (``ceil(n/threads)`` blocks); return the count.

    The right answer is ``n``; ``racy`` may return less (lost updates).

    Raises:
        UnknownVariantError: not a key of :data:`COUNTERS`.
        LaunchConfigError: ``n`` < 1 or ``threads`` not in 1..1024.
        GPUOnlyError: ``warp_aggregated`` under the simulator.
    """
    _choice(variant, "counter", COUNTERS)
    n = _int(n, "n", minimum=1)
    threads = _threads(threads)
    if variant in GPU_ONLY_COUNTERS:
        backend.require_gpu("the warp-aggregated counter", because="uses cuda.activemask(), which the simulator lacks",
                            instead=WITHOUT_A_GPU)
    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    COUNTERS[variant][blocks_for(n, threads), threads](counter, n)
    return int(counter.copy_to_host()[0])


# ---------------------------------------------------------------------------------------------
# 2. Atomic throughput: how many threads share an address
# ---------------------------------------------------------------------------------------------


@cuda.jit
def atomic_add_grouped(counts, n, reps, group):
    """Thread ``i < n`` adds 1 to ``counts[i // group]``, ``reps`` times.

    ``group = n``: one contended address; ``group = 32``: one address per warp; ``group = 1``:
    one address per thread. ``counts`` needs ``ceil(n / group)`` zeroed elements.
    """
    i = cuda.grid(1)
    if i < n:
        k = i // group
        for _ in range(reps):
            cuda.atomic.add(counts, k, 1)


def grouped_counts_reference(n: int, reps: int, group: int) -> np.ndarray:
    """What :func:`atomic_add_grouped` leaves in ``counts``: ``reps`` times the threads of each group."""
    sizes = np.full(tiles_for(n, group), group, dtype=np.int64)
    sizes[-1] = n - group * (sizes.size - 1)
    return (reps * sizes).astype(np.int32)


def run_atomic_grouped(n: int, group: int, reps: int = 1, threads: int = 256) -> np.ndarray:
    """Launch :func:`atomic_add_grouped` and return ``counts`` (compare with :func:`grouped_counts_reference`)."""
    n = _int(n, "n", minimum=1)
    group = _int(group, "group", minimum=1)
    reps = _int(reps, "reps", minimum=1)
    threads = _threads(threads)
    if reps * group > 2**31 - 1:
        raise LaunchConfigError(f"reps * group = {reps * group} would overflow the int32 counters: lower reps")
    counts = cuda.to_device(np.zeros(tiles_for(n, group), dtype=np.int32))
    atomic_add_grouped[blocks_for(n, threads), threads](counts, n, reps, group)
    return counts.copy_to_host()


# ---------------------------------------------------------------------------------------------
# 3. Compare-and-swap: an atomic float max built from cas
# ---------------------------------------------------------------------------------------------


def float_key(x) -> np.ndarray:
    """Order-preserving int32 keys of float32 values: ``a < b`` exactly when ``key(a) < key(b)``.

    The int32 view of a non-negative float grows with the float; a negative float has the sign
    bit set and its magnitude bits grow as the float *decreases*, so flipping the 31 lower bits
    (``b ^ 0x7FFFFFFF``) reverses them. -0.0 maps to -1, just below +0.0 (0). The map is its own
    inverse (:func:`key_float`). NaN has no place in an order: rejected by the wrappers.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.int32)
    return np.where(bits >= 0, bits, bits ^ np.int32(FLIP)).astype(np.int32)


def key_float(key) -> np.ndarray:
    """The float32 values of order-preserving keys (the inverse of :func:`float_key`)."""
    key = np.asarray(key, dtype=np.int32)
    return np.where(key >= 0, key, key ^ np.int32(FLIP)).astype(np.int32).view(np.float32)


@cuda.jit
def max_cas(x_bits, best_key):
    """``best_key[0] = max(best_key[0], key(x))`` for every element, with a compare-and-swap loop.

    ``x_bits`` is the int32 view of the float32 input (same memory). ``cuda.atomic.cas(a, i,
    expected, new)`` writes ``new`` only if ``a[i]`` still holds ``expected``, and returns what
    it found: if another thread got there first, retry with the value it left.
    """
    i = cuda.grid(1)
    if i < x_bits.size:
        b = x_bits[i]
        key = b if b >= 0 else b ^ int32(FLIP)  # order-preserving key of the float
        seen = best_key[0]  # a guess: a stale value only costs one more round
        while seen < key:
            found = cuda.atomic.cas(best_key, 0, seen, key)
            if found == seen:
                break  # our key is in
            seen = found  # someone changed it: compare with the new value


def _check_floats(x, name: str = "x") -> np.ndarray:
    validate.array(x, name, dtype=np.float32, ndim=1)
    host = x if isinstance(x, np.ndarray) else np.asarray(x.copy_to_host() if hasattr(x, "copy_to_host") else x.get())
    if host.size == 0:
        raise ArrayArgumentError(f"{name} is empty: the maximum of no values is undefined; pass at least one value")
    if np.isnan(host).any():
        raise ArrayArgumentError(
            f"{name} contains NaN at index {int(np.flatnonzero(np.isnan(host))[0])}: NaN has no place in an order "
            f"(NaN > v and NaN < v are both false); remove it first, e.g. {name}[~np.isnan({name})]")
    return host


def run_float_max(x, threads: int = 256, kernel=None) -> np.float32:
    """The maximum of a float32 vector with :func:`max_cas` (or another ``kernel(x_bits, best_key)``).

    Raises:
        ArrayArgumentError: ``x`` is not a non-empty 1-D float32 array, or contains NaN.
    """
    host = _check_floats(x)
    threads = _threads(threads)
    kernel = kernel or max_cas
    best = cuda.to_device(np.array([KEY_MINUS_INF], dtype=np.int32))
    kernel[blocks_for(host.size, threads), threads](cuda.to_device(host.view(np.int32)), best)
    return np.float32(key_float(best.copy_to_host())[0])


# ---------------------------------------------------------------------------------------------
# 4. Locks
# ---------------------------------------------------------------------------------------------


@cuda.jit(device=True)
def lock_acquire(mutex):
    """Spin until this thread turns ``mutex[0]`` from 0 (free) to 1 (held), then fence (acquire).

    ``cas`` is relaxed: the fence keeps the critical section's loads from being performed
    before the lock is ours (and, with the release fence, makes the last holder's writes visible).
    """
    while cuda.atomic.cas(mutex, 0, 0, 1) != 0:
        pass
    cuda.threadfence()  # acquire: nothing below moves above the successful cas


@cuda.jit(device=True)
def lock_release(mutex):
    """Fence (release), then free the lock with an atomic exchange."""
    cuda.threadfence()  # release: the critical section's writes are visible before the lock is free
    cuda.atomic.exch(mutex, 0, 0)


@cuda.jit
def count_locked(counter, mutex, n):
    """Every thread ``i < n`` takes one global lock, does ``counter[0] += 1``, releases it.

    Correct since Volta (compute capability 7.0): independent thread scheduling lets the lane
    holding the lock run on while the other lanes of its warp spin. Before Volta a warp ran one
    path at a time: the spinning lanes kept the warp in the loop, the winner waited for them to
    leave it, and the warp deadlocked. Slow in any case: every update is serialised.
    """
    i = cuda.grid(1)
    if i < n:
        lock_acquire(mutex)
        counter[0] += 1  # plain load and store: safe, only the lock holder is here
        lock_release(mutex)


@cuda.jit
def pair_update_locked(values, pair, mutex):
    """Thread 0 of every block adds its block's (sum, count) to ``pair`` under a lock.

    Two atomics could update the words separately, but a reader between them would see a
    sum without its count; the lock makes the two words change together.
    """
    s = cuda.shared.array(MAX_THREADS, int32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = values[i] if i < values.size else 0
    cuda.syncthreads()  # RAW: every value is in shared memory before the tree reads it
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        count = min(cuda.blockDim.x, values.size - cuda.blockIdx.x * cuda.blockDim.x)
        lock_acquire(mutex)
        pair[0] += s[0]
        pair[1] += count
        lock_release(mutex)


def run_count_locked(n: int, threads: int = 32) -> int:
    """Count ``n`` threads with the per-thread spin lock :func:`count_locked`; return the count (should be ``n``)."""
    n = _int(n, "n", minimum=1)
    threads = _threads(threads)
    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    mutex = cuda.to_device(np.zeros(1, dtype=np.int32))
    count_locked[blocks_for(n, threads), threads](counter, mutex, n)
    return int(counter.copy_to_host()[0])


def run_pair_update_locked(values, threads: int = 64) -> tuple[int, int]:
    """``(sum, count)`` of an int32 vector, each block adding its share under :func:`pair_update_locked`'s lock."""
    validate.array(values, "values", dtype=np.int32, ndim=1)
    threads = _power_of_two(threads)
    if values.shape[0] == 0:
        raise ArrayArgumentError("values is empty: pass at least one value")
    pair = cuda.to_device(np.zeros(2, dtype=np.int32))
    mutex = cuda.to_device(np.zeros(1, dtype=np.int32))
    pair_update_locked[blocks_for(values.shape[0], threads), threads](cuda.to_device(np.asarray(values)), pair, mutex)
    got = pair.copy_to_host()
    return int(got[0]), int(got[1])


def _power_of_two(threads) -> int:
    threads = _threads(threads)
    if threads & (threads - 1):
        raise LaunchConfigError(f"this kernel's tree needs a power-of-two block, got {threads}: use 32, 64, ..., 1024")
    return threads


# ---------------------------------------------------------------------------------------------
# 5. The last-block reduction: one launch, a fence and an atomic ticket
# ---------------------------------------------------------------------------------------------

_LAST_BLOCK: dict[bool, Any] = {}


def make_sum_last_block(fence: bool = True):
    """A single-pass float32 sum: every block writes a partial sum, the last block to finish adds them.

    How does a block know it is the last? Thread 0 takes a ticket, ``cuda.atomic.inc(ticket,
    0, gridDim.x - 1)`` (which also wraps the ticket back to 0 for the next launch); the block
    that draws ``gridDim.x - 1`` sees every other block's ticket taken. But a taken ticket says
    nothing about the *partial sum* written just before it: the store and the atomic go to
    different addresses, and nothing orders them. ``cuda.threadfence()`` between them (release)
    and after the ticket in the last block (acquire) does (after NVIDIA's CUDA sample
    ``threadFenceReduction``). ``fence=False`` builds the broken version, for the chapter's pitfall.

    Each block reads tiles of ``SUM_THREADS * SUM_UNROLL`` float32 with ``SUM_UNROLL`` independent
    loads in flight per thread (unsigned indices: no negative-index checks), then a
    shared-memory tree. Launch with exactly ``SUM_THREADS`` threads per block.
    """
    fence = bool(fence)
    if fence in _LAST_BLOCK:
        return _LAST_BLOCK[fence]
    ublock = uint64(SUM_THREADS)
    tile = uint64(SUM_THREADS * SUM_UNROLL)
    last_load = uint64((SUM_UNROLL - 1) * SUM_THREADS)

    @cuda.jit
    def sum_last_block(x, partial, ticket, out):
        s = cuda.shared.array(SUM_THREADS, float32)
        am_last = cuda.shared.array(1, int32)
        tid = cuda.threadIdx.x
        acc = cuda.local.array(SUM_UNROLL, float32)
        for k in range(SUM_UNROLL):
            acc[k] = float32(0)
        n = uint64(x.size)
        base = uint64(cuda.blockIdx.x) * tile + uint64(tid)
        step = uint64(cuda.gridDim.x) * tile
        while base + last_load < n:  # whole tiles: SUM_UNROLL independent loads
            for k in range(SUM_UNROLL):
                acc[k] += x[base + uint64(k) * ublock]
            base += step
        for k in range(SUM_UNROLL):  # at most one partial tile per thread
            j = base + uint64(k) * ublock
            if j < n:
                acc[k] += x[j]
        v = float32(0)
        for k in range(SUM_UNROLL):
            v += acc[k]
        s[tid] = v
        cuda.syncthreads()  # RAW: every thread's sum is in shared memory before the tree
        stride = SUM_THREADS // 2
        while stride > 0:
            if tid < stride:
                s[tid] += s[tid + stride]
            cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
            stride //= 2
        if tid == 0:
            partial[cuda.blockIdx.x] = s[0]
            if fence:
                cuda.threadfence()  # release: the partial sum is visible GPU-wide before the ticket is taken
            t = cuda.atomic.inc(ticket, 0, uint32(cuda.gridDim.x - 1))  # wraps to 0 after the last block
            if fence:
                cuda.threadfence()  # acquire: the partial sums read below are not older than the tickets
            am_last[0] = 1 if t == cuda.gridDim.x - 1 else 0
        cuda.syncthreads()  # RAW: am_last is written before every thread reads it (and WAR on s)
        if am_last[0] == 1:  # the same for every thread of the block: the barriers below are safe
            v = float32(0)
            j = tid
            while j < cuda.gridDim.x:
                v += partial[j]
                j += SUM_THREADS
            s[tid] = v
            cuda.syncthreads()  # RAW: the partial sums are in shared memory before the tree
            stride = SUM_THREADS // 2
            while stride > 0:
                if tid < stride:
                    s[tid] += s[tid + stride]
                cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
                stride //= 2
            if tid == 0:
                out[0] = s[0]

    _LAST_BLOCK[fence] = sum_last_block
    return sum_last_block


#: Blocks of the last-block reduction under the simulator (each block is a few hundred Python threads).
SIM_SUM_BLOCKS = 3


@cuda.jit
def fill_float32(a, value):
    """``a[:] = value`` (a grid-stride loop)."""
    i = cuda.grid(1)
    while i < a.size:
        a[i] = value
        i += cuda.gridsize(1)


@dataclass
class LastBlockSum:
    """The last-block reduction of one float32 vector, planned once and launchable many times.

    >>> s = LastBlockSum(x); s.launch(); total = s.result()     # doctest: +SKIP

    Args:
        x: 1-D C-contiguous float32 (NumPy: copied once; CuPy or Numba device array: used in place).
        fence: False builds the broken kernel without fences (the chapter's pitfall).
        blocks: grid size (default: what the GPU holds at once; 3 under the simulator).
    """

    x: Any
    fence: bool = True
    blocks: int | None = None
    n: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        validate.array(self.x, "x", dtype=np.float32, ndim=1)
        self.n = int(self.x.shape[0])
        if self.n == 0:
            raise ArrayArgumentError("x is empty: pass at least one value to sum")
        self.kernel = make_sum_last_block(self.fence)
        if self.blocks is None:
            from .reduction import resident_blocks  # here, not at the top: chapter 13's stored race report quotes this module's line numbers

            grid = SIM_SUM_BLOCKS if backend.is_simulator() else resident_blocks(SUM_THREADS)
            self.blocks = max(1, min(grid, blocks_for(self.n, SUM_THREADS, per_thread=SUM_UNROLL)))
        self.blocks = _int(self.blocks, "blocks", minimum=1)
        self._x = to_device(self.x)
        self.partial = cuda.device_array(self.blocks, dtype=np.float32)
        self.ticket = cuda.to_device(np.zeros(1, dtype=np.uint32))
        self.out = cuda.device_array(1, dtype=np.float32)
        self._launch = None

    @property
    def nbytes(self) -> int:
        """Bytes read: ``4 n`` (the partial sums are negligible)."""
        return 4 * self.n

    def poison(self) -> None:
        """Fill the partial sums (and the result) with NaN, so a partial read before it was written shows."""
        fill_float32[1, 32](self.partial, np.float32(np.nan))
        fill_float32[1, 32](self.out, np.float32(np.nan))

    def launch(self) -> None:
        """Enqueue one launch (asynchronous on a GPU)."""
        if backend.is_simulator():
            self.kernel[self.blocks, SUM_THREADS](self._x, self.partial, self.ticket, self.out)
            return
        if self._launch is None:
            self._launch = self.kernel[self.blocks, SUM_THREADS]
        self._launch(self._x, self.partial, self.ticket, self.out)

    def result(self) -> np.float32:
        """The sum of the last launch (waits for it)."""
        return np.float32(self.out.copy_to_host()[0])

    def __call__(self) -> np.float32:
        self.launch()
        return self.result()


def sum_last_block(x, fence: bool = True, blocks: int | None = None) -> np.float32:
    """Sum a float32 vector in one launch with the last-block reduction (see :func:`make_sum_last_block`)."""
    return LastBlockSum(x, fence, blocks)()


def reference_sum(x) -> float:
    """The float64 sum of ``x``: what the reductions are compared with."""
    return float(np.sum(np.asarray(x), dtype=np.float64))


# ---------------------------------------------------------------------------------------------
# 6. Litmus tests on the GPU, many instances per launch (after MC Mutants and GPUHarbor)
# ---------------------------------------------------------------------------------------------

#: Layout of the ``params`` array of the litmus kernels.
P_TEST_BLOCKS, P_PERM_THREAD, P_PERM_LOC, P_STRIDE, P_SPIN, P_STRESS_ITERS, P_STRESS_BASE, P_ZERO, P_INTRA = range(9)
N_PARAMS = 9
#: The litmus tests the GPU kernels implement, with the weak outcome ``(r0, r1)`` each looks for.
LITMUS_TARGETS: dict[str, tuple[int, int]] = {"MP": (1, 0), "SB": (0, 0), "LB": (1, 1), "CoRR": (1, 0),
                                              "MP-reversed": (1, 0)}
#: Fences between the two accesses of each thread.
FENCES = ("none", "block", "device", "system")
#: ``plain``: ordinary loads and stores (the MP flag is still an atomic, as it must be in Numba);
#: ``atomic``: every access to a test location is a relaxed atomic.
ACCESS_MODES = ("plain", "atomic")
#: Outcome codes ``2*r0 + r1`` (0..3); code 4 counts anything else (a harness bug).
OUTCOME_CODES = 5


@cuda.jit(device=True)
def ld_plain(mem, a):
    """A plain load."""
    return mem[a]


@cuda.jit(device=True)
def ld_atomic(mem, a):
    """A load done as an atomic read-modify-write that changes nothing (``or`` with 0)."""
    return cuda.atomic.or_(mem, a, 0)


@cuda.jit(device=True)
def st_plain(mem, a, v):
    """A plain store."""
    mem[a] = v


@cuda.jit(device=True)
def st_atomic(mem, a, v):
    """A store done as an atomic exchange."""
    cuda.atomic.exch(mem, a, v)


@cuda.jit(device=True)
def fence_none():
    """No fence."""


@cuda.jit(device=True)
def fence_block():
    """``cuda.threadfence_block()``: PTX ``membar.cta`` = ``fence.sc.cta`` (ordering seen by the block)."""
    cuda.threadfence_block()


@cuda.jit(device=True)
def fence_device():
    """``cuda.threadfence()``: PTX ``membar.gl`` = ``fence.sc.gpu`` (ordering seen by the whole GPU)."""
    cuda.threadfence()


@cuda.jit(device=True)
def fence_system():
    """``cuda.threadfence_system()``: PTX ``membar.sys`` = ``fence.sc.sys`` (also the host and peer GPUs)."""
    cuda.threadfence_system()


_FENCE_FUNCS = {"none": fence_none, "block": fence_block, "device": fence_device, "system": fence_system}


@cuda.jit(device=True)
def litmus_ids(shuffle, params):
    """``(id0, id1, n)``: the instance this thread plays thread 0 of, the one it plays thread 1 of, and the count.

    Blocks are renumbered by the random permutation ``shuffle``; thread 1 of instance ``id1``
    is a thread of another block (``params[P_INTRA] == 0``, shifted by 1 + lane-dependent
    stripes) or of the same block (``== 1``, half a block away), at a permuted position, as
    the parallel litmus harnesses of MC Mutants and GPUHarbor do. Both maps are one-to-one,
    so every instance gets exactly one thread 0 and one thread 1.
    """
    blocks = params[P_TEST_BLOCKS]
    t = cuda.blockDim.x
    b = shuffle[cuda.blockIdx.x]
    local = cuda.threadIdx.x
    id0 = b * t + local
    local1 = (local * params[P_PERM_THREAD]) % t
    if params[P_INTRA] == 1:
        b1 = b
        local1 = (local1 + t // 2) % t
    else:
        b1 = (b + 1 + local % (blocks - 1)) % blocks
    return id0, b1 * t + local1, blocks * t


@cuda.jit(device=True)
def litmus_locations(i, params, n):
    """``(x, y)``: the two test locations of instance ``i``, in different cache lines and far apart."""
    stride = params[P_STRIDE]
    x = i * 2 * stride
    y = ((i * params[P_PERM_LOC]) % n) * 2 * stride + stride
    return x, y


@cuda.jit(device=True)
def litmus_stress(scratch, params):
    """What a stress block does: stores and loads all over ``scratch``, to keep the memory system busy."""
    mask = scratch.size - 1
    j = (params[P_STRESS_BASE] + cuda.grid(1) * 32) & mask
    acc = 0
    for k in range(params[P_STRESS_ITERS]):
        scratch[j] = k
        acc += scratch[(j + 4096) & mask]
        j = (j + 1031) & mask
    if acc == -1:  # never true: keeps the compiler from dropping the loads
        scratch[0] = acc


@cuda.jit(device=True)
def litmus_line_up(barrier, params):
    """Let the testing blocks start their tests at about the same time (a bounded spin; no deadlock).

    Thread 0 of each block counts itself in and waits (at most ``params[P_SPIN]`` rounds) until
    every testing block has; the block waits for thread 0. Reads of the counter are atomics.
    """
    if params[P_SPIN] > 0:
        if cuda.threadIdx.x == 0:
            cuda.atomic.add(barrier, 0, 1)
            k = 0
            while k < params[P_SPIN] and cuda.atomic.or_(barrier, 0, 0) < params[P_TEST_BLOCKS]:
                k += 1
    cuda.syncthreads()  # RAW on the line-up: no thread starts the test before thread 0 saw the others arrive


_LITMUS: dict[tuple[str, str, str], Any] = {}


def make_litmus_kernel(test: str, fence: str = "none", access: str = "plain"):
    """The kernel of one litmus test: ``kernel(mem, results, shuffle, params, barrier, scratch)``.

    Every thread of the first ``params[P_TEST_BLOCKS]`` blocks plays thread 0 of one instance and
    thread 1 of another (:func:`litmus_ids`); the other blocks stress memory. Results:
    ``results[2*i]`` = r0 and ``results[2*i + 1]`` = r1 of instance ``i``. ``mem`` must be zero.

    ======  ==========================  ==========================  ===========
    test     thread 0                    thread 1                    weak r0,r1
    ======  ==========================  ==========================  ===========
    MP       x = 1; fence; y = 1         r0 = y; fence; r1 = x       1, 0
    SB       x = 1; fence; r0 = y        y = 1; fence; r1 = x        0, 0
    LB       r0 = x; fence; y = 1        r1 = y; fence; x = 1        1, 1
    CoRR     x = 1                       r0 = x; fence; r1 = x       1, 0
    MP-rev.  x = 1; fence; y = 1         r1 = x; fence; r0 = y       1, 0 (SC)
    ======  ==========================  ==========================  ===========

    ``fence`` is one of :data:`FENCES`; ``access`` one of :data:`ACCESS_MODES` (in ``plain`` mode
    the MP flag ``y`` is still accessed with atomics, as Numba code must). ``MP-reversed`` is a
    mutant: its "weak" outcome is allowed even under sequential consistency, so a harness that
    never shows it cannot produce the interleavings it tests. The second load of CoRR adds
    ``params[P_ZERO]`` (always 0) to the address, so that the compiler cannot merge the two loads.
    """
    _choice(test, "litmus test", LITMUS_TARGETS)
    _choice(fence, "fence", FENCES)
    _choice(access, "access mode", ACCESS_MODES)
    key = (test, fence, access)
    if key in _LITMUS:
        return _LITMUS[key]
    atomic = access == "atomic"
    flag_atomic = atomic or test in ("MP", "MP-reversed")
    LDX = ld_atomic if atomic else ld_plain  # noqa: N806  (compile-time choices, frozen by Numba)
    STX = st_atomic if atomic else st_plain  # noqa: N806
    LDY = ld_atomic if flag_atomic else ld_plain  # noqa: N806
    STY = st_atomic if flag_atomic else st_plain  # noqa: N806
    FENCE = _FENCE_FUNCS[fence]  # noqa: N806

    if test == "MP":
        @cuda.jit
        def litmus(mem, results, shuffle, params, barrier, scratch):
            if cuda.blockIdx.x >= params[P_TEST_BLOCKS]:
                litmus_stress(scratch, params)
                return
            id0, id1, n = litmus_ids(shuffle, params)
            x0, y0 = litmus_locations(id0, params, n)
            x1, y1 = litmus_locations(id1, params, n)
            litmus_line_up(barrier, params)
            STX(mem, x0, 1)  # thread 0 of instance id0: the data...
            FENCE()
            STY(mem, y0, 1)  # ...then the flag
            r0 = LDY(mem, y1)  # thread 1 of instance id1: the flag...
            FENCE()
            r1 = LDX(mem, x1)  # ...then the data
            results[2 * id1] = r0
            results[2 * id1 + 1] = r1
    elif test == "MP-reversed":
        @cuda.jit
        def litmus(mem, results, shuffle, params, barrier, scratch):
            if cuda.blockIdx.x >= params[P_TEST_BLOCKS]:
                litmus_stress(scratch, params)
                return
            id0, id1, n = litmus_ids(shuffle, params)
            x0, y0 = litmus_locations(id0, params, n)
            x1, y1 = litmus_locations(id1, params, n)
            litmus_line_up(barrier, params)
            STX(mem, x0, 1)
            FENCE()
            STY(mem, y0, 1)
            r1 = LDX(mem, x1)  # the mutation: the data is read first...
            FENCE()
            r0 = LDY(mem, y1)  # ...then the flag
            results[2 * id1] = r0
            results[2 * id1 + 1] = r1
    elif test == "SB":
        @cuda.jit
        def litmus(mem, results, shuffle, params, barrier, scratch):
            if cuda.blockIdx.x >= params[P_TEST_BLOCKS]:
                litmus_stress(scratch, params)
                return
            id0, id1, n = litmus_ids(shuffle, params)
            x0, y0 = litmus_locations(id0, params, n)
            x1, y1 = litmus_locations(id1, params, n)
            litmus_line_up(barrier, params)
            STX(mem, x0, 1)  # thread 0: x = 1; r0 = y
            FENCE()
            results[2 * id0] = LDY(mem, y0)
            STY(mem, y1, 1)  # thread 1: y = 1; r1 = x
            FENCE()
            results[2 * id1 + 1] = LDX(mem, x1)
    elif test == "LB":
        @cuda.jit
        def litmus(mem, results, shuffle, params, barrier, scratch):
            if cuda.blockIdx.x >= params[P_TEST_BLOCKS]:
                litmus_stress(scratch, params)
                return
            id0, id1, n = litmus_ids(shuffle, params)
            x0, y0 = litmus_locations(id0, params, n)
            x1, y1 = litmus_locations(id1, params, n)
            litmus_line_up(barrier, params)
            r0 = LDX(mem, x0)  # thread 0: r0 = x; y = 1
            FENCE()
            STY(mem, y0, 1)
            r1 = LDY(mem, y1)  # thread 1: r1 = y; x = 1
            FENCE()
            STX(mem, x1, 1)
            results[2 * id0] = r0
            results[2 * id1 + 1] = r1
    else:  # CoRR
        @cuda.jit
        def litmus(mem, results, shuffle, params, barrier, scratch):
            if cuda.blockIdx.x >= params[P_TEST_BLOCKS]:
                litmus_stress(scratch, params)
                return
            id0, id1, n = litmus_ids(shuffle, params)
            x0, y0 = litmus_locations(id0, params, n)
            x1, y1 = litmus_locations(id1, params, n)
            litmus_line_up(barrier, params)
            STX(mem, x0, 1)  # thread 0: x = 1
            r0 = LDX(mem, x1)  # thread 1: r0 = x; r1 = x (through an address the compiler cannot prove equal)
            FENCE()
            r1 = LDX(mem, x1 + params[P_ZERO])
            results[2 * id1] = r0
            results[2 * id1 + 1] = r1

    _LITMUS[key] = litmus
    return litmus


@cuda.jit
def litmus_reset(mem, barrier):
    """Zero the test locations and the line-up counter before a run (grid-stride)."""
    i = cuda.grid(1)
    if i == 0:
        barrier[0] = 0
    while i < mem.size:
        mem[i] = 0
        i += cuda.gridsize(1)


@cuda.jit
def litmus_tally(results, n, hist):
    """Add the outcome of every instance, code ``2*r0 + r1`` (4: anything else), into ``hist``.

    Privatised: a histogram per block in shared memory, then one global atomic per bin and block.
    """
    local = cuda.shared.array(OUTCOME_CODES, int32)
    tid = cuda.threadIdx.x
    if tid < OUTCOME_CODES:
        local[tid] = 0
    cuda.syncthreads()  # RAW: the zeros are written before any thread adds
    i = cuda.grid(1)
    while i < n:
        r0 = results[2 * i]
        r1 = results[2 * i + 1]
        code = 2 * r0 + r1 if (r0 == 0 or r0 == 1) and (r1 == 0 or r1 == 1) else 4
        cuda.atomic.add(local, code, 1)
        i += cuda.gridsize(1)
    cuda.syncthreads()  # RAW: every thread's additions are done before the totals are read
    if tid < OUTCOME_CODES and local[tid] > 0:
        cuda.atomic.add(hist, tid, local[tid])


def _coprime(rng: np.random.Generator, n: int, low: int = 3) -> int:
    """A random odd number in [low, max(n, low+2)) that shares no factor with ``n``."""
    while True:
        p = int(rng.integers(low, max(n, low + 2)))
        if math.gcd(p, n) == 1:
            return p


@dataclass
class LitmusRun:
    """A litmus test planned once and run many times, each run a fresh random placement.

    >>> run = LitmusRun("MP", fence="none")          # doctest: +SKIP
    >>> run.run(100)                                  # doctest: +SKIP  (100 launches)
    >>> run.histogram()                               # {(r0, r1): count, ...}

    Args:
        test: a key of :data:`LITMUS_TARGETS`.
        fence: one of :data:`FENCES`.
        access: one of :data:`ACCESS_MODES`.
        test_blocks, threads: the testing grid; instances per launch = ``test_blocks * threads``.
        stress_blocks: extra blocks that stress memory (0: none).
        stride: words between an instance's locations and the next instance's (>= 1).
        spin: rounds of the line-up spin (0 under the simulator, whose blocks run one after another).
        stress_iters: loop trips of each stress thread.
        intra_block: pair the two threads of an instance inside one block (default: different blocks).
        seed: of the random placement.
    """

    test: str
    fence: str = "none"
    access: str = "plain"
    test_blocks: int = 256
    threads: int = 256
    stress_blocks: int = 64
    stride: int = 16
    spin: int = 2048
    stress_iters: int = 64
    intra_block: bool = False
    seed: int = 0
    counts: np.ndarray = field(init=False)
    launches: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.kernel = make_litmus_kernel(self.test, self.fence, self.access)
        self.test_blocks = _int(self.test_blocks, "test_blocks", minimum=1 if self.intra_block else 2)
        self.threads = _threads(self.threads)
        if self.intra_block and self.threads % 2:
            raise LaunchConfigError(f"intra-block pairing needs an even block, got {self.threads} threads")
        self.stress_blocks = _int(self.stress_blocks, "stress_blocks", minimum=0)
        self.stride = _int(self.stride, "stride", minimum=1)
        self.spin = _int(self.spin, "spin", minimum=0)
        self.stress_iters = _int(self.stress_iters, "stress_iters", minimum=0)
        if backend.is_simulator():
            self.spin = 0  # blocks run one after another: waiting for the others would only burn time
        self.n = self.test_blocks * self.threads
        self._rng = np.random.default_rng(self.seed)
        self.mem = cuda.device_array(2 * self.stride * self.n + 1, dtype=np.int32)
        self.results = cuda.device_array(2 * self.n, dtype=np.int32)
        self.barrier = cuda.device_array(1, dtype=np.int32)
        scratch_words = 1 << max(13, int(math.log2(max(self.stress_blocks, 1) * self.threads * 32)))
        self.scratch = cuda.to_device(np.zeros(scratch_words if self.stress_blocks else 8192, dtype=np.int32))
        self.hist = cuda.to_device(np.zeros(OUTCOME_CODES, dtype=np.int32))
        self.counts = np.zeros(OUTCOME_CODES, dtype=np.int64)
        sim = backend.is_simulator()  # the simulator runs every thread as a Python thread: keep helpers small
        self._reset_grid = (1, 32) if sim else (64, 256)
        self._tally_grid = (1, 32) if sim else (min(64, blocks_for(self.n, 256)), 256)

    @property
    def target(self) -> tuple[int, int]:
        """The weak outcome ``(r0, r1)`` this test looks for."""
        return LITMUS_TARGETS[self.test]

    def _params(self) -> tuple[np.ndarray, np.ndarray]:
        rng = self._rng
        params = np.zeros(N_PARAMS, dtype=np.int32)
        params[P_TEST_BLOCKS] = self.test_blocks
        params[P_PERM_THREAD] = _coprime(rng, self.threads, 1) if self.threads > 2 else 1
        params[P_PERM_LOC] = _coprime(rng, self.n, 1) if self.n > 2 else 1
        params[P_STRIDE] = self.stride
        params[P_SPIN] = self.spin
        params[P_STRESS_ITERS] = self.stress_iters
        params[P_STRESS_BASE] = int(rng.integers(0, 1 << 20))
        params[P_ZERO] = 0
        params[P_INTRA] = int(self.intra_block)
        return params, rng.permutation(self.test_blocks).astype(np.int32)

    def run(self, launches: int = 1) -> np.ndarray:
        """Run ``launches`` launches (each with a fresh placement) and add their outcomes to :attr:`counts`."""
        launches = _int(launches, "launches", minimum=1)
        self.hist.copy_to_device(np.zeros(OUTCOME_CODES, dtype=np.int32))
        blocks = self.test_blocks + self.stress_blocks
        for _ in range(launches):
            params, shuffle = self._params()
            litmus_reset[self._reset_grid](self.mem, self.barrier)
            self.kernel[blocks, self.threads](self.mem, self.results, cuda.to_device(shuffle),
                                              cuda.to_device(params), self.barrier, self.scratch)
            litmus_tally[self._tally_grid](self.results, self.n, self.hist)
        self.counts += self.hist.copy_to_host()
        self.launches += launches
        return self.counts

    @property
    def instances(self) -> int:
        """Instances run so far."""
        return self.launches * self.n

    def histogram(self) -> dict[tuple[int, int], int]:
        """``{(r0, r1): count}`` over every run so far (a count under ``(-1, -1)`` would be a harness bug)."""
        out = {(r0, r1): int(self.counts[2 * r0 + r1]) for r0 in (0, 1) for r1 in (0, 1)}
        if self.counts[4]:
            out[(-1, -1)] = int(self.counts[4])
        return out

    @property
    def weak(self) -> int:
        """How many instances showed the target (weak) outcome."""
        r0, r1 = self.target
        return int(self.counts[2 * r0 + r1])


# ---------------------------------------------------------------------------------------------
# 7. A race inside a block: a missing syncthreads
# ---------------------------------------------------------------------------------------------


@cuda.jit
def shift_racy(x, out):
    """WRONG: ``out[i] = x[i + 1]`` through shared memory, without a barrier between write and read.

    Thread ``tid`` reads ``s[tid + 1]``, which thread ``tid + 1`` writes: nothing makes it wait
    for that write (a read-after-write race). The last thread of each block reads the next
    block's first element from global memory.
    """
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        s[tid] = x[i]
    if i + 1 < x.size:
        if tid + 1 < cuda.blockDim.x:
            out[i] = s[tid + 1]  # RACE: s[tid + 1] may not be written yet
        else:
            out[i] = x[i + 1]


@cuda.jit
def shift_synced(x, out):
    """``out[i] = x[i + 1]`` through shared memory, with the barrier the racy version lacks."""
    s = cuda.shared.array(MAX_THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        s[tid] = x[i]
    cuda.syncthreads()  # RAW: every thread's element is in shared memory before a neighbour reads it
    if i + 1 < x.size:
        if tid + 1 < cuda.blockDim.x:
            out[i] = s[tid + 1]
        else:
            out[i] = x[i + 1]


def shift_reference(x) -> np.ndarray:
    """``out[i] = x[i + 1]`` for ``i < n - 1``; the last element is not written (NaN here)."""
    x = np.asarray(x, dtype=np.float32)
    out = np.full_like(x, np.nan)
    out[:-1] = x[1:]
    return out


def run_shift(x, racy: bool = False, threads: int = 128) -> np.ndarray:
    """``out[i] = x[i + 1]`` with :func:`shift_racy` or :func:`shift_synced`; ``out[-1]`` stays NaN."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    threads = _threads(threads)
    host = np.asarray(x)
    if host.size == 0:
        raise ArrayArgumentError("x is empty: pass at least one value")
    out = cuda.to_device(np.full(host.size, np.nan, dtype=np.float32))
    (shift_racy if racy else shift_synced)[blocks_for(host.size, threads), threads](cuda.to_device(host), out)
    return out.copy_to_host()


# ---------------------------------------------------------------------------------------------
# 8. Waiting for a flag: why the read must be an atomic (compiled, never run)
# ---------------------------------------------------------------------------------------------


def wait_plain(flag, out):
    """WRONG: spin on a plain load. The compiler may load ``flag[0]`` once and loop forever."""
    while flag[0] == 0:
        pass
    out[0] = 1


def wait_atomic(flag, out):
    """Spin on an atomic read: every round asks the memory system again."""
    while cuda.atomic.or_(flag, 0, 0) == 0:
        pass
    out[0] = 1


def wait_loop_ptx(which: str) -> str:
    """The PTX of :func:`wait_plain` or :func:`wait_atomic` (``which``: ``plain`` or ``atomic``). GPU only.

    Compiled for ``(int32[::1], int32[::1])``, never launched: the plain version may never return.
    """
    _choice(which, "wait loop", ("plain", "atomic"))
    backend.require_gpu("compiling to PTX", because="needs the CUDA compiler, which the simulator does not have")
    from numba import types  # the compiler's types: here, not at the top, as this module's line numbers are quoted

    sig = (types.int32[::1], types.int32[::1])
    ptx, _ = cuda.compile_ptx(wait_plain if which == "plain" else wait_atomic, sig)
    return ptx


__all__ = [
    "ACCESS_MODES", "COUNTERS", "FENCES", "GPU_ONLY_COUNTERS", "LITMUS_TARGETS", "LastBlockSum", "LitmusRun",
    "SUM_THREADS", "SUM_UNROLL", "UnknownVariantError", "atomic_add_grouped", "count_atomic",
    "count_block_aggregated", "count_locked", "count_racy", "count_warp_aggregated", "float_key",
    "grouped_counts_reference", "key_float", "lock_acquire", "lock_release", "make_litmus_kernel",
    "make_sum_last_block", "max_cas", "pair_update_locked", "reference_sum", "run_atomic_grouped",
    "run_count_locked", "run_counter", "run_float_max", "run_pair_update_locked", "run_shift",
    "shift_racy", "shift_reference", "shift_synced", "sum_last_block", "wait_loop_ptx",
]


# ---------------------------------------------------------------------------------------------
# 9. The lecture's lock_trick: a barrier is not a lock (added at the end: earlier line numbers are quoted)
# ---------------------------------------------------------------------------------------------


@cuda.jit
def pair_update_lock_trick(values, pair):
    """PITFALL (the lecture notes' ``lock_trick``): ``syncthreads``, then thread 0 alone updates ``pair``, then
    ``syncthreads``. It serialises the threads of *one block* only: thread 0 of every other block runs the same
    critical section at the same time, and their plain loads and stores of ``pair`` lose updates.
    """
    s = cuda.shared.array(MAX_THREADS, int32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = values[i] if i < values.size else 0
    cuda.syncthreads()  # RAW: every value is in shared memory before the tree reads it
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:  # the "critical section": one thread per block, but one per block of the whole grid
        count = min(cuda.blockDim.x, values.size - cuda.blockIdx.x * cuda.blockDim.x)
        pair[0] += s[0]
        pair[1] += count
    cuda.syncthreads()  # the lecture's second barrier: orders nothing for the other blocks


def run_pair_update_lock_trick(values, threads: int = 64) -> tuple[int, int]:
    """``(sum, count)`` with :func:`pair_update_lock_trick`: right under the simulator (its blocks run one after
    the other), wrong on a GPU as soon as two blocks update ``pair`` at once."""
    validate.array(values, "values", dtype=np.int32, ndim=1)
    threads = _power_of_two(threads)
    if values.shape[0] == 0:
        raise ArrayArgumentError("values is empty: pass at least one value")
    pair = cuda.to_device(np.zeros(2, dtype=np.int32))
    pair_update_lock_trick[blocks_for(values.shape[0], threads), threads](cuda.to_device(np.asarray(values)), pair)
    got = pair.copy_to_host()
    return int(got[0]), int(got[1])


__all__ += ["pair_update_lock_trick", "run_pair_update_lock_trick"]
