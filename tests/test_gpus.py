"""The one GPU every hardware default comes from: this GPU's numbers on a (faked) T4, the reference GPU's under the
simulator, and float64 sizes that shrink on FP64-poor GPUs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import labhelpers as lh
from labhelpers.chapters import CHAPTERS
from labhelpers import backend, device, gpus, sizes
from labhelpers import runtime_estimate as rt
from labhelpers.device import DeviceInfo
from labhelpers.exercises import bsp as ex_bsp
from labhelpers.experiments import bsp as bsp_exp
from labhelpers.experiments import scheduling as sched_exp
from labhelpers.kernels import reduction as kr
from labhelpers.kernels import roofline as krl
from labhelpers.models import nbody as nbody_model
from labhelpers.roofline import model as rl_model
from mutants import load_solutions

#: A Tesla T4 as its driver describes it (Colab's free GPU): 40 SMs, 1024 threads and 16 blocks per SM, 64 KB.
T4_INFO = DeviceInfo(backend="gpu", name="Tesla T4", compute_capability=(7, 5), sm_count=40,
                     max_threads_per_sm=1024, max_blocks_per_sm=16, registers_per_sm=65536, registers_per_block=65536,
                     max_shared_per_sm=65536, max_shared_per_block=49152, max_shared_per_block_optin=65536,
                     clock_khz=1590000, memory_clock_khz=5001000, memory_bus_bits=256,
                     reserved_shared_per_block=0)


#: What the tests really run on (the simulator in CI).
RUNNING_ON = device.device_info


@pytest.fixture
def on_a_t4(monkeypatch):
    """Make gpus.current() and labhelpers.device.device_info() describe the faked T4 (kernels still run where
    they run)."""
    monkeypatch.setattr(gpus, "device_info", lambda: T4_INFO)
    monkeypatch.setattr(device, "device_info", lambda: T4_INFO)
    return gpus.current()


def test_a_t4_is_described_by_its_driver_and_datasheet(on_a_t4):
    t4 = on_a_t4
    assert (t4.name, t4.compute_capability, t4.sm_count, t4.is_live) == ("Tesla T4", "7.5", 40, True)
    assert t4.label == "this GPU (Tesla T4)"
    assert (t4.sm.max_threads_per_sm, t4.sm.max_blocks_per_sm, t4.sm.shared_per_sm) == (1024, 16, 65536)
    assert (t4.dram_gbs, t4.fp32_gflops) == (320, 8100)  # the datasheet's figures
    assert t4.fp64_ratio == pytest.approx(1 / 32) and t4.fp64_poor
    assert t4.resident_threads == 40 * 1024
    assert t4.blocks_per_sm(1024) == 1 and t4.blocks_per_sm(256) == 4 and t4.blocks_per_sm(32) == 16


@pytest.mark.skipif(not backend.is_simulator(), reason="the simulator's reference GPU")
def test_under_the_simulator_the_reference_gpu_is_named_from_its_device_record():
    ref = gpus.current()
    record = lh.load_reference(gpus.DEVICE_RECORD)
    assert ref.name == record.gpu and ref.where == "reference GPU" and not ref.is_live
    assert ref.label == f"reference GPU ({record.gpu})"
    assert ref.sm_count == record.meta["sm_count"]
    assert ref.sm is gpus.limits_for(record.meta["compute_capability"])
    assert ref == gpus.reference()


def test_student_gpus_come_from_the_datasheets():
    t4, l4, a100 = (gpus.student_gpu(k) for k in ("T4", "L4", "A100"))
    assert (t4.sm_count, l4.sm_count, a100.sm_count) == (40, 58, 108)
    assert t4.fp64_poor and l4.fp64_poor and not a100.fp64_poor
    assert l4.fp64_ratio == pytest.approx(1 / 64)
    with pytest.raises(lh.ArgumentError, match="must be one of"):
        gpus.student_gpu("K80")


def test_the_simulator_is_no_gpu():
    with pytest.raises(lh.ArgumentError, match="gpus.current"):
        gpus.from_device_info(DeviceInfo(backend="sim", name="simulator"))


def test_throttle_blocks_follow_the_sm(on_a_t4):
    assert sched_exp.throttle_blocks() == (4, 5, 6, 8, 10, 12, 16)
    assert sched_exp.throttle_blocks(gpus.student_gpu("H100")) == sched_exp.THROTTLE_BLOCKS


@pytest.mark.judges_no_timing
def test_slackness_fill_counts_the_t4s_thread_slots(on_a_t4):
    table = bsp_exp.measure_slackness(200, [(1, 32), (2, 32)], sm_count=40, progress=False)
    assert list(table["fill"]) == [32 / (40 * 1024), 64 / (40 * 1024)]


def test_nbody_models_count_the_t4s_sms(on_a_t4):
    sms = on_a_t4.sm_count  # the model takes the SMs; gpus.current() gives this GPU's
    assert nbody_model.busy_sms(4096, 512, 4, sm_count=sms)["busy_sm_share"] == 2 / 40
    limits = nbody_model.unit_limits(12, 1, 0, sm_count=sms, clock_ghz=1.59).set_index("unit")
    assert limits.loc["issue", "ginteractions"] == pytest.approx(4 * 32 / 13 * 40 * 1.59)


def test_full_grids_fill_the_t4(on_a_t4, monkeypatch):
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    assert krl.full_grid(256) == (40 * 4, 256)
    assert krl.full_grid(1024, waves=2) == (40 * 1 * 2, 1024)
    assert kr.resident_blocks(256) == 160


def test_time_bounds_take_the_link_they_are_given():
    c = rl_model.saxpy_counts(2**26)
    t4 = gpus.student_gpu("T4")
    table = rl_model.time_bounds(c.flops, c.nbytes, host_bytes=c.nbytes, peak_gflops=t4.fp32_gflops,
                                 bandwidth_gbs=t4.dram_gbs, link_gbs=16.0).set_index("limit")
    assert table.loc["host transfer", "rate"] == "16 GB/s" and table.loc["host transfer", "binding"]
    with pytest.raises(TypeError):
        rl_model.time_bounds(c.flops, c.nbytes, c.nbytes, peak_gflops=1.0, bandwidth_gbs=1.0)


def test_fp64_sizes_shrink_on_fp64_poor_gpus(on_a_t4, monkeypatch):
    ref = gpus.reference()
    # a T4: FP64 at 253 GFLOP/s against the reference GPU's tens of TFLOP/s
    factor = on_a_t4.fp64_gflops / ref.fp64_gflops
    assert sizes.scale_for_fp64(2**24, on_a_t4, ref) == int(2**24 * factor)
    n = sizes.scale_for_fp64(4096, on_a_t4, ref, power=3, multiple=256)
    assert n % 256 == 0 and 256 <= n < 4096 and (n / 4096) ** 3 <= factor * 1.5
    # FP64-rich GPUs keep the size
    assert sizes.scale_for_fp64(4096, gpus.student_gpu("A100"), ref, power=3) == 4096
    assert sizes.scale_for_fp64(100, on_a_t4, ref, power=1, multiple=256) == 256  # never below one multiple
    monkeypatch.setattr(backend, "is_simulator", lambda: False)
    assert lh.fp64_problem_size(gpu=4096, sim=64, power=3, multiple=256) == n


def test_fp64_problem_size_under_the_simulator_and_bad_input():
    if backend.is_simulator():
        assert lh.fp64_problem_size(gpu=4096, sim=64, power=3) == 64
    with pytest.raises(lh.ArgumentError, match="power"):
        lh.fp64_problem_size(gpu=4096, sim=64, power=0)


# ------------------------------------------------------------------------------------------ run time per GPU
def test_runtime_estimates_scale_with_the_gpus_ceilings():
    table = rt.estimate_table()
    assert list(table.columns) == list(rt.GPU_KEYS)
    assert len(table) == len(CHAPTERS) + 1 and table.index[-1].startswith("install")
    chapters = table.iloc[:-1]
    assert (chapters > 0).all().all()
    assert (chapters["T4"] >= chapters["H200"]).all()  # less bandwidth and fewer FLOP/s never make it faster
    assert chapters["T4"].sum() > chapters["H200"].sum()
    t4 = rt.estimate(3, "T4")
    assert t4.gpu == "Tesla T4" and not t4.measured
    assert t4.seconds == pytest.approx(t4.gpu_seconds + t4.host_seconds + t4.fixed_seconds)
    assert t4.fixed_seconds == rt.estimate(3, "H200").fixed_seconds  # compiling and Python: the same everywhere


def test_a_float64_row_scales_by_the_fp64_peak_unless_its_cell_shrinks_it():
    ref, t4 = gpus.reference(), gpus.student_gpu("T4")
    row = {"precision": "fp64", "gflops": 0.9 * ref.fp64_gflops, "gbps": 1.0}
    assert rt._row_factor("ch05_matmul_sweep", row, ref, t4) == pytest.approx(ref.fp64_gflops / t4.fp64_gflops)
    assert rt._row_factor("ch07_roofline_points", row, ref, t4) == 1.0
    memory = {"gbps": 0.9 * ref.dram_gbs, "gflops": 1.0}
    assert rt._row_factor("ch03_x", memory, ref, t4) == pytest.approx(ref.dram_gbs / t4.dram_gbs)
    assert rt._row_factor("ch03_x", {"gbps": 1.0}, ref, t4) == 1.0  # latency bound


def test_expected_time_names_the_gpu(on_a_t4):
    line = rt.expected_time(3)
    assert "this GPU (Tesla T4)" in line and "min" in line


@pytest.mark.skipif(not backend.is_simulator(), reason="the simulator's sentence")
def test_expected_time_under_the_simulator_names_the_reference_gpu_and_a_t4():
    line = rt.expected_time(7)
    assert f"reference GPU ({gpus.reference().name})" in line and "on a T4" in line and "installing" in line


def test_the_home_page_quotes_the_t4_estimates():
    """book/intro.md's 'On Colab' table is runtime_estimate.markdown_table('T4'): re-measuring fails here."""
    text = (Path(__file__).parents[1] / "book" / "intro.md").read_text()
    assert "## On Colab" in text
    assert rt.markdown_table("T4") in text


