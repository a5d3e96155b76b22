"""Checkers for the lab "Stencils, halos and connected components" (labs/09_stencils_lab.ipynb).

Every kernel exercise is declared for the exercise harness (:mod:`labhelpers.exercises.harness`), which
tries partial last blocks, runs the race detector with a partial block, types the kernel for float64,
and compares the whole outputs (guard bands included) with NumPy or SciPy. What is specific to a
stencil lives here: the sizes (fewer elements than the radius, a radius larger than the block, one row,
one column), the references, and the hints that read WHERE the outputs are wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..checkers import launch_student_kernel
from ..kernels import stencil_labelling as lbl
from ..kernels import stencil as st
from ..launch import grid_2d
from ..timing import benchmark
from ..refdata import load_reference
from . import answers
from . import harness as h
from . import timed

#: (threads per block, radius) pairs of exercise 1: radii below, at and above the block size.
STENCIL_CASES_SIM: tuple[tuple[int, int], ...] = ((32, 1), (32, 3), (16, 7), (8, 12))
STENCIL_CASES_GPU: tuple[tuple[int, int], ...] = ((128, 3), (256, 7), (32, 16), (1024, 16))
#: Jacobi and Sobel grids (rows, columns) beyond the harness's own: one row, one column, tiny, odd shapes.
SHAPES_SIM: tuple[tuple[int, int], ...] = ((1, 7), (6, 1), (2, 2), (3, 3), (17, 33), (33, 17))
SHAPES_GPU: tuple[tuple[int, int], ...] = ((130, 257), (1001, 1003))
#: 2D blocks (x threads, y threads).
BLOCK_SIM: tuple[int, int] = (8, 4)
BLOCK_GPU: tuple[int, int] = (32, 8)
#: Label given to every output pixel before exercise 4's kernel runs: a pixel left unwritten shows.
UNWRITTEN = -7


def _block_2d() -> tuple[int, int]:
    return BLOCK_SIM if backend.is_simulator() else BLOCK_GPU


def _border(shape) -> np.ndarray:
    border = np.zeros(shape, dtype=bool)
    border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
    return border


# ------------------------------------------------------------------------------------------ exercise 1


def _stencil_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str]:
    """Advice from WHERE the outputs are wrong (their values may be leftovers of shared memory)."""
    threads, radius = case.threads, case["radius"]
    idx = np.flatnonzero(got != expected)
    edge = (idx % threads < radius) | (idx % threads >= threads - radius)
    if edge.all() and (idx >= threads).all():
        return ("Halo from the wrong place", "only outputs near the edges of the blocks after the first are wrong: "
                "tile word w holds x[blockIdx.x * blockDim.x - radius + w] (a global index), not x[tid - radius + ...].")
    if (idx % threads >= threads - 2 * radius).all() or radius > threads:
        return ("Halo not loaded", f"the tile has blockDim.x + 2 * radius words ({threads} + "
                f"{2 * radius}), more than the block has threads: load it in a loop, w = tid, tid + blockDim.x, ... while "
                "w < blockDim.x + 2 * radius.")
    return (h.WRONG_VALUES, "load every tile word w = tid, tid + blockDim.x, ... while w < blockDim.x + 2 * radius "
            "with x[blockIdx.x * blockDim.x - radius + w] (0 when that index is outside the array), then "
            "cuda.syncthreads() before any thread reads the tile.")


def _stencil_args(case: h.Case) -> tuple:
    return (st.integer_valued(case.n, case.rng), h.Out(case.n, np.float32), case["radius"])


def _stencil_sizes(config) -> list[int]:
    r = config["radius"]
    return sorted({1, r, 2 * r + 1, 100} - {0})


def stencil_exercise() -> h.Exercise:
    """Exercise 1 as declared for the harness."""
    return h.Exercise(
        name="your stencil kernel", args=_stencil_args,
        reference=lambda case, x, radius: st.stencil1d_reference(x, radius),
        configs=[{"threads": t, "radius": r} for t, r in STENCIL_CASES_SIM],
        configs_gpu=[{"threads": t, "radius": r} for t, r in STENCIL_CASES_GPU],
        sizes=_stencil_sizes, sizes_gpu=(257, 100_003), dtype=np.float32, rtol=0, atol=0,
        explain=_stencil_explain, show_got=False, seed=9)


def check_stencil1d_any_radius(kernel: Any) -> None:
    """Exercise 1: ``kernel(x, out, radius)``, the 1D stencil from a shared tile whose halo is loaded for any radius.

    ``out[i] = x[i-R] + ... + x[i+R]`` with 0 outside the array, exact (integer-valued float32), for the
    ``(threads, radius)`` pairs of :data:`STENCIL_CASES_SIM` (a GPU tries more), radii larger than the
    block included; the race detector runs on two blocks, the last one partial, for every pair.
    """
    h.check(stencil_exercise(), kernel)


# ------------------------------------------------------------------------------------------ exercise 2


def _jacobi_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    u = inputs[0]
    bad = got != expected
    border = _border(got.shape)
    nan = np.isnan(got)
    if nan[bad].all() and (bad <= border).all():
        return (h.NEVER_WRITTEN, "the border points were never written (they hold the checker's NaN): on the border "
                "(i == 0, j == 0, i == ny - 1 or j == nx - 1) copy the point, v[i, j] = u[i, j].")
    if (bad <= border).all():
        return ("Border", "only border points are wrong: they keep their temperature, v[i, j] = u[i, j].")
    if nan[bad].any():
        return None  # the harness names unwritten elements (and a swapped i/j)
    if u.shape[0] > 2 and u.shape[1] > 2 and np.allclose(got[1:-1, 1:-1], st.jacobi_reference(u.T, 1).T[1:-1, 1:-1]):
        return (h.SWAPPED_AXES, "the average mixes rows and columns: i is the row (u.shape[0]), j the column.")
    return (h.WRONG_VALUES, "interior point (i, j) becomes 0.25 * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1]); "
            "read only u and write only v (updating u in place mixes old and new values).")


def jacobi_exercise() -> h.Exercise:
    """Exercise 2 as declared for the harness: one step; the reference rounds exactly like the kernel."""
    return h.Exercise(
        name="your Jacobi kernel",
        args=lambda case: ((case.rng.random(case.n) * 100).astype(np.float32), h.Out(case.n, np.float32)),
        reference=lambda case, u: st.jacobi_reference(u, 1),
        configs=[{"threads": BLOCK_SIM}], configs_gpu=[{"threads": BLOCK_GPU}],
        sizes=lambda config: SHAPES_SIM, sizes_gpu=SHAPES_GPU, dtype=np.float32, rtol=1e-6, atol=1e-5,
        explain=_jacobi_explain, seed=5)


def check_jacobi_step(kernel: Any) -> None:
    """Exercise 2: ``kernel(u, v)``, one 5-point Jacobi step from ``u`` into ``v``, border points copied.

    Tried on one point, one row, one column, odd shapes and grids of more than one block with partial
    blocks in both directions; float32 throughout (a float64 literal is refused, with its line).
    """
    h.check(jacobi_exercise(), kernel)


# ------------------------------------------------------------------------------------------ exercise 3


def sobel_scipy(img) -> np.ndarray:
    """The Sobel magnitude SciPy computes: ``hypot(sobel(img, axis=0), sobel(img, axis=1))``, edges repeated."""
    gx, gy = sobel_gradients(img)
    return np.hypot(gx, gy)


def sobel_gradients(img) -> tuple[np.ndarray, np.ndarray]:
    """SciPy's Sobel derivatives ``(gx, gy)``: gx along x (the column j, right minus left), gy along y (the row i,
    down minus up), edges repeated, in float64."""
    from scipy import ndimage  # SciPy is slow to import: only where a CPU yardstick needs it

    img = np.asarray(img, dtype=np.float64)
    return ndimage.sobel(img, axis=1, mode="nearest"), ndimage.sobel(img, axis=0, mode="nearest")


def _sobel_reference(case, img):
    gx, gy = sobel_gradients(img)
    return gx, gy, np.hypot(gx, gy)


def _sobel_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    img = inputs[0]
    gx, gy = sobel_gradients(img)
    close = dict(rtol=1e-4, atol=1e-5)
    if index < 2 and np.allclose(got, (gy, gx)[index], **close):
        return ("gx and gy swapped", "gx is the derivative along x, the column j (right column minus left "
                "column, rows weighted 1, 2, 1); gy along y, the row i (bottom row minus top row). Store each in "
                "its own output.")
    if index < 2 and np.allclose(got, -(gx, gy)[index], **close):
        return ("Sign of the derivative", "right minus left (gx) and bottom minus top (gy), not the reverse.")
    if np.isnan(got).any():
        return None
    bad = ~np.isclose(got, expected, **close)
    if (bad <= _border(got.shape)).all():
        return ("Border", "only border pixels are wrong: outside the image use the nearest edge pixel (clamp the "
                "index), as scipy.ndimage's mode='nearest' does.")
    return (h.WRONG_VALUES, "gx = (c + 2f + k) - (a + 2d + g) differentiates along a row (x) and smooths along y; "
            "gy the other way round; the magnitude is sqrt(gx * gx + gy * gy). Write the 2 as a float32 constant.")


def sobel_exercise() -> h.Exercise:
    """Exercise 3 as declared for the harness."""
    return h.Exercise(
        name="your Sobel kernel",
        args=lambda case: (case.rng.random(case.n).astype(np.float32), h.Out(case.n, np.float32),
                           h.Out(case.n, np.float32), h.Out(case.n, np.float32)),
        reference=_sobel_reference, configs=[{"threads": BLOCK_SIM}], configs_gpu=[{"threads": BLOCK_GPU}],
        sizes=lambda config: SHAPES_SIM, sizes_gpu=SHAPES_GPU, dtype=np.float32, rtol=1e-4, atol=1e-5,
        explain=_sobel_explain, seed=3)


def check_sobel(kernel: Any) -> None:
    """Exercise 3: ``kernel(img, gx, gy, out)``: the Sobel derivatives and magnitude with clamped borders.

    ``gx`` (along x, the column j), ``gy`` (along y, the row i) and ``out = sqrt(gx^2 + gy^2)`` are compared
    with ``scipy.ndimage.sobel``; storing the derivatives is what shows a gx/gy swap (the magnitude cannot).
    """
    h.check(sobel_exercise(), kernel)


# ------------------------------------------------------------------------------------------ exercise 4


def _ccl_args(case: h.Case) -> tuple:
    rows, cols = case.n
    mask = (case.rng.random((rows, cols)) < case["density"]).astype(np.uint8)
    labels = lbl.label_reference(mask) if case["fixed"] else lbl.initial_labels(mask)
    return (labels.astype(np.int32), h.Out(case.n, np.int32, fill=UNWRITTEN), h.Out(1, np.int32, fill=0))


def _ccl_reference(case, labels):
    new, changed = lbl.propagate_reference(labels)
    return new, np.array([int(changed)], np.int32)


def _ccl_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    labels = inputs[0]
    if index == 1:
        if case["fixed"]:
            return ("Convergence flag", "at the fixed point (every component already holds its smallest label) your "
                    "step still set changed[0]: set it only when a label gets smaller, so the loop can stop.")
        return ("Convergence flag", f"changed[0] is {int(got[0])} but labels {'did' if expected[0] else 'did not'} "
                "change: set changed[0] = 1 exactly when a pixel's new label is smaller than its old one.")
    if (got == UNWRITTEN).any():
        return None  # the harness names unwritten pixels (and a swapped i/j)
    if (got[labels != 0] == 0).any():
        return (h.WRONG_VALUES, "foreground pixels got label 0: the background's 0 is not a label. Only neighbours "
                "with a nonzero label compete for the minimum.")
    if (got[labels == 0] != 0).any():
        return (h.WRONG_VALUES, "background pixels got a label: a background pixel (label 0) keeps 0.")
    return (h.WRONG_VALUES, "each foreground pixel takes the minimum of its own label and the nonzero labels of its "
            "4 neighbours (up, down, left, right) in labels_in; read only labels_in.")


def ccl_exercise() -> h.Exercise:
    """Exercise 4's single step as declared for the harness (from the initial labels, and at the fixed point)."""
    block, gpu_block = BLOCK_SIM, BLOCK_GPU
    configs = [{"threads": block, "density": d, "fixed": False} for d in (0.3, 0.6, 0.9)]
    configs.append({"threads": block, "density": 0.6, "fixed": True})
    return h.Exercise(
        name="your propagation step", args=_ccl_args, reference=_ccl_reference, configs=configs,
        configs_gpu=[{"threads": gpu_block, "density": 0.6, "fixed": False}],
        sizes=lambda config: ((1, 9), (9, 1), (7, 11)), sizes_gpu=((100, 133),), explain=_ccl_explain, seed=10)


