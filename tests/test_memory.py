"""Tests of chapter "The memory hierarchy": the bank and sector models, the kernels against NumPy, the sweeps'
tables, the hierarchy table and the lab checkers (which must pass the solutions and reject skeletons and
typical mistakes). Kernels run under the simulator here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import labhelpers as lh  # first: chooses the simulator before numba.cuda is imported
import matplotlib
import numpy as np
import pandas as pd
import pytest

from labhelpers.exercises import memory as ex
from labhelpers.experiments import memory as memory_exp
from labhelpers.figures import memory as memory_fig
from labhelpers.kernels import memory
from labhelpers.models import banks
from markers import gpu_only, sim_only
from mutants import lab_skeletons, load_solutions, mutant

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sol = load_solutions("03_memory_hierarchy_lab")
SKEL = lab_skeletons("03_memory_hierarchy_lab", "import numpy as np\nfrom numba import cuda, float32\n"
                     "from labhelpers.exercises.memory import TILE, TILE_ROWS\n",
                     warp_byte_addresses=sol.warp_byte_addresses)


# =========================================================================== bank model


@pytest.mark.parametrize("stride", range(0, 130))
def test_strided_conflict_degree_is_gcd(stride):
    expected = 1 if stride == 0 else math.gcd(stride, 32)
    assert banks.strided_conflict_degree(stride) == expected
    assert banks.conflict_degree(banks.strided_words(stride)) == expected
    assert banks.conflict_degree(banks.strided_words(stride, offset=13)) == expected  # an offset changes nothing


def test_odd_strides_are_conflict_free_and_powers_of_two_are_not():
    assert all(banks.strided_conflict_degree(s) == 1 for s in range(1, 200, 2))
    assert [banks.strided_conflict_degree(2**k) for k in range(7)] == [1, 2, 4, 8, 16, 32, 32]


def test_broadcast_and_distinct_words():
    assert banks.conflict_degree([7] * 32) == 1  # one word for all: a broadcast
    assert banks.conflict_degree([0, 32, 64, 1]) == 3
    assert banks.conflict_degree(np.repeat([0, 32], 16)) == 2  # two words of bank 0, each read by 16 threads
    assert banks.conflict_degree(np.arange(32)) == 1


def test_bank_of():
    assert banks.bank_of(0) == 0 and banks.bank_of(33) == 1 and banks.bank_of(64) == 0
    np.testing.assert_array_equal(banks.bank_of(np.array([31, 32, 95])), [31, 0, 31])
    with pytest.raises(ValueError):
        banks.bank_of(-1)


def test_padding_fixes_tile_columns():
    assert banks.conflict_degree(banks.tile_column_words(0, 32, pad=0)) == 32  # a column of a 32 x 32 tile: one bank
    assert banks.conflict_degree(banks.tile_column_words(5, 32, pad=1)) == 1  # 32 x 33: every row shifts one bank
    assert banks.conflict_degree(banks.tile_column_words(5, 32, pad=2)) == 2  # an even pitch leaves 2-way conflicts
    assert banks.conflict_degree(banks.tile_column_words(0, 16, pad=0, rows=32)) == 16
    assert banks.conflict_degree(banks.tile_column_words(0, 16, pad=1, rows=32)) == 1
    np.testing.assert_array_equal(banks.tile_column_words(2, 32, 1, rows=3), [2, 35, 68])


@pytest.mark.parametrize("bad", [dict(stride=-1), dict(stride=1.5), dict(stride=1, offset=-2),
                                 dict(stride=1, threads=0)])
def test_strided_words_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        banks.strided_words(**bad)


def test_conflict_degree_rejects_empty():
    with pytest.raises(ValueError, match="at least one"):
        banks.conflict_degree([])
    with pytest.raises(ValueError):
        banks.tile_column_words(32, 32)


# =========================================================================== sector model


def _brute_sectors(offset, stride, itemsize, unit=32):
    touched = set()
    for t in range(32):
        start = (offset + t * stride) * itemsize
        touched.update(b // unit for b in range(start, start + itemsize))
    return len(touched)


def test_seed_figures():
    assert banks.warp_request(0, 1).sectors == 4 and banks.warp_request(0, 1).lines == 1
    assert banks.warp_request(1, 1).sectors == 5  # "5 instead of 4" (seed: offset access)
    assert banks.warp_request(1, 1).lines == 2
    assert banks.sector_efficiency(0, 2) == 0.5  # "stride 2 = 50% efficiency" (seed: strided access)
    assert banks.sector_efficiency(1, 1) == pytest.approx(0.8)


@pytest.mark.parametrize("offset", range(0, 33))
def test_offsets(offset):
    req = banks.warp_request(offset, 1)
    assert req.sectors == (4 if offset % 8 == 0 else 5)
    assert req.lines == (1 if offset % 32 == 0 else 2)
    assert req.useful_bytes == 128


@pytest.mark.parametrize("stride", range(1, 33))
def test_strides_follow_one_over_s_until_a_sector_per_thread(stride):
    req = banks.warp_request(0, stride)
    assert req.sectors == min(32, 4 * stride)
    assert req.efficiency == pytest.approx(max(1 / stride, 1 / 8))


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 16])
def test_sector_model_matches_brute_force(itemsize):
    for offset in range(0, 20, 3):
        for stride in (0, 1, 2, 3, 5, 8, 17):
            assert banks.sectors_per_request(offset, stride, itemsize) == _brute_sectors(offset, stride, itemsize)
            assert banks.warp_request(offset, stride, itemsize).lines == _brute_sectors(offset, stride, itemsize, 128)


def test_unaligned_wide_elements_straddle_sectors():
    # 12-byte elements are not a power of two: some straddle a sector boundary, which the model counts
    assert banks.sectors_per_request(0, 1, 12) == _brute_sectors(0, 1, 12) == 12


def test_warp_request_text_and_line_efficiency():
    req = banks.warp_request(1, 1)
    assert "5 sectors in 2 lines" in str(req) and "80%" in str(req)
    assert req.line_efficiency == pytest.approx(0.5)
    assert banks.warp_request(0, 0).useful_bytes == 4  # stride 0: every thread reads the same element


def test_drawings_run():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    assert memory_fig.draw_bank_access(ax1, banks.strided_words(2)) is None  # a drawer returns nothing
    assert banks.conflict_degree(banks.strided_words(2)) == 2 and "2-way conflict" in ax1.get_title()
    assert memory_fig.draw_warp_sectors(ax2, 3, 2) is None
    sectors = banks.warp_request(3, 2).sectors
    assert sectors == banks.sectors_per_request(3, 2) and ax2.get_title().startswith(f"{sectors} sectors")
    plt.close(fig)


# =========================================================================== kernels against NumPy


@pytest.mark.parametrize("n", [1, 31, 33, 257])
@pytest.mark.parametrize("offset,stride", [(0, 1), (1, 1), (31, 1), (0, 2), (5, 33)])
def test_offset_stride_copy(n, offset, stride):
    src = np.random.default_rng(n).standard_normal(memory.copy_footprint(n, offset, stride) + 3).astype(np.float32)
    got = memory.run_offset_stride_copy(src, n, offset, stride, threads=64)
    np.testing.assert_array_equal(got, memory.offset_stride_copy_reference(src, n, offset, stride))


def test_offset_stride_copy_rejects_bad_input():
    with pytest.raises(lh.ArrayArgumentError, match="copy_footprint"):
        memory.run_offset_stride_copy(np.zeros(10, np.float32), 6, 1, 2)
    with pytest.raises(lh.ArrayArgumentError, match="float32"):
        memory.run_offset_stride_copy(np.zeros(10), 5, 0, 1)
    with pytest.raises(lh.LaunchConfigError):
        memory.run_offset_stride_copy(np.zeros(10, np.float32), 5, 0, 1, threads=2048)
    with pytest.raises(ValueError, match="stride"):
        memory.copy_footprint(4, 0, 0)


@pytest.mark.parametrize("stride", [0, 1, 2, 3, 32, 33, 100])
def test_shared_stride_read(stride):
    got = memory.run_shared_stride_read(stride, reps=3, blocks=2, threads=64)
    np.testing.assert_array_equal(got, memory.shared_stride_reference(128, 64, stride, 3))


def test_shared_stride_read_rejects_bad_input():
    with pytest.raises(lh.LaunchConfigError):
        memory.run_shared_stride_read(1, 1, threads=2048)
    with pytest.raises(ValueError, match="overflow"):
        memory.run_shared_stride_read(1, 2**21)
    with pytest.raises(ValueError):
        memory.run_shared_stride_read(-1, 1)


@pytest.mark.parametrize("memory_kind", ["constant", "global"])
@pytest.mark.parametrize("distinct", [1, 2, 32])
def test_lookups(memory_kind, distinct):
    got = memory.run_lookup(memory_kind, reps=37, distinct=distinct, blocks=2, threads=64)
    np.testing.assert_array_equal(got, memory.lookup_reference(128, 64, 37, distinct))


def test_lookup_rejects_bad_input():
    with pytest.raises(ValueError, match="power of two"):
        memory.run_lookup("constant", 4, 3)
    with pytest.raises(ValueError, match="between 1 and 32"):
        memory.run_lookup("constant", 4, 64)
    with pytest.raises(ValueError, match="constant"):
        memory.run_lookup("texture", 4, 1)


@pytest.mark.parametrize("n", [1, 31, 33, 257])
def test_local_arrays(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(memory.run_local_array(x), memory.local_array_reference(x), rtol=1e-6)
    np.testing.assert_allclose(memory.run_local_array(x, k=7), memory.local_array_reference(x, 7), rtol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (31, 33), (40, 7)])
def test_transpose_naive(shape):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(memory.run_transpose_naive(a), a.T)


# =========================================================================== pointer chasing


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("working_set,stride", [(256, 128), (4096, 128), (4096, 32), (1000, 8)])
def test_chase_chain_is_one_cycle_over_strided_slots(shuffle, working_set, stride):
    chain = memory.chase_chain(working_set, stride, shuffle=shuffle)
    step, slots = stride // 4, working_set // stride
    assert chain.dtype == np.uint32 and chain.size == working_set // 4
    j, seen = 0, []
    for _ in range(slots):
        seen.append(j)
        j = int(chain[j])
    assert j == 0 and sorted(seen) == list(range(0, slots * step, step))  # every slot once, then back to the start
    if not shuffle:
        assert seen == list(range(0, slots * step, step))


def test_chase_chain_shuffles_with_the_seed():
    a, b = memory.chase_chain(8192, 128, seed=1), memory.chase_chain(8192, 128, seed=2)
    assert not np.array_equal(a, b)
    assert np.array_equal(a, memory.chase_chain(8192, 128, seed=1))


@pytest.mark.parametrize("bad", [dict(working_set_bytes=100, stride_bytes=128),
                                 dict(working_set_bytes=1024, stride_bytes=6),
                                 dict(working_set_bytes=1000, stride_bytes=128), dict(working_set_bytes=2**34)])
def test_chase_chain_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        memory.chase_chain(**bad)


@pytest.mark.parametrize("steps", [0, 1, 7, 100])
def test_pointer_chase_kernel(steps):
    chain = memory.chase_chain(2048, 64, seed=4)
    assert memory.run_pointer_chase(chain, 0, steps) == memory.walk_reference(chain, 0, steps)


def test_pointer_chase_rejects_bad_input():
    chain = memory.chase_chain(2048, 64)
    with pytest.raises(lh.ArrayArgumentError, match="uint32"):
        memory.run_pointer_chase(chain.astype(np.int64), 0, 3)
    with pytest.raises(ValueError, match="start"):
        memory.run_pointer_chase(chain, chain.size, 3)


def test_latency_summary():
    table = pd.DataFrame({"working_set_bytes": [2**k for k in range(12, 31)]})
    table["ns_per_load"] = np.where(table["working_set_bytes"] <= 2**17, 20.0,
                                    np.where(table["working_set_bytes"] <= 2**25, 200.0, 600.0))
    summary = memory_exp.latency_summary(table, l1_bytes=256 * 1024, l2_bytes=50e6).set_index("level")
    assert summary.loc["L1", "ns per load"] == 20.0
    assert summary.loc["L2", "ns per load"] == 200.0
    assert summary.loc["device memory", "ns per load"] == 600.0


# =========================================================================== sweeps under the simulator


def _assert_untimed(table):
    assert (table["status"] == "simulator").all()
    assert table["median_ms"].isna().all()


@sim_only
def test_coalescing_sweeps_build_the_plotted_tables():
    offsets = memory_exp.coalescing_sweep("offset", values=[0, 1, 8], progress=False)
    _assert_untimed(offsets)
    assert list(offsets["stride"]) == [1, 1, 1] and list(offsets["sectors"]) == [4, 5, 4]
    strides = memory_exp.coalescing_sweep("stride", values=[1, 2, 16], progress=False)
    assert list(strides["offset"]) == [0, 0, 0]
    assert list(strides["sector_efficiency"]) == [1.0, 0.5, 0.125]
    assert strides["relative"].isna().all()
    with pytest.raises(ValueError):
        memory_exp.coalescing_sweep("diagonal")


@sim_only
def test_bank_conflict_sweep_table():
    table = memory_exp.bank_conflict_sweep([1, 2, 32, 33], progress=False)
    _assert_untimed(table)
    assert list(table["conflict_degree"]) == [1, 2, 32, 1]


@sim_only
def test_pointer_chase_sweep_table():
    table = memory_exp.pointer_chase_sweep([1024, 4096], progress=False)
    _assert_untimed(table)
    assert set(table.columns) >= {"working_set_bytes", "ns_per_load", "stride_bytes", "steps"}


@sim_only
def test_constant_and_transfer_sweep_tables():
    table = memory_exp.constant_sweep((1, 32), progress=False)
    _assert_untimed(table)
    assert list(table["memory"]) == ["constant", "constant", "global", "global"]
    transfers = memory_exp.transfer_sweep([4096], progress=False)
    _assert_untimed(transfers)
    assert sorted(transfers["transfer"]) == ["D2H pageable", "D2H pinned", "H2D pageable", "H2D pinned"]


@sim_only
def test_gpu_only_helpers_say_so():
    with pytest.raises(lh.GPUOnlyError, match="reference"):
        memory_exp.resource_table()
    with pytest.raises(lh.GPUOnlyError):
        memory_exp.device_properties()


@gpu_only
def test_gpu_helpers_describe_this_gpu():
    props = memory_exp.device_properties()
    assert props["name"] == lh.device_info().name and props["total_constant_bytes"] > 0
    assert props["name"] in memory_exp.hierarchy_table(props).columns
    assert len(memory_exp.resource_table()) == 6


def test_hierarchy_table():
    props = {"name": "Some GPU", "compute_capability": "9.0", "sm_count": 132, "registers_per_sm": 65536,
             "max_shared_per_sm": 233472, "l2_bytes": 52428800, "total_memory_bytes": 85 * 2**30,
             "peak_memory_bandwidth_gbs": 3352.3, "total_constant_bytes": 65536}
    table = memory_exp.hierarchy_table(props)
    assert list(table.columns) == ["visible to", "Some GPU", "H100 SXM5 (published)"]
    assert table.loc["registers", "Some GPU"].startswith("65536 x 4 B = 256 KiB")
    assert table.loc["L1 cache", "Some GPU"].startswith("256 KiB")
    assert table.loc["L2 cache", "Some GPU"].startswith("50 MiB")
    assert "3.35 TB/s" in table.loc["device memory", "Some GPU"]
    unknown = memory_exp.hierarchy_table({"name": None})  # missing properties print as "?", never crash
    assert "?" in unknown.loc["L2 cache", "this GPU"]


# =========================================================================== lab checkers


def test_sectors_checker():
    ex.check_sectors_per_request(sol.sectors_per_request)
    with pytest.raises(lh.CheckFailed, match="returned None"):
        ex.check_sectors_per_request(SKEL["sectors_per_request"])
    with pytest.raises(lh.CheckFailed, match="straddle"):
        ex.check_sectors_per_request(lambda offset, stride, itemsize: -(-32 * stride * itemsize // 32))
    with pytest.raises(lh.CheckFailed, match="threads, not sectors"):
        ex.check_sectors_per_request(lambda offset, stride, itemsize: 32)
    with pytest.raises(lh.CheckFailed, match="128-byte lines"):
        ex.check_sectors_per_request(lambda o, s, i: len({int(a) // 128 for a in sol.warp_byte_addresses(o, s, i)}))


def test_conflict_checker():
    ex.check_conflict_degree(sol.conflict_degree)
    with pytest.raises(lh.CheckFailed, match="returned None"):
        ex.check_conflict_degree(SKEL["conflict_degree"])
    with pytest.raises(lh.CheckFailed, match="broadcast"):
        ex.check_conflict_degree(lambda words: int(np.bincount(np.asarray(words) % 32).max()))
    with pytest.raises(lh.CheckFailed, match="expected 2"):
        ex.check_conflict_degree(lambda words: 1)


def test_chain_checker():
    ex.check_single_cycle(sol.make_chain)

    with pytest.raises(lh.CheckFailed, match="not a permutation"):
        ex.check_single_cycle(SKEL["make_chain"])
    with pytest.raises(lh.CheckFailed, match="cycles"):
        ex.check_single_cycle(lambda slots, rng: rng.permutation(slots))
    with pytest.raises(lh.CheckFailed, match="sequential"):
        ex.check_single_cycle(lambda slots, rng: (np.arange(slots) + 1) % slots)
    with pytest.raises(lh.CheckFailed, match="same chain"):
        ex.check_single_cycle(lambda slots, rng: (np.arange(slots) - 1) % slots)  # one cycle, but ignores rng
    assert ex.cycle_lengths(np.array([1, 0, 2])) == [2, 1]


# Typical mistakes: the solution with a line or two changed.
untransposed_tile = mutant(sol.transpose_tiled, "out[out_row + k, out_col] = tile[tx, ty + k]",
                           "out[out_row + k, out_col] = tile[ty + k, tx]  # the classic slip: indices not swapped")
unguarded_tile = mutant(sol.transpose_tiled, ("if row + k < a.shape[0] and col < a.shape[1]:", "if True:"),
                        ("if out_row + k < out.shape[0] and out_col < out.shape[1]:", "if True:"))


def test_transpose_checker():
    ex.check_tiled_transpose(sol.transpose_tiled)
    with pytest.raises(lh.CheckFailed, match="^Elements never written"):
        ex.check_tiled_transpose(SKEL["transpose_tiled"])
    with pytest.raises(lh.CheckFailed, match="is wrong for"):
        ex.check_tiled_transpose(untransposed_tile)
    with pytest.raises(lh.CheckFailed, match="^Missing bounds guard.*outside an array"):
        ex.check_tiled_transpose(unguarded_tile)


@sim_only
def test_compare_transposes_runs_under_the_simulator(capsys):
    timings = ex.compare_transposes(sol.transpose_tiled, memory.transpose_naive, n=40)
    assert set(timings) == {"naive", "tiled"}
    assert not timings["tiled"].is_gpu_timing
    assert set(ex.compare_transposes(SKEL["transpose_tiled"], memory.transpose_naive, n=40)) == {"naive"}
    assert "does not pass the check yet" in capsys.readouterr().out


def test_measured_prefers_live_gpu_rows():
    ref = lh.Reference(name="r", table=pd.DataFrame({"x": [1], "status": ["ok"]}),
                       meta={"gpu": "g", "compute_capability": "9.0", "driver": "?", "runtime": "?", "date": "?"})
    untimed = pd.DataFrame({"x": [2], "status": ["simulator"]})
    assert memory_exp.measured(untimed, ref)["x"].tolist() == [1]
    assert memory_exp.measured(None, ref)["x"].tolist() == [1]
    live = pd.DataFrame({"x": [3, 4], "status": ["invalid", "ok"]})
    assert memory_exp.measured(live, ref)["x"].tolist() == [4]


# =========================================================================== the chapter's prose against the reference data
# Every figure the chapter's text quotes from a measurement is recomputed here from the reference data: a
# re-measured reference file that changes a figure fails this test instead of silently contradicting the text.

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from labhelpers import roofline as rl  # noqa: E402

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "03_memory_hierarchy.ipynb"


def _prose(path: Path = CHAPTER) -> str:
    """The chapter's markdown, whitespace collapsed (a figure may be broken across lines)."""
    cells = json.loads(path.read_text())["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown").split())


WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def _missing(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if " ".join(p.split()) not in text]


def test_chapter_names_the_reference_gpu_it_quotes():
    for name in ("ch03_coalescing_stride", "ch03_coalescing_offset", "ch03_bank_conflicts", "ch03_pointer_chase",
                 "ch03_constant_memory", "ch03_transfers", "ch03_resource_usage"):
        assert lh.load_reference(name).gpu == "NVIDIA H200", f"{name}: the chapter's prose calls its GPU the H200"


def test_chapter_prose_about_registers_and_coalescing_matches_the_reference_data():
    usage = lh.load_reference("ch03_resource_usage").table.set_index("kernel")
    caps = lh.load_reference("ch04_register_caps").table.set_index("max_registers")
    st = lh.load_reference("ch03_coalescing_stride").table.set_index("stride")
    of = lh.load_reference("ch03_coalescing_offset").table.set_index("offset")
    moved = st["gbps"] * st["sectors"] * 32 / 128 / 1000  # TB/s of sectors moved: useful bytes x sectors / 4
    misaligned = of.loc[of.index % 8 != 0, "relative"]
    slowdown32 = caps.loc[255, "gflops"] / caps.loc[32, "gflops"]
    peak = lh.load_reference("ch03_pointer_chase").meta["device"]["peak_memory_bandwidth_gbs"]
    copy = rl.reference_ceilings().copy_gbs()  # the copy, the yardstick
    lo, hi = (f"{v:.1f}" for v in (moved.loc[[2, 4, 8]].min(), moved.loc[[2, 4, 8]].max()))
    aligned8 = of.loc[(of.index % 8 == 0) & (of.index > 0) & (of.index < 32), "gbps"]
    assert aligned8.max() < 1.01 * of.loc[of.index % 8 != 0, "gbps"].max()  # "no faster ... within 1 %"
    assert st.loc[8, "median_ms"] < st.loc[16, "median_ms"] < st.loc[32, "median_ms"] < 4 * st.loc[8, "median_ms"]
    phrases = [
        f"**{int(usage.loc['local_array_dynamic', 'local_bytes_per_thread'])} bytes of local memory**, and "
        f"{int(usage.loc['local_array_dynamic', 'registers_per_thread'])} registers instead of "
        f"{int(usage.loc['local_array_static', 'registers_per_thread'])}",
        f"capped at 32 registers, a kernel with sixteen float64 accumulators gets full occupancy, "
        f"{int(caps.loc[32, 'local_bytes'])} bytes of local memory per thread, and runs {slowdown32:.1f} times slower",
        f"moves {st.loc[1, 'gbps'] / 1000:.2f} TB/s",
        f"{st.loc[2, 'relative']:.2f} at stride 2 where the model says 0.50, {st.loc[4, 'relative']:.2f} at stride 4 "
        f"(0.25), {st.loc[8, 'relative']:.2f} at stride 8 (0.125)",
        f"move {lo if lo == hi else f'{lo} to {hi}'} TB/s, against the aligned copy's {st.loc[1, 'gbps'] / 1000:.1f}",
        f"moves {st.loc[1, 'gbps'] / 1000:.2f} TB/s: {st.loc[1, 'gbps'] / peak:.0%} of the peak, and "
        f"{st.loc[1, 'gbps'] / copy:.0%} of what a copy can reach",
        "Chapter 4 shows both sides of that trade on the reference GPU",
        f"{st.loc[8, 'gbps']:.0f} GB/s at stride 8, {st.loc[16, 'gbps']:.0f} at 16, {st.loc[32, 'gbps']:.0f} at 32",
        f"({st.loc[8, 'median_ms']:.2f}, {st.loc[16, 'median_ms']:.2f} and {st.loc[32, 'median_ms']:.2f} ms)",
        f"run at {100 * misaligned.min():.0f} to {misaligned.max():.0%} of the aligned one",
        f"({of.loc[1, 'gbps']:,.0f} GB/s at offset 1 against {of.loc[0, 'gbps']:,.0f})",
        f"({of.loc[16, 'gbps']:,.0f} GB/s at offset 16)",
        f"stride 2 costs {1 - st.loc[2, 'relative']:.0%} of the bandwidth, stride 32 leaves "
        f"{st.loc[32, 'relative']:.0%}; misalignment costs only {100 * (1 - misaligned.max()):.0f} to "
        f"{1 - misaligned.min():.0%}",
    ]
    assert not _missing(_prose(), phrases)


