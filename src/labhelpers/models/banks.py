"""Which pieces of memory hardware one warp's request touches: shared-memory banks and global-memory sectors.

Two small, exact models of chapter "The memory hierarchy", both about the 32 threads of a
warp issuing one load together:

* **Shared memory** is split into :data:`NUM_BANKS` = 32 banks; successive 4-byte words go
  to successive banks (word ``w`` lives in bank ``w % 32``) and each bank delivers one word
  per clock. Threads reading *different words of the same bank* are served one after the
  other: the request takes as many passes as the busiest bank has distinct words, the
  **conflict degree**. Threads reading the *same* word share one read (a broadcast). For
  the strided pattern ``word = offset + t * s`` the degree is ``gcd(s, 32)``
  (NVIDIA, *CUDA C++ Programming Guide*, "Shared Memory" for compute capability 5.x and later).
* **Global memory** is moved in 32-byte **sectors**, four to a 128-byte cache **line**.
  A warp's request costs the distinct sectors it touches, whatever fraction of their bytes
  it uses (*CUDA C++ Best Practices Guide*, "Coalesced Access to Global Memory"). The
  **efficiency** is useful bytes over bytes moved: 100% for aligned consecutive 4-byte
  loads, 80% with an offset (5 sectors instead of 4), 50% at stride 2.

Everything here is plain Python and NumPy: the models run anywhere and are tested exactly.
Their pictures for the chapter's widgets are in :mod:`labhelpers.figures.memory`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import validate

#: Banks of shared memory on every NVIDIA GPU since Fermi (compute capability 2.0).
NUM_BANKS = 32
#: Width of one bank: successive 4-byte words go to successive banks.
BANK_WORD_BYTES = 4
#: Threads of a warp.
WARP_SIZE = 32
#: Granularity of global-memory traffic between L1, L2 and DRAM.
SECTOR_BYTES = 32
#: Size of an L1/L2 cache line: four sectors.
LINE_BYTES = 128


# --------------------------------------------------------------------------- shared-memory banks


def bank_of(word: int | np.ndarray, num_banks: int = NUM_BANKS) -> int | np.ndarray:
    """The bank holding 4-byte word number ``word`` of shared memory: ``word % num_banks``."""
    num_banks = validate.integer(num_banks, "num_banks", minimum=1)
    if np.any(np.asarray(word) < 0):
        raise ValueError(f"word indices cannot be negative, got {word!r}")
    return word % num_banks


def strided_words(stride: int, offset: int = 0, threads: int = WARP_SIZE) -> np.ndarray:
    """Word index read by each thread ``t`` of a warp for ``shared[offset + t * stride]`` (4-byte elements).

    ``stride = 0`` (every thread reads the same word) is allowed: it is a broadcast.
    """
    stride = validate.integer(stride, "stride", minimum=0)
    offset = validate.integer(offset, "offset", minimum=0)
    threads = validate.integer(threads, "threads", minimum=1)
    return offset + stride * np.arange(threads, dtype=np.int64)


def tile_column_words(column: int, width: int, pad: int = 0, rows: int = WARP_SIZE) -> np.ndarray:
    """Words read when thread ``t`` reads ``tile[t, column]`` of a row-major tile with ``width + pad`` words a row.

    This is the column read of a shared-memory transpose: with ``width = 32`` and no
    padding all 32 threads hit one bank; one word of padding per row spreads them out.
    """
    width = validate.integer(width, "width", minimum=1)
    pad = validate.integer(pad, "pad", minimum=0)
    column = validate.integer(column, "column", minimum=0, maximum=width - 1)
    rows = validate.integer(rows, "rows", minimum=1)
    return np.arange(rows, dtype=np.int64) * (width + pad) + column


def conflict_degree(words: Sequence[int] | np.ndarray, num_banks: int = NUM_BANKS) -> int:
    """Passes one warp request needs: the most *distinct* words any single bank must deliver.

    Threads reading the same word are served together (broadcast), so only distinct words
    count. 1 means conflict-free; 32 means fully serialised.

    Args:
        words: the 4-byte word index each active thread reads (any length, usually 32).
        num_banks: banks of shared memory (32).

    Example:
        >>> conflict_degree([0, 32, 64, 1])   # words 0, 32 and 64 all live in bank 0
        3
        >>> conflict_degree([5] * 32)         # one word for everybody: a broadcast
        1
    """
    words = np.asarray(words, dtype=np.int64).ravel()
    if words.size == 0:
        raise ValueError("give at least one word index")
    distinct = np.unique(words)
    return int(np.bincount(bank_of(distinct, num_banks), minlength=num_banks).max())


def strided_conflict_degree(stride: int, num_banks: int = NUM_BANKS) -> int:
    """The closed form for ``shared[t * stride]`` over a full warp: ``gcd(stride, 32)`` (1 for stride 0).

    Threads ``t`` and ``t'`` collide when ``(t - t') * stride`` is a multiple of 32, which
    happens for ``gcd(stride, 32)`` threads per bank. Odd strides are therefore always
    conflict-free, as the cs378 CUDA slides put it for the 16 banks of the G80: "s must be odd".
    """
    stride = validate.integer(stride, "stride", minimum=0)
    num_banks = validate.integer(num_banks, "num_banks", minimum=1)
    if stride == 0:
        return 1
    return math.gcd(int(stride), num_banks)


# --------------------------------------------------------------------------- global-memory sectors


@dataclass(frozen=True)
class WarpRequest:
    """What one warp's load ``a[offset + t * stride]`` costs in sectors and lines."""

    offset: int
    stride: int
    itemsize: int
    threads: int
    sectors: int
    lines: int

    @property
    def useful_bytes(self) -> int:
        """Bytes the threads asked for: ``threads * itemsize`` (less if threads share elements)."""
        return (self.threads if self.stride else 1) * self.itemsize

    @property
    def moved_bytes(self) -> int:
        """Bytes the memory system moves: whole sectors."""
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """Useful over moved bytes (what Nsight Compute calls sector efficiency)."""
        return self.useful_bytes / self.moved_bytes

    @property
    def line_efficiency(self) -> float:
        """Useful bytes over whole 128-byte lines: the efficiency if every miss fetched full lines."""
        return self.useful_bytes / (self.lines * LINE_BYTES)

    def __str__(self) -> str:
        return (f"offset {self.offset}, stride {self.stride}, {self.itemsize}-byte elements: "
                f"{self.sectors} sectors in {self.lines} lines, {self.useful_bytes} useful of "
                f"{self.moved_bytes} bytes moved = {self.efficiency:.0%} efficiency")


