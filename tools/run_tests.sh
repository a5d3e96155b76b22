#!/usr/bin/env bash
# The whole test suite, as CI runs it: package tests, notebook regression tests (nbval, strict),
# the book's structure, and a build of the book with warnings as errors. No GPU needed:
# kernels run under Numba's CUDA simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_env.sh
bash tools/ensure_browser.sh
bash tools/ensure_opencl.sh   # chapter 12 compiles and runs its OpenCL and OpenACC listings for real
export LABHELPERS_BACKEND=sim PYTHONHASHSEED=0
JOBS=${JOBS:-2}
echo "==> 1/5 package and structure tests (pytest tests/)"
MPLBACKEND=Agg .venv/bin/python -m pytest -q -n "$JOBS" tests
echo "==> 2/5 notebook regression tests (nbval, strict) over book/ and labs/"
# Same matplotlib backend and no progress bars, as tools/execute_notebooks.py, so outputs match the committed ones.
TQDM_DISABLE=1 MPLBACKEND=module://matplotlib_inline.backend_inline .venv/bin/python -m pytest -q -n "$JOBS" --dist loadfile -p no:cacheprovider \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout 600 book labs
echo "==> 3/5 building the book (warnings as errors) and checking its pages"
bash tools/build_book.sh
.venv/bin/python tools/check_built_book.py _build/html
echo "==> 4/5 every page in headless Chromium, offline: console errors, widgets, math, images, clipped text"
.venv/bin/python tools/browser_check.py _build/html --screenshots _build/screenshots
echo "==> 5/5 the Colab path: every chapter's setup cell and first cells on Colab's Python and packages, from a local wheel"
.venv/bin/python tools/colab_install_check.py
echo "==> all tests passed"
