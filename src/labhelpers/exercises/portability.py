"""Checkers for the lab "Portability" (labs/12_portability_lab.ipynb).

The students' code is OpenCL C and OpenACC C, given as Python functions that return the source text. The
checkers compile it for real (pyopencl on the CPU's OpenCL driver, ``gcc -fopenacc``), run it on awkward
sizes with NaN-poisoned outputs and guard bands after every array, and compare with NumPy. A build error
comes back with the compiler's log. What the CPU cannot show is checked by parsing, not by patterns:
the OpenCL kernel's statements are parsed (blocks, ``if``/``else``, loops, ``return``) to find a barrier
inside a branch, in a loop whose trip count depends on the work-item, or after a ``return``
(:func:`barrier_problems`; PoCL runs such kernels to some result, so a run proves nothing); the OpenACC
data clauses are parsed into array sections whose extents are evaluated for several (m, n), and a
``present`` needs a data region (:func:`data_clause_problems`; on the CPU, where ``gcc -fopenacc`` runs the
loop, host and device memory are one, so no input exposes a wrong extent). Also a global fence where the
data is local, and a reduction shared out without its clause.
"""

from __future__ import annotations

import ast
import ctypes
import re
from typing import Callable

import numpy as np
import pandas as pd

from .. import validate
from ..errors import CheckFailed
from ..kernels import portability as pt
from ..refdata import load_reference
from ..timing import Timing
from . import answers
from . import harness as h
from . import timed

#: The awkward sizes of exercise 1 (the lecture notes' list: 1, 31, 257, 1000), with local size 64.
DIFF_SIZES: tuple[int, ...] = (1, 2, 31, 64, 65, 257, 1000)
DIFF_LOCAL_SIZE = 64
#: Shapes (rows, columns) of exercise 2: one element, thin, odd, whole tiles, more than a tile both ways.
TRANSPOSE_SHAPES: tuple[tuple[int, int], ...] = ((1, 1), (1, 40), (40, 1), (17, 33), (33, 17), (16, 16), (100, 257))
#: The tile edge of exercise 2 (its local size is TILE x TILE).
TRANSPOSE_TILE = 16
#: Matrix shapes (m, n) of exercise 3.
MATVEC_SHAPES: tuple[tuple[int, int], ...] = ((1, 1), (1, 7), (5, 1), (17, 33), (100, 257), (1000, 3))
#: Words of guard band after every array: NaN after inputs, a sentinel after outputs.
PAD = 64
SENTINEL = np.float32(-12345.0)


def _source(fn: Callable[[], str], what: str) -> str:
    validate.function(fn, what, example=f"def {what}(): return r'''...the source...'''", takes=0)
    try:
        src = fn()
    except Exception as exc:  # noqa: BLE001  (the student's function failed: say so, not a traceback)
        raise CheckFailed(f"{what}() raised {type(exc).__name__}: {str(exc)[:400]}") from None
    if not isinstance(src, str) or not src.strip():
        raise CheckFailed(f"{what} must return the source code as a str; it returned {type(src).__name__}.")
    return src


def _build(source: str, what: str, options=()):
    try:
        return pt.build_opencl(source, "cpu", options)
    except pt.BuildError as exc:
        raise CheckFailed(f"{what} does not compile. The OpenCL C compiler says:\n{exc.log}") from None


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


_TOKEN = re.compile(r"\s*(?:(?P<id>[A-Za-z_]\w*)|(?P<num>\d[\w.]*)|(?P<str>\"(?:\\.|[^\"])*\"|'(?:\\.|[^'])*')|"
                    r"(?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[{}()\[\];,?:.~!<>=+\-*/%&|^]))")
#: Built-ins whose value differs between the work-items of one work-group.
_PER_ITEM = {"get_local_id", "get_global_id", "get_local_linear_id", "get_global_linear_id", "get_sub_group_local_id"}
_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


def _tokens(code: str) -> list[tuple[str, int]]:
    """``(token, line)`` of C code without comments or preprocessor lines (a SyntaxError-free lexer)."""
    out, line = [], 1
    for row in code.splitlines():
        if not row.lstrip().startswith("#"):
            pos = 0
            while pos < len(row):
                m = _TOKEN.match(row, pos)
                if m is None or m.end() == pos:
                    if row[pos:].strip():
                        pos += 1  # a character C does not have: skipped (the compiler reports it)
                        continue
                    break
                out.append((m.group().strip(), line))
                pos = m.end()
        line += 1
    return out


class _Parser:
    """A recursive-descent parser of C statements (expressions stay token lists): enough to see control flow."""

    def __init__(self, tokens: list[tuple[str, int]]) -> None:
        self.t, self.i = tokens, 0

    def peek(self, k: int = 0) -> str:
        return self.t[self.i + k][0] if self.i + k < len(self.t) else ""

    def take(self) -> tuple[str, int]:
        tok = self.t[self.i] if self.i < len(self.t) else ("", 0)
        self.i += 1
        return tok

    def balanced(self, open_: str, close: str) -> list[tuple[str, int]]:
        """The tokens between ``open_`` (next) and its matching ``close``."""
        assert self.take()[0] == open_
        depth, out = 1, []
        while self.i < len(self.t):
            tok = self.take()
            depth += (tok[0] == open_) - (tok[0] == close)
            if depth == 0:
                return out
            out.append(tok)
        return out

    def statement(self) -> tuple:
        tok, line = self.peek(), self.t[self.i][1] if self.i < len(self.t) else 0
        if tok == "{":
            body = _Parser(self.balanced("{", "}")).statements()
            return ("block", line, body)
        if tok in ("if", "switch"):
            self.take()
            cond = self.balanced("(", ")")
            then = self.statement()
            other = None
            if self.peek() == "else":
                self.take()
                other = self.statement()
            return ("if", line, cond, then, other)
        if tok in ("for", "while"):
            self.take()
            header = self.balanced("(", ")")
            return ("loop", line, header, self.statement())
        if tok == "do":
            self.take()
            body = self.statement()
            if self.peek() == "while":
                self.take()
                header = self.balanced("(", ")")
                if self.peek() == ";":
                    self.take()
                return ("loop", line, header, body)
            return body
        if tok == "return":
            while self.i < len(self.t) and self.take()[0] != ";":
                pass
            return ("return", line)
        out, depth = [], 0
        while self.i < len(self.t):
            tok2 = self.take()
            if tok2[0] in "([{":
                depth += 1
            elif tok2[0] in ")]}":
                depth -= 1
            elif tok2[0] == ";" and depth <= 0:
                break
            out.append(tok2)
        return ("expr", line, out)

    def statements(self) -> list[tuple]:
        out = []
        while self.i < len(self.t):
            out.append(self.statement())
        return out


