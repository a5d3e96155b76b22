"""The chapter's fastest single pass (``Scan(x, "lookback_warp")``, the same as ``Scan(x, "lookback",
lookback="warp")``: CUB's look-back, one 64-bit word per tile, warp 0 alone) against NumPy, on both backends.

Under the simulator the blocks run one after another, so a scan's look-back always finds its predecessor's P at
once: the tests that call :func:`~labhelpers.kernels.scan.tiled.lookback_warp` on hand-made descriptor words are the
ones that walk several windows and skip stale words beyond the nearest P (on a GPU too, where the ballots and the
shuffles are real), and wait for a tile that has published nothing yet (simulator only: a host thread writes the
late word while the kernel runs). On a GPU the sizes reach 256 tiles of 128 x 32, so that real blocks look back
across windows while their predecessors are still running.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from numba import cuda

import labhelpers as lh
from labhelpers.kernels import scan as sk
from labhelpers.kernels.scan.planner import LOOKBACKS
from labhelpers.kernels.scan.tiled import SIM_TILE, WARP_LOOKBACK_TILE
from markers import SIM, sim_only

#: Elements per tile: 32 threads x 4 items under the simulator, 128 x 32 on a GPU.
TILE = SIM_TILE[0] * SIM_TILE[1] if SIM else WARP_LOOKBACK_TILE[0] * WARP_LOOKBACK_TILE[1]
#: 1, 31, one full tile, one tile + 1, several tiles with a partial last one (on a GPU, 256 tiles and more too).
SIZES = (1, 31, TILE, TILE + 1, 2 * TILE + 77) + (() if SIM else (256 * TILE - 5, 2**22 + 3))


def _values(n: int, dtype, seed: int = 0) -> np.ndarray:
    """Small integers (exact in float32 too, in any order of addition)."""
    return np.random.default_rng(seed + n).integers(-8, 9, size=n).astype(dtype)


def _reference(x: np.ndarray, inclusive: bool) -> np.ndarray:
    ref = np.cumsum(x.astype(np.float64 if x.dtype.kind == "f" else np.int64))
    return (ref if inclusive else ref - x).astype(x.dtype)


def _words(status, values, dtype) -> np.ndarray:
    """Descriptor words as the kernel packs them: status in the high 32 bits, the value's bits in the low 32."""
    bits = np.asarray(values, dtype=dtype).view(np.uint32).astype(np.uint64)
    return (np.asarray(status, dtype=np.uint64) << np.uint64(32)) | bits


# --- the whole scan against NumPy --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (np.int32, np.float32))
def test_matches_cumsum_on_awkward_sizes(dtype):
    for n in SIZES:
        x = _values(n, dtype)
        for inclusive in (True, False):
            got = sk.scan(x, "lookback_warp", inclusive)
            assert got.dtype == dtype
            assert np.array_equal(got, _reference(x, inclusive)), (n, inclusive)


def test_atomic_reads_give_the_same_scan():
    x = _values(2 * TILE + 77, np.int32, seed=1)
    for inclusive in (True, False):
        assert np.array_equal(sk.scan(x, inclusive=inclusive, lookback="warp_atomic"), _reference(x, inclusive))


def test_in_place():
    dtype = np.float32
    x = _values(2 * TILE + 77, dtype, seed=2)
    d = lh.to_device(x)
    s = sk.Scan(d, "lookback", inclusive=False, out=d, lookback="warp")
    assert s.out is d
    s.launch()
    assert np.array_equal(d.copy_to_host(), _reference(x, inclusive=False))


@pytest.mark.parametrize("dtype", (np.int32, np.float32))
def test_two_calls_on_the_same_descriptors(dtype):
    # The epoch: the second call sees the first call's words (old statuses, the first data's sums) and must not
    # use them. Each call leaves every tile's word at (P of its epoch, its inclusive prefix's bits).
    first = _values(2 * TILE + 77, dtype, seed=3)
    second = _values(2 * TILE + 77, dtype, seed=4)
    d = lh.to_device(first)
    s = sk.Scan(d, "lookback", inclusive=True, lookback="warp")
    words, _counter = s._state
    tiles = words.size
    for epoch, x in ((1, first), (2, second)):
        d.copy_to_device(x)
        s.launch()
        want = _reference(x, inclusive=True)
        assert np.array_equal(s.result(), want), epoch
        ends = want[np.minimum(np.arange(1, tiles + 1) * TILE, x.size) - 1]
        assert np.array_equal(words.copy_to_host(), _words(np.full(tiles, 2 * epoch + 2), ends, dtype)), epoch


