"""Chapter "Beyond one GPU": chapter 9's Jacobi step split across GPUs, with a halo exchange.

The ``ny x nx`` grid is cut into slabs of whole rows, one per *logical GPU*. A logical GPU is an entry of
``devices``, the physical GPU it runs on: ``(0, 1, 2, 3)`` on a four-GPU machine; ``(0, 0, 0)`` is three
logical GPUs on GPU 0, which is how Numba's simulator (one pretend GPU) runs the algorithm, and how one real
GPU tests the code. Slab ``k`` is a ``(h_k + 2) x nx`` array on its GPU: its ``h_k`` rows at local rows
``1 .. h_k``, and two *ghost rows* (local rows ``0`` and ``h_k + 1``) holding copies of the neighbours' edge
rows. After each step the *halo exchange* refreshes the ghosts: slab ``k``'s last row goes to slab
``k+1``'s top ghost, slab ``k+1``'s first row to slab ``k``'s bottom ghost (:func:`halo_plan`).

===========================  ===========================================================================
 piece                        lesson
===========================  ===========================================================================
 ``jacobi_slab``              the 5-point step on some rows of a slab (rows ``first + y * skip``): global
                              borders copied, the ghost rows read as the neighbours' values
 :func:`halo_plan`            the copies one exchange makes, for any split
 :func:`exchange_halos_numpy`  the NumPy specification of one exchange (what lab 14 asks for)
 :class:`SplitJacobi`         ping-pong over the slabs; with ``overlap=True`` each GPU computes its two
                              edge rows first, sends them on a copy stream while the interior is computed
===========================  ===========================================================================

Copies between slabs go through :func:`copy_row`: ``cuMemcpyAsync`` on a GPU (with unified addressing the
driver sees two GPUs' addresses and copies over NVLink or PCIe; peer access is enabled first where the driver
allows it), Numba's ``copy_to_device`` in the simulator. The result equals :func:`~labhelpers.kernels.stencil.
jacobi_reference` bit for bit, for any split: the kernel adds in the same order as chapter 9's kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import cuda, float32

from .. import backend, validate
from ..errors import ArgumentError, ArrayArgumentError
from ..launch import ConfiguredKernel, blocks_for, grid_2d
from .nbody import DEFAULT_EPS2, interaction_precise
from .stencil import BLOCK_2D, QUARTER

#: The CUDA driver's "peer access already enabled" error (enabling twice is fine).
PEER_ALREADY_ENABLED = 704


def gpu_count() -> int:
    """The number of GPUs Numba sees (1 under the simulator, which pretends to have one)."""
    return len(cuda.gpus)


def use_devices(devices: Sequence[int], *, minimum: int = 1) -> tuple[int, ...]:
    """``devices`` checked against this machine: one GPU number per logical GPU (numbers may repeat).

    Raises:
        ArgumentError: not a tuple of whole numbers, or a GPU this machine does not have (the message says
            how many it has, and that ``(0, 0, ...)`` runs logical GPUs on GPU 0).
    """
    return validate.devices(devices, "devices", available=gpu_count(), minimum=minimum)


def split_rows(ny: int, parts: int | Sequence[int]) -> list[tuple[int, int]]:
    """``(first global row, rows)`` of each slab: ``ny`` rows over ``parts`` slabs as evenly as possible,
    or with the row counts ``parts`` gives (which must add up to ``ny``).

    Raises:
        ArgumentError: a slab would get no row, or the counts do not add up to ``ny``.
    """
    ny = validate.integer(ny, "ny", minimum=1)
    if isinstance(parts, (int, np.integer)):
        parts = validate.integer(parts, "parts", minimum=1)
        if parts > ny:
            raise ArgumentError(f"{ny} rows cannot be split over {parts} GPUs: every GPU needs at least one row. "
                                f"Use at most {ny} GPUs, or a grid of at least {parts} rows.")
        counts = [(k + 1) * ny // parts - k * ny // parts for k in range(parts)]
    else:
        counts = [validate.integer(c, f"rows[{k}]", minimum=1) for k, c in enumerate(parts)]
        if not counts:
            raise ArgumentError("rows must give one row count per GPU, e.g. (5, 4); got an empty sequence.")
        if sum(counts) != ny:
            raise ArgumentError(f"rows={tuple(counts)} add up to {sum(counts)}, but the grid has {ny} rows: "
                                f"make them add up to {ny}.")
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    return [(int(f), int(c)) for f, c in zip(firsts, counts)]


@dataclass(frozen=True)
class Halo:
    """One copy of a halo exchange: slab ``src``'s local row ``src_row`` into slab ``dst``'s ghost ``dst_row``."""

    src: int
    src_row: int
    dst: int
    dst_row: int


def halo_plan(rows: Sequence[int]) -> list[Halo]:
    """The copies of one exchange for slabs of ``rows`` rows each (local row 0 and ``h + 1`` are the ghosts).

    Between slabs ``k`` and ``k+1``: ``k``'s last row ``h_k`` into ``k+1``'s ghost 0, and ``k+1``'s first row
    1 into ``k``'s ghost ``h_k + 1``. No copy touches the outer ghosts of the first and the last slab.
    """
    counts = [validate.integer(h, f"rows[{k}]", minimum=1) for k, h in enumerate(rows)]
    plan = []
    for k in range(len(counts) - 1):
        plan.append(Halo(k, counts[k], k + 1, 0))
        plan.append(Halo(k + 1, 1, k, counts[k] + 1))
    return plan


def exchange_halos_numpy(slabs: list[np.ndarray]) -> None:
    """The specification of one exchange, on NumPy slabs (each ``(h + 2) x nx``), in place."""
    for c in halo_plan([s.shape[0] - 2 for s in slabs]):
        slabs[c.dst][c.dst_row] = slabs[c.src][c.src_row]


def split_field(u: np.ndarray, rows: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """``u`` cut into slabs with ghost rows: slab ``k`` holds global rows ``first - 1 .. first + h`` (zeros
    where they fall outside the grid), i.e. its rows and its neighbours' edge rows, as after an exchange."""
    ny, nx = u.shape
    slabs = []
    for first, h in rows:
        slab = np.zeros((h + 2, nx), dtype=np.float32)
        lo, hi = max(first - 1, 0), min(first + h + 1, ny)
        slab[lo - (first - 1):hi - (first - 1)] = u[lo:hi]
        slabs.append(slab)
    return slabs


