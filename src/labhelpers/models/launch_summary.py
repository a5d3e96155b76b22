"""What a 1D launch does for ``n`` elements: blocks, threads launched, idle threads, warps and empty lanes.

:func:`summarize_launch` turns ``(n, threads per block)`` into a :class:`LaunchSummary`;
:func:`labhelpers.figures.cuda_intro.draw_launch` draws it, one rectangle per block, for chapter 1's
calculator widget. The geometry itself (blocks, warps per block) is :mod:`labhelpers.launch`'s
(:func:`~labhelpers.launch.launch_1d`); this model only counts what that launch leaves idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..errors import LaunchConfigError
from ..launch import MAX_THREADS_PER_BLOCK, WARP_SIZE, launch_1d


@dataclass(frozen=True)
class LaunchSummary:
    """What a 1D launch of ``blocks`` blocks of ``threads`` threads does for ``n`` elements."""

    n: int
    threads: int
    blocks: int
    total_threads: int
    idle_threads: int
    warps_per_block: int
    warps: int
    empty_lanes: int

    @property
    def lanes(self) -> int:
        """Warp lanes the launch occupies: ``warps * 32`` (a partly filled warp still takes 32)."""
        return self.warps * WARP_SIZE

    @property
    def lane_efficiency(self) -> float:
        """Fraction of the occupied lanes that have an element to work on: ``n / lanes``."""
        return self.n / self.lanes

    def as_table(self) -> pd.DataFrame:
        """The numbers as a one-column table, for display."""
        rows = {
            "elements n": self.n,
            "threads per block": self.threads,
            "blocks = ceil(n / threads)": self.blocks,
            "threads launched": self.total_threads,
            "idle threads (the bounds check stops them)": self.idle_threads,
            "warps per block": self.warps_per_block,
            "warps launched": self.warps,
            "empty lanes (threads per block not a multiple of 32)": self.empty_lanes,
            "lanes with work": f"{self.lane_efficiency:.1%}",
        }
        return pd.DataFrame({"value": list(rows.values())}, index=pd.Index(list(rows), name="launch"))


def summarize_launch(n: int, threads: int, *, max_threads: int = MAX_THREADS_PER_BLOCK) -> LaunchSummary:
    """Blocks, threads, idle threads and warps of the usual 1D launch for ``n`` elements.

    Args:
        n: number of elements, one thread each (at least 1).
        threads: threads per block.
        max_threads: the device's limit on threads per block.

    Raises:
        LaunchConfigError: ``n < 1`` or ``threads`` outside ``1..max_threads``.

    Example:
        >>> s = summarize_launch(257, 256)
        >>> s.blocks, s.total_threads, s.idle_threads, s.warps
        (2, 512, 255, 16)
    """
    if n < 1:
        raise LaunchConfigError(f"a launch needs at least one element, got n={n}")
    launch = launch_1d(n, threads, max_threads=max_threads)
    warps = launch.blocks * launch.warps_per_block
    return LaunchSummary(
        n=n,
        threads=threads,
        blocks=launch.blocks,
        total_threads=launch.total_threads,
        idle_threads=launch.idle_threads,
        warps_per_block=launch.warps_per_block,
        warps=warps,
        empty_lanes=warps * WARP_SIZE - launch.total_threads,
    )