def check_ccl_step(kernel: Any) -> None:
    """Exercise 4: ``kernel(labels_in, labels_out, changed)``, one label-propagation step with a convergence flag.

    The harness checks one step (labels and flag) on random masks of several densities and at the fixed
    point (nothing changes, the flag stays 0); then the step, repeated until the flag stays 0, must label
    a spiral like ``scipy.ndimage.label``.
    """
    h.check(ccl_exercise(), kernel, quiet=True)
    block = _block_2d()
    side = 9 if backend.is_simulator() else 65
    mask = lbl.spiral_mask(side)
    labels = cuda.to_device(lbl.initial_labels(mask))
    other = cuda.to_device(np.zeros(mask.shape, np.int32))
    flag = cuda.to_device(np.zeros(1, np.int32))
    steps = 0
    while True:
        flag.copy_to_device(np.zeros(1, np.int32))
        launch_student_kernel(kernel, grid_2d(mask.shape, block), block, (labels, other, flag),
                              "your propagation step")
        labels, other = other, labels
        steps += 1
        if flag.copy_to_host()[0] == 0:
            break
        if steps > mask.size + 1:
            raise h.failure("Convergence flag", "your propagation step never stops setting the flag on a spiral.")
    if not lbl.same_partition(labels.copy_to_host(), lbl.label_reference(mask)):
        raise h.failure(h.WRONG_VALUES, "repeated until the flag stayed 0, your step does not give "
                                        "scipy.ndimage.label's components on a spiral.")
    print("Correct: your propagation step matches NumPy on every mask tried (partial blocks, one row, one column), "
          "its flag says exactly when labels change, and repeated until the flag stays 0 it labels a spiral like "
          "scipy.ndimage.label.")


