# Sourced by the benchmark scripts: waits for a quiet machine before timing, so a benchmark does
# not measure another job's load. GPT_BENCH_MAX_LOAD (default 1.5) is the 1-minute load average
# to wait below, GPT_BENCH_WAIT_TRIES (default 20) how many 15-s waits; sets load_before.
wait_for_quiet_machine() {  # name
  local name=$1 max_load=${GPT_BENCH_MAX_LOAD:-1.5} tries=${GPT_BENCH_WAIT_TRIES:-20} i
  load_ok() { awk -v max="$max_load" '{ exit !($1 < max) }' /proc/loadavg; }
  for ((i = 0; i < tries; ++i)); do
    load_ok && break
    echo "$name: load $(cut -d' ' -f1-3 /proc/loadavg) >= $max_load; waiting 15 s" >&2
    sleep 15
  done
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  load_ok || echo "$name: WARNING: running at load $load_before (>= $max_load)" >&2
}
