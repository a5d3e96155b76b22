"""Checkers for lab 8, "n-body" (labs/08_nbody_lab.ipynb). Each takes the student's code first.

* :func:`check_interaction`: the body-body interaction as a device function, float32 throughout.
* :func:`check_naive`: ``kernel(pos, eps2, acc)``, one thread per body, for any n.
* :func:`check_tiled`: the shared-memory kernel for any n, launched with ``tile`` threads per block; its
  barriers checked by the race detector (:func:`labhelpers.check_races`).
* :func:`check_leapfrog`: one kick-drift-kick step, which must keep a circular orbit's energy and follow
  the float64 leapfrog.

The kernels run on n = 1, 2, 31, 33, 1000 and 4097 on a GPU (1, 2, 31, 33 and 100 under the simulator,
which runs a few thousand interactions per second). Every array a kernel sees is a view of a larger
buffer: the positions are followed by heavy bodies far away (a kernel that reads past the end of ``pos``
feels them, on a GPU; under the simulator the read raises), and the accelerations by NaN (a kernel that
writes past the end leaves a finite number there, and one that never writes leaves NaN in ``acc``).
Failures raise :class:`~labhelpers.errors.CheckFailed` with a message that says what to change.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import numpy as np
from numba import cuda  # module global: the simulator swaps `cuda` in kernels' globals

from .. import backend
from ..checkers import NUMBA_TRACE_LIMIT, launch_student_kernel, require_kernel
from ..errors import CheckFailed, GPUOnlyError
from ..kernels import nbody as nb

#: Bodies tried by the kernel checkers.
SIZES_GPU: tuple[int, ...] = (1, 2, 31, 33, 1000, 4097)
SIZES_SIM: tuple[int, ...] = (1, 2, 31, 33, 100)
#: Threads per block of the naive kernel's launches.
THREADS_GPU: tuple[int, ...] = (64, 256)
THREADS_SIM: tuple[int, ...] = (32,)
#: The softening of every check.
EPS2 = nb.DEFAULT_EPS2
#: What follows ``pos`` in memory: a heavy body far away. Finite, so a stray write into ``acc``'s NaN padding
#: shows; heavy, so an interaction with it changes any acceleration by far more than the tolerance.
PADDING_BODY = (40.0, 40.0, 40.0, 1.0e4)
#: Rows of padding after each array.
PAD = 128
#: Energy drift allowed over one orbit of the circular binary (100 steps): a correct float32 leapfrog stays
#: below 1e-5; the usual mistakes (Euler's order, stale forces, full kicks) drift by 1e-3 or more.
ENERGY_TOLERANCE = 1e-4
#: Positions after 10 steps of a small cluster must match the float64 leapfrog within this distance.
POSITION_TOLERANCE = 1e-4


@contextlib.contextmanager
def _quiet():
    """Silence NumPy's divide-by-zero warnings of a wrong kernel under the simulator: the checker reports the NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _sizes() -> tuple[int, ...]:
    return SIZES_SIM if backend.is_simulator() else SIZES_GPU


def _padded_positions(pos: np.ndarray):
    buf = np.empty((pos.shape[0] + PAD, 4), dtype=np.float32)
    buf[:pos.shape[0]] = pos
    buf[pos.shape[0]:] = PADDING_BODY
    return cuda.to_device(buf)[:pos.shape[0]]


def _padded_output(n: int):
    buf = cuda.to_device(np.full((n + PAD, 3), np.nan, dtype=np.float32))
    return buf, buf[:n]


def _compare(got: np.ndarray, pos: np.ndarray, what: str, n: int, extra: str = "") -> None:
    ref, scale = nb.accelerations_numpy(pos, EPS2, with_scale=True)
    if np.isnan(got).all():
        raise CheckFailed(f"{what} wrote nothing into acc for n={n}{extra} (it still holds the NaN the checker put "
                          "there): each thread must write acc[i, 0], acc[i, 1] and acc[i, 2] for its body i.")
    nan_rows = np.isnan(got).any(axis=1)
    if nan_rows.any():
        first = int(np.flatnonzero(nan_rows)[0])
        raise CheckFailed(f"{what} left {int(nan_rows.sum())} of {n} bodies without an acceleration for n={n}{extra} "
                          f"(first: body {first}, still NaN): does the grid cover every body, and does every thread "
                          "with i < n write its three components?")
    err = np.max(np.abs(got - ref), axis=1) / np.where(scale > 0, scale, 1.0)
    if err.max(initial=0.0) > nb.ACC_RTOL:
        bad = int(np.argmax(err))
        raise CheckFailed(
            f"{what} is wrong for n={n}{extra}: body {bad} got {got[bad].tolist()}, expected {ref[bad].tolist()} "
            f"(error {err[bad]:.2g} of the size of its terms; allowed {nb.ACC_RTOL}). Every body j, the body itself "
            "included, adds m_j (x_j - x_i) / (r^2 + eps2)^(3/2): check the loop bounds (all n bodies, each once) "
            "and the formula.")


def _stray_writes(buf, n: int) -> bool:
    tail = buf.copy_to_host()[n:]
    return not np.isnan(tail).all()


