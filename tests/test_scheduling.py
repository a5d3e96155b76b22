"""Chapter 4 (scheduling): the warp-timeline model, the occupancy calculator, the kernels and the lab's checkers.

Runs under the simulator: kernels are compared with NumPy on odd sizes; GPU-only pieces must
raise GPUOnlyError; the occupancy numbers of the lectures and of Hopper are checked exactly.
"""

from __future__ import annotations

import dataclasses
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers import device, gpus  # noqa: E402
from labhelpers.device import DeviceInfo  # noqa: E402
from labhelpers import roofline as rl  # noqa: E402
from labhelpers.exercises import scheduling as ex  # noqa: E402
from labhelpers.experiments import scheduling as ks_exp  # noqa: E402
from labhelpers.figures import scheduling as ks_fig  # noqa: E402
from labhelpers.kernels import scheduling as ks  # noqa: E402
from labhelpers.models import occupancy as oc  # noqa: E402
from labhelpers.models import scheduling as wt  # noqa: E402
from markers import gpu_only, sim_only  # noqa: E402
from mutants import lab_skeletons, load_solutions, mutant  # noqa: E402

ODD_SIZES = (1, 31, 33, 257, 1003)


# =========================================================================== warp timeline
def test_g80_three_warps_leave_the_scheduler_idle_one_cycle_in_seven():
    t = wt.simulate(3, burst=20, stall=50, cycles=700)
    assert t.busy_cycles == 600 and t.idle_cycles == 100
    assert t.utilisation == 6 / 7
    # warp 0 issues cycles 0-19, warp 1 20-39, warp 2 40-59, nobody 60-69, warp 0 again from 70
    assert list(t.issuing[:70:10]) == [0, 0, 1, 1, 2, 2, -1]
    assert t.issuing[70] == 0


def test_g80_four_warps_give_full_utilisation():
    t = wt.simulate(4, burst=20, stall=50, cycles=700)
    assert t.utilisation == 1.0 and t.idle_cycles == 0
    assert wt.warps_to_hide(20, 50) == 4
    assert math.ceil(50 / 20) == 3  # the other warps needed to cover one warp's stall


@pytest.mark.parametrize("burst", [1, 5, 20])
@pytest.mark.parametrize("stall", [0, 13, 50])
@pytest.mark.parametrize("n_warps", [1, 2, 3, 4, 6])
def test_simulation_converges_to_the_closed_form(n_warps, burst, stall):
    t = wt.simulate(n_warps, burst, stall, cycles=10 * (burst + stall))
    assert t.utilisation == pytest.approx(wt.steady_state_utilisation(n_warps, burst, stall))


@pytest.mark.parametrize("burst, stall", [(20, 50), (20, 40), (7, 100), (3, 0)])
def test_warps_to_hide_is_the_fewest_that_fill_every_cycle(burst, stall):
    n = wt.warps_to_hide(burst, stall)
    cycles = 5 * (burst + stall)
    assert wt.simulate(n, burst, stall, cycles=cycles).utilisation == 1.0
    if n > 1:
        assert wt.simulate(n - 1, burst, stall, cycles=cycles).utilisation < 1.0


def test_timeline_states_are_consistent():
    t = wt.simulate(5, burst=4, stall=9, cycles=200, policy="round-robin")
    issuing_per_cycle = (t.state == wt.ISSUE).sum(axis=0)
    assert issuing_per_cycle.max() <= 1
    assert issuing_per_cycle.sum() == t.busy_cycles
    for c in range(t.cycles):
        if t.issuing[c] >= 0:
            assert t.state[t.issuing[c], c] == wt.ISSUE


def test_round_robin_stalls_all_warps_together():
    greedy = wt.simulate(4, 20, 50, cycles=1400)
    rr = wt.simulate(4, 20, 50, cycles=1400, policy="round-robin")
    assert greedy.utilisation == 1.0 and rr.utilisation < 0.7


@pytest.mark.parametrize("kwargs", [dict(n_warps=0, burst=20, stall=50), dict(n_warps=2, burst=0, stall=50),
                                    dict(n_warps=2, burst=20, stall=-1), dict(n_warps=2.5, burst=20, stall=5),
                                    dict(n_warps=2, burst=20, stall=5, policy="lottery"),
                                    dict(n_warps=2, burst=20, stall=5, cycles=0)])
def test_timeline_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        wt.simulate(**kwargs)


def test_littles_law():
    assert wt.bytes_in_flight(3000, 500) == 1.5e6
    assert wt.littles_law(70, 1 / 20) == pytest.approx(3.5)
    with pytest.raises(ValueError):
        wt.littles_law(-1, 2)


def test_draw_timeline_runs():
    fig, ax = plt.subplots()
    ks_fig.draw_timeline(ax, wt.simulate(3, 20, 50, cycles=210))
    assert "86%" in ax.get_title()
    plt.close(fig)


# =========================================================================== occupancy calculator
L = gpus.FERMI_LECTURE
H = gpus.HOPPER_H100


def test_lecture_128_thread_blocks_reach_two_thirds():
    r = oc.occupancy(128, 10, 0, L)
    assert (r.blocks_per_sm, r.warps_per_sm, r.threads_per_sm) == (8, 32, 1024)
    assert r.occupancy == 32 / 48 and round(r.occupancy, 3) == 0.667
    assert r.limiting == ("blocks",)


