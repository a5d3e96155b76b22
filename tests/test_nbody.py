"""Chapter 8 (n-body): kernels against the float64 NumPy reference, integrator, errors, experiments' parsers.

Under the simulator (the default here) the kernels run a few thousand interactions per second, so the
default run checks every kernel on n = 1, 2, 31, 33 and a few block configurations, and 65 bodies on a
selection. On a GPU (``LABHELPERS_BACKEND=gpu``) every kernel is checked for n = 1, 2, 31, 33, 1000, 4097
and every tile size, unroll factor and bodies-per-thread count it supports.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

import labhelpers as lh
from labhelpers.experiments import nbody as exp
from labhelpers.kernels import nbody as nb
from markers import SIM, gpu_only, sim_only

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "08_nbody.ipynb"
SMALL = (1, 2, 31, 33)
SIZES = SMALL if SIM else SMALL + (1000, 4097)
TILES = (32, 64) if SIM else nb.TILES


@functools.lru_cache(maxsize=None)
def _reference(key: bytes, n: int):
    pos = np.frombuffer(key, dtype=np.float32).reshape(n, 4)
    return nb.accelerations_numpy(pos, nb.DEFAULT_EPS2, with_scale=True)


def _ok(got, pos, layout="aos"):
    """Compare with the float64 reference (cached per input: the large sizes cost a second each)."""
    aos = np.ascontiguousarray(pos if layout == "aos" else nb.to_aos(pos))
    got = np.asarray(got, dtype=np.float64)
    got = got if layout == "aos" else got.T
    ref, scale = _reference(aos.tobytes(), aos.shape[0])
    assert np.isfinite(got).all(), "NaN or infinite accelerations"
    err = np.max(np.abs(got - ref), axis=1) / np.where(scale > 0, scale, 1.0)
    assert err.max(initial=0.0) <= nb.ACC_RTOL, f"relative error {err.max():.3g} > {nb.ACC_RTOL}"


def _bodies(n, layout="aos"):
    return nb.random_bodies(n, np.random.default_rng(n), layout=layout)


# --- every kernel against NumPy ----------------------------------------------------------------

@pytest.mark.parametrize("unroll", (1, 4, 16))
@pytest.mark.parametrize("layout", nb.LAYOUTS)
def test_naive_kernel_every_size(unroll, layout):
    for n in SIZES:
        pos = _bodies(n, layout)
        _ok(nb.run_naive(pos, unroll=unroll, layout=layout, threads=32 if SIM else 256), pos, layout)


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("bodies", (1, 2) if SIM else nb.BODIES)
def test_tiled_kernel_every_size(tile, bodies):
    if tile * bodies > nb.MAX_BODIES_PER_BLOCK:
        pytest.skip("refused: too many registers per block")
    for n in SIZES:
        pos = _bodies(n)
        _ok(nb.run_tiled(pos, tile=tile, unroll=4, bodies=bodies), pos)


@pytest.mark.parametrize("unroll", (1, 16) if SIM else nb.UNROLLS)
def test_tiled_kernel_every_unroll(unroll):
    for n in SIZES:
        pos = _bodies(n)
        _ok(nb.run_tiled(pos, tile=32, unroll=unroll), pos)


def test_tiled_kernel_soa_and_several_bodies():
    for n in (33, 65) if SIM else SIZES:
        pos = _bodies(n, "soa")
        _ok(nb.run_tiled(pos, tile=32, unroll=4, bodies=4, layout="soa"), pos, "soa")


@pytest.mark.parametrize("mode", nb.MATH_MODES)
def test_every_math_mode_is_correct(mode):
    for n in (2, 33):
        pos = _bodies(n)
        _ok(nb.run_tiled(pos, tile=32, unroll=4, math_mode=mode), pos)
        _ok(nb.run_naive(pos, math_mode=mode, threads=32), pos)


def test_best_configuration_is_the_measured_best():
    tuning = lh.load_reference("ch08_tuning")
    assert tuning.meta["best"] == nb.BEST.label


@gpu_only
def test_best_configuration_is_correct():  # 512 threads x 4 bodies: the same code as tile 32 x 4 bodies above
    for n in SIZES:
        pos = _bodies(n)
        _ok(nb.run_config(nb.BEST, pos), pos)


# --- stream-K: the tiled kernel's work shared out evenly over the grid ------------------------------------------

@pytest.mark.parametrize("n, blocks, bodies, unroll", [
    (1, 1, 4, 4),  # one body: one unit (1 group x 1 tile)
    (140, 3, 4, 8),  # tile 32: 2 groups x 5 tiles; 3 blocks cut both groups, the middle one spans the two
    (100, 7, 2, 16),  # 2 groups of 64 (the second partial) x 4 tiles: 8 units over 7 blocks
    (300, 3, 8, 8),  # 8 bodies per thread: 2 groups of 256 (the second partial) x 10 tiles
    (5, 4, 4, 4),  # more blocks than work: 3 blocks with an empty range must leave acc alone
])
def test_streamk_kernel_matches_numpy(n, blocks, bodies, unroll):
    """Compared within ACC_RTOL, never bitwise: the order of the atomic adds changes the last bits."""
    from numba import cuda

    pos = _bodies(n)
    acc = cuda.to_device(np.full((n, 3), np.nan, np.float32))  # launch_streamk must zero it first
    nb.launch_streamk(cuda.to_device(pos), np.float32(nb.DEFAULT_EPS2), acc, blocks=blocks, tile=32, unroll=unroll,
                      bodies=bodies)
    _ok(acc.copy_to_host(), pos)


def test_streamk_wrapper_every_size():
    for n in SIZES:
        pos = _bodies(n)
        _ok(nb.run_streamk(pos, tile=32, unroll=8, per_sm=1), pos)


@gpu_only
def test_streamk_configuration_is_correct():  # the chapter's: 512 threads x 4 bodies, two blocks per SM
    # 2^14 + 3 bodies: 9 groups x 33 tiles = 297 units over 2 x SMs blocks (264 on an H200): blocks of two units whose
    # segments cross a group's end. (2^16 + 3 took 200 s on the H200, most of it the float64 NumPy reference.)
    for n in SIZES + (2**14 + 3,):
        pos = _bodies(n)
        _ok(nb.run_config(nb.STREAMK, pos), pos)


def test_streamk_kernel_has_no_race_on_a_partial_last_group():
    """70 bodies, tile 32, 2 per thread: 2 groups (the second of 6 bodies) x 3 tiles (the last of 6), 3 blocks of
    2 units; the middle block ends group 0 and starts group 1 (two segments, two rounds of atomic adds)."""
    pos = _bodies(70)
    acc = np.zeros((70, 3), np.float32)
    report = lh.check_races(nb.make_streamk(32, 4, 2), 3, 32, pos, np.float32(nb.DEFAULT_EPS2), acc)
    assert report.ok, str(report)
    _ok(acc, pos)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(layout="soa"), nb.UnknownKernelError, "layout='aos'"),
    (dict(math_mode="fast"), nb.UnknownKernelError, "math_mode='rsqrt'"),
    (dict(unroll=2), nb.UnknownKernelError, "unroll"),
    (dict(tile=1024, bodies=8), nb.UnknownKernelError, "registers"),
    (dict(per_sm=0), lh.ArgumentError, "per_sm"),
])
def test_streamk_configurations_say_what_to_change(kwargs, error, match):
    with pytest.raises(error, match=match):
        nb.Config("streamk", **{"tile": 32, "unroll": 8, **kwargs})


def test_streamk_wrapper_checks_its_input():
    with pytest.raises(lh.LabError, match="eps2"):
        nb.run_streamk(_bodies(4), eps2=0.0, tile=32)
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        nb.run_streamk(nb.to_soa(_bodies(8)), tile=32)
    with pytest.raises(lh.ArgumentError, match="per_sm"):
        nb.run_streamk(_bodies(4), tile=32, per_sm=-1)


def test_lone_body_feels_nothing_and_two_bodies_attract():
    assert np.array_equal(nb.run_tiled(np.array([[0.3, 0.2, 0.1, 5.0]], np.float32), tile=32),
                          np.zeros((1, 3), np.float32))
    pos = np.array([[0, 0, 0, 1], [1, 0, 0, 1]], np.float32)
    acc = nb.run_naive(pos, eps2=1e-6, threads=32)
    assert acc[0, 0] == pytest.approx(1.0, rel=1e-4) and acc[1, 0] == pytest.approx(-1.0, rel=1e-4)
    assert np.allclose(acc[:, 1:], 0)


def test_device_arrays_stay_on_the_device():
    from numba import cuda

    pos = _bodies(33)
    out = nb.run_config(nb.Config("tiled", tile=32), cuda.to_device(pos))
    assert not isinstance(out, np.ndarray)
    _ok(out.copy_to_host(), pos)


def test_cpu_loop_matches_numpy():
    pos = _bodies(257)
    _ok(nb.accelerations_cpu(pos), pos)


def test_reference_agrees_with_a_direct_double_loop():
    pos = _bodies(7).astype(np.float64)
    e = float(np.float32(nb.DEFAULT_EPS2))
    direct = np.zeros((7, 3))
    for i in range(7):
        for j in range(7):
            d = pos[j, :3] - pos[i, :3]
            direct[i] += pos[j, 3] * d / (d @ d + e) ** 1.5
    assert np.allclose(nb.accelerations_numpy(pos), direct, rtol=1e-12, atol=1e-12)


def test_error_measure_sees_nan_a_wrong_body_and_the_scale():
    pos = _bodies(33)
    acc = nb.accelerations_numpy(pos).astype(np.float32)
    assert nb.acceleration_error(acc, pos) < 1e-5
    bad = acc.copy()
    bad[5] *= 1.01
    assert nb.acceleration_error(bad, pos) > nb.ACC_RTOL
    bad[5] = np.nan
    assert nb.acceleration_error(bad, pos) == math.inf


# --- the lecture's pitfall kernel ----------------------------------------------------------------

def test_seed_kernel_is_right_when_n_is_a_multiple_of_the_block():
    pos = _bodies(64)
    _ok(nb.run_seed_tiled(pos, threads=32), pos)


@sim_only
def test_seed_kernel_reads_past_the_end_under_the_simulator():
    with pytest.raises(IndexError):
        nb.run_seed_tiled(_bodies(33), threads=32)


@gpu_only
def test_seed_kernel_reads_the_nan_after_the_end_on_a_gpu():
    got = nb.run_seed_tiled(_bodies(33), threads=32)
    assert np.isnan(got).any()


# --- integration and physics ----------------------------------------------------------------------

def test_leapfrog_conserves_energy_and_momentum_on_a_circular_orbit():
    pos, vel = nb.circular_binary()
    period = nb.binary_period()
    dt = period / 200
    e0, p0 = nb.energy(pos, vel), nb.momentum(pos, vel)
    p, v = nb.leapfrog_numpy(pos, vel, dt, 200)
    assert abs(nb.energy(p, v) - e0) <= 1e-4 * abs(e0)
    assert np.allclose(nb.momentum(p, v), p0, atol=1e-12)
    assert np.allclose(p[:, :3], pos[:, :3], atol=2e-3)  # one full period: back where it started


def test_gpu_leapfrog_follows_the_float64_one():
    pos, vel = nb.galaxy_collision(48, np.random.default_rng(1))
    traj = nb.simulate(pos, vel, 0.01, 6, every=3, engine="gpu", config=nb.Config("tiled", tile=32))
    ref = nb.simulate(pos, vel, 0.01, 6, every=3, engine="numpy")
    assert traj.positions.shape == (3, 48, 3) and np.allclose(traj.times, [0, 0.03, 0.06])
    assert np.allclose(traj.positions, ref.positions, atol=1e-4)
    assert np.all(traj.relative_energy_error < 1e-4)


def test_simulation_energy_error_scales_like_dt_squared():
    pos, vel = nb.galaxy_collision(64, np.random.default_rng(2))
    err = []
    for dt in (0.02, 0.01):
        traj = nb.simulate(pos, vel, dt, int(round(0.4 / dt)), every=int(round(0.4 / dt)), engine="numpy")
        err.append(traj.relative_energy_error[-1])
    assert 2.0 < err[0] / err[1] < 8.0


def test_plummer_sphere_is_centred_bound_and_near_virial_equilibrium():
    pos, vel = nb.plummer_sphere(2000, np.random.default_rng(3))
    assert pos[:, 3].sum() == pytest.approx(1.0)
    assert np.allclose(np.average(pos[:, :3], axis=0, weights=pos[:, 3]), 0, atol=1e-12)
    k, u = nb.kinetic_energy(pos, vel), nb.potential_energy(pos, 1e-6)
    assert k + u < 0
    assert 2 * k / -u == pytest.approx(1.0, abs=0.15)  # virial ratio, up to sampling noise and the clipped tail


def test_galaxy_collision_layout_and_momentum():
    pos, vel = nb.galaxy_collision(101)
    assert pos.shape == (101, 4) and vel.shape == (101, 3) and pos.dtype == vel.dtype == np.float32
    assert pos[:, 3].sum() == pytest.approx(1.0, rel=1e-5)
    assert np.allclose(nb.momentum(pos, vel), 0, atol=1e-5)


def test_potential_energy_of_two_bodies():
    pos = np.array([[0, 0, 0, 2], [3, 4, 0, 1]], np.float64)
    assert nb.potential_energy(pos, 1e-6) == pytest.approx(-2 / 5, rel=1e-6)


# --- counts -------------------------------------------------------------------------------------

def test_counts():
    assert nb.interactions(1000) == 10**6 and nb.flops(1000) == 20 * 10**6
    assert nb.bytes_moved(256, tile=256) == 16 * (256 + 256) + 12 * 256  # every body once per block, plus its own
    assert nb.bytes_moved(256) == 16 * (256**2 + 256) + 12 * 256
    assert nb.bytes_moved(257, tile=256) == 16 * (257 * 2 + 257) + 12 * 257  # two blocks: rounded up


def test_flop_convention_matches_the_roofline_chapter():
    from labhelpers import roofline

    count = getattr(roofline, "NBODY_FLOPS_PER_INTERACTION", nb.FLOPS_PER_INTERACTION)
    assert count == nb.FLOPS_PER_INTERACTION == 20


def test_float64_trap_is_visible_in_numba_typing():
    import numba
    from numba import float32

    sig = (float32,) * 8
    assert numba.njit(sig)(nb.body_body).nopython_signatures[0].return_type == numba.types.UniTuple(float32, 3)
    ret = numba.njit(sig)(nb.body_body_float64).nopython_signatures[0].return_type
    assert ret == numba.types.UniTuple(numba.types.float64, 3)


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,match", [
    (np.ones((4, 4), np.float64), "dtype"),
    (np.ones((4, 3), np.float32), "shape"),
    (np.ones(8, np.float32), "dimension"),
    (np.ones((0, 4), np.float32), "no bodies"),
    (np.ones((8, 4), np.float32)[::2], "contiguous"),
    (np.array([[0, 0, np.nan, 1]], np.float32), "NaN"),
    ([[0.0, 0.0, 0.0, 1.0]], "array"),
    (None, "array"),
])
def test_bad_positions_are_rejected(bad, match):
    with pytest.raises(lh.ArrayArgumentError, match=match):
        nb.run_tiled(bad, tile=32)


def test_soa_shape_is_suggested():
    with pytest.raises(lh.ArrayArgumentError, match="layout='soa'"):
        nb.run_naive(np.ones((4, 10), np.float32))


@pytest.mark.parametrize("eps2", (0.0, -1.0, float("nan"), "0.01", None))
def test_softening_must_be_positive(eps2):
    with pytest.raises(lh.LabError, match="eps2"):
        nb.run_naive(_bodies(2), eps2=eps2, threads=32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(tile=48), "tile"), (dict(unroll=3), "unroll"), (dict(bodies=3), "bodies"),
    (dict(layout="AoS"), "layout"), (dict(tile=1024, bodies=8), "registers"), (dict(math_mode="exact"), "math_mode"), (dict(tile=32, unroll=64), "unroll"),
])
def test_unknown_configurations_list_the_valid_ones(kwargs, match):
    with pytest.raises(nb.UnknownKernelError, match=match):
        nb.run_tiled(_bodies(2), **kwargs)


@pytest.mark.parametrize("threads", (0, 2048, 31.5, True))
def test_bad_block_sizes(threads):
    with pytest.raises(lh.LaunchConfigError):
        nb.run_naive(_bodies(2), threads=threads)


def test_acc_argument_is_checked():
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        nb.run_config(nb.Config("naive"), _bodies(4), acc=np.zeros((4, 4), np.float32))


def test_simulation_arguments_are_checked():
    pos, vel = nb.circular_binary()
    with pytest.raises(lh.ArrayArgumentError):
        nb.simulate(pos, vel[:1], 0.01, 1)
    with pytest.raises(lh.LabError, match="steps"):
        nb.simulate(pos, vel, 0.01, -1)
    with pytest.raises(lh.LabError, match="engine"):
        nb.simulate(pos, vel, 0.01, 1, engine="cpu")
    with pytest.raises(lh.LabError, match="n"):
        nb.plummer_sphere(0)


# --- alternatives to the shared tile: warp shuffles and constant memory ----------------------------

def _sources_reference(pos: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Accelerations of ``pos`` due to ``sources`` only: the float64 specification on both, ``pos`` massless."""
    massless = pos.copy()
    massless[:, 3] = 0
    return nb.accelerations_numpy(np.vstack([massless, sources]))[:len(pos)]


