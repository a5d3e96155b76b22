"""Checkers for the lab "Scan and the patterns built on it" (labs/10_scan_lab.ipynb).

Every kernel exercise is declared for the exercise harness (:mod:`labhelpers.exercises.harness`): partial
last blocks, the race detector on two blocks (the last one partial), whole outputs with guard bands, and
values equal to the compaction's threshold planted in the inputs. Data are int32 (every result exact),
except the compaction's float32 with NaN. What is specific to scans lives here: the references, the
sizes (the slide's 8, 1000, and 2**20 + 7 on a GPU) and the hints that recognise the usual bugs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..checkers import NUMBA_TRACE_LIMIT
from ..errors import CheckFailed
from ..experiments import scan as experiments
from ..kernels import scan as sk
from ..launch import blocks_for
from ..refdata import load_reference
from ..timing import Timing, benchmark
from . import answers
from . import harness as h
from . import timed

#: Sizes on a GPU and under the simulator (the harness adds 1, B - 1 and B + 1 for every block).
SIZES_GPU = (1, 31, 33, 1000, 2**20 + 7)
SIZES_SIM = (1, 31, 33, 1000)
#: Threads per block tried by the block-level checkers.
THREADS_GPU = (32, 128, 512)
THREADS_SIM = (4, 16)
#: What an unwritten int32 output element holds.
SENTINEL = np.int32(h.INT_SENTINEL)
#: The compaction's threshold, also planted in its inputs.
THRESHOLD = np.float32(0.25)
#: What an unwritten key of the split holds.
NO_KEY = np.uint32(0xDEADBEEF)
#: The class of a predicate that keeps NaN (``not (x <= t)``, ``not x <= t``): every comparison with NaN is False,
#: so its negation is True.
NAN_PREDICATE = "NaN predicate"
#: What fills the output of the scatter's NaN probe (finite: a NaN written there shows, unlike in a NaN fill).
NAN_PROBE_FILL = np.float32(-2.0e38)
#: The NaN probe: one kept element, then a NaN, whose address is the count, where nothing else writes (the same on
#: every backend and in every order of the threads).
NAN_PROBE = np.array([0.5, np.nan], np.float32)


def sizes() -> tuple[int, ...]:
    """The sizes the checkers try on this backend."""
    return SIZES_SIM if backend.is_simulator() else SIZES_GPU


def _sizes_for(config) -> list[int]:
    """The simulator's largest size with its largest block only (a few thousand threads per second)."""
    small = [8, 31, 33]
    return small + [SIZES_SIM[-1]] if config["threads"] == THREADS_SIM[-1] else small


def _first_bad(got, expected) -> str:
    bad = np.flatnonzero(got != expected)
    shown = ", ".join(f"index {i}: got {got[i]}, expected {expected[i]}" for i in bad[:4])
    return f"{bad.size} of {got.size} values are wrong ({shown})"


# ---------------------------------------------------------------------------------------------
# Exercise 1: Blelloch's scan in a block
# ---------------------------------------------------------------------------------------------


def _blelloch_args(case: h.Case) -> tuple:
    blocks = h.grid_for(case.n, case.threads, 2)
    return (case.ints(), h.Out(case.n, np.int32), h.Out(blocks, np.int32))


def _totals(x: np.ndarray, threads: int) -> np.ndarray:
    """Each Blelloch block's total: blocks of ``threads`` threads, two elements per thread (the partial last one
    padded with 0)."""
    per = 2 * threads
    blocks = blocks_for(x.size, threads, 2)
    padded = np.zeros(blocks * per, np.int64)
    padded[:x.size] = x
    return padded.reshape(blocks, per).sum(axis=1).astype(np.int32)


def _blelloch_reference(case, x):
    per = 2 * case.threads
    return sk.block_scan_reference(x, per, inclusive=False), _totals(x, case.threads)


