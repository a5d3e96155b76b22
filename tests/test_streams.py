"""Chapter 11 (streams and the host-device link): models, the pipeline, the pitfalls, checkers, figures, data.

Under the simulator the pipeline runs on small awkward sizes (streams and copies exist there but run one
after the other); on a GPU (``LABHELPERS_BACKEND=gpu``) larger sizes are added, events are recorded and
the experiments run small.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numba import cuda

import labhelpers as lh
from labhelpers.exercises import streams as ex
from labhelpers.kernels import streams as ks
from labhelpers.models import streams as model
from markers import SIM, gpu_only, sim_only
from mutants import load_solutions, mutant

SIZES = (1, 2, 7, 33, 100) if SIM else (1, 2, 7, 33, 100, 1023, 100_003, 2**20 + 7)
LAB = "11_streams_lab"
PY = dict(jit=lambda f: f)  # mutants of plain Python functions (no cuda.jit)


def _x(n, seed=0):
    return (np.random.default_rng(seed).random(n) * 4).astype(np.float32)


# --- the link model -------------------------------------------------------------------------------

def test_fit_link_recovers_latency_and_bandwidth():
    sizes = np.array([4 * 4**k for k in range(15)], dtype=float)
    true = model.LinkFit(latency_us=8.0, bandwidth_gbs=52.0)
    ms = true.time_ms(sizes) * (1 + 0.01 * np.sin(np.arange(15)))  # 1% noise
    fit = model.fit_link(sizes, ms)
    assert fit.latency_us == pytest.approx(8.0, rel=0.03)
    assert fit.bandwidth_gbs == pytest.approx(52.0, rel=0.03)
    assert fit.half_bandwidth_bytes() == pytest.approx(8e-6 * 52e9, rel=0.06)


@pytest.mark.parametrize("bad", [([1, 1], [1.0, 2.0]), ([1, 2], [0.0, 1.0]), ([1, 2], [np.nan, 1.0]),
                                 ([1, 2, 3], [1.0, 2.0]), ([1, 2], [2.0, 1.0])])
def test_fit_link_refuses_what_is_not_a_transfer_table(bad):
    with pytest.raises(lh.ArgumentError):
        model.fit_link(*bad)


def test_pcie_bandwidth():
    assert model.pcie_bandwidth_gbs(5, 16) == pytest.approx(63.02, abs=0.01)
    assert model.pcie_bandwidth_gbs(4, 16) == pytest.approx(31.51, abs=0.01)
    assert model.pcie_bandwidth_gbs(3, 8) == pytest.approx(7.88, abs=0.01)
    for bad in ((0, 16), (7, 16), (5, 0), ("5", 16), (5.5, 16)):
        with pytest.raises(lh.ArgumentError):
            model.pcie_bandwidth_gbs(*bad)


# --- chunks and issue order -----------------------------------------------------------------------

@pytest.mark.parametrize("n,k", [(1, 1), (7, 7), (10, 3), (1003, 7), (100, 1), (2**20 + 3, 16)])
def test_chunk_bounds_cover_every_element_once(n, k):
    bounds = model.chunk_bounds(n, k)
    assert len(bounds) == k and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    lengths = [hi - lo for lo, hi in bounds]
    assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 1


@pytest.mark.parametrize("n,k", [(0, 1), (5, 0), (3, 4), (10, 2.5), (None, 2)])
def test_chunk_bounds_refuse_bad_input(n, k):
    with pytest.raises(lh.ArgumentError):
        model.chunk_bounds(n, k)


def test_issue_orders():
    assert model.issue_order(2, "depth-first") == [(0, "H2D"), (0, "kernel"), (0, "D2H"),
                                                   (1, "H2D"), (1, "kernel"), (1, "D2H")]
    assert model.issue_order(2, "breadth-first") == [(0, "H2D"), (1, "H2D"), (0, "kernel"), (1, "kernel"),
                                                     (0, "D2H"), (1, "D2H")]
    with pytest.raises(lh.ArgumentError):
        model.issue_order(2, "sideways")


# --- the pipeline model ---------------------------------------------------------------------------

@pytest.mark.parametrize("h,k,d", [(5, 4, 5), (1, 10, 1), (3, 1, 1), (1, 1, 4), (2, 2, 2), (0.5, 0.1, 0.25)])
@pytest.mark.parametrize("chunks", [1, 2, 5, 16])
def test_model_equals_the_formula_with_two_engines_and_a_stream_per_chunk(h, k, d, chunks):
    for order in model.ORDERS:
        got = model.pipeline_time(h, k, d, chunks, chunks, copy_engines=2, order=order)
        assert got == pytest.approx(model.ideal_time(h, k, d, chunks))
        assert got >= model.lower_bound(h, k, d) - 1e-12


def test_model_one_copy_engine_depth_first_serialises():
    # the lecture's Fermi case: D2H of chunk 0 waits for its kernel and blocks the H2D of chunk 1 behind it
    assert model.pipeline_time(5, 4, 5, 8, 8, copy_engines=1, order="depth-first") == pytest.approx(14.0)
    breadth = model.pipeline_time(5, 4, 5, 8, 8, copy_engines=1, order="breadth-first")
    assert breadth < 14.0 and breadth >= model.lower_bound(5, 4, 5, copy_engines=1)


def test_model_probe_numbers():
    # the H100 probe of the notes: 4.95 / 4.0 / 4.9 ms, 8 chunks on 8 streams -> 6.06 ms
    assert model.pipeline_time(4.95, 4.0, 4.9, 8, 8) == pytest.approx(6.0625)


def test_model_timeline_is_consistent():
    t = model.simulate_pipeline(3, 2, 1, 7, 3, copy_engines=2, overhead_ms=0.01)
    assert len(t) == 21 and list(t["issue"]) == list(range(21))
    assert (t["end_ms"] > t["start_ms"]).all()
    for _, part in t.groupby("stream"):  # a stream runs its operations one after the other, in issue order
        part = part.sort_values("issue")
        assert (part["start_ms"].to_numpy()[1:] >= part["end_ms"].to_numpy()[:-1] - 1e-12).all()
    for _, part in t.groupby("engine"):  # an engine runs one operation at a time
        part = part.sort_values("start_ms")
        assert (part["start_ms"].to_numpy()[1:] >= part["end_ms"].to_numpy()[:-1] - 1e-12).all()


def test_breadth_first_on_fewer_streams_than_chunks_waits_in_stream_order():
    # chunk 0's kernel is queued behind every H2D of its stream
    t = model.simulate_pipeline(1, 1, 1, 4, 2, order="breadth-first").set_index(["chunk", "op"])
    assert t.loc[(0, "kernel"), "start_ms"] >= t.loc[(2, "H2D"), "end_ms"]


def test_condition_and_bottleneck():
    assert model.copies_hidden(1, 2, 1.5) and not model.copies_hidden(1, 2, 1.5, copy_engines=1)
    assert model.bottleneck(5, 4, 4.9) == "H2D" and model.bottleneck(1, 4, 1) == "kernel"
    assert model.bottleneck(2, 3, 2, copy_engines=1) == "copy engine"


def test_speedup_table_and_multi_gpu():
    t = model.speedup_table(5, 4, 5, chunks=(1, 4, 16), streams=(1, 4))
    assert set(t.columns) == {"chunks", "streams", "order", "model_ms", "speedup"}
    assert (t["streams"] <= t["chunks"]).all() and t["speedup"].max() > 2
    one = model.multi_gpu_time(5, 4, 5, gpus=1)
    assert model.multi_gpu_time(5, 4, 5, gpus=2) == pytest.approx(one / 2)
    shared = model.multi_gpu_time(5, 4, 5, gpus=2, shared_link=True)
    assert one / 2 < shared <= one


@pytest.mark.parametrize("kwargs", [dict(chunks=0), dict(streams=0), dict(copy_engines=3), dict(order="random"),
                                    dict(h2d_ms=-1.0), dict(kernel_ms=float("nan")), dict(fractions=[0.5, 0.6])])
def test_model_refuses_bad_input(kwargs):
    args = dict(h2d_ms=1.0, kernel_ms=1.0, d2h_ms=1.0, chunks=2, streams=2)
    args.update(kwargs)
    with pytest.raises(lh.ArgumentError):
        model.simulate_pipeline(**args)


# --- the kernel and the pipeline ------------------------------------------------------------------

def test_fma_chain_reference_and_closed_form_agree():
    x = _x(1000)
    np.testing.assert_allclose(ks.fma_chain_reference(x, 300), ks.fma_chain_closed_form(x, 300), rtol=1e-4)
    np.testing.assert_array_equal(ks.fma_chain_reference(x, 0), x)


@pytest.mark.parametrize("order", model.ORDERS)
def test_pipeline_matches_numpy_for_any_size_and_chunking(order):
    iters = ks.SIM_ITERS if SIM else 100
    for n in SIZES:
        for chunks, streams in ((1, 1), (min(n, 3), 2), (min(n, 7), 3)):
            got = ks.run_pipeline(_x(n, n), chunks, streams, order, iters=iters)
            np.testing.assert_allclose(got, ks.fma_chain_reference(_x(n, n), iters), rtol=ks.tolerance(iters),
                                       err_msg=f"n={n} chunks={chunks} streams={streams} {order}")


def test_pipeline_reuses_its_buffers_across_configurations():
    x = _x(50)
    p = ks.StreamPipeline(50, 1, 1)
    for chunks, streams in ((5, 2), (50, 4), (3, 3)):
        p.configure(chunks, streams)
        np.testing.assert_allclose(p.run(x, "breadth-first"), ks.fma_chain_reference(x, p.iters), rtol=1e-6)
    assert len(p.stream_objects) == 4


def test_reversed_d2h_leaves_the_output_unwritten():
    assert np.isnan(ks.reversed_d2h_pipeline(_x(40), 3, 2)).all()


def test_hidden_syncs_pipeline_is_right_but_its_loop_synchronises():
    x = _x(30)
    np.testing.assert_allclose(ks.pipeline_with_hidden_syncs(x, 3, 2), ks.fma_chain_reference(x, ks.SIM_ITERS),
                               rtol=1e-6)
    problems = ex.loop_problems(ks.pipeline_with_hidden_syncs)
    assert len(problems) == 3 and "synchronize" in problems[-1] and "device_array" in problems[0]


def test_device_synchronize_takes_no_stream():
    with pytest.raises(TypeError):
        cuda.synchronize(cuda.stream())  # the lecture's cudaDeviceSynchronize(stream): stream.synchronize() it is


@pytest.mark.parametrize("bad", [np.ones(5, np.float64), np.ones((2, 2), np.float32), np.array([1, np.nan], np.float32),
                                 np.ones(0, np.float32), [1.0, 2.0], None])
def test_run_pipeline_refuses_bad_input(bad):
    with pytest.raises(lh.ArgumentError):
        ks.run_pipeline(bad, 1, 1)


@pytest.mark.parametrize("kwargs", [dict(chunks=0), dict(chunks=6), dict(streams=0), dict(order="zigzag"),
                                    dict(iters=-1), dict(threads=2048)])
def test_run_pipeline_refuses_bad_settings(kwargs):
    with pytest.raises(lh.ArgumentError):
        ks.run_pipeline(_x(5), **kwargs)


@sim_only
def test_simulator_has_no_events_or_page_locked_memory():
    p = ks.StreamPipeline(10, 2, 2)
    with pytest.raises(lh.GPUOnlyError):
        p.issue(events=True)
    with pytest.raises(lh.GPUOnlyError):
        ks.is_page_locked(cuda.pinned_array(4, dtype=np.float32))
    from labhelpers.experiments import streams as exs

    for fn in (exs.link_table, exs.transfer_table, exs.async_table, exs.pipeline_table, exs.gantt_table,
               exs.managed_table, exs.link_rates_table, lambda: exs.copy_times([("H2D", 0, 0, 4)])):
        with pytest.raises(lh.GPUOnlyError):
            fn()
    with pytest.raises(lh.GPUOnlyError, match="issue_api='numba'"):
        ks.StreamPipeline(10, 2, 2, issue_api="driver")
    with pytest.raises(lh.GPUOnlyError):
        ks.copy_async("H2D", 0, 0, 4, cuda.stream())


@pytest.mark.parametrize("kwargs", [dict(issue_api="cupy"), dict(issue_api=None)])
def test_pipeline_refuses_an_unknown_issue_api(kwargs):
    with pytest.raises(lh.ArgumentError, match="issue_api"):
        ks.StreamPipeline(10, 2, 2, **kwargs)


@pytest.mark.parametrize("copies", [[], None, [("H2D", 0, 0)], [("H2H", 0, 0, 4)], [("D2H", 0, 0, 0)], "H2D"])
def test_copy_times_refuses_bad_copies(copies):
    from labhelpers.experiments import streams as exs

    with pytest.raises(lh.ArgumentError):
        exs.copy_times(copies)


def test_copy_async_refuses_an_unknown_direction_or_size():
    with pytest.raises(lh.ArgumentError, match="direction"):
        ks.copy_async("H2H", 0, 0, 4, None)
    with pytest.raises(lh.ArgumentError, match="nbytes"):
        ks.copy_async("H2D", 0, 0, 0, None)


@gpu_only
def test_gpu_page_locked_and_events():
    from labhelpers.experiments import streams as exs  # the timeline is read there (kernels/ holds nothing that times)

    assert ks.is_page_locked(cuda.pinned_array(16, dtype=np.float32)[3:9])
    assert not ks.is_page_locked(np.ones(16, dtype=np.float32))
    p = ks.StreamPipeline(2**20, 4, 2, iters=64)
    p.h_in[:] = _x(2**20)
    origin = cuda.event()
    origin.record()
    recorded = p.issue("depth-first", events=True)
    p.synchronize()
    t = exs.timeline(recorded, origin)
    assert len(t) == 12 and (t["end_ms"] >= t["start_ms"]).all() and (t["start_ms"] >= 0).all()
    for _, part in t.groupby("stream"):
        part = part.sort_values("issue")
        assert (part["start_ms"].to_numpy()[1:] >= part["end_ms"].to_numpy()[:-1] - 1e-3).all()


@gpu_only
def test_gpu_experiments_run_small():
    from labhelpers.experiments import streams as exs

    link = exs.link_table()
    assert len(link) == 1 and link["async_engines"].iloc[0] >= 1
    # sizes far apart: the fit needs times that grow with the size even when other tests load the GPU
    tr = exs.transfer_table(sizes=(4, 2**20, 2**23), repeat=3)
    fit = exs.fit_table(tr, at_bytes=2**23)
    assert len(fit) == 4 and (fit["bandwidth_gbs"] > 0).all()
    table = exs.pipeline_table(2**20, iters=50, chunks=(1, 4), streams=(1, 2), repeat=2)
    assert (table["wall_ms"] > 0).all() and exs.pipeline_summary(table)["speedup"] > 0
    gantt = exs.gantt_table(2**20, iters=50, chunks=4, streams=(1, 2))
    assert len(gantt) == 2 * 12
    managed = exs.managed_table(sizes=(2**20,), repeat=1)
    assert len(managed) == 4
    rates = exs.link_rates_table(2**20, repeat=2)
    assert list(rates["transfer"]) == ["H2D", "D2H", "H2D + D2H at once"] and (rates["gbps"] > 0).all()
    both = exs.pipeline_table(2**20, iters=50, chunks=(1, 4), streams=(1, 2), repeat=2, pageable=False)
    assert set(both["issue"]) == {"numba", "driver"} and (both["both_ms"] > 0).all()


@gpu_only
@pytest.mark.parametrize("order", ["depth-first", "breadth-first"])
def test_gpu_driver_issue_gives_the_same_result_as_numba(order):
    x = _x(100_003)
    results = []
    for api in ks.ISSUE_APIS:
        p = ks.StreamPipeline(x.size, 7, 3, iters=64, issue_api=api)
        results.append(p.run(x, order))
    assert np.array_equal(results[0], results[1]) and not np.isnan(results[1]).any()


# --- the lab's checkers ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def solutions():
    return load_solutions(LAB)


def test_pinned_checker_rejects_pageable_buffers(solutions):
    pageable = mutant(solutions.make_buffers, ("h_in = cuda.pinned_array(n, dtype=np.float32)",
                                               "h_in = np.empty(n, dtype=np.float32)"), **PY)
    with pytest.raises(lh.CheckFailed, match="pageable|pinned"):
        ex.check_pinned_buffers(pageable)
    same = mutant(solutions.make_buffers, ("h_out = cuda.pinned_array(n, dtype=np.float32)", "h_out = h_in"), **PY)
    with pytest.raises(lh.CheckFailed, match="share memory"):
        ex.check_pinned_buffers(same)


@pytest.mark.parametrize("old,new,message", [
    ("lo, hi = c * n // chunks, (c + 1) * n // chunks", "lo, hi = c * (n // chunks), (c + 1) * (n // chunks)",
     "remainder"),
    ("d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)", "d_out[lo:hi].copy_to_device(h_out[lo:hi], stream=s)",
     "reversed|right way"),
    ("d_in[lo:hi].copy_to_device(h_in[lo:hi], stream=s)", "d_in[lo:hi].copy_to_host(h_in[lo:hi], stream=s)",
     "input h_in changed"),
    ("fma_chain[blocks, THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)",
     "fma_chain[blocks, THREADS, s](d_in[:hi - lo], d_out[lo:hi], A, B, LAB_ITERS)", "same slice|SAME slice"),
    ("blocks = (hi - lo + THREADS - 1) // THREADS", "blocks = (hi - lo) // THREADS", "ceiling division"),
])
def test_pipeline_checker_names_each_bug(solutions, old, new, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_chunked_pipeline(mutant(solutions.chunked_pipeline, (old, new), **PY))


@pytest.mark.parametrize("new,message", [
    ("return h2d_ms + kernel_ms + d2h_ms", "serial time"),
    ("return max(h2d_ms, kernel_ms, d2h_ms)", "slowest stage alone"),
    ("return (h2d_ms + kernel_ms + d2h_ms) / chunks", "overlap perfectly"),
    ("return None", "returned None"),
])
def test_prediction_checker_names_each_bug(solutions, new, message):
    bad = mutant(solutions.predict_ms, ("return slowest + (h2d_ms + kernel_ms + d2h_ms - slowest) / chunks", new),
                 **PY)
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_prediction(bad)


@pytest.mark.parametrize("old,new,message", [
    ("d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)",
     "d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)\ncuda.synchronize()", "synchronize"),
    ("s = pool[c % streams]", "s = pool[c % streams]\nd_tmp = cuda.device_array(hi - lo, dtype=np.float32)",
     "device_array"),
    ("h_out = cuda.pinned_array(n, dtype=np.float32)", "h_out = np.empty(n, dtype=np.float32)", "pageable|pinned"),
])
def test_hidden_sync_checker_finds_each_sync(solutions, old, new, message):
    with pytest.raises(lh.CheckFailed, match=message):
        ex.check_no_hidden_sync(mutant(solutions.fixed_pipeline, (old, new), **PY))


# --- figures --------------------------------------------------------------------------------------

def test_figures_draw_the_reference_data():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labhelpers.experiments import streams as exs
    from labhelpers.figures import streams as f

    tr, link = lh.load_reference("ch11_transfers"), lh.load_reference("ch11_link").table
    pipe, gantt = lh.load_reference("ch11_pipeline").table, lh.load_reference("ch11_gantt").table
    measured = gantt[gantt["streams_used"] == 4]
    comparison = exs.model_comparison(pipe, **exs.model_options(pipe, gantt))
    managed = lh.load_reference("ch11_managed").table
    fig, axes = plt.subplots(3, 3)
    assert f.plot_transfers(tr.table, exs.fit_table(tr.table), ax=axes[0, 0], label=tr.label,
                            link_max_gbs=float(link["link_max_gbs"].iloc[0])) is fig
    f.draw_pipeline(axes[0, 1], 5, 3, 1, 2.0, "breadth-first")
    f.draw_pipeline(axes[0, 2], 1, 8, 2, 12.0, "depth-first")  # more streams than chunks: clipped
    assert f.plot_gantt_pair(measured, model.simulate_pipeline(5, 4, 5, 8, 4), axes=axes[1, :2], label="ref") is fig
    assert f.plot_pipeline_sweep(pipe, axes=axes[2, :2], label="ref") is fig
    assert f.plot_model_vs_measured(comparison, ax=axes[1, 2], label="ref") is fig
    assert f.plot_multi_gpu(5.5, 4.6, 5.2, ax=axes[2, 2]) is fig
    assert all(ax.has_data() or ax.patches for ax in axes.ravel())
    plt.close(fig)
    fig, axes = plt.subplots(1, 3)
    assert f.plot_managed(managed, axes=axes, label="ref") is fig
    assert all(ax.patches for ax in axes)
    plt.close(fig)
    new = [f.plot_transfers(tr.table, label=tr.label), f.plot_gantt_pair(measured, measured, label="ref"),
           f.plot_pipeline_sweep(pipe, label="ref"), f.plot_model_vs_measured(comparison, label="ref"),
           f.plot_multi_gpu(5.5, 4.6, 5.2), f.plot_managed(managed, label="ref"),
           f.plot_launch_chain(4.0, 3.0, 10.0), f.plot_queues(exs.queue_model_table())]
    for fig in new:  # on no axes: a new figure
        assert isinstance(fig, matplotlib.figure.Figure) and all(ax.has_data() or ax.patches for ax in fig.axes)
        plt.close(fig)


# --- what the chapter says about the reference data -----------------------------------------------

@pytest.fixture(scope="module")
def ref():
    from labhelpers.experiments import streams as exs

    tables = {name: lh.load_reference(f"ch11_{name}").table
              for name in ("link", "transfers", "async", "pipeline", "gantt", "managed", "link_rates",
                           "pipeline_kernel_bound")}
    tables["fits"] = exs.fit_table(tables["transfers"]).set_index("transfer")
    return tables


def test_claims_about_the_link(ref):
    link_max = float(ref["link"]["link_max_gbs"].iloc[0])
    fits, tr = ref["fits"], ref["transfers"]
    for d in ("H2D", "D2H"):
        pinned, pageable = fits.loc[f"{d} pinned", "measured_gbps"], fits.loc[f"{d} pageable", "measured_gbps"]
        assert 0.75 <= pinned / link_max <= 1.0, "three quarters or more of the link"
        assert pinned / pageable >= 3, "pageable copies are several times slower"
    for name, part in tr[tr["nbytes"] <= 4096].groupby("transfer"):
        assert part["median_ms"].max() / part["median_ms"].min() < 2, f"{name}: the smallest copies cost about alike"
    assert (fits["half_bandwidth_bytes"].loc[["H2D pinned", "D2H pinned"]] > 2**20).all(), "MiB, not KiB"
    rates = ref["link_rates"].set_index("transfer")["gbps"]
    for d in ("H2D", "D2H"):
        assert abs(rates[d] / link_max - 0.88) < 0.015, "each direction alone: about 88% of the link"
        assert rates[d] >= fits.loc[f"{d} pinned", "measured_gbps"], "a little faster than through Numba"
    both = rates["H2D + D2H at once"] / (rates["H2D"] + rates["D2H"])
    assert round(100 * both) == 91, "both at once: a little under twice one direction (91% of twice)"
    longer = ref["link_rates"].set_index("transfer")["median_ms"]
    for d in ("H2D", "D2H"):
        assert 1.05 <= longer["H2D + D2H at once"] / longer[d] <= 1.15, "each copy about a tenth longer"


def test_claims_about_asynchrony(ref):
    at = ref["async"].set_index("case")
    launch = at[at["experiment"] == "launch"].iloc[0]
    assert launch["returns_ms"] < 0.05 * launch["done_ms"]
    for d in ("H2D", "D2H"):
        pageable, pinned = at.loc[f"{d} pageable, 256 MiB, stream=s"], at.loc[f"{d} pinned, 256 MiB, stream=s"]
        assert pageable["returns_ms"] > 0.9 * pageable["done_ms"]
        assert pinned["returns_ms"] < 0.2 * pinned["done_ms"]
    one = at.loc["one kernel alone (1 block)", "done_ms"]
    assert at.loc["three streams", "done_ms"] < 1.5 * one
    assert at.loc["middle kernel on the legacy default stream", "done_ms"] > 2.5 * one
    assert at.loc["middle kernel on the per-thread default stream", "done_ms"] < 1.5 * one
    errors = at[at["experiment"] == "errors"]["note"].tolist()
    assert "returned normally" in errors[0] and "raised" in errors[1] and "ILLEGAL_ADDRESS" in errors[1]


def test_claims_about_the_pipeline(ref):
    from labhelpers.experiments import streams as exs

    pt = ref["pipeline"]
    pinned = exs.numba_rows(pt)
    driver = pt[(pt["host_memory"] == "pinned") & (pt["issue"] == "driver")]
    summary = exs.pipeline_summary(pt)
    assert summary["speedup"] > 1.5 and summary["ratio"] > 1.15, "streams cut the time; 1.15 is not reached"
    up_to_32 = {name: rows.loc[rows["chunks"] <= 32, "wall_ms"].min() for name, rows in (("numba", pinned),
                                                                                           ("driver", driver))}
    assert abs(up_to_32["driver"] / up_to_32["numba"] - 1) < 0.02, "up to 32 chunks the two APIs' best are level"
    assert summary["best_chunks"] <= 32
    assert driver.loc[driver["chunks"] >= 32, "wall_ms"].min() < 1.02 * summary["best_ms"], "32 or 64: as good as any"
    by_chunks = driver.groupby("chunks")["wall_ms"].min()
    assert by_chunks[32] <= by_chunks[64] <= 1.02 * by_chunks[32], "the driver's 64 chunks: no more than 32, no less"
    both = summary["both_ms"]
    for best in (summary["best_ms"], driver["wall_ms"].min()):
        assert round(best / both, 2) == 1.09, "the best run of either API stays 1.09 x the two copies at once"
    assert round(both / summary["stage_max_ms"], 2) == 1.10, "the two copies at once: 1.10 x the slower alone"
    first = pt.iloc[0]
    fill = (first["h2d_ms"] + first["kernel_ms"]) / 32 / summary["stage_max_ms"]
    assert round(fill, 2) == 0.06, "with 32 chunks, fill and drain: about 6% of the slowest stage"
    best16 = pinned.loc[pinned["chunks"] == 16, "wall_ms"].min()
    assert (pinned.loc[pinned["chunks"] == 64, "wall_ms"] > best16).all(), "64 chunks are slower than 16"
    best32 = pinned.loc[pinned["chunks"] == 32, "wall_ms"].min()
    assert (pinned.loc[pinned["chunks"] == 64, "wall_ms"] > best32).all(), "64 chunks are slower than the best 32"
    for k in (8, 16):  # below the chunk counts where issuing from the host is the limit
        at_k = pinned[pinned["chunks"] == k]
        assert at_k.loc[at_k["streams"] == 2, "wall_ms"].min() > at_k.loc[at_k["streams"] >= 3, "wall_ms"].min()
    same = pinned[(pinned["streams"] == pinned["chunks"]) & (pinned["chunks"].between(2, 8))]
    by_order = same.pivot_table(index="chunks", columns="order", values="wall_ms")
    assert ((by_order["breadth-first"] / by_order["depth-first"] - 1).abs() < 0.15).all(), "the orders perform alike"
    pageable = pt[pt["host_memory"] == "pageable"]["wall_ms"].iloc[0]
    assert pageable > summary["serial_ms"], "pageable buffers destroy the overlap"
    options = exs.model_options(pt, ref["gantt"])
    comparison = exs.model_comparison(pt, **options)
    plain = (comparison["plain_ms"] / comparison["wall_ms"] - 1).abs().median()
    assert comparison["fitted_error"].abs().median() < plain
    assert round(options["duplex_slowdown"], 2) == 1.10, "the copy in takes 1.10 x longer while both directions run"
    depth = comparison[comparison["order"] == "depth-first"]
    assert (depth["plain_ms"] < depth["wall_ms"]).all(), "the plain model undershoots every depth-first run"
    over = depth[(depth["streams"] >= 3) & depth["chunks"].isin([32, 64])]["fitted_error"]
    assert over.between(0.40, 0.60).all(), "with both costs: 40 to 60% over, depth-first, 32 and 64 chunks"
    numba64 = pinned[pinned["chunks"] == 64].groupby("order")["wall_ms"]
    assert numba64.min()["breadth-first"] > numba64.max()["depth-first"], "breadth-first takes far longer"
    best = comparison.loc[comparison["wall_ms"].idxmin()]
    link = {k: model.pipeline_time(first["h2d_ms"], first["kernel_ms"], first["d2h_ms"], k, int(best["streams"]),
                                   order=best["order"], duplex_slowdown=options["duplex_slowdown"],
                                   copy_policy=options["copy_policy"]) for k in (32, 64)}
    assert int(best["chunks"]) == 32 and 1.15 < link[32] / summary["stage_max_ms"] < 1.17, "just above the target"
    assert best["wall_ms"] / link[32] < 1.04, "the best run within 4% of the model with the link's cost"
    assert link[64] < link[32], "halving the fill and drain should gain a little"
    kb_table = ref["pipeline_kernel_bound"]
    kb = exs.pipeline_summary(kb_table)
    first = kb_table.iloc[0]
    assert first["kernel_ms"] > max(first["h2d_ms"], first["d2h_ms"]), "the kernel is the slowest stage"
    assert kb["ratio"] <= 1.15, "the kernel-bound job meets the target"
    assert exs.numba_rows(kb_table)["wall_ms"].min() <= 1.15 * kb["stage_max_ms"], "whichever API issues its copies"
    assert abs(kb["speedup"] / kb["model_speedup"] - 1) < 0.15, "the model's speedup within 15%"


def test_claims_about_unified_memory(ref):
    mt = ref["managed"]
    at = mt[(mt["mib"] == 256) & (mt["status"] == "ok")].set_index("case")
    explicit, faulted = at.loc["explicit copies (pinned)"], at.loc["managed, host first touch"]
    prefetch = at.loc["managed, host first touch, prefetch"]
    assert faulted["kernel_ms"] > 10 * explicit["kernel_ms"]
    assert prefetch["to_gpu_ms"] < faulted["kernel_ms"] / 3, "many times faster than page faults"
    assert prefetch["to_gpu_ms"] > explicit["to_gpu_ms"], "not quite as fast as a pinned copy"
    assert prefetch["to_host_ms"] > 3 * explicit["to_host_ms"], "the way back is far slower"
    assert (at["total_ms"] >= explicit["total_ms"]).all(), "explicit copies are the fastest"


def test_lab_stage_times_are_the_reference_gpus(ref):
    """Lab 11 shows the model "for stage times like the reference GPU's" and says the measurement took longer."""
    import json
    import re
    from pathlib import Path

    lab = json.loads((Path(__file__).resolve().parents[1] / "labs" / f"{LAB}.ipynb").read_text())
    source = "\n".join("".join(c["source"]) for c in lab["cells"])
    h, k, d = (float(v) for v in re.search(r"model\.pipeline_time\(([\d.]+), ([\d.]+), ([\d.]+), chunks=8, "
                                            r"streams=8\)", source).groups())
    first = ref["pipeline"].iloc[0]
    for shown, measured in ((h, "h2d_ms"), (k, "kernel_ms"), (d, "d2h_ms")):
        assert shown == pytest.approx(float(first[measured]), rel=0.03), measured
    pt = ref["pipeline"]
    eight = pt[(pt["host_memory"] == "pinned") & (pt["chunks"] == 8) & (pt["streams"] == 8)]
    assert (eight["wall_ms"] > model.pipeline_time(h, k, d, chunks=8, streams=8)).all(), "took longer"


def test_widget_copy_times_are_the_reference_gpus(ref):
    from labhelpers.figures import streams as f

    first = ref["pipeline"].iloc[0]
    assert f.WIDGET_H2D_MS == pytest.approx(float(first["h2d_ms"]), rel=0.05)
    assert f.WIDGET_D2H_MS == pytest.approx(float(first["d2h_ms"]), rel=0.05)


# --- beyond one GPU -----------------------------------------------------------------------------------

@sim_only
def test_multi_gpu_experiments_say_the_simulator_has_no_gpus():
    from labhelpers.experiments import multi_gpu as mg

    for fn in (mg.multi_gpu_table, mg.peer_copy_table, mg.split_job_table):
        with pytest.raises(lh.GPUOnlyError, match="simulator"):
            fn()
    assert mg.why_not_measured().startswith("the simulator has no GPUs")


@pytest.mark.parametrize("kwargs", [dict(n=1), dict(n=0.5), dict(repeat=0), dict(issue_api="cupy")])
def test_split_job_refuses_bad_settings_on_both_backends(kwargs):
    from labhelpers.experiments import multi_gpu as mg

    with pytest.raises(lh.ArgumentError):
        mg.split_job_table(**kwargs)


@pytest.mark.parametrize("devices", [(0,), (0, 1, 2), "01", (0, -1)])
def test_multi_gpu_experiments_refuse_bad_devices(devices):
    from labhelpers.experiments import multi_gpu as mg

    with pytest.raises(lh.ArgumentError, match="devices"):
        mg.multi_gpu_table(devices)


@gpu_only
def test_multi_gpu_experiments_need_a_second_gpu():
    from labhelpers.experiments import multi_gpu as mg

    if mg.gpu_count() >= 2:
        pytest.skip("this machine has two GPUs")
    with pytest.raises(lh.GPUOnlyError, match="needs two GPUs and this machine has 1"):
        mg.multi_gpu_table()
    assert mg.why_not_measured().startswith("1 GPU here")


@gpu_only
def test_multi_gpu_code_runs_on_one_gpu_twice():
    """devices=(0, 0): the two-GPU code path on one GPU (checks the code, not two GPUs)."""
    from labhelpers.experiments import multi_gpu as mg

    table = mg.multi_gpu_table((0, 0), n=2**20, nbytes=2**20, repeat=2)
    assert table["same_device"].all() and (table["median_ms"] > 0).all()
    assert list(table["experiment"].unique()) == ["peer copy", "split job"]
    split = table[table["experiment"] == "split job"].set_index("case")
    assert split.loc["whole job, one GPU", "speedup"] == 1.0


# --- CUDA graphs: the launch chain ----------------------------------------------------------------

@pytest.mark.parametrize("n,launches,threads", [(1, 1, 32), (33, 5, 32), (129, 3, 128), (100, 7, 64)])
def test_launch_chain_plan_and_issue_match_the_closed_form(n, launches, threads):
    chain = ks.LaunchChain(n, launches, threads)
    plan = chain.plan()
    assert [p.index for p in plan] == list(range(launches))
    assert {(p.kernel, p.blocks, p.threads) for p in plan} == {("fma_chain", -(-n // threads), threads)}
    x = _x(n, seed=n)
    chain.load(x)
    s = cuda.stream()
    chain.issue(s)
    s.synchronize()
    np.testing.assert_allclose(chain.result(), chain.expected(x), rtol=ks.tolerance(launches), atol=1e-6)
    np.testing.assert_allclose(ks.run_chain(x, launches, threads), chain.expected(x), rtol=ks.tolerance(launches),
                               atol=1e-6)


@pytest.mark.parametrize("kwargs", [dict(n=0, launches=1), dict(n=4, launches=0), dict(n=4, launches=2.5),
                                    dict(n=4, launches=1, threads=2048)])
def test_launch_chain_rejects_bad_arguments(kwargs):
    with pytest.raises(lh.ArgumentError):
        ks.LaunchChain(**kwargs)


@sim_only
def test_graph_capture_and_graph_experiments_are_gpu_only():
    from labhelpers.experiments import streams as exs

    with pytest.raises(lh.GPUOnlyError, match="records a CUDA graph"):
        ks.LaunchChain(8, 2).capture(None)
    for fn in (exs.graph_table, exs.events_table, exs.queue_table):
        with pytest.raises(lh.GPUOnlyError):
            fn()


@gpu_only
def test_graph_replays_the_chain():
    cupy = pytest.importorskip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    x = _x(1000)
    chain = ks.LaunchChain(x.size, 20)
    graph = chain.capture(cs)
    chain.load(x)
    cuda.synchronize()
    graph.launch(cs)
    graph.launch(cs)
    cs.synchronize()
    np.testing.assert_allclose(chain.result(), chain.expected(x, times=2), rtol=ks.tolerance(40), atol=1e-6)


@gpu_only
def test_graph_table_runs_small():
    pytest.importorskip("cupy")
    from labhelpers.experiments import streams as exs

    t = exs.graph_table(launches=(10, 30), repeat=2)
    assert list(t["mode"]) == ["op by op", "graph", "op by op", "graph"]
    assert (t[["issue_us_per_op", "gpu_us_per_op", "wall_us_per_op"]] > 0).all().all()
    assert exs.graph_summary(t)["launches"] == 30


def test_launch_chain_model():
    assert model.launch_chain_us(100, 20, 3) == pytest.approx(100 * 20 + 3)  # the host sets the pace
    assert model.launch_chain_us(100, 2, 5) == pytest.approx(2 + 100 * 5)  # the GPU does
    assert model.graph_chain_us(100, 10, 2) == pytest.approx(210)
    with pytest.raises(lh.ArgumentError):
        model.launch_chain_us(0, 1, 1)


# --- events between streams -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 33, 257])
def test_producer_consumer_with_event_wait_is_right(n):
    x = _x(n, seed=3)
    np.testing.assert_allclose(ks.run_producer_consumer(x, 5), ks.fma_chain_closed_form(x, 5),
                               rtol=ks.tolerance(5), atol=1e-6)


@pytest.mark.parametrize("bad", [np.ones(4, np.float64), np.ones((2, 2), np.float32), np.ones(0, np.float32)])
def test_producer_consumer_rejects_bad_input(bad):
    with pytest.raises(lh.ArgumentError):
        ks.run_producer_consumer(bad)


@gpu_only
def test_events_table_shapes():
    from labhelpers.experiments import streams as exs

    t = exs.events_table(trials=2, n=2**16, iters=100, sleep_ms=5).set_index("case")
    assert t.loc["event.query() while the GPU sleeps", "value"] == 0
    assert t.loc["event.query() after it", "value"] == 1
    assert t.filter(like="with event.wait", axis=0)["value"].iloc[0] == 0


# --- hardware queues -----------------------------------------------------------------------------

@pytest.mark.parametrize("streams,connections,expected", [(1, 8, 1), (8, 8, 8), (9, 8, 6), (16, 8, 16 * 2 / 3),
                                                         (32, 32, 32), (4, 1, 4 * 2 / 5)])
def test_queue_model_false_dependencies(streams, connections, expected):
    # depth-first, 2 kernels per stream: a queue of m streams takes m + 1 kernel times
    assert model.queue_concurrency(streams, 2, connections) == pytest.approx(expected)


def test_queue_model_breadth_first_and_one_kernel_per_stream_have_no_false_dependency():
    for s in (1, 9, 16, 32):
        assert model.queue_concurrency(s, 2, 8, order="breadth-first") == pytest.approx(s)
        assert model.queue_concurrency(s, 1, 8) == pytest.approx(s)
    assert model.queue_time(9, 2, 10.0, 8) == pytest.approx(30.0)
    with pytest.raises(lh.ArgumentError):
        model.queue_time(4, 2, 1.0, connections=33)


def test_queue_model_table_matches_the_model():
    from labhelpers.experiments import streams as exs

    t = exs.queue_model_table()
    assert set(t["connections"]) == set(exs.QUEUE_CONNECTIONS)
    row = t[(t["connections"] == 8) & (t["streams"] == 16) & (t["order"] == "depth-first")].iloc[0]
    assert row["model_concurrency"] == pytest.approx(model.queue_concurrency(16, 2, 8))


@pytest.mark.judges_no_timing
@gpu_only
def test_queue_table_runs_small():
    from labhelpers.experiments import streams as exs

    t = exs.queue_table(connections=(8,), streams=(1, 9), kernel_ms=2.0, repeat=1)
    assert set(t["order"]) == {"depth-first", "breadth-first"}
    assert (t["concurrency"] > 0).all()


# --- graphs, events, queues and two GPUs: the figures chapter 11 quotes (drift check) --------------------

def _prose() -> str:
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).resolve().parents[1] / "book" / "11_streams.ipynb").read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def _range(lo: str, hi: str) -> str:
    return lo if lo == hi else f"{lo} to {hi}"


def test_prose_quotes_the_graph_table():
    g = lh.load_reference("ch11_graphs").table
    one, graph = g[g["mode"] == "op by op"].set_index("launches"), g[g["mode"] == "graph"].set_index("launches")
    longest, shortest = int(g["launches"].max()), int(g["launches"].min())
    assert (graph["gpu_us_per_op"].max() < one["gpu_us_per_op"].min()), "the graph shortens the GPU's time too"

    def pays_by(launches: int) -> int:  # the first run count at which capture + replays beat issuing one by one
        o, q = one.loc[launches], graph.loc[launches]
        k = 1
        while q["capture_ms"] + k * q["wall_us_per_op"] * launches / 1e3 >= k * o["wall_us_per_op"] * launches / 1e3:
            k += 1
        return k

    ordinal = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}
    issue_ms = {n: one.loc[n, "issue_us_per_op"] * n / 1e3 for n in (shortest, longest)}
    phrases = [
        f"every kernel cost the host {_range(f'{one.issue_us_per_op.min():.0f}', f'{one.issue_us_per_op.max():.0f}')} us",
        f"{one.wall_us_per_op.min():.1f} to {one.wall_us_per_op.max():.1f} us of wall time per kernel",
        f"for kernels that need about {one.gpu_us_per_op.mean():.0f} us",
        f"One `graph.launch` of {longest} kernels cost the host "
        f"{graph.loc[longest, 'issue_us_per_op'] * longest:.1f} us in all",
        f"the chain then took {graph.loc[longest, 'wall_us_per_op']:.2f} us per kernel, "
        f"{one.loc[longest, 'wall_us_per_op'] / graph.loc[longest, 'wall_us_per_op']:.0f} times less",
        f"a kernel took {one.gpu_us_per_op.min():.2f} to {one.gpu_us_per_op.max():.2f} us of GPU time when issued "
        f"one by one and {graph.gpu_us_per_op.min():.2f} to {graph.gpu_us_per_op.max():.2f} us in a graph",
        f"{graph.loc[shortest, 'capture_ms']:.2f} ms for {shortest} kernels, "
        f"{graph.loc[shortest, 'capture_ms'] / issue_ms[shortest]:.1f} times the host's {issue_ms[shortest]:.2f} ms",
        f"pays for itself by its {ordinal[pays_by(shortest)]} run. For {longest} kernels",
        f"the capture took {graph.loc[longest, 'capture_ms']:.2f} ms, about as much as issuing them once "
        f"({issue_ms[longest]:.2f} ms): the graph pays for itself by its {ordinal[pays_by(longest)]} run",
    ]
    assert abs(graph.loc[longest, "capture_ms"] / issue_ms[longest] - 1) < 0.1, "about as much as issuing them once"
    missing = _missing(_prose(), phrases)
    assert not missing, "chapter 11 no longer matches ch11_graphs:\n" + "\n".join(missing)


def test_prose_quotes_the_events_and_queue_tables():
    e = lh.load_reference("ch11_events").table.set_index("case")["value"]
    q = lh.load_reference("ch11_queues").table
    asked = 20.0
    assert e[f"sleep on s1 ({asked:g} ms asked)"] == asked
    assert e["event.query() while the GPU sleeps"] == 0 and e["event.query() after it"] == 1
    slept = e["s2's next event waited for s1's sleep"]
    kernel_ms = q["kernel_ms"].median()
    queue_asked = 10.0  # queue_table's kernel_ms, in the table's notes ("about 10 ms")
    assert abs(slept / asked - kernel_ms / queue_asked) < 0.02, "the same factor in both measurements"
    assert slept / asked >= q["kernel_ms"].min() / queue_asked - 0.01, "the event's factor within the queue's range"
    from labhelpers import timing_kernels

    at = q.set_index(["connections", "order", "streams"])["concurrency"]
    err = (q["concurrency"] / q["model_concurrency"] - 1).abs().max()
    ones = q[q["connections"] == 1]["concurrency"]
    phrases = [
        f"the consumer without the wait copied unfinished data in {e['consumer without event.wait: wrong runs of 20']:.0f} "
        "of 20 runs, and with the wait in none",
        f"`query()` answered \"not yet\" in {e['event.query() call']:.1f} us",
        f"`wait(stream=s2)` returned in {e['event.wait(stream=s2) call']:.1f} us",
        f"held the next event of `s2` back for {slept:.1f} ms",
        f"That sleep was asked for {asked:g} ms and lasted {slept / asked:.2f} times as long",
        f"calls `cuda.nanosleep` with {timing_kernels.SLEEP_STEP_NS // 1000} us per call",
        f"each call lasted about {timing_kernels.SLEEP_STEP_NS / 1000 * slept / asked:.0f} us",
        f"On the reference GPU each slept {_range(f'{q.kernel_ms.min():.1f}', f'{q.kernel_ms.max():.1f}')} ms alone, "
        f"{_range(f'{q.kernel_ms.min() / queue_asked:.2f}', f'{q.kernel_ms.max() / queue_asked:.2f}')} times the request",
        f"every measured point lies within {np.ceil(100 * err):.0f}% of it",
        f"8 streams ran {at[(8, 'depth-first', 8)]:.2f} kernels at once and 9 streams only "
        f"{at[(8, 'depth-first', 9)]:.2f} (the model: {model.queue_concurrency(9, 2, 8):.0f})",
        f"issued breadth-first, 9 streams ran {at[(8, 'breadth-first', 9)]:.2f}",
        f"32 streams ran {at[(32, 'depth-first', 32)]:.1f} kernels at once (the model: 32)",
        f"with one connection never more than {ones.max():.2f}",
    ]
    assert e["consumer with event.wait: wrong runs of 20"] == 0
    missing = _missing(_prose(), phrases)
    assert not missing, "chapter 11 no longer matches ch11_events / ch11_queues:\n" + "\n".join(missing)
    text = _prose()
    for stale in ("not been profiled", "nothing in this section was measured", "about 10 ms"):
        assert stale not in text, stale


#: The two-GPU run chapter 11 quotes as a one-off observation (2 x H200 joined by NVLink, November 2026;
#: /work/shared/GPU-NOTES.md, the run chapter 14 cites): not reference data, so the figures live here.
TWO_GPU_ONE_OFF = {"peer_each_way_gbs": 393, "peer_both_ways_gbs": 768, "whole_ms": 6.01, "halves_ms": (3.07, 3.14),
                   "both_halves_ms": 4.84}


def test_prose_marks_the_two_gpu_figures_as_one_off():
    r = TWO_GPU_ONE_OFF
    phrases = [
        "ran once on two H200s joined by NVLink, in November 2026, outside the reference run",
        "a one-off observation, not reference data",
        f"The peer copy reached {r['peer_each_way_gbs']} GB/s each way and {r['peer_both_ways_gbs']} GB/s both ways",
        f"took {r['whole_ms']:.2f} ms whole on one GPU, and each half alone {r['halves_ms'][0]:.2f} and "
        f"{r['halves_ms'][1]:.2f} ms",
        f"took {r['both_halves_ms']:.2f} ms: {r['whole_ms'] / r['both_halves_ms']:.2f} times faster than one GPU",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "\n".join(missing)


# --- lab 11, exercise 6: predict the hardware queues ---------------------------------------------------------

def test_queue_prediction_checker_accepts_the_solution_and_names_each_bug(solutions):
    ex.check_kernels_at_once(solutions.kernels_at_once)
    right = "return kernels / (busiest + 1)"
    for new, message in (("return streams", "breadth-first issue or enough queues"),
                         ("return kernels / (2 * busiest)", "not 2m"),
                         ("return kernels / busiest", "m \\+ 1 kernel times"),
                         ("return kernels / (streams / connections + 1)", "fractions"),
                         ("return None", "returned None")):
        bad = mutant(solutions.kernels_at_once, (right, new), **PY)
        with pytest.raises(lh.CheckFailed, match=message):
            ex.check_kernels_at_once(bad)


def test_queue_prediction_is_shown_beside_the_reference_run(solutions):
    shown = ex.show_kernels_at_once(solutions.kernels_at_once)
    assert (shown["your prediction"] - shown["measured"]).abs().max().max() < 1.2  # at most 1.16 off (32 streams, 32 connections)


# --- what the host waited for (streamrecord.Recording.unwaited) ----------------------------------------------------

def _two_stream_copies(wait):
    """Copies on two streams, then ``wait(s1, s2)``; the calls left unwaited at the end, by the stream's number."""
    from labhelpers import streamrecord

    h = cuda.pinned_array(8, dtype=np.float32)
    d = cuda.device_array(8, dtype=np.float32)
    with streamrecord.record() as rec:
        s1, s2 = cuda.stream(), cuda.stream()
        d[:4].copy_to_device(h[:4], stream=s1)
        d[4:].copy_to_device(h[4:], stream=s2)
        wait(s1, s2)
    names = {id(s1): 1, id(s2): 2}
    return sorted(names[id(c.stream)] for c in rec.unwaited())


