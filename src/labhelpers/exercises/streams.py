"""Checkers for the lab "Streams and the host-device link" (labs/11_streams_lab.ipynb).

1. :func:`check_pinned_buffers`: two page-locked float32 host buffers (asked of the driver on a GPU; under
   the simulator, the buffers must lie in memory that ``cuda.pinned_array`` handed out while the function ran).
2. :func:`check_chunked_pipeline`: the chunk loop, right for every size and number of chunks, written
   into an output that sits between guard bands (and starts as NaN), so a missing remainder, a copy
   the wrong way or a write outside the output shows; and, from a recording of the run
   (:mod:`labhelpers.streamrecord`), every copy and kernel on the chunk's own stream, from pinned memory.
3. :func:`check_prediction`: the pipelined time predicted by the ideal formula, against the engine model.
4. :func:`check_no_hidden_sync`: the pipeline without its hidden synchronisations: the recording of its run
   must show no wait and no allocation between the first and the last copy or kernel (helper functions
   included), no copy without ``stream=``, no kernel on the default stream, no pageable buffer.

Exercises 2 and 4 must also wait for every stream before they return (:data:`MISSING_SYNC`): the recording says
whether each stream's last copy was waited for, which the simulator's results cannot (its streams finish at once).

The recordings are the same on a GPU and under the simulator (where streams do nothing), so a bug gets
the same message on both.

Failures raise :class:`~labhelpers.errors.CheckFailed` with a message that names the likely bug.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pandas as pd
from numba import cuda

from .. import backend, streamrecord, validate
from ..errors import CheckFailed
from ..kernels import streams as ks
from ..measured import live_or_reference
from ..models import streams as model
from ..refdata import load_reference
from ..timing import benchmark
from . import answers, timed

#: FMAs per element of the lab's kernel (small under the simulator).
LAB_ITERS = ks.SIM_ITERS
#: (n, chunks, streams) cases of exercises 2 and 4: one element, as many chunks as elements, remainders.
PIPELINE_CASES_SIM: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (7, 7, 3), (33, 4, 2), (100, 3, 2), (257, 7, 3))
PIPELINE_CASES_GPU: tuple[tuple[int, int, int], ...] = PIPELINE_CASES_SIM + ((1_000_003, 7, 3), (2**20 + 5, 16, 4))
#: Guard elements on each side of the checker's buffers, and the value the output's guards hold.
GUARD = 64
GUARD_VALUE = np.float32(-777.0)
#: Calls that have no place inside the issue loop of a pipeline (each may synchronise or stage).
LOOP_FORBIDDEN = {
    "synchronize": "a synchronisation inside the loop waits for the GPU after every chunk",
    "device_array": "allocating device memory in the loop may synchronise the device: allocate once, before it",
    "device_array_like": "allocating device memory in the loop may synchronise the device: allocate once, before it",
    "to_device": "cuda.to_device allocates device memory (and copies synchronously without stream=): allocate "
                 "before the loop and copy with d.copy_to_device(h, stream=s)",
    "pinned_array": "allocating pinned memory synchronises the device: allocate once, before the loop",
    "pinned_array_like": "allocating pinned memory synchronises the device: allocate once, before the loop",
    "copy_to_host_async": "there is no copy_to_host_async: copy_to_host(ary, stream=s) is the asynchronous copy",
}


def _cases():
    return PIPELINE_CASES_SIM if backend.is_simulator() else PIPELINE_CASES_GPU


def _function_tree(fn, what: str) -> ast.FunctionDef:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise CheckFailed(f"the source of {what} cannot be read: define it in a notebook cell with `def`.") from None
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            return node
    raise CheckFailed(f"{what} is not a function defined with `def`.")


def _call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _issues_work(loop: ast.AST) -> bool:
    """Does the loop copy or launch (a copy call, or a call of a subscript: ``kernel[grid, block, s](...)``)?"""
    for call in _calls(loop):
        if _call_name(call) in ("copy_to_device", "copy_to_host") or isinstance(call.func, ast.Subscript):
            return True
    return False


def loop_problems(fn, what: str = "your function") -> list[str]:
    """What runs inside ``fn``'s issue loops (those that copy or launch) that should not: one line per call."""
    tree = _function_tree(fn, what)
    problems = []
    for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
        if not _issues_work(loop):
            continue  # e.g. `for s in pool: s.synchronize()` after the issue loop: waiting once is the point
        for call in _calls(loop):
            name = _call_name(call)
            if name in LOOP_FORBIDDEN:
                problems.append(f"line {call.lineno - tree.lineno + 1} of {what}: `{name}(...)` inside the loop: "
                                f"{LOOP_FORBIDDEN[name]}")
    return sorted(set(problems))


