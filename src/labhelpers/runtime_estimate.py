"""How long each chapter takes on a GPU: an estimate for a T4, an L4, an A100, an H100 and an H200.

The model, chapter by chapter:

* **GPU work**: every row of the chapter's reference tables (``chNN_*.json``) with a ``median_ms`` is counted as
  one measurement the chapter repeats on a GPU (an upper bound: a chapter re-measures some tables at smaller sizes
  and only reads others, as chapter 8 reads ``ch08_tuning``): :data:`CALLS_PER_ROW` timed calls of at least :data:`MIN_CALL_MS`
  each (``lh.benchmark`` queues about 1 ms of calls per repetition), or :data:`CALLS_PER_LONG_ROW` when one call
  takes longer than :data:`LONG_CALL_MS` (the sweeps repeat long calls less). A row is *memory bound* or
  *compute bound* by which of its two rates is the larger share of the reference GPU's ceiling (``gbps`` over
  the DRAM bandwidth, ``gflops`` over the FP32 or, for float64 rows, the FP64 peak), and its time scales by the
  reference GPU's ceiling over the target's: bandwidth for memory-bound rows and rows without rates, FP32 or FP64
  peak for compute-bound ones (a float64 row of a cell that shrinks its size with
  :func:`labhelpers.sizes.fp64_problem_size` keeps the reference time on an FP64-poor GPU). A row reaching less
  than :data:`LATENCY_SHARE` of both ceilings is latency or launch bound, and so is a row timed around Python's
  launches (``clock == "python-launch"`` without rates): it keeps its time. Rows measured on the host (NumPy,
  SciPy, Numba on the CPU) keep their time too: the CPU does not change with the GPU (Colab's two vCPUs are
  slower than the reference host's: read those rows as a lower bound).
* **Fixed cost**, the same on every GPU: :data:`SESSION_SECONDS` (Python, Numba, CuPy and the chapter's imports),
  :data:`COMPILE_SECONDS` per ``@cuda.jit`` kernel of the chapter's ``kernels/<topic>.py``, and
  :data:`ROW_OVERHEAD_SECONDS` per measurement (Python, synchronisation, the stream hold).
* **Install** (Colab, once per session): :data:`INSTALL_SECONDS`.

Where a GPU run recorded real per-cell times (``tools/execute_notebooks.py --times``, or ``CELL_TIMES=1 bash
tools/device_collect.sh``) and that file is copied to ``src/labhelpers/data/cell_times.json``, the chapter's
measured total less the model's GPU work on that GPU replaces the modelled fixed cost (:attr:`Estimate.measured`).
No such file is shipped yet: the numbers come from the model alone and have not been checked against a timed run.

``book/intro.md``'s table of minutes on a T4 is :func:`markdown_table` ``("T4")``, one row per chapter of
:data:`labhelpers.chapters.CHAPTERS` (``tests/test_gpus.py`` compares them); every chapter prints
:func:`expected_time` in a machine-dependent cell after its imports (``tests/test_chapters.py``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from importlib import resources

import pandas as pd

from . import gpus, refdata
from .chapters import CHAPTERS, Chapter, chapter

#: The GPUs :func:`estimate_table` covers, by datasheet name.
GPU_KEYS = ("T4", "L4", "A100", "H100", "H200")
#: Timed calls per measurement: 2 warm-up and 20 repetitions (``lh.benchmark``'s defaults).
CALLS_PER_ROW = 22
#: A repetition queues about 1 ms of calls (``lh.benchmark``): a shorter call still costs about this much.
MIN_CALL_MS = 1.0
#: Calls of a measurement whose one call takes longer than :data:`LONG_CALL_MS`.
CALLS_PER_LONG_ROW = 5
LONG_CALL_MS = 50.0
#: Below this share of both ceilings a row is latency or launch bound: its time does not follow the ceilings.
LATENCY_SHARE = 0.1
#: Python, the driver's synchronisation and the stream hold, per measurement.
ROW_OVERHEAD_SECONDS = 0.1
#: Starting the kernel, importing Numba, CuPy and labhelpers, the GPU self-test of ``lh.setup()``.
SESSION_SECONDS = 15.0
#: Numba compiling one ``@cuda.jit`` kernel (a few signatures each) on first launch.
COMPILE_SECONDS = 1.5
#: Colab: installing labhelpers and what the runtime lacks (a wheel and a few small packages), once per session.
INSTALL_SECONDS = 60.0
#: Tables whose float64 rows come from cells that shrink float64 work on FP64-poor GPUs (``fp64_problem_size``).
FP64_SHRUNK_TABLES = frozenset({"ch04_register_caps", "ch07_roofline_points"})
#: Tables whose rows are float64 without saying so in a column.
FP64_TABLES = frozenset({"ch04_register_caps"})
#: A row mentioning one of these ran on the host CPU.
HOST_WORDS = re.compile(r"\b(host|numpy|scipy|cpu|openacc|c -o3|numba cpu)\b", re.IGNORECASE)
#: Tables the notebooks only show from the reference data (``lh.live_or_reference(None, name)``, never with a function
#: that measures): a GPU never re-measures them, so they cost nothing (``tests/test_gpus.py`` keeps this in step).
REFERENCE_ONLY_TABLES = frozenset({"ch07_sanitizer", "ch09_ccl_steps", "ch09_convergence",
    "ch09_racecheck", "ch10_compaction", "ch10_lookback_tiles", "ch10_radix_sort", "ch10_scan_sizes",
    "ch10_spmv", "ch11_link_rates", "ch11_pipeline_kernel_bound", "ch11_queues", "ch12_data_clauses",
    "ch12_toolchain", "ch13_counter_runs", "ch13_last_block_failures", "ch13_litmus", "ch13_racecheck",
    "ch13_wait_loop_ptx"})
#: Where a GPU run's per-cell times are kept (``tools/execute_notebooks.py --times``).
CELL_TIMES = "cell_times.json"


@dataclass(frozen=True)
class Estimate:
    """The expected run time of one chapter on one GPU, in seconds, and its parts."""

    chapter: int
    gpu: str
    gpu_seconds: float
    host_seconds: float
    fixed_seconds: float
    measured: bool

    @property
    def seconds(self) -> float:
        """GPU work, host work and fixed cost together."""
        return self.gpu_seconds + self.host_seconds + self.fixed_seconds

    @property
    def minutes(self) -> float:
        """:attr:`seconds` in minutes."""
        return self.seconds / 60


def _is_fp64(name: str, row: dict) -> bool:
    if name in FP64_TABLES:
        return True
    return any(isinstance(v, str) and re.search(r"fp64|float64", v, re.IGNORECASE) for v in row.values())


def _on_host(name: str, row: dict) -> bool:
    if "_cpu" in name or row.get("clock") == "host-clock":
        return True
    words = " ".join(str(row.get(k, "")) for k in ("method", "kernel", "model", "machine", "order", "implementation"))
    return bool(HOST_WORDS.search(words))


def _number(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) or v <= 0 else v


def _row_factor(name: str, row: dict, ref: gpus.GPU, target: gpus.GPU) -> float:
    """How much longer the row's GPU work takes on ``target`` than on ``ref``."""
    fp64 = _is_fp64(name, row)
    peak_ref = ref.fp64_gflops if fp64 else ref.fp32_gflops
    peak = target.fp64_gflops if fp64 else target.fp32_gflops
    gbps, gflops = _number(row.get("gbps")), _number(row.get("gflops"))
    memory_share = gbps / ref.dram_gbs if gbps and ref.dram_gbs else 0.0
    compute_share = gflops / peak_ref if gflops and peak_ref else 0.0
    if (gbps or gflops) and max(memory_share, compute_share) < LATENCY_SHARE:
        return 1.0
    if not (gbps or gflops) and row.get("clock") == "python-launch":
        return 1.0
    if compute_share > memory_share and peak and peak_ref:
        if fp64 and target.fp64_poor and name in FP64_SHRUNK_TABLES:
            return 1.0  # the cell shrinks its float64 work on this GPU (sizes.fp64_problem_size)
        return peak_ref / peak
    return (ref.dram_gbs / target.dram_gbs) if ref.dram_gbs and target.dram_gbs else 1.0


