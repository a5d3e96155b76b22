"""One exercise harness for every kernel exercise: an exercise is declared, the harness does the checking.

An :class:`Exercise` states what the kernel must compute (a NumPy reference), how to make its arguments for
one :class:`Case` (a size, a block, a seeded random generator, the threshold value to plant), the block
shapes to try, and the tolerances. :func:`check` then, always and in this order:

1. checks the student's object: a ``@cuda.jit`` kernel (or a ``@cuda.jit(device=True)`` function where the
   exercise wants one), with a message saying which it got (a plain function, a kernel, a dict, None...);
2. types the code and rejects float64 arithmetic in a float32 exercise, naming the line
   (:mod:`~labhelpers.exercises.typing_probe`: the same verdict on both backends);
3. runs the race detector (:func:`labhelpers.check_races`) on a launch with MORE than one block and a
   PARTIAL last block, for every block shape (a barrier inside ``if i < n`` shows only there); an access
   out of bounds there is a missing bounds guard, on both backends (the detector runs in the simulator);
4. runs every case: sizes ``1``, ``B - 1``, ``B + 1``, ``2B + 1`` (``B`` the elements one block covers) and the
   exercise's own, for every block shape, then the same sizes with every threshold value planted in the
   inputs; on a GPU the simulator's cases first, then larger ones, so a bug gets the same message;
5. compares the WHOLE output buffers with the reference: outputs are allocated larger and the band after
   them filled with a sentinel (:class:`GuardedOutput`), inputs are followed by NaN (or a sentinel); a write
   into the band is a missing bounds guard, an output left at its fill was never written.

Every failure raises :class:`~labhelpers.errors.CheckFailed` whose message starts with the bug's class
(:data:`MISSING_GUARD`, :data:`BARRIER_IN_BRANCH`, :data:`THRESHOLD`, :data:`FLOAT64`...) and says what to change.

Example (the whole exercise 1 of a lab)::

    from labhelpers.exercises import harness as h

    def saxpy_reference(case, a, x, y):
        return a * x + y

    SAXPY = h.Exercise(
        name="your saxpy kernel",
        args=lambda c: (np.float32(2), c.floats(c.n), c.floats(c.n), h.Out(c.n, np.float32)),
        reference=saxpy_reference,                      # gets the case and the arguments that are not Out
        configs=[{"threads": 32}], configs_gpu=[{"threads": 256}],
        dtype=np.float32, rtol=1e-6, atol=1e-6)

    def check_saxpy(kernel):                            # what the lab's check cell calls
        h.check(SAXPY, kernel)
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numba import cuda

from .. import backend
from ..checkers import NUMBA_TRACE_LIMIT
from ..errors import CheckFailed, GPUOnlyError, LaunchConfigError
from ..launch import blocks_for, grid_2d
from . import typing_probe

# ------------------------------------------------------------------------------------------- bug classes
#: The class names that start the harness's messages (tests look for them).
MISSING_GUARD = "Missing bounds guard"
NEGATIVE_INDEX = "Negative shared index"
SWAPPED_AXES = "Swapped i/j (rows and columns)"
BARRIER_IN_BRANCH = "Barrier inside a branch"
MISSING_BARRIER = "Missing barrier (a race)"
THRESHOLD = "Threshold"
FLOAT64 = "Float64 literal"
NEVER_WRITTEN = "Elements never written"
EXTRA_WRITES = "Writes where nothing belongs"
WRONG_VALUES = "Wrong values"
NOT_A_KERNEL = "Not a kernel"
NOT_A_DEVICE_FUNCTION = "Not a device function"
NOT_A_FUNCTION = "Not a function"
BAD_RESULT = "Wrong kind of result"
DOES_NOT_RUN = "Does not run"
NOT_WRITTEN_YET = "Not written yet"

#: Elements of guard band after every array the harness gives a kernel.
BAND = 64
#: What fills an int output and the band after an int array (an unwritten element shows).
INT_SENTINEL = -(2**31) + 7
#: What follows an int input in memory (a read past the end gets a value no input has).
INT_AFTER_INPUT = 2**20 + 3


def failure(bug_class: str, text: str) -> CheckFailed:
    """A CheckFailed whose message starts with ``bug_class``: ``"Missing bounds guard: your kernel ..."``."""
    return CheckFailed(f"{bug_class}: {text}")


# ------------------------------------------------------------------------------------------- the student's object


def _describe(obj: Any) -> str:
    if obj is None:
        return "None"
    if isinstance(obj, dict):
        keys = ", ".join(map(repr, list(obj)[:3])) + (", ..." if len(obj) > 3 else "")
        return f"a dict with keys {keys}" if obj else "an empty dict"
    if isinstance(obj, (list, tuple)):
        return f"a {type(obj).__name__}"
    if isinstance(obj, (int, float, np.number)):
        return f"the number {obj!r}"
    if isinstance(obj, str):
        return f"the text {obj!r}"
    if isinstance(obj, np.ndarray):
        return f"an array of shape {obj.shape}"
    return f"a {type(obj).__name__}"


def _named(obj: Any) -> str:
    """`` named f`` for a function or kernel with a name, else ``""``."""
    name = getattr(getattr(obj, "py_func", obj), "__name__", None)
    return f" named {name}" if isinstance(name, str) and name != "<lambda>" else ""


def _order_hint(obj: Any) -> str:
    """What to check when a checker got a function of the other kind or a number: its arguments' order."""
    if callable(obj) or (isinstance(obj, (int, float, np.number)) and not isinstance(obj, bool)):
        return (" If the checker takes more than one argument, are they in the order of its signature (the "
                "kernel or function first, then the sizes and choose_* functions)?")
    return ""


