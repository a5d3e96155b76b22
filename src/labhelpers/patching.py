"""One home for replacing Numba's functions while a checker watches a run: one lock, always restored.

Checkers that observe behaviour (which stream a copy went to, whether a compare-and-swap retries) swap
an attribute of Numba's API for a recording version for the length of one check:

    with patching.patched((cuda, "synchronize", recording_synchronize),
                          (DeviceNDArray, "copy_to_host", recording_copy_to_host)):
        run_the_students_code()

Every replacement made through :func:`patched` holds :data:`LOCK` (re-entrant: a check may nest
another in the same thread) and is undone in reverse order when the block ends, also when it raises,
so two checks never see each other's replacements and nothing stays patched. Every replacement of
Numba's functions in the package goes through here: ``racecheck.py`` (recording shared arrays and
barriers for one launch), ``relaxed.py`` (the relaxed simulator's atomics, barrier and fences), the
checkers of ``exercises/consistency.py`` and ``streamrecord.py``. ``launchguard.py``'s
launch check is the one replacement that stays for the life of the process (installed by ``import
labhelpers``, so not a ``with`` block): it swaps under :data:`LOCK` and changes nothing else.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

#: The lock every replacement made here holds while it is in place.
LOCK = threading.RLock()


@contextlib.contextmanager
def patched(*replacements: tuple[Any, str, Callable[..., Any]]) -> Iterator[None]:
    """Replace ``owner.name`` by ``new`` for each ``(owner, name, new)`` while the block runs; always restore.

    ``new`` is built by the caller from the original (``getattr(owner, name)`` before the block). A name
    the owner does not have is refused (ValueError) so a renamed Numba API fails loudly, not silently.
    """
    with LOCK:
        saved: list[tuple[Any, str, Any, bool]] = []
        try:
            for owner, name, new in replacements:
                if not hasattr(owner, name):
                    raise ValueError(f"{owner!r} has no attribute {name!r} to replace (has Numba's API changed?)")
                own = name in vars(owner) if hasattr(owner, "__dict__") else True
                saved.append((owner, name, getattr(owner, name) if not own else vars(owner)[name], own))
                setattr(owner, name, new)
            yield
        finally:
            for owner, name, old, own in reversed(saved):
                if own:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)


__all__ = ["LOCK", "patched"]
