"""Chapter "Scheduling: warps, divergence, occupancy": the kernels, their host wrappers and specifications.

Four groups:

* :func:`warp_lane` writes every thread's warp and lane number: how a block is cut into warps.
* Divergence: five kernels that differ only in *which* threads take an expensive branch
  (:data:`DIVERGENCE_KERNELS`). The expensive body is :func:`lcg_steps`, a chain of
  exact integer steps (the Park-Miller "minimal standard" generator), so every kernel
  is checked exactly against NumPy; :func:`expensive_paths` models which branch each
  thread takes and :func:`serialized_bodies` how many times each warp must run the body.
* Independent thread scheduling: :func:`warp_sums_kernel`, a warp-synchronous sum that is
  correct on Volta and later only because of its ``cuda.syncwarp()`` calls (GPU only).
* Occupancy: two memory-bound grid-stride kernels (:func:`scale`, and :func:`scale_ilp4`
  with four independent loads per thread) that declare a dynamic shared array, so that
  the shared memory requested at launch throttles how many blocks share an SM; and
  :func:`sixteen_accumulators`, a kernel that needs many registers.

The measurements that time them and build the chapter's tables are in
:mod:`labhelpers.experiments.scheduling`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, float64

from .. import backend, validate
from ..arrays import to_host
from ..device import device_info
from ..errors import ArrayArgumentError, GPUOnlyError, LaunchConfigError
from ..launch import WARP_SIZE, blocks_for, launch_1d, warps_for
from ..validate import DEFAULT_SHARED_PER_BLOCK

#: The Park-Miller generator ``v -> v * 48271 mod (2**31 - 1)`` (Park, Miller and Stockmeyer, 1993).
LCG_MULTIPLIER = 48271
LCG_MODULUS = 2**31 - 1


# --------------------------------------------------------------------------- warps and lanes
@cuda.jit
def warp_lane(warp, lane):
    """``warp[i]`` and ``lane[i]``: the warp of its block and the lane within that warp of thread ``i``."""
    i = cuda.grid(1)
    if i < warp.size:
        warp[i] = cuda.threadIdx.x // 32  # warps are cut from consecutive threadIdx.x, 32 at a time
        lane[i] = cuda.threadIdx.x % 32


def warp_lane_ids(threads: int, blocks: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Run :func:`warp_lane` on ``blocks`` blocks of ``threads`` threads; return (warp, lane) per thread."""
    launch = launch_1d(blocks * threads, threads)
    warp_d = cuda.device_array(blocks * threads, dtype=np.int32)
    lane_d = cuda.device_array(blocks * threads, dtype=np.int32)
    warp_lane[launch.blocks, launch.threads](warp_d, lane_d)
    return to_host(warp_d), to_host(lane_d)


# --------------------------------------------------------------------------- divergence
@cuda.jit(device=True)
def lcg_steps(v, steps):
    """``steps`` dependent Park-Miller steps from ``v`` (an int64 in [0, 2**31 - 1)): the expensive body."""
    for _ in range(steps):
        v = (v * 48271) % 2147483647
    return v


@cuda.jit
def lane0_branch(x, out, steps):
    """Lane 0 of every warp takes the expensive branch (``if i % 32 == 0``); the other 31 lanes copy."""
    i = cuda.grid(1)
    if i < x.size:
        if cuda.threadIdx.x % 32 == 0:
            out[i] = lcg_steps(x[i], steps)
        else:
            out[i] = x[i]


@cuda.jit
def first_warp_branch(x, out, steps):
    """Only the first 32 threads of the grid take the expensive branch (``if i < 32``)."""
    i = cuda.grid(1)
    if i < x.size:
        if i < 32:
            out[i] = lcg_steps(x[i], steps)
        else:
            out[i] = x[i]


@cuda.jit
def packed_branch(x, out, steps, n_expensive):
    """The first ``n_expensive`` threads take the expensive branch: as much work as
    :func:`lane0_branch` (with ``n_expensive`` = number of warps), packed into whole warps."""
    i = cuda.grid(1)
    if i < x.size:
        if i < n_expensive:
            out[i] = lcg_steps(x[i], steps)
        else:
            out[i] = x[i]


@cuda.jit
def per_lane_paths(x, out, steps):
    """Every thread does the expensive work, in a branch of its own: lane ``k`` runs it when ``k`` comes up.

    The 32 lanes of a warp take 32 different branches, so the warp runs the body 32 times,
    each time with one lane active.
    """
    i = cuda.grid(1)
    if i < x.size:
        lane = cuda.threadIdx.x % 32
        v = x[i]
        for k in range(32):
            if lane == k:
                v = lcg_steps(v, steps)
        out[i] = v