def is_cuda_function(obj: Any) -> bool:
    """True for any ``@cuda.jit`` object, kernel or device function, on either backend."""
    return typing_probe._is_cuda_function(obj)


def is_device_function(obj: Any) -> bool:
    """True for a ``@cuda.jit(device=True)`` function on either backend."""
    if getattr(obj, "_device", False) is True:  # the simulator's FakeCUDAKernel
        return True
    options = getattr(obj, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device"))


def require_kernel(obj: Any, name: str) -> None:
    """Raise CheckFailed unless ``obj`` is a ``@cuda.jit`` kernel, saying what it is instead."""
    if is_cuda_function(obj) and not is_device_function(obj):
        return
    if is_cuda_function(obj):
        raise failure(NOT_A_KERNEL, f"{name} is a device function (@cuda.jit(device=True)); this exercise launches "
                                    "a kernel: decorate it with plain @cuda.jit (kernels are launched with "
                                    "kernel[blocks, threads](...) and return nothing).")
    what = f"a plain Python function{_named(obj)}" if callable(obj) else _describe(obj)
    raise failure(NOT_A_KERNEL, f"{name} must be a CUDA kernel: a function decorated with @cuda.jit (got {what})."
                                + _order_hint(obj))


def require_device_function(obj: Any, name: str) -> None:
    """Raise CheckFailed unless ``obj`` is a ``@cuda.jit(device=True)`` function, saying what it is instead.

    Under the simulator an undecorated function would run inside a kernel, and a kernel would even
    return values; on a GPU neither compiles. Both are refused here, on both backends.
    """
    if is_device_function(obj):
        return
    if is_cuda_function(obj):
        raise failure(NOT_A_DEVICE_FUNCTION, f"{name} is a kernel (@cuda.jit); kernels call a device function, "
                                             "which returns values: decorate it with @cuda.jit(device=True).")
    what = "a plain Python function, without @cuda.jit(device=True)" if callable(obj) else _describe(obj)
    raise failure(NOT_A_DEVICE_FUNCTION, f"{name} must be a device function: decorate it with "
                                         f"@cuda.jit(device=True) (got {what}). A plain Python function runs in "
                                         "the simulator but does not compile for a GPU.")


def require_function(obj: Any, name: str, signature: str) -> None:
    """Raise CheckFailed unless ``obj`` is a plain callable (a host function), e.g. ``signature="compact(x, t)"``."""
    if callable(obj) and not is_cuda_function(obj):
        return
    what = f"a CUDA kernel{_named(obj)}" if is_cuda_function(obj) else _describe(obj)
    raise failure(NOT_A_FUNCTION, f"{name} must be a Python function {signature} (got {what}); pass the function "
                                  "itself, not the result of calling it." + _order_hint(obj))


def as_result_array(value: Any, name: str, dtype: Any = None) -> np.ndarray:
    """``value`` (a host function's result) as a NumPy array, or CheckFailed saying what was expected."""
    if isinstance(value, np.ndarray):
        result = value
    elif hasattr(value, "copy_to_host"):
        result = value.copy_to_host()
    else:
        raise failure(BAD_RESULT, f"{name} returned {_describe(value)}: return a NumPy array (e.g. "
                                  "out.copy_to_host()[:count]), not a list, a device array's element or None.")
    if dtype is not None and result.dtype != np.dtype(dtype):
        raise failure(BAD_RESULT, f"{name} returned an array of {result.dtype}: return {np.dtype(dtype)}, the "
                                  "dtype of the input (an output written as float64 is twice the memory traffic).")
    return result


def integer_argument(value: Any, name: str, allowed: Sequence[int]) -> int:
    """``value`` if it is one of the ``allowed`` ints, else CheckFailed (e.g. swapped checker arguments)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) in allowed:
        return int(value)
    raise failure(BAD_RESULT, f"{name} must be one of {list(allowed)} (got {_describe(value)}): are the checker's "
                              "arguments in the right order?")


# ------------------------------------------------------------------------------------------- guard bands


def _fill_for(dtype: np.dtype, fill: Any = None):
    if fill is not None:
        return fill
    return np.nan if dtype.kind in "fc" else np.iinfo(dtype).max if dtype.kind == "u" else INT_SENTINEL


#: What fills the band after a float output: finite and unlike anything a kernel computes, and unlike the NaN after
#: every float input, so that a kernel which reads past an input (NaN) and writes the result past an output is seen
#: (a band of NaN would still hold NaN). A GPU does not fault there; the simulator raises IndexError.
FLOAT_BAND = -3.0e38


def _band_fill_for(dtype: np.dtype, fill: Any = None):
    """What fills the guard band after an output: :data:`FLOAT_BAND` for floats, else the output's fill."""
    return FLOAT_BAND if np.dtype(dtype).kind in "fc" else _fill_for(np.dtype(dtype), fill)


def _banded(values: np.ndarray, band_fill) -> tuple[Any, Any]:
    """A device buffer holding ``values`` then :data:`BAND` ``band_fill``; returns (whole buffer, view)."""
    flat = np.full(values.size + BAND, band_fill, dtype=values.dtype)
    flat[:values.size] = values.ravel()
    whole = cuda.to_device(flat)
    return whole, whole[:values.size].reshape(values.shape)


def guarded_input(values: np.ndarray):
    """A device view of ``values`` whose memory continues with NaN (floats) or a sentinel (ints)."""
    values = np.ascontiguousarray(values)
    after = np.nan if values.dtype.kind in "fc" else (np.iinfo(values.dtype).max if values.dtype.kind == "u"
                                                       else INT_AFTER_INPUT)
    return _banded(values, after)[1]


class GuardedOutput:
    """An output of ``shape`` filled with ``fill``, followed in device memory by :data:`BAND` of the band's fill.

    ``.view`` is what the kernel gets; :meth:`whole` is the buffer with its band, which the harness
    compares as a whole: a write into the band is a write past the end (a GPU does not fault there; the
    simulator raises IndexError), an element still holding ``fill`` was never written.
    """

    def __init__(self, shape: Any, dtype: Any, fill: Any = None) -> None:
        self.shape = tuple(np.atleast_1d(shape).tolist()) if not isinstance(shape, tuple) else shape
        self.dtype = np.dtype(dtype)
        self.fill = _fill_for(self.dtype, fill)
        self.band_fill = _band_fill_for(self.dtype, fill)
        self.buffer, self.view = _banded(np.full(self.shape, self.fill, dtype=self.dtype), self.band_fill)

    @classmethod
    def of(cls, out: "Out") -> "GuardedOutput":
        """The guarded buffer for an :class:`Out` declaration (its ``initial`` values copied in)."""
        guarded = cls(out.shape, out.dtype, out.fill)
        if out.initial is not None:
            guarded.buffer[:guarded.view.size] = np.asarray(out.initial, guarded.dtype).ravel()
        return guarded

    def whole(self) -> np.ndarray:
        """The output and its band, copied to the host (flat)."""
        return self.buffer.copy_to_host()

    def wrote_outside(self) -> bool:
        """Whether anything was written into the band."""
        band = self.whole()[int(np.prod(self.shape)):]
        return not _same(band, np.full(band.shape, self.band_fill, band.dtype))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


# ------------------------------------------------------------------------------------------- declarations


@dataclass(frozen=True)
class Out:
    """Marks a kernel argument as an output: the harness allocates it (guard band included) and compares it.

    ``fill`` is what it holds before the launch (NaN for floats, :data:`INT_SENTINEL` for ints); the
    reference returns the whole expected output, with ``fill`` (NaN) where the kernel must not write.
    """

    shape: Any
    dtype: Any = np.float32
    fill: Any = None
    initial: Any = None  #: values it holds before the launch instead of ``fill`` (an array updated in place)


@dataclass
class Case:
    """One trial: what ``Exercise.args`` and ``Exercise.reference`` get.

    Attributes:
        n: the size (an int, or ``(rows, columns)`` for a 2D exercise).
        threads: the block shape (an int, or ``(x, y)`` threads).
        params: the config's other entries (e.g. ``{"radius": 3}``), also readable as ``case["radius"]``.
        edge: a threshold value the inputs must contain (plant it with :meth:`plant`), or None.
        rng: a generator seeded from the exercise's seed and the case's number.
    """

    n: Any
    threads: Any
    params: Mapping[str, Any]
    edge: Any
    rng: np.random.Generator

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    @property
    def size(self) -> int:
        """Elements in all: ``n``, or rows * columns."""
        return int(np.prod(self.n))

    def floats(self, n: Any = None, dtype: Any = np.float32) -> np.ndarray:
        """Random floats in [-1, 1) of shape ``n`` (default: the case's), with :attr:`edge` planted if set."""
        return self.plant(self.rng.uniform(-1, 1, size=self.n if n is None else n).astype(dtype))

    def ints(self, n: Any = None, dtype: Any = np.int32, low: int = -9, high: int = 10) -> np.ndarray:
        """Random ints in [low, high) of shape ``n``, with :attr:`edge` planted if set."""
        return self.plant(self.rng.integers(low, high, size=self.n if n is None else n).astype(dtype))

    def plant(self, values: np.ndarray) -> np.ndarray:
        """``values`` with :attr:`edge` written at every third element and at the last (no-op without an edge)."""
        if self.edge is not None and values.size:
            flat = values.reshape(-1)
            flat[::3] = self.edge
            flat[-1] = self.edge
        return values


@dataclass(frozen=True)
class Exercise:
    """A kernel exercise, declared. See the module docstring for what :func:`check` does with it.

    Attributes:
        name: how messages name the student's code ("your stencil kernel").
        args: ``args(case)`` returns the kernel's arguments as host values, outputs as :class:`Out`.
        reference: ``reference(case, *inputs)`` (the arguments that are not Out, and the initial values of an
            Out updated in place) returns the expected
            outputs, one array per Out (a single array when there is one), each of the Out's whole shape.
        configs: the launches tried under the simulator (and first on a GPU): dicts with ``"threads"``
            (an int, or ``(x, y)`` for 2D) and the exercise's own parameters.
        configs_gpu: more launches tried on a GPU only.
        per_thread: elements one thread covers (Blelloch: 2), for the grid and the awkward sizes.
        sizes: extra sizes per config, ``sizes(config) -> [n, ...]``; sizes_gpu: more on a GPU only.
        thresholds: values the reference compares against (``x > t``): every size is tried again with
            each of them planted in the inputs (:meth:`Case.plant`).
        threshold_hint: what to change when only those cases fail.
        dtype: the compute dtype (np.float32: float64 arithmetic is refused), or None.
        rtol, atol: tolerances of float outputs (ints compare exactly).
        device_function: the student writes a device function, not a kernel: ``device_function`` is
            ``(kernel_factory, argtypes, return type)`` with ``kernel_factory(student)`` the kernel to launch.
        explain: ``explain(case, index, got, expected, inputs)`` returns exercise-specific ``(bug class, hint)``
            for wrong values of output number ``index``, or None for the harness's own diagnosis.
        close: ``close(case, index, got, expected, inputs)`` returns a boolean array (which values are right) when
            ``rtol``/``atol`` do not fit (e.g. sums with cancellation: relative to the terms' size).
        races: run the race detector (default True: cheap, and it finds missing guards on both backends).
        show_got: messages show the wrong values (False where they may be leftovers of shared memory, which
            differ from run to run and between backends: the message names positions and expected values).
        seed: the seed of every case's generator.
    """

    name: str
    args: Callable[[Case], tuple]
    reference: Callable[..., Any]
    configs: Sequence[Mapping[str, Any]]
    configs_gpu: Sequence[Mapping[str, Any]] = ()
    per_thread: int = 1
    sizes: Callable[[Mapping[str, Any]], Sequence[Any]] | None = None
    sizes_gpu: Sequence[Any] = ()
    thresholds: Sequence[Any] = ()
    threshold_hint: str = ("inputs equal to the threshold give the wrong result: compare with > where the "
                           "specification says greater (not >=), and with >= where it says at least")
    dtype: Any = None
    rtol: float = 1e-5
    atol: float = 1e-6
    device_function: tuple | None = None
    explain: Callable[..., Any] | None = None
    close: Callable[..., Any] | None = None
    races: bool = True
    show_got: bool = True
    seed: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- geometry


def _is_2d(threads: Any) -> bool:
    return isinstance(threads, tuple) and len(threads) == 2


def grid_for(n: Any, threads: Any, per_thread: int = 1) -> Any:
    """Blocks for size ``n``: ``blocks_for`` per dimension (x runs along columns for 2D)."""
    if _is_2d(threads):
        return grid_2d(n, threads)
    return blocks_for(n, threads, per_thread)


def awkward_sizes(threads: Any, per_thread: int = 1) -> list[Any]:
    """Sizes every case list includes: 1, B - 1 and B + 1 (B = elements per block: B + 1 is two blocks, the
    last one partial); 2D: the same per side, and one row, one column."""
    if _is_2d(threads):
        bx, by = threads
        return [(1, 1), (max(1, by - 1), max(1, bx - 1)), (by + 1, 2 * bx + 1), (2 * by + 1, bx + 1), (1, bx + 3),
                (by + 3, 1)]
    per_block = int(threads) * per_thread
    return sorted({1, max(1, per_block - 1), per_block + 1})


def _race_size(threads: Any, per_thread: int) -> Any:
    """More than one block and a partial last one."""
    if _is_2d(threads):
        return (threads[1] + 1, threads[0] + 1)
    return int(threads) * per_thread + 1


# ------------------------------------------------------------------------------------------- running


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            yield


def _configs(ex: Exercise) -> list[Mapping[str, Any]]:
    return list(ex.configs) + ([] if backend.is_simulator() else list(ex.configs_gpu))


def _params(config: Mapping[str, Any]) -> dict:
    return {k: v for k, v in config.items() if k != "threads"}


def _launchable(ex: Exercise, student: Any) -> Any:
    """Check the student's object; return the kernel to launch."""
    if ex.device_function is not None:
        require_device_function(student, ex.name)
        factory, _argtypes, _ret = ex.device_function
        return factory(student)
    require_kernel(student, ex.name)
    return student


def _run(kernel: Any, grid: Any, threads: Any, args: Sequence[Any], ex: Exercise, where: str) -> None:
    try:
        with _quiet():
            kernel[grid, threads](*args)
    except IndexError:
        raise _outside(ex, where) from None
    except NotImplementedError as exc:
        raise failure(NOT_WRITTEN_YET, f"{ex.name} is not written yet: replace the `raise NotImplementedError` "
                                       f"({exc}).") from None
    except (CheckFailed, LaunchConfigError):
        raise
    except Exception as exc:  # noqa: BLE001  (a compile or run error: say which)
        text = str(exc)
        if len(text) > NUMBA_TRACE_LIMIT:
            text = text[:NUMBA_TRACE_LIMIT] + " [...]"
        raise failure(DOES_NOT_RUN, f"{ex.name} did not compile or run {where} ({type(exc).__name__}): "
                                    f"{text}") from None


def _outside(ex: Exercise, where: str) -> CheckFailed:
    return failure(MISSING_BOUNDS_TEXT[0], f"{ex.name} read or wrote outside an array {where}. The grid is rounded "
                                           f"up to whole blocks, so the last block has threads without an element: "
                                           f"{MISSING_BOUNDS_TEXT[1]}")


MISSING_BOUNDS_TEXT = (MISSING_GUARD, "guard every load and store with the size (`if i < x.size:`, in 2D "
                                      "`if i < ny and j < nx:`), never a cuda.syncthreads(), and keep every "
                                      "index at 0 or more.")


def _where(case: Case) -> str:
    n = f"{case.n[0]}x{case.n[1]}" if isinstance(case.n, tuple) else f"n={case.n}"
    block = f"({case.threads[0]}, {case.threads[1]})" if _is_2d(case.threads) else f"{case.threads}"
    extra = "".join(f", {k}={v}" for k, v in case.params.items())
    edge = f", inputs equal to the threshold {case.edge!r}" if case.edge is not None else ""
    return f"for {n}{extra} with {block} threads per block{edge}"


def _split(args: Sequence[Any]) -> tuple[list[Any], list[Out]]:
    """The reference's inputs (an Out with ``initial`` values is updated in place: its values are an input too)
    and the outputs."""
    inputs = [a.initial if isinstance(a, Out) else a for a in args if not isinstance(a, Out) or a.initial is not None]
    outs = [a for a in args if isinstance(a, Out)]
    return inputs, outs


def _expected(ex: Exercise, case: Case, inputs: list[Any], outs: list[Out]) -> list[np.ndarray]:
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in inputs]
    with _quiet():
        result = ex.reference(case, *copies)
    result = list(result) if isinstance(result, (tuple, list)) else [result]
    assert len(result) == len(outs), f"{ex.name}: the reference returns {len(result)} outputs for {len(outs)} Out"
    return [np.asarray(r).astype(o.dtype, copy=False).reshape(np.atleast_1d(o.shape) if not isinstance(
        o.shape, tuple) else o.shape) for r, o in zip(result, outs)]


