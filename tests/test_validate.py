"""One validation layer: wrong arguments get an ArgumentError that says what to change, on both backends.

The "new user" cases of issue 10 each have a test here that failed before labhelpers.validate existed.
"""

import numpy as np
import pytest
from numba import cuda, float32

import labhelpers as lh
from labhelpers import launchguard, validate
from labhelpers.exercises import cuda_intro as intro_ex
from labhelpers.exercises import matmul as matmul_ex


@cuda.jit
def fill_index(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i


@cuda.jit(device=True)
def helper(x):
    return x + 1


def plain(out):
    out[0] = 1


# --- the error classes ---------------------------------------------------------------------------------

def test_argument_error_is_a_type_and_value_error():
    from labhelpers.errors import ArgumentError

    assert lh.ArgumentError is ArgumentError
    for cls in (lh.ArgumentError, lh.LaunchConfigError, lh.ArrayArgumentError):
        assert issubclass(cls, lh.LabError) and issubclass(cls, TypeError) and issubclass(cls, ValueError)
    assert issubclass(lh.LaunchConfigError, lh.ArgumentError) and issubclass(lh.ArrayArgumentError, lh.ArgumentError)
    assert lh.validate is validate


# --- launches a GPU refuses fail the same way under the simulator --------------------------------------

@pytest.mark.parametrize("grid, block, words", [
    (1, 2048, ["2048 threads per block", "1024", "multiple of 32"]),
    (1, 0, ["at least 1 thread", "multiple of 32"]),
    (0, 32, ["at least 1 block", "blocks_for"]),
    ((2, 2), (32, 32, 2), ["2048 threads per block", "(32, 8)"]),
    ((1, 1), (1, 1, 65), ["along z", "64"]),
    (2.5, 32, ["whole number", "blocks_for"]),
    (2.0, 32, ["a float", "//"]),
    (None, 32, ["None"]),
])
def test_impossible_launches_raise_the_same_error_on_both_backends(grid, block, words):
    out = np.zeros(4)
    with pytest.raises(lh.LaunchConfigError) as info:
        fill_index[grid, block](out)
    for word in words:
        assert word in str(info.value)


def test_possible_launches_still_run():
    out = np.zeros(70)
    fill_index[2, 64](out)
    fill_index[(1, 1), (1024, 1, 1)](out)
    fill_index[[1], [64]](out)  # lists are fine too (checked every time, not cached)
    fill_index[np.int64(3), np.int32(32)](out)
    assert np.array_equal(out, np.arange(70))


def test_list_configurations_reach_numba_as_tuples():
    # numba-cuda's CUDADispatcher.configure is lru_cached: a list there is "unhashable" on a GPU only
    conf = launchguard.as_hashable(([1], [64, 1], 0, 0))
    assert conf == ((1,), (64, 1), 0, 0)
    hash(conf)
    assert launchguard.as_hashable((2, 64)) == (2, 64)
    assert launchguard.as_hashable("x") == "x"
    # NumPy integers reach numba as Python ints (cuda.core refuses np.int64 in a launch configuration on a GPU)
    conf = launchguard.as_hashable((np.int64(3), [np.int32(32)]))
    assert conf == (3, (32,)) and type(conf[0]) is int and type(conf[1][0]) is int


def test_dynamic_shared_memory_beyond_a_block_is_refused():
    with pytest.raises(lh.LaunchConfigError, match="shared memory"):
        fill_index[1, 32, 0, 10**7](np.zeros(4))
    with pytest.raises(lh.LaunchConfigError, match="shared memory"):
        fill_index[1, 32, 0, -1](np.zeros(4))


def test_launch_guard_is_installed_once_and_can_be_removed():
    cls = launchguard._kernel_class()
    guarded = cls.__getitem__
    launchguard.install()
    assert cls.__getitem__ is guarded
    launchguard.uninstall()
    try:
        assert cls.__getitem__ is guarded.__wrapped__
    finally:
        launchguard.install()
    with pytest.raises(lh.LaunchConfigError):
        fill_index[1, 2048](np.zeros(4))


# --- the other cases tried as a new user would -----------------------------------------------------------

def test_fill_index_checker_refuses_threads_no_gpu_can_launch():
    for threads in (5000, 0, 2048, 64.5):
        with pytest.raises(lh.LaunchConfigError, match="threads per block"):
            intro_ex.check_fill_index(fill_index, threads=threads)
    with pytest.raises(lh.LaunchConfigError, match="1024"):
        intro_ex.check_vector_add(fill_index, threads=5000)
    with pytest.raises(lh.LaunchConfigError, match="2048 threads"):
        intro_ex.check_scale_2d(fill_index, block=(64, 32))


def test_launch_1d_takes_whole_numbers_only():
    with pytest.raises(lh.ArgumentError, match=r"whole number.*100\.5"):
        lh.launch_1d(100.5, 128)
    with pytest.raises(lh.LaunchConfigError, match="whole number"):
        lh.launch_1d(100, 128.5)
    assert tuple(lh.launch_1d(100.0, 128)) == (1, 128)
    assert tuple(lh.launch_1d(np.int64(257), np.int32(256))) == (2, 256)


@pytest.mark.parametrize("bad", [None, "1000", "many", True, [3]])
def test_sizes_that_are_not_numbers_name_the_problem(bad):
    for call in (lambda: lh.launch_1d(bad, 128), lambda: lh.blocks_for(bad, 32), lambda: lh.blocks_for(100, bad),
                 lambda: lh.launch_1d(100, bad), lambda: lh.problem_size(gpu=bad, sim=10),
                 lambda: lh.problem_size(gpu=10, sim=bad), lambda: lh.check_launch(bad)):
        with pytest.raises(lh.ArgumentError) as info:
            call()
        message = str(info.value)
        assert "not supported" not in message and "whole number" in message
    if bad is None:
        assert "None" in message


def test_text_that_holds_a_number_says_pass_the_number():
    with pytest.raises(lh.ArgumentError, match="pass the number itself, e.g. 1000"):
        lh.launch_1d("1000", 128)


def test_negative_sizes():
    with pytest.raises(lh.LaunchConfigError, match="at least 0"):
        lh.blocks_for(-1, 32)
    with pytest.raises(lh.ArgumentError, match="at least 1"):
        lh.problem_size(gpu=0, sim=10)


def test_to_device_refuses_none_and_non_numbers():
    with pytest.raises(lh.ArrayArgumentError, match="None"):
        lh.to_device(None)
    with pytest.raises(lh.ArrayArgumentError, match="numbers"):
        lh.to_device([1, "a", None])
    assert np.array_equal(lh.to_host(lh.to_device([1.0, 2.0])), [1.0, 2.0])


def test_benchmark_needs_a_function():
    with pytest.raises(lh.ArgumentError, match="lambda"):
        lh.benchmark(None)
    out = np.zeros(4)
    with pytest.raises(lh.ArgumentError, match="not the result of calling it"):
        lh.benchmark(fill_index[1, 32](out))  # launched, not passed: benchmark got None
    with pytest.raises(lh.ArgumentError, match="repeat"):
        lh.benchmark(lambda: None, repeat=0)
    with pytest.raises(ValueError):  # still a ValueError for code that caught one
        lh.benchmark(lambda: None, number=1.5)


@cuda.jit
def matmul_row_col_swapped(A, B, C):
    row, col = cuda.grid(2)  # the mistake: x runs along the columns
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0)
        for p in range(A.shape[1]):
            acc += A[row, p] * B[p, col]
        C[row, col] = acc


