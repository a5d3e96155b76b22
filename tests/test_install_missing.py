"""The Colab installer installs what is missing and nothing else, and stops with one sentence when it must.

``tools/colab_install_check.py`` runs it for real in a model of Colab's runtime; these tests pin its decisions.
"""

import sys
from pathlib import Path

import pytest

from labhelpers import install_missing as im

ROOT = Path(__file__).resolve().parents[1]

from notebook_tools import needs, setup_cell_source  # noqa: E402

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

REQUIRES = [
    "numpy<2.5,>=1.24", "pandas>=2.0", "ipywidgets>=7.7", "numba-cuda<0.31,>=0.22",
    'numba-cuda[cu12]<0.31,>=0.22; extra == "gpu-cu12"', 'cupy-cuda12x>=13; extra == "gpu-cu12"',
    'numba-cuda[cu13]<0.31,>=0.22; extra == "gpu-cu13"', 'cupy-cuda13x>=13; extra == "gpu-cu13"',
    'pyopencl>=2024.1; extra == "opencl"',
]
#: Part of Colab's GPU runtime (tools/colab/pip-freeze.gpu.txt).
COLAB = {"numpy": "2.1.3", "pandas": "2.2.3", "ipywidgets": "7.7.1", "numba-cuda": "0.22.2",
         "cupy-cuda12x": "14.0.1", "cuda-bindings": "12.9.7"}


@pytest.fixture
def no_extra_requirements(monkeypatch):
    """Installed distributions' extras need what the test says (numba-cuda[cu12] needs cuda-bindings 12)."""
    monkeypatch.setattr(im.metadata, "requires", lambda name: ['cuda-bindings<13,>=12.9; extra == "cu12"'])


def test_gpu_extra_follows_the_driver():
    assert im.gpu_extra(None) is None and im.gpu_extra(11) is None
    assert im.gpu_extra(12) == "gpu-cu12" and im.gpu_extra(13) == "gpu-cu13" and im.gpu_extra(14) == "gpu-cu13"


def test_extra_requirements_apply_only_when_asked():
    names = lambda *extras: [str(r) for r in im.wanted(REQUIRES, extras)]  # noqa: E731
    assert not any("cupy" in n or "pyopencl" in n for n in names(None))
    assert any("cupy-cuda12x" in n for n in names("gpu-cu12")) and not any("13x" in n for n in names("gpu-cu12"))
    assert any("pyopencl" in n for n in names("gpu-cu12", "opencl"))


def test_colab_keeps_what_it_ships(no_extra_requirements):
    """Colab's ipywidgets 7.7.1, numba-cuda 0.22.2 and CuPy stay: only chapter 12's pyopencl is installed."""
    colab = im.Installed(COLAB)
    assert im.plan(REQUIRES, cuda_major=12, installed=colab) == []
    assert im.plan(REQUIRES, cuda_major=12, needs=["opencl"], installed=colab) == ["pyopencl>=2024.1"]


def test_only_missing_or_unsatisfied_requirements_are_installed(no_extra_requirements):
    runtime = im.Installed({"numpy": "2.4.6", "pandas": "1.5.0", "ipywidgets": "8.1.0"})  # old pandas, no numba-cuda
    assert im.plan(REQUIRES, cuda_major=None, installed=runtime) == ["pandas>=2.0", "numba-cuda<0.31,>=0.22"]
    runtime.versions.update(pandas="2.2.0", **{"numba-cuda": "0.30.4"})
    assert im.plan(REQUIRES, cuda_major=None, installed=runtime) == []
    # numba-cuda is there, but not the CUDA 12 libraries its [cu12] extra brings, nor CuPy
    assert im.plan(REQUIRES, cuda_major=12, installed=runtime) == ["numba-cuda[cu12]<0.31,>=0.22", "cupy-cuda12x>=13"]
    runtime.versions.update(**{"cuda-bindings": "12.9.7", "cupy-cuda12x": "13.6"})
    assert im.plan(REQUIRES, cuda_major=12, installed=runtime) == []


def test_numpy_newer_than_numba_cuda_supports_is_replaced(no_extra_requirements):
    newer = im.Installed(dict(COLAB, numpy="2.5.0"))
    assert im.plan(REQUIRES, cuda_major=12, installed=newer) == ["numpy<2.5,>=1.24"]


