# shellcheck shell=bash
# Two emulated nodes on one machine (sourced by two_nodes.sh, bench_two_nodes.sh and the netns
# test): network namespaces A and B joined by a veth pair with private addresses, each end shaped
# by a tbf qdisc (bandwidth only: this kernel has no netem, so latency cannot be shaped), and an
# Open MPI launch with mpirun inside A and node B's daemon started, through a plm_rsh_agent
# script, inside B under its own host name (unshare --uts), so the ranks see two nodes.
#
# Every name carries the owning shell's PID (gpt-node-a-PID, veth gpta-PID), traffic goes only to
# the namespaces' own addresses (10.233.0.1 and .2), and netns_down removes all of it; leftovers
# of a dead owner are removed by netns_cleanup_leftovers. Needs root (ip netns add).
#
# Usage (after `source netns_lib.sh`):
#   netns_up || exit 77            # creates; returns 1 (and prints why) where not permitted
#   trap netns_down EXIT
#   netns_shape 100mbit            # or "none": remove the shaping
#   netns_mpirun 2 slot -- train ...   # ranks per node, --map-by slot|node, then the command
#   netns_counters                 # "A_tx A_rx B_tx B_rx" bytes of the two veth ends
#   netns_down

NETNS_PREFIX=gpt-node-
NETNS_SUBNET=10.233.0.0/24
NETNS_ADDR_A=10.233.0.1
NETNS_ADDR_B=10.233.0.2

# netns_up [ID]: sets NETNS_A, NETNS_B, NETNS_DEV_A, NETNS_DEV_B, NETNS_DIR (agent, hostfile).
netns_up() {
  local id=${1:-$$}
  NETNS_A=${NETNS_PREFIX}a-$id
  NETNS_B=${NETNS_PREFIX}b-$id
  NETNS_DEV_A=gpta-$id
  NETNS_DEV_B=gptb-$id
  netns_cleanup_leftovers
  if ! ip netns add "$NETNS_A" 2>/dev/null; then
    echo "netns: 'ip netns add' is not permitted here (needs root and CAP_SYS_ADMIN)" >&2
    return 1
  fi
  ip netns add "$NETNS_B" || return 1
  ip link add "$NETNS_DEV_A" netns "$NETNS_A" type veth peer name "$NETNS_DEV_B" netns "$NETNS_B" ||
    return 1
  ip -n "$NETNS_A" addr add "$NETNS_ADDR_A/24" dev "$NETNS_DEV_A" &&
    ip -n "$NETNS_B" addr add "$NETNS_ADDR_B/24" dev "$NETNS_DEV_B" &&
    ip -n "$NETNS_A" link set lo up && ip -n "$NETNS_B" link set lo up &&
    ip -n "$NETNS_A" link set "$NETNS_DEV_A" up && ip -n "$NETNS_B" link set "$NETNS_DEV_B" up ||
    return 1

  NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gpt-netns-$id-XXXXXX")
  # The agent Open MPI's rsh launcher calls as `agent HOST orted ARGS...` for node B. Open MPI
  # quotes its arguments for a remote shell, so they go through `sh -c` as ssh would run them.
  cat > "$NETNS_DIR/agent.sh" <<EOF
#!/bin/sh
# plm_rsh_agent for the two emulated nodes: start the command inside namespace B, under B's name.
shift
exec ip netns exec "$NETNS_B" unshare --uts sh -c "hostname $NETNS_B && exec \$*"
EOF
  chmod +x "$NETNS_DIR/agent.sh"
  return 0
}

# netns_shape RATE|none: tbf on both veth ends (each shapes what it sends). burst: 1 ms at the
# rate or 64 KiB (one GSO segment), whichever is larger; queue: 50 ms at the rate.
netns_shape() {
  local rate=$1 ns dev
  for ns in "$NETNS_A:$NETNS_DEV_A" "$NETNS_B:$NETNS_DEV_B"; do
    dev=${ns#*:}
    ns=${ns%%:*}
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    [[ $rate == none ]] && continue
    local burst
    burst=$(netns_burst_bytes "$rate") || return 1
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms ||
      return 1
  done
}

# netns_burst_bytes RATE: the tbf bucket netns_shape gives a link of RATE, in bytes.
netns_burst_bytes() {
  local bits burst
  bits=$(netns_rate_bits "$1") || return 1
  burst=$((bits / 8 / 1000))
  ((burst < 65536)) && burst=65536
  echo "$burst"
}

# netns_rate_bits 100mbit|1gbit|...: the rate in bits per second.
netns_rate_bits() {
  local r=${1,,}
  case $r in
    *gbit) echo $((${r%gbit} * 1000000000)) ;;
    *mbit) echo $((${r%mbit} * 1000000)) ;;
    *kbit) echo $((${r%kbit} * 1000)) ;;
    *bit) echo "${r%bit}" ;;
    *) echo "netns: rate '$1' is not NNNkbit/mbit/gbit" >&2; return 1 ;;
  esac
}

