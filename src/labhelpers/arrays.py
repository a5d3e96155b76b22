"""Checking and moving the arrays kernels receive.

Numba's own messages for a wrong argument come from deep inside its type inference;
:func:`check_array` rejects such arguments first, with a message that says what to
change (``np.ascontiguousarray``, ``.astype(np.float32)``...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import backend
from .errors import ArrayArgumentError


def _is_device_array(a: Any) -> bool:
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


def check_array(
    a: Any,
    name: str,
    *,
    dtype: Any | None = None,
    ndim: int | None = None,
    shape: tuple[int, ...] | None = None,
    contiguous: bool = True,
) -> None:
    """Raise :class:`ArrayArgumentError` if ``a`` is not the array a kernel expects.

    Args:
        a: a NumPy array, a Numba device array or a CuPy array.
        name: the argument's name, used in the message.
        dtype: required dtype, e.g. ``np.float32``.
        ndim: required number of dimensions.
        shape: required shape.
        contiguous: require C-contiguous memory (kernels index it as flat rows).
    """
    # The simulator's device arrays have no __cuda_array_interface__ but do have copy_to_host.
    if not (isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__") or hasattr(a, "copy_to_host")):
        raise ArrayArgumentError(
            f"{name} must be an array (NumPy, CuPy or a Numba device array), got {type(a).__name__}: "
            f"wrap it with np.asarray({name})."
        )
    if dtype is not None and np.dtype(a.dtype) != np.dtype(dtype):
        raise ArrayArgumentError(
            f"{name} has dtype {np.dtype(a.dtype)}, but this kernel expects {np.dtype(dtype)}: "
            f"pass {name}.astype(np.{np.dtype(dtype).name})."
        )
    if ndim is not None and a.ndim != ndim:
        raise ArrayArgumentError(f"{name} must have {ndim} dimension(s), got shape {tuple(a.shape)}.")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ArrayArgumentError(f"{name} must have shape {tuple(shape)}, got {tuple(a.shape)}.")
    if contiguous and not _c_contiguous(a):
        raise ArrayArgumentError(
            f"{name} is not C-contiguous (a transposed or strided view?): pass "
            f"np.ascontiguousarray({name}) (or cupy.ascontiguousarray) instead."
        )


def _c_contiguous(a: Any) -> bool:
    if isinstance(a, np.ndarray):
        return bool(a.flags.c_contiguous)
    flags = getattr(a, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if hasattr(a, "is_c_contiguous"):
        return bool(a.is_c_contiguous())
    return True


def to_device(a: np.ndarray):
    """Copy a host array to the device (a Numba device array; a plain copy in the simulator)."""
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(a))


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
    from numba import cuda

    return cuda.device_array(a.shape, dtype=a.dtype)


def synchronize() -> None:
    """Wait for all work queued on the device (a no-op in the simulator)."""
    if backend.is_gpu():
        from numba import cuda

        cuda.synchronize()