def _kernel_bodies(code: str) -> list[list[tuple]]:
    """The parsed bodies of the functions in ``code`` (every top-level ``{...}`` that follows a ``)``)."""
    toks = _tokens(code)
    bodies, i = [], 0
    while i < len(toks):
        if toks[i][0] == "{" and i > 0 and toks[i - 1][0] == ")":
            p = _Parser(toks[i:])
            bodies.append(_Parser(p.balanced("{", "}")).statements())
            i += p.i
            continue
        i += 1
    return bodies


def _walk(stmts: list[tuple]):
    for st in stmts:
        yield st
        if st[0] == "block":
            yield from _walk(st[2])
        elif st[0] == "if":
            yield from _walk([x for x in (st[3], st[4]) if x is not None])
        elif st[0] == "loop":
            yield from _walk([st[3]])


def _per_item_names(stmts: list[tuple]) -> set[str]:
    """Variables whose value may differ between work-items (assigned from get_local_id & co), to a fixed point."""
    parts = []
    for st in _walk(stmts):
        toks = st[2] if st[0] == "expr" else st[2] if st[0] == "loop" else []
        part: list = []
        depth = 0
        for tok, _ in toks:
            depth += tok in "([{" and tok != "" and len(tok) == 1
            depth -= tok in ")]}" and tok != "" and len(tok) == 1
            if tok in (",", ";") and depth == 0:
                parts.append(part)
                part = []
            else:
                part.append(tok)
        parts.append(part)
    names: set[str] = set()
    changed = True
    while changed:
        changed = False
        for part in parts:
            ops = [k for k, tok in enumerate(part) if tok in _ASSIGN_OPS or tok in ("++", "--")]
            if not ops:
                continue
            k = ops[0]
            target = next((tok for tok in part[:k] if re.fullmatch(r"[A-Za-z_]\w*", tok) and tok not in
                           ("int", "uint", "float", "const", "size_t", "unsigned", "long", "short", "char",
                            "__private", "private", "double")), None)
            if target is None or target in names:
                continue
            if set(part[k + 1:]) & (_PER_ITEM | names):
                names.add(target)
                changed = True
    return names


def barrier_problems(source: str) -> list[str]:
    """The barriers of an OpenCL C kernel that not every work-item of a work-group reaches: one message each.

    The kernel is parsed (statements, blocks, ``if``/``else``, loops, ``return``), not matched with patterns:

    * a ``barrier(...)`` inside an ``if``/``else``: only the work-items that take the branch reach it;
    * a ``barrier(...)`` in a loop whose condition depends on the work-item (on ``get_local_id`` or
      ``get_global_id``, or a variable computed from them): work-items wait a different number of times;
    * a ``return`` before a barrier: the work-items that returned never reach it;
    * ``CLK_GLOBAL_MEM_FENCE`` alone: it orders global memory, and a tile in ``__local`` memory needs
      ``CLK_LOCAL_MEM_FENCE``.

    Each is undefined behaviour (a hang or wrong results on a GPU; PoCL on the CPU may well hide it, so
    running the kernel cannot show it).
    """
    code = _strip_comments(source)
    problems = []
    for m in re.finditer(r"\bbarrier\s*\(([^)]*)\)", code):
        flags = m.group(1)
        if "CLK_LOCAL_MEM_FENCE" not in flags:
            problems.append(f"barrier({flags.strip()}) does not order local memory: the tile is __local, so the "
                            "barrier needs CLK_LOCAL_MEM_FENCE (CLK_GLOBAL_MEM_FENCE orders only global memory)")
    bodies = _kernel_bodies(code) or [_Parser(_tokens(code)).statements()]  # a bare list of statements
    for body in bodies:
        per_item = _per_item_names(body) | _PER_ITEM
        returned: list[int] = []

        def visit(stmts, enclosing):
            for st in stmts:
                kind, line = st[0], st[1]
                if kind == "return":
                    returned.append(line)
                elif kind == "block":
                    visit(st[2], enclosing)
                elif kind == "if":
                    ctx = enclosing + [("if", line)]
                    visit([st[3]], ctx)
                    if st[4] is not None:
                        visit([st[4]], ctx)
                elif kind == "loop":
                    varies = bool({tok for tok, _ in st[2]} & per_item)
                    visit([st[3]], enclosing + [("loop", line)] if varies else enclosing)
                elif kind == "expr" and any(tok == "barrier" for tok, _ in st[2]):
                    if any(c == "if" for c, _ in enclosing):
                        problems.append(f"line {line}: the barrier is inside an if/else: every work-item of the "
                                        "work-group must reach it. Guard the loads and stores, never the barrier")
                    elif enclosing:
                        loop = next(ln for c, ln in enclosing if c == "loop")
                        problems.append(f"line {line}: the barrier is in a loop (line {loop}) whose trip count "
                                        "depends on the work-item (its condition uses get_local_id/get_global_id "
                                        "or a value computed from them), so work-items reach it a different number "
                                        "of times. Make the loop's bounds the same for the whole work-group")
                    if returned:
                        problems.append(f"line {line}: a `return` at line {returned[0]} comes before this barrier: "
                                        "the work-items that return never reach it. Do not return early; guard the "
                                        "loads and stores with an `if` instead")

        visit(body, [])
    return list(dict.fromkeys(problems))


