"""Chapter "Parallel reduction": what one block does at each level of the classic reduction trees (variants 1-3).

A block of ``block`` threads holds ``block`` values in shared memory and adds them in
``log2(block)`` levels. The three classic variants differ only in *which* threads add and
*which* words they touch:

======  ==========================  =====================  ==================
 no.    name                        adding threads         word written / read
======  ==========================  =====================  ==================
 1      interleaved, divergent      ``tid % (2s) == 0``    ``tid`` / ``tid + s``
 2      interleaved, no divergence  ``tid < block / (2s)``  ``2 s tid`` / ``2 s tid + s``
 3      sequential addressing       ``tid < s``            ``tid`` / ``tid + s``
======  ==========================  =====================  ==================

(``s`` is the stride: 1, 2, 4... for variants 1-2; block/2, block/4... for variant 3.)

For each level :func:`tree_levels` lists the adding threads and words; :class:`TreeLevel`
counts the warps that have work, the warps that diverge (some lanes add, some do not) and
the worst shared-memory bank conflict: shared memory has 32 banks of 4-byte words (word
``w`` lives in bank ``w % 32``), and a warp's access is split into as many passes as the
largest number of *different* words it touches in one bank (NVIDIA, *CUDA C++
Programming Guide*, "Shared Memory"). :func:`labhelpers.figures.reduction.draw_level` draws one
level, for the chapter's widget. :func:`last_warp_stale_reads` models the classic last-warp pitfall, and
:func:`lecture_variant5` the two typos of the lecture's version of variant 5 (``if (tid < 0)`` and
``=`` for ``+=``), which are wrong even on a GPU that runs a warp in perfect lockstep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..launch import warps_for

WARP = 32
BANKS = 32
#: The classic variants this model knows, by number.
TREE_VARIANTS = {1: "interleaved, divergent", 2: "interleaved, no divergence", 3: "sequential addressing"}


@dataclass(frozen=True)
class TreeLevel:
    """One level of a block's reduction tree.

    Attributes:
        variant: 1, 2 or 3.
        block: threads (and shared-memory words) of the block.
        level: 1 for the first level of additions, up to ``log2(block)``.
        stride: distance between the two words added.
        threads: the threads that add at this level.
        dst: for each of them, the word it reads and overwrites with the sum.
        src: for each of them, the word it adds to ``dst``.
    """

    variant: int
    block: int
    level: int
    stride: int
    threads: tuple[int, ...]
    dst: tuple[int, ...]
    src: tuple[int, ...]

    @property
    def active(self) -> int:
        """How many threads add at this level."""
        return len(self.threads)

    @property
    def warps(self) -> int:
        """Warps in the block (a partly filled last warp counts)."""
        return warps_for(self.block, WARP)

    def _lanes_by_warp(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for k, t in enumerate(self.threads):
            out.setdefault(t // WARP, []).append(k)
        return out

    @property
    def warps_with_work(self) -> int:
        """Warps with at least one adding thread: the warps that issue the addition."""
        return len(self._lanes_by_warp())

    @property
    def divergent_warps(self) -> int:
        """Warps in which some lanes add and others do not (they run the branch at partial width)."""
        count = 0
        for warp, lanes in self._lanes_by_warp().items():
            lanes_in_warp = min(WARP, self.block - warp * WARP)
            if len(lanes) < lanes_in_warp:
                count += 1
        return count

    def bank_counts(self, warp: int, access: str = "src") -> np.ndarray:
        """Distinct words the adding lanes of ``warp`` touch in each of the 32 banks.

        ``access`` is ``"src"`` (the read of the word added) or ``"dst"`` (the read and the
        write of the sum). A bank with ``k`` different words costs ``k`` passes.
        """
        if access not in ("src", "dst"):
            raise ValueError(f"access must be 'src' or 'dst', got {access!r}")
        words = self.src if access == "src" else self.dst
        lanes = self._lanes_by_warp().get(warp, [])
        counts = np.zeros(BANKS, dtype=int)
        for w in {words[k] for k in lanes}:
            counts[w % BANKS] += 1
        return counts

    def conflict(self, warp: int) -> int:
        """The n-way bank conflict of ``warp``'s worst access at this level (1: none, 0: no work)."""
        return int(max(self.bank_counts(warp, "src").max(), self.bank_counts(warp, "dst").max()))

    @property
    def worst_conflict(self) -> int:
        """The worst n-way bank conflict of any warp at this level (1 means conflict-free)."""
        return max((self.conflict(w) for w in self._lanes_by_warp()), default=1)

    @property
    def worst_warp(self) -> int:
        """The warp with the worst conflict (the lowest such warp; 0 if no warp adds)."""
        by_warp = {w: self.conflict(w) for w in self._lanes_by_warp()}
        if not by_warp:
            return 0
        worst = max(by_warp.values())
        return min(w for w, c in by_warp.items() if c == worst)

    def summary(self) -> dict:
        """The level's counts as a flat dict (one row of :func:`level_table`)."""
        return {
            "level": self.level,
            "stride": self.stride,
            "adding threads": self.active,
            "warps with work": self.warps_with_work,
            "divergent warps": self.divergent_warps,
            "bank conflict (n-way)": self.worst_conflict,
        }


def _check(variant: int, block: int) -> None:
    if variant not in TREE_VARIANTS:
        raise ValueError(f"the tree model knows variants 1, 2 and 3, got {variant!r}")
    if not isinstance(block, (int, np.integer)) or block < 2 or block & (block - 1):
        raise ValueError(f"block must be a power of two of at least 2, got {block!r}")


