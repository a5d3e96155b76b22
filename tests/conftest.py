"""Test configuration: the package tests run under Numba's CUDA simulator unless told otherwise.

``LABHELPERS_BACKEND=gpu python -m pytest tests`` runs them on a GPU. Tests of behaviour only one
backend has are marked with the shared markers of ``tests/markers.py`` (``from markers import sim_only,
gpu_only``), re-exported here.
"""

import os

os.environ.setdefault("LABHELPERS_BACKEND", "sim")
# On a machine with several GPUs, tools/run_gpu_tests.sh sets LABHELPERS_GPU_LANES: each pytest-xdist worker then sees
# one GPU of its own (worker gwN gets GPU N mod lanes), set before anything initialises CUDA.
_lanes = int(os.environ.get("LABHELPERS_GPU_LANES", "0") or 0)
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _lanes > 1 and _worker.startswith("gw"):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(int(_worker[2:]) % _lanes)
os.environ.setdefault("MPLBACKEND", "Agg")

from markers import SIM, gpu_only, sim_only  # noqa: E402,F401  (after the backend is chosen)
