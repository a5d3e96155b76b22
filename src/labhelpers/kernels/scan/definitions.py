"""Scan's definitions: constants, the operator, the sequential loop, the NumPy specification, and
kernels written once with the type name ``T`` and compiled per element type (:class:`TypedKernel`).
"""

from __future__ import annotations

import types as pytypes
import warnings
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, int32, uint32

from ... import validate
from ...errors import ArgumentError, ArrayArgumentError
from ...launch import tiles_for

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
        blocks = tiles_for(x.size, per_block)
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
