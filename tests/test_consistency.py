"""Chapter 13 (memory consistency and coherence): kernels, litmus model, relaxed simulator, harness, checkers.

Under the simulator (the default) every kernel runs on small awkward sizes; blocks run one after
another there, so tests of weak behaviour use the model and :func:`relaxed_launch`. On a GPU
(``LABHELPERS_BACKEND=gpu``) the GPU-only tests run the warp-aggregated counter, large sizes, the
litmus harness at full size and the last-block sum many times.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from numba import cuda, int32  # noqa: F401  (module globals: the simulator swaps `cuda` in kernels' globals)
from labhelpers.kernels import consistency as k
from labhelpers.models import consistency as m
from labhelpers.relaxed import relaxed_launch
from markers import SIM, gpu_only, sim_only

SMALL = (1, 31, 33, 257)


# --- counters ------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["atomic", "block_aggregated"])
def test_correct_counters_are_exact(variant):
    for n in SMALL if SIM else SMALL + (2**20 + 7,):
        assert k.run_counter(variant, n, threads=64) == n, (variant, n)


def test_racy_counter_never_counts_more_than_n():
    for n in (1, 33, 100):
        got = k.run_counter("racy", n, threads=32)
        assert 1 <= got <= n


@sim_only
def test_warp_aggregated_is_gpu_only_under_the_simulator():
    with pytest.raises(lh.GPUOnlyError, match="activemask"):
        k.run_counter("warp_aggregated", 10)


@gpu_only
def test_warp_aggregated_counter_on_gpu():
    for n in SMALL + (2**20 + 7,):
        for threads in (32, 100, 256):
            assert k.run_counter("warp_aggregated", n, threads) == n


@gpu_only
def test_racy_counter_loses_updates_on_gpu():
    assert k.run_counter("racy", 2**20) < 2**20


@pytest.mark.parametrize("bad, error", [
    (dict(variant="nope", n=10), k.UnknownVariantError),
    (dict(variant="atomic", n=0), lh.ArgumentError),
    (dict(variant="atomic", n=-3), lh.ArgumentError),
    (dict(variant="atomic", n=10.5), lh.ArgumentError),
    (dict(variant="atomic", n="10"), lh.ArgumentError),
    (dict(variant="atomic", n=True), lh.ArgumentError),
    (dict(variant="atomic", n=None), lh.ArgumentError),
    (dict(variant="atomic", n=10, threads=0), lh.LaunchConfigError),
    (dict(variant="atomic", n=10, threads=1025), lh.LaunchConfigError),
])
def test_counter_rejects_bad_arguments(bad, error):
    with pytest.raises(error):
        k.run_counter(**bad)


@pytest.mark.parametrize("group", [1, 32, 100])
def test_grouped_atomics_match_reference(group):
    n = 100
    assert np.array_equal(k.run_atomic_grouped(n, group, reps=2, threads=32), k.grouped_counts_reference(n, 2, group))


def test_grouped_atomics_reject_bad_arguments():
    for bad in (dict(n=0, group=1), dict(n=10, group=0), dict(n=10, group=1, reps=0),
                dict(n=10, group=2**20, reps=2**12)):
        with pytest.raises(lh.ArgumentError):
            k.run_atomic_grouped(**bad)


# --- compare-and-swap ------------------------------------------------------------------------------

def test_float_key_preserves_order_and_inverts():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(1000).astype(np.float32) * 1e3,
                        np.array([-np.inf, np.inf, -0.0, 0.0, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)])
    keys = k.float_key(x)
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(keys[order]) >= 0)
    assert np.array_equal(k.key_float(keys).view(np.int32), x.view(np.int32))
    assert k.float_key(np.float32(-np.inf))[()] == k.KEY_MINUS_INF
    assert k.float_key(np.float32(-0.0))[()] < k.float_key(np.float32(0.0))[()]


@pytest.mark.parametrize("values", [
    [5.0], [-5.0, -3.0, -7.0], [2.0] * 40, [-0.0, 0.0], [0.0, -0.0], [-np.inf, -np.inf], [-np.inf, 1.0, np.inf],
    list(np.linspace(-3, 3, 257)),
])
def test_float_max_cas_on_adversarial_inputs(values):
    x = np.array(values, dtype=np.float32)
    got = k.run_float_max(x, threads=32)
    assert got == x.max() and np.signbit(got) == np.signbit(x.max()) or (got == 0 and x.max() == 0)


def test_float_max_prefers_positive_zero():
    assert not np.signbit(k.run_float_max(np.array([-0.0, 0.0, -0.0], np.float32), threads=32))


@pytest.mark.parametrize("bad", [np.array([1.0, np.nan], np.float32), np.array([], np.float32),
                                 np.array([1.0, 2.0]), np.ones((2, 2), np.float32), [1.0, 2.0]])
def test_float_max_rejects_bad_input(bad):
    with pytest.raises(lh.ArrayArgumentError):
        k.run_float_max(bad)


@gpu_only
def test_float_max_cas_large_on_gpu():
    x = np.random.default_rng(3).standard_normal(2**22).astype(np.float32)
    assert k.run_float_max(x) == x.max()
    assert k.run_float_max(-np.abs(x) - 1) == (-np.abs(x) - 1).max()


# --- locks ----------------------------------------------------------------------------------------

def test_count_locked_is_exact():
    assert k.run_count_locked(20 if SIM else 2**14, threads=8 if SIM else 256) == (20 if SIM else 2**14)


def test_pair_update_locked():
    for n in (1, 33, 130):
        values = np.arange(n, dtype=np.int32)
        assert k.run_pair_update_locked(values, threads=32) == (int(values.sum()), n)


def test_pair_update_rejects_bad_input():
    with pytest.raises(lh.ArrayArgumentError):
        k.run_pair_update_locked(np.arange(4, dtype=np.float32))
    with pytest.raises(lh.LaunchConfigError):
        k.run_pair_update_locked(np.arange(4, dtype=np.int32), threads=48)
    with pytest.raises(lh.ArrayArgumentError):
        k.run_pair_update_locked(np.arange(0, dtype=np.int32))


# --- the last-block reduction ---------------------------------------------------------------------

def _integers(n, seed=0):
    return np.random.default_rng(seed).integers(-4, 5, size=n).astype(np.float32)


def test_last_block_sum_is_exact_on_awkward_sizes():
    sizes = (1, 2049) if SIM else (1, 2047, 2048, 2049, 2**20 + 7, 2**24 + 1)
    for n in sizes:
        x = _integers(n, n)
        assert k.sum_last_block(x, blocks=2 if SIM else None) == k.reference_sum(x), n


def test_last_block_sum_launches_twice_with_the_same_ticket():
    x = _integers(3000)
    summer = k.LastBlockSum(x, blocks=2 if SIM else None)
    assert summer() == summer() == k.reference_sum(x)


def test_last_block_sum_rejects_bad_input():
    with pytest.raises(lh.ArrayArgumentError):
        k.sum_last_block(np.ones(5))
    with pytest.raises(lh.ArrayArgumentError):
        k.sum_last_block(np.ones(0, np.float32))
    with pytest.raises(lh.ArgumentError):
        k.sum_last_block(np.ones(5, np.float32), blocks=0)


@sim_only
def test_relaxed_simulator_catches_the_missing_fence():
    x = _integers(1500)
    for fence, ok in ((True, True), (False, False)):
        partial = np.full(3, np.nan, np.float32)
        out = np.zeros(1, np.float32)
        report = relaxed_launch(k.make_sum_last_block(fence), 3, k.SUM_THREADS, x, partial,
                                  np.zeros(1, np.uint32), out, names=["x", "partial", "ticket", "out"])
        assert report.ok is ok
        assert bool(out[0] == k.reference_sum(x)) is ok
        if not ok:
            assert "read partial[" in str(report.stale_reads[0])


@gpu_only
def test_last_block_sum_many_launches_on_gpu():
    table = __import__("labhelpers.experiments.consistency", fromlist=["x"]).last_block_failures(
        n=2**22, launches=200, fences=(True,))
    assert int(table["wrong"].iloc[0]) == 0


# --- the relaxed simulator on message passing -----------------------------------------------------

@cuda.jit
def _mp_once(data, flag, out, fence):
    if cuda.blockIdx.x == 0:
        data[0] = 1
        if fence:
            cuda.threadfence()
        cuda.atomic.exch(flag, 0, 1)
    else:
        out[0] = cuda.atomic.or_(flag, 0, 0)
        if fence:
            cuda.threadfence()
        out[1] = data[0]


@sim_only
def test_relaxed_launch_shows_message_passing_weak_outcome_only_without_fence():
    for fence, expected in ((0, [1, 0]), (1, [1, 1])):
        data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(2, np.int32)
        report = relaxed_launch(_mp_once, 2, 1, data, flag, out, fence)
        assert out.tolist() == expected
        assert data[0] == 1  # drained at the end of the kernel
        assert report.ok is bool(fence)


@sim_only
def test_relaxed_launch_restores_the_simulator_and_rejects_non_kernels():
    with pytest.raises(lh.LabError):
        relaxed_launch(lambda: None, 1, 1)
    data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(2, np.int32)
    _mp_once[2, 1](data, flag, out, 0)  # the ordinary simulator again: serial blocks, no weak outcome
    assert out.tolist() == [1, 1]


# --- the litmus model -----------------------------------------------------------------------------

def test_sc_outcomes_of_the_classic_tests():
    assert set(m.sc_outcomes(m.MP)) == {(0, 0), (0, 1), (1, 1)}
    assert set(m.sc_outcomes(m.SB)) == {(0, 1), (1, 0), (1, 1)}
    assert set(m.sc_outcomes(m.LB)) == {(0, 0), (0, 1), (1, 0)}
    assert set(m.sc_outcomes(m.CORR)) == {(0, 0), (0, 1), (1, 1)}
    assert len(m.sc_outcomes(m.IRIW)) == 15 and (1, 0, 1, 0) not in m.sc_outcomes(m.IRIW)
    assert m.is_sc(m.MP_REVERSED, {"r0": 1, "r1": 0})
    for t in (m.MP, m.SB, m.LB, m.CORR, m.IRIW):
        assert not m.is_sc(t, t.weak_outcome), t.name


@pytest.mark.parametrize("outcome, says", [
    ((1, 0, 1), "has 3 value.*MP has 2 register"), ((1,), "has 1 value"), ((), "has 0 value"),
    ({"r0": 1}, "r1 missing"), ({"r0": 1, "r1": 0, "r2": 0}, "'r2' not a register"), ("10", "tuple of 2"),
    (7, "tuple of 2"), ((1, "0"), "ints the loads read.*'0'"), ((True, 0), "ints the loads read")])
def test_is_sc_refuses_a_malformed_outcome(outcome, says):
    """A question with the wrong registers is an error that says what is wrong, not the answer False."""
    with pytest.raises(lh.ArgumentError, match=says):
        m.is_sc(m.MP, outcome)


def test_is_sc_refuses_what_is_not_a_litmus_test():
    with pytest.raises(lh.ArgumentError, match="get_test"):
        m.is_sc("MP", (1, 0))
    assert m.is_sc(m.MP, (np.int64(1), 1)) and not m.is_sc(m.MP, (5, 5))  # NumPy ints; an impossible value is False


def test_interleavings_are_all_enumerated_once():
    for t in m.TESTS.values():
        orders = list(m.interleavings(t))
        assert len(orders) == len(set(orders)) == m.interleaving_count(t)
    assert m.interleaving_count(m.IRIW) == 180
    assert sum(m.sc_outcomes(m.MP).values()) == 6


def test_store_buffer_machines():
    assert m.SB.weak_outcome in m.buffered_outcomes(m.SB, "TSO")
    assert m.MP.weak_outcome not in m.buffered_outcomes(m.MP, "TSO")
    assert m.MP.weak_outcome in m.buffered_outcomes(m.MP, "PSO")
    assert m.LB.weak_outcome not in m.buffered_outcomes(m.LB, "PSO")
    for t in (m.MP, m.SB):
        assert m.buffered_outcomes(t.with_fences(), "PSO") == set(m.sc_outcomes(t))
    with pytest.raises(ValueError):
        m.buffered_outcomes(m.MP, "ARM")


def test_litmus_syntax_and_errors():
    t = m.litmus("T", ["x = 1", "fence", "r0 = y"], ["y = 2", "r1 = x"], weak={"r0": 0, "r1": 0})
    assert t.registers == ("r0", "r1") and t.locations == ("x", "y")
    assert "fence" in t.listing() and (0, 0) in m.all_outcomes(t) and (2, 1) in m.all_outcomes(t)
    for bad in (["x := 1"], ["r0 = 1"], [3]):
        with pytest.raises(m.LitmusSyntaxError):
            m.litmus("bad", bad, weak={})
    with pytest.raises(m.LitmusSyntaxError):
        m.litmus("dup", ["r0 = x"], ["r0 = y"], weak={"r0": 0})
    with pytest.raises(m.LitmusSyntaxError):
        m.litmus("weak", ["r0 = x"], weak={"r9": 0})
    with pytest.raises(ValueError):
        m.run_interleaving(m.MP, [0, 0, 0])
    with pytest.raises(lh.LabError):
        m.get_test("XYZ")


def test_tables_and_bounds():
    table = m.summary_table()
    assert list(table["test"]) == ["MP", "SB", "LB", "CoRR", "IRIW", "MP-reversed"]
    assert table.set_index("test").loc["MP-reversed", "SC"]
    ot = m.outcome_table(m.MP)
    assert ot["interleavings"].sum() == 6 and ot["weak target"].sum() == 1
    assert m.weak_upper_bound(0, 1_000_000) == pytest.approx(3.0e-6, rel=0.01)
    assert m.weak_upper_bound(10, 1000) > 0.01
    with pytest.raises(ValueError):
        m.weak_upper_bound(5, 3)


# --- the litmus harness ---------------------------------------------------------------------------

@pytest.mark.parametrize("test", list(k.LITMUS_TARGETS))
def test_litmus_harness_counts_every_instance(test):
    opts = dict(test_blocks=2, threads=16, stress_blocks=1, stress_iters=2, stride=2) if SIM else {}
    run = k.LitmusRun(test, fence="device", **opts)
    run.run(1)
    hist = run.histogram()
    assert sum(hist.values()) == run.instances and (-1, -1) not in hist
    if SIM:  # blocks run one after another: only outcomes of interleavings, and none of the weak ones
        model_test = m.get_test(test)
        assert all(m.is_sc(model_test, o) for o, c in hist.items() if c), hist


def test_litmus_intra_block_and_bad_arguments():
    run = k.LitmusRun("MP", fence="block", intra_block=True, test_blocks=1, threads=8, stress_blocks=0)
    run.run(1)
    assert sum(run.histogram().values()) == 8
    with pytest.raises(k.UnknownVariantError):
        k.make_litmus_kernel("XX")
    with pytest.raises(k.UnknownVariantError):
        k.make_litmus_kernel("MP", fence="warp")
    with pytest.raises(lh.ArgumentError):
        k.LitmusRun("MP", test_blocks=1)
    with pytest.raises(lh.LaunchConfigError):
        k.LitmusRun("MP", intra_block=True, threads=7, test_blocks=1)


@gpu_only
def test_litmus_mutant_shows_up_on_gpu():
    run = k.LitmusRun("MP-reversed")
    run.run(20)
    assert run.weak > 0


@gpu_only
def test_wait_loop_ptx_reloads_only_in_the_atomic_loop():
    from labhelpers.experiments import consistency as e

    table = e.wait_loop_table()
    assert any("atom" in line for line in e.loop_instructions(table, "atomic"))


# --- a race inside a block ------------------------------------------------------------------------

def test_shift_synced_matches_reference():
    for n in (1, 31, 33, 257):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(k.run_shift(x, threads=32), k.shift_reference(x))


def test_shift_rejects_bad_input():
    with pytest.raises(lh.ArrayArgumentError):
        k.run_shift(np.arange(4))
    with pytest.raises(lh.ArrayArgumentError):
        k.run_shift(np.arange(0, dtype=np.float32))


@sim_only
def test_race_detector_finds_the_missing_barrier():
    if not hasattr(lh, "check_races"):
        pytest.skip("lh.check_races is not there yet")
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    racy = lh.check_races(k.shift_racy, 2, 32, x, out)
    assert not racy.ok and any(r.kind == "RAW" for r in racy.races)
    assert lh.check_races(k.shift_synced, 2, 32, x, np.zeros(64, np.float32)).ok


@sim_only
def test_wait_loop_ptx_is_gpu_only():
    with pytest.raises(lh.GPUOnlyError):
        k.wait_loop_ptx("plain")


# --- experiments ----------------------------------------------------------------------------------

def test_counter_runs_table():
    table = __import__("labhelpers.experiments.consistency", fromlist=["x"]).counter_runs(
        n=40, runs=2, threads=32, variants=("racy", "atomic", "warp_aggregated"))
    assert list(table.columns) == ["variant", "run", "n", "count", "lost"]
    assert (table[table["variant"] == "atomic"]["lost"] == 0).all()
    assert isinstance(table, pd.DataFrame)


# --- lab checkers ---------------------------------------------------------------------------------

from pathlib import Path  # noqa: E402
import importlib.util  # noqa: E402

from labhelpers.exercises import consistency as ex  # noqa: E402

SOLUTIONS = Path(__file__).resolve().parents[1] / "labs" / "solutions" / "13_consistency_lab.py"


def _solution(name, tmp_path=None, old=None, new=None):
    """The solution's function ``name``, or a buggy variant with ``old`` replaced by ``new`` (a file: AST checks see it)."""
    source = SOLUTIONS.read_text()
    path = SOLUTIONS
    if old is not None:
        assert old in source, old
        path = tmp_path / f"variant_{abs(hash((old, new)))}.py"
        path.write_text(source.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


@pytest.mark.parametrize("name, old, new, message", [
    ("count_atomic", "cuda.atomic.add(counter, 0, 1)", "counter[0] += 1", "does not call cuda.atomic.add"),
    pytest.param("count_atomic", "if i < x.size and x[i] > threshold:", "if x[i] > threshold:", "outside x",
                 marks=sim_only),  # on a GPU an out-of-bounds read returns garbage instead of raising
    ("count_atomic", "        cuda.atomic.add(counter, 0, 1)",
     "        c = counter[0]\n        cuda.atomic.add(hits_, 0, 1) if False else None\n        counter[0] = c + 1",
     "plain store"),
    ("max_cas", "b ^ int32(0x7FFFFFFF)", "b", "negative floats"),
    ("max_cas", "found = cuda.atomic.cas(best_key, 0, seen, key)", "found = cuda.atomic.max(best_key, 0, key)",
     "does not call cuda.atomic.cas"),
    ("sum_last_block", "        cuda.threadfence()\n        t =", "        t =", "between the store"),
    ("sum_last_block", "        cuda.threadfence()\n        t =", "        cuda.threadfence_block()\n        t =",
     "threadfence_block"),
    ("sum_last_block", "        cuda.threadfence()\n        am_last", "        am_last", "after the atomic ticket"),
])
def test_checkers_reject_typical_bugs(tmp_path, name, old, new, message):
    checker = {"count_atomic": ex.check_count_atomic, "max_cas": ex.check_float_max_cas,
               "sum_last_block": ex.check_last_block_fences}[name]
    with pytest.raises(lh.CheckFailed, match=message):
        checker(_solution(name, tmp_path, old, new))


@sim_only  # the checker counts the global atomics in the simulator
def test_block_counter_checker_rejects_one_atomic_per_thread(tmp_path):
    buggy = _solution("count_block", tmp_path, "cuda.atomic.add(hits, 0, 1)", "cuda.atomic.add(counter, 0, 1)")
    with pytest.raises(lh.CheckFailed, match="at most one per block|atomic additions"):
        ex.check_count_block(buggy)


@sim_only
def test_fence_checker_runs_the_relaxed_simulator(tmp_path, monkeypatch):
    """Without the source (AST) check, the relaxed simulator alone finds the missing release fence."""
    buggy = _solution("sum_last_block", tmp_path, "        cuda.threadfence()\n        t =", "        t =")
    monkeypatch.setattr(ex, "_tree", lambda kernel: None)
    with pytest.raises(lh.CheckFailed, match="relaxed simulator"):
        ex.check_last_block_fences(buggy)


def test_litmus_answers_checker():
    good = _solution("litmus_answers")()
    flipped = dict(good)
    flipped[("SB", (0, 0))] = True
    with pytest.raises(lh.CheckFailed, match="SB"):
        ex.check_litmus_answers(lambda: flipped)
    with pytest.raises(lh.CheckFailed, match="not answered"):
        ex.check_litmus_answers(lambda: {**good, ("MP", (1, 0)): None})
    with pytest.raises(lh.CheckFailed, match="dict"):
        ex.check_litmus_answers(lambda: None)
    with pytest.raises(lh.CheckFailed, match="CUDA kernel"):
        ex.check_count_atomic(lambda: None)


# --- figures --------------------------------------------------------------------------------------

def test_figures_draw_from_model_and_tables():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from labhelpers.figures import consistency as fig

    counters = pd.DataFrame({"variant": ["racy"] * 3 + ["atomic"], "run": [0, 1, 2, 0], "n": 100,
                             "count": [40, 55, 61, 100], "lost": [60, 45, 39, 0]})
    litmus = pd.DataFrame([{"test": t, "fence": f, "access": "plain", "pairing": "different blocks",
                            "instances": 1000, "r00": 10, "r01": 500, "r10": w, "r11": 490 - w, "weak": w}
                           for t in ("MP", "SB") for f, w in (("none", 3), ("device", 0))])
    throughput = pd.DataFrame({"kind": ["one address", "one address per thread"], "atomics": [10, 10],
                               "increments_per_s": [1e9, 2e10]})
    last = pd.DataFrame({"n": [2**24] * 3, "what": ["a", "b", "c"], "gbps": [1.0, 2.0, np.nan]})
    figures = [fig.plot_counter_runs(counters, label="test"),
               fig.plot_litmus(litmus, label="test", tests=("MP", "SB")),
               fig.plot_litmus_histogram(litmus, label="test", test="MP"),
               fig.plot_atomic_throughput(throughput, label="test"), fig.plot_last_block(last, label="test"),
               fig.plot_outcome_sets("IRIW")]
    _, ax = plt.subplots()
    assert fig.draw_interleaving(ax, "MP", 7) is None and ax.texts  # a drawer draws on the axes it is given
    figures.append(ax.figure)
    assert all(isinstance(f, Figure) for f in figures)
    plt.close("all")


# --- what the chapter's prose says about the reference data ---------------------------------------

def test_chapter_claims_hold_for_the_reference_data():
    """Book/13_consistency states these facts in words; re-measuring must not silently contradict them."""
    counters = lh.load_reference("ch13_counter_runs").table
    racy = counters[counters["variant"] == "racy"]
    assert (racy["count"] < 0.01 * racy["n"]).all()  # "almost all of them" lost
    assert (counters[counters["variant"] != "racy"]["lost"] == 0).all()

    rate = lh.load_reference("ch13_atomic_throughput").table.set_index("kind")["increments_per_s"]
    assert rate["one address per thread"] / rate["one address"] > 100  # "two orders of magnitude"
    assert 0.8 < rate["counter: atomic per thread"] / rate["counter: warp-aggregated"] < 1.25  # compiler aggregates
    assert rate["counter: atomic per thread"] > 10 * rate["one address"]
    assert rate["counter: block-aggregated"] == rate[[k for k in rate.index if k.startswith("counter")]].max()
    assert rate["counter: spin lock per thread"] == rate.min()

    lt = lh.load_reference("ch13_litmus").table
    assert len(lt) == 19 and (lt["instances"] == 200 * 65536).all()  # "19 configurations ... 13.1 million"

    def weak(test, fence="none", access="plain", pairing="different blocks"):
        r = lt[(lt["test"] == test) & (lt["fence"] == fence) & (lt["access"] == access) & (lt["pairing"] == pairing)]
        return int(r["weak"].iloc[0])

    for test in ("MP", "SB", "LB"):  # "all fail without fences, plain and atomic alike"; "vanished" with fences
        for access in ("plain", "atomic"):
            assert weak(test, access=access) > 0 and weak(test, "device", access) == 0, (test, access)
            assert 10_000 < weak(test, access=access) < 1_000_000, (test, access)  # "more than ten thousand times"
    assert weak("CoRR") == 0 and weak("CoRR", access="atomic") == 0
    assert weak("MP-reversed") > 0  # the mutant is killed
    assert weak("MP", "block") > 0 and weak("MP", "block", pairing="same block") == 0  # the scope pitfall
    assert weak("MP", pairing="same block") == 0
    single = lh.load_reference("ch13_litmus_single").table["instances_per_s"].iloc[0]
    assert lt["instances_per_s"].min() / single > 1e4  # "more than four orders of magnitude"

    failures = lh.load_reference("ch13_last_block_failures").table
    assert (failures["wrong"] == 0).all()  # "Not one failure, with or without the fences"
    lb = lh.load_reference("ch13_last_block").table
    ratio = {n: g.set_index("what")["gbps"] for n, g in lb.groupby("n")}
    cub = {n: r["last-block sum (threadfence + ticket)"] / r["cupy.sum (CUB)"] for n, r in ratio.items()}
    assert all(v >= 0.90 for v in cub.values())  # "at both sizes the single launch meets the target"
    assert cub[2**24] < cub[2**26]  # "the shorter sum loses a little more of its ratio"
    copy = ratio[2**26]["last-block sum (threadfence + ticket)"] / ratio[2**26]["device copy (read + write)"]
    assert copy >= 0.90  # "at 2^26 close to the copy"
    ms = {n: g.set_index("what")["median_ms"] for n, g in lb.groupby("n")}
    extra_us = [1e3 * (t["last-block sum (threadfence + ticket)"] - t["cupy.sum (CUB)"]) for t in ms.values()]
    assert all(0.5 <= us <= 2.5 for us in extra_us), extra_us  # "a microsecond or two longer than cupy.sum"

    from labhelpers.experiments import consistency as e

    ptx = lh.load_reference("ch13_wait_loop_ptx").table
    plain, atomic = e.loop_instructions(ptx, "plain"), e.loop_instructions(ptx, "atomic")
    assert plain and not any("ld." in line or "atom" in line for line in plain)  # "a branch to itself"
    assert any("atom" in line for line in atomic)
    summary = e.racecheck_summary(lh.load_reference("ch13_racecheck").table)
    assert "RACECHECK SUMMARY" in summary["summary"] and summary["kinds"] == ["RAW"]
    text = "\n".join(lh.load_reference("ch13_racecheck").table["text"])
    assert "shift_racy" in text and "shift_synced" not in text
    # the host frame names the launch in run_shift: after editing kernels/consistency.py above it, collect again
    import re
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "src" / "labhelpers" / "kernels" / "consistency.py").read_text()
    for line_no in set(re.findall(r"Host Frame: run_shift in consistency\.py:(\d+)", text)):
        line = source.splitlines()[int(line_no) - 1]
        assert "(shift_racy if racy else shift_synced)[" in line, (line_no, line)