def test_a_replaced_package_python_had_loaded_stops_the_cell_with_one_sentence(monkeypatch, capsys):
    """NumPy 2.5 replaced while loaded: the cell stops before any code runs on old and new modules mixed."""
    monkeypatch.setattr(im.metadata, "requires", lambda name: ["numpy<2.5"])
    monkeypatch.setattr(im, "driver_cuda_major", lambda: None)
    monkeypatch.setattr(im, "plan", lambda *a, **k: ["numpy<2.5"])
    versions = iter([{"numpy": "2.5.0"}, {"numpy": "2.4.6"}])
    monkeypatch.setattr(im, "snapshot", lambda: next(versions))
    monkeypatch.setattr(im, "_pip_install", lambda todo, keep: None)
    with pytest.raises(im.SetupStopped) as stopped:
        im.main()
    message = str(stopped.value)
    assert "numpy" in message and im.RESTART in message and "\n" not in message
    assert stopped.value._render_traceback_() == [message]  # what IPython shows: the sentence, no traceback
    assert "replaced numpy 2.5.0 by 2.4.6" in capsys.readouterr().out


def test_a_package_added_or_not_loaded_needs_no_restart(monkeypatch, capsys):
    monkeypatch.setattr(im.metadata, "requires", lambda name: [])
    monkeypatch.setattr(im, "driver_cuda_major", lambda: None)
    monkeypatch.setattr(im, "plan", lambda *a, **k: ["pyopencl>=2024.1"])
    versions = iter([{"numpy": "2.1.3"}, {"numpy": "2.1.3", "pyopencl": "2026.1.4", "pytools": "2026.1.1"}])
    monkeypatch.setattr(im, "snapshot", lambda: next(versions))
    monkeypatch.setattr(im, "_pip_install", lambda todo, keep: None)
    assert im.main() == ["pyopencl>=2024.1"]
    assert "replaced" not in capsys.readouterr().out


def test_loaded_distributions_sees_imported_packages():
    import numpy  # noqa: F401
    assert "numpy" in im.loaded_distributions()


def test_failed_pip_stops_with_what_to_do(monkeypatch):
    class Done:
        returncode, stdout, stderr = 1, "", "Collecting x\nERROR: No matching distribution found for nosuch\n"

    monkeypatch.setattr(im.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(im.SetupStopped, match="(?s)No matching distribution found for nosuch.*%pip install"):
        im._pip_install(["nosuch"])


def test_chapter_12_gets_a_cpu_opencl_driver_only_where_none_is_installed(tmp_path):
    nobody = im.Installed({})
    assert im.opencl_plan(nobody, vendors=str(tmp_path)) == [im.POCL_WHEEL]
    assert im.opencl_plan(im.Installed({im.POCL_WHEEL: "3.0"}), vendors=str(tmp_path)) == []
    (tmp_path / "pocl.icd").write_text("libpocl.so.2\n")
    assert im.opencl_plan(nobody, vendors=str(tmp_path)) == []


def test_nvidia_opencl_is_named_once(tmp_path, monkeypatch):
    monkeypatch.setattr(im.ctypes, "CDLL", lambda name: object())  # as if the driver's OpenCL library were here
    assert "wrote" in im.name_nvidia_opencl(str(tmp_path / "vendors"))
    assert (tmp_path / "vendors" / "nvidia.icd").read_text().strip() == im.NVIDIA_OPENCL
    assert im.name_nvidia_opencl(str(tmp_path / "vendors")) is None


def test_setup_cell_asks_for_the_chapters_extras_only():
    assert needs("book/12_portability.ipynb") == needs("labs/12_portability_lab.ipynb") == ("opencl",)
    assert needs("book/01_cuda_in_python.ipynb") == ()
    assert '["setup"](["opencl"])' in setup_cell_source("labs/12_portability_lab.ipynb")
    assert '["setup"]()' in setup_cell_source("book/01_cuda_in_python.ipynb")


@pytest.fixture(autouse=True)
def no_notebook_setup(monkeypatch):
    """``lh.setup()`` (banner, warnings, plot defaults) is the notebook's business, not this test process's."""
    import labhelpers

    monkeypatch.setattr(labhelpers, "setup", lambda: None)


class _Shell:
    """What the setup cell asks of IPython when labhelpers is missing: the shell line (pip), recorded."""

    def __init__(self):
        self.commands = []

    def system(self, command):
        self.commands.append(command)


def _run_setup_cell(source: str, shell: _Shell) -> dict:
    """Run the setup cell as IPython runs it (its ``!pip`` line transformed), with ``shell`` for ``get_ipython()``."""
    from IPython.core.inputtransformer2 import TransformerManager

    namespace = {"get_ipython": lambda: shell}
    exec(compile(TransformerManager().transform_cell(source), "setup-cell", "exec"), namespace)
    return namespace


def test_setup_cell_is_five_lines_and_installs_the_wheel_here_else_the_release():
    source = setup_cell_source("book/01_cuda_in_python.ipynb")
    assert len(source.splitlines()) <= 5
    pip_line = next(line for line in source.splitlines() if " -m pip " in line)
    assert "--no-index -f . labhelpers" in pip_line and "--no-deps" in pip_line  # a labhelpers-*.whl beside it...
    assert "|| {sys.executable} -m pip install -q --no-deps git+https://github.com/" in pip_line  # ...else the release
    assert pip_line.lstrip().startswith("!{sys.executable} -m pip")  # the kernel's pip, not the first on PATH


def test_setup_cell_without_labhelpers_installs_it_then_runs_the_installer(monkeypatch, capsys):
    """The Colab branch: pip runs (recorded here), then install_missing.setup() returns labhelpers as ``lh``."""
    import importlib.util

    real = importlib.util.find_spec
    calls = iter([None])  # missing at the guard, found after pip
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: next(calls, real(name)) if name == "labhelpers" else real(name, *a))
    monkeypatch.setattr(im, "main", lambda needs=(), quiet=False: [])
    shell = _Shell()
    namespace = _run_setup_cell(setup_cell_source("book/01_cuda_in_python.ipynb"), shell)
    assert len(shell.commands) == 1 and "pip install" in shell.commands[0]
    assert namespace["lh"].__name__ == "labhelpers"


