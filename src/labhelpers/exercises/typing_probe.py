"""The types Numba gives a kernel's or device function's variables, found the same way on both backends.

The simulator never compiles (a kernel runs as Python, where ``0.25 * float32`` stays float32), and
a GPU compiles with the CUDA target (where the same expression is float64). To give one verdict
everywhere, :func:`float64_lines` types the kernel's Python function with Numba's CPU typing on both
backends: the CUDA names a kernel uses (``cuda.grid``, ``cuda.threadIdx``, ``cuda.shared.array``,
``cuda.syncthreads``, device functions it calls) are swapped for CPU stand-ins of the same types. Numba
types arithmetic the same way on both targets (``float32 * float64 literal`` is float64, ``int / int``
is float64, ``math.sqrt(float32)`` is float32), so the float64 operations found here are the ones the
GPU runs. A kernel that uses something without a stand-in (warp shuffles, atomics on exotic types) is
not typed: the functions return None and the checker's value checks remain.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types as pytypes
import warnings
from typing import Any, Sequence

import numba
import numpy as np
from numba import njit
from numba.core import ir
from numba.core import types as nbtypes
from numba.extending import overload


def _grid(ndim):  # a stand-in for cuda.grid / cuda.gridsize: typed by the overload below
    raise NotImplementedError


@overload(_grid)
def _grid_overload(ndim):
    n = getattr(ndim, "literal_value", None)
    if n == 1:
        return lambda ndim: 0
    if n == 2:
        return lambda ndim: (0, 0)
    if n == 3:
        return lambda ndim: (0, 0, 0)
    return None


@njit
def _grid_stub(ndim):
    return _grid(ndim)


@njit
def _nothing():
    return None


@njit
def _array_stub(shape, dtype):
    return np.zeros(shape, dtype)


@njit
def _atomic_stub(ary, idx, val):
    old = ary[idx]
    ary[idx] = old + val
    return old


@njit
def _atomic_minmax_stub(ary, idx, val):
    old = ary[idx]
    return old


@njit
def _cas_stub(ary, idx, old, val):
    cur = ary[idx]
    if cur == old:
        ary[idx] = val
    return cur


def _module(name: str, **attrs: Any) -> pytypes.ModuleType:
    module = pytypes.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def _dim3(name: str) -> pytypes.ModuleType:
    return _module(name, x=1, y=1, z=1)


#: The CPU stand-in for ``numba.cuda`` inside a typed kernel.
CUDA_STAND_IN = _module(
    "cuda (typing stand-in)", grid=_grid_stub, gridsize=_grid_stub, syncthreads=_nothing, threadfence=_nothing,
    threadfence_block=_nothing, syncwarp=_nothing, threadIdx=_dim3("threadIdx"), blockIdx=_dim3("blockIdx"),
    blockDim=_dim3("blockDim"), gridDim=_dim3("gridDim"), warpsize=32, laneid=0,
    shared=_module("shared", array=_array_stub), local=_module("local", array=_array_stub),
    atomic=_module("atomic", add=_atomic_stub, sub=_atomic_stub, max=_atomic_minmax_stub, min=_atomic_minmax_stub,
                   cas=_cas_stub, compare_and_swap=_cas_stub),
)


def _is_cuda_function(value: Any) -> bool:
    """A ``@cuda.jit`` object (kernel or device function) of either backend."""
    return hasattr(value, "py_func") and (hasattr(value, "_device") or hasattr(value, "targetoptions"))


def _cpu_twin(func: Any, seen: dict) -> Any:
    """``func``'s Python function, rebuilt with CUDA names swapped for stand-ins, as a Numba CPU dispatcher."""
    py = getattr(func, "py_func", func)
    if id(py) in seen:
        return seen[id(py)]
    namespace = dict(py.__globals__)
    for name in py.__code__.co_names:
        value = namespace.get(name)
        if value is numba.cuda or getattr(value, "__name__", "") in ("numba.cuda", "numba.cuda.simulator"):
            namespace[name] = CUDA_STAND_IN
        elif _is_cuda_function(value):
            namespace[name] = _cpu_twin(value, seen)
    closure = None
    if py.__closure__:
        cells = []
        for cell in py.__closure__:
            value = cell.cell_contents
            cells.append(pytypes.CellType(_cpu_twin(value, seen) if _is_cuda_function(value) else value))
        closure = tuple(cells)
    rebuilt = pytypes.FunctionType(py.__code__, namespace, py.__name__, py.__defaults__, closure)
    twin = njit(rebuilt)
    seen[id(py)] = twin
    return twin


