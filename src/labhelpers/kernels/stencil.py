"""Chapter "Stencils, halos and connected components": the kernels, their host wrappers, NumPy references.

A stencil computes every output point from a fixed neighbourhood of input points. The chapter's
kernels, in order:

=================================  =========================================================================
 kernel                             lesson
=================================  =========================================================================
 ``stencil1d_global``               1D, radius R: one thread per output, 2R+1 reads from device memory
 ``stencil1d_shared``               a shared tile of ``blockDim + 2R`` values: the halo loaded by R threads
 ``stencil1d_shared_any_radius``    the tile loaded by a block-stride loop: any radius, any block size
 ``stencil1d_no_barrier``           PITFALL: the tile read before the other threads wrote it (a race)
 ``stencil1d_local_halo``           PITFALL: the halo loaded from the *local* index (block 0's data)
 ``stencil1d_global_index``         PITFALL: the tile indexed with the *global* index (out of bounds)
 ``jacobi_naive``                   2D 5-point Jacobi step, one thread per point, 5 reads per point
 ``jacobi_shared``                  the same with a shared tile and its halo
 ``jacobi_marching``                register blocking along y: a thread keeps a column strip in registers
 ``jacobi_vec4_march``              fewer instructions per point: flat offsets, 16-byte accesses, 4 x 8 points
 ``filter3x3`` / ``sobel_magnitude``  image filters with clamped borders (``scipy.ndimage``'s "nearest")
 ``stencil3d_naive`` / ``stencil3d_marching``  3D 7-point step; the marching one walks planes along z
 ``stencil3d_march_vec4``           marching planes without a tile or a barrier: z in registers, 16-byte loads
 (connected components)            in :mod:`labhelpers.kernels.stencil_labelling`, the chapter's second half
=================================  =========================================================================

Conventions: images and grids are C-contiguous 2-D arrays indexed ``[row, column]`` = ``[i, j]``; a 2-D
launch puts ``x`` along columns (coalesced) and ``y`` along rows. Outside an array a 1D stencil reads 0;
the Jacobi step keeps the border points fixed (Dirichlet boundary: every step copies them); the 3x3 image
filters clamp indices to the image, which for a radius of 1 is what ``scipy.ndimage`` calls both
``mode="nearest"`` and its default ``mode="reflect"``. Connected components use 4-connectivity (left, right,
up, down) and label every component with 1 + the flat index ``i * nx + j`` of its first pixel in raster
order (background 0), so both algorithms give identical arrays, and ``stencil_labelling.relabel_sequential`` turns
them into ``scipy.ndimage.label``'s numbering.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda, float32

from .. import backend, validate
from ..launch import ConfiguredKernel, blocks_for, grid_2d
from ..arrays import to_device
from ..errors import ArrayArgumentError, LaunchConfigError
from .scan.tiled import load4, store4  # 16-byte accesses (ld.global.v4 / st.global.v4)

# ---------------------------------------------------------------------------------------------
# Sizes that shared arrays and register strips are built with (compile-time constants)
# ---------------------------------------------------------------------------------------------

#: Largest radius of the 1D shared-memory stencils (the tile has room for ``blockDim + 2 * MAX_RADIUS``).
MAX_RADIUS = 16
#: Largest 1D block.
MAX_THREADS = 1024
#: Words in the 1D tile: a block of 1024 threads with a halo of 16 on each side.
TILE_1D = MAX_THREADS + 2 * MAX_RADIUS
#: Largest block of :func:`jacobi_shared` (x, y): the tile is ``(SH_Y + 2) x (SH_X + 2)`` floats.
SH_X, SH_Y = 32, 8
#: The shared tile of :func:`jacobi_shared`, halo included (module constants: a shared array's shape must be one).
TILE_Y, TILE_X = SH_Y + 2, SH_X + 2
#: Rows each thread of :func:`jacobi_marching` computes (its strip is kept in registers).
ROWS = 8
#: The column strip a :func:`jacobi_marching` thread loads: its rows and the one above and below.
STRIP = ROWS + 2
#: Default 2D block for one-thread-per-point kernels: 32 columns (a warp along a row) by 8 rows.
BLOCK_2D = (32, 8)
#: Default block of :func:`jacobi_marching`: 128 columns, one strip of ``ROWS`` rows per thread.
MARCH_BLOCK = (128, 1)
#: The Jacobi weight, a float32 constant (a Python 0.25 would make the arithmetic float64).
QUARTER = np.float32(0.25)
TWO = np.float32(2.0)
#: The seed's 1D stencil: radius 3, blocks of 16 threads (the pitfall kernels' fixed sizes).
SEED_RADIUS = 3
SEED_BLOCK = 16
SEED_TILE = SEED_BLOCK + 2 * SEED_RADIUS

#: 3x3 weights of the box blur (all ninths) and of the lecture's binomial blur (1/16, 1/8, 1/4).
BOX_WEIGHTS = np.full((3, 3), 1.0 / 9.0, dtype=np.float32)
BINOMIAL_WEIGHTS = (np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0]) / 16.0).astype(np.float32)
#: Sobel's derivative along x (columns, axis 1), as a correlation (the lecture's G_x flipped: same magnitude).
SOBEL_X = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=np.float32)
SOBEL_Y = SOBEL_X.T.copy()


# ---------------------------------------------------------------------------------------------
# 1D stencil of radius R: out[i] = x[i-R] + ... + x[i+R], zero outside the array
# ---------------------------------------------------------------------------------------------


@cuda.jit
def stencil1d_global(x, out, radius):
    """One thread per output: the 2R+1 inputs come straight from device memory.

    Neighbouring threads read overlapping windows, so every input is read 2R+1 times (the
    caches catch most of that, but not all of it, and not for free).
    """
    i = cuda.grid(1)
    if i < x.size:
        acc = float32(0)
        for k in range(i - radius, i + radius + 1):
            if k >= 0 and k < x.size:  # zero outside the array: no padded input needed
                acc += x[k]
        out[i] = acc


@cuda.jit
def stencil1d_shared(x, out, radius):
    """A shared tile of ``blockDim + 2R`` values, each read once from device memory (needs R <= blockDim).

    Every thread loads its own element into ``s[tid + R]``; the first R threads also load the
    left halo ``s[0:R]`` and the right halo ``s[R + blockDim:]``. Loads outside the array store 0,
    and so does a thread past the end (the last block may be partly empty): every thread still
    reaches the barrier.
    """
    s = cuda.shared.array(TILE_1D, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    start = cuda.blockIdx.x * cuda.blockDim.x  # global index of the block's first element
    s[tid + radius] = x[i] if i < x.size else float32(0)
    if tid < radius:
        left = start - radius + tid  # the halo comes from the GLOBAL index
        s[tid] = x[left] if left >= 0 else float32(0)
        right = start + cuda.blockDim.x + tid
        s[tid + radius + cuda.blockDim.x] = x[right] if right < x.size else float32(0)
    cuda.syncthreads()  # RAW: the halo (written by other threads) is in the tile before anyone reads it
    if i < x.size:
        acc = float32(0)
        for k in range(2 * radius + 1):
            acc += s[tid + k]
        out[i] = acc


@cuda.jit
def stencil1d_shared_any_radius(x, out, radius):
    """The tile loaded by a block-stride loop: correct for any radius <= MAX_RADIUS and any block size.

    Thread ``tid`` loads tile words ``tid, tid + blockDim, ...``: consecutive threads load
    consecutive words (coalesced), each word is loaded by exactly one thread, and a radius
    larger than the block (where ``if tid < R`` would run out of threads) needs no special case.
    """
    s = cuda.shared.array(TILE_1D, float32)
    tid = cuda.threadIdx.x
    width = cuda.blockDim.x + 2 * radius
    first = cuda.blockIdx.x * cuda.blockDim.x - radius  # global index of tile word 0
    w = tid
    while w < width:
        g = first + w
        s[w] = x[g] if g >= 0 and g < x.size else float32(0)
        w += cuda.blockDim.x
    cuda.syncthreads()  # RAW: the whole tile is loaded before anyone reads a neighbour's word
    i = cuda.grid(1)
    if i < x.size:
        acc = float32(0)
        for k in range(2 * radius + 1):
            acc += s[tid + k]
        out[i] = acc


@cuda.jit
def stencil1d_no_barrier(x, out, radius):
    """PITFALL (do not use): :func:`stencil1d_shared` without the barrier: a read-after-write race.

    Thread ``tid`` reads ``s[tid .. tid + 2R]``, words that threads ``tid - R .. tid + R`` (and
    the halo loaders 0..R-1) write. Nothing makes it wait for them: it may read a word before
    its writer has run, and get whatever the shared memory held before.
    """
    s = cuda.shared.array(TILE_1D, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    start = cuda.blockIdx.x * cuda.blockDim.x
    s[tid + radius] = x[i] if i < x.size else float32(0)
    if tid < radius:
        left = start - radius + tid
        s[tid] = x[left] if left >= 0 else float32(0)
        right = start + cuda.blockDim.x + tid
        s[tid + radius + cuda.blockDim.x] = x[right] if right < x.size else float32(0)
    # (no cuda.syncthreads() here: that is the bug)
    if i < x.size:
        acc = float32(0)
        for k in range(2 * radius + 1):
            acc += s[tid + k]
        out[i] = acc


@cuda.jit
def stencil1d_local_halo(x, out, radius):
    """PITFALL (do not use): the halo loaded from the LOCAL index, as one version of the lecture does.

    ``x[tid - R]`` and ``x[tid + blockDim]`` are the same addresses in every block: each block's
    halo is block 0's, so the first and last R outputs of every later block are wrong.
    """
    s = cuda.shared.array(TILE_1D, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid + radius] = x[i] if i < x.size else float32(0)
    if tid < radius:
        left = tid - radius  # WRONG: a local index used as a global one
        s[tid] = x[left] if left >= 0 else float32(0)
        right = cuda.blockDim.x + tid  # WRONG: the same for every block
        s[tid + radius + cuda.blockDim.x] = x[right] if right < x.size else float32(0)
    cuda.syncthreads()  # RAW: the halo is in the tile before anyone reads it
    if i < x.size:
        acc = float32(0)
        for k in range(2 * radius + 1):
            acc += s[tid + k]
        out[i] = acc


@cuda.jit
def stencil1d_global_index(x, out):
    """PITFALL (do not use): the tile indexed with the GLOBAL index, radius 3, blocks of 16 (the lecture's sizes).

    The tile has ``16 + 2*3 = 22`` words, but thread ``tid`` of block ``b`` writes word
    ``16 b + tid``: from block 1 on that is past the end of the tile. The simulator stops at
    the first such store (IndexError); a GPU writes somewhere in shared memory, or faults.
    """
    s = cuda.shared.array(SEED_TILE, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[i] = x[i] if i < x.size else float32(0)  # WRONG: global index into a block-sized tile
    cuda.syncthreads()  # RAW: the tile is complete before anyone reads it
    if i < x.size:
        acc = float32(0)
        for k in range(2 * SEED_RADIUS + 1):
            acc += s[tid + k]
        out[i] = acc


STENCIL1D = {
    "global": stencil1d_global,
    "shared": stencil1d_shared,
    "any_radius": stencil1d_shared_any_radius,
    "no_barrier": stencil1d_no_barrier,
    "local_halo": stencil1d_local_halo,
}


def stencil1d_reference(x, radius: int) -> np.ndarray:
    """NumPy specification: ``out[i] = sum(x[i-R : i+R+1])`` with zeros outside, accumulated in float64."""
    x = np.asarray(x, dtype=np.float64)
    radius = validate.integer(radius, "radius", minimum=0)
    padded = np.concatenate([np.zeros(radius), x, np.zeros(radius)])
    c = np.concatenate([[0.0], np.cumsum(padded)])
    return c[2 * radius + 1:] - c[:x.size]


def integer_valued(n: int, rng: np.random.Generator | None = None, low: int = -8, high: int = 8) -> np.ndarray:
    """``n`` float32 small integers: sums of a few dozen of them are exact in any order (tests use them)."""
    n = validate.integer(n, "n", minimum=0)
    rng = rng or np.random.default_rng(0)
    return rng.integers(low, high + 1, size=n).astype(np.float32)


def _check_1d(x, radius, threads, variant):
    validate.array(x, "x", dtype=np.float32, ndim=1)
    if x.shape[0] == 0:
        raise ArrayArgumentError("x is empty: a stencil needs at least one element.")
    radius = validate.integer(radius, "radius", minimum=0, maximum=MAX_RADIUS)
    threads = validate.threads_per_block(threads)
    validate.choice(variant, "variant", list(STENCIL1D))
    if variant in ("shared", "no_barrier", "local_halo") and radius > threads:
        raise LaunchConfigError(
            f"radius={radius} is larger than the block ({threads} threads): the first R threads load the halo, "
            f"so this kernel needs radius <= threads. Use more threads, or variant='any_radius'.")
    return radius, threads


def run_stencil1d(x, radius: int = 3, variant: str = "shared", threads: int = 128) -> np.ndarray:
    """Run a 1D stencil of ``radius`` on float32 ``x`` and return the output (NumPy).

    Args:
        x: 1-D C-contiguous float32 array with at least one element (NumPy, CuPy or Numba device array).
        radius: 0..MAX_RADIUS (and at most ``threads`` for the ``shared`` kernel).
        variant: ``global``, ``shared``, ``any_radius`` (or the pitfalls ``no_barrier``, ``local_halo``).
        threads: threads per block, 1..1024.

    Raises:
        ArgumentError: a wrong dtype, shape, size, radius, block size or variant (the message says what to change).
    """
    radius, threads = _check_1d(x, radius, threads, variant)
    n = int(x.shape[0])
    x_d = to_device(x)
    out = cuda.device_array(n, dtype=np.float32)
    blocks = blocks_for(n, threads)  # ceiling division: the last block may be partly empty
    STENCIL1D[variant][blocks, threads](x_d, out, np.int64(radius))
    return out.copy_to_host()


def seed_tile_indices(n: int, block: int = SEED_BLOCK, radius: int = SEED_RADIUS):
    """For the global-index pitfall: per block, the largest tile word written and the tile's size.

    Returns a list of ``(block, first word, last word, tile words)``; every block after the first
    writes past the end of its ``block + 2 * radius``-word tile.
    """
    n = validate.integer(n, "n", minimum=1)
    tile = block + 2 * radius
    rows = []
    for b in range(blocks_for(n, block)):
        rows.append((b, b * block, b * block + block - 1, tile))
    return rows


# ---------------------------------------------------------------------------------------------
# 2D heat diffusion: one Jacobi step of the 5-point stencil, border points fixed
# ---------------------------------------------------------------------------------------------


@cuda.jit
def jacobi_naive(u, v):
    """One Jacobi step: ``v`` = average of the four neighbours in ``u``; border points copied.

    One thread per point, five reads from device memory per point (four of them also read by
    neighbouring threads: the L1 and L2 caches serve most of those).
    """
    j, i = cuda.grid(2)  # x runs along a row (j, coalesced), y down the columns (i)
    ny, nx = u.shape
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            v[i, j] = u[i, j]  # Dirichlet boundary: fixed temperature
        else:
            v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))


@cuda.jit
def jacobi_shared(u, v):
    """The Jacobi step from a shared tile of ``(blockDim.y + 2) x (blockDim.x + 2)`` values (halo of 1).

    Every thread loads its own point into the tile; the first and last row of threads also load
    the halo rows above and below the block (contiguous, coalesced), the first and last column of
    threads the halo columns left and right: the "vertical halo", one float per row, each in a
    memory sector of its own. Corners are not loaded: the 5-point stencil never reads them.
    """
    tile = cuda.shared.array((TILE_Y, TILE_X), float32)
    j, i = cuda.grid(2)
    ny, nx = u.shape
    r = cuda.threadIdx.y + 1  # this thread's point in the tile
    c = cuda.threadIdx.x + 1
    inside = i < ny and j < nx
    tile[r, c] = u[i, j] if inside else float32(0)
    if cuda.threadIdx.y == 0:  # halo row above
        tile[0, c] = u[i - 1, j] if inside and i > 0 else float32(0)
    if cuda.threadIdx.y == cuda.blockDim.y - 1:  # halo row below
        tile[r + 1, c] = u[i + 1, j] if j < nx and i + 1 < ny else float32(0)
    if cuda.threadIdx.x == 0:  # halo column left (strided: one float per row)
        tile[r, 0] = u[i, j - 1] if inside and j > 0 else float32(0)
    if cuda.threadIdx.x == cuda.blockDim.x - 1:  # halo column right
        tile[r, c + 1] = u[i, j + 1] if i < ny and j + 1 < nx else float32(0)
    cuda.syncthreads()  # RAW: the halo, loaded by other threads, is in the tile before anyone reads it
    if inside:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            v[i, j] = tile[r, c]
        else:
            v[i, j] = QUARTER * ((tile[r - 1, c] + tile[r + 1, c]) + (tile[r, c - 1] + tile[r, c + 1]))


@cuda.jit
def jacobi_marching(u, v):
    """Register blocking along y: each thread computes ``ROWS`` consecutive points of one column.

    The thread first loads its column strip (``ROWS + 2`` values: each is the "down", "centre"
    and "up" neighbour of three outputs, read once) and the left and right neighbours into
    registers (small local arrays that the compiler keeps in registers once the constant-trip
    loops are unrolled), then computes and stores. Loading everything before the first store
    matters: the compiler cannot know that ``v`` does not overlap ``u``, so a load written after
    a store may not be issued before it, and fewer loads would be in flight.
    """
    col = cuda.local.array(STRIP, float32)
    left = cuda.local.array(ROWS, float32)
    right = cuda.local.array(ROWS, float32)
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    i0 = (cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y) * ROWS
    ny, nx = u.shape
    if j < nx and i0 < ny:  # (no barrier in this kernel, so threads past the end may simply do nothing)
        for r in range(STRIP):
            gi = i0 - 1 + r
            col[r] = u[gi, j] if gi >= 0 and gi < ny else float32(0)
        for r in range(ROWS):
            gi = i0 + r
            inside = gi >= 1 and gi < ny - 1 and j >= 1 and j < nx - 1
            left[r] = u[gi, j - 1] if inside else float32(0)
            right[r] = u[gi, j + 1] if inside else float32(0)
        for r in range(ROWS):
            i = i0 + r
            if i < ny:
                if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
                    v[i, j] = col[r + 1]
                else:
                    v[i, j] = QUARTER * ((col[r] + col[r + 2]) + (left[r] + right[r]))


# ---------------------------------------------------------------------------------------------
# Fewer instructions per point: one unsigned offset, 16-byte accesses, several points per thread
# ---------------------------------------------------------------------------------------------

#: Unsigned 0..4 (in Numba a ``uint64`` mixed with a plain integer literal becomes a float64).
U0, U1, U2, U3, U4 = (np.uint64(k) for k in range(5))
#: Rows of one chunk of :func:`jacobi_vec4_march` (all their loads are issued before the first store).
VEC_ROWS = 4
#: Chunks per thread in the chapter's launches: ``VEC_ROWS * VEC_CHUNKS = ROWS`` rows, as ``jacobi_marching``.
VEC_CHUNKS = ROWS // VEC_ROWS
#: The register window of :func:`jacobi_vec4_march`: ``VEC_ROWS + 2`` rows of four columns (row-major).
WINDOW = (VEC_ROWS + 2) * 4
#: Default block of :func:`jacobi_vec4_march`: 64 quads (256 columns) by 2 strips.
VEC_BLOCK = (64, 2)
#: Variants whose kernels take the arrays flattened and the sizes as ``uint64`` (:func:`step_args`).
FLAT_VARIANTS = ("vec4_march", "march_vec4")


@cuda.jit(device=True)
def _load_quad(u, o, j0, nx, aligned):
    """``u[o .. o+3]``, the columns ``j0 .. j0+3`` of one row (``j0 < nx``); 0 for columns past the row's end.

    ``aligned`` (``nx % 4 == 0``, so ``o`` is a multiple of 4 and the whole quad is in the row): one 16-byte load.
    Otherwise four guarded scalar loads.
    """
    if aligned:
        return load4(u, o // U4)
    a = u[o]
    b = u[o + U1] if j0 + U1 < nx else float32(0)
    c = u[o + U2] if j0 + U2 < nx else float32(0)
    d = u[o + U3] if j0 + U3 < nx else float32(0)
    return a, b, c, d


@cuda.jit(device=True)
def _store_quad(v, o, j0, nx, aligned, a, b, c, d):
    """Write ``a, b, c, d`` to ``v[o .. o+3]`` (columns ``j0 ..``): one 16-byte store where aligned, else the
    columns that exist."""
    if aligned:
        store4(v, o // U4, a, b, c, d)
    else:
        v[o] = a
        if j0 + U1 < nx:
            v[o + U1] = b
        if j0 + U2 < nx:
            v[o + U2] = c
        if j0 + U3 < nx:
            v[o + U3] = d


@cuda.jit
def jacobi_vec4_march(u, v, ny, nx, chunks):
    """Few instructions per point: 4 columns by ``VEC_ROWS * chunks`` rows per thread, 16 bytes per access.

    The grids come flattened (1-D views, :func:`flat`) and the sizes as ``uint64``: an address is one unsigned
    offset and a neighbour one addition away, where ``jacobi_naive`` computes a signed 2-D index, with its
    wraparound checks, for each of its six accesses. A thread owns the columns ``4g .. 4g+3`` of a strip of
    rows and walks down it in chunks of ``VEC_ROWS`` rows: it loads the chunk's rows (16-byte loads, the rows
    above already in its register window ``w``) and the scalar neighbours left and right of its quads, all
    before its first store; then it computes the chunk and stores each row's four points with one 16-byte
    store, and the window's last two rows move up, in registers, for the next chunk. Neighbours outside the
    grid are read at a point that exists (the point itself, or the last row) and border points copied by a
    select: no load behind a branch. Launch: x over ``ceil(nx / 4)`` quads, y over ``ceil(ny / (VEC_ROWS *
    chunks))`` strips.
    """
    w = cuda.local.array(WINDOW, float32)  # the row above the chunk, its rows, the row below (4 columns each)
    lf = cuda.local.array(VEC_ROWS, float32)
    rt = cuda.local.array(VEC_ROWS, float32)
    g = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    strip = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    j0 = g * U4
    i = strip * (np.uint64(VEC_ROWS) * chunks)  # first row of this thread's strip
    if i < ny and j0 < nx:  # (no barrier in this kernel, so threads past the edge may simply do nothing)
        aligned = nx % U4 == U0
        lo = U1 if j0 > U0 else U0  # offsets of the left and right neighbours; 0 where there is none
        ro = U4 if j0 + U4 < nx else U0
        # interior columns of the quad: j >= 1 and j + 1 < nx for j = j0 .. j0 + 3
        in0 = j0 > U0 and j0 + U1 < nx
        in1 = j0 + U2 < nx
        in2 = j0 + U3 < nx
        in3 = j0 + U4 < nx
        o = i * nx + j0  # this thread's quad in row i
        last = (ny - U1) * nx + j0  # its quad in the last row: read instead of rows past the end
        w[0], w[1], w[2], w[3] = _load_quad(u, o - nx if i > U0 else o, j0, nx, aligned)  # the row above
        w[4], w[5], w[6], w[7] = _load_quad(u, o, j0, nx, aligned)
        done = U0
        while done < chunks and i < ny:
            for r in range(VEC_ROWS):  # loads: the row below each row of the chunk, and its left and right
                ri = i + np.uint64(r)
                orow = o + np.uint64(r) * nx
                below = orow + nx if ri + U1 < ny else last
                here = orow if ri < ny else last
                w[4 * r + 8], w[4 * r + 9], w[4 * r + 10], w[4 * r + 11] = _load_quad(u, below, j0, nx, aligned)
                lf[r] = u[here - lo]
                rt[r] = u[here + ro]
            for r in range(VEC_ROWS):  # compute and store the chunk's rows
                ri = i + np.uint64(r)
                if ri < ny:
                    c0, c1, c2, c3 = w[4 * r + 4], w[4 * r + 5], w[4 * r + 6], w[4 * r + 7]
                    n0 = QUARTER * ((w[4 * r] + w[4 * r + 8]) + (lf[r] + c1))
                    n1 = QUARTER * ((w[4 * r + 1] + w[4 * r + 9]) + (c0 + c2))
                    n2 = QUARTER * ((w[4 * r + 2] + w[4 * r + 10]) + (c1 + c3))
                    n3 = QUARTER * ((w[4 * r + 3] + w[4 * r + 11]) + (c2 + rt[r]))
                    row_in = ri > U0 and ri + U1 < ny
                    _store_quad(v, o + np.uint64(r) * nx, j0, nx, aligned,
                                n0 if row_in and in0 else c0, n1 if row_in and in1 else c1,
                                n2 if row_in and in2 else c2, n3 if row_in and in3 else c3)
            for c in range(8):  # the chunk's last row and the row below it become the next chunk's first two
                w[c] = w[4 * VEC_ROWS + c]
            i += np.uint64(VEC_ROWS)
            o += np.uint64(VEC_ROWS) * nx
            done += U1



JACOBI = {"naive": jacobi_naive, "shared": jacobi_shared, "marching": jacobi_marching, "vec4_march": jacobi_vec4_march}
#: Bytes one Jacobi step must move per point: read the point once, write it once (float32).
JACOBI_BYTES_PER_POINT = 8
#: Floating-point operations per interior point: three additions and one multiplication.
JACOBI_FLOPS_PER_POINT = 4


def jacobi_reference(u, steps: int = 1) -> np.ndarray:
    """NumPy specification of ``steps`` Jacobi steps, in float32 with the kernels' order of additions.

    ``(up + down) + (left + right)``, then times 0.25: the kernels round exactly the same way, so
    they must agree bit for bit.
    """
    u = np.array(u, dtype=np.float32)
    steps = validate.integer(steps, "steps", minimum=0)
    for _ in range(steps):
        v = u.copy()
        if u.shape[0] > 2 and u.shape[1] > 2:
            v[1:-1, 1:-1] = QUARTER * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))
        u = v
    return u


def jacobi_counts(ny: int, nx: int) -> dict:
    """Ideal bytes and flops of one Jacobi step on an ``ny x nx`` grid (float32).

    Bytes: every point read once and written once (8 B/point), the least any kernel can move
    (what a perfect cache or tile achieves). Flops: 4 per interior point (three additions, one
    multiplication).
    """
    ny = validate.integer(ny, "ny", minimum=1)
    nx = validate.integer(nx, "nx", minimum=1)
    interior = max(ny - 2, 0) * max(nx - 2, 0)
    return {"points": ny * nx, "nbytes": JACOBI_BYTES_PER_POINT * ny * nx, "flops": JACOBI_FLOPS_PER_POINT * interior}


def jacobi_grid(variant: str, shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Blocks (x, y) that cover an ``ny x nx`` grid with ``block`` threads (ceiling divisions)."""
    ny, nx = shape
    bx, by = block
    rows_per_thread = ROWS if variant in ("marching", "vec4_march") else 1
    return (blocks_for(nx, bx, 4 if variant == "vec4_march" else 1), blocks_for(ny, by, rows_per_thread))