def _blelloch_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    x = inputs[0]
    per = 2 * case.threads
    if index == 1:
        blocks = got.size
        padded = np.zeros(blocks * per, np.int64)
        padded[:x.size] = x
        half = padded.reshape(blocks, 2, per // 2).sum(axis=2)[:, 1].astype(np.int32)
        if np.any(got == SENTINEL):
            return (h.NEVER_WRITTEN, "block_sums[cuda.blockIdx.x] was never written: thread 0 stores the root "
                    "s[n - 1] before clearing it.")
        if np.array_equal(got, half):
            return ("Up-sweep one level short", "each total is the sum of the block's second half only: the "
                    "up-sweep stops one level early (the slide's `d < log2 n - 1`). The scan itself still comes out "
                    "right, because the down-sweep discards the root, but the total is lost, and it is what joins "
                    "the blocks (and counts a compaction).")
        if not got.any():
            return (h.WRONG_VALUES, "every total is 0: read the root into the total before thread 0 clears it "
                    "(with a barrier in between).")
        return (h.WRONG_VALUES, "after the up-sweep the root s[n - 1] holds the total: store it before clearing it.")
    if np.any(got == SENTINEL):
        return None
    if np.array_equal(got, sk.block_scan_reference(x, per, inclusive=True)):
        return ("Inclusive instead of exclusive", "Blelloch's down-sweep gives the exclusive scan; do not add x "
                "back.")
    return (h.WRONG_VALUES, "check the two sweeps: the up-sweep's offset doubles from 1 while d (the number of adding "
            "threads) halves from n/2 down to 1 inclusive; then thread 0 replaces the root s[n-1] by 0; the "
            "down-sweep runs d = 1, 2, ..., n/2 with offset halving, each adding pair swapping (t = s[a]; "
            "s[a] = s[b]; s[b] += t); cuda.syncthreads() before every level, outside the `if tid < d`.")


def blelloch_exercise() -> h.Exercise:
    """Exercise 1 as declared for the harness (each block covers 2 * blockDim.x elements)."""
    return h.Exercise(
        name="your Blelloch kernel", args=_blelloch_args, reference=_blelloch_reference,
        configs=[{"threads": t} for t in THREADS_SIM], configs_gpu=[{"threads": t} for t in THREADS_GPU],
        per_thread=2, sizes=_sizes_for, sizes_gpu=SIZES_GPU, explain=_blelloch_explain, seed=11)


def check_blelloch_block(kernel: Any) -> None:
    """Exercise 1: ``kernel(x, out, block_sums)``: each block scans its ``2 * blockDim.x`` elements (exclusive)
    with Blelloch's up-sweep and down-sweep, and stores their total in ``block_sums[blockIdx.x]``.

    The slide's 8 values with 4 threads, partial blocks and several block sizes, on int32 data (exact).
    """
    h.check(blelloch_exercise(), kernel)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the block-sums step of scan-then-propagate
# ---------------------------------------------------------------------------------------------


def _offsets_args(case: h.Case) -> tuple:
    x = case.ints()
    per = 2 * case["scan_threads"]
    local = sk.block_scan_reference(x, per, inclusive=False).astype(np.int32)
    prefix = np.cumsum(_totals(x, case["scan_threads"]).astype(np.int64)).astype(np.int32)
    return (h.Out(case.n, np.int32, initial=local), prefix, per)


def _offsets_reference(case, local, prefix, per):
    block = np.arange(local.size) // per
    return local + np.where(block > 0, prefix[np.maximum(block - 1, 0)], 0)


def _offsets_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str]:
    local, prefix, per = inputs
    block = np.arange(got.size) // per
    first = slice(0, min(got.size, per))
    if np.array_equal(got, local):
        return ("Nothing added", "every element of scan block b = i // per_block >= 1 (not cuda.blockIdx.x: your "
                "kernel's blocks are not the scan's) needs block_prefix[b - 1].")
    launch_block = np.arange(got.size) // case.threads
    if (launch_block != block).any() and np.array_equal(
            got, local + np.where(launch_block > 0, prefix[np.clip(launch_block - 1, 0, prefix.size - 1)], 0)):
        return ("Block from blockIdx", "the block of element i is i // per_block (per_block elements per scan "
                "block), not cuda.blockIdx.x: this kernel runs with a different block size than the scan did.")
    if np.array_equal(got[first], local[first] + prefix[-1]) and prefix[-1] != 0:
        return ("Block 0 must get nothing", "block 0 got the grand total added: block_prefix[b - 1] with b = 0 is "
                "block_prefix[-1], the last element. Add only when b > 0.")
    if np.array_equal(got, local + np.where(block > 0, prefix[block], 0)) or np.array_equal(got, local + prefix[block]):
        return ("Off by one block", "each block got block_prefix[b], which includes its own total: use "
                "block_prefix[b - 1] (the scan of the totals is inclusive), and nothing for block 0.")
    return (h.WRONG_VALUES, "the block of element i is i // per_block (per_block elements per scan block), not "
            "cuda.blockIdx.x: this kernel runs with a different block size than the scan did.")


