"""Chapter "n-body": all-pairs gravity, from a naive kernel to most of the FP32 peak.

The physics (units with ``G = 1``): body ``i`` at ``x_i`` feels the acceleration

    a_i = sum_j m_j (x_j - x_i) / (|x_j - x_i|^2 + eps^2)^(3/2)

summed over *every* body ``j``, itself included. The softening ``eps^2 > 0`` keeps close encounters
finite, and it also makes the self term harmless: for ``j == i`` the difference is zero and the
denominator ``eps^3``, so the term is exactly 0 and no kernel needs an ``if j != i`` branch.

Layouts. The array of structures (AoS) holds one body per row, ``pos[i] = (x, y, z, m)``, shape
``(n, 4)`` float32: 16 bytes per body, the float4 of CUDA C++. The structure of arrays (SoA) holds
one row per field, shape ``(4, n)``: ``pos[0]`` all x, ``pos[1]`` all y... Accelerations come back in
the same layout: ``(n, 3)`` for AoS, ``(3, n)`` for SoA.

The kernels, one lesson each (every one correct for every ``n``):

* :func:`body_body`: one interaction, 20 flops by the usual convention, 13 instructions.
* :func:`make_naive`: one thread per body, every other body read from global memory, the loop over
  bodies unrolled by a compile-time factor (1, 4, 16) with a tail loop for the rest.
* :func:`make_tiled`: a block stages a tile of bodies in shared memory (loads guarded, zero-mass
  padding past the end, two barriers per tile reached by every thread); optionally several bodies
  per thread, so that each body read from shared memory serves several interactions.
* :func:`nbody_shuffle`: the tile without shared memory: each lane of a warp loads one body into
  registers and ``shfl_sync`` broadcasts it to the 31 others (GPU only: no warp intrinsics in the simulator).
* :func:`make_constant`: the j-bodies in constant memory (at most :data:`CONST_BODIES`), read by every
  lane of a warp at the same address: the constant cache's broadcast.
* :func:`make_streamk`: the tiled kernel's work (groups of i-bodies x tiles of j-bodies) shared out evenly
  over a grid of as many blocks as run at once, partial sums added atomically: no last wave of idle SMs.
* :func:`nbody_tiled_seed`: PITFALL, the lecture notes' tiled kernel (reads past the end of the
  array, barriers inside a grid-stride loop). Shown, run and fixed by :func:`make_tiled`.

Numba traps, as ``math_mode`` of the factories: ``"rsqrt"`` (the hardware reciprocal square root,
the default), ``"fast"`` (``float32(1) / math.sqrt(r2)`` with ``fastmath=True``), ``"precise"``
(the same without fastmath: an IEEE square root and an IEEE division) and ``"float64"``
(``1 / math.sqrt(r2)``: the integer 1 divided by a float32 is a float64 in Numba, and everything
after it is computed in double precision).

Host side: :func:`run_naive`, :func:`run_tiled`, :func:`run_streamk` and :func:`run_seed_tiled` validate their input,
launch and return NumPy arrays; :func:`accelerations_numpy` is the float64 specification;
:func:`energy`, :func:`momentum`, :func:`leapfrog_numpy` and :func:`simulate` integrate; the
initial conditions are :func:`plummer_sphere`, :func:`galaxy_collision` and :func:`circular_binary`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numba
import numpy as np
from numba import cuda, float32

from .. import backend, validate
from ..arrays import to_host
from ..counts import NBODY_FLOPS_PER_INTERACTION as FLOPS_PER_INTERACTION
from ..counts import nbody_bytes as bytes_moved
from ..counts import nbody_flops as flops
from ..counts import nbody_interactions as interactions
from ..errors import ArgumentError, ArrayArgumentError
from ..launch import blocks_for

# FLOPS_PER_INTERACTION (20, imported from labhelpers.counts): the convention of Nyland, Harris and Prins,
# *Fast N-Body Simulation with CUDA* (GPU Gems 3, 2007): 3 subtractions, 6 for the squared distance plus
# softening, 4 for the inverse cube (the square root and the division count 2), 1 for the mass, 6 for the
# accumulation.
#: The softening length of the chapter's simulations (in units of the Plummer scale radius).
DEFAULT_SOFTENING = 0.05
DEFAULT_EPS2 = DEFAULT_SOFTENING**2
#: Tile sizes (= threads per block) :func:`make_tiled` is built for.
TILES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
#: Compile-time unroll factors of the loops over bodies.
UNROLLS: tuple[int, ...] = (1, 2, 4, 8, 16)
#: Bodies per thread of the tiled kernel.
BODIES: tuple[int, ...] = (1, 2, 4, 8)
LAYOUTS: tuple[str, ...] = ("aos", "soa")
MATH_MODES: tuple[str, ...] = ("rsqrt", "fast", "precise", "float64")
#: Most bodies a block of the tiled kernel may own (``tile * bodies``): 1024 threads x 8 bodies need about 80
#: registers per thread, more than the 65,536 of an SM.
MAX_BODIES_PER_BLOCK = 4096
#: Largest block of the lecture's (pitfall) kernel: the size of its shared tile.
SEED_MAX_TILE = 1024
#: A float32 acceleration must match the float64 reference within this fraction of the sum of the
#: magnitudes of its terms, ``sum_j m_j |d_ij| / (r^2 + eps^2)^(3/2)`` (cancellation-proof: a body at
#: the centre of a symmetric cluster has a tiny acceleration made of large terms). Rounding in a float32
#: sum of n terms grows like sqrt(n) times float32's unit roundoff 6e-8 for random data, and the hardware
#: rsqrt is good to about 2 ulp: 1e-4 passes every correct kernel up to n = 2^18, while a missing tile,
#: a repeated one or an unwritten body misses it by orders of magnitude.
ACC_RTOL = 1e-4

_ALIGN = None if backend.is_simulator() else 16  # 16-byte shared tiles on a GPU: one 128-bit load per body


class UnknownKernelError(ArgumentError):
    """A kernel configuration the factories do not build."""


# ------------------------------------------------------------------------------------- one interaction


def body_body(xi, yi, zi, xj, yj, zj, mj, eps2):
    """The acceleration body j (mass ``mj``) gives body i: 20 flops, 13 instructions.

    ``r2`` starts from ``eps2`` so that the three squares fold into three fused multiply-adds.
    With ``fastmath=True`` the division and the square root are approximate; without it they are
    IEEE-exact (a slow division and a slow square root). Compiled as :data:`interaction_fast` and
    :data:`interaction_precise`.
    """
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = eps2 + dx * dx + dy * dy + dz * dz  # > 0 for every pair, i == j included
    inv_r = float32(1) / math.sqrt(r2)
    s = mj * inv_r * inv_r * inv_r  # m_j / (r^2 + eps^2)^(3/2)
    return dx * s, dy * s, dz * s


def body_body_float64(xi, yi, zi, xj, yj, zj, mj, eps2):
    """PITFALL: ``1 / math.sqrt(r2)``: an int divided by a float32 is a float64 in Numba.

    Everything computed from ``inv_r`` (``s``, the three results, the sums they go into) is then
    double precision: correct, and several times slower on a GPU built for float32.
    """
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = eps2 + dx * dx + dy * dy + dz * dz
    inv_r = 1 / math.sqrt(r2)  # float64 from here on
    s = mj * inv_r * inv_r * inv_r
    return dx * s, dy * s, dz * s


def _rsqrt_python(x):
    return float32(1) / math.sqrt(x)


def _numba_simulates() -> bool:
    """Whether ``numba.cuda`` is the simulator in this process (also in a child process that the race
    detector starts from a GPU process, where labhelpers' own backend setting says "gpu")."""
    from numba.cuda.core import config  # numba-cuda's config: read after the backend is chosen

    return bool(config.ENABLE_CUDASIM)


if _numba_simulates():  # the simulator has no libdevice (its stubs return None): the same value, in Python
    rsqrt = cuda.jit(device=True)(_rsqrt_python)
else:
    from numba.cuda import libdevice

    rsqrt = libdevice.rsqrtf  # __nv_rsqrtf: one rsqrt.approx instruction (with fastmath's flush-to-zero)


def body_body_rsqrt(xi, yi, zi, xj, yj, zj, mj, eps2):
    """:func:`body_body` with the hardware reciprocal square root (``rsqrt``) spelled out.

    ``rsqrt(r2)`` is one instruction on the GPU's special-function unit (MUFU.RSQ), relative error
    about 2^-23; ``float32(1) / math.sqrt(r2)`` asks for a square root and a division, which the
    compiler may or may not fuse into it.
    """
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = eps2 + dx * dx + dy * dy + dz * dz
    inv_r = rsqrt(r2)
    s = mj * inv_r * inv_r * inv_r
    return dx * s, dy * s, dz * s


interaction_fast = cuda.jit(device=True, fastmath=True)(body_body)
interaction_precise = cuda.jit(device=True)(body_body)
interaction_rsqrt = cuda.jit(device=True, fastmath=True)(body_body_rsqrt)
interaction_float64 = cuda.jit(device=True)(body_body_float64)

#: ``math_mode -> (device function, fastmath flag of the kernels that call it)``.
INTERACTIONS = {
    "rsqrt": (interaction_rsqrt, True),
    "fast": (interaction_fast, True),
    "precise": (interaction_precise, False),
    "float64": (interaction_float64, False),
}

# ------------------------------------------------------------------------------------- the two layouts


@cuda.jit(device=True)
def aos_count(pos):
    """Bodies in an AoS array ``(n, 4)``."""
    return pos.shape[0]


@cuda.jit(device=True)
def aos_load(pos, j):
    """Body ``j`` of an AoS array: x, y, z, m (16 consecutive bytes)."""
    return pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]


