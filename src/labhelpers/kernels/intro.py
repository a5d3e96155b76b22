"""Chapter "CUDA in Python": the first kernels, and SAXPY timed three ways.

Every kernel follows the same anatomy: one thread per element, its global index from
``cuda.grid(1)`` (or ``cuda.grid(2)``), and a bounds check, because the grid is rounded
up to whole blocks and the last block usually has threads with no element to work on.

* :func:`global_index`, :func:`block_and_thread`: where a thread sits in the grid.
* :func:`add`, :func:`saxpy`: one element per thread; :func:`run_saxpy` launches SAXPY
  with checked arguments.
* :func:`add_2d`: a 2D grid over a matrix (x runs along columns, y along rows);
  :func:`run_add_2d` launches it.
* :func:`saxpy_numpy`, :func:`saxpy_bytes`, :func:`saxpy_flops`: SAXPY's specification and costs.

Timing SAXPY three ways (host, GPU with transfers, GPU kernel only) is in
:mod:`labhelpers.experiments.intro`, its figure in :mod:`labhelpers.figures.intro`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..arrays import check_array, to_host
from ..launch import launch_1d
from ..models.launch_calc import launch_2d


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
def add_2d(a, b, out):
    """``out[row, col] = a[row, col] + b[row, col]`` on a 2D grid: x runs along columns, y along rows."""
    col, row = cuda.grid(2)  # x first: neighbouring threads of a warp take neighbouring columns
    if row < out.shape[0] and col < out.shape[1]:  # both dimensions are rounded up to whole blocks
        out[row, col] = a[row, col] + b[row, col]


def saxpy_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes SAXPY moves through device memory: read x and y, write out."""
    return 3 * n * itemsize


def saxpy_flops(n: int) -> int:
    """Floating-point operations of SAXPY: one multiply and one add per element."""
    return 2 * n


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
    check_array(x, "x", dtype=np.float32, ndim=1)
    check_array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    launch = launch_1d(x.shape[0], threads)
    x_d, y_d = cuda.to_device(x), cuda.to_device(y)
    out_d = cuda.device_array_like(x_d)
    saxpy[launch.blocks, launch.threads](np.float32(a), x_d, y_d, out_d)
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
    check_array(a, "a", dtype=np.float32, ndim=2)
    check_array(b, "b", dtype=np.float32, ndim=2, shape=tuple(a.shape))
    grid, block = launch_2d(tuple(a.shape), block)
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    out_d = cuda.device_array_like(a_d)
    add_2d[grid, block](a_d, b_d, out_d)
    return to_host(out_d)
