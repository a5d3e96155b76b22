"""Chapter "Stencils, halos and connected components", its second half: connected-component labelling.

Threshold an image and give every 4-connected component one label. Two algorithms, both on the GPU:

* **label propagation** (``ccl_init``, ``ccl_propagate``, :class:`LabelPropagation`): every pixel takes the
  smallest label among itself and its neighbours, step after step, until no label changes; the number of steps
  is the longest path inside a component (a spiral needs one step per pixel of its path);
* **union-find** (``uf_init``, ``uf_merge``, ``uf_compress``, :class:`UnionFind`): every pixel links its root
  to its left and upper neighbours' roots with an atomic minimum, ``find_root`` halving paths as it walks, then
  one pass writes each pixel's root: three launches whatever the shape. ``find_root_plain`` and the ``_plain``
  kernels are the same without path compression.

Both label every component with 1 + the flat index ``i * nx + j`` of its first pixel in raster order (background
0), so both give identical arrays; :func:`relabel_sequential` turns them into ``scipy.ndimage.label``'s
numbering. The test images (:func:`snake_mask`, :func:`spiral_mask`, :func:`rows_mask`, :func:`random_mask`) are
here too. The stencils of the chapter's first half are in :mod:`labhelpers.kernels.stencil`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from .. import backend, validate
from ..arrays import to_device
from ..errors import ArrayArgumentError
from ..launch import grid_2d
from .stencil import check_block_2d

@cuda.jit
def ccl_init(mask, labels):
    """Every foreground pixel starts with its own label, 1 + its flat index; background gets 0."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx:
        labels[i, j] = i * nx + j + 1 if mask[i, j] != 0 else 0


@cuda.jit
def ccl_propagate(labels_in, labels_out, changed):
    """One propagation step: every foreground pixel takes the smallest label among itself and its 4 neighbours.

    Reads ``labels_in``, writes ``labels_out`` (ping-pong, like Jacobi): the result does not
    depend on the order in which threads run. A pixel whose label drops sets ``changed[0] = 1``
    (many threads may write the same 1: harmless). The labels stop changing when every
    component holds its smallest initial label, which takes as many steps as the longest
    distance, along the component, from that pixel.
    """
    j, i = cuda.grid(2)
    ny, nx = labels_in.shape
    if i < ny and j < nx:
        old = labels_in[i, j]
        best = old
        if old != 0:  # background stays 0 and is never a neighbour's candidate
            if i > 0:
                n = labels_in[i - 1, j]
                if n != 0 and n < best:
                    best = n
            if i < ny - 1:
                n = labels_in[i + 1, j]
                if n != 0 and n < best:
                    best = n
            if j > 0:
                n = labels_in[i, j - 1]
                if n != 0 and n < best:
                    best = n
            if j < nx - 1:
                n = labels_in[i, j + 1]
                if n != 0 and n < best:
                    best = n
            if best < old:
                changed[0] = 1
        labels_out[i, j] = best


@cuda.jit(device=True)
def find_root(parent, a):
    """The root of ``a``'s tree, halving the path on the way (every visited pixel skips to its grandparent).

    Path halving: a pixel ``a`` with parent ``p`` and grandparent ``gp`` gets ``gp`` as its parent,
    then the walk continues from ``gp``; a later find from ``a`` makes half the hops. The write is a
    compare-and-swap from ``p`` to ``gp``: it happens only if ``parent[a]`` still is ``p``, so it never
    undoes a link another thread made meanwhile (a union's atomic minimum). The loads of ``parent`` are
    plain loads racing with other threads' atomics; here that is harmless because parents only decrease:
    a stale ``gp`` was an ancestor of ``a`` when it was read (a concurrent union may have re-linked ``p``
    since), and ``gp < p``, so chains still end, roots stay roots, and the next union's retry sees the rest.
    """
    p = parent[a]
    while p != a:
        gp = parent[p]
        if gp != p:
            cuda.atomic.cas(parent, a, p, gp)  # halve: a skips p, unless another thread moved parent[a]
        a = gp
        p = parent[a]
    return a


