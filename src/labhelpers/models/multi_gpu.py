"""Chapter "Beyond one GPU": models of collectives and of a stencil split across GPUs (no GPU, no kernels).

* **Bus bandwidth** as nccl-tests computes it (its ``doc/PERFORMANCE.md``): the algorithm bandwidth is
  ``algbw = S / t`` for the test's size ``S`` (the buffer of an all-reduce or a broadcast, the whole *output*
  of an all-gather), and ``busbw = algbw * factor(n)`` with the factor of :data:`BUS_FACTORS`: ``2(n-1)/n``
  for all-reduce, ``(n-1)/n`` for all-gather and reduce-scatter, 1 for broadcast and reduce. The factor makes
  the number comparable with the speed of one link: a ring all-reduce moves ``2(n-1)/n * S`` bytes over
  every rank's busiest link, so its busbw tends to the link's rate.
* **Collective times** (:func:`collective_time`), the alpha-beta model of a ring (``steps`` hops of
  ``alpha`` each, every rank sending ``factor * S`` bytes at ``link_gbs``) and of a tree (NCCL's double binary
  tree for all-reduce: ``2 ceil(log2 n)`` hops, ``2 S`` bytes over the busiest link: worse bandwidth, fewer hops).
* **A stencil split across GPUs** (:class:`HaloMachine`, :func:`jacobi_step_time`, :func:`scaling_table`):
  each of ``g`` GPUs updates ``ny / g`` rows and sends one row to each neighbour per step; with the
  exchange overlapped, a step costs ``max(interior, edges + halo)``, and one host thread issuing every
  GPU's work adds ``g`` issue costs that no GPU can hide. The halo is the busiest GPU's sends, one after the
  other on its copy stream as :class:`~labhelpers.kernels.multi_gpu.SplitJacobi` issues them: one on 2 GPUs,
  two (up and down) from a middle GPU on 3 or more (:func:`halo_sends`). Strong scaling (fixed grid) and weak scaling
  (fixed rows per GPU) are read off the same formula.
* **Data-parallel n-body** (:func:`nbody_step_time`): every GPU computes ``n / g`` bodies against all ``n``
  and then all-gathers the positions.

Every rate is an argument: a chapter passes rates measured on a GPU (or cited), never invented ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from .. import validate
from ..errors import ArgumentError

#: nccl-tests' bus-bandwidth factors, by collective, as functions of the number of ranks ``n``.
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
COLLECTIVES = tuple(BUS_FACTORS)
ALGORITHMS = ("ring", "tree")
#: Bytes of one float32.
FLOAT_BYTES = 4
#: Bytes one Jacobi point moves per step (read once, written once, float32), as chapter 9 counts.
JACOBI_BYTES_PER_POINT = 8
#: Bytes of one body's position and mass (float32 x, y, z, m), what an n-body all-gather moves per body.
BODY_BYTES = 16


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth for ``collective`` on ``n`` ranks."""
    validate.choice(collective, "collective", COLLECTIVES)
    n = validate.integer(n, "n", minimum=1)
    return float(BUS_FACTORS[collective](n))


