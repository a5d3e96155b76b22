"""Find shared-memory races and misplaced barriers by running a kernel under Numba's CUDA simulator.

``check_races(kernel, griddim, blockdim, *args)`` launches ``kernel[griddim, blockdim](*args)`` under the
simulator with every shared array replaced by a recording one, and returns a :class:`RaceReport`:

* **races** (:class:`Race`): two different threads of one block touch the same element of a shared array,
  at least one of them writes, and no ``cuda.syncthreads()`` separates the two accesses. The kind says
  which order the program meant: ``RAW`` (read after write: a thread reads an element another thread
  writes earlier in the same phase, and may get the old value), ``WAR`` (write after read: a thread
  overwrites an element another thread still has to read) or ``WAW`` (two threads write one element).
  Atomic operations (``cuda.atomic.*``) on shared memory do not race with each other (an atomic and a
  plain read or write of the same element in one phase still do).
* **barrier problems** (:class:`BarrierProblem`): a ``cuda.syncthreads()`` that only part of a block
  reaches (the others returned early or skipped it in a branch), or threads of one block waiting at
  different barriers at once (a barrier in a loop whose trip count differs between threads, or one
  barrier in each arm of an ``if``). On a GPU that hangs the block or gives undefined results.

Each finding names the array (its variable name in the kernel, else ``shared array #k (dtype, shape)``),
the element, the block, the threads as ``(x, y, z)`` thread indices, and the source lines. The report
prints short (the first findings, counts by kind); ``report.ok`` is True when nothing was found, and
``report.raise_for_problems(what)`` raises :class:`~labhelpers.errors.CheckFailed` with the findings.

How it works. In one phase (between two barriers) the simulator runs the threads of a block in an
order that depends on Python's thread switching, so *which* order two conflicting accesses happen in
is not reproducible. The detector therefore does not use that order. It numbers each thread's shared
accesses within its phase (its position: how many shared accesses the thread made since its last
barrier) and compares the accesses of different threads to the same element in the same phase. A write
at an earlier (or the same) position than a read is a RAW hazard, a read at an earlier position than
the write a WAR hazard, as if the threads ran in lockstep. The report is the same on every run.

It keeps what a race needs, not every access: per thread, phase, element, source line and kind of
access (read or write, atomic or not), the first and the last position and a count. That loses no race:
a write and a read of two threads form a RAW pair at some positions exactly when the write's first
position is at most the read's last, a WAR pair exactly when the write's last position is after the
read's first (and two writes pair in either order by the same rule), so the first and last positions
give every race (kind, two lines, element) that all the positions give. The pairs of one element are
decided per group of partners without enumerating them, so an element every thread touches costs a pass
per write, not one per pair, and no pair is skipped. The simulator
runs one block at a time; each block is analysed when it ends and its entries dropped, so memory holds
one block's elements, not the launch's accesses, and a loop that reads the same elements millions of
times costs a dictionary update per access. Barrier problems come from comparing, per block, the
sequence of barriers each thread reached (which ``syncthreads`` line, which time).

What it is for, and its limits. It checks the launch it is given, so use small launches (a few blocks;
at most :data:`MAX_THREADS_CHECKED` threads in all) that still exercise the edges: a partial last block,
more than one phase of a loop. The simulator runs about a million shared accesses per second with the
detector on; a check that will take more than :data:`LONG_RUN_SECONDS` says so in one line (``check_races:
...``, from the time its first blocks took), and one that would take more than :data:`MAX_RUN_SECONDS`
stops with ``SimulatorTooSlow`` saying what to make smaller. It sees shared memory only (global-memory
races between blocks are not checked) and only the accesses of this run (a race on a path no thread took is
not found). A negative index raises ``IndexError`` saying what a GPU would touch instead: the memory before
the array, or (``sA[ty, tx - 1]`` with ``tx = 0`` in a later row) the previous row's last element.
Warp-level code (``syncwarp``, shuffles) does not run in the simulator at all
(:class:`~labhelpers.errors.GPUOnlyError`).
While it runs, the simulator's ``cuda.shared.array``, barrier and block runner are replaced by recording
versions; all are restored afterwards, also when the kernel raises. The kernel really runs: arrays you pass are
written as by a normal launch.

On a GPU (``numba.cuda`` is the real CUDA target, so the simulator is not loaded in this process) the
same analysis runs in a child Python process with ``NUMBA_ENABLE_CUDASIM=1``: the kernel is rebuilt
there from its Python source (``inspect.getsource`` of ``kernel.py_func``, plus the module-level
constants, modules and device functions it uses, or by importing it when it is defined at the top of an
importable module), and array arguments are sent as NumPy copies.
The report, its text and its errors are the same as under the simulator, and the arrays you passed
receive what the simulated launch wrote into their copies. A kernel that cannot be rebuilt
(its source is not available, or it uses a global that cannot be sent to another process) raises
:class:`~labhelpers.errors.GPUOnlyError` saying how to check it instead: run the notebook with
``LABHELPERS_BACKEND=sim``, or use NVIDIA's race checker on the GPU,
``compute-sanitizer --tool racecheck python your_script.py``.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import linecache
import os
import re
import sys
import threading
import time
from collections import defaultdict
from typing import Any, Iterator

import numpy as np

from . import backend, patching, validate
from .errors import ArgumentError, GPUOnlyError, LaunchConfigError
from .errors import SimulatorTooSlow
from .racecheck_report import (KINDS, MAX_ACCESSES, SHOWN_IN_TEXT, BarrierProblem, Race, RaceReport,  # noqa: F401
                               SharedArray, SourceLine, advice)  # (re-exported: the report lives in racecheck_report)
from .racecheck_gpu import (NOTICE_PREFIX, _child_process, _kernel_spec,  # noqa: F401  (on a GPU: the simulator
                            _run_in_subprocess, check_in_simulator, child_serve)  # subprocess; tests use private ones)

__all__ = ["BarrierProblem", "Race", "RaceReport", "SharedArray", "SourceLine", "check_races",
           "MAX_THREADS_CHECKED", "KINDS"]

#: Largest launch (threads in all blocks together) the detector accepts: it runs every thread in Python.
MAX_THREADS_CHECKED = 16384
#: Findings kept in a report by default (each kind of finding; the counts cover all of them).
MAX_REPORTED = 20
#: Formerly the most pairs of accesses to one element compared; the pairing (:func:`_pairs`) now decides every pair
#: without enumerating them, so nothing is cut. Kept so that code which sets it still runs.
MAX_PAIRS_PER_ELEMENT = 20_000
#: Threads named at most in one barrier problem.
THREADS_NAMED = 4
#: A check that will take longer than this (seconds, projected from its first blocks) says so in one line.
LONG_RUN_SECONDS = 15.0
#: A check that would take longer than this (seconds, projected from its first blocks) is stopped with
#: ``SimulatorTooSlow``, whose message says what to make smaller.
MAX_RUN_SECONDS = 300.0

# -------------------------------------------------------------------------------------- argument checking


def _dispatcher(kernel: Any) -> Any:
    """The kernel behind ``kernel`` (also accepts ``kernel[grid, block]``); ArgumentError if it is none."""
    target = getattr(kernel, "dispatcher", kernel)  # a configured launch on a GPU
    validate.kernel(target, "kernel (the first argument of check_races)")
    return target


def _xyz(dims: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(int(v) for v in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _check_launch(griddim: Any, blockdim: Any,
                  shared_bytes: Any) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """The launch as two (x, y, z) tuples and the dynamic shared bytes; LaunchConfigError if a GPU refuses it."""
    grid_dims, block_dims = validate.launch(griddim, blockdim, shared_bytes)
    grid, block = _xyz(grid_dims), _xyz(block_dims)
    total = int(np.prod(grid)) * int(np.prod(block))
    if total > MAX_THREADS_CHECKED:
        raise LaunchConfigError(
            f"check_races runs every thread in Python and accepts at most {MAX_THREADS_CHECKED} threads in all; "
            f"griddim={griddim!r} with blockdim={blockdim!r} is {total}. A race shows in one or two blocks: launch "
            "a few blocks on a small input that still has a partial last block.")
    return grid, block, int(shared_bytes)


def _check_arguments(target: Any, griddim: Any, blockdim: Any, args: tuple) -> None:
    """ArgumentError unless ``args`` fit the kernel's parameters (the launch would fail deep in the simulator)."""
    name = getattr(target.py_func, "__name__", "kernel")
    try:
        signature = inspect.signature(target.py_func)
    except (TypeError, ValueError):  # no signature to compare with: the launch will say
        return
    try:
        signature.bind(*args)
    except TypeError:
        params = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = ", ".join(p.name for p in params)
        got = "none" if not args else str(len(args))
        raise ArgumentError(
            f"check_races runs {name}[griddim, blockdim]({names}), so it needs {name}'s {len(params)} argument(s) "
            f"after the launch; got {got}. Pass them as for a launch: "
            f"lh.check_races({name}, {griddim!r}, {blockdim!r}, {names}).") from None


