#!/usr/bin/env bash
# The GPU suite, as a teacher runs it on a machine with an NVIDIA GPU: the package tests and strict nbval of every
# chapter and lab with the GPU backend. CI has no GPU and runs tools/run_tests.sh instead; this is the other half.
#
#   bash tools/run_gpu_tests.sh                  # .venv from tools/setup_env.sh, plus the GPU extra (see README)
#   PYTHON=python3 bash tools/run_gpu_tests.sh   # an interpreter that already has everything (a GPU image)
#   bash tools/run_gpu_tests.sh notebooks        # only nbval; `package` for only the package tests
#   bash tools/run_gpu_tests.sh notebooks book/08_nbody.ipynb labs/08_nbody_lab.ipynb   # some notebooks
#   bash tools/run_gpu_tests.sh alone LIST [TIMES]   # the tests listed (node ids, one a line: e.g. the queued
#                                                      # measurements a package run kept), alone, TIMES times over
#
# One GPU is shared by several test processes, because compiling kernels and drawing figures keep many CPU cores
# busy while the GPU idles; a measurement that is judged still never shares the GPU. Package tests run in two phases:
# side by side in pytest-xdist workers, where a test that takes a GPU measurement is skipped and queued
# (tests/conftest.py; one marked `measures` before it starts; none marked `judges_no_timing`, whose assertions no busy
# GPU can change), then the queued ones one at a time. Notebooks run in nbval lanes (NB_PER_GPU
# per GPU, 6 by default) with one lock file per GPU (src/labhelpers/gpu_lock.py): every cell holds its GPU shared,
# and a cell that measures holds it alone to its end. So a measured exercise gets the verdict of an idle GPU. With
# several GPUs, each worker and each lane sees one GPU through CUDA_VISIBLE_DEVICES.
#
# Which package tests: every module not marked `backend_independent` (those launch no kernel and measure nothing;
# CI runs them, and the simulator run proves the mark: tests/conftest.py fails such a test if it launches a kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
shift || true
if [ "$WHAT" = alone ]; then
  LIST=${1:?usage: bash tools/run_gpu_tests.sh alone LIST [TIMES] (LIST: node ids, one a line)}; TIMES=${2:-1}
  [ -s "$LIST" ] || { echo "error: $LIST is empty or missing (a package run keeps package-measurements.txt)" >&2; exit 2; }
  LIST=$(realpath "$LIST"); set --
fi
NOTEBOOKS=("$@"); [ ${#NOTEBOOKS[@]} -gt 0 ] || NOTEBOOKS=(book labs)
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; else bash tools/setup_env.sh; PY=.venv/bin/python; fi
"$PY" - <<'PYEOF'
import sys
try:
    import cupy  # noqa: F401
    from numba import cuda
except ImportError as exc:
    sys.exit(f"error: {exc}. Install the GPU extra that matches the driver (nvidia-smi, top right): "
             ".venv/bin/pip install -e '.[gpu-cu12]' (or '.[gpu-cu13]').")
if not cuda.is_available():
    sys.exit("error: numba-cuda sees no CUDA GPU here: this command is for a machine with an NVIDIA GPU "
             "(without one, run tools/run_tests.sh).")
PYEOF
export LABHELPERS_BACKEND=gpu CUPY_TF32=0 PYTHONHASHSEED=0
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l); LANES=${LANES:-$GPUS}; [ "$LANES" -ge 1 ] 2>/dev/null || LANES=1
bash tools/ensure_opencl.sh || true   # chapter 12: PoCL, gcc, and the ICD file that names NVIDIA's OpenCL
status=0
LOCKS=${LABHELPERS_GPU_LOCK_DIR:-$(mktemp -d)}   # one lock file per GPU (labhelpers.gpu_lock); share the folder to run both halves at once
LOGS=${GPU_SUITE_LOGS:-$LOCKS}; mkdir -p "$LOGS"   # each test's seconds (JUnit XML) and the queued measurements, kept
minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }
if [ "$WHAT" = all ] || [ "$WHAT" = package ]; then
  echo "==> package tests with the GPU backend (pytest tests/, modules not marked backend_independent)"
  # One test at a time to whichever worker is free (tests take 0.01 to 70 s: a worker given a batch, or robbed by count
  # as worksteal does, can finish a minute after the others); two cores left to the workers' simulator processes.
  XDIST=(); "$PY" -c "import xdist" 2>/dev/null && XDIST=(-n "${JOBS:-$(( $(nproc) > 16 ? 14 : ($(nproc) > 3 ? $(nproc) - 2 : 2) ))}" --dist load --maxschedchunk 1)
  t0=$SECONDS; : > "$LOCKS/deferred"
  echo "--> side by side: correctness; a test that measures is deferred to the serial phase"
  LABHELPERS_GPU_DEFER=$LOCKS/deferred LABHELPERS_GPU_LANES=$LANES MPLBACKEND=Agg "$PY" -m pytest -q \
    -p no:cacheprovider "${XDIST[@]}" -m "not backend_independent" --junitxml="$LOGS/package-side-by-side.xml" tests \
    || status=1
  sort -u "$LOCKS/deferred" -o "$LOCKS/deferred"; cp "$LOCKS/deferred" "$LOGS/package-measurements.txt" 2>/dev/null || true
  echo "--> one at a time, alone on the GPU: the $(wc -l < "$LOCKS/deferred") tests that measure"
  if [ -s "$LOCKS/deferred" ]; then
    LABHELPERS_GPU_ONLY=$LOCKS/deferred MPLBACKEND=Agg "$PY" -m pytest -q -p no:cacheprovider -p no:xdist \
      -m "not backend_independent" --junitxml="$LOGS/package-alone.xml" $(sed 's/::.*//' "$LOCKS/deferred" | sort -u) \
      || status=1   # only the queued tests' modules are collected
  fi
  echo "==> package tests: $(minutes $((SECONDS - t0))) min"
