#!/usr/bin/env bash
# The GPU suite for a lent GPU machine (16 cores, one H200, no network): configure and build with
# CUDA, run the gpu-labelled tests, bench_gpu and bench_torch_gpu.py, then print a summary table.
# Usage: tests/gpu/run_gpu_suite.sh [REPORT_DIR (default build-gpu/gpu-report)]
#
# Keeps going after a failure so the table always comes last; exits 1 when anything failed.
# REPORT_DIR receives configure.log, build.log, ctest.log, LastTest.log, bench_gpu.log,
# planner_vs_bench.log, bench_torch_gpu.log and summary.md (8 files). Environment:
#   GPT_GPU_SUITE_BUDGET  seconds for the whole script (default 470: under 8 minutes; steps are cut to fit)
#   GPT_GPU_SETUP         a file sourced first (e.g. to put carried MPI/HDF5/oneDNN on the paths;
#                         default tests/gpu/unpack_deps.sh when a carried .devdeps/ is there)
#   GPT_GPU_BUILD_DIR     the build folder (default build-gpu)
#   GPT_GPU_CMAKE_ARGS    extra cmake arguments
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
BUILD=${GPT_GPU_BUILD_DIR:-build-gpu}
REPORT=${1:-$BUILD/gpu-report}
mkdir -p "$REPORT" || exit 2
REPORT=$(cd "$REPORT" && pwd)
START=$(date +%s)
BUDGET=${GPT_GPU_SUITE_BUDGET:-470}
if [[ -z ${GPT_GPU_SETUP:-} && -d .devdeps ]]; then
  GPT_GPU_SETUP=tests/gpu/unpack_deps.sh  # the bundle of tests/gpu/bundle_deps.sh
fi
if [[ -n ${GPT_GPU_SETUP:-} ]]; then
  # shellcheck disable=SC1090
  source "$GPT_GPU_SETUP"
fi

ROWS=()      # "name|result|seconds|detail"
FAILURES=0

elapsed() { echo $(($(date +%s) - START)); }
remaining() { echo $((START + BUDGET - $(date +%s))); }
row() {  # name result seconds detail
  ROWS+=("$1|$2|$3|$4")
  [[ $2 == failed || $2 == "not run" ]] && FAILURES=$((FAILURES + 1))
  printf '== %-28s %-8s %6ss  %s\n' "$1" "$2" "$3" "$4"
}

# run_step NAME CAP RESERVE LOG COMMAND...: runs COMMAND with its output in LOG, for at most CAP
# seconds and never into the last RESERVE seconds of the budget. Sets STEP_RC and STEP_SECONDS.
run_step() {
  local name=$1 cap=$2 reserve=$3 log=$4
  shift 4
  local left=$(($(remaining) - reserve))
  local limit=$((cap < left ? cap : left))
  STEP_SECONDS=0
  if ((limit < 5)); then
    echo "not run: out of the time budget" >"$log"
    STEP_RC=125
    return
  fi
  echo "== $name (up to ${limit}s): $*"
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  STEP_RC=$?
  STEP_SECONDS=$(($(date +%s) - t0))
  if ((STEP_RC == 124 || STEP_RC == 137)); then echo "(timed out after ${limit}s)" >>"$log"; fi
}

# The first line of a log that looks like the reason of a failure.
first_error() {
  grep -m1 -E 'CMake Error|error:|Error [0-9]|No rule|Could NOT find|FAILED|Traceback|timed out|not run' "$1" 2>/dev/null |
    cut -c1-150 | tr '|' '/'
}

# The first of python3 and /usr/bin/python3 that imports the modules $1, else $2.
python_with() {  # MODULES FALLBACK
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import $1" 2>/dev/null; then
      command -v "$p"
      return
    fi
  done
  echo "$2"
}

# ---- the machine
{
  echo "GPU suite, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null ||
    echo "nvidia-smi: not available"
  command -v nvcc >/dev/null && nvcc --version | grep -m1 release
} >"$REPORT/machine.txt" 2>&1
cat "$REPORT/machine.txt"

# A Python with numpy and h5py for the training test (a GPU image may keep them in its own).
TEST_PYTHON=$(python_with 'numpy, h5py' /usr/bin/python3)

