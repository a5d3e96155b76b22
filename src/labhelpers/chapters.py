"""The book's chapters: one row each, the one place a chapter's names are written.

A chapter has two names. Its *slug* (``01_cuda_in_python``) names its files outside the package:
``book/<slug>.ipynb``, ``labs/<slug>_lab.ipynb``, ``labs/solutions/<slug>_lab.py`` and the reference data
``data/reference/chNN_*.json``. Its *topic* (``cuda_intro``) names its code: ``kernels/<topic>.py``,
``experiments/<topic>.py``, ``exercises/<topic>.py``, ``figures/<topic>.py``, ``bench/<topic>.py`` (the bench
topic of ``bench/run_all.py``) and ``tests/test_<topic>.py``. ``tests/test_chapters.py`` fails when a chapter
lacks one of these parts, or when ``_toc.yml``, ``README.md``, ``book/intro.md`` or a script and this table disagree.

Every other list of chapters is read from here: Python imports :data:`CHAPTERS`; shell scripts run
``python -m labhelpers.chapters topic --max-gpus 1`` (see ``--help``); ``book/intro.md``'s run-time table is
``labhelpers.runtime_estimate.markdown_table("T4")``.

A chapter whose reference data waits for a machine the project has not had says so in :attr:`Chapter.awaiting`,
the one place such a note is declared: ``tests/test_chapters.py`` fails on a notebook that prints "not yet
shipped" or "not measured yet" without it, and on a declaration whose data has landed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    """One chapter of the book.

    Attributes:
        number: the chapter's number, counted from 1 in the order of :data:`CHAPTERS` (1 to ``len(CHAPTERS)``).
        slug: ``NN_words``, the stem of the chapter's notebook, lab and solutions.
        topic: the name of its modules in the package, its bench and its test file.
        gpus: the GPUs its measurements need (``tools/device_collect.sh`` collects the one-GPU chapters,
            ``tools/device_collect_multi.sh`` the others).
        awaiting: empty when every reference table the chapter shows is shipped; otherwise which tables wait for
            which machine (what its notebook's "not yet shipped" note stands for). Remove it when the data lands.
    """

    number: int
    slug: str
    topic: str
    gpus: int = 1
    awaiting: str = ""

    @property
    def notebook(self) -> str:
        """The chapter's notebook, relative to the repository root."""
        return f"book/{self.slug}.ipynb"

    @property
    def lab(self) -> str:
        """The chapter's lab notebook, relative to the repository root."""
        return f"labs/{self.slug}_lab.ipynb"

    @property
    def solutions(self) -> str:
        """The lab's hidden solutions, relative to the repository root."""
        return f"labs/solutions/{self.slug}_lab.py"

    @property
    def reference_prefix(self) -> str:
        """The prefix of the chapter's reference data files (``ch01_``)."""
        return f"ch{self.number:02d}_"


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(1, "01_cuda_in_python", "cuda_intro"),
    Chapter(2, "02_bsp_and_amdahl", "bsp"),
    Chapter(3, "03_memory_hierarchy", "memory"),
    Chapter(4, "04_scheduling", "scheduling"),
    Chapter(5, "05_matrix_multiply", "matmul"),
    Chapter(6, "06_reduction", "reduction"),
    Chapter(7, "07_profiling_roofline", "roofline"),
    Chapter(8, "08_nbody", "nbody"),
    Chapter(9, "09_stencils", "stencil"),
    Chapter(10, "10_scan", "scan"),
    Chapter(11, "11_streams", "streams"),
    Chapter(12, "12_portability", "portability"),
    Chapter(13, "13_consistency", "consistency"),
    Chapter(14, "14_multi_gpu", "multi_gpu", gpus=2,
            awaiting="the 2- and 4-GPU tables (ch14_*_2gpu, ch14_*_4gpu): bash tools/device_collect_multi.sh "
                     "on a machine with 4 GPUs"),
)

TOPICS: tuple[str, ...] = tuple(c.topic for c in CHAPTERS)
"""Every chapter's topic in chapter order: the bench topics ``bench/run_all.py`` runs."""


def chapter(key: int | str) -> Chapter:
    """The chapter with this number, slug or topic.

    Raises:
        KeyError: no chapter has that name; the message lists the topics.
    """
    for c in CHAPTERS:
        if key in (c.number, c.slug, c.topic):
            return c
    raise KeyError(f"no chapter {key!r}: use a number 1-{len(CHAPTERS)}, a slug or one of {', '.join(TOPICS)}")


def names(what: str = "topic", *, max_gpus: int | None = None, min_gpus: int | None = None) -> list[str]:
    """Every chapter's ``topic``, ``slug`` or ``number`` (as text), in chapter order; ``max_gpus`` and ``min_gpus`` keep
    the chapters whose measurements need at most (at least) that many GPUs. What shell scripts read instead of
    keeping a list: ``python -m labhelpers.chapters topic --max-gpus 1``."""
    if what not in ("topic", "slug", "number"):
        raise ValueError(f"names() lists 'topic', 'slug' or 'number', not {what!r}")
    return [str(getattr(c, what)) for c in CHAPTERS
            if (max_gpus is None or c.gpus <= max_gpus) and (min_gpus is None or c.gpus >= min_gpus)]


def main(argv: list[str] | None = None) -> int:
    """``python -m labhelpers.chapters [topic|slug|number] [--max-gpus N] [--min-gpus N]``: one name per line."""
    import argparse  # only the command line needs it

    parser = argparse.ArgumentParser(prog="python -m labhelpers.chapters", description=main.__doc__)
    parser.add_argument("what", nargs="?", default="topic", choices=("topic", "slug", "number"))
    parser.add_argument("--max-gpus", type=int, default=None, help="only chapters measured on at most N GPUs")
    parser.add_argument("--min-gpus", type=int, default=None, help="only chapters measured on at least N GPUs")
    args = parser.parse_args(argv)
    print("\n".join(names(args.what, max_gpus=args.max_gpus, min_gpus=args.min_gpus)))
    return 0


__all__ = ["CHAPTERS", "TOPICS", "Chapter", "chapter", "main", "names"]

if __name__ == "__main__":
    raise SystemExit(main())
