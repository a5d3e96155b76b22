"""Lab 14's checkers: a halo exchange right for any split, nccl-tests' bus bandwidth of an NCCL call, a prediction
of a split Jacobi step from chapter 9's table.

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
from . import timed

#: Message classes.
GHOST_NOT_WRITTEN = "Ghost row never written"
OFF_BY_ONE = "Off by one"
OWNED_ROW_CHANGED = "Owned row overwritten"
OUTER_GHOST = "Outer ghost written"
WRONG_ROW = "Wrong row"
WRONG_FACTOR = "Wrong bus factor"
WRONG_UNITS = "Wrong units"
OFF_BY_N = "Off by n"
ALGBW_NOT_BUSBW = "Algorithm bandwidth, not bus bandwidth"
ELEMENTS_NOT_BYTES = "Elements, not bytes"
SERIAL_TIME = "Serial time"
COPY_RATE = "Copy rate, not the Jacobi rate"
WRONG_RATE = "Wrong Jacobi rate"
TRAFFIC_ONCE = "Traffic counted once"
HALO_ONCE = "Halo counted once"
WRONG_MODEL = "Wrong prediction"

#: Row counts of the slabs the halo check tries: one GPU, even and uneven splits, slabs of one row.
SPLITS = ((4,), (3, 3), (1, 1, 1), (3, 1, 4), (2, 5, 1, 3), (1, 6))
#: Columns of the halo check's grids.
HALO_NX = 5
#: The collectives of exercise 2, with what NCCL's ``count`` argument counts (float32 elements).
NCCL_COUNT = {"all_reduce": "the buffer", "all_gather": "what each GPU sends",
              "reduce_scatter": "what each GPU receives", "broadcast": "the buffer"}
#: (collective, count, seconds, ranks) cases of the bus-bandwidth check: ``count`` as passed to NCCL. The first
#: cases have 3 or more ranks, where every wrong kind gives its own number (on 2 ranks an all-gather's piece
#: without the factor equals the right answer).
BUSBW_CASES = (("all_reduce", 2**26, 4e-3, 4), ("all_gather", 2**24, 5e-3, 8), ("reduce_scatter", 2**24, 5e-3, 3),
               ("broadcast", 2**26, 3e-3, 4), ("all_reduce", 3 * 2**20, 1e-4, 3), ("all_gather", 5 * 2**20, 2e-4, 3),
               ("reduce_scatter", 2**20, 4e-5, 8), ("all_reduce", 2**20, 2e-5, 2), ("all_gather", 2**20, 3e-5, 2))
#: (ny, nx, gpus, overlap) cases of the prediction check, with :data:`PREDICTION_MACHINE`.
PREDICTION_CASES = ((4096, 4096, 1, True), (4096, 4096, 1, False), (4096, 4096, 2, True), (64, 65536, 4, True),
                    (64, 65536, 4, False), (4096, 4096, 4, False), (1001, 8192, 3, True), (4097, 4096, 2, True),
                    (7, 100, 8, True))
#: Chapter 9's table as exercise 3 receives it: GB/s by row name, the copy yardstick among the kernels (numbers of
#: the exercise, rounded from the reference GPU's, not a machine's figures).
PREDICTION_RATES = {"naive 32x8": 1500.0, "shared 32x8": 980.0, "marching 64x2": 2600.0, "cupy slicing": 340.0,
                    "copy": 4200.0}
#: The link of the prediction check (arguments of the exercise, not a machine's figures).
PREDICTION_MACHINE = dict(link_gbs=400.0, latency_us=10.0)


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


def nccl_test_size(collective: str, count: int, n: int) -> int:
    """nccl-tests' size ``S`` in bytes of a float32 collective called with NCCL's ``count`` on ``n`` ranks: the whole
    array (the buffer of an all-reduce or a broadcast, the all-gather's whole output, the reduce-scatter's whole
    input), so ``n`` times ``count`` for the two whose ``count`` is one rank's piece."""
    return model.FLOAT_BYTES * count * (n if collective in ("all_gather", "reduce_scatter") else 1)


