"""Chapter "n-body": counting an interaction, and which unit of the SM limits the kernels (no GPU needed).

* :func:`flop_conventions`: the ways of counting one body-body interaction (20 flops, 19, the lecture's
  "about 16", 13 instructions) and where each comes from.
* :func:`unit_limits`: a throughput model of one SM. Every warp instruction takes one issue slot of its
  sub-partition (4 per SM and clock); float32 adds, multiplies and FMAs run on 128 lanes per SM and clock;
  the special-function unit (MUFU: reciprocal square root, reciprocal, square root) on 16. Given the
  instructions of one interaction, each unit gives an upper bound on interactions per clock; the smallest
  binds. (Rates per SM and clock from the *CUDA C++ Programming Guide*, "Arithmetic Instructions",
  compute capability 9.0.)
* :func:`layout_sectors`: what one warp's load of one field touches in each data layout (the sector model
  of chapter 3, :mod:`labhelpers.models.banks`).
* :func:`busy_sms`: how many SMs a launch of the tiled kernel can keep busy (at small n, and in its last wave).
* :func:`streamk_split`: how evenly the stream-K kernel shares the same work out over its grid.
"""

from __future__ import annotations

import math

import pandas as pd

from .. import gpus, validate
from ..counts import NBODY_FLOPS_PER_INTERACTION as FLOPS_PER_INTERACTION
from ..errors import ArgumentError
from ..launch import tiles_for, warps_for
from .banks import warp_request

#: Per SM and clock on compute capability 9.0: warp instructions issued (4 sub-partitions x 1).
ISSUE_PER_SM = 4
#: Float32 add / multiply / FMA results per SM and clock.
FP32_LANES_PER_SM = 128
#: Special-function (MUFU: rsqrt, rcp, sqrt, ...) results per SM and clock.
MUFU_LANES_PER_SM = 16
WARP = 32


def flop_conventions() -> pd.DataFrame:
    """One interaction counted four ways: each row names the convention, what it counts, and the total."""
    rows = [
        ("GPU Gems 3 (Nyland, Harris and Prins, 2007): the book's convention",
         "3 sub + 6 (3 squares, 2 adds, + eps^2) + 4 (1/sqrt as a square root and a division, 2 multiplies) "
         "+ 1 (mass) + 6 (3 multiply-adds)", 20),
        ("flops as the hardware does them (an FMA = 2, rsqrt = 1)",
         "3 FADD + 3 FFMA (6) + 1 MUFU.RSQ + 3 FMUL + 3 FFMA (6)", 19),
        ("the lecture's 'about 16' (the interaction function alone)",
         "3 sub + 5 (squares and adds) + 1 (+ eps^2) + 1 (rsqrt) + 3 (cube and mass) + 3 (dx*s, dy*s, dz*s); "
         "the 3 additions into the sums are not counted", 16),
        ("instructions (what costs issue slots)",
         "3 FADD + 3 FFMA + 1 MUFU.RSQ + 3 FMUL + 3 FFMA", 13),
    ]
    return pd.DataFrame(rows, columns=["convention", "what is counted", "per interaction"])


def unit_limits(fp32: float = 12, mufu: float = 1, other: float = 0, *, sm_count: int,
                clock_ghz: float | None = None, fma_peak_gflops: float | None = None) -> pd.DataFrame:
    """Upper bounds on interactions per second from each unit of the SM, and which one binds.

    Args:
        fp32: float32 add/multiply/FMA instructions per interaction (12 in the ideal loop).
        mufu: special-function instructions per interaction (1: the rsqrt).
        other: every other instruction per interaction (shared loads, loop counters, index arithmetic).
        sm_count, clock_ghz: the GPU (its SMs: ``gpus.current().sm_count`` for this GPU, the reference GPU's under
            the simulator; the model asks no device). Without a clock, the one at which ``fma_peak_gflops`` is the FP32 peak
            (``peak / (sm_count * 128 * 2)``: a measured peak gives the clock the GPU really ran at), else
            1.98 GHz (H100 and H200 SXM at boost).
        fma_peak_gflops: the FP32 FMA peak to express each bound against (default: the peak at the clock).

    Returns:
        One row per unit (``issue``, ``FP32 pipe``, ``MUFU``): ``per_clock_per_sm`` (interactions),
        ``ginteractions``, ``gflops`` (20 per interaction), ``of_fma_peak`` and ``binds`` (the smallest).
    """
    fp32 = validate.number(fp32, "fp32", minimum=0)
    mufu = validate.number(mufu, "mufu", minimum=0)
    other = validate.number(other, "other", minimum=0)
    sm_count = validate.integer(sm_count, "sm_count", minimum=1)
    if clock_ghz is None:
        clock_ghz = fma_peak_gflops / (sm_count * FP32_LANES_PER_SM * 2) if fma_peak_gflops else 1.98
    clock_ghz = validate.number(clock_ghz, "clock_ghz", minimum=0)
    total = fp32 + mufu + other
    if total <= 0 or clock_ghz <= 0:
        raise ArgumentError("an interaction needs at least one instruction and the clock must be > 0")
    peak = fma_peak_gflops or sm_count * FP32_LANES_PER_SM * 2 * clock_ghz
    per_clock = {
        "issue": ISSUE_PER_SM * WARP / total,
        "FP32 pipe": FP32_LANES_PER_SM / fp32 if fp32 else math.inf,
        "MUFU": MUFU_LANES_PER_SM / mufu if mufu else math.inf,
    }
    rows = []
    for unit, rate in per_clock.items():
        g = rate * sm_count * clock_ghz
        rows.append({"unit": unit, "per_clock_per_sm": rate, "ginteractions": g,
                     "gflops": g * FLOPS_PER_INTERACTION, "of_fma_peak": g * FLOPS_PER_INTERACTION / peak})
    table = pd.DataFrame(rows)
    table["binds"] = table["per_clock_per_sm"] == table["per_clock_per_sm"].min()
    return table


