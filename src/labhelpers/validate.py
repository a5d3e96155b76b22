"""One place that checks arguments, so every wrong one gets an error that says what to pass.

>>> from labhelpers import validate
>>> n = validate.integer(n, "n", minimum=1)
>>> threads = validate.threads_per_block(threads)
>>> validate.array(x, "x", dtype=np.float32, ndim=1)

Every check raises :class:`~labhelpers.errors.ArgumentError` (a LabError that is both a
TypeError and a ValueError), or its subclasses :class:`~labhelpers.errors.LaunchConfigError`
(launch sizes) and :class:`~labhelpers.errors.ArrayArgumentError` (arrays). The message names
the argument and its value, and says what to change.

It is also the one home of launch limits (is this configuration allowed on this GPU, does it fit): the limits
(:data:`MAX_THREADS_PER_BLOCK`, :data:`MAX_BLOCK_DIMS`, :data:`MAX_GRID_DIMS`, :data:`DEFAULT_SHARED_PER_BLOCK`,
:func:`max_dynamic_shared` for this device), the checks that raise (:func:`threads_per_block`, :func:`block_shape`,
:func:`grid_shape`, :func:`launch`) and the one that says why not (:func:`check_launch`, for sweeps). The limits
are the same on both backends: the simulator refuses what a GPU refuses (``launchguard`` calls :func:`launch` at
every ``kernel[grid, block]``).
"""

from __future__ import annotations

import inspect
import math
import numbers as _numbers
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import backend, device
from .device import (  # noqa: F401  (the limits every CUDA GPU shares: stated in device.py, checked here)
    DEFAULT_SHARED_PER_BLOCK,
    MAX_BLOCK_DIMS,
    MAX_GRID_DIMS,
    MAX_THREADS_PER_BLOCK,
)
from .errors import ArgumentError, ArrayArgumentError, LaunchConfigError

_THREADS_FIX = ("choose threads per block between 1 and 1024, ideally a multiple of 32 (one warp) such as 128 "
                "or 256, and launch more blocks for more threads")


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, (bool, np.bool_)):
        return f"{value} (a bool)"
    if isinstance(value, np.ndarray):
        return repr(value.tolist()) if 0 < value.size <= 6 else f"an array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def _integer_problem(value: Any) -> str | None:
    """Why ``value`` is not a whole number (None if it is one)."""
    if value is None:
        return "got None (did a function return nothing?)"
    if isinstance(value, str):
        try:
            as_number = float(value)
        except ValueError:
            return f"got {_describe(value)}"
        example = int(as_number) if as_number.is_integer() else as_number
        return f"got {_describe(value)}: pass the number itself, e.g. {example}"
    if isinstance(value, (bool, np.bool_)):
        return f"got {_describe(value)}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, _numbers.Integral):
        return None
    if isinstance(value, _numbers.Real):
        if not math.isfinite(value):
            return f"got {value}"
        if float(value).is_integer():
            return None
        return (f"got {value}: round it (math.ceil, or integer division with //; for blocks, "
                "lh.blocks_for(n, threads))")
    return f"got {_describe(value)}"


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _range_text(minimum, maximum, *, interval: bool = False) -> str:
    if minimum is not None and maximum is not None:
        return f"in [{minimum:g}, {maximum:g}]" if interval else f"between {minimum} and {maximum}"
    bound = minimum if minimum is not None else maximum
    bound = f"{bound:g}" if interval else bound
    return f"at least {bound}" if minimum is not None else f"at most {bound}"


def integer(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None,
            allow_float: bool = True, error: type[ArgumentError] = ArgumentError) -> int:
    """``value`` as an int, if it is a whole number within ``[minimum, maximum]``.

    Accepts Python and NumPy integers and (unless ``allow_float=False``) floats with no fractional
    part (``100.0``); rejects None, text, bools and ``100.5``.

    Raises:
        ArgumentError: (or ``error``) naming ``name``, the value and the fix.
    """
    problem = _integer_problem(value)
    if problem is None and not allow_float and not isinstance(_scalar(value), _numbers.Integral):
        problem = f"got {value} (a float): pass an int (int({value}), or compute it with //)"
    if problem:
        raise error(f"{name} must be a whole number, {problem}.")
    result = int(value.item() if isinstance(value, np.ndarray) else value)
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise error(f"{name} must be {_range_text(minimum, maximum)}, got {result}.")
    return result


