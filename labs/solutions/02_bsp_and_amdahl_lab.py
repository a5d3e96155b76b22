"""Solutions of the lab "BSP and Amdahl" (labs/02_bsp_and_amdahl_lab.ipynb).

Each function keeps every line of its skeleton and only adds lines (tests/test_labs.py checks it).
"""

import labhelpers  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
import numpy as np
from numba import cuda


def amdahl(s, n):
    """Amdahl's speedup for serial fraction s on n processors (numbers or NumPy arrays)."""
    s = np.asarray(s, dtype=float)
    n = np.asarray(n, dtype=float)
    speedup = np.full(np.broadcast(s, n).shape, np.nan)
    # FILL ME IN (roughly 1 line): speedup = ...
    speedup = 1.0 / (s + (1.0 - s) / n)
    return speedup


def processors_needed(s, target):
    """Processors Amdahl's law needs for speedup `target` at serial fraction `s` (inf when out of reach)."""
    n = float("nan")
    # FILL ME IN (roughly 3 lines): out of reach -> return inf; otherwise solve 1 / (s + (1 - s) / n) = target
    if s * target >= 1:  # target >= 1/s, written without dividing by s (s may be 0)
        return float("inf")
    n = (1 - s) / (1 / target - s)
    return n


def fit_serial(n, speedup):
    """Least-squares serial fraction of Amdahl's law for measured speedups on n processors, clipped to [0, 1]."""
    n = np.asarray(n, dtype=float)
    speedup = np.asarray(speedup, dtype=float)
    s = float("nan")
    # FILL ME IN (roughly 3 lines): a and b as above, s = sum(a b) / sum(a a), then clip to [0, 1]
    a = 1 - 1 / n
    b = 1 / speedup - 1 / n
    s = min(1.0, max(0.0, float(np.sum(a * b) / np.sum(a * a))))
    return s


@cuda.jit
def grid_stride_update(x, a, b, reps):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    # FILL ME IN (roughly 5 lines): each i = start, start + stride, ... below x.size: x[i] gets reps updates
    for i in range(start, x.size, stride):
        v = x[i]
        for _ in range(reps):
            v = a * v + b
        x[i] = v


def choose_blocks_per_sm():
    """Blocks of 256 threads per SM for grid_stride_update. Prediction: ..."""
    # 8 blocks of 256 fill an SM of 2048 threads; 16 give each SM a second block ready when one finishes.
    return 16


def processors_for(s, target):
    """Processors Amdahl's law needs for speedup `target` at serial fraction `s`: find the bug (add lines)."""
    if s * target >= 1:  # the speedup never reaches 1 / s: out of reach
        return float("inf")
    n = (1 - s) / (1 / target - s)
    return n
