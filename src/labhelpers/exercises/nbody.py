"""Checkers for lab 8, "n-body" (labs/08_nbody_lab.ipynb). Each takes the student's code first.

* :func:`check_interaction`: the body-body interaction as a ``@cuda.jit(device=True)`` function, float32.
* :func:`check_naive`: ``kernel(pos, eps2, acc)``, one thread per body, for any n.
* :func:`check_tiled`: the shared-memory kernel for any n, launched with ``tile`` threads per block.
* :func:`check_leapfrog`: one kick-drift-kick step, which must keep a circular orbit's energy and follow
  the float64 leapfrog.

The three kernel exercises are declared for the exercise harness (:mod:`labhelpers.exercises.harness`):
partial last blocks (n = block - 1 and block + 1), the race detector on two blocks the last of which is
partial, float64 found from Numba's types (a float64 literal names its line), positions followed in memory
by NaN and accelerations by a guard band. Accelerations are compared with float64 NumPy relative to the
size of their terms (:data:`labhelpers.kernels.nbody.ACC_RTOL`).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np
from numba import cuda, float32, types  # module global: the simulator swaps `cuda` in kernels' globals

from .. import backend, gpus
from ..checkers import NUMBA_TRACE_LIMIT
from ..errors import CheckFailed
from ..experiments import nbody as experiments
from ..kernels import nbody as nb
from ..launch import blocks_for
from ..refdata import load_reference
from ..timing import Timing, benchmark
from . import answers
from . import harness as h
from . import timed

#: Bodies tried by the kernel checkers beyond the harness's own sizes.
SIZES_GPU: tuple[int, ...] = (1000, 4097)
SIZES_SIM: tuple[int, ...] = (1, 2, 31, 33)
#: Threads per block of the naive kernel's launches.
THREADS_GPU: tuple[int, ...] = (64, 256)
THREADS_SIM: tuple[int, ...] = (32,)
#: The softening of every check.
EPS2 = nb.DEFAULT_EPS2
#: Energy drift allowed over one orbit of the circular binary (100 steps): a correct float32 leapfrog stays
#: below 1e-5; the usual mistakes (Euler's order, stale forces, full kicks) drift by 1e-3 or more.
ENERGY_TOLERANCE = 1e-4
#: Positions after 10 steps of a small cluster must match the float64 leapfrog within this distance.
POSITION_TOLERANCE = 1e-4
#: Tiles the tiled kernel may use (the shared array's size).
TILES = (32, 64, 128, 256, 512, 1024)


@contextlib.contextmanager
def _quiet():
    """Silence NumPy's divide-by-zero warnings of a wrong kernel under the simulator: the checker reports the NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _relative(got: np.ndarray, expected: np.ndarray, scale: np.ndarray, rtol: float) -> np.ndarray:
    """Which rows of ``got`` are within ``rtol`` of ``expected``, relative to each row's ``scale``."""
    err = np.max(np.abs(got - expected), axis=1) / np.where(scale > 0, scale, 1e-30)
    return np.repeat((err <= rtol)[:, None], got.shape[1], axis=1)


# -------------------------------------------------------------------------------- exercise 1


def _pair_kernel(device_function):
    @cuda.jit(fastmath=True)
    def pairs(pi, pj, eps2, out):
        t = cuda.grid(1)
        if t < out.shape[0]:
            fx, fy, fz = device_function(pi[t, 0], pi[t, 1], pi[t, 2], pj[t, 0], pj[t, 1], pj[t, 2], pj[t, 3], eps2)
            out[t, 0] = fx
            out[t, 1] = fy
            out[t, 2] = fz

    return pairs


def _pairs_args(case: h.Case) -> tuple:
    pi = nb.random_bodies(case.n, case.rng)
    pj = nb.random_bodies(case.n, case.rng)
    pj[::3] = pi[::3]  # a body with itself: exactly 0
    return (pi, pj, np.float32(EPS2), h.Out((case.n, 3), np.float32))


def _pairs_reference(case, pi, pj, eps2):
    d = pj[:, :3].astype(np.float64) - pi[:, :3]
    r2 = np.sum(d * d, axis=1) + float(eps2)
    return (pj[:, 3] * r2**-1.5)[:, None] * d


def _pairs_close(case, index, got, expected, inputs):
    return _relative(got, expected, np.abs(expected).max(axis=1), 1e-5)