@cuda.jit(device=True)
def aos_store(acc, i, ax, ay, az):
    """Acceleration of body ``i`` into an AoS ``(n, 3)`` array."""
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az


@cuda.jit(device=True)
def soa_count(pos):
    """Bodies in an SoA array ``(4, n)``."""
    return pos.shape[1]


@cuda.jit(device=True)
def soa_load(pos, j):
    """Body ``j`` of an SoA array: four floats from four rows, ``4 n`` bytes apart."""
    return pos[0, j], pos[1, j], pos[2, j], pos[3, j]


@cuda.jit(device=True)
def soa_store(acc, i, ax, ay, az):
    """Acceleration of body ``i`` into an SoA ``(3, n)`` array."""
    acc[0, i] = ax
    acc[1, i] = ay
    acc[2, i] = az


#: ``layout -> (count, load, store)`` device functions.
LAYOUT_FUNCTIONS = {"aos": (aos_count, aos_load, aos_store), "soa": (soa_count, soa_load, soa_store)}


# ------------------------------------------------------------------------------------------- kernels


def _check_choice(value, name, options):
    try:
        return validate.choice(value, name, options)
    except ArgumentError as exc:
        raise UnknownKernelError(str(exc)) from None


@functools.lru_cache(maxsize=None)
def make_naive(unroll: int = 1, layout: str = "aos", math_mode: str = "rsqrt"):
    """The naive kernel ``kernel(pos, eps2, acc)``: one thread per body, all bodies from global memory.

    Every thread of a warp reads the same body ``j`` at the same time (one broadcast load, served by
    the L1 cache); ``unroll`` bodies per trip of the loop are a compile-time constant, so the inner
    loop is unrolled completely, and a tail loop takes the ``n % unroll`` bodies left over (the
    lecture's ``#pragma unroll 16`` silently assumed ``n`` was a multiple of 16). One compiled kernel
    per configuration, cached.
    """
    U = _check_choice(unroll, "unroll", UNROLLS)
    count, load, store = LAYOUT_FUNCTIONS[_check_choice(layout, "layout", LAYOUTS)]
    interact, fast = INTERACTIONS[_check_choice(math_mode, "math_mode", MATH_MODES)]

    @cuda.jit(fastmath=fast)
    def nbody_naive(pos, eps2, acc):
        i = cuda.grid(1)
        n = count(pos)
        if i < n:  # no barrier in this kernel: the guard may cover the whole body
            xi, yi, zi, _mi = load(pos, i)
            ax = float32(0)
            ay = float32(0)
            az = float32(0)
            n_main = n - n % U
            for j0 in range(0, n_main, U):
                for u in range(U):  # U is a compile-time constant: unrolled completely
                    xj, yj, zj, mj = load(pos, j0 + u)
                    fx, fy, fz = interact(xi, yi, zi, xj, yj, zj, mj, eps2)
                    ax += fx
                    ay += fy
                    az += fz
            for j in range(n_main, n):  # the tail: n need not be a multiple of U
                xj, yj, zj, mj = load(pos, j)
                fx, fy, fz = interact(xi, yi, zi, xj, yj, zj, mj, eps2)
                ax += fx
                ay += fy
                az += fz
            store(acc, i, ax, ay, az)

    return nbody_naive


@functools.lru_cache(maxsize=None)
def make_tiled(tile: int = 256, unroll: int = 4, bodies: int = 1, layout: str = "aos", math_mode: str = "rsqrt"):
    """The shared-memory kernel ``kernel(pos, eps2, acc)``, launched with ``tile`` threads per block.

    A block owns ``tile * bodies`` bodies (thread ``t`` the bodies ``t``, ``t + tile``, ...). For each
    tile of ``tile`` bodies, every thread copies one body into shared memory (a body past the end
    becomes a zero-mass body at the origin, which adds exactly nothing), the block waits, every
    thread runs through the tile for each of its bodies, and the block waits again before the next
    tile overwrites it. The loop over tiles runs the same number of times in every thread (it
    depends on ``n`` only), so every thread reaches every barrier; threads without a body of their
    own compute on a dummy position and store nothing. ``unroll`` bodies of the tile per trip of the
    inner loop, a compile-time constant.
    """
    T = _check_choice(tile, "tile", TILES)
    U = _check_choice(unroll, "unroll", UNROLLS)
    P = _check_choice(bodies, "bodies", BODIES)
    if T % U:
        raise UnknownKernelError(f"unroll={U} must divide tile={T}: choose one of "
                                 f"{[u for u in UNROLLS if T % u == 0]}")
    if T * P > MAX_BODIES_PER_BLOCK:
        raise UnknownKernelError(f"tile={T} with bodies={P} is {T * P} bodies per block: a block of {T} threads "
                                 f"holding {P} bodies each needs more registers than an SM has (at most "
                                 f"{MAX_BODIES_PER_BLOCK} bodies per block: fewer bodies per thread, or a smaller tile)")
    count, load, store = LAYOUT_FUNCTIONS[_check_choice(layout, "layout", LAYOUTS)]
    interact, fast = INTERACTIONS[_check_choice(math_mode, "math_mode", MATH_MODES)]
    align = _ALIGN

    @cuda.jit(fastmath=fast)
    def nbody_tiled(pos, eps2, acc):
        sh = cuda.shared.array((T, 4), float32, alignment=align)  # one tile: x, y, z, m of T bodies
        xi = cuda.local.array(P, float32)  # this thread's P bodies and their sums: registers
        yi = cuda.local.array(P, float32)
        zi = cuda.local.array(P, float32)
        ax = cuda.local.array(P, float32)
        ay = cuda.local.array(P, float32)
        az = cuda.local.array(P, float32)
        n = count(pos)
        t = cuda.threadIdx.x
        first = cuda.blockIdx.x * (T * P) + t
        for p in range(P):
            i = first + p * T
            x, y, z = float32(0), float32(0), float32(0)
            if i < n:  # guard the load, not the work: every thread goes on to the barriers
                x, y, z, _m = load(pos, i)
            xi[p], yi[p], zi[p] = x, y, z
            ax[p], ay[p], az[p] = float32(0), float32(0), float32(0)
        for start in range(0, n, T):  # the same trip count in every thread of the block
            j = start + t
            x, y, z, m = float32(0), float32(0), float32(0), float32(0)
            if j < n:  # past the end: a zero-mass body, which adds exactly 0
                x, y, z, m = load(pos, j)
            sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = x, y, z, m
            cuda.syncthreads()  # RAW: the whole tile is in shared memory before anyone reads it
            for k0 in range(0, T, U):
                for u in range(U):  # compile-time trip count: unrolled
                    xk, yk, zk, mk = sh[k0 + u, 0], sh[k0 + u, 1], sh[k0 + u, 2], sh[k0 + u, 3]
                    for p in range(P):  # one body from shared memory, P interactions
                        fx, fy, fz = interact(xi[p], yi[p], zi[p], xk, yk, zk, mk, eps2)
                        ax[p] += fx
                        ay[p] += fy
                        az[p] += fz
            cuda.syncthreads()  # WAR: everyone has read the tile before the next trip overwrites it
        for p in range(P):
            i = first + p * T
            if i < n:
                store(acc, i, ax[p], ay[p], az[p])

    return nbody_tiled


