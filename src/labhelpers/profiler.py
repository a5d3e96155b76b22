"""Profilers from a notebook: one kernel under Nsight Compute, and NVTX ranges for Nsight Systems.

Nsight Compute (``ncu``) replays a kernel several times, reading a few hardware counters on each pass, and
reports metrics such as DRAM throughput and cache hit rates. :func:`profile_script` runs a small Python script
under ``ncu --metrics ... --csv`` in a subprocess (the notebook's own process cannot be profiled from inside)
and :func:`parse_ncu_csv` turns the output into a table. When ``ncu`` is missing, or the driver does not let
this user read the counters (``ERR_NVGPUCTRPERM``, the usual case on Colab and shared machines),
:class:`ProfilerUnavailable` says why, and the chapter shows a report saved on the reference GPU.

:func:`nvtx_range` marks a region of host code so that it shows as a named bar on the Nsight Systems timeline;
without the optional ``nvtx`` package it does nothing and says so once.

The correctness tools of the same toolkit, ``compute-sanitizer`` (which replaced ``cuda-memcheck``):
:func:`run_sanitizer` runs a small script under one of its tools (``memcheck`` for out-of-bounds and misaligned
accesses, ``racecheck`` for shared-memory races, ``initcheck``, ``synccheck``) and returns what it printed,
absolute paths shortened to file names; :func:`shorten_sanitizer_line` makes Numba's mangled kernel names
readable.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pandas as pd

from . import backend
from .errors import LabError
from .kernels.roofline import SANITIZER_TARGETS
from .measured import live_or_reference

#: Where ``ncu`` usually is when it is not on the PATH.
NCU_FALLBACK_PATHS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")

#: The metrics the chapter reads, with what each means. Few metrics: fewer replay passes.
KEY_METRICS: dict[str, str] = {
    "gpu__time_duration.sum": "kernel duration",
    "dram__bytes_read.sum": "DRAM bytes read",
    "dram__bytes_write.sum": "DRAM bytes written",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput, % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy, %",
    "l1tex__t_sector_hit_rate.pct": "L1 hit rate, %",
    "lts__t_sector_hit_rate.pct": "L2 hit rate, %",
    "smsp__inst_executed.sum": "warp instructions executed",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "FP32 FMA (thread instructions)",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": "FP32 add (thread instructions)",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": "FP32 multiply (thread instructions)",
}

REPORT_COLUMNS = ["metric", "description", "unit", "value"]


class ProfilerUnavailable(LabError, RuntimeError):
    """Nsight Compute cannot profile here; the message says why and what to do."""


def ncu_path() -> str | None:
    """The ``ncu`` executable: on the PATH, or in a usual CUDA location; None if absent."""
    found = shutil.which("ncu")
    if found:
        return found
    for candidate in NCU_FALLBACK_PATHS:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_unavailable_reason() -> str | None:
    """Why Nsight Compute cannot run here (no GPU, no ``ncu``), or None if it is worth trying.

    Whether the counters may be read is only known by trying: :func:`profile_script` reports that.
    """
    if backend.is_simulator():
        return ("there is no GPU here (kernels run in the CPU simulator), so there is nothing for Nsight Compute "
                "to profile")
    if ncu_path() is None:
        return ("Nsight Compute (`ncu`) is not installed here: it comes with the CUDA toolkit "
                "(/usr/local/cuda/bin/ncu) or as the `nsight-compute` package")
    return None


def _number(text: str) -> float | None:
    """A metric value as ncu prints it ("1,234,567", "12.5", "9,00", "n/a") as a float, or None."""
    s = text.strip().strip('"').strip()
    if not s or s.lower() in ("n/a", "nan", "-"):
        return None
    s = s.replace("(!)", "").strip()
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    elif re.fullmatch(r"[-+]?\d+,\d+", s):  # a decimal comma (some locales)
        s = s.replace(",", ".")
    try:
        return float(s)
    except ValueError:
        return None


def _csv_lines(text: str) -> list[str]:
    """The CSV part of ncu's output: lines that start with a quote, from the first header on."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    for i, line in enumerate(lines):
        if "Metric Name" in line or "Kernel Name" in line or line.startswith('"ID"'):
            return lines[i:]
    return []


