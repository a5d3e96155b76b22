"""Every checker of labs 8-10 rejects known-wrong solutions, naming the bug's class, and accepts the solution.

Each mutant is the lab's solution with one or two lines edited (:func:`mutants.mutant`), at least one per
bug class its chapter teaches. A test fails if a mutant is accepted, if its message does not name the
expected class (the message's first words, see :mod:`labhelpers.exercises.harness`), or if a solution
is rejected.
"""

from __future__ import annotations

import numpy as np
import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend first)
from labhelpers.errors import CheckFailed
from numba import cuda
from labhelpers.exercises import harness as h
from labhelpers.exercises import nbody as ex8
from labhelpers.exercises import scan as ex10
from labhelpers.exercises import stencil as ex9
from mutants import load_solutions, mutant

S8 = load_solutions("08_nbody_lab")
S9 = load_solutions("09_stencils_lab")
S10 = load_solutions("10_scan_lab")


def _rejects(check, student, bug_class: str, *extra) -> str:
    with pytest.raises(CheckFailed) as info:
        check(student, *extra)
    text = str(info.value)
    assert text.lower().startswith(bug_class.lower()), f"expected {bug_class!r}, got: {text[:400]}"
    return text


# ------------------------------------------------------------------------------------------ lab 9

STENCIL = S9.stencil_any_radius
LAB9 = {
    "stencil: barrier inside `if i < n`": (
        ex9.check_stencil1d_any_radius, STENCIL,
        [("cuda.syncthreads()", "if cuda.grid(1) < x.size:\n    cuda.syncthreads()")], h.BARRIER_IN_BRANCH),
    "stencil: no barrier": (ex9.check_stencil1d_any_radius, STENCIL, [("cuda.syncthreads()", "")],
                            h.MISSING_BARRIER),
    "stencil: halo not zero before the array": (
        ex9.check_stencil1d_any_radius, STENCIL,
        [("s[w] = x[g] if g >= 0 and g < x.size else float32(0)", "s[w] = x[g] if g < x.size else float32(0)")],
        h.MISSING_GUARD),
    "stencil: halo loaded once (radius > block)": (
        ex9.check_stencil1d_any_radius, STENCIL,
        [("while w < cuda.blockDim.x + 2 * radius:", "if w < cuda.blockDim.x + 2 * radius:")],
        "Halo not loaded"),
    "stencil: halo from the wrong place": (
        ex9.check_stencil1d_any_radius, STENCIL,
        [("first = cuda.blockIdx.x * cuda.blockDim.x - radius", "first = -radius")], "Halo from the wrong place"),
    "stencil: no guard on the store": (ex9.check_stencil1d_any_radius, STENCIL, [("if i < x.size:", "if i >= 0:")],
                                       h.MISSING_GUARD),
    "stencil: no guard on the load": (
        ex9.check_stencil1d_any_radius, STENCIL,
        [("s[w] = x[g] if g >= 0 and g < x.size else float32(0)", "s[w] = x[g] if g >= 0 else float32(0)")],
        h.MISSING_GUARD),
    "stencil: negative shared index s[tid - 1]": (
        ex9.check_stencil1d_any_radius, STENCIL, [("acc += s[tid + k]", "acc += s[tid + k - 1]")],
        (h.NEGATIVE_INDEX, h.WRONG_VALUES)),
    "stencil: float64 accumulator": (ex9.check_stencil1d_any_radius, STENCIL, [("acc = float32(0)", "acc = 0.0")],
                                     h.FLOAT64),
    "jacobi: float64 literal": (
        ex9.check_jacobi_step, S9.jacobi_step,
        [("v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))",
          "v[i, j] = 0.25 * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))")], h.FLOAT64),
    "jacobi: swapped i/j": (ex9.check_jacobi_step, S9.jacobi_step, [("j, i = cuda.grid(2)", "i, j = cuda.grid(2)")],
                            h.SWAPPED_AXES),
    "jacobi: border not copied": (ex9.check_jacobi_step, S9.jacobi_step, [("v[i, j] = u[i, j]", "pass")],
                                  h.NEVER_WRITTEN),
    "jacobi: in place": (
        ex9.check_jacobi_step, S9.jacobi_step,
        [("v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))",
          "u[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))")], h.NEVER_WRITTEN),
    "jacobi: guard with <=": (ex9.check_jacobi_step, S9.jacobi_step,
                              [("if i < ny and j < nx:", "if i <= ny and j <= nx:")], h.MISSING_GUARD),
    "jacobi: a neighbour twice": (
        ex9.check_jacobi_step, S9.jacobi_step,
        [("v[i, j] = QUARTER * ((u[i - 1, j] + u[i + 1, j]) + (u[i, j - 1] + u[i, j + 1]))",
          "v[i, j] = QUARTER * ((u[i - 1, j] + u[i - 1, j]) + (u[i, j - 1] + u[i, j + 1]))")], h.WRONG_VALUES),
    "sobel: gx/gy swapped": (ex9.check_sobel, S9.sobel,
                             [("gx_out[i, j] = gx", "gx_out[i, j] = gy"), ("gy_out[i, j] = gy", "gy_out[i, j] = gx")],
                             "gx and gy swapped"),
    "sobel: derivative along the wrong axis": (
        ex9.check_sobel, S9.sobel,
        [("gx = (img[up, rt] + TWO * img[i, rt] + img[down, rt]) - (img[up, lf] + TWO * img[i, lf] + img[down, lf])",
          "gx = (img[down, lf] + TWO * img[down, j] + img[down, rt]) - (img[up, lf] + TWO * img[up, j] + img[up, rt])")],
        "gx and gy swapped"),
    "sobel: not clamped": (ex9.check_sobel, S9.sobel, [("down = min(i + 1, ny - 1)", "down = i + 1")],
                           (h.MISSING_GUARD, "Border")),
    "sobel: no sqrt": (ex9.check_sobel, S9.sobel,
                       [("out[i, j] = math.sqrt(gx * gx + gy * gy)", "out[i, j] = gx * gx + gy * gy")],
                       h.WRONG_VALUES),
    "sobel: float64 literal": (ex9.check_sobel, S9.sobel,
                               [("down = min(i + 1, ny - 1)", "down = min(i + 1, ny - 1)"),
                                ("out[i, j] = math.sqrt(gx * gx + gy * gy)", "out[i, j] = math.sqrt(gx * gx + gy * gy) * 1.0")],
                               h.FLOAT64),
    "sobel: swapped i/j": (ex9.check_sobel, S9.sobel, [("j, i = cuda.grid(2)", "i, j = cuda.grid(2)")],
                           h.SWAPPED_AXES),
    "ccl: label 0 wins": (ex9.check_ccl_step, S9.propagate_step,
                          [("if i > 0 and labels_in[i - 1, j] != 0:", "if i > 0:")], h.WRONG_VALUES),
    "ccl: flag never set": (ex9.check_ccl_step, S9.propagate_step, [("changed[0] = 1", "changed[0] = 0")],
                            "Convergence flag"),
    "ccl: flag always set": (ex9.check_ccl_step, S9.propagate_step,
                             [("if best < old:", "if True:")], "Convergence flag"),
    "ccl: no guard": (ex9.check_ccl_step, S9.propagate_step, [("if i < ny and j < nx:", "if i <= ny and j < nx:")],
                      h.MISSING_GUARD),
    "ccl: swapped i/j": (ex9.check_ccl_step, S9.propagate_step, [("j, i = cuda.grid(2)", "i, j = cuda.grid(2)")],
                         h.SWAPPED_AXES),
}