@cuda.jit(fastmath=True)
def nbody_tiled_seed(pos, eps2, acc):
    """PITFALL (do not use): the tiled kernel as the lecture notes write it, translated to Numba.

    Two bugs. The tile load ``pos[start + t]`` reads past the end of ``pos`` whenever ``n`` is not a
    multiple of the block size. And the barriers sit inside the grid-stride loop over ``i``, whose
    trip count differs between threads: a thread with no body (or one body fewer) leaves the loop
    while the others wait at a barrier it never reaches (undefined behaviour; a hang on older GPUs).
    """
    sh = cuda.shared.array((SEED_MAX_TILE, 4), float32)
    t = cuda.threadIdx.x
    n = pos.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):  # grid-stride loop
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = float32(0)
        ay = float32(0)
        az = float32(0)
        for start in range(0, n, cuda.blockDim.x):
            j = start + t
            sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]  # no guard
            cuda.syncthreads()  # inside a loop some threads have left
            for k in range(cuda.blockDim.x):
                fx, fy, fz = interaction_fast(xi, yi, zi, sh[k, 0], sh[k, 1], sh[k, 2], sh[k, 3], eps2)
                ax += fx
                ay += fy
                az += fz
            cuda.syncthreads()
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@cuda.jit(fastmath=True)
def nbody_tiled_grid_stride(pos, eps2, acc):
    """PITFALL (do not use): :func:`nbody_tiled_seed` with its tile load guarded, barriers still in the grid-stride loop.

    When ``n`` is not a multiple of the grid, some threads of a block leave the grid-stride loop one trip
    before the others, and those wait at a barrier the leavers never reach (undefined behaviour). The
    threads that left also stop loading their share of the tile, so the others compute with whatever
    the previous tile left there: wrong results, without a single out-of-bounds access.
    """
    sh = cuda.shared.array((SEED_MAX_TILE, 4), float32)
    t = cuda.threadIdx.x
    n = pos.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):  # trip count differs between threads
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = float32(0)
        ay = float32(0)
        az = float32(0)
        for start in range(0, n, cuda.blockDim.x):
            j = start + t
            x, y, z, m = float32(0), float32(0), float32(0), float32(0)
            if j < n:  # the overread is fixed...
                x, y, z, m = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]
            sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = x, y, z, m
            cuda.syncthreads()  # ...but this barrier is still inside a loop some threads have left
            for k in range(cuda.blockDim.x):
                fx, fy, fz = interaction_fast(xi, yi, zi, sh[k, 0], sh[k, 1], sh[k, 2], sh[k, 3], eps2)
                ax += fx
                ay += fy
                az += fz
            cuda.syncthreads()
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


# ------------------------------------------------------------------------------- the leapfrog step


@cuda.jit(fastmath=True)
def kick(vel, acc, h):
    """``v += h * a`` for every body (``h`` is half a time step in kick-drift-kick)."""
    i = cuda.grid(1)
    if i < vel.shape[0]:
        vel[i, 0] += h * acc[i, 0]
        vel[i, 1] += h * acc[i, 1]
        vel[i, 2] += h * acc[i, 2]


@cuda.jit(fastmath=True)
def drift(pos, vel, dt):
    """``x += dt * v`` for every body (the mass in column 3 stays as it is)."""
    i = cuda.grid(1)
    if i < pos.shape[0]:
        pos[i, 0] += dt * vel[i, 0]
        pos[i, 1] += dt * vel[i, 1]
        pos[i, 2] += dt * vel[i, 2]


# ------------------------------------------------------------------------- alternatives to the shared tile

#: All 32 lanes of a warp take part in a shuffle.
FULL_MASK = 0xFFFFFFFF
#: Bodies that fit in constant memory: 64 KiB / 16 bytes (x, y, z, m as float32).
CONST_BODIES = 4096


@cuda.jit(fastmath=True)
def nbody_shuffle(pos, eps2, acc):
    """One thread per body (AoS); the j-bodies travel through registers, 32 at a time, by warp shuffles.

    For each chunk of 32 bodies, lane ``l`` of every warp loads body ``start + l`` (a zero-mass body
    past the end); then, 32 times, ``shfl_sync`` hands every lane the body lane ``k`` loaded: a
    register-to-register broadcast inside the warp, no shared memory and no barrier (a warp's lanes
    run the shuffles together; the block's other warps are not involved). Every thread, with or
    without a body of its own, runs every chunk: a shuffle needs all 32 lanes of the mask. GPU only.
    """
    i = cuda.grid(1)
    n = pos.shape[0]
    lane = cuda.threadIdx.x % 32
    xi, yi, zi = float32(0), float32(0), float32(0)
    if i < n:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
    ax, ay, az = float32(0), float32(0), float32(0)
    for start in range(0, n, 32):  # the same trip count in every lane
        j = start + lane
        xj, yj, zj, mj = float32(0), float32(0), float32(0), float32(0)
        if j < n:
            xj, yj, zj, mj = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]
        for k in range(32):
            xk = cuda.shfl_sync(FULL_MASK, xj, k)  # lane k's body, broadcast to the whole warp
            yk = cuda.shfl_sync(FULL_MASK, yj, k)
            zk = cuda.shfl_sync(FULL_MASK, zj, k)
            mk = cuda.shfl_sync(FULL_MASK, mj, k)
            fx, fy, fz = interaction_rsqrt(xi, yi, zi, xk, yk, zk, mk, eps2)
            ax += fx
            ay += fy
            az += fz
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def make_constant(sources: np.ndarray):
    """A kernel ``kernel(pos, eps2, acc)``: the accelerations of ``pos`` due to ``sources`` held in constant memory.

    ``sources`` (AoS, at most :data:`CONST_BODIES` bodies: constant memory holds 64 KiB) is copied into
    the kernel as a constant array **when it is compiled**: Numba has no ``cudaMemcpyToSymbol``, so new
    source positions mean a new kernel (fine for a fixed set of sources, such as a static potential;
    for a simulation, whose bodies move every step, CUDA C++ would copy into the ``__constant__``
    array before each launch). Every lane of a warp reads the same source ``j`` at the same time: one
    constant-cache read, broadcast to all of them.
    """
    n_src = check_positions(sources, "aos", "sources")
    if n_src > CONST_BODIES:
        raise ArrayArgumentError(f"sources holds {n_src} bodies, more than the {CONST_BODIES} (64 KiB) that constant "
                                 "memory holds: pass at most that many, or use the tiled kernel.")
    data = np.ascontiguousarray(to_soa(np.asarray(sources, dtype=np.float32)))  # rows x, y, z, m
    interact = interaction_rsqrt

    @cuda.jit(fastmath=True)
    def nbody_constant(pos, eps2, acc):
        src = cuda.const.array_like(data)  # 4 x n_src floats, in constant memory
        i = cuda.grid(1)
        n = pos.shape[0]
        if i < n:  # no barrier, no shuffle: the guard may cover the whole body
            xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
            ax, ay, az = float32(0), float32(0), float32(0)
            for j in range(src.shape[1]):  # every lane reads src[:, j]: the same address, a broadcast
                fx, fy, fz = interact(xi, yi, zi, src[0, j], src[1, j], src[2, j], src[3, j], eps2)
                ax += fx
                ay += fy
                az += fz
            acc[i, 0] = ax
            acc[i, 1] = ay
            acc[i, 2] = az

    return nbody_constant