# ----------------------------------------------------------------------------------- recording (simulator)


_current_thread = threading.current_thread


class _ThreadState:
    """One simulated thread: its phase (barriers passed), its position in the phase, and what it touched.

    ``phases[e]`` maps ``(view id, element key, flags, site)`` to ``[first position, last position, count]`` for
    the accesses of phase ``e`` (flags: 1 for a write, 2 for an atomic): one entry per element, line and kind of
    access, however often the thread repeats it. Analysed, then dropped, when the thread's block ends.
    """

    __slots__ = ("block", "thread", "tlin", "epoch", "seq", "phase", "phases", "barriers", "site_counts")

    def __init__(self, block, thread, tlin):
        self.block, self.thread, self.tlin = block, thread, tlin
        self.epoch = 0
        self.seq = 0
        self.phase: dict = {}
        self.phases: list | None = [self.phase]
        self.barriers: list = []  # (site, n-th time this thread reached that site)
        self.site_counts: dict = defaultdict(int)

    def next_phase(self) -> None:
        """The thread passed a barrier: a new phase, positions counted from 0 again."""
        self.epoch += 1
        self.seq = 0
        self.phase = {}
        if self.phases is not None:
            self.phases.append(self.phase)


class _View:
    """What the recorder knows about one allocation (a root for the element keys)."""

    __slots__ = ("name", "shape", "dtype", "site", "root", "itemsize", "dynamic", "reads", "writes", "obj",
                 "named", "tries")

    def __init__(self, name, shape, dtype, site, root, itemsize, dynamic):
        self.name, self.shape, self.dtype, self.site = name, shape, dtype, site
        self.root, self.itemsize, self.dynamic = root, itemsize, dynamic
        self.reads = self.writes = 0
        self.obj = None  # the recording array handed to the kernel
        self.named = not name.startswith("shared array #")
        self.tries = 0

    def learn_name(self, frame) -> None:
        """Without the source line, take the name of the kernel's variable that holds the array."""
        self.tries += 1
        if self.tries > 3 or frame is None:
            self.named = self.tries > 3
            return
        for name, value in frame.f_locals.items():
            if value is self.obj:
                self.name, self.named = name, True
                return