def flat(a):
    """A 1-D view of the C-contiguous (device) array ``a``, the same memory: what the 16-byte kernels take."""
    return a.reshape(int(np.prod(a.shape)))


def step_args(variant: str, u, v) -> tuple:
    """The arguments of one step of ``variant`` from ``u`` into ``v`` (device arrays of the grid's shape).

    ``(u, v)`` for the 2-D and 3-D kernels; for :data:`FLAT_VARIANTS` the arrays flattened, then the sizes and
    the work per thread (``VEC_CHUNKS`` chunks, ``PLANES`` planes) as ``uint64``. Build them once, outside a
    timed loop.
    """
    if variant not in FLAT_VARIANTS:
        return (u, v)
    work = VEC_CHUNKS if variant == "vec4_march" else PLANES
    return (flat(u), flat(v), *(np.uint64(s) for s in u.shape), np.uint64(work))


def check_block_2d(block, variant: str) -> tuple[int, int]:
    """``block`` as ``(bx, by)`` for a 2-D launch of ``variant``, refused with what to change if it cannot run."""
    block = validate.block_shape(block)
    if len(block) != 2:
        raise LaunchConfigError(f"block must have two dimensions (x, y), got {block}: e.g. block=(32, 8).")
    bx, by = block
    if variant == "residual" and bx * by > RES_THREADS:  # (block_shape already refuses more than 1024)
        raise LaunchConfigError(f"block={block} has more than {RES_THREADS} threads: use block=(32, 8).")
    if variant == "shared" and (bx > SH_X or by > SH_Y):
        raise LaunchConfigError(
            f"block={block} does not fit the shared tile of jacobi_shared, which has room for blocks up to "
            f"({SH_X}, {SH_Y}): use block=({min(bx, SH_X)}, {min(by, SH_Y)}).")
    return bx, by


