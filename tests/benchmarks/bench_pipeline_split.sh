#!/usr/bin/env bash
# Balanced pipeline stages benchmark (a program, not a test; docs/PLANNER.md "Balanced stages"):
# a narrow model with GPT-2's vocabulary, whose output head costs about as much as half its
# blocks, trained at --pp 2 (1f1b, 16 microbatches: a small bubble) on the two cores of this
# machine, a core a rank, with --pipeline-layers even and with the split auto chooses, in
# interleaved rounds (even, auto, even, auto, ...). First `plan --calibrate` measures the machine
# into the cluster file auto prices on. bench_pipeline_split.py prints tokens/s of each (median of
# the step lines after the first 2, then the median over rounds), the measured ratio auto/even
# against the one train predicted when it chose (its log line), and each stage's compute per step
# from the trace (the busy time of its passes) for both splits.
#
# Usage: tests/benchmarks/bench_pipeline_split.sh [build dir] [steps (default 8)]
#   GPT_BENCH_ARCH (gpt2): llama runs the same shape as a Llama-family model (RMSNorm, rotary,
#   SwiGLU, 2 key/value heads, untied head). GPT_BENCH_ROUNDS (3), GPT_CALIBRATE_SECONDS (20),
#   GPT_BENCH_MAX_LOAD / GPT_BENCH_WAIT_TRIES (bench_common.sh).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_pipeline_split 8 "$@"
plan=$build/bin/plan
prepare=$build/bin/prepare-data

# 16 blocks of width 384; the head's (384 x 50257) products are about 11 blocks' worth.
shape=(--n-layer 16 --n-head 6 --d-model 384 --seq-len 32)
arch=${GPT_BENCH_ARCH:-gpt2}
[[ $arch == llama ]] && shape+=(--arch llama --n-kv-head 2)
run_options=(--pp 2 --schedule 1f1b --micro-batch-size 1 --global-batch-size 16
             --steps "$steps" --eval-every 0 --warmup-steps 100 --seed 1234 --threads 1)

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-pipeline-split-XXXXXX")
[[ -n ${GPT_BENCH_KEEP:-} ]] && echo "bench_pipeline_split: keeping $work" >&2 ||
  trap 'rm -rf "$work"' EXIT

# Random tokens of GPT-2's vocabulary (the model's cost does not depend on their values), as a
# nanoGPT .bin imported into a data set.
python3 - "$work/tokens.bin" <<'PY'
import random, struct, sys
random.seed(1)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<%dH" % 200000, *(random.randrange(50257) for _ in range(200000))))
PY
"$prepare" --from-bin "$work/tokens.bin" --output "$work/data" > /dev/null
data=$(ls "$work"/data/*.h5 | head -1)

wait_for_quiet_machine bench_pipeline_split
echo "bench_pipeline_split: calibrating this machine into $work/cpu.ini" >&2
# Unbound: the calibration counts the cores the process may run on (bound, one).
OMP_NUM_THREADS=1 "$mpiexec" -n 2 --bind-to none "$plan" --calibrate "$work/cpu.ini" "${shape[@]}" \
  --vocab-size 50257 --calibrate-seconds "${GPT_CALIBRATE_SECONDS:-20}" > /dev/null

run() {  # name round split
  local name=$1 round=$2 split=$3 out=$work/$1.$2
  "$mpiexec" -n 2 --bind-to core "$train" "${shape[@]}" "${run_options[@]}" --data "$data" \
    --pipeline-layers "$split" --cluster "$work/cpu.ini" --checkpoint-dir "$out.ck" \
    --metrics "$out.jsonl" --trace "$out.trace.json" > "$out.log" 2>&1 ||
    { cat "$out.log" >&2; exit 1; }
  echo "$name $round $out"
}

rounds=${GPT_BENCH_ROUNDS:-3}
specs=()
for ((round = 1; round <= rounds; ++round)); do
  specs+=("$(run even "$round" even)")
  specs+=("$(run auto "$round" auto)")
done
echo "model: $arch ${shape[*]}, GPT-2's vocabulary"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), flags:" \
  "$(grep -m1 -o -w 'avx512f' /proc/cpuinfo || echo 'no avx512f') $(nproc) cores;" \
  "load before $load_before"
python3 "$here/bench_pipeline_split.py" "${specs[@]}"
