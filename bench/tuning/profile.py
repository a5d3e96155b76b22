"""Nsight Compute evidence for issue 33's steps: each chapter kernel and the candidate that beat it, launched once.

    python bench/tuning/profile.py [--list]          # --list: the launches, in order, and nothing else
    bash tools/device_profile.sh                      # on the GPU machine: this script under ncu, CSV kept

GPU only; never run by the test suite. Each problem's data is made with NumPy and copied to the GPU, so the only
kernels launched are the ones profiled (plus the few a kernel needs, such as the stream-K kernel's zeroing and
CUB's two scan kernels). ``LAUNCHES`` prints ``label<TAB>kernel-name fragment`` lines in launch order: the report
maps ncu's launches to labels by walking them in order (``tools/device_profile.sh`` keeps both).
"""

from __future__ import annotations

import sys

from _cli import import_labhelpers  # bench/tuning/_cli.py: the backend chosen before the import

#: (problem, label, fragment of the kernel's name) in launch order.
LAUNCHES = [
    ("saxpy", "chapter saxpy, 256 threads", "saxpy"),
    ("saxpy", "candidate saxpy_vec4, 256 threads, one trip", "saxpy_vec4"),
    ("saxpy", "CuPy copy of the same bytes", "copy"),
    ("jacobi", "chapter jacobi_naive 32x8", "jacobi_naive"),
    ("jacobi", "chapter jacobi_marching 128x1", "jacobi_marching"),
    ("jacobi", "candidate jacobi_vec4 32x4", "jacobi_vec4"),
    ("jacobi", "candidate jacobi_vec4_march 64x2 rows 8", "jacobi_vec4_march"),
    ("stencil3d", "chapter stencil3d_naive 32x8x1", "stencil3d_naive"),
    ("stencil3d", "chapter stencil3d_marching 32x4", "stencil3d_marching"),
    ("stencil3d", "candidate stencil3d_flat 64x4x1", "stencil3d_flat"),
    ("stencil3d", "candidate stencil3d_march_regs 64x4 planes 16", "stencil3d_march_regs"),
    ("stencil3d", "candidate stencil3d_march_vec4 64x4 planes 8", "stencil3d_march_vec4"),
    ("scan", "chapter lookback_block 256x16, int32 2^28", "scan"),
    ("scan", "candidate lookback_warp 128x32, int32 2^28", "scan"),
    ("scan", "CUB DeviceScan, int32 2^28", "Scan"),
    ("matmul", "chapter double_buffered 128x128x8", "double_buffered"),
    ("matmul", "candidate unrolled register 128x128x8", "unrolled"),
    ("matmul", "cuBLAS SGEMM (cupy.matmul, TF32 off)", "gemm"),
    ("nbody", "chapter BEST tile 512 unroll 4 bodies 4", "nbody"),
    ("nbody", "candidate streamk tile 512 jstep 16 per_sm 2", "nbody_streamk"),
]