def offsets_exercise() -> h.Exercise:
    """Exercise 2 as declared: ``out`` (each scan block's exclusive scan) is updated in place."""
    sim = [{"threads": 3 * t, "scan_threads": t} for t in THREADS_SIM]
    gpu = [{"threads": 3 * t if 3 * t <= 1024 else 96, "scan_threads": t} for t in THREADS_GPU]
    return h.Exercise(
        name="your block-offsets kernel", args=_offsets_args, reference=_offsets_reference, configs=sim,
        configs_gpu=gpu, sizes=_sizes_for, sizes_gpu=SIZES_GPU, explain=_offsets_explain, seed=12)


def check_block_offsets(kernel: Any) -> None:
    """Exercise 2: ``kernel(out, block_prefix, per_block)`` adds to every element of block ``b >= 1`` the sum of
    all earlier blocks, ``block_prefix[b - 1]`` (``block_prefix`` = the inclusive scan of the block totals).

    ``out`` holds each scan block's exclusive scan; your kernel runs with a different block size than the
    scan (``per_block`` says how many elements each scan block covered). The result must equal NumPy's
    exclusive scan.
    """
    h.check(offsets_exercise(), kernel)


# ---------------------------------------------------------------------------------------------
# Exercise 3: stream compaction
# ---------------------------------------------------------------------------------------------


def _with_nan(case: h.Case) -> np.ndarray:
    x = case.floats()
    nan = case.rng.random(x.size) < 0.05
    nan[-1:] = False  # the last element keeps the planted threshold
    x[nan] = np.nan
    return x


def _scatter_args(case: h.Case) -> tuple:
    x = _with_nan(case)
    addresses = sk.scan_reference((x > THRESHOLD).astype(np.int32), inclusive=False).astype(np.int32)
    return (x, THRESHOLD, addresses, h.Out(case.n, np.float32))


def _scatter_reference(case, x, threshold, addresses):
    out = np.full(x.size, np.nan, np.float32)
    kept = x > threshold
    out[addresses[kept]] = x[kept]
    return out


def _scatter_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str] | None:
    k = int(np.count_nonzero(~np.isnan(expected)))
    if k and np.array_equal(got[1:k + 1], expected[:k]):
        return ("Inclusive scan as the address", "everything is one place to the right: the address of a kept "
                "element is the number of kept elements before it, the exclusive scan of the flags.")
    if (np.isnan(expected) & ~np.isnan(got)).any():
        return ("Scatter without its predicate", "elements past the kept ones were written (the checker compares the "
                "whole output, not only out[:count]): scatter only the kept elements, `if i < x.size and x[i] > "
                "threshold: out[addresses[i]] = x[i]`.")
    return None


def scatter_exercise() -> h.Exercise:
    """Exercise 3's kernel as declared (the threshold planted in the inputs: ``>`` against ``>=`` shows)."""
    return h.Exercise(
        name="your scatter kernel", args=_scatter_args, reference=_scatter_reference,
        configs=[{"threads": 32}], configs_gpu=[{"threads": 128}], sizes=lambda config: SIZES_SIM,
        sizes_gpu=SIZES_GPU, thresholds=(THRESHOLD,), dtype=np.float32, rtol=0, atol=0, explain=_scatter_explain,
        threshold_hint="elements equal to the threshold are kept: `x[i] > threshold` keeps only greater ones (use > "
                       "not >=, as keep_flags does)", seed=13)


def _probe_scatter(scatter: Any, x: np.ndarray) -> np.ndarray | None:
    """``scatter`` on ``x`` (one thread per element: no thread past the end, so an unguarded kernel stays inside the
    buffers), the output filled with :data:`NAN_PROBE_FILL`; the output, or None if the kernel does not run."""
    addresses = sk.scan_reference((x > THRESHOLD).astype(np.int32), inclusive=False).astype(np.int32)
    out = h.GuardedOutput(x.size, np.float32, fill=NAN_PROBE_FILL)
    try:
        with np.errstate(all="ignore"):
            scatter[1, x.size](h.guarded_input(x), THRESHOLD, h.guarded_input(addresses), out.view)
        return out.whole()
    except Exception:  # noqa: BLE001  (does not compile or run: the harness's cases report it)
        return None


