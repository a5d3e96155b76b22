"""Chapter "Portability": the same kernels in Numba, CUDA C, OpenCL C and OpenACC C, run for real.

The listings are real source files shipped with the package (``labhelpers/listings/``), the ones the
chapter shows and the tests compile:

* ``saxpy.cu``, ``matmul_tiled.cu``: CUDA C, compiled at run time by NVRTC through CuPy's
  ``RawModule`` (GPU only);
* ``saxpy.cl``, ``matmul_tiled.cl``: OpenCL C, built and run through ``pyopencl`` on any OpenCL
  device: the CPU through PoCL (everywhere, CI included) and an NVIDIA GPU through NVIDIA's OpenCL
  driver where it is installed;
* ``saxpy_acc.c`` (the lecture's four SAXPY versions and a one-loop SAXPY), ``matmul_acc.c`` (the
  directives added one at a time): OpenACC C, compiled with ``gcc -fopenacc`` into a shared library
  and called through ``ctypes``. Without an offload compiler GCC runs the compute regions on the host,
  in one thread; :func:`openacc_report` shows what the compiler decided for each loop.

Beside them, the Numba versions: :func:`saxpy_numba` (a CUDA kernel, which also runs under the
simulator), chapter 5's tiled kernel (:func:`labhelpers.kernels.matmul.tiled_kernel`), and the
CPU versions :func:`saxpy_cpu` and :func:`matmul_cpu` (``numba.njit(parallel=True)``).

Every ``run_*`` wrapper validates its arguments and returns NumPy. A missing toolchain (no
``pyopencl``, no OpenCL platform, no ``gcc`` or no ``-fopenacc``) raises :class:`ToolMissing`
saying what to install; a build that fails raises :class:`BuildError` carrying the compiler's log.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import html
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
from numba import cuda, float32, njit, prange

from .. import backend, validate
from ..counts import saxpy_bytes, saxpy_flops  # the one table of counts, under the names this chapter uses
from ..errors import ArgumentError, ArrayArgumentError, GPUOnlyError, LabError
from ..launch import blocks_for, tiles_for
from ..xp import xp as cp  # CuPy wherever backend.require_gpu(..., needs_cupy=True) passed
from . import matmul as mm
from ..source import source_of
from .. import device as device_mod

#: The listing files, in the order the chapter shows them.
LISTINGS: tuple[str, ...] = ("saxpy.cu", "saxpy.cl", "saxpy_acc.c", "matmul_tiled.cu", "matmul_tiled.cl",
                             "matmul_acc.c")
#: The tile edge of the tiled matmul in every model (chapter 5's default, 16 x 16 = 256 threads).
TILE = mm.DEFAULT_TILE
#: Threads per block (work-items per work-group) of the SAXPY launches.
SAXPY_THREADS = 256
#: The four SAXPY versions of the lecture, as functions of ``saxpy_acc.c`` (two SAXPYs each).
ACC_SAXPY_VERSIONS: tuple[str, ...] = ("naive", "kernels", "parallel", "data")
#: The OpenACC matmul versions of ``matmul_acc.c``, one directive added at a time.
ACC_MATMUL_VERSIONS: tuple[str, ...] = ("serial", "parallel", "collapse", "gang_vector", "kernels")
#: Where an OpenCL kernel runs: ``"cpu"`` (PoCL or another CPU driver) or ``"gpu"`` (e.g. NVIDIA's driver).
OPENCL_KINDS: tuple[str, ...] = ("cpu", "gpu")
#: GCC's flags for the OpenACC listings: optimise, warn (an unknown `#pragma acc` is otherwise silent), OpenACC on, a shared library, the parallelisation report.
OPENACC_FLAGS: tuple[str, ...] = ("-O3", "-Wall", "-fopenacc", "-fopt-info-optimized-omp", "-shared", "-fPIC")
#: What to install, said once for every message that needs it.
INSTALL_OPENCL = ("pip install pyopencl (the Python bindings), and an OpenCL driver: on Debian/Ubuntu "
                  "`sudo apt-get install pocl-opencl-icd ocl-icd-libopencl1` for the CPU (or run "
                  "`bash tools/ensure_opencl.sh`); for an NVIDIA GPU, the driver's libnvidia-opencl.so.1 named by "
                  "a file /etc/OpenCL/vendors/nvidia.icd")
INSTALL_GCC = ("install GCC with OpenACC support (Debian/Ubuntu: `sudo apt-get install gcc`, GCC 7 or newer; "
               "or run `bash tools/ensure_opencl.sh`), or set the CC environment variable to such a compiler")

# ------------------------------------------------------------------------------------------------- errors


class ToolMissing(LabError, RuntimeError):
    """A compiler, driver or library this chapter needs is not installed; the message says what to install."""


class BuildError(LabError, RuntimeError):
    """A listing did not compile. ``log`` holds the compiler's own messages (the build log)."""

    def __init__(self, message: str, log: str):
        super().__init__(f"{message}\n--- compiler log ---\n{log.strip()}")
        self.log = log


# ----------------------------------------------------------------------------------------------- listings


def listing_path(name: str) -> Path:
    """The path of listing ``name`` (one of :data:`LISTINGS`) inside the installed package."""
    validate.choice(name, "listing", LISTINGS)
    return Path(str(resources.files("labhelpers") / "listings" / name))


def listing(name: str) -> str:
    """The source text of listing ``name`` (one of :data:`LISTINGS`)."""
    return listing_path(name).read_text()


