#!/usr/bin/env bash
# Distributed-optimizer (ZeRO-1) benchmark (a program, not a test): one model and global batch
# trained in one invocation at dp 2 and dp 4 (1 thread per rank; dp 4 oversubscribes the two
# cores of this machine, alike with and without the option), each with and without
# --distributed-optimizer, then a table (bench_zero.py) of tokens/s (median of the step lines
# after the first 2) and the ratio with/without at the same dp, the dp share of the step, the dp
# bytes per step from the counters beside the counters' formula and the ring formulas, and rank
# 0's measured optimizer, weight and comm bytes (the ledger; the memory model predicts them).
#
# Usage: tests/benchmarks/bench_zero.sh [build dir] [steps]
#   GPT_BENCH_MAX_LOAD, GPT_BENCH_WAIT_TRIES: as bench_parallel.sh.
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_zero 8 "$@"

# ~1.6M parameters (wte 256 x 256): optimizer work and dp traffic are visible beside compute.
model=(--n-layer 2 --n-head 4 --d-model 256 --seq-len 128 --global-batch-size 16
       --micro-batch-size 4 --steps "$steps" --eval-every 0 --warmup-steps 100 --seed 1234
       --threads 1 --dp-bucket-size 262144)

wait_for_quiet_machine bench_zero

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-zero-XXXXXX")
trap 'rm -rf "$work"' EXIT

run() {  # name np [options...]
  local name=$1 np=$2
  shift 2
  local args=("${model[@]}" "$@" --checkpoint-dir "$work/$name.ck"
              --metrics "$work/$name.jsonl" --log-every 1000)
  echo "== $name: $np ranks: train ${args[*]}" >&2
  local start=$SECONDS
  OMP_NUM_THREADS=1 timeout 900 "$mpiexec" --oversubscribe --bind-to none -n "$np" \
    "$train" "${args[@]}" > "$work/$name.log" 2>&1 \
    || { echo "bench_zero: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  if grep -q "differs from the prediction" "$work/$name.log"; then
    echo "bench_zero: $name: measured memory differs from the memory model" >&2
    exit 1
  fi
  echo "   $((SECONDS - start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

run dp2 2
run dp2_zero 2 --distributed-optimizer
run dp4 4
run dp4_zero 4 --distributed-optimizer

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/bench_zero.py" --skip 2 \
  dp2="$work/dp2.jsonl" dp2_zero="$work/dp2_zero.jsonl" \
  dp4="$work/dp4.jsonl" dp4_zero="$work/dp4_zero.jsonl"
