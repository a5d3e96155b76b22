"""Tuning sweep for the memory-bound kernels: SAXPY, the 2D Jacobi step and the 3D 7-point step against the copy.

    python bench/tuning/stencil.py [--quick] [--out stencil_sweep.csv]

GPU only; never run by the test suite. In ONE run, so that every ratio compares numbers taken on the same GPU
minutes apart, for each problem

* ``saxpy``: 2**26 float32 elements, 12 bytes per element (x and y read, out written);
* ``jacobi``: one step on an 8192 x 8192 float32 grid, 8 bytes per point (read once, written once);
* ``stencil3d``: one 7-point step on a 512^3 float32 volume, 8 bytes per point;

it times

* ``copy``: device-to-device copies of the same bytes (:func:`labhelpers.roofline.time_copy`: CuPy's copy where
  CuPy is installed, and the 16-byte streaming copy at 256, 512 and 1024 threads); the fastest is the yardstick;
* the chapter's kernels (``saxpy``, ``jacobi_naive/shared/marching``, ``stencil3d_naive/marching``) at a few
  blocks;
* every candidate of :mod:`labhelpers.kernels.saxpy_candidates` and :mod:`labhelpers.kernels.stencil_candidates`
  over a few block shapes and amounts of work per thread (grid waves, rows or planes per thread).

Every timing is :func:`labhelpers.benchmark` (GPU time, stream held). Every kernel's result is checked before it is
timed: on small awkward sizes against the chapter's NumPy references (SAXPY against the chapter's kernel on the
GPU: both contract ``a * x + y`` into one fused multiply-add, which NumPy does not), and at the full size against
the chapter's first kernel run on the GPU (``saxpy``, ``jacobi_naive``, ``stencil3d_naive``), bit for bit. A
configuration that fails to compile, launch or agree gets ``ok = False`` (``note`` says why) and the sweep goes on.

Columns: problem, kernel, variant, config, shape, median_ms, gbps (the bytes the kernel must move at least, over
the median time), ratio_to_copy (gbps over the best copy of the same problem), ok, note. Printed sorted by
ratio_to_copy; ``--out`` writes the CSV. Targets of the next GPU session: SAXPY >= 0.90, Jacobi >= 0.85, 3D >= 0.80
of the copy, and a 3D marching kernel at least as fast as the naive one.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from _cli import import_labhelpers, run  # bench/tuning/_cli.py: the backend, the import, the command line

lh = import_labhelpers(__file__)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from numba import cuda  # noqa: E402  (after labhelpers chose the backend)

from labhelpers import backend  # noqa: E402
from labhelpers.device import device_info  # noqa: E402
from labhelpers.kernels import cuda_intro as ci  # noqa: E402
from labhelpers.kernels import saxpy_candidates as sx  # noqa: E402
from labhelpers.kernels import stencil as st  # noqa: E402
from labhelpers.kernels import stencil_candidates as sc  # noqa: E402
from labhelpers.launch import ConfiguredKernel, blocks_for  # noqa: E402
from labhelpers.roofline import format_table, time_copy  # noqa: E402

#: Problem sizes and the bytes each kernel must move at least (per element or point).
SAXPY_N = 2**26
JACOBI_N = 8192
CUBE_N = 512
BYTES = {"saxpy": 12, "jacobi": 8, "stencil3d": 8}
#: Small awkward sizes every kernel is checked on first (NumPy references), rows aligned to 16 bytes and not.
SAXPY_CHECK_N = (1, 3, 5, 1023, 4097, 100_003)
JACOBI_CHECK = ((1023, 1029), (517, 1032))
CUBE_CHECK = ((37, 45, 67), (19, 21, 36))
#: Threads per block of the copies.
COPY_THREADS = (256, 512, 1024)
COLUMNS = ["problem", "kernel", "variant", "config", "shape", "median_ms", "gbps", "ratio_to_copy", "ok", "note"]


def configs(quick: bool = False) -> dict[str, list[tuple]]:
    """The configurations the sweep times, per problem: ``(source, variant, block, work)``.

    ``source`` is ``chapter`` or ``candidate``; ``block`` threads (an int for SAXPY); ``work`` the knob of the
    candidate (SAXPY: grid waves, ``None`` for one group per thread; Jacobi ``vec4_march``: chunks of 4 rows;
    3D marching kernels: planes per block), ``None`` where there is none. ``quick``: a few of each.
    """
    if quick:
        return {
            "saxpy": [("chapter", "saxpy", 256, None), ("candidate", "flat", 256, None),
                      ("candidate", "vec4", 256, 4), ("candidate", "vec4", 256, None),
                      ("candidate", "vec4x2", 256, 4)],
            "jacobi": [("chapter", "naive", (32, 8), None), ("chapter", "marching", (128, 1), None),
                       ("candidate", "flat", (32, 8), None), ("candidate", "vec4", (64, 4), None),
                       ("candidate", "vec4_march", (64, 4), 2), ("candidate", "vec4_march", (128, 2), 1)],
            "stencil3d": [("chapter", "naive", (32, 8, 1), None), ("chapter", "marching", (32, 8), None),
                          ("candidate", "flat", (32, 8, 1), None), ("candidate", "march_regs", (32, 8), 64),
                          ("candidate", "march_vec4", (32, 8), 32), ("candidate", "march_shared", (32, 8), 64)],
        }
    saxpy = [("chapter", "saxpy", t, None) for t in (128, 256, 512, 1024)]
    saxpy += [("candidate", "flat", t, None) for t in (256, 512)]
    saxpy += [("candidate", v, t, w) for v in ("vec4", "vec4x2") for t in (128, 256, 512) for w in (1, 2, 4, 8, None)]
    jacobi = [("chapter", "naive", b, None) for b in ((32, 8), (64, 4), (128, 2), (32, 16))]
    jacobi += [("chapter", "shared", (32, 8), None)]
    jacobi += [("chapter", "marching", b, None) for b in ((128, 1), (64, 2), (256, 1))]
    jacobi += [("candidate", "flat", b, None) for b in ((32, 8), (64, 4), (128, 2), (32, 16))]
    jacobi += [("candidate", "vec4", b, None) for b in ((32, 8), (64, 4), (128, 2), (32, 4), (256, 1))]
    jacobi += [("candidate", "vec4_march", b, c) for b in ((32, 4), (64, 4), (128, 2), (64, 2), (256, 1))
               for c in (1, 2, 4)]
    cube = [("chapter", "naive", b, None) for b in ((32, 8, 1), (64, 4, 1), (32, 4, 2))]
    cube += [("chapter", "marching", b, None) for b in ((32, 8), (32, 4))]
    cube += [("candidate", "flat", b, None) for b in ((32, 8, 1), (64, 4, 1), (128, 2, 1), (32, 4, 4))]
    cube += [("candidate", v, b, p) for v in ("march_regs", "march_shared") for b in ((32, 8), (64, 4), (32, 16))
             for p in (16, 64, 256)]
    cube += [("candidate", "march_vec4", b, p) for b in ((32, 8), (64, 4), (16, 16)) for p in (8, 32, 128)]
    return {"saxpy": saxpy, "jacobi": jacobi, "stencil3d": cube}


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape)


def _row(problem: str, kernel: str, variant: str, config: str, shape: tuple[int, ...]) -> dict:
    return {"problem": problem, "kernel": kernel, "variant": variant, "config": config, "shape": _shape_text(shape),
            "median_ms": float("nan"), "gbps": float("nan"), "ok": False, "note": ""}


def _measure(row: dict, check: Callable[[], bool], launch: Callable[[], None], nbytes: int, repeat: int) -> dict:
    """Fill ``row``: check first (a wrong kernel is still timed, flagged ``ok = False``), then time ``launch``.

    Any exception (a kernel that does not compile or launch here) is recorded in ``note``; the sweep goes on.
    """
    try:
        row["ok"] = bool(check())
        if not row["ok"]:
            row["note"] = "disagrees with the reference"
        timing = lh.benchmark(launch, nbytes=nbytes, repeat=repeat, label=f"{row['kernel']} {row['config']}")
        row["median_ms"], row["gbps"] = timing.median_ms, timing.gbps
    except Exception as exc:  # noqa: BLE001  (one bad configuration must not end the sweep)
        row["ok"] = False
        row["note"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}"
    print(f"  {row['problem']:9s} {row['kernel']:24s} {row['config']:44s} {row['gbps']:7.0f} GB/s ok {row['ok']} "
          f"{row['note']}", flush=True)  # as it goes: a run cut short still tells what it measured
    return row


def copy_rows(problem: str, nbytes: int, shape: tuple[int, ...], repeat: int) -> list[dict]:
    """Device-to-device copies moving ``nbytes`` (read + written): CuPy's where usable, the 16-byte streaming copy."""
    src = cuda.device_array(nbytes // 8, dtype=np.float32)  # nbytes / 2 bytes, read once and written once
    out = cuda.device_array_like(src)
    runs = [("library", None)] if backend.cupy_usable() else []
    runs += [("stream_copy16", t) for t in COPY_THREADS]
    rows = []
    for kernel, threads in runs:
        row = _row(problem, "copy", kernel, f"threads={threads}, one wave" if threads else "cupy dst[:] = src", shape)
        try:
            t = time_copy(src, out, kernel=kernel, threads=threads or 256, repeat=repeat)
            row.update(median_ms=t.median_ms, gbps=t.gbps, ok=True)
        except Exception as exc:  # noqa: BLE001
            row["note"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------- SAXPY


def saxpy_rows(runs: list[tuple], repeat: int) -> list[dict]:
    """SAXPY on 2**26 float32: the copy, the chapter's kernel, the candidates."""
    n = SAXPY_N
    nbytes = BYTES["saxpy"] * n
    rng = np.random.default_rng(0)
    a = np.float32(1.5)
    x = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
    y = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    ci.saxpy[blocks_for(n, 256), 256](a, x, y, out)
    want = out.copy_to_host()  # the chapter's kernel on this GPU: fused multiply-add, as the candidates

    def chapter_small(m: int) -> np.ndarray:
        xs, ys = x[:m].copy_to_host(), y[:m].copy_to_host()
        return ci.run_saxpy(a, xs, ys)

    smalls = {m: chapter_small(m) for m in SAXPY_CHECK_N}
    rows = copy_rows("saxpy", nbytes, (n,), repeat)
    for source, variant, threads, waves in runs:
        if source == "chapter":
            blocks = blocks_for(n, threads)
            launch = ConfiguredKernel(ci.saxpy, blocks, threads)
            row = _row("saxpy", "saxpy", "saxpy", f"threads={threads}", (n,))

            def check(launch=launch) -> bool:
                out.copy_to_device(np.zeros(n, np.float32))
                launch(a, x, y, out)
                return bool(np.array_equal(out.copy_to_host(), want))
        else:
            if waves is None:  # one group of ELEMENTS_PER_TRIP per thread: the grid covers the array once
                blocks = blocks_for(n, threads, sx.ELEMENTS_PER_TRIP[variant])
                config = f"threads={threads}, one trip per thread"
            else:
                info = device_info()  # a wave: as many blocks as this GPU's SMs hold at once
                blocks = max(1, (info.sm_count or 1) * info.resident_blocks(threads) * waves)
                config = f"threads={threads}, {waves} wave(s) = {blocks} blocks"
            if variant == "flat":
                blocks, config = sx.saxpy_grid("flat", n, threads), f"threads={threads}"
            launch = ConfiguredKernel(sx.SAXPY_CANDIDATES[variant], blocks, threads)
            row = _row("saxpy", sx.SAXPY_CANDIDATES[variant].__name__, variant, config, (n,))

            def check(launch=launch, variant=variant, threads=threads) -> bool:
                for m, expected in smalls.items():
                    small_blocks = None if variant == "flat" else 3  # a small grid: threads loop several times
                    got = sx.run_saxpy_candidate(a, x[:m].copy_to_host(), y[:m].copy_to_host(), variant, threads,
                                                 small_blocks)
                    if not np.array_equal(got, expected):
                        return False
                out.copy_to_device(np.zeros(n, np.float32))
                launch(a, x, y, out)
                return bool(np.array_equal(out.copy_to_host(), want))

        rows.append(_measure(row, check, lambda launch=launch: launch(a, x, y, out), nbytes, repeat))
    return rows


# --------------------------------------------------------------------------------------------------- Jacobi


def jacobi_rows(runs: list[tuple], repeat: int) -> list[dict]:
    """One Jacobi step on 8192^2 float32: the copy, the chapter's kernels, the candidates."""
    n = JACOBI_N
    shape = (n, n)
    nbytes = BYTES["jacobi"] * n * n
    rng = np.random.default_rng(0)
    u = cuda.to_device((rng.random(shape, dtype=np.float32) * 100).astype(np.float32))
    v = cuda.device_array(shape, dtype=np.float32)
    st.jacobi_naive[st.jacobi_grid("naive", shape, st.BLOCK_2D), st.BLOCK_2D](u, v)
    want = v.copy_to_host()
    smalls = [(rng.random(s, dtype=np.float32) * 100).astype(np.float32) for s in JACOBI_CHECK]
    expected = [st.jacobi_reference(s, 3) for s in smalls]
    uf, vf = sc.flat(u), sc.flat(v)
    rows = copy_rows("jacobi", nbytes, shape, repeat)
    for source, variant, block, chunks in runs:
        if source == "chapter":
            launch = ConfiguredKernel(st.JACOBI[variant], st.jacobi_grid(variant, shape, block), block)
            row = _row("jacobi", st.JACOBI[variant].__name__, variant, f"block={block[0]}x{block[1]}", shape)

            def small(s: np.ndarray, variant=variant, block=block) -> np.ndarray:
                return st.run_jacobi(s, 3, variant, block)

            def step(launch=launch) -> None:
                launch(u, v)
        else:
            try:
                cand = sc.jacobi_launch(variant, shape, block, chunks)
            except Exception as exc:  # noqa: BLE001  (a configuration the candidate refuses)
                rows.append(_row("jacobi", sc.JACOBI_CANDIDATES[variant].__name__, variant, str(block), shape)
                            | {"note": f"{type(exc).__name__}: {exc}"})
                continue
            row = _row("jacobi", cand.kernel.__name__, variant, cand.config, shape)

            def small(s: np.ndarray, variant=variant, block=block, chunks=chunks) -> np.ndarray:
                return sc.run_jacobi_candidate(s, 3, variant, block, chunks)

            def step(cand=cand) -> None:
                cand(uf, vf)

        def check(small=small, step=step) -> bool:
            if not all(np.array_equal(small(s), e) for s, e in zip(smalls, expected)):
                return False
            v.copy_to_device(np.zeros(shape, np.float32))
            step()
            return bool(np.array_equal(v.copy_to_host(), want))

        rows.append(_measure(row, check, step, nbytes, repeat))
    return rows


# --------------------------------------------------------------------------------------------------- 3D


def stencil3d_rows(runs: list[tuple], repeat: int) -> list[dict]:
    """One 3D 7-point step on 512^3 float32: the copy, the chapter's kernels, the candidates."""
    n = CUBE_N
    shape = (n, n, n)
    nbytes = BYTES["stencil3d"] * n ** 3
    rng = np.random.default_rng(0)
    u = cuda.to_device((rng.random(shape, dtype=np.float32) * 100).astype(np.float32))
    v = cuda.device_array(shape, dtype=np.float32)
    st.stencil3d_naive[st.stencil3d_grid("naive", shape, st.BLOCK_3D), st.BLOCK_3D](u, v)
    want = v.copy_to_host()
    smalls = [(rng.random(s, dtype=np.float32) * 100).astype(np.float32) for s in CUBE_CHECK]
    expected = [st.stencil3d_reference(s, 2) for s in smalls]
    uf, vf = sc.flat(u), sc.flat(v)
    rows = copy_rows("stencil3d", nbytes, shape, repeat)
    for source, variant, block, planes in runs:
        if source == "chapter":
            launch = ConfiguredKernel(st.STENCIL3D[variant], st.stencil3d_grid(variant, shape, block), block)
            row = _row("stencil3d", st.STENCIL3D[variant].__name__, variant, f"block={_shape_text(block)}", shape)

            def small(s: np.ndarray, variant=variant, block=block) -> np.ndarray:
                return st.run_stencil3d(s, 2, variant, block)

            def step(launch=launch) -> None:
                launch(u, v)
        else:
            try:
                cand = sc.stencil3d_launch(variant, shape, block, planes)
            except Exception as exc:  # noqa: BLE001
                rows.append(_row("stencil3d", sc.STENCIL3D_CANDIDATES[variant].__name__, variant, str(block), shape)
                            | {"note": f"{type(exc).__name__}: {exc}"})
                continue
            row = _row("stencil3d", cand.kernel.__name__, variant, cand.config, shape)

            def small(s: np.ndarray, variant=variant, block=block, planes=planes) -> np.ndarray:
                return sc.run_stencil3d_candidate(s, 2, variant, block, planes)

            def step(cand=cand) -> None:
                cand(uf, vf)

        def check(small=small, step=step) -> bool:
            if not all(np.array_equal(small(s), e) for s, e in zip(smalls, expected)):
                return False
            v.copy_to_device(np.zeros(shape, np.float32))
            step()
            return bool(np.array_equal(v.copy_to_host(), want))

        rows.append(_measure(row, check, step, nbytes, repeat))
    return rows


# --------------------------------------------------------------------------------------------------- the sweep


def sweep(quick: bool = False, *, repeat: int = 10) -> pd.DataFrame:
    """Time the copies, the chapter's kernels and the candidates of the three problems in one run. GPU only.

    ``quick``: a few configurations of each (:func:`configs`). Returns one row per configuration, unsorted; see
    the module's docstring for the columns.

    Raises:
        GPUOnlyError: under the simulator.
    """
    backend.require_gpu("the stencil tuning sweep",
                        instead="Run it on a GPU machine: python bench/tuning/stencil.py --out stencil_sweep.csv")
    plan = configs(quick)
    rows = []
    for problem, measure in (("saxpy", saxpy_rows), ("jacobi", jacobi_rows), ("stencil3d", stencil3d_rows)):
        start = time.time()
        rows += measure(plan[problem], repeat)
        print(f"   {problem}: {time.time() - start:.1f} s", flush=True)
    table = pd.DataFrame(rows)
    copies = table[(table["kernel"] == "copy") & table["ok"]]
    best = copies.groupby("problem")["gbps"].max()
    table["ratio_to_copy"] = [g / best.get(p, float("nan")) for g, p in zip(table["gbps"], table["problem"])]
    return table[COLUMNS]



def show(table: pd.DataFrame) -> None:
    """Print the table, best first."""
    table = table.sort_values(["ratio_to_copy"], ascending=False).reset_index(drop=True)
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250,
                           "display.max_colwidth", 60):
        print(format_table(table, {"ratio_to_copy": "{:.3f}", "median_ms": "{:.4f}", "gbps": "{:,.0f}"}))
    for problem, group in table.groupby("problem"):
        good = group[group["ok"] & (group["kernel"] != "copy")]
        if len(good):
            top = good.iloc[0]
            print(f"best {problem}: {top['kernel']} {top['config']}: {top['ratio_to_copy']:.3f} of the copy")


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, sweep, show, quick_help="a few configurations per problem"))
