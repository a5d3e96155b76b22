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

import numpy as np
import pandas as pd

from ..errors import ArgumentError, LabError

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


def _outcome(test: LitmusTest, outcome: Sequence[int] | dict) -> tuple[int, ...]:
    """``outcome`` as a tuple of ints in the order of ``test.registers``, or ArgumentError saying what is wrong."""
    if not isinstance(test, LitmusTest):
        raise ArgumentError(f"test must be a litmus test (e.g. get_test('MP') or MP), got {type(test).__name__} "
                            f"{test!r:.60}.")
    regs = test.registers
    order = f"({', '.join(regs)})"
    if isinstance(outcome, dict):
        missing = [r for r in regs if r not in outcome]
        extra = [r for r in outcome if r not in regs]
        if missing or extra:
            raise ArgumentError(
                f"the outcome {outcome!r} does not name the registers of {test.name}, which are {', '.join(regs)}"
                + (f": {', '.join(map(str, missing))} missing" if missing else "")
                + (f"{',' if missing else ':'} {', '.join(map(repr, extra))} not a register of it" if extra else "")
                + ".")
        values = [outcome[r] for r in regs]
    elif isinstance(outcome, (str, bytes)) or not isinstance(outcome, (Sequence, np.ndarray)):
        raise ArgumentError(f"an outcome of {test.name} is a tuple of {len(regs)} register values {order} or a dict "
                            f"{{register: value}}, got {type(outcome).__name__} {outcome!r:.60}.")
    else:
        values = list(outcome)
        if len(values) != len(regs):
            raise ArgumentError(f"the outcome {tuple(values)!r} has {len(values)} value(s), but {test.name} has "
                                f"{len(regs)} register(s) {order}: give one value per register, in that order "
                                "(thread by thread, in program order), or a dict {register: value}.")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, np.integer))]
    if bad:
        raise ArgumentError(f"the values of an outcome are the ints the loads read, got {bad[0]!r} "
                            f"({type(bad[0]).__name__}) in {tuple(values)!r} for {order}.")
    return tuple(int(v) for v in values)


def is_sc(test: LitmusTest, outcome: Sequence[int] | dict) -> bool:
    """True when sequential consistency allows ``outcome`` (a tuple in register order, or a dict).

    Raises:
        ArgumentError: ``test`` is not a litmus test, or ``outcome`` is not one of its outcomes' shape (a value per
            register, each an int; a dict naming exactly its registers).
    """
    return _outcome(test, outcome) in sc_outcomes(test)


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