@dataclass
class Jacobi:
    """Ping-pong Jacobi iteration on the device: two buffers, each step reads one and writes the other.

    All buffers are allocated when it is built, so :meth:`step` only launches a kernel (what a
    benchmark should time). :meth:`result` copies the current field to the host.

    Args:
        u: the initial field, a 2-D C-contiguous float32 array without NaN or infinity (NumPy: copied to
            the device once; CuPy or a Numba device array: copied on the device, the input is left alone).
        variant: ``naive``, ``shared``, ``marching`` or ``vec4_march``.
        block: threads per block (x, y); default (32, 8), (128, 1) for ``marching``, (64, 2) for ``vec4_march``
            (whose x counts quads of four columns).
    """

    u: Any
    variant: str = "naive"
    block: tuple[int, int] | None = None
    steps_done: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        validate.choice(self.variant, "variant", list(JACOBI))
        validate.array(self.u, "u", dtype=np.float32, ndim=2, finite=isinstance(self.u, np.ndarray))
        if 0 in self.u.shape:
            raise ArrayArgumentError(f"u has shape {tuple(self.u.shape)}: a grid needs at least one point.")
        default = {"marching": MARCH_BLOCK, "vec4_march": VEC_BLOCK}.get(self.variant, BLOCK_2D)
        self.block = check_block_2d(default if self.block is None else self.block, self.variant)
        self.shape = (int(self.u.shape[0]), int(self.u.shape[1]))
        self.grid = jacobi_grid(self.variant, self.shape, self.block)
        self._kernel = JACOBI[self.variant]
        if isinstance(self.u, np.ndarray):
            self._a = cuda.to_device(self.u)
        else:
            self._a = cuda.device_array(self.shape, dtype=np.float32)
            self._a.copy_to_device(to_device(self.u))
        self._b = cuda.device_array(self.shape, dtype=np.float32)
        self._launch = ConfiguredKernel(self._kernel, self.grid, self.block)
        self._args = (step_args(self.variant, self._a, self._b), step_args(self.variant, self._b, self._a))

    @property
    def nbytes(self) -> int:
        """Ideal bytes of one step (each point read once and written once)."""
        return JACOBI_BYTES_PER_POINT * self.shape[0] * self.shape[1]

    def step(self, count: int = 1) -> None:
        """Launch ``count`` steps (asynchronous on a GPU), swapping the buffers after each."""
        for _ in range(count):
            self._launch(*self._args[0])
            self._a, self._b = self._b, self._a
            self._args = self._args[::-1]
            self.steps_done += 1

    @property
    def current(self):
        """The device array holding the field after the last step."""
        return self._a

    def result(self) -> np.ndarray:
        """The field after the last step, copied to the host."""
        return self._a.copy_to_host()


