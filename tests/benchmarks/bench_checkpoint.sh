#!/usr/bin/env bash
# Checkpoint save and load benchmark (a program, not a test): one model of about 300 MB of
# checkpoint (25 M parameters with AdamW state), saved and loaded at 1, 4 and 8 ranks by two
# builds side by side in one invocation (e.g. main's before a change and the branch's after).
#   save: wall time of `train --steps 0` (start, initialise, write the step-0 checkpoint);
#   load: wall time of `train --resume FILE --steps 1` on a step-1 checkpoint (start, open,
#         verify the crc32s, read the slabs, then "nothing to train"); the file is written once,
#         by the after build at 1 rank (the format is the same, whatever the layout).
# Both include the same start-up and initialisation in both builds; the difference between the
# builds is the checkpoint code's. Each is the median of --reps runs, the page cache warm.
#
# Usage: tests/benchmarks/bench_checkpoint.sh BEFORE_BUILD AFTER_BUILD [reps]
#   GPT_BENCH_MAX_LOAD / GPT_BENCH_WAIT_TRIES as bench_common.sh; GPT_BENCH_DIR: the folder to
#   write checkpoints in (default a temporary folder under TMPDIR).
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_checkpoint 3 "$2" "${3:-3}"
before=$1 after=$2 reps=$steps

model=(--n-layer 8 --n-head 8 --d-model 512 --seq-len 128 --global-batch-size 8
       --micro-batch-size 1 --eval-every 0 --seed 1234)
declare -A layouts=([1]="--tp 1" [4]="--tp 2 --pp 2" [8]="--tp 2 --dp 2 --pp 2")

wait_for_quiet_machine bench_checkpoint
work=$(mktemp -d "${GPT_BENCH_DIR:-${TMPDIR:-/tmp}}/gpt-bench-checkpoint-XXXXXX")
trap 'rm -rf "$work"' EXIT

seconds() {  # command...: wall seconds of a run that must succeed
  local start end
  start=$(date +%s.%N)
  "$@" > "$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The step-1 checkpoint every load reads.
seconds "$mpiexec" -n 1 "$after/bin/train" --device cpu "${model[@]}" --steps 1 \
  --checkpoint-dir "$work/load" > /dev/null
loadfile=$work/load/step-00000001.h5

printf '%-6s %-24s %-7s %10s %10s %10s %10s\n' ranks layout MB save_bef save_aft load_bef \
  load_aft
for np in 1 4 8; do
  # shellcheck disable=SC2206
  layout=(${layouts[$np]})
  declare -A t=()
  for build in before after; do
    dir=${!build}
    saves=() loads=()
    for ((r = 0; r < reps; ++r)); do
      rm -rf "$work/ck"
      run=("$mpiexec" --oversubscribe -n "$np" "$dir/bin/train" --device cpu "${model[@]}"
           "${layout[@]}" --checkpoint-dir "$work/ck")
      saves+=("$(seconds "${run[@]}" --steps 0)")
      loads+=("$(seconds "${run[@]}" --steps 1 --resume "$loadfile")")
    done
    t[save_$build]=$(median "${saves[@]}")
    t[load_$build]=$(median "${loads[@]}")
  done
  mb=$(du -m "$work/ck/step-00000000.h5" | cut -f1)
  printf '%-6s %-24s %-7s %10.2f %10.2f %10.2f %10.2f\n' "$np" "${layouts[$np]}" "$mb" \
    "${t[save_before]}" "${t[save_after]}" "${t[load_before]}" "${t[load_after]}"
done
echo "wall seconds, median of $reps; load average before: $load_before; $(nproc) cores"
