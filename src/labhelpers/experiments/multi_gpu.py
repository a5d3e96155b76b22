"""Chapter "Beyond one GPU" (and chapter 11's two-GPU section): measurements on several GPUs of one machine.

Chapter 11 uses the first three (two GPUs):

* :func:`gpu_count`, and :func:`why_not_measured`, the sentence a notebook prints where fewer than two are present;
* :func:`peer_copy_table`: 256 MiB copied from one GPU's memory to another's (``cudaMemcpyPeerAsync``),
  each way and both ways at once, and whether the driver lets the two GPUs access each other directly;
* :func:`split_job_table`: chapter 11's pipeline (:class:`~labhelpers.kernels.streams.StreamPipeline`)
  on one GPU with the whole job, on each GPU alone with half of it, and on both GPUs at once, issued from
  one host thread; :func:`multi_gpu_table`: both, as one table.

Chapter 14 adds, for any number of GPUs (``devices=(0, 1, 2, 3)``):

* :func:`topology_table`: what the driver says about every pair (peer access, the link ``nvidia-smi topo -m``
  names, NVLink's per-direction peak from ``nvidia-smi nvlink -s``);
* :func:`peer_copy_pairs`: :func:`peer_copy_table` for every pair;
* :func:`issue_table`: the split job issued from one host thread, GPU after GPU, and from one thread per GPU;
* :func:`collectives_table`: NCCL all-reduce, all-gather and broadcast (``cupy.cuda.nccl``) over message
  sizes, with nccl-tests' algorithm and bus bandwidth (:mod:`labhelpers.models.multi_gpu`);
* :func:`jacobi_scaling_table`: :class:`~labhelpers.kernels.multi_gpu.SplitJacobi`, strong and weak scaling on
  1, 2, 4... GPUs, with and without overlapping the halo exchange;
* :func:`nbody_scaling_table`: data-parallel n-body, each GPU its share of the bodies, then an NCCL all-gather.

Everything here times real GPUs: under the simulator it raises :class:`~labhelpers.errors.GPUOnlyError`, and
where the machine has fewer GPUs than ``devices`` names, too, saying how many it has. ``devices=(0, 0)``
runs the two-GPU code of chapter 11 on one GPU twice (a check of the code, not of two GPUs); NCCL needs
distinct GPUs. ``bench/multi_gpu.py`` stores these tables as ``ch14_<table>_<g>gpu`` (:func:`reference_name`).
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import threading
import time
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, refdata, validate
from ..errors import ArgumentError, GPUOnlyError
from ..kernels import multi_gpu as kmg
from ..kernels import nbody as knb
from ..kernels import stencil as kst
from ..kernels import streams as ks
from ..launch import blocks_for
from ..models import multi_gpu as model
from . import streams as exs

#: The pipeline configuration each GPU runs: chunks, streams, issue API.
SPLIT_CHUNKS = 16
SPLIT_STREAMS = 4


gpu_count = kmg.gpu_count


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
    backend.require_gpu(what, because="measures real GPUs", instead="The chapter shows the model.")
    count = gpu_count()
    if max(a, b) >= count:
        raise GPUOnlyError(f"{what} needs two GPUs and this machine has {count}: devices={devices!r} asks for GPU "
                           f"{max(a, b)}. The chapter shows the model instead (devices=(0, 0) runs the code on one "
                           "GPU twice, as a check of the code, not of two GPUs).")
    return a, b


def _cupy():
    backend.require_gpu("the peer-to-peer copies", needs_cupy=True, instead="The chapter shows the model.")
    import cupy  # optional: the GPU extra, usable (require_gpu checked)

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


# ------------------------------------------------------------------------------------------------ chapter 14

#: The GPU counts chapter 14's reference tables are collected for (where the machine has them).
REFERENCE_GPUS = (2, 4)
#: The tables ``bench/multi_gpu.py`` stores for each GPU count, by short name.
REFERENCE_TABLES = ("topology", "peer_copies", "issue", "collectives", "jacobi_scaling", "nbody_scaling")
#: Message sizes of the collectives sweep: 8 B to 1 GiB, a factor of 4 apart (nccl-tests' -b 8 -e 1G -f 4).
COLLECTIVE_SIZES = tuple(2**k for k in range(3, 31, 2))
#: Chapter 14's collectives.
COLLECTIVES = ("all_reduce", "all_gather", "broadcast")
#: Rows (and columns) of one GPU's share in the Jacobi weak-scaling sweep, and the strong-scaling grid.
JACOBI_NY, JACOBI_NX = 16384, 16384
#: Bodies of the n-body sweep (a multiple of 4, so that 1, 2 and 4 GPUs get equal shares, as NCCL's all-gather needs).
NBODY_N = 2**17
#: What the chapter prints where chapter 14's reference tables have not been collected yet.
COLLECTOR = "bash tools/device_collect_multi.sh"


def reference_name(table: str, gpus: int) -> str:
    """The reference file of ``table`` (one of :data:`REFERENCE_TABLES`) measured on ``gpus`` GPUs."""
    validate.choice(table, "table", REFERENCE_TABLES)
    return f"ch14_{table}_{validate.integer(gpus, 'gpus', minimum=2)}gpu"


def shipped(table: str, gpus: int) -> bool:
    """Whether the package ships :func:`reference_name` ``(table, gpus)``."""
    return reference_name(table, gpus) in refdata.available_references()


def missing_sentence(table: str, gpus: Sequence[int] = REFERENCE_GPUS) -> str | None:
    """None when every reference of ``table`` is shipped; otherwise the sentence the chapter prints instead."""
    missing = [g for g in gpus if not shipped(table, g)]
    if not missing:
        return None
    counts = " and ".join(str(g) for g in missing)
    return (f"Reference measurements of {table.replace('_', ' ')} for {counts} GPUs are collected by {COLLECTOR} "
            "on a multi-GPU machine, and are not yet shipped with the package: the model stands in for them.")


#: Rows of chapter 9's ``ch09_jacobi`` table that are yardsticks, not Jacobi kernels: the copy (the memory's
#: yardstick, about 1.05 times the best Jacobi kernel on the reference GPU) and the FMA peak (no bandwidth at all).
JACOBI_YARDSTICKS = ("copy", "fp32 FMA peak")


def best_jacobi_rate(table: pd.DataFrame) -> tuple[str, float]:
    """The fastest *Jacobi kernel* of chapter 9's table (``ch09_jacobi``): its name and its rate in GB/s.

    The table also holds yardsticks (:data:`JACOBI_YARDSTICKS`): the copy moves the same bytes faster than any
    stencil can, so ``table["gbps"].max()`` would model a Jacobi step that no kernel of chapter 9 runs.

    Raises:
        ArgumentError: the table has no ``kernel``/``variant``/``gbps`` columns, or no Jacobi kernel with a rate.
    """
    missing = {"kernel", "variant", "gbps"} - set(getattr(table, "columns", ()))
    if missing:
        raise ArgumentError(f"best_jacobi_rate needs chapter 9's ch09_jacobi table (columns kernel, variant, gbps); "
                            f"this one lacks {sorted(missing)}: pass lh.live_or_reference(None, 'ch09_jacobi').table.")
    kernels = table[~table["variant"].isin(JACOBI_YARDSTICKS) & table["gbps"].notna()]
    if kernels.empty:
        raise ArgumentError("the table has no Jacobi kernel with a measured rate (only yardsticks): pass chapter 9's "
                            "ch09_jacobi table.")
    best = kernels.loc[kernels["gbps"].idxmax()]
    return str(best["kernel"]), float(best["gbps"])


def require_devices(devices: Sequence[int], what: str, *, minimum: int = 2, distinct: bool = False) -> tuple[int, ...]:
    """``devices`` as GPU numbers, if this machine has them: the guard of every chapter 14 measurement.

    Raises:
        ArgumentError: not a tuple of whole numbers >= 0, fewer than ``minimum``, or (``distinct``) a repeat.
        GPUOnlyError: under the simulator, or a GPU this machine does not have (the message says how many).
    """
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence) or len(devices) < minimum:
        raise ArgumentError(f"devices must be a tuple of at least {minimum} GPU numbers, e.g. "
                            f"{tuple(range(minimum))}; got {devices!r}")
    ids = tuple(validate.integer(d, f"devices[{k}]", minimum=0) for k, d in enumerate(devices))
    if distinct and len(set(ids)) != len(ids):
        raise ArgumentError(f"devices={ids!r} names a GPU twice: {what} needs distinct GPUs (NCCL refuses one "
                            "GPU twice in a communicator), e.g. (0, 1).")
    backend.require_gpu(what, because=f"measures {len(set(ids))} real GPU(s)",
                        instead="The chapter shows the model and reference data measured on 2 and 4 GPUs.")
    count = gpu_count()
    if max(ids) >= count:
        raise GPUOnlyError(f"{what} needs GPU {max(ids)} and this machine has {count} GPU(s): pass devices below "
                           f"{count}, e.g. {tuple(range(min(count, len(ids))))}. The chapter shows the model and "
                           "reference data measured on 2 and 4 GPUs instead.")
    return ids


def nvidia_smi(*args: str) -> str | None:
    """The text ``nvidia-smi <args>`` prints, or None where it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -m``'s matrix as ``{(a, b): "NV18" | "PIX" | "SYS" | ...}`` for GPUs ``a != b``."""
    links, header = {}, None
    for line in text.splitlines():
        cells = line.split()
        if header is None and cells and cells[0].startswith("GPU0"):
            header = [c for c in cells if re.fullmatch(r"GPU\d+", c)]
            continue
        if header and cells and re.fullmatch(r"GPU\d+", cells[0]):
            a = int(cells[0][3:])
            for b_name, value in zip(header, cells[1:1 + len(header)]):
                b = int(b_name[3:])
                if a != b:
                    links[(a, b)] = value
    return links