__all__ = ["ccl_exercise", "check_ccl_step", "check_jacobi_step", "check_sobel", "check_stencil1d_any_radius",
           "jacobi_exercise", "sobel_exercise", "sobel_gradients", "sobel_scipy", "stencil_exercise"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Block shapes (x along a row, y) the measured exercise accepts, and the grid side timed on a GPU.
TUNED_BLOCKS: tuple[tuple[int, int], ...] = ((32, 1), (32, 4), (32, 8), (32, 16), (32, 32), (64, 4), (128, 2),
                                             (256, 1), (16, 16), (8, 8), (8, 32), (1, 256))
TUNED_SIDE = 8192
#: The chapter's launch of its naive Jacobi kernel, the yardstick.
YARDSTICK_BLOCK = (32, 8)


def _jacobi_reference(block: tuple[int, int]) -> str:
    ref = load_reference("ch09_jacobi")
    t = ref.table[ref.table["variant"] == "naive"]
    best = t.loc[t["median_ms"].idxmin()]
    match = t[(t["block_x"] == block[0]) & (t["block_y"] == block[1])]
    if match.empty:
        return timed.reference_text(ref, f"blocks of {block[0]} x {block[1]} were not measured; the chapter's "
                                            f"naive kernel at its best block ({int(best.block_x)} x "
                                            f"{int(best.block_y)}) took {best.median_ms:.3g} ms")
    row = match.iloc[0]
    return timed.reference_text(
        ref, f"the chapter's naive Jacobi step with blocks of {block[0]} x {block[1]} took {row.median_ms:.3g} ms, at "
             f"its best block ({int(best.block_x)} x {int(best.block_y)}) {best.median_ms:.3g} ms: ratio "
             f"{best.median_ms / row.median_ms:.2f}")


JACOBI_TUNED = timed.MeasuredExercise(
    name="jacobi_step with your block shape", target=timed.target_for("9", 0.9),
    measures=f"your jacobi_step on a {TUNED_SIDE} x {TUNED_SIDE} grid with your block shape",
    yardstick=f"the chapter's naive Jacobi kernel with blocks of {YARDSTICK_BLOCK[0]} x {YARDSTICK_BLOCK[1]}",
    reference=_jacobi_reference)


def _race_jacobi(kernel: Any, block: tuple[int, int]) -> tuple:
    shape = (TUNED_SIDE, TUNED_SIDE)
    u = cuda.to_device(np.random.default_rng(0).random(shape, dtype=np.float32))
    v = cuda.device_array(shape, dtype=np.float32)
    grid, yard_grid = grid_2d(shape, block), grid_2d(shape, YARDSTICK_BLOCK)
    nbytes = st.jacobi_counts(*shape)["nbytes"]
    student = benchmark(lambda: kernel[grid, block](u, v), nbytes=nbytes, label="jacobi_step")
    yardstick = benchmark(lambda: st.jacobi_naive[yard_grid, YARDSTICK_BLOCK](u, v), nbytes=nbytes, label="naive")
    return student, yardstick


def check_jacobi_block(kernel: Any, choose_block) -> timed.Verdict:
    """Measured exercise: ``choose_block()`` returns the block shape ``(x, y)`` of your ``jacobi_step`` (exercise 2,
    checked first); on a GPU it must reach ``JACOBI_TUNED.target`` of the chapter's naive kernel at (32, 8), timed in the same run.

    Raises:
        CheckFailed: the kernel is wrong (the harness's class), the shape is not allowed, or too slow.
    """
    block = timed.choose(choose_block, "choose_block", TUNED_BLOCKS)
    return timed.check(JACOBI_TUNED, block, correct=lambda: check_jacobi_step(kernel),
                          race=lambda: _race_jacobi(kernel, block))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (nx, ny, itemsize, copy_gbs) cases of :func:`check_jacobi_bound`: arguments, not a GPU's figures.
BOUND_CASES: tuple[tuple[int, int, int, float], ...] = (
    (1000, 3000, 8, 250.0), (8192, 8192, 4, 3000.0), (4096, 512, 4, 3000.0))
#: The reference variants shown beside the prediction (``ch09_jacobi``), fastest block shape of each.
BOUND_VARIANTS: tuple[str, ...] = ("naive", "shared", "marching", "cupy slicing")


def _bound_hint(got: float, nx: int, ny: int, itemsize: int, gbs: float) -> str:
    want = 2 * nx * ny * itemsize / (gbs * 1e9) * 1e3
    if np.isclose(got, 3 * want, rtol=1e-6) or np.isclose(got, 2.5 * want, rtol=1e-6):
        return ("the 4 neighbours are reused by the next threads (caches, shared memory): count each point read "
                "once and written once")
    if np.isclose(got, want / 2, rtol=1e-6):
        return "a step reads every point AND writes it: 2 * itemsize bytes per point"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not points: {itemsize} bytes per point"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "bytes / (GB/s * 1e9) is seconds: times 1000 for milliseconds"
    return f"bytes moved = 2 * nx * ny * itemsize; time = bytes / ({gbs:g}e9 B/s)"


def check_jacobi_bound(predict_jacobi_ms: Any) -> None:
    """Predict, then measure: ``predict_jacobi_ms(nx, ny, itemsize, copy_gbs)`` returns the least time in ms of one
    Jacobi step on an ``ny x nx`` grid of ``itemsize``-byte values (each point read once and written once: the
    neighbours come from caches) at the copy ceiling ``copy_gbs`` (GB/s, 10^9 bytes per second).

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_jacobi_ms, "predict_jacobi_ms",
                          "predict_jacobi_ms(nx, ny, itemsize, copy_gbs)",
                          BOUND_CASES,
                          lambda nx, ny, itemsize, gbs: 2 * nx * ny * itemsize / (gbs * 1e9) * 1e3,
                          shown=lambda got, want: f"{got:.6g} ms, the bound is {want:.6g} ms",
                          hint=_bound_hint)
    print(f"Correct: your bound equals bytes moved over the copy ceiling on all {len(BOUND_CASES)} cases.")


def show_jacobi_bound(predict_jacobi_ms: Any) -> pd.DataFrame:
    """Your bound (checked first by :func:`check_jacobi_bound`) for one step on a :data:`TUNED_SIDE` square float32
    grid beside the chapter's measured steps (reference ``ch09_jacobi``, each at its fastest block shape), at the
    copy ceiling of the same run; on a GPU the copy ceiling is timed now instead.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_jacobi_bound`).
    """
    check_jacobi_bound(predict_jacobi_ms)
    ref = load_reference("ch09_jacobi")
    t = ref.table
    copy_gbs = float(t[t["variant"] == "copy"].iloc[0].gbps)
    if timed.can_time():
        copy_gbs = timed.time_copy_of(8 * TUNED_SIDE * TUNED_SIDE).gbps
        print(f"Copy ceiling measured now: {copy_gbs:,.0f} GB/s; the steps are the chapter's ({ref.gpu}).")
    else:
        print(timed.reference_text(ref, f"Measured (copy ceiling {copy_gbs:,.0f} GB/s, same run)"))
    bound = answers.number(answers.call(predict_jacobi_ms, "predict_jacobi_ms", TUNED_SIDE, TUNED_SIDE, 4,
                                        copy_gbs), "predict_jacobi_ms")
    rows = []
    for variant in BOUND_VARIANTS:
        ms = float(t[t["variant"] == variant]["median_ms"].astype(float).min())
        rows.append({"Jacobi step": variant, "your bound (ms)": round(bound, 4), "measured (ms)": round(ms, 4),
                     "measured / bound": round(ms / bound, 2)})
    return pd.DataFrame(rows)
