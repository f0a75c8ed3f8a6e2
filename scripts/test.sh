#!/usr/bin/env bash
# Set up, build, and run the whole test suite (CTest: unit, mpi, e2e, cli, reference).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
