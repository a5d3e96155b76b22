"""Chapter 12 (portability): the listings compiled and run for real, wrappers, errors, tables, checkers, data.

The OpenCL listings run on the CPU through PoCL and the OpenACC listings through ``gcc -fopenacc`` on every
machine, CI included: ``tools/ensure_opencl.sh`` installs them, and when ``CI`` is set a missing toolchain
fails these tests instead of skipping them. CUDA C (CuPy's NVRTC) and OpenCL on an NVIDIA GPU run with
``LABHELPERS_BACKEND=gpu``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import labhelpers as lh
from labhelpers.experiments import portability as ep
from labhelpers.kernels import portability as pt
from markers import SIM, gpu_only, sim_only
import prose

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1, 31, 64, 257, 1000) if SIM else (1, 31, 64, 257, 1000, 100_003)
SHAPES = ((1, 1, 1), (17, 33, 5), (33, 17, 40), (16, 16, 16)) if SIM else \
    ((1, 1, 1), (17, 33, 5), (33, 17, 40), (16, 16, 16), (257, 1003, 129))


def _need(what):
    """Run ``what()``; a missing toolchain skips the test, except in CI, where it fails (CI must run the listings)."""
    try:
        return what()
    except pt.ToolMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must compile and run the OpenCL and OpenACC listings, but: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cpu_opencl():
    return _need(lambda: pt.opencl_target("cpu"))


@pytest.fixture(scope="module")
def openacc():
    return _need(lambda: pt.compile_listing("saxpy_acc.c"))


def _vectors(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def _close(got, want, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


# --- the listings ----------------------------------------------------------------------------------------


def test_every_listing_is_shipped_as_package_data():
    for name in pt.LISTINGS:
        assert pt.listing_path(name).is_file(), name
        assert pt.listing(name).strip()
    text = (ROOT / "pyproject.toml").read_text()
    assert "listings/*" in text, "pyproject.toml's package-data must ship labhelpers/listings"


def test_listing_function_extracts_one_function_with_its_comment():
    cl = pt.listing_function("saxpy.cl", "saxpy")
    assert cl.splitlines()[0].startswith("/*") and cl.rstrip().endswith("}")
    assert "get_global_id(0)" in cl
    cu = pt.listing_function("saxpy.cu", "saxpy")
    assert 'extern "C"' in cu and "blockIdx.x * blockDim.x" in cu
    acc = pt.listing_function("saxpy_acc.c", "saxpy_data")
    assert "#pragma acc data copyin(x[0:n]) copy(y[0:n])" in acc and "saxpy_parallel" not in acc
    with pytest.raises(lh.ArgumentError, match="has no function 'saxpi'.*saxpy"):
        pt.listing_function("saxpy.cl", "saxpi")
    with pytest.raises(lh.ArgumentError):
        pt.listing("saxpy.f90")


def test_the_listings_agree_on_what_they_compute():
    """The barriers and the index arithmetic are the same in the three explicit models."""
    cl, cu = pt.listing("matmul_tiled.cl"), pt.listing("matmul_tiled.cu")
    assert cl.count("barrier(CLK_LOCAL_MEM_FENCE)") == 2 and cu.count("__syncthreads()") == 2
    assert "CLK_GLOBAL_MEM_FENCE" not in cl
    assert cl.count("__local float") == 2 and cu.count("__shared__ float") == 2
    for line in ("As[ty][tx] = (row < m && k0 + tx < k)", "acc += As[ty][kk] * Bs[kk][tx];"):
        assert line in cl and line in cu
    assert pt.TILE == 16 and "#define TILE 16" in cl and "#define TILE 16" in cu


def test_side_by_side_html_shows_every_model_and_wraps_lines():
    html = pt.side_by_side_html([("A", "int x;", "c"), ("B", "y = 1", "python")], columns=2)
    assert "grid-template-columns:repeat(2" in html and "pre-wrap" in html and "A</div>" in html
    shown = pt.side_by_side("saxpy").data
    for title in ("Numba (Python)", "CUDA C (saxpy.cu)", "OpenCL C (saxpy.cl)", "OpenACC C (saxpy_acc.c)"):
        assert title in shown
    assert "barrier" in pt.side_by_side("matmul").data
    with pytest.raises(lh.ArgumentError):
        pt.side_by_side("fft")
    with pytest.raises(lh.ArgumentError):
        pt.side_by_side_html([], columns=0)


# --- OpenCL on the CPU --------------------------------------------------------------------------------------


def test_opencl_lists_a_cpu_device(cpu_opencl):
    devices = pt.opencl_devices()
    assert {"platform", "device", "type", "compute units", "OpenCL"} <= set(devices.columns)
    assert devices["type"].str.contains("CPU").any()
    assert cpu_opencl.kind == "cpu" and ":" in cpu_opencl.name


@pytest.mark.parametrize("local_size", [1, 64, 256])
def test_opencl_saxpy_matches_numpy_on_awkward_sizes(cpu_opencl, local_size):
    for n in SIZES:
        x, y = _vectors(n, n)
        got = pt.run_saxpy_opencl(1.5, x, y, local_size=local_size)
        assert got.dtype == np.float32 and got.shape == (n,)
        _close(got, pt.saxpy_reference(1.5, x, y))
        _close(y, _vectors(n, n)[1], 0, 0)  # the caller's y is left alone


def test_opencl_tiled_matmul_matches_numpy(cpu_opencl):
    rng = np.random.default_rng(3)
    for m, k, n in SHAPES:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        for tile in (4, 16):
            _close(pt.run_matmul_opencl(A, B, tile=tile), pt.matmul_reference(A, B), 1e-4, 1e-4)


def test_global_size_rounds_up_to_whole_work_groups():
    assert [pt.global_size(n, 64) for n in (0, 1, 63, 64, 65, 1000)] == [0, 64, 64, 64, 128, 1024]
    with pytest.raises(lh.ArgumentError):
        pt.global_size(-1, 64)
    with pytest.raises(lh.ArgumentError):
        pt.global_size(10, 0)


def test_a_global_size_that_is_not_a_multiple_of_the_local_size_is_refused(cpu_opencl):
    """OpenCL 1.x (the default language of a program) needs whole work-groups: the pitfall the lab checks."""
    cl = pt.opencl_module()
    kernel = cl.Kernel(pt.opencl_program("saxpy.cl"), "saxpy")
    x, y = _vectors(100)
    mf = cl.mem_flags
    ctx = cpu_opencl.context
    kernel.set_args(np.int32(100), np.float32(2), cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x),
                    cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y))
    with pytest.raises(cl.Error, match="INVALID_WORK_GROUP_SIZE"):
        cl.enqueue_nd_range_kernel(cpu_opencl.queue, kernel, (100,), (64,)).wait()


def test_an_opencl_build_error_carries_the_compiler_log(cpu_opencl):
    broken = pt.listing("saxpy.cl").replace("int i = get_global_id(0);", "int i = get_global_id(0)")
    with pytest.raises(pt.BuildError) as info:
        pt.build_opencl(broken)
    assert "expected ';'" in info.value.log
    assert "--- compiler log ---" in str(info.value) and "tempfile_" not in str(info.value)
    with pytest.raises(pt.BuildError, match="undeclared identifier 'get_thread_id'"):
        pt.build_opencl(pt.listing("saxpy.cl").replace("get_global_id", "get_thread_id"))
    with pytest.raises(lh.ArgumentError):
        pt.build_opencl("   ")


def test_opencl_wrappers_refuse_bad_input(cpu_opencl):
    x, y = _vectors(10)
    with pytest.raises(lh.ArrayArgumentError, match="float32"):
        pt.run_saxpy_opencl(2.0, x.astype(np.float64), y)
    with pytest.raises(lh.ArrayArgumentError, match="shape"):
        pt.run_saxpy_opencl(2.0, x, y[:5])
    with pytest.raises(lh.ArgumentError):
        pt.run_saxpy_opencl(float("nan"), x, y)
    with pytest.raises(lh.ArgumentError, match="kind"):
        pt.run_saxpy_opencl(2.0, x, y, kind="fpga")
    with pytest.raises(lh.ArgumentError, match="local_size"):
        pt.run_saxpy_opencl(2.0, x, y, local_size=0)
    with pytest.raises(lh.ArgumentError, match="allows in a work-group"):
        pt.run_saxpy_opencl(2.0, x, y, local_size=1 << 20)
    assert pt.run_saxpy_opencl(2.0, x[:0], y[:0]).shape == (0,)
    A = np.ones((3, 4), np.float32)
    with pytest.raises(lh.ArrayArgumentError, match="inner dimensions"):
        pt.run_matmul_opencl(A, A)
    with pytest.raises(lh.ArrayArgumentError, match="at least 1"):
        pt.run_matmul_opencl(A[:0], A.T.copy())
    with pytest.raises(lh.ArrayArgumentError, match="2 dimension"):
        pt.run_matmul_opencl(A.ravel(), A)


def test_no_opencl_says_what_to_install(monkeypatch):
    def missing():
        raise pt.ToolMissing("pyopencl is not installed (No module named 'pyopencl'): " + pt.INSTALL_OPENCL)

    monkeypatch.setattr(pt, "opencl_module", missing)
    pt.opencl_target.cache_clear()
    try:
        with pytest.raises(pt.ToolMissing, match="pip install pyopencl.*apt-get install pocl-opencl-icd"):
            pt.run_saxpy_opencl(2.0, *_vectors(4))
        status = pt.toolchain_status()
        row = status[status["model"] == "OpenCL C"].iloc[0]
        assert not row["runs"] and "pocl-opencl-icd" in row["where"]
    finally:
        pt.opencl_target.cache_clear()


def test_no_opencl_platform_says_what_to_install():
    """A fresh process whose ICD loader finds no driver at all (an empty vendors folder)."""
    code = ("import labhelpers\nfrom labhelpers.kernels import portability as pt\n"
            "try:\n    pt.opencl_devices()\nexcept pt.ToolMissing as e:\n    print('MISSING', e)\n")
    env = dict(os.environ, OCL_ICD_VENDORS=str(ROOT / "tests"), LABHELPERS_BACKEND="sim")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "MISSING no OpenCL platform found" in out.stdout and "pocl-opencl-icd" in out.stdout, out.stderr


def test_an_opencl_gpu_is_asked_for_by_name():
    try:
        target = pt.opencl_target("gpu")
    except pt.ToolMissing as exc:
        assert "GPU" in str(exc) and ("nvidia.icd" in str(exc) or "install" in str(exc))
    else:
        assert target.kind == "gpu"


# --- OpenACC with gcc -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", pt.ACC_SAXPY_VERSIONS)
def test_openacc_saxpy_versions_match_numpy(openacc, version):
    for n in SIZES:
        x, y = _vectors(n, n)
        _close(pt.run_saxpy_acc(version, 2.0, -0.5, x, y), pt.saxpy_twice_reference(2.0, -0.5, x, y), 1e-5, 1e-5)


def test_openacc_one_loop_saxpy_matches_numpy(openacc):
    for n in SIZES:
        x, y = _vectors(n, n)
        _close(pt.run_saxpy_openacc(3.0, x, y), pt.saxpy_reference(3.0, x, y))


@pytest.mark.parametrize("version", pt.ACC_MATMUL_VERSIONS)
def test_openacc_matmul_versions_match_numpy(openacc, version):
    rng = np.random.default_rng(4)
    for m, k, n in SHAPES:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        _close(pt.run_matmul_acc(A, B, version), pt.matmul_reference(A, B), 1e-4, 1e-4)


def test_gcc_reports_which_loops_it_parallelised(openacc):
    saxpy = pt.openacc_report("saxpy_acc.c").set_index("function")
    assert set(saxpy.loc[["saxpy_parallel", "saxpy_data", "saxpy"], "parallelism"]) == {"gang vector"}
    assert "saxpy_naive" not in saxpy.index  # no directive, no OpenACC loop
    assert (saxpy.loc[["saxpy_kernels"], "parallelism"] == "seq").all()  # GCC proved nothing under kernels
    matmul = pt.openacc_report("matmul_acc.c")
    by = {(r.function, r.parallelism) for r in matmul.itertuples()}
    assert {("matmul_parallel", "gang vector"), ("matmul_collapse", "gang vector"), ("matmul_collapse", "seq"),
            ("matmul_gang_vector", "gang"), ("matmul_gang_vector", "vector")} <= by
    assert matmul["directive"].str.startswith("#pragma acc").all()


def test_the_seeds_kernel_directive_is_ignored_with_a_warning(openacc):
    """`#pragma acc kernel` (the lecture's spelling) is no OpenACC directive: GCC drops it, -Wall says so."""
    source = pt.listing("saxpy_acc.c").replace("#pragma acc kernels", "#pragma acc kernel")
    compiled = pt.compile_c(source, pt.OPENACC_FLAGS, "saxpy_acc.c")
    assert "ignoring '#pragma acc kernel'" in compiled.report.replace("‘", "'").replace("’", "'")
    x, y = _vectors(33)
    fn = compiled.function("saxpy_kernels", [__import__("ctypes").c_int, __import__("ctypes").c_float,
                                             __import__("ctypes").c_float, pt._P, pt._P])
    out = y.copy()
    fn(33, 2.0, 3.0, x.ctypes.data, out.ctypes.data)
    _close(out, pt.saxpy_twice_reference(2.0, 3.0, x, y), 1e-5, 1e-5)  # right answer, serial: silently no OpenACC


def test_a_c_build_error_carries_the_log_and_a_missing_compiler_says_what_to_install(openacc, monkeypatch):
    with pytest.raises(pt.BuildError, match="expected") as info:
        pt.compile_c("void f(int n) { int i = n }", pt.OPENACC_FLAGS, "broken.c")
    assert "broken.c" in info.value.log
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    pt.compile_c.cache_clear()
    with pytest.raises(pt.ToolMissing, match="apt-get install gcc"):
        pt.compile_listing("saxpy_acc.c")
    monkeypatch.delenv("CC")
    pt.compile_c.cache_clear()


def test_the_split_build_without_offload_sections_gives_the_same_library(openacc, tmp_path):
    """The fallback for a GCC whose link of OpenACC code needs a missing lto-wrapper (the lent GPU machines)."""
    import ctypes

    src = tmp_path / "saxpy_acc.c"
    src.write_text(pt.listing("saxpy_acc.c"))
    rc, messages = pt._compile_and_link(pt.c_compiler(), pt.OPENACC_FLAGS, src, tmp_path / "lib.so", split=True)
    assert rc == 0, messages
    assert "gang vector loop parallelism" in messages  # the compiler's report survives the split
    fn = ctypes.CDLL(str(tmp_path / "lib.so")).saxpy_data
    fn.argtypes = [ctypes.c_int, ctypes.c_float, ctypes.c_float, pt._P, pt._P]
    x, y = _vectors(257)
    out = y.copy()
    fn(257, 2.0, 3.0, x.ctypes.data, out.ctypes.data)
    _close(out, pt.saxpy_twice_reference(2.0, 3.0, x, y), 1e-5, 1e-5)


def test_openacc_wrappers_refuse_bad_input(openacc):
    x, y = _vectors(8)
    with pytest.raises(lh.ArgumentError, match="version"):
        pt.run_saxpy_acc("fast", 1.0, 2.0, x, y)
    with pytest.raises(lh.ArgumentError):
        pt.run_saxpy_acc("data", 1.0, float("inf"), x, y)
    with pytest.raises(lh.ArrayArgumentError):
        pt.run_saxpy_openacc(1.0, x, y.astype(np.float64))
    with pytest.raises(lh.ArgumentError, match="version"):
        pt.run_matmul_acc(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), "tiles")
    with pytest.raises(lh.ArgumentError, match="no function"):
        pt.compile_listing("saxpy_acc.c").function("saxpy_fast", [])
    with pytest.raises(lh.ArgumentError):
        pt.compile_listing("saxpy.cl")


