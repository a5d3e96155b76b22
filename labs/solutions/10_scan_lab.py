"""Solutions of labs/10_scan_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
import numpy as np
from numba import cuda, int32, uint32

from labhelpers.kernels import scan as sk


@cuda.jit
def keep_flags(x, threshold, flags):
    i = cuda.grid(1)
    if i < x.size:
        flags[i] = 1 if x[i] > threshold else 0


@cuda.jit
def blelloch_block(x, out, block_sums):
    s = cuda.shared.array(2048, int32)
    tid = cuda.threadIdx.x
    n = 2 * cuda.blockDim.x
    ia = cuda.blockIdx.x * n + tid
    ib = ia + cuda.blockDim.x
    s[tid] = x[ia] if ia < x.size else 0
    s[tid + cuda.blockDim.x] = x[ib] if ib < x.size else 0
    offset = 1
    d = n // 2
    # FILL ME IN (roughly 8 lines): the up-sweep, while d > 0 (a barrier first, at every level)
    while d > 0:
        cuda.syncthreads()  # RAW: the previous level is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            s[b] += s[a]
        offset *= 2
        d //= 2
    cuda.syncthreads()  # RAW: the root holds the total before anyone reads it
    total = s[n - 1]
    cuda.syncthreads()  # WAR: everyone has read the total before thread 0 clears the root
    if tid == 0:
        s[n - 1] = 0
        block_sums[cuda.blockIdx.x] = total
    d = 1
    # FILL ME IN (roughly 10 lines): the down-sweep, while d < n (a barrier first, at every level)
    while d < n:
        offset //= 2
        cuda.syncthreads()  # RAW: the previous level (or the cleared root) is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            t = s[a]
            s[a] = s[b]
            s[b] += t
        d *= 2
    cuda.syncthreads()  # RAW: the scan is complete before anyone reads it
    if ia < x.size:
        out[ia] = s[tid]
    if ib < x.size:
        out[ib] = s[tid + cuda.blockDim.x]


@cuda.jit
def add_block_offsets(out, block_prefix, per_block):
    i = cuda.grid(1)
    # FILL ME IN (roughly 4 lines): elements of block b = i // per_block, b >= 1, add block_prefix[b - 1]
    if i < out.size:
        b = i // per_block
        if b > 0:
            out[i] += block_prefix[b - 1]


@cuda.jit
def scatter_kept(x, threshold, addresses, out):
    i = cuda.grid(1)
    # FILL ME IN (roughly 2 lines): every kept element goes to out[addresses[i]]
    if i < x.size and x[i] > threshold:
        out[addresses[i]] = x[i]


def compact(x, threshold):
    n = x.size
    d_x = cuda.to_device(x)
    flags = cuda.device_array(n, dtype=np.int32)
    out = cuda.device_array(n, dtype=x.dtype)
    blocks = (n + 127) // 128
    keep_flags[blocks, 128](d_x, threshold, flags)
    scan = sk.Scan(flags, "lookback", inclusive=False)  # addresses: how many are kept before each element
    scan.launch()
    addresses = scan.out
    scatter_kept[blocks, 128](d_x, threshold, addresses, out)
    last_flag = int(flags.copy_to_host()[n - 1])
    last_address = int(addresses.copy_to_host()[n - 1])
    count = 0  # FILL ME IN (1 line): how many are kept, from last_address and last_flag
    count = last_address + last_flag
    return out.copy_to_host()[:count]


@cuda.jit
def split_scatter(keys, bit, e, f, out):
    i = cuda.grid(1)
    n = keys.size
    if i < n:
        b = (keys[i] >> uint32(bit)) & uint32(1)
        # FILL ME IN (roughly 4 lines): totalFalses, t, d = t if b else f[i], and the scatter
        total_falses = e[n - 1] + f[n - 1]
        t = i - f[i] + total_falses
        d = t if b else f[i]
        out[d] = keys[i]


def choose_threads():
    """Threads per block of your blelloch_block in the whole scan."""
    # 256: enough threads per SM at 8 blocks, and a tree whose idle last levels are short (reference: ratio 0.21).
    return 256


@cuda.jit
def add_offsets_bug(out, block_prefix, per_block):
    """out[i] += block_prefix[b - 1] for the elements of scan block b >= 1: find the bug (add lines)."""
    i = cuda.grid(1)
    if i >= out.size:  # the last launch block has threads past the end
        return
    b = i // per_block
    if b > 0:
        out[i] += block_prefix[b - 1]


def predict_scan_ms(n, itemsize, passes, copy_gbs):
    """The least time of a scan, in ms: the bytes it moves over the copy ceiling."""
    # FILL ME IN (roughly 2 lines): bytes moved, then ms at copy_gbs
    nbytes = 2 * passes * itemsize * n  # every pass reads and writes every element
    return nbytes / (copy_gbs * 1e9) * 1e3
