#!/usr/bin/env bash
# The GPU suite, as a teacher runs it on a machine with an NVIDIA GPU: the package tests and strict nbval of every
# chapter and lab with the GPU backend. CI has no GPU and runs tools/run_tests.sh instead; this is the other half.
#
#   bash tools/run_gpu_tests.sh                  # .venv from tools/setup_env.sh, plus the GPU extra (see README)
#   PYTHON=python3 bash tools/run_gpu_tests.sh   # an interpreter that already has everything (a GPU image)
#   bash tools/run_gpu_tests.sh notebooks        # only nbval; `package` for only the package tests
#   bash tools/run_gpu_tests.sh notebooks book/08_nbody.ipynb labs/08_nbody_lab.ipynb   # some notebooks
#
# Notebooks run one at a time on each GPU: two processes timing the same GPU would each see the other's load, and a
# ceiling measured under load is not a ceiling. With several GPUs, one nbval lane per GPU (each process sees only its
# own GPU through CUDA_VISIBLE_DEVICES) takes the notebooks from one queue, and the package tests run one xdist worker
# per GPU. LANES=1 keeps one lane.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
shift || true
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
if [ "$WHAT" = all ] || [ "$WHAT" = package ]; then
  echo "==> package tests with the GPU backend (pytest tests/)"
  # Package tests check correctness, not speed: several processes may share the GPU (pytest-xdist, when present).
  XDIST=(); "$PY" -c "import xdist" 2>/dev/null && XDIST=(-n "${JOBS:-$(( LANES > 4 ? LANES : 4 ))}")
  LABHELPERS_GPU_LANES=$LANES MPLBACKEND=Agg "$PY" -m pytest -q -p no:cacheprovider "${XDIST[@]}" tests || status=1
fi
if [ "$WHAT" = all ] || [ "$WHAT" = notebooks ]; then
  echo "==> notebook regression tests with the GPU backend (nbval, strict) over book/ and labs/"
  nbval() {
    TQDM_DISABLE=1 MPLBACKEND=module://matplotlib_inline.backend_inline "$PY" -m pytest -q -p no:cacheprovider --nbval \
      --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout 600 "$@"
  }
  if [ "$LANES" -le 1 ]; then
    nbval "${NOTEBOOKS[@]}" || status=1
  else
    queue=$(mktemp); find "${NOTEBOOKS[@]}" -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' | sort > "$queue"
    echo "    $(wc -l < "$queue") notebooks on $LANES lanes, one GPU each"
    lane() {
      local gpu=$1 nb rc=0
      while nb=$(flock "$queue.lock" bash -c 'head -n1 "$0"; sed -i 1d "$0"' "$queue") && [ -n "$nb" ]; do
        CUDA_VISIBLE_DEVICES=$gpu nbval "$nb" > "$queue.$(basename "$nb").log" 2>&1 \
          && echo "    ok   (GPU $gpu) $nb" || { rc=1; echo "    FAIL (GPU $gpu) $nb"; cat "$queue.$(basename "$nb").log"; }
      done
      return $rc
    }
    pids=(); for ((g = 0; g < LANES; g++)); do lane "$g" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
  fi
fi
[ $status = 0 ] && echo "==> GPU suite passed" || echo "==> GPU suite FAILED" >&2
exit $status