def _require_page_locked(arrays, rec: streamrecord.Recording) -> None:
    """Each ``(name, array)`` must be page-locked (GPU: the driver; simulator: memory cuda.pinned_array gave)."""
    for name, a in arrays:
        if not rec.is_pinned(a):
            raise CheckFailed(f"{name} is pageable memory, not page-locked: copies from it are staged by the driver "
                              "and do not run asynchronously. Allocate it with cuda.pinned_array(n, "
                              "dtype=np.float32) (a NumPy copy of a pinned array, np.array(h) or h.copy(), is "
                              "pageable again).")


#: The class of a stream exercise that returns before waiting for its streams.
MISSING_SYNC = "Missing synchronisation"


def _require_waited(rec: streamrecord.Recording, what: str, top: str, where: str, result: str) -> None:
    """Every stream's last copy or kernel must be waited for before the function returns (the recording's order:
    the simulator finishes every stream at once, a GPU does not)."""
    pending = rec.unwaited()
    if not pending:
        return
    c = pending[0]
    helper = f" (in the helper function {c.site.function}, called from {top})" if top and c.site.function != top \
        else ""
    others = f" and {len(pending) - 1} more stream(s)" if len(pending) > 1 else ""
    raise CheckFailed(f"{MISSING_SYNC}: {where}: {what} returns while work is still queued: nothing waits for the "
                      f"stream of {c.site}{helper}{others} after it. On a GPU the copies back may not have finished "
                      f"when {result} is read: a half-written buffer (under the simulator every stream is done at "
                      "once, so the numbers cannot show it). Wait once, after the loop and before returning: "
                      "`for s in pool: s.synchronize()` (or cuda.synchronize(), or event.synchronize() of an event "
                      "recorded on each stream after its last copy).")


def _require_overlap(rec: streamrecord.Recording, what: str, top: str, where: str, chunks: int,
                     streams: int) -> None:
    """The recorded run may not serialise its chunks: stream problems, and enough streams used."""
    problems = rec.problems(what, top=top)
    if problems:
        raise CheckFailed(f"{where}: {what} gives the GPU nothing to overlap:\n  " + "\n  ".join(problems) + ".")
    wanted = min(chunks, streams)
    used = len(rec.used_streams())
    if used < wanted:
        raise CheckFailed(f"{where}: {what} queued its chunks on {used} stream(s); with {streams} streams and "
                          f"{chunks} chunks, chunk c goes to pool[c % streams], so {wanted} streams take work and "
                          "one chunk's copy overlaps another's kernel.")


# ------------------------------------------------------------------------------------------ exercise 1


def check_pinned_buffers(make_buffers) -> None:
    """Exercise 1: ``make_buffers(n)`` returns ``(h_in, h_out)``, two page-locked float32 arrays of ``n`` elements.

    Then the checker moves data through them with asynchronous copies on a stream and checks it arrives.
    """
    validate.function(make_buffers, "make_buffers", example="def make_buffers(n): ...", takes=1)
    for n in (1, 33, 1003):
        with streamrecord.record() as rec:
            got = make_buffers(n)
        if not isinstance(got, tuple) or len(got) != 2:
            raise CheckFailed(f"make_buffers({n}) must return a tuple (h_in, h_out), got {type(got).__name__}.")
        h_in, h_out = got
        for name, a in (("h_in", h_in), ("h_out", h_out)):
            if not isinstance(a, np.ndarray):
                raise CheckFailed(f"{name} must be a host array (np.ndarray), got {type(a).__name__}: "
                                  "cuda.pinned_array returns one.")
            if a.dtype != np.float32 or a.shape != (n,):
                raise CheckFailed(f"{name} must be float32 of shape ({n},), got {a.dtype} of shape {a.shape}.")
        if np.shares_memory(h_in, h_out):
            raise CheckFailed("h_in and h_out share memory: allocate two separate buffers.")
        _require_page_locked((("h_in", h_in), ("h_out", h_out)), rec)
        x = np.arange(n, dtype=np.float32)
        h_in[:] = x
        h_out[:] = np.nan
        s = cuda.stream()
        d = cuda.device_array(n, dtype=np.float32)
        d.copy_to_device(h_in, stream=s)
        d.copy_to_host(h_out, stream=s)
        s.synchronize()
        if not np.array_equal(h_out, x):
            raise CheckFailed("data copied in and out through your buffers did not come back unchanged.")
    print("Correct: two page-locked float32 buffers; a round trip through them on a stream returns the data.")


