"""The host side of the scans: :class:`Scan` plans the launches once and launches many times;
:func:`scan` and :func:`block_scan` are the one-call wrappers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from ... import backend, validate
from ...arrays import to_device
from ...errors import ArgumentError, ArrayArgumentError, LaunchConfigError
from ...launch import ConfiguredKernel, blocks_for, tiles_for
from .definitions import DTYPES, TypedKernel, UnknownMethodError, WARP, scan_bytes, warn_if_wraps
from .scans import (
    add_block_offsets, blelloch_scan, blelloch_scan_unpadded, block_reduce, block_scan_shuffle, chained_scan,
    hillis_steele_scan, hillis_steele_seed_bounds, hillis_steele_single_buffer,
)
from .tiled import SIM_TILE, WARP_LOOKBACK_TILE, tile_kernels


@dataclass(frozen=True)
class Method:
    """One way to scan an array larger than a block.

    Attributes:
        key: its name in :data:`METHODS`.
        title: a short name for tables and plots.
        lesson: what it teaches, in one line.
        passes: global-memory bytes moved per 4-byte element at large n (reads + writes).
        needs: the warp intrinsic that makes it GPU-only, or "".
    """

    key: str
    title: str
    lesson: str
    passes: int
    needs: str = ""

    @property
    def gpu_only(self) -> bool:
        """True when the method needs warp intrinsics the simulator lacks."""
        return bool(self.needs)


METHODS: dict[str, Method] = {m.key: m for m in [
    Method("hillis_steele", "Hillis-Steele + propagate",
           "block scans of n log n additions, then every element gets its block's offset", 16),
    Method("scan_then_propagate", "Blelloch + propagate",
           "work-efficient block scans, block totals scanned recursively, then a uniform add", 16),
    Method("warp_shuffle", "warp shuffles + propagate",
           "block scans in registers (two barriers), then the uniform add", 16, needs="cuda.shfl_up_sync()"),
    Method("reduce_then_scan", "reduce, scan totals, scan",
           "block totals first (read only), then each block scans from its offset: 12 bytes per element", 12),
    Method("chained", "chained single pass",
           "one kernel: each tile waits for the prefix of the tile before it", 8),
    Method("tiled_reduce_then_scan", "tiled reduce-then-scan (3 kernels)",
           "16 items per thread and 16-byte loads, three kernels: 12 bytes per element", 12),
    Method("lookback", "decoupled look-back (single pass)",
           "16 items per thread, 16-byte loads, one kernel: 8 bytes per element", 8),
    Method("lookback_warp", "one-word look-back by one warp (single pass)",
           "CUB's look-back: status and value in one 64-bit word, warp 0 alone, no fence; 128 x 32 tiles", 8),
]}

#: Methods that run on the simulator too.
SIMULATOR_METHODS = tuple(k for k, m in METHODS.items() if not m.gpu_only)

#: The look-backs of the single pass (:class:`Scan`'s ``lookback``): ``"block"``, method ``"lookback"``'s
#: (:func:`~.tiled.lookback`: flags and values in separate arrays, fences, the whole block per window);
#: ``"warp"``, method ``"lookback_warp"``'s, built as CUB's (:func:`~.tiled.lookback_warp`: status and value in
#: one 64-bit word, warp 0 alone, relaxed loads, no fence); ``"warp_atomic"``, the same reading the words with
#: 64-bit atomics instead (to measure what the read costs). ``Scan(x, "lookback_warp")`` is
#: ``Scan(x, "lookback", lookback="warp")``: the same kernel and default tile.
LOOKBACKS = ("block", "warp", "warp_atomic")
#: The methods that run the tiled kernels.
TILED_METHODS = ("lookback", "lookback_warp", "tiled_reduce_then_scan")


def method_info(key: str) -> Method:
    """Look up a scan method by key (raises :class:`UnknownMethodError` listing the valid ones)."""
    try:
        return METHODS[key]
    except (KeyError, TypeError):
        raise UnknownMethodError(f"unknown scan method {key!r}: choose one of {', '.join(METHODS)}") from None


def _empty(dtype):
    return cuda.device_array(0, dtype=dtype)


def _zeros(n: int, dtype):
    return cuda.to_device(np.zeros(n, dtype=dtype))


def _aligned16(a) -> bool:
    """True unless ``a`` is a device array whose data does not start on a 16-byte boundary (a sliced view)."""
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is None:
        return True
    return iface["data"][0] % 16 == 0


def _check_data(x, name: str = "x", dtypes=DTYPES) -> None:
    validate.array(x, name, ndim=1)
    if np.dtype(x.dtype) not in tuple(np.dtype(d) for d in dtypes):
        names = " or ".join(np.dtype(d).name for d in dtypes)
        raise ArrayArgumentError(f"{name} has dtype {np.dtype(x.dtype)}, but these kernels take {names}: pass "
                                 f"{name}.astype(np.{np.dtype(dtypes[0]).name}).")


def _lookback_for(method: str, lookback) -> str | None:
    """The look-back of ``method`` (None for the methods without one), ``lookback`` checked against it."""
    if lookback is None:
        return {"lookback": "block", "lookback_warp": "warp"}.get(method)
    chosen = validate.choice(lookback, "lookback", LOOKBACKS)
    if method == "lookback_warp" and chosen == "block":
        raise ArgumentError("method 'lookback_warp' is the warp look-back ('warp' or 'warp_atomic'): for the block "
                            "look-back use method 'lookback'")
    if method not in ("lookback", "lookback_warp"):
        raise ArgumentError(f"lookback={lookback!r} applies to the single pass only (methods 'lookback' and "
                            f"'lookback_warp'), not to {method!r}")
    return chosen


def _threads_for(method: str, threads) -> int:
    if threads is None:
        return 32 if backend.is_simulator() else 256
    threads = validate.threads_per_block(threads)
    power = threads & (threads - 1) == 0
    if method in ("scan_then_propagate", "reduce_then_scan", "chained") and not power:
        raise LaunchConfigError(f"method {method!r} needs a power-of-two block (Blelloch's tree), got {threads} "
                                "threads: use 64, 128 or 256")
    if method == "warp_shuffle" and threads % WARP:
        raise LaunchConfigError(f"method 'warp_shuffle' needs whole warps, got {threads} threads: use a multiple of 32")
    return threads


@dataclass
class Launch:
    """One kernel launch of a plan: ``kernel[blocks, threads](*args)``."""

    name: str
    kernel: Any
    blocks: int
    threads: int
    args: tuple
    _launch: ConfiguredKernel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._launch = ConfiguredKernel(self.kernel, self.blocks, self.threads)

    def __call__(self, *extra) -> None:
        self._launch(*self.args, *extra)


class Scan:
    """A scan of one vector, planned once (buffers allocated) and launchable many times.

    >>> s = Scan(x, "lookback", inclusive=True)    # doctest: +SKIP
    >>> s.launch(); y = s.result()                  # doctest: +SKIP

    Args:
        x: 1-D C-contiguous int32 or float32 array (NumPy: copied to the device once; CuPy or a
            Numba device array: used in place).
        method: a key of :data:`METHODS`.
        inclusive: inclusive (True) or exclusive (False) scan.
        threads: threads per block (default 256 on a GPU, 32 under the simulator; the tiled methods
            use :func:`tile_kernels`' default tile unless given, the warp look-back 128 x 32 on a GPU).
        items: items per thread of the tiled methods (4, 8, 16 or 32).
        out: where to write the result (default: a new device array; may be ``x`` itself).
        vector: 16-byte loads and stores in the tiled methods (default; 4-byte ones with False).
        lookback: which look-back the single pass uses, one of :data:`LOOKBACKS` (default ``"block"`` for
            method ``"lookback"``, ``"warp"`` for ``"lookback_warp"``, which takes ``"warp_atomic"`` too).

    Raises:
        ArgumentError: ``lookback`` is not one of :data:`LOOKBACKS`, or does not fit the method.
        ArrayArgumentError: ``x`` is not a 1-D contiguous int32/float32 array, or ``out`` does not match it.
        LaunchConfigError: a block size the method cannot use.
        UnknownMethodError: no such method.
        GPUOnlyError: the method needs warp shuffles and this is the simulator.
    """

    def __init__(self, x, method: str = "lookback", inclusive: bool = True, threads: int | None = None,
                 items: int | None = None, out=None, vector: bool = True, *, lookback: str | None = None) -> None:
        _check_data(x, "x", DTYPES + (np.dtype(np.uint32),))
        info = method_info(method)
        if not isinstance(inclusive, (bool, np.bool_)):
            raise ArgumentError(f"inclusive must be True or False, got {inclusive!r}")
        self.lookback = _lookback_for(info.key, lookback)
        if info.gpu_only:
            backend.require_gpu(f"method {method!r} ({info.title})",
                                because=f"uses {info.needs}, which Numba's CUDA simulator does not have",
                                instead="Its measurements are in lh.load_reference('ch10_scan_methods').")
        self.method = info.key
        self.inclusive = bool(inclusive)
        self.dtype = np.dtype(x.dtype)
        self.n = int(x.shape[0])
        warn_if_wraps(x)
        self.x = to_device(x)
        if out is None:
            self.out = cuda.device_array(self.n, dtype=self.dtype)
        else:
            validate.array(out, "out", dtype=self.dtype, shape=(self.n,))
            self.out = to_device(out)
        self.launches: list[Launch] = []
        self._epoch_launches: list[Launch] = []
        self._epoch = 0
        if info.key in TILED_METHODS:
            vector = bool(vector) and _aligned16(self.x) and _aligned16(self.out)
            if self.lookback in ("warp", "warp_atomic"):  # its own default tile: 128 x 32 on a GPU
                default = SIM_TILE if backend.is_simulator() else WARP_LOOKBACK_TILE
                threads = default[0] if threads is None else threads
                items = default[1] if items is None else items
            self.tiles = tile_kernels(self.dtype, threads, items, vector=vector)
            self.threads = self.tiles.config.threads
        else:
            if items is not None:
                raise ArgumentError(f"items applies to the tiled methods only ({', '.join(TILED_METHODS)}), "
                                    f"not to {method!r}")
            self.threads = _threads_for(info.key, threads)
        if self.n == 0:
            return
        flag = 1 if self.inclusive else 0
        if info.key == "hillis_steele":
            self._plan_propagate(self.x, self.out, self.n, flag, hillis_steele_scan, self.threads)
        elif info.key == "scan_then_propagate":
            self._plan_propagate(self.x, self.out, self.n, flag, blelloch_scan, 2 * self.threads)
        elif info.key == "warp_shuffle":
            self._plan_propagate(self.x, self.out, self.n, flag, block_scan_shuffle, self.threads)
        elif info.key == "reduce_then_scan":
            self._plan_reduce_then_scan(self.x, self.out, self.n, flag)
        elif info.key == "chained":
            tiles = tiles_for(self.n, 2 * self.threads)
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=self.dtype), _zeros(1, np.int32))
            flags, prefixes, counter = self._state
            self._add_epoch_launch(Launch("chained_scan", chained_scan.for_dtype(self.dtype), tiles, self.threads,
                                          (self.x, self.out, flags, prefixes, counter)), flag)
        elif self.lookback == "block":
            tiles = tiles_for(self.n, self.tiles.config.tile)
            self._state = (_zeros(tiles, np.int32), cuda.device_array(tiles, dtype=self.dtype),
                           cuda.device_array(tiles, dtype=self.dtype), _zeros(1, np.int32))
            self._add_epoch_launch(Launch("tile_scan_lookback", self.tiles.tile_scan_lookback, tiles, self.threads,
                                          (self.x, self.out) + self._state), flag)
        elif self.lookback is not None:  # one uint64 word per tile (zeros: "nothing yet"), a counter
            tiles = tiles_for(self.n, self.tiles.config.tile)
            self._state = (_zeros(tiles, np.uint64), _zeros(1, np.int32))
            name = "tile_scan_warp_lookback" if self.lookback == "warp" else "tile_scan_warp_lookback_atomic"
            self._add_epoch_launch(Launch(name, getattr(self.tiles, name), tiles, self.threads,
                                          (self.x, self.out) + self._state), flag)
        else:  # tiled_reduce_then_scan
            tiles = tiles_for(self.n, self.tiles.config.tile)
            sums = cuda.device_array(tiles, dtype=self.dtype)
            self.launches += [
                Launch("tile_reduce", self.tiles.tile_reduce, tiles, self.threads, (self.x, sums)),
                Launch("tile_scan_single_block", self.tiles.tile_scan_single_block, 1, self.threads, (sums,)),
                Launch("tile_scan_offsets", self.tiles.tile_scan_offsets, tiles, self.threads,
                       (self.x, self.out, sums, flag)),
            ]

    # -- planning -----------------------------------------------------------------------------
    def _add_epoch_launch(self, launch: Launch, flag: int) -> None:
        launch.args = launch.args  # the epoch is passed at each launch, the flag after it
        self._epoch_flag = flag
        self.launches.append(launch)
        self._epoch_launches.append(launch)

    def _block_launch(self, kernel: TypedKernel, blocks: int, src, dst, sums, flag: int) -> Launch:
        k = kernel.for_dtype(self.dtype)
        if kernel is blelloch_scan:
            return Launch(kernel.__name__, k, blocks, self.threads, (src, dst, sums, _empty(self.dtype), flag))
        return Launch(kernel.__name__, k, blocks, self.threads, (src, dst, sums, flag))

    def _plan_propagate(self, src, dst, n: int, flag: int, kernel: TypedKernel, per_block: int) -> None:
        blocks = tiles_for(n, per_block)
        if blocks == 1:
            self.launches.append(self._block_launch(kernel, 1, src, dst, _empty(self.dtype), flag))
            return
        sums = cuda.device_array(blocks, dtype=self.dtype)
        self.launches.append(self._block_launch(kernel, blocks, src, dst, sums, flag))
        self._plan_propagate(sums, sums, blocks, 1, kernel, per_block)  # inclusive scan of the block totals
        self.launches.append(Launch("add_block_offsets", add_block_offsets.for_dtype(self.dtype),
                                    blocks_for(n, self.threads), self.threads, (dst, sums, per_block)))

    def _plan_reduce_then_scan(self, src, dst, n: int, flag: int) -> None:
        per_block = 2 * self.threads
        blocks = tiles_for(n, per_block)
        scan_k = blelloch_scan.for_dtype(self.dtype)
        if blocks == 1:
            self.launches.append(Launch("blelloch_scan", scan_k, 1, self.threads,
                                        (src, dst, _empty(self.dtype), _empty(self.dtype), flag)))
            return
        sums = cuda.device_array(blocks, dtype=self.dtype)
        self.launches.append(Launch("block_reduce", block_reduce.for_dtype(self.dtype), blocks, self.threads,
                                    (src, sums)))
        self._plan_reduce_then_scan(sums, sums, blocks, 1)
        self.launches.append(Launch("blelloch_scan", scan_k, blocks, self.threads,
                                    (src, dst, _empty(self.dtype), sums, flag)))

    # -- running ------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes a scan must move (read each element, write each result): effective bandwidth = nbytes / time."""
        return scan_bytes(self.n, self.dtype.itemsize)

    @property
    def plan(self) -> list[tuple[str, int, int]]:
        """``(kernel, blocks, threads)`` of every launch, in order."""
        return [(k.name, k.blocks, k.threads) for k in self.launches]

    def launch(self) -> None:
        """Enqueue every kernel of the plan (asynchronous on a GPU; no allocation, no copy)."""
        for step in self.launches:
            if step in self._epoch_launches:
                self._epoch += 1
                step(self._epoch, self._epoch_flag)
            else:
                step()

    def result(self) -> np.ndarray:
        """The scan of the last launch, copied to the host."""
        if self.n == 0:
            return np.zeros(0, dtype=self.dtype)
        return self.out.copy_to_host()

    def __call__(self) -> np.ndarray:
        """Launch and return the result on the host."""
        self.launch()
        return self.result()


def scan(x, method: str = "lookback", inclusive: bool = True, threads: int | None = None,
         items: int | None = None, *, lookback: str | None = None) -> np.ndarray:
    """Scan ``x`` (int32 or float32, 1-D) on the GPU or the simulator; returns a NumPy array.

    See :class:`Scan` for the arguments, :data:`METHODS` for the methods and :data:`LOOKBACKS` for the
    look-backs of the single pass.

    Example:
        >>> scan(np.array([3, 1, 7, 0, 4, 1, 6, 3], np.int32), inclusive=False)   # doctest: +SKIP
        array([ 0,  3,  4, 11, 11, 15, 16, 22], dtype=int32)
    """
    return Scan(x, method, inclusive, threads, items, lookback=lookback)()


def block_scan(x, kernel: str = "blelloch", inclusive: bool = True, threads: int | None = None) -> np.ndarray:
    """Run ONE of the in-block kernels over ``x``: every block scans its own part, with no carry between blocks.

    ``kernel``: ``"hillis_steele"``, ``"blelloch"``, ``"blelloch_unpadded"``, ``"shuffle"`` (GPU only),
    or the pitfalls ``"hillis_steele_seed_bounds"`` and ``"hillis_steele_single_buffer"``. Each block
    covers ``threads`` elements (``2 * threads`` for Blelloch). For a whole-array scan use :func:`scan`.
    """
    _check_data(x)
    kernels = {"hillis_steele": hillis_steele_scan, "blelloch": blelloch_scan,
               "blelloch_unpadded": blelloch_scan_unpadded, "shuffle": block_scan_shuffle,
               "hillis_steele_seed_bounds": hillis_steele_seed_bounds,
               "hillis_steele_single_buffer": hillis_steele_single_buffer}
    chosen = validate.choice(kernel, "kernel", tuple(kernels))
    if chosen == "shuffle":
        backend.require_gpu("the warp-shuffle block scan",
                            because="uses cuda.shfl_up_sync(), which Numba's CUDA simulator does not have",
                            instead="Its measurements are in lh.load_reference('ch10_scan_methods').")
    method = "scan_then_propagate" if chosen.startswith("blelloch") else (
        "warp_shuffle" if chosen == "shuffle" else "hillis_steele")
    threads = _threads_for(method, threads)
    dtype = np.dtype(x.dtype)
    n = int(x.shape[0])
    out = cuda.to_device(np.zeros(n, dtype=dtype))
    if n == 0:
        return out.copy_to_host()
    per_block = 2 * threads if chosen.startswith("blelloch") else threads
    warn_if_wraps(x, per_block)
    blocks = tiles_for(n, per_block)
    kernel_obj = kernels[chosen]
    if isinstance(kernel_obj, TypedKernel):
        k = kernel_obj.for_dtype(dtype)
    elif dtype != np.dtype(np.int32):
        raise ArrayArgumentError(f"the pitfall kernel {chosen!r} is written for int32: pass x.astype(np.int32)")
    else:
        k = kernel_obj
    args = (to_device(x), out, _empty(dtype)) + ((_empty(dtype),) if chosen.startswith("blelloch") else ())
    k[blocks, threads](*args, 1 if inclusive else 0)
    return out.copy_to_host()


def block_scan_reference(x, per_block: int, inclusive: bool = True) -> np.ndarray:
    """NumPy: every run of ``per_block`` elements scanned on its own (what :func:`block_scan` computes)."""
    x = np.asarray(x)
    dtype = np.float64 if x.dtype.kind == "f" else x.dtype
    blocks = tiles_for(x.size, per_block)
    padded = np.zeros(blocks * per_block, dtype=dtype)
    padded[:x.size] = x
    runs = padded.reshape(blocks, per_block)
    out = np.cumsum(runs, axis=1, dtype=dtype)
    if not inclusive:
        out -= runs
    return out.ravel()[:x.size]
