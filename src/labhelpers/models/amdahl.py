"""Amdahl's and Gustafson's laws, and fitting a serial fraction to measured speedups.

With a serial fraction ``s`` of the work (parallel fraction ``p = 1 - s``) on ``n``
processors:

* Amdahl (fixed problem size): ``S(n) = 1 / (s + p / n)``, bounded by ``1 / s``.
* Gustafson (problem grows with ``n``, fixed time): ``S(n) = s + p * n``.
"""

from __future__ import annotations

import numpy as np


def _check_fraction(s, name: str = "serial fraction") -> None:
    if np.any(np.asarray(s) < 0) or np.any(np.asarray(s) > 1):
        raise ValueError(f"{name} must lie in [0, 1], got {s}")


def amdahl_speedup(serial_fraction, n):
    """Amdahl's speedup ``1 / (s + (1 - s) / n)`` for serial fraction ``s`` on ``n`` processors."""
    _check_fraction(serial_fraction)
    n = np.asarray(n, dtype=float)
    if np.any(n < 1):
        raise ValueError(f"the number of processors must be at least 1, got {n}")
    s = np.asarray(serial_fraction, dtype=float)
    return 1.0 / (s + (1.0 - s) / n)


def gustafson_speedup(serial_fraction, n):
    """Gustafson's scaled speedup ``s + (1 - s) * n`` for serial fraction ``s`` on ``n`` processors."""
    _check_fraction(serial_fraction)
    n = np.asarray(n, dtype=float)
    if np.any(n < 1):
        raise ValueError(f"the number of processors must be at least 1, got {n}")
    s = np.asarray(serial_fraction, dtype=float)
    return s + (1.0 - s) * n


def karp_flatt(speedup, n):
    """The experimentally determined serial fraction ``(1/S - 1/n) / (1 - 1/n)`` (Karp and Flatt, 1990)."""
    speedup = np.asarray(speedup, dtype=float)
    n = np.asarray(n, dtype=float)
    if np.any(n <= 1):
        raise ValueError("the Karp-Flatt metric needs n > 1 processors")
    return (1.0 / speedup - 1.0 / n) / (1.0 - 1.0 / n)


def fit_serial_fraction(n, speedup) -> float:
    """Least-squares serial fraction ``s`` such that ``amdahl_speedup(s, n)`` fits the measured speedups.

    Amdahl's law is linear in ``s`` once written as ``1/S - 1/n = s (1 - 1/n)``, so the
    fit has a closed form; the result is clipped to [0, 1].
    """
    n = np.asarray(n, dtype=float)
    speedup = np.asarray(speedup, dtype=float)
    if n.shape != speedup.shape or n.size < 2:
        raise ValueError("give at least two (n, speedup) pairs of equal length")
    if np.any(speedup <= 0):
        raise ValueError("speedups must be positive")
    a = 1.0 - 1.0 / n
    b = 1.0 / speedup - 1.0 / n
    s = float(np.dot(a, b) / np.dot(a, a))
    return min(1.0, max(0.0, s))
