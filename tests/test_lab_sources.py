"""Lab solutions that mirror a package kernel stay the same kernel: this test fails when either drifts.

:data:`MIRRORS` names, in one place, every lab exercise whose solution is a kernel of the package
(the one the chapter shows). Both sources are compared after normalising them with ``ast``: the
docstring, comments and decorators are dropped, names of module constants and closure variables
become their values (``MAX_THREADS`` and ``1024``, ``tile`` and ``TILE`` are the same 8), and the
package kernel's names are renamed as the mapping says (a lab may call a parameter differently).
Everything else, statement by statement, must be equal.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import numbers

import pytest

from labhelpers.kernels import bsp
from labhelpers.kernels import cuda_intro as intro
from labhelpers.kernels import matmul as mm
from labhelpers.kernels import reduction as red
from mutants import load_solutions, mutant, source

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

#: (lab, solution name) -> (package kernel, renames from the package kernel's names to the solution's).
MIRRORS: dict[tuple[str, str], tuple[object, dict[str, str]]] = {
    ("01_cuda_in_python_lab", "vector_add"): (intro.add, {}),
    ("02_bsp_and_amdahl_lab", "grid_stride_update"): (bsp.fixed_work, {"out": "x"}),  # the lab updates in place
    ("05_matrix_multiply_lab", "matmul_naive_kernel"): (mm.matmul_naive, {"k": "p"}),
    ("05_matrix_multiply_lab", "matmul_rect_kernel"): (mm.tiled_kernel(8), {}),
    ("05_matrix_multiply_lab", "matmul_tiled_fixed"): (mm.tiled_kernel(8), {}),
    ("06_reduction_lab", "reduce_sequential"): (red.reduce_sequential, {}),
    ("06_reduction_lab", "reduce_first_add"): (red.reduce_first_add, {}),
}


def _constants(func) -> dict[str, numbers.Number]:
    """The numbers a function reads from its module and closure, by name (``TILE``, ``MAX_THREADS``, ``tile``)."""
    closure = inspect.getclosurevars(func)
    values = {**closure.globals, **closure.nonlocals}
    return {k: v for k, v in values.items() if isinstance(v, numbers.Number) and not isinstance(v, bool)}


class _Normalise(ast.NodeTransformer):
    def __init__(self, constants: dict[str, numbers.Number], renames: dict[str, str]):
        self.constants, self.renames = constants, renames

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.constants:
            return ast.copy_location(ast.Constant(int(self.constants[node.id])
                                                  if float(self.constants[node.id]).is_integer()
                                                  else self.constants[node.id]), node)
        node.id = self.renames.get(node.id, node.id)
        return node


def normalised_body(kernel, renames: dict[str, str] | None = None, text: str | None = None) -> str:
    """The body of ``kernel`` (or of its source ``text``) without docstring and comments, constants resolved."""
    func = getattr(kernel, "py_func", kernel)
    tree = ast.parse(text if text is not None else source(func))
    fn = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    module = ast.Module(body=[_Normalise(_constants(func), renames or {}).visit(stmt) for stmt in body],
                        type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module))


def _difference(package: str, solution: str) -> str:
    return "\n".join(difflib.unified_diff(package.splitlines(), solution.splitlines(), "package kernel",
                                         "lab solution", lineterm=""))


@pytest.mark.parametrize("lab, name", list(MIRRORS), ids=[f"{lab[:2]}-{name}" for lab, name in MIRRORS])
def test_lab_solution_is_the_package_kernel(lab: str, name: str):
    kernel, renames = MIRRORS[(lab, name)]
    solution = getattr(load_solutions(lab), name)
    package_body, solution_body = normalised_body(kernel, renames), normalised_body(solution)
    assert package_body == solution_body, (
        f"labs/solutions/{lab}.py:{name} no longer mirrors {kernel.py_func.__module__}."
        f"{kernel.py_func.__qualname__}: change both together (or update MIRRORS).\n"
        + _difference(package_body, solution_body))


def test_every_mirrored_solution_exists_and_is_a_kernel():
    for (lab, name), (kernel, _renames) in MIRRORS.items():
        solution = getattr(load_solutions(lab), name, None)
        assert solution is not None and hasattr(solution, "py_func"), f"{lab}: no kernel {name}"
        assert hasattr(kernel, "py_func"), f"{kernel!r} is not a kernel"


def test_a_one_line_drift_is_caught():
    """The comparison is not vacuous: one changed line of the package kernel makes the bodies differ."""
    drifted = mutant(red.reduce_sequential, "stride //= 2", "stride = stride // 2 - 0")
    solution = load_solutions("06_reduction_lab").reduce_sequential
    assert normalised_body(drifted) != normalised_body(solution)
    assert normalised_body(red.reduce_sequential) == normalised_body(solution)


def test_constants_and_closures_resolve_to_their_values():
    tiled = normalised_body(mm.tiled_kernel(8))
    assert "tile" not in tiled.replace("tiles", "") and "range(0, k, 8)" in tiled
    assert "1024" in normalised_body(red.reduce_sequential) and "MAX_THREADS" not in normalised_body(
        red.reduce_sequential)
