"""Chapter "The memory hierarchy": kernels that probe each level of it.

One kernel per question, each with a NumPy specification and a validating wrapper:

* global memory, coalescing: :func:`offset_stride_copy`;
* shared memory, banks: :func:`shared_stride_read`;
* shared memory, static and dynamic: :func:`block_reverse_static`, :func:`block_reverse_dynamic`, and the
  pitfall of two dynamic arrays, :func:`two_dynamic_arrays` (fixed in :func:`one_dynamic_array_split`);
* caches and latency, pointer chasing: :func:`pointer_chase` over a :func:`chase_chain`;
* constant memory: :func:`constant_lookup` against :func:`global_lookup`;
* registers and local memory: :func:`local_array_static`, :func:`local_array_dynamic`;
* and, for the lab, :func:`transpose_naive`.

The sweeps that time them, build the tables the chapter plots (``bench/memory.py`` stores them
as reference data) and the table of the whole hierarchy are in :mod:`labhelpers.experiments.memory`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, uint32

from .. import validate
from ..arrays import to_host
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import blocks_for, launch_1d
from ..validate import check_launch

WARP_SIZE = 32


# =========================================================================== global memory: coalescing


@cuda.jit
def offset_stride_copy(src, dst, n, offset, stride):
    """Thread ``i`` copies element ``offset + i * stride`` of ``src`` into ``dst``, for ``i < n``.

    ``offset`` shifts a warp's 32 elements off the 128-byte line boundary; ``stride``
    spreads them apart. Either way the warp asks for the same 128 useful bytes, but the
    memory system moves whole 32-byte sectors.
    """
    i = cuda.grid(1)
    if i < n:  # the grid is rounded up to whole blocks
        k = offset + i * stride
        dst[k] = src[k]


def copy_footprint(n: int, offset: int, stride: int) -> int:
    """Elements ``src`` and ``dst`` need for :func:`offset_stride_copy`: one past the last index touched."""
    n = validate.integer(n, "n", minimum=1)
    offset = validate.integer(offset, "offset", minimum=0)
    stride = validate.integer(stride, "stride", minimum=1)
    return offset + (n - 1) * stride + 1


def offset_stride_copy_reference(src: np.ndarray, n: int, offset: int, stride: int) -> np.ndarray:
    """NumPy specification: a zero array like ``src`` with ``dst[offset + i*stride] = src[...]`` for ``i < n``."""
    dst = np.zeros_like(src)
    k = offset + stride * np.arange(n)
    dst[k] = src[k]
    return dst


def run_offset_stride_copy(src, n: int, offset: int, stride: int, threads: int = 256) -> np.ndarray:
    """Launch :func:`offset_stride_copy` on ``src`` (into a zeroed ``dst``) and return ``dst`` on the host.

    Raises:
        ArrayArgumentError: ``src`` is not a contiguous float32 vector long enough for ``n``, ``offset``, ``stride``.
        LaunchConfigError: ``threads`` is not a valid block size.
    """
    validate.array(src, "src", dtype=np.float32, ndim=1)
    need = copy_footprint(n, offset, stride)
    if src.shape[0] < need:
        raise ArrayArgumentError(
            f"src has {src.shape[0]} elements, but n={n} threads at offset={offset}, stride={stride} reach "
            f"element {need - 1}: allocate copy_footprint(n, offset, stride) = {need} elements.")
    launch = launch_1d(n, threads)
    src_d = cuda.to_device(src) if isinstance(src, np.ndarray) else src
    dst_d = cuda.to_device(np.zeros(src.shape[0], dtype=np.float32))
    offset_stride_copy[launch.blocks, launch.threads](src_d, dst_d, n, offset, stride)
    return to_host(dst_d)


# =========================================================================== shared memory: banks

#: Words of the shared buffer :func:`shared_stride_read` reads from (8 KiB of uint32).
SHARED_WORDS = 2048
#: Dependent loads per loop iteration of :func:`shared_stride_read` (unrolled by hand).
LOADS_PER_ITERATION = 4


@cuda.jit
def shared_stride_read(out, stride, reps):
    """Each thread of a warp reads shared word ``(lane * stride) % 2048``, ``4 * reps`` times in a dependent chain.

    Word ``w`` of the buffer holds the value ``w``, so every load returns the address of
    the next one: the hardware cannot skip or merge loads, and the time is dominated by
    how many passes each warp request needs, the bank conflict degree ``gcd(stride, 32)``.
    ``out[i]`` receives ``reps * word`` so that the result can be checked.
    """
    buf = cuda.shared.array(SHARED_WORDS, dtype=uint32)
    for k in range(cuda.threadIdx.x, SHARED_WORDS, cuda.blockDim.x):
        buf[k] = k
    cuda.syncthreads()  # RAW: the loads below read words that other threads of the block wrote
    lane = cuda.threadIdx.x % 32
    j = uint32((lane * stride) % SHARED_WORDS)  # unsigned: no negative-index handling between the loads
    acc = 0
    for _ in range(reps):
        j = buf[j]  # four dependent loads: the next address is the value just read
        j = buf[j]
        j = buf[j]
        j = buf[j]
        acc += j
    i = cuda.grid(1)
    if i < out.size:
        out[i] = acc


def shared_stride_reference(size: int, threads: int, stride: int, reps: int) -> np.ndarray:
    """NumPy specification of :func:`shared_stride_read` for ``size`` output elements."""
    lane = (np.arange(size) % threads) % WARP_SIZE
    return (reps * ((lane * stride) % SHARED_WORDS)).astype(np.int32)


def run_shared_stride_read(stride: int, reps: int, blocks: int = 1, threads: int = 32) -> np.ndarray:
    """Launch :func:`shared_stride_read` with ``blocks`` blocks of ``threads`` and return ``out`` on the host."""
    stride = validate.integer(stride, "stride", minimum=0)
    reps = validate.integer(reps, "reps", minimum=0)
    blocks = validate.integer(blocks, "blocks", minimum=1)
    reason = check_launch(threads, SHARED_WORDS * 4)
    if reason:
        raise LaunchConfigError(f"{reason}: use a multiple of 32 threads, at most 1024.")
    if (reps * (SHARED_WORDS - 1)) >= 2**31:
        raise ValueError(f"reps={reps} would overflow the int32 result: use reps below {2**31 // SHARED_WORDS}")
    out_d = cuda.device_array(blocks * threads, dtype=np.int32)
    shared_stride_read[blocks, threads](out_d, stride, reps)
    return to_host(out_d)


# =========================================================================== shared memory: static and dynamic

#: Threads per block of :func:`block_reverse_static`: its shared array's size, fixed when it is compiled.
REVERSE_THREADS = 128


@cuda.jit
def block_reverse_static(x, out):
    """Each block reverses its own chunk of ``x`` through a **static** shared array of ``REVERSE_THREADS`` floats.

    The size is a compile-time constant (a number or a module-level name): the compiler knows it,
    reports it (``get_shared_mem_per_block()``), and the kernel works only with blocks of at most
    ``REVERSE_THREADS`` threads.
    """
    tile = cuda.shared.array(REVERSE_THREADS, float32)  # static: the size is part of the compiled kernel
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * cuda.blockDim.x
    length = min(cuda.blockDim.x, x.size - start)  # the last block may hold fewer elements
    if t < length:
        tile[t] = x[start + t]
    cuda.syncthreads()  # RAW: thread t reads the element thread length - 1 - t wrote
    if t < length:
        out[start + t] = tile[length - 1 - t]


@cuda.jit
def block_reverse_dynamic(x, out):
    """The same reversal through a **dynamic** shared array: its size is the launch's fourth parameter.

    ``cuda.shared.array(0, float32)`` is Numba's ``extern __shared__ float tile[];``. Launch as
    ``block_reverse_dynamic[blocks, threads, 0, threads * 4](x, out)``: any block size works.
    """
    tile = cuda.shared.array(0, float32)  # dynamic: as many bytes as the launch asks for
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * cuda.blockDim.x
    length = min(cuda.blockDim.x, x.size - start)
    if t < length:
        tile[t] = x[start + t]
    cuda.syncthreads()  # RAW: thread t reads the element thread length - 1 - t wrote
    if t < length:
        out[start + t] = tile[length - 1 - t]


def block_reverse_reference(x: np.ndarray, threads: int) -> np.ndarray:
    """NumPy specification: every chunk of ``threads`` consecutive elements reversed (the last one may be shorter)."""
    x = np.asarray(x)
    return np.concatenate([x[s:s + threads][::-1] for s in range(0, x.size, threads)]) if x.size else x.copy()


def run_block_reverse(x, threads: int = REVERSE_THREADS, dynamic: bool = False) -> np.ndarray:
    """Reverse every block-sized chunk of the float32 vector ``x`` with the static or the dynamic kernel.

    Raises:
        ArrayArgumentError: ``x`` is not a contiguous float32 vector.
        LaunchConfigError: ``threads`` is not a valid block size, or exceeds ``REVERSE_THREADS`` for the static kernel
            (its shared array has room for no more).
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    threads = validate.threads_per_block(threads)
    if not dynamic and threads > REVERSE_THREADS:
        raise LaunchConfigError(
            f"threads={threads}: block_reverse_static's shared array holds {REVERSE_THREADS} floats, fixed when it "
            f"was compiled; use at most {REVERSE_THREADS} threads, or the dynamic kernel (dynamic=True).")
    x_d = cuda.to_device(x) if isinstance(x, np.ndarray) else x
    out_d = cuda.device_array(x.shape[0], dtype=np.float32)
    blocks = blocks_for(x.shape[0], threads)
    if dynamic:
        block_reverse_dynamic[blocks, threads, 0, threads * 4](x_d, out_d)  # 4 bytes per float32
    else:
        block_reverse_static[blocks, threads](x_d, out_d)
    return to_host(out_d)


