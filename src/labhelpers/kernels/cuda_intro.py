"""Chapter "CUDA in Python": the first kernels, and SAXPY timed three ways.

Every kernel follows the same anatomy: one thread per element, its global index from
``cuda.grid(1)`` (or ``cuda.grid(2)``), and a bounds check, because the grid is rounded
up to whole blocks and the last block usually has threads with no element to work on.

* :func:`global_index`, :func:`block_and_thread`: where a thread sits in the grid.
* :func:`add`, :func:`saxpy`: one element per thread; :func:`run_saxpy` launches SAXPY
  with checked arguments.
* :func:`saxpy_vec4`: the chapter's second SAXPY, four elements per thread through 16-byte loads and stores
  (``load4``/``store4``), unsigned indices, the last ``n % 4`` elements done one by one; :func:`run_saxpy_vec4`
  launches it one group of four per thread (:func:`saxpy_vec4_blocks`). On an H200 it reaches the copy's
  bandwidth where :func:`saxpy` stays at about 0.8 of it (``bench/cuda_intro.py``, reference
  ``ch01_saxpy_kernels``). Its untimed relatives are in :mod:`labhelpers.kernels.saxpy_candidates`.
* :func:`add_2d`: a 2D grid over a matrix (x runs along columns, y along rows);
  :func:`run_add_2d` launches it.
* :func:`saxpy_numpy`, :func:`saxpy_bytes`, :func:`saxpy_flops`: SAXPY's specification and costs.
* CUDA C's qualifiers in Numba, one idea per kernel: :func:`horner`, a device function
  (``__device__``, ``@cuda.jit(device=True)``) that returns a value, called by :func:`polynomial`,
  whose coefficients live in constant memory (``__constant__``, ``cuda.const.array_like``);
  :func:`median_filter`, with a per-thread array (``cuda.local.array``); :func:`reverse_each_block`,
  with a per-block array in shared memory (``__shared__``, ``cuda.shared.array``). Each has a NumPy
  specification and a ``run_*`` wrapper.
* :func:`fib`, a device function that calls itself: recursion works on every GPU since compute
  capability 2.0; :func:`fibonacci` launches it.
* :func:`write_at`: one thread writes one element *without* a bounds check, for the chapter's
  demonstration of an error that surfaces at a later synchronising call
  (:func:`labhelpers.experiments.cuda_intro.asynchronous_error`).

Timing SAXPY three ways (host, GPU with transfers, GPU kernel only) is in
:mod:`labhelpers.experiments.cuda_intro`, its figure in :mod:`labhelpers.figures.cuda_intro`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .. import validate
from ..arrays import to_device, to_host
from ..counts import saxpy_bytes, saxpy_flops  # the one table of counts; the names chapter 1 shows
from ..errors import ArrayArgumentError
from ..launch import blocks_for, launch_1d, launch_2d
from .scan.tiled import load4, store4  # the repository's 16-byte accesses (ld.global.v4 / st.global.v4)

#: Coefficients of the polynomial :func:`polynomial` evaluates, lowest power first:
#: p(v) = 1 - v/2 + v^2/4 - v^3/8. Compiling :func:`polynomial` copies them into constant memory.
POLY_COEFFS = np.array([1.0, -0.5, 0.25, -0.125], dtype=np.float32)
#: Width of :func:`median_filter`'s window (odd): each output is the median of this many inputs.
MEDIAN_WIDTH = 5
#: Threads per block of :func:`reverse_each_block`, the length of its shared-memory array.
REVERSE_THREADS = 64
#: :func:`fibonacci` recurses at most this deep: every call takes space on the thread's stack (1 KiB by default).
FIB_MAX = 10
#: Elements :func:`saxpy_vec4` moves with one 16-byte access (four float32), as an unsigned constant: in Numba a
#: uint64 mixed with a signed integer (a plain literal) becomes a float64.
FOUR = np.uint64(4)


@cuda.jit
def global_index(out):
    """Write each thread's global index ``blockIdx.x * blockDim.x + threadIdx.x`` into ``out``."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.size:  # the bounds check: the last block may run past the end
        out[i] = i