# ---- configure and build (only what the gpu tests and the benchmark need)
# shellcheck disable=SC2086
run_step configure 150 360 "$REPORT/configure.log" \
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGPT_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DGPT_GPU_TEST_PYTHON="$TEST_PYTHON" ${GPT_GPU_CMAKE_ARGS:-}
if ((STEP_RC == 0)); then
  row configure passed "$STEP_SECONDS" ""
  TARGETS=(train eval generate serve prepare-data plan test_cuda_kernels test_cuda_layers bench_gpu)
  run_step build 330 240 "$REPORT/build.log" make -C "$BUILD" -k -j16 "${TARGETS[@]}"
  if ((STEP_RC == 0)); then
    row build passed "$STEP_SECONDS" "${TARGETS[*]}"
  else
    row build failed "$STEP_SECONDS" "$(first_error "$REPORT/build.log")"
  fi
else
  row configure failed "$STEP_SECONDS" "$(first_error "$REPORT/configure.log")"
  echo "not run: configure failed" >"$REPORT/build.log"
  row build "not run" 0 "configure failed"
fi

# ---- the gpu tests (their TIMEOUT properties bound each; the budget bounds them all)
EXPECTED=()
if [[ -f $BUILD/CTestTestfile.cmake ]]; then
  mapfile -t EXPECTED < <(cd "$BUILD" && ctest -N -L gpu 2>/dev/null |
    sed -nE 's/^ *Test +#[0-9]+: +([^ ]+).*/\1/p')
  run_step ctest 330 150 "$REPORT/ctest.log" \
    bash -c "cd '$BUILD' && ctest -L gpu --output-on-failure -j8"
  cp "$BUILD/Testing/Temporary/LastTest.log" "$REPORT/LastTest.log" 2>/dev/null
  CTEST_TIMED_OUT=$((STEP_RC == 124 || STEP_RC == 137 || STEP_RC == 125))
  declare -A SEEN=()
  re='Test +#[0-9]+: +([^ ]+) +[.]*[ *]*([A-Za-z][A-Za-z :]*[A-Za-z]) +([0-9.]+) sec'
  while IFS= read -r line; do
    if [[ $line =~ $re ]]; then
      name=${BASH_REMATCH[1]} status=${BASH_REMATCH[2]} secs=${BASH_REMATCH[3]}
      SEEN[$name]=1
      case $status in
        Passed) row "$name" passed "$secs" "" ;;
        Skipped)
          reason=$(awk -v t="$name" '$0 ~ ("Testing: " t "$") { on = 1 } on && /SKIPPED/ { print; exit }' \
            "$REPORT/LastTest.log" 2>/dev/null | cut -c1-120 | tr '|' '/')
          row "$name" skipped "$secs" "${reason:-skipped} (on a GPU machine: look why)" ;;
        *) row "$name" failed "$secs" "$status" ;;
      esac
    fi
  done <"$REPORT/ctest.log"
  for name in "${EXPECTED[@]}"; do
    if [[ -z ${SEEN[$name]:-} ]]; then
      if ((CTEST_TIMED_OUT)); then row "$name" "not run" 0 "suite time budget"; else
        row "$name" "not run" 0 "no result in ctest.log"; fi
    fi
  done
  ((${#EXPECTED[@]} == 0)) && row "gpu tests" failed 0 "ctest found no test labelled gpu"
else
  echo "not run: no build" >"$REPORT/ctest.log"
  row "gpu tests" "not run" 0 "no configured build"
fi

# ---- benchmarks
json_field() {  # LOG FIELD: FIELD of the log's last JSON line
  grep -E '^\{' "$1" 2>/dev/null | tail -1 |
    sed -nE "s/.*\"$2\": *\"?([^,\"}]*)\"?.*/\1/p"
}
pct() { awk -v x="${1:-0}" 'BEGIN { printf "%.1f%%", 100 * x }'; }

OURS_TPS=""
BENCH=$BUILD/tests/benchmarks/bench_gpu
if [[ -x $BENCH ]]; then
  run_step bench_gpu 150 70 "$REPORT/bench_gpu.log" "$BENCH" --micro-batch 16 --steps 10
  case $STEP_RC in
    0)
      OURS_TPS=$(json_field "$REPORT/bench_gpu.log" tokens_per_s)
      detail="micro-batch $(json_field "$REPORT/bench_gpu.log" micro_batch):"
      detail+=" $(printf '%.0f' "$OURS_TPS") tokens/s,"
      detail+=" $(json_field "$REPORT/bench_gpu.log" tflops) TFLOP/s,"
      detail+=" MFU $(pct "$(json_field "$REPORT/bench_gpu.log" mfu_theoretical)") of"
      detail+=" $(json_field "$REPORT/bench_gpu.log" peak_tflops_theoretical) (theoretical),"
      detail+=" $(pct "$(json_field "$REPORT/bench_gpu.log" mfu_measured_peak)") of"
      detail+=" $(json_field "$REPORT/bench_gpu.log" gemm_peak_tflops) (measured GEMM peak)"
      row bench_gpu passed "$STEP_SECONDS" "$detail" ;;
    77) row bench_gpu skipped "$STEP_SECONDS" "no CUDA device visible" ;;
    *) row bench_gpu failed "$STEP_SECONDS" "exit $STEP_RC: $(first_error "$REPORT/bench_gpu.log")" ;;
  esac
