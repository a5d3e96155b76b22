"""Chapter "Streams and the host-device link": the analytic models (no GPU).

* **The link.** A transfer of ``b`` bytes costs ``latency + b / bandwidth``: :func:`transfer_time_ms`, fitted
  to measured times by :func:`fit_link` (weighted least squares, so small and large transfers count alike).
  :func:`pcie_bandwidth_gbs` is the theoretical maximum of a PCIe link of a given generation and width,
  per direction (what the driver reports, e.g. ``nvidia-smi --query-gpu=pcie.link.gen.current,...``).
* **The pipeline.** A job of three stages (copy in, kernel, copy out) split into ``k`` chunks issued on
  ``s`` streams. :func:`simulate_pipeline` replays the issue order on the engines of the GPU (one or two
  copy engines, one compute engine) and returns every operation's start and end: the same table a run
  with CUDA events gives, so one function draws both Gantt charts. :func:`ideal_time` is the formula
  ``max(stages) + (sum(stages) - max(stages)) / k``, and :func:`copies_hidden` the pipelining condition.
* **Several GPUs.** :func:`multi_gpu_time`: the job split across ``g`` GPUs, each running its own
  pipeline, with the host link shared or not.

The engine model (what the hardware does with the issue order):

- operations of one stream run in issue order, each after the previous one ended;
- each copy engine takes its copies in issue order (a FIFO queue): with **one** copy engine, H2D and D2H
  share the queue, and a D2H issued early (depth-first order) blocks the H2D issued after it until the
  kernel it waits for has run. With **two**, H2D and D2H have a queue each;
- kernels run one at a time (each fills the GPU), taken in issue order among those whose stream is
  ready: since Kepler, *Hyper-Q* gives the compute engine many hardware queues (32), so a kernel that
  waits does not block another stream's kernel behind it. ``compute_queues=1`` models the single compute
  queue of Fermi, where it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from .. import validate
from ..errors import ArgumentError

#: The three operations of a chunk, in stream order.
OPS: tuple[str, ...] = ("H2D", "kernel", "D2H")
#: Issue orders: chunk by chunk (H2D, kernel, D2H of chunk 0, then of chunk 1...) or stage by stage.
ORDERS: tuple[str, ...] = ("depth-first", "breadth-first")
#: How a copy engine picks its next copy (see :func:`simulate_pipeline`).
COPY_POLICIES: tuple[str, ...] = ("issue order", "same stream")
#: PCIe transfer rate per lane (GT/s) and line-code efficiency, by generation (PCI-SIG specifications;
#: generation 6 uses FLIT mode, 242 payload bytes of 256).
PCIE_GTS: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING: dict[int, float] = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


# ============================================================================================ the link


@dataclass(frozen=True)
class LinkFit:
    """``time = latency + bytes / bandwidth``, fitted to measured transfers."""

    latency_us: float
    bandwidth_gbs: float

    def time_ms(self, nbytes) -> np.ndarray | float:
        """Predicted time (ms) of a transfer of ``nbytes`` bytes (a number or an array)."""
        return transfer_time_ms(nbytes, self.latency_us, self.bandwidth_gbs)

    def half_bandwidth_bytes(self) -> float:
        """The size at which latency and bandwidth cost the same: half the bandwidth is reached there."""
        return self.latency_us * 1e-6 * self.bandwidth_gbs * 1e9


def transfer_time_ms(nbytes, latency_us: float, bandwidth_gbs: float):
    """``latency + nbytes / bandwidth`` in ms (``nbytes`` a number or an array; bandwidth in 10^9 B/s)."""
    b = validate.numbers(nbytes, "nbytes", minimum=0)
    latency_us = validate.number(latency_us, "latency_us", minimum=0)
    bandwidth_gbs = validate.number(bandwidth_gbs, "bandwidth_gbs", minimum=1e-9)
    t = latency_us * 1e-3 + b / (bandwidth_gbs * 1e6)
    return float(t) if t.ndim == 0 else t


def fit_link(nbytes: Sequence[float], ms: Sequence[float]) -> LinkFit:
    """Fit ``ms = latency + nbytes / bandwidth`` to measurements, minimising relative errors.

    Ordinary least squares would let the big transfers decide everything (their times are a million
    times larger); dividing each equation by its measured time weighs every point alike, so the
    latency comes from the small transfers and the bandwidth from the large ones.

    Raises:
        ArgumentError: fewer than two distinct sizes, a non-positive time, or NaN (a missing timing).
    """
    b = validate.numbers(nbytes, "nbytes", minimum=0)
    t = validate.numbers(ms, "ms", minimum=0)
    if b.shape != t.shape or b.ndim != 1:
        raise ArgumentError(f"nbytes and ms must be two lists of the same length, got {b.shape} and "
                                     f"{t.shape}.")
    if len(np.unique(b)) < 2:
        raise ArgumentError("fit_link needs transfers of at least two different sizes.")
    if (t <= 0).any():
        raise ArgumentError("every measured time must be positive (a time of 0 is not a measurement).")
    design = np.stack([np.ones_like(b), b], axis=1) / t[:, None]
    (latency_ms, ms_per_byte), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    latency_ms = max(float(latency_ms), 0.0)
    if ms_per_byte <= 0:
        raise ArgumentError("the times do not grow with the size: these are not transfer times.")
    return LinkFit(latency_us=latency_ms * 1e3, bandwidth_gbs=1.0 / (float(ms_per_byte) * 1e6))


def pcie_bandwidth_gbs(generation: int, width: int) -> float:
    """Theoretical PCIe bandwidth per direction in GB/s (10^9 bytes/s): lanes x rate x encoding / 8.

    Generation 3 x16: 15.75 GB/s; 4 x16: 31.5; 5 x16: 63.0. Packet headers and flow control take
    another few percent, so copies reach about 85-90% of it at best.
    """
    generation = validate.integer(generation, "generation", minimum=1, maximum=max(PCIE_GTS))
    width = validate.integer(width, "width", minimum=1, maximum=32)
    return PCIE_GTS[generation] * width * PCIE_ENCODING[generation] / 8


# ============================================================================================ the pipeline


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """Split ``range(n)`` into ``chunks`` contiguous pieces whose lengths differ by at most one.

    The first ``n % chunks`` pieces get one element more (``numpy.array_split``'s rule), so any ``n``
    works, not only multiples of ``chunks``.

    Raises:
        ArgumentError: ``n < 1``, ``chunks < 1`` or more chunks than elements.
    """
    n = validate.integer(n, "n", minimum=1)
    chunks = validate.integer(chunks, "chunks", minimum=1)
    if chunks > n:
        raise ArgumentError(f"chunks must be at most n = {n} (every chunk needs an element), got {chunks}.")
    base, extra = divmod(n, chunks)
    bounds, start = [], 0
    for c in range(chunks):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def issue_order(chunks: int, order: str = "depth-first") -> list[tuple[int, str]]:
    """The ``(chunk, operation)`` pairs in the order the host issues them.

    ``depth-first``: H2D, kernel, D2H of chunk 0, then of chunk 1, ...; ``breadth-first``: every H2D,
    then every kernel, then every D2H.
    """
    chunks = validate.integer(chunks, "chunks", minimum=1)
    validate.choice(order, "order", ORDERS)
    if order == "depth-first":
        return [(c, op) for c in range(chunks) for op in OPS]
    return [(c, op) for op in OPS for c in range(chunks)]


def _engine(op: str, copy_engines: int) -> str:
    if op == "kernel":
        return "compute"
    return "copy" if copy_engines == 1 else f"copy {op}"


def simulate_pipeline(h2d_ms: float, kernel_ms: float, d2h_ms: float, chunks: int = 1, streams: int = 1, *,
                      copy_engines: int = 2, order: str = "depth-first", overhead_ms: float = 0.0,
                      issue_ms: float = 0.0, duplex_slowdown: float = 1.0, compute_queues: int = 32,
                      copy_policy: str = "issue order",
                      fractions: Sequence[float] | None = None) -> pd.DataFrame:
    """Start and end (ms) of every operation of a chunked pipeline, as the engine model schedules them.

    Args:
        h2d_ms, kernel_ms, d2h_ms: each stage's time for the WHOLE job (e.g. measured alone).
        chunks: ``k``, the pieces the job is cut into; chunk ``c`` goes to stream ``c % streams``.
        streams: ``s``, streams used.
        copy_engines: 1 (H2D and D2H share one queue) or 2 (one each).
        order: ``"depth-first"`` or ``"breadth-first"`` (see :func:`issue_order`).
        overhead_ms: fixed cost added to every operation on its engine (a transfer's latency, a launch's).
        issue_ms: host time to issue one operation: operation ``i`` of the issue order cannot start before
            ``(i + 1) * issue_ms``. From Python this is tens of microseconds per call or more, and with many
            small chunks the host, not the GPU, becomes the bottleneck.
        duplex_slowdown: factor on every copy's time when copies can run in both directions at once (two
            copy engines and more than one stream): a link moving data both ways at once gives each direction
            less than it gets alone (1.0: no slowdown).
        copy_policy: how a copy engine picks its next copy. ``"issue order"``: strictly in the order issued
            (one queue, as on Fermi); ``"same stream"``: any copy whose stream is ready, preferring the stream
            it served last (each stream has its own hardware channel, and the engine keeps serving one while
            it has ready work: what the reference measurements of the chapter show for breadth-first issue).
        compute_queues: 1 models Fermi's single compute queue (kernels strictly in issue order);
            more (Hyper-Q) lets a ready kernel pass one that waits.
        fractions: each chunk's share of the job (default equal shares; see :func:`chunk_bounds`).

    Returns:
        One row per operation, in issue order: ``chunk``, ``stream``, ``op``, ``engine``, ``issue``
        (its position in the issue order), ``start_ms``, ``end_ms``.
    """
    h2d_ms = validate.number(h2d_ms, "h2d_ms", minimum=0)
    kernel_ms = validate.number(kernel_ms, "kernel_ms", minimum=0)
    d2h_ms = validate.number(d2h_ms, "d2h_ms", minimum=0)
    chunks = validate.integer(chunks, "chunks", minimum=1, maximum=4096)
    streams = validate.integer(streams, "streams", minimum=1, maximum=1024)
    copy_engines = validate.integer(copy_engines, "copy_engines", minimum=1, maximum=2)
    overhead_ms = validate.number(overhead_ms, "overhead_ms", minimum=0)
    issue_ms = validate.number(issue_ms, "issue_ms", minimum=0)
    duplex_slowdown = validate.number(duplex_slowdown, "duplex_slowdown", minimum=1.0)
    compute_queues = validate.integer(compute_queues, "compute_queues", minimum=1)
    validate.choice(copy_policy, "copy_policy", COPY_POLICIES)
    if fractions is None:
        share = np.full(chunks, 1.0 / chunks)
    else:
        share = validate.numbers(fractions, "fractions", minimum=0)
        if share.shape != (chunks,) or not np.isclose(share.sum(), 1.0):
            raise ArgumentError(f"fractions must hold {chunks} shares that add up to 1, got {list(share)}.")
    duplex = duplex_slowdown if copy_engines == 2 and streams > 1 else 1.0
    stage = {"H2D": h2d_ms * duplex, "kernel": kernel_ms, "D2H": d2h_ms * duplex}
    ops = []
    for position, (c, op) in enumerate(issue_order(chunks, order)):
        ops.append({"chunk": c, "stream": c % streams, "op": op, "engine": _engine(op, copy_engines),
                    "issue": position, "duration": stage[op] * share[c] + overhead_ms})
    # The operation each one waits for in its stream: the one issued before it in the same stream.
    last_in_stream: dict[int, int] = {}
    for i, o in enumerate(ops):
        o["after"] = last_in_stream.get(o["stream"])
        last_in_stream[o["stream"]] = i
    fifo = {e: [i for i, o in enumerate(ops) if o["engine"] == e] for e in {o["engine"] for o in ops}}
    in_order = {e: compute_queues == 1 if e == "compute" else copy_policy == "issue order" for e in fifo}
    free = {e: 0.0 for e in fifo}
    served: dict[str, int | None] = {e: None for e in fifo}  # the stream each engine ran last
    start = [None] * len(ops)
    end = [None] * len(ops)
    remaining = len(ops)
    while remaining:
        best = None  # (start time, issue position, op index)
        for e, queue in fifo.items():
            pending = [i for i in queue if start[i] is None]
            candidates = pending[:1] if in_order[e] else pending
            for i in candidates:
                after = ops[i]["after"]
                if after is not None and end[after] is None:
                    continue  # its stream predecessor is not scheduled yet
                t = max(free[e], end[after] if after is not None else 0.0, (ops[i]["issue"] + 1) * issue_ms)
                other = 0 if e == "compute" or ops[i]["stream"] == served[e] else 1
                key = (t, other, ops[i]["issue"], i)
                if best is None or key < best:
                    best = key
        t, _, _, i = best
        start[i], end[i] = t, t + ops[i]["duration"]
        free[ops[i]["engine"]] = end[i]
        served[ops[i]["engine"]] = ops[i]["stream"]
        remaining -= 1
    table = pd.DataFrame(ops).drop(columns=["after", "duration"])
    table["start_ms"] = start
    table["end_ms"] = end
    return table


def pipeline_time(h2d_ms: float, kernel_ms: float, d2h_ms: float, chunks: int = 1, streams: int = 1,
                  **options) -> float:
    """Total time (ms) of the pipeline: the last operation's end in :func:`simulate_pipeline`."""
    return float(simulate_pipeline(h2d_ms, kernel_ms, d2h_ms, chunks, streams, **options)["end_ms"].max())


