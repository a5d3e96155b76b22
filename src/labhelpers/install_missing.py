"""Install what a notebook runtime lacks for labhelpers, and only that (the Colab path).

The setup cell of every notebook installs labhelpers itself with ``--no-deps`` (so pip never replaces a package
the runtime already has, NumPy above all), then runs this file by its path::

    %run /path/to/site-packages/labhelpers/install_missing.py

It must not import labhelpers (whose dependencies may be what is missing), so it uses the standard library and
pip's own ``packaging``. It reads labhelpers' declared requirements from the installed metadata (the one place
they live: ``pyproject.toml``), adds the GPU extra that matches the driver (``gpu-cu12`` or ``gpu-cu13``, from
``cuDriverGetVersion``) when there is an NVIDIA driver, and installs each requirement that is missing or whose
installed version does not satisfy it. When that changes a package the runtime had already imported (NumPy), it
says to restart the runtime.
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import os
import site
import importlib.metadata as metadata
import subprocess
import sys

try:  # pip vendors packaging; most runtimes also have it on its own
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
except ImportError:  # pragma: no cover - depends on the runtime
    from pip._vendor.packaging.markers import default_environment
    from pip._vendor.packaging.requirements import Requirement

DISTRIBUTION = "labhelpers"


def driver_cuda_major() -> int | None:
    """The CUDA major version the NVIDIA driver supports (12, 13...), or None without a driver."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
            return version.value // 1000
    return None


def gpu_extra(cuda_major: int | None) -> str | None:
    """The labhelpers extra for this driver: ``gpu-cu13`` for CUDA 13 and newer, ``gpu-cu12`` for 12, else None."""
    if cuda_major is None or cuda_major < 12:
        return None
    return "gpu-cu13" if cuda_major >= 13 else "gpu-cu12"


def wanted(requirements: list[str], extra: str | None) -> list[Requirement]:
    """The requirements that apply here: the base ones, plus those of ``extra``."""
    out = []
    for text in requirements:
        req = Requirement(text)
        env = dict(default_environment(), extra=extra or "")
        if req.marker is None or req.marker.evaluate(env):
            out.append(req)
    return out


def _as_install(req: Requirement) -> str:
    """``req`` as pip takes it on the command line: name, extras and versions, no marker."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _satisfied(req: Requirement, depth: int = 0) -> bool:
    """Whether ``req``'s distribution is installed in a version it allows, with what its extras need."""
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return False
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        return False
    if req.extras and depth < 2:
        for extra in req.extras:
            try:
                needs = wanted(metadata.requires(req.name) or [], extra)
            except metadata.PackageNotFoundError:
                return False
            extra_only = [r for r in needs if r.marker is not None]
            if not all(_satisfied(r, depth + 1) for r in extra_only):
                return False
    return True


def unsatisfied(reqs: list[Requirement]) -> list[str]:
    """The requirements whose distribution is missing, too old or too new, or lacks what its extras need."""
    return [_as_install(req) for req in reqs if not _satisfied(req)]


def plan(requirements: list[str], cuda_major: int | None) -> list[str]:
    """What to install for labhelpers' ``requirements`` on a machine whose driver supports ``cuda_major``."""
    return unsatisfied(wanted(requirements, gpu_extra(cuda_major)))


def _pth_files() -> set[str]:
    """The ``.pth`` start-up files in this interpreter's site-packages folders."""
    folders = set(site.getsitepackages()) | {site.getusersitepackages()}
    return {p for folder in folders for p in glob.glob(os.path.join(folder, "*.pth"))}


def main() -> int:
    """Install what is missing; print what was done."""
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        print("labhelpers is not installed: install it first (pip install --no-deps ...)", file=sys.stderr)
        return 1
    todo = plan(requirements, driver_cuda_major())
    if not todo:
        print("labhelpers: every requirement is already installed")
        return 0
    print("labhelpers: installing what this runtime lacks: " + ", ".join(todo))
    loaded_before = {Requirement(r).name.replace("-", "_") for r in todo} & set(sys.modules)
    before = _pth_files()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *todo], check=True)
    importlib.invalidate_caches()  # let this interpreter see the packages pip just added
    for path in sorted(_pth_files() - before):
        # Start-up hooks of new packages (numba-cuda's redirects numba.cuda to itself) run only when the
        # interpreter starts: run them now, so the notebook needs no restart.
        site.addpackage(os.path.dirname(path), os.path.basename(path), set(sys.path))
    if loaded_before:
        print(f"labhelpers: {', '.join(sorted(loaded_before))} changed while already imported: restart the runtime "
              "(Colab: Runtime > Restart session) and run this cell again.")
    return 0


if __name__ == "__main__":
    main()
