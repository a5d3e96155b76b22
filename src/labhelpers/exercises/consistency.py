"""Checkers for the lab "Memory consistency and coherence" (labs/13_consistency_lab.ipynb).

1. :func:`check_count_atomic`: count the elements above a threshold with ``cuda.atomic.add``;
2. :func:`check_count_block`: the same with a shared-memory counter per block and one global atomic per block;
3. :func:`check_float_max_cas`: a float32 maximum from a compare-and-swap loop on order-preserving keys;
4. :func:`check_last_block_fences`: the fences that make the last-block sum correct;
5. :func:`check_litmus_answers`: which litmus outcomes sequential consistency allows.

A race is a bug that may not show: on a GPU the counters run on a million elements, where a
lost update is all but certain, and the last-block sum runs hundreds of times with poisoned
partial sums. Under the simulator (one block after another, threads rarely interleaved) the
checkers make the bugs show by behaviour: the block counter goes through the race detector
(:func:`labhelpers.check_races`, three blocks, the last one partial) before any count is
compared; the global counter is watched, so a plain store to it is seen whatever the kernel
calls it; every thread's first compare-and-swap finds the key changed under it (another
thread's legitimate update), so a CAS without a retry loop loses the maximum, and every store to
its key is watched, so a plain store beside the CAS (a lost update the simulator's order hides) is
seen; the last-block
sum runs on the relaxed simulator of :func:`labhelpers.relaxed.relaxed_launch`,
whose stores wait until a fence, twice with the same ticket (a ticket that does not wrap
fails the second launch). Both backends also read the kernel's source for the atomic and
the fences. Failures raise :class:`~labhelpers.errors.CheckFailed` saying what to change.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend
from ..checkers import launch_student_kernel
from ..errors import CheckFailed
from ..kernels import consistency as k
from ..launch import blocks_for
from ..models import consistency as model
from ..patching import patched
from ..racecheck import check_in_simulator, check_races
from ..refdata import load_reference
from ..relaxed import relaxed_launch
from . import answers
from . import answers as _answers  # check_litmus_answers' own variable is called answers
from . import harness as h
from . import timed
from ..timing import benchmark

#: Sizes the counting checkers try (the last, on a GPU, loses updates without atomics).
SIZES_SIM: tuple[int, ...] = (1, 31, 33, 257, 1003)
SIZES_GPU: tuple[int, ...] = (1, 31, 33, 257, 1_000_003, 2**22 + 5)
#: The threshold of the counting exercises.
THRESHOLD = np.float32(0.25)
#: Block size of the lab's last-block sum (its shared array has this many words).
LAB_THREADS = 64


def _sizes() -> tuple[int, ...]:
    return SIZES_SIM if backend.is_simulator() else SIZES_GPU


def _tree(kernel):
    func = getattr(kernel, "py_func", kernel)
    try:
        source = textwrap.dedent(inspect.getsource(func))
        return ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None


def _calls(tree, name: str) -> list[ast.Call]:
    """Calls whose dotted name ends with ``name`` (e.g. ``atomic.add``, ``threadfence``)."""
    found = []
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, ast.Call):
            parts = []
            f = node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            dotted = ".".join(reversed(parts))
            if dotted == name or dotted.endswith("." + name):
                found.append(node)
    return found


def _plain_updates(tree, array: str) -> list[int]:
    """Lines where ``array[...]`` is assigned or augmented with a plain store."""
    lines = []
    for node in ast.walk(tree) if tree is not None else []:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) \
            else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == array:
                lines.append(node.lineno)
    return lines


def _atomic_targets(tree, name: str) -> set[str]:
    """The arrays ``name`` (e.g. ``atomic.cas``) updates, by the names the kernel gives them (simple aliases such as
    ``b = best_key`` included)."""
    names = {c.args[0].id for c in _calls(tree, name) if c.args and isinstance(c.args[0], ast.Name)}
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)] \
        if tree is not None else []
    grew = True
    while grew:
        grew = False
        for node in assigns:
            for t in node.targets:
                if isinstance(t, ast.Name) and (node.value.id in names) != (t.id in names):
                    names |= {node.value.id, t.id}
                    grew = True
    return names


def count_above_reference(x: np.ndarray, threshold) -> int:
    """The specification: how many elements of ``x`` are greater than ``threshold``."""
    return int(np.count_nonzero(np.asarray(x) > threshold))


class _WatchedCounter(np.ndarray):
    """Under the simulator: the global counter's memory, counting atomic and plain stores to it.

    An atomic of the simulator (``cuda.atomic.add``...) stores from Numba's ``kernelapi`` module; any other
    store is a plain one from the kernel, whatever name the kernel gives the array.
    """

    def __setitem__(self, index, value):
        counts = getattr(self, "counts", None)
        if counts is not None:
            frame, atomic = sys._getframe(1), False
            for _ in range(4):
                if frame is None:
                    break
                if os.path.basename(frame.f_code.co_filename) == "kernelapi.py":
                    atomic = True
                    break
                frame = frame.f_back
            counts["atomic" if atomic else "plain"] += 1
        super().__setitem__(index, value)


def _watched_counter() -> tuple[Any, dict]:
    """A device counter (int32[1], zero) and the counts of stores to it (simulator only)."""
    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    counts = {"atomic": 0, "plain": 0}
    watched = np.zeros(1, dtype=np.int32).view(_WatchedCounter)
    watched.counts = counts
    counter._ary = watched
    return counter, counts


def _run_count(kernel, x: np.ndarray, threads: int, what: str):
    """Run a counter; return (count, stores by kind or None on a GPU)."""
    blocks = blocks_for(x.size, threads)
    if backend.is_simulator():
        counter, counts = _watched_counter()
    else:
        counter, counts = cuda.to_device(np.zeros(1, dtype=np.int32)), None
    launch_student_kernel(kernel, blocks, threads, (cuda.to_device(x), THRESHOLD, counter), what)
    return int(counter.copy_to_host()[0]), counts


def _race_check_block_counter(kernel, what: str, threads: int) -> None:
    """The race detector on three blocks (the last partial), before any count is compared."""
    n = 2 * threads + threads // 2 + 1
    x = np.random.default_rng(7).random(n, dtype=np.float32)
    try:
        report = check_races(kernel, blocks_for(n, threads), threads, x, THRESHOLD, np.zeros(1, np.int32))
    except IndexError as exc:
        raise CheckFailed(f"{what} indexed outside an array with n={n} ({exc}): guard the test with "
                          "`if i < x.size`, and index the shared counter with hits[0].") from None
    report.raise_for_problems(what)


def _check_counting(kernel, what: str, block_level: bool) -> None:
    h.require_kernel(kernel, what)
    # On a GPU the simulator's cases first (they watch every store to the counter), with the simulator's message.
    check_in_simulator(_check_counting, kernel, what, block_level)
    tree = _tree(kernel)
    if tree is not None and not _calls(tree, "atomic.add"):
        raise CheckFailed(
            f"{what} does not call cuda.atomic.add: `counter[0] += 1` is a load, an add and a store, and threads "
            "that load the same old value lose each other's updates. Use cuda.atomic.add(counter, 0, 1).")
    plain = _plain_updates(tree, "counter")
    if plain:
        raise CheckFailed(_plain_store_message(what, f" (line {plain[0] - 1} of the kernel)"))
    threads = 64 if backend.is_simulator() else 256
    if block_level:
        _race_check_block_counter(kernel, what, threads)
    rng = np.random.default_rng(13)
    for n in _sizes():
        at = np.where(rng.random(n) < 0.5, THRESHOLD, np.nextafter(THRESHOLD, np.float32(1))).astype(np.float32)
        for name, x in (("random", rng.random(n, dtype=np.float32)), ("all above", np.ones(n, np.float32)),
                        ("none above", np.zeros(n, np.float32)), ("at the threshold", at)):
            try:
                got, stores = _run_count(kernel, x, threads, what)
            except IndexError:
                raise CheckFailed(f"{what} read outside x for n={n}: guard the test with `if i < x.size:` "
                                  "(threads past the end must count nothing)") from None
            if stores is not None and stores["plain"]:
                raise CheckFailed(_plain_store_message(what, f" ({stores['plain']} plain store(s) for n={n})"))
            expected = count_above_reference(x, THRESHOLD)
            where = f"for n={n} ({name} data, {threads} threads per block)"
            if got != expected:
                if name == "at the threshold" and got == int(np.count_nonzero(x >= THRESHOLD)):
                    hint = (f"elements equal to the threshold ({float(THRESHOLD)}) were counted: the test is "
                            "x[i] > threshold (strictly greater), not >=")
                elif got < expected:
                    hint = (f"{expected - got} of {expected} updates were lost: every addition to the global "
                            "counter must be atomic" + (", and the block's shared counter must be complete (a "
                                                        "barrier) before thread 0 adds it" if block_level else ""))
                else:
                    hint = ("too many: count only elements with x[i] > threshold, and only threads with i < x.size"
                            + ("; start the shared counter at 0 (thread 0, then a barrier): shared memory is "
                               "not initialised" if block_level else ""))
                raise CheckFailed(f"{what} counted {got} {where}, expected {expected}: {hint}.")
            if block_level and stores is not None:
                blocks = blocks_for(n, threads)
                if stores["atomic"] > blocks:
                    raise CheckFailed(
                        f"{what} made {stores['atomic']} atomic additions to the global counter {where}, one per "
                        f"thread with a hit; the exercise asks for at most one per block ({blocks} blocks): count "
                        "in the shared counter, then let thread 0 add the block's total after a barrier.")
    if block_level and tree is not None and not _calls(tree, "shared.array"):
        raise CheckFailed(f"{what} uses no shared array: count the block's hits in a "
                          "`cuda.shared.array(1, int32)` first, then add them to the global counter once per block.")
    checked = " (and the race detector on 3 blocks, the last partial)" if block_level else ""
    print(f"Correct: {what} matches np.count_nonzero(x > {float(THRESHOLD)}) for n in {list(_sizes())} "
          f"on random, all-above, none-above and at-the-threshold data{checked}.")


def _plain_store_message(what: str, where: str) -> str:
    return (f"{what} writes the global counter with a plain store{where}: every update of the global counter "
            "must be an atomic (cuda.atomic.add(counter, 0, ...)); a copy in a local variable or a plain "
            "`counter[0] = ...` loses other threads' updates (an atomic next to it does not make it safe).")


def check_count_atomic(kernel) -> None:
    """Exercise 1: ``kernel(x, threshold, counter)`` adds 1 to ``counter[0]`` for each ``x[i] > threshold``, atomically."""
    _check_counting(kernel, "your atomic counter", block_level=False)


def check_count_block(kernel) -> None:
    """Exercise 2: the same count with a shared-memory counter per block and one global atomic per block."""
    _check_counting(kernel, "your block-aggregated counter", block_level=True)


def check_float_max_cas(kernel) -> None:
    """Exercise 3: ``kernel(x_bits, best_key)`` leaves the largest order-preserving key in ``best_key[0]``.

    Tried on one value, equal values, negative values only, signed zeros, infinities and large
    random inputs (where threads really compete). The kernel must use ``cuda.atomic.cas``.
    """
    what = "your compare-and-swap max"
    h.require_kernel(kernel, what)
    check_in_simulator(check_float_max_cas, kernel)  # on a GPU: the simulator's contended cases first
    tree = _tree(kernel)
    if tree is not None and not _calls(tree, "atomic.cas"):
        raise CheckFailed(f"{what} does not call cuda.atomic.cas: the exercise is the compare-and-swap loop "
                          "(cuda.atomic.max would do it for you).")
    plain = sorted(line for name in _atomic_targets(tree, "atomic.cas") for line in _plain_updates(tree, name))
    if plain:
        raise CheckFailed(_cas_plain_store_message(what, f" (line {plain[0] - 1} of the kernel)"))
    rng = np.random.default_rng(3)
    big = 1_000_003 if backend.is_gpu() else 1003
    cases = {
        "one value": np.array([-2.5], np.float32),
        "all equal": np.full(257, 1.5, np.float32),
        "all negative": -rng.random(257, dtype=np.float32) - 1,
        "signed zeros": np.array([-0.0, 0.0, -0.0] * 11, np.float32),
        "infinities": np.array([-np.inf, 3.0, np.inf, -np.inf], np.float32),
        "only -inf": np.full(33, -np.inf, np.float32),
        "random": (rng.standard_normal(big) * 100).astype(np.float32),
        "max at the end": np.append(-rng.random(big - 1, dtype=np.float32), np.float32(7.0)),
    }
    for name, x in cases.items():
        try:
            with _contended_cas(x):
                got, stores = _run_float_max(kernel, x, threads=64 if backend.is_simulator() else 256)
        except IndexError:
            raise CheckFailed(f"{what} read outside x_bits ({name}, n={x.size}): guard with `if i < x_bits.size:`") \
                from None
        except CheckFailed:
            raise
        except Exception as exc:  # a compile error in the student's kernel
            raise CheckFailed(f"{what} did not compile or run ({type(exc).__name__}): {str(exc)[:800]}") from None
        if stores is not None and stores["plain"]:
            raise CheckFailed(_cas_plain_store_message(what, f" ({stores['plain']} plain store(s) for {name}, "
                                                             f"n={x.size})"))
        expected = np.float32(k.key_float(k.float_key(x).max()))  # +0.0 is above -0.0 in the key order
        if got.view(np.int32) != expected.view(np.int32):
            hint = ("a compare-and-swap without a retry loop: when another thread changed the key first, the CAS "
                    "fails and this thread's key is lost. Retry while the key read is smaller than your own: "
                    "`found = cuda.atomic.cas(best_key, 0, seen, key)`; if found == seen the key is in, else "
                    "seen = found and compare again")
            no_flip = np.float32(k.key_float(np.array([x.view(np.int32).max()], np.int32))[0])  # keys = raw bits
            if np.signbit(x).any() and got.view(np.int32) == no_flip.view(np.int32):
                hint = ("negative floats: the key must be `b if b >= 0 else b ^ 0x7FFFFFFF` (flip the 31 low bits), "
                        "so that a more negative float gets a smaller key")
            raise CheckFailed(f"{what} returned {got!r} for {name} (n={x.size}), expected {expected!r}: {hint}.")
    print(f"Correct: {what} matches np.max on {len(cases)} inputs (signed zeros, infinities and n={big:,} included).")


#: The class of a plain store to the location an atomic updates (the simulator runs threads one after another, so
#: its lost updates never show in the numbers).
PLAIN_STORE = "Plain store beside the atomic"


def _cas_plain_store_message(what: str, where: str) -> str:
    return (f"{PLAIN_STORE}: {what} writes best_key with a plain store{where}. A store such as `best_key[0] = key` "
            "can overwrite a larger key that another thread has put in between your read and your store (a lost "
            "update), whatever atomic is called beside it: the threads of a GPU interleave, the simulator's threads "
            "run one after another and hide it. Every update of best_key[0] must be the compare-and-swap itself: "
            "`found = cuda.atomic.cas(best_key, 0, seen, key)`, retried with seen = found while seen < key.")


def _run_float_max(kernel, x: np.ndarray, threads: int) -> tuple[np.float32, dict | None]:
    """``kernel(x_bits, best_key)`` on ``x`` (as :func:`labhelpers.kernels.consistency.run_float_max`); returns the
    maximum and, under the simulator, the stores to ``best_key`` by kind (atomic or plain; None on a GPU)."""
    host = np.full(1, k.KEY_MINUS_INF, dtype=np.int32)
    best = cuda.to_device(host)
    stores = None
    if backend.is_simulator():
        watched = host.copy().view(_WatchedCounter)
        stores = {"atomic": 0, "plain": 0}
        watched.counts = stores
        best._ary = watched
    kernel[blocks_for(x.size, threads), threads](cuda.to_device(x.view(np.int32)), best)
    return np.float32(k.key_float(best.copy_to_host())[0]), stores


@contextmanager
def _contended_cas(x: np.ndarray) -> Iterator[None]:
    """Under the simulator: every thread's first ``cuda.atomic.cas`` finds the key changed under it.

    Just before a thread's first compare-and-swap succeeds, the key is raised to the largest key of ``x``
    between the expected one and the new one, as if another thread had won that race (a legitimate
    value, at most the maximum): a loop that retries still ends with the maximum, a single CAS loses
    its key. Threads run one after another in the simulator, so without this the race never happens.
    On a GPU nothing is changed (a million threads really compete).
    """
    if not backend.is_simulator():
        yield
        return
    from numba.cuda.simulator import kernelapi  # the simulator's internals: used only under the simulator

    keys = np.unique(k.float_key(x))
    original = kernelapi.FakeCUDAAtomic.cas
    seen: set = set()

    def cas(self, array, index, old, val):
        me = threading.current_thread()
        if me not in seen:
            seen.add(me)
            with kernelapi.caslock:
                j = int(np.searchsorted(keys, val)) - 1
                if array[index] == old and j >= 0 and old < keys[j] < val:
                    # the other thread's update is an atomic one: stored past the watch on plain stores
                    np.ndarray.__setitem__(getattr(array, "_ary", array), index, keys[j])
        return original(self, array, index, old, val)

    with patched((kernelapi.FakeCUDAAtomic, "cas", cas)):
        yield


def _fence_lines(tree) -> tuple[list[int], int | None, int | None]:
    fences = sorted(c.lineno for c in _calls(tree, "threadfence"))
    stores = _plain_updates(tree, "partial")
    ticket = [c.lineno for c in _calls(tree, "atomic.inc") + _calls(tree, "atomic.add")
              if c.args and isinstance(c.args[0], ast.Name) and c.args[0].id == "ticket"]
    return fences, (stores[0] if stores else None), (ticket[0] if ticket else None)


def check_last_block_fences(kernel, *, threads: int = LAB_THREADS) -> None:
    """Exercise 4: the fences of the last-block sum ``kernel(x, partial, ticket, out)``.

    The kernel must put ``cuda.threadfence()`` between the store of the block's partial sum
    and the atomic ticket (release) and one after the ticket (acquire). Checked three ways:
    its source; under the simulator, a run on the relaxed simulator (stores wait until a fence);
    on a GPU, 300 launches with the partial sums poisoned with NaN before each.
    """
    what = "your last-block sum"
    h.require_kernel(kernel, what)
    if threads == LAB_THREADS:
        check_in_simulator(check_last_block_fences, kernel)  # on a GPU: the relaxed simulator's two launches first
    tree = _tree(kernel)
    if tree is not None:
        fences, store, ticket = _fence_lines(tree)
        if store is None or ticket is None:
            raise CheckFailed(f"{what} must still store partial[cuda.blockIdx.x] and take a ticket with "
                              "cuda.atomic.inc(ticket, 0, ...): only add lines to the skeleton.")
        blocks_fences = _calls(tree, "threadfence_block")
        if not any(store < f < ticket for f in fences):
            extra = (" (cuda.threadfence_block() orders the accesses only as seen by this block's own threads; the "
                     "last block is another block)") if blocks_fences else ""
            raise CheckFailed(
                f"{what} has no cuda.threadfence() between the store of the partial sum and the atomic ticket"
                f"{extra}: without it the ticket can be seen before the partial sum, and the last block adds an old "
                "value. Put cuda.threadfence() right after `partial[cuda.blockIdx.x] = ...` (release).")
        if not any(f > ticket for f in fences):
            raise CheckFailed(
                f"{what} has no cuda.threadfence() after the atomic ticket: the last block may read partial sums "
                "that are older than the tickets it saw (its loads can be performed, or served from its SM's L1 "
                "cache, before the ticket). Put cuda.threadfence() right after the cuda.atomic.inc (acquire).")
    x_small = np.random.default_rng(4).integers(-4, 5, size=threads * 5 + 3).astype(np.float32)
    expected = np.float32(np.sum(x_small, dtype=np.float64))
    if backend.is_simulator():
        for blocks in (1, 3):
            ticket = np.zeros(1, np.uint32)
            for launch in (1, 2):  # the same ticket: a GPU relaunches the kernel, and the ticket must be 0 again
                partial = np.full(blocks, np.nan, np.float32)
                out = np.full(1, np.nan, np.float32)
                try:
                    report = relaxed_launch(kernel, blocks, threads, x_small, partial, ticket, out,
                                                  names=["x", "partial", "ticket", "out"])
                except IndexError:
                    raise CheckFailed(f"{what} read outside an array with {blocks} blocks: guard the loads") from None
                if not report.ok:
                    raise CheckFailed(f"{what} is wrong on the relaxed simulator ({blocks} blocks of {threads} "
                                      f"threads, stores visible only after a fence): {report.stale_reads[0]}. Fence "
                                      "between the partial sum and the ticket, and after the ticket.")
                if ticket[0] != 0:
                    raise CheckFailed(
                        f"{what} leaves the ticket at {int(ticket[0])} after a launch of {blocks} block(s): the "
                        "ticket never wraps, so in the next launch no block is the last one and out is never "
                        "written. Take it with cuda.atomic.inc(ticket, 0, cuda.gridDim.x - 1), which wraps to 0 "
                        "after the last block.")
                if out[0] != expected:
                    raise CheckFailed(f"{what} returned {out[0]} with {blocks} blocks (launch {launch}), expected "
                                      f"{expected}: check the loop over partial[0 .. gridDim.x-1] and the tree in "
                                      "the last block.")
        print(f"Correct: {what} has both fences and is right on the relaxed simulator (stores delayed until a "
              "fence), with 1 and 3 blocks, launched twice. On a GPU this checker also runs it 300 times.")
        return
    x = np.random.default_rng(5).integers(-4, 5, size=2**21 + 3).astype(np.float32)
    exact = np.float32(np.sum(x, dtype=np.float64))
    x_d = cuda.to_device(x)
    blocks = 1024
    partial = cuda.device_array(blocks, np.float32)
    ticket = cuda.to_device(np.zeros(1, np.uint32))
    out = cuda.device_array(1, np.float32)
    wrong = 0
    for _ in range(300):
        k.fill_float32[8, 128](partial, np.float32(np.nan))
        launch_student_kernel(kernel, blocks, threads, (x_d, partial, ticket, out), what)
        if out.copy_to_host()[0] != exact:
            wrong += 1
    if wrong:
        raise CheckFailed(f"{what} returned a wrong sum in {wrong} of 300 launches ({blocks} blocks): check the "
                          "fences and the ticket's wrap (cuda.atomic.inc(ticket, 0, cuda.gridDim.x - 1)).")
    print(f"Correct: {what} has both fences and returned the exact sum in 300 of 300 launches of {blocks} blocks "
          "(partial sums poisoned before each).")


#: The (test, outcome) pairs of exercise 5.
LITMUS_QUESTIONS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("MP", (1, 0)), ("MP", (0, 1)), ("MP", (0, 0)), ("SB", (0, 0)), ("SB", (1, 1)), ("LB", (1, 1)),
    ("LB", (0, 0)), ("CoRR", (1, 0)), ("CoRR", (0, 1)), ("IRIW", (1, 0, 1, 0)), ("IRIW", (1, 1, 0, 0)),
    ("MP-reversed", (1, 0)),
)


def check_litmus_answers(answers_fn) -> None:
    """Exercise 5: ``answers_fn()`` returns ``{(test, outcome): True if SC allows it}`` for :data:`LITMUS_QUESTIONS`."""
    h.require_function(answers_fn, "litmus_answers", "litmus_answers()")
    answers = _answers.call(answers_fn, "litmus_answers")
    if not isinstance(answers, dict):
        raise CheckFailed(f"litmus_answers() must return a dict {{(test, outcome): True/False}}, got "
                          f"{type(answers).__name__}")
    missing = [q for q in LITMUS_QUESTIONS if answers.get(q) is None]
    if missing:
        raise CheckFailed(f"{len(missing)} question(s) not answered yet, e.g. {missing[0]}: replace None by True "
                          "(some interleaving gives it) or False (none does).")
    typed = [(q, answers[q]) for q in LITMUS_QUESTIONS if not isinstance(answers[q], (bool, np.bool_))]
    if typed:
        q, value = typed[0]
        raise CheckFailed(f"{len(typed)} answer(s) are not True or False, e.g. {q}: {value!r} is a "
                          f"{type(value).__name__}. Write the bool True or False without quotes (a string such as "
                          "'False' is not a bool, and bool('False') is True).")
    wrong = []
    for test, outcome in LITMUS_QUESTIONS:
        truth = model.is_sc(model.get_test(test), outcome)
        if bool(answers[(test, outcome)]) != truth:
            wrong.append((test, outcome, truth))
    if wrong:
        test, outcome, truth = wrong[0]
        t = model.get_test(test)
        why = ("an interleaving gives it: try the widget or model.sc_outcomes" if truth else
               "no interleaving gives it: in every order, " + ", ".join(t.registers) +
               " cannot take these values together")
        raise CheckFailed(f"{len(wrong)} of {len(LITMUS_QUESTIONS)} answers are wrong, e.g. {test} with "
                          f"{dict(zip(t.registers, outcome))}: sequential consistency "
                          f"{'allows' if truth else 'forbids'} it ({why}).")
    print(f"Correct: all {len(LITMUS_QUESTIONS)} outcomes classified as the interleaving enumerator does.")


__all__ = ["LAB_THREADS", "LITMUS_QUESTIONS", "PLAIN_STORE", "THRESHOLD", "check_count_atomic", "check_count_block",
           "check_float_max_cas", "check_last_block_fences", "check_litmus_answers", "count_above_reference"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Block sizes the measured exercise accepts, and the elements counted on a GPU (every one a hit).
TUNED_THREADS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
TUNED_N = 2**24


def _counter_reference(threads: int) -> str:
    ref = load_reference("ch13_atomic_throughput")
    t = ref.table.set_index("kind")
    per_thread = float(t.loc["counter: atomic per thread", "median_ms"])
    per_block = float(t.loc["counter: block-aggregated", "median_ms"])
    return timed.reference_text(
        ref, f"counting {int(t.loc['counter: block-aggregated', 'increments']):,} hits with one atomic per block took "
             f"{per_block:.3g} ms, with one atomic per hit {per_thread:.3g} ms: ratio {per_thread / per_block:.1f} "
             f"(blocks of 256 threads; you chose {threads})")


COUNTER_TUNED = timed.MeasuredExercise(
    name="count_block at your block size", target=timed.target_for("13", 2.0),
    measures=f"your count_block over {TUNED_N:,} elements, every one a hit, at your block size",
    yardstick="your count_atomic (one global atomic per hit) at 256 threads", reference=_counter_reference)


def _race_counters(count_block, count_atomic, threads: int) -> tuple:
    x_d = cuda.to_device(np.full(TUNED_N, THRESHOLD + np.float32(1), dtype=np.float32))
    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    student = benchmark(lambda: count_block[blocks_for(TUNED_N, threads), threads](x_d, THRESHOLD, counter),
                        label="count_block")
    yardstick = benchmark(lambda: count_atomic[blocks_for(TUNED_N, 256), 256](x_d, THRESHOLD, counter),
                          label="count_atomic")
    return student, yardstick


def check_counter_speed(count_block, count_atomic, choose_threads) -> timed.Verdict:
    """Measured exercise: aggregate, then measure. Your ``count_block`` and ``count_atomic`` (exercises 1 and 2,
    checked first); ``count_block`` at the block size ``choose_threads()`` picks must, on a GPU, be ``COUNTER_TUNED.target`` times as fast as
    ``count_atomic`` when every element is a hit (all atomics on one address), timed in the same run.

    Raises:
        CheckFailed: a kernel is wrong, the choice is not allowed, or too slow (``Below target``).
    """
    threads = timed.choose(choose_threads, "choose_threads", TUNED_THREADS)

    def correct() -> None:
        check_count_atomic(count_atomic)
        check_count_block(count_block)

    return timed.check(COUNTER_TUNED, threads, correct=correct,
                          race=lambda: _race_counters(count_block, count_atomic, threads))


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (n, group, atomics_per_s) cases of :func:`check_counter_bound`: arguments, not a GPU's figures (n is not always
#: a multiple of group: the last group still issues its atomic).
BOUND_CASES: tuple[tuple[int, int, float], ...] = (
    (10**6, 1, 1e9), (10**6 + 5, 32, 1.5e9), (2**24, 256, 1.4e9), (1000, 256, 1e9))
#: The reference rows shown beside the prediction (``ch13_atomic_throughput``): kind and threads per atomic.
BOUND_ROWS: tuple[tuple[str, int], ...] = (
    ("one address", 1), ("counter: atomic per thread", 1), ("counter: warp-aggregated", 32),
    ("counter: block-aggregated", 256))


def _counter_want(n: int, group: int, rate: float) -> float:
    return -(-n // group) / rate * 1e3  # not launch geometry: the atomics of the student's formula, one per group


def _bound_hint(got: float, n: int, group: int, rate: float) -> str:
    want = _counter_want(n, group, rate)
    if np.isclose(got, n / group / rate * 1e3, rtol=1e-9) or np.isclose(got, (n // group) / rate * 1e3, rtol=1e-9):
        return "a partial last group still issues its atomic: ceil(n / group) atomics"
    if np.isclose(got, n / rate * 1e3, rtol=1e-6):
        return f"one atomic per group of {group} threads, not per thread: ceil(n / group) atomics"
    if np.isclose(got, n * group / rate * 1e3, rtol=1e-6):
        return "aggregating divides the atomics by the group size, it does not multiply them"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "atomics / (atomics per second) is seconds: times 1000 for milliseconds"
    return f"atomics = ceil(n / group), one after another on one address; time = atomics / ({rate:g} per s)"


def check_counter_bound(predict_counter_ms: Any) -> None:
    """Predict, then measure: ``predict_counter_ms(n, group, atomics_per_s)`` returns the time in ms of counting
    ``n`` hits into one address with one atomic per group of ``group`` threads (1: per thread, 32: per warp, the
    block size: per block), the atomics on one address serialised at ``atomics_per_s`` per second.

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_counter_ms, "predict_counter_ms",
                          "predict_counter_ms(n, group, atomics_per_s)",
                          BOUND_CASES,
                          _counter_want,
                          shown=lambda got, want: f"{got:.9g} ms, the time is {want:.9g} ms",
                          hint=_bound_hint, rtol=1e-9)
    print(f"Correct: your time equals the serialised atomics over their rate on all {len(BOUND_CASES)} cases.")


def show_counter_bound(predict_counter_ms: Any) -> pd.DataFrame:
    """Your times (checked first by :func:`check_counter_bound`) for the chapter's counters of 2^24 hits beside their
    measured times (reference ``ch13_atomic_throughput``, on every backend), at the rate of one address measured in
    the same run.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_counter_bound`).
    """
    check_counter_bound(predict_counter_ms)
    ref = load_reference("ch13_atomic_throughput")
    t = ref.table.set_index("kind")
    rate = float(t.loc["one address", "atomics_per_s"])
    print(timed.reference_text(ref, f"Measured (one address: {rate:.3g} atomics/s)"))
    rows = []
    for kind, group in BOUND_ROWS:
        n = int(t.loc[kind, "increments"])
        ms = float(t.loc[kind, "median_ms"])
        mine = answers.number(answers.call(predict_counter_ms, "predict_counter_ms", n, group, rate),
                              "predict_counter_ms")
        rows.append({"counter": kind, "threads per atomic": group, "your time (ms)": round(mine, 4),
                     "measured (ms)": round(ms, 4), "measured / yours": round(ms / mine, 2)})
    return pd.DataFrame(rows)
