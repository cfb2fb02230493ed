// Shared set-up for the browser tests: serve dist/ on a free 127.0.0.1 port, launch Debian's Chromium
// headless with WebGPU on SwiftShader, and open the app as a user would. Page objects live in app_page.mjs.
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "../../scripts/static-server.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const DIST = join(ROOT, "dist");
export const REPO_ROOT = ROOT;
// playwright-core is installed under tools/ by scripts/setup-build.sh, beside wasm-opt.
const { chromium } = createRequire(join(ROOT, "tools", "package.json"))("playwright-core");

// --enable-unsafe-webgpu is the one flag WebGPU needs here; the rest keep Chromium off the (closed) network.
const CHROMIUM_ARGS = [
  "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader", "--use-webgpu-adapter=swiftshader",
  "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--no-sandbox",
];

/** Starts the server and the browser once per test file. */
export async function startSession() {
  if (!existsSync(join(DIST, "index.html"))) throw new Error("dist/ is missing: run scripts/build.sh first");
  const server = await serve(DIST, 0);
  const baseUrl = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: CHROMIUM_ARGS,
  });
  return {
    baseUrl,
    browser,
    async close() {
      await browser.close();
      await new Promise((ok) => server.close(ok));
    },
  };
}