# --- the compiler's order: PTX of the litmus kernels ----------------------------------------------

from labhelpers.experiments import consistency as exc  # noqa: E402

_FAKE_PTX = """
.visible .entry litmus(
\t.param .u64 litmus_param_4,
\t.param .u64 litmus_param_25
)
{
\tld.param.u64 \t%rd1, [litmus_param_4];
\tld.param.u64 \t%rd2, [litmus_param_25];
\tcvta.to.global.u64 \t%rd3, %rd1;
\tcvta.to.global.u64 \t%rd4, %rd2;
\tld.global.u32 \t%r1, [%rd4+8];
\tmul.lo.s32 \t%r2, %r1, %r9;
\tmul.wide.s32 \t%rd5, %r2, 4;
\tadd.s64 \t%rd6, %rd3, %rd5;
\tmul.wide.s32 \t%rd7, %r9, 4;
\tadd.s64 \t%rd8, %rd3, %rd7;
\tbar.sync \t0;
\tst.global.u32 \t[%rd8], %r5;
\tmembar.gl;
\tatom.global.exch.b32 \t%r6, [%rd6], 1;
\tatom.global.or.b32 \t%r7, [%rd6], 0;
\tmembar.gl;
\tld.global.u32 \t%r8, [%rd8];
\tret;
}
"""


