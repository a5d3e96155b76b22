"""Problem sizes that keep every cell fast: big on a GPU, small under the simulator.

The simulator runs each CUDA thread as a Python thread, a few thousand per second, so
a size that fills a GPU would take hours there. Chapters never hard-code a size: they
ask :func:`problem_size` for one.
"""

from __future__ import annotations

from . import backend, validate

#: Sizes every checker tries on a GPU: tiny, one below and above a warp, and a large
#: odd number that is a multiple of no block size.
AWKWARD_SIZES_GPU: tuple[int, ...] = (1, 31, 33, 257, 1_000_003)
#: The simulator's version of the same list: the large odd size scaled down.
AWKWARD_SIZES_SIM: tuple[int, ...] = (1, 31, 33, 257, 1_003)


def problem_size(gpu: int, sim: int) -> int:
    """Return ``gpu`` on a real GPU and ``sim`` under the simulator.

    Args:
        gpu: size to use on a GPU, large enough to fill it (e.g. ``2**26``).
        sim: size to use under the simulator, small enough to run in about a second
            (a few thousand threads at most).

    Example:
        >>> n = problem_size(gpu=2**24, sim=2_000)
    """
    gpu = validate.integer(gpu, "problem_size(gpu=...)", minimum=1)
    sim = validate.integer(sim, "problem_size(sim=...)", minimum=1)
    return sim if backend.is_simulator() else gpu


def awkward_sizes() -> tuple[int, ...]:
    """The sizes checkers try: ones that break kernels without a bounds check."""
    return AWKWARD_SIZES_SIM if backend.is_simulator() else AWKWARD_SIZES_GPU
