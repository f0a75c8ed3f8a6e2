#!/usr/bin/env bash
# Recomputation benchmark (a program, not a test): what each --recompute mode costs and saves,
# measured side by side in one run on a model whose activations dominate its memory.
#
# 1. Throughput and memory: --pp 2 (1f1b, 8 microbatches: stage 0 keeps 2 in flight) on the two
#    cores (2 ranks, 1 thread each), --recompute none, selective and full in rounds (each round
#    runs the three modes once, so a change in the machine's load touches all alike); per mode
#    the median tokens/s of the step lines after the first 2 over the rounds, its ratio to none,
#    and rank 0's measured memory per category (the ledger: the metrics file's measured event).
# 2. Activation bytes per layer per microbatch, measured from the ledger of short 1-rank GPipe
#    runs: (activations(L+1 layers, m) - activations(L, m)) - (the same at m - 1) leaves one
#    layer's forward cache of one microbatch; beside it Korthikanti et al. 2022's 16-bit formulas
#    and this project's fp32 constants (docs/MEMORY.md derives them).
#
# Usage: tests/benchmarks/bench_recompute.sh [build dir] [steps]   (steps: 6)
#   GPT_BENCH_ROUNDS (3), GPT_BENCH_MAX_LOAD / GPT_BENCH_WAIT_TRIES (bench_common.sh).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_recompute 6 "$@"

rounds=${GPT_BENCH_ROUNDS:-3}
# Activations dominate: T = 256, a micro-batch of 4; about 0.9M parameters.
shape=(--n-head 4 --d-model 128 --seq-len 256 --micro-batch-size 4)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-recompute-XXXXXX")
[[ -n ${GPT_BENCH_KEEP:-} ]] && echo "bench_recompute: keeping $work" >&2 || trap 'rm -rf "$work"' EXIT

train_run() {  # name ranks train-options...
  local name=$1 np=$2
  shift 2
  OMP_NUM_THREADS=1 timeout 900 "$mpiexec" --oversubscribe --bind-to none -n "$np" "$train" \
    "$@" --threads 1 --eval-every 0 --log-every 1000 --checkpoint-dir "$work/$name.ck" \
    --metrics "$work/$name.jsonl" > "$work/$name.log" 2>&1 \
    || { echo "bench_recompute: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  rm -rf "$work/$name.ck"
}

wait_for_quiet_machine bench_recompute
echo "bench_recompute: load before $load_before" >&2
modes=(none selective full)
for ((r = 1; r <= rounds; ++r)); do
  for mode in "${modes[@]}"; do
    echo "== round $r: --recompute $mode" >&2
    train_run "speed_${mode}_r$r" 2 "${shape[@]}" --n-layer 4 --pp 2 --global-batch-size 32 \
      --steps "$steps" --recompute "$mode"
  done
done
for mode in "${modes[@]}"; do
  for layers in 1 2; do
    for m in 1 2; do
      train_run "layer_${mode}_L${layers}_m${m}" 1 "${shape[@]}" --n-layer "$layers" \
        --schedule gpipe --global-batch-size $((4 * m)) --steps 1 --recompute "$mode"
    done
  done
done
echo "bench_recompute: load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
/usr/bin/python3 "$here/bench_recompute.py" --work "$work" --rounds "$rounds" \
  --seq-len 256 --micro-batch 4 --d-model 128 --n-head 4
