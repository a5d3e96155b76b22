#!/usr/bin/env bash
# On the GPU machine of this workplace's `device` tool: bench/tuning/profile.py (each chapter kernel of issue 33 and
# the candidate that beat it, launched once) under Nsight Compute, clocks left alone. Keeps in $OUT: ncu.csv (the
# long CSV: one row per launch and metric), launches.tsv (label and kernel-name fragment per launch, in order) and
# metrics.txt (the metrics this ncu knows, of those asked). Not used by CI.
#   device run:  bash tools/device_profile.sh      (carry .whl)
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "error: the wheels in .whl/ did not install (carry .whl, made by ../shared/tools/device_wheelhouse.sh)" >&2; exit 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 LABHELPERS_BACKEND=gpu CUPY_TF32=0
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
STALLS="barrier branch_resolving dispatch_stall drain lg_throttle long_scoreboard math_pipe_throttle membar \
mio_throttle no_instruction not_selected selected short_scoreboard sleeping wait"
WANT="gpu__time_duration.sum dram__bytes_read.sum dram__bytes_write.sum \
dram__throughput.avg.pct_of_peak_sustained_elapsed lts__t_bytes.sum lts__t_sector_hit_rate.pct \
sm__warps_active.avg.pct_of_peak_sustained_active smsp__inst_executed.sum \
smsp__issue_active.avg.pct_of_peak_sustained_active smsp__thread_inst_executed_per_inst_executed.ratio \
launch__registers_per_thread launch__occupancy_limit_registers launch__grid_size launch__block_size \
sm__cycles_elapsed.avg.per_second sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
smsp__sass_thread_inst_executed_op_ffma_pred_on.sum smsp__warps_issue_stalled_long_scoreboard.sum"
for s in $STALLS; do WANT="$WANT smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"; done
"$NCU" --query-metrics 2>/dev/null | awk '{print $1}' | sort -u > /tmp/known.txt
METRICS=""
for m in $WANT; do
  if grep -qx "${m%%.*}" /tmp/known.txt; then METRICS="$METRICS,$m"; else echo "ncu does not know ${m%%.*}: left out"; fi
done
METRICS=${METRICS#,}; echo "$METRICS" | tr , '\n' > "$OUT/metrics.txt"
python3 bench/tuning/profile.py --list > "$OUT/launches.tsv"
nvidia-smi -L; git log -1 --format='commit %h %s' 2>/dev/null || true
"$NCU" --target-processes all --clock-control none --metrics "$METRICS" --csv --print-units base \
  python3 bench/tuning/profile.py > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
status=$?
tail -5 "$OUT/ncu.err"; grep -c '"' "$OUT/ncu.csv"; echo "ncu exit $status"
exit $status