def run_jacobi(u, steps: int = 1, variant: str = "naive", block: tuple[int, int] | None = None) -> np.ndarray:
    """Run ``steps`` Jacobi steps of ``variant`` on the float32 field ``u`` and return the result (NumPy).

    Raises:
        ArgumentError: wrong dtype or shape, an empty grid, NaN or infinity in ``u``, a bad block or variant.
    """
    steps = validate.integer(steps, "steps", minimum=0)
    solver = Jacobi(u, variant, block)
    solver.step(steps)
    return solver.result()


# ---------------------------------------------------------------------------------------------
# Jacobi iterated to convergence: the test max |v - u| < tol reduced on the device or on the host
# ---------------------------------------------------------------------------------------------

#: Largest block of :func:`jacobi_residual` (its shared array has one float per thread).
RES_THREADS = 1024
#: Where :class:`JacobiSolver` computes its convergence test.
CONVERGENCE_TESTS = ("device", "host")


@cuda.jit
def jacobi_residual(u, v, change):
    """One Jacobi step (as :func:`jacobi_naive`) that also reduces ``max |v - u|`` into ``change[0]``.

    Every thread writes its point's change into shared memory (0 for a thread past the edge); a tree
    reduction leaves the block's maximum in word 0, and thread 0 folds it into ``change[0]`` with one
    atomic maximum: one atomic per block, no second kernel, no copy of the field. The host sets
    ``change[0] = 0`` before the launch and reads those 4 bytes after it.
    """
    s = cuda.shared.array(RES_THREADS, float32)
    j, i = cuda.grid(2)
    ny, nx = u.shape
    tid = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    nthreads = cuda.blockDim.x * cuda.blockDim.y
    d = float32(0)
    if i < ny and j < nx:
        old = u[i, j]
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            v[i, j] = old  # Dirichlet boundary: fixed, change 0
        else:
            new = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))
            v[i, j] = new
            d = abs(new - old)
    s[tid] = d
    step = 1
    while step * 2 < nthreads:  # the largest power of two below nthreads (any block size works)
        step *= 2
    cuda.syncthreads()  # RAW: every thread's change is in s before the tree reads it
    while step > 0:
        if tid < step and tid + step < nthreads:
            s[tid] = max(s[tid], s[tid + step])
        cuda.syncthreads()  # RAW and WAR: this level's maxima are written before the next level reads them
        step //= 2
    if tid == 0:
        cuda.atomic.max(change, 0, s[0])


