"""live_or_reference: measured here on a GPU, else a labelled reference, always the same typed table."""

import configparser
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from labhelpers import measured, refdata
from markers import sim_only

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

META = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "driver": "13.0", "runtime": "13.0",
        "date": "2026-11-21"}


@pytest.fixture
def refdir(tmp_path, monkeypatch):
    """A reference folder holding ``demo``: a sweep-like table whose gflops column is all missing (JSON null)."""
    table = pd.DataFrame({"threads": [32, 64], "gbps": [100.5, 200.0], "gflops": [None, None],
                          "status": ["ok", "ok"]})
    refdata.save_reference("demo", table, tmp_path, meta=META)
    monkeypatch.setenv(refdata.DIR_ENV_VAR, str(tmp_path))
    monkeypatch.delenv(measured.LIVE_ENV_VAR, raising=False)
    return tmp_path


@pytest.fixture
def on_a_gpu(monkeypatch):
    """Pretend live measurement is possible (the package's GPU path, exercised under the simulator)."""
    monkeypatch.setattr(measured, "live_disabled_reason", lambda: None)


def live_table():
    return pd.DataFrame({"threads": [32, 64], "gbps": [1.0, 2.0], "gflops": [np.nan, np.nan],
                         "status": ["ok", "ok"]})


def test_exported():
    assert lh.live_or_reference is measured.live_or_reference and lh.Measured is measured.Measured


@sim_only
def test_simulator_loads_the_reference_without_measuring(refdir):
    calls = []
    m = lh.live_or_reference(lambda: calls.append(1), "demo")
    assert calls == [] and not m.is_live
    assert m.gpu == "NVIDIA H200" and m.label == "reference: NVIDIA H200 (2026-11-21)"
    assert m.reference is not None and m.reference.name == "demo"
    assert m.table["gflops"].dtype == np.float64 and m.table["threads"].dtype == np.int64  # typed, not object
    line = m.source_line()
    assert line.startswith("Data source: ") and "\n" not in line
    assert "NVIDIA H200" in line and "2026-11-21" in line and "simulator" in line


def test_none_means_reference_only(refdir, on_a_gpu):
    m = lh.live_or_reference(None, "demo")
    assert not m.is_live and "nothing is measured live" in m.note


def test_env_var_forces_reference_even_on_a_gpu(refdir, monkeypatch):
    monkeypatch.setenv(measured.LIVE_ENV_VAR, "0")
    m = lh.live_or_reference(live_table, "demo")
    assert not m.is_live and "LABHELPERS_LIVE=0" in m.source_line()
    assert not lh.live_or_reference(live_table(), "demo").is_live  # a table measured already, too


def test_gpu_measures_and_labels_this_gpu(refdir, on_a_gpu):
    m = lh.live_or_reference(live_table, "demo")
    assert m.is_live and m.label == f"this GPU: {lh.device_info().name}" and m.gpu == lh.device_info().name
    assert m.table["gbps"].tolist() == [1.0, 2.0]
    assert m.reference is not None  # still loaded, for comparison plots
    assert m.source_line().startswith("Data source: measured just now on this GPU")
    ref = lh.live_or_reference(None, "demo").table
    assert dict(m.table.dtypes) == dict(ref.dtypes)  # the same typed columns either way


def test_gpu_only_error_and_untimed_sweeps_fall_back(refdir, on_a_gpu):
    def needs_cupy():
        raise lh.GPUOnlyError("CuPy is not installed")

    m = lh.live_or_reference(needs_cupy, "demo")
    assert not m.is_live and "CuPy is not installed" in m.source_line()
    untimed = live_table().assign(status="invalid")
    m = lh.live_or_reference(lambda: untimed, "demo")
    assert not m.is_live and "no GPU timings" in m.note
    with pytest.raises(ZeroDivisionError):  # a bug in the measurement is not hidden
        lh.live_or_reference(lambda: 1 / 0, "demo")


