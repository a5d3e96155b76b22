"""Litmus tests as tiny programs, and the outcomes each memory model allows them.

A litmus test is a handful of threads, each a few loads and stores on shared locations that
all start at 0. Its *outcomes* are the final values of the registers the loads fill. A
consistency model is defined by the outcomes it allows:

* **Sequential consistency** (Lamport, 1979): the result of any execution is the same as if
  the operations of all threads ran in *some* single order (an *interleaving*) that keeps
  each thread's program order. :func:`interleavings` lists every such order and
  :func:`sc_outcomes` runs each one: the outcomes SC allows, and how many interleavings give each.
* **Store-buffer machines** (:func:`buffered_outcomes`): each thread's stores wait in a buffer
  before they reach memory, and its loads read its own buffer first. A FIFO buffer is TSO
  (x86); draining in any order per location is PSO. A fence waits until the buffer is empty.
  They show, on the smallest possible machine, how a real memory system produces outcomes
  that no interleaving can.

Programs are written one string per operation::

    MP = litmus("MP", ["x = 1", "y = 1"], ["r0 = y", "r1 = x"], weak={"r0": 1, "r1": 0})

``"x = 1"`` stores, ``"r0 = y"`` loads into a register, ``"fence"`` is a fence. Register
names must be unique across threads.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pandas as pd

from ..errors import LabError

_STORE = re.compile(r"^\s*([a-z]\w*)\s*=\s*(-?\d+)\s*$")
_LOAD = re.compile(r"^\s*(r\w*)\s*=\s*([a-z]\w*)\s*$")
_FENCE = re.compile(r"^\s*fence\s*$")


class LitmusSyntaxError(LabError, ValueError):
    """An operation of a litmus program is not ``loc = value``, ``reg = loc`` or ``fence``."""


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` is ``"st"`` (``loc = value``), ``"ld"`` (``reg = loc``) or ``"fence"``."""

    kind: str
    loc: str = ""
    value: int = 0
    reg: str = ""

    def __str__(self) -> str:
        if self.kind == "st":
            return f"{self.loc} = {self.value}"
        if self.kind == "ld":
            return f"{self.reg} = {self.loc}"
        return "fence"


def parse_op(text: str) -> Op:
    """Parse ``"x = 1"``, ``"r0 = x"`` or ``"fence"``.

    Registers start with ``r``; locations with another lower-case letter.
    """
    if not isinstance(text, str):
        raise LitmusSyntaxError(f"an operation must be a string such as 'x = 1', got {text!r}")
    if _FENCE.match(text):
        return Op("fence")
    m = _LOAD.match(text)
    if m:
        return Op("ld", loc=m.group(2), reg=m.group(1))
    m = _STORE.match(text)
    if m and not m.group(1).startswith("r"):
        return Op("st", loc=m.group(1), value=int(m.group(2)))
    raise LitmusSyntaxError(
        f"cannot read the operation {text!r}: write a store as 'x = 1', a load as 'r0 = x' (registers start "
        "with r, locations with another letter) or 'fence'")


@dataclass(frozen=True)
class LitmusTest:
    """A litmus test: threads of operations, and the outcome it is about.

    Attributes:
        name: e.g. ``"MP"``.
        threads: one tuple of :class:`Op` per thread.
        weak: the outcome the test looks for, ``{register: value}``.
        description: one line.
    """

    name: str
    threads: tuple[tuple[Op, ...], ...]
    weak: dict = field(default_factory=dict, hash=False)
    description: str = ""

    @property
    def registers(self) -> tuple[str, ...]:
        """Every register, in thread then program order (the order of an outcome tuple)."""
        return tuple(op.reg for ops in self.threads for op in ops if op.kind == "ld")

    @property
    def locations(self) -> tuple[str, ...]:
        """Every location, sorted."""
        return tuple(sorted({op.loc for ops in self.threads for op in ops if op.kind != "fence"}))

    @property
    def weak_outcome(self) -> tuple[int, ...]:
        """:attr:`weak` as a tuple in the order of :attr:`registers`."""
        return tuple(self.weak[r] for r in self.registers)

    def without_fences(self) -> "LitmusTest":
        """The same test with every fence removed."""
        return LitmusTest(self.name.replace("+fences", ""), tuple(tuple(o for o in ops if o.kind != "fence")
                                                                   for ops in self.threads),
                          dict(self.weak), self.description)

    def with_fences(self) -> "LitmusTest":
        """The same test with a fence between every two consecutive operations of a thread."""
        threads = []
        for ops in self.without_fences().threads:
            out: list[Op] = []
            for k, op in enumerate(ops):
                if k:
                    out.append(Op("fence"))
                out.append(op)
            threads.append(tuple(out))
        return LitmusTest(self.name + "+fences", tuple(threads), dict(self.weak), self.description)

    def listing(self) -> str:
        """The threads side by side, as litmus tests are usually printed."""
        columns = [[f"thread {t}"] + [str(op) for op in ops] for t, ops in enumerate(self.threads)]
        height = max(len(c) for c in columns)
        width = max(len(s) for c in columns for s in c) + 4
        rows = []
        for k in range(height):
            rows.append("".join((c[k] if k < len(c) else "").ljust(width) for c in columns).rstrip())
        weak = ", ".join(f"{r} = {v}" for r, v in self.weak.items())
        return "\n".join(rows + [f"outcome of interest: {weak}"])


