"""Chapter "Streams and the host-device link": the measurements the chapter plots (GPU only).

* :func:`link_table`: what the driver says about the host link (PCIe generation and width, copy engines)
  and the link's theoretical bandwidth;
* :func:`transfer_table`: H2D and D2H from 4 B to 1 GiB, pageable and pinned (chapter 3's
  :func:`~labhelpers.experiments.memory.transfer_sweep` over a wider range), and :func:`fit_table`, the
  latency and bandwidth fitted to it (pure: it also runs on the reference table);
* :func:`async_table`: asynchrony measured with the host's clock: when a call returns against when its
  work is done (a launch, pageable and pinned copies), the legacy default stream serialising kernels of
  other streams, and an error of a kernel surfacing only at the next synchronisation;
* :func:`calibrate_iters`, :func:`stage_times`, :func:`pipeline_table`: the chunked pipeline over chunks,
  streams and issue orders, beside each stage measured alone in the same run and the model's prediction;
* :func:`gantt_table`: CUDA events around every operation of one pipelined run per stream count;
* :func:`managed_table`: unified (managed) memory touched first on the host or on the device, with and
  without prefetching, against explicit copies of pinned buffers.

Everything that times raises :class:`~labhelpers.errors.GPUOnlyError` under the simulator, which has no
real streams or events; ``bench/streams.py`` stores the tables as reference data ``ch11_*``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, gpu_lock, timing_kernels, validate
from ..errors import ArgumentError
from ..kernels import streams as ks
from ..launch import blocks_for
from ..models import streams as model
from ..timing import benchmark
from .memory import transfer_sweep

#: Transfer sizes of the link sweep: 4 B to 1 GiB in factors of 4.
TRANSFER_SIZES: tuple[int, ...] = tuple(4**k * 4 for k in range(15))
#: Pipeline configurations: chunks, streams (only streams <= chunks are run).
PIPELINE_CHUNKS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
PIPELINE_STREAMS: tuple[int, ...] = (1, 2, 3, 4, 8)
#: Stream counts of the measured Gantt charts (8 chunks each).
GANTT_STREAMS: tuple[int, ...] = (1, 2, 4, 8)
#: Elements of the pipeline's job on a GPU: 2^26 float32 = 256 MiB each way.
PIPELINE_N = 2**26
#: Managed-memory sizes (float32 elements): 64 MiB, 256 MiB, 1 GiB.
MANAGED_SIZES: tuple[int, ...] = (2**24, 2**26, 2**28)
#: Pipeline order labels used in tables.
HOST_MEMORY = ("pinned", "pageable")


_STREAMS = "measures streams and copies on a GPU (the simulator has no real streams or events)"
_MODEL = "The chapter shows reference data and the model instead."


def _cuda():
    return cuda


# ============================================================================================ the link


def _nvidia_smi_link() -> dict:
    """PCIe generation and width as ``nvidia-smi`` reports them for this GPU (empty when it is not there)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = ["pci.bus_id", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
              "pcie.link.width.max"]
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except Exception:
        return {}
    rows = [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.strip().splitlines()]
    if not rows:
        return {}
    bus = None
    try:
        bus = int(_cuda().get_current_device().PCI_BUS_ID)
    except Exception:
        pass
    for row in rows:
        try:
            if bus is not None and int(row["pci.bus_id"].split(":")[-2], 16) == bus:
                return row
        except (ValueError, IndexError):
            continue
    return rows[0]