def run_shuffle(pos, eps2: float = DEFAULT_EPS2, *, threads: int = 256) -> np.ndarray:
    """Accelerations with :func:`nbody_shuffle` (AoS), as a NumPy array. GPU only.

    Raises:
        GPUOnlyError: under the simulator, which has no warp shuffles.
        ArgumentError: bad positions, softening, or a block that is not a whole number of warps.
    """
    n = check_positions(pos, "aos")
    e = _eps2(eps2)
    threads = validate.threads_per_block(threads)
    if threads % 32:
        raise ArgumentError(f"threads={threads}: the shuffle kernel needs whole warps (a multiple of 32), "
                            f"e.g. threads={max(32, threads - threads % 32)}.")
    backend.require_gpu("nbody_shuffle", because="uses cuda.shfl_sync, which Numba's CUDA simulator does not have",
                        instead="The chapter shows the tiled kernel's results and the reference timings instead.")
    acc = cuda.device_array((n, 3), dtype=np.float32)
    nbody_shuffle[blocks_for(n, threads), threads](_device(pos), e, acc)
    return to_host(acc)


def run_constant(pos, sources=None, eps2: float = DEFAULT_EPS2, *, threads: int = 256) -> np.ndarray:
    """Accelerations of ``pos`` due to ``sources`` (default: ``pos`` itself) with :func:`make_constant`; NumPy.

    Compiles a kernel for these sources (see :func:`make_constant`).
    """
    n = check_positions(pos, "aos")
    sources = pos if sources is None else sources
    e = _eps2(eps2)
    threads = validate.threads_per_block(threads)
    kernel = make_constant(to_host(sources) if not isinstance(sources, np.ndarray) else sources)
    acc = cuda.device_array((n, 3), dtype=np.float32)
    kernel[blocks_for(n, threads), threads](_device(pos), e, acc)
    return to_host(acc)


# --------------------------------------------------------------------- stream-K: the last wave, balanced

#: Bodies of the tile per trip of the stream-K kernel's inner loop, each one written out as a call.
STREAMK_UNROLLS: tuple[int, ...] = (4, 8, 16)
#: Blocks per SM of the stream-K grid by default: two blocks of 512 threads fit in an SM's 65,536 registers.
STREAMK_PER_SM = 2
#: SMs the stream-K grid assumes under the simulator: few, so that small tests still cut an i-block between blocks.
SIM_SMS = 3


@functools.lru_cache(maxsize=None)
def _steps(bodies: int) -> dict:
    """``{4: four, 8: eight, 16: sixteen}``: device functions for that many j-bodies of the tile, as explicit calls
    (nothing left for the compiler to unroll, or to decline to). One j-body: one shared load, ``bodies`` interactions."""
    P = bodies

    @cuda.jit(device=True)
    def one(sh, k, eps2, xi, yi, zi, ax, ay, az):
        xk, yk, zk, mk = sh[k, 0], sh[k, 1], sh[k, 2], sh[k, 3]
        for p in range(P):
            fx, fy, fz = interaction_rsqrt(xi[p], yi[p], zi[p], xk, yk, zk, mk, eps2)
            ax[p] += fx
            ay[p] += fy
            az[p] += fz

    def doubled(step, half):
        @cuda.jit(device=True)
        def twice(sh, k, eps2, xi, yi, zi, ax, ay, az):
            step(sh, k, eps2, xi, yi, zi, ax, ay, az)
            step(sh, k + half, eps2, xi, yi, zi, ax, ay, az)
        return twice

    two = doubled(one, 1)
    four = doubled(two, 2)
    eight = doubled(four, 4)
    return {4: four, 8: eight, 16: doubled(eight, 8)}


@functools.lru_cache(maxsize=None)
def make_streamk(tile: int = 512, unroll: int = 16, bodies: int = 4):
    """The tiled kernel's work shared out evenly over any grid (stream-K): ``kernel(pos, eps2, acc)``, AoS, rsqrt.

    The work is ``W = groups x tiles`` units: ``ceil(n / (tile bodies))`` groups of i-bodies (a block's bodies in
    :func:`make_tiled`) times ``ceil(n / tile)`` tiles of j-bodies. Block ``g`` of ``G`` takes units ``[g W / G,
    (g + 1) W / G)``, as many as every other block give or take one, and walks them as segments within one group:
    tiles as in :func:`make_tiled` (``unroll`` j-bodies per trip, written out), then atomic adds of the partial sums
    into ``acc``, zeroed first (:func:`launch_streamk`). Their order varies: the last bits of the result vary from
    run to run, within :data:`ACC_RTOL`. ``n``, ``g``, ``G`` decide every loop: every thread reaches every barrier.
    """
    T = _check_choice(tile, "tile", TILES)  # every tile (32 to 1024) is a multiple of every unroll (4 to 16)
    U = _check_choice(unroll, "unroll", STREAMK_UNROLLS)
    P = _check_choice(bodies, "bodies", BODIES)
    if T * P > MAX_BODIES_PER_BLOCK:
        raise UnknownKernelError(f"tile={T} with bodies={P} is {T * P} bodies per block, more than the "
                                 f"{MAX_BODIES_PER_BLOCK} whose registers fit in an SM: fewer bodies, or a smaller tile")
    step, align = _steps(P)[U], _ALIGN
    T32, U32 = numba.int32(T), numba.int32(U)

    @cuda.jit(fastmath=True)
    def nbody_streamk(pos, eps2, acc):
        sh = cuda.shared.array((T, 4), float32, alignment=align)
        xi = cuda.local.array(P, float32)
        yi = cuda.local.array(P, float32)
        zi = cuda.local.array(P, float32)
        ax = cuda.local.array(P, float32)
        ay = cuda.local.array(P, float32)
        az = cuda.local.array(P, float32)
        n = pos.shape[0]
        t = cuda.threadIdx.x
        tiles = (n + T - 1) // T
        work = ((n + T * P - 1) // (T * P)) * tiles
        g, grid = cuda.blockIdx.x, cuda.gridDim.x
        u = (g * work) // grid  # int64: no overflow for any n a GPU can hold
        end = ((g + 1) * work) // grid
        while u < end:  # one segment: tiles t0 .. t1-1 of group b
            b = u // tiles
            t0 = u - b * tiles
            t1 = min(tiles, t0 + (end - u))
            first = b * (T * P) + t
            for p in range(P):
                i = first + p * T
                x, y, z = float32(0), float32(0), float32(0)
                if i < n:  # guard the load, not the work
                    x, y, z = pos[i, 0], pos[i, 1], pos[i, 2]
                xi[p], yi[p], zi[p] = x, y, z
                ax[p], ay[p], az[p] = float32(0), float32(0), float32(0)
            for tl in range(t0, t1):
                j = tl * T + t
                x, y, z, m = float32(0), float32(0), float32(0), float32(0)
                if j < n:  # past the end: a zero-mass body
                    x, y, z, m = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]
                sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = x, y, z, m
                cuda.syncthreads()  # RAW: the whole tile is in shared memory before anyone reads it
                k = numba.int32(0)
                while k < T32:  # 32-bit counter, compile-time bound: U j-bodies per trip, written out
                    step(sh, k, eps2, xi, yi, zi, ax, ay, az)
                    k += U32
                cuda.syncthreads()  # WAR: everyone has read the tile before the next one overwrites it
            for p in range(P):  # partial sums: other blocks may add to the same bodies
                i = first + p * T
                if i < n:
                    cuda.atomic.add(acc, (i, 0), ax[p])
                    cuda.atomic.add(acc, (i, 1), ay[p])
                    cuda.atomic.add(acc, (i, 2), az[p])
            u += t1 - t0

    return nbody_streamk


