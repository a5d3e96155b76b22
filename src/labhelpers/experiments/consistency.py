"""Chapter "Memory consistency and coherence": the measurements behind its figures and the bench.

* :func:`counter_runs`: the racy counter (and the correct ones) run many times: how many updates get lost;
* :func:`atomic_throughput`: increments per second with one contended address, one per warp, one
  per thread, and the aggregated and locked counters;
* :func:`last_block_table` / :func:`last_block_failures`: the single-pass sum against ``cupy.sum``,
  and how often the version without fences returns a wrong sum;
* :func:`litmus_campaign`: outcome histograms of the litmus tests, many instances per launch, and
  :func:`litmus_single_rate`, the rate with one instance per launch;
* :func:`racecheck_report`: ``compute-sanitizer --tool racecheck`` on the racy shift kernel;
* :func:`wait_loop_table`: the PTX loop of a spin on a plain load and on an atomic.

``bench/consistency.py`` stores their tables as the reference data ``ch13_*``. The kernels are
in :mod:`labhelpers.kernels.consistency`, the litmus model in :mod:`labhelpers.models.consistency`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from typing import Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..errors import GPUOnlyError
from ..kernels import consistency as k
from ..launch import blocks_for, tiles_for, warps_for
from ..models import consistency as model
from ..roofline.measure import time_copy
from ..timing import benchmark
from ..patching import patched
from ..kernels.portability import ToolMissing
from ..refdata import load_reference

#: Columns of :func:`counter_runs`.
COUNTER_COLUMNS = ("variant", "run", "n", "count", "lost")


def counter_runs(n: int = 2**20, runs: int = 50, threads: int = 256,
                 variants: Sequence[str] = ("racy", "atomic", "block_aggregated", "warp_aggregated")) -> pd.DataFrame:
    """Run every counter of ``variants`` ``runs`` times (the racy one) or 3 times (the others) on ``n`` threads.

    GPU-only variants are skipped under the simulator.
    """
    rows = []
    for variant in variants:
        if variant in k.GPU_ONLY_COUNTERS and backend.is_simulator():
            continue
        for run in range(runs if variant == "racy" else min(runs, 3)):
            count = k.run_counter(variant, n, threads)
            rows.append({"variant": variant, "run": run, "n": n, "count": count, "lost": n - count})
    return pd.DataFrame(rows, columns=list(COUNTER_COLUMNS))


def _zeroed(size: int):
    return cuda.to_device(np.zeros(size, dtype=np.int32))


def atomic_throughput(n: int = 2**24, threads: int = 256, lock_n: int = 2**14, repeat: int = 10) -> pd.DataFrame:
    """Increments per second: atomics on 1, n/32 and n addresses; aggregated counters; a spin lock.

    Columns: ``kind``, ``addresses``, ``increments`` (per launch), ``atomics`` (global atomic
    instructions issued per launch), ``median_ms``, ``increments_per_s``, ``atomics_per_s``.
    Every table entry is checked for the exact count first. GPU only (timings).
    """
    backend.require_gpu("atomic_throughput")
    rows = []
    blocks = blocks_for(n, threads)
    for kind, group in (("one address", n), ("one address per warp", 32), ("one address per thread", 1)):
        got = k.run_atomic_grouped(n, group, 1, threads)
        assert np.array_equal(got, k.grouped_counts_reference(n, 1, group)), kind
        counts = _zeroed(tiles_for(n, group))
        launch = k.atomic_add_grouped[blocks, threads]
        t = benchmark(lambda: launch(counts, n, 1, group), repeat=repeat, label=kind)
        rows.append({"kind": kind, "addresses": tiles_for(n, group), "increments": n, "atomics": n,
                     "median_ms": t.median_ms})
    for variant, atomics in (("atomic", n), ("warp_aggregated", warps_for(n)),
                             ("block_aggregated", blocks)):
        assert k.run_counter(variant, n, threads) == n, variant
        counter = _zeroed(1)
        launch = k.COUNTERS[variant][blocks, threads]
        t = benchmark(lambda: launch(counter, n), repeat=repeat, label=variant)
        name = {"atomic": "counter: atomic per thread", "warp_aggregated": "counter: warp-aggregated",
                "block_aggregated": "counter: block-aggregated"}[variant]
        rows.append({"kind": name, "addresses": 1, "increments": n, "atomics": atomics, "median_ms": t.median_ms})
    assert k.run_count_locked(lock_n, threads) == lock_n
    counter, mutex = _zeroed(1), _zeroed(1)
    launch = k.count_locked[blocks_for(lock_n, threads), threads]
    t = benchmark(lambda: launch(counter, mutex, lock_n), repeat=max(3, repeat // 3), label="lock")
    rows.append({"kind": "counter: spin lock per thread", "addresses": 1, "increments": lock_n,
                 "atomics": 2 * lock_n, "median_ms": t.median_ms})
    table = pd.DataFrame(rows)
    table["increments_per_s"] = table["increments"] / (table["median_ms"] * 1e-3)
    table["atomics_per_s"] = table["atomics"] / (table["median_ms"] * 1e-3)
    return table


def last_block_table(sizes: Sequence[int] = (2**24, 2**26), repeat: int = 20, number: int = 10) -> pd.DataFrame:
    """GB/s of the last-block sum (with fences), ``cupy.sum`` and a device copy, checked against float64 sums.

    Columns: ``n``, ``what``, ``median_ms``, ``gbps`` (bytes read / time; the copy counts read + write),
    ``result``, ``rel_error``. GPU only.
    """
    backend.require_gpu("last_block_table")
    import cupy as cp  # optional: the GPU extra

    rows = []
    for n in sizes:
        x = cp.random.default_rng(1).random(n, dtype=cp.float32)
        exact = float(cp.sum(x, dtype=cp.float64))
        summer = k.LastBlockSum(x)
        value = float(summer())
        t = benchmark(summer.launch, nbytes=4 * n, repeat=repeat, number=number, label="last block")
        rows.append({"n": n, "what": "last-block sum (threadfence + ticket)", "median_ms": t.median_ms,
                     "gbps": t.gbps, "result": value, "rel_error": abs(value - exact) / exact,
                     "blocks": summer.blocks})
        cub = benchmark(lambda: cp.sum(x), nbytes=4 * n, repeat=repeat, number=number, label="cupy.sum")
        value = float(cp.sum(x))
        rows.append({"n": n, "what": "cupy.sum (CUB)", "median_ms": cub.median_ms, "gbps": cub.gbps,
                     "result": value, "rel_error": abs(value - exact) / exact, "blocks": float("nan")})
        cp_copy = time_copy(x, repeat=repeat, number=number)  # the one copy measurement: bytes read + written
        rows.append({"n": n, "what": "device copy (read + write)", "median_ms": cp_copy.median_ms,
                     "gbps": cp_copy.gbps, "result": float("nan"), "rel_error": float("nan"),
                     "blocks": float("nan")})
        del x
    table = pd.DataFrame(rows)
    bad = table[table["rel_error"] > 1e-4]
    if len(bad):
        raise AssertionError(f"wrong sums:\n{bad}")
    return table


def last_block_failures(n: int = 2**22, launches: int = 2000, fences: Sequence[bool] = (True, False)) -> pd.DataFrame:
    """Run the last-block sum ``launches`` times with and without fences; count the wrong sums.

    Before every launch the partial sums are poisoned with NaN, so a last block that reads a
    partial sum before it is visible returns NaN or an old value. The input is small integers
    (every order of addition gives the exact sum), so any other difference is a wrong read.
    Columns: ``fence``, ``n``, ``blocks``, ``launches``, ``wrong``, ``nan``.
    """
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, size=n).astype(np.float32)
    exact = np.float32(np.sum(x, dtype=np.float64))
    x_d = cuda.to_device(x)
    rows = []
    for fence in fences:
        summer = k.LastBlockSum(x_d, fence=fence)
        results = []
        for _ in range(launches):
            summer.poison()
            summer.launch()
            results.append(summer.out.copy_to_host()[0])
        got = np.array(results, dtype=np.float32)
        rows.append({"fence": bool(fence), "n": n, "blocks": summer.blocks, "launches": launches,
                     "wrong": int(np.sum(got != exact)), "nan": int(np.sum(np.isnan(got)))})
    return pd.DataFrame(rows)


#: The litmus configurations of the chapter: (test, fence, access, intra_block).
LITMUS_CONFIGS: tuple[tuple[str, str, str, bool], ...] = (
    ("MP", "none", "plain", False), ("MP", "device", "plain", False), ("MP", "block", "plain", False),
    ("MP", "none", "plain", True), ("MP", "block", "plain", True),
    ("MP", "none", "atomic", False), ("MP", "device", "atomic", False),
    ("SB", "none", "plain", False), ("SB", "device", "plain", False),
    ("SB", "none", "atomic", False), ("SB", "device", "atomic", False),
    ("LB", "none", "plain", False), ("LB", "device", "plain", False),
    ("LB", "none", "atomic", False), ("LB", "device", "atomic", False),
    ("CoRR", "none", "plain", False), ("CoRR", "none", "atomic", False),
    ("MP-reversed", "none", "plain", False), ("MP-reversed", "device", "plain", False),
)
#: Columns of :func:`litmus_campaign`.
LITMUS_COLUMNS = ("test", "fence", "access", "pairing", "launches", "instances", "seconds", "instances_per_s",
                  "r00", "r01", "r10", "r11", "other", "target", "weak", "sc_allows_target",
                  "ptx_allows_target")


def litmus_campaign(configs: Sequence[tuple[str, str, str, bool]] = LITMUS_CONFIGS, launches: int = 100,
                    **run_options) -> pd.DataFrame:
    """Run every configuration ``launches`` times; one row of outcome counts per configuration.

    ``run_options`` go to :class:`~labhelpers.kernels.consistency.LitmusRun` (``test_blocks``,
    ``threads``, ``stress_blocks``...). ``weak`` is the count of the test's target outcome;
    ``sc_allows_target`` and ``ptx_allows_target`` come from the model (with fences: a fence
    at every position, of the scope the row names; a block-scope fence between blocks does not
    order anything for the other block, so PTX allows the target there).
    """
    rows = []
    for test, fence, access, intra in configs:
        run = k.LitmusRun(test, fence=fence, access=access, intra_block=intra, **run_options)
        run.run(1)  # compiles the kernels; not counted
        run.counts[:] = 0
        run.launches = 0
        cuda.synchronize()
        t0 = time.perf_counter()
        run.run(launches)
        cuda.synchronize()
        seconds = time.perf_counter() - t0
        c = run.counts
        fenced = fence == "device" or fence == "system" or (fence == "block" and intra)
        ptx = model.PTX_ALLOWS[test][1 if fenced else 0]
        rows.append({"test": test, "fence": fence, "access": access,
                     "pairing": "same block" if intra else "different blocks", "launches": launches,
                     "instances": run.instances, "seconds": seconds, "instances_per_s": run.instances / seconds,
                     "r00": int(c[0]), "r01": int(c[1]), "r10": int(c[2]), "r11": int(c[3]), "other": int(c[4]),
                     "target": "".join(map(str, run.target)), "weak": run.weak,
                     "sc_allows_target": model.is_sc(model.get_test(test), run.target), "ptx_allows_target": ptx})
    return pd.DataFrame(rows, columns=list(LITMUS_COLUMNS))


def litmus_single_rate(test: str = "MP", launches: int = 200) -> pd.DataFrame:
    """Instances per second with the smallest launch (2 blocks of 1 thread: 2 instances, no stress)."""
    run = k.LitmusRun(test, test_blocks=2, threads=1, stress_blocks=0, spin=0)
    run.run(1)
    cuda.synchronize()
    t0 = time.perf_counter()
    run.run(launches)
    cuda.synchronize()
    seconds = time.perf_counter() - t0
    return pd.DataFrame([{"test": test, "launches": launches, "instances": run.instances - 2, "seconds": seconds,
                          "instances_per_s": (run.instances - 2) / seconds}])


#: The script compute-sanitizer runs (a separate Python process): the racy shift, then the fixed one.
RACECHECK_SCRIPT = """
import numpy as np
import labhelpers as lh
from labhelpers.kernels import consistency as k
x = np.arange(1024, dtype=np.float32)
k.run_shift(x, racy=True, threads=256)
k.run_shift(x, racy=False, threads=256)
print("kernels ran")
"""


def racecheck_report(timeout: int = 150) -> pd.DataFrame:
    """Run ``compute-sanitizer --tool racecheck`` on :data:`RACECHECK_SCRIPT`; one row per output line.

    Columns: ``line`` (number), ``text``. GPU only (needs ``compute-sanitizer`` on the PATH or in
    ``/usr/local/cuda/bin``).
    """
    backend.require_gpu("racecheck_report", because="runs compute-sanitizer, which checks kernels running on a GPU")
    exe = None
    for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/local/cuda/bin"]:
        path = os.path.join(folder, "compute-sanitizer")
        if os.path.exists(path):
            exe = path
            break
    if exe is None:
        raise GPUOnlyError("compute-sanitizer is not installed here (it comes with the CUDA toolkit)")
    env = dict(os.environ, LABHELPERS_BACKEND="gpu")
    cmd = [exe, "--tool", "racecheck", "--racecheck-report", "hazard", sys.executable, "-c", RACECHECK_SCRIPT]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    text = (proc.stdout + proc.stderr).replace(sys.executable, "python3")
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return pd.DataFrame({"line": range(1, len(lines) + 1), "text": lines})


def racecheck_summary(table: pd.DataFrame) -> dict:
    """The counts compute-sanitizer reports: hazards by kind, and its final ``RACECHECK SUMMARY`` line."""
    text = "\n".join(table["text"])
    kinds = re.findall(r"\b(RAW|WAR|WAW) hazard", text)
    summary = [line for line in table["text"] if "RACECHECK SUMMARY" in line]
    return {"hazard lines": len(kinds), "kinds": sorted(set(kinds)),
            "summary": summary[-1].strip() if summary else ""}


def wait_loop_table() -> pd.DataFrame:
    """The PTX of the two spin loops (:func:`~labhelpers.kernels.consistency.wait_loop_ptx`), one row per line."""
    rows = []
    for which in ("plain", "atomic"):
        ptx = k.wait_loop_ptx(which)
        body = ptx[ptx.index(".entry"):] if ".entry" in ptx else ptx
        for number, line in enumerate(body.splitlines(), 1):
            if line.strip():
                rows.append({"loop": which, "line": number, "text": line.rstrip()})
    return pd.DataFrame(rows)


def loop_instructions(table: pd.DataFrame, which: str) -> list[str]:
    """The instructions between the loop's label and its backward branch, from :func:`wait_loop_table`."""
    lines = [t.strip() for t in table[table["loop"] == which]["text"]]
    labels = [i for i, line in enumerate(lines) if re.match(r"^\$?\w+:$", line) or line.endswith(":")]
    for i in labels:
        label = lines[i].rstrip(":")
        for j in range(i + 1, len(lines)):
            if lines[j].startswith("@") or lines[j].startswith("bra"):
                if label in lines[j]:
                    return lines[i:j + 1]
    return []