def _check_array_shapes(ex: Exercise, student: Any) -> None:
    """A shared or local array whose shape is not a compile-time constant: a GPU refuses to compile it, so both
    backends say so (the simulator would run it)."""
    shapes = typing_probe.nonconstant_array_shapes(student)
    if shapes:
        raise failure(DOES_NOT_RUN, f"{ex.name} does not compile on a GPU: the shape `{shapes[0]}` of a "
                                    "cuda.shared.array or cuda.local.array is computed, and Numba needs it known when "
                                    "the kernel is compiled. Write a literal or a module-level constant, or a tuple "
                                    "of them: shape=(TILE, 33), not shape=TILE * 33 or (TILE, TILE + 1).")


def _check_types(ex: Exercise, student: Any, kernel: Any, case: Case) -> None:
    """Float64 arithmetic in a float32 exercise, from the compiled types (the same verdict on both backends)."""
    if ex.device_function is not None:
        _factory, argtypes, ret = ex.device_function
        got = typing_probe.return_type(student, argtypes)
        lines = typing_probe.float64_lines(student, argtypes) if got is not None else None
        if got is not None and got != ret:
            where = f" (float64 at: {lines[0]})" if lines else ""
            raise failure(FLOAT64, f"{ex.name} returns {got}, not {ret}{where}. In Numba an int or a Python float "
                                   "literal mixed with float32 gives float64: write np.float32(0.5) * x, not 0.5 * x, "
                                   "and float32(1) / math.sqrt(r2), not 1 / math.sqrt(r2).")
        if not lines or np.dtype(ex.dtype or np.float64) != np.float32:
            return
        raise failure(FLOAT64, f"{ex.name} computes in float64 at `{lines[0]}`: write np.float32(0.25) (or "
                               "float32(0.25)) for a literal, and float32(1) / x for a division.")
    if ex.dtype is None or np.dtype(ex.dtype) != np.float32:
        return
    args = ex.args(case)
    argtypes = [typing_probe.typeof_argument(np.zeros(a.shape, a.dtype) if isinstance(a, Out) else a) for a in args]
    lines = typing_probe.float64_lines(kernel, argtypes)
    if lines:
        raise failure(FLOAT64, f"{ex.name} computes in float64 at `{lines[0]}`"
                               + (f" (and {len(lines) - 1} more line(s))" if len(lines) > 1 else "")
                               + ": a Python float literal (0.25) or an int divided with / is float64 in Numba, and "
                               "it makes the whole expression float64 (several times slower on a GPU). Write "
                               "np.float32(0.25) (a module constant such as QUARTER = np.float32(0.25)), or "
                               "float32(1) / x.")