def power_of_two(value: Any, name: str, *, minimum: int = 1, maximum: int | None = None, what: str = "",
                 error: type[ArgumentError] = ArgumentError) -> int:
    """``value`` as an int, if it is a whole number within ``[minimum, maximum]`` and a power of two.

    ``what`` says what the number counts, in the message (``"addresses per warp"``).

    Raises:
        ArgumentError: (or ``error``) naming ``name``, the value and the fix.
    """
    result = integer(value, name, minimum=minimum, maximum=maximum, error=error)
    if result < 1 or result & (result - 1):
        counts = f" ({what})" if what else ""
        raise error(f"{name} must be a power of two {_range_text(minimum, maximum)}{counts}, got {result}")
    return result


def number(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
           finite: bool = True) -> float:
    """``value`` as a float, if it is a real number (finite unless ``finite=False``) within the bounds.

    Raises:
        ArgumentError: naming ``name``, the value and the fix.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if value is None or isinstance(value, (str, bool, np.bool_)) or not isinstance(value, _numbers.Real):
        extra = " (did a function return nothing?)" if value is None else ""
        raise ArgumentError(f"{name} must be a number, got {_describe(value)}{extra}.")
    result = float(value)
    if finite and not math.isfinite(result):
        raise ArgumentError(f"{name} must be a finite number, got {result}.")
    if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
        raise ArgumentError(f"{name} must be {_range_text(minimum, maximum, interval=True)}, got {value}.")
    return result


def numbers(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
            allow_inf: bool = False) -> np.ndarray:
    """``value`` (a number, a list or an array of them) as a float array, each within the bounds.

    For models that take a scalar or a whole sweep at once (``amdahl_speedup(0.1, [1, 2, 4])``).
    NaN is always refused: it usually means a timing that is missing (under the simulator timings
    are NaN), and the message says so. Infinity is refused unless ``allow_inf``.

    Raises:
        ArgumentError: naming ``name``, the offending value and the fix.
    """
    if value is None or isinstance(value, (str, bytes)):
        raise ArgumentError(f"{name} must be a number or an array of numbers, got {_describe(value)}.")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be a number or an array of numbers, got {_describe(value)}.") from None
    if np.isnan(arr).any():
        raise ArgumentError(f"{name} contains NaN ({_describe(value)}): was a timing missing (no GPU)?")
    if not allow_inf and np.isinf(arr).any():
        raise ArgumentError(f"{name} must be finite, got {_describe(value)}.")
    if (minimum is not None and (arr < minimum).any()) or (maximum is not None and (arr > maximum).any()):
        raise ArgumentError(f"{name} must be {_range_text(minimum, maximum, interval=True)}, got {_describe(value)}.")
    return arr


def threads_per_block(value: Any, name: str = "threads") -> int:
    """Threads per block as an int in 1..1024 (the limit of every CUDA GPU, and of the simulator here).

    Raises:
        LaunchConfigError: with the usual choices (a multiple of 32 such as 128 or 256).
    """
    problem = _integer_problem(value)
    if problem:
        raise LaunchConfigError(f"{name} (threads per block) must be a whole number, {problem}.")
    threads = int(value)
    if threads < 1:
        raise LaunchConfigError(f"{name}={threads}: a block needs at least 1 thread: {_THREADS_FIX}.")
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchConfigError(f"{name}={threads}: {threads} threads per block exceeds the limit of "
                                f"{MAX_THREADS_PER_BLOCK} on every CUDA GPU: {_THREADS_FIX}.")
    return threads


def _dims(value: Any, name: str, what: str) -> tuple[int, ...]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3:
        raise LaunchConfigError(f"{name} must be one number or a tuple of 1 to 3 numbers ({what} along x, y, z), "
                                f"got {_describe(value)}.")
    out = []
    for axis, v in zip("xyz", dims):
        where = "" if len(dims) == 1 else f" along {axis}"
        problem = _integer_problem(v)
        if problem is None and not isinstance(_scalar(v), _numbers.Integral):  # 2.0: Numba launches take ints only
            problem = f"got {v} (a float): launch sizes are ints, compute them with // (or lh.blocks_for)"
        if problem:
            raise LaunchConfigError(f"{name} must be a whole number of {what}{where}, {problem}.")
        out.append(int(v))
    return tuple(out)


def block_shape(value: Any, name: str = "block") -> tuple[int, ...]:
    """A block shape (threads along x, y, z) every CUDA GPU can launch, as a tuple of ints.

    Each dimension at least 1, x and y at most 1024, z at most 64, and 1024 threads in all.

    Raises:
        LaunchConfigError: naming the dimension and the fix.
    """
    dims = _dims(value, name, "threads")
    for axis, v, most in zip("xyz", dims, MAX_BLOCK_DIMS):
        where = " per block" if len(dims) == 1 else f" along {axis}"
        if v < 1:
            raise LaunchConfigError(f"{name}={_shape_text(value)}: a block needs at least 1 thread{where}, "
                                    f"got {v}: {_THREADS_FIX}.")
        if v > most:
            raise LaunchConfigError(f"{name}={_shape_text(value)}: {v} threads{where} exceeds the limit of "
                                    f"{most} on every CUDA GPU: {_THREADS_FIX}.")
    total = math.prod(dims)
    if total > MAX_THREADS_PER_BLOCK:
        raise LaunchConfigError(
            f"{name}={_shape_text(value)} is {' x '.join(map(str, dims))} = {total} threads per block, more than "
            f"the limit of {MAX_THREADS_PER_BLOCK} on every CUDA GPU: make the block smaller (e.g. (32, 8) or "
            "(16, 16)) and launch more blocks.")
    return dims


def grid_shape(value: Any, name: str = "grid") -> tuple[int, ...]:
    """A grid shape (blocks along x, y, z) every CUDA GPU can launch, as a tuple of ints.

    Raises:
        LaunchConfigError: naming the dimension and the fix (a grid of 0 blocks launches nothing: on a GPU
            it is an error, so it is one here too).
    """
    dims = _dims(value, name, "blocks")
    for axis, v, most in zip("xyz", dims, MAX_GRID_DIMS):
        if v < 1:
            raise LaunchConfigError(
                f"{name}={_shape_text(value)}: a grid needs at least 1 block along {axis}, got {v} (a GPU refuses "
                "an empty grid): compute the "
                "number of blocks with a ceiling division, lh.blocks_for(n, threads) = (n + threads - 1) // threads.")
        if v > most:
            raise LaunchConfigError(f"{name}={_shape_text(value)}: {v} blocks along {axis} exceeds the limit of "
                                    f"{most}: use a grid-stride loop (fewer blocks, each thread several elements).")
    return dims


def _shape_text(value: Any) -> str:
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def launch(grid: Any, block: Any, shared_bytes: Any = 0, *,
           max_shared: int = DEFAULT_SHARED_PER_BLOCK) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Check a launch ``kernel[grid, block, stream, shared_bytes]`` as a GPU would; return the shapes.

    Raises:
        LaunchConfigError: the configuration a GPU refuses, with the fix.
    """
    block_dims = block_shape(block, "block (threads per block)")
    grid_dims = grid_shape(grid, "grid (blocks per grid)")
    shared = integer(shared_bytes, "dynamic shared memory (bytes)", minimum=0, error=LaunchConfigError)
    if shared > max_shared:
        raise LaunchConfigError(
            f"{shared} bytes of dynamic shared memory per block exceeds the {max_shared} bytes a block gets: "
            "use smaller tiles, or fewer threads per block.")
    return grid_dims, block_dims


