"""Show the source of a function or kernel from the package: one source of truth.

Chapters print the tested kernel from ``labhelpers.kernels`` instead of pasting a copy
that could drift from what the tests check.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

from IPython.display import Code


def source_of(obj: Any) -> str:
    """The source text of a Python function or a Numba kernel / device function."""
    func = getattr(obj, "py_func", obj)  # Numba dispatchers keep the Python function here
    try:
        return textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise TypeError(f"cannot show the source of {obj!r}: it is not a Python function or kernel") from exc


def show_source(obj: Any) -> Code:
    """Display ``obj``'s source, highlighted in Jupyter and the book, plain text elsewhere."""
    return Code(source_of(obj), language="python")
