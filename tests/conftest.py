"""Test configuration: the package tests run under Numba's CUDA simulator unless told otherwise.

``LABHELPERS_BACKEND=gpu python -m pytest tests`` runs them on a GPU. Tests of behaviour only one
backend has are marked with the shared markers of ``tests/markers.py`` (``from markers import sim_only,
gpu_only``), re-exported here.
"""

import os

os.environ.setdefault("LABHELPERS_BACKEND", "sim")
os.environ.setdefault("MPLBACKEND", "Agg")

from markers import SIM, gpu_only, sim_only  # noqa: E402,F401  (after the backend is chosen)