def _check_mutant(case):
    check, solution, edits, bug_class, *extra = case
    device = h.is_device_function(solution)
    student = mutant(solution, *edits, jit=(lambda f: cuda.jit(device=True, fastmath=True)(f)) if device else None)
    classes = bug_class if isinstance(bug_class, tuple) else (bug_class,)
    with pytest.raises(CheckFailed) as info:
        check(student, *extra)
    text = str(info.value)
    assert any(text.lower().startswith(c.lower()) for c in classes), f"expected {classes}, got: {text[:500]}"
    assert "ceiling division" not in text or h.NEVER_WRITTEN.lower() in text.lower()[:40]


@pytest.mark.parametrize("name", list(LAB9))
def test_lab9_mutants_are_rejected(name):
    _check_mutant(LAB9[name])


@pytest.mark.parametrize("check", [ex9.check_stencil1d_any_radius, ex9.check_jacobi_step, ex9.check_sobel,
                                   ex9.check_ccl_step])
@pytest.mark.parametrize("bad", [None, {"kernel": 1}, [1, 2], "sobel"])
def test_lab9_bad_objects(check, bad):
    _rejects(check, bad, h.NOT_A_KERNEL)


# ------------------------------------------------------------------------------------------ lab 10

BLELLOCH = S10.blelloch_block
UP_SWEEP_ADD = "s[b] += s[a]"
LAB10 = {
    "blelloch: barrier inside `if tid < d`": (
        ex10.check_blelloch_block, BLELLOCH,
        [("cuda.syncthreads()  # RAW: the previous level is in s before this level reads it", "", 1),
         ("if tid < d:", "if tid < d:\n    cuda.syncthreads()", 1)], h.BARRIER_IN_BRANCH),
    "blelloch: barrier inside `if ia < x.size` (partial block)": (
        ex10.check_blelloch_block, BLELLOCH,
        [("cuda.syncthreads()  # RAW: the scan is complete before anyone reads it",
          "if ia < x.size:\n    cuda.syncthreads()")], h.BARRIER_IN_BRANCH),
    "blelloch: no barrier in the up-sweep": (
        ex10.check_blelloch_block, BLELLOCH,
        [("cuda.syncthreads()  # RAW: the previous level is in s before this level reads it", "", 1)],
        h.MISSING_BARRIER),
    "blelloch: unguarded load (partial block)": (
        ex10.check_blelloch_block, BLELLOCH, [("s[tid + cuda.blockDim.x] = x[ib] if ib < x.size else 0",
                                               "s[tid + cuda.blockDim.x] = x[ib]")], h.MISSING_GUARD),
    "blelloch: unguarded store (partial block)": (
        ex10.check_blelloch_block, BLELLOCH, [("if ib < x.size:", "if ib >= 0:")], h.MISSING_GUARD),
    "blelloch: the slide's up-sweep bound": (ex10.check_blelloch_block, BLELLOCH, [("while d > 0:", "while d > 1:")],
                                             ("Up-sweep one level short", h.MISSING_BARRIER, h.NEGATIVE_INDEX)),
    "blelloch: inclusive": (ex10.check_blelloch_block, BLELLOCH,
                            [("out[ia] = s[tid]", "out[ia] = s[tid] + x[ia]"),
                             ("out[ib] = s[tid + cuda.blockDim.x]", "out[ib] = s[tid + cuda.blockDim.x] + x[ib]")],
                            "Inclusive instead of exclusive"),
    "blelloch: total never stored": (ex10.check_blelloch_block, BLELLOCH,
                                     [("block_sums[cuda.blockIdx.x] = total", "pass")], h.NEVER_WRITTEN),
    "blelloch: no swap in the down-sweep": (ex10.check_blelloch_block, BLELLOCH, [("s[a] = s[b]", "")],
                                            (h.WRONG_VALUES, "Inclusive instead of exclusive")),
    "offsets: block 0 gets block_prefix[-1]": (ex10.check_block_offsets, S10.add_block_offsets,
                                               [("if b > 0:", "if b >= 0:")], "Block 0 must get nothing"),
    "offsets: block_prefix[b]": (ex10.check_block_offsets, S10.add_block_offsets,
                                 [("out[i] += block_prefix[b - 1]", "out[i] += block_prefix[b]")], "Off by one block"),
    "offsets: blockIdx as the block": (ex10.check_block_offsets, S10.add_block_offsets,
                                       [("b = i // per_block", "b = cuda.blockIdx.x")], ("Block from blockIdx", "Nothing added")),
    "offsets: no guard": (ex10.check_block_offsets, S10.add_block_offsets, [("if i < out.size:", "if i >= 0:")],
                          h.MISSING_GUARD),
    "offsets: nothing added": (ex10.check_block_offsets, S10.add_block_offsets,
                               [("out[i] += block_prefix[b - 1]", "pass")], "Nothing added"),
    "split: totalFalses one short": (ex10.check_radix_split, S10.split_scatter,
                                     [("total_falses = e[n - 1] + f[n - 1]", "total_falses = f[n - 1]")],
                                     (h.MISSING_GUARD, "totalFalses one short")),
    "split: d swapped": (ex10.check_radix_split, S10.split_scatter, [("d = t if b else f[i]", "d = f[i] if b else t")],
                         (h.MISSING_GUARD, h.WRONG_VALUES)),
    "split: unstable (t from the end)": (ex10.check_radix_split, S10.split_scatter,
                                         [("t = i - f[i] + total_falses", "t = n - 1 - (i - f[i])")], h.WRONG_VALUES),
}


