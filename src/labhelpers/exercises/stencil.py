"""Checkers for the lab "Stencils, halos and connected components" (labs/09_stencils_lab.ipynb).

Each checker takes the student's kernel, runs it on sizes that break stencil kernels (one element,
fewer elements than the radius, sizes that are no multiple of the block, a radius larger than the
block, images of one row or one column, odd shapes) and compares with NumPy or SciPy. Inputs are
followed in memory by NaN and outputs start as NaN (or as an impossible label), so reading past the
end or forgetting to write shows. Failures raise :class:`~labhelpers.errors.CheckFailed` with a
message that names the likely bug.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import backend
from ..checkers import diagnose, launch_student_kernel, require_kernel
from ..errors import CheckFailed
from ..kernels import stencil as st

#: (threads per block, radius) pairs of exercise 1: radii below, at and above the block size.
STENCIL_CASES_SIM: tuple[tuple[int, int], ...] = ((32, 1), (32, 3), (16, 7), (8, 12))
STENCIL_CASES_GPU: tuple[tuple[int, int], ...] = ((32, 1), (128, 3), (256, 7), (32, 16), (8, 12), (1024, 16))
#: Jacobi grids (rows, columns): a single point, one row, one column, tiny, and odd shapes.
JACOBI_SHAPES_SIM: tuple[tuple[int, int], ...] = ((1, 1), (1, 7), (6, 1), (2, 2), (3, 3), (17, 33), (33, 17))
JACOBI_SHAPES_GPU: tuple[tuple[int, int], ...] = JACOBI_SHAPES_SIM + ((130, 257), (1001, 1003))
SOBEL_SHAPES_SIM: tuple[tuple[int, int], ...] = ((1, 1), (1, 6), (5, 1), (13, 21), (21, 13))
SOBEL_SHAPES_GPU: tuple[tuple[int, int], ...] = SOBEL_SHAPES_SIM + ((600, 512), (1001, 999))
#: Label given to every output pixel before exercise 4's kernel runs: a pixel left unwritten shows.
UNWRITTEN = -7


def _block_2d() -> tuple[int, int]:
    return (8, 4) if backend.is_simulator() else (32, 8)


def _grid_2d(shape, block) -> tuple[int, int]:
    return (-(-shape[1] // block[0]), -(-shape[0] // block[1]))


def _nan_padded(values: np.ndarray, pad: int = 64):
    """A device copy of ``values`` whose memory continues with ``pad`` NaNs (reads past the end show)."""
    flat = np.full(values.size + pad, np.nan, dtype=np.float32)
    flat[:values.size] = values.ravel()
    return cuda.to_device(flat)[:values.size].reshape(values.shape) if values.ndim > 1 else \
        cuda.to_device(flat)[:values.size]


def _race_check(kernel, grid, block, args, what: str) -> bool:
    """Run the race detector on one small launch; raise CheckFailed on a race. False if it is not available."""
    try:
        from ..racecheck import check_races
    except ImportError:  # the detector is not part of this installation
        return False
    report = check_races(kernel, grid, block, *args)
    report.raise_for_problems(what=what)
    return True


# ------------------------------------------------------------------------------------------ exercise 1


def _stencil_hint(idx: np.ndarray, threads: int, radius: int) -> str:
    """Advice from WHERE the outputs are wrong (their values may be leftovers of shared memory)."""
    edge = (idx % threads < radius) | (idx % threads >= threads - radius)
    if edge.all() and (idx >= threads).all():
        return ("Only outputs near the edges of the blocks after the first are wrong: the halo comes from the wrong "
                "place. Tile word w holds x[blockIdx.x * blockDim.x - radius + w] (a global index), not "
                "x[tid - radius + ...].")
    if radius > threads:
        return (f"With radius {radius} > {threads} threads the tile has more halo words than the block has "
                "threads: load it in a loop, w = tid, tid + blockDim.x, ... while w < blockDim.x + 2 * radius.")
    return ("Load every tile word w = tid, tid + blockDim.x, ... while w < blockDim.x + 2 * radius with "
            "x[blockIdx.x * blockDim.x - radius + w] (0 when that index is outside the array), then "
            "cuda.syncthreads() before any thread reads the tile.")


def check_stencil1d_any_radius(kernel) -> None:
    """Exercise 1: ``kernel(x, out, radius)``, the 1D stencil from a shared tile whose halo is loaded for any radius.

    ``out[i] = x[i-R] + ... + x[i+R]`` with 0 outside the array, for the ``(threads, radius)``
    pairs of :data:`STENCIL_CASES_SIM` (a GPU tries more) and sizes 1, R, 2R+1, 33 and 100, then the
    race detector on one launch (a missing barrier shows there even when the results happen to be right).
    """
    require_kernel(kernel, "your stencil kernel")
    cases = STENCIL_CASES_SIM if backend.is_simulator() else STENCIL_CASES_GPU
    rng = np.random.default_rng(9)
    for threads, radius in cases:
        sizes = sorted({1, radius, 2 * radius + 1, 33, 100} - {0})
        if backend.is_gpu():
            sizes += [257, 100_003]
        for n in sizes:
            x = st.integer_valued(n, rng)
            x_d = _nan_padded(x, pad=4 * st.MAX_RADIUS)
            out = cuda.to_device(np.full(n, np.nan, dtype=np.float32))
            blocks = -(-n // threads)
            try:
                launch_student_kernel(kernel, blocks, threads, (x_d, out, radius), "your stencil kernel")
            except IndexError:
                raise CheckFailed(
                    f"your stencil kernel read or wrote outside an array for n={n}, radius={radius}, {threads} "
                    "threads per block: guard the loads (0 <= g < x.size) and the store (i < x.size), and keep "
                    "the tile index w below blockDim.x + 2 * radius.") from None
            got = out.copy_to_host()
            expected = st.stencil1d_reference(x, radius).astype(np.float32)
            wrong = np.flatnonzero(got != expected)  # (NaN != anything)
            if wrong.size:
                # The message names positions and expected values only: an unloaded tile holds whatever
                # shared memory held before, which differs from run to run.
                first = int(wrong[0])
                raise CheckFailed(
                    f"your stencil kernel is wrong for n={n}, radius={radius}, {threads} threads per block: "
                    f"{wrong.size} of {n} outputs differ from NumPy (the first is out[{first}], which should be "
                    f"{float(expected[first]):g}). {_stencil_hint(wrong, threads, radius)}")
    x = st.integer_valued(64, rng)
    raced = _race_check(kernel, 2, 32, (x, np.zeros(64, np.float32), 3), "your stencil kernel")
    print("Correct: your stencil matches NumPy exactly for every size, radius and block tried (radii larger than "
          "the block included)" + (", and the race detector found no race." if raced else "."))


# ------------------------------------------------------------------------------------------ exercise 2


def check_jacobi_step(kernel, steps: int = 3) -> None:
    """Exercise 2: ``kernel(u, v)``, one 5-point Jacobi step from ``u`` into ``v``, border points copied.

    Runs ``steps`` steps, swapping the buffers between launches (ping-pong), on grids of one
    point, one row, one column and odd shapes, and compares with the float32 NumPy reference
    (``jacobi_reference``; tolerance for another order of the additions).
    """
    require_kernel(kernel, "your Jacobi kernel")
    shapes = JACOBI_SHAPES_SIM if backend.is_simulator() else JACOBI_SHAPES_GPU
    block = _block_2d()
    rng = np.random.default_rng(5)
    for shape in shapes:
        u0 = (rng.random(shape) * 100).astype(np.float32)
        a = _nan_padded(u0)
        b = _nan_padded(np.full(shape, np.nan, dtype=np.float32))
        try:
            for _ in range(steps):
                launch_student_kernel(kernel, _grid_2d(shape, block), block, (a, b), "your Jacobi kernel")
                a, b = b, a
        except IndexError:
            raise CheckFailed(
                f"your Jacobi kernel read or wrote outside the grid for shape {shape}: test i < u.shape[0] and "
                "j < u.shape[1] before anything else, and read neighbours only for interior points "
                "(0 < i < ny - 1 and 0 < j < nx - 1).") from None
        got = a.copy_to_host()
        expected = st.jacobi_reference(u0, steps)
        problem = diagnose(got, expected, rtol=1e-5, atol=1e-4)
        if problem is None:
            continue
        bad = ~np.isclose(got, expected, rtol=1e-5, atol=1e-4)
        border = np.zeros(shape, dtype=bool)
        border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
        if np.isnan(got[bad]).all() and (bad <= border).all():
            hint = ("The border points were never written (they hold the checker's NaN): on the border "
                    "(i == 0, j == 0, i == ny - 1 or j == nx - 1) copy the point, v[i, j] = u[i, j].")
        elif np.isnan(got[bad]).any():
            hint = ("NaN came out: the kernel left points unwritten or read outside the grid (the checker puts "
                    "NaN after it). Every thread with i < ny and j < nx writes v[i, j].")
        elif (bad <= border).all():
            hint = "Only border points are wrong: they keep their temperature, v[i, j] = u[i, j]."
        elif np.allclose(got, st.jacobi_reference(u0, 1), rtol=1e-5, atol=1e-4, equal_nan=False):
            hint = ("The result is what ONE step gives: the kernel wrote into u instead of v (in place), so the "
                    "buffers never changed roles. Read only u, write only v.")
        else:
            hint = ("Interior point (i, j) becomes 0.25 * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1]); read "
                    "only u and write only v (updating u in place mixes old and new values).")
        raise CheckFailed(f"your Jacobi kernel is wrong after {steps} ping-pong steps on a {shape[0]}x{shape[1]} grid: "
                          f"{problem}. {hint}")
    print(f"Correct: {steps} ping-pong steps of your Jacobi kernel match NumPy on every grid tried (one point, one "
          "row, one column, odd shapes).")


# ------------------------------------------------------------------------------------------ exercise 3


def sobel_scipy(img) -> np.ndarray:
    """The Sobel magnitude SciPy computes: ``hypot(sobel(img, axis=0), sobel(img, axis=1))``, edges repeated."""
    from scipy import ndimage

    img = np.asarray(img, dtype=np.float64)
    return np.hypot(ndimage.sobel(img, axis=0, mode="nearest"), ndimage.sobel(img, axis=1, mode="nearest"))


def check_sobel(kernel) -> None:
    """Exercise 3: ``kernel(img, out)``, the Sobel edge magnitude with clamped borders, against ``scipy.ndimage``."""
    require_kernel(kernel, "your Sobel kernel")
    shapes = SOBEL_SHAPES_SIM if backend.is_simulator() else SOBEL_SHAPES_GPU
    block = _block_2d()
    rng = np.random.default_rng(3)
    for shape in shapes:
        img = rng.random(shape).astype(np.float32)
        out = _nan_padded(np.full(shape, np.nan, dtype=np.float32))
        try:
            launch_student_kernel(kernel, _grid_2d(shape, block), block, (_nan_padded(img), out), "your Sobel kernel")
        except IndexError:
            raise CheckFailed(
                f"your Sobel kernel read or wrote outside the image for shape {shape}: clamp every neighbour "
                "index, e.g. min(max(i - 1, 0), ny - 1), and test i < ny and j < nx (not <=) first.") from None
        got = out.copy_to_host()
        expected = sobel_scipy(img).astype(np.float32)
        problem = diagnose(got, expected, rtol=1e-4, atol=1e-5)
        if problem is None:
            continue
        bad = ~np.isclose(got, expected, rtol=1e-4, atol=1e-5)
        border = np.zeros(shape, dtype=bool)
        border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
        if np.isnan(got[bad]).any():
            hint = ("NaN came out: pixels left unwritten, or a neighbour read past the end of the image: "
                    "every thread with i < ny and j < nx writes out[i, j], and neighbours are clamped.")
        elif (bad <= border).all():
            hint = ("Only border pixels are wrong: outside the image use the nearest edge pixel "
                    "(clamp the index), as scipy.ndimage's mode='nearest' does.")
        elif np.allclose(got.T, sobel_scipy(img.T).astype(np.float32), rtol=1e-4, atol=1e-5) if shape[0] == shape[1] \
                else False:
            hint = "The image is transposed: x (cuda.grid's first value) runs along a row, i.e. the column j."
        else:
            hint = ("gx = (c + 2f + k) - (a + 2d + g) differentiates along a row (x) and smooths along y; gy the "
                    "other way round; the magnitude is sqrt(gx * gx + gy * gy). Write the 2 as float32(2).")
        raise CheckFailed(f"your Sobel kernel is wrong on a {shape[0]}x{shape[1]} image: {problem}. {hint}")
    print("Correct: your Sobel magnitude matches scipy.ndimage on every image tried (one pixel, one row, one "
          "column, odd shapes).")


# ------------------------------------------------------------------------------------------ exercise 4


def _ccl_masks() -> list[tuple[str, np.ndarray]]:
    masks = [("1x1 foreground", np.ones((1, 1), np.uint8)), ("one row", st.random_mask(1, 9, 0.7, seed=1)),
             ("one column", st.random_mask(9, 1, 0.7, seed=2))]
    masks += [(f"random 7x11, density {d}", st.random_mask(7, 11, d, seed=int(10 * d))) for d in (0.3, 0.6, 0.9)]
    if backend.is_gpu():
        masks += [(f"random 100x133, density {d}", st.random_mask(100, 133, d, seed=int(10 * d)))
                  for d in (0.3, 0.6, 0.9)]
    return masks


def _one_step(kernel, labels: np.ndarray, block) -> tuple[np.ndarray, int]:
    a = cuda.to_device(labels)
    b = cuda.to_device(np.full(labels.shape, UNWRITTEN, dtype=np.int32))
    flag = cuda.to_device(np.zeros(1, dtype=np.int32))
    launch_student_kernel(kernel, _grid_2d(labels.shape, block), block, (a, b, flag), "your propagation step")
    return b.copy_to_host(), int(flag.copy_to_host()[0])


def check_ccl_step(kernel) -> None:
    """Exercise 4: ``kernel(labels_in, labels_out, changed)``, one label-propagation step with a convergence flag.

    Checks one step from the initial labels on several masks (labels and flag), one step at the
    fixed point (nothing changes, the flag stays 0), then labels a spiral by repeating the step until
    the flag stays 0 and compares the components with ``scipy.ndimage.label``.
    """
    require_kernel(kernel, "your propagation step")
    block = _block_2d()
    for name, mask in _ccl_masks():
        start = st.initial_labels(mask)
        expected, changed = st.propagate_reference(start)
        try:
            got, flag = _one_step(kernel, start, block)
        except IndexError:
            raise CheckFailed(f"your propagation step read or wrote outside the image ({name}): test i < ny and "
                              "j < nx first, and read a neighbour only if it exists (i > 0, i < ny - 1, ...).") from None
        if (got == UNWRITTEN).any():
            raise CheckFailed(f"your propagation step left pixels unwritten ({name}): every pixel, background "
                              "included, writes labels_out[i, j] (background keeps 0).")
        if not np.array_equal(got, expected):
            bad = got != expected
            if (got[mask != 0] == 0).any():
                hint = ("foreground pixels got label 0: the background's 0 is not a label. Only neighbours with "
                        "a nonzero label compete for the minimum.")
            elif (got[mask == 0] != 0).any():
                hint = "background pixels got a label: a background pixel (label 0) keeps 0."
            else:
                hint = ("each foreground pixel takes the minimum of its own label and the nonzero labels of its "
                        "4 neighbours (up, down, left, right) in labels_in; read only labels_in.")
            raise CheckFailed(f"your propagation step is wrong on {name}: {int(bad.sum())} of {bad.size} labels "
                              f"differ from NumPy's step; {hint}")
        if flag != int(changed):
            raise CheckFailed(
                f"your propagation step left changed[0] = {flag} on {name}, but labels "
                f"{'did' if changed else 'did not'} change: set changed[0] = 1 exactly when a pixel's new label "
                "is smaller than its old one.")
        fixed = st.label_reference(mask)
        got, flag = _one_step(kernel, fixed, block)
        if not np.array_equal(got, fixed) or flag != 0:
            raise CheckFailed(f"at the fixed point ({name}: every component already holds its smallest label) your "
                              f"step {'changed labels' if not np.array_equal(got, fixed) else 'still set changed[0]'}: "
                              "set the flag only when a label gets smaller, so the loop can stop.")
    side = 9 if backend.is_simulator() else 65
    mask = st.spiral_mask(side)
    labels = cuda.to_device(st.initial_labels(mask))
    other = cuda.to_device(np.zeros(mask.shape, np.int32))
    flag = cuda.to_device(np.zeros(1, np.int32))
    steps = 0
    while True:
        flag.copy_to_device(np.zeros(1, np.int32))
        launch_student_kernel(kernel, _grid_2d(mask.shape, block), block, (labels, other, flag),
                              "your propagation step")
        labels, other = other, labels
        steps += 1
        if flag.copy_to_host()[0] == 0:
            break
        if steps > mask.size + 1:
            raise CheckFailed("your propagation step never stops setting the flag on a spiral.")
    if not st.same_partition(labels.copy_to_host(), st.label_reference(mask)):
        raise CheckFailed("repeated until the flag stayed 0, your step does not give scipy.ndimage.label's "
                          "components on a spiral.")
    print("Correct: your propagation step matches NumPy on every mask tried, its flag says exactly when labels "
          "change, and repeated until the flag stays 0 it labels a spiral like scipy.ndimage.label.")


__all__ = ["check_ccl_step", "check_jacobi_step", "check_sobel", "check_stencil1d_any_radius", "sobel_scipy"]
