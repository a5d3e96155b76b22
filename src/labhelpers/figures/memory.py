"""Chapter 3's figures (the memory hierarchy): shared-memory banks and global-memory sectors of one warp.

Widget draw functions take the axes first, ``draw_x(ax, **params)``, as :func:`labhelpers.interactive_figure`
calls them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.patches import Rectangle

from ..plotting import readable_pt
from ..models.banks import (LINE_BYTES, NUM_BANKS, SECTOR_BYTES, conflict_degree, warp_byte_addresses,
                            warp_request)


def draw_bank_access(ax, words: Sequence[int] | np.ndarray, title: str | None = None) -> None:
    """Draw which bank each thread of a warp hits, and its conflict degree in the title
    (:func:`labhelpers.models.banks.conflict_degree` computes it).

    Columns are the 32 banks, rows the "layers" of shared memory (``word // 32``): a bank
    column holding several marked words is a conflict, served one word per pass.
    """
    words = np.asarray(words, dtype=np.int64)
    degree = conflict_degree(words)
    bank = words % NUM_BANKS
    layer = words // NUM_BANKS
    per_bank = np.bincount(np.unique(words) % NUM_BANKS, minlength=NUM_BANKS)
    colors = ["C3" if per_bank[b] > 1 else "C2" for b in bank]
    small = readable_pt(ax.figure)
    ax.scatter(bank, layer, c=colors, s=(1.6 * small) ** 2, zorder=3)  # a dot that holds a two-digit number
    for t, (b, row) in enumerate(zip(bank, layer)):
        ax.annotate(str(t), (b, row), fontsize=small, ha="center", va="center", color="white", zorder=4)
    ax.set_xlim(-0.7, NUM_BANKS - 0.3)
    top = int(layer.max()) if layer.size else 0
    ax.set_ylim(top + 0.7, -0.7)
    ax.set_xticks(range(0, NUM_BANKS, 4))
    ax.set_xlabel("bank (word % 32)")
    ax.set_ylabel("row of shared memory (word // 32)")
    ax.grid(True, alpha=0.3)
    verdict = "conflict-free" if degree == 1 else f"{degree}-way conflict: {degree} passes"
    ax.set_title(title or f"thread numbers on the banks they read: {verdict}", fontsize=10)


def draw_warp_sectors(ax, offset: int, stride: int, itemsize: int = 4) -> None:
    """Draw one warp's request over the 128-byte lines and 32-byte sectors it touches (the numbers in the title:
    :func:`labhelpers.models.banks.warp_request`)."""
    req = warp_request(offset, stride, itemsize)
    addresses = warp_byte_addresses(offset, stride, itemsize)
    first_line = int(addresses.min() // LINE_BYTES)
    last_line = int((addresses.max() + itemsize - 1) // LINE_BYTES)
    touched = set()
    for a in addresses:
        touched.update(range(int(a // SECTOR_BYTES), int((a + itemsize - 1) // SECTOR_BYTES) + 1))
    for line in range(first_line, last_line + 1):
        row = line - first_line
        for s in range(LINE_BYTES // SECTOR_BYTES):
            sector = line * (LINE_BYTES // SECTOR_BYTES) + s
            face = "#f6c28b" if sector in touched else "white"
            ax.add_patch(_rect((s * SECTOR_BYTES, row - 0.4), SECTOR_BYTES, 0.8, face))
    rows = (addresses // LINE_BYTES) - first_line
    ax.scatter(addresses % LINE_BYTES + itemsize / 2, rows, s=12, color="C0", zorder=3, label="a thread's element")
    ax.set_xlim(0, LINE_BYTES)
    ax.set_ylim(last_line - first_line + 0.6, -0.6)
    ax.set_xticks(range(0, LINE_BYTES + 1, SECTOR_BYTES))
    ax.set_xlabel("byte within a 128-byte line (boxes: 32-byte sectors, shaded: moved)")
    ax.set_ylabel("line")
    ax.set_yticks(range(last_line - first_line + 1))
    ax.set_title(f"{req.sectors} sectors in {req.lines} line(s): {req.useful_bytes} useful of "
                 f"{req.moved_bytes} bytes moved, efficiency {req.efficiency:.0%}", fontsize=10)


def _rect(xy, width, height, face):
    return Rectangle(xy, width, height, facecolor=face, edgecolor="0.4", linewidth=0.8)


__all__ = ["draw_bank_access", "draw_warp_sectors"]