def nvlink_peak_gbs(gpu: int) -> float | None:
    """NVLink's peak from GPU ``gpu``, one direction, GB/s: the sum of ``nvidia-smi nvlink -s``'s link speeds."""
    text = nvidia_smi("nvlink", "-s", "-i", str(validate.integer(gpu, "gpu", minimum=0)))
    if not text:
        return None
    speeds = [float(v) for v in re.findall(r"Link \d+:\s*([\d.]+)\s*GB/s", text)]
    return sum(speeds) if speeds else None


def topology_table(devices: Sequence[int] = (0, 1)) -> pd.DataFrame:
    """What the driver says about every ordered pair of ``devices``.

    Columns: ``a``, ``b``, ``peer_access`` (``cuDeviceCanAccessPeer``), ``link`` (``nvidia-smi topo -m``:
    ``NV<k>`` = k NVLinks, ``PIX``/``PXB``/``PHB``/``NODE``/``SYS`` = PCIe paths, farther and farther),
    ``nvlink_peak_gbs`` (GPU ``a``'s NVLink links summed, one direction; NaN without NVLink).
    """
    ids = require_devices(devices, "topology_table", distinct=True)
    from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

    links = parse_topology(nvidia_smi("topo", "-m") or "")
    rows = []
    for a in ids:
        peak = nvlink_peak_gbs(a)
        for b in ids:
            if a != b:
                err, can = cu.cuDeviceCanAccessPeer(a, b)
                rows.append({"a": a, "b": b, "peer_access": bool(can) and int(err) == 0,
                             "link": links.get((a, b), "unknown"),
                             "nvlink_peak_gbs": float("nan") if peak is None else peak})
    return pd.DataFrame(rows)