@pytest.mark.parametrize("n", [1, 31, 33, 70])
def test_constant_memory_kernel_matches_the_tiled_one(n):
    pos = nb.random_bodies(n, np.random.default_rng(n))
    got = nb.run_constant(pos, threads=32)
    assert nb.acceleration_error(got, pos) < nb.ACC_RTOL
    np.testing.assert_allclose(got, nb.run_tiled(pos, tile=32, unroll=1), rtol=1e-5, atol=1e-5)


def test_constant_memory_kernel_with_other_sources():
    pos = nb.random_bodies(40, np.random.default_rng(1))
    sources = nb.random_bodies(9, np.random.default_rng(2))
    got = nb.run_constant(pos, sources, threads=32)
    want = _sources_reference(pos, sources)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_constant_memory_refuses_more_sources_than_fit():
    big = nb.random_bodies(nb.CONST_BODIES + 1, np.random.default_rng(0))
    with pytest.raises(lh.ArrayArgumentError, match="64 KiB"):
        nb.make_constant(big)
    with pytest.raises(lh.LabError, match="shape"):
        nb.make_constant(np.zeros((4, 3), np.float32))


@sim_only
def test_shuffle_kernel_says_it_needs_a_gpu():
    pos = nb.random_bodies(40, np.random.default_rng(0))
    with pytest.raises(lh.GPUOnlyError, match="shfl_sync"):
        nb.run_shuffle(pos)
    with pytest.raises(lh.LabError, match="multiple of 32"):
        nb.run_shuffle(pos, threads=48)
    with pytest.raises(lh.GPUOnlyError):
        exp.alternatives_table(sizes=(64,))


