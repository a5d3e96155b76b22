"""The host CPU description that every CPU baseline records (model, usable CPUs, quota, Numba's threads)."""

from __future__ import annotations

import os

import labhelpers as lh  # noqa: F401  (first: chooses the backend)
import numba

from labhelpers import host
import pytest

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def test_host_cpu_describes_this_machine():
    cpu = host.host_cpu()
    assert cpu.model and cpu.logical_cpus == os.cpu_count()
    assert 1 <= cpu.usable_cpus <= cpu.logical_cpus
    assert cpu.numba_threads == numba.get_num_threads()
    line = cpu.describe()
    assert f"Numba {cpu.numba_threads} threads" in line and f"of {cpu.logical_cpus} CPUs usable" in line
    assert set(cpu.as_meta()) == {"cpu_model", "cpu_logical", "cpu_usable", "cpu_quota", "numba_threads",
                                  "numba_threading_layer"}


def test_cpu_quota_reads_cgroup_v2_and_v1(tmp_path):
    assert host.cpu_quota(tmp_path) is None  # nothing to read: no limit known
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert host.cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert host.cpu_quota(tmp_path) == 2.0
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert host.cpu_quota(v1) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("150000\n")
    assert host.cpu_quota(v1) == 1.5
