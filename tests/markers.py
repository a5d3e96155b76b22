"""The two backend markers every test file uses (one definition, imported from here).

The package tests run under Numba's CUDA simulator (CI has no GPU); on a GPU machine they run with
``LABHELPERS_BACKEND=gpu``. A test of something only one backend has is marked:

* ``@sim_only``: checks simulator behaviour (``GPUOnlyError`` raised, NaN timings, the simulator's
  ``IndexError``); skipped on a GPU, where the real thing runs instead.
* ``@gpu_only``: needs a CUDA GPU (warp intrinsics, real timings); skipped under the simulator.

``tests/conftest.py`` chooses the backend before this module imports ``labhelpers``.
"""

from __future__ import annotations

import pytest

import labhelpers as lh

SIM = lh.is_simulator()

sim_only = pytest.mark.skipif(not SIM, reason="checks simulator behaviour (this run has a GPU)")
gpu_only = pytest.mark.skipif(SIM, reason="needs a CUDA GPU (run with LABHELPERS_BACKEND=gpu)")

__all__ = ["SIM", "gpu_only", "sim_only"]
