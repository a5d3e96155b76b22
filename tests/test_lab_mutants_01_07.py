"""Every checker of labs 1-7 rejects known-wrong solutions, naming the bug's class, and accepts the solution.

Each mutant is the lab's solution with one to three lines edited (:func:`mutants.mutant`), at least one per
bug class its chapter teaches: missing bounds guard, 2D index swapped, the grid not covering n, barriers
(missing, or inside a branch) in the tiled matmul, the transpose and the reduction tree, a wrong stride,
the final add without atomics, grid-stride loops that skip or repeat elements, shared-tile padding that
breaks results, float64 literals; for the answers that are not kernels, the usual formula mistakes and
answers of the wrong type. A test fails if a mutant is accepted, if its message does not START with the
expected class, or if a solution is rejected.
"""

from __future__ import annotations

import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend first)
from labhelpers.errors import CheckFailed
from labhelpers.exercises import answers as a
from labhelpers.exercises import bsp as ex2
from labhelpers.exercises import cuda_intro as ex1
from labhelpers.exercises import harness as h
from labhelpers.exercises import matmul as ex5
from labhelpers.exercises import memory as ex3
from labhelpers.exercises import reduction as ex6
from labhelpers.exercises import roofline as ex7
from labhelpers.exercises import scheduling as ex4
from mutants import load_solutions, mutant

S1 = load_solutions("01_cuda_in_python_lab")
S2 = load_solutions("02_bsp_and_amdahl_lab")
S3 = load_solutions("03_memory_hierarchy_lab")
S4 = load_solutions("04_scheduling_lab")
S5 = load_solutions("05_matrix_multiply_lab")
S6 = load_solutions("06_reduction_lab")
S7 = load_solutions("07_profiling_roofline_lab")
TILE = S5.TILE


def plain(func):
    """``jit`` for mutants of plain Python functions (the non-kernel exercises)."""
    return func


def _sq(kernel):
    ex5.check_tiled_square(kernel, TILE)


def _rect(kernel):
    ex5.check_tiled_rect(kernel, TILE)


def _fixed(kernel):
    ex5.check_barriers(kernel, TILE)


# Each entry: (checker, solution, [(old line, new line), ...], expected class (or classes), [jit]).
LAB1 = {
    "fill_index: no guard": (ex1.check_fill_index, S1.fill_index, [("if i < out.size:", "if True:")], h.MISSING_GUARD),
    "fill_index: <= in the guard": (ex1.check_fill_index, S1.fill_index, [("if i < out.size:", "if i <= out.size:")],
                                    h.MISSING_GUARD),
    "fill_index: threadIdx.x as the index": (ex1.check_fill_index, S1.fill_index,
                                             [("i = cuda.grid(1)", "i = cuda.threadIdx.x")], ex1.LOCAL_INDEX),
    "vector_add: no guard": (ex1.check_vector_add, S1.vector_add, [("if i < out.size:", "if True:")], h.MISSING_GUARD),
    "vector_add: float64 literal": (ex1.check_vector_add, S1.vector_add,
                                    [("out[i] = x[i] + y[i]", "out[i] = x[i] + y[i] * 1.0")], h.FLOAT64),
    "vector_add: wrong operation": (ex1.check_vector_add, S1.vector_add,
                                    [("out[i] = x[i] + y[i]", "out[i] = x[i] - y[i]")], h.WRONG_VALUES),
    "scale_2d: row and column swapped": (ex1.check_scale_2d, S1.scale_2d,
                                         [("col, row = cuda.grid(2)", "row, col = cuda.grid(2)")], h.SWAPPED_AXES),
    "scale_2d: rows unguarded": (ex1.check_scale_2d, S1.scale_2d,
                                 [("if row < out.shape[0] and col < out.shape[1]:", "if col < out.shape[1]:")],
                                 h.MISSING_GUARD),
    "scale_2d: float64 literal": (ex1.check_scale_2d, S1.scale_2d,
                                  [("out[row, col] = alpha * a[row, col]", "out[row, col] = 1.5 * a[row, col]")],
                                  h.FLOAT64),
    "launch_config: floor division": (ex1.check_launch_config, S1.launch_config,
                                      [("blocks = (n + threads - 1) // threads", "blocks = n // threads")],
                                      ex1.GRID_TOO_SMALL, plain),
    "launch_config: one block too many at multiples": (
        ex1.check_launch_config, S1.launch_config,
        [("blocks = (n + threads - 1) // threads", "blocks = n // threads + 1")], h.WRONG_VALUES, plain),
    "launch_config: partial warp dropped": (ex1.check_launch_config, S1.launch_config,
                                            [("warps = blocks * ((threads + 31) // 32)", "warps = blocks * (threads // 32)")],
                                            "Partial warp", plain),
    "launch_config: no error": (ex1.check_launch_config, S1.launch_config,
                                [("raise lh.LaunchConfigError(f\"{threads} threads per block: choose between 1 and 1024\")",
                                  "pass")], "No error for an impossible block", plain),
    "launch_config: floats": (ex1.check_launch_config, S1.launch_config,
                              [("idle_threads = blocks * threads - n", "idle_threads = float(blocks * threads - n)")],
                              a.WRONG_TYPE, plain),
}

