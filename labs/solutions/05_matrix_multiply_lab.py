"""Solutions of lab 5, "Matrix multiplication". Each function keeps every line of its skeleton and only adds lines."""

import labhelpers as lh  # noqa: F401  (chooses the backend before numba.cuda is imported)
from numba import cuda, float32

TILE = 8


@cuda.jit
def matmul_naive_kernel(A, B, C):
    """C = A @ B with one thread per element of C: x along the columns of C, y along its rows."""
    # FILL ME IN (roughly 7 lines)
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0)
        for p in range(A.shape[1]):
            acc += A[row, p] * B[p, col]
        C[row, col] = acc


@cuda.jit
def matmul_tiled_kernel(A, B, C):
    """C = A @ B for n x n matrices, any n, with TILE x TILE tiles in shared memory."""
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    n = C.shape[0]
    acc = float32(0)
    for k0 in range(0, n, TILE):
        # FILL ME IN (roughly 12 lines): load one element of each tile (0 outside the matrix),
        # wait (RAW), add this phase's TILE products to acc, wait again (WAR)
        a = float32(0)
        if row < n and k0 + tx < n:
            a = A[row, k0 + tx]
        As[ty, tx] = a
        b = float32(0)
        if k0 + ty < n and col < n:
            b = B[k0 + ty, col]
        Bs[ty, tx] = b
        cuda.syncthreads()  # RAW: the tiles are complete before anyone reads them
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()  # WAR: nobody overwrites the tiles while others still read them
    # FILL ME IN (roughly 2 lines): write acc if (row, col) is inside C
    if row < n and col < n:
        C[row, col] = acc


@cuda.jit
def matmul_rect_kernel(A, B, C):
    """C = A @ B for an m x k matrix A and a k x n matrix B, with TILE x TILE tiles in shared memory."""
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    # FILL ME IN (roughly 19 lines): the three sizes, the loop over phases, the write
    m, k = A.shape
    n = B.shape[1]
    acc = float32(0)
    for k0 in range(0, k, TILE):
        a = float32(0)
        if row < m and k0 + tx < k:
            a = A[row, k0 + tx]
        As[ty, tx] = a
        b = float32(0)
        if k0 + ty < k and col < n:
            b = B[k0 + ty, col]
        Bs[ty, tx] = b
        cuda.syncthreads()  # RAW
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()  # WAR
    if row < m and col < n:
        C[row, col] = acc


@cuda.jit
def matmul_tiled_fixed(A, B, C):
    """The racy kernel of exercise 4, repaired: C = A @ B for any shapes."""
    # FILL ME IN (1 line): a barrier is missing somewhere below; add it where it belongs
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    m, k = A.shape
    n = B.shape[1]
    acc = float32(0)
    for k0 in range(0, k, TILE):
        a = float32(0)
        if row < m and k0 + tx < k:
            a = A[row, k0 + tx]
        As[ty, tx] = a
        b = float32(0)
        if k0 + ty < k and col < n:
            b = B[k0 + ty, col]
        Bs[ty, tx] = b
        cuda.syncthreads()
        for kk in range(TILE):
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()  # WAR: the next phase's stores wait until every thread has read this phase's tiles
    if row < m and col < n:
        C[row, col] = acc


def missing_barrier_hazard():
    """Which hazard did the racy kernel's missing barrier allow: "RAW", "WAR" or "WAW"?"""
    answer = None
    # FILL ME IN (1 line): answer = "..."
    answer = "WAR"
    return answer


def predict_load_bytes(n, tile, itemsize):
    """Bytes loaded from global memory by an n x n product with tile x tile tiles (tile 1: the naive kernel)."""
    # FILL ME IN (roughly 2 lines): elements loaded (n**2 outputs, 2 * n inputs each, one load per tile uses), then bytes
    elements = 2 * n**3 / tile
    return elements * itemsize