def listing_function(name: str, function: str) -> str:
    """One function of a listing: its comment block, signature and body (up to the ``}`` at column 0)."""
    lines = listing(name).splitlines()
    pattern = re.compile(rf"^(?:__kernel\s+)?void\s+{re.escape(function)}\s*\(")
    starts = [i for i, line in enumerate(lines) if pattern.match(line)]
    if not starts:
        sig = [i for i, line in enumerate(lines) if re.match(rf"^void\s+{re.escape(function)}\s*\(", line.strip())]
        starts = sig
    if not starts:
        found = re.findall(r"^(?:__kernel\s+)?void\s+(\w+)\s*\(", listing(name), flags=re.M)
        raise ArgumentError(f"listing {name} has no function {function!r}; it has {', '.join(found)}")
    start = starts[0]
    if start and lines[start - 1].startswith('extern "C"'):
        start -= 1
    while start and lines[start - 1].strip() and (lines[start - 1].lstrip().startswith(("/*", "*"))):
        start -= 1  # the comment block right above the function
    end = next(i for i in range(starts[0], len(lines)) if lines[i] == "}")
    return "\n".join(lines[start:end + 1]) + "\n"


def show_listing(name: str, function: str | None = None):
    """Display listing ``name`` (or one ``function`` of it), highlighted as C."""
    from IPython.display import Code  # notebook display only

    return Code(listing(name) if function is None else listing_function(name, function), language="c")


def _highlight(code: str, language: str) -> str:
    from pygments import highlight  # notebook display only
    from pygments.formatters import HtmlFormatter  # notebook display only
    from pygments.lexers import get_lexer_by_name  # notebook display only

    lexer = get_lexer_by_name({"opencl": "c", "cuda": "cuda", "openacc": "c"}.get(language, language))
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="default")
    return highlight(code, lexer, formatter)


def side_by_side_html(panels: Sequence[tuple[str, str, str]], columns: int = 2) -> str:
    """HTML showing code panels in columns: each panel is ``(title, code, language)``.

    Lines wrap inside their column instead of overflowing it, so the page never scrolls sideways.
    """
    columns = validate.integer(columns, "columns", minimum=1, maximum=4)
    cells = []
    for title, code, language in panels:
        cells.append(
            '<div style="min-width:0">'
            f'<div style="font-weight:bold;font-size:0.9em;margin:0 0 2px 0">{html.escape(title)}</div>'
            '<pre style="white-space:pre-wrap;word-break:break-word;font-size:0.78em;line-height:1.3;'
            'margin:0;padding:6px;background:#f8f8f8;border:1px solid #ddd;border-radius:4px">'
            f'{_highlight(code, language)}</pre></div>')
    return (f'<div style="display:grid;grid-template-columns:repeat({columns},minmax(0,1fr));gap:10px">'
            + "".join(cells) + "</div>")


def _numba_source(obj) -> str:
    return source_of(obj)


def side_by_side(kernel: str = "saxpy", columns: int = 2):
    """Display the same kernel in each model, side by side: ``"saxpy"`` or ``"matmul"``."""
    from IPython.display import HTML  # notebook display only

    validate.choice(kernel, "kernel", ("saxpy", "matmul"))
    if kernel == "saxpy":
        panels = [("Numba (Python)", _numba_source(saxpy_numba), "python"),
                  ("CUDA C (saxpy.cu)", listing_function("saxpy.cu", "saxpy"), "cuda"),
                  ("OpenCL C (saxpy.cl)", listing_function("saxpy.cl", "saxpy"), "c"),
                  ("OpenACC C (saxpy_acc.c)", listing_function("saxpy_acc.c", "saxpy"), "c")]
    else:
        panels = [("CUDA C (matmul_tiled.cu)", listing_function("matmul_tiled.cu", "matmul_tiled"), "cuda"),
                  ("OpenCL C (matmul_tiled.cl)", listing_function("matmul_tiled.cl", "matmul_tiled"), "c")]
    return HTML(side_by_side_html(panels, columns))


# ------------------------------------------------------------------------------------ terminology tables