def _check_scatter_nan(scatter: Any) -> None:
    """A scatter whose predicate keeps NaN writes the NaN to the address of the next kept element (a write after
    write that the simulator's thread order always resolves in favour of the kept element) or, after the last kept
    one, to out[count], where nothing else writes: the probe [0.5, NaN] has its NaN there, in an output filled with
    a finite value, so it shows on both backends and in every order. [0.5, -0.5] first: a kernel that also writes
    the numbers it should not keep is left to the harness ("Scatter without its predicate")."""
    numbers = _probe_scatter(scatter, np.array([0.5, -0.5], np.float32))
    if numbers is None or numbers[1] != NAN_PROBE_FILL:
        return
    got = _probe_scatter(scatter, NAN_PROBE)
    if got is not None and np.isnan(got).any():
        raise h.failure(NAN_PREDICATE, f"your scatter kernel wrote NaN into out for x = {NAN_PROBE.tolist()} and "
                                       f"threshold {float(THRESHOLD)} (1 element kept: out[1:] must stay "
                                       "untouched): its predicate keeps NaN. Every comparison with NaN is False, so "
                                       "`not (x[i] <= threshold)` is True for NaN: test `x[i] > threshold`, as "
                                       "keep_flags does. A NaN before a kept element is scattered to that element's "
                                       "address too, a write after write whose winner depends on the order of the "
                                       "threads (on a GPU the NaN may win).")


def _compaction_cases(rng: np.random.Generator) -> list[tuple[int, float, str, np.ndarray]]:
    cases = []
    for n in sizes():
        base = rng.standard_normal(n).astype(np.float32)
        base[rng.random(n) < 0.05] = np.nan
        base[::4] = THRESHOLD  # equal to the threshold: never kept
        tries = ((THRESHOLD, "some kept, some equal to the threshold"), (-100.0, "all kept"), (100.0, "none kept"))
        if backend.is_simulator() and n == SIZES_SIM[-1]:
            tries = tries[:1]
        cases += [(n, t, what, base) for t, what in tries]
    every_kept = [np.count_nonzero(b > t) == n > 0 for n, t, _, b in cases]
    # Keeping every element comes last: an inclusive scan used as the address then writes past the end of
    # compact's own output (IndexError in the simulator only); the cases before name that bug on both backends.
    return [c for c, last in zip(cases, every_kept) if not last] + [c for c, last in zip(cases, every_kept) if last]


def _compaction_hint(got: np.ndarray, expected: np.ndarray, x: np.ndarray, t) -> tuple[str, str]:
    k = expected.size
    with np.errstate(invalid="ignore"):
        keeps_nan = ~(x <= t)  # what a predicate written `not (x <= t)` keeps: NaN as well
    if np.isnan(x).any() and got.size == np.count_nonzero(keeps_nan) != k:
        return (NAN_PREDICATE, f"{got.size - k} element(s) too many, as many as the NaN in x: the predicate keeps "
                "NaN. Every comparison with NaN is False, so `not (x[i] <= threshold)` is True for NaN: test "
                "`x[i] > threshold` (in the flags and in the scatter).")
    if got.size == 0 and k > 0:
        return ("Count", f"nothing came back, though {k} element(s) should: the count is the last address plus "
                "the last flag (the exclusive scan's last value does not count the last element).")
    if got.size == k - 1 and x[-1] > t:
        return ("Count", "one element short, and the last element is kept: the exclusive scan's last value counts "
                "the flags before the last one only. count = addresses[n - 1] + flags[n - 1].")
    if k > 1 and got.size >= k and np.array_equal(got[1:k], expected[:k - 1]):
        return ("Inclusive scan as the address", "everything is one place to the right: the address of a kept "
                "element is the number of kept elements before it, the exclusive scan.")
    if got.size != k:
        return ("Count", f"{got.size} elements returned, {k} expected: return out[:count].")
    if np.array_equal(np.sort(got), np.sort(expected)):
        return (h.WRONG_VALUES, "the right elements in the wrong order: the address must be the exclusive scan of "
                "the flags.")
    return (h.WRONG_VALUES, "scatter only the kept elements: `if i < x.size and x[i] > threshold: "
            "out[addresses[i]] = x[i]`.")


