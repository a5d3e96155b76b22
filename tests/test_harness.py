"""The exercise harness (labhelpers.exercises.harness): every guarantee it makes, on small kernels written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labhelpers as lh  # noqa: F401  (chooses the backend before numba.cuda is imported)
from numba import cuda, float32  # noqa: E402

from labhelpers.errors import CheckFailed  # noqa: E402
from labhelpers.exercises import harness as h  # noqa: E402

HALF = np.float32(0.5)
NAN32 = np.float32(math.nan)
TILE = 64


# ------------------------------------------------------------------------------------------- exercises


def _saxpy_reference(case, a, x, y):
    return a * x + y


SAXPY = h.Exercise(
    name="your saxpy kernel",
    args=lambda c: (np.float32(2), c.floats(), c.floats(), h.Out(c.n, np.float32)),
    reference=_saxpy_reference,
    configs=[{"threads": 32}], configs_gpu=[{"threads": 256}],
    dtype=np.float32, rtol=1e-6, atol=1e-6)


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_unguarded(a, x, y, out):
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_float64(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2.0 * x[i] * HALF * a / 2 + y[i]


@cuda.jit
def saxpy_int_division(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = (a / 2) * 2 * x[i] + y[i]


@cuda.jit
def saxpy_no_write_last_block(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size and cuda.blockIdx.x < cuda.gridDim.x - 1:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_garbage_beside_nans(a, x, y, out):
    # Like a kernel that reads shared memory nobody loaded: some outputs get a NaN, the others a wrong number.
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]
        if i % 2 == 1:
            out[i] = NAN32
        elif i > 0:
            out[i] += HALF


def _keep_reference(case, x, t):
    return np.where(x > t, x, np.float32(0))


KEEP = h.Exercise(
    name="your keep kernel",
    args=lambda c: (c.floats(), np.float32(0.25), h.Out(c.n, np.float32)),
    reference=_keep_reference, configs=[{"threads": 32}], thresholds=(np.float32(0.25),), dtype=np.float32,
    threshold_hint="elements equal to the threshold are not kept: use > not >=")


@cuda.jit
def keep(x, t, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] if x[i] > t else float32(0)


@cuda.jit
def keep_ge(x, t, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] if x[i] >= t else float32(0)




def _shift_reference(case, x):
    """out[i] = x[i - 1] within each block (0 for the block's first thread); shared memory."""
    out = np.zeros_like(x)
    b = case.threads
    for i in range(x.size):
        if i % b:
            out[i] = x[i - 1]
    return out


SHIFT = h.Exercise(name="your shift kernel", args=lambda c: (c.floats(), h.Out(c.n, np.float32)),
                   reference=_shift_reference, configs=[{"threads": 32}], dtype=np.float32)


@cuda.jit
def shift(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    if i < x.size:
        out[i] = s[t - 1] if t > 0 else float32(0)


@cuda.jit
def shift_barrier_in_branch(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        s[t] = x[i]
        cuda.syncthreads()
        out[i] = s[t - 1] if t > 0 else float32(0)


@cuda.jit
def shift_no_barrier(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else float32(0)
    if i < x.size:
        out[i] = s[t - 1] if t > 0 else float32(0)


@cuda.jit(device=True)
def scale_device(x, y):
    return x * HALF + y


def scale_plain(x, y):
    return x * HALF + y


@cuda.jit(device=True)
def scale_float64(x, y):
    return x * 0.5 + y


def _device_kernel(device_function):
    @cuda.jit
    def apply(x, y, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = device_function(x[i], y[i])

    return apply


SCALE = h.Exercise(
    name="your scale function", args=lambda c: (c.floats(), c.floats(), h.Out(c.n, np.float32)),
    reference=lambda case, x, y: x * HALF + y, configs=[{"threads": 32}], dtype=np.float32,
    device_function=(_device_kernel, (float32, float32), float32), races=False)


# ------------------------------------------------------------------------------------------- tests


def _fails(ex, student, bug_class):
    with pytest.raises(CheckFailed) as info:
        h.check(ex, student, quiet=True)
    assert str(info.value).startswith(bug_class), str(info.value)
    return str(info.value)


def test_solutions_pass(capsys):
    for ex, kernel in ((SAXPY, saxpy), (KEEP, keep), (SHIFT, shift), (SCALE, scale_device)):
        h.check(ex, kernel)
    assert capsys.readouterr().out.count("Correct:") == 4


def test_missing_guard():
    _fails(SAXPY, saxpy_unguarded, h.MISSING_GUARD)


def test_float64_literal_named_with_its_line():
    text = _fails(SAXPY, saxpy_float64, h.FLOAT64)
    assert "2.0 * x[i]" in text and "np.float32(0.25)" in text


def test_int_divided_with_slash_is_float64():
    _fails(SAXPY, saxpy_int_division, h.FLOAT64)


def test_never_written():
    _fails(SAXPY, saxpy_no_write_last_block, h.NEVER_WRITTEN)


def test_nans_beside_wrong_numbers_are_wrong_values_not_never_written():
    # The class must not hang on what garbage happens to hold: a NaN stored beside wrong numbers is a wrong value.
    _fails(SAXPY, saxpy_garbage_beside_nans, h.WRONG_VALUES)


def test_threshold():
    text = _fails(KEEP, keep_ge, h.THRESHOLD)
    assert "use > not >=" in text


def test_barrier_inside_a_branch_needs_a_partial_block():
    text = _fails(SHIFT, shift_barrier_in_branch, h.BARRIER_IN_BRANCH)
    assert "the last one partial" in text


def test_missing_barrier():
    _fails(SHIFT, shift_no_barrier, h.MISSING_BARRIER)


def test_device_function_must_be_decorated():
    text = _fails(SCALE, scale_plain, h.NOT_A_DEVICE_FUNCTION)
    assert "float64" not in text and "plain Python function" in text


def test_kernel_given_for_device_function_and_reverse():
    assert "is a kernel" in _fails(SCALE, saxpy, h.NOT_A_DEVICE_FUNCTION)
    assert "device function" in _fails(SAXPY, scale_device, h.NOT_A_KERNEL)


def test_device_function_float64():
    assert "float64" in _fails(SCALE, scale_float64, h.FLOAT64)


@pytest.mark.parametrize("bad", [None, {"kernel": saxpy}, [1, 2], 3, "saxpy", np.zeros(3)])
def test_bad_objects_get_check_failed(bad):
    _fails(SAXPY, bad, h.NOT_A_KERNEL)
    _fails(SCALE, bad, h.NOT_A_DEVICE_FUNCTION)


def test_host_results_and_arguments():
    with pytest.raises(CheckFailed, match="return a NumPy array"):
        h.as_result_array([1.0, 2.0], "compact")
    with pytest.raises(CheckFailed, match="float32"):
        h.as_result_array(np.zeros(3), "compact", np.float32)
    with pytest.raises(CheckFailed, match="right order"):
        h.integer_argument(saxpy, "tile", (32, 64))
    with pytest.raises(CheckFailed, match="Python function"):
        h.require_function({"f": 1}, "compact", "compact(x, threshold)")


def test_awkward_sizes_always_include_a_partial_block_and_several_blocks():
    assert h.awkward_sizes(32) == [1, 31, 33]
    assert h.awkward_sizes(4, per_thread=2) == [1, 7, 9]
    sizes = h.awkward_sizes((8, 4))
    assert (1, 1) in sizes and (5, 17) in sizes  # rows by + 1 (two block rows), columns 2 bx + 1


def test_guarded_output_sees_a_write_past_the_end():
    out = h.GuardedOutput(5, np.float32)
    assert not out.wrote_outside()
    out.buffer[5] = 1.0  # noqa  (what a kernel without a guard does on a GPU)
    assert out.wrote_outside()


def test_cases_are_reproducible():
    a = [c.rng.integers(1000) for c in h._cases(SAXPY)]
    b = [c.rng.integers(1000) for c in h._cases(SAXPY)]
    assert a == b


def test_the_same_math_is_float32():
    assert math.isclose(float(HALF), 0.5)


def test_a_nan_written_past_a_float_output_is_seen():
    """A kernel that reads past an input (NaN there) and writes the result past an output writes NaN into the band:
    the band holds a finite sentinel, so that write shows on a GPU too (where nothing faults)."""
    guarded = h.GuardedOutput((4,), np.float32)
    assert not guarded.wrote_outside()
    band = guarded.buffer.copy_to_host()
    band[4] = np.nan
    guarded.buffer.copy_to_device(band)
    assert guarded.wrote_outside()
    assert np.isnan(guarded.whole()[:4]).all()  # the output itself still starts unwritten (NaN)


# ------------------------------------------------------------------------------------------- misuse


def test_misuse_is_answered_by_the_book():
    """Swapped arguments and a dict where a function goes: the class, what was passed and what is expected."""
    from labhelpers.exercises import answers

    def choose_threads():
        return 128

    def blocks_per_sm(threads, registers, shared):
        return 1

    with pytest.raises(CheckFailed, match=r"^Wrong function: choose_threads is called as choose_threads\(\) "
                                          r"\(no arguments\), but the function passed is "
                                          r"blocks_per_sm\(threads, registers, shared\).*order"):
        answers.call(blocks_per_sm, "choose_threads")
    with pytest.raises(CheckFailed, match=r"^Wrong function: .*\(2 arguments\).*choose_threads\(\)"):
        answers.call(choose_threads, "blocks_per_sm", 128, 32)
    assert answers.call(choose_threads, "choose_threads") == 128
    with pytest.raises(CheckFailed, match=r"^Not a kernel: .*\(got the number 8\)\. If the checker takes more than "
                                          "one argument, are they in the order"):
        h.require_kernel(8, "matmul_tiled_kernel")
    with pytest.raises(CheckFailed, match=r"^Not a kernel: .*plain Python function named choose_threads.*order"):
        h.require_kernel(choose_threads, "your kernel")
    with pytest.raises(CheckFailed, match=r"^Not a function: .*\(got a CUDA kernel named saxpy\).*order"):
        h.require_function(saxpy, "compact", "compact(x, threshold)")
    with pytest.raises(CheckFailed, match=r"^Not a function: .*\(got a dict with keys 'MP', 'SB'\); pass the function "
                                          "itself"):
        h.require_function({"MP": True, "SB": False}, "litmus_answers", "litmus_answers()")
    with pytest.raises(CheckFailed, match=r"got an empty dict"):
        h.require_kernel({}, "your kernel")
