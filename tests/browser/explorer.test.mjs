// The heatmap explorer as a user drives it: model layouts, inputs, teaching heads, pooling, the
// enlarged head with its tile grid and step-through, sharing and exports.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";
import { argmax, download, explorerState, heads, readNpz, waitReady } from "./explorer_helpers.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

describe("heatmap explorer", () => {
  test("every query head of a Gemma 3 layer, grouped by KV head, with the layer strip", async () => {
    const app = await AppPage.open(session, "?model=gemma-3-27b&text=one%20two%20three%20four");
    await waitReady(app.page);
    const strip = app.page.getByTestId("layer-strip");
    assert.equal(await strip.locator('[data-testid="layer-cell"]').count(), 62);
    assert.equal(await strip.locator('[data-kind="sliding"]').count(), 52);
    assert.equal(await strip.locator('[data-kind="global"]').count(), 10);
    assert.match(await app.page.getByTestId("layer-summary").innerText(), /5 sliding : 1 global/);
    assert.match(await app.page.getByTestId("layer-layout").innerText(), /32 query heads share 16 KV heads, 2 per group \(GQA\).*head dim 128.*sliding \(window 1024\)/);
    assert.match(await app.page.getByTestId("synthetic-note").innerText(), /synthetic/);

    const shown = await heads(app.page);
    assert.equal(shown.length, 32);
    for (const h of shown) assert.equal(h.kvHead, Math.floor(h.head / 2), `head ${h.head}`);
    assert.equal(await app.page.getByTestId("kv-group").count(), 16);
    // Both heads of KV group 3 sit inside its box.
    const inGroup = await app.page.$$eval('[data-testid="kv-group"][data-kv-head="3"] [data-testid="head-heatmap"]', (els) => els.map((e) => e.dataset.head));
    assert.deepEqual(inGroup, ["6", "7"]);

    // Clicking layer 5 (global) switches the layer and the link.
    const job = (await explorerState(app.page)).job;
    await strip.locator('[data-layer="5"]').click();
    await app.waitForParam("layer", "5");
    await waitReady(app.page, job);
    assert.match(await app.page.getByTestId("layer-layout").innerText(), /layer 5 of 62 \(global\).*mask: causal/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("teaching heads have the patterns they were designed for", async () => {
    const app = await AppPage.open(session, "?text=" + encodeURIComponent("the cat sat on the mat and the cat ran"));
    await waitReady(app.page);
    const byRole = Object.fromEntries((await heads(app.page)).filter((h) => h.teaching).map((h) => [h.teaching, h]));
    const n = 10;
    const row = (h, i) => h.probs.slice(i * n, i * n + n);
    for (let i = 1; i < n; i++) {
      assert.equal(argmax(row(byRole["previous-token"], i)), i - 1, `previous-token row ${i}`);
      assert.ok(row(byRole["first-token-sink"], i)[0] > 0.99, `sink row ${i}`);
      // Diffuse: uniform over the i + 1 visible keys.
      assert.ok(Math.abs(row(byRole["diffuse"], i)[0] - 1 / (i + 1)) < 1e-5, `diffuse row ${i}`);
    }
    // Induction: the second "cat" (8) looks at what followed the first "cat" (1): "sat" (2).
    assert.ok(row(byRole["induction"], 8)[2] > 0.99);
    // Same token: the second "cat" splits between both "cat"s.
    assert.ok(Math.abs(row(byRole["same-token"], 8)[1] - 0.5) < 0.01);
    await app.close();
  });

  test("character tokens, cross-attention and an encoder's bidirectional mask", async () => {
    const app = await AppPage.open(session, "?tok=char&text=abcab&heads=6");
    await waitReady(app.page);
    let [h] = await heads(app.page);
    assert.equal(h.rows, 5);

    // Cross-attention: queries from the text, keys and values from the source; every key visible.
    let job = (await explorerState(app.page)).job;
    await app.page.getByTestId("input-mode").selectOption("cross");
    await waitReady(app.page, job);
    job = (await explorerState(app.page)).job;
    await app.page.getByTestId("tok-select").selectOption("word");
    await app.page.getByTestId("src-input").fill("le chat noir");
    await app.page.getByTestId("text-input").fill("the black cat sat");
    await app.page.waitForFunction(() => document.querySelector('[data-testid="head-heatmap"]')?.dataset.rows === "4"
      && document.querySelector('[data-testid="head-heatmap"]')?.dataset.cols === "3", null, { timeout: 60_000 });
    await waitReady(app.page, job);
    [h] = await heads(app.page);
    for (let i = 0; i < 4; i++) {
      const r = h.probs.slice(i * 3, i * 3 + 3);
      assert.ok(r.every((p) => p > 0), `cross row ${i} has a masked key`);
      assert.ok(Math.abs(r.reduce((a, b) => a + b) - 1) < 1e-4);
    }
    assert.equal(await app.page.getByTestId("mask-select").isDisabled(), true);
    await app.waitForParam("src", "le chat noir");

    // Self-attention again with the full (bidirectional) mask: the first token sees the last one.
    job = (await explorerState(app.page)).job;
    await app.page.getByTestId("input-mode").selectOption("text");
    await app.page.getByTestId("mask-select").selectOption("full");
    await app.waitForParam("mask", "full");
    await waitReady(app.page, job);
    await app.page.waitForFunction(() => {
      const p = document.querySelector('[data-testid="head-heatmap"]')?.dataset.probs?.split(",").map(Number);
      return p && p.length === 16 && p[3] > 0;
    }, null, { timeout: 60_000 });
    await app.close();
  });

  test("long generated sequences are pooled on the GPU at the on-screen size, max or mean", async () => {
    const app = await AppPage.open(session, "?n=1024&heads=0-1");
    await waitReady(app.page);
    let shown = await heads(app.page);
    assert.equal(shown.length, 2);
    assert.equal(shown[0].nQ, 1024);
    assert.equal(shown[0].pool, "max");
    assert.equal(shown[0].rows, 160, "one cell per CSS pixel of a 160 px thumbnail at device pixel ratio 1");
    assert.equal(shown[0].probs, null, "a pooled head never carries n x n probabilities");

    // Hovering a pooled cell names the query and key ranges and the block's value.
    const canvas = app.page.locator('[data-testid="head-heatmap"][data-head="1"] canvas.hm-canvas');
    await canvas.scrollIntoViewIfNeeded(); // the maps may start below the fold, as for a reader
    const box = await canvas.boundingBox();
    await app.page.mouse.move(box.x + 0.4, box.y + box.height - 2);
    assert.match(await app.page.getByTestId("heatmap-tooltip").innerText(), /queries \d+–\d+ → keys 0–\d+: max p = (0\.9|1\.0)/);

    // Exporting a pooled head writes every probability (recomputed for that head), not the blocks.
    const file = await download(app.page, '[data-testid="export-npy"]');
    assert.doesNotMatch(file.name, /pooled/);
    const npz = readNpz(file.bytes);
    assert.deepEqual(npz.probabilities.shape, [1024, 1024]);
    assert.equal(npz.query_tokens.values.length, 1024);
    assert.equal(npz.key_tokens.values.length, 1024);
    const p = npz.probabilities.values;
    for (const i of [0, 1, 500, 1023]) {
      const row = p.slice(i * 1024, (i + 1) * 1024);
      assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4, `row ${i} sums to 1`);
      assert.ok(row.slice(i + 1).every((x) => x === 0), `row ${i}: causal, nothing after the query`);
    }

    const job = (await explorerState(app.page)).job;
    await app.page.getByTestId("pool-select").selectOption("mean");
    await app.waitForParam("pool", "mean");
    await waitReady(app.page, job);
    shown = await heads(app.page);
    assert.equal(shown[0].pool, "mean");

    // Narrowing the window recomputes at the new thumbnail size: (300 - 56) / 2 = 122 CSS pixels.
    const wide = (await explorerState(app.page)).job;
    await app.page.setViewportSize({ width: 300, height: 900 });
    await waitReady(app.page, wide);
    assert.equal((await heads(app.page))[0].rows, 122);

    // A high-density screen gets twice the cells.
    const context = await session.browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 2 });
    const page = await context.newPage();
    await page.goto(session.baseUrl + "?n=1024&heads=0");
    await waitReady(page);
    assert.equal((await heads(page))[0].rows, 320);
    await context.close();
    await app.close();
  });

  test("a long head is pooled in slices that line up: the designed patterns survive", async () => {
    // 4096 tokens: each head is more work than one GPU submission should hold, so its 160 pooled rows
    // come from several submissions. A slice out of place would break the diagonal.
    const app = await AppPage.open(session, "?n=4096&heads=0-5");
    await waitReady(app.page, 0, 180_000);
    const pixelsOf = (role) => app.page.evaluate((role) => {
      const canvas = document.querySelector(`[data-testid="head-heatmap"][data-teaching="${role}"] canvas.hm-canvas`);
      const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
      return { n: canvas.width, rgba: Array.from(data) };
    }, role);
    const isTop = (px) => px[0] > 200 && px[1] > 200 && px[2] < 100; // viridis' bright end: the block's max
    const isMasked = (px) => px[0] === 226 && px[1] === 228 && px[2] === 233;
    const prev = await pixelsOf("previous-token");
    const sink = await pixelsOf("first-token-sink");
    assert.equal(prev.n, 160);
    const at = ({ n, rgba }, r, c) => rgba.slice((r * n + c) * 4, (r * n + c) * 4 + 4);
    for (let r = 1; r < 160; r++) {
      assert.ok(isTop(at(prev, r, r)) || isTop(at(prev, r, r - 1)), `previous-token row ${r}: bright at the diagonal`);
      assert.ok(!isTop(at(prev, r, 0)) || r < 2, `previous-token row ${r}: not bright at key 0`);
      assert.ok(isTop(at(sink, r, 0)), `sink row ${r}: bright at key 0`);
      if (r + 1 < 160) assert.ok(isMasked(at(prev, r, r + 1)), `row ${r}: later keys masked`);
    }
    await app.close();
  });

  test("a newer request supersedes a long computation, which shows its progress", async () => {
    const app = await AppPage.open(session, "?n=4096");
    await app.page.getByTestId("explorer-status").locator("progress").waitFor({ timeout: 60_000 });
    // A 4096-token head comes in slices, and the bar moves within a head, not only between heads.
    await app.page.waitForFunction(() => {
      const bar = document.querySelector('[data-testid="explorer-status"] progress');
      return bar && bar.value % 1 > 0;
    }, null, { timeout: 60_000, polling: 20 });
    assert.match(await app.page.getByTestId("heatmap-status").innerText(), /Computing on the GPU: \d+ of 32 heads \(\d+%\)…/);
    const { job } = await explorerState(app.page);
    await app.page.getByTestId("n-input").fill("16");
    await app.page.getByTestId("n-input").dispatchEvent("change");
    await app.waitForParam("n", "16");
    const done = await waitReady(app.page, job, 180_000);
    assert.equal(done.status, "ready");
    assert.equal(done.done, 32);
    const shown = await heads(app.page);
    assert.ok(shown.every((h) => h.nQ === 16 && h.rows === 16));
    await app.close();
  });

  test("click or Enter enlarges a head; the tile grid shows the work the mask skips", async () => {
    const app = await AppPage.open(session, "?n=256&heads=0-7");
    await waitReady(app.page);
    await app.page.locator('[data-testid="head-heatmap"][data-head="2"]').click();
    await app.waitForParam("focus", "2");
    const big = app.page.getByTestId("focused-heatmap");
    await big.waitFor();
    assert.equal(await big.getAttribute("data-head"), "2");
    assert.equal(await big.getAttribute("data-rows"), "256");
    await app.page.keyboard.press("ArrowRight");
    await app.waitForParam("focus", "3");
    await app.page.keyboard.press("Escape");
    await app.page.getByTestId("focus-panel").waitFor({ state: "detached" });
    // Keyboard only: focus a thumbnail and press Enter.
    await app.page.locator('[data-testid="head-heatmap"][data-head="5"]').focus();
    await app.page.keyboard.press("Enter");
    await app.waitForParam("focus", "5");

    await app.page.getByTestId("tiles-toggle").check();
    await app.waitForParam("tiles", "on");
    const stats = app.page.getByTestId("tile-stats");
    await stats.waitFor();
    // Causal, 256 queries, 4 heads per KV group: 64-row tiles hold 16 queries; about half is skipped.
    const skipped = Number(await stats.getAttribute("data-skipped"));
    assert.ok(skipped > 0.4 && skipped < 0.6, `causal skips ${skipped}`);
    assert.equal(await app.page.getByTestId("tile-overlay").count(), 1);
    await app.page.getByTestId("mask-select").selectOption("full");
    await app.page.waitForFunction(() => document.querySelector('[data-testid="tile-stats"]')?.dataset.skipped === "0.000000", null, { timeout: 60_000 });
    await app.page.getByTestId("mask-select").selectOption("sliding");
    await app.page.getByTestId("window-input").fill("16");
    await app.page.waitForFunction(() => Number(document.querySelector('[data-testid="tile-stats"]')?.dataset.skipped) > 0.6, null, { timeout: 60_000 });
    await app.close();
  });

  test("the step-through shows each step and equals the CPU reference and the GPU", async () => {
    const app = await AppPage.open(session, "?focus=6&steps=on");
    await waitReady(app.page);
    const steps = app.page.getByTestId("step-through");
    await steps.waitFor();
    for (const step of ["scores", "scaled", "masked", "softmax", "output"]) {
      assert.equal(await steps.locator(`[data-step="${step}"]`).count(), 1, step);
    }
    assert.match(await steps.locator('[data-step="masked"]').innerText(), /−∞/);
    assert.ok(Number(await steps.getAttribute("data-max-diff-reference")) < 1e-6);
    const gpuDiff = Number(await steps.getAttribute("data-max-diff-gpu"));
    assert.ok(gpuDiff < 1e-4, `GPU vs step-through ${gpuDiff}`);
    // Its softmax is the top-left corner of the head's heatmap (causal rows see only earlier keys).
    const p = (await steps.getAttribute("data-probs")).split(",").map(Number);
    const head = (await heads(app.page)).find((h) => h.head === 6);
    for (let i = 0; i < 6; i++) for (let j = 0; j < 6; j++) assert.ok(Math.abs(p[i * 6 + j] - head.probs[i * 12 + j]) < 1e-4);
    await app.close();
  });

  test("a shared link reproduces the view: same pixels and identical exported probabilities", async () => {
    const app = await AppPage.open(session, "?text=" + encodeURIComponent("to be or not to be , that is the question"));
    await waitReady(app.page);
    let job = (await explorerState(app.page)).job;
    await app.page.getByTestId("model-select").selectOption("qwen3-8b");
    await app.page.getByTestId("mask-select").selectOption("sliding");
    await app.page.getByTestId("window-input").fill("3");
    await app.page.getByTestId("seed-input").fill("5");
    await app.page.getByTestId("scale-select").selectOption("log");
    await app.waitForParam("window", "3");
    await app.waitForParam("seed", "5");
    await waitReady(app.page, job);
    await app.page.locator('[data-testid="head-heatmap"][data-head="9"]').click();
    await app.waitForParam("focus", "9");
    await app.page.getByTestId("focused-heatmap").waitFor();
    await app.page.getByTestId("copy-link").click();
    const link = new URL(app.page.url()).search;
    for (const p of ["model=qwen3-8b", "mask=sliding", "window=3", "seed=5", "scale=log", "focus=9"]) assert.ok(link.includes(p), `${p} missing from ${link}`);

    const first = readNpz((await download(app.page, '[data-testid="focus-export"]')).bytes);
    assert.deepEqual(first.probabilities.shape, [11, 11]);
    assert.deepEqual(first.query_tokens.values, ["to", "be", "or", "not", "to", "be", ",", "that", "is", "the", "question"]);
    assert.deepEqual(first.key_tokens.values, first.query_tokens.values);
    // Window 3: row 10 sees keys 8, 9, 10 only.
    assert.ok(first.probabilities.values.slice(110, 118).every((x) => x === 0));

    const reopened = await AppPage.open(session, link);
    await waitReady(reopened.page);
    await reopened.page.getByTestId("focused-heatmap").waitFor();
    const second = readNpz((await download(reopened.page, '[data-testid="focus-export"]')).bytes);
    assert.deepEqual(second, first, "the link must reproduce the exact exported probabilities");
    const pixels = (page) => page.$eval('[data-testid="focused-heatmap"] canvas.hm-canvas', (c) =>
      Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data).join(","));
    assert.equal(await pixels(reopened.page), await pixels(app.page), "same pixels");
    assert.equal(await reopened.page.getByTestId("scale-select").inputValue(), "log");

    const png = await download(reopened.page, '[data-testid="export-png"]');
    assert.match(png.name, /\.png$/);
    assert.deepEqual([...png.bytes.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    reopened.assertNoConsoleErrors();
    await reopened.close();
    await app.close();
  });

  test("invalid explorer parameters fall back with visible notices", async () => {
    const app = await AppPage.open(session, "?heads=0-99&focus=77&pool=sum&tok=bpe&tiles=maybe&n=0&text=still%20fine");
    const notices = await app.page.getByTestId("url-notices").innerText();
    for (const word of ["heads", "focus", "pool", "tok", "tiles", " n:"]) assert.ok(notices.includes(word), `no notice for ${word}: ${notices}`);
    await waitReady(app.page);
    assert.equal((await heads(app.page)).length, 32);
    await app.close();
  });

  test("works from a phone-width screen, and on the CPU without WebGPU", async () => {
    const context = await session.browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await page.goto(session.baseUrl + "?backend=cpu&model=gemma-4-e4b");
    await waitReady(page);
    assert.equal((await heads(page)).length, 8);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
    await context.close();
  });
  // Last in this file: a 65,536-token head keeps a CPU-emulated GPU busy for minutes, so this test only
  // reads the notice and leaves the browser (closed after this file) to end the work.
  test("an n beyond what the explorer generates is cut with a notice, not silently", async () => {
    // Within the limit there is no such notice.
    const small = await AppPage.open(session, "?n=300&heads=0");
    await waitReady(small.page);
    assert.equal(await small.page.getByTestId("n-capped").count(), 0);
    await small.close();
    const app = await AppPage.open(session, "?n=100000&heads=0");
    const note = await app.page.getByTestId("n-capped").innerText();
    assert.equal(note, "n = 100,000 is more than the explorer generates; it shows the first 65,536 tokens.");
    assert.match(await app.page.getByTestId("layer-layout").innerText(), /n = 65536 tokens/);
  });
});