def warp_byte_addresses(offset: int, stride: int, itemsize: int = 4, threads: int = WARP_SIZE) -> np.ndarray:
    """Byte address of the element each thread ``t`` loads in ``a[offset + t * stride]``.

    The array is assumed to start on a 128-byte boundary (allocations do: ``cudaMalloc``
    aligns to at least 256 bytes) and the warp is warp 0; for this pattern every other
    warp of the grid starts ``32 * stride * itemsize`` bytes further, a multiple of 128
    when ``stride * itemsize`` is a multiple of 4, so it touches the same number of sectors.
    """
    offset = validate.integer(offset, "offset", minimum=0)
    stride = validate.integer(stride, "stride", minimum=0)
    itemsize = validate.integer(itemsize, "itemsize", minimum=1)
    threads = validate.integer(threads, "threads", minimum=1)
    return (offset + stride * np.arange(threads, dtype=np.int64)) * itemsize


def _units_touched(addresses: np.ndarray, itemsize: int, unit: int) -> int:
    first = addresses // unit
    last = (addresses + itemsize - 1) // unit
    spans = [np.arange(f, l + 1) for f, l in zip(first, last)]
    return int(np.unique(np.concatenate(spans)).size)


def warp_request(offset: int, stride: int, itemsize: int = 4, threads: int = WARP_SIZE) -> WarpRequest:
    """Sectors and lines touched by one warp loading ``a[offset + t * stride]``.

    Example:
        >>> warp_request(0, 1).sectors, warp_request(1, 1).sectors, warp_request(0, 2).efficiency
        (4, 5, 0.5)
    """
    addresses = warp_byte_addresses(offset, stride, itemsize, threads)
    return WarpRequest(
        offset=int(offset), stride=int(stride), itemsize=int(itemsize), threads=int(threads),
        sectors=_units_touched(addresses, itemsize, SECTOR_BYTES),
        lines=_units_touched(addresses, itemsize, LINE_BYTES),
    )


def sectors_per_request(offset: int, stride: int, itemsize: int = 4) -> int:
    """Distinct 32-byte sectors one full warp touches loading ``a[offset + t * stride]``."""
    return warp_request(offset, stride, itemsize).sectors


def sector_efficiency(offset: int, stride: int, itemsize: int = 4) -> float:
    """Useful bytes over moved bytes for one warp loading ``a[offset + t * stride]``."""
    return warp_request(offset, stride, itemsize).efficiency
