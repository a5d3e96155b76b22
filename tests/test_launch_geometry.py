"""Launch geometry has one home: ``labhelpers.launch`` (``blocks_for``, ``tiles_for``, ``warps_for``, ``grid_2d``).

A grid, a count of blocks or tiles, or warps per block goes through those helpers. A ceiling division written by
hand (``-(-n // t)``) in the package is arithmetic that is not launch geometry, and says so in a comment on its
line. A line of a function the book shows with ``lh.show_source`` cannot take a comment without changing the
chapter's committed output (which strict nbval compares), so it is listed in :data:`SHOWN_IN_THE_BOOK` instead,
and is not counted. Cheap: the package's source is tokenized, not imported (only the helpers are tested).
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import labhelpers  # noqa: F401  (first: chooses the simulator before numba.cuda is imported)
import pytest

from labhelpers.errors import LaunchConfigError
from labhelpers.launch import blocks_for, tiles_for, warps_for

pytestmark = pytest.mark.backend_independent  # no kernel, no measurement: CI runs it (see conftest.py)

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "labhelpers"
#: The most hand-written ceiling divisions the package may keep (each not launch geometry, and saying so).
MAX_LEFT = 10
#: (module under src/labhelpers, the line's code without its comment) -> where the book shows it. These keep
#: their ceiling division because changing the function's source changes a notebook's committed output.
SHOWN_IN_THE_BOOK = {
    ("kernels/streams.py", "blocks = -(-d_in.size // self.threads)"):
        "chapter 11 shows StreamPipeline._op (a chunk's grid)",
    ("kernels/streams.py", "fma_chain[-(-(hi - lo) // THREADS), THREADS, s](d_in, d_out, A, B, iters)"):
        "chapter 11 and lab 11 show pipeline_with_hidden_syncs (a chunk's grid)",
}


def _ceiling_divisions(text: str) -> list[tuple[int, str, bool]]:
    """``(line, code without the comment, has a comment)`` for every ``-(- ... // ...)`` in a module's code.

    Tokens, not text: a ``-(-`` in a string or a comment (a message that teaches the idiom) is not code, and
    ``-(-x)`` without a floor division inside is not a ceiling division.
    """
    if not re.search(r"-\s*\(\s*-", text):  # most modules: nothing to tokenize
        return []
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
              if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    comments = {t.start[0]: t.start[1] for t in tokens if t.type == tokenize.COMMENT}  # line -> column
    code = [t for t in tokens if t.type != tokenize.COMMENT]
    lines = text.splitlines()
    found = []
    for i in range(len(code) - 2):
        if [t.string for t in code[i:i + 3]] != ["-", "(", "-"] or code[i].type != tokenize.OP:
            continue
        depth, floor_division, end = 0, False, code[i].start[0]
        for t in code[i + 1:]:
            if t.type != tokenize.OP:
                continue
            depth += t.string in ("(", "[", "{")
            depth -= t.string in (")", "]", "}")
            floor_division |= depth == 1 and t.string == "//"
            if depth == 0:
                end = t.end[0]
                break
        if floor_division:
            row = code[i].start[0]
            code_text = lines[row - 1][:comments.get(row)].strip()
            found.append((row, code_text, row in comments or end in comments))
    return found


def _all_ceiling_divisions() -> list[tuple[str, int, str, bool]]:
    return [(path.relative_to(PACKAGE).as_posix(), row, code, commented)
            for path in sorted(PACKAGE.rglob("*.py"))
            for row, code, commented in _ceiling_divisions(path.read_text())]


def test_every_hand_written_ceiling_division_says_why_it_is_not_launch_geometry():
    bare = [f"src/labhelpers/{module}:{row}: {code}" for module, row, code, commented in _all_ceiling_divisions()
            if not commented and (module, code) not in SHOWN_IN_THE_BOOK]
    assert not bare, (
        "ceiling divisions written by hand without a comment:\n  " + "\n  ".join(bare) + "\nA grid, a count of "
        "blocks or tiles, or warps per block goes through labhelpers.launch (blocks_for(n, threads, per_thread), "
        "tiles_for(n, tile), warps_for(threads, warp_size)); arithmetic that is not launch geometry says so in a "
        "comment on its line ('# not launch geometry: ...').")


def test_at_most_ten_hand_written_ceiling_divisions_are_left():
    left = [f"src/labhelpers/{module}:{row}: {code}" for module, row, code, _ in _all_ceiling_divisions()
            if (module, code) not in SHOWN_IN_THE_BOOK]
    assert len(left) <= MAX_LEFT, (
        f"{len(left)} ceiling divisions written by hand (at most {MAX_LEFT}):\n  " + "\n  ".join(left)
        + "\nUse labhelpers.launch's blocks_for, tiles_for or warps_for for launch geometry.")


def test_the_shown_exceptions_are_still_there():
    present = {(module, code) for module, _, code, _ in _all_ceiling_divisions()}
    stale = [key for key in SHOWN_IN_THE_BOOK if key not in present]
    assert not stale, f"no longer in the package, remove them from SHOWN_IN_THE_BOOK: {stale}"


def test_the_finder_sees_code_only():
    sample = ('a = -(-n // t)  # not launch geometry: why\nb = "-(-n // t)"\nc = -(-x)\nd = -(-(n + 1) // t)\n'
              'e = -(-n // (\n    t * 2))  # spans two lines\nf = "#" * -(-n // t)  # why\n')
    found = _ceiling_divisions(sample)
    assert [(row, commented) for row, _, commented in found] == [(1, True), (4, False), (5, True), (7, True)]
    assert (found[1][1], found[3][1]) == ("d = -(-(n + 1) // t)", 'f = "#" * -(-n // t)')


@pytest.mark.parametrize("n, tile, tiles", [(0, 256, 0), (1, 256, 1), (256, 256, 1), (257, 256, 2),
                                            (1_000_003, 1024, 977)])
def test_tiles_for_is_a_ceiling_division_that_may_be_zero(n, tile, tiles):
    assert tiles_for(n, tile) == tiles
    assert type(tiles_for(n, tile)) is int


@pytest.mark.parametrize("threads, warp_size, warps", [(0, 32, 0), (1, 32, 1), (32, 32, 1), (33, 32, 2),
                                                       (1024, 32, 32), (6, 4, 2)])
def test_warps_for_counts_a_partly_filled_warp(threads, warp_size, warps):
    assert warps_for(threads, warp_size) == warps


def test_blocks_for_never_gives_an_empty_grid():
    assert blocks_for(0, 256) == 1
    assert blocks_for(1000, 128, per_thread=4) == 2


@pytest.mark.parametrize("call", [lambda: tiles_for(-1, 32), lambda: tiles_for(10, 0), lambda: tiles_for(10.5, 2),
                                  lambda: warps_for(-1), lambda: warps_for(64, 0)])
def test_the_helpers_refuse_what_is_not_a_size(call):
    with pytest.raises(LaunchConfigError):
        call()