def jacobi_residual_reference(u) -> tuple[np.ndarray, np.float32]:
    """NumPy specification of :func:`jacobi_residual`: the next field and ``max |v - u|`` (float32)."""
    u = np.array(u, dtype=np.float32)
    v = jacobi_reference(u, 1)
    return v, np.float32(np.abs(v - u).max()) if u.size else np.float32(0)


@dataclass
class JacobiSolver:
    """Jacobi steps until the largest change of a checked step is below ``tol``, the test every ``check_every`` steps.

    Between two tests the steps are plain :func:`jacobi_naive` launches (no reduction, no copy). The
    tested step is either :func:`jacobi_residual`, whose maximum is reduced on the device so the host
    copies back 4 bytes (``test="device"``), or a plain step after which the host copies both fields and
    computes ``np.abs(new - old).max()`` itself (``test="host"``: two full copies per test). Both
    count the same steps and stop at the same one.

    Args:
        u: initial field, a 2-D float32 array without NaN or infinity (NumPy, CuPy or Numba device array).
        test: ``"device"`` or ``"host"``.
        check_every: steps between tests, at least 1 (the k-th step of each batch is the tested one).
        block: threads per block (x, y), at most 1024 in all.
    """

    u: Any
    test: str = "device"
    check_every: int = 10
    block: tuple[int, int] = BLOCK_2D
    steps: int = field(init=False, default=0)
    change: float = field(init=False, default=float("nan"))

    def __post_init__(self) -> None:
        validate.choice(self.test, "test", CONVERGENCE_TESTS)
        self.check_every = validate.integer(self.check_every, "check_every", minimum=1)
        validate.array(self.u, "u", dtype=np.float32, ndim=2, finite=isinstance(self.u, np.ndarray))
        if 0 in self.u.shape:
            raise ArrayArgumentError(f"u has shape {tuple(self.u.shape)}: a grid needs at least one point.")
        self.block = check_block_2d(self.block, "residual")
        self.shape = (int(self.u.shape[0]), int(self.u.shape[1]))
        self.grid = grid_2d(self.shape, self.block)
        self._u0 = to_device(self.u)
        self._a = cuda.device_array(self.shape, dtype=np.float32)
        self._b = cuda.device_array(self.shape, dtype=np.float32)
        self._change = cuda.device_array(1, dtype=np.float32)
        self._zero = np.zeros(1, dtype=np.float32)
        self._plain = ConfiguredKernel(jacobi_naive, self.grid, self.block)
        self._fused = ConfiguredKernel(jacobi_residual, self.grid, self.block)

    def _tested_step(self) -> float:
        if self.test == "device":
            self._change.copy_to_device(self._zero)
            self._fused(self._a, self._b, self._change)
            value = float(self._change.copy_to_host()[0])  # 4 bytes back, and a wait for the GPU
        else:
            self._plain(self._a, self._b)
            old, new = self._a.copy_to_host(), self._b.copy_to_host()  # two whole fields back
            value = float(np.abs(new - old).max())
        self._a, self._b = self._b, self._a
        return value

    def run(self, tol: float, max_steps: int = 100_000) -> int:
        """Start from ``u`` again and step until a tested change is below ``tol``; returns the steps taken.

        ``tol=0`` never stops early: the solver then makes exactly ``max_steps`` steps (rounded up to a
        whole batch), what a benchmark times. Raises RuntimeError if ``max_steps`` pass before that.
        """
        tol = validate.number(tol, "tol", minimum=0.0)
        max_steps = validate.integer(max_steps, "max_steps", minimum=1)
        self._a.copy_to_device(self._u0)
        self.steps = 0
        while True:
            for _ in range(self.check_every - 1):
                self._plain(self._a, self._b)
                self._a, self._b = self._b, self._a
            self.change = self._tested_step()
            self.steps += self.check_every
            if self.change < tol:
                return self.steps
            if self.steps >= max_steps:
                if tol == 0:
                    return self.steps
                raise RuntimeError(f"Jacobi did not converge to tol={tol:g} in {self.steps} steps (largest change "
                                   f"of the last tested step: {self.change:g}): raise max_steps or tol.")

    def result(self) -> np.ndarray:
        """The field after the last step, copied to the host."""
        return self._a.copy_to_host()


