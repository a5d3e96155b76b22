"""Points on this GPU's roofline: kernels measured by any chapter (or lab), kept per device.

:func:`record_point` adds a kernel measured on this GPU to ``points.json`` in the device's cache folder, a lab's
(``source="lab"``) to ``lab_points.json`` beside it, so an exercise never lands among a chapter's points;
:func:`load_points` reads the chapters' points back (and the labs' on request). Only possible measurements
are kept: :func:`record_point` refuses, with :class:`~labhelpers.errors.ImpossibleMeasurement`, a kernel whose
check failed, a time of zero or less, and a rate above a ceiling measured on this GPU
(:func:`check_against_ceilings`). Without a GPU, :func:`points_or_reference` gives the reference GPU's points.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers

import numpy as np
import pandas as pd

from .. import backend, device
from ..errors import GPUOnlyError, ImpossibleMeasurement
from ..measured import Measured, live_or_reference
from ..timing import Timing
from .cache import LAB_POINTS_FILE, POINTS_FILE, device_cache_dir, read_json, write_json
from .ceilings import CEILING_NAMES, Ceilings, load_cached_ceilings
from .model import attainable

POINT_COLUMNS = ["name", "chapter", "source", "precision", "flops", "nbytes", "intensity", "median_ms", "gflops",
                 "gbps", "date"]
PRECISIONS = ("fp32", "fp64")
#: Who recorded a point: a chapter, or a lab (kept in a file of its own).
SOURCES = ("chapter", "lab")
#: How far above a ceiling measured on the same GPU a point may sit before it is refused as impossible:
#: 5% covers the timing noise and clock changes between two runs of the same kernel.
CEILING_TOLERANCE = 0.05
#: Reference data with the reference GPU's points (written by ``bench/roofline.py``).
REF_POINTS = "ch07_roofline_points"

_WORK_NOT_DONE = ("Likely cause: the kernel did not do the work it claims (an unfinished exercise whose loop never "
                  "runs, an early return, a grid that covers only part of the data), or {count} counts more than "
                  "it does. Check the kernel's result first, then measure again.")


def _points_file(source: str, device_name: str | None = None):
    return device_cache_dir(device_name) / (LAB_POINTS_FILE if source == "lab" else POINTS_FILE)


def _read_points(path) -> list[dict]:
    data = read_json(path)
    points = data.get("points", []) if data else []
    return [p for p in points if isinstance(p, dict) and "name" in p] if isinstance(points, list) else []


def _where(ceilings: Ceilings) -> str:
    """Where ceilings come from, with their date: ``measured on NVIDIA H100 (2026-11-21)``."""
    date = ceilings.details.get("date")
    return ceilings.label + (f", {date}" if date and date not in ceilings.label else "")


def check_against_ceilings(what: str, *, gflops: float, gbps: float, ceilings: Ceilings, precision: str = "fp32",
                           tensor_cores: bool = False, tolerance: float = CEILING_TOLERANCE) -> None:
    """Refuse a rate that the ceilings of the same GPU say is impossible.

    The bounds are the ones no correct measurement crosses:

    * bytes: the fastest memory ceiling measured (the L2 cache's; the device-memory ceiling, the fastest stream
      of copies and a triad, is not a bound for a kernel that only reads, which skips every read-write
      turnaround);
    * flops: the FMA ceiling of the point's precision, unless ``tensor_cores`` (a library matrix multiply may
      run on tensor cores, which no FMA ceiling bounds).

    Raises:
        ImpossibleMeasurement: naming the measured rate, the ceiling, and the likely cause.
    """
    memory = [(k, ceilings.value(k)) for k in ("dram_gbs", "l2_gbs") if ceilings.value(k)]
    if memory and math.isfinite(gbps):
        key, fastest = max(memory, key=lambda kv: kv[1])
        if gbps > fastest * (1 + tolerance):
            dram = ceilings.value("dram_gbs")
            also = f"; its device-memory ceiling is {dram:,.0f} GB/s" if key != "dram_gbs" and dram else ""
            raise ImpossibleMeasurement(
                f"{what}: {gbps:,.0f} GB/s is {gbps / fastest:.1f} times the fastest memory ceiling of "
                f"{ceilings.gpu}, {CEILING_NAMES[key][0]} {fastest:,.0f} GB/s ({_where(ceilings)}{also}), and no "
                "kernel moves bytes faster than that. " + _WORK_NOT_DONE.format(count="nbytes") + " Not recorded."
            )
    compute = f"{precision}_gflops"
    peak = ceilings.value(compute) if compute in CEILING_NAMES else None
    if not tensor_cores and peak and math.isfinite(gflops) and gflops > peak * (1 + tolerance):
        raise ImpossibleMeasurement(
            f"{what}: {gflops:,.0f} GFLOP/s is {gflops / peak:.1f} times the {CEILING_NAMES[compute][0]} ceiling "
            f"of {ceilings.gpu}, {peak:,.0f} GFLOP/s ({_where(ceilings)}). " + _WORK_NOT_DONE.format(count="flops")
            + " (A library matrix multiply may run on tensor cores, which no FMA ceiling bounds: record it with "
            "tensor_cores=True.) Not recorded."
        )


def record_point(name: str, flops: float, nbytes: float, timing: Timing, *, chapter: str,
                 source: str = "chapter", checked: bool = True, precision: str = "fp32",
                 tensor_cores: bool = False) -> dict:
    """Add a kernel measured on this GPU to its roofline, if the measurement is possible.

    A point with the same ``name`` and ``chapter`` is replaced, so re-running a notebook does not duplicate it.

    Args:
        name: what was measured, e.g. ``"tiled matmul 2048 (32x32 tiles)"``.
        flops: floating-point operations of one run.
        nbytes: bytes one run moves through device memory (your count: state the assumption in the name).
        timing: a :class:`~labhelpers.timing.Timing` from :func:`~labhelpers.timing.benchmark` on this GPU.
        chapter: the chapter that measured it, e.g. ``"05"``.
        source: ``"chapter"``, or ``"lab"`` for an exercise (stored apart: :func:`load_points` shows lab points
            only when asked).
        checked: whether the kernel's result was checked and found correct; ``False`` is refused. A lab records
            a point only after its check passed.
        precision: ``"fp32"`` or ``"fp64"``: which arithmetic roof the point is read against.
        tensor_cores: True for work that may run on tensor cores (a library matrix multiply): the FMA ceilings
            do not bound it, so only its bandwidth is checked.

    Returns:
        The stored record.

    Raises:
        ImpossibleMeasurement: ``checked`` is False; a time of zero or less (or not a number); or a rate above a
            ceiling measured on this GPU (see :func:`check_against_ceilings`).
        GPUOnlyError: the timing is not a GPU timing (simulator, or a host clock).
        ValueError: flops or bytes are not positive, or ``chapter``, ``source`` or ``precision`` is not one
            of the allowed values.
    """
    what = f"record_point({name!r})"
    if not isinstance(checked, (bool, np.bool_)):
        raise TypeError(f"{what}: checked must be True or False, got {checked!r}")
    if not checked:
        raise ImpossibleMeasurement(
            f"{what}: the kernel's check failed (checked=False), so its time is the time of a wrong kernel, "
            "and a wrong kernel is not a point on the roofline. Fix the kernel until its check passes, then "
            "measure and record it again. Not recorded.")
    if not isinstance(chapter, str) or not chapter.strip():
        raise ValueError(f"{what}: chapter must name the chapter that measured it, e.g. chapter=\"05\"; got "
                         f"{chapter!r}")
    if source not in SOURCES:
        raise ValueError(f"{what}: source must be one of {SOURCES}, got {source!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"{what}: precision must be one of {PRECISIONS}, got {precision!r}")
    for label, value in (("flops", flops), ("nbytes", nbytes)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{what}: flops and nbytes must be positive numbers, got {label}={value!r}: a point on "
                             "the roofline needs both (its intensity is flops / nbytes)")
    if not isinstance(timing, Timing):
        raise TypeError(f"{what}: timing must be the Timing that lh.benchmark(...) returns, got "
                        f"{type(timing).__name__}")
    if not timing.is_gpu_timing:
        raise GPUOnlyError(
            f"{what}: only real GPU timings (CUDA events from lh.benchmark on a GPU) go on this GPU's roofline; "
            "this timing is from the simulator or a host clock, so it is not recorded."
        )
    bad = [t for t in timing.times_ms if not (isinstance(t, numbers.Real) and math.isfinite(t) and t > 0)]
    if bad or not timing.times_ms:
        raise ImpossibleMeasurement(
            f"{what}: a time of {bad[0] if bad else 'nothing'} ms is impossible: every GPU timing is a positive "
            "number of milliseconds, so the events did not time the kernel (was it launched between them?). "
            "Not recorded.")
    seconds = timing.median_ms * 1e-3
    gflops, gbps = flops / seconds / 1e9, nbytes / seconds / 1e9
    here = device.device_info().name
    measured = load_cached_ceilings(here)
    if measured is not None:
        check_against_ceilings(what, gflops=gflops, gbps=gbps, ceilings=measured, precision=precision,
                               tensor_cores=tensor_cores)
    record = {"name": str(name), "chapter": chapter, "source": source, "precision": precision,
              "flops": float(flops), "nbytes": float(nbytes), "intensity": flops / nbytes,
              "median_ms": timing.median_ms, "gflops": gflops, "gbps": gbps, "date": _dt.date.today().isoformat()}
    path = _points_file(source, here)
    points = [p for p in _read_points(path) if not (p["name"] == record["name"] and
                                                    p.get("chapter", "") == record["chapter"])]
    points.append(record)
    write_json(path, {"device": here, "points": points})
    return record


def load_points(device_name: str | None = None, *, include_labs: bool = False) -> pd.DataFrame:
    """The chapters' points recorded on this GPU (or on ``device_name``), as a table (empty under the simulator).

    Args:
        device_name: another device's points (by default this GPU's).
        include_labs: add the points the labs recorded (kept apart, so an exercise never shows among a
            chapter's kernels unless the reader asks for it).
    """
    if device_name is None and backend.is_simulator():
        return pd.DataFrame(columns=POINT_COLUMNS)
    points = [{"source": "chapter", **p} for p in _read_points(_points_file("chapter", device_name))]
    if include_labs:
        points += [{**p, "source": "lab"} for p in _read_points(_points_file("lab", device_name))]
    return pd.DataFrame(points, columns=POINT_COLUMNS) if points else pd.DataFrame(columns=POINT_COLUMNS)


def clear_points(device_name: str | None = None, *, include_labs: bool = True) -> None:
    """Forget the points recorded on this GPU (or on ``device_name``): the chapters' and, by default, the labs'."""
    for source in SOURCES if include_labs else ("chapter",):
        path = _points_file(source, device_name)
        if path.exists():
            path.unlink()


def points_or_reference(*, include_labs: bool = False) -> Measured:
    """This GPU's recorded points when there are any (on a GPU); otherwise the reference GPU's.

    Returns:
        A :class:`~labhelpers.measured.Measured` (``.table``, ``.label``, ``.source_line()``; it also unpacks as
        ``table, label``).
    """
    def measure() -> pd.DataFrame:
        live = load_points(include_labs=include_labs)
        if not len(live):
            raise GPUOnlyError("no point has been recorded on this GPU yet")
        return live

    return live_or_reference(measure, REF_POINTS)


def fraction_of_roof(points: pd.DataFrame, ceilings: Ceilings, memory: str = "dram_gbs") -> pd.Series:
    """Each point's GFLOP/s over the roofline at its intensity (the FP64 roof for ``precision == "fp64"``)."""
    fractions = []
    for _, row in points.iterrows():
        compute = "fp64_gflops" if row.get("precision", "fp32") == "fp64" else "fp32_gflops"
        b, p = ceilings.value(memory), ceilings.value(compute)
        try:
            roof = attainable(float(row["intensity"]), b, p) if b and p else float("nan")
            fractions.append(float(row["gflops"]) / roof)
        except (TypeError, ValueError, ZeroDivisionError):
            fractions.append(float("nan"))
    return pd.Series(fractions, index=points.index, name="fraction of roof")
