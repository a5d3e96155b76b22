"""The "predict, then measure" exercises added for issue 26 (labs 3, 5, 6, 8, 9, 10, 12 and 13).

For each lab: the committed skeleton is rejected (a wrong type) and a wrong formula (a mutant) is rejected with the
class and hint of its mistake. That the solution passes, and that the lab's measure cell (reference data under the
simulator) prints the prediction beside the measurement, is tested with the lab's other cells (``tests/test_labs.py``).

Adding one: the student writes a function computing a prediction from a model; ``check_<x>`` (at the end of the
lab's exercises module) verifies it with one call of ``answers.check_formula`` (the cases, the right value, a hint
naming the likely mistake); ``show_<x>`` checks it again and prints it beside a live measurement, or the reference
one under the simulator, in a ``nbval-ignore-output`` cell. Add its mutants to ``PREDICTIONS`` here.
"""

from __future__ import annotations

import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend first)
from labhelpers.errors import CheckFailed
from labhelpers.exercises import answers
from labhelpers.exercises import consistency as ex13
from labhelpers.exercises import matmul as ex5
from labhelpers.exercises import memory as ex3
from labhelpers.exercises import nbody as ex8
from labhelpers.exercises import portability as ex12
from labhelpers.exercises import reduction as ex6
from labhelpers.exercises import scan as ex10
from labhelpers.exercises import stencil as ex9
from mutants import lab_skeletons, load_solutions

# lab: (checker, show, the function's name, [(a wrong formula, a phrase its message must contain)])
PREDICTIONS = {
    "03_memory_hierarchy_lab": (ex3.check_transpose_bound, ex3.show_transpose_bound, "predict_transpose_ms", [
        (lambda rows, cols, itemsize, gbs: rows * cols * itemsize / (gbs * 1e9) * 1e3, "AND writes"),
        (lambda rows, cols, itemsize, gbs: 2 * rows * cols / (gbs * 1e9) * 1e3, "count bytes"),
        (lambda rows, cols, itemsize, gbs: 2 * rows * cols * itemsize / (gbs * 1e9), "times 1000"),
    ]),
    "05_matrix_multiply_lab": (ex5.check_load_bytes, ex5.show_load_bytes, "predict_load_bytes", [
        (lambda n, tile, itemsize: n**3 * itemsize / tile, "AND one of B"),
        (lambda n, tile, itemsize: 2 * n**3 * itemsize * tile, "does not multiply"),
        (lambda n, tile, itemsize: 2 * n**3 * itemsize, "divide by the tile"),
        (lambda n, tile, itemsize: 2 * n**3 / tile, "count bytes"),
    ]),
    "06_reduction_lab": (ex6.check_reduction_bound, ex6.show_reduction_bound, "predict_reduction_ms", [
        (lambda n, itemsize, gbs: 2 * n * itemsize / (gbs * 1e9) * 1e3, "only READS"),
        (lambda n, itemsize, gbs: n / (gbs * 1e9) * 1e3, "count bytes"),
        (lambda n, itemsize, gbs: n * itemsize / (gbs * 1e9), "times 1000"),
    ]),
    "08_nbody_lab": (ex8.check_interaction_rate, ex8.show_interaction_rate, "predict_ginteractions", [
        (lambda gflops, per: gflops * per, "peak times the flops"),
        (lambda gflops, per: 2 * gflops / per, "no factor 2"),
        (lambda gflops, per: gflops / per / 1e3, "no factor 1000"),
        (lambda gflops, per: gflops / 20, "over the flops of one interaction"),
    ]),
    "09_stencils_lab": (ex9.check_jacobi_bound, ex9.show_jacobi_bound, "predict_jacobi_ms", [
        (lambda nx, ny, itemsize, gbs: 6 * nx * ny * itemsize / (gbs * 1e9) * 1e3, "neighbours are reused"),
        (lambda nx, ny, itemsize, gbs: nx * ny * itemsize / (gbs * 1e9) * 1e3, "AND writes"),
        (lambda nx, ny, itemsize, gbs: 2 * nx * ny * itemsize / (gbs * 1e9), "times 1000"),
    ]),
    "10_scan_lab": (ex10.check_scan_bound, ex10.show_scan_bound, "predict_scan_ms", [
        (lambda n, itemsize, passes, gbs: passes * itemsize * n / (gbs * 1e9) * 1e3, "AND writes"),
        (lambda n, itemsize, passes, gbs: 2 * passes * n / (gbs * 1e9) * 1e3, "count bytes"),
        (lambda n, itemsize, passes, gbs: 2 * passes * itemsize * n / (gbs * 1e9), "times 1000"),
        (lambda n, itemsize, passes, gbs: 2 * itemsize * n / (gbs * 1e9) * 1e3, "passes move the array"),
    ]),
    "12_portability_lab": (ex12.check_kernel_bound, ex12.show_kernel_bound, "predict_kernel_ms", [
        (lambda n, loads, stores, itemsize, gbs: loads * itemsize * n / (gbs * 1e9) * 1e3, "the stores move bytes"),
        (lambda n, loads, stores, itemsize, gbs: (loads + stores) * n / (gbs * 1e9) * 1e3, "count bytes"),
        (lambda n, loads, stores, itemsize, gbs: (loads + stores) * itemsize * n / (gbs * 1e9), "times 1000"),
    ]),
    "13_consistency_lab": (ex13.check_counter_bound, ex13.show_counter_bound, "predict_counter_ms", [
        (lambda n, group, rate: n / group / rate * 1e3, "partial last group"),
        (lambda n, group, rate: n / rate * 1e3, "not per thread"),
        (lambda n, group, rate: n * group / rate * 1e3, "does not multiply"),
        (lambda n, group, rate: (n + group - 1) // group / rate, "times 1000"),
    ]),
}


def _skeleton(lab: str, name: str):
    solutions = load_solutions(lab)
    return lab_skeletons(lab, **{k: v for k, v in vars(solutions).items() if not k.startswith("__")})[name]


@pytest.mark.parametrize("lab", list(PREDICTIONS))
def test_the_skeleton_is_rejected(lab):
    check, _show, name, _mutants = PREDICTIONS[lab]
    with pytest.raises(CheckFailed, match=answers.WRONG_TYPE):
        check(_skeleton(lab, name))


@pytest.mark.parametrize("lab, index", [(lab, i) for lab, spec in PREDICTIONS.items() for i in range(len(spec[3]))])
def test_a_wrong_formula_is_rejected_with_its_class(lab, index):
    check, _show, _name, mutants = PREDICTIONS[lab]
    wrong, phrase = mutants[index]
    with pytest.raises(CheckFailed) as info:
        check(wrong)
    text = str(info.value)
    assert text.startswith(answers.WRONG_ANSWER) and phrase in text, text
