"""What the book's website shows for a widget: precomputed frames switched by a little JavaScript.

The built book has no Python kernel behind it, so a saved ipywidget cannot redraw its figure. For each widget,
:func:`labhelpers.interactive_figure` therefore also draws a bounded set of frames here, at execution time:

* :func:`control_stops` picks the values ("stops") the site offers for one control: every option of a dropdown,
  a few evenly spread values of a slider (always its start, minimum and maximum, snapped to its step);
* :func:`fit_stops` thins the sliders' stops (then the dropdowns') until the product of all controls fits in
  :data:`MAX_FRAMES` frames, keeping at least two stops per control;
* :func:`render_frames` draws every combination as a small palette PNG, about as wide as the page's column, and
  records the smallest font (pt), the dpi and the pixel width of each frame (the browser check's legibility test);
* :func:`site_html` writes the self-contained HTML: native ``<input type=range>`` / ``<select>`` controls, an
  ``<img>``, the frames as JSON in a ``<script type="application/json">`` and one line saying that the values are
  precomputed. ``_vendor/lh-widgets.js`` wires every ``.lh-widget`` of a page.

The stops depend only on the controls (never on the backend), so the HTML's controls are the same on a GPU and
under the simulator; ``tests/nbval_sanitize.cfg`` masks the frames' payload.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt

from .plotting import COLUMN_PX, smallest_font_pt

#: At most this many frames per widget (the product of the controls' stops).
MAX_FRAMES = 40
#: At most this many stops for one slider.
MAX_SLIDER_STOPS = 10
#: Pixel width of a frame: the cell-output column of the built book (688 px at a 1280 px wide window).
FRAME_WIDTH_PX = COLUMN_PX
#: The dpi of a frame is at most this (narrow figures are not blown up).
MAX_FRAME_DPI = 100
#: Colours of a frame's palette PNG.
PALETTE_COLORS = 64
#: What the site says under every widget.
NOTE = ("The website shows precomputed values of these controls; run this chapter in Colab or Jupyter to move "
        "them freely.")
#: What the site says under a widget whose live version launches and times kernels.
NOTE_NEEDS_GPU = ("The website shows the reference GPU's data for these precomputed values; the live version "
                  "launches and times kernels on your GPU, so it needs a GPU: run this chapter in Colab with a GPU "
                  "runtime.")


@dataclass(frozen=True)
class Stops:
    """The values the website offers for one control."""

    name: str
    kind: str  # "range" (a slider) or "select" (a dropdown, a checkbox, a multiple selection)
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    start: int  # index of the control's start value in ``values``

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class Frames:
    """The rendered frames of one widget: unique PNGs and, for each combination of stop indices, which one."""

    images: list[str] = field(default_factory=list)  # base64 PNGs
    index: dict[str, int] = field(default_factory=dict)  # "i-j-k" (stop indices) -> position in images
    min_font_pt: float = math.inf
    dpi: float = 0.0
    width_px: int = 0


def _label(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) if value else "none"
    return str(value)


def _decimals(step: float) -> int:
    """Decimal places that represent multiples of ``step`` exactly enough (0.005 -> 3)."""
    text = f"{step:.10f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def spread(count: int, n: int, start: int) -> list[int]:
    """At most ``n`` indices of ``range(count)``, evenly spread, always with 0, ``count - 1`` and ``start``.

    With ``n == 2`` the two are ``start`` and the end farther from it (the last one at a tie, or when ``start``
    is the first); with ``n == 1``, ``start`` alone.
    """
    if count <= n:
        return list(range(count))
    if n <= 1:
        return [start]
    if n == 2:
        return sorted({start, 0 if start > count - 1 - start else count - 1})
    chosen = {round(k * (count - 1) / (n - 1)) for k in range(n)}
    if start not in chosen:  # replace the spread index nearest to the start value (never an end)
        inner = sorted(chosen - {0, count - 1}, key=lambda i: abs(i - start))
        if inner:
            chosen.discard(inner[0])
        chosen.add(start)
    return sorted(chosen)


def _slider_values(lo: float, hi: float, step: float, integer: bool) -> list[Any]:
    count = int(math.floor((hi - lo) / step + 1e-9)) + 1
    if integer:
        return [int(lo + i * step) for i in range(count)]
    digits = _decimals(step)
    return [round(lo + i * step, digits) for i in range(count)]


def control_stops(name: str, control: widgets.Widget, max_slider_stops: int = MAX_SLIDER_STOPS) -> Stops:
    """The stops the website offers for ``control`` (made by :func:`labhelpers.widgets.make_control` or given).

    Integer and float sliders: at most ``max_slider_stops`` values evenly spread over the range, snapped to the
    step, always with the start value, the minimum and the maximum. A selection slider: the same over its options.
    Dropdowns: every option. A checkbox: its value and the other one. A multiple selection: its start selection,
    then each option alone. Any other widget: its current value only.
    """
    if isinstance(control, (widgets.IntSlider, widgets.FloatSlider)):
        integer = isinstance(control, widgets.IntSlider)
        every = _slider_values(control.min, control.max, control.step, integer)
        start = min(range(len(every)), key=lambda i: abs(every[i] - control.value))
        keep = spread(len(every), max_slider_stops, start)
        values = tuple(every[i] for i in keep)
        return Stops(name, "range", values, tuple(map(_label, values)), keep.index(start))
    if isinstance(control, widgets.SelectionSlider):
        every = list(control._options_values)
        labels = list(control._options_labels)
        start = every.index(control.value)
        keep = spread(len(every), max_slider_stops, start)
        return Stops(name, "range", tuple(every[i] for i in keep), tuple(labels[i] for i in keep), keep.index(start))
    if isinstance(control, widgets.SelectMultiple):
        options = tuple(control._options_values)
        values = [tuple(control.value)] + [(o,) for o in options if (o,) != tuple(control.value)]
        labels = ["all" if set(v) == set(options) else _label(v) for v in values]
        return Stops(name, "select", tuple(values), tuple(labels), 0)
    if isinstance(control, (widgets.Dropdown, widgets.Select, widgets.RadioButtons, widgets.ToggleButtons)):
        values = tuple(control._options_values)
        return Stops(name, "select", values, tuple(control._options_labels), values.index(control.value))
    if isinstance(control, (widgets.Checkbox, widgets.ToggleButton)) and not control.disabled:
        return Stops(name, "select", (control.value, not control.value),
                     (_label(control.value), _label(not control.value)), 0)
    value = getattr(control, "value", None)
    return Stops(name, "select", (value,), (_label(value),), 0)


def _thinned(stops: Stops, n: int) -> Stops:
    keep = spread(len(stops), n, stops.start)
    return Stops(stops.name, stops.kind, tuple(stops.values[i] for i in keep),
                 tuple(stops.labels[i] for i in keep), keep.index(stops.start))


def fit_stops(all_stops: Sequence[Stops], max_frames: int = MAX_FRAMES) -> list[Stops]:
    """Thin the stops until their product is at most ``max_frames``.

    The control with the most stops loses one at a time (at equal counts sliders before dropdowns, and later
    controls before earlier ones, the first being the widget's main one); each control's
    stops are then spread afresh over its full list (:func:`spread`), so a slider keeps its start value and both
    ends while it has three or more, and its largest value next to the start when it has two. No control goes
    below two stops unless even two each do not fit.
    """
    counts = [len(s) for s in all_stops]
    floor = 2
    while math.prod(counts) > max_frames:
        candidates = [i for i, n in enumerate(counts) if n > floor]
        if not candidates:
            if floor == 1:
                break
            floor = 1
            continue
        i = max(candidates, key=lambda k: (counts[k], all_stops[k].kind == "range", k))  # later controls first
        counts[i] -= 1
    return [s if n == len(s) else _thinned(s, n) for s, n in zip(all_stops, counts)]


def png_bytes(fig, dpi: float) -> bytes:
    """``fig`` as a PNG at ``dpi``, quantised to a palette of :data:`PALETTE_COLORS` colours (Pillow)."""
    from PIL import Image  # matplotlib depends on Pillow

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    small = image.quantize(colors=PALETTE_COLORS, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def frame_dpi(figsize: tuple[float, float]) -> float:
    """The dpi at which a figure of ``figsize`` inches is :data:`FRAME_WIDTH_PX` wide (at most ``MAX_FRAME_DPI``)."""
    return min(MAX_FRAME_DPI, FRAME_WIDTH_PX / figsize[0])


def render_frames(draw: Callable[..., None], stops: Sequence[Stops], figsize: tuple[float, float]) -> Frames:
    """Draw every combination of ``stops`` with ``draw(ax, **values)`` as a small PNG; identical PNGs are kept once."""
    frames = Frames(dpi=frame_dpi(figsize))
    seen: dict[str, int] = {}
    for combo in itertools.product(*(range(len(s)) for s in stops)):
        values = {s.name: s.values[i] for s, i in zip(stops, combo)}
        fig, ax = plt.subplots(figsize=figsize)
        try:
            draw(ax, **values)
            fig.tight_layout()
            frames.min_font_pt = min(frames.min_font_pt, smallest_font_pt(fig))
            data = base64.b64encode(png_bytes(fig, frames.dpi)).decode("ascii")
            frames.width_px = round(fig.get_figwidth() * frames.dpi)
        finally:
            plt.close(fig)
        if data not in seen:
            seen[data] = len(frames.images)
            frames.images.append(data)
        frames.index["-".join(map(str, combo))] = seen[data]
    return frames


def _control_html(position: int, stops: Stops) -> str:
    name = html.escape(stops.name)
    if stops.kind == "range" and len(stops) > 1:
        shown = html.escape(stops.labels[stops.start])
        labels = html.escape(json.dumps(list(stops.labels)), quote=True)
        return (f'<label class="lh-control">{name} <input type="range" data-control="{position}" min="0" '
                f'max="{len(stops) - 1}" step="1" value="{stops.start}" data-labels="{labels}"> '
                f'<output>{shown}</output></label>')
    options = "".join(f'<option value="{i}"{" selected" if i == stops.start else ""}>{html.escape(label)}</option>'
                      for i, label in enumerate(stops.labels))
    fixed = " disabled" if len(stops) == 1 else ""
    return f'<label class="lh-control">{name} <select data-control="{position}"{fixed}>{options}</select></label>'


def site_html(stops: Sequence[Stops], frames: Frames, *, needs_gpu: bool = False) -> str:
    """The website's version of a widget: controls, the start frame, the frames as JSON, and the note."""
    start_key = "-".join(str(s.start) for s in stops)
    first = frames.images[frames.index[start_key]]
    payload = json.dumps({"images": frames.images, "index": frames.index}, separators=(",", ":"))
    note = NOTE_NEEDS_GPU if needs_gpu else NOTE
    font = "" if math.isinf(frames.min_font_pt) else f"{frames.min_font_pt:g}"
    controls = "".join(_control_html(i, s) for i, s in enumerate(stops))
    return (f'<div class="lh-widget" data-min-font-pt="{font}" data-dpi="{frames.dpi:g}" '
            f'data-width-px="{frames.width_px}"{" data-needs-gpu" if needs_gpu else ""}>'
            f'<div class="lh-controls">{controls}</div>'
            f'<img class="lh-frame" alt="figure for the values above" src="data:image/png;base64,{first}">'
            f'<script type="application/json" class="lh-frames">{payload}</script>'
            f'<p class="lh-note">{html.escape(note)} '
            f'<a class="lh-colab" href="https://colab.research.google.com">Open in Colab</a></p></div>')


def widget_site_html(draw: Callable[..., None], controls: dict[str, widgets.Widget], figsize: tuple[float, float],
                     *, needs_gpu: bool = False, max_frames: int = MAX_FRAMES) -> str:
    """Stops, frames and HTML of one widget in one call (what :func:`labhelpers.interactive_figure` uses)."""
    stops = fit_stops([control_stops(name, c) for name, c in controls.items()], max_frames)
    return site_html(stops, render_frames(draw, stops, figsize), needs_gpu=needs_gpu)


__all__ = ["MAX_FRAMES", "Frames", "Stops", "control_stops", "fit_stops", "render_frames", "site_html", "spread",
           "widget_site_html"]
