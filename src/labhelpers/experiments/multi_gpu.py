"""Chapter "Streams and the host-device link", beyond one GPU: peer-to-peer copies and a job split in two.

* :func:`gpu_count`: how many GPUs this machine has (the simulator counts its one pretend GPU), and
  :func:`why_not_measured`, the sentence a notebook prints where fewer than two are present;
* :func:`peer_copy_table`: 256 MiB copied from one GPU's memory to another's (``cudaMemcpyPeerAsync``),
  each way and both ways at once, and whether the driver lets the two GPUs access each other directly;
* :func:`split_job_table`: the chapter's pipeline (:class:`~labhelpers.kernels.streams.StreamPipeline`)
  on one GPU with the whole job, on each GPU alone with half of it, and on both GPUs at once, each with
  its half, issued from one host thread;
* :func:`multi_gpu_table`: both, as the one table ``bench/streams.py`` stores as ``ch11_multi_gpu``.

Everything here needs two GPUs (``devices=(0, 1)``): with fewer, it raises
:class:`~labhelpers.errors.GPUOnlyError` and says so. ``devices=(0, 0)`` runs the same code on one GPU
twice: a check that the code works, whose numbers say nothing about two GPUs (``same_device`` is True in
every row then).
"""

from __future__ import annotations

import statistics
import time
from typing import Sequence

import numpy as np
import pandas as pd

from .. import backend, validate
from ..errors import ArgumentError, GPUOnlyError
from ..kernels import streams as ks
from . import streams as exs

#: The pipeline configuration each GPU runs: chunks, streams, issue API.
SPLIT_CHUNKS = 16
SPLIT_STREAMS = 4


def gpu_count() -> int:
    """The number of GPUs Numba sees (1 under the simulator, which pretends to have one)."""
    from numba import cuda

    return len(cuda.gpus)


def why_not_measured() -> str | None:
    """None where two GPUs are present; otherwise the sentence that says why nothing is measured here."""
    if backend.is_simulator():
        return "the simulator has no GPUs: the two-GPU measurement needs two real ones (the model stands in for it)"
    count = gpu_count()
    if count < 2:
        return f"{count} GPU here: the two-GPU measurement needs two (the model stands in for it)"
    return None


def _check_devices(devices: Sequence[int], what: str) -> tuple[int, int]:
    try:
        a, b = devices
    except (TypeError, ValueError):
        raise ArgumentError(f"devices must be two GPU numbers, e.g. (0, 1); got {devices!r}") from None
    a = validate.integer(a, "devices[0]", minimum=0)
    b = validate.integer(b, "devices[1]", minimum=0)
    if backend.is_simulator():
        raise GPUOnlyError(f"{what} measures real GPUs; the simulator has none, so the chapter shows the model.")
    count = gpu_count()
    if max(a, b) >= count:
        raise GPUOnlyError(f"{what} needs two GPUs and this machine has {count}: devices={devices!r} asks for GPU "
                           f"{max(a, b)}. The chapter shows the model instead (devices=(0, 0) runs the code on one "
                           "GPU twice, as a check of the code, not of two GPUs).")
    return a, b


def _cupy():
    try:
        import cupy
    except ImportError:  # pragma: no cover - depends on the machine
        raise GPUOnlyError("the peer-to-peer copies use CuPy, which is not installed here") from None
    return cupy


def _enable_peer(cp, device: int, peer: int) -> bool:
    """Let ``device`` access ``peer``'s memory directly where the driver allows it; True if it does."""
    if device == peer:
        return True
    if not cp.cuda.runtime.deviceCanAccessPeer(device, peer):
        return False
    with cp.cuda.Device(device):
        try:
            cp.cuda.runtime.deviceEnablePeerAccess(peer)
        except cp.cuda.runtime.CUDARuntimeError as err:  # enabled already by an earlier call: fine
            if "PeerAccessAlreadyEnabled" not in str(err) and "already" not in str(err).lower():
                raise
    return True


def peer_copy_table(devices: Sequence[int] = (0, 1), nbytes: int = 2**28, *, repeat: int = 5) -> pd.DataFrame:
    """Copies of ``nbytes`` between the memories of two GPUs: ``a -> b``, ``b -> a`` and both at once.

    Each copy is ``cudaMemcpyPeerAsync`` on a stream of the source GPU, timed with that GPU's CUDA events
    (both at once: the wall time of the two, host clock). Rows: ``case``, ``nbytes``, ``median_ms``,
    ``min_ms``, ``gbps`` (bytes moved / median time), ``peer_access`` (the driver lets the GPUs read each
    other's memory directly, over NVLink or PCIe; without it the copy is staged through the host),
    ``same_device``.
    """
    nbytes = validate.integer(nbytes, "nbytes", minimum=1)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    a, b = _check_devices(devices, "peer_copy_table")
    cp = _cupy()
    peer = _enable_peer(cp, a, b) and _enable_peer(cp, b, a)
    buffers, streams = {}, {}
    for d in (a, b):
        with cp.cuda.Device(d):
            buffers[d] = (cp.ones(nbytes, cp.uint8), cp.empty(nbytes, cp.uint8))
            streams[d] = cp.cuda.Stream(non_blocking=True)

    def copy(src: int, dst: int) -> None:
        with cp.cuda.Device(src):
            cp.cuda.runtime.memcpyPeerAsync(buffers[dst][1].data.ptr, dst, buffers[src][0].data.ptr, src, nbytes,
                                            streams[src].ptr)

    def timed(src: int, dst: int) -> float:
        with cp.cuda.Device(src):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(streams[src])
            copy(src, dst)
            end.record(streams[src])
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end)

    def both() -> float:
        for d in (a, b):
            cp.cuda.Device(d).synchronize()
        t0 = time.perf_counter()
        copy(a, b)
        copy(b, a)
        for d in (a, b):
            streams[d].synchronize()
        return (time.perf_counter() - t0) * 1e3

    rows = []
    for case, fn, moved in ((f"GPU {a} -> GPU {b}", lambda: timed(a, b), nbytes),
                            (f"GPU {b} -> GPU {a}", lambda: timed(b, a), nbytes),
                            ("both ways at once", both, 2 * nbytes)):
        fn()  # warm-up
        times = [fn() for _ in range(repeat)]
        median = statistics.median(times)
        rows.append({"experiment": "peer copy", "case": case, "nbytes": nbytes, "median_ms": median,
                     "min_ms": min(times), "gbps": moved / (median * 1e-3) / 1e9, "peer_access": bool(peer),
                     "same_device": a == b})
    return pd.DataFrame(rows)


