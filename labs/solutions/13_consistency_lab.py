"""Solutions of labs/13_consistency_lab.ipynb (not shipped in the package: Colab users do not get them).

Each function keeps every line of its skeleton, in order; solving only adds lines.
"""

import labhelpers as lh  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)
from numba import cuda, float32, int32, uint32

LAB_THREADS = 64


@cuda.jit
def count_atomic(x, threshold, counter):
    i = cuda.grid(1)
    # FILL ME IN (roughly 2 lines): one atomic addition per element above the threshold
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(counter, 0, 1)


@cuda.jit
def count_block(x, threshold, counter):
    hits = cuda.shared.array(1, int32)
    i = cuda.grid(1)
    # FILL ME IN (roughly 9 lines): zero the shared counter, barrier, count in it, barrier, one global atomic
    if cuda.threadIdx.x == 0:
        hits[0] = 0
    cuda.syncthreads()  # RAW: the zero is written before anyone adds to it
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(hits, 0, 1)
    cuda.syncthreads()  # RAW: every thread's hit is in before thread 0 reads the total
    if cuda.threadIdx.x == 0 and hits[0] > 0:
        cuda.atomic.add(counter, 0, hits[0])


@cuda.jit
def max_cas(x_bits, best_key):
    i = cuda.grid(1)
    if i < x_bits.size:
        b = x_bits[i]
        # FILL ME IN (roughly 8 lines): the order-preserving key, then the compare-and-swap loop
        key = b if b >= 0 else b ^ int32(0x7FFFFFFF)
        seen = best_key[0]
        while seen < key:
            found = cuda.atomic.cas(best_key, 0, seen, key)
            if found == seen:
                break
            seen = found


@cuda.jit
def sum_last_block(x, partial, ticket, out):
    s = cuda.shared.array(LAB_THREADS, float32)
    am_last = cuda.shared.array(1, int32)
    tid = cuda.threadIdx.x
    v = float32(0)
    i = cuda.grid(1)
    while i < x.size:
        v += x[i]
        i += cuda.gridsize(1)
    s[tid] = v
    cuda.syncthreads()  # RAW: every thread's sum is in shared memory before the tree
    stride = LAB_THREADS // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
        stride //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]
        # FILL ME IN (1 line): make the partial sum visible to every block before taking the ticket
        cuda.threadfence()
        t = cuda.atomic.inc(ticket, 0, uint32(cuda.gridDim.x - 1))
        # FILL ME IN (1 line): nothing below may read partial sums older than the tickets
        cuda.threadfence()
        am_last[0] = 1 if t == cuda.gridDim.x - 1 else 0
    cuda.syncthreads()  # RAW: am_last is written before every thread reads it
    if am_last[0] == 1:  # the same for the whole block
        v = float32(0)
        j = tid
        while j < cuda.gridDim.x:
            v += partial[j]
            j += LAB_THREADS
        s[tid] = v
        cuda.syncthreads()  # RAW: the partial sums are in shared memory before the tree
        stride = LAB_THREADS // 2
        while stride > 0:
            if tid < stride:
                s[tid] += s[tid + stride]
            cuda.syncthreads()  # RAW: this level's sums are written before the next level reads them
            stride //= 2
        if tid == 0:
            out[0] = s[0]


def litmus_answers():
    """For each (test, outcome): True if some interleaving (sequential consistency) gives it."""
    return {
        ("MP", (1, 0)): False,
        ("MP", (0, 1)): True,
        ("MP", (0, 0)): True,
        ("SB", (0, 0)): False,
        ("SB", (1, 1)): True,
        ("LB", (1, 1)): False,
        ("LB", (0, 0)): True,
        ("CoRR", (1, 0)): False,
        ("CoRR", (0, 1)): True,
        ("IRIW", (1, 0, 1, 0)): False,
        ("IRIW", (1, 1, 0, 0)): True,
        ("MP-reversed", (1, 0)): True,
    }


def choose_threads():
    """Threads per block for count_block (a power of two, 32 to 1024)."""
    # 2^24 hits: one global atomic per 256 hits instead of one per hit.
    return 256


@cuda.jit
def count_block_bug(x, threshold, counter):
    """counter[0] += the elements of x above threshold, one global atomic per block: find the bug (add a line)."""
    hits = cuda.shared.array(1, int32)
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        hits[0] = 0
    cuda.syncthreads()  # RAW: the zero is written before anyone adds to it
    if i < x.size and x[i] > threshold:
        cuda.atomic.add(hits, 0, 1)
    cuda.syncthreads()  # RAW: every thread's hit is in before thread 0 reads the total
    if cuda.threadIdx.x == 0 and hits[0] > 0:
        cuda.atomic.add(counter, 0, hits[0])


def predict_counter_ms(n, group, atomics_per_s):
    """The time of counting n hits into one address, one atomic per group of threads, in ms."""
    # FILL ME IN (roughly 2 lines): the atomics issued (a partial last group counts), then ms at atomics_per_s
    atomics = (n + group - 1) // group
    return atomics / atomics_per_s * 1e3
