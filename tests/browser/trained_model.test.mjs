// The trained model in the heatmaps view as a newcomer uses it: chosen from the model list, its real
// heads on typed text with their measured scores, the next-token top 5, Generate growing the text
// and the link, the link reopening it, the CPU without WebGPU, and text past its 128 tokens refused.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage, assertClose } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

const TINY = "?view=heatmaps&model=attention-lab-tiny";

/** Opens the trained model on `text` with Generate's cache `gencache` (and `extra` link keys),
 * generates 4 tokens, and returns Generate's note and the text it left. */
async function generateFour(session, gencache, extra, text) {
  const app = await AppPage.open(session, TINY + "&gencache=" + gencache + extra + "&text=" + encodeURIComponent(text));
  await readModel(app);
  assert.equal(await app.page.getByTestId("generate-cache").inputValue(), gencache);
  await app.page.getByTestId("generate-count").selectOption("4");
  await app.page.getByTestId("generate").click();
  await app.page.getByTestId("generate-note").waitFor({ timeout: 120_000 });
  const out = { note: await app.page.getByTestId("generate-note").innerText(), text: (await readModel(app)).text };
  app.assertNoConsoleErrors();
  await app.close();
  return out;
}

/** Waits for the explorer to finish with every head drawn, and reads what the heads and the panel show. */
async function readModel(app, expectedTokens) {
  const selector = expectedTokens === undefined
    ? '[data-testid="explorer"][data-status="ready"]'
    : `[data-testid="explorer"][data-status="ready"]:has([data-testid="head-heatmap"][data-rows="${expectedTokens}"])`;
  await app.page.waitForSelector(selector, { timeout: 120_000 });
  // Five candidates for this very text (not the previous text's, shown dimmed while it updates).
  await app.page.waitForFunction(() => document.querySelectorAll('ol.candidates:not([data-stale]) [data-testid="next-token"]').length === 5, null, { timeout: 60_000 });
  return app.page.evaluate(() => ({
    heads: [...document.querySelectorAll('[data-testid="head-heatmap"]')].map((el) => ({
      head: Number(el.dataset.head),
      kvHead: Number(el.dataset.kvHead),
      rows: Number(el.dataset.rows),
      probs: el.dataset.probs ? el.dataset.probs.split(",").map(Number) : null, // only up to 64 x 64 cells
      scores: JSON.parse(el.dataset.scores),
      labels: el.dataset.labels,
      caption: el.querySelector("figcaption").textContent,
    })),
    next: [...document.querySelectorAll('[data-testid="next-token"]')].map((el) => ({ token: el.dataset.token, prob: Number(el.dataset.prob) })),
    status: document.querySelector('[data-testid="heatmap-status"]')?.textContent ?? "",
    text: document.querySelector('[data-testid="text-input"]').value,
  }));
}

/** Waits until an explorer job numbered after `job` has finished. */
async function finishedAfter(app, job) {
  await app.page.waitForFunction((before) => {
    const el = document.querySelector('[data-testid="explorer"]');
    return Number(el.dataset.job) > before && el.dataset.status === "ready";
  }, job, { timeout: 120_000 });
}

