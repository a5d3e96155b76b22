"""Exceptions that tell the reader what to change.

Every error raised by labhelpers on bad input is one of these, and its message names
the offending value and the fix. Catch :class:`LabError` to catch them all.
"""

from __future__ import annotations


class LabError(Exception):
    """Base class of every error labhelpers raises on purpose."""

    def _render_traceback_(self) -> list[str]:
        """How IPython (Jupyter, Colab, the built book) shows the error: its message alone.

        The message already says what went wrong and what to change; a traceback through labhelpers'
        internals (with the paths of whoever executed the notebook) would only push it off the screen.
        """
        return [f"{type(self).__name__}: {self}"]


class NoGPUError(LabError, RuntimeError):
    """A real GPU was required but none is available."""


class GPUOnlyError(LabError, RuntimeError):
    """The feature needs a real GPU (warp intrinsics, real timings, streams...)."""


class ArgumentError(LabError, TypeError, ValueError):
    """An argument of the wrong type or value; the message names it and says what to pass instead.

    Both a TypeError and a ValueError, so ``except TypeError`` and ``except ValueError`` both catch
    it (raised by :mod:`labhelpers.validate`).
    """


class LaunchConfigError(ArgumentError):
    """A launch configuration the hardware cannot run (too many threads, too much shared memory...)."""


class ArrayArgumentError(ArgumentError):
    """An array argument has the wrong dtype, shape, size or memory layout."""


class SimulatorTooSlow(LabError, RuntimeError):
    """A launch (or a race check) the simulator would need minutes or hours for: a GPU-sized input; use
    ``lh.problem_size``."""


class CheckFailed(LabError, AssertionError):
    """A student's kernel disagreed with the reference. Subclasses AssertionError so pytest and nbval see it."""


class ImpossibleMeasurement(LabError, ValueError):
    """A measurement no GPU can produce: a time of zero or less, a rate above a ceiling measured on the same GPU,
    or a kernel whose check failed. A bug to fix (usually the kernel did not do the work it claims), never a
    point to plot; the message names the measured value, the ceiling and the likely cause."""