@cuda.jit
def block_and_thread(block_of, thread_of):
    """Record, for every element, which block (``blockIdx.x``) and which thread of it (``threadIdx.x``) wrote it."""
    i = cuda.grid(1)  # the same number as blockIdx.x * blockDim.x + threadIdx.x
    if i < block_of.size:
        block_of[i] = cuda.blockIdx.x
        thread_of[i] = cuda.threadIdx.x


@cuda.jit
def add(x, y, out):
    """``out[i] = x[i] + y[i]``, one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def saxpy(a, x, y, out):
    """``out[i] = a * x[i] + y[i]`` (single-precision a·x plus y), one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_vec4(a, x, y, out):
    """``out = a * x + y`` four elements at a time: 16-byte loads and stores, unsigned indices.

    Group ``g`` is elements ``4g .. 4g+3``: one ``load4`` of ``x``, one of ``y`` and one ``store4`` move it, so a
    warp's access is 512 contiguous bytes instead of 128 and a thread issues three memory instructions for four
    elements instead of twelve. The index is unsigned (``uint64``): Numba's signed indices cost, for every
    access, a test for a negative index that an unsigned one cannot have. Launched with one thread per group
    (:func:`run_saxpy_vec4`) the loop runs once; the loop (a *grid-stride* loop) lets a smaller grid cover any
    ``n`` too. The last ``n % 4`` elements, where a 16-byte access would run past the end, are done one by one
    by the grid's first ``n % 4`` threads. Needs arrays whose data start on a 16-byte boundary (every
    allocation does; :func:`run_saxpy_vec4` refuses a sliced device view that does not).
    """
    n = np.uint64(out.size)
    groups = n // FOUR
    stride = np.uint64(cuda.gridsize(1))
    t = np.uint64(cuda.grid(1))
    g = t
    while g < groups:  # one trip per thread when the grid has a thread per group
        x0, x1, x2, x3 = load4(x, g)
        y0, y1, y2, y3 = load4(y, g)
        store4(out, g, a * x0 + y0, a * x1 + y1, a * x2 + y2, a * x3 + y3)
        g += stride
    i = groups * FOUR + t  # the tail: threads 0 .. n % 4 - 1 take one element each
    if i < n:
        out[i] = a * x[i] + y[i]


@cuda.jit
def add_2d(a, b, out):
    """``out[row, col] = a[row, col] + b[row, col]`` on a 2D grid: x runs along columns, y along rows."""
    col, row = cuda.grid(2)  # x first: neighbouring threads of a warp take neighbouring columns
    if row < out.shape[0] and col < out.shape[1]:  # both dimensions are rounded up to whole blocks
        out[row, col] = a[row, col] + b[row, col]


def saxpy_intensity(itemsize: int = 4) -> float:
    """Arithmetic intensity of SAXPY in flop per byte: 2 flops per 3 values moved (1/6 for float32)."""
    return saxpy_flops(1) / saxpy_bytes(1, itemsize)