LAB2 = {
    "grid-stride: stride of one block": (ex2.check_grid_stride, S2.grid_stride_update,
                                         [("stride = cuda.gridsize(1)", "stride = cuda.blockDim.x")], ex2.VISITS),
    "grid-stride: skips the last element": (
        ex2.check_grid_stride, S2.grid_stride_update,
        [("for i in range(start, x.size, stride):", "for i in range(start, x.size - 1, stride):")], ex2.VISITS),
    "grid-stride: no loop": (
        ex2.check_grid_stride, S2.grid_stride_update,
        [("for i in range(start, x.size, stride):", "for i in range(start, min(x.size, start + 1), stride):")],
        ex2.VISITS),
    "grid-stride: past the end": (
        ex2.check_grid_stride, S2.grid_stride_update,
        [("for i in range(start, x.size, stride):", "for i in range(start, x.size + stride, stride):")],
        h.MISSING_GUARD),
    "grid-stride: float64 literal": (ex2.check_grid_stride, S2.grid_stride_update,
                                     [("v = a * v + b", "v = a * v + 0.25")], h.FLOAT64),
    "amdahl: Gustafson": (ex2.check_amdahl, S2.amdahl,
                          [("speedup = 1.0 / (s + (1.0 - s) / n)", "speedup = s + (1.0 - s) * n")],
                          "Gustafson instead of Amdahl", plain),
    "amdahl: a string": (ex2.check_amdahl, S2.amdahl, [("return speedup", "return str(speedup)")], a.WRONG_TYPE, plain),
    "amdahl: a list": (ex2.check_amdahl, S2.amdahl, [("return speedup", "return [speedup]")], a.WRONG_TYPE, plain),
    "processors: > at the bound": (ex2.check_processors_needed, S2.processors_needed,
                                   [("if s * target >= 1:", "if s * target > 1:")], (a.RAISED, "Out of reach"), plain),
    "processors: rounded": (ex2.check_processors_needed, S2.processors_needed,
                            [("return n", "return float(round(n))")], "Rounded", plain),
    "processors: a string": (ex2.check_processors_needed, S2.processors_needed,
                             [("return n", "return str(n)")], a.WRONG_TYPE, plain),
    "fit: not clipped": (ex2.check_fit_serial_fraction, S2.fit_serial,
                         [("s = min(1.0, max(0.0, float(np.sum(a * b) / np.sum(a * a))))",
                           "s = float(np.sum(a * b) / np.sum(a * a))")], "Not clipped", plain),
}