def test_data_clauses_count_transfers():
    n = 1000
    assert pt.acc_transfers("naive", n) == {"h2d_copies": 0, "d2h_copies": 0, "bytes": 0}
    assert pt.acc_transfers("parallel", n) == {"h2d_copies": 4, "d2h_copies": 2, "bytes": 24_000}
    assert pt.acc_transfers("data", n)["bytes"] == pt.acc_transfers("kernels", n)["bytes"] == 12_000
    with pytest.raises(lh.ArgumentError):
        pt.acc_transfers("managed", n)
    with pytest.raises(lh.ArgumentError):
        pt.acc_transfers("data", -1)


# --- Numba, GPU and CPU ------------------------------------------------------------------------------------


def test_numba_saxpy_and_cpu_versions_match_numpy():
    for n in SIZES:
        x, y = _vectors(n, n)
        want = pt.saxpy_reference(-2.0, x, y)
        _close(pt.run_saxpy_numba(-2.0, x, y, threads=64), want)
        _close(pt.run_saxpy_cpu(-2.0, x, y), want)
    rng = np.random.default_rng(5)
    for m, k, n in SHAPES[:3]:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        _close(pt.run_matmul_cpu(A, B), pt.matmul_reference(A, B), 1e-4, 1e-4)
        _close(pt.run_matmul_numba(A, B, tile=8), pt.matmul_reference(A, B), 1e-4, 1e-4)


