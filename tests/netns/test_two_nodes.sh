#!/usr/bin/env bash
# End-to-end: one 4-rank `train --tp 2 --pp 2` across two emulated nodes (network namespaces
# joined by a tbf-shaped veth pair, scripts/netns/netns_lib.sh), checked against the same run
# without namespaces:
#   - the grid sees two nodes: a tp group placed across the link is refused without
#     --allow-tp-across-nodes;
#   - every step's loss equals the plain run's within 1e-5 relative (the network changes no
#     arithmetic);
#   - each direction's veth byte counter moved at least the bytes the run's metrics say crossed
#     (tp 2 ranks x pp_bytes / 2 a step, the activations one way and the gradients back);
#   - `plan --calibrate` run across the namespaces sees two nodes of 2 ranks on one machine (2
#     rank slots a node, the machine's cores halved) and measures the link between them as a
#     bandwidth curve, which `plan --map-by node` prices a tp group across;
#   - no namespace is left afterwards.
# Exit 77 (CTest SKIP_RETURN_CODE) where `ip netns add` is not permitted.
#
# Usage: tests/netns/test_two_nodes.sh BIN_DIR
set -euo pipefail
bin=${1:?usage: test_two_nodes.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/netns/netns_lib.sh
source "$here/../../scripts/netns/netns_lib.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpt-test-two-nodes-XXXXXX")
cleanup() { netns_down; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! netns_up; then
  echo "SKIP: cannot create network namespaces here" >&2
  exit 77
fi
created_a=$NETNS_A created_b=$NETNS_B
netns_shape 1gbit

export OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1
steps=3
args=(--n-layer 2 --n-head 4 --d-model 64 --seq-len 16 --global-batch-size 8
      --micro-batch-size 2 --steps "$steps" --eval-every 0 --threads 1 --seed 7 --tp 2 --pp 2
      --device cpu)

# 1. The same layout without namespaces (shared memory only).
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  timeout 120 mpiexec -n 4 --oversubscribe --bind-to none "$bin/train" "${args[@]}" \
  --checkpoint-dir "$work/plain.ck" --metrics "$work/plain.jsonl" > "$work/plain.log" 2>&1 ||
  { tail -20 "$work/plain.log" >&2; fail "the run without namespaces failed"; }

# 2. Two nodes: a tp group across the link must be refused (the host names differ).
if netns_mpirun 2 node --timeout 60 -- "$bin/train" "${args[@]}" \
  --checkpoint-dir "$work/refused.ck" > "$work/refused.log" 2>&1; then
  fail "tp 2 mapped across the two namespaces ran without --allow-tp-across-nodes"
fi
grep -q "spans two nodes" "$work/refused.log" ||
  { tail -20 "$work/refused.log" >&2; fail "no 'spans two nodes' error for tp across the link"; }
echo "ok: the grid sees two nodes (tp across the link refused)"

# 3. Two nodes: tp inside each, pp across the shaped link.
read -r a_tx0 _ b_tx0 _ < <(netns_counters)
netns_mpirun 2 slot --timeout 120 -- "$bin/train" "${args[@]}" --checkpoint-dir "$work/two.ck" \
  --metrics "$work/two.jsonl" > "$work/two.log" 2>&1 ||
  { tail -20 "$work/two.log" >&2; fail "the run across two namespaces failed"; }
read -r a_tx1 _ b_tx1 _ < <(netns_counters)

/usr/bin/python3 - "$work/plain.jsonl" "$work/two.jsonl" $((a_tx1 - a_tx0)) \
  $((b_tx1 - b_tx0)) "$steps" <<'EOF'
import json, sys
plain_path, two_path, a_to_b, b_to_a, steps = sys.argv[1:6]
def steps_of(path):
    with open(path) as f:
        return [m for m in map(json.loads, filter(str.strip, f)) if "loss" in m]
plain, two = steps_of(plain_path), steps_of(two_path)
assert len(plain) == len(two) == int(steps), (len(plain), len(two), steps)
for p, t in zip(plain, two):
    rel = abs(p["loss"] - t["loss"]) / abs(p["loss"])
    assert rel <= 1e-5, f"step {p['step']}: loss {t['loss']} across nodes, {p['loss']} plain"
print(f"ok: {len(two)} losses equal the plain run's (last {two[-1]['loss']:.6f})")
# Rank 0's pp_bytes counts its sends and its receives; each of the 2 tp ranks of stage 0 sends
# half of it to its peer on node B and receives the other half back.
crossed = sum(2 * m["pp_bytes"] // 2 for m in two)
for name, moved in (("A->B", int(a_to_b)), ("B->A", int(b_to_a))):
    assert moved >= crossed, f"veth {name} moved {moved} bytes, metrics say {crossed} crossed"
    print(f"ok: veth {name} moved {moved} bytes >= {crossed} the metrics say crossed")
EOF

# 4. The planner's calibration across the two nodes.
netns_mpirun 2 slot --timeout 120 -- "$bin/plan" --calibrate "$work/two.ini" \
  --calibrate-seconds 2 --n-layer 2 --n-head 4 --d-model 64 --seq-len 16 --vocab-size 256 \
  > "$work/calibrate.log" 2>&1 || { tail -20 "$work/calibrate.log" >&2; fail "calibration failed"; }
grep -q '^gpus_per_node = 2$' "$work/two.ini" || fail "calibration did not see 2 ranks a node"
cores=$(nproc)
expected_cores=$((cores / 2 > 0 ? cores / 2 : 1))
grep -q "^cores = $expected_cores\$" "$work/two.ini" ||
  fail "calibration did not halve the $cores cores between the two nodes on this machine"
sed -n '/^\[inter_node\]/,/^\[/p' "$work/two.ini" | grep -q '^curve = ' ||
  fail "calibration wrote no inter-node curve"
"$bin/plan" --cluster "$work/two.ini" --nodes 2 --n-layer 2 --n-head 4 --d-model 64 --seq-len 16 \
  --vocab-size 256 --global-batch-size 8 --micro-batch-size 2 --tp 2 --pp 2 --map-by node \
  --allow-tp-across-nodes --json > "$work/plan.jsonl" ||
  fail "plan did not price tp across the calibrated link"
echo "ok: calibration across the nodes: $(grep -c . "$work/plan.jsonl") layout(s) priced on it"
# 5. Nothing left behind.
netns_down
for ns in "$created_a" "$created_b"; do
  netns_exists "$ns" && fail "namespace $ns is still there"
done
echo "ok: namespaces removed"
