"""Solutions of labs/14_multi_gpu_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import math

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)


def exchange_halos(slabs):
    # FILL ME IN (roughly 3 lines): for every pair of neighbours k, k+1, each one's edge row into the other's ghost
    for k in range(len(slabs) - 1):
        slabs[k + 1][0] = slabs[k][-2]
        slabs[k][-1] = slabs[k + 1][1]


def busbw_from_call(collective, count, seconds, n):
    # FILL ME IN (roughly 4 lines): the size S nccl-tests reports, the algorithm bandwidth, then the bus bandwidth
    nbytes = 4 * count * (n if collective in ("all_gather", "reduce_scatter") else 1)
    algbw = nbytes / seconds / 1e9
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
              "broadcast": 1.0}[collective]
    return algbw * factor


def predict_step_ms(ny, nx, gpus, overlap, rates_gbs, link_gbs, latency_us):
    # FILL ME IN (roughly 9 lines): the Jacobi rate, the slowest GPU's rows, compute, edges and halo, then the step
    rate = max(gbs for name, gbs in rates_gbs.items() if name != "copy")
    rows = math.ceil(ny / gpus)
    compute = 8 * rows * nx / (rate * 1e9)
    edges = 8 * min(rows, 2) * nx / (rate * 1e9)
    halo = 0.0 if gpus == 1 else latency_us * 1e-6 + 4 * nx / (link_gbs * 1e9)
    halo *= 2 if gpus > 2 else 1
    step = max(compute, edges + halo) if overlap else compute + halo
    return step * 1e3


def choose_rows():
    """Rows of the rows x 16384 grid that 2 GPUs should run 1.6 times faster than one."""
    # 16384: a step of 2 GB takes a millisecond or more, so the host's issue cost and the halo's latency are small.
    return 16384


def exchange_halos_bug(slabs):
    """Fill every ghost row from the neighbour's edge row: find the bug (fix it by adding a line)."""
    for k in range(len(slabs) - 1):
        slabs[k + 1][0] = slabs[k][-2]
        slabs[k][-1] = slabs[k + 1][1]  # and up: the slab above gets the first owned row of the one below