def peer_copy_pairs(devices: Sequence[int] = (0, 1), nbytes: int = 2**28, *, repeat: int = 5) -> pd.DataFrame:
    """:func:`peer_copy_table` for every pair ``a < b`` of ``devices``, with columns ``a`` and ``b`` added."""
    ids = require_devices(devices, "peer_copy_pairs", distinct=True)
    tables = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            t = peer_copy_table((a, b), nbytes, repeat=repeat)
            t.insert(0, "b", b)
            t.insert(0, "a", a)
            tables.append(t)
    return pd.concat(tables, ignore_index=True)


def issue_table(devices: Sequence[int] = (0, 1), n: int = exs.PIPELINE_N, *, repeat: int = 5,
                issue_api: str = "driver") -> pd.DataFrame:
    """Chapter 11's job split over ``devices``: issued from one host thread, and from one thread per GPU.

    Rows (``case``): the whole job on the first GPU; one share alone on each GPU; all shares at once, one
    host thread issuing GPU after GPU; all at once, one Python thread per GPU (each issues and waits for its
    own GPU). Columns: ``median_ms``, ``min_ms`` (host clock, first issue to last synchronisation),
    ``issue_ms`` (median host time until every issue call returned), ``speedup`` (whole job over this row),
    ``gpus``, ``n``, ``iters``. The shares' outputs are checked against the one-GPU output, bit for bit.
    """

    ids = require_devices(devices, "issue_table")
    n = validate.integer(n, "n", minimum=len(ids))
    repeat = validate.integer(repeat, "repeat", minimum=1)
    validate.choice(issue_api, "issue_api", ks.ISSUE_APIS)
    x = np.random.default_rng(0).random(n, dtype=np.float32) * 4
    with cuda.gpus[ids[0]]:
        whole = ks.StreamPipeline(n, SPLIT_CHUNKS, SPLIT_STREAMS, 1, issue_api=issue_api)
        whole.h_in[:] = x
        whole.iters = exs.calibrate_iters(n, 0.8 * exs.stage_times(whole, repeat=3)["H2D"])
    shares = []
    for d, (first, count) in zip(ids, kmg.split_rows(n, len(ids))):
        with cuda.gpus[d]:
            p = ks.StreamPipeline(count, SPLIT_CHUNKS, SPLIT_STREAMS, whole.iters, issue_api=issue_api)
            p.h_in[:] = x[first:first + count]
            shares.append((d, p))

    def one_thread(parts: list) -> tuple[float, float]:
        for d, _p in parts:
            with cuda.gpus[d]:
                cuda.synchronize()
        t0 = time.perf_counter()
        for d, p in parts:
            with cuda.gpus[d]:
                p.issue("depth-first")
        issued = time.perf_counter()
        for d, p in parts:
            with cuda.gpus[d]:
                p.synchronize()
        return (time.perf_counter() - t0) * 1e3, (issued - t0) * 1e3

    def thread_per_gpu(parts: list) -> tuple[float, float]:
        for d, _p in parts:
            with cuda.gpus[d]:
                cuda.synchronize()
        issued: list[float] = []
        start = threading.Barrier(len(parts) + 1)

        def work(d: int, p) -> None:
            with cuda.gpus[d]:
                start.wait()
                p.issue("depth-first")
                issued.append(time.perf_counter())
                p.synchronize()

        threads = [threading.Thread(target=work, args=part) for part in parts]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        return (time.perf_counter() - t0) * 1e3, (max(issued) - t0) * 1e3

    cases = [("whole job, one GPU", one_thread, [(ids[0], whole)])]
    cases += [(f"share, GPU {d} alone", one_thread, [(d, p)]) for d, p in shares]
    cases += [("all shares, one thread", one_thread, shares), ("all shares, a thread per GPU", thread_per_gpu, shares)]
    rows = []
    for case, run, parts in cases:
        run(parts)  # warm-up
        times = [run(parts) for _ in range(repeat)]
        rows.append({"experiment": "issue", "case": case, "median_ms": statistics.median(t for t, _ in times),
                     "min_ms": min(t for t, _ in times), "issue_ms": statistics.median(i for _, i in times)})
    got = np.concatenate([np.array(p.h_out) for _d, p in shares])
    if not np.array_equal(got, np.array(whole.h_out)):
        raise AssertionError(f"the shares' output differs from the one-GPU output in "
                             f"{int(np.count_nonzero(got != np.array(whole.h_out)))} of {n} elements")
    table = pd.DataFrame(rows)
    table["speedup"] = float(table["median_ms"].iloc[0]) / table["median_ms"]
    table["gpus"], table["n"], table["iters"], table["issue"] = len(ids), n, whole.iters, issue_api
    return table


