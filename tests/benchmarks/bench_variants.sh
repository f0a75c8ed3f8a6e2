#!/usr/bin/env bash
# Two variants of one training run side by side (a program, not a test), in rounds (each round
# runs every variant, so a change in the machine's load touches all alike). Prints per variant
# the medians over rounds of each run's median step time, exposed tp time (tp_comm_s), tp bytes
# and tokens/s after step 2, and the tokens/s against the baseline (the last variant).
#
#   precision   what --precision bf16 costs on the CPU backend: the built-in run's model
#               (train's defaults, 0.8M parameters, 3072 tokens a step) on one rank with one
#               thread, bf16 against fp32. sgemm is float32 either way: the cost is the rounding
#               of every product's operands into copies.
#   tp-overlap  what hiding the column-parallel input-gradient reductions buys: tp 2 on 2 ranks,
#               each bound to its own core with one thread (4 layers, C 256, T 256, micro-batch
#               4, 4 microbatches a step), overlapped (the default) against --no-overlap-tp-comm.
#   tp-messages what bf16's 16-bit tp messages cost or save: the tp-overlap run in --precision
#               bf16 against fp32 (the step also pays bf16's operand rounding; the exposed tp
#               time holds the messages' packing and their transfer).
#
# Usage: tests/benchmarks/bench_variants.sh precision|tp-overlap|tp-messages [build dir] [steps]
#   steps: 20 (precision), 8 (tp-overlap, tp-messages). GPT_BENCH_ROUNDS (3), GPT_BENCH_MAX_LOAD /
#   GPT_BENCH_WAIT_TRIES (bench_common.sh).
set -euo pipefail
comparison=${1:-}
shift || true
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
case $comparison in
  precision)
    bench_start bench_variants 20 "$@"
    launch=()
    options=(--threads 1)
    names=(bf16 fp32)
    variants=("--precision bf16" "--precision fp32")
    ;;
  tp-overlap | tp-messages)  # one tp 2 run, two ways
    bench_start bench_variants 8 "$@"
    launch=("$mpiexec" --bind-to core -n 2)
    (($(nproc) >= 2)) || launch=("$mpiexec" --oversubscribe --bind-to none -n 2)
    options=(--tp 2 --n-layer 4 --n-head 4 --d-model 256 --seq-len 256 --micro-batch-size 4
             --global-batch-size 16 --threads 1)
    if [[ $comparison == tp-overlap ]]; then
      names=(overlapped waited)
      variants=("" "--no-overlap-tp-comm")
    else
      names=(bf16 fp32)
      variants=("--precision bf16" "--precision fp32")
    fi
    ;;
  *)
    echo "usage: $0 precision|tp-overlap|tp-messages [build dir] [steps]" >&2
    exit 2
    ;;
esac

rounds=${GPT_BENCH_ROUNDS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-variants-XXXXXX")
trap 'rm -rf "$work"' EXIT

wait_for_quiet_machine bench_variants
echo "bench_variants: load before $load_before" >&2
for ((r = 0; r < rounds; ++r)); do
  for i in "${!names[@]}"; do
    read -r -a extra <<< "${variants[$i]}"
    OMP_NUM_THREADS=1 timeout 900 "${launch[@]}" "$train" "${options[@]}" "${extra[@]}" \
      --steps "$steps" --eval-every 0 --log-every 1000 --checkpoint-dir "$work/ck" \
      --overwrite-checkpoints --metrics "$work/${names[$i]}_r$r.jsonl" > "$work/log" 2>&1 \
      || { echo "bench_variants: ${names[$i]} failed:" >&2; tail -20 "$work/log" >&2; exit 1; }
  done
done
echo "bench_variants: load after $(cut -d' ' -f1-3 /proc/loadavg)" >&2
PYTHONPATH="$here" /usr/bin/python3 - "$work" "$rounds" "${names[@]}" <<'PY'
import statistics, sys
from bench_metrics import median, timed_steps
work, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def over_rounds(name, key):
    return statistics.median(median(timed_steps(f"{work}/{name}_r{r}.jsonl", 2), key)
                             for r in range(rounds))
print("| variant | step (ms) | exposed tp (ms) | tp MB a step | tokens/s | vs " + names[-1] + " |")
print("|---|---|---|---|---|---|")
base = over_rounds(names[-1], "tokens_per_s")
for name in names:
    tokens = over_rounds(name, "tokens_per_s")
    print(f"| {name} | {over_rounds(name, 'step_time_s') * 1e3:.1f} | "
          f"{over_rounds(name, 'tp_comm_s') * 1e3:.1f} | {over_rounds(name, 'tp_bytes') / 1e6:.2f} | "
          f"{tokens:.0f} | {tokens / base:.3f}x |")
PY
