"""labhelpers: the tested package behind the gpu-course book.

Import it before anything imports ``numba.cuda``: the first thing it does is decide
whether kernels run on a real GPU or under Numba's CUDA simulator
(see :mod:`labhelpers.backend`). Then, in a notebook::

    import labhelpers as lh
    lh.setup()          # banner, warnings, plot defaults, GPU self-test
"""

from . import backend as _backend

_backend.configure()

from .arrays import to_device, to_host  # noqa: E402
from .backend import is_gpu, is_simulator  # noqa: E402
from .device import DeviceInfo, banner, device_info  # noqa: E402
from .errors import (  # noqa: E402
    ArgumentError,
    ArrayArgumentError,
    CheckFailed,
    GPUOnlyError,
    ImpossibleMeasurement,
    LabError,
    LaunchConfigError,
    NoGPUError,
    SimulatorTooSlow,
)
from .launch import Launch1D, blocks_for, launch_1d  # noqa: E402
from .validate import check_launch  # noqa: E402
from .measured import Measured, live_or_reference  # noqa: E402
from .notebook import setup  # noqa: E402
from .plotting import plot_comparison  # noqa: E402
from .racecheck import BarrierProblem, Race, RaceReport, check_races  # noqa: E402
from .refdata import Reference, load_reference  # noqa: E402
from .sizes import awkward_sizes, fp64_problem_size, problem_size  # noqa: E402
from .source import show_source  # noqa: E402
from .sweep import sweep  # noqa: E402
from .timing import Timing, benchmark, wall_time  # noqa: E402
from .widgets import interactive_figure  # noqa: E402
from . import launchguard as _launchguard, validate  # noqa: E402

_launchguard.install()  # kernel[grid, block] refuses what a GPU refuses, on both backends

__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "ArrayArgumentError", "CheckFailed", "DeviceInfo", "GPUOnlyError", "LabError", "Launch1D",
    "LaunchConfigError", "Measured", "NoGPUError", "Reference", "SimulatorTooSlow", "Timing", "awkward_sizes", "banner",
    "benchmark", "blocks_for", "check_launch", "device_info", "fp64_problem_size",
    "interactive_figure", "is_gpu", "is_simulator", "launch_1d", "live_or_reference", "load_reference",
    "plot_comparison", "problem_size", "setup", "show_source", "sweep", "to_device", "to_host", "validate",
    "wall_time",
]
__all__ += ["BarrierProblem", "Race", "RaceReport", "check_races"]
__all__ += ["ImpossibleMeasurement"]