def test_empty_input():
    assert sk.scan(np.zeros(0, np.int32), lookback="warp").size == 0


# --- the look-back on hand-made descriptor words -------------------------------------------------------

def _probe(dtype, threads: int):
    """A one-block kernel that runs the look-back of tile ``tile`` and writes every thread's prefix to ``out``."""
    look = sk.tile_kernels(dtype, threads, SIM_TILE[1]).lookback_warp

    @cuda.jit
    def probe(tile, aggregate, descriptors, epoch, relaxed, out):
        votes = cuda.shared.array((2, 32), np.int32)
        vals = cuda.shared.array(32, dtype)
        out[cuda.threadIdx.x] = look(tile, aggregate[0], descriptors, epoch, votes, vals, relaxed)

    return probe


def _look_back(dtype, threads, tile, words, epoch, aggregate, relaxed=True, while_running=None):
    """Run the probe on a copy of ``words``; returns (every thread's prefix, the words afterwards)."""
    d = cuda.to_device(words)
    out = cuda.device_array(threads, dtype)
    helper = threading.Thread(target=while_running, args=(d,)) if while_running else None
    if helper:
        helper.start()
    _probe(dtype, threads)[1, threads](tile, np.array([aggregate], dtype), d, epoch, relaxed, out)
    if helper:
        helper.join()
    return out.copy_to_host(), d.copy_to_host()


@pytest.mark.parametrize("dtype,threads,relaxed", [(np.int32, 32, True), (np.int32, 32, False),
                                                   (np.float32, 32, True), (np.int32, 64, True)])
def test_lookback_walks_back_to_the_nearest_inclusive_prefix(dtype, threads, relaxed):
    # Tile 70, epoch 5 (A = 11, P = 12): tiles 69..21 have aggregates, tile 20 its inclusive prefix (lane 17 of the
    # third window), tiles 19..0 stale words of older epochs (statuses 9 and 10: "nothing yet" in this call, but
    # beyond the nearest P, so nobody waits for them). Float values with fractions check that the value's bits
    # travel, not its integer part.
    epoch, tile = 5, 70
    values = np.arange(tile + 1).astype(dtype) * (dtype(0.5) if dtype == np.float32 else 1) - 7
    status = np.full(tile + 1, 2 * epoch + 1)
    status[20] = 2 * epoch + 2
    values[20] = 1000
    status[:20] = np.where(np.arange(20) % 2, 2 * epoch - 1, 2 * epoch)
    words = _words(status, values, dtype)
    words[tile] = 0
    prefix, after = _look_back(dtype, threads, tile, words, epoch, dtype(3), relaxed)
    want = values[20:tile].astype(np.float64).sum()
    assert np.all(prefix == dtype(want)), prefix
    assert after[tile] == _words(2 * epoch + 2, dtype(want + 3), dtype)  # its own P: prefix + aggregate
    assert np.array_equal(np.delete(after, tile), np.delete(words, tile))  # nobody else's word is written


def test_lookback_without_any_prefix_stops_before_tile_0():
    # Every predecessor has only its aggregate (not even tile 0 its prefix): the lanes before tile 0 count as
    # "P, value 0", so the look-back adds all 40 and stops.
    epoch, tile = 2, 40
    values = np.arange(1, tile + 2, dtype=np.int32)
    words = _words(np.full(tile + 1, 2 * epoch + 1), values, np.int32)
    prefix, after = _look_back(np.int32, 32, tile, words, epoch, np.int32(-5))
    assert np.all(prefix == values[:tile].sum())
    assert after[tile] == _words(2 * epoch + 2, values[:tile].sum() - 5, np.int32)
    prefix0, after0 = _look_back(np.int32, 32, 0, words, epoch, np.int32(9))  # tile 0: no look-back at all
    assert np.all(prefix0 == 0) and after0[0] == _words(2 * epoch + 2, 9, np.int32)


