"""The timer's own kernels: what :mod:`labhelpers.timing` launches around the work it times.

* :func:`sleeper`: one thread that sleeps (``cuda.nanosleep`` in a loop). :func:`labhelpers.benchmark` launches it
  before its start event, so the timed launches queue behind it while Python issues them and the events bracket
  GPU time only (NVIDIA's nvbench calls this a "blocking kernel"). GPU only: the simulator has no ``nanosleep``.
  Chapter 11's event and queue measurements (:mod:`labhelpers.experiments.streams`) use it as a kernel of a
  known length.
* :func:`fill`: writes a value to every element; :func:`labhelpers.benchmark` fills a buffer larger than the L2
  cache with it to flush the cache between repetitions (``flush_l2=True``).

Nothing here times anything: :mod:`labhelpers.timing` does. The copy kernel chapter 7 times with four clocks is
the chapter's, in :mod:`labhelpers.kernels.roofline_stopwatch`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

#: Nanoseconds of one :func:`sleeper` step (``cuda.nanosleep`` sleeps at most about a millisecond per call).
SLEEP_STEP_NS = 10_000


@cuda.jit
def sleeper(steps):
    """Sleep for about ``steps`` x :data:`SLEEP_STEP_NS` nanoseconds (launch it as ``sleeper[1, 1](steps)``)."""
    for _ in range(steps):
        cuda.nanosleep(SLEEP_STEP_NS)


@cuda.jit
def fill(buf, value):
    """``buf[i] = value`` for every ``i``: a grid-stride loop, any size."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < buf.size:
        buf[i] = value
        i += stride


def sleep_steps(ms: float) -> int:
    """The :func:`sleeper` steps for a sleep of about ``ms`` milliseconds (at least one)."""
    return max(1, int(np.ceil(ms * 1e6 / SLEEP_STEP_NS)))
