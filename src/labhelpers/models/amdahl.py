"""Amdahl's and Gustafson's laws, the BSP cost of a superstep, and fitting a serial fraction.

With a serial fraction ``s`` of the work (parallel fraction ``p = 1 - s``) on ``n``
processors:

* Amdahl (fixed problem size): ``S(n) = 1 / (s + p / n)``, bounded by ``1 / s``
  (Amdahl, AFIPS 1967).
* Gustafson (problem grows with ``n``, fixed time): ``S(n) = s + p * n``
  (Gustafson, *Reevaluating Amdahl's law*, CACM 1988).
* Karp-Flatt (serial fraction read back from a measured speedup):
  ``e = (1/S - 1/n) / (1 - 1/n)`` (Karp and Flatt, CACM 1990).
* BSP (Valiant, *A bridging model for parallel computation*, CACM 1990): one superstep
  costs ``w + g * h + l``: the longest local computation ``w``, ``h`` words sent or
  received by the busiest processor at ``g`` time units per word, and the barrier ``l``.

Every function accepts scalars or NumPy arrays (broadcast together) and rejects input
that has no meaning (a fraction outside [0, 1], fewer than one processor, NaN) with a
``ValueError`` that names the value.
"""

from __future__ import annotations

import numpy as np

from .. import validate


def amdahl_speedup(serial_fraction, n):
    """Amdahl's speedup ``1 / (s + (1 - s) / n)`` for serial fraction ``s`` on ``n`` processors.

    Example:
        >>> float(amdahl_speedup(0.1, 10))
        5.263157894736842
    """
    validate.numbers(serial_fraction, "serial fraction", minimum=0, maximum=1)
    n = validate.numbers(n, "the number of processors", minimum=1, allow_inf=True)
    s = np.asarray(serial_fraction, dtype=float)
    return 1.0 / (s + (1.0 - s) / n)


def gustafson_speedup(serial_fraction, n):
    """Gustafson's scaled speedup ``s + (1 - s) * n`` for serial fraction ``s`` on ``n`` processors.

    Here ``s`` is the serial share of the time measured *on the parallel machine*; the
    problem is assumed to grow with ``n`` so that the parallel part keeps every processor busy.
    """
    validate.numbers(serial_fraction, "serial fraction", minimum=0, maximum=1)
    n = validate.numbers(n, "the number of processors", minimum=1, allow_inf=True)
    s = np.asarray(serial_fraction, dtype=float)
    return s + (1.0 - s) * n


def max_speedup(serial_fraction):
    """Amdahl's bound ``1 / s``: the speedup no number of processors can exceed (``inf`` for ``s = 0``).

    Example:
        >>> float(max_speedup(0.1))  # 90 % parallel: at most 10x
        10.0
    """
    validate.numbers(serial_fraction, "serial fraction", minimum=0, maximum=1)
    s = np.asarray(serial_fraction, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), np.inf)


def processors_for_speedup(serial_fraction, target):
    """Processors Amdahl's law needs for speedup ``target``: ``(1 - s) / (1 / target - s)``.

    The result is a real number (round it up for whole processors) and ``inf`` where the
    target is at or beyond the bound ``1 / s``.

    Raises:
        ValueError: ``target`` is below 1 (one processor already gives speedup 1).
    """
    validate.numbers(serial_fraction, "serial fraction", minimum=0, maximum=1)
    target = validate.numbers(target, "the target speedup", allow_inf=True)
    if np.any(target < 1):
        raise ValueError(f"a target speedup below 1 needs no parallel machine, got {target}")
    s = np.asarray(serial_fraction, dtype=float)
    room = 1.0 / target - s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(room > 0, (1.0 - s) / np.where(room > 0, room, 1.0), np.inf)


def efficiency(speedup, n):
    """Parallel efficiency ``S / n``: 1 means every processor was fully used."""
    speedup = validate.numbers(speedup, "the speedup", allow_inf=True)
    n = validate.numbers(n, "the number of processors", minimum=1, allow_inf=True)
    return speedup / n


def karp_flatt(speedup, n):
    """The experimentally determined serial fraction ``(1/S - 1/n) / (1 - 1/n)`` (Karp and Flatt, 1990).

    For data that follow Amdahl's law exactly it returns the serial fraction at every ``n``;
    a value that *grows* with ``n`` reveals overhead that grows with the processors
    (communication, synchronisation, load imbalance), a shrinking or negative one a
    superlinear effect such as the data starting to fit in the caches.
    """
    speedup = validate.numbers(speedup, "the speedup", allow_inf=True)
    n = validate.numbers(n, "the number of processors", allow_inf=True)
    if np.any(n <= 1):
        raise ValueError("the Karp-Flatt metric needs n > 1 processors")
    if np.any(speedup <= 0):
        raise ValueError(f"speedups must be positive, got {speedup}")
    return (1.0 / speedup - 1.0 / n) / (1.0 - 1.0 / n)


def fit_serial_fraction(n, speedup) -> float:
    """Least-squares serial fraction ``s`` such that ``amdahl_speedup(s, n)`` fits the measured speedups.

    Amdahl's law is linear in ``s`` once written as ``1/S - 1/n = s (1 - 1/n)``, so the
    fit has a closed form; the result is clipped to [0, 1].

    Raises:
        ValueError: fewer than two pairs, unequal lengths, NaN, or non-positive speedups.
    """
    n = validate.numbers(n, "the number of processors", allow_inf=True)
    speedup = validate.numbers(speedup, "the speedup", allow_inf=True)
    if n.shape != speedup.shape or n.size < 2:
        raise ValueError("give at least two (n, speedup) pairs of equal length")
    if np.any(speedup <= 0):
        raise ValueError("speedups must be positive")
    if np.any(n < 1):
        raise ValueError(f"the number of processors must be at least 1, got {n}")
    a = 1.0 - 1.0 / n
    b = 1.0 / speedup - 1.0 / n
    if not np.any(a > 0):
        raise ValueError("at least one measurement needs n > 1 processors to say anything about s")
    s = float(np.dot(a, b) / np.dot(a, a))
    return min(1.0, max(0.0, s))


def bsp_superstep_cost(w, h, g, l):
    """Cost of one BSP superstep, ``w + g * h + l`` (Valiant, 1990).

    Args:
        w: the longest local computation of any processor in the superstep.
        h: the most words any one processor sends or receives (the superstep is an "h-relation").
        g: time per word when all processors communicate at once (the inverse of bandwidth per processor).
        l: the cost of the barrier that ends the superstep (on a GPU: a kernel launch, a few microseconds).

    All in the same time unit; arrays broadcast.
    """
    values = {"w": w, "h": h, "g": g, "l": l}
    for name, value in values.items():
        arr = validate.numbers(value, name, allow_inf=True)
        if np.any(arr < 0):
            raise ValueError(f"BSP cost parameter {name} cannot be negative, got {value}")
    return np.asarray(w, dtype=float) + np.asarray(g, dtype=float) * np.asarray(h, dtype=float) + np.asarray(
        l, dtype=float)


def bsp_program_cost(supersteps, g, l) -> float:
    """Total BSP cost of a program: the sum of ``w + g * h + l`` over its supersteps.

    Args:
        supersteps: a sequence of ``(w, h)`` pairs, one per superstep.
        g, l: the machine's communication gap and barrier cost.
    """
    steps = list(supersteps)
    if not steps:
        raise ValueError("a BSP program has at least one superstep")
    return float(sum(float(bsp_superstep_cost(w, h, g, l)) for w, h in steps))