# -------------------------------------------------------------------------------- exercise 1


def _float64_problem(device_function: Any) -> str | None:
    """Why ``device_function`` (a Python function underneath) does not compute in float32, or None."""
    import numba
    from numba import float32

    func = getattr(device_function, "py_func", device_function)
    try:
        compiled = numba.njit((float32,) * 8)(func)
    except Exception:  # uses something only the GPU target has (e.g. libdevice): nothing to say here
        return None
    ret = compiled.nopython_signatures[0].return_type
    if ret == numba.types.UniTuple(float32, 3):
        return None
    return (f"it returns {ret}, not three float32 values: somewhere a float64 crept in. In Numba an int or a "
            "Python float literal mixed with float32 gives float64: `1 / math.sqrt(r2)` is a float64 (write "
            "`float32(1) / math.sqrt(r2)`), and so is `0.5 * x` (write `float32(0.5) * x`). On a GPU float64 "
            "runs several times slower.")


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


def check_interaction(device_function: Callable, *, sizes: tuple[int, ...] = (1, 2, 31, 33)) -> None:
    """Exercise 1: ``device_function(xi, yi, zi, xj, yj, zj, mj, eps2) -> (ax, ay, az)``, float32.

    Checks every ordered pair (i, j) of ``n`` random bodies for each ``n`` of ``sizes``, the pairs i == j
    included (they must give exactly 0), against float64, and that nothing is promoted to float64.
    """
    if not callable(device_function):
        raise CheckFailed("interaction must be a function decorated with @cuda.jit(device=True, fastmath=True).")
    problem = _float64_problem(device_function)
    if problem:
        raise CheckFailed(f"your interaction computes in float64: {problem}")
    kernel = _pair_kernel(device_function)
    rng = np.random.default_rng(8)
    for n in sizes:
        pos = nb.random_bodies(n, rng)
        i, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
        pi, pj = np.ascontiguousarray(pos[i]), np.ascontiguousarray(pos[j])
        out = cuda.to_device(np.full((i.size, 3), np.nan, dtype=np.float32))
        threads = 32 if backend.is_simulator() else 128
        with _quiet():
            launch_student_kernel(kernel, -(-i.size // threads), threads,
                                  (cuda.to_device(pi), cuda.to_device(pj), np.float32(EPS2), out), "your interaction")
        got = out.copy_to_host()
        d = pj[:, :3].astype(np.float64) - pi[:, :3]
        r2 = np.sum(d * d, axis=1) + float(np.float32(EPS2))
        ref = (pj[:, 3] * r2**-1.5)[:, None] * d
        same = i == j
        if not np.array_equal(got[same], np.zeros((int(same.sum()), 3), np.float32)):
            raise CheckFailed(
                f"a body's interaction with itself must be exactly 0, got {got[same][0].tolist()}: with dx = dy = dz "
                "= 0 and r2 = eps2 > 0 the formula gives 0 by itself. NaN means r2 was 0: add the softening eps2.")
        scale = np.abs(ref).max(axis=1) + 1e-30
        err = np.max(np.abs(got - ref), axis=1) / scale
        if not np.all(np.isfinite(got)) or err.max(initial=0.0) > 1e-5:
            k = int(np.nanargmax(np.where(np.isfinite(err), err, np.inf)))
            raise CheckFailed(
                f"your interaction is wrong for bodies i={int(i[k])}, j={int(j[k])} of n={n}: got {got[k].tolist()}, "
                f"expected {ref[k].tolist()}. It is m_j * (x_j - x_i) / (r2)^(3/2) with r2 = eps2 + dx^2 + dy^2 + "
                "dz^2: s = mj * inv_r * inv_r * inv_r with inv_r = 1 / sqrt(r2).")
    print(f"Correct: your interaction matches float64 for every pair of n = {', '.join(map(str, sizes))} bodies "
          "(a body with itself gives exactly 0), and stays float32.")


# -------------------------------------------------------------------------------- exercise 2


def _run_forces(kernel, pos: np.ndarray, blocks: int, threads: int, what: str, out_of_bounds: str):
    """Launch ``kernel(pos, eps2, acc)`` on padded views; return the whole ``acc`` buffer (padding included).

    ``out_of_bounds`` is the message for an access past the end: the same whether the simulator caught
    the access (IndexError) or a GPU let it happen (then the caller finds the stray write).
    """
    buf, acc = _padded_output(pos.shape[0])
    try:
        with _quiet():
            launch_student_kernel(kernel, blocks, threads, (_padded_positions(pos), np.float32(EPS2), acc), what)
    except IndexError:
        raise CheckFailed(out_of_bounds) from None
    return buf


def check_naive(kernel: Any, *, sizes: tuple[int, ...] | None = None) -> None:
    """Exercise 2: ``kernel(pos, eps2, acc)``, one thread per body, any n (launched with 1D blocks).

    Raises:
        CheckFailed: the size that failed, and the likely cause (no tail guard, a wrong loop bound...).
    """
    what = "your naive kernel"
    require_kernel(kernel, "nbody_naive")
    sizes = sizes or _sizes()
    threads_list = THREADS_SIM if backend.is_simulator() else THREADS_GPU
    rng = np.random.default_rng(2)
    for threads in threads_list:
        for n in sizes:
            pos = nb.random_bodies(n, rng)
            blocks = -(-n // threads)
            outside = (f"{what} reads or writes past the end of its arrays for n={n} (the grid is rounded up to "
                       "whole blocks, so the last block has threads without a body): those threads must do "
                       "nothing. Guard the body of the kernel with `if i < n:`.")
            buf = _run_forces(kernel, pos, blocks, threads, what, outside)
            if _stray_writes(buf, n):
                raise CheckFailed(outside)
            _compare(buf.copy_to_host()[:n], pos, what, n)
    print("Correct: your naive kernel matches float64 NumPy on every size tried (1, 2, 31, 33 and larger ones that "
          "no block size divides), and writes nothing past the end.")


# -------------------------------------------------------------------------------- exercise 3


def race_report(kernel: Any, tile: int):
    """Run ``kernel(pos, eps2, acc)`` once through :func:`labhelpers.check_races`: 2 blocks, n = tile + 1.

    Returns the report, or None when the kernel fails to run there (the correctness checks say why).

    Raises:
        GPUOnlyError: on a GPU, when the kernel cannot be rebuilt in the simulator.
    """
    from ..racecheck import check_races

    n = tile + 1
    pos = nb.random_bodies(n, np.random.default_rng(5))
    acc = np.full((n, 3), np.nan, dtype=np.float32)
    try:
        return check_races(kernel, 2, tile, pos, np.float32(EPS2), acc)
    except GPUOnlyError:
        if backend.is_simulator():
            return None
        raise
    except Exception:  # noqa: BLE001  (any failure to run is reported by the correctness checks)
        return None


def _check_barriers(kernel: Any, tile: int, name: str) -> None:
    try:
        report = race_report(kernel, tile)
    except GPUOnlyError:  # on a GPU, a kernel the simulator process cannot rebuild: read the source instead
        from .matmul import barrier_problems

        problems = barrier_problems(kernel)
        if problems:
            raise CheckFailed(f"{name}: " + " Also: ".join(problems)) from None
        return
    if report is None:
        return
    if not report.arrays or not any(a.writes for a in report.arrays):
        raise CheckFailed(f"{name}: no thread wrote to a shared array: each trip of the loop copies one tile of "
                          "bodies into `sh` (every thread one body) before anyone reads it.")
    report.raise_for_problems(name)


def _overread(name: str, n: int) -> str:
    return (f"{name} reads past the end of pos for n={n}: the last tile hangs over the end of the array. Load body "
            "start + t only if start + t < n, and store a zero-mass body (zeros) otherwise, which adds exactly "
            "nothing.")


def check_tiled(kernel: Any, tile: int, *, sizes: tuple[int, ...] | None = None) -> None:
    """Exercise 3: the shared-memory kernel ``kernel(pos, eps2, acc)``, ``tile`` threads per block, any n.

    First the barriers (one run through the race detector: a barrier some threads skip, a missing barrier),
    then the results for every size.

    Raises:
        CheckFailed: with the problem and what to change.
    """
    name = "your tiled kernel"
    require_kernel(kernel, "nbody_tiled")
    if tile not in (32, 64, 128, 256, 512, 1024):
        raise CheckFailed(f"tile={tile}: use the lab's TILE (a power of two from 32 to 1024), the shared array's size.")
    _check_barriers(kernel, tile, name)
    sizes = sizes or _sizes()
    rng = np.random.default_rng(3)
    for n in sizes:
        pos = nb.random_bodies(n, rng)
        blocks = -(-n // tile)
        buf = _run_forces(kernel, pos, blocks, tile, name, _overread(name, n))
        if _stray_writes(buf, n):
            raise CheckFailed(f"{name} wrote past the end of acc for n={n}: only threads with i < n write (after the "
                              "loop; the loop itself and its barriers are for every thread).")
        got = buf.copy_to_host()[:n]
        try:
            _compare(got, pos, name, n, f" ({blocks} block(s) of {tile} threads)")
        except CheckFailed as exc:
            pads = blocks * tile - n  # the rows of the last tile past the end: each would read a padding body
            far = nb.accelerations_numpy(np.vstack([pos, np.tile(np.array([PADDING_BODY], np.float32), (pads, 1))]),
                                         EPS2)[:n] if pads else None
            if far is not None and np.allclose(got, far, rtol=1e-3, atol=1e-6):
                raise CheckFailed(_overread(name, n)) from None
            raise exc
    print(f"Correct: your tiled kernel matches float64 NumPy on every size tried (1, 2, 31, 33 and larger ones that "
          f"no tile divides) with tiles of {tile}, reads and writes nothing past the ends, and every barrier is "
          "reached by the whole block.")


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
    if not callable(step):
        raise CheckFailed("leapfrog_step must be a function (pos_d, vel_d, acc_d, dt, eps2, forces).")
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


__all__ = ["check_interaction", "check_leapfrog", "check_naive", "check_tiled", "race_report"]
