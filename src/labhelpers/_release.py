"""Where notebooks install labhelpers from when it is missing (Colab): the one place to change.

``tools/sync_setup_cells.py`` writes these into the first code cell of every notebook;
``tests/test_book_structure.py`` checks that every notebook's setup cell matches.
"""

#: The project's public repository.
REPOSITORY = "https://github.com/gpu-course/gpu-course"
#: The release tag (or commit) notebooks pin labhelpers to.
RELEASE = "v0.1.0"


def pip_requirement(extra: str | None = None) -> str:
    """The pip requirement that installs this release, e.g. for ``%pip install``."""
    name = f"labhelpers[{extra}]" if extra else "labhelpers"
    return f"{name} @ git+{REPOSITORY}@{RELEASE}"