def check_busbw(busbw_from_call: Callable) -> None:
    """Exercise 2: ``busbw_from_call(collective, count, seconds, n)``: the busbw (GB/s) nccl-tests would print for one
    float32 call of ``collective`` with NCCL's ``count`` on ``n`` GPUs that took ``seconds``.

    Wrong kinds it names: units (:data:`WRONG_UNITS`), elements for bytes (:data:`ELEMENTS_NOT_BYTES`), the piece
    taken for ``S`` or ``S`` multiplied by ``n`` (:data:`OFF_BY_N`), algbw (:data:`ALGBW_NOT_BUSBW`), another
    collective's factor (:data:`WRONG_FACTOR`).
    """
    h.require_function(busbw_from_call, "busbw_from_call", "busbw_from_call(collective, count, seconds, n)")
    for collective, count, seconds, n in BUSBW_CASES:
        call_text = f"busbw_from_call({collective!r}, {count}, {seconds}, {n})"
        got = answers.number(answers.call(busbw_from_call, "busbw_from_call", collective, count, seconds, n),
                             call_text)
        size = nccl_test_size(collective, count, n)
        want = model.busbw_gbs(collective, size, seconds, n)
        if np.isclose(got, want, rtol=1e-9):
            continue
        said = f"{call_text} = {got:g} GB/s, nccl-tests prints {want:g}"
        for scale in (1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9, 2**30 / 1e9, 1e9 / 2**30):
            if np.isclose(got, want * scale, rtol=1e-9):
                raise h.failure(WRONG_UNITS, f"{said}: {scale:g} times the right value; GB/s is bytes / seconds "
                                             "/ 1e9 (not 2**30).")
        if np.isclose(got, want / model.FLOAT_BYTES, rtol=1e-9):
            raise h.failure(ELEMENTS_NOT_BYTES, f"{said}: 4 times too little. NCCL's count is float32 elements; "
                                                "nccl-tests' size S is in bytes, 4 per element.")
        factors = {name: f(n) for name, f in model.BUS_FACTORS.items()}
        whole = NCCL_COUNT[collective]
        for wrong_size in (size / n, size * n):
            for f in set(factors.values()) | {1.0}:
                if np.isclose(got, model.algbw_gbs(wrong_size, seconds) * f, rtol=1e-9):
                    raise h.failure(OFF_BY_N, f"{said}: your size S is {wrong_size:g} bytes, the right one is "
                                              f"{size:g}. For {collective} NCCL's count is {whole}, and nccl-tests' "
                                              "S is the whole array: the buffer of an all-reduce, the whole output "
                                              "of an all-gather, the whole input of a reduce-scatter.")
        algbw = model.algbw_gbs(size, seconds)
        if np.isclose(got, algbw, rtol=1e-9):
            raise h.failure(ALGBW_NOT_BUSBW, f"{said}: {got:g} is the algorithm bandwidth S / t. The bus bandwidth "
                                             f"is what each GPU's link carried: S / t times the fraction of S a ring "
                                             f"moves over one link for {collective} on {n} ranks.")
        named = sorted(name for name, f in factors.items() if name != collective and np.isclose(got, algbw * f))
        hint = (f"that is the factor of {', '.join(named)}" if named else f"the factor you used is {got / algbw:.4g}")
        raise h.failure(WRONG_FACTOR, f"{said} ({hint}, not the one of {collective} on {n} ranks).")
    print(f"Correct: your bus bandwidth is what nccl-tests prints on all {len(BUSBW_CASES)} calls.")


def _step_ms(ny: int, nx: int, gpus: int, overlap: bool, rate: float, *, bytes_per_point: int = 8,
             sends: int | None = None, serial: bool = False) -> float:
    """The chapter's model in ms at Jacobi rate ``rate`` with :data:`PREDICTION_MACHINE`'s link, with the knobs
    of the wrong kinds: bytes per point, halo sends of the busiest GPU, overlap ignored."""
    m = PREDICTION_MACHINE
    rows = model.slab_rows(ny, gpus)
    per_row = bytes_per_point * nx / (rate * 1e9)
    sends = model.halo_sends(gpus) if sends is None else sends
    halo = sends * (m["latency_us"] * 1e-6 + model.FLOAT_BYTES * nx / (m["link_gbs"] * 1e9))
    compute, edges = rows * per_row, min(rows, 2) * per_row
    return 1e3 * (max(compute, edges + halo) if overlap and not serial else compute + halo)


