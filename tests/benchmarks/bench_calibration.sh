#!/usr/bin/env bash
# Calibration benchmark (a program, not a test; docs/PLANNER.md "Calibrating a CPU cluster"):
# `plan --calibrate` measures this machine into a cluster file (before each round, below), and
# `plan --calibrate-turns` adds what ranks taking turns on its cores pay when they meet; then
# each layout of LAYOUTS below is trained for real (one thread per rank, up to 16 ranks on
# however many cores there are) and
# priced by `plan --cluster FILE` with the same layout fixed; bench_calibration.py prints
# predicted against measured step time (median of the steps after the warm-up) and peak memory
# (the heaviest rank: plan's memory against the metrics' measured events), the errors, pass or
# fail against 15% (ranks <= cores) and 25% (oversubscribed) and exact bytes, and whether the
# layout the planner ranks first is the measured best or within 5% of it.
#
# Each layout runs in GPT_BENCH_ROUNDS (3) interleaved rounds (round 1: every layout, round 2:
# again...), so a change of the machine's speed touches all alike, and each round starts with its
# own calibration, which prices that round's runs; a layout's error is the median over the rounds
# of each round's prediction against its run's median step, its predicted and measured step times
# the medians over the rounds.
#
# Usage: tests/benchmarks/bench_calibration.sh [build dir] [steps (default 12)]
#   GPT_BENCH_MAX_LOAD / GPT_BENCH_WAIT_TRIES: see bench_common.sh. GPT_BENCH_LAYOUTS: a
#   space-separated subset of the layout names below. GPT_CALIBRATE_SECONDS (20): --calibrate's
#   budget, and --calibrate-turns'. GPT_BENCH_ROUNDS (3).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_calibration 12 "$@"
plan=$build/bin/plan

# Small enough that 16 ranks on two cores take seconds a step; 4 layers and 4 heads so that
# tp 4 and pp 4 divide them.
shape=(--n-layer 4 --n-head 4 --d-model 128 --seq-len 64)
batch=16