def _event_on(s):
    e = cuda.event()
    e.record(s)
    return e


WAIT_CASES = {
    "nothing": (lambda s1, s2: None, [1, 2]),
    "one stream": (lambda s1, s2: s1.synchronize(), [2]),
    "both streams": (lambda s1, s2: (s1.synchronize(), s2.synchronize()), []),
    "the device": (lambda s1, s2: cuda.synchronize(), []),
    "an event of each": (lambda s1, s2: (_event_on(s1).synchronize(), _event_on(s2).synchronize()), []),
    "s1 waits for s2's event, the host for s1": (lambda s1, s2: (_event_on(s2).wait(s1), s1.synchronize()), []),
    "s2 waits for s1's event, the host for s1": (lambda s1, s2: (_event_on(s1).wait(s2), s1.synchronize()), [2]),
    "an event on the legacy default stream": (lambda s1, s2: _event_on(0).synchronize(), []),
}


@pytest.mark.parametrize("case", list(WAIT_CASES))
def test_recording_knows_which_streams_the_host_waited_for(case):
    """The same on both backends: the recording's order, not the simulator's streams (which finish at once)."""
    wait, unwaited = WAIT_CASES[case]
    assert _two_stream_copies(wait) == unwaited


def test_an_event_recorded_before_the_last_copy_does_not_cover_it():
    from labhelpers import streamrecord

    h = cuda.pinned_array(8, dtype=np.float32)
    d = cuda.device_array(8, dtype=np.float32)
    with streamrecord.record() as rec:
        s = cuda.stream()
        d[:4].copy_to_device(h[:4], stream=s)
        e = _event_on(s)
        d[4:].copy_to_device(h[4:], stream=s)
        e.synchronize()
    assert [c.api for c in rec.unwaited()] == ["copy_to_device"] and rec.unwaited()[0].site.text.startswith("d[4:]")
    with streamrecord.record() as rec:
        s = cuda.stream()
        with s.auto_synchronize():
            d.copy_to_device(h, stream=s)
    assert rec.unwaited() == []
