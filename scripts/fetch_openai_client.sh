#!/usr/bin/env bash
# Fetches OpenAI's official JavaScript client (the npm package `openai`, version 6.30.1) into
# third_party/openai-node/package/, where the serving tests drive serve with it as a user's
# program would (tests/integration/openai_client_check.js). Version 6 has no dependencies and
# runs on Node.js 18 and later (7 asks for Node.js 22). From the npm registry through `npm pack`
# (no install, no scripts run; npm checks the tarball against the registry's integrity hash); the
# tarball is also pinned by SHA-256 below, so the tests always see the same bytes, and a mismatch
# installs nothing. Licence: Apache-2.0 (OpenAI). Fetched for testing, not part of this
# repository (third_party/ is not committed). Idempotent: does nothing when the package is there.
# Usage: fetch_openai_client.sh [DIR]   (DIR defaults to the repository's third_party/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/third_party}/openai-node"
version=6.30.1
tarball_sha=175f3e017a9bc14d36dc0f57d2596ee1c7134d7fa181b7d83b2716f69076b03e

[ -f "$dest/package/package.json" ] && [ -f "$dest/openai-$version.tgz.sha256" ] &&
  [ "$(cat "$dest/openai-$version.tgz.sha256")" = "$tarball_sha" ] && exit 0
command -v npm >/dev/null || { echo "error: npm not found (apt-get install npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "openai@$version" >/dev/null)
echo "$tarball_sha  $work/openai-$version.tgz" | sha256sum --check --status ||
  { echo "error: openai-$version.tgz does not match its pinned SHA-256" \
         "(scripts/fetch_openai_client.sh)" >&2; exit 1; }
tar -xzf "$work/openai-$version.tgz" -C "$work"
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/package" "$dest/package"
echo "$tarball_sha" > "$dest/openai-$version.tgz.sha256"
echo "fetched openai $version (the JavaScript client) into $dest"
