"""Chapter "n-body": the measurements behind the chapter's tables (reference data ``ch08_*``).

* :func:`throughput_sweep`: every kernel of the chapter's sequence (:func:`sequence`: :data:`LADDER`, the best
  tiled configuration and the stream-K kernel) for n = 2^12 .. 2^18, in G interactions/s and GFLOP/s (20 flops
  per interaction);
* :func:`math_traps`: the same tiled kernel with the four ways of writing the reciprocal square root;
* :func:`tuning_sweep`: the tiled kernel's tile size and bodies per thread at one size;
* :func:`cpu_rates`: the Numba float32 loop on every CPU thread and on one (the CPU's best, and its
  per-thread rate), then the NumPy float64 specification, on this machine's CPU; :func:`cpu_summary`;
* :func:`instruction_mix`: the instructions per interaction in each kernel's hot loop, from the PTX (and
  the SASS where ``nvdisasm`` is installed): which unit binds.

Everything here times real GPU work and raises :class:`~labhelpers.errors.GPUOnlyError` under the simulator,
except :func:`instruction_mix` of the PTX (Numba compiles PTX without a GPU only on a machine with the CUDA
toolkit: on a GPU).
"""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from typing import Iterable, Sequence

import numba
import numpy as np
import pandas as pd
from numba import cuda, types
from numba import float32 as f32

from .. import backend
from ..kernels import nbody as nb
from ..launch import blocks_for
from ..timing import Timing, benchmark, wall_time

#: The chapter's sizes: 2^12 to 2^18 bodies.
SIZES: tuple[int, ...] = tuple(2**k for k in range(12, 19))
#: The kernel sequence of the chapter, measured at every size (``name -> Config``).
LADDER: dict[str, nb.Config] = {
    "naive, unroll 1": nb.Config("naive", unroll=1),
    "naive, unroll 4": nb.Config("naive", unroll=4),
    "naive, unroll 16": nb.Config("naive", unroll=16),
    "naive SoA, unroll 1": nb.Config("naive", unroll=1, layout="soa"),
    "tiled 256, unroll 1": nb.Config("tiled", tile=256, unroll=1),
    "tiled 256, unroll 4": nb.Config("tiled", tile=256, unroll=4),
    "tiled 256, unroll 16": nb.Config("tiled", tile=256, unroll=16),
    "tiled SoA 256, unroll 4": nb.Config("tiled", tile=256, unroll=4, layout="soa"),
    "tiled 128, 2 bodies/thread": nb.Config("tiled", tile=128, unroll=4, bodies=2),
    "tiled 128, 4 bodies/thread": nb.Config("tiled", tile=128, unroll=4, bodies=4),
    "tiled 64, 8 bodies/thread": nb.Config("tiled", tile=64, unroll=4, bodies=8),
}
#: The last step of the sequence: the stream-K kernel (:data:`labhelpers.kernels.nbody.STREAMK`), by its label.
STREAMK_NAME = nb.STREAMK.label


def sequence(best: nb.Config = nb.BEST) -> dict[str, nb.Config]:
    """The chapter's whole sequence, ``name -> Config``: :data:`LADDER`, ``"best: <label>"`` (the tuning sweep's
    best tiled configuration, :data:`~labhelpers.kernels.nbody.BEST` by default), then :data:`STREAMK_NAME`."""
    return {**LADDER, f"best: {best.label}": best, STREAMK_NAME: nb.STREAMK}


#: The four ways of writing ``1 / sqrt(r2)``, in the tiled kernel (tile 256, unroll 4).
MATH_TRAPS: dict[str, nb.Config] = {mode: nb.Config("tiled", tile=256, unroll=4, math_mode=mode)
                                    for mode in nb.MATH_MODES}
#: Size at which the traps are timed.
TRAP_SIZE = 2**16
#: The tuning grid of the tiled kernel (unroll 4).
TUNING_TILES: tuple[int, ...] = (64, 128, 256, 512)
TUNING_BODIES: tuple[int, ...] = (1, 2, 4, 8)
#: Sizes of the NumPy float64 specification on the CPU (its rate hardly depends on n; 2^12 takes a second).
CPU_SIZES: tuple[int, ...] = (2**10, 2**11, 2**12)
#: Sizes of the Numba CPU loop: enough work per call that waking the threads does not count (2^14 bodies:
#: 2.7e8 interactions, tens of milliseconds on 16 cores).
NUMBA_CPU_SIZES: tuple[int, ...] = (2**12, 2**13, 2**14)


