"""Record what host code asks of the GPU: every copy, launch, allocation and synchronisation, and its stream.

``with streamrecord.record() as rec: pipeline(...)`` runs the code with Numba's host API instrumented
(through :func:`labhelpers.patching.patched`): ``cuda.to_device``, ``copy_to_device`` and ``copy_to_host``
of device arrays, ``kernel[grid, block, stream](...)`` launches, ``cuda.stream()`` and the default streams,
``cuda.synchronize()``, ``stream.synchronize()`` (and ``stream.auto_synchronize()``), ``event.synchronize()``,
``event.record(stream)`` and ``event.wait(stream)``, and the allocations (``cuda.device_array``,
``cuda.pinned_array``...). Each becomes a :class:`Call` that says which stream it
went to, which host buffer it copied and whether that buffer is page-locked, which device memory it
touched, and the line of the user's code that made it (also inside a helper function). Checkers then
judge the behaviour, not the source text: :meth:`Recording.problems`, and :meth:`Recording.unwaited` (work still
queued when the function returned, which only a GPU would show as a half-written result).

It works the same on both backends. Under the simulator, where streams do nothing and
``cuda.pinned_array`` returns ordinary NumPy memory, the recording remembers the memory of every
pinned allocation made while it runs, so a pageable copy of a pinned buffer is still pageable; on a
GPU the driver is asked (:func:`labhelpers.kernels.streams.is_page_locked`).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

import numba
import numpy as np
from numba import cuda

from . import backend
from .patching import patched
from .kernels.streams import is_page_locked

#: Kinds of :class:`Call`.
WORK = ("h2d", "d2h", "d2d", "launch")
WAITS = ("sync", "alloc")
#: Kinds that order streams without making the host wait: ``event.record(stream)``, ``event.wait(stream)``.
EVENTS = ("record", "wait")

_NUMBA_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (numba, cuda))
_THIS = os.path.abspath(__file__)


@dataclass(frozen=True)
class Site:
    """Where a call was made: the function, its file, the line and the line's text."""

    function: str
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"`{self.text}` (line {self.line} of {self.function})" if self.text else f"{self.function}"


@dataclass(frozen=True)
class Call:
    """One call of the host API, as recorded.

    Attributes:
        kind: ``h2d``, ``d2h``, ``d2d`` (copies), ``launch``, ``sync`` (waits for the GPU), ``alloc``, ``record``
            (an event recorded on ``stream``), ``wait`` (``stream`` waits for an event, the host does not).
        api: what was called, e.g. ``copy_to_device``, ``cuda.synchronize()``, ``kernel launch``.
        stream: the stream it was queued on (None for calls that take none).
        default_stream: True when that is a default stream (no ``stream=``, ``0``, ``cuda.default_stream()``).
        host_pinned: for a copy, whether its host buffer is page-locked (None when no host buffer).
        spans: the device memory it touched, ``(start, end)`` addresses.
        site: the user's line that made the call.
        event: the event of ``event.synchronize()``, ``record`` and ``wait`` (None otherwise).
    """

    kind: str
    api: str
    stream: Any
    default_stream: bool
    host_pinned: bool | None
    spans: tuple[tuple[int, int], ...]
    site: Site
    event: Any = None


