#!/usr/bin/env bash
# Installs what the tests need on top of the build tools: Debian's Chromium and ChromeDriver (browser tests
# with WebGPU on SwiftShader) and Mesa's lavapipe (native wgpu on the CPU). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-build.sh

# The formatting and lint gates of scripts/test.sh.
for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    echo "setup: adding the $component component"
    rustup component add "$component"
  fi
done

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || missing+=(mesa-vulkan-drivers libvulkan1)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} from Debian"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Real tokenizer.json files (Mistral 7B, Llama 3.1, Qwen3) for the tokenizer's tests.
bash scripts/real-tokenizers.sh