T3 = S3.transpose_tiled
LAB3 = {
    "transpose: no barrier": (ex3.check_tiled_transpose, T3, [("cuda.syncthreads()", "")], h.MISSING_BARRIER),
    "transpose: barrier in a branch": (ex3.check_tiled_transpose, T3,
                                       [("cuda.syncthreads()", "if col < a.shape[1]:\n    cuda.syncthreads()")],
                                       h.BARRIER_IN_BRANCH),
    "transpose: loads unguarded": (ex3.check_tiled_transpose, T3,
                                   [("if row + k < a.shape[0] and col < a.shape[1]:", "if True:")], h.MISSING_GUARD),
    "transpose: stores unguarded in columns": (
        ex3.check_tiled_transpose, T3,
        [("if out_row + k < out.shape[0] and out_col < out.shape[1]:", "if out_row + k < out.shape[0]:")],
        h.MISSING_GUARD),
    "transpose: tile not transposed": (ex3.check_tiled_transpose, T3,
                                       [("out[out_row + k, out_col] = tile[tx, ty + k]",
                                         "out[out_row + k, out_col] = tile[ty + k, tx]")], h.WRONG_VALUES),
    "transpose: block indices swapped": (
        ex3.check_tiled_transpose, T3,
        [("out_col = cuda.blockIdx.y * TILE + tx", "out_col = cuda.blockIdx.x * TILE + tx"),
         ("out_row = cuda.blockIdx.x * TILE + ty", "out_row = cuda.blockIdx.y * TILE + ty")],
        (h.NEVER_WRITTEN, h.WRONG_VALUES)),
    "transpose: shared shape computed (a GPU does not compile it)": (
        ex3.check_tiled_transpose, T3,
        [("tile = cuda.shared.array(shape=(TILE, 33), dtype=float32)",
          "tile = cuda.shared.array(shape=(TILE, TILE + 1), dtype=float32)")],
        h.DOES_NOT_RUN),
    "transpose: padding in one access only": (
        ex3.check_tiled_transpose, T3,
        [("tile = cuda.shared.array(shape=(TILE, 33), dtype=float32)",
          "tile = cuda.shared.array(shape=1056, dtype=float32)"),
         ("tile[ty + k, tx] = a[row + k, col]", "tile[(ty + k) * 33 + tx] = a[row + k, col]"),
         ("out[out_row + k, out_col] = tile[tx, ty + k]", "out[out_row + k, out_col] = tile[tx * 32 + ty + k]")],
        h.WRONG_VALUES),
    "transpose: tile one word too narrow": (
        ex3.check_tiled_transpose, T3,
        [("tile = cuda.shared.array(shape=(TILE, 33), dtype=float32)",
          "tile = cuda.shared.array(shape=(TILE, 31), dtype=float32)")], h.MISSING_GUARD),
    "transpose: float64 literal": (ex3.check_tiled_transpose, T3,
                                   [("tile[ty + k, tx] = a[row + k, col]", "tile[ty + k, tx] = a[row + k, col] * 1.0")],
                                   h.FLOAT64),
    "sectors: 128-byte lines": (ex3.check_sectors_per_request, S3.sectors_per_request,
                                [("sectors = {int(address) // 32 for address in addresses}",
                                  "sectors = {int(address) // 128 for address in addresses}")], a.WRONG_ANSWER, plain),
    "sectors: a float": (ex3.check_sectors_per_request, S3.sectors_per_request,
                         [("return len(sectors)", "return float(len(sectors))")], a.WRONG_TYPE, plain),
    "conflicts: threads, not words": (ex3.check_conflict_degree, S3.conflict_degree,
                                      [("degree = max(degree, len(set(words[bank == b].tolist())))",
                                        "degree = max(degree, len(words[bank == b].tolist()))")], a.WRONG_ANSWER, plain),
    "chain: a random permutation": (ex3.check_single_cycle, S3.make_chain,
                                    [("next_slot[order[:-1]] = order[1:]", "next_slot[:] = order"),
                                     ("next_slot[order[-1]] = order[0]", "")], "Several cycles", plain),
    "chain: a list": (ex3.check_single_cycle, S3.make_chain, [("return next_slot", "return next_slot.tolist()")],
                      a.WRONG_TYPE, plain),
}

