#!/usr/bin/env bash
# What --precision bf16 costs on the CPU backend (a program, not a test): the built-in run's
# model (train's defaults, 0.8M parameters, 3072 tokens a step) on one rank with one thread,
# fp32 and bf16 in rounds (each round runs both, so a change in the machine's load touches both
# alike), in one process tree at a time. Prints per precision the median over rounds of each
# run's median step time after step 2, and bf16's ratio to fp32. On the CPU bf16 computes
# nothing faster (sgemm is float32 either way); the cost is the operand rounding and copying.
#
# Usage: tests/benchmarks/bench_precision.sh [build dir] [steps]   (steps: 20)
#   GPT_BENCH_ROUNDS (3), GPT_BENCH_MAX_LOAD / GPT_BENCH_WAIT_TRIES (bench_common.sh).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_precision 20 "$@"

rounds=${GPT_BENCH_ROUNDS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-precision-XXXXXX")
trap 'rm -rf "$work"' EXIT

wait_for_quiet_machine bench_precision
echo "bench_precision: load before $load_before" >&2
for ((r = 0; r < rounds; ++r)); do
  for precision in fp32 bf16; do
    OMP_NUM_THREADS=1 timeout 900 "$train" --precision "$precision" --threads 1 --steps "$steps" \
      --eval-every 0 --log-every 1000 --checkpoint-dir "$work/ck" --overwrite-checkpoints \
      --metrics "$work/${precision}_r$r.jsonl" > "$work/log" 2>&1 \
      || { echo "bench_precision: $precision failed:" >&2; tail -20 "$work/log" >&2; exit 1; }
  done
done
echo "bench_precision: load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
PYTHONPATH="$here" /usr/bin/python3 - "$work" "$rounds" <<'PY'
import statistics, sys
from bench_metrics import median, timed_steps
work, rounds = sys.argv[1], int(sys.argv[2])
ms = {p: statistics.median(median(timed_steps(f"{work}/{p}_r{r}.jsonl", 2), "step_time_s")
                           for r in range(rounds)) * 1e3 for p in ("fp32", "bf16")}
print("| precision | step (ms, median) | vs fp32 |")
print("|---|---|---|")
for p in ("fp32", "bf16"):
    print(f"| {p} | {ms[p]:.1f} | {ms[p] / ms['fp32']:.3f}x |")
PY
