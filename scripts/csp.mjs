// Writes the page's Content-Security-Policy into a built index.html (scripts/build.sh runs it on
// dist/index.html): a <meta> at the head's placeholder, with the SHA-256 of the one inline module
// script, so the browser itself holds the page to what its footer promises.
//
//   node scripts/csp.mjs dist/index.html
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

const PLACEHOLDER = "<!-- scripts/build.sh writes the Content-Security-Policy here. -->";

/** The policy for a page whose inline module script hashes to `scriptHash` (base64 SHA-256). */
export function policy(scriptHash) {
  return [
    "default-src 'none'",
    // The page's own files, its one inline module (by hash) and compiling its own WebAssembly.
    `script-src 'self' 'sha256-${scriptHash}' 'wasm-unsafe-eval'`,
    // The stylesheet; `style` attributes set sizes and colours the page computes (no <style> elements).
    "style-src 'self'",
    "style-src-attr 'unsafe-inline'",
    // The wasm module and the trained model's files come from the page's own origin; dropped files are local.
    "connect-src 'self'",
    // Canvas exports and the inline icon.
    "img-src 'self' data: blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

const path = process.argv[2];
if (path) {
  const html = readFileSync(path, "utf8");
  const scripts = [...html.matchAll(/<script type="module">([\s\S]*?)<\/script>/g)];
  if (scripts.length !== 1 || !html.includes(PLACEHOLDER)) {
    console.error(`csp: ${path} needs exactly one inline module script and the placeholder comment`);
    process.exit(1);
  }
  const hash = createHash("sha256").update(scripts[0][1], "utf8").digest("base64");
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(hash)}">`;
  writeFileSync(path, html.replace(PLACEHOLDER, meta));
}