@cuda.jit(device=True)
def union(parent, a, b):
    """Merge the trees of pixels ``a`` and ``b``: the larger root gets the smaller as parent (atomic minimum).

    The root ``b`` found may be stale: another thread may have linked it to ``c`` meanwhile. Then the
    atomic minimum returns ``c`` (not ``b``), and if ``a < c`` it has also replaced ``b -> c`` by
    ``b -> a``, detaching ``b`` from ``c``'s tree for a moment; the loop retries with ``c`` and joins that
    tree too, so the component is whole when the loop ends. Parents only ever decrease, so every pointer
    chain ends and the loop terminates.
    """
    done = False
    while not done:
        a = find_root(parent, a)
        b = find_root(parent, b)
        if a < b:
            old = cuda.atomic.min(parent, b, a)
            done = old == b
            b = old
        elif b < a:
            old = cuda.atomic.min(parent, a, b)
            done = old == a
            a = old
        else:
            done = True


@cuda.jit(device=True)
def find_root_plain(parent, a):
    """The first version of :func:`find_root`, without path compression: follow the pointers, change nothing."""
    p = parent[a]
    while p != a:
        a = p
        p = parent[a]
    return a


@cuda.jit(device=True)
def union_plain(parent, a, b):
    """:func:`union` with :func:`find_root_plain` (kept to measure what path halving saves)."""
    done = False
    while not done:
        a = find_root_plain(parent, a)
        b = find_root_plain(parent, b)
        if a < b:
            old = cuda.atomic.min(parent, b, a)
            done = old == b
            b = old
        elif b < a:
            old = cuda.atomic.min(parent, a, b)
            done = old == a
            a = old
        else:
            done = True


@cuda.jit
def uf_init(mask, parent):
    """Every foreground pixel is its own tree (``parent = flat index``); background gets -1."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx:
        me = i * nx + j
        parent[me] = me if mask[i, j] != 0 else -1


@cuda.jit
def uf_merge(mask, parent):
    """Each foreground pixel merges its tree with its left and upper neighbours' (when those are foreground)."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx and mask[i, j] != 0:
        me = i * nx + j
        if j > 0 and mask[i, j - 1] != 0:
            union(parent, me, me - 1)
        if i > 0 and mask[i - 1, j] != 0:
            union(parent, me, me - nx)


@cuda.jit
def uf_compress(mask, parent, labels):
    """Every foreground pixel's label is 1 + its root (the component's smallest flat index); background 0."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx:
        me = i * nx + j
        labels[i, j] = find_root(parent, me) + 1 if mask[i, j] != 0 else 0


@cuda.jit
def uf_merge_plain(mask, parent):
    """:func:`uf_merge` without path compression (finds follow the whole chain every time)."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx and mask[i, j] != 0:
        me = i * nx + j
        if j > 0 and mask[i, j - 1] != 0:
            union_plain(parent, me, me - 1)
        if i > 0 and mask[i - 1, j] != 0:
            union_plain(parent, me, me - nx)


@cuda.jit
def uf_compress_plain(mask, parent, labels):
    """:func:`uf_compress` without path compression."""
    j, i = cuda.grid(2)
    ny, nx = mask.shape
    if i < ny and j < nx:
        me = i * nx + j
        labels[i, j] = find_root_plain(parent, me) + 1 if mask[i, j] != 0 else 0


def _check_mask(mask) -> tuple[int, int]:
    validate.array(mask, "mask", ndim=2)
    if np.dtype(mask.dtype) not in (np.dtype(np.bool_), np.dtype(np.uint8)):
        raise ArrayArgumentError(
            f"mask has dtype {np.dtype(mask.dtype)}: pass a boolean or uint8 image, e.g. "
            f"(image > threshold) or mask.astype(np.uint8).")
    if 0 in mask.shape:
        raise ArrayArgumentError(f"mask has shape {tuple(mask.shape)}: an image needs at least one pixel.")
    if mask.shape[0] * mask.shape[1] >= 2**31 - 1:
        raise ArrayArgumentError(f"mask has {mask.shape[0] * mask.shape[1]} pixels: int32 labels allow fewer "
                                 "than 2**31 - 1; label it in tiles.")
    return int(mask.shape[0]), int(mask.shape[1])