def check_launch(
    threads: int,
    shared_bytes: int = 0,
    *,
    max_threads: int = MAX_THREADS_PER_BLOCK,
    max_shared: int = DEFAULT_SHARED_PER_BLOCK,
) -> str | None:
    """Why a block of ``threads`` threads using ``shared_bytes`` cannot launch, or None: the reason form of
    :func:`launch` (a sweep skips the configuration and shows the reason, ``lh.check_launch``).

    Args:
        threads: threads per block (product of the block's dimensions).
        shared_bytes: shared memory per block, static plus dynamic.
        max_threads: the device's limit (1024 on every GPU since Fermi).
        max_shared: the device's shared memory per block without opt-in.

    Raises:
        LaunchConfigError: ``threads`` or ``shared_bytes`` is not a whole number (a mistake, not a limit).
    """
    threads = integer(threads, "threads", error=LaunchConfigError)
    shared_bytes = integer(shared_bytes, "shared_bytes", error=LaunchConfigError)
    if threads < 1:
        return f"a block needs at least 1 thread, not {threads}"
    if threads > max_threads:
        return f"{threads} threads per block exceeds the limit of {max_threads}"
    if shared_bytes > max_shared:
        return f"{shared_bytes} bytes of shared memory per block exceeds the {max_shared} bytes available"
    return None


