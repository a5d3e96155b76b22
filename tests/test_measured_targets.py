"""Every measured exercise's target comes from its solution's ratios on the reference GPU, and the lab says it.

``src/labhelpers/data/measured_targets.json`` holds the ratios ``tools/measured_targets.py`` measured for each lab's
own solution on the reference GPU; :func:`labhelpers.exercises.timed.target_for` turns them into the target (the
lowest ratio less a margin). Here: each exercise uses that rule, the margin exceeds the spread of the runs, and the
lab's text states the target its checker applies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labhelpers.exercises import bsp, consistency, cuda_intro, matmul, memory, nbody, portability
from labhelpers.exercises import reduction, roofline, scan, scheduling, stencil, streams, timed

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = {"1": cuda_intro.VECTOR_ADD_TUNED, "2": bsp.GRID_STRIDE_TUNED, "3": memory.TRANSPOSE_TUNED,
             "4": scheduling.SCALE_TUNED, "5": matmul.TILED_TUNED, "6": reduction.FIRST_ADD_TUNED,
             "7": roofline.READ_SUM_TUNED, "8": nbody.TILED_TUNED, "9": stencil.JACOBI_TUNED, "10": scan.SCAN_TUNED,
             "11": streams.PIPELINE_TUNED, "12": portability.DIFF_TUNED, "13": consistency.COUNTER_TUNED}
RECORD = json.loads(timed.TARGETS_FILE.read_text())


@pytest.mark.parametrize("lab", list(RECORD["labs"]))
def test_a_measured_lab_takes_its_target_from_its_solutions_ratios(lab):
    ratios = RECORD["labs"][lab]["ratios"]
    target = EXERCISES[lab].target
    assert target == timed.target_for(lab, -1.0)
    margin = timed.margin_for(lab)
    assert target <= min(ratios) * (1 - margin) < target + 0.01
    assert margin >= RECORD["margin"] and margin >= 2 * (max(ratios) - min(ratios)) / min(ratios)
    assert "run(s) on an NVIDIA H200" in timed.target_basis(lab)


def test_a_lab_without_a_measurement_keeps_its_estimate_and_says_so():
    assert timed.target_for("99", 0.5) == 0.5
    assert "not measured yet" in timed.target_basis("99")


@pytest.mark.parametrize("lab", list(EXERCISES))
def test_the_lab_states_the_target_its_checker_applies(lab):
    path = next((ROOT / "labs").glob(f"{int(lab):02d}_*_lab.ipynb"))
    text = " ".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")
    target = EXERCISES[lab].target
    said = "twice" if target == 2 else re.escape(f"{target:g}")
    assert re.search(rf"\*\*[^*]*(?<![\d.]){said}(?![\d])[^*]*\*\*", " ".join(text.split())), \
        f"{path.name} should state the target {target:g} in bold"