class _Recorder:
    """Collects the shared accesses and barrier arrivals of one launch, thread by thread, analysed block by block.

    What a race needs is kept, not every access: per thread, phase, element, line and kind of access (read,
    write, atomic or not) the first and the last position in the phase and a count (:class:`_ThreadState`).
    The simulator runs one block at a time; when a block ends (:meth:`block_done`) its races are added to
    :attr:`tally` and its accesses dropped, so memory holds one block's elements, not the launch's accesses.
    """

    def __init__(self, griddim, blockdim, skip_files, atomic_file, launch: str = "kernel"):
        self.griddim, self.blockdim = griddim, blockdim
        self.lock = threading.Lock()
        self.pending: list[_ThreadState] = []  # the threads of the block now running
        self.states: list[_ThreadState] = []  # the threads of finished blocks (their barriers; accesses dropped)
        self.views: list[_View] = []
        self.allocations: dict = {}
        self.skip = skip_files
        self.atomic_file = atomic_file
        self.accesses = 0  # accesses recorded, counted when each block ends (deterministic)
        self.max_accesses = MAX_ACCESSES
        self.complete = True
        self.local = threading.local()  # .state: the calling simulated thread's _ThreadState
        self.lines: dict = {}  # instruction offset -> (code object, site number) of an access (the first one seen)
        self.other_lines: dict = {}  # (id of a code object, instruction offset) -> site number, for every access
        self.codes: list = []  # the code objects whose ids key self.other_lines
        self.sites: list[tuple[str, int]] = []  # site number -> (file, line)
        self.site_numbers: dict = {}  # (file, line) -> site number
        self.tally = _RaceTally(griddim)
        self.progress = _Progress(launch, int(np.prod(griddim)), self)

    def state(self, thread) -> _ThreadState | None:
        """The recording state of ``thread``, the calling thread (None when it is not a simulated CUDA thread)."""
        st = getattr(self.local, "state", None)
        if st is None:
            idx = getattr(thread, "threadIdx", None)
            if idx is None:  # not a simulated CUDA thread (the host touching a shared array)
                return None
            bx, by, _ = self.blockdim
            t = (int(idx.x), int(idx.y), int(idx.z))
            b = tuple(int(v) for v in thread.blockIdx)
            st = _ThreadState(b, t, t[0] + bx * (t[1] + by * t[2]))
            self.local.state = st
            with self.lock:
                self.pending.append(st)
        return st

    def site(self, frame) -> tuple[tuple[str, int], bool, Any]:
        """The kernel line behind ``frame`` (skipping the simulator's own frames), whether an atomic made the
        access, and the kernel's frame."""
        atomic = False
        skip = self.skip
        while frame is not None and frame.f_code.co_filename in skip:
            if frame.f_code.co_filename == self.atomic_file:
                atomic = True
            frame = frame.f_back
        if frame is None:
            return ("<unknown>", 0), atomic, None
        return (frame.f_code.co_filename, frame.f_lineno), atomic, frame

    def record_one(self, key: int, flags: int, vid: int, frame) -> None:
        """One access of one element by the calling simulated thread (the hot path: keep it short).

        ``key`` is the element's key, ``flags`` 1 for a write, ``vid`` the view, ``frame`` the caller's frame
        (the kernel's line, or the simulator's atomic, whose caller is the kernel's line).
        """
        try:
            st = self.local.state
        except AttributeError:
            st = self.state(_current_thread())
            if st is None:
                return
        code = frame.f_code
        known = self.lines.get(frame.f_lasti)  # (code, site number) of the instruction that made the access
        if known is not None and known[0] is code:
            site = known[1]
        else:
            site = self._new_site(code, frame, vid)
        if site < 0:  # an atomic (or a helper of this module): the kernel's line is further up, each time
            site, flags = self._kernel_site(frame, flags, vid)
        k = (vid, key, flags, site)
        seq = st.seq
        entry = st.phase.get(k)
        if entry is None:
            st.phase[k] = [seq, seq, 1]
        else:
            entry[1] = seq
            entry[2] += 1
        st.seq = seq + 1

    def record(self, keys, flags: int, vid: int, frame) -> None:
        """One access through any index: ``keys`` is one element's key or an array of them (a fancy index: several
        elements at one position)."""
        if not isinstance(keys, np.ndarray):
            self.record_one(int(keys), flags, vid, frame)
            return
        st = self.state(_current_thread())
        if st is None:
            return
        site, flags = self._kernel_site(frame, flags, vid)
        seq = st.seq
        for key in keys.ravel().tolist():
            k = (vid, key, flags, site)
            entry = st.phase.get(k)
            if entry is None:
                st.phase[k] = [seq, seq, 1]
            else:
                entry[1] = seq
                entry[2] += 1
        st.seq = seq + 1

    def _kernel_site(self, frame, flags: int, vid: int) -> tuple[int, int]:
        """(site number, flags) of an access found by walking up to the kernel's line (the slow path: atomics,
        fancy indices): an atomic sets the flags' atomic bit, and the array learns its name there."""
        line, atomic, kernel_frame = self.site(frame)
        view = self.views[vid]
        if not view.named:
            view.learn_name(kernel_frame)
        return self.site_number(line), (flags | 2 if atomic else flags)

    def _new_site(self, code, frame, vid: int) -> int:
        """The site number of a kernel instruction not in :attr:`lines` (-1 for the simulator's own frames, whose
        kernel line depends on the caller); the array's name is learnt there if the source did not show it."""
        where = (id(code), frame.f_lasti)
        site = self.other_lines.get(where)
        if site is not None:  # its offset is taken by another function's instruction in self.lines
            return site
        if code.co_filename in self.skip:
            site = -1
        else:
            site = self.site_number((code.co_filename, frame.f_lineno))  # f_lineno costs a microsecond: once
            view = self.views[vid]
            if not view.named:
                view.learn_name(frame)
        self.codes.append(code)  # kept alive, so that its id stays its own while the check runs
        self.other_lines[where] = site
        self.lines.setdefault(frame.f_lasti, (code, site))
        return site

    def site_number(self, line: tuple[str, int]) -> int:
        """The number that stands for ``(file, line)`` in the recorded entries."""
        number = self.site_numbers.get(line)
        if number is None:
            with self.lock:
                number = self.site_numbers.setdefault(line, len(self.sites))
                if number == len(self.sites):
                    self.sites.append(line)
        return number

    def block_done(self) -> None:
        """The simulator finished a block: add its races to the tally, count its accesses, drop them."""
        with self.lock:
            states, self.pending = self.pending, []
        views, sites = self.views, self.sites
        roots = [v.root for v in views]
        written = set()
        recorded = self.complete  # past MAX_ACCESSES the blocks still run (and their barriers count), unrecorded
        for st in states:
            for epoch, phase in enumerate(st.phases if recorded else ()):
                for (vid, key, flags, _site), entry in phase.items():
                    if flags & 1:
                        written.add((st.block, epoch, roots[vid], key))
                        views[vid].writes += entry[2]
                    else:
                        views[vid].reads += entry[2]
                    self.accesses += entry[2]
        if self.accesses > self.max_accesses:
            self.complete = False
        touched: dict = defaultdict(list)
        if written:
            for st in states:
                tlin, thread, block = st.tlin, st.thread, st.block
                for epoch, phase in enumerate(st.phases or ()):
                    for (vid, key, flags, site), (first, last, _n) in phase.items():
                        k = (block, epoch, roots[vid], key)
                        if k in written:
                            accesses = touched[k]
                            is_write, atomic, site = bool(flags & 1), bool(flags & 2), sites[site]
                            accesses.append((tlin, first, is_write, atomic, site, vid, thread))
                            if last != first:
                                accesses.append((tlin, last, is_write, atomic, site, vid, thread))
        self.tally.add(touched)
        for st in states:
            st.phases, st.phase = None, {}
        self.states.extend(states)
        self.progress.block_done()


