"""A GPU's roofline ceilings: what they are, where they come from, and where they are kept.

:class:`Ceilings` holds the four ceilings (device-memory and L2 bandwidth, FP32 and FP64 FMA peaks) with their
provenance. ``dram_gbs`` is the device-memory ceiling: the fastest streaming kernel of the run, copies and a
read-2-write-1 triad (a copy is the book's yardstick, :meth:`Ceilings.copy_gbs`, not a bound: SAXPY with
16-byte accesses beats it). They come from one of three places:

* measured on this GPU by :func:`~labhelpers.roofline.measure.measure_ceilings`, and cached per device in
  ``<cache_root>/<device>/ceilings.json`` (:func:`load_cached_ceilings`, :func:`save_cached_ceilings`);
* measured on the reference GPU, shipped as reference data ``ch07_ceilings`` (:func:`reference_ceilings`);
* NVIDIA's datasheets, for known GPUs (:func:`datasheet_ceilings`), to compare with.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import asdict, dataclass, field
from importlib import resources

import pandas as pd

from .. import device, refdata
from ..errors import GPUOnlyError
from ..measured import SOURCE_PREFIX, Measured, live_or_reference
from . import cache
from .model import FP32_LANES_PER_SM, FP64_LANES_PER_SM, attainable, machine_balance, peak_at_clock_gflops

#: The four ceilings, their units and how plots name them.
CEILING_NAMES = {"dram_gbs": ("device memory (DRAM)", "GB/s"), "l2_gbs": ("L2 cache", "GB/s"),
                 "fp32_gflops": ("FP32 FMA", "GFLOP/s"), "fp64_gflops": ("FP64 FMA", "GFLOP/s")}
#: Reference data this module reads (written by ``bench/roofline.py``).
REF_CEILINGS = "ch07_ceilings"
REF_COPY_VARIANTS = "ch07_copy_variants"


@dataclass(frozen=True)
class Ceilings:
    """A GPU's roofline ceilings and where they come from.

    Attributes:
        gpu: the GPU's name.
        dram_gbs, l2_gbs: bandwidths in GB/s (None if unknown).
        fp32_gflops, fp64_gflops: FMA peaks in GFLOP/s (None if unknown).
        source: ``"measured"``, ``"reference"`` or ``"datasheet"``.
        label: how plots name them, e.g. ``"measured on NVIDIA H100 80GB HBM3 (2026-11-21)"``.
        details: how each was obtained (kernel, launch, clock, date...).
    """

    gpu: str
    dram_gbs: float | None
    l2_gbs: float | None
    fp32_gflops: float | None
    fp64_gflops: float | None
    source: str
    label: str
    details: dict = field(default_factory=dict)

    def copy_gbs(self) -> float | None:
        """The copy ceiling of these ceilings' run in GB/s: the yardstick, which ``dram_gbs`` is not always.

        ``dram_gbs`` is the device-memory ceiling, the fastest streaming kernel measured (copies and a triad,
        :func:`~labhelpers.roofline.measure.measure_stream_bandwidth`); the copy is its fastest copy
        (:func:`~labhelpers.roofline.measure.measure_dram_bandwidth`), kept in ``details["copy_gbs"]`` by
        :func:`~labhelpers.roofline.measure.measure_ceilings` and by :func:`reference_ceilings` (from
        ``ch07_copy_variants``). Ceilings without it (cached before the triad was measured, a datasheet) have
        only ``dram_gbs``, which then is the copy (or the datasheet's peak).
        """
        copy = self.details.get("copy_gbs")
        return float(copy) if copy is not None else self.value("dram_gbs")

    def value(self, name: str) -> float | None:
        """The ceiling called ``name`` (``"dram_gbs"``, ``"l2_gbs"``, ``"fp32_gflops"``, ``"fp64_gflops"``)."""
        if name not in CEILING_NAMES:
            raise KeyError(f"unknown ceiling {name!r}: use one of {', '.join(CEILING_NAMES)}")
        v = getattr(self, name)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    def balance(self, compute: str = "fp32_gflops", memory: str = "dram_gbs") -> float:
        """Machine balance (FLOP/byte) for one compute and one memory ceiling."""
        p, b = self.value(compute), self.value(memory)
        if p is None or b is None:
            return float("nan")
        return machine_balance(p, b)

    def attainable(self, intensity, compute: str = "fp32_gflops", memory: str = "dram_gbs"):
        """The roofline ``min(B I, P)`` of these ceilings."""
        return attainable(intensity, self.value(memory), self.value(compute))

    def fp32_peak_at_recorded_clock(self) -> tuple[float, float] | None:
        """``(peak GFLOP/s, clock MHz)``: SMs x FP32 lanes x 2 x the clock recorded with these ceilings, or None."""
        d = self.details
        sm, clock, cc = d.get("sm_count"), d.get("clock_khz"), d.get("compute_capability")
        try:
            lanes = FP32_LANES_PER_SM[tuple(int(v) for v in str(cc).split("."))]
        except (KeyError, ValueError):
            return None
        if not sm or not clock:
            return None
        return peak_at_clock_gflops(int(sm), int(clock), lanes), int(clock) / 1e3

    def source_line(self) -> str:
        """One line, starting ``Data source: ``, saying where these ceilings come from."""
        return self.details.get("source_line") or f"{SOURCE_PREFIX}{self.label}."

    def as_table(self) -> pd.DataFrame:
        """One row per ceiling: ``ceiling``, ``value``, ``unit``, ``how``."""
        how = self.details.get("how", {})
        return pd.DataFrame([{"ceiling": key, "value": self.value(key), "unit": unit, "how": how.get(key, "")}
                             for key, (_name, unit) in CEILING_NAMES.items()])

    def to_json(self) -> dict:
        """A JSON-ready dict (what the cache file holds)."""
        return {"format": cache.FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> "Ceilings":
        """Rebuild from :meth:`to_json`'s dict."""
        keys = ("gpu", "dram_gbs", "l2_gbs", "fp32_gflops", "fp64_gflops", "source", "label", "details")
        return cls(**{k: data.get(k) if k != "details" else data.get(k) or {} for k in keys})


# ------------------------------------------------------------------------------------------- the cache


def load_cached_ceilings(device_name: str | None = None) -> Ceilings | None:
    """The ceilings measured and cached on this device (or ``device_name``), or None if none were measured yet."""
    data = cache.read_json(cache.device_cache_dir(device_name) / cache.CEILINGS_FILE)
    if data is None:
        return None
    try:
        return Ceilings.from_json(data)
    except (TypeError, KeyError):
        return None


def save_cached_ceilings(ceilings: Ceilings) -> None:
    """Cache ``ceilings`` for their GPU (``<cache_root>/<gpu>/ceilings.json``), for every chapter to reuse."""
    path = cache.device_cache_dir(ceilings.gpu) / cache.CEILINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ceilings.to_json(), indent=1) + "\n")