def join_slabs(slabs: Sequence[np.ndarray]) -> np.ndarray:
    """The grid made of the slabs' own rows (ghost rows left out)."""
    return np.concatenate([np.asarray(s)[1:-1] for s in slabs], axis=0)


@cuda.jit
def jacobi_slab(u, v, row0, ny, first, count, skip):
    """One Jacobi step on ``count`` rows of a slab: local rows ``first``, ``first + skip``, ...

    Local row ``r`` is global row ``row0 + r - 1`` (row 0 is the ghost above). Points on the global grid's
    border are copied (Dirichlet boundary, as in chapter 9); the others average their four neighbours,
    reading the ghost rows for the rows next to another GPU's slab.
    """
    j, y = cuda.grid(2)
    nx = u.shape[1]
    if y < count and j < nx:
        r = first + y * skip
        i = row0 + r - 1  # the global row of local row r
        if i == 0 or j == 0 or i == ny - 1 or j == nx - 1:
            v[r, j] = u[r, j]
        else:
            v[r, j] = QUARTER * ((u[r - 1, j] + u[r + 1, j]) + (u[r, j - 1] + u[r, j + 1]))


def _event() -> Any:
    """A CUDA event for ordering streams (no timing); the simulator's events take no arguments."""
    return cuda.event() if backend.is_simulator() else cuda.event(timing=False)