# name ranks layout options (train's and plan's names alike)
LAYOUTS=(
  "base       1  --micro-batch-size 4"
  "mb16       1  --micro-batch-size 16"
  "dp2        2  --dp 2 --micro-batch-size 4"
  "tp2        2  --tp 2 --micro-batch-size 4"
  "tp2-sp-full 2 --tp 2 --micro-batch-size 8 --sequence-parallel --recompute full"
  "pp2-1f1b   2  --pp 2 --micro-batch-size 2"
  "pp2-gpipe  2  --pp 2 --schedule gpipe --micro-batch-size 1"
  "pp2-int2   2  --pp 2 --schedule interleaved --virtual-stages 2 --micro-batch-size 2"
  "tp4        4  --tp 4 --micro-batch-size 4"
  "pp4-zbh1   4  --pp 4 --schedule zb-h1 --micro-batch-size 1"
  "tp2pp2-sel 4  --tp 2 --pp 2 --micro-batch-size 2 --recompute selective"
  "dp4-zero   4  --dp 4 --micro-batch-size 1 --distributed-optimizer"
  "tp2pp2dp2  8  --tp 2 --pp 2 --dp 2 --schedule zb-h1 --micro-batch-size 2"
  "tp4pp4     16 --tp 4 --pp 4 --micro-batch-size 4"
  "tp2pp2dp4z 16 --tp 2 --pp 2 --dp 4 --micro-batch-size 1 --distributed-optimizer"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-calibration-XXXXXX")
trap 'rm -rf "$work"' EXIT

wait_for_quiet_machine bench_calibration
# Each round is priced by a calibration taken just before it: this virtual machine's speed moves
# by 20% and more over minutes (one run's single-rank layout measured 0.0422 s in its first round
# and 0.0344 s in its fifth), and a prediction is of the machine as it was measured.
calibrate() {  # round
  local cluster=$work/cpu.$1.ini
  echo "== calibrate, round $1: $mpiexec -n 2 plan --calibrate $cluster ${shape[*]}" \
    "--vocab-size 256" >&2
  OMP_NUM_THREADS=1 "$mpiexec" --oversubscribe --bind-to none -n 2 "$plan" --calibrate "$cluster" \
    "${shape[@]}" --vocab-size 256 --calibrate-seconds "${GPT_CALIBRATE_SECONDS:-20}" >&2
  # Then, with as many ranks as the largest layout runs, what their meetings cost them when
  # they take turns on the cores (turn_seconds).
  echo "== calibrate, round $1: $mpiexec -n $max_ranks plan --calibrate-turns $cluster" >&2
  OMP_NUM_THREADS=1 "$mpiexec" --oversubscribe --bind-to none -n "$max_ranks" "$plan" \
    --calibrate-turns "$cluster" "${shape[@]}" --vocab-size 256 \
    --calibrate-seconds "${GPT_CALIBRATE_SECONDS:-20}" >&2
  cat "$cluster" >&2
}
max_ranks=$(for entry in "${LAYOUTS[@]}"; do read -r _ np _ <<< "$entry"; echo "$np"; done |
  sort -n | tail -1)

# plan's layout options: the given ones, and every switch train leaves off fixed off.
plan_layout() {  # options...
  local args=("$@") fixed=(--precision fp32 --recompute-layers 0)
  [[ " ${args[*]} " == *" --sequence-parallel "* ]] || fixed+=(--sequence-parallel=false)
  [[ " ${args[*]} " == *" --distributed-optimizer "* ]] || fixed+=(--distributed-optimizer=false)
  [[ " ${args[*]} " == *" --recompute "* ]] || fixed+=(--recompute none)
  [[ " ${args[*]} " == *" --schedule "* ]] || fixed+=(--schedule 1f1b)
  [[ " ${args[*]} " == *" --virtual-stages "* ]] || fixed+=(--virtual-stages 1)
  for dim in tp pp dp; do [[ " ${args[*]} " == *" --$dim "* ]] || fixed+=("--$dim" 1); done
  echo "${args[@]}" "${fixed[@]}"
}

names=()
rounds=${GPT_BENCH_ROUNDS:-3}
for ((round = 1; round <= rounds; ++round)); do
  calibrate "$round"
  for entry in "${LAYOUTS[@]}"; do
    read -r name np opts <<< "$entry"
    if [[ -n ${GPT_BENCH_LAYOUTS:-} && " $GPT_BENCH_LAYOUTS " != *" $name "* ]]; then continue; fi
    # shellcheck disable=SC2086
    read -r -a layout <<< "$opts"
    tag=$name.$round
    # shellcheck disable=SC2046
    "$plan" --cluster "$work/cpu.$round.ini" --ranks "$np" "${shape[@]}" --vocab-size 256 \
      --global-batch-size "$batch" $(plan_layout "${layout[@]}") --json > "$work/$tag.plan.jsonl"
    if ((round == 1)); then names+=("$name:$np"); fi
    args=("${shape[@]}" --global-batch-size "$batch" "${layout[@]}" --steps "$steps" --threads 1
          --eval-every 0 --warmup-steps 100 --seed 1234 --checkpoint-dir "$work/$tag.ck"
          --metrics "$work/$tag.jsonl" --log-every 1000)
    echo "== $name, round $round: $np rank(s): train ${args[*]}" >&2
    start=$SECONDS
    OMP_NUM_THREADS=1 timeout 900 "$mpiexec" --oversubscribe --bind-to none -n "$np" \
      "$train" "${args[@]}" > "$work/$tag.log" 2>&1 ||
      { echo "bench_calibration: $tag failed:" >&2; tail -20 "$work/$tag.log" >&2; exit 1; }
    rm -rf "$work/$tag.ck"
    echo "   $((SECONDS - start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
done

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
cores=$(awk -F' *= *' '/^cores/ { print $2 }' "$work/cpu.1.ini")
/usr/bin/python3 "$here/bench_calibration.py" --skip 2 --cores "$cores" --rounds "$rounds" \
  --work "$work" "${names[@]}"
