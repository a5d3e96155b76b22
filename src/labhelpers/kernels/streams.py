"""Chapter "Streams and the host-device link": the kernel, the chunked pipeline, NumPy references.

=================================  ==========================================================================
 name                               lesson
=================================  ==========================================================================
 ``fma_chain``                      the job's kernel: ``iters`` dependent FMAs per element, so its time can be
                                    tuned to match the copies (SAXPY's one FMA per 12 bytes is all copy)
 ``fill``                           writes a constant: first touch of managed memory on the device
 ``StreamPipeline``                 pinned host buffers, device buffers, ``streams`` streams; ``issue()``
                                    queues H2D, kernel and D2H of ``chunks`` chunks in depth-first or
                                    breadth-first order, optionally with CUDA events around every operation;
                                    its copies go through Numba (``issue_api="numba"``) or straight to the
                                    driver (``"driver"``: a few microseconds of host time instead of 20-100)
 ``run_pipeline``                   the checked host wrapper: any ``n``, any number of chunks
 ``reversed_d2h_pipeline``          PITFALL: the D2H copy with its arguments reversed (the output stays unwritten)
 ``LaunchChain``                    many small dependent launches, issued one by one or captured once into a
                                    CUDA graph (CuPy's stream capture, Numba launching on the CuPy stream)
 ``run_producer_consumer``          two streams ordered by an event: ``event.record(s1)``, ``event.wait(s2)``
=================================  ==========================================================================

The pipeline keeps one device slice per chunk (the device buffers hold the whole job): with buffers
reused per stream, breadth-first issue would overwrite chunk ``c``'s input with chunk ``c + s``'s before
chunk ``c``'s kernel has read it (stream order puts the second copy before the first kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from .. import backend, validate
from ..errors import ArgumentError, GPUOnlyError
from ..launch import blocks_for
from ..models.streams import OPS, ORDERS, chunk_bounds, issue_order

#: The FMA's multiplier and addend: ``v = A * v + B`` has the fixed point 1 and shrinks ``v - 1`` by
#: ``A`` per step (float32 constants: Python floats would make the kernel compute in float64).
A = np.float32(1.0 - 2.0**-12)
B = np.float32(2.0**-12)
#: Threads per block of the pipeline's kernel.
THREADS = 256
#: Iterations of ``fma_chain`` under the simulator (on a GPU the experiments calibrate it to the copies).
SIM_ITERS = 8
#: How :class:`StreamPipeline` issues its copies: Numba's ``copy_to_device``/``copy_to_host``, or the CUDA
#: driver's ``cuMemcpyHtoDAsync``/``cuMemcpyDtoHAsync`` called directly (GPU only).
ISSUE_APIS = ("numba", "driver")


@cuda.jit
def fma_chain(x, out, a, b, iters):
    """``out[i] = f(f(...f(x[i])))`` with ``f(v) = a * v + b`` applied ``iters`` times.

    One load and one store per element and ``iters`` dependent fused multiply-adds in between: the
    number of iterations sets the kernel's time without changing the bytes it moves, so the chapter
    can make the kernel as long as the copies (or longer, or shorter).
    """
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        for _ in range(iters):
            v = a * v + b
        out[i] = v


@cuda.jit
def fill(x, value):
    """``x[:] = value`` on the device (the first touch of a managed array, when the GPU makes it)."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] = value