def _race_check(ex: Exercise, kernel: Any, config: Mapping[str, Any], case_no: int) -> None:
    """The race detector on more than one block with a partial last one."""
    from ..racecheck import check_races  # racecheck imports checkers: imported here to keep the import order

    threads = config["threads"]
    case = Case(_race_size(threads, ex.per_thread), threads, _params(config), None,
                np.random.default_rng([ex.seed, 7777, case_no]))
    args = [_host_output(a) if isinstance(a, Out) else a for a in ex.args(case)]
    grid = grid_for(case.n, threads, ex.per_thread)
    try:
        with _quiet():
            report = check_races(kernel, grid, threads, *args)
    except GPUOnlyError:  # on a GPU, a kernel the simulator cannot rebuild: the value checks remain
        return
    except IndexError as exc:
        if "negative index" in str(exc):
            raise failure(NEGATIVE_INDEX, f"{ex.name} {_where(case)}: {exc}") from None
        raise _outside(ex, _where(case)) from None
    except Exception:  # noqa: BLE001  (a kernel that does not run is reported by the value checks)
        return
    if report.ok:
        return
    try:
        report.raise_for_problems(ex.name)
    except CheckFailed as exc:
        cls = BARRIER_IN_BRANCH + " (or after a return)" if report.barrier_problems else MISSING_BARRIER
        raise failure(cls, f"{_where(case)}, two blocks, the last one partial: {exc}") from None


