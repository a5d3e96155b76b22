"""Issue 23: the checkers of labs 11-13 are tested by mutants, small edits of each lab's solution, at least one per
bug class the chapter teaches. Every mutant must be rejected with a message that names its class, and every
solution accepted (both backends: on a GPU the same recordings, race checks and parses run).

Lab 11 is checked by behaviour (labhelpers.streamrecord records which stream every copy and launch went to),
lab 12 by a real parse of the OpenCL C and OpenACC sources plus runs on PoCL / gcc -fopenacc, lab 13 by the race
detector, a contended compare-and-swap, a watched global counter and two launches of the last-block sum.
"""

from __future__ import annotations

import pytest

import labhelpers as lh
from labhelpers.exercises import consistency as ex13
from labhelpers.exercises import streams as ex11
from mutants import load_solutions, mutant

PY = dict(jit=lambda f: f)  # mutants of plain Python functions (no cuda.jit)


@pytest.fixture(scope="module")
def lab11():
    return load_solutions("11_streams_lab")


# ------------------------------------------------------------------------------------------------ lab 11

H2D = "d_in[lo:hi].copy_to_device(h_in[lo:hi], stream=s)"
D2H = "d_out[lo:hi].copy_to_host(h_out[lo:hi], stream=s)"
LAUNCH2 = "fma_chain[blocks, THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)"
LAUNCH4 = "fma_chain[(hi - lo + THREADS - 1) // THREADS, THREADS, s](d_in[lo:hi], d_out[lo:hi], A, B, LAB_ITERS)"

#: (exercise function, old line, new line(s), what the message must say): one per bug class of chapter 11.
MUTANTS_11 = {
    # exercise 1: page-locked buffers
    "pageable buffer": ("make_buffers", "h_in = cuda.pinned_array(n, dtype=np.float32)",
                        "h_in = np.empty(n, dtype=np.float32)", "pageable"),
    "pageable copy of a pinned buffer": ("make_buffers", "h_out = cuda.pinned_array(n, dtype=np.float32)",
                                         "h_out = np.array(cuda.pinned_array(n, dtype=np.float32))", "pageable"),
    "one buffer twice": ("make_buffers", "h_out = cuda.pinned_array(n, dtype=np.float32)", "h_out = h_in",
                         "share memory"),
    # exercise 2: the chunk loop
    "remainder lost": ("chunked_pipeline", "lo, hi = c * n // chunks, (c + 1) * n // chunks",
                       "lo, hi = c * (n // chunks), (c + 1) * (n // chunks)", "remainder"),
    "copy back the wrong way": ("chunked_pipeline", D2H, D2H.replace("copy_to_host", "copy_to_device"), "right way"),
    "copy without stream=": ("chunked_pipeline", H2D, "d_in[lo:hi].copy_to_device(h_in[lo:hi])",
                             "without stream="),
    "copy back without stream=": ("chunked_pipeline", D2H, "d_out[lo:hi].copy_to_host(h_out[lo:hi])",
                                  "without stream="),
    "kernel on the legacy default stream": ("chunked_pipeline", LAUNCH2, LAUNCH2.replace(", s]", "]"),
                                            "legacy default stream"),
    "kernel on another stream than its copies": ("chunked_pipeline", LAUNCH2,
                                                 LAUNCH2.replace(", s]", ", pool[(c + 1) % streams]]"),
                                                 "another stream"),
    "every chunk on one stream": ("chunked_pipeline", "s = pool[c % streams]", "s = pool[0]", r"on 1 stream"),
    "synchronise inside a helper": ("chunked_pipeline", D2H,
                                    f"def copy_back():\n    {D2H}\n    s.synchronize()\ncopy_back()",
                                    r"helper function copy_back.*stream\.synchronize\(\)"),
    "wrong block count": ("chunked_pipeline", "blocks = (hi - lo + THREADS - 1) // THREADS",
                          "blocks = (hi - lo) // THREADS", "ceiling division"),
    # exercise 3: the prediction
    "serial time": ("predict_ms", "return slowest + (h2d_ms + kernel_ms + d2h_ms - slowest) / chunks",
                    "return h2d_ms + kernel_ms + d2h_ms", "serial time"),
    "perfect overlap": ("predict_ms", "return slowest + (h2d_ms + kernel_ms + d2h_ms - slowest) / chunks",
                        "return (h2d_ms + kernel_ms + d2h_ms) / chunks", "overlap perfectly"),
    # exercise 4: hidden synchronisations
    "cuda.synchronize() in the loop": ("fixed_pipeline", D2H, f"{D2H}\ncuda.synchronize()", "synchronize"),
    "synchronise in a helper of the loop": ("fixed_pipeline", D2H, f"def wait():\n    cuda.synchronize()\n{D2H}\nwait()",
                                            r"helper function wait.*cuda\.synchronize\(\)"),
    "allocation in the loop": ("fixed_pipeline", "s = pool[c % streams]",
                               "s = pool[c % streams]\nd_tmp = cuda.device_array(hi - lo, dtype=np.float32)",
                               "allocates memory"),
    "to_device in the loop": ("fixed_pipeline", H2D, "d_in[lo:hi] = cuda.to_device(h_in[lo:hi], stream=s)",
                              "allocates memory"),
    "pageable output": ("fixed_pipeline", "h_out = cuda.pinned_array(n, dtype=np.float32)",
                        "h_out = np.empty(n, dtype=np.float32)", "pageable"),
    "pageable copy of the pinned input": ("fixed_pipeline", "h_in[:] = x", "h_in = np.array(h_in)\nh_in[:] = x",
                                          "pageable"),
    "kernel without a stream": ("fixed_pipeline", LAUNCH4, LAUNCH4.replace(", s]", "]"), "legacy default stream"),
    "copy back into a new array": ("fixed_pipeline", D2H, "h_out[lo:hi] = d_out[lo:hi].copy_to_host(stream=s)",
                                   "pageable|allocates"),
}

CHECKERS_11 = {"make_buffers": ex11.check_pinned_buffers, "chunked_pipeline": ex11.check_chunked_pipeline,
               "predict_ms": ex11.check_prediction, "fixed_pipeline": ex11.check_no_hidden_sync}


def test_lab11_solutions_pass(lab11):
    for name, checker in CHECKERS_11.items():
        checker(getattr(lab11, name))


@pytest.mark.parametrize("case", list(MUTANTS_11))
def test_lab11_mutants_are_rejected(lab11, case):
    name, old, new, message = MUTANTS_11[case]
    bad = mutant(getattr(lab11, name), (old, new), **PY)
    with pytest.raises(lh.CheckFailed, match=message):
        CHECKERS_11[name](bad)
