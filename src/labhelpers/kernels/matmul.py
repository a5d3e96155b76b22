"""Chapter "Matrix multiplication": the GPU kernels, from one thread per output to register tiles, and the CPU loops.

Every kernel computes ``C = A @ B`` for row-major float32 matrices, ``A`` of shape ``m x k``, ``B``
of shape ``k x n`` and ``C`` of shape ``m x n``, for *any* ``m``, ``k`` and ``n`` (1 x 1, 17 x 33
times 33 x 5, sizes that divide no tile). The x dimension of the grid runs along the columns of
``C`` and y along its rows, so neighbouring threads of a warp touch neighbouring columns
(coalesced loads of ``B`` and stores of ``C``).

The sequence, one lesson each:

* :func:`matmul_naive`: one thread per element of ``C``, a dot product straight from global memory.
* :func:`tiled_kernel`: a block stages ``tile x tile`` tiles of ``A`` and ``B`` in shared memory,
  two barriers per tile (read-after-write and write-after-read), loads guarded with zeros.
* :func:`register_tiled_kernel`: thread coarsening. A block computes a ``bm x bn`` tile of ``C``,
  each thread a ``tm x tn`` patch of it held in registers; per step of ``k`` a thread reads
  ``tm + tn`` numbers from shared memory and does ``tm * tn`` fused multiply-adds.
* :func:`double_buffered_kernel`: the same, with two shared buffers so the next tile's global
  loads are in flight while the current tile is multiplied (one barrier per tile).
* :func:`unrolled_kernel`: the double-buffered kernel with the ``bk`` steps of k of a tile written out,
  ``bk`` calls of the one-step device function :func:`k_step` (:func:`k_steps`), and a deeper slice of
  k per tile (:data:`UNROLLED`, ``bk = 16``): no loop control inside a tile, and the per-tile work (barrier,
  global loads, shared stores, address arithmetic) spread over twice the multiply-adds.

Host side: :func:`matmul` validates its arguments (shapes, dtype, contiguity) and runs any variant;
:func:`plan` gives the kernel and launch geometry. :mod:`labhelpers.experiments.matmul` times them on a
GPU (the chapter's reference tables are built by ``bench/matmul.py`` with the same functions).

The CPU side, at the end of the module: the same three loops in three orders, compiled for the CPU with
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

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, njit, uint64

from .. import backend, validate
from ..arrays import to_host
from ..errors import ArrayArgumentError, LaunchConfigError
from ..launch import blocks_for
from ..validate import check_launch

#: The kernels of this chapter, in the order the chapter builds them.
VARIANTS: tuple[str, ...] = ("naive", "tiled", "coarsened", "register", "double_buffered", "unrolled")
#: Threads per block of the naive kernel, as (x along columns, y along rows).
NAIVE_BLOCK: tuple[int, int] = (16, 16)
#: Tile sizes the shared-memory kernel is built for (a tile x tile block; 32 x 32 = 1024 threads is the most).
TILES: tuple[int, ...] = (8, 16, 32)
#: Default tile of the shared-memory kernel.
DEFAULT_TILE = 16
#: Relative error of the Frobenius norm, ``||C - C_ref|| / ||C_ref||`` against a float64 reference, that a
#: float32 result must stay within. Rounding in a float32 dot product of length k grows like sqrt(k) times
#: float32's unit roundoff (6e-8) for random data: about 4e-6 at k = 4096, so 1e-5 passes every correct
#: kernel up to that size, and a kernel that loses or repeats a phase, a row or a column of work misses it
#: by orders of magnitude (the tests also compare element by element, and unwritten NaN fails any norm).
RELATIVE_TOLERANCE = 1e-5
#: Width in floats of the groups a thread reads from shared memory at once (16 bytes, one 128-bit load).
VECTOR = 4
VEC = uint64(VECTOR)  # the same, as the unsigned constant the kernels use
#: Floats of padding after each row of the transposed A tile in shared memory (keeps the stores
#: of the tile free of bank conflicts; 4 floats keep every row 16-byte aligned).
A_PAD = 4


# ------------------------------------------------------------------------------------------- naive kernel


@cuda.jit
def matmul_naive(A, B, C):
    """``C = A @ B`` with one thread per element of ``C``, reading ``A`` and ``B`` from global memory.

    Per fused multiply-add (2 flops) the thread loads one float of ``A`` and one of ``B`` (8 bytes):
    0.25 flop per byte, which no GPU feeds fast enough. Launch with x along the columns of ``C``.
    """
    col, row = cuda.grid(2)  # x runs along a row of C: neighbouring threads, neighbouring columns
    if row < C.shape[0] and col < C.shape[1]:  # >= shape is outside (the lecture notes' `row > Width` lets row == Width in)
        acc = float32(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


# ------------------------------------------------------------------------------------ shared-memory tiles


@functools.lru_cache(maxsize=None)
def tiled_kernel(tile: int = DEFAULT_TILE):
    """The shared-memory kernel for ``tile x tile`` blocks (``tile`` a compile-time constant).

    Each phase, every thread copies one element of ``A`` and one of ``B`` into the block's shared
    tiles (a zero where the tile hangs over the edge of the matrix), the block waits, and every
    thread does ``tile`` multiply-adds from shared memory. Each element brought in from global
    memory is used ``tile`` times: ``tile`` times fewer global loads than :func:`matmul_naive`.
    Launch with ``tile x tile`` threads per block, x along the columns of ``C``.
    """
    if tile < 1 or tile * tile > 1024:
        raise LaunchConfigError(f"a {tile} x {tile} tile needs {tile * tile} threads per block: choose a tile "
                                "between 1 and 32 (1024 threads is the most a block can have)")

    @cuda.jit
    def matmul_tiled(A, B, C):
        As = cuda.shared.array((tile, tile), float32)  # tile of A: rows of C's tile, a slice of k
        Bs = cuda.shared.array((tile, tile), float32)  # tile of B: the same slice of k, columns of C's tile
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        col, row = cuda.grid(2)
        m, k = A.shape
        n = B.shape[1]
        acc = float32(0)
        for k0 in range(0, k, tile):
            # Every thread loads, even one outside C: its zeros pad the tiles, and it must reach the
            # barriers below (guard the loads, never the barrier).
            a = float32(0)
            if row < m and k0 + tx < k:
                a = A[row, k0 + tx]
            As[ty, tx] = a
            b = float32(0)
            if k0 + ty < k and col < n:
                b = B[k0 + ty, col]
            Bs[ty, tx] = b
            cuda.syncthreads()  # RAW: the tiles must be complete before anyone reads them
            for kk in range(tile):
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()  # WAR: everyone must be done reading before the next phase overwrites the tiles
        if row < m and col < n:
            C[row, col] = acc

    return matmul_tiled


# ------------------------------------------------------------------------------------------ register tiles


@dataclass(frozen=True)
class RegisterTiling:
    """The shape of a register-tiled kernel: a block computes ``bm x bn`` of C, a thread ``tm x tn`` of that.

    Attributes:
        bm, bn: rows and columns of C per block.
        bk: slice of ``k`` staged in shared memory per phase.
        tm, tn: rows and columns of C per thread, multiples of 4: a thread reads its ``tm`` values of A
            and ``tn`` values of B for one step of ``k`` as groups of 4 adjacent floats (16-byte loads).
        min_blocks: blocks that should fit on one SM at once; the compiler keeps registers per
            thread under ``65536 / (threads * min_blocks)`` (a launch bound).
    """

    bm: int = 128
    bn: int = 128
    bk: int = 8
    tm: int = 8
    tn: int = 8
    min_blocks: int = 2

    def __post_init__(self) -> None:
        for name in ("bm", "bn", "bk", "tm", "tn", "min_blocks"):
            if getattr(self, name) < 1:
                raise LaunchConfigError(f"RegisterTiling.{name} must be positive, got {getattr(self, name)}")
        if self.tm % VECTOR or self.tn % VECTOR:
            raise LaunchConfigError(f"tm and tn must be multiples of {VECTOR} (got tm={self.tm}, tn={self.tn}): "
                                    f"a thread reads its fragments in groups of {VECTOR} floats")
        if self.bm % self.tm or self.bn % self.tn:
            raise LaunchConfigError(f"the block tile {self.bm} x {self.bn} must be a whole number of thread tiles "
                                    f"{self.tm} x {self.tn}")
        reason = check_launch(self.threads, self.shared_bytes())
        if reason:
            raise LaunchConfigError(f"{self}: {reason}")
        if self.bk % 2:
            raise LaunchConfigError(f"bk must be even (the steps of k run in pairs), got {self.bk}")
        if self.threads % self.bk or self.bm % (self.threads // self.bk):
            raise LaunchConfigError(f"{self.label()}: the {self.threads} threads copy the {self.bm} x {self.bk} A tile "
                                    f"as {self.threads // self.bk or 0} rows at a time; that must divide {self.bm}")
        if self.threads % self.bn or self.bk % (self.threads // self.bn):
            raise LaunchConfigError(f"{self.label()}: the {self.threads} threads copy the {self.bk} x {self.bn} B tile "
                                    f"as {self.threads // self.bn or 0} rows at a time; that must divide {self.bk}")

    @property
    def threads_x(self) -> int:
        """Threads along the columns of the block tile: ``bn / tn``."""
        return self.bn // self.tn

    @property
    def threads_y(self) -> int:
        """Threads along the rows of the block tile: ``bm / tm``."""
        return self.bm // self.tm

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.threads_x * self.threads_y

    @property
    def a_passes(self) -> int:
        """Elements of the A tile each thread copies per phase."""
        return self.bm * self.bk // self.threads

    @property
    def b_passes(self) -> int:
        """Elements of the B tile each thread copies per phase."""
        return self.bk * self.bn // self.threads

    @property
    def block(self) -> tuple[int, int]:
        """The block's shape for the launch, (x, y)."""
        return (self.threads_x, self.threads_y)

    def shared_bytes(self, buffers: int = 1) -> int:
        """Shared memory per block: the transposed, padded A tile and the B tile, times ``buffers``."""
        return buffers * 4 * self.bk * ((self.bm + A_PAD) + self.bn)

    def grid(self, m: int, n: int) -> tuple[int, int]:
        """Blocks needed for an ``m x n`` output, (x along columns, y along rows)."""
        return (blocks_for(n, self.bn), blocks_for(m, self.bm))

    def label(self) -> str:
        """A short name such as ``128x128x8, 8x8/thread``."""
        return f"{self.bm}x{self.bn}x{self.bk}, {self.tm}x{self.tn}/thread"


