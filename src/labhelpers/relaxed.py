"""A relaxed simulator for real kernels: a plain load sees only the stores that happen before it.

Numba's CUDA simulator runs blocks one after another, so a block always sees everything the
blocks before it wrote: a missing fence can never show. :func:`relaxed_launch` runs a kernel in the
simulator on a weaker memory, one the PTX memory model allows for plain (weak) accesses: a
plain load of a global array returns the newest store to that element that *happens before*
the load, and otherwise the value the element had when the kernel started. A store happens
before a load when

* the same thread made it (program order), or
* a ``cuda.syncthreads()`` of their block lies between them, or
* the writer fenced (``cuda.threadfence()``) and then wrote an atomic, the reader's atomic
  read that value (or a later read-modify-write of the same element), and the reader fenced
  before the load: the release and acquire patterns of the PTX memory model, cumulative
  (everything the writer had seen travels along). ``cuda.threadfence_block()`` does the
  same only for threads of the writer's own block.

Atomics always act on the element's newest value. At the end of the kernel every element
holds its newest value. A load that misses a store another thread has already executed is a
*stale read*: on a GPU it is a data race, whose result nobody promises.

The simulator's atomics, barrier and fences are replaced through :func:`labhelpers.patching.patched`
(one lock with the other checkers). The litmus model these runs are compared with, which needs no
kernel, is :mod:`labhelpers.models.consistency`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import backend, patching
from .errors import LabError


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
        self.lock = threading.RLock()
        self.stores: list = []       # seq -> (array, key, value, thread object)
        self.by_loc: dict = {}       # (id(array), key) -> [seq, ...]
        self.latest: dict = {}       # (id(array), key) -> newest value (coherence order = execution order)
        self.messages: dict = {}     # (id(array), key) -> [(scope block or None, frozenset of seqs)]
        self.threads: dict = {}      # thread object -> _Thread
        self.block_pool: dict = {}   # block -> set of seqs (the union at the last barrier)
        self.report = RelaxedReport()

    def me(self):
        t = threading.current_thread()
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
            scratch = np.array([self.latest.get(loc, arr.base[key])], dtype=arr.base.dtype)
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

    def __init__(self, base: np.ndarray, name: str, session: _Session):
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


def _replacements(session: _Session) -> list[tuple[Any, str, Callable[..., Any]]]:
    """The simulator's atomics, barrier and fences, rerouted through ``session`` (for :func:`patching.patched`)."""
    from numba.cuda.simulator import kernelapi  # only when used: the simulator is not imported on a GPU

    atomic_cls, module_cls = kernelapi.FakeCUDAAtomic, kernelapi.FakeCUDAModule
    saved = {name: getattr(atomic_cls, name) for name in _ATOMICS + ("compare_and_swap",)}
    original_syncthreads = module_cls.syncthreads

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
        original_syncthreads(self)
        session.barrier_leave()

    return ([(atomic_cls, name, wrap(saved[name])) for name in _ATOMICS]
            + [(atomic_cls, "compare_and_swap", cas_old),
               (module_cls, "syncthreads", syncthreads),
               (module_cls, "threadfence_block", lambda self: session.fence(device=False)),
               (module_cls, "threadfence", lambda self: session.fence(device=True)),
               (module_cls, "threadfence_system", lambda self: session.fence(device=True))])


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
    if not backend.is_simulator():
        raise LabError("relaxed_launch runs kernels in Numba's CUDA simulator on relaxed memory; on a GPU, run "
                       "the kernel itself many times instead (the real memory system is the test)")
    if not callable(getattr(kernel, "__getitem__", None)):
        raise LabError(f"kernel must be a @cuda.jit kernel, got {type(kernel).__name__}")
    names = list(names) if names is not None else [f"arg{k}" for k in range(len(args))]
    if len(names) != len(args):
        raise ValueError(f"names has {len(names)} entries for {len(args)} arguments")
    session = _Session()
    wrapped = [RelaxedArray(a, n, session) if isinstance(a, np.ndarray) and a.ndim > 0 else a
               for a, n in zip(args, names)]
    with patching.patched(*_replacements(session)):
        try:
            kernel[griddim, blockdim](*wrapped)
        finally:
            session.drain([w for w in wrapped if isinstance(w, RelaxedArray)])
    return session.report


__all__ = ["RelaxedArray", "RelaxedReport", "StaleRead", "relaxed_launch"]