# ------------------------------------------------------------------------------------------------ exercise 1


def diff_reference(x: np.ndarray) -> np.ndarray:
    """``d[i] = x[i + 1] - x[i]`` for ``i < n - 1`` (float32)."""
    x = np.asarray(x, dtype=np.float32)
    return (x[1:] - x[:-1]).astype(np.float32)


def check_diff(source_fn: Callable[[], str], global_size_fn: Callable[[int, int], int]) -> None:
    """Exercise 1: the CUDA kernel ``diff`` translated to OpenCL C, launched with the student's global size.

    ``source_fn()`` returns OpenCL C defining ``__kernel void diff(const int n, __global const float *x,
    __global float *d)``; ``global_size_fn(n, local_size)`` returns the NDRange's size. Run on PoCL for the
    sizes of :data:`DIFF_SIZES` with local size 64: a global size that is not a whole number of work-groups,
    one too small, a missing guard (a write into the guard band after ``d``) and a wrong result each get
    their own message.
    """
    source = _source(source_fn, "diff_opencl")
    validate.function(global_size_fn, "global_size_for", example="def global_size_for(n, local_size): ...", takes=2)
    cl = pt.opencl_module()
    target = pt.opencl_target("cpu")
    program = _build(source, "your OpenCL diff kernel")
    try:
        kernel = cl.Kernel(program, "diff")
    except cl.Error:
        raise CheckFailed("your OpenCL source defines no kernel named diff: keep `__kernel void diff(...)`.") from None
    rng = np.random.default_rng(12)
    mf = cl.mem_flags
    for n in DIFF_SIZES:
        gs = global_size_fn(n, DIFF_LOCAL_SIZE)
        if not isinstance(gs, (int, np.integer)) or isinstance(gs, bool):
            raise CheckFailed(f"global_size_for({n}, {DIFF_LOCAL_SIZE}) returned {gs!r}: return an int.")
        gs = int(gs)
        if gs % DIFF_LOCAL_SIZE:
            raise CheckFailed(
                f"global_size_for({n}, {DIFF_LOCAL_SIZE}) = {gs} is not a whole number of work-groups of "
                f"{DIFF_LOCAL_SIZE}: OpenCL 1.x refuses such a launch (INVALID_WORK_GROUP_SIZE). Round up, as "
                "CUDA's ceil(n / threads) blocks do: ((n + local_size - 1) // local_size) * local_size.")
        if gs < n - 1:
            raise CheckFailed(f"global_size_for({n}, {DIFF_LOCAL_SIZE}) = {gs} work-items cannot cover the {n - 1} "
                              "outputs: round n UP to a multiple of the local size.")
        x = rng.standard_normal(n).astype(np.float32)
        x_pad = np.concatenate([x, np.full(PAD, np.nan, np.float32)])
        d_pad = np.full(max(n - 1, 0) + PAD, SENTINEL, np.float32)
        d_pad[:max(n - 1, 0)] = np.nan
        x_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x_pad)
        d_b = cl.Buffer(target.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=d_pad)
        kernel.set_args(np.int32(n), x_b, d_b)
        if gs:
            try:
                cl.enqueue_nd_range_kernel(target.queue, kernel, (gs,), (DIFF_LOCAL_SIZE,)).wait()
            except cl.Error as exc:
                raise CheckFailed(f"the launch failed for n={n}: {exc}") from None
        got = np.empty_like(d_pad)
        cl.enqueue_copy(target.queue, got, d_b)
        target.queue.finish()
        m = max(n - 1, 0)
        if not np.array_equal(got[m:], np.full(PAD, SENTINEL, np.float32)):
            raise CheckFailed(
                f"for n={n} your kernel wrote past the end of d (d has n - 1 = {m} elements; the work-items of the "
                "rounded-up NDRange beyond them must do nothing): guard with `if (i < n - 1)`.")
        want = diff_reference(x)
        bad = ~np.isclose(got[:m], want, rtol=1e-6, atol=1e-6)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            unwritten = np.isnan(got[:m][bad]).all()
            hint = ("those outputs were never written (still NaN): is the index get_global_id(0), and does the "
                    "NDRange cover them?" if unwritten else
                    "d[i] = x[i + 1] - x[i], with i = get_global_id(0) (CUDA's blockIdx.x * blockDim.x + threadIdx.x)")
            raise CheckFailed(f"your kernel is wrong for n={n}: {int(bad.sum())} of {m} outputs differ from NumPy "
                              f"(d[{i}] = {got[i]!r}, expected {want[i]!r}): {hint}.")
    print(f"Correct: your OpenCL diff kernel matches NumPy on {len(DIFF_SIZES)} sizes (1 to 1000) with work-groups "
          f"of {DIFF_LOCAL_SIZE}, rounded-up global sizes and a guard that keeps the extra work-items idle.")


# ------------------------------------------------------------------------------------------------ exercise 2