def _int_or_none(text) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def link_table() -> pd.DataFrame:
    """One row: the GPU's host link as the driver reports it, and its theoretical bandwidth per direction.

    Columns: ``pcie_gen_current``, ``pcie_gen_max``, ``pcie_width_current``, ``pcie_width_max`` (from
    ``nvidia-smi --query-gpu=pcie.link.gen.current,...``; a link idles at a lower generation, so the
    current one is read while a large copy runs), ``link_max_gbs`` (:func:`~labhelpers.models.streams.pcie_bandwidth_gbs`
    of the maximum generation and width), ``async_engines`` (copy engines: ``asyncEngineCount``),
    ``concurrent_kernels`` and ``concurrent_managed_access`` (device attributes).
    """
    backend.require_gpu("link_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    dev = cuda.get_current_device()
    # keep the link busy while asking, so the "current" generation is the one copies run at
    host = cuda.pinned_array(2**28, dtype=np.uint8)
    host[:] = 1
    dev_buf = cuda.device_array(2**28, dtype=np.uint8)
    stream = cuda.stream()
    for _ in range(8):
        dev_buf.copy_to_device(host, stream=stream)
    smi = _nvidia_smi_link()
    stream.synchronize()
    row = {
        "pcie_gen_current": _int_or_none(smi.get("pcie.link.gen.current")),
        "pcie_gen_max": _int_or_none(smi.get("pcie.link.gen.max")),
        "pcie_width_current": _int_or_none(smi.get("pcie.link.width.current")),
        "pcie_width_max": _int_or_none(smi.get("pcie.link.width.max")),
    }
    gen = row["pcie_gen_max"] or row["pcie_gen_current"]
    width = row["pcie_width_max"] or row["pcie_width_current"]
    row["link_max_gbs"] = model.pcie_bandwidth_gbs(gen, width) if gen and width else float("nan")

    def attr(name: str):
        try:
            return int(getattr(dev, name))
        except Exception:
            return None

    row["async_engines"] = attr("ASYNC_ENGINE_COUNT")
    row["concurrent_kernels"] = attr("CONCURRENT_KERNELS")
    row["concurrent_managed_access"] = attr("CONCURRENT_MANAGED_ACCESS")
    return pd.DataFrame([row])


@gpu_lock.measurement
def transfer_table(sizes: Sequence[int] = TRANSFER_SIZES, *, repeat: int = 5) -> pd.DataFrame:
    """H2D and D2H, pageable and pinned, for every size (bytes): chapter 3's transfer sweep, 4 B to 1 GiB.

    Columns as :func:`labhelpers.experiments.memory.transfer_sweep`: ``transfer``, ``direction``,
    ``host_memory``, ``nbytes``, ``median_ms``, ``min_ms``, ``spread``, ``gbps``, ``status``.
    """
    backend.require_gpu("transfer_table", because=_STREAMS, instead=_MODEL)
    return transfer_sweep(list(sizes), repeat=repeat, progress=False)


def fit_table(transfers: pd.DataFrame, *, at_bytes: int = 2**28) -> pd.DataFrame:
    """The link model fitted to each line of a transfer table (live or reference): latency and bandwidth.

    One row per ``transfer`` (e.g. ``H2D pinned``): ``latency_us``, ``bandwidth_gbs`` (the fit),
    ``measured_gbps`` (the measurement at ``at_bytes``, 256 MiB by default) and ``half_bandwidth_bytes``
    (the size at which latency and bandwidth cost the same).
    """
    rows = []
    for name, part in transfers.groupby("transfer", sort=False):
        part = part.dropna(subset=["median_ms"])
        fit = model.fit_link(part["nbytes"].to_numpy(float), part["median_ms"].to_numpy(float))
        at = part.loc[part["nbytes"] == at_bytes, "gbps"]
        rows.append({"transfer": name, "direction": part["direction"].iloc[0],
                     "host_memory": part["host_memory"].iloc[0], "latency_us": fit.latency_us,
                     "bandwidth_gbs": fit.bandwidth_gbs,
                     "measured_gbps": float(at.iloc[0]) if len(at) else float("nan"),
                     "half_bandwidth_bytes": fit.half_bandwidth_bytes()})
    return pd.DataFrame(rows)


# ============================================================================================ asynchrony

_ERROR_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from numba import cuda

    @cuda.jit
    def poke(x, index):
        if cuda.grid(1) == 0:
            x[index] = 1.0   # no bounds check on a GPU: an index far outside is an illegal address

    x = cuda.device_array(1, dtype=np.float32)
    poke[1, 1](x, 0)
    cuda.synchronize()
    result = {}
    t0 = time.perf_counter()
    try:
        poke[1, 1](x, 1 << 40)
        result["launch"] = "returned normally"
    except Exception as exc:
        result["launch"] = "raised " + type(exc).__name__ + ": " + str(exc)[:200]
    result["launch_ms"] = (time.perf_counter() - t0) * 1e3
    time.sleep(0.05)
    result["between"] = "the host went on for 50 ms"
    t1 = time.perf_counter()
    try:
        cuda.synchronize()
        result["sync"] = "returned normally"
    except Exception as exc:
        result["sync"] = "raised " + type(exc).__name__ + ": " + str(exc)[:200]
    result["sync_ms"] = (time.perf_counter() - t1) * 1e3
    print("RESULT" + json.dumps(result))
""")


def error_surfacing() -> dict:
    """Launch a kernel that writes to an illegal address, in a separate process (its CUDA context dies).

    Returns what the launch did (it returns normally: the error does not exist yet) and what the next
    synchronising call did (it raises the kernel's error), with the host times of both.
    """
    backend.require_gpu("error_surfacing", because=_STREAMS, instead=_MODEL)
    proc = subprocess.run([sys.executable, "-c", _ERROR_SCRIPT], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"the error demonstration printed no result (exit {proc.returncode}): "
                       f"{(proc.stderr or proc.stdout)[-800:]}")


def _host_ms(fn, done) -> tuple[float, float]:
    """Host time until ``fn()`` returned, and until ``done()`` (a synchronisation) returned after it."""
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    done()
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3


def _median_pair(fn, done, repeat: int) -> tuple[float, float]:
    pairs = [_host_ms(fn, done) for _ in range(repeat)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


@gpu_lock.measurement
def async_table(n: int = PIPELINE_N, iters: int = 2000, small_iters: int = 1_000_000, *, repeat: int = 5,
                errors: bool = True) -> pd.DataFrame:
    """When calls return against when their work is done, measured with the host's clock (GPU only).

    Rows (``experiment``, ``case``, ``returns_ms``: the call returned after, ``done_ms``: the work was
    done after (the next synchronisation returned), ``note``):

    * ``launch``: ``fma_chain`` on ``n`` elements: the launch returns long before the kernel ends;
    * ``copy``: H2D and D2H of ``n`` float32 with ``stream=``, from pageable and from pinned memory:
      only the pinned copy returns at once;
    * ``default stream``: three one-block kernels of ``small_iters`` FMAs each, on three streams, then
      with the middle one on the legacy default stream (it waits for the others and they for it), then on
      the per-thread default stream (which does not serialise with other streams);
    * ``errors`` (``errors=True``): a kernel writing to an illegal address, in a separate process: the
      launch returns normally and the error is raised by the next synchronisation.
    """
    backend.require_gpu("async_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    n = validate.integer(n, "n", minimum=1)
    rows = []
    d_in = cuda.device_array(n, dtype=np.float32)
    d_out = cuda.device_array(n, dtype=np.float32)
    pinned = cuda.pinned_array(n, dtype=np.float32)
    pageable = np.ones(n, dtype=np.float32)
    pinned[:] = 1.0
    blocks = blocks_for(n, ks.THREADS)
    d_in.copy_to_device(pinned)

    def launch():
        ks.fma_chain[blocks, ks.THREADS](d_in, d_out, ks.A, ks.B, iters)

    launch()
    cuda.synchronize()
    r, d = _median_pair(launch, cuda.synchronize, repeat)
    rows.append(("launch", f"fma_chain, {n:,} elements, {iters} FMAs each", r, d,
                 "the launch returns as soon as the kernel is queued"))
    s = cuda.stream()
    for direction in ("H2D", "D2H"):
        for memory, host in (("pageable", pageable), ("pinned", pinned)):
            if direction == "H2D":
                def call(host=host):
                    d_in.copy_to_device(host, stream=s)
            else:
                def call(host=host):
                    d_in.copy_to_host(host, stream=s)
            call()
            s.synchronize()
            r, d = _median_pair(call, s.synchronize, repeat)
            rows.append(("copy", f"{direction} {memory}, {4 * n / 2**20:.0f} MiB, stream=s", r, d,
                         "returns at once: the copy engine reads the pinned buffer itself" if memory == "pinned"
                         else "staged by the driver through a pinned buffer: the call returns when the copy is "
                              "(nearly) done"))
    small_in = cuda.device_array(256, dtype=np.float32)
    small_outs = [cuda.device_array(256, dtype=np.float32) for _ in range(3)]
    small_in.copy_to_device(np.ones(256, dtype=np.float32))
    streams = [cuda.stream() for _ in range(3)]
    cases = {
        "three streams": streams,
        "middle kernel on the legacy default stream": [streams[0], cuda.legacy_default_stream(), streams[2]],
        "middle kernel on the per-thread default stream": [streams[0], cuda.per_thread_default_stream(),
                                                           streams[2]],
    }
    ks.fma_chain[1, 256](small_in, small_outs[0], ks.A, ks.B, small_iters)
    cuda.synchronize()
    one = benchmark(lambda: ks.fma_chain[1, 256](small_in, small_outs[0], ks.A, ks.B, small_iters), repeat=3)
    rows.append(("default stream", "one kernel alone (1 block)", float("nan"), one.median_ms,
                 "CUDA events: the time of one of the three kernels"))
    for case, trio in cases.items():
        def three(trio=trio):
            for k, st in enumerate(trio):
                ks.fma_chain[1, 256, st](small_in, small_outs[k], ks.A, ks.B, small_iters)

        three()
        cuda.synchronize()
        r, d = _median_pair(three, cuda.synchronize, repeat)
        rows.append(("default stream", case, r, d,
                     "the kernels serialise" if "legacy" in case else "the kernels run side by side"))
    if errors:
        try:
            result = error_surfacing()
            rows.append(("errors", "launch of a kernel that writes to an illegal address", result["launch_ms"],
                         float("nan"), f"the launch {result['launch']}"))
            rows.append(("errors", "the next cuda.synchronize()", result["sync_ms"], float("nan"),
                         f"cuda.synchronize() {result['sync']}"))
        except Exception as exc:  # keep the other rows
            rows.append(("errors", "not measured", float("nan"), float("nan"), f"{type(exc).__name__}: {exc}"[:300]))
    return pd.DataFrame(rows, columns=["experiment", "case", "returns_ms", "done_ms", "note"])


# ============================================================================================ the pipeline


def calibrate_iters(n: int, target_ms: float, *, probe_iters: int = 256) -> int:
    """FMAs per element that make ``fma_chain`` on ``n`` elements take about ``target_ms`` (GPU only)."""
    backend.require_gpu("calibrate_iters", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    n = validate.integer(n, "n", minimum=1)
    target_ms = validate.number(target_ms, "target_ms", minimum=1e-6)
    d_in = cuda.device_array(n, dtype=np.float32)
    d_out = cuda.device_array(n, dtype=np.float32)
    blocks = blocks_for(n, ks.THREADS)
    iters = probe_iters
    for _ in range(3):  # time is close to linear in iters: scale, then check once more
        t = benchmark(lambda: ks.fma_chain[blocks, ks.THREADS](d_in, d_out, ks.A, ks.B, iters), repeat=3).median_ms
        iters = max(1, int(round(iters * target_ms / t)))
    return iters


def copy_times(copies: Sequence[tuple], *, repeat: int = 5) -> list[float]:
    """Milliseconds from the start of ``copies`` to the end of the last one, each of ``repeat`` runs (GPU only).

    ``copies`` is a list of ``(direction, dst_address, src_address, nbytes)``; each copy is queued on a
    stream of its own by the driver (:func:`~labhelpers.kernels.streams.copy_async`), all of them behind one
    CUDA event, so two copies run at the same time. CUDA events time the copies alone: no Python
    bookkeeping falls between them. One untimed run first.
    """
    copies = list(copies) if isinstance(copies, (list, tuple)) else None
    if not copies or any(not isinstance(c, tuple) or len(c) != 4 for c in copies):
        raise ArgumentError("copies must be a non-empty list of (direction, dst_address, src_address, nbytes), "
                            "e.g. [('H2D', d_ptr, h_ptr, 2**20)]")
    for direction, _dst, _src, nbytes in copies:
        validate.choice(direction, "direction", ("H2D", "D2H"))
        validate.integer(nbytes, "nbytes", minimum=1)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    backend.require_gpu("copy_times", because=_STREAMS, instead=_MODEL)
    return _time_copies(copies, repeat)  # checked first: a refusal takes no measurement


@gpu_lock.measurement
def _time_copies(copies: list[tuple], repeat: int) -> list[float]:
    cuda = _cuda()
    streams = [cuda.stream() for _ in copies]
    times = []
    for _ in range(repeat + 1):
        start = cuda.event()
        start.record(stream=streams[0])
        for s in streams[1:]:
            start.wait(stream=s)
        ends = []
        for s, (direction, dst, src, nbytes) in zip(streams, copies):
            ks.copy_async(direction, dst, src, nbytes, s)
            end = cuda.event()
            end.record(stream=s)
            ends.append(end)
        for end in ends:
            end.synchronize()
        times.append(max(cuda.event_elapsed_time(start, end) for end in ends))
    return times[1:]


def _addresses(pipe: "ks.StreamPipeline") -> tuple[int, int, int, int]:
    return (int(pipe.h_in.ctypes.data), int(pipe.d_in.__cuda_array_interface__["data"][0]),
            int(pipe.d_out.__cuda_array_interface__["data"][0]), int(pipe.h_out.ctypes.data))


@gpu_lock.measurement
def stage_times(pipe: "ks.StreamPipeline", *, repeat: int = 5) -> dict:
    """Each stage of the whole job measured alone (one H2D, one kernel, one D2H of all ``n`` elements), ms,
    and ``"both copies"``: the H2D and the D2H copy started together on two streams.

    The copies are queued by the driver (:func:`copy_times`), so their times are the link's, without
    Python's cost of issuing them; the kernel is timed with CUDA events.
    """
    backend.require_gpu("stage_times", because=_STREAMS, instead=_MODEL)
    blocks = blocks_for(pipe.n, pipe.threads)
    h_in, d_in, d_out, h_out = _addresses(pipe)
    nbytes = 4 * pipe.n
    h2d = statistics.median(copy_times([("H2D", d_in, h_in, nbytes)], repeat=repeat))
    kern = benchmark(lambda: ks.fma_chain[blocks, pipe.threads](pipe.d_in, pipe.d_out, ks.A, ks.B, pipe.iters),
                     repeat=repeat)
    d2h = statistics.median(copy_times([("D2H", h_out, d_out, nbytes)], repeat=repeat))
    both = statistics.median(copy_times([("H2D", d_in, h_in, nbytes), ("D2H", h_out, d_out, nbytes)],
                                        repeat=repeat))
    return {"H2D": h2d, "kernel": kern.median_ms, "D2H": d2h, "both copies": both}


@gpu_lock.measurement
def link_rates_table(nbytes: int = 2**28, *, repeat: int = 5) -> pd.DataFrame:
    """Pinned copies of ``nbytes`` each way, and both ways at once, queued by the driver (GPU only).

    Rows ``H2D``, ``D2H`` and ``H2D + D2H at once``; columns ``transfer``, ``nbytes`` (per direction),
    ``median_ms``, ``min_ms``, ``gbps`` (bytes per direction / median time; both directions' bytes for
    the last row). The copy engine's own rate, with nothing of Python's bookkeeping inside the events: what
    the chapter compares with the link's theoretical maximum.
    """
    backend.require_gpu("link_rates_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    nbytes = validate.integer(nbytes, "nbytes", minimum=1)
    h_a, h_b = cuda.pinned_array(nbytes, dtype=np.uint8), cuda.pinned_array(nbytes, dtype=np.uint8)
    h_a[:] = 1
    d_a, d_b = cuda.device_array(nbytes, dtype=np.uint8), cuda.device_array(nbytes, dtype=np.uint8)
    ha, hb = int(h_a.ctypes.data), int(h_b.ctypes.data)
    da, db = (int(d.__cuda_array_interface__["data"][0]) for d in (d_a, d_b))
    cases = [("H2D", [("H2D", da, ha, nbytes)], nbytes), ("D2H", [("D2H", hb, db, nbytes)], nbytes),
             ("H2D + D2H at once", [("H2D", da, ha, nbytes), ("D2H", hb, db, nbytes)], 2 * nbytes)]
    rows = []
    for name, copies, moved in cases:
        times = copy_times(copies, repeat=repeat)
        median = statistics.median(times)
        rows.append({"transfer": name, "nbytes": nbytes, "median_ms": median, "min_ms": min(times),
                     "gbps": moved / (median * 1e-3) / 1e9})
    return pd.DataFrame(rows)


def _wall_ms(pipe: "ks.StreamPipeline", order: str, repeat: int) -> list[float]:
    cuda = _cuda()
    times = []
    for _ in range(repeat + 1):
        cuda.synchronize()
        t0 = time.perf_counter()
        pipe.issue(order)
        pipe.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times[1:]  # the first run warms up (streams, launch configurations)


def _check_output(pipe: "ks.StreamPipeline", expected: np.ndarray, what: str) -> None:
    if not np.array_equal(pipe.h_out, expected):
        bad = int(np.count_nonzero(pipe.h_out != expected))
        raise AssertionError(f"{what}: {bad} of {pipe.n} outputs differ from the one-stream run")


@gpu_lock.measurement
def pipeline_table(n: int = PIPELINE_N, iters: int | None = None, *, chunks: Sequence[int] = PIPELINE_CHUNKS,
                   streams: Sequence[int] = PIPELINE_STREAMS, orders: Sequence[str] = model.ORDERS,
                   repeat: int = 5, overhead_ms: float = 0.01, pageable: bool = True,
                   issue_apis: Sequence[str] = ks.ISSUE_APIS, kernel_share: float = 0.8) -> pd.DataFrame:
    """Wall time of the chunked pipeline for every (issue API, chunks, streams, order), beside its stages alone
    (GPU only).

    ``iters`` (default: calibrated so the kernel takes ``kernel_share`` times the H2D copy, 0.8: the
    copies are the bottleneck; above 1 the kernel is) sets the kernel's length. ``issue_apis``: the copies
    issued through Numba, the driver (:class:`~labhelpers.kernels.streams.StreamPipeline`), or both. Every
    configuration's output is compared with the one-stream run's (bit for bit: the same kernel computes
    every element), and that one with NumPy on a sample. Rows: ``issue``, ``chunks``, ``streams``,
    ``order``, ``host_memory``, ``wall_ms`` (host clock from the first call to the last stream's
    synchronisation, median of ``repeat``), ``min_ms``; the model's ``model_ms`` (stages measured alone,
    two copy engines unless the device reports one, ``overhead_ms`` per operation); and, repeated on every
    row, ``h2d_ms``, ``kernel_ms``, ``d2h_ms`` (alone), ``both_ms`` (the two copies at once), ``iters``,
    ``n``, ``copy_engines``. With ``pageable=True`` the best pinned configuration is run once more with
    pageable host buffers.
    """
    backend.require_gpu("pipeline_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    n = validate.integer(n, "n", minimum=1)
    kernel_share = validate.number(kernel_share, "kernel_share", minimum=1e-3)
    issue_apis = [validate.choice(api, "issue_apis", ks.ISSUE_APIS) for api in issue_apis]
    if not issue_apis:
        raise ArgumentError("issue_apis is empty: name at least one of " + ", ".join(ks.ISSUE_APIS))
    pipes = {api: ks.StreamPipeline(n, 1, 1, iters if iters is not None else 1, issue_api=api) for api in issue_apis}
    pipe = pipes[issue_apis[0]]
    x = np.random.default_rng(0).random(n, dtype=np.float32) * 4
    for p in pipes.values():
        p.h_in[:] = x
    if iters is None:
        alone = stage_times(pipe)
        pipe.iters = calibrate_iters(n, kernel_share * alone["H2D"])
    for p in pipes.values():
        p.iters = pipe.iters
    stages = stage_times(pipe)
    engines = int(getattr(cuda.get_current_device(), "ASYNC_ENGINE_COUNT", 2) or 2)
    engines = min(max(engines, 1), 2)
    pipe.issue()
    pipe.synchronize()
    expected = np.array(pipe.h_out)
    sample = np.random.default_rng(1).choice(n, size=min(n, 65536), replace=False)
    got, ref = expected[sample], ks.fma_chain_reference(x[sample], pipe.iters)
    if not np.allclose(got, ref, rtol=ks.tolerance(pipe.iters), atol=1e-6):
        raise AssertionError("the pipeline's one-stream result differs from NumPy's: not timing a wrong kernel")
    rows = []

    def run(k: int, s: int, order: str, memory: str, p) -> None:
        p.configure(k, s)
        p.h_out[:] = np.nan
        times = _wall_ms(p, order, repeat)
        _check_output(p, expected, f"{k} chunks on {s} streams, {order}, {memory}, {p.issue_api} issue")
        rows.append({"issue": p.issue_api, "chunks": k, "streams": s, "order": order, "host_memory": memory,
                     "wall_ms": statistics.median(times), "min_ms": min(times),
                     "model_ms": model.pipeline_time(stages["H2D"], stages["kernel"], stages["D2H"], k, s,
                                                     order=order, copy_engines=engines, overhead_ms=overhead_ms)})

    for api in issue_apis:
        for order in orders:
            for k in chunks:
                for s in streams:
                    if s <= k and k <= n:
                        run(k, s, order, "pinned", pipes[api])
    table = pd.DataFrame(rows)
    if pageable and len(table):
        best = table.loc[table["wall_ms"].idxmin()]
        slow = ks.StreamPipeline(n, 1, 1, pipe.iters, pinned=False, issue_api=str(best["issue"]))
        slow.h_in[:] = x
        run(int(best["chunks"]), int(best["streams"]), str(best["order"]), "pageable", slow)
        del slow
    table = pd.DataFrame(rows)
    for key, value in (("h2d_ms", stages["H2D"]), ("kernel_ms", stages["kernel"]), ("d2h_ms", stages["D2H"]),
                       ("both_ms", stages["both copies"]), ("iters", pipe.iters), ("n", n),
                       ("copy_engines", engines), ("overhead_ms", overhead_ms)):
        table[key] = value
    return table


def numba_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The pinned rows of a pipeline table whose copies Numba issued (the chapter's code as written)."""
    pinned = table[table["host_memory"] == "pinned"]
    return pinned[pinned["issue"] == "numba"] if "issue" in pinned else pinned


def pipeline_summary(table: pd.DataFrame) -> dict:
    """What the bench and the chapter quote from a pipeline table (live or reference).

    ``serial_ms`` (1 chunk, 1 stream), the best pinned configuration (``best_chunks``, ``best_streams``,
    ``best_order``, ``best_ms``), ``stage_max_ms`` (the slowest stage alone), ``ratio`` = best / stage max
    (the target is at most 1.15), ``speedup`` = serial / best, and the model's ``model_speedup`` for the
    same configuration (its serial time over its time for the best configuration).
    """
    pinned = table[table["host_memory"] == "pinned"]
    best = pinned.loc[pinned["wall_ms"].idxmin()]
    same_api = pinned[pinned["issue"] == best["issue"]] if "issue" in pinned else pinned
    serial = same_api[(same_api["chunks"] == 1) & (same_api["streams"] == 1)].iloc[0]
    stage_max = float(max(best["h2d_ms"], best["kernel_ms"], best["d2h_ms"]))
    both = float(best["both_ms"]) if "both_ms" in best else float("nan")
    return {"serial_ms": float(serial["wall_ms"]), "best_issue": str(best.get("issue", "numba")),
            "best_chunks": int(best["chunks"]), "best_streams": int(best["streams"]),
            "best_order": str(best["order"]), "best_ms": float(best["wall_ms"]),
            "stage_max_ms": stage_max, "ratio": float(best["wall_ms"]) / stage_max,
            "both_ms": both, "both_ratio": float(best["wall_ms"]) / both,
            "speedup": float(serial["wall_ms"]) / float(best["wall_ms"]),
            "model_speedup": float(serial["model_ms"]) / float(best["model_ms"]),
            "model_best_ms": float(best["model_ms"])}


def timeline(recorded: list[tuple], origin) -> pd.DataFrame:
    """The start and end (ms after the event ``origin``) of every operation recorded by
    :meth:`labhelpers.kernels.streams.StreamPipeline.issue` with ``events=True``, read once the streams are done.

    Returns a DataFrame with the columns of :func:`labhelpers.models.streams.simulate_pipeline`:
    ``chunk``, ``stream``, ``op``, ``issue``, ``start_ms``, ``end_ms``.
    """
    rows = []
    for position, (chunk, stream, op, start, end) in enumerate(recorded):
        rows.append({"chunk": chunk, "stream": stream, "op": op, "issue": position,
                     "start_ms": cuda.event_elapsed_time(origin, start),
                     "end_ms": cuda.event_elapsed_time(origin, end)})
    return pd.DataFrame(rows)


@gpu_lock.measurement
def gantt_table(n: int = PIPELINE_N, iters: int | None = None, *, chunks: int = 8,
                streams: Sequence[int] = GANTT_STREAMS, orders: Sequence[str] = ("depth-first",)) -> pd.DataFrame:
    """Start and end of every operation (CUDA events on its stream) of one pipelined run per configuration.

    Times are ms after an event recorded on the legacy default stream just before the first operation.
    Rows: ``streams_used``, ``order``, ``chunk``, ``stream``, ``op``, ``issue``, ``start_ms``, ``end_ms``,
    and the stages measured alone (``h2d_ms``, ``kernel_ms``, ``d2h_ms``) and ``iters``, ``n``.
    """
    backend.require_gpu("gantt_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    pipe = ks.StreamPipeline(n, chunks, 1, iters if iters is not None else 1)
    pipe.h_in[:] = np.random.default_rng(0).random(n, dtype=np.float32)
    if iters is None:
        pipe.iters = calibrate_iters(n, 0.8 * stage_times(pipe)["H2D"])
    stages = stage_times(pipe)
    parts = []
    for order in orders:
        for s in streams:
            pipe.configure(chunks, s)
            for warm in (True, False):
                cuda.synchronize()
                origin = cuda.event()
                origin.record()
                recorded = pipe.issue(order, events=True)
                pipe.synchronize()
                if not warm:
                    t = timeline(recorded, origin)
                    t.insert(0, "order", order)
                    t.insert(0, "streams_used", s)
                    parts.append(t)
    table = pd.concat(parts, ignore_index=True)
    table["h2d_ms"], table["kernel_ms"], table["d2h_ms"] = stages["H2D"], stages["kernel"], stages["D2H"]
    table["iters"], table["n"] = pipe.iters, n
    return table


# ============================================================================================ unified memory


def _prefetch(array, device: int, nbytes: int) -> str:
    """Prefetch managed memory to ``device`` (-1: the host) on the legacy default stream; returns the API used."""
    ptr = int(array.__cuda_array_interface__["data"][0])
    errors = []
    try:
        import cupy  # optional: the GPU extra

        cupy.cuda.runtime.memPrefetchAsync(ptr, nbytes, device, 0)
        return "cupy.cuda.runtime.memPrefetchAsync"
    except Exception as exc:
        errors.append(f"cupy: {type(exc).__name__}: {exc}")
    try:
        from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

        loc = cu.CUmemLocation()
        loc.type = (cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST if device < 0
                    else cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
        loc.id = max(device, 0)
        (err,) = cu.cuMemPrefetchAsync(ptr, nbytes, loc, 0, 0)
        if int(err) != 0:
            raise RuntimeError(f"cuMemPrefetchAsync returned {err}")
        return "cuda.bindings.driver.cuMemPrefetchAsync"
    except Exception as exc:
        errors.append(f"cuda.bindings: {type(exc).__name__}: {exc}")
    raise RuntimeError("no prefetch API worked: " + "; ".join(errors))


@gpu_lock.measurement
def managed_table(sizes: Sequence[int] = MANAGED_SIZES, *, repeat: int = 3, iters: int = 1) -> pd.DataFrame:
    """Unified memory against explicit copies, for each size (float32 elements). GPU only.

    Cases (each on fresh memory, so first touches are first): ``explicit copies`` (pinned host buffer,
    H2D, kernel, D2H), ``managed, host first touch`` (written by NumPy, then the kernel: pages migrate on
    the GPU's page faults), ``managed, host first touch, prefetch`` (prefetched to the GPU first, and back
    to the host after), ``managed, device first touch`` (created by a ``fill`` kernel on the GPU). Each row:
    ``to_gpu_ms`` (copy or prefetch; the fill kernel for the device touch), ``kernel_ms`` (``fma_chain``
    in place: page faults included where there are any), ``to_host_ms`` (the result into a host buffer:
    D2H copy, or prefetch and/or NumPy reading managed memory), ``total_ms``; medians of ``repeat``.
    Sizes larger than a quarter of the GPU's free memory are skipped (``status`` says so).
    """
    backend.require_gpu("managed_table", because=_STREAMS, instead=_MODEL)
    cuda = _cuda()
    dev_id = cuda.get_current_device().id
    rows = []
    for n in sizes:
        n = validate.integer(n, "size", minimum=1)
        nbytes = 4 * n
        free, _total = cuda.current_context().get_memory_info()
        if 4 * nbytes > free:
            rows.append({"n": n, "mib": nbytes / 2**20, "case": "all", "status": "skipped: too large for the free "
                         f"memory ({free / 2**30:.1f} GiB)"})
            continue
        blocks = blocks_for(n, ks.THREADS)
        x = np.random.default_rng(n).random(n, dtype=np.float32)
        expected = ks.fma_chain_reference(x[:4096], iters)
        host_out = np.empty(n, dtype=np.float32)
        np.copyto(host_out, x)  # its pages exist before timing

        def kernel_on(a):
            ks.fma_chain[blocks, ks.THREADS](a, a, ks.A, ks.B, iters)

        def events_ms(fn) -> float:
            start, end = cuda.event(), cuda.event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return cuda.event_elapsed_time(start, end)

        def host_ms(fn) -> float:
            cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            cuda.synchronize()
            return (time.perf_counter() - t0) * 1e3

        def explicit():
            h = cuda.pinned_array(n, dtype=np.float32)
            h[:] = x
            d = cuda.device_array(n, dtype=np.float32)
            cuda.synchronize()
            a = events_ms(lambda: d.copy_to_device(h))
            b = events_ms(lambda: kernel_on(d))
            c = events_ms(lambda: d.copy_to_host(h))
            ok = np.allclose(h[:4096], expected, rtol=ks.tolerance(iters))
            return a, b, c, ok

        def managed(first_touch: str, prefetch: bool):
            m = cuda.managed_array(n, dtype=np.float32)
            if first_touch == "host":
                m[:] = x  # NumPy writes it: the pages are created in host memory
                cuda.synchronize()
                a = host_ms(lambda: _prefetch(m, dev_id, nbytes)) if prefetch else 0.0
            else:
                a = events_ms(lambda: ks.fill[blocks, ks.THREADS](m, np.float32(0.5)))
            b = events_ms(lambda: kernel_on(m))
            if prefetch:
                c = host_ms(lambda: (_prefetch(m, -1, nbytes), cuda.synchronize(), np.copyto(host_out, m)))
            else:
                c = host_ms(lambda: np.copyto(host_out, m))
            want = expected if first_touch == "host" else ks.fma_chain_reference(np.full(4096, 0.5, np.float32), iters)
            ok = np.allclose(host_out[:4096], want, rtol=ks.tolerance(iters))
            del m
            return a, b, c, ok

        cases = {
            "explicit copies (pinned)": explicit,
            "managed, host first touch": lambda: managed("host", False),
            "managed, host first touch, prefetch": lambda: managed("host", True),
            "managed, device first touch": lambda: managed("device", False),
        }
        for case, fn in cases.items():
            try:
                results = [fn() for _ in range(repeat)]
                if not all(r[3] for r in results):
                    raise AssertionError("wrong result")
                a, b, c = (statistics.median(r[i] for r in results) for i in range(3))
                rows.append({"n": n, "mib": nbytes / 2**20, "case": case, "to_gpu_ms": a, "kernel_ms": b,
                             "to_host_ms": c, "total_ms": a + b + c, "status": "ok"})
            except Exception as exc:
                rows.append({"n": n, "mib": nbytes / 2**20, "case": case,
                             "status": f"failed: {type(exc).__name__}: {exc}"[:300]})
    table = pd.DataFrame(rows)
    for column in ("to_gpu_ms", "kernel_ms", "to_host_ms", "total_ms"):
        if column not in table:
            table[column] = float("nan")
    return table[["n", "mib", "case", "to_gpu_ms", "kernel_ms", "to_host_ms", "total_ms", "status"]]


__all__ = ["GANTT_STREAMS", "MANAGED_SIZES", "PIPELINE_CHUNKS", "PIPELINE_N", "PIPELINE_STREAMS", "TRANSFER_SIZES",
           "async_table", "calibrate_iters", "copy_times", "error_surfacing", "fit_table", "gantt_table",
           "link_rates_table", "link_table", "managed_table", "pipeline_summary", "pipeline_table", "stage_times",
           "transfer_table"]


# ============================================================================================ reading the tables


def issue_cost_ms(table: pd.DataFrame) -> float:
    """Host time per issued operation, read off the pipeline rows with the most chunks (issuing is the limit there).

    ``wall_ms / (3 * chunks)``, the median over the pinned rows of the largest chunk count: an upper bound
    of what one Numba call (copy or launch) costs the host.
    """
    pinned = numba_rows(table)
    most = pinned[pinned["chunks"] == pinned["chunks"].max()]
    return float((most["wall_ms"] / (3 * most["chunks"])).median())


def copy_slowdown(gantt: pd.DataFrame) -> float:
    """How much longer the H2D copies take while D2H copies run too, read off a Gantt table.

    For each measured timeline with two or more streams: the span from the first H2D's start to the last
    H2D's end over the H2D time alone; the smallest of them (the timeline with the least waiting in it).
    """
    ratios = []
    for _, part in gantt[gantt["streams_used"] >= 2].groupby(["streams_used", "order"]):
        h2d = part[part["op"] == "H2D"]
        ratios.append(float((h2d["end_ms"].max() - h2d["start_ms"].min()) / h2d["h2d_ms"].iloc[0]))
    return min(ratios) if ratios else float("nan")


def model_options(table: pd.DataFrame, gantt: pd.DataFrame) -> dict:
    """The model's costs fitted to measured tables: ``issue_ms``, ``duplex_slowdown``, ``copy_policy``."""
    return {"issue_ms": issue_cost_ms(table), "duplex_slowdown": max(1.0, copy_slowdown(gantt)),
            "copy_policy": "same stream"}


def model_comparison(table: pd.DataFrame, **options) -> pd.DataFrame:
    """The pinned rows issued through Numba of a pipeline table with the plain model (``plain_ms``: no costs,
    copies in issue order) and the model with ``options`` (``fitted_ms``, e.g. :func:`model_options`), and
    their errors."""
    pinned = numba_rows(table).copy()
    first = pinned.iloc[0]
    h, k, d = float(first["h2d_ms"]), float(first["kernel_ms"]), float(first["d2h_ms"])
    engines = int(first["copy_engines"]) if "copy_engines" in pinned else 2
    plain, fitted = [], []
    for r in pinned.itertuples():
        plain.append(model.pipeline_time(h, k, d, r.chunks, r.streams, order=r.order, copy_engines=engines))
        fitted.append(model.pipeline_time(h, k, d, r.chunks, r.streams, order=r.order, copy_engines=engines,
                                          **options))
    pinned["plain_ms"], pinned["fitted_ms"] = plain, fitted
    pinned["fitted_error"] = pinned["fitted_ms"] / pinned["wall_ms"] - 1
    return pinned[["chunks", "streams", "order", "wall_ms", "plain_ms", "fitted_ms", "fitted_error"]]


__all__ += ["copy_slowdown", "issue_cost_ms", "model_comparison", "model_options", "numba_rows"]


# ============================================================================================ CUDA Graphs

#: Chain lengths of :func:`graph_table` (a few hundred at most: the driver's queue of pending launches is finite).
GRAPH_LAUNCHES: tuple[int, ...] = (10, 30, 100, 300)
#: Elements of the chain's array: 4096 float32, 32 blocks of 128 threads (a kernel of a few microseconds).
GRAPH_N = 2**12
GRAPH_COLUMNS = ("launches", "n", "mode", "issue_us_per_op", "gpu_us_per_op", "wall_us_per_op", "capture_ms",
                 "status")
GRAPH_MODES = ("op by op", "graph")


def _host_wall_us(fn, repeat: int) -> float:
    """Median host time (us) of ``fn()``, which must wait for its own work, after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _check_chain(chain: "ks.LaunchChain", x: np.ndarray, times: int, what: str) -> None:
    got = chain.result()
    want = chain.expected(x, times)
    if not np.allclose(got, want, rtol=ks.tolerance(times * chain.launches), atol=1e-6):
        raise RuntimeError(f"{what}: the chain's result differs from the closed form (max error "
                           f"{np.max(np.abs(got - want)):.3g}): the measurement is void")


@gpu_lock.measurement
def graph_table(launches: Sequence[int] = GRAPH_LAUNCHES, n: int = GRAPH_N, *, repeat: int = 10) -> pd.DataFrame:
    """Many small kernels issued one by one against the same kernels replayed as one CUDA graph. GPU only, CuPy.

    For each chain length: the host's issue cost per kernel (``Timing.issue_ms`` of :func:`labhelpers.benchmark`
    divided by the launches), the GPU time per kernel with the stream held (the kernels back to back), and the
    wall time per kernel from the first call to the stream's synchronisation (host clock, median of
    ``repeat``), which is what a program waits. ``capture_ms`` is the one-off cost of capturing and
    instantiating the graph. Both paths are checked against the closed form before they are timed.
    """
    backend.require_gpu("graph_table", because=_STREAMS, instead=_MODEL, needs_cupy=True)
    import cupy  # optional: the GPU extra (checked above)

    n = validate.integer(n, "n", minimum=1)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    x = np.linspace(0.0, 2.0, n, dtype=np.float32)
    cs = cupy.cuda.Stream(non_blocking=True)
    ns = cuda.external_stream(cs.ptr)
    rows = []
    for count in launches:
        chain = ks.LaunchChain(n, count)
        chain.load(x)
        chain.issue(ns)
        ns.synchronize()
        _check_chain(chain, x, 1, f"{count} launches op by op")
        t = benchmark(lambda: chain.issue(ns), stream=ns, repeat=repeat, label="op by op")
        wall = _host_wall_us(lambda: (chain.issue(ns), ns.synchronize()), repeat)
        rows.append({"launches": count, "n": n, "mode": "op by op", "issue_us_per_op": t.issue_ms * 1e3 / count,
                     "gpu_us_per_op": t.median_ms * 1e3 / count, "wall_us_per_op": wall / count,
                     "capture_ms": float("nan"), "status": "ok"})
        t0 = time.perf_counter()
        graph = chain.capture(cs)
        capture_ms = (time.perf_counter() - t0) * 1e3
        chain.load(x)
        graph.launch(cs)
        cs.synchronize()
        _check_chain(chain, x, 1, f"{count} launches as a graph")
        tg = benchmark(lambda: graph.launch(cs), stream=ns, repeat=repeat, label="graph")
        wall_g = _host_wall_us(lambda: (graph.launch(cs), cs.synchronize()), repeat)
        rows.append({"launches": count, "n": n, "mode": "graph", "issue_us_per_op": tg.issue_ms * 1e3 / count,
                     "gpu_us_per_op": tg.median_ms * 1e3 / count, "wall_us_per_op": wall_g / count,
                     "capture_ms": capture_ms, "status": "ok"})
    return pd.DataFrame(rows, columns=list(GRAPH_COLUMNS))


def graph_summary(table: pd.DataFrame) -> dict:
    """At the longest chain: wall time per kernel op by op and as a graph, their ratio, and the host's issue costs."""
    longest = table[table["launches"] == table["launches"].max()].set_index("mode")
    one, graph = longest.loc["op by op"], longest.loc["graph"]
    return {"launches": int(table["launches"].max()), "wall_us": float(one["wall_us_per_op"]),
            "graph_wall_us": float(graph["wall_us_per_op"]), "speedup": float(one["wall_us_per_op"] /
                                                                              graph["wall_us_per_op"]),
            "issue_us": float(one["issue_us_per_op"]), "graph_issue_us": float(graph["issue_us_per_op"]),
            "gpu_us": float(one["gpu_us_per_op"]), "graph_gpu_us": float(graph["gpu_us_per_op"])}


# ============================================================================================ events and queues

EVENT_COLUMNS = ("case", "value", "unit")


@gpu_lock.measurement
def events_table(trials: int = 20, n: int = 2**22, iters: int = 2000, sleep_ms: float = 20.0) -> pd.DataFrame:
    """Events between streams, measured: a query that does not block, a wait that the host does not wait for,
    and what the consumer of :func:`~labhelpers.kernels.streams.run_producer_consumer` reads without it. GPU only.
    """
    backend.require_gpu("events_table", because=_STREAMS, instead=_MODEL)


    s1, s2 = cuda.stream(), cuda.stream()
    steps = timing_kernels.sleep_steps(sleep_ms)
    timing_kernels.sleeper[1, 1, s1](1)
    cuda.synchronize()
    busy = cuda.event()
    timing_kernels.sleeper[1, 1, s1](steps)
    busy.record(stream=s1)
    t0 = time.perf_counter()
    early = busy.query()
    query_us = (time.perf_counter() - t0) * 1e6
    t1 = time.perf_counter()
    busy.wait(stream=s2)
    wait_us = (time.perf_counter() - t1) * 1e6
    after = cuda.event()
    after.record(stream=s2)
    t2 = time.perf_counter()
    after.synchronize()
    blocked_ms = (time.perf_counter() - t2) * 1e3
    late = busy.query()
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    want = ks.fma_chain_closed_form(x, iters)
    wrong = {True: 0, False: 0}
    for wait in (True, False):
        for _ in range(trials):
            got = ks.run_producer_consumer(x, iters, wait=wait)
            wrong[wait] += int(not np.allclose(got, want, rtol=ks.tolerance(iters), atol=1e-6))
    rows = [("event.query() while the GPU sleeps", float(early), "True=1"),
            ("event.query() call", query_us, "us"),
            ("event.wait(stream=s2) call", wait_us, "us"),
            ("s2's next event waited for s1's sleep", blocked_ms, "ms"),
            (f"sleep on s1 ({sleep_ms:g} ms asked)", sleep_ms, "ms"),
            ("event.query() after it", float(late), "True=1"),
            (f"consumer with event.wait: wrong runs of {trials}", wrong[True], "runs"),
            (f"consumer without event.wait: wrong runs of {trials}", wrong[False], "runs")]
    return pd.DataFrame(rows, columns=list(EVENT_COLUMNS))


#: Stream counts and connection counts of :func:`queue_table`.
QUEUE_STREAMS: tuple[int, ...] = (1, 2, 4, 8, 9, 12, 16, 24, 32)
QUEUE_CONNECTIONS: tuple[int, ...] = (1, 8, 32)
QUEUE_COLUMNS = ("connections", "streams", "kernels_per_stream", "order", "kernel_ms", "wall_ms", "concurrency",
                 "model_concurrency", "status")

_QUEUE_SCRIPT = textwrap.dedent("""
    import json, sys
    from labhelpers.experiments import streams
    rows = streams.queue_rows_here(json.loads(sys.argv[1]))
    print("RESULT" + json.dumps(rows))
""")


def queue_rows_here(spec: dict) -> list[dict]:
    """The rows of :func:`queue_table` for this process's ``CUDA_DEVICE_MAX_CONNECTIONS`` (run in a fresh process).

    ``spec``: ``streams`` (list), ``kernels_per_stream``, ``kernel_ms``, ``orders`` (list), ``repeat``. Every
    kernel is one thread of :func:`~labhelpers.timing_kernels.sleeper`; the wall time runs from the first
    launch to the last stream's synchronisation (host clock, median of ``repeat``).
    """
    backend.require_gpu("queue_rows_here", because=_STREAMS, instead=_MODEL)


    connections = int(os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", model.DEFAULT_CONNECTIONS))
    per = int(spec["kernels_per_stream"])
    steps = timing_kernels.sleep_steps(float(spec["kernel_ms"]))
    all_streams = [cuda.stream() for _ in range(max(spec["streams"]))]
    timing_kernels.sleeper[1, 1](1)
    cuda.synchronize()

    def one(streams: list, issued: list[tuple[int, int]]) -> float:
        t0 = time.perf_counter()
        for s, _ in issued:
            timing_kernels.sleeper[1, 1, streams[s]](steps)
        for s in streams:
            s.synchronize()
        return (time.perf_counter() - t0) * 1e3

    alone = statistics.median(one(all_streams[:1], [(0, 0)]) for _ in range(int(spec["repeat"])))
    rows = []
    for order in spec["orders"]:
        for count in spec["streams"]:
            if order == "depth-first":
                issued = [(s, k) for s in range(count) for k in range(per)]
            else:
                issued = [(s, k) for k in range(per) for s in range(count)]
            wall = statistics.median(one(all_streams[:count], issued) for _ in range(int(spec["repeat"])))
            rows.append({"connections": connections, "streams": count, "kernels_per_stream": per, "order": order,
                         "kernel_ms": alone, "wall_ms": wall, "concurrency": count * per * alone / wall,
                         "model_concurrency": model.queue_concurrency(count, per, connections, order=order),
                         "status": "ok"})
    return rows


@gpu_lock.measurement
def queue_table(connections: Sequence[int] = QUEUE_CONNECTIONS, streams: Sequence[int] = QUEUE_STREAMS, *,
                kernels_per_stream: int = 2, kernel_ms: float = 10.0, repeat: int = 3,
                timeout: int = 300) -> pd.DataFrame:
    """Kernels running at once against the number of streams, for each ``CUDA_DEVICE_MAX_CONNECTIONS``. GPU only.

    The variable is read when the CUDA context is created, so each connection count runs in a fresh Python
    process (:func:`queue_rows_here`). With the default count (8) there are only 8 hardware queues: streams 0
    and 8 share one, and a kernel waiting for its own stream holds back the other stream's kernel behind it.
    Depth-first issue shows it; breadth-first (for the default count) does not.
    """
    backend.require_gpu("queue_table", because=_STREAMS, instead=_MODEL)
    for c in connections:
        validate.integer(c, "connections", minimum=1, maximum=model.MAX_CONNECTIONS)
    rows: list[dict] = []
    for c in connections:
        orders = ["depth-first", "breadth-first"] if c == model.DEFAULT_CONNECTIONS else ["depth-first"]
        spec = {"streams": [int(s) for s in streams], "kernels_per_stream": int(kernels_per_stream),
                "kernel_ms": float(kernel_ms), "orders": orders, "repeat": int(repeat)}
        env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS=str(c))
        proc = subprocess.run([sys.executable, "-c", _QUEUE_SCRIPT, json.dumps(spec)], capture_output=True,
                              text=True, timeout=timeout, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
        if not lines:
            raise RuntimeError(f"the queue measurement with CUDA_DEVICE_MAX_CONNECTIONS={c} printed no result (exit "
                               f"{proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
        rows.extend(json.loads(lines[-1][len("RESULT"):]))
    return pd.DataFrame(rows, columns=list(QUEUE_COLUMNS))


def queue_model_table(connections: Sequence[int] = QUEUE_CONNECTIONS, streams: Sequence[int] = QUEUE_STREAMS, *,
                      kernels_per_stream: int = 2) -> pd.DataFrame:
    """What :func:`queue_table` measures, from the model alone (the simulator's figure): same columns, no times."""
    rows = []
    for c in connections:
        orders = ["depth-first", "breadth-first"] if c == model.DEFAULT_CONNECTIONS else ["depth-first"]
        for order in orders:
            for s in streams:
                m = model.queue_concurrency(s, kernels_per_stream, c, order=order)
                rows.append({"connections": c, "streams": s, "kernels_per_stream": kernels_per_stream,
                             "order": order, "kernel_ms": float("nan"), "wall_ms": float("nan"),
                             "concurrency": float("nan"), "model_concurrency": m, "status": "model"})
    return pd.DataFrame(rows, columns=list(QUEUE_COLUMNS))


__all__ += ["EVENT_COLUMNS", "GRAPH_COLUMNS", "GRAPH_LAUNCHES", "GRAPH_MODES", "GRAPH_N", "QUEUE_COLUMNS",
            "QUEUE_CONNECTIONS", "QUEUE_STREAMS", "events_table", "graph_summary", "graph_table", "queue_model_table",
            "queue_rows_here", "queue_table"]