def ideal_time(h2d_ms: float, kernel_ms: float, d2h_ms: float, chunks: int) -> float:
    """``max(stages) + (sum(stages) - max(stages)) / k``: k equal chunks, the three stages fully overlapped.

    The slowest stage runs back to back; the other two show only at the ends (filling the pipeline
    before the first chunk reaches the slowest stage, draining it after the last). It assumes two copy
    engines, enough streams (3 or more) and no per-operation overhead.
    """
    stages = validate.numbers([h2d_ms, kernel_ms, d2h_ms], "stage times", minimum=0)
    chunks = validate.integer(chunks, "chunks", minimum=1)
    return float(stages.max() + (stages.sum() - stages.max()) / chunks)


def copies_hidden(h2d_ms: float, kernel_ms: float, d2h_ms: float, copy_engines: int = 2) -> bool:
    """The pipelining condition: is the kernel the slowest stage, so overlap hides the copies?

    Per chunk (the same inequality for the totals), the kernel must take at least as long as each copy
    engine's work: ``t_kernel >= max(t_H2D, t_D2H)`` with two copy engines, ``t_kernel >= t_H2D + t_D2H``
    with one. Written with rates, ``t_kernel = flops / c`` and ``t_copy = bytes / b`` give ``flops / bytes
    >= c / b``: the condition of the lecture notes, where ``c`` must be the kernel's *achieved* rate and
    ``b`` the link's bandwidth (not device memory's).
    """
    h2d_ms = validate.number(h2d_ms, "h2d_ms", minimum=0)
    kernel_ms = validate.number(kernel_ms, "kernel_ms", minimum=0)
    d2h_ms = validate.number(d2h_ms, "d2h_ms", minimum=0)
    copy_engines = validate.integer(copy_engines, "copy_engines", minimum=1, maximum=2)
    copy = max(h2d_ms, d2h_ms) if copy_engines == 2 else h2d_ms + d2h_ms
    return kernel_ms >= copy