def test_chapter_prose_about_banks_latency_constants_and_transfers_matches_the_reference_data():
    bank = lh.load_reference("ch03_bank_conflicts")
    b = bank.table.set_index("stride")
    slope, intercept = np.polyfit(b["conflict_degree"], b["median_ms"], 1)
    odd = b.loc[b.index % 2 == 1, "slowdown"]
    chase = lh.load_reference("ch03_pointer_chase")
    dev = chase.meta["device"]
    lat = memory_exp.latency_summary(chase.table, l1_bytes=memory_exp.l1_capacity_bytes(dev),
                                     l2_bytes=dev["l2_bytes"]).set_index("level")["ns per load"]
    ns = chase.table.set_index("working_set_bytes")["ns_per_load"]
    ghz = dev["clock_khz"] / 1e6
    const = lh.load_reference("ch03_constant_memory").table.pivot(index="distinct", columns="memory",
                                                                     values="ns_per_warp_load")
    tr = lh.load_reference("ch03_transfers").table
    gbps = tr.pivot(index="nbytes", columns="transfer", values="gbps")
    ms = tr.pivot(index="nbytes", columns="transfer", values="median_ms")
    big = gbps.index.max()
    copy = rl.reference_ceilings().copy_gbs()  # the copy, the yardstick
    throttle = lh.load_reference("ch04_occupancy_throttle").table
    ilp4_best = throttle.loc[throttle["ilp"] == 4, "gbps"].max()
    full = throttle[(throttle["ilp"] == 1) & (throttle["occupancy"] == 1.0)].iloc[0]  # chapter 4: latency under load
    loaded_ns = full["occupancy"] * 64 * 128 * chase.meta["sm_count"] / (full["gbps"] / 2)
    below = 1 - b.loc[b["conflict_degree"] > 1, "slowdown"] / b.loc[b["conflict_degree"] > 1, "conflict_degree"]
    aligned = lh.load_reference("ch03_coalescing_stride").table.set_index("stride").loc[1, "gbps"]
    in_flight_kib = 2.4e12 * lat["device memory"] * 1e-9 / chase.meta["sm_count"] / 1024  # half of 4.8 TB/s is reads
    g_lo, g_hi = f"{const['global'].min():.2f}", f"{const['global'].max():.2f}"
    flat = f"{g_lo} ns" if g_lo == g_hi else f"{g_lo} to {g_hi} ns"
    d2h = [f"{v * 1000:.0f}" for v in (ms.loc[4096, ['D2H pinned', 'D2H pageable']].min(),
                                        ms.loc[4096, ['D2H pinned', 'D2H pageable']].max())]
    d2h_4k = d2h[0] if d2h[0] == d2h[1] else f"{d2h[0]} to {d2h[1]}"
    fixed_d2h, fixed_h2d = ms.loc[4096, "D2H pinned"] * 1e3, ms.loc[4096, "H2D pinned"] * 1e3  # µs, all fixed cost
    peak_d2h, peak_h2d = gbps.loc[big, "D2H pinned"], gbps.loc[big, "H2D pinned"]
    # half the peak is reached near fixed cost x peak: below it at the smaller size quoted, above it at 4x that size
    assert gbps.loc[2**20, "D2H pinned"] < peak_d2h / 2 < gbps.loc[2**22, "D2H pinned"]
    assert gbps.loc[2**22, "H2D pinned"] < peak_h2d / 2 < gbps.loc[2**24, "H2D pinned"]
    assert 2**20 < 1e3 * fixed_d2h * peak_d2h < 2**22 < 1e3 * fixed_h2d * peak_h2d < 2**24  # bytes: µs x GB/s x 1e3
    phrases = [
        f"{b.loc[2, 'slowdown']:.2f} at $s = 2$", f"{b.loc[4, 'slowdown']:.2f} at $s = 4$",
        f"{b.loc[8, 'slowdown']:.2f} at 8 and 24, {b.loc[16, 'slowdown']:.1f} at 16 and {b.loc[32, 'slowdown']:.1f} at 32",
        f"within {max(abs(odd - 1).max(), 0.001):.1%} of stride 1",
        f"stride 32, {b.loc[32, 'slowdown']:.0f} times slower",
        f"sits {100 * below.min():.0f} to {below.max():.0%} below its degree",
        f"The {intercept * 1000:.0f} µs (the kernel starting,",
        f"time $\\approx$ {intercept * 1000:.0f} µs + {slope * 1000:.0f} µs × degree",
        f"Each SM performs {int(b.loc[1, 'warp_requests']):,} warp requests",
        f"seven times the {dev['peak_memory_bandwidth_gbs'] / 1000:.1f} TB/s",
        f"**L1: about {lat['L1']:.0f} ns** on the reference GPU ({lat['L1'] * ghz:.0f} clock cycles at {ghz:.2f} GHz)",
        f"about *half* of the {dev['l2_bytes'] // 2**20} MB L2",
        f"2.4 TB/s × {lat['device memory']:.0f} ns $\\approx$ {in_flight_kib:.0f} KiB of reads in flight",
        f"which would call for {in_flight_kib * loaded_ns / lat['device memory']:.0f} KiB",
        f"why does the aligned copy stop at {aligned / 1000:.1f} TB/s?",
        f"{fixed_d2h:.0f} µs × {peak_d2h:.0f} GB/s $\\approx$ {fixed_d2h * peak_d2h / 1e3:.1f} MB for pinned device-to-host",
        f"{fixed_h2d:.0f} µs × {peak_h2d:.0f} GB/s $\\approx$ {fixed_h2d * peak_h2d / 1e3:.1f} MB host to device",
        f"({ns[65536]:.0f} ns at 64 KiB, {ns[196608]:.0f} ns at 192 KiB)",
        f"**L2: {lat['L2']:.0f} ns**, {WORDS[round(lat['L2'] / lat['L1'])]} times the L1",
        f"**Device memory: {lat['device memory']:.0f} ns**, {lat['device memory'] / lat['L2']:.1f} times the L2 and "
        f"{lat['device memory'] / lat['L1']:.0f} times the L1",
        f"about {round(lat['device memory'] * ghz, -1):.0f} clock cycles",
        f"{lat['L1']:.0f}, {lat['L2']:.0f} and {lat['device memory']:.0f} ns on the reference GPU",
        f"chapter 4 measures about {loaded_ns / lat['device memory']:.1f} times longer with every warp slot full",
        f"reaches {ilp4_best / 1000:.1f} TB/s, {ilp4_best / copy:.0%} of the copy ceiling",
        f"{const.loc[1, 'constant']:.1f} ns per warp load for one and two addresses",
        f"{const.loc[4, 'constant']:.1f}, {const.loc[8, 'constant']:.1f}, {const.loc[16, 'constant']:.1f} and "
        f"{const.loc[32, 'constant']:.1f} ns for 4, 8, 16 and 32",
        f"about {const.loc[1, 'constant'] * ghz:.1f} cycles per warp load",
        f"stays flat at {flat}",
        f"constant memory is {1 - const.loc[1, 'constant'] / const.loc[1, 'global']:.0%} faster",
        f"{const.loc[4, 'constant'] / const.loc[4, 'global']:.1f} times slower with four and "
        f"{const.loc[32, 'constant'] / const.loc[32, 'global']:.1f} times slower with 32",
        f"{gbps.loc[big, 'H2D pinned']:.1f} GB/s host to device and {gbps.loc[big, 'D2H pinned']:.1f} GB/s device to host, "
        f"{gbps.loc[big, ['H2D pinned', 'D2H pinned']].max() / 64:.0%} of the 64 GB/s",
        f"{gbps.loc[big, 'D2H pageable']:.1f} GB/s device to host, and host to device at most "
        f"{gbps['H2D pageable'].max():.1f} GB/s (at {gbps['H2D pageable'].idxmax() // 2**20} MiB), falling to "
        f"{gbps.loc[big, 'H2D pageable']:.1f} GB/s at {big // 2**20} MiB",
        f"{gbps.loc[big, 'D2H pinned'] / gbps.loc[big, 'D2H pageable']:.1f} times (D2H) to "
        f"{gbps.loc[big, 'H2D pinned'] / gbps.loc[big, 'H2D pageable']:.1f} times (H2D) faster",
        f"a 4 KiB copy takes about {d2h_4k} µs device to host and "
        f"{ms.loc[4096, ['H2D pinned', 'H2D pageable']].min() * 1000:.0f} to "
        f"{ms.loc[4096, ['H2D pinned', 'H2D pageable']].max() * 1000:.0f} µs host to device",
        f"({gbps.loc[2**20, 'D2H pinned']:.0f} GB/s at 1 MiB)", f"({gbps.loc[2**22, 'H2D pinned']:.0f} GB/s at 4 MiB)",
        f"pinned ({gbps.loc[big, ['H2D pinned', 'D2H pinned']].mean():.0f} GB/s) against pageable "
        f"({gbps.loc[big, 'H2D pageable']:.0f} to {gbps.loc[big, 'D2H pageable']:.0f} GB/s)",
    ]
    missing = _missing(_prose(), phrases)
    assert not missing, "the chapter's text no longer matches the reference data:\n" + "\n".join(missing)
    assert "reference H200" not in _prose() and "reference H100" not in _prose(), "name the reference GPU from its data"


