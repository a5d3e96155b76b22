"""One GPU shared by several test processes: every measurement runs on a quiet GPU.

A teacher's GPU suite (``tools/run_gpu_tests.sh``) runs package tests in several pytest-xdist workers and notebooks
in several nbval lanes on the same GPU, because compiling kernels and drawing figures keep many CPU cores busy. A
timing taken while another process launches kernels on the same GPU measures both, and a measured exercise would
then pass or fail by chance. So, when ``LABHELPERS_GPU_LOCK`` names a lock file (the runner gives each GPU its own):

* every notebook cell (:func:`labhelpers.setup` registers the cell hooks; a package test too, where a runner sets
  the variable for tests) holds the GPU **shared** while it runs: any number of them run at once;
* every measurement (:func:`labhelpers.timing.benchmark`, the event timings of chapter 11) holds it
  **exclusively**: it waits until the tests and cells running in other processes end, and no new one starts until
  it is done. Inside a test or a cell the exclusive hold lasts to the end of that test or cell: a sweep of fifty
  timings waits once, and a measured exercise's two timings (the student's and the yardstick) share one quiet
  period. A measurement that waits is queued first (a turnstile), so a stream of short tests cannot starve it.

Without the variable (a student's notebook, CI under the simulator) every function here does nothing. The GPU suite's
package tests avoid the waiting altogether: ``tests/conftest.py`` replaces :func:`exclusive` in its parallel phase
by "skip this test and queue it", and the queued tests run one at a time afterwards.
The locks are ``flock`` locks on two files, released by the operating system if a process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

#: The environment variable naming the lock file of the GPU this process uses.
ENV = "LABHELPERS_GPU_LOCK"

_state = {"path": None, "main": None, "turnstile": None, "shared": 0, "exclusive": False}


def enabled() -> bool:
    """Whether measurements must wait for a quiet GPU (``LABHELPERS_GPU_LOCK`` is set)."""
    return bool(os.environ.get(ENV))


def _files() -> tuple[int, int]:
    path = os.environ[ENV]
    if _state["path"] != path:
        _state.update(path=path, shared=0, exclusive=False,
                      main=os.open(path, os.O_RDWR | os.O_CREAT, 0o666),
                      turnstile=os.open(path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o666))
    return _state["main"], _state["turnstile"]


def acquire_shared() -> None:
    """Hold the GPU shared (a test or a cell starts); nested calls count."""
    if not enabled():
        return
    main, turnstile = _files()
    _state["shared"] += 1
    if _state["shared"] == 1 and not _state["exclusive"]:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # behind any measurement already waiting
        fcntl.flock(main, fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)


def release_shared() -> None:
    """Let the GPU go (the test or the cell ended), the exclusive hold of a measurement inside it too."""
    if not enabled() or _state["shared"] == 0:
        return
    main, _ = _files()
    _state["shared"] -= 1
    if _state["shared"] == 0:
        fcntl.flock(main, fcntl.LOCK_UN)
        _state["exclusive"] = False


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Run the body on a quiet GPU: no test or cell of another process runs meanwhile. Inside a test or a cell
    (:func:`acquire_shared`) the GPU stays exclusive to the end of it; outside, to the end of the body."""
    if not enabled() or _state["exclusive"]:
        yield
        return
    main, turnstile = _files()
    if _state["shared"]:
        fcntl.flock(main, fcntl.LOCK_UN)  # never wait while holding it shared: two waiters would deadlock
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    fcntl.flock(main, fcntl.LOCK_EX)
    fcntl.flock(turnstile, fcntl.LOCK_UN)
    _state["exclusive"] = True
    try:
        yield
    finally:
        if not _state["shared"]:  # not inside a test or a cell: give the GPU back now
            _state["exclusive"] = False
            fcntl.flock(main, fcntl.LOCK_UN)


def measurement(func: Callable[..., T]) -> Callable[..., T]:
    """Decorate a function that times GPU work with its own events (chapter 11's timelines): it runs in
    :func:`exclusive`."""
    @functools.wraps(func)
    def quiet(*args, **kwargs):
        with exclusive():
            return func(*args, **kwargs)

    return quiet


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Hold the GPU shared for the body (what a test does)."""
    acquire_shared()
    try:
        yield
    finally:
        release_shared()


__all__ = ["ENV", "acquire_shared", "enabled", "exclusive", "measurement", "release_shared", "shared"]