# ------------------------------------------------------------------------------------------ exercise 2


def _guarded_pinned(values: np.ndarray, guard_value) -> tuple[np.ndarray, np.ndarray]:
    """A pinned buffer holding ``values`` between ``GUARD`` guard elements on each side; returns (whole, view)."""
    whole = cuda.pinned_array(values.size + 2 * GUARD, dtype=np.float32)
    whole[:] = guard_value
    view = whole[GUARD:GUARD + values.size]
    view[:] = values
    return whole, view


def _pipeline_diagnosis(got: np.ndarray, expected: np.ndarray, n: int, chunks: int) -> str | None:
    unwritten = np.isnan(got)
    if unwritten.all():
        return ("no output was written: does every chunk copy its result back, and the right way? "
                "d_out.copy_to_host(h_out[lo:hi], "
                "stream=s) copies device -> host; d_out.copy_to_device(h_out[...]) overwrites the device result "
                "with the host's (the lecture's reversed cudaMemcpyAsync)")
    if unwritten.any():
        idx = np.flatnonzero(unwritten)
        tail = idx.min() >= n - (n % chunks) and n % chunks and idx.size <= n % chunks
        if tail:
            return (f"the last {idx.size} element(s) were never computed: with n = {n} and {chunks} chunks the "
                    "chunks must cover the remainder n % chunks too. Use lo = c * n // chunks and "
                    "hi = (c + 1) * n // chunks")
        return (f"{idx.size} of {n} outputs were never written (first at index {int(idx[0])}): the chunks leave "
                "gaps. Chunk c covers [c * n // chunks, (c + 1) * n // chunks)")
    tol = ks.tolerance(LAB_ITERS)
    bad = ~np.isclose(got, expected, rtol=tol, atol=1e-6)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return (f"{int(bad.sum())} of {n} outputs are wrong (first at index {i}: got {got[i]!r}, expected "
                f"{expected[i]!r}): does each chunk copy, compute and copy back the SAME slice lo:hi, and does the "
                "kernel get the chunk's device views d_in[lo:hi], d_out[lo:hi]?")
    return None


def _slices_line_up(rec: streamrecord.Recording) -> bool:
    """Whether each kernel reads the device slice that the copy queued just before it filled.

    Then an unordered pair of streams (say, the kernel on another stream than its copy) is the bug to report,
    whatever the values: on a GPU the race it opens gives wrong values by chance, under the simulator never, and the
    class must be the same on both. When the slices do not line up, the values are wrong on both and say so first."""
    copied = None
    for c in rec.work():
        if c.kind == "h2d":
            copied = c
        elif c.kind == "launch" and (copied is None or not any(span in c.spans for span in copied.spans)):
            return False
    return True


