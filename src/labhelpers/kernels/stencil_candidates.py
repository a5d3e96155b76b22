"""Candidate 2D Jacobi and 3D 7-point kernels for the copy ceiling: the steps between the chapter's kernels.

On an H200 the chapter's first stencils sit far below a device-to-device copy: the 2D marching kernel at about
0.60 of it, the naive 3D kernel at 0.22 and its marching-planes kernel slower still. Their PTX says why: the
naive 2D kernel spends about 108 instructions on each point (five loads and a store), the naive 3D one 166. Most
are index arithmetic: Numba indexes with signed 64-bit integers and adds ``shape`` to a negative index
(Python's wraparound) on every access, and multiplies out every stride. These kernels change, one idea at a time.
The two winners, :func:`~labhelpers.kernels.stencil.jacobi_vec4_march` and
:func:`~labhelpers.kernels.stencil.stencil3d_march_vec4`, now live in the chapter's module (one home per kernel);
the launch builders below still take them, by the names ``vec4_march`` and ``march_vec4``, for the sweeps:

==============================  ====================================================================================
 kernel                          what it changes
==============================  ====================================================================================
 :func:`jacobi_flat`             2D, one thread per point, one unsigned 64-bit offset into the flattened grid
 :func:`jacobi_vec4`             2D, four columns per thread: 16-byte loads of the rows above, at and below
 ``jacobi_vec4_march``          2D, four columns by ``4 * chunks`` rows per thread, marching down in chunks of
                                 :data:`VEC_ROWS` rows; the two rows a chunk shares with the next stay in registers
 :func:`stencil3d_flat`          3D, one thread per point, one unsigned offset (neighbours at +-1, +-nx, +-nx*ny)
 :func:`stencil3d_march_regs`    3D, 2.5D blocking: a thread walks ``planes`` planes of its column with the
                                 z-1, z, z+1 values in registers; the in-plane neighbours come from the caches
 ``stencil3d_march_vec4``       3D, the same with four columns per thread and 16-byte loads
 :func:`stencil3d_march_shared`  3D, Micikevicius' scheme: the current plane in a double-buffered shared tile
                                 (one barrier per plane), z in registers, the block's edge neighbours prefetched
==============================  ====================================================================================

Conventions (the chapter's): ``u[i, j]`` and ``u[k, i, j]`` are C-contiguous float32 arrays, x along a row. The
kernels take the arrays **flattened** (1-D views of the same memory, ``u.reshape(u.size)``) and the sizes as
``uint64``, so that every offset is one unsigned 64-bit number: no wraparound checks, and strides are additions.
Boundary handling is exactly the chapter's: a point on the border (first or last row, column or plane) is copied,
every other point is the mean of its 4 (2D) or 6 (3D) neighbours, added in the reference's order
``(up + down) + (left + right)`` (2D) and ``((z- + z+) + (y- + y+)) + (x- + x+)`` (3D) and multiplied by a float32
constant, so they agree with :func:`~labhelpers.kernels.stencil.jacobi_reference` and
:func:`~labhelpers.kernels.stencil.stencil3d_reference` bit for bit.

Sixteen-byte accesses (:func:`~labhelpers.kernels.scan.tiled.load4` / ``store4``) need a row that starts on a
16-byte boundary: ``nx % 4 == 0`` (and an array whose data start on one, which every allocation does). Where that
does not hold the same kernels read and write four scalars instead (a branch taken by every thread alike).

Each kernel has a launch builder (:func:`jacobi_launch`, :func:`stencil3d_launch`: checked once, then called
with the flattened device arrays, what ``bench/tuning/stencil.py`` times) and a host wrapper
(:func:`run_jacobi_candidate`, :func:`run_stencil3d_candidate`) that checks its input like the chapter's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32

from .. import validate
from ..arrays import to_device
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import ConfiguredKernel, blocks_for
from .stencil import (QUARTER, SIXTH, VEC_ROWS, _load_quad, _store_quad, flat, jacobi_vec4_march,
                      stencil3d_march_vec4)

# Unsigned constants: in Numba a uint64 mixed with a signed integer (a plain literal) becomes a float64.
ZERO = np.uint64(0)
ONE = np.uint64(1)
TWO = np.uint64(2)
THREE = np.uint64(3)
FOUR = np.uint64(4)
#: Largest block of :func:`stencil3d_march_shared` (x, y): its two shared tiles are ``SH3_Y x SH3_X`` floats each.
SH3_X, SH3_Y = 64, 16

#: Default blocks and work per thread of each candidate (x, y[, z]); ``work`` is chunks of VEC_ROWS rows (2D
#: march) or planes per block (3D march); ``None`` where the kernel has no such knob.
JACOBI_DEFAULTS: dict[str, tuple[tuple[int, ...], int | None]] = {
    "flat": ((32, 8), None), "vec4": ((32, 8), None), "vec4_march": ((64, 4), 2)}
STENCIL3D_DEFAULTS: dict[str, tuple[tuple[int, ...], int | None]] = {
    "flat": ((32, 8, 1), None), "march_regs": ((32, 8), 64), "march_vec4": ((32, 8), 64),
    "march_shared": ((32, 8), 64)}


# ---------------------------------------------------------------------------------------------
# 2D Jacobi step, 5-point stencil, border points copied
# ---------------------------------------------------------------------------------------------


@cuda.jit
def jacobi_flat(u, v, ny, nx):
    """:func:`~labhelpers.kernels.stencil.jacobi_naive` on the flattened grid, one unsigned 64-bit offset per point.

    Change: the point is ``o = i * nx + j`` (``uint64``), its neighbours ``o - nx``, ``o + nx``, ``o - 1``,
    ``o + 1``: one multiply-add for the offset and an add or subtract per neighbour. Why: ``jacobi_naive``
    compiles to about 108 PTX instructions per point, most of them the signed 2-D index of each of its six
    accesses with a wraparound check each (shift, and, add) and a multiply by the row stride. Same launch as
    ``jacobi_naive``: one thread per point, x along a row.
    """
    j = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    if i < ny and j < nx:
        o = i * nx + j
        if i == ZERO or j == ZERO or i + ONE == ny or j + ONE == nx:
            v[o] = u[o]  # Dirichlet boundary: fixed temperature
        else:
            v[o] = QUARTER * ((u[o - nx] + u[o + nx]) + (u[o - ONE] + u[o + ONE]))


@cuda.jit
def jacobi_vec4(u, v, ny, nx):
    """Four columns per thread: the rows above, at and below the point read 16 bytes at a time.

    Change: thread ``g`` of a row computes columns ``4g .. 4g+3``. It loads three quads (``load4``: rows
    ``i-1``, ``i``, ``i+1``) and two scalars (the columns left and right of its quad), computes four points, and
    writes them with one ``store4``. The left and right neighbours inside the quad come from the centre quad
    (registers), so per point there are 3/4 of a wide load and 1/2 of a scalar load instead of five loads.
    Neighbours that do not exist (on the border) are replaced by an address that does (the point itself),
    and the border points then copied by a select: no branch around a load. Why: fewer memory instructions per
    byte (a warp's quad access is 512 contiguous bytes) and a quarter of the index arithmetic, which
    ``jacobi_flat`` still pays once per point. Launch: x over ``ceil(nx / 4)`` quads, y over the rows.
    """
    g = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    j0 = g * FOUR
    if i < ny and j0 < nx:
        aligned = nx % FOUR == ZERO
        o = i * nx + j0
        up = nx if i > ZERO else ZERO  # offsets of the neighbours; 0 (the point itself) where there is none
        down = nx if i + ONE < ny else ZERO
        lo = ONE if j0 > ZERO else ZERO
        ro = FOUR if j0 + FOUR < nx else ZERO
        c0, c1, c2, c3 = _load_quad(u, o, j0, nx, aligned)
        a0, a1, a2, a3 = _load_quad(u, o - up, j0, nx, aligned)  # row above (i - 1)
        b0, b1, b2, b3 = _load_quad(u, o + down, j0, nx, aligned)  # row below (i + 1)
        left = u[o - lo]
        right = u[o + ro]
        n0 = QUARTER * ((a0 + b0) + (left + c1))
        n1 = QUARTER * ((a1 + b1) + (c0 + c2))
        n2 = QUARTER * ((a2 + b2) + (c1 + c3))
        n3 = QUARTER * ((a3 + b3) + (c2 + right))
        # border points are copied: the first and last row, column 0 and column nx - 1 (wherever it falls)
        row_in = i > ZERO and i + ONE < ny
        _store_quad(v, o, j0, nx, aligned,
                    n0 if row_in and j0 > ZERO and j0 + ONE < nx else c0, n1 if row_in and j0 + TWO < nx else c1,
                    n2 if row_in and j0 + THREE < nx else c2, n3 if row_in and j0 + FOUR < nx else c3)


JACOBI_CANDIDATES = {"flat": jacobi_flat, "vec4": jacobi_vec4, "vec4_march": jacobi_vec4_march}


# ---------------------------------------------------------------------------------------------
# 3D 7-point step on u[z, y, x], boundary points copied
# ---------------------------------------------------------------------------------------------


@cuda.jit
def stencil3d_flat(u, v, nz, ny, nx):
    """:func:`~labhelpers.kernels.stencil.stencil3d_naive` with one unsigned 64-bit offset per point.

    Change: ``o = (k * ny + i) * nx + j`` (``uint64``); the neighbours are ``o -+ nx * ny``, ``o -+ nx``,
    ``o -+ 1``. Why: ``stencil3d_naive`` compiles to about 166 PTX instructions per point (eight accesses, each
    with a signed 3-D index, three wraparound checks and two stride multiplies); with the flat offset it is
    about half. Same launch as ``stencil3d_naive``: a 3-D grid, one thread per point.
    """
    j = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    k = np.uint64(cuda.blockIdx.z) * np.uint64(cuda.blockDim.z) + np.uint64(cuda.threadIdx.z)
    if k < nz and i < ny and j < nx:
        plane = ny * nx
        o = (k * ny + i) * nx + j
        if k == ZERO or i == ZERO or j == ZERO or k + ONE == nz or i + ONE == ny or j + ONE == nx:
            v[o] = u[o]
        else:
            v[o] = SIXTH * (((u[o - plane] + u[o + plane]) + (u[o - nx] + u[o + nx])) + (u[o - ONE] + u[o + ONE]))


@cuda.jit
def stencil3d_march_regs(u, v, nz, ny, nx, planes):
    """2.5D blocking in registers: each thread walks ``planes`` planes of its column ``(i, j)``.

    Change: a 2-D block covers a tile of columns; block ``z`` of the grid takes planes ``z * planes`` onwards, so
    the grid has enough blocks to fill the GPU whatever ``nz``. The thread keeps ``below`` (k-1), ``centre`` (k)
    and ``above`` (k+1) in registers; per plane it loads the value two planes up (for the next plane: a load
    in flight for a whole iteration) and the four in-plane neighbours (neighbouring threads' columns: the L1
    and L2 caches serve them), then stores one point. Neighbours that do not exist are read at the point
    itself (an offset of 0, chosen once) and border points copied by a select: no branch in the loop but its
    own. Per point one 4-byte DRAM read, where the naive kernel's z-neighbours, ``nx * ny`` floats away, come
    back from L2 or DRAM. Why: ``stencil3d_marching`` walks all ``nz`` planes in one 2-D grid and waits at two
    barriers per plane; this keeps the 2.5D reuse along z without barriers. Launch: (x, y) over the columns,
    z over ``ceil(nz / planes)`` slabs.
    """
    j = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(cuda.threadIdx.x)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(cuda.threadIdx.y)
    k = np.uint64(cuda.blockIdx.z) * planes
    if i < ny and j < nx and k < nz:  # (no barrier: threads past the edge may simply do nothing)
        end = min(k + planes, nz)
        plane = ny * nx
        o = (k * ny + i) * nx + j
        col_in = i > ZERO and j > ZERO and i + ONE < ny and j + ONE < nx
        dn = nx if i > ZERO else ZERO  # neighbour offsets; 0 (the point itself) where there is none
        ds = nx if i + ONE < ny else ZERO
        dw = ONE if j > ZERO else ZERO
        de = ONE if j + ONE < nx else ZERO
        below = u[o - plane] if k > ZERO else float32(0)
        centre = u[o]
        above = u[o + plane] if k + ONE < nz else float32(0)
        while k < end:
            ahead = plane + plane if k + TWO < nz else ZERO
            nxt = u[o + ahead]  # prefetch: the next plane's "above" (past the last plane: unused)
            north = u[o - dn]
            south = u[o + ds]
            west = u[o - dw]
            east = u[o + de]
            new = SIXTH * (((below + above) + (north + south)) + (west + east))
            v[o] = new if col_in and k > ZERO and k + ONE < nz else centre
            below = centre
            centre = above
            above = nxt
            o += plane
            k += ONE


@cuda.jit
def stencil3d_march_shared(u, v, nz, ny, nx, planes):
    """Marching planes with the current plane in shared memory (Micikevicius, 2009), one barrier per plane.

    Change from ``stencil3d_marching``: flat unsigned offsets; the grid's z splits the volume into slabs of
    ``planes`` planes (enough blocks to fill the GPU); the tile holds only the block's own points, twice
    (double buffering: plane ``k`` goes to tile ``k % 2``, so the write of the next plane cannot overwrite
    what a slow thread still reads, and one barrier per plane is enough instead of two); the neighbours just
    outside the block are not copied into the tile: the edge thread that needs one loads it itself, one plane
    ahead, into a register. Per plane a thread writes its centre to the tile, issues its prefetches (the value
    two planes up, its edge neighbours of the next plane), waits at the barrier, and reads its in-block
    neighbours from the tile. Why: the chapter's marching kernel waits at two barriers per plane, and its
    halo loads are issued between them, so every plane the whole block waits for a load's latency.
    Every thread of a block runs the same iterations (threads past the edge store zeros in the tile), so every
    barrier is reached by all. Launch: (x, y) over the columns, block at most (``SH3_X``, ``SH3_Y``), z over
    ``ceil(nz / planes)`` slabs.
    """
    tile = cuda.shared.array((2, SH3_Y, SH3_X), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    j = np.uint64(cuda.blockIdx.x) * np.uint64(cuda.blockDim.x) + np.uint64(tx)
    i = np.uint64(cuda.blockIdx.y) * np.uint64(cuda.blockDim.y) + np.uint64(ty)
    k = np.uint64(cuda.blockIdx.z) * planes
    end = min(k + planes, nz)  # the same for the whole block: every thread runs the same iterations
    plane = ny * nx
    inside = i < ny and j < nx
    col_in = inside and i > ZERO and j > ZERO and i + ONE < ny and j + ONE < nx
    # the neighbours outside the block that this thread needs (only interior columns compute)
    need_w = col_in and tx == 0
    need_e = col_in and tx == cuda.blockDim.x - 1
    need_n = col_in and ty == 0
    need_s = col_in and ty == cuda.blockDim.y - 1
    zero = float32(0)
    o = (k * ny + i) * nx + j if inside else ZERO
    below = u[o - plane] if inside and k > ZERO and k < nz else zero
    centre = u[o] if inside and k < nz else zero
    above = u[o + plane] if inside and k + ONE < nz else zero
    hw = u[o - ONE] if need_w and k < nz else zero
    he = u[o + ONE] if need_e and k < nz else zero
    hn = u[o - nx] if need_n and k < nz else zero
    hs = u[o + nx] if need_s and k < nz else zero
    p = 0
    while k < end:
        tile[p, ty, tx] = centre
        # prefetches for the next plane, issued before the barrier so that their latency overlaps it
        more = k + ONE < nz
        nxt = u[o + plane + plane] if inside and k + TWO < nz else zero
        nw = u[o + plane - ONE] if need_w and more else zero
        ne = u[o + plane + ONE] if need_e and more else zero
        nn = u[o + plane - nx] if need_n and more else zero
        ns = u[o + plane + nx] if need_s and more else zero
        cuda.syncthreads()  # RAW: the plane, written by the other threads, is in tile p before anyone reads it
        if inside:
            if col_in and k > ZERO and more:
                west = hw if tx == 0 else tile[p, ty, tx - 1]
                east = he if tx == cuda.blockDim.x - 1 else tile[p, ty, tx + 1]
                north = hn if ty == 0 else tile[p, ty - 1, tx]
                south = hs if ty == cuda.blockDim.y - 1 else tile[p, ty + 1, tx]
                v[o] = SIXTH * (((below + above) + (north + south)) + (west + east))
            else:
                v[o] = centre
        # (no second barrier: the next plane goes to the other tile; tile p is written again only after the
        # next iteration's barrier, which every thread reaches after it is done reading tile p)
        below = centre
        centre = above
        above = nxt
        hw, he, hn, hs = nw, ne, nn, ns
        o += plane
        k += ONE
        p = 1 - p


STENCIL3D_CANDIDATES = {"flat": stencil3d_flat, "march_regs": stencil3d_march_regs,
                        "march_vec4": stencil3d_march_vec4, "march_shared": stencil3d_march_shared}


# ---------------------------------------------------------------------------------------------
# Launches: checked once, then called with the flattened device arrays
# ---------------------------------------------------------------------------------------------


@dataclass
class CandidateLaunch:
    """One candidate kernel configured for one shape: ``launch(u_flat, v_flat)`` runs one step.

    Attributes:
        kernel: the kernel; ``griddim``, ``blockdim`` its launch; ``sizes`` the ``uint64`` sizes (and work per
            thread) passed after the two arrays; ``variant``, ``config`` describe it (``config`` as the sweep
            prints it, e.g. ``"block=64x4 rows=8"``).
    """

    variant: str
    kernel: Any
    griddim: tuple[int, ...]
    blockdim: tuple[int, ...]
    sizes: tuple[np.uint64, ...]
    config: str

    def __post_init__(self) -> None:
        validate.grid_shape(self.griddim)
        self._launch = ConfiguredKernel(self.kernel, self.griddim, self.blockdim)

    def __call__(self, u_flat, v_flat) -> None:
        """One step from ``u_flat`` into ``v_flat`` (flattened device arrays; asynchronous on a GPU)."""
        self._launch(u_flat, v_flat, *self.sizes)


def _check_aligned(a, name: str) -> None:
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None and iface["data"][0] % 16:
        raise ArrayArgumentError(f"{name} is a device array whose data does not start on a 16-byte boundary (a "
                                 f"sliced view?): the candidates read rows 16 bytes at a time. Pass a copy.")


def _work(value, default: int | None, name: str, what: str) -> int | None:
    if default is None:
        if value is not None:
            raise LaunchConfigError(f"this variant has no {name} (its threads {what}): leave {name}=None.")
        return None
    return validate.integer(default if value is None else value, name, minimum=1, maximum=2**31 - 1,
                            error=LaunchConfigError)


def jacobi_launch(variant: str, shape: tuple[int, int], block: tuple[int, int] | None = None,
                  chunks: int | None = None) -> CandidateLaunch:
    """The launch of Jacobi candidate ``variant`` on an ``ny x nx`` grid, checked.

    Args:
        variant: ``flat``, ``vec4`` or ``vec4_march``.
        shape: ``(ny, nx)``, each at least 1.
        block: threads (x, y); x runs over points (``flat``) or quads of four columns (``vec4*``). Default
            from :data:`JACOBI_DEFAULTS`.
        chunks: ``vec4_march`` only: chunks of :data:`VEC_ROWS` rows per thread (default 2: 8 rows).

    Raises:
        ArgumentError: an unknown variant, a bad shape, block or chunks (the message says what to change).
    """
    validate.choice(variant, "variant", list(JACOBI_CANDIDATES))
    ny = validate.integer(shape[0], "ny", minimum=1, error=ArrayArgumentError)
    nx = validate.integer(shape[1], "nx", minimum=1, error=ArrayArgumentError)
    default_block, default_work = JACOBI_DEFAULTS[variant]
    block = validate.block_shape(default_block if block is None else block)
    if len(block) != 2:
        raise LaunchConfigError(f"the Jacobi candidates take a 2D block (x, y), got {block}: e.g. block=(32, 8).")
    chunks = _work(chunks, default_work, "chunks", "compute one row each")
    bx, by = block
    sizes = (np.uint64(ny), np.uint64(nx))
    if variant == "flat":
        grid = (blocks_for(nx, bx), blocks_for(ny, by))
        config = f"block={bx}x{by}"
    elif variant == "vec4":
        grid = (blocks_for(nx, bx, 4), blocks_for(ny, by))
        config = f"block={bx}x{by} cols=4"
    else:
        grid = (blocks_for(nx, bx, 4), blocks_for(ny, by, VEC_ROWS * chunks))
        sizes += (np.uint64(chunks),)
        config = f"block={bx}x{by} cols=4 rows={VEC_ROWS * chunks}"
    return CandidateLaunch(variant, JACOBI_CANDIDATES[variant], grid, block, sizes, config)


def stencil3d_launch(variant: str, shape: tuple[int, int, int], block: tuple[int, ...] | None = None,
                     planes: int | None = None) -> CandidateLaunch:
    """The launch of 3D candidate ``variant`` on an ``nz x ny x nx`` volume, checked.

    Args:
        variant: ``flat``, ``march_regs``, ``march_vec4`` or ``march_shared``.
        shape: ``(nz, ny, nx)``, each at least 1.
        block: ``flat``: threads (x, y, z); the marching kernels: (x, y), x over points (quads for
            ``march_vec4``); ``march_shared`` at most (``SH3_X``, ``SH3_Y``). Default from :data:`STENCIL3D_DEFAULTS`.
        planes: the marching kernels: planes one block walks (the grid's z covers ``ceil(nz / planes)`` slabs).

    Raises:
        ArgumentError: an unknown variant, a bad shape, block or planes (the message says what to change).
    """
    validate.choice(variant, "variant", list(STENCIL3D_CANDIDATES))
    nz, ny, nx = (validate.integer(s, name, minimum=1, error=ArrayArgumentError)
                  for s, name in zip(shape, ("nz", "ny", "nx")))
    default_block, default_work = STENCIL3D_DEFAULTS[variant]
    block = validate.block_shape(default_block if block is None else block)
    planes = _work(planes, default_work, "planes", "compute one point each")
    sizes = (np.uint64(nz), np.uint64(ny), np.uint64(nx))
    if variant == "flat":
        if len(block) != 3:
            raise LaunchConfigError(f"stencil3d_flat takes a 3D block (x, y, z), got {block}: e.g. block=(32, 8, 1).")
        bx, by, bz = block
        grid = (blocks_for(nx, bx), blocks_for(ny, by), blocks_for(nz, bz))
        return CandidateLaunch(variant, stencil3d_flat, grid, block, sizes, f"block={bx}x{by}x{bz}")
    if len(block) != 2:
        raise LaunchConfigError(f"{STENCIL3D_CANDIDATES[variant].__name__} takes a 2D block (x, y), got {block}: "
                                "e.g. block=(32, 8); its threads walk along z themselves.")
    bx, by = block
    if variant == "march_shared" and (bx > SH3_X or by > SH3_Y):
        raise LaunchConfigError(f"block={block} does not fit the shared tiles of stencil3d_march_shared, which have "
                                f"room for blocks up to ({SH3_X}, {SH3_Y}): use block=({min(bx, SH3_X)}, "
                                f"{min(by, SH3_Y)}).")
    per_x = 4 if variant == "march_vec4" else 1
    grid = (blocks_for(nx, bx, per_x), blocks_for(ny, by), blocks_for(nz, 1, planes))
    config = f"block={bx}x{by}{' cols=4' if per_x == 4 else ''} planes={planes}"
    return CandidateLaunch(variant, STENCIL3D_CANDIDATES[variant], grid, block, sizes + (np.uint64(planes),), config)


def _ping_pong(u, launch: CandidateLaunch, steps: int, shape: tuple[int, ...]) -> np.ndarray:
    a = cuda.device_array(shape, dtype=np.float32)
    a.copy_to_device(to_device(u))
    b = cuda.device_array(shape, dtype=np.float32)
    for _ in range(steps):
        launch(flat(a), flat(b))
        a, b = b, a
    return a.copy_to_host()


def run_jacobi_candidate(u, steps: int = 1, variant: str = "vec4_march", block: tuple[int, int] | None = None,
                         chunks: int | None = None) -> np.ndarray:
    """Run ``steps`` Jacobi steps of candidate ``variant`` on the float32 field ``u``; returns NumPy.

    Args:
        u: 2-D C-contiguous float32 array without NaN or infinity (NumPy, CuPy or Numba device array).
        steps: number of steps (ping-pong between two buffers).
        variant, block, chunks: as :func:`jacobi_launch`.

    Raises:
        ArgumentError: wrong dtype or shape, an empty grid, NaN or infinity, a bad block, chunks or variant.
    """
    validate.choice(variant, "variant", list(JACOBI_CANDIDATES))
    steps = validate.integer(steps, "steps", minimum=0)
    validate.array(u, "u", dtype=np.float32, ndim=2, finite=isinstance(u, np.ndarray))
    if 0 in u.shape:
        raise ArrayArgumentError(f"u has shape {tuple(u.shape)}: a grid needs at least one point.")
    _check_aligned(u, "u")
    shape = (int(u.shape[0]), int(u.shape[1]))
    return _ping_pong(u, jacobi_launch(variant, shape, block, chunks), steps, shape)


def run_stencil3d_candidate(u, steps: int = 1, variant: str = "march_vec4", block: tuple[int, ...] | None = None,
                            planes: int | None = None) -> np.ndarray:
    """Run ``steps`` 3D 7-point steps of candidate ``variant`` on the float32 volume ``u[z, y, x]``; returns NumPy.

    Args:
        u: 3-D C-contiguous float32 array without NaN or infinity (NumPy, CuPy or Numba device array).
        steps: number of steps (ping-pong between two buffers).
        variant, block, planes: as :func:`stencil3d_launch`.

    Raises:
        ArgumentError: wrong dtype or shape, an empty volume, NaN or infinity, a bad block, planes or variant.
    """
    validate.choice(variant, "variant", list(STENCIL3D_CANDIDATES))
    steps = validate.integer(steps, "steps", minimum=0)
    validate.array(u, "u", dtype=np.float32, ndim=3, finite=isinstance(u, np.ndarray))
    if 0 in u.shape:
        raise ArrayArgumentError(f"u has shape {tuple(u.shape)}: a volume needs at least one point.")
    _check_aligned(u, "u")
    shape = (int(u.shape[0]), int(u.shape[1]), int(u.shape[2]))
    return _ping_pong(u, stencil3d_launch(variant, shape, block, planes), steps, shape)


__all__ = [
    "CandidateLaunch",
    "flat",
    "JACOBI_CANDIDATES",
    "JACOBI_DEFAULTS",
    "jacobi_flat",
    "jacobi_launch",
    "jacobi_vec4",
    "jacobi_vec4_march",
    "run_jacobi_candidate",
    "run_stencil3d_candidate",
    "SH3_X",
    "SH3_Y",
    "STENCIL3D_CANDIDATES",
    "STENCIL3D_DEFAULTS",
    "stencil3d_flat",
    "stencil3d_launch",
    "stencil3d_march_regs",
    "stencil3d_march_shared",
    "stencil3d_march_vec4",
    "VEC_ROWS",
]