def test_numba_wrappers_refuse_bad_input():
    x, y = _vectors(8)
    with pytest.raises(lh.LaunchConfigError):
        pt.run_saxpy_numba(1.0, x, y, threads=0)
    with pytest.raises(lh.ArrayArgumentError):
        pt.run_saxpy_cpu(1.0, x.reshape(2, 4), y.reshape(2, 4))
    with pytest.raises(lh.ArgumentError):
        pt.run_saxpy_numba("2", x, y)


@sim_only
def test_cuda_c_needs_a_gpu_and_says_so():
    x, y = _vectors(8)
    with pytest.raises(lh.GPUOnlyError, match="NVRTC"):
        pt.run_saxpy_cuda(1.0, x, y)
    with pytest.raises(lh.GPUOnlyError):
        pt.run_matmul_cuda(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


@gpu_only
def test_cuda_c_listings_match_numpy_on_the_gpu():
    for n in SIZES:
        x, y = _vectors(n, n)
        _close(pt.run_saxpy_cuda(0.5, x, y), pt.saxpy_reference(0.5, x, y))
    rng = np.random.default_rng(6)
    for m, k, n in SHAPES:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        _close(pt.run_matmul_cuda(A, B), pt.matmul_reference(A, B), 1e-4, 1e-4)
        _close(pt.run_matmul_cuda(A, B, tile=32), pt.matmul_reference(A, B), 1e-4, 1e-4)


@gpu_only
def test_a_cuda_c_build_error_carries_nvrtc_log():
    broken = pt.listing("saxpy.cu").replace("+ threadIdx.x;", "+ threadIdx.x")
    with pytest.raises(pt.BuildError, match="expected") as info:
        pt.build_cuda_c(broken, "saxpy", name="saxpy.cu")
    assert "--- compiler log ---" in str(info.value) and info.value.log


@gpu_only
def test_opencl_on_the_nvidia_gpu_when_its_driver_is_named():
    try:
        target = pt.opencl_target("gpu")
    except pt.ToolMissing as exc:
        pytest.skip(f"NVIDIA's OpenCL is not installed here: {exc}")
    assert "NVIDIA" in target.name
    for n in SIZES:
        x, y = _vectors(n, n)
        _close(pt.run_saxpy_opencl(0.5, x, y, kind="gpu"), pt.saxpy_reference(0.5, x, y))
    rng = np.random.default_rng(7)
    for m, k, n in SHAPES:
        A = rng.standard_normal((m, k)).astype(np.float32)
        B = rng.standard_normal((k, n)).astype(np.float32)
        _close(pt.run_matmul_opencl(A, B, kind="gpu"), pt.matmul_reference(A, B), 1e-4, 1e-4)


# --- tables ------------------------------------------------------------------------------------------------


def test_terminology_uses_the_real_opencl_names():
    t = pt.terminology_table()
    assert t.loc["all the threads of one launch", "OpenCL"] == "NDRange"
    assert t.loc["a group that shares fast memory and barriers", "OpenCL"] == "work-group"
    assert t.loc["one instance of the kernel", "OpenCL"] == "work-item"
    assert t.loc["index of the block", "OpenCL"] == "get_group_id(0)"
    assert t.loc["index of the thread in its block", "OpenCL"] == "get_local_id(0)"
    assert t.loc["index of the thread in the whole launch", "OpenCL"] == "get_global_id(0)"
    assert t.loc["barrier of a block", "OpenCL"] == "barrier(CLK_LOCAL_MEM_FENCE)"
    assert t.loc["memory shared by a block", "OpenCL"].startswith("__local")
    assert "sub-group" in t.loc["threads that issue together (32 on NVIDIA)", "OpenCL"]
    assert list(pt.terminology_table(["Numba"]).columns) == ["Numba"]
    with pytest.raises(lh.ArgumentError):
        pt.terminology_table(["HIP"])
    # every OpenCL function named in the table is a real built-in: the listings' compiler knows them
    assert all(name in "get_global_id get_group_id get_local_id get_local_size get_num_groups"
               for name in ("get_group_id", "get_local_id"))


def test_opencl_builtins_of_the_table_compile(cpu_opencl):
    body = "; ".join(f"y[{i}] = {f}" for i, f in enumerate(
        ("get_global_id(0)", "get_group_id(0)", "get_local_id(0)", "get_local_size(0)", "get_num_groups(0)")))
    pt.build_opencl(f"__kernel void k(__global float *y) {{ {body}; barrier(CLK_LOCAL_MEM_FENCE); }}")


def test_seed_mistakes_are_listed_with_their_fixes():
    said = " ".join(m["seed says"] for m in pt.SEED_MISTAKES)
    fixed = " ".join(m["correct"] for m in pt.SEED_MISTAKES)
    assert "`kernel`" in said and "declarative" in said and "Block ID" in said and "Local ID" in said
    assert "`kernels`" in fixed and "directive" in fixed and "get_group_id(0)" in fixed and "get_local_id(0)" in fixed


def test_toolchain_status_says_what_runs_here():
    status = _need(pt.toolchain_status)
    assert {"OpenCL C", "OpenACC C", "CUDA C", "Numba CUDA"} <= set(status["model"])
    if SIM:
        assert not status.set_index("model").loc["CUDA C", "runs"]


# --- experiments ---------------------------------------------------------------------------------------------


def test_cpu_table_runs_every_model_small(cpu_opencl, openacc):
    from labhelpers.experiments import portability as ep

    import numba

    t = ep.cpu_table(1 << 12, 24, repeat=1, matmul_repeat=1, copy_bytes=1 << 20)
    assert list(t.columns) == list(ep.COLUMNS)
    assert set(t["model"]) == {"NumPy", "Numba CPU", "OpenCL C", "OpenACC C", "C -O3", ep.HOST_COPY_MODEL}
    copy = t[t["kernel"] == "copy"].iloc[0]
    assert copy["model"] == ep.HOST_COPY_MODEL and copy["size"] == "1 MiB" and copy["gbps"] > 0
    assert "best stream: " in copy["device"]  # the host memory ceiling: the fastest of copies and an in-place add
    assert (t.loc[t["model"] == "Numba CPU", "device"].str.endswith(f"Numba {numba.get_num_threads()} threads")).all()
    assert (t["status"] == "ok").all() and (t["median_ms"] > 0).all()
    assert t["machine"].str.startswith("CPU: ").all()
    assert (t.loc[t["kernel"] == "saxpy", "gbps"] > 0).all() and (t.loc[t["kernel"] == "matmul", "gflops"] > 0).all()


def test_directives_table_times_every_version(openacc):
    from labhelpers.experiments import portability as ep

    t = ep.directives_table(1 << 10, 16, repeat=1)
    assert len(t) == len(pt.ACC_SAXPY_VERSIONS) + len(pt.ACC_MATMUL_VERSIONS)
    assert t.set_index("version").loc["naive", "parallelism"] == "(no OpenACC loop)"
    assert (t["median_ms"] > 0).all()


@sim_only
def test_gpu_tables_need_a_gpu():
    from labhelpers.experiments import portability as ep

    with pytest.raises(lh.GPUOnlyError):
        ep.gpu_table(1024, 32)
    with pytest.raises(lh.GPUOnlyError):
        ep.data_clause_table(1024)


@pytest.mark.judges_no_timing
@gpu_only
def test_gpu_tables_run_small_on_a_gpu():
    from labhelpers.experiments import portability as ep

    t = ep.gpu_table(1 << 20, 256, repeat=3, matmul_repeat=2)
    ok = t[t["status"] == "ok"]
    assert {"Numba", "CUDA C", "cuBLAS"} <= set(ok["model"])
    assert (ok["median_ms"] > 0).all()
    d = ep.data_clause_table(1 << 20, repeat=2)
    assert list(d["version"]) == ["naive", "parallel", "data", "kernels"]


# --- lab checkers: the solutions pass, each typical bug fails with its message ----------------------------------


@pytest.fixture(scope="module")
def solutions():
    from mutants import load_solutions

    return load_solutions("12_portability_lab")


def _with(fn_source: str, old: str, new: str):
    """A source function returning ``fn_source`` with ``old`` replaced (exactly once) by ``new``."""
    assert fn_source.count(old) == 1, f"mutant line not found exactly once: {old!r}"
    text = fn_source.replace(old, new)
    return lambda: text


@pytest.mark.parametrize("global_size, match", [
    (lambda n, ls: n, "not a whole number of work-groups"),
    (lambda n, ls: (n // ls) * ls, "cannot cover|never written"),
    (lambda n, ls: float(n), "return an int"),
])
def test_diff_checker_rejects_bad_global_sizes(cpu_opencl, solutions, global_size, match):
    from labhelpers.exercises import portability as ex

    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_diff(solutions.diff_opencl, global_size)


@pytest.mark.parametrize("old, new, match", [
    ("    if (i < n - 1)\n        d[i] = x[i + 1] - x[i];", "    d[i] = x[i + 1] - x[i];", "wrote past the end"),
    ("get_global_id(0)", "get_local_id(0)", "is wrong for n="),
    ("int i = get_global_id(0);", "int i = get_global_id(0)", "(?s)does not compile.*expected ';'"),
    ("__kernel void diff(", "__kernel void difference(", "no kernel named diff"),
])
def test_diff_checker_rejects_typical_bugs(cpu_opencl, solutions, old, new, match):
    from labhelpers.exercises import portability as ex

    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_diff(_with(solutions.diff_opencl(), old, new), solutions.global_size_for)


@pytest.mark.parametrize("old, new, match", [
    ("    barrier(CLK_LOCAL_MEM_FENCE);\n", "", "no barrier"),
    ("    barrier(CLK_LOCAL_MEM_FENCE);\n", "    if (lx < TILE)\n        barrier(CLK_LOCAL_MEM_FENCE);\n",
     "inside an if/else"),
    ("    barrier(CLK_LOCAL_MEM_FENCE);\n", "    if (x < cols) {\n        barrier(CLK_LOCAL_MEM_FENCE);\n    }\n",
     "inside an if/else"),
    ("barrier(CLK_LOCAL_MEM_FENCE)", "barrier(CLK_GLOBAL_MEM_FENCE)", "CLK_LOCAL_MEM_FENCE"),
    ("    if (x < rows && y < cols)\n        out[y * rows + x]", "    out[y * rows + x]", "past the end|wrong"),
    ("= tile[lx][ly];", "= tile[ly][lx];", "read the tile transposed"),
    ("__local float tile", "float tile", "local memory"),
])
def test_transpose_checker_rejects_typical_bugs(cpu_opencl, solutions, old, new, match):
    from labhelpers.exercises import portability as ex

    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_transpose(_with(solutions.transpose_opencl(), old, new))


def test_barrier_problems_allows_a_barrier_in_a_uniform_loop():
    """The tiled matmul's barriers sit in a loop every work-item runs: no problem."""
    from labhelpers.exercises import portability as ex

    assert ex.barrier_problems(pt.listing("matmul_tiled.cl")) == []
    assert ex.barrier_problems("void f() { if (a) { b(); } barrier(CLK_LOCAL_MEM_FENCE); }") == []
    assert len(ex.barrier_problems("void f() { if (a) barrier(CLK_LOCAL_MEM_FENCE); }")) == 1


PRAGMA = "#pragma acc parallel loop copyin(A[0:m*n], x[0:n]) copyout(y[0:m])"


@pytest.mark.parametrize("old, new, match", [
    (PRAGMA + "\n", "", "must be associated with an OpenACC compute region"),
    ("#pragma acc loop reduction(+:sum)", "#pragma acc loop vector", "race"),
    (PRAGMA, PRAGMA.replace("parallel loop", "kernel"), "ignored.*not an OpenACC directive"),
    (PRAGMA, PRAGMA.replace("copyin(A[0:m*n], x[0:n])", "copy(A[0:m*n]) copyin(x[0:n])"), "copyin\\(A\\[...\\]\\) suffices"),
    (PRAGMA, PRAGMA.replace("copyin(A[0:m*n], x[0:n])", "copyin(A[0:m*n])"), "no data clause names x"),
    (PRAGMA, PRAGMA.replace("copyout(y[0:m])", "copyin(y[0:m])"), "never brings it back"),
    (PRAGMA, PRAGMA.replace(" copyout(y[0:m])", ""), "no data clause names y"),
    ("#pragma acc loop reduction(+:sum)", "#pragma acc loop", "race"),
    ("for (int i = 0; i < m; ++i)", "for (int i = 0; i <= m; ++i)", "past the end"),
    ("sum += A[i * n + j] * x[j];", "sum += A[i * n + j] * x[j] + 1e-3f;", "wrong for m="),
    ("y[i] = sum;", "y[i] = sum", "does not compile"),
])
def test_matvec_checker_rejects_typical_bugs(openacc, solutions, old, new, match):
    from labhelpers.exercises import portability as ex

    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_matvec(_with(solutions.matvec_acc(), old, new))


def test_matvec_checker_accepts_a_sequential_inner_loop_and_a_data_region(openacc, solutions):
    from labhelpers.exercises import portability as ex

    seq = _with(solutions.matvec_acc(), "#pragma acc loop reduction(+:sum)", "#pragma acc loop seq")
    ex.check_matvec(seq)
    region = solutions.matvec_acc().replace(PRAGMA, "#pragma acc data copyin(A[0:m*n], x[0:n]) copyout(y[0:m])\n"
                                                   "#pragma acc parallel loop present(A[0:m*n], x[0:n], y[0:m])")
    ex.check_matvec(lambda: region)


@pytest.mark.parametrize("key, value, match", [
    ("thread block", "Block ID", "not OpenCL's names"),
    ("blockIdx.x", "Block ID", "get_group_id"),
    ("threadIdx.x", "Local ID", "get_local_id"),
    ("__syncthreads()", "barrier(CLK_GLOBAL_MEM_FENCE)", "CLK_LOCAL_MEM_FENCE"),
    ("gridDim.x", "get_global_size(0)", "get_num_groups"),
    ("grid", None, "not filled in"),
])
def test_names_checker_rejects_the_seeds_names(solutions, key, value, match):
    from labhelpers.exercises import portability as ex

    names = dict(solutions.opencl_names(), **{key: value})
    with pytest.raises(lh.CheckFailed, match=match):
        ex.check_opencl_names(lambda: names)


def test_names_checker_accepts_spelling_variants(solutions):
    from labhelpers.exercises import portability as ex

    names = dict(solutions.opencl_names(), grid="N-D Range", **{"thread block": "work group", "thread": "Work-Item",
                                                                "shared memory": "__local"})
    ex.check_opencl_names(lambda: names)
    with pytest.raises(lh.CheckFailed, match="return a dict"):
        ex.check_opencl_names(lambda: ["NDRange"])
    with pytest.raises(lh.CheckFailed, match="return the source code"):
        ex.check_diff(lambda: None, solutions.global_size_for)


# --- figures ------------------------------------------------------------------------------------------------------


def test_figures_draw_from_the_reference_data():
    import matplotlib
    import matplotlib.pyplot as plt

    from labhelpers.figures import portability as fp

    g, c, d = (lh.load_reference(n) for n in ("ch12_gpu", "ch12_cpu", "ch12_data_clauses"))
    fig = fp.plot_models(g.table, c.table, gpu_label=g.label, cpu_label=c.label)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert isinstance(fp.plot_data_clauses(d.table, label=d.label), matplotlib.figure.Figure)
    fig, ax = plt.subplots()
    fp.draw_ndrange(ax, n=100, local_size=32, item=99)
    title = ax.get_title(loc="left")
    assert "global size 128" in title and "get_group_id(0) = 3" in title and "get_local_id(0) = 3" in title
    with pytest.raises(lh.ArgumentError):
        fp.draw_ndrange(ax, n=0)
    plt.close("all")


def test_models_table_ratios():
    from labhelpers.figures import portability as fp

    cpu = lh.load_reference("ch12_cpu").table
    t = fp.models_table(lh.load_reference("ch12_gpu").table, cpu)
    ok = t[t["status"] == "ok"]
    assert set(t["machine"].str[:4]) == {"CPU:", "GPU:"}
    assert np.allclose(ok.loc[ok["model"] == "cuBLAS", "vs yardstick"], 1.0)
    numpy = ok[ok["model"] == "NumPy"]
    assert np.allclose(numpy.loc[numpy["kernel"] == "matmul", "vs yardstick"], 1.0)
    # SAXPY on the CPU: against the host copy where the table has one (collected since), NumPy before
    saxpy = ok[(ok["kernel"] == "saxpy") & ok["machine"].str.startswith("CPU")]
    has_copy = bool(((cpu["kernel"] == "copy") & (cpu["model"] == ep.HOST_COPY_MODEL)).any())
    assert set(saxpy["yardstick"]) == {"host copy" if has_copy else "NumPy"}
    if not has_copy:
        assert np.allclose(saxpy.loc[saxpy["model"] == "NumPy", "vs yardstick"], 1.0)


def test_models_table_and_figure_use_the_host_copy_of_a_cpu_table_when_it_has_one():
    from labhelpers.figures import portability as fp

    gpu, cpu = lh.load_reference("ch12_gpu").table, lh.load_reference("ch12_cpu").table
    cpu = cpu[cpu["kernel"] != "copy"]
    copy = cpu.iloc[[0]].assign(kernel="copy", model=ep.HOST_COPY_MODEL, gbps=100.0, size="512 MiB")
    t = fp.models_table(gpu, pd.concat([cpu, copy], ignore_index=True))
    saxpy = t[(t["kernel"] == "saxpy") & t["machine"].str.startswith("CPU") & (t["status"] == "ok")]
    assert set(saxpy["yardstick"]) == {"host copy"}
    assert np.allclose(saxpy["vs yardstick"], saxpy["rate"] / 100.0)
    assert ep.HOST_COPY_MODEL not in set(t["model"])  # a yardstick, not a model
    fig = fp.plot_models(gpu, pd.concat([cpu, copy], ignore_index=True))
    assert any(txt.get_text().startswith("host copy: 100") for txt in fig.axes[0].texts)
    import matplotlib.pyplot as plt
    plt.close("all")


# --- the claims the chapter makes about its reference data --------------------------------------------------------


def _rate(table, kernel, model, column):
    part = table[(table["kernel"] == kernel) & (table["model"] == model) & (table["status"] == "ok")]
    return float(part[column].iloc[0])


def test_reference_gpu_data_supports_the_chapter():
    g = lh.load_reference("ch12_gpu").table
    assert (g["status"] == "ok").all(), "every GPU model ran, OpenCL on NVIDIA's driver included"
    numba, cuda_c, ocl = (_rate(g, "matmul", m, "gflops") for m in ("Numba", "CUDA C", "OpenCL C"))
    cublas = _rate(g, "matmul", "cuBLAS", "gflops")
    assert abs(cuda_c / numba - 1) < 0.10  # "about as fast as Numba's"
    assert 0.6 < ocl / numba < 0.95  # "OpenCL's somewhat slower"
    assert max(numba, cuda_c, ocl) / cublas < 0.25  # "a small fraction of cuBLAS"
    copy = _rate(g, "copy", "copy (CuPy, D2D)", "gbps")
    saxpy = {m: _rate(g, "saxpy", m, "gbps") for m in ("Numba", "CUDA C", "OpenCL C")}
    assert all(0.7 < v / copy <= 1.0 for v in saxpy.values())  # "within a few tens of percent of the copy"
    assert max(saxpy.values()) / min(saxpy.values()) < 1.02  # "within about 1% of one another"
    held = g[(g["kernel"] == "saxpy") & g["model"].isin(["Numba", "CUDA C"])]
    assert (held["clock"] == "gpu-held").all()  # "timed as GPU time alone"
    assert abs(saxpy["Numba"] / saxpy["CUDA C"] - 1) < 0.01  # "Numba's kernel runs as fast as CUDA C's"
    assert max(g.loc[g["kernel"] == "saxpy", "median_ms"]) < 1.0  # "well under a millisecond"


def test_reference_cpu_and_clause_data_support_the_chapter():
    c = lh.load_reference("ch12_cpu").table
    for kernel, column in (("saxpy", "gbps"), ("matmul", "gflops")):  # OpenACC's host fallback "level with" C -O3
        assert abs(_rate(c, kernel, "OpenACC C", column) / _rate(c, kernel, "C -O3", column) - 1) < 0.1
    pocl, serial, numpy_mm = (_rate(c, "matmul", m, "gflops") for m in ("OpenCL C", "C -O3", "NumPy"))
    assert serial < pocl < 0.2 * numpy_mm  # "faster than the naive loop, far behind BLAS"
    assert _rate(c, "matmul", "Numba CPU", "gflops") > serial
    d = lh.load_reference("ch12_data_clauses").table.set_index("version")
    assert d.loc["parallel", "transfer_mb"] == 2 * d.loc["data", "transfer_mb"]  # "halves the traffic"
    assert d.loc["parallel", "median_ms"] > 1.3 * d.loc["data", "median_ms"]
    assert d.loc["parallel", "median_ms"] > d.loc["naive", "median_ms"]  # "slower than the serial loop on the host"
    assert round(1 - d.loc["data", "median_ms"] / d.loc["naive", "median_ms"], 1) == 0.2  # "ahead ... by a fifth"


def test_reference_cpu_saxpy_against_the_host_copy():
    """The chapter's SAXPY figures on the CPU, against the host's memory ceiling of the same run (quoted in prose)."""
    g, cref = lh.load_reference("ch12_gpu").table, lh.load_reference("ch12_cpu")
    c = cref.table
    host_copy = _rate(c, "copy", ep.HOST_COPY_MODEL, "gbps")
    winner = c.loc[(c["kernel"] == "copy") & (c["model"] == ep.HOST_COPY_MODEL), "device"].iloc[0]
    cpu = {m: _rate(c, "saxpy", m, "gbps") for m in ("OpenCL C", "Numba CPU", "OpenACC C", "C -O3", "NumPy")}
    gpu = {m: _rate(g, "saxpy", m, "gbps") for m in ("Numba", "CUDA C", "OpenCL C")}
    assert max(cpu.values()) < host_copy, "a CPU SAXPY above the host's ceiling of the same run is a bug"
    assert winner.endswith("best stream: add_threads")  # "the in-place add set the ceiling"
    assert abs(cpu["C -O3"] / host_copy - cpu["OpenACC C"] / host_copy) < 0.01  # one figure for both
    text = prose.markdown("book/12_portability.ipynb")
    expected = [
        f"the in-place add set the ceiling, {host_copy:,.0f} GB/s",
        f"`parallel=True` on every core at {cpu['Numba CPU'] / host_copy:.2f} of it",
        f"through PoCL at {cpu['OpenCL C'] / host_copy:.2f}",
        f"OpenACC's host fallback) at {cpu['C -O3'] / host_copy:.2f}",
        f"temporary array at {cpu['NumPy'] / host_copy:.2f}",
        f"on a host with {cref.meta['cpu_logical']} threads",
        f"the GPU's copy is about {_rate(g, 'copy', 'copy (CuPy, D2D)', 'gbps') / host_copy:.0f} times the host's "
        "ceiling",
        f"the GPU's SAXPY about {max(gpu.values()) / max(cpu.values()):.0f} times the CPU's fastest",
    ]
    assert lh.load_reference("ch12_gpu").meta["run"] != cref.meta["run"]  # "a later run than the GPU rows"
    missing = [e for e in expected if e not in text]
    assert not missing, f"chapter 12's CPU SAXPY prose no longer matches ch12_cpu: {missing}"