def litmus(name: str, *threads: Sequence[str], weak: dict, description: str = "") -> LitmusTest:
    """Build a :class:`LitmusTest` from one list of operation strings per thread.

    Raises:
        LitmusSyntaxError: an operation cannot be parsed, a register is used twice, or ``weak``
            names a register the program does not have.
    """
    if not threads:
        raise LitmusSyntaxError("a litmus test needs at least one thread (one list of operations)")
    parsed = tuple(tuple(parse_op(s) for s in ops) for ops in threads)
    regs = [op.reg for ops in parsed for op in ops if op.kind == "ld"]
    dup = sorted({r for r in regs if regs.count(r) > 1})
    if dup:
        raise LitmusSyntaxError(f"register(s) {dup} are loaded more than once: give every load its own register")
    unknown = sorted(set(weak) - set(regs))
    if unknown or set(weak) != set(regs):
        raise LitmusSyntaxError(f"weak must give a value for every register {regs}, got {sorted(weak)}")
    return LitmusTest(name, parsed, dict(weak), description)


def interleaving_count(test: LitmusTest) -> int:
    """Number of interleavings: the multinomial ``(sum n_t)! / prod(n_t!)`` (fences count as operations)."""
    sizes = [len(ops) for ops in test.threads]
    return math.factorial(sum(sizes)) // math.prod(math.factorial(s) for s in sizes)


def interleavings(test: LitmusTest) -> Iterator[tuple[int, ...]]:
    """Every interleaving, as the sequence of thread numbers that take the next step.

    ``(0, 1, 1, 0)`` means thread 0's first operation, then thread 1's first two, then thread
    0's second. There are :func:`interleaving_count` of them.
    """
    sizes = [len(ops) for ops in test.threads]

    def rec(left: list[int], prefix: list[int]):
        if not any(left):
            yield tuple(prefix)
            return
        for t, k in enumerate(left):
            if k:
                left[t] -= 1
                prefix.append(t)
                yield from rec(left, prefix)
                prefix.pop()
                left[t] += 1

    yield from rec(list(sizes), [])


def run_interleaving(test: LitmusTest, order: Sequence[int]) -> tuple[int, ...]:
    """Execute ``order`` (thread numbers) on one shared memory; return the registers' final values.

    Raises:
        ValueError: ``order`` is not an interleaving of ``test`` (a thread runs past its end or not to it).
    """
    memory = {loc: 0 for loc in test.locations}
    regs: dict[str, int] = {}
    pc = [0] * len(test.threads)
    for t in order:
        if not 0 <= t < len(test.threads) or pc[t] >= len(test.threads[t]):
            raise ValueError(f"{list(order)} is not an interleaving of {test.name}: thread {t} has no step left")
        op = test.threads[t][pc[t]]
        pc[t] += 1
        if op.kind == "st":
            memory[op.loc] = op.value
        elif op.kind == "ld":
            regs[op.reg] = memory[op.loc]
    if pc != [len(ops) for ops in test.threads]:
        raise ValueError(f"{list(order)} is not an interleaving of {test.name}: some thread did not finish")
    return tuple(regs[r] for r in test.registers)


