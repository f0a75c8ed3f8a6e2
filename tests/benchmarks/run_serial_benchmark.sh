#!/usr/bin/env bash
# The serial-trainer benchmark, ours beside PyTorch in one run (ratios are what counts on a shared
# machine): bench_train (with the oneDNN sgemm peak of this machine) then bench_torch.py, at 1 and
# 2 threads each. PyTorch runs with OPENBLAS_CORETYPE=SkylakeX, its best setting here, and needs
# Debian's OpenBLAS (libopenblas0-pthread; without it torch falls back to the reference BLAS).
# Usage: tests/benchmarks/run_serial_benchmark.sh [build dir] [steps] [gpt2|llama]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
steps=${2:-5}
arch=${3:-gpt2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ours=$("$build/tests/benchmarks/bench_train" "$steps" 2 "$arch")
echo "$ours" | grep -v '^{'
theirs=""
for t in 1 2; do  # OpenBLAS sizes its own pool from the environment, not from torch
  theirs+=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t OPENBLAS_CORETYPE=SkylakeX \
            /usr/bin/python3 "$here/bench_torch.py" "$steps" "$t" "$arch")$'\n'
done
echo "$theirs" | grep -v '^{'
/usr/bin/python3 - "$ours" "$theirs" <<'PY'
import json, sys
ours = {r["threads"]: r for r in map(json.loads, (l for l in sys.argv[1].splitlines() if l.startswith("{")))}
theirs = {r["threads"]: r for r in map(json.loads, (l for l in sys.argv[2].splitlines() if l.startswith("{")))}
for t in sorted(ours):
    o, p = ours[t], theirs[t]
    print(f"threads {t}: ours {o['tokens_per_s']:.0f} tok/s, PyTorch {p['tokens_per_s']:.0f} tok/s, "
          f"ratio {o['tokens_per_s'] / p['tokens_per_s']:.2f}x; ours at "
          f"{100 * o['gflops'] / o['sgemm_peak_gflops']:.0f}% of sgemm peak and "
          f"{100 * o['gflops'] / o['fma_peak_gflops']:.0f}% of the FMA peak "
          f"({o['fma_peak_gflops']:.0f} GFLOP/s), PyTorch at "
          f"{100 * p['gflops'] / o['sgemm_peak_gflops']:.0f}% and "
          f"{100 * p['gflops'] / o['fma_peak_gflops']:.0f}%")
PY
