"""Timing GPU work honestly: CUDA events, warm-up excluded, repeated, summarised.

``benchmark(fn, nbytes=..., flops=...)`` calls ``fn`` a few times to warm up (the first
call of a Numba kernel compiles it), then times ``repeat`` calls, each between two CUDA
events, and returns a :class:`Timing` with the median, minimum and spread, plus GB/s
and GFLOP/s computed from the bytes and flops *you* state.

Under the simulator there is no GPU to time: ``fn`` still runs once (so errors
surface), but the returned :class:`Timing` holds no numbers, prints as
"simulator: no GPU timing", and asking it for a number raises
:class:`~labhelpers.errors.GPUOnlyError`. Nothing fakes a GPU number.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

from . import backend, validate
from .errors import GPUOnlyError


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
        times_ms: each repetition's time in milliseconds; ``None`` under the simulator.
        nbytes: bytes the work moves through device memory (as stated by the caller).
        flops: floating-point operations of the work (as stated by the caller).
    """

    label: str
    times_ms: tuple[float, ...] | None
    nbytes: int | None = None
    flops: int | None = None
    clock: str = "cuda-events"

    @property
    def is_gpu_timing(self) -> bool:
        """True when the numbers are real GPU timings."""
        return self.times_ms is not None and self.clock == "cuda-events"

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
        """The summary as a flat dict (NaN where there is no GPU timing), for tables."""
        nan = float("nan")
        if self.times_ms is None:
            return {"median_ms": nan, "min_ms": nan, "spread": nan, "gbps": nan, "gflops": nan}
        return {
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "spread": self.spread,
            "gbps": self.gbps if self.nbytes is not None else nan,
            "gflops": self.gflops if self.flops is not None else nan,
        }

    def __str__(self) -> str:
        if self.times_ms is None:
            return f"{self.label}: simulator run, correctness only: no GPU timing"
        parts = [f"{self.label}: median {self.median_ms:.4g} ms (min {self.min_ms:.4g} ms, spread {self.spread:.0%}, "
                 f"{len(self.times_ms)} runs, {self.clock})"]
        if self.nbytes is not None:
            parts.append(f"{self.gbps:,.1f} GB/s")
        if self.flops is not None:
            parts.append(f"{self.gflops:,.1f} GFLOP/s")
        return ", ".join(parts)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython display
        p.text(str(self))


def benchmark(
    fn: Callable[[], object],
    *,
    nbytes: int | None = None,
    flops: int | None = None,
    warmup: int = 2,
    repeat: int = 20,
    number: int = 1,
    label: str | None = None,
) -> Timing:
    """Time ``fn()`` on the GPU with CUDA events.

    Args:
        fn: a callable that launches the work, e.g. ``lambda: saxpy[blocks, threads](a, x, y, out)``.
            It should not copy to or from the host unless that is what you want to time.
        nbytes: bytes the work reads plus writes in device memory, for GB/s.
        flops: floating-point operations, for GFLOP/s.
        warmup: untimed calls first (the first call of a kernel compiles it).
        repeat: timed repetitions.
        number: calls of ``fn`` between one pair of events (for very short kernels);
            the reported time is per call.
        label: a name for the printout (defaults to ``fn``'s name).

    Returns:
        A :class:`Timing`; under the simulator one without numbers (``fn`` runs once).
    """
    validate.function(fn, "benchmark's first argument (the work to time)",
                      example="lh.benchmark(lambda: kernel[blocks, threads](x, out))")
    repeat = validate.integer(repeat, "repeat", minimum=1)
    number = validate.integer(number, "number", minimum=1)
    warmup = validate.integer(warmup, "warmup", minimum=0)
    label = label or getattr(fn, "__name__", "work")
    if backend.is_simulator():
        fn()
        return Timing(label=label, times_ms=None, nbytes=nbytes, flops=flops)

    from numba import cuda

    for _ in range(warmup):
        fn()
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    times = []
    for _ in range(repeat):
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        times.append(cuda.event_elapsed_time(start, end) / number)
    return Timing(label=label, times_ms=tuple(times), nbytes=nbytes, flops=flops)


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
    return Timing(label=label, times_ms=tuple(times), nbytes=nbytes, flops=flops, clock="host-clock")