def check_transpose(source_fn: Callable[[], str]) -> None:
    """Exercise 2: the CUDA shared-memory transpose translated to OpenCL C with a ``__local`` tile.

    ``__kernel void transpose(const int rows, const int cols, __global const float *in, __global float *out)``,
    launched with TILE x TILE work-groups over the input (dimension 0 along its columns), global sizes rounded
    up. First the static barrier checks (:func:`barrier_problems`), then shapes from one element to 100 x 257.
    """
    source = _source(source_fn, "transpose_opencl")
    code = _strip_comments(source)
    if not re.search(r"\bbarrier\s*\(", code):
        raise CheckFailed("your kernel has no barrier: work-items read tile elements other work-items wrote, so "
                          "between the tile's stores and its loads every work-item must wait: "
                          "barrier(CLK_LOCAL_MEM_FENCE) (CUDA's __syncthreads()).")
    problems = barrier_problems(source)
    if problems:
        raise CheckFailed("your kernel's barrier is wrong: " + "; ".join(problems) + ".")
    if "__local" not in code:
        raise CheckFailed("the tile must be in local memory (CUDA's __shared__ is OpenCL's __local).")
    cl = pt.opencl_module()
    target = pt.opencl_target("cpu")
    program = _build(source, "your OpenCL transpose kernel", options=(f"-DTILE={TRANSPOSE_TILE}",))
    try:
        kernel = cl.Kernel(program, "transpose")
    except cl.Error:
        raise CheckFailed("your OpenCL source defines no kernel named transpose.") from None
    mf = cl.mem_flags
    t = TRANSPOSE_TILE
    rng = np.random.default_rng(13)
    for rows, cols in TRANSPOSE_SHAPES:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        in_pad = np.concatenate([a.ravel(), np.full(PAD, np.nan, np.float32)])
        out_pad = np.full(rows * cols + PAD, SENTINEL, np.float32)
        out_pad[:rows * cols] = np.nan
        in_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=in_pad)
        out_b = cl.Buffer(target.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out_pad)
        kernel.set_args(np.int32(rows), np.int32(cols), in_b, out_b)
        cl.enqueue_nd_range_kernel(target.queue, kernel, (pt.global_size(cols, t), pt.global_size(rows, t)),
                                   (t, t)).wait()
        got = np.empty_like(out_pad)
        cl.enqueue_copy(target.queue, got, out_b)
        target.queue.finish()
        if not np.array_equal(got[rows * cols:], np.full(PAD, SENTINEL, np.float32)):
            raise CheckFailed(f"for a {rows} x {cols} input your kernel wrote past the end of out: guard the store "
                              "(its row and column must be inside the transposed matrix, cols x rows).")
        want = a.T
        res = got[:rows * cols].reshape(cols, rows)
        if not np.array_equal(res, want):
            bad = res != want
            j, i = (int(v[0]) for v in np.nonzero(bad))
            unwritten = np.isnan(res[bad]).all()
            hint = ("those elements were never written: the store must use the block's swapped origin, "
                    "row = get_group_id(0) * TILE + get_local_id(1), column = get_group_id(1) * TILE + get_local_id(0)"
                    if unwritten else
                    "read the tile transposed, tile[lx][ly] after storing tile[ly][lx], and swap the roles of the "
                    "work-group's indices (get_group_id(0) <-> get_group_id(1)) for the output")
            raise CheckFailed(f"your transpose is wrong for a {rows} x {cols} input: {int(bad.sum())} of {rows * cols} "
                              f"elements differ (out[{j}, {i}] = {res[j, i]!r}, expected {want[j, i]!r}): {hint}.")
    print(f"Correct: your OpenCL transpose matches NumPy on {len(TRANSPOSE_SHAPES)} shapes (1 x 1 to 100 x 257), with "
          "its barrier reached by every work-item of the work-group.")


# ------------------------------------------------------------------------------------------------ exercise 3


def matvec_reference(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``A @ x`` in float64."""
    return np.asarray(A, dtype=np.float64) @ np.asarray(x, dtype=np.float64)


def _pragmas(code: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each ``#pragma acc`` (continuation lines joined), comments removed."""
    lines = code.splitlines()
    out, i = [], 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("#pragma"):
            start = i + 1
            text = s
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
            if re.match(r"#pragma\s+acc\b", text):
                out.append((start, " ".join(text.split())))
        i += 1
    return out


def _clause_items(pragma: str, clause: str) -> dict[str, list[tuple[str, str]]]:
    """``{name: [(start, length), ...]}`` of the items of every ``clause(...)`` in ``pragma``.

    ``copyin(A[0:m*n], x)`` gives ``{"A": [("0", "m*n")], "x": []}``: an item without an array section
    has no extents (a section ``[lo:len]`` per dimension; a bare ``[i]`` is the element i, i.e. ``(i, "1")``).
    """
    found: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(rf"\b{clause}\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", pragma):
        for part in re.split(r",(?![^\[]*\])", m.group(1)):
            name = part.split("[")[0].strip()
            if not name:
                continue
            sections = []
            for sec in re.findall(r"\[([^\]]*)\]", part):
                lo, _, length = sec.partition(":")
                sections.append((lo.strip() or "0", length.strip()) if ":" in sec else (sec.strip(), "1"))
            found[name] = sections
    return found


def _clause_vars(pragma: str, clause: str) -> set[str]:
    return set(_clause_items(pragma, clause))


_EXTENT_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub,
                 ast.Mult, ast.FloorDiv, ast.Div, ast.USub, ast.UAdd)


def _extent(expr: str, m: int, n: int) -> int | None:
    """The value of a C extent expression in ``m`` and ``n`` (None if it is not such an expression)."""
    try:
        tree = ast.parse(expr.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _EXTENT_NODES) for node in ast.walk(tree)):
        return None
    if any(isinstance(node, ast.Name) and node.id not in ("m", "n") for node in ast.walk(tree)):
        return None
    try:
        return int(eval(compile(tree, "<extent>", "eval"), {"__builtins__": {}}, {"m": m, "n": n}))  # noqa: S307
    except (ArithmeticError, TypeError, ValueError):
        return None


#: The class of a data clause that moves an array in a direction the loop does not need (copy of a read-only input
#: or of an output only written).
WASTED_COPY = "Wasted copy"
#: The arrays of exercise 3, with the number of elements the loop touches, as a function of (m, n).
MATVEC_EXTENTS: dict[str, tuple[str, Callable[[int, int], int]]] = {
    "A": ("m*n", lambda m, n: m * n), "x": ("n", lambda m, n: n), "y": ("m", lambda m, n: m)}


