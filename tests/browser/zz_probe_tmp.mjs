import { startSession } from "./harness.mjs";
const session = await startSession();
for (const q of process.argv.slice(2)) {
  const context = await session.browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e).slice(0, 200)));
  const t0 = Date.now();
  await page.goto(session.baseUrl + q);
  await page.waitForTimeout(8000);
  let alive;
  try { alive = await Promise.race([page.evaluate(() => 1), new Promise((r) => setTimeout(() => r("TIMEOUT"), 5000))]); } catch (e) { alive = String(e).slice(0, 100); }
  const panic = await page.locator('[data-testid="panic-panel"]').count().catch(() => "?");
  const notices = await page.locator('[data-testid="url-notices"]').innerText().catch(() => "");
  const status = await page.locator('[data-testid="explorer-status"], [data-testid="heatmap-status"]').first().innerText({ timeout: 1000 }).catch(() => "");
  console.log(JSON.stringify({ q: q.slice(0, 80), alive, panic, errors, notices: notices.slice(0, 300), status: status.slice(0, 200), ms: Date.now() - t0 }));
  await context.close().catch(() => {});
}
await session.close();
