"""Solutions of labs/09_stencils_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import math

import numpy as np

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
from numba import cuda, float32

MAX_RADIUS = 16
TILE = 1024 + 2 * MAX_RADIUS
QUARTER = np.float32(0.25)
TWO = np.float32(2.0)


@cuda.jit
def stencil_any_radius(x, out, radius):
    s = cuda.shared.array(TILE, float32)
    tid = cuda.threadIdx.x
    first = cuda.blockIdx.x * cuda.blockDim.x - radius  # global index of tile word 0
    w = tid
    # FILL ME IN (roughly 5 lines): load tile words w = tid, tid + blockDim.x, ... (0 outside x), then a barrier
    while w < cuda.blockDim.x + 2 * radius:
        g = first + w
        s[w] = x[g] if g >= 0 and g < x.size else float32(0)
        w += cuda.blockDim.x
    cuda.syncthreads()  # RAW: the whole tile, halo included, is loaded before anyone reads it
    i = cuda.grid(1)
    if i < x.size:
        acc = float32(0)
        for k in range(2 * radius + 1):
            acc += s[tid + k]
        out[i] = acc


@cuda.jit
def jacobi_step(u, v):
    j, i = cuda.grid(2)
    ny, nx = u.shape
    # FILL ME IN (roughly 6 lines): border points copy u; interior points average their 4 neighbours
    if i < ny and j < nx:
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            v[i, j] = u[i, j]
        else:
            v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))


@cuda.jit
def sobel(img, gx_out, gy_out, out):
    j, i = cuda.grid(2)
    ny, nx = img.shape
    if i < ny and j < nx:
        # FILL ME IN (roughly 14 lines): clamped neighbour indices, gx and gy stored in gx_out and gy_out,
        # out[i, j] = sqrt(gx*gx + gy*gy)
        up = max(i - 1, 0)
        down = min(i + 1, ny - 1)
        lf = max(j - 1, 0)
        rt = min(j + 1, nx - 1)
        gx = (img[up, rt] + TWO * img[i, rt] + img[down, rt]) - (img[up, lf] + TWO * img[i, lf] + img[down, lf])
        gy = (img[down, lf] + TWO * img[down, j] + img[down, rt]) - (img[up, lf] + TWO * img[up, j] + img[up, rt])
        gx_out[i, j] = gx
        gy_out[i, j] = gy
        out[i, j] = math.sqrt(gx * gx + gy * gy)


@cuda.jit
def propagate_step(labels_in, labels_out, changed):
    j, i = cuda.grid(2)
    ny, nx = labels_in.shape
    if i < ny and j < nx:
        old = labels_in[i, j]
        best = old
        # FILL ME IN (roughly 14 lines): if old != 0, take the smallest nonzero label of the 4 neighbours;
        # set changed[0] = 1 if that is smaller than old
        if old != 0:
            if i > 0 and labels_in[i - 1, j] != 0:
                best = min(best, labels_in[i - 1, j])
            if i < ny - 1 and labels_in[i + 1, j] != 0:
                best = min(best, labels_in[i + 1, j])
            if j > 0 and labels_in[i, j - 1] != 0:
                best = min(best, labels_in[i, j - 1])
            if j < nx - 1 and labels_in[i, j + 1] != 0:
                best = min(best, labels_in[i, j + 1])
            if best < old:
                changed[0] = 1
        labels_out[i, j] = best


def choose_block():
    """(x, y) threads per block for jacobi_step, x along a row."""
    # 32 along a row: each warp reads whole 128-byte lines; y = 8 gives 256 threads per block.
    return (32, 8)


@cuda.jit
def jacobi_interior_only(u, v):
    """One Jacobi step of u into v, borders fixed: find the bug (fix it by adding lines)."""
    j, i = cuda.grid(2)
    ny, nx = u.shape
    if i < ny and j < nx and (i == 0 or j == 0 or i == ny - 1 or j == nx - 1):
        v[i, j] = u[i, j]  # the fixed boundary: border points keep their value
    if 0 < i < ny - 1 and 0 < j < nx - 1:
        v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))


def predict_jacobi_ms(nx, ny, itemsize, copy_gbs):
    """The least time of one Jacobi step, in ms: the bytes it moves over the copy ceiling."""
    # FILL ME IN (roughly 2 lines): bytes moved (each point read once, written once), then ms at copy_gbs
    nbytes = 2 * nx * ny * itemsize
    return nbytes / (copy_gbs * 1e9) * 1e3
