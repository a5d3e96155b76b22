"""Where this machine keeps what it measured: one folder per GPU, shared by every chapter.

``<cache_root>/<device name>/`` holds ``ceilings.json`` (:mod:`~labhelpers.roofline.ceilings`), ``points.json``
(the chapters' roofline points) and ``lab_points.json`` (the labs' points, kept apart:
:mod:`~labhelpers.roofline.points`). The root is ``$LABHELPERS_CACHE_DIR``, or ``~/.cache/labhelpers``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import device

CACHE_ENV_VAR = "LABHELPERS_CACHE_DIR"
CEILINGS_FILE = "ceilings.json"
POINTS_FILE = "points.json"
LAB_POINTS_FILE = "lab_points.json"
#: Version of the cache files; 2: ceilings measured with the 16-byte copies and the list of copies tried
#: (a cache written by an older version is measured again).
FORMAT = 2


def safe_name(name: str) -> str:
    """``name`` as a folder name: runs of characters other than letters, digits, ``._-`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "device"


def cache_root() -> Path:
    """Where measured ceilings and points are kept: ``$LABHELPERS_CACHE_DIR`` or ``~/.cache/labhelpers``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "labhelpers"


def device_cache_dir(device_name: str | None = None) -> Path:
    """The cache folder of one device (the current GPU by default): ``<cache_root>/<device name>/``."""
    if device_name is None:
        device_name = device.device_info().name
    return cache_root() / safe_name(device_name)


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None when the file is missing, unreadable or of another format version."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` (with the current format version) to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": FORMAT, **data}, indent=1) + "\n")