def fma_chain_reference(x, iters: int, a: float = A, b: float = B) -> np.ndarray:
    """NumPy specification of :func:`fma_chain`, in float32 like the kernel.

    On a GPU each step is one fused multiply-add (one rounding instead of two), so the results agree
    to a relative error of about ``iters * 6e-8``, not bit for bit.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    iters = validate.integer(iters, "iters", minimum=0)
    v = np.array(x, dtype=np.float32, copy=True)
    a, b = np.float32(a), np.float32(b)
    for _ in range(iters):
        v = a * v + b
    return v


def fma_chain_closed_form(x, iters: int, a: float = float(A), b: float = float(B)) -> np.ndarray:
    """The exact value in float64: ``a**iters * (x - f) + f`` with the fixed point ``f = b / (1 - a)``."""
    iters = validate.integer(iters, "iters", minimum=0)
    x = np.asarray(x, dtype=np.float64)
    f = b / (1.0 - a)
    return a**iters * (x - f) + f


def tolerance(iters: int) -> float:
    """Relative tolerance for comparing :func:`fma_chain` on a GPU with the float32 reference."""
    return 1e-6 + 2e-7 * validate.integer(iters, "iters", minimum=0)


def pipeline_bytes(n: int) -> dict:
    """Bytes each stage moves for ``n`` float32 elements: H2D and D2H over the link, the kernel in device memory."""
    n = validate.integer(n, "n", minimum=1)
    return {"H2D": 4 * n, "kernel": 8 * n, "D2H": 4 * n}


@dataclass
class StreamPipeline:
    """The chunked pipeline ``h_out = fma_chain(h_in)`` on ``streams`` streams, its buffers allocated once.

    ``h_in`` and ``h_out`` are pinned (page-locked) host arrays: only those let a copy run
    asynchronously (a pageable one is staged by the driver and the call returns when the copy is done).
    Allocation happens here, before the timed loop: allocating device or pinned memory synchronises
    the whole device. Chunk ``c`` runs on stream ``c % streams``. ``issue_api="numba"`` queues the
    copies with Numba's ``copy_to_device``/``copy_to_host`` (what the chapter shows); ``"driver"`` (GPU
    only) with :func:`copy_async`, the driver's own call on addresses worked out once in
    :meth:`configure`: the same copies, for a few microseconds of host time each instead of 20-100.

    >>> p = StreamPipeline(n, chunks=8, streams=4, iters=100)
    >>> p.h_in[:] = x
    >>> p.issue("depth-first"); p.synchronize()
    >>> p.h_out          # the result
    """

    n: int
    chunks: int = 1
    streams: int = 1
    iters: int = SIM_ITERS
    threads: int = THREADS
    pinned: bool = True
    issue_api: str = "numba"
    h_in: Any = field(init=False, repr=False)
    h_out: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.n = validate.integer(self.n, "n", minimum=1)
        self.chunks = validate.integer(self.chunks, "chunks", minimum=1)
        self.streams = validate.integer(self.streams, "streams", minimum=1, maximum=256)
        self.iters = validate.integer(self.iters, "iters", minimum=0)
        self.threads = validate.threads_per_block(self.threads)
        self.issue_api = validate.choice(self.issue_api, "issue_api", ISSUE_APIS)
        if self.issue_api == "driver":
            backend.require_gpu("issue_api='driver'",
                                because="calls the CUDA driver, which the simulator does not have",
                                instead="Use issue_api='numba' there.")
        if self.pinned:
            self.h_in = cuda.pinned_array(self.n, dtype=np.float32)
            self.h_out = cuda.pinned_array(self.n, dtype=np.float32)
        else:
            self.h_in = np.empty(self.n, dtype=np.float32)
            self.h_out = np.empty(self.n, dtype=np.float32)
        self.h_out[:] = np.nan  # an element the pipeline forgets stays NaN
        self.d_in = cuda.device_array(self.n, dtype=np.float32)
        self.d_out = cuda.device_array(self.n, dtype=np.float32)
        self.stream_objects: list = []
        self.configure(self.chunks, self.streams)

    def configure(self, chunks: int, streams: int) -> None:
        """Cut the job into ``chunks`` chunks on ``streams`` streams, keeping the buffers (created streams are reused)."""
        self.chunks = validate.integer(chunks, "chunks", minimum=1)
        self.streams = validate.integer(streams, "streams", minimum=1, maximum=256)
        self.bounds = chunk_bounds(self.n, self.chunks)
        while len(self.stream_objects) < self.streams:
            self.stream_objects.append(cuda.stream())
        # each chunk's views of the four buffers, made once (slicing costs host time in the issue loop)
        self.views = [(self.h_in[lo:hi], self.d_in[lo:hi], self.d_out[lo:hi], self.h_out[lo:hi])
                      for lo, hi in self.bounds]
        if self.issue_api == "driver":  # addresses and byte counts for the driver's calls, also made once
            self.pointers = [(_host_address(h_in), _device_address(d_in), _device_address(d_out),
                              _host_address(h_out), 4 * h_in.size) for h_in, d_in, d_out, h_out in self.views]

    def stream_of(self, chunk: int):
        """The stream chunk ``chunk`` runs on."""
        return self.stream_objects[chunk % self.streams]

    def _op(self, chunk: int, op: str) -> None:
        h_in, d_in, d_out, h_out = self.views[chunk]
        s = self.stream_of(chunk)
        if self.issue_api == "driver" and op != "kernel":
            _driver_copy(op, self.pointers[chunk], s)
        elif op == "H2D":
            d_in.copy_to_device(h_in, stream=s)  # asynchronous: h_in is pinned
        elif op == "kernel":
            blocks = -(-d_in.size // self.threads)  # ceiling division: the chunk's tail gets a thread too
            fma_chain[blocks, self.threads, s](d_in, d_out, A, B, self.iters)
        else:
            d_out.copy_to_host(h_out, stream=s)  # device -> host: the destination is the argument

    def issue(self, order: str = "depth-first", *, events: bool = False) -> list[tuple] | None:
        """Queue every chunk's H2D, kernel and D2H on its stream, in ``order``; returns at once (pinned buffers).

        With ``events=True`` (GPU only) a CUDA event is recorded on the operation's stream just before
        and just after it, and the list of ``(chunk, stream, op, start_event, end_event)`` is returned
        (read the times with :meth:`timeline` after synchronising).
        """
        validate.choice(order, "order", ORDERS)
        recorded = [] if events else None
        if events and backend.is_simulator():
            raise GPUOnlyError("the simulator has no real streams or events (its operations run one after the "
                               "other, on the CPU): the chapter shows the model's timeline and reference data.")
        for chunk, op in issue_order(self.chunks, order):
            if events:
                s = self.stream_of(chunk)
                start, end = cuda.event(), cuda.event()
                start.record(stream=s)
                self._op(chunk, op)
                end.record(stream=s)
                recorded.append((chunk, chunk % self.streams, op, start, end))
            else:
                self._op(chunk, op)
        return recorded

    def synchronize(self) -> None:
        """Wait for every stream of the pipeline."""
        for s in self.stream_objects:
            s.synchronize()

    def run(self, x, order: str = "depth-first") -> np.ndarray:
        """Copy ``x`` into the pinned input, run the pipeline, wait, and return a copy of the output."""
        validate.array(x, "x", dtype=np.float32, ndim=1, shape=(self.n,))
        self.h_in[:] = x
        self.h_out[:] = np.nan
        self.issue(order)
        self.synchronize()
        return np.array(self.h_out)


def _host_address(a) -> int:
    return int(a.ctypes.data)


def _device_address(d) -> int:
    return int(d.__cuda_array_interface__["data"][0])


def copy_async(direction: str, dst: int, src: int, nbytes: int, stream) -> None:
    """Queue a copy on ``stream`` with the CUDA driver itself: ``cuMemcpyHtoDAsync(dst, src, nbytes, stream)``
    for ``"H2D"``, ``cuMemcpyDtoHAsync`` for ``"D2H"`` (addresses as integers; GPU only).

    The same copy as Numba's ``d.copy_to_device(h, stream=s)``, without Numba's checks around it: the host
    spends a few microseconds per call instead of 20-100 (measured in the chapter), which matters once a
    pipeline has many chunks. Nothing checks the addresses: a wrong one is an illegal-address error.
    """
    validate.choice(direction, "direction", ("H2D", "D2H"))
    nbytes = validate.integer(nbytes, "nbytes", minimum=1)
    if backend.is_simulator():
        raise GPUOnlyError("copy_async calls the CUDA driver, which the simulator does not have.")
    from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

    call = cu.cuMemcpyHtoDAsync if direction == "H2D" else cu.cuMemcpyDtoHAsync
    result = call(int(dst), int(src), int(nbytes), int(stream.handle))
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"{call.__name__} failed: {err}")


def _driver_copy(op: str, pointers: tuple, stream) -> None:
    """One chunk's copy of the pipeline by :func:`copy_async`."""
    h_in, d_in, d_out, h_out, nbytes = pointers
    if op == "H2D":
        copy_async("H2D", d_in, h_in, nbytes, stream)
    else:
        copy_async("D2H", h_out, d_out, nbytes, stream)


