"""Chapter "Scheduling: warps, divergence, occupancy": the measurements and the tables the chapter plots.

* :func:`measure_divergence` times the divergence kernels of :mod:`labhelpers.kernels.scheduling`
  and adds the SIMT model's columns.
* :func:`measure_throttle` and :func:`measure_block_sizes` time the memory-bound scale kernels when
  dynamic shared memory, or the block size, sets how many blocks share an SM.
* :func:`measure_register_caps` times :func:`~labhelpers.kernels.scheduling.sixteen_accumulators`
  under register caps; :func:`compare_calculator_with_driver` sets the occupancy calculator beside
  the driver's answers (GPU only).

``bench/scheduling.py`` stores these tables as the chapter's reference data.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, device, gpus
from ..errors import LaunchConfigError
from ..kernels.scheduling import (
    DIVERGENCE_KERNELS,
    SCALE_KERNELS,
    SCALE_SIGNATURE,
    SIXTEEN_SIGNATURE,
    _check_scale_args,
    expensive_paths,
    launch_divergence,
    launch_scale,
    lcg_inputs,
    per_lane_paths,
    scale,
    scale_bytes,
    scale_grid,
    scale_ilp4,
    serialized_bodies,
    sixteen_accumulators,
    sixteen_accumulators_capped,
    sixteen_accumulators_flops,
    warp_sums_kernel,
)
from ..launch import launch_1d, warps_for
from ..models import occupancy as occ
from ..sweep import sweep
from ..timing import Timing, benchmark


# --------------------------------------------------------------------------- divergence
def measure_divergence(n: int, steps: int, threads: int = 256, kinds: Sequence[str] | None = None,
                       progress: bool = True) -> pd.DataFrame:
    """Time every divergence kernel on ``n`` elements; add the model's columns.

    Columns: ``kernel``, the timing columns of :func:`labhelpers.sweep`, ``n``, ``steps``,
    ``threads``, ``expensive_threads`` (threads that run the body) and
    ``serialized_bodies`` (:func:`serialized_bodies`). Under the simulator the timings are NaN.
    """
    x = lcg_inputs(n)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)

    def run(kernel: str) -> Timing:
        return benchmark(lambda: launch_divergence(kernel, x_d, out_d, steps, threads), nbytes=2 * x.nbytes,
                         label=kernel)

    table = sweep(run, {"kernel": list(kinds or DIVERGENCE_KERNELS)}, progress=progress, desc="divergence")
    table["n"], table["steps"], table["threads"] = n, steps, threads
    table["expensive_threads"] = [int(np.count_nonzero(expensive_paths(k, n, threads) >= 0)) for k in table["kernel"]]
    table["serialized_bodies"] = [serialized_bodies(k, n, threads) for k in table["kernel"]]
    return table


# --------------------------------------------------------------------------- occupancy
def _resident_blocks(ilp: int, threads: int, shared_bytes: int, sm: gpus.SMLimits) -> tuple[float, float, float]:
    """(registers, calculator's blocks per SM, driver's blocks per SM); NaN where unknown (simulator)."""
    nan = float("nan")
    if backend.is_simulator():
        return nan, float(occ.occupancy(threads, 0, shared_bytes, sm).blocks_per_sm), nan
    kernel = SCALE_KERNELS[ilp]
    res = device.kernel_resources(kernel, SCALE_SIGNATURE)
    calc = occ.occupancy(threads, res.registers_per_thread, res.static_shared_per_block + shared_bytes, sm)
    drv = device.driver_blocks_per_sm(kernel, threads, shared_bytes, SCALE_SIGNATURE)
    return float(res.registers_per_thread), float(calc.blocks_per_sm), float(drv)


def _measure_scale(points: list[dict], n: int, progress: bool, desc: str) -> pd.DataFrame:
    """Time scale kernels at ``points`` (dicts of ilp, threads, shared_bytes), one full wave each."""
    sm = gpus.current().sm
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    extra = {}
    for p in points:
        key = (p["ilp"], p["threads"], p["shared_bytes"])
        extra[key] = _resident_blocks(*key, sm)

    def run(point: int) -> Timing:
        p = points[point]
        regs, calc, drv = extra[(p["ilp"], p["threads"], p["shared_bytes"])]
        per_sm = drv if drv == drv else calc  # the driver's answer when there is one
        blocks = scale_grid(n, p["threads"], p["ilp"], int(per_sm) if per_sm == per_sm and per_sm > 0 else None)
        return benchmark(lambda: launch_scale(x_d, out_d, 2.0, p["threads"], p["ilp"], p["shared_bytes"], blocks),
                         nbytes=scale_bytes(n), label=desc)

    table = sweep(run, {"point": list(range(len(points)))}, progress=progress, desc=desc)
    params = pd.DataFrame(points)
    table = pd.concat([params, table.drop(columns=["point"])], axis=1)
    table["n"] = n
    table["registers"] = [extra[(p["ilp"], p["threads"], p["shared_bytes"])][0] for p in points]
    table["calc_blocks_per_sm"] = [extra[(p["ilp"], p["threads"], p["shared_bytes"])][1] for p in points]
    table["driver_blocks_per_sm"] = [extra[(p["ilp"], p["threads"], p["shared_bytes"])][2] for p in points]
    blocks = table["driver_blocks_per_sm"].where(table["driver_blocks_per_sm"].notna(), table["calc_blocks_per_sm"])
    warps_per_block = table["threads"].map(warps_for)
    table["occupancy"] = blocks * warps_per_block / sm.max_warps_per_sm
    return table


#: Resident blocks per SM the throttle experiment may ask for; :func:`throttle_blocks` keeps those the SM holds
#: (64-thread blocks: 4 to 32 on the reference GPU's SM, 12.5% to 100% occupancy; 4 to 16 on a T4's).
THROTTLE_BLOCKS = (4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 32)
THROTTLE_THREADS = 64
BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def throttle_blocks(gpu: gpus.GPU | None = None, threads: int = THROTTLE_THREADS) -> tuple[int, ...]:
    """The :data:`THROTTLE_BLOCKS` an SM of ``gpu`` (default :func:`labhelpers.gpus.current`) can hold at once."""
    gpu = gpu or gpus.current()
    most = gpu.blocks_per_sm(threads)
    return tuple(k for k in THROTTLE_BLOCKS if k <= most)


def measure_throttle(n: int, blocks_per_sm: Sequence[int] | None = None, ilps: Sequence[int] = (1, 4),
                     threads: int = THROTTLE_THREADS, progress: bool = True,
                     shared_for: Callable[[int], int] | None = None) -> pd.DataFrame:
    """Bandwidth of the scale kernels when dynamic shared memory limits the resident blocks per SM.

    For each target ``blocks_per_sm`` (default: :func:`throttle_blocks` of this GPU, the reference GPU's under
    the simulator) the shared memory per block is ``shared_for(k)``
    (default: :func:`labhelpers.models.occupancy.shared_for_blocks` for this GPU); the grid
    is one full wave. Columns: ``ilp``, ``threads``, ``target_blocks``, ``shared_bytes``,
    the timing columns, ``n``, ``registers``, ``calc_blocks_per_sm``,
    ``driver_blocks_per_sm`` (NaN under the simulator) and ``occupancy``.
    """
    sm = gpus.current().sm
    blocks_per_sm = throttle_blocks(threads=threads) if blocks_per_sm is None else blocks_per_sm
    shared_for = shared_for or (lambda k: occ.shared_for_blocks(k, sm))
    points = [{"ilp": ilp, "threads": threads, "target_blocks": k, "shared_bytes": shared_for(k)}
              for ilp in ilps for k in blocks_per_sm]
    for p in points:
        try:
            _check_scale_args(threads, p["ilp"], p["shared_bytes"])
        except LaunchConfigError as exc:
            raise LaunchConfigError(f"shared_for({p['target_blocks']}) gave {p['shared_bytes']!r}: {exc}") from None
        p["shared_bytes"] = int(p["shared_bytes"])
    return _measure_scale(points, n, progress, "occupancy throttle")


def measure_block_sizes(n: int, threads: Sequence[int] = BLOCK_SIZES, ilps: Sequence[int] = (1, 4),
                        progress: bool = True) -> pd.DataFrame:
    """Bandwidth of the scale kernels for every block size, one full wave of blocks, no extra shared memory."""
    points = [{"ilp": ilp, "threads": t, "shared_bytes": 0} for ilp in ilps for t in threads]
    return _measure_scale(points, n, progress, "block sizes")


# --------------------------------------------------------------------------- register caps
#: Register caps the chapter tries on :func:`sixteen_accumulators` (255: no cap, the hardware's limit).
REGISTER_CAPS = (255, 64, 48, 40, 32, 24)


def measure_register_caps(n: int, steps: int, threads: int = 256, caps: Sequence[int] = REGISTER_CAPS,
                          progress: bool = True) -> pd.DataFrame:
    """Time :func:`sixteen_accumulators` under several register caps: fewer registers, more blocks, more spills.

    Columns: ``max_registers``, the timing columns (GFLOP/s in ``gflops``), ``n``, ``steps``,
    ``threads``, ``registers`` and ``local_bytes`` (what the compiler gave each thread: NaN under
    the simulator), ``calc_blocks_per_sm``, ``driver_blocks_per_sm`` and ``occupancy``.
    """
    sm = gpus.current().sm
    x = np.random.default_rng(0).random(n)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    kernels = {cap: sixteen_accumulators_capped(cap) for cap in caps}
    launch = launch_1d(n, threads)
    info = {}
    for cap, kernel in kernels.items():
        if backend.is_simulator():
            info[cap] = (float("nan"),) * 4
            continue
        res = device.kernel_resources(kernel, SIXTEEN_SIGNATURE)
        calc = occ.occupancy(threads, res.registers_per_thread, res.static_shared_per_block, sm).blocks_per_sm
        drv = device.driver_blocks_per_sm(kernel, threads, 0, SIXTEEN_SIGNATURE)
        info[cap] = (float(res.registers_per_thread), float(res.local_per_thread), float(calc), float(drv))

    def run(max_registers: int) -> Timing:
        kernel = kernels[max_registers]
        return benchmark(lambda: kernel[launch.blocks, launch.threads](x_d, out_d, steps),
                         flops=sixteen_accumulators_flops(n, steps), label=f"max_registers={max_registers}")

    table = sweep(run, {"max_registers": list(caps)}, progress=progress, desc="register caps")
    table["n"], table["steps"], table["threads"] = n, steps, threads
    for k, column in enumerate(("registers", "local_bytes", "calc_blocks_per_sm", "driver_blocks_per_sm")):
        table[column] = [info[cap][k] for cap in table["max_registers"]]
    warps_per_block = launch.warps_per_block
    table["occupancy"] = table["driver_blocks_per_sm"] * warps_per_block / sm.max_warps_per_sm
    return table


def compare_with_driver(
    kernel,
    threads: Iterable[int] = (32, 64, 128, 256, 512, 1024),
    dynamic_shared: Iterable[int] = (0,),
    signature=None,
    sm: gpus.SMLimits | None = None,
) -> pd.DataFrame:
    """The calculator's blocks per SM next to the driver's, for every (threads, dynamic shared) pair (GPU only).

    The calculator is :func:`labhelpers.models.occupancy.occupancy` on ``sm`` (default: this GPU's SM,
    ``gpus.current().sm``) fed the compiler's registers and static shared memory
    (:func:`labhelpers.device.kernel_resources`); the driver's answer is
    :func:`labhelpers.device.driver_blocks_per_sm`.

    Returns:
        One row per configuration: ``kernel``, ``threads``, ``dynamic_shared``, ``registers``,
        ``static_shared``, ``calc_blocks``, ``driver_blocks``, ``agree``, ``limiting``.
        A configuration the calculator rejects counts as 0 blocks (the driver reports 0 for it too).
    """
    sm = sm or gpus.current().sm
    res = device.kernel_resources(kernel, signature)
    rows = []
    for t in threads:
        for dyn in dynamic_shared:
            try:
                r = occ.occupancy(t, res.registers_per_thread, res.static_shared_per_block + dyn, sm)
                calc, limiting = r.blocks_per_sm, " and ".join(r.limiting)
            except LaunchConfigError:
                calc, limiting = 0, "cannot launch"
            if t > res.max_threads_per_block:
                calc, limiting = 0, "cannot launch"
            try:
                drv = device.driver_blocks_per_sm(kernel, t, dyn, signature)
            except Exception:  # the driver refuses the configuration outright
                drv = 0
            rows.append({"kernel": res.name, "threads": t, "dynamic_shared": dyn,
                         "registers": res.registers_per_thread, "static_shared": res.static_shared_per_block,
                         "calc_blocks": calc, "driver_blocks": drv, "agree": calc == drv, "limiting": limiting})
    return pd.DataFrame(rows)


#: Kernels the chapter compares the calculator and the driver on, with their signatures.
COMPARED_KERNELS = {
    "scale": (scale, SCALE_SIGNATURE),
    "scale_ilp4": (scale_ilp4, SCALE_SIGNATURE),
    "per_lane_paths": (per_lane_paths, "void(int64[::1], int64[::1], int64)"),
    "warp_sums_kernel": (warp_sums_kernel, "void(float32[::1], float32[::1])"),
    "sixteen_accumulators": (sixteen_accumulators, SIXTEEN_SIGNATURE),
}


def compare_calculator_with_driver(threads: Sequence[int] = (32, 64, 128, 256, 512, 768, 1024),
                                   dynamic_shared: Sequence[int] = (0, 8 * 1024, 40 * 1024)) -> pd.DataFrame:
    """:func:`compare_with_driver` for every kernel of :data:`COMPARED_KERNELS`.

    GPU only: raises :class:`~labhelpers.errors.GPUOnlyError` under the simulator.
    """
    backend.require_gpu("compare_calculator_with_driver", because="asks the driver for its occupancy",
                        instead="The chapter shows the comparison measured on one (reference data "
                        "ch04_occupancy_driver).")
    tables = [compare_with_driver(kernel, threads, dynamic_shared, signature)
              for kernel, signature in COMPARED_KERNELS.values()]
    return pd.concat(tables, ignore_index=True)
