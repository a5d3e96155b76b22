"""Widgets draw their first figure at once; checkers explain failures."""

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers.exercises import answers  # noqa: E402
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


def test_a_host_function_is_called_with_its_failures_explained():
    # answers.call is the one way a checker calls a student's host function (checkers.check_function is gone):
    # a result comes back, an unwritten skeleton and a missing return are named as such.
    assert answers.call(lambda x: 2 * x, "double", 3) == 6
    with pytest.raises(lh.CheckFailed, match="not written yet"):
        answers.call(lambda x: (_ for _ in ()).throw(NotImplementedError("fill")), "double", 3)
    with pytest.raises(lh.CheckFailed, match="returned None"):
        answers.number(answers.call(lambda x: None, "double", 3), "double(3)")
    with pytest.raises(lh.CheckFailed, match="IndexError: index 33 is out of bounds"):
        answers.call(lambda x: (_ for _ in ()).throw(IndexError("index 33 is out of bounds")), "double", 3)
