"""Install what a notebook runtime lacks for labhelpers, and only that (the Colab path).

The setup cell of every notebook (five lines, written by ``tools/notebook_tools.py``) installs labhelpers itself
with ``--no-deps`` when it is missing (so pip never replaces a package the runtime already has), then runs this
file by its path and calls :func:`setup`::

    lh = runpy.run_path(".../site-packages/labhelpers/install_missing.py")["setup"](["opencl"])

:func:`setup` calls :func:`main` where labhelpers is installed as a package (Colab, a GPU image), leaves a course
checkout (labhelpers imported from the repository's ``src/``) as it is, then imports labhelpers, runs
``lh.setup()`` and returns the module. This file must not import labhelpers before that (its dependencies may be
what is missing), so it uses the standard library and pip's own ``packaging``. :func:`main` reads labhelpers'
declared requirements from the installed metadata (the one place they live: ``pyproject.toml``), adds the GPU
extra that matches the driver (``gpu-cu12`` or ``gpu-cu13``, from ``cuDriverGetVersion``) when there is an NVIDIA
driver and the extras the notebook names (``opencl`` for chapter 12), and installs each requirement that is missing
or whose installed version does not satisfy it. A package the runtime has in a version the book accepts is never
touched (Colab's ipywidgets 7.7, numba-cuda 0.22).

When an install changes a package Python has already loaded (NumPy newer than numba-cuda supports, say), it
stops the cell with one sentence (:class:`SetupStopped`: no traceback) saying to restart the session, before any
code can run on the mix of old and new modules. A failed pip gives one message with what to do.
"""

from __future__ import annotations

import ctypes
import glob
import importlib
import importlib.metadata as metadata
import importlib.util
import os
import re
import site
import subprocess
import sys
from collections.abc import Iterable, Mapping

try:  # pip vendors packaging; most runtimes also have it on its own
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
except ImportError:  # pragma: no cover - depends on the runtime
    from pip._vendor.packaging.markers import default_environment
    from pip._vendor.packaging.requirements import Requirement

DISTRIBUTION = "labhelpers"
#: What a student does when a package Python already loaded was replaced (Colab's menu, then the cell).
RESTART = "Runtime > Restart session, then run this cell again"
#: Where the OpenCL ICD loader looks for drivers (``OCL_ICD_VENDORS`` moves it), and NVIDIA's OpenCL library.
OPENCL_VENDORS = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
NVIDIA_OPENCL = "libnvidia-opencl.so.1"
#: A CPU OpenCL driver from PyPI, found by pyopencl's own ICD loader (chapter 12 runs its listings on the CPU).
POCL_WHEEL = "pocl-binary-distribution"


class SetupStopped(Exception):
    """Stops the setup cell with its message alone: IPython shows ``_render_traceback_``, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


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


def wanted(requirements: list[str], extras: Iterable[str | None] = ()) -> list[Requirement]:
    """The requirements that apply here: the base ones, plus those of each of ``extras``."""
    if isinstance(extras, str):
        extras = [extras]
    names = [""] + [e for e in extras if e]
    out = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate(dict(default_environment(), extra=e)) for e in names):
            out.append(req)
    return out


def _as_install(req: Requirement) -> str:
    """``req`` as pip takes it on the command line: name, extras and versions, no marker."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


class Installed:
    """The versions of the distributions of a runtime: this one's (default), or a given table (a model of Colab).

    ``versions`` maps distribution names to versions; a name it lacks is taken as not installed. The
    requirements of an installed distribution's extras are read from this interpreter's metadata.
    """

    def __init__(self, versions: Mapping[str, str] | None = None):
        self.versions = None if versions is None else {normalize(k): v for k, v in versions.items()}

    def version(self, name: str) -> str | None:
        """The installed version of ``name``, or None."""
        if self.versions is not None:
            return self.versions.get(normalize(name))
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    def satisfies(self, req: Requirement, depth: int = 0) -> bool:
        """Whether ``req``'s distribution is installed in a version it allows, with what its extras need."""
        version = self.version(req.name)
        if version is None:
            return False
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            return False
        if req.extras and depth < 2:
            try:
                needs = wanted(metadata.requires(req.name) or [], req.extras)
            except metadata.PackageNotFoundError:
                return False
            if not all(self.satisfies(r, depth + 1) for r in needs if r.marker is not None):
                return False
        return True


def unsatisfied(reqs: list[Requirement], installed: Installed | None = None) -> list[str]:
    """The requirements whose distribution is missing, too old or too new, or lacks what its extras need."""
    installed = installed or Installed()
    return [_as_install(req) for req in reqs if not installed.satisfies(req)]