__all__ = [
    "LITMUS_COLUMNS", "LITMUS_CONFIGS", "RACECHECK_SCRIPT", "atomic_throughput", "counter_runs", "last_block_failures",
    "last_block_table", "litmus_campaign", "litmus_single_rate", "loop_instructions", "racecheck_report",
    "racecheck_summary", "wait_loop_table",
]


# ============================================================================================ the compiler's order

#: The target of :func:`litmus_ptx`: PTX for compute capability 9.0 (the reference GPU's), from NVVM, no GPU needed.
PTX_CC = (9, 0)
#: Program order of each litmus test's accesses to the test locations, ``F`` where the fence goes. ``x+0``
#: is CoRR's second load of ``x`` through an address plus ``params[P_ZERO]``. Thread 0 and thread 1 of
#: an instance: the accesses before and after the second ``F`` (MP, SB, LB), or the first one and the
#: other two (CoRR).
PROGRAM_ORDER: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "MP": (("st x", "F", "st y"), ("ld y", "F", "ld x")),
    "MP-reversed": (("st x", "F", "st y"), ("ld x", "F", "ld y")),
    "SB": (("st x", "F", "ld y"), ("st y", "F", "ld x")),
    "LB": (("ld x", "F", "st y"), ("ld y", "F", "st x")),
    "CoRR": (("st x",), ("ld x", "F", "ld x+0")),
}
#: How Numba passes a one-dimensional array to a kernel: 7 parameters (meminfo, parent, nitems, itemsize,
#: data, shape, stride); the data pointer is the fifth.
_FIELDS_PER_ARRAY, _DATA_FIELD = 7, 4
_LITMUS_ARRAYS = ("mem", "results", "shuffle", "params", "barrier", "scratch")
_PARAM_MARKERS = {4 * k.P_PERM_LOC: "y", 4 * k.P_ZERO: "zero"}  # byte offsets into params: what a load there marks
_INSTRUCTION = re.compile(r"^(?:@!?%p\d+\s+)?([a-z][\w.]*)\s*(.*?);?$")
_ADDRESS = re.compile(r"\[(%\w+)(?:\+(-?\d+))?\]")
_REGISTER = re.compile(r"%\w+")