def test_lecture_registers_10_give_6_blocks_and_12_give_5():
    ten = oc.occupancy(256, 10, 0, L)
    assert ten.blocks_per_sm == 6 and ten.registers_per_block == 2560 and ten.threads_per_sm == 1536
    twelve = oc.occupancy(256, 12, 0, L)
    assert twelve.blocks_per_sm == 5 and twelve.limiting == ("registers",)
    assert ten.threads_per_sm - twelve.threads_per_sm == 256  # "loss of concurrency of 256 threads"


def test_real_fermi_keeps_six_blocks_with_12_registers():
    """The lecture's 16 K register file is GT200's; GF100 has 32 K, so +2 registers cost nothing there."""
    assert oc.occupancy(256, 12, 0, gpus.FERMI_GF100).blocks_per_sm == 6
    assert oc.occupancy(512, 10, 0, L).blocks_per_sm == 3  # "512 threads/block: only 3 blocks"


@pytest.mark.parametrize("threads, regs, shared, blocks, warps, limiting", [
    (256, 32, 0, 8, 64, ("threads", "registers")),
    (256, 64, 0, 4, 32, ("registers",)),
    (128, 40, 0, 12, 48, ("registers",)),
    (64, 200, 0, 4, 8, ("registers",)),  # 4 partitions: 2 warps each; one pool would give 5 blocks
    (1024, 16, 49152, 2, 64, ("threads",)),
    (64, 16, 40000, 5, 10, ("shared memory",)),
    (32, 16, 0, 32, 32, ("blocks",)),
    (100, 32, 0, 16, 64, ("threads", "registers")),  # 100 threads take 4 warp slots
    (768, 16, 0, 2, 48, ("threads",)),  # 24 warps: only 2 blocks fit in 64 slots (75%)
])
def test_hopper_cases(threads, regs, shared, blocks, warps, limiting):
    r = oc.occupancy(threads, regs, shared, H)
    assert (r.blocks_per_sm, r.warps_per_sm, r.limiting) == (blocks, warps, limiting)


def test_register_partitions_matter():
    one_pool = dataclasses.replace(H, register_partitions=1)
    assert oc.occupancy(64, 200, 0, one_pool).blocks_per_sm == 5
    assert oc.occupancy(64, 200, 0, H).blocks_per_sm == 4


def test_hopper_shared_memory_reserved_and_rounded():
    r = oc.occupancy(64, 16, 32276, H)
    assert r.shared_allocated_per_block == 33408 and r.blocks_per_sm == 6
    assert oc.occupancy(64, 16, 227 * 1024, H, opt_in=True).blocks_per_sm == 1  # 227 KB + 1 KB = all 228 KB
    assert oc.occupancy(64, 16, 100 * 1024, H, opt_in=True).blocks_per_sm == 2


@pytest.mark.parametrize("args, kwargs, words", [
    ((0, 32, 0), {}, "1 to 1024"),
    ((1025, 32, 0), {}, "1 to 1024"),
    ((256, 256, 0), {}, "0 to 255"),
    ((256, -1, 0), {}, "0 to 255"),
    ((256, 32, -5), {}, "negative"),
    ((256, 32, 50_000), {}, "opt_in=True"),
    ((256, 32, 300_000), {"opt_in": True}, "exceeds"),
    ((1024, 255, 0), {}, "too many resources"),
    ((256.0, 32, 0), {}, "whole number"),
    ((True, 32, 0), {}, "whole number"),
])
def test_invalid_configurations_get_clear_errors(args, kwargs, words):
    with pytest.raises(lh.LaunchConfigError, match=words):
        oc.occupancy(*args, H, **kwargs)


def test_occupancy_table_marks_impossible_configurations():
    table = oc.occupancy_table([256, 1024], registers_per_thread=128)
    assert list(table["blocks_per_sm"]) == [2, 0]
    assert table["limiting"].iloc[1] == "cannot launch" and "too many resources" in table["reason"].iloc[1]


@pytest.mark.parametrize("k", range(4, 33))
def test_shared_for_blocks_throttles_to_exactly_k(k):
    s = oc.shared_for_blocks(k)
    assert 0 <= s <= 48 * 1024
    assert oc.occupancy(64, 16, s).limits["shared memory"] == k
    assert oc.occupancy(64, 16, s - 128).limits["shared memory"] > k  # and it is the least such amount


def test_shared_for_blocks_errors():
    with pytest.raises(lh.LaunchConfigError, match="without opting in"):
        oc.shared_for_blocks(3)
    with pytest.raises(lh.LaunchConfigError, match="at least 1"):
        oc.shared_for_blocks(0)


@sim_only
def test_the_sm_under_the_simulator_is_the_hopper_preset():
    assert gpus.current().sm is gpus.HOPPER_H100


@gpu_only
def test_the_sm_on_a_gpu_comes_from_its_driver():
    info = lh.device_info()
    sm = gpus.current().sm
    assert sm.name == info.name and sm.compute_capability == info.cc
    assert (sm.max_threads_per_sm, sm.max_blocks_per_sm) == (info.max_threads_per_sm, info.max_blocks_per_sm)
    assert (sm.registers_per_sm, sm.shared_per_sm) == (info.registers_per_sm, info.max_shared_per_sm)
    assert sm.warp_size == info.warp_size == 32