def _work(c: Chapter, ref: gpus.GPU, target: gpus.GPU) -> tuple[float, float, int]:
    """(GPU seconds on ``target``, host seconds, measurements) of the chapter's reference tables."""
    gpu_s = host_s = 0.0
    rows = 0
    for name in refdata.available_references():
        if not name.startswith(c.reference_prefix) or name in REFERENCE_ONLY_TABLES:
            continue
        table = refdata.load_reference(name).table
        if "median_ms" not in table:
            continue
        for row in table.to_dict("records"):
            ms = _number(row.get("median_ms"))
            if ms is None:
                continue
            rows += 1
            calls = CALLS_PER_LONG_ROW if ms > LONG_CALL_MS else CALLS_PER_ROW
            seconds = calls * max(ms, MIN_CALL_MS) / 1e3
            if _on_host(name, row):
                host_s += seconds
            else:
                gpu_s += seconds * _row_factor(name, row, ref, target)
    return gpu_s, host_s, rows


def _kernels(c: Chapter) -> int:
    """``@cuda.jit`` kernels in the chapter's ``kernels/<topic>.py`` (0 when it has none)."""
    try:
        text = resources.files("labhelpers.kernels").joinpath(f"{c.topic}.py").read_text()
    except (FileNotFoundError, OSError):
        return 0
    return len(re.findall(r"^@cuda\.jit", text, flags=re.MULTILINE))