def _pairs_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str]:
    pi, pj = inputs[0], inputs[1]
    same = np.all(pi == pj, axis=1)
    if np.isnan(got[same]).any():
        return ("Softening", "a body's interaction with itself must be exactly 0; NaN means r2 was 0: add the "
                "softening eps2 to r2.")
    return (h.WRONG_VALUES, "it is m_j * (x_j - x_i) / (r2)^(3/2) with r2 = eps2 + dx^2 + dy^2 + dz^2: "
            "s = mj * inv_r * inv_r * inv_r with inv_r = 1 / sqrt(r2).")


def interaction_exercise() -> h.Exercise:
    """Exercise 1 as declared: every thread calls the device function on one pair (i, j), self pairs included."""
    return h.Exercise(
        name="your interaction", args=_pairs_args, reference=_pairs_reference, configs=[{"threads": 32}],
        configs_gpu=[{"threads": 128}], sizes=lambda config: SIZES_SIM, dtype=np.float32,
        device_function=(_pair_kernel, (float32,) * 8, types.UniTuple(float32, 3)), close=_pairs_close,
        explain=_pairs_explain, races=False, seed=8)


def check_interaction(device_function: Callable) -> None:
    """Exercise 1: ``device_function(xi, yi, zi, xj, yj, zj, mj, eps2) -> (ax, ay, az)``, float32.

    A ``@cuda.jit(device=True)`` function (a plain Python function or a kernel is refused, on both backends),
    returning three float32 (from Numba's types: a float64 literal names its line), matching float64 on
    pairs of random bodies, a body with itself giving exactly 0.
    """
    h.check(interaction_exercise(), device_function)


# -------------------------------------------------------------------------------- exercises 2 and 3


def _forces_args(case: h.Case) -> tuple:
    return (nb.random_bodies(case.n, case.rng), np.float32(EPS2), h.Out((case.n, 3), np.float32))


def _forces_reference(case, pos, eps2):
    return nb.accelerations_numpy(pos, EPS2)


def _forces_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    if np.isnan(got).any():
        return None  # the harness names unwritten bodies
    return (h.WRONG_VALUES, "every body j, the body itself included, adds m_j (x_j - x_i) / (r^2 + eps2)^(3/2): "
            "check the loop bounds (all n bodies, each once) and the formula.")


def _forces_exercise(name: str, configs, configs_gpu, sizes) -> h.Exercise:
    return h.Exercise(
        name=name, args=_forces_args, reference=_forces_reference, configs=configs, configs_gpu=configs_gpu,
        sizes=lambda config: sizes, sizes_gpu=SIZES_GPU, dtype=np.float32, rtol=nb.ACC_RTOL, atol=1e-6,
        close=_forces_close,
        explain=_forces_explain, seed=2)


def _forces_close(case, index, got, expected, inputs):
    """Each body's error relative to the size of the terms it adds up (its rounding error scales with them)."""
    _ref, scale = nb.accelerations_numpy(inputs[0], EPS2, with_scale=True)
    return _relative(got, expected, scale, nb.ACC_RTOL)


def naive_exercise() -> h.Exercise:
    """Exercise 2 as declared for the harness."""
    return _forces_exercise("your naive kernel", [{"threads": t} for t in THREADS_SIM],
                            [{"threads": t} for t in THREADS_GPU], SIZES_SIM)


def check_naive(kernel: Any) -> None:
    """Exercise 2: ``kernel(pos, eps2, acc)``, one thread per body, any n (launched with 1D blocks).

    Raises:
        CheckFailed: with the bug's class first (a missing bounds guard, elements never written, float64...).
    """
    h.check(naive_exercise(), kernel)


def tiled_exercise(tile: int) -> h.Exercise:
    """Exercise 3 as declared: ``tile`` threads per block (the shared array's size)."""
    return _forces_exercise("your tiled kernel", [{"threads": tile}], [], SIZES_SIM)


def check_tiled(kernel: Any, tile: int) -> None:
    """Exercise 3: the shared-memory kernel ``kernel(pos, eps2, acc)``, ``tile`` threads per block, any n.

    The race detector runs first on two blocks, the last one partial (a barrier inside ``if i < n`` shows
    there), then the results for every size.
    """
    h.require_kernel(kernel, "nbody_tiled")
    tile = h.integer_argument(tile, "tile (the lab's TILE, the shared array's size)", TILES)
    h.check(tiled_exercise(tile), kernel)


# -------------------------------------------------------------------------------- exercise 4