@sim_only
def test_lookback_waits_for_a_tile_that_has_published_nothing():
    # Tile 40, epoch 3: tile 38 (lane 1) has published nothing yet (a word of epoch 2), nearer than tile 10's P.
    # Another thread publishes tile 38's aggregate once the probe has started (its own A word is there) and has
    # been spinning for a while: the prefix must include it.
    epoch, tile, late = 3, 40, 38
    values = np.arange(tile + 1, dtype=np.int32) + 100
    status = np.full(tile + 1, 2 * epoch + 1)
    status[10] = 2 * epoch + 2
    status[late] = 2 * epoch  # epoch 2's P: stale
    words = _words(status, values, np.int32)
    words[tile] = 0
    published = []

    def publish_late(d):
        while int(d[tile]) >> 32 != 2 * epoch + 1:  # the probe's thread 0 has published its aggregate
            time.sleep(0.01)
        time.sleep(0.2)  # the warp is reading the window again and again
        d[late] = _words(2 * epoch + 1, values[late] + 1000, np.int32)
        published.append(time.perf_counter())

    start = time.perf_counter()
    prefix, after = _look_back(np.int32, 32, tile, words, epoch, np.int32(1), while_running=publish_late)
    want = values[10:tile].sum() + 1000
    assert published and published[0] - start >= 0.2
    assert np.all(prefix == want)
    assert after[tile] == _words(2 * epoch + 2, want + 1, np.int32)


# --- the host entry point: the same checks as the chapter's single pass ------------------------------------

def _error(call):
    with pytest.raises(lh.LabError) as info:
        call()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("bad", [np.ones(8, np.float64), np.ones((2, 4), np.int32), np.ones(16, np.int32)[::2],
                                 [1, 2, 3], None])
def test_bad_arrays_fail_as_for_the_block_lookback(bad):
    assert _error(lambda: sk.scan(bad, lookback="warp")) == _error(lambda: sk.scan(bad))


@pytest.mark.parametrize("kwargs", [{"threads": 100}, {"threads": 0}, {"items": 12}, {"inclusive": "yes"}])
def test_bad_settings_fail_as_for_the_block_lookback(kwargs):
    x = np.ones(8, np.int32)
    assert _error(lambda: sk.scan(x, lookback="warp", **kwargs)) == _error(lambda: sk.scan(x, **kwargs))


def test_the_lookback_choice_is_checked():
    assert LOOKBACKS == ("block", "warp", "warp_atomic")
    with pytest.raises(lh.ArgumentError, match="'block', 'warp', 'warp_atomic'"):
        sk.Scan(np.ones(8, np.int32), lookback="cub")
    with pytest.raises(lh.ArgumentError, match="single pass only .methods 'lookback' and 'lookback_warp'"):
        sk.Scan(np.ones(8, np.int32), "chained", lookback="warp")
    with pytest.raises(lh.ArgumentError, match="for the block look-back use method 'lookback'"):
        sk.Scan(np.ones(8, np.int32), "lookback_warp", lookback="block")


def test_method_lookback_warp_is_the_warp_lookback_with_its_own_tile():
    x = np.ones(3 * TILE, np.int32)
    shape = SIM_TILE if SIM else WARP_LOOKBACK_TILE  # 128 x 32 on a GPU, whatever the block look-back's tile
    for s in (sk.Scan(x, "lookback_warp"), sk.Scan(x, "lookback", lookback="warp")):
        assert s.lookback == "warp" and (s.tiles.config.threads, s.tiles.config.items) == shape
        assert s.plan == [("tile_scan_warp_lookback", 3, shape[0])]
    assert sk.Scan(x, "lookback_warp", lookback="warp_atomic").plan[0][0] == "tile_scan_warp_lookback_atomic"
    assert sk.Scan(x, "lookback").lookback == "block" and sk.Scan(x, "chained").lookback is None
    assert "lookback_warp" in sk.SIMULATOR_METHODS and sk.METHODS["lookback_warp"].passes == 8


@pytest.mark.parametrize("threads, items", [(512, 32), (1024, 16)])
def test_a_tile_too_big_for_shared_memory_says_what_to_change(threads, items):
    with pytest.raises(lh.LaunchConfigError, match="fewer items per thread or fewer threads"):
        sk.Scan(np.ones(8, np.int32), "lookback_warp", threads=threads, items=items)


@sim_only
@pytest.mark.parametrize("kernel", ("tile_scan_warp_lookback", "tile_scan_lookback"))
def test_no_race_with_a_partial_last_tile(kernel):
    # Two warps per block (the simulator's look-back passes warp 0's votes and values through shared memory, every
    # thread of the block taking part), three tiles, the last one partial.
    tk = sk.tile_kernels(np.int32, 64, 4)
    n = 2 * 256 + 77
    x = _values(n, np.int32, seed=5)
    state = ((np.zeros(3, np.uint64),) if kernel == "tile_scan_warp_lookback" else
             (np.zeros(3, np.int32), np.zeros(3, np.int32), np.zeros(3, np.int32)))
    report = lh.check_races(getattr(tk, kernel), 3, 64, x, np.zeros(n, np.int32), *state, np.zeros(1, np.int32), 1, 1)
    assert report.ok, report
