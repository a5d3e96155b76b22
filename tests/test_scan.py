"""Chapter 10 (scan and the patterns built on it): kernels, wrappers, models, figures, lab checkers, reference data.

Under the simulator (the default) every kernel runs on small awkward sizes with small blocks (the
simulator runs a few thousand threads per second, far fewer with barriers); on a GPU
(``LABHELPERS_BACKEND=gpu``) the same tests use the sizes 1, 31, 33, 1000, 2**20 + 7 and larger,
and the GPU-only kernels (warp shuffles) run too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.kernels import scan as sk
from markers import SIM, gpu_only, sim_only

SIZES = (1, 33, 70) if SIM else (1, 31, 33, 1000, 2**20 + 7, 2**22 + 3)
RNG = np.random.default_rng(10)


def _values(n, dtype=np.int32, seed=0):
    """Small integers, exact in int32 and float32 (-1..1 for the largest sizes, so sums stay below 2**24)."""
    small = n * 8 < 2**24
    return sk.integer_valued(n, np.random.default_rng(seed + n), dtype=dtype, low=-8 if small else -1,
                             high=8 if small else 1)


# --- definitions ------------------------------------------------------------------------------------

def test_the_slide_example_has_15_where_it_prints_14():
    x = np.array(sk.SLIDE_INPUT, np.int32)
    right = sk.sequential_scan(x)
    assert right.tolist() == [0, 3, 4, 11, 11, 15, 16, 22]
    assert np.array_equal(right, sk.scan_reference(x, inclusive=False))
    wrong = np.flatnonzero(right != np.array(sk.SLIDE_OUTPUT_AS_PRINTED))
    assert wrong.tolist() == [5] and sum(sk.SLIDE_INPUT[:5]) == 15


@pytest.mark.parametrize("op", list(sk.OPERATORS))
@pytest.mark.parametrize("inclusive", (True, False))
def test_sequential_loop_matches_numpy_for_every_operator(op, inclusive):
    x = RNG.integers(1, 5, size=20).astype(np.int64)
    assert np.array_equal(sk.sequential_scan(x, op, inclusive), sk.scan_reference(x, op, inclusive))


def test_exclusive_scan_starts_with_the_identity():
    x = np.array([3, -1, 4], np.int32)
    assert sk.scan_reference(x, "max", inclusive=False)[0] == np.iinfo(np.int32).min
    assert sk.scan_reference(x, "mul", inclusive=False).tolist() == [1, 3, -3]
    assert sk.sequential_scan(np.zeros(0, np.int32)).size == 0


def test_unknown_operator_lists_the_valid_ones():
    with pytest.raises(sk.UnknownMethodError, match="add"):
        sk.scan_reference(np.ones(3), "sub")


# --- every scan method against NumPy ----------------------------------------------------------------

@pytest.mark.parametrize("method", sk.SIMULATOR_METHODS)
def test_methods_exact_on_awkward_sizes(method):
    for n in SIZES:
        x = _values(n)
        for inclusive in (True, False) if (n == SIZES[-1] or not SIM) else (True,):
            got = sk.scan(x, method, inclusive)
            assert got.dtype == np.int32
            assert np.array_equal(got, sk.scan_reference(x, inclusive=inclusive)), (method, n, inclusive)


@pytest.mark.parametrize("method", ("scan_then_propagate", "lookback", "lookback_warp", "chained"))
def test_float32_within_the_stated_bound(method):
    x = (RNG.standard_normal(200 if SIM else 2**20 + 7) * 100).astype(np.float32)
    got = sk.scan(x, method, inclusive=True).astype(np.float64)
    assert np.all(np.abs(got - sk.scan_reference(x)) <= sk.scan_error_bound(x))


@pytest.mark.parametrize("method,threads", [("hillis_steele", 48), ("reduce_then_scan", 64),
                                            ("lookback", 64), ("tiled_reduce_then_scan", 64)])
def test_other_block_sizes(method, threads):
    x = _values(100 if SIM else 3 * 2**18 + 5)
    assert np.array_equal(sk.scan(x, method, threads=threads), sk.scan_reference(x))


def test_lookback_in_place_and_without_vector_loads():
    x = _values(200 if SIM else 2**21 + 9)
    s = sk.Scan(x, "lookback", inclusive=False, vector=False)
    assert np.array_equal(s(), sk.scan_reference(x, inclusive=False))
    d = lh.to_device(x)
    sk.Scan(d, "lookback", out=d)()
    assert np.array_equal(d.copy_to_host(), sk.scan_reference(x))


def test_a_scan_object_launches_again_and_again():
    x = _values(40 if SIM else 2**20 + 7)
    for method in ("lookback", "lookback_warp", "chained"):
        s = sk.Scan(x, method)
        for _ in range(3):  # the epochs keep old flags from counting
            assert np.array_equal(s(), sk.scan_reference(x))


def test_empty_input():
    for method in ("lookback", "scan_then_propagate"):
        assert sk.scan(np.zeros(0, np.int32), method).size == 0


@gpu_only
@pytest.mark.parametrize("dtype", (np.int32, np.float32))
@pytest.mark.parametrize("method", ("lookback", "lookback_warp"))
@pytest.mark.parametrize("shape", [(128, 16), (512, 16), (1024, 4), (128, 32)])
def test_lookback_tile_shapes_on_gpu(dtype, method, shape):
    for n in (1, 4097, 2**20 + 7, 2**24 + 1):
        x = _values(n, dtype) if n < 2**21 else np.ones(n, dtype)
        for shuffle in (True, False):
            tk = sk.tile_kernels(dtype, *shape, shuffle=shuffle)
            assert tk.config.shuffle is shuffle
        got = sk.scan(x, method, threads=shape[0], items=shape[1])
        assert np.array_equal(got, sk.scan_reference(x).astype(dtype)), (method, shape, n)


@gpu_only
def test_warp_shuffle_method_on_gpu():
    for n in SIZES:
        x = _values(n)
        for inclusive in (True, False):
            assert np.array_equal(sk.scan(x, "warp_shuffle", inclusive), sk.scan_reference(x, inclusive=inclusive))


@sim_only
def test_warp_shuffle_is_gpu_only_here():
    with pytest.raises(lh.GPUOnlyError, match="ch10_scan_methods"):
        sk.scan(np.ones(4, np.int32), "warp_shuffle")
    with pytest.raises(lh.GPUOnlyError):
        sk.block_scan(np.ones(4, np.int32), "shuffle")
    with pytest.raises(lh.GPUOnlyError):
        sk.tile_kernels(np.int32, shuffle=True)


# --- the in-block kernels and their pitfalls --------------------------------------------------------

@pytest.mark.parametrize("kernel,per", [("hillis_steele", 1), ("blelloch", 2), ("blelloch_unpadded", 2)])
def test_block_kernels_scan_each_block(kernel, per):
    x = _values(70)
    for threads in ((16,) if SIM else (8, 32, 128)):
        got = sk.block_scan(x, kernel, threads=threads)
        assert np.array_equal(got, sk.block_scan_reference(x, per * threads)), (kernel, threads)
        got = sk.block_scan(x, kernel, inclusive=False, threads=threads)
        assert np.array_equal(got, sk.block_scan_reference(x, per * threads, inclusive=False))


def test_seed_loop_bound_loses_the_last_step():
    x = np.arange(1, 17, dtype=np.int32)
    got = sk.block_scan(x, "hillis_steele_seed_bounds", threads=16)
    ref = sk.scan_reference(x)
    assert np.array_equal(got[:8], ref[:8]) and not np.array_equal(got[8:], ref[8:])


@sim_only
def test_single_buffer_hillis_steele_races_under_the_simulator():
    x = np.arange(1, 33, dtype=np.int32)
    results = [sk.block_scan(x, "hillis_steele_single_buffer", threads=32) for _ in range(3)]
    assert any(not np.array_equal(r, sk.scan_reference(x)) for r in results)


@gpu_only
def test_shuffle_block_kernel_on_gpu():
    x = _values(5000)
    assert np.array_equal(sk.block_scan(x, "shuffle", threads=256), sk.block_scan_reference(x, 256))


# --- patterns ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ("single_pass", "three_kernels"))
def test_compaction_keeps_order_and_count(method):
    for n in (0,) + SIZES:
        x = RNG.standard_normal(n).astype(np.float32)
        for t in (0.3, -10.0, 10.0) if (n < 100 or not SIM) else (0.3,):  # some, all, none kept
            c = sk.Compactor(x, t, method)
            c.launch()
            assert np.array_equal(c.result(), sk.compact_reference(x, t)), (method, n, t)
            assert c.count() == int(np.count_nonzero(x > t))


def test_compaction_of_int32():
    x = _values(77)
    assert np.array_equal(sk.compact(x, 0), x[x > 0])


def test_the_slide_split_table_exactly():
    table = sk.split_table(np.array(sk.SPLIT_KEYS, np.uint32), bit=0)
    for key in ("b", "e", "f", "t", "d", "out"):
        assert table[key].tolist() == list(sk.SPLIT_TABLE[key]), key
    assert table["totalFalses"] == 4
    got = sk.radix_split(np.array(sk.SPLIT_KEYS, np.uint32), 0)
    assert got.tolist() == list(sk.SPLIT_TABLE["out"])
    assert [format(k, "03b") for k in got] == ["100", "010", "110", "000", "111", "011", "101", "001"]


def test_radix_split_is_a_stable_partition():
    for n in SIZES:
        keys = RNG.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
        for bit in ((0,) if SIM and n < SIZES[-1] else (0, 31)):
            assert np.array_equal(sk.radix_split(keys, bit), sk.split_reference(keys, bit))


@gpu_only
@pytest.mark.parametrize("bits", (3, 4, 5, 6))
def test_radix_sort_with_duplicates(bits):
    for n in (1, 33, 1000, 2**20 + 7):
        keys = RNG.integers(0, 50, size=n).astype(np.uint32) * np.uint32(2**26 + 3)  # duplicates, high bits set
        threads = 128 if bits >= 5 else None
        assert np.array_equal(sk.radix_sort(keys, bits, threads), np.sort(keys)), (bits, n)


def test_radix_sort_of_short_keys():  # (each pass is slow in the simulator: here 8-bit keys, 2 passes)
    keys = RNG.integers(0, 256, size=90 if SIM else 2**20 + 7).astype(np.uint32)
    keys[::5] = keys[1]  # duplicates
    sorter = sk.RadixSorter(keys, bits=4, key_bits=8)
    assert sorter.passes == 2 and np.array_equal(sorter(), np.sort(keys))
    assert sk.radix_sort(np.zeros(0, np.uint32)).size == 0


def test_radix_bytes_and_passes():
    assert sk.radix_passes(4) == 8 and sk.radix_passes(5) == 7 and sk.radix_passes(8) == 4
    assert sk.radix_pass_bytes(4096, 4, 4096) == 12 * 4096 + 16 * 16


@pytest.mark.parametrize("method", ("shared", "global"))
def test_histogram_matches_bincount(method):
    for values in (RNG.integers(0, 16, size=700).astype(np.int32), np.full(300, 5, np.int32)):
        assert np.array_equal(sk.histogram(values, 16, method), np.bincount(values, minlength=16))


# --- SpMV ---------------------------------------------------------------------------------------------

def _slide_csr():
    return sk.CSR(np.array(sk.SLIDE_ROW_PTR, np.int32), np.array(sk.SLIDE_CSR_INDEX, np.int32),
                  np.array(sk.SLIDE_CSR_VALUES, np.float32), 3, "slide")


SPMV_SIM = ("scalar", "segmented_scan", "merge", "merge_combined")


def _matrices():
    if SIM:
        return [_slide_csr(), sk.laplacian_2d(3), sk.power_law_matrix(40, 3),
                sk.empty_and_long_rows(40, long_rows=2, long_length=30), sk.csr_from_dense(np.zeros((4, 3)))]
    return [_slide_csr(), sk.laplacian_2d(300), sk.power_law_matrix(50_000, 8),
            sk.empty_and_long_rows(40_000, long_rows=3, long_length=30_000), sk.csr_from_dense(np.zeros((4, 3)))]


@pytest.mark.parametrize("method", SPMV_SIM if SIM else tuple(sk.SPMV_METHODS))
def test_spmv_within_the_float32_bound(method):
    for a in _matrices():
        x = RNG.uniform(-1, 1, a.n_cols).astype(np.float32)
        y = sk.spmv(a, x, method)
        err = np.abs(y - sk.spmv_reference(a.row_ptr, a.col_idx, a.values, x))
        assert np.all(err <= sk.spmv_error_bound(a.row_ptr, a.col_idx, a.values, x)), (method, a.name)


def test_the_slide_matrix():
    x = np.array([1.0, 10.0, 100.0], np.float32)
    # a..f = 1..6: y0 = a x0 + b x2, y1 = c x0 + d x1 + e x2, y2 = f x2
    assert sk.spmv(_slide_csr(), x, "merge").tolist() == [201.0, 543.0, 600.0]


@pytest.mark.parametrize("method", ("merge", "merge_combined"))
def test_spmv_merge_rows_across_tiles(method):
    """Rows longer than a tile (several blocks add to one row), empty rows between them, and n = 1."""
    sparse = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(5)
    lengths = np.array([0, 0, 3000, 0, 1, 2500] + [0] * 200 + [1500])
    row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cases = [sk.CSR(row_ptr, (np.arange(row_ptr[-1]) % 207).astype(np.int32),
                    rng.random(int(row_ptr[-1]), dtype=np.float32) - 0.5, 207, "long rows across tiles"),
             sk.CSR(np.array([0, 4500], np.int32), np.arange(4500, dtype=np.int32),
                    rng.random(4500, dtype=np.float32) - 0.5, 4500, "one huge row"),
             sk.CSR(np.array([0, 1], np.int32), np.zeros(1, np.int32), np.ones(1, np.float32), 1, "n = 1")]
    for a in cases:
        x = rng.random(a.n_cols, dtype=np.float32)
        y = sk.spmv(a, x, method)
        m = sparse.csr_matrix((a.values, a.col_idx, a.row_ptr), shape=(a.n_rows, a.n_cols))
        err = np.abs(y - m.astype(np.float64) @ x.astype(np.float64))
        assert np.all(err <= sk.spmv_error_bound(a.row_ptr, a.col_idx, a.values, x)), (method, a.name)


def test_spmv_reference_agrees_with_scipy():
    sparse = pytest.importorskip("scipy.sparse")
    a = sk.power_law_matrix(200, 5)
    x = RNG.uniform(-1, 1, a.n_cols).astype(np.float32)
    m = sparse.csr_matrix((a.values.astype(np.float64), a.col_idx, a.row_ptr), shape=(a.n_rows, a.n_cols))
    assert np.allclose(m @ x.astype(np.float64), sk.spmv_reference(a.row_ptr, a.col_idx, a.values, x))


def test_laplacian_matches_its_stencil():
    a = sk.laplacian_2d(4)
    dense = np.zeros((16, 16))
    dense[np.repeat(np.arange(16), a.row_lengths()), a.col_idx] = a.values
    assert np.array_equal(np.diag(dense), np.full(16, 4.0))
    assert dense.sum(axis=1).tolist() == [2, 1, 1, 2, 1, 0, 0, 1, 1, 0, 0, 1, 2, 1, 1, 2]


def test_matrix_descriptions():
    d = sk.empty_and_long_rows(1000, long_rows=3, long_length=400).describe()
    assert d["empty_rows"] > 300 and d["max_row"] == 400
    assert sk.power_law_matrix(1000).describe()["max_row"] > 40


@sim_only
def test_warp_per_row_is_gpu_only_here():
    with pytest.raises(lh.GPUOnlyError, match="ch10_spmv"):
        sk.SpMV(_slide_csr(), np.ones(3, np.float32), "warp_per_row")


def test_row_ptr_without_its_last_entry_is_named():
    with pytest.raises(lh.ArrayArgumentError, match="last entry is missing"):
        sk.check_csr(np.array(sk.SLIDE_ROW_PTR_AS_PRINTED, np.int32), np.array(sk.SLIDE_CSR_INDEX, np.int32),
                     np.array(sk.SLIDE_CSR_VALUES, np.float32))


@pytest.mark.parametrize("row_ptr,match", [([1, 2, 6], "start with 0"), ([0, 4, 2, 6], "never decrease"),
                                           ([0, 2, 5, 7], "ends with 7")])
def test_bad_row_ptr(row_ptr, match):
    with pytest.raises(lh.ArrayArgumentError, match=match):
        sk.check_csr(np.array(row_ptr, np.int32), np.array(sk.SLIDE_CSR_INDEX, np.int32),
                     np.array(sk.SLIDE_CSR_VALUES, np.float32))


def test_bad_spmv_inputs():
    a = _slide_csr()
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        sk.spmv(a, np.ones(4, np.float32))
    with pytest.raises(lh.ArrayArgumentError, match="float32"):
        sk.spmv(a, np.ones(3, np.float64))
    with pytest.raises(lh.ArrayArgumentError, match="outside"):
        sk.spmv(sk.CSR(a.row_ptr, np.array([0, 2, 0, 1, 2, 3], np.int32), a.values, 3), np.ones(3, np.float32))
    with pytest.raises(lh.LabError, match="method"):
        sk.spmv(a, np.ones(3, np.float32), "vector")


# --- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.ones(8, np.float64), np.ones((2, 4), np.int32), np.ones(16, np.int32)[::2],
                                 [1, 2, 3], None])
def test_bad_arrays_are_rejected(bad):
    with pytest.raises(lh.ArrayArgumentError):
        sk.scan(bad)


@pytest.mark.parametrize("method,threads", [("lookback", 100), ("lookback", 0), ("scan_then_propagate", 48),
                                            ("hillis_steele", 2048), ("chained", 96), ("hillis_steele", 32.5)])
def test_bad_block_sizes(method, threads):
    with pytest.raises(lh.LaunchConfigError):
        sk.scan(np.ones(8, np.int32), method, threads=threads)


def test_bad_items_method_and_flags():
    with pytest.raises(lh.LaunchConfigError, match="items"):
        sk.scan(np.ones(8, np.int32), "lookback", items=12)
    with pytest.raises(lh.ArgumentError, match="items"):
        sk.scan(np.ones(8, np.int32), "chained", items=8)
    with pytest.raises(sk.UnknownMethodError, match="lookback"):
        sk.scan(np.ones(8, np.int32), "fastest")
    with pytest.raises(lh.ArgumentError, match="inclusive"):
        sk.scan(np.ones(8, np.int32), inclusive="yes")
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        sk.Scan(np.ones(8, np.int32), out=lh.to_device(np.ones(7, np.int32)))


def test_bad_pattern_inputs():
    with pytest.raises(lh.ArgumentError, match="finite"):
        sk.compact(np.ones(4, np.float32), float("nan"))
    with pytest.raises(lh.ArrayArgumentError, match="uint32"):
        sk.radix_sort(np.ones(4, np.int32))
    with pytest.raises(lh.ArgumentError, match="bits"):
        sk.radix_sort(np.ones(4, np.uint32), bits=0)
    with pytest.raises(lh.LaunchConfigError, match="shared memory"):
        sk.RadixSorter(np.ones(4, np.uint32), bits=8, threads=256, items=16)
    with pytest.raises(lh.ArrayArgumentError, match=r"\[0, 8\)"):
        sk.histogram(np.array([0, 9], np.int32), 8)
    with pytest.raises(lh.ArgumentError, match="bit"):
        sk.radix_split(np.ones(4, np.uint32), 32)
    with pytest.raises(lh.ArgumentError):
        sk.integer_valued(-1)


# --- the step model and the figures ---------------------------------------------------------------

def test_model_steps_match_the_kernels():
    x = [3, 1, 7, 0, 4, 1, 6, 3, 5, 2, 8, 1, 2, 6, 0, 4]
    from labhelpers.models import scan as model
    assert list(model.hillis_steele_steps(x)[-1].values) == sk.scan_reference(np.array(x)).tolist()
    assert list(model.blelloch_steps(x)[-1].values) == sk.scan_reference(np.array(x), inclusive=False).tolist()
    assert len(model.hillis_steele_steps(x)) == 5 and len(model.blelloch_steps(x)) == 10
    assert sum(s.adds for s in model.hillis_steele_steps(x)) == model.work_depth("hillis_steele", 16)["adds"]
    assert sum(s.adds for s in model.blelloch_steps(x)) == model.work_depth("blelloch", 16)["adds"]


def test_model_reproduces_the_slide_bounds():
    from labhelpers.models import scan as model
    x = list(sk.SLIDE_INPUT)
    assert list(model.hillis_steele_steps(x, seed_bounds=True)[-1].values) != sk.scan_reference(np.array(x)).tolist()
    steps = model.blelloch_steps(x, seed_bounds=True)
    assert list(steps[-1].values) == sk.scan_reference(np.array(x), inclusive=False).tolist()  # scan survives
    assert [s for s in steps if s.phase == "up"][-1].values[-1] != sum(x)  # the total does not


def test_bank_conflict_model():
    from labhelpers.models import scan as model
    unpadded = [r["worst_conflict"] for r in model.blelloch_bank_conflicts(256, padded=False)]
    padded = [r["worst_conflict"] for r in model.blelloch_bank_conflicts(256, padded=True)]
    assert max(unpadded) == 16 and max(padded) == 1


def test_quicksort_traces():
    from labhelpers.models import scan as model
    slide = model.quicksort_trace([5, 3, 7, 4, 6])
    assert slide[0].flags == [[False, False, True, False, True]] and slide[0].segments == [[5, 3, 4], [7, 6]]
    assert slide[1].flags == [[True, False, False], [True, False]] and not slide[-1].progress
    stuck = model.quicksort_trace([5, 3, 7, 4, 6], (">",))
    assert not stuck[-1].progress and stuck[-1].segments == [[5, 3, 4], [7, 6]]
    three = model.quicksort_trace([5, 3, 7, 4, 6, 5, 1], "three_way")
    assert [v for seg in three[-1].segments for v in seg] == [1, 3, 4, 5, 5, 6, 7]


def test_model_rejects_bad_input():
    from labhelpers.models import scan as model
    with pytest.raises(lh.ArgumentError, match="power of two"):
        model.blelloch_steps([1, 2, 3])
    with pytest.raises(lh.ArgumentError):
        model.steps_of("kogge_stone", [1, 2])


def test_figures_return_figures():
    import matplotlib.figure
    from labhelpers.figures import scan as figs
    import matplotlib.pyplot as plt
    for algorithm, step in (("hillis_steele", 0), ("hillis_steele", 3), ("blelloch", 5), ("blelloch", 99)):
        fig, ax = plt.subplots(figsize=(9, 3.4))  # a drawer draws on the axes it is given, and returns nothing
        assert figs.draw_scan_step(ax, algorithm, step) is None and ax.patches
        assert isinstance(fig, matplotlib.figure.Figure)
    assert isinstance(figs.plot_bank_conflicts(), matplotlib.figure.Figure)
    for name, draw in (("ch10_scan_methods", figs.plot_methods), ("ch10_scan_sizes", figs.plot_sizes),
                       ("ch10_lookback_tiles", figs.plot_tiles), ("ch10_compaction", figs.plot_compaction),
                       ("ch10_radix_sort", figs.plot_radix), ("ch10_spmv", figs.plot_spmv)):
        assert isinstance(draw(lh.live_or_reference(None, name)), matplotlib.figure.Figure), name
    plt.close("all")


def test_scan_figures_draw_cub_scan_as_a_yardstick_line_old_tables_too():
    """``cub_scan`` rows (CUB's scan, no copy) are a line like the copy and cupy.cumsum, never a method bar;
    tables collected before it was timed (no such rows) still draw."""
    import dataclasses

    import matplotlib.pyplot as plt
    import pandas as pd
    from labhelpers.figures import scan as figs

    for name, draw in (("ch10_scan_methods", figs.plot_methods), ("ch10_scan_sizes", figs.plot_sizes)):
        ref = lh.live_or_reference(None, name)
        t = ref.table
        yard = t[t["method"] == "cupy_cumsum"].assign(method="cub_scan", gbps=t["gbps"].max())
        if "title" in yard:
            yard = yard.assign(title="CUB")
        for table in (t[t["method"] != "cub_scan"], pd.concat([t, yard], ignore_index=True)):
            fig = draw(dataclasses.replace(ref, table=table))
            ax = fig.axes[0]
            assert "CUB" not in " ".join(tick.get_text() for tick in ax.get_yticklabels())
            labels = ax.get_legend_handles_labels()[1]
            assert ("CUB's scan" in labels) == ("cub_scan" in set(table["method"]))
    plt.close("all")


@sim_only
def test_cub_scan_is_gpu_only_here():
    from labhelpers.experiments import scan as ex

    with pytest.raises(lh.GPUOnlyError):
        ex.cub_scan(np.ones(4, np.int32))
    with pytest.raises(lh.GPUOnlyError):
        ex.time_cub_scan(np.ones(4, np.int32))


@gpu_only
def test_cub_scan_scans_in_place_like_cumsum():
    import cupy as cp
    from labhelpers.experiments import scan as ex

    for n, dtype in ((1, np.int32), (1000, np.int32), (4099, np.float32)):
        x = ex.random_values(n, dtype)
        buf = x.copy()
        ex.cub_scan(buf)
        assert ex._scan_ok(buf, x)
    with pytest.raises(ValueError):
        ex.cub_scan(cp.ones((2, 2), cp.int32))


# --- reference data and the numbers the chapter's prose quotes -----------------------------------------

def _ref(name):
    t = lh.load_reference(name).table
    assert len(t) and t["ok"].astype(bool).all(), f"{name}: every measured result was checked"
    return t


def _prose(path: Path = Path(__file__).resolve().parents[1] / "book" / "10_scan.ipynb") -> str:
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def test_reference_data_supports_the_prose():
    sizes = _ref("ch10_scan_sizes")
    at = {d: sizes[(sizes["n"] == 2**28) & (sizes["dtype"] == d)].set_index("method")["gbps"]
          for d in ("int32", "float32")}
    big = at["int32"]
    for g in at.values():  # the verdicts: the warp look-back meets the target (90% of CUB's scan), the others miss it
        assert g["lookback_warp"] / g["cub_scan"] >= 0.90
        assert g["lookback"] / g["cub_scan"] < 0.90 and g["tiled_reduce_then_scan"] / g["cub_scan"] < 0.90
        assert g["lookback"] < g["tiled_reduce_then_scan"] < g["cub_scan"] < g["copy"]
        assert g["lookback_warp"] < g["copy"]
    assert 0.6 < big["tiled_reduce_then_scan"] / big["copy"] < 0.72
    rts = at["int32"]["tiled_reduce_then_scan"]
    f32 = at["float32"]
    mid = {d: sizes[(sizes["n"] == 2**24) & (sizes["dtype"] == d)].set_index("method")["gbps"]
           for d in ("int32", "float32")}
    phrases = [
        f"The three-kernel scan runs its 12 bytes per element at {rts * 12 / 8 / big['copy']:.0%} of the copy's speed.",
        f"it runs at {big['cub_scan'] / big['copy']:.0%} of the copy, {big['cub_scan'] / big['lookback']:.1f} times "
        "this chapter's first single pass",
        f"The warp look-back meets the target: {big['lookback_warp'] / big['cub_scan']:.0%} of CUB's scan on int32 "
        f"({big['lookback_warp']:,.0f} against {big['cub_scan']:,.0f} GB/s), "
        f"{f32['lookback_warp'] / f32['cub_scan']:.0%} on float32",
        f"({mid['int32']['lookback_warp'] / mid['int32']['cub_scan']:.0%} on int32, "
        f"{mid['float32']['lookback_warp'] / mid['float32']['cub_scan']:.0%} on float32)",
        f"The block look-back stays at {big['lookback'] / big['cub_scan']:.0%} of CUB's scan (int32: "
        f"{big['lookback']:,.0f} GB/s)",
        f"and runs at {big['cupy_cumsum'] / big['cub_scan']:.0%} of CUB's scan itself",
        f"reaches {rts / big['cub_scan']:.0%} of CUB's scan ({f32['tiled_reduce_then_scan'] / f32['cub_scan']:.0%} "
        "on float32)",
        f"(12 bytes per element at {rts * 12 / 8 / big['copy']:.0%} of the copy's speed) and to reach only "
        f"{big['lookback'] / big['cub_scan']:.0%} of CUB's single pass",
        f"the same algorithm reaches {big['lookback_warp'] / big['cub_scan']:.0%} of CUB's scan",
        f"`cupy.cumsum` copies before it scans and runs at {big['cupy_cumsum'] / big['cub_scan']:.0%} of CUB's scan.",
    ]
    methods = _ref("ch10_scan_methods").set_index("method")
    hand_off_us = methods.loc["chained", "median_ms"] * 1e3 / (methods.loc["chained", "n"] / 512)
    assert 0.5 < hand_off_us < 2  # "about a microsecond" per hand-off
    tiles = _ref("ch10_lookback_tiles")
    tiles = tiles.assign(ns=tiles["median_ms"] * 1e6 / (tiles["n"] / tiles["tile"]))
    block, warp = tiles[tiles["lookback"] == "block"], tiles[tiles["lookback"] == "warp"]
    assert block["ns"].between(10, 100).all()  # "tens of nanoseconds per tile"
    t16 = block[(block["threads"] == 256) & (block["items"] == 16)].set_index("vector")["gbps"]
    t32 = float(block.loc[(block["threads"] == 256) & (block["items"] == 32), "gbps"].iloc[0])
    assert abs(t16[False] / t16[True] - 1) < 0.05  # 16-byte loads: "no difference at all"
    w = warp.set_index(["threads", "items", "vector"])["gbps"]
    assert w.idxmax() == (128, 32, True) and sk.tiled.WARP_LOOKBACK_TILE == (128, 32)  # "the fastest shape"
    phrases += [
        f"halve the number of tiles and gain {t32 / t16[True] - 1:.0%}",
        f"a tile costs {block['ns'].min():.0f} to {block['ns'].max():.0f} nanoseconds, depending on its shape, and "
        f"{int(tiles['n'].iloc[0]) // (256 * 16):,} of them (at 256 × 16)",
        f"128 × 32 is the fastest shape ({w[(128, 32, True)]:,.0f} GB/s), and 4-byte loads now cost "
        f"{1 - w[(128, 32, False)] / w[(128, 32, True)]:.0%} of the speed ({w[(128, 32, False)]:,.0f} GB/s)",
        f"with 512 threads of 8 items runs at {w[(512, 8, True)]:,.0f} GB/s",
    ]
    blocks = _ref("ch10_block_scans").groupby("kernel")["gbps"].max()
    assert blocks["blelloch"] < blocks["blelloch_unpadded"] and blocks["shuffle"] == blocks.max()
    comp = _ref("ch10_compaction")
    for _, g in comp.groupby("keep_fraction"):
        g = g.set_index("method")["median_ms"]
        assert 1.7 < g["cupy_mask"] / g["single_pass"] < 2.3  # "a factor of about two"
    # "Every method copies its count to the host ... timed from Python": the host's issue cost is the whole time
    assert (comp["issue_ms"] / comp["median_ms"] > 0.9).all()
    radix = _ref("ch10_radix_sort")
    mine = radix[radix["method"] == "radix"].set_index("bits")["gkeys"]
    cub = float(radix.loc[radix["method"] == "cupy_sort", "gkeys"].iloc[0])
    assert mine.groupby(level=0).max().idxmax() == 4 and mine.max() / cub >= 0.30  # "four bits"; target met
    phrases.append(f"{mine.max() / cub:.0%} of its speed from a few hundred lines of Python")
    spmv = _ref("ch10_spmv")
    speedups = []
    for matrix, g in spmv.groupby("matrix"):
        g = g.set_index("method")["gbps"]
        if matrix.startswith("2D Laplacian"):
            assert g["scalar"] > g["cusparse"]  # "it beats cuSPARSE"
        else:
            assert g["merge_combined"] / g["cusparse"] >= 0.70  # "met on all three matrices"
            assert g["merge"] / g["cusparse"] < 0.2  # "falls to a tenth of cuSPARSE"
            speedups.append(round(g["merge_combined"] / g["merge"]))
    assert sorted(speedups) == [7, 10]  # merge_combined against merge: "seven to ten times faster"
    desc = spmv.drop_duplicates("matrix").set_index("matrix")
    assert sorted(desc["rows"]) == [2**23, 2**23, 2**24] and desc["max_row"].max() > 10**6
    assert round(desc["max_row"].max() / 1e6, 1) == 5.9  # "a row of 5.9 million non-zeros"
    assert sk.MERGE_ITEMS == 4  # "4 per thread", "Four items per thread"
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)



#: The Nsight Compute run the chapter's profile table quotes (bench/tuning/profile.py, tools/device_profile.sh).
NCU_CSV = Path(__file__).resolve().parents[1] / "bench" / "tuning" / "results" / "ncu-2026-11-29.csv"


def _ncu_metrics(kernel: str) -> dict:
    """``{metric: value}`` of the one profiled launch whose kernel name contains ``kernel``."""
    import csv

    found: dict = {}
    ids = set()
    with NCU_CSV.open() as f:
        for row in csv.reader(f):
            if len(row) > 14 and kernel in row[4] and row[0].isdigit():
                ids.add(row[0])
                found[row[-3]] = float(row[-1].replace(",", ""))
    assert len(ids) == 1, f"{kernel}: expected one profiled launch, found {sorted(ids)}"
    return found


def test_chapter_claims_the_profile_table():
    """The Nsight Compute figures of "What the profiler says" and the verdict, recomputed from the CSV."""
    n = 2**28
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    kinds = {"block": _ncu_metrics("tile_scan_lookback["), "warp": _ncu_metrics("tile_scan_warp_lookback["),
             "cub": _ncu_metrics("DeviceScanKernel<")}
    block, warp, cub = kinds["block"], kinds["warp"], kinds["cub"]
    per = {k: m["smsp__inst_executed.sum"] / n for k, m in kinds.items()}
    cols = ["block", "warp", "cub"]
    rows = [
        ("kernel time (µs)", [f"{kinds[k]['gpu__time_duration.sum'] / 1e3:,.0f}" for k in cols]),
        ("DRAM throughput (% of peak)", [f"{kinds[k]['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f}"
                                         for k in cols]),
        ("warp instructions per element", [f"{per[k]:.2f}" for k in cols]),
        ("issue slots busy (% of cycles)", [f"{kinds[k]['smsp__issue_active.avg.pct_of_peak_sustained_active']:.1f}"
                                            for k in cols]),
        ("cycles stalled at a barrier, per instruction issued", [f"{kinds[k][stall.format('barrier')]:.2f}"
                                                                 for k in cols]),
    ]
    phrases = [f"| {name} | " + " | ".join(values) + " |" for name, values in rows]
    reasons = {k: v for k, v in block.items() if k.startswith("smsp__average_warps_issue_stalled_")
               and not k.endswith("selected_per_issue_active.ratio") or k == stall.format("not_selected")}
    top = sorted(reasons, key=reasons.get, reverse=True)
    assert top[0] == stall.format("barrier") and top[1] == stall.format("not_selected")  # "the next reason"
    assert cub["smsp__issue_active.avg.pct_of_peak_sustained_active"] < 20  # "idle most of the time"
    assert 0.08 < per["cub"] / per["block"] < 0.12  # "a tenth as many instructions"
    assert 0.45 < warp[stall.format("barrier")] / block[stall.format("barrier")] < 0.6  # "about half"
    phrases += [
        f"The memory is idle most of the time ({block['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f}% of "
        "its peak)",
        f"{per['block']:.2f} warp instructions per element, "
        f"{per['block'] * block['smsp__thread_inst_executed_per_inst_executed.ratio']:.0f} per element counted "
        "thread by thread",
        f"{block[stall.format('barrier')]:.2f} cycles per instruction issued, against "
        f"{block[stall.format('not_selected')]:.2f} for the next reason",
        f"{per['block'] / per['warp']:.1f} times fewer instructions than the block look-back",
        f"a memory as busy as under CUB ({warp['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f}% of its "
        f"peak against {cub['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f}%)",
        f"It still issues {per['warp'] / per['cub']:.1f} times CUB's instructions per element",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's profile no longer matches " + NCU_CSV.name + ":\n" + "\n".join(missing)


def test_segmented_scan_prose_matches_the_reference_data():
    """The notes' "3 times slower" against ch10_segmented: the figures the chapter quotes, recomputed."""
    seg = _ref("ch10_segmented")
    kinds = seg.set_index("kind")
    s = seg[seg["kind"] == "segmented"]
    hs, lb = kinds.loc["hillis_steele"], kinds.loc["lookback"]
    per_element = seg["gbps"] * 1e9 * seg["median_ms"] * 1e-3 / seg["n"]  # bytes each method moves
    seg_bytes = per_element[seg["kind"] == "segmented"].round().unique()
    hs_bytes = round(float(per_element[seg["kind"] == "hillis_steele"].iloc[0]))
    assert list(seg_bytes) == [12] and hs_bytes == 8  # "12 per element ... against 8"
    assert (s["ratio_hillis_steele"] < 3).all() and (s["ratio_lookback"] < 3).all()  # "Neither comparison gives 3"
    by_length = s.set_index("segment_length")["ratio_hillis_steele"]
    phrases = [
        f"took {s['ratio_hillis_steele'].min():.2f} to {s['ratio_hillis_steele'].max():.2f} times as long as the "
        "unsegmented scan of the same structure",
        f"it moves {seg_bytes[0] / hs_bytes:.1f} times the bytes ({seg_bytes[0]:.0f} per element",
        f"against {hs_bytes})",
        f"and {s['ratio_lookback'].min():.1f} to {s['ratio_lookback'].max():.1f} times as long as the single pass",
        f"which is itself {hs['ratio_lookback']:.1f} times faster than `hillis_steele`",
        f"({by_length[32.0]:.2f} with segments of 32, {by_length[by_length.index.max()]:.2f} with a single segment)",
    ]
    assert int(s.loc[s["segment_length"] == s["segment_length"].max(), "segments"].iloc[0]) == 1
    assert lb["ratio_lookback"] == 1.0
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches ch10_segmented:\n" + "\n".join(missing)
    text = _prose()
    assert "SpMV above" not in text and "not been profiled" not in text


# --- lab checkers: tests/test_lab_mutants_08_10.py (one mutant per bug class is rejected; solutions: test_labs) -


# --- segmented scan, enumerate, distribute ---------------------------------------------------------

SEGMENT_SIZES = (1, 2, 31, 33, 100, 301) if SIM else (1, 2, 31, 33, 100, 1100, 70_001)  # 301 at 5 threads: several levels


@pytest.mark.parametrize("density", [0.0, 0.2, 1.0])
def test_segmented_scan_matches_numpy(density):
    rng = np.random.default_rng(11)
    for n in SEGMENT_SIZES:
        values = rng.integers(-8, 9, n).astype(np.float32)
        heads = (rng.random(n) < density).astype(np.int32)
        for threads in (32, 5) if SIM else (256, 5):
            got = sk.segmented_scan(values, heads, threads=threads)
            np.testing.assert_array_equal(got, sk.segmented_scan_reference(values, heads), err_msg=f"n={n} t={threads}")


def test_segmented_scan_by_hand_and_heads_types():
    values = np.ones(6, np.float32)
    for heads in (np.array([0, 0, 1, 0, 1, 1], np.int32), np.array([0, 0, 1, 0, 1, 1], bool),
                  np.array([0, 0, 1, 0, 1, 1], np.uint8)):
        assert sk.segmented_scan(values, heads).tolist() == [1, 2, 1, 2, 1, 1]


def test_distribute_and_enumerate_match_numpy():
    rng = np.random.default_rng(12)
    assert sk.distribute(np.arange(6, dtype=np.float32), np.array([0, 0, 1, 0, 1, 1])).tolist() == [0, 0, 2, 2, 4, 5]
    assert sk.enumerate_flags(np.array([1, 0, 1, 1, 0], bool)).tolist() == [0, 1, 1, 2, 3]
    for n in SEGMENT_SIZES:
        values = rng.integers(-8, 9, n).astype(np.float32)
        heads = rng.random(n) < 0.3
        np.testing.assert_array_equal(sk.distribute(values, heads), sk.distribute_reference(values, heads))
        np.testing.assert_array_equal(sk.enumerate_flags(heads), sk.enumerate_reference(heads))
    assert sk.enumerate_flags(np.zeros(0, bool)).size == 0


def test_segmented_scan_block_has_no_race_with_a_partial_block():
    values = np.arange(40, dtype=np.float32)
    heads = (np.arange(40) % 7 == 0).astype(np.int32)
    report = lh.check_races(sk.segmented_scan_block, 2, 32, values, heads, np.zeros(40, np.float32),
                            np.zeros(40, np.int32), np.zeros(2, np.float32), np.zeros(2, np.int32))
    assert report.ok, report


@pytest.mark.parametrize("values, heads, match", [
    (np.ones(3, np.float64), np.zeros(3, np.int32), "float32"),
    (np.ones(3, np.float32), np.zeros(4, np.int32), "one flag per value"),
    (np.ones(3, np.float32), np.zeros(3, np.float32), "integer or bool"),
    (np.ones(0, np.float32), np.zeros(0, np.int32), "empty"),
])
def test_segmented_scan_bad_input(values, heads, match):
    with pytest.raises(lh.LabError, match=match):
        sk.segmented_scan(values, heads)


@sim_only
def test_segmented_table_needs_a_gpu():
    from labhelpers.experiments import scan as ex

    with pytest.raises(lh.GPUOnlyError):
        ex.segmented_table(64)


@pytest.mark.judges_no_timing
@gpu_only
def test_segmented_table_runs_small():
    from labhelpers.experiments import scan as ex

    table = ex.segmented_table(2**16, lengths=(32, None), repeat=2, number=1)
    assert table["ok"].all() and set(table["kind"]) == {"hillis_steele", "lookback", "segmented"}
    assert (table["ratio_hillis_steele"] > 0).all()
