# Sourced by the benchmark scripts: their common start (the build's train program, the MPI
# environment of a root CI machine) and the wait for a quiet machine before timing, so a
# benchmark does not measure another job's load.

# bench_start NAME DEFAULT_STEPS [BUILD_DIR [STEPS]]: sets here, build, steps, train, mpiexec.
bench_start() {
  local name=$1
  here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
  build=${3:-$here/../../build}
  steps=${4:-$2}
  train=$build/bin/train
  [[ -x $train ]] || { echo "$name: no $train (build the train target)" >&2; exit 2; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
  mpiexec=${MPIEXEC:-mpiexec}
}

# GPT_BENCH_MAX_LOAD (default 1.5) is the 1-minute load average to wait below,
# GPT_BENCH_WAIT_TRIES (default 20) how many 15-s waits; sets load_before.
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
