#!/usr/bin/env bash
# Builds the web app into dist/: cargo (wasm32, release) -> wasm-bindgen -> wasm-opt -> static files.
# No trunk: these three steps are all it did for us, and they work offline with pinned tools.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-build.sh

cargo build --release --locked --target wasm32-unknown-unknown --bin attention-lab
rm -rf dist && mkdir -p dist/www
wasm-bindgen --target web --no-typescript --out-dir dist --out-name attention-lab \
  "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/attention-lab.wasm"

# Rust's wasm32 target emits these post-MVP features; wasm-opt must be told it may keep them.
if [ "${WASM_OPT:-1}" != 0 ]; then
  tools/node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-reference-types --enable-multivalue --enable-mutable-globals \
    dist/attention-lab_bg.wasm -o dist/attention-lab_bg.wasm
fi

# Content hash in the file names, so a browser never mixes an old module with new glue code.
hash=$(cat dist/attention-lab.js dist/attention-lab_bg.wasm | sha256sum | cut -c1-12)
mv dist/attention-lab_bg.wasm "dist/attention-lab-${hash}_bg.wasm"
sed "s/attention-lab_bg.wasm/attention-lab-${hash}_bg.wasm/" dist/attention-lab.js > "dist/attention-lab-${hash}.js"
rm dist/attention-lab.js
sed "s#\./attention-lab\.js#./attention-lab-${hash}.js#" index.html > dist/index.html
# The browser enforces the page's promises: scripts and connections only from the page itself.
node scripts/csp.mjs dist/index.html
cp www/*.css dist/www/
# The trained model's files, fetched by the page only when the model is chosen (src/catalog/presets/trained.rs).
mkdir -p dist/www/models/attention-lab-tiny
cp www/models/attention-lab-tiny/{config.json,tokenizer.json,model.safetensors} dist/www/models/attention-lab-tiny/

wasm_bytes=$(stat -c %s "dist/attention-lab-${hash}_bg.wasm")
gzip_bytes=$(gzip -9 -c "dist/attention-lab-${hash}_bg.wasm" | wc -c)
echo "build: dist/ ready (wasm ${wasm_bytes} bytes, ${gzip_bytes} gzipped)"