def check_chunked_pipeline(pipeline) -> None:
    """Exercise 2: ``pipeline(h_in, h_out, chunks, streams)`` fills ``h_out`` with ``fma_chain(h_in)``.

    ``h_in`` and ``h_out`` are pinned views inside larger buffers: NaN around the input, guard values around
    the output (they must survive), the output NaN before the call. Sizes include remainders
    (``n % chunks != 0``) and as many chunks as elements.
    """
    validate.function(pipeline, "pipeline", example="def chunked_pipeline(h_in, h_out, chunks, streams): ...",
                      takes=4)
    rng = np.random.default_rng(11)
    for n, chunks, streams in _cases():
        x = (rng.random(n) * 4).astype(np.float32)
        with streamrecord.record() as rec:
            whole_in, h_in = _guarded_pinned(x, np.nan)
            whole_out, h_out = _guarded_pinned(np.full(n, np.nan, dtype=np.float32), GUARD_VALUE)
            try:
                pipeline(h_in, h_out, chunks, streams)
            except CheckFailed:
                raise
            except Exception as exc:
                raise CheckFailed(f"pipeline raised {type(exc).__name__} for n={n}, chunks={chunks}, "
                                  f"streams={streams}: {str(exc)[:400]}") from None
        cuda.synchronize()
        where = f"n={n}, chunks={chunks}, streams={streams}"
        if rec.unordered() and _slices_line_up(rec):  # the race first: on a GPU its values are wrong by chance
            _require_overlap(rec, "your pipeline", getattr(pipeline, "__name__", ""), where, chunks, streams)
        if not np.array_equal(whole_in[GUARD:GUARD + n], x):
            raise CheckFailed(f"{where}: the input h_in changed. An H2D copy written the wrong way "
                              "(d_in.copy_to_host(h_in...)) copies device -> host: use d_in[lo:hi].copy_to_device("
                              "h_in[lo:hi], stream=s).")
        guards = np.concatenate([whole_out[:GUARD], whole_out[GUARD + n:]])
        if not (guards == GUARD_VALUE).all():
            raise CheckFailed(f"{where}: something was written outside h_out (the guard bands around it changed).")
        problem = _pipeline_diagnosis(np.array(h_out), ks.fma_chain_reference(x, LAB_ITERS), n, chunks)
        if problem:
            raise CheckFailed(f"{where}: {problem}.")
        _require_overlap(rec, "your pipeline", getattr(pipeline, "__name__", ""), where, chunks, streams)
        _require_waited(rec, "your pipeline", getattr(pipeline, "__name__", ""), where, "h_out")
    print(f"Correct: the pipeline is right for all {len(_cases())} (n, chunks, streams) cases tried, "
          "remainders included, writes nothing outside its output, and queues every copy and kernel on a "
          "chunk's stream.")


# ------------------------------------------------------------------------------------------ exercise 3

PREDICTION_CASES: tuple[tuple[float, float, float, int], ...] = (
    (5.0, 4.0, 5.0, 1), (5.0, 4.0, 5.0, 8), (1.0, 10.0, 1.0, 4), (3.0, 1.0, 1.0, 16), (1.0, 1.0, 4.0, 3),
    (2.0, 2.0, 2.0, 5), (0.5, 0.1, 0.25, 32), (7.0, 7.0, 0.0, 2))


def check_prediction(predict_ms) -> None:
    """Exercise 3: ``predict_ms(h2d_ms, kernel_ms, d2h_ms, chunks)`` for two copy engines, one stream per chunk.

    Compared with :func:`labhelpers.models.streams.pipeline_time` (depth-first issue, no per-operation
    overhead) on cases including one chunk, a kernel much longer than the copies and copies much longer
    than the kernel.
    """
    validate.function(predict_ms, "predict_ms",
                      example="def predict_ms(h2d_ms, kernel_ms, d2h_ms, chunks): ...", takes=4)
    for h, k, d, c in PREDICTION_CASES:
        want = model.pipeline_time(h, k, d, c, c, copy_engines=2)
        got = predict_ms(h, k, d, c)
        if got is None:
            raise CheckFailed("predict_ms returned None: return the predicted time in ms.")
        try:
            got = float(got)
        except (TypeError, ValueError):
            raise CheckFailed(f"predict_ms must return a number, got {type(got).__name__}.") from None
        if not np.isclose(got, want, rtol=1e-9, atol=1e-12):
            hint = ""
            if np.isclose(got, h + k + d):
                hint = " That is the serial time: the chunks overlap."
            elif np.isclose(got, max(h, k, d)):
                hint = (" That is the slowest stage alone: the other two stages still show once, while the pipeline "
                        "fills and drains, a k-th of them each.")
            elif np.isclose(got, (h + k + d) / c):
                hint = " Dividing everything by k assumes all three stages overlap perfectly from the first moment."
            raise CheckFailed(f"predict_ms({h}, {k}, {d}, chunks={c}) = {got!r}, the model gives {want!r}.{hint}")
    print(f"Correct: your prediction equals the engine model on all {len(PREDICTION_CASES)} cases.")


# ------------------------------------------------------------------------------------------ exercise 4


