#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv from the pinned requirements.
# Idempotent: reinstalls only when the requirements or pyproject.toml changed. Sourced by the
# book and test scripts; run it alone to prepare a development environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "error: $PYTHON is missing or older than Python 3.10; install Python 3.10+ or set PYTHON=/path/to/python3" >&2
  exit 1
fi
if "$PYTHON" -c 'import sys; sys.exit(sys.version_info >= (3, 11))'; then REQ=requirements-py310.txt; else REQ=requirements.txt; fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating virtual environment .venv ($("$PYTHON" --version))"
  "$PYTHON" -m venv .venv || { echo "error: could not create .venv; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }
fi
STAMP=.venv/.installed
WANT=$(cat "$REQ" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "==> installing pinned requirements from $REQ (first time: a few minutes)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$REQ"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
  .venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
  echo "$WANT" > "$STAMP"
else
  echo "==> virtual environment .venv is up to date"
fi