@cuda.jit
def matmul_mirrored(A, B, C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = 0.0
        for p in range(A.shape[1]):
            acc += A[col, p] * B[p, row]  # the mistake: row and column exchanged in the reads
        C[row, col] = acc


def test_matmul_checker_names_a_row_column_swap():
    with pytest.raises(lh.CheckFailed, match="^Swapped i/j.*Row and column are swapped") as info:
        matmul_ex.check_naive(matmul_row_col_swapped)
    assert "col, row = cuda.grid(2)" in str(info.value) and "does the grid cover" not in str(info.value)
    expected = np.arange(9, dtype=np.float32).reshape(3, 3)
    assert matmul_ex.swap_hint(expected.T.copy(), expected, (16, 8)).startswith(
        "Row and column are swapped: C[row, col] holds (A @ B)[col, row]")


def test_swap_hint_stays_quiet_for_other_mistakes():
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert matmul_ex.swap_hint(expected + 1, expected, (16, 8)) is None
    unwritten = expected.copy()
    unwritten[:, 3] = np.nan  # a missing column, not the swapped-grid pattern
    assert matmul_ex.swap_hint(unwritten, expected, (2, 2)) is None
    assert matmul_ex.swap_hint(np.full((3, 4), np.nan, dtype=np.float32), expected, (16, 8)) is None


# --- the validate functions themselves ------------------------------------------------------------------

def test_integer():
    assert validate.integer(np.int64(5), "n") == 5 and type(validate.integer(5.0, "n")) is int
    assert validate.integer(np.array(7), "n") == 7
    for bad, words in [(None, "None"), ("x", "text"), (True, "bool"), (2.5, "2.5"), (float("nan"), "nan"),
                       (np.ones(3), r"\[1.0, 1.0, 1.0\]"), (np.ones(9), "array of shape")]:
        with pytest.raises(lh.ArgumentError, match=words):
            validate.integer(bad, "n")
    with pytest.raises(lh.ArgumentError, match="between 1 and 10, got 11"):
        validate.integer(11, "n", minimum=1, maximum=10)
    with pytest.raises(lh.ArgumentError, match="at most 3"):
        validate.integer(4, "n", maximum=3)
    with pytest.raises(lh.ArgumentError, match=r"a float\): pass an int"):
        validate.integer(4.0, "n", allow_float=False)


def test_number():
    assert validate.number(np.float32(1.5), "x") == 1.5 and validate.number(3, "x") == 3.0
    assert validate.number(float("inf"), "x", finite=False) == float("inf")
    for bad in (None, "1.5", True, float("nan"), float("inf"), 1j):
        with pytest.raises(lh.ArgumentError, match="x must be a"):
            validate.number(bad, "x")
    with pytest.raises(lh.ArgumentError, match=r"in \[0, 1\], got 1.5"):
        validate.number(1.5, "x", minimum=0.0, maximum=1.0)


def test_threads_and_shapes():
    assert validate.threads_per_block(1024) == 1024 and validate.threads_per_block(np.int16(1)) == 1
    for bad in (0, 1025, -32, "256", None, 32.5):
        with pytest.raises(lh.LaunchConfigError, match="threads"):
            validate.threads_per_block(bad)
    assert validate.block_shape(128) == (128,) and validate.block_shape([16, 16]) == (16, 16)
    assert validate.block_shape((32, 32, 1)) == (32, 32, 1)
    for bad in ((32, 33), (0, 4), (1, 1, 65), (1, 1, 1, 1), (), (16.5, 2)):
        with pytest.raises(lh.LaunchConfigError):
            validate.block_shape(bad)
    assert validate.grid_shape((3, 2)) == (3, 2)
    for bad in ((0, 1), (1, 70000), 2**31):
        with pytest.raises(lh.LaunchConfigError):
            validate.grid_shape(bad)


def test_array():
    x = np.zeros((4, 3), dtype=np.float32)
    validate.array(x, "x", dtype=np.float32, ndim=2, shape=(4, 3))
    validate.array(lh.to_device(x), "x", dtype=np.float32, finite=True)
    for kwargs, words in [({"dtype": np.float64}, "astype"), ({"ndim": 1}, "1 dimension"),
                          ({"shape": (3, 4)}, "shape")]:
        with pytest.raises(lh.ArrayArgumentError, match=words):
            validate.array(x, "x", **kwargs)
    with pytest.raises(lh.ArrayArgumentError, match="ascontiguousarray"):
        validate.array(x.T, "x")
    with pytest.raises(lh.ArrayArgumentError, match="did a function return nothing"):
        validate.array(None, "x")
    with pytest.raises(lh.ArrayArgumentError, match="np.asarray"):
        validate.array([1, 2], "x")
    with pytest.raises(lh.ArrayArgumentError, match="1 NaN or infinite"):
        validate.array(np.array([1.0, np.nan]), "x", finite=True)


def test_choice_kernel_function():
    assert validate.choice("offset", "kind", ("offset", "stride")) == "offset"
    with pytest.raises(lh.ArgumentError, match="'offset', 'stride'; got the text 'strides'"):
        validate.choice("strides", "kind", ("offset", "stride"))
    with pytest.raises(lh.ArgumentError, match="one of"):
        validate.choice([1], "kind", {1, 2})
    validate.kernel(fill_index, "fill_index")
    with pytest.raises(lh.ArgumentError, match="decorate the function with @cuda.jit"):
        validate.kernel(plain, "fill_index")
    with pytest.raises(lh.ArgumentError, match="device function"):
        validate.kernel(helper, "helper")
    with pytest.raises(lh.ArgumentError, match="None"):
        validate.kernel(None, "fill_index")
    assert validate.function(plain, "f") is plain
    with pytest.raises(lh.ArgumentError, match="e.g. `lambda: 1`"):
        validate.function(3, "f", example="lambda: 1")


def test_checkers_report_a_non_kernel_as_a_failed_check():
    with pytest.raises(lh.CheckFailed, match="@cuda.jit"):
        intro_ex.check_fill_index(plain)


def test_function_says_what_was_passed_and_what_it_is_called_with():
    """A dict where a function goes, and a function of the wrong arguments (a checker's arguments swapped)."""
    with pytest.raises(lh.ArgumentError, match=r"got a dict \({'r0': 1}\).*function itself"):
        validate.function({"r0": 1}, "answers_fn")

    def global_size_for(n, local_size):
        return n

    with pytest.raises(lh.ArgumentError, match=r"called with no arguments.*global_size_for\(n, local_size\).*order"):
        validate.function(global_size_for, "diff_opencl", takes=0)
    with pytest.raises(lh.ArgumentError, match=r"called with 1 argument\b"):
        validate.function(global_size_for, "make_buffers", takes=1)
    assert validate.function(global_size_for, "global_size_for", takes=2) is global_size_for
    assert validate.function(lambda *args: 0, "f", takes=5)  # *args takes anything
    assert validate.function(print, "f", takes=3) is print  # a builtin whose signature Python may not read
    assert validate.signature_mismatch(global_size_for, 2) is None