def _nccl():
    cp = _cupy()
    try:
        from cupy.cuda import nccl  # optional: the GPU extra
    except ImportError:  # pragma: no cover - depends on the machine
        raise GPUOnlyError("the collectives use NCCL through cupy.cuda.nccl, which this CuPy lacks (install the "
                           "nvidia-nccl wheel of your CUDA version)") from None
    if not getattr(nccl, "available", True):  # pragma: no cover
        raise GPUOnlyError("cupy.cuda.nccl is not available here: install NCCL for CuPy")
    return cp, nccl


def collectives_table(devices: Sequence[int] = (0, 1), sizes: Sequence[int] = COLLECTIVE_SIZES,
                      collectives: Sequence[str] = COLLECTIVES, *, repeat: int = 5) -> pd.DataFrame:
    """NCCL collectives on ``devices`` from one host thread (``ncclCommInitAll``, group calls), over ``sizes``.

    ``nbytes`` is nccl-tests' size ``S``: the buffer of an all-reduce (float32 sum) or a broadcast (root = the
    first GPU), the whole output of an all-gather (each GPU contributes ``S / g``; sizes that ``4 g`` does not
    divide are rounded down to a multiple). Each row times ``iters`` back-to-back calls between CUDA events on
    every GPU's stream and keeps the slowest GPU's time; ``repeat`` such runs give the median. Columns:
    ``collective``, ``gpus``, ``nbytes``, ``time_us``, ``algbw_gbs``, ``busbw_gbs`` (nccl-tests' factors,
    :func:`labhelpers.models.multi_gpu.bus_factor`), ``correct`` (the result was checked after the warm-up).
    """
    ids = require_devices(devices, "collectives_table", distinct=True)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    for c in collectives:
        validate.choice(c, "collectives[...]", COLLECTIVES)
    sizes = [validate.integer(v, "sizes[...]", minimum=4 * len(ids)) for v in sizes]
    cp, nccl = _nccl()
    g = len(ids)
    comms = nccl.NcclCommunicator.initAll(list(ids))
    streams = []
    for d in ids:
        with cp.cuda.Device(d):
            streams.append(cp.cuda.Stream(non_blocking=True))
    rows = []
    for collective in collectives:
        for size in sizes:
            size -= size % (4 * g)
            count = size // 4
            send, recv = [], []
            for r, d in enumerate(ids):
                with cp.cuda.Device(d):
                    if collective == "all_gather":
                        send.append(cp.full(count // g, r + 1, dtype=cp.float32))
                    else:
                        send.append(cp.full(count, r + 1, dtype=cp.float32))
                    recv.append(cp.zeros(count, dtype=cp.float32))

            def issue(times: int) -> None:
                for _ in range(times):
                    nccl.groupStart()
                    for r, comm in enumerate(comms):
                        sp, rp, st = send[r].data.ptr, recv[r].data.ptr, streams[r].ptr
                        if collective == "all_reduce":
                            comm.allReduce(sp, rp, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, st)
                        elif collective == "all_gather":
                            comm.allGather(sp, rp, count // g, nccl.NCCL_FLOAT32, st)
                        else:
                            comm.broadcast(sp, rp, count, nccl.NCCL_FLOAT32, 0, st)
                    nccl.groupEnd()

            def wait() -> None:
                for s in streams:
                    s.synchronize()

            issue(2)
            wait()
            expected = {"all_reduce": np.full(count, g * (g + 1) / 2, np.float32),
                        "all_gather": np.repeat(np.arange(1, g + 1, dtype=np.float32), count // g),
                        "broadcast": np.full(count, 1, np.float32)}[collective]
            correct = all(np.array_equal(cp.asnumpy(recv[r]), expected) for r in range(g))
            iters = 20 if size <= 2**24 else 5
            runs = []
            for _ in range(repeat):
                events = []
                for r, d in enumerate(ids):
                    with cp.cuda.Device(d):
                        start, end = cp.cuda.Event(), cp.cuda.Event()
                        start.record(streams[r])
                        events.append((d, start, end))
                issue(iters)
                for r, (d, start, end) in enumerate(events):
                    with cp.cuda.Device(d):
                        end.record(streams[r])
                wait()
                runs.append(max(cp.cuda.get_elapsed_time(s0, s1) for _d, s0, s1 in events) / iters)
            ms = statistics.median(runs)
            rows.append({"experiment": "collective", "collective": collective, "gpus": g, "nbytes": size,
                         "time_us": ms * 1e3, "algbw_gbs": model.algbw_gbs(size, ms * 1e-3),
                         "busbw_gbs": model.busbw_gbs(collective, size, ms * 1e-3, g), "correct": bool(correct)})
            del send, recv
    return pd.DataFrame(rows)


def _time_steps(solver: kmg.SplitJacobi, steps: int) -> tuple[float, float]:
    """(ms per step, host ms per step to issue) of ``steps`` steps, after a warm-up."""
    solver.step(2)
    solver.synchronize()
    t0 = time.perf_counter()
    solver.step(steps)
    issued = time.perf_counter()
    solver.synchronize()
    end = time.perf_counter()
    return (end - t0) * 1e3 / steps, (issued - t0) * 1e3 / steps


def jacobi_scaling_table(devices: Sequence[int] = (0, 1), *, ny: int = JACOBI_NY, nx: int = JACOBI_NX,
                         steps: int = 50, modes: Sequence[str] = ("weak", "strong")) -> pd.DataFrame:
    """:class:`~labhelpers.kernels.multi_gpu.SplitJacobi` on the first 1, 2, 4... of ``devices``.

    ``weak``: ``ny`` rows per GPU (a grid of ``g * ny`` rows); ``strong``: one ``ny x nx`` grid. Each with
    the halo exchange overlapped and not. Before timing, a small grid on the same GPUs is checked against
    :func:`~labhelpers.kernels.stencil.jacobi_reference`. Columns: ``mode``, ``overlap``, ``gpus``, ``ny``,
    ``nx``, ``step_ms`` (host clock over ``steps`` steps), ``issue_ms`` (host time to issue one step),
    ``speedup`` and ``efficiency`` (as :func:`labhelpers.models.multi_gpu.scaling_table` defines them),
    ``gbs`` (8 bytes per point per step), ``halo_bytes``.
    """
    ids = require_devices(devices, "jacobi_scaling_table", minimum=1)
    ny = validate.integer(ny, "ny", minimum=8)
    nx = validate.integer(nx, "nx", minimum=8)
    steps = validate.integer(steps, "steps", minimum=1)
    counts = [g for g in (1, 2, 4, 8) if g <= len(ids)]
    small = np.random.default_rng(0).random((67, 131), dtype=np.float32)
    got = kmg.run_split_jacobi(small, 4, ids[:counts[-1]])
    if not np.array_equal(got, kst.jacobi_reference(small, 4)):
        raise AssertionError("the split Jacobi step differs from chapter 9's reference on these GPUs")
    rows = []
    for mode in modes:
        validate.choice(mode, "modes[...]", ("weak", "strong"))
        base = {}
        for overlap in (True, False):
            for g in counts:
                total = ny * g if mode == "weak" else ny
                u = kst.hot_plate(total, nx)
                solver = kmg.SplitJacobi(u, ids[:g], overlap=overlap)
                step_ms, issue_ms = _time_steps(solver, steps)
                base.setdefault(overlap, step_ms)
                speedup = base[overlap] / step_ms * (g if mode == "weak" else 1)
                rows.append({"experiment": "jacobi", "mode": mode, "overlap": overlap, "gpus": g, "ny": total,
                             "nx": nx, "step_ms": step_ms, "issue_ms": issue_ms, "speedup": speedup,
                             "efficiency": speedup / g, "gbs": 8 * total * nx / (step_ms * 1e-3) / 1e9,
                             "halo_bytes": solver.halo_bytes})
                del solver, u
    return pd.DataFrame(rows)


def _sample_error(acc: np.ndarray, pos: np.ndarray, eps2: float, sample: int = 64) -> float:
    """Largest error of ``acc`` on ``sample`` bodies, relative to the size of their terms (chapter 8's measure)."""
    rows = np.random.default_rng(1).choice(pos.shape[0], min(sample, pos.shape[0]), replace=False)
    p = pos.astype(np.float64)
    worst = 0.0
    for i in rows:
        d = p[:, :3] - p[i, :3]
        r2 = np.einsum("jk,jk->j", d, d) + eps2
        w = p[:, 3] * r2**-1.5
        exact, scale = w @ d, float(np.sum(w * np.sqrt(r2 - eps2)))
        worst = max(worst, float(np.max(np.abs(acc[i] - exact))) / max(scale, 1e-30))
    return worst


def nbody_scaling_table(devices: Sequence[int] = (0, 1), *, n: int = NBODY_N, steps: int = 5) -> pd.DataFrame:
    """Data-parallel n-body on the first 1, 2, 4... of ``devices``: each GPU its ``n / g`` bodies against all
    ``n`` (:func:`~labhelpers.kernels.multi_gpu.nbody_slice`), then an NCCL all-gather of the positions.

    Columns: ``gpus``, ``n``, ``step_ms`` (median), ``compute_ms`` (the slowest GPU's kernel, CUDA events),
    ``gather_ms`` (step minus compute), ``speedup`` (one GPU's step over this one), ``efficiency``,
    ``max_error`` (the accelerations of 64 bodies against chapter 8's float64 specification, relative to the
    size of their terms). The positions are not advanced: a step here is the force computation and the
    all-gather of ``16 n`` bytes (the kick and the drift move O(n) bytes and are left out).
    """
    ids = require_devices(devices, "nbody_scaling_table", minimum=1, distinct=True)
    steps = validate.integer(steps, "steps", minimum=1)
    counts = [g for g in (1, 2, 4, 8) if g <= len(ids)]
    n = validate.divides(n, "n", 4 * max(counts), "4 x the largest GPU count")
    cp, nccl = _nccl()

    pos = knb.random_bodies(n, np.random.default_rng(0))
    eps2 = np.float32(knb.DEFAULT_EPS2)
    rows, base = [], None
    for g in counts:
        gids = ids[:g]
        share = n // g
        comms = nccl.NcclCommunicator.initAll(list(gids)) if g > 1 else None
        bufs, accs, streams, launches = [], [], [], []
        for r, d in enumerate(gids):
            with cp.cuda.Device(d), cuda.gpus[d]:
                streams.append(cp.cuda.Stream(non_blocking=True))
                bufs.append(cp.asarray(pos))
                accs.append(cp.empty((share, 3), dtype=cp.float32))
                launches.append(kmg.nbody_slice[blocks_for(share, 128), 128,
                                                cuda.external_stream(streams[-1].ptr)])

        def step() -> float:
            events = []
            for r, d in enumerate(gids):
                with cp.cuda.Device(d), cuda.gpus[d]:
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(streams[r])
                    launches[r](bufs[r], r * share, share, eps2, accs[r])
                    end.record(streams[r])
                    events.append((start, end))
            if comms is not None:
                nccl.groupStart()
                for r, comm in enumerate(comms):
                    p = bufs[r].data.ptr
                    comm.allGather(p + r * share * 16, p, share * 4, nccl.NCCL_FLOAT32, streams[r].ptr)
                nccl.groupEnd()
            for s in streams:
                s.synchronize()
            return max(cp.cuda.get_elapsed_time(a, b) for a, b in events)

        step()  # warm-up (compiles the kernel for each GPU)
        times, computes = [], []
        for _ in range(steps):
            t0 = time.perf_counter()
            computes.append(step())
            times.append((time.perf_counter() - t0) * 1e3)
        acc = np.concatenate([cp.asnumpy(a) for a in accs])
        error = _sample_error(acc, pos, float(eps2))
        step_ms = statistics.median(times)
        base = base or step_ms
        rows.append({"experiment": "nbody", "gpus": g, "n": n, "step_ms": step_ms,
                     "compute_ms": statistics.median(computes), "gather_ms": step_ms - statistics.median(computes),
                     "speedup": base / step_ms, "efficiency": base / step_ms / g, "max_error": error})
        whole = np.array_equal(cp.asnumpy(bufs[-1]), pos)
        if not whole:
            raise AssertionError(f"after the all-gather on {g} GPUs the last GPU's positions differ from the input")
        del bufs, accs, comms
    return pd.DataFrame(rows)


__all__ = ["COLLECTIVES", "COLLECTIVE_SIZES", "COLLECTOR", "JACOBI_NX", "JACOBI_NY", "NBODY_N", "REFERENCE_GPUS",
           "REFERENCE_TABLES", "SPLIT_CHUNKS", "SPLIT_STREAMS", "collectives_table", "gpu_count", "issue_table",
           "jacobi_scaling_table", "missing_sentence", "multi_gpu_table", "nbody_scaling_table", "nvidia_smi",
           "nvlink_peak_gbs", "parse_topology", "peer_copy_pairs", "peer_copy_table", "reference_name",
           "require_devices", "shipped", "split_job_table", "topology_table", "why_not_measured"]
