#!/usr/bin/env bash
# On the GPU machine of the `device` tool: install the carried wheels, run every benchmark and
# collect reference data into $OUT (as one archive). Not used by CI.
#   usage: bash tools/device_collect.sh [topic ...]
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 LABHELPERS_BACKEND=gpu CUPY_TF32=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/reference"
args=()
[ $# -gt 0 ] && args=(--only "$@")
python3 bench/run_all.py --collect "$OUT/reference" "${args[@]}" 2>&1 | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
tar czf "$OUT/reference.tgz" -C "$OUT" reference && rm -rf "$OUT/reference"
exit $rc
