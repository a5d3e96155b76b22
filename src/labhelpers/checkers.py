"""Checking a student's kernel against a NumPy reference, with a useful message.

A checker runs the student's code on awkward sizes (1, 31, 33, 257 and a large odd
number: see :func:`labhelpers.sizes.awkward_sizes`), with fresh random inputs and an
output poisoned with NaN so unwritten elements show, and compares with NumPy.
On failure it raises :class:`~labhelpers.errors.CheckFailed` (an AssertionError, so
pytest and nbval see it) whose message says which size failed, where, and what the
usual cause of that pattern is. On success it prints one line.

Kernel exercises are declared for :mod:`labhelpers.exercises.harness` instead (partial blocks, race
check, float64 from Numba's types, guard bands, thresholds); ``check_function`` is for host functions.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from . import validate
from .errors import ArgumentError, CheckFailed, LaunchConfigError
from .sizes import awkward_sizes

_MAX_SHOWN = 5
#: Longest compiler message a checker passes on (Numba's typing errors run to pages).
NUMBA_TRACE_LIMIT = 1500


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__}"
    return f"a {type(value).__name__} ({str(value)[:40]})"


def require_kernel(kernel: Any, name: str) -> None:
    """Raise CheckFailed unless ``kernel`` is a CUDA kernel (something launched with ``kernel[grid, block]``).

    The test is :func:`labhelpers.validate.kernel`'s; a lab's check reports it as a failed check.
    """
    try:
        validate.kernel(kernel, name)
    except ArgumentError as exc:
        raise CheckFailed(str(exc)) from None


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


def diagnose(got: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float) -> str | None:
    """Describe how ``got`` differs from ``expected``, or return None if they agree."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        return f"the output has shape {got.shape}, expected {expected.shape}"
    if got.dtype.kind in "fc":
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=False)
    else:
        bad = got != expected
    if not bad.any():
        return None
    flat_bad = np.flatnonzero(bad)
    idx = [np.unravel_index(i, got.shape) for i in flat_bad[:_MAX_SHOWN]]
    shown = "; ".join(
        f"index {tuple(int(v) for v in i) if len(i) > 1 else int(i[0])}: got {got[i].item()!r}, "
        f"expected {expected[i].item()!r}"
        for i in idx
    )
    msg = f"{len(flat_bad)} of {got.size} elements are wrong ({shown})"
    if got.dtype.kind == "f" and np.isnan(got.ravel()[flat_bad]).all():
        msg += ". Those elements were never written (they still hold the NaN the checker put there)"
        if flat_bad.min() > 0:
            msg += ": does the grid cover every element? Use a ceiling division for the number of blocks"
    return msg


def check_function(
    student: Callable[..., object],
    reference: Callable[..., object],
    make_inputs: Callable[[int, np.random.Generator], tuple],
    *,
    sizes: Sequence[int] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    what: str = "your kernel",
    seed: int = 0,
    quiet: bool = False,
) -> None:
    """Compare ``student(*inputs)`` with ``reference(*inputs)`` for each size.

    Args:
        student: runs the student's code (launch included) and returns the result as an array.
        reference: the NumPy specification, same arguments, returns the expected array.
        make_inputs: ``make_inputs(n, rng)`` returns the argument tuple for size ``n``.
            Each call gets fresh arrays: the student's code may overwrite them.
        sizes: sizes to try (default: :func:`~labhelpers.sizes.awkward_sizes`).
        rtol, atol: tolerance for floating-point results (as in ``numpy.isclose``).
        what: how to name the student's code in messages.
        quiet: do not print the success line.

    Raises:
        CheckFailed: at the first size where the result differs or the code raises.
    """
    if not callable(student):
        raise CheckFailed(f"{what}: expected a function to check, got {_describe(student)}. Pass the function itself "
                          "(not the result of calling it, nor a dict or None).")
    sizes = tuple(sizes) if sizes is not None else awkward_sizes()
    rng = np.random.default_rng(seed)
    for n in sizes:
        inputs = make_inputs(n, rng)
        expected = np.asarray(reference(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in inputs]))
        try:
            got = student(*inputs)
        except NotImplementedError as exc:
            raise CheckFailed(f"{what} is not written yet: replace the `raise NotImplementedError` ({exc}).") from None
        except IndexError as exc:
            raise CheckFailed(
                f"{what} read or wrote outside an array for n={n} ({exc}). Threads beyond the last element must do "
                "nothing: guard the body with a bounds check such as `if i < x.size:`."
            ) from None
        if got is None:
            raise CheckFailed(f"{what} returned None for n={n}: return the output array.")
        if not isinstance(got, np.ndarray) and not hasattr(got, "copy_to_host"):
            raise CheckFailed(f"{what} returned {_describe(got)} for n={n}: return a NumPy array (np.asarray(...) or "
                              "out.copy_to_host()), not a list or a number.")
        if hasattr(got, "copy_to_host"):
            got = got.copy_to_host()
        problem = diagnose(np.asarray(got), expected, rtol=rtol, atol=atol)
        if problem:
            raise CheckFailed(f"{what} is wrong for n={n}: {problem}.")
    if not quiet:
        print(f"Correct: {what} matches NumPy on all {len(sizes)} sizes tried (awkward ones included).")
