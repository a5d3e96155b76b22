"""Every kernel the tests launch compiles for the GPUs students get, and every recorded launch fits each of them.

Compiles (no GPU: the CUDA 12 compiler wheels) each kernel of ``tools/compile_check/launches.json`` with its
recorded argument types for sm_75, sm_80, sm_86, sm_89 and sm_90 (``tools/compile_check/compile_kernels.py``, in a
subprocess: numba-cuda in GPU mode, while this process runs the simulator; results cached by source hash in
``resources.json``), then checks each recorded launch (threads per block, dynamic shared memory) against that
architecture's limits with ``labhelpers.gpus.STUDENT_GPUS``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "compile_check"
import check  # noqa: E402  (tools/compile_check/check.py)

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def _have_compiler() -> bool:
    return importlib.util.find_spec("nvidia.cuda_nvcc") is not None and \
        importlib.util.find_spec("nvidia.cuda_nvrtc") is not None


@pytest.fixture(scope="module")
def table() -> list[dict]:
    if not _have_compiler():
        message = ("the CUDA 12 compiler wheels are missing: pip install -r requirements.txt "
                   "(nvidia-cuda-nvcc-cu12, nvidia-cuda-nvrtc-cu12)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["LABHELPERS_BACKEND"] = "compile"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(TOOLS / "compile_kernels.py"), "--jobs", "2"], env=env,
                         capture_output=True, text=True, timeout=900)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert run.returncode == 0 or failed, f"compile_kernels.py crashed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    return check.load()


def test_manifest_names_kernels_with_types_and_launches():
    manifest = json.loads(check.MANIFEST.read_text())
    assert len(manifest) >= 10
    for path, entry in manifest.items():
        assert entry["signatures"] and entry["launches"], path
        assert all(1 <= launch["threads"] <= 1024 for launch in entry["launches"]), path


def test_every_launch_fits_every_student_gpu(table):
    bad = check.problems(table)
    assert not bad, f"{len(bad)} launch(es) would fail on a GPU students get:\n" + "\n".join(bad[:40])


def test_report_is_current(table):
    assert check.REPORT.read_text() == check.report(table), (
        "tools/compile_check/report.md is stale: run PYTHONPATH=$PWD/src python tools/compile_check/check.py")


def test_limits_table_covers_the_five_architectures():
    from labhelpers.errors import LaunchConfigError
    from labhelpers import gpus
    from labhelpers.models import occupancy as occ

    assert set(gpus.STUDENT_GPUS) == {(7, 5), (8, 0), (8, 6), (8, 9), (9, 0)}
    t4 = gpus.STUDENT_GPUS[(7, 5)]
    # 1024 threads per SM on a T4: a 1024-thread block fits with 64 registers per thread, not with 65 (64 K registers)
    assert occ.occupancy(1024, 64, 0, t4).blocks_per_sm == 1
    with pytest.raises(LaunchConfigError, match="registers per block"):
        occ.occupancy(1024, 65, 0, t4)
