"""Chapter "Profiling and the roofline", section 2, the stopwatch: the kernel the chapter times with four clocks.

* :func:`copy`: ``out[i] = x[i]``, one element per thread, guarded; :func:`copy_bytes`, the bytes it moves.

Nothing here times anything: :mod:`labhelpers.experiments.roofline_stopwatch` does (with :mod:`labhelpers.timing`,
whose own kernels, the sleeper and the L2 flush, are in :mod:`labhelpers.timing_kernels`).
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def copy(x, out):
    """``out[i] = x[i]``: one element per thread, guarded."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


def copy_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes :func:`copy` moves through device memory for ``n`` elements: each is read once and written once."""
    return 2 * n * itemsize