def test_chapter_computes_the_copy_ceiling_from_the_reference_data():
    """The copy ceiling is printed by a cell from chapter 7's reference data, never typed into the text."""
    text = _prose()
    assert "4.2 TB/s" not in text and "4,150" not in text and "4,143" not in text
    cells = json.loads(CHAPTER.read_text())["cells"]
    assert any("rl.reference_ceilings()" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


# =========================================================================== static and dynamic shared memory


@pytest.mark.parametrize("n", [1, 31, 129, 257])
@pytest.mark.parametrize("dynamic,threads", [(False, 64), (False, 128), (True, 64), (True, 256)])
def test_block_reverse_static_and_dynamic(n, dynamic, threads):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    got = memory.run_block_reverse(x, threads=threads, dynamic=dynamic)
    np.testing.assert_array_equal(got, memory.block_reverse_reference(x, threads))


def test_block_reverse_reference_reverses_each_chunk():
    np.testing.assert_array_equal(memory.block_reverse_reference(np.arange(5), 2), [1, 0, 3, 2, 4])
    assert memory.block_reverse_reference(np.arange(0), 4).size == 0


def test_static_shared_array_limits_the_block_size():
    with pytest.raises(lh.LaunchConfigError, match="holds 128 floats"):
        memory.run_block_reverse(np.zeros(10, np.float32), threads=256)
    with pytest.raises(lh.ArgumentError):
        memory.run_block_reverse(np.zeros(10, np.float64))


def test_two_dynamic_arrays_alias_and_one_split_array_does_not():
    x = np.arange(100, dtype=np.float32)
    y = 1000 + x
    np.testing.assert_array_equal(memory.run_two_buffers(x, y, split=False), 2 * y)  # b overwrote a
    np.testing.assert_array_equal(memory.run_two_buffers(x, y, split=True), x + y)
    with pytest.raises(lh.ArgumentError):
        memory.run_two_buffers(x, y[:5], split=True)


def test_chapter_3_draws_the_link_of_the_gpu_that_measured_not_pcie_gen5():
    """The transfer plot's link line comes from the driver (or the reference GPU's link data), not a Gen5 constant."""
    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "03_memory_hierarchy.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "Gen5" not in code and "axhline(64" not in code
    assert 'live_or_reference(streams_exp.link_table, "ch11_link")' in code