def check_no_hidden_sync(pipeline) -> None:
    """Exercise 4: ``pipeline(x, chunks, streams)`` returns ``fma_chain(x)`` in a pinned host buffer, without
    synchronising, allocating or copying through pageable memory inside its loop."""
    validate.function(pipeline, "pipeline", example="def fixed_pipeline(x, chunks, streams): ...", takes=3)
    top = getattr(pipeline, "__name__", "")
    rng = np.random.default_rng(5)
    for n, chunks, streams in _cases()[:4]:
        x = (rng.random(n) * 4).astype(np.float32)
        where = f"n={n}, chunks={chunks}, streams={streams}"
        with streamrecord.record() as rec:
            try:
                out = pipeline(x, chunks, streams)
            except Exception as exc:
                raise CheckFailed(f"your pipeline raised {type(exc).__name__} for n={n}, chunks={chunks}: "
                                  f"{str(exc)[:400]}") from None
        cuda.synchronize()
        if out is None:
            raise CheckFailed("your pipeline returned None: return the host output buffer h_out.")
        if not isinstance(out, np.ndarray) or out.shape != (n,):
            raise CheckFailed(f"your pipeline must return the host output of shape ({n},).")
        problem = _pipeline_diagnosis(np.array(out), ks.fma_chain_reference(x, LAB_ITERS), n, chunks)
        if problem:
            raise CheckFailed(f"{where}: {problem}.")
        problems = rec.problems("your pipeline", top=top)
        if problems:
            raise CheckFailed(f"{where}: hidden synchronisation left in your pipeline:\n  " + "\n  ".join(problems)
                              + ".")
        _require_page_locked((("the returned output", out),), rec)
        _require_overlap(rec, "your pipeline", top, where, chunks, streams)
        _require_waited(rec, "your pipeline", top, where, "the returned output")
    problems = loop_problems(pipeline, "your pipeline")  # what the runs above did not take (a branch not run)
    if problems:
        raise CheckFailed("hidden synchronisation left in the loop:\n  " + "\n  ".join(problems))
    print("Correct: nothing between the first and the last copy waits or allocates, every copy and kernel runs on "
          "a chunk's stream from page-locked memory, and the result is right.")


__all__ = ["GUARD", "LAB_ITERS", "MISSING_SYNC", "check_chunked_pipeline", "check_no_hidden_sync", "check_pinned_buffers",
           "check_prediction", "loop_problems"]


# ------------------------------------------------------------------------------------------- measured exercise

#: (chunks, streams) the measured exercise accepts.
TUNED_CHOICES: tuple[tuple[int, int], ...] = tuple((c, s) for c in (1, 2, 4, 8, 16, 32, 64) for s in (1, 2, 3, 4, 8))
#: Elements the pipeline is timed on (GPU): 2^26 floats, 256 MiB each way.
TUNED_N = 2**26


def _pipeline_reference(choice: tuple[int, int]) -> str:
    ref = load_reference("ch11_pipeline")
    t = ref.table
    rows = t[(t["issue"] == "numba") & (t["host_memory"] == "pinned") & (t["order"] == "depth-first")]
    chunks, streams = choice
    one = rows[(rows["chunks"] == 1) & (rows["streams"] == 1)].iloc[0]
    match = rows[(rows["chunks"] == chunks) & (rows["streams"] == streams)]
    if match.empty:
        return timed.reference_text(ref, f"{chunks} chunks on {streams} streams was not measured; one chunk took "
                                            f"{one.wall_ms:.3g} ms (chapter 11's kernel, {int(one.iters)} iterations)")
    row = match.iloc[0]
    return timed.reference_text(
        ref, f"chapter 11's pipeline ({int(row.iters)} kernel iterations, {int(row.n):,} floats) with {chunks} chunks on "
             f"{streams} streams took {row.wall_ms:.3g} ms, one chunk on one stream {one.wall_ms:.3g} ms: ratio "
             f"{one.wall_ms / row.wall_ms:.2f}")


PIPELINE_TUNED = timed.MeasuredExercise(
    name="your chunks and streams", target=timed.target_for("11", 1.3),
    measures=f"your chunked_pipeline on {TUNED_N:,} pinned floats with your (chunks, streams), wall time",
    yardstick="the same pipeline with one chunk on one stream (no overlap)", reference=_pipeline_reference)


def _race_pipeline(pipeline, chunks: int, streams: int) -> tuple:
    h_in = cuda.pinned_array(TUNED_N, dtype=np.float32)
    h_out = cuda.pinned_array(TUNED_N, dtype=np.float32)
    h_in[:] = 1.0

    def time(c: int, s: int):
        return benchmark(lambda: pipeline(h_in, h_out, c, s), clock="python", repeat=5, label=f"{c} x {s}")

    return time(chunks, streams), time(1, 1)