K4 = S4.even_odd_sorted
LAB4 = {
    "even/odd: divergent (j = i)": (ex4.check_even_odd_sorted, K4,
                                    [("half = (n + 1) // 2", "half = 0"), ("if i < half:", "if False:"),
                                     ("j = 2 * (i - half) + 1", "j = i")], ex4.DIVERGENT),
    "even/odd: half rounded down": (ex4.check_even_odd_sorted, K4, [("half = (n + 1) // 2", "half = n // 2")],
                                    h.NEVER_WRITTEN),
    "even/odd: no guard": (ex4.check_even_odd_sorted, K4, [("if j < n:", "if j >= 0:")], h.MISSING_GUARD),
    "even/odd: who not recorded": (ex4.check_even_odd_sorted, K4, [("who[j] = i", "who[j] = 0")], ex4.NOT_ONE_TO_ONE),
    "blocks_per_sm: reserved shared memory missing": (
        ex4.check_blocks_per_sm, S4.blocks_per_sm,
        [("shared_allocated = math.ceil((shared + 1024) / 128) * 128", "shared_allocated = math.ceil((shared + 1) / 128) * 128")],
        a.WRONG_ANSWER, plain),
    "blocks_per_sm: partial warp dropped": (ex4.check_blocks_per_sm, S4.blocks_per_sm,
                                            [("warps_per_block = math.ceil(threads / 32)", "warps_per_block = threads // 32 or 1")],
                                            a.WRONG_ANSWER, plain),
    "blocks_per_sm: a float": (ex4.check_blocks_per_sm, S4.blocks_per_sm,
                               [("by_threads = 64 // warps_per_block", "by_threads = 64 / warps_per_block")],
                               a.WRONG_TYPE, plain),
    "warps_to_hide: rounded down": (ex4.check_warps_to_hide, S4.warps_to_hide,
                                    [("return math.ceil((burst + stall) / burst)", "return (burst + stall) // burst")],
                                    "Too few warps", plain),
    "warps_to_hide: a float": (ex4.check_warps_to_hide, S4.warps_to_hide,
                               [("return math.ceil((burst + stall) / burst)", "return (burst + stall) / burst")],
                               a.WRONG_TYPE, plain),
    "shared_for_blocks: 228 KB / k": (ex4.check_shared_for_blocks, S4.shared_for_blocks,
                                      [("allocation = (sm.shared_per_sm // (k + 1) // sm.shared_unit + 1) * sm.shared_unit",
                                        "allocation = (sm.shared_per_sm // k // sm.shared_unit) * sm.shared_unit")],
                                      a.WRONG_ANSWER, plain),
    "shared_for_blocks: a string": (ex4.check_shared_for_blocks, S4.shared_for_blocks,
                                    [("return allocation - sm.reserved_shared_per_block", "return str(allocation - sm.reserved_shared_per_block)")], a.WRONG_TYPE, plain),
}

RAW5 = "cuda.syncthreads()  # RAW: the tiles are complete before anyone reads them"
WAR5 = "cuda.syncthreads()  # WAR: nobody overwrites the tiles while others still read them"
LAB5 = {
    "naive: row and column swapped": (ex5.check_naive, S5.matmul_naive_kernel,
                                      [("col, row = cuda.grid(2)", "row, col = cuda.grid(2)")], h.SWAPPED_AXES),
    "naive: <= in the guard": (ex5.check_naive, S5.matmul_naive_kernel,
                               [("if row < C.shape[0] and col < C.shape[1]:", "if row <= C.shape[0] and col < C.shape[1]:")],
                               h.MISSING_GUARD),
    "naive: float64 accumulator": (ex5.check_naive, S5.matmul_naive_kernel, [("acc = float32(0)", "acc = 0.0")],
                                   h.FLOAT64),
    "naive: one product short": (ex5.check_naive, S5.matmul_naive_kernel,
                                 [("for p in range(A.shape[1]):", "for p in range(A.shape[1] - 1):")], h.WRONG_VALUES),
    "square: no WAR barrier": (_sq, S5.matmul_tiled_kernel, [(WAR5, "")], h.MISSING_BARRIER),
    "square: no RAW barrier": (_sq, S5.matmul_tiled_kernel, [(RAW5, "")], h.MISSING_BARRIER),
    "square: barrier in a branch": (_sq, S5.matmul_tiled_kernel, [(RAW5, "if row < n:\n    cuda.syncthreads()")],
                                    h.BARRIER_IN_BRANCH),
    "square: phases rounded down": (_sq, S5.matmul_tiled_kernel,
                                    [("for k0 in range(0, n, TILE):", "for k0 in range(0, n // TILE * TILE, TILE):")],
                                    h.WRONG_VALUES),
    "square: load of A unguarded": (_sq, S5.matmul_tiled_kernel, [("if row < n and k0 + tx < n:", "if row < n:")],
                                    h.MISSING_GUARD),
    "rect: k taken from B": (_rect, S5.matmul_rect_kernel, [("m, k = A.shape", "m, k = A.shape[0], B.shape[1]")],
                             h.WRONG_VALUES),
    "rect: row and column swapped": (_rect, S5.matmul_rect_kernel,
                                     [("col, row = cuda.grid(2)", "row, col = cuda.grid(2)")],
                                     (h.SWAPPED_AXES, h.WRONG_VALUES)),
    "rect: float64 accumulator": (_rect, S5.matmul_rect_kernel, [("acc = float32(0)", "acc = 0.0")], h.FLOAT64),
    "fixed: WAR barrier still missing": (
        _fixed, S5.matmul_tiled_fixed,
        [("cuda.syncthreads()  # WAR: the next phase's stores wait until every thread has read this phase's tiles",
          "")], h.MISSING_BARRIER),
    "fixed: early return": (_fixed, S5.matmul_tiled_fixed,
                            [("acc = float32(0)", "acc = float32(0)\nif row >= m:\n    return")], h.BARRIER_IN_BRANCH),
    "hazard: RAW": (ex5.check_hazard, S5.missing_barrier_hazard, [('answer = "WAR"', 'answer = "RAW"')],
                    "Not this hazard", plain),
    "hazard: a list": (ex5.check_hazard, S5.missing_barrier_hazard, [('answer = "WAR"', 'answer = ["WAR"]')],
                       a.WRONG_TYPE, plain),
}