def bottleneck(h2d_ms: float, kernel_ms: float, d2h_ms: float, copy_engines: int = 2) -> str:
    """Which engine bounds the pipelined time: ``"kernel"``, ``"H2D"``, ``"D2H"`` or ``"copy engine"`` (one)."""
    copy_engines = validate.integer(copy_engines, "copy_engines", minimum=1, maximum=2)
    if copies_hidden(h2d_ms, kernel_ms, d2h_ms, copy_engines):
        return "kernel"
    if copy_engines == 1:
        return "copy engine"
    return "H2D" if h2d_ms >= d2h_ms else "D2H"


def lower_bound(h2d_ms: float, kernel_ms: float, d2h_ms: float, copy_engines: int = 2) -> float:
    """No schedule beats the busiest engine: max(kernel, H2D, D2H) with two copy engines, max(kernel,
    H2D + D2H) with one."""
    copy_engines = validate.integer(copy_engines, "copy_engines", minimum=1, maximum=2)
    stages = validate.numbers([h2d_ms, kernel_ms, d2h_ms], "stage times", minimum=0)
    if copy_engines == 1:
        return float(max(stages[1], stages[0] + stages[2]))
    return float(stages.max())


def speedup_table(h2d_ms: float, kernel_ms: float, d2h_ms: float, chunks: Sequence[int] = (1, 2, 4, 8, 16, 32),
                  streams: Sequence[int] = (1, 2, 4, 8), **options) -> pd.DataFrame:
    """:func:`pipeline_time` for every (chunks, streams, order) with ``streams <= chunks``, and its speedup
    over one chunk on one stream. Columns: ``chunks``, ``streams``, ``order``, ``model_ms``, ``speedup``."""
    options = dict(options)
    orders = [options.pop("order")] if "order" in options else list(ORDERS)
    serial = pipeline_time(h2d_ms, kernel_ms, d2h_ms, 1, 1, **options)
    rows = []
    for order in orders:
        for k in chunks:
            for s in streams:
                if s <= k:
                    t = pipeline_time(h2d_ms, kernel_ms, d2h_ms, k, s, order=order, **options)
                    rows.append({"chunks": k, "streams": s, "order": order, "model_ms": t, "speedup": serial / t})
    return pd.DataFrame(rows)


