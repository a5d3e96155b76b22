"""Compile the kernels of launches.json for the GPUs students get, with no GPU: registers, shared memory, spills.

    python tools/compile_check/compile_kernels.py [--jobs 2] [--only SUBSTRING]

Loads numba-cuda in compile-only mode (``LABHELPERS_BACKEND=compile``), compiles each recorded kernel and
signature to PTX once per compute capability (``cuda.compile_ptx(py_func, sig, cc=cc)``, NVVM of the
``nvidia-cuda-nvcc-cu12`` wheel), assembles it with that wheel's ``ptxas -arch=sm_XX -v`` and reads the
registers per thread, static shared memory per block and spill bytes. Results are cached in
``tools/compile_check/resources.json`` by a hash of the kernel's source (its module, the modules of the device
functions it calls), the signature, the architecture and the compiler versions: only changed kernels are compiled
again. ``tests/test_compile_targets.py`` runs this and checks every recorded launch against each architecture.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ["LABHELPERS_BACKEND"] = "compile"
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "launches.json"
RESOURCES = HERE / "resources.json"
#: The architectures students get: T4 (7.5), A100 (8.0), RTX 30xx / A10 (8.6), L4 (8.9), H100 (9.0).
ARCHITECTURES = ((7, 5), (8, 0), (8, 6), (8, 9), (9, 0))

import labhelpers  # noqa: E402  (after the backend is chosen)
import numba  # noqa: E402
from numba import cuda, types  # noqa: E402

_ARRAY = re.compile(r"^(readonly )?array\((\w+), (\d+)d, ([CFA])\)$")


def parse_type(text: str) -> types.Type:
    """A Numba type from its printed name, as tools/record_launches.py records it."""
    m = _ARRAY.match(text)
    if m:
        return types.Array(getattr(types, m.group(2)), int(m.group(3)), m.group(4), readonly=bool(m.group(1)))
    if hasattr(types, text) and isinstance(getattr(types, text), types.Type):
        return getattr(types, text)
    m = re.match(r"^UniTuple\((\w+) x (\d+)\)$", text)
    if m:
        return types.UniTuple(getattr(types, m.group(1)), int(m.group(2)))
    raise ValueError(f"cannot read the recorded type {text!r}: extend parse_type")


def load_kernel(path: str):
    """The kernel object of a manifest path (``labhelpers.kernels.topic.name`` or ``labs/solutions/f.py:name``)."""
    if ":" in path:
        file, name = path.split(":")
        spec = importlib.util.spec_from_file_location(f"_compile_check_{Path(file).stem}", ROOT / file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def source_hash(kernel, signature: list[str], cc: tuple[int, int]) -> str:
    """Hash of what the compiled result depends on: sources of the kernel and its device functions, types, compilers."""
    fn = kernel.py_func
    files = {inspect.getsourcefile(fn)}
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        py = getattr(value, "py_func", None)
        if py is not None:
            files.add(inspect.getsourcefile(py))
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(Path(f).read_bytes())
    h.update(repr((fn.__qualname__, signature, cc, numba.__version__, _versions())).encode())
    return h.hexdigest()[:20]


def _versions() -> str:
    from importlib.metadata import version

    return f"numba-cuda {version('numba-cuda')}, nvcc {version('nvidia-cuda-nvcc-cu12')}"


def ptxas_path() -> str:
    """The ptxas of the nvidia-cuda-nvcc-cu12 wheel."""
    import nvidia.cuda_nvcc

    return str(Path(list(nvidia.cuda_nvcc.__path__)[0]) / "bin" / "ptxas")


_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def assemble(ptx: str, cc: tuple[int, int]) -> dict:
    """Registers, static shared memory, stack frame and spills of the kernel entry of ``ptx`` on ``sm_XY``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        run = subprocess.run([ptxas_path(), f"-arch=sm_{cc[0]}{cc[1]}", "-v", "-o", str(Path(tmp) / "k.cubin"),
                              str(src)], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ptxas failed for sm_{cc[0]}{cc[1]}: {run.stderr.strip()[-500:]}")
    out = run.stderr + run.stdout
    entry = out.split("Compiling entry function", 1)[-1]
    used, spill = _USED.search(entry), _SPILL.search(entry)
    return {"registers": int(used.group(1)), "static_shared": int(used.group(2) or 0),
            "stack": int(spill.group(1)) if spill else 0,
            "spill_stores": int(spill.group(2)) if spill else 0, "spill_loads": int(spill.group(3)) if spill else 0}


class _TargetDevice:
    """Stands in for the current device while compiling: numba-cuda asks it for the compute capability when it
    compiles a device function a kernel calls (there is no GPU here, and the answer must be the target's)."""

    def __init__(self, cc: tuple[int, int]) -> None:
        self.compute_capability = cc


def compile_one(task: tuple[str, list[str], tuple[int, int]]) -> tuple[str, dict]:
    """Compile one kernel, signature and architecture; returns (cache key, result or error)."""
    path, signature, cc = task
    kernel = load_kernel(path)
    key = f"{path}|{','.join(signature)}|sm_{cc[0]}{cc[1]}"
    try:
        sig = types.void(*[parse_type(t) for t in signature])
        options = {k: v for k, v in kernel.targetoptions.items() if k in ("fastmath", "lineinfo", "debug", "opt")}
        from numba.cuda import compiler, dispatcher
        from labhelpers.patching import patched

        device = _TargetDevice(cc)
        with patched((dispatcher, "get_current_device", lambda: device),
                     (compiler, "get_current_device", lambda: device)):
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=cc, **options)
        result = assemble(ptx, cc)
    except Exception as exc:  # reported by the test with the kernel and architecture
        result = {"error": f"{type(exc).__name__}: {str(exc).strip()[:400]}"}
    result["hash"] = source_hash(kernel, signature, cc)
    return key, result


def compile_all(jobs: int = 2, only: str = "") -> dict:
    """Compile what changed since resources.json was written; return (and store) every result."""
    manifest = json.loads(MANIFEST.read_text())
    cached = json.loads(RESOURCES.read_text()) if RESOURCES.exists() else {}
    results, todo = {}, []
    for path, entry in manifest.items():
        if only and only not in path:
            continue
        kernel = load_kernel(path)
        for signature in entry["signatures"]:
            for cc in ARCHITECTURES:
                key = f"{path}|{','.join(signature)}|sm_{cc[0]}{cc[1]}"
                old = cached.get(key)
                if old and old.get("hash") == source_hash(kernel, signature, cc) and "error" not in old:
                    results[key] = old
                else:
                    todo.append((path, signature, cc))
    if todo:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for key, result in pool.map(compile_one, todo, chunksize=4):
                results[key] = result
    if not only:
        RESOURCES.write_text(json.dumps(dict(sorted(results.items())), indent=0) + "\n")
    print(f"{len(results)} compiled results ({len(todo)} compiled now, {len(results) - len(todo)} from the cache)")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="", help="compile only kernels whose path contains this")
    args = parser.parse_args()
    results = compile_all(args.jobs, args.only)
    errors = {k: v["error"] for k, v in results.items() if "error" in v}
    for k, e in errors.items():
        print(f"FAILED {k}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
