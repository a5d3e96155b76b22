"""Lab 14's checkers: a halo exchange right for any split, nccl-tests' bus bandwidth, a scaling prediction.

Every check works on host data (NumPy slabs, numbers), so it reads the same under the simulator and on a GPU,
and every message starts with the bug's class.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import refdata
from ..experiments import multi_gpu as experiments
from ..kernels import multi_gpu as kmg
from ..models import multi_gpu as model
from ..timing import CLOCK_HOST, Timing
from . import answers
from . import harness as h
from . import measured

#: Message classes.
GHOST_NOT_WRITTEN = "Ghost row never written"
OFF_BY_ONE = "Off by one"
OWNED_ROW_CHANGED = "Owned row overwritten"
OUTER_GHOST = "Outer ghost written"
WRONG_ROW = "Wrong row"
WRONG_FACTOR = "Wrong bus factor"
WRONG_UNITS = "Wrong units"
SERIAL_TIME = "Serial time"
WRONG_MODEL = "Wrong prediction"

#: Row counts of the slabs the halo check tries: one GPU, even and uneven splits, slabs of one row.
SPLITS = ((4,), (3, 3), (1, 1, 1), (3, 1, 4), (2, 5, 1, 3), (1, 6))
#: Columns of the halo check's grids.
HALO_NX = 5
#: (collective, nbytes, seconds, ranks) cases of the bus-bandwidth check.
BUSBW_CASES = tuple((c, 2**30, 4e-3, n) for c in ("all_reduce", "all_gather", "broadcast") for n in (2, 4, 8)) + \
    (("all_reduce", 2**20, 1e-5, 1), ("all_gather", 3 * 2**20, 2e-5, 3))
#: (ny, nx, gpus, overlap) cases of the prediction check, with :data:`PREDICTION_MACHINE`.
PREDICTION_CASES = ((4096, 4096, 1, True), (4096, 4096, 1, False), (4096, 4096, 2, True), (4096, 4096, 4, False), (1001, 8192, 3, True),
                    (64, 65536, 4, True), (64, 65536, 4, False), (7, 100, 8, True))
#: The rates of the prediction check (arguments of the exercise, not a machine's figures).
PREDICTION_MACHINE = dict(mem_gbs=3000.0, link_gbs=400.0, latency_us=10.0)


def _slabs(rows: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
    """Slabs of ``rows`` rows with distinct values in their own rows and a negative marker in each ghost row."""
    slabs = []
    for k, count in enumerate(rows):
        slab = np.empty((count + 2, HALO_NX), dtype=np.float32)
        slab[1:-1] = rng.integers(0, 1000, (count, HALO_NX)) + 1000 * (k + 1)
        slab[0], slab[-1] = -(k + 1), -(k + 1) - 0.5  # markers: an unwritten ghost keeps its own
        slabs.append(slab)
    return slabs


def _describe_split(rows: tuple[int, ...]) -> str:
    return f"{len(rows)} GPU(s) with {', '.join(map(str, rows))} row(s)"


def check_exchange_halos(exchange_halos: Callable) -> None:
    """Exercise 1: ``exchange_halos(slabs)`` fills every inner ghost row in place (see the lab).

    ``slabs[k]`` is ``(h_k + 2) x nx``: its rows at 1..h_k, ghosts at 0 and h_k + 1. The check tries the
    splits of :data:`SPLITS` (one GPU, uneven slabs, slabs of one row), with a marker in every ghost row.
    """
    h.require_function(exchange_halos, "exchange_halos", "exchange_halos(slabs)")
    rng = np.random.default_rng(14)
    for rows in SPLITS:
        slabs = _slabs(rows, rng)
        before = [s.copy() for s in slabs]
        expected = [s.copy() for s in slabs]
        kmg.exchange_halos_numpy(expected)
        answers.call(exchange_halos, "exchange_halos", slabs)
        where = _describe_split(rows)
        for k, (got, want, old) in enumerate(zip(slabs, expected, before)):
            if not isinstance(got, np.ndarray) or got.shape != want.shape:
                raise h.failure(WRONG_ROW, f"on {where}, slab {k} was replaced or reshaped: fill its ghost rows in "
                                           "place (slabs[k][row] = ...), keep every slab's shape.")
            if not np.array_equal(got[1:-1], old[1:-1]):
                raise h.failure(OWNED_ROW_CHANGED, f"on {where}, your exchange changed slab {k}'s own rows: only "
                                                   "rows 0 and -1 (the ghosts) are written.")
            for row in (0, got.shape[0] - 1):
                g, w = got[row], want[row]
                if np.array_equal(g, w):
                    continue
                side = "top" if row == 0 else "bottom"
                if np.array_equal(w, old[row]):
                    raise h.failure(OUTER_GHOST, f"on {where}, slab {k}'s {side} ghost was written, but it has no "
                                                 f"neighbour there: the {'first' if row == 0 else 'last'} slab's "
                                                 f"{side} ghost is the grid's border and stays as it is.")
                if np.array_equal(g, old[row]):
                    raise h.failure(GHOST_NOT_WRITTEN, f"on {where}, slab {k}'s {side} ghost (row {row}) was never "
                                                       f"written: it must receive slab {k - 1 if row == 0 else k + 1}"
                                                       f"'s {'last' if row == 0 else 'first'} own row.")
                j = k - 1 if row == 0 else k + 1
                hits = [r for r in range(before[j].shape[0])
                        if np.array_equal(before[j][r], g) or np.array_equal(slabs[j][r], g)]
                if hits:
                    right = before[j].shape[0] - 2 if row == 0 else 1
                    raise h.failure(OFF_BY_ONE, f"on {where}, slab {k}'s {side} ghost holds row {hits[0]} of slab "
                                                f"{j}; it needs row {right} (the neighbour's own edge row, not its "
                                                "ghost or the row inside it).")
                raise h.failure(WRONG_ROW, f"on {where}, slab {k}'s {side} ghost holds a row of neither neighbour "
                                           f"next to it: it must receive slab {j}'s "
                                           f"{'last' if row == 0 else 'first'} own row.")
    print(f"Correct: your exchange fills every ghost row on all {len(SPLITS)} splits.")


def check_busbw(busbw_gbs: Callable) -> None:
    """Exercise 2: ``busbw_gbs(collective, nbytes, seconds, n)``, nccl-tests' bus bandwidth in GB/s."""
    h.require_function(busbw_gbs, "busbw_gbs", "busbw_gbs(collective, nbytes, seconds, n)")
    for collective, nbytes, seconds, n in BUSBW_CASES:
        call_text = f"busbw_gbs({collective!r}, {nbytes}, {seconds}, {n})"
        got = answers.number(answers.call(busbw_gbs, "busbw_gbs", collective, nbytes, seconds, n), call_text)
        want = model.busbw_gbs(collective, nbytes, seconds, n)
        if np.isclose(got, want, rtol=1e-9):
            continue
        algbw = model.algbw_gbs(nbytes, seconds)
        for scale in (1e3, 1e6, 1e9, 1e-3, 2**30 / 1e9, 1e9 / 2**30):
            if np.isclose(got, want * scale, rtol=1e-9):
                raise h.failure(WRONG_UNITS, f"{call_text} = {got:g}, {scale:g} times the bus bandwidth in GB/s "
                                             f"({want:g}): GB/s is bytes / seconds / 1e9.")
        factors = {name: f(n) for name, f in model.BUS_FACTORS.items()}
        named = [name for name, f in factors.items() if np.isclose(got, algbw * f, rtol=1e-9)]
        if np.isclose(got, algbw, rtol=1e-9):
            hint = "that is the algorithm bandwidth S / t; multiply by the collective's factor"
        elif named:
            hint = f"that is {named[0]}'s factor"
        else:
            hint = f"the factor you used is {got / algbw:.4g}"
        raise h.failure(WRONG_FACTOR, f"{call_text} = {got:g} GB/s, nccl-tests gives {want:g} ({hint}; "
                                      f"{collective} on {n} ranks: {factors[collective]:.4g}).")
    print(f"Correct: your bus bandwidth matches nccl-tests' formula on all {len(BUSBW_CASES)} cases.")


