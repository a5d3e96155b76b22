"""Tables of measurements, printed for reading.

Compute with the typed tables (:func:`labhelpers.measured.typed_table`); :func:`format_table` makes a copy for
display, with integers printed as integers and bandwidths and rates rounded, thousands separated (``4,143``
GB/s, not ``4143.340901``).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import pandas as pd

from ..refdata import typed_columns

#: How :func:`format_table` prints the roofline's usual columns unless told otherwise.
DEFAULT_FORMATS: dict[str, str] = {
    "gbps": "{:,.0f}", "gflops": "{:,.0f}", "value": "{:,.0f}", "measured": "{:,.0f}", "datasheet": "{:,.0f}",
    "roof GFLOP/s": "{:,.0f}", "at most GFLOP/s": "{:,.0f}", "measured / datasheet": "{:.0%}",
    "fraction of roof": "{:.0%}", "measured / predicted": "{:.2f}", "spread": "{:.1%}",
    "spread (IQR / median)": "{:.1%}",
}
#: What a missing number (None or NaN) prints as.
MISSING = "–"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _readable(v: float) -> str:
    """About three significant digits, never fewer than the integer part: 683, 3.99, 0.250, 0.00597."""
    size = abs(v)
    if size >= 100:
        return f"{v:,.0f}"
    if size >= 10:
        return f"{v:.1f}"
    if size >= 1:
        return f"{v:.2f}"
    return f"{v:#.3g}"


def format_table(table: pd.DataFrame, formats: Mapping[str, str | Callable[[float], str]] | None = None
                 ) -> pd.DataFrame:
    """A copy of ``table`` for reading: every column of numbers printed as text.

    A column whose numbers are all whole prints as integers with thousands separators (``256``, not
    ``256.0``); other numbers print with about three significant digits (:data:`DEFAULT_FORMATS` and
    ``formats`` override this per column, e.g. ``{"gbps": "{:,.0f}"}`` or a function); missing values
    print as :data:`MISSING`. Text and boolean columns are left as they are. Compute with the original table:
    this one holds strings.
    """
    chosen = {**DEFAULT_FORMATS, **(formats or {})}
    out = typed_columns(table)
    for column in out.columns:
        values = out[column]
        if values.dtype == bool or not (pd.api.types.is_numeric_dtype(values) or
                                        all(v is None or _is_number(v) for v in values)):
            continue
        numbers = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values.tolist()]
        fmt = chosen.get(str(column))
        whole = all(float(v).is_integer() for v in numbers if v is not None)
        if fmt is None:
            fmt = "{:,.0f}" if whole else _readable
        write = fmt if callable(fmt) else fmt.format
        out[column] = [MISSING if v is None else write(v) for v in numbers]
    return out