def saxpy_numpy(a: float, x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """SAXPY on the host with NumPy: ``a * x + y``, written into ``out`` when given (no temporaries)."""
    out = np.empty_like(x) if out is None else out
    np.multiply(x, x.dtype.type(a), out=out)
    out += y
    return out


def run_saxpy(a: float, x, y, threads: int = 256):
    """Launch :func:`saxpy` on device or host arrays and return the result as a NumPy array.

    Checks the arguments first: equal-length, contiguous, float32 vectors.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    validate.array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    launch = launch_1d(x.shape[0], threads)
    x_d, y_d = cuda.to_device(x), cuda.to_device(y)
    out_d = cuda.device_array_like(x_d)
    saxpy[launch.blocks, launch.threads](np.float32(a), x_d, y_d, out_d)
    return to_host(out_d)


def aligned16(a) -> bool:
    """True unless ``a`` is a device array whose data does not start on a 16-byte boundary (a sliced view)."""
    iface = getattr(a, "__cuda_array_interface__", None)
    return iface is None or iface["data"][0] % 16 == 0


def saxpy_vec4_blocks(n: int, threads: int = 256) -> int:
    """Blocks of :func:`saxpy_vec4` with one group of four per thread: ``ceil(n / (4 threads))``, and enough
    threads for the ``n % 4`` elements of the tail (at least one block)."""
    n = validate.integer(n, "n", minimum=0)
    return max(blocks_for(n, threads, 4), blocks_for(n % 4, threads))


def run_saxpy_vec4(a: float, x, y, threads: int = 256) -> np.ndarray:
    """Launch :func:`saxpy_vec4`, one group of four elements per thread, and return ``a * x + y`` as NumPy.

    Args:
        a: the scalar (converted to float32).
        x, y: equal-length, 1-D, C-contiguous float32 arrays (NumPy, CuPy or Numba device arrays); a device
            array's data must start on a 16-byte boundary (a fresh allocation does, a view ``x_d[1:]`` does not).
        threads: threads per block, 1..1024.

    Raises:
        ArrayArgumentError: a wrong dtype, shape or layout, or a device view off a 16-byte boundary.
        LaunchConfigError: a block of more than 1024 threads (or none).
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    validate.array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    for name, arr in (("x", x), ("y", y)):
        if not aligned16(arr):
            raise ArrayArgumentError(
                f"{name} is a device array whose data does not start on a 16-byte boundary (a sliced view?): "
                f"saxpy_vec4 reads it 16 bytes at a time. Pass a copy ({name}.copy()) or use run_saxpy.")
    threads = validate.threads_per_block(threads)
    blocks = saxpy_vec4_blocks(int(x.shape[0]), threads)
    x_d, y_d = to_device(x), to_device(y)
    out_d = cuda.device_array(int(x.shape[0]), dtype=np.float32)
    saxpy_vec4[blocks, threads](np.float32(a), x_d, y_d, out_d)
    return to_host(out_d)


def run_add_2d(a, b, block: tuple[int, int] = (16, 16)) -> np.ndarray:
    """Launch :func:`add_2d` on two equal-shaped float32 matrices and return ``a + b`` as a NumPy array.

    Args:
        a, b: C-contiguous float32 matrices of the same shape (NumPy or device arrays).
        block: threads per block as ``(x, y)``: x along columns, y along rows.

    Raises:
        ArrayArgumentError: a wrong dtype, shape or layout.
        LaunchConfigError: a block of more than 1024 threads (or a zero dimension).
    """
    validate.array(a, "a", dtype=np.float32, ndim=2)
    validate.array(b, "b", dtype=np.float32, ndim=2, shape=tuple(a.shape))
    grid, block = launch_2d(tuple(a.shape), block)
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    out_d = cuda.device_array_like(a_d)
    add_2d[grid, block](a_d, b_d, out_d)
    return to_host(out_d)


# --------------------------------------------------------------------------- CUDA C's qualifiers in Numba
@cuda.jit(device=True)
def horner(coeffs, v):
    """``coeffs[0] + coeffs[1] v + coeffs[2] v^2 + ...`` by Horner's rule.

    A device function (CUDA C's ``__device__``): called from kernels, never launched, and unlike a
    kernel it returns a value.
    """
    acc = coeffs[coeffs.size - 1]
    for k in range(coeffs.size - 2, -1, -1):
        acc = acc * v + coeffs[k]
    return acc


@cuda.jit
def polynomial(x, out):
    """``out[i] = p(x[i])`` for the polynomial of :data:`POLY_COEFFS`, held in constant memory."""
    coeffs = cuda.const.array_like(POLY_COEFFS)  # __constant__: every thread reads the same coefficient at once
    i = cuda.grid(1)
    if i < out.size:
        out[i] = horner(coeffs, x[i])  # a device function returns its value to the caller


@cuda.jit(device=True)
def insertion_sort(values):
    """Sort a small array in place (a device function that returns nothing)."""
    for k in range(1, values.size):
        v = values[k]
        j = k - 1
        while j >= 0 and values[j] > v:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = v


@cuda.jit
def median_filter(x, out):
    """``out[i]`` = the median of the :data:`MEDIAN_WIDTH` inputs around ``i`` (indices clamped to the array)."""
    window = cuda.local.array(MEDIAN_WIDTH, float32)  # one private copy per thread
    i = cuda.grid(1)
    if i < out.size:
        for k in range(MEDIAN_WIDTH):
            j = min(max(i + k - MEDIAN_WIDTH // 2, 0), x.size - 1)  # clamp at both ends
            window[k] = x[j]
        insertion_sort(window)
        out[i] = window[MEDIAN_WIDTH // 2]


@cuda.jit
def reverse_each_block(a):
    """Reverse every block's slice of ``a`` in place, through a tile in shared memory.

    Launch with :data:`REVERSE_THREADS` threads per block; the last block may be partial.
    """
    tile = cuda.shared.array(REVERSE_THREADS, float32)  # __shared__: one copy per block
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * cuda.blockDim.x
    count = min(cuda.blockDim.x, a.size - start)  # elements of this block: fewer in the last one
    if t < count:
        tile[t] = a[start + t]
    cuda.syncthreads()  # RAW: every element must be in the tile before any thread reads another's
    if t < count:
        a[start + t] = tile[count - 1 - t]


def polynomial_numpy(x: np.ndarray) -> np.ndarray:
    """Specification of :func:`polynomial`: Horner's rule in float32, as the kernel computes it."""
    x = np.asarray(x, dtype=np.float32)
    acc = np.full_like(x, POLY_COEFFS[-1])
    for c in POLY_COEFFS[-2::-1]:
        acc = acc * x + c
    return acc


def median_filter_numpy(x: np.ndarray) -> np.ndarray:
    """Specification of :func:`median_filter`: sliding medians with the ends repeated."""
    half = MEDIAN_WIDTH // 2
    padded = np.pad(np.asarray(x, dtype=np.float32), half, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, MEDIAN_WIDTH), axis=1).astype(np.float32)


def reverse_each_block_numpy(a: np.ndarray, threads: int = REVERSE_THREADS) -> np.ndarray:
    """Specification of :func:`reverse_each_block`: every slice of ``threads`` elements reversed."""
    a = np.asarray(a)
    return np.concatenate([a[s:s + threads][::-1] for s in range(0, a.size, threads)]) if a.size else a.copy()


def run_polynomial(x, threads: int = 256) -> np.ndarray:
    """Launch :func:`polynomial` on a float32 vector and return ``p(x)`` as a NumPy array."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    launch = launch_1d(x.shape[0], threads)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    polynomial[launch.blocks, launch.threads](x_d, out_d)
    return to_host(out_d)


def run_median_filter(x, threads: int = 256) -> np.ndarray:
    """Launch :func:`median_filter` on a float32 vector and return the filtered vector."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    launch = launch_1d(x.shape[0], threads)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    median_filter[launch.blocks, launch.threads](x_d, out_d)
    return to_host(out_d)


def run_reverse_each_block(a) -> np.ndarray:
    """Launch :func:`reverse_each_block` (blocks of :data:`REVERSE_THREADS`) and return the result."""
    validate.array(a, "a", dtype=np.float32, ndim=1)
    launch = launch_1d(a.shape[0], REVERSE_THREADS)
    a_d = cuda.to_device(a)
    reverse_each_block[launch.blocks, launch.threads](a_d)
    return to_host(a_d)


# --------------------------------------------------------------------------- recursion
@cuda.jit(device=True)
def fib(n):
    """The ``n``-th Fibonacci number by plain recursion: a device function may call itself.

    Recursion works on every GPU since compute capability 2.0 (Fermi). Each call takes room on
    the thread's stack (1 KiB per thread by default), so keep the depth small.
    """
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@cuda.jit
def fibonacci(out):
    """``out[i] = fib(i)``, one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = fib(np.int64(i))  # one argument type, so the recursive calls share one compiled version


def run_fibonacci(count: int = FIB_MAX + 1) -> np.ndarray:
    """Launch :func:`fibonacci` for ``fib(0) ... fib(count - 1)`` (at most ``FIB_MAX + 1`` of them)."""
    count = validate.integer(count, "count", minimum=1, maximum=FIB_MAX + 1)
    out_d = cuda.device_array(count, dtype=np.int64)
    fibonacci[1, 32](out_d)
    return to_host(out_d)


# --------------------------------------------------------------------------- an error the GPU reports late
@cuda.jit
def write_at(out, index, value):
    """Thread 0 writes ``out[index] = value``: *no* bounds check, on purpose.

    The chapter's demonstration of an asynchronous error passes an index far past the end:
    on a GPU the write faults after the launch has returned, and the error surfaces at the
    next call that waits for the GPU; the simulator checks the index and raises at once.
    """
    if cuda.grid(1) == 0:
        out[index] = value
