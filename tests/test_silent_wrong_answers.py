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
    with pytest.raises(launchguard.SimulatorTooSlow, match=r"would take about [\d,]+ minutes.*lh\.problem_size"):
        run()
    assert time.perf_counter() - start < 20


@sim_only
def test_the_threshold_is_on_threads_launched():
    @cuda.jit
    def nothing(x):
        pass

    x = np.zeros(1, np.float32)
    with pytest.raises(launchguard.SimulatorTooSlow, match="524,544 threads"):
        nothing[launchguard.SIM_MAX_THREADS // 256 + 1, 256](x)  # 2049 blocks of 256
    with pytest.raises(launchguard.SimulatorTooSlow):
        nothing[(1024, 1024), (1, 1)](x)  # 2D grids count every block
    launchguard.check_simulator_size(launchguard.SIM_MAX_THREADS)  # at the threshold: allowed
