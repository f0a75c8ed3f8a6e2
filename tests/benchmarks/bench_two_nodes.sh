#!/usr/bin/env bash
# TP versus PP across two emulated nodes (a program, not a test; needs root). Namespaces A and B
# joined by a tbf-shaped veth pair (scripts/netns/netns_lib.sh), 2 ranks in each, Open MPI's TCP
# between them, shared memory inside each. One model and global batch, four layouts of 4 ranks:
#   pp_across  --tp 2 --pp 2, ranks 0,1 on A (stage 0), 2,3 on B: tp inside a node, pp across
#   tp_across  --tp 2 --pp 2 --allow-tp-across-nodes, mapped A,B,A,B: the same grid and the same
#              arithmetic, but every tp group spans the link and each stage's pair stays inside
#   tp4_across --tp 4 --allow-tp-across-nodes: one tp group over both nodes
#   dp_across  --tp 2 --dp 2: tp inside a node, the gradient all-reduce across
# at each link rate (tbf on both veth ends; no latency shaping: this kernel has no netem), in
# interleaved rounds (round 1: every rate, every layout; round 2: again...) so a change of load
# touches all alike. Around each run it reads the veth byte counters; a --steps 0 run of each
# layout (start-up, grid, checkpoint, exit) is subtracted, so what is left is the steps' traffic.
# bench_two_nodes.py prints the table: tokens/s and step time (medians), the shares of the step
# in tp communication, pipeline waits and dp communication, the bytes per step that cross the
# link by the run's metrics and by the veth counters, and each layout's throughput against
# pp_across at the same rate.
#
# Usage: tests/benchmarks/bench_two_nodes.sh [build dir] [steps]
#   GPT_NETNS_RATES ("100mbit 1gbit none"), GPT_NETNS_LAYOUTS ("pp_across tp_across tp4_across
#   dp_across"), GPT_BENCH_ROUNDS (2), GPT_BENCH_MAX_LOAD (1.5) and GPT_BENCH_WAIT_TRIES (20) as
#   in bench_common.sh, GPT_BENCH_KEEP=DIR: keep the metrics and counter records there,
#   GPT_PLAN (BUILD/bin/plan): where it exists, each rate's link is first measured with
#   `plan --calibrate` run across the two namespaces (2 ranks in each, the same placement as the
#   layouts; the cluster file it writes has both links and each namespace's share of the cores),
#   and the table gets the planner's predicted step time of every layout on that file.
#   GPT_CALIBRATE_SECONDS (20): --calibrate's budget.
# Exit code 77 where namespaces cannot be created.
set -euo pipefail
# shellcheck source=bench_common.sh
source "$(dirname "$0")/bench_common.sh"
bench_start bench_two_nodes 10 "$@"
unset OMPI_MCA_btl  # netns_mpirun chooses the transports: self, vader inside a node, tcp across
# shellcheck source=../../scripts/netns/netns_lib.sh
source "$here/../../scripts/netns/netns_lib.sh"

read -r -a rates <<< "${GPT_NETNS_RATES:-100mbit 1gbit none}"
read -r -a layouts <<< "${GPT_NETNS_LAYOUTS:-pp_across tp_across tp4_across dp_across}"
rounds=${GPT_BENCH_ROUNDS:-2}
plan=${GPT_PLAN:-$build/bin/plan}
# ~0.9M parameters, 512 tokens a step (4 microbatches of 2 x 64): a tenth of a second of compute
# a step on 4 ranks over 2 cores, 2.4 MB of tp payload a rank, 0.5 MB of pipeline payload.
shape=(--n-layer 4 --n-head 4 --d-model 128 --seq-len 64 --global-batch-size 8
       --micro-batch-size 2)
model=("${shape[@]}" --eval-every 0 --warmup-steps 100 --seed 1234 --threads 1 --log-every 1000
       --device cpu)
export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1

layout_args() {  # name -> "MAP_BY train options..."
  case $1 in
    pp_across) echo "slot --tp 2 --pp 2" ;;
    tp_across) echo "node --tp 2 --pp 2 --allow-tp-across-nodes" ;;
    tp4_across) echo "slot --tp 4 --allow-tp-across-nodes" ;;
    dp_across) echo "slot --tp 2 --dp 2" ;;
    *) echo "bench_two_nodes: unknown layout '$1'" >&2; return 1 ;;
  esac
}

