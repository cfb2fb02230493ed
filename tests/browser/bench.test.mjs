// The benchmark page: a link that names a case runs it on WebGPU and reports rows a script can read.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

describe("bench view", () => {
  test("a link naming n, d and mask runs just those cases, tiled against naive and the row softmax", async () => {
    const app = await AppPage.open(session, "?view=bench&n=256&d=64&mask=causal");
    // n = 256, d = 64, causal: two head layouts (8/8 and 32/8) x three kernels = six rows.
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="bench-row"]').length === 6, null, { timeout: 120_000 });
    const rows = await app.page.$$eval('[data-testid="bench-row"]', (els) => els.map((el) => ({
      kernel: el.dataset.kernel, n: Number(el.dataset.n), d: Number(el.dataset.d), mask: el.dataset.mask,
      ms: Number(el.dataset.ms), gflops: Number(el.dataset.gflops),
    })));
    assert.deepEqual(rows.map((r) => r.kernel).sort(), ["naive", "naive", "rows", "rows", "tiled", "tiled"]);
    for (const row of rows) {
      assert.equal(row.n, 256);
      assert.equal(row.d, 64);
      assert.equal(row.mask, "causal");
      assert.ok(row.ms > 0 && Number.isFinite(row.ms), `bad time ${row.ms}`);
      assert.ok(row.gflops > 0 && Number.isFinite(row.gflops), `bad GFLOP/s ${row.gflops}`);
    }
    const fma = Number(await app.page.getByTestId("bench-fma").getAttribute("data-value"));
    assert.ok(fma > 0, "the FMA peak must be measured");
    assert.match(await app.page.getByTestId("bench-progress").innerText(), /Done: 6 cases/);
    // The link keeps naming the case.
    const params = new URL(app.page.url()).searchParams;
    assert.equal(params.get("n"), "256");
    assert.equal(params.get("mask"), "causal");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("kernel=backward times the backward kernels alone, and the kernel select lifts it", async () => {
    const app = await AppPage.open(session, "?view=bench&n=256&d=64&mask=causal&kernel=backward");
    // Two head layouts (8/8 and 32/8): two backward rows, nothing else.
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="bench-row"]').length === 2, null, { timeout: 120_000 });
    await app.page.waitForFunction(() => /Done: 2 cases/.test(document.querySelector('[data-testid="bench-progress"]').textContent));
    const rows = await app.page.$$eval('[data-testid="bench-row"]', (els) => els.map((el) => ({
      kernel: el.dataset.kernel, ms: Number(el.dataset.ms), gflops: Number(el.dataset.gflops),
    })));
    for (const row of rows) {
      assert.equal(row.kernel, "backward");
      assert.ok(row.ms > 0 && row.gflops > 0 && Number.isFinite(row.gflops), JSON.stringify(row));
    }
    assert.equal(await app.page.getByTestId("bench-kernel").inputValue(), "backward");
    assert.match(await app.page.locator(".bench .explain").first().innerText(), /backward flops = 2\.5 x 4 d x attended pairs/);
    // "all" takes the key out of the link: the forward kernels again.
    await app.page.getByTestId("bench-kernel").selectOption("all");
    await app.page.waitForFunction(() => !new URL(location.href).searchParams.has("kernel"));
    assert.match(await app.page.getByTestId("bench-run").innerText(), /Run 6 cases/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the trained model's rows: each matmul shape, the forward pass over 256 tokens, decode contiguous and paged", async () => {
    const app = await AppPage.open(session, "?view=bench");
    await app.page.getByTestId("bench-lm-run").click();
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="bench-lm-row"]').length === 8, null, { timeout: 240_000 });
    const rows = await app.page.$$eval('[data-testid="bench-lm-row"]', (els) => els.map((el) => ({
      op: el.dataset.op, shape: el.dataset.shape, launches: Number(el.dataset.launches), ms: Number(el.dataset.ms),
      gflops: Number(el.dataset.gflops),
    })));
    const peak = Number(await app.page.getByTestId("bench-fma").getAttribute("data-value"));
    console.log(`FMA peak ${peak.toFixed(2)} GFLOP/s`);
    console.log(rows.map((r) => `${r.op} | ${r.shape} | x${r.launches} | ${r.ms.toFixed(2)} ms | ${r.gflops.toFixed(2)} GFLOP/s | ${(100 * r.gflops / peak).toFixed(1)} %`).join("\n"));
    // The launches the forward pass makes: Q/K/V fused, O, gate/up fused, down, the output head.
    assert.deepEqual(rows.slice(0, 5).map((r) => r.shape), ["256 x 192 -> 384", "256 x 256 -> 192",
      "256 x 192 -> 1024", "256 x 512 -> 192", "256 x 192 -> 4096"]);
    // Shapes under 32 MFLOP share a submission (O: 25.2 MFLOP); the times are per launch.
    assert.deepEqual(rows.map((r) => r.launches), [1, 2, 1, 1, 1, 1, 1, 1]);
    assert.equal(rows[5].op, "lm forward");
    assert.match(rows[5].shape, /^256 tokens, 4 layers/);
    // One decode step after 127 tokens (the model reads 128), the f32 cache contiguous, then in pages.
    assert.deepEqual(rows.slice(6).map((r) => [r.op, r.shape]), [["lm decode contiguous", "1 token after 127 cached, 4 layers"],
      ["lm decode paged", "1 token after 127 cached, 4 layers"]]);
    console.log(`decode paged / contiguous: ${(rows[7].ms / rows[6].ms).toFixed(2)}x`);
    for (const r of rows) assert.ok(r.ms > 0 && Number.isFinite(r.gflops) && r.gflops > 0, JSON.stringify(r));
    assert.match(await app.page.getByTestId("bench-lm-progress").innerText(), /^Done: 8 rows\.$/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the paged decode's rows: contiguous against a page table over a scattered pool, and their ratio", async () => {
    const app = await AppPage.open(session, "?view=bench");
    await app.page.getByTestId("bench-paged-run").click();
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="bench-paged-row"]').length === 3, null, { timeout: 240_000 });
    const rows = await app.page.$$eval('[data-testid="bench-paged-row"]', (els) => els.map((el) => ({
      op: el.dataset.op, shape: el.dataset.shape, ms: Number(el.dataset.ms), gflops: Number(el.dataset.gflops),
    })));
    console.log(rows.map((r) => `${r.op} | ${r.shape} | ${r.ms.toFixed(2)} ms | ${r.gflops.toFixed(2)} GFLOP/s`).join("\n"));
    assert.deepEqual(rows.map((r) => r.op), ["decode contiguous (app's)", "decode contiguous (tiled)", "decode paged (scattered)"]);
    for (const r of rows) {
      assert.equal(r.shape, "1 query x 4096 cached, 32/8 heads, d 128");
      assert.ok(r.ms > 0 && Number.isFinite(r.gflops) && r.gflops > 0, JSON.stringify(r));
    }
    // The sentence states the median ratio the rows give, to two decimals.
    const said = await app.page.getByTestId("bench-paged-progress").innerText();
    const ratio = Number(said.match(/took ([\d.]+)x the time of the app's contiguous decode/)[1]);
    assert.ok(ratio > 0 && Number.isFinite(ratio), said);
    assert.ok(Math.abs(ratio - rows[2].ms / rows[0].ms) <= 0.006, `${said} vs ${rows[2].ms} / ${rows[0].ms}`);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("without WebGPU the benchmark says it cannot run", async () => {
    const app = await AppPage.open(session, "?view=bench&backend=cpu&n=256");
    const message = await app.page.getByTestId("bench-unavailable").innerText();
    assert.match(message, /no WebGPU here/);
    assert.equal(await app.page.getByTestId("bench-run").isDisabled(), true);
    await app.close();
  });
});