class _RaceTally:
    """The races of a launch, grouped by (kind, array, pair of lines), added block by block."""

    def __init__(self, griddim):
        self.gx, self.gy = griddim[0], griddim[1]
        self.groups: dict = {}
        self.counts: dict = defaultdict(int)

    def add(self, touched: dict) -> None:
        """``touched``: {(block, phase, root, key): [(thread linear id, position, is_write, is_atomic, site,
        view id, thread), ...]} for the elements some thread wrote in that phase."""
        groups, counts = self.groups, self.counts
        for (block, _epoch, root, key), accesses in touched.items():
            accesses.sort(key=lambda a: (a[0], a[1]))
            block_rank = block[0] + self.gx * (block[1] + self.gy * block[2])
            for (kind, site_a, site_b), (a, b) in _pairs(accesses).items():
                counts[kind] += 1
                gk = (kind, root, site_a, site_b)
                rank = (block_rank, key, a[0], b[0])
                entry = groups.get(gk)
                if entry is None:
                    groups[gk] = [rank, (block, key, a, b), 1]
                else:
                    entry[2] += 1
                    if rank < entry[0]:
                        entry[0], entry[1] = rank, (block, key, a, b)

    def races(self, views: list) -> tuple[list[Race], dict]:
        """The races, one per group, in the report's order (by line, kind, array, first place), and the counts."""
        races = []
        for (kind, _root, site_a, site_b), (rank, (block, key, a, b), count) in self.groups.items():
            view = views[a[5]]
            race = Race(kind, view.name, _index(view, key), block, (a[6], b[6]),
                        (_source_line(site_a), _source_line(site_b)), count)
            races.append((race, (site_a[1], site_b[1], KINDS.index(kind), view.name, rank)))
        races.sort(key=lambda item: item[1])
        return [r for r, _ in races], dict(self.counts)


class _Progress:
    """Says, in one line, when a check will be long; refuses one that would run for more than MAX_RUN_SECONDS.

    After each block the time so far gives the time of the whole launch (the simulator runs the blocks one
    after the other). A projection over :data:`LONG_RUN_SECONDS` prints one line at once (after the first
    block, usually); one over :data:`MAX_RUN_SECONDS` raises ``SimulatorTooSlow``. A block that alone takes
    longer than :data:`LONG_RUN_SECONDS` gets the line from a timer, while it runs.
    """

    def __init__(self, launch: str, blocks: int, recorder: _Recorder):
        self.launch, self.blocks, self.recorder = launch, blocks, recorder
        self.done = 0
        self.said = False
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.timer: threading.Timer | None = None

    def begin(self) -> None:
        self.start = time.perf_counter()
        self.timer = threading.Timer(LONG_RUN_SECONDS, self._still_running)
        self.timer.daemon = True
        self.timer.start()

    def end(self) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def _say(self, text: str) -> None:
        with self.lock:
            if self.said:
                return
            self.said = True
        print(f"{NOTICE_PREFIX} {text}", flush=True)

    def _still_running(self) -> None:
        seconds = time.perf_counter() - self.start
        self._say(f"{self.launch} has run for {seconds:.0f} s under the simulator (block {self.done + 1} of "
                  f"{self.blocks}) and is still running. {_SMALLER}")

    def block_done(self) -> None:
        self.done += 1
        if self.done >= self.blocks:
            return
        seconds = time.perf_counter() - self.start
        projected = seconds / self.done * self.blocks
        done = f"block 1 of {self.blocks} took" if self.done == 1 else f"{self.done} of {self.blocks} blocks took"
        if projected > MAX_RUN_SECONDS:
            self.end()
            raise SimulatorTooSlow(
                f"check_races stopped {self.launch}: {done} {seconds:.1f} s under the simulator, so the whole "
                f"launch would take about {_duration(projected)}, more than the {_duration(MAX_RUN_SECONDS)} a "
                f"check may take. {_SMALLER}")
        if projected > LONG_RUN_SECONDS:
            self._say(f"{self.launch}: {done} {seconds:.1f} s under the simulator, so this check will take about "
                      f"{_duration(projected)}. {_SMALLER}")