_PTX_SCRIPT = """
import json, sys
from labhelpers.experiments import consistency
configs = [tuple(c) for c in json.loads(sys.argv[1])]
print("RESULT" + json.dumps(consistency.litmus_ptx_here(configs, tuple(json.loads(sys.argv[2])))))
"""


def _compiler_present() -> bool:
    """Whether NVVM is here: on a GPU numba-cuda compiles every kernel with it (from the toolkit or the wheels);
    under the simulator only the ``nvidia-cuda-nvcc`` wheel brings it."""
    return not backend.is_simulator() or importlib.util.find_spec("nvidia.cuda_nvcc") is not None


def litmus_ptx_here(configs: Sequence[tuple[str, str, str]], cc: tuple[int, int] = PTX_CC) -> list[str]:
    """The PTX of each ``(test, fence, access)`` litmus kernel, compiled in this process (not the simulator).

    Device functions ask the current device for its compute capability; with no GPU it is stood in for by
    ``cc`` while compiling (as ``tools/compile_check`` does).
    """
    backend.require_gpu("litmus_ptx_here", because="compiles with the CUDA compiler, which the simulator does not load",
                        instead="Call litmus_ptx, which starts a compiling process.")
    from numba import types  # numba-cuda's compiler, absent from the simulator: only where PTX is compiled
    from numba.cuda import compiler, dispatcher  # numba-cuda's compiler, absent from the simulator


    class _Target:
        compute_capability = tuple(cc)

    array = types.int32[::1]
    out = []
    for test, fence, access in configs:
        kernel = k.make_litmus_kernel(test, fence, access)
        with patched((dispatcher, "get_current_device", _Target), (compiler, "get_current_device", _Target)):
            ptx, _ = cuda.compile_ptx(kernel.py_func, types.void(*[array] * 6), cc=tuple(cc))
        out.append(ptx)
    return out