def plan(requirements: list[str], cuda_major: int | None, needs: Iterable[str] = (),
         installed: Installed | None = None) -> list[str]:
    """What to install for labhelpers' ``requirements`` on a machine whose driver supports ``cuda_major``.

    ``needs`` are extras a notebook asks for (``opencl``); ``installed`` the runtime's versions (default: this one).
    """
    return unsatisfied(wanted(requirements, [gpu_extra(cuda_major), *needs]), installed)


def kept(requirements: list[str], cuda_major: int | None, needs: Iterable[str], todo: list[str],
         installed: Installed | None = None) -> list[str]:
    """``name==version`` of each requirement already installed and not in ``todo``: given to pip with ``todo``.

    pip then picks versions of ``todo`` that suit what stays: NumPy below 2.5 *and* within what the installed
    numba supports, rather than the newest NumPy below 2.5 and a numba that no longer imports.
    """
    installed = installed or Installed()
    changing = {normalize(Requirement(t).name) for t in todo}
    out = []
    for req in wanted(requirements, [gpu_extra(cuda_major), *needs]):
        version = installed.version(req.name)
        if version and normalize(req.name) not in changing and f"{req.name}=={version}" not in out:
            out.append(f"{req.name}=={version}")
    return out


def snapshot() -> dict[str, str]:
    """``{normalized name: version}`` of every distribution this interpreter sees."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(normalize(name), dist.version)
    return out


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """``{name: (old, new)}`` for every distribution added, removed or given another version."""
    return {n: (before.get(n), after.get(n)) for n in sorted(set(before) | set(after))
            if before.get(n) != after.get(n)}


def loaded_distributions() -> set[str]:
    """The (normalized) distributions with a module Python has already imported."""
    owners = metadata.packages_distributions()
    roots = {name.split(".")[0] for name in list(sys.modules)}
    for module in list(sys.modules.values()):  # numba-cuda is imported as numba.cuda from its own folder
        path = getattr(module, "__file__", None) or ""
        for folder in sys.path:
            if folder and path.startswith(folder.rstrip("/") + "/"):
                roots.add(path[len(folder.rstrip("/")) + 1:].split("/")[0].removesuffix(".py"))
                break
    return {normalize(d) for root in roots for d in owners.get(root, [])}


def opencl_plan(installed: Installed | None = None, vendors: str = OPENCL_VENDORS) -> list[str]:
    """What chapter 12 needs on top of pyopencl: a CPU OpenCL driver (PoCL's wheel) when the machine has none."""
    installed = installed or Installed()
    icds = " ".join(open(p).read() for p in glob.glob(os.path.join(vendors, "*.icd")))
    if "pocl" in icds or installed.version(POCL_WHEEL):
        return []
    return [POCL_WHEEL]


def name_nvidia_opencl(vendors: str = OPENCL_VENDORS) -> str | None:
    """Write ``nvidia.icd`` when NVIDIA's OpenCL library is here but no ICD file names it; say what was done."""
    icds = " ".join(open(p).read() for p in glob.glob(os.path.join(vendors, "*.icd")))
    if NVIDIA_OPENCL in icds:
        return None
    try:
        ctypes.CDLL(NVIDIA_OPENCL)
    except OSError:
        return None
    try:
        os.makedirs(vendors, exist_ok=True)
        with open(os.path.join(vendors, "nvidia.icd"), "w") as f:
            f.write(NVIDIA_OPENCL + "\n")
    except OSError:
        return (f"labhelpers: NVIDIA's OpenCL library is here but no file names it; as root: "
                f"echo {NVIDIA_OPENCL} > {vendors}/nvidia.icd")
    return f"labhelpers: wrote {vendors}/nvidia.icd, so OpenCL sees the GPU"


#: Builds and runs a one-line OpenCL kernel on the first CPU device, in a child process (a driver may crash).
_CPU_PROBE = """
import numpy as np, pyopencl as cl
dev = next(d for p in cl.get_platforms() for d in p.get_devices() if d.type & cl.device_type.CPU)
ctx = cl.Context([dev]); q = cl.CommandQueue(ctx)
k = cl.Program(ctx, "__kernel void f(__global float *x) { x[get_global_id(0)] += 1.0f; }").build().f
a = np.zeros(4, np.float32); buf = cl.Buffer(ctx, cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
k(q, (4,), None, buf); cl.enqueue_copy(q, a, buf); q.finish(); assert a.sum() == 4
"""


def opencl_cpu_note() -> str | None:
    """None when OpenCL builds and runs a kernel on the CPU here, else one sentence saying why chapter 12 cannot."""
    done = subprocess.run([sys.executable, "-c", _CPU_PROBE], capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return None
    said = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()] or ["no message"]
    return (f"labhelpers: OpenCL cannot compile for this machine's CPU ({said[-1].strip()[:160]}), so chapter 12's "
            "OpenCL cells on the CPU will fail here; its CUDA, Numba and GPU OpenCL cells still run.")


def _pth_files() -> set[str]:
    """The ``.pth`` start-up files in this interpreter's site-packages folders."""
    folders = set(site.getsitepackages()) | {site.getusersitepackages()}
    return {p for folder in folders for p in glob.glob(os.path.join(folder, "*.pth"))}


def _pip_install(todo: list[str], keep: list[str] = ()) -> None:
    """``pip install todo`` with ``keep`` (installed pins) beside it; a failure stops the cell with what to do."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *todo,
                           *keep], capture_output=True, text=True)
    if done.returncode:
        said = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-3:]
        raise SetupStopped("labhelpers: pip could not install " + ", ".join(todo) + ":\n    " + "\n    ".join(said)
                           + "\nCheck the runtime's network (Colab: Runtime > Disconnect and delete runtime, then "
                             "run this cell again), or install them yourself with %pip install and run this cell "
                             "again.")


def main(needs: Iterable[str] = (), quiet: bool = False) -> list[str]:
    """Install what is missing for labhelpers and the extras in ``needs``; return what was installed.

    With ``quiet``, nothing is printed when nothing is missing (the setup cell's output is then only the banner).

    Raises:
        SetupStopped: labhelpers is not installed, pip failed, or a package Python had already loaded changed
            (the message says to restart the session and run the cell again).
    """
    needs = list(needs)
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        raise SetupStopped("labhelpers is not installed: install it first (pip install --no-deps ...), "
                           "then run this cell again.") from None
    cuda_major = driver_cuda_major()
    todo = plan(requirements, cuda_major, needs)
    if "opencl" in needs:
        todo += opencl_plan()
    if todo:
        print("labhelpers: installing what this runtime lacks or has in a version the book cannot use: "
              + ", ".join(todo), flush=True)
        loaded = loaded_distributions()
        before, pth_before = snapshot(), _pth_files()
        _pip_install(todo, kept(requirements, cuda_major, needs, todo))
        importlib.invalidate_caches()  # let this interpreter see the packages pip just added
        for path in sorted(_pth_files() - pth_before):
            # Start-up hooks of new packages (numba-cuda's redirects numba.cuda to itself) run only when the
            # interpreter starts: run them now, so the notebook needs no restart.
            site.addpackage(os.path.dirname(path), os.path.basename(path), set(sys.path))
        changed = changes(before, snapshot())
        replaced = {n: v for n, v in changed.items() if v[0] is not None}
        if replaced:
            print("labhelpers: replaced " + ", ".join(f"{n} {old} by {new}" for n, (old, new) in replaced.items()))
        stale = sorted(set(replaced) & loaded)
        if stale:
            raise SetupStopped(f"labhelpers: the new {', '.join(stale)} takes effect only in a fresh Python (the old "
                               f"one is loaded): {RESTART}.")
    elif not quiet:
        print("labhelpers: this runtime has everything the book needs")
    if "opencl" in needs and (todo or not quiet):
        for said in (name_nvidia_opencl(), opencl_cpu_note()):
            if said:
                print(said)
    return todo


def is_installed_package() -> bool:
    """Whether labhelpers is imported from an installed package (site-packages or dist-packages: Colab, a GPU image),
    not from a course checkout's ``src/`` (an editable install), which :func:`setup` leaves as it is."""
    spec = importlib.util.find_spec(DISTRIBUTION)
    return spec is not None and "-packages" in (spec.origin or "")


def setup(needs: Iterable[str] = ()):
    """What the setup cell runs: :func:`main` (quiet) where labhelpers is an installed package, then ``import
    labhelpers``, ``lh.setup()``; returns the module (the notebook's ``lh``).

    Raises:
        SetupStopped: as :func:`main` (pip failed, or a restart is needed), before labhelpers is imported.
    """
    if is_installed_package():
        main(needs, quiet=True)
    import labhelpers  # noqa: PLC0415 - only now: main() may have just installed what it imports

    labhelpers.setup()
    return labhelpers


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SetupStopped as exc:
        sys.exit(str(exc))
