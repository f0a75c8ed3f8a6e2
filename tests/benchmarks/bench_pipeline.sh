#!/usr/bin/env bash
# Pipeline-schedule benchmark (a program, not a test): one compute-dominated model trained at
# --pp 2 on the two cores of this machine (2 ranks, 1 thread each) with every schedule --
# gpipe, 1f1b, interleaved (--virtual-stages 2), zb-h1 -- and microbatch counts m in
# {1, 2, 4, 8, 16} where the schedule takes them (interleaved: m a multiple of pp; zb-h1:
# m >= pp), then a table (bench_pipeline.py) of tokens/s (median of the step lines after the
# first 2), the measured bubble of stage 0 (pp_wait_s / step_time_s; only global rank 0 writes
# metrics, and rank 0 is stage 0), the theoretical bubble beside it, the load average around each
# run with the share of both cores the run's own processes got, and the throughput of each
# schedule relative to 1f1b at the same m.
#
# A second, smaller sweep (GPT_BENCH_SPIN=1, the default) repeats 1f1b and zb-h1 at m = 2 and 8
# under three MPI wait policies, to show how much of the measured bubble is the waiting rank
# stealing the core from the computing one on an oversubscribed machine:
#   none  : --bind-to none (the default above; Open MPI busy-polls in blocking receives)
#   yield : --bind-to none with OMPI_MCA_mpi_yield_when_idle=1 (sched_yield while polling)
#   core  : --bind-to core (each rank pinned to its own core)
#
# Usage: tests/benchmarks/bench_pipeline.sh [build dir] [steps]
#   GPT_BENCH_MAX_LOAD (1.5): wait until the 1-minute load average is below it before the first
#   run; GPT_BENCH_WAIT_TRIES (20) checks 15 s apart, then it runs anyway and says so.
#   GPT_BENCH_MS ("1 2 4 8 16"), GPT_BENCH_SCHEDULES ("gpipe 1f1b interleaved zb-h1"),
#   GPT_BENCH_SPIN (1): the wait-policy sweep; 0 skips it. GPT_BENCH_EXTRA: more train options.
#   GPT_BENCH_TRACE (auto): also pass --trace (steps 2..4 of every rank) where train has it, so the
#   table also shows each stage's wait from the trace, its idle share, and the bubble simulated
#   from the traced per-action costs; 0 never, 1 always.
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_pipeline 20 "$@"

pp=2
vstages=2
micro=2
n_layer=8
# Compute-dominated: ~6.4M parameters; a microbatch is 128 tokens, its activations 64 KiB.
model=(--n-layer "$n_layer" --n-head 4 --d-model 256 --seq-len 64 --micro-batch-size "$micro"
       --steps "$steps" --eval-every 0 --warmup-steps 100 --seed 1234)
# shellcheck disable=SC2206
extra=(${GPT_BENCH_EXTRA:-})
read -r -a ms <<< "${GPT_BENCH_MS:-1 2 4 8 16}"
read -r -a schedules <<< "${GPT_BENCH_SCHEDULES:-gpipe 1f1b interleaved zb-h1}"

load1() { cut -d' ' -f1 /proc/loadavg; }
wait_for_quiet_machine bench_pipeline

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-pipeline-XXXXXX")
[[ -n ${GPT_BENCH_KEEP:-} ]] && echo "bench_pipeline: keeping $work" >&2 || trap 'rm -rf "$work"' EXIT

trace=${GPT_BENCH_TRACE:-auto}
if [[ $trace == auto ]]; then
  trace=0
  "$train" --help 2>&1 | grep -q 'trace_to_svg' && trace=1
fi
echo "bench_pipeline: --trace $( ((trace)) && echo on || echo off)" >&2

specs=()
run() {  # name policy schedule m
  local name=$1 policy=$2 schedule=$3 m=$4
  local layout=(--pp "$pp" --schedule "$schedule" --global-batch-size $((micro * m)))
  [[ $schedule == interleaved ]] && layout+=(--virtual-stages "$vstages")
  local args=("${model[@]}" "${extra[@]}" --threads 1 "${layout[@]}"
              --checkpoint-dir "$work/$name.ck" --metrics "$work/$name.jsonl" --log-every 1000)
  ((trace)) && args+=(--trace "$work/$name.trace.json")
  local bind=none env=()
  [[ $policy == core ]] && bind=core
  [[ $policy == yield ]] && env=(OMPI_MCA_mpi_yield_when_idle=1)
  echo "== $name: env ${env[*]} OMP_NUM_THREADS=1 $mpiexec --oversubscribe --bind-to $bind" \
       "-n $pp $train ${args[*]}" >&2
  local before start=$SECONDS
  before=$(load1)
  # /usr/bin/time: the CPU time of mpiexec and its ranks. The ranks poll while they wait, so
  # alone on the machine they hold both cores for nearly the whole run; a cpu share well below
  # ~95% means something else had a core during the run.
  env "${env[@]}" OMP_NUM_THREADS=1 timeout 900 /usr/bin/time -f "%e %U %S" -o "$work/$name.time" \
    "$mpiexec" --oversubscribe --bind-to "$bind" -n "$pp" "$train" "${args[@]}" \
    > "$work/$name.log" 2>&1 \
    || { echo "bench_pipeline: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  local cpu
  cpu=$(awk -v n="$pp" '{ printf "%.0f", 100 * ($2 + $3) / (n * $1) }' "$work/$name.time")
  echo "$before $(load1) $cpu" > "$work/$name.load"
  echo "   $((SECONDS - start)) s; load average before $before, now $(load1); cpu $cpu%" >&2
  specs+=("$name=$work/$name.jsonl")
}

valid() {  # schedule m
  case $1 in
    interleaved) (($2 % pp == 0)) ;;
    zb-h1) (($2 >= pp)) ;;
    *) true ;;
  esac
}

for m in "${ms[@]}"; do
  for s in "${schedules[@]}"; do
    if valid "$s" "$m"; then run "${s}_m${m}_none" none "$s" "$m"; fi
  done
done
if [[ ${GPT_BENCH_SPIN:-1} == 1 ]]; then
  for m in 2 8; do
    for s in 1f1b zb-h1; do
      run "${s}_m${m}_yield" yield "$s" "$m"
      run "${s}_m${m}_core" core "$s" "$m"
    done
  done
fi

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/bench_pipeline.py" --skip 2 --pp "$pp" --virtual-stages "$vstages" \
  "${specs[@]}"