@cuda.jit
def two_dynamic_arrays(x, y, out):
    """A pitfall: two dynamic shared arrays are not two buffers. Both start at the same address.

    The kernel means ``out[i] = x[i] + y[i]`` through ``a`` and ``b``, but ``b`` overwrites ``a``:
    every ``cuda.shared.array(0, ...)`` of a kernel, like every ``extern __shared__`` array in
    CUDA C++, begins at the start of the block's dynamic shared memory.
    """
    a = cuda.shared.array(0, float32)
    b = cuda.shared.array(0, float32)  # the same memory as a: a second name, not a second buffer
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        a[t] = x[i]
        b[t] = y[i]
        out[i] = a[t] + b[t]  # each thread reads only what it wrote itself: no barrier needed


@cuda.jit
def one_dynamic_array_split(x, y, out):
    """The fix: one dynamic array, and the two buffers at different offsets in it (``a`` first, ``b`` after it)."""
    buf = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x  # a occupies buf[0:nt], b occupies buf[nt:2*nt]
    i = cuda.grid(1)
    if i < x.size:
        buf[t] = x[i]
        buf[nt + t] = y[i]
        out[i] = buf[t] + buf[nt + t]


def run_two_buffers(x, y, split: bool, threads: int = 64) -> np.ndarray:
    """``x + y`` through two shared buffers: :func:`two_dynamic_arrays` (``split=False``) or the fix.

    Both launch with room for two buffers of ``threads`` floats (``2 * threads * 4`` bytes).
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    validate.array(y, "y", dtype=np.float32, ndim=1, shape=x.shape)
    threads = validate.threads_per_block(threads)
    kernel = one_dynamic_array_split if split else two_dynamic_arrays
    out_d = cuda.device_array(x.shape[0], dtype=np.float32)
    kernel[blocks_for(x.shape[0], threads), threads, 0, 2 * threads * 4](cuda.to_device(x), cuda.to_device(y), out_d)
    return to_host(out_d)


# =========================================================================== caches and latency: pointer chasing


@cuda.jit
def pointer_chase(next_slot, state, steps):
    """One thread follows the chain ``j = next_slot[j]`` for ``steps`` loads, from ``state[0]``.

    Each load's address is the previous load's value, so the loads cannot overlap: the
    time per step is the latency of wherever ``next_slot[j]`` lives (L1, L2 or DRAM).
    The position reached is stored back in ``state[0]``, so the next launch continues
    the walk instead of revisiting the same first ``steps`` slots.
    """
    if cuda.grid(1) == 0:
        j = state[0]
        for _ in range(steps):
            j = next_slot[j]
        state[0] = j


def chase_chain(working_set_bytes: int, stride_bytes: int = 128, *, shuffle: bool = True,
                seed: int = 0) -> np.ndarray:
    """The uint32 array for :func:`pointer_chase`: one cycle through every ``stride_bytes``-spaced slot.

    The array spans ``working_set_bytes``; slots sit every ``stride_bytes`` (128 by default:
    one slot per cache line, so the number of lines touched equals the number of slots).
    With ``shuffle`` the slots are visited in a random order (no prefetcher, DRAM page or
    TLB gets a regular pattern to exploit), always as a *single* cycle so that a walk from
    any slot covers the whole working set: a plain random permutation would split it
    into several shorter cycles.
    """
    working_set_bytes = validate.integer(working_set_bytes, "working_set_bytes", minimum=8)
    stride_bytes = validate.integer(stride_bytes, "stride_bytes", minimum=4)
    if stride_bytes % 4:
        raise ValueError(f"stride_bytes must be a multiple of 4 (one uint32 slot), got {stride_bytes}")
    if working_set_bytes % stride_bytes or working_set_bytes < 2 * stride_bytes:
        raise ValueError(f"working_set_bytes must be a multiple of stride_bytes={stride_bytes} holding at least "
                         f"two slots, got {working_set_bytes}")
    if working_set_bytes // 4 >= 2**32:
        raise ValueError("working sets of 16 GiB or more do not fit uint32 indices")
    step = stride_bytes // 4
    slots = working_set_bytes // stride_bytes
    order = np.random.default_rng(seed).permutation(slots) if shuffle else np.arange(slots)
    chain = np.zeros(working_set_bytes // 4, dtype=np.uint32)  # unsigned: the walk needs no sign checks
    chain[order * step] = np.roll(order, -1) * step  # slot order[k] points to slot order[k + 1], the last to the first
    return chain


def walk_reference(next_slot: np.ndarray, start: int, steps: int) -> int:
    """NumPy/Python specification of :func:`pointer_chase`: where ``steps`` hops from ``start`` end."""
    j = int(start)
    for _ in range(steps):
        j = int(next_slot[j])
    return j


def run_pointer_chase(next_slot, start: int, steps: int) -> int:
    """Launch :func:`pointer_chase` once (one thread) and return the slot it stopped at."""
    validate.array(next_slot, "next_slot", dtype=np.uint32, ndim=1)
    start = validate.integer(start, "start", minimum=0, maximum=next_slot.shape[0] - 1)
    steps = validate.integer(steps, "steps", minimum=0)
    chain_d = cuda.to_device(next_slot) if isinstance(next_slot, np.ndarray) else next_slot
    state_d = cuda.to_device(np.array([start], dtype=np.uint32))
    pointer_chase[1, 1](chain_d, state_d, steps)
    return int(to_host(state_d)[0])


# =========================================================================== constant memory

#: Entries of the lookup table both lookup kernels read (1 KiB of float32: it fits every constant cache).
LOOKUP_WORDS = 256
#: The table itself: small integers, so that sums of thousands of them stay exact in float32.
LOOKUP_TABLE = ((np.arange(LOOKUP_WORDS) * 37) % 101).astype(np.float32)


@cuda.jit
def constant_lookup(out, reps, distinct):
    """Sum ``reps`` entries of :data:`LOOKUP_TABLE`, placed in constant memory; lane ``l`` starts at ``l % distinct``.

    ``distinct`` is how many different addresses a warp reads per load: 1 means every
    thread reads the same entry (a broadcast, the case constant memory is built for);
    32 means every thread reads its own, which the constant cache serves one address at a time.
    """
    table = cuda.const.array_like(LOOKUP_TABLE)
    lane = cuda.threadIdx.x % 32
    spread = lane % distinct
    acc = float32(0)
    for r in range(reps):
        acc += table[(r + spread) & (LOOKUP_WORDS - 1)]  # & is % for a power of two, in one instruction
    i = cuda.grid(1)
    if i < out.size:
        out[i] = acc


@cuda.jit
def global_lookup(table, out, reps, distinct):
    """The same sums as :func:`constant_lookup`, reading the table from global memory (through L1)."""
    lane = cuda.threadIdx.x % 32
    spread = lane % distinct
    acc = float32(0)
    for r in range(reps):
        acc += table[(r + spread) & (LOOKUP_WORDS - 1)]
    i = cuda.grid(1)
    if i < out.size:
        out[i] = acc


def lookup_reference(size: int, threads: int, reps: int, distinct: int) -> np.ndarray:
    """NumPy specification of both lookup kernels for ``size`` outputs and blocks of ``threads``."""
    spread = ((np.arange(size) % threads) % WARP_SIZE) % distinct
    idx = (np.arange(reps)[None, :] + spread[:, None]) % LOOKUP_WORDS
    return LOOKUP_TABLE[idx].sum(axis=1, dtype=np.float64).astype(np.float32)


def run_lookup(memory: str, reps: int, distinct: int, blocks: int = 1, threads: int = 32) -> np.ndarray:
    """Launch :func:`constant_lookup` (``memory="constant"``) or :func:`global_lookup` (``"global"``).

    Returns ``out`` on the host.
    """
    distinct = validate.power_of_two(distinct, "distinct", maximum=WARP_SIZE, what="addresses per warp")
    reps = validate.integer(reps, "reps", minimum=0, maximum=2**24 // 100)
    launch_1d(blocks * threads, threads)  # validates threads
    out_d = cuda.device_array(blocks * threads, dtype=np.float32)
    if memory == "constant":
        constant_lookup[blocks, threads](out_d, reps, distinct)
    elif memory == "global":
        global_lookup[blocks, threads](cuda.to_device(LOOKUP_TABLE), out_d, reps, distinct)
    else:
        raise ValueError(f"memory must be 'constant' or 'global', got {memory!r}")
    return to_host(out_d)


# =========================================================================== registers and local memory

#: Length of the per-thread scratch array of the two local-array kernels.
SCRATCH = 16


@cuda.jit
def local_array_static(x, out):
    """A per-thread scratch array indexed only by constants: the compiler keeps it in registers."""
    tmp = cuda.local.array(SCRATCH, dtype=float32)
    i = cuda.grid(1)
    if i < out.size:
        for j in range(SCRATCH):  # a fixed trip count: unrolled, every index is a constant
            tmp[j] = x[i] * j
        out[i] = tmp[3] + tmp[SCRATCH - 1]


@cuda.jit
def local_array_dynamic(x, out, k):
    """The same scratch array read at an index known only at run time.

    Registers have no addresses, so an indexed read needs the array in local memory, unless
    the compiler finds another way. Here it does: the PTX still declares a 64-byte local
    array, but ptxas (sm_90) removes it (0 bytes of stack, 14 registers), most likely
    picking the one value read with compare-and-select instructions. Check, do not guess.
    """
    tmp = cuda.local.array(SCRATCH, dtype=float32)
    i = cuda.grid(1)
    if i < out.size:
        for j in range(SCRATCH):
            tmp[j] = x[i] * j
        out[i] = tmp[(i + k) % SCRATCH]  # an index known only at run time: registers cannot be indexed


def local_array_reference(x: np.ndarray, k: int | None = None) -> np.ndarray:
    """NumPy specification of :func:`local_array_static` (``k=None``) and :func:`local_array_dynamic`."""
    i = np.arange(x.size)
    if k is None:
        return (x * 3 + x * (SCRATCH - 1)).astype(np.float32)
    return (x * ((i + k) % SCRATCH)).astype(np.float32)


def run_local_array(x, k: int | None = None, threads: int = 128) -> np.ndarray:
    """Launch :func:`local_array_static` (``k=None``) or :func:`local_array_dynamic` on ``x``; return ``out``."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    launch = launch_1d(x.shape[0], threads)
    x_d = cuda.to_device(x) if isinstance(x, np.ndarray) else x
    out_d = cuda.device_array(x.shape[0], dtype=np.float32)
    if k is None:
        local_array_static[launch.blocks, launch.threads](x_d, out_d)
    else:
        local_array_dynamic[launch.blocks, launch.threads](x_d, out_d, validate.integer(k, "k", minimum=0))
    return to_host(out_d)


