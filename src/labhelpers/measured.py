"""Measure on this GPU, else show a real GPU's reference data: the one way every chapter does it.

>>> m = live_or_reference(lambda: memory.coalescing_sweep("offset"), "ch03_coalescing_offset")
>>> m.table          # the same typed columns whichever it got
>>> m.label          # "this GPU: NVIDIA H100 80GB HBM3" or "reference: NVIDIA H200 (2026-11-21)"
>>> print(m.source_line())   # "Data source: ..." (the nbval sanitiser masks this line)

Under the simulator (or with ``LABHELPERS_LIVE=0``, or when ``measure`` is None) nothing is
measured and the reference file is loaded. On a GPU ``measure()`` runs; if it raises
:class:`~labhelpers.errors.GPUOnlyError` (e.g. CuPy missing) or returns a sweep table
without GPU timings, the reference is used and :meth:`Measured.source_line` says why.

``measure`` may also be a table measured already (a sweep that ran on both backends for
its model columns): its rows with ``status == "ok"`` count as GPU timings, the others not.

Reference files store numbers as JSON, so a column of missing values comes back as
``None`` objects; :func:`typed_table` turns such columns into floats, and both the live and
the reference table pass through it, so no notebook repairs a column.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping, Union

import numpy as np
import pandas as pd

from . import backend
from .errors import GPUOnlyError
from .refdata import Reference, load_reference, typed_columns
from . import device as device_mod

#: ``LABHELPERS_LIVE=0`` shows reference data even on a GPU (e.g. to reproduce the book's figures exactly).
LIVE_ENV_VAR = "LABHELPERS_LIVE"
#: What :meth:`Measured.source_line` starts with (``tests/nbval_sanitize.cfg`` masks such lines).
SOURCE_PREFIX = "Data source: "
#: The ``status`` of sweep rows that hold real GPU timings (see :mod:`labhelpers.sweep`).
STATUS_OK = "ok"

Measure = Union[Callable[[], Union[pd.DataFrame, None]], pd.DataFrame, None]


@dataclass(frozen=True)
class Measured:
    """A table of measured numbers and where they come from.

    Attributes:
        table: the numbers, with the same typed columns whether measured here or loaded.
        is_live: True when measured on this machine's GPU just now.
        gpu: the GPU the numbers come from.
        label: a legend label: ``this GPU: <name>`` or ``reference: <name> (<date>)``.
        reference: the reference data, when it was loaded (also on a GPU, for comparison plots).
        note: why reference data is shown instead of a live measurement (empty when live).
    """

    table: pd.DataFrame
    is_live: bool
    gpu: str
    label: str
    reference: Reference | None = None
    note: str = ""

    def source_line(self) -> str:
        """One line, starting ``Data source: ``, saying where the numbers come from (and why)."""
        if self.is_live:
            return f"{SOURCE_PREFIX}measured just now on this GPU, {self.gpu}."
        why = f" Not measured here: {self.note}." if self.note else ""
        if self.reference is None:
            return f"{SOURCE_PREFIX}measured on {self.gpu}.{why}"
        provenance = self.reference.provenance  # "Measured on <gpu> (...) on <date>."
        return f"{SOURCE_PREFIX}reference data {self.reference.name!r}, m{provenance[1:]}{why}"

    def __iter__(self):
        """Unpack as ``table, label`` (the shape of the older ``*_or_reference`` helpers)."""
        return iter((self.table, self.label))


def live_disabled_reason() -> str | None:
    """Why nothing can be measured live here (no GPU, ``LABHELPERS_LIVE=0``), or None when it can."""
    value = os.environ.get(LIVE_ENV_VAR, "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return f"{LIVE_ENV_VAR}={os.environ[LIVE_ENV_VAR]} asks for reference data"
    if backend.is_simulator():
        return "there is no GPU here (kernels run in the CPU simulator, whose timings mean nothing)"
    return None


def timed_rows(table: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of ``table`` that hold real GPU timings, or None if there are none.

    A table with a ``status`` column (a sweep) keeps its ``status == "ok"`` rows; any other
    non-empty table counts as measured as a whole.
    """
    if table is None:
        return None
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"a measurement must return a pandas DataFrame, got {type(table).__name__}")
    if "status" in table:
        table = table[table["status"] == STATUS_OK].reset_index(drop=True)
    return table if len(table) else None