@dataclass
class Recording:
    """The calls of one recorded run, in order, and the streams it created."""

    calls: list[Call] = field(default_factory=list)
    streams: list[Any] = field(default_factory=list)
    defaults: list[Any] = field(default_factory=list)
    pinned: list[np.ndarray] = field(default_factory=list)

    # -- what the run used ------------------------------------------------------------------------
    def is_pinned(self, a: Any) -> bool:
        """Is the host array ``a`` page-locked? (GPU: the driver; simulator: a pinned allocation of this run.)"""
        if not isinstance(a, np.ndarray):
            return False
        if not backend.is_simulator():
            return is_page_locked(a)
        start = a.__array_interface__["data"][0]
        for p in self.pinned:
            lo = p.__array_interface__["data"][0]
            if lo <= start < lo + max(p.nbytes, 1):
                return True
        return False

    def is_default(self, stream: Any) -> bool:
        """True for no stream (``0``, ``None``) or a default stream."""
        if stream is None or (isinstance(stream, (int, np.integer)) and not isinstance(stream, bool)):
            return True
        if any(stream is d for d in self.defaults):
            return True
        if not backend.is_simulator():
            handle = getattr(stream, "handle", None)
            value = getattr(handle, "value", handle)
            try:
                return int(value or 0) in (0, 1, 2)  # CU_STREAM_LEGACY = 1, CU_STREAM_PER_THREAD = 2
            except (TypeError, ValueError):
                return False
        return False

    def work(self) -> list[Call]:
        """The copies and launches, in order."""
        return [c for c in self.calls if c.kind in WORK]

    def used_streams(self) -> list[Any]:
        """The distinct non-default streams the copies and launches went to."""
        found: list = []
        for c in self.work():
            if not c.default_stream and not any(c.stream is s for s in found):
                found.append(c.stream)
        return found

    # -- judging ------------------------------------------------------------------------------------
    def problems(self, what: str = "your pipeline", top: str | None = None) -> list[str]:
        """What keeps the copies and kernels from overlapping, one sentence per problem (empty when none).

        * a copy or a launch on a default stream (no ``stream=``, ``kernel[grid, block]`` without a stream);
        * a copy from or to pageable host memory;
        * a synchronisation or an allocation between the first and the last copy or launch (the issue loop),
          also inside a helper function;
        * a kernel on another stream than the copy that filled its input, or a copy back on another stream
          than the kernel that wrote it (nothing orders the two).

        ``top`` is the name of the user's function, so that calls made in a helper say so.
        """
        out: list[str] = []

        def where(site: Site) -> str:
            helper = f" (in the helper function {site.function}, called from {top})" if top and \
                site.function != top else ""
            return f"{site}{helper}"

        work = self.work()
        for c in work:
            if c.default_stream:
                if c.kind == "launch":
                    out.append(f"{where(c.site)} launches the kernel on the legacy default stream: it waits for "
                               "every other stream and they wait for it. Give the launch the chunk's stream: "
                               "kernel[blocks, threads, s](...)")
                else:
                    out.append(f"{where(c.site)} copies without stream= ({c.api} on the legacy default stream): "
                               "a synchronous copy, nothing overlaps it. Pass stream=s")
            if c.host_pinned is False:
                out.append(f"{where(c.site)} copies {'from' if c.kind == 'h2d' else 'to'} pageable host memory: "
                           "the driver stages it through a pinned buffer and the copy does not run asynchronously. "
                           "Use buffers from cuda.pinned_array (a NumPy copy of a pinned array is pageable again)")
        if work:
            first, last = self.calls.index(work[0]), self.calls.index(work[-1])
            for c in self.calls[first + 1:last]:
                if c.kind in WAITS:
                    why = ("waits for the GPU" if c.kind == "sync" else
                           "allocates memory, which may synchronise the device")
                    out.append(f"{where(c.site)}: {c.api} {why} between the chunks' copies and kernels (a hidden "
                               "synchronisation). Allocate before the loop and wait once, after it")
        out += self._cross_stream(where)
        return list(dict.fromkeys(out))

    def unordered(self) -> bool:
        """Whether a kernel or a copy back runs on another stream than the work it depends on, with nothing
        ordering the two (one of :meth:`problems`): on a GPU a race whose values are wrong by chance, under the
        simulator never."""
        return bool(self._cross_stream(str))

    def unwaited(self) -> list[Call]:
        """The last copy or kernel of every stream that no host wait covered when the recording ended.

        A function that returns (or reads its result) before waiting for its streams hands back a buffer the GPU
        may still be writing; under the simulator every stream has finished at once, so only the recording shows
        it. Covered means: ``cuda.synchronize()`` after it; ``s.synchronize()`` of its stream after it; or
        ``event.synchronize()`` of an event recorded after it on its stream (or on a stream that waited, with
        ``event.wait(stream)``, for an event recorded after it), or recorded on the legacy default stream, which
        waits for every other stream. Work on a default stream (a synchronous copy) is left out: :meth:`problems`
        reports it.
        """
        last: dict[int, tuple[int, Call]] = {}  # stream id: (position, call) of its last copy or launch
        reach: dict[int, dict[int, int]] = {}  # stream id: {stream id: position} its queue waits for
        events: dict[int, dict[int, int]] = {}  # event id: {stream id: position} done when the event fires
        done: dict[int, int] = {}  # stream id: position up to which the host has waited

        def merge(into: dict[int, int], more: dict[int, int]) -> None:
            for sid, pos in more.items():
                into[sid] = max(into.get(sid, -1), pos)

        def everything() -> dict[int, int]:
            return {sid: pos for sid, (pos, _c) in last.items()}

        for pos, c in enumerate(self.calls):
            if c.kind in WORK and not c.default_stream:
                sid = id(c.stream)
                last[sid] = (pos, c)
                reach.setdefault(sid, {})[sid] = pos
            elif c.kind == "record":
                events[id(c.event)] = everything() if self.is_default(c.stream) else dict(reach.get(id(c.stream), {}))
            elif c.kind == "wait" and not self.is_default(c.stream):
                merge(reach.setdefault(id(c.stream), {}), events.get(id(c.event), {}))
            elif c.kind == "sync":
                if c.event is not None:
                    merge(done, events.get(id(c.event), {}))
                elif c.stream is None or self.is_default(c.stream):
                    merge(done, everything() if c.stream is None else {})
                else:
                    merge(done, reach.get(id(c.stream), {}))
        return [c for sid, (pos, c) in last.items() if done.get(sid, -1) < pos]

    def _cross_stream(self, where) -> list[str]:
        """Dependent copies and launches on different streams with no wait between them."""
        out = []
        last_writer: list[tuple[tuple[int, int], Call]] = []
        for c in self.calls:
            if c.kind == "sync":
                last_writer = []
                continue
            if c.kind not in WORK or c.default_stream:
                continue
            for span, writer in reversed(last_writer):
                if any(_overlap(span, s) for s in c.spans) and writer.stream is not c.stream and \
                        c.kind in ("launch", "d2h"):
                    what = ("the kernel runs on another stream than the copy that fills its input" if c.kind ==
                            "launch" else "the copy back runs on another stream than the kernel that wrote it")
                    out.append(f"{where(c.site)}: {what} ({where(writer.site)}), and nothing orders the two "
                               "streams. Queue a chunk's copy in, kernel and copy out on the same stream")
                    break
            if c.kind in ("h2d", "launch", "d2d"):
                last_writer += [(s, c) for s in c.spans]
        return out


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _site() -> Site:
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename == _THIS
                                 or os.path.abspath(frame.f_code.co_filename).startswith(_NUMBA_DIRS)):
        frame = frame.f_back
    if frame is None:
        return Site("?", "?", 0, "")
    code = frame.f_code
    return Site(code.co_name, code.co_filename, frame.f_lineno,
                linecache.getline(code.co_filename, frame.f_lineno).strip())