def parse_ncu_csv(text: str, metrics: dict[str, str] | None = None) -> pd.DataFrame:
    """Parse ``ncu --csv`` output into a table of metrics.

    Accepts the long layout (``--page details``: one row per metric with ``Metric Name``, ``Metric Unit``,
    ``Metric Value``) and the wide layout (``--page raw``: one column per metric, an optional units row).
    Program output and ``==PROF==`` lines around the CSV are skipped; values with thousands separators or a
    decimal comma are understood; metrics ncu could not collect become NaN.

    Args:
        text: everything ncu printed.
        metrics: names to describe (default :data:`KEY_METRICS`); other metrics are kept, undescribed.

    Returns:
        A table with columns ``kernel``, ``metric``, ``description``, ``unit``, ``value``.

    Raises:
        ValueError: no CSV table in the text.
    """
    metrics = KEY_METRICS if metrics is None else metrics
    lines = _csv_lines(text)
    if not lines:
        raise ValueError("no CSV table in ncu's output (was --csv given, and did a kernel match the filter?)")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    out = []
    if "Metric Name" in header and "Metric Value" in header:
        i_name, i_value = header.index("Metric Name"), header.index("Metric Value")
        i_unit = header.index("Metric Unit") if "Metric Unit" in header else None
        i_kernel = header.index("Kernel Name") if "Kernel Name" in header else None
        for r in rows[1:]:
            if len(r) != len(header) or r == header:
                continue
            out.append({"kernel": r[i_kernel] if i_kernel is not None else "", "metric": r[i_name],
                        "unit": r[i_unit] if i_unit is not None else "", "value": _number(r[i_value])})
    else:
        data = [r for r in rows[1:] if len(r) == len(header)]
        units = {}
        if data and all((_number(v) is None) for v in data[0][1:] if v):  # a units row
            units = dict(zip(header, data[0]))
            data = data[1:]
        i_kernel = header.index("Kernel Name") if "Kernel Name" in header else None
        for r in data:
            for name, value in zip(header, r):
                if "__" not in name:  # ID, Process Name, Block Size...: not metrics
                    continue
                out.append({"kernel": r[i_kernel] if i_kernel is not None else "", "metric": name,
                            "unit": units.get(name, ""), "value": _number(value)})
    table = pd.DataFrame(out, columns=["kernel", "metric", "unit", "value"])
    table.insert(2, "description", [metrics.get(m, "") for m in table["metric"]])
    table["value"] = pd.to_numeric(table["value"], errors="coerce")
    return table


def _explain_failure(output: str, returncode: int) -> str:
    if "ERR_NVGPUCTRPERM" in output:
        return ("the GPU's performance counters are reserved for administrators on this machine "
                "(ERR_NVGPUCTRPERM). An administrator can allow them (NVreg_RestrictProfilingToAdminUsers=0, see "
                "https://developer.nvidia.com/ERR_NVGPUCTRPERM); hosted notebooks such as Colab do not.")
    if "No kernels were profiled" in output:
        return "ncu ran the script but no kernel matched the kernel-name filter"
    tail = "\n".join(output.strip().splitlines()[-8:])
    return f"ncu exited with status {returncode}:\n{tail}"


