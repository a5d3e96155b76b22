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
    if not backend.cupy_usable():  # the simulator, no CuPy, or a CuPy built for another CUDA version
        return np, False
    import cupy  # optional: the GPU extra

    return cupy, True


xp, HAS_CUPY = _load()


def asnumpy(a) -> np.ndarray:
    """A NumPy copy of a CuPy or NumPy array."""
    return a.get() if HAS_CUPY and hasattr(a, "get") else np.asarray(a)


def synchronize() -> None:
    """Wait for queued CuPy work (no-op with NumPy)."""
    if HAS_CUPY:
        xp.cuda.Device().synchronize()
