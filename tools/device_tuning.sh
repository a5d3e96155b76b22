#!/usr/bin/env bash
# On the GPU machine of this workplace's `device` tool: install the carried wheels, then run the tuning sweeps of
# bench/tuning/ (issue 33's candidates against their yardsticks, one GPU run), each table printed and kept as CSV
# in $OUT. Not used by CI.
#   device run:  bash tools/device_tuning.sh [scan stencil dense] [--quick]      (carry .whl)
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "error: the wheels in .whl/ did not install (carry .whl, made by ../shared/tools/device_wheelhouse.sh)" >&2; exit 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 LABHELPERS_BACKEND=gpu CUPY_TF32=0
nvidia-smi -L; git log -1 --format='commit %h %s' 2>/dev/null || true
SWEEPS=(); FLAGS=()
for a in "$@"; do case $a in --*) FLAGS+=("$a") ;; *) SWEEPS+=("$a") ;; esac; done
[ ${#SWEEPS[@]} -gt 0 ] || SWEEPS=(scan stencil dense)
status=0
for s in "${SWEEPS[@]}"; do
  echo "==> bench/tuning/$s.py ${FLAGS[*]}"; t0=$SECONDS
  python3 "bench/tuning/$s.py" "${FLAGS[@]}" --out "$OUT/tuning-$s.csv" || status=1
  echo "==> $s: $((SECONDS - t0)) s"
done
exit $status
