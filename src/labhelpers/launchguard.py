"""Launches the hardware refuses fail the same way on a GPU and under the simulator.

Numba's simulator runs ``kernel[1, 2048]`` or ``kernel[1, 0]`` without complaint, while a GPU
refuses both (numba raises ``CudaAPIError: CUDA_ERROR_INVALID_VALUE`` at the launch, a message
that names no fix). :func:`install`, called by ``import labhelpers``, checks every
``kernel[grid, block, stream, shared]`` configuration with :func:`labhelpers.validate.launch` (the one home of
launch limits, with this device's shared memory from :func:`labhelpers.validate.max_dynamic_shared`) before
Numba sees it, on both backends, so both raise the same
:class:`~labhelpers.errors.LaunchConfigError` that says what to change.

Under the simulator a launch of more than :data:`SIM_MAX_THREADS` threads (a GPU-sized input: a scan of
2**22 elements, a stencil of 10**7 points) is refused at once with :class:`SimulatorTooSlow`, which says how
long it would take and points at ``lh.problem_size``: the simulator runs a few thousand threads per second, and
such a launch would otherwise run for many minutes without a word. This is the one place that threshold lives.

Configurations that pass are remembered (a set lookup), so a benchmark's repeated launches
pay nothing measurable. A list-valued grid or block (``kernel[[4], [64]]``) is passed on as a
tuple: numba-cuda's ``CUDADispatcher.configure`` caches configurations with
``functools.lru_cache`` and would raise ``TypeError: unhashable type: 'list'`` on a GPU, while the
simulator accepts lists.
"""

from __future__ import annotations

import numbers

from typing import Any, Callable

import numpy as np

from . import backend, patching, validate
from .errors import SimulatorTooSlow

#: Most threads (all blocks together) one launch may run under the simulator; more would take minutes.
SIM_MAX_THREADS = 2**19
#: Threads the simulator runs per second, roughly (for the estimate in the message).
SIM_THREADS_PER_SECOND = 2000


_installed: dict[type, Any] = {}
_known_good: set = set()
#: Functions called as ``hook(kernel, configuration, args)`` at every launch while registered (see :func:`add_launch_hook`).
_launch_hooks: list[Callable[[Any, tuple, tuple], None]] = []


class _HookedLaunch:
    """A configured launch that tells the launch hooks about its arguments before it runs (only while hooks exist)."""

    def __init__(self, kernel: Any, configuration: tuple, launch: Any) -> None:
        self._kernel, self._configuration, self._launch = kernel, configuration, launch

    def __call__(self, *args: Any) -> Any:
        for hook in list(_launch_hooks):
            hook(self._kernel, self._configuration, args)
        return self._launch(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._launch, name)


def add_launch_hook(hook: Callable[[Any, tuple, tuple], None]) -> None:
    """Call ``hook(kernel, configuration, args)`` before every ``kernel[configuration](*args)`` launch, both backends.

    ``configuration`` is the ``(grid, block[, stream[, shared]])`` tuple as checked (lists made tuples). Used by
    ``tools/record_launches.py`` to record what the book and the tests launch; remove it with
    :func:`remove_launch_hook`. With no hook registered a launch pays nothing for this.
    """
    if hook not in _launch_hooks:
        _launch_hooks.append(hook)


def remove_launch_hook(hook: Callable[[Any, tuple, tuple], None]) -> None:
    """Stop calling ``hook`` at launches (nothing happens if it was not registered)."""
    if hook in _launch_hooks:
        _launch_hooks.remove(hook)


def _check_configuration(configuration: Any) -> None:
    """Raise LaunchConfigError for a ``kernel[...]`` configuration this GPU refuses (None if it is fine).

    The limits and the check are :func:`labhelpers.validate.launch`'s (the one home of launch limits); this adds
    only the reading of Numba's configuration tuple, the remembered good ones, and the simulator's size.
    """
    if not isinstance(configuration, tuple) or len(configuration) not in (2, 3, 4):
        return  # Numba's own message ("must specify at least the griddim and blockdim") is clear enough
    grid, block = configuration[0], configuration[1]
    shared = configuration[3] if len(configuration) == 4 else 0
    try:
        key = (grid, block, shared)
        if key in _known_good and _integers_only(key):  # 128.0 == 128 and True == 1: look at the types too
            return
    except TypeError:  # a list: unhashable, check it every time
        key = None
    grid_dims, block_dims = validate.launch(grid, block, shared, max_shared=validate.max_dynamic_shared())
    if backend.is_simulator():
        check_simulator_size(int(np.prod(grid_dims)) * int(np.prod(block_dims)))
    if key is not None and _integers_only(key):
        _known_good.add(key)


def check_simulator_size(threads: int) -> None:
    """Raise :class:`SimulatorTooSlow` when a simulator launch of ``threads`` threads would take minutes."""
    if threads <= SIM_MAX_THREADS:
        return
    minutes = threads / SIM_THREADS_PER_SECOND / 60
    raise SimulatorTooSlow(
        f"this launch runs {threads:,} threads, and Numba's CUDA simulator runs about {SIM_THREADS_PER_SECOND:,} "
        f"threads per second: it would take about {minutes:,.0f} minutes. That is a GPU-sized input; under the "
        f"simulator use at most {SIM_MAX_THREADS:,} threads per launch, e.g. choose the size with "
        "n = lh.problem_size(gpu=2**22, sim=2_000) (GPU-sized on a GPU, small under the simulator).")


def _integers_only(key: tuple) -> bool:
    for v in key:
        for x in (v if isinstance(v, tuple) else (v,)):
            if type(x) is not int and not isinstance(x, np.integer):
                return False
    return True


def as_hashable(configuration: Any) -> Any:
    """``configuration`` with list-valued grid/block dimensions turned into tuples (anything else unchanged).

    numba-cuda caches ``configure(griddim, blockdim, ...)`` by its arguments, so a list there raises
    ``TypeError: unhashable type: 'list'`` on a GPU; the simulator takes lists. Tuples work on both. NumPy
    integers become Python ints too: numba-cuda passes them on to ``cuda.core``'s launch configuration, which
    refuses ``np.int64`` on a GPU.
    """
    if not isinstance(configuration, tuple) or len(configuration) not in (2, 3, 4):
        return configuration
    grid, block = (_plain_dims(v) for v in configuration[:2])
    return (grid, block, *configuration[2:])


def _plain_dims(value: Any) -> Any:
    """A grid or block size with lists made tuples and NumPy integers made Python ints."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v for v in value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def _kernel_class() -> type:
    if backend.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel  # the simulator's internals: used only under the simulator

        return FakeCUDAKernel
    from numba.cuda.dispatcher import CUDADispatcher  # the GPU driver's internals: used only on a GPU

    return CUDADispatcher


def install() -> None:
    """Check every kernel launch configuration first (idempotent)."""
    cls = _kernel_class()
    if cls in _installed:
        return
    original = cls.__getitem__

    def __getitem__(self, configuration):
        _check_configuration(configuration)
        configuration = as_hashable(configuration)
        launch = original(self, configuration)
        if _launch_hooks:
            return _HookedLaunch(self, configuration, launch)
        return launch

    __getitem__.__doc__ = original.__doc__
    __getitem__.__wrapped__ = original
    with patching.LOCK:  # never in the middle of a checker's replacements
        _installed[cls] = original
        cls.__getitem__ = __getitem__


def uninstall() -> None:
    """Restore Numba's own launch (for tests of this module)."""
    with patching.LOCK:
        for cls, original in _installed.items():
            cls.__getitem__ = original
        _installed.clear()
