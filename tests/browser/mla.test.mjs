// The MLA view as a person drives it: open a DeepSeek-V3 layer, read how far the expanded and
// absorbed forms are apart (rounding), check the cost table against a hand computation, rotate the
// whole key (the forms come apart), reopen the link, run it on the CPU tier, and open hostile links.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

/** The largest difference of probabilities once the page shows it for `rot`. */
async function maxDiff(app, rot = "decoupled") {
  const el = await app.page.waitForSelector(`[data-testid="mla-max-diff"][data-rot="${rot}"]`, { timeout: 90_000 });
  return Number(await el.getAttribute("data-value"));
}

describe("MLA view", () => {
  test("both forms agree to rounding on the GPU, each within rounding of its f64 reference", async () => {
    const app = await AppPage.open(session, "?view=mla&model=deepseek-v3&tokens=24&qheads=2&ctx=4096");
    const diff = await maxDiff(app);
    assert.ok(diff < 1e-5, `max |p_expanded − p_absorbed| = ${diff}`);
    console.log(`# ${await app.adapterLine()}: max |p_expanded − p_absorbed| = ${diff}`);
    assert.equal(await app.page.getByTestId("mla-tier").getAttribute("data-on-gpu"), "true");
    assert.match(await app.page.getByTestId("mla-tier").innerText(), /576 wide/);
    const ref = app.page.getByTestId("mla-reference");
    assert.ok(Number(await ref.getAttribute("data-prob-error")) < 1e-5);
    assert.ok(Number(await app.page.getByTestId("mla-max-out-diff").getAttribute("data-value")) < 1e-4);
    // Both heatmaps of the drawn head: 24 queries over 24 keys each.
    const maps = app.page.locator('[data-testid="mla-panel"] [data-testid="head-heatmap"]');
    assert.equal(await maps.count(), 2);
    for (const n of await maps.evaluateAll((els) => els.map((e) => e.dataset.nQ))) assert.equal(n, "24");
    // One token against 4,096 cached, fp16, all 128 heads, absorbed:
    // 2·128·128·512 + 2·4096·128·576 + 2·4096·128·512 + 2·128·512·128 = 1,174,405,120 FLOPs;
    // (4096·576 + 128·512·256 + 4·128·512) values × 2 B = 38,797,312 B.
    const row = app.page.locator('[data-testid="mla-cost"][data-phase="decode"][data-form="absorbed"]');
    assert.equal(await row.getAttribute("data-flops"), "1174405120");
    assert.equal(await row.getAttribute("data-bytes"), "38797312");
    assert.match(await app.page.getByTestId("synthetic-note").innerText(), /Synthetic weights/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("rotating the whole key separates the forms, and the link reopens it", async () => {
    const app = await AppPage.open(session, "?view=mla&model=deepseek-v3&tokens=16&qheads=2");
    await maxDiff(app);
    await app.page.getByTestId("mla-rot").selectOption("whole");
    await app.waitForParam("rot", "whole");
    const whole = await maxDiff(app, "whole");
    assert.ok(whole > 0.01, `whole-key difference ${whole}`);
    assert.match(await app.page.getByTestId("mla-verdict").innerText(), /R_\(j−i\)/);
    await app.page.getByTestId("mla-head").fill("1");
    await app.page.getByTestId("mla-head").press("Enter");
    await app.waitForParam("mhead", "1");
    const again = await AppPage.open(session, await app.query());
    // The same seeded layer: the same figure, byte for byte.
    assert.equal(await maxDiff(again, "whole"), whole);
    assert.equal(await again.page.getByTestId("mla-rot").inputValue(), "whole");
    assert.equal(await again.page.getByTestId("mla-head").inputValue(), "1");
    again.assertNoConsoleErrors();
    await again.close();
    await app.close();
  });

  test("the CPU tier computes both forms with the twins, and says so", async () => {
    const app = await AppPage.open(session, "?view=mla&model=deepseek-v2&tokens=12&backend=cpu");
    assert.ok((await maxDiff(app)) < 1e-5);
    assert.equal(await app.page.getByTestId("mla-tier").getAttribute("data-on-gpu"), "false");
    assert.match(await app.page.getByTestId("mla-tier").innerText(), /CPU tier/);
    // The view links to its lesson, whose first step shows the view.
    await app.page.locator('[data-testid="view-lesson-link"][data-lesson="mla-both-ways"]').click();
    await app.page.locator('[data-testid="lesson-step"][data-lesson="mla-both-ways"][data-step="1"]').waitFor();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("hostile and oversized links are cut or refused with notices, and a model without MLA borrows DeepSeek's", async () => {
    const app = await AppPage.open(session, "?view=mla&model=llama-3-8b&tokens=99999&qheads=0&mhead=%3Cscript%3E&rot=%3Cb%3Ex%3C%2Fb%3E");
    const notices = await app.page.getByTestId("url-notices").innerText();
    assert.match(notices, /cut to 256/);
    assert.match(notices, /qheads/);
    assert.match(notices, /rot/);
    // Nothing from the link became markup.
    assert.equal(await app.page.evaluate(() => [...document.querySelectorAll("b")].filter((b) => b.textContent === "x").length), 0);
    assert.match(await app.page.getByTestId("mla-borrowed").innerText(), /has no MLA layers/);
    assert.equal(await app.page.getByTestId("mla-tokens").inputValue(), "256");
    assert.ok((await maxDiff(app)) < 1e-5);
    // A value typed out of bounds is refused under the form, and the link keeps its value.
    await app.page.getByTestId("mla-qheads").fill("-4");
    await app.page.getByTestId("mla-qheads").press("Enter");
    await app.page.getByTestId("mla-refused").waitFor();
    assert.ok(!(await app.query()).includes("qheads"));
    app.assertNoConsoleErrors();
    await app.close();
  });
});
