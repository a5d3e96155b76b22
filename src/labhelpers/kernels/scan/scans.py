"""The teaching scan kernels: one block (Hillis-Steele, Blelloch, warp shuffles) and across blocks
(propagate block offsets, reduce, a chained single pass).
"""

from __future__ import annotations

from numba import cuda, int32

from .definitions import BLELLOCH_SHARED, FULL_MASK, LOG_BANKS, MAX_THREADS, T, TypedKernel, WARP, typed_kernel


@cuda.jit(device=True)
def pad(i):
    """Where element ``i`` lives in a padded shared array: one spare word after every 32.

    Without padding, the threads of a warp that touch words ``k, k + 32, k + 64, ...`` all hit the
    same bank (word ``w`` is in bank ``w % 32``) and wait for each other; with it, word ``i`` moves by
    ``i // 32``, so strides that are multiples of 32 land in different banks.
    """
    return i + (i >> LOG_BANKS)


@cuda.jit(device=True)
def no_pad(i):
    """No padding: element ``i`` is word ``i`` (for comparing bank conflicts with :func:`pad`)."""
    return i


@typed_kernel
def hillis_steele_scan(x, out, block_sums, inclusive):
    """Scan each block's ``blockDim.x`` elements, Hillis-Steele style: log2(n) steps, n log2(n) additions.

    At step ``offset = 1, 2, 4, ...`` (while ``offset < blockDim.x``) every element adds the one
    ``offset`` to its left. A step reads the previous step's values while others write new ones, so
    the values live in two buffers used in turn (double buffering). ``inclusive`` is 1 or 0; with
    ``block_sums`` non-empty the last thread stores the block's total in ``block_sums[blockIdx.x]``.
    """
    buf = cuda.shared.array((2, MAX_THREADS), T)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    buf[0, tid] = x[i] if i < x.size else T(0)  # guard the load (0 past the end), never the barrier
    cuda.syncthreads()  # RAW: every element is in buffer 0 before step 1 reads it
    src = 0
    offset = 1
    while offset < cuda.blockDim.x:
        if tid >= offset:
            buf[1 - src, tid] = buf[src, tid - offset] + buf[src, tid]
        else:
            buf[1 - src, tid] = buf[src, tid]
        cuda.syncthreads()  # RAW: this step is written before the next reads it; WAR: the buffer it overwrites is read
        src = 1 - src
        offset *= 2
    if i < x.size:
        if inclusive:
            out[i] = buf[src, tid]
        elif tid > 0:
            out[i] = buf[src, tid - 1]
        else:
            out[i] = T(0)
    if block_sums.size > 0 and tid == cuda.blockDim.x - 1:
        block_sums[cuda.blockIdx.x] = buf[src, tid]


