"""Widgets draw their first figure at once; checkers explain failures."""

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers.checkers import check_function, diagnose  # noqa: E402
from labhelpers.widgets import make_control  # noqa: E402

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def test_controls_from_shorthands():
    assert isinstance(make_control("n", (1, 10, 1)), widgets.IntSlider)
    assert make_control("n", (1, 10, 1, 5)).value == 5
    assert isinstance(make_control("p", (0.0, 1.0, 0.1)), widgets.FloatSlider)
    assert make_control("t", [32, 64]).value == 32
    with pytest.raises(ValueError, match="outside"):
        make_control("n", (1, 10, 1, 50))
    with pytest.raises(ValueError, match="min, max, step"):
        make_control("n", "bad")


def test_interactive_figure_draws_now_and_on_change():
    calls = []
    box = lh.interactive_figure(lambda ax, n, kind: calls.append((n, kind)), n=(1, 8, 1, 2), kind=["a", "b"])
    assert calls[0] == (2, "a")  # the live figure first, then the website's frames (tests/test_site_frames.py)
    assert len(calls) == 1 + 16
    slider = box.children[0].children[0]
    slider.value = 5
    assert calls[-1] == (5, "a")


def _inputs(n, rng):
    return (rng.standard_normal(n).astype(np.float32),)


def test_checker_accepts_correct_code(capsys):
    check_function(lambda x: 2 * x, lambda x: 2 * x, _inputs, sizes=(1, 33))
    assert "Correct" in capsys.readouterr().out


def test_checker_reports_unwritten_tail():
    def student(x):
        out = np.full_like(x, np.nan)
        out[:32] = 2 * x[:32]
        return out

    with pytest.raises(lh.CheckFailed, match="never written.*ceiling division"):
        check_function(student, lambda x: 2 * x, _inputs, sizes=(1, 33))


def test_checker_turns_index_errors_into_bounds_check_advice():
    def student(x):
        raise IndexError("index 33 is out of bounds")

    with pytest.raises(lh.CheckFailed, match="bounds check"):
        check_function(student, lambda x: x, _inputs, sizes=(33,))


def test_checker_flags_unwritten_skeleton_and_none():
    with pytest.raises(lh.CheckFailed, match="not written yet"):
        check_function(lambda x: (_ for _ in ()).throw(NotImplementedError("fill")), lambda x: x, _inputs, sizes=(3,))
    with pytest.raises(lh.CheckFailed, match="returned None"):
        check_function(lambda x: None, lambda x: x, _inputs, sizes=(3,))


def test_diagnose_shape_and_values():
    assert "shape" in diagnose(np.zeros(3), np.zeros(4), rtol=0, atol=0)
    assert diagnose(np.arange(4), np.arange(4), rtol=0, atol=0) is None
    assert "1 of 4" in diagnose(np.array([0, 1, 5, 3]), np.arange(4), rtol=0, atol=0)
