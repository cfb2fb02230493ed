// The lessons as a reader uses them (lesson_walk.test.mjs walks every step): the index, deep links,
// a check answered wrongly then rightly, back/forward and reload, progress, hostile links. Figures
// named below are computed by hand here, never read from the app.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

async function shownStep(app) {
  const step = app.page.getByTestId("lesson-step");
  await step.waitFor({ timeout: 30_000 });
  return { lesson: await step.getAttribute("data-lesson"), step: Number(await step.getAttribute("data-step")) };
}

async function waitForStep(app, lesson, step) {
  await app.page.waitForFunction(([l, s]) => {
    const el = document.querySelector('[data-testid="lesson-step"]');
    return el?.getAttribute("data-lesson") === l && el?.getAttribute("data-step") === String(s);
  }, [lesson, step], { timeout: 30_000 });
}

/** Every live figure of the step: name -> exact value (each must have one). */
async function figures(app) {
  const out = {};
  for (const el of await app.page.getByTestId("live-figure").all()) {
    const name = await el.getAttribute("data-figure");
    const value = await el.getAttribute("data-value");
    assert.ok(value !== null && value !== "" && Number.isFinite(Number(value)), `${name} has no value`);
    out[name] = value;
  }
  return out;
}

describe("Lessons", () => {
  test("a card of the index opens its lesson's first step", async () => {
    const app = await AppPage.open(session, "?view=lesson");
    await app.page.getByTestId("lesson-link").first().waitFor();
    await app.page.locator('[data-testid="lesson-link"][data-lesson="kv-cache"]').click();
    await waitForStep(app, "kv-cache", 1);
    await app.waitForParam("step", "1");
    assert.equal(await app.query(), "?view=lesson&lesson=kv-cache&step=1");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("each card says what its numbers come from: real weights, synthetic ones or arithmetic", async () => {
    const app = await AppPage.open(session, "?view=lesson");
    await app.page.getByTestId("lesson-weights").first().waitFor();
    const cards = await app.page.getByTestId("lesson-link").evaluateAll((els) => els.map((e) => {
      const w = e.querySelector('[data-testid="lesson-weights"]');
      return [e.dataset.lesson, w?.dataset.sources, w?.textContent];
    }));
    const by = Object.fromEntries(cards.map(([id, sources, text]) => [id, { sources, text }]));
    // 07 counts bytes of published layouts; 16 runs the trained model in every step; 04 shows the
    // trained model's heads once and GPT-2's layout on seeded weights otherwise; 17 is the MLA view's
    // seeded layer; 20's table is runs of the training crate beside arithmetic bars.
    assert.deepEqual(by["gqa"], { sources: "arithmetic", text: "arithmetic only" });
    assert.deepEqual(by["quantised-cache"], { sources: "trained", text: "real weights (trained here)" });
    assert.deepEqual(by["many-heads"], { sources: "trained seeded", text: "real weights (trained here) · synthetic weights or inputs" });
    assert.equal(by["mla-both-ways"].sources, "seeded");
    assert.equal(by["what-sharing-costs"].sources, "trained arithmetic");
    assert.ok(cards.every(([, sources]) => /^(trained|seeded|arithmetic)( (seeded|arithmetic))*$/.test(sources ?? "")), "every card says");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("figures equal the hand computation, by deep link", async () => {
    // Llama 3 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 bytes per token.
    let app = await AppPage.open(session, "?view=lesson&lesson=kv-cache&step=1");
    await waitForStep(app, "kv-cache", 1);
    let f = await figures(app);
    assert.equal(f.kv_bytes_per_token, String(2 * 32 * 8 * 128 * 2));
    assert.equal(f.n_layers, "32");
    await app.close();
    // 24 GB for the cache: floor(24e9 / 131072) = 183,105 tokens.
    app = await AppPage.open(session, "?view=lesson&lesson=kv-cache&step=4");
    await waitForStep(app, "kv-cache", 4);
    f = await figures(app);
    assert.equal(f.max_context_tokens, String(Math.floor(24e9 / 131072)));
    await app.close();
    // "The cat sat on the mat": 6 tokens; causal pairs 1+...+6 = 21; a window of 3: 1+2+3+3+3+3 = 15.
    app = await AppPage.open(session, "?view=lesson&lesson=masks&step=1");
    await waitForStep(app, "masks", 1);
    f = await figures(app);
    assert.equal(f.attended_pairs, "21");
    await app.page.getByTestId("lesson-next").click();
    await waitForStep(app, "masks", 2);
    f = await figures(app);
    assert.equal(f.attended_pairs, "15");
    await app.close();
  });

  test("arrow keys turn the pages, but not while typing", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=gqa&step=1");
    await waitForStep(app, "gqa", 1);
    await app.page.keyboard.press("ArrowRight");
    await waitForStep(app, "gqa", 2);
    await app.page.keyboard.press("ArrowLeft");
    await waitForStep(app, "gqa", 1);
    await app.page.getByTestId("ctx-input").focus();
    await app.page.keyboard.press("ArrowRight");
    assert.deepEqual(await shownStep(app), { lesson: "gqa", step: 1 });
    // Leaving the lessons and coming back leaves one listener, not a stale one.
    await app.page.locator('[data-testid="view-tab"][data-view="kv"]').click();
    await app.page.keyboard.press("ArrowRight");
    await app.page.locator('[data-testid="view-tab"][data-view="lesson"]').click();
    await app.page.locator("body").click({ position: { x: 5, y: 5 } });
    await app.page.keyboard.press("ArrowRight");
    await waitForStep(app, "gqa", 2);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a check answered wrongly gets a hint, then rightly", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=kv-cache&step=1");
    await waitForStep(app, "kv-cache", 1);
    const check = app.page.getByTestId("lesson-check");
    const result = check.getByTestId("check-result");
    await check.getByTestId("check-input").fill("65536");
    await check.getByTestId("check-submit").click();
    await app.page.waitForFunction(() => document.querySelector('[data-testid="check-result"]')?.dataset.verdict === "wrong");
    assert.match(await result.innerText(), /Too low .*Multiply/);
    await check.getByTestId("check-input").fill("131,072");
    await check.getByTestId("check-submit").click();
    await app.page.waitForFunction(() => document.querySelector('[data-testid="check-result"]')?.dataset.verdict === "right");
    assert.match(await check.innerText(), /Answer: 131,072 bytes/);
    await app.close();
  });

  test("back, forward and reload restore the step and the reader's changes", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=kv-cache&step=1");
    await waitForStep(app, "kv-cache", 1);
    await app.page.getByTestId("lesson-next").click();
    await waitForStep(app, "kv-cache", 2);
    await app.page.goBack();
    await waitForStep(app, "kv-cache", 1);
    await app.page.goForward();
    await waitForStep(app, "kv-cache", 2);
    // A control change stays in this step's entry, and a reload keeps it.
    await app.page.getByTestId("dtype-select").selectOption("fp8");
    await app.waitForParam("edited", "on");
    await app.page.reload();
    await waitForStep(app, "kv-cache", 2);
    assert.equal(await app.page.getByTestId("dtype-select").inputValue(), "fp8");
    await app.page.getByTestId("lesson-reset").click();
    await app.page.waitForFunction(() => location.search === "?view=lesson&lesson=kv-cache&step=2");
    await app.close();
  });

  test("progress survives a reload and can be cleared", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=gqa&step=1");
    await waitForStep(app, "gqa", 1);
    await app.page.getByTestId("lesson-next").click();
    await waitForStep(app, "gqa", 2);
    await app.page.getByTestId("lesson-index-link").click();
    const seen = () => app.page.locator('[data-testid="lesson-link"][data-lesson="gqa"] [data-testid="lesson-progress"]');
    await seen().waitFor();
    assert.equal(await seen().getAttribute("data-seen"), "2");
    await app.page.reload();
    await seen().waitFor();
    assert.equal(await seen().getAttribute("data-seen"), "2");
    assert.match(await seen().innerText(), /4 steps · 2 seen/);
    await app.page.getByTestId("lesson-progress-clear").click();
    await app.page.waitForFunction(() => document.querySelector('[data-lesson="gqa"] [data-testid="lesson-progress"]')?.dataset.seen === "0");
    await app.page.reload();
    await seen().waitFor();
    assert.equal(await seen().getAttribute("data-seen"), "0");
    await app.close();
  });

  test("hostile lesson links leave the page working", async () => {
    for (const query of [
      "?view=lesson&lesson=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E&step=-5",
      "?view=lesson&lesson=kv-cache&step=99999999999999999999999",
      "?view=lesson&lesson=kv-cache&step=2&edited=on&ctx=1e99&budget=-1&text=%3Cscript%3Ex%3C%2Fscript%3E",
      "?view=lesson&lesson=masks&step=1&text=" + "a%20".repeat(3000) + "&window=0",
    ]) {
      const app = await AppPage.open(session, query);
      await app.page.locator('[data-testid="lesson-step"], [data-testid="lesson-index"]').first().waitFor({ timeout: 30_000 });
      assert.equal(await app.page.locator("img[src=x]").count(), 0, query);
      assert.equal(await app.page.getByText("Something went wrong").count(), 0, query);
      await app.close();
    }
  });

  test("an unknown lesson shows the index with a notice", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=no-such-thing&step=3");
    await app.page.getByTestId("lesson-index").waitFor();
    assert.match(await app.page.getByTestId("url-notices").innerText(), /no lesson "no-such-thing"/);
    await app.close();
  });
  test("each view links back to the lessons that explain it", async () => {
    const app = await AppPage.open(session, "?view=kv&model=mistral-7b");
    const link = app.page.locator('[data-testid="view-lesson-link"][data-lesson="kv-cache"]');
    await link.click();
    await waitForStep(app, "kv-cache", 1);
    assert.equal(await app.query(), "?view=lesson&lesson=kv-cache&step=1");
    await app.page.goBack();
    await app.page.getByTestId("view-lessons").waitFor();
    assert.equal(await app.query(), "?view=kv&model=mistral-7b");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a step's highlight marks the row its text talks about", async () => {
    const app = await AppPage.open(session, "?view=lesson&lesson=masks&step=2");
    await waitForStep(app, "masks", 2);
    await app.heatmap(6);
    // Row 4 (the second "the") of "The cat sat on the mat": a band 4 cells down, one cell high.
    const band = await app.page.$eval('[data-testid="head-heatmap"] .hm-plot', (plot) => {
      const cell = parseFloat(getComputedStyle(plot).getPropertyValue("--cell"));
      const after = getComputedStyle(plot, "::after");
      return { cell, top: parseFloat(after.top), height: parseFloat(after.height) };
    });
    assert.ok(band.cell > 0, "cells have a size");
    assert.ok(Math.abs(band.top - 4 * band.cell) < 0.05, `band at ${band.top} px, cells of ${band.cell} px`);
    assert.ok(Math.abs(band.height - band.cell) < 0.05, `band ${band.height} px high`);
    await app.close();
  });

  test("a lesson step fits a phone's width", async () => {
    const context = await session.browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    for (const query of ["?view=lesson", "?view=lesson&lesson=masks&step=1", "?view=lesson&lesson=kv-cache&step=4"]) {
      await page.goto(session.baseUrl + query);
      await page.locator('[data-testid="lesson-step"], [data-testid="lesson-index"]').first().waitFor({ timeout: 30_000 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${query}: the page is ${overflow} px wider than the phone`);
      assert.equal(await page.getByTestId("lesson-next").count() > 0 || query === "?view=lesson", true);
    }
    await context.close();
  });
});