def solve_jacobi_reference(u, tol: float, check_every: int = 10, max_steps: int = 100_000) -> tuple[np.ndarray, int, float]:
    """NumPy specification of :meth:`JacobiSolver.run`: ``(field, steps, change of the last tested step)``."""
    u = np.array(u, dtype=np.float32)
    steps = 0
    while True:
        u = jacobi_reference(u, check_every - 1)
        u, change = jacobi_residual_reference(u)
        steps += check_every
        if change < tol or steps >= max_steps:
            return u, steps, float(change)


def hot_plate(ny: int, nx: int, top: float = 100.0, bottom: float = 0.0, left: float = 0.0,
              right: float = 0.0, inside: float = 0.0) -> np.ndarray:
    """A float32 temperature field: fixed border temperatures (the boundary condition), ``inside`` elsewhere."""
    ny = validate.integer(ny, "ny", minimum=1)
    nx = validate.integer(nx, "nx", minimum=1)
    u = np.full((ny, nx), inside, dtype=np.float32)
    u[:, 0] = left
    u[:, -1] = right
    u[-1, :] = bottom
    u[0, :] = top
    return u


def jacobi_snapshots(u, steps_list) -> dict[int, np.ndarray]:
    """The NumPy reference field after each number of steps in ``steps_list`` (for the widget)."""
    out = {}
    current = np.array(u, dtype=np.float32)
    done = 0
    for k in sorted(set(int(s) for s in steps_list)):
        current = jacobi_reference(current, k - done)
        done = k
        out[k] = current
    return out


# ---------------------------------------------------------------------------------------------
# 3D 7-point stencil: a Jacobi step on a volume u[z, y, x], boundary points fixed
# ---------------------------------------------------------------------------------------------

#: The 7-point weight, a float32 constant (a Python 1/6 would make the arithmetic float64).
SIXTH = np.float32(1.0 / 6.0)
#: Default block of :func:`stencil3d_naive` (x, y, z) and of :func:`stencil3d_marching` (x, y).
BLOCK_3D = (32, 8, 1)
MARCH3D_BLOCK = (32, 8)
#: Default block of :func:`stencil3d_march_vec4` (x in quads of four columns, y in rows) and its planes per block.
VEC3D_BLOCK = (64, 4)
PLANES = 8


@cuda.jit
def stencil3d_naive(u, v):
    """One 3D Jacobi step: ``v`` = the mean of the six neighbours in ``u``; boundary points copied.

    One thread per point, seven reads from device memory per point: each value is read by seven
    threads, and only the caches stand between those reads and DRAM.
    """
    j, i, k = cuda.grid(3)  # x along a row (coalesced), then y, then z
    nz, ny, nx = u.shape
    if k < nz and i < ny and j < nx:
        if k == 0 or i == 0 or j == 0 or k == nz - 1 or i == ny - 1 or j == nx - 1:
            v[k, i, j] = u[k, i, j]
        else:
            v[k, i, j] = SIXTH * (((u[k - 1, i, j] + u[k + 1, i, j]) + (u[k, i - 1, j] + u[k, i + 1, j]))
                                  + (u[k, i, j - 1] + u[k, i, j + 1]))


@cuda.jit
def stencil3d_marching(u, v):
    """Marching planes (Micikevicius, 2009): a 2D grid of blocks walks along z through the volume.

    Each thread owns one column ``(i, j)`` and keeps three values of it in registers: ``below``
    (plane k-1), ``centre`` (k) and ``above`` (k+1). At every plane the block writes its centres
    and a halo of one into a shared tile, so the four in-plane neighbours come from shared memory;
    the z-neighbours never leave the registers. Moving on is a register shift and one new load
    (``above``): every value is loaded once, plus the tile's halo. Every thread runs all ``nz``
    iterations (threads past the edge load zeros), so every barrier is reached by the whole block.
    """
    tile = cuda.shared.array((TILE_Y, TILE_X), float32)
    j, i = cuda.grid(2)
    nz, ny, nx = u.shape
    r = cuda.threadIdx.y + 1
    c = cuda.threadIdx.x + 1
    inside = i < ny and j < nx
    below = float32(0)
    centre = u[0, i, j] if inside else float32(0)
    above = u[1, i, j] if inside and nz > 1 else float32(0)
    for k in range(nz):
        cuda.syncthreads()  # WAR: every thread has read the previous plane's tile before it is overwritten
        tile[r, c] = centre
        if cuda.threadIdx.y == 0:  # halo row above (y - 1)
            tile[0, c] = u[k, i - 1, j] if inside and i > 0 else float32(0)
        if cuda.threadIdx.y == cuda.blockDim.y - 1:  # halo row below (y + 1)
            tile[r + 1, c] = u[k, i + 1, j] if j < nx and i + 1 < ny else float32(0)
        if cuda.threadIdx.x == 0:  # halo column left (x - 1)
            tile[r, 0] = u[k, i, j - 1] if inside and j > 0 else float32(0)
        if cuda.threadIdx.x == cuda.blockDim.x - 1:  # halo column right (x + 1)
            tile[r, c + 1] = u[k, i, j + 1] if i < ny and j + 1 < nx else float32(0)
        cuda.syncthreads()  # RAW: the plane and its halo, written by other threads, are in the tile
        if inside:
            if k == 0 or i == 0 or j == 0 or k == nz - 1 or i == ny - 1 or j == nx - 1:
                v[k, i, j] = centre
            else:
                v[k, i, j] = SIXTH * (((below + above) + (tile[r - 1, c] + tile[r + 1, c]))
                                      + (tile[r, c - 1] + tile[r, c + 1]))
        below = centre
        centre = above
        above = u[k + 2, i, j] if inside and k + 2 < nz else float32(0)


