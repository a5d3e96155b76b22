"""Chapter "Matrix multiplication", the CPU side: the same three loops in three orders.

All three compute ``C = A @ B`` for row-major float32 matrices, compiled for the CPU with
Numba's ``njit`` (real CPU timings on any machine, the simulator has nothing to do with them):

* :func:`matmul_ijk`: the textbook order. The innermost loop walks down a *column* of ``B``:
  consecutive iterations touch addresses ``n * 4`` bytes apart, a new cache line each time.
* :func:`matmul_ikj`: the two inner loops swapped. The innermost loop now walks along a *row* of
  ``B`` and of ``C``: consecutive addresses, whole cache lines used, and the compiler can use
  SIMD instructions. Same arithmetic, several times faster once the matrices outgrow the cache
  (Böhm, *Fast Multidimensional Matrix Multiplication on CPU from Scratch*, 2022, measured 16x).
* :func:`matmul_blocked`: ``ikj`` over ``block x block`` blocks of ``B``, each kept in cache while
  every row of ``A`` uses it: the CPU version of the GPU's shared-memory tiles. It pays off once
  ``B`` no longer fits in the caches.

:func:`cpu_matmul` validates the arguments and runs one of them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import validate
from ..errors import ArrayArgumentError

#: The loop orders, by name.
ORDERS: tuple[str, ...] = ("ijk", "ikj", "blocked")
#: Default edge of the blocks of :func:`matmul_blocked`: a 128 x 128 float32 block of B is 64 KiB (L2 holds it).
DEFAULT_BLOCK = 128


@njit(cache=False)
def matmul_ijk(A, B, C):
    """``C = A @ B`` with the loops in the order i, j, k: a dot product per element, ``B`` read down a column."""
    m, k = A.shape
    n = B.shape[1]
    for i in range(m):
        for j in range(n):
            acc = np.float32(0)
            for p in range(k):
                acc += A[i, p] * B[p, j]  # B[p, j], B[p + 1, j]: n * 4 bytes apart
            C[i, j] = acc


@njit(cache=False)
def matmul_ikj(A, B, C):
    """``C = A @ B`` with the loops in the order i, k, j: ``C``'s row i gets ``A[i, p]`` times ``B``'s row p."""
    m, k = A.shape
    n = B.shape[1]
    C[:, :] = 0
    for i in range(m):
        for p in range(k):
            a = A[i, p]
            for j in range(n):
                C[i, j] += a * B[p, j]  # B[p, j], B[p, j + 1]: adjacent, and independent across j (SIMD)


@njit(cache=False)
def matmul_blocked(A, B, C, block):
    """``C = A @ B`` by blocks of ``B``: each ``block x block`` block stays in cache while every row of ``A`` uses it.

    Inside a block the order is ``ikj`` again. The inner loop runs over slices (views, no copies)
    so that its index starts at 0: Numba then knows it is never negative, drops its
    negative-index check and the loop compiles to SIMD instructions.
    """
    m, k = A.shape
    n = B.shape[1]
    C[:, :] = 0
    for p0 in range(0, k, block):
        for j0 in range(0, n, block):
            for i in range(m):
                c = C[i, j0:j0 + block]  # this row's part of the block column (the slice stops at the edge)
                for p in range(p0, min(p0 + block, k)):
                    a = A[i, p]
                    b = B[p, j0:j0 + block]
                    for j in range(c.shape[0]):
                        c[j] += a * b[j]


def cpu_matmul(a: np.ndarray, b: np.ndarray, *, order: str = "ikj", block: int = DEFAULT_BLOCK) -> np.ndarray:
    """``a @ b`` on the CPU with the loop order ``order`` (``"ijk"``, ``"ikj"`` or ``"blocked"``).

    Raises:
        ArrayArgumentError: not 2D float32 C-contiguous NumPy arrays, or inner dimensions that differ.
        ValueError: an unknown order or a block smaller than 1.
    """
    if order not in ORDERS:
        raise ValueError(f"unknown loop order {order!r}: choose one of {', '.join(ORDERS)}")
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise ArrayArgumentError(f"{name} must be a NumPy array (these loops run on the CPU), got "
                                     f"{type(x).__name__}")
        validate.array(x, name, dtype=np.float32, ndim=2)
    if a.shape[1] != b.shape[0]:
        raise ArrayArgumentError(f"inner dimensions differ: a is {a.shape[0]} x {a.shape[1]} and b is "
                                 f"{b.shape[0]} x {b.shape[1]}; a's columns must equal b's rows")
    c = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    if order == "ijk":
        matmul_ijk(a, b, c)
    elif order == "ikj":
        matmul_ikj(a, b, c)
    else:
        matmul_blocked(a, b, c, block)
    return c
