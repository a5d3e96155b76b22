"""Exceptions that tell the reader what to change.

Every error raised by labhelpers on bad input is one of these, and its message names
the offending value and the fix. Catch :class:`LabError` to catch them all.
"""

from __future__ import annotations


class LabError(Exception):
    """Base class of every error labhelpers raises on purpose."""


class NoGPUError(LabError, RuntimeError):
    """A real GPU was required but none is available."""


class GPUOnlyError(LabError, RuntimeError):
    """The feature needs a real GPU (warp intrinsics, real timings, streams...)."""


class LaunchConfigError(LabError, ValueError):
    """A launch configuration the hardware cannot run (too many threads, too much shared memory...)."""


class ArrayArgumentError(LabError, ValueError):
    """An array argument has the wrong dtype, shape, size or memory layout."""


class CheckFailed(LabError, AssertionError):
    """A student's kernel disagreed with the reference. Subclasses AssertionError so pytest and nbval see it."""
