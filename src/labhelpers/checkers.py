"""Pieces the lab checkers that launch a student's kernel themselves share: launch it, trim a trace (whether it
is a kernel at all: :func:`labhelpers.exercises.harness.require_kernel`).

A failure raises :class:`~labhelpers.errors.CheckFailed` (an AssertionError, so pytest and nbval see it) whose
message says what to change. Kernel exercises are declared for :mod:`labhelpers.exercises.harness` instead
(awkward sizes, partial blocks, race check, float64 from Numba's types, guard bands, thresholds), and answers that
are not kernels (a number, a formula, a choice) are called through :func:`labhelpers.exercises.answers.call`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import CheckFailed, LaunchConfigError

#: Longest compiler message a checker passes on (Numba's typing errors run to pages).
NUMBA_TRACE_LIMIT = 1500


def launch_student_kernel(kernel: Any, grid, block, args: Sequence[Any], name: str) -> None:
    """Launch a student's kernel, turning compile and launch errors into CheckFailed.

    IndexError (an out-of-bounds access in the simulator) is re-raised for the caller,
    which knows which bounds check to suggest; so is LaunchConfigError (the launch sizes
    came from the checker's caller, not from the kernel).
    """
    try:
        kernel[grid, block](*args)
    except (IndexError, CheckFailed, LaunchConfigError):
        raise
    except Exception as exc:
        text = str(exc)
        if len(text) > NUMBA_TRACE_LIMIT:
            text = text[:NUMBA_TRACE_LIMIT] + " [...]"
        raise CheckFailed(f"{name} did not compile or run ({type(exc).__name__}): {text}") from None
