"""Candidate n-body kernels for the FP32-peak target (timed by ``bench/tuning/dense.py``; the winner is in the chapter).

Static evidence at sm_90 (``.gpurun/static_counts/dense_report.txt``): the chapter's best kernel
(:data:`labhelpers.kernels.nbody.BEST`, tile 512, unroll 4, 4 bodies per thread) issues 13.75 SASS instructions
per interaction: the 13 of the formula (3 FADD, 6 FFMA, 3 FMUL, 1 MUFU.RSQ; none of them removable: four factors
``m_j inv_r^3`` take three multiplies), 0.25 LDS.128 and 0.5 of loop control (a 64-bit counter on the uniform
datapath, 8 instructions per trip of 16 interactions). Issue-slot ceiling: ``20 / (2 x 13.75) = 0.727`` of the
FMA peak. Asking :func:`~labhelpers.kernels.nbody.make_tiled` for more unrolling makes it worse (unroll 8 or 16:
LLVM no longer unrolls Numba's inner ``range`` loop completely, 17 instructions per interaction). And at
n = 2^18 a block of 512 threads x 4 bodies is 2048 bodies: 128 blocks for the 132 SMs of an H100/H200, one block
per SM, 4 SMs idle (0.970 of the machine; every power-of-two block has the same loss at this n).

Two candidates, one remedy each:

* :func:`make_unrolled`: the same tile, the ``jstep`` bodies of a trip written out as explicit calls (no inner
  ``range`` loop left for LLVM to decline), the loop counter 32-bit: loop control per interaction falls from
  0.5 to ``8 / (4 jstep)`` or less.
* stream-K: the unrolled inner loop, with the work (i-block, j-tile) pairs shared out *evenly* over a grid of
  exactly as many blocks as fit on the GPU at once. It won the sweep (0.688 of the FMA peak against BEST's 0.657,
  H200, November 2026) and now lives in the chapter: :func:`labhelpers.kernels.nbody.make_streamk` (its
  ``unroll`` is the ``jstep`` here). :func:`make_streamk`, :func:`launch_streamk` and :func:`run_streamk` below
  only translate this module's ``jstep`` and ``blocks`` for the sweep scripts.

Both take AoS ``pos (n, 4)`` and ``bodies`` bodies per thread (4 by default; held in registers), ``rsqrt`` math, and are correct for
every ``n`` (zero-mass padding of the last tile, as in the chapter's kernel).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, int32

from .. import backend, validate
from ..arrays import to_host
from ..errors import ArgumentError
from ..launch import blocks_for
from . import nbody as nb

#: Tiles (threads per block) the candidates are built for.
TILES: tuple[int, ...] = (32, 64, 128, 256, 512)
#: j-bodies per trip of the inner loop, written out explicitly.
JSTEPS: tuple[int, ...] = (4, 8, 16)
#: Bodies per thread by default: the chapter's best.
BODIES = 4
#: Bodies per thread the candidates are built for (held in registers; 8 halves the shared loads per interaction).
BODIES_CHOICES: tuple[int, ...] = (2, 4, 8)
#: Blocks per SM of the stream-K grid, and the SMs it assumes under the simulator: the chapter's.
STREAMK_PER_SM, SIM_SMS = nb.STREAMK_PER_SM, nb.SIM_SMS
#: Blocks of the stream-K grid: the chapter's :func:`labhelpers.kernels.nbody.streamk_grid`.
streamk_grid = nb.streamk_grid
#: The kernel that zeroes ``acc`` before a stream-K launch: the chapter's.
zero_rows = nb.zero_rows

_ALIGN = None if backend.is_simulator() else 16  # one 128-bit shared load per body on a GPU


def _check(tile: int, jstep: int, bodies: int = BODIES) -> tuple[int, int]:
    validate.choice(bodies, "bodies", BODIES_CHOICES)
    tile = validate.choice(tile, "tile", TILES)
    jstep = validate.choice(jstep, "jstep", JSTEPS)
    if tile % jstep:
        raise ArgumentError(f"jstep={jstep} must divide tile={tile}")
    return tile, jstep


@functools.lru_cache(maxsize=None)
def make_unrolled(tile: int = 512, jstep: int = 8, bodies: int = BODIES):
    """The chapter's tiled kernel (AoS, 4 bodies per thread, rsqrt), ``jstep`` j-bodies per trip written out.

    ``kernel(pos, eps2, acc)``, launched with ``tile`` threads per block and ``ceil(n / (4 tile))`` blocks
    (:func:`launch_unrolled`). Same barriers, guards and zero-mass padding as
    :func:`~labhelpers.kernels.nbody.make_tiled`.
    """
    T, J = _check(tile, jstep, bodies)
    P = bodies
    step = nb._steps(P)[J]
    align = _ALIGN
    T32, J32 = int32(T), int32(J)

    @cuda.jit(fastmath=True)
    def nbody_unrolled(pos, eps2, acc):
        sh = cuda.shared.array((T, 4), float32, alignment=align)
        xi = cuda.local.array(P, float32)
        yi = cuda.local.array(P, float32)
        zi = cuda.local.array(P, float32)
        ax = cuda.local.array(P, float32)
        ay = cuda.local.array(P, float32)
        az = cuda.local.array(P, float32)
        n = pos.shape[0]
        t = cuda.threadIdx.x
        first = cuda.blockIdx.x * (T * P) + t
        for p in range(P):
            i = first + p * T
            x, y, z = float32(0), float32(0), float32(0)
            if i < n:  # guard the load, not the work: every thread reaches the barriers
                x, y, z = pos[i, 0], pos[i, 1], pos[i, 2]
            xi[p], yi[p], zi[p] = x, y, z
            ax[p], ay[p], az[p] = float32(0), float32(0), float32(0)
        for start in range(0, n, T):  # the same trip count in every thread
            j = start + t
            x, y, z, m = float32(0), float32(0), float32(0), float32(0)
            if j < n:  # past the end: a zero-mass body, which adds exactly 0
                x, y, z, m = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]
            sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = x, y, z, m
            cuda.syncthreads()  # RAW
            k = int32(0)
            while k < T32:  # 32-bit counter, compile-time bound: one add, one compare, one branch per trip
                step(sh, k, eps2, xi, yi, zi, ax, ay, az)
                k += J32
            cuda.syncthreads()  # WAR
        for p in range(P):
            i = first + p * T
            if i < n:
                acc[i, 0] = ax[p]
                acc[i, 1] = ay[p]
                acc[i, 2] = az[p]

    return nbody_unrolled


def make_streamk(tile: int = 512, jstep: int = 8, bodies: int = BODIES):
    """The chapter's stream-K kernel, :func:`labhelpers.kernels.nbody.make_streamk` (``jstep`` is its ``unroll``)."""
    T, J = _check(tile, jstep, bodies)
    return nb.make_streamk(T, J, bodies)