def litmus_ptx(configs: Sequence[tuple[str, str, str]], cc: tuple[int, int] = PTX_CC, *,
               timeout: int = 300) -> list[str]:
    """The PTX of each ``(test, fence, access)`` litmus kernel for compute capability ``cc``, on any machine.

    Compiling needs NVVM from the ``nvidia-cuda-nvcc-cu12`` wheel (installed with numba-cuda's ``cu12``
    extra), not a GPU. Under the simulator the compilation runs in a separate process with
    ``LABHELPERS_BACKEND=compile`` (this process's numba-cuda is the simulator's).

    Raises:
        ToolMissing: the CUDA compiler wheels are not installed.
    """

    configs = [tuple(c) for c in configs]
    for test, fence, access in configs:
        k.make_litmus_kernel(test, fence, access)  # checks the names (and costs nothing under the simulator)
    if not _compiler_present():
        raise ToolMissing("compiling to PTX needs the CUDA compiler wheels: pip install nvidia-cuda-nvcc-cu12 "
                          "nvidia-cuda-nvrtc-cu12 (numba-cuda's cu12 extra installs them)")
    if not backend.is_simulator():
        return litmus_ptx_here(configs, cc)
    env = dict(os.environ, LABHELPERS_BACKEND="compile")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", _PTX_SCRIPT, json.dumps(configs), json.dumps(list(cc))],
                          capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    if not lines:
        raise RuntimeError(f"compiling the litmus kernels printed no result (exit {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout)[-800:]}")
    return json.loads(lines[-1][len("RESULT"):])