def _device_pointer(a: Any) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def copy_row(dst: Any, dst_row: int, src: Any, src_row: int, stream: Any) -> None:
    """Queue the copy of row ``src_row`` of ``src`` into row ``dst_row`` of ``dst`` on ``stream``.

    The two arrays may live on different GPUs: on a GPU this is ``cuMemcpyAsync`` (unified addressing lets
    the driver route it over NVLink or PCIe); in the simulator Numba's ``copy_to_device``.
    """
    if backend.is_simulator():
        dst[dst_row].copy_to_device(src[src_row], stream=stream)
        return
    from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

    pitch = int(src.shape[1]) * src.dtype.itemsize
    result = cu.cuMemcpyAsync(_device_pointer(dst) + dst_row * pitch, _device_pointer(src) + src_row * pitch, pitch,
                              int(stream.handle))
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"cuMemcpyAsync of a halo row failed: {err}")


def enable_peer_access(devices: Sequence[int]) -> dict[tuple[int, int], bool]:
    """Let every pair of distinct GPUs of ``devices`` access each other's memory where the driver allows it.

    Returns ``{(a, b): True/False}`` for every ordered pair of distinct GPUs (empty under the simulator and
    for one GPU). Without peer access copies between the GPUs are staged through host memory.
    """
    ids = sorted(set(use_devices(devices)))
    if backend.is_simulator() or len(ids) < 2:
        return {}
    from cuda.bindings import driver as cu  # the CUDA driver's bindings: used only on a GPU

    contexts = {}
    for d in ids:
        with cuda.gpus[d]:
            contexts[d] = cuda.current_context().handle
    access = {}
    for a in ids:
        for b in ids:
            if a == b:
                continue
            err, can = cu.cuDeviceCanAccessPeer(a, b)
            access[(a, b)] = bool(can) and int(err) == 0
            if access[(a, b)]:
                with cuda.gpus[a]:
                    (err,) = cu.cuCtxEnablePeerAccess(contexts[b], 0)
                    if int(err) not in (0, PEER_ALREADY_ENABLED):
                        raise RuntimeError(f"cuCtxEnablePeerAccess from GPU {a} to GPU {b} failed: {err}")
    return access