def check_compaction(compact: Any, scatter: Any = None) -> None:
    """Exercise 3: ``scatter(x, threshold, addresses, out)`` (a kernel) and ``compact(x, threshold)``, which returns
    the elements of ``x`` greater than ``threshold``, in order, as a NumPy array of exactly that length.

    The scatter kernel goes through the harness (its whole output compared: a write outside out[:count]
    shows; inputs equal to the threshold planted). Then ``compact`` with some, all and none kept, NaN
    (never kept) and elements equal to the threshold (never kept).
    """
    h.require_function(compact, "compact", "compact(x, threshold)")
    if scatter is not None:
        h.require_kernel(scatter, scatter_exercise().name)
        _check_scatter_nan(scatter)  # first: on a GPU the harness's cases may show the NaN's write after write
        h.check(scatter_exercise(), scatter, quiet=True)
    what = "your compaction"
    for n, t, case, base in _compaction_cases(np.random.default_rng(13)):
        x = base.copy()
        expected = sk.compact_reference(x, t)
        try:
            got = compact(x, np.float32(t))
        except IndexError:
            raise h.failure(h.MISSING_GUARD, f"{what} read or wrote outside an array for n={n} ({case}); the address "
                                             "of a kept element is the exclusive scan of the flags (the inclusive "
                                             "scan puts the last kept element one past the end).") from None
        except NotImplementedError:
            raise h.failure(h.NOT_WRITTEN_YET, f"{what} is not written yet.") from None
        except CheckFailed:
            raise
        except Exception as exc:  # noqa: BLE001
            raise h.failure(h.DOES_NOT_RUN, f"{what} raised {type(exc).__name__} for n={n}: "
                                            f"{str(exc)[:NUMBA_TRACE_LIMIT]}") from None
        got = h.as_result_array(got, what, np.float32)
        if got.shape == expected.shape and np.array_equal(got, expected):
            continue
        cls, hint = _compaction_hint(got, expected, x, t)
        if got.size == expected.size + np.count_nonzero(x == t) and np.array_equal(np.sort(got[~np.isnan(got)]),
                                                                                   np.sort(x[x >= t])):
            cls, hint = h.THRESHOLD, "elements equal to the threshold came back: keep only x > threshold (use > not >=)."
        raise h.failure(cls, f"{what} is wrong for n={n} ({case}): got {got[:6].tolist()}..., expected "
                             f"{expected[:6].tolist()}... {hint}")
    print(f"Correct: {what} keeps the right elements, in order, with the right count, for n in {list(sizes())} "
          "(some, all and none kept, NaN and values equal to the threshold included)"
          + (", and the scatter writes nothing outside out[:count]." if scatter is not None else "."))


# ---------------------------------------------------------------------------------------------
# Exercise 4: one radix-split pass
# ---------------------------------------------------------------------------------------------


def _split_args(case: h.Case) -> tuple:
    keys = case.rng.integers(0, 2**32, size=case.n, dtype=np.uint64).astype(np.uint32)
    if case.n >= 8:
        keys[:8] = sk.SPLIT_KEYS  # the slide's example first
    e = ((keys >> np.uint32(case["bit"])) & np.uint32(1) == 0).astype(np.int32)
    f = sk.scan_reference(e, inclusive=False).astype(np.int32)
    return (keys, case["bit"], e, f, h.Out(case.n, np.uint32, fill=NO_KEY))


def _split_explain(case: h.Case, index: int, got, expected, inputs) -> tuple[str, str]:
    keys, bit, e, _f = inputs
    if np.all(got == NO_KEY):
        return (h.NEVER_WRITTEN, "nothing was written: scatter every key, out[d] = keys[i] with d = t if b else "
                "f[i].")
    if e[-1] == 1 and got[-1] == NO_KEY:
        return ("totalFalses one short", "the last slot was never written and the last key's bit is 0: "
                "totalFalses is e[n-1] + f[n-1] (the exclusive scan misses the last flag), not f[n-1].")
    if np.array_equal(np.sort(got), np.sort(keys)):
        return (h.WRONG_VALUES, "the right keys in the wrong places: keys with the bit 0 go to d = f[i], keys with "
                "the bit 1 to t = i - f[i] + totalFalses, both in their original order (a stable split).")
    return (h.WRONG_VALUES, "scatter every key once: out[d] = keys[i] with d = t if b else f[i].")


