"""Where notebooks install labhelpers from when it is missing (Colab): the one place to change.

``tools/sync_setup_cells.py`` writes these into the first code cell of every notebook;
``tests/test_book_structure.py`` checks that every notebook's setup cell matches.
"""

#: The project's public repository.
REPOSITORY = "https://github.com/gpu-course/gpu-course"
#: The release tag (or commit) notebooks pin labhelpers to.
RELEASE = "v0.1.0"
#: What a student does when the release cannot be installed (not published yet, or no network): the setup cell
#: installs a ``labhelpers-*.whl`` it finds in the notebook's folder instead of the release.
NO_RELEASE_HINT = (
    "If that release is not published yet: build the wheel in a checkout of the repository "
    "(pip wheel --no-deps -w dist . , or bash tools/release.sh), upload dist/labhelpers-*.whl next to this "
    "notebook (Colab: the Files panel on the left, into /content) and run this cell again; "
    "or install it yourself with %pip install /path/to/labhelpers-*.whl and run this cell again.")


def pip_requirement(extra: str | None = None) -> str:
    """The pip requirement that installs this release, e.g. for ``%pip install``."""
    name = f"labhelpers[{extra}]" if extra else "labhelpers"
    return f"{name} @ git+{REPOSITORY}@{RELEASE}"
