"""Timed lab exercises (the labs' "measured" ones): the student chooses (a block size, a tile, a chunk count), the
GPU decides.

A :class:`MeasuredExercise` states what is timed, against which yardstick, and the ratio to reach.
:func:`check` then, in this order:

1. checks correctness through the harness (the ``correct`` callable: a kernel exercise's ``h.check`` or a
   lab checker), so every wrong kernel is rejected exactly as by the lab's other checks, on both backends;
2. on a GPU, times the student's choice and the yardstick **in the same run** (the ``race`` callable returns
   two :class:`~labhelpers.timing.Timing`), prints both numbers and the ratio, and raises
   :class:`~labhelpers.errors.CheckFailed` starting with :data:`BELOW_TARGET` when the ratio is short of the
   target;
3. under the simulator (or the compile backend), where nothing can be timed, prints the reference GPU's
   measurement of the same configuration (the ``reference`` callable, reading the reference set: named GPU
   and run) and one sentence saying what a GPU run would measure and the target.

The ratio is the student's rate over the yardstick's: GB/s over GB/s when both timings state their bytes
(the copy ceiling as a yardstick), else the yardstick's time over the student's (the same work done by both).
The pass/fail logic (:func:`ratio`, :func:`verdict`) is plain Python, tested with fake timings.

Example (a lab checker)::

    SAXPY_TUNED = MeasuredExercise(
        name="your block size for vector_add", target=0.7,
        measures="vector_add on 2^26 floats at your block size, in GB/s (12 bytes per element)",
        yardstick="the copy ceiling (a device-to-device copy of the same bytes)",
        reference=lambda threads: reference_text(...))

    def check_saxpy_threads(kernel, threads):
        check(SAXPY_TUNED, threads, correct=lambda: ..., race=lambda: (student_timing, copy_timing))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numba import cuda

from .. import backend
from ..errors import GPUOnlyError
from ..refdata import Reference
from ..roofline import time_copy
from ..timing import Timing
from . import answers
from . import harness as h

#: The class that starts the message of a correct choice that is too slow on the GPU.
BELOW_TARGET = "Below target"
#: The class of a choice outside what the exercise allows (e.g. 2000 threads per block).
NOT_ALLOWED = "Not an allowed choice"


@dataclass(frozen=True)
class MeasuredExercise:
    """What a measured exercise times, against what, and the ratio that passes.

    Attributes:
        name: what is being judged, e.g. ``"your block size for vector_add"``.
        measures: what a GPU run times for the student, one phrase (units included).
        yardstick: what it is compared with, measured in the same run, one phrase.
        target: the ratio (student's rate / yardstick's rate) to reach, e.g. ``0.7``.
        reference: ``reference(choice)`` -> one sentence: the reference GPU's measurement of the same
            configuration (from the reference set, naming the GPU and the run).
    """

    name: str
    measures: str
    yardstick: str
    target: float
    reference: Callable[[Any], str]

    def promise(self) -> str:
        """One sentence: what a GPU run measures, and the target."""
        return (f"On a GPU this check times {self.measures} against {self.yardstick} in the same run, and passes "
                f"when the ratio reaches {self.target:g}.")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one measured check: the two timings (None under the simulator) and the ratio."""

    passed: bool
    ratio: float | None
    student: Timing | None = None
    yardstick: Timing | None = None
    text: str = ""


def ratio(student: Timing, yardstick: Timing) -> float:
    """Student's rate over the yardstick's: GB/s over GB/s when both state bytes, else yardstick time / student time."""
    if student.nbytes is not None and yardstick.nbytes is not None:
        return student.gbps / yardstick.gbps
    return yardstick.median_ms / student.median_ms


def _rate_text(t: Timing) -> str:
    rate = f", {t.gbps:,.0f} GB/s" if t.nbytes is not None else ""
    return f"{t.median_ms:.4g} ms{rate}"


def verdict(ex: MeasuredExercise, choice: Any, student: Timing, yardstick: Timing) -> Verdict:
    """Judge two GPU timings of the same run: pass when :func:`ratio` reaches ``ex.target``."""
    r = ratio(student, yardstick)
    text = (f"Measured: {ex.name} ({choice!r}): {_rate_text(student)}; {ex.yardstick}: {_rate_text(yardstick)}; "
            f"ratio {r:.2f} (target {ex.target:g}).")
    return Verdict(passed=r >= ex.target, ratio=r, student=student, yardstick=yardstick, text=text)


def can_time() -> bool:
    """Whether a GPU is here to time on (not the simulator, not the compile backend)."""
    return backend.is_gpu()


