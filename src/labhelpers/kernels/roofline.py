"""Chapter "Profiling and the roofline": the kernels that measure a GPU's ceilings, as the chapter shows them.

Four microbenchmark kernels, in the spirit of the Empirical Roofline Toolkit (Lo et al., *Roofline Model
Toolkit: A Practical Tool for Architectural and Program Analysis*, PMBS 2014):

* :func:`stream_copy`: ``out[i] = x[i]``, a grid-stride loop with four loads in flight per thread, and
  :func:`stream_copy16`, the same loop moving 16 bytes per access (:data:`load16` / :data:`store16`). Bytes
  (read + written) over time of the fastest copy is the device-memory (DRAM/HBM) ceiling.
* :func:`l2_read`: reads a small buffer (it fits in L2) over and over; bytes read over time is the L2 ceiling.
* :func:`fma_chains`: eight independent chains of dependent fused multiply-adds per thread, no memory traffic
  to speak of; flops over time is the FMA ceiling (FP32 or FP64, chosen by the array's dtype).
* :func:`host_copy`: the same copy on the host CPU, ``out[i] = x[i]`` shared among Numba's threads
  (``prange``): the CPU's memory ceiling (STREAM's "Copy", McCalpin 1995), which
  :func:`labhelpers.roofline.measure_host_bandwidth` times.
* :func:`fma_per_element`: loads an element, applies ``nfma`` multiply-adds to it, stores it. ``nfma`` sets the
  arithmetic intensity, so sweeping it walks a kernel along the roofline.

Beside them: their flop and byte counts, host wrappers (``run_*``) that check their input and launch them,
NumPy references, and :func:`profile_target`, the one launch Nsight Compute profiles. And the two bugs the
chapter hands to NVIDIA's ``compute-sanitizer`` (and to the simulator): :func:`scale_unguarded`, which reads
and writes past the end of its arrays (memcheck), and :func:`reverse_in_block_no_barrier`, which reads shared
memory before the other threads wrote it (racecheck), beside their fixes :func:`scale` and
:func:`reverse_in_block`; :func:`sanitizer_target` launches each once. Timing them is done
elsewhere: the ceilings by :mod:`labhelpers.roofline.measure`, the chapter's sweeps and tables by
:mod:`labhelpers.experiments.roofline`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, njit, prange

from .. import backend, device, validate
from ..arrays import to_host
from ..errors import LaunchConfigError
from ..launch import blocks_for, warps_for

# Chapter 7 quotes line numbers of this file (its saved compute-sanitizer report, ch07_sanitizer): keep them.
#: Independent FMA chains per thread in :func:`fma_chains`.
FMA_CHAINS = 8
#: FMAs per chain in one trip of :func:`fma_chains`'s inner, fully unrolled loop.
FMA_UNROLL = 16
#: Threads per block of the shared-memory kernels handed to the race checker (a literal shared-array size).
REVERSE_BLOCK = 64


# ------------------------------------------------------------------------- 16-byte loads and stores


def _vector_access():
    """``(load16, store16)``: read and write one complex128 element as a single 16-byte access.

    ``load16(a, i)`` returns ``a[i]`` and ``store16(a, i, v)`` does ``a[i] = v``, for a 1D C-contiguous
    complex128 array ``a`` and a non-negative integer ``i``. Why not just ``a[i]``? Numba lowers a complex128
    element as two 8-byte halves and promises only 8-byte alignment, so ``a[i]`` becomes two ``ld.global.f64``
    instructions. These two functions load and store a ``<2 x double>`` vector aligned to 16 bytes, which
    NVVM emits as one ``ld.global.v2.f64`` / ``st.global.v2.f64``: the width of CUDA C++'s ``float4``. The
    index goes straight into the address computation, with none of the negative-index (wraparound) checks
    of ``a[i]``. (Device allocations are 256-byte aligned, so every complex128 element is 16-byte aligned.)

    Under the simulator they are plain Python indexing.
    """
    if backend.is_simulator():
        def load16(a, i):
            return a[i]

        def store16(a, i, v):
            a[i] = v

        return load16, store16

    # The GPU compiler's extension API: only a real GPU backend compiles intrinsics (the simulator runs Python).
    from llvmlite import ir
    from numba import types  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.core.errors import TypingError  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.extending import intrinsic  # the compiler's extension API: only where an intrinsic is defined

    v2f64 = ir.VectorType(ir.DoubleType(), 2)
    lane = [ir.Constant(ir.IntType(32), k) for k in (0, 1)]

    def check(a, i, what):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype == types.complex128):
            raise TypingError(f"{what} takes a 1D C-contiguous complex128 array, got {a}")
        if not isinstance(i, types.Integer):
            raise TypingError(f"{what} takes an integer index, got {i}")

    def address(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        index = context.cast(builder, args[1], sig.args[1], types.uint64)
        return builder.gep(builder.bitcast(data, v2f64.as_pointer()), [index], inbounds=True)

    @intrinsic
    def load16(typingctx, a, i):
        check(a, i, "load16")

        def codegen(context, builder, sig, args):
            v = builder.load(address(context, builder, sig, args), align=16)
            z = context.make_complex(builder, types.complex128)
            z.real = builder.extract_element(v, lane[0])
            z.imag = builder.extract_element(v, lane[1])
            return z._getvalue()

        return types.complex128(a, i), codegen

    @intrinsic
    def store16(typingctx, a, i, v):
        check(a, i, "store16")

        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[2], sig.args[2], types.complex128)
            z = context.make_complex(builder, types.complex128, value=value)
            vec = builder.insert_element(ir.Constant(v2f64, ir.Undefined), z.real, lane[0])
            vec = builder.insert_element(vec, z.imag, lane[1])
            builder.store(vec, address(context, builder, sig, args), align=16)
            return context.get_dummy_value()

        return types.void(a, i, v), codegen

    return load16, store16


load16, store16 = _vector_access()


# --------------------------------------------------------------------------------------------- kernels


@cuda.jit
def stream_copy(x, out):
    """``out[i] = x[i]`` for every ``i``: a grid-stride loop with four loads in flight per thread.

    Each trip of the main loop issues four independent loads (``i``, ``i + stride``, ...) before the first
    store, so a thread has four requests travelling to memory at once. Every warp-wide load is one contiguous,
    coalesced segment. The indices are unsigned (``uint64``), so Numba adds no negative-index checks to the
    address arithmetic (all constants are unsigned too: mixing ``uint64`` with a signed integer gives a float
    in Numba). The second loop does the fewer-than-four strides left at the end: any size is copied.
    """
    n = np.uint64(x.size)
    stride = np.uint64(cuda.gridsize(1))
    s2 = stride + stride
    s3 = s2 + stride
    s4 = s2 + s2
    i = np.uint64(cuda.grid(1))
    while i + s3 < n:
        a = x[i]
        b = x[i + stride]
        c = x[i + s2]
        d = x[i + s3]
        out[i] = a
        out[i + stride] = b
        out[i + s2] = c
        out[i + s3] = d
        i += s4
    while i < n:
        out[i] = x[i]
        i += stride


@cuda.jit
def stream_copy16(x, out):
    """:func:`stream_copy` with 16-byte accesses: ``x`` and ``out`` are complex128 arrays (any length).

    The same loop as :func:`stream_copy`, but every load and store moves 16 bytes (:data:`load16`,
    :data:`store16`: one ``ld.global.v2.f64``, like ``float4`` in CUDA C++), so a warp-wide access covers
    512 contiguous bytes, the loop needs a quarter of the instructions of a 4-byte copy, and four loads in
    flight per thread are 64 bytes. Any buffer whose size is a multiple of 16 bytes can be copied through a
    complex128 view (``x.view(np.complex128)``): the values are never interpreted, only moved.
    """
    n = np.uint64(x.size)
    stride = np.uint64(cuda.gridsize(1))
    s2 = stride + stride
    s3 = s2 + stride
    s4 = s2 + s2
    i = np.uint64(cuda.grid(1))
    while i + s3 < n:
        a = load16(x, i)
        b = load16(x, i + stride)
        c = load16(x, i + s2)
        d = load16(x, i + s3)
        store16(out, i, a)
        store16(out, i + stride, b)
        store16(out, i + s2, c)
        store16(out, i + s3, d)
        i += s4
    while i < n:
        store16(out, i, load16(x, i))
        i += stride


@cuda.jit
def l2_read(x, out, steps, step):
    """Read ``x`` (its size a power of two, small enough to stay in L2) ``steps`` times per thread.

    Thread ``t`` reads ``x[(t + m * step) % x.size]`` for ``m = 0 .. steps - 1``, four loads at a time, and
    writes the sum to ``out[t]`` (so the compiler cannot drop the loads). ``step`` is a multiple of 32 whose
    quotient by 32 is odd (see :func:`l2_step`): a warp's 32 loads stay one aligned, coalesced segment, and an
    SM does not come back to an address for ``x.size / 32`` trips, far more data than its L1 holds. So the
    loads miss L1 and hit L2: bytes read over time is the L2 bandwidth.
    """
    t = cuda.grid(1)
    mask = x.size - 1
    acc0 = float32(0)
    acc1 = float32(0)
    acc2 = float32(0)
    acc3 = float32(0)
    k = t
    m = 0
    while m < steps:
        acc0 += x[k & mask]
        acc1 += x[(k + step) & mask]
        acc2 += x[(k + 2 * step) & mask]
        acc3 += x[(k + 3 * step) & mask]
        k += 4 * step
        m += 4
    if t < out.size:
        out[t] = (acc0 + acc1) + (acc2 + acc3)


@cuda.jit
def fma_chains(out, iters, a, b):
    """``iters * 16`` fused multiply-adds on each of eight independent chains per thread.

    Each chain is a dependent sequence ``x = x * a + b`` (one FMA instruction: 2 flops). One chain alone
    would wait for the previous FMA's result (about 4 cycles on recent GPUs) before issuing the next; eight
    independent chains per thread, and many warps per SM, give the scheduler an independent FMA to issue
    every cycle. The inner loop has a constant trip count, so the compiler unrolls it: 128 FMAs per trip of
    the outer loop, against three instructions of loop bookkeeping (add, compare, branch), which would
    otherwise take issue slots from the FMAs.
    ``out`` holds each thread's start value and receives its result; its dtype picks FP32 or FP64.
    """
    i = cuda.grid(1)
    if i < out.size:
        x0 = out[i]
        x1 = x0 + b
        x2 = x1 + b
        x3 = x2 + b
        x4 = x3 + b
        x5 = x4 + b
        x6 = x5 + b
        x7 = x6 + b
        j = 0
        while j < iters:
            for _ in range(16):  # FMA_UNROLL: a constant trip count, unrolled by the compiler
                x0 = x0 * a + b
                x1 = x1 * a + b
                x2 = x2 * a + b
                x3 = x3 * a + b
                x4 = x4 * a + b
                x5 = x5 * a + b
                x6 = x6 * a + b
                x7 = x7 * a + b
            j += 1
        out[i] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))


@cuda.jit
def fma_per_element(x, out, nfma, a, b):
    """``out[i] = f(x[i])`` where ``f`` applies ``v = v * a + b`` ``nfma`` times: a tunable intensity.

    Per element the kernel moves one load and one store and does ``2 * nfma`` flops, so its arithmetic
    intensity is ``nfma / itemsize`` FLOP per byte. The grid-stride loop handles four elements per trip: four
    loads in flight and four independent FMA chains, so both the memory side and the arithmetic side can run
    at full rate. (A ``while`` loop rather than ``for _ in range(nfma)``: Numba lowers ``range`` with extra
    bookkeeping per trip that the compiler cannot fold away, and those instructions take issue slots from
    the FMAs.)
    """
    n = x.size
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + 3 * stride < n:
        v0 = x[i]
        v1 = x[i + stride]
        v2 = x[i + 2 * stride]
        v3 = x[i + 3 * stride]
        j = 0
        while j < nfma:
            v0 = v0 * a + b
            v1 = v1 * a + b
            v2 = v2 * a + b
            v3 = v3 * a + b
            j += 1
        out[i] = v0
        out[i + stride] = v1
        out[i + 2 * stride] = v2
        out[i + 3 * stride] = v3
        i += 4 * stride
    while i < n:
        v = x[i]
        j = 0
        while j < nfma:
            v = v * a + b
            j += 1
        out[i] = v
        i += stride


# ------------------------------------------------------------------------------------------ the host


@njit(parallel=True, cache=False)
def host_copy(x, out):
    """``out[i] = x[i]`` on the host CPU, the elements shared among Numba's threads: STREAM's Copy kernel.

    Each thread copies one contiguous part (``prange`` splits the range into one chunk per thread), so
    every core streams from memory at once, as STREAM runs with OpenMP.
    """
    for i in prange(x.shape[0]):
        out[i] = x[i]


# ------------------------------------------------------------------------------------------- counting


def stream_copy_bytes(n: int, itemsize: int) -> int:
    """Bytes :func:`stream_copy` moves: each element read once and written once (as a copy is counted)."""
    return 2 * n * itemsize


def l2_read_bytes(threads: int, steps: int, itemsize: int) -> int:
    """Bytes :func:`l2_read` reads: ``steps`` loads by each of ``threads`` threads."""
    return threads * steps * itemsize


def fma_chains_flops(threads: int, iters: int) -> int:
    """Flops of :func:`fma_chains`: 2 per FMA, ``8 chains * 8 * iters`` FMAs per thread."""
    return 2 * FMA_CHAINS * FMA_UNROLL * iters * threads


def fma_per_element_flops(n: int, nfma: int) -> int:
    """Flops of :func:`fma_per_element`: ``2 * nfma`` per element."""
    return 2 * nfma * n


def fma_per_element_bytes(n: int, itemsize: int) -> int:
    """Bytes of :func:`fma_per_element`: one load and one store per element."""
    return 2 * n * itemsize


def fma_per_element_intensity(nfma: int, itemsize: int = 4) -> float:
    """Arithmetic intensity of :func:`fma_per_element` in FLOP/byte: ``2 nfma / (2 itemsize)``."""
    return nfma / itemsize


def l2_step(threads: int) -> int:
    """The smallest ``step >= threads`` that is 32 times an odd number (see :func:`l2_read`)."""
    if threads < 1:
        raise LaunchConfigError(f"l2_read needs at least one thread, got {threads}")
    q = warps_for(threads)
    if q % 2 == 0:
        q += 1
    return 32 * q


# -------------------------------------------------------------------------------------- launch helpers


def full_grid(threads: int = 256, waves: int = 1) -> tuple[int, int]:
    """``(blocks, threads)`` that fill every SM of this GPU ``waves`` times (a few blocks per SM).

    Under the simulator, where there are no SMs, it returns a small grid of 2 blocks.
    """
    reason = validate.check_launch(threads)
    if reason:
        raise LaunchConfigError(f"{reason}: choose threads per block between 32 and 1024, e.g. 256")
    if backend.is_simulator():
        return 2, threads
    info = device.device_info()
    # this GPU's SM, from its driver: the blocks it holds by their threads and its block slots
    per_sm = info.resident_blocks(threads)
    return (info.sm_count or 1) * per_sm * waves, threads


def _float_array(a, name: str) -> None:
    validate.array(a, name, ndim=1)
    if np.dtype(a.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise LaunchConfigError(f"{name} has dtype {np.dtype(a.dtype)}: these kernels take float32 or float64 arrays "
                                f"(pass {name}.astype(np.float32)).")


def _aligned16(a) -> bool:
    """True unless ``a`` is a device array whose data does not start on a 16-byte boundary (a sliced view)."""
    iface = getattr(a, "__cuda_array_interface__", None)
    return iface is None or iface["data"][0] % 16 == 0


def run_stream_copy(x, out=None, *, blocks: int | None = None, threads: int = 256):
    """Copy ``x`` into ``out`` and return ``out`` (a device array if ``x`` was one).

    float32 and float64 arrays are copied by :func:`stream_copy`, complex128 arrays by :func:`stream_copy16`
    (16-byte accesses; to copy any buffer that way, view it as complex128 first).

    Args:
        x: a 1D float32, float64 or complex128 array (host or device).
        out: where to write; a new device array when omitted.
        blocks, threads: the launch; by default enough blocks to fill every SM once.
    """
    validate.array(x, "x", ndim=1)
    wide = np.dtype(x.dtype) == np.dtype(np.complex128)
    if not wide:
        _float_array(x, "x")
    on_host = isinstance(x, np.ndarray)
    x_d = cuda.to_device(x) if on_host else x
    if out is None:
        out_d = cuda.device_array(x.shape[0], dtype=x.dtype)
    else:
        validate.array(out, "out", dtype=x.dtype, shape=tuple(x.shape))
        out_d = out
    if wide and not (_aligned16(x_d) and _aligned16(out_d)):
        raise LaunchConfigError("stream_copy16 needs both arrays to start on a 16-byte boundary (it moves 16 bytes "
                                "per access); this one is a view starting part-way into an allocation: copy it "
                                "into a fresh array first, or use a float64 view with stream_copy.")
    if blocks is None:
        blocks, threads = full_grid(threads)
    if blocks < 1 or validate.check_launch(threads):
        raise LaunchConfigError(f"cannot launch {blocks} blocks of {threads} threads: use blocks >= 1 and "
                                "1 <= threads <= 1024")
    kernel = stream_copy16 if wide else stream_copy
    kernel[blocks, threads](x_d, out_d)
    return to_host(out_d) if on_host and out is None else out_d


def run_l2_read(x, steps: int, *, blocks: int | None = None, threads: int = 256):
    """Run :func:`l2_read` over ``x`` and return the per-thread sums (NumPy) and the launch's thread count.

    ``x``'s size must be a power of two; ``steps`` is rounded up to a multiple of 4.
    """
    _float_array(x, "x")
    n = x.shape[0]
    if n < 1 or n & (n - 1):
        raise LaunchConfigError(f"l2_read needs a power-of-two number of elements (it wraps with a bit mask), got {n}")
    if steps < 1:
        raise LaunchConfigError(f"steps must be at least 1, got {steps}")
    steps = 4 * (-(-steps // 4))  # not launch geometry: whole groups of the 4 unrolled loop steps
    if blocks is None:
        blocks, threads = full_grid(threads)
    total = blocks * threads
    x_d = cuda.to_device(x) if isinstance(x, np.ndarray) else x
    out_d = cuda.device_array(total, dtype=np.float32)
    l2_read[blocks, threads](x_d, out_d, steps, l2_step(total))
    return to_host(out_d), total


def l2_read_reference(x: np.ndarray, threads: int, steps: int) -> np.ndarray:
    """What :func:`l2_read` computes, in NumPy (``steps`` already a multiple of 4)."""
    step = l2_step(threads)
    t = np.arange(threads)[:, None]
    m = np.arange(steps)[None, :]
    idx = (t + m * step) & (x.size - 1)
    return x[idx].astype(np.float64).sum(axis=1)


def run_fma_chains(out, iters: int, a: float = 0.999, b: float = 0.001, *, threads: int = 256):
    """Run :func:`fma_chains` on ``out`` (one thread per element, start values in ``out``); return the result.

    ``a`` and ``b`` are converted to ``out``'s dtype, so a float32 array runs FP32 FMAs and float64 FP64.
    """
    _float_array(out, "out")
    if iters < 0:
        raise LaunchConfigError(f"iters must be >= 0, got {iters}")
    dtype = np.dtype(out.dtype).type
    on_host = isinstance(out, np.ndarray)
    out_d = cuda.to_device(out) if on_host else out
    fma_chains[blocks_for(out.shape[0], threads), threads](out_d, iters, dtype(a), dtype(b))
    return to_host(out_d) if on_host else out_d


def fma_chains_reference(start: np.ndarray, iters: int, a: float = 0.999, b: float = 0.001) -> np.ndarray:
    """What :func:`fma_chains` computes, in NumPy (without fusing, so equal up to rounding)."""
    dtype = start.dtype.type
    a, b = dtype(a), dtype(b)
    chains = [start.copy()]
    for _ in range(FMA_CHAINS - 1):
        chains.append(chains[-1] + b)
    for _ in range(iters * FMA_UNROLL):
        chains = [c * a + b for c in chains]
    c = chains
    return ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]))


def run_fma_per_element(x, nfma: int, a: float = 0.999, b: float = 0.001, out=None, *,
                        blocks: int | None = None, threads: int = 256):
    """Apply ``nfma`` multiply-adds to each element of ``x`` with :func:`fma_per_element`; return the result."""
    _float_array(x, "x")
    if nfma < 0:
        raise LaunchConfigError(f"nfma must be >= 0, got {nfma}")
    dtype = np.dtype(x.dtype).type
    on_host = isinstance(x, np.ndarray)
    x_d = cuda.to_device(x) if on_host else x
    if out is None:
        out_d = cuda.device_array(x.shape[0], dtype=x.dtype)
    else:
        validate.array(out, "out", dtype=x.dtype, shape=tuple(x.shape))
        out_d = out
    if blocks is None:
        blocks, threads = full_grid(threads)
    fma_per_element[blocks, threads](x_d, out_d, nfma, dtype(a), dtype(b))
    return to_host(out_d) if on_host and out is None else out_d


def fma_per_element_reference(x: np.ndarray, nfma: int, a: float = 0.999, b: float = 0.001) -> np.ndarray:
    """What :func:`fma_per_element` computes, in NumPy."""
    dtype = x.dtype.type
    v = x.copy()
    for _ in range(nfma):
        v = v * dtype(a) + dtype(b)
    return v


# ------------------------------------------------------------------------------ bugs for the sanitizer


@cuda.jit
def scale_unguarded(x, out, a):
    """PITFALL: ``out[i] = a * x[i]`` with no bounds check.

    Launched with more threads than elements (the usual rounded-up grid), the threads past the end read
    ``x[i]`` and write ``out[i]`` outside both arrays. The simulator stops at the first such access; a GPU
    does not check, so the kernel "works" while it reads and overwrites memory it does not own, until
    ``compute-sanitizer --tool memcheck`` reports every such access.
    """
    i = cuda.grid(1)
    out[i] = a * x[i]


@cuda.jit
def scale(x, out, a):
    """``out[i] = a * x[i]``, guarded: threads past the end do nothing."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i]


