// The backward view as a person drives it: open it, read the softmax Jacobian of the explorer's last
// query row, check it against the row's own probabilities by hand (diag(p) − p pᵀ), change the score
// scale and the row, check the head's gradients (dQ, dK, dV) on the GPU against the f64 twin, and
// open hostile links.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

/** The Jacobian's attributes, once it shows `row`. */
async function jacobian(app, row) {
  const el = await app.page.waitForSelector(`[data-testid="softmax-jacobian"][data-row="${row}"]`, { timeout: 30_000 });
  const attr = async (name) => Number(await el.getAttribute(name));
  return { keys: await attr("data-keys"), trace: await attr("data-trace"), rowSum: await attr("data-largest-row-sum") };
}

/** The row's probabilities as the page lists them. */
async function probabilities(app) {
  return app.page.locator('[data-testid="jacobian-probs"] tbody tr').evaluateAll((rows) => rows.map((r) => Number(r.dataset.prob)));
}

/** Each scale row's trace, by scale id. */
async function scaleTraces(app) {
  const rows = await app.page.getByTestId("jacobian-scale-row").evaluateAll((els) => els.map((e) => [e.dataset.scale, Number(e.dataset.trace)]));
  return Object.fromEntries(rows);
}

describe("backward view", () => {
  test("the last row's Jacobian is diag(p) − p pᵀ of its probabilities, its rows summing to zero", async () => {
    // The default text "The cat sat on the mat because the cat was tired." is 12 word tokens: the
    // last row (11, ".") sees all 12 keys under the causal mask.
    const app = await AppPage.open(session, "?view=backward");
    const j = await jacobian(app, "11");
    assert.equal(j.keys, 12);
    assert.equal(await app.page.locator('[data-testid="softmax-jacobian"] rect').count(), 144);
    assert.ok(j.rowSum < 1e-15, `largest row sum ${j.rowSum}`);
    const p = await probabilities(app);
    assert.equal(p.length, 12);
    assert.ok(Math.abs(p.reduce((a, b) => a + b, 0) - 1) < 1e-12);
    // Trace of diag(p) − p pᵀ: Σ p_i (1 − p_i) = 1 − Σ p_i².
    const trace = 1 - p.reduce((a, x) => a + x * x, 0);
    assert.ok(Math.abs(j.trace - trace) < 1e-12, `${j.trace} vs ${trace}`);
    // The synthetic weights say so.
    assert.match(await app.page.getByTestId("synthetic-note").innerText(), /Synthetic weights/);
    // A larger factor on the scores sharpens the row: the trace (1 − Σp²) falls, and a flat row's is 1 − 1/12.
    const t = await scaleTraces(app);
    assert.ok(t["inv-d"] >= t["inv-sqrt-d"] && t["inv-sqrt-d"] >= t.one, JSON.stringify(t));
    assert.ok(Math.abs(t.flat - (1 - 1 / 12)) < 1e-12);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the scale and the row are controls and live in the link", async () => {
    const app = await AppPage.open(session, "?view=backward");
    await jacobian(app, "11");
    await app.page.getByTestId("jacobian-scale").selectOption("one");
    await app.waitForParam("jscale", "one");
    await app.page.waitForSelector('[data-testid="jacobian-scale-row"][data-scale="one"].chosen');
    const unscaled = await jacobian(app, "11");
    const t = await scaleTraces(app);
    assert.ok(Math.abs(unscaled.trace - t.one) < 1e-12);
    await app.page.getByTestId("jacobian-row-input").fill("3");
    await app.page.getByTestId("jacobian-row-input").press("Enter");
    await app.waitForParam("row", "3");
    // Row 3 sees keys 0..3 under the causal mask.
    assert.equal((await jacobian(app, "3")).keys, 4);
    // The link reopens the same row and scale.
    const again = await AppPage.open(session, await app.query());
    assert.equal((await jacobian(again, "3")).keys, 4);
    assert.equal(await again.page.getByTestId("jacobian-scale").inputValue(), "one");
    await again.close();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a row past the text, a bad scale and a long input each say what happened", async () => {
    const app = await AppPage.open(session, "?view=backward&row=500&jscale=huge");
    await jacobian(app, "11");
    assert.match(await app.page.getByTestId("jacobian-row-note").innerText(), /Row 500 is past the text's last token/);
    assert.match(await app.page.getByTestId("url-notices").innerText(), /Ignored jscale/);
    await app.close();
    const long = await AppPage.open(session, "?view=backward&n=4096");
    assert.match(await long.page.getByTestId("jacobian-error").innerText(), /at most 256 tokens/);
    // The rest of the page still answers: the tabs switch views.
    await long.page.locator('[data-testid="view-tab"][data-view="kv"]').click();
    await long.page.getByTestId("kv-bytes-per-token").waitFor();
    long.assertNoConsoleErrors();
    await long.close();
  });

  test("the gradients of the head's KV group on the GPU match the f64 twin, and on the CPU tier too", async () => {
    // Llama 3 8B's layer 0, head 5: KV head 1, read by query heads 4-7.
    const query = "?view=backward&model=llama-3-8b&text=the%20cat%20sat%20on%20the%20mat%20and%20then%20slept&focus=5&mask=causal";
    for (const [suffix, gpu] of [["", "true"], ["&backend=cpu", "false"]]) {
      const app = await AppPage.open(session, query + suffix);
      await app.page.getByTestId("grad-check").first().waitFor({ timeout: 60_000 });
      const rows = await app.page.getByTestId("grad-check").evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
      assert.deepEqual(rows.map((r) => r.tensor), ["dq", "dk", "dv"]);
      for (const r of rows) {
        assert.equal(r.onGpu, gpu);
        // f32 kernels against f64 sums of a 128-wide head over 11 keys: well under 1e-4.
        assert.ok(Number(r.relError) < 1e-4, `${r.tensor} ${r.relError}`);
      }
      const sum = await app.page.getByTestId("grad-group-sum");
      assert.match(await sum.innerText(), /read by 4 query heads/);
      assert.ok(Number(await sum.getAttribute("data-error")) < 1e-5);
      app.assertNoConsoleErrors();
      await app.close();
    }
  });

  test("heads 512 wide go through the GPU's backward too", async () => {
    // Gemma 4 12B's layer 5 is global: 16 query heads over one KV head 512 wide.
    const app = await AppPage.open(session, "?view=backward&model=gemma-4-12b&layer=5&text=the%20cat%20sat%20on%20the%20mat&focus=3&mask=causal");
    await app.page.getByTestId("grad-check").first().waitFor({ timeout: 60_000 });
    const rows = await app.page.getByTestId("grad-check").evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
    assert.deepEqual(rows.map((r) => [r.tensor, r.onGpu]), [["dq", "true"], ["dk", "true"], ["dv", "true"]]);
    for (const r of rows) assert.ok(Number(r.relError) < 1e-4, `${r.tensor} ${r.relError}`);
    assert.match(await app.page.getByTestId("grad-group-sum").innerText(), /read by 16 query heads/);
    app.assertNoConsoleErrors();
    await app.close();
  });
});