#: Thread coarsening, first step: 64 x 64 of C per block of 256 threads, 4 x 4 per thread.
COARSENED = RegisterTiling(bm=64, bn=64, bk=8, tm=4, tn=4)
#: The chapter's main shape: 128 x 128 per block of 256 threads, 8 x 8 per thread (64 accumulators).
REGISTER = RegisterTiling(bm=128, bn=128, bk=8, tm=8, tn=8)
#: The shape of :func:`unrolled_kernel`, the chapter's fastest on the H200: the same block and thread tiles, a
#: slice of 16 steps of k per tile, and a launch bound of one block per SM (up to 255 registers per thread).
UNROLLED = RegisterTiling(bm=128, bn=128, bk=16, tm=8, tn=8, min_blocks=1)


def _jit_for(tiling: RegisterTiling) -> Callable:
    """``cuda.jit`` with a launch bound on a GPU (the simulator knows no launch bounds)."""
    if backend.is_simulator():
        return cuda.jit
    return cuda.jit(launch_bounds=(tiling.threads, tiling.min_blocks))


def _shared_alignment() -> int | None:
    """16-byte alignment of the shared tiles on a GPU (4 floats load as one 128-bit access); none in the simulator."""
    return None if backend.is_simulator() else 16


def _unsigned_constants(t: RegisterTiling) -> tuple:
    """The sizes a register-tiled kernel needs, as ``uint64`` (mixing uint64 and signed ints gives float64 in Numba)."""
    u = uint64
    return (u(t.bm), u(t.bn), u(t.bk), u(t.tm), u(t.tn), u(t.tm // VECTOR), u(t.tn // VECTOR),
            u(t.bm // (t.tm // VECTOR)), u(t.bn // (t.tn // VECTOR)), u(t.threads_x),
            u(t.a_passes), u(t.b_passes), u(t.threads // t.bk), u(t.threads // t.bn))


@functools.lru_cache(maxsize=None)
def register_tiled_kernel(tiling: RegisterTiling = REGISTER, guarded: bool = True):
    """The register-tiled (thread-coarsened) kernel for one :class:`RegisterTiling`.

    Per phase, the block copies a ``bm x bk`` tile of A (stored transposed, ``As[k, row]``) and a
    ``bk x bn`` tile of B into shared memory. Then, for each of the ``bk`` steps of k, a thread
    reads its ``tm`` values of A and ``tn`` values of B into registers (the fragments) and does
    the ``tm * tn`` multiply-adds of their outer product into ``acc``, which never leaves the
    registers until the end. A thread's rows are ``tm / 4`` groups of 4 adjacent rows, the groups
    ``bm / (tm / 4)`` apart (likewise its columns): the 4 floats of a group are one 16-byte
    shared-memory load, and the threads of a warp read neighbouring groups, without bank conflicts.

    Three things Numba needs to compile this well (checked in the SASS for sm_90):

    * every size is a closure constant, so the loops over ``tm``, ``tn`` and the groups are fully
      unrolled and ``acc`` is 64 registers, not an array in (slow) local memory;
    * every index is unsigned (``uint64``): Numba checks each *signed* index for a negative value
      (``a[-1]`` is the last element, as in Python), a compare and a select per access;
    * the ``bk`` steps of k run as pairs: the compiler fully unrolls only small loops, and the
      unrolled pair pays the loop counter and address arithmetic once per two steps.

    Args:
        tiling: the tile shapes.
        guarded: check the bounds of every load (zeros outside the matrices), so any ``m``, ``k``,
            ``n`` work. ``False`` drops the checks; only for sizes that are whole tiles in every
            dimension (:func:`plan` chooses).
    """
    BM, BN, BK, TM, TN, GM, GN, ROW_STEP, COL_STEP, TX, A_PASSES, B_PASSES, A_STEP, B_STEP = \
        _unsigned_constants(tiling)
    ZERO, TWO = uint64(0), uint64(2)
    GUARDED = guarded
    bk, bn, a_stride, tm, tn = tiling.bk, tiling.bn, tiling.bm + A_PAD, tiling.tm, tiling.tn
    align = _shared_alignment()

    @_jit_for(tiling)
    def matmul_register_tiled(A, B, C):
        As = cuda.shared.array((bk, a_stride), float32, alignment=align)  # A tile, transposed: As[k, row]
        Bs = cuda.shared.array((bk, bn), float32, alignment=align)  # B tile: Bs[k, col]
        acc = cuda.local.array((tm, tn), float32)  # this thread's tm x tn outputs: registers
        a_frag = cuda.local.array(tm, float32)  # its tm values of A for one step of k
        b_frag = cuda.local.array(tn, float32)  # its tn values of B for one step of k
        m, n, k = uint64(C.shape[0]), uint64(C.shape[1]), uint64(A.shape[1])
        tx, ty = uint64(cuda.threadIdx.x), uint64(cuda.threadIdx.y)
        tid = ty * TX + tx
        row0, col0 = uint64(cuda.blockIdx.y) * BM, uint64(cuda.blockIdx.x) * BN
        a_row, a_col = tid // BK, tid % BK  # this thread copies rows a_row + p * A_STEP of the A tile, column a_col
        b_row, b_col = tid // BN, tid % BN  # and rows b_row + p * B_STEP of the B tile, column b_col
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)
        for k0 in range(ZERO, k, BK):
            for p in range(A_PASSES):  # A[row0:row0+bm, k0:k0+bk] -> As, transposed; zeros outside A
                r = a_row + p * A_STEP
                a = float32(0)
                if not GUARDED or (row0 + r < m and k0 + a_col < k):
                    a = A[row0 + r, k0 + a_col]
                As[a_col, r] = a
            for p in range(B_PASSES):  # B[k0:k0+bk, col0:col0+bn] -> Bs; zeros outside B
                r = b_row + p * B_STEP
                b = float32(0)
                if not GUARDED or (k0 + r < k and col0 + b_col < n):
                    b = B[k0 + r, col0 + b_col]
                Bs[r, b_col] = b
            cuda.syncthreads()  # RAW: the tiles must be complete before anyone reads them
            for kk0 in range(ZERO, BK, TWO):
                for kq in range(TWO):  # two steps of k per trip: small enough to be unrolled
                    kk = kk0 + kq
                    for g in range(GM):  # shared -> registers, 4 adjacent floats per group
                        for v in range(VEC):
                            a_frag[g * VEC + v] = As[kk, g * ROW_STEP + ty * VEC + v]
                    for g in range(GN):
                        for v in range(VEC):
                            b_frag[g * VEC + v] = Bs[kk, g * COL_STEP + tx * VEC + v]
                    for i in range(TM):  # the outer product: tm * tn fused multiply-adds
                        for j in range(TN):
                            acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()  # WAR: everyone must be done reading before the next phase overwrites the tiles
        for i in range(TM):
            r = row0 + (i // VEC) * ROW_STEP + ty * VEC + i % VEC
            for j in range(TN):
                c = col0 + (j // VEC) * COL_STEP + tx * VEC + j % VEC
                if r < m and c < n:
                    C[r, c] = acc[i, j]

    return matmul_register_tiled


@functools.lru_cache(maxsize=None)
def double_buffered_kernel(tiling: RegisterTiling = REGISTER, guarded: bool = True):
    """:func:`register_tiled_kernel` with double buffering: the next tile travels while this one is multiplied.

    Two copies of each shared tile. In phase ``ph`` every thread first issues the global loads of
    tile ``ph`` into registers (``a_next``, ``b_next``), then multiplies tile ``ph - 1`` out of the
    other buffer while those loads are in flight, and only then stores them into shared memory.
    One barrier per phase does both jobs: tile ``ph`` is complete before phase ``ph + 1`` reads it
    (RAW), and buffer ``ph % 2`` is written only after the barrier that ended the reads of it two
    phases earlier (WAR). Arguments as for :func:`register_tiled_kernel`.
    """
    BM, BN, BK, TM, TN, GM, GN, ROW_STEP, COL_STEP, TX, A_PASSES, B_PASSES, A_STEP, B_STEP = \
        _unsigned_constants(tiling)
    ZERO, ONE, TWO = uint64(0), uint64(1), uint64(2)
    GUARDED = guarded
    bk, bn, a_stride, tm, tn = tiling.bk, tiling.bn, tiling.bm + A_PAD, tiling.tm, tiling.tn
    a_passes, b_passes = tiling.a_passes, tiling.b_passes
    align = _shared_alignment()

    @_jit_for(tiling)
    def matmul_double_buffered(A, B, C):
        As = cuda.shared.array((2, bk, a_stride), float32, alignment=align)  # two transposed A tiles
        Bs = cuda.shared.array((2, bk, bn), float32, alignment=align)  # two B tiles
        acc = cuda.local.array((tm, tn), float32)
        a_frag = cuda.local.array(tm, float32)
        b_frag = cuda.local.array(tn, float32)
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
            k0 = ph * BK
            if ph < phases:  # 1. issue the loads of tile ph (the same for every thread of the block)
                for p in range(A_PASSES):
                    r = a_row + p * A_STEP
                    a = float32(0)
                    if not GUARDED or (row0 + r < m and k0 + a_col < k):
                        a = A[row0 + r, k0 + a_col]
                    a_next[p] = a
                for p in range(B_PASSES):
                    r = b_row + p * B_STEP
                    b = float32(0)
                    if not GUARDED or (k0 + r < k and col0 + b_col < n):
                        b = B[k0 + r, col0 + b_col]
                    b_next[p] = b
            if ph > ZERO:  # 2. multiply tile ph - 1 while they travel
                cur = (ph - ONE) % TWO
                for kk0 in range(ZERO, BK, TWO):
                    for kq in range(TWO):
                        kk = kk0 + kq
                        for g in range(GM):
                            for v in range(VEC):
                                a_frag[g * VEC + v] = As[cur, kk, g * ROW_STEP + ty * VEC + v]
                        for g in range(GN):
                            for v in range(VEC):
                                b_frag[g * VEC + v] = Bs[cur, kk, g * COL_STEP + tx * VEC + v]
                        for i in range(TM):
                            for j in range(TN):
                                acc[i, j] += a_frag[i] * b_frag[j]
            if ph < phases:  # 3. land tile ph in the other buffer
                nxt = ph % TWO
                for p in range(A_PASSES):
                    As[nxt, a_col, a_row + p * A_STEP] = a_next[p]
                for p in range(B_PASSES):
                    Bs[nxt, b_row + p * B_STEP, b_col] = b_next[p]
            cuda.syncthreads()  # RAW for tile ph, WAR for buffer ph % 2 (see the docstring)
        for i in range(TM):
            r = row0 + (i // VEC) * ROW_STEP + ty * VEC + i % VEC
            for j in range(TN):
                c = col0 + (j // VEC) * COL_STEP + tx * VEC + j % VEC
                if r < m and c < n:
                    C[r, c] = acc[i, j]

    return matmul_double_buffered


# ------------------------------------------------------------------------ the steps of k written out


def _device_jit():
    """``cuda.jit(device=True)``, forced inline on a GPU (the simulator's ``jit`` has no ``forceinline``)."""
    if backend.is_simulator():
        return cuda.jit(device=True)
    return cuda.jit(device=True, forceinline=True)


@functools.lru_cache(maxsize=None)
def k_step(tiling: RegisterTiling):
    """Device function: one step ``kk`` of k out of shared buffer ``cur``: the fragments in, ``tm x tn`` FMAs.

    The body of the k-loop of :func:`double_buffered_kernel`, as a function of its own.
    """
    _, _, _, TM, TN, GM, GN, ROW_STEP, COL_STEP, *_ = _unsigned_constants(tiling)
    tm, tn = tiling.tm, tiling.tn

    @_device_jit()
    def step(As, Bs, cur, kk, tx, ty, acc):
        a_frag = cuda.local.array(tm, float32)  # this thread's tm values of A for step kk
        b_frag = cuda.local.array(tn, float32)  # and its tn values of B
        for g in range(GM):  # 4 adjacent floats per group: one 128-bit shared load on a GPU
            for v in range(VEC):
                a_frag[g * VEC + v] = As[cur, kk, g * ROW_STEP + ty * VEC + v]
        for g in range(GN):
            for v in range(VEC):
                b_frag[g * VEC + v] = Bs[cur, kk, g * COL_STEP + tx * VEC + v]
        for i in range(TM):  # the outer product: tm * tn fused multiply-adds
            for j in range(TN):
                acc[i, j] += a_frag[i] * b_frag[j]

    return step


@functools.lru_cache(maxsize=None)
def k_steps(tiling: RegisterTiling, count: int):
    """Device function: ``count`` consecutive steps of k from ``kk``, written out.

    Numba has no ``#pragma unroll``, and the compiler declines to unroll a loop as long as ``bk`` steps of
    64 FMAs. So the steps are *calls*: ``count`` steps are the first half and then the second half (each
    again two halves, down to one :func:`k_step`), all inlined, every offset a constant.
    """
    if count == 1:
        return k_step(tiling)
    first, second = k_steps(tiling, count // 2), k_steps(tiling, count - count // 2)
    HALF = uint64(count // 2)

    @_device_jit()
    def steps(As, Bs, cur, kk, tx, ty, acc):
        first(As, Bs, cur, kk, tx, ty, acc)
        second(As, Bs, cur, kk + HALF, tx, ty, acc)

    return steps


@functools.lru_cache(maxsize=None)
def tile_fetch(tiling: RegisterTiling, guarded: bool = True):
    """Device function: this thread's elements of the tiles of A and B at ``k0`` into registers (zeros outside).

    Step 1 of a phase of :func:`double_buffered_kernel`; ``guarded=False`` drops the bounds checks (whole tiles).
    """
    _, _, _, _, _, _, _, _, _, _, A_PASSES, B_PASSES, A_STEP, B_STEP = _unsigned_constants(tiling)
    GUARDED = guarded

    @_device_jit()
    def fetch(A, B, a_next, b_next, m, n, k, k0, row0, col0, a_row, a_col, b_row, b_col):
        for p in range(A_PASSES):
            r = a_row + p * A_STEP
            a = float32(0)
            if not GUARDED or (row0 + r < m and k0 + a_col < k):
                a = A[row0 + r, k0 + a_col]
            a_next[p] = a
        for p in range(B_PASSES):
            r = b_row + p * B_STEP
            b = float32(0)
            if not GUARDED or (k0 + r < k and col0 + b_col < n):
                b = B[k0 + r, col0 + b_col]
            b_next[p] = b

    return fetch


@functools.lru_cache(maxsize=None)
def tile_land(tiling: RegisterTiling):
    """Device function: the fetched elements into shared buffer ``buf`` (A transposed): step 3 of a phase."""
    *_, A_PASSES, B_PASSES, A_STEP, B_STEP = _unsigned_constants(tiling)

    @_device_jit()
    def land(As, Bs, buf, a_next, b_next, a_row, a_col, b_row, b_col):
        for p in range(A_PASSES):
            As[buf, a_col, a_row + p * A_STEP] = a_next[p]
        for p in range(B_PASSES):
            Bs[buf, b_row + p * B_STEP, b_col] = b_next[p]

    return land


@functools.lru_cache(maxsize=None)
def unrolled_kernel(tiling: RegisterTiling = UNROLLED, guarded: bool = True):
    """:func:`double_buffered_kernel` with the ``bk`` steps of k of each tile written out: no loop inside a tile.

    The same phases, buffers, barrier and result. What changes is what the compiler makes of step 2: in
    :func:`double_buffered_kernel` the steps of a tile are a loop (pairs of steps, 4 trips at ``bk = 8``), each
    trip paying a counter, a compare, a branch and address arithmetic; here they are ``bk`` inlined calls of
    :func:`k_step` (:func:`k_steps`) whose shared-memory offsets are constants. The default shape
    (:data:`UNROLLED`) also takes 16 steps of k per tile instead of 8, so that a tile's fixed work (the barrier,
    the global loads and shared stores of steps 1 and 3, their address arithmetic) is spread over twice the
    FMAs, and lets the compiler use up to 255 registers (one block of 256 threads per SM, as cuBLAS runs).
    Arguments as for :func:`register_tiled_kernel`.
    """
    BM, BN, BK, TM, TN, _, _, ROW_STEP, COL_STEP, TX, _, _, _, _ = _unsigned_constants(tiling)
    ZERO, ONE = uint64(0), uint64(1)
    bk, bn, a_stride, tm, tn = tiling.bk, tiling.bn, tiling.bm + A_PAD, tiling.tm, tiling.tn
    a_passes, b_passes = tiling.a_passes, tiling.b_passes
    align = _shared_alignment()
    fetch, land, tile_steps = tile_fetch(tiling, guarded), tile_land(tiling), k_steps(tiling, bk)

    @_jit_for(tiling)
    def matmul_unrolled(A, B, C):
        As = cuda.shared.array((2, bk, a_stride), float32, alignment=align)  # two transposed A tiles
        Bs = cuda.shared.array((2, bk, bn), float32, alignment=align)  # two B tiles
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
            if ph > ZERO:  # 2. multiply tile ph - 1 while they travel: bk steps written out, no loop
                tile_steps(As, Bs, (ph - ONE) & ONE, ZERO, tx, ty, acc)
            if ph < phases:  # 3. land tile ph in the other buffer
                land(As, Bs, ph & ONE, a_next, b_next, a_row, a_col, b_row, b_col)
            cuda.syncthreads()  # RAW for tile ph, WAR for buffer ph % 2 (as in double_buffered_kernel)
        for i in range(TM):
            r = row0 + (i // VEC) * ROW_STEP + ty * VEC + i % VEC
            for j in range(TN):
                c = col0 + (j // VEC) * COL_STEP + tx * VEC + j % VEC
                if r < m and c < n:
                    C[r, c] = acc[i, j]

    return matmul_unrolled


# ------------------------------------------------------------------------------------------------ host side


@dataclass(frozen=True)
class Plan:
    """Which compiled kernel runs a variant for given sizes, and its launch geometry (x along columns of C)."""

    variant: str
    kernel: Any
    grid: tuple[int, int]
    block: tuple[int, int]
    config: str
    guarded: bool = True

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return self.block[0] * self.block[1]

    def launch(self, A, B, C) -> None:
        """Run the kernel on device (or, in the simulator, host) arrays of the sizes it was planned for."""
        self.kernel[self.grid, self.block](A, B, C)


def whole_tiles(tiling: RegisterTiling, m: int, k: int, n: int) -> bool:
    """True when ``m``, ``k`` and ``n`` are whole numbers of tiles, so the loads need no bounds checks."""
    return m > 0 and k > 0 and n > 0 and m % tiling.bm == 0 and n % tiling.bn == 0 and k % tiling.bk == 0


def plan(variant: str, m: int, k: int, n: int, *, tile: int = DEFAULT_TILE,
         tiling: RegisterTiling | None = None) -> Plan:
    """Choose the kernel and launch geometry of ``variant`` for an ``m x k`` by ``k x n`` product.

    Args:
        variant: one of :data:`VARIANTS`.
        tile: tile edge of the ``"tiled"`` variant.
        tiling: block and thread tiles of the register-tiled variants (defaults: :data:`COARSENED` for
            ``"coarsened"``, :data:`REGISTER` for ``"register"`` and ``"double_buffered"``, :data:`UNROLLED`
            for ``"unrolled"``).

    The register-tiled variants use the kernel without bounds checks when the sizes are whole tiles
    (:func:`whole_tiles`) and the guarded one otherwise.

    Raises:
        ValueError: an unknown variant.
        LaunchConfigError: a tile the hardware cannot run.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: choose one of {', '.join(VARIANTS)}")
    if variant == "naive":
        bx, by = NAIVE_BLOCK
        return Plan(variant, matmul_naive, (blocks_for(n, bx), blocks_for(m, by)), NAIVE_BLOCK, f"{bx}x{by} threads")
    if variant == "tiled":
        reason = check_launch(tile * tile, 2 * 4 * tile * tile) if tile >= 1 else "the tile must be at least 1"
        if reason:
            raise LaunchConfigError(f"tile {tile}: {reason}; choose a tile between 1 and 32 (e.g. 8, 16 or 32)")
        return Plan(variant, tiled_kernel(tile), (blocks_for(n, tile), blocks_for(m, tile)), (tile, tile),
                    f"{tile}x{tile} tile")
    t = tiling or {"coarsened": COARSENED, "unrolled": UNROLLED}.get(variant, REGISTER)
    guarded = not whole_tiles(t, m, k, n)
    factory = {"double_buffered": double_buffered_kernel, "unrolled": unrolled_kernel}.get(variant,
                                                                                          register_tiled_kernel)
    return Plan(variant, factory(t, guarded), t.grid(m, n), t.block, t.label(), guarded)


def matmul(a, b, *, variant: str = "register", tile: int = DEFAULT_TILE, tiling: RegisterTiling | None = None,
           out=None):
    """``a @ b`` with one of this chapter's kernels.

    Args:
        a: ``m x k`` float32, C-contiguous (NumPy, CuPy or a Numba device array).
        b: ``k x n`` float32, C-contiguous.
        variant: ``"naive"``, ``"tiled"``, ``"coarsened"``, ``"register"``, ``"double_buffered"`` or
            ``"unrolled"``.
        tile: tile edge of ``"tiled"``; tiling: shapes of the register-tiled variants (see :func:`plan`).
        out: optional ``m x n`` float32 array to write into (on the device for device inputs).

    Returns:
        A NumPy array when ``a`` and ``b`` are NumPy arrays, otherwise a device array (``out`` if given).

    Raises:
        ArrayArgumentError: wrong type, dimensions, dtype (the kernels are float32: for float64 use
            ``xp.matmul``, which is cuBLAS on a GPU), memory layout, or inner dimensions that differ.
        ValueError, LaunchConfigError: an unknown variant or an impossible tile.
    """
    for name, x in (("a", a), ("b", b)):
        validate.array(x, name, ndim=2, contiguous=False)  # the number of dimensions first, then the rest
        validate.array(x, name, dtype=np.float32)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ArrayArgumentError(
            f"inner dimensions differ: a is {m} x {k} and b is {k2} x {n}; a @ b needs as many columns in a as "
            f"rows in b (did you mean b.T, or a.T?)")
    if out is not None:
        validate.array(out, "out", dtype=np.float32, ndim=2, shape=(m, n))
    p = plan(variant, m, k, n, tile=tile, tiling=tiling)
    on_host = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    if isinstance(out, np.ndarray) or out is None:
        c_d = cuda.device_array((m, n), dtype=np.float32)
    else:
        c_d = out
    if m == 0 or n == 0 or k == 0:  # nothing to launch: an empty matrix, or empty sums (zeros)
        c_d = cuda.to_device(np.zeros((m, n), dtype=np.float32)) if c_d is not out else c_d
        if c_d is out and out.size:
            out[...] = 0
    else:
        a_d = cuda.to_device(a) if isinstance(a, np.ndarray) else a
        b_d = cuda.to_device(b) if isinstance(b, np.ndarray) else b
        p.launch(a_d, b_d, c_d)
    if isinstance(out, np.ndarray):
        out[...] = to_host(c_d)
        return out
    return to_host(c_d) if on_host else c_d


def relative_error(c, a, b) -> float:
    """``||c - a @ b|| / ||a @ b||`` (Frobenius norms), the product taken in float64 on the host."""
    a64, b64 = to_host(a).astype(np.float64), to_host(b).astype(np.float64)
    ref = a64 @ b64
    c64 = to_host(c).astype(np.float64)
    if c64.shape != ref.shape:
        raise ArrayArgumentError(f"the result has shape {c64.shape}, expected {ref.shape}")
    norm = np.linalg.norm(ref)
    diff = np.linalg.norm(c64 - ref)
    return float(diff / norm) if norm else float(diff)


def matches_reference(c, a, b, tolerance: float = RELATIVE_TOLERANCE) -> bool:
    """True when ``c`` is ``a @ b`` within ``tolerance`` (see :data:`RELATIVE_TOLERANCE`), NaN-free."""
    err = relative_error(c, a, b)
    return bool(np.isfinite(err) and err <= tolerance)


# ------------------------------------------------------------------------- the CPU side: three loop orders
#: The CPU loop orders, by name.
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
