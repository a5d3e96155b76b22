"""Chapter-independent checks of the first kernels and models (chapters add their own test files)."""

import numpy as np
import pytest

import labhelpers as lh
from labhelpers.kernels import cuda_intro as intro
from labhelpers.notebook import _fix_for, setup
from labhelpers.source import source_of


def test_setup_prints_the_banner(capsys):
    setup()
    expected = "[labhelpers] simulator" if lh.is_simulator() else "[labhelpers] GPU: "
    assert capsys.readouterr().out.startswith(expected)


def test_self_test_advice_names_the_fix():
    assert "driver" in _fix_for("CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
    assert "NVVM" in _fix_for("libNVVM cannot be found")
    assert "%pip install" in _fix_for("something else")


@pytest.mark.parametrize("n", [1, 31, 257])
def test_run_saxpy_matches_numpy(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    assert np.allclose(intro.run_saxpy(2.5, x, y), 2.5 * x + y, rtol=1e-5, atol=1e-6)  # a GPU fuses to FMA


def test_show_source_uses_the_package_kernel():
    text = source_of(intro.saxpy)
    assert "def saxpy" in text and "if i < out.size" in text
    with pytest.raises(TypeError):
        source_of(42)
    assert "def saxpy" in repr(lh.show_source(intro.saxpy))


def test_quiet_warnings_match_numba_cudas_ansi_wrapped_messages():
    import re

    from labhelpers.notebook import QUIET_WARNINGS

    message = "\x1b[1mGrid size 2 will likely result in GPU under-utilization due to low occupancy.\x1b[0m"
    assert any(re.match(p, message) for p in QUIET_WARNINGS)
