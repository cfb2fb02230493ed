// Browser benchmark of the heatmap explorer (run by hand, not a test):
//   node tests/browser/bench_explorer.mjs [--quick] [--small] [--repeats=N]
// (--quick: one sample per case and no Gemma case; --small: no n = 8192 cases; --repeats: samples per
// n = 256 / 512 case and per trained-model text change, default 5, for the median.)
// Headless Chromium, WebGPU on SwiftShader. Prints a table: load to first heatmap, control change to
// updated heatmaps (a seed change: every head recomputed) for n = 256 and 512 with 32 heads and n = 8192
// pooled, the part of each spent waiting for the GPU (uploads, kernels, readback), and the longest task
// that blocked the page meanwhile (PerformanceObserver "longtask", > 50 ms). Then the trained model
// (www/models/attention-lab-tiny): its first load, with the fetch of its three files as a row of its
// own, and a text change of a 100-token text redrawing all 8 heads of a layer (its whole forward pass).
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

// Types `value` into the input with test id `testid`; the time from the input event to the first frame
// after the explorer reports the new result ready, read in the page (a poll from outside would add its
// own interval), and the explorer's figures then.
async function timedInput(testid, value, timeout) {
  const before = Number((await explorer()).job);
  const t0 = await page.evaluate(({ testid, value, before }) => {
    const explorer = document.querySelector('[data-testid="explorer"]');
    window.__end = undefined;
    const watch = new MutationObserver(() => {
      if (Number(explorer.dataset.job) > before && explorer.dataset.status !== "computing") {
        watch.disconnect();
        requestAnimationFrame(() => { window.__end = performance.now(); });
      }
    });
    watch.observe(explorer, { attributes: true });
    const input = document.querySelector(`[data-testid="${testid}"]`);
    const start = performance.now();
    input.value = value;
    input.dispatchEvent(new Event("input", { bubbles: true }));
    return start;
  }, { testid, value, before });
  await waitReady(before, timeout);
  const end = await page.waitForFunction(() => window.__end, null, { timeout: 10_000 }).then((h) => h.jsonValue());
  return { ms: end - t0, e: await explorer() };
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
    const { ms, e } = await timedInput("seed-input", String(100 + r), timeout);
    samples.push({ ms, ...timings(e), heads: Number(e.headsDone) });
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

// 3. The trained model: first load (the files' fetch as its own row), then text changes at 100 tokens.
const TINY = "?view=heatmaps&model=attention-lab-tiny";
const TINY_TOKENS = 100;
// Rust, as the model was trained on; cut to exactly TINY_TOKENS of its own tokens below.
const TINY_TEXT = "fn main() { let mut total = 0; for i in 0..10 { total += i * 2; } println!(\"{}\", total); "
  + "let words = vec![\"alpha\", \"beta\", \"gamma\"]; for w in words.iter() { if w.len() > 4 { println!(\"{w}\"); } } "
  + "let mut map = std::collections::HashMap::new(); map.insert(1, \"one\"); map.insert(2, \"two\"); "
  + "match map.get(&1) { Some(v) => println!(\"{v}\"), None => println!(\"none\") } let s = String::from(\"hello\"); "
  + "let t = s.clone() + \" world\"; assert_eq!(t.len(), 11); }";
// Tokens the heads were drawn over (none drawn: a text the model refuses, past its 128 tokens).
const tinyRows = () => page.$$eval('[data-testid="head-heatmap"]', (els) => (els.length ? Number(els[0].dataset.nQ) : Infinity));
async function setText(text) {
  const before = Number((await explorer()).job);
  await page.evaluate((text) => {
    const input = document.querySelector('[data-testid="text-input"]');
    input.value = text;
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }, text);
  await waitReady(before, 120_000);
}
{
  const t0 = Date.now();
  await page.goto(session.baseUrl + TINY);
  // The model's own heads (they carry its measured scores), not a grid drawn before it loaded.
  await page.waitForSelector('[data-testid="head-heatmap"].trained', { timeout: 120_000 });
  const first = Date.now() - t0;
  await waitReady(0, 120_000);
  const e = await explorer();
  // The three files' fetch, from the first request's start to the last response's end (resource timing).
  const fetchMs = await page.evaluate(() => {
    const files = performance.getEntriesByType("resource").filter((r) => r.name.includes("/models/attention-lab-tiny/"));
    return files.length === 3 ? Math.max(...files.map((r) => r.responseEnd)) - Math.min(...files.map((r) => r.startTime)) : NaN;
  });
  const heads = Number(e.headsTotal);
  rows.push({ case: `trained model: load → first heatmap (${await tinyRows()} tokens, ${heads} heads)`, ms: first, ...timings(e), longest: await maxLongTask() });
  rows.push({ case: "trained model: of which fetching config, tokenizer and weights", ms: fetchMs, kernel: NaN, inPage: NaN, inputs: NaN, draw: NaN, longest: NaN });
}
{
  // The longest prefix of TINY_TEXT that is at most TINY_TOKENS tokens (the heads' rows say how many).
  let lo = 1, hi = TINY_TEXT.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    await setText(TINY_TEXT.slice(0, mid));
    if ((await tinyRows()) <= TINY_TOKENS) lo = mid; else hi = mid - 1;
  }
  const base = TINY_TEXT.slice(0, lo);
  await setText(base);
  await page.waitForTimeout(3000);
  await maxLongTask();
  const samples = [];
  for (let r = 0; r < repeats; r++) {
    // One digit changes (0..9 is one token either way): the same length, every head recomputed.
    const text = base.replace("0..10", `0..${r % 2 ? 10 : 20}`).replace("i * 2", `i * ${3 + r}`);
    const { ms, e } = await timedInput("text-input", text, 120_000);
    samples.push({ ms, ...timings(e), tokens: await tinyRows(), heads: Number(e.headsDone) });
  }
  samples.sort((a, b) => a.ms - b.ms);
  const median = samples[Math.floor(samples.length / 2)];
  rows.push({ case: `trained model: text change, ${median.tokens} tokens, ${median.heads} heads of a layer`, ...median, longest: await maxLongTask() });
}

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(0).padStart(8) : "       -");
console.log(`\nAdapter: ${await adapter()}\n`);
console.log("| case | control→pixels ms | in-page ms | GPU wait ms | not GPU ms | of which inputs | of which drawing | longest task ms |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.case} | ${fmt(r.ms)} | ${fmt(r.inPage)} | ${fmt(r.kernel)} | ${fmt(r.ms - r.kernel)} | ${fmt(r.inputs)} | ${fmt(r.draw)} | ${fmt(r.longest)} |`);
}
await session.close();
