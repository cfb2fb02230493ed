// Lesson 11's online softmax from the kernel's own trace, as a person plays it: open the step, step
// through the last query row's key steps, and check each recorded m, l and rescale against the
// recurrence by hand (m only rises, alpha = exp(m_old − m_new), l = l_old · alpha + the step's sum,
// which is at least l_old · alpha), the end against the one-pass softmax (m + ln l is the row's
// log-sum-exp, acc / l its output), and row 0 by hand (it sees one key: l = 1, and every later step
// of its workgroup leaves m and l alone with alpha = 1). On SwiftShader the GPU's traced kernel runs;
// with backend=cpu the CPU twin's trace plays, labelled as such. The played row and step are in the link
// (trow, tstep): a copied link reopens the trace where it was.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

const STEP = "?view=lesson&lesson=flash-tiles&step=3";

/** The played steps as the table lists them. */
async function steps(app) {
  return app.page.getByTestId("flash-trace-step").evaluateAll((rows) => rows.map((r) => ({
    step: Number(r.dataset.step), key0: Number(r.dataset.key0), m: Number(r.dataset.m),
    l: Number(r.dataset.l), alpha: Number(r.dataset.alpha),
  })));
}

/** Presses "next step" until the last step, checking each new step by hand; returns them all. */
async function playToTheEnd(app) {
  const player = app.page.getByTestId("flash-trace-player");
  const count = Number(await player.getAttribute("data-steps"));
  assert.ok(count >= 1 && count <= 64, `steps ${count}`);
  for (let n = 1; n < count; n++) {
    await app.page.getByTestId("flash-trace-next").click();
    await app.page.waitForSelector(`[data-testid="flash-trace-step"][data-step="${n}"]`);
    const s = await steps(app);
    assert.equal(s.length, n + 1);
    const [before, now] = [s[n - 1], s[n]];
    assert.ok(now.m >= before.m, `step ${n}: m fell`);
    if (before.m === -Infinity && now.m > -Infinity) assert.equal(now.alpha, 0);
    else if (now.m > -Infinity) assert.ok(Math.abs(now.alpha - Math.exp(before.m - now.m)) < 1e-6, `step ${n}: alpha`);
    assert.ok(now.l >= before.l * now.alpha * (1 - 1e-6), `step ${n}: l lost terms`);
    assert.ok(now.key0 > before.key0, "the keys move right");
  }
  return steps(app);
}

async function checkTheLastRow(app, form) {
  const player = await app.page.waitForSelector('[data-testid="flash-trace-player"]', { timeout: 60_000 });
  assert.equal(await player.getAttribute("data-form"), form);
  // The lesson's text is 256 tokens; the trace takes its first 64, and plays the last row first.
  assert.equal(await player.getAttribute("data-row"), "63");
  const all = await playToTheEnd(app);
  const last = all[all.length - 1];
  const result = app.page.getByTestId("flash-trace-result");
  assert.ok(Number(await result.getAttribute("data-max-diff")) < 1e-5);
  const lse = Number(await result.getAttribute("data-one-pass-lse"));
  assert.ok(Math.abs(last.m + Math.log(last.l) - lse) < 1e-5 * Math.max(1, Math.abs(lse)), `${last.m} + ln ${last.l} vs ${lse}`);
  // Back one step: the table shrinks and the result waits for the end again.
  await app.page.getByTestId("flash-trace-prev").click();
  assert.equal((await steps(app)).length, all.length - 1 || 1);
}

async function checkRowZero(app) {
  await app.page.getByTestId("flash-trace-row").selectOption("0");
  await app.page.waitForSelector('[data-testid="flash-trace-player"][data-row="0"]');
  await app.page.getByTestId("flash-trace-end").click();
  const s = await steps(app);
  const count = Number(await app.page.getByTestId("flash-trace-player").getAttribute("data-steps"));
  assert.equal(s.length, count);
  // Row 0 sees key 0 alone: after the first step l = exp(s0 − s0) = 1, and nothing later moves it.
  assert.equal(s[0].key0, 0);
  assert.ok(Math.abs(s[0].l - 1) < 1e-6 && s[0].alpha === 0);
  for (const later of s.slice(1)) {
    assert.ok(later.alpha === 1 && later.m === s[0].m && later.l === s[0].l, JSON.stringify(later));
  }
  assert.ok(Number(await app.page.getByTestId("flash-trace-result").getAttribute("data-max-diff")) < 1e-5);
}

