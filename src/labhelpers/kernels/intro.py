"""Chapter "CUDA in Python": the first kernels.

Every kernel follows the same anatomy: one thread per element, its global index from
``cuda.grid(1)``, and a bounds check, because the grid is rounded up to whole blocks
and the last block usually has threads with no element to work on.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..arrays import check_array, to_host
from ..launch import launch_1d


@cuda.jit
def global_index(out):
    """Write each thread's global index ``blockIdx.x * blockDim.x + threadIdx.x`` into ``out``."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.size:  # the bounds check: the last block may run past the end
        out[i] = i


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


def saxpy_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes SAXPY moves through device memory: read x and y, write out."""
    return 3 * n * itemsize


def saxpy_flops(n: int) -> int:
    """Floating-point operations of SAXPY: one multiply and one add per element."""
    return 2 * n


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
