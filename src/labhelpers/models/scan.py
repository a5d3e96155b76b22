"""Scans step by step, without a GPU: which elements each step combines, and what that costs.

* :func:`hillis_steele_steps` and :func:`blelloch_steps` replay the two in-block algorithms on a small
  array and record every step: the pairs combined (``(src, dst)``: ``dst`` gets ``src + dst``; in
  Blelloch's down-sweep, ``swap`` pairs also pass a value left), and the array after the step. With
  ``seed_bounds=True`` they use the loop bounds as printed in the lecture slides, which stop one step
  early (the chapter's pitfall). :func:`work_depth` counts additions and steps.
* :func:`blelloch_bank_conflicts`: the worst shared-memory bank conflict of every level of Blelloch's
  tree, with and without padding.
* :func:`quicksort_trace`: quicksort by split-and-segment, round by round, with the comparison of the
  slides (``>`` then ``>=``) or a three-way split that always makes progress.

The widget of the chapter draws these steps (:func:`labhelpers.figures.scan.draw_scan_step`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import validate
from ..errors import ArgumentError

#: Shared-memory banks (4-byte words).
BANKS = 32
ALGORITHMS = ("hillis_steele", "blelloch")


@dataclass(frozen=True)
class ScanStep:
    """One step of an in-block scan.

    Attributes:
        label: what the step does ("input", "offset 2", "up-sweep, stride 4", "clear the root"...).
        phase: "input", "step" (Hillis-Steele), "up", "clear", "down" or "output".
        pairs: ``(src, dst)``: ``dst`` becomes ``src + dst`` (Hillis-Steele, up-sweep); in the
            down-sweep ``dst`` (the right child) becomes ``src + dst`` and ``src`` (the left child)
            takes ``dst``'s old value.
        values: the array after the step.
        adds: additions in this step.
    """

    label: str
    phase: str
    pairs: tuple[tuple[int, int], ...]
    values: tuple[int, ...]
    adds: int

    @property
    def active(self) -> int:
        """Threads (pairs) at work in this step."""
        return len(self.pairs)


def _check_power_of_two(n: int, what: str) -> int:
    n = validate.integer(n, what, minimum=1)
    if n & (n - 1):
        raise ArgumentError(f"{what} must be a power of two for the step model (the trees halve), got {n}: "
                            "pad the input with zeros up to the next power of two")
    return n


def _values(values) -> np.ndarray:
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0:
        raise ArgumentError(f"values must be a non-empty 1-D sequence of numbers, got shape {a.shape}")
    _check_power_of_two(a.size, "the number of values")
    return a.astype(np.int64)


def hillis_steele_steps(values, seed_bounds: bool = False) -> list[ScanStep]:
    """Hillis-Steele (inclusive) on ``values`` (a power of two of them): step ``d`` adds element ``k - 2**(d-1)``
    into element ``k`` for every ``k >= 2**(d-1)``, for ``d = 1 .. log2 n``.

    ``seed_bounds=True``: ``for d = 1; d < log2 n`` as on the slide, one step short.
    """
    x = _values(values)
    n = x.size
    steps = [ScanStep("input", "input", (), tuple(int(v) for v in x), 0)]
    levels = int(math.log2(n))
    last = levels - 1 if seed_bounds else levels
    for d in range(1, last + 1):
        offset = 2 ** (d - 1)
        pairs = tuple((k - offset, k) for k in range(offset, n))
        new = x.copy()
        new[offset:] = x[:-offset] + x[offset:]  # reads the old values: double buffering
        x = new
        steps.append(ScanStep(f"step {d}: offset {offset}", "step", pairs, tuple(int(v) for v in x), len(pairs)))
    return steps


def blelloch_steps(values, seed_bounds: bool = False) -> list[ScanStep]:
    """Blelloch (exclusive) on ``values`` (a power of two of them): up-sweep, clear the root, down-sweep.

    Up-sweep level ``d = 0 .. log2(n) - 1``: for ``k = 0, 2**(d+1), ...``: element ``k + 2**(d+1) - 1``
    adds element ``k + 2**d - 1``. Then the last element is replaced by 0. Down-sweep
    ``d = log2(n) - 1 .. 0``: the left child ``k + 2**d - 1`` takes the right child's value, the right
    child ``k + 2**(d+1) - 1`` adds the left child's old value.
    ``seed_bounds=True``: the up-sweep runs ``d < log2(n) - 1`` as on the slide: the top level is lost.
    """
    x = _values(values)
    n = x.size
    levels = int(math.log2(n))
    steps = [ScanStep("input", "input", (), tuple(int(v) for v in x), 0)]
    top = levels - 1 if seed_bounds else levels
    for d in range(top):
        stride = 2 ** (d + 1)
        pairs = tuple((k + stride // 2 - 1, k + stride - 1) for k in range(0, n, stride))
        for a, b in pairs:
            x[b] += x[a]
        steps.append(ScanStep(f"up-sweep: stride {stride}", "up", pairs, tuple(int(v) for v in x), len(pairs)))
    x[n - 1] = 0
    steps.append(ScanStep("clear the root", "clear", (), tuple(int(v) for v in x), 0))
    for d in range(levels - 1, -1, -1):
        stride = 2 ** (d + 1)
        pairs = tuple((k + stride // 2 - 1, k + stride - 1) for k in range(0, n, stride))
        for a, b in pairs:
            x[a], x[b] = x[b], x[a] + x[b]
        steps.append(ScanStep(f"down-sweep: stride {stride}", "down", pairs, tuple(int(v) for v in x), len(pairs)))
    return steps


def steps_of(algorithm: str, values, seed_bounds: bool = False) -> list[ScanStep]:
    """:func:`hillis_steele_steps` or :func:`blelloch_steps` by name."""
    algorithm = validate.choice(algorithm, "algorithm", ALGORITHMS)
    return (hillis_steele_steps if algorithm == "hillis_steele" else blelloch_steps)(values, seed_bounds)


def work_depth(algorithm: str, n: int) -> dict:
    """Additions (work) and steps (depth) of a scan of ``n`` (a power of two) values.

    Sequential: ``n - 1`` additions in ``n - 1`` dependent steps. Hillis-Steele:
    ``n log2 n - (n - 1)`` additions in ``log2 n`` steps. Blelloch: ``2 (n - 1)`` additions in
    ``2 log2 n`` steps (plus the clearing of the root).
    """
    n = _check_power_of_two(n, "n")
    log = int(math.log2(n))
    if algorithm == "sequential":
        return {"algorithm": algorithm, "n": n, "adds": n - 1, "steps": n - 1}
    algorithm = validate.choice(algorithm, "algorithm", ALGORITHMS + ("sequential",))
    if algorithm == "hillis_steele":
        return {"algorithm": algorithm, "n": n, "adds": n * log - (n - 1), "steps": log}
    return {"algorithm": algorithm, "n": n, "adds": 2 * (n - 1), "steps": 2 * log}


def _conflict(words) -> int:
    """Worst bank conflict of one warp's access: the most distinct words that share a bank (1 = none)."""
    by_bank: dict[int, set] = {}
    for w in words:
        by_bank.setdefault(w % BANKS, set()).add(w)
    return max((len(s) for s in by_bank.values()), default=0)