def max_dynamic_shared() -> int:
    """Dynamic shared memory a block may ask for here: 48 KiB without opt-in under the simulator, the device's opt-in
    limit on a GPU. The one place a launch check asks the device for its limits."""
    if backend.is_simulator():
        return DEFAULT_SHARED_PER_BLOCK
    info = device.device_info()
    return info.max_shared_per_block_optin or info.max_shared_per_block


def _is_device_array(a: Any) -> bool:
    # The simulator's device arrays have no __cuda_array_interface__ but do have copy_to_host.
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "copy_to_host")


def _c_contiguous(a: Any) -> bool:
    if isinstance(a, np.ndarray):
        return bool(a.flags.c_contiguous)
    flags = getattr(a, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if isinstance(flags, dict) and "C_CONTIGUOUS" in flags:
        return bool(flags["C_CONTIGUOUS"])
    if hasattr(a, "is_c_contiguous"):
        return bool(a.is_c_contiguous())
    return True


def array(a: Any, name: str, *, dtype: Any | None = None, ndim: int | None = None,
          shape: Sequence[int] | None = None, contiguous: bool = True, finite: bool = False) -> None:
    """Raise :class:`ArrayArgumentError` unless ``a`` is the array a kernel expects.

    Args:
        a: a NumPy array, a Numba device array or a CuPy array.
        name: the argument's name, used in the message.
        dtype: required dtype, e.g. ``np.float32``.
        ndim: required number of dimensions.
        shape: required shape.
        contiguous: require C-contiguous memory (kernels index it as flat rows).
        finite: require every element to be finite (no NaN or inf; copies a device array to look).
    """
    if not (isinstance(a, np.ndarray) or _is_device_array(a)):
        extra = " (did a function return nothing?)" if a is None else f": wrap it with np.asarray({name})"
        raise ArrayArgumentError(
            f"{name} must be an array (NumPy, CuPy or a Numba device array), got "
            f"{'None' if a is None else type(a).__name__}{extra}.")
    if dtype is not None and np.dtype(a.dtype) != np.dtype(dtype):
        raise ArrayArgumentError(
            f"{name} has dtype {np.dtype(a.dtype)}, but this kernel expects {np.dtype(dtype)}: "
            f"pass {name}.astype(np.{np.dtype(dtype).name}).")
    if ndim is not None and a.ndim != ndim:
        raise ArrayArgumentError(f"{name} must have {ndim} dimension(s), got shape {tuple(a.shape)}.")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ArrayArgumentError(f"{name} must have shape {tuple(shape)}, got {tuple(a.shape)}.")
    if contiguous and not _c_contiguous(a):
        raise ArrayArgumentError(
            f"{name} is not C-contiguous (a transposed or strided view?): pass "
            f"np.ascontiguousarray({name}) (or cupy.ascontiguousarray) instead.")
    if finite:
        host = _on_host(a)
        if host.dtype.kind in "fc" and not np.isfinite(host).all():
            bad = int(np.count_nonzero(~np.isfinite(host)))
            raise ArrayArgumentError(f"{name} holds {bad} NaN or infinite value(s): pass finite numbers.")


def _on_host(a: Any) -> np.ndarray:
    """``a`` as a NumPy array (what :func:`labhelpers.arrays.to_host` does; arrays imports this module, so this
    module does not import arrays: no import cycle)."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return a.get() if hasattr(a, "get") else np.asarray(a)


def choice(value: Any, name: str, options: Iterable[Any]) -> Any:
    """``value`` if it is one of ``options``.

    Raises:
        ArgumentError: listing the options.
    """
    options = tuple(options)
    try:
        ok = value in options
    except TypeError:  # an unhashable value against a set-like container
        ok = False
    if not ok:
        raise ArgumentError(f"{name} must be one of {', '.join(map(repr, options))}; got {_describe(value)}.")
    return value


def _is_device_function(obj: Any) -> bool:
    if getattr(obj, "_device", False) is True:  # the simulator's FakeCUDAKernel
        return True
    options = getattr(obj, "targetoptions", None)
    return isinstance(options, dict) and bool(options.get("device"))


def kernel(obj: Any, name: str) -> None:
    """Raise :class:`ArgumentError` unless ``obj`` is a CUDA kernel (launched as ``obj[grid, block](...)``).

    Plain Python functions and ``@cuda.jit(device=True)`` functions get a message that says so.
    """
    if obj is None:
        raise ArgumentError(f"{name} must be a CUDA kernel (a function decorated with @cuda.jit), got None.")
    if not callable(getattr(obj, "__getitem__", None)) or not hasattr(obj, "py_func"):
        what = "a plain Python function" if callable(obj) else _describe(obj)
        raise ArgumentError(f"{name} must be a CUDA kernel: decorate the function with @cuda.jit (got {what}).")
    if _is_device_function(obj):
        raise ArgumentError(f"{name} is a device function (@cuda.jit(device=True)): kernels call it, but it cannot "
                            "be launched itself. Pass the @cuda.jit kernel that calls it.")


def signature_mismatch(fn: Callable, count: int) -> str | None:
    """``fn``'s name and parameters (``"global_size_for(n, local_size)"``) when it cannot be called with ``count``
    positional arguments, else None (also when Python cannot read its signature, e.g. a builtin)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*([None] * count))
    except TypeError:
        return f"{getattr(fn, '__name__', type(fn).__name__)}{sig}"
    return None


