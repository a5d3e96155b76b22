"""Launch configurations and argument checks: clear errors instead of Numba tracebacks."""

import numpy as np
import pytest
from numba import cuda

import labhelpers as lh
from labhelpers.arrays import to_host
from labhelpers.validate import check_launch


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


def test_the_devices_shared_memory_limit_comes_from_the_one_launch_check_home():
    from labhelpers import validate

    limit = validate.max_dynamic_shared()
    if lh.is_simulator():
        assert limit == validate.DEFAULT_SHARED_PER_BLOCK  # 48 KiB, as a GPU gives without opting in
    else:
        assert limit >= validate.DEFAULT_SHARED_PER_BLOCK  # the opt-in limit: 99 KiB or more since Volta
    with pytest.raises(lh.LaunchConfigError, match="shared memory"):
        validate.launch(1, 32, limit + 1, max_shared=limit)


def test_check_array_messages_name_the_fix():
    x = np.zeros((4, 4), dtype=np.float64)
    with pytest.raises(lh.ArrayArgumentError, match=r"astype\(np.float32\)"):
        lh.validate.array(x, "x", dtype=np.float32)
    with pytest.raises(lh.ArrayArgumentError, match="ascontiguousarray"):
        lh.validate.array(x.T[:, ::2], "x")
    with pytest.raises(lh.ArrayArgumentError, match="1 dimension"):
        lh.validate.array(x, "x", ndim=1)
    with pytest.raises(lh.ArrayArgumentError, match="must be an array"):
        lh.validate.array([1, 2], "x")
    lh.validate.array(x, "x", dtype=np.float64, ndim=2, shape=(4, 4))


def test_device_round_trip():
    a = np.arange(10, dtype=np.float32)
    assert np.array_equal(to_host(lh.to_device(a)), a)


def test_as_device_copies_host_arrays_and_keeps_device_arrays():
    from labhelpers.arrays import to_device

    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # not contiguous: copied contiguously
    d = to_device(x)
    assert np.array_equal(to_host(d), x)
    kept = cuda.to_device(np.ones(4, np.float32))
    assert to_device(kept) is kept


@cuda.jit
def _fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


def test_configured_kernel_launches_with_its_own_configuration_every_time():
    from labhelpers.launch import ConfiguredKernel

    fill_index = _fill_index
    small, large = ConfiguredKernel(fill_index, 1, 32), ConfiguredKernel(fill_index, 4, 32)
    for _ in range(2):  # interleaved: one kernel object, two configurations
        a = cuda.to_device(np.full(128, -1, np.int32))
        small(a)
        assert (to_host(a)[:32] == np.arange(32)).all() and (to_host(a)[32:] == -1).all()
        b = cuda.to_device(np.full(128, -1, np.int32))
        large(b)
        assert (to_host(b) == np.arange(128)).all()
