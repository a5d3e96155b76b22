"""The measured exercises of the labs: the pass/fail logic with fake GPU timings, and mutants of every checker.

:mod:`labhelpers.exercises.timed` checks correctness through the harness first, then (on a GPU) compares the
student's timing with a yardstick of the same run. Here no GPU is needed:

* the ratio and the verdict are computed from :class:`~labhelpers.timing.Timing` objects made by hand;
* a "faked GPU" replaces ``timed.can_time`` and the lab's race with fake timings: a choice below target is
  rejected with ``Below target`` and both numbers, one above it passes;
* for every lab, a wrong kernel (a one-line mutant of the solution) is rejected with the harness's class BEFORE
  anything is timed, and choices of the wrong type or outside the allowed values are refused.

Adding a measured exercise (the student chooses; the GPU decides): a ``choose_*()`` skeleton (or the lab's
constant), and a checker at the end of ``exercises/<topic>.py`` calling ``measured.check`` with the lab's own checker
as ``correct`` and a race that times the student's choice and a yardstick in the same run (``lh.benchmark``,
``measured.time_copy_of``). Its check cell is tagged ``raises-exception`` and ``nbval-ignore-output`` and starts
``# machine-dependent output``. Its target is ``measured.target_for("<lab>", estimate)``: the solution's lowest ratio
on the reference GPU, written into ``data/measured_targets.json`` by ``tools/measured_targets.py --runs 3 --record``,
less a 15% margin; the lab states the same number in bold (``tests/test_measured_targets.py``). An exercise timeable
only on some machines passes ``timeable=``; without a reference measurement, ``reference(choice)`` says so. Add its
mutants and a faked-GPU test here.
"""

from __future__ import annotations

import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend first)
from labhelpers.errors import CheckFailed
from labhelpers.exercises import answers as a
from labhelpers.exercises import bsp as ex2
from labhelpers.exercises import consistency as ex13
from labhelpers.exercises import cuda_intro as ex1
from labhelpers.exercises import matmul as ex5
from labhelpers.exercises import harness as h
from labhelpers.exercises import timed
from labhelpers.exercises import memory as ex3
from labhelpers.exercises import reduction as ex6
from labhelpers.exercises import roofline as ex7
from labhelpers.exercises import scheduling as ex4
from labhelpers.exercises import stencil as ex9
from labhelpers.exercises import streams as ex11
from labhelpers.timing import Timing
from markers import sim_only
from mutants import judge_only, load_solutions, mutant

S1 = load_solutions("01_cuda_in_python_lab")
S2 = load_solutions("02_bsp_and_amdahl_lab")
S3 = load_solutions("03_memory_hierarchy_lab")
S4 = load_solutions("04_scheduling_lab")
S5 = load_solutions("05_matrix_multiply_lab")
S6 = load_solutions("06_reduction_lab")
S7 = load_solutions("07_profiling_roofline_lab")
S9 = load_solutions("09_stencils_lab")
S11 = load_solutions("11_streams_lab")
S13 = load_solutions("13_consistency_lab")


def fake(ms: float, nbytes: int | None = None, label: str = "fake") -> Timing:
    """A GPU timing made by hand (what a fake GPU returns)."""
    return Timing(label, times_ms=(ms, ms, ms), nbytes=nbytes)


def always(value):
    return lambda: value


# ------------------------------------------------------------------------------------------- the logic

EX = timed.MeasuredExercise(name="the demo", measures="the demo kernel", yardstick="the demo copy", target=0.7,
                               reference=lambda choice: f"demo reference for {choice}")


def test_ratio_of_rates_when_both_state_bytes():
    assert timed.ratio(fake(2.0, nbytes=10**9), fake(1.0, nbytes=2 * 10**9)) == pytest.approx(0.25)


def test_ratio_of_times_when_the_work_is_the_same():
    assert timed.ratio(fake(4.0), fake(1.0)) == pytest.approx(0.25)
    assert timed.ratio(fake(1.0), fake(3.0)) == pytest.approx(3.0)


@pytest.mark.parametrize("student_ms, passed", [(1.0, True), (1.0 / 0.7, True), (1.5, False)])
def test_verdict_at_the_target(student_ms, passed):
    v = timed.verdict(EX, 256, fake(student_ms), fake(1.0))
    assert v.passed is passed
    assert "ratio" in v.text and "target 0.7" in v.text


def test_check_without_a_gpu_prints_the_reference_and_the_promise(capsys, monkeypatch):
    monkeypatch.setattr(timed, "can_time", lambda: False)  # the simulator's path, on either backend
    v = timed.check(EX, 256, correct=lambda: print("Correct: demo"), race=lambda: pytest.fail("timed"))
    out = capsys.readouterr().out
    assert v.passed and v.ratio is None
    assert out.index("Correct: demo") < out.index("Reference: demo reference for 256")
    assert "On a GPU this check times the demo kernel against the demo copy" in out and "0.7" in out