class SplitJacobi:
    """Chapter 9's Jacobi iteration with the grid's rows split over several (logical) GPUs.

    >>> solver = SplitJacobi(u, devices=(0, 0, 0))        # three slabs; (0, 1, 2, 3) on four GPUs
    >>> solver.step(10); solver.result()                   # equals jacobi_reference(u, 10)

    Args:
        u: the initial field, a 2-D float32 NumPy array without NaN or infinity.
        devices: the GPU of each slab (see the module's docstring); at most one slab per row.
        rows: the rows of each slab (adding up to ``ny``); default: as even as possible.
        block: threads per block (x, y) of the slab kernel.
        overlap: compute each slab's two edge rows first and send them on a copy stream while the
            interior is computed; without it, each slab's whole step, then its sends, on one stream.

    Every GPU gets a compute stream and a copy stream. A step on slab ``k`` waits (CUDA events) for the
    copies into its ghosts made by the previous step's neighbours, and for its own previous sends (they
    read the rows it is about to overwrite two steps later). All buffers are allocated here.
    """

    def __init__(self, u: Any, devices: Sequence[int] = (0, 0), *, rows: Sequence[int] | None = None,
                 block: tuple[int, int] = BLOCK_2D, overlap: bool = True) -> None:
        validate.array(u, "u", dtype=np.float32, ndim=2, finite=True)
        if not isinstance(u, np.ndarray):
            raise ArrayArgumentError("u must be a NumPy array (the split copies each slab to its own GPU): pass "
                                     "u.copy_to_host() or cupy.asnumpy(u).")
        self.devices = use_devices(devices)
        if rows is not None and len(rows) != len(self.devices):
            raise ArgumentError(f"rows gives {len(rows)} slab(s) but devices names {len(self.devices)} GPU(s): "
                                "give one row count per GPU.")
        self.shape = (int(u.shape[0]), int(u.shape[1]))
        self.parts = split_rows(self.shape[0], len(self.devices) if rows is None else rows)
        self.block = validate.block_shape(block)
        self.overlap = bool(overlap)
        self.plan = halo_plan([h for _first, h in self.parts])
        self.steps_done = 0
        self.access = enable_peer_access(self.devices)
        nx = self.shape[1]
        self._a, self._b, self._compute, self._copy, self._launch = [], [], [], [], []
        self._events: list[list] = [[], [], []]  # edges done (per slab), and "sent" for even and odd steps
        self._sent: list | None = None
        for (first, h), d, host in zip(self.parts, self.devices, split_field(u, self.parts)):
            with cuda.gpus[d]:
                self._a.append(cuda.to_device(host))
                self._b.append(cuda.to_device(host))
                self._compute.append(cuda.stream())
                self._copy.append(cuda.stream())
                for events in self._events:
                    events.append(_event())
                s = self._compute[-1]
                kernel = {"whole": ConfiguredKernel(jacobi_slab, grid_2d((h, nx), self.block), self.block, s),
                          "edges": ConfiguredKernel(jacobi_slab, grid_2d((min(h, 2), nx), self.block), self.block, s)}
                if h > 2:
                    kernel["interior"] = ConfiguredKernel(jacobi_slab, grid_2d((h - 2, nx), self.block), self.block,
                                                          s)
                self._launch.append(kernel)

    @property
    def halo_bytes(self) -> int:
        """Bytes one exchange copies between slabs (one row per copy)."""
        return len(self.plan) * 4 * self.shape[1]

    def _launch_slab(self, k: int, part: str) -> None:
        """Launch ``part`` (``whole``, ``edges`` or ``interior``) of slab ``k``'s step on its compute stream."""
        (first, h), s = self.parts[k], self._compute[k]
        args = {"whole": (1, h, 1), "edges": (1, min(h, 2), max(h - 1, 1)), "interior": (2, h - 2, 1)}[part]
        self._launch[k][part](self._a[k], self._b[k], first, self.shape[0], *args)

    def step(self, count: int = 1) -> None:
        """Issue ``count`` steps on every GPU (asynchronous on GPUs), exchanging halos after each."""
        count = validate.integer(count, "count", minimum=0)
        n = len(self.parts)
        for _ in range(count):
            sent = self._events[1 + self.steps_done % 2]  # not the events this step waits for
            for k, d in enumerate(self.devices):
                with cuda.gpus[d]:
                    s, c = self._compute[k], self._copy[k]
                    for j in (k - 1, k, k + 1):  # the ghosts it reads arrived, its own rows were sent
                        if 0 <= j < n and self._sent is not None:
                            self._sent[j].wait(s)
                    h = self.parts[k][1]
                    if self.overlap:
                        self._launch_slab(k, "edges")
                        done = self._events[0][k]
                        done.record(s)
                        done.wait(c)
                        if h > 2:
                            self._launch_slab(k, "interior")
                        out_stream = c
                    else:
                        self._launch_slab(k, "whole")
                        out_stream = s
                    for halo in self.plan:
                        if halo.src == k:
                            copy_row(self._b[halo.dst], halo.dst_row, self._b[k], halo.src_row, out_stream)
                    sent[k].record(out_stream)
            self._sent = sent
            self._a, self._b = self._b, self._a
            self.steps_done += 1

    def synchronize(self) -> None:
        """Wait for every stream of every GPU."""
        for k, d in enumerate(self.devices):
            with cuda.gpus[d]:
                self._compute[k].synchronize()
                self._copy[k].synchronize()

    def slabs(self) -> list[np.ndarray]:
        """Every slab, ghost rows included, copied to the host (after waiting for the GPUs)."""
        self.synchronize()
        out = []
        for k, d in enumerate(self.devices):
            with cuda.gpus[d]:
                out.append(self._a[k].copy_to_host())
        return out

    def result(self) -> np.ndarray:
        """The field after the last step (the slabs' own rows, joined), on the host."""
        return join_slabs(self.slabs())


def run_split_jacobi(u: Any, steps: int = 1, devices: Sequence[int] = (0, 0), *, rows: Sequence[int] | None = None,
                     overlap: bool = True) -> np.ndarray:
    """``steps`` Jacobi steps of ``u`` split over ``devices`` (see :class:`SplitJacobi`); the field, on the host."""
    steps = validate.integer(steps, "steps", minimum=0)
    solver = SplitJacobi(u, devices, rows=rows, overlap=overlap)
    solver.step(steps)
    return solver.result()