_REFERENCE = "The chapter shows the reference data measured on a GPU (labhelpers.load_reference('ch08_throughput'))."


def _repeats(n: int) -> int:
    return 10 if n <= 2**15 else (5 if n <= 2**17 else 3)


def time_config(config: nb.Config, n: int, *, repeat: int | None = None, check: bool = True,
                seed: int = 0) -> Timing:
    """Time one force evaluation of ``config`` on ``n`` random bodies (CUDA events), checked against NumPy first.

    The check compares the accelerations of 256 bodies with the float64 specification (all of them for
    small n) within :data:`~labhelpers.kernels.nbody.ACC_RTOL` (never bitwise: the stream-K kernel's atomic adds
    change the last bits from run to run): a timing of a wrong kernel would mean nothing.
    """
    backend.require_gpu("time_config", instead=_REFERENCE)

    pos = nb.random_bodies(n, np.random.default_rng(seed), layout=config.layout)
    pos_d = cuda.to_device(pos)
    acc_d = cuda.device_array((n, 3) if config.layout == "aos" else (3, n), dtype=np.float32)
    launch = config.launcher(n)  # stream-K: the kernel that zeroes acc first is timed with it
    eps2 = np.float32(nb.DEFAULT_EPS2)
    launch(pos_d, eps2, acc_d)
    if check:
        _check_sample(acc_d.copy_to_host(), pos, config, n)
    return benchmark(lambda: launch(pos_d, eps2, acc_d), flops=nb.flops(n),
                     nbytes=nb.bytes_moved(n, None if config.kind == "naive" else config.tile),
                     warmup=1, repeat=repeat or _repeats(n), label=config.label)


def _check_sample(acc: np.ndarray, pos: np.ndarray, config: nb.Config, n: int, sample: int = 256,
                  label: str | None = None) -> None:
    aos_pos = pos if config.layout == "aos" else nb.to_aos(pos)
    acc = acc if config.layout == "aos" else acc.T
    rows = np.arange(n) if n <= sample else np.linspace(0, n - 1, sample).astype(int)
    p64 = aos_pos.astype(np.float64)
    d = p64[None, :, :3] - p64[rows, None, :3]
    r2 = np.einsum("ijk,ijk->ij", d, d) + np.float64(np.float32(nb.DEFAULT_EPS2))
    w = p64[None, :, 3] * r2**-1.5
    ref = np.einsum("ij,ijk->ik", w, d)
    scale = np.sum(w * np.sqrt(r2 - np.float64(np.float32(nb.DEFAULT_EPS2))), axis=1)
    err = np.max(np.abs(acc[rows] - ref), axis=1) / scale
    if not np.all(np.isfinite(err)) or err.max() > nb.ACC_RTOL:
        raise AssertionError(f"{label or config.label} is wrong at n={n}: relative error {np.nanmax(err):.3g} "
                             f"(tolerance {nb.ACC_RTOL}): the timing would be meaningless")


def _row(name: str, config: nb.Config, n: int, timing: Timing) -> dict:
    seconds = timing.median_ms * 1e-3
    blocks, threads = config.launch(n)
    return {"kernel": name, "kind": config.kind, "layout": config.layout, "math_mode": config.math_mode,
            "tile": config.tile if config.kind != "naive" else None, "threads": threads, "blocks": blocks,
            "unroll": config.unroll, "bodies": config.bodies if config.kind != "naive" else 1, "n": n,
            "median_ms": timing.median_ms, "min_ms": timing.min_ms, "spread": timing.spread,
            "ginteractions": nb.interactions(n) / seconds / 1e9, "gflops": timing.gflops}


#: Sizes of :func:`alternatives_table`: the shuffle against the tiled kernel at a large n, and every kernel,
#: constant memory included, at the largest n whose bodies fit in constant memory.
ALTERNATIVE_SIZES: tuple[int, ...] = (nb.CONST_BODIES, 2**16, 2**18)