@cuda.jit
def zero_rows(acc):
    """``acc[:] = 0`` for an ``(n, 3)`` float32 array (the stream-K kernel adds into it)."""
    i = cuda.grid(1)
    if i < acc.shape[0]:
        acc[i, 0], acc[i, 1], acc[i, 2] = float32(0), float32(0), float32(0)


def streamk_grid(per_sm: int = STREAMK_PER_SM, sms: int | None = None) -> int:
    """Blocks of the stream-K grid: ``sms x per_sm`` (``sms``: this GPU's SM count; :data:`SIM_SMS` simulated)."""
    if sms is None:
        sms = SIM_SMS if backend.is_simulator() else cuda.get_current_device().MULTIPROCESSOR_COUNT
    return validate.integer(sms, "sms", minimum=1) * validate.integer(per_sm, "per_sm", minimum=1)


def launch_streamk(pos_d, eps2, acc_d, *, blocks: int, tile: int = 512, unroll: int = 16, bodies: int = 4) -> None:
    """Zero ``acc_d``, then launch :func:`make_streamk` with ``blocks`` blocks (device arrays, no checks)."""
    zero_rows[blocks_for(acc_d.shape[0], 256), 256](acc_d)
    make_streamk(tile, unroll, bodies)[blocks, tile](pos_d, eps2, acc_d)


# ------------------------------------------------------------------------------------ configurations


@dataclass(frozen=True)
class Config:
    """One kernel configuration: which factory, and its compile-time parameters.

    ``kind`` is ``"naive"``, ``"tiled"`` or ``"streamk"`` (AoS and rsqrt only); ``threads`` is the block size of the
    naive kernel (the others' block is their tile); ``per_sm`` the stream-K grid's blocks per SM.
    """

    kind: str = "tiled"
    unroll: int = 4
    tile: int = 256
    bodies: int = 1
    layout: str = "aos"
    math_mode: str = "rsqrt"
    threads: int = 256
    per_sm: int = STREAMK_PER_SM

    def __post_init__(self):
        _check_choice(self.kind, "kind", ("naive", "tiled", "streamk"))
        if self.kind == "streamk" and (self.layout, self.math_mode) != ("aos", "rsqrt"):
            raise UnknownKernelError(f"the stream-K kernel is built for layout='aos' and math_mode='rsqrt' only, got "
                                     f"{self.layout!r} and {self.math_mode!r}: use those, or kind='tiled'")
        validate.integer(self.per_sm, "per_sm", minimum=1)
        self.kernel()  # validates the rest

    def kernel(self):
        """The compiled (cached) kernel of this configuration."""
        if self.kind == "naive":
            return make_naive(self.unroll, self.layout, self.math_mode)
        if self.kind == "streamk":
            return make_streamk(self.tile, self.unroll, self.bodies)
        return make_tiled(self.tile, self.unroll, self.bodies, self.layout, self.math_mode)

    def launch(self, n: int) -> tuple[int, int]:
        """``(blocks, threads)`` for ``n`` bodies (stream-K: :func:`streamk_grid`, whatever ``n``)."""
        if self.kind == "naive":
            return blocks_for(n, self.threads), self.threads
        if self.kind == "streamk":
            return streamk_grid(self.per_sm), self.tile
        return blocks_for(n, self.tile, self.bodies), self.tile

    def launcher(self, n: int):
        """``launch(pos_d, eps2, acc_d)`` for ``n`` bodies, no checks (the timing path); stream-K zeroes ``acc_d`` first."""
        kernel, (blocks, threads) = self.kernel(), self.launch(n)
        if self.kind != "streamk":
            return kernel[blocks, threads]
        return functools.partial(launch_streamk, blocks=blocks, tile=self.tile, unroll=self.unroll, bodies=self.bodies)

    @property
    def label(self) -> str:
        """A short name, e.g. ``tiled 256, unroll 4, 2 bodies/thread``."""
        first = {"naive": f"naive ({self.threads} thr)", "streamk": f"stream-K {self.tile}"}.get(self.kind)
        parts = [first or f"tiled {self.tile}", f"unroll {self.unroll}"]
        if self.kind != "naive" and self.bodies > 1:
            parts.append(f"{self.bodies} bodies/thread")
        if self.kind == "streamk":
            parts.append(f"{self.per_sm} blocks/SM")
        if self.layout != "aos":
            parts.append(self.layout.upper())
        if self.math_mode != "rsqrt":
            parts.append({"fast": "1/sqrt, fastmath", "precise": "1/sqrt, no fastmath",
                          "float64": "float64 literal"}[self.math_mode])
        return ", ".join(parts)


#: The chapter's best configuration: the fastest of ``bench/nbody.py``'s tuning sweep at n = 2^18 on the
#: reference GPU (reference data ``ch08_tuning``; a test keeps the two in step).
BEST = Config("tiled", unroll=4, tile=512, bodies=4)
#: The last step of the chapter's sequence: BEST's tile and bodies per thread, 16 j-bodies per trip written out, the
#: work shared out evenly over two blocks per SM (at n = 2^18 BEST's 128 blocks leave 4 of an H200's 132 SMs idle).
STREAMK = Config("streamk", unroll=16, tile=512, bodies=4, per_sm=STREAMK_PER_SM)


# --------------------------------------------------------------------------------- host-side checks


def _eps2(eps2) -> np.float32:
    value = validate.number(eps2, "eps2")
    if not value > 0:
        raise ArgumentError(f"eps2 (the squared softening) must be > 0, got {eps2}: with eps2 = 0 the self-interaction "
                            f"of every body is 0/0 = NaN. The chapter uses eps2 = {DEFAULT_EPS2} "
                            f"(softening {DEFAULT_SOFTENING}).")
    return np.float32(value)  # a Python float would make Numba compile the kernel for float64