def _what_to_pass(name: str, example: str | None, *, brackets: bool = False) -> str:
    if not example:
        return ""
    return f" (`{example}`)" if brackets else f", e.g. `{example}`"


def function(obj: Any, name: str, *, example: str | None = None, takes: int | None = None) -> Callable:
    """``obj`` if it is callable (and, with ``takes``, callable with that many positional arguments).

    Raises:
        ArgumentError: e.g. for None, a dict or a number (the result of calling the function instead of the
            function), or a function of the wrong arguments (``takes``: a checker's arguments swapped), saying
            what was passed and what is expected.
    """
    if not callable(obj):
        what = (f"a dict{' (' + _describe(obj) + ')' if len(repr(obj)) <= 60 else ''}" if isinstance(obj, dict)
                else _describe(obj))
        raise ArgumentError(f"{name} must be a function{_what_to_pass(name, example)}; got {what}. Pass the "
                            "function itself, not the result of calling it.")
    if takes is not None:
        wrong = signature_mismatch(obj, takes)
        if wrong is not None:
            count = "no arguments" if takes == 0 else f"{takes} argument{'s' if takes != 1 else ''}"
            raise ArgumentError(f"{name} is called with {count}{_what_to_pass(name, example, brackets=True)}, but "
                                f"the function "
                                f"passed is {wrong}: pass the function this argument asks for (if you pass "
                                "several, are they in the order of the signature?).")
    return obj


