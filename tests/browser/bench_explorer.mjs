// Browser benchmark of the heatmap explorer (run by hand, not a test):
//   node tests/browser/bench_explorer.mjs [--quick] [--small] [--repeats=N]
// (--quick: one sample per case and no Gemma case; --small: no n = 8192 cases; --repeats: samples per
// n = 256 / 512 case, default 5, for the median.)
// Headless Chromium, WebGPU on SwiftShader. Prints a table: load to first heatmap, control change to
// updated heatmaps (a seed change: every head recomputed) for n = 256 and 512 with 32 heads and n = 8192
// pooled, the part of each spent waiting for the GPU (uploads, kernels, readback), and the longest task
// that blocked the page meanwhile (PerformanceObserver "longtask", > 50 ms).
import { startSession } from "./harness.mjs";

const quick = process.argv.includes("--quick");
const small = process.argv.includes("--small");
const repeatsArg = process.argv.find((a) => a.startsWith("--repeats="));
const repeats = quick ? 1 : Math.max(1, Number(repeatsArg?.split("=")[1]) || 5);
const session = await startSession();
const context = await session.browser.newContext({ viewport: { width: 1280, height: 1000 } });
await context.addInitScript(() => {
  window.__longtasks = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push(e.duration); })
    .observe({ type: "longtask", buffered: true });
});
const page = await context.newPage();
page.on("pageerror", (e) => console.error("page error:", String(e)));

const explorer = () => page.$eval('[data-testid="explorer"]', (e) => ({ ...e.dataset }));
async function waitReady(afterJob, timeout) {
  await page.waitForFunction((job) => {
    const e = document.querySelector('[data-testid="explorer"]');
    return e && Number(e.dataset.job) > job && e.dataset.status !== "computing";
  }, afterJob, { timeout, polling: 20 });
}
const timings = (e) => ({ kernel: Number(e.msKernel), inPage: Number(e.msTotal), inputs: Number(e.msInputs), draw: Number(e.msDraw) });
const maxLongTask = () => page.evaluate(() => { const m = Math.max(0, ...window.__longtasks); window.__longtasks = []; return m; });

const rows = [];
const adapter = async () => page.getByTestId("adapter-info").innerText();

// 1. Load to first heatmap (default link: Llama 3 8B, 32 heads, 12 tokens).
{
  const t0 = Date.now();
  await page.goto(session.baseUrl);
  await page.waitForSelector('[data-testid="head-heatmap"]', { timeout: 120_000 });
  const first = Date.now() - t0;
  await waitReady(0, 120_000);
  const e = await explorer();
  rows.push({ case: "load → first heatmap (12 tokens, 32 heads)", ms: first, ...timings(e), longest: await maxLongTask() });
}

// 2. Control change → updated heatmaps.
async function controlChange(label, query, repeats, timeout) {
  await page.goto(session.baseUrl + query);
  await waitReady(0, timeout);
  // A visitor looks at the page before changing anything; the browser finishes compiling meanwhile.
  await page.waitForTimeout(3000);
  await maxLongTask();
  const samples = [];
  for (let r = 0; r < repeats; r++) {
    const before = Number((await explorer()).job);
    const t0 = await page.evaluate(({ seed, before }) => {
      // The end is read in the page: the first frame after the explorer reports the new result
      // ready (a poll from outside would add its own interval).
      const explorer = document.querySelector('[data-testid="explorer"]');
      window.__end = undefined;
      const watch = new MutationObserver(() => {
        if (Number(explorer.dataset.job) > before && explorer.dataset.status !== "computing") {
          watch.disconnect();
          requestAnimationFrame(() => { window.__end = performance.now(); });
        }
      });
      watch.observe(explorer, { attributes: true });
      const input = document.querySelector('[data-testid="seed-input"]');
      const start = performance.now();
      input.value = String(seed);
      input.dispatchEvent(new Event("input", { bubbles: true }));
      return start;
    }, { seed: 100 + r, before });
    await waitReady(before, timeout);
    const end = await page.waitForFunction(() => window.__end, null, { timeout: 10_000 }).then((h) => h.jsonValue());
    const e = await explorer();
    samples.push({ ms: end - t0, ...timings(e), heads: Number(e.headsDone) });
  }
  samples.sort((a, b) => a.ms - b.ms);
  const median = samples[Math.floor(samples.length / 2)];
  rows.push({ case: label, ...median, longest: await maxLongTask() });
}

await controlChange("seed change, n = 256, 32 heads (exact)", "?n=256", repeats, 300_000);
await controlChange("seed change, n = 512, 32 heads (pooled)", "?n=512", repeats, 300_000);
if (!small) {
  await controlChange("seed change, n = 8192 pooled, heads 0-3 (one KV group)", "?n=8192&heads=0-3", 1, 600_000);
}
if (!quick && !small) {
  await controlChange("seed change, n = 8192 pooled, Gemma 3 sliding layer, heads 0-7", "?model=gemma-3-27b&n=8192&heads=0-7", 1, 600_000);
}

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(0).padStart(8) : "       -");
console.log(`\nAdapter: ${await adapter()}\n`);
console.log("| case | control→pixels ms | in-page ms | GPU wait ms | not GPU ms | of which inputs | of which drawing | longest task ms |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.case} | ${fmt(r.ms)} | ${fmt(r.inPage)} | ${fmt(r.kernel)} | ${fmt(r.ms - r.kernel)} | ${fmt(r.inputs)} | ${fmt(r.draw)} | ${fmt(r.longest)} |`);
}
await session.close();