def check(ex: MeasuredExercise, choice: Any, *, correct: Callable[[], None],
          race: Callable[[], tuple[Timing, Timing]], timeable: Callable[[], bool] | None = None,
          why_not: str = "not on this machine") -> Verdict:
    """Check correctness, then (on a GPU) time the choice against the yardstick; print what was found.

    Args:
        ex: the exercise.
        choice: the student's choice (printed, and passed to ``ex.reference``).
        correct: raises CheckFailed when the student's code is wrong (the harness); prints its own line.
        race: times the student's choice and the yardstick, in that order, in the same run (GPU only).
        timeable: whether ``race`` can run here (default :func:`can_time`); e.g. "a GPU and a second one".
        why_not: what is missing when there is a GPU but ``timeable()`` says no (printed), e.g. "one GPU here".

    Raises:
        CheckFailed: the code is wrong (the harness's class), or the ratio is below the target
            (:data:`BELOW_TARGET`, with both numbers).
    """
    correct()
    if not (timeable() if timeable is not None else can_time()):
        print(f"Reference: {ex.reference(choice)}")
        print(f"Not timed here ({'no GPU' if not can_time() else why_not}): {ex.promise()}")
        return Verdict(passed=True, ratio=None, text=ex.promise())
    student, yardstick = race()  # each timing waits for a quiet GPU when test processes share it (gpu_lock)
    result = verdict(ex, choice, student, yardstick)
    print(result.text)
    if not result.passed:
        raise h.failure(BELOW_TARGET, f"{result.text} Correct, but not fast enough: {ex.measures} reaches "
                                      f"{result.ratio:.2f} of {ex.yardstick}; try another choice (the exercise's "
                                      "hint says which way to go).")
    print(f"Passed: ratio {result.ratio:.2f} >= {ex.target:g}.")
    return result


#: Where each target comes from: the solutions' ratios on the reference GPU (``tools/measured_targets.py``).
TARGETS_FILE = Path(__file__).resolve().parents[1] / "data" / "measured_targets.json"


def _targets_record() -> dict:
    return json.loads(TARGETS_FILE.read_text())


def target_for(lab: str, unmeasured: float) -> float:
    """The target of lab ``lab``'s measured exercise: its solution's lowest measured ratio on the reference GPU less
    :func:`margin_for` (15%, or twice the runs' spread), rounded down to two digits; ``unmeasured`` while the record
    holds no measurement of that lab."""
    record = _targets_record()
    lab_record = record["labs"].get(str(lab))
    if not lab_record:
        return unmeasured
    return math.floor(min(lab_record["ratios"]) * (1 - margin_for(lab)) * 100 + 1e-9) / 100


def margin_for(lab: str) -> float:
    """The share below the lowest measured ratio that a target keeps: the record's margin (15%), or twice the
    runs' relative spread where that is larger (a wall-clock timing of copies spreads more than a kernel's)."""
    record = _targets_record()
    ratios = record["labs"][str(lab)]["ratios"]
    return max(record["margin"], 2 * (max(ratios) - min(ratios)) / min(ratios))


def target_basis(lab: str) -> str:
    """One sentence: where lab ``lab``'s target comes from."""
    record = _targets_record()
    lab_record = record["labs"].get(str(lab))
    if not lab_record:
        return f"lab {lab}: the solution is not measured yet; the target is the module's own estimate"
    ratios = lab_record["ratios"]
    return (f"lab {lab}: the solution reached {min(ratios):.3f} to {max(ratios):.3f} of {lab_record['yardstick']} in "
            f"{len(ratios)} run(s) on an {record['gpu']} ({lab_record['date']}); target {margin_for(lab):.0%} lower: "
            f"{target_for(lab, float('nan')):g}")


def reference_text(ref: Reference, what: str) -> str:
    """``what`` followed by the reference's GPU, run and date: the shape of every ``reference`` sentence."""
    run = ref.meta.get("run", "?")
    return f"{what} (reference data {ref.name!r}: {ref.gpu}, run {run}, {ref.meta.get('date', '?')})."


def allowed(value: Any, call_text: str, choices: Any) -> Any:
    """``value`` if it is in ``choices``, else CheckFailed (:data:`NOT_ALLOWED`) listing them."""
    if value in list(choices):
        return value
    raise h.failure(NOT_ALLOWED, f"{call_text} returned {value!r}: choose one of {list(choices)}.")


def choose(student: Callable[[], Any], name: str, choices: Any) -> Any:
    """Call the student's ``name()`` (no arguments) and return its answer if it is one of ``choices``.

    Raises:
        CheckFailed: not a function, not written yet, raised, a wrong type (``answers``' classes), or a value
            outside ``choices`` (:data:`NOT_ALLOWED`).
    """
    value = answers.call(student, name)
    call_text = f"{name}()"
    first = list(choices)[0]
    if isinstance(first, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(first):
            raise answers.wrong_type(value, call_text, f"a tuple of {len(first)} whole numbers, e.g. {first!r}")
        value = tuple(answers.whole_number(v, call_text) for v in value)
    else:
        value = answers.whole_number(value, call_text)
    return allowed(value, call_text, choices)


def time_copy_of(nbytes: int) -> Timing:
    """The copy yardstick: a device-to-device copy moving about ``nbytes`` (read + written), CuPy's where CuPy is
    here, else the streaming copy (:func:`labhelpers.roofline.time_copy`, the one way a copy is timed)."""
    src = cuda.device_array(max(1, int(nbytes) // 8), dtype=np.float32)
    try:
        return time_copy(src)
    except GPUOnlyError:  # no CuPy: Numba's streaming copy
        return time_copy(src, kernel="stream_copy")


def nearest_row(table, column: str, value: float):
    """The row of ``table`` whose ``column`` is closest to ``value`` (reference tables hold a grid of choices)."""
    return table.loc[(table[column].astype(float) - float(value)).abs().idxmin()]


__all__ = ["BELOW_TARGET", "NOT_ALLOWED", "TARGETS_FILE", "MeasuredExercise", "Verdict", "allowed", "can_time", "check",
           "ratio", "choose", "margin_for", "nearest_row", "reference_text", "target_basis", "target_for", "time_copy_of",
           "verdict"]
