#!/usr/bin/env bash
# Runs the fuzz targets of the readers of outside files (tests/fuzz/fuzz_*.cpp), one at a time.
#   tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]
#       Longer runs (default 300 s a target, every target): each grows a work corpus outside the
#       repository, $GPT_FUZZ_WORK/<target> (default ~/.cache/gpt-fuzz), started from the
#       committed seeds and merged (new coverage only) after its run. Findings are left in
#       $GPT_FUZZ_WORK/findings; commit each, after its fix, as tests/fuzz/corpus/<target>/regress-*.
#   tests/fuzz/run_fuzz.sh --suite BIN_DIR
#       The CTest fuzz_readers: every target for GPT_FUZZ_SUITE_SECONDS (default 4) from the
#       committed corpus, nothing written to the repository; exit 77 (skipped) when BIN_DIR has no
#       fuzz targets (the fuzz build needs clang-14 and libFuzzer).
# The binaries are build/fuzz/bin's unless GPT_FUZZ_BIN names another folder. Any crash,
# sanitizer report, exception other than gpt::Error, malformed message (fuzz_common.h), input
# slower than 10 s, allocation over 1 GB or RSS over 2 GB fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
corpus_root="$root/tests/fuzz/corpus"
limits=(-timeout=10 -malloc_limit_mb=1024 -rss_limit_mb=2048 -print_final_stats=1)
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# "execs runs, time s": from libFuzzer's final stats.
summary() {
  local log=$1
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  local cov
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  echo "${execs:-?} executions, coverage ${cov:-?} edges"
}

if [ "${1:-}" = "--suite" ]; then
  bin=${2:?--suite needs the folder of the fuzz targets}
  shopt -s nullglob
  targets=("$bin"/fuzz_*)
  if [ ${#targets[@]} -eq 0 ]; then
    echo "no fuzz targets in $bin (the fuzz build needs clang-14 and libFuzzer): skipped"
    exit 77
  fi
  seconds=${GPT_FUZZ_SUITE_SECONDS:-4}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  export TMPDIR="$work"  # the targets' files (fuzz_common.h), left behind by a finding's abort
  failed=0
  for target in "${targets[@]}"; do
    name=$(basename "$target")
    mkdir -p "$work/$name" "$work/artifacts-$name"
    log="$work/$name.log"
    if "$target" "${limits[@]}" -max_total_time="$seconds" \
        -artifact_prefix="$work/artifacts-$name/" "$work/$name" "$corpus_root/$name" >"$log" 2>&1; then
      echo "$name: $(summary "$log") in ${seconds} s, no findings"
    else
      failed=1
      echo "$name: FINDING (exit $?); the end of its log:"
      tail -40 "$log"
      for crash in "$work/artifacts-$name"/*; do
        [ -f "$crash" ] || continue
        echo "input (base64; commit it as tests/fuzz/corpus/$name/regress-<what> after the fix):"
        base64 -w 0 "$crash" | head -c 8000
        echo
      done
    fi
  done
  exit $failed
fi

seconds=${1:-300}
shift || true
bin=${GPT_FUZZ_BIN:-$root/build/fuzz/bin}
work_root=${GPT_FUZZ_WORK:-$HOME/.cache/gpt-fuzz}
mkdir -p "$work_root/findings"
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for t in "$bin"/fuzz_*; do [ -x "$t" ] && targets+=("$(basename "$t")"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets in $bin: build them first (tests/fuzz)"; exit 1; }
status=0
for name in "${targets[@]}"; do
  work="$work_root/$name"
  mkdir -p "$work"
  log="$work_root/$name.log"
  start=$(date +%s)
  export TMPDIR="$work_root/tmp"  # the targets' files (fuzz_common.h), removed after the run
  mkdir -p "$TMPDIR"
  if nice -n 10 "$bin/$name" "${limits[@]}" -max_total_time="$seconds" \
      -artifact_prefix="$work_root/findings/$name-" "$work" "$corpus_root/$name" >"$log" 2>&1; then
    result="no findings"
  else
    result="FINDING: see $log and $work_root/findings/$name-*"
    status=1
  fi
  rm -rf "$work_root/tmp"
  # Keep only inputs with new coverage in the work corpus.
  mkdir -p "$work.merged"
  nice -n 10 "$bin/$name" "${limits[@]}" -merge=1 "$work.merged" "$work" >/dev/null 2>&1 &&
    rm -rf "$work" && mv "$work.merged" "$work" || rm -rf "$work.merged"
  echo "$name: $(summary "$log") in $(($(date +%s) - start)) s, $(ls "$work" | wc -l) inputs in its work corpus; $result"
done
exit $status