def tree_levels(variant: int, block: int) -> list[TreeLevel]:
    """Every level of variant ``variant``'s tree for a block of ``block`` threads (a power of two)."""
    _check(variant, block)
    levels = []
    count = int(np.log2(block))
    for k in range(count):
        if variant == 3:
            stride = block >> (k + 1)
            threads = tuple(range(stride))
            dst = threads
            src = tuple(t + stride for t in threads)
        else:
            stride = 1 << k
            if variant == 1:
                threads = tuple(t for t in range(block) if t % (2 * stride) == 0)
                dst = threads
            else:
                threads = tuple(range(block // (2 * stride)))
                dst = tuple(2 * stride * t for t in threads)
            src = tuple(d + stride for d in dst)
        levels.append(TreeLevel(variant, block, k + 1, stride, threads, dst, src))
    return levels


def level_table(variant: int, block: int):
    """A DataFrame with one row per level: stride, adding threads, warps, divergence, bank conflicts."""
    return pd.DataFrame([lv.summary() for lv in tree_levels(variant, block)])


def run_tree(values, variant: int) -> np.ndarray:
    """Apply the tree of ``variant`` to a copy of ``values`` (length a power of two); word 0 ends with the sum.

    The model executes exactly the additions of the kernels, level by level, so it can be
    checked against ``np.sum``.
    """
    words = np.array(values, dtype=np.float64)
    for lv in tree_levels(variant, words.size):
        words[list(lv.dst)] += words[list(lv.src)]
    return words


def last_warp_stale_reads(values) -> float:
    """What thread 0 ends with in the classic last-warp code if every lane reads before any lane writes.

    ``values`` are the 64 words ``s[0:64]`` when the last warp starts. The classic code
    (``s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; ...`` with no ``syncwarp`` and no
    ``volatile``) lets the compiler and the hardware load every partner word first: each
    lane then adds *stale* values, and thread 0 computes
    ``s[0] + s[32] + s[16] + s[8] + s[4] + s[2] + s[1]``: 7 of the 64 words.
    """
    s = np.array(values, dtype=np.float64)
    if s.size != 2 * WARP:
        raise ValueError(f"give the 64 words the last warp starts from, got {s.size}")
    return float(s[0] + sum(s[k] for k in (32, 16, 8, 4, 2, 1)))


def last_warp_in_order(values) -> float:
    """The same six steps done correctly (every lane reads after the previous step's writes)."""
    s = np.array(values, dtype=np.float64)
    if s.size != 2 * WARP:
        raise ValueError(f"give the 64 words the last warp starts from, got {s.size}")
    for stride in (32, 16, 8, 4, 2, 1):
        s[:WARP] = s[:WARP] + s[stride:stride + WARP]  # all lanes read, then all lanes write
    return float(s[0])


#: The lecture's unrolled last warp, as written: ``if (tid < k && blockDim.x >= 2k) s[tid] = s[tid + k]``.
LAST_WARP_STEPS = (32, 16, 8, 4, 2, 1)


def lecture_variant5(values, *, loop_condition: str = "tid < s", last_warp: str = "+=") -> float:
    """What thread 0 of one block ends with in variant 5 as the lecture notes print it, in perfect lockstep.

    ``values`` are the block's ``blockDim.x`` words in shared memory after the first add during load
    (a power of two, at least 64). The block's loop ``for (s = blockDim.x / 2; s > 32; s >>= 1)`` adds
    ``s[tid + s]`` into ``s[tid]`` for the threads that pass ``loop_condition``; then warp 0 runs the six
    unrolled steps (strides 32 .. 1), each ``s[tid] += s[tid + k]`` (``last_warp="+="``) or, as printed
    in the notes, ``s[tid] = s[tid + k]`` (``last_warp="="``). Every step is modelled the way the classic
    code hoped the hardware would run it: all lanes read, then all lanes write (lockstep and ``volatile``),
    the most favourable schedule there is. Even so:

    * ``loop_condition="tid < 0"`` (the notes' typo): no thread ever adds in the loop, so only the first 64
      words reach the last warp;
    * ``last_warp="="``: every step *copies* a word instead of adding it, and thread 0 ends with one word.

    Both are wrong on every GPU, before and after Volta: unlike the missing ``syncwarp``, they are not
    races that may or may not show, just wrong arithmetic.
    """
    if loop_condition not in ("tid < s", "tid < 0"):
        raise ValueError(f"loop_condition is 'tid < s' (correct) or 'tid < 0' (the notes' typo), got {loop_condition!r}")
    if last_warp not in ("+=", "="):
        raise ValueError(f"last_warp is '+=' (correct) or '=' (the notes' typo), got {last_warp!r}")
    words = np.array(values, dtype=np.float64)
    block = words.size
    if block < 2 * WARP or block & (block - 1):
        raise ValueError(f"give one block's words, a power of two of at least 64, got {block}")
    stride = block // 2
    while stride > WARP:
        if loop_condition == "tid < s":
            words[:stride] = words[:stride] + words[stride:2 * stride]
        stride //= 2
    for k in LAST_WARP_STEPS:
        partner = words[k:2 * k].copy()  # every lane reads first (lockstep) ...
        words[:k] = words[:k] + partner if last_warp == "+=" else partner  # ... then writes
    return float(words[0])