def alternatives_table(sizes: Sequence[int] = ALTERNATIVE_SIZES, *, threads: int = 256) -> pd.DataFrame:
    """The shared tile against its alternatives: warp shuffles and constant memory (AoS, rsqrt). GPU only.

    Kernels: ``tiled 256, unroll 4`` (the chapter's shared tile), ``naive, unroll 4``, ``shuffle``
    (:func:`~labhelpers.kernels.nbody.nbody_shuffle`) at every size, and ``constant memory``
    (:func:`~labhelpers.kernels.nbody.make_constant`, every body a source) only where ``n`` fits in it.
    Each result is checked against float64 NumPy on a sample of bodies before it is timed (CUDA events).
    """
    backend.require_gpu("alternatives_table", instead=_REFERENCE)

    eps2 = np.float32(nb.DEFAULT_EPS2)
    rows = []
    for n in sizes:
        pos = nb.random_bodies(n, np.random.default_rng(0))
        pos_d = cuda.to_device(pos)
        acc_d = cuda.device_array((n, 3), dtype=np.float32)
        kernels = {"tiled 256, unroll 4": (nb.make_tiled(256, 4), blocks_for(n, 256), 256),
                   "naive, unroll 4": (nb.make_naive(4), blocks_for(n, threads), threads),
                   "shuffle": (nb.nbody_shuffle, blocks_for(n, threads), threads)}
        if n <= nb.CONST_BODIES:
            kernels["constant memory"] = (nb.make_constant(pos), blocks_for(n, threads), threads)
        for name, (kernel, blocks, tpb) in kernels.items():
            kernel[blocks, tpb](pos_d, eps2, acc_d)
            _check_sample(acc_d.copy_to_host(), pos, nb.Config("naive"), n, label=name)
            t = benchmark(lambda: kernel[blocks, tpb](pos_d, eps2, acc_d), flops=nb.flops(n), warmup=1,
                          repeat=_repeats(n), label=f"{name}, n={n}")
            rows.append({"kernel": name, "n": n, "threads": tpb, "median_ms": t.median_ms, "min_ms": t.min_ms,
                         "spread": t.spread, "ginteractions": nb.interactions(n) / (t.median_ms * 1e-3) / 1e9,
                         "gflops": t.gflops})
        del pos_d, acc_d
    return pd.DataFrame(rows)


def throughput_sweep(sizes: Sequence[int] = SIZES, kernels: dict[str, nb.Config] | None = None, *,
                     progress: bool = False) -> pd.DataFrame:
    """G interactions/s and GFLOP/s of every kernel of :func:`sequence` at every size (reference ``ch08_throughput``)."""
    backend.require_gpu("throughput_sweep", instead=_REFERENCE)
    rows = []
    for name, config in (kernels or sequence()).items():
        for n in sizes:
            rows.append(_row(name, config, n, time_config(config, n)))
            if progress:
                print(f"{name:32s} n=2^{int(np.log2(n))}: {rows[-1]['ginteractions']:9.1f} G interactions/s",
                      flush=True)
    return pd.DataFrame(rows)


def math_traps(n: int = TRAP_SIZE) -> pd.DataFrame:
    """The tiled kernel with each way of writing the reciprocal square root (reference ``ch08_math_traps``)."""
    backend.require_gpu("math_traps", instead=_REFERENCE)
    rows = [_row(mode, config, n, time_config(config, n)) for mode, config in MATH_TRAPS.items()]
    table = pd.DataFrame(rows)
    base = table.loc[table["math_mode"] == "rsqrt", "median_ms"].iloc[0]
    table["slowdown"] = table["median_ms"] / base
    return table


def tuning_sweep(n: int = SIZES[-1], tiles: Iterable[int] = TUNING_TILES,
                 bodies: Iterable[int] = TUNING_BODIES) -> pd.DataFrame:
    """Tile size x bodies per thread of the tiled kernel at ``n`` (reference ``ch08_tuning``)."""
    backend.require_gpu("tuning_sweep", instead=_REFERENCE)
    rows = []
    for tile in tiles:
        for p in bodies:
            config = nb.Config("tiled", tile=tile, unroll=4, bodies=p)
            rows.append(_row(f"tiled {tile}, {p} bodies/thread", config, n, time_config(config, n)))
    return pd.DataFrame(rows)


