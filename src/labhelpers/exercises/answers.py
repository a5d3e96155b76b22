"""Answers that are not kernels (a number, a pair of numbers, a name): called safely, their TYPE checked first.

The checkers of labs 1-7 that take a plain function (a formula, a count, an occupancy) call it through
:func:`call` and read its result with :func:`number`, :func:`whole_number` or :func:`choice`, so that an
answer of the wrong type (the text ``"0.5"``, a list ``[0.5]``, ``None``, ``True``) is refused with a
message about the type instead of being converted silently or failing later with a bare TypeError.
Every message starts with a class (:data:`WRONG_TYPE`, ...), like the kernel harness's.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import validate
from ..errors import CheckFailed
from . import harness as h

#: Message classes of this module.
WRONG_TYPE = "Wrong type"
RAISED = "Raised an error"
WRONG_ANSWER = "Wrong answer"
#: A function that cannot take the arguments the checker calls it with (often: a checker's arguments swapped).
WRONG_FUNCTION = "Wrong function"


def _args_text(args: Sequence[Any]) -> str:
    shown = []
    for a in args:
        if isinstance(a, np.ndarray):
            shown.append(f"<array of {a.size}>")
        elif isinstance(a, np.random.Generator):
            shown.append("rng")
        else:
            shown.append(repr(a))
    return "(" + ", ".join(shown) + ")"


def call(student: Callable, name: str, *args: Any) -> Any:
    """``student(*args)``; an exception becomes CheckFailed naming the call (NotImplementedError: not written yet).

    Raises:
        CheckFailed: ``student`` is not a plain function, cannot take ``args`` (:data:`WRONG_FUNCTION`: e.g. a
            checker's arguments swapped), is not written yet, or raised.
    """
    h.require_function(student, name, f"{name}(...)")
    wrong = validate.signature_mismatch(student, len(args))
    if wrong is not None:
        count = "no arguments" if not args else f"{len(args)} argument{'s' if len(args) != 1 else ''}"
        raise h.failure(WRONG_FUNCTION, f"{name} is called as {name}{_args_text(args)} ({count}), but the function "
                                        f"passed is {wrong}: pass {name} itself (if the checker takes several "
                                        "functions, are they in the order of its signature?).")
    try:
        return student(*args)
    except NotImplementedError:
        raise h.failure(h.NOT_WRITTEN_YET, f"{name} is not written yet: replace the `raise NotImplementedError`."
                        ) from None
    except CheckFailed:
        raise
    except ZeroDivisionError as exc:
        raise h.failure(RAISED, f"{name}{_args_text(args)} divided by zero ({exc}): handle that case separately, "
                                "or compute with NumPy floats.") from None
    except Exception as exc:  # noqa: BLE001  (the student's code failed: say where, keep the type and message)
        raise h.failure(RAISED, f"{name}{_args_text(args)} raised {type(exc).__name__}: {exc}") from None


def check_formula(student: Callable, name: str, signature: str, cases: Sequence[Sequence[Any]],
                  expected: Callable[..., float], *, shown: Callable[[float, float], str],
                  hint: Callable[..., str], rtol: float = 1e-6) -> None:
    """A formula answer ("predict, then measure"): ``student(*case)`` against ``expected(*case)`` for each case.

    Args:
        student: the student's function; ``name`` and ``signature`` name it in messages.
        cases: the argument tuples it is called with.
        expected: the right value for a case.
        shown: ``shown(got, want)``, what the message says of both numbers, e.g. ``"2.1 ms, the bound is 4.2 ms"``.
        hint: ``hint(got, *case)``, what the wrong number looks like (a factor 2, a missing 1000...).
        rtol: the relative tolerance.

    Raises:
        CheckFailed: not a function, raised, not a number (:data:`WRONG_TYPE`), or the first case whose value is
            off (:data:`WRONG_ANSWER`: ``name(case) = <shown>: <hint>.``).
    """
    h.require_function(student, name, signature)
    for case in cases:
        call_text = f"{name}{_args_text(case)}"
        got = number(call(student, name, *case), call_text)
        want = expected(*case)
        if not np.isclose(got, want, rtol=rtol):
            raise h.failure(WRONG_ANSWER, f"{call_text} = {shown(got, want)}: {hint(got, *case)}.")


def wrong_type(value: Any, call_text: str, wanted: str) -> CheckFailed:
    what = h._describe(value)
    if isinstance(value, str):
        hint = " (a string, even one holding digits, is not a number: drop the quotes)"
    elif isinstance(value, (list, tuple)):
        hint = f" (return the value itself, not a {type(value).__name__} holding it)"
    elif value is None:
        hint = " (finish the function with `return`)"
    else:
        hint = ""
    return h.failure(WRONG_TYPE, f"{call_text} returned {what}{hint}: return {wanted}.")


def number(value: Any, call_text: str) -> float:
    """``value`` as a float if it is a real number (Python or NumPy, 0-d array included), else CheckFailed."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise wrong_type(value, call_text, "a number (an int or a float)")
    return float(value)


def whole_number(value: Any, call_text: str) -> int:
    """``value`` as an int if it is a Python or NumPy integer, else CheckFailed (a float 4.0 included)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        wanted = "a whole number, an int (use // for integer division, and -(-a // b) or math.ceil to round up)"
        raise wrong_type(value, call_text, wanted)
    return int(value)


def numbers(value: Any, call_text: str, count: int, names: str) -> tuple[float, ...]:
    """``value`` as ``count`` floats if it is a tuple (or list) of that many numbers, else CheckFailed."""
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise wrong_type(value, call_text, f"{count} numbers, {names}") if not isinstance(value, (tuple, list)) \
            else h.failure(WRONG_TYPE, f"{call_text} returned {len(value)} values: return {count}, {names}.")
    return tuple(number(v, f"{call_text} (in the {names} it returned)") for v in value)


def array_of(value: Any, call_text: str, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as a float array of ``shape`` (a function of NumPy arrays must return one), else CheckFailed."""
    if not isinstance(value, (np.ndarray, np.number, float, int)) or isinstance(value, bool):
        raise wrong_type(value, call_text, f"a NumPy array of shape {shape} (the inputs were arrays: compute "
                                            "with array arithmetic, not a Python loop or `if`)")
    result = np.asarray(value, dtype=float)
    if result.shape != shape:
        raise h.failure(WRONG_TYPE, f"{call_text} returned shape {result.shape}: return shape {shape} (one "
                                    "value per input element).")
    return result


def choice(value: Any, call_text: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of the strings ``choices`` (case and spaces ignored), else CheckFailed."""
    if not isinstance(value, str):
        raise wrong_type(value, call_text, "one of " + ", ".join(f'"{c}"' for c in choices) + " (a string)")
    text = value.strip().upper()
    if text not in choices:
        raise h.failure(WRONG_ANSWER, f"{call_text} returned {value!r}: return one of "
                        + ", ".join(f'"{c}"' for c in choices) + ".")
    return text


__all__ = ["RAISED", "WRONG_ANSWER", "WRONG_FUNCTION", "WRONG_TYPE", "array_of", "call", "check_formula", "choice", "number", "numbers", "wrong_type",
           "whole_number"]
