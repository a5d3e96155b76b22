"""Chapter 7's stopwatch (``*/roofline_stopwatch.py``): the copy kernel, the four-clock table's helpers and its figure
(on a synthetic table of the reference's columns: ``ch07_stopwatch`` is collected on a GPU). The GPU's side is in
tests/test_timing_gpu.py; the timer's own kernels (``timing_kernels.py``) in tests/test_core_timing_sweep.py."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from labhelpers import profiler, roofline
from labhelpers.experiments import roofline_stopwatch as sx
from labhelpers.figures import roofline_stopwatch as sfig
from labhelpers.kernels import roofline_stopwatch as sw
from markers import sim_only


@pytest.mark.parametrize("n", [1, 31, 257, 1000])
def test_copy_kernel_copies_every_element(n):
    x = np.arange(n, dtype=np.float32) + 0.5
    out = lh.to_device(np.zeros(n, dtype=np.float32))
    sw.copy[(n + 63) // 64, 64](lh.to_device(x), out)
    np.testing.assert_array_equal(lh.to_host(out), x)


def test_byte_count():
    assert sw.copy_bytes(2**20) == 8 * 2**20


def test_ncu_durations_in_milliseconds():
    assert sx.duration_ms(53_120, "nsecond") == pytest.approx(0.05312)
    assert sx.duration_ms(53.12, "usecond") == pytest.approx(0.05312)
    assert sx.duration_ms(53_120, "") == pytest.approx(0.05312)
    with pytest.raises(ValueError, match="not a unit of time"):
        sx.duration_ms(1.0, "byte")


def test_sweep_refuses_bad_sizes_on_both_backends():
    with pytest.raises(lh.ArgumentError, match="size"):
        sx.stopwatch_sweep([0])
    with pytest.raises(lh.ArgumentError, match="threads"):
        sx.stopwatch_sweep([1024], threads=2048)


@sim_only
def test_sweep_and_profiler_need_a_gpu():
    with pytest.raises(lh.GPUOnlyError, match="no GPU"):
        sx.stopwatch_sweep([1024])
    with pytest.raises(profiler.ProfilerUnavailable, match="no GPU"):
        sx.profiler_times_ms([1024])


def test_ncu_command_profiles_every_launch_with_the_clocks_left_alone():
    from pathlib import Path

    cmd = profiler.ncu_command(Path("t.py"), "copy", ["gpu__time_duration.sum"], ncu="ncu", options=set(),
                               launch_count=21, extra=("--clock-control", "none"))
    assert cmd[cmd.index("--launch-count") + 1] == "21"
    assert cmd[cmd.index("--clock-control") + 1] == "none" and cmd[-1] == "t.py"


def synthetic_table(profiled: bool = True) -> pd.DataFrame:
    """A table shaped like ch07_stopwatch: a 50 µs-per-2^24 copy, 30 µs of launch, 10 µs of synchronisation."""
    rows = []
    for n in sx.STOPWATCH_SIZES:
        kernel_ms = 0.005 + 0.05 * n / 2**24
        for clock, ms in ((sx.HOST_CLOCK, kernel_ms + 0.04), (sx.PYTHON_EVENTS, kernel_ms + 0.03),
                          (sx.HELD_EVENTS, kernel_ms), (sx.PROFILER, kernel_ms * 0.99)):
            ok = profiled or clock != sx.PROFILER
            rows.append({"n": n, "bytes": 8 * n, "clock": clock, "median_ms": ms if ok else math.nan,
                         "min_ms": ms if ok else math.nan, "spread": 0.01 if ok else math.nan,
                         "gbps": 8 * n / (ms * 1e-3) / 1e9 if ok else math.nan,
                         "issue_ms": 0.026 if clock in (sx.PYTHON_EVENTS, sx.HELD_EVENTS) else math.nan,
                         "status": "ok" if ok else "unavailable", "reason": "" if ok else "no ncu"})
    return pd.DataFrame(rows, columns=list(sx.COLUMNS))


def test_summary_puts_the_clocks_side_by_side():
    summary = sx.stopwatch_summary(synthetic_table())
    assert list(summary["n"]) == list(sx.STOPWATCH_SIZES)
    row = summary.set_index("n").loc[2**24]
    assert row[f"{sx.HELD_EVENTS} (µs)"] == pytest.approx(55.0)
    assert row[f"{sx.PYTHON_EVENTS} (µs)"] == pytest.approx(85.0)
    assert row["issue (µs)"] == pytest.approx(26.0) and row["MiB copied"] == 128
    assert row["Python events / held"] == pytest.approx(85 / 55)
    no_ncu = sx.stopwatch_summary(synthetic_table(profiled=False))
    assert no_ncu[f"{sx.PROFILER} (µs)"].isna().all()


def _lines(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_figure_draws_every_clock_and_its_ratio_to_the_held_clock():
    fig = sfig.plot_stopwatch(synthetic_table(), label="reference: Test GPU (2026-01-01)")
    left, right = fig.axes
    assert _lines(left) == list(sx.CLOCKS) and left.get_yscale() == "log"
    assert "Test GPU" in left.get_title()
    held = [line for line in right.get_lines() if line.get_label() == sx.HELD_EVENTS][0]
    np.testing.assert_allclose(held.get_ydata(), 1.0)
    python = [line for line in right.get_lines() if line.get_label() == sx.PYTHON_EVENTS][0]
    assert python.get_ydata()[0] > 5 > python.get_ydata()[-1] > 1  # the launch dwarfs small copies only
    plt.close(fig)


def test_figure_leaves_out_a_clock_without_numbers_and_says_when_nothing_was_measured():
    fig = sfig.plot_stopwatch(synthetic_table(profiled=False), label="x")
    assert sx.PROFILER not in _lines(fig.axes[0])
    plt.close(fig)
    empty = synthetic_table().assign(status="unavailable")
    fig = sfig.plot_stopwatch(empty, label="x")
    assert any(t.get_text() == sfig.NOT_MEASURED for t in fig.axes[0].texts)
    plt.close(fig)


# --- drift check: chapter 7's stopwatch section quotes the reference data ------------------------------------


def _chapter7_text() -> str:
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "07_profiling_roofline.ipynb").read_text())
    return " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").split())


def test_chapter7_stopwatch_prose_quotes_the_reference_data():
    ref = lh.load_reference("ch07_stopwatch")
    s = sx.stopwatch_summary(ref.table).set_index("n")
    host, py, held, ncu = (s[f"{clock} (µs)"] for clock in sx.CLOCKS)
    issue = s["issue (µs)"]
    c = roofline.reference_ceilings()
    report = lh.load_reference("ch07_ncu_report").table.set_index("metric")["value"]
    left_in_l2_mb = (report["dram__bytes_read.sum"] - report["dram__bytes_write.sum"]) / 1e6
    small, large = s.index[s.index <= 2**22], s.index[s.index >= 2**24]
    lo, hi, big = 2**16, 2**28, 2**24
    # the claims behind the sentences, then the figures they quote
    assert 8 * small.max() < c.details["l2_bytes"] < 8 * large.min(), "the text: up to 2^22 the copy fits in the L2"
    assert (held[small] < ncu[small]).all() and (held[large] > ncu[large]).all()
    assert (issue[small] * 1e-3 > held[small] * 1e-3).all() and (issue[large] < held[large]).all(), (
        "the text: up to 2^22 issuing a launch takes longer than running it")
    assert (py[small] > host[small]).all(), "the text: the Python-launch events read more than the host clock"
    assert held[lo] < (held - ncu)[large].min(), "the text: the gap (at most the 2^16 copy) is not all of it"
    figures = [
        f"the held clock reads {held[lo]:.1f} µs per copy and Nsight Compute {ncu[lo]:.1f} µs",
        f"the host clock reads {host[lo]:.1f} µs and the events around a Python launch {py[lo]:.1f} µs, "
        f"{py[lo] / held[lo]:.0f} times the held clock",
        f"costs the host {issue[issue.index <= big].min():.0f} to {issue[issue.index <= big].max():.0f} µs up to "
        f"$2^{{24}}$ floats ({issue[issue.index > big].min():.0f} to {issue[issue.index > big].max():.0f} µs at the "
        "two largest sizes",
        f"up to $2^{{22}}$ floats ({held[small.max()]:.1f} µs of GPU time)",
        f"the four read {host[hi]:.1f}, {py[hi]:.1f}, {held[hi]:.1f} and {ncu[hi]:.1f} µs: the Python launch adds "
        f"{py[hi] / held[hi] - 1:.0%} to the held clock",
        f"fits in the {c.details['l2_bytes'] / 2**20:.0f} MiB L2",
        f"reads {(ncu - held)[small].min():.1f} to {(ncu - held)[small].max():.1f} µs *less* than Nsight Compute",
        f"it reads {(held - ncu)[large].min():.1f} to {(held - ncu)[large].max():.1f} µs *more*: {held[big]:.1f} "
        f"against {ncu[big]:.1f} µs at $2^{{24}}$, {held[big] / ncu[big] - 1:.0%}",
        f"at most {held[lo]:.1f} µs, since the whole $2^{{16}}$ copy",
        f"ending with {left_in_l2_mb:.0f} MB of its output still in the L2, about "
        f"{left_in_l2_mb * 1e6 / (c.dram_gbs * 1e9) * 1e6:.0f} µs of traffic at the copy ceiling's rate",
        f"For a $2^{{24}}$ copy they read {host[big]:.1f}, {py[big]:.1f}, {held[big]:.1f} and {ncu[big]:.1f} µs",
    ]
    text = _chapter7_text()
    missing = [f for f in figures if f not in text]
    assert not missing, "chapter 7's stopwatch section no longer matches ch07_stopwatch:\n" + "\n".join(missing)