def best_config(tuning: pd.DataFrame) -> nb.Config:
    """The fastest configuration of a :func:`tuning_sweep` table."""
    best = tuning.loc[tuning["ginteractions"].astype(float).idxmax()]
    return nb.Config("tiled", tile=int(best["tile"]), unroll=int(best["unroll"]), bodies=int(best["bodies"]))


def _time_cpu_loop(pos: np.ndarray, repeat: int) -> Timing:
    """Host-clock timing of :func:`~labhelpers.kernels.nbody.accelerations_cpu` (one warm-up call compiles)."""
    n = pos.shape[0]
    acc = np.empty((n, 3), dtype=np.float32)
    eps2 = np.float32(nb.DEFAULT_EPS2)
    return wall_time(lambda: nb.accelerations_cpu(pos, eps2, acc), repeat=repeat, label="Numba CPU",
                     flops=nb.flops(n))


def _cpu_row(kernel: str, n: int, threads: int, t: Timing) -> dict:
    rate = nb.interactions(n) / (t.median_ms * 1e-3) / 1e9
    return {"kernel": kernel, "n": n, "threads": threads, "median_ms": t.median_ms, "min_ms": min(t.times_ms),
            "ginteractions": rate, "ginteractions_per_thread": rate / threads, "gflops": t.gflops}