else
  echo "not run: $BENCH was not built" >"$REPORT/bench_gpu.log"
  row bench_gpu "not run" 0 "not built"
fi

# The planner's prediction of bench_gpu's step (this project's kernels on the h200 preset, the
# same model, micro-batch and precision), beside the step bench_gpu measured.
PLAN=$BUILD/bin/plan
if [[ -n $OURS_TPS && -x $PLAN ]]; then
  run_step planner_vs_bench 30 60 "$REPORT/planner_vs_bench.log" "$PLAN" --cluster h200 \
    --nodes 1 --ranks 1 --n-layer 12 --n-head 12 --d-model 768 --seq-len 1024 \
    --vocab-size 50304 --global-batch-size 16 --micro-batch-size 16 --tp 1 --pp 1 \
    --precision bf16 --recompute none --json
  PREDICTED=$(json_field "$REPORT/planner_vs_bench.log" step_time_s)
  if ((STEP_RC == 0)) && [[ -n $PREDICTED ]]; then
    MEASURED=$(awk -v t="$OURS_TPS" 'BEGIN { printf "%.5f", 16 * 1024 / t }')
    row planner_vs_bench passed "$STEP_SECONDS" "$(awk -v m="$MEASURED" -v p="$PREDICTED" \
      'BEGIN { printf "step measured %.4f s, predicted %.4f s: measured / predicted %.3f", m, p, m / p }')"
  else
    row planner_vs_bench failed "$STEP_SECONDS" "exit $STEP_RC: $(first_error "$REPORT/planner_vs_bench.log")"
  fi
else
  echo "not run: no bench_gpu figure or no plan binary" >"$REPORT/planner_vs_bench.log"
  row planner_vs_bench "not run" 0 "needs bench_gpu's tokens/s and the plan binary"
fi

TORCH_PY=$(python_with torch python3)
run_step bench_torch_gpu 120 5 "$REPORT/bench_torch_gpu.log" \
  "$TORCH_PY" tests/benchmarks/bench_torch_gpu.py --micro-batch 16 --steps 10
if ((STEP_RC == 0)) && grep -q "PyTorch with CUDA not available" "$REPORT/bench_torch_gpu.log"; then
  row bench_torch_gpu skipped "$STEP_SECONDS" "$(head -1 "$REPORT/bench_torch_gpu.log")"
elif ((STEP_RC == 0)); then
  TORCH_TPS=$(json_field "$REPORT/bench_torch_gpu.log" tokens_per_s)
  detail="micro-batch $(json_field "$REPORT/bench_torch_gpu.log" micro_batch):"
  detail+=" $(printf '%.0f' "$TORCH_TPS") tokens/s (eager, SDPA, fused AdamW)"
  if [[ -n $OURS_TPS && -n $TORCH_TPS ]]; then
    detail+="; ours / PyTorch $(awk -v a="$OURS_TPS" -v b="$TORCH_TPS" 'BEGIN { printf "%.2fx", a / b }')"
  fi
  row bench_torch_gpu passed "$STEP_SECONDS" "$detail"
else
  row bench_torch_gpu failed "$STEP_SECONDS" "exit $STEP_RC: $(first_error "$REPORT/bench_torch_gpu.log")"
fi

# ---- the table, last
{
  head -3 "$REPORT/machine.txt"
  echo
  echo "| step | result | seconds | detail |"
  echo "|---|---|---|---|"
  for r in "${ROWS[@]}"; do
    IFS='|' read -r name result secs detail <<<"$r"
    echo "| $name | $result | $secs | $detail |"
  done
  echo
  if ((FAILURES > 0)); then
    echo "GPU suite: FAILED ($FAILURES failed or not run) in $(elapsed) s; logs in $REPORT"
  else
    echo "GPU suite: passed in $(elapsed) s; logs in $REPORT"
  fi
} >"$REPORT/summary.md"
rm -f "$REPORT/machine.txt"
echo
cat "$REPORT/summary.md"
((FAILURES == 0))
