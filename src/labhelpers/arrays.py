"""Moving the arrays kernels receive: ``to_device`` (the one device-array helper) and ``to_host``.

Checking them is :func:`labhelpers.validate.array`'s job: Numba's own messages for a wrong
argument come from deep inside its type inference, so wrappers call it first, with a message
that says what to change (``np.ascontiguousarray``, ``.astype(np.float32)``...).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from . import backend
from .errors import ArrayArgumentError


def to_device(a: Any):
    """A device array for ``a``: the one device-array helper, for notebooks (``lh.to_device``) and the package's
    kernels alike.

    A NumPy array (or a list of numbers) is copied to the device, made contiguous first (a plain copy under the
    simulator); a CuPy array (or anything else with ``__cuda_array_interface__``) is wrapped as a Numba array
    without a copy; a Numba device array (or, under the simulator, its device arrays) is returned as it is.

    Raises:
        ArrayArgumentError: ``a`` is None, or not an array of numbers (e.g. a list of mixed things).
    """

    if a is None:
        raise ArrayArgumentError("to_device got None instead of an array (did a function return nothing?): pass a "
                                 "NumPy array, e.g. np.zeros(n, dtype=np.float32).")
    if hasattr(a, "copy_to_host"):  # already a Numba device array (the simulator's too)
        return a
    if backend.is_gpu() and hasattr(a, "__cuda_array_interface__"):  # CuPy: wrapped, not copied
        return cuda.as_cuda_array(a)
    host = np.ascontiguousarray(a)
    if host.dtype.kind not in "biufc":
        raise ArrayArgumentError(
            f"to_device got {type(a).__name__} that makes an array of dtype {host.dtype}: a kernel can only use "
            "numbers (and booleans). Pass a NumPy array of numbers, e.g. np.asarray(values, dtype=np.float32).")
    return cuda.to_device(host)


def to_host(a: Any) -> np.ndarray:
    """Return a NumPy array for a NumPy, CuPy or Numba device array."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if hasattr(a, "get"):
        return a.get()
    return np.asarray(a)


def device_array_like(a: Any):
    """An uninitialised device array with ``a``'s shape and dtype."""

    return cuda.device_array(a.shape, dtype=a.dtype)


def synchronize() -> None:
    """Wait for all work queued on the device (a no-op in the simulator)."""
    if backend.is_gpu():
        cuda.synchronize()