work=${GPT_BENCH_KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench-two-nodes-XXXXXX")}
mkdir -p "$work"
cleanup() {
  netns_down
  [[ -n ${GPT_BENCH_KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_up || exit 77
wait_for_quiet_machine bench_two_nodes
records=$work/runs.jsonl
: > "$records"

run() {  # name rate round steps
  local name=$1 rate=$2 round=$3 run_steps=$4 spec map
  spec=$(layout_args "$name")
  map=${spec%% *}
  read -r -a opts <<< "${spec#* }"
  local tag=$name.$rate.$round.$run_steps
  local args=("${model[@]}" "${opts[@]}" --steps "$run_steps" --checkpoint-dir "$work/$tag.ck"
              --metrics "$work/$tag.jsonl")
  echo "== $name at $rate, round $round, $run_steps steps: train ${args[*]}" >&2
  local c0 c1 d0 d1 start=$SECONDS
  c0=$(netns_counters)
  d0=$(netns_drops)
  netns_mpirun 2 "$map" --timeout 600 -- "$train" "${args[@]}" > "$work/$tag.log" 2>&1 ||
    { echo "bench_two_nodes: $tag failed:" >&2; tail -20 "$work/$tag.log" >&2; exit 1; }
  c1=$(netns_counters)
  d1=$(netns_drops)
  rm -rf "$work/$tag.ck"
  read -r a_tx0 a_rx0 b_tx0 b_rx0 <<< "$c0"
  read -r a_tx1 a_rx1 b_tx1 b_rx1 <<< "$c1"
  printf '{"layout":"%s","rate":"%s","round":%d,"steps":%d,"metrics":"%s","a_to_b":%d,"b_to_a":%d,"a_rx":%d,"b_rx":%d,"drops":%d,"wall_s":%d,"load":"%s"}\n' \
    "$name" "$rate" "$round" "$run_steps" "$work/$tag.jsonl" $((a_tx1 - a_tx0)) \
    $((b_tx1 - b_tx0)) $((a_rx1 - a_rx0)) $((b_rx1 - b_rx0)) $((d1 - d0)) \
    $((SECONDS - start)) "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$records"
  echo "   $((SECONDS - start)) s; veth A->B $((a_tx1 - a_tx0)) B, B->A $((b_tx1 - b_tx0)) B;" \
    "load average now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

calibrate() {  # rate: the link as `plan --calibrate` measures it, into $work/netns-RATE.ini
  local rate=$1 start=$SECONDS
  echo "== calibrate at $rate: plan --calibrate $work/netns-$rate.ini" >&2
  netns_mpirun 2 slot --timeout 600 -- "$plan" --calibrate "$work/netns-$rate.ini" \
    --n-layer 4 --n-head 4 --d-model 128 --seq-len 64 --vocab-size 256 \
    --calibrate-seconds "${GPT_CALIBRATE_SECONDS:-20}" > "$work/calibrate-$rate.log" 2>&1 ||
    { echo "bench_two_nodes: calibration at $rate failed:" >&2; tail -20 "$work/calibrate-$rate.log" >&2
      exit 1; }
  sed -i "s/^name = .*/name = netns-$rate/" "$work/netns-$rate.ini"
  # The shaper's bucket, which calibration does not measure (docs/PLANNER.md): each of a node's
  # 2 ranks' share of it, as the inter-node bandwidth is.
  if [[ $rate != none ]]; then
    local burst
    burst=$(netns_burst_bytes "$rate")
    sed -i "/^\[inter_node\]/a burst_kb = $(awk -v b="$burst" 'BEGIN { print b / 2 / 1000 }')" \
      "$work/netns-$rate.ini"
  fi
  grep '^calibrate:' "$work/calibrate-$rate.log" | grep -v 'gemm\|stream' >&2
  echo "   $((SECONDS - start)) s" >&2
}

# The start-up and shut-down traffic of each layout, unshaped.
netns_shape none
for name in "${layouts[@]}"; do run "$name" none 0 0; done
for ((round = 1; round <= rounds; ++round)); do
  for rate in "${rates[@]}"; do
    netns_shape "$rate"
    [[ $round == 1 && -x $plan ]] && calibrate "$rate"
    for name in "${layouts[@]}"; do run "$name" "$rate" "$round" "$steps"; done
  done
done
netns_shape none

echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
plan_args=()
[[ -x $plan ]] && plan_args=(--plan "$plan" --clusters "$work")
/usr/bin/python3 "$here/bench_two_nodes.py" --skip 2 "${shape[@]}" "${plan_args[@]}" "$records"
