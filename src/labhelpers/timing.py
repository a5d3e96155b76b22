"""Timing GPU work honestly: the GPU's own time, warm-up excluded, repeated, summarised.

``benchmark(fn, nbytes=..., flops=...)`` calls ``fn`` a few times to warm up (the first call of a Numba
kernel compiles it), then times ``repeat`` repetitions of ``number`` calls and returns a :class:`Timing` with
the median, minimum and spread, plus GB/s and GFLOP/s computed from the bytes and flops *you* state.

Which clock (``Timing.clock``):

* ``"gpu-held"`` (the default, ``clock="gpu"``): GPU time only. Before each repetition a one-thread kernel that
  sleeps (:func:`labhelpers.timing_kernels.sleeper`) holds the stream; the start event, the ``number`` calls
  and the end event queue behind it while Python issues them, so the two events bracket the GPU's work and not
  Python's launch cost (NVIDIA's nvbench measures the same way). The host's cost of issuing one call is
  measured in the same repetitions and reported beside it (``Timing.issue_ms``), never mixed in. If a call
  waits for the GPU (a copy to pageable host memory, ``copy_to_host``, a result whose size the host needs),
  the hold cannot hold: that is detected, tried once more with a longer sleep, and then the work is timed
  with the Python clock below and the result says so (``Timing.synchronises``, ``Timing.note``).
* ``"python-launch"`` (``clock="python"``): CUDA events recorded around calls made from Python, so the
  interval holds the launch cost as well as the work. Right for the lessons where the launch cost is the point
  (chapter 1's SAXPY curve, chapter 11's issue costs and pipelines) and for work that synchronises anyway.
* ``"host-clock"``: :func:`wall_time`, ``time.perf_counter`` around each call, for CPU work.

The hold holds the stream the work is issued to (Numba's default stream unless ``stream=`` says otherwise).
Numba kernels and CuPy calls go to the legacy default stream unless told otherwise, and that stream also
orders work on every *blocking* stream (``cuda.stream()``, ``cupy.cuda.Stream()``): it waits behind the
sleeper too, and the end event waits for it. Work on a non-blocking stream or a per-thread default stream is
not held: time it with ``clock="python"`` or pass its stream.

The decisions (how long to sleep, whether the hold held, when to retry or fall back) are plain Python in
:func:`time_repetitions`, which drives the GPU through a small :class:`StreamOps` object; the tests drive it
with a fake GPU and a fake clock.

Under the simulator there is no GPU to time: ``fn`` still runs once (so errors surface), but the returned
:class:`Timing` holds no numbers, prints as "simulator: no GPU timing", and asking it for a number raises
:class:`~labhelpers.errors.GPUOnlyError`. Nothing fakes a GPU number.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from numba import cuda

from . import backend, gpu_lock, timing_kernels, validate
from .errors import GPUOnlyError
from .launch import blocks_for

#: CUDA events with the stream held by a sleeping kernel: GPU time only (``benchmark(..., clock="gpu")``).
CLOCK_HELD = "gpu-held"
#: CUDA events recorded around calls made from Python: Python's launch cost included (``clock="python"``).
CLOCK_PYTHON = "python-launch"
#: ``time.perf_counter`` around each call (:func:`wall_time`): the host's clock.
CLOCK_HOST = "host-clock"
#: What reference tables collected before the stream was held call events around Python calls.
CLOCK_LEGACY_EVENTS = "cuda-events"
#: The clocks whose numbers are GPU timings (what ``Timing.is_gpu_timing`` accepts).
GPU_CLOCKS = (CLOCK_HELD, CLOCK_PYTHON, CLOCK_LEGACY_EVENTS)
#: ``benchmark``'s ``clock=`` choices and the clock each gives.
BENCHMARK_CLOCKS = {"gpu": CLOCK_HELD, "python": CLOCK_PYTHON}
#: How each clock is named in a printout.
CLOCK_DESCRIPTIONS = {
    CLOCK_HELD: "GPU time (CUDA events, stream held)",
    CLOCK_PYTHON: "CUDA events around launches from Python (launch cost included)",
    CLOCK_LEGACY_EVENTS: "CUDA events around launches from Python (launch cost included)",
    CLOCK_HOST: "host clock",
}


def _no_timing(label: str) -> GPUOnlyError:
    return GPUOnlyError(
        f"{label}: there is no GPU timing under the simulator (the CPU simulator's speed says nothing "
        "about a GPU). Check `timing.is_gpu_timing` first, or look at the reference data "
        "(labhelpers.refdata) measured on a real GPU."
    )


@dataclass(frozen=True)
class Timing:
    """Result of :func:`benchmark`: repeated GPU timings of one piece of work.

    Attributes:
        label: what was timed.
        times_ms: each repetition's time per call in milliseconds; ``None`` under the simulator.
        nbytes: bytes the work moves through device memory (as stated by the caller).
        flops: floating-point operations of the work (as stated by the caller).
        clock: which clock measured ``times_ms``: :data:`CLOCK_HELD`, :data:`CLOCK_PYTHON` or :data:`CLOCK_HOST`.
        issue_ms: the host's cost of issuing one call (``time.perf_counter`` around the calls, median over the
            repetitions), measured beside the GPU time and never part of it; ``None`` when not measured.
        synchronises: True when the work waited for the GPU while being issued, so the stream could not be held
            and ``times_ms`` come from the Python clock (``note`` says why).
        note: why the clock is not the one asked for, or ``""``.
    """

    label: str
    times_ms: tuple[float, ...] | None
    nbytes: int | None = None
    flops: int | None = None
    clock: str = CLOCK_HELD
    issue_ms: float | None = None
    synchronises: bool = False
    note: str = ""

    @property
    def is_gpu_timing(self) -> bool:
        """True when the numbers are real GPU timings (CUDA events, held or around Python launches)."""
        return self.times_ms is not None and self.clock in GPU_CLOCKS

    @property
    def includes_launch_cost(self) -> bool:
        """True when the interval holds Python's cost of launching the work as well as the work."""
        return self.clock != CLOCK_HELD

    def _times(self) -> tuple[float, ...]:
        if self.times_ms is None:
            raise _no_timing(self.label)
        return self.times_ms

    @property
    def median_ms(self) -> float:
        """Median time of one repetition, in ms."""
        return statistics.median(self._times())

    @property
    def min_ms(self) -> float:
        """Fastest repetition, in ms."""
        return min(self._times())

    @property
    def spread(self) -> float:
        """Interquartile range over the median: 0.02 means the middle half lies within 2%."""
        t = sorted(self._times())
        if len(t) < 4:
            return (t[-1] - t[0]) / statistics.median(t) if t else 0.0
        q1, _, q3 = statistics.quantiles(t, n=4)
        return (q3 - q1) / statistics.median(t)

    @property
    def gbps(self) -> float:
        """Effective bandwidth in GB/s (10^9 bytes/s): stated bytes over the median time."""
        if self.nbytes is None:
            raise ValueError(f"{self.label}: pass nbytes= to benchmark() to get GB/s")
        return self.nbytes / (self.median_ms * 1e-3) / 1e9

    @property
    def gflops(self) -> float:
        """Throughput in GFLOP/s: stated flops over the median time."""
        if self.flops is None:
            raise ValueError(f"{self.label}: pass flops= to benchmark() to get GFLOP/s")
        return self.flops / (self.median_ms * 1e-3) / 1e9

    def as_row(self) -> dict:
        """The summary as a flat dict of numbers (NaN where there is none), for tables.

        Keys: ``median_ms``, ``min_ms``, ``spread``, ``gbps``, ``gflops`` and ``issue_ms`` (the host's cost of
        issuing one call, beside the GPU time).
        """
        nan = float("nan")
        issue = self.issue_ms if self.issue_ms is not None else nan
        if self.times_ms is None:
            return {"median_ms": nan, "min_ms": nan, "spread": nan, "gbps": nan, "gflops": nan, "issue_ms": nan}
        return {
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "spread": self.spread,
            "gbps": self.gbps if self.nbytes is not None else nan,
            "gflops": self.gflops if self.flops is not None else nan,
            "issue_ms": issue,
        }

    def __str__(self) -> str:
        if self.times_ms is None:
            return f"{self.label}: simulator run, correctness only: no GPU timing"
        clock = CLOCK_DESCRIPTIONS.get(self.clock, self.clock)
        parts = [f"{self.label}: median {self.median_ms:.4g} ms (min {self.min_ms:.4g} ms, spread {self.spread:.0%}, "
                 f"{len(self.times_ms)} runs, {clock})"]
        if self.nbytes is not None:
            parts.append(f"{self.gbps:,.1f} GB/s")
        if self.flops is not None:
            parts.append(f"{self.gflops:,.1f} GFLOP/s")
        if self.issue_ms is not None:
            parts.append(f"host issue {self.issue_ms:.3g} ms per call")
        text = ", ".join(parts)
        return f"{text}\n  note: {self.note}" if self.note else text

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