@gpu_only
@pytest.mark.parametrize("n", [1, 31, 33, 257, 1000])
def test_shuffle_kernel_matches_the_tiled_one(n):
    pos = nb.random_bodies(n, np.random.default_rng(n))
    got = nb.run_shuffle(pos, threads=64)
    assert nb.acceleration_error(got, pos) < nb.ACC_RTOL
    np.testing.assert_allclose(got, nb.run_tiled(pos, tile=64, unroll=1), rtol=1e-4, atol=1e-4)


@pytest.mark.judges_no_timing
@gpu_only
def test_alternatives_table_runs_small():
    table = exp.alternatives_table(sizes=(256, 8192))
    assert set(table.loc[table["n"] == 256, "kernel"]) == {"tiled 256, unroll 4", "naive, unroll 4", "shuffle",
                                                          "constant memory"}
    assert "constant memory" not in set(table.loc[table["n"] == 8192, "kernel"])


# --- experiments: GPU only, and the parsers of compiled code ---------------------------------------

@sim_only
def test_timing_functions_say_they_need_a_gpu():
    with pytest.raises(lh.GPUOnlyError, match="GPU"):
        exp.throughput_sweep(sizes=(64,))


PTX = """
$L__BB0_1:
\tld.shared.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1];
$L__BB0_2:
\tsub.ftz.f32 \t%f5, %f1, %f9;
\tsub.ftz.f32 \t%f6, %f2, %f9;
\tsub.ftz.f32 \t%f7, %f3, %f9;
\tfma.rn.ftz.f32 \t%f8, %f5, %f5, %f9;
\trsqrt.approx.ftz.f32 \t%f8, %f8;
\tadd.s64 \t%rd1, %rd1, 16;
\t@%p1 bra \t$L__BB0_2;
\tbar.sync \t0;
\t@%p2 bra \t$L__BB0_1;
"""


