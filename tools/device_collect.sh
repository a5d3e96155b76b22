#!/usr/bin/env bash
# On the GPU machine of the `device` tool: install the carried wheels, run every benchmark and collect reference data
# into $OUT (one archive, reference.tgz, plus bench.log). Not used by CI.
#   usage: bash tools/device_collect.sh [topic ...]
# With several GPUs the topics are shared out among lanes, one process per GPU (CUDA_VISIBLE_DEVICES), each taking the
# next topic from one queue: every ratio is still measured in one process on one GPU, and the whole collection is one
# run (LABHELPERS_RUN_ID, stored in every file's metadata). LANES=1 forces one lane. DEADLINE=seconds stops lanes
# from starting a topic after that long and ends a topic still running then (its log says so), so that one call of
# the device tool always brings back what was collected; the topics not collected are printed at the end.
# CELL_TIMES=1 then runs every chapter on GPU 0 too, within the deadline, and writes $OUT/cell_times.json (each code
# cell's wall time; copy it to src/labhelpers/data/cell_times.json for labhelpers.runtime_estimate).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 LABHELPERS_BACKEND=gpu CUPY_TF32=0
export LABHELPERS_RUN_ID=${LABHELPERS_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)}
bash tools/ensure_opencl.sh >/dev/null 2>&1 || echo "note: tools/ensure_opencl.sh failed: chapter 12 may measure less" >&2
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/reference" "$OUT/logs"
if [ $# -gt 0 ]; then topics=("$@"); else
  # every chapter whose measurements need one GPU, as labhelpers/chapters.py lists them (multi-GPU ones:
  # tools/device_collect_multi.sh)
  mapfile -t topics < <(python3 -m labhelpers.chapters topic --max-gpus 1) || exit 1
  [ ${#topics[@]} -gt 0 ] || { echo "error: python3 -m labhelpers.chapters listed no topic" >&2; exit 1; }
fi
gpus=$(nvidia-smi -L 2>/dev/null | wc -l); LANES=${LANES:-$gpus}; [ "$LANES" -ge 1 ] || LANES=1
queue=$(mktemp); printf '%s\n' "${topics[@]}" > "$queue"
pop() {  # the next topic of the queue, or nothing
  flock "$queue.lock" bash -c 'head -n1 "$0"; sed -i 1d "$0"' "$queue"
}
START=$(date +%s); DEADLINE=${DEADLINE:-100000}
lane() {
  local gpu=$1 topic rc=0 left
  while left=$(( START + DEADLINE - $(date +%s) )) && [ "$left" -gt 30 ] && topic=$(pop) && [ -n "$topic" ]; do
    echo "== lane $gpu: $topic ($(date -u +%T))"
    CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 bench/run_all.py --collect "$OUT/reference" --only "$topic" \
      > "$OUT/logs/$topic.log" 2>&1 || { rc=1; echo "== lane $gpu: $topic FAILED (or stopped at the deadline)"; }
    echo "== lane $gpu: $topic done ($(date -u +%T))"
  done
  return $rc
}
echo "run $LABHELPERS_RUN_ID: ${#topics[@]} topics on $LANES lane(s) of $gpus GPU(s)"
pids=(); for ((g = 0; g < LANES; g++)); do lane "$g" & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ -s "$queue" ] && echo "NOT COLLECTED (deadline): $(tr '\n' ' ' < "$queue")"
if [ "${CELL_TIMES:-0}" = 1 ]; then  # every chapter's per-cell wall times on this GPU, for labhelpers.runtime_estimate
  left=$(( START + DEADLINE - $(date +%s) ))
  CUDA_VISIBLE_DEVICES=0 timeout "$left" python3 tools/execute_notebooks.py --no-write --times "$OUT/cell_times.json" \
    book/[0-9]*.ipynb > "$OUT/logs/cell_times.log" 2>&1 || echo "cell times: stopped or failed (logs/cell_times.log)"
fi
for t in "${topics[@]}"; do [ -f "$OUT/logs/$t.log" ] && { echo "######## $t"; cat "$OUT/logs/$t.log"; }; done > "$OUT/bench.log"
grep -h -E "FAIL|Traceback|Error" "$OUT/bench.log" | head -40
tar czf "$OUT/reference.tgz" -C "$OUT" reference logs && rm -rf "$OUT/reference" "$OUT/logs"
exit $rc