def blocks_unrolled(n: int, tile: int, bodies: int = BODIES) -> int:
    """Blocks of :func:`make_unrolled` for ``n`` bodies: ``ceil(n / (bodies tile))``."""
    return blocks_for(int(n), tile, bodies)


def launch_unrolled(pos_d, eps2, acc_d, *, tile: int = 512, jstep: int = 8, bodies: int = BODIES) -> None:
    """Launch :func:`make_unrolled` on device arrays (no checks: the timing path)."""
    make_unrolled(tile, jstep, bodies)[blocks_unrolled(pos_d.shape[0], tile, bodies), tile](pos_d, eps2, acc_d)


def launch_streamk(pos_d, eps2, acc_d, *, tile: int = 512, jstep: int = 8, blocks: int,
                   bodies: int = BODIES) -> None:
    """Zero ``acc_d`` and launch the chapter's stream-K kernel with ``blocks`` blocks (no checks: the timing path)."""
    nb.launch_streamk(pos_d, eps2, acc_d, blocks=blocks, tile=tile, unroll=jstep, bodies=bodies)


def run_unrolled(pos, eps2: float = nb.DEFAULT_EPS2, *, tile: int = 512, jstep: int = 8,
                 bodies: int = BODIES) -> np.ndarray:
    """Accelerations with :func:`make_unrolled` (AoS), as a NumPy array; validation as the chapter's ``run_tiled``."""
    n = nb.check_positions(pos, "aos")
    e = nb._eps2(eps2)
    _check(tile, jstep, bodies)
    acc = cuda.device_array((n, 3), dtype=np.float32)
    launch_unrolled(nb._device(pos), e, acc, tile=tile, jstep=jstep, bodies=bodies)
    return to_host(acc)


def run_streamk(pos, eps2: float = nb.DEFAULT_EPS2, *, tile: int = 512, jstep: int = 8,
                blocks: int | None = None, bodies: int = BODIES) -> np.ndarray:
    """Accelerations with the chapter's stream-K kernel on ``blocks`` blocks (default :func:`streamk_grid`), NumPy.

    Any positive number of blocks is correct; the even split only pays when they all run at once.
    """
    n = nb.check_positions(pos, "aos")
    e = nb._eps2(eps2)
    _check(tile, jstep, bodies)
    blocks = streamk_grid() if blocks is None else validate.integer(blocks, "blocks", minimum=1)
    acc = cuda.device_array((n, 3), dtype=np.float32)
    launch_streamk(nb._device(pos), e, acc, tile=tile, jstep=jstep, blocks=blocks, bodies=bodies)
    return to_host(acc)


def static_kernels():
    """``(label, kernel, signature)`` of the candidates for the static-count script (compile backend)."""
    from numba import types  # the compiler's type objects: only the static-count script needs them

    a2 = types.Array(types.float32, 2, "C")
    sig = types.void(a2, types.float32, a2)
    out = [(f"unrolled 512 j{j} b4", make_unrolled(512, j), sig) for j in JSTEPS]
    out += [(f"unrolled 256 j{j} b4", make_unrolled(256, j), sig) for j in (8, 16)]
    out += [(f"streamk 512 j{j} b4", make_streamk(512, j), sig) for j in (8, 16)]
    return out


__all__ = ["BODIES", "BODIES_CHOICES", "JSTEPS", "STREAMK_PER_SM", "TILES", "blocks_unrolled", "launch_streamk",
           "launch_unrolled", "make_streamk", "make_unrolled", "run_streamk", "run_unrolled", "static_kernels", "streamk_grid",
           "zero_rows"]