def typed_table(table: pd.DataFrame, dtypes: Mapping[str, object] | None = None) -> pd.DataFrame:
    """``table`` with proper column types: a copy, never the caller's table.

    Every object column whose values are all numbers or missing (``None``, as JSON stores a
    missing measurement) becomes numeric (:func:`labhelpers.refdata.typed_columns`, which
    :func:`~labhelpers.refdata.load_reference` applies too). ``dtypes`` forces the types of
    the named columns (numbers that do not parse become NaN).
    """
    table = typed_columns(table)
    for column, dtype in (dtypes or {}).items():
        if column not in table:
            raise KeyError(f"dtypes names column {column!r}, but the table has {list(table.columns)}")
        target = np.dtype(dtype)
        if target.kind in "iuf":
            values = pd.to_numeric(table[column], errors="coerce")
            # an integer column with a missing value stays float (NaN has no integer form)
            table[column] = values.astype(target) if target.kind == "f" or values.notna().all() else values
        else:
            table[column] = table[column].astype(target)
    return table


def _load(reference: str | Reference | None) -> tuple[Reference | None, str]:
    if reference is None or isinstance(reference, Reference):
        return reference, ""
    if not isinstance(reference, str):
        raise TypeError(f"reference must be the name of a reference file (a str), got {type(reference).__name__}")
    try:
        return load_reference(reference), ""
    except FileNotFoundError as exc:
        return None, str(exc)


def _live(table: pd.DataFrame, ref: Reference | None, dtypes) -> Measured:
    name = device_mod.device_info().name
    return Measured(table=typed_table(table, dtypes), is_live=True, gpu=name, label=f"this GPU: {name}",
                    reference=ref)


def live_or_reference(
    measure: Measure,
    reference: str | Reference | None,
    *,
    dtypes: Mapping[str, object] | None = None,
    fallback_on: tuple[type[BaseException], ...] = (GPUOnlyError,),
) -> Measured:
    """Measure on this GPU, else load the labelled reference data: always a :class:`Measured`.

    Args:
        measure: a function returning the table (called only on a GPU, unless ``LABHELPERS_LIVE=0``),
            a table measured already (its ``status == "ok"`` rows count), or None (reference only).
        reference: the name of a reference file in ``labhelpers/data/reference`` (or a loaded
            :class:`~labhelpers.refdata.Reference`).
        dtypes: column types to force on the table (both ways), e.g. ``{"value": float}``.
        fallback_on: exceptions of ``measure()`` that mean "cannot measure here, show the reference".

    Raises:
        FileNotFoundError: nothing was measured and there is no such reference (the message lists those there are).
    """
    if not (measure is None or isinstance(measure, pd.DataFrame) or callable(measure)):
        raise TypeError(f"measure must be a function returning a DataFrame, a DataFrame or None, "
                        f"got {type(measure).__name__}: pass the function itself, not its result")
    ref, missing = _load(reference)
    why = live_disabled_reason()
    table = None
    if measure is None:
        why = why or "nothing is measured live for this table"
    elif isinstance(measure, pd.DataFrame):
        # A sweep's status column says whether its rows are GPU timings, on either backend.
        if why is None or ("status" in measure and LIVE_ENV_VAR not in why):
            table = measure
    elif why is None:
        try:
            table = measure()
        except fallback_on as exc:
            why = str(exc).rstrip(".")
    if table is not None:
        rows = timed_rows(table)
        if rows is not None:
            return _live(rows, ref, dtypes)
        why = why or "the measurement returned no GPU timings"
    if ref is None:
        raise FileNotFoundError(f"nothing was measured here ({why}) and {missing or 'no reference was given'}")
    return Measured(table=typed_table(ref.table, dtypes), is_live=False, gpu=ref.gpu, label=ref.label,
                    reference=ref, note=why)


__all__ = ["LIVE_ENV_VAR", "Measured", "live_disabled_reason", "live_or_reference", "timed_rows", "typed_table"]
