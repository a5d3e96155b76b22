"""The Colab installer installs what is missing and nothing else, with the GPU extra that matches the driver."""

from labhelpers import install_missing as im

REQUIRES = [
    "numpy<2.5,>=1.24", "pandas>=2.0", "numba-cuda<0.31,>=0.30",
    'numba-cuda[cu12]<0.31,>=0.30; extra == "gpu-cu12"', 'cupy-cuda12x>=13; extra == "gpu-cu12"',
    'numba-cuda[cu13]<0.31,>=0.30; extra == "gpu-cu13"', 'cupy-cuda13x>=13; extra == "gpu-cu13"',
]


def test_gpu_extra_follows_the_driver():
    assert im.gpu_extra(None) is None and im.gpu_extra(11) is None
    assert im.gpu_extra(12) == "gpu-cu12" and im.gpu_extra(13) == "gpu-cu13" and im.gpu_extra(14) == "gpu-cu13"


def test_extra_requirements_apply_only_with_their_driver():
    names = lambda extra: [str(r) for r in im.wanted(REQUIRES, extra)]  # noqa: E731
    assert not any("cupy" in n for n in names(None))
    assert any("cupy-cuda12x" in n for n in names("gpu-cu12")) and not any("13x" in n for n in names("gpu-cu12"))


def test_only_missing_or_unsatisfied_requirements_are_installed(monkeypatch):
    installed = {"numpy": "2.4.6", "pandas": "1.5.0"}  # pandas too old, numba-cuda missing

    def version(name):
        if name not in installed:
            raise im.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(im.metadata, "version", version)
    monkeypatch.setattr(im.metadata, "requires", lambda name: ['cuda-bindings>=12; extra == "cu12"'])
    todo = im.plan(REQUIRES, cuda_major=None)
    assert todo == ["pandas>=2.0", "numba-cuda<0.31,>=0.30"]  # no marker, no extra: what pip takes
    installed.update(pandas="2.2.0", **{"numba-cuda": "0.30.4"})
    assert im.plan(REQUIRES, cuda_major=None) == []
    # numba-cuda is there, but not the CUDA 12 libraries its [cu12] extra brings, nor CuPy
    assert im.plan(REQUIRES, cuda_major=12) == ["numba-cuda[cu12]<0.31,>=0.30", "cupy-cuda12x>=13"]
    installed.update(**{"cuda-bindings": "12.9", "cupy-cuda12x": "13.6"})
    assert im.plan(REQUIRES, cuda_major=12) == []


def test_numpy_newer_than_numba_cuda_supports_is_replaced(monkeypatch):
    monkeypatch.setattr(im.metadata, "version", lambda name: {"numpy": "2.5.0"}.get(name, "99"))
    assert im.plan(["numpy<2.5,>=1.24"], cuda_major=None) == ["numpy<2.5,>=1.24"]
