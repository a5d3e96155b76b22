"""Measurements taken on a real GPU, shipped with the package.

Each reference is one JSON file in ``labhelpers/data/reference/``::

    {"meta": {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
              "driver": "13.0", "runtime": "13.0", "date": "2026-11-21", ...},
     "columns": ["threads", "gbps", ...],
     "rows": [[32, 812.5, ...], ...]}

:func:`load_reference` returns a :class:`Reference` (the table as a DataFrame, the
metadata, and a :attr:`Reference.label` to put on plots). ``bench/run_all.py --collect``
writes these files with :func:`save_reference` on the GPU machine.

Reference sets: every table the book measures is collected in one run on the book's reference GPU
(:data:`REFERENCE_SETS`' first entry, files in ``data/reference/``). The package ships that one set; a
second GPU's full run would be a folder ``data/reference/<set>/`` named by a second entry (and listed in
``pyproject.toml``'s package data), so that a figure could show both GPUs side by side, each labelled. The
environment variable ``LABHELPERS_REFERENCE`` chooses which set is "the" reference (default: the first).
Tables published elsewhere and cited by the book (a lecture's table, a textbook's) carry a
``source`` in their metadata and live only in the main set (:func:`is_cited`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pandas as pd
from . import device

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


#: The reference machines, by set name: the folder of each set's files under ``data/reference/``.
#: The first is the book's reference GPU (the device machine's default kind, an H200); it is the only set shipped.
REFERENCE_SETS: dict[str, str] = {"H200": ""}
#: ``LABHELPERS_REFERENCE=H200`` makes that set the reference every chapter shows.
SET_ENV_VAR = "LABHELPERS_REFERENCE"


def chosen_set() -> str:
    """The reference set chapters show: ``LABHELPERS_REFERENCE`` if set, else the first of :data:`REFERENCE_SETS`."""
    value = os.environ.get(SET_ENV_VAR, "").strip()
    if not value:
        return next(iter(REFERENCE_SETS))
    for name in REFERENCE_SETS:
        if name.lower() == value.lower():
            return name
    raise ValueError(f"{SET_ENV_VAR}={value!r} names no reference set: use one of {', '.join(REFERENCE_SETS)}")


def _set_dir(machine: str | None) -> Path:
    """The folder of reference set ``machine`` (default: :func:`chosen_set`)."""
    override = os.environ.get(DIR_ENV_VAR)
    base = Path(override) if override and Path(override).is_dir() else Path(str(resources.files(DATA_PACKAGE)))
    machine = chosen_set() if machine is None else machine
    if machine not in REFERENCE_SETS:
        raise ValueError(f"no reference set {machine!r}: the sets are {', '.join(REFERENCE_SETS)}")
    return base / REFERENCE_SETS[machine] if REFERENCE_SETS[machine] else base


def _data_dir() -> Path:
    return _set_dir(None)


def available_references(machine: str | None = None) -> list[str]:
    """Names of the reference files of set ``machine`` (default: the chosen set) shipped with the package."""
    return sorted(p.stem for p in _set_dir(machine).glob("*.json"))


def is_cited(reference: "Reference") -> bool:
    """True for a table published elsewhere and cited by the book, not measured by this project."""
    return "source" in reference.meta


def load_reference(name: str, directory: str | Path | None = None, *, machine: str | None = None) -> Reference:
    """Load the reference measurement ``name`` (a file ``name.json``).

    Args:
        name: the reference's name, e.g. ``"ch06_reduction_sweep"``.
        directory: read from this folder instead of the package's data.
        machine: which reference set (a key of :data:`REFERENCE_SETS`); default: :func:`chosen_set`.
            A cited table (a lecture's or a book's) exists only in the main set and is found from any set.

    Raises:
        FileNotFoundError: no such reference; the message lists the available ones.
        ValueError: the file lacks required metadata, or ``machine`` names no set.
    """
    folder = Path(directory) if directory is not None else _set_dir(machine)
    path = folder / f"{name}.json"
    if not path.exists() and directory is None and folder != _set_dir(next(iter(REFERENCE_SETS))):
        main = _set_dir(next(iter(REFERENCE_SETS))) / f"{name}.json"
        if main.exists() and "source" in json.loads(main.read_text()).get("meta", {}):
            path, folder = main, main.parent
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


#: ``bench/run_all.py`` sets this to one identifier per collection run; every file of a run carries it.
RUN_ENV_VAR = "LABHELPERS_RUN_ID"


def current_meta() -> dict:
    """Metadata describing the current GPU and software, for :func:`save_reference`."""

    info = device.device_info()
    if info.is_simulator:
        raise RuntimeError("reference data must be measured on a real GPU, not under the simulator")
    meta = {
        "gpu": info.name,
        "run": os.environ.get(RUN_ENV_VAR, ""),
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