# netns_counters: tx and rx bytes of veth A, then of veth B (the kernel's interface counters:
# whole Ethernet frames, so TCP/IP headers, ACKs and MPI's own messages are included).
netns_counters() {
  local a_tx a_rx b_tx b_rx
  a_tx=$(ip netns exec "$NETNS_A" cat "/sys/class/net/$NETNS_DEV_A/statistics/tx_bytes")
  a_rx=$(ip netns exec "$NETNS_A" cat "/sys/class/net/$NETNS_DEV_A/statistics/rx_bytes")
  b_tx=$(ip netns exec "$NETNS_B" cat "/sys/class/net/$NETNS_DEV_B/statistics/tx_bytes")
  b_rx=$(ip netns exec "$NETNS_B" cat "/sys/class/net/$NETNS_DEV_B/statistics/rx_bytes")
  echo "$a_tx $a_rx $b_tx $b_rx"
}

# netns_drops: packets the two tbf qdiscs dropped so far (their queue overflowed; TCP resends
# them, so the veth counters then carry some payload twice). 0 while unshaped.
netns_drops() {
  local a b
  a=$(ip netns exec "$NETNS_A" tc -s qdisc show dev "$NETNS_DEV_A" root |
    awk '/dropped/ { sub(",", "", $7); print $7; exit }')
  b=$(ip netns exec "$NETNS_B" tc -s qdisc show dev "$NETNS_DEV_B" root |
    awk '/dropped/ { sub(",", "", $7); print $7; exit }')
  echo $((${a:-0} + ${b:-0}))
}

# netns_mpirun PER_NODE MAP_BY [mpirun options...] -- COMMAND...: 2 x PER_NODE ranks, PER_NODE
# on each node; --map-by slot fills A first (ranks 0..PER_NODE-1 on A), --map-by node alternates
# (even ranks on A, odd on B). mpirun runs inside A under A's name; B's daemon comes through the
# agent. TCP between the nodes, shared memory (vader) inside one. Set OMP_NUM_THREADS etc. in the
# environment: -x forwards OMP_NUM_THREADS and OMPI_MCA_mpi_yield_when_idle where set.
netns_mpirun() {
  local per_node=$1 map_by=$2
  shift 2
  local extra=()
  while (($#)) && [[ $1 != -- ]]; do extra+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  printf '%s slots=%d\n%s slots=%d\n' "$NETNS_A" "$per_node" "$NETNS_B" "$per_node" \
    > "$NETNS_DIR/hostfile"
  local forward=()
  local v
  for v in OMP_NUM_THREADS OMPI_MCA_mpi_yield_when_idle; do
    [[ -n ${!v:-} ]] && forward+=(-x "$v")
  done
  # The transports are this function's choice: an OMPI_MCA_btl of the caller (the test suite
  # sets self,vader) is dropped.
  # shellcheck disable=SC2016  # $1 and $@ belong to the inner sh
  env -u OMPI_MCA_btl OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$NETNS_A" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh \
    "$NETNS_A" mpirun -np $((2 * per_node)) --hostfile "$NETNS_DIR/hostfile" \
    --map-by "$map_by" --bind-to none --oversubscribe \
    --mca plm_rsh_agent "$NETNS_DIR/agent.sh" \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$NETNS_SUBNET" \
    --mca oob_tcp_if_include "$NETNS_SUBNET" \
    "${forward[@]}" "${extra[@]}" "$@" &
  # In the background so that a signal's trap runs now, not when mpirun ends; every exec above
  # replaces its process, so this pid is mpirun's, and netns_down can stop it.
  NETNS_JOB=$!
  local status=0
  wait "$NETNS_JOB" || status=$?
  NETNS_JOB=
  return "$status"
}

# netns_down: removes this owner's namespaces (the veth pair goes with them) and files.
netns_down() {
  [[ -n ${NETNS_A:-} ]] || return 0
  # A job still running (a signal ended the caller): mpirun takes its ranks and B's daemon down
  # on TERM; a namespace of a process that outlives it would live on unnamed.
  if [[ -n ${NETNS_JOB:-} ]] && kill -0 "$NETNS_JOB" 2>/dev/null; then
    kill -TERM "$NETNS_JOB" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; ++i)); do kill -0 "$NETNS_JOB" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$NETNS_JOB" 2>/dev/null || true
  fi
  NETNS_JOB=
  ip netns del "$NETNS_A" 2>/dev/null || true
  ip netns del "$NETNS_B" 2>/dev/null || true
  [[ -n ${NETNS_DIR:-} && -d $NETNS_DIR ]] && rm -rf "$NETNS_DIR"
  return 0
}

# netns_cleanup_leftovers: removes gpt-node-{a,b}-PID namespaces whose owner PID is gone.
netns_cleanup_leftovers() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns == "${NETNS_PREFIX}"[ab]-* ]] || continue
    pid=${ns##*-}
    [[ $pid =~ ^[0-9]+$ ]] || continue
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "netns: removing leftover namespace $ns (owner $pid is gone)" >&2
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
}

# netns_exists NAME: whether a namespace of that name is listed.
netns_exists() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"
}