# ============================================================================================ several GPUs


def multi_gpu_time(h2d_ms: float, kernel_ms: float, d2h_ms: float, gpus: int = 2, *, chunks: int = 16,
                   streams: int = 4, shared_link: bool = False, **options) -> float:
    """Time (ms) of the job split evenly across ``gpus`` GPUs, each pipelining its share.

    Each GPU gets ``1/gpus`` of the data, so its kernel and copy times shrink by that factor. With
    ``shared_link=True`` the GPUs share one host link (e.g. two GPUs behind one PCIe switch whose uplink
    is the limit): their copies then run at ``1/gpus`` of the bandwidth each, and splitting the job
    speeds up only the kernel. A model, not a measurement: peer-to-peer copies and a real split need a
    machine with several GPUs.
    """
    gpus = validate.integer(gpus, "gpus", minimum=1, maximum=64)
    copy_factor = 1.0 if shared_link else 1.0 / gpus
    return pipeline_time(h2d_ms * copy_factor, kernel_ms / gpus, d2h_ms * copy_factor, chunks, streams, **options)


__all__ = ["COPY_POLICIES", "LinkFit", "OPS", "ORDERS", "PCIE_ENCODING", "PCIE_GTS", "bottleneck", "chunk_bounds", "copies_hidden",
           "fit_link", "ideal_time", "issue_order", "lower_bound", "multi_gpu_time", "pcie_bandwidth_gbs",
           "pipeline_time", "simulate_pipeline", "speedup_table", "transfer_time_ms"]