def _operands(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return parts + [current.strip()] if current.strip() else parts


def _access_kind(opcode: str, operands: list[str]) -> str | None:
    """``st`` or ``ld`` for an access to a test location: plain, or the atomics Numba's litmus code uses."""
    if opcode.startswith("st."):
        return "st"
    if opcode.startswith("ld."):
        return "ld"
    if opcode.startswith("atom.") and ".exch" in opcode:
        return "st"
    if opcode.startswith("atom.") and ".or" in opcode:
        return "ld"
    return None


def ptx_accesses(ptx: str) -> list[dict]:
    """The accesses to the litmus test locations and the fences, in the order the PTX lists them.

    Each entry: ``what`` (``st x``, ``ld y``, ``ld x+0``, or ``F`` for a fence) and ``ptx`` (the instruction,
    without its registers). Which array an address points into is followed through the registers from the
    kernel's parameters (``ld.param`` of an array's data pointer); which location it is, through the value
    loaded from ``params[P_PERM_LOC]`` (only ``y``'s address uses it) and ``params[P_ZERO]`` (CoRR's
    second load). The test itself is straight-line code after the line-up barrier, so the listing order is
    the order NVVM emitted; ``ptxas`` still schedules the machine code after it (see the chapter).
    """
    body = ptx[ptx.index(".entry"):] if ".entry" in ptx else ptx
    taint: dict[str, frozenset] = {}
    pointer: dict[str, tuple[str, int]] = {}  # register -> (array, constant byte offset)
    out = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".", "$", "{", "}")) or line.endswith(":"):
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        opcode, rest = m.groups()
        ops = _operands(rest)
        if opcode.startswith(("membar", "fence")):
            out.append({"what": "F", "ptx": opcode})
            continue
        if opcode.startswith("ld.param"):
            param = re.search(r"_param_(\d+)", rest)
            index = int(param.group(1)) if param else -1
            array, field = divmod(index, _FIELDS_PER_ARRAY)
            if field == _DATA_FIELD and array < len(_LITMUS_ARRAYS):
                taint[ops[0]] = frozenset({_LITMUS_ARRAYS[array]})
                pointer[ops[0]] = (_LITMUS_ARRAYS[array], 0)
            else:
                taint[ops[0]] = frozenset()
            continue
        address = _ADDRESS.search(rest)
        kind = _access_kind(opcode, ops)
        if address and kind is not None:
            reg, offset = address.group(1), int(address.group(2) or 0)
            where = taint.get(reg, frozenset())
            if "mem" in where:
                name = "y" if "y" in where else ("x+0" if "zero" in where else "x")
                out.append({"what": f"{kind} {name}", "ptx": opcode})
            if not opcode.startswith("st."):  # a loaded value: marked only if it is a parameter the order needs
                mark = None
                if reg in pointer and pointer[reg][0] == "params":
                    mark = _PARAM_MARKERS.get(pointer[reg][1] + offset)
                taint[ops[0]] = frozenset({mark}) if mark else frozenset()
            continue
        if not ops or not ops[0].startswith("%"):
            continue
        sources = [r for o in ops[1:] for r in _REGISTER.findall(o)]
        taint[ops[0]] = frozenset().union(*(taint.get(r, frozenset()) for r in sources))
        pointer.pop(ops[0], None)
        based = [r for r in sources if r in pointer]
        if len(based) == 1 and opcode.split(".")[0] in ("mov", "cvta", "add"):
            constant = [o for o in ops[1:] if re.fullmatch(r"-?\d+", o)]
            if opcode.startswith(("mov", "cvta")) or constant:
                array, off = pointer[based[0]]
                pointer[ops[0]] = (array, off + (int(constant[0]) if constant else 0))
    return out