def sc_outcomes(test: LitmusTest) -> Counter:
    """``Counter({outcome: number of interleavings giving it})`` under sequential consistency."""
    return Counter(run_interleaving(test, order) for order in interleavings(test))


def all_outcomes(test: LitmusTest) -> list[tuple[int, ...]]:
    """Every combination of values the registers could hold (each load: 0 or a value stored to its location)."""
    choices = []
    for r in test.registers:
        loc = next(op.loc for ops in test.threads for op in ops if op.kind == "ld" and op.reg == r)
        values = sorted({0} | {op.value for ops in test.threads for op in ops if op.kind == "st" and op.loc == loc})
        choices.append(values)
    return list(itertools.product(*choices))


def is_sc(test: LitmusTest, outcome: Sequence[int] | dict) -> bool:
    """True when sequential consistency allows ``outcome`` (a tuple in register order, or a dict)."""
    if isinstance(outcome, dict):
        outcome = tuple(outcome[r] for r in test.registers)
    return tuple(outcome) in sc_outcomes(test)


def outcome_table(test: LitmusTest) -> pd.DataFrame:
    """One row per possible outcome: the registers, interleavings giving it, whether SC allows it, and TSO/PSO."""
    sc = sc_outcomes(test)
    tso = buffered_outcomes(test, "TSO")
    pso = buffered_outcomes(test, "PSO")
    rows = []
    for outcome in all_outcomes(test):
        row = dict(zip(test.registers, outcome))
        row.update({"interleavings": sc.get(outcome, 0), "SC": outcome in sc, "TSO": outcome in tso,
                    "PSO": outcome in pso, "weak target": outcome == test.weak_outcome})
        rows.append(row)
    return pd.DataFrame(rows)


def buffered_outcomes(test: LitmusTest, model: str = "TSO") -> set[tuple[int, ...]]:
    """Outcomes of a machine whose stores wait in a per-thread buffer (``model``: ``"TSO"`` or ``"PSO"``).

    A thread's store goes into its buffer; at any moment the memory system may move a
    buffered store to memory: the oldest (TSO, a FIFO) or the oldest of any one location
    (PSO). A load reads the newest buffered store of its location, else memory. A fence waits
    until the thread's buffer is empty. Every reachable end state is explored.
    """
    if model not in ("TSO", "PSO"):
        raise ValueError(f"model must be 'TSO' or 'PSO', got {model!r}")
    locs = test.locations
    nthreads = len(test.threads)
    results: set[tuple[int, ...]] = set()
    seen: set = set()
    start = (tuple([0] * nthreads), tuple(() for _ in range(nthreads)), tuple(0 for _ in locs), ())
    stack = [start]
    regs_order = test.registers
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        pcs, bufs, mem, regs = state
        mem_d = dict(zip(locs, mem))
        reg_d = dict(regs)
        if all(pcs[t] == len(test.threads[t]) for t in range(nthreads)) and not any(bufs):
            results.add(tuple(reg_d[r] for r in regs_order))
            continue
        for t in range(nthreads):
            buf = bufs[t]
            # drain a buffered store
            drains = [0] if model == "TSO" and buf else []
            if model == "PSO":
                firsts: dict[str, int] = {}
                for k, (loc, _v) in enumerate(buf):
                    firsts.setdefault(loc, k)
                drains = sorted(firsts.values())
            for k in drains:
                loc, v = buf[k]
                new_mem = dict(mem_d)
                new_mem[loc] = v
                new_bufs = list(bufs)
                new_bufs[t] = buf[:k] + buf[k + 1:]
                stack.append((pcs, tuple(new_bufs), tuple(new_mem[l] for l in locs), regs))
            # execute the next operation
            if pcs[t] < len(test.threads[t]):
                op = test.threads[t][pcs[t]]
                new_pcs = list(pcs)
                new_pcs[t] += 1
                if op.kind == "fence":
                    if buf:
                        continue
                    stack.append((tuple(new_pcs), bufs, mem, regs))
                elif op.kind == "st":
                    new_bufs = list(bufs)
                    new_bufs[t] = buf + ((op.loc, op.value),)
                    stack.append((tuple(new_pcs), tuple(new_bufs), mem, regs))
                else:
                    value = mem_d[op.loc]
                    for loc, v in buf:
                        if loc == op.loc:
                            value = v
                    stack.append((tuple(new_pcs), bufs, mem, tuple(sorted(reg_d.items() | {(op.reg, value)}))))
    return results


