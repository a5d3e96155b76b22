"""Chapter 14: the split Jacobi step and its halo exchange, the collective and scaling models, validation, and the
multi-GPU measurements (skipped without a GPU, or with fewer GPUs than they need)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.experiments import multi_gpu as mg
from labhelpers.figures import multi_gpu as fig14
from labhelpers.kernels import multi_gpu as km
from labhelpers.kernels import nbody as kn
from labhelpers.kernels import stencil as ks
from labhelpers.models import multi_gpu as model
from markers import gpu_only
from pathlib import Path
import json

TWO_GPUS = pytest.mark.skipif(lh.is_simulator() or km.gpu_count() < 2, reason="needs two GPUs")


# ------------------------------------------------------------------------------------------------ the split

@pytest.mark.parametrize("shape, devices, rows, overlap", [
    ((13, 17), (0, 0, 0), None, True),
    ((13, 17), (0, 0, 0), (1, 11, 1), False),
    ((9, 6), (0, 0, 0, 0), (2, 3, 1, 3), True),
    ((4, 33), (0, 0, 0, 0), None, False),
    ((7, 5), (0,), None, True),
    ((3, 3), (0, 0, 0), None, True),
])
def test_split_jacobi_equals_one_gpu_for_any_split(shape, devices, rows, overlap):
    u = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    got = km.run_split_jacobi(u, 4, devices, rows=rows, overlap=overlap)
    assert np.array_equal(got, ks.jacobi_reference(u, 4))


def test_split_helpers():
    assert km.split_rows(10, 3) == [(0, 3), (3, 3), (6, 4)]
    assert km.split_rows(5, (1, 4)) == [(0, 1), (1, 4)]
    assert km.halo_plan([2, 3]) == [km.Halo(0, 2, 1, 0), km.Halo(1, 1, 0, 3)]
    assert km.halo_plan([5]) == []
    u = np.arange(30, dtype=np.float32).reshape(6, 5)
    slabs = km.split_field(u, km.split_rows(6, 3))
    assert np.array_equal(km.join_slabs(slabs), u)
    assert np.array_equal(slabs[1][0], u[1]) and np.array_equal(slabs[1][-1], u[4])
    mangled = [s.copy() for s in slabs]
    for s in mangled:
        s[0] = s[-1] = -1
    km.exchange_halos_numpy(mangled)
    assert np.array_equal(mangled[1], slabs[1]) and mangled[0][0][0] == -1 and mangled[-1][-1][0] == -1


def test_split_nbody_equals_chapter_8():
    pos = kn.random_bodies(19, np.random.default_rng(3))
    acc = km.split_nbody_accelerations(pos, (0, 0, 0))
    assert kn.acceleration_error(acc, pos) < kn.ACC_RTOL


def test_bad_input_says_what_to_change():
    u = np.ones((6, 5), np.float32)
    with pytest.raises(lh.ArgumentError, match=r"asks for GPU 9, which does not exist.*repeat"):
        km.SplitJacobi(u, (0, 9))
    with pytest.raises(lh.ArgumentError, match="at least one row"):
        km.split_rows(3, 4)
    with pytest.raises(lh.ArgumentError, match="add up to 4, but the grid has 6 rows"):
        km.SplitJacobi(u, (0, 0), rows=(2, 2))
    with pytest.raises(lh.ArgumentError, match="one row count per GPU"):
        km.SplitJacobi(u, (0, 0), rows=(6,))
    with pytest.raises(lh.ArgumentError, match="tuple of GPU numbers"):
        km.SplitJacobi(u, 2)
    with pytest.raises(lh.ArgumentError, match="float32"):
        km.SplitJacobi(u.astype(np.float64), (0, 0))
    with pytest.raises(lh.ArgumentError, match="does not divide evenly.*e.g. 12 or 8"):
        lh.validate.divides(10, "n", 4, "gpus")
    with pytest.raises(lh.ArgumentError, match="distinct GPUs"):
        mg.collectives_table((0, 0))


def test_on_device_leaves_host_and_simulator_arrays_alone():
    lh.validate.on_device(np.ones(3), "x", 1)

    class FakeCupy:
        class device:  # noqa: N801  (CuPy's attribute)
            id = 1

    with pytest.raises(lh.ArgumentError, match="lives on GPU 1, but it is used on GPU 0"):
        lh.validate.on_device(FakeCupy(), "x", 0)


# ------------------------------------------------------------------------------------------------ the models

@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_bus_factors_are_nccl_tests(n):
    """nccl-tests' doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n, broadcast 1."""
    assert model.bus_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    assert model.bus_factor("all_gather", n) == pytest.approx((n - 1) / n)
    assert model.bus_factor("reduce_scatter", n) == pytest.approx((n - 1) / n)
    assert model.bus_factor("broadcast", n) == 1.0
    assert model.busbw_gbs("all_reduce", 2**30, 0.01, n) == pytest.approx(2**30 / 0.01 / 1e9 * 2 * (n - 1) / n)


