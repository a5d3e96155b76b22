"""The website version of a widget: stops, the frame cap, the HTML, the display bundle, the live-only note."""

import json
import re

import ipywidgets as widgets
import pytest

import labhelpers as lh
from labhelpers import site_frames as sf
from labhelpers.widgets import make_control

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def _stops(**controls):
    return [sf.control_stops(name, make_control(name, spec)) for name, spec in controls.items()]


def test_slider_stops_are_spread_snapped_and_keep_start_and_ends():
    (s,) = _stops(n=(1, 4096, 1, 257))
    assert len(s) <= sf.MAX_SLIDER_STOPS
    assert s.values[0] == 1 and s.values[-1] == 4096 and s.values[s.start] == 257
    assert list(s.values) == sorted(set(s.values))
    (f,) = _stops(s=(0.0, 0.5, 0.005, 0.1))
    assert f.values[0] == 0.0 and f.values[-1] == 0.5 and f.values[f.start] == 0.1
    assert all(abs(v / 0.005 - round(v / 0.005)) < 1e-9 for v in f.values)  # on the step
    assert f.labels[f.start] == "0.1"
    (small,) = _stops(k=(0, 2, 1, 1))
    assert small.values == (0, 1, 2) and small.start == 1


def test_dropdown_and_widget_controls():
    (d,) = _stops(kind=["a", "b", "c"])
    assert d.values == ("a", "b", "c") and d.kind == "select" and d.start == 0
    menu = widgets.Dropdown(options=[32, 64, 128], value=64)
    assert sf.control_stops("threads", menu).start == 1
    sel = widgets.SelectionSlider(options=[32, 64, 128, 256], value=256)
    s = sf.control_stops("threads", sel)
    assert s.kind == "range" and s.values[s.start] == 256
    multi = widgets.SelectMultiple(options=["x", "y"], value=("x", "y"))
    m = sf.control_stops("kernels", multi)
    assert m.values == (("x", "y"), ("x",), ("y",)) and m.labels[0] == "all"
    box = sf.control_stops("datasheet", widgets.Checkbox(value=True))
    assert box.values == (True, False)


def test_stops_do_not_depend_on_the_backend_or_data():
    a = _stops(n=(1, 300, 1, 100), local_size=[8, 16, 32, 64, 128], item=(0, 319, 1, 70))
    b = _stops(n=(1, 300, 1, 100), local_size=[8, 16, 32, 64, 128], item=(0, 319, 1, 70))
    assert a == b


def test_product_is_capped_and_every_control_keeps_two_stops():
    stops = sf.fit_stops(_stops(chunks=(1, 32, 1, 8), streams=(1, 8, 1, 4), engines=[2, 1],
                                kernel_ms=(0.5, 12.0, 0.5, 4.5), order=["a", "b"]))
    sizes = [len(s) for s in stops]
    assert 1 < min(sizes) and sf.math.prod(sizes) <= sf.MAX_FRAMES
    for s in stops:
        assert s.values[s.start] in {"a", 2, 8, 4, 4.5}
    three = sf.fit_stops(_stops(a=(0, 100, 1, 50), b=(0, 100, 1, 0), c=["x", "y"]))
    assert sf.math.prod(len(s) for s in three) <= sf.MAX_FRAMES
    assert [len(s) for s in three][2] == 2  # sliders are thinned before dropdowns


def test_thinned_sliders_keep_their_start_and_ends():
    # Chapter 4's scheduler: thinning three times over must not lose n_warps' maximum (8 warps).
    stops = sf.fit_stops(_stops(n_warps=(1, 8, 1, 3), burst=(1, 60, 1, 20), stall=(0, 300, 10, 50),
                                policy=["greedy", "round-robin"]))
    assert sf.math.prod(len(s) for s in stops) <= sf.MAX_FRAMES
    for s, (lo, hi, start) in zip(stops, [(1, 8, 3), (1, 60, 20), (0, 300, 50)]):
        assert s.values[s.start] == start and hi in s.values
        assert len(s) == 2 or lo in s.values
    assert stops[0].values == (1, 3, 8)  # the first control is thinned last
    (two,) = sf.fit_stops(_stops(k=(0, 4, 1, 2)), max_frames=2)
    assert two.values == (2, 4)  # a tie between the ends keeps the larger