def check_prediction(predict_step_ms: Callable) -> None:
    """Exercise 3: ``predict_step_ms(ny, nx, gpus, overlap, mem_gbs, link_gbs, latency_us)`` in milliseconds,
    compared with :func:`labhelpers.models.multi_gpu.jacobi_step_time` (no host issue cost)."""
    h.require_function(predict_step_ms, "predict_step_ms",
                       "predict_step_ms(ny, nx, gpus, overlap, mem_gbs, link_gbs, latency_us)")
    m = PREDICTION_MACHINE
    machine = model.HaloMachine(m["mem_gbs"], m["link_gbs"], m["latency_us"])
    for ny, nx, gpus, overlap in PREDICTION_CASES:
        call_text = (f"predict_step_ms({ny}, {nx}, {gpus}, overlap={overlap}, mem_gbs={m['mem_gbs']:g}, "
                     f"link_gbs={m['link_gbs']:g}, latency_us={m['latency_us']:g})")
        got = answers.number(answers.call(predict_step_ms, "predict_step_ms", ny, nx, gpus, overlap,
                                          m["mem_gbs"], m["link_gbs"], m["latency_us"]), call_text)
        t = model.jacobi_step_time(ny, nx, gpus, machine, overlap=overlap)
        want = t["step"] * 1e3
        if np.isclose(got, want, rtol=1e-6):
            continue
        if overlap and np.isclose(got, (t["compute"] + t["halo"]) * 1e3, rtol=1e-6):
            raise h.failure(SERIAL_TIME, f"{call_text} = {got:.6g} ms, the model gives {want:.6g}: that is compute "
                                         "+ halo, the time without overlap; with overlap=True the exchange runs "
                                         "beside the interior: the step takes the longer of the two paths.")
        hints = []
        if gpus == 1 and got > want:
            hints.append("one GPU has no neighbour, so no halo")
        if ny % gpus:
            hints.append(f"{ny} rows over {gpus} GPUs: the largest slab has ceil({ny}/{gpus}) = "
                         f"{model.slab_rows(ny, gpus)} rows, and the slowest GPU sets the pace")
        raise h.failure(WRONG_MODEL, f"{call_text} = {got:.6g} ms, the model gives {want:.6g} ms (compute "
                                     f"{t['compute'] * 1e3:.4g}, edges {t['edges'] * 1e3:.4g}, halo "
                                     f"{t['halo'] * 1e3:.4g})" + (": " + "; ".join(hints) if hints else "") + ".")
    print(f"Correct: your prediction equals the model on all {len(PREDICTION_CASES)} cases.")


