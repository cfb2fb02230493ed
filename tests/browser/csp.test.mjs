// The browser holds the page to its promises: a Content-Security-Policy that lets scripts and
// connections come only from the page itself. Every part of the app works under it with no violation,
// and the policy really refuses what it says it does.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";
import { download } from "./explorer_helpers.mjs";

const ROOT = join(import.meta.dirname, "..", "..");
const FIXTURE = join(ROOT, "tests", "data", "fixtures", "qwen3");
const TOKENIZER = join(ROOT, "www", "models", "attention-lab-tiny", "tokenizer.json");
const file = (name, path) => ({ name, mimeType: "application/octet-stream", buffer: readFileSync(path) });

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

/** Opens `query` in a window that records every policy violation the page reports. */
async function openRecordingViolations(query) {
  const context = await session.browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  await context.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample} at ${location.search}`));
  });
  const app = new AppPage(await context.newPage(), session.baseUrl);
  await app.page.goto(session.baseUrl + query);
  await app.page.waitForSelector("header.top", { timeout: 60_000 });
  return app;
}

const violations = (app) => app.page.evaluate(() => window.__violations);

describe("Content-Security-Policy", () => {
  test("the built page carries the policy: scripts and connections from the page only, no objects, base or forms", async () => {
    const app = await openRecordingViolations("");
    const csp = await app.page.$eval('meta[http-equiv="Content-Security-Policy"]', (m) => m.content);
    const directives = Object.fromEntries(csp.split(";").map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
    assert.deepEqual(directives["default-src"], ["'none'"]);
    assert.equal(directives["script-src"][0], "'self'");
    assert.match(directives["script-src"][1], /^'sha256-[A-Za-z0-9+/]+=*'$/);
    assert.equal(directives["script-src"][2], "'wasm-unsafe-eval'");
    assert.equal(directives["script-src"].length, 3);
    assert.deepEqual(directives["connect-src"], ["'self'"]);
    assert.deepEqual(directives["img-src"], ["'self'", "data:", "blob:"]);
    for (const k of ["object-src", "base-uri", "form-action"]) assert.deepEqual(directives[k], ["'none'"], k);
    // The policy is enforced, not only written: a connection elsewhere and an injected script are refused.
    const refused = await app.page.evaluate(async () => {
      const out = {};
      try { await fetch("http://example.invalid/"); out.fetch = "sent"; } catch { out.fetch = "refused"; }
      const s = document.createElement("script");
      s.textContent = "window.__injected = true";
      document.head.append(s);
      out.inline = window.__injected ? "ran" : "refused";
      return out;
    });
    assert.deepEqual(refused, { fetch: "refused", inline: "refused" });
    await app.page.waitForFunction(() => window.__violations.length >= 2);
    assert.ok((await violations(app)).some((v) => v.startsWith("connect-src")), String(await violations(app)));
    await app.close();
  });

  test("the bundle has no eval-like path, so the policy needs no 'unsafe-eval'", () => {
    const dist = join(ROOT, "dist");
    const scripts = readdirSync(dist, { recursive: true }).filter((f) => f.endsWith(".js"));
    assert.ok(scripts.length >= 1);
    for (const f of scripts) {
      const text = readFileSync(join(dist, f), "utf8");
      assert.doesNotMatch(text, /\beval\s*\(|new\s+Function\s*\(|setTimeout\s*\(\s*["'`]/, f);
    }
  });

  test("every view, a lesson, the trained model, a dropped checkpoint and the exports work with no violation", async () => {
    const app = await openRecordingViolations("?text=" + encodeURIComponent("one two three"));
    await app.heatmap(3);
    await app.waitForEngine();
    // Exports: the maps as .npy and a PNG of the heatmap.
    await download(app.page, '[data-testid="export-npy"]');
    await download(app.page, '[data-testid="export-png"]');
    const tabs = await app.page.getByTestId("view-tab").evaluateAll((els) => els.map((e) => e.dataset.view));
    assert.ok(tabs.length >= 6, String(tabs));
    for (const view of tabs) {
      await app.page.locator(`[data-testid="view-tab"][data-view="${view}"]`).click();
      await app.waitForParam("view", view === "heatmaps" ? null : view);
      await app.page.waitForTimeout(1_000);
    }
    assert.deepEqual(await violations(app), []);
    // A lesson step that shows a live view.
    await app.page.goto(session.baseUrl + "?view=lesson&lesson=kv-cache&step=2");
    await app.page.getByTestId("lesson-step").waitFor({ timeout: 60_000 });
    // Its highlight is applied through a stylesheet the page adopts (the policy refuses <style> elements),
    // and goes with the step.
    const adopted = () => app.page.evaluate(() =>
      [...document.adoptedStyleSheets].flatMap((s) => [...s.cssRules].map((r) => r.cssText)).join("\n"));
    assert.match(await adopted(), /total/);
    await app.page.getByTestId("lesson-next").click();
    await app.page.waitForSelector('[data-testid="lesson-step"][data-step="3"]');
    assert.equal(await adopted(), "");
    assert.deepEqual(await violations(app), []);
    // The trained model: its files are fetched from the page's own origin.
    await app.page.goto(session.baseUrl + "?view=heatmaps&model=attention-lab-tiny&text=" + encodeURIComponent("The borrow checker"));
    await app.page.waitForFunction(() => document.querySelectorAll('[data-testid="next-token"]').length === 5, null, { timeout: 120_000 });
    assert.deepEqual(await violations(app), []);
    // A checkpoint chosen from disk: read locally, nothing fetched.
    await app.page.goto(session.baseUrl + "?view=heatmaps");
    // Files dropped before the GPU is open are refused with "drop them again": wait for it, as a user would.
    await app.waitForEngine();
    await app.page.getByTestId("checkpoint-files").setInputFiles([
      file("config.json", join(FIXTURE, "config.json")),
      file("model.safetensors", join(FIXTURE, "model.safetensors")),
      file("tokenizer.json", TOKENIZER),
    ]);
    // Loaded, or refused: a refusal fails here with its reason rather than after the whole wait.
    await app.page.waitForSelector(
      '[data-testid="checkpoint-status"]:text-matches("^Loaded"), [data-testid="checkpoint-error"]', { timeout: 120_000 });
    assert.equal(await app.page.getByTestId("checkpoint-error").count(), 0,
      await app.page.getByTestId("checkpoint-error").allInnerTexts().then(String));
    await app.page.waitForSelector('[data-testid="explorer"][data-status="ready"]', { timeout: 120_000 });
    assert.equal(await app.page.getByTestId("panic-panel").count(), 0);
    assert.deepEqual(await violations(app), []);
    app.assertNoConsoleErrors();
    await app.close();
  });
});
