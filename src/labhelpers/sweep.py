"""Run one measurement over a grid of parameters and collect a tidy table.

>>> table = sweep(run, {"threads": [32, 64, 128, 256, 512, 1024, 2048]},
...               check=lambda threads: check_launch(threads))

``run(**point)`` returns a :class:`~labhelpers.timing.Timing` (or ``None``); ``check(**point)``
returns a reason string for points the hardware cannot run. The table has one row per
point: the parameters, ``median_ms``, ``min_ms``, ``spread``, ``gbps``, ``gflops``,
``status`` (``ok``, ``simulator`` or ``invalid``) and ``reason``. Invalid points are
recorded, not crashed on.
"""

from __future__ import annotations

import itertools
import os
from typing import Callable, Mapping, Sequence

import pandas as pd

from . import backend
from .errors import LaunchConfigError
from .timing import Timing

STATUS_OK = "ok"
STATUS_SIM = "simulator"
STATUS_INVALID = "invalid"
STATUS_UNTIMED = "untimed"


def grid_points(grid: Mapping[str, Sequence]) -> list[dict]:
    """All combinations of the grid's values, as dicts, in the grid's order."""
    if not grid:
        raise ValueError("the sweep grid is empty: give at least one parameter with a list of values")
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"grid[{key!r}] must be a list of values, got {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(list(grid[k]) for k in keys))]


def _launch_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [LaunchConfigError]
    try:
        from numba.cuda.cudadrv.driver import CudaAPIError  # the GPU driver's internals: used only on a GPU

        types.append(CudaAPIError)
    except Exception:
        pass
    return tuple(types)


def progress_wanted(progress: bool) -> bool:
    """Whether to show a progress bar: ``progress``, unless the environment says ``TQDM_DISABLE=1`` (tqdm's own
    variable, which its notebook widget bar ignores), as ``tools/execute_notebooks.py`` and nbval do."""
    return progress and os.environ.get("TQDM_DISABLE", "").strip().lower() in ("", "0", "false")


def sweep(
    run: Callable[..., Timing | None],
    grid: Mapping[str, Sequence],
    *,
    check: Callable[..., str | None] | None = None,
    progress: bool = True,
    desc: str = "sweep",
) -> pd.DataFrame:
    """Call ``run(**point)`` for every point of ``grid`` and tabulate the timings.

    Args:
        run: measures one point; returns a Timing (from :func:`~labhelpers.timing.benchmark`).
        grid: parameter name -> list of values; the sweep covers their product.
        check: optional; returns why a point cannot run (then it is not run), or None.
        progress: show a progress bar (tqdm.auto: a widget in Jupyter, text elsewhere), unless the environment
            says ``TQDM_DISABLE=1`` (:func:`progress_wanted`), as ``tools/execute_notebooks.py`` and nbval do:
            a widget bar saved in a notebook would make its website page load the 4 MB Jupyter widget manager.
        desc: the progress bar's label.

    Returns:
        A DataFrame, one row per point (see the module docstring).
    """
    from tqdm.auto import tqdm  # progress bars only in a notebook

    points = grid_points(grid)
    rows = []
    launch_errors = _launch_error_types()
    for point in tqdm(points, desc=desc, disable=not progress_wanted(progress)):
        row = dict(point)
        reason = check(**point) if check else None
        timing = None
        if reason is None:
            try:
                timing = run(**point)
            except launch_errors as exc:
                reason = str(exc)
        if reason is not None:
            row.update(Timing(label=desc, times_ms=None).as_row(), status=STATUS_INVALID, reason=reason)
        elif timing is None or timing.times_ms is None:
            status = STATUS_SIM if backend.is_simulator() else STATUS_UNTIMED
            row.update(Timing(label=desc, times_ms=None).as_row(), status=status, reason="no GPU timing")
        else:
            row.update(timing.as_row(), status=STATUS_OK, reason="")
        rows.append(row)
    return pd.DataFrame(rows)
