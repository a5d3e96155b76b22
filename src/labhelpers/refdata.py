"""Measurements taken on a real GPU, shipped with the package.

Each reference is one JSON file in ``labhelpers/data/reference/``::

    {"meta": {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
              "driver": "13.0", "runtime": "13.0", "date": "2026-11-21", ...},
     "columns": ["threads", "gbps", ...],
     "rows": [[32, 812.5, ...], ...]}

:func:`load_reference` returns a :class:`Reference` (the table as a DataFrame, the
metadata, and a :attr:`Reference.label` to put on plots). ``bench/collect_reference.py``
writes these files with :func:`save_reference` on the GPU machine.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pandas as pd

#: Where the package's reference files live.
DATA_PACKAGE = "labhelpers.data.reference"
REQUIRED_META = ("gpu", "compute_capability", "driver", "runtime", "date")


@dataclass(frozen=True)
class Reference:
    """One reference measurement: a table and where it came from."""

    name: str
    table: pd.DataFrame
    meta: dict

    @property
    def gpu(self) -> str:
        """The GPU the data was measured on."""
        return self.meta["gpu"]

    @property
    def label(self) -> str:
        """A legend label such as ``reference: NVIDIA H100 80GB HBM3 (2026-11-21)``."""
        return f"reference: {self.gpu} ({self.meta['date']})"

    @property
    def provenance(self) -> str:
        """One sentence saying where, when and with what software the data was measured."""
        m = self.meta
        extra = ", ".join(f"{k} {m[k]}" for k in ("numba_cuda", "cupy") if m.get(k))
        return (
            f"Measured on {m['gpu']} (compute capability {m['compute_capability']}, driver CUDA {m['driver']}, "
            f"runtime CUDA {m['runtime']}{', ' + extra if extra else ''}) on {m['date']}."
        )


#: Set this to a folder to read reference files from there first (for drafting a chapter before
#: its data is measured: never ship placeholder data in the package).
DIR_ENV_VAR = "LABHELPERS_REFERENCE_DIR"


def _data_dir() -> Path:
    override = os.environ.get(DIR_ENV_VAR)
    if override and Path(override).is_dir():
        return Path(override)
    return Path(str(resources.files(DATA_PACKAGE)))


def available_references() -> list[str]:
    """Names of the reference files shipped with the package."""
    return sorted(p.stem for p in _data_dir().glob("*.json"))


def load_reference(name: str, directory: str | Path | None = None) -> Reference:
    """Load the reference measurement ``name`` (a file ``name.json``).

    Raises:
        FileNotFoundError: no such reference; the message lists the available ones.
        ValueError: the file lacks required metadata.
    """
    folder = Path(directory) if directory is not None else _data_dir()
    path = folder / f"{name}.json"
    if not path.exists():
        have = ", ".join(p.stem for p in sorted(folder.glob("*.json"))) or "none"
        raise FileNotFoundError(f"no reference data named {name!r} in {folder} (available: {have})")
    data = json.loads(path.read_text())
    meta = data.get("meta", {})
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise ValueError(f"reference {name!r} lacks metadata {missing}: every reference must say where it came from")
    table = typed_columns(pd.DataFrame(data["rows"], columns=data["columns"]))
    return Reference(name=name, table=table, meta=meta)


def typed_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every object column that holds only numbers and nulls made numeric (nulls become NaN).

    JSON has no NaN: :func:`save_reference` writes a missing number as ``null``, and a column of
    nulls (a quantity not measured, e.g. ``gflops`` of a copy) comes back as ``object``. Callers
    then get ``float64`` columns either way. Columns holding text (or booleans) are left alone.
    """
    out = table.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype != object:
            continue
        present = values.dropna()
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            out[column] = pd.to_numeric(values)
    return out


def current_meta() -> dict:
    """Metadata describing the current GPU and software, for :func:`save_reference`."""
    from . import device

    info = device.device_info()
    if info.is_simulator:
        raise RuntimeError("reference data must be measured on a real GPU, not under the simulator")
    meta = {
        "gpu": info.name,
        "compute_capability": info.cc,
        "sm_count": info.sm_count,
        "driver": info.driver_version,
        "runtime": info.runtime_version,
        "date": _dt.date.today().isoformat(),
    }
    for module in ("numba_cuda", "cupy", "numba", "numpy"):
        try:
            mod = __import__(module)
            meta[module] = getattr(mod, "__version__", "?")
        except Exception:
            pass
    return meta


def save_reference(name: str, table: pd.DataFrame, directory: str | Path, meta: dict | None = None,
                   notes: str | None = None) -> Path:
    """Write ``table`` as reference ``name`` into ``directory`` with the current device's metadata."""
    meta = dict(meta or current_meta())
    if notes:
        meta["notes"] = notes
    clean = table.astype(object).where(pd.notna(table), None)
    data = {"meta": meta, "columns": [str(c) for c in table.columns], "rows": clean.values.tolist()}
    path = Path(directory) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=_to_builtin) + "\n")
    return path


def _to_builtin(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in reference data")