def devices(value: Any, name: str = "devices", *, available: int, minimum: int = 1) -> tuple[int, ...]:
    """``value`` as a tuple of GPU numbers, one per logical GPU, each below ``available`` (the GPUs this machine has).

    A GPU number may repeat: ``(0, 0, 0)`` is three logical GPUs on GPU 0 (how the simulator, which has one pretend
    GPU, runs a multi-GPU algorithm, and how one real GPU tests the code).

    Raises:
        ArgumentError: not a sequence of whole numbers, fewer than ``minimum`` entries, or a GPU that does not exist.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ArgumentError(f"{name} must be a tuple of GPU numbers, one per logical GPU, e.g. (0, 1); got "
                            f"{_describe(value)}.")
    if len(value) < minimum:
        raise ArgumentError(f"{name} must name at least {minimum} GPU(s), e.g. {tuple(range(minimum))}; got "
                            f"{tuple(value)!r}.")
    ids = tuple(integer(v, f"{name}[{k}]", minimum=0) for k, v in enumerate(value))
    missing = sorted({d for d in ids if d >= available})
    if missing:
        have = f"GPUs 0-{available - 1}" if available > 1 else "GPU 0 only"
        raise ArgumentError(f"{name}={ids!r} asks for GPU {missing[0]}, which does not exist: this machine has "
                            f"{available} ({have}). Name GPUs below {available}; a number may repeat, e.g. "
                            f"{(0,) * len(ids)!r} runs {len(ids)} logical GPUs on GPU 0.")
    return ids


def array_device(a: Any) -> int | None:
    """The GPU holding the device array ``a`` (CuPy's ``a.device.id``, Numba's context), or None when unknown.

    None for NumPy arrays and for the simulator's device arrays, which live on its one pretend GPU.
    """
    device = getattr(a, "device", None)
    if device is not None and isinstance(getattr(device, "id", None), _numbers.Integral):
        return int(device.id)
    context = getattr(getattr(a, "gpu_data", None), "context", None)
    number = getattr(getattr(context, "device", None), "id", None)
    return int(number) if isinstance(number, _numbers.Integral) else None


def on_device(a: Any, name: str, device: int) -> None:
    """Raise :class:`ArrayArgumentError` when the device array ``a`` is known to live on another GPU than ``device``.

    Nothing to check for NumPy arrays and under the simulator (one pretend GPU holds everything).
    """
    where = array_device(a)
    if where is not None and where != device:
        raise ArrayArgumentError(f"{name} lives on GPU {where}, but it is used on GPU {device}: allocate it inside "
                                 f"`with cuda.gpus[{device}]:` (or `cupy.cuda.Device({device})`), or copy it there "
                                 "first.")


def divides(n: Any, name: str, parts: int, parts_name: str) -> int:
    """``n`` as an int, if ``parts`` divides it evenly.

    Raises:
        ArgumentError: naming the two nearest multiples of ``parts``.
    """
    n = integer(n, name, minimum=1)
    if n % parts:
        lower, upper = n - n % parts, n - n % parts + parts
        raise ArgumentError(f"{name}={n} does not divide evenly over {parts_name}={parts}: use a multiple of "
                            f"{parts}, e.g. {upper}" + (f" or {lower}" if lower else "") + ".")
    return n


__all__ = ["array", "array_device", "block_shape", "check_launch", "choice", "devices", "divides", "function",
           "grid_shape", "integer", "kernel", "launch", "max_dynamic_shared", "number", "numbers", "on_device",
           "signature_mismatch", "threads_per_block"]