def check_positions(pos, layout: str = "aos", name: str = "pos") -> int:
    """Validate a float32 position-and-mass array in ``layout``; return the number of bodies.

    Raises:
        ArrayArgumentError: wrong type, dtype, shape, memory layout, no bodies, NaN or infinity.
    """
    layout = validate.choice(layout, "layout", LAYOUTS)
    validate.array(pos, name, dtype=np.float32, ndim=2)
    want = "(n, 4): one row x, y, z, mass per body" if layout == "aos" else "(4, n): rows x, y, z, mass"
    axis = 1 if layout == "aos" else 0
    if pos.shape[axis] != 4:
        other = " (for the structure-of-arrays layout pass layout='soa')" if pos.shape[0] == 4 else ""
        raise ArrayArgumentError(f"{name} must have shape {want}, got {tuple(pos.shape)}{other}.")
    n = pos.shape[1 - axis]
    if n < 1:
        raise ArrayArgumentError(f"{name} holds no bodies (shape {tuple(pos.shape)}): pass at least one.")
    validate.array(pos, name, finite=isinstance(pos, np.ndarray))
    return int(n)


def _device(a):
    return a if not isinstance(a, np.ndarray) else cuda.to_device(np.ascontiguousarray(a))


def _acc_shape(n: int, layout: str) -> tuple[int, int]:
    return (n, 3) if layout == "aos" else (3, n)


def run_config(config: Config, pos, eps2: float = DEFAULT_EPS2, acc=None):
    """Launch ``config``'s kernel on ``pos`` and return the accelerations (NumPy for NumPy input).

    ``pos`` may be a device array; then ``acc`` (a device array, or None to allocate one) is
    returned on the device as well.
    """
    n = check_positions(pos, config.layout)
    e = _eps2(eps2)
    on_device = not isinstance(pos, np.ndarray)
    pos_d = _device(pos)
    if acc is None:
        acc = cuda.device_array(_acc_shape(n, config.layout), dtype=np.float32)
    else:
        validate.array(acc, "acc", dtype=np.float32, shape=_acc_shape(n, config.layout))
    acc_d = _device(acc)
    config.launcher(n)(pos_d, e, acc_d)
    return acc_d if on_device else to_host(acc_d)


def run_naive(pos, eps2: float = DEFAULT_EPS2, *, unroll: int = 1, layout: str = "aos", math_mode: str = "rsqrt",
              threads: int = 256) -> np.ndarray:
    """Accelerations with the naive kernel (see :func:`make_naive`), as a NumPy array."""
    threads = validate.threads_per_block(threads)
    return run_config(Config("naive", unroll=unroll, layout=layout, math_mode=math_mode, threads=threads), pos, eps2)


def run_tiled(pos, eps2: float = DEFAULT_EPS2, *, tile: int = 256, unroll: int = 4, bodies: int = 1,
              layout: str = "aos", math_mode: str = "rsqrt") -> np.ndarray:
    """Accelerations with the shared-memory kernel (see :func:`make_tiled`), as a NumPy array."""
    return run_config(Config("tiled", unroll=unroll, tile=tile, bodies=bodies, layout=layout, math_mode=math_mode),
                      pos, eps2)


def run_streamk(pos, eps2: float = DEFAULT_EPS2, *, tile: int = 512, unroll: int = 16, bodies: int = 4,
                per_sm: int = STREAMK_PER_SM) -> np.ndarray:
    """Accelerations with the stream-K kernel (see :func:`make_streamk`) on :func:`streamk_grid` blocks, as NumPy."""
    return run_config(Config("streamk", unroll=unroll, tile=tile, bodies=bodies, per_sm=per_sm), pos, eps2)


def run_seed_tiled(pos, eps2: float = DEFAULT_EPS2, *, threads: int = 32, blocks: int | None = None,
                   kernel=None) -> np.ndarray:
    """Run the lecture's pitfall kernel :func:`nbody_tiled_seed` (or ``kernel``) on AoS ``pos``.

    Under the simulator the overread raises IndexError.

    The positions are followed in memory by NaN bodies (as in a larger buffer), so on a GPU the
    overread shows as NaN accelerations instead of passing unnoticed.
    """
    n = check_positions(pos, "aos")
    threads = validate.threads_per_block(threads)
    blocks = blocks_for(n, threads) if blocks is None else validate.integer(blocks, "blocks", minimum=1)
    padded = np.full((n + threads, 4), np.nan, dtype=np.float32)
    padded[:n] = pos
    acc = cuda.to_device(np.full((n + threads, 3), np.nan, dtype=np.float32))
    (kernel or nbody_tiled_seed)[blocks, threads](cuda.to_device(padded)[:n], _eps2(eps2), acc[:n])
    return acc.copy_to_host()[:n]


# ------------------------------------------------------------------------------ NumPy specifications


def to_soa(pos: np.ndarray) -> np.ndarray:
    """AoS ``(n, k)`` to SoA ``(k, n)``, contiguous."""
    return np.ascontiguousarray(np.asarray(pos).T)


def to_aos(pos: np.ndarray) -> np.ndarray:
    """SoA ``(k, n)`` to AoS ``(n, k)``, contiguous."""
    return np.ascontiguousarray(np.asarray(pos).T)