def _forces_naive(pos_d, eps2, acc_d) -> None:
    config = nb.Config("naive", threads=32 if backend.is_simulator() else 128)
    blocks, threads = config.launch(pos_d.shape[0])
    config.kernel()[blocks, threads](pos_d, np.float32(eps2), acc_d)


def _run_steps(step: Callable, pos: np.ndarray, vel: np.ndarray, dt: float, steps: int):
    pos_d, vel_d = cuda.to_device(pos.copy()), cuda.to_device(vel.copy())
    acc_d = cuda.device_array((pos.shape[0], 3), dtype=np.float32)
    _forces_naive(pos_d, EPS2, acc_d)
    for _ in range(steps):
        try:
            step(pos_d, vel_d, acc_d, dt, EPS2, _forces_naive)
        except NotImplementedError:
            raise CheckFailed("leapfrog_step is not written yet: replace the placeholder.") from None
        except CheckFailed:
            raise
        except Exception as exc:  # noqa: BLE001
            text = str(exc)[:NUMBA_TRACE_LIMIT]
            raise CheckFailed(f"leapfrog_step raised {type(exc).__name__}: {text}") from None
    return pos_d.copy_to_host(), vel_d.copy_to_host(), acc_d.copy_to_host()


def check_leapfrog(step: Callable) -> None:
    """Exercise 4: ``step(pos_d, vel_d, acc_d, dt, eps2, forces)``: one kick-drift-kick step on the device.

    On entry ``acc_d`` holds the accelerations of the current positions; on exit positions and velocities
    are one step ``dt`` later and ``acc_d`` holds the accelerations of the new positions (so the next step
    can start with its first kick). ``forces(pos_d, eps2, acc_d)`` computes them.

    Checks: 10 steps of a 33-body cluster match the float64 leapfrog within :data:`POSITION_TOLERANCE`
    (quick, and it catches any change to the order of the updates); then one orbit of a circular binary
    (100 steps) keeps the energy within :data:`ENERGY_TOLERANCE`, and the momentum.
    """
    h.require_function(step, "leapfrog_step", "(pos_d, vel_d, acc_d, dt, eps2, forces)")
    cpos, cvel = nb.galaxy_collision(33, np.random.default_rng(4))
    p, v, _ = _run_steps(step, cpos, cvel, 0.01, 10)
    if np.array_equal(p, cpos) and np.array_equal(v, cvel):
        raise CheckFailed("leapfrog_step changed nothing: kick the velocities by dt/2, drift the positions by dt, "
                          "compute the new forces, kick again by dt/2.")
    ref_p, _ref_v = nb.leapfrog_numpy(cpos, cvel, 0.01, 10, EPS2)
    off = np.abs(p[:, :3] - ref_p[:, :3]).max()
    if off > POSITION_TOLERANCE:
        raise CheckFailed(f"after 10 steps of a 33-body cluster the positions differ from the float64 leapfrog by "
                          f"up to {off:.2g} (allowed {POSITION_TOLERANCE:g}): follow kick(dt/2), drift(dt), forces, "
                          "kick(dt/2) exactly, with dt/2 and dt as float32. Drifting before the first kick, kicking "
                          "by a whole dt, or kicking with stale forces is Euler's method in disguise, whose energy "
                          "drifts.")
    pos, vel = nb.circular_binary(1.0, EPS2)
    period = nb.binary_period(1.0, EPS2)
    dt = period / 100
    p, v, a = _run_steps(step, pos, vel, dt, 100)
    if np.array_equal(p, pos) and np.array_equal(v, vel):
        raise CheckFailed("leapfrog_step changed nothing: kick the velocities by dt/2, drift the positions by dt, "
                          "compute the new forces, kick again by dt/2.")
    e0, e1 = nb.energy(pos, vel, EPS2), nb.energy(p, v, EPS2)
    drift = abs(e1 - e0) / abs(e0)
    p0, p1 = nb.momentum(pos, vel), nb.momentum(p, v)
    if not np.all(np.isfinite(p)) or not np.all(np.isfinite(v)):
        raise CheckFailed("leapfrog_step produced NaN or infinity: are the kernels launched on the right arrays?")
    if drift > ENERGY_TOLERANCE:
        raise CheckFailed(
            f"over one orbit (100 steps) the energy changed by {drift:.2g} of itself; a kick-drift-kick leapfrog keeps "
            f"it below {ENERGY_TOLERANCE:g}. The order matters: kick(dt/2) with the current acc, drift(dt) with the "
            "new velocities, forces at the new positions, kick(dt/2) with the new acc. Drifting before the first "
            "kick, kicking by a whole dt, or kicking with stale forces is Euler's method in disguise: its energy "
            "drifts.")
    if np.abs(p1 - p0).max() > 1e-5:
        raise CheckFailed(f"the total momentum changed from {p0.tolist()} to {p1.tolist()}: every body must get the "
                          "same kind of kicks (all of vel, with the accelerations of all bodies).")
    if not np.allclose(a, nb.accelerations_numpy(p, EPS2), rtol=1e-3, atol=1e-6):
        raise CheckFailed("after the step, acc_d must hold the accelerations of the new positions: call "
                          "forces(pos_d, eps2, acc_d) after the drift, before the second kick.")
    print(f"Correct: one orbit in 100 steps keeps the energy within {ENERGY_TOLERANCE:g} of itself and the momentum, "
          "and 10 steps of a cluster follow the float64 leapfrog.")


