"""Solutions of lab 1, "CUDA in Python" (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton in the lab and only adds lines.
"""

from numba import cuda

import labhelpers as lh


@cuda.jit
def fill_index(out):
    """Each thread writes its global index: out[i] = i. Threads past the end do nothing."""
    # FILL ME IN (roughly 3 lines)
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@cuda.jit
def vector_add(x, y, out):
    """out[i] = x[i] + y[i] for every i < out.size, whatever the size."""
    i = cuda.grid(1)
    # FILL ME IN (roughly 2 lines)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def scale_2d(a, alpha, out):
    """out[row, col] = alpha * a[row, col]; x runs along columns, y along rows."""
    # FILL ME IN (roughly 3 lines)
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = alpha * a[row, col]


def launch_config(n: int, threads: int) -> tuple[int, int, int]:
    """Return (blocks, idle_threads, warps) for n elements and `threads` threads per block."""
    # FILL ME IN (roughly 6 lines)
    if not 1 <= threads <= 1024:
        raise lh.LaunchConfigError(f"{threads} threads per block: choose between 1 and 1024")
    blocks = (n + threads - 1) // threads
    idle_threads = blocks * threads - n
    warps = blocks * ((threads + 31) // 32)
    return blocks, idle_threads, warps


def choose_threads():
    """Threads per block for vector_add (a multiple of 32, at most 1024). Prediction: ..."""
    # Blocks of 32 threads cap an SM at 32 blocks = 1024 threads, half of its 2048: half the latency hiding.
    # 256 fills an SM with 8 blocks and leaves room for whole blocks on every GPU.
    return 256


@cuda.jit
def scale_2d_bug(a, alpha, out):
    """out[row, col] = alpha * a[row, col]: find the bug (fix it by adding lines)."""
    col, row = cuda.grid(2)
    if col >= out.shape[1]:  # the rounded-up grid has threads right of the last column too
        return
    if row < out.shape[0]:
        out[row, col] = alpha * a[row, col]