# ============================================================================================ launch cost, graphs


def launch_chain_us(launches: int, issue_us: float, kernel_us: float) -> float:
    """Time (us) of ``launches`` dependent kernels issued one by one: host and GPU overlap, the slower one sets the pace.

    Launch ``i`` is issued at ``(i + 1) * issue_us`` and starts when it has been issued and kernel ``i - 1`` has
    ended; the total is therefore about ``launches * max(issue_us, kernel_us)`` plus the other's cost once.
    """
    launches = validate.integer(launches, "launches", minimum=1)
    issue_us = validate.number(issue_us, "issue_us", minimum=0)
    kernel_us = validate.number(kernel_us, "kernel_us", minimum=0)
    end = 0.0
    for i in range(launches):
        end = max(end, (i + 1) * issue_us) + kernel_us
    return end


def graph_chain_us(launches: int, graph_launch_us: float, kernel_us: float) -> float:
    """Time (us) of the same kernels replayed as one CUDA graph: one call of the host, then the kernels back to back."""
    launches = validate.integer(launches, "launches", minimum=1)
    graph_launch_us = validate.number(graph_launch_us, "graph_launch_us", minimum=0)
    kernel_us = validate.number(kernel_us, "kernel_us", minimum=0)
    return graph_launch_us + launches * kernel_us


