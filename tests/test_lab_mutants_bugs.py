"""The "find the bug" exercise of every lab, and the measured exercises of labs 8, 10, 12 and 14.

A find-the-bug skeleton IS the buggy code (a bug the chapter teaches: a missing guard, a missing barrier, a
forgotten resource or roof, an unwritten border or ghost row, a dropped remainder). Its solution fixes it by
adding lines only (``tests/test_labs.py`` holds it to that). Here, for every lab:

* the committed skeleton, run as the notebook runs it, is rejected by the chapter's checker with the bug's class
  (that failure is the committed output nbval keeps checking);
* the solution passes the same checker.

Lab 5's find-the-bug is its exercise 4 ("spot the missing barrier"), tested with the lab's other mutants.

Adding one: a markdown cell (the symptom, a hint, "fix it by adding lines"), a ``skeleton`` cell that *is* the buggy
function under its own name (``scale_2d_bug``), and a ``raises-exception`` cell calling the chapter's existing
checker; choose a bug the chapter teaches whose fix only adds lines; the solutions file holds the fixed function.

The measured exercises of labs 8, 10, 12 and 14: a wrong kernel is rejected before anything is timed, the solution
passes under the simulator with the reference sentence (or, for lab 14, the sentence saying no 2-GPU reference is
shipped), and a faked GPU judges below and at target.
"""

from __future__ import annotations

import importlib

import pytest

from labhelpers.chapters import CHAPTERS  # the chapter table (no backend needed)
import labhelpers as lh  # noqa: F401  (chooses the backend first)
from labhelpers.errors import CheckFailed
from labhelpers.exercises import timed
from labhelpers.exercises import multi_gpu as ex14
from labhelpers.exercises import nbody as ex8
from labhelpers.exercises import portability as ex12
from labhelpers.exercises import scan as ex10
from labhelpers.exercises import harness as h
from labhelpers.timing import Timing
from markers import sim_only
from mutants import judge_only, lab_skeletons, load_solutions, mutant

# lab: (the checker's module, the checker's call on the function f, the skeleton's name, the class it must report)
BUGS = {
    "01_cuda_in_python_lab": ("cuda_intro", lambda m, f, s: m.check_scale_2d(f), "scale_2d_bug", h.MISSING_GUARD),
    "02_bsp_and_amdahl_lab": ("bsp", lambda m, f, s: m.check_processors_needed(f), "processors_for",
                              "Raised an error"),
    "03_memory_hierarchy_lab": ("memory", lambda m, f, s: m.check_tiled_transpose(f), "transpose_tiled_bug",
                                h.MISSING_BARRIER),
    "04_scheduling_lab": ("scheduling", lambda m, f, s: m.check_blocks_per_sm(f), "resident_blocks", "Wrong answer"),
    "06_reduction_lab": ("reduction", lambda m, f, s: m.check_sequential_reduction(f), "reduce_tree_bug",
                         h.MISSING_BARRIER),
    "07_profiling_roofline_lab": ("roofline", lambda m, f, s: m.check_roofline_time(f), "roofline_time_bug",
                                  "Wrong answer"),
    "08_nbody_lab": ("nbody", lambda m, f, s: m.check_tiled(f, s.TILE), "nbody_tiled_bug", h.MISSING_BARRIER),
    "09_stencils_lab": ("stencil", lambda m, f, s: m.check_jacobi_step(f), "jacobi_interior_only", h.NEVER_WRITTEN),
    "10_scan_lab": ("scan", lambda m, f, s: m.check_block_offsets(f), "add_offsets_bug", h.MISSING_GUARD),
    "11_streams_lab": ("streams", lambda m, f, s: m.check_chunked_pipeline(f), "pipeline_bug", "never computed"),
    "12_portability_lab": ("portability", lambda m, f, s: m.check_transpose(f), "transpose_opencl_bug",
                           "no barrier"),
    "13_consistency_lab": ("consistency", lambda m, f, s: m.check_count_block(f), "count_block_bug", "not safe"),
    "14_multi_gpu_lab": ("multi_gpu", lambda m, f, s: m.check_exchange_halos(f), "exchange_halos_bug",
                         ex14.GHOST_NOT_WRITTEN),
}


def _skeleton(lab: str, name: str, solutions):
    """The committed skeleton ``name`` of ``lab``, defined in the solutions module's globals (the lab's imports)."""
    return lab_skeletons(lab, **{k: v for k, v in vars(solutions).items() if not k.startswith("__")})[name]


@pytest.mark.parametrize("lab", list(BUGS))
def test_the_given_bug_is_rejected_with_its_class(lab):
    module, call, name, cls = BUGS[lab]
    solutions = load_solutions(lab)
    with pytest.raises(CheckFailed) as info:
        call(importlib.import_module(f"labhelpers.exercises.{module}"), _skeleton(lab, name, solutions), solutions)
    text = str(info.value)
    assert text.startswith(cls) or cls in text, f"expected {cls!r}, got: {text[:300]}"


