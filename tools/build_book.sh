#!/usr/bin/env bash
# Build the book to HTML in _build/html (offline; committed notebook outputs are used as they are).
# Warnings are errors. Open _build/html/index.html in a browser afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_env.sh
echo "==> building the book (jupyter-book, warnings as errors)"
.venv/bin/jupyter-book build . --warningiserror --keep-going --builder html
echo "==> done: open $(pwd)/_build/html/index.html"