def cell_times() -> dict | None:
    """The per-cell times a GPU run recorded (``data/cell_times.json``), or None: none are shipped yet."""
    path = resources.files("labhelpers.data").joinpath(CELL_TIMES)
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, OSError, ValueError):
        return None


def estimate(number: int, gpu: gpus.GPU | str) -> Estimate:
    """The expected GPU run time of chapter ``number`` on ``gpu`` (a :class:`~labhelpers.gpus.GPU` or one of
    :data:`GPU_KEYS`), from the reference GPU's measurements (see the module's docstring)."""
    c = chapter(number)
    target = gpus.student_gpu(gpu) if isinstance(gpu, str) else gpu
    ref = gpus.reference()
    gpu_s, host_s, rows = _work(c, ref, target)
    fixed = SESSION_SECONDS + COMPILE_SECONDS * _kernels(c) + ROW_OVERHEAD_SECONDS * rows
    measured = False
    times = cell_times()
    recorded = (times or {}).get("notebooks", {}).get(c.notebook)
    meta = (times or {}).get("meta", {})
    if recorded and meta.get("backend") == "gpu":
        # a timed GPU run: what its total holds beyond the GPU work (modelled for that GPU) is the fixed cost
        run = ref if meta.get("gpu") == ref.name else gpus.from_record(meta["gpu"], meta["compute_capability"],
                                                                       meta["sm_count"])
        fixed = max(0.0, float(recorded["seconds"]) - _work(c, ref, run)[0] - host_s)
        measured = True
    return Estimate(chapter=c.number, gpu=target.name, gpu_seconds=gpu_s, host_seconds=host_s, fixed_seconds=fixed,
                    measured=measured)


def estimate_table(keys: tuple[str, ...] = GPU_KEYS) -> pd.DataFrame:
    """Expected minutes per chapter (rows) on each GPU of ``keys`` (columns), and the install time as a last row."""
    rows = []
    for c in CHAPTERS:
        rows.append({"chapter": f"{c.number:02d} {c.slug[3:].replace('_', ' ')}",
                     **{k: round(estimate(c.number, k).minutes, 1) for k in keys}})
    rows.append({"chapter": "install on Colab (once per session)", **{k: round(INSTALL_SECONDS / 60, 1) for k in keys}})
    return pd.DataFrame(rows).set_index("chapter")


def markdown_table(key: str = "T4") -> str:
    """The expected minutes per chapter on GPU ``key`` as a Markdown table (what the home page shows for a T4)."""
    gpu = gpus.student_gpu(key)
    lines = [f"| chapter | minutes on a {key} |", "| --- | --- |"]
    for c in CHAPTERS:
        lines.append(f"| {c.number}. {c.slug[3:].replace('_', ' ')} | {math.ceil(estimate(c.number, gpu).minutes)} |")
    lines.append(f"| installing (once per Colab session) | {math.ceil(INSTALL_SECONDS / 60)} |")
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    return "under a minute" if minutes < 1 else f"about {minutes:.0f} min" if minutes >= 1.5 else "about 1 min"


def expected_time(number: int) -> str:
    """One sentence: the chapter's expected run time on this GPU; under the simulator on the reference GPU and a T4."""
    here = gpus.current()
    if here.is_live:
        e = estimate(number, here)
        return (f"Expected run time of this chapter on {here.label}: {_minutes(e.seconds)} "
                f"(an upper-bound estimate from the reference GPU's measurements: labhelpers.runtime_estimate).")
    ref, t4 = estimate(number, here), estimate(number, "T4")
    return (f"Expected run time of this chapter on a GPU: {_minutes(ref.seconds)} on the {here.label}, "
            f"{_minutes(t4.seconds)} on a T4 (Colab's free GPU), plus about {INSTALL_SECONDS / 60:.0f} min of "
            "installing on Colab (an upper-bound estimate from the reference GPU's measurements: "
            "labhelpers.runtime_estimate).")


def main(argv: list[str] | None = None) -> int:
    """``python -m labhelpers.runtime_estimate [GPU]``: :func:`markdown_table` for GPU (default T4), the table
    ``book/intro.md`` shows under "On Colab"."""
    import argparse  # only the command line needs it

    parser = argparse.ArgumentParser(prog="python -m labhelpers.runtime_estimate", description=main.__doc__)
    parser.add_argument("gpu", nargs="?", default="T4", choices=GPU_KEYS)
    print(markdown_table(parser.parse_args(argv).gpu))
    return 0


__all__ = ["CALLS_PER_ROW", "COMPILE_SECONDS", "Estimate", "GPU_KEYS", "INSTALL_SECONDS", "SESSION_SECONDS",
           "cell_times", "estimate", "estimate_table", "expected_time", "main", "markdown_table"]

if __name__ == "__main__":
    raise SystemExit(main())
