#!/usr/bin/env bash
# Parallel-layout benchmark (a program, not a test): one model and global batch trained side by
# side, in one invocation, on the two cores of this machine as
#   tp 1 with 2 threads (1 rank), tp 2 with 1 thread per rank (2 ranks), dp 2 with 1 thread per
#   rank (2 ranks),
# then a table (bench_parallel.py) of tokens/s (median of the step lines after the first 2), the
# measured share of the step in tp communication (tp 2) and dp communication (dp 2), the tp bytes
# per step from the formula of docs/ARCHITECTURE.md beside the measured tp_bytes, and the
# throughput of tp 2 and dp 2 relative to tp 1 (target: >= 0.9).
#
# Usage: tests/benchmarks/bench_parallel.sh [build dir] [steps]
#   GPT_BENCH_MAX_LOAD (1.5): wait until the 1-minute load average is below it (a shared machine
#   gives meaningless ratios otherwise); GPT_BENCH_WAIT_TRIES (20) checks 15 s apart, then it
#   runs anyway and says so. GPT_BENCH_EXTRA: more train options for every run (e.g.
#   "--sequence-parallel", which applies only to the tp 2 run and is a no-op notice elsewhere).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_parallel 10 "$@"

# Compute-dominated: ~13M parameters, 4096 tokens per step, a few seconds per step.
model=(--n-layer 4 --n-head 8 --d-model 512 --seq-len 256 --global-batch-size 16
       --micro-batch-size 4 --steps "$steps" --eval-every 0 --warmup-steps 100 --seed 1234)
# shellcheck disable=SC2206
extra=(${GPT_BENCH_EXTRA:-})

wait_for_quiet_machine bench_parallel

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-parallel-XXXXXX")
trap 'rm -rf "$work"' EXIT

run() {  # name np threads [layout options...]
  local name=$1 np=$2 threads=$3
  shift 3
  local args=("${model[@]}" "${extra[@]}" --threads "$threads" "$@"
              --checkpoint-dir "$work/$name.ck" --metrics "$work/$name.jsonl" --log-every 1000)
  echo "== $name: $np rank(s), $threads thread(s) each: train ${args[*]}" >&2
  local start=$SECONDS
  if ((np == 1)); then
    OMP_NUM_THREADS=$threads timeout 900 "$train" "${args[@]}" > "$work/$name.log" 2>&1
  else
    OMP_NUM_THREADS=$threads timeout 900 "$mpiexec" --oversubscribe --bind-to none -n "$np" \
      "$train" "${args[@]}" > "$work/$name.log" 2>&1
  fi || { echo "bench_parallel: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  echo "   $((SECONDS - start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

run tp1 1 2
run tp2 2 1 --tp 2
run dp2 2 1 --dp 2

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/bench_parallel.py" --skip 2 --n-layer 4 --d-model 512 --seq-len 256 \
  --global-batch-size 16 --micro-batch-size 4 \
  tp1="$work/tp1.jsonl" tp2="$work/tp2.jsonl" dp2="$work/dp2.jsonl"
