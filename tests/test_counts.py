"""The one table of flop and byte counts: the kernels, the roofline model and the benches read the same numbers."""

from __future__ import annotations

import ast
from pathlib import Path

from labhelpers import counts, roofline
from labhelpers.kernels import cuda_intro, nbody
from labhelpers.models import nbody as nbody_model
import pytest

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)


def test_saxpy_counts_have_one_home():
    assert cuda_intro.saxpy_flops is counts.saxpy_flops and cuda_intro.saxpy_bytes is counts.saxpy_bytes
    c = roofline.saxpy_counts(1000)
    assert (c.flops, c.nbytes) == (counts.saxpy_flops(1000), counts.saxpy_bytes(1000)) == (2000, 12000)


def test_nbody_counts_have_one_home():
    assert nbody.flops is counts.nbody_flops and nbody.bytes_moved is counts.nbody_bytes
    assert nbody.FLOPS_PER_INTERACTION == nbody_model.FLOPS_PER_INTERACTION == roofline.NBODY_FLOPS_PER_INTERACTION == 20
    for n, tile in [(65536, None), (65536, 256), (1000, 256), (257, 256)]:
        c = roofline.nbody_counts(n, tile)
        assert (c.flops, c.nbytes) == (counts.nbody_flops(n), counts.nbody_bytes(n, tile))
    # a partial last block still reads every body: two blocks of 256 for 257 bodies
    assert counts.nbody_bytes(257, 256) == 16 * (2 * 257 + 257) + 12 * 257


# ------------------------------------------------------------------ no second table of counts outside counts.py

ROOT = Path(__file__).resolve().parents[1]
#: The kernels counts.py counts, as they are named in code (a launch, a function name).
COUNTED_KERNELS = ("saxpy", "nbody")


def _public_counts() -> tuple[set[str], set[str]]:
    """counts.py's public functions and constants."""
    functions = {n for n in counts.__all__ if callable(getattr(counts, n))}
    return functions, set(counts.__all__) - functions


def counts_stated_elsewhere(path: Path) -> list[str]:
    """Where ``path`` states a count that counts.py owns: a function of the same name defined again, a constant of
    the same name given a number again, or a timing of a counted kernel (``saxpy``, ``nbody``) whose ``flops=`` or
    ``nbytes=`` is a formula written out (``12 * n``) instead of a call to counts.py's function."""
    functions, constants = _public_counts()
    text = path.read_text()
    problems = []
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for node in ast.walk(ast.parse(text, filename=str(path))):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            problems.append(f"{where}: defines {node.name} again (import it from labhelpers.counts)")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name) and any(t.id.endswith(c) for c in constants)]
            if named:
                problems.append(f"{where}: gives {named[0]} a number again (import it from labhelpers.counts)")
        elif isinstance(node, ast.Call) and any(kw.arg in ("flops", "nbytes") for kw in node.keywords):
            launched = " ".join(ast.unparse(a) for a in node.args).lower()  # (unparse: get_source_segment is slow)
            if not any(k in launched for k in COUNTED_KERNELS):
                continue
            for kw in node.keywords:
                if kw.arg in ("flops", "nbytes") and isinstance(kw.value, ast.BinOp) and not any(
                        isinstance(n, ast.Call) for n in ast.walk(kw.value)):
                    problems.append(f"{where}: {kw.arg}={ast.unparse(kw.value)} writes out a count that "
                                    "labhelpers.counts has")
    return problems


def test_no_module_states_a_count_that_counts_py_has():
    # counts.py is the one table: kernels, experiments, benches and tools read it (bench/, tools/ too).
    files = [p for folder in ("src", "bench", "tools") for p in sorted((ROOT / folder).rglob("*.py"))
             if p != ROOT / "src" / "labhelpers" / "counts.py"]
    problems = [p for path in files for p in counts_stated_elsewhere(path)]
    assert not problems, "counts stated outside labhelpers/counts.py:\n" + "\n".join(problems)


def test_the_counts_rule_sees_each_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def saxpy_bytes(n):\n    return 12 * n\n\nNBODY_FLOPS_PER_INTERACTION = 20\n"
                   "t = benchmark(lambda: saxpy[1, 1](a, x, y, o), nbytes=12 * n, flops=counts.saxpy_flops(n))\n"
                   "u = benchmark(lambda: copy[1, 1](x, o), nbytes=8 * n)\n")
    found = [p.partition(": ")[2].split(" ")[0] for p in counts_stated_elsewhere(bad)]
    assert found == ["defines", "gives", "nbytes=12"], counts_stated_elsewhere(bad)
