"""Reference data carries its provenance; plots label it and never pass it off as this machine."""

import json

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import labhelpers as lh  # noqa: E402
from labhelpers import refdata  # noqa: E402
from markers import sim_only  # noqa: E402

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

META = {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "driver": "13.0", "runtime": "13.0",
        "date": "2026-11-21"}


def test_save_and_load_round_trip(tmp_path):
    table = pd.DataFrame({"threads": [32, 64], "gbps": [100.5, float("nan")]})
    refdata.save_reference("demo", table, tmp_path, meta=META, notes="test")
    ref = refdata.load_reference("demo", tmp_path)
    assert ref.gpu == META["gpu"]
    assert "reference: NVIDIA H100" in ref.label and "2026-11-21" in ref.label
    assert "compute capability 9.0" in ref.provenance
    assert ref.table["threads"].tolist() == [32, 64]
    assert pd.isna(ref.table.loc[1, "gbps"])


def test_missing_reference_lists_the_available(tmp_path):
    refdata.save_reference("one", pd.DataFrame({"a": [1]}), tmp_path, meta=META)
    with pytest.raises(FileNotFoundError, match="available: one"):
        refdata.load_reference("two", tmp_path)


def test_reference_without_provenance_is_rejected(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"meta": {"gpu": "x"}, "columns": ["a"], "rows": [[1]]}))
    with pytest.raises(ValueError, match="where it came from"):
        refdata.load_reference("bad", tmp_path)


@sim_only
def test_current_meta_refuses_the_simulator():
    with pytest.raises(RuntimeError, match="real GPU"):
        refdata.current_meta()


def test_shipped_references_all_have_provenance():
    for name in refdata.available_references():
        ref = refdata.load_reference(name)
        assert ref.gpu and ref.meta["date"], name


def test_plot_without_gpu_shows_reference_and_says_so(tmp_path):
    refdata.save_reference("demo", pd.DataFrame({"x": [1, 2], "y": [3, 4]}), tmp_path, meta=META)
    ref = refdata.load_reference("demo", tmp_path)
    live = pd.DataFrame({"x": [1, 2], "y": [float("nan")] * 2, "status": ["simulator"] * 2})
    ax = lh.plot_comparison(x="x", y="y", live=live, reference=ref).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == [ref.label]
    assert any("No GPU timings here" in t.get_text() and ref.gpu in t.get_text() for t in ax.texts)


def test_plot_with_live_rows_labels_this_machine(tmp_path):
    refdata.save_reference("demo", pd.DataFrame({"x": [1, 2], "y": [3, 4], "v": ["a", "b"]}), tmp_path, meta=META)
    ref = refdata.load_reference("demo", tmp_path)
    live = pd.DataFrame({"x": [1, 2], "y": [5, 6], "v": ["a", "b"], "status": ["ok", "ok"]})
    ax = lh.plot_comparison(x="x", y="y", live=live, reference=ref, group="v").axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 4 and sum(f"this GPU: {lh.device_info().name}" in s for s in labels) == 2


def test_plot_takes_a_measured_and_draws_its_reference(tmp_path):
    refdata.save_reference("demo", pd.DataFrame({"x": [1, 2], "y": [3, None]}), tmp_path, meta=META)
    ref = refdata.load_reference("demo", tmp_path)
    ax = lh.plot_comparison(x="x", y="y", live=lh.live_or_reference(None, ref)).axes[0]
    assert ax.get_legend_handles_labels()[1] == [ref.label]
    assert any("No GPU timings here" in t.get_text() for t in ax.texts)
    live = lh.live_or_reference(pd.DataFrame({"x": [1, 2], "y": [5, 6], "status": ["ok", "ok"]}), ref)
    ax = lh.plot_comparison(x="x", y="y", live=live).axes[0]
    assert ax.get_legend_handles_labels()[1] == [ref.label, live.label] and not ax.texts


def test_loaded_columns_are_typed(tmp_path):
    """A column JSON stored as nulls, or as numbers and nulls, loads as float64 (NaN), not as object."""
    table = pd.DataFrame({"threads": [32, None], "gflops": [None, None], "gbps": [1.5, 2.5], "name": ["a", None]})
    refdata.save_reference("typed", table.astype(object), tmp_path, meta=META)
    loaded = refdata.load_reference("typed", tmp_path).table
    assert loaded["threads"].dtype == float and loaded["gflops"].dtype == float and loaded["gbps"].dtype == float
    assert loaded["threads"].iloc[0] == 32 and loaded["gflops"].isna().all()
    assert loaded["name"].dtype != float  # text stays text