def test_ptx_hot_loop_is_the_innermost_loop():
    ops = exp.ptx_ops(PTX)
    assert ops["sub.ftz.f32"] == 3 and ops["rsqrt.approx.ftz.f32"] == 1 and "bar.sync" not in ops
    row = exp._classify_ptx(ops)
    assert row["interactions_per_trip"] == 1 and row["special"] == 1 and row["fp32"] == 4


SASS = """
.L_x_3:
        /*0100*/                   FADD.FTZ R5, R1, -R9 ;
        /*0110*/                   FFMA.FTZ R8, R5, R5, R9 ;
        /*0120*/                   MUFU.RSQ R8, R8 ;
        /*0130*/              @P0  BRA `(.L_x_3) ;
"""


def test_sass_hot_loop():
    ops = exp.sass_ops(SASS)
    assert ops == {"FADD.FTZ": 1, "FFMA.FTZ": 1, "MUFU.RSQ": 1, "BRA": 1}
    row = exp._classify_sass(ops)
    assert row["sass_mufu"] == 1 and row["sass_fp32"] == 2


# --- models ----------------------------------------------------------------------------------------

from labhelpers.models import nbody as model  # noqa: E402


def test_flop_conventions():
    table = model.flop_conventions()
    assert list(table["per interaction"]) == [20, 19, 16, 13]


def test_unit_limits_ideal_loop_is_issue_bound():
    t = model.unit_limits(12, 1, 0, sm_count=132, clock_ghz=2.0).set_index("unit")
    assert t.loc["issue", "binds"] and not t.loc["MUFU", "binds"]
    assert t.loc["issue", "of_fma_peak"] == pytest.approx(20 / (2 * 13))
    assert t.loc["FP32 pipe", "of_fma_peak"] == pytest.approx(20 / 24)
    assert t.loc["MUFU", "of_fma_peak"] == pytest.approx(16 * 20 / 256)


def test_two_mufu_per_interaction_make_the_mufu_bind():
    t = model.unit_limits(12, 2, 1, sm_count=132, fma_peak_gflops=60_000).set_index("unit")
    assert t.loc["MUFU", "binds"]
    assert t.loc["MUFU", "gflops"] == pytest.approx(60_000 * 8 * 20 / 256)


def test_unit_limits_rejects_nonsense():
    with pytest.raises(lh.LabError):
        model.unit_limits(0, 0, 0, sm_count=132)
    with pytest.raises(lh.LabError):
        model.unit_limits(-1, sm_count=132)


def test_layout_sectors():
    t = model.layout_sectors().set_index("stride_floats")
    assert t.loc[1, "sectors_per_load"] == 4 and t.loc[4, "sectors_per_load"] == 16
    assert t.loc[4, "useful_over_the_fields"] == 1.0 and t.loc[7, "useful_over_the_fields"] == pytest.approx(4 / 7)