def test_every_lab_but_five_has_a_find_the_bug_exercise():
    """Lab 5's is exercise 4 (the missing barrier of the tiled kernel)."""
    labs = {f"{c.number:02d}" for c in CHAPTERS} - {"05"}
    assert {lab[:2] for lab in BUGS} == labs, f"labs without a find-the-bug exercise in BUGS: " \
                                              f"{sorted(labs - {lab[:2] for lab in BUGS})}"


# ------------------------------------------------------------------------------------------- measured exercises

S8 = load_solutions("08_nbody_lab")
S10 = load_solutions("10_scan_lab")
S12 = load_solutions("12_portability_lab")
S14 = load_solutions("14_multi_gpu_lab")

# lab: (check(student), exercise, module, race name)
MEASURED = {
    "8": (lambda k=S8.nbody_tiled: ex8.check_tiled_speed(k, S8.TILE), ex8.TILED_TUNED, ex8, "_race_tiled"),
    "10": (lambda k=S10.add_block_offsets: ex10.check_scan_threads(S10.blelloch_block, k, S10.choose_threads),
           ex10.SCAN_TUNED, ex10, "_race_scan"),
    "12": (lambda k=S12.diff_opencl: ex12.check_diff_local_size(k, S12.global_size_for, S12.choose_local_size),
           ex12.DIFF_TUNED, ex12, "_race_diff"),
    "14": (lambda k=S14.predict_step_ms: ex14.check_two_gpu_rows(k, S14.choose_rows), ex14.SCALING_TUNED, ex14,
           "_race_scaling"),
}


def fake(ms: float) -> Timing:
    return Timing("fake", times_ms=(ms, ms, ms))


@pytest.fixture
def fake_gpu(monkeypatch):
    """Pretend a GPU (and what lab 12 and lab 14 need besides: OpenCL on it, a second one) is here: the checks then
    call their race."""
    monkeypatch.setattr(timed, "can_time", lambda: True)
    monkeypatch.setattr(ex12, "_opencl_gpu_here", lambda: True)
    monkeypatch.setattr(ex14, "_two_gpus", lambda: True)


def _wrong(lab: str):
    """A one-line mutant of the solution each measured check must reject before timing, and the class it gives."""
    if lab == "8":
        return mutant(S8.nbody_tiled, ("cuda.syncthreads()", "", 2)), h.MISSING_BARRIER  # the WAR barrier
    if lab == "10":
        return mutant(S10.add_block_offsets, "if i < out.size:", "if True:"), h.MISSING_GUARD
    if lab == "12":
        return (lambda: S12.diff_opencl().replace("if (i < n - 1)", "")), "wrote past the end"
    return mutant(S14.predict_step_ms, "halo = 0.0 if gpus == 1 else latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)",
                  "halo = latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)", jit=lambda f: f), ex14.WRONG_MODEL


@pytest.mark.parametrize("lab", list(MEASURED))
def test_measured_wrong_code_is_rejected_before_timing(lab, fake_gpu, monkeypatch):
    check, _ex, module, race = MEASURED[lab]
    monkeypatch.setattr(module, race, lambda *args: pytest.fail("timed wrong code"))
    student, cls = _wrong(lab)
    with pytest.raises(CheckFailed) as info:
        check(student)
    assert str(info.value).startswith(cls) or cls in str(info.value), str(info.value)[:300]


@sim_only  # the verdict's arithmetic is the same on a GPU, where test_labs judges the real measurement
@pytest.mark.parametrize("lab", list(MEASURED))
@pytest.mark.parametrize("slow", [True, False], ids=["below target", "at target"])
def test_measured_faked_gpu_judges(lab, slow, fake_gpu, monkeypatch):
    check, ex, module, race = MEASURED[lab]
    student_ms = 1.0 / (ex.target * (0.5 if slow else 1.25))  # ratio = yardstick time / student time
    monkeypatch.setattr(module, race, lambda *args: (fake(student_ms), fake(1.0)))
    judge_only(monkeypatch)
    if slow:
        with pytest.raises(CheckFailed, match=f"^{timed.BELOW_TARGET}"):
            check()
    else:
        verdict = check()
        assert verdict.passed and verdict.ratio is not None, verdict.text  # timed, not "Not timed here"


@pytest.mark.parametrize("check, name", [
    (lambda c: ex10.check_scan_threads(S10.blelloch_block, S10.add_block_offsets, c), "choose_threads"),
    (lambda c: ex12.check_diff_local_size(S12.diff_opencl, S12.global_size_for, c), "choose_local_size"),
    (lambda c: ex14.check_two_gpu_rows(S14.predict_step_ms, c), "choose_rows")])
def test_measured_choices_are_refused_before_anything_runs(check, name):
    with pytest.raises(CheckFailed, match="^Wrong type"):
        check(lambda: None)
    with pytest.raises(CheckFailed, match=f"^{timed.NOT_ALLOWED}"):
        check(lambda: 100)


def test_lab8_refuses_a_tile_it_does_not_allow():
    with pytest.raises(CheckFailed, match=f"^{timed.NOT_ALLOWED}"):
        ex8.check_tiled_speed(S8.nbody_tiled, 48)
