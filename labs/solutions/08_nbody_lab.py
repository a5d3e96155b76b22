"""Solutions of labs/08_nbody_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import math

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
import numpy as np
from numba import cuda, float32

from labhelpers.kernels import nbody as nb

TILE = 64


@cuda.jit(device=True, fastmath=True)
def interaction(xi, yi, zi, xj, yj, zj, mj, eps2):
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    s = float32(0)
    # FILL ME IN (roughly 3 lines): r2 with the softening, inv_r = 1 / sqrt(r2) in float32, s = mj * inv_r^3
    r2 = eps2 + dx * dx + dy * dy + dz * dz
    inv_r = float32(1) / math.sqrt(r2)
    s = mj * inv_r * inv_r * inv_r
    return dx * s, dy * s, dz * s


@cuda.jit(fastmath=True)
def nbody_naive(pos, eps2, acc):
    i = cuda.grid(1)
    n = pos.shape[0]
    # FILL ME IN (roughly 12 lines): for a thread with a body (i < n), add up interaction(...) with every
    # body j (itself included), then write acc[i, 0], acc[i, 1], acc[i, 2]
    if i < n:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax, ay, az = float32(0), float32(0), float32(0)
        for j in range(n):
            fx, fy, fz = interaction(xi, yi, zi, pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3], eps2)
            ax += fx
            ay += fy
            az += fz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@cuda.jit(fastmath=True)
def nbody_tiled(pos, eps2, acc):
    sh = cuda.shared.array((TILE, 4), float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    n = pos.shape[0]
    xi, yi, zi = float32(0), float32(0), float32(0)
    if i < n:
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
    ax, ay, az = float32(0), float32(0), float32(0)
    for start in range(0, n, TILE):
        # FILL ME IN (roughly 14 lines): copy body start + t into sh[t] (a zero-mass body past the end of pos),
        # wait for the block, add the TILE interactions with the bodies in sh, wait again
        j = start + t
        x, y, z, m = float32(0), float32(0), float32(0), float32(0)
        if j < n:
            x, y, z, m = pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3]
        sh[t, 0], sh[t, 1], sh[t, 2], sh[t, 3] = x, y, z, m
        cuda.syncthreads()  # RAW: the whole tile is in shared memory before anyone reads it
        for k in range(TILE):
            fx, fy, fz = interaction(xi, yi, zi, sh[k, 0], sh[k, 1], sh[k, 2], sh[k, 3], eps2)
            ax += fx
            ay += fy
            az += fz
        cuda.syncthreads()  # WAR: everyone has read the tile before the next trip overwrites it
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def leapfrog_step(pos_d, vel_d, acc_d, dt, eps2, forces):
    threads = 32
    blocks = (pos_d.shape[0] + threads - 1) // threads
    half, full = np.float32(dt / 2), np.float32(dt)
    # FILL ME IN (roughly 4 lines): kick by half, drift by full, new forces, kick by half
    nb.kick[blocks, threads](vel_d, acc_d, half)
    nb.drift[blocks, threads](pos_d, vel_d, full)
    forces(pos_d, eps2, acc_d)
    nb.kick[blocks, threads](vel_d, acc_d, half)


@cuda.jit(fastmath=True)
def nbody_tiled_bug(pos, eps2, acc):
    """acc[i] = the acceleration of body i, one shared tile of bodies at a time: find the bug (add a line)."""
    sh = cuda.shared.array((TILE, 4), float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    n = pos.shape[0]
    k = min(i, n - 1)  # a thread without a body computes for the last one and writes nothing
    ax, ay, az = float32(0), float32(0), float32(0)
    for start in range(0, n, TILE):
        j = start + t
        for c in range(4):
            sh[t, c] = pos[j, c] if j < n else float32(0)
        cuda.syncthreads()  # RAW: the tile is in shared memory before anyone reads it
        for b in range(TILE):
            fx, fy, fz = nb.interaction_fast(pos[k, 0], pos[k, 1], pos[k, 2], sh[b, 0], sh[b, 1], sh[b, 2], sh[b, 3], eps2)
            ax += fx
            ay += fy
            az += fz
        cuda.syncthreads()  # WAR: everyone has read the tile before the next trip overwrites it
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def predict_ginteractions(fp32_gflops, flops_per_interaction):
    """The roof of an all-pairs kernel in G interactions/s."""
    # FILL ME IN (1 line): the FMA peak over the flops of one interaction
    return fp32_gflops / flops_per_interaction
