"""Lab 14's checkers are tested by mutants: one-line edits of the solutions, at least one per bug class the chapter
teaches (a halo exchange off by one or incomplete; a bus bandwidth off by n, left as algbw, with another
collective's factor, in elements or the wrong unit; a prediction from the copy's rate or another kernel's, with 4
bytes per point, without overlap or with a middle GPU's halo counted once). Every mutant is rejected with a message that starts with its class (the solutions pass: tests/test_labs.py). Host code only:
the same on both backends.
"""

from __future__ import annotations

import pytest

import labhelpers as lh
from labhelpers.exercises import multi_gpu as ex
from mutants import load_solutions, mutant

PY = dict(jit=lambda f: f)  # mutants of plain Python functions (no cuda.jit)
TOP = "slabs[k + 1][0] = slabs[k][-2]"
BOTTOM = "slabs[k][-1] = slabs[k + 1][1]"
SIZE = 'nbytes = 4 * count * (n if collective in ("all_gather", "reduce_scatter") else 1)'
FACTOR = 'factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,'
RATE = 'rate = max(gbs for name, gbs in rates_gbs.items() if name != "copy")'
HALO = "halo = 0.0 if gpus == 1 else latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)"
STEP = "step = max(compute, edges + halo) if overlap else compute + halo"

#: (exercise function, old line, new line, the class the message must start with).
MUTANTS_14 = {
    "ghost gets the neighbour's ghost": ("exchange_halos", TOP, "slabs[k + 1][0] = slabs[k][-1]", ex.OFF_BY_ONE),
    "ghost gets the row inside the edge": ("exchange_halos", BOTTOM, "slabs[k][-1] = slabs[k + 1][2]", ex.OFF_BY_ONE),
    "last pair forgotten": ("exchange_halos", "for k in range(len(slabs) - 1):",
                            "for k in range(len(slabs) - 2):", ex.GHOST_NOT_WRITTEN),
    "one direction only": ("exchange_halos", BOTTOM, "pass", ex.GHOST_NOT_WRITTEN),
    "edge row overwritten": ("exchange_halos", BOTTOM, "slabs[k][-2] = slabs[k + 1][1]", ex.OWNED_ROW_CHANGED),
    "periodic wrap-around": ("exchange_halos", "for k in range(len(slabs) - 1):",
                             "for k in range(-1, len(slabs) - 1):", ex.OUTER_GHOST),
    # exercise 2: from an NCCL call to nccl-tests' busbw
    "all-gather's piece taken for S": ("busbw_from_call", SIZE, "nbytes = 4 * count", ex.OFF_BY_N),
    "reduce-scatter's piece taken for S": ("busbw_from_call", SIZE,
                                           'nbytes = 4 * count * (n if collective == "all_gather" else 1)',
                                           ex.OFF_BY_N),
    "all-reduce's buffer counted n times": ("busbw_from_call", SIZE,
                                            'nbytes = 4 * count * (n if collective != "broadcast" else 1)',
                                            ex.OFF_BY_N),
    "algbw instead of busbw": ("busbw_from_call", "return algbw * factor", "return algbw", ex.ALGBW_NOT_BUSBW),
    "all-reduce factor for everything": ("busbw_from_call", "return algbw * factor",
                                         "return algbw * 2 * (n - 1) / n", ex.WRONG_FACTOR),
    "all-gather without (n-1)/n": ("busbw_from_call", FACTOR, FACTOR.replace('"all_gather": (n - 1) / n',
                                                                             '"all_gather": 1.0'), ex.ALGBW_NOT_BUSBW),
    "reduce-scatter with all-reduce's factor": ("busbw_from_call", FACTOR,
                                                FACTOR.replace('"reduce_scatter": (n - 1) / n',
                                                               '"reduce_scatter": 2 * (n - 1) / n'), ex.WRONG_FACTOR),
    "elements, not bytes": ("busbw_from_call", SIZE, SIZE.replace("4 * count", "count"), ex.ELEMENTS_NOT_BYTES),
    "GiB instead of GB": ("busbw_from_call", "algbw = nbytes / seconds / 1e9", "algbw = nbytes / seconds / 2**30",
                          ex.WRONG_UNITS),
    "bytes per second": ("busbw_from_call", "algbw = nbytes / seconds / 1e9", "algbw = nbytes / seconds",
                         ex.WRONG_UNITS),
    # exercise 3: the step predicted from chapter 9's table
    "copy rate instead of the Jacobi rate": ("predict_step_ms", RATE, "rate = max(rates_gbs.values())",
                                             ex.COPY_RATE),
    "slowest kernel of the table": ("predict_step_ms", RATE,
                                    'rate = min(gbs for name, gbs in rates_gbs.items() if name != "copy")',
                                    ex.WRONG_RATE),
    "traffic counted once (4 B per point)": ("predict_step_ms", "compute = 8 * rows * nx / (rate * 1e9)",
                                             "compute = 4 * rows * nx / (rate * 1e9)", ex.TRAFFIC_ONCE),
    "middle GPU's halo counted once": ("predict_step_ms", "halo *= 2 if gpus > 2 else 1", "halo *= 1",
                                       ex.HALO_ONCE),
    "no overlap": ("predict_step_ms", STEP, "step = compute + halo", ex.SERIAL_TIME),
    "halo on one GPU": ("predict_step_ms", HALO, "halo = latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)",
                        ex.WRONG_MODEL),
    "even split assumed": ("predict_step_ms", "rows = math.ceil(ny / gpus)", "rows = ny / gpus", ex.WRONG_MODEL),
}

CHECKERS_14 = {"exchange_halos": ex.check_exchange_halos, "busbw_from_call": ex.check_busbw,
               "predict_step_ms": ex.check_prediction}


@pytest.fixture(scope="module")
def lab14():
    return load_solutions("14_multi_gpu_lab")


@pytest.mark.parametrize("case", list(MUTANTS_14))
def test_lab14_mutants_are_rejected(lab14, case):
    name, old, new, bug_class = MUTANTS_14[case]
    bad = mutant(getattr(lab14, name), (old, new), **PY)
    with pytest.raises(lh.CheckFailed, match=f"^{bug_class}"):
        CHECKERS_14[name](bad)


def test_mutant_counts():
    """Mutants per lab, at least one per bug class of the chapter (the report quotes this count)."""
    assert {"14": len(MUTANTS_14)} == {"14": 23}
    classes = {bug_class for *_rest, bug_class in MUTANTS_14.values()}
    assert classes == {ex.OFF_BY_ONE, ex.GHOST_NOT_WRITTEN, ex.OWNED_ROW_CHANGED, ex.OUTER_GHOST, ex.OFF_BY_N,
                       ex.ALGBW_NOT_BUSBW, ex.WRONG_FACTOR, ex.ELEMENTS_NOT_BYTES, ex.WRONG_UNITS, ex.COPY_RATE,
                       ex.WRONG_RATE, ex.TRAFFIC_ONCE, ex.HALO_ONCE, ex.SERIAL_TIME, ex.WRONG_MODEL}


def test_the_two_gpu_all_gather_hides_the_off_by_n():
    """Why exercise 2 starts with 3 or more ranks: on 2, the piece without the factor is the right number."""
    piece = ex.nccl_test_size("all_gather", 2**20, 2) / 2
    assert piece / 1e-3 / 1e9 == pytest.approx(ex.model.busbw_gbs("all_gather", 2 * piece, 1e-3, 2))
    assert all(n >= 3 for c, _count, _t, n in ex.BUSBW_CASES[:7] if c in ("all_gather", "reduce_scatter"))
