// Models with layers that have no softmax attention (state-space, linear attention, convolution,
// feed-forward only), opened from cfg links: the layer strip marks them, the explorer says why such a
// layer has no heatmaps (and starts no job), and the decode demo pages the attention layers only.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";
import { heads, waitReady } from "./explorer_helpers.mjs";

// Jamba-like: 32 layers, attention in the 5th of every 8 (layers 4, 12, 20, 28), Mamba elsewhere;
// each Mamba layer keeps (32,768 + 262,144) elements x 2 B = 589,824 B.
const JAMBA = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
// A pure Mamba: 64 state-space layers, no attention at all.
const MAMBA = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

/** The explorer's no-attention message, or null when it shows none. */
async function noAttention(page) {
  const el = page.getByTestId("no-attention");
  if (await el.count() === 0) return null;
  return { ...(await el.evaluate((e) => ({ ...e.dataset }))), text: await el.innerText() };
}

describe("models without attention in some layers", () => {
  test("a hybrid opens on its first attention layer; a Mamba layer says why it has no heatmaps", async () => {
    const app = await AppPage.open(session, `?cfg=${JAMBA}&text=one%20two%20three%20four`);
    await waitReady(app.page);
    // No layer in the link: the first attention layer, 4, with its 32 heads.
    assert.equal(await app.page.getByTestId("layer-input").inputValue(), "4");
    assert.equal(new URLSearchParams(await app.query()).get("layer"), null);
    assert.equal((await heads(app.page)).length, 32);
    // The model select names the custom model, not a preset the page is not showing.
    assert.equal(await app.page.getByTestId("model-select").inputValue(), "custom");

    const strip = app.page.getByTestId("layer-strip");
    assert.equal(await strip.locator('[data-testid="layer-cell"]').count(), 32);
    assert.equal(await strip.locator('[data-testid="layer-cell"][data-kind="ssm"]').count(), 28);
    const global = await strip.locator('[data-testid="layer-cell"][data-kind="global"]').evaluateAll((els) => els.map((e) => e.dataset.layer));
    assert.deepEqual(global, ["4", "12", "20", "28"]);
    const title = await strip.locator('[data-layer="2"]').getAttribute("title");
    assert.match(title, /^Layer 2: state-space layer; no attention, keeps a state of 589,824 bytes/);
    assert.equal(await strip.locator('[data-layer="2"]').evaluate((e) => e.classList.contains("shared")), false);
    assert.match(await app.page.getByTestId("layer-legend").locator('[data-legend="ssm"]').innerText(), /state-space/);

    // A Mamba layer: the message, no heatmaps, no job.
    await strip.locator('[data-layer="2"]').click();
    await app.waitForParam("layer", "2");
    await app.page.waitForSelector('[data-testid="no-attention"]');
    const why = await noAttention(app.page);
    assert.equal(why.kind, "ssm");
    assert.equal(why.scope, "layer");
    assert.match(why.text, /^Layer 2 is a state-space layer: it has no softmax attention, so there is no attention map; it carries a state of 589,824 bytes/);
    assert.equal(await app.page.getByTestId("explorer").getAttribute("data-status"), "no-attention");
    assert.equal(await app.page.getByTestId("head-heatmap").count(), 0);
    assert.equal(await app.page.getByTestId("head-placeholder").count(), 0);
    // Reach: a Mamba layer's state folds in every earlier token.
    const reach = app.page.getByTestId("stacked-reach");
    assert.equal(await reach.getAttribute("data-value"), "all");
    assert.match(await reach.innerText(), /Layer 0 is a state-space layer, whose state folds in every earlier token/);

    // The offer to jump goes to the nearest attention layer, and its heatmaps come back.
    const jump = app.page.getByTestId("jump-to-attention");
    assert.equal(await jump.getAttribute("data-layer"), "4");
    await jump.click();
    await app.waitForParam("layer", null);
    await app.page.waitForSelector('[data-testid="no-attention"]', { state: "detached" });
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="head-heatmap"]').length === 32);
    // The maps show as each head is done; the job says ready after the last (a loaded machine may
    // be between the two).
    await app.page.waitForSelector('[data-testid="explorer"][data-status="ready"]', { timeout: 60_000 });
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the RoPE panel of a Mamba layer says there is nothing to rotate", async () => {
    const app = await AppPage.open(session, `?cfg=${JAMBA}&layer=0&rope=on&text=a%20b`);
    await app.page.waitForSelector('[data-testid="no-attention"]');
    assert.match(await app.page.getByTestId("rope-summary").innerText(), /^No queries or keys here, so nothing rotates/);
    assert.equal(await app.page.getByTestId("rope-chart").count(), 0);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a model without any attention layer says so for the whole view", async () => {
    const app = await AppPage.open(session, `?cfg=${MAMBA}&text=a%20b%20c`);
    await app.page.waitForSelector('[data-testid="no-attention"]');
    const why = await noAttention(app.page);
    assert.equal(why.scope, "model");
    assert.equal(why.kind, "ssm");
    assert.match(why.text, /has no softmax attention layer: its layers are 64 state-space layers, so there is no attention map to show/);
    assert.equal(await app.page.getByTestId("jump-to-attention").count(), 0);
    assert.equal(await app.page.getByTestId("head-heatmap").count(), 0);
    assert.equal(await app.page.getByTestId("explorer").getAttribute("data-status"), "no-attention");
    assert.equal(await app.page.locator('[data-testid="layer-cell"][data-kind="ssm"]').count(), 64);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("attention layers with a Mamba mixer beside them (Falcon-H1) show heatmaps and are marked as keeping a state", async () => {
    // 4 layers, each attention (8 KV heads of 128) and Mamba-2 side by side; each mixer keeps
    // 32,768 * 2 B + 262,144 * 2 B = 589,824 B, 4 * 589,824 = 2,359,296 B in all.
    const falcon = "L4.d4096.h32.kv8.hd128.bas.ssm32768-262144-2-2-100000000.fs14336.v65536.rope10000.ctx4096";
    const app = await AppPage.open(session, `?cfg=${falcon}&text=one%20two%20three&heads=0-3`);
    await waitReady(app.page);
    assert.equal((await heads(app.page)).length, 4);
    const cells = app.page.locator('[data-testid="layer-cell"][data-kind="global"][data-beside="ssm"]');
    assert.equal(await cells.count(), 4);
    assert.match(await cells.first().getAttribute("title"),
      /^Layer 0: global \(causal over all tokens\); also runs a state-space layer beside its attention, keeping a state of 589,824 bytes/);
    assert.match(await app.page.getByTestId("layer-legend").locator('[data-legend="beside-ssm"]').innerText(), /state-space mixer beside it/);
    await app.page.goto(new URL(`?view=kv&cfg=${falcon}`, app.page.url()).toString());
    assert.match(await app.page.getByTestId("decode-recurrent").innerText(),
      /runs the 4 attention layers only; the state-space mixers beside its 4 attention layers keep a constant state of 2,359,296 bytes/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the decode demo runs a hybrid's attention layers only, and a pure Mamba not at all", async () => {
    const app = await AppPage.open(session, `?view=kv&cfg=${JAMBA}&dtype=bf16`);
    await app.waitForEngine();
    const note = app.page.getByTestId("decode-recurrent");
    assert.equal(await note.getAttribute("data-attention-layers"), "4");
    assert.equal(await note.getAttribute("data-runs"), "true");
    // 28 Mamba layers x 589,824 B = 16,515,072 B.
    assert.match(await note.innerText(), /^The demo runs the 4 attention layers only; the 28 state-space layers keep a constant state of 16,515,072 bytes .* not simulated here\.$/);
    await app.page.getByTestId("decode-pace").selectOption("fast");
    await app.page.getByTestId("decode-start").click();
    await app.page.waitForFunction(() => Number(document.querySelector('[data-testid="decode-status"]')?.dataset.aTokens) >= 20, null, { timeout: 120_000 });
    await app.page.getByTestId("decode-stop").click();
    const kinds = await app.page.getByTestId("page-grid").evaluateAll((els) => els.map((e) => e.dataset.kind));
    assert.deepEqual(kinds, ["global"]);
    assert.equal(await app.page.getByTestId("decode-error").count(), 0);
    app.assertNoConsoleErrors();
    await app.close();

    const mamba = await AppPage.open(session, `?view=kv&cfg=${MAMBA}`);
    await mamba.waitForEngine();
    const nothing = mamba.page.getByTestId("decode-recurrent");
    assert.equal(await nothing.getAttribute("data-runs"), "false");
    assert.match(await nothing.innerText(), /has no attention layer, so there is no KV cache to page and the demo does not start/);
    assert.equal(await mamba.page.getByTestId("decode-start").isDisabled(), true);
    assert.equal(await mamba.page.getByTestId("decode-status").getAttribute("data-state"), "idle");
    mamba.assertNoConsoleErrors();
    await mamba.close();
  });
});