def split_exercise() -> h.Exercise:
    """Exercise 4 as declared for the harness (the slide's keys first in every case of 8 or more)."""
    return h.Exercise(
        name="your split kernel", args=_split_args, reference=lambda case, keys, bit, e, f: sk.split_reference(keys, bit),
        configs=[{"threads": 4, "bit": 0}, {"threads": 32, "bit": 7}, {"threads": 16, "bit": 31}],
        configs_gpu=[{"threads": 256, "bit": 5}], sizes=lambda config: (8, 31, 100), sizes_gpu=SIZES_GPU,
        explain=_split_explain, seed=14)


def _run_split(kernel: Any, keys: np.ndarray, bit: int, threads: int = 64) -> np.ndarray:
    n = keys.size
    e = ((keys >> np.uint32(bit)) & np.uint32(1) == 0).astype(np.int32)
    f = sk.scan_reference(e, inclusive=False).astype(np.int32)
    out = cuda.device_array(n, dtype=np.uint32)
    kernel[h.grid_for(n, threads), threads](cuda.to_device(keys), bit, cuda.to_device(e), cuda.to_device(f), out)
    return out.copy_to_host()


def check_radix_split(kernel: Any) -> None:
    """Exercise 4: ``kernel(keys, bit, e, f, out)`` scatters every key to ``d = b ? t : f`` (the slide's table).

    ``e`` are the flags "bit is 0" and ``f`` their exclusive scan (made by the checker). The harness tries
    the slide's keys, random keys (a stable split keeps the order of equal bits) and partial blocks; then a
    whole LSD radix sort made of your split, one bit after the other, must equal ``np.sort``.
    """
    what = "your split kernel"
    h.check(split_exercise(), kernel, quiet=True)
    rng = np.random.default_rng(14)
    n = 120 if backend.is_simulator() else 2**16 + 3
    key_bits = 8 if backend.is_simulator() else 32
    keys = rng.integers(0, 2**key_bits, size=n, dtype=np.uint64).astype(np.uint32)
    keys[::7] = keys[3]  # duplicates
    current = keys
    for bit in range(key_bits):
        current = _run_split(kernel, current, bit)
    if not np.array_equal(current, np.sort(keys)):
        raise h.failure("Unstable split", f"{key_bits} passes of {what} (bit 0 first) do not sort {n} keys: "
                                          f"{_first_bad(current, np.sort(keys))}. Every pass must be stable.")
    print(f"Correct: {what} reproduces the slide's table, splits stably for every size tried (partial blocks "
          f"included), and {key_bits} passes of it sort {n} keys like np.sort.")