@cuda.jit
def nbody_slice(pos, lo, count, eps2, acc):
    """Accelerations of bodies ``lo .. lo + count - 1`` of the AoS ``pos (n, 4)`` against all ``n`` bodies,
    into ``acc[0 : count]``: one GPU's share of chapter 8's naive kernel (IEEE division and square root)."""
    t = cuda.grid(1)
    if t < count:
        i = lo + t
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = float32(0)
        ay = float32(0)
        az = float32(0)
        for j in range(pos.shape[0]):
            fx, fy, fz = interaction_precise(xi, yi, zi, pos[j, 0], pos[j, 1], pos[j, 2], pos[j, 3], eps2)
            ax += fx
            ay += fy
            az += fz
        acc[t, 0] = ax
        acc[t, 1] = ay
        acc[t, 2] = az


def all_gather_copies(buffers: Sequence[Any], parts: Sequence[tuple[int, int]], devices: Sequence[int],
                      streams: Sequence[Any]) -> None:
    """All-gather by copies: rows ``parts[k]`` of ``buffers[k]`` (on GPU ``devices[k]``) into every other buffer.

    What NCCL's all-gather computes, with ``g (g - 1)`` peer copies queued on the source GPUs' streams (the
    chapter's NCCL version is in :mod:`labhelpers.experiments.multi_gpu`).
    """
    for k, (first, count) in enumerate(parts):
        with cuda.gpus[devices[k]]:
            for other in range(len(buffers)):
                if other != k:
                    for r in range(first, first + count):
                        copy_row(buffers[other], r, buffers[k], r, streams[k])


def split_nbody_accelerations(pos: Any, devices: Sequence[int] = (0, 0), eps2: float = DEFAULT_EPS2) -> np.ndarray:
    """Accelerations of every body of the AoS ``pos (n, 4)``, the bodies shared out over ``devices``.

    Each GPU starts with its own share of the bodies (:func:`split_rows`); the positions are all-gathered
    (:func:`all_gather_copies`), as every time step must, then each GPU computes its share's accelerations
    with :func:`nbody_slice` (a GPU missing a position computes wrong ones). Returns the ``(n, 3)`` accelerations on the host.

    Raises:
        ArgumentError: ``pos`` not float32 ``(n, 4)``, more GPUs than bodies, a GPU that does not exist.
    """
    validate.array(pos, "pos", dtype=np.float32, ndim=2, finite=True)
    host = np.asarray(pos)
    if host.shape[1] != 4:
        raise ArrayArgumentError(f"pos must have shape (n, 4) (x, y, z, mass), got {host.shape}.")
    ids = use_devices(devices)
    parts = split_rows(host.shape[0], len(ids))
    eps2 = np.float32(validate.number(eps2, "eps2", minimum=0))
    buffers, accs, streams = [], [], []
    for (first, count), d in zip(parts, ids):
        with cuda.gpus[d]:
            streams.append(cuda.stream())
            mine = np.zeros_like(host)
            mine[first:first + count] = host[first:first + count]  # each GPU starts with its own bodies only
            buffers.append(cuda.to_device(mine))
            accs.append(cuda.device_array((count, 3), dtype=np.float32))
    all_gather_copies(buffers, parts, ids, streams)
    for k, ((first, count), d) in enumerate(zip(parts, ids)):
        with cuda.gpus[d]:
            streams[k].synchronize()
    out = []
    for k, ((first, count), d) in enumerate(zip(parts, ids)):
        with cuda.gpus[d]:
            launch = ConfiguredKernel(nbody_slice, blocks_for(count, 128), 128, streams[k])
            launch(buffers[k], first, count, eps2, accs[k])
            out.append(accs[k].copy_to_host(stream=streams[k]))
            streams[k].synchronize()
    return np.concatenate(out, axis=0)


# ------------------------------------------------------------------------------------------------ CuPy, two GPUs
# What the chapter shows of the multi-GPU API itself: a peer copy, a wait across GPUs, an NCCL collective. Each
# runs on GPUs 0 and 1 through CuPy and checks its result; where fewer than two GPUs are present (the simulator,
# one GPU) it returns one sentence saying what it would do, the same on every such machine.

