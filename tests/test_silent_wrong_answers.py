"""Issue 23: no silent wrong answers, no silent hangs. An int32 scan that wraps around warns (on both backends,
NumPy's cumsum widens to int64); a GPU-sized launch under the simulator is refused at once, saying how long it
would take and pointing at lh.problem_size (one threshold, in launchguard.py)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from numba import cuda

import labhelpers as lh  # noqa: F401  (chooses the backend)
from labhelpers import launchguard
from labhelpers.kernels import scan as sc
from labhelpers.kernels import stencil as st
from markers import sim_only


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the simulator wraps in NumPy
@pytest.mark.parametrize("method", ["lookback", "scan_then_propagate"])
def test_an_int32_scan_that_wraps_warns(method):
    x = np.full(100, 2**30, np.int32)
    with pytest.warns(sc.IntegerOverflowWarning, match=r"index 1 is 2,147,483,648.*np.cumsum widens"):
        got = sc.scan(x, method=method)
    assert got[1] < 0  # it did wrap: the warning is about a real wrong answer


def test_block_scan_warns_only_when_a_block_wraps():
    x = np.full(200, 2**24, np.int32)  # blocks of 64 (Blelloch with 32 threads under the simulator) hold 2**30
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.IntegerOverflowWarning)
        sc.block_scan(x, "blelloch", threads=32)
    with pytest.warns(sc.IntegerOverflowWarning, match="wraps around"):
        sc.block_scan(np.full(200, 2**29, np.int32), "blelloch", threads=32)


def test_scans_that_fit_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.IntegerOverflowWarning)
        assert np.array_equal(sc.scan(np.arange(-50, 50, dtype=np.int32)), np.cumsum(np.arange(-50, 50)))
        sc.scan(np.ones(100, np.float32))
        assert not sc.warn_if_wraps(np.full(10, -2**27, np.int32))
    with pytest.warns(sc.IntegerOverflowWarning, match="outside int32"):
        assert sc.warn_if_wraps(np.full(10, -2**29, np.int32))


@sim_only
@pytest.mark.parametrize("run", [
    pytest.param(lambda: sc.scan(np.ones(2**22, np.int32)), id="scan of 2**22"),
    pytest.param(lambda: st.run_stencil1d(np.ones(10**7, np.float32)), id="stencil of 10**7"),
])
def test_a_gpu_sized_launch_under_the_simulator_says_so_at_once(run):
    start = time.perf_counter()
    with pytest.raises(lh.SimulatorTooSlow, match=r"would take about [\d,]+ minutes.*lh\.problem_size"):
        run()
    assert time.perf_counter() - start < 20


@sim_only
def test_the_threshold_is_on_threads_launched():
    @cuda.jit
    def nothing(x):
        pass

    x = np.zeros(1, np.float32)
    with pytest.raises(lh.SimulatorTooSlow, match="524,544 threads"):
        nothing[launchguard.SIM_MAX_THREADS // 256 + 1, 256](x)  # 2049 blocks of 256
    with pytest.raises(lh.SimulatorTooSlow):
        nothing[(1024, 1024), (1, 1)](x)  # 2D grids count every block
    launchguard.check_simulator_size(launchguard.SIM_MAX_THREADS)  # at the threshold: allowed


# --------------------------------------------------------------------------- misuse answered by the book, not Python

def _misuse_cases():
    from mutants import load_solutions
    from labhelpers.exercises import consistency as ex13
    from labhelpers.exercises import matmul as ex5
    from labhelpers.exercises import portability as ex12
    from labhelpers.exercises import scheduling as ex4
    from labhelpers.exercises import streams as ex11

    s4, s5 = load_solutions("04_scheduling_lab"), load_solutions("05_matrix_multiply_lab")
    s11, s12, s13 = (load_solutions(lab) for lab in ("11_streams_lab", "12_portability_lab", "13_consistency_lab"))
    return {
        # arguments swapped: each ended in a bare TypeError deep in the checker, or in Python's words
        "tiled matmul: tile first": (lambda: ex5.check_tiled_square(s5.TILE, s5.matmul_tiled_kernel),
                                     r"^Not a kernel: .*got the number \d+\)\. If the checker takes more than one"),
        "OpenCL diff: size function first": (lambda: ex12.check_diff(s12.global_size_for, s12.diff_opencl),
                                             r"diff_opencl is called with no arguments.*global_size_for\(n, "
                                             r"local_size\).*order"),
        "choose function first": (lambda: ex4.check_scale_threads(s4.choose_threads, s4.blocks_per_sm),
                                  r"^Wrong function: choose_threads is called as choose_threads\(\).*blocks_per_sm"),
        "pipeline and choice swapped": (lambda: ex11.check_pipeline_choice(s11.choose_chunks_streams,
                                                                           s11.chunked_pipeline),
                                        r"^Wrong function: choose_chunks_streams is called.*chunked_pipeline"),
        "exercise 2's pipeline given to exercise 4": (lambda: ex11.check_no_hidden_sync(s11.chunked_pipeline),
                                                      r"pipeline is called with 3 arguments.*chunked_pipeline\(h_in"),
        # a dict where a function goes
        "litmus answers as a dict": (lambda: ex13.check_litmus_answers(s13.litmus_answers()),
                                     r"^Not a function: litmus_answers must be a Python function litmus_answers\(\) "
                                     r"\(got a dict with keys \('MP', \(1, 0\)\)"),
        "a dict for the pipeline": (lambda: ex11.check_chunked_pipeline({}), r"pipeline must be a function.*got a dict"),
    }


@pytest.mark.parametrize("case", ["tiled matmul: tile first", "OpenCL diff: size function first",
                                  "choose function first", "pipeline and choice swapped",
                                  "exercise 2's pipeline given to exercise 4", "litmus answers as a dict",
                                  "a dict for the pipeline"])
def test_misuse_of_a_checker_is_answered_by_the_book(case):
    """A checker's arguments swapped or a dict where a function goes: a CheckFailed or ArgumentError saying what was
    passed and what is expected, before anything runs (never a bare TypeError from deep inside)."""
    call, says = _misuse_cases()[case]
    with pytest.raises((lh.CheckFailed, lh.ArgumentError), match=says):
        call()