def run_pipeline(x, chunks: int = 4, streams: int = 2, order: str = "depth-first", iters: int = SIM_ITERS,
                 threads: int = THREADS) -> np.ndarray:
    """``fma_chain`` of ``x`` computed by the chunked pipeline: any length, any number of chunks up to ``x.size``.

    Raises:
        ArgumentError: ``x`` not a 1-D float32 array, NaN in ``x``, more chunks than elements, a bad order.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1, finite=True)
    if x.size == 0:
        raise ArgumentError("x is empty: the pipeline needs at least one element.")
    validate.choice(order, "order", ORDERS)
    pipe = StreamPipeline(x.size, chunks, streams, iters, threads)
    return pipe.run(np.asarray(x), order)


def reversed_d2h_pipeline(x, chunks: int = 4, streams: int = 2, iters: int = SIM_ITERS) -> np.ndarray:
    """PITFALL (the lecture's second stream's copy back): the D2H copy written with its arguments reversed.

    ``cudaMemcpyAsync(d_C0, h_C + i, ...)`` names the device buffer as the destination: in Numba the
    same slip is ``d_out.copy_to_device(h_out)`` where ``d_out.copy_to_host(h_out)`` was meant. The copy
    runs, the wrong way: the (NaN-filled) host output overwrites the device result and is never written.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1, finite=True)
    pipe = StreamPipeline(x.size, chunks, streams, iters)
    pipe.h_in[:] = x
    pipe.h_out[:] = np.nan
    for chunk, op in issue_order(chunks, "depth-first"):
        _h_in, _d_in, d_out, h_out = pipe.views[chunk]
        if op == "D2H":
            d_out.copy_to_device(h_out, stream=pipe.stream_of(chunk))  # BUG: copies host -> device
        else:
            pipe._op(chunk, op)
    pipe.synchronize()
    return np.array(pipe.h_out)