def test_check_stops_at_the_first_wrong_answer():
    def wrong():
        raise h.failure(h.MISSING_GUARD, "demo")

    with pytest.raises(CheckFailed, match=f"^{h.MISSING_GUARD}"):
        timed.check(EX, 256, correct=wrong, race=lambda: pytest.fail("timed a wrong kernel"))


@pytest.fixture
def fake_gpu(monkeypatch):
    """Pretend a GPU is here: ``timed.check`` then calls the race."""
    monkeypatch.setattr(timed, "can_time", lambda: True)


def test_faked_gpu_below_target_is_rejected_with_both_numbers(fake_gpu):
    with pytest.raises(CheckFailed, match=f"^{timed.BELOW_TARGET}") as info:
        timed.check(EX, 32, correct=lambda: None, race=lambda: (fake(2.0), fake(1.0)))
    assert "2 ms" in str(info.value) and "1 ms" in str(info.value) and "ratio 0.50" in str(info.value)


def test_faked_gpu_at_target_passes(fake_gpu, capsys):
    v = timed.check(EX, 256, correct=lambda: None, race=lambda: (fake(1.0), fake(0.8)))
    assert v.passed and v.ratio == pytest.approx(0.8)
    assert "Passed: ratio 0.80" in capsys.readouterr().out


def test_faked_gpu_without_what_the_race_needs_says_what_is_missing(fake_gpu, capsys):
    """Lab 12's OpenCL GPU, lab 14's second GPU: a GPU is here but the race cannot run, so the check says why."""
    v = timed.check(EX, 256, correct=lambda: None, race=lambda: pytest.fail("timed"), timeable=lambda: False,
                    why_not="no second GPU")
    assert v.passed and v.ratio is None
    assert "Not timed here (no second GPU): On a GPU this check times" in capsys.readouterr().out


def test_lab12_is_timed_only_where_opencl_sees_a_gpu(fake_gpu, monkeypatch):
    from labhelpers.kernels import portability as pt
    from labhelpers.exercises import portability as ex12

    def missing(kind="cpu"):
        raise pt.ToolMissing(f"no OpenCL {kind} device here")

    monkeypatch.setattr(pt, "opencl_target", missing)
    assert ex12._opencl_gpu_here() is False


@pytest.mark.parametrize("value, cls", [(None, a.WRONG_TYPE), ("256", a.WRONG_TYPE), (256.0, a.WRONG_TYPE),
                                        (100, timed.NOT_ALLOWED), (2048, timed.NOT_ALLOWED)])
def test_choices_of_the_wrong_type_or_value_are_refused(value, cls):
    with pytest.raises(CheckFailed, match=f"^{cls}"):
        timed.choose(always(value), "choose_threads", (32, 64, 128, 256))


def test_pair_choices():
    assert timed.choose(always([8, 3]), "choose", ((1, 1), (8, 3))) == (8, 3)
    with pytest.raises(CheckFailed, match=f"^{a.WRONG_TYPE}"):
        timed.choose(always(8), "choose", ((1, 1), (8, 3)))


# ------------------------------------------------------------------------------------------- every lab

# lab: (check(student, choice), solution, choice, module, race name)
LABS = {
    "1": (lambda k, c: ex1.check_vector_add_threads(k, c), S1.vector_add, S1.choose_threads, ex1, "_race_vector_add"),
    "2": (lambda k, c: ex2.check_grid_blocks_per_sm(k, c), S2.grid_stride_update, S2.choose_blocks_per_sm, ex2,
          "_race_grid_stride"),
    "3": (lambda k, c: ex3.check_transpose_speed(k), S3.transpose_tiled, None, ex3, "_race_transpose"),
    "4": (lambda k, c: ex4.check_scale_threads(k, c), S4.blocks_per_sm, S4.choose_threads, ex4, "_race_scale"),
    "5": (lambda k, c: ex5.check_tiled_speed(k, S5.TILE), S5.matmul_tiled_kernel, None, ex5, "_race_tiled"),
    "6": (lambda k, c: ex6.check_first_add_threads(k, c), S6.reduce_first_add, S6.choose_threads, ex6,
          "_race_first_add"),
    "7": (lambda k, c: ex7.check_read_sum_threads(k, c), S7.read_sum, S7.choose_threads, ex7, None),
    "9": (lambda k, c: ex9.check_jacobi_block(k, c), S9.jacobi_step, S9.choose_block, ex9, "_race_jacobi"),
    "11": (lambda k, c: ex11.check_pipeline_choice(k, c), S11.chunked_pipeline, S11.choose_chunks_streams, ex11,
           "_race_pipeline"),
    "13": (lambda k, c: ex13.check_counter_speed(k, S13.count_atomic, c), S13.count_block, S13.choose_threads, ex13,
           "_race_counters"),
}


