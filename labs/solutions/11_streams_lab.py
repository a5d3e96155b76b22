"""Solutions of labs/11_streams_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import numpy as np

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
from numba import cuda

from labhelpers.exercises.streams import LAB_ITERS
from labhelpers.kernels.streams import A, B, fma_chain

THREADS = 128


def make_buffers(n):
    h_in = h_out = None
    # FILL ME IN (roughly 2 lines): two page-locked float32 arrays of n elements
    h_in = cuda.pinned_array(n, dtype=np.float32)
    h_out = cuda.pinned_array(n, dtype=np.float32)
    return h_in, h_out


def chunked_pipeline(h_in, h_out, chunks, streams):
    n = h_in.size
    d_in = cuda.device_array(n, dtype=np.float32)
    d_out = cuda.device_array(n, dtype=np.float32)
    pool = [cuda.stream() for _ in range(streams)]
    for c in range(chunks):
        s = pool[c % streams]
        # FILL ME IN (roughly 5 lines): this chunk's lo, hi (any n), then H2D, kernel, D2H on stream s
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        d_in[lo:hi].copy_to_device(h_in[lo:hi], stream=s)
        blocks = (hi - lo + THREADS - 1) // THREADS
        fma_chain[blocks, THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)
        d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)
    for s in pool:
        s.synchronize()


def predict_ms(h2d_ms, kernel_ms, d2h_ms, chunks):
    slowest = max(h2d_ms, kernel_ms, d2h_ms)
    # FILL ME IN (roughly 1 line): the slowest stage back to back; the other two show while filling and draining
    return slowest + (h2d_ms + kernel_ms + d2h_ms - slowest) / chunks


def fixed_pipeline(x, chunks, streams):
    n = x.size
    # FILL ME IN (roughly 4 lines): h_in, h_out page-locked, d_in, d_out on the device: once, before the loop
    h_in = cuda.pinned_array(n, dtype=np.float32)
    h_out = cuda.pinned_array(n, dtype=np.float32)
    d_in = cuda.device_array(n, dtype=np.float32)
    d_out = cuda.device_array(n, dtype=np.float32)
    h_in[:] = x
    pool = [cuda.stream() for _ in range(streams)]
    for c in range(chunks):
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        s = pool[c % streams]
        d_in[lo:hi].copy_to_device(h_in[lo:hi], stream=s)
        fma_chain[(hi - lo + THREADS - 1) // THREADS, THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)
        d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)
    # FILL ME IN (roughly 2 lines): wait for the work of every stream, once, after the loop
    for s in pool:
        s.synchronize()
    return h_out


def choose_chunks_streams():
    """(chunks, streams) for chunked_pipeline. Prediction: ..."""
    # predict_ms flattens past about 8 chunks; 3 streams keep H2D, kernel and D2H of three chunks in flight.
    return (8, 3)



def kernels_at_once(streams, connections):
    kernels = 2 * streams
    # FILL ME IN (roughly 2 lines): the busiest queue sets the wall time, in kernel durations
    busiest = (streams + connections - 1) // connections  # streams on the busiest queue: m + 1 kernel times
    return kernels / (busiest + 1)

def pipeline_bug(h_in, h_out, chunks, streams):
    """h_out = fma_chain(h_in) in chunks, copies and kernels overlapped on streams: find the bug (add lines)."""
    n = h_in.size
    d_in = cuda.device_array(n, dtype=np.float32)
    d_out = cuda.device_array(n, dtype=np.float32)
    pool = [cuda.stream() for _ in range(streams)]
    size = n // chunks
    for c in range(chunks):
        s = pool[c % streams]
        lo, hi = c * size, (c + 1) * size
        if c == chunks - 1:  # the last chunk takes the remainder: chunks need not divide n
            hi = n
        d_in[lo:hi].copy_to_device(h_in[lo:hi], stream=s)
        fma_chain[max(1, (hi - lo + THREADS - 1) // THREADS), THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)
        d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)
    for s in pool:
        s.synchronize()
