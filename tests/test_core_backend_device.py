"""Backend choice, device description and the banner."""

import importlib

import pytest

import labhelpers as lh
from labhelpers import backend, device
from markers import SIM, gpu_only, sim_only

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


@sim_only
def test_simulator_is_chosen_in_tests():
    assert lh.is_simulator() and not lh.is_gpu()


@gpu_only
def test_gpu_is_chosen_with_labhelpers_backend_gpu():
    assert lh.is_gpu() and not lh.is_simulator()


def test_bad_backend_value_names_the_choices(monkeypatch):
    monkeypatch.setenv(backend.ENV_VAR, "cuda")
    with pytest.raises(ValueError, match="auto, gpu, sim"):
        backend.requested()


def test_gpu_requested_without_gpu_fails_with_the_fix(monkeypatch):
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    monkeypatch.setattr(backend, "_chosen", None)
    monkeypatch.setattr(backend, "driver_device_count", lambda: 0)
    with pytest.raises(lh.NoGPUError, match="Change runtime type"):
        backend.configure()


@sim_only
def test_mode_conflict_with_imported_numba_is_explained(monkeypatch):
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    monkeypatch.setattr(backend, "_chosen", None)
    monkeypatch.setattr(backend, "driver_device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="Restart the kernel"):
        backend.configure()


def test_driver_probe_never_raises():
    assert backend.driver_device_count() >= 0


@sim_only
def test_simulator_banner_says_no_gpu_timings():
    text = device.banner()
    assert text.startswith(device.BANNER_PREFIX)
    assert "correctness only" in text and "not GPU timings" in text


def test_gpu_banner_lists_the_essentials():
    info = device.DeviceInfo(backend="gpu", name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), sm_count=132,
                             total_memory_bytes=80 * 2**30, driver_version="13.0", runtime_version="12.8")
    text = device.banner(info)
    for part in ("NVIDIA H100", "compute capability 9.0", "132 SMs", "80 GiB", "13.0", "12.8"):
        assert part in text


def test_peak_bandwidth_from_clock_and_bus():
    info = device.DeviceInfo(backend="gpu", name="x", memory_clock_khz=2_619_000, memory_bus_bits=5120)
    assert info.peak_memory_bandwidth_gbs == pytest.approx(3352, rel=1e-3)
    assert device.DeviceInfo(backend="sim", name="s").peak_memory_bandwidth_gbs is None


def test_problem_size_and_awkward_sizes_follow_the_backend():
    assert lh.problem_size(gpu=2**26, sim=1000) == (1000 if SIM else 2**26)
    if SIM:  # a few thousand threads per launch at most: the simulator runs about 7,000 a second
        assert lh.awkward_sizes()[-1] < 5000
    with pytest.raises(ValueError):
        lh.problem_size(gpu=0, sim=10)


@sim_only
def test_xp_is_numpy_in_the_simulator():
    import numpy as np

    xp_mod = importlib.import_module("labhelpers.xp")
    assert xp_mod.xp is np and not xp_mod.HAS_CUPY


def test_resident_blocks_come_from_the_drivers_counts():
    t4 = device.DeviceInfo(backend="gpu", name="Tesla T4", compute_capability=(7, 5), max_threads_per_sm=1024,
                           max_blocks_per_sm=16)
    assert (t4.resident_blocks(256), t4.resident_blocks(32), t4.resident_blocks(1024)) == (4, 16, 1)
    assert device.resident_blocks(2048, 1024, 16) == 1  # at least one block
    with pytest.raises(lh.ArgumentError, match="gpus.current"):
        device.DeviceInfo(backend="sim", name="simulator").resident_blocks(256)