__all__ = ["BUSBW_CASES", "GHOST_NOT_WRITTEN", "OFF_BY_ONE", "OUTER_GHOST", "OWNED_ROW_CHANGED", "PREDICTION_CASES",
           "PREDICTION_MACHINE", "SERIAL_TIME", "SPLITS", "WRONG_FACTOR", "WRONG_MODEL", "WRONG_ROW", "WRONG_UNITS",
           "check_busbw", "check_exchange_halos", "check_prediction"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Grid rows the measured exercise accepts (the grid is ``rows x TUNED_NX``), and its columns.
TUNED_ROWS: tuple[int, ...] = (256, 1024, 4096, 16384)
TUNED_NX = experiments.JACOBI_NX
#: The measured 2-GPU speedup to reach (one grid, strong scaling, halo exchange overlapped).
SPEEDUP_TARGET = 1.6
#: Steps timed per point.
TUNED_STEPS = 20


def predicted_speedup(predict_step_ms: Callable, rows: int, nx: int = TUNED_NX) -> float:
    """Your model's 2-GPU speedup of a ``rows x nx`` grid on the lab's machine (:data:`PREDICTION_MACHINE`)."""
    m = PREDICTION_MACHINE
    one, two = (answers.number(answers.call(predict_step_ms, "predict_step_ms", rows, nx, g, True, m["mem_gbs"],
                                            m["link_gbs"], m["latency_us"]), f"predict_step_ms({rows}, {nx}, {g}, "
                                                                             "True, ...)") for g in (1, 2))
    return one / two


def _scaling_reference(rows: int) -> str:
    missing = experiments.missing_sentence("jacobi_scaling", (2,))
    if missing:
        return f"no 2-GPU measurement is shipped: {missing}"
    ref = refdata.load_reference(experiments.reference_name("jacobi_scaling", 2))
    t = ref.table
    row = t[(t["mode"] == "strong") & (t["overlap"]) & (t["gpus"] == 2)].iloc[0]
    return measured.reference_text(ref, f"a grid of {int(row.ny)} x {int(row.nx)} (not your {rows} rows) ran "
                                        f"{float(row.speedup):.2f} times faster on 2 GPUs than on one")


SCALING_TUNED = measured.MeasuredExercise(
    name="your grid for 2 GPUs", target=SPEEDUP_TARGET,
    measures=f"a Jacobi step of your grid (rows x {TUNED_NX}) split over 2 GPUs, halo exchange overlapped",
    yardstick="the same grid on one GPU (ratio: the measured speedup)", reference=_scaling_reference)


def _two_gpus() -> bool:
    """Whether the race can run: a GPU, and a second one."""
    return measured.can_time() and kmg.gpu_count() >= 2


def _race_scaling(rows: int) -> tuple[Timing, Timing]:
    table = experiments.jacobi_scaling_table((0, 1), ny=rows, nx=TUNED_NX, steps=TUNED_STEPS, modes=("strong",))
    t = table[table["overlap"]].set_index("gpus")["step_ms"]
    def timing(g: int) -> Timing:
        return Timing(f"{g} GPU(s)", times_ms=(float(t.loc[g]),), clock=CLOCK_HOST)
    return timing(2), timing(1)


def check_two_gpu_rows(predict_step_ms: Callable, choose_rows: Callable) -> measured.Verdict:
    """Measured exercise (predict, then measure): ``choose_rows()`` returns the rows of a ``rows x 16384`` grid that
    2 GPUs should run :data:`SPEEDUP_TARGET` times faster than one. Your ``predict_step_ms`` (exercise 3) is checked
    first and its speedup printed; on a machine with 2 GPUs the split Jacobi step is timed on 1 and 2 GPUs in the
    same run; with one GPU or the simulator the check says what would be measured.

    Raises:
        CheckFailed: the prediction is wrong, the choice is not allowed, or the measured speedup is short.
    """
    rows = measured.choose(choose_rows, "choose_rows", TUNED_ROWS)

    def correct() -> None:
        check_prediction(predict_step_ms)
        print(f"Your model predicts a 2-GPU speedup of {predicted_speedup(predict_step_ms, rows):.2f} for a grid of "
              f"{rows} x {TUNED_NX} on the lab's machine (no host issue cost in the model).")

    return measured.check(SCALING_TUNED, rows, correct=correct, race=lambda: _race_scaling(rows), timeable=_two_gpus)