__all__ = ["RATE_CASES", "check_interaction", "check_interaction_rate", "check_leapfrog", "check_naive", "check_tiled",
           "interaction_exercise", "naive_exercise", "show_interaction_rate", "tiled_exercise"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Bodies the tiled kernel is timed on (GPU): the size of the chapter's tuning sweep (reference ``ch08_tuning``).
TUNED_N = 2**18
#: The share of the chapter's best configuration's interactions/s to reach: the chapter's tiled kernel without
#: unrolling (tile 256, one body per thread) reached about half of it on the reference GPU (``ch08_throughput``).
TUNED_TARGET = timed.target_for("8", 0.4)


def _tile_reference(tile: int) -> str:
    """The reference GPU's tuning sweep at ``tile`` (unroll 4, one body per thread) against the best configuration."""
    ref = load_reference("ch08_tuning")
    t = ref.table
    best = t.loc[t["ginteractions"].astype(float).idxmax()]
    plain = load_reference("ch08_throughput").table
    plain = plain[(plain["kernel"] == "tiled 256, unroll 1") & (plain["n"] == TUNED_N)]
    plain_text = (f"; the chapter's tiled kernel without unrolling (tile 256), like yours, reached "
                  f"{float(plain['ginteractions'].iloc[0]):,.0f} ('ch08_throughput', ratio "
                  f"{float(plain['ginteractions'].iloc[0]) / float(best.ginteractions):.2f})" if len(plain) else "")
    match = t[(t["tile"] == tile) & (t["bodies"] == 1)]
    if match.empty:
        what = (f"a tile of {tile} was not measured (the sweep has tiles {sorted(set(t['tile'].astype(int)))}); the "
                f"chapter's best configuration (tile {int(best.tile)}, {int(best.bodies)} bodies per thread) reached "
                f"{float(best.ginteractions):,.0f} G interactions/s at n = {int(best.n)}")
    else:
        row = match.iloc[0]
        what = (f"the chapter's tiled kernel (unroll 4, one body per thread) with a tile of {tile} reached "
                f"{float(row.ginteractions):,.0f} G interactions/s at n = {int(row.n)}, its best configuration "
                f"(tile {int(best.tile)}, {int(best.bodies)} bodies per thread) {float(best.ginteractions):,.0f}: "
                f"ratio {float(row.ginteractions) / float(best.ginteractions):.2f}")
    return timed.reference_text(ref, what + plain_text)


TILED_TUNED = timed.MeasuredExercise(
    name="your nbody_tiled at your TILE", target=TUNED_TARGET,
    measures=f"your nbody_tiled on {TUNED_N:,} bodies at your TILE, in interactions/s",
    yardstick=f"the chapter's best configuration ({nb.BEST.label}) on the same bodies", reference=_tile_reference)


def _race_tiled(kernel: Any, tile: int) -> tuple[Timing, Timing]:
    pos = nb.random_bodies(TUNED_N, np.random.default_rng(0))
    pos_d = cuda.to_device(pos)
    acc_d = cuda.device_array((TUNED_N, 3), dtype=np.float32)
    blocks = blocks_for(TUNED_N, tile)
    eps2 = np.float32(EPS2)
    student = benchmark(lambda: kernel[blocks, tile](pos_d, eps2, acc_d), flops=nb.flops(TUNED_N), warmup=1,
                        repeat=3, label=f"your nbody_tiled, TILE {tile}")
    return student, experiments.time_config(nb.BEST, TUNED_N, repeat=3)


def check_tiled_speed(kernel: Any, tile: int) -> timed.Verdict:
    """Measured exercise: ``kernel`` (exercise 3, checked first with ``tile``, the lab's TILE) must, on a GPU, reach
    :data:`TUNED_TARGET` of the interactions/s of the chapter's best configuration (``nb.BEST``) on 2^18 bodies,
    both timed in the same run; under the simulator the reference GPU's tuning sweep at that tile is printed.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the tile is not allowed, or too slow.
    """
    h.require_kernel(kernel, "nbody_tiled")
    tile = timed.allowed(tile, "TILE", TILES)
    return timed.check(TILED_TUNED, tile, correct=lambda: check_tiled(kernel, tile),
                          race=lambda: _race_tiled(kernel, tile))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (fp32_gflops, flops_per_interaction) cases of :func:`check_interaction_rate`: arguments of the exercise, not a
#: GPU's figures (the last one is a kernel that counts 23 flops per interaction).
RATE_CASES: tuple[tuple[float, int], ...] = ((60_000.0, 20), (8_100.0, 20), (30_000.0, 23))


def _rate_hint(got: float, gflops: float, per: int) -> str:
    want = gflops / per
    if np.isclose(got, gflops * per, rtol=1e-6):
        return "that is the peak times the flops: the more flops one interaction costs, the fewer fit in a second"
    if np.isclose(got, 2 * want, rtol=1e-6) or np.isclose(got, want / 2, rtol=1e-6):
        return ("the peak already counts an FMA as 2 flops, and so does the 20-flop convention: divide the one by "
                "the other, with no factor 2")
    if np.isclose(got, 1e3 * want, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "GFLOP/s over flops per interaction is already G interactions/s: no factor 1000"
    return f"the roof is the FMA peak over the flops of one interaction, {gflops:g} / {per}"


def check_interaction_rate(predict_ginteractions: Callable) -> None:
    """Predict, then measure: ``predict_ginteractions(fp32_gflops, flops_per_interaction)`` returns the roof of an
    all-pairs kernel in G interactions/s (10^9 per second): the float32 FMA peak over the flops of one interaction.

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_ginteractions, "predict_ginteractions",
                          "predict_ginteractions(fp32_gflops, flops_per_interaction)",
                          RATE_CASES,
                          lambda gflops, per: gflops / per,
                          shown=lambda got, want: f"{got:.6g}, the roof is {want:.6g} G interactions/s",
                          hint=_rate_hint)
    print(f"Correct: your roof equals the FMA peak over the flops per interaction on all {len(RATE_CASES)} cases.")


def show_interaction_rate(predict_ginteractions: Callable) -> None:
    """Your roof (checked first by :func:`check_interaction_rate`) beside a measurement: on a GPU, this GPU's FMA
    peak and the chapter's best configuration timed on :data:`TUNED_N` bodies; under the simulator, the reference
    GPU's peak and its tuning sweep's best configuration (reference ``ch08_tuning``).

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_interaction_rate`).
    """
    check_interaction_rate(predict_ginteractions)
    per = nb.FLOPS_PER_INTERACTION
    if timed.can_time():
        gpu = gpus.current()
        t = experiments.time_config(nb.BEST, TUNED_N, repeat=3)
        got = TUNED_N * TUNED_N / (t.median_ms * 1e-3) / 1e9
        where = f"measured now: {nb.BEST.label} on {TUNED_N:,} bodies."
    else:
        gpu = gpus.reference()
        ref = load_reference("ch08_tuning")
        best = ref.table.loc[ref.table["ginteractions"].astype(float).idxmax()]
        got = float(best.ginteractions)
        where = timed.reference_text(ref, f"the chapter's best configuration (tile {int(best.tile)}, "
                                             f"{int(best.bodies)} bodies per thread) at n = {int(best.n):,}")
    if not gpu.fp32_gflops:
        print(f"{gpu.name}: no FMA peak known, so no roof to compare with; {got:,.0f} G interactions/s, {where}")
        return
    roof = answers.number(answers.call(predict_ginteractions, "predict_ginteractions", gpu.fp32_gflops, per),
                          "predict_ginteractions")
    print(f"Your roof for {gpu.name} ({gpu.fp32_gflops:,.0f} GFLOP/s, {per} flops per interaction): "
          f"{roof:,.0f} G interactions/s")
    print(f"Measured: {got:,.0f} G interactions/s, {got / roof:.0%} of your roof; {where}")
