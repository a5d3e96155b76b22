"""The tiled kernels: many items per thread, 16-byte loads, the decoupled look-back (single pass), and
the tiled compaction and radix kernels, compiled per :class:`TileConfig` by :func:`tile_kernels`.
"""

from __future__ import annotations

import types as pytypes
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, int32, uint32, uint64

from ... import backend, validate
from ...errors import ArrayArgumentError, LaunchConfigError
from .definitions import FULL_MASK, LOG_BANKS, T, WARP, _NUMBA_TYPES
from .scans import pad, warp_inclusive_scan


def _vector_access4():
    """``(load4, store4)``: four consecutive 32-bit elements in one 16-byte access.

    ``load4(a, v)`` returns ``(a[4v], a[4v+1], a[4v+2], a[4v+3])``; ``store4(a, v, p, q, r, s)``
    writes them. ``a`` is a 1D C-contiguous int32, uint32 or float32 array whose data starts on a
    16-byte boundary (every device allocation does). On a GPU each is one ``ld.global.v4`` /
    ``st.global.v4`` instruction, the width of CUDA C++'s ``int4``/``float4``; Numba's own indexing
    would issue four 4-byte accesses, and a warp's load would move 128 bytes instead of 512. The
    index goes straight into the address (unsigned: no negative-index checks). Under the simulator
    they are plain indexing.
    """
    if backend.is_simulator():
        def load4(a, v):
            i = 4 * int(v)
            return a[i], a[i + 1], a[i + 2], a[i + 3]

        def store4(a, v, p, q, r, s):
            i = 4 * int(v)
            a[i] = p
            a[i + 1] = q
            a[i + 2] = r
            a[i + 3] = s

        return load4, store4

    from llvmlite import ir  # the compiler's extension API: only where an intrinsic is defined
    from numba import types  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.core.errors import TypingError  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.extending import intrinsic  # the compiler's extension API: only where an intrinsic is defined

    ok = (types.int32, types.uint32, types.float32)

    def check(a, v, what):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype in ok):
            raise TypingError(f"{what} takes a 1D C-contiguous int32, uint32 or float32 array, got {a}")
        if not isinstance(v, types.Integer):
            raise TypingError(f"{what} takes an integer index, got {v}")

    def address(context, builder, sig, args):
        aryty = sig.args[0]
        data = context.make_array(aryty)(context, builder, args[0]).data
        vec = ir.VectorType(context.get_data_type(aryty.dtype), 4)
        index = context.cast(builder, args[1], sig.args[1], types.uint64)
        return builder.gep(builder.bitcast(data, vec.as_pointer()), [index], inbounds=True)

    @intrinsic
    def load4(typingctx, a, v):
        check(a, v, "load4")
        sig = types.UniTuple(a.dtype, 4)(a, v)

        def codegen(context, builder, sig, args):
            vec = builder.load(address(context, builder, sig, args), align=16)
            parts = [builder.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(4)]
            return context.make_tuple(builder, sig.return_type, parts)

        return sig, codegen

    @intrinsic
    def store4(typingctx, a, v, p, q, r, s):
        check(a, v, "store4")
        sig = types.void(a, v, p, q, r, s)

        def codegen(context, builder, sig, args):
            dtype = sig.args[0].dtype
            vec = ir.Constant(ir.VectorType(context.get_data_type(dtype), 4), ir.Undefined)
            for k in range(4):
                value = context.cast(builder, args[2 + k], sig.args[2 + k], dtype)
                vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
            builder.store(vec, address(context, builder, sig, args), align=16)
            return context.get_dummy_value()

        return sig, codegen

    return load4, store4


load4, store4 = _vector_access4()