def _mask_device(mask):
    if isinstance(mask, np.ndarray):
        return cuda.to_device(np.ascontiguousarray(mask, dtype=np.uint8))
    if np.dtype(mask.dtype) == np.dtype(np.bool_) and hasattr(mask, "astype"):
        mask = mask.astype(np.uint8)  # CuPy
    return to_device(mask)


@dataclass
class LabelPropagation:
    """Label propagation on the device: init, then propagation steps until no label changes.

    The host checks the ``changed`` flags once every ``check_every`` steps (one small copy and
    a wait each time); the flags of the steps in between are kept, so the count of steps is exact
    whatever ``check_every`` is. Steps after the fixed point change nothing, so they are harmless.

    Args:
        mask: 2-D boolean or uint8 image (NumPy, CuPy or Numba device array), nonzero = foreground.
        block: threads per block (x, y).
        check_every: steps between two looks at the flags (1 under the simulator; 32 on a GPU).
        max_steps: give up after this many steps (default: pixels + 1, more than any image needs).
    """

    mask: Any
    block: tuple[int, int] = (32, 8)
    check_every: int | None = None
    max_steps: int | None = None
    steps: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.shape = _check_mask(self.mask)
        self.block = check_block_2d(self.block, "ccl")
        if self.check_every is None:
            self.check_every = 1 if backend.is_simulator() else 32
        self.check_every = validate.integer(self.check_every, "check_every", minimum=1)
        pixels = self.shape[0] * self.shape[1]
        self.max_steps = validate.integer(pixels + 1 if self.max_steps is None else self.max_steps, "max_steps",
                                          minimum=1)
        self._mask = _mask_device(self.mask)
        self._a = cuda.device_array(self.shape, dtype=np.int32)
        self._b = cuda.device_array(self.shape, dtype=np.int32)
        self._flags = cuda.device_array(self.check_every, dtype=np.int32)
        self._slots = [self._flags[k:k + 1] for k in range(self.check_every)]
        self._zeros = np.zeros(self.check_every, dtype=np.int32)
        self.grid = grid_2d(self.shape, self.block)

    def run(self) -> int:
        """Label from scratch; return the number of propagation steps (the last one changed nothing)."""
        grid, block = self.grid, self.block
        ccl_init[grid, block](self._mask, self._a)
        steps = 0
        while steps < self.max_steps:
            self._flags.copy_to_device(self._zeros)
            batch = min(self.check_every, self.max_steps - steps)
            for k in range(batch):
                ccl_propagate[grid, block](self._a, self._b, self._slots[k])
                self._a, self._b = self._b, self._a
            flags = self._flags.copy_to_host()[:batch]
            quiet = np.flatnonzero(flags == 0)
            if quiet.size:
                self.steps = steps + int(quiet[0]) + 1
                return self.steps
            steps += batch
        raise RuntimeError(f"label propagation did not converge in {self.max_steps} steps")

    @property
    def labels(self):
        """The device array of labels after :meth:`run`."""
        return self._a


#: The two finds of union-find: merge and compress kernels for each.
UF_FINDS = {"path halving": (uf_merge, uf_compress), "no compression": (uf_merge_plain, uf_compress_plain)}


@dataclass
class UnionFind:
    """Union-find labelling on the device: three launches whatever the image (init, merge, compress).

    Args:
        mask: 2-D boolean or uint8 image (NumPy, CuPy or Numba device array), nonzero = foreground.
        block: threads per block (x, y).
        find: ``"path halving"`` (the chapter's :func:`find_root`) or ``"no compression"``
            (:func:`find_root_plain`, kept for the comparison).
    """

    mask: Any
    block: tuple[int, int] = (32, 8)
    find: str = "path halving"

    def __post_init__(self) -> None:
        self.shape = _check_mask(self.mask)
        self.block = check_block_2d(self.block, "ccl")
        validate.choice(self.find, "find", list(UF_FINDS))
        self._merge, self._compress = UF_FINDS[self.find]
        self._mask = _mask_device(self.mask)
        self._parent = cuda.device_array(self.shape[0] * self.shape[1], dtype=np.int32)
        self._labels = cuda.device_array(self.shape, dtype=np.int32)
        self.grid = grid_2d(self.shape, self.block)

    def run(self) -> None:
        """Label from scratch (asynchronous on a GPU)."""
        grid, block = self.grid, self.block
        uf_init[grid, block](self._mask, self._parent)
        self._merge[grid, block](self._mask, self._parent)
        self._compress[grid, block](self._mask, self._parent, self._labels)

    @property
    def labels(self):
        """The device array of labels after :meth:`run`."""
        return self._labels