TARGETS = {"1": ex1.VECTOR_ADD_TUNED, "2": ex2.GRID_STRIDE_TUNED, "3": ex3.TRANSPOSE_TUNED, "4": ex4.SCALE_TUNED,
           "5": ex5.TILED_TUNED, "6": ex6.FIRST_ADD_TUNED, "9": ex9.JACOBI_TUNED, "7": ex7.READ_SUM_TUNED, "11": ex11.PIPELINE_TUNED, "13": ex13.COUNTER_TUNED}


def plain(func):
    return func


# Wrong code is rejected by the lab's checker before anything is timed: (lab, old line, new line, class or, for the
# checkers of labs 11 and 13 whose messages carry no class, a phrase of the message, jit).
WRONG = {
    "1: no guard": ("1", "if i < out.size:", "if True:", h.MISSING_GUARD, None),
    "2: stride of one block": ("2", "stride = cuda.gridsize(1)", "stride = cuda.blockDim.x", ex2.VISITS, None),
    "3: no barrier": ("3", "cuda.syncthreads()", "", h.MISSING_BARRIER, None),
    "4: partial warp dropped": ("4", "warps_per_block = math.ceil(threads / 32)", "warps_per_block = threads // 32 or 1",
                                a.WRONG_ANSWER, plain),
    "5: no WAR barrier": ("5", "cuda.syncthreads()  # WAR: nobody overwrites the tiles while others still read them",
                          "", h.MISSING_BARRIER, None),
    "6: second element never added": ("6", "v += x[i + cuda.blockDim.x]", "v += float32(0)", ex6.TREE, None),
    "7: float64 accumulator": ("7", "acc = float32(0)", "acc = 0.0", h.FLOAT64, None),
    "9: no guard": ("9", "if i < ny and j < nx:", "if True:", h.MISSING_GUARD, None),
    "11: remainder dropped": ("11", "lo, hi = c * n // chunks, (c + 1) * n // chunks",
                              "lo, hi = c * (n // chunks), (c + 1) * (n // chunks)", "never computed", plain),
    "13: final add without atomics": ("13", "cuda.atomic.add(counter, 0, hits[0])", "counter[0] += hits[0]",
                                      "plain store", None),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_code_is_rejected_before_timing(name, fake_gpu, monkeypatch):
    lab, old, new, cls, jit = WRONG[name]
    check, solution, choice, module, race = LABS[lab]
    if race:
        monkeypatch.setattr(module, race, lambda *args: pytest.fail("timed a wrong kernel"))
    student = mutant(solution, (old, new), jit=jit)
    with pytest.raises(CheckFailed) as info:
        check(student, choice)
    text = str(info.value)
    assert text.lower().startswith(cls.lower()) or (cls in text), f"expected {cls!r}, got: {text[:300]}"


@sim_only  # the verdict's arithmetic is the same on a GPU, where test_labs judges the real measurement
@pytest.mark.parametrize("lab", [lab for lab in LABS if LABS[lab][4]])
@pytest.mark.parametrize("slow", [True, False], ids=["below target", "at target"])
def test_faked_gpu_judges_each_lab(lab, slow, fake_gpu, monkeypatch, capsys):
    check, solution, choice, module, race = LABS[lab]
    target = TARGETS[lab].target
    yard_ms = 1.0
    student_ms = yard_ms / (target * (0.5 if slow else 1.25))  # ratio = yardstick time / student time
    monkeypatch.setattr(module, race, lambda *args: (fake(student_ms), fake(yard_ms)))
    judge_only(monkeypatch)
    if slow:
        with pytest.raises(CheckFailed, match=f"^{timed.BELOW_TARGET}"):
            check(solution, choice)
    else:
        verdict = check(solution, choice)
        assert verdict.passed and verdict.ratio is not None, verdict.text  # timed, not "Not timed here"


@sim_only
@pytest.mark.parametrize("lab", ["1", "4", "6", "7", "13"])
def test_the_choice_is_refused_before_the_kernel_runs(lab):
    check, solution, _choice, _module, _race = LABS[lab]
    with pytest.raises(CheckFailed, match=f"^{a.WRONG_TYPE}"):
        check(solution, always(None))
    with pytest.raises(CheckFailed, match=f"^{timed.NOT_ALLOWED}"):
        check(solution, always(100))