__all__ = ["A", "B", "ISSUE_APIS", "OPS", "SIM_ITERS", "StreamPipeline", "THREADS", "copy_async", "fill",
           "fma_chain", "fma_chain_closed_form", "fma_chain_reference", "pipeline_bytes", "reversed_d2h_pipeline",
           "run_pipeline", "tolerance"]


def pipeline_with_hidden_syncs(x, chunks: int = 4, streams: int = 2, iters: int = SIM_ITERS) -> np.ndarray:
    """PITFALL: a pipeline that computes the right answer and overlaps nothing. Three hidden synchronisations:

    1. the host output is an ordinary (pageable) NumPy array, so every D2H copy is staged by the driver
       and returns only when it is done: the host cannot issue the next chunk meanwhile;
    2. device buffers are allocated inside the loop: allocating device memory may synchronise the device;
    3. a ``cuda.synchronize()`` left in the loop (from debugging) waits for every stream after each chunk.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1, finite=True)
    n = x.size
    h_in = cuda.pinned_array(n, dtype=np.float32)
    h_out = np.empty(n, dtype=np.float32)  # hidden sync 1: pageable
    h_in[:] = x
    pool = [cuda.stream() for _ in range(streams)]
    for c in range(chunks):
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        s = pool[c % streams]
        d_in = cuda.device_array(hi - lo, dtype=np.float32)  # hidden sync 2: allocation in the loop
        d_out = cuda.device_array(hi - lo, dtype=np.float32)
        d_in.copy_to_device(h_in[lo:hi], stream=s)
        fma_chain[-(-(hi - lo) // THREADS), THREADS, s](d_in, d_out, A, B, iters)
        d_out.copy_to_host(h_out[lo:hi], stream=s)
        cuda.synchronize()  # hidden sync 3: waits for every stream after every chunk
    return h_out


def is_page_locked(a) -> bool:
    """True when the host array ``a`` (or the array it is a view of) lives in page-locked (pinned) memory. GPU only.

    Raises:
        GPUOnlyError: under the simulator, where ``cuda.pinned_array`` returns an ordinary NumPy array.
    """
    validate.array(a, "a", contiguous=False)
    backend.require_gpu("is_page_locked", because="asks the driver about page-locked memory, which the simulator "
                        "does not have (cuda.pinned_array returns an ordinary NumPy array there)",
                        instead="Whether a buffer is pinned can only be asked on a GPU.")
    from numba.cuda.cudadrv.driver import PinnedMemory  # the GPU driver's internals: used only on a GPU

    obj, seen = a, 0
    while obj is not None and seen < 32:  # a view's base is its array, whose base is the pinned allocation
        if isinstance(obj, PinnedMemory):
            return True
        obj = getattr(obj, "base", None) if not isinstance(obj, memoryview) else obj.obj
        seen += 1
    try:  # memory pinned some other way (cuda.pinned(...), cudaHostRegister): the driver knows its flags
        from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

        err, _flags = cu.cuMemHostGetFlags(int(a.ctypes.data))
        return int(err) == 0
    except Exception:
        return False


__all__ += ["is_page_locked", "pipeline_with_hidden_syncs"]


# ============================================================================================ CUDA Graphs

#: Threads per block of :class:`LaunchChain`'s small kernels.
CHAIN_THREADS = 128


@dataclass(frozen=True)
class PlannedLaunch:
    """One launch of a :class:`LaunchChain`: the kernel's name, its grid and block, and its place in the chain."""

    index: int
    kernel: str
    blocks: int
    threads: int


