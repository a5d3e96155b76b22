"""Candidate SAXPY kernels for the copy ceiling: unsigned indices, 16-byte accesses, a grid-stride loop.

The book's :func:`labhelpers.kernels.cuda_intro.saxpy` (one element per thread, 4-byte accesses, Numba's signed
indexing) reaches about 0.80 of a device-to-device copy on an H200. These kernels try what the field does to close
the gap; ``bench/tuning/stencil.py`` times them beside the copy and the book's kernel. The winner, ``vec4`` at one
group of four per thread (1.03 of CuPy's copy, November 2026), became the chapter's second SAXPY: it lives in
:mod:`labhelpers.kernels.cuda_intro` (:func:`~labhelpers.kernels.cuda_intro.saxpy_vec4`) and is re-exported here
for the sweep; the others stay candidates.

==========================  ============================================================================
 kernel                      what it changes
==========================  ============================================================================
 :func:`saxpy_flat`          one element per thread, the index unsigned 64-bit (no negative-index checks)
 :func:`saxpy_vec4`          a grid-stride loop over groups of four: one 16-byte load of x, one of y and
                             one 16-byte store per group (``load4``/``store4``), a scalar tail for n % 4
                             (the chapter's kernel, :mod:`labhelpers.kernels.cuda_intro`)
 :func:`saxpy_vec4x2`        the same, two groups per trip: four 16-byte loads in flight before a store
==========================  ============================================================================

All of them compute ``out[i] = a * x[i] + y[i]`` in float32; on a GPU the compiler contracts that into one
fused multiply-add, exactly as it does for the book's kernel, so on a GPU they agree with it bit for bit (and
with :func:`~labhelpers.kernels.cuda_intro.saxpy_numpy`, which rounds twice, to one unit in the last place).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import backend, validate
from ..arrays import to_device, to_host
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import ConfiguredKernel, blocks_for
from .cuda_intro import FOUR, aligned16, saxpy_vec4  # the chapter's vectorised SAXPY: its one home
from .scan.tiled import load4, store4  # the repository's 16-byte accesses (ld.global.v4 / st.global.v4)
#: Threads per block the wrappers use unless told otherwise.
THREADS = 256
#: Waves of resident blocks in the grid-stride kernels' default grid (every SM full, several times over).
WAVES = 4


@cuda.jit
def saxpy_flat(a, x, y, out):
    """:func:`~labhelpers.kernels.cuda_intro.saxpy` with an unsigned 64-bit index.

    Change: ``i`` is a ``uint64``. Numba indexes with signed integers and, for each access, adds ``size`` to a
    negative index (Python's wraparound): a shift, an ``and`` and an add per access, plus the signed 64-bit
    multiply of the grid index. An unsigned index cannot be negative, so those instructions go. Why: the book's
    kernel spends about 36 PTX instructions on one element whose three accesses are the only real work.
    """
    i = np.uint64(cuda.grid(1))
    if i < np.uint64(out.size):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_vec4x2(a, x, y, out):
    """:func:`saxpy_vec4` with two groups per trip of the loop: four 16-byte loads in flight before a store.

    Change: a trip handles groups ``g`` and ``g + stride`` (each warp-wide access still contiguous) and issues
    all four loads before the first store. Why: the compiler may not move a load above a store (it cannot know
    that ``out`` does not overlap ``x``), so the loads of one trip are all a thread has in flight; twice the bytes
    per thread keeps the memory system as busy with half the resident warps (more registers per thread, or a
    smaller grid, still fill the pipe). The fewer-than-two groups left at the end go through a one-group loop.
    """
    n = np.uint64(out.size)
    groups = n // FOUR
    stride = np.uint64(cuda.gridsize(1))
    s2 = stride + stride
    t = np.uint64(cuda.grid(1))
    g = t
    while g + stride < groups:
        x0, x1, x2, x3 = load4(x, g)
        y0, y1, y2, y3 = load4(y, g)
        p0, p1, p2, p3 = load4(x, g + stride)
        q0, q1, q2, q3 = load4(y, g + stride)
        store4(out, g, a * x0 + y0, a * x1 + y1, a * x2 + y2, a * x3 + y3)
        store4(out, g + stride, a * p0 + q0, a * p1 + q1, a * p2 + q2, a * p3 + q3)
        g += s2
    while g < groups:
        x0, x1, x2, x3 = load4(x, g)
        y0, y1, y2, y3 = load4(y, g)
        store4(out, g, a * x0 + y0, a * x1 + y1, a * x2 + y2, a * x3 + y3)
        g += stride
    i = groups * FOUR + t
    if i < n:
        out[i] = a * x[i] + y[i]


SAXPY_CANDIDATES = {"flat": saxpy_flat, "vec4": saxpy_vec4, "vec4x2": saxpy_vec4x2}
#: Elements one thread handles per trip of the grid-stride loop (the default grid is sized from it).
ELEMENTS_PER_TRIP = {"flat": 1, "vec4": 4, "vec4x2": 8}


def saxpy_grid(variant: str, n: int, threads: int = THREADS, blocks: int | None = None) -> int:
    """Blocks of a launch of ``variant`` on ``n`` elements: one thread per element for ``flat``; for the
    grid-stride kernels ``blocks`` if given, else :data:`WAVES` waves of resident blocks on this GPU (no more
    than the elements need; 2 under the simulator, so that its runs stay short and still walk the loop), and
    never fewer threads than the ``n % 4`` elements of the scalar tail."""
    validate.choice(variant, "variant", list(SAXPY_CANDIDATES))
    threads = validate.threads_per_block(threads)
    n = validate.integer(n, "n", minimum=0)
    need = blocks_for(n, threads, ELEMENTS_PER_TRIP[variant])
    if variant == "flat":
        if blocks is not None:
            raise LaunchConfigError("saxpy_flat runs one thread per element: leave blocks=None "
                                     "(or choose variant='vec4' / 'vec4x2', whose grid-stride loop takes any grid).")
        return need
    tail = blocks_for(n % 4, threads)  # the tail's threads are the grid's first n % 4
    if blocks is not None:
        return max(tail, validate.integer(blocks, "blocks", minimum=1, maximum=2**31 - 1))
    if backend.is_simulator():
        return max(tail, min(need, 2))
    from ..device import device_info  # the driver's SM counts: only on a GPU

    info = device_info()
    return max(1, tail, min(need, (info.sm_count or 1) * info.resident_blocks(threads) * WAVES))


def run_saxpy_candidate(a: float, x, y, variant: str = "vec4", threads: int = THREADS,
                        blocks: int | None = None) -> np.ndarray:
    """Launch the candidate ``variant`` on float32 vectors and return ``a * x + y`` as a NumPy array.

    Args:
        a: the scalar (converted to float32).
        x, y: equal-length, 1-D, C-contiguous float32 arrays (NumPy, CuPy or Numba device arrays); device
            arrays must start on a 16-byte boundary for ``vec4``/``vec4x2`` (a fresh allocation does).
        variant: ``flat``, ``vec4`` or ``vec4x2``.
        threads: threads per block, 1..1024.
        blocks: the grid of a grid-stride kernel (default: a few waves of resident blocks); not for ``flat``.

    Raises:
        ArgumentError: a wrong dtype, shape, layout, alignment, variant or launch (the message says what to change).
    """
    validate.choice(variant, "variant", list(SAXPY_CANDIDATES))
    validate.array(x, "x", dtype=np.float32, ndim=1)
    validate.array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    if variant != "flat":
        for name, arr in (("x", x), ("y", y)):
            if not aligned16(arr):
                raise ArrayArgumentError(
                    f"{name} is a device array whose data does not start on a 16-byte boundary (a sliced view?): "
                    f"variant={variant!r} reads it 16 bytes at a time. Pass a copy ({name}.copy()) or use "
                    "variant='flat'.")
    n = int(x.shape[0])
    grid = saxpy_grid(variant, n, threads, blocks)
    x_d, y_d = to_device(x), to_device(y)
    out = cuda.device_array(n, dtype=np.float32)
    ConfiguredKernel(SAXPY_CANDIDATES[variant], grid, threads)(np.float32(a), x_d, y_d, out)
    return to_host(out)


__all__ = ["ELEMENTS_PER_TRIP", "SAXPY_CANDIDATES", "THREADS", "WAVES", "aligned16", "run_saxpy_candidate",
           "saxpy_flat", "saxpy_grid", "saxpy_vec4", "saxpy_vec4x2"]