_SMALLER = ("A race shows in two or three blocks: a smaller grid on a smaller input (a partial last block "
            "included), or fewer iterations per thread, checks the same code in seconds.")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _affine(keys: np.ndarray, unit: int) -> tuple[int, list[int]]:
    """The element keys of an array (or a view of it) as ``base + sum(index[d] * steps[d])``.

    ``keys`` is a view of the allocation's ``arange(size) * unit`` (``unit`` 1, or the item size for dynamic
    shared memory, whose keys are byte offsets), so a step is the view's stride in elements times ``unit``.
    """
    base = int(keys[(0,) * keys.ndim]) if keys.size else 0
    return base, [stride // keys.itemsize * unit for stride in keys.strides]


class _RecordingArray:
    """A shared array (or a view of one) that records every element access before passing it on.

    Kernels index it as usual (``s[i]``, ``s[i, j] = v``, ``s[i] += v``, ``len(s)``, ``s.shape``);
    a sub-array (``s[i]`` of a 2D array) is again a recording view.
    """

    __slots__ = ("_data", "_keys", "_vid", "_rec", "_ndim", "_base", "_step", "_row")

    def __init__(self, data, keys, vid, rec):
        self._data, self._keys, self._vid, self._rec = data, keys, vid, rec
        # an element's key from its index without NumPy, for the common cases: s[i] of a 1D array, s[i, j] of a 2D one
        self._ndim = data.ndim if data.size else 0
        view = rec.views[vid]
        self._base, steps = _affine(keys, view.itemsize if view.dynamic else 1) if self._ndim else (0, [])
        self._step = steps[0] if self._ndim else 0
        self._row = steps[1] if self._ndim == 2 else 0

    def __getitem__(self, index):
        kind = type(index)
        if kind is int and self._ndim == 1:  # the common cases first, with the key computed here
            if index < 0:
                self._refuse_negative(index, "reads")
            value = self._data[index]  # IndexError past the end
            self._rec.record_one(self._base + index * self._step, 0, self._vid, sys._getframe(1))
            return value
        if kind is tuple and self._ndim == 2 and len(index) == 2:
            i, j = index
            if type(i) is int and type(j) is int:
                if i < 0 or j < 0:
                    self._refuse_negative(index, "reads")
                value = self._data[i, j]
                self._rec.record_one(self._base + i * self._step + j * self._row, 0, self._vid, sys._getframe(1))
                return value
        if kind is _RecordingArray:
            index = index._data
        self._refuse_negative(index, "reads")
        value = self._data[index]
        keys = self._keys[index]
        if isinstance(value, np.ndarray) and value.ndim > 0 and not isinstance(index, (list, np.ndarray)):
            return _RecordingArray(value, keys, self._vid, self._rec)  # a view: accesses are recorded through it
        self._rec.record(keys, 0, self._vid, sys._getframe(1))
        return value

    def __setitem__(self, index, value):
        if type(value) is _RecordingArray:
            value = value._data
        kind = type(index)
        if kind is int and self._ndim == 1:
            if index < 0:
                self._refuse_negative(index, "writes")
            self._data[index] = value
            self._rec.record_one(self._base + index * self._step, 1, self._vid, sys._getframe(1))
            return
        if kind is tuple and self._ndim == 2 and len(index) == 2:
            i, j = index
            if type(i) is int and type(j) is int:
                if i < 0 or j < 0:
                    self._refuse_negative(index, "writes")
                self._data[i, j] = value
                self._rec.record_one(self._base + i * self._step + j * self._row, 1, self._vid, sys._getframe(1))
                return
        self._refuse_negative(index, "writes")
        self._data[index] = value
        self._rec.record(self._keys[index], 1, self._vid, sys._getframe(1))

    def _refuse_negative(self, index, access: str = "touches") -> None:
        """IndexError for a negative index: NumPy (so the simulator) wraps ``s[-1]`` to the last element, while a
        GPU computes the address row-major and reads or writes what lies there. In the first row that is the
        memory before the array; ``sA[ty, tx - 1]`` with ``tx = 0`` in a later row is the previous row's last
        element, a neighbour's (the message says which)."""
        parts = index if isinstance(index, tuple) else (index,)
        if not any(_is_int(p) and p < 0 for p in parts):
            return
        view = self._rec.views[self._vid]
        shown = ", ".join(str(int(p)) if _is_int(p) else ":" for p in parts)
        text = f"negative index into the shared array {view.name}: [{shown}] (shape {self._data.shape})."
        ints = [int(p) for p in parts] if all(_is_int(p) for p in parts) else None
        key = None
        if ints is not None and len(ints) == self._data.ndim and self._keys.size:
            base, steps = _affine(self._keys, view.itemsize if view.dynamic else 1)
            key = base + sum(i * s for i, s in zip(ints, steps))  # what a GPU's address arithmetic gives
        using = "writing" if access == "writes" else "reading"
        guard = (f"guard the access, e.g. `if tx > 0:` before {using} {view.name}[ty, tx - 1]" if len(parts) > 1
                 else f"guard the access, e.g. `if tid > 0:` before {using} s[tid - 1]")
        size = int(np.prod(view.shape)) * (view.itemsize if view.dynamic else 1)
        if key is None or len(parts) == 1 and key < 0:  # the 1D case (and indices it cannot follow)
            raise IndexError(f"{text} On a GPU this {access} the memory before the array (the simulator would "
                             f"silently wrap it to the end): {guard}.")
        whole = self._data.shape == view.shape  # the array itself, not a sub-array (a row) of it
        layout = ""
        if not view.dynamic and whole and len(ints) > 1:  # the address a GPU computes, row-major
            terms = []
            for d, i in enumerate(ints):
                stride = int(np.prod(view.shape[d + 1:]))
                terms.append(f"{i}*{stride}" if stride != 1 else str(i))
            expr = " + ".join(terms).replace("+ -", "- ")
            layout = f" (row-major: offset {expr} = {key})"
        wrapped = ", ".join(str(i % n) for i, n in zip(ints, self._data.shape))
        wrapped = f"{view.name}[{wrapped}]" if whole else f"[{wrapped}] of the sub-array"
        if key < 0:
            raise IndexError(
                f"{text} On a GPU this {access} the memory before the array{layout}: before {view.name}"
                f"[{', '.join('0' * len(view.shape))}] (the simulator would silently wrap it to {wrapped}). Only "
                "in the first row does a negative column index leave the array; in a later row it is the previous "
                f"row's last element, a neighbour's. Either way, {guard}.")
        if key >= size:
            return  # past the end: NumPy raises its own IndexError
        target = _index(view, key)
        element = f"{view.name}[{', '.join(map(str, target))}]"
        what = "another thread's element"
        if whole and len(ints) == 2 and len(view.shape) == 2 and not view.dynamic:
            if target[0] == ints[0] - 1:
                what = ("the last element of the previous row, a neighbour's" if target[1] == view.shape[1] - 1
                        else "an element of the previous row, another thread's")
            else:
                what = "an element of an earlier row, another thread's"
        raise IndexError(
            f"{text} On a GPU this is not the memory before the array: it {access} {element}{layout}, {what} (a race "
            f"with that thread, or a silently wrong value), while the simulator would silently wrap it to {wrapped}. "
            f"Only in the first row would it be the memory before the array. {guard[0].upper()}{guard[1:]}.")

    def __len__(self):
        return len(self._data)

    def __iter__(self) -> Iterator:
        for i in range(len(self._data)):
            yield self[i]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._data, dtype=dtype)

    def __getattr__(self, name):
        return getattr(self._data, name)

    def __repr__(self):
        return f"shared({self._data!r})"