R6, F6, H6 = S6.reduce_sequential, S6.reduce_first_add, S6.histogram_shared
TREE_SYNC = "cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them"
LAB6 = {
    "tree: barrier inside `if tid < stride`": (ex6.check_sequential_reduction, R6,
                                               [("s[tid] += s[tid + stride]", "s[tid] += s[tid + stride]\ncuda.syncthreads()"),
                                                (TREE_SYNC, "")], h.BARRIER_IN_BRANCH),
    "tree: no barrier between levels": (ex6.check_sequential_reduction, R6, [(TREE_SYNC, "")], h.MISSING_BARRIER),
    "tree: no barrier after the loads": (
        ex6.check_sequential_reduction, R6,
        [("cuda.syncthreads()  # RAW: every element is in shared memory before anyone adds", "")], h.MISSING_BARRIER),
    "tree: wrong first stride": (ex6.check_sequential_reduction, R6,
                                 [("stride = cuda.blockDim.x // 2", "stride = cuda.blockDim.x // 4")], ex6.TREE),
    "tree: stride quartered": (ex6.check_sequential_reduction, R6, [("stride //= 2", "stride //= 4")], ex6.TREE),
    "tree: load unguarded": (ex6.check_sequential_reduction, R6,
                             [("s[tid] = x[i] if i < x.size else float32(0)", "s[tid] = x[i]")], h.MISSING_GUARD),
    "tree: float64 literal": (ex6.check_sequential_reduction, R6,
                              [("s[tid] = x[i] if i < x.size else float32(0)", "s[tid] = x[i] if i < x.size else 0.0")],
                              h.FLOAT64),
    "first add: second load unguarded": (ex6.check_first_add_any_n, F6,
                                         [("if i + cuda.blockDim.x < x.size:", "if i < x.size:")], h.MISSING_GUARD),
    "first add: second element never added": (ex6.check_first_add_any_n, F6,
                                              [("v += x[i + cuda.blockDim.x]", "v += float32(0)")], ex6.TREE),
    "histogram: final add without atomics": (ex6.check_histogram, H6,
                                             [("cuda.atomic.add(counts, b, s_counts[b])", "counts[b] += s_counts[b]")],
                                             ex6.RACE_ON_FINAL_ADD),
    "histogram: shared += without atomics": (ex6.check_histogram, H6,
                                             [("cuda.atomic.add(s_counts, values[i], 1)", "s_counts[values[i]] += 1")],
                                             h.MISSING_BARRIER),
    "histogram: no barrier after zeroing": (
        ex6.check_histogram, H6,
        [("cuda.syncthreads()  # RAW: every bin is zero before any thread adds into it", "")], h.MISSING_BARRIER),
    "histogram: no barrier before the final add": (
        ex6.check_histogram, H6,
        [("cuda.syncthreads()  # RAW: the block's histogram is complete before it is added to counts", "")],
        h.MISSING_BARRIER),
    "histogram: stride of one block": (ex6.check_histogram, H6, [("i += cuda.gridsize(1)", "i += cuda.blockDim.x")],
                                       ex6.COUNTED_TWICE),
    "histogram: no grid-stride loop": (ex6.check_histogram, H6, [("while i < values.size:", "if i < values.size:")],
                                       "Grid-stride loop"),
}

