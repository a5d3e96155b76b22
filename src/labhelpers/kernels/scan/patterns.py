"""Patterns built on a scan: stream compaction, the radix split, LSD radix sort, histograms.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, int32, uint32

from ... import backend, validate
from ...arrays import to_device
from ...errors import ArrayArgumentError, LaunchConfigError
from ...launch import blocks_for, tiles_for
from .definitions import LOG_BANKS, scan_reference, typed_kernel
from .tiled import GPU_TILE, SIM_TILE, tile_kernels
from .planner import Launch, Scan, _aligned16, _check_data, _threads_for, _zeros, scan


@typed_kernel
def keep_flags(x, threshold, flags):
    """Compaction, step 1: ``flags[i] = 1`` if ``x[i] > threshold`` else 0 (a map)."""
    i = cuda.grid(1)
    if i < x.size:
        flags[i] = 1 if x[i] > threshold else 0


@typed_kernel
def scatter_kept(x, flags, addresses, out):
    """Compaction, step 3: every kept element goes to its address, the exclusive scan of the flags (a scatter)."""
    i = cuda.grid(1)
    if i < x.size and flags[i]:
        out[addresses[i]] = x[i]


def compact_reference(x, threshold) -> np.ndarray:
    """NumPy: the elements of ``x`` greater than ``threshold``, in their order."""
    x = np.asarray(x)
    return x[x > threshold]


class Compactor:
    """Stream compaction of one vector (keep ``x > threshold``), planned once, launchable many times.

    ``method="single_pass"`` (default): :func:`tile_compact`, one kernel. ``method="three_kernels"``:
    flags (:data:`keep_flags`), their exclusive scan (:class:`Scan`), scatter (:data:`scatter_kept`).
    :meth:`launch` enqueues; :meth:`count` waits and returns how many were kept; :meth:`result`
    returns them on the host.
    """

    def __init__(self, x, threshold, method: str = "single_pass", threads: int | None = None,
                 items: int | None = None) -> None:
        _check_data(x)
        self.dtype = np.dtype(x.dtype)
        self.threshold = self.dtype.type(validate.number(threshold, "threshold"))
        self.method = validate.choice(method, "method", ("single_pass", "three_kernels"))
        self.n = int(x.shape[0])
        self.x = to_device(x)
        self.out = cuda.device_array(max(self.n, 1), dtype=self.dtype)
        self._count = _zeros(1, np.int32)
        self._epoch = 0
        if self.n == 0:
            return
        if self.method == "single_pass":
            tk = tile_kernels(self.dtype, threads, items, vector=_aligned16(self.x))
            tiles = tiles_for(self.n, tk.config.tile)
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=np.int32),
                           cuda.device_array(tiles, dtype=np.int32), _zeros(1, np.int32))
            self._launch = Launch("tile_compact", tk.tile_compact, tiles, tk.config.threads,
                                  (self.x, self.out, self._count, self.threshold) + self._state)
        else:
            t = _threads_for("hillis_steele", threads)
            self._flags = cuda.device_array(self.n, dtype=np.int32)
            self._scan = Scan(self._flags, "lookback", inclusive=False, items=items)
            blocks = blocks_for(self.n, t)
            self._steps = [Launch("keep_flags", keep_flags.for_dtype(self.dtype), blocks, t,
                                  (self.x, self.threshold, self._flags)),
                           Launch("scatter_kept", scatter_kept.for_dtype(self.dtype), blocks, t,
                                  (self.x, self._flags, self._scan.out, self.out))]

    def launch(self) -> None:
        """Enqueue the kernels (asynchronous)."""
        if self.n == 0:
            return
        if self.method == "single_pass":
            self._epoch += 1
            self._launch(self._epoch)
        else:
            self._steps[0]()
            self._scan.launch()
            self._steps[1]()

    def count(self) -> int:
        """How many elements the last launch kept (waits for it)."""
        if self.n == 0:
            return 0
        if self.method == "single_pass":
            return int(self._count.copy_to_host()[0])
        last_flag = int(self._flags[self.n - 1:].copy_to_host()[0])
        return int(self._scan.out[self.n - 1:].copy_to_host()[0]) + last_flag  # exclusive scan + last flag

    def __call__(self) -> int:
        """Launch and return the count (what a benchmark times: the host needs the count to use the result)."""
        self.launch()
        return self.count()

    @property
    def nbytes(self) -> int:
        """Bytes compaction must move: read every element, write the kept ones (as of the last launch)."""
        return self.dtype.itemsize * (self.n + self.count())

    def result(self) -> np.ndarray:
        """The kept elements of the last launch, on the host."""
        k = self.count()
        return self.out.copy_to_host()[:k]


def enumerate_flags(flags, method: str = "lookback", threads: int | None = None) -> np.ndarray:
    """The *enumerate* primitive: every element gets the number of flagged elements before it (int32).

    An exclusive scan of the flags as 0/1 integers: a flagged element's result is its index among the
    flagged ones (where compaction writes it), and the last result plus the last flag is their count.
    """
    validate.array(flags, "flags", ndim=1)
    ones = (np.asarray(flags) != 0).astype(np.int32)
    if ones.size == 0:
        return ones
    return scan(ones, method, inclusive=False, threads=threads)


def enumerate_reference(flags) -> np.ndarray:
    """NumPy specification of :func:`enumerate_flags`."""
    ones = (np.asarray(flags) != 0).astype(np.int32)
    return (np.cumsum(ones) - ones).astype(np.int32)


def compact(x, threshold, method: str = "single_pass", threads: int | None = None) -> np.ndarray:
    """The elements of ``x`` (int32 or float32) greater than ``threshold``, in order, computed on the GPU."""
    c = Compactor(x, threshold, method, threads)
    c.launch()
    return c.result()


# --- radix split: the slide's table --------------------------------------------------------------

#: The slide's radix-split example: 3-bit keys, split on the least significant bit (bit 0).
SPLIT_KEYS = (0b100, 0b111, 0b010, 0b110, 0b011, 0b101, 0b001, 0b000)
#: The slide's table for it: b (the bit), e (= not b), f (exclusive scan of e), t, d, and the output.
SPLIT_TABLE = {
    "b": (0, 1, 0, 0, 1, 1, 1, 0),
    "e": (1, 0, 1, 1, 0, 0, 0, 1),
    "f": (0, 1, 1, 2, 3, 3, 3, 3),
    "t": (4, 4, 5, 5, 5, 6, 7, 8),
    "d": (0, 4, 1, 2, 5, 6, 7, 3),
    "out": (0b100, 0b010, 0b110, 0b000, 0b111, 0b011, 0b101, 0b001),
}


def split_table(keys, bit: int = 0) -> dict[str, np.ndarray]:
    """The slide's split table in NumPy: ``b, e, f, totalFalses, t, d`` and the output.

    ``b`` = bit ``bit`` of each key; ``e = 1 - b`` (the keys that go first); ``f`` = exclusive scan
    of ``e`` (where each of those goes); ``totalFalses = e[n-1] + f[n-1]``; ``t = i - f + totalFalses``
    (where each key with ``b = 1`` goes: after all the falses, in order); ``d = b ? t : f``; and
    ``out[d[i]] = keys[i]``.
    """
    keys = np.asarray(keys).astype(np.uint32)
    bit = validate.integer(bit, "bit", minimum=0, maximum=31)
    n = keys.size
    b = ((keys >> np.uint32(bit)) & np.uint32(1)).astype(np.int64)
    e = 1 - b
    f = scan_reference(e, inclusive=False) if n else e
    total_falses = int(e[-1] + f[-1]) if n else 0
    t = np.arange(n) - f + total_falses
    d = np.where(b == 1, t, f)
    out = np.empty_like(keys)
    out[d] = keys
    return {"b": b, "e": e, "f": f, "totalFalses": total_falses, "t": t, "d": d, "out": out}


def split_reference(keys, bit: int = 0) -> np.ndarray:
    """NumPy: a stable partition of ``keys`` by bit ``bit``: keys with the bit 0 first, then 1, each in order."""
    keys = np.asarray(keys)
    b = (keys.astype(np.uint32) >> np.uint32(bit)) & np.uint32(1)
    return np.concatenate([keys[b == 0], keys[b == 1]])


@cuda.jit
def split_flags(keys, bit, e):
    """Radix split, step 1: ``e[i] = 1`` if bit ``bit`` of ``keys[i]`` is 0 (that key goes to the front)."""
    i = cuda.grid(1)
    if i < keys.size:
        e[i] = 1 - ((keys[i] >> uint32(bit)) & uint32(1))


@cuda.jit
def split_scatter(keys, bit, e, f, out):
    """Radix split, step 3: ``d = b ? t : f`` with ``t = i - f + totalFalses``, then ``out[d] = keys[i]``.

    ``f`` is the exclusive scan of ``e``; ``totalFalses = e[n-1] + f[n-1]`` (the exclusive scan's
    last value misses the last flag). Stable: keys with the same bit keep their order.
    """
    i = cuda.grid(1)
    n = keys.size
    if i < n:
        total_falses = e[n - 1] + f[n - 1]
        b = (keys[i] >> uint32(bit)) & uint32(1)
        t = i - f[i] + total_falses
        d = t if b else f[i]
        out[d] = keys[i]


def _check_keys(keys, name: str = "keys") -> None:
    validate.array(keys, name, ndim=1)
    if np.dtype(keys.dtype) != np.dtype(np.uint32):
        raise ArrayArgumentError(f"{name} has dtype {np.dtype(keys.dtype)}: the radix kernels sort 32-bit unsigned "
                                 f"keys, pass {name}.astype(np.uint32)")


def radix_split(keys, bit: int = 0, threads: int | None = None) -> np.ndarray:
    """One radix-split pass on the GPU: flags, their exclusive scan, the scatter (three steps)."""
    _check_keys(keys)
    bit = validate.integer(bit, "bit", minimum=0, maximum=31)
    t = _threads_for("hillis_steele", threads)
    n = int(keys.shape[0])
    if n == 0:
        return np.zeros(0, np.uint32)
    k = to_device(keys)
    e = cuda.device_array(n, dtype=np.int32)
    out = cuda.device_array(n, dtype=np.uint32)
    blocks = blocks_for(n, t)
    split_flags[blocks, t](k, bit, e)
    f = Scan(e, "lookback", inclusive=False)
    f.launch()
    split_scatter[blocks, t](k, bit, e, f.out, out)
    return out.copy_to_host()


# --- LSD radix sort -------------------------------------------------------------------------------

#: Digit widths the radix sorter accepts, and the widest its shared-memory counters allow at 256 threads.
RADIX_BITS_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)


def radix_passes(bits: int, key_bits: int = 32) -> int:
    """Passes of an LSD radix sort of ``key_bits``-bit keys with ``bits``-bit digits: ``ceil(key_bits / bits)``."""
    return -(-key_bits // validate.integer(bits, "bits", minimum=1, maximum=32))  # not launch geometry: digits per key


def radix_counter_bytes(bits: int, threads: int) -> int:
    """Shared memory the digit counters of one block take: ``(2**bits + 1) * threads`` int32, padded."""
    words = ((1 << bits) + 1) * threads
    return 4 * (words + (words >> LOG_BANKS))


def radix_pass_bytes(n: int, bits: int, tile: int) -> int:
    """Bytes one pass moves: read the keys twice (count, then scatter), write them once, and the histogram
    (``2**bits`` counters per tile) written, scanned (read + write) and read: ``12 n + 16 * 2**bits * tiles``."""
    tiles = tiles_for(int(n), tile)
    return 12 * int(n) + 16 * (1 << bits) * tiles


class RadixSorter:
    """LSD radix sort of 32-bit unsigned keys with ``bits``-bit digits, planned once.

    Each pass (``ceil(32 / bits)`` of them, least significant digit first) is three kernels: every
    tile counts its digits (:func:`radix_upsweep`), one exclusive scan of those counts
    (:class:`Scan`, look-back) gives every (digit, tile) its output position, and every tile sorts
    itself by digit in shared memory and writes its digits' runs there (:func:`radix_downsweep`).
    Every pass is stable, so after the last one the keys are sorted. The input is never modified
    (the first pass reads it, later passes go back and forth between two buffers).

    Args:
        keys: 1-D uint32 array.
        bits: digit width (default 4: 8 passes; see the chapter for the trade-off).
        threads, items: the tile shape (default: :func:`tile_kernels`' default).
        key_bits: how many low bits of the keys can be non-zero (default 32; fewer bits, fewer passes).

    Raises:
        LaunchConfigError: the digit counters would not fit in 48 KiB of shared memory.
    """

    def __init__(self, keys, bits: int = 4, threads: int | None = None, items: int | None = None,
                 key_bits: int = 32) -> None:
        _check_keys(keys)
        self.bits = validate.integer(bits, "bits", minimum=1, maximum=8)
        self.key_bits = validate.integer(key_bits, "key_bits", minimum=1, maximum=32)
        default = SIM_TILE if backend.is_simulator() else GPU_TILE
        t = default[0] if threads is None else validate.threads_per_block(threads)
        per = default[1] if items is None else items
        shared = radix_counter_bytes(self.bits, t) + 4 * (t * per + (t * per >> LOG_BANKS))
        if shared > validate.DEFAULT_SHARED_PER_BLOCK:
            raise LaunchConfigError(
                f"{self.bits}-bit digits with {t} threads need {shared:,} bytes of shared memory per block (one "
                f"counter per digit per thread, and the tile), more than the 49,152 a block gets: use fewer bits or "
                "fewer threads")
        self.kernels = tile_kernels(np.uint32, t, per, radix_bits=self.bits)
        self.n = int(keys.shape[0])
        self.keys = to_device(keys)
        self.passes = radix_passes(self.bits, self.key_bits)
        if self.n == 0:
            return
        tile = self.kernels.config.tile
        self.tiles = tiles_for(self.n, tile)
        self._buffers = (cuda.device_array(self.n, dtype=np.uint32), cuda.device_array(self.n, dtype=np.uint32))
        self._hist = cuda.device_array((1 << self.bits) * self.tiles, dtype=np.int32)
        self._hist_scan = Scan(self._hist, "lookback", inclusive=False, out=self._hist)
        t = self.kernels.config.threads
        self._steps = []
        src = self.keys
        for p in range(self.passes):
            dst = self._buffers[p % 2]
            shift = p * self.bits
            self._steps.append((Launch("radix_upsweep", self.kernels.radix_upsweep, self.tiles, t,
                                       (src, self._hist, shift)),
                                Launch("radix_downsweep", self.kernels.radix_downsweep, self.tiles, t,
                                       (src, dst, self._hist, shift))))
            src = dst
        self.out = src

    @property
    def nbytes(self) -> int:
        """Bytes the whole sort moves (every pass, :func:`radix_pass_bytes`)."""
        if self.n == 0:
            return 0
        return self.passes * radix_pass_bytes(self.n, self.bits, self.kernels.config.tile)

    def launch(self) -> None:
        """Enqueue every pass (asynchronous)."""
        if self.n == 0:
            return
        for up, down in self._steps:
            up()
            self._hist_scan.launch()
            down()

    def result(self) -> np.ndarray:
        """The sorted keys of the last launch, on the host."""
        if self.n == 0:
            return np.zeros(0, np.uint32)
        return self.out.copy_to_host()

    def __call__(self) -> np.ndarray:
        self.launch()
        return self.result()


def radix_sort(keys, bits: int = 4, threads: int | None = None, key_bits: int = 32) -> np.ndarray:
    """Sort uint32 ``keys`` on the GPU with :class:`RadixSorter`; returns a NumPy array."""
    return RadixSorter(keys, bits, threads, key_bits=key_bits)()


# --- histogram ------------------------------------------------------------------------------------

#: Most bins the shared-memory histogram holds (one int32 counter each).
MAX_BINS = 1024


@cuda.jit
def histogram_global_atomics(values, counts):
    """Every element adds 1 to its bin in global memory: one global atomic per element (grid-stride loop)."""
    i = cuda.grid(1)
    while i < values.size:
        cuda.atomic.add(counts, values[i], 1)
        i += cuda.gridsize(1)


@cuda.jit
def histogram_shared_atomics(values, counts):
    """A private histogram per block in shared memory, then one global atomic per bin per block.

    Shared-memory atomics are fast and contend only within a block; the block then adds its bins
    into ``counts`` (which must start at zero). The histogram exercise of the reduction lab.
    """
    s = cuda.shared.array(MAX_BINS, int32)
    tid = cuda.threadIdx.x
    b = tid
    while b < counts.size:
        s[b] = 0
        b += cuda.blockDim.x
    cuda.syncthreads()  # RAW: the bins are zero before anyone counts
    i = cuda.grid(1)
    while i < values.size:
        cuda.atomic.add(s, values[i], 1)
        i += cuda.gridsize(1)
    cuda.syncthreads()  # RAW: every count of this block is in before the bins are added up
    b = tid
    while b < counts.size:
        if s[b]:
            cuda.atomic.add(counts, b, s[b])
        b += cuda.blockDim.x


def histogram(values, bins: int, method: str = "shared", threads: int | None = None,
              blocks: int | None = None) -> np.ndarray:
    """Count the int32 ``values`` (each in ``[0, bins)``) per bin on the GPU; returns ``np.bincount``'s answer."""
    validate.array(values, "values", dtype=np.int32, ndim=1)
    bins = validate.integer(bins, "bins", minimum=1, maximum=MAX_BINS)
    method = validate.choice(method, "method", ("shared", "global"))
    t = _threads_for("hillis_steele", threads)
    host = values if isinstance(values, np.ndarray) else values.copy_to_host()
    if host.size and (host.min() < 0 or host.max() >= bins):
        raise ArrayArgumentError(f"values must lie in [0, {bins}) (they are bin numbers), got values from "
                                 f"{host.min()} to {host.max()}: clip them or raise bins")
    counts = _zeros(bins, np.int32)
    n = int(values.shape[0])
    if n:
        if blocks is not None:
            grid = validate.integer(blocks, "blocks", minimum=1)
        else:
            grid = min(blocks_for(n, t), 4 if backend.is_simulator() else 1024)
        kernel = histogram_shared_atomics if method == "shared" else histogram_global_atomics
        kernel[grid, t](to_device(values), counts)
    return counts.copy_to_host()