def test_busy_sms():
    assert model.busy_sms(4096, 512, 4, sm_count=132) == {"blocks": 2, "warps": 32, "busy_sm_share": 2 / 132}
    assert model.busy_sms(2**18, 128, sm_count=132)["busy_sm_share"] == 1.0


def test_streamk_split():
    assert model.streamk_split(2**18, 512, 4, 264) == {"units": 128 * 512, "most": 249, "fewest": 248,
                                                       "busy_share": 128 * 512 / (264 * 249)}
    assert model.streamk_split(140, 32, 4, 3) == {"units": 10, "most": 4, "fewest": 3, "busy_share": 10 / 12}
    assert model.streamk_split(64, 32, 1, 2)["busy_share"] == 1.0
    with pytest.raises(lh.LabError, match="blocks"):
        model.streamk_split(64, 32, 1, 0)


def test_limits_from_the_reference_instruction_mix():
    mix = lh.load_reference("ch08_instruction_mix").table.set_index("kernel")
    best = mix.loc[f"best: {nb.BEST.label}"]
    limits = model.limits_from_mix(best, fma_peak_gflops=60_000).set_index("unit")
    assert limits.loc["issue", "binds"]
    assert 0.6 < limits.loc["issue", "of_fma_peak"] < 20 / 26


def test_cpu_rates_time_the_cpus_best_first_on_every_thread_and_on_one():
    """Runs on the CPU on both backends: the Numba loop on all of Numba's threads, then one, then NumPy."""
    import numba

    t = exp.cpu_rates(sizes=(64,), numba_sizes=(256, 512), repeat=2)
    threads = numba.get_num_threads()
    assert list(t["kernel"]) == [f"Numba parallel float32 ({threads} threads)"] * 2 + [
        "Numba float32 (1 thread)", "NumPy float64 (1 core)"]
    assert list(t["threads"]) == [threads, threads, 1, 1] and numba.get_num_threads() == threads  # restored
    assert (t["ginteractions"] > 0).all() and (t["min_ms"] <= t["median_ms"]).all()
    assert np.allclose(t["ginteractions_per_thread"] * t["threads"], t["ginteractions"])
    s = exp.cpu_summary(t)
    assert s["best_kernel"].startswith("Numba") and s["per_thread"] > 0 and s["parallel_efficiency"] > 0
    only_numpy = exp.cpu_rates(sizes=(64,), parallel=False, repeat=1)
    assert list(only_numpy["kernel"]) == ["NumPy float64 (1 core)"]


def test_cpu_summary_reads_tables_collected_before_the_threads_column():
    old = lh.load_reference("ch08_cpu").table.drop(columns=["threads"], errors="ignore")
    s = exp.cpu_summary(old)
    assert s["best"] == old["ginteractions"].max() and s["threads"] >= 1
    assert s["best_kernel"].startswith("Numba")


# --- reference data and the chapter's tables ---------------------------------------------------------

def test_reference_tables_hold_what_the_chapter_reads():
    t = lh.load_reference("ch08_throughput")
    assert {"fp32_fma_peak_gflops", "dram_gbs", "best"} <= set(t.meta)
    assert set(exp.SIZES) <= set(t.table["n"])
    assert set(exp.LADDER) <= set(t.table["kernel"])
    summary = exp.ladder_summary(t.table, 2**18, t.meta["fp32_fma_peak_gflops"])
    assert summary.loc["naive, unroll 1", "x naive"] == 1.0
    # a measurement above the FMA peak of the same run would be a bug
    assert (summary["% of FMA peak"] < 100).all()
    traps = lh.load_reference("ch08_math_traps").table
    assert list(traps["math_mode"]) == list(nb.MATH_MODES) and (traps["slowdown"] >= 1).all()
    assert not lh.load_reference("ch08_cpu").table.empty
    lecture = lh.load_reference("ch08_lecture_table").table
    assert lecture["ginteractions"].max() == 45.2


def test_best_config_of_the_tuning_table():
    assert exp.best_config(lh.load_reference("ch08_tuning").table) == nb.BEST


def test_roofline_points():
    t = lh.load_reference("ch08_throughput").table
    pts = exp.roofline_points(t, 2**18, ["naive, unroll 4", "tiled 256, unroll 4", "nonexistent"])
    assert list(pts["kernel"]) == ["naive, unroll 4", "tiled 256, unroll 4"]
    assert pts["intensity"].iloc[0] == pytest.approx(1.25, rel=1e-3)
    assert pts["intensity"].iloc[1] == pytest.approx(1.25 * 256, rel=1e-2)


def _prose(path: Path = CHAPTER) -> str:
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def test_chapter_prose_about_the_cpu_yardstick_matches_the_reference_data():
    cpu = lh.load_reference("ch08_cpu").table
    t = lh.load_reference("ch08_throughput")
    best_gpu = exp.ladder_summary(t.table, 2**18, t.meta["fp32_fma_peak_gflops"]).loc[
        f"best: {nb.BEST.label}", "G interactions/s"]
    s = exp.cpu_summary(cpu)
    par = cpu[cpu["threads"] == s["threads"]].sort_values("n")
    numpy_rate = cpu[cpu["kernel"].str.startswith("NumPy")]["ginteractions"]
    # "the call took about 8 ms at every size measured, n = 2^12 to 2^14": the time does not grow with n
    assert list(par["n"]) == [2**12, 2**13, 2**14] and par["median_ms"].max() / par["median_ms"].min() < 1.1
    assert par["ginteractions"].is_monotonic_increasing  # "the rate is still rising at the largest"
    assert s["best"] == par["ginteractions"].iloc[-1] and s["best_kernel"].startswith("Numba parallel")
    assert numpy_rate.max() / numpy_rate.min() < 1.2  # NumPy "runs at the same rate at every size"
    numpy_big = cpu[cpu["kernel"].str.startswith("NumPy")].set_index("n")["median_ms"]
    assert numpy_big.index.max() == 2**12 and numpy_big.loc[2**12] > 500  # "more than half a second"
    phrases = [
        f"The Numba loop runs at {s['per_thread']:.1f} G interactions/s on one thread.",
        f"On all {s['threads']} threads, the call took about {par['median_ms'].median():.0f} ms at every size",
        f"the largest, {s['best']:.1f} G interactions/s, {s['parallel_efficiency']:.0%} of {s['threads']} times the "
        "one-thread rate",
        f"the best kernel is {best_gpu / s['best']:.0f} times the CPU as measured, and would still be "
        f"{best_gpu / (s['threads'] * s['per_thread']):.0f} times a CPU whose every thread ran as fast",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)