def test_ring_model_busbw_tends_to_the_link_and_tree_has_fewer_hops():
    big = model.collective_table("all_reduce", [2**34], 8, link_gbs=100, latency_us=5).iloc[0]
    assert big["busbw_gbs"] == pytest.approx(100, rel=1e-3)
    ring = model.collective_time("all_reduce", 8, 64, link_gbs=100, latency_us=5)
    tree = model.collective_time("all_reduce", 8, 64, link_gbs=100, latency_us=5, algorithm="tree")
    assert ring == pytest.approx(2 * 63 * 5e-6, rel=1e-3) and tree == pytest.approx(2 * 6 * 5e-6, rel=1e-3)
    assert model.collective_time("broadcast", 1e9, 1, link_gbs=1, latency_us=1) == 0.0
    with pytest.raises(lh.ArgumentError, match="ring"):
        model.collective_time("all_gather", 8, 4, link_gbs=1, latency_us=1, algorithm="tree")


def test_scaling_model():
    m = model.HaloMachine(mem_gbs=1000, link_gbs=100, latency_us=10)
    weak = model.scaling_table(4096, 4096, [1, 2, 4], m, mode="weak")
    assert weak["efficiency"].iloc[0] == pytest.approx(1.0)
    assert (weak["efficiency"] <= 1.0 + 1e-12).all()
    strong = model.scaling_table(4096, 4096, [1, 2, 4], m, mode="strong", overlap=False)
    t = model.jacobi_step_time(4096, 4096, 4, m, overlap=False)  # a middle GPU sends two rows, one after the other
    assert t["step"] == pytest.approx(8 * 1024 * 4096 / 1e12 + 2 * (10e-6 + 4 * 4096 / 1e11))
    assert model.jacobi_step_time(4096, 4096, 2, m, overlap=False)["halo"] == pytest.approx(10e-6 + 4 * 4096 / 1e11)
    assert [model.halo_sends(g) for g in (1, 2, 3, 8)] == [0, 1, 2, 2]
    assert strong["speedup"].iloc[-1] < 4
    hosted = model.HaloMachine(mem_gbs=1000, link_gbs=100, latency_us=10, issue_us=1000)
    assert model.jacobi_step_time(64, 64, 4, hosted)["step"] == pytest.approx(4e-3)
    nb = model.nbody_step_time(1024, 4, interactions_per_s=1e9, link_gbs=100, latency_us=0)
    assert nb["compute"] == pytest.approx(1024 * 256 / 1e9) and nb["gather"] == pytest.approx(0.75 * 16 * 1024 / 1e11)


def test_figures_draw():
    m = model.HaloMachine(mem_gbs=1000, link_gbs=100, latency_us=10)
    fig14.plot_split(7, 3)
    fig14.plot_collectives(4, link_gbs=100, latency_us=5)
    fig14.plot_scaling(m, 4096, 4096, mode="strong")
    topo = __import__("pandas").DataFrame({"a": [0, 1], "b": [1, 0], "peer_access": [True, True],
                                           "link": ["NV18", "NV18"], "nvlink_peak_gbs": [450.0, 450.0]})
    fig14.plot_topology(topo, label="example")
    matplotlib.pyplot.close("all")


def test_reference_names_and_the_missing_sentence():
    assert mg.reference_name("collectives", 4) == "ch14_collectives_4gpu"
    if not mg.shipped("jacobi_scaling", 2):
        assert "tools/device_collect_multi.sh" in mg.missing_sentence("jacobi_scaling")
    with pytest.raises(lh.ArgumentError):
        mg.reference_name("nope", 2)


def test_parse_topology():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47\n"
    assert mg.parse_topology(text) == {(0, 1): "NV18", (1, 0): "NV18"}


# ------------------------------------------------------------------------------------------------ measurements

def test_measurements_say_the_simulator_has_no_gpus():
    if not lh.is_simulator():
        pytest.skip("simulator only")
    for fn in (mg.topology_table, mg.peer_copy_pairs, mg.issue_table, mg.collectives_table,
               mg.jacobi_scaling_table, mg.nbody_scaling_table):
        with pytest.raises(lh.GPUOnlyError, match="simulator"):
            fn((0, 1))


@gpu_only
def test_measurements_need_the_gpus_they_name():
    with pytest.raises(lh.GPUOnlyError, match=f"this machine has {km.gpu_count()} GPU"):
        mg.jacobi_scaling_table(tuple(range(km.gpu_count() + 1)))


