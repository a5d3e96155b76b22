#!/usr/bin/env bash
# On the GPU machine of this workplace's `device` tool: install the carried wheels, then run one half of the GPU suite
# (tools/run_gpu_tests.sh) with the machine's own Python, its log kept in $OUT. Not used by CI.
#   here, once:  bash ../shared/tools/device_wheelhouse.sh pytest-xdist pyopencl==2026.1.4 pytools==2026.1.1 siphash24==1.9
#   device run:  bash tools/device_gpu_suite.sh package      (carry .whl; then `notebooks` in the next call)
# The image lacks NumPy < 2.5 (numba-cuda 0.30.4 compiles nothing with 2.5), Jupyter, nbval and pyopencl: the
# wheelhouse brings them. Each half fits one call of the device tool (10 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "error: the wheels in .whl/ did not install (carry .whl, made by ../shared/tools/device_wheelhouse.sh)" >&2; exit 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PYTHON=python3 GPU_SUITE_LOGS=$OUT
nvidia-smi -L; git log -1 --format='commit %h %s' 2>/dev/null || true
bash tools/run_gpu_tests.sh "${1:-package}" "${@:2}" 2>&1 | tee "$OUT/gpu-suite-${1:-package}.log"
