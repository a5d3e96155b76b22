"""Checkers for the lab "Portability" (labs/12_portability_lab.ipynb).

The students' code is OpenCL C and OpenACC C, given as Python functions that return the source text. The
checkers compile it for real (pyopencl on the CPU's OpenCL driver, ``gcc -fopenacc``), run it on awkward
sizes with NaN-poisoned outputs and guard bands after every array, and compare with NumPy. A build error
comes back with the compiler's log. Static checks catch what the CPU cannot show: a barrier only part of a
work-group reaches, a global fence where the data is local, a reduction shared out without its clause,
data clauses that would copy the wrong way on a device with its own memory.
"""

from __future__ import annotations

import ctypes
import re
from typing import Callable

import numpy as np

from .. import validate
from ..errors import CheckFailed
from ..kernels import portability as pt

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
    validate.function(fn, what, example="def diff_opencl(): return r'''__kernel void diff(...) { ... }'''")
    src = fn()
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


def barrier_problems(source: str) -> list[str]:
    """Static checks of the barriers of an OpenCL C kernel: one message per problem (empty when none).

    * a ``barrier(...)`` inside an ``if``/``else`` block, or right after an ``if (...)`` without braces: only the
      work-items that take the branch reach it (undefined behaviour: a hang or wrong results on a GPU);
    * ``CLK_GLOBAL_MEM_FENCE`` alone: it orders global memory, and a tile in ``__local`` memory needs
      ``CLK_LOCAL_MEM_FENCE``.
    """
    code = _strip_comments(source)
    problems = []
    for m in re.finditer(r"\bbarrier\s*\(([^)]*)\)", code):
        flags = m.group(1)
        if "CLK_LOCAL_MEM_FENCE" not in flags:
            problems.append(f"barrier({flags.strip()}) does not order local memory: the tile is __local, so the "
                            "barrier needs CLK_LOCAL_MEM_FENCE (CLK_GLOBAL_MEM_FENCE orders only global memory)")
        before = code[:m.start()]
        # the innermost unclosed "{" before the barrier, and what opens it
        depth, opener = 0, None
        for i in range(len(before) - 1, -1, -1):
            ch = before[i]
            if ch == "}":
                depth += 1
            elif ch == "{":
                if depth == 0:
                    opener = before[:i].rstrip()
                    break
                depth -= 1
        head = opener[-80:] if opener else ""
        statement = re.split(r"[;{}]", before)[-1]
        if re.search(r"\b(if|else)\b", statement) or re.search(r"(\bif\s*\(.*\)|\belse)\s*$", head, flags=re.S):
            line = code[:m.start()].count("\n") + 1
            problems.append(f"line {line}: the barrier is inside an if/else: every work-item of the work-group must "
                            "reach it. Guard the loads and stores, never the barrier")
    return problems


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
    validate.function(global_size_fn, "global_size_for", example="def global_size_for(n, local_size): ...")
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


def _clause_vars(pragma: str, clause: str) -> set[str]:
    found = set()
    for m in re.finditer(rf"\b{clause}\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", pragma):
        for part in re.split(r",(?![^\[]*\])", m.group(1)):
            name = part.split("[")[0].strip()
            if name:
                found.add(name)
    return found


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
    copyin, copyout, copy = (_clause_vars(data, c) for c in ("copyin", "copyout", "copy"))
    present = _clause_vars(data, "present")
    for name in ("A", "x"):
        if name in copy:
            raise CheckFailed(f"copy({name}[...]) copies {name} back to the host after the loop, for nothing: the "
                              f"loop only reads {name}, so copyin({name}[...]) suffices.")
        if name not in copyin and name not in present:
            raise CheckFailed(f"no data clause names {name}: GCC does not infer the extent of a pointer, so "
                              f"{name} would reach the device as a bare host address. Add copyin({name}[0:...]).")
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
    validate.function(names_fn, "opencl_names")
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


__all__ = ["CUDA_NAMES", "DIFF_SIZES", "OPENCL_ANSWERS", "TRANSPOSE_SHAPES", "barrier_problems", "check_diff",
           "check_matvec", "check_opencl_names", "check_transpose", "diff_reference", "matvec_reference"]