@gpu_only
def test_split_jacobi_on_one_gpu_as_several():
    u = np.random.default_rng(0).random((257, 263), dtype=np.float32)
    for overlap in (True, False):
        assert np.array_equal(km.run_split_jacobi(u, 6, (0, 0, 0), overlap=overlap), ks.jacobi_reference(u, 6))


@TWO_GPUS
def test_split_jacobi_on_every_gpu():
    g = min(km.gpu_count(), 4)
    u = np.random.default_rng(0).random((1001, 517), dtype=np.float32)
    for overlap in (True, False):
        assert np.array_equal(km.run_split_jacobi(u, 7, tuple(range(g)), overlap=overlap), ks.jacobi_reference(u, 7))


@TWO_GPUS
def test_small_collectives_are_correct():
    table = mg.collectives_table((0, 1), sizes=(2**10, 2**20), repeat=1)
    assert table["correct"].all()


@TWO_GPUS
def test_small_scaling_tables_run():
    jac = mg.jacobi_scaling_table((0, 1), ny=512, nx=512, steps=3, modes=("weak",))
    assert set(jac["gpus"]) == {1, 2}
    nb = mg.nbody_scaling_table((0, 1), n=2**10, steps=1)
    assert (nb["max_error"] < kn.ACC_RTOL).all()


# ------------------------------------------------------------------------------------------------ the best Jacobi rate

def _ch09_jacobi():
    return lh.live_or_reference(None, "ch09_jacobi").table


def test_best_jacobi_rate_is_a_jacobi_kernel_not_the_copy():
    """Review 2026-11-28, HIGH 2: ``table["gbps"].max()`` picked the copy row and made every modelled time too fast."""
    jac = _ch09_jacobi()
    kernel, gbs = mg.best_jacobi_rate(jac)
    assert kernel not in mg.JACOBI_YARDSTICKS and gbs < float(jac["gbps"].max())  # the old choice was the copy
    kernels = jac[~jac["variant"].isin(mg.JACOBI_YARDSTICKS)]
    assert gbs == pytest.approx(float(kernels["gbps"].max()))
    toy = __import__("pandas").DataFrame({"kernel": ["naive", "copy", "marching", "fp32 FMA peak"],
                                          "variant": ["naive", "copy", "marching", "fp32 FMA peak"],
                                          "gbps": [100.0, 400.0, 250.0, float("nan")]})
    assert mg.best_jacobi_rate(toy) == ("marching", 250.0)
    with pytest.raises(lh.ArgumentError, match="ch09_jacobi"):
        mg.best_jacobi_rate(toy.drop(columns="variant"))
    with pytest.raises(lh.ArgumentError, match="only yardsticks"):
        mg.best_jacobi_rate(toy[toy["variant"] == "copy"])


# ------------------------------------------------------------------------------------------------ the demonstrations

DEMOS = (km.peer_halo_exchange, km.cross_device_wait, km.nccl_all_reduce)


def test_demonstrations_say_in_one_sentence_why_they_do_not_run():
    if km.two_gpus_here():
        pytest.skip("two GPUs here: the demonstrations run (test_demonstrations_run_on_two_gpus)")
    said = [demo() for demo in DEMOS]
    for text in said:
        assert text.startswith("Needs 2 GPUs (and CuPy), so not run here: on a machine with two or more it would ")
        assert text.count(". ") == 0 and text.endswith(".")  # one sentence
    assert len(set(said)) == 3
    with pytest.raises(lh.ArgumentError):
        km.peer_halo_exchange(0)


def test_demonstrations_guard_without_cupy(monkeypatch):
    """A real GPU without CuPy (or with one GPU) gets the same sentence as the simulator."""
    monkeypatch.setattr(km.backend, "is_simulator", lambda: False)
    monkeypatch.setattr(km.backend, "cupy_usable", lambda: False)
    assert not km.two_gpus_here()
    assert km.nccl_all_reduce().startswith("Needs 2 GPUs")