describe("the FlashAttention trace", () => {
  test("on WebGPU the kernel's traced build is played back and ends on the one-pass softmax", async () => {
    const app = await AppPage.open(session, STEP);
    await app.waitForEngine();
    // The page keeps the kernel's loops in the browser (the benchmark view unrolls them).
    await checkTheLastRow(app, "loop");
    assert.match(await app.page.getByTestId("flash-trace-player").innerText(), /Recorded by the tiled kernel itself \(its loop form, traced\)/);
    await checkRowZero(app);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the played row and step are in the link, and a step does not trace the kernel again", async () => {
    const app = await AppPage.open(session, STEP);
    await app.waitForEngine();
    const player = await app.page.waitForSelector('[data-testid="flash-trace-player"]', { timeout: 60_000 });
    await app.page.getByTestId("flash-trace-row").selectOption("9");
    await app.waitForParam("trow", "9");
    // Marked: if a step rebuilt the panel (and traced again), the new player would not carry the mark.
    await player.evaluate((el) => { el.dataset.mark = "kept"; });
    for (const n of [1, 2]) {
      await app.page.getByTestId("flash-trace-next").click();
      await app.page.waitForSelector(`[data-testid="flash-trace-step"][data-step="${n}"]`);
    }
    await app.waitForParam("tstep", "2");
    assert.equal(await app.page.locator('[data-testid="flash-trace-player"][data-mark="kept"][data-row="9"]').count(), 1);
    const played = await steps(app);
    assert.deepEqual(played.map((s) => s.step), [0, 1, 2]);
    // The copied link reopens the trace at row 9, step 2, with the same recorded m and l.
    const link = await app.query();
    assert.match(link, /[?&]trow=9&tstep=2(&|$)/);
    const again = await AppPage.open(session, link);
    await again.waitForEngine();
    await again.page.waitForSelector('[data-testid="flash-trace-player"][data-row="9"]', { timeout: 60_000 });
    await again.page.waitForSelector('[data-testid="flash-trace-step"][data-step="2"]');
    const reopened = await again.page.getByTestId("flash-trace-step").evaluateAll((rows) =>
      rows.map((r) => ({ step: r.dataset.step, m: r.dataset.m, l: r.dataset.l })));
    const before = await app.page.getByTestId("flash-trace-step").evaluateAll((rows) =>
      rows.map((r) => ({ step: r.dataset.step, m: r.dataset.m, l: r.dataset.l })));
    assert.deepEqual(reopened, before);
    assert.equal(await again.page.getByTestId("flash-trace-row").inputValue(), "9");
    // Past the trace: a hostile link is refused with a notice, cut, and the player opens on the last row.
    const hostile = await AppPage.open(session, STEP + "&trow=64&tstep=" + "9".repeat(5000));
    await hostile.waitForEngine();
    await hostile.page.waitForSelector('[data-testid="flash-trace-player"][data-row="63"]', { timeout: 60_000 });
    const notices = await hostile.page.getByTestId("url-notices").innerText();
    assert.match(notices, /Ignored trow: 64 is outside 0\.\.=63/);
    assert.ok(notices.length < 400, `notices of ${notices.length} characters`);
    for (const page of [again, hostile, app]) {
      page.assertNoConsoleErrors();
      await page.close();
    }
  });

  test("without WebGPU the CPU twin's trace plays, and says so", async () => {
    const app = await AppPage.open(session, STEP + "&backend=cpu");
    await checkTheLastRow(app, "twin");
    assert.match(await app.page.getByTestId("flash-trace-player").innerText(), /CPU twin's trace/);
    await checkRowZero(app);
    app.assertNoConsoleErrors();
    await app.close();
  });
});