def test_ptx_accesses_follow_the_registers_to_the_test_locations():
    got = exc.ptx_accesses(_FAKE_PTX)
    assert [a["what"] for a in got] == ["st x", "F", "st y", "ld y", "F", "ld x"]
    assert got[2]["ptx"] == "atom.global.exch.b32"
    assert exc.order_kept("MP", "device", got) == {"order": "st x, F, st y, ld y, F, ld x", "fences": 2,
                                                   "thread 0": True, "thread 1": True}


def test_order_kept_finds_a_reordering_and_a_missing_fence():
    swapped = _FAKE_PTX.replace("\tst.global.u32 \t[%rd8], %r5;\n\tmembar.gl;\n\tatom.global.exch.b32 \t%r6, [%rd6], 1;",
                                "\tatom.global.exch.b32 \t%r6, [%rd6], 1;\n\tmembar.gl;\n\tst.global.u32 \t[%rd8], %r5;")
    found = exc.order_kept("MP", "device", exc.ptx_accesses(swapped))
    assert found["thread 0"] is False and found["thread 1"] is True
    no_fence = _FAKE_PTX.replace("\tmembar.gl;\n\tld.global", "\tld.global")
    assert exc.order_kept("MP", "device", exc.ptx_accesses(no_fence))["thread 1"] is False
    assert exc.order_kept("MP", "none", exc.ptx_accesses(no_fence))["thread 1"] is True
    with pytest.raises(lh.ArgumentError):
        exc.order_kept("XY", "none", [])