# ------------------------------------------------------------------------------------- peaks at a clock


def fp32_peak_at_clock(info: device.DeviceInfo | None = None) -> float | None:
    """The FP32 FMA peak of this GPU at the clock it reports (``device_info().clock_khz``), or None if unknown."""
    return _peak_from_info(info, FP32_LANES_PER_SM)


def fp64_peak_at_clock(info: device.DeviceInfo | None = None) -> float | None:
    """The FP64 FMA peak of this GPU at the clock it reports, or None if unknown."""
    return _peak_from_info(info, FP64_LANES_PER_SM)


def _peak_from_info(info: device.DeviceInfo | None, table: dict) -> float | None:
    info = info or device.device_info()
    if info.is_simulator or not info.sm_count or not info.clock_khz or info.compute_capability is None:
        return None
    lanes = table.get(tuple(info.compute_capability))
    return None if lanes is None else peak_at_clock_gflops(info.sm_count, info.clock_khz, lanes)


# ------------------------------------------------------------------------------------------ datasheets


def _datasheets() -> list[dict]:
    text = resources.files("labhelpers.data").joinpath("datasheets.json").read_text()
    return json.loads(text)["gpus"]


def datasheet_entry(gpu_name: str) -> dict | None:
    """The datasheet record of the first known GPU whose pattern matches ``gpu_name``, or None."""
    for entry in _datasheets():
        if re.search(entry["match"], gpu_name, flags=re.IGNORECASE):
            return entry
    return None


def datasheet_ceilings(gpu_name: str | None = None) -> Ceilings | None:
    """NVIDIA's published ceilings for a known GPU (this one by default), or None for an unknown GPU.

    Datasheets give no L2 bandwidth, so ``l2_gbs`` is None.
    """
    if gpu_name is None:
        info = device.device_info()
        if info.is_simulator:
            return None
        gpu_name = info.name
    entry = datasheet_entry(gpu_name)
    if entry is None:
        return None
    return Ceilings(gpu=gpu_name, dram_gbs=entry["dram_gbs"], l2_gbs=None, fp32_gflops=entry["fp32_gflops"],
                    fp64_gflops=entry["fp64_gflops"], source="datasheet", label=f"datasheet: {entry['key']}",
                    details={"source": entry["source"], "url": entry["url"], "key": entry["key"],
                             "boost_clock_mhz": entry.get("boost_clock_mhz"), "sm_count": entry.get("sm_count")})