def test_chapter_claims_about_the_kernels_hold_in_the_reference_data():
    t = lh.load_reference("ch08_throughput")
    s = exp.ladder_summary(t.table, 2**18, t.meta["fp32_fma_peak_gflops"])["G interactions/s"]
    assert s["naive, unroll 1"] < s["naive, unroll 4"] < 1.4 * s["naive, unroll 1"]  # "helps a little"
    assert s["naive, unroll 16"] <= s["naive, unroll 1"] * 1.02  # "by 16 it does not help at all"
    for aos, soa in (("naive, unroll 1", "naive SoA, unroll 1"), ("tiled 256, unroll 4", "tiled SoA 256, unroll 4")):
        assert abs(s[soa] / s[aos] - 1) < 0.05  # "no difference at scale"
    small = exp.ladder_summary(t.table, 2**12, t.meta["fp32_fma_peak_gflops"])["G interactions/s"]
    assert small["naive SoA, unroll 1"] > small["naive, unroll 1"]  # "at small n the SoA naive kernel is faster"
    pct = exp.ladder_summary(t.table, 2**18, t.meta["fp32_fma_peak_gflops"])["% of FMA peak"]
    assert 60 <= pct[f"best: {nb.BEST.label}"] < pct[exp.STREAMK_NAME] < 72  # "about two thirds"; 72% "missed"
    assert s.idxmax() == exp.STREAMK_NAME and t.meta["streamk"] == nb.STREAMK.label  # stream-K: the last step
    tuning = lh.load_reference("ch08_tuning").table
    for _, g in tuning.groupby("tile"):
        assert g.set_index("bodies")["ginteractions"].idxmin() == 8  # eight bodies: "slower everywhere"
    traps = lh.load_reference("ch08_math_traps").table.set_index("math_mode")["slowdown"]
    gain = s[f"best: {nb.BEST.label}"] / s["tiled 256, unroll 4"]
    assert min(traps["precise"], traps["float64"]) > 2 * gain  # "both traps cost far more than any tuning gains"


#: Nsight Compute's metrics of the best tiled kernel and of stream-K (one launch each at n = 2^18, H200, November
#: 2026; bench/tuning/profile.py), and the IDs of those launches in the long CSV.
NCU_CSV = CHAPTER.parents[1] / "bench" / "tuning" / "results" / "ncu-2026-11-29.csv"
NCU_IDS = {"tiled": "19", "streamk": "21"}


def _ncu() -> dict[str, dict[str, float]]:
    import csv

    out: dict[str, dict[str, float]] = {}
    with NCU_CSV.open() as f:
        for row in csv.reader(f):
            for name, launch in NCU_IDS.items():
                if len(row) > 14 and row[0] == launch:
                    out.setdefault(name, {})[row[12]] = float(row[14].replace(",", ""))
    return out


