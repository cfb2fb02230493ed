// The compare view as a person drives it: open a link, read each variant's exact bytes and ratio to
// MHA, its attention-parameter change and FLOPs, change a variant's parameter and the dtype.
// Every expected figure is computed by hand here (BigInt where it passes 2^53).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

/** Every variant row's data attributes, keyed by variant name, once `variant` shows `bytes`. */
async function variantRows(app, waitFor) {
  if (waitFor) {
    await app.page.waitForSelector(`[data-testid="variant-row"][data-variant="${waitFor[0]}"][data-bytes="${waitFor[1]}"]`, { timeout: 15_000 });
  }
  const rows = await app.page.locator('[data-testid="variant-row"][data-variant]').evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
  return Object.fromEntries(rows.map((r) => [r.variant, r]));
}

describe("compare view", () => {
  test("llama-3-8b as every variant at 128K tokens, FP16, equals the hand computation", async () => {
    const app = await AppPage.open(session, "?view=compare&model=llama-3-8b&ctx=131072&dtype=fp16");
    const n = 131072;
    // MHA: 32 layers * 32 KV heads * 128 dims * 2 (K, V) * 2 B = 524,288 B per token; * 131,072 tokens.
    const mha = 32 * 32 * 128 * 2 * 2 * n; // 68,719,476,736
    const rows = await variantRows(app, ["mha", mha]);
    assert.equal(rows.mha.bytes, String(mha));
    assert.equal(rows.mha.bytesPerToken, "524288");
    // GQA 8 (what Llama 3 8B publishes): a quarter of MHA.
    assert.equal(rows.gqa8.bytes, String(mha / 4));
    assert.equal(Number(rows.gqa8.ratio), 0.25);
    assert.equal(rows.published.bytes, String(mha / 4));
    // MQA: one KV head, 1/32.
    assert.equal(rows.mqa.bytes, String(mha / 32));
    // MLA 512 + 64: 32 layers * 576 * 2 B = 36,864 B per token.
    assert.equal(rows.mla512r64.bytes, String(32 * 576 * 2 * n));
    // Sliding 4096 on every layer: capped at 4096 tokens.
    assert.equal(rows.sw4096.bytes, String(524288 * 4096));
    // Hybrid 5:1 over 32 layers: layers 5, 11, 17, 23, 29 are global (5), 27 slide over 1024;
    // per layer per token 32 * 128 * 2 * 2 = 16,384 B.
    assert.equal(rows.hybrid5w1024.bytes, String(16384 * (27 * 1024 + 5 * n)));
    // K = V and pairs of layers sharing a cache both halve MHA.
    assert.equal(rows.kveqv.bytes, String(mha / 2));
    assert.equal(rows.xl2.bytes, String(mha / 2));

    // The dtype matrix: MHA at INT4 is a quarter of FP16; 2-bit an eighth.
    const cell = (v, d) => app.page.locator(`[data-testid="dtype-cell"][data-variant="${v}"][data-dtype="${d}"]`).getAttribute("data-value");
    assert.equal(await cell("mha", "int4"), String(mha / 4));
    assert.equal(await cell("mha", "int2"), String(mha / 8));
    assert.equal(await cell("gqa8", "fp32"), String(mha / 2));

    // Attention parameters: GQA 8 drops K and V from 4096x4096 to 4096x1024 in each of 32 layers.
    const params = async (v) => app.page.locator(`[data-testid="params-row"][data-variant="${v}"]`).getAttribute("data-delta");
    assert.equal(await params("gqa8"), String(-(32 * 2 * 4096 * (4096 - 1024))));
    assert.equal(await params("mha"), "0");
    assert.equal(await params("sw4096"), "0");
    // K = V drops the V projection: 32 * 4096 * 4096 fewer.
    assert.equal(await params("kveqv"), String(-(32 * 4096 * 4096)));

    // FLOPs of a 128K prefill for MHA: projections 2 * n * 4 * 4096^2 per layer; the causal core
    // 2 * 32 heads * (128 + 128) * n(n+1)/2 per layer; 32 layers.
    const flops = await app.page.locator('[data-testid="flops-row"][data-variant="mha"]').evaluate((e) => ({ ...e.dataset }));
    const N = 131072n;
    assert.equal(flops.projections, String(2n * N * 4n * 4096n * 4096n * 32n));
    assert.equal(flops.core, String(2n * 32n * 256n * (N * (N + 1n) / 2n) * 32n));
    // The sliding variant's core: pairs = W(W+1)/2 + (n - W) W with W = 4096.
    const W = 4096n;
    const sw = await app.page.locator('[data-testid="flops-row"][data-variant="sw4096"]').getAttribute("data-core");
    assert.equal(sw, String(2n * 32n * 256n * (W * (W + 1n) / 2n + (N - W) * W) * 32n));
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("GQA's saving on Llama 4 Maverick's attention weights", async () => {
    const app = await AppPage.open(session, "?view=compare&model=llama-4-maverick&ctx=8192");
    // Maverick: 48 layers, d = 5120, 40 query heads and 8 KV heads of 128.
    // One layer: Q 5120x5120 + K, V 5120x1024 each + O 5120x5120 = 62,914,560 (MHA: 4 * 5120^2 = 104,857,600).
    const perLayer = 2 * 5120 * 5120 + 2 * 5120 * 1024;
    await app.page.waitForSelector(`[data-testid="attn-params-per-layer"][data-value="${perLayer}"]`);
    const published = await app.page.locator('[data-testid="params-row"][data-variant="published"]').evaluate((e) => ({ ...e.dataset }));
    assert.equal(published.value, String(48 * perLayer));
    assert.equal(published.delta, String(-48 * (4 * 5120 * 5120 - perLayer))); // -2,013,265,920
    assert.match(await app.page.locator('[data-testid="params-row"][data-variant="published"]').innerText(), /−2,013,265,920/);
    // Its cache at 8K: 36 chunked (8192) + 12 global layers, all holding 8,192 tokens here:
    // 48 * 8 * 128 * 2 * 2 B * 8192 = 1,610,612,736 B.
    const rows = await variantRows(app);
    assert.equal(rows.published.bytes, String(48 * 8 * 128 * 2 * 2 * 8192));
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("changing a variant's parameter and the dtype rewrites the link and the bars", async () => {
    const app = await AppPage.open(session, "?view=compare&model=llama-3-8b&ctx=8192&dtype=fp16");
    // GQA with 4 KV heads: 32 * 4 * 128 * 2 * 2 B * 8192 = 536,870,912 B.
    await app.page.getByTestId("gqa-groups").selectOption("4");
    await app.page.waitForFunction(() => new URL(location.href).searchParams.get("variants")?.includes("gqa4"));
    let rows = await variantRows(app, ["gqa4", 32 * 4 * 128 * 2 * 2 * 8192]);
    assert.equal(rows.gqa4.bytes, "536870912");
    assert.equal(rows.gqa8, undefined);
    // Sliding window 1024: 524,288 B per token * 1024.
    await app.page.getByTestId("window-tokens").fill("1024");
    await app.page.getByTestId("window-tokens").blur();
    rows = await variantRows(app, ["sw1024", 524288 * 1024]);
    // FP8: every figure halves.
    await app.page.getByTestId("dtype-select").selectOption("fp8");
    await app.waitForParam("dtype", "fp8");
    rows = await variantRows(app, ["gqa4", 536870912 / 2]);
    assert.equal(rows.mha.bytes, String(32 * 32 * 128 * 2 * 8192));

    // The link reopens the same comparison in a fresh window.
    const shared = await AppPage.open(session, new URL(app.page.url()).search);
    const again = await variantRows(shared, ["gqa4", 536870912 / 2]);
    assert.equal(again.sw1024.bytes, String(524288 / 2 * 1024));
    shared.assertNoConsoleErrors();
    await shared.close();

    // Back to the standard set.
    await app.page.getByTestId("variants-reset").click();
    await app.page.waitForFunction(() => !new URL(location.href).searchParams.has("variants"));
    await variantRows(app, ["gqa8", 32 * 8 * 128 * 2 * 8192]);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("impossible variants are explained, bad links fall back with a notice", async () => {
    // 32 heads cannot form 5 equal groups.
    const app = await AppPage.open(session, "?view=compare&model=llama-3-8b&variants=mha,gqa5,mqa");
    await app.page.getByTestId("variants-skipped").waitFor();
    assert.match(await app.page.getByTestId("variants-skipped").innerText(), /cannot form 5 equal groups/);
    assert.equal(await app.page.locator('[data-testid="variant-row"][data-variant]').count(), 2);
    const bad = await AppPage.open(session, "?view=compare&variants=mha,warp9");
    assert.match(await bad.page.getByTestId("url-notices").innerText(), /Ignored variants/);
    assert.ok(await bad.page.locator('[data-testid="variant-row"][data-variant]').count() >= 8, "the standard set is shown instead");
    await bad.close();
    app.assertNoConsoleErrors();
    await app.close();
  });
  test("one decoded token beside the prefill: its FLOPs, the bytes it reads, FLOPs per byte", async () => {
    const app = await AppPage.open(session, "?view=compare&model=llama-3-8b&ctx=131072&dtype=fp16&variants=published,mha,sw4096");
    const n = 131072n;
    const row = async (v) => app.page.locator(`[data-testid="decode-row"][data-variant="${v}"]`).evaluate((e) => ({ ...e.dataset }));
    // Llama 3 8B, one layer: attention Q, O 4096 x 4096 and K, V 4096 x 1024 = 41,943,040 weights;
    // SwiGLU 3 x 4096 x 14,336 = 176,160,768. Two FLOPs per weight for the one token, 32 layers.
    await app.page.waitForSelector('[data-testid="decode-row"][data-variant="published"]', { timeout: 15_000 });
    const gqa = await row("published");
    assert.equal(gqa.projections, String(2n * 41943040n * 32n));
    assert.equal(gqa.ffn, String(2n * 176160768n * 32n));
    // The core: the query of each of 32 heads scores every cached key and sums every value (128 + 128).
    assert.equal(gqa.core, String(2n * 32n * 256n * n * 32n));
    // Bytes: every weight once in FP16; the cache of 8 KV heads x 128 x 2 (K, V) x 2 B x 32 layers per token.
    const weightBytes = (41943040n + 176160768n) * 32n * 2n;
    const kvBytes = 8n * 128n * 2n * 2n * 32n * n;
    assert.equal(gqa.weightBytes, String(weightBytes));
    assert.equal(gqa.kvBytes, String(kvBytes));
    const flops = 2n * 41943040n * 32n + 2n * 176160768n * 32n + 2n * 32n * 256n * n * 32n;
    assert.ok(Math.abs(Number(gqa.decodeIntensity) - Number(flops) / Number(weightBytes + kvBytes)) < 1e-9);
    // The prefill reads the same bytes for far more work: above 200,000 FLOPs per byte here.
    assert.ok(Number(gqa.prefillIntensity) > 200_000, gqa.prefillIntensity);
    // MHA keeps the core's FLOPs (they count query heads) but reads four times the cache.
    const mha = await row("mha");
    assert.equal(mha.core, gqa.core);
    assert.equal(mha.kvBytes, String(4n * kvBytes));
    assert.equal(mha.projections, String(2n * 4n * 4096n * 4096n * 32n));
    // A window of 4,096 on every (MHA) layer caps what one token reads, whatever the context.
    const sw = await row("sw4096");
    assert.equal(sw.kvBytes, String(32n * 128n * 2n * 2n * 32n * 4096n));
    assert.equal(sw.core, String(2n * 32n * 256n * 4096n * 32n));
    // The table shows the shares and bytes as text, and follows the context.
    const text = await app.page.getByTestId("decode-cost").innerText();
    assert.match(text, /One decoded token at 131,072 tokens of context/);
    assert.match(text, /17\.18 GB/);
    await app.page.goto(app.page.url().replace("ctx=131072", "ctx=4096"));
    await app.page.waitForSelector(`[data-testid="decode-row"][data-variant="published"][data-kv-bytes="${8n * 128n * 2n * 2n * 32n * 4096n}"]`);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a hybrid's variants change its attention layers and leave its state unchanged", async () => {
    // Jamba-like: 28 Mamba layers (16,515,072 B of state) and 4 attention layers of 32 query heads.
    const cfg = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
    const app = await AppPage.open(session, `?view=compare&cfg=${cfg}&ctx=8192&dtype=fp16`);
    const state = String(28 * (32768 * 2 + 262144 * 2));
    // MHA: 4 attention layers × 32 KV heads × 128 × 2 × 2 B = 65,536 B per token; × 8,192 tokens.
    const mha = 4 * 32 * 128 * 2 * 2 * 8192; // 536,870,912
    const rows = await variantRows(app, ["mha", mha]);
    assert.equal(rows.published.bytes, String(mha / 4));
    assert.equal(rows.mqa.bytes, String(mha / 32));
    // Sliding 4,096 on the 4 attention layers only: capped at 4,096 tokens.
    assert.equal(rows.sw4096.bytes, String(65536 * 4096));
    for (const [variant, row] of Object.entries(rows)) assert.equal(row.stateBytes, state, variant);
    assert.match(await app.page.getByTestId("variants-state-note").innerText(), /only the 4 attention layers/);
    // A decoded token reads the state and writes it back: 2 × 16,515,072 B, in every variant; its 28
    // mixers cost 2 × 10^8 weights each: 5.6e9 FLOPs.
    const decode = await app.page.getByTestId("decode-row").evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
    assert.ok(decode.length === Object.keys(rows).length);
    for (const d of decode) {
      assert.equal(d.stateBytes, String(2 * 28 * 589824), d.variant);
      assert.equal(d.mixer, String(2 * 28 * 100000000), d.variant);
    }
    // Prefill: 2 × 8,192 tokens × 10^8 weights × 28 layers = 45,875,200,000,000 FLOPs in the mixers.
    const mixer = await app.page.locator('[data-testid="flops-row"][data-variant="mha"]').getAttribute("data-mixer");
    assert.equal(mixer, String(2 * 8192 * 100000000 * 28));
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a model without attention has no variant to compare, and says so", async () => {
    const cfg = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
    const app = await AppPage.open(session, `?view=compare&cfg=${cfg}`);
    const rows = await variantRows(app, ["published", 0]);
    assert.deepEqual(Object.keys(rows), ["published"]);
    assert.equal(rows.published.stateBytes, String(64 * (20480 * 2 + 81920 * 2)));
    assert.match(await app.page.getByTestId("variants-state-note").innerText(), /the variants do not apply/);
    assert.equal(await app.page.getByTestId("variants-skipped").count(), 0);
    assert.equal(await app.page.getByTestId("state-bytes").getAttribute("data-value"), "13107200");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the variants trained here: each row's loss, spread and cache as the training crate's table gives them", async () => {
    const file = JSON.parse(readFileSync(new URL("../../src/views/compare/trained_variants.json", import.meta.url), "utf8"));
    const app = await AppPage.open(session, "?view=compare&model=llama-3-8b&ctx=8192&dtype=fp16");
    await app.page.waitForSelector('[data-testid="variant-row"][data-attn]', { timeout: 15_000 });
    const rows = await app.page.locator('[data-testid="variant-row"][data-attn]').evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
    assert.deepEqual(rows.map((r) => r.attn), file.rows.map((r) => r.attn));
    // Per token over 4 layers in f16: MHA 8 KV heads x 32 x 2 (K, V) x 2 B; GQA 2 heads; MQA 1; MLA 112 + 16 per layer.
    const bytes = { mha: 4 * 8 * 32 * 2 * 2, gqa: 4 * 2 * 32 * 2 * 2, mqa: 4 * 1 * 32 * 2 * 2, mla: 4 * (112 + 16) * 2 };
    for (const [row, raw] of rows.map((r, i) => [r, file.rows[i]])) {
      const mean = raw.losses.reduce((a, b) => a + b, 0) / raw.losses.length;
      assert.ok(Math.abs(Number(row.loss) - mean) < 1e-12, `${row.attn}: ${row.loss} vs ${mean}`);
      assert.ok(Math.abs(Number(row.spread) - (Math.max(...raw.losses) - Math.min(...raw.losses))) < 1e-12, row.attn);
      assert.equal(row.kvBytes, String(bytes[row.attn]), row.attn);
    }
    // The bars' rows are the chosen model's, apart from these.
    const mhaBytes = String(32 * 32 * 128 * 2 * 2 * 8192);
    const bars = await variantRows(app, ["mha", mhaBytes]);
    assert.equal(bars.mha.bytes, mhaBytes);
    assert.equal(await app.page.getByTestId("variant-row").count(), Object.keys(bars).length + rows.length,
      "every variant-row is either a bar (data-variant) or a trained variant (data-attn)");
    // Each finding compares a variant with MHA, from at least two seeds a side.
    const findings = await app.page.getByTestId("trained-variant-findings").locator("li").allInnerTexts();
    assert.equal(findings.length, file.rows.length - 1);
    for (const f of findings) assert.match(f, /^(GQA|MQA|MLA) \([\d.]+x MHA's cache\): [+-]\d\.\d{3} nats /);
    app.assertNoConsoleErrors();
    await app.close();
  });
});