@cuda.jit
def stencil3d_march_vec4(u, v, nz, ny, nx, planes):
    """Marching planes without a barrier: 4 columns per thread, ``planes`` planes per block, z in registers.

    Flattened arrays and ``uint64`` sizes, as :func:`jacobi_vec4_march`. A thread owns the quad of columns
    ``4g .. 4g+3`` of row ``i``; block ``z`` of the grid walks planes ``z * planes`` onwards (so the grid fills
    the GPU whatever ``nz``), with the quads of planes k-1, k and k+1 in registers. Per plane a thread loads
    the quad two planes up (for the next plane: a load in flight for a whole iteration), the quads of rows
    i-1 and i+1 and the two scalars beside its quad (the neighbouring threads' data: the caches serve them),
    and writes one quad. No shared tile, so no barrier. Launch: x over ``ceil(nx / 4)`` quads, y over the
    rows, z over ``ceil(nz / planes)`` slabs.
    """
    g = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    k = np.uint64(cuda.blockIdx.z) * planes
    j0 = g * U4
    if i < ny and j0 < nx and k < nz:
        end = min(k + planes, nz)
        plane = ny * nx
        aligned = nx % U4 == U0
        o = (k * ny + i) * nx + j0
        row_in = i > U0 and i + U1 < ny
        dn = nx if i > U0 else U0  # neighbour offsets; 0 (the quad itself) where there is none
        ds = nx if i + U1 < ny else U0
        lo = U1 if j0 > U0 else U0
        ro = U4 if j0 + U4 < nx else U0
        in0 = j0 > U0 and j0 + U1 < nx
        in1 = j0 + U2 < nx
        in2 = j0 + U3 < nx
        in3 = j0 + U4 < nx
        zero = float32(0)
        b0, b1, b2, b3 = zero, zero, zero, zero
        if k > U0:
            b0, b1, b2, b3 = _load_quad(u, o - plane, j0, nx, aligned)
        c0, c1, c2, c3 = _load_quad(u, o, j0, nx, aligned)
        a0, a1, a2, a3 = zero, zero, zero, zero
        if k + U1 < nz:
            a0, a1, a2, a3 = _load_quad(u, o + plane, j0, nx, aligned)
        while k < end:
            ahead = plane + plane if k + U2 < nz else U0
            p0, p1, p2, p3 = _load_quad(u, o + ahead, j0, nx, aligned)  # prefetch: the next plane's "above"
            s0, s1, s2, s3 = _load_quad(u, o - dn, j0, nx, aligned)  # north: row i - 1
            t0, t1, t2, t3 = _load_quad(u, o + ds, j0, nx, aligned)  # south: row i + 1
            west = u[o - lo]
            east = u[o + ro]
            n0 = SIXTH * (((b0 + a0) + (s0 + t0)) + (west + c1))
            n1 = SIXTH * (((b1 + a1) + (s1 + t1)) + (c0 + c2))
            n2 = SIXTH * (((b2 + a2) + (s2 + t2)) + (c1 + c3))
            n3 = SIXTH * (((b3 + a3) + (s3 + t3)) + (c2 + east))
            inner = row_in and k > U0 and k + U1 < nz  # a boundary plane or row is copied
            _store_quad(v, o, j0, nx, aligned, n0 if inner and in0 else c0, n1 if inner and in1 else c1,
                        n2 if inner and in2 else c2, n3 if inner and in3 else c3)
            b0, b1, b2, b3 = c0, c1, c2, c3
            c0, c1, c2, c3 = a0, a1, a2, a3
            a0, a1, a2, a3 = p0, p1, p2, p3
            o += plane
            k += U1


STENCIL3D = {"naive": stencil3d_naive, "marching": stencil3d_marching, "march_vec4": stencil3d_march_vec4}


def stencil3d_reference(u, steps: int = 1) -> np.ndarray:
    """NumPy specification of ``steps`` 3D 7-point Jacobi steps in float32, the kernels' order of additions.

    ``((z- + z+) + (y- + y+)) + (x- + x+)``, then times 1/6 (a float32): the kernels agree bit for bit.
    """
    u = np.array(u, dtype=np.float32)
    steps = validate.integer(steps, "steps", minimum=0)
    for _ in range(steps):
        v = u.copy()
        if min(u.shape) > 2:
            c = (slice(1, -1),) * 3
            v[c] = SIXTH * (((u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1]) + (u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]))
                            + (u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:]))
        u = v
    return u


def stencil3d_grid(variant: str, shape: tuple[int, int, int], block: tuple[int, ...]) -> tuple[int, ...]:
    """Blocks that cover an ``nz x ny x nx`` volume: (x, y, z) for ``naive``, (x, y) for ``marching``, and for
    ``march_vec4`` x over quads, y over rows, z over slabs of ``PLANES`` planes."""
    nz, ny, nx = shape
    if variant == "marching":
        return grid_2d((ny, nx), block)
    if variant == "march_vec4":
        return (blocks_for(nx, block[0], 4), blocks_for(ny, block[1]), blocks_for(nz, 1, PLANES))
    return (blocks_for(nx, block[0]), blocks_for(ny, block[1]), blocks_for(nz, block[2]))


def _check_block_3d(block, variant: str) -> tuple[int, ...]:
    block = validate.block_shape(block)
    if variant in ("marching", "march_vec4"):
        if len(block) != 2:
            raise LaunchConfigError(f"stencil3d_{variant} takes a 2D block (x, y), got {block}: e.g. block=(32, 8); "
                                    "its threads walk along z themselves.")
        return check_block_2d(block, "shared" if variant == "marching" else variant)  # marching: jacobi_shared's tile
    if len(block) != 3:
        raise LaunchConfigError(f"stencil3d_naive takes a 3D block (x, y, z), got {block}: e.g. block=(32, 8, 1).")
    return block


def run_stencil3d(u, steps: int = 1, variant: str = "naive", block: tuple[int, ...] | None = None) -> np.ndarray:
    """Run ``steps`` 3D 7-point Jacobi steps of ``variant`` on the float32 volume ``u[z, y, x]``; returns NumPy.

    Args:
        u: 3-D C-contiguous float32 array without NaN or infinity (NumPy, CuPy or Numba device array).
        steps: number of steps (ping-pong between two buffers).
        variant: ``naive`` (block (x, y, z), default (32, 8, 1)), ``marching`` (block (x, y), at most
            (32, 8), default (32, 8)) or ``march_vec4`` (block (x, y), x in quads, default (64, 4)).

    Raises:
        ArgumentError: wrong dtype or shape, an empty volume, NaN or infinity, a bad block or variant.
    """
    validate.choice(variant, "variant", list(STENCIL3D))
    steps = validate.integer(steps, "steps", minimum=0)
    validate.array(u, "u", dtype=np.float32, ndim=3, finite=isinstance(u, np.ndarray))
    if 0 in u.shape:
        raise ArrayArgumentError(f"u has shape {tuple(u.shape)}: a volume needs at least one point.")
    default = {"marching": MARCH3D_BLOCK, "march_vec4": VEC3D_BLOCK}.get(variant, BLOCK_3D)
    block = _check_block_3d(default if block is None else block, variant)
    shape = (int(u.shape[0]), int(u.shape[1]), int(u.shape[2]))
    a = cuda.device_array(shape, dtype=np.float32)
    a.copy_to_device(to_device(u))
    b = cuda.device_array(shape, dtype=np.float32)
    launch = ConfiguredKernel(STENCIL3D[variant], stencil3d_grid(variant, shape, block), block)
    args = (step_args(variant, a, b), step_args(variant, b, a))
    for k in range(steps):
        launch(*args[k % 2])
    return (a if steps % 2 == 0 else b).copy_to_host()


# ---------------------------------------------------------------------------------------------
# Image filters: 3x3 weights with clamped borders, and the Sobel edge magnitude
# ---------------------------------------------------------------------------------------------