def label_propagation(mask, block: tuple[int, int] = (32, 8), check_every: int | None = None) -> tuple[np.ndarray, int]:
    """Label the 4-connected components of ``mask`` by propagation; returns ``(labels, steps)`` (NumPy labels)."""
    lp = LabelPropagation(mask, block, check_every)
    steps = lp.run()
    return lp.labels.copy_to_host(), steps


def label_union_find(mask, block: tuple[int, int] = (32, 8), find: str = "path halving") -> np.ndarray:
    """Label the 4-connected components of ``mask`` by union-find; returns the labels (NumPy int32)."""
    uf = UnionFind(mask, block, find)
    uf.run()
    return uf.labels.copy_to_host()


def propagate_reference(labels) -> tuple[np.ndarray, bool]:
    """NumPy specification of one :func:`ccl_propagate` step: ``(new labels, whether any label changed)``."""
    lab = np.asarray(labels)
    big = np.iinfo(np.int64).max
    work = np.where(lab == 0, big, lab.astype(np.int64))
    best = work.copy()
    best[1:, :] = np.minimum(best[1:, :], work[:-1, :])
    best[:-1, :] = np.minimum(best[:-1, :], work[1:, :])
    best[:, 1:] = np.minimum(best[:, 1:], work[:, :-1])
    best[:, :-1] = np.minimum(best[:, :-1], work[:, 1:])
    new = np.where(lab == 0, 0, best).astype(lab.dtype)
    return new, bool((new != lab).any())


def initial_labels(mask) -> np.ndarray:
    """NumPy specification of :func:`ccl_init`: 1 + flat index on the foreground, 0 on the background."""
    m = np.asarray(mask) != 0
    return np.where(m, np.arange(m.size, dtype=np.int64).reshape(m.shape) + 1, 0).astype(np.int32)


def propagation_steps_reference(mask, max_steps: int | None = None) -> tuple[np.ndarray, int]:
    """Label propagation in NumPy, counting steps exactly as :class:`LabelPropagation` does."""
    lab = initial_labels(mask)
    max_steps = lab.size + 1 if max_steps is None else max_steps
    for step in range(1, max_steps + 1):
        lab, changed = propagate_reference(lab)
        if not changed:
            return lab, step
    raise RuntimeError(f"no fixed point after {max_steps} steps")


def label_reference(mask) -> np.ndarray:
    """``scipy.ndimage.label`` (4-connectivity) renumbered to this module's convention (1 + first flat index)."""
    from scipy import ndimage  # SciPy is slow to import: only where a CPU yardstick needs it

    seq, _count = ndimage.label(np.asarray(mask) != 0)
    return min_index_labels(seq)


def min_index_labels(labels) -> np.ndarray:
    """Renumber any labelling so that each component is 1 + the flat index of its first pixel (0 stays 0)."""
    lab = np.asarray(labels)
    flat = lab.ravel()
    uniq, first = np.unique(flat, return_index=True)
    mapping = dict(zip(uniq.tolist(), (first + 1).tolist()))
    mapping[0] = 0
    lookup = np.vectorize(mapping.get, otypes=[np.int64])
    return lookup(lab).astype(np.int32) if lab.size else lab.astype(np.int32)


def relabel_sequential(labels) -> np.ndarray:
    """Renumber labels 1, 2, 3... in the order of their values, background 0 (``scipy.ndimage.label``'s numbering
    when the labels are this module's: a component's label grows with the raster position of its first pixel)."""
    lab = np.asarray(labels)
    uniq, inverse = np.unique(lab, return_inverse=True)
    if uniq.size and uniq[0] != 0:
        inverse = inverse + 1  # no background at all: numbering still starts at 1
    return inverse.reshape(lab.shape).astype(np.int32)