def main() -> None:
    if "--list" in sys.argv:
        for problem, label, fragment in LAUNCHES:
            print(f"{problem}\t{label}\t{fragment}")
        return
    import os

    os.environ["CUPY_TF32"] = "0"
    lh = import_labhelpers(__file__)
    import cupy as cp
    import numpy as np
    from numba import cuda

    from labhelpers.kernels import cuda_intro as ci
    from labhelpers.kernels import matmul as mm
    from labhelpers.kernels import matmul_candidates as mc
    from labhelpers.kernels import nbody as nb
    from labhelpers.kernels import nbody_candidates as nc
    from labhelpers.kernels import saxpy_candidates as sx
    from labhelpers.kernels import scan as sk
    from labhelpers.kernels import stencil as st
    from labhelpers.kernels import stencil_candidates as sc
    from labhelpers.experiments import scan as ex
    from labhelpers.launch import blocks_for

    print(lh.banner(), flush=True)
    rng = np.random.default_rng(0)
    # SAXPY, 2^26
    n = 2**26
    x, y = (cuda.to_device(rng.standard_normal(n, dtype=np.float32)) for _ in range(2))
    out = cuda.device_array(n, dtype=np.float32)
    a = np.float32(1.5)
    ci.saxpy[blocks_for(n, 256), 256](a, x, y, out)
    sx.SAXPY_CANDIDATES["vec4"][blocks_for(n, 256, sx.ELEMENTS_PER_TRIP["vec4"]), 256](a, x, y, out)
    cx, cy = cp.asarray(x), cp.asarray(out)
    cy[:] = cx
    cuda.synchronize()
    del x, y, out, cx, cy
    # Jacobi, 8192^2
    shape = (8192, 8192)
    u = cuda.to_device((rng.random(shape, dtype=np.float32) * 100).astype(np.float32))
    v = cuda.device_array(shape, dtype=np.float32)
    st.jacobi_naive[st.jacobi_grid("naive", shape, (32, 8)), (32, 8)](u, v)
    st.jacobi_marching[st.jacobi_grid("marching", shape, (128, 1)), (128, 1)](u, v)
    sc.jacobi_launch("vec4", shape, (32, 4))(sc.flat(u), sc.flat(v))
    sc.jacobi_launch("vec4_march", shape, (64, 2), 2)(sc.flat(u), sc.flat(v))
    cuda.synchronize()
    del u, v
    # 3D, 512^3
    shape3 = (512, 512, 512)
    u = cuda.to_device((rng.random(shape3, dtype=np.float32) * 100).astype(np.float32))
    v = cuda.device_array(shape3, dtype=np.float32)
    st.stencil3d_naive[st.stencil3d_grid("naive", shape3, (32, 8, 1)), (32, 8, 1)](u, v)
    st.stencil3d_marching[st.stencil3d_grid("marching", shape3, (32, 4)), (32, 4)](u, v)
    sc.stencil3d_launch("flat", shape3, (64, 4, 1))(sc.flat(u), sc.flat(v))
    sc.stencil3d_launch("march_regs", shape3, (64, 4), 16)(sc.flat(u), sc.flat(v))
    sc.stencil3d_launch("march_vec4", shape3, (64, 4), 8)(sc.flat(u), sc.flat(v))
    cuda.synchronize()
    del u, v
    # Scan, int32 2^28
    xs = cp.asarray((rng.random(2**28, dtype=np.float32) * 17).astype(np.int32) - 8)
    sk.Scan(xs, "lookback", True, 256, 16, lookback="block").launch()
    sk.Scan(xs, "lookback", True, 128, 32, lookback="warp").launch()
    ex.cub_scan(xs.copy())
    cp.cuda.Device().synchronize()
    del xs
    # SGEMM 4096
    m = 4096
    ca, cb = (cp.asarray(rng.random((m, m), dtype=np.float32)) for _ in range(2))
    cc = cp.empty((m, m), dtype=cp.float32)
    ad, bd, cd = (cuda.as_cuda_array(z) for z in (ca, cb, cc))
    mm.plan("double_buffered", m, m, m).launch(ad, bd, cd)
    mc.plan_candidate(m, m, m, double_buffered=False).launch(ad, bd, cd)
    cp.matmul(ca, cb, out=cc)
    cp.cuda.Device().synchronize()
    del ca, cb, cc, ad, bd, cd
    # n-body 2^18
    nbod = 2**18
    pos = cuda.to_device(nb.random_bodies(nbod))
    acc = cuda.device_array((nbod, 3), dtype=np.float32)
    eps2 = nb._eps2(nb.DEFAULT_EPS2)
    cfg = nb.Config("tiled", tile=512, unroll=4, bodies=4)
    blocks, threads = cfg.launch(nbod)
    cfg.kernel()[blocks, threads](pos, eps2, acc)
    nc.launch_streamk(pos, eps2, acc, tile=512, jstep=16, blocks=nc.streamk_grid(2))
    cuda.synchronize()
    print("done", flush=True)


if __name__ == "__main__":
    main()