#: How each demonstration says it cannot run here (``{what}`` is what it would have done).
NEEDS_TWO_GPUS = "Needs 2 GPUs (and CuPy), so not run here: on a machine with two or more it would {what}."


def two_gpus_here() -> bool:
    """Whether the demonstrations can run: a real GPU (not the simulator), CuPy, and at least two GPUs."""
    if backend.is_simulator() or not backend.cupy_usable():
        return False
    import cupy as cp  # the GPU extra: only reached where CuPy runs

    return cp.cuda.runtime.getDeviceCount() >= 2


def enable_peer(cp: Any, device: int, peer: int) -> bool:
    """Let ``device`` read and write ``peer``'s memory directly (``cudaDeviceEnablePeerAccess``) where the driver
    allows it; True if it does. Without it, copies between the two are staged through host memory."""
    if not cp.cuda.runtime.deviceCanAccessPeer(device, peer):
        return False
    with cp.cuda.Device(device):
        try:
            cp.cuda.runtime.deviceEnablePeerAccess(peer)
        except cp.cuda.runtime.CUDARuntimeError as err:  # enabled by an earlier call: fine
            if "already" not in str(err).lower():
                raise
    return True


def peer_halo_exchange(nx: int = 4096) -> str:
    """One halo exchange between two GPUs by peer copies, checked: GPU 0 owns rows 1-4 of its slab, GPU 1 rows 1-4
    of its own; GPU 0's last row goes to GPU 1's top ghost, GPU 1's first row to GPU 0's bottom ghost, each
    copy queued on the sending GPU's stream with ``cudaMemcpyPeerAsync``. Returns what happened, or
    :data:`NEEDS_TWO_GPUS`'s sentence where it cannot run."""
    nx = validate.integer(nx, "nx", minimum=1)
    if not two_gpus_here():
        return NEEDS_TWO_GPUS.format(what="copy each GPU's edge row into the other's ghost row by peer copy")
    import cupy as cp  # the GPU extra: only reached where two GPUs and CuPy are present

    peer = enable_peer(cp, 0, 1) and enable_peer(cp, 1, 0)
    slabs, streams = [], []
    for d in (0, 1):
        with cp.cuda.Device(d):
            streams.append(cp.cuda.Stream(non_blocking=True))
            with streams[d]:  # filled on the stream the copies use: ordered before them
                slabs.append(cp.arange(6 * nx, dtype=cp.float32).reshape(6, nx) + 1000 * d)
    for s in streams:  # both slabs exist before either GPU writes into the other's ghost row
        s.synchronize()
    row = 4 * nx  # bytes of one float32 row
    with cp.cuda.Device(0):  # GPU 0's last own row (4) -> GPU 1's top ghost (0)
        cp.cuda.runtime.memcpyPeerAsync(slabs[1][0].data.ptr, 1, slabs[0][4].data.ptr, 0, row, streams[0].ptr)
    with cp.cuda.Device(1):  # GPU 1's first own row (1) -> GPU 0's bottom ghost (5)
        cp.cuda.runtime.memcpyPeerAsync(slabs[0][5].data.ptr, 0, slabs[1][1].data.ptr, 1, row, streams[1].ptr)
    for s in streams:
        s.synchronize()
    a, b = cp.asnumpy(slabs[0]), cp.asnumpy(slabs[1])
    ok = np.array_equal(b[0], a[4]) and np.array_equal(a[5], b[1])
    return (f"halo exchange by peer copy: both ghost rows {'correct' if ok else 'WRONG'} "
            f"({'direct peer access' if peer else 'no peer access: staged through the host'}).")