def data_clause_problems(pragmas: str) -> list[str]:
    """What is wrong with the extents of the data clauses in ``pragmas`` (the matvec's directives, joined).

    Every array the loop uses must come with its extent, ``A[0:m*n]``, ``x[0:n]``, ``y[0:m]`` (GCC, like
    every OpenACC compiler, cannot know how long the array behind a pointer is, and copies nothing or one
    element); an extent is compared by evaluating it for several (m, n). A ``present(...)`` needs a data
    region around it (``#pragma acc data`` or ``enter data``) that put the array on the device.
    """
    problems = []
    for clause in ("copyin", "copyout", "copy", "create", "present"):
        for name, sections in _clause_items(pragmas, clause).items():
            if name not in MATVEC_EXTENTS:
                continue
            want, size = MATVEC_EXTENTS[name]
            if not sections:
                problems.append(f"{clause}({name}) has no extent: {name} is a pointer and the compiler cannot "
                                f"know how many elements it points to, so a device gets the wrong amount of data. "
                                f"Write {clause}({name}[0:{want}])")
                continue
            lo, length = sections[0]
            cases = [(3, 5), (17, 33), (1000, 3)]
            starts = [_extent(lo, m, n) for m, n in cases]
            lengths = [_extent(length, m, n) for m, n in cases]
            if None in starts or None in lengths or any(s_ != 0 for s_ in starts) or \
                    [ln for ln in lengths] != [size(m, n) for m, n in cases]:
                problems.append(f"{clause}({name}[{lo}:{length}]) covers the wrong elements: the loop uses "
                                f"{name}[0:{want}] (OpenACC's section is [start:length], not [first:last]); with "
                                f"another extent a device copies too little or too much. Write "
                                f"{clause}({name}[0:{want}])")
    if _clause_items(pragmas, "present") and not re.search(r"#pragma\s+acc\s+(data|enter\s+data)\b", pragmas):
        problems.append("present(...) says the arrays are already on the device, but no data region puts them there "
                        "(no `#pragma acc data` or `enter data` around the loop): on a GPU the program stops with "
                        "'data not present'. Use copyin/copyout on the loop, or open a data region first")
    return list(dict.fromkeys(problems))