def cpu_rates(sizes: Sequence[int] = CPU_SIZES, *, numba_sizes: Sequence[int] = NUMBA_CPU_SIZES,
              parallel: bool = True, repeat: int = 5) -> pd.DataFrame:
    """Interactions per second of the CPU: the Numba float32 loop on every thread and on one, then NumPy.

    Runs on any machine (it times the CPU with the host clock), so its numbers describe the machine it
    runs on; the chapter shows the ones measured on the GPU machine (reference ``ch08_cpu``).

    The CPU's best is :func:`~labhelpers.kernels.nbody.accelerations_cpu` (``parallel=True``,
    ``fastmath=True`` like the GPU kernels, float32, the inner loop vectorised), timed at ``numba_sizes``
    (``2^12`` to ``2^14``: a parallel call must hold milliseconds of work per thread, or waking the threads
    dominates) on every Numba thread, then on one thread (``numba.set_num_threads(1)``), so the table shows
    the per-thread rate and the parallel speed-up. The Numba rows are timed first, half a second after
    anything else ran: NumPy's BLAS threads keep spinning for a while after each call, and a parallel loop
    that shares the cores with them waits for its slowest thread. The float64 NumPy specification comes
    last, at ``sizes``. With ``parallel=False`` only NumPy is timed.

    Columns: kernel, n, threads, median_ms, min_ms (of ``repeat`` calls after a warm-up), ginteractions
    (``n^2`` / median time, 10^9/s), ginteractions_per_thread, gflops (20 flops per interaction).
    """
    rows = []
    if parallel:
        threads = numba.get_num_threads()
        time.sleep(0.5)  # let other thread pools (NumPy's BLAS) go idle first
        for n in numba_sizes:
            pos = nb.random_bodies(n)
            rows.append(_cpu_row(f"Numba parallel float32 ({threads} threads)", n, threads,
                                 _time_cpu_loop(pos, repeat)))
        numba.set_num_threads(1)
        try:
            for n in numba_sizes[:1]:  # one thread: its rate does not depend on n
                pos = nb.random_bodies(n)
                rows.append(_cpu_row("Numba float32 (1 thread)", n, 1, _time_cpu_loop(pos, max(2, repeat // 2))))
        finally:
            numba.set_num_threads(threads)
    for n in sizes:
        pos = nb.random_bodies(n)
        t = wall_time(lambda: nb.accelerations_numpy(pos), repeat=2, label="NumPy float64", flops=nb.flops(n))
        rows.append(_cpu_row("NumPy float64 (1 core)", n, 1, t))
    return pd.DataFrame(rows)


def cpu_summary(table: pd.DataFrame) -> dict[str, float]:
    """The CPU's best rate and how well it uses its threads, from a :func:`cpu_rates` table.

    Keys: ``best`` (the fastest row's G interactions/s), ``best_kernel``, ``threads``, ``per_thread`` (the
    one-thread rate), ``parallel_efficiency`` (best / (threads x per_thread): 1 when every thread runs as fast
    as one alone; NaN without the rows). Tables collected before the ``threads`` column existed read their
    thread count from the kernel's name.
    """
    t = table.copy()
    if "threads" not in t:
        t["threads"] = t["kernel"].str.extract(r"\((\d+) (?:threads|cores)\)", expand=False).astype(float).fillna(1)
    best = t.loc[t["ginteractions"].astype(float).idxmax()]
    single = t[t["kernel"].str.contains("1 thread")]
    per_thread = float(single["ginteractions"].median()) if len(single) else float("nan")
    threads = int(best["threads"])
    return {"best": float(best["ginteractions"]), "best_kernel": str(best["kernel"]), "threads": threads,
            "per_thread": per_thread, "parallel_efficiency": float(best["ginteractions"]) / (threads * per_thread)}


# --------------------------------------------------------------------------------- instruction mix

_PTX_OP = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9_.]*)\s")
_SASS_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def _hot_loop(lines: list[str], label_of, branch_target) -> list[str]:
    """The lines of the longest innermost loop: a label, then a backward branch to it, no loop inside."""
    labels, spans = {}, []
    for idx, line in enumerate(lines):
        name = label_of(line)
        if name:
            labels[name] = idx
        target = branch_target(line)
        if target in labels:
            spans.append((labels[target], idx))
    inner = [(a, b) for a, b in spans if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)]
    if not inner:
        return []
    a, b = max(inner, key=lambda span: span[1] - span[0])
    return lines[a:b + 1]


def ptx_ops(ptx: str) -> Counter:
    """Opcodes (with their type suffixes) of the PTX hot loop."""
    lines = ptx.splitlines()
    loop = _hot_loop(lines, lambda s: s[:-1] if re.match(r"^\$L\w+:$", s.strip()) and s.strip() == s else None,
                     lambda s: (re.search(r"bra(?:\.uni)?\s+(\$L\w+);", s) or [None, None])[1])
    ops = Counter()
    for line in loop:
        m = _PTX_OP.match(line)
        if m:
            ops[m.group(1)] += 1
    return ops


def sass_ops(sass: str) -> Counter:
    """Opcodes of the SASS hot loop (as printed by ``nvdisasm``)."""
    lines = sass.splitlines()
    loop = _hot_loop(lines, lambda s: (re.match(r"^\s*(\.L_x_\d+):", s) or [None, None])[1],
                     lambda s: (re.search(r"BRA\s+(?:`\()?(\.L_x_\d+)", s) or [None, None])[1])
    ops = Counter()
    for line in loop:
        m = _SASS_OP.search(line)
        if m:
            ops[m.group(1)] += 1
    return ops


def _signature(config: nb.Config):
    arr = types.Array(types.float32, 2, "C")
    return (arr, f32, arr)


def _ptx(config: nb.Config) -> str:
    kernel = config.kernel()
    sig = _signature(config)
    kernel.compile(sig)
    return kernel.inspect_asm(sig)


def _sass(config: nb.Config) -> str | None:
    if shutil.which("nvdisasm") is None:
        return None
    kernel = config.kernel()
    sig = _signature(config)
    kernel.compile(sig)
    try:
        return kernel.inspect_sass(sig)
    except Exception:
        return None


def _classify_ptx(ops: Counter) -> dict:
    def total(pred):
        return sum(v for k, v in ops.items() if pred(k))

    interactions = total(lambda k: k.startswith("sub.") and k.endswith("f32")) / 3
    return {
        "interactions_per_trip": interactions,
        "fp32": total(lambda k: k.split(".")[0] in ("add", "sub", "mul", "fma", "neg", "abs") and k.endswith("f32")),
        "fp64": total(lambda k: k.endswith("f64") and not k.startswith(("ld", "st", "cvt", "mov"))),
        "special": total(lambda k: k.split(".")[0] in ("rsqrt", "sqrt", "rcp", "div", "ex2", "lg2", "sin", "cos")),
        "convert": total(lambda k: k.startswith("cvt")),
        "load": total(lambda k: k.startswith("ld.")),
        "other": total(lambda k: not (k.startswith(("ld.", "cvt", "bra")) or k.split(".")[0] in
                                      ("add", "sub", "mul", "fma", "rsqrt", "sqrt", "rcp", "div", "neg", "abs")))
                 + total(lambda k: k.split(".")[0] in ("add", "sub", "mul") and not k.endswith(("f32", "f64"))),
        "ops": " ".join(f"{k}:{v}" for k, v in sorted(ops.items())),
    }


def _classify_sass(ops: Counter) -> dict:
    def total(names):
        return sum(v for k, v in ops.items() if k.split(".")[0] in names)

    return {
        "sass_total": sum(ops.values()),
        "sass_fp32": total(("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL")),
        "sass_mufu": total(("MUFU",)),
        "sass_fp64": total(("DADD", "DMUL", "DFMA", "DSETP")),
        "sass_shared": total(("LDS",)),
        "sass_global": total(("LDG", "LD")),
        "sass_ops": " ".join(f"{k}:{v}" for k, v in sorted(ops.items())),
    }


def instruction_mix(kernels: dict[str, nb.Config] | None = None) -> pd.DataFrame:
    """Instructions per interaction in the hot loop of each kernel (reference ``ch08_instruction_mix``).

    The hot loop is the longest loop of the compiled code; its interactions are counted from its
    float32 subtractions (every interaction starts with three, ``dx, dy, dz``). PTX counts always;
    SASS counts (the machine code the GPU runs) where ``nvdisasm`` is on the PATH.
    """
    backend.require_gpu("instruction_mix", instead=_REFERENCE)
    rows = []
    for name, config in (kernels or {**sequence(), **{f"tiled 256, unroll 4, {k}": v
                                                       for k, v in MATH_TRAPS.items() if k != "rsqrt"}}).items():
        ptx_counts = ptx_ops(_ptx(config))
        row = {"kernel": name, "math_mode": config.math_mode, **_classify_ptx(ptx_counts)}
        sass = _sass(config)
        if sass:
            row.update(_classify_sass(sass_ops(sass)))
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------- tables for the chapter


def ladder_summary(throughput: pd.DataFrame, n: int, fma_peak_gflops: float,
                   baseline: str = "naive, unroll 1") -> pd.DataFrame:
    """Every kernel of a :func:`throughput_sweep` table at size ``n``: rate, GFLOP/s, share of the FMA peak, speedup.

    Returns:
        Indexed by kernel: ``G interactions/s``, ``GFLOP/s``, ``% of FMA peak`` and ``x naive`` (the
        speedup over ``baseline`` at the same n, NaN when it was not measured).
    """
    rows = throughput[throughput["n"] == n].set_index("kernel")
    rate = pd.to_numeric(rows["ginteractions"], errors="coerce")
    gflops = pd.to_numeric(rows["gflops"], errors="coerce")
    base = rate.get(baseline, float("nan"))
    return pd.DataFrame({"G interactions/s": rate, "GFLOP/s": gflops,
                         "% of FMA peak": 100 * gflops / fma_peak_gflops, "x naive": rate / base})


def roofline_points(throughput: pd.DataFrame, n: int, kernels: Sequence[str]) -> pd.DataFrame:
    """The named kernels at size ``n`` as roofline points: algorithmic intensity and measured GFLOP/s.

    The naive kernel is counted as if no cache helped (every interaction reads 16 bytes from device memory),
    the tiled ones as reading every body once per block (:func:`labhelpers.kernels.nbody.bytes_moved` with the
    block's bodies, ``tile * bodies``, as the tile).
    """
    rows = []
    for name in kernels:
        r = throughput[(throughput["kernel"] == name) & (throughput["n"] == n)]
        if not len(r):
            continue
        r = r.iloc[0]
        tile = None if r["kind"] == "naive" else int(r["tile"]) * int(r["bodies"])  # bodies per block
        rows.append({"kernel": name, "intensity": nb.flops(n) / nb.bytes_moved(n, tile),
                     "gflops": float(r["gflops"])})
    return pd.DataFrame(rows)