def test_spread():
    assert sf.spread(5, 10, 2) == [0, 1, 2, 3, 4]
    picked = sf.spread(100, 4, 57)
    assert 0 in picked and 99 in picked and 57 in picked and len(picked) == 4
    assert sf.spread(100, 1, 57) == [57]


def _draw(ax, n, kind):
    ax.plot([0, n], [0, 1 if kind == "up" else -1])
    ax.set_title(f"n = {n}", fontsize=9)


def test_html_has_controls_frames_metadata_and_note():
    w = lh.interactive_figure(_draw, figsize=(5, 3), n=(1, 8, 1, 2), kind=["up", "down"])
    page = w.site_html
    assert page.startswith('<div class="lh-widget"')
    assert 'type="range"' in page and "<select" in page
    frames = json.loads(re.search(r'class="lh-frames">([^<]*)</script>', page).group(1))
    assert len(frames["index"]) == 16 and set(frames["index"]) >= {"1-0", "7-1"}  # 8 stops x 2 options
    assert len(frames["images"]) == len(set(frames["images"]))  # each distinct picture once
    assert re.search(r'data-min-font-pt="9" data-dpi="100" data-width-px="500"', page)
    assert sf.NOTE in page and "data-needs-gpu" not in page
    assert f'src="data:image/png;base64,{frames["images"][frames["index"]["1-0"]]}"' in page  # start frame shown


def test_mimebundle_holds_the_widget_and_the_html():
    w = lh.interactive_figure(_draw, n=(1, 3, 1), kind=["up"])
    bundle = w._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
    assert "text/plain" in bundle and bundle["text/html"] == w.site_html


def test_live_only_draw_says_it_needs_a_gpu():
    w = lh.interactive_figure(_draw, needs_gpu=True, n=(1, 3, 1), kind=["up", "down"])
    assert "data-needs-gpu" in w.site_html and "needs a GPU" in w.site_html
    assert "colab.research.google.com" in w.site_html


def test_no_site_version_in_colab(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "google.colab", object())
    w = lh.interactive_figure(_draw, n=(1, 3, 1), kind=["up"])
    assert w.site_html == "" and "text/html" not in w._repr_mimebundle_()


def test_frame_is_a_small_palette_png():
    from PIL import Image
    import base64
    import io

    w = lh.interactive_figure(_draw, figsize=(10, 3), n=(1, 2, 1), kind=["up"])
    data = json.loads(re.search(r'class="lh-frames">([^<]*)</script>', w.site_html).group(1))["images"][0]
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert image.mode == "P" and image.width == sf.FRAME_WIDTH_PX


@pytest.mark.parametrize("bad", ["x", (1, 2)])
def test_bad_control_is_refused(bad):
    with pytest.raises(ValueError):
        lh.interactive_figure(_draw, n=bad, kind=["up"])


def test_inline_png_records_the_smallest_drawn_font():
    import base64
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from labhelpers import notebook, plotting

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([0, 1], [0, 1])
    ax.set_title("title", fontsize=12)
    ax.text(0.5, 0.5, "small", fontsize=6.5)
    ax.text(0.5, 0.2, "hidden", fontsize=3, visible=False)
    off = fig.add_axes([0.8, 0.8, 0.1, 0.1])
    off.tick_params(labelsize=2)
    off.axis("off")  # tick labels of an axes turned off are not drawn
    png = Image.open(io.BytesIO(base64.b64decode(notebook._png_with_font_sizes(fig))))
    plt.close(fig)
    assert png.text[plotting.PNG_FONT_KEY] == "6.5" and png.text[plotting.PNG_DPI_KEY] == "100"
