"""CuPy on a GPU, NumPy without one: ``from labhelpers.xp import xp``.

Library calls that the chapters use as yardsticks (``xp.sum``, ``xp.matmul``,
``xp.asarray``) work on both. :data:`HAS_CUPY` tells which one you got, so a plot
never calls a NumPy timing a CuPy one.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from . import backend


def _load() -> tuple[ModuleType, bool]:
    if backend.is_simulator():
        return np, False
    try:
        import cupy

        cupy.zeros(1)  # fails early if CuPy was built for another CUDA version
        return cupy, True
    except Exception:
        return np, False


xp, HAS_CUPY = _load()


def asnumpy(a) -> np.ndarray:
    """A NumPy copy of a CuPy or NumPy array."""
    return a.get() if HAS_CUPY and hasattr(a, "get") else np.asarray(a)


def synchronize() -> None:
    """Wait for queued CuPy work (no-op with NumPy)."""
    if HAS_CUPY:
        xp.cuda.Device().synchronize()
