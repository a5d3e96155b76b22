"""Lab 14's checkers are tested by mutants: one-line edits of the solutions, at least one per bug class the chapter
teaches (a halo exchange off by one or incomplete, a wrong bus-bandwidth factor or unit, a prediction without
overlap). Every mutant is rejected with a message that starts with its class; the solutions pass. Host code only:
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
FACTOR = 'factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0}[collective]'
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
    "algbw without a factor": ("busbw_gbs", "return algbw * factor", "return algbw", ex.WRONG_FACTOR),
    "all-reduce factor for everything": ("busbw_gbs", FACTOR, "factor = 2 * (n - 1) / n", ex.WRONG_FACTOR),
    "all-gather factor (n-1)/n forgotten": ("busbw_gbs", FACTOR, FACTOR.replace('"all_gather": (n - 1) / n',
                                                                                '"all_gather": 1.0'),
                                            ex.WRONG_FACTOR),
    "GiB instead of GB": ("busbw_gbs", "algbw = nbytes / seconds / 1e9", "algbw = nbytes / seconds / 2**30",
                          ex.WRONG_UNITS),
    "bytes per second": ("busbw_gbs", "algbw = nbytes / seconds / 1e9", "algbw = nbytes / seconds",
                         ex.WRONG_UNITS),
    "no overlap": ("predict_step_ms", STEP, "step = compute + halo", ex.SERIAL_TIME),
    "halo on one GPU": ("predict_step_ms", "halo = 0.0 if gpus == 1 else latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)",
                        "halo = latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)", ex.WRONG_MODEL),
    "even split assumed": ("predict_step_ms", "rows = math.ceil(ny / gpus)", "rows = ny / gpus", ex.WRONG_MODEL),
}

CHECKERS_14 = {"exchange_halos": ex.check_exchange_halos, "busbw_gbs": ex.check_busbw,
               "predict_step_ms": ex.check_prediction}


@pytest.fixture(scope="module")
def lab14():
    return load_solutions("14_multi_gpu_lab")


def test_lab14_solutions_pass(lab14):
    for name, checker in CHECKERS_14.items():
        checker(getattr(lab14, name))


@pytest.mark.parametrize("case", list(MUTANTS_14))
def test_lab14_mutants_are_rejected(lab14, case):
    name, old, new, bug_class = MUTANTS_14[case]
    bad = mutant(getattr(lab14, name), (old, new), **PY)
    with pytest.raises(lh.CheckFailed, match=f"^{bug_class}"):
        CHECKERS_14[name](bad)


def test_mutant_counts():
    """At least one mutant per bug class of the chapter (the report quotes this count)."""
    assert len(MUTANTS_14) == 14
    classes = {bug_class for *_rest, bug_class in MUTANTS_14.values()}
    assert classes == {ex.OFF_BY_ONE, ex.GHOST_NOT_WRITTEN, ex.OWNED_ROW_CHANGED, ex.OUTER_GHOST, ex.WRONG_FACTOR,
                       ex.WRONG_UNITS, ex.SERIAL_TIME, ex.WRONG_MODEL}