def blelloch_bank_conflicts(threads: int = 256, padded: bool = True) -> list[dict]:
    """The worst bank conflict, per level of Blelloch's tree in a block of ``threads`` threads (``2 * threads`` values).

    For each level the threads ``tid < d`` read words ``a = offset (2 tid + 1) - 1`` and
    ``b = a + offset``; a warp's access takes as many passes as the most distinct words in one bank.
    Padding (word ``i`` stored at ``i + i // 32``) breaks the power-of-two strides.
    """
    threads = _check_power_of_two(threads, "threads")
    n = 2 * threads
    pad = (lambda i: i + i // BANKS) if padded else (lambda i: i)
    rows = []
    offset, d = 1, n // 2
    ups = []
    while d > 0:
        ups.append((offset, d))
        offset, d = offset * 2, d // 2
    for phase, levels in (("up", ups), ("down", ups[::-1])):
        for offset, d in levels:
            worst = 0
            for warp in range(0, min(d, threads), 32):
                lanes = range(warp, min(warp + 32, d))
                for which in (0, 1):
                    words = [pad(offset * (2 * t + 1) - 1 + which * offset) for t in lanes]
                    worst = max(worst, _conflict(words))
            rows.append({"phase": phase, "stride": 2 * offset, "active_threads": d, "worst_conflict": worst,
                         "padded": padded})
    return rows


# --- quicksort by split-and-segment -----------------------------------------------------------------

@dataclass
class QuicksortRound:
    """One round: each segment's pivot (its first element), the flags, and the segments after the split."""

    compare: str
    before: list
    pivots: list
    flags: list
    segments: list = field(default_factory=list)

    @property
    def progress(self) -> bool:
        """Whether the round split at least one segment (if not, quicksort is stuck for good)."""
        return self.segments != self.before


COMPARES = {">": lambda v, p: v > p, ">=": lambda v, p: v >= p}


def split_and_segment(segments: list[list], compare: str) -> QuicksortRound:
    """One round of quicksort by split: in every segment, flag ``value (compare) pivot`` (pivot = first
    element), then split stably, false first: each segment becomes one or two."""
    test = COMPARES[validate.choice(compare, "compare", tuple(COMPARES))]
    pivots, flags, out = [], [], []
    for seg in segments:
        p = seg[0]
        f = [bool(test(v, p)) for v in seg]
        pivots.append(p)
        flags.append(f)
        out += [part for part in ([v for v, b in zip(seg, f) if not b], [v for v, b in zip(seg, f) if b]) if part]
    return QuicksortRound(compare, [list(s) for s in segments], pivots, flags, out)


def three_way_round(segments: list[list]) -> QuicksortRound:
    """A round that always makes progress: split every segment into ``< pivot``, ``== pivot``, ``> pivot``.

    The middle part is in its final place; the two others are strictly smaller than the segment.
    (Two splits on a GPU: first by ``>= pivot``, then the first part by ``> pivot``... or one
    three-way split with two scans.)
    """
    pivots, flags, out = [], [], []
    for seg in segments:
        p = seg[0]
        pivots.append(p)
        flags.append(tuple("<" if v < p else ("=" if v == p else ">") for v in seg))
        out += [part for part in ([v for v in seg if v < p], [v for v in seg if v == p], [v for v in seg if v > p])
                if part]
    return QuicksortRound("<, ==, >", [list(s) for s in segments], pivots, flags, out)


def _done(segments: list[list]) -> bool:
    return all(len(set(s)) <= 1 for s in segments)


def quicksort_trace(values, compares=(">", ">="), max_rounds: int = 64) -> list[QuicksortRound]:
    """Quicksort by split-and-segment, round by round.

    ``compares``: the comparison of each round (the slides use ``>`` then ``>=``); the last one is
    repeated. ``compares="three_way"``: :func:`three_way_round` every round. Stops when every segment
    holds equal values, or after a round without progress (then the last round's ``progress`` is False).
    """
    segments = [list(values)]
    rounds: list[QuicksortRound] = []
    for r in range(max_rounds):
        if _done(segments):
            break
        if compares == "three_way":
            rnd = three_way_round(segments)
        else:
            rnd = split_and_segment(segments, compares[min(r, len(compares) - 1)])
        rounds.append(rnd)
        if not rnd.progress:
            break
        segments = rnd.segments
    return rounds