R7 = S7.read_sum
LAB7 = {
    "read_sum: stride of one block": (ex7.check_read_sum, R7, [("stride = cuda.gridsize(1)", "stride = cuda.blockDim.x")],
                                      "Grid-stride loop"),
    "read_sum: no loop": (ex7.check_read_sum, R7, [("while i < x.size:", "if i < x.size:")], "Grid-stride loop"),
    "read_sum: skips the last element": (ex7.check_read_sum, R7, [("while i < x.size:", "while i < x.size - 1:")],
                                         "Grid-stride loop"),
    "read_sum: <= in the loop": (ex7.check_read_sum, R7, [("while i < x.size:", "while i <= x.size:")], h.MISSING_GUARD),
    "read_sum: float64 accumulator": (ex7.check_read_sum, R7, [("acc = float32(0)", "acc = 0.0")], h.FLOAT64),
    "matvec: one flop per multiply-add": (ex7.check_matvec_counts, S7.matvec_counts,
                                          [("flops = 2 * m * n", "flops = m * n")], a.WRONG_ANSWER, plain),
    "matvec: x read m times": (ex7.check_matvec_counts, S7.matvec_counts,
                               [("nbytes = (m * n + n + m) * itemsize", "nbytes = (2 * m * n + m) * itemsize")],
                               a.WRONG_ANSWER, plain),
    "matvec: a string": (ex7.check_matvec_counts, S7.matvec_counts,
                         [("return flops, nbytes", "return str(flops), nbytes")], a.WRONG_TYPE, plain),
    "matvec: a list of one": (ex7.check_matvec_counts, S7.matvec_counts, [("return flops, nbytes", "return [flops]")],
                              a.WRONG_TYPE, plain),
    "roofline time: sum of the times": (ex7.check_roofline_time, S7.roofline_time_ms,
                                        [("time_ms = max(memory_ms, compute_ms)", "time_ms = memory_ms + compute_ms")],
                                        a.WRONG_ANSWER, plain),
    "roofline time: a string": (ex7.check_roofline_time, S7.roofline_time_ms,
                                [("return time_ms", "return str(time_ms)")], a.WRONG_TYPE, plain),
    "ridge: half": (ex7.check_ridge_fma_count, S7.ridge_fma_count,
                    [("count = balance * itemsize  # intensity = 2 * count flops / (2 * itemsize) bytes",
                      "count = balance * itemsize / 2")], a.WRONG_ANSWER, plain),
    "ridge: a list": (ex7.check_ridge_fma_count, S7.ridge_fma_count, [("return count", "return [count]")],
                      a.WRONG_TYPE, plain),
}

ALL = {"1": LAB1, "2": LAB2, "3": LAB3, "4": LAB4, "5": LAB5, "6": LAB6, "7": LAB7}
CASES = [(lab, name) for lab, table in ALL.items() for name in table]


@pytest.mark.parametrize("lab, name", CASES, ids=[f"lab{lab}: {name}" for lab, name in CASES])
def test_mutants_are_rejected_with_their_class(lab, name):
    check, solution, edits, bug_class, *jit = ALL[lab][name]
    student = mutant(solution, *edits, jit=jit[0] if jit else None)
    classes = bug_class if isinstance(bug_class, tuple) else (bug_class,)
    with pytest.raises(CheckFailed) as info:
        check(student)
    text = str(info.value)
    assert any(text.lower().startswith(c.lower()) for c in classes), f"expected {classes}, got: {text[:500]}"


KERNEL_CHECKERS = [ex1.check_fill_index, ex2.check_grid_stride, ex3.check_tiled_transpose, ex4.check_even_odd_sorted,
                   ex5.check_naive, ex6.check_sequential_reduction, ex6.check_histogram, ex7.check_read_sum]


@pytest.mark.parametrize("check", KERNEL_CHECKERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", [None, {"kernel": 1}, [1, 2], "kernel"], ids=["None", "dict", "list", "str"])
def test_kernel_checkers_refuse_what_is_not_a_kernel(check, bad):
    with pytest.raises(CheckFailed, match=f"^{h.NOT_A_KERNEL}"):
        check(bad)


def test_kernel_checkers_refuse_a_plain_function():
    with pytest.raises(CheckFailed, match=f"^{h.NOT_A_KERNEL}.*plain Python function"):
        ex1.check_vector_add(S1.vector_add.py_func)


@pytest.mark.parametrize("check", [ex2.check_amdahl, ex4.check_blocks_per_sm, ex7.check_roofline_time],
                         ids=lambda c: c.__name__)
def test_function_checkers_refuse_what_is_not_a_function(check):
    with pytest.raises(CheckFailed, match=f"^{h.NOT_A_FUNCTION}"):
        check("0.5")


def test_mutant_counts():
    """Mutants per lab: at least one per exercise (the report quotes these counts)."""
    assert {lab: len(table) for lab, table in ALL.items()} == {"1": 14, "2": 12, "3": 15, "4": 11, "5": 16, "6": 15,
                                                                  "7": 13}
