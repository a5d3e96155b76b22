"""What :func:`labhelpers.racecheck.check_races` returns: races, barrier problems and the report that says what to
change (split from ``racecheck.py``, which records and analyses; the classes are re-exported there)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from .errors import CheckFailed

#: The three kinds of race, in the order reports list them.
KINDS = ("RAW", "WAR", "WAW")
#: Findings spelled out by ``str(report)``.
SHOWN_IN_TEXT = 3
#: Shared accesses recorded at most per launch (beyond this the report says it is incomplete). Memory holds one
#: block's distinct (element, thread, line) entries at a time, not the accesses, so this is only a backstop:
#: :data:`MAX_RUN_SECONDS` stops a long check first.
MAX_ACCESSES = 500_000_000


# ------------------------------------------------------------------------------------------------- results


def _short_file(path: str) -> str:
    """How a file is named in messages: ``cell`` for a notebook cell, else the file's base name."""
    if re.search(r"ipykernel_\d+|<ipython-input-|/tmp/xpython_", path):
        return "cell"
    return os.path.basename(path) or path


@dataclass(frozen=True)
class SourceLine:
    """A line of the kernel's source: ``file`` (full path), ``line`` (1-based) and its ``text`` (stripped)."""

    file: str
    line: int
    text: str

    @property
    def where(self) -> str:
        """``matmul.py:120`` (``cell:12`` for a line of a notebook cell)."""
        return f"{_short_file(self.file)}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.text}" if self.text else self.where


