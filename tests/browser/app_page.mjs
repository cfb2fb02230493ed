// A page object for Attention Lab: what a user sees and does, in the test's words.
import assert from "node:assert/strict";

/** Sets the app's test switches in every page of `context` before its scripts run. */
export async function setTestSwitches(context, switches) {
  await context.addInitScript((on) => { window.attentionLabTestSwitches = on; }, switches);
}

export class AppPage {
  constructor(page, baseUrl) {
    this.page = page;
    this.baseUrl = baseUrl;
    this.consoleErrors = [];
    page.on("console", (msg) => { if (msg.type() === "error") this.consoleErrors.push(msg.text()); });
    page.on("pageerror", (err) => this.consoleErrors.push(String(err)));
  }

  /**
   * Opens a fresh page (its own browser context, like a new window) at `query`. `switches` turns on the
   * app's test switches (`{ hooks: true }`), set before the page loads: a link cannot carry them.
   */
  static async open(session, query = "", { switches } = {}) {
    const context = await session.browser.newContext({ viewport: { width: 1280, height: 900 } });
    if (switches) await setTestSwitches(context, switches);
    const page = await context.newPage();
    const app = new AppPage(page, session.baseUrl);
    await page.goto(session.baseUrl + query);
    await page.waitForSelector("header.top", { timeout: 60_000 });
    return app;
  }

  /** As `open`, in a window whose long-task observer records every task over 50 ms from the start. */
  static async openWatchingLongTasks(session, query = "") {
    const context = await session.browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript(() => {
      window.__longTasks = [];
      const keep = (entries) => {
        for (const e of entries) window.__longTasks.push({ start: e.startTime, duration: e.duration });
      };
      window.__longTaskObserver = new PerformanceObserver((list) => keep(list.getEntries()));
      window.__longTaskObserver.observe({ type: "longtask", buffered: true });
      // The observer reports in a later task: whoever reads the list takes what is still queued first.
      window.__longTasksNow = () => { keep(window.__longTaskObserver.takeRecords()); return window.__longTasks; };
    });
    const app = new AppPage(await context.newPage(), session.baseUrl);
    await app.page.goto(session.baseUrl + query);
    return app;
  }

  /** Forgets the long tasks seen so far (page loading, say). */
  async forgetLongTasks() {
    await this.page.evaluate(() => { window.__longTasksNow(); window.__longTasks = []; });
  }

  /**
   * The longest task recorded since the last `forgetLongTasks`, in ms (0: none over 50 ms); with `since`
   * (the page's `performance.now()`), only the tasks that started after it.
   */
  async longestTask(since = -Infinity) {
    return this.page.evaluate((from) => Math.max(0, ...window.__longTasksNow().filter((t) => t.start >= from)
      .map((t) => t.duration)), since);
  }

  async close() { await this.page.context().close(); }

  /** Waits for the heatmap to reflect the latest state and returns what it shows. */
  async heatmap(expectedRows) {
    const selector = expectedRows === undefined
      ? '[data-testid="head-heatmap"]'
      : `[data-testid="head-heatmap"][data-rows="${expectedRows}"]`;
    const el = await this.page.waitForSelector(selector, { timeout: 60_000 });
    return {
      head: Number(await el.getAttribute("data-head")),
      kvHead: Number(await el.getAttribute("data-kv-head")),
      rows: Number(await el.getAttribute("data-rows")),
      cols: Number(await el.getAttribute("data-cols")),
      probs: (await el.getAttribute("data-probs")).split(",").map(Number),
    };
  }

  /** Distinct colours drawn on the heatmap canvas (1 means a blank map). */
  async canvasColourCount() {
    return this.page.$eval('[data-testid="head-heatmap"] canvas', (canvas) => {
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      const colours = new Set();
      for (let i = 0; i < data.length; i += 4) colours.add(`${data[i]},${data[i + 1]},${data[i + 2]},${data[i + 3]}`);
      return colours.size;
    });
  }

  async typeText(text) {
    const input = this.page.getByTestId("text-input");
    await input.fill("");
    await input.pressSequentially(text, { delay: 5 });
  }

  async chooseMask(kind) { await this.page.getByTestId("mask-select").selectOption(kind); }
  async setWindow(n) { await this.page.getByTestId("window-input").fill(String(n)); }
  async adapterLine() { return this.page.getByTestId("adapter-info").innerText(); }
  async query() { return new URL(this.page.url()).search; }

  /** Waits until the address bar carries `param=value`. */
  async waitForParam(param, value) {
    await this.page.waitForFunction(
      ([p, v]) => new URL(location.href).searchParams.get(p) === v, [param, value], { timeout: 10_000 });
  }

  /** Waits until the page says which adapter computes (after the GPU has been opened or refused). */
  async waitForEngine() {
    await this.page.waitForFunction(
      // The footer is absent until the app has mounted: absent is not "started".
      () => {
        const info = document.querySelector('[data-testid="adapter-info"]');
        return info !== null && !info.textContent.includes("Starting");
      }, null, { timeout: 60_000 });
  }

  assertNoConsoleErrors() {
    assert.deepEqual(this.consoleErrors, [], "the browser console shows errors");
  }
}

/** Asserts two probability arrays agree within `tolerance` absolute. */
export function assertClose(actual, expected, tolerance, what) {
  assert.equal(actual.length, expected.length, `${what}: lengths differ`);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) worst = Math.max(worst, Math.abs(actual[i] - expected[i]));
  assert.ok(worst <= tolerance, `${what}: largest difference ${worst} exceeds ${tolerance}`);
}