@pytest.mark.judges_no_timing
def test_lab_2_timing_fills_the_t4s_thread_slots(on_a_t4, monkeypatch):
    """The blocks per SM that fill every thread slot come from the GPU described (a T4's SM holds 4 blocks of 256, the
    reference GPU's 8); the SM count is the machine's own, so the launch stays small under the simulator (one SM)
    and real on a GPU."""
    monkeypatch.setattr(device, "device_info", RUNNING_ON)
    sms_here = RUNNING_ON().sm_count or 1
    timings = ex_bsp.time_grid_stride(load_solutions("02_bsp_and_amdahl_lab").grid_stride_update, n=300)
    assert timings[-1].label == f"{sms_here * 4} x 256 threads"


def test_a_timed_gpu_run_replaces_the_modelled_fixed_cost(monkeypatch):
    record = {"meta": {"gpu": "Tesla T4", "backend": "gpu", "compute_capability": "7.5", "sm_count": 40},
              "notebooks": {"book/03_memory_hierarchy.ipynb": {"seconds": 300.0, "cells": [[1, 20.0]]}}}
    monkeypatch.setattr(rt, "cell_times", lambda: record)
    on_t4 = rt.estimate(3, "T4")
    assert on_t4.measured and on_t4.seconds == pytest.approx(300.0)  # the run's own GPU gives back its total
    assert rt.estimate(3, "H200").seconds < 300.0
    assert not rt.estimate(4, "T4").measured  # no timing recorded for chapter 4


def test_reference_only_tables_are_the_ones_no_notebook_measures():
    """A table only ever shown with ``lh.live_or_reference(None, name)`` costs a GPU nothing: the estimate leaves it
    out; one that some cell measures (a function as the first argument) is counted."""
    root = Path(__file__).parents[1]
    shown, measured = set(), set()
    for nb in sorted((root / "book").glob("*.ipynb")) + sorted((root / "labs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            for what, name in re.findall(r'live_or_reference\((.*?),\s*"(ch\d+_[a-z0-9_]+)"', "".join(cell["source"]),
                                         re.S):
                (shown if what.strip() == "None" else measured).add(name)
    assert rt.REFERENCE_ONLY_TABLES == shown - measured
