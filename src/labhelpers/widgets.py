"""Sliders and dropdowns in front of a matplotlib figure.

``interactive_figure(draw, n=(1, 4096, 1), threads=[32, 64, 128, 256])`` builds one
control per keyword (a ``(min, max, step)`` tuple gives an integer slider, a tuple of
floats a float slider, a list a dropdown, an ipywidgets control is used as is), calls
``draw(ax, **values)`` on a fresh axes now and whenever a control moves, and returns
the widget. The first drawing happens immediately, inside the widget's output area.

The widget also carries its website version (:mod:`labhelpers.site_frames`): a bounded set of frames drawn
now, as self-contained HTML in the ``text/html`` entry of its display bundle. Jupyter and Colab show the live
widget; the built book, which has no kernel, prefers the HTML (``_config.yml``), whose controls switch frames.
"""

from __future__ import annotations

from typing import Any, Callable

import base64
import io

import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from . import site_frames


def make_control(name: str, spec: Any) -> widgets.Widget:
    """Turn a shorthand into an ipywidgets control.

    ``(lo, hi, step)`` of ints: IntSlider (starting at ``lo``... use ``(lo, hi, step, value)`` to pick).
    The same with a float anywhere: FloatSlider. A list: Dropdown (starting at the first item).
    An existing widget is returned unchanged.
    """
    if isinstance(spec, widgets.Widget):
        return spec
    if isinstance(spec, list):
        if not spec:
            raise ValueError(f"control {name!r}: the list of options is empty")
        return widgets.Dropdown(options=spec, value=spec[0], description=name)
    if isinstance(spec, tuple) and len(spec) in (3, 4):
        lo, hi, step = spec[:3]
        value = spec[3] if len(spec) == 4 else lo
        if not lo <= value <= hi:
            raise ValueError(f"control {name!r}: start value {value} is outside [{lo}, {hi}]")
        kwargs = dict(min=lo, max=hi, step=step, value=value, description=name, continuous_update=False)
        if all(isinstance(v, int) for v in spec):
            return widgets.IntSlider(**kwargs)
        return widgets.FloatSlider(**kwargs)
    raise ValueError(f"control {name!r}: use (min, max, step[, value]), a list of options, or a widget; got {spec!r}")


def figure_output(fig) -> dict:
    """A figure as a notebook display output (PNG), ready to put in an Output widget.

    Setting the Output widget's state directly (rather than capturing ``plt.show()``
    inside ``with out:``) works the same in Jupyter, Colab, nbclient and nbval, and the
    executed notebook's saved widget state then holds the figure for the built book.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": "<Figure>"}}


class InteractiveFigure(widgets.VBox):
    """The live widget (controls above a figure), displayed with its website version as ``text/html`` beside it.

    ``site_html`` is the HTML of :func:`labhelpers.site_frames.widget_site_html`, or ``""`` where no website
    version was made (in Colab); the display bundle then holds the widget's own entries only.
    """

    def __init__(self, children: list[widgets.Widget], site_html: str = "", **kwargs: Any) -> None:
        super().__init__(children, **kwargs)
        self.site_html = site_html

    def _widget_bundle(self, **kwargs: Any) -> dict:
        """The widget's own display entries (ipywidgets 8 makes them; ipywidgets 7 displays the same two)."""
        if hasattr(widgets.VBox, "_repr_mimebundle_"):
            return dict(super()._repr_mimebundle_(**kwargs) or {})
        return {"text/plain": repr(self)[:110],
                "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0,
                                                             "model_id": self._model_id}}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The widget's bundle plus, when made, the website's ``text/html`` version."""
        data = self._widget_bundle(**kwargs)
        if self.site_html:
            data["text/html"] = self.site_html
        return data

    if not hasattr(widgets.Widget, "_repr_mimebundle_"):  # ipywidgets 7 (Colab) displays through this instead

        def _ipython_display_(self, **kwargs: Any) -> None:
            display(self._repr_mimebundle_(), raw=True)


def site_version_wanted() -> bool:
    """Whether to draw the website's frames: everywhere but Colab (whose notebooks never become the website)."""
    return "google.colab" not in sys.modules


def interactive_figure(
    draw: Callable[..., None],
    *,
    figsize: tuple[float, float] = (7, 3.5),
    needs_gpu: bool = False,
    **controls: Any,
) -> InteractiveFigure:
    """Controls above a figure that ``draw(ax, **values)`` redraws whenever a control changes.

    Args:
        draw: draws on the given axes; receives one keyword per control.
        figsize: size of the figure in inches.
        needs_gpu: ``draw`` launches and times kernels on this GPU; its website frames (drawn from the reference
            data where no GPU is present) then say that the live version needs a GPU.
        **controls: one control per keyword (see :func:`make_control`).

    Returns:
        The widget (controls and output area) with its website version; display it as a cell's last expression.
    """
    made = {name: make_control(name, spec) for name, spec in controls.items()}
    out = widgets.Output()

    def redraw(**values: Any) -> None:
        fig, ax = plt.subplots(figsize=figsize)
        try:
            draw(ax, **values)
            fig.tight_layout()
            out.outputs = (figure_output(fig),)
        finally:
            plt.close(fig)

    for control in made.values():
        control.observe(lambda _change: redraw(**{k: c.value for k, c in made.items()}), names="value")
    redraw(**{k: c.value for k, c in made.items()})
    site = site_frames.widget_site_html(draw, made, figsize, needs_gpu=needs_gpu) if site_version_wanted() else ""
    box = widgets.HBox(list(made.values()), layout=widgets.Layout(flex_flow="row wrap"))
    return InteractiveFigure([box, out], site_html=site)
