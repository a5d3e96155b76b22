"""Solutions of labs/06_reduction_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
from numba import cuda, float32, int32

NBINS = 16


@cuda.jit
def reduce_sequential(x, partial):
    s = cuda.shared.array(1024, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()  # RAW: every element is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    # FILL ME IN (roughly 5 lines): the tree, halving `stride` down to 1
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_first_add(x, partial):
    s = cuda.shared.array(1024, float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * (2 * cuda.blockDim.x) + tid
    v = float32(0)
    # FILL ME IN (roughly 4 lines): add x[i] and x[i + cuda.blockDim.x] to v, each only if it exists
    if i < x.size:
        v = x[i]
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before anyone adds
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


@cuda.jit
def reduce_warp_shuffle(x, partial):
    warp_sums = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    v = x[i] if i < x.size else float32(0)
    offset = 16
    # FILL ME IN (roughly 3 lines): fold the warp with cuda.shfl_down_sync, halving `offset` down to 1
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if lane == 0:
        warp_sums[warp] = v
    cuda.syncthreads()  # RAW: every warp's sum is in shared memory before warp 0 reads them
    if warp == 0:
        v = warp_sums[lane] if lane < cuda.blockDim.x // 32 else float32(0)
        offset = 16
        # FILL ME IN (roughly 3 lines): the same fold, over the warps' sums
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if lane == 0:
            partial[cuda.blockIdx.x] = v


@cuda.jit
def histogram_shared(values, counts):
    s_counts = cuda.shared.array(NBINS, int32)
    tid = cuda.threadIdx.x
    b = tid
    # FILL ME IN (roughly 3 lines): zero the block's histogram (bins tid, tid + blockDim.x, ...)
    while b < NBINS:
        s_counts[b] = 0
        b += cuda.blockDim.x
    cuda.syncthreads()  # RAW: every bin is zero before any thread adds into it
    i = cuda.grid(1)
    # FILL ME IN (roughly 3 lines): grid-stride loop, one shared-memory atomic per element
    while i < values.size:
        cuda.atomic.add(s_counts, values[i], 1)
        i += cuda.gridsize(1)
    cuda.syncthreads()  # RAW: the block's histogram is complete before it is added to counts
    b = tid
    # FILL ME IN (roughly 3 lines): add every bin into counts: one global atomic per bin and block
    while b < NBINS:
        cuda.atomic.add(counts, b, s_counts[b])
        b += cuda.blockDim.x


def choose_threads():
    """Threads per block for reduce_first_add (a power of two, 32 to 1024)."""
    # 128: enough loads in flight per SM, a short tree, few idle threads in its last levels.
    return 128


@cuda.jit
def reduce_tree_bug(x, partial):
    """partial[block] = the sum of the block's elements: find the bug (fix it by adding a line)."""
    s = cuda.shared.array(1024, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()  # RAW: every element is in shared memory before the first level reads it
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


def predict_reduction_ms(n, itemsize, copy_gbs):
    """The least time of a sum of n elements, in ms: the bytes it reads over the copy ceiling."""
    # FILL ME IN (roughly 2 lines): bytes moved (read once; the partial sums are negligible), then ms at copy_gbs
    nbytes = n * itemsize
    return nbytes / (copy_gbs * 1e9) * 1e3