def check_prediction(predict_step_ms: Callable) -> None:
    """Exercise 3: ``predict_step_ms(ny, nx, gpus, overlap, rates_gbs, link_gbs, latency_us)`` in milliseconds, the
    chapter's model (:func:`labhelpers.models.multi_gpu.jacobi_step_time`, no host issue cost) fed with the best
    Jacobi kernel of ``rates_gbs`` (chapter 9's table, copy included: :data:`PREDICTION_RATES`).

    Wrong kinds it names: the copy's rate (:data:`COPY_RATE`), another kernel's (:data:`WRONG_RATE`), 4 bytes per
    point (:data:`TRAFFIC_ONCE`), compute + halo with overlap (:data:`SERIAL_TIME`), one send from a middle GPU
    (:data:`HALO_ONCE`); anything else is :data:`WRONG_MODEL` with the model's parts.
    """
    h.require_function(predict_step_ms, "predict_step_ms",
                       "predict_step_ms(ny, nx, gpus, overlap, rates_gbs, link_gbs, latency_us)")
    m = PREDICTION_MACHINE
    jacobi = {k: v for k, v in PREDICTION_RATES.items() if k not in experiments.JACOBI_YARDSTICKS}
    best = max(jacobi.values())
    for ny, nx, gpus, overlap in PREDICTION_CASES:
        call_text = (f"predict_step_ms({ny}, {nx}, {gpus}, overlap={overlap}, rates_gbs, "
                     f"link_gbs={m['link_gbs']:g}, latency_us={m['latency_us']:g})")
        got = answers.number(answers.call(predict_step_ms, "predict_step_ms", ny, nx, gpus, overlap,
                                          dict(PREDICTION_RATES), m["link_gbs"], m["latency_us"]), call_text)
        machine = model.HaloMachine(best, m["link_gbs"], m["latency_us"])
        t = model.jacobi_step_time(ny, nx, gpus, machine, overlap=overlap)
        want = t["step"] * 1e3
        if np.isclose(got, want, rtol=1e-6):
            continue
        said = f"{call_text} = {got:.6g} ms, the model gives {want:.6g} ms"

        def near(**knobs) -> bool:
            return bool(np.isclose(got, _step_ms(ny, nx, gpus, overlap, knobs.pop("rate", best), **knobs),
                                   rtol=1e-6))

        if near(rate=PREDICTION_RATES["copy"]):
            raise h.failure(COPY_RATE, f"{said}: you used the copy's {PREDICTION_RATES['copy']:g} GB/s. The copy is "
                                       "chapter 9's yardstick, not a Jacobi kernel: the GPUs run the fastest Jacobi "
                                       "kernel of the table.")
        for name, rate in jacobi.items():
            if rate != best and near(rate=rate):
                raise h.failure(WRONG_RATE, f"{said}: you used {name!r} at {rate:g} GB/s; the GPUs run the fastest "
                                            "Jacobi kernel of the table (not the copy).")
        if near(bytes_per_point=4):
            raise h.failure(TRAFFIC_ONCE, f"{said}: twice too fast on the grid. A Jacobi point is read once and "
                                          "written once per step: 8 bytes of float32 traffic, as chapter 9 counts.")
        if overlap and near(serial=True):
            raise h.failure(SERIAL_TIME, f"{said}: that is compute + halo, the time without overlap; with "
                                         "overlap=True the exchange runs beside the interior: the step takes the "
                                         "longer of the two paths.")
        if gpus > 2 and near(sends=1):
            raise h.failure(HALO_ONCE, f"{said}: on {gpus} GPUs a middle GPU sends a row up and a row down, one "
                                       "after the other on its copy stream: its halo is two copies, each with "
                                       "its latency.")
        hints = []
        if gpus == 1 and got > want:
            hints.append("one GPU has no neighbour, so no halo")
        if ny % gpus:
            hints.append(f"{ny} rows over {gpus} GPUs: the largest slab has ceil({ny}/{gpus}) = "
                         f"{model.slab_rows(ny, gpus)} rows, and the slowest GPU sets the pace")
        raise h.failure(WRONG_MODEL, f"{said} (compute {t['compute'] * 1e3:.4g}, edges {t['edges'] * 1e3:.4g}, "
                                     f"halo {t['halo'] * 1e3:.4g})" + (": " + "; ".join(hints) if hints else "") + ".")
    print(f"Correct: your prediction equals the model on all {len(PREDICTION_CASES)} cases.")