def typeof_argument(value: Any) -> nbtypes.Type:
    """Numba's type for one kernel argument (a NumPy array, a device array, a scalar)."""
    if hasattr(value, "copy_to_host") and not isinstance(value, np.ndarray):
        value = np.empty(value.shape, value.dtype)
    return numba.typeof(value)


def typed(func: Any, argtypes: Sequence[nbtypes.Type]):
    """The typed compile result of ``func``'s CPU twin for ``argtypes``, or None when it cannot be typed here."""
    try:
        twin = _cpu_twin(func, {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            twin.compile(tuple(argtypes))
        return next(iter(twin.overloads.values()))
    except Exception:  # noqa: BLE001  (no stand-in for something it uses: the value checks remain)
        return None


_ARITH = ("binop", "inplace_binop", "unary", "call")


def _line(loc: ir.Loc) -> str:
    text = linecache.getline(loc.filename, loc.line).split("  #")[0].strip()
    return text or f"line {loc.line}"


def float64_lines(func: Any, argtypes: Sequence[nbtypes.Type]) -> list[str] | None:
    """Source lines of ``func`` that compute in float64 or store a float64, for arguments ``argtypes``.

    Returns None when ``func`` cannot be typed here (nothing can be said), [] when nothing is float64.
    """
    cres = typed(func, argtypes)
    if cres is None:
        return None
    ann = cres.type_annotation
    found: list[str] = []
    for block in ann.blocks.values():
        for stmt in block.body:
            bad = False
            if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and stmt.value.op in _ARITH:
                bad = ann.typemap.get(stmt.target.name) in (nbtypes.float64, nbtypes.complex128)
            elif isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
                target = ann.typemap.get(stmt.target.name)
                bad = (ann.typemap.get(stmt.value.name) == nbtypes.float64
                       and getattr(target, "dtype", None) != nbtypes.float64)
            if bad:
                text = _line(stmt.loc)
                if text not in found:
                    found.append(text)
    return found


def return_type(func: Any, argtypes: Sequence[nbtypes.Type]) -> nbtypes.Type | None:
    """The type ``func`` returns for ``argtypes`` (device functions), or None when it cannot be typed here."""
    cres = typed(func, argtypes)
    return None if cres is None else cres.signature.return_type


def _constant_shape(node: ast.AST, constants: dict) -> bool:
    """Whether a shape expression is what a GPU compiles: an int literal, a module-level int constant, or a tuple
    of those (Numba types ``TILE * 33`` or ``TILE + 1`` as a run-time int64, and a GPU refuses it)."""
    if isinstance(node, ast.Tuple):
        return all(_constant_shape(e, constants) for e in node.elts)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return isinstance(constants.get(node.id), (int, np.integer))
    if isinstance(node, ast.Attribute):  # config.TILE: a constant of another module
        return True
    return False


def nonconstant_array_shapes(func: Any) -> list[str]:
    """The ``cuda.shared.array`` / ``cuda.local.array`` calls of a kernel whose shape a GPU cannot compile.

    The simulator runs any shape (it is NumPy); a GPU compiles only shapes known when the kernel is compiled:
    literals and module-level constants. This reads the kernel's source, so both backends give the verdict a GPU
    gives. Returns the offending source snippets (``[]`` when all shapes are constant or the source is unknown).
    """
    py = getattr(func, "py_func", func)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    except (OSError, TypeError, SyntaxError):
        return []
    constants = dict(getattr(py, "__globals__", {}))
    try:  # a kernel made in a factory: Numba freezes its closure's values, so they are constants too
        constants.update(inspect.getclosurevars(py).nonlocals)
    except (TypeError, ValueError):
        pass
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr in ("shared", "local")):
            continue
        shape = next((k.value for k in node.keywords if k.arg == "shape"), node.args[0] if node.args else None)
        if shape is not None and not _constant_shape(shape, constants):
            found.append(ast.unparse(shape))
    return found


__all__ = ["CUDA_STAND_IN", "float64_lines", "nonconstant_array_shapes", "return_type", "typed", "typeof_argument"]
