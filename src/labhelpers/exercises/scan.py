"""Checkers for the lab "Scan and the patterns built on it" (labs/10_scan_lab.ipynb).

Each checker takes the student's kernel (or host function), runs it on the sizes that break scans
(1, 31, 33, 1000 and 2**20 + 7 on a GPU; the largest scaled down under the simulator, which runs a
few thousand threads per second), on int32 data so that every result is exact, and compares with
NumPy. Outputs start filled with a sentinel, so elements never written show; on a GPU the input is
followed in memory by sentinels, so reads past the end show too, and the kernels' outputs are followed
by a guard band of sentinels that is checked after the launch, so a write past the end fails with the
same "outside an array" message that the simulator's IndexError gives (a GPU does not fault there).
Failures raise :class:`~labhelpers.errors.CheckFailed` with the likely bug named.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import backend
from ..checkers import launch_student_kernel, require_kernel
from ..errors import CheckFailed
from ..kernels import scan as sk

#: Sizes on a GPU and under the simulator.
SIZES_GPU = (1, 31, 33, 1000, 2**20 + 7)
SIZES_SIM = (1, 31, 33, 1000)
#: Threads per block tried by the block-level checkers.
THREADS_GPU = (32, 128, 512)
THREADS_SIM = (4, 16)
#: What an unwritten int32 output element holds.
SENTINEL = np.int32(-(2**31) + 7)
_GUARD = 64


def sizes() -> tuple[int, ...]:
    """The sizes the checkers try on this backend."""
    return SIZES_SIM if backend.is_simulator() else SIZES_GPU


def _threads() -> tuple[int, ...]:
    return THREADS_SIM if backend.is_simulator() else THREADS_GPU


def cases() -> tuple[tuple[int, int], ...]:
    """The ``(n, threads per block)`` pairs the block checkers try: every size with every block size on a GPU;
    under the simulator the small sizes with both block sizes and the largest with the larger block only."""
    simulator = tuple((n, t) for t in THREADS_SIM for n in SIZES_SIM[:-1]) + ((SIZES_SIM[-1], THREADS_SIM[-1]),)
    if backend.is_simulator():
        return simulator
    # On a GPU the simulator's cases come first, so a bug is reported with the same case and the same message on
    # both backends (nbval compares the lab's failed checks); the GPU's larger cases follow.
    return simulator + tuple(c for c in ((n, t) for t in THREADS_GPU for n in SIZES_GPU) if c not in simulator)


def _guarded(values: np.ndarray, fill) -> cuda.devicearray.DeviceNDArray:
    """A device view of ``values`` whose memory continues with ``_GUARD`` copies of ``fill``."""
    buf = np.full(values.size + _GUARD, fill, dtype=values.dtype)
    buf[:values.size] = values
    return cuda.to_device(buf)[:values.size]


class _GuardedOutput:
    """An output of ``n`` elements filled with ``fill``, followed in device memory by ``guard`` more.

    ``.view`` is what the kernel gets; :meth:`wrote_outside` says whether the guard band changed (a GPU
    does not fault on a write just past an array, the simulator raises IndexError: this makes both fail).
    """

    def __init__(self, n: int, fill, guard: int = _GUARD):
        self.n = n
        self.fill = fill
        self.whole = cuda.to_device(np.full(n + guard, fill, dtype=np.asarray(fill).dtype))
        self.view = self.whole[:n]

    def wrote_outside(self) -> bool:
        return bool(np.any(self.whole.copy_to_host()[self.n:] != self.fill))

    def copy_to_host(self) -> np.ndarray:
        return self.view.copy_to_host()


def _out_of_bounds(what: str, n: int, extra: str = "") -> CheckFailed:
    return CheckFailed(f"{what} read or wrote outside an array for n={n}. Threads past the last element must not "
                       f"touch memory: guard every load and store with `if i < x.size` (never the barriers){extra}.")


def _first_bad(got, expected) -> str:
    bad = np.flatnonzero(got != expected)
    shown = ", ".join(f"index {i}: got {got[i]}, expected {expected[i]}" for i in bad[:4])
    return f"{bad.size} of {got.size} values are wrong ({shown})"


# ---------------------------------------------------------------------------------------------
# Exercise 1: Blelloch's scan in a block
# ---------------------------------------------------------------------------------------------


def _run_block(kernel, x: np.ndarray, threads: int, what: str):
    n = x.size
    per = 2 * threads
    blocks = max(1, -(-n // per))
    out = _GuardedOutput(n, SENTINEL)
    sums = _GuardedOutput(blocks, SENTINEL)
    try:
        launch_student_kernel(kernel, blocks, threads, (_guarded(x, np.int32(2**20)), out.view, sums.view), what)
    except IndexError:
        raise _out_of_bounds(what, n) from None
    if out.wrote_outside() or sums.wrote_outside():  # on a GPU; the simulator raised IndexError above
        raise _out_of_bounds(what, n)
    return out.copy_to_host(), sums.copy_to_host()


def check_blelloch_block(kernel) -> None:
    """Exercise 1: ``kernel(x, out, block_sums)``: each block scans its ``2 * blockDim.x`` elements (exclusive)
    with Blelloch's up-sweep and down-sweep, and stores their total in ``block_sums[blockIdx.x]``.

    Tried first on the slide's example (8 values, 4 threads), then on every size with several
    power-of-two block sizes, on int32 data (exact).
    """
    require_kernel(kernel, "blelloch_block")
    what = "your Blelloch kernel"
    x = np.array(sk.SLIDE_INPUT, np.int32)
    _race_check(kernel, x, what)
    out, sums = _run_block(kernel, x, 4, what)
    expected = sk.scan_reference(x, inclusive=False)
    if not np.array_equal(out, expected):
        hint = _blelloch_hint(out, x, expected, 4)
        raise CheckFailed(f"{what} is wrong on the slide's example {list(sk.SLIDE_INPUT)}: got {out.tolist()}, "
                          f"expected {expected.tolist()} (the slide prints 14 as the sixth value, but "
                          f"3 + 1 + 7 + 0 + 4 = 15). {hint}")
    _check_total(sums, x, 8, 4, what, n=8)
    rng = np.random.default_rng(11)
    for n, threads in cases():
        x = sk.integer_valued(n, rng, np.int32)
        out, sums = _run_block(kernel, x, threads, what)
        expected = sk.block_scan_reference(x, 2 * threads, inclusive=False)
        if not np.array_equal(out, expected):
            raise CheckFailed(f"{what} is wrong for n={n} with {threads} threads per block: "
                              f"{_first_bad(out, expected)}. {_blelloch_hint(out, x, expected, threads)}")
        _check_total(sums, x, 2 * threads, threads, what, n)
    print(f"Correct: {what} scans every block exactly, and its totals are right, for n in {list(sizes())} "
          f"with {list(_threads())} threads per block.")


def _race_check(kernel, x, what) -> None:
    """Run the kernel once through the race detector (one block of 4 threads, the slide's 8 values)."""
    from ..errors import GPUOnlyError
    from ..racecheck import check_races

    try:
        report = check_races(kernel, 1, 4, x, np.full(x.size, SENTINEL, np.int32), np.zeros(1, np.int32))
    except GPUOnlyError:  # on a GPU, a kernel the simulator process cannot rebuild: the value checks remain
        return
    except IndexError:
        raise _out_of_bounds(what, x.size) from None
    except Exception:  # noqa: BLE001  (a kernel that does not run is reported by the value checks)
        return
    report.raise_for_problems(what)


def _blelloch_hint(out, x, expected, threads) -> str:
    if np.any(out == SENTINEL):
        return ("Some outputs were never written: each thread writes two results, out[ia] and out[ib] (guarded by "
                "`< x.size`).")
    if np.array_equal(out, sk.block_scan_reference(x, 2 * threads, inclusive=True)):
        return "That is the inclusive scan: Blelloch's down-sweep gives the exclusive one; do not add x back."
    return ("Check the two sweeps: the up-sweep's offset doubles from 1 while d (the number of adding threads) "
            "halves from n/2 down to 1 inclusive; then thread 0 replaces the root s[n-1] by 0; the down-sweep runs "
            "d = 1, 2, ..., n/2 with offset halving, each adding pair swapping (t = s[a]; s[a] = s[b]; s[b] += t); "
            "cuda.syncthreads() before every level, outside the `if tid < d`.")


def _check_total(sums, x, per, threads, what, n) -> None:
    blocks = max(1, -(-x.size // per))
    padded = np.zeros(blocks * per, np.int64)
    padded[:x.size] = x
    expected = padded.reshape(blocks, per).sum(axis=1).astype(np.int32)
    if np.array_equal(sums, expected):
        return
    half = padded.reshape(blocks, 2, per // 2).sum(axis=2)[:, 1].astype(np.int32)
    if np.any(sums == SENTINEL):
        hint = "block_sums[cuda.blockIdx.x] was never written: thread 0 stores the root s[n - 1] before clearing it."
    elif np.array_equal(sums, half):
        hint = ("Each total is the sum of the block's second half only: the up-sweep stops one level early (the "
                "slide's `d < log2 n - 1`). The scan itself still comes out right, because the down-sweep discards the "
                "root, but the total is lost, and it is what joins the blocks (and counts a compaction).")
    elif np.array_equal(sums, np.zeros_like(sums)):
        hint = "Every total is 0: read the root into the total before thread 0 clears it (with a barrier in between)."
    else:
        hint = "After the up-sweep the root s[n - 1] holds the total: store it before clearing the root."
    raise CheckFailed(f"{what}: the block totals are wrong for n={n} with {threads} threads per block: got "
                      f"{sums[:6].tolist()}..., expected {expected[:6].tolist()}... {hint}")


# ---------------------------------------------------------------------------------------------
# Exercise 2: the block-sums step of scan-then-propagate
# ---------------------------------------------------------------------------------------------


def _propagate_scan(kernel, x: np.ndarray, threads: int, add_threads: int, what: str) -> np.ndarray:
    """Blelloch block scans (package), inclusive scan of the block totals (package), then the student's kernel."""
    n = x.size
    per = 2 * threads
    blocks = max(1, -(-n // per))
    # the guard band covers every thread of the last block of the student's launch
    out = _GuardedOutput(n, SENTINEL, guard=max(_GUARD, add_threads))
    sums = cuda.device_array(blocks, dtype=np.int32)
    empty = cuda.device_array(0, dtype=np.int32)
    sk.blelloch_scan.for_dtype(np.int32)[blocks, threads](cuda.to_device(x), out.view, sums, empty, 0)
    prefix = _guarded(sk.Scan(sums, "lookback", inclusive=True)(), np.int32(2**20))
    extra = ", and block 0 has no earlier blocks: skip it (b > 0) rather than read block_prefix[-1]"
    try:
        launch_student_kernel(kernel, max(1, -(-n // add_threads)), add_threads, (out.view, prefix, per), what)
    except IndexError:
        raise _out_of_bounds(what, n, extra) from None
    if out.wrote_outside():  # on a GPU; the simulator raised IndexError above
        raise _out_of_bounds(what, n, extra)
    return out.copy_to_host(), sums.copy_to_host()


def check_block_offsets(kernel) -> None:
    """Exercise 2: ``kernel(out, block_prefix, per_block)`` adds to every element of block ``b >= 1`` the sum of
    all earlier blocks, ``block_prefix[b - 1]`` (``block_prefix`` = the inclusive scan of the block totals).

    The checker makes ``out`` (each block's exclusive scan, Blelloch) and ``block_prefix``; your kernel is
    launched with a different block size than the scan (``per_block`` says how many elements each scan
    block covered). The result must equal NumPy's exclusive scan.
    """
    require_kernel(kernel, "add_block_offsets")
    what = "your block-offsets kernel"
    rng = np.random.default_rng(12)
    for n, threads in cases():
        x = sk.integer_valued(n, rng, np.int32)
        add_threads = 3 * threads if 3 * threads <= 1024 else 96
        got, sums = _propagate_scan(kernel, x, threads, add_threads, what)
        expected = sk.scan_reference(x, inclusive=False)
        if np.array_equal(got, expected):
            continue
        per = 2 * threads
        block = np.arange(n) // per
        incl = np.cumsum(sums.astype(np.int64)).astype(np.int32)
        local = sk.block_scan_reference(x, per, inclusive=False)
        first = slice(0, min(n, per))
        if np.any(got == SENTINEL):
            hint = "Some elements hold garbage: add to out[i], do not overwrite it, and only for i < out.size."
        elif np.array_equal(got, local):
            hint = "Nothing was added: every element of block b >= 1 needs block_prefix[b - 1]."
        elif np.array_equal(got[first], local[first] + incl[-1]) and incl[-1] != 0:
            hint = ("Block 0 got the grand total added: block_prefix[b - 1] with b = 0 is block_prefix[-1], the "
                    "last element. Add only when b > 0.")
        elif (np.array_equal(got, local + np.where(block > 0, incl[block], 0))
              or np.array_equal(got, local + incl[block])):
            hint = ("Each block got block_prefix[b], which includes its own total: use block_prefix[b - 1] (the "
                    "scan of the totals is inclusive), and nothing for block 0.")
        else:
            hint = ("The block of element i is i // per_block (per_block elements per scan block), not "
                    "cuda.blockIdx.x: this kernel runs with a different block size than the scan did.")
        raise CheckFailed(f"{what} is wrong for n={n} ({threads}-thread scan blocks of {per} elements, your "
                          f"kernel with {add_threads} threads per block): {_first_bad(got, expected)}. {hint}")
    print(f"Correct: with your kernel, the three-step scan equals NumPy's exclusive scan for n in {list(sizes())} "
          f"and scan blocks of {[2 * t for t in _threads()]} elements.")


# ---------------------------------------------------------------------------------------------
# Exercise 3: stream compaction
# ---------------------------------------------------------------------------------------------


def check_compaction(compact) -> None:
    """Exercise 3: ``compact(x, threshold)`` returns the elements of ``x`` greater than ``threshold``, in order
    (a NumPy array of exactly that length), computed with flags, an exclusive scan and a scatter.

    Tried with some, all and none of the elements kept, and with NaN (never kept: ``NaN > t`` is False).
    The cases that keep every element come last: there an inclusive scan used as the address writes one
    past the end of ``compact``'s own output, which the simulator reports (IndexError) but a GPU does not
    (the first element is then left uninitialised); the cases before them name that bug on both backends.
    """
    if not callable(compact):
        raise CheckFailed("compact must be a function compact(x, threshold) returning the kept elements.")
    what = "your compaction"
    rng = np.random.default_rng(13)
    all_cases = []
    for n in sizes():
        base = rng.standard_normal(n).astype(np.float32)
        base[rng.random(n) < 0.05] = np.nan
        tries = ((0.25, "some kept"), (-100.0, "all kept"), (100.0, "none kept"))
        if backend.is_simulator() and n == SIZES_SIM[-1]:
            tries = tries[:1]
        all_cases += [(n, t, case, base) for t, case in tries]
    every_kept = [np.count_nonzero(b > t) == n > 0 for n, t, _, b in all_cases]
    ordered = [c for c, last in zip(all_cases, every_kept) if not last] + \
              [c for c, last in zip(all_cases, every_kept) if last]
    for n, t, case, base in ordered:
        x = base.copy()
        expected = sk.compact_reference(x, t)
        try:
            got = compact(x, np.float32(t))
        except IndexError:
            raise _out_of_bounds(what, n, "; the address of a kept element is the exclusive scan of the flags (the "
                                          "inclusive scan puts the last kept element one past the end)") from None
        except NotImplementedError:
            raise CheckFailed(f"{what} is not written yet.") from None
        if got is None:
            raise CheckFailed(f"{what} returned None for n={n}: return the kept elements, out[:count].")
        got = np.asarray(got if isinstance(got, np.ndarray) else got.copy_to_host())
        if got.shape == expected.shape and np.array_equal(got, expected):
            continue
        k = expected.size
        if got.size == 0 and k > 0:
            hint = (f"Nothing came back, though {k} element(s) should: the count is the last address plus the "
                    "last flag (the exclusive scan's last value does not count the last element), and the scatter "
                    "must write every kept element to out[addresses[i]].")
        elif got.size == k - 1 and x[-1] > t:
            hint = ("One element short, and the last element is kept: the exclusive scan's last value counts the "
                    "flags before the last one only. The count is the last address plus the last flag: "
                    "count = addresses[n - 1] + flags[n - 1].")
        elif k > 1 and got.size >= k and np.array_equal(got[1:k], expected[:k - 1]):
            hint = ("Everything is one place to the right: that is the inclusive scan used as the address. The "
                    "address of a kept element is the number of kept elements before it: the exclusive scan.")
        elif got.size != k:
            hint = f"{got.size} elements returned, {k} expected: return out[:count]."
        elif np.array_equal(np.sort(got), np.sort(expected)):
            hint = "The right elements in the wrong order: the address must be the exclusive scan of the flags."
        else:
            hint = ("Scatter only the kept elements: `if i < x.size and x[i] > threshold: out[addresses[i]] = "
                    "x[i]`.")
        raise CheckFailed(f"{what} is wrong for n={n} ({case}): got {got[:6].tolist()}..., expected "
                          f"{expected[:6].tolist()}... {hint}")
    print(f"Correct: {what} keeps the right elements, in order, with the right count, for n in {list(sizes())} "
          "(some, all and none kept, NaN included).")


# ---------------------------------------------------------------------------------------------
# Exercise 4: one radix-split pass
# ---------------------------------------------------------------------------------------------


def _run_split(kernel, keys: np.ndarray, bit: int, what: str, threads: int = 64) -> np.ndarray:
    n = keys.size
    d_keys = _guarded(keys, np.uint32(0xFFFFFFFF))
    e = cuda.device_array(n, dtype=np.int32)
    blocks = max(1, -(-n // threads))
    sk.split_flags[blocks, threads](d_keys, bit, e)
    f = sk.Scan(e, "lookback", inclusive=False)
    f.launch()
    out = _GuardedOutput(n, np.uint32(0xDEADBEEF))
    extra = " (d must lie in 0 .. n - 1: check totalFalses)"
    try:
        launch_student_kernel(kernel, blocks, threads, (d_keys, bit, e, f.out, out.view), what)
    except IndexError:
        raise _out_of_bounds(what, n, extra) from None
    if out.wrote_outside():  # on a GPU; the simulator raised IndexError above
        raise _out_of_bounds(what, n, extra)
    return out.copy_to_host()


def _split_hint(got, keys, bit) -> str:
    table = sk.split_table(keys, bit)
    n = keys.size
    if n and np.all(got == np.uint32(0xDEADBEEF)):
        return "Nothing was written: scatter every key, out[d] = keys[i] with d = t if b else f[i]."
    if n and table["e"][-1] == 1 and np.any(got == np.uint32(0xDEADBEEF)) and got[-1] == np.uint32(0xDEADBEEF):
        return ("The last slot was never written and the last key's bit is 0: totalFalses is one short. It is "
                "e[n-1] + f[n-1] (the exclusive scan misses the last flag), not f[n-1].")
    if np.array_equal(np.sort(got), np.sort(keys)):
        return ("The right keys in the wrong places: keys with the bit 0 go to d = f[i], keys with the bit 1 to "
                "t = i - f[i] + totalFalses, both in their original order (a stable split).")
    return "Scatter every key once: out[d] = keys[i] with d = t if b else f[i]."


def check_radix_split(kernel) -> None:
    """Exercise 4: ``kernel(keys, bit, e, f, out)`` scatters every key to ``d = b ? t : f`` (the slide's table).

    ``e`` are the flags "bit is 0" and ``f`` their exclusive scan (made by the checker). First the slide's
    3-bit example, then random keys (a stable split must keep the order of equal bits), then a whole LSD
    radix sort made of your split, one bit after the other, against ``np.sort``.
    """
    require_kernel(kernel, "split_scatter")
    what = "your split kernel"
    keys = np.array(sk.SPLIT_KEYS, np.uint32)
    got = _run_split(kernel, keys, 0, what, threads=4)
    if not np.array_equal(got, np.array(sk.SPLIT_TABLE["out"], np.uint32)):
        expected = [format(k, "03b") for k in sk.SPLIT_TABLE["out"]]
        shown = [format(int(k), "03b") if k < 8 else hex(int(k)) for k in got]
        raise CheckFailed(f"{what} is wrong on the slide's example: got {shown}, expected {expected} "
                          f"(d = {list(sk.SPLIT_TABLE['d'])}). {_split_hint(got, keys, 0)}")
    rng = np.random.default_rng(14)
    for n in sizes():
        keys = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
        bits = (0, 31) if backend.is_simulator() and n == SIZES_SIM[-1] else (0, 7, 31)
        for bit in bits:
            got = _run_split(kernel, keys, bit, what)
            expected = sk.split_reference(keys, bit)
            if not np.array_equal(got, expected):
                raise CheckFailed(f"{what} is wrong for n={n}, bit {bit}: {_first_bad(got, expected)}. "
                                  f"{_split_hint(got, keys, bit)}")
    n = 120 if backend.is_simulator() else 2**16 + 3
    key_bits = 8 if backend.is_simulator() else 32
    keys = rng.integers(0, 2**key_bits, size=n, dtype=np.uint64).astype(np.uint32)
    keys[::7] = keys[3]  # duplicates
    current = keys
    for bit in range(key_bits):
        current = _run_split(kernel, current, bit, what)
    if not np.array_equal(current, np.sort(keys)):
        raise CheckFailed(f"{key_bits} passes of {what} (bit 0 first) do not sort {n} keys: "
                          f"{_first_bad(current, np.sort(keys))}. Every pass must be stable.")
    print(f"Correct: {what} reproduces the slide's table, splits stably for n in {list(sizes())}, and {key_bits} "
          f"passes of it sort {n} keys like np.sort.")
