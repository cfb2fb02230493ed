#!/usr/bin/env bash
# Installs what is missing, builds the app, and serves dist/ on 127.0.0.1 (WebGPU needs a secure
# context, which 127.0.0.1 is). PORT picks the port (default 8080).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
port="${PORT:-8080}"
echo "Attention Lab is at http://127.0.0.1:${port}/  (Ctrl-C stops it)"
exec node scripts/static-server.mjs dist "$port"
