"""Chapter "Profiling and the roofline", section 2, the stopwatch: one copy kernel timed with four clocks, side by side.

:func:`stopwatch_sweep` times :func:`labhelpers.kernels.roofline_stopwatch.copy` (float32, one element per thread) at
several sizes with each clock of :data:`CLOCKS`:

* ``host clock``: ``time.perf_counter`` around a launch and ``cuda.synchronize()``: what a Python program
  waits, launch, kernel and synchronisation together (:func:`labhelpers.wall_time`);
* ``events, Python launch``: CUDA events recorded around one launch made from Python: the kernel plus
  Python's cost of launching it (``lh.benchmark(..., clock="python")``);
* ``events, stream held``: the events bracket GPU time only, the stream held by a sleeping kernel while the
  launch is queued (``lh.benchmark(...)``, the default); the host's issue cost is in ``issue_ms`` beside it;
* ``Nsight Compute``: the profiler's ``gpu__time_duration.sum`` of the same launches, run in a subprocess
  (:func:`profiler_times_ms`); ``status`` says why not where ``ncu`` cannot run.

:func:`stopwatch_summary` puts the clocks side by side, one row per size. GPU only (reference
``ch07_stopwatch``); the figure is :func:`labhelpers.figures.roofline_stopwatch.plot_stopwatch`.
"""

from __future__ import annotations

import statistics
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, profiler, validate
from ..kernels import roofline_stopwatch as sw
from ..launch import blocks_for
from ..timing import Timing, benchmark, wall_time

#: The clocks of the table, in the order the chapter discusses them.
HOST_CLOCK = "host clock"
PYTHON_EVENTS = "events, Python launch"
HELD_EVENTS = "events, stream held"
PROFILER = "Nsight Compute"
CLOCKS = (HOST_CLOCK, PYTHON_EVENTS, HELD_EVENTS, PROFILER)
#: What each clock's interval holds.
CLOCK_MEANING = {
    HOST_CLOCK: "launch + kernel + synchronisation, on the host's clock",
    PYTHON_EVENTS: "Python's launch + kernel, on the GPU's clock",
    HELD_EVENTS: "the kernel alone, on the GPU's clock (stream held)",
    PROFILER: "the kernel alone, as the profiler measures it",
}
#: Float32 elements per copy (the chapter's sweep): 2^16 to 2^28.
STOPWATCH_SIZES = tuple(2**k for k in range(16, 29, 2))
#: Columns of :func:`stopwatch_sweep`'s table.
COLUMNS = ("n", "bytes", "clock", "median_ms", "min_ms", "spread", "gbps", "issue_ms", "status", "reason")
#: Launches per size that the profiler times (the median is kept).
PROFILED_LAUNCHES = 3

#: The script :func:`profiler_times_ms` runs under Nsight Compute: every size's copies, in order.
PROFILE_SCRIPT = """
import numpy as np
import labhelpers
from numba import cuda
from labhelpers.kernels import roofline_stopwatch

for n in {sizes}:
    x = cuda.to_device(np.ones(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    for _ in range({launches}):
        roofline_stopwatch.copy[(n + {threads} - 1) // {threads}, {threads}](x, out)
    cuda.synchronize()
"""


def profiler_times_ms(sizes: Sequence[int], *, threads: int = 256, launches: int = PROFILED_LAUNCHES,
                      timeout: int = 600) -> dict[int, list[float]]:
    """Nsight Compute's ``gpu__time_duration.sum`` of :func:`~labhelpers.kernels.roofline_stopwatch.copy`, in ms.

    One ``ncu`` run (a subprocess) profiles ``launches`` copies of every size, with the GPU's clocks left as
    they are (``--clock-control none``, as :func:`labhelpers.benchmark` sees them); ncu flushes the caches
    before each profiled launch.

    Returns:
        ``{n: [ms of each launch]}``.

    Raises:
        labhelpers.profiler.ProfilerUnavailable: no GPU, no ncu, or the counters are not readable here.
    """
    sizes = [validate.integer(n, "size", minimum=1) for n in sizes]
    threads = validate.threads_per_block(threads)
    launches = validate.integer(launches, "launches", minimum=1)
    code = PROFILE_SCRIPT.format(sizes=list(sizes), launches=launches, threads=threads)
    report = profiler.profile_script(code, "copy", ["gpu__time_duration.sum"], timeout=timeout,
                                     launch_count=len(sizes) * launches, extra=("--clock-control", "none"))
    ms = [duration_ms(v, u) for v, u in zip(report["value"], report["unit"])]
    if len(ms) != len(sizes) * launches:
        raise profiler.ProfilerUnavailable(f"Nsight Compute reported {len(ms)} copy launches, expected "
                                           f"{len(sizes) * launches}")
    return {n: ms[i * launches:(i + 1) * launches] for i, n in enumerate(sizes)}


#: Milliseconds per unit of a duration as ncu prints it.
_MS_PER_UNIT = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
                "s": 1e3, "second": 1e3}