__all__ = ["BOUND_CASES", "BOUND_METHODS", "blelloch_exercise", "check_blelloch_block", "check_block_offsets",
           "check_compaction", "check_radix_split", "check_scan_bound", "offsets_exercise", "scatter_exercise",
           "show_scan_bound", "sizes", "split_exercise"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Threads per block of your Blelloch kernel the measured exercise accepts (powers of two: Blelloch's tree; the
#: kernel's shared array holds 2048 elements, two per thread).
TUNED_THREADS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
#: Elements scanned on a GPU (the chapter's methods table, ``ch10_scan_methods``).
TUNED_N = 2**24
#: Threads per block of the block-offsets kernel in your scan.
OFFSET_THREADS = 256
#: CUB's scan moves 8 bytes per element, scan-then-propagate 16: the chapter's version (256 threads) reached about
#: a fifth of CUB on the reference GPU, so the target leaves room for the block totals' own scan.
SCAN_TARGET = timed.target_for("10", 0.15)


class YourScan:
    """Your exercise 1 and 2 kernels as a whole scan-then-propagate (exclusive) of ``x``, planned once.

    Blelloch block scans of ``2 * threads`` elements (your ``blelloch_block``, block totals in ``sums``), the
    inclusive scan of the totals (the chapter's look-back scan), then your ``add_block_offsets``.
    """

    def __init__(self, blelloch_block: Any, add_block_offsets: Any, x: Any, threads: int) -> None:
        self.x = cuda.to_device(x) if isinstance(x, np.ndarray) else x
        n = self.x.shape[0]
        self.per_block = 2 * threads
        self.blocks, self.threads = blocks_for(n, threads, 2), threads
        self.out = cuda.device_array(n, dtype=np.int32)
        self.sums = cuda.device_array(self.blocks, dtype=np.int32)
        self.totals = sk.Scan(self.sums, "lookback", inclusive=True)
        self.scan_blocks, self.add = blelloch_block, add_block_offsets
        self.add_blocks = blocks_for(n, OFFSET_THREADS)

    def launch(self) -> None:
        """Enqueue the three steps (no allocation, no copy)."""
        self.scan_blocks[self.blocks, self.threads](self.x, self.out, self.sums)
        self.totals.launch()
        self.add[self.add_blocks, OFFSET_THREADS](self.out, self.totals.out, np.int32(self.per_block))


def _check_your_scan(blelloch_block: Any, add_block_offsets: Any, threads: int) -> None:
    """Your two kernels, assembled at ``threads``, scan two blocks (the last partial) exactly like NumPy."""
    n = 2 * threads + 3
    x = np.random.default_rng(10).integers(-50, 50, n).astype(np.int32)
    scan = YourScan(blelloch_block, add_block_offsets, x, threads)
    scan.launch()
    got = scan.out.copy_to_host()
    want = np.concatenate([[0], np.cumsum(x[:-1], dtype=np.int64)]).astype(np.int32)
    if not np.array_equal(got, want):
        raise h.failure(h.WRONG_VALUES, f"your two kernels assembled into a scan with {threads} threads per Blelloch "
                                        f"block give the wrong exclusive scan of {n} int32: {_first_bad(got, want)}.")
    print(f"Correct: your Blelloch block scan and your block offsets, with {threads} threads per block, scan "
          f"{n} elements exactly like NumPy.")


def _scan_reference(threads: int) -> str:
    ref = load_reference("ch10_scan_methods")
    t = ref.table.set_index("method")
    mine, cub = float(t.loc["scan_then_propagate", "median_ms"]), float(t.loc["cub_scan", "median_ms"])
    blocks = load_reference("ch10_block_scans").table
    row = blocks[(blocks["kernel"] == "blelloch_unpadded") & (blocks["threads"] == threads)]
    block_text = (f"; the unpadded Blelloch block scans alone (like yours) took {float(row.median_ms.iloc[0]):.3g} ms "
                  f"with {threads} threads per block ('ch10_block_scans')" if len(row) else
                  f"; Blelloch block scans with {threads} threads per block were not measured")
    return timed.reference_text(
        ref, f"the chapter's scan-then-propagate (Blelloch blocks of 256 threads) took {mine:.3g} ms on "
             f"{int(t.loc['cub_scan', 'n']):,} int32, CUB's scan {cub:.3g} ms: ratio {cub / mine:.2f}{block_text}")


SCAN_TUNED = timed.MeasuredExercise(
    name="your scan-then-propagate at your block size", target=SCAN_TARGET,
    measures=f"your two kernels as one scan of {TUNED_N:,} int32 (block scans, the totals' scan, block offsets)",
    yardstick="CUB's scan of the same array (experiments.scan.cub_scan, in place)", reference=_scan_reference)


def _race_scan(blelloch_block: Any, add_block_offsets: Any, threads: int) -> tuple[Timing, Timing]:
    x = experiments.random_values(TUNED_N, np.int32)
    scan = YourScan(blelloch_block, add_block_offsets, cuda.as_cuda_array(x), threads)
    nbytes = 2 * x.nbytes  # effective bytes: read once, write once (as the chapter's tables count)
    student = benchmark(scan.launch, nbytes=nbytes, repeat=10, label=f"your scan, {threads} threads")
    buf = x.copy()  # CUB scans in place: its own copy
    yardstick = benchmark(lambda: experiments.cub_scan(buf), nbytes=nbytes, repeat=10, label="CUB's scan")
    return student, yardstick


def check_scan_threads(blelloch_block: Any, add_block_offsets: Any, choose_threads) -> timed.Verdict:
    """Measured exercise: ``choose_threads()`` returns the threads per block of your ``blelloch_block``; exercises
    1 and 2 are checked first, then your two kernels assembled into one scan at that block size; on a GPU the
    scan of 2^24 int32 must reach :data:`SCAN_TARGET` of CUB's scan, timed in the same run.

    Raises:
        CheckFailed: a kernel is wrong (the harness's class), the block size is not allowed, or too slow.
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)

    def correct() -> None:
        check_blelloch_block(blelloch_block)
        check_block_offsets(add_block_offsets)
        _check_your_scan(blelloch_block, add_block_offsets, threads)

    return timed.check(SCAN_TUNED, threads, correct=correct,
                          race=lambda: _race_scan(blelloch_block, add_block_offsets, threads))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (n, itemsize, passes, copy_gbs) cases of :func:`check_scan_bound`: arguments of the exercise, not a GPU's figures.
BOUND_CASES: tuple[tuple[int, int, int, float], ...] = (
    (10**6, 8, 3, 250.0), (2**24, 4, 2, 3000.0), (2**24, 4, 1, 3000.0))
#: The reference methods shown beside the prediction, with their passes over the array.
BOUND_METHODS: tuple[tuple[str, int], ...] = (("scan_then_propagate", 2), ("cub_scan", 1))


def _bound_hint(got: float, n: int, itemsize: int, passes: int, gbs: float) -> str:
    want = 2 * passes * itemsize * n / (gbs * 1e9) * 1e3
    if np.isclose(got, want / 2, rtol=1e-6):
        return "each pass reads every element AND writes it: 2 * itemsize bytes per element per pass"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not elements: {itemsize} bytes per element"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "bytes / (GB/s * 1e9) is seconds: times 1000 for milliseconds"
    if np.isclose(got, want / passes, rtol=1e-6):
        return f"{passes} passes move the array {passes} times"
    return f"bytes moved = 2 * passes * itemsize * n; time = bytes / ({gbs:g}e9 B/s)"


def check_scan_bound(predict_scan_ms: Any) -> None:
    """Predict, then measure: ``predict_scan_ms(n, itemsize, passes, copy_gbs)`` returns the least time in ms of a
    scan that makes ``passes`` passes over ``n`` elements of ``itemsize`` bytes, each pass reading and writing every
    element once, at the copy ceiling ``copy_gbs`` (GB/s, 10^9 bytes per second).

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_scan_ms, "predict_scan_ms",
                          "predict_scan_ms(n, itemsize, passes, copy_gbs)",
                          BOUND_CASES,
                          lambda n, itemsize, passes, gbs: 2 * passes * itemsize * n / (gbs * 1e9) * 1e3,
                          shown=lambda got, want: f"{got:.6g} ms, the bound is {want:.6g} ms",
                          hint=_bound_hint)
    print(f"Correct: your bound equals bytes moved over the copy ceiling on all {len(BOUND_CASES)} cases.")


def show_scan_bound(predict_scan_ms: Any) -> pd.DataFrame:
    """Your bound (checked first by :func:`check_scan_bound`) beside measured times of scan-then-propagate and CUB's
    scan on :data:`TUNED_N` int32: on a GPU the copy ceiling and CUB's scan are timed now (scan-then-propagate is
    the chapter's measurement), under the simulator all come from reference ``ch10_scan_methods``.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_scan_bound`).
    """
    check_scan_bound(predict_scan_ms)
    ref = load_reference("ch10_scan_methods")
    t = ref.table.set_index("method")
    measured_ms = {m: float(t.loc[m, "median_ms"]) for m, _ in BOUND_METHODS}
    copy_gbs = float(t.loc["copy", "gbps"])
    if timed.can_time():
        x = experiments.random_values(TUNED_N, np.int32)
        copy_gbs = timed.time_copy_of(2 * x.nbytes).gbps
        measured_ms["cub_scan"] = benchmark(lambda: experiments.cub_scan(x), repeat=10, label="CUB's scan").median_ms
        print(f"Measured now: the copy ceiling and CUB's scan; scan-then-propagate from {ref.name!r} ({ref.gpu}).")
    else:
        print(timed.reference_text(ref, f"Measured (copy ceiling {copy_gbs:,.0f} GB/s)"))
    rows = []
    for method, passes in BOUND_METHODS:
        bound = answers.number(answers.call(predict_scan_ms, "predict_scan_ms", TUNED_N, 4, passes, copy_gbs),
                               "predict_scan_ms")
        rows.append({"method": method, "passes": passes, "your bound (ms)": round(bound, 4),
                     "measured (ms)": round(measured_ms[method], 4),
                     "measured / bound": round(measured_ms[method] / bound, 2)})
    return pd.DataFrame(rows)
