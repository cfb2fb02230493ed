#!/usr/bin/env bash
# Installs what the tests need (idempotent) and runs every test:
#   0. gates: `cargo fmt --check`, and clippy with warnings as errors for the native and wasm32 targets;
#   1. native: unit tests, naga validation of every shader, GPU kernels on lavapipe vs the CPU reference;
#   2. in the browser: the kernels through WebGPU (SwiftShader) in headless Chromium (wasm-bindgen-test);
#   3. end to end: the release build served on a free 127.0.0.1 port, driven as a user in headless Chromium.
# Ends with one line "N passed, N failed" summing the tests; a failed gate counts as one failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
echo "=== setup took ${SECONDS} s"

log_dir=$(mktemp -d)
failed_stages=()
# lavapipe warns (harmlessly) without a runtime dir; give it a private one.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then XDG_RUNTIME_DIR=$(mktemp -d); chmod 700 "$XDG_RUNTIME_DIR"; export XDG_RUNTIME_DIR; fi

stage() {  # stage NAME COMMAND...: runs it, keeps its output for the tally, prints its duration
  local name=$1; shift
  local started=$SECONDS
  echo "=== $name"
  if ! "$@" 2>&1 | tee "$log_dir/$name.log"; then failed_stages+=("$name"); fi
  echo "=== $name took $((SECONDS - started)) s"
}

stage format cargo fmt --check
stage lint cargo clippy --locked --all-targets -- -D warnings
# wasm32: the app and the in-browser test (the native integration tests do not build for the web).
stage lint-wasm cargo clippy --locked --target wasm32-unknown-unknown --lib --bins --test web -- -D warnings
stage native cargo test --locked
stage in-browser env CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_TIMEOUT=300 \
  WASM_BINDGEN_TEST_WEBDRIVER_JSON="$PWD/tests/webdriver.json" \
  cargo test --locked --release --target wasm32-unknown-unknown --test web
stage build bash scripts/build.sh
if [[ ! " ${failed_stages[*]} " =~ " build " ]]; then
  stage end-to-end node --test --test-concurrency=1 tests/browser/
fi

# Tally: cargo prints "test result: ... N passed; M failed", node prints "# pass N" / "# fail M".
passed=$(cat "$log_dir"/*.log | sed -nE 's/^test result: .* ([0-9]+) passed; ([0-9]+) failed.*/\1/p; s/^(ℹ|#) pass ([0-9]+)$/\2/p' | awk '{s+=$1} END {print s+0}')
failed=$(cat "$log_dir"/*.log | sed -nE 's/^test result: .* ([0-9]+) passed; ([0-9]+) failed.*/\2/p; s/^(ℹ|#) fail ([0-9]+)$/\2/p' | awk '{s+=$1} END {print s+0}')
passed=${passed:-0}; failed=${failed:-0}
if [ ${#failed_stages[@]} -gt 0 ]; then
  echo "failed stages: ${failed_stages[*]}"
  [ "$failed" -gt 0 ] || failed=${#failed_stages[@]}
fi
echo "${passed} passed, ${failed} failed"
[ ${#failed_stages[@]} -eq 0 ]