fi
if [ "$WHAT" = alone ]; then
  for ((round = 1; round <= TIMES; round++)); do
    echo "==> round $round of $TIMES: the $(wc -l < "$LIST") tests of $LIST, one at a time, alone on the GPU"
    t0=$SECONDS
    LABHELPERS_GPU_ONLY=$LIST MPLBACKEND=Agg "$PY" -m pytest -q -p no:cacheprovider -p no:xdist \
      --junitxml="$LOGS/alone-$round.xml" $(sed 's/::.*//' "$LIST" | sort -u) || status=1
    echo "==> round $round: $(minutes $((SECONDS - t0))) min"
  done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = notebooks ]; then
  echo "==> notebook regression tests with the GPU backend (nbval, strict) over ${NOTEBOOKS[*]}"
  queue=$(mktemp)   # the largest notebooks first, so that no long one starts last
  find "${NOTEBOOKS[@]}" -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -printf '%s %p\n' | sort -rn | cut -d' ' -f2- > "$queue"
  PER_GPU=${NB_PER_GPU:-6}; NLANES=$(( LANES * PER_GPU ))
  echo "    $(wc -l < "$queue") notebooks on $NLANES lanes ($PER_GPU per GPU)"
  t0=$SECONDS
  lane() {
    local gpu=$1 nb rc=0 t log
    while nb=$(flock "$queue.lock" bash -c 'head -n1 "$0"; sed -i 1d "$0"' "$queue") && [ -n "$nb" ]; do
      log="$queue.$(basename "$nb").log"; t=$SECONDS
      if CUDA_VISIBLE_DEVICES=$gpu LABHELPERS_GPU_LOCK=$LOCKS/gpu.gpu$gpu TQDM_DISABLE=1 \
           MPLBACKEND=module://matplotlib_inline.backend_inline "$PY" -m pytest -q -p no:cacheprovider --nbval \
           --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout 600 "$nb" > "$log" 2>&1
      then echo "    ok    $(minutes $((SECONDS - t))) min  (GPU $gpu) $nb  ($(tail -n1 "$log" | sed 's/=//g; s/^ *//'))"
      else rc=1; echo "    FAIL  $(minutes $((SECONDS - t))) min  (GPU $gpu) $nb"; cat "$log"; fi
    done
    return $rc
  }
  pids=(); for ((l = 0; l < NLANES; l++)); do lane $(( l % LANES )) & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  echo "==> notebooks: $(minutes $((SECONDS - t0))) min"
fi
[ $status = 0 ] && echo "==> GPU suite passed" || echo "==> GPU suite FAILED" >&2
exit $status