def _ncu_options(ncu: str) -> set[str]:
    try:
        help_text = subprocess.run([ncu, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {opt for opt in ("--print-units", "--print-metric-name") if opt in help_text}


def ncu_command(script: Path, kernel_regex: str, metrics: list[str], *, ncu: str, options: set[str],
                launch_skip: int = 0, launch_count: int = 1, extra: tuple[str, ...] = ()) -> list[str]:
    """The ncu command line that profiles the first ``launch_count`` matching kernel launches of ``python script``.

    ``extra`` adds ncu options, e.g. ``("--clock-control", "none")`` to leave the GPU's clocks as they are.
    """
    cmd = [ncu, "--target-processes", "all", "--kernel-name", f"regex:{kernel_regex}",
           "--launch-skip", str(launch_skip), "--launch-count", str(launch_count), *extra,
           "--metrics", ",".join(metrics), "--csv"]
    if "--print-units" in options:
        cmd += ["--print-units", "base"]
    if "--print-metric-name" in options:
        cmd += ["--print-metric-name", "name"]
    return cmd + [sys.executable, str(script)]


def profile_script(code: str, kernel_regex: str, metrics: list[str] | None = None, *,
                   timeout: int = 180, launch_skip: int = 0, launch_count: int = 1,
                   extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """Run Python ``code`` in a new process under Nsight Compute and return one kernel's metrics.

    Args:
        code: a small script that launches the kernel (it imports labhelpers like a notebook does).
        kernel_regex: a regular expression matched against kernel names (Numba's names contain the
            Python function's name, e.g. ``"fma_per_element"``).
        metrics: metric names (default: the keys of :data:`KEY_METRICS`).
        timeout: seconds before giving up.
        launch_skip: matching launches to skip first (e.g. a warm-up launch).
        launch_count: matching launches to profile (one row per launch and metric, in launch order).
        extra: more ncu options (see :func:`ncu_command`).

    Returns:
        The table of :func:`parse_ncu_csv`.

    Raises:
        ProfilerUnavailable: no GPU, no ncu, counters not permitted, or ncu failed; the message says which.
    """
    reason = ncu_unavailable_reason()
    if reason:
        raise ProfilerUnavailable(f"Cannot run Nsight Compute: {reason}.")
    ncu = ncu_path()
    metrics = list(metrics or KEY_METRICS)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "profile_target.py"
        script.write_text(textwrap.dedent(code))
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        paths = [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        cmd = ncu_command(script, kernel_regex, metrics, ncu=ncu, options=_ncu_options(ncu),
                          launch_skip=launch_skip, launch_count=launch_count, extra=tuple(extra))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise ProfilerUnavailable(f"Nsight Compute did not finish within {timeout} s.") from None
    output = proc.stdout + "\n" + proc.stderr
    why = _explain_failure(output, proc.returncode)
    if "ERR_NVGPUCTRPERM" in output or proc.returncode != 0:
        raise ProfilerUnavailable(f"Nsight Compute could not profile the kernel: {why}")
    try:
        return parse_ncu_csv(proc.stdout, {m: KEY_METRICS.get(m, "") for m in metrics})
    except ValueError:
        raise ProfilerUnavailable(f"Nsight Compute printed no metrics: {why}") from None


#: The script :func:`profile_fma_per_element` runs under ncu.
FMA_SCRIPT = """
import labhelpers
from labhelpers.kernels import roofline
roofline.profile_target(n={n}, nfma={nfma})
"""


def profile_fma_per_element(n: int = 2**24, nfma: int = 16, *, timeout: int = 180) -> pd.DataFrame:
    """Profile one launch of :func:`~labhelpers.kernels.roofline.fma_per_element` with the key metrics."""
    return profile_script(FMA_SCRIPT.format(n=n, nfma=nfma), "fma_per_element", timeout=timeout)


def fma_report_or_reference(reference_name: str = "ch07_ncu_report") -> tuple[pd.DataFrame, str, str]:
    """Profile :func:`~labhelpers.kernels.roofline.fma_per_element` here if Nsight Compute can; else the saved report.

    A thin user of :func:`labhelpers.measured.live_or_reference` (which chooses and labels the data).

    Returns:
        ``(report, label, note)``: the metrics table, where it was measured, and a sentence saying which it is
        (and, for the saved report, why nothing was profiled here).
    """

    reason = ncu_unavailable_reason()

    def measure() -> pd.DataFrame:
        if reason:
            raise ProfilerUnavailable(reason)
        return profile_fma_per_element()

    try:
        data = live_or_reference(measure, reference_name, dtypes={"value": float},
                                 fallback_on=(ProfilerUnavailable,))
    except FileNotFoundError:
        empty = pd.DataFrame(columns=["kernel", "metric", "description", "unit", "value"])
        why = reason or "it was not asked to profile (LABHELPERS_LIVE=0)"
        return empty, "no report", f"Nsight Compute cannot run here: {why}.\nNo saved report is available either."
    if data.is_live:
        return data.table, data.label, f"Profiled just now on {data.gpu}."
    why = reason or data.note
    return data.table, data.label, f"Nsight Compute cannot run here: {why}.\nShowing the report saved on {data.gpu}."


def achieved_intensity(report: pd.DataFrame) -> float:
    """Flops over the DRAM bytes ncu counted: the intensity the kernel achieved against device memory.

    Flops are ``2 * FMA + add + multiply`` (FP32 thread instructions); NaN if a metric is missing.
    """
    v = dict(zip(report["metric"], report["value"]))
    get = lambda k: float(v.get(k, float("nan")))  # noqa: E731
    flops = (2 * get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")
             + get("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum")
             + get("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"))
    nbytes = get("dram__bytes_read.sum") + get("dram__bytes_write.sum")
    return flops / nbytes if nbytes else float("nan")


# ------------------------------------------------------------------------------------ compute-sanitizer

#: Where ``compute-sanitizer`` usually is when it is not on the PATH.
SANITIZER_FALLBACK_PATHS = ("/usr/local/cuda/bin/compute-sanitizer",)
#: The tools of compute-sanitizer (``--tool``).
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
#: Options that keep a report short: at most a few errors, no host backtrace (Python's is hundreds of frames),
#: and no CUDA API errors: numba-cuda probes the driver (``cuGetProcAddress_v2`` for entry points it lacks),
#: each failed probe is reported as ``Program hit CUDA_ERROR_INVALID_VALUE``, and dozens of those used up the
#: print limit before the kernel's first bad access. Errors in the kernels themselves are still all reported.
SANITIZER_OPTIONS = ("--print-limit", "4", "--show-backtrace", "no", "--report-api-errors", "no")


def sanitizer_path() -> str | None:
    """The ``compute-sanitizer`` executable: on the PATH, or in the usual CUDA location; None if absent."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for candidate in SANITIZER_FALLBACK_PATHS:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def sanitizer_unavailable_reason() -> str | None:
    """Why compute-sanitizer cannot run here (no GPU, not installed), or None."""
    if backend.is_simulator():
        return ("there is no GPU here (kernels run in the CPU simulator, which checks every index and finds "
                "shared-memory races itself: an IndexError, lh.check_races)")
    if sanitizer_path() is None:
        return ("compute-sanitizer is not installed here: it comes with the CUDA toolkit "
                "(/usr/local/cuda/bin/compute-sanitizer)")
    return None


def sanitizer_command(tool: str, script: str | Path, *, options: tuple[str, ...] = SANITIZER_OPTIONS,
                      sanitizer: str = "compute-sanitizer") -> list[str]:
    """The command line that runs ``python script`` under ``compute-sanitizer --tool <tool>``."""
    if tool not in SANITIZER_TOOLS:
        raise ValueError(f"tool must be one of {', '.join(SANITIZER_TOOLS)}, got {tool!r}")
    extra = ("--racecheck-report", "analysis") if tool == "racecheck" else ()
    return [sanitizer, "--tool", tool, *options, *extra, sys.executable, str(script)]


_ABS_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[^\s:/()\[\]]+)+/([^\s:/()\[\]]+)")


def _short_paths(line: str) -> str:
    """Absolute paths in ``line`` reduced to their file names (no machine's directories in a report)."""
    return _ABS_PATH.sub(r"\1", line)


def shorten_sanitizer_line(line: str) -> str:
    """Numba's mangled kernel names (``pkg::module::kernel[abi:...](Array<...>, ...)+0x250``) shortened to
    ``kernel(...)+0x250``; absolute paths to file names."""
    line = re.sub(r"(?:\w+::)+(\w+)\[abi:[^\]]*\]\(.*?\)(\+0x[0-9a-f]+)", r"\1(...)\2", line)
    line = re.sub(r"(?:\w+::)+(\w+)\[abi:[^\]]*\]\(.*\)", r"\1(...)", line)
    return _short_paths(line)


def run_sanitizer(tool: str, code: str, *, timeout: int = 240) -> tuple[int, list[str]]:
    """Run Python ``code`` in a new process under ``compute-sanitizer --tool <tool>``.

    Returns:
        ``(returncode, lines)``: what the sanitizer and the program printed (stdout then stderr), empty lines and
        Numba's performance warnings dropped, absolute paths shortened to file names.

    Raises:
        ProfilerUnavailable: no GPU, no compute-sanitizer, or it did not finish within ``timeout`` seconds.
    """
    reason = sanitizer_unavailable_reason()
    if reason:
        raise ProfilerUnavailable(f"Cannot run compute-sanitizer: {reason}.")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "sanitizer_target.py"
        script.write_text(textwrap.dedent(code))
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        cmd = sanitizer_command(tool, script, sanitizer=sanitizer_path())
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise ProfilerUnavailable(f"compute-sanitizer did not finish within {timeout} s.") from None
    text = (proc.stdout + "\n" + proc.stderr).splitlines()
    skip = ("NumbaPerformanceWarning", "warn(errors.")
    return proc.returncode, [_short_paths(ln.rstrip()) for ln in text if ln.strip() and not any(k in ln for k in skip)]


#: The script :func:`sanitizer_report` runs: one launch of a kernel of
#: :data:`labhelpers.kernels.roofline.SANITIZER_TARGETS`; a failed launch is reported in one line.
SANITIZER_SCRIPT = """
import labhelpers
from labhelpers.kernels import roofline
try:
    roofline.sanitizer_target({which!r})
    print({which!r}, "ran")
except Exception as exc:
    print({which!r}, "failed:", type(exc).__name__, str(exc).splitlines()[0][:160] if str(exc) else "")
"""


def sanitizer_report(which: str, *, timeout: int = 240) -> pd.DataFrame:
    """Run one kernel of :data:`~labhelpers.kernels.roofline.SANITIZER_TARGETS` under its sanitizer tool.

    Returns:
        One row per line printed: ``tool``, ``kernel``, ``line_no``, ``line``, ``returncode``.
    """
    if which not in SANITIZER_TARGETS:
        raise ValueError(f"which must be one of {sorted(SANITIZER_TARGETS)}, got {which!r}")
    tool = SANITIZER_TARGETS[which]
    code, lines = run_sanitizer(tool, SANITIZER_SCRIPT.format(which=which), timeout=timeout)
    return pd.DataFrame([{"tool": tool, "kernel": which, "line_no": k, "line": line, "returncode": code}
                         for k, line in enumerate(lines[:80])], columns=SANITIZER_COLUMNS)


#: Columns of :func:`sanitizer_report` (and of reference data ``ch07_sanitizer``).
SANITIZER_COLUMNS = ["tool", "kernel", "line_no", "line", "returncode"]


# ---------------------------------------------------------------------------------------------- NVTX

_nvtx_warned = False


def nvtx_module():
    """The ``nvtx`` package if it is installed, else None."""
    try:
        import nvtx  # optional: pip install nvtx
    except ImportError:
        return None
    return nvtx


def nvtx_available() -> bool:
    """True if NVTX ranges will be recorded (the ``nvtx`` package is installed)."""
    return nvtx_module() is not None


@contextlib.contextmanager
def nvtx_range(name: str, color: str = "blue"):
    """Mark the code inside ``with nvtx_range("name"):`` as a named range for Nsight Systems.

    Without the ``nvtx`` package the code runs unmarked, and the first call prints how to get it.
    """
    mod = nvtx_module()
    if mod is None:
        global _nvtx_warned
        if not _nvtx_warned:
            print(f"NVTX: the optional `nvtx` package is not installed, so the range {name!r} is not marked "
                  "(the code inside runs as usual). `pip install nvtx` to see ranges in Nsight Systems.")
            _nvtx_warned = True
        yield
        return
    with mod.annotate(name, color=color):
        yield
