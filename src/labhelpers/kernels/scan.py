"""Chapter "Scan and the patterns built on it": prefix sums, and what they make parallel.

A scan turns ``x`` into its running totals: the **inclusive** scan ``y[i] = x[0] + ... + x[i]``, the
**exclusive** scan ``y[i] = x[0] + ... + x[i-1]`` (``y[0]`` = the identity), for any associative
operator. This module holds every kernel the chapter shows, their host wrappers and the NumPy
specifications they are tested against.

=================================  ===========================================================
 part                              kernels and wrappers
=================================  ===========================================================
 definitions                       :func:`sequential_scan` (the loop), :func:`scan_reference` (NumPy)
 one block                         :data:`hillis_steele_scan` (double-buffered), :data:`blelloch_scan`
                                   (work-efficient, bank-conflict padding), :func:`block_scan_shuffle`
                                   (warp shuffles, GPU only)
 across blocks                     :class:`Scan` with ``method`` = scan-then-propagate, reduce-then-scan
                                   (three kernels), chained (single pass), decoupled look-back
                                   (single pass, the fast one: :func:`tile_kernels`)
 patterns                          :func:`compact`, :func:`radix_split`, :class:`RadixSorter`,
                                   :func:`histogram`, :func:`spmv` (scalar, warp per row, segmented
                                   scan, merge-based)
=================================  ===========================================================

Element types: the teaching kernels are written once with a type name ``T`` and compiled for int32
and float32 (:class:`TypedKernel`); the tiled kernels are built by :func:`tile_kernels` for one
element type, block size and number of items per thread. Under Numba's CUDA simulator there are no
warp intrinsics: the kernels that need them raise :class:`~labhelpers.errors.GPUOnlyError`, and the
tiled kernels use a shared-memory block scan there instead of shuffles.
"""

from __future__ import annotations

import types as pytypes
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, int32, uint32

from .. import backend, validate
from ..launch import ConfiguredKernel
from ..arrays import as_device, to_host
from ..errors import ArgumentError, ArrayArgumentError, GPUOnlyError, LaunchConfigError

#: Largest block (threads).
MAX_THREADS = 1024
#: Threads of a warp.
WARP = 32
#: Every lane of a warp takes part in a shuffle.
FULL_MASK = 0xFFFFFFFF
#: log2 of the number of shared-memory banks (32 banks of 4 bytes).
LOG_BANKS = 5
#: Words of Blelloch's padded shared array: 2 elements per thread, one spare word after every 32.
BLELLOCH_SHARED = 2 * MAX_THREADS + ((2 * MAX_THREADS) >> LOG_BANKS)
#: Element types of the scan kernels.
DTYPES = (np.dtype(np.int32), np.dtype(np.float32))
_NUMBA_TYPES = {np.dtype(np.int32): int32, np.dtype(np.float32): float32, np.dtype(np.uint32): uint32}



class IntegerOverflowWarning(RuntimeWarning):
    """An integer scan whose prefix sums leave the element type's range: the GPU's additions wrap around."""