def split_job_table(devices: Sequence[int] = (0, 1), n: int = exs.PIPELINE_N, iters: int | None = None, *,
                    repeat: int = 5, issue_api: str = "driver") -> pd.DataFrame:
    """The pipelined job (``n`` float32, ``fma_chain``) on one GPU, and split across two.

    Rows (``case``): the whole job on GPU ``a``; half of it on GPU ``a`` alone and on GPU ``b`` alone;
    both halves at once, one per GPU, issued from one host thread (all of GPU ``a``'s operations, then
    GPU ``b``'s: both queue asynchronously). Columns: ``median_ms``, ``min_ms`` (host clock from the first
    call to the last synchronisation), ``speedup`` (the whole job on one GPU over this row),
    ``iters``, ``chunks``, ``streams``, ``same_device``. ``iters`` defaults to the chapter's calibration
    (the kernel about 0.8 x the H2D copy on GPU ``a``). Both halves' outputs are checked against the
    one-GPU output, bit for bit.
    """
    from numba import cuda

    n = validate.integer(n, "n", minimum=2)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    validate.choice(issue_api, "issue_api", ks.ISSUE_APIS)
    a, b = _check_devices(devices, "split_job_table")
    x = np.random.default_rng(0).random(n, dtype=np.float32) * 4
    half = n // 2
    with cuda.gpus[a]:
        whole = ks.StreamPipeline(n, SPLIT_CHUNKS, SPLIT_STREAMS, 1, issue_api=issue_api)
        whole.h_in[:] = x
        if iters is None:
            iters = exs.calibrate_iters(n, 0.8 * exs.stage_times(whole, repeat=3)["H2D"])
        whole.iters = validate.integer(iters, "iters", minimum=0)
    pipes = {}
    for d, (lo, hi) in ((a, (0, half)), (b, (half, n))):
        with cuda.gpus[d]:
            p = ks.StreamPipeline(hi - lo, SPLIT_CHUNKS, SPLIT_STREAMS, whole.iters, issue_api=issue_api)
            p.h_in[:] = x[lo:hi]
            pipes[(d, lo)] = p
    halves = list(pipes.items())

    def run(parts: list) -> float:
        for (d, _lo), p in parts:
            with cuda.gpus[d]:
                cuda.synchronize()
        t0 = time.perf_counter()
        for (d, _lo), p in parts:
            with cuda.gpus[d]:
                p.issue("depth-first")
        for (d, _lo), p in parts:
            with cuda.gpus[d]:
                p.synchronize()
        return (time.perf_counter() - t0) * 1e3

    cases = [("whole job, one GPU", [((a, 0), whole)]),
             (f"half, GPU {a} alone", halves[:1]), (f"half, GPU {b} alone", halves[1:]),
             ("halves on both GPUs at once", halves)]
    rows = []
    for case, parts in cases:
        run(parts)  # warm-up
        times = [run(parts) for _ in range(repeat)]
        rows.append({"experiment": "split job", "case": case, "median_ms": statistics.median(times),
                     "min_ms": min(times)})
    expected = np.array(whole.h_out)
    got = np.concatenate([np.array(p.h_out) for _key, p in halves])
    if not np.array_equal(got, expected):
        raise AssertionError(f"the two halves' output differs from the one-GPU output in "
                             f"{int(np.count_nonzero(got != expected))} of {n} elements")
    table = pd.DataFrame(rows)
    table["speedup"] = float(table["median_ms"].iloc[0]) / table["median_ms"]
    table["n"], table["iters"], table["chunks"], table["streams"] = n, whole.iters, SPLIT_CHUNKS, SPLIT_STREAMS
    table["issue"], table["same_device"] = issue_api, a == b
    return table


def multi_gpu_table(devices: Sequence[int] = (0, 1), *, n: int = exs.PIPELINE_N, nbytes: int = 2**28,
                    repeat: int = 5) -> pd.DataFrame:
    """:func:`peer_copy_table` and :func:`split_job_table` in one table (rows told apart by ``experiment``)."""
    validate.integer(n, "n", minimum=2)
    validate.integer(nbytes, "nbytes", minimum=1)
    validate.integer(repeat, "repeat", minimum=1)
    _check_devices(devices, "multi_gpu_table")
    return pd.concat([peer_copy_table(devices, nbytes, repeat=repeat), split_job_table(devices, n, repeat=repeat)],
                     ignore_index=True)


__all__ = ["SPLIT_CHUNKS", "SPLIT_STREAMS", "gpu_count", "multi_gpu_table", "peer_copy_table", "split_job_table",
           "why_not_measured"]
