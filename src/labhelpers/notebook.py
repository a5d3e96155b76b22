"""What the first cell of every chapter runs: :func:`setup`.

It decides the backend, prints the one-line banner, chooses which Numba warnings a
reader sees, sets plot defaults and, on a GPU, compiles and runs a tiny kernel so that
a broken installation (the usual Colab trouble: a driver older than the CUDA toolkit
numba-cuda compiles with) is caught in the first cell with the fix printed, not in
the middle of a lab.
"""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from numba import cuda

from . import backend, gpu_lock, plotting
from ._release import pip_requirement
from .device import DeviceInfo, banner, device_info
from .errors import LabError

#: Performance warnings numba-cuda prints on a GPU (and never under the simulator).
#: Small teaching grids trigger the first on every launch; chapters that teach implicit
#: copies show the second on purpose with ``warnings.catch_warnings()``.
QUIET_WARNINGS = (
    # numba-cuda wraps its messages in ANSI bold codes and ``filterwarnings`` matches from the
    # start of the message, hence the leading ``.*``.
    r".*Grid size .* will likely result in GPU under-utilization",
    r".*Host array used in CUDA kernel will incur copy overhead",
)


class SelfTestFailed(LabError, RuntimeError):
    """The GPU is there but a kernel does not compile or run; the message says how to fix it."""


def configure_warnings() -> None:
    """Silence the performance warnings listed in :data:`QUIET_WARNINGS`."""
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def configure_plots() -> None:
    """Readable, consistent matplotlib defaults for the book, and font sizes recorded in inline PNGs."""
    matplotlib.rcParams.update({"figure.dpi": 100, "axes.spines.top": False, "axes.spines.right": False,
                                "figure.figsize": (7, 4)})
    record_font_sizes()


def _png_with_font_sizes(fig) -> str:
    """The inline backend's PNG of ``fig`` (base64), with its smallest font and dpi in the PNG's metadata."""
    from IPython.core.pylabtools import print_figure  # notebook display only: IPython's PNG writer
    from matplotlib_inline.config import InlineBackend  # notebook display only: the inline backend's settings

    kwargs = dict(InlineBackend.instance().print_figure_kwargs)
    fig.draw_without_rendering()  # lays the figure out, so that its tick labels exist
    kwargs["metadata"] = {**kwargs.get("metadata", {}), **plotting.png_font_metadata(fig)}
    return print_figure(fig, "png", base64=True, **kwargs)


def record_font_sizes() -> None:
    """In a Jupyter kernel with the inline backend, write each figure's smallest font size (pt) and dpi into its
    PNG (``plotting.PNG_FONT_KEY``), where ``tools/browser_check.py`` reads them: text under 9 px on the website
    fails the check. Elsewhere (a script, another backend) nothing changes."""
    try:
        from IPython import get_ipython  # notebook display only: the running kernel, if any
        from matplotlib_inline.config import InlineBackend  # noqa: F401  (the inline backend is installed)
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or "inline" not in matplotlib.get_backend():
        return
    formatter = shell.display_formatter.formatters["image/png"]
    formatter.for_type(Figure, _png_with_font_sizes)


def _fix_for(message: str) -> str:
    text = message.lower()
    if "ptx" in text or "unsupported_ptx_version" in text or "222" in text:
        return ("The CUDA driver is older than the CUDA toolkit numba-cuda compiled with. Install the numba-cuda "
                "build that matches the driver's CUDA version (`nvidia-smi`, top right), e.g. for CUDA 12:\n"
                f'    %pip install "{pip_requirement("gpu-cu12")}"\nthen restart the runtime.')
    if "nvvm" in text or "libdevice" in text or "cudart" in text or "nvrtc" in text:
        return ("numba-cuda cannot find the CUDA compiler libraries (NVVM). Install them with the matching extra, e.g.\n"
                f'    %pip install "{pip_requirement("gpu-cu12")}"   (or gpu-cu13 for a CUDA 13 driver)\n'
                "then restart the runtime.")
    return ("A tiny test kernel failed on this GPU. Restart the runtime and run this cell first; if it still "
            f"fails, reinstall with `%pip install --force-reinstall \"{pip_requirement('gpu-cu12')}\"`.")


def self_test() -> None:
    """Compile and run a 64-element kernel and check its result.

    Raises:
        SelfTestFailed: with the likely cause and the command that fixes it.
    """
    try:
        @cuda.jit
        def twice_index(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = 2 * i

        out = cuda.device_array(64, dtype=np.int32)
        twice_index[2, 32](out)
        got = out.copy_to_host()
    except Exception as exc:  # anything from import to launch: report it with the fix
        raise SelfTestFailed(f"{type(exc).__name__}: {exc}\n\n{_fix_for(str(exc))}") from exc
    if not np.array_equal(got, 2 * np.arange(64)):
        raise SelfTestFailed("A test kernel ran but returned wrong values: the GPU or its driver is misbehaving. "
                             "Restart the runtime; in Colab, ask for a new GPU runtime.")


def hold_gpu_per_cell() -> None:
    """When the GPU suite runs notebooks side by side on one GPU (``LABHELPERS_GPU_LOCK`` set), each cell holds
    the GPU shared while it runs, so a measurement in another notebook waits for a quiet GPU
    (:mod:`labhelpers.gpu_lock`). Does nothing otherwise, or outside IPython."""
    if not gpu_lock.enabled():
        return
    try:
        from IPython import get_ipython  # optional: only a notebook (IPython) has cells to hook
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_labhelpers_gpu_lock", False):
        return
    shell.events.register("pre_run_cell", lambda *_: gpu_lock.acquire_shared())
    shell.events.register("post_run_cell", lambda *_: gpu_lock.release_shared())
    shell._labhelpers_gpu_lock = True
    gpu_lock.acquire_shared()  # the cell running now (setup's own) ends with post_run_cell


def setup() -> None:
    """Prepare a notebook: backend, banner, warnings, plots, and the GPU self-test.

    Call it once, in the first cell, right after ``import labhelpers as lh``.
    """
    backend.configure()
    configure_warnings()
    configure_plots()
    hold_gpu_per_cell()
    info: DeviceInfo = device_info()
    print(banner(info))
    if not info.is_simulator:
        self_test()
