"""Solutions of the lab "Profiling and the roofline" (labs/07_profiling_roofline_lab.ipynb).

Each function has the name of a skeleton in the lab and keeps every line of it: solving only adds lines.
"""

import labhelpers  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32


def matvec_counts(m, n, itemsize):
    """Flops and bytes of y = A @ x, A of shape (m, n), each element `itemsize` bytes."""
    flops, nbytes = 0, 0
    # FILL ME IN (roughly 2 lines): count the flops, then the bytes of A, x and y
    flops = 2 * m * n
    nbytes = (m * n + n + m) * itemsize
    return flops, nbytes


def roofline_time_ms(flops, nbytes, bandwidth_gbs, peak_gflops):
    """The least time (ms) a kernel needs, by the roofline model."""
    time_ms = 0.0
    # FILL ME IN (roughly 3 lines): the time the bytes need, the time the flops need, and which one wins
    memory_ms = nbytes / (bandwidth_gbs * 1e9) * 1e3
    compute_ms = flops / (peak_gflops * 1e9) * 1e3
    time_ms = max(memory_ms, compute_ms)
    return time_ms


def ridge_fma_count(bandwidth_gbs, peak_gflops, itemsize):
    """FMAs per element at which fma_per_element stops being memory bound."""
    count = 0.0
    # FILL ME IN (roughly 2 lines): the machine balance, then the FMA count whose intensity equals it
    balance = peak_gflops / bandwidth_gbs  # FLOP per byte
    count = balance * itemsize  # intensity = 2 * count flops / (2 * itemsize) bytes
    return count


@cuda.jit
def read_sum(x, out):
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    i = t
    acc = float32(0)
    # FILL ME IN (roughly 3 lines): add x[i], x[i + stride], x[i + 2 * stride], ... to acc
    while i < x.size:
        acc += x[i]
        i += stride
    if t < out.size:
        out[t] = acc


def choose_threads():
    """Threads per block for read_sum (a power of two, 32 to 1024)."""
    # I = 1/4 flop/byte is far left of the ridge: memory bound; 256 threads fill every SM with one wave.
    return 256


def roofline_time_bug(flops, nbytes, bandwidth_gbs, peak_gflops):
    """The roofline's lower bound on a kernel's time, in ms: find the bug (fix it by adding lines)."""
    seconds = nbytes / (bandwidth_gbs * 1e9)
    seconds = max(seconds, flops / (peak_gflops * 1e9))  # the compute roof bounds it too
    return seconds * 1e3
