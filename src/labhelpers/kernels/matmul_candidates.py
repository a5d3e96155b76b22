"""SGEMM candidates beside the chapter's winner (timed by ``bench/tuning/dense.py``; the chapter's is in ``matmul``).

Static evidence at sm_90 (``.gpurun/static_counts/dense_report.txt``): the chapter's register-tiled kernels
(:func:`~labhelpers.kernels.matmul.register_tiled_kernel`, :func:`~labhelpers.kernels.matmul.double_buffered_kernel`,
128x128x8 tiles, 8x8 outputs per thread) already issue 1 LDS.128 per 16 FFMA, no 32-bit shared loads and no
spills, but the ``bk = 8`` steps of k of a tile run as a *loop* of 4 trips of 2 steps, each trip about 13
integer/branch instructions for 128 FFMA. cuBLAS-class SGEMM writes the k-steps of a tile out in full.

:func:`unrolled_kernel` is the register-tiled kernel whose ``bk`` steps of k are explicit calls of the one-step
device function :func:`~labhelpers.kernels.matmul.k_step` (:func:`~labhelpers.kernels.matmul.k_steps`), offsets
constant once inlined: no loop control inside a tile. Double-buffered with the chapter's phase loop it *is* the
chapter's :func:`~labhelpers.kernels.matmul.unrolled_kernel` (the H200's winner at 128x128x16, one block per SM:
0.867 of cuBLAS, November 2026); the other structures stay here as candidates, built from the chapter's device
functions (:func:`~labhelpers.kernels.matmul.tile_fetch`, :func:`~labhelpers.kernels.matmul.tile_land`): single-
buffered, and ``peeled``. Same tile shapes, shared-memory layout, bounds checks and result.

Static counts at sm_90 (``.gpurun/static_counts/dense_report.py``), 128x128x8, whole tiles, SASS instructions per
tile of k (512 FFMA, 32 LDS.128, the rest integer, branch, global loads, shared stores, barrier), no spills in any:

* the chapter's double_buffered: 120 registers, 725 per tile (1.416 per FFMA; the 4-trip k-loop is 592 of them);
* unrolled, chapter's phase loop: 127 registers, 669 (1.307); single-buffered 127 registers, 657 (1.283). The
  k-loop's control is gone; what is left is address arithmetic the compiler redoes every phase inside the
  branches around the fetch and the multiply;
* unrolled and ``peeled`` (tile 0 before the loop, the last tile after it, no branch in the loop): 188 registers,
  607 (1.186); single-buffered 187 registers, 588 (1.148): one block of 256 threads per SM
  (:data:`PEELED`, ``min_blocks = 1``); under the 128-register bound of two blocks it spills (228 words).

Guarded kernels (any sizes) pay 50-100 more instructions per tile for the checks. On the H200 (4096^3,
``bench/tuning/results/tuning-dense-2.csv``) the peeled ones lost (0.75-0.79 of cuBLAS against 0.81 unpeeled at
128x128x8): fewer instructions did not pay for half the resident warps at ``bk = 8``.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, uint64

from .. import validate
from ..arrays import to_host
from ..errors import ArrayArgumentError
from . import matmul as mm

VEC = mm.VEC
#: The tiling of the peeled candidates: the chapter's 128 x 128 x 8, 8 x 8 per thread, one block per SM (the
#: registers the peeled loop keeps do not fit the 128 that two blocks of 256 threads allow).
PEELED = mm.RegisterTiling(bm=128, bn=128, bk=8, tm=8, tn=8, min_blocks=1)


@functools.lru_cache(maxsize=None)
def unrolled_kernel(tiling: mm.RegisterTiling = mm.REGISTER, guarded: bool = True, double_buffered: bool = True,
                    peeled: bool = False):
    """The register-tiled kernel with the ``bk`` steps of each tile written out (no loop inside a tile).

    ``double_buffered=True`` (default): two shared buffers, the next tile's global loads in flight while this
    one is multiplied, one barrier per phase (as :func:`~labhelpers.kernels.matmul.double_buffered_kernel`).
    ``False``: one buffer, two barriers per phase (as :func:`~labhelpers.kernels.matmul.register_tiled_kernel`).
    ``guarded``: bounds checks on every load (any sizes); ``False`` only for whole tiles
    (:func:`~labhelpers.kernels.matmul.whole_tiles`).

    ``peeled=False`` (default): the chapter's phase loop, ``phases + 1`` trips with a branch around the fetch and
    one around the multiply; double-buffered, that is the chapter's own
    :func:`~labhelpers.kernels.matmul.unrolled_kernel`, returned as it is. The compiler sinks the address
    arithmetic of the loads and stores into those branches and redoes it every phase (about 100 integer
    instructions per tile at sm_90). ``True``: tile 0 fetched before the loop and the last tile multiplied after
    it, no branch in the loop body: that arithmetic leaves the loop, but the values it keeps need registers (at
    sm_90, 128 x 128 x 8: 188 registers, no spills, with ``tiling.min_blocks = 1``; with 2 the 128-register
    bound spills, so use 1).
    """
    if double_buffered and not peeled:
        return mm.unrolled_kernel(tiling, guarded)
    BM, BN, BK, TM, TN, _, _, ROW_STEP, COL_STEP, TX, _, _, _, _ = mm._unsigned_constants(tiling)
    ZERO, ONE = uint64(0), uint64(1)
    NBUF = 2 if double_buffered else 1
    LAST_BUF = uint64(NBUF - 1)  # mask of the buffer index: 1 double-buffered, 0 single
    bk, bn, a_stride, tm, tn = tiling.bk, tiling.bn, tiling.bm + mm.A_PAD, tiling.tm, tiling.tn
    a_passes, b_passes = tiling.a_passes, tiling.b_passes
    align = mm._shared_alignment()
    fetch, land, tile_steps = mm.tile_fetch(tiling, guarded), mm.tile_land(tiling), mm.k_steps(tiling, bk)

    @mm._jit_for(tiling)
    def matmul_unrolled_single(A, B, C):
        As = cuda.shared.array((1, bk, a_stride), float32, alignment=align)  # one transposed A tile
        Bs = cuda.shared.array((1, bk, bn), float32, alignment=align)
        acc = cuda.local.array((tm, tn), float32)
        a_next = cuda.local.array(a_passes, float32)  # the next tile's elements, in flight from global memory
        b_next = cuda.local.array(b_passes, float32)
        m, n, k = uint64(C.shape[0]), uint64(C.shape[1]), uint64(A.shape[1])
        tx, ty = uint64(cuda.threadIdx.x), uint64(cuda.threadIdx.y)
        tid = ty * TX + tx
        row0, col0 = uint64(cuda.blockIdx.y) * BM, uint64(cuda.blockIdx.x) * BN
        a_row, a_col = tid // BK, tid % BK
        b_row, b_col = tid // BN, tid % BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)
        phases = (k + BK - ONE) // BK
        for ph in range(ZERO, phases + ONE):  # phase ph fetches tile ph and multiplies tile ph - 1
            if ph < phases:  # 1. issue the loads of tile ph
                fetch(A, B, a_next, b_next, m, n, k, ph * BK, row0, col0, a_row, a_col, b_row, b_col)
            if ph > ZERO:  # 2. multiply tile ph - 1 while they travel: bk steps of k written out
                tile_steps(As, Bs, ZERO, ZERO, tx, ty, acc)
            cuda.syncthreads()  # WAR: everyone is done reading the one buffer
            if ph < phases:  # 3. land tile ph
                land(As, Bs, ZERO, a_next, b_next, a_row, a_col, b_row, b_col)
            cuda.syncthreads()  # RAW for tile ph
        for i in range(TM):
            r = row0 + (i // VEC) * ROW_STEP + ty * VEC + i % VEC
            for j in range(TN):
                c = col0 + (j // VEC) * COL_STEP + tx * VEC + j % VEC
                if r < m and c < n:
                    C[r, c] = acc[i, j]

    @mm._jit_for(tiling)
    def matmul_unrolled_peeled(A, B, C):
        As = cuda.shared.array((NBUF, bk, a_stride), float32, alignment=align)  # transposed A tiles
        Bs = cuda.shared.array((NBUF, bk, bn), float32, alignment=align)
        acc = cuda.local.array((tm, tn), float32)
        a_next = cuda.local.array(a_passes, float32)  # the next tile's elements, in flight from global memory
        b_next = cuda.local.array(b_passes, float32)
        m, n, k = uint64(C.shape[0]), uint64(C.shape[1]), uint64(A.shape[1])
        tx, ty = uint64(cuda.threadIdx.x), uint64(cuda.threadIdx.y)
        tid = ty * TX + tx
        row0, col0 = uint64(cuda.blockIdx.y) * BM, uint64(cuda.blockIdx.x) * BN
        a_row, a_col = tid // BK, tid % BK
        b_row, b_col = tid // BN, tid % BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)
        phases = (k + BK - ONE) // BK  # at least 1 (the host never launches for k = 0)
        # Prologue: tile 0 into buffer 0. Then no branch inside the loop body, so the compiler keeps the
        # loop-invariant address arithmetic out of the loop instead of sinking it into conditional blocks.
        fetch(A, B, a_next, b_next, m, n, k, ZERO, row0, col0, a_row, a_col, b_row, b_col)
        land(As, Bs, ZERO, a_next, b_next, a_row, a_col, b_row, b_col)
        cuda.syncthreads()  # RAW: tile 0 is complete
        for ph in range(ONE, phases):  # phase ph fetches tile ph and multiplies tile ph - 1
            fetch(A, B, a_next, b_next, m, n, k, ph * BK, row0, col0, a_row, a_col, b_row, b_col)  # in flight...
            if NBUF == 1:  # (a compile-time constant: one of the two branches is compiled)
                tile_steps(As, Bs, ZERO, ZERO, tx, ty, acc)  # ...while tile ph - 1 is multiplied, bk steps written out
                cuda.syncthreads()  # WAR: everyone is done reading the one buffer
                land(As, Bs, ZERO, a_next, b_next, a_row, a_col, b_row, b_col)
            else:
                tile_steps(As, Bs, (ph - ONE) & ONE, ZERO, tx, ty, acc)
                land(As, Bs, ph & ONE, a_next, b_next, a_row, a_col, b_row, b_col)  # the other buffer
            cuda.syncthreads()  # RAW for tile ph (and, double-buffered, WAR for buffer ph % 2: as in the chapter)
        tile_steps(As, Bs, (phases - ONE) & LAST_BUF, ZERO, tx, ty, acc)  # epilogue: the last tile
        for i in range(TM):
            r = row0 + (i // VEC) * ROW_STEP + ty * VEC + i % VEC
            for j in range(TN):
                c = col0 + (j // VEC) * COL_STEP + tx * VEC + j % VEC
                if r < m and c < n:
                    C[r, c] = acc[i, j]

    return matmul_unrolled_peeled if peeled else matmul_unrolled_single


def plan_candidate(m: int, k: int, n: int, *, tiling: mm.RegisterTiling = mm.REGISTER,
                   double_buffered: bool = True, peeled: bool = False) -> mm.Plan:
    """Kernel and launch geometry of the candidate for an ``m x k`` by ``k x n`` product (bounds checks only when
    the sizes are not whole tiles, as :func:`labhelpers.kernels.matmul.plan`)."""
    guarded = not mm.whole_tiles(tiling, m, k, n)
    name = ("unrolled double_buffered" if double_buffered else "unrolled register") + (" peeled" if peeled else "")
    return mm.Plan(name, unrolled_kernel(tiling, guarded, double_buffered, peeled), tiling.grid(m, n), tiling.block,
                   f"{tiling.label()}, min_blocks {tiling.min_blocks}, k-steps unrolled", guarded)


def run_matmul_candidate(a, b, *, tiling: mm.RegisterTiling = mm.REGISTER, double_buffered: bool = True,
                         peeled: bool = False) -> np.ndarray:
    """``a @ b`` with :func:`unrolled_kernel`, as a NumPy array.

    Args:
        a: ``m x k`` float32, C-contiguous (NumPy or a device array); b: ``k x n`` float32, C-contiguous.
        tiling: the block and thread tiles; double_buffered: two shared buffers (default) or one; peeled: see
            :func:`unrolled_kernel`.

    Raises:
        ArrayArgumentError: wrong type, dimensions, dtype, layout, or inner dimensions that differ (the checks
            of :func:`labhelpers.kernels.matmul.matmul`).
    """
    for name, x in (("a", a), ("b", b)):
        validate.array(x, name, ndim=2, contiguous=False)  # the number of dimensions first, then the rest
        validate.array(x, name, dtype=np.float32)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ArrayArgumentError(
            f"inner dimensions differ: a is {m} x {k} and b is {k2} x {n}; a @ b needs as many columns in a as "
            f"rows in b (did you mean b.T, or a.T?)")
    if m == 0 or n == 0 or k == 0:  # nothing to launch: an empty matrix, or empty sums (zeros)
        return np.zeros((m, n), dtype=np.float32)
    p = plan_candidate(m, k, n, tiling=tiling, double_buffered=double_buffered, peeled=peeled)
    a_d = cuda.to_device(a) if isinstance(a, np.ndarray) else a
    b_d = cuda.to_device(b) if isinstance(b, np.ndarray) else b
    c_d = cuda.device_array((m, n), dtype=np.float32)
    p.launch(a_d, b_d, c_d)
    return to_host(c_d)


def static_kernels():
    """``(label, kernel, signature)`` of the candidates for the static-count script (compile backend)."""
    from numba import types  # the compiler's type objects: only the static-count script needs them

    a2 = types.Array(types.float32, 2, "C")
    sig = types.void(a2, a2, a2)
    out = []
    for guarded in (False, True):
        tag = "guarded" if guarded else "whole"
        for db in (True, False):
            kind = "dbuf" if db else "reg"
            out.append((f"unrolled {kind} 128x128x8 ({tag})", unrolled_kernel(mm.REGISTER, guarded, db), sig))
            out.append((f"unrolled {kind} peeled mb1 ({tag})", unrolled_kernel(PEELED, guarded, db, True), sig))
    out.append(("unrolled dbuf peeled mb2 (whole)", unrolled_kernel(mm.REGISTER, False, True, True), sig))
    return out


__all__ = ["PEELED", "plan_candidate", "run_matmul_candidate", "static_kernels", "unrolled_kernel"]