#: The terminology of the three models (and Numba's spelling of CUDA), one concept per row. OpenCL's
#: names are the real built-in functions (the lecture's table wrote "Block ID" and "Local ID").
TERMINOLOGY: tuple[dict[str, str], ...] = (
    {"concept": "all the threads of one launch", "CUDA": "grid", "OpenCL": "NDRange", "OpenACC": "the gangs of a compute region",
     "Numba": "the grid of kernel[blocks, threads]"},
    {"concept": "a group that shares fast memory and barriers", "CUDA": "thread block", "OpenCL": "work-group",
     "OpenACC": "gang", "Numba": "block"},
    {"concept": "one instance of the kernel", "CUDA": "thread", "OpenCL": "work-item", "OpenACC": "vector lane",
     "Numba": "thread"},
    {"concept": "threads that issue together (32 on NVIDIA)", "CUDA": "warp", "OpenCL": "sub-group (OpenCL 2.1+, optional)",
     "OpenACC": "worker (typically)", "Numba": "warp"},
    {"concept": "index of the thread in the whole launch", "CUDA": "blockIdx.x * blockDim.x + threadIdx.x",
     "OpenCL": "get_global_id(0)", "OpenACC": "the loop index (the compiler maps it)", "Numba": "cuda.grid(1)"},
    {"concept": "index of the block", "CUDA": "blockIdx.x", "OpenCL": "get_group_id(0)", "OpenACC": "(hidden)",
     "Numba": "cuda.blockIdx.x"},
    {"concept": "index of the thread in its block", "CUDA": "threadIdx.x", "OpenCL": "get_local_id(0)",
     "OpenACC": "(hidden)", "Numba": "cuda.threadIdx.x"},
    {"concept": "threads per block", "CUDA": "blockDim.x", "OpenCL": "get_local_size(0)",
     "OpenACC": "vector_length(...)", "Numba": "cuda.blockDim.x"},
    {"concept": "blocks in the launch", "CUDA": "gridDim.x", "OpenCL": "get_num_groups(0)", "OpenACC": "num_gangs(...)",
     "Numba": "cuda.gridDim.x"},
    {"concept": "memory shared by a block", "CUDA": "__shared__ (shared memory)", "OpenCL": "__local (local memory)",
     "OpenACC": "cache(...) directive, or the compiler's choice", "Numba": "cuda.shared.array"},
    {"concept": "memory of one thread", "CUDA": "registers / local memory", "OpenCL": "__private (private memory)",
     "OpenACC": "private(...) clause", "Numba": "local variables, cuda.local.array"},
    {"concept": "device memory every thread sees", "CUDA": "global (device) memory", "OpenCL": "__global (global memory)",
     "OpenACC": "the device copy of the data clauses", "Numba": "device arrays"},
    {"concept": "read-only memory with a cache for broadcasts", "CUDA": "__constant__", "OpenCL": "__constant",
     "OpenACC": "(compiler's choice)", "Numba": "cuda.const.array_like"},
    {"concept": "barrier of a block", "CUDA": "__syncthreads()", "OpenCL": "barrier(CLK_LOCAL_MEM_FENCE)",
     "OpenACC": "(none: the compiler places them)", "Numba": "cuda.syncthreads()"},
    {"concept": "a kernel function", "CUDA": "__global__", "OpenCL": "__kernel", "OpenACC": "parallel / kernels region",
     "Numba": "@cuda.jit"},
    {"concept": "a queue of work for the device", "CUDA": "stream", "OpenCL": "command queue",
     "OpenACC": "async(n) queue", "Numba": "cuda.stream()"},
)
#: Who decides how the iterations map onto the hardware.
WHO_DECIDES: tuple[dict[str, str], ...] = (
    {"model": "CUDA (C or Numba)", "you write": "the kernel and the launch: grid, block, shared memory, barriers",
     "the runtime decides": "which SM runs which block, and when", "the compiler decides": "registers, instruction order"},
    {"model": "OpenCL", "you write": "the kernel, the NDRange and work-group size, local memory, barriers, and the "
     "host set-up (platform, device, context, queue, program, buffers)", "the runtime decides": "which compute unit runs "
     "which work-group; the work-group size if you pass none", "the compiler decides": "registers, vectorisation (on a CPU)"},
    {"model": "OpenACC", "you write": "directives on loops: parallel or kernels, loop gang/worker/vector, collapse, "
     "data clauses", "the runtime decides": "when data moves (as the clauses say)",
     "the compiler decides": "the kernels, the mapping of loops to gangs/workers/vector lanes, what is parallel under kernels"},
)
#: The lecture table's entries that are wrong or incomplete, with the fix (shown by the chapter).
SEED_MISTAKES: tuple[dict[str, str], ...] = (
    {"seed says": "`kernel` -- compiler responsible for finding parallelism", "correct": "the directive is `kernels` "
     "(`#pragma acc kernel` is not OpenACC: GCC ignores an unknown OpenACC directive with a warning)"},
    {"seed says": "OpenACC is a declarative language", "correct": "OpenACC is a set of directives (pragmas) added to C, C++ "
     "or Fortran: a directive-based model, not a language"},
    {"seed says": "Block index <-> Block ID", "correct": "blockIdx.x <-> get_group_id(0)"},
    {"seed says": "Thread index <-> Local ID", "correct": "threadIdx.x <-> get_local_id(0)"},
    {"seed says": "Thread ID <-> Global ID", "correct": "blockIdx.x * blockDim.x + threadIdx.x <-> get_global_id(0)"},
    {"seed says": "warp <-> (no OpenCL equivalent)", "correct": "sub-group (OpenCL 2.1 and 3.0, an optional feature; "
     "NVIDIA's OpenCL does not expose cl_khr_subgroups)"},
)


def terminology_table(columns: Sequence[str] = ("CUDA", "OpenCL", "OpenACC")) -> pd.DataFrame:
    """The terminology table as a DataFrame indexed by concept, with the chosen model columns."""
    cols = list(columns)
    for c in cols:
        validate.choice(c, "column", ("CUDA", "OpenCL", "OpenACC", "Numba"))
    return pd.DataFrame(TERMINOLOGY).set_index("concept")[cols]


# ------------------------------------------------------------------------------------ NumPy and counts