@cuda.jit
def filter3x3(img, weights, out):
    """``out[i, j] = sum of weights[a, b] * img[i + a - 1, j + b - 1]``, indices clamped to the image.

    A correlation (the weights are not flipped); for symmetric weights such as a blur the same
    as a convolution. Clamping repeats the edge pixels, so the output has the input's shape.
    """
    j, i = cuda.grid(2)
    ny, nx = img.shape
    if i < ny and j < nx:
        acc = float32(0)
        for a in range(3):
            ii = min(max(i + a - 1, 0), ny - 1)
            for b in range(3):
                jj = min(max(j + b - 1, 0), nx - 1)
                acc += weights[a, b] * img[ii, jj]
        out[i, j] = acc


@cuda.jit
def sobel_magnitude(img, out):
    """Edge strength ``sqrt(gx^2 + gy^2)`` with Sobel's 3x3 derivatives, indices clamped to the image.

    ``gx`` differentiates along a row (x, columns) and smooths along y; ``gy`` the other way
    round. Eight neighbours are read (the centre has weight 0 in both).
    """
    j, i = cuda.grid(2)
    ny, nx = img.shape
    if i < ny and j < nx:
        up = max(i - 1, 0)
        down = min(i + 1, ny - 1)
        lf = max(j - 1, 0)
        rt = min(j + 1, nx - 1)
        a = img[up, lf]
        b = img[up, j]
        c = img[up, rt]
        d = img[i, lf]
        f = img[i, rt]
        g = img[down, lf]
        h = img[down, j]
        k = img[down, rt]
        gx = (c + TWO * f + k) - (a + TWO * d + g)
        gy = (g + TWO * h + k) - (a + TWO * b + c)
        out[i, j] = math.sqrt(gx * gx + gy * gy)


def _check_image(img, name: str = "img") -> tuple[int, int]:
    validate.array(img, name, dtype=np.float32, ndim=2, finite=isinstance(img, np.ndarray))
    if 0 in img.shape:
        raise ArrayArgumentError(f"{name} has shape {tuple(img.shape)}: an image needs at least one pixel.")
    return int(img.shape[0]), int(img.shape[1])


def run_filter3x3(img, weights, block: tuple[int, int] = BLOCK_2D) -> np.ndarray:
    """Apply 3x3 ``weights`` (correlation, clamped borders) to the float32 image ``img``; returns NumPy.

    Raises:
        ArgumentError: not a 2-D float32 image, empty, NaN or infinity in it or in the weights, weights not 3x3.
    """
    shape = _check_image(img)
    w = np.asarray(weights)
    validate.array(w, "weights", ndim=2, shape=(3, 3), contiguous=False, finite=True)
    block = check_block_2d(block, "filter")
    out = cuda.device_array(shape, dtype=np.float32)
    filter3x3[grid_2d(shape, block), block](to_device(img), cuda.to_device(np.ascontiguousarray(w, np.float32)),
                                             out)
    return out.copy_to_host()


def run_box_blur(img, block: tuple[int, int] = BLOCK_2D) -> np.ndarray:
    """3x3 box blur (every pixel the mean of its 3x3 neighbourhood, borders clamped)."""
    return run_filter3x3(img, BOX_WEIGHTS, block)


def run_sobel(img, block: tuple[int, int] = BLOCK_2D) -> np.ndarray:
    """Sobel edge magnitude of the float32 image ``img`` (borders clamped); returns NumPy."""
    shape = _check_image(img)
    block = check_block_2d(block, "filter")
    out = cuda.device_array(shape, dtype=np.float32)
    sobel_magnitude[grid_2d(shape, block), block](to_device(img), out)
    return out.copy_to_host()


def correlate3x3_reference(img, weights) -> np.ndarray:
    """NumPy specification of :func:`filter3x3` in float64 (edge pixels repeated)."""
    img = np.asarray(img, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    p = np.pad(img, 1, mode="edge")
    ny, nx = img.shape
    out = np.zeros_like(img)
    for a in range(3):
        for b in range(3):
            out += w[a, b] * p[a:a + ny, b:b + nx]
    return out


def sobel_reference(img) -> np.ndarray:
    """NumPy specification of :func:`sobel_magnitude` in float64."""
    gx = correlate3x3_reference(img, SOBEL_X)
    gy = correlate3x3_reference(img, SOBEL_Y)
    return np.hypot(gx, gy)


def grayscale(rgb) -> np.ndarray:
    """Luminance of an RGB(A) image (ITU-R BT.601 weights) as float32 in [0, 1]."""
    a = np.asarray(rgb)
    if a.ndim == 2:
        g = a.astype(np.float64)
    elif a.ndim == 3 and a.shape[2] in (3, 4):
        g = a[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    else:
        raise ArrayArgumentError(f"expected an image of shape (h, w), (h, w, 3) or (h, w, 4), got {a.shape}.")
    if np.issubdtype(a.dtype, np.integer):
        g = g / np.iinfo(a.dtype).max
    return np.ascontiguousarray(g, dtype=np.float32)


def sample_photo() -> np.ndarray:
    """The grayscale portrait of Grace Hopper that Matplotlib ships (600 x 512, float32 in [0, 1]; no download)."""
    import matplotlib.cbook as cbook  # here, not at the top: chapter 9's stored race report quotes line numbers
    import matplotlib.image as mimage  # (as above)

    path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    return grayscale(mimage.imread(path))


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def cupy_jacobi_step(u, v) -> None:
    """One Jacobi step with CuPy slicing (the borders of ``v`` must already hold the boundary values). GPU only.

    Four slice additions and a multiplication: each makes a temporary array, so the step reads
    and writes the grid several times, where a kernel reads it once and writes it once.
    """
    backend.require_gpu("cupy_jacobi_step", because="runs CuPy on a GPU", needs_cupy=True)
    v[1:-1, 1:-1] = QUARTER * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))


__all__ = [
    "BINOMIAL_WEIGHTS", "BLOCK_2D", "BLOCK_3D", "BOX_WEIGHTS", "check_block_2d", "CONVERGENCE_TESTS",
    "correlate3x3_reference", "cupy_jacobi_step", "filter3x3", "flat", "FLAT_VARIANTS", "grayscale",
    "hot_plate", "integer_valued", "Jacobi", "JACOBI", "JACOBI_BYTES_PER_POINT", "jacobi_counts", "jacobi_grid",
    "jacobi_marching", "jacobi_naive", "jacobi_reference", "jacobi_residual", "jacobi_residual_reference",
    "jacobi_shared", "jacobi_snapshots", "jacobi_vec4_march", "JacobiSolver", "MARCH3D_BLOCK", "MARCH_BLOCK",
    "MAX_RADIUS", "MAX_THREADS", "PLANES", "QUARTER", "RES_THREADS", "ROWS", "run_box_blur", "run_filter3x3",
    "run_jacobi", "run_sobel", "run_stencil1d", "run_stencil3d", "sample_photo", "SEED_BLOCK", "SEED_RADIUS",
    "seed_tile_indices", "SH_X", "SH_Y", "SIXTH", "sobel_magnitude", "sobel_reference", "SOBEL_X", "SOBEL_Y",
    "step_args", "solve_jacobi_reference", "STENCIL1D", "stencil1d_global", "stencil1d_global_index",
    "stencil1d_local_halo", "stencil1d_no_barrier", "stencil1d_reference", "stencil1d_shared",
    "stencil1d_shared_any_radius", "STENCIL3D", "stencil3d_grid", "stencil3d_march_vec4", "stencil3d_marching",
    "stencil3d_naive", "stencil3d_reference", "TILE_1D", "U0", "U1", "U2", "U3", "U4", "VEC3D_BLOCK",
    "VEC_BLOCK", "VEC_CHUNKS", "VEC_ROWS", "WINDOW",
]