__all__ = ["ALGBW_NOT_BUSBW", "BUSBW_CASES", "COPY_RATE", "ELEMENTS_NOT_BYTES", "GHOST_NOT_WRITTEN", "HALO_ONCE",
           "NCCL_COUNT", "OFF_BY_N", "OFF_BY_ONE", "OUTER_GHOST", "OWNED_ROW_CHANGED", "PREDICTION_CASES",
           "PREDICTION_MACHINE", "PREDICTION_RATES", "SERIAL_TIME", "SPLITS", "TRAFFIC_ONCE", "WRONG_FACTOR",
           "WRONG_MODEL", "WRONG_RATE", "WRONG_ROW", "WRONG_UNITS", "check_busbw", "check_exchange_halos",
           "check_prediction", "nccl_test_size"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Grid rows the measured exercise accepts (the grid is ``rows x TUNED_NX``), and its columns.
TUNED_ROWS: tuple[int, ...] = (256, 1024, 4096, 16384)
TUNED_NX = experiments.JACOBI_NX
#: The measured 2-GPU speedup to reach (one grid, strong scaling, halo exchange overlapped).
SPEEDUP_TARGET = 1.6
#: Steps timed per point.
TUNED_STEPS = 20


def predicted_speedup(predict_step_ms: Callable, rows: int, nx: int = TUNED_NX) -> float:
    """Your model's 2-GPU speedup of a ``rows x nx`` grid on the lab's machine (:data:`PREDICTION_RATES`,
    :data:`PREDICTION_MACHINE`)."""
    m = PREDICTION_MACHINE
    one, two = (answers.number(answers.call(predict_step_ms, "predict_step_ms", rows, nx, g, True,
                                            dict(PREDICTION_RATES), m["link_gbs"], m["latency_us"]),
                               f"predict_step_ms({rows}, {nx}, {g}, True, ...)") for g in (1, 2))
    return one / two


def _scaling_reference(rows: int) -> str:
    missing = experiments.missing_sentence("jacobi_scaling", (2,))
    if missing:
        return f"no 2-GPU measurement is shipped: {missing}"
    ref = refdata.load_reference(experiments.reference_name("jacobi_scaling", 2))
    t = ref.table
    row = t[(t["mode"] == "strong") & (t["overlap"]) & (t["gpus"] == 2)].iloc[0]
    return timed.reference_text(ref, f"a grid of {int(row.ny)} x {int(row.nx)} (not your {rows} rows) ran "
                                        f"{float(row.speedup):.2f} times faster on 2 GPUs than on one")


SCALING_TUNED = timed.MeasuredExercise(
    name="your grid for 2 GPUs", target=SPEEDUP_TARGET,
    measures=f"a Jacobi step of your grid (rows x {TUNED_NX}) split over 2 GPUs, halo exchange overlapped",
    yardstick="the same grid on one GPU (ratio: the measured speedup)", reference=_scaling_reference)


def _two_gpus() -> bool:
    """Whether the race can run: a GPU, and a second one."""
    return timed.can_time() and kmg.gpu_count() >= 2


def _race_scaling(rows: int) -> tuple[Timing, Timing]:
    table = experiments.jacobi_scaling_table((0, 1), ny=rows, nx=TUNED_NX, steps=TUNED_STEPS, modes=("strong",))
    t = table[table["overlap"]].set_index("gpus")["step_ms"]
    def timing(g: int) -> Timing:
        return Timing(f"{g} GPU(s)", times_ms=(float(t.loc[g]),), clock=CLOCK_HOST)
    return timing(2), timing(1)


def check_two_gpu_rows(predict_step_ms: Callable, choose_rows: Callable) -> timed.Verdict:
    """Measured exercise (predict, then measure): ``choose_rows()`` returns the rows of a ``rows x 16384`` grid that
    2 GPUs should run :data:`SPEEDUP_TARGET` times faster than one. Your ``predict_step_ms`` (exercise 3) is checked
    first and its speedup printed; on a machine with 2 GPUs the split Jacobi step is timed on 1 and 2 GPUs in the
    same run; with one GPU or the simulator the check says what would be measured.

    Raises:
        CheckFailed: the prediction is wrong, the choice is not allowed, or the measured speedup is short.
    """
    rows = timed.choose(choose_rows, "choose_rows", TUNED_ROWS)

    def correct() -> None:
        check_prediction(predict_step_ms)
        print(f"Your model predicts a 2-GPU speedup of {predicted_speedup(predict_step_ms, rows):.2f} for a grid of "
              f"{rows} x {TUNED_NX} on the lab's machine (no host issue cost in the model).")

    return timed.check(SCALING_TUNED, rows, correct=correct, race=lambda: _race_scaling(rows), timeable=_two_gpus,
                       why_not="one GPU here, and this check needs two")