def algbw_gbs(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s: ``nbytes / seconds / 1e9`` (nccl-tests' ``algbw``; its size ``S``)."""
    nbytes = validate.number(nbytes, "nbytes", minimum=0)
    return nbytes / _positive(seconds, "seconds") / 1e9


def _positive(value: float, name: str) -> float:
    value = validate.number(value, name)
    if value <= 0:
        raise ArgumentError(f"{name} must be greater than 0, got {value}: a time of zero is no measurement.")
    return value


def busbw_gbs(collective: str, nbytes: float, seconds: float, n: int) -> float:
    """Bus bandwidth in GB/s: :func:`algbw_gbs` times :func:`bus_factor` (what nccl-tests prints as ``busbw``)."""
    return algbw_gbs(nbytes, seconds) * bus_factor(collective, n)


def collective_time(collective: str, nbytes: float, n: int, *, link_gbs: float, latency_us: float,
                    algorithm: str = "ring") -> float:
    """Seconds for ``collective`` of size ``nbytes`` (nccl-tests' ``S``) on ``n`` ranks: the alpha-beta model.

    ``ring``: every rank sends ``bus_factor * S`` bytes over one link of ``link_gbs`` (GB/s, one direction),
    in ``2(n-1)`` hops for all-reduce and ``n-1`` for the others, each hop costing ``latency_us``.
    ``tree`` (all-reduce only, NCCL's double binary tree): ``2 ceil(log2 n)`` hops (up the tree and down
    again) and ``2 S`` bytes over the busiest link, so its bus bandwidth tends to about half a ring's while
    its latency grows with ``log2 n`` instead of ``n``. One rank costs nothing (no data moves).
    """
    validate.choice(collective, "collective", COLLECTIVES)
    validate.choice(algorithm, "algorithm", ALGORITHMS)
    nbytes = validate.number(nbytes, "nbytes", minimum=0)
    n = validate.integer(n, "n", minimum=1)
    link = _positive(link_gbs, "link_gbs") * 1e9
    alpha = validate.number(latency_us, "latency_us", minimum=0) * 1e-6
    if n == 1:
        return 0.0
    if algorithm == "tree":
        if collective != "all_reduce":
            raise ArgumentError(f"the tree model is NCCL's all-reduce tree; collective={collective!r} uses "
                                "algorithm='ring'.")
        return 2 * math.ceil(math.log2(n)) * alpha + 2 * nbytes / link
    hops = 2 * (n - 1) if collective == "all_reduce" else n - 1
    return hops * alpha + bus_factor(collective, n) * nbytes / link


def collective_table(collective: str, sizes: Sequence[int], n: int, *, link_gbs: float, latency_us: float,
                     algorithms: Sequence[str] = ("ring",)) -> pd.DataFrame:
    """The model over message sizes: ``algorithm``, ``nbytes``, ``time_us``, ``algbw_gbs``, ``busbw_gbs``."""
    rows = []
    for algorithm in algorithms:
        for s in sizes:
            s = validate.integer(s, "sizes[...]", minimum=1)
            t = collective_time(collective, s, n, link_gbs=link_gbs, latency_us=latency_us, algorithm=algorithm)
            algbw = s / t / 1e9 if t > 0 else float("nan")
            rows.append({"collective": collective, "algorithm": algorithm, "n": n, "nbytes": s, "time_us": t * 1e6,
                         "algbw_gbs": algbw, "busbw_gbs": algbw * bus_factor(collective, n)})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class HaloMachine:
    """The rates of the halo-exchange model, each measured (or cited) by the chapter.

    Attributes:
        mem_gbs: the rate one GPU's Jacobi step reaches, bytes read + written per second / 1e9.
        link_gbs: one peer copy's rate between neighbouring GPUs, one direction.
        latency_us: the fixed cost of one halo copy (the copy engine's start and the link's latency).
        issue_us: host time to issue one GPU's step (kernel launches, copies, event waits) from Python.
    """

    mem_gbs: float
    link_gbs: float
    latency_us: float = 10.0
    issue_us: float = 0.0

    def __post_init__(self) -> None:
        _positive(self.mem_gbs, "mem_gbs")
        _positive(self.link_gbs, "link_gbs")
        validate.number(self.latency_us, "latency_us", minimum=0)
        validate.number(self.issue_us, "issue_us", minimum=0)


def slab_rows(ny: int, gpus: int) -> int:
    """Rows of the largest slab when ``ny`` rows are split as evenly as possible over ``gpus`` GPUs."""
    ny = validate.integer(ny, "ny", minimum=1)
    gpus = validate.integer(gpus, "gpus", minimum=1)
    return -(-ny // gpus)  # not launch geometry: the busiest GPU's share of an even split


def halo_sends(gpus: int) -> int:
    """Rows the busiest GPU sends per step: 0 on one GPU, 1 on two, 2 (up and down) from a middle GPU on more."""
    gpus = validate.integer(gpus, "gpus", minimum=1)
    return min(gpus - 1, 2)


def jacobi_step_time(ny: int, nx: int, gpus: int, machine: HaloMachine, *, overlap: bool = True) -> dict:
    """Seconds of one split Jacobi step of an ``ny x nx`` grid on ``gpus`` GPUs, and its parts.

    ``compute``: the largest slab's rows at ``mem_gbs``; ``edges``: its two boundary rows; ``halo``: the
    busiest GPU's sends (:func:`halo_sends`), one after the other on its copy stream, each ``latency_us`` plus
    one row (``4 nx`` bytes) at ``link_gbs`` (a neighbour's rows arrive on the neighbour's stream meanwhile:
    the link is full duplex);
    ``issue``: ``gpus * issue_us`` (one host thread issues every GPU's step). With ``overlap`` the edges go
    first and their rows travel while the interior runs: ``step = max(issue, max(compute, edges + halo))``;
    without it ``max(issue, compute + halo)``.
    """
    nx = validate.integer(nx, "nx", minimum=1)
    rows = slab_rows(ny, gpus)
    if rows < 1:
        raise ArgumentError(f"ny={ny} rows cannot be split over {gpus} GPUs")
    compute = JACOBI_BYTES_PER_POINT * rows * nx / (machine.mem_gbs * 1e9)
    edges = JACOBI_BYTES_PER_POINT * min(rows, 2) * nx / (machine.mem_gbs * 1e9)
    halo = halo_sends(gpus) * (machine.latency_us * 1e-6 + FLOAT_BYTES * nx / (machine.link_gbs * 1e9))
    issue = gpus * machine.issue_us * 1e-6
    busy = max(compute, edges + halo) if overlap else compute + halo
    return {"compute": compute, "edges": edges, "halo": halo, "issue": issue, "step": max(issue, busy)}


def scaling_table(ny: int, nx: int, gpus: Sequence[int], machine: HaloMachine, *, mode: str = "strong",
                  overlap: bool = True) -> pd.DataFrame:
    """Strong or weak scaling of the split Jacobi step, as the model predicts.

    ``strong``: the grid ``ny x nx`` split over ``g`` GPUs; ``weak``: ``ny`` rows *per GPU* (a grid of
    ``g * ny`` rows). Columns: ``gpus``, ``ny`` (the whole grid's rows), ``step_ms``, ``speedup`` (one GPU's
    step over this one, times ``g`` for weak scaling: work per second relative to one GPU), ``efficiency``
    (speedup / g), ``halo_ms``, ``compute_ms``, ``issue_ms``, ``mode``.
    """
    validate.choice(mode, "mode", ("strong", "weak"))
    counts = [validate.integer(g, "gpus[...]", minimum=1) for g in gpus]
    base = jacobi_step_time(ny, nx, 1, machine, overlap=overlap)["step"]
    rows = []
    for g in counts:
        total = ny * g if mode == "weak" else ny
        t = jacobi_step_time(total, nx, g, machine, overlap=overlap)
        speedup = base / t["step"] * (g if mode == "weak" else 1)
        rows.append({"mode": mode, "gpus": g, "ny": total, "nx": nx, "step_ms": t["step"] * 1e3,
                     "speedup": speedup, "efficiency": speedup / g, "compute_ms": t["compute"] * 1e3,
                     "halo_ms": t["halo"] * 1e3, "issue_ms": t["issue"] * 1e3})
    return pd.DataFrame(rows)


def nbody_step_time(n: int, gpus: int, *, interactions_per_s: float, link_gbs: float, latency_us: float) -> dict:
    """Seconds of one data-parallel n-body step: ``n / g`` bodies against ``n`` each, then an all-gather.

    ``compute = n * ceil(n / g) / interactions_per_s`` (the busiest GPU's bodies, split as rows are:
    :func:`slab_rows`); ``gather``: a ring all-gather of ``16 n`` bytes
    (:func:`collective_time`); they do not overlap (the next step needs every position).
    """
    n = validate.integer(n, "n", minimum=1)
    g = validate.integer(gpus, "gpus", minimum=1)
    rate = _positive(interactions_per_s, "interactions_per_s")
    compute = n * slab_rows(n, g) / rate
    gather = collective_time("all_gather", BODY_BYTES * n, g, link_gbs=link_gbs, latency_us=latency_us)
    return {"compute": compute, "gather": gather, "step": compute + gather}


__all__ = ["ALGORITHMS", "BODY_BYTES", "BUS_FACTORS", "COLLECTIVES", "FLOAT_BYTES", "HaloMachine",
           "JACOBI_BYTES_PER_POINT", "algbw_gbs", "bus_factor", "busbw_gbs", "collective_table", "collective_time",
           "halo_sends", "jacobi_step_time", "nbody_step_time", "scaling_table", "slab_rows"]