def _device_span(a: Any) -> tuple[tuple[int, int], ...]:
    """The device memory of a device array (simulator: its NumPy buffer), or () for anything else."""
    data = getattr(a, "_ary", None)
    if isinstance(data, np.ndarray) and not isinstance(a, np.ndarray):
        start = data.__array_interface__["data"][0]
        return ((start, start + max(data.nbytes, 1)),)
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None and not isinstance(a, np.ndarray):
        start = iface["data"][0]
        return ((start, start + max(int(getattr(a, "nbytes", 1)), 1)),)
    return ()


def _classes() -> dict[str, Any]:
    """Numba's classes to instrument on this backend."""
    if backend.is_simulator():
        from numba.cuda.simulator import api as sim_api  # the simulator's internals: used only under the simulator
        from numba.cuda.simulator.cudadrv import devicearray as sim_da  # the simulator's internals: used only under the simulator
        from numba.cuda.simulator.kernel import FakeCUDAKernel  # the simulator's internals: used only under the simulator

        return {"array": sim_da.FakeCUDAArray, "stream": sim_api.stream, "event": sim_api.Event,
                "kernel": FakeCUDAKernel}
    from numba.cuda.cudadrv import devicearray, driver  # the GPU driver's internals: used only on a GPU
    from numba.cuda.dispatcher import CUDADispatcher  # the GPU driver's internals: used only on a GPU

    return {"array": devicearray.DeviceNDArrayBase, "stream": driver.Stream, "event": driver.Event,
            "kernel": CUDADispatcher}


class _RecordingLaunch:
    """``kernel[grid, block, stream]``: records the launch when it is called, then launches."""

    def __init__(self, launcher: Any, stream: Any, rec: Recording) -> None:
        self._launcher, self._stream, self._rec = launcher, stream, rec

    def __call__(self, *args: Any) -> Any:
        rec = self._rec
        spans = tuple(s for a in args for s in _device_span(a))
        rec.calls.append(Call("launch", "kernel launch", self._stream, rec.is_default(self._stream), None, spans,
                              _site()))
        return self._launcher(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._launcher, name)