def limits_from_mix(row, *, sm_count: int | None = None, clock_ghz: float | None = None,
                    fma_peak_gflops: float | None = None) -> pd.DataFrame:
    """:func:`unit_limits` for one row of the reference table ``ch08_instruction_mix`` (its SASS counts).

    ``sm_count`` defaults to the reference GPU's (:func:`labhelpers.gpus.reference`), the GPU whose compiler
    produced those counts and whose peak the chapter passes; pass the SMs of the GPU that measured otherwise.
    """
    sm_count = gpus.reference().sm_count if sm_count is None else sm_count
    per = float(row["interactions_per_trip"])
    fp32, mufu, total = (float(row[k]) / per for k in ("sass_fp32", "sass_mufu", "sass_total"))
    return unit_limits(fp32, mufu, max(total - fp32 - mufu, 0.0), sm_count=sm_count, clock_ghz=clock_ghz,
                       fma_peak_gflops=fma_peak_gflops)


#: The data layouts the chapter compares: floats per body record, and which of them the force kernel reads.
LAYOUTS = {
    "SoA: x[], y[], z[], m[]": (1, 4),
    "AoS, float4 per body (x, y, z, m)": (4, 4),
    "AoS, the lecture's struct (x, y, z, vx, vy, vz, m)": (7, 4),
}


def layout_sectors() -> pd.DataFrame:
    """A warp loading one field of 32 consecutive bodies, per layout: sectors touched, and the useful share.

    ``per load`` is one load instruction (e.g. all x); ``over the fields`` assumes the L1 keeps the lines
    while the warp loads the other fields it needs (x, y, z and m), so every byte moved is counted once.
    """
    rows = []
    for name, (stride, used) in LAYOUTS.items():
        req = warp_request(0, stride, 4)
        if stride == 1:
            moved = used * req.sectors * 32  # one array per field
        else:
            moved = req.sectors * 32  # the four fields share the same records
        rows.append({"layout": name, "stride_floats": stride, "sectors_per_load": req.sectors,
                     "useful_per_load": 128 / (req.sectors * 32), "useful_over_the_fields": used * 128 / moved})
    return pd.DataFrame(rows)


def busy_sms(n: int, tile: int, bodies: int = 1, *, sm_count: int) -> dict:
    """Blocks of a tiled launch for ``n`` bodies, and the share of the GPU's ``sm_count`` SMs that get one
    (``gpus.current().sm_count`` for this GPU, the reference GPU's under the simulator)."""
    n = validate.integer(n, "n", minimum=1)
    tile = validate.integer(tile, "tile", minimum=1)
    bodies = validate.integer(bodies, "bodies", minimum=1)
    sm_count = validate.integer(sm_count, "sm_count", minimum=1)
    blocks = tiles_for(n, tile * bodies)  # one block per tile of tile * bodies bodies
    return {"blocks": blocks, "warps": blocks * warps_for(tile, WARP), "busy_sm_share": min(1.0, blocks / sm_count)}


def streamk_split(n: int, tile: int, bodies: int, blocks: int) -> dict:
    """The stream-K kernel's work (:func:`labhelpers.kernels.nbody.make_streamk`) shared out over ``blocks`` blocks.

    The units are (group of ``tile * bodies`` i-bodies, tile of ``tile`` j-bodies) pairs, each ``tile^2 bodies``
    interactions; block ``g`` takes ``[g W / G, (g + 1) W / G)`` of the ``W`` units. Returns ``units``, the ``most``
    and ``fewest`` units a block gets, and ``busy_share``: ``units / (blocks x most)``, the share of the grid's
    block-time spent on interactions when the slowest block decides the end (1.0: perfectly even).
    """
    n = validate.integer(n, "n", minimum=1)
    tile = validate.integer(tile, "tile", minimum=1)
    bodies = validate.integer(bodies, "bodies", minimum=1)
    blocks = validate.integer(blocks, "blocks", minimum=1)
    units = tiles_for(n, tile * bodies) * tiles_for(n, tile)
    fewest = units // blocks
    most = fewest + (units % blocks > 0)  # some blocks get one unit more when blocks does not divide units
    return {"units": units, "most": most, "fewest": fewest, "busy_share": units / (blocks * most)}


__all__ = ["FLOPS_PER_INTERACTION", "LAYOUTS", "busy_sms", "flop_conventions", "layout_sectors", "limits_from_mix",
           "streamk_split", "unit_limits"]
