#!/usr/bin/env bash
# On a multi-GPU machine of the `device` tool (2 or 4 GPUs): install the carried wheels and collect the reference data
# of every chapter measured on several GPUs (`python3 -m labhelpers.chapters topic --min-gpus 2`: chapter 14, for 2
# and for 4 GPUs; bench/multi_gpu.py uses every GPU in ONE process, unlike the one-GPU lanes of
# tools/device_collect.sh), then run their benches. Writes $OUT/reference.tgz (reference/ch14_*_<g>gpu.json, logs/)
# and $OUT/bench.log. Not used by CI.
#   usage: bash tools/device_collect_multi.sh
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 LABHELPERS_BACKEND=gpu CUPY_TF32=0 NCCL_NVLS_ENABLE=0
export LABHELPERS_RUN_ID=${LABHELPERS_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)}
unset CUDA_VISIBLE_DEVICES
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/reference" "$OUT/logs"
nvidia-smi topo -m > "$OUT/logs/topology.txt" 2>&1
nvidia-smi nvlink -s >> "$OUT/logs/topology.txt" 2>&1
mapfile -t topics < <(python3 -m labhelpers.chapters topic --min-gpus 2) || exit 1
[ ${#topics[@]} -gt 0 ] || { echo "error: python3 -m labhelpers.chapters listed no multi-GPU topic" >&2; exit 1; }
echo "run $LABHELPERS_RUN_ID: ${topics[*]} on $(nvidia-smi -L | wc -l) GPU(s)"
timeout "${DEADLINE:-560}" python3 bench/run_all.py --collect "$OUT/reference" --only "${topics[@]}" 2>&1 | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
cp "$OUT/bench.log" "$OUT/logs/multi_gpu.log"
ls "$OUT/reference"
tar czf "$OUT/reference.tgz" -C "$OUT" reference logs && rm -rf "$OUT/reference" "$OUT/logs"
exit "$rc"
