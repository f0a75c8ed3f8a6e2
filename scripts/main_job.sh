#!/usr/bin/env bash
# The main job: set up, build, and train GPT-2 on the built-in arithmetic corpus across MPI ranks
# (tensor parallel 2 x pipeline parallel 2, 4 ranks, by default), then ask the trained model sums.
# Usage: scripts/main_job.sh [extra train options]; RANKS=N and LAYOUT="--tp 2 --pp 2" override.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ranks=${RANKS:-4}
layout=${LAYOUT:---tp 2 --pp 2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # harmless when not root
mkdir -p runs
mpiexec -q --oversubscribe --bind-to none -n "$ranks" build/bin/train $layout \
  --checkpoint-dir runs/main --metrics runs/main/metrics.jsonl --log-every 50 "$@"
latest=runs/main/$(cat runs/main/latest)
for prompt in "123+456=" "310+158=" "250+249="; do
  build/bin/generate --checkpoint "$latest" --prompt "$prompt" --temperature 0 \
    --max-new-tokens 8 --stop-at-newline
done