def _host_output(out: Out) -> np.ndarray:
    if out.initial is not None:
        return np.array(out.initial, dtype=out.dtype).reshape(np.shape(out.initial))
    return np.full(out.shape, _fill_for(np.dtype(out.dtype), out.fill), dtype=out.dtype)


def _cases(ex: Exercise) -> list[Case]:
    cases: list[Case] = []
    counter = 0
    for config in _configs(ex):
        threads = config["threads"]
        sizes = list(awkward_sizes(threads, ex.per_thread))
        if ex.sizes is not None:
            sizes += [s for s in ex.sizes(config) if s not in sizes]
        if not backend.is_simulator():
            sizes += [s for s in ex.sizes_gpu if s not in sizes]
        for edge in (None, *ex.thresholds):
            for n in sizes:
                counter += 1
                cases.append(Case(n, threads, _params(config), edge, np.random.default_rng([ex.seed, counter])))
    # Threshold cases after the plain ones, so a plain bug is reported as such.
    return [c for c in cases if c.edge is None] + [c for c in cases if c.edge is not None]


def _compare(ex: Exercise, case: Case, got: np.ndarray, expected: np.ndarray, out: Out, index: int,
             inputs: list[Any]) -> None:
    size = expected.size
    whole_expected = np.concatenate([expected.ravel(), np.full(BAND, _band_fill_for(expected.dtype, out.fill),
                                                               expected.dtype)])
    where = _where(case)
    band = got[size:]
    if not _same(band, whole_expected[size:]):
        raise failure(MISSING_GUARD, f"{ex.name} wrote past the end of output #{index + 1} {where}. "
                                     f"{MISSING_BOUNDS_TEXT[1]}")
    got_view = got[:size].reshape(expected.shape)
    fill = _fill_for(expected.dtype, out.fill)
    if expected.dtype.kind in "fc":
        unwritten_got = np.isnan(got_view) if np.isnan(fill) else got_view == fill
        unwritten_expected = np.isnan(expected) if np.isnan(fill) else expected == fill
        close = np.isclose(got_view, expected, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
        if ex.close is not None:
            close = (unwritten_got & unwritten_expected) | (
                ~unwritten_got & ~unwritten_expected & np.asarray(ex.close(case, index, got_view, expected, inputs), bool))
    else:
        unwritten_got, unwritten_expected = got_view == fill, expected == fill
        close = got_view == expected
    if close.all():
        return
    bad = ~close
    shown = "; ".join((f"index {_index(i, expected.shape)}: got {got_view.flat[i].item()!r}, " if ex.show_got else
                       f"index {_index(i, expected.shape)}: ") + f"expected {expected.flat[i].item()!r}"
                      for i in np.flatnonzero(bad)[:3])
    summary = f"{int(bad.sum())} of {size} values differ ({shown})"
    if case.edge is not None:
        cls, hint = THRESHOLD, f"{ex.threshold_hint}."
    else:
        cls, hint = WRONG_VALUES, ""
    explained = ex.explain(case, index, got_view, expected, inputs) if ex.explain is not None else None
    if explained is None and case.edge is None and _swapped_axes(case, unwritten_got & ~unwritten_expected):
        explained = (SWAPPED_AXES, "the elements left unwritten are those a grid with rows and columns swapped "
                                   "misses: cuda.grid(2) returns (x, y), x along a row, so write `j, i = "
                                   "cuda.grid(2)` with i the row (compared with shape[0]) and j the column.")
    if explained is not None:
        cls, hint = explained if case.edge is None else (cls, f"{hint} {explained[1]}")
    elif (unwritten_got & bad).any() and not (unwritten_got & ~unwritten_expected & ~bad).any() \
            and not (bad & ~unwritten_got & (got_view != expected)).any() and case.edge is None:
        # Every wrong element holds the fill (or equals its expected value and is wrong only with its row): a
        # kernel that stored garbage beside the gaps, e.g. read unloaded shared memory, is a wrong value.
        cls, hint = NEVER_WRITTEN, ("elements still hold the checker's fill (never written): every element "
                                    "must be stored by the thread that owns it; check the conditions around the "
                                    "stores.")
    elif (unwritten_expected & bad).any() and case.edge is None:
        cls, hint = EXTRA_WRITES, ("elements that must stay unwritten were written: only the elements the "
                                   "specification names may be stored.")
    raise failure(cls, f"{ex.name} is wrong {where}: {summary}. {hint}".rstrip())


def _swapped_axes(case: Case, unwritten: np.ndarray) -> bool:
    """Whether exactly the elements a transposed 2D grid misses are unwritten (a swapped i/j)."""
    if not _is_2d(case.threads) or unwritten.ndim != 2 or not unwritten.any():
        return False
    gx, gy = grid_for(case.n, case.threads)
    rows, cols = np.indices(unwritten.shape)
    missed = ~((rows < gx * case.threads[0]) & (cols < gy * case.threads[1]))
    return bool(np.array_equal(unwritten, missed))


def _index(flat: int, shape: tuple) -> Any:
    idx = np.unravel_index(int(flat), shape)
    return int(idx[0]) if len(idx) == 1 else tuple(int(v) for v in idx)


def launch_case(ex: Exercise, kernel: Any, case: Case, args: Sequence[Any]) -> list[np.ndarray]:
    """Launch ``kernel`` on ``args`` (from ``ex.args(case)``) with guard bands; return each Out's whole buffer."""
    if case.edge is not None:
        assert any(isinstance(a, np.ndarray) and np.any(a == case.edge) for a in args), (
            f"{ex.name}: args() did not plant the threshold {case.edge!r}: build inputs with case.floats/ints or "
            "case.plant()")
    outs = [a for a in args if isinstance(a, Out)]
    guarded = {id(o): GuardedOutput.of(o) for o in outs}
    launch_args = [guarded[id(a)].view if isinstance(a, Out) else guarded_input(a) if isinstance(a, np.ndarray)
                   else a for a in args]
    _run(kernel, grid_for(case.n, case.threads, ex.per_thread), case.threads, launch_args, ex, _where(case))
    return [guarded[id(o)].whole() for o in outs]


def check(ex: Exercise, student: Any, *, quiet: bool = False) -> None:
    """Check ``student`` against exercise ``ex`` (see the module docstring); print one line on success.

    Raises:
        CheckFailed: with the bug's class first and what to change.
    """
    kernel = _launchable(ex, student)
    _check_array_shapes(ex, student)
    cases = _cases(ex)
    _check_types(ex, student, kernel, cases[0])
    if ex.races:
        for number, config in enumerate(_configs(ex)):
            _race_check(ex, kernel, config, number)
    for case in cases:
        args = ex.args(case)
        inputs, outs = _split(args)
        expected = _expected(ex, case, inputs, outs)
        got = launch_case(ex, kernel, case, args)
        for index, (g, e, o) in enumerate(zip(got, expected, outs)):
            _compare(ex, case, g, e, o, index, inputs)
    if not quiet:
        extra = f", with inputs equal to {list(ex.thresholds)}" if ex.thresholds else ""
        print(f"Correct: {ex.name} matches NumPy on all {len(cases)} cases tried (partial last blocks, one "
              f"element, several blocks{extra}); {'no race, ' if ex.races else ''}nothing written outside the "
              "outputs.")


__all__ = ["BAND", "BARRIER_IN_BRANCH", "NEGATIVE_INDEX", "SWAPPED_AXES", "Case", "EXTRA_WRITES", "Exercise", "FLOAT64", "GuardedOutput",
           "MISSING_BARRIER", "MISSING_GUARD", "NEVER_WRITTEN", "NOT_A_DEVICE_FUNCTION", "NOT_A_FUNCTION",
           "NOT_A_KERNEL", "Out", "THRESHOLD", "WRONG_VALUES", "as_result_array", "awkward_sizes", "check",
           "failure", "grid_for", "guarded_input", "integer_argument", "is_device_function", "require_device_function",
           "launch_case", "require_function", "require_kernel"]
