// The distance view as a person drives it: open the designed heads of a layer, check each head's
// masses by distance against hand computations (the diffuse head's are exact fractions of n), change
// the mask and what counts as near, reopen the link, run it on the CPU tier, and open hostile links.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

const TEXT = "one two three four five six seven eight nine ten";

/** Every head's figures once the view shows them, by head number. */
async function heads(app) {
  await app.page.getByTestId("distance-tier").waitFor({ timeout: 90_000 });
  const rows = await app.page.getByTestId("distance-head").evaluateAll((els) => els.map((e) => ({ ...e.dataset })));
  const out = {};
  for (const r of rows) {
    out[r.head] = {
      designed: r.designed, peak: Number(r.peak), mean: Number(r.mean), near: Number(r.near),
      ahead: Number(r.ahead), further: Number(r.further), total: Number(r.total), bars: r.bars.split(",").map(Number),
    };
  }
  return out;
}

async function tokens(app) {
  return Number(await app.page.getByTestId("distance-tier").getAttribute("data-n"));
}

const near = (got, want, tol, what) => assert.ok(Math.abs(got - want) <= tol, `${what}: ${got}, want ${want}`);

describe("distance view", () => {
  test("the designed heads look as far as they were built to, on the GPU", async () => {
    const app = await AppPage.open(session, `?view=distance&model=gpt2-small&text=${encodeURIComponent(TEXT)}&mask=causal`);
    const h = await heads(app);
    const n = await tokens(app);
    assert.equal(n, 10);
    assert.equal(await app.page.getByTestId("distance-tier").getAttribute("data-on-gpu"), "true");
    console.log(`# ${await app.adapterLine()}: previous-token head ${h[0].bars[1]} one back`);
    for (const head of Object.values(h)) {
      near(head.total, 1, 1e-4, "a head's masses sum to 1");
      assert.equal(head.ahead, 0, "a causal head gives nothing to keys after the query");
    }
    // Previous token: every query but the first puts (nearly) everything one back: (n − 1)/n.
    assert.equal(h[0].designed, "previous-token");
    assert.equal(h[0].peak, 1);
    near(h[0].bars[1], (n - 1) / n, 1e-3, "previous-token head at 1");
    // Sink: query i reads token 0, i back: mean distance (n − 1)/2.
    near(h[1].mean, (n - 1) / 2, 1e-2, "sink's mean distance");
    // ... and every distance holds 1/n of it, which its sentence says rather than naming a peak.
    const sink = app.page.locator('[data-testid="distance-head"][data-head="1"] figcaption');
    assert.match(await sink.innerText(), /10 % at each of 10 distances alike/);
    // Diffuse (exactly uniform): query i spreads 1/(i + 1) over i + 1 keys, so the mean distance
    // is (1/n) Σ i/2 = (n − 1)/4 and the mass at δ = 0 is (1/n) Σ 1/(i + 1).
    const harmonic = Array.from({ length: n }, (_, i) => 1 / (i + 1)).reduce((a, b) => a + b, 0);
    near(h[5].mean, (n - 1) / 4, 1e-4, "diffuse mean");
    near(h[5].bars[0], harmonic / n, 1e-5, "diffuse at 0");
    assert.match(await app.page.getByTestId("synthetic-note").innerText(), /Synthetic weights/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a full mask, a window and what counts as near change the figures, and the link reopens them", async () => {
    const app = await AppPage.open(session, `?view=distance&model=gpt2-small&text=${encodeURIComponent(TEXT)}&mask=full`);
    let h = await heads(app);
    const n = 10;
    // Diffuse under a full mask: every query spreads 1/n over all n keys, so the mass after the
    // query is (n − 1)/(2n) and the mean distance (n² − 1)/(3n).
    near(h[5].ahead, (n - 1) / (2 * n), 1e-5, "diffuse ahead");
    near(h[5].mean, (n * n - 1) / (3 * n), 1e-4, "diffuse mean, full");
    await app.page.getByTestId("mask-select").selectOption("sliding");
    await app.page.getByTestId("window-input").fill("3");
    await app.page.getByTestId("window-input").press("Enter");
    await app.waitForParam("window", "3");
    await app.page.locator('[data-testid="distance-head"][data-ahead="0.000000"]').first().waitFor();
    h = await heads(app);
    for (const [k, head] of Object.entries(h)) {
      // A window of 3 reaches 2 tokens back at most: all within 2 (the default near is 4), nothing further.
      near(head.near, 1, 1e-4, `head ${k} within 4`);
      assert.ok(head.bars.slice(3).every((x) => x === 0) && head.further === 0, `head ${k}: ${head.bars}`);
    }
    // Near means at most 1 token away: the diffuse head's share is all but its mass 2 back.
    await app.page.getByTestId("distance-near").fill("1");
    await app.page.getByTestId("distance-near").press("Enter");
    await app.waitForParam("near", "1");
    await app.page.waitForFunction(() => document.querySelector('[data-testid="distance-head"][data-head="5"]')?.dataset.near !== "1.000000");
    h = await heads(app);
    assert.ok(h[5].bars[2] > 0.1, `diffuse head 2 back: ${h[5].bars[2]}`);
    near(h[5].near, 1 - h[5].bars[2], 1e-5, "diffuse within 1");
    const again = await AppPage.open(session, await app.query());
    assert.deepEqual(await heads(again), h);
    assert.equal(await again.page.getByTestId("distance-near").inputValue(), "1");
    assert.equal(await again.page.getByTestId("window-input").inputValue(), "3");
    again.assertNoConsoleErrors();
    await again.close();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the CPU tier gives the same figures with the twin, and says so", async () => {
    const query = `?view=distance&model=gpt2-small&text=${encodeURIComponent(TEXT)}`;
    const gpu = await AppPage.open(session, query);
    const want = await heads(gpu);
    await gpu.close();
    const cpu = await AppPage.open(session, `${query}&backend=cpu`);
    const got = await heads(cpu);
    assert.equal(await cpu.page.getByTestId("distance-tier").getAttribute("data-on-gpu"), "false");
    assert.match(await cpu.page.getByTestId("distance-tier").innerText(), /CPU twin/);
    for (const k of Object.keys(want)) {
      near(got[k].mean, want[k].mean, 1e-4, `head ${k} mean`);
      got[k].bars.forEach((x, i) => near(x, want[k].bars[i], 1e-5, `head ${k} bar ${i}`));
    }
    cpu.assertNoConsoleErrors();
    await cpu.close();
  });

  test("hostile and oversized links are refused with notices and clear messages", async () => {
    const app = await AppPage.open(session, "?view=distance&near=-1&teach=%3Cb%3E&text=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E");
    assert.equal((await app.page.getByTestId("url-notices").innerText()).split("\n").filter(Boolean).length >= 2, true);
    await app.page.getByTestId("distance-tier").waitFor({ timeout: 90_000 });
    assert.equal(await app.page.locator(".distance-view img").count(), 0);
    await app.close();
    const long = await AppPage.open(session, "?view=distance&n=100000");
    const error = long.page.getByTestId("distance-error");
    await error.waitFor({ timeout: 60_000 });
    assert.match(await error.innerText(), /at most 2048 tokens/);
    // The rest of the app keeps working: the tabs still switch.
    await long.page.locator('[data-testid="view-tab"][data-view="kv"]').click();
    await long.waitForParam("view", "kv");
    long.assertNoConsoleErrors();
    await long.close();
  });
});