def test_sm_limits_from_the_drivers_record():
    a100 = DeviceInfo(backend="gpu", name="NVIDIA A100", compute_capability=(8, 0), max_threads_per_sm=2048,
                      max_blocks_per_sm=32, registers_per_sm=65536, registers_per_block=65536,
                      max_shared_per_sm=167936, max_shared_per_block=49152, max_shared_per_block_optin=166912)
    sm = gpus.sm_limits(a100)
    assert (sm.shared_unit, sm.reserved_shared_per_block, sm.register_partitions) == (128, 1024, 4)
    assert oc.occupancy(256, 32, 0, sm).occupancy == 1.0
    t4 = dataclasses.replace(a100, name="Tesla T4", compute_capability=(7, 5), max_threads_per_sm=1024,
                             max_blocks_per_sm=16, max_shared_per_sm=65536, max_shared_per_block_optin=65536)
    sm = gpus.sm_limits(t4)
    assert (sm.shared_unit, sm.reserved_shared_per_block, sm.max_warps_per_sm) == (256, 0, 32)


def test_presets_describe_themselves():
    assert "228 KB" in H.describe() and "65,536 registers" in H.describe()
    assert "1536 threads" in L.describe()


@sim_only
def test_driver_queries_are_gpu_only():
    with pytest.raises(lh.GPUOnlyError):
        device.kernel_resources(ks.scale, ks.SCALE_SIGNATURE)
    with pytest.raises(lh.GPUOnlyError):
        device.driver_blocks_per_sm(ks.scale, 256, 0, ks.SCALE_SIGNATURE)
    with pytest.raises(lh.GPUOnlyError):
        ks_exp.compare_with_driver(ks.scale, signature=ks.SCALE_SIGNATURE)
    with pytest.raises(lh.GPUOnlyError):
        ks_exp.compare_calculator_with_driver()


@gpu_only
def test_driver_queries_on_a_gpu():
    res = device.kernel_resources(ks.scale, ks.SCALE_SIGNATURE)
    assert res.registers_per_thread > 0 and res.max_threads_per_block >= 256
    assert device.driver_blocks_per_sm(ks.scale, 256, 0, ks.SCALE_SIGNATURE) >= 1


def test_compare_with_driver_builds_its_table(monkeypatch):
    """The table logic, with the two GPU queries replaced (the real ones run in bench/scheduling.py)."""
    res = device.KernelResources(name="k", registers_per_thread=40, static_shared_per_block=1024, local_per_thread=0,
                             max_threads_per_block=768)
    monkeypatch.setattr(device, "kernel_resources", lambda kernel, signature=None: res)
    answers = {(256, 0): 6, (1024, 0): 0}
    monkeypatch.setattr(device, "driver_blocks_per_sm", lambda kernel, t, dyn, signature=None: answers[(t, dyn)])
    table = ks_exp.compare_with_driver(object(), threads=(256, 1024), dynamic_shared=(0,), sm=H)
    assert list(table["calc_blocks"]) == [6, 0] and list(table["agree"]) == [True, True]
    assert table["limiting"].iloc[0] == "registers" and table["limiting"].iloc[1] == "cannot launch"


def test_draw_limits_runs():
    fig, ax = plt.subplots()
    ks_fig.draw_limits(ax, oc.occupancy(256, 64, 0))
    assert "registers" in ax.get_title()
    plt.close(fig)


# =========================================================================== kernels
def test_warp_and_lane_of_a_70_thread_block():
    warp, lane = ks.warp_lane_ids(70)
    assert list(warp) == [0] * 32 + [1] * 32 + [2] * 6
    assert list(lane) == list(range(32)) * 2 + list(range(6))


@pytest.mark.parametrize("kind", list(ks.DIVERGENCE_KERNELS))
@pytest.mark.parametrize("n", ODD_SIZES)
def test_divergence_kernels_match_numpy(kind, n):
    x = ks.lcg_inputs(n, seed=n)
    got = ks.run_divergence(kind, x, steps=3, threads=64)
    np.testing.assert_array_equal(got, ks.divergence_reference(kind, x, 3, threads=64))


def test_lcg_reference_is_park_miller():
    assert ks.lcg_reference(np.array([1]), 1)[0] == 48271
    assert ks.lcg_reference(np.array([1]), 2)[0] == 48271**2 % (2**31 - 1)


def test_serialized_bodies_model():
    n = 4096
    bodies = {k: ks.serialized_bodies(k, n, 256) for k in ks.DIVERGENCE_KERNELS}
    assert bodies == {"lane0_branch": 128, "first_warp_branch": 1, "packed_branch": 4,
                      "per_lane_paths": 4096, "per_warp_paths": 128}
    assert ks.packed_count(n, 256) == 128
    with pytest.raises(ValueError):
        ks.expensive_paths("nonsense", 10)


@pytest.mark.parametrize("bad, error", [
    (np.ones(10, dtype=np.float64), lh.ArrayArgumentError),
    (np.full(10, -3, dtype=np.int64), lh.ArrayArgumentError),
    (np.full(10, 2**40, dtype=np.int64), lh.ArrayArgumentError),
])
def test_divergence_input_errors(bad, error):
    with pytest.raises(error):
        ks.run_divergence("lane0_branch", bad, 3)


def test_divergence_launch_errors():
    x = ks.lcg_inputs(10)
    with pytest.raises(lh.LaunchConfigError, match="multiple of 32"):
        ks.run_divergence("lane0_branch", x, 3, threads=48)
    with pytest.raises(ValueError, match="unknown kernel"):
        ks.run_divergence("fast", x, 3)
    with pytest.raises(lh.ArrayArgumentError, match="steps"):
        ks.run_divergence("lane0_branch", x, -1)