@cuda.jit
def reverse_in_block_no_barrier(x, out):
    """PITFALL: each block reverses its tile of ``blockDim.x`` elements through shared memory, with no barrier.

    Thread ``t`` writes ``tile[t]`` and then reads ``tile[blockDim.x - 1 - t]``, which *another* thread writes:
    without ``cuda.syncthreads()`` in between nothing makes that write happen first (a read-after-write race).
    Launch it with :data:`REVERSE_BLOCK` threads per block on a multiple of that many elements.
    """
    tile = cuda.shared.array(REVERSE_BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    out[i] = tile[cuda.blockDim.x - 1 - t]


@cuda.jit
def reverse_in_block(x, out):
    """Each block reverses its tile of ``blockDim.x`` elements through shared memory (see the pitfall above)."""
    tile = cuda.shared.array(REVERSE_BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i]
    cuda.syncthreads()  # RAW: every thread's element is in the tile before any thread reads another's
    out[i] = tile[cuda.blockDim.x - 1 - t]


def reverse_in_block_reference(x: np.ndarray, block: int = REVERSE_BLOCK) -> np.ndarray:
    """What :func:`reverse_in_block` computes, in NumPy: each tile of ``block`` elements reversed."""
    if x.size % block:
        raise LaunchConfigError(f"reverse_in_block works on whole tiles: {x.size} is not a multiple of {block}")
    return x.reshape(-1, block)[:, ::-1].reshape(-1).copy()


def run_reverse_in_block(x, *, barrier: bool = True):
    """Reverse every tile of :data:`REVERSE_BLOCK` elements of ``x`` (float32, a multiple of that size)."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    if x.shape[0] == 0 or x.shape[0] % REVERSE_BLOCK:
        raise LaunchConfigError(f"reverse_in_block works on whole tiles of {REVERSE_BLOCK} elements; x has "
                                f"{x.shape[0]} (pad it to a multiple of {REVERSE_BLOCK})")
    x_d = cuda.to_device(x)
    out = cuda.device_array(x.shape[0], dtype=np.float32)
    kernel = reverse_in_block if barrier else reverse_in_block_no_barrier
    kernel[x.shape[0] // REVERSE_BLOCK, REVERSE_BLOCK](x_d, out)
    return out.copy_to_host()


#: What :func:`sanitizer_target` can launch: name -> (kernel, which sanitizer tool reports it).
SANITIZER_TARGETS = {
    "scale_unguarded": "memcheck", "scale": "memcheck",
    "reverse_in_block_no_barrier": "racecheck", "reverse_in_block": "racecheck",
}


def sanitizer_target(which: str, n: int = 1000, threads: int = 256) -> None:
    """Launch one kernel of :data:`SANITIZER_TARGETS` once, compiled with line information, and synchronise.

    ``scale_unguarded``/``scale``: ``n`` elements (1000: not a multiple of ``threads``, so the last block has
    threads past the end). ``reverse_in_block*``: 2 blocks of :data:`REVERSE_BLOCK` threads.
    ``labhelpers.experiments.roofline.sanitizer_table`` runs this in a separate process under
    ``compute-sanitizer``; ``lineinfo=True`` lets the report name the source line of every bad access.

    Raises:
        GPUOnlyError: under the simulator (compute-sanitizer watches a real GPU).
    """
    if which not in SANITIZER_TARGETS:
        raise ValueError(f"which must be one of {sorted(SANITIZER_TARGETS)}, got {which!r}")
    backend.require_gpu("sanitizer_target", because="launches a kernel for compute-sanitizer to watch",
                        instead="The simulator reports the same bugs itself: an IndexError, lh.check_races.")
    kernel = cuda.jit(lineinfo=True)(globals()[which].py_func)
    if which.startswith("scale"):
        x = cuda.to_device(np.arange(n, dtype=np.float32))
        out = cuda.device_array(n, dtype=np.float32)
        kernel[blocks_for(n, threads), threads](x, out, np.float32(2))
    else:
        x = cuda.to_device(np.arange(2 * REVERSE_BLOCK, dtype=np.float32))
        out = cuda.device_array(2 * REVERSE_BLOCK, dtype=np.float32)
        kernel[2, REVERSE_BLOCK](x, out)
    cuda.synchronize()


# ------------------------------------------------------------------------------------- the profiled launch


def profile_target(n: int = 2**24, nfma: int = 16) -> None:
    """Launch :func:`fma_per_element` once (float32, ``nfma`` FMAs per element): the kernel the chapter profiles.

    :mod:`labhelpers.profiler` runs this in a separate process under Nsight Compute.

    Raises:
        GPUOnlyError: under the simulator (there is nothing for a profiler to count).
    """
    backend.require_gpu("profile_target", because="launches the kernel Nsight Compute profiles",
                        instead="The chapter shows a report saved on a real GPU instead.")
    x = cuda.to_device(np.full(n, 0.5, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    blocks, threads = full_grid()
    fma_per_element[blocks, threads](x, out, nfma, np.float32(0.999), np.float32(0.001))
    cuda.synchronize()