def test_setup_cell_without_a_release_says_what_to_do_in_one_message(monkeypatch):
    """The Colab branch with a pip that cannot install labhelpers: one SystemExit naming the fix, no traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "labhelpers" else real(name, *a))
    with pytest.raises(SystemExit) as stopped:  # IPython shows a SystemExit as its message alone
        _run_setup_cell(setup_cell_source("book/01_cuda_in_python.ipynb"), _Shell())
    message = str(stopped.value.code)
    assert "labhelpers is not installed" in message and "labhelpers-*.whl next to this notebook" in message
    assert "run this cell again" in message and "{" not in message


def test_setup_leaves_a_course_checkout_as_it_is(monkeypatch):
    """Imported from src/ (an editable install), setup() installs nothing and returns labhelpers."""
    monkeypatch.setattr(im, "main", lambda *a, **k: pytest.fail("main() ran on a course checkout"))
    assert not im.is_installed_package()
    assert im.setup().__name__ == "labhelpers"


def test_setup_runs_the_installer_quietly_where_labhelpers_is_a_package(monkeypatch):
    seen = []
    monkeypatch.setattr(im, "is_installed_package", lambda: True)
    monkeypatch.setattr(im, "main", lambda needs=(), quiet=False: seen.append((list(needs), quiet)) or [])
    im.setup(["opencl"])
    assert seen == [(["opencl"], True)]


def test_quiet_main_prints_nothing_when_nothing_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(im.metadata, "requires", lambda name: [])
    monkeypatch.setattr(im, "driver_cuda_major", lambda: None)
    assert im.main(quiet=True) == [] and capsys.readouterr().out == ""
    assert im.main() == [] and "everything the book needs" in capsys.readouterr().out


def test_what_is_installed_and_not_replaced_is_kept_as_it_is(no_extra_requirements):
    """pip gets numba-cuda 0.22.2 (and the rest) pinned beside numpy<2.5, so it picks a NumPy they accept."""
    newer = im.Installed(dict(COLAB, numpy="2.5.0"))
    todo = im.plan(REQUIRES, 12, installed=newer)
    keep = im.kept(REQUIRES, 12, [], todo, installed=newer)
    assert "numba-cuda==0.22.2" in keep and "ipywidgets==7.7.1" in keep and "cupy-cuda12x==14.0.1" in keep
    assert not any(k.startswith("numpy") for k in keep) and len(keep) == len(set(keep))