def _needs_compiler():
    import importlib.util

    if importlib.util.find_spec("nvidia.cuda_nvcc") is None:
        pytest.skip("the CUDA compiler wheels (nvidia-cuda-nvcc-cu12) are not installed")


def test_the_compiler_keeps_program_order_in_every_litmus_kernel():
    _needs_compiler()
    table = exc.program_order_table()
    assert table["compiler_kept_order"].all(), table[~table["compiler_kept_order"]]
    fenced = table[table["fence"] != "none"]
    assert (fenced["ptx_order"].str.count("F") == 2).all()
    weak = table[table["weak"] > 0].set_index(["test", "fence", "access"])["weak_from"]
    assert weak[("MP-reversed", "none", "plain")] == "interleaving (SC allows it)"
    assert set(weak.drop(index="MP-reversed", level=0)) == {exc.WEAK_BELOW_PTX}  # not "hardware": ptxas unread


def test_mp_ptx_lines():
    _needs_compiler()
    lines = exc.test_instructions(exc.litmus_ptx([("MP", "none", "plain")])[0])
    assert [line.split()[0] for line in lines] == ["st.global.u32", "atom.global.exch.b32", "atom.global.or.b32",
                                                    "ld.global.u32"]


# --- the lecture's lock_trick ----------------------------------------------------------------------