def datasheet_table() -> pd.DataFrame:
    """Every known GPU's datasheet ceilings, with the source of each."""
    return pd.DataFrame([{k: e.get(k) for k in ("key", "dram_gbs", "fp32_gflops", "fp64_gflops", "sm_count",
                                                  "boost_clock_mhz", "source")} for e in _datasheets()])


def compare_ceilings(measured: Ceilings, datasheet: Ceilings | None) -> pd.DataFrame:
    """Measured ceilings beside the datasheet's, with the ratio measured / datasheet."""
    rows = []
    for key, (name, unit) in CEILING_NAMES.items():
        m = measured.value(key)
        d = datasheet.value(key) if datasheet is not None else None
        rows.append({"ceiling": name, "unit": unit, "measured": m, "datasheet": d,
                     "measured / datasheet": (m / d) if (m is not None and d) else None})
    return refdata.typed_columns(pd.DataFrame(rows))


# ------------------------------------------------------------------------------------ reference data


def ceilings_from_table(table: pd.DataFrame, gpu: str, label: str, source: str = "reference",
                        details: dict | None = None) -> Ceilings:
    """Rebuild :class:`Ceilings` from :meth:`Ceilings.as_table`'s table (as reference data stores it)."""
    values = {}
    how = {}
    for _, row in table.iterrows():
        v = row["value"]
        values[row["ceiling"]] = float("nan") if v is None else float(v)  # NaN: not measured
        how[row["ceiling"]] = row.get("how", "")
    return Ceilings(gpu=gpu, source=source, label=label, details={"how": how, **(details or {})},
                    **{k: values.get(k) for k in CEILING_NAMES})


def reference_details(meta: dict) -> dict:
    """The details of the reference GPU's ceilings: ``ch07_ceilings``' ``meta``, and ``copy_gbs``, the fastest copy
    of the same run (reference ``ch07_copy_variants``; see :meth:`Ceilings.copy_gbs`)."""
    details = dict(meta)
    try:
        copies = refdata.load_reference(REF_COPY_VARIANTS).table
        details.setdefault("copy_gbs", float(copies["gbps"].max()))
    except FileNotFoundError:  # a reference set without the copies: dram_gbs stands in (Ceilings.copy_gbs)
        pass
    return details


def reference_ceilings() -> Ceilings:
    """The ceilings measured on the reference GPU (reference data ``ch07_ceilings``), labelled with that GPU.

    ``dram_gbs`` is its device-memory ceiling, :meth:`Ceilings.copy_gbs` its fastest copy (the yardstick).
    """
    ref = refdata.load_reference(REF_CEILINGS)
    return ceilings_from_table(ref.table, ref.gpu, ref.label, details=reference_details(ref.meta))


# ------------------------------------------------------------------------------- the copies tried

#: ``kernel=`` of :func:`~labhelpers.roofline.measure.time_copy` for CuPy's copy (and the ``grid`` of its row
#: among the copies tried), and the name of that row.
LIBRARY = "library"
LIBRARY_COPY_NAME = "CuPy copy, dst[:] = src (library)"
#: Columns of :func:`copy_variants_table` (and of reference data ``ch07_copy_variants``).
COPY_VARIANT_COLUMNS = ["kernel", "access_bytes", "threads", "blocks", "grid", "gbps"]


def copy_variants_table(ceilings: Ceilings) -> pd.DataFrame:
    """The copies tried for the device-memory ceiling, fastest first (empty if none were recorded)."""
    rows = ceilings.details.get("tried", {}).get("dram_gbs", [])
    table = pd.DataFrame([r for r in rows if isinstance(r, dict) and "gbps" in r], columns=COPY_VARIANT_COLUMNS)
    return refdata.typed_columns(table).sort_values("gbps", ascending=False, ignore_index=True)


def copy_variants_or_reference(ceilings: Ceilings) -> Measured:
    """The copies tried for ``ceilings``' copy ceiling when they were measured on this GPU; else the reference's.

    Returns:
        A :class:`~labhelpers.measured.Measured` with :data:`COPY_VARIANT_COLUMNS` (it unpacks as ``table, label``).
    """
    def measure() -> pd.DataFrame:
        table = copy_variants_table(ceilings) if ceilings.source == "measured" else None
        if table is None or not len(table):
            raise GPUOnlyError(f"the ceilings shown ({ceilings.label}) list no copies measured on this GPU")
        return table

    m = live_or_reference(measure, REF_COPY_VARIANTS)
    return dataclasses.replace(m, table=m.table.sort_values("gbps", ascending=False, ignore_index=True))
