#!/usr/bin/env bash
# Re-resolve the pinned requirement sets from requirements.in.
#
#   bash tools/lock_requirements.sh            # requirements.txt with $PYTHON (default python3, 3.11+)
#   bash tools/lock_requirements.sh py310      # requirements-py310.txt with $PYTHON310 (default python3.10)
#   bash tools/lock_requirements.sh all        # both
#
# For each set: a throw-away virtual environment in a temporary folder, `pip install -r requirements.in`
# (the newest versions the constraints in requirements.in allow, from the package index), then
# `pip freeze` of what got installed, sorted, under the header tools/setup_env.sh expects. The project
# itself is not installed (setup_env.sh adds it with `pip install -e .`), nor are pip and setuptools.
# Needs network access to the package index. Afterwards: review the diff, run `bash tools/run_tests.sh`
# (setup_env.sh reinstalls .venv because the pinned file changed), then commit the files together.
set -euo pipefail
cd "$(dirname "$0")/.."

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

lock() {  # lock PYTHON MINOR OUTPUT HEADER: resolve with PYTHON (3.MINOR or newer) into OUTPUT
  local python=$1 minor=$2 out=$3 header=$4 tmp
  if ! "$python" -c "import sys; sys.exit(sys.version_info < (3, $minor))" 2>/dev/null; then
    echo "error: $python is missing or older than Python 3.$minor (set PYTHON or PYTHON310)" >&2
    return 1
  fi
  tmp="$TMP/$out"
  mkdir -p "$tmp"
  echo "==> resolving requirements.in with $("$python" --version) into $out"
  "$python" -m venv "$tmp/venv"
  "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.in
  "$tmp/venv/bin/python" -m pip check
  {
    printf '%s\n' "$header"
    "$tmp/venv/bin/python" -m pip freeze --disable-pip-version-check --exclude-editable | LC_ALL=C sort -f
  } > "$tmp/locked.txt"
  mv "$tmp/locked.txt" "$out"
  echo "    $(grep -vc '^#' "$out") pinned packages in $out"
}

HEADER_MAIN="# Pinned for Python 3.11+ (resolved from requirements.in and tested together).
# Python 3.10 uses requirements-py310.txt; tools/setup_env.sh picks the right one."
HEADER_310="# Pinned for Python 3.10 (resolved from requirements.in; Python 3.11+ uses requirements.txt)."

case "${1:-main}" in
  main|py311) lock "${PYTHON:-python3}" 11 requirements.txt "$HEADER_MAIN" ;;
  py310) lock "${PYTHON310:-python3.10}" 10 requirements-py310.txt "$HEADER_310" ;;
  all)
    lock "${PYTHON:-python3}" 11 requirements.txt "$HEADER_MAIN"
    lock "${PYTHON310:-python3.10}" 10 requirements-py310.txt "$HEADER_310"
    ;;
  *) echo "usage: bash tools/lock_requirements.sh [main|py310|all]" >&2; exit 2 ;;
esac
