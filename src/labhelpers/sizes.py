"""Problem sizes that keep every cell fast: big on a GPU, small under the simulator.

The simulator runs each CUDA thread as a Python thread, a few thousand per second, so
a size that fills a GPU would take hours there. Chapters never hard-code a size: they
ask :func:`problem_size` for one.

FP64 work is the other case: a T4 runs float64 at 1/32 of its float32 rate, an L4 at 1/64, while the
reference GPU runs it at half. :func:`fp64_problem_size` shrinks a float64 size on such FP64-poor GPUs
(:attr:`labhelpers.gpus.GPU.fp64_poor`) so the cell takes about as long as on the reference GPU.
"""

from __future__ import annotations

import math

from . import backend, gpus, validate

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


def fp64_problem_size(gpu: int, sim: int, *, power: int = 1, multiple: int = 1) -> int:
    """A size for float64 work: ``gpu`` on a GPU with a fast FP64 unit, smaller on an FP64-poor one.

    On a GPU whose FP64 peak is below :data:`labhelpers.gpus.FP64_POOR_RATIO` of its FP32 peak (a T4, an L4,
    consumer GPUs), the work shrinks by that GPU's FP64 peak over the reference GPU's, so the cell takes about as
    long as it did there (a T4: 253 against 34,000 GFLOP/s, so 1/134 of the work). Under the simulator: ``sim``.

    Args:
        gpu: the size on the reference GPU (or any GPU with fast FP64).
        sim: the size under the simulator.
        power: how the work grows with the size: 1 for a vector, 3 for an n x n matrix product.
        multiple: round the result down to a multiple of this (a tile or block size); never below it.

    Example:
        >>> n = fp64_problem_size(gpu=8192, sim=64, power=3, multiple=256)
    """
    gpu = validate.integer(gpu, "fp64_problem_size(gpu=...)", minimum=1)
    sim = validate.integer(sim, "fp64_problem_size(sim=...)", minimum=1)
    power = validate.integer(power, "power", minimum=1)
    multiple = validate.integer(multiple, "multiple", minimum=1)
    if backend.is_simulator():
        return sim
    return scale_for_fp64(gpu, gpus.current(), gpus.reference(), power=power, multiple=multiple)


def scale_for_fp64(size: int, here: "gpus.GPU", reference: "gpus.GPU", *, power: int = 1, multiple: int = 1) -> int:
    """``size`` scaled for float64 work on ``here``: unchanged unless ``here`` is FP64-poor, else shrunk so that
    ``size ** power`` falls by ``here``'s FP64 peak over ``reference``'s (see :func:`fp64_problem_size`)."""
    if not here.fp64_poor or not here.fp64_gflops or not reference.fp64_gflops:
        return size
    factor = min(1.0, here.fp64_gflops / reference.fp64_gflops) ** (1.0 / power)
    return max(multiple, int(math.floor(size * factor / multiple)) * multiple)