def cross_device_wait(n: int = 2**22) -> str:
    """A wait across GPUs, checked: GPU 0 computes a row on its stream and records an event there; GPU 1's stream
    waits for that event (``stream.wait_event``: the GPU waits, the host does not) before it pulls the row by
    peer copy and adds it to its own. Returns what happened, or :data:`NEEDS_TWO_GPUS`'s sentence."""
    n = validate.integer(n, "n", minimum=1)
    if not two_gpus_here():
        return NEEDS_TWO_GPUS.format(what="make GPU 1's stream wait for an event recorded on GPU 0's stream")
    import cupy as cp  # the GPU extra: only reached where two GPUs and CuPy are present

    enable_peer(cp, 1, 0)
    with cp.cuda.Device(0):
        s0, ready = cp.cuda.Stream(non_blocking=True), cp.cuda.Event(disable_timing=True)
        with s0:
            edge = cp.ones(n, dtype=cp.float32)
            for _ in range(20):  # enough work that GPU 1 would read too early without the wait
                edge = edge + 1
        ready.record(s0)  # "GPU 0's row is written"
    with cp.cuda.Device(1):
        s1 = cp.cuda.Stream(non_blocking=True)
        with s1:
            ghost = cp.zeros(n, dtype=cp.float32)
            s1.wait_event(ready)  # GPU 1's stream waits for GPU 0's event; the host goes on issuing
            cp.cuda.runtime.memcpyPeerAsync(ghost.data.ptr, 1, edge.data.ptr, 0, 4 * n, s1.ptr)
            total = ghost + 1
        s1.synchronize()
        ok = bool((total == 22).all())
    return f"cross-device wait: GPU 1 read GPU 0's finished row ({'correct' if ok else 'WRONG'})."


def nccl_all_reduce(count: int = 2**20) -> str:
    """An NCCL all-reduce and all-gather on GPUs 0 and 1 from one host thread, checked: one communicator per GPU
    (``NcclCommunicator.initAll``), each GPU's call inside ``groupStart()``/``groupEnd()`` (one thread drives both
    GPUs, so NCCL must see both calls before it waits for either). ``count`` is NCCL's: the elements of the
    all-reduce's buffer, and the elements each GPU *sends* to the all-gather (which receives ``2 count``).
    Returns what happened, or :data:`NEEDS_TWO_GPUS`'s sentence."""
    count = validate.integer(count, "count", minimum=1)
    if not two_gpus_here():
        return NEEDS_TWO_GPUS.format(what="sum a buffer over both GPUs with NCCL's all-reduce, then all-gather it")
    import cupy as cp  # the GPU extra: only reached where two GPUs and CuPy are present
    from cupy.cuda import nccl  # CuPy's NCCL bindings: only reached where two GPUs are present

    devices = [0, 1]
    comms = nccl.NcclCommunicator.initAll(devices)
    send, summed, gathered, streams = [], [], [], []
    for d in devices:
        with cp.cuda.Device(d):
            streams.append(cp.cuda.Stream(non_blocking=True))
            with streams[d]:
                send.append(cp.full(count, d + 1, dtype=cp.float32))
                summed.append(cp.empty(count, dtype=cp.float32))
                gathered.append(cp.empty(2 * count, dtype=cp.float32))
    nccl.groupStart()
    for d, comm in enumerate(comms):
        comm.allReduce(send[d].data.ptr, summed[d].data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, streams[d].ptr)
    nccl.groupEnd()
    nccl.groupStart()
    for d, comm in enumerate(comms):
        comm.allGather(send[d].data.ptr, gathered[d].data.ptr, count, nccl.NCCL_FLOAT32, streams[d].ptr)
    nccl.groupEnd()
    for s in streams:
        s.synchronize()
    order = np.repeat(np.float32([1, 2]), count)
    ok = all(np.all(cp.asnumpy(summed[d]) == 3) and np.array_equal(cp.asnumpy(gathered[d]), order) for d in devices)
    return f"NCCL all-reduce and all-gather on 2 GPUs: {'correct' if ok else 'WRONG'} on both."


__all__ = ["NEEDS_TWO_GPUS", "Halo", "SplitJacobi", "all_gather_copies", "copy_row", "enable_peer_access", "exchange_halos_numpy", "gpu_count",
           "halo_plan", "jacobi_slab", "join_slabs", "nbody_slice", "run_split_jacobi",
           "split_nbody_accelerations", "split_field", "split_rows", "use_devices", "cross_device_wait", "enable_peer",
           "nccl_all_reduce", "peer_halo_exchange", "two_gpus_here"]
