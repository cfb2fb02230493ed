// The memory view as a person drives it: open a link, read each quantised-KV scheme's row measured
// on the trained model over the link's text, check the bytes per token against a hand computation and
// that the full-precision row costs nothing while int2 costs something, the same rows on the CPU
// without WebGPU, change G, reopen the link, and open hostile links.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

const TEXT = "Each value in Rust has an owner. There can only be one owner at a time.";

/** Every row's figures by name, once the measurement is shown. */
async function rows(app) {
  await app.page.getByTestId("memory-row").first().waitFor({ timeout: 120_000 });
  const all = await app.page.getByTestId("memory-row").evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
  return Object.fromEntries(all.map((r) => [r.name, r]));
}

describe("memory view", () => {
  test("each scheme's bytes per token by hand, KL 0 at full precision and above 0 at two bits", async () => {
    const app = await AppPage.open(session, `?view=memory&tech=quant&text=${encodeURIComponent(TEXT)}`);
    const r = await rows(app);
    assert.equal(Object.keys(r).length, 9);
    for (const row of Object.values(r)) assert.equal(row.tech, "quant");
    // The trained model caches 4 layers x 2 KV heads x (K, V) = 16 vectors of 32 values a token.
    // fp32: 16 x 32 x 4 B = 2048; fp16 1024; fp8 512 (its per-tensor scales do not grow with tokens);
    // int8: 16 x (32 B + a 4 B scale) = 576; int4-g32: 16 x (16 B + f16 scale and min 4 B) = 320;
    // int2-g32: 16 x (8 + 4) = 192; KIVI int2 at G = 32: per head over 32 tokens, K 32 x 32 x 2 bits
    // + 32 channels x 32 bits, V 32 x (64 + 32) bits: 6144 / 32 = 192 bits = 24 B; x 8 heads = 192.
    const want = { fp32: 2048, fp16: 1024, "fp8-e4m3": 512, "fp8-e5m2": 512, int8: 576, "int4-g32": 320, "int2-g32": 192, "kivi-int4": 320, "kivi-int2": 192 };
    for (const [name, bytes] of Object.entries(want)) assert.equal(Number(r[name].bytesPerToken), bytes, name);
    assert.equal(Number(r.fp32.kl), 0);
    assert.equal(Number(r.fp32.top1), 1);
    assert.ok(Number(r.fp16.kl) < 1e-6, `fp16 KL ${r.fp16.kl}`);
    assert.ok(Number(r["int2-g32"].kl) > 0, `int2 KL ${r["int2-g32"].kl}`);
    assert.ok(Number(r.fp32.loss) > 0 && Number(r.fp32.loss) < 10, `loss ${r.fp32.loss}`);
    // The chosen scheme's heads: 4 layers x 8 query heads; the model is named, and said to be small.
    assert.equal(await app.page.getByTestId("memory-head").count(), 32);
    // Each head's output under int4-g32 (the default) moved, by less than its own size.
    const errors = await app.page.getByTestId("memory-head").evaluateAll((els) => els.map((e) => Number(e.dataset.outputError)));
    assert.ok(errors.every((e) => e > 0 && e < 1), `output errors ${errors}`);
    assert.match(await app.page.getByTestId("memory-heading").innerText(), /Attention Lab tiny.*small/s);
    await app.page.getByTestId("memory-chart").waitFor();
    // The view links to its lesson, whose first step opens it again.
    await app.page.locator('[data-testid="view-lesson-link"][data-lesson="quantised-cache"]').click();
    await app.page.locator('[data-testid="lesson-step"][data-lesson="quantised-cache"][data-step="1"]').waitFor();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("without WebGPU the CPU measures the same rows as the GPU", async () => {
    const query = `?view=memory&tech=quant&text=${encodeURIComponent(TEXT)}`;
    const gpu = await AppPage.open(session, query);
    const onGpu = await rows(gpu);
    assert.match(await gpu.page.getByTestId("memory-heading").innerText(), /rounded on the GPU/);
    await gpu.close();
    const cpu = await AppPage.open(session, query + "&backend=cpu");
    const onCpu = await rows(cpu);
    assert.match(await cpu.page.getByTestId("memory-heading").innerText(), /rounded on the CPU \(no WebGPU here\)/);
    assert.equal(Number(onCpu.fp32.kl), 0);
    for (const name of Object.keys(onGpu)) {
      const [g, c] = [onGpu[name], onCpu[name]];
      assert.equal(c.bytesPerToken, g.bytesPerToken, name);
      // The two tiers sum in different orders: the loss agrees to 4 digits, KL to 2 % (or 1e-7 near 0).
      assert.ok(Math.abs(Number(c.loss) - Number(g.loss)) < 1e-3, `${name} loss ${c.loss} vs ${g.loss}`);
      assert.ok(Math.abs(Number(c.kl) - Number(g.kl)) <= Math.max(0.02 * Number(g.kl), 1e-7), `${name} KL ${c.kl} vs ${g.kl}`);
    }
    cpu.assertNoConsoleErrors();
    await cpu.close();
  });

  test("the group size is a control, lives in the link and reopens", async () => {
    const app = await AppPage.open(session, `?view=memory&text=${encodeURIComponent(TEXT)}`);
    await rows(app);
    await app.page.getByTestId("memory-group").selectOption("16");
    await app.waitForParam("group", "16");
    // int4-g16: 16 x (16 B + 2 groups x 4 B) = 384.
    await app.page.waitForSelector('[data-testid="memory-row"][data-name="int4-g16"]', { timeout: 120_000 });
    const again = await AppPage.open(session, await app.query());
    assert.equal(Number((await rows(again))["int4-g16"].bytesPerToken), 384);
    await again.close();
    await app.close();
  });

  test("hostile links fall back with notices and the page still answers", async () => {
    const app = await AppPage.open(session, "?view=memory&tech=%3Cscript%3Ealert(1)%3C/script%3E&group=7&recent=-4&scheme=int3");
    const notices = await app.page.getByTestId("url-notices").innerText();
    assert.match(notices, /group/);
    assert.match(notices, /scheme/);
    assert.equal(await app.page.locator("script:not([src])").filter({ hasText: "alert(1)" }).count(), 0);
    await rows(app);
    await app.close();
    // Longer than the 128 tokens the model reads: said, not measured.
    const long = await AppPage.open(session, `?view=memory&text=${encodeURIComponent("word ".repeat(300))}`);
    assert.match(await long.page.getByTestId("memory-error").innerText({ timeout: 60_000 }), /at most 128/);
    await long.page.locator('[data-testid="view-tab"][data-view="kv"]').click();
    await long.page.getByTestId("kv-bytes-per-token").waitFor();
    long.assertNoConsoleErrors();
    await long.close();
  });
});