@pytest.mark.parametrize("ilp", [1, 4])
@pytest.mark.parametrize("n", ODD_SIZES)
def test_scale_kernels_match_numpy(ilp, n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    np.testing.assert_array_equal(ks.run_scale(x, 3.0, threads=64, ilp=ilp, shared_bytes=4096), np.float32(3) * x)
    # a grid far smaller than the array: the grid-stride loop covers the rest
    np.testing.assert_array_equal(ks.run_scale(x, 3.0, threads=32, ilp=ilp, blocks=2), np.float32(3) * x)


@pytest.mark.parametrize("kwargs, error", [
    (dict(shared_bytes=60_000), lh.LaunchConfigError),
    (dict(shared_bytes=-1), lh.LaunchConfigError),
    (dict(threads=2048), lh.LaunchConfigError),
    (dict(ilp=3), ValueError),
    (dict(blocks=0), lh.LaunchConfigError),
])
def test_scale_errors(kwargs, error):
    with pytest.raises(error):
        ks.run_scale(np.ones(100, dtype=np.float32), 2.0, **kwargs)
    with pytest.raises(lh.ArrayArgumentError):
        ks.run_scale(np.ones(100), 2.0)


def test_warp_sums_is_gpu_only_and_checks_input_first():
    with pytest.raises(lh.ArrayArgumentError):
        ks.warp_sums(np.ones(64))
    with pytest.raises(lh.LaunchConfigError):
        ks.warp_sums(np.ones(64, dtype=np.float32), threads=48)
    x = np.arange(70, dtype=np.float32)
    if lh.is_simulator():
        with pytest.raises(lh.GPUOnlyError, match="syncwarp"):
            ks.warp_sums(x)
    else:  # on a GPU it runs: sums of consecutive groups of 32 (integers, so exact in float32)
        np.testing.assert_array_equal(ks.warp_sums(x), ks.warp_sums_reference(x))


def test_warp_sums_reference():
    x = np.arange(70, dtype=np.float32)
    np.testing.assert_array_equal(ks.warp_sums_reference(x), [x[:32].sum(), x[32:64].sum(), x[64:].sum()])


@pytest.mark.parametrize("n", [1, 33, 257])
def test_sixteen_accumulators_match_numpy(n):
    x = np.random.default_rng(n).random(n)
    out = np.zeros(n)
    ks.sixteen_accumulators[lh.blocks_for(n, 64), 64](x, out, 3)
    np.testing.assert_allclose(out, ks.sixteen_accumulators_reference(x, 3), rtol=1e-12)


@sim_only
def test_measure_divergence_under_the_simulator():
    table = ks_exp.measure_divergence(256, 2, threads=64, progress=False)
    assert list(table["kernel"]) == list(ks.DIVERGENCE_KERNELS)
    assert set(table["status"]) == {"simulator"} and table["median_ms"].isna().all()
    assert list(table["serialized_bodies"]) == [8, 1, 1, 256, 8]
    assert list(table["expensive_threads"]) == [8, 32, 8, 256, 256]


@sim_only
def test_measure_throttle_under_the_simulator():
    table = ks_exp.measure_throttle(600, blocks_per_sm=(4, 16, 32), ilps=(1, 4), progress=False)
    assert len(table) == 6 and set(table["status"]) == {"simulator"}
    assert list(table["calc_blocks_per_sm"]) == [4, 16, 32] * 2
    assert list(table["occupancy"]) == [0.125, 0.5, 1.0] * 2
    assert table["driver_blocks_per_sm"].isna().all()
    assert list(table["shared_bytes"][:3]) == [oc.shared_for_blocks(k) for k in (4, 16, 32)]
    custom = ks_exp.measure_throttle(100, blocks_per_sm=(8,), ilps=(1,), progress=False, shared_for=lambda k: 1000)
    assert custom["shared_bytes"].iloc[0] == 1000
    with pytest.raises(lh.LaunchConfigError):
        ks_exp.measure_throttle(100, blocks_per_sm=(8,), ilps=(1,), progress=False, shared_for=lambda k: 10**6)


@pytest.mark.judges_no_timing
def test_measure_block_sizes_gives_each_block_sizes_occupancy():
    table = ks_exp.measure_block_sizes(300, threads=(32, 768), ilps=(1,), progress=False)
    assert list(table["threads"]) == [32, 768]
    assert list(table["occupancy"]) == [0.5, 0.75]


@sim_only
def test_register_caps_under_the_simulator():
    assert ks.sixteen_accumulators_capped(32) is ks.sixteen_accumulators  # nothing to compile in the simulator
    with pytest.raises(lh.LaunchConfigError):
        ks.sixteen_accumulators_capped(8)
    table = ks_exp.measure_register_caps(100, 2, threads=64, caps=(255, 32), progress=False)
    assert list(table["max_registers"]) == [255, 32] and set(table["status"]) == {"simulator"}
    assert table["registers"].isna().all() and ks.sixteen_accumulators_flops(10, 3) == 960


# =========================================================================== the lab's checkers
SOL = load_solutions("04_scheduling_lab")
SKEL = lab_skeletons("04_scheduling_lab", "import math\nfrom numba import cuda\n"
                     "from labhelpers.kernels.scheduling import lcg_steps\n")


# Typical wrong answers.
def no_reserved_blocks_per_sm(threads, registers, shared):
    w = math.ceil(threads / 32)
    regs = math.ceil(registers * 32 / 256) * 256
    by_shared = 228 * 1024 // (math.ceil(shared / 128) * 128) if shared else 32
    return min(64 // w, 32, 65536 // regs // w, by_shared)


def floor_warps_blocks_per_sm(threads, registers, shared):
    w = max(1, threads // 32)
    regs = math.ceil(registers * 32 / 256) * 256
    return min(64 // w, 32, 65536 // regs // w, 228 * 1024 // (math.ceil((shared + 1024) / 128) * 128))


# The solution with one line changed.
forgets_half_even_odd = mutant(SOL.even_odd_sorted, "j = 2 * (i - half) + 1",
                               "j = 2 * i + 1  # forgets that the odd elements start at thread `half`")
wrong_half_even_odd = mutant(SOL.even_odd_sorted, "half = (n + 1) // 2",
                             "half = n // 2  # wrong for odd n: one even element too few")


@pytest.mark.parametrize("checker, solution, wrongs", [
    (ex.check_blocks_per_sm, SOL.blocks_per_sm,
     [SKEL["blocks_per_sm"], no_reserved_blocks_per_sm, floor_warps_blocks_per_sm]),
    (ex.check_warps_to_hide, SOL.warps_to_hide,
     [SKEL["warps_to_hide"], lambda b, s: math.ceil(s / b), lambda b, s: (b + s) / b, lambda b, s: 2 * (b + s) // b]),
    (ex.check_even_odd_sorted, SOL.even_odd_sorted,
     [SKEL["even_odd_sorted"], forgets_half_even_odd, wrong_half_even_odd]),
    (ex.check_shared_for_blocks, SOL.shared_for_blocks,
     [SKEL["shared_for_blocks"], lambda k, sm: 228 * 1024 // k - 1024,
      lambda k, sm: (228 * 1024 // (k + 1) // 128 + 1) * 128]),
], ids=["blocks_per_sm", "warps_to_hide", "even_odd_sorted", "shared_for_blocks"])
def test_checker_passes_the_solution_and_rejects_wrong_answers(checker, solution, wrongs, capsys):
    checker(solution)
    assert capsys.readouterr().out.startswith("Correct")
    for wrong in wrongs:
        with pytest.raises(lh.CheckFailed):
            checker(wrong)


def test_checker_messages_name_the_mistake():
    with pytest.raises(lh.CheckFailed, match="reserves"):
        ex.check_blocks_per_sm(no_reserved_blocks_per_sm)
    with pytest.raises(lh.CheckFailed, match="partly filled warp"):
        ex.check_blocks_per_sm(floor_warps_blocks_per_sm)
    with pytest.raises(lh.CheckFailed, match="returned None"):
        ex.check_blocks_per_sm(SKEL["blocks_per_sm"])
    with pytest.raises(lh.CheckFailed, match="86%"):
        ex.check_warps_to_hide(lambda b, s: math.ceil(s / b))
    with pytest.raises(lh.CheckFailed, match="both even and odd"):
        ex.check_even_odd_sorted(SKEL["even_odd_sorted"])
    with pytest.raises(lh.CheckFailed, match="1,024 B the driver reserves"):
        ex.check_shared_for_blocks(lambda k, sm: (228 * 1024 // (k + 1) // 128 + 1) * 128)


# =========================================================================== the vector add, warp by warp


def test_vector_add_walkthrough_follows_the_lecture():
    walk = wt.vector_add_walkthrough(n=8, threads=8, warp_size=4, memory_latency=20)
    assert walk.trace.shape[1] == 2  # "How many warps?" two
    first = walk.issued.groupby("warp")["instruction"].apply(list)
    assert first[0] == first[1] and first[0][0].startswith("setp") and first[0][-1] == "ret"
    assert [i.split()[0] for i in first[0]] == ["setp.lt.s32", "@%p", "ld.global.f32", "ld.global.f32", "add.f32",
                                                "st.global.f32", "ret"]
    assert walk.issued["cycle"].tolist()[:8] == list(range(8))  # round-robin, both loads before any wait
    add0 = walk.issued[(walk.issued["warp"] == 0) & walk.issued["instruction"].str.startswith("add")]["cycle"].item()
    assert add0 == 6 + 20  # the scoreboard holds the add until the second load's register has arrived
    assert walk.trace.loc[7, "warp 0"] == "waits for %f1 %f2" and walk.trace.loc[25, "warp 0"] == "waits for %f2"
    assert (walk.cycles, walk.idle_cycles) == (32, 18)
    assert "14 instructions in 32 cycles, 18 idle" in str(walk)


def test_vector_add_walkthrough_diverges_past_the_end_and_hides_latency_with_more_warps():
    walk = wt.vector_add_walkthrough(n=6, threads=8, warp_size=4, memory_latency=10)
    w1 = walk.issued[walk.issued["warp"] == 1].set_index("instruction")["lanes"]
    assert w1["bra L2"] == "2-3" and w1["ld.global.f32 %f1, [%r6]"] == "0-1" and w1["ret"] == "0-3"
    assert "bra L2" not in walk.issued[walk.issued["warp"] == 0]["instruction"].tolist()
    idle = [wt.vector_add_walkthrough(n=t, threads=t, memory_latency=20).idle_cycles for t in (8, 16, 32, 64)]
    assert idle == sorted(idle, reverse=True) and idle[-1] == 4
    assert wt.vector_add_walkthrough(memory_latency=1).idle_cycles == 0
    partial = wt.vector_add_walkthrough(n=5, threads=5).issued  # the second warp has one thread: lane 0
    assert partial.query("warp == 1")["lanes"].unique().tolist() == ["0"]
    assert partial.query("warp == 0")["lanes"].unique().tolist() == ["0-3"]


def test_vector_add_walkthrough_rejects_bad_parameters():
    with pytest.raises(lh.ArgumentError):
        wt.vector_add_walkthrough(threads=0)
    with pytest.raises(lh.ArgumentError):
        wt.vector_add_walkthrough(memory_latency=2.5)


def test_draw_walkthrough_runs():
    fig, ax = plt.subplots()
    ks_fig.draw_walkthrough(ax, wt.vector_add_walkthrough(n=6))
    assert ax.get_title().startswith("vector add")
    plt.close(fig)


def test_chapter_figures_draw_the_reference_data():
    div = lh.load_reference("ch04_divergence").table.set_index("kernel")
    fig = ks_fig.plot_divergence(div, label="reference")
    assert len(fig.axes[0].patches) == len(div)
    plt.close(fig)
    regs = lh.load_reference("ch04_occupancy_driver").table.groupby("kernel")["registers"].first()
    fig = ks_fig.plot_occupancy_by_registers(gpus.HOPPER_H100, {"scale": int(regs["scale"])})
    assert len(fig.axes[0].texts) == 1 and "H100" in fig.axes[0].get_title()
    plt.close(fig)
    fig = ks_fig.plot_timelines((3, 4))
    assert [ax.get_title().endswith(u) for ax, u in zip(fig.axes, ("86%", "100%"))] == [True, True]
    plt.close(fig)


def test_widget_draw_functions_run_in_interactive_figure():
    assert lh.interactive_figure(ks_fig.draw_scheduler, n_warps=(1, 8, 1, 3), burst=(1, 60, 1, 20),
                                 stall=(0, 300, 10, 50), policy=["greedy", "round-robin"]).children
    assert lh.interactive_figure(ks_fig.draw_vector_add, n=(1, 8, 1, 6), memory_latency=(1, 40, 1, 20)).children
    fig, ax = plt.subplots()
    ks_fig.draw_occupancy(ax, "H100 (Hopper, 9.0)", 2048, 32, 0)  # cannot launch: said on the axes
    assert ax.texts and not ax.axison
    plt.close(fig)


def test_waves_of_blocks():
    table = oc.waves(2000, blocks_per_sm=8, sm_count=132)
    assert table["blocks"].tolist() == [1056, 944] and table["fill"].iloc[-1] == pytest.approx(944 / 1056)
    assert oc.waves(1056, 8, 132)["blocks"].tolist() == [1056]
    assert oc.waves(1, 8, 132)["fill"].item() == pytest.approx(1 / 1056)
    with pytest.raises(lh.ArgumentError):
        oc.waves(0, 8, 132)


# =========================================================================== lab 4 measures only a checked function


def test_measure_throttle_with_refuses_an_unsolved_function():
    with pytest.raises(lh.CheckFailed, match="returned None"):
        ex.measure_throttle_with(lambda k, sm: None)
    m = lh.live_or_reference(lambda: ex.measure_throttle_with(lambda k, sm: None), "ch04_occupancy_throttle",
                             fallback_on=(lh.CheckFailed,))
    assert not m.is_live and len(m.table) == 22


@sim_only
def test_measure_throttle_with_a_solved_function_runs_the_experiment():
    table = ex.measure_throttle_with(lambda k, sm: oc.shared_for_blocks(k, sm), n=4096)
    assert set(table["target_blocks"]) == set(ks_exp.THROTTLE_BLOCKS)


# =========================================================================== the chapter's prose against the reference data
# Every figure the chapter's text quotes from a measurement is recomputed here from the reference data: a
# re-measured reference file that changes a figure fails this test instead of silently contradicting the text.

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from labhelpers.experiments import memory as memory_exp  # noqa: E402

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "04_scheduling.ipynb"


def _prose(path: Path = CHAPTER) -> str:
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def test_chapter_names_the_reference_gpu_it_quotes():
    for name in ("ch04_divergence", "ch04_register_caps", "ch04_occupancy_throttle", "ch04_block_size_sweep",
                 "ch04_occupancy_driver", "ch03_pointer_chase"):
        assert lh.load_reference(name).gpu == "NVIDIA H200", f"{name}: the chapter's prose calls its GPU the H200"


def test_chapter_prose_about_divergence_registers_and_the_driver_matches_the_reference_data():
    div = lh.load_reference("ch04_divergence").table.set_index("kernel")["median_ms"]
    caps = lh.load_reference("ch04_register_caps")
    c = caps.table.set_index("max_registers")
    drv = lh.load_reference("ch04_occupancy_driver").table
    regs = drv.groupby("kernel")["registers"].first()
    chase = lh.load_reference("ch03_pointer_chase")
    dev = chase.meta["device"]
    dram_ns = memory_exp.latency_summary(chase.table, l1_bytes=memory_exp.l1_capacity_bytes(dev),
                                         l2_bytes=dev["l2_bytes"]).set_index("level").loc["device memory", "ns per load"]
    fp64_peak = dev["sm_count"] * 64 * 2 * dev["clock_khz"] / 1e9  # TFLOP/s
    gf = c["gflops"] / 1000
    ilp4 = drv[(drv["kernel"] == "scale_ilp4") & (drv["threads"] == 64) & (drv["dynamic_shared"] == 0)]
    assert abs(div["packed_branch"] / div["lane0_branch"] - 1 / 16) < 0.005, "the text says 'a sixteenth of its time'"
    assert drv["agree"].all()
    phrases = [
        f"the memory-hierarchy chapter measured about {round(dram_ns * dev['clock_khz'] / 1e6, -1):.0f} on the reference GPU",
        f"giving every lane the work ({div['lane0_branch']:.2f} against {div['per_warp_paths']:.2f} ms), 32 paths per warp "
        f"cost {div['per_lane_paths'] / div['per_warp_paths']:.0f} times more",
        "in a sixteenth of its time",
        f"({div['lane0_branch']:.2f} ms against {div['per_warp_paths']:.2f} ms)",
        f"is {div['per_lane_paths'] / div['per_warp_paths']:.0f} times slower ({div['per_lane_paths']:.1f} ms)",
        f"`per_lane_paths` is {div['per_lane_paths'] / div['per_warp_paths']:.0f} rather than 32 times slower",
        f"takes {1 - div['lane0_branch'] / div['per_warp_paths']:.0%} less time than `per_warp_paths`",
        f"take {div['packed_branch']:.3f} and {div['first_warp_branch']:.3f} ms",
        f"`sixteen_accumulators` {c.loc[255, 'registers']:.0f} registers on the reference GPU: "
        f"{c.loc[255, 'driver_blocks_per_sm']:.0f} blocks of 256 threads per SM, {c.loc[255, 'occupancy']:.1%} occupancy, "
        f"and {gf[255]:.1f} TFLOP/s of float64 arithmetic, already {gf[255] / fp64_peak:.0%} of the GPU's float64 peak",
        f"= {fp64_peak:.1f} TFLOP/s",
        f"({c.loc[64, 'registers']:.0f} and {c.loc[48, 'registers']:.0f} registers)",
        f"{gf[48]:.1f} TFLOP/s, {gf[48] / fp64_peak:.0%} of peak",
        f"({c.loc[40, 'occupancy']:.0%} occupancy) for {c.loc[40, 'local_bytes']:.0f} bytes of spills",
        f"spills {c.loc[32, 'local_bytes']:.0f} bytes per thread",
        f"runs at {gf[32]:.1f} TFLOP/s, {gf[255] / gf[32]:.1f} times slower than uncapped; at 24 registers, "
        f"{c.loc[24, 'local_bytes']:.0f} bytes and {gf[255] / gf[24]:.0f} times slower",
        f"On the reference GPU they agree on all {len(drv)}",
        f"(`scale_ilp4`'s {regs['scale_ilp4']:.0f} registers allow {ilp4['driver_blocks'].item():.0f} blocks of 64 "
        f"threads, {ilp4['driver_blocks'].item() * 2 / 64:.0%})",
        f"the {regs['scale']:.0f} registers per thread the compiler gave it on the reference GPU",
        f"For `scale_ilp4` ({regs['scale_ilp4']:.0f} registers)",
        f"Spilling registers to buy occupancy cost up to {gf[255] / gf[24]:.0f} times",
        f"calculator and the driver agree on all {len(drv)} configurations tried",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    assert "reference H200" not in _prose() and "reference H100" not in _prose(), "name the reference GPU from its data"
    assert lh.load_reference("ch04_register_caps").meta["compute_capability"] == "9.0"  # "the same SM as the H100 preset"


def test_chapter_prose_about_throttling_and_block_sizes_matches_the_reference_data():
    thr = lh.load_reference("ch04_occupancy_throttle")
    t = thr.table
    s1 = t[t["ilp"] == 1].set_index("occupancy")["gbps"]
    s4 = t[t["ilp"] == 4].drop_duplicates("occupancy").set_index("occupancy")["gbps"]
    reached = t[t["driver_blocks_per_sm"] == t["target_blocks"]]
    waiting = reached["occupancy"] * 64 * reached["ilp"] * 128 * thr.meta["sm_count"]
    lat = (waiting / (reached["gbps"] / 2)).to_numpy()
    implied = dict(zip(zip(reached["ilp"], reached["occupancy"]), lat))
    chase = lh.load_reference("ch03_pointer_chase")
    dev = chase.meta["device"]
    dram_ns = memory_exp.latency_summary(chase.table, l1_bytes=memory_exp.l1_capacity_bytes(dev),
                                         l2_bytes=dev["l2_bytes"]).set_index("level").loc["device memory", "ns per load"]
    bs = lh.load_reference("ch04_block_size_sweep").table
    b1 = bs[bs["ilp"] == 1].set_index("threads")["gbps"]
    b4 = bs[bs["ilp"] == 4].set_index("threads")["gbps"]
    good1 = b1.loc[[64, 96, 128, 192, 256, 384, 512, 1024]]
    good4 = b4.loc[[64, 96, 128, 192, 256, 384, 512, 768]]
    enough1 = s1[s1 >= 0.9 * s1.max()].index.min()
    match4 = s4[s4 >= s1.max()].index.min()
    all4 = t[t["ilp"] == 4]  # several targets end at 75% (the registers bind): every run there counts
    level4 = all4.loc[all4["occupancy"] >= 0.625, "gbps"]
    copy = rl.reference_ceilings().dram_gbs
    assert s4.loc[0.125] > s1.loc[0.3125] * 0.95 and s4.loc[0.125] < s1.loc[0.375], "scale_ilp4 at 12.5% ~ scale at 31%"
    phrases = [
        f"({s1.loc[0.875]:,.0f} GB/s at 87.5%, {s1.loc[1.0]:,.0f} at 100%), and it needs {enough1:.0%} occupancy for 90% "
        "of its best",
        f"moves {s4.loc[0.25]:,.0f} GB/s with a quarter of the warps, {s4.loc[0.25] / s1.loc[0.25]:.1f} times `scale`'s "
        f"{s1.loc[0.25]:,.0f} GB/s at the same occupancy",
        f"it matches `scale`'s best from {100 * match4:g}% occupancy",
        f"at {level4.min() / 1000:.1f} to {level4.max() / 1000:.1f} TB/s, {100 * level4.min() / copy:.0f} to "
        f"{level4.max() / copy:.0%} of the copy ceiling",
        f"the answer, {implied[(1, 0.125)]:.0f} ns, is close to the {dram_ns:.0f} ns the memory-hierarchy chapter",
        f"to {implied[(1, 1.0)]:.0f} ns at 100%",
        f"({implied[(4, 0.125)]:.0f} ns at 12.5% occupancy and {s4.loc[0.125]:,.0f} GB/s, against "
        f"{implied[(1, 0.3125)]:.0f} ns for `scale` at {s1.loc[0.3125]:,.0f} GB/s)",
        f"`scale` moves {good1.min():,.0f} to {good1.max():,.0f} GB/s with every size from 64 to 512 threads and at 1024",
        f"at 32 threads ({b1.loc[32]:,.0f} GB/s, 50% occupancy) and 768 ({b1.loc[768]:,.0f} GB/s, 75%)",
        f"`scale_ilp4` moves {good4.min():,.0f} to {good4.max():,.0f} GB/s from 64 to 768 threads",
        f"({b4.loc[32]:,.0f} and {b4.loc[1024]:,.0f} GB/s)",
        f"one load per thread still gained at 100% occupancy ({s1.loc[1.0] / 1000:.1f} TB/s), four independent loads "
        f"per thread reached {all4['gbps'].max() / 1000:.1f} TB/s at 75%",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)


def test_chapter_prose_about_the_walkthrough_matches_the_model():
    walk = wt.vector_add_walkthrough(n=8, threads=8, warp_size=4, memory_latency=20)
    big = wt.vector_add_walkthrough(n=64, threads=64, warp_size=4, memory_latency=20)
    waves = oc.waves(2000, 8, 132)
    phrases = [f"{walk.idle_cycles} cycles issued nothing", f"only {big.idle_cycles} of {big.cycles} cycles",
               f"The second wave keeps {waves['fill'].iloc[1]:.0%} of the block slots busy"]
    assert not _missing(_prose(), phrases)


def test_chapter_computes_the_copy_ceiling_from_the_reference_data():
    text = _prose()
    assert "4.2 TB/s" not in text and "4,150" not in text and "4,143" not in text
    cells = json.loads(CHAPTER.read_text())["cells"]
    assert any("rl.reference_ceilings()" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_shared_for_blocks_exercise_follows_the_sm_it_runs_on():
    """Exercise 4 on a T4 (64 KB, no reserved bytes, 16 blocks of 64 threads): the H100 answer fails there."""
    t4 = gpus.STUDENT_GPUS[(7, 5)]
    assert ex.shared_targets(t4) == tuple(range(4, 17))
    assert ex.shared_targets(gpus.HOPPER_H100) == ex.SHARED_TARGETS
    ex.check_shared_for_blocks(SOL.shared_for_blocks, sm=t4, quiet=True)
    with pytest.raises(lh.CheckFailed, match="64 KB"):
        ex.check_shared_for_blocks(lambda k, sm: (228 * 1024 // (k + 1) // 128 + 1) * 128 - 1024, sm=t4)


def test_limits_for_names_the_reference_gpus_sm():
    assert gpus.limits_for("7.5").max_warps_per_sm == 32
    assert gpus.limits_for((9, 0)).max_warps_per_sm == 64
    with pytest.raises(lh.ArgumentError, match="no SM preset"):
        gpus.limits_for("1.0")


def _code(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")


def test_no_code_cell_of_chapter_4_or_its_lab_assumes_a_hopper_sm():
    """Labels and printed counts come from the SM that measured the data, not '/ 64' or '64 warps' written in."""
    for path in (CHAPTER, CHAPTER.parents[1] / "labs" / "04_scheduling_lab.ipynb"):
        code = _code(path)
        assert "warps / 64" not in code and "at most 64 warps" not in code, path.name
    assert "* sm.max_warps_per_sm *" not in _code(CHAPTER)  # Little's law uses the SM that measured the data


def test_measure_throttle_with_uses_the_live_sm_on_a_t4(monkeypatch):
    """On a T4 (driver numbers) the student's function gets the T4's SM and k stops at 16 blocks of 64 threads."""
    t4_info = DeviceInfo(backend="gpu", name="Tesla T4", compute_capability=(7, 5), max_threads_per_sm=1024,
                         max_blocks_per_sm=16, registers_per_sm=65536, registers_per_block=65536,
                         max_shared_per_sm=65536, max_shared_per_block=49152, max_shared_per_block_optin=65536,
                         reserved_shared_per_block=0)
    t4 = gpus.sm_limits(t4_info)
    assert (t4.max_warps_per_sm, t4.shared_per_sm, t4.reserved_shared_per_block) == (32, 65536, 0)
    seen = {}

    def fake_measure(n, blocks_per_sm, shared_for):
        seen.update(blocks=list(blocks_per_sm), shared={k: shared_for(k) for k in blocks_per_sm})
        return "measured"

    monkeypatch.setattr(ex.gpus, "current", lambda: gpus.from_device_info(t4_info))
    monkeypatch.setattr(ex, "measure_throttle", fake_measure)
    assert ex.measure_throttle_with(SOL.shared_for_blocks) == "measured"
    assert max(seen["blocks"]) == 16 and min(seen["blocks"]) == 4
    for k, s in seen["shared"].items():
        assert oc.occupancy(64, 16, s, t4).blocks_per_sm == k
