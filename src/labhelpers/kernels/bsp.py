"""Chapter "BSP and Amdahl": supersteps, parallel slackness and a measured speedup.

Three groups of kernels:

* :func:`fixed_work`: a grid-stride loop that applies ``reps`` fused multiply-adds to
  every element of a fixed array. The *work* is fixed by the array; the *grid* can be
  anything from one warp to many waves of blocks, which is what the parallel-slackness
  measurement varies.
* :func:`serial_chain`: one thread walking a chain of dependent steps, the part of a
  program no number of processors speeds up. Together with :func:`fixed_work` on
  1, 2, 4, ... blocks (one block per SM) it makes the program whose speedup the chapter
  measures and Amdahl's law fits.
* :func:`block_sums` and :func:`scale`: a sum and a normalisation written as BSP
  supersteps, one kernel launch each; :func:`normalize` runs them.

The measurements (parallel slackness, the measured speedup) and their summaries are in
:mod:`labhelpers.experiments.bsp`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import cuda, float32

from .. import validate
from ..arrays import to_host
from ..launch import launch_1d

#: Coefficients of the map ``v -> A * v + B`` that :func:`fixed_work` applies ``reps`` times.
#: |A| < 1 keeps values bounded however many times it is applied.
A = np.float32(0.999)
B = np.float32(0.001)
#: Threads per block of :func:`block_sums` (its shared-memory buffer has this many floats).
SUM_THREADS = 128


# --------------------------------------------------------------------------- fixed work
@cuda.jit
def fixed_work(x, out, a, b, reps):
    """``out[i] = f(x[i])`` with ``f`` = ``reps`` times ``v -> a * v + b``, for every ``i``, on any grid.

    The grid-stride loop starts at the thread's global index and steps by the number of
    threads in the grid, so every element is visited exactly once whether the grid has
    fewer threads than elements (each thread takes several) or more (some take none).

    Each trip waits for its one 4-byte load: the next load cannot move above this trip's
    store (``x`` and ``out`` may be the same array). Compiled for sm_90, a trip with 8
    multiply-adds is about 90 instructions: each ``range`` loop keeps a 64-bit trip counter
    and every ``x[i]`` checks for a negative index, so the load, the FMAs and the store are
    10 of them.
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.size, stride):  # the loop bound is the bounds check
        v = x[i]
        for _ in range(reps):
            v = a * v + b  # one fused multiply-add
        out[i] = v


def fixed_work_reference(x: np.ndarray, reps: int, a: float = A, b: float = B) -> np.ndarray:
    """NumPy specification of :func:`fixed_work` (in float32, like the kernel)."""
    v = np.asarray(x, dtype=np.float32).copy()
    a, b = np.float32(a), np.float32(b)
    for _ in range(reps):
        v = a * v + b
    return v


def fixed_work_bytes(n: int, itemsize: int = 4) -> int:
    """Bytes :func:`fixed_work` moves through device memory: read ``x``, write ``out``."""
    return 2 * n * itemsize


def fixed_work_flops(n: int, reps: int) -> int:
    """Floating-point operations of :func:`fixed_work`: one multiply and one add per step and element."""
    return 2 * reps * n


def fixed_work_launcher(x_d, out_d, blocks: int, threads: int, reps: int,
                        a: float = A, b: float = B) -> Callable[[], None]:
    """Validate once and return a function that launches :func:`fixed_work` (for :func:`~labhelpers.benchmark`).

    Args:
        x_d, out_d: float32 vectors of equal length, on the device (or NumPy under the simulator).
        blocks, threads: the grid, any size: the kernel's grid-stride loop covers every element.
        reps: multiply-adds per element.
    """
    validate.array(x_d, "x", dtype=np.float32, ndim=1)
    validate.array(out_d, "out", dtype=np.float32, ndim=1, shape=tuple(x_d.shape))
    validate.grid_shape(blocks, "blocks")
    threads = validate.threads_per_block(threads)
    reps = validate.integer(reps, "reps (multiply-adds per element)", minimum=0, allow_float=False)
    a32, b32, r = np.float32(a), np.float32(b), int(reps)
    kernel = fixed_work[int(blocks), int(threads)]

    def launch() -> None:
        kernel(x_d, out_d, a32, b32, r)

    launch.__name__ = f"fixed_work[{blocks}, {threads}]"
    return launch


