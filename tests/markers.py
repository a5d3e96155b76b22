"""The two backend markers every test file uses (one definition, imported from here).

The package tests run under Numba's CUDA simulator (CI has no GPU); on a GPU machine they run with
``LABHELPERS_BACKEND=gpu``. A test of something only one backend has is marked:

* ``@sim_only``: checks simulator behaviour (``GPUOnlyError`` raised, NaN timings, the simulator's
  ``IndexError``); skipped on a GPU, where the real thing runs instead.
* ``@gpu_only``: needs a CUDA GPU (warp intrinsics, real timings); skipped under the simulator.
* ``@full_only``: a long simulator run that CI's 15 minutes cannot pay for (the untimed candidates of
  ``kernels/*_candidates.py``, which ``bench/tuning/`` checks on a GPU before timing them); runs when
  ``LABHELPERS_FULL_TESTS=1``.

``tests/conftest.py`` chooses the backend before this module imports ``labhelpers``.
"""

from __future__ import annotations

import os

import pytest

import labhelpers as lh

SIM = lh.is_simulator()

sim_only = pytest.mark.skipif(not SIM, reason="checks simulator behaviour (this run has a GPU)")
gpu_only = pytest.mark.skipif(SIM, reason="needs a CUDA GPU (run with LABHELPERS_BACKEND=gpu)")
FULL = os.environ.get("LABHELPERS_FULL_TESTS", "") not in ("", "0")
full_only = pytest.mark.skipif(not FULL, reason="a long simulator run: set LABHELPERS_FULL_TESTS=1")

__all__ = ["FULL", "SIM", "full_only", "gpu_only", "sim_only"]