def saxpy_reference(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``a * x + y`` in float32, as every SAXPY listing computes it (a new array)."""
    return (np.float32(a) * np.asarray(x, dtype=np.float32) + np.asarray(y, dtype=np.float32)).astype(np.float32)


def saxpy_twice_reference(a: float, b: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lecture's two loops: ``y = a*x + y`` then ``y = b*x + y`` (float32, rounded after each loop)."""
    return saxpy_reference(b, x, saxpy_reference(a, x, y))


def matmul_reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` in float64 (the reference the float32 results are compared with)."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64)


def matmul_flops(m: int, k: int, n: int) -> int:
    """Flops of an ``m x k`` by ``k x n`` product: ``2 m k n`` (a multiply and an add per term)."""
    return 2 * int(m) * int(k) * int(n)


def acc_transfers(version: str, n: int) -> dict[str, int]:
    """Host-device transfers the data clauses of one SAXPY version of ``saxpy_acc.c`` ask for (two loops).

    On a device with its own memory: ``parallel`` copies x in, y in and y out around *each* loop; the
    ``data`` region does it once for both; ``kernels`` is one region, so once too; ``naive`` runs on the
    host and copies nothing. Returns the number of array copies each way and the bytes in all.
    """
    validate.choice(version, "version", ACC_SAXPY_VERSIONS)
    n = validate.integer(n, "n", minimum=0)
    regions = {"naive": 0, "kernels": 1, "parallel": 2, "data": 1}[version]
    h2d, d2h = 2 * regions, regions  # x and y in, y out, per region
    return {"h2d_copies": h2d, "d2h_copies": d2h, "bytes": 4 * n * (h2d + d2h)}


# ---------------------------------------------------------------------------------------------- Numba


@cuda.jit
def saxpy_numba(a, x, y):
    """``y = a * x + y`` in place, one thread per element (the Numba column of the listings)."""
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    if i < y.size:  # the last block may reach past the end
        y[i] = a * x[i] + y[i]


@njit(parallel=True, cache=False)
def saxpy_cpu(a, x, y):
    """``y = a * x + y`` on the CPU, the iterations shared among Numba's threads (``prange``)."""
    for i in prange(y.size):
        y[i] = a * x[i] + y[i]


@njit(parallel=True, cache=False)
def matmul_cpu(A, B, C):
    """``C = A @ B`` on the CPU, rows shared among Numba's threads; the loop nest of ``matmul_acc.c``."""
    m, k = A.shape
    n = B.shape[1]
    for i in prange(m):
        for j in range(n):
            acc = np.float32(0)
            for p in range(k):
                acc += A[i, p] * B[p, j]
            C[i, j] = acc


def _check_saxpy(a, x, y) -> float:
    a = validate.number(a, "a")
    validate.array(x, "x", dtype=np.float32, ndim=1)
    validate.array(y, "y", dtype=np.float32, ndim=1, shape=tuple(x.shape))
    return a


def _check_matmul(A, B) -> tuple[int, int, int]:
    for name, M in (("A", A), ("B", B)):
        validate.array(M, name, ndim=2, contiguous=False)
        validate.array(M, name, dtype=np.float32)
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2:
        raise ArrayArgumentError(f"inner dimensions differ: A is {m} x {k} and B is {k2} x {n}; A @ B needs as many "
                                 "columns in A as rows in B")
    if 0 in (m, k, n):
        raise ArrayArgumentError(f"A is {m} x {k} and B is {k2} x {n}: every dimension must be at least 1")
    return m, k, n


def run_saxpy_numba(a: float, x: np.ndarray, y: np.ndarray, threads: int = SAXPY_THREADS) -> np.ndarray:
    """``a * x + y`` with :func:`saxpy_numba` (GPU or simulator); returns a new NumPy array."""
    a = _check_saxpy(a, x, y)
    threads = validate.threads_per_block(threads)
    if x.size == 0:
        return np.empty(0, np.float32)
    x_d, y_d = cuda.to_device(np.ascontiguousarray(x)), cuda.to_device(np.ascontiguousarray(y))
    saxpy_numba[blocks_for(x.size, threads), threads](np.float32(a), x_d, y_d)
    return y_d.copy_to_host()


def run_saxpy_cpu(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``a * x + y`` with :func:`saxpy_cpu` (Numba, CPU threads); returns a new array."""
    a = _check_saxpy(a, x, y)
    out = np.array(y, dtype=np.float32, copy=True)
    saxpy_cpu(np.float32(a), np.ascontiguousarray(x), out)
    return out


def run_matmul_cpu(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` with :func:`matmul_cpu` (Numba, CPU threads)."""
    m, k, n = _check_matmul(A, B)
    C = np.empty((m, n), np.float32)
    matmul_cpu(np.ascontiguousarray(A), np.ascontiguousarray(B), C)
    return C


def run_matmul_numba(A: np.ndarray, B: np.ndarray, tile: int = TILE) -> np.ndarray:
    """``A @ B`` with chapter 5's shared-memory kernel (:func:`labhelpers.kernels.matmul.tiled_kernel`)."""
    _check_matmul(A, B)
    return mm.matmul(np.ascontiguousarray(A), np.ascontiguousarray(B), variant="tiled", tile=tile)


# ------------------------------------------------------------------------------------- CUDA C (CuPy)


#: Why CUDA C needs a GPU, in :func:`labhelpers.backend.require_gpu`'s message.
NVRTC = "compiles CUDA C with NVRTC and runs it on a GPU"


@functools.lru_cache(maxsize=None)
def cuda_c_function(name: str, function: str, tile: int = TILE):
    """The CUDA C kernel ``function`` of listing ``name``, compiled by NVRTC through CuPy's ``RawModule``. GPU only.

    Raises:
        BuildError: the listing does not compile (the message carries NVRTC's log).
    """
    validate.choice(name, "listing", ("saxpy.cu", "matmul_tiled.cu"))
    return build_cuda_c(listing(name), function, options=(f"-DTILE={int(tile)}",), name=name)


def build_cuda_c(source: str, function: str, options: Sequence[str] = (), name: str = "kernel.cu"):
    """Compile CUDA C ``source`` with NVRTC (CuPy's ``RawModule``) and return its kernel ``function``. GPU only.

    Raises:
        BuildError: NVRTC rejected the source (``.log`` holds its messages).
    """
    backend.require_gpu(f"the CUDA C code {name}", because=NVRTC, needs_cupy=True)
    try:
        module = cp.RawModule(code=source, options=("-std=c++14", *options))
        return module.get_function(function)
    except cp.cuda.compiler.CompileException as exc:
        raise BuildError(f"NVRTC could not compile {name}", str(exc)) from None


def run_saxpy_cuda(a: float, x: np.ndarray, y: np.ndarray, threads: int = SAXPY_THREADS) -> np.ndarray:
    """``a * x + y`` with ``saxpy.cu`` (CUDA C through CuPy). GPU only."""
    a = _check_saxpy(a, x, y)
    threads = validate.threads_per_block(threads)
    backend.require_gpu("run_saxpy_cuda", because=NVRTC, needs_cupy=True)
    n = x.size
    if n == 0:
        return np.empty(0, np.float32)
    x_d, y_d = cp.asarray(x), cp.asarray(y)
    cuda_c_function("saxpy.cu", "saxpy")((blocks_for(n, threads),), (threads,), (np.int32(n), np.float32(a), x_d, y_d))
    return cp.asnumpy(y_d)


def run_matmul_cuda(A: np.ndarray, B: np.ndarray, tile: int = TILE) -> np.ndarray:
    """``A @ B`` with ``matmul_tiled.cu`` (CUDA C through CuPy). GPU only."""
    m, k, n = _check_matmul(A, B)
    tile = validate.integer(tile, "tile", minimum=1, maximum=32)
    backend.require_gpu("run_matmul_cuda", because=NVRTC, needs_cupy=True)
    A_d, B_d = cp.asarray(np.ascontiguousarray(A)), cp.asarray(np.ascontiguousarray(B))
    C_d = cp.empty((m, n), dtype=cp.float32)
    cuda_c_function("matmul_tiled.cu", "matmul_tiled", tile)(
        (blocks_for(n, tile), blocks_for(m, tile)), (tile, tile),
        (np.int32(m), np.int32(k), np.int32(n), A_d, B_d, C_d))
    return cp.asnumpy(C_d)


# ------------------------------------------------------------------------------------- OpenCL (pyopencl)


def opencl_module():
    """The ``pyopencl`` module, or :class:`ToolMissing` saying how to install it."""
    try:
        import pyopencl  # noqa: F401  (optional: only this chapter needs it)
    except ImportError as exc:
        raise ToolMissing(f"pyopencl is not installed ({exc}): {INSTALL_OPENCL}") from None
    return pyopencl


def opencl_devices() -> pd.DataFrame:
    """Every OpenCL platform and device this machine offers, one row per device.

    Raises:
        ToolMissing: no pyopencl, or no OpenCL platform at all (no driver installed).
    """
    cl = opencl_module()
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # "PLATFORM_NOT_FOUND_KHR": the ICD loader found no driver
        raise ToolMissing(f"no OpenCL platform found ({exc}): {INSTALL_OPENCL}") from None
    rows = []
    for p in platforms:
        try:
            devices = p.get_devices()
        except cl.Error:
            continue
        for d in devices:
            rows.append({"platform": p.name, "device": d.name.strip(),
                         "type": cl.device_type.to_string(d.type), "compute units": d.max_compute_units,
                         "max work-group size": d.max_work_group_size,
                         "local memory (KiB)": d.local_mem_size // 1024, "OpenCL": d.version})
    if not rows:
        raise ToolMissing(f"OpenCL platforms were found but no device: {INSTALL_OPENCL}")
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class OpenCLTarget:
    """An OpenCL device with its context and an in-order, profiling command queue."""

    kind: str
    platform: Any
    device: Any
    context: Any
    queue: Any

    @property
    def name(self) -> str:
        """``<platform>: <device>``, e.g. ``NVIDIA CUDA: NVIDIA H100 80GB HBM3``."""
        return f"{self.platform.name}: {self.device.name.strip()}"


@functools.lru_cache(maxsize=None)
def opencl_target(kind: str = "cpu") -> OpenCLTarget:
    """The first OpenCL device of ``kind`` (``"cpu"`` or ``"gpu"``) with a context and a profiling queue.

    Raises:
        ToolMissing: no pyopencl, no platform, or no device of that kind (the message says what to install).
    """
    validate.choice(kind, "kind", OPENCL_KINDS)
    cl = opencl_module()
    opencl_devices()  # raises ToolMissing with the installation hint when there is nothing at all
    wanted = cl.device_type.CPU if kind == "cpu" else cl.device_type.GPU
    for p in cl.get_platforms():
        try:
            devices = p.get_devices(device_type=wanted)
        except cl.Error:  # DEVICE_NOT_FOUND on this platform
            continue
        if devices:
            ctx = cl.Context([devices[0]])
            queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
            return OpenCLTarget(kind, p, devices[0], ctx, queue)
    have = ", ".join(f"{r.platform}: {r.device} ({r.type})" for r in opencl_devices().itertuples())
    hint = ("an NVIDIA GPU needs its driver's OpenCL library named by /etc/OpenCL/vendors/nvidia.icd (one line: "
            "libnvidia-opencl.so.1)" if kind == "gpu" else INSTALL_OPENCL)
    raise ToolMissing(f"no OpenCL {kind.upper()} device here (found: {have}): {hint}")


@contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Capture what C code writes to file descriptor 2 (PoCL's compiler prints its errors there)."""
    out: list[str] = []
    try:
        fd = os.dup(2)
    except OSError:  # no file descriptor 2 (an unusual embedding): capture nothing
        yield out
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            os.dup2(fd, 2)
            os.close(fd)
            tmp.seek(0)
            out.append(tmp.read().decode(errors="replace"))


def _clean_log(log: str) -> str:
    """A build log without the temporary file names the driver invents (``/root/.cache/.../tempfile_X.cl``)."""
    log = re.sub(r"\S*tempfile_\w+\.cl", "<kernel>.cl", log)
    return "\n".join(line.rstrip() for line in log.strip().splitlines())


def build_opencl(source: str, kind: str = "cpu", options: Sequence[str] = ()):
    """Build OpenCL C ``source`` for the device of ``kind``; returns the ``pyopencl.Program``.

    Raises:
        ToolMissing: no OpenCL device of that kind.
        BuildError: the source does not compile; ``.log`` is the driver's build log.
    """
    if not isinstance(source, str) or not source.strip():
        raise ArgumentError("source must be the OpenCL C code of a kernel, as a non-empty str")
    cl = opencl_module()
    target = opencl_target(kind)
    program = cl.Program(target.context, source)
    with warnings.catch_warnings(), _captured_stderr() as printed:
        warnings.simplefilter("ignore")  # pyopencl warns about any non-empty build log: we keep the log instead
        try:
            program.build(options=list(options))
            return program
        except cl.RuntimeError as exc:
            error = exc
    try:
        log = program.get_build_info(target.device, cl.program_build_info.LOG)
    except cl.Error:
        log = ""
    log = _clean_log(log or "".join(printed) or str(error))
    raise BuildError(f"the OpenCL C compiler of {target.name} rejected the kernel", log)


def opencl_program(name: str, kind: str = "cpu", tile: int = TILE):
    """Listing ``name`` (``saxpy.cl`` or ``matmul_tiled.cl``) built for the device of ``kind`` (cached per context)."""
    validate.choice(name, "listing", ("saxpy.cl", "matmul_tiled.cl"))
    return _program_for(name, opencl_target(kind), int(tile))


@functools.lru_cache(maxsize=None)
def _program_for(name: str, target: OpenCLTarget, tile: int):
    return build_opencl(listing(name), target.kind, options=(f"-DTILE={tile}",))


def global_size(n: int, local_size: int) -> int:
    """``n`` rounded up to a whole number of work-groups: the NDRange an OpenCL 1.x launch needs."""
    n = validate.integer(n, "n", minimum=0)
    local_size = validate.integer(local_size, "local_size", minimum=1)
    return tiles_for(n, local_size) * local_size  # work-groups, each local_size work-items


def _local_size(local_size: int, target: OpenCLTarget) -> int:
    local_size = validate.integer(local_size, "local_size", minimum=1)
    if local_size > target.device.max_work_group_size:
        raise ArgumentError(f"local_size={local_size} is more than {target.name} allows in a work-group "
                                     f"({target.device.max_work_group_size}): choose e.g. 64 or 256")
    return local_size


def run_saxpy_opencl(a: float, x: np.ndarray, y: np.ndarray, *, kind: str = "cpu",
                     local_size: int = SAXPY_THREADS, source: str | None = None) -> np.ndarray:
    """``a * x + y`` with ``saxpy.cl`` (or another kernel ``saxpy`` in ``source``) on an OpenCL device.

    The global size is ``n`` rounded up to a whole number of work-groups (the kernel's guard keeps the
    extra work-items out). Returns a new NumPy array.
    """
    a = _check_saxpy(a, x, y)
    cl = opencl_module()
    target = opencl_target(kind)
    local_size = _local_size(local_size, target)
    n = x.size
    if n == 0:
        return np.empty(0, np.float32)
    program = opencl_program("saxpy.cl", kind) if source is None else build_opencl(source, kind)
    mf = cl.mem_flags
    x_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(x))
    out = np.array(y, dtype=np.float32, copy=True)
    y_b = cl.Buffer(target.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    kernel = cl.Kernel(program, "saxpy")
    kernel.set_args(np.int32(n), np.float32(a), x_b, y_b)
    cl.enqueue_nd_range_kernel(target.queue, kernel, (global_size(n, local_size),), (local_size,))
    cl.enqueue_copy(target.queue, out, y_b)
    target.queue.finish()
    return out


def run_matmul_opencl(A: np.ndarray, B: np.ndarray, *, kind: str = "cpu", tile: int = TILE) -> np.ndarray:
    """``A @ B`` with ``matmul_tiled.cl`` on an OpenCL device (local size ``tile x tile``)."""
    m, k, n = _check_matmul(A, B)
    tile = validate.integer(tile, "tile", minimum=1, maximum=32)
    cl = opencl_module()
    target = opencl_target(kind)
    _local_size(tile * tile, target)
    program = opencl_program("matmul_tiled.cl", kind, tile)
    mf = cl.mem_flags
    A_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(A))
    B_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(B))
    C = np.empty((m, n), np.float32)
    C_b = cl.Buffer(target.context, mf.WRITE_ONLY, C.nbytes)
    kernel = cl.Kernel(program, "matmul_tiled")
    kernel.set_args(np.int32(m), np.int32(k), np.int32(n), A_b, B_b, C_b)
    cl.enqueue_nd_range_kernel(target.queue, kernel, (global_size(n, tile), global_size(m, tile)), (tile, tile))
    cl.enqueue_copy(target.queue, C, C_b)
    target.queue.finish()
    return C


# ----------------------------------------------------------------------------------- OpenACC (gcc -fopenacc)


def c_compiler() -> str:
    """The C compiler for OpenACC: ``$CC`` or ``gcc``; :class:`ToolMissing` when there is none."""
    cc = os.environ.get("CC", "gcc")
    path = shutil.which(cc)
    if path is None:
        raise ToolMissing(f"no C compiler {cc!r} on the PATH: {INSTALL_GCC}")
    return path


def compiler_version() -> str:
    """The first line of ``<compiler> --version`` (e.g. ``gcc (Debian 12.2.0-14) 12.2.0``)."""
    out = subprocess.run([c_compiler(), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0].strip() if out.stdout else "unknown"


@dataclass(frozen=True)
class CompiledC:
    """A C source compiled into a shared library: the library (``ctypes``), the compiler's report and its flags."""

    library: Any
    report: str
    flags: tuple[str, ...]
    path: Path

    def function(self, name: str, argtypes: Sequence[Any]):
        """The C function ``name`` with the given ``ctypes`` argument types (returns void)."""
        try:
            fn = getattr(self.library, name)
        except AttributeError:
            raise ArgumentError(f"the compiled code has no function {name!r}: check its name in the C "
                                         "source") from None
        fn.argtypes = list(argtypes)
        fn.restype = None
        return fn


def _cache_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"labhelpers-openacc-{os.getuid() if hasattr(os, 'getuid') else 0}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=64)
def compile_c(source: str, flags: tuple[str, ...] = OPENACC_FLAGS, name: str = "kernel.c") -> CompiledC:
    """Compile C ``source`` into a shared library with ``flags`` (default: OpenACC, ``-O3``, the report).

    ``report`` is what the compiler printed: with ``-fopt-info-optimized-omp``, one line per OpenACC loop
    saying which parallelism (gang, worker, vector, seq) it was assigned. The library is cached by the
    hash of source and flags.

    Raises:
        ToolMissing: no compiler, or one without ``-fopenacc``.
        BuildError: the source does not compile (the log is the compiler's messages).
    """
    if not isinstance(source, str) or not source.strip():
        raise ArgumentError("source must be C code, as a non-empty str")
    cc = c_compiler()
    key = hashlib.sha256((cc + "\0" + " ".join(flags) + "\0" + source).encode()).hexdigest()[:16]
    folder = _cache_dir()
    src = folder / f"{key}-{Path(name).name}"
    lib = folder / f"{key}.so"
    src.write_text(source)
    tmp = folder / f"{key}.{os.getpid()}.so"
    returncode, messages = _compile_and_link(cc, tuple(flags), src, tmp, split=False)
    if returncode != 0 and "lto-wrapper" in messages and "-fopenacc" in flags:
        # A GCC built for offloading (e.g. Ubuntu's) hands the link of OpenACC objects to lto-wrapper, which some
        # images lack: compile and link apart, without the offload sections (the host code is all that runs).
        returncode, messages = _compile_and_link(cc, tuple(flags), src, tmp, split=True)
    messages = messages.replace(str(src), Path(name).name)
    if returncode != 0:
        if "openacc" in messages.lower() and ("unrecognized" in messages or "not supported" in messages):
            raise ToolMissing(f"{cc} does not support -fopenacc: {INSTALL_GCC}")
        raise BuildError(f"{Path(cc).name} could not compile {Path(name).name}", messages)
    os.replace(tmp, lib)
    report = "\n".join(line for line in messages.splitlines() if line.strip())
    return CompiledC(ctypes.CDLL(str(lib)), report, tuple(flags), lib)


def _compile_and_link(cc: str, flags: tuple[str, ...], src: Path, out: Path, *, split: bool) -> tuple[int, str]:
    """Run the compiler: in one step, or (``split``) compile to an object, drop its offload sections, then link."""
    if not split:
        proc = subprocess.run([cc, *flags, str(src), "-o", str(out)], capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout + proc.stderr
    obj = out.with_suffix(".o")
    compile_flags = [f for f in flags if f != "-shared"]
    proc = subprocess.run([cc, *compile_flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True,
                          timeout=300)
    messages = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return proc.returncode, messages
    objcopy = shutil.which("objcopy") or "objcopy"
    strip = subprocess.run([objcopy, "-w", "--remove-section=.gnu.offload_lto_*", str(obj)], capture_output=True,
                           text=True, timeout=120)
    link = subprocess.run([cc, "-shared", "-fPIC", str(obj), "-o", str(out), "-lgomp"], capture_output=True,
                          text=True, timeout=300)
    obj.unlink(missing_ok=True)
    return link.returncode or strip.returncode, messages + strip.stderr + link.stdout + link.stderr


def compile_listing(name: str, flags: tuple[str, ...] = OPENACC_FLAGS) -> CompiledC:
    """Listing ``saxpy_acc.c`` or ``matmul_acc.c`` compiled with ``flags`` (see :func:`compile_c`)."""
    validate.choice(name, "listing", ("saxpy_acc.c", "matmul_acc.c"))
    return compile_c(listing(name), tuple(flags), name)


def openacc_report(name: str) -> pd.DataFrame:
    """GCC's report on listing ``name``: one row per OpenACC loop with its line, function and parallelism.

    GCC names the line of the directive that governs the loop (``directive``), or the loop itself inside a
    ``kernels`` region.
    """
    compiled = compile_listing(name)
    lines = listing(name).splitlines()
    rows = []
    for m in re.finditer(r"^\S*?:(\d+):(\d+): optimized: assigned OpenACC (.+?) loop parallelism", compiled.report,
                         flags=re.M):
        line = int(m.group(1))
        func = next((re.match(r"^void\s+(\w+)", lines[i]).group(1) for i in range(line - 1, -1, -1)
                     if re.match(r"^void\s+\w+", lines[i])), "?")
        rows.append({"line": line, "function": func, "parallelism": m.group(3),
                     "directive": _directive_at(lines, line)})
    return pd.DataFrame(rows, columns=["line", "function", "parallelism", "directive"])


def _directive_at(lines: list[str], line: int) -> str:
    """The source at ``line`` (1-based) that GCC names for a loop: its ``#pragma acc`` with continuation lines."""
    i = line - 1
    parts = [lines[i].strip()]
    while parts[-1].endswith("\\") and i + 1 < len(lines):
        i += 1
        parts[-1] = parts[-1].rstrip("\\").strip()
        parts.append(lines[i].strip())
    return " ".join(parts)


_P = ctypes.c_void_p


def run_saxpy_acc(version: str, a: float, b: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lecture's two SAXPYs (``y = a*x + y``, then ``y = b*x + y``) with one version of ``saxpy_acc.c``."""
    validate.choice(version, "version", ACC_SAXPY_VERSIONS)
    a = _check_saxpy(a, x, y)
    b = validate.number(b, "b")
    fn = compile_listing("saxpy_acc.c").function(f"saxpy_{version}",
                                                [ctypes.c_int, ctypes.c_float, ctypes.c_float, _P, _P])
    x = np.ascontiguousarray(x)
    out = np.array(y, dtype=np.float32, copy=True)
    fn(x.size, a, b, x.ctypes.data, out.ctypes.data)
    return out


def run_saxpy_openacc(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``a * x + y`` with the one-loop ``saxpy`` of ``saxpy_acc.c`` (OpenACC, compiled by gcc)."""
    a = _check_saxpy(a, x, y)
    fn = compile_listing("saxpy_acc.c").function("saxpy", [ctypes.c_int, ctypes.c_float, _P, _P])
    x = np.ascontiguousarray(x)
    out = np.array(y, dtype=np.float32, copy=True)
    fn(x.size, a, x.ctypes.data, out.ctypes.data)
    return out


def run_matmul_acc(A: np.ndarray, B: np.ndarray, version: str = "collapse") -> np.ndarray:
    """``A @ B`` with one version of ``matmul_acc.c`` (see :data:`ACC_MATMUL_VERSIONS`)."""
    validate.choice(version, "version", ACC_MATMUL_VERSIONS)
    m, k, n = _check_matmul(A, B)
    fn = compile_listing("matmul_acc.c").function(f"matmul_{version}", [ctypes.c_int] * 3 + [_P] * 3)
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    C = np.empty((m, n), np.float32)
    fn(m, k, n, A.ctypes.data, B.ctypes.data, C.ctypes.data)
    return C


# -------------------------------------------------------------------------------------- what runs here


def toolchain_status() -> pd.DataFrame:
    """What this machine can run of the chapter: one row per model, with the device or the reason it cannot."""
    rows = []
    try:
        devices = opencl_devices()
        for r in devices.itertuples():
            rows.append({"model": "OpenCL C", "runs": True, "where": f"{r.platform}: {r.device} ({r.type})"})
    except ToolMissing as exc:
        rows.append({"model": "OpenCL C", "runs": False, "where": str(exc)})
    try:
        version = compiler_version()
        compile_listing("saxpy_acc.c")
        rows.append({"model": "OpenACC C", "runs": True,
                     "where": f"host CPU, one thread ({version}, -fopenacc without an offload compiler)"})
    except (ToolMissing, BuildError) as exc:
        rows.append({"model": "OpenACC C", "runs": False, "where": str(exc).splitlines()[0]})
    if backend.is_simulator():
        rows.append({"model": "CUDA C", "runs": False, "where": "no GPU (simulator): reference data shown"})
        rows.append({"model": "Numba CUDA", "runs": True, "where": "Numba's CUDA simulator (correctness only)"})
    else:
        name = device_mod.device_info().name
        try:
            backend.require_gpu("CUDA C", because=NVRTC, needs_cupy=True)
            rows.append({"model": "CUDA C", "runs": True, "where": f"{name} (NVRTC through CuPy)"})
        except GPUOnlyError as exc:
            rows.append({"model": "CUDA C", "runs": False, "where": str(exc)})
        rows.append({"model": "Numba CUDA", "runs": True, "where": name})
    rows.append({"model": "Numba CPU (parallel=True)", "runs": True, "where": "host CPU, all cores"})
    return pd.DataFrame(rows)


__all__ = [
    "ACC_MATMUL_VERSIONS", "ACC_SAXPY_VERSIONS", "BuildError", "CompiledC", "LISTINGS", "OPENCL_KINDS", "OpenCLTarget",
    "SEED_MISTAKES", "TERMINOLOGY", "TILE", "ToolMissing", "WHO_DECIDES", "acc_transfers", "build_cuda_c", "build_opencl",
    "c_compiler", "compile_c", "compile_listing", "compiler_version", "cuda_c_function", "global_size", "listing",
    "listing_function", "listing_path", "matmul_cpu", "matmul_flops", "matmul_reference", "openacc_report",
    "opencl_devices", "opencl_module", "opencl_program", "opencl_target", "run_matmul_acc", "run_matmul_cpu",
    "run_matmul_cuda", "run_matmul_numba", "run_matmul_opencl", "run_saxpy_acc", "run_saxpy_cpu", "run_saxpy_cuda",
    "run_saxpy_numba", "run_saxpy_opencl", "run_saxpy_openacc", "saxpy_bytes", "saxpy_cpu", "saxpy_flops",
    "saxpy_numba", "saxpy_reference", "saxpy_twice_reference", "show_listing", "side_by_side", "side_by_side_html",
    "terminology_table", "toolchain_status",
]
