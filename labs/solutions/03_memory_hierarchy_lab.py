"""Solutions of labs/03_memory_hierarchy_lab.ipynb (kept out of the package: Colab users do not get them).

Every function keeps each line of its skeleton in the lab, in order; solving only adds lines.
"""

import labhelpers as lh  # noqa: F401  (first: it chooses GPU or simulator before numba.cuda is imported)
import numpy as np
from numba import cuda, float32

from labhelpers.exercises.memory import TILE, TILE_ROWS


def warp_byte_addresses(offset, stride, itemsize):
    """Specification used by exercise 1: byte address of the element each of the 32 threads loads."""
    t = np.arange(32)
    return (offset + t * stride) * itemsize


# Exercise 1
def sectors_per_request(offset, stride, itemsize):
    """32-byte sectors touched when the 32 threads of a warp load a[offset + t * stride]."""
    addresses = warp_byte_addresses(offset, stride, itemsize)
    # FILL ME IN (roughly 2 lines): the number of distinct 32-byte sectors among these addresses
    sectors = {int(address) // 32 for address in addresses}
    return len(sectors)


# Exercise 2
def conflict_degree(words):
    """Passes one warp request needs when thread t reads the 4-byte word number words[t] of shared memory."""
    words = np.asarray(words)
    bank = words % 32
    # FILL ME IN (roughly 4 lines): the most DISTINCT words that any single bank has to deliver
    degree = 1
    for b in range(32):
        degree = max(degree, len(set(words[bank == b].tolist())))
    return degree


# Exercise 3
def make_chain(slots, rng):
    """next_slot for pointer chasing: one cycle through all slots, visited in a random order."""
    order = rng.permutation(slots)  # the order in which the walk visits the slots
    next_slot = np.zeros(slots, dtype=np.int64)
    # FILL ME IN (roughly 2 lines): slot order[k] points to order[k + 1], and the last slot back to order[0]
    next_slot[order[:-1]] = order[1:]
    next_slot[order[-1]] = order[0]
    return next_slot


# Exercise 4
@cuda.jit
def transpose_tiled(a, out):
    """out[c, r] = a[r, c] through a shared-memory tile, so that reads and writes are both coalesced."""
    # FILL ME IN (1 line): the TILE x TILE shared tile, padded so that reading one of its columns is conflict-free
    tile = cuda.shared.array(shape=(TILE, 33), dtype=float32)  # one word of padding per row: TILE + 1 = 33
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx  # the column of `a` this thread reads
    row = cuda.blockIdx.y * TILE + ty  # the first row of `a` it reads; then row + 8, row + 16, row + 24
    # FILL ME IN (roughly 3 lines): copy a[row + k, col] into tile[ty + k, tx] for k = 0, 8, 16, 24 (in bounds only)
    for k in range(0, TILE, TILE_ROWS):
        if row + k < a.shape[0] and col < a.shape[1]:
            tile[ty + k, tx] = a[row + k, col]
    cuda.syncthreads()  # RAW: each thread is about to read tile elements that other threads wrote
    # FILL ME IN (roughly 5 lines): write the tile back transposed, consecutive tx to consecutive addresses of out
    out_col = cuda.blockIdx.y * TILE + tx  # the column of `out` this thread writes (a row of `a`)
    out_row = cuda.blockIdx.x * TILE + ty  # the first row of `out` it writes (a column of `a`)
    for k in range(0, TILE, TILE_ROWS):
        if out_row + k < out.shape[0] and out_col < out.shape[1]:
            out[out_row + k, out_col] = tile[tx, ty + k]


@cuda.jit
def transpose_tiled_bug(a, out):
    """out[c, r] = a[r, c] through a padded shared tile: find the bug (fix it by adding a line)."""
    tile = cuda.shared.array(shape=(TILE, 33), dtype=float32)  # TILE + 1: Numba wants a constant
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, TILE, TILE_ROWS):
        r, c = cuda.blockIdx.y * TILE + ty + k, cuda.blockIdx.x * TILE + tx
        if r < a.shape[0] and c < a.shape[1]:
            tile[ty + k, tx] = a[r, c]
    cuda.syncthreads()  # RAW: the whole tile is written before anyone reads another thread's element
    for k in range(0, TILE, TILE_ROWS):
        r, c = cuda.blockIdx.x * TILE + ty + k, cuda.blockIdx.y * TILE + tx
        if r < out.shape[0] and c < out.shape[1]:
            out[r, c] = tile[tx, ty + k]


def predict_transpose_ms(rows, cols, itemsize, copy_gbs):
    """The least time of a transpose, in ms: the bytes it moves over the copy ceiling."""
    # FILL ME IN (roughly 2 lines): bytes moved (read once, written once), then ms at copy_gbs
    nbytes = 2 * rows * cols * itemsize
    return nbytes / (copy_gbs * 1e9) * 1e3
