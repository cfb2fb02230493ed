#!/usr/bin/env bash
# Installs what building the web app needs, skipping whatever is already present at the pinned version.
# Safe to run again: a warm machine does nothing here but a few version checks.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130   # must equal the `wasm-bindgen` pin in Cargo.toml
BINARYEN_VERSION=132           # npm binaryen's wasm-opt; Debian's 108 corrupts the output

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  echo "setup: installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (several minutes, once)"
  # No --locked: the CLI's lock file names a webpki-roots version the registry does not serve.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

if [ ! -x tools/node_modules/.bin/wasm-opt ] || [ ! -d tools/node_modules/playwright-core ] || \
   ! tools/node_modules/.bin/wasm-opt --version 2>/dev/null | grep -q "version $BINARYEN_VERSION"; then
  echo "setup: installing binaryen@$BINARYEN_VERSION (wasm-opt) from npm"
  npm ci --prefix tools --no-audit --no-fund --silent
fi