def _descriptor_access():
    """``(pack_descriptor, unpack_descriptor, load_relaxed)``: a tile's status and value in ONE 64-bit word.

    ``pack_descriptor(status, value, zero)`` returns the uint64 word ``status << 32 | bits(value)``:
    ``value`` is first converted to ``zero``'s type (int32, uint32 or float32; Numba adds int32s in
    int64, and the conversion wraps as int32 adds would), and ``bits`` are its 32 bits as they are (a
    float32's bit pattern, not its integer part: the word must give the same float back).
    ``unpack_descriptor(word, zero)`` returns ``(status, value)``: the high 32 bits as an int64 and the
    low 32 bits as a value of ``zero``'s type. ``load_relaxed(a, i)`` reads the uint64 ``a[i]`` with
    ``ld.relaxed.gpu``: a strong (memory-model) load, never torn, never served from a stale L1 line,
    never hoisted out of a polling loop (inline PTX with side effects and a memory clobber), as CUB reads
    its tile descriptors; cheaper than the atomic read-modify-write ``cuda.atomic.add(a, i, 0)``. It
    needs sm_70 or newer.

    One word is what makes the fences unnecessary: a reader that sees the status sees the value that
    was stored with it, because a 64-bit aligned access is single-copy atomic. Under the simulator they
    are NumPy.
    """
    if backend.is_simulator():
        def pack_descriptor(status, value, zero):
            v = np.asarray(value).astype(np.asarray(zero).dtype)  # (astype wraps an integer, as the GPU does)
            return np.uint64((int(status) << 32) | int(v.view(np.uint32)))

        def unpack_descriptor(word, zero):
            w = int(word)
            bits = np.asarray(np.uint32(w & 0xFFFFFFFF))
            return w >> 32, bits.view(np.asarray(zero).dtype)[()]

        def load_relaxed(a, i):
            return a[i]

        return pack_descriptor, unpack_descriptor, load_relaxed

    from llvmlite import ir  # the compiler's extension API: only where an intrinsic is defined
    from numba import types  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.core.errors import TypingError  # the compiler's extension API: only where an intrinsic is defined
    from numba.cuda.extending import intrinsic  # the compiler's extension API: only where an intrinsic is defined

    values = (types.int32, types.uint32, types.float32)
    words = (types.uint64, types.int64)

    def low_bits(builder, value, value_type):
        """The 32 bits of an int32, uint32 or float32 as an i32 (a bitcast for the float)."""
        return builder.bitcast(value, ir.IntType(32)) if value_type == types.float32 else value

    @intrinsic
    def pack_descriptor(typingctx, status, value, zero):
        if not isinstance(status, types.Integer):
            raise TypingError(f"pack_descriptor takes an integer status, got {status}")
        if not isinstance(value, (types.Integer, types.Float)):
            raise TypingError(f"pack_descriptor packs a number, got {value}")
        if zero not in values:
            raise TypingError(f"pack_descriptor packs an int32, uint32 or float32 value, got {zero} for its type")
        sig = types.uint64(status, value, zero)

        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            status32 = context.cast(builder, args[0], sig.args[0], types.uint32)
            value = context.cast(builder, args[1], sig.args[1], sig.args[2])
            high = builder.shl(builder.zext(status32, i64), ir.Constant(i64, 32))
            return builder.or_(high, builder.zext(low_bits(builder, value, sig.args[2]), i64))

        return sig, codegen

    @intrinsic
    def unpack_descriptor(typingctx, word, zero):
        if word not in words:
            raise TypingError(f"unpack_descriptor takes a uint64 word, got {word}")
        if zero not in values:
            raise TypingError(f"unpack_descriptor returns an int32, uint32 or float32 value, got {zero}")
        sig = types.Tuple((types.int64, zero))(word, zero)

        def codegen(context, builder, sig, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            status = builder.lshr(args[0], ir.Constant(i64, 32))
            bits = builder.trunc(args[0], i32)
            value = builder.bitcast(bits, ir.FloatType()) if sig.args[1] == types.float32 else bits
            return context.make_tuple(builder, sig.return_type, [status, value])

        return sig, codegen

    @intrinsic
    def load_relaxed(typingctx, a, i):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" and a.dtype in words):
            raise TypingError(f"load_relaxed takes a 1D C-contiguous uint64 or int64 array, got {a}")
        if not isinstance(i, types.Integer):
            raise TypingError(f"load_relaxed takes an integer index, got {i}")
        sig = a.dtype(a, i)

        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            index = context.cast(builder, args[1], sig.args[1], types.uint64)
            address = builder.gep(data, [index], inbounds=True)
            # side_effect and the memory clobber: the compiler may neither drop, merge nor hoist the load.
            load = ir.InlineAsm(ir.FunctionType(i64, [address.type]), "ld.relaxed.gpu.u64 $0, [$1];",
                                "=l,l,~{memory}", side_effect=True)
            return builder.call(load, [address])

        return sig, codegen

    return pack_descriptor, unpack_descriptor, load_relaxed


pack_descriptor, unpack_descriptor, load_relaxed = _descriptor_access()

#: The tiled family's functions, in definition order: name -> ("device" | "kernel", Python function).
_TILE_FUNCTIONS: dict[str, tuple[str, Callable]] = {}


def tile_device(func: Callable) -> Callable:
    """Decorator: a device function of the tiled family (compiled per :class:`TileConfig` by :func:`tile_kernels`)."""
    _TILE_FUNCTIONS[func.__name__] = ("device", func)
    return func


def tile_kernel(func: Callable) -> Callable:
    """Decorator: a kernel of the tiled family (compiled per :class:`TileConfig` by :func:`tile_kernels`)."""
    _TILE_FUNCTIONS[func.__name__] = ("kernel", func)
    return func


# Names the tiled functions use; each configuration compiles them with its own values.
THREADS, ITEMS, TILE, PADDED_TILE, WINDOW, CONTROL, SHUFFLE, VECTOR = 256, 16, 4096, 4224, 32, 34, True, True
RADIX_BITS, RADIX, PADDED_COUNTS = 4, 16, 4488


@tile_device
def load_tile(x, base, n, s, items):
    """Read tile ``x[base : base + TILE]`` so that thread ``tid`` holds elements ``tid*ITEMS ... + ITEMS - 1``.

    Every thread must call it. Global memory is read in coalesced runs (a whole tile: each warp
    reads ``32 * ITEMS`` consecutive elements with 16-byte loads; the last, partial tile: guarded
    4-byte loads, zero past the end) into the padded shared array ``s``, and each thread then takes
    its ``ITEMS`` consecutive elements out of it: a transpose through shared memory. ``base`` and
    ``n`` are unsigned 64-bit.
    """
    tid = cuda.threadIdx.x
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            e = first + 4 * WARP * k
            a, b, c, d = load4(x, (base + np.uint64(e)) // np.uint64(4))
            s[pad(e)] = a
            s[pad(e + 1)] = b
            s[pad(e + 2)] = c
            s[pad(e + 3)] = d
    else:
        for k in range(ITEMS):
            e = tid + k * THREADS
            g = base + np.uint64(e)
            s[pad(e)] = x[g] if g < n else T(0)
    cuda.syncthreads()  # RAW: the whole tile is in shared memory before threads take their items
    for j in range(ITEMS):
        items[j] = s[pad(tid * ITEMS + j)]


@tile_device
def store_tile(out, base, n, s, items):
    """The reverse of :func:`load_tile`: each thread's ``ITEMS`` values go back to ``out[base : base + TILE]``."""
    tid = cuda.threadIdx.x
    cuda.syncthreads()  # WAR: every thread is done reading s before it is overwritten
    for j in range(ITEMS):
        s[pad(tid * ITEMS + j)] = items[j]
    cuda.syncthreads()  # RAW: the whole tile is in shared memory before the coalesced stores read it
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            e = first + 4 * WARP * k
            store4(out, (base + np.uint64(e)) // np.uint64(4), s[pad(e)], s[pad(e + 1)], s[pad(e + 2)],
                   s[pad(e + 3)])
    else:
        for k in range(ITEMS):
            e = tid + k * THREADS
            g = base + np.uint64(e)
            if g < n:
                out[g] = s[pad(e)]


@tile_device
def block_exclusive_scan(v, scratch, zero):
    """Exclusive scan of one value per thread over the block: returns ``(sum before me, block total)``.

    Every thread must call it. On a GPU (``SHUFFLE``) each warp scans in registers
    (:func:`warp_inclusive_scan`) and one barrier shares the warps' totals; in the simulator,
    Hillis-Steele in the shared array ``scratch`` (2 x THREADS). Ends with a barrier, so
    ``scratch`` can be reused at once.
    """
    tid = cuda.threadIdx.x
    if SHUFFLE:
        lane = tid % WARP
        warp = tid // WARP
        inclusive = warp_inclusive_scan(v, lane)
        exclusive = cuda.shfl_up_sync(FULL_MASK, inclusive, 1)
        if lane == 0:
            exclusive = zero
        if lane == WARP - 1:
            scratch[0, warp] = inclusive
        cuda.syncthreads()  # RAW: every warp's total is in shared memory before anyone adds them
        total = zero
        for w in range(THREADS // WARP):
            t = scratch[0, w]
            if w < warp:
                exclusive += t
            total += t
        cuda.syncthreads()  # WAR: every thread has read the totals before scratch is reused
        return exclusive, total
    scratch[0, tid] = v
    cuda.syncthreads()  # RAW: every value is in shared memory before step 1
    src = 0
    offset = 1
    while offset < THREADS:
        if tid >= offset:
            scratch[1 - src, tid] = scratch[src, tid - offset] + scratch[src, tid]
        else:
            scratch[1 - src, tid] = scratch[src, tid]
        cuda.syncthreads()  # RAW: this step is written before the next reads it (WAR: the other buffer)
        src = 1 - src
        offset *= 2
    exclusive = scratch[src, tid - 1] if tid > 0 else zero
    total = scratch[src, THREADS - 1]
    cuda.syncthreads()  # WAR: every thread has read its result before scratch is reused
    return exclusive, total


@tile_device
def lookback(tile, aggregate, flags, aggregates, inclusives, epoch, ctl, vals, zero):
    """The decoupled look-back (Merrill & Garland, 2016): the sum of all tiles before ``tile``.

    Every thread must call it, with its tile's total ``aggregate``. Thread 0 first publishes the
    aggregate (flag A, "my own total is known"); tile 0 publishes its inclusive prefix at once
    (flag P, "the total of everything up to my end is known"). Then the block looks at the
    ``WINDOW`` tiles before it, nearest first: all flags read at once, one per thread (atomic reads:
    L2, never a stale L1 copy). If a tile has published nothing yet, it reads the window again;
    otherwise it adds the aggregates up to the nearest P (and that P's inclusive prefix) and stops,
    or adds all ``WINDOW`` aggregates and moves the window further back. A tile never waits for a
    predecessor's *look-back* to finish, only for it to have loaded and reduced its data: that is
    what makes the look-back "decoupled". At the end thread 0 publishes its own inclusive prefix.

    The fences: value first, ``threadfence()``, then the flag (release); flag first,
    ``threadfence()``, then the value (acquire). ``epoch`` (one per call) makes ``2*epoch + 1`` mean
    A and ``2*epoch + 2`` mean P in this call, so old flags never need clearing.
    """
    tid = cuda.threadIdx.x
    flag_a = 2 * epoch + 1
    flag_p = 2 * epoch + 2
    if tid == 0:
        if tile == 0:
            inclusives[0] = aggregate
            cuda.threadfence()  # release: the inclusive prefix is visible before its flag
            cuda.atomic.exch(flags, 0, flag_p)
        else:
            aggregates[tile] = aggregate
            cuda.threadfence()  # release: the aggregate is visible before its flag
            cuda.atomic.exch(flags, tile, flag_a)
    prefix = zero
    end = tile  # the window covers tiles end - 1, end - 2, ..., end - WINDOW
    while end > 0:
        if tid < WINDOW:
            j = end - 1 - tid
            ctl[tid] = cuda.atomic.add(flags, j, 0) if j >= 0 else flag_p  # before tile 0: "P, value 0"
        cuda.syncthreads()  # RAW: the window's flags are in shared memory
        if tid == 0:
            k = 0
            state = 0  # 0: someone has published nothing yet (look again), 1: a P at k, 2: only A's
            while k < WINDOW:
                f = ctl[k]
                if f < flag_a:
                    break
                if f >= flag_p:
                    state = 1
                    break
                k += 1
            if k == WINDOW:
                state = 2
                k = WINDOW - 1
            ctl[WINDOW] = state
            ctl[WINDOW + 1] = k
        cuda.syncthreads()  # RAW: the decision is in shared memory
        state = ctl[WINDOW]
        last = ctl[WINDOW + 1]
        if state != 0 and tid <= last:
            j = end - 1 - tid
            v = zero
            if j >= 0:
                cuda.threadfence()  # acquire: read the value only after the flag that announced it
                if state == 1 and tid == last:
                    v = cuda.atomic.add(inclusives, j, zero)
                else:
                    v = cuda.atomic.add(aggregates, j, zero)
            vals[tid] = v
        cuda.syncthreads()  # RAW: the values are in shared memory (WAR: ctl was read before the next window)
        if state != 0:
            for m in range(last + 1):
                prefix += vals[m]
            if state == 1:
                end = 0
            else:
                end -= WINDOW
        cuda.syncthreads()  # WAR: every thread has read vals before the next window overwrites it
    if tid == 0 and tile > 0:
        inclusives[tile] = prefix + aggregate
        cuda.threadfence()  # release: the inclusive prefix is visible before its flag
        cuda.atomic.exch(flags, tile, flag_p)
    return prefix


@tile_device
def take_tile_number(counter, ctl):
    """Thread 0 takes the next tile number (an atomic on ``counter``); every thread gets it.

    Tiles are numbered in the order blocks start, so a block only ever waits for tiles whose blocks
    are already running. The block that takes the last number resets the counter for the next call.
    """
    if cuda.threadIdx.x == 0:
        t = cuda.atomic.add(counter, 0, 1)
        ctl[0] = t
        if t == cuda.gridDim.x - 1:
            cuda.atomic.exch(counter, 0, 0)
    cuda.syncthreads()  # RAW: the number is in shared memory before anyone reads it
    t = ctl[0]
    cuda.syncthreads()  # WAR: everyone has read it before ctl is reused
    return t


@tile_kernel
def tile_scan_lookback(x, out, flags, aggregates, inclusives, counter, epoch, inclusive):
    """The single-pass scan: each block scans one tile of ``TILE`` elements and finds its prefix by look-back.

    Reads every element once and writes it once (8 bytes per 4-byte element), one launch.
    1. a tile number (:func:`take_tile_number`); 2. the tile, ``ITEMS`` consecutive elements per
    thread (:func:`load_tile`); 3. each thread adds its items; 4. a block scan of the thread totals
    (:func:`block_exclusive_scan`); 5. the sum of all earlier tiles (:func:`lookback`); 6. each
    thread scans its items from its prefix; 7. the tile goes back out (:func:`store_tile`).
    ``out`` may be ``x`` (in place). ``inclusive`` is 1 or 0.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    ctl = cuda.shared.array(CONTROL, int32)
    vals = cuda.shared.array(WINDOW, T)
    items = cuda.local.array(ITEMS, T)
    tile = take_tile_number(counter, ctl)
    n = np.uint64(x.size)
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    total = T(0)
    for j in range(ITEMS):
        total += items[j]
    before, tile_total = block_exclusive_scan(total, scratch, T(0))
    run = lookback(tile, tile_total, flags, aggregates, inclusives, epoch, ctl, vals, T(0)) + before
    if inclusive:
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
    else:
        for j in range(ITEMS):
            v = items[j]
            items[j] = run
            run += v
    store_tile(out, base, n, s, items)


@tile_device
def warp_votes(waiting, inclusive, votes):
    """``(ballot(waiting), ballot(inclusive))`` over warp 0's lanes (bit k: lane k), returned to every caller.

    On a GPU (``SHUFFLE``) two ``cuda.ballot_sync`` of warp 0, which alone calls it. Under the simulator
    (no warp intrinsics) warp 0 writes its votes to the shared array ``votes`` (2 x WARP int32) between
    two block barriers, so every thread of the block must call it; all of them get warp 0's votes and
    take warp 0's decisions in step.
    """
    if SHUFFLE:
        return cuda.ballot_sync(FULL_MASK, waiting), cuda.ballot_sync(FULL_MASK, inclusive)
    tid = cuda.threadIdx.x
    if tid < WARP:
        votes[0, tid] = 1 if waiting else 0
        votes[1, tid] = 1 if inclusive else 0
    cuda.syncthreads()  # RAW: warp 0's votes are in shared memory
    a = 0
    b = 0
    for k in range(WARP):
        a |= int(votes[0, k]) << k
        b |= int(votes[1, k]) << k
    cuda.syncthreads()  # WAR: every thread has read the votes before the next window's overwrite them
    return uint32(a), uint32(b)


@tile_device
def warp_total(v, vals):
    """The sum of ``v`` over warp 0's lanes, returned to every caller.

    On a GPU (``SHUFFLE``) a butterfly of five ``cuda.shfl_xor_sync`` (warp 0 alone calls it): after
    the step with distance k, lanes i and i ^ k hold the same sum (addition is commutative, in floating
    point too), so every lane ends with the same bits. Under the simulator through the shared array
    ``vals`` (WARP elements) between two block barriers: every thread of the block must call it. ``v``
    is of the element type ``T``.
    """
    if SHUFFLE:
        for k in (16, 8, 4, 2, 1):
            v = T(v + cuda.shfl_xor_sync(FULL_MASK, v, k))  # T(): Numba adds int32s in int64 (two words a shuffle)
        return v
    tid = cuda.threadIdx.x
    if tid < WARP:
        vals[tid] = v
    cuda.syncthreads()  # RAW: warp 0's values are in shared memory
    total = vals[0]
    for k in range(1, WARP):
        total += vals[k]
    cuda.syncthreads()  # WAR: every thread has read the values before the next window's overwrite them
    return total


@tile_device
def lookback_warp(tile, aggregate, descriptors, epoch, votes, vals, relaxed):
    """The decoupled look-back as CUB does it (one 64-bit word per tile, one warp, no fence): the tiles before ``tile``.

    Every thread must call it, with its tile's total ``aggregate``; every thread gets the prefix.
    ``descriptors[t]`` is tile t's status and value in one uint64 word (:func:`pack_descriptor`):
    status ``2*epoch + 1`` (A: its aggregate), ``2*epoch + 2`` (P: its inclusive prefix), anything
    smaller: nothing yet in this call (old epochs' words never need clearing).

    1. Thread 0 publishes (A, aggregate), tile 0 (P, aggregate), with one 64-bit atomic exchange.
    2. Warp 0 alone looks back, 32 tiles per window, nearest first: lane k reads the word of tile
       ``end - 1 - k`` (``load_relaxed`` if ``relaxed``, else a 64-bit atomic read; lanes before tile 0
       count as "P, value 0"); one ballot finds the lanes with nothing yet, one the lanes with a P.
       If a lane nearer than the nearest P (any lane, without a P) has nothing yet, the warp reads the
       window again; otherwise a shuffle reduction adds the values of the lanes up to the nearest P
       (all 32 without one), and the warp stops (P found) or moves the window 32 tiles back.
    3. Thread 0 publishes (P, prefix + aggregate); ONE ``syncthreads()`` hands the prefix to the block.
    No block barrier inside the loop, and no serial scan of the flags.

    Why no fence: a status and its value are written by one 64-bit atomic and read by one 64-bit
    strong load of the same aligned word (single-copy atomic), so a reader never sees a status without
    its value, and nothing else the publisher wrote is read through the status: relaxed operations at
    GPU scope suffice (CUB's are relaxed too). Under the simulator (no warp intrinsics, ``SHUFFLE``
    false) the whole block runs the loop and the ballots and the reduction go through the shared arrays
    ``votes`` (2 x WARP int32) and ``vals`` (WARP elements), deciding from warp 0's lanes only, so
    every thread takes the same path. Values are of the element type ``T``.
    """
    tid = cuda.threadIdx.x
    lane = int32(tid % WARP)
    status_a = 2 * epoch + 1
    status_p = 2 * epoch + 2
    zero = T(0)
    prefix = zero
    if tid < WARP or not SHUFFLE:
        if tid == 0:
            first = status_p if tile == 0 else status_a
            cuda.atomic.exch(descriptors, tile, pack_descriptor(first, aggregate, zero))
        end = int32(tile)  # the window covers tiles end - 1 (lane 0), end - 2 (lane 1), ..., end - WARP
        while end > 0:
            j = int32(end - 1 - lane)
            status = status_p  # before tile 0: "P, value 0"
            value = zero
            if j >= 0 and tid < WARP:
                if relaxed:
                    word = load_relaxed(descriptors, j)
                else:
                    word = cuda.atomic.add(descriptors, j, uint64(0))
                status, value = unpack_descriptor(word, zero)
            waiting, inclusive = warp_votes(status < status_a, status >= status_p, votes)
            first_waiting = cuda.ffs(waiting)  # 1 + the nearest lane with nothing yet (0: none)
            first_p = cuda.ffs(inclusive)  # 1 + the nearest lane with a P (0: none)
            if first_waiting != 0 and (first_p == 0 or first_waiting < first_p):
                continue  # a tile nearer than the nearest P has published nothing yet: read the window again
            last = first_p - 1 if first_p != 0 else WARP - 1
            prefix = T(prefix + warp_total(value if lane <= last else zero, vals))
            if first_p != 0:
                break
            end = int32(end - WARP)
        if tid == 0:
            if tile > 0:
                cuda.atomic.exch(descriptors, tile, pack_descriptor(status_p, prefix + aggregate, zero))
            vals[0] = prefix  # (the simulator's last warp_total ended with a barrier: vals is free)
    cuda.syncthreads()  # RAW: the prefix is in shared memory (the look-back's one block barrier)
    return vals[0]


@tile_device
def scan_tile_warp_lookback(x, out, descriptors, counter, epoch, inclusive, relaxed):
    """The body of :func:`tile_scan_warp_lookback`: :func:`tile_scan_lookback` with :func:`lookback_warp`."""
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    ctl = cuda.shared.array(CONTROL, int32)
    votes = cuda.shared.array((2, WARP), int32)
    vals = cuda.shared.array(WARP, T)
    items = cuda.local.array(ITEMS, T)
    tile = take_tile_number(counter, ctl)
    n = np.uint64(x.size)
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    total = T(0)
    for j in range(ITEMS):
        total += items[j]
    before, tile_total = block_exclusive_scan(total, scratch, T(0))
    run = lookback_warp(tile, tile_total, descriptors, epoch, votes, vals, relaxed) + before
    if inclusive:
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
    else:
        for j in range(ITEMS):
            v = items[j]
            items[j] = run
            run += v
    store_tile(out, base, n, s, items)


@tile_kernel
def tile_scan_warp_lookback(x, out, descriptors, counter, epoch, inclusive):
    """The single pass with CUB's look-back (:func:`lookback_warp`): the chapter's fastest scan, the step after
    :func:`tile_scan_lookback`.

    The same tile work (tile number, :func:`load_tile`, block scan, :func:`store_tile`); the look-back
    reads one uint64 word per tile (``descriptors``, status and value together, zeros before the first
    call) with ``ld.relaxed.gpu``, in warp 0 only, and the block meets at one barrier for it instead of
    four per window. Built with 128 threads x 32 items on a GPU (:data:`WARP_LOOKBACK_TILE`). ``out`` may
    be ``x``. ``inclusive`` is 1 or 0.
    """
    scan_tile_warp_lookback(x, out, descriptors, counter, epoch, inclusive, True)


@tile_kernel
def tile_scan_warp_lookback_atomic(x, out, descriptors, counter, epoch, inclusive):
    """:func:`tile_scan_warp_lookback` with 64-bit atomic reads (``atomic.add(d, j, 0)``): what the reads cost."""
    scan_tile_warp_lookback(x, out, descriptors, counter, epoch, inclusive, False)


@tile_kernel
def tile_reduce(x, sums):
    """Reduce-then-scan with tiles, kernel 1: ``sums[b]`` = the total of tile ``b`` (reads 4 bytes per element).

    No transpose needed: each thread adds what it loads (16-byte loads on whole tiles).
    """
    scratch = cuda.shared.array((2, THREADS), T)
    tid = cuda.threadIdx.x
    n = np.uint64(x.size)
    base = np.uint64(cuda.blockIdx.x) * np.uint64(TILE)
    total = T(0)
    if VECTOR and base + np.uint64(TILE) <= n:
        first = (tid // WARP) * (WARP * ITEMS) + 4 * (tid % WARP)
        for k in range(ITEMS // 4):
            a, b, c, d = load4(x, (base + np.uint64(first + 4 * WARP * k)) // np.uint64(4))
            total += (a + b) + (c + d)
    else:
        for k in range(ITEMS):
            g = base + np.uint64(tid + k * THREADS)
            if g < n:
                total += x[g]
    _, tile_total = block_exclusive_scan(total, scratch, T(0))
    if tid == 0:
        sums[cuda.blockIdx.x] = tile_total


@tile_kernel
def tile_scan_single_block(a):
    """Reduce-then-scan with tiles, kernel 2: ONE block scans ``a`` in place (inclusive), a tile at a time.

    ``a`` holds one total per tile of the data (thousands, not millions): one block walks over it
    with a running carry.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    items = cuda.local.array(ITEMS, T)
    n = np.uint64(a.size)
    carry = T(0)
    base = np.uint64(0)
    while base < n:
        load_tile(a, base, n, s, items)
        total = T(0)
        for j in range(ITEMS):
            total += items[j]
        before, tile_total = block_exclusive_scan(total, scratch, T(0))
        run = carry + before
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
        store_tile(a, base, n, s, items)
        carry += tile_total
        base += np.uint64(TILE)


@tile_kernel
def tile_scan_offsets(x, out, tile_prefix, inclusive):
    """Reduce-then-scan with tiles, kernel 3: scan tile ``b`` starting from ``tile_prefix[b - 1]``.

    ``tile_prefix`` is the inclusive scan of the tiles' totals (kernels 1 and 2). Reads and writes
    every element once: with kernel 1's read, 12 bytes per 4-byte element in all.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), T)
    items = cuda.local.array(ITEMS, T)
    n = np.uint64(x.size)
    tile = cuda.blockIdx.x
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    total = T(0)
    for j in range(ITEMS):
        total += items[j]
    before, _ = block_exclusive_scan(total, scratch, T(0))
    run = before
    if tile > 0:
        run += tile_prefix[tile - 1]
    if inclusive:
        for j in range(ITEMS):
            run += items[j]
            items[j] = run
    else:
        for j in range(ITEMS):
            v = items[j]
            items[j] = run
            run += v
    store_tile(out, base, n, s, items)


@tile_kernel
def tile_compact(x, out, count, threshold, flags, aggregates, inclusives, counter, epoch):
    """Stream compaction in one pass: keep the elements ``> threshold``, in order; ``count[0]`` = how many.

    The single-pass scan of the flags ``x > threshold`` (one int32 count per thread, a block scan,
    the look-back on the tiles' counts) gives each kept element its address. The block packs its kept
    elements in shared memory and writes them out in one coalesced run. ``out`` needs room for all of
    ``x``.
    """
    s = cuda.shared.array(PADDED_TILE, T)
    scratch = cuda.shared.array((2, THREADS), int32)
    ctl = cuda.shared.array(CONTROL, int32)
    vals = cuda.shared.array(WINDOW, int32)
    items = cuda.local.array(ITEMS, T)
    tid = cuda.threadIdx.x
    tile = take_tile_number(counter, ctl)
    n = np.uint64(x.size)
    base = np.uint64(tile) * np.uint64(TILE)
    load_tile(x, base, n, s, items)
    first = base + np.uint64(tid * ITEMS)
    kept = 0
    for j in range(ITEMS):
        if items[j] > threshold and first + np.uint64(j) < n:
            kept += 1
    before, tile_kept = block_exclusive_scan(int32(kept), scratch, int32(0))
    start = lookback(tile, tile_kept, flags, aggregates, inclusives, epoch, ctl, vals, int32(0))
    pos = before  # (s is free: load_tile's reads are behind the barriers of the block scan)
    for j in range(ITEMS):
        if items[j] > threshold and first + np.uint64(j) < n:
            s[pad(pos)] = items[j]
            pos += 1
    cuda.syncthreads()  # RAW: the tile's kept elements are packed in shared memory before the stores
    e = tid
    while e < tile_kept:
        out[start + e] = s[pad(e)]
        e += THREADS
    if tid == 0 and tile == cuda.gridDim.x - 1:
        count[0] = start + tile_kept


@tile_device
def digit_of(key, shift):
    """The ``RADIX_BITS``-bit digit of ``key`` starting at bit ``shift``."""
    return int32((key >> uint32(shift)) & uint32(RADIX - 1))


@tile_device
def count_digits(items, valid, shift, counts):
    """Each thread counts its items' digits in its own column of ``counts`` ((RADIX + 1) x THREADS, digit-major).

    Items past the end of the data (``tid*ITEMS + j >= valid``) count as the extra digit ``RADIX``,
    after every real one. A thread touches only its own column: no atomics, no bank conflicts.
    """
    tid = cuda.threadIdx.x
    for d in range(RADIX + 1):
        counts[pad(d * THREADS + tid)] = 0
    for j in range(ITEMS):
        d = digit_of(items[j], shift) if tid * ITEMS + j < valid else RADIX
        counts[pad(d * THREADS + tid)] += 1


@tile_device
def scan_counts(counts, scratch):
    """Exclusive scan of all (RADIX + 1) x THREADS counters in digit-major order.

    Afterwards ``counts[d][t]`` = how many items of the tile have a smaller digit, plus how many of
    digit ``d`` belong to threads before ``t``: where thread ``t``'s first item of digit ``d`` goes in
    the tile sorted by digit. Each thread scans RADIX + 1 consecutive counters, then one block scan.
    """
    tid = cuda.threadIdx.x
    cuda.syncthreads()  # RAW: every thread's column is counted before anyone scans across columns
    first = tid * (RADIX + 1)
    total = 0
    for k in range(RADIX + 1):
        total += counts[pad(first + k)]
    before, _ = block_exclusive_scan(int32(total), scratch, int32(0))
    run = before
    for k in range(RADIX + 1):
        c = counts[pad(first + k)]
        counts[pad(first + k)] = run
        run += c
    cuda.syncthreads()  # RAW: the scanned counters are in shared memory before anyone reads another thread's


@tile_kernel
def radix_upsweep(keys, hist, shift):
    """LSD radix sort, kernel 1 of a pass: each tile counts its keys per digit: ``hist[d * tiles + tile]``.

    Digit-major, so one exclusive scan of ``hist`` gives every (digit, tile) its place in the output.
    """
    s = cuda.shared.array(PADDED_TILE, uint32)
    counts = cuda.shared.array(PADDED_COUNTS, int32)
    scratch = cuda.shared.array((2, THREADS), int32)
    items = cuda.local.array(ITEMS, uint32)
    tid = cuda.threadIdx.x
    tile = cuda.blockIdx.x
    n = np.uint64(keys.size)
    base = np.uint64(tile) * np.uint64(TILE)
    valid = int32(min(n - base, np.uint64(TILE)))
    load_tile(keys, base, n, s, items)
    count_digits(items, valid, shift, counts)
    scan_counts(counts, scratch)
    d = tid
    while d < RADIX:
        hist[d * cuda.gridDim.x + tile] = counts[pad((d + 1) * THREADS)] - counts[pad(d * THREADS)]
        d += THREADS


@tile_kernel
def radix_downsweep(keys, out, hist_scanned, shift):
    """LSD radix sort, kernel 3 of a pass: each tile sorts itself by digit in shared memory, then scatters.

    The counts give every item its rank in the tile sorted by digit (stable: items keep their order
    within a digit); the sorted tile is written out digit by digit, each digit's run starting at
    ``hist_scanned[d * tiles + tile]``: long runs of consecutive addresses, so the writes coalesce.
    """
    s = cuda.shared.array(PADDED_TILE, uint32)
    counts = cuda.shared.array(PADDED_COUNTS, int32)
    scratch = cuda.shared.array((2, THREADS), int32)
    digit_start = cuda.shared.array(RADIX, int32)
    destination = cuda.shared.array(RADIX, int32)
    items = cuda.local.array(ITEMS, uint32)
    ranks = cuda.local.array(ITEMS, int32)
    tid = cuda.threadIdx.x
    tile = cuda.blockIdx.x
    n = np.uint64(keys.size)
    base = np.uint64(tile) * np.uint64(TILE)
    valid = int32(min(n - base, np.uint64(TILE)))
    load_tile(keys, base, n, s, items)
    count_digits(items, valid, shift, counts)
    scan_counts(counts, scratch)
    d = tid
    while d < RADIX:
        digit_start[d] = counts[pad(d * THREADS)]
        destination[d] = hist_scanned[d * cuda.gridDim.x + tile]
        d += THREADS
    cuda.syncthreads()  # WAR: the digit starts (column 0) are read before thread 0 advances its counters
    for j in range(ITEMS):
        dj = digit_of(items[j], shift) if tid * ITEMS + j < valid else RADIX
        r = counts[pad(dj * THREADS + tid)]
        counts[pad(dj * THREADS + tid)] = r + 1
        ranks[j] = r
    for j in range(ITEMS):  # (s is free: load_tile's reads are behind scan_counts' barriers)
        s[pad(ranks[j])] = items[j]
    cuda.syncthreads()  # RAW: the tile is sorted in s, digit_start and destination are written
    e = tid
    while e < valid:
        key = s[pad(e)]
        d = digit_of(key, shift)
        out[destination[d] + e - digit_start[d]] = key
        e += THREADS


@dataclass(frozen=True)
class TileConfig:
    """One build of the tiled kernels: element type, threads per block, items per thread, and options.

    ``shuffle``: block scans with warp shuffles (GPU only) instead of shared memory;
    ``vector``: 16-byte loads and stores on whole tiles; ``radix_bits``: digit width of the radix
    kernels.
    """

    dtype: np.dtype
    threads: int
    items: int
    shuffle: bool
    vector: bool
    radix_bits: int = 4

    @property
    def tile(self) -> int:
        """Elements per tile (per block): ``threads * items``."""
        return self.threads * self.items


class TileKernels:
    """The tiled family compiled for one :class:`TileConfig` (attributes: the kernels, e.g. ``.tile_scan_lookback``)."""

    def __init__(self, config: TileConfig) -> None:
        self.config = config
        radix = 1 << config.radix_bits
        counts = (radix + 1) * config.threads
        names = dict(globals())
        names.update(T=_NUMBA_TYPES[config.dtype], THREADS=config.threads, ITEMS=config.items, TILE=config.tile,
                     PADDED_TILE=config.tile + (config.tile >> LOG_BANKS), WINDOW=min(WARP, config.threads),
                     CONTROL=min(WARP, config.threads) + 2,
                     SHUFFLE=config.shuffle, VECTOR=config.vector, RADIX_BITS=config.radix_bits, RADIX=radix,
                     PADDED_COUNTS=counts + (counts >> LOG_BANKS))
        self._names = names
        for name, (kind, func) in _TILE_FUNCTIONS.items():
            clone = pytypes.FunctionType(func.__code__, names, func.__name__, func.__defaults__, func.__closure__)
            clone.__doc__, clone.__module__, clone.__qualname__ = func.__doc__, func.__module__, func.__qualname__
            if kind == "device":
                names[name] = (cuda.jit(device=True)(clone) if backend.is_simulator()
                               else cuda.jit(device=True, forceinline=True)(clone))
            else:
                names[name] = cuda.jit(clone)

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in _TILE_FUNCTIONS:
            raise AttributeError(name)
        return self._names[name]


_TILE_CACHE: dict[TileConfig, TileKernels] = {}
#: Tile shape on a GPU (threads per block, items per thread) and under the simulator (small: it is slow).
GPU_TILE = (256, 16)
SIM_TILE = (32, 4)
#: The GPU tile of the single pass with the warp look-back (:func:`tile_scan_warp_lookback`): 128 threads x 32
#: items, the fastest shape of the H200 sweep (``bench/tuning/scan.py``); the simulator uses :data:`SIM_TILE`.
WARP_LOOKBACK_TILE = (128, 32)
ITEMS_CHOICES = (4, 8, 16, 32)


def tile_shared_bytes(threads: int, items: int, itemsize: int = 4) -> int:
    """Static shared memory of the tiled scan kernels for one tile shape: the padded tile, the block scan's
    scratch (2 x threads) and the look-back's window (a few hundred bytes)."""
    tile = threads * items
    return itemsize * (tile + (tile >> LOG_BANKS) + 2 * threads + 2 * WARP) + 4 * (3 * WARP + 2)


def tile_kernels(dtype=np.int32, threads: int | None = None, items: int | None = None, *,
                 shuffle: bool | None = None, vector: bool = True, radix_bits: int = 4) -> TileKernels:
    """The tiled kernels built for one element type and tile shape (cached).

    Defaults: 256 threads x 16 items (:data:`GPU_TILE`) with warp shuffles on a GPU; 32 x 4 with
    shared-memory block scans under the simulator (which has no shuffles). ``threads`` must be a power of
    two from 32 to 1024, ``items`` one of 4, 8, 16, 32, and the tile must fit in a block's 48 KB of static
    shared memory (:func:`tile_shared_bytes`: up to 8,192 elements of 4 bytes).

    Raises:
        LaunchConfigError: a tile shape the kernels cannot use.
        GPUOnlyError: ``shuffle=True`` under the simulator.
    """
    dtype = np.dtype(dtype)
    if dtype not in _NUMBA_TYPES:
        raise ArrayArgumentError(f"the tiled kernels work on int32, uint32 or float32, got {dtype}: convert with "
                                 ".astype(np.int32) or .astype(np.float32)")
    default = SIM_TILE if backend.is_simulator() else GPU_TILE
    threads = validate.threads_per_block(default[0] if threads is None else threads)
    if threads % WARP or threads & (threads - 1):
        raise LaunchConfigError(f"the tiled kernels need a power-of-two number of threads from 32 to 1024 (whole "
                                f"warps), got {threads}: use 128 or 256")
    items = validate.integer(default[1] if items is None else items, "items", minimum=1)
    if items not in ITEMS_CHOICES:
        raise LaunchConfigError(f"items per thread must be one of {ITEMS_CHOICES} (whole 16-byte vectors, and "
                                f"bank-conflict-free padding), got {items}")
    if tile_shared_bytes(threads, items, dtype.itemsize) > validate.DEFAULT_SHARED_PER_BLOCK:
        raise LaunchConfigError(f"a tile of {threads} threads x {items} items needs "
                                f"{tile_shared_bytes(threads, items, dtype.itemsize):,} bytes of shared memory per "
                                f"block, more than the {validate.DEFAULT_SHARED_PER_BLOCK:,} a block gets: use fewer "
                                f"items per thread or fewer threads (tiles of up to 8,192 four-byte elements fit)")
    radix_bits = validate.integer(radix_bits, "radix_bits", minimum=1, maximum=8)
    if shuffle is None:
        shuffle = backend.is_gpu()
    if shuffle:
        backend.require_gpu("a block scan with warp shuffles (shuffle=True)",
                            because="uses cuda.shfl_up_sync(), which Numba's CUDA simulator does not have",
                            instead="Leave shuffle=None to get shared-memory block scans here.")
    config = TileConfig(dtype, threads, items, bool(shuffle), bool(vector), radix_bits)
    if config not in _TILE_CACHE:
        _TILE_CACHE[config] = TileKernels(config)
    return _TILE_CACHE[config]