def test_sweep_rows_say_whether_they_are_gpu_timings(refdir):
    mixed = pd.DataFrame({"threads": [32, 64], "gbps": [1.0, 2.0], "status": ["invalid", "ok"]})
    m = lh.live_or_reference(mixed, "demo")
    assert m.is_live and m.table["threads"].tolist() == [64] and m.table.index.tolist() == [0]
    assert not lh.live_or_reference(mixed.assign(status="simulator"), "demo").is_live


@sim_only
def test_a_plain_table_under_the_simulator_is_not_live(refdir):
    assert not lh.live_or_reference(pd.DataFrame({"threads": [1]}), "demo").is_live


def test_missing_reference(refdir, on_a_gpu):
    with pytest.raises(FileNotFoundError, match="available: demo"):
        lh.live_or_reference(None, "nope")
    m = lh.live_or_reference(live_table, "nope")  # measured: the reference is optional
    assert m.is_live and m.reference is None


def test_wrong_arguments_say_what_to_pass(refdir):
    with pytest.raises(TypeError, match="pass the function itself"):
        lh.live_or_reference(42, "demo")
    with pytest.raises(TypeError, match="name of a reference file"):
        lh.live_or_reference(None, 42)


def test_dtypes_force_column_types(refdir):
    m = lh.live_or_reference(None, "demo", dtypes={"threads": float, "gbps": "float32"})
    assert m.table["threads"].dtype == np.float64 and m.table["gbps"].dtype == np.float32
    with pytest.raises(KeyError, match="nope"):
        lh.live_or_reference(None, "demo", dtypes={"nope": int})


def test_typed_table_leaves_text_and_mixed_columns_alone():
    table = pd.DataFrame({"n": pd.Series([1, None], dtype=object), "s": ["a", None], "mixed": [1, "x"],
                          "flag": [True, None]})
    typed = measured.typed_table(table)
    assert typed["n"].dtype == np.float64 and np.isnan(typed["n"][1])
    numeric = pd.api.types.is_numeric_dtype
    assert not numeric(typed["s"]) and not numeric(typed["mixed"]) and not numeric(typed["flag"])
    assert table["n"].dtype == object  # the caller's table is not changed
    typed = measured.typed_table(pd.DataFrame({"v": ["3", "4"]}), {"v": int})
    assert typed["v"].dtype == np.int64


def test_unpacks_as_table_and_label(refdir):
    table, label = lh.live_or_reference(None, "demo")
    assert label.startswith("reference:") and len(table) == 2


def test_every_shipped_reference_loads_typed():
    for name in refdata.available_references():
        m = lh.live_or_reference(None, name)
        for column in m.table.columns:
            values = m.table[column]
            if not pd.api.types.is_numeric_dtype(values):  # only text (or mixed text) stays non-numeric
                assert any(isinstance(v, str) for v in values), (name, column)


def test_sanitiser_masks_data_source_lines():
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).with_name("nbval_sanitize.cfg"))
    section = cfg["data-source"]
    text = "before\nData source: measured just now on this GPU, X.\nafter Data source: stays\n"
    masked = re.sub(section["regex"], section["replace"], text)
    assert masked == "before\nData source: DATA SOURCE\nafter Data source: stays\n"


def test_profiler_report_goes_through_live_or_reference(refdir, on_a_gpu, monkeypatch):
    from labhelpers import profiler

    report = pd.DataFrame({"kernel": ["k"], "metric": ["m"], "description": ["d"], "unit": ["u"], "value": ["2.5"]})
    refdata.save_reference("report", report.assign(value=[1.5]), refdir, meta=META)
    monkeypatch.setattr(profiler, "ncu_unavailable_reason", lambda: None)
    monkeypatch.setattr(profiler, "profile_fma_per_element", lambda: report)
    table, label, note = profiler.fma_report_or_reference("report")
    assert label.startswith("this GPU: ") and note.startswith("Profiled just now on")
    assert table["value"].tolist() == [2.5]  # typed

    def refused():
        raise profiler.ProfilerUnavailable("counters are not permitted")

    monkeypatch.setattr(profiler, "profile_fma_per_element", refused)
    table, label, note = profiler.fma_report_or_reference("report")
    assert label.startswith("reference: ") and "counters are not permitted" in note and "NVIDIA H200" in note