# ---------------------------------------------------------------------------------------------
# The classic tests
# ---------------------------------------------------------------------------------------------

MP = litmus("MP", ["x = 1", "y = 1"], ["r0 = y", "r1 = x"], weak={"r0": 1, "r1": 0},
            description="message passing: data x, then flag y; the reader sees the flag but not the data")
SB = litmus("SB", ["x = 1", "r0 = y"], ["y = 1", "r1 = x"], weak={"r0": 0, "r1": 0},
            description="store buffering: each thread stores, then reads the other's location; both miss")
LB = litmus("LB", ["r0 = x", "y = 1"], ["r1 = y", "x = 1"], weak={"r0": 1, "r1": 1},
            description="load buffering: each load sees the store that comes after the other load")
CORR = litmus("CoRR", ["x = 1"], ["r0 = x", "r1 = x"], weak={"r0": 1, "r1": 0},
              description="coherence of read-read: a later read of the same location sees an older value")
IRIW = litmus("IRIW", ["x = 1"], ["y = 1"], ["r0 = x", "r1 = y"], ["r2 = y", "r3 = x"],
              weak={"r0": 1, "r1": 0, "r2": 1, "r3": 0},
              description="independent reads of independent writes: two readers see the writes in opposite orders")
MP_REVERSED = litmus("MP-reversed", ["x = 1", "y = 1"], ["r1 = x", "r0 = y"], weak={"r0": 1, "r1": 0},
                     description="a mutant of MP: the reader reads the data first, so the 'weak' outcome is SC")

#: The classic tests by name.
TESTS: dict[str, LitmusTest] = {t.name: t for t in (MP, SB, LB, CORR, IRIW, MP_REVERSED)}

#: What the PTX memory model says about each test's weak outcome, for relaxed accesses without fences and
#: with ``fence.sc`` (``cuda.threadfence()``) between the operations of every thread (NVIDIA, *PTX ISA*,
#: "Memory Consistency Model"; Lustig et al., 2019).
PTX_ALLOWS: dict[str, tuple[bool, bool]] = {
    "MP": (True, False), "SB": (True, False), "LB": (True, False), "CoRR": (False, False),
    "IRIW": (True, False), "MP-reversed": (True, True),
}


def get_test(name: str) -> LitmusTest:
    """A classic test by name (see :data:`TESTS`)."""
    try:
        return TESTS[name]
    except (KeyError, TypeError):
        raise LabError(f"unknown litmus test {name!r}: choose one of {', '.join(TESTS)}") from None


def summary_table(names: Sequence[str] = ("MP", "SB", "LB", "CoRR", "IRIW", "MP-reversed")) -> pd.DataFrame:
    """Per test: interleavings, SC outcomes, and whether SC, TSO, PSO and PTX allow the weak outcome."""
    rows = []
    for name in names:
        t = get_test(name)
        sc = sc_outcomes(t)
        w = t.weak_outcome
        rows.append({"test": name, "threads": len(t.threads), "interleavings": interleaving_count(t),
                     "SC outcomes": len(sc), "weak outcome": ", ".join(f"{r}={v}" for r, v in t.weak.items()),
                     "SC": w in sc, "TSO": w in buffered_outcomes(t, "TSO"), "PSO": w in buffered_outcomes(t, "PSO"),
                     "PTX, no fences": PTX_ALLOWS[name][0], "PTX, fences": PTX_ALLOWS[name][1]})
    return pd.DataFrame(rows)