_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*[\w.]*shared\s*\.\s*array\s*\(")


def _array_name(site: tuple[str, int], number: int, shape: tuple[int, ...], dtype: np.dtype) -> str:
    text = linecache.getline(site[0], site[1])
    match = _ASSIGN.match(text)
    return match.group(1) if match else f"shared array #{number} ({dtype}, {' x '.join(map(str, shape))})"


def _make_shared_array(recorder: _Recorder, original):
    """A replacement for the simulator's ``FakeCUDAShared.array`` that hands out recording arrays."""
    from numba.cuda import types  # numba-cuda's typing, absent from the simulator's numba.cuda: used only when recording
    from numba.cuda.np import numpy_support  # numba-cuda's typing, absent from the simulator's numba.cuda: used only when recording

    def array(fake_shared, shape, dtype, alignment=None):  # alignment only matters on a GPU
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        dtype = np.dtype(dtype)
        frame = sys._getframe(1)
        site = recorder.site(frame)[0]
        dynamic = shape == 0 or shape == (0,)
        key = (id(fake_shared), site, frame.f_lasti) if not dynamic else (id(fake_shared), "dynamic", site,
                                                                        frame.f_lasti)
        with recorder.lock:
            found = recorder.allocations.get(key)
            if found is None:
                number = len(recorder.views) + 1
                if dynamic:
                    data = original(fake_shared, 0, dtype)
                    keys = np.arange(data.size, dtype=np.int64) * dtype.itemsize  # byte offsets: views alias
                    root = ("dynamic", id(fake_shared))
                else:
                    data = np.empty(shape, dtype)
                    keys = np.arange(data.size, dtype=np.int64).reshape(data.shape)
                    root = ("static", number)
                view = _View(_array_name(site, number, data.shape, dtype), tuple(data.shape), str(dtype), site,
                             root, dtype.itemsize, dynamic)
                recorder.views.append(view)
                found = _RecordingArray(data, keys, number - 1, recorder)
                view.obj = found
                recorder.allocations[key] = found
        return found

    return array


def _make_syncthreads(recorder: _Recorder, original):
    def syncthreads(thread):
        st = recorder.state(thread)
        if st is None:
            return original(thread)
        site = recorder.site(sys._getframe(1))[0]
        st.site_counts[site] += 1
        st.barriers.append((site, st.site_counts[site]))
        original(thread)
        st.next_phase()

    return syncthreads


def _make_block_run(recorder: _Recorder, original):
    """A replacement for the simulator's ``BlockManager.run`` that hands each finished block to the recorder."""

    def run(manager, grid_point, *args):
        original(manager, grid_point, *args)
        recorder.block_done()

    return run


class _StickyModuleSwap:
    """A replacement for the simulator's ``swapped_cuda_module`` for the duration of one checked launch.

    At every call of a device function the simulator swaps the ``cuda`` global of the function's module for the
    launch's fake module (and back after the call), under a lock and with a scan of that module's globals whenever no
    other call holds it. A kernel and its device functions in one module share the swap the launch holds; a device
    function from another module (the package's, a lab solution's, a kernel rebuilt in the GPU route's simulator
    process) pays for the lock and the scan at every call, and with a few hundred simulated threads contending for
    the lock a check of seconds ran for many minutes (lab 8's naive n-body, 256 threads). Within one launch the fake
    module is the same for every call, so here a module, once swapped, stays swapped until :meth:`release`.
    """

    def __init__(self, original) -> None:
        self._original = original
        self._held: dict = {}  # id of a module's globals -> the original's context, entered
        self._lock = threading.Lock()
        self._nothing = contextlib.nullcontext()

    def __call__(self, fn, fake_cuda_module):
        key = id(fn.__globals__)
        if key not in self._held:
            with self._lock:
                if key not in self._held:
                    context = self._original(fn, fake_cuda_module)
                    context.__enter__()
                    self._held[key] = context
        return self._nothing

    def release(self) -> None:
        """Give every module its own ``cuda`` back (the launch has ended)."""
        for context in reversed(list(self._held.values())):
            context.__exit__(None, None, None)
        self._held.clear()


#: Recorders of the checks now running (at most one: guarded by :data:`patching.LOCK`).
_ACTIVE: list = []


@contextlib.contextmanager
def _instrumented(griddim, blockdim, launch: str = "kernel") -> Iterator[_Recorder]:
    """Swap in the recording shared arrays, barrier and block runner for the duration of one launch; always restore."""
    from numba.cuda.simulator import kernel as sim_kernel  # the simulator's internals: used only under the simulator
    from numba.cuda.simulator import kernelapi  # the simulator's internals: used only under the simulator

    if not patching.LOCK.acquire(blocking=False):  # another thread is inside a check
        raise RuntimeError("check_races is already running (it cannot be nested or run from two threads at once)")
    try:
        if _ACTIVE:
            raise RuntimeError("check_races is already running (it cannot be nested or run from two threads at once)")
        skip = {os.path.abspath(sim_kernel.__file__), os.path.abspath(kernelapi.__file__), sim_kernel.__file__,
                kernelapi.__file__, __file__, os.path.abspath(__file__)}
        recorder = _Recorder(griddim, blockdim, skip, kernelapi.__file__, launch)
        _ACTIVE.append(recorder)
        replacements = [
            (kernelapi.FakeCUDAShared, "array", _make_shared_array(recorder, kernelapi.FakeCUDAShared.array)),
            (sim_kernel.BlockThread, "syncthreads", _make_syncthreads(recorder, sim_kernel.BlockThread.syncthreads)),
            (sim_kernel.BlockManager, "run", _make_block_run(recorder, sim_kernel.BlockManager.run))]
        sticky = None
        if hasattr(sim_kernel, "swapped_cuda_module"):  # numba-cuda 0.22 (Colab) and 0.30 both have it
            sticky = _StickyModuleSwap(sim_kernel.swapped_cuda_module)
            replacements.append((sim_kernel, "swapped_cuda_module", sticky))
        try:
            with patching.patched(*replacements):
                recorder.progress.begin()
                collecting = gc.isenabled()
                gc.disable()  # the entries are acyclic; collecting while millions are made would cost a third more
                try:
                    yield recorder
                finally:
                    if collecting:
                        gc.enable()
                    if sticky is not None:
                        sticky.release()
                    recorder.progress.end()
        finally:
            _ACTIVE.pop()
    finally:
        patching.LOCK.release()


# ------------------------------------------------------------------------------------------------ analysis


def _source_line(site: tuple[str, int]) -> SourceLine:
    return SourceLine(site[0], site[1], linecache.getline(site[0], site[1]).strip())


def _index(view: _View, key: int) -> tuple[int, ...]:
    if view.dynamic:
        return (key // view.itemsize,)
    return tuple(int(i) for i in np.unravel_index(key, view.shape)) if view.shape else (key,)


def _pairs(accesses: list) -> dict:
    """The races among the accesses to one element in one phase: {(kind, site a, site b): (access a, access b)}.

    ``accesses`` are (thread linear id, seq, is_write, is_atomic, site, view id, thread, ...) sorted by
    (thread, seq). Each write ``w``, in that order, is paired with the accesses of the other threads, in that
    order (two atomics do not race): a write at a later position (or the same position, later thread) is a
    WAW with ``w`` first, a read at the same or a later position a RAW, a read at an earlier position a WAR
    (the read first). A key's pair is the first such pair: the lowest thread numbers. Every pair is decided
    without being enumerated: per (read or write, line) group of partners, the threads' largest and smallest
    positions say at once whether ``w`` has a partner of each kind there, and only a key not found yet is then
    looked up in the group, so an element every thread touches costs a pass per write, not a pass per pair.
    """
    found: dict = {}
    groups: dict = {}
    for a in accesses:
        groups.setdefault((a[2], a[4]), []).append(a)
    extremes: dict = {}

    def extreme(group: tuple, plain_only: bool) -> tuple[list, list]:
        """The two threads with the largest last positions and the two with the smallest first positions."""
        key = (group, plain_only)
        if key not in extremes:
            last: dict = {}
            first: dict = {}
            for a in groups[group]:
                if plain_only and a[3]:
                    continue
                t, s = a[0], a[1]
                if t not in last or s > last[t]:
                    last[t] = s
                if t not in first or s < first[t]:
                    first[t] = s
            extremes[key] = (sorted(((s, t) for t, s in last.items()), reverse=True)[:2],
                             sorted((s, t) for t, s in first.items())[:2])
        return extremes[key]

    def other(candidates: list, thread: int):
        return next(((s, t) for s, t in candidates if t != thread), None)

    for w in accesses:
        if not w[2]:
            continue
        tw, sw = w[0], w[1]
        for group, members in groups.items():
            is_write, site = group
            top, bottom = extreme(group, plain_only=w[3])
            if is_write:
                best = other(top, tw)
                key = ("WAW", w[4], site)
                if best is not None and best > (sw, tw) and key not in found:
                    a = next(a for a in members if a[0] != tw and not (w[3] and a[3]) and (a[1], a[0]) > (sw, tw))
                    found[key] = (w, a)
                continue
            best = other(top, tw)
            key = ("RAW", w[4], site)
            if best is not None and best[0] >= sw and key not in found:
                a = next(a for a in members if a[0] != tw and not (w[3] and a[3]) and a[1] >= sw)
                found[key] = (w, a)
            least = other(bottom, tw)
            key = ("WAR", site, w[4])
            if least is not None and least[0] < sw and key not in found:
                a = next(a for a in members if a[0] != tw and not (w[3] and a[3]) and a[1] < sw)
                found[key] = (a, w)
    return found


_CONTEXT_CACHE: dict = {}


def _context(site: tuple[str, int], partial: bool = False) -> str:
    """Where a barrier sits, from the source: ``inside an `if`, line 12: if tid < 16:``; else "".

    For a barrier only part of the block reached (``partial``), also a ``return`` above it in the function.
    """
    path, line = site
    lines = linecache.getlines(path)
    key = (path, hash("".join(lines)))
    if key not in _CONTEXT_CACHE:
        try:
            _CONTEXT_CACHE[key] = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            _CONTEXT_CACHE[key] = None
    tree = _CONTEXT_CACHE[key]
    if tree is None:
        return ""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.lineno <= line <= (n.end_lineno or 0)]
    if not funcs:
        return ""
    func = max(funcs, key=lambda n: n.lineno)
    parts = []
    blocks = [n for n in ast.walk(func) if isinstance(n, (ast.If, ast.For, ast.While))
              and n.lineno < line <= (n.end_lineno or 0)]
    if blocks:
        node = max(blocks, key=lambda n: n.lineno)
        in_else = bool(node.orelse) and line >= node.orelse[0].lineno
        header = linecache.getline(path, node.lineno).strip()
        if isinstance(node, ast.If):
            what = "the `else` of an `if`" if in_else else "an `if`"
        else:
            what = f"a `{type(node).__name__.lower()}` loop"
        parts.append(f"inside {what}, line {node.lineno}: {header}")
    if partial:
        returns = sorted(n.lineno for n in ast.walk(func) if isinstance(n, ast.Return) and n.lineno < line)
        if returns:
            parts.append(f"after the `return` at line {returns[0]}")
    return "; ".join(parts)


def _barrier_problems(recorder: _Recorder, blocks: list, block_threads: int) -> list[BarrierProblem]:
    by_block: dict = defaultdict(list)
    for st in recorder.states:
        by_block[st.block].append(st)
    grouped: dict = {}
    order: list = []
    for block in blocks:
        states = sorted(by_block.get(block, []), key=lambda s: s.tlin)
        arrived = {s.tlin: s for s in states}
        longest = max((len(s.barriers) for s in states), default=0)
        for g in range(longest):
            at: dict = defaultdict(list)
            for s in states:
                if len(s.barriers) > g:
                    at[s.barriers[g]].append(s.thread)
            reached = sum(len(v) for v in at.values())
            if reached == block_threads and len(at) == 1:
                continue
            # the biggest group first (ties: the earliest line), then the others
            groups = sorted(at.items(), key=lambda kv: (-len(kv[1]), kv[0][0][1], kv[0][1]))
            (site, _n), waiting = groups[0]
            if len(groups) == 1:
                kind = "partial"
                missing_ids = [t for t in range(block_threads) if t not in arrived or len(arrived[t].barriers) <= g]
                others = [_thread_of(t, recorder.blockdim) for t in missing_ids]
                lines = (_source_line(site),)
            else:
                kind = "divergent"
                others = [t for _, ts in groups[1:] for t in ts]
                lines = tuple(_source_line(s) for (s, _), _ in groups)
            contexts = tuple(_context((line.file, line.line), partial=kind == "partial") for line in lines)
            problem = BarrierProblem(kind, block, lines, len(waiting), block_threads,
                                     tuple(waiting[:THREADS_NAMED]), tuple(sorted(others)[:THREADS_NAMED]),
                                     contexts)
            key = (kind, tuple((s, n) for (s, n), _ in groups), len(waiting))
            if key in grouped:
                grouped[key][1] += 1
            else:
                grouped[key] = [problem, 1]
                order.append(key)
            break  # later barriers of this block only repeat the consequence
    out = []
    for key in order:
        problem, count = grouped[key]
        out.append(BarrierProblem(**{**problem.__dict__, "count": count}))
    return out


def _thread_of(tlin: int, blockdim) -> tuple[int, int, int]:
    bx, by, _ = blockdim
    return (tlin % bx, (tlin // bx) % by, tlin // (bx * by))


def _run_simulated(target, grid, block, args, shared_bytes: int, max_reported: int) -> RaceReport:
    name = getattr(target.py_func, "__name__", "kernel")
    with _instrumented(grid, block, f"{name}[{grid}, {block}]") as recorder:
        launch = target[grid, block] if not shared_bytes else target[grid, block, 0, shared_bytes]
        try:
            launch(*args)
        except AttributeError as exc:
            missing = re.search(r"'FakeCUDAModule' object has no attribute '(\w+)'", str(exc))
            if not missing:
                raise
            raise GPUOnlyError(
                f"{name} uses cuda.{missing.group(1)}, which Numba's CUDA simulator does not have, and the race "
                "detector needs the simulator. On a GPU, check it with NVIDIA's race checker: compute-sanitizer "
                "--tool racecheck python your_script.py") from None
        if recorder.pending:  # every block is handed over as it ends; this only guards a simulator that changed
            recorder.block_done()
    blocks = sorted(np.ndindex(*grid), key=lambda b: (b[2], b[1], b[0]))
    blocks = [tuple(int(v) for v in b) for b in blocks]
    block_threads = block[0] * block[1] * block[2]
    accesses = recorder.accesses
    problems = _barrier_problems(recorder, blocks, block_threads)
    races, counts = recorder.tally.races(recorder.views)
    arrays = tuple(SharedArray(v.name, v.shape, v.dtype, _source_line(v.site), v.reads, v.writes)
                   for v in recorder.views)
    return RaceReport(name, grid, block, tuple(races[:max_reported]), tuple(problems[:max_reported]),
                      {k: counts[k] for k in KINDS if counts.get(k)}, arrays, accesses, recorder.complete,
                      len(races), len(problems))


# -------------------------------------------------------------------------------------------- public entry


def check_races(kernel: Any, griddim: Any, blockdim: Any, *args: Any, shared_bytes: int = 0,
                max_reported: int = MAX_REPORTED) -> RaceReport:
    """Run ``kernel[griddim, blockdim](*args)`` under the simulator and report shared-memory races and barrier problems.

    Args:
        kernel: a ``@cuda.jit`` kernel (not a device function), not yet configured with ``[grid, block]``.
        griddim, blockdim: the launch, as for ``kernel[griddim, blockdim]`` (an int or 1-3 ints each);
            keep it small (at most :data:`MAX_THREADS_CHECKED` threads in all).
        *args: the kernel's arguments (NumPy arrays, device arrays, scalars).
        shared_bytes: dynamic shared memory per block (the 4th launch parameter), 0 for none.
        max_reported: races (and barrier problems) kept in the report; the counts cover all.

    Returns:
        A :class:`RaceReport`: ``.ok``, ``.races``, ``.barrier_problems``, ``str(report)``,
        ``.raise_for_problems(what)``.

    Raises:
        ArgumentError / LaunchConfigError: ``kernel`` is not a kernel, ``args`` do not fit its parameters (the
            message names them), or the launch is invalid or too big.
        GPUOnlyError: on a GPU, when the kernel cannot be rebuilt for the simulator (the message says
            what to do instead); or the kernel uses warp intrinsics the simulator lacks.
        SimulatorTooSlow: the check would take longer than :data:`MAX_RUN_SECONDS` (judged from its first
            blocks; one that takes longer than :data:`LONG_RUN_SECONDS` prints one line saying so).
        Whatever the kernel raises when it runs (e.g. IndexError for an access out of bounds, or for a negative
        index, saying what a GPU would touch instead).
    """
    target = _dispatcher(kernel)
    grid, block, shared_bytes = _check_launch(griddim, blockdim, shared_bytes)
    max_reported = validate.integer(max_reported, "max_reported", minimum=1, allow_float=False)
    _check_arguments(target, griddim, blockdim, args)
    if backend.is_simulator():
        return _run_simulated(target, grid, block, args, int(shared_bytes), int(max_reported))
    return _run_in_subprocess(target, grid, block, args, int(shared_bytes), int(max_reported))


def _child_serve() -> None:  # pragma: no cover  (runs in the simulator process of the GPU route)
    """What the kept simulator process of :func:`check_races` on a GPU runs (``racecheck_gpu._SimulatorProcess``),
    given this module's detector."""
    child_serve(check_races)
