"""Shared pieces of the GPU benchmarks: the run context, ceilings measured in the same run, the report.

Every ``bench/<topic>.py`` module defines ``bench(ctx) -> list[Row]`` and ``collect(out_dir)``.
Ceilings are measured once per run and shared through :class:`Context`, so every ratio
compares numbers taken on the same GPU minutes apart.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

os.environ.setdefault("LABHELPERS_BACKEND", "gpu")  # before labhelpers is imported: it chooses the backend

try:
    import labhelpers as lh  # noqa: E402,F401  (the bench modules take it from here: `from common import lh`)
    from labhelpers import roofline  # noqa: E402
except ModuleNotFoundError as exc:  # not installed: say how, instead of a traceback
    if exc.name != "labhelpers":
        raise
    sys.exit("error: the benchmarks import the package: install it (`pip install -e .`) or set PYTHONPATH=src")

def wanted(table: str) -> bool:
    """Whether this run collects reference table ``table`` (e.g. ``"ch09_jacobi"``).

    Every table, unless ``LABHELPERS_COLLECT_ONLY`` names some (comma-separated): then only those, so that one
    GPU call can re-measure the tables a change touched (``LABHELPERS_COLLECT_ONLY=ch09_jacobi bash
    tools/device_collect.sh stencil``). A ``collect(out_dir)`` guards each table's measurement with it.
    """
    only = [t.strip() for t in os.environ.get("LABHELPERS_COLLECT_ONLY", "").split(",") if t.strip()]
    return not only or table in only


#: How rows name the copy ceiling they are compared with (:meth:`Context.copy_bandwidth_gbs`).
COPY_CEILING = "copy ceiling (best D2D copy, 1 GiB, read+write)"


@dataclass
class Row:
    """One benchmark result: ``value`` in ``unit``, and its ratio to a named ceiling."""

    topic: str
    kernel: str
    size: str
    value: float
    unit: str
    ceiling_name: str = ""
    ceiling: float = float("nan")
    target: float | None = None  # the ratio the issue asks for, if any

    @property
    def ratio(self) -> float:
        return self.value / self.ceiling if self.ceiling == self.ceiling and self.ceiling else float("nan")


@dataclass
class Context:
    """Ceilings measured in this run, computed on first use and cached."""

    cache: dict = field(default_factory=dict)

    def copy_ceiling(self) -> roofline.CeilingMeasurement:
        """The copy ceiling, measured once per run: :func:`labhelpers.roofline.measure_dram_bandwidth`.

        The fastest device-to-device copy of a 1 GiB buffer among the streaming copies of
        ``labhelpers.roofline.COPY_VARIANTS`` and CuPy's ``dst[:] = src``, bytes counted read + written
        (``tried`` lists every copy with its GB/s).
        """
        if "copy" not in self.cache:
            self.cache["copy"] = roofline.measure_dram_bandwidth()
        return self.cache["copy"]

    def copy_bandwidth_gbs(self) -> float:
        """The copy ceiling in GB/s (bytes read + written): see :meth:`copy_ceiling`.

        The yardstick of the targets stated as a fraction of "the D2D copy"; not a bound: a kernel that reads
        twice per write (SAXPY, STREAM's triad) can move bytes a little faster than a copy (:meth:`dram_ceiling`).
        """
        return self.copy_ceiling().value

    def dram_ceiling(self) -> roofline.CeilingMeasurement:
        """The device-memory ceiling, measured once per run: :func:`labhelpers.roofline.measure_stream_bandwidth`.

        The fastest streaming kernel of this run: the copies of :meth:`copy_ceiling` (the same measurement, not
        a second one) and a read-2-write-1 triad, bytes read + written. No correct kernel's GB/s exceeds it.
        """
        if "dram" not in self.cache:
            self.cache["dram"] = roofline.measure_stream_bandwidth(copy=self.copy_ceiling())
        return self.cache["dram"]

    def dram_ceiling_gbs(self) -> float:
        """The device-memory ceiling in GB/s: see :meth:`dram_ceiling`."""
        return self.dram_ceiling().value


def report(rows: list[Row]) -> str:
    """A fixed-width table of the rows, with targets marked PASS/FAIL."""
    lines = [f"{'topic':<12} {'kernel':<34} {'size':<14} {'value':>12} {'unit':<8} {'ratio':>7}  vs"]
    for r in rows:
        verdict = ""
        if r.target is not None:
            verdict = f"  target {r.target:.0%}: {'PASS' if r.ratio >= r.target else 'FAIL'}"
        lines.append(f"{r.topic:<12} {r.kernel:<34} {r.size:<14} {r.value:>12,.1f} {r.unit:<8} {r.ratio:>7.1%}  "
                     f"{r.ceiling_name}{verdict}")
    return "\n".join(lines)
