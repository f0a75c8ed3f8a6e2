#!/usr/bin/env bash
# Distributed-optimizer (ZeRO-1) benchmark (a program, not a test): one model and global batch
# trained in one invocation at dp 2 and dp 4 (1 thread per rank; dp 4 oversubscribes the two
# cores of this machine, alike with and without the option), each with and without
# --distributed-optimizer (at dp 2 also with --no-overlap-param-gather), then a table
# (bench_zero.py) of tokens/s (median of the step lines after the first 2) and the ratio
# with/without at the same dp, the exposed dp time and the dp share of the step, the dp
# bytes per step from the counters beside the counters' formula and the ring formulas, and rank
# 0's measured optimizer, weight and comm bytes (the ledger; the memory model predicts them).
#
# The runs go in GPT_BENCH_ROUNDS (default 3) interleaved rounds and each run's figures pool the
# steps of its rounds: a virtual machine's two cores drift apart by 10-20% from minute to minute.
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
  rm -rf "$work/$name.ck"
  local args=("${model[@]}" "$@" --checkpoint-dir "$work/$name.ck"
              --metrics "$work/$name.$round.jsonl" --log-every 1000)
  echo "== $name: $np ranks: train ${args[*]}" >&2
  local start=$SECONDS
  # A core a rank where there are enough: unbound, two ranks share a core at times.
  local bind=none
  [ "$np" -le "$(nproc)" ] && bind=core
  OMP_NUM_THREADS=1 timeout 900 "$mpiexec" --oversubscribe --bind-to "$bind" -n "$np" \
    "$train" "${args[@]}" > "$work/$name.log" 2>&1 \
    || { echo "bench_zero: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  if grep -q "differs from the prediction" "$work/$name.log"; then
    echo "bench_zero: $name: measured memory differs from the memory model" >&2
    exit 1
  fi
  echo "   $((SECONDS - start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

names=(dp2 dp2_zero dp2_zero_waited dp4 dp4_zero)
for round in $(seq "${GPT_BENCH_ROUNDS:-3}"); do
  run dp2 2
  run dp2_zero 2 --distributed-optimizer
  run dp2_zero_waited 2 --distributed-optimizer --no-overlap-param-gather
  run dp4 4
  run dp4_zero 4 --distributed-optimizer
done

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
args=()
for name in "${names[@]}"; do
  for file in "$work/$name".*.jsonl; do args+=("$name=$file"); done
done
/usr/bin/python3 "$here/bench_zero.py" --skip 2 "${args[@]}"