@pytest.mark.parametrize("n,threads", [(1, 32), (65, 32), (300, 64)])
def test_lock_trick_kernel_sums_within_blocks(n, threads):
    values = np.arange(1, n + 1, dtype=np.int32)
    got = k.run_pair_update_lock_trick(values, threads)
    if SIM:  # blocks one after the other: the trick looks right
        assert got == (int(values.sum()), n)
    assert lh.check_races(k.pair_update_lock_trick, 2, threads, values[: threads + 3],
                          np.zeros(2, np.int32)).ok


@sim_only
def test_lock_trick_table_is_gpu_only():
    with pytest.raises(lh.GPUOnlyError, match="one after the other"):
        exc.lock_trick_table()


@gpu_only
def test_lock_trick_loses_updates_on_a_gpu_and_the_lock_does_not():
    t = exc.lock_trick_table(n=2**18, runs=5).set_index("kernel")
    assert t.loc["global lock (cas + fences)", "wrong_runs"] == 0
    assert t.loc["lock_trick (syncthreads + thread 0)", "wrong_runs"] > 0


# --- the chapter's text against the reference data (drift check) and the cache-hinted spin loops ------------

def _prose() -> str:
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).resolve().parents[1] / "book" / "13_consistency.ipynb").read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def test_prose_quotes_the_lock_trick_and_litmus_tables():
    trick = lh.load_reference("ch13_lock_trick").table.set_index("kernel")
    bad, good = trick.loc["lock_trick (syncthreads + thread 0)"], trick.loc["global lock (cas + fences)"]
    threads = 256  # the table's notes: 256 threads per block
    assert good["wrong_runs"] == 0 and bad["worst_count"] % threads == 0
    lt = lh.load_reference("ch13_litmus").table.set_index(["test", "fence", "access", "pairing"])["weak"]
    phrases = [
        f"the trick was wrong in {bad['wrong_runs']} runs of {bad['runs']}",
        f"The worst run counted {bad['worst_count']:,} of the {bad['count']:,} values",
        f"of the {bad['count'] // threads:,} blocks, the updates of only {bad['worst_count'] // threads} survived",
        f"The global lock was right in all {good['runs']} runs.",
        f"later load, {lt[('SB', 'none', 'plain', 'different blocks')]:,} times in 13.1 million instances",
        f"Load buffering's weak outcome, seen {lt[('LB', 'none', 'plain', 'different blocks')]:,} times without a fence",
    ]
    text = _prose()
    missing = [p for p in phrases if " ".join(p.split()) not in text]
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    assert "weak_from = hardware" not in text and "came from the hardware" not in text  # ptxas was not read


def test_cache_hinted_spin_loops_are_hoisted():
    """The chapter (and chapter 10) say a spin on cuda.ldcg / cuda.ldcv loads once, before the loop."""
    _needs_compiler()
    table = exc.cache_hint_wait_table()
    for which in exc.CACHE_HINT_WAITS:
        assert exc.hoisted(table, which), which
        lines = exc.load_and_loop(table, which)
        assert lines and lines[0].startswith(f"ld.global.{which[2:]}"), lines
    text = _prose()
    assert "numba-cuda 0.30.4 has both" in text and "the loop tests a register forever" in text