def check_pipeline_choice(pipeline, choose_chunks_streams) -> timed.Verdict:
    """Measured exercise: where overlap pays. ``choose_chunks_streams()`` returns ``(chunks, streams)`` for your
    ``chunked_pipeline`` (exercise 2, checked first); on a GPU it must run ``PIPELINE_TUNED.target`` times as fast as one chunk on one
    stream, timed in the same run.

    Raises:
        CheckFailed: the pipeline is wrong, the choice is not allowed, or too slow (``Below target``).
    """
    chunks, streams = timed.choose(choose_chunks_streams, "choose_chunks_streams", TUNED_CHOICES)
    return timed.check(PIPELINE_TUNED, (chunks, streams), correct=lambda: check_chunked_pipeline(pipeline),
                          race=lambda: _race_pipeline(pipeline, chunks, streams))


# ------------------------------------------------------------------------------------------ exercise 6

#: ``(streams, connections)`` of :func:`check_kernels_at_once`: fewer streams than queues, as many, one more, a
#: multiple, a remainder, one queue, and the largest number of queues.
QUEUE_CASES: tuple[tuple[int, int], ...] = ((4, 8), (8, 8), (9, 8), (16, 8), (17, 8), (4, 1), (1, 1), (12, 5),
                                             (32, 32), (33, 32))


def _queue_hint(got: float, streams: int, connections: int) -> str:
    busiest = (streams + connections - 1) // connections  # streams on the busiest queue
    kernels = 2 * streams
    if np.isclose(got, streams):
        return ("that is every stream's kernels side by side, as with breadth-first issue or enough queues: issued "
                "depth-first, streams that share a queue wait behind each other's second kernel")
    if np.isclose(got, kernels / (2 * busiest)):
        return ("in one queue the next stream's first kernel starts beside the previous stream's second kernel: a "
                "queue of m streams takes m + 1 kernel times, not 2m")
    if np.isclose(got, kernels / busiest):
        return "a queue of m streams takes m + 1 kernel times: its last stream's second kernel comes after the rest"
    if np.isclose(got, kernels / (streams / connections + 1)):
        return ("streams do not split into fractions: the busiest queue holds streams / connections rounded up, and "
                "it sets the wall time")
    return ("all 2 x streams kernels, over the wall time in kernel durations; the busiest queue sets the wall time "
            "(chapter 11, 'Hardware queues')")


def check_kernels_at_once(kernels_at_once) -> None:
    """Exercise 6: ``kernels_at_once(streams, connections)``, the kernels running at once on average when each of
    ``streams`` streams runs two dependent kernels, issued depth-first, over ``connections`` hardware queues.

    Compared with :func:`labhelpers.models.streams.queue_concurrency` on :data:`QUEUE_CASES`.

    Raises:
        CheckFailed: the function raises, returns something that is not a number, or the wrong number
            (:data:`labhelpers.exercises.answers.WRONG_ANSWER`, with what the number looks like).
    """
    answers.check_formula(kernels_at_once, "kernels_at_once", "kernels_at_once(streams, connections)", QUEUE_CASES,
                          lambda s, c: model.queue_concurrency(s, 2, c),
                          shown=lambda got, want: f"{got:.4g} kernels at once, the queue model gives {want:.4g}",
                          hint=_queue_hint)
    print(f"Correct: your prediction equals the queue model on all {len(QUEUE_CASES)} cases.")


def show_kernels_at_once(kernels_at_once) -> pd.DataFrame:
    """Your prediction (checked first by :func:`check_kernels_at_once`) beside the reference GPU's measurement,
    ``ch11_queues``, depth-first issue. The measurement takes three fresh processes (about 15 s), so every machine
    shows the reference run, as the chapter does.
    """
    check_kernels_at_once(kernels_at_once)
    ref = live_or_reference(None, "ch11_queues")
    print(ref.source_line())
    t = ref.table[ref.table["order"] == "depth-first"]
    rows = [{"connections": int(r["connections"]), "streams": int(r["streams"]),
             "your prediction": round(float(kernels_at_once(int(r["streams"]), int(r["connections"]))), 2),
             "measured": round(float(r["concurrency"]), 2)} for _, r in t.iterrows()]
    return pd.DataFrame(rows).pivot_table(index="streams", columns="connections",
                                          values=["your prediction", "measured"])


__all__ += ["QUEUE_CASES", "check_kernels_at_once", "show_kernels_at_once"]