def _scatter_mutant_check(edits, bug_class):
    return (lambda scatter: ex10.check_compaction(S10.compact, scatter), S10.scatter_kept, edits, bug_class)


LAB10.update({
    "scatter: no predicate (out[:count] hides it)": _scatter_mutant_check(
        [("if i < x.size and x[i] > threshold:", "if i < x.size:")], "Scatter without its predicate"),
    "scatter: >= instead of >": _scatter_mutant_check(
        [("if i < x.size and x[i] > threshold:", "if i < x.size and x[i] >= threshold:")], h.THRESHOLD),
    "scatter: no bounds guard": _scatter_mutant_check(
        [("if i < x.size and x[i] > threshold:", "if x[i] > threshold:")], h.MISSING_GUARD),
    "scatter: inclusive address": _scatter_mutant_check(
        [("out[addresses[i]] = x[i]", "out[addresses[i] + 1] = x[i]")], (h.MISSING_GUARD, "Inclusive scan as the address")),
    # NaN passes `not (x <= t)`: the NaN is scattered to the next kept element's address (a write after write the
    # simulator's thread order hides) or to out[count]; the checker's NaN probe writes there in no order at all.
    "scatter: predicate that keeps NaN": _scatter_mutant_check(
        [("if i < x.size and x[i] > threshold:", "if i < x.size and not (x[i] <= threshold):")], ex10.NAN_PREDICATE),
})