@cuda.jit
def hillis_steele_seed_bounds(x, out, block_sums, inclusive):
    """PITFALL (do not use): :data:`hillis_steele_scan` with the loop bound of the slide, ``d < log2 n`` (int32).

    ``for d = 1 .. log2(n) - 1`` runs one step too few: the last step, which adds the first half of
    the block into the second half, never happens. (Written as ``2 * offset < blockDim.x``.)
    """
    buf = cuda.shared.array((2, MAX_THREADS), int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    buf[0, tid] = x[i] if i < x.size else 0
    cuda.syncthreads()  # RAW: every element is in buffer 0 before step 1 reads it
    src = 0
    offset = 1
    while 2 * offset < cuda.blockDim.x:  # WRONG: one step short
        if tid >= offset:
            buf[1 - src, tid] = buf[src, tid - offset] + buf[src, tid]
        else:
            buf[1 - src, tid] = buf[src, tid]
        cuda.syncthreads()  # RAW/WAR as in hillis_steele_scan
        src = 1 - src
        offset *= 2
    if i < x.size:
        out[i] = buf[src, tid]


@cuda.jit
def hillis_steele_single_buffer(x, out, block_sums, inclusive):
    """PITFALL (do not use): Hillis-Steele in ONE buffer (int32): a thread may read a neighbour already updated.

    ``s[tid] += s[tid - offset]`` reads a word that thread ``tid - offset`` writes in the same step.
    Whether the read comes before or after that write depends on scheduling: a data race (a RAW and a
    WAR hazard inside one step), which a barrier at the end of the step cannot fix.
    """
    s = cuda.shared.array(MAX_THREADS, int32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    s[tid] = x[i] if i < x.size else 0
    cuda.syncthreads()  # RAW: every element is in shared memory before step 1
    offset = 1
    while offset < cuda.blockDim.x:
        if tid >= offset:
            s[tid] += s[tid - offset]  # WRONG: s[tid - offset] may already hold this step's value
        cuda.syncthreads()  # too late: the race is inside the step
        offset *= 2
    if i < x.size:
        out[i] = s[tid]


@cuda.jit(device=True)
def blelloch_sweeps(s, tid, n, zero):
    """Exclusive scan, in place, of the ``n`` values (a power of two, ``n = 2 * blockDim.x``) in ``s``.

    Every thread of the block must call it. Returns the total of the ``n`` values. Indices go
    through :func:`pad` (bank-conflict padding). Up-sweep: a reduction tree, ``log2 n`` levels
    (``d = n/2, n/4, ..., 1`` threads add); the root then holds the total. Down-sweep: the root is
    replaced by the identity and pushed back down: each node passes its value to its left child and
    its value plus the left child's old value to its right child. ``2(n - 1)`` additions in all.
    """
    offset = 1
    d = n >> 1
    while d > 0:  # up-sweep: log2(n) levels, the last one (d = 1) writes the total into the root
        cuda.syncthreads()  # RAW: the previous level (or the loads) is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            s[pad(b)] += s[pad(a)]
        offset <<= 1
        d >>= 1
    cuda.syncthreads()  # RAW: the root holds the total before anyone reads it
    root = pad(n - 1)
    total = s[root]
    cuda.syncthreads()  # WAR: every thread has read the total before thread 0 clears the root
    if tid == 0:
        s[root] = zero
    d = 1
    while d < n:  # down-sweep: log2(n) levels
        offset >>= 1
        cuda.syncthreads()  # RAW: the previous level (or the cleared root) is written before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            t = s[pad(a)]
            s[pad(a)] = s[pad(b)]
            s[pad(b)] += t
        d <<= 1
    cuda.syncthreads()  # RAW: the scan is complete before anyone reads it
    return total


@cuda.jit(device=True)
def blelloch_sweeps_unpadded(s, tid, n, zero):
    """:func:`blelloch_sweeps` without padding: the same tree, with bank conflicts (for comparison)."""
    offset = 1
    d = n >> 1
    while d > 0:
        cuda.syncthreads()  # RAW: the previous level (or the loads) is in s before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            s[b] += s[a]
        offset <<= 1
        d >>= 1
    cuda.syncthreads()  # RAW: the root holds the total before anyone reads it
    total = s[n - 1]
    cuda.syncthreads()  # WAR: every thread has read the total before thread 0 clears the root
    if tid == 0:
        s[n - 1] = zero
    d = 1
    while d < n:
        offset >>= 1
        cuda.syncthreads()  # RAW: the previous level (or the cleared root) is written before this level reads it
        if tid < d:
            a = offset * (2 * tid + 1) - 1
            b = a + offset
            t = s[a]
            s[a] = s[b]
            s[b] += t
        d <<= 1
    cuda.syncthreads()  # RAW: the scan is complete before anyone reads it
    return total


@typed_kernel
def blelloch_scan(x, out, block_sums, block_prefix, inclusive):
    """Scan each block's ``2 * blockDim.x`` elements with Blelloch's work-efficient tree (O(n) additions).

    ``blockDim.x`` must be a power of two. Thread ``tid`` loads elements ``tid`` and
    ``tid + blockDim.x`` of its block (coalesced), :func:`blelloch_sweeps` scans them in shared
    memory, and the thread writes its two results back (``inclusive`` = 1 adds its own element).
    With ``block_sums`` non-empty, the block's total goes to ``block_sums[blockIdx.x]`` (the first
    kernel of scan-then-propagate); with ``block_prefix`` non-empty, blocks after the first add
    ``block_prefix[blockIdx.x - 1]``, the inclusive scan of the earlier blocks' totals (the last
    kernel of reduce-then-scan).
    """
    s = cuda.shared.array(BLELLOCH_SHARED, T)
    tid = cuda.threadIdx.x
    n = 2 * cuda.blockDim.x
    base = cuda.blockIdx.x * n
    ia = base + tid
    ib = base + tid + cuda.blockDim.x
    va = x[ia] if ia < x.size else T(0)
    vb = x[ib] if ib < x.size else T(0)
    s[pad(tid)] = va
    s[pad(tid + cuda.blockDim.x)] = vb
    total = blelloch_sweeps(s, tid, n, T(0))  # (its first barrier orders these stores before the tree)
    offset = T(0)
    if block_prefix.size > 0 and cuda.blockIdx.x > 0:
        offset = block_prefix[cuda.blockIdx.x - 1]
    ra = s[pad(tid)] + offset
    rb = s[pad(tid + cuda.blockDim.x)] + offset
    if inclusive:
        ra += va
        rb += vb
    if ia < x.size:
        out[ia] = ra
    if ib < x.size:
        out[ib] = rb
    if block_sums.size > 0 and tid == 0:
        block_sums[cuda.blockIdx.x] = total


blelloch_scan_unpadded = TypedKernel(blelloch_scan.py_func, pad=no_pad, blelloch_sweeps=blelloch_sweeps_unpadded)
blelloch_scan_unpadded.__name__ = "blelloch_scan_unpadded"
blelloch_scan_unpadded.__doc__ = ":data:`blelloch_scan` compiled with :func:`no_pad`: the bank conflicts left in."


@cuda.jit(device=True)
def warp_inclusive_scan(v, lane):
    """Inclusive scan of ``v`` over the 32 lanes of a warp, in registers: five shuffles (GPU only).

    ``shfl_up_sync(mask, v, k)`` hands each lane the ``v`` of the lane ``k`` below it; lanes below
    ``k`` have nobody there and keep their value: Hillis-Steele, with the warp as the block and
    registers as the buffer (the hardware exchanges all 32 values at once, so no second buffer).
    """
    for k in (1, 2, 4, 8, 16):
        u = cuda.shfl_up_sync(FULL_MASK, v, k)
        if lane >= k:
            v += u
    return v


@typed_kernel
def block_scan_shuffle(x, out, block_sums, inclusive):
    """Scan each block's ``blockDim.x`` elements (a multiple of 32) with warp shuffles (GPU only).

    Every warp scans its 32 values in registers (:func:`warp_inclusive_scan`); lane 31 of each warp
    parks the warp's total in shared memory; warp 0 scans those totals (at most 32); every thread
    adds the totals of the warps before its own. Two barriers in all, against 2 log2(n) for the
    shared-memory trees.
    """
    warp_totals = cuda.shared.array(WARP, T)
    tid = cuda.threadIdx.x
    lane = tid % WARP
    warp = tid // WARP
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    v = x[i] if i < x.size else T(0)
    scanned = warp_inclusive_scan(v, lane)
    if lane == WARP - 1:
        warp_totals[warp] = scanned
    cuda.syncthreads()  # RAW: every warp's total is in shared memory before warp 0 scans them
    if warp == 0:
        t = warp_totals[lane] if lane < cuda.blockDim.x // WARP else T(0)
        warp_totals[lane] = warp_inclusive_scan(t, lane)
    cuda.syncthreads()  # RAW: the scanned totals are written before the other warps read them
    if warp > 0:
        scanned += warp_totals[warp - 1]
    if i < x.size:
        out[i] = scanned if inclusive else scanned - v
    if block_sums.size > 0 and tid == cuda.blockDim.x - 1:
        block_sums[cuda.blockIdx.x] = scanned


# =============================================================================================
# Across blocks, the teaching kernels: propagate, reduce, a chained single pass
# =============================================================================================


@typed_kernel
def add_block_offsets(out, block_prefix, per_block):
    """Scan-then-propagate, last kernel: every element of block ``b >= 1`` adds ``block_prefix[b - 1]``.

    ``block_prefix`` is the inclusive scan of the blocks' totals, so ``block_prefix[b - 1]`` is the
    sum of every element before block ``b``. ``per_block`` is how many elements the scan kernel gave
    each block (``blockDim.x`` for Hillis-Steele, ``2 * blockDim.x`` for Blelloch).
    """
    i = cuda.grid(1)
    if i < out.size:
        b = i // per_block
        if b > 0:
            out[i] += block_prefix[b - 1]


@typed_kernel
def block_reduce(x, sums):
    """Reduce-then-scan, first kernel: ``sums[b]`` = the total of block ``b``'s ``2 * blockDim.x`` elements.

    The tree of the reduction chapter (sequential addressing, first add during the load); the
    block size must be a power of two.
    """
    s = cuda.shared.array(MAX_THREADS, T)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * 2 * cuda.blockDim.x + tid
    v = x[i] if i < x.size else T(0)
    if i + cuda.blockDim.x < x.size:
        v += x[i + cuda.blockDim.x]
    s[tid] = v
    cuda.syncthreads()  # RAW: every pair sum is in shared memory before the tree reads it
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()  # RAW: this level is written before the next level reads it
        stride //= 2
    if tid == 0:
        sums[cuda.blockIdx.x] = s[0]


@typed_kernel
def chained_scan(x, out, flags, prefixes, counter, epoch, inclusive):
    """A single pass: each block scans its tile, then waits for the tile before it (a chained scan).

    * **Tile numbers in start order.** Thread 0 takes the next number from ``counter`` with an
      atomic: a block waits only for tiles whose blocks started before it, so it can never wait for
      a block that cannot start (which a wait on ``blockIdx.x - 1`` could: blocks start in any order).
    * **The hand-over.** Block ``t`` scans its ``2 * blockDim.x`` elements (:func:`blelloch_sweeps`);
      thread 0 waits until ``flags[t - 1]`` says tile ``t - 1`` has published the sum of everything
      up to its end in ``prefixes[t - 1]``, adds its own total, publishes ``prefixes[t]``, then sets
      ``flags[t]``.
    * **The fences.** Writing the prefix and then the flag is not enough: another SM may see the
      two writes in the other order. ``cuda.threadfence()`` between them makes the prefix visible
      everywhere before the flag (release); the reader fences between reading the flag and reading
      the prefix (acquire). Flags and prefixes are read with atomics (``atomic.add(a, i, 0)``),
      which go to the L2 cache: a plain load could return a stale copy from this SM's L1 cache
      (CUDA C++ would declare them ``volatile``, which Numba cannot).
    * ``epoch`` (1, 2, 3, ... one per call) makes ``2 * epoch + 1`` this call's "published" value, so
      the flags never need clearing; the block with the last number resets ``counter``.

    Every tile waits for the one before: the tiles finish one after the other. That is the weakness
    the decoupled look-back (:func:`tile_kernels`) removes.
    """
    s = cuda.shared.array(BLELLOCH_SHARED, T)
    number = cuda.shared.array(1, int32)
    carry = cuda.shared.array(1, T)
    tid = cuda.threadIdx.x
    if tid == 0:
        number[0] = cuda.atomic.add(counter, 0, 1)
        if number[0] == cuda.gridDim.x - 1:
            cuda.atomic.exch(counter, 0, 0)  # every block has its number: ready for the next call
    cuda.syncthreads()  # RAW: the tile number is in shared memory before anyone reads it
    tile = number[0]
    n = 2 * cuda.blockDim.x
    ia = tile * n + tid
    ib = ia + cuda.blockDim.x
    va = x[ia] if ia < x.size else T(0)
    vb = x[ib] if ib < x.size else T(0)
    s[pad(tid)] = va
    s[pad(tid + cuda.blockDim.x)] = vb
    total = blelloch_sweeps(s, tid, n, T(0))
    if tid == 0:
        published = 2 * epoch + 1
        before = T(0)
        if tile > 0:
            while cuda.atomic.add(flags, tile - 1, 0) < published:
                pass  # spin: tile - 1 has not published yet
            cuda.threadfence()  # acquire: read the prefix only after seeing its flag
            before = cuda.atomic.add(prefixes, tile - 1, T(0))
        prefixes[tile] = before + total
        cuda.threadfence()  # release: the prefix is visible everywhere before the flag
        cuda.atomic.exch(flags, tile, published)
        carry[0] = before
    cuda.syncthreads()  # RAW: the carry from earlier tiles is in shared memory before anyone adds it
    ra = s[pad(tid)] + carry[0]
    rb = s[pad(tid + cuda.blockDim.x)] + carry[0]
    if inclusive:
        ra += va
        rb += vb
    if ia < x.size:
        out[ia] = ra
    if ib < x.size:
        out[ib] = rb
