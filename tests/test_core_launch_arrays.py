"""Launch configurations and argument checks: clear errors instead of Numba tracebacks."""

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.arrays import to_host
from labhelpers.launch import check_launch


@pytest.mark.parametrize("n, threads, blocks", [(1, 256, 1), (256, 256, 1), (257, 256, 2), (1_000_003, 128, 7813)])
def test_blocks_is_a_ceiling_division(n, threads, blocks):
    launch = lh.launch_1d(n, threads)
    assert launch.blocks == blocks
    assert launch.total_threads >= n > launch.total_threads - threads
    assert launch.idle_threads == launch.total_threads - n


def test_launch_unpacks_as_blocks_threads():
    blocks, threads = lh.launch_1d(257, 256)
    assert (blocks, threads) == (2, 256)


@pytest.mark.parametrize("threads", [0, 1025, 2048])
def test_impossible_block_sizes_are_rejected_with_advice(threads):
    with pytest.raises(lh.LaunchConfigError, match="multiple of 32"):
        lh.launch_1d(1000, threads)


def test_check_launch_reasons():
    assert check_launch(256) is None
    assert "exceeds the limit of 1024" in check_launch(2048)
    assert "shared memory" in check_launch(256, shared_bytes=64 * 1024)


def test_check_array_messages_name_the_fix():
    x = np.zeros((4, 4), dtype=np.float64)
    with pytest.raises(lh.ArrayArgumentError, match=r"astype\(np.float32\)"):
        lh.check_array(x, "x", dtype=np.float32)
    with pytest.raises(lh.ArrayArgumentError, match="ascontiguousarray"):
        lh.check_array(x.T[:, ::2], "x")
    with pytest.raises(lh.ArrayArgumentError, match="1 dimension"):
        lh.check_array(x, "x", ndim=1)
    with pytest.raises(lh.ArrayArgumentError, match="must be an array"):
        lh.check_array([1, 2], "x")
    lh.check_array(x, "x", dtype=np.float64, ndim=2, shape=(4, 4))


def test_device_round_trip():
    a = np.arange(10, dtype=np.float32)
    assert np.array_equal(to_host(lh.to_device(a)), a)