def same_partition(a, b) -> bool:
    """True when two labellings split the pixels into the same components (names may differ; 0 = background)."""
    a = np.asarray(a).ravel().astype(np.int64)
    b = np.asarray(b).ravel().astype(np.int64)
    if a.shape != b.shape or not np.array_equal(a == 0, b == 0):
        return False
    fa, fb = a[a != 0], b[b != 0]
    if fa.size == 0:
        return True
    pairs = np.unique(np.stack([fa, fb], axis=1), axis=0)
    return len(pairs) == len(np.unique(fa)) == len(np.unique(fb))


def snake_mask(ny: int, nx: int) -> np.ndarray:
    """A one-pixel-wide serpentine: every other row full, joined alternately at the right and the left end.

    One component whose path is about ``ny * nx / 2`` pixels long: label propagation needs that
    many steps (the worst case for it), union-find still three launches.
    """
    ny = validate.integer(ny, "ny", minimum=1)
    nx = validate.integer(nx, "nx", minimum=1)
    m = np.zeros((ny, nx), dtype=np.uint8)
    m[0::2, :] = 1
    for k, i in enumerate(range(1, ny, 2)):
        m[i, nx - 1 if k % 2 == 0 else 0] = 1
    return m


def spiral_mask(n: int) -> np.ndarray:
    """A one-pixel-wide square spiral from the top-left corner inwards, with one-pixel gaps: one long path.

    Its first pixel (the component's smallest label) is the outer end, so propagation has to
    walk the whole path, about ``n * n / 2`` pixels.
    """
    n = validate.integer(n, "n", minimum=1)
    m = np.zeros((n, n), dtype=np.uint8)
    r, c, dr, dc = 0, 0, 0, 1
    m[0, 0] = 1

    def free(rr: int, cc: int) -> bool:
        return 0 <= rr < n and 0 <= cc < n and not m[rr, cc]

    def can_move(dr_: int, dc_: int) -> bool:
        nr, nc = r + dr_, c + dc_
        if not free(nr, nc):
            return False
        # keep a one-pixel gap to earlier parts of the path: the cell beyond must not be on the path,
        # and no other path pixel may touch the new one
        beyond = (r + 2 * dr_, c + 2 * dc_)
        if 0 <= beyond[0] < n and 0 <= beyond[1] < n and m[beyond]:
            return False
        for sr, sc in ((nr + dc_, nc + dr_), (nr - dc_, nc - dr_)):
            if 0 <= sr < n and 0 <= sc < n and m[sr, sc]:
                return False
        return True

    while True:
        if can_move(dr, dc):
            r, c = r + dr, c + dc
            m[r, c] = 1
            continue
        dr, dc = dc, -dr  # turn right (clockwise)
        if can_move(dr, dc):
            r, c = r + dr, c + dc
            m[r, c] = 1
            continue
        return m


def rows_mask(ny: int, nx: int) -> np.ndarray:
    """Every other row full, the rows in between empty: ``(ny + 1) // 2`` components, each one row long.

    Union-find's easy-looking case: every merge joins a pixel to its left neighbour, so without
    path compression the tree of a row is a chain as long as the row.
    """
    ny = validate.integer(ny, "ny", minimum=1)
    nx = validate.integer(nx, "nx", minimum=1)
    m = np.zeros((ny, nx), dtype=np.uint8)
    m[0::2, :] = 1
    return m


def random_mask(ny: int, nx: int, density: float, seed: int = 0) -> np.ndarray:
    """A random uint8 image with each pixel foreground with probability ``density``."""
    ny = validate.integer(ny, "ny", minimum=1)
    nx = validate.integer(nx, "nx", minimum=1)
    density = validate.number(density, "density", minimum=0.0, maximum=1.0)
    return (np.random.default_rng(seed).random((ny, nx)) < density).astype(np.uint8)


__all__ = [
    "ccl_init",
    "ccl_propagate",
    "find_root",
    "find_root_plain",
    "initial_labels",
    "label_propagation",
    "label_reference",
    "label_union_find",
    "LabelPropagation",
    "min_index_labels",
    "propagate_reference",
    "propagation_steps_reference",
    "random_mask",
    "relabel_sequential",
    "rows_mask",
    "same_partition",
    "snake_mask",
    "spiral_mask",
    "uf_compress",
    "uf_compress_plain",
    "UF_FINDS",
    "uf_init",
    "uf_merge",
    "uf_merge_plain",
    "union",
    "union_plain",
    "UnionFind",
]
