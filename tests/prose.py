"""The drift checks' reading of a notebook: its prose as one line, and a number as the prose writes it.

Test files that recompute the figures a chapter quotes (``test_<topic>.py``, "drift check") look each figure up in
:func:`markdown` after formatting it with :func:`figure`, so re-measuring fails a test instead of contradicting the
text.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def markdown(relpath: str) -> str:
    """The markdown cells of notebook ``relpath`` (from the repository root) as one line: line breaks inside a
    sentence do not matter."""
    nb = json.loads((ROOT / relpath).read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return " ".join(text.split())


def figure(v: float, digits: int = 0) -> str:
    """A number as the prose writes it: thousands separated, ``digits`` decimals (negative: round to tens...)."""
    return f"{round(v, digits):,.{max(digits, 0)}f}"