def duration_ms(value: float, unit: str) -> float:
    """An ncu duration in milliseconds (``unit`` as ncu prints it: ``nsecond``, ``usecond``...; ``""``: ns).

    Raises:
        ValueError: a unit that is not a time.
    """
    key = (unit or "ns").strip().lower()
    if key not in _MS_PER_UNIT:
        raise ValueError(f"ncu printed the duration in {unit!r}, which is not a unit of time this code knows")
    return float(value) * _MS_PER_UNIT[key]


def _row(n: int, clock: str, t: Timing | None = None, *, ms: Sequence[float] | None = None,
         status: str = "ok", reason: str = "") -> dict:
    nan = float("nan")
    nbytes = sw.copy_bytes(n)
    times = list(ms) if ms is not None else (list(t.times_ms) if t is not None and t.times_ms else [])
    med = statistics.median(times) if times else nan
    spread = Timing(label=clock, times_ms=tuple(times)).spread if times else nan
    issue = t.issue_ms if t is not None and t.issue_ms is not None else nan
    return {"n": n, "bytes": nbytes, "clock": clock, "median_ms": med, "min_ms": min(times) if times else nan,
            "spread": spread, "gbps": nbytes / (med * 1e-3) / 1e9 if times else nan, "issue_ms": issue,
            "status": status if times else (status if status != "ok" else "unavailable"), "reason": reason}


def stopwatch_sweep(sizes: Sequence[int] = STOPWATCH_SIZES, *, threads: int = 256, repeat: int = 20,
                    profile: bool = True) -> pd.DataFrame:
    """The copy kernel timed with the four clocks of :data:`CLOCKS` at every size. GPU only.

    Every size's copy is checked first. The profiler's rows have ``status`` ``"unavailable"`` and the reason
    when Nsight Compute cannot run here (or ``profile=False``).

    Returns:
        One row per size and clock, columns :data:`COLUMNS` (``bytes`` read + written; ``issue_ms`` the host's
        cost of issuing one launch, measured by the two event clocks).

    Raises:
        GPUOnlyError: under the simulator.
    """
    sizes = [validate.integer(n, "size", minimum=1) for n in sizes]
    threads = validate.threads_per_block(threads)
    repeat = validate.integer(repeat, "repeat", minimum=1)
    backend.require_gpu("stopwatch_sweep")
    rows = []
    for n in sizes:
        x = cuda.to_device(np.arange(n, dtype=np.float32))
        out = cuda.device_array(n, dtype=np.float32)
        blocks = blocks_for(n, threads)

        def launch():
            sw.copy[blocks, threads](x, out)

        def launch_and_wait():
            launch()
            cuda.synchronize()

        launch_and_wait()
        if not np.array_equal(out.copy_to_host(), x.copy_to_host()):
            raise AssertionError(f"the copy kernel gave a wrong result at n={n}: its timings would be meaningless")
        label = f"copy n={n}"
        rows.append(_row(n, HOST_CLOCK, wall_time(launch_and_wait, warmup=2, repeat=repeat, label=label)))
        rows.append(_row(n, PYTHON_EVENTS, benchmark(launch, repeat=repeat, label=label, clock="python")))
        rows.append(_row(n, HELD_EVENTS, benchmark(launch, repeat=repeat, label=label)))
        del x, out
    if profile:
        try:
            profiled = profiler_times_ms(sizes, threads=threads)
            rows += [_row(n, PROFILER, ms=profiled[n]) for n in sizes]
        except profiler.ProfilerUnavailable as exc:
            rows += [_row(n, PROFILER, status="unavailable", reason=str(exc)[:300]) for n in sizes]
    else:
        rows += [_row(n, PROFILER, status="unavailable", reason="not asked for (profile=False)") for n in sizes]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def stopwatch_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The clocks side by side: one row per size, microseconds per launch under each clock of :data:`CLOCKS`,
    the host's issue cost of one launch, and the Python-launch events over the held events.

    Returns:
        Columns ``n``, ``MiB copied`` (read + written), one ``<clock> (µs)`` per clock, ``issue (µs)`` and
        ``Python events / held``.
    """
    ok = table[table["status"] == "ok"]
    wide = ok.pivot_table(index="n", columns="clock", values="median_ms", aggfunc="first") * 1e3
    issue = table[table["clock"] == HELD_EVENTS].set_index("n")["issue_ms"] * 1e3
    sizes = sorted(table["n"].unique())
    out = pd.DataFrame({"n": sizes, "MiB copied": [2 * 4 * n / 2**20 for n in sizes]})
    for clock in CLOCKS:
        column = wide[clock] if clock in wide.columns else pd.Series(dtype=float)
        out[f"{clock} (µs)"] = [float(column.get(n, np.nan)) for n in sizes]
    out["issue (µs)"] = [float(issue.get(n, np.nan)) for n in sizes]
    out["Python events / held"] = out[f"{PYTHON_EVENTS} (µs)"] / out[f"{HELD_EVENTS} (µs)"]
    return out