describe("the trained model", () => {
  test("is the first model a newcomer is offered, and the default link keeps its meaning", async () => {
    const app = await AppPage.open(session, "?view=heatmaps");
    const first = await app.page.locator('[data-testid="model-select"] option').first();
    assert.equal(await first.getAttribute("value"), "attention-lab-tiny");
    assert.match(await first.innerText(), /trained here/);
    // Without model= the view still shows Llama 3 8B's synthetic layout, as links made before did.
    await app.page.waitForSelector('[data-testid="synthetic-note"]');
    assert.match(await app.page.getByTestId("layer-layout").innerText(), /^Llama 3 8B/);
    await app.page.getByTestId("model-select").first().selectOption("attention-lab-tiny");
    await app.waitForParam("model", "attention-lab-tiny");
    const shown = await readModel(app);
    assert.equal(shown.heads.length, 8);
    assert.match(await app.page.getByTestId("trained-note").innerText(), /Real weights: a small model trained here/);
    assert.equal(await app.page.getByTestId("synthetic-note").count(), 0);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("typed text shows every head's real attention with scores, and the top 5 next tokens", async () => {
    const app = await AppPage.open(session, TINY);
    await app.waitForEngine();
    assert.match(await app.adapterLine(), /^WebGPU: /);
    await app.typeText("The compiler checks the borrow, and the compiler checks the borrow");
    const shown = await readModel(app, 12);
    assert.deepEqual(shown.heads.map((h) => h.head), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(shown.heads.map((h) => h.kvHead), [0, 0, 0, 0, 1, 1, 1, 1]);
    for (const h of shown.heads) {
      const t = h.rows;
      for (let q = 0; q < t; q++) {
        const row = h.probs.slice(q * t, q * t + t);
        assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4, `head ${h.head} row ${q} sums to 1`);
        assert.ok(row.slice(q + 1).every((p) => p === 0), `head ${h.head} row ${q} sees the future`);
      }
      // The scores are measured on this text from these very probabilities: previous = mean over
      // queries 1.. of the weight on the token before.
      let previous = 0;
      for (let q = 1; q < t; q++) previous += h.probs[q * t + q - 1];
      assert.ok(Math.abs(h.scores.previous - previous / (t - 1)) < 0.006, `head ${h.head} previous score`);
      assert.ok(h.scores.induction !== null, "a repeated phrase lets induction be measured");
      for (const label of (h.labels || "").split(" ").filter(Boolean)) assert.ok(h.caption.includes(label));
    }
    // The trained model has previous-token heads in layer 0 (quality.json: head 7 at 0.93, head 5 at
    // 0.78), shown first (lesson 04 says so of head 7 on this text); on this text a head of layer 1
    // parks its weight on the first token (lesson 21). src/views/lesson/trained_heads_claims.rs checks
    // both on the CPU pass.
    assert.match(shown.status, /these are layer 0's heads/);
    assert.ok(shown.heads[7].scores.previous > 0.5, JSON.stringify(shown.heads[7].scores));
    assert.match(shown.heads[7].labels, /previous-token/);
    await app.page.getByTestId("layer-strip").locator('[data-layer="1"]').first().click();
    await app.waitForParam("layer", "1");
    const layer1 = await readModel(app, 12);
    assert.match(layer1.status, /these are layer 1's heads/);
    assert.ok(layer1.heads[4].scores.sink >= 0.5, JSON.stringify(layer1.heads[4].scores));
    assert.match(layer1.heads[4].labels, /sink/);
    // Top 5: decoded pieces with probabilities, most likely first, summing to at most 1.
    assert.equal(layer1.next.length, 5);
    const probs = layer1.next.map((n) => n.prob);
    assert.deepEqual(probs, [...probs].sort((a, b) => b - a));
    assert.ok(probs.every((p) => p > 0) && probs.reduce((a, b) => a + b) <= 1 + 1e-6);
    assert.match(layer1.status, /whole forward pass \(4 layers over 12 tokens.*\) ran on the GPU/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a sentence no training text holds, said twice, shows induction heads in layer 2", async () => {
    // The sentence is absent from the training corpus (a native test, `trained_heads_claims`, checks it).
    const once = "The old man sat under a tree and read a long letter from his brother.";
    const app = await AppPage.open(session, TINY + "&layer=2&text=" + encodeURIComponent(once + " " + once));
    const shown = await readModel(app);
    // 40 tokens, well within the 128 the model reads.
    assert.equal(shown.heads[0].rows, 40);
    const inducting = shown.heads.filter((h) => h.scores.induction >= 0.4);
    // Layer 2's heads 4-7 (0.65-0.76 on the CPU pass), the heads `evaluate` found (0.92-0.96).
    assert.deepEqual(inducting.map((h) => h.head), [4, 5, 6, 7], JSON.stringify(shown.heads.map((h) => h.scores)));
    for (const h of inducting) assert.match(h.labels, /induction/);
    // How the score is measured is unit-tested (src/lm/head_scores.rs); the same heads earn it on the CPU
    // pass natively (src/views/lesson/trained_heads_claims.rs, lesson 21's step on this text).
    // And the model copies: at the second "The old man", the most likely next token is the one that
    // followed the first.
    await app.typeText(once + " The old man");
    const copying = await readModel(app);
    assert.equal(copying.next[0].token, " sat", JSON.stringify(copying.next));
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("Generate appends tokens to the text and the link, and the link reopens the same text", async () => {
    const app = await AppPage.open(session, TINY + "&text=" + encodeURIComponent("fn main() {"));
    const before = await readModel(app);
    await app.page.getByTestId("generate-count").selectOption("4");
    await app.page.getByTestId("generate").click();
    await app.page.waitForFunction(() => document.querySelector('[data-testid="generate"]')?.textContent === "Generate"
      && !document.querySelector('[data-testid="generate"]').disabled, null, { timeout: 120_000 });
    const after = await readModel(app);
    assert.ok(after.text.startsWith("fn main() {") && after.text.length > "fn main() {".length, after.text);
    // The f32 cache in pages of one pool: 3 sliding layers x 5 pages + the global layer's 8 for 128
    // tokens, 8,192 B a page; it holds the prompt and the first 3 generated tokens, on ceil(n / 16)
    // pages a layer (no window of 64 has dropped one yet).
    const note = await app.page.getByTestId("generate-note").innerText();
    const said = note.match(/^Generated 4 tokens with the KV cache on the GPU, K and V in pages of 16 tokens, read through page tables after the prompt: (\d+) of the pool's 23 pages in use for (\d+) cached tokens, the prompt and the generated ones but the last \(([\d,]+) of 188,416 bytes\): the (\d+)-token prompt took \d+ ms, then [\d.]+ ms a token \(wall time, beside the heads' redrawing\)\.$/);
    assert.ok(said, note);
    const [pages, tokens, bytes, prompt] = [said[1], said[2], said[3].replaceAll(",", ""), said[4]].map(Number);
    assert.equal(tokens, prompt + 3);
    assert.equal(pages, 4 * Math.ceil(tokens / 16));
    assert.equal(bytes, 8192 * pages);
    // Greedy: the first token appended is the one the panel ranked first.
    assert.ok(after.text.startsWith("fn main() {" + before.next[0].token), `${after.text} vs ${before.next[0].token}`);
    assert.ok(after.heads[0].rows > before.heads[0].rows, "the heads redrew over the longer text");
    await app.waitForParam("text", after.text);
    const again = await AppPage.open(session, await app.query());
    const reopened = await readModel(again, after.heads[0].rows);
    assert.equal(reopened.text, after.text);
    assertClose(reopened.heads[3].probs, after.heads[3].probs, 1e-6, "same text, same heads");
    app.assertNoConsoleErrors();
    await again.close();
    await app.close();
  });

  test("without WebGPU the CPU pass shows the same heads and prediction", async () => {
    const text = "let x = 5; let y = x + 1;";
    const gpu = await AppPage.open(session, TINY + "&text=" + encodeURIComponent(text));
    const onGpu = await readModel(gpu);
    const cpu = await AppPage.open(session, TINY + "&backend=cpu&text=" + encodeURIComponent(text));
    const onCpu = await readModel(cpu);
    assert.match(onCpu.status, /ran on the CPU/);
    for (let h = 0; h < 8; h++) assertClose(onGpu.heads[h].probs, onCpu.heads[h].probs, 1e-4, `head ${h}`);
    assert.deepEqual(onGpu.next.map((n) => n.token), onCpu.next.map((n) => n.token));
    // Generate on the CPU: a whole pass per token, greedy, so the first one is the top candidate.
    await cpu.page.getByTestId("generate-count").selectOption("4");
    await cpu.page.getByTestId("generate").click();
    await cpu.page.getByTestId("generate-note").waitFor({ timeout: 120_000 });
    assert.match(await cpu.page.getByTestId("generate-note").innerText(), /^Generated 4 tokens on the CPU/);
    const grown = await readModel(cpu);
    assert.ok(grown.text.startsWith(text + onCpu.next[0].token), grown.text);
    gpu.assertNoConsoleErrors();
    cpu.assertNoConsoleErrors();
    await gpu.close();
    await cpu.close();
  });

  test("after a lost GPU device the model is uploaded to the new one and computes again", async () => {
    const app = await AppPage.open(session, TINY + "&text=" + encodeURIComponent("The borrow checker"), { switches: { hooks: true } });
    await readModel(app);
    await app.waitForEngine();
    await app.page.evaluate(() => window.attentionLabLoseGpu());
    await app.page.waitForFunction(
      () => /a new device was started/.test(document.querySelector('[data-testid="url-notices"]')?.textContent ?? ""),
      null, { timeout: 60_000 });
    const job = Number(await app.page.getByTestId("explorer").getAttribute("data-job"));
    await app.typeText("The borrow checker rejects");
    await finishedAfter(app, job + 1);
    const shown = await readModel(app);
    assert.equal(shown.text, "The borrow checker rejects");
    assert.match(shown.status, /ran on the GPU/);
    assert.equal(shown.heads.length, 8);
    await app.close();
  });

  test("Generate decodes with a quantised KV cache chosen in the panel, the same tokens on the CPU, and the link keeps it", async () => {
    const text = "fn main() { let x";
    const gpu = await AppPage.open(session, TINY + "&text=" + encodeURIComponent(text));
    await readModel(gpu);
    await gpu.page.getByTestId("generate-cache").selectOption("int4-g32");
    await gpu.waitForParam("gencache", "int4-g32");
    await gpu.page.getByTestId("generate-count").selectOption("4");
    await gpu.page.getByTestId("generate").click();
    await gpu.page.getByTestId("generate-note").waitFor({ timeout: 120_000 });
    assert.match(await gpu.page.getByTestId("generate-note").innerText(),
      /^Generated 4 tokens with the KV cache on the GPU, K and V stored as int4-g32 \(320 bytes a token\), read by the kernel/);
    const grown = (await readModel(gpu)).text;
    // The CPU rounds every token the same way: greedy decoding appends the same text (the two tiers'
    // logits agree to 1e-2, measured natively; a near tie could differ, not on this text).
    const cpu = await AppPage.open(session, TINY + "&backend=cpu&gencache=int4-g32&text=" + encodeURIComponent(text));
    await readModel(cpu);
    assert.equal(await cpu.page.getByTestId("generate-cache").inputValue(), "int4-g32");
    await cpu.page.getByTestId("generate-count").selectOption("4");
    await cpu.page.getByTestId("generate").click();
    await cpu.page.getByTestId("generate-note").waitFor({ timeout: 120_000 });
    assert.match(await cpu.page.getByTestId("generate-note").innerText(), /^Generated 4 tokens on the CPU.*rounded to int4-g32 \(each token once, as it joins; held in f32\)/);
    assert.equal((await readModel(cpu)).text, grown);
    gpu.assertNoConsoleErrors();
    cpu.assertNoConsoleErrors();
    await gpu.close();
    await cpu.close();
    const hostile = await AppPage.open(session, TINY + "&gencache=kivi-int2%3Cb%3E");
    assert.match(await hostile.page.getByTestId("url-notices").innerText(), /is not a cache Generate decodes with/);
    assert.equal(await hostile.page.getByTestId("generate-cache").inputValue(), "fp32");
    await hostile.close();
  });

  test("Generate with an fp8 cache sets its scale from the prompt, on the GPU and on the CPU alike", async () => {
    const text = "fn main() { let x";
    const run = (extra) => generateFour(session, "fp8-e4m3", extra, text);
    const gpu = await run("");
    // 4 layers x 2 KV heads x (K, V) x 32 one-byte codes = 512 B a token; the scales are fixed bytes.
    assert.match(gpu.note, /^Generated 4 tokens with the KV cache on the GPU, K and V stored as fp8-e4m3 \(512 bytes a token; one f32 scale for each layer's K and V, set from the prompt\), read by the kernel/);
    const cpu = await run("&backend=cpu");
    assert.match(cpu.note, /^Generated 4 tokens on the CPU.*rounded to fp8-e4m3 \(each token once, as it joins; one f32 scale for each layer's K and V, set from the prompt; held in f32\)/);
    // Both tiers scale by the prompt (their logits agree within 1e-4 natively): the same greedy text.
    assert.equal(cpu.text, gpu.text);
    assert.notEqual(gpu.text, text);
  });

  test("Generate with KIVI's cache quantises each token once it leaves the recent window, on the GPU and on the CPU alike", async () => {
    // 46 tokens: the prefill quantises V's first 30 (past the recent 16), each generated token
    // another, and the second one (the 48th token) K's first block of 32, from its f32 ring.
    const text = "fn main() {\n    let mut total = 0;\n    for i in 0..10 {\n        total += i * 2;\n    }\n    println!(\"{}\", total);\n    let v = total";
    const run = (extra) => generateFour(session, "kivi-int2", extra, text);
    const gpu = await run("");
    // K's block of 32 tokens: 32 x 2 code words + 32 scale words (12 B a token), V 3 words (12 B):
    // 24 B x 4 layers x 2 KV heads = 192 B a token once quantised.
    assert.match(gpu.note, /^Generated 4 tokens with the KV cache on the GPU, K and V stored as kivi-int2 \(192 bytes a token; K quantised in blocks of 32 tokens, V a token at a time, as they leave the recent 16, which wait in f32\), read by the kernel/);
    const cpu = await run("&backend=cpu");
    assert.match(cpu.note, /^Generated 4 tokens on the CPU.*rounded to kivi-int2 \(each token once; K quantised in blocks of 32 tokens/);
    // Both tiers read the cache as decoding holds it (their logits agree within 2e-5 natively at int2).
    assert.equal(cpu.text, gpu.text);
    assert.notEqual(gpu.text, text);
  });

  test("hostile links with the trained model: refused with notices, nothing injected, the page alive", async () => {
    const html = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>';
    for (const [query, expect] of [
      ["&n=65536", /65,536 generated words make at least as many tokens/],
      ["&layer=99", /Ignored layer: 99 is past the model's last layer \(3\)/],
      ["&heads=0-99999", /head/i],
      ["&text=" + encodeURIComponent(html), null],
    ]) {
      const app = await AppPage.open(session, TINY + query);
      await app.page.waitForSelector('[data-testid="explorer"][data-status="ready"], [data-testid="explorer"][data-status="error"]', { timeout: 120_000 });
      if (expect) assert.match(await app.page.locator("body").innerText(), expect, query);
      assert.equal(await app.page.evaluate(() => window.__pwned), undefined, query);
      assert.equal(await app.page.locator("main img, main script").count(), 0, query);
      assert.equal(await app.page.getByTestId("panic-panel").count(), 0, query);
      assert.equal(await app.page.evaluate(() => "alive"), "alive");
      await app.close();
    }
  });

  test("the CPU pass over 128 tokens never holds the page for long", async () => {
    const app = await AppPage.openWatchingLongTasks(session, TINY + "&backend=cpu&text=" + encodeURIComponent("Hello"));
    await readModel(app);
    await app.forgetLongTasks();
    // 126 words of 1 token each ("a" after a space), plus "Hello": 127 tokens on the CPU.
    const job = Number(await app.page.getByTestId("explorer").getAttribute("data-job"));
    await app.page.getByTestId("text-input").fill("Hello" + " a".repeat(126));
    await finishedAfter(app, job);
    const shown = await readModel(app);
    assert.match(shown.status, /ran on the CPU/);
    const longest = await app.longestTask();
    console.log(`longest task during the CPU pass: ${longest} ms; ${shown.status}`);
    assert.ok(longest < 250, `the main thread was blocked for ${longest} ms (${shown.status})`);
    await app.close();
  });

  test("a failed download says why, keeps the page alive, and loads on a second try", async () => {
    const context = await session.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.route("**/model.safetensors", (route) => route.fulfill({ status: 503, body: "busy" }));
    const app = new AppPage(page, session.baseUrl);
    await page.goto(session.baseUrl + TINY);
    const error = page.getByTestId("heatmap-error");
    await error.waitFor({ timeout: 60_000 });
    assert.match(await error.innerText(), /Could not load the trained model's model\.safetensors \(HTTP 503\)/);
    await page.unroute("**/model.safetensors");
    await page.getByTestId("trained-retry").click();
    const shown = await readModel(app);
    assert.equal(shown.heads.length, 8);
    assert.equal(await page.getByTestId("trained-retry").count(), 0);
    await app.close();
  });

  test("text past the 128 tokens it was trained on is refused with a notice, and shorter text works again", async () => {
    const app = await AppPage.open(session, TINY + "&text=" + encodeURIComponent("borrow ".repeat(200)));
    const error = app.page.getByTestId("heatmap-error");
    await error.waitFor({ timeout: 120_000 });
    assert.match(await error.innerText(), /This text is \d+ tokens .* at most 128, the length it was trained on/);
    assert.match(await app.page.getByTestId("next-token-error").innerText(), /at most 128/);
    await app.typeText("Short again.");
    const shown = await readModel(app);
    assert.equal(shown.heads.length, 8);
    app.assertNoConsoleErrors();
    await app.close();
  });
});