@contextlib.contextmanager
def record() -> Iterator[Recording]:
    """Record every copy, launch, allocation and synchronisation made while the block runs (both backends)."""
    rec = Recording()
    cls = _classes()
    array_cls, stream_cls, event_cls, kernel_cls = cls["array"], cls["stream"], cls["event"], cls["kernel"]
    allocators = [n for n in ("device_array", "device_array_like", "pinned_array", "pinned_array_like",
                              "mapped_array", "mapped_array_like") if hasattr(cuda, n)]  # the simulator lacks some
    orig = {name: getattr(cuda, name) for name in
            ["to_device", "synchronize", "stream", "default_stream", "legacy_default_stream",
             "per_thread_default_stream"] + allocators}
    copy_to_device, copy_to_host = array_cls.copy_to_device, array_cls.copy_to_host
    stream_sync, event_sync, getitem = stream_cls.synchronize, event_cls.synchronize, kernel_cls.__getitem__
    event_record, event_wait = event_cls.record, event_cls.wait

    def add(kind, api, stream=None, host=None, spans=(), event=None):
        pinned = None if host is None else rec.is_pinned(host)
        default = rec.is_default(stream) if kind in WORK else False
        rec.calls.append(Call(kind, api, stream, default, pinned, tuple(spans), _site(), event))

    def to_device(ary, stream=0, copy=True, to=None):
        add("alloc", "cuda.to_device(...)")
        out = orig["to_device"](ary, stream=stream, copy=copy, to=to)
        if copy:
            add("h2d", "cuda.to_device", stream, ary if isinstance(ary, np.ndarray) else None, _device_span(out))
        return out

    def allocator(name, kind="alloc"):
        def alloc(*args, **kwargs):
            add(kind, f"cuda.{name}(...)")
            out = orig[name](*args, **kwargs)
            if "pinned" in name or "mapped" in name:
                rec.pinned.append(out)
            return out
        return alloc

    def synchronize():
        add("sync", "cuda.synchronize()")
        return orig["synchronize"]()

    def new_stream(*args, **kwargs):
        s = orig["stream"](*args, **kwargs)
        rec.streams.append(s)
        return s

    def default(name):
        def get(*args, **kwargs):
            s = orig[name](*args, **kwargs)
            rec.defaults.append(s)
            return s
        return get

    def rec_copy_to_device(self, ary, stream=0):
        host = ary if isinstance(ary, np.ndarray) else None
        spans = _device_span(self) + (() if host is not None else _device_span(ary))
        add("h2d" if host is not None else "d2d", "copy_to_device", stream, host, spans)
        return copy_to_device(self, ary, stream=stream)

    def rec_copy_to_host(self, ary=None, stream=0):
        if ary is None:
            add("alloc", "copy_to_host() without an output array (a new pageable array)")
        add("d2h", "copy_to_host", stream, ary if ary is not None else np.empty(0), _device_span(self))
        return copy_to_host(self, ary, stream=stream)

    def rec_stream_sync(self):
        add("sync", "stream.synchronize()", stream=self)
        return stream_sync(self)

    @contextlib.contextmanager
    def rec_auto_sync(self):  # the GPU's waits for the stream on exit; the simulator's does nothing: the same here
        yield self
        self.synchronize()

    def rec_event_sync(self):
        add("sync", "event.synchronize()", event=self)
        return event_sync(self)

    def rec_event_record(self, stream=0):
        add("record", "event.record()", stream, event=self)
        return event_record(self, stream=stream)

    def rec_event_wait(self, stream=0):
        add("wait", "event.wait()", stream, event=self)
        return event_wait(self, stream=stream)

    def rec_getitem(self, configuration):
        launcher = getitem(self, configuration)
        stream = configuration[2] if isinstance(configuration, tuple) and len(configuration) >= 3 else 0
        return _RecordingLaunch(launcher, stream, rec)

    replacements = [(cuda, "to_device", to_device), (cuda, "synchronize", synchronize), (cuda, "stream", new_stream)]
    replacements += [(cuda, n, allocator(n)) for n in allocators]
    replacements += [(cuda, n, default(n)) for n in ("default_stream", "legacy_default_stream",
                                                     "per_thread_default_stream")]
    replacements += [(array_cls, "copy_to_device", rec_copy_to_device), (array_cls, "copy_to_host", rec_copy_to_host),
                     (stream_cls, "synchronize", rec_stream_sync), (stream_cls, "auto_synchronize", rec_auto_sync),
                     (event_cls, "synchronize", rec_event_sync), (event_cls, "record", rec_event_record),
                     (event_cls, "wait", rec_event_wait),
                     (kernel_cls, "__getitem__", rec_getitem)]
    with patched(*replacements):
        yield rec


__all__ = ["Call", "Recording", "Site", "record"]