def weak_upper_bound(observed: int, runs: int, confidence: float = 0.95) -> float:
    """The largest per-run probability of an outcome still consistent with seeing it ``observed`` times in ``runs``.

    For ``observed = 0`` this is ``1 - (1 - confidence)**(1/runs)``, about ``3/runs`` at 95%
    (the "rule of three"): "not observed in N runs" only bounds how *often* the outcome can
    happen; it never shows that the outcome is forbidden. For ``observed > 0`` the one-sided
    Clopper-Pearson bound is used.
    """
    if runs < 1 or observed < 0 or observed > runs:
        raise ValueError(f"need 0 <= observed <= runs and runs >= 1, got observed={observed}, runs={runs}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    alpha = 1 - confidence
    if observed == 0:
        return 1 - alpha ** (1 / runs)
    if observed == runs:
        return 1.0
    lo, hi = observed / runs, 1.0
    for _ in range(100):  # bisection: the p at which seeing <= observed has probability alpha
        mid = (lo + hi) / 2
        if _binomial_cdf(observed, runs, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (k is small next to n here)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 0.0 if k < n else 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q
             for j in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


__all__ = [
    "CORR", "IRIW", "LB", "LitmusSyntaxError", "LitmusTest", "MP", "MP_REVERSED", "Op", "PTX_ALLOWS", "SB", "TESTS",
    "all_outcomes", "buffered_outcomes", "get_test", "interleaving_count", "interleavings", "is_sc", "litmus",
    "outcome_table", "parse_op", "run_interleaving", "sc_outcomes", "summary_table", "weak_upper_bound",
]


# ---------------------------------------------------------------------------------------------
# A relaxed simulator for real kernels: a plain load sees only the stores that happen before it
# ---------------------------------------------------------------------------------------------
#
# Numba's CUDA simulator runs blocks one after another, so a block always sees everything the
# blocks before it wrote: a missing fence can never show. ``relaxed_launch`` runs a kernel in the
# simulator on a weaker memory, one the PTX memory model allows for plain (weak) accesses: a
# plain load of a global array returns the newest store to that element that *happens before*
# the load, and otherwise the value the element had when the kernel started. A store happens
# before a load when
#   * the same thread made it (program order), or
#   * a ``cuda.syncthreads()`` of their block lies between them, or
#   * the writer fenced (``cuda.threadfence()``) and then wrote an atomic, the reader's atomic
#     read that value (or a later read-modify-write of the same element), and the reader fenced
#     before the load: the release and acquire patterns of the PTX memory model, cumulative
#     (everything the writer had seen travels along). ``cuda.threadfence_block()`` does the
#     same only for threads of the writer's own block.
# Atomics always act on the element's newest value. At the end of the kernel every element
# holds its newest value. A load that misses a store another thread has already executed is a
# *stale read*: on a GPU it is a data race, whose result nobody promises.

import threading as _threading  # noqa: E402
from contextlib import contextmanager as _contextmanager  # noqa: E402

import numpy as _np  # noqa: E402

from .. import backend as _backend  # noqa: E402


@dataclass(frozen=True)
class StaleRead:
    """A plain load that did not see a store another thread had already executed (nothing ordered them)."""

    array: str
    index: tuple
    reader_block: tuple
    reader_thread: tuple
    writer_block: tuple
    writer_thread: tuple

    def __str__(self) -> str:
        where = self.index[0] if len(self.index) == 1 else self.index
        return (f"block {self.reader_block} thread {self.reader_thread} read {self.array}[{where}] without seeing "
                f"the store of block {self.writer_block} thread {self.writer_thread} (nothing orders the two)")


@dataclass
class RelaxedReport:
    """What :func:`relaxed_launch` saw: plain stores, atomics, and stale reads."""

    stores: int = 0
    atomics: int = 0
    stale_reads: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no plain load missed an executed store of another thread."""
        return not self.stale_reads

    def __str__(self) -> str:
        head = f"{self.stores} plain global stores, {self.atomics} atomics; {len(self.stale_reads)} stale read(s)"
        shown = [f"  {s}" for s in self.stale_reads[:3]]
        if len(self.stale_reads) > 3:
            shown.append(f"  ... and {len(self.stale_reads) - 3} more")
        return "\n".join([head] + shown)


class _Thread:
    """What one simulated thread has seen: the stores in its view, what it released, what it may acquire."""

    def __init__(self, block):
        self.block = block
        self.view: set = set()
        self.released: frozenset = frozenset()        # view at its last device-scope fence
        self.released_block: frozenset = frozenset()  # view at its last fence of any scope
        self.pending: list = []                       # (scope block or None, stores) read by atomics since a fence


class _Session:
    def __init__(self):
        self.lock = _threading.RLock()
        self.stores: list = []       # seq -> (array, key, value, thread object)
        self.by_loc: dict = {}       # (id(array), key) -> [seq, ...]
        self.latest: dict = {}       # (id(array), key) -> newest value (coherence order = execution order)
        self.messages: dict = {}     # (id(array), key) -> [(scope block or None, frozenset of seqs)]
        self.threads: dict = {}      # thread object -> _Thread
        self.block_pool: dict = {}   # block -> set of seqs (the union at the last barrier)
        self.report = RelaxedReport()

    def me(self):
        t = _threading.current_thread()
        state = self.threads.get(t)
        if state is None:
            state = self.threads[t] = _Thread(tuple(t.blockIdx))
        return t, state

    def store(self, arr, key, value):
        with self.lock:
            t, me = self.me()
            seq = len(self.stores)
            self.stores.append((arr, key, value, t))
            self.by_loc.setdefault((id(arr), key), []).append(seq)
            self.latest[(id(arr), key)] = value
            self.messages.pop((id(arr), key), None)  # a plain store heads no release sequence
            me.view.add(seq)
            self.report.stores += 1

    def load(self, arr, key):
        with self.lock:
            t, me = self.me()
            seqs = self.by_loc.get((id(arr), key), [])
            for seq in reversed(seqs):
                if seq in me.view:
                    return self.stores[seq][2]
            for seq in reversed(seqs):
                writer = self.stores[seq][3]
                if writer is not t and len(self.report.stale_reads) < 1000:
                    self.report.stale_reads.append(StaleRead(arr.name, key, me.block, tuple(t.threadIdx),
                                                             tuple(writer.blockIdx), tuple(writer.threadIdx)))
                    break
            return arr.base[key]

    def atomic(self, arr, key, op):
        """Apply ``op(scratch)`` (a simulator atomic on a 1-element array) to the element's newest value."""
        with self.lock:
            t, me = self.me()
            loc = (id(arr), key)
            scratch = _np.array([self.latest.get(loc, arr.base[key])], dtype=arr.base.dtype)
            old = op(scratch)
            self.report.atomics += 1
            for scope, seqs in self.messages.get(loc, []):  # the atomic reads: what it may acquire
                if scope is None or scope == me.block:
                    me.pending.append((scope, seqs))
            new = scratch[0]
            if new != self.latest.get(loc, arr.base[key]) or loc not in self.latest:
                seq = len(self.stores)
                self.stores.append((arr, key, new, t))
                self.by_loc.setdefault(loc, []).append(seq)
                me.view.add(seq)
            self.latest[loc] = new
            message = list(self.messages.get(loc, []))  # read-modify-writes continue a release sequence
            message.append((None, me.released))
            message.append((me.block, me.released_block))
            self.messages[loc] = message
            return old

    def fence(self, device: bool):
        with self.lock:
            _t, me = self.me()
            for scope, seqs in me.pending:
                if device or scope == me.block:
                    me.view |= seqs
            me.pending = []
            me.released_block = frozenset(me.view)
            if device:
                me.released = me.released_block

    def barrier_arrive(self):
        with self.lock:
            _t, me = self.me()
            self.block_pool.setdefault(me.block, set()).update(me.view)

    def barrier_leave(self):
        with self.lock:
            _t, me = self.me()
            me.view |= self.block_pool.get(me.block, set())

    def drain(self, arrays):
        with self.lock:
            for arr in arrays:
                for (aid, key), value in self.latest.items():
                    if aid == id(arr):
                        arr.base[key] = value


class RelaxedArray:
    """A global array of :func:`relaxed_launch`: plain loads see only the stores that happen before them."""

    def __init__(self, base: _np.ndarray, name: str, session: _Session):
        self.base = base
        self.name = name
        self._session = session
        self.shape, self.size, self.ndim, self.dtype = base.shape, base.size, base.ndim, base.dtype

    def __len__(self) -> int:
        return len(self.base)

    def _key(self, index):
        key = tuple(int(i) for i in index) if isinstance(index, tuple) else (int(index),)
        if len(key) != self.base.ndim or any(not 0 <= k < s for k, s in zip(key, self.base.shape)):
            raise IndexError(f"index {key if len(key) > 1 else key[0]} is out of bounds for {self.name} with shape "
                             f"{self.base.shape}")
        return key

    def __getitem__(self, index):
        return self._session.load(self, self._key(index))

    def __setitem__(self, index, value):
        self._session.store(self, self._key(index), self.base.dtype.type(value))


_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin", "cas")


@_contextmanager
def _patched(session: _Session):
    from numba.cuda.simulator import kernelapi

    atomic_cls, module_cls = kernelapi.FakeCUDAAtomic, kernelapi.FakeCUDAModule
    saved = {name: getattr(atomic_cls, name) for name in _ATOMICS + ("compare_and_swap",)}
    saved_mod = {name: getattr(module_cls, name) for name in
                 ("syncthreads", "threadfence", "threadfence_block", "threadfence_system")}

    def wrap(original):
        def atomic(self, array, index, *rest):
            if isinstance(array, RelaxedArray):
                return session.atomic(array, array._key(index), lambda a: original(self, a, 0, *rest))
            return original(self, array, index, *rest)
        return atomic

    def cas_old(self, array, old, val):
        if isinstance(array, RelaxedArray):
            return session.atomic(array, (0,) * array.ndim,
                                  lambda a: saved["compare_and_swap"](self, a, old, val))
        return saved["compare_and_swap"](self, array, old, val)

    def syncthreads(self):
        session.barrier_arrive()
        saved_mod["syncthreads"](self)
        session.barrier_leave()

    try:
        for name in _ATOMICS:
            setattr(atomic_cls, name, wrap(saved[name]))
        atomic_cls.compare_and_swap = cas_old
        module_cls.syncthreads = syncthreads
        module_cls.threadfence_block = lambda self: session.fence(device=False)
        module_cls.threadfence = lambda self: session.fence(device=True)
        module_cls.threadfence_system = lambda self: session.fence(device=True)
        yield
    finally:
        for name, fn in saved.items():
            setattr(atomic_cls, name, fn)
        for name, fn in saved_mod.items():
            setattr(module_cls, name, fn)


_RELAXED_LOCK = _threading.Lock()


def relaxed_launch(kernel, griddim, blockdim, *args, names: Sequence[str] | None = None) -> RelaxedReport:
    """Run ``kernel[griddim, blockdim](*args)`` in the simulator on relaxed memory; return what happened.

    Every NumPy array argument is global memory on which a plain load sees only the stores
    that happen before it (see the comment above :class:`StaleRead`); afterwards the arrays
    hold their final values, as after an ordinary simulator launch. A kernel that is correct
    under the PTX memory model gives the same results here; one that needs a fence it lacks
    returns old values, and :attr:`RelaxedReport.stale_reads` says which load missed which store.

    Args:
        kernel: a ``@cuda.jit`` kernel.
        griddim, blockdim: its launch configuration (keep it small: the simulator).
        *args: its arguments; NumPy arrays are the global arrays.
        names: names of the arguments, for the report (default ``arg0, arg1, ...``).

    Raises:
        LabError: not a kernel, or not under the simulator (on a GPU the real memory system is the test).
    """
    if not _backend.is_simulator():
        raise LabError("relaxed_launch runs kernels in Numba's CUDA simulator on relaxed memory; on a GPU, run "
                       "the kernel itself many times instead (the real memory system is the test)")
    if not callable(getattr(kernel, "__getitem__", None)):
        raise LabError(f"kernel must be a @cuda.jit kernel, got {type(kernel).__name__}")
    names = list(names) if names is not None else [f"arg{k}" for k in range(len(args))]
    if len(names) != len(args):
        raise ValueError(f"names has {len(names)} entries for {len(args)} arguments")
    with _RELAXED_LOCK:
        session = _Session()
        wrapped = [RelaxedArray(a, n, session) if isinstance(a, _np.ndarray) and a.ndim > 0 else a
                   for a, n in zip(args, names)]
        with _patched(session):
            try:
                kernel[griddim, blockdim](*wrapped)
            finally:
                session.drain([w for w in wrapped if isinstance(w, RelaxedArray)])
        return session.report


__all__ += ["RelaxedArray", "RelaxedReport", "StaleRead", "relaxed_launch"]