@cuda.jit
def per_warp_paths(x, out, steps):
    """The same 32 branches as :func:`per_lane_paths`, chosen by warp instead of by lane: no divergence."""
    i = cuda.grid(1)
    if i < x.size:
        warp = (cuda.threadIdx.x // 32) % 32
        v = x[i]
        for k in range(32):
            if warp == k:
                v = lcg_steps(v, steps)
        out[i] = v


#: name -> kernel, in the order the chapter shows them.
DIVERGENCE_KERNELS = {
    "lane0_branch": lane0_branch,
    "first_warp_branch": first_warp_branch,
    "packed_branch": packed_branch,
    "per_lane_paths": per_lane_paths,
    "per_warp_paths": per_warp_paths,
}


def lcg_reference(x: np.ndarray, steps: int) -> np.ndarray:
    """NumPy specification of :func:`lcg_steps`, element-wise (exact: int64 never overflows here)."""
    v = np.asarray(x, dtype=np.int64).copy()
    for _ in range(steps):
        v = (v * LCG_MULTIPLIER) % LCG_MODULUS
    return v


def lcg_inputs(n: int, seed: int = 0) -> np.ndarray:
    """``n`` valid inputs of :func:`lcg_steps`: int64 in [1, 2**31 - 1)."""
    return np.random.default_rng(seed).integers(1, LCG_MODULUS, size=n, dtype=np.int64)


def packed_count(n: int, threads: int) -> int:
    """How many threads :func:`lane0_branch` sends down the expensive branch: one per (partly) used warp."""
    full_blocks, rest = divmod(n, threads)
    return full_blocks * warps_for(threads) + warps_for(rest)


def expensive_paths(kind: str, n: int, threads: int = 256) -> np.ndarray:
    """Which expensive branch each of the ``n`` threads takes in kernel ``kind`` (-1: the cheap one).

    Branch numbers only need to tell branches apart: two threads of one warp with different
    numbers make the warp run the body twice.
    """
    i = np.arange(n)
    t = i % threads  # threadIdx.x
    if kind == "lane0_branch":
        return np.where(t % WARP_SIZE == 0, 0, -1)
    if kind == "first_warp_branch":
        return np.where(i < 32, 0, -1)
    if kind == "packed_branch":
        return np.where(i < packed_count(n, threads), 0, -1)
    if kind == "per_lane_paths":
        return t % WARP_SIZE
    if kind == "per_warp_paths":
        return (t // WARP_SIZE) % 32
    raise ValueError(f"unknown kernel {kind!r}: use one of {list(DIVERGENCE_KERNELS)}")


def serialized_bodies(kind: str, n: int, threads: int = 256) -> int:
    """Times the warps of kernel ``kind`` run the expensive body, summed over warps (the SIMT cost model).

    A warp runs each distinct branch its active lanes take once, one after the other;
    lanes on other branches wait, masked off.
    """
    paths = expensive_paths(kind, n, threads)
    block, t = np.divmod(np.arange(n), threads)
    warp_id = block * warps_for(threads) + t // WARP_SIZE  # warps never span two blocks
    taken = paths >= 0
    pairs = np.unique(np.stack([warp_id[taken], paths[taken]]), axis=1) if taken.any() else np.empty((2, 0))
    return int(pairs.shape[1])


def divergence_reference(kind: str, x: np.ndarray, steps: int, threads: int = 256) -> np.ndarray:
    """NumPy specification of the divergence kernel ``kind``."""
    x = np.asarray(x, dtype=np.int64)
    out = x.copy()
    taken = expensive_paths(kind, x.size, threads) >= 0
    out[taken] = lcg_reference(x[taken], steps)
    return out


def launch_divergence(kind: str, x_d, out_d, steps: int, threads: int = 256) -> None:
    """Launch divergence kernel ``kind`` on device arrays (no checks, no copies: for timing)."""
    n = x_d.shape[0]
    blocks = blocks_for(n, threads)
    kernel = DIVERGENCE_KERNELS[kind]
    if kind == "packed_branch":
        kernel[blocks, threads](x_d, out_d, steps, packed_count(n, threads))
    else:
        kernel[blocks, threads](x_d, out_d, steps)


def run_divergence(kind: str, x, steps: int, threads: int = 256) -> np.ndarray:
    """Run divergence kernel ``kind`` on ``x`` (int64 values in [0, 2**31 - 1)) and return the result."""
    if kind not in DIVERGENCE_KERNELS:
        raise ValueError(f"unknown kernel {kind!r}: use one of {list(DIVERGENCE_KERNELS)}")
    validate.array(x, "x", dtype=np.int64, ndim=1)
    steps = validate.integer(steps, "steps", minimum=0, allow_float=False, error=ArrayArgumentError)
    if isinstance(x, np.ndarray) and x.size and (x.min() < 0 or x.max() >= LCG_MODULUS):
        raise ArrayArgumentError(f"x must hold values in [0, 2**31 - 1) (got {x.min()}..{x.max()}): products with "
                                 f"{LCG_MULTIPLIER} would overflow int64. Use lcg_inputs(n) or x % {LCG_MODULUS}.")
    if threads % WARP_SIZE:
        raise LaunchConfigError(f"threads={threads}: use a multiple of 32 so that every warp is full "
                                "(the divergence model assumes it)")
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    launch_divergence(kind, x_d, out_d, steps, threads)
    return to_host(out_d)


# --------------------------------------------------------------------------- independent thread scheduling
#: Threads per block of :func:`warp_sums_kernel` at most (its shared buffer has this many floats).
WARP_SUMS_MAX_THREADS = 1024


@cuda.jit
def warp_sums_kernel(x, out):
    """``out[w]`` = sum of the 32 elements of warp ``w``, by a tree in shared memory, warp-synchronously.

    No ``syncthreads()``: only the 32 lanes of one warp share data, so a warp barrier is
    enough. Since Volta the lanes of a warp are not guaranteed to run in lockstep, so every
    step needs ``syncwarp()`` between its reads and its writes.
    """
    buf = cuda.shared.array(1024, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    lane = t % 32
    v = float32(0)
    if i < x.size:  # guard the load, never the barrier
        v = x[i]
    buf[t] = v
    cuda.syncwarp()  # RAW: every lane's value is in buf before any lane reads a neighbour's
    offset = 16
    while offset > 0:
        v = buf[t]
        if lane < offset:
            v += buf[t + offset]
        cuda.syncwarp()  # WAR: all reads of this step are done before any lane overwrites buf
        buf[t] = v
        cuda.syncwarp()  # RAW: the new partial sums are visible before the next step reads them
        offset //= 2
    w = i // 32
    if lane == 0 and w < out.size:
        out[w] = buf[t]


def warp_sums(x, threads: int = 256) -> np.ndarray:
    """Sum each group of 32 consecutive elements of ``x`` (float32) with :func:`warp_sums_kernel` (GPU only).

    Raises:
        GPUOnlyError: under the simulator, which has no ``cuda.syncwarp()``.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    if threads % WARP_SIZE or not WARP_SIZE <= threads <= WARP_SUMS_MAX_THREADS:
        raise LaunchConfigError(f"threads={threads}: use a multiple of 32 up to {WARP_SUMS_MAX_THREADS}, so that "
                                "warps never straddle two blocks")
    if backend.is_simulator():
        raise GPUOnlyError("warp_sums needs cuda.syncwarp(), a warp intrinsic the CUDA simulator does not have: "
                           "run it on a GPU. (Under the simulator the chapter explains it and shows reference data.)")
    launch = launch_1d(x.shape[0], threads)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array(warps_for(x.shape[0]), dtype=np.float32)
    warp_sums_kernel[launch.blocks, launch.threads](x_d, out_d)
    return to_host(out_d)


def warp_sums_reference(x: np.ndarray) -> np.ndarray:
    """NumPy specification of :func:`warp_sums`: sums of consecutive groups of 32 (the last may be shorter)."""
    x = np.asarray(x, dtype=np.float32)
    pad = np.zeros(warps_for(x.size) * WARP_SIZE, dtype=np.float32)
    pad[:x.size] = x
    return pad.reshape(-1, WARP_SIZE).sum(axis=1, dtype=np.float32)


# --------------------------------------------------------------------------- memory-bound kernels for occupancy
@cuda.jit
def scale(x, out, a):
    """``out[i] = a * x[i]`` in a grid-stride loop: one load in flight per thread.

    The dynamic shared array is never used: the shared memory requested at launch
    (``scale[blocks, threads, 0, shared_bytes]``) only takes room on the SM, which is how
    the chapter limits the number of resident blocks.
    """
    room = cuda.shared.array(0, float32)  # dynamic shared memory: sized at launch; it only takes room
    stride = cuda.gridsize(1)
    for i in range(cuda.grid(1), x.size, stride):  # the loop bound is the bounds check
        out[i] = a * x[i]


@cuda.jit
def scale_ilp4(x, out, a):
    """:func:`scale` with four independent loads per thread and iteration: four loads in flight per thread.

    All four loads are issued before the first store, so a thread waits for one memory
    latency per four elements instead of one per element.
    """
    room = cuda.shared.array(0, float32)  # dynamic shared memory: sized at launch; it only takes room
    n = x.size
    stride = cuda.gridsize(1)
    for i in range(cuda.grid(1), n, 4 * stride):
        i1 = i + stride
        i2 = i1 + stride
        i3 = i2 + stride
        v0 = x[i]
        v1 = x[i1] if i1 < n else float32(0)
        v2 = x[i2] if i2 < n else float32(0)
        v3 = x[i3] if i3 < n else float32(0)
        out[i] = a * v0
        if i1 < n:
            out[i1] = a * v1
        if i2 < n:
            out[i2] = a * v2
        if i3 < n:
            out[i3] = a * v3


SCALE_KERNELS = {1: scale, 4: scale_ilp4}
#: The signature both scale kernels are compiled for (device arrays are C-contiguous).
SCALE_SIGNATURE = "void(float32[::1], float32[::1], float32)"


def scale_bytes(n: int) -> int:
    """Bytes a scale kernel moves: read ``x``, write ``out`` (float32)."""
    return 8 * n


def _sm_count() -> int:
    info = device_info()
    return info.sm_count or 1


def scale_grid(n: int, threads: int, ilp: int, blocks_per_sm: int | None) -> int:
    """Blocks to launch: one full wave (``blocks_per_sm`` on every SM), never more than the elements need."""
    needed = blocks_for(n, threads, per_thread=ilp)
    if blocks_per_sm is None:
        return needed
    return max(1, min(needed, blocks_per_sm * _sm_count()))


def _check_scale_args(threads: int, ilp: int, shared_bytes: int) -> None:
    """The arguments of the scale kernels: ``ilp`` one of :data:`SCALE_KERNELS`, and a launch a GPU accepts."""
    validate.choice(ilp, "ilp", sorted(SCALE_KERNELS))
    validate.launch(1, threads, shared_bytes, max_shared=DEFAULT_SHARED_PER_BLOCK)


def launch_scale(x_d, out_d, a: float, threads: int, ilp: int = 1, shared_bytes: int = 0,
                 blocks: int | None = None) -> None:
    """Launch a scale kernel on device arrays with ``shared_bytes`` of dynamic shared memory per block."""
    blocks = blocks or scale_grid(x_d.shape[0], threads, ilp, None)
    SCALE_KERNELS[ilp][blocks, threads, 0, shared_bytes](x_d, out_d, np.float32(a))


def run_scale(x, a: float, threads: int = 256, ilp: int = 1, shared_bytes: int = 0, blocks: int | None = None):
    """``a * x`` by a scale kernel (float32 vector ``x``), with ``shared_bytes`` of dynamic shared memory per block.

    ``blocks`` defaults to enough blocks for one element (``ilp`` elements) per thread; any
    smaller grid also gives the right answer, thanks to the grid-stride loop.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    _check_scale_args(threads, ilp, shared_bytes)
    if blocks is not None:
        validate.grid_shape(blocks, "blocks")
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    launch_scale(x_d, out_d, a, threads, ilp, shared_bytes, blocks)
    return to_host(out_d)


# --------------------------------------------------------------------------- a kernel that needs many registers
@cuda.jit
def sixteen_accumulators(x, out, steps):
    """``out[i]`` = sum over k < 16 of ``steps`` times ``v -> 0.5 * v + k`` from ``x[i] + k`` (float64).

    Sixteen independent float64 chains stay live at once: a kernel that needs many
    registers, for comparing the occupancy calculator with the driver.
    """
    i = cuda.grid(1)
    if i < x.size:
        acc = cuda.local.array(16, float64)
        for k in range(16):  # constant trip counts: the compiler unrolls and keeps acc in registers
            acc[k] = x[i] + k
        for _ in range(steps):
            for k in range(16):
                acc[k] = 0.5 * acc[k] + k
        total = 0.0
        for k in range(16):
            total += acc[k]
        out[i] = total


def sixteen_accumulators_reference(x: np.ndarray, steps: int) -> np.ndarray:
    """NumPy specification of :func:`sixteen_accumulators`."""
    x = np.asarray(x, dtype=np.float64)
    acc = x[None, :] + np.arange(16.0)[:, None]
    for _ in range(steps):
        acc = 0.5 * acc + np.arange(16.0)[:, None]
    return acc.sum(axis=0)


SIXTEEN_SIGNATURE = "void(float64[::1], float64[::1], int64)"
def sixteen_accumulators_capped(max_registers: int):
    """:func:`sixteen_accumulators` compiled with at most ``max_registers`` registers per thread.

    The compiler keeps what does not fit in local memory (spills). Under the simulator, which
    compiles nothing, this is :func:`sixteen_accumulators` itself.
    """
    max_registers = validate.integer(max_registers, "max_registers", minimum=16, maximum=255, allow_float=False,
                                     error=LaunchConfigError)
    if backend.is_simulator() or max_registers == 255:
        return sixteen_accumulators
    return cuda.jit(max_registers=int(max_registers))(sixteen_accumulators.py_func)


def sixteen_accumulators_flops(n: int, steps: int) -> int:
    """Floating-point operations of :func:`sixteen_accumulators`: 16 chains of a multiply and an add per step."""
    return 2 * 16 * steps * n