@dataclass(frozen=True)
class SharedArray:
    """A shared array the kernel allocated: its name, shape, dtype, allocating line and recorded accesses."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    line: SourceLine
    reads: int
    writes: int

    def __str__(self) -> str:
        return f"{self.name} ({self.dtype}{list(self.shape)}, {self.reads} reads, {self.writes} writes)"


def _t(thread: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in thread) + ")"


@dataclass(frozen=True)
class Race:
    """Two threads of one block touch one shared element, at least one writes, no barrier between.

    Attributes:
        kind: ``"RAW"``, ``"WAR"`` or ``"WAW"``.
        array: the shared array's name in the kernel (``"As"``), or ``"shared array #k"``.
        index: the element, e.g. ``(3, 4)`` for ``As[3, 4]``.
        block: the block, ``(x, y, z)``.
        threads: the two threads, ``(x, y, z)`` each, in the hazard's order: (writer, reader) for RAW,
            (reader, writer) for WAR, (first writer, second writer) for WAW.
        lines: the source lines of the two accesses, in the same order.
        count: how many (block, element) places show this race between these two lines.
    """

    kind: str
    array: str
    index: tuple[int, ...]
    block: tuple[int, int, int]
    threads: tuple[tuple[int, int, int], tuple[int, int, int]]
    lines: tuple[SourceLine, SourceLine]
    count: int = 1

    @property
    def element(self) -> str:
        """``As[3, 4]`` (``shared array #1 (float32, 8 x 8) at [3, 4]`` when the name is unknown)."""
        index = ", ".join(str(i) for i in self.index)
        return f"{self.array}[{index}]" if self.array.isidentifier() else f"{self.array} at [{index}]"

    @property
    def accesses(self) -> tuple[str, str]:
        """What the two threads do, in order: ``("write", "read")`` for RAW, and so on."""
        return {"RAW": ("write", "read"), "WAR": ("read", "write"), "WAW": ("write", "write")}[self.kind]

    def describe(self, show_kind: bool = True) -> str:
        """Several lines: the race, then the two source lines (``show_kind=False`` leaves out RAW/WAR/WAW)."""
        (a, b), (la, lb) = self.threads, self.lines
        where = f"{self.element} in block {_t(self.block)}"
        if not show_kind:
            read_first = self.kind == "WAR"
            text = (f"a race on {where}: thread {_t(a)} {'reads' if read_first else 'writes'} it and thread {_t(b)} "
                    f"{'writes' if self.kind != 'RAW' else 'reads'} it, with no cuda.syncthreads() in between")
        elif self.kind == "RAW":
            text = (f"RAW race on {where}: thread {_t(a)} writes it and thread {_t(b)} reads it with no "
                    "cuda.syncthreads() in between (the read may get the old value)")
        elif self.kind == "WAR":
            text = (f"WAR race on {where}: thread {_t(a)} reads it and thread {_t(b)} overwrites it with no "
                    "cuda.syncthreads() in between (the read may get the new value)")
        else:
            text = (f"WAW race on {where}: threads {_t(a)} and {_t(b)} both write it with no "
                    "cuda.syncthreads() in between (which value stays is undefined)")
        acts = self.accesses
        width = max(len(acts[0]), len(acts[1]))
        text += f"\n    {acts[0]:<{width}}  {la}\n    {acts[1]:<{width}}  {lb}"
        if self.count > 1:
            text += f"\n    (the same race between these two lines at {self.count} places)"
        return text

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class BarrierProblem:
    """A barrier that only part of a block reached, or threads of a block at different barriers at once.

    Attributes:
        kind: ``"partial"`` (some threads of the block ended without reaching it) or ``"divergent"``
            (threads waited at different ``syncthreads`` calls, or the same one a different number of times).
        block: the block, ``(x, y, z)``.
        lines: where the threads waited (one line for ``"partial"``, one per group for ``"divergent"``).
        reached: threads waiting at ``lines[0]``.
        total: threads in the block.
        waiting: some of the threads at ``lines[0]``.
        others: some of the threads not there (ended, or waiting elsewhere).
        contexts: for each of ``lines``, where the barrier sits when the source shows it (the enclosing
            ``if`` or loop, a ``return`` above it), e.g. ``inside an `if`, line 12: if tid < 16:``; else ``""``.
        count: in how many blocks the same problem happened.
    """

    kind: str
    block: tuple[int, int, int]
    lines: tuple[SourceLine, ...]
    reached: int
    total: int
    waiting: tuple[tuple[int, int, int], ...]
    others: tuple[tuple[int, int, int], ...]
    contexts: tuple[str, ...] = ()
    count: int = 1

    @property
    def context(self) -> str:
        """The ``contexts`` that say something, joined: where the barrier(s) sit in the source."""
        return "; ".join(c for c in dict.fromkeys(self.contexts) if c)

    def _at(self, i: int) -> str:
        ctx = self.contexts[i] if i < len(self.contexts) else ""
        return f"{self.lines[i].where} ({ctx})" if ctx else self.lines[i].where

    def __str__(self) -> str:
        others = self.total - self.reached
        named = ", ".join(_t(t) for t in self.others) + (", ..." if others > len(self.others) else "")
        if self.kind == "partial":
            text = (f"barrier reached by only {self.reached} of the {self.total} threads of block {_t(self.block)}: "
                    f"cuda.syncthreads() at {self._at(0)}; {others} thread(s) ({named}) ended without reaching "
                    "it (they returned early or skipped it in a branch)")
        else:
            text = (f"threads of block {_t(self.block)} wait at different barriers at once: {self.reached} of "
                    f"{self.total} at {self._at(0)}, {others} ({named}) at "
                    + ", ".join(self._at(i) for i in range(1, len(self.lines))))
        text += "".join(f"\n    {line}" for line in dict.fromkeys(self.lines))
        if self.count > 1:
            text += f"\n    (the same in {self.count} blocks)"
        return text


@dataclass(frozen=True, repr=False)
class RaceReport:
    """What :func:`check_races` found. ``str(report)`` is a short readable summary.

    Attributes:
        kernel: the kernel's name.
        griddim, blockdim: the launch checked, as 3-tuples.
        races: the races found, one per (kind, array, pair of lines), at most ``max_reported``.
        barrier_problems: the barrier problems found, at most ``max_reported``.
        race_counts: places (block, element) with a race, by kind, all of them counted.
        arrays: the shared arrays the kernel allocated.
        accesses: shared-memory accesses recorded.
        complete: False when the recording stopped early (more than :data:`MAX_ACCESSES` accesses).
    """

    kernel: str
    griddim: tuple[int, int, int]
    blockdim: tuple[int, int, int]
    races: tuple[Race, ...] = ()
    barrier_problems: tuple[BarrierProblem, ...] = ()
    race_counts: dict = field(default_factory=dict)
    arrays: tuple[SharedArray, ...] = ()
    accesses: int = 0
    complete: bool = True
    n_races: int = 0
    n_barrier_problems: int = 0

    @property
    def ok(self) -> bool:
        """True when the whole launch was recorded and no race and no barrier problem was found.

        A report whose recording stopped early (``complete`` False) is never ok: the accesses it did not
        record may race.
        """
        return self.complete and not self.races and not self.barrier_problems

    @property
    def launch(self) -> str:
        """``kernel[(2, 1, 1), (32, 1, 1)]``."""
        return f"{self.kernel}[{self.griddim}, {self.blockdim}]"

    def summary(self) -> str:
        """One line: what was checked and what was found."""
        threads = int(np.prod(self.blockdim))
        blocks = int(np.prod(self.griddim))
        if self.ok:
            names = ", ".join(a.name for a in self.arrays) or "none"
            text = (f"No races and no barrier problems in {self.launch}: {self.accesses} shared-memory accesses "
                    f"by {blocks * threads} threads in {blocks} block(s) checked (shared arrays: {names}).")
        else:
            parts = []
            total = sum(self.race_counts.values())
            if total:
                kinds = ", ".join(f"{k} at {self.race_counts[k]} place(s)" for k in KINDS if self.race_counts.get(k))
                parts.append(f"races ({kinds})")
            if self.barrier_problems:
                parts.append(f"{self.n_barrier_problems} barrier problem(s)")
            if parts:
                text = f"{self.launch}: " + " and ".join(parts) + "."
            else:
                text = f"{self.launch}: nothing found in the part that was recorded, but the check is incomplete."
        if not self.complete:
            text += (f" Recording stopped after {MAX_ACCESSES} shared-memory accesses, so the rest of the launch was "
                     "not checked: use a smaller launch (fewer blocks, a smaller input).")
        return text

    def __str__(self) -> str:
        lines = [self.summary()]
        for problem in self.barrier_problems[:SHOWN_IN_TEXT]:
            lines.append(str(problem))
        for race in self.races[:SHOWN_IN_TEXT]:
            lines.append(str(race))
        hidden = max(0, len(self.barrier_problems) - SHOWN_IN_TEXT) + max(0, len(self.races) - SHOWN_IN_TEXT)
        hidden += (self.n_races - len(self.races)) + (self.n_barrier_problems - len(self.barrier_problems))
        if hidden:
            lines.append(f"... and {hidden} more (report.races, report.barrier_problems).")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"RaceReport({self.launch}, ok={self.ok}, races={dict(self.race_counts)}, "
                f"barrier_problems={self.n_barrier_problems})")

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the readable text
        printer.text(str(self))

    def raise_for_problems(self, what: str = "your kernel") -> None:
        """Raise :class:`~labhelpers.errors.CheckFailed` describing the findings, unless the report is ok."""
        if self.ok:
            return
        parts = [f"{what} is not safe: {self.summary()}"]
        parts += [str(p) for p in self.barrier_problems[:SHOWN_IN_TEXT]]
        parts += [str(r) for r in self.races[:SHOWN_IN_TEXT]]
        parts.append(advice(self))
        raise CheckFailed("\n".join(parts))


def advice(report: RaceReport) -> str:
    """What to change, in one or two sentences, for the kinds of finding in ``report``."""
    tips = []
    if report.barrier_problems:
        tips.append("Every thread of a block must reach every cuda.syncthreads(), the same number of times: guard "
                    "the loads and stores with the `if`, never the barrier, and do not return before a barrier.")
    kinds = {r.kind for r in report.races}
    if "RAW" in kinds:
        tips.append("RAW: put a cuda.syncthreads() after the writes and before the reads of other threads' elements.")
    if "WAR" in kinds:
        tips.append("WAR: put a cuda.syncthreads() after the last read and before the element is written again "
                    "(in a loop: at the end of the loop body).")
    if "WAW" in kinds:
        tips.append("WAW: let one thread write each element per phase, or accumulate with cuda.atomic.add.")
    if not report.complete:
        tips.append("The check is incomplete: run check_races on a smaller launch (a few blocks, a partial last one).")
    return " ".join(tips)