@dataclass
class LaunchChain:
    """``launches`` small dependent kernels on one device array: ``x = fma_chain(x, 1 FMA)``, again and again.

    The work of a solver's time step or a network's layers in miniature: every kernel is microseconds long,
    so the host's cost of issuing each launch (tens of microseconds through Numba) decides the time, not the
    GPU. :meth:`plan` lists the launches (the same on both backends); :meth:`issue` launches them one by one
    on a Numba stream; :meth:`capture` (GPU only, CuPy) records the same launches once into a CUDA graph,
    which ``graph.launch(stream)`` then replays with one call of the host.

    >>> chain = LaunchChain(n=4096, launches=100)
    >>> chain.load(x); chain.issue(s); s.synchronize(); chain.result()   # op by op
    >>> graph = chain.capture(cupy_stream); graph.launch(cupy_stream)    # the same work as one graph
    """

    n: int
    launches: int
    threads: int = CHAIN_THREADS

    def __post_init__(self) -> None:
        self.n = validate.integer(self.n, "n", minimum=1)
        self.launches = validate.integer(self.launches, "launches", minimum=1, maximum=100_000)
        self.threads = validate.threads_per_block(self.threads)
        self.blocks = blocks_for(self.n, self.threads)
        self.d = cuda.to_device(np.zeros(self.n, dtype=np.float32))
        self._configured: dict[int, Any] = {}

    def plan(self) -> list[PlannedLaunch]:
        """The launches :meth:`issue` makes and :meth:`capture` records, in order (no GPU needed)."""
        return [PlannedLaunch(i, "fma_chain", self.blocks, self.threads) for i in range(self.launches)]

    def load(self, x) -> None:
        """Copy ``x`` (float32, ``n`` elements) into the chain's device array."""
        validate.array(x, "x", dtype=np.float32, ndim=1, shape=(self.n,))
        self.d.copy_to_device(np.ascontiguousarray(x))

    def result(self) -> np.ndarray:
        """The device array, copied to the host (waits for the work queued before it on the default stream)."""
        return self.d.copy_to_host()

    def _kernel_on(self, stream) -> Any:
        if backend.is_simulator():  # the simulator configures the kernel object itself: configure at every call
            return fma_chain[self.blocks, self.threads, stream]
        key = id(stream)
        if key not in self._configured:  # configured once per stream: less Python per launch
            self._configured[key] = (stream, fma_chain[self.blocks, self.threads, stream])
        return self._configured[key][1]

    def issue(self, stream=0) -> None:
        """Launch every kernel of :meth:`plan` on ``stream`` (a Numba stream), one call of the host each."""
        launch = self._kernel_on(stream)
        for _ in self.plan():
            launch(self.d, self.d, A, B, 1)

    def capture(self, cupy_stream) -> Any:
        """Record :meth:`issue`'s launches on ``cupy_stream`` into a CUDA graph: ``cupy.cuda.graph.Graph``. GPU only.

        The kernel is compiled and launched once before the capture (a capture records launches; compiling
        and loading a module inside one fails on older drivers), then Numba launches on the CuPy stream through
        ``cuda.external_stream(cupy_stream.ptr)`` while CuPy captures it. Launching the graph adds
        ``launches`` FMAs to the array, like :meth:`issue`.
        """
        backend.require_gpu("LaunchChain.capture", because="records a CUDA graph on a GPU stream",
                            instead="The chapter shows the model and the reference table instead.",
                            needs_cupy=True)
        if getattr(cupy_stream, "ptr", 0) == 0:
            raise ArgumentError("capture needs a CuPy stream of its own (cupy.cuda.Stream(non_blocking=True)): the "
                                "legacy default stream cannot be captured")
        numba_stream = cuda.external_stream(cupy_stream.ptr)
        warm = fma_chain[self.blocks, self.threads, numba_stream]
        scratch = cuda.device_array(self.n, dtype=np.float32)
        warm(scratch, scratch, A, B, 0)  # compiles and loads the kernel outside the capture
        cupy_stream.synchronize()
        cupy_stream.begin_capture()
        try:
            self.issue(numba_stream)
        finally:
            graph = cupy_stream.end_capture()
        return graph

    def expected(self, x, times: int = 1) -> np.ndarray:
        """What the array holds after ``times`` runs of the chain on ``x`` (float64 closed form)."""
        times = validate.integer(times, "times", minimum=0)
        return fma_chain_closed_form(x, times * self.launches)