# =========================================================================== a transpose, for the lab


@cuda.jit
def transpose_naive(a, out):
    """``out[c, r] = a[r, c]`` with one thread per element: reads coalesced, writes strided.

    Launch with blocks of (32, 8) threads: ``x`` runs along a row of ``a``, so a warp
    reads 32 consecutive elements of ``a`` but writes 32 elements of ``out`` that lie a
    whole row of ``out`` apart: 32 sectors for 128 useful bytes.
    """
    c, r = cuda.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[c, r] = a[r, c]


def run_transpose_naive(a, threads: tuple[int, int] = (32, 8)) -> np.ndarray:
    """Launch :func:`transpose_naive` on a 2D float32 array and return the transpose on the host."""
    validate.array(a, "a", dtype=np.float32, ndim=2)
    rows, cols = a.shape
    tx, ty = threads
    if check_launch(tx * ty):
        raise LaunchConfigError(f"{check_launch(tx * ty)}: use blocks of (32, 8) threads")
    a_d = cuda.to_device(a) if isinstance(a, np.ndarray) else a
    out_d = cuda.device_array((cols, rows), dtype=np.float32)
    transpose_naive[(blocks_for(cols, tx), blocks_for(rows, ty)), (tx, ty)](a_d, out_d)
    return to_host(out_d)