def order_kept(test: str, fence: str, accesses: list[dict]) -> dict:
    """Whether the PTX keeps each thread's accesses in program order (and its fence between them).

    Returns ``{"thread 0": bool, "thread 1": bool, "fences": int, "order": "st x, F, st y, ..."}``.
    """
    k._choice(test, "litmus test", PROGRAM_ORDER)
    k._choice(fence, "fence", k.FENCES)
    sequence = [a["what"] for a in accesses]
    result = {"order": ", ".join(sequence), "fences": sequence.count("F")}
    for t, program in enumerate(PROGRAM_ORDER[test]):
        wanted = [w for w in program if w != "F" or fence != "none"]
        accesses_only = [w for w in wanted if w != "F"]
        if any(sequence.count(w) != 1 for w in accesses_only):
            result[f"thread {t}"] = False
            continue
        where = [sequence.index(w) for w in accesses_only]
        kept = where == sorted(where)
        if "F" in wanted and len(where) == 2:  # a fence between the two accesses
            kept = kept and "F" in sequence[where[0] + 1:where[1]]
        result[f"thread {t}"] = kept
    return result


#: ``weak_from`` of :func:`program_order_table` where the PTX kept program order and a weak outcome appeared.
WEAK_BELOW_PTX = "hardware or ptxas"


