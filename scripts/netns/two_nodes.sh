#!/usr/bin/env bash
# Runs one MPI job across two emulated nodes: namespaces gpt-node-a-PID and gpt-node-b-PID joined
# by a veth pair (10.233.0.1 and .2), each end shaped by tbf to RATE, PER_NODE ranks in each,
# Open MPI's TCP transport between them (netns_lib.sh says how). Prints the veth byte counters
# before and after the job, and removes the namespaces on exit, whatever happens. Needs root.
#
# Usage: scripts/netns/two_nodes.sh [--rate 100mbit|1gbit|none] [--per-node 2]
#            [--map-by slot|node] [--keep-going] -- COMMAND [ARGS...]
#   --map-by slot (default): ranks 0..PER_NODE-1 on node A, the rest on B, so with
#   `train --tp PER_NODE` the tp groups stay inside a node; --map-by node alternates A, B, A, B,
#   so `train --tp 2 --allow-tp-across-nodes` puts every tp group across the link.
# Example:
#   scripts/netns/two_nodes.sh --rate 100mbit -- build/bin/train --tp 2 --pp 2 --steps 10
# Exit code: the command's; 77 where namespaces cannot be created (not root, no CAP_SYS_ADMIN).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=netns_lib.sh
source "$here/netns_lib.sh"

rate=none per_node=2 map_by=slot
while (($#)); do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --per-node) per_node=$2; shift 2 ;;
    --map-by) map_by=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "two_nodes.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "two_nodes.sh: no command after --" >&2; exit 2; }

trap netns_down EXIT
trap 'exit 130' INT TERM
netns_up || exit 77
netns_shape "$rate"
echo "two_nodes: $NETNS_A ($NETNS_ADDR_A, $NETNS_DEV_A) <-> $NETNS_B ($NETNS_ADDR_B," \
  "$NETNS_DEV_B), rate $rate, $per_node ranks per node, --map-by $map_by" >&2
read -r a_tx0 a_rx0 b_tx0 b_rx0 < <(netns_counters)
status=0
netns_mpirun "$per_node" "$map_by" -- "$@" || status=$?
read -r a_tx1 a_rx1 b_tx1 b_rx1 < <(netns_counters)
echo "two_nodes: veth bytes A->B $((a_tx1 - a_tx0)), B->A $((b_tx1 - b_tx0))" \
  "(A rx $((a_rx1 - a_rx0)), B rx $((b_rx1 - b_rx0)))" >&2
exit "$status"