def _rows_per_chunk(n: int, budget: int = 2**21) -> int:
    return max(1, budget // max(n, 1))


def accelerations_numpy(pos: np.ndarray, eps2: float = DEFAULT_EPS2, *, with_scale: bool = False):
    """The float64 specification: ``a_i = sum_j m_j d_ij / (|d_ij|^2 + eps2)^(3/2)`` for AoS ``pos (n, 4)``.

    Vectorised over blocks of rows, so memory stays bounded (about 2^21 pairs at a time) for any n.
    With ``with_scale=True`` also returns, per body, ``sum_j m_j |d_ij| / (r^2 + eps2)^(3/2)``: the
    size of the terms, against which a float32 result's error is measured (:data:`ACC_RTOL`).
    """
    p = np.asarray(pos, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 4:
        raise ArrayArgumentError(f"pos must have shape (n, 4) (x, y, z, mass), got {p.shape}")
    e = float(_eps2(eps2))
    n = p.shape[0]
    xyz, m = p[:, :3], p[:, 3]
    acc = np.empty((n, 3))
    scale = np.empty(n)
    step = _rows_per_chunk(n)
    for i0 in range(0, n, step):
        d = xyz[None, :, :] - xyz[i0:i0 + step, None, :]  # (rows, n, 3): x_j - x_i
        r2 = np.einsum("ijk,ijk->ij", d, d) + e
        w = m[None, :] * r2**-1.5
        acc[i0:i0 + step] = np.einsum("ij,ijk->ik", w, d)
        if with_scale:
            scale[i0:i0 + step] = np.sum(w * np.sqrt(r2 - e), axis=1)
    return (acc, scale) if with_scale else acc


def acceleration_error(got, pos: np.ndarray, eps2: float = DEFAULT_EPS2, layout: str = "aos") -> float:
    """Largest error of float32 accelerations ``got``, each relative to the size of its terms (NaN -> inf).

    Compare with :data:`ACC_RTOL`. A body with no terms at all (alone, or all others massless) must
    come out exactly 0.
    """
    got = np.asarray(to_host(got), dtype=np.float64)
    if layout == "soa":
        got, pos = got.T, to_aos(pos)
    ref, scale = accelerations_numpy(pos, eps2, with_scale=True)
    if got.shape != ref.shape:
        raise ArrayArgumentError(f"accelerations must have shape {ref.shape}, got {got.shape}")
    if not np.isfinite(got).all():
        return math.inf
    err = np.max(np.abs(got - ref), axis=1)
    tiny = np.finfo(np.float32).tiny
    rel = np.where(scale > 0, err / np.maximum(scale, tiny), np.where(err > 0, math.inf, 0.0))
    return float(rel.max()) if rel.size else 0.0


@numba.njit(parallel=True, fastmath=True, cache=False)
def _accelerations_cpu(x, y, z, m, eps2, acc):
    n = x.shape[0]
    for i in numba.prange(n):  # bodies shared out over the CPU's cores
        xi, yi, zi = x[i], y[i], z[i]
        ax = np.float32(0)
        ay = np.float32(0)
        az = np.float32(0)
        for j in range(n):  # contiguous x[j], y[j]...: the compiler vectorises this loop (SIMD)
            dx = x[j] - xi
            dy = y[j] - yi
            dz = z[j] - zi
            r2 = eps2 + dx * dx + dy * dy + dz * dz
            inv_r = np.float32(1) / np.sqrt(r2)
            s = m[j] * inv_r * inv_r * inv_r
            ax += dx * s
            ay += dy * s
            az += dz * s
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def accelerations_cpu(pos: np.ndarray, eps2: float = DEFAULT_EPS2, acc: np.ndarray | None = None) -> np.ndarray:
    """The all-pairs loop on the CPU: Numba, float32, every core (``prange``), the inner loop vectorised.

    The fair CPU baseline for the GPU kernels (the NumPy specification is float64 and builds temporaries).
    The positions are copied into four contiguous arrays first (structure of arrays: what SIMD units want).
    """
    n = check_positions(pos, "aos")
    e = _eps2(eps2)
    if acc is None:
        acc = np.empty((n, 3), dtype=np.float32)
    validate.array(acc, "acc", dtype=np.float32, shape=(n, 3))
    soa = to_soa(pos)
    _accelerations_cpu(soa[0], soa[1], soa[2], soa[3], e, acc)
    return acc


def potential_energy(pos: np.ndarray, eps2: float = DEFAULT_EPS2) -> float:
    """``U = -sum_{i<j} m_i m_j / sqrt(r_ij^2 + eps2)``, float64 (the softened potential the forces derive from)."""
    p = np.asarray(pos, dtype=np.float64)
    e = float(_eps2(eps2))
    n = p.shape[0]
    xyz, m = p[:, :3], p[:, 3]
    total = 0.0
    step = _rows_per_chunk(n)
    for i0 in range(0, n, step):
        d = xyz[None, :, :] - xyz[i0:i0 + step, None, :]
        inv = (np.einsum("ijk,ijk->ij", d, d) + e) ** -0.5
        total -= float(m[i0:i0 + step] @ (inv @ m))
    self_terms = float(np.sum(m * m)) / math.sqrt(e)  # the i == j terms of the double sum
    return 0.5 * (total + self_terms)


def kinetic_energy(pos: np.ndarray, vel: np.ndarray) -> float:
    """``K = 1/2 sum m v^2``, float64."""
    m = np.asarray(pos, dtype=np.float64)[:, 3]
    v = np.asarray(vel, dtype=np.float64)[:, :3]
    return 0.5 * float(np.sum(m * np.sum(v * v, axis=1)))


def energy(pos: np.ndarray, vel: np.ndarray, eps2: float = DEFAULT_EPS2) -> float:
    """Total energy ``K + U`` (float64): conserved by the exact dynamics, nearly so by leapfrog."""
    return kinetic_energy(pos, vel) + potential_energy(pos, eps2)


def momentum(pos: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """Total momentum ``sum m v`` (float64, 3 components): conserved exactly by pairwise forces."""
    m = np.asarray(pos, dtype=np.float64)[:, 3]
    return m @ np.asarray(vel, dtype=np.float64)[:, :3]


def leapfrog_numpy(pos: np.ndarray, vel: np.ndarray, dt: float, steps: int, eps2: float = DEFAULT_EPS2):
    """``steps`` kick-drift-kick leapfrog steps in float64; returns new ``(pos, vel)`` (inputs untouched).

    One step: ``v += dt/2 a(x)``, ``x += dt v``, ``v += dt/2 a(x)``. Time-reversible and symplectic:
    the energy error stays bounded, of order ``dt^2``, instead of drifting away.
    """
    p = np.array(pos, dtype=np.float64)
    v = np.array(vel, dtype=np.float64)[:, :3]
    dt = validate.number(dt, "dt", minimum=0)
    steps = validate.integer(steps, "steps", minimum=0)
    a = accelerations_numpy(p, eps2)
    for _ in range(steps):
        v += 0.5 * dt * a
        p[:, :3] += dt * v
        a = accelerations_numpy(p, eps2)
        v += 0.5 * dt * a
    return p, v


# --------------------------------------------------------------------------------------- simulations


@dataclass
class Trajectory:
    """Snapshots of a simulation: ``times`` (frames), ``positions`` (frames, n, 3), masses, energies."""

    times: np.ndarray
    positions: np.ndarray
    masses: np.ndarray
    energies: np.ndarray
    engine: str
    dt: float
    meta: dict = field(default_factory=dict)

    @property
    def relative_energy_error(self) -> np.ndarray:
        """``|E(t) - E(0)| / |E(0)|`` at every snapshot."""
        return np.abs(self.energies - self.energies[0]) / abs(self.energies[0])


def simulate(pos: np.ndarray, vel: np.ndarray, dt: float, steps: int, eps2: float = DEFAULT_EPS2, *,
             every: int = 1, engine: str = "auto", config: Config = BEST, energies: bool = True) -> Trajectory:
    """Integrate with kick-drift-kick leapfrog, keeping a snapshot every ``every`` steps.

    Args:
        pos, vel: AoS ``(n, 4)`` positions and masses, ``(n, 3)`` velocities.
        engine: ``"gpu"`` (this module's kernels, float32, on the device), ``"numpy"`` (float64 on the
            CPU) or ``"auto"``: the kernels on a GPU, NumPy under the simulator (whose kernels run a few
            thousand interactions per second).
        config: the force kernel of the ``"gpu"`` engine.
        energies: compute the total energy of every snapshot (float64, on the host: O(n^2) each).
    """
    n = check_positions(np.asarray(pos, dtype=np.float32), "aos")
    validate.array(np.asarray(vel), "vel", shape=(n, 3))
    dt = validate.number(dt, "dt", minimum=0)
    steps = validate.integer(steps, "steps", minimum=0)
    every = validate.integer(every, "every", minimum=1)
    engine = validate.choice(engine, "engine", ("auto", "gpu", "numpy"))
    if engine == "auto":
        engine = "numpy" if backend.is_simulator() else "gpu"
    e = _eps2(eps2)
    frames_p, times = [], []
    if engine == "numpy":
        p, v = np.array(pos, dtype=np.float64), np.array(vel, dtype=np.float64)
        for s in range(0, steps + 1, every):
            if s:
                p, v = leapfrog_numpy(p, v, dt, every, e)
            frames_p.append((p.copy(), v.copy()))
            times.append(s * dt)
    else:
        pos_d = cuda.to_device(np.ascontiguousarray(pos, dtype=np.float32))
        vel_d = cuda.to_device(np.ascontiguousarray(vel, dtype=np.float32))
        acc_d = cuda.device_array((n, 3), dtype=np.float32)
        forces = config.launcher(n)
        sblocks = blocks_for(n, 256)
        h, d = np.float32(0.5 * dt), np.float32(dt)
        forces(pos_d, e, acc_d)
        frames_p.append((pos_d.copy_to_host(), vel_d.copy_to_host()))
        times.append(0.0)
        for s in range(1, steps + 1):
            kick[sblocks, 256](vel_d, acc_d, h)
            drift[sblocks, 256](pos_d, vel_d, d)
            forces(pos_d, e, acc_d)
            kick[sblocks, 256](vel_d, acc_d, h)
            if s % every == 0:
                frames_p.append((pos_d.copy_to_host(), vel_d.copy_to_host()))
                times.append(s * dt)
    masses = np.asarray(pos, dtype=np.float64)[:, 3].copy()
    energy_trace = np.array([energy(p, v, e) for p, v in frames_p]) if energies else np.full(len(frames_p), np.nan)
    return Trajectory(times=np.array(times), positions=np.stack([p[:, :3] for p, _ in frames_p]).astype(np.float32),
                      masses=masses, energies=energy_trace, engine=engine, dt=dt,
                      meta={"n": n, "steps": steps, "every": every, "eps2": float(e)})


# ---------------------------------------------------------------------------------- initial conditions


def plummer_sphere(n: int, rng: np.random.Generator | None = None, *, mass: float = 1.0,
                   scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` bodies of equal mass drawn from a Plummer sphere in equilibrium (G = 1), centred and at rest.

    Radii from the inverted cumulative mass, ``r = a / sqrt(u^(-2/3) - 1)``; speeds by von Neumann
    rejection from ``g(q) = q^2 (1 - q^2)^(7/2)`` times the local escape speed
    ``sqrt(2 M / a) (1 + r^2/a^2)^(-1/4)`` (Aarseth, Henon and Wielen, 1974). Returns float64
    ``pos (n, 4)`` (mass in column 3) and ``vel (n, 3)``.
    """
    n = validate.integer(n, "n", minimum=1)
    mass = validate.number(mass, "mass", minimum=0)
    scale = validate.number(scale, "scale", minimum=0)
    rng = rng if rng is not None else np.random.default_rng(0)
    u = rng.uniform(1e-3, 0.999, n)  # clip the far tail: a few bodies at hundreds of radii only slow things down
    r = 1.0 / np.sqrt(u ** (-2.0 / 3.0) - 1.0)
    q = np.empty(n)
    todo = np.arange(n)
    while todo.size:
        x, y = rng.uniform(0, 1, todo.size), rng.uniform(0, 0.1, todo.size)
        ok = y < x * x * (1 - x * x) ** 3.5
        q[todo[ok]] = x[ok]
        todo = todo[~ok]
    v = q * np.sqrt(2.0) * (1.0 + r * r) ** -0.25
    pos = np.empty((n, 4))
    pos[:, :3] = _isotropic(r, rng) * scale
    pos[:, 3] = mass / n
    vel = _isotropic(v, rng) * math.sqrt(mass / scale)
    pos[:, :3] -= np.average(pos[:, :3], axis=0, weights=pos[:, 3])
    vel -= vel.mean(axis=0)
    return pos, vel


def _isotropic(length: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cos_t = rng.uniform(-1, 1, length.size)
    phi = rng.uniform(0, 2 * np.pi, length.size)
    sin_t = np.sqrt(1 - cos_t**2)
    return length[:, None] * np.stack([sin_t * np.cos(phi), sin_t * np.sin(phi), cos_t], axis=1)


def galaxy_collision(n: int, rng: np.random.Generator | None = None, *, separation: float = 6.0,
                     impact: float = 1.5, speed: float = 0.6, scale: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Two Plummer spheres of ``n // 2`` and ``n - n // 2`` bodies (mass 1/2 each) on a collision course.

    They start ``separation`` apart along x, offset by ``impact`` along y, closing at ``speed``; the
    system is in its centre-of-mass frame. Returns float32 ``pos (n, 4)`` and ``vel (n, 3)``.
    """
    n = validate.integer(n, "n", minimum=2)
    rng = rng if rng is not None else np.random.default_rng(0)
    parts = []
    for count, sign in ((n // 2, -1.0), (n - n // 2, 1.0)):
        p, v = plummer_sphere(count, rng, mass=0.5, scale=scale)
        p[:, 0] += sign * separation / 2
        p[:, 1] += sign * impact / 2
        v[:, 0] -= sign * speed / 2
        p[:, 3] = 0.5 / count
        parts.append((p, v))
    pos = np.concatenate([p for p, _ in parts])
    vel = np.concatenate([v for _, v in parts])
    return pos.astype(np.float32), vel.astype(np.float32)


def circular_binary(separation: float = 1.0, eps2: float = DEFAULT_EPS2) -> tuple[np.ndarray, np.ndarray]:
    """Two equal masses (1/2 each) on a circular orbit about their centre of mass, for the softened force.

    Each body's speed balances the softened pull: ``v^2 / (d/2) = m d / (d^2 + eps2)^(3/2)``. The orbital
    period is ``2 pi (d/2) / v``. Returns float32 ``pos (2, 4)`` and ``vel (2, 3)``.
    """
    d = validate.number(separation, "separation", minimum=0)
    e = float(_eps2(eps2))
    m = 0.5
    v = math.sqrt(m * d * (d / 2) / (d * d + e) ** 1.5)
    pos = np.array([[-d / 2, 0, 0, m], [d / 2, 0, 0, m]], dtype=np.float32)
    vel = np.array([[0, -v, 0], [0, v, 0]], dtype=np.float32)
    return pos, vel


def binary_period(separation: float = 1.0, eps2: float = DEFAULT_EPS2) -> float:
    """Orbital period of :func:`circular_binary`."""
    _pos, vel = circular_binary(separation, eps2)
    return 2 * math.pi * (separation / 2) / float(vel[1, 1])


def random_bodies(n: int, rng: np.random.Generator | None = None, *, layout: str = "aos") -> np.ndarray:
    """``n`` bodies uniform in the unit cube with masses in [0.5, 1.5) / n, float32, for tests and timings."""
    n = validate.integer(n, "n", minimum=1)
    rng = rng if rng is not None else np.random.default_rng(0)
    pos = np.empty((n, 4), dtype=np.float32)
    pos[:, :3] = rng.random((n, 3), dtype=np.float32)
    pos[:, 3] = (0.5 + rng.random(n, dtype=np.float32)) / n
    return to_soa(pos) if layout == "soa" else pos


# interactions, flops and bytes_moved are labhelpers.counts' nbody_interactions, nbody_flops and nbody_bytes.
__all__ = [
    "ACC_RTOL", "acceleration_error", "accelerations_cpu", "accelerations_numpy", "BEST", "binary_period", "BODIES",
    "body_body", "body_body_float64", "body_body_rsqrt", "bytes_moved", "check_positions", "circular_binary",
    "Config", "CONST_BODIES", "DEFAULT_EPS2", "DEFAULT_SOFTENING", "drift", "energy", "flops",
    "FLOPS_PER_INTERACTION", "FULL_MASK", "galaxy_collision", "INTERACTIONS", "interactions", "kick",
    "kinetic_energy", "launch_streamk", "LAYOUTS", "leapfrog_numpy", "make_constant", "make_naive", "make_streamk",
    "make_tiled", "MATH_MODES", "momentum", "nbody_shuffle", "nbody_tiled_grid_stride", "nbody_tiled_seed",
    "plummer_sphere", "potential_energy", "random_bodies", "run_config", "run_constant", "run_naive",
    "run_seed_tiled", "run_shuffle", "run_streamk", "run_tiled", "SIM_SMS", "simulate", "STREAMK", "streamk_grid",
    "STREAMK_PER_SM", "STREAMK_UNROLLS", "TILES", "to_aos", "to_soa", "Trajectory", "UnknownKernelError", "UNROLLS",
    "zero_rows",
]