def run_fixed_work(x: np.ndarray, blocks: int, threads: int = 256, reps: int = 8,
                   a: float = A, b: float = B) -> np.ndarray:
    """Copy ``x`` to the device, run :func:`fixed_work` on a ``blocks x threads`` grid, return the result.

    Any grid gives the same answer; that is the point of the grid-stride loop.
    """
    validate.array(x, "x", dtype=np.float32, ndim=1)
    x_d = cuda.to_device(x)
    out_d = cuda.device_array_like(x_d)
    fixed_work_launcher(x_d, out_d, blocks, threads, reps, a, b)()
    return to_host(out_d)


# --------------------------------------------------------------------------- the serial part of a program
@cuda.jit
def serial_chain(state, steps, a, b):
    """One thread applies ``v -> a * v + b`` ``steps`` times to ``state[0]``: a chain no grid can shorten.

    Each step needs the previous step's result, so the chain takes ``steps`` times the
    latency of one step whatever the launch; extra threads do nothing. That latency is not
    the FMA's 4 cycles: the 64-bit trip counter of Numba's ``range`` loop (compare, select,
    add with carry) is a longer dependent chain (chapter 2 measures how long one step takes).
    """
    if cuda.grid(1) == 0:
        v = state[0]
        for _ in range(steps):
            v = a * v + b
        state[0] = v


def serial_chain_launcher(state_d, steps: int, a: float = A, b: float = B) -> Callable[[], None]:
    """Validate once and return a function that launches :func:`serial_chain` on one thread."""
    validate.array(state_d, "state", dtype=np.float32, ndim=1)
    if state_d.shape[0] < 1:
        raise ValueError("state must hold at least one element")
    steps = validate.integer(steps, "steps", minimum=0, allow_float=False)
    a32, b32, s = np.float32(a), np.float32(b), int(steps)
    kernel = serial_chain[1, 1]

    def launch() -> None:
        kernel(state_d, s, a32, b32)

    launch.__name__ = "serial_chain[1, 1]"
    return launch


@cuda.jit
def empty_kernel(x):
    """Does nothing: launching it measures what a superstep's barrier alone costs (BSP's ``l``)."""
    i = cuda.grid(1)
    if i < 0:  # never true; keeps the argument used
        x[0] = 0


# --------------------------------------------------------------------------- supersteps
@cuda.jit
def block_sums(x, partial):
    """Superstep: block ``b`` writes the sum of its ``SUM_THREADS`` elements of ``x`` to ``partial[b]``.

    Launch with ``SUM_THREADS`` threads per block and ``ceil(x.size / SUM_THREADS)`` blocks.
    The block's threads cooperate through shared memory, separated by ``syncthreads()``,
    the block-level barrier; blocks never wait for each other.
    """
    buf = cuda.shared.array(SUM_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = np.float32(0)
    if i < x.size:  # guard the load, never the barrier: threads past the end contribute 0
        v = x[i]
    buf[t] = v
    cuda.syncthreads()  # RAW: every thread's value must be in buf before any thread reads a neighbour's
    step = SUM_THREADS // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()  # RAW: this round's sums must land before the next round reads them
        step //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buf[0]


@cuda.jit
def scale(x, total, out):
    """Superstep: ``out[i] = x[i] / total[0]``, where ``total`` was written by an earlier launch."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] / total[0]


def device_sum(x_d) -> tuple[object, int]:
    """Sum a float32 device vector with :func:`block_sums`, one launch (one superstep) per level.

    Each launch shrinks the vector ``SUM_THREADS`` times: blocks cannot wait for each
    other inside a kernel, so the next level has to be a new launch.

    Returns:
        ``(total_d, supersteps)``: a one-element device array and the number of launches.
    """
    validate.array(x_d, "x", dtype=np.float32, ndim=1)
    if x_d.shape[0] < 1:
        raise ValueError("cannot sum an empty vector")
    current, launches = x_d, 0
    while True:
        launch = launch_1d(current.shape[0], SUM_THREADS)
        partial = cuda.device_array(launch.blocks, dtype=np.float32)
        block_sums[launch.blocks, SUM_THREADS](current, partial)
        launches += 1
        current = partial
        if launch.blocks == 1:
            return current, launches


def normalize(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``x / x.sum()`` as a sequence of BSP supersteps (kernel launches); returns the result and their count."""
    validate.array(x, "x", dtype=np.float32, ndim=1)
    if x.shape[0] < 1:
        raise ValueError("cannot normalise an empty vector")
    x_d = cuda.to_device(x)
    total_d, launches = device_sum(x_d)
    out_d = cuda.device_array_like(x_d)
    launch = launch_1d(x.shape[0], 256)
    scale[launch.blocks, launch.threads](x_d, total_d, out_d)
    return to_host(out_d), launches + 1