def test_shipped_references_have_no_untyped_numeric_columns():
    for name in refdata.available_references():
        table = refdata.load_reference(name).table
        for column in table.columns:
            if table[column].dtype == object:  # only mixed text and numbers may stay object
                assert any(isinstance(v, str) for v in table[column].dropna()), (name, column)


# ---------------------------------------------------------------------------------------- reference sets


def _write(folder, name, gpu, **meta):
    folder.mkdir(parents=True, exist_ok=True)
    full = {"gpu": gpu, "compute_capability": "9.0", "driver": "13.0", "runtime": "13.0", "date": "2026-11-27", **meta}
    (folder / f"{name}.json").write_text(json.dumps({"meta": full, "columns": ["x"], "rows": [[1]]}))


def test_reference_sets_choose_folder_and_fall_back_only_for_cited_tables(tmp_path, monkeypatch):
    """A second GPU's set (none is shipped: one is declared here) is a folder of its own."""
    monkeypatch.setattr(refdata, "REFERENCE_SETS", {**refdata.REFERENCE_SETS, "H100": "h100"})
    main, other = list(refdata.REFERENCE_SETS)[:2]
    _write(tmp_path, "t", f"NVIDIA {main}")
    _write(tmp_path, "cited", "a lecture's GPU", source="a lecture")
    _write(tmp_path, "only_main", f"NVIDIA {main}")
    _write(tmp_path / refdata.REFERENCE_SETS[other], "t", f"NVIDIA {other}")
    monkeypatch.setenv(refdata.DIR_ENV_VAR, str(tmp_path))
    monkeypatch.delenv(refdata.SET_ENV_VAR, raising=False)
    assert refdata.chosen_set() == main
    assert refdata.load_reference("t").gpu == f"NVIDIA {main}"
    assert refdata.load_reference("t", machine=other).gpu == f"NVIDIA {other}"
    monkeypatch.setenv(refdata.SET_ENV_VAR, other.lower())
    assert refdata.chosen_set() == other
    assert refdata.load_reference("t").gpu == f"NVIDIA {other}"
    assert refdata.is_cited(refdata.load_reference("cited"))  # found in the main set
    with pytest.raises(FileNotFoundError):
        refdata.load_reference("only_main")  # a measured table is never taken from the other GPU's set
    assert refdata.available_references() == ["t"]
    monkeypatch.setenv(refdata.SET_ENV_VAR, "A100")
    with pytest.raises(ValueError, match=", ".join(refdata.REFERENCE_SETS)):
        refdata.chosen_set()


def test_every_measured_reference_of_a_set_comes_from_one_gpu_and_one_software_stack():
    """One reference machine: a set's files (cited tables apart) share one GPU model, driver and library versions.
    A table is compared only within itself (every ratio of the book is taken within one run), so a topic re-collected
    later on the same stack may join the set: each file names its own run."""
    for machine in refdata.REFERENCE_SETS:
        refs = [refdata.load_reference(n, machine=machine) for n in refdata.available_references(machine)]
        measured = [r for r in refs if not refdata.is_cited(r)]
        if machine != refdata.chosen_set() and not measured:
            continue  # a second set not collected yet
        assert measured, f"reference set {machine} is empty"
        stacks = {(r.gpu, r.meta.get("driver"), r.meta.get("numba_cuda"), r.meta.get("cupy")) for r in measured}
        assert len(stacks) == 1, f"reference set {machine} mixes machines or software: {sorted(map(str, stacks))}"
        gpu = stacks.pop()[0]
        assert machine in gpu, (machine, gpu)
        assert all(r.meta.get("run") and r.meta.get("date") for r in measured), "every table names its run and date"


def test_figure_panels_draws_on_the_axes_given_or_a_new_figure():
    import matplotlib.pyplot as plt

    from labhelpers.plotting import figure_panels

    fig, axes = figure_panels(None, (1, 2), (6, 3))
    assert len(axes) == 2 and fig.get_size_inches().tolist() == [6, 3]
    other, (left, right) = plt.subplots(1, 2)
    got, shaped = figure_panels([left, right], (1, 2))
    assert got is other and list(shaped) == [left, right]
    grid, cells = figure_panels([left, right], (2, 1), squeeze=False)
    assert grid is other and cells.shape == (2, 1)
    with pytest.raises(ValueError, match="pass 3 axes, got 2"):
        figure_panels([left, right], (1, 3))
    plt.close("all")