def warn_if_wraps(x, per_block: int | None = None) -> bool:
    """Warn (:class:`IntegerOverflowWarning`) when an add-scan of the integer array ``x`` leaves its dtype's range.

    The kernels add in the element type, so an int32 prefix sum above 2**31 - 1 wraps around to a negative
    number, while ``np.cumsum`` (the usual comparison) widens int32 to int64 and is right. ``per_block``:
    the scan restarts every ``per_block`` elements (:func:`block_scan`). Only host (NumPy) arrays are
    looked at; a bound (``n * max |x|``) skips the exact check when no sum can overflow. Returns True if
    it warned.
    """
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "iu" or x.size == 0:
        return False
    info = np.iinfo(x.dtype)
    run = x.size if per_block is None else min(int(per_block), x.size)
    biggest = int(np.abs(x.astype(np.int64)).max())
    if run * biggest <= info.max:
        return False
    wide = x.astype(np.int64)
    if per_block is not None:
        blocks = -(-x.size // per_block)
        wide = np.concatenate([wide, np.zeros(blocks * per_block - x.size, np.int64)]).reshape(blocks, per_block)
    sums = np.cumsum(wide, axis=-1).ravel()[:x.size]
    bad = np.flatnonzero((sums > info.max) | (sums < info.min))
    if bad.size == 0:
        return False
    i = int(bad[0])
    warnings.warn(
        f"this {x.dtype} scan wraps around: the prefix sum at index {i} is {int(sums[i]):,}, outside {x.dtype}'s range "
        f"[{info.min:,}, {info.max:,}], and the kernels add in {x.dtype} (np.cumsum widens to int64, so it will "
        "disagree). Scan smaller values, or float32 data (x.astype(np.float32), exact up to 2**24).",
        IntegerOverflowWarning, stacklevel=3)
    return True


#: The slide's example (Rossbach, *CUDA* lecture slides, UT Austin CS378): input, and the exclusive
#: scan as printed on the slide. Its sixth value is wrong: 3+1+7+0+4 = 15, not 14.
SLIDE_INPUT = (3, 1, 7, 0, 4, 1, 6, 3)
SLIDE_OUTPUT_AS_PRINTED = (0, 3, 4, 11, 11, 14, 16, 22)


class UnknownMethodError(ArgumentError):
    """The scan method, operator or SpMV kernel name is not one this module knows."""


# =============================================================================================
# Definitions: the operator, the sequential loop, the NumPy specification
# =============================================================================================

#: Associative operators: name -> (NumPy ufunc, identity for float64 / int64 work).
OPERATORS: dict[str, tuple[np.ufunc, float]] = {
    "add": (np.add, 0),
    "mul": (np.multiply, 1),
    "max": (np.maximum, -np.inf),
    "min": (np.minimum, np.inf),
}


def operator(op: str) -> tuple[np.ufunc, float]:
    """``(ufunc, identity)`` of an operator name in :data:`OPERATORS`."""
    try:
        return OPERATORS[op]
    except (KeyError, TypeError):
        raise UnknownMethodError(f"unknown operator {op!r}: choose one of {', '.join(OPERATORS)} "
                                 "(any associative operation works the same way)") from None


def identity_of(op: str, dtype) -> Any:
    """The identity of ``op`` in ``dtype`` (the exclusive scan's first output): 0 for add, the lowest value for max..."""
    _, ident = operator(op)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and not np.isfinite(ident):
        info = np.iinfo(dtype)
        ident = info.min if ident < 0 else info.max
    return dtype.type(ident)


def sequential_scan(x, op: str = "add", inclusive: bool = False) -> np.ndarray:
    """The sequential scan: one loop, each step waiting for the previous one (O(n) operations, depth n).

    ``out[i] = out[i-1] (op) x[i-1]`` (exclusive) or ``out[i] = out[i-1] (op) x[i]`` (inclusive).
    Written as a plain Python loop on purpose: it is the definition, not a fast implementation.
    """
    x = np.asarray(x)
    f, _ = operator(op)
    out = np.empty_like(x)
    if x.size == 0:
        return out
    acc = identity_of(op, x.dtype)
    for i in range(x.size):
        if inclusive:
            acc = f(acc, x[i])
            out[i] = acc
        else:
            out[i] = acc
            acc = f(acc, x[i])
    return out


def scan_reference(x, op: str = "add", inclusive: bool = True, dtype=None) -> np.ndarray:
    """NumPy's scan (``ufunc.accumulate``), the specification every kernel is checked against.

    Integers are scanned in their own type (overflow wraps, as on the GPU); floats in float64
    (pass ``dtype`` to choose), so the reference is more accurate than any float32 kernel.
    """
    x = np.asarray(x)
    f, _ = operator(op)
    if dtype is None:
        dtype = np.float64 if x.dtype.kind == "f" else x.dtype
    acc = f.accumulate(x.astype(dtype, copy=False)) if x.size else np.zeros(0, dtype)
    if inclusive:
        return acc
    out = np.empty_like(acc)
    if x.size:
        out[0] = identity_of(op, dtype)
        out[1:] = acc[:-1]
    return out


def scan_error_bound(x) -> np.ndarray:
    """Per element, a bound on ``|float32 scan - exact|``: ``(i + 1) * u * sum(|x[:i+1]|)``, ``u = 2**-24``.

    Whatever order a kernel adds the first ``i + 1`` values in, each passes through at most ``i``
    rounded additions (Higham, 2002, section 4.2), so this holds for every scan of this module.
    """
    a = np.abs(np.asarray(x, dtype=np.float64))
    return (np.arange(1, a.size + 1) * 2.0**-24) * np.cumsum(a)


def integer_valued(n: int, rng: np.random.Generator | None = None, dtype=np.int32, low: int = -8,
                   high: int = 8) -> np.ndarray:
    """``n`` small integers (as ``dtype``): every prefix sum is exact in int32 and in float32 (below 2**24)."""
    n = validate.integer(n, "n", minimum=0)
    rng = rng or np.random.default_rng(0)
    if n * max(abs(low), abs(high)) >= 2**24:
        raise ArgumentError(f"n={n} values up to {max(abs(low), abs(high))} could leave float32's exact integer "
                            "range: use a smaller n or smaller values")
    return rng.integers(low, high + 1, size=n).astype(dtype)


def scan_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes a scan must move: read every element once, write every result once (``2 * itemsize * n``)."""
    return 2 * itemsize * int(n)


# =============================================================================================
# Kernels written once, compiled per element type
# =============================================================================================


class TypedKernel:
    """A kernel written once with the type name ``T``, compiled for each element type on demand.

    ``k.for_dtype(np.float32)`` is the compiled kernel (a Numba dispatcher) whose ``T`` is float32.
    ``lh.show_source(k)`` shows the one source. Other module-level names can be replaced per
    variant (``TypedKernel(func, pad=no_pad)``), which is how the unpadded Blelloch kernel is made.
    """

    def __init__(self, func: Callable, device: bool = False, **overrides: Any) -> None:
        self.py_func = func
        self.device = device
        self.overrides = overrides
        self._compiled: dict[np.dtype, Any] = {}
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def for_dtype(self, dtype) -> Any:
        """The kernel compiled for elements of ``dtype`` (int32 or float32)."""
        dtype = np.dtype(dtype)
        if dtype not in self._compiled:
            if dtype not in _NUMBA_TYPES:
                raise ArrayArgumentError(f"{self.__name__} works on int32, uint32 or float32 elements, got {dtype}: "
                                         "convert with .astype(np.int32) or .astype(np.float32)")
            names = dict(func_globals_with(self.py_func.__globals__, self.overrides))
            names["T"] = _NUMBA_TYPES[dtype]
            for key, value in list(names.items()):  # typed device functions used by this kernel
                if isinstance(value, TypedKernel) and value.device and value is not self:
                    names[key] = value.for_dtype(dtype)
            clone = pytypes.FunctionType(self.py_func.__code__, names, self.py_func.__name__,
                                         self.py_func.__defaults__, self.py_func.__closure__)
            clone.__doc__ = self.py_func.__doc__
            clone.__module__ = self.py_func.__module__
            clone.__qualname__ = self.py_func.__qualname__
            self._compiled[dtype] = cuda.jit(device=True)(clone) if self.device else cuda.jit(clone)
        return self._compiled[dtype]

    def __repr__(self) -> str:
        return f"<TypedKernel {self.__name__} (T = int32, uint32 or float32)>"


def func_globals_with(base: dict, overrides: dict) -> dict:
    """A copy of a module's globals with some names replaced (the namespace a kernel variant compiles in)."""
    names = dict(base)
    names.update(overrides)
    return names


def typed_kernel(func: Callable) -> TypedKernel:
    """Decorator: ``func`` is a kernel whose element type is the name ``T``; compiled per dtype on demand."""
    return TypedKernel(func)


def typed_device(func: Callable) -> TypedKernel:
    """Decorator: a device function written with ``T``, compiled per dtype (for the kernels that call it)."""
    return TypedKernel(func, device=True)


T = float32  # the name kernels use for their element type (each compiled copy gets its own)


# =============================================================================================
# One block: Hillis-Steele, Blelloch, warp shuffles
# =============================================================================================


@cuda.jit(device=True)
def pad(i):
    """Where element ``i`` lives in a padded shared array: one spare word after every 32.

    Without padding, the threads of a warp that touch words ``k, k + 32, k + 64, ...`` all hit the
    same bank (word ``w`` is in bank ``w % 32``) and wait for each other; with it, word ``i`` moves by
    ``i // 32``, so strides that are multiples of 32 land in different banks.
    """
    return i + (i >> LOG_BANKS)


@cuda.jit(device=True)
def no_pad(i):
    """No padding: element ``i`` is word ``i`` (for comparing bank conflicts with :func:`pad`)."""
    return i


@typed_kernel
def hillis_steele_scan(x, out, block_sums, inclusive):
    """Scan each block's ``blockDim.x`` elements, Hillis-Steele style: log2(n) steps, n log2(n) additions.

    At step ``offset = 1, 2, 4, ...`` (while ``offset < blockDim.x``) every element adds the one
    ``offset`` to its left. A step reads the previous step's values while others write new ones, so
    the values live in two buffers used in turn (double buffering). ``inclusive`` is 1 or 0; with
    ``block_sums`` non-empty the last thread stores the block's total in ``block_sums[blockIdx.x]``.
    """
    buf = cuda.shared.array((2, MAX_THREADS), T)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    buf[0, tid] = x[i] if i < x.size else T(0)  # guard the load (0 past the end), never the barrier
    cuda.syncthreads()  # RAW: every element is in buffer 0 before step 1 reads it
    src = 0
    offset = 1
    while offset < cuda.blockDim.x:
        if tid >= offset:
            buf[1 - src, tid] = buf[src, tid - offset] + buf[src, tid]
        else:
            buf[1 - src, tid] = buf[src, tid]
        cuda.syncthreads()  # RAW: this step is written before the next reads it; WAR: the buffer it overwrites is read
        src = 1 - src
        offset *= 2
    if i < x.size:
        if inclusive:
            out[i] = buf[src, tid]
        elif tid > 0:
            out[i] = buf[src, tid - 1]
        else:
            out[i] = T(0)
    if block_sums.size > 0 and tid == cuda.blockDim.x - 1:
        block_sums[cuda.blockIdx.x] = buf[src, tid]


@cuda.jit
def hillis_steele_seed_bounds(x, out, block_sums, inclusive):
    """PITFALL (do not use): :data:`hillis_steele_scan` with the loop bound of the slide, ``d < log2 n`` (int32).

    ``for d = 1 .. log2(n) - 1`` runs one step too few: the last step, which adds the first half of
    the block into the second half, never happens. (Written as ``2 * offset < blockDim.x``.)
    """
    buf = cuda.shared.array((2, MAX_THREADS), int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    buf[0, tid] = x[i] if i < x.size else 0
    cuda.syncthreads()  # RAW: every element is in buffer 0 before step 1 reads it
    src = 0
    offset = 1
    while 2 * offset < cuda.blockDim.x:  # WRONG: one step short
        if tid >= offset:
            buf[1 - src, tid] = buf[src, tid - offset] + buf[src, tid]
        else:
            buf[1 - src, tid] = buf[src, tid]
        cuda.syncthreads()  # RAW/WAR as in hillis_steele_scan
        src = 1 - src
        offset *= 2
    if i < x.size:
        out[i] = buf[src, tid]


@cuda.jit
def hillis_steele_single_buffer(x, out, block_sums, inclusive):
    """PITFALL (do not use): Hillis-Steele in ONE buffer (int32): a thread may read a neighbour already updated.

    ``s[tid] += s[tid - offset]`` reads a word that thread ``tid - offset`` writes in the same step.
    Whether the read comes before or after that write depends on scheduling: a data race (a RAW and a
    WAR hazard inside one step), which a barrier at the end of the step cannot fix.
    """
    s = cuda.shared.array(MAX_THREADS, int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    s[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()  # RAW: every element is in shared memory before step 1
    offset = 1
    while offset < cuda.blockDim.x:
        if tid >= offset:
            s[tid] += s[tid - offset]  # WRONG: s[tid - offset] may already hold this step's value
        cuda.syncthreads()  # too late: the race is inside the step
        offset *= 2
    if i < x.size:
        out[i] = s[tid]


@cuda.jit(device=True)
def blelloch_sweeps(s, tid, n, zero):
    """Exclusive scan, in place, of the ``n`` values (a power of two, ``n = 2 * blockDim.x``) in ``s``.

    Every thread of the block must call it. Returns the total of the ``n`` values. Indices go
    through :func:`pad` (bank-conflict padding). Up-sweep: a reduction tree, ``log2 n`` levels
    (``d = n/2, n/4, ..., 1`` threads add); the root then holds the total. Down-sweep: the root is
    replaced by the identity and pushed back down: each node passes its value to its left child and
    its value plus the left child's old value to its right child. ``2(n - 1)`` additions in all.
    """
    offset = 1
    d = n >> 1
    while d > 0:  # up-sweep: log2(n) levels, the last one (d = 1) writes the total into the root
        cuda.syncthreads()  # RAW: the previous level (or the loads) is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            s[pad(b)] += s[pad(a)]
        offset <<= 1
        d >>= 1
    cuda.syncthreads()  # RAW: the root holds the total before anyone reads it
    root = pad(n - 1)
    total = s[root]
    cuda.syncthreads()  # WAR: every thread has read the total before thread 0 clears the root
    if tid == 0:
        s[root] = zero
    d = 1
    while d < n:  # down-sweep: log2(n) levels
        offset >>= 1
        cuda.syncthreads()  # RAW: the previous level (or the cleared root) is written before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            t = s[pad(a)]
            s[pad(a)] = s[pad(b)]
            s[pad(b)] += t
        d <<= 1
    cuda.syncthreads()  # RAW: the scan is complete before anyone reads it
    return total


@cuda.jit(device=True)
def blelloch_sweeps_unpadded(s, tid, n, zero):
    """:func:`blelloch_sweeps` without padding: the same tree, with bank conflicts (for comparison)."""
    offset = 1
    d = n >> 1
    while d > 0:
        cuda.syncthreads()  # RAW: the previous level (or the loads) is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            s[b] += s[a]
        offset <<= 1
        d >>= 1
    cuda.syncthreads()  # RAW: the root holds the total before anyone reads it
    total = s[n - 1]
    cuda.syncthreads()  # WAR: every thread has read the total before thread 0 clears the root
    if tid == 0:
        s[n - 1] = zero
    d = 1
    while d < n:
        offset >>= 1
        cuda.syncthreads()  # RAW: the previous level (or the cleared root) is written before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            t = s[a]
            s[a] = s[b]
            s[b] += t
        d <<= 1
    cuda.syncthreads()  # RAW: the scan is complete before anyone reads it
    return total


@typed_kernel
def blelloch_scan(x, out, block_sums, block_prefix, inclusive):
    """Scan each block's ``2 * blockDim.x`` elements with Blelloch's work-efficient tree (O(n) additions).

    ``blockDim.x`` must be a power of two. Thread ``tid`` loads elements ``tid`` and
    ``tid + blockDim.x`` of its block (coalesced), :func:`blelloch_sweeps` scans them in shared
    memory, and the thread writes its two results back (``inclusive`` = 1 adds its own element).
    With ``block_sums`` non-empty, the block's total goes to ``block_sums[blockIdx.x]`` (the first
    kernel of scan-then-propagate); with ``block_prefix`` non-empty, blocks after the first add
    ``block_prefix[blockIdx.x - 1]``, the inclusive scan of the earlier blocks' totals (the last
    kernel of reduce-then-scan).
    """
    s = cuda.shared.array(BLELLOCH_SHARED, T)
    tid = cuda.threadIdx.x
    n = 2 * cuda.blockDim.x
    base = cuda.blockIdx.x * n
    ia = base + tid
    ib = base + tid + cuda.blockDim.x
    va = x[ia] if ia < x.size else T(0)
    vb = x[ib] if ib < x.size else T(0)
    s[pad(tid)] = va
    s[pad(tid + cuda.blockDim.x)] = vb
    total = blelloch_sweeps(s, tid, n, T(0))  # (its first barrier orders these stores before the tree)
    offset = T(0)
    if block_prefix.size > 0 and cuda.blockIdx.x > 0:
        offset = block_prefix[cuda.blockIdx.x - 1]
    ra = s[pad(tid)] + offset
    rb = s[pad(tid + cuda.blockDim.x)] + offset
    if inclusive:
        ra += va
        rb += vb
    if ia < x.size:
        out[ia] = ra
    if ib < x.size:
        out[ib] = rb
    if block_sums.size > 0 and tid == 0:
        block_sums[cuda.blockIdx.x] = total


blelloch_scan_unpadded = TypedKernel(blelloch_scan.py_func, pad=no_pad, blelloch_sweeps=blelloch_sweeps_unpadded)
blelloch_scan_unpadded.__name__ = "blelloch_scan_unpadded"
blelloch_scan_unpadded.__doc__ = ":data:`blelloch_scan` compiled with :func:`no_pad`: the bank conflicts left in."


@cuda.jit(device=True)
def warp_inclusive_scan(v, lane):
    """Inclusive scan of ``v`` over the 32 lanes of a warp, in registers: five shuffles (GPU only).

    ``shfl_up_sync(mask, v, k)`` hands each lane the ``v`` of the lane ``k`` below it; lanes below
    ``k`` have nobody there and keep their value: Hillis-Steele, with the warp as the block and
    registers as the buffer (the hardware exchanges all 32 values at once, so no second buffer).
    """
    for k in (1, 2, 4, 8, 16):
        u = cuda.shfl_up_sync(FULL_MASK, v, k)
        if lane >= k:
            v += u
    return v


@typed_kernel
def block_scan_shuffle(x, out, block_sums, inclusive):
    """Scan each block's ``blockDim.x`` elements (a multiple of 32) with warp shuffles (GPU only).

    Every warp scans its 32 values in registers (:func:`warp_inclusive_scan`); lane 31 of each warp
    parks the warp's total in shared memory; warp 0 scans those totals (at most 32); every thread
    adds the totals of the warps before its own. Two barriers in all, against 2 log2(n) for the
    shared-memory trees.
    """
    warp_totals = cuda.shared.array(WARP, T)
    tid = cuda.threadIdx.x
    lane = tid % WARP
    warp = tid // WARP
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    v = x[i] if i < x.size else T(0)
    scanned = warp_inclusive_scan(v, lane)
    if lane == WARP - 1:
        warp_totals[warp] = scanned
    cuda.syncthreads()  # RAW: every warp's total is in shared memory before warp 0 scans them
    if warp == 0:
        t = warp_totals[lane] if lane < cuda.blockDim.x // WARP else T(0)
        warp_totals[lane] = warp_inclusive_scan(t, lane)
    cuda.syncthreads()  # RAW: the scanned totals are written before the other warps read them
    if warp > 0:
        scanned += warp_totals[warp - 1]
    if i < x.size:
        out[i] = scanned if inclusive else scanned - v
    if block_sums.size > 0 and tid == cuda.blockDim.x - 1:
        block_sums[cuda.blockIdx.x] = scanned


# =============================================================================================
# Across blocks, the teaching kernels: propagate, reduce, a chained single pass
# =============================================================================================


@typed_kernel
def add_block_offsets(out, block_prefix, per_block):
    """Scan-then-propagate, last kernel: every element of block ``b >= 1`` adds ``block_prefix[b - 1]``.

    ``block_prefix`` is the inclusive scan of the blocks' totals, so ``block_prefix[b - 1]`` is the
    sum of every element before block ``b``. ``per_block`` is how many elements the scan kernel gave
    each block (``blockDim.x`` for Hillis-Steele, ``2 * blockDim.x`` for Blelloch).
    """
    i = cuda.grid(1)
    if i < out.size:
        b = i // per_block
        if b > 0:
            out[i] += block_prefix[b - 1]


@typed_kernel
def block_reduce(x, sums):
    """Reduce-then-scan, first kernel: ``sums[b]`` = the total of block ``b``'s ``2 * blockDim.x`` elements.

    The tree of the reduction chapter (sequential addressing, first add during the load); the
    block size must be a power of two.
    """
    s = cuda.shared.array(MAX_THREADS, T)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * 2 * cuda.blockDim.x + tid
    v = x[i] if i < x.size else T(0)
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before the tree reads it
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level is written before the next level reads it
        stride //= 2
    if tid == 0:
        sums[cuda.blockIdx.x] = s[0]


@typed_kernel
def chained_scan(x, out, flags, prefixes, counter, epoch, inclusive):
    """A single pass: each block scans its tile, then waits for the tile before it (a chained scan).

    * **Tile numbers in start order.** Thread 0 takes the next number from ``counter`` with an
      atomic: a block waits only for tiles whose blocks started before it, so it can never wait for
      a block that cannot start (which a wait on ``blockIdx.x - 1`` could: blocks start in any order).
    * **The hand-over.** Block ``t`` scans its ``2 * blockDim.x`` elements (:func:`blelloch_sweeps`);
      thread 0 waits until ``flags[t - 1]`` says tile ``t - 1`` has published the sum of everything
      up to its end in ``prefixes[t - 1]``, adds its own total, publishes ``prefixes[t]``, then sets
      ``flags[t]``.
    * **The fences.** Writing the prefix and then the flag is not enough: another SM may see the
      two writes in the other order. ``cuda.threadfence()`` between them makes the prefix visible
      everywhere before the flag (release); the reader fences between reading the flag and reading
      the prefix (acquire). Flags and prefixes are read with atomics (``atomic.add(a, i, 0)``),
      which go to the L2 cache: a plain load could return a stale copy from this SM's L1 cache
      (CUDA C++ would declare them ``volatile``, which Numba cannot).
    * ``epoch`` (1, 2, 3, ... one per call) makes ``2 * epoch + 1`` this call's "published" value, so
      the flags never need clearing; the block with the last number resets ``counter``.

    Every tile waits for the one before: the tiles finish one after the other. That is the weakness
    the decoupled look-back (:func:`tile_kernels`) removes.
    """
    s = cuda.shared.array(BLELLOCH_SHARED, T)
    number = cuda.shared.array(1, int32)
    carry = cuda.shared.array(1, T)
    tid = cuda.threadIdx.x
    if tid == 0:
        number[0] = cuda.atomic.add(counter, 0, 1)
        if number[0] == cuda.gridDim.x - 1:
            cuda.atomic.exch(counter, 0, 0)  # every block has its number: ready for the next call
    cuda.syncthreads()  # RAW: the tile number is in shared memory before anyone reads it
    tile = number[0]
    n = 2 * cuda.blockDim.x
    ia = tile * n + tid
    ib = ia + cuda.blockDim.x
    va = x[ia] if ia < x.size else T(0)
    vb = x[ib] if ib < x.size else T(0)
    s[pad(tid)] = va
    s[pad(tid + cuda.blockDim.x)] = vb
    total = blelloch_sweeps(s, tid, n, T(0))
    if tid == 0:
        published = 2 * epoch + 1
        before = T(0)
        if tile > 0:
            while cuda.atomic.add(flags, tile - 1, 0) < published:
                pass  # spin: tile - 1 has not published yet
            cuda.threadfence()  # acquire: read the prefix only after seeing its flag
            before = cuda.atomic.add(prefixes, tile - 1, T(0))
        prefixes[tile] = before + total
        cuda.threadfence()  # release: the prefix is visible everywhere before the flag
        cuda.atomic.exch(flags, tile, published)
        carry[0] = before
    cuda.syncthreads()  # RAW: the carry from earlier tiles is in shared memory before anyone adds it
    ra = s[pad(tid)] + carry[0]
    rb = s[pad(tid + cuda.blockDim.x)] + carry[0]
    if inclusive:
        ra += va
        rb += vb
    if ia < x.size:
        out[ia] = ra
    if ib < x.size:
        out[ib] = rb


# =============================================================================================
# Tiles: many items per thread, 16-byte loads, and the decoupled look-back
# =============================================================================================


def _vector_access4():
    """``(load4, store4)``: four consecutive 32-bit elements in one 16-byte access.

    ``load4(a, v)`` returns ``(a[4v], a[4v+1], a[4v+2], a[4v+3])``; ``store4(a, v, p, q, r, s)``
    writes them. ``a`` is a 1D C-contiguous int32, uint32 or float32 array whose data starts on a
    16-byte boundary (every device allocation does). On a GPU each is one ``ld.global.v4`` /
    ``st.global.v4`` instruction, the width of CUDA C++'s ``int4``/``float4``; Numba's own indexing
    would issue four 4-byte accesses, and a warp's load would move 128 bytes instead of 512. The
    index goes straight into the address (unsigned: no negative-index checks). Under the simulator
    they are plain indexing.
    """
    if backend.is_simulator():
        def load4(a, v):
            i = 4 * int(v)
            return a[i], a[i + 1], a[i + 2], a[i + 3]

        def store4(a, v, p, q, r, s):
            i = 4 * int(v)
            a[i] = p
            a[i + 1] = q
            a[i + 2] = r
            a[i + 3] = s

        return load4, store4

    from llvmlite import ir
    from numba import types
    from numba.cuda.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    ok = (types.int32, types.uint32, types.float32)

    def check(a, v, what):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype in ok):
            raise TypingError(f"{what} takes a 1D C-contiguous int32, uint32 or float32 array, got {a}")
        if not isinstance(v, types.Integer):
            raise TypingError(f"{what} takes an integer index, got {v}")

    def address(context, builder, sig, args):
        aryty = sig.args[0]
        data = context.make_array(aryty)(context, builder, args[0]).data
        vec = ir.VectorType(context.get_data_type(aryty.dtype), 4)
        index = context.cast(builder, args[1], sig.args[1], types.uint64)
        return builder.gep(builder.bitcast(data, vec.as_pointer()), [index], inbounds=True)

    @intrinsic
    def load4(typingctx, a, v):
        check(a, v, "load4")
        sig = types.UniTuple(a.dtype, 4)(a, v)

        def codegen(context, builder, sig, args):
            vec = builder.load(address(context, builder, sig, args), align=16)
            parts = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def store4(typingctx, a, v, p, q, r, s):
        check(a, v, "store4")
        sig = types.void(a, v, p, q, r, s)

        def codegen(context, builder, sig, args):
            dtype = sig.args[0].dtype
            vec = ir.Constant(ir.VectorType(context.get_data_type(dtype), 4), ir.Undefined)
            for k in range(4):
                value = context.cast(builder, args[2 + k], sig.args[2 + k], dtype)
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
            builder.store(vec, address(context, builder, sig, args), align=16)
            return context.get_dummy_value()

        return sig, codegen

    return load4, store4


load4, store4 = _vector_access4()

#: The tiled family's functions, in definition order: name -> ("device" | "kernel", Python function).
_TILE_FUNCTIONS: dict[str, tuple[str, Callable]] = {}


def tile_device(func: Callable) -> Callable:
    """Decorator: a device function of the tiled family (compiled per :class:`TileConfig` by :func:`tile_kernels`)."""
    _TILE_FUNCTIONS[func.__name__] = ("device", func)
    return func


def tile_kernel(func: Callable) -> Callable:
    """Decorator: a kernel of the tiled family (compiled per :class:`TileConfig` by :func:`tile_kernels`)."""
    _TILE_FUNCTIONS[func.__name__] = ("kernel", func)
    return func


# Names the tiled functions use; each configuration compiles them with its own values.
THREADS, ITEMS, TILE, PADDED_TILE, WINDOW, CONTROL, SHUFFLE, VECTOR = 256, 16, 4096, 4224, 32, 34, True, True
RADIX_BITS, RADIX, PADDED_COUNTS = 4, 16, 4488


@tile_device
def load_tile(x, base, n, s, items):
    """Read tile ``x[base : base + TILE]`` so that thread ``tid`` holds elements ``tid*ITEMS ... + ITEMS - 1``.

    Every thread must call it. Global memory is read in coalesced runs (a whole tile: each warp
    reads ``32 * ITEMS`` consecutive elements with 16-byte loads; the last, partial tile: guarded
    4-byte loads, zero past the end) into the padded shared array ``s``, and each thread then takes
    its ``ITEMS`` consecutive elements out of it: a transpose through shared memory. ``base`` and
    ``n`` are unsigned 64-bit.
    """
    tid = cuda.threadIdx.x
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            e = first + 4 * WARP * k
            a, b, c, d = load4(x, (base + np.uint64(e)) // np.uint64(4))
            s[pad(e)] = a
            s[pad(e + 1)] = b
            s[pad(e + 2)] = c
            s[pad(e + 3)] = d
    else:
        for k in range(ITEMS):
            e = tid + k * THREADS
            g = base + np.uint64(e)
            s[pad(e)] = x[g] if g < n else T(0)
    cuda.syncthreads()  # RAW: the whole tile is in shared memory before threads take their items
    for j in range(ITEMS):
        items[j] = s[pad(tid * ITEMS + j)]


@tile_device
def store_tile(out, base, n, s, items):
    """The reverse of :func:`load_tile`: each thread's ``ITEMS`` values go back to ``out[base : base + TILE]``."""
    tid = cuda.threadIdx.x
    cuda.syncthreads()  # WAR: every thread is done reading s before it is overwritten
    for j in range(ITEMS):
        s[pad(tid * ITEMS + j)] = items[j]
    cuda.syncthreads()  # RAW: the whole tile is in shared memory before the coalesced stores read it
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            e = first + 4 * WARP * k
            store4(out, (base + np.uint64(e)) // np.uint64(4), s[pad(e)], s[pad(e + 1)], s[pad(e + 2)],
                   s[pad(e + 3)])
    else:
        for k in range(ITEMS):
            e = tid + k * THREADS
            g = base + np.uint64(e)
            if g < n:
                out[g] = s[pad(e)]


@tile_device
def block_exclusive_scan(v, scratch, zero):
    """Exclusive scan of one value per thread over the block: returns ``(sum before me, block total)``.

    Every thread must call it. On a GPU (``SHUFFLE``) each warp scans in registers
    (:func:`warp_inclusive_scan`) and one barrier shares the warps' totals; in the simulator,
    Hillis-Steele in the shared array ``scratch`` (2 x THREADS). Ends with a barrier, so
    ``scratch`` can be reused at once.
    """
    tid = cuda.threadIdx.x
    if SHUFFLE:
        lane = tid % WARP
        warp = tid // WARP
        inclusive = warp_inclusive_scan(v, lane)
        exclusive = cuda.shfl_up_sync(FULL_MASK, inclusive, 1)
        if lane == 0:
            exclusive = zero
        if lane == WARP - 1:
            scratch[0, warp] = inclusive
        cuda.syncthreads()  # RAW: every warp's total is in shared memory before anyone adds them
        total = zero
        for w in range(THREADS // WARP):
            t = scratch[0, w]
            if w < warp:
                exclusive += t
            total += t
        cuda.syncthreads()  # WAR: every thread has read the totals before scratch is reused
        return exclusive, total
    scratch[0, tid] = v
    cuda.syncthreads()  # RAW: every value is in shared memory before step 1
    src = 0
    offset = 1
    while offset < THREADS:
        if tid >= offset:
            scratch[1 - src, tid] = scratch[src, tid - offset] + scratch[src, tid]
        else:
            scratch[1 - src, tid] = scratch[src, tid]
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    exclusive = scratch[src, tid - 1] if tid > 0 else zero
    total = scratch[src, THREADS - 1]
    cuda.syncthreads()  # WAR: every thread has read its result before scratch is reused
    return exclusive, total


@tile_device
def lookback(tile, aggregate, flags, aggregates, inclusives, epoch, ctl, vals, zero):
    """The decoupled look-back (Merrill & Garland, 2016): the sum of all tiles before ``tile``.

    Every thread must call it, with its tile's total ``aggregate``. Thread 0 first publishes the
    aggregate (flag A, "my own total is known"); tile 0 publishes its inclusive prefix at once
    (flag P, "the total of everything up to my end is known"). Then the block looks at the
    ``WINDOW`` tiles before it, nearest first: all flags read at once, one per thread (atomic reads:
    L2, never a stale L1 copy). If a tile has published nothing yet, it reads the window again;
    otherwise it adds the aggregates up to the nearest P (and that P's inclusive prefix) and stops,
    or adds all ``WINDOW`` aggregates and moves the window further back. A tile never waits for a
    predecessor's *look-back* to finish, only for it to have loaded and reduced its data: that is
    what makes the look-back "decoupled". At the end thread 0 publishes its own inclusive prefix.

    The fences: value first, ``threadfence()``, then the flag (release); flag first,
    ``threadfence()``, then the value (acquire). ``epoch`` (one per call) makes ``2*epoch + 1`` mean
    A and ``2*epoch + 2`` mean P in this call, so old flags never need clearing.
    """
    tid = cuda.threadIdx.x
    flag_a = 2 * epoch + 1
    flag_p = 2 * epoch + 2
    if tid == 0:
        if tile == 0:
            inclusives[0] = aggregate
            cuda.threadfence()  # release: the inclusive prefix is visible before its flag
            cuda.atomic.exch(flags, 0, flag_p)
        else:
            aggregates[tile] = aggregate
            cuda.threadfence()  # release: the aggregate is visible before its flag
            cuda.atomic.exch(flags, tile, flag_a)
    prefix = zero
    end = tile  # the window covers tiles end - 1, end - 2, ..., end - WINDOW
    while end > 0:
        if tid < WINDOW:
            j = end - 1 - tid
            ctl[tid] = cuda.atomic.add(flags, j, 0) if j >= 0 else flag_p  # before tile 0: "P, value 0"
        cuda.syncthreads()  # RAW: the window's flags are in shared memory
        if tid == 0:
            k = 0
            state = 0  # 0: someone has published nothing yet (look again), 1: a P at k, 2: only A's
            while k < WINDOW:
                f = ctl[k]
                if f < flag_a:
                    break
                if f >= flag_p:
                    state = 1
                    break
                k += 1
            if k == WINDOW:
                state = 2
                k = WINDOW - 1
            ctl[WINDOW] = state
            ctl[WINDOW + 1] = k
        cuda.syncthreads()  # RAW: the decision is in shared memory
        state = ctl[WINDOW]
        last = ctl[WINDOW + 1]
        if state != 0 and tid <= last:
            j = end - 1 - tid
            v = zero
            if j >= 0:
                cuda.threadfence()  # acquire: read the value only after the flag that announced it
                if state == 1 and tid == last:
                    v = cuda.atomic.add(inclusives, j, zero)
                else:
                    v = cuda.atomic.add(aggregates, j, zero)
            vals[tid] = v
        cuda.syncthreads()  # RAW: the values are in shared memory (WAR: ctl was read before the next window)
        if state != 0:
            for m in range(last + 1):
                prefix += vals[m]
            if state == 1:
                end = 0
            else:
                end -= WINDOW
        cuda.syncthreads()  # WAR: every thread has read vals before the next window overwrites it
    if tid == 0 and tile > 0:
        inclusives[tile] = prefix + aggregate
        cuda.threadfence()  # release: the inclusive prefix is visible before its flag
        cuda.atomic.exch(flags, tile, flag_p)
    return prefix


@tile_device
def take_tile_number(counter, ctl):
    """Thread 0 takes the next tile number (an atomic on ``counter``); every thread gets it.

    Tiles are numbered in the order blocks start, so a block only ever waits for tiles whose blocks
    are already running. The block that takes the last number resets the counter for the next call.
    """
    if cuda.threadIdx.x == 0:
        t = cuda.atomic.add(counter, 0, 1)
        ctl[0] = t
        if t == cuda.gridDim.x - 1:
            cuda.atomic.exch(counter, 0, 0)
    cuda.syncthreads()  # RAW: the number is in shared memory before anyone reads it
    t = ctl[0]
    cuda.syncthreads()  # WAR: everyone has read it before ctl is reused
    return t


@tile_kernel
def tile_scan_lookback(x, out, flags, aggregates, inclusives, counter, epoch, inclusive):
    """The single-pass scan: each block scans one tile of ``TILE`` elements and finds its prefix by look-back.

    Reads every element once and writes it once (8 bytes per 4-byte element), one launch.
    1. a tile number (:func:`take_tile_number`); 2. the tile, ``ITEMS`` consecutive elements per
    thread (:func:`load_tile`); 3. each thread adds its items; 4. a block scan of the thread totals
    (:func:`block_exclusive_scan`); 5. the sum of all earlier tiles (:func:`lookback`); 6. each
    thread scans its items from its prefix; 7. the tile goes back out (:func:`store_tile`).
    ``out`` may be ``x`` (in place). ``inclusive`` is 1 or 0.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    ctl = cuda.shared.array(CONTROL, int32)
    vals = cuda.shared.array(WINDOW, T)
    items = cuda.local.array(ITEMS, T)
    tile = take_tile_number(counter, ctl)
    n = np.uint64(x.size)
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    total = T(0)
    for j in range(ITEMS):
        total += items[j]
    before, tile_total = block_exclusive_scan(total, scratch, T(0))
    run = lookback(tile, tile_total, flags, aggregates, inclusives, epoch, ctl, vals, T(0)) + before
    if inclusive:
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
    else:
        for j in range(ITEMS):
            v = items[j]
            items[j] = run
            run += v
    store_tile(out, base, n, s, items)


@tile_kernel
def tile_reduce(x, sums):
    """Reduce-then-scan with tiles, kernel 1: ``sums[b]`` = the total of tile ``b`` (reads 4 bytes per element).

    No transpose needed: each thread adds what it loads (16-byte loads on whole tiles).
    """
    scratch = cuda.shared.array((2, THREADS), T)
    tid = cuda.threadIdx.x
    n = np.uint64(x.size)
    base = np.uint64(cuda.blockIdx.x) * np.uint64(TILE)
    total = T(0)
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            a, b, c, d = load4(x, (base + np.uint64(first + 4 * WARP * k)) // np.uint64(4))
            total += (a + b) + (c + d)
    else:
        for k in range(ITEMS):
            g = base + np.uint64(tid + k * THREADS)
            if g < n:
                total += x[g]
    _, tile_total = block_exclusive_scan(total, scratch, T(0))
    if tid == 0:
        sums[cuda.blockIdx.x] = tile_total


@tile_kernel
def tile_scan_single_block(a):
    """Reduce-then-scan with tiles, kernel 2: ONE block scans ``a`` in place (inclusive), a tile at a time.

    ``a`` holds one total per tile of the data (thousands, not millions): one block walks over it
    with a running carry.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    items = cuda.local.array(ITEMS, T)
    n = np.uint64(a.size)
    carry = T(0)
    base = np.uint64(0)
    while base < n:
        load_tile(a, base, n, s, items)
        total = T(0)
        for j in range(ITEMS):
            total += items[j]
        before, tile_total = block_exclusive_scan(total, scratch, T(0))
        run = carry + before
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
        store_tile(a, base, n, s, items)
        carry += tile_total
        base += np.uint64(TILE)


@tile_kernel
def tile_scan_offsets(x, out, tile_prefix, inclusive):
    """Reduce-then-scan with tiles, kernel 3: scan tile ``b`` starting from ``tile_prefix[b - 1]``.

    ``tile_prefix`` is the inclusive scan of the tiles' totals (kernels 1 and 2). Reads and writes
    every element once: with kernel 1's read, 12 bytes per 4-byte element in all.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    items = cuda.local.array(ITEMS, T)
    n = np.uint64(x.size)
    tile = cuda.blockIdx.x
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    total = T(0)
    for j in range(ITEMS):
        total += items[j]
    before, _ = block_exclusive_scan(total, scratch, T(0))
    run = before
    if tile > 0:
        run += tile_prefix[tile - 1]
    if inclusive:
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
    else:
        for j in range(ITEMS):
            v = items[j]
            items[j] = run
            run += v
    store_tile(out, base, n, s, items)


@tile_kernel
def tile_compact(x, out, count, threshold, flags, aggregates, inclusives, counter, epoch):
    """Stream compaction in one pass: keep the elements ``> threshold``, in order; ``count[0]`` = how many.

    The single-pass scan of the flags ``x > threshold`` (one int32 count per thread, a block scan,
    the look-back on the tiles' counts) gives each kept element its address. The block packs its kept
    elements in shared memory and writes them out in one coalesced run. ``out`` needs room for all of
    ``x``.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), int32)
    ctl = cuda.shared.array(CONTROL, int32)
    vals = cuda.shared.array(WINDOW, int32)
    items = cuda.local.array(ITEMS, T)
    tid = cuda.threadIdx.x
    tile = take_tile_number(counter, ctl)
    n = np.uint64(x.size)
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    first = base + np.uint64(tid * ITEMS)
    kept = 0
    for j in range(ITEMS):
        if items[j] > threshold and first + np.uint64(j) < n:
            kept += 1
    before, tile_kept = block_exclusive_scan(int32(kept), scratch, int32(0))
    start = lookback(tile, tile_kept, flags, aggregates, inclusives, epoch, ctl, vals, int32(0))
    pos = before  # (s is free: load_tile's reads are behind the barriers of the block scan)
    for j in range(ITEMS):
        if items[j] > threshold and first + np.uint64(j) < n:
            s[pad(pos)] = items[j]
            pos += 1
    cuda.syncthreads()  # RAW: the tile's kept elements are packed in shared memory before the stores
    e = tid
    while e < tile_kept:
        out[start + e] = s[pad(e)]
        e += THREADS
    if tid == 0 and tile == cuda.gridDim.x - 1:
        count[0] = start + tile_kept


@tile_device
def digit_of(key, shift):
    """The ``RADIX_BITS``-bit digit of ``key`` starting at bit ``shift``."""
    return int32((key >> uint32(shift)) & uint32(RADIX - 1))


@tile_device
def count_digits(items, valid, shift, counts):
    """Each thread counts its items' digits in its own column of ``counts`` ((RADIX + 1) x THREADS, digit-major).

    Items past the end of the data (``tid*ITEMS + j >= valid``) count as the extra digit ``RADIX``,
    after every real one. A thread touches only its own column: no atomics, no bank conflicts.
    """
    tid = cuda.threadIdx.x
    for d in range(RADIX + 1):
        counts[pad(d * THREADS + tid)] = 0
    for j in range(ITEMS):
        d = digit_of(items[j], shift) if tid * ITEMS + j < valid else RADIX
        counts[pad(d * THREADS + tid)] += 1


@tile_device
def scan_counts(counts, scratch):
    """Exclusive scan of all (RADIX + 1) x THREADS counters in digit-major order.

    Afterwards ``counts[d][t]`` = how many items of the tile have a smaller digit, plus how many of
    digit ``d`` belong to threads before ``t``: where thread ``t``'s first item of digit ``d`` goes in
    the tile sorted by digit. Each thread scans RADIX + 1 consecutive counters, then one block scan.
    """
    tid = cuda.threadIdx.x
    cuda.syncthreads()  # RAW: every thread's column is counted before anyone scans across columns
    first = tid * (RADIX + 1)
    total = 0
    for k in range(RADIX + 1):
        total += counts[pad(first + k)]
    before, _ = block_exclusive_scan(int32(total), scratch, int32(0))
    run = before
    for k in range(RADIX + 1):
        c = counts[pad(first + k)]
        counts[pad(first + k)] = run
        run += c
    cuda.syncthreads()  # RAW: the scanned counters are in shared memory before anyone reads another thread's


@tile_kernel
def radix_upsweep(keys, hist, shift):
    """LSD radix sort, kernel 1 of a pass: each tile counts its keys per digit: ``hist[d * tiles + tile]``.

    Digit-major, so one exclusive scan of ``hist`` gives every (digit, tile) its place in the output.
    """
    s = cuda.shared.array(PADDED_TILE, uint32)
    counts = cuda.shared.array(PADDED_COUNTS, int32)
    scratch = cuda.shared.array((2, THREADS), int32)
    items = cuda.local.array(ITEMS, uint32)
    tid = cuda.threadIdx.x
    tile = cuda.blockIdx.x
    n = np.uint64(keys.size)
    base = np.uint64(tile) * np.uint64(TILE)
    valid = int32(min(n - base, np.uint64(TILE)))
    load_tile(keys, base, n, s, items)
    count_digits(items, valid, shift, counts)
    scan_counts(counts, scratch)
    d = tid
    while d < RADIX:
        hist[d * cuda.gridDim.x + tile] = counts[pad((d + 1) * THREADS)] - counts[pad(d * THREADS)]
        d += THREADS


@tile_kernel
def radix_downsweep(keys, out, hist_scanned, shift):
    """LSD radix sort, kernel 3 of a pass: each tile sorts itself by digit in shared memory, then scatters.

    The counts give every item its rank in the tile sorted by digit (stable: items keep their order
    within a digit); the sorted tile is written out digit by digit, each digit's run starting at
    ``hist_scanned[d * tiles + tile]``: long runs of consecutive addresses, so the writes coalesce.
    """
    s = cuda.shared.array(PADDED_TILE, uint32)
    counts = cuda.shared.array(PADDED_COUNTS, int32)
    scratch = cuda.shared.array((2, THREADS), int32)
    digit_start = cuda.shared.array(RADIX, int32)
    destination = cuda.shared.array(RADIX, int32)
    items = cuda.local.array(ITEMS, uint32)
    ranks = cuda.local.array(ITEMS, int32)
    tid = cuda.threadIdx.x
    tile = cuda.blockIdx.x
    n = np.uint64(keys.size)
    base = np.uint64(tile) * np.uint64(TILE)
    valid = int32(min(n - base, np.uint64(TILE)))
    load_tile(keys, base, n, s, items)
    count_digits(items, valid, shift, counts)
    scan_counts(counts, scratch)
    d = tid
    while d < RADIX:
        digit_start[d] = counts[pad(d * THREADS)]
        destination[d] = hist_scanned[d * cuda.gridDim.x + tile]
        d += THREADS
    cuda.syncthreads()  # WAR: the digit starts (column 0) are read before thread 0 advances its counters
    for j in range(ITEMS):
        dj = digit_of(items[j], shift) if tid * ITEMS + j < valid else RADIX
        r = counts[pad(dj * THREADS + tid)]
        counts[pad(dj * THREADS + tid)] = r + 1
        ranks[j] = r
    for j in range(ITEMS):  # (s is free: load_tile's reads are behind scan_counts' barriers)
        s[pad(ranks[j])] = items[j]
    cuda.syncthreads()  # RAW: the tile is sorted in s, digit_start and destination are written
    e = tid
    while e < valid:
        key = s[pad(e)]
        d = digit_of(key, shift)
        out[destination[d] + e - digit_start[d]] = key
        e += THREADS


@dataclass(frozen=True)
class TileConfig:
    """One build of the tiled kernels: element type, threads per block, items per thread, and options.

    ``shuffle``: block scans with warp shuffles (GPU only) instead of shared memory;
    ``vector``: 16-byte loads and stores on whole tiles; ``radix_bits``: digit width of the radix
    kernels.
    """

    dtype: np.dtype
    threads: int
    items: int
    shuffle: bool
    vector: bool
    radix_bits: int = 4

    @property
    def tile(self) -> int:
        """Elements per tile (per block): ``threads * items``."""
        return self.threads * self.items


class TileKernels:
    """The tiled family compiled for one :class:`TileConfig` (attributes: the kernels, e.g. ``.tile_scan_lookback``)."""

    def __init__(self, config: TileConfig) -> None:
        self.config = config
        radix = 1 << config.radix_bits
        counts = (radix + 1) * config.threads
        names = dict(globals())
        names.update(T=_NUMBA_TYPES[config.dtype], THREADS=config.threads, ITEMS=config.items, TILE=config.tile,
                     PADDED_TILE=config.tile + (config.tile >> LOG_BANKS), WINDOW=min(WARP, config.threads),
                     CONTROL=min(WARP, config.threads) + 2,
                     SHUFFLE=config.shuffle, VECTOR=config.vector, RADIX_BITS=config.radix_bits, RADIX=radix,
                     PADDED_COUNTS=counts + (counts >> LOG_BANKS))
        self._names = names
        for name, (kind, func) in _TILE_FUNCTIONS.items():
            clone = pytypes.FunctionType(func.__code__, names, func.__name__, func.__defaults__, func.__closure__)
            clone.__doc__, clone.__module__, clone.__qualname__ = func.__doc__, func.__module__, func.__qualname__
            if kind == "device":
                names[name] = (cuda.jit(device=True)(clone) if backend.is_simulator()
                               else cuda.jit(device=True, forceinline=True)(clone))
            else:
                names[name] = cuda.jit(clone)

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in _TILE_FUNCTIONS:
            raise AttributeError(name)
        return self._names[name]


_TILE_CACHE: dict[TileConfig, TileKernels] = {}
#: Tile shape on a GPU (threads per block, items per thread) and under the simulator (small: it is slow).
GPU_TILE = (256, 16)
SIM_TILE = (32, 4)
ITEMS_CHOICES = (4, 8, 16, 32)


def tile_kernels(dtype=np.int32, threads: int | None = None, items: int | None = None, *,
                 shuffle: bool | None = None, vector: bool = True, radix_bits: int = 4) -> TileKernels:
    """The tiled kernels built for one element type and tile shape (cached).

    Defaults: 256 threads x 16 items with warp shuffles on a GPU; 32 x 4 with shared-memory block
    scans under the simulator (which has no shuffles). ``threads`` must be a multiple of 32 from 32
    to 1024, ``items`` one of 4, 8, 16, 32.

    Raises:
        LaunchConfigError: a tile shape the kernels cannot use.
        GPUOnlyError: ``shuffle=True`` under the simulator.
    """
    dtype = np.dtype(dtype)
    if dtype not in _NUMBA_TYPES:
        raise ArrayArgumentError(f"the tiled kernels work on int32, uint32 or float32, got {dtype}: convert with "
                                 ".astype(np.int32) or .astype(np.float32)")
    default = SIM_TILE if backend.is_simulator() else GPU_TILE
    threads = validate.threads_per_block(default[0] if threads is None else threads)
    if threads % WARP or threads & (threads - 1):
        raise LaunchConfigError(f"the tiled kernels need a power-of-two number of threads from 32 to 1024 (whole "
                                f"warps), got {threads}: use 128 or 256")
    items = validate.integer(default[1] if items is None else items, "items", minimum=1)
    if items not in ITEMS_CHOICES:
        raise LaunchConfigError(f"items per thread must be one of {ITEMS_CHOICES} (whole 16-byte vectors, and "
                                f"bank-conflict-free padding), got {items}")
    radix_bits = validate.integer(radix_bits, "radix_bits", minimum=1, maximum=8)
    if shuffle is None:
        shuffle = backend.is_gpu()
    if shuffle and backend.is_simulator():
        raise GPUOnlyError("block scans with warp shuffles need a real GPU (the simulator has no shuffles): "
                           "leave shuffle=None to get shared-memory block scans here")
    config = TileConfig(dtype, threads, items, bool(shuffle), bool(vector), radix_bits)
    if config not in _TILE_CACHE:
        _TILE_CACHE[config] = TileKernels(config)
    return _TILE_CACHE[config]


# =============================================================================================
# The host side: plan the launches once, launch many times
# =============================================================================================


@dataclass(frozen=True)
class Method:
    """One way to scan an array larger than a block.

    Attributes:
        key: its name in :data:`METHODS`.
        title: a short name for tables and plots.
        lesson: what it teaches, in one line.
        passes: global-memory bytes moved per 4-byte element at large n (reads + writes).
        needs: the warp intrinsic that makes it GPU-only, or "".
    """

    key: str
    title: str
    lesson: str
    passes: int
    needs: str = ""

    @property
    def gpu_only(self) -> bool:
        """True when the method needs warp intrinsics the simulator lacks."""
        return bool(self.needs)


METHODS: dict[str, Method] = {m.key: m for m in [
    Method("hillis_steele", "Hillis-Steele + propagate",
           "block scans of n log n additions, then every element gets its block's offset", 16),
    Method("scan_then_propagate", "Blelloch + propagate",
           "work-efficient block scans, block totals scanned recursively, then a uniform add", 16),
    Method("warp_shuffle", "warp shuffles + propagate",
           "block scans in registers (two barriers), then the uniform add", 16, needs="cuda.shfl_up_sync()"),
    Method("reduce_then_scan", "reduce, scan totals, scan",
           "block totals first (read only), then each block scans from its offset: 12 bytes per element", 12),
    Method("chained", "chained single pass",
           "one kernel: each tile waits for the prefix of the tile before it", 8),
    Method("tiled_reduce_then_scan", "tiled reduce-then-scan (3 kernels)",
           "16 items per thread and 16-byte loads, three kernels: 12 bytes per element", 12),
    Method("lookback", "decoupled look-back (single pass)",
           "16 items per thread, 16-byte loads, one kernel: 8 bytes per element", 8),
]}

#: Methods that run on the simulator too.
SIMULATOR_METHODS = tuple(k for k, m in METHODS.items() if not m.gpu_only)


def method_info(key: str) -> Method:
    """Look up a scan method by key (raises :class:`UnknownMethodError` listing the valid ones)."""
    try:
        return METHODS[key]
    except (KeyError, TypeError):
        raise UnknownMethodError(f"unknown scan method {key!r}: choose one of {', '.join(METHODS)}") from None


def require_gpu(what: str, needs: str, reference: str = "ch10_scan_methods") -> None:
    """Raise GPUOnlyError under the simulator for something that needs a warp intrinsic."""
    if backend.is_simulator():
        raise GPUOnlyError(
            f"{what} uses {needs}, which Numba's CUDA simulator does not have, so it only runs on a real GPU "
            f"(in Colab: Runtime > Change runtime type > GPU). Its measurements are in "
            f"lh.load_reference({reference!r}).")


def _empty(dtype):
    return cuda.device_array(0, dtype=dtype)


def _zeros(n: int, dtype):
    return cuda.to_device(np.zeros(n, dtype=dtype))


def _aligned16(a) -> bool:
    """True unless ``a`` is a device array whose data does not start on a 16-byte boundary (a sliced view)."""
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is None:
        return True
    return iface["data"][0] % 16 == 0


def _check_data(x, name: str = "x", dtypes=DTYPES) -> None:
    validate.array(x, name, ndim=1)
    if np.dtype(x.dtype) not in tuple(np.dtype(d) for d in dtypes):
        names = " or ".join(np.dtype(d).name for d in dtypes)
        raise ArrayArgumentError(f"{name} has dtype {np.dtype(x.dtype)}, but these kernels take {names}: pass "
                                 f"{name}.astype(np.{np.dtype(dtypes[0]).name}).")


def _threads_for(method: str, threads) -> int:
    if threads is None:
        return 32 if backend.is_simulator() else 256
    threads = validate.threads_per_block(threads)
    power = threads & (threads - 1) == 0
    if method in ("scan_then_propagate", "reduce_then_scan", "chained") and not power:
        raise LaunchConfigError(f"method {method!r} needs a power-of-two block (Blelloch's tree), got {threads} "
                                "threads: use 64, 128 or 256")
    if method == "warp_shuffle" and threads % WARP:
        raise LaunchConfigError(f"method 'warp_shuffle' needs whole warps, got {threads} threads: use a multiple of 32")
    return threads


@dataclass
class Launch:
    """One kernel launch of a plan: ``kernel[blocks, threads](*args)``."""

    name: str
    kernel: Any
    blocks: int
    threads: int
    args: tuple
    _launch: ConfiguredKernel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._launch = ConfiguredKernel(self.kernel, self.blocks, self.threads)

    def __call__(self, *extra) -> None:
        self._launch(*self.args, *extra)


class Scan:
    """A scan of one vector, planned once (buffers allocated) and launchable many times.

    >>> s = Scan(x, "lookback", inclusive=True)    # doctest: +SKIP
    >>> s.launch(); y = s.result()                  # doctest: +SKIP

    Args:
        x: 1-D C-contiguous int32 or float32 array (NumPy: copied to the device once; CuPy or a
            Numba device array: used in place).
        method: a key of :data:`METHODS`.
        inclusive: inclusive (True) or exclusive (False) scan.
        threads: threads per block (default 256 on a GPU, 32 under the simulator; the tiled methods
            use :func:`tile_kernels`' default tile unless given).
        items: items per thread of the tiled methods (4, 8, 16 or 32).
        out: where to write the result (default: a new device array; may be ``x`` itself).
        vector: 16-byte loads and stores in the tiled methods (default; 4-byte ones with False).

    Raises:
        ArrayArgumentError: ``x`` is not a 1-D contiguous int32/float32 array, or ``out`` does not match it.
        LaunchConfigError: a block size the method cannot use.
        UnknownMethodError: no such method.
        GPUOnlyError: the method needs warp shuffles and this is the simulator.
    """

    def __init__(self, x, method: str = "lookback", inclusive: bool = True, threads: int | None = None,
                 items: int | None = None, out=None, vector: bool = True) -> None:
        _check_data(x, "x", DTYPES + (np.dtype(np.uint32),))
        info = method_info(method)
        if not isinstance(inclusive, (bool, np.bool_)):
            raise ArgumentError(f"inclusive must be True or False, got {inclusive!r}")
        if info.gpu_only:
            require_gpu(f"method {method!r} ({info.title})", info.needs)
        self.method = info.key
        self.inclusive = bool(inclusive)
        self.dtype = np.dtype(x.dtype)
        self.n = int(x.shape[0])
        warn_if_wraps(x)
        self.x = as_device(x)
        if out is None:
            self.out = cuda.device_array(self.n, dtype=self.dtype)
        else:
            validate.array(out, "out", dtype=self.dtype, shape=(self.n,))
            self.out = as_device(out)
        self.launches: list[Launch] = []
        self._epoch_launches: list[Launch] = []
        self._epoch = 0
        tiled = info.key in ("lookback", "tiled_reduce_then_scan")
        if tiled:
            vector = bool(vector) and _aligned16(self.x) and _aligned16(self.out)
            self.tiles = tile_kernels(self.dtype, threads, items, vector=vector)
            self.threads = self.tiles.config.threads
        else:
            if items is not None:
                raise ArgumentError(f"items applies to the tiled methods only (lookback, tiled_reduce_then_scan), "
                                    f"not to {method!r}")
            self.threads = _threads_for(info.key, threads)
        if self.n == 0:
            return
        flag = 1 if self.inclusive else 0
        if info.key == "hillis_steele":
            self._plan_propagate(self.x, self.out, self.n, flag, hillis_steele_scan, self.threads)
        elif info.key == "scan_then_propagate":
            self._plan_propagate(self.x, self.out, self.n, flag, blelloch_scan, 2 * self.threads)
        elif info.key == "warp_shuffle":
            self._plan_propagate(self.x, self.out, self.n, flag, block_scan_shuffle, self.threads)
        elif info.key == "reduce_then_scan":
            self._plan_reduce_then_scan(self.x, self.out, self.n, flag)
        elif info.key == "chained":
            tiles = -(-self.n // (2 * self.threads))
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=self.dtype), _zeros(1, np.int32))
            flags, prefixes, counter = self._state
            self._add_epoch_launch(Launch("chained_scan", chained_scan.for_dtype(self.dtype), tiles, self.threads,
                                          (self.x, self.out, flags, prefixes, counter)), flag)
        elif info.key == "lookback":
            tiles = -(-self.n // self.tiles.config.tile)
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=self.dtype),
                           cuda.device_array(tiles, dtype=self.dtype), _zeros(1, np.int32))
            self._add_epoch_launch(Launch("tile_scan_lookback", self.tiles.tile_scan_lookback, tiles, self.threads,
                                          (self.x, self.out) + self._state), flag)
        else:  # tiled_reduce_then_scan
            tiles = -(-self.n // self.tiles.config.tile)
            sums = cuda.device_array(tiles, dtype=self.dtype)
            self.launches += [
                Launch("tile_reduce", self.tiles.tile_reduce, tiles, self.threads, (self.x, sums)),
                Launch("tile_scan_single_block", self.tiles.tile_scan_single_block, 1, self.threads, (sums,)),
                Launch("tile_scan_offsets", self.tiles.tile_scan_offsets, tiles, self.threads,
                       (self.x, self.out, sums, flag)),
            ]

    # -- planning -----------------------------------------------------------------------------
    def _add_epoch_launch(self, launch: Launch, flag: int) -> None:
        launch.args = launch.args  # the epoch is passed at each launch, the flag after it
        self._epoch_flag = flag
        self.launches.append(launch)
        self._epoch_launches.append(launch)

    def _block_launch(self, kernel: TypedKernel, blocks: int, src, dst, sums, flag: int) -> Launch:
        k = kernel.for_dtype(self.dtype)
        if kernel is blelloch_scan:
            return Launch(kernel.__name__, k, blocks, self.threads, (src, dst, sums, _empty(self.dtype), flag))
        return Launch(kernel.__name__, k, blocks, self.threads, (src, dst, sums, flag))

    def _plan_propagate(self, src, dst, n: int, flag: int, kernel: TypedKernel, per_block: int) -> None:
        blocks = -(-n // per_block)
        if blocks == 1:
            self.launches.append(self._block_launch(kernel, 1, src, dst, _empty(self.dtype), flag))
            return
        sums = cuda.device_array(blocks, dtype=self.dtype)
        self.launches.append(self._block_launch(kernel, blocks, src, dst, sums, flag))
        self._plan_propagate(sums, sums, blocks, 1, kernel, per_block)  # inclusive scan of the block totals
        self.launches.append(Launch("add_block_offsets", add_block_offsets.for_dtype(self.dtype),
                                    -(-n // self.threads), self.threads, (dst, sums, per_block)))

    def _plan_reduce_then_scan(self, src, dst, n: int, flag: int) -> None:
        per_block = 2 * self.threads
        blocks = -(-n // per_block)
        scan_k = blelloch_scan.for_dtype(self.dtype)
        if blocks == 1:
            self.launches.append(Launch("blelloch_scan", scan_k, 1, self.threads,
                                        (src, dst, _empty(self.dtype), _empty(self.dtype), flag)))
            return
        sums = cuda.device_array(blocks, dtype=self.dtype)
        self.launches.append(Launch("block_reduce", block_reduce.for_dtype(self.dtype), blocks, self.threads,
                                    (src, sums)))
        self._plan_reduce_then_scan(sums, sums, blocks, 1)
        self.launches.append(Launch("blelloch_scan", scan_k, blocks, self.threads,
                                    (src, dst, _empty(self.dtype), sums, flag)))

    # -- running ------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes a scan must move (read each element, write each result): effective bandwidth = nbytes / time."""
        return scan_bytes(self.n, self.dtype.itemsize)

    @property
    def plan(self) -> list[tuple[str, int, int]]:
        """``(kernel, blocks, threads)`` of every launch, in order."""
        return [(k.name, k.blocks, k.threads) for k in self.launches]

    def launch(self) -> None:
        """Enqueue every kernel of the plan (asynchronous on a GPU; no allocation, no copy)."""
        for step in self.launches:
            if step in self._epoch_launches:
                self._epoch += 1
                step(self._epoch, self._epoch_flag)
            else:
                step()

    def result(self) -> np.ndarray:
        """The scan of the last launch, copied to the host."""
        if self.n == 0:
            return np.zeros(0, dtype=self.dtype)
        return self.out.copy_to_host()

    def __call__(self) -> np.ndarray:
        """Launch and return the result on the host."""
        self.launch()
        return self.result()


def scan(x, method: str = "lookback", inclusive: bool = True, threads: int | None = None,
         items: int | None = None) -> np.ndarray:
    """Scan ``x`` (int32 or float32, 1-D) on the GPU or the simulator; returns a NumPy array.

    See :class:`Scan` for the arguments and :data:`METHODS` for the methods.

    Example:
        >>> scan(np.array([3, 1, 7, 0, 4, 1, 6, 3], np.int32), inclusive=False)   # doctest: +SKIP
        array([ 0,  3,  4, 11, 11, 15, 16, 22], dtype=int32)
    """
    return Scan(x, method, inclusive, threads, items)()


def block_scan(x, kernel: str = "blelloch", inclusive: bool = True, threads: int | None = None) -> np.ndarray:
    """Run ONE of the in-block kernels over ``x``: every block scans its own part, with no carry between blocks.

    ``kernel``: ``"hillis_steele"``, ``"blelloch"``, ``"blelloch_unpadded"``, ``"shuffle"`` (GPU only),
    or the pitfalls ``"hillis_steele_seed_bounds"`` and ``"hillis_steele_single_buffer"``. Each block
    covers ``threads`` elements (``2 * threads`` for Blelloch). For a whole-array scan use :func:`scan`.
    """
    _check_data(x)
    kernels = {"hillis_steele": hillis_steele_scan, "blelloch": blelloch_scan,
               "blelloch_unpadded": blelloch_scan_unpadded, "shuffle": block_scan_shuffle,
               "hillis_steele_seed_bounds": hillis_steele_seed_bounds,
               "hillis_steele_single_buffer": hillis_steele_single_buffer}
    chosen = validate.choice(kernel, "kernel", tuple(kernels))
    if chosen == "shuffle":
        require_gpu("the warp-shuffle block scan", "cuda.shfl_up_sync()")
    method = "scan_then_propagate" if chosen.startswith("blelloch") else (
        "warp_shuffle" if chosen == "shuffle" else "hillis_steele")
    threads = _threads_for(method, threads)
    dtype = np.dtype(x.dtype)
    n = int(x.shape[0])
    out = cuda.to_device(np.zeros(n, dtype=dtype))
    if n == 0:
        return out.copy_to_host()
    per_block = 2 * threads if chosen.startswith("blelloch") else threads
    warn_if_wraps(x, per_block)
    blocks = -(-n // per_block)
    kernel_obj = kernels[chosen]
    if isinstance(kernel_obj, TypedKernel):
        k = kernel_obj.for_dtype(dtype)
    elif dtype != np.dtype(np.int32):
        raise ArrayArgumentError(f"the pitfall kernel {chosen!r} is written for int32: pass x.astype(np.int32)")
    else:
        k = kernel_obj
    args = (as_device(x), out, _empty(dtype)) + ((_empty(dtype),) if chosen.startswith("blelloch") else ())
    k[blocks, threads](*args, 1 if inclusive else 0)
    return out.copy_to_host()


def block_scan_reference(x, per_block: int, inclusive: bool = True) -> np.ndarray:
    """NumPy: every run of ``per_block`` elements scanned on its own (what :func:`block_scan` computes)."""
    x = np.asarray(x)
    dtype = np.float64 if x.dtype.kind == "f" else x.dtype
    blocks = -(-x.size // per_block)
    padded = np.zeros(blocks * per_block, dtype=dtype)
    padded[:x.size] = x
    runs = padded.reshape(blocks, per_block)
    out = np.cumsum(runs, axis=1, dtype=dtype)
    if not inclusive:
        out -= runs
    return out.ravel()[:x.size]


# =============================================================================================
# Patterns: compaction, split, radix sort, histogram
# =============================================================================================


@typed_kernel
def keep_flags(x, threshold, flags):
    """Compaction, step 1: ``flags[i] = 1`` if ``x[i] > threshold`` else 0 (a map)."""
    i = cuda.grid(1)
    if i < x.size:
        flags[i] = 1 if x[i] > threshold else 0


@typed_kernel
def scatter_kept(x, flags, addresses, out):
    """Compaction, step 3: every kept element goes to its address, the exclusive scan of the flags (a scatter)."""
    i = cuda.grid(1)
    if i < x.size and flags[i]:
        out[addresses[i]] = x[i]


def compact_reference(x, threshold) -> np.ndarray:
    """NumPy: the elements of ``x`` greater than ``threshold``, in their order."""
    x = np.asarray(x)
    return x[x > threshold]


class Compactor:
    """Stream compaction of one vector (keep ``x > threshold``), planned once, launchable many times.

    ``method="single_pass"`` (default): :func:`tile_compact`, one kernel. ``method="three_kernels"``:
    flags (:data:`keep_flags`), their exclusive scan (:class:`Scan`), scatter (:data:`scatter_kept`).
    :meth:`launch` enqueues; :meth:`count` waits and returns how many were kept; :meth:`result`
    returns them on the host.
    """

    def __init__(self, x, threshold, method: str = "single_pass", threads: int | None = None,
                 items: int | None = None) -> None:
        _check_data(x)
        self.dtype = np.dtype(x.dtype)
        self.threshold = self.dtype.type(validate.number(threshold, "threshold"))
        self.method = validate.choice(method, "method", ("single_pass", "three_kernels"))
        self.n = int(x.shape[0])
        self.x = as_device(x)
        self.out = cuda.device_array(max(self.n, 1), dtype=self.dtype)
        self._count = _zeros(1, np.int32)
        self._epoch = 0
        if self.n == 0:
            return
        if self.method == "single_pass":
            tk = tile_kernels(self.dtype, threads, items, vector=_aligned16(self.x))
            tiles = -(-self.n // tk.config.tile)
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=np.int32),
                           cuda.device_array(tiles, dtype=np.int32), _zeros(1, np.int32))
            self._launch = Launch("tile_compact", tk.tile_compact, tiles, tk.config.threads,
                                  (self.x, self.out, self._count, self.threshold) + self._state)
        else:
            t = _threads_for("hillis_steele", threads)
            self._flags = cuda.device_array(self.n, dtype=np.int32)
            self._scan = Scan(self._flags, "lookback", inclusive=False, items=items)
            blocks = -(-self.n // t)
            self._steps = [Launch("keep_flags", keep_flags.for_dtype(self.dtype), blocks, t,
                                  (self.x, self.threshold, self._flags)),
                           Launch("scatter_kept", scatter_kept.for_dtype(self.dtype), blocks, t,
                                  (self.x, self._flags, self._scan.out, self.out))]

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous)."""
        if self.n == 0:
            return
        if self.method == "single_pass":
            self._epoch += 1
            self._launch(self._epoch)
        else:
            self._steps[0]()
            self._scan.launch()
            self._steps[1]()

    def count(self) -> int:
        """How many elements the last launch kept (waits for it)."""
        if self.n == 0:
            return 0
        if self.method == "single_pass":
            return int(self._count.copy_to_host()[0])
        last_flag = int(self._flags[self.n - 1:].copy_to_host()[0])
        return int(self._scan.out[self.n - 1:].copy_to_host()[0]) + last_flag  # exclusive scan + last flag

    def __call__(self) -> int:
        """Launch and return the count (what a benchmark times: the host needs the count to use the result)."""
        self.launch()
        return self.count()

    @property
    def nbytes(self) -> int:
        """Bytes compaction must move: read every element, write the kept ones (as of the last launch)."""
        return self.dtype.itemsize * (self.n + self.count())

    def result(self) -> np.ndarray:
        """The kept elements of the last launch, on the host."""
        k = self.count()
        return self.out.copy_to_host()[:k]


def compact(x, threshold, method: str = "single_pass", threads: int | None = None) -> np.ndarray:
    """The elements of ``x`` (int32 or float32) greater than ``threshold``, in order, computed on the GPU."""
    c = Compactor(x, threshold, method, threads)
    c.launch()
    return c.result()


# --- radix split: the slide's table --------------------------------------------------------------

#: The slide's radix-split example: 3-bit keys, split on the least significant bit (bit 0).
SPLIT_KEYS = (0b100, 0b111, 0b010, 0b110, 0b011, 0b101, 0b001, 0b000)
#: The slide's table for it: b (the bit), e (= not b), f (exclusive scan of e), t, d, and the output.
SPLIT_TABLE = {
    "b": (0, 1, 0, 0, 1, 1, 1, 0),
    "e": (1, 0, 1, 1, 0, 0, 0, 1),
    "f": (0, 1, 1, 2, 3, 3, 3, 3),
    "t": (4, 4, 5, 5, 5, 6, 7, 8),
    "d": (0, 4, 1, 2, 5, 6, 7, 3),
    "out": (0b100, 0b010, 0b110, 0b000, 0b111, 0b011, 0b101, 0b001),
}


def split_table(keys, bit: int = 0) -> dict[str, np.ndarray]:
    """The slide's split table in NumPy: ``b, e, f, totalFalses, t, d`` and the output.

    ``b`` = bit ``bit`` of each key; ``e = 1 - b`` (the keys that go first); ``f`` = exclusive scan
    of ``e`` (where each of those goes); ``totalFalses = e[n-1] + f[n-1]``; ``t = i - f + totalFalses``
    (where each key with ``b = 1`` goes: after all the falses, in order); ``d = b ? t : f``; and
    ``out[d[i]] = keys[i]``.
    """
    keys = np.asarray(keys).astype(np.uint32)
    bit = validate.integer(bit, "bit", minimum=0, maximum=31)
    n = keys.size
    b = ((keys >> np.uint32(bit)) & np.uint32(1)).astype(np.int64)
    e = 1 - b
    f = scan_reference(e, inclusive=False) if n else e
    total_falses = int(e[-1] + f[-1]) if n else 0
    t = np.arange(n) - f + total_falses
    d = np.where(b == 1, t, f)
    out = np.empty_like(keys)
    out[d] = keys
    return {"b": b, "e": e, "f": f, "totalFalses": total_falses, "t": t, "d": d, "out": out}


def split_reference(keys, bit: int = 0) -> np.ndarray:
    """NumPy: a stable partition of ``keys`` by bit ``bit``: keys with the bit 0 first, then 1, each in order."""
    keys = np.asarray(keys)
    b = (keys.astype(np.uint32) >> np.uint32(bit)) & np.uint32(1)
    return np.concatenate([keys[b == 0], keys[b == 1]])


@cuda.jit
def split_flags(keys, bit, e):
    """Radix split, step 1: ``e[i] = 1`` if bit ``bit`` of ``keys[i]`` is 0 (that key goes to the front)."""
    i = cuda.grid(1)
    if i < keys.size:
        e[i] = 1 - ((keys[i] >> uint32(bit)) & uint32(1))


@cuda.jit
def split_scatter(keys, bit, e, f, out):
    """Radix split, step 3: ``d = b ? t : f`` with ``t = i - f + totalFalses``, then ``out[d] = keys[i]``.

    ``f`` is the exclusive scan of ``e``; ``totalFalses = e[n-1] + f[n-1]`` (the exclusive scan's
    last value misses the last flag). Stable: keys with the same bit keep their order.
    """
    i = cuda.grid(1)
    n = keys.size
    if i < n:
        total_falses = e[n - 1] + f[n - 1]
        b = (keys[i] >> uint32(bit)) & uint32(1)
        t = i - f[i] + total_falses
        d = t if b else f[i]
        out[d] = keys[i]


def _check_keys(keys, name: str = "keys") -> None:
    validate.array(keys, name, ndim=1)
    if np.dtype(keys.dtype) != np.dtype(np.uint32):
        raise ArrayArgumentError(f"{name} has dtype {np.dtype(keys.dtype)}: the radix kernels sort 32-bit unsigned "
                                 f"keys, pass {name}.astype(np.uint32)")


def radix_split(keys, bit: int = 0, threads: int | None = None) -> np.ndarray:
    """One radix-split pass on the GPU: flags, their exclusive scan, the scatter (three steps)."""
    _check_keys(keys)
    bit = validate.integer(bit, "bit", minimum=0, maximum=31)
    t = _threads_for("hillis_steele", threads)
    n = int(keys.shape[0])
    if n == 0:
        return np.zeros(0, np.uint32)
    k = as_device(keys)
    e = cuda.device_array(n, dtype=np.int32)
    out = cuda.device_array(n, dtype=np.uint32)
    blocks = -(-n // t)
    split_flags[blocks, t](k, bit, e)
    f = Scan(e, "lookback", inclusive=False)
    f.launch()
    split_scatter[blocks, t](k, bit, e, f.out, out)
    return out.copy_to_host()


# --- LSD radix sort -------------------------------------------------------------------------------

#: Digit widths the radix sorter accepts, and the widest its shared-memory counters allow at 256 threads.
RADIX_BITS_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)


def radix_passes(bits: int, key_bits: int = 32) -> int:
    """Passes of an LSD radix sort of ``key_bits``-bit keys with ``bits``-bit digits: ``ceil(key_bits / bits)``."""
    return -(-key_bits // validate.integer(bits, "bits", minimum=1, maximum=32))


def radix_counter_bytes(bits: int, threads: int) -> int:
    """Shared memory the digit counters of one block take: ``(2**bits + 1) * threads`` int32, padded."""
    words = ((1 << bits) + 1) * threads
    return 4 * (words + (words >> LOG_BANKS))


def radix_pass_bytes(n: int, bits: int, tile: int) -> int:
    """Bytes one pass moves: read the keys twice (count, then scatter), write them once, and the histogram
    (``2**bits`` counters per tile) written, scanned (read + write) and read: ``12 n + 16 * 2**bits * tiles``."""
    tiles = -(-int(n) // tile)
    return 12 * int(n) + 16 * (1 << bits) * tiles


class RadixSorter:
    """LSD radix sort of 32-bit unsigned keys with ``bits``-bit digits, planned once.

    Each pass (``ceil(32 / bits)`` of them, least significant digit first) is three kernels: every
    tile counts its digits (:func:`radix_upsweep`), one exclusive scan of those counts
    (:class:`Scan`, look-back) gives every (digit, tile) its output position, and every tile sorts
    itself by digit in shared memory and writes its digits' runs there (:func:`radix_downsweep`).
    Every pass is stable, so after the last one the keys are sorted. The input is never modified
    (the first pass reads it, later passes go back and forth between two buffers).

    Args:
        keys: 1-D uint32 array.
        bits: digit width (default 4: 8 passes; see the chapter for the trade-off).
        threads, items: the tile shape (default: :func:`tile_kernels`' default).
        key_bits: how many low bits of the keys can be non-zero (default 32; fewer bits, fewer passes).

    Raises:
        LaunchConfigError: the digit counters would not fit in 48 KiB of shared memory.
    """

    def __init__(self, keys, bits: int = 4, threads: int | None = None, items: int | None = None,
                 key_bits: int = 32) -> None:
        _check_keys(keys)
        self.bits = validate.integer(bits, "bits", minimum=1, maximum=8)
        self.key_bits = validate.integer(key_bits, "key_bits", minimum=1, maximum=32)
        default = SIM_TILE if backend.is_simulator() else GPU_TILE
        t = default[0] if threads is None else validate.threads_per_block(threads)
        per = default[1] if items is None else items
        shared = radix_counter_bytes(self.bits, t) + 4 * (t * per + (t * per >> LOG_BANKS))
        if shared > validate.DEFAULT_SHARED_PER_BLOCK:
            raise LaunchConfigError(
                f"{self.bits}-bit digits with {t} threads need {shared:,} bytes of shared memory per block (one "
                f"counter per digit per thread, and the tile), more than the 49,152 a block gets: use fewer bits or "
                "fewer threads")
        self.kernels = tile_kernels(np.uint32, t, per, radix_bits=self.bits)
        self.n = int(keys.shape[0])
        self.keys = as_device(keys)
        self.passes = radix_passes(self.bits, self.key_bits)
        if self.n == 0:
            return
        tile = self.kernels.config.tile
        self.tiles = -(-self.n // tile)
        self._buffers = (cuda.device_array(self.n, dtype=np.uint32), cuda.device_array(self.n, dtype=np.uint32))
        self._hist = cuda.device_array((1 << self.bits) * self.tiles, dtype=np.int32)
        self._hist_scan = Scan(self._hist, "lookback", inclusive=False, out=self._hist)
        t = self.kernels.config.threads
        self._steps = []
        src = self.keys
        for p in range(self.passes):
            dst = self._buffers[p % 2]
            shift = p * self.bits
            self._steps.append((Launch("radix_upsweep", self.kernels.radix_upsweep, self.tiles, t,
                                       (src, self._hist, shift)),
                                Launch("radix_downsweep", self.kernels.radix_downsweep, self.tiles, t,
                                       (src, dst, self._hist, shift))))
            src = dst
        self.out = src

    @property
    def nbytes(self) -> int:
        """Bytes the whole sort moves (every pass, :func:`radix_pass_bytes`)."""
        if self.n == 0:
            return 0
        return self.passes * radix_pass_bytes(self.n, self.bits, self.kernels.config.tile)

    def launch(self) -> None:
        """Enqueue every pass (asynchronous)."""
        if self.n == 0:
            return
        for up, down in self._steps:
            up()
            self._hist_scan.launch()
            down()

    def result(self) -> np.ndarray:
        """The sorted keys of the last launch, on the host."""
        if self.n == 0:
            return np.zeros(0, np.uint32)
        return self.out.copy_to_host()

    def __call__(self) -> np.ndarray:
        self.launch()
        return self.result()


def radix_sort(keys, bits: int = 4, threads: int | None = None, key_bits: int = 32) -> np.ndarray:
    """Sort uint32 ``keys`` on the GPU with :class:`RadixSorter`; returns a NumPy array."""
    return RadixSorter(keys, bits, threads, key_bits=key_bits)()


# --- histogram ------------------------------------------------------------------------------------

#: Most bins the shared-memory histogram holds (one int32 counter each).
MAX_BINS = 1024


@cuda.jit
def histogram_global_atomics(values, counts):
    """Every element adds 1 to its bin in global memory: one global atomic per element (grid-stride loop)."""
    i = cuda.grid(1)
    while i < values.size:
        cuda.atomic.add(counts, values[i], 1)
        i += cuda.gridsize(1)


@cuda.jit
def histogram_shared_atomics(values, counts):
    """A private histogram per block in shared memory, then one global atomic per bin per block.

    Shared-memory atomics are fast and contend only within a block; the block then adds its bins
    into ``counts`` (which must start at zero). The histogram exercise of the reduction lab.
    """
    s = cuda.shared.array(MAX_BINS, int32)
    tid = cuda.threadIdx.x
    b = tid
    while b < counts.size:
        s[b] = 0
        b += cuda.blockDim.x
    cuda.syncthreads()  # RAW: the bins are zero before anyone counts
    i = cuda.grid(1)
    while i < values.size:
        cuda.atomic.add(s, values[i], 1)
        i += cuda.gridsize(1)
    cuda.syncthreads()  # RAW: every count of this block is in before the bins are added up
    b = tid
    while b < counts.size:
        if s[b]:
            cuda.atomic.add(counts, b, s[b])
        b += cuda.blockDim.x


def histogram(values, bins: int, method: str = "shared", threads: int | None = None,
              blocks: int | None = None) -> np.ndarray:
    """Count the int32 ``values`` (each in ``[0, bins)``) per bin on the GPU; returns ``np.bincount``'s answer."""
    validate.array(values, "values", dtype=np.int32, ndim=1)
    bins = validate.integer(bins, "bins", minimum=1, maximum=MAX_BINS)
    method = validate.choice(method, "method", ("shared", "global"))
    t = _threads_for("hillis_steele", threads)
    host = values if isinstance(values, np.ndarray) else values.copy_to_host()
    if host.size and (host.min() < 0 or host.max() >= bins):
        raise ArrayArgumentError(f"values must lie in [0, {bins}) (they are bin numbers), got values from "
                                 f"{host.min()} to {host.max()}: clip them or raise bins")
    counts = _zeros(bins, np.int32)
    n = int(values.shape[0])
    if n:
        grid = validate.integer(blocks, "blocks", minimum=1) if blocks is not None else max(1, min(-(-n // t), 4 if
                                                                                            backend.is_simulator()
                                                                                            else 1024))
        kernel = histogram_shared_atomics if method == "shared" else histogram_global_atomics
        kernel[grid, t](as_device(values), counts)
    return counts.copy_to_host()


# =============================================================================================
# Sparse matrix-vector product y = A x, A in CSR
# =============================================================================================

#: The slide's 3 x 3 example: A = [[a, 0, b], [c, d, e], [0, 0, f]] with a..f = 1..6.
SLIDE_CSR_VALUES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
SLIDE_CSR_INDEX = (0, 2, 0, 1, 2, 2)
#: As printed on the slide: one entry short (a CSR row pointer has n_rows + 1 entries, the last is nnz = 6).
SLIDE_ROW_PTR_AS_PRINTED = (0, 2, 5)
SLIDE_ROW_PTR = (0, 2, 5, 6)

#: Threads per block and merge items per thread of the merge-based SpMV kernels. Few items per thread keep a
#: block's shared memory small, so more blocks, and more gathers of ``x`` in flight, fit on an SM. On an H100
#: (power-law matrix, 2^23 rows): 16 items, 18 KB per block, 11 blocks per SM (69% occupancy), 0.49x
#: cuSPARSE; 8 items, 10 KB, 16 blocks (100%), 0.75x; 4 items, 0.83x.
MERGE_THREADS = 128
MERGE_ITEMS = 4
MERGE_TILE = MERGE_THREADS * MERGE_ITEMS
MERGE_ROWS = MERGE_TILE + 2  # row starts a tile needs: its rows, and the start of the one after

#: The SpMV kernels: key -> (title, what it needs or "").
SPMV_METHODS = {
    "scalar": ("scalar (one thread per row)", ""),
    "warp_per_row": ("warp per row", "cuda.shfl_down_sync()"),
    "segmented_scan": ("segmented scan (the slide's formulation)", ""),
    "merge": ("merge-based (rows and non-zeros split evenly)", ""),
    "merge_combined": ("merge-based, partial sums combined in the block", ""),
}


@dataclass(frozen=True)
class CSR:
    """A sparse matrix in compressed sparse row form (float32 values, int32 indices), on the host.

    ``row_ptr`` has ``n_rows + 1`` entries: row ``r``'s non-zeros are ``values[row_ptr[r]:row_ptr[r+1]]``
    in columns ``col_idx[row_ptr[r]:row_ptr[r+1]]``, so ``row_ptr[-1]`` is the number of non-zeros.
    """

    row_ptr: np.ndarray
    col_idx: np.ndarray
    values: np.ndarray
    n_cols: int
    name: str = ""

    @property
    def n_rows(self) -> int:
        return int(self.row_ptr.size - 1)

    @property
    def nnz(self) -> int:
        return int(self.values.size)

    def row_lengths(self) -> np.ndarray:
        """Non-zeros per row (NumPy)."""
        return np.diff(to_host(self.row_ptr))

    def to_host(self) -> "CSR":
        """The same matrix with NumPy arrays (a matrix built with CuPy lives on the GPU)."""
        return CSR(to_host(self.row_ptr), to_host(self.col_idx), to_host(self.values), self.n_cols, self.name)

    def describe(self) -> dict:
        """Rows, columns, non-zeros, empty rows and the longest row: what decides which kernel wins."""
        lengths = self.row_lengths()
        return {"matrix": self.name, "rows": self.n_rows, "cols": self.n_cols, "nnz": self.nnz,
                "mean_row": float(lengths.mean()) if lengths.size else 0.0,
                "max_row": int(lengths.max()) if lengths.size else 0,
                "empty_rows": int(np.count_nonzero(lengths == 0))}


def check_csr(row_ptr, col_idx, values, n_cols: int | None = None) -> None:
    """Raise :class:`~labhelpers.errors.ArrayArgumentError` unless the three arrays form a valid CSR matrix.

    Catches the slide's slip: a ``row_ptr`` without its last entry (``nnz``) describes one row too few.
    """
    validate.array(row_ptr, "row_ptr", dtype=np.int32, ndim=1)
    validate.array(col_idx, "col_idx", dtype=np.int32, ndim=1)
    validate.array(values, "values", dtype=np.float32, ndim=1)
    rp = to_host(row_ptr)
    nnz = int(values.shape[0])
    if int(col_idx.shape[0]) != nnz:
        raise ArrayArgumentError(f"col_idx has {col_idx.shape[0]} entries and values {nnz}: there is one column "
                                 "index per non-zero value")
    if rp.size < 1 or rp[0] != 0:
        raise ArrayArgumentError("row_ptr must start with 0 (row 0's first non-zero is non-zero number 0)")
    if np.any(np.diff(rp) < 0):
        raise ArrayArgumentError("row_ptr must never decrease: row r's non-zeros are row_ptr[r] .. row_ptr[r+1] - 1")
    if rp[-1] != nnz:
        hint = (f": it looks like the last entry is missing (a matrix of n rows needs n + 1 entries, the last one "
                f"being nnz = {nnz}; append it)" if rp[-1] < nnz else "")
        raise ArrayArgumentError(f"row_ptr ends with {rp[-1]}, but there are {nnz} non-zeros{hint}")
    if n_cols is not None and nnz:
        ci = to_host(col_idx)
        if ci.min() < 0 or ci.max() >= n_cols:
            raise ArrayArgumentError(f"col_idx holds columns from {ci.min()} to {ci.max()}, outside 0 .. {n_cols - 1}")


def csr_from_dense(a, name: str = "") -> CSR:
    """The CSR form of a dense 2-D array (its non-zero entries)."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim != 2:
        raise ArrayArgumentError(f"a dense matrix is 2-D, got shape {a.shape}")
    rows, cols = np.nonzero(a)
    row_ptr = np.zeros(a.shape[0] + 1, np.int32)
    np.add.at(row_ptr, rows + 1, 1)
    return CSR(np.cumsum(row_ptr).astype(np.int32), cols.astype(np.int32), a[rows, cols].astype(np.float32),
               a.shape[1], name)


def laplacian_2d(k: int, xp=np) -> CSR:
    """The 5-point Laplacian of a ``k x k`` grid: ``k**2`` rows of at most 5 non-zeros (4 on the diagonal, -1 beside).

    Rows in order, columns sorted within each row. ``xp``: ``numpy`` (default) or ``cupy`` (built on the GPU).
    """
    k = validate.integer(k, "k", minimum=1)
    n = k * k
    r = xp.arange(n, dtype=xp.int64)
    i, j = r // k, r % k
    cols, keep, vals = [], [], []
    for di, dj, v in ((-1, 0, -1.0), (0, -1, -1.0), (0, 0, 4.0), (0, 1, -1.0), (1, 0, -1.0)):  # column order
        keep.append((i + di >= 0) & (i + di < k) & (j + dj >= 0) & (j + dj < k))
        cols.append(r + di * k + dj)
        vals.append(xp.full(n, v, dtype=xp.float32))
    keep, cols, vals = xp.stack(keep, axis=1), xp.stack(cols, axis=1), xp.stack(vals, axis=1)
    row_ptr = xp.zeros(n + 1, dtype=xp.int64)
    row_ptr[1:] = xp.cumsum(keep.sum(axis=1))
    return CSR(row_ptr.astype(xp.int32), cols[keep].astype(xp.int32), vals[keep], n, f"2D Laplacian {k}x{k}")


def power_law_matrix(n: int, mean_row: float = 8.0, exponent: float = 2.0, seed: int = 0, xp=np) -> CSR:
    """An ``n x n`` matrix whose row lengths follow a power law (a few huge rows, many short ones), like a web graph.

    Row lengths: a Pareto distribution with tail ``exponent`` (``P(len > L) ~ L**-(exponent - 1)``),
    scaled to about ``mean_row`` non-zeros per row and capped at ``n``; columns uniform at random.
    """
    n = validate.integer(n, "n", minimum=1)
    rng = np.random.default_rng(seed)
    raw = rng.pareto(exponent - 1.0, size=n) + 1.0
    lengths = np.minimum(np.round(raw * mean_row / raw.mean()), n).astype(np.int64)
    return _random_rows(lengths, n, seed, f"power law (n={n:,}, exponent {exponent:g})", xp)


def empty_and_long_rows(n: int, long_rows: int = 4, long_length: int | None = None, mean_row: float = 4.0,
                        empty_fraction: float = 0.5, seed: int = 0, xp=np) -> CSR:
    """An ``n x n`` matrix where about half the rows are empty, most others short, and ``long_rows`` rows very long
    (``long_length`` non-zeros each, default ``n // 2``)."""
    n = validate.integer(n, "n", minimum=1)
    rng = np.random.default_rng(seed)
    lengths = rng.poisson(mean_row / (1 - empty_fraction), size=n)
    lengths[rng.random(n) < empty_fraction] = 0
    long_length = n // 2 if long_length is None else long_length
    lengths[rng.choice(n, size=min(long_rows, n), replace=False)] = min(long_length, n)
    return _random_rows(lengths.astype(np.int64), n, seed, f"empty and long rows (n={n:,})", xp)


def _random_rows(lengths: np.ndarray, n_cols: int, seed: int, name: str, xp=np) -> CSR:
    """A CSR matrix with the given row lengths, random columns (sorted within rows) and values in [-1, 1)."""
    row_ptr = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    nnz = int(row_ptr[-1])
    d_ptr = xp.asarray(row_ptr)
    rows = xp.searchsorted(d_ptr[1:], xp.arange(nnz, dtype=xp.int64), side="right")
    rng = xp.random.default_rng(seed)
    cols = xp.minimum((rng.random(nnz) * n_cols).astype(xp.int64), n_cols - 1)
    key = xp.sort(rows * n_cols + cols)
    vals = (rng.random(nnz, dtype=xp.float32) * 2 - 1).astype(xp.float32)
    return CSR(d_ptr.astype(xp.int32), (key % n_cols).astype(xp.int32), vals, n_cols, name)


def spmv_reference(row_ptr, col_idx, values, x) -> np.ndarray:
    """NumPy, in float64: ``y[r] = sum of values[k] * x[col_idx[k]]`` over row ``r``'s non-zeros (0 for an empty row)."""
    row_ptr = to_host(row_ptr)
    rows = np.repeat(np.arange(row_ptr.size - 1), np.diff(row_ptr))
    products = to_host(values).astype(np.float64) * to_host(x).astype(np.float64)[to_host(col_idx)]
    return np.bincount(rows, weights=products, minlength=row_ptr.size - 1)


def spmv_error_bound(row_ptr, col_idx, values, x) -> np.ndarray:
    """Per row, a bound on the float32 error: ``(len + 1) * u * sum |values * x|`` (any order of the additions)."""
    lengths = np.diff(to_host(row_ptr))
    rows = np.repeat(np.arange(lengths.size), lengths)
    mags = np.abs(to_host(values).astype(np.float64) * to_host(x).astype(np.float64)[to_host(col_idx)])
    return (lengths + 2) * 2.0**-24 * np.bincount(rows, weights=mags, minlength=lengths.size) + 1e-30


def spmv_bytes(n_rows: int, n_cols: int, nnz: int) -> int:
    """Bytes an SpMV must move at least: values and column indices (8 per non-zero), ``row_ptr`` (4 per row + 4),
    ``x`` read once (4 per column) and ``y`` written once (4 per row). Effective bandwidth = this / time."""
    return 8 * int(nnz) + 4 * (int(n_rows) + 1) + 4 * int(n_cols) + 4 * int(n_rows)


@cuda.jit
def spmv_csr_scalar(row_ptr, col_idx, values, x, y):
    """One thread per row: thread ``r`` walks row ``r``'s non-zeros.

    Simple, and fine for short rows of similar length. The threads of a warp read ``values`` at
    addresses far apart (one row each: uncoalesced), and a warp with one long row waits for it.
    """
    row = cuda.grid(1)
    if row < y.size:
        acc = float32(0)
        for k in range(row_ptr[row], row_ptr[row + 1]):
            acc += values[k] * x[col_idx[k]]
        y[row] = acc


@cuda.jit
def spmv_csr_warp_per_row(row_ptr, col_idx, values, x, y):
    """One warp per row: lane ``l`` adds non-zeros ``l, l + 32, ...`` of the row, then a warp sum (GPU only).

    The warp reads each row in coalesced 128-byte runs; rows shorter than 32 leave lanes idle.
    """
    row = cuda.grid(1) // WARP
    lane = cuda.threadIdx.x % WARP
    if row < y.size:  # the same for the whole warp: every lane reaches the shuffles
        acc = float32(0)
        k = row_ptr[row] + lane
        end = row_ptr[row + 1]
        while k < end:
            acc += values[k] * x[col_idx[k]]
            k += WARP
        for offset in (16, 8, 4, 2, 1):
            acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
        if lane == 0:
            y[row] = acc


@cuda.jit
def spmv_products(col_idx, values, x, products, heads):
    """Segmented-scan SpMV, step 1: ``products[k] = values[k] * x[col_idx[k]]``, and clear the head flags."""
    k = cuda.grid(1)
    if k < values.size:
        products[k] = values[k] * x[col_idx[k]]
        heads[k] = 0


@cuda.jit
def spmv_mark_heads(row_ptr, heads):
    """Segmented-scan SpMV, step 2: flag the first non-zero of every non-empty row (one segment per row)."""
    r = cuda.grid(1)
    if r < row_ptr.size - 1 and row_ptr[r] < row_ptr[r + 1]:
        heads[row_ptr[r]] = 1


@cuda.jit
def segmented_scan_block(values, heads, out, seen, block_values, block_heads):
    """Inclusive segmented scan of each block's ``blockDim.x`` values: sums restart at every head flag.

    Hillis-Steele on pairs (flag, value) with the operator
    ``(f1, v1) + (f2, v2) = (f1 or f2, v2 if f2 else v1 + v2)``, which is associative, so every
    scan algorithm works on it. ``seen[i]`` = whether a head flag occurs in the block at or before
    ``i``; the last thread stores the block's (flag, value) for the next level.
    """
    sv = cuda.shared.array((2, MAX_THREADS), float32)
    sf = cuda.shared.array((2, MAX_THREADS), int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sv[0, tid] = values[i] if i < values.size else float32(0)
    sf[0, tid] = heads[i] if i < values.size else 0
    cuda.syncthreads()  # RAW: every pair is in shared memory before step 1 reads it
    src = 0
    offset = 1
    while offset < cuda.blockDim.x:
        f = sf[src, tid]
        v = sv[src, tid]
        if tid >= offset:
            if f == 0:
                v += sv[src, tid - offset]
            f |= sf[src, tid - offset]
        sv[1 - src, tid] = v
        sf[1 - src, tid] = f
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    if i < values.size:
        out[i] = sv[src, tid]
        seen[i] = sf[src, tid]
    if tid == cuda.blockDim.x - 1:
        block_values[cuda.blockIdx.x] = sv[src, tid]
        block_heads[cuda.blockIdx.x] = sf[src, tid]


@cuda.jit
def segmented_propagate(out, seen, carry, per_block):
    """Add the segmented carry of the blocks before to the elements before their block's first head flag."""
    i = cuda.grid(1)
    if i < out.size:
        b = i // per_block
        if b > 0 and seen[i] == 0:
            out[i] += carry[b - 1]


@cuda.jit
def spmv_gather_row_ends(row_ptr, scanned, y):
    """Segmented-scan SpMV, step 4: row ``r``'s sum is the scan at its last non-zero; an empty row gets 0.

    (The slide scans backwards and reads each row's first non-zero, ``row_ptr[r]``; scanning forwards
    and reading the last one is the same idea. An empty row has no non-zero of its own: reading
    ``scanned[row_ptr[r]]`` for it would return the next row's sum.)
    """
    r = cuda.grid(1)
    if r < y.size:
        start = row_ptr[r]
        end = row_ptr[r + 1]
        y[r] = scanned[end - 1] if end > start else float32(0)


@cuda.jit(device=True)
def merge_path_search(diagonal, ends, first, nnz_base, a_len, b_len):
    """How many row ends the first ``diagonal`` merge items hold (a binary search along a diagonal).

    Merge the list of row ends (``ends[first + 0 .. first + a_len)``, row ``i`` ends where row ``i+1``
    starts) with the list of non-zero indices ``nnz_base + 0 .. b_len - 1``, row ends first on ties.
    Walking that merged list, a thread finishes a row exactly when it meets the row's end. Any split
    of the merged list into equal pieces gives every thread the same amount of work (rows + non-zeros),
    however long or empty the rows are (Merrill & Garland, 2016, the same authors as the look-back).
    """
    lo = max(0, diagonal - b_len)
    hi = min(diagonal, a_len)
    while lo < hi:
        mid = (lo + hi) >> 1
        if ends[first + mid] <= nnz_base + diagonal - mid - 1:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit
def spmv_merge_partition(row_ptr, nnz, coords):
    """Merge-based SpMV, step 1: where tile ``t`` starts on the merge path: ``coords[t] = (rows, non-zeros)``."""
    t = cuda.grid(1)
    tiles = coords.shape[0]
    if t < tiles:
        n_rows = row_ptr.size - 1
        diagonal = min(t * MERGE_TILE, n_rows + nnz)
        i = merge_path_search(diagonal, row_ptr, 1, 0, n_rows, nnz)
        coords[t, 0] = i
        coords[t, 1] = diagonal - i


@cuda.jit(device=True)
def merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1):
    """Merge-based SpMV: the block stages its tile in shared memory (the caller synchronises after it).

    ``s_rows[k]`` = the start of row ``i0 + k`` for ``k = 0 .. i1 - i0 + 1`` (row ``r`` ends where row
    ``r + 1`` starts; past the last row, ``nnz``), and ``s_prod[k]`` = ``values[j0 + k] * x[col_idx[j0 + k]]``
    for the tile's non-zeros. Thread ``t`` takes items ``t``, ``t + MERGE_THREADS``, ...: a warp's loads
    are coalesced, and the fixed trip count lets the compiler unroll both loops.
    """
    tid = cuda.threadIdx.x
    n_rows = row_ptr.size - 1
    nnz = values.size
    for m in range(MERGE_ITEMS + 1):
        k = tid + m * MERGE_THREADS
        if k < i1 - i0 + 2:
            r = i0 + k
            s_rows[k] = row_ptr[r] if r <= n_rows else nnz
    for m in range(MERGE_ITEMS):
        k = tid + m * MERGE_THREADS
        if k < j1 - j0:
            s_prod[k] = values[j0 + k] * x[col_idx[j0 + k]]


@cuda.jit
def spmv_merge(row_ptr, col_idx, values, x, y, coords):
    """Merge-based SpMV, step 2: each block takes ``MERGE_TILE`` merge items (row ends + non-zeros).

    The block stages its products ``values[k] * x[col_idx[k]]`` (coalesced) and its rows' starts in
    shared memory; each thread finds its first item by :func:`merge_path_search` there and walks
    ``MERGE_ITEMS`` items: a non-zero adds its product, a row end writes the row's sum. A row that a
    thread saw whole is stored; a row split between threads (or tiles) is added with an atomic, so
    ``y`` must start at zero.
    """
    s_rows = cuda.shared.array(MERGE_ROWS, int32)
    s_prod = cuda.shared.array(MERGE_TILE, float32)
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i0 = coords[b, 0]
    j0 = coords[b, 1]
    i1 = coords[b + 1, 0]
    j1 = coords[b + 1, 1]
    merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1)
    cuda.syncthreads()  # RAW: the tile's products and row starts are in shared memory before the walk
    length = (i1 - i0) + (j1 - j0)
    d = min(tid * MERGE_ITEMS, length)
    ti = merge_path_search(d, s_rows, 1, j0, i1 - i0, j1 - j0)
    i = i0 + ti
    j = j0 + d - ti
    whole = s_rows[ti] >= j  # this thread sees the current row from its start
    touched = False
    acc = float32(0)
    step = 0
    while step < MERGE_ITEMS and d + step < length:
        if j < s_rows[i - i0 + 1]:  # the next merge item is a non-zero of row i
            acc += s_prod[j - j0]
            j += 1
            touched = True
        else:  # the next merge item is the end of row i
            if whole:
                y[i] = acc
            else:
                cuda.atomic.add(y, i, acc)
            i += 1
            acc = float32(0)
            whole = True
            touched = False
        step += 1
    if touched:  # a row continues in the next thread: add this part
        cuda.atomic.add(y, i, acc)


@cuda.jit
def spmv_merge_combined(row_ptr, col_idx, values, x, y, coords):
    """Merge-based SpMV whose block combines the partial sums of a row before writing it.

    As :func:`spmv_merge`, but a row split between threads costs no atomic: each thread keeps its
    carry-out (the row it stops in, and that row's partial sum), the block runs an inclusive
    segmented scan of the carry-outs keyed by row (Hillis-Steele in shared memory; row ids never
    decrease along the block, so the keyed sum is associative), and thread ``t`` adds thread
    ``t - 1``'s scanned carry to the first row it ends. Only a row that starts in an earlier tile is
    added with an atomic, and the block adds its own carry-out with one: at most two atomics per
    block, however long the rows (Merrill & Garland, 2016). ``y`` must start at zero.
    """
    s_rows = cuda.shared.array(MERGE_ROWS, int32)
    s_prod = cuda.shared.array(MERGE_TILE, float32)
    s_key = cuda.shared.array((2, MERGE_THREADS), int32)
    s_val = cuda.shared.array((2, MERGE_THREADS), float32)
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    n_rows = y.size
    i0 = coords[b, 0]
    j0 = coords[b, 1]
    i1 = coords[b + 1, 0]
    j1 = coords[b + 1, 1]
    merge_stage_tile(row_ptr, col_idx, values, x, s_rows, s_prod, i0, i1, j0, j1)
    cuda.syncthreads()  # RAW: the tile's products and row starts are in shared memory before the walk
    length = (i1 - i0) + (j1 - j0)
    d = min(tid * MERGE_ITEMS, length)
    ti = merge_path_search(d, s_rows, 1, j0, i1 - i0, j1 - j0)
    i = i0 + ti
    j = j0 + d - ti
    # walk 1: rows that end in this thread, except the first, are complete; the first waits for the carry
    first_row = -1
    first_val = float32(0)
    acc = float32(0)
    step = 0
    while step < MERGE_ITEMS and d + step < length:
        if j < s_rows[i - i0 + 1]:  # a non-zero of row i
            acc += s_prod[j - j0]
            j += 1
        else:  # the end of row i
            if first_row < 0:
                first_row = i
                first_val = acc
            else:  # started in this thread (only the first row can start before it): complete
                y[i] = acc
            i += 1
            acc = float32(0)
        step += 1
    s_key[0, tid] = i  # carry-out: the row this thread stops in, and its partial sum
    s_val[0, tid] = acc
    cuda.syncthreads()  # RAW: every carry-out is in shared memory before the scan reads it
    src = 0
    offset = 1
    while offset < MERGE_THREADS:
        key = s_key[src, tid]
        v = s_val[src, tid]
        if tid >= offset and s_key[src, tid - offset] == key:
            v += s_val[src, tid - offset]
        s_key[1 - src, tid] = key
        s_val[1 - src, tid] = v
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    if first_row >= 0:
        v = first_val
        if tid > 0 and s_key[src, tid - 1] == first_row:
            v += s_val[src, tid - 1]
        if s_rows[first_row - i0] < j0:  # the row started in an earlier tile, which added its part
            cuda.atomic.add(y, first_row, v)
        else:
            y[first_row] = v
    if tid == MERGE_THREADS - 1:  # the block's carry-out: a row that continues in the next tile
        key = s_key[src, tid]
        if key < n_rows and s_rows[key - i0] < j1:
            cuda.atomic.add(y, key, s_val[src, tid])


@cuda.jit
def fill_zero_f32(y):
    """``y[:] = 0`` (float32) on the device."""
    i = cuda.grid(1)
    if i < y.size:
        y[i] = float32(0)


class SpMV:
    """``y = A @ x`` for a CSR matrix with one of the chapter's kernels, planned once (buffers allocated).

    Args:
        a: a :class:`CSR` matrix (or ``(row_ptr, col_idx, values, n_cols)``).
        x: float32 vector of ``n_cols`` values.
        method: ``"scalar"``, ``"warp_per_row"`` (GPU only), ``"segmented_scan"`` or ``"merge"``.
        threads: threads per block of the scalar, warp-per-row and segmented-scan kernels.

    Raises:
        ArrayArgumentError: an invalid CSR matrix (e.g. ``row_ptr`` without its last entry) or ``x`` of the wrong size.
    """

    def __init__(self, a, x, method: str = "merge", threads: int | None = None) -> None:
        if not isinstance(a, CSR):
            try:
                row_ptr, col_idx, values, n_cols = a
            except (TypeError, ValueError):
                raise ArgumentError("a must be a CSR matrix or a tuple (row_ptr, col_idx, values, n_cols)") from None
            a = CSR(row_ptr, col_idx, values, validate.integer(n_cols, "n_cols", minimum=0))
        check_csr(a.row_ptr, a.col_idx, a.values, a.n_cols)
        validate.array(x, "x", dtype=np.float32, shape=(a.n_cols,))
        self.method = validate.choice(method, "method", tuple(SPMV_METHODS))
        needs = SPMV_METHODS[self.method][1]
        if needs:
            require_gpu(f"the {SPMV_METHODS[self.method][0]} SpMV kernel", needs, "ch10_spmv")
        self.a = a
        self.threads = _threads_for("warp_shuffle" if self.method == "warp_per_row" else "hillis_steele", threads)
        self.n_rows, self.nnz = a.n_rows, a.nnz
        self.d_row_ptr, self.d_col, self.d_val = (as_device(a.row_ptr), as_device(a.col_idx), as_device(a.values))
        self.d_x = as_device(x)
        self.y = cuda.device_array(max(self.n_rows, 1), dtype=np.float32)[:self.n_rows]
        self.steps: list[Launch] = []
        if self.n_rows == 0:
            return
        t = self.threads
        row_blocks = -(-self.n_rows // t)
        args = (self.d_row_ptr, self.d_col, self.d_val, self.d_x, self.y)
        if self.method == "scalar":
            self.steps.append(Launch("spmv_csr_scalar", spmv_csr_scalar, row_blocks, t, args))
        elif self.method == "warp_per_row":
            self.steps.append(Launch("spmv_csr_warp_per_row", spmv_csr_warp_per_row,
                                     -(-self.n_rows * WARP // t), t, args))
        elif self.method in ("merge", "merge_combined"):
            tiles = -(-(self.n_rows + self.nnz) // MERGE_TILE)
            coords = cuda.device_array((tiles + 1, 2), dtype=np.int32)
            kernel = spmv_merge if self.method == "merge" else spmv_merge_combined
            self.steps += [
                Launch("fill_zero_f32", fill_zero_f32, row_blocks, t, (self.y,)),
                Launch("spmv_merge_partition", spmv_merge_partition, -(-(tiles + 1) // t), t,
                       (self.d_row_ptr, self.nnz, coords)),
                Launch("spmv_" + self.method, kernel, tiles, MERGE_THREADS, args + (coords,)),
            ]
        else:
            self._plan_segmented(t, row_blocks)

    def _plan_segmented(self, t: int, row_blocks: int) -> None:
        if self.nnz == 0:
            self.steps.append(Launch("fill_zero_f32", fill_zero_f32, row_blocks, t, (self.y,)))
            return
        products = cuda.device_array(self.nnz, dtype=np.float32)
        heads = cuda.device_array(self.nnz, dtype=np.int32)
        nz_blocks = -(-self.nnz // t)
        self.steps += [Launch("spmv_products", spmv_products, nz_blocks, t, (self.d_col, self.d_val, self.d_x,
                                                                           products, heads)),
                       Launch("spmv_mark_heads", spmv_mark_heads, row_blocks, t, (self.d_row_ptr, heads))]
        self._plan_segmented_scan(products, heads, self.nnz, t)
        self.steps.append(Launch("spmv_gather_row_ends", spmv_gather_row_ends, row_blocks, t,
                                 (self.d_row_ptr, products, self.y)))

    def _plan_segmented_scan(self, vals, heads, n: int, t: int) -> None:
        """In place: ``vals`` becomes its segmented inclusive scan (recursively over the blocks' carries)."""
        blocks = -(-n // t)
        seen = cuda.device_array(n, dtype=np.int32)
        bvals = cuda.device_array(blocks, dtype=np.float32)
        bheads = cuda.device_array(blocks, dtype=np.int32)
        self.steps.append(Launch("segmented_scan_block", segmented_scan_block, blocks, t,
                                 (vals, heads, vals, seen, bvals, bheads)))
        if blocks > 1:
            self._plan_segmented_scan(bvals, bheads, blocks, t)
            self.steps.append(Launch("segmented_propagate", segmented_propagate, blocks, t, (vals, seen, bvals, t)))

    @property
    def nbytes(self) -> int:
        """Bytes an SpMV must move (:func:`spmv_bytes`)."""
        return spmv_bytes(self.n_rows, self.a.n_cols, self.nnz)

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous)."""
        for step in self.steps:
            step()

    def result(self) -> np.ndarray:
        """``y`` of the last launch, on the host."""
        if self.n_rows == 0:
            return np.zeros(0, np.float32)
        return self.y.copy_to_host()

    def __call__(self) -> np.ndarray:
        self.launch()
        return self.result()


def spmv(a, x, method: str = "merge", threads: int | None = None) -> np.ndarray:
    """``A @ x`` for a CSR matrix ``a`` and a float32 vector ``x`` with one of the chapter's kernels."""
    return SpMV(a, x, method, threads)()