def program_order_table(table: pd.DataFrame | None = None, cc: tuple[int, int] = PTX_CC) -> pd.DataFrame:
    """For each configuration of a litmus table (default: the reference ``ch13_litmus``): did the compiler keep
    program order? One row per ``(test, fence, access)``, with the weak outcomes counted in the table.

    Columns: ``test``, ``fence``, ``access``, ``weak`` (sum over the table's pairings), ``ptx_order`` (the
    accesses as the PTX lists them), ``kept_thread0``, ``kept_thread1``, ``compiler_kept_order`` (both), and
    ``weak_from`` (``hardware or ptxas`` where a weak outcome appeared and the PTX kept program order: the
    reordering happened below the PTX, in the hardware or in ``ptxas``, which this table cannot tell apart
    (reading the SASS of the loaded kernel would); ``NVVM`` where the PTX itself changed the order;
    ``none seen``; or ``interleaving (SC allows it)`` for the mutant whose "weak" outcome sequential
    consistency allows).
    """
    if table is None:
        table = load_reference("ch13_litmus").table
    weak = table.groupby(["test", "fence", "access"], sort=False)["weak"].sum()
    sc_allows = table.groupby(["test", "fence", "access"], sort=False)["sc_allows_target"].any() \
        if "sc_allows_target" in table else weak * False
    configs = list(weak.index)
    ptxs = litmus_ptx(configs, cc)
    rows = []
    for (test, fence, access), ptx in zip(configs, ptxs):
        found = order_kept(test, fence, ptx_accesses(ptx))
        kept = bool(found["thread 0"] and found["thread 1"])
        seen = int(weak[(test, fence, access)])
        rows.append({"test": test, "fence": fence, "access": access, "weak": seen, "ptx_order": found["order"],
                     "kept_thread0": bool(found["thread 0"]), "kept_thread1": bool(found["thread 1"]),
                     "compiler_kept_order": kept,
                     "weak_from": "none seen" if seen == 0 else "interleaving (SC allows it)"
                     if bool(sc_allows[(test, fence, access)]) else (WEAK_BELOW_PTX if kept else "NVVM")})
    return pd.DataFrame(rows)


def test_instructions(ptx: str) -> list[str]:
    """The litmus accesses and fences of one kernel's PTX, one line each: ``instruction  location``."""
    return [f"{a['ptx']:<24} {'fence' if a['what'] == 'F' else a['what']}" for a in ptx_accesses(ptx)]




# Spin loops on Numba's cache-hinted loads, compiled to PTX only (never launched: they may never return).
# They sit here, beside the compiler's-order tools that read them, and not in kernels/consistency.py,
# whose line numbers the chapter's stored reports quote.

def wait_ldcg(flag, out):
    """Spin on ``cuda.ldcg`` (``ld.global.cg``: served by L2, not this SM's L1). Compiled, never launched."""
    while cuda.ldcg(flag, 0) == 0:
        pass
    out[0] = 1


def wait_ldcv(flag, out):
    """Spin on ``cuda.ldcv`` (``ld.global.cv``: fetched again at every read). Compiled, never launched."""
    while cuda.ldcv(flag, 0) == 0:
        pass
    out[0] = 1


#: The spin loops of :func:`cache_hint_wait_table`, by the load they poll with.
CACHE_HINT_WAITS = {"ldcg": wait_ldcg, "ldcv": wait_ldcv}

_HINT_SCRIPT = """
import json, sys
from labhelpers.experiments import consistency
print("RESULT" + json.dumps(consistency.cache_hint_ptx_here(tuple(json.loads(sys.argv[1])))))
"""


def cache_hint_ptx_here(cc: tuple[int, int] = PTX_CC) -> dict[str, str]:
    """The PTX of each spin loop of :data:`CACHE_HINT_WAITS`, compiled in this process (not the simulator)."""
    backend.require_gpu("cache_hint_ptx_here", because="compiles with the CUDA compiler, which the simulator does not "
                        "load", instead="Call cache_hint_wait_table, which starts a compiling process.")
    from numba import types  # numba-cuda's compiler, absent from the simulator: only where PTX is compiled
    from numba.cuda import compiler, dispatcher  # numba-cuda's compiler, absent from the simulator

    class _Target:
        compute_capability = tuple(cc)

    sig = types.void(types.int32[::1], types.int32[::1])
    out = {}
    for name, fn in CACHE_HINT_WAITS.items():
        with patched((dispatcher, "get_current_device", _Target), (compiler, "get_current_device", _Target)):
            ptx, _ = cuda.compile_ptx(fn, sig, cc=tuple(cc))
        out[name] = ptx
    return out


