"""Choose between a real CUDA GPU and Numba's CUDA simulator.

The choice has to be made *before* ``numba.cuda`` is imported, because Numba reads
``NUMBA_ENABLE_CUDASIM`` once, at import time. ``import labhelpers`` therefore calls
:func:`configure` first thing, and every other module of the package imports
``numba.cuda`` only afterwards.

The rule, in order:

1. ``LABHELPERS_BACKEND=gpu`` asks for a GPU and fails loudly when there is none;
   ``LABHELPERS_BACKEND=sim`` forces the simulator even on a GPU machine.
   ``LABHELPERS_BACKEND=compile`` loads numba-cuda in GPU mode without asking for a GPU: kernels can be
   compiled for any architecture (``cuda.compile_ptx(..., cc=...)``, tools/compile_check) but not launched.
2. ``NUMBA_ENABLE_CUDASIM=1`` set by the user also means the simulator.
3. Otherwise (``auto``, the default) the CUDA driver is asked, through ``ctypes``,
   whether it sees at least one device. Yes: GPU. No driver or no device: simulator.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

from .errors import GPUOnlyError, NoGPUError

ENV_VAR = "LABHELPERS_BACKEND"
GPU = "gpu"
SIM = "sim"
COMPILE = "compile"
_VALID = ("auto", GPU, SIM, COMPILE)

_chosen: str | None = None


def driver_device_count() -> int:
    """Return how many CUDA devices the driver reports, or 0 without a usable driver.

    This talks to ``libcuda`` directly so that it works before Numba is imported and
    never raises: a missing library, a failing ``cuInit`` or any other problem all
    count as "no device".
    """
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.cuInit(0) != 0:
                return 0
            count = ctypes.c_int(0)
            if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
                return 0
            return int(count.value)
        except (AttributeError, OSError):
            return 0
    return 0


def _numba_cuda_already_imported() -> bool:
    return "numba.cuda" in sys.modules


def _mode_of_imported_numba() -> str:
    from numba.cuda.core import config  # numba-cuda's config: read after the backend is chosen

    return SIM if config.ENABLE_CUDASIM else GPU


def requested() -> str:
    """Return the backend asked for in ``LABHELPERS_BACKEND`` (``auto`` when unset).

    Raises:
        ValueError: the variable holds something other than ``auto``, ``gpu`` or ``sim``.
    """
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value not in _VALID:
        raise ValueError(
            f"{ENV_VAR}={value!r} is not understood: use one of {', '.join(_VALID)} "
            f"(or unset it to let labhelpers detect the GPU)."
        )
    return value


def configure() -> str:
    """Decide the backend once per process and set up Numba accordingly.

    Returns:
        ``"gpu"`` or ``"sim"``.

    Raises:
        NoGPUError: a GPU was asked for (``LABHELPERS_BACKEND=gpu``) but none is usable.
        RuntimeError: ``numba.cuda`` was imported before labhelpers in the other mode.
    """
    global _chosen
    if _chosen is not None:
        return _chosen

    want = requested()
    if want == COMPILE:  # compile-only: GPU mode of numba-cuda, no driver asked (nothing will launch)
        want = GPU
    elif want == "auto":
        if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
            want = SIM
        else:
            want = GPU if driver_device_count() > 0 else SIM
    elif want == GPU and driver_device_count() == 0:
        raise NoGPUError(
            f"{ENV_VAR}=gpu asks for a CUDA GPU, but the CUDA driver reports none. "
            "In Colab choose Runtime > Change runtime type > a GPU, then restart; "
            f"elsewhere check `nvidia-smi`. To run on the CPU simulator instead, unset {ENV_VAR} "
            f"or set {ENV_VAR}=sim."
        )

    if _numba_cuda_already_imported():
        have = _mode_of_imported_numba()
        if have != want:
            raise RuntimeError(
                f"numba.cuda was imported before labhelpers, in {'simulator' if have == SIM else 'GPU'} "
                f"mode, but labhelpers chose {'the simulator' if want == SIM else 'the GPU'}. "
                "Restart the kernel and run `import labhelpers` before importing numba.cuda."
            )
    elif want == SIM:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"

    _chosen = want
    return _chosen


def is_simulator() -> bool:
    """True when kernels run under Numba's CUDA simulator (no GPU timings exist)."""
    return configure() == SIM


def is_gpu() -> bool:
    """True when kernels run on a real CUDA GPU."""
    return configure() == GPU


#: What :func:`require_gpu` says a measurement does, unless the caller says more precisely.
TIMES_GPU_WORK = "times GPU work (the simulator's times say nothing about a GPU)"
#: What :func:`require_gpu` says the chapter does instead, unless the caller says otherwise.
SHOWS_REFERENCE = "The chapter shows reference data measured on a real GPU instead."
_CUPY_EXTRA = "install labhelpers with the gpu-cu12 or gpu-cu13 extra, as the README says"


def require_gpu(what: str, *, because: str = TIMES_GPU_WORK, instead: str = SHOWS_REFERENCE,
                needs_cupy: bool = False) -> None:
    """Raise :class:`~labhelpers.errors.GPUOnlyError` unless ``what`` can run here: the one "needs a GPU" guard.

    Every message has one shape: ``"<what> <because>, so it only runs on a real GPU, and there is no GPU
    here: ..."`` then ``instead`` (what the chapter shows in its place); with ``needs_cupy=True`` a GPU
    without CuPy gets ``"<what> needs CuPy, which is not installed here (...)"`` then ``instead``.

    Args:
        what: the function or feature, as the reader knows it (``"time_config"``, ``"the warp-shuffle
            block scan"``).
        because: why it needs a GPU, read after ``what`` (``"uses cuda.activemask(), which Numba's CUDA
            simulator does not have"``).
        instead: one sentence: what the chapter shows instead, or where the measurements are.
        needs_cupy: it calls CuPy as well, so a GPU without CuPy refuses it too.

    Raises:
        GPUOnlyError: under the simulator, or (``needs_cupy``) without CuPy.
    """
    if is_simulator():
        raise GPUOnlyError(f"{what} {because}, so it only runs on a real GPU, and there is no GPU here: this is "
                           f"Numba's CUDA simulator (in Colab: Runtime > Change runtime type > GPU). {instead}")
    if needs_cupy:
        if not cupy_usable():
            raise GPUOnlyError(f"{what} needs CuPy, which is not installed here ({_CUPY_EXTRA}). {instead}")


@functools.lru_cache(maxsize=None)
def cupy_usable() -> bool:
    """Whether CuPy imports and runs here (never under the simulator): the one test, which :mod:`labhelpers.xp` uses.

    A CuPy built for another CUDA version imports but fails at its first allocation, so one tiny array is made.
    """
    if is_simulator():
        return False
    try:
        import cupy  # optional: the GPU extra

        cupy.zeros(1)
        return True
    except Exception:  # noqa: BLE001  (any failure means the same: no usable CuPy)
        return False