def test_chapter_prose_about_streamk_matches_the_reference_data_and_the_profile():
    ncu = _ncu()
    assert {"nbody_tiled", "nbody_streamk"} == {  # the launches are the kernels the prose names
        kernel.split("::")[-1].split("[")[0] for kernel in _ncu_kernels()}
    t = lh.load_reference("ch08_throughput")
    peak, sms = t.meta["fp32_fma_peak_gflops"], t.meta["sm_count"]
    best, sk = f"best: {nb.BEST.label}", exp.STREAMK_NAME
    at = {k: exp.ladder_summary(t.table, 2**k, peak) for k in (14, 18)}
    mix = lh.load_reference("ch08_instruction_mix").table.set_index("kernel")
    static = {k: mix.loc[k, "sass_total"] / mix.loc[k, "interactions_per_trip"] for k in (best, sk)}
    n = 2**18
    m = {}
    for name, v in ncu.items():
        m[name] = {"ms": v["gpu__time_duration.sum"] / 1e6, "inst": v["smsp__inst_executed.sum"] / (n * n / 32),
                   "issue": v["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                   "fma": v["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
                   "ghz": v["sm__cycles_elapsed.avg.per_second"] / 1e9,
                   "warps": v["sm__warps_active.avg.pct_of_peak_sustained_active"],
                   "stall": {k: v[f"smsp__average_warps_issue_stalled_{k}_per_issue_active.ratio"]
                             for k in ("not_selected", "wait", "dispatch_stall", "mio_throttle")}}
    b, s = m["tiled"], m["streamk"]
    grid = model.busy_sms(n, nb.BEST.tile, nb.BEST.bodies, sm_count=sms)
    split = model.streamk_split(n, nb.STREAMK.tile, nb.STREAMK.bodies, sms * nb.STREAMK.per_sm)
    peak_ghz = peak / (sms * 128 * 2)
    ratio = b["ghz"] / peak_ghz
    pct = {k: at[18].loc[k, "% of FMA peak"] for k in (best, sk)}
    rate = {k: at[18].loc[k, "G interactions/s"] for k in (best, sk)}
    small = at[14]["G interactions/s"]
    blocks14 = model.busy_sms(2**14, nb.BEST.tile, nb.BEST.bodies, sm_count=sms)["blocks"]
    units14 = model.streamk_split(2**14, nb.STREAMK.tile, nb.STREAMK.bodies, sms * nb.STREAMK.per_sm)["units"]
    ceiling = 100 * 10 / s["inst"] * ratio
    gain = rate[sk] / rate[best]
    assert abs(s["ghz"] / b["ghz"] - 1) < 0.01  # one clock ratio for both kernels
    assert abs(b["issue"] / 100 * grid["busy_sm_share"] * 10 / b["inst"] * ratio * 100 - pct[best]) < 1  # it adds up
    assert abs(s["issue"] / 100 * ceiling - pct[sk]) < 1
    assert abs(b["inst"] - static[best]) < 0.05 and 13 < static[sk] < s["inst"]  # static and measured counts agree
    bound = model.limits_from_mix(mix.loc[best], fma_peak_gflops=peak).set_index("unit").loc["issue", "of_fma_peak"]
    phrases = [
        f"Why does the best kernel stop at about {pct[best] / 100 / bound:.0%} of its issue bound?",
        f"| duration (`gpu__time_duration`) | {b['ms']:.1f} ms |",
        f"| warp instructions per interaction (`smsp__inst_executed` / $(n^2/32)$) | {b['inst']:.2f} |",
        f"| issue slots used, on SMs with work (`smsp__issue_active`) | {b['issue']:.1f}% |",
        f"| FMA pipe busy (`sm__pipe_fma_cycles_active`) | {b['fma']:.1f}% |",
        f"| SM clock (`sm__cycles_elapsed.avg.per_second`) | {b['ghz']:.2f} GHz |",
        f"| stalls per issued instruction: not selected, wait, dispatch | {b['stall']['not_selected']:.2f}, "
        f"{b['stall']['wait']:.2f}, {b['stall']['dispatch_stall']:.2f} |",
        f"the static count of the compiled loop above ({static[best]:.2f} per interaction)",
        f"The FMA pipe is {b['fma']:.0f}% busy",
        f"make {grid['blocks']} blocks for {sms} SMs, one block each, and {sms - grid['blocks']} SMs have nothing",
        f"at {b['inst']:.2f} instructions per interaction, would reach 10/{b['inst']:.2f} = {1000 / b['inst']:.1f}% of its",
        f"measured {peak / 1e3:.1f} TFLOP/s in the benchmark run, which is {sms} SMs x 128 lanes x 2 flops at "
        f"{peak_ghz:.2f} GHz; the SMs ran at {b['ghz']:.2f} GHz",
        f"{ratio:.3f} times as fast",
        f"{b['issue']:.1f}% x {grid['blocks']}/{sms} x 10/{b['inst']:.2f} x {ratio:.3f} = "
        f"{b['issue'] / 100 * grid['busy_sm_share'] * 10 / b['inst'] * ratio * 100:.1f}%. Measured: {pct[best]:.1f}% "
        "of the FMA peak.",
        f"at $2^{{18}}$ there are ${grid['blocks']} \\times {n // nb.STREAMK.tile} = "
        f"{split['units']:,}$ units".replace(",", "{,}"),
        f"At $2^{{18}}$ stream-K makes {rate[sk]:,.0f} G interactions/s, {pct[sk]:.1f}% of the FMA peak against "
        f"{pct[best]:.1f}% for the best tiled configuration: {gain:.2f} times.",
        f"has {blocks14} blocks for {sms} SMs (it was tuned at $2^{{18}}$), while stream-K shares its {units14} units out "
        f"over {sms * nb.STREAMK.per_sm} blocks: {small[sk]:,.0f} against {small[best]:,.0f} G interactions/s, "
        f"{small[sk] / small[best]:.0f} times, and still {small[sk] / small['tiled 256, unroll 4']:.1f} times "
        f"`tiled 256, unroll 4` with its {model.busy_sms(2**14, 256, sm_count=sms)['blocks']} blocks.",
        f"| duration | {b['ms']:.1f} ms | {s['ms']:.1f} ms |",
        f"| blocks (the grid) | {grid['blocks']} | {sms * nb.STREAMK.per_sm} |",
        f"| warp instructions per interaction | {b['inst']:.2f} | {s['inst']:.2f} |",
        f"| issue slots used, on SMs with work | {b['issue']:.1f}% | {s['issue']:.1f}% |",
        f"| FMA pipe busy | {b['fma']:.1f}% | {s['fma']:.1f}% |",
        f"| warps resident, of 64 per SM (`sm__warps_active`) | {b['warps']:.1f}% | {s['warps']:.1f}% |",
        f"| stalls per issued instruction: not selected, dispatch, MIO throttle | {b['stall']['not_selected']:.2f}, "
        f"{b['stall']['dispatch_stall']:.2f}, {b['stall']['mio_throttle']:.2f} | {s['stall']['not_selected']:.2f}, "
        f"{s['stall']['dispatch_stall']:.2f}, {s['stall']['mio_throttle']:.2f} |",
        f"there are {1 - s['inst'] / b['inst']:.1%} fewer instructions per interaction ({static[sk]:.2f} in the "
        f"compiled inner loop, `ch08_instruction_mix`, against {static[best]:.2f})",
        f"The issue share fell from {b['issue']:.1f}% to {s['issue']:.1f}%, with more warps resident",
        f"Stream-K reaches {pct[sk]:.1f}%, and the target is **missed**",
        f"at {s['inst']:.2f} instructions per interaction and the clock ratio of {ratio:.3f}, issuing in every slot "
        f"would give {ceiling:.1f}% of the measured peak, and the {s['issue']:.1f}% of the slots the kernel used give "
        f"{s['issue'] / 100 * ceiling:.1f}%. Reaching 72% needs {72 / ceiling:.0%} of the issue slots",
        f"13 of the {s['inst']:.2f} instructions are the interaction itself",
        f"runs at {pct[sk]:.1f}% of the FMA peak, {pct[sk] / ceiling:.0%} of the issue bound",
        f"{gain - 1:.0%} faster at $2^{{18}}$, where {grid['blocks']} blocks met {sms} SMs, and "
        f"{small[sk] / small[best]:.0f} times at $2^{{14}}$",
        f"At {pct[sk]:.1f}% of the FMA peak it misses the 72% target, which would need {72 / ceiling:.0%}",
        f"The stream-K kernel is {gain - 1:.0%} faster than the best tiled kernel at $n = 2^{{18}}$, and "
        f"{small[sk] / small[best]:.0f} times faster at $2^{{14}}$.",
        f"at $2^{{18}}$ that is {grid['blocks']} blocks for {sms} SMs ({sms - grid['blocks']} idle, "
        f"{1 - grid['busy_sm_share']:.0%} of the GPU), at $2^{{14}}$ only {blocks14} blocks",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data or the profile:\n" + "\n".join(missing)


def _ncu_kernels() -> set[str]:
    import csv

    with NCU_CSV.open() as f:
        return {row[4] for row in csv.reader(f) if len(row) > 14 and row[0] in NCU_IDS.values()}


# --- figures -----------------------------------------------------------------------------------------

def test_figures_draw_from_the_reference_data():
    import matplotlib.pyplot as plt

    from labhelpers.figures import nbody as fig_nb

    t = lh.load_reference("ch08_throughput")
    peak = t.meta["fp32_fma_peak_gflops"]
    mix = lh.load_reference("ch08_instruction_mix").table
    summary = exp.ladder_summary(t.table, 2**18, peak)
    here = summary[["G interactions/s"]].reset_index().rename(columns={"G interactions/s": "ginteractions"})
    best = mix.set_index("kernel").loc[f"best: {nb.BEST.label}"]
    pos, vel = nb.galaxy_collision(40)
    traj = nb.simulate(pos, vel, 0.05, 4, every=2, engine="numpy")
    plots = [
        lambda ax: fig_nb.plot_throughput(t.table, ax=ax, label=t.label, fma_peak_gflops=peak),
        lambda ax: fig_nb.plot_lecture_comparison(here, lh.load_reference("ch08_lecture_table").table, ax=ax,
                                                  here_label="here", lecture_label="lecture"),
        lambda ax: fig_nb.plot_math_traps(lh.load_reference("ch08_math_traps").table, ax=ax, label="ref"),
        lambda ax: fig_nb.plot_tuning(lh.load_reference("ch08_tuning").table, ax=ax, label="ref",
                                      fma_peak_gflops=peak),
        lambda ax: fig_nb.plot_instruction_mix(mix.dropna(subset=["sass_total"]), ax=ax, label="ref"),
        lambda ax: fig_nb.plot_unit_limits(model.limits_from_mix(best, fma_peak_gflops=peak), 2000.0, ax=ax,
                                           label="ref"),
        lambda ax: fig_nb.plot_roofline(exp.roofline_points(t.table, 2**18, ["naive, unroll 4"]), ax=ax,
                                        dram_gbs=t.meta["dram_gbs"], fma_peak_gflops=peak, label="ref"),
        lambda ax: fig_nb.plot_energy_error({"a": traj}, ax=ax),
    ]
    for plot in plots:  # on the axes given: that axes' figure
        fig, ax = plt.subplots()
        assert plot(ax) is fig
        plt.close(fig)
    for plot in plots:  # on none: a new figure
        fig = plot(None)
        assert isinstance(fig, Figure) and len(fig.axes) >= 1
        plt.close(fig)
    fig = fig_nb.plot_galaxy_frames(traj, (0, 1, 2))
    assert [ax.get_title() for ax in fig.axes] == [f"t = {traj.times[k]:.2f}  (40 bodies)" for k in range(3)]
    plt.close(fig)
    drawers = [
        lambda ax: fig_nb.draw_galaxy(ax, traj, 1),
        lambda ax: fig_nb.draw_tiles(ax, 100, 32),
        lambda ax: fig_nb.draw_tiles(ax, 1, 32, block=0),
    ]
    for draw in drawers:
        fig, ax = plt.subplots()
        assert draw(ax) is None and ax.get_title()
        plt.close(fig)


# --- lab checkers: tests/test_lab_mutants_08_10.py (one mutant per bug class is rejected; solutions: test_labs) -


def test_chapter_claims_about_the_alternatives_hold_in_the_reference_data():
    alt = lh.load_reference("ch08_alternatives").table
    g = alt.pivot_table(index="kernel", columns="n", values="ginteractions")
    tiled, naive, shuffle, const = "tiled 256, unroll 4", "naive, unroll 4", "shuffle", "constant memory"
    assert (g.idxmax() == tiled).all()  # "the shared tile wins at every size"
    assert (g.loc[shuffle] > g.loc[naive]).all()  # the shuffles beat the naive kernel at every size
    assert list(g.loc[const].dropna().index) == [4096]  # "constant memory could only run at n = 4096"
    assert 1 < g.loc[const, 4096] / g.loc[shuffle, 4096] < 1.1  # "a little ahead of the shuffles"
    assert 1.5 < g.loc[tiled, 2**18] / g.loc[shuffle, 2**18] < 2  # "almost a factor of two"
    both = g[2**18].notna()
    assert (g.loc[both, 4096] <= 0.1 * g.loc[both, 2**18]).all()  # "a tenth or less of its rate at 2^18"
    t18, s18, n18 = g.loc[tiled, 2**18], g.loc[shuffle, 2**18], g.loc[naive, 2**18]
    c4, s4, n4, t4 = g.loc[const, 4096], g.loc[shuffle, 4096], g.loc[naive, 4096], g.loc[tiled, 4096]
    phrases = [
        f"the tiled kernel makes {t18:,.0f} G interactions/s, the shuffle kernel {s18:,.0f} ({s18 / t18:.0%} of it) "
        f"and the naive kernel {n18:,.0f}: the shuffles beat the naive kernel by {s18 / n18:.2f} times",
        f"at $2^{{16}}$ the order is the same ({g.loc[tiled, 2**16]:,.0f}, {g.loc[shuffle, 2**16]:,.0f} and "
        f"{g.loc[naive, 2**16]:,.0f})",
        f"at $n = 4096$: {c4:.1f} G interactions/s, a little ahead of the shuffles ({s4:.1f}) and {c4 / n4:.1f} times "
        f"the naive kernel ({n4:.1f}), but {c4 / t4:.0%} of the tiled kernel ({t4:.1f})",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    assert "Not measured yet" not in CHAPTER.read_text()