def cache_hint_wait_table(cc: tuple[int, int] = PTX_CC, *, timeout: int = 300) -> pd.DataFrame:
    """The PTX of a spin on ``cuda.ldcg`` and on ``cuda.ldcv``, one row per line (as :func:`wait_loop_table`).

    numba-cuda emits these loads as inline assembly without side effects, so the compiler may load the flag
    once and spin on a register: :func:`load_and_loop` shows where the load ended up. No GPU needed (under
    the simulator a separate process compiles, as for :func:`litmus_ptx`).

    Raises:
        ToolMissing: the CUDA compiler wheels are not installed.
    """
    if not _compiler_present():
        raise ToolMissing("compiling to PTX needs the CUDA compiler wheels: pip install nvidia-cuda-nvcc-cu12 "
                          "nvidia-cuda-nvrtc-cu12 (numba-cuda's cu12 extra installs them)")
    if backend.is_simulator():
        env = dict(os.environ, LABHELPERS_BACKEND="compile")
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        proc = subprocess.run([sys.executable, "-c", _HINT_SCRIPT, json.dumps(list(cc))], capture_output=True,
                              text=True, timeout=timeout, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
        if not lines:
            raise RuntimeError(f"compiling the spin loops printed no result (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout)[-800:]}")
        ptxs = json.loads(lines[-1][len("RESULT"):])
    else:
        ptxs = cache_hint_ptx_here(cc)
    rows = []
    for which, ptx in ptxs.items():
        body = ptx[ptx.index(".entry"):] if ".entry" in ptx else ptx
        for number, line in enumerate(body.splitlines(), 1):
            if line.strip():
                rows.append({"loop": which, "line": number, "text": line.rstrip()})
    return pd.DataFrame(rows, columns=["loop", "line", "text"])


def load_and_loop(table: pd.DataFrame, which: str) -> list[str]:
    """The instructions from the first global load of the flag to the loop's backward branch.

    Where the loop holds a load, the load is inside it; where the compiler hoisted it, the load comes before
    the loop's label and the loop only tests a register.
    """
    lines = [t.strip() for t in table[table["loop"] == which]["text"] if not t.strip().startswith("//")]
    first = next((i for i, line in enumerate(lines) if line.startswith("ld.global")), None)
    loop = loop_instructions(table, which)
    if first is None or not loop:
        return []
    end = max(i for i, line in enumerate(lines) if line == loop[-1])
    return lines[first:end + 1]


def hoisted(table: pd.DataFrame, which: str) -> bool:
    """True where the spin loop ``which`` of :func:`cache_hint_wait_table` holds no load: it tests a register."""
    return not any(line.startswith("ld.") for line in loop_instructions(table, which))


__all__ += ["CACHE_HINT_WAITS", "PROGRAM_ORDER", "PTX_CC", "litmus_ptx", "litmus_ptx_here", "order_kept", "program_order_table",
            "ptx_accesses", "test_instructions",
            "WEAK_BELOW_PTX", "cache_hint_ptx_here", "cache_hint_wait_table", "hoisted", "load_and_loop",
            "wait_ldcg", "wait_ldcv"]


# ============================================================================================ the lock trick

LOCK_TRICK_COLUMNS = ("kernel", "runs", "wrong_runs", "worst_count", "count")


def lock_trick_table(n: int = 2**20, threads: int = 256, runs: int = 20) -> pd.DataFrame:
    """The lecture's ``lock_trick`` against a real lock, ``runs`` times each on ``n`` values. GPU only.

    ``count`` is the number of values, ``worst_count`` the smallest count a run returned (updates lost by
    the blocks whose thread 0 ran the "critical section" at once), ``wrong_runs`` how many runs returned a
    wrong ``(sum, count)``.
    """
    backend.require_gpu("lock_trick_table", because="needs blocks that run at the same time (the simulator "
                        "runs them one after the other, so the lock trick is always right there)")
    values = np.ones(n, dtype=np.int32)
    rows = []
    for name, run in (("lock_trick (syncthreads + thread 0)", k.run_pair_update_lock_trick),
                      ("global lock (cas + fences)", k.run_pair_update_locked)):
        got = [run(values, threads) for _ in range(runs)]
        rows.append({"kernel": name, "runs": runs, "wrong_runs": sum(g != (n, n) for g in got),
                     "worst_count": min(g[1] for g in got), "count": n})
    return pd.DataFrame(rows, columns=list(LOCK_TRICK_COLUMNS))


__all__ += ["LOCK_TRICK_COLUMNS", "lock_trick_table"]