# ------------------------------------------------------------------------------- the logic, GPU-free


class StreamOps(Protocol):
    """The few GPU operations :func:`time_repetitions` needs, all on the stream the work is issued to."""

    def now(self) -> float:
        """The host's clock, in seconds."""

    def hold(self, ms: float) -> None:
        """Queue a kernel that keeps the stream busy for about ``ms`` milliseconds."""

    def flush(self) -> None:
        """Queue work that evicts the work's data from the L2 cache."""

    def record(self) -> object:
        """Record an event on the stream now; return it."""

    def has_completed(self, event: object) -> bool:
        """Whether the GPU has reached ``event`` (without waiting)."""

    def elapsed_ms(self, start: object, end: object) -> float:
        """Wait for ``end``; the GPU's time between the two events, in ms."""

    def synchronize(self) -> None:
        """Wait until the GPU has finished everything queued."""


@dataclass(frozen=True)
class HoldPolicy:
    """How long the sleeping kernel sleeps: long enough to cover the issue of the timed calls, not much longer.

    Attributes:
        factor: the sleep is at least ``factor`` times the measured issue time of one repetition's calls...
        margin_ms: ...plus this margin;
        min_ms: and at least this;
        max_ms: and at most this (a repetition costs its sleep in wall time).
        guess_per_call_ms: the issue cost per call assumed before any was measured (``warmup=0``).
    """

    factor: float = 2.0
    margin_ms: float = 0.5
    min_ms: float = 1.0
    max_ms: float = 500.0
    guess_per_call_ms: float = 0.1
    target_ms: float = 1.0
    max_number: int = 100

    def calls_per_repetition(self, one_call_ms: float) -> int:
        """How many calls one held repetition queues when the caller left ``number`` to ``benchmark``.

        Two events bracket a few microseconds of the GPU's own work besides the calls (the event and the first
        launch reaching the GPU): around one call of 50 µs that is +10%. Queuing calls for about
        ``target_ms`` of GPU work (at most ``max_number``) makes it a fraction of a percent per call; what stays
        is the GPU's gap between two kernels of one stream (about a microsecond), as in any stream of kernels.
        """
        if not one_call_ms > 0:
            return 1
        return int(min(self.max_number, max(1, -(-self.target_ms // one_call_ms))))  # not launch geometry: calls

    def sleep_for(self, issue_ms: float) -> float:
        """The sleep that covers a repetition whose calls take ``issue_ms`` to issue."""
        return min(self.max_ms, max(self.min_ms, self.factor * issue_ms + self.margin_ms))

    def longer(self, sleep_ms: float, issue_ms: float) -> float:
        """The sleep for a retry after a hold of ``sleep_ms`` broke while issuing took ``issue_ms``."""
        return min(self.max_ms, max(4 * sleep_ms, self.sleep_for(4 * issue_ms)))


@dataclass(frozen=True)
class Repetitions:
    """What :func:`time_repetitions` measured: times and issue costs per call, and which clock."""

    times_ms: tuple[float, ...]
    issue_ms: tuple[float, ...]
    clock: str
    synchronises: bool = False
    note: str = ""


def _issue(fn: Callable[[], object], number: int, ops: StreamOps) -> float:
    """Call ``fn`` ``number`` times; the host time it took, in ms."""
    t0 = ops.now()
    for _ in range(number):
        fn()
    return (ops.now() - t0) * 1e3


def held_repetition(fn: Callable[[], object], number: int, ops: StreamOps, sleep_ms: float,
                    flush: bool = False) -> tuple[bool, float, float]:
    """One repetition with the stream held: ``(held, gpu_ms, issue_ms)`` for all ``number`` calls together.

    The flush (if asked) and the sleeper go first; then the start event, the calls, the end event. ``held`` is
    whether the start event was still waiting behind the sleeper once the end event was queued: only then did
    every call reach the GPU before the GPU reached the start event, so the events bracket GPU time only.
    """
    if flush:
        ops.flush()
    ops.hold(sleep_ms)
    start = ops.record()
    issue_ms = _issue(fn, number, ops)
    end = ops.record()
    held = not ops.has_completed(start)
    return held, ops.elapsed_ms(start, end), issue_ms


def python_repetition(fn: Callable[[], object], number: int, ops: StreamOps,
                      flush: bool = False) -> tuple[float, float]:
    """One repetition timed from Python: ``(gpu_ms, issue_ms)``, events around the calls as Python makes them.

    The flush (if asked) finishes before the start event, so the calls do not queue behind it.
    """
    if flush:
        ops.flush()
        ops.synchronize()
    start = ops.record()
    issue_ms = _issue(fn, number, ops)
    end = ops.record()
    return ops.elapsed_ms(start, end), issue_ms


def _python_repetitions(fn, ops, repeat, number, flush) -> tuple[tuple[float, ...], tuple[float, ...]]:
    pairs = [python_repetition(fn, number, ops, flush) for _ in range(repeat)]
    return tuple(g / number for g, _ in pairs), tuple(i / number for _, i in pairs)


def time_repetitions(fn: Callable[[], object], ops: StreamOps, *, repeat: int, number: int = 1,
                     clock: str = CLOCK_HELD, flush: bool = False, issue_estimate_ms: float | None = None,
                     policy: HoldPolicy = HoldPolicy()) -> Repetitions:
    """Time ``repeat`` repetitions of ``number`` calls of ``fn``, on the GPU that ``ops`` drives.

    With ``clock=CLOCK_HELD`` each repetition holds the stream with a sleep of ``policy.sleep_for`` the issue
    time (``issue_estimate_ms`` per call at first, then the largest measured). A repetition whose hold broke is
    run once more with ``policy.longer`` sleep; if that breaks too, every repetition is timed from Python
    (:data:`CLOCK_PYTHON`) and the result says why: the calls waited for the GPU (``synchronises``), or issuing
    them took longer than the longest sleep.
    """
    if clock == CLOCK_PYTHON:
        times, issues = _python_repetitions(fn, ops, repeat, number, flush)
        return Repetitions(times, issues, CLOCK_PYTHON)
    per_call = policy.guess_per_call_ms if issue_estimate_ms is None else issue_estimate_ms
    sleep_ms = policy.sleep_for(per_call * number)
    times, issues = [], []
    for _ in range(repeat):
        held, gpu_ms, issue_ms = held_repetition(fn, number, ops, sleep_ms, flush)
        if not held:
            first_sleep_ms, first_issue_ms = sleep_ms, issue_ms
            sleep_ms = policy.longer(sleep_ms, issue_ms)
            held, gpu_ms, issue_ms = held_repetition(fn, number, ops, sleep_ms, flush)
        if not held:
            # A call that waits for the GPU takes as long as the sleep left: its issue time grows with the sleep.
            # Calls that are merely slow to issue take as long as before.
            synchronises = issue_ms - first_issue_ms >= 0.5 * (sleep_ms - first_sleep_ms) > 0
            if synchronises:
                why = ("the work waits for the GPU while it is being issued (it synchronises: a copy to pageable "
                       "host memory, copy_to_host, or a result whose size the host needs)")
            else:
                why = (f"issuing {number} call(s) took {issue_ms:.3g} ms, longer than the longest hold "
                       f"({sleep_ms:.3g} ms)")
            ops.synchronize()
            times, issues = _python_repetitions(fn, ops, repeat, number, flush)
            note = (f"the stream could not be held: {why}; timed with CUDA events around the calls from Python, "
                    "so the times include what the host spends issuing them")
            return Repetitions(times, issues, CLOCK_PYTHON, synchronises, note)
        times.append(gpu_ms / number)
        issues.append(issue_ms / number)
        sleep_ms = max(sleep_ms, policy.sleep_for(issue_ms))
    return Repetitions(tuple(times), tuple(issues), CLOCK_HELD)


# ------------------------------------------------------------------------------- the GPU's side


class CudaStreamOps:
    """:class:`StreamOps` on a real GPU, through Numba: events, the sleeper and the L2 flush on one stream.

    Args:
        stream: the Numba stream the work is issued to; ``None`` for Numba's default stream (the legacy default
            stream, which also orders every blocking stream).
    """

    _flush_buffers: dict = {}

    def __init__(self, stream=None):
        self._cuda = cuda
        self._kernels = timing_kernels
        self._stream = stream if stream is not None else cuda.default_stream()
        self._kernels.sleeper[1, 1, self._stream](1)  # compiled now, not inside a timed repetition

    def now(self) -> float:
        return time.perf_counter()

    def hold(self, ms: float) -> None:
        self._kernels.sleeper[1, 1, self._stream](self._kernels.sleep_steps(ms))

    def flush(self) -> None:
        device = self._cuda.get_current_device()
        key = device.id
        if key not in self._flush_buffers:
            l2_bytes = int(getattr(device, "L2_CACHE_SIZE", 0) or 64 * 2**20)
            self._flush_buffers[key] = self._cuda.device_array(2 * l2_bytes // 4, dtype="float32")
        buf = self._flush_buffers[key]
        threads = 256
        blocks = min(4096, blocks_for(buf.size, threads))
        self._kernels.fill[blocks, threads, self._stream](buf, 1.0)

    def record(self) -> object:
        event = self._cuda.event()
        event.record(self._stream)
        return event

    def has_completed(self, event) -> bool:
        return bool(event.query())

    def elapsed_ms(self, start, end) -> float:
        end.synchronize()
        return self._cuda.event_elapsed_time(start, end)

    def synchronize(self) -> None:
        self._stream.synchronize()
        self._cuda.synchronize()


def benchmark(
    fn: Callable[[], object],
    *,
    nbytes: int | None = None,
    flops: int | None = None,
    warmup: int = 2,
    repeat: int = 20,
    number: int | None = None,
    label: str | None = None,
    clock: str = "gpu",
    flush_l2: bool = False,
    stream=None,
) -> Timing:
    """Time ``fn()`` on the GPU: GPU time with the stream held (default), or events around Python's calls.

    Args:
        fn: a callable that launches the work, e.g. ``lambda: saxpy[blocks, threads](a, x, y, out)``.
            It should not copy to or from the host unless that is what you want to time (such a call
            synchronises: the result then says so and is timed from Python).
        nbytes: bytes the work reads plus writes in device memory, for GB/s.
        flops: floating-point operations, for GFLOP/s.
        warmup: untimed calls first (the first call of a kernel compiles it); they also measure the issue cost
            that sets the length of the hold.
        repeat: timed repetitions.
        number: calls of ``fn`` between one pair of events; the reported time is per call. Default: 1 with
            ``clock="python"``; with the stream held, enough calls for about 1 ms of GPU work, at most 100
            (:meth:`HoldPolicy.calls_per_repetition`: the events' own few microseconds then vanish in the
            average). Keep it under a few hundred: the driver's launch queue is finite.
        label: a name for the printout (defaults to ``fn``'s name).
        clock: ``"gpu"``: GPU time only, the stream held while the calls are queued (:data:`CLOCK_HELD`);
            ``"python"``: CUDA events around the calls as Python makes them, launch cost included
            (:data:`CLOCK_PYTHON`), for lessons about the launch cost.
        flush_l2: fill a buffer twice the L2 cache's size before each repetition, outside the timed interval, so
            the work starts with a cold L2 (with ``number > 1`` only the first call of a repetition does).
        stream: the Numba stream ``fn`` issues its work to; ``None`` for the default stream.

    Returns:
        A :class:`Timing` (``clock`` names the clock, ``issue_ms`` the host's cost per call, ``synchronises`` and
        ``note`` a hold that could not hold); under the simulator one without numbers (``fn`` runs once).
    """
    validate.function(fn, "benchmark's first argument (the work to time)",
                      example="lh.benchmark(lambda: kernel[blocks, threads](x, out))")
    repeat = validate.integer(repeat, "repeat", minimum=1)
    if number is not None:
        number = validate.integer(number, "number", minimum=1)
    warmup = validate.integer(warmup, "warmup", minimum=0)
    clock = validate.choice(clock, "clock", tuple(BENCHMARK_CLOCKS))
    label = label or getattr(fn, "__name__", "work")
    if backend.is_simulator():
        fn()
        return Timing(label=label, times_ms=None, nbytes=nbytes, flops=flops, clock=BENCHMARK_CLOCKS[clock])
    with gpu_lock.exclusive():  # alone on the GPU when test processes share it (a no-op otherwise)
        return _measure(fn, nbytes, flops, warmup, repeat, number, label, clock, flush_l2, stream)


def _measure(fn, nbytes, flops, warmup, repeat, number, label, clock, flush_l2, stream) -> Timing:
    """:func:`benchmark` on a GPU, its arguments checked."""
    ops = CudaStreamOps(stream)
    issue_estimate = None
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        issue_estimate = (time.perf_counter() - t0) * 1e3  # the last call's: the first one compiles
    ops.synchronize()
    if number is None:
        number = 1
        if clock == "gpu":  # one held call first: how long is the work?
            policy = HoldPolicy()
            per_call = policy.guess_per_call_ms if issue_estimate is None else issue_estimate
            held, one_ms, _ = held_repetition(fn, 1, ops, policy.sleep_for(per_call))
            if held:
                number = policy.calls_per_repetition(one_ms)
            ops.synchronize()
    reps = time_repetitions(fn, ops, repeat=repeat, number=number, clock=BENCHMARK_CLOCKS[clock],
                            flush=flush_l2, issue_estimate_ms=issue_estimate)
    return Timing(label=label, times_ms=reps.times_ms, nbytes=nbytes, flops=flops, clock=reps.clock,
                  issue_ms=statistics.median(reps.issue_ms), synchronises=reps.synchronises, note=reps.note)


def wall_time(
    fn: Callable[[], object],
    *,
    warmup: int = 1,
    repeat: int = 5,
    label: str | None = None,
    nbytes: int | None = None,
    flops: int | None = None,
) -> Timing:
    """Time ``fn()`` with the host's clock (``time.perf_counter``): for CPU work such as NumPy.

    To time GPU work with it, ``fn`` must synchronise before returning, or the clock
    measures only the launch. Unlike :func:`benchmark` it also reports under the simulator,
    because what it measures is the CPU; the result's ``clock`` says so.
    """
    label = label or getattr(fn, "__name__", "work")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return Timing(label=label, times_ms=tuple(times), nbytes=nbytes, flops=flops, clock=CLOCK_HOST)
