"""Launch geometry: how many blocks, tiles and warps a launch needs.

The one home of launch geometry: ``blocks_for(n, threads)`` is the ceiling division every 1D launch needs,
``tiles_for(n, tile)`` counts the tiles (or chunks, or work-groups) of a fixed size that cover ``n`` elements,
and ``warps_for(threads)`` the warps of a block. The package writes no ceiling division of its own for a grid,
a count of blocks or tiles, or warps per block (``tests/test_launch_geometry.py``).

Whether the hardware can run a configuration (its limits, the device's shared memory, the reason a sweep skips
a configuration) is :mod:`labhelpers.validate`'s job, the one home of launch limits: the functions here call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import backend, validate
from .device import WARP_SIZE  # noqa: F401  (launch geometry counts in warps)
from .errors import LaunchConfigError
from .validate import MAX_THREADS_PER_BLOCK


@dataclass(frozen=True)
class Launch1D:
    """A one-dimensional launch: ``blocks`` blocks of ``threads`` threads for ``n`` elements."""

    n: int
    threads: int
    blocks: int

    @property
    def total_threads(self) -> int:
        """Threads launched: ``blocks * threads``."""
        return self.blocks * self.threads

    @property
    def idle_threads(self) -> int:
        """Threads launched beyond ``n``: they must do nothing (the bounds check)."""
        return self.total_threads - self.n

    @property
    def warps_per_block(self) -> int:
        """Warps per block, counting a partly filled last warp."""
        return warps_for(self.threads)

    def __iter__(self):
        """Unpack as ``kernel[*launch]`` style: ``blocks, threads``."""
        return iter((self.blocks, self.threads))


class ConfiguredKernel:
    """``kernel[griddim, blockdim]`` (or ``kernel[griddim, blockdim, stream]``), ready to be called many times:
    ``launch(*args)``.

    On a GPU the configured kernel is made once and kept (less Python per launch, which counts for
    kernels of microseconds launched in a loop); the simulator's ``kernel[...]`` configures the kernel
    object itself, so there it is configured again at every call.
    """

    def __init__(self, kernel: Any, griddim: Any, blockdim: Any, stream: Any = None) -> None:
        self.kernel, self.griddim, self.blockdim, self.stream = kernel, griddim, blockdim, stream
        self._configured: Any = None

    def _configure(self) -> Any:
        if self.stream is None:
            return self.kernel[self.griddim, self.blockdim]
        return self.kernel[self.griddim, self.blockdim, self.stream]

    def __call__(self, *args: Any) -> None:
        if backend.is_simulator():
            self._configure()(*args)
            return
        if self._configured is None:
            self._configured = self._configure()
        self._configured(*args)


def blocks_for(n: int, threads: int, per_thread: int = 1) -> int:
    """Blocks needed so that ``blocks * threads * per_thread >= n``: the ceiling of ``n / (threads * per_thread)``,
    at least 1 (an empty grid does not launch).

    ``per_thread`` is the number of elements one thread handles (a tile of ``threads * per_thread`` per block).

    Raises:
        LaunchConfigError: ``n``, ``threads`` or ``per_thread`` is not a whole number, ``n`` is negative,
            ``threads`` is not between 1 and 1024, or ``per_thread`` is below 1.
    """
    threads = validate.threads_per_block(threads, "threads")
    n = validate.integer(n, "the number of elements n", minimum=0, error=LaunchConfigError)
    per_thread = validate.integer(per_thread, "per_thread", minimum=1, error=LaunchConfigError)
    return max(1, _covering(n, threads * per_thread))


def tiles_for(n: int, tile: int) -> int:
    """Tiles of ``tile`` elements that cover ``n`` elements: the ceiling of ``n / tile``, 0 when ``n`` is 0.

    A tile is a fixed amount of work: what one block of a tiled kernel owns (a scan's or a radix sort's tile,
    an n-body tile of bodies), a chunk of a pipeline, a work-group of an OpenCL NDRange. Unlike
    :func:`blocks_for` (a grid, never empty) it counts what there is, so it may be 0.

    Raises:
        LaunchConfigError: ``n`` or ``tile`` is not a whole number, ``n`` is negative, or ``tile`` is below 1.

    Example:
        >>> tiles_for(1000, 256), tiles_for(1024, 256), tiles_for(0, 256)
        (4, 4, 0)
    """
    n = validate.integer(n, "the number of elements n", minimum=0, error=LaunchConfigError)
    tile = validate.integer(tile, "tile", minimum=1, error=LaunchConfigError)
    return _covering(n, tile)


def warps_for(threads: int, warp_size: int = WARP_SIZE) -> int:
    """Warps that hold ``threads`` threads, counting a partly filled last warp (it takes a whole warp's slot).

    ``threads`` is usually a block's (warps per block); a count of threads that are not one block gives the
    warps they fill when every block's size is a multiple of ``warp_size``.

    Raises:
        LaunchConfigError: ``threads`` or ``warp_size`` is not a whole number, ``threads`` is negative, or
            ``warp_size`` is below 1.

    Example:
        >>> warps_for(100), warps_for(128), warps_for(0)
        (4, 4, 0)
    """
    threads = validate.integer(threads, "threads", minimum=0, error=LaunchConfigError)
    warp_size = validate.integer(warp_size, "warp_size", minimum=1, error=LaunchConfigError)
    return _covering(threads, warp_size)


def _covering(n: int, unit: int) -> int:
    """Whole units of ``unit`` that cover ``n >= 0``: the one ceiling division of launch geometry."""
    whole, part = divmod(n, unit)
    return whole + (part > 0)


def grid_2d(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Blocks along x and y covering a ``rows x cols`` array with ``block = (threads along x, along y)``.

    x runs along columns and y along rows, matching ``col, row = cuda.grid(2)``: the grid is
    ``(blocks_for(cols, block_x), blocks_for(rows, block_y))``.

    Raises:
        LaunchConfigError: a size or block dimension that :func:`blocks_for` refuses.
    """
    rows, cols = shape
    bx, by = block
    return blocks_for(cols, bx), blocks_for(rows, by)


def launch_2d(shape: tuple[int, int], block: tuple[int, int] = (16, 16)) -> tuple[tuple[int, int], tuple[int, int]]:
    """A validated 2D launch ``(grid, block)`` covering a ``rows x cols`` matrix (the 2D :func:`launch_1d`).

    x runs along columns and y along rows, matching ``col, row = cuda.grid(2)``: the
    grid is ``(ceil(cols / block_x), ceil(rows / block_y))`` (:func:`grid_2d`).

    Raises:
        LaunchConfigError: a block dimension below 1 or above the per-dimension limit,
            more than 1024 threads per block, or a shape that is not two positive numbers.

    Example:
        >>> launch_2d((50, 50), (16, 16))
        ((4, 4), (16, 16))
    """
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise LaunchConfigError(f"launch_2d needs a (rows, cols) shape of positive sizes, got {shape!r}")
    rows, cols = (validate.integer(v, f"launch_2d's shape[{i}]", minimum=1, error=LaunchConfigError)
                  for i, v in enumerate(shape))
    if not isinstance(block, (tuple, list)) or len(block) != 2:
        raise LaunchConfigError(f"block must be (threads along x, threads along y), got {block!r}")
    bx, by = validate.block_shape(block)
    return grid_2d((rows, cols), (bx, by)), (bx, by)


def launch_1d(n: int, threads: int = 256, *, max_threads: int = MAX_THREADS_PER_BLOCK) -> Launch1D:
    """A validated 1D launch for ``n`` elements with ``threads`` threads per block.

    Raises:
        LaunchConfigError: ``threads`` is not between 1 and ``max_threads``, or ``n`` is not a whole
            number of at least 0.

    Example:
        >>> blocks, threads = launch_1d(257, 256)
        >>> blocks
        2
    """
    reason = validate.check_launch(threads, max_threads=max_threads)
    if reason:
        raise LaunchConfigError(f"{reason}: choose threads per block between 1 and {max_threads}, "
                                "ideally a multiple of 32 (one warp) such as 128 or 256.")
    threads = int(threads)
    n = validate.integer(n, "the number of elements n", minimum=0, error=LaunchConfigError)
    return Launch1D(n=n, threads=threads, blocks=blocks_for(n, threads))