def check_matvec(source_fn: Callable[[], str]) -> None:
    """Exercise 3: OpenACC directives on the matrix-vector loop nest ``y = A x``, compiled with ``gcc -fopenacc``.

    ``void matvec(int m, int n, const float *restrict A, const float *restrict x, float *restrict y)``. Checks, in
    order: it compiles (the log otherwise); GCC assigned OpenACC parallelism to the row loop (its report); the
    data clauses copy A and x in and y out (on a device with its own memory, anything else gives wrong results
    or wasted copies); the inner loop, a sum, is either sequential or carries ``reduction(+:sum)``; the results
    match NumPy on shapes from 1 x 1 to 1000 x 3.
    """
    source = _source(source_fn, "matvec_acc")
    try:
        compiled = pt.compile_c(source, pt.OPENACC_FLAGS, "matvec.c")
    except pt.BuildError as exc:
        log = exc.log.replace("\u2018", "'").replace("\u2019", "'")
        ignored = re.findall(r"ignoring '(#pragma acc[^']*)'", log)
        if ignored:
            raise CheckFailed(f"gcc ignored {ignored[0]!r}: that is not an OpenACC directive (the compute constructs "
                              "are `parallel` and `kernels`, with an s). Then it stopped with:\n{log}") from None
        raise CheckFailed(f"your C code does not compile. gcc says:\n{exc.log}") from None
    report = compiled.report.replace("\u2018", "'").replace("\u2019", "'")
    ignored = re.findall(r"ignoring '(#pragma acc[^']*)'", report)
    if ignored:
        raise CheckFailed(f"gcc ignored {ignored[0]!r}: that is not an OpenACC directive (the compute constructs are "
                          "`parallel` and `kernels`, with an s; a loop directive is `#pragma acc loop ...`).")
    code = _strip_comments(source)
    pragmas = _pragmas(code)
    assigned = [(int(line), par) for line, par in
                re.findall(r":(\d+):\d+: optimized: assigned OpenACC (.+?) loop parallelism", report)]
    lines = code.splitlines()
    outer = next((i + 1 for i, s in enumerate(lines) if re.search(r"\bfor\s*\(\s*int\s+i\b", s)), None)
    inner = next((i + 1 for i, s in enumerate(lines) if re.search(r"\bfor\s*\(\s*int\s+j\b", s)), None)
    if outer is None or inner is None:
        raise CheckFailed("keep the two loops of the skeleton (for (int i ...) over the rows, for (int j ...) over "
                          "the columns): only add directives.")
    parallel_outer = [(line, par) for line, par in assigned if line < outer and par != "seq"]
    if not pragmas or not parallel_outer:
        raise CheckFailed("gcc's report shows no parallel OpenACC loop over the rows: put `#pragma acc parallel loop` "
                          "(with its data clauses) right above `for (int i ...)`. GCC's report says:\n"
                          + (report or "(nothing)"))
    compute = next((p for line, p in pragmas if line < outer and re.search(r"\b(parallel|kernels)\b", p)), "")
    data = " ".join(p for line, p in pragmas if line < outer)
    extents = data_clause_problems("\n".join(p for line, p in pragmas if line < outer))
    if extents:
        raise CheckFailed("your data clauses are wrong: " + "; ".join(extents) + ". (gcc -fopenacc runs the loop on "
                          "the CPU, where the data is already there, so the results cannot show this.)")
    copyin, copyout, copy = (_clause_vars(data, c) for c in ("copyin", "copyout", "copy"))
    present = _clause_vars(data, "present")
    for name in ("A", "x"):
        if name in copy:
            raise CheckFailed(f"{WASTED_COPY}: copy({name}[...]) copies {name} back to the host after the loop, for "
                              f"nothing: the loop only reads {name}, so copyin({name}[...]) suffices.")
        if name not in copyin and name not in present:
            raise CheckFailed(f"no data clause names {name}: GCC does not infer the extent of a pointer, so "
                              f"{name} would reach the device as a bare host address. Add copyin({name}[0:...]).")
    if "y" in copy:
        raise CheckFailed(f"{WASTED_COPY}: copy(y[...]) copies y to the device before the loop as well as back after "
                          "it: the loop only writes y (every y[i] = sum), so the copy in moves m floats over the link "
                          "for nothing, a whole extra host-to-device transfer of the output (what the chapter's "
                          "data-clause table counts). Write copyout(y[0:m]).")
    if "y" in copyin and "y" not in copy:
        raise CheckFailed("copyin(y[...]) sends y to the device and never brings it back: on a GPU the host would "
                          "keep its old y. The loop only writes y: copyout(y[0:m]).")
    if "y" not in copyout and "y" not in copy and "y" not in present:
        raise CheckFailed("no data clause names y: add copyout(y[0:m]) so the results come back to the host.")
    inner_pragma = next((p for line, p in pragmas if outer < line < inner), "")
    inner_par = [par for line, par in assigned if outer < line <= inner]
    if inner_par and inner_par[0] != "seq" and "reduction" not in inner_pragma:
        raise CheckFailed(f"the inner loop is shared out ({inner_par[0]}) but every iteration adds into the same "
                          "`sum`: a race on a device. Say so: `#pragma acc loop reduction(+:sum)` (or `loop seq`).")
    if "reduction" in inner_pragma and not re.search(r"reduction\s*\(\s*\+\s*:\s*sum\s*\)", inner_pragma):
        raise CheckFailed("the reduction clause must name the operator and the variable: reduction(+:sum).")
    fn = compiled.function("matvec", [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3)
    rng = np.random.default_rng(14)
    for m, n in MATVEC_SHAPES:
        A = rng.standard_normal((m, n)).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        y = np.concatenate([np.full(m, np.nan, np.float32), np.full(PAD, SENTINEL, np.float32)])
        fn(m, n, A.ctypes.data, x.ctypes.data, y.ctypes.data)
        if not np.array_equal(y[m:], np.full(PAD, SENTINEL, np.float32)):
            raise CheckFailed(f"for m={m}, n={n} your code wrote past the end of y: the row loop runs i < m.")
        want = matvec_reference(A, x)
        if not np.allclose(y[:m], want, rtol=1e-4, atol=1e-4):
            bad = int(np.count_nonzero(~np.isclose(y[:m], want, rtol=1e-4, atol=1e-4)))
            raise CheckFailed(f"your matvec is wrong for m={m}, n={n}: {bad} of {m} results differ from NumPy. Only "
                              "add directives: the loops themselves were right.")
    print(f"Correct: gcc parallelised your row loop ({parallel_outer[0][1]}), the data clauses copy A and x in and y "
          f"out, and the results match NumPy on {len(MATVEC_SHAPES)} shapes. Directive: {compute}")


# ------------------------------------------------------------------------------------------------ exercise 4

#: The CUDA names of exercise 4, in the order of the lab's table.
CUDA_NAMES: tuple[str, ...] = ("grid", "thread block", "thread", "shared memory", "__syncthreads()", "blockIdx.x",
                               "threadIdx.x", "blockDim.x", "blockIdx.x * blockDim.x + threadIdx.x", "gridDim.x")
#: Accepted OpenCL answers (compared after lower-casing and removing spaces, hyphens and underscores
#: outside function names).
OPENCL_ANSWERS: dict[str, tuple[str, ...]] = {
    "grid": ("ndrange", "ndrange", "n-drange", "ndimensionalrange", "nd range"),
    "thread block": ("work-group", "workgroup", "work group"),
    "thread": ("work-item", "workitem", "work item"),
    "shared memory": ("local memory", "__local", "local", "__local memory"),
    "__syncthreads()": ("barrier(CLK_LOCAL_MEM_FENCE)",),
    "blockIdx.x": ("get_group_id(0)",),
    "threadIdx.x": ("get_local_id(0)",),
    "blockDim.x": ("get_local_size(0)",),
    "blockIdx.x * blockDim.x + threadIdx.x": ("get_global_id(0)",),
    "gridDim.x": ("get_num_groups(0)",),
}
#: What the lecture's table (or a common guess) says, and why it is not the answer.
KNOWN_WRONG: dict[str, str] = {
    "blockid": "the lecture's table says 'Block ID', but OpenCL has no such name: the built-in is get_group_id(0)",
    "localid": "the lecture's table says 'Local ID'; the built-in function is get_local_id(0)",
    "globalid": "the built-in function is get_global_id(0)",
    "get_block_id(0)": "there is no get_block_id: a block is a work-group, so get_group_id(0)",
    "get_thread_id(0)": "there is no get_thread_id: get_local_id(0) inside the work-group, get_global_id(0) in the NDRange",
    "barrier(clk_global_mem_fence)": "CLK_GLOBAL_MEM_FENCE orders global memory only; __syncthreads() guards shared "
                                     "(local) memory: barrier(CLK_LOCAL_MEM_FENCE)",
    "privatememory": "private memory is per work-item (CUDA's registers); shared memory is OpenCL's local memory",
    "globalmemory": "global memory is CUDA's device memory; shared memory is OpenCL's local memory",
    "get_global_size(0)": "get_global_size(0) counts work-items (gridDim.x * blockDim.x); gridDim.x counts "
                          "work-groups: get_num_groups(0)",
    "get_global_size(0)/get_local_size(0)": "that equals it, but OpenCL has the built-in get_num_groups(0)",
}


def _norm(text: str) -> str:
    t = str(text).strip().lower()
    if "(" in t:  # a function call: keep underscores, drop spaces
        return t.replace(" ", "")
    return re.sub(r"[\s\-_]", "", t)


def check_opencl_names(names_fn: Callable[[], dict]) -> None:
    """Exercise 4: ``names_fn()`` returns ``{CUDA name: OpenCL name}`` for the ten names of :data:`CUDA_NAMES`.

    Compared after normalising case, spaces and hyphens; function names must be the real built-ins. A
    missing answer, the lecture's "Block ID"/"Local ID" and other classic slips get their own message.
    """
    validate.function(names_fn, "opencl_names", takes=0)
    got = names_fn()
    if not isinstance(got, dict):
        raise CheckFailed(f"opencl_names() must return a dict {{CUDA name: OpenCL name}}, got {type(got).__name__}.")
    missing = [k for k in CUDA_NAMES if got.get(k) in (None, "")]
    if missing:
        raise CheckFailed(f"{len(missing)} of {len(CUDA_NAMES)} names are not filled in yet, e.g. {missing[0]!r}.")
    wrong = []
    for cuda_name in CUDA_NAMES:
        answer = _norm(got[cuda_name])
        if answer in {_norm(a) for a in OPENCL_ANSWERS[cuda_name]}:
            continue
        why = KNOWN_WRONG.get(answer, "")
        wrong.append(f"{cuda_name} -> {got[cuda_name]!r}" + (f" ({why})" if why else ""))
    if wrong:
        raise CheckFailed(f"{len(wrong)} of {len(CUDA_NAMES)} are not OpenCL's names: " + "; ".join(wrong) + ".")
    print(f"Correct: all {len(CUDA_NAMES)} CUDA names mapped to OpenCL's (grid -> NDRange, block -> work-group, "
          "thread -> work-item, and the real built-in functions).")


__all__ = ["BOUND_CASES", "CUDA_NAMES", "DIFF_SIZES", "OPENCL_ANSWERS", "TRANSPOSE_SHAPES", "WASTED_COPY",
           "barrier_problems",
           "check_diff", "check_kernel_bound", "show_kernel_bound",
           "check_matvec", "data_clause_problems", "check_opencl_names", "check_transpose", "diff_reference", "matvec_reference"]


# ------------------------------------------------------------------------------------------- measured exercise

#: Work-group sizes the measured exercise accepts, and the size timed on a GPU (NVIDIA's OpenCL).
TUNED_LOCAL_SIZES: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
TUNED_N = 2**26
#: Elements the chosen work-group size is checked on (PoCL), one partial work-group included.
CHOICE_N = 1000


def _diff_events(kind: str, source: str, x: np.ndarray, local_size: int, repeat: int) -> tuple[np.ndarray, list[float]]:
    """Run the kernel ``diff`` of ``source`` on the OpenCL device of ``kind`` once (its result), then time ``repeat``
    launches with the queue's profiling events (device time, ms)."""
    cl = pt.opencl_module()
    target = pt.opencl_target(kind)
    if local_size > target.device.max_work_group_size:
        raise h.failure(timed.NOT_ALLOWED, f"choose_local_size() returned {local_size}: {target.name} allows at "
                                              f"most {target.device.max_work_group_size} work-items in a work-group.")
    kernel = cl.Kernel(pt.build_opencl(source, kind), "diff")
    mf = cl.mem_flags
    n = x.size
    x_b = cl.Buffer(target.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    d_b = cl.Buffer(target.context, mf.READ_WRITE, size=max(n - 1, 1) * 4)
    kernel.set_args(np.int32(n), x_b, d_b)
    size = (pt.global_size(n, local_size),), (local_size,)
    cl.enqueue_nd_range_kernel(target.queue, kernel, *size).wait()
    got = np.empty(max(n - 1, 0), np.float32)
    cl.enqueue_copy(target.queue, got, d_b)
    target.queue.finish()
    times = []
    for _ in range(repeat):
        ev = cl.enqueue_nd_range_kernel(target.queue, kernel, *size)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    return got, times


def _check_local_size(source: str, local_size: int) -> None:
    x = np.random.default_rng(13).standard_normal(CHOICE_N).astype(np.float32)
    got, _ = _diff_events("cpu", source, x, local_size, repeat=0)
    if not np.allclose(got, diff_reference(x), rtol=1e-6, atol=1e-6):
        raise h.failure(h.WRONG_VALUES, f"with work-groups of {local_size} your diff kernel is wrong for n = "
                                        f"{CHOICE_N}: its index must not depend on the work-group size.")
    print(f"Correct: with work-groups of {local_size} your diff kernel matches NumPy for n = {CHOICE_N} (PoCL).")


def _diff_reference(local_size: int) -> str:
    ref = load_reference("ch12_gpu")
    t = ref.table
    ocl = t[(t["kernel"] == "saxpy") & (t["model"] == "OpenCL C")].iloc[0]
    copy = t[t["kernel"] == "copy"].iloc[0]
    same = (f"nor work-groups of {local_size} " if local_size != pt.SAXPY_THREADS else "")
    return timed.reference_text(
        ref, f"neither the diff kernel {same}was measured; the chapter's OpenCL SAXPY ({ocl['size']}, work-groups of "
             f"{pt.SAXPY_THREADS}) on {ocl['device']} reached {float(ocl.gbps):,.0f} GB/s, {copy['model']} "
             f"{float(copy.gbps):,.0f} GB/s: ratio {float(ocl.gbps) / float(copy.gbps):.2f}")


DIFF_TUNED = timed.MeasuredExercise(
    name="your OpenCL diff at your work-group size", target=timed.target_for("12", 0.7),
    measures=f"your diff kernel on NVIDIA's OpenCL, {TUNED_N:,} floats at your work-group size, in GB/s (8 bytes "
             "per element)",
    yardstick="the copy ceiling (a CUDA device-to-device copy of the same bytes)", reference=_diff_reference)


#: Why the measured exercise is not timed on a CUDA GPU whose OpenCL driver is not visible (printed).
NO_OPENCL_GPU = ("no OpenCL GPU device here: NVIDIA's OpenCL is seen only through an ICD file, "
                 "/etc/OpenCL/vendors/nvidia.icd holding the line libnvidia-opencl.so.1")


def _opencl_gpu_here() -> bool:
    """Whether the race can run: a CUDA GPU, and an OpenCL device of type GPU (NVIDIA's driver, named by an ICD)."""
    if not timed.can_time():
        return False
    try:
        pt.opencl_target("gpu")
    except pt.ToolMissing:
        return False
    return True


def _race_diff(source: str, local_size: int) -> tuple[Timing, Timing]:
    x = np.random.default_rng(0).standard_normal(TUNED_N).astype(np.float32)
    got, times = _diff_events("gpu", source, x, local_size, repeat=20)
    if not np.allclose(got[:4096], diff_reference(x[:4097]), rtol=1e-6, atol=1e-6):
        raise h.failure(h.WRONG_VALUES, "your diff kernel is wrong on the GPU's OpenCL: nothing was timed.")
    nbytes = 8 * TUNED_N
    student = Timing(f"your diff, work-groups of {local_size}", times_ms=tuple(times), nbytes=nbytes)
    return student, timed.time_copy_of(nbytes)


def check_diff_local_size(source_fn: Callable[[], str], global_size_fn: Callable[[int, int], int],
                          choose_local_size: Callable[[], int]) -> timed.Verdict:
    """Measured exercise: ``choose_local_size()`` returns the work-group size of your ``diff`` (exercise 1, checked
    first on PoCL, then once more with that size); on a GPU, through NVIDIA's OpenCL, it must reach ``DIFF_TUNED.target`` of the
    copy ceiling, timed in the same run. Under the simulator (and on PoCL) it prints the reference GPU's numbers.

    Raises:
        CheckFailed: the kernel is wrong, the size is not allowed, or too slow.
    """
    local_size = timed.choose(choose_local_size, "choose_local_size", TUNED_LOCAL_SIZES)

    def correct() -> None:
        check_diff(source_fn, global_size_fn)
        _check_local_size(_source(source_fn, "diff_opencl"), local_size)

    return timed.check(DIFF_TUNED, local_size, correct=correct,
                       race=lambda: _race_diff(_source(source_fn, "diff_opencl"), local_size),
                       timeable=_opencl_gpu_here, why_not=NO_OPENCL_GPU)


# ------------------------------------------------------------------------------ predict, then measure (issue 26)

#: (n, loads, stores, itemsize, copy_gbs) cases of :func:`check_kernel_bound`: arguments, not a GPU's figures.
BOUND_CASES: tuple[tuple[int, int, int, int, float], ...] = (
    (10**6, 3, 1, 8, 250.0), (2**26, 2, 1, 4, 3000.0), (2**26, 1, 1, 4, 3000.0))


def _bound_hint(got: float, n: int, loads: int, stores: int, itemsize: int, gbs: float) -> str:
    want = (loads + stores) * itemsize * n / (gbs * 1e9) * 1e3
    if np.isclose(got, want * loads / (loads + stores), rtol=1e-6):
        return "the stores move bytes too: (loads + stores) * itemsize bytes per element"
    if np.isclose(got, want / itemsize, rtol=1e-6):
        return f"count bytes, not elements: {itemsize} bytes per element per access"
    if np.isclose(got, want * 1e3, rtol=1e-6) or np.isclose(got, want / 1e3, rtol=1e-6):
        return "bytes / (GB/s * 1e9) is seconds: times 1000 for milliseconds"
    return f"bytes moved = (loads + stores) * itemsize * n; time = bytes / ({gbs:g}e9 B/s)"


def check_kernel_bound(predict_kernel_ms: Callable) -> None:
    """Predict, then measure: ``predict_kernel_ms(n, loads, stores, itemsize, copy_gbs)`` returns the least time in
    ms of a kernel that loads ``loads`` and stores ``stores`` values of ``itemsize`` bytes per element of ``n``, at the
    copy ceiling ``copy_gbs`` (GB/s, 10^9 bytes per second): the same bound in OpenCL as in CUDA.

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(predict_kernel_ms, "predict_kernel_ms",
                          "predict_kernel_ms(n, loads, stores, itemsize, copy_gbs)",
                          BOUND_CASES,
                          lambda n, loads, stores, itemsize, gbs: (loads + stores) * itemsize * n / (gbs * 1e9) * 1e3,
                          shown=lambda got, want: f"{got:.6g} ms, the bound is {want:.6g} ms",
                          hint=_bound_hint)
    print(f"Correct: your bound equals bytes moved over the copy ceiling on all {len(BOUND_CASES)} cases.")


def show_kernel_bound(predict_kernel_ms: Callable) -> pd.DataFrame:
    """Your bound (checked first by :func:`check_kernel_bound`) for the chapter's OpenCL SAXPY on 2^26 floats (2
    loads, 1 store) beside its measured time: the reference GPU's (``ch12_gpu``) everywhere, its copy ceiling
    included; on a GPU the copy ceiling is also timed now and the bound for it shown on a second row.

    Raises:
        CheckFailed: the prediction is wrong (as :func:`check_kernel_bound`).
    """
    check_kernel_bound(predict_kernel_ms)
    ref = load_reference("ch12_gpu")
    t = ref.table
    ocl = t[(t["kernel"] == "saxpy") & (t["model"] == "OpenCL C")].iloc[0]
    copy_gbs = float(t[t["kernel"] == "copy"].iloc[0].gbps)
    print(timed.reference_text(ref, f"Measured: the chapter's OpenCL SAXPY on {ocl['device']}, copy ceiling "
                                       f"{copy_gbs:,.0f} GB/s"))
    rows = [(f"reference copy ceiling ({copy_gbs:,.0f} GB/s)", copy_gbs)]
    if timed.can_time():
        rows.append(("this GPU's copy ceiling, measured now", timed.time_copy_of(12 * TUNED_N).gbps))
    table = []
    for what, gbs in rows:
        bound = answers.number(answers.call(predict_kernel_ms, "predict_kernel_ms", TUNED_N, 2, 1, 4, gbs),
                               "predict_kernel_ms")
        table.append({"bound from": what, "your bound (ms)": round(bound, 4),
                      "OpenCL SAXPY, reference (ms)": round(float(ocl.median_ms), 4),
                      "measured / bound": round(float(ocl.median_ms) / bound, 2)})
    return pd.DataFrame(table)