def run_chain(x, launches: int = 8, threads: int = CHAIN_THREADS) -> np.ndarray:
    """The checked wrapper: ``launches`` small kernels on ``x``, issued one by one on a stream; returns NumPy."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    chain = LaunchChain(x.size, launches, threads)
    chain.load(x)
    s = cuda.stream()
    chain.issue(s)
    s.synchronize()
    return chain.result()


__all__ += ["CHAIN_THREADS", "LaunchChain", "PlannedLaunch", "run_chain"]


# ============================================================================================ events between streams


def run_producer_consumer(x, iters: int = SIM_ITERS, *, wait: bool = True, threads: int = THREADS) -> np.ndarray:
    """A producer on one stream, a consumer on another, ordered by an event; returns the consumer's output.

    Stream ``s1`` runs ``y = fma_chain(x, iters)`` and records ``done`` after it; stream ``s2`` waits for
    ``done`` (``done.wait(stream=s2)``: the GPU waits, the host does not) and copies ``y`` into ``out``
    (``fma_chain`` with 0 iterations). With ``wait=False`` nothing orders the two streams: on a GPU the
    consumer may read ``y`` before the producer wrote it and ``out`` keeps the NaN it started with. The
    simulator runs every launch to its end before the next, so there the result is right either way.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    iters = validate.integer(iters, "iters", minimum=0)
    threads = validate.threads_per_block(threads)
    if x.size == 0:
        raise ArgumentError("x is empty: pass at least one value")
    blocks = blocks_for(x.size, threads)
    s1, s2 = cuda.stream(), cuda.stream()
    d_x = cuda.to_device(x)
    y = cuda.to_device(np.full(x.size, np.nan, dtype=np.float32))
    out = cuda.to_device(np.full(x.size, np.nan, dtype=np.float32))
    cuda.synchronize()  # the copies above ran on the default stream: done before either stream starts
    done = cuda.event()
    fma_chain[blocks, threads, s1](d_x, y, A, B, iters)  # the producer
    done.record(stream=s1)
    if wait:
        done.wait(stream=s2)  # s2's later work starts only once s1 reached the event
    fma_chain[blocks, threads, s2](y, out, A, B, 0)  # the consumer: a copy of y
    s2.synchronize()
    s1.synchronize()
    return out.copy_to_host()


__all__ += ["run_producer_consumer"]
