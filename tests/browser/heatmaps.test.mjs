// The heatmap view as a user drives it: type, change the mask, share the link, fall back to the CPU.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startSession, REPO_ROOT } from "./harness.mjs";
import { AppPage, assertClose } from "./app_page.mjs";
import { heads } from "./explorer_helpers.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

describe("heatmap view", () => {
  test("typing a sentence draws a GPU heatmap equal to the CPU reference", async () => {
    const app = await AppPage.open(session);
    await app.waitForEngine();
    assert.match(await app.adapterLine(), /^WebGPU: /, "the GPU path must be the one tested here");

    // "Keys and queries meet , again and again ." is 9 word tokens (the comma and full stop count).
    await app.typeText("Keys and queries meet, again and again.");
    const gpu = await app.heatmap(9);
    assert.equal(gpu.cols, 9);
    assert.equal(gpu.head, 0);
    assert.equal(gpu.kvHead, 0);
    // Heads 0-5 are designed teaching heads (sharp, few colours); head 6 is a seeded projection.
    const colours = await app.page.$eval('[data-testid="head-heatmap"][data-head="6"] canvas.hm-canvas', (canvas) => {
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      const seen = new Set();
      for (let i = 0; i < data.length; i += 4) seen.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
      return seen.size;
    });
    assert.ok(colours > 5, "the heatmap canvas is blank");
    // Causal: row i spreads its attention over keys 0..=i only, and each row sums to 1.
    for (let i = 0; i < 9; i++) {
      const row = gpu.probs.slice(i * 9, i * 9 + 9);
      assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-4, `row ${i} does not sum to 1`);
      assert.ok(row.slice(i + 1).every((p) => p === 0), `row ${i} attends to a future token`);
    }
    await app.waitForParam("text", "Keys and queries meet, again and again.");

    // The same link with the CPU reference forced gives the same numbers (DESIGN: 1e-4 on probabilities).
    const cpu = await AppPage.open(session, (await app.query()) + "&backend=cpu");
    const reference = await cpu.heatmap(9);
    assertClose(gpu.probs, reference.probs, 1e-4, "GPU vs CPU reference");
    app.assertNoConsoleErrors();
    await cpu.close();
    await app.close();
  });

  test("heads 512 and 576 wide are computed on the GPU and equal the CPU reference", async () => {
    // Gemma 4's global layers (512) and MLA's absorbed key head (576), as a one-layer config of 8
    // query heads on 2 KV heads: every head's whole map, on the GPU, against the CPU twin.
    const text = encodeURIComponent("Wide heads attend on the GPU too.");
    for (const hd of [512, 576]) {
      const link = `?cfg=L1.d${8 * hd}.h8.kv2.hd${hd}&text=${text}`;
      const app = await AppPage.open(session, link);
      await app.waitForEngine();
      assert.match(await app.adapterLine(), /^WebGPU: /, "the GPU path must be the one tested here");
      // "Wide heads attend on the GPU too ." is 8 word tokens (the full stop counts).
      await app.heatmap(8);
      const status = app.page.getByTestId("heatmap-status");
      await app.page.waitForFunction(() => / computed on the GPU /.test(
        document.querySelector('[data-testid="heatmap-status"]')?.textContent ?? ""), null, { timeout: 120_000 });
      assert.doesNotMatch(await status.innerText(), /CPU reference instead/, `d = ${hd}`);
      const gpu = await heads(app.page);
      assert.equal(gpu.length, 8, `d = ${hd}: every head drawn`);
      const cpu = await AppPage.open(session, link + "&backend=cpu");
      await cpu.heatmap(8);
      await cpu.page.waitForFunction(() => / computed on the CPU /.test(
        document.querySelector('[data-testid="heatmap-status"]')?.textContent ?? ""), null, { timeout: 120_000 });
      const reference = await heads(cpu.page);
      for (const [i, head] of gpu.entries()) {
        assert.equal(head.head, reference[i].head);
        assert.equal(head.rows, 8);
        assertClose(head.probs, reference[i].probs, 1e-4, `d = ${hd}, head ${head.head}: GPU vs CPU reference`);
      }
      app.assertNoConsoleErrors();
      await cpu.close();
      await app.close();
    }
  });

  test("hovering a cell names the query, the key and the probability", async () => {
    const app = await AppPage.open(session, "?text=one%20two%20three");
    const map = await app.heatmap(3);
    const canvas = app.page.locator('[data-testid="head-heatmap"][data-head="0"] canvas.hm-canvas');
    await canvas.scrollIntoViewIfNeeded(); // the maps may start below the fold, as for a reader
    const box = await canvas.boundingBox();
    // Row 2 ("three"), column 1 ("two"): the centre of that cell.
    await app.page.mouse.move(box.x + box.width * (1.5 / 3), box.y + box.height * (2.5 / 3));
    const tip = await app.page.getByTestId("heatmap-tooltip").innerText();
    assert.match(tip, /query “three” \(2\) → key “two” \(1\): p = /);
    assert.ok(tip.includes(map.probs[2 * 3 + 1].toFixed(4)), `tooltip ${tip} vs ${map.probs[7]}`);
    await app.close();
  });

  test("changing the mask rewrites the link, and the link reopens the same heatmap", async () => {
    const app = await AppPage.open(session, "?text=a%20b%20c%20d%20e%20f");
    await app.heatmap(6);
    const historyAtLoad = await app.page.evaluate(() => history.length);
    await app.chooseMask("sliding");
    await app.setWindow(2);
    await app.waitForParam("mask", "sliding");
    await app.waitForParam("window", "2");
    const historyNow = await app.page.evaluate(() => history.length);
    assert.equal(historyNow, historyAtLoad, "state changes must replace the history entry, not push");
    // Window 2: row 5 sees keys 4 and 5 only.
    await app.page.waitForFunction(() => {
      const el = document.querySelector('[data-testid="head-heatmap"]');
      const p = el?.getAttribute("data-probs").split(",").map(Number);
      return p && p.slice(30, 34).every((x) => x === 0) && p[34] > 0 && p[35] > 0;
    });
    const before = await app.heatmap(6);

    await app.page.getByTestId("copy-link").click();
    const link = app.page.url();
    const reopened = await AppPage.open(session, new URL(link).search);
    const after = await reopened.heatmap(6);
    assert.deepEqual(after.probs, before.probs, "the shared link must reproduce the exact probabilities");
    assert.equal(await reopened.page.getByTestId("mask-select").inputValue(), "sliding");
    assert.equal(await reopened.page.getByTestId("window-input").inputValue(), "2");
    assert.equal(await reopened.page.getByTestId("text-input").inputValue(), "a b c d e f");
    await reopened.close();
    await app.close();
  });

  test("without WebGPU the page says so and computes on the CPU", async () => {
    const app = await AppPage.open(session, "?backend=cpu&text=the%20cat%20sat");
    await app.waitForEngine();
    const banner = app.page.getByTestId("cpu-fallback-banner");
    assert.match(await banner.innerText(), /No WebGPU here/);
    assert.match(await app.adapterLine(), /^CPU reference/);
    const map = await app.heatmap(3);
    assert.ok(map.probs[0] === 1, "the first token can only attend to itself");
    await app.close();
  });

  test("a page without navigator.gpu falls back to the CPU with the banner", async () => {
    const context = await session.browser.newContext();
    await context.addInitScript(() => { Object.defineProperty(Navigator.prototype, "gpu", { get: () => undefined }); });
    const page = await context.newPage();
    const app = new AppPage(page, session.baseUrl);
    await page.goto(session.baseUrl + "?text=no%20gpu%20here");
    await page.getByTestId("cpu-fallback-banner").waitFor({ timeout: 60_000 });
    const map = await app.heatmap(3);
    assert.equal(map.rows, 3);
    await context.close();
  });

  test("invalid link parameters fall back with a visible notice and the page still works", async () => {
    const app = await AppPage.open(session, "?view=nope&mask=diagonal&window=-4&seed=x&zzz=1&text=still%20works");
    const notices = await app.page.getByTestId("url-notices").innerText();
    for (const word of ["view", "mask", "window", "seed", "zzz"]) assert.ok(notices.includes(word), `no notice for ${word}`);
    const map = await app.heatmap(2);
    assert.equal(map.rows, 2);
    await app.close();
  });

  test("text from the link is shown as text, never run as HTML", async () => {
    const evil = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>';
    const app = await AppPage.open(session, "?text=" + encodeURIComponent(evil));
    await app.heatmap();
    assert.equal(await app.page.evaluate(() => window.__pwned), undefined);
    assert.equal(await app.page.locator("main img, main script").count(), 0);
    assert.equal(await app.page.getByTestId("text-input").inputValue(), evil);
    await app.close();
  });

  test("typing rewrites the link a few times a second, and the last text always lands", async () => {
    const context = await session.browser.newContext();
    await context.addInitScript(() => {
      window.__replaceCalls = 0;
      const replace = history.replaceState.bind(history);
      history.replaceState = (...args) => { window.__replaceCalls += 1; return replace(...args); };
    });
    const page = await context.newPage();
    const app = new AppPage(page, session.baseUrl);
    await page.goto(session.baseUrl + "?text=x");
    await app.heatmap();
    const before = await page.evaluate(() => window.__replaceCalls);
    const typed = "the quick brown fox jumps over the lazy dog again";
    const started = Date.now();
    await app.typeText(typed);
    const seconds = (Date.now() - started) / 1000;
    await app.waitForParam("text", typed);
    const writes = await page.evaluate(() => window.__replaceCalls) - before;
    // At most four a second (one every 250 ms), plus the first and the last.
    assert.ok(writes <= Math.ceil(seconds * 4) + 2, `${writes} link writes for ${typed.length} keys in ${seconds} s`);
    assert.ok(writes < typed.length / 2, `${writes} link writes for ${typed.length} keys`);
    await context.close();
  });

  test("a panic shows a readable error panel instead of a dead page", async () => {
    const context = await session.browser.newContext();
    // The switch is on for the link below only: the way out (`?view=kv`, default settings) loads a
    // working page.
    await context.addInitScript(() => {
      if (location.search.includes("ctx=4096")) window.attentionLabTestSwitches = { panic: true };
    });
    const page = await context.newPage();
    await page.goto(session.baseUrl + "?view=kv&ctx=4096");
    const panel = page.getByTestId("panic-panel");
    await panel.waitFor({ timeout: 60_000 });
    assert.match(await panel.innerText(), /Something went wrong[\s\S]*deliberate panic/);
    // The way out is the same view with default settings, not the link that crashed.
    await page.getByTestId("panic-restart").click();
    await page.getByTestId("view-tab").first().waitFor({ timeout: 60_000 });
    assert.equal(new URL(page.url()).search, "?view=kv");
    assert.equal(await page.getByTestId("panic-panel").count(), 0);
    await context.close();
  });

  test("writes the README screenshot", async () => {
    const app = await AppPage.open(session, "?text=" + encodeURIComponent("The cat sat on the mat because the cat was tired."));
    await app.waitForEngine();
    await app.heatmap(12);
    mkdirSync(join(REPO_ROOT, "www"), { recursive: true });
    await app.page.screenshot({ path: join(REPO_ROOT, "www", "screenshot.png") });
    await app.close();
  });
});