# ============================================================================================ hardware queues

#: Hardware work queues (connections) the driver opens to a GPU unless ``CUDA_DEVICE_MAX_CONNECTIONS`` says
#: otherwise (1 to 32; compute capability 3.5 and later).
DEFAULT_CONNECTIONS = 8
MAX_CONNECTIONS = 32


def queue_time(streams: int, kernels_per_stream: int, kernel_ms: float, connections: int = DEFAULT_CONNECTIONS, *,
               order: str = "depth-first") -> float:
    """Time (ms) of ``kernels_per_stream`` dependent one-block kernels on each of ``streams`` streams.

    Stream ``i`` feeds hardware queue ``i % connections``. A queue is first in, first out: its next kernel is
    dispatched when it reaches the head and the kernel before it *in its stream* has ended, so a kernel that
    waits for its own stream also holds back every kernel queued behind it from other streams (a *false
    dependency*). Dispatched kernels run side by side (each is one block: the GPU has room for all).
    ``order`` is how the host issued them: all of stream 0, then stream 1... (``depth-first``) or the first
    kernel of every stream, then the second... (``breadth-first``), which leaves no false dependency.
    """
    streams = validate.integer(streams, "streams", minimum=1)
    per = validate.integer(kernels_per_stream, "kernels_per_stream", minimum=1)
    kernel_ms = validate.number(kernel_ms, "kernel_ms", minimum=0)
    connections = validate.integer(connections, "connections", minimum=1, maximum=MAX_CONNECTIONS)
    order = validate.choice(order, "order", ORDERS)
    if order == "depth-first":
        issued = [(s, k) for s in range(streams) for k in range(per)]
    else:
        issued = [(s, k) for k in range(per) for s in range(streams)]
    head = [0.0] * connections  # when each queue last dispatched
    stream_end = [0.0] * streams  # when each stream's last kernel ends
    finish = 0.0
    for s, _ in issued:
        q = s % connections
        start = max(head[q], stream_end[s])
        head[q] = start
        stream_end[s] = start + kernel_ms
        finish = max(finish, stream_end[s])
    return finish


def queue_concurrency(streams: int, kernels_per_stream: int, connections: int = DEFAULT_CONNECTIONS, *,
                      order: str = "depth-first") -> float:
    """Kernels running at once on average: ``streams * kernels_per_stream * kernel time / total`` (see :func:`queue_time`)."""
    per = validate.integer(kernels_per_stream, "kernels_per_stream", minimum=1)
    return streams * per / queue_time(streams, per, 1.0, connections, order=order)


__all__ += ["DEFAULT_CONNECTIONS", "MAX_CONNECTIONS", "graph_chain_us", "launch_chain_us", "queue_concurrency",
            "queue_time"]