def test_chapter_shows_the_demonstrations_with_the_sentence_committed():
    nb = json.loads((Path(__file__).resolve().parents[1] / "book/14_multi_gpu.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for demo in DEMOS:
        assert f"lh.show_source(km.{demo.__name__})" in cells
        cell = next(c for c in nb["cells"] if "".join(c["source"]).endswith(f"print(km.{demo.__name__}())"))
        assert "".join(cell["source"]).startswith("# machine-dependent output:")
        if not km.two_gpus_here():
            assert "".join(cell["outputs"][0]["text"]).strip() == demo()


@TWO_GPUS
def test_demonstrations_run_on_two_gpus():
    for demo in DEMOS:
        assert "correct" in demo() and "WRONG" not in demo()


# ------------------------------------------------------------------------------------------------ drift check

ROOT = Path(__file__).resolve().parents[1]


from prose import figure as _g, markdown as _markdown  # noqa: E402  (the drift checks' one reading of the prose)


def _chapter14_figures() -> list[str]:
    """Every figure of the scaling section, recomputed from ``ch09_jacobi`` and the chapter's model."""
    jac = _ch09_jacobi()
    kernel, gbs = mg.best_jacobi_rate(jac)
    copy = float(jac.loc[jac["variant"] == "copy", "gbps"].iloc[0])
    variant, shape = kernel.split()
    bx, by = shape.split("x")
    # the cell's machine (c. "Strong and weak scaling"): link and latency observed or assumed, as the text says
    machine = model.HaloMachine(mem_gbs=gbs, link_gbs=393, latency_us=10, issue_us=30)
    copied = model.HaloMachine(mem_gbs=copy, link_gbs=393, latency_us=10, issue_us=30)
    gpus = [1, 2, 4, 8, 16]
    weak = model.scaling_table(16384, 16384, gpus, machine, mode="weak").set_index("gpus")
    strong = model.scaling_table(16384, 16384, gpus, machine, mode="strong").set_index("gpus")
    wrong = model.scaling_table(16384, 16384, gpus, copied, mode="strong").set_index("gpus")
    assert strong.loc[8, "issue_ms"] > strong.loc[8, "compute_ms"], "the text: at 8 GPUs issuing outlasts the work"
    assert strong.loc[4, "issue_ms"] < strong.loc[4, "compute_ms"], "the text: up to 4 GPUs the work dominates"
    return [
        f"the {variant} kernel ({bx} x {by} threads) at {_g(gbs)} GB/s",
        f"the copy reached {_g(copy)} GB/s, {copy / gbs:.2f} times more",
        f"predict every step {copy / gbs:.2f} times too fast",
        f"one step of a 16384 x 16384 grid takes {strong.loc[1, 'step_ms']:.3f} ms on one GPU",
        f"Weak scaling stays at {weak['efficiency'].min():.2f} up to 16 GPUs",
        f"the halo (at most {weak['halo_ms'].max():.3f} ms) hides behind each slab's {weak.loc[16, 'compute_ms']:.3f} ms",
        f"Strong scaling reaches {strong.loc[2, 'speedup']:.2f} on 2 GPUs and {strong.loc[4, 'speedup']:.2f} on 4",
        f"at 8 GPUs the host's {strong.loc[8, 'issue_ms']:.2f} ms of issuing outlasts each GPU's "
        f"{strong.loc[8, 'compute_ms']:.3f} ms of work, and the speedup drops to {strong.loc[8, 'speedup']:.2f} "
        f"({strong.loc[16, 'speedup']:.2f} on 16)",
        f"With the copy's rate it would have fallen further, to {wrong.loc[8, 'speedup']:.2f} on 8",
    ]


def test_chapter14_prose_quotes_the_reference_data_and_the_model():
    """Re-measuring chapter 9 (or changing the model) fails here instead of contradicting chapter 14's text."""
    text = _markdown("book/14_multi_gpu.ipynb")
    missing = [f for f in _chapter14_figures() if f not in text]
    assert not missing, "chapter 14's prose no longer matches ch09_jacobi and the model; update these:\n" + \
        "\n".join(missing)


def test_chapter14_observations_are_labelled_as_such():
    """Review 2026-11-28, MEDIUM 10: the two-GPU figures are one-off observations, not this package's measurement."""
    text = _markdown("book/14_multi_gpu.ipynb")
    assert "one-off observations" in text and "not reference data" in text
    assert "were measured with this package" not in text
    for figure in ("393 GB/s each way", "768 GB/s in all", "6.01 ms", "3.07 and 3.14 ms", "4.84 ms"):
        assert figure in text, figure
    assert "GIL" in text and "NCCL_NVLS_ENABLE=0" in text and "reduce-scatter" in text


def test_lab14_tasks_do_not_give_the_formulas():
    """Review 2026-11-28, HIGH 5 (lab): exercises 2 and 3 must be reasoned, not transcribed."""
    nb = json.loads((ROOT / "labs/14_multi_gpu_lab.ipynb").read_text())
    tasks = [" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"
             and ("## Exercise 2" in "".join(c["source"]) or "## Exercise 3" in "".join(c["source"]))]
    assert len(tasks) == 2
    for text in tasks:
        for formula in ("(n-1)/n", "(n - 1)", "max(compute", "compute + halo", "8 bytes", "ceil(", "S / t"):
            assert formula not in text, formula