def _compact_mutant(old, new, **kernels):
    """``compact`` with ``old`` replaced by ``new``; ``kernels`` replace the kernels it calls (by name)."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(S10.compact))
    assert source.count(old) == 1, old
    namespace = dict(S10.compact.__globals__, **kernels)
    exec(compile(source.replace(old, new), "<compact mutant>", "exec"), namespace)
    return namespace["compact"]


COMPACT_MUTANTS = {
    "compact: count without the last flag": (("count = last_address + last_flag", "count = last_address"), "Count"),
    "compact: returns a list": (("return out.copy_to_host()[:count]", "return list(out.copy_to_host()[:count])"),
                                h.BAD_RESULT),
    "compact: returns float64": (("return out.copy_to_host()[:count]",
                                  "return out.copy_to_host()[:count].astype(np.float64)"), h.BAD_RESULT),
}


@pytest.mark.parametrize("name", list(LAB10))
def test_lab10_mutants_are_rejected(name):
    _check_mutant(LAB10[name])


@pytest.mark.parametrize("name", list(COMPACT_MUTANTS))
def test_lab10_compact_mutants_are_rejected(name):
    (old, new), bug_class = COMPACT_MUTANTS[name]
    _rejects(ex10.check_compaction, _compact_mutant(old, new), bug_class)


NAN_FLAGS = ("flags[i] = 1 if x[i] > threshold else 0", "flags[i] = 1 if not (x[i] <= threshold) else 0")
NAN_SCATTER = ("if i < x.size and x[i] > threshold:", "if i < x.size and not (x[i] <= threshold):")


@pytest.mark.parametrize("scatter_too", [False, True], ids=["flags only", "flags and scatter"])
def test_lab10_compaction_that_keeps_nan_is_rejected(scatter_too):
    """A whole compaction written with `not (x <= t)`: NaN counted (and, with the scatter's predicate too, returned)."""
    kernels = {"keep_flags": mutant(S10.keep_flags, *NAN_FLAGS)}
    if scatter_too:
        kernels["scatter_kept"] = mutant(S10.scatter_kept, *NAN_SCATTER)
    text = _rejects(ex10.check_compaction, _compact_mutant("count = last_address + last_flag",
                                                           "count = last_address + last_flag", **kernels),
                    ex10.NAN_PREDICATE)
    assert "x[i] > threshold" in text


@pytest.mark.parametrize("bad", [None, {"kernel": 1}, [1, 2]])
def test_lab10_bad_objects(bad):
    for check in (ex10.check_blelloch_block, ex10.check_block_offsets, ex10.check_radix_split):
        _rejects(check, bad, h.NOT_A_KERNEL)
    _rejects(ex10.check_compaction, bad, h.NOT_A_FUNCTION)
    _rejects(ex10.check_compaction, S10.scatter_kept, h.NOT_A_FUNCTION, S10.compact)  # swapped arguments


# ------------------------------------------------------------------------------------------ lab 8

TILED = S8.nbody_tiled


def _plain_interaction(xi, yi, zi, xj, yj, zj, mj, eps2):
    return S8.interaction.py_func(xi, yi, zi, xj, yj, zj, mj, eps2)


LAB8 = {
    "interaction: float64 literal": (ex8.check_interaction, S8.interaction,
                                     [("inv_r = float32(1) / math.sqrt(r2)", "inv_r = 1 / math.sqrt(r2)")], h.FLOAT64),
    "interaction: no softening": (ex8.check_interaction, S8.interaction,
                                  [("r2 = eps2 + dx * dx + dy * dy + dz * dz", "r2 = dx * dx + dy * dy + dz * dz")],
                                  "Softening"),
    "interaction: r^-2": (ex8.check_interaction, S8.interaction,
                          [("s = mj * inv_r * inv_r * inv_r", "s = mj * inv_r * inv_r")], h.WRONG_VALUES),
    "naive: no guard": (ex8.check_naive, S8.nbody_naive, [("if i < n:", "if i >= 0:")], h.MISSING_GUARD),
    "naive: one body short": (ex8.check_naive, S8.nbody_naive, [("for j in range(n):", "for j in range(n - 1):")],
                              h.WRONG_VALUES),
    "naive: float64 accumulators": (ex8.check_naive, S8.nbody_naive,
                                    [("ax, ay, az = float32(0), float32(0), float32(0)", "ax, ay, az = 0.0, 0.0, 0.0")],
                                    h.FLOAT64),
    "naive: az not written": (ex8.check_naive, S8.nbody_naive, [("acc[i, 2] = az", "")], h.NEVER_WRITTEN),
    "tiled: barriers inside `if i < n`": (
        ex8.check_tiled, TILED,
        [("cuda.syncthreads()  # RAW: the whole tile is in shared memory before anyone reads it",
          "if i < n:\n    cuda.syncthreads()")], h.BARRIER_IN_BRANCH, S8.TILE),
    "tiled: no barrier before reading the tile": (
        ex8.check_tiled, TILED, [("cuda.syncthreads()  # RAW: the whole tile is in shared memory before anyone reads it",
                                  "")], h.MISSING_BARRIER, S8.TILE),
    "tiled: no barrier before the next tile (WAR)": (
        ex8.check_tiled, TILED, [("cuda.syncthreads()  # WAR: everyone has read the tile before the next trip "
                                  "overwrites it", "")], h.MISSING_BARRIER, S8.TILE),
    "tiled: unguarded load of the last tile": (
        ex8.check_tiled, TILED, [("if j < n:", "if j >= 0:")], h.MISSING_GUARD, S8.TILE),
    "tiled: float64 literal": (ex8.check_tiled, TILED, [("ax += fx", "ax += fx * 1.0")], h.FLOAT64, S8.TILE),
    "tiled: half the tile": (ex8.check_tiled, TILED, [("for k in range(TILE):", "for k in range(TILE // 2):")],
                             h.WRONG_VALUES, S8.TILE),
}


@pytest.mark.parametrize("name", list(LAB8))
def test_lab8_mutants_are_rejected(name):
    _check_mutant(LAB8[name])


def test_lab8_device_function_kinds():
    text = _rejects(ex8.check_interaction, _plain_interaction, h.NOT_A_DEVICE_FUNCTION)
    assert "float64" not in text
    _rejects(ex8.check_interaction, S8.nbody_naive, h.NOT_A_DEVICE_FUNCTION)
    _rejects(ex8.check_naive, S8.interaction, h.NOT_A_KERNEL)
    _rejects(ex8.check_interaction, {"f": S8.interaction}, h.NOT_A_DEVICE_FUNCTION)
    _rejects(ex8.check_tiled, S8.TILE, h.NOT_A_KERNEL, TILED)  # swapped arguments
    _rejects(ex8.check_tiled, TILED, h.BAD_RESULT, 100)
    _rejects(ex8.check_leapfrog, None, h.NOT_A_FUNCTION)


LEAPFROG = {
    "leapfrog: drift before the first kick": [("nb.kick[blocks, threads](vel_d, acc_d, half)", "", 1),
                                              ("forces(pos_d, eps2, acc_d)",
                                               "forces(pos_d, eps2, acc_d)\nnb.kick[blocks, threads](vel_d, acc_d, half)")],
    "leapfrog: whole kicks": [("half, full = np.float32(dt / 2), np.float32(dt)",
                               "half, full = np.float32(dt), np.float32(dt)")],
    "leapfrog: stale forces": [("forces(pos_d, eps2, acc_d)", "")],
}


@pytest.mark.parametrize("name", list(LEAPFROG))
def test_lab8_leapfrog_mutants_are_rejected(name):
    student = mutant(S8.leapfrog_step, *LEAPFROG[name], jit=lambda f: f)
    with pytest.raises(CheckFailed):
        ex8.check_leapfrog(student)


def test_mutant_counts():
    """Mutants per lab (tables of one-line edits; the two whole-compaction NaN cases come on top of lab 10's)."""
    assert {"8": len(LAB8) + len(LEAPFROG), "9": len(LAB9), "10": len(LAB10) + len(COMPACT_MUTANTS)} == \
        {"8": 16, "9": 26, "10": 25}
