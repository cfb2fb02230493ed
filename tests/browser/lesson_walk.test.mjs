// Walks every step of every lesson three ways (the next button, the arrow keys, a deep link) and
// compares what the page shows with the walk plan that `cargo run --bin lesson_plan` computes natively
// from the lesson files: each step's view link, its highlight, and the exact value of every live
// figure on the page (revealed answers included). The plan's own figures are checked against hand
// computations by the native tests; this checks that the page shows exactly those.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startSession } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
let session;
let plan;
before(async () => {
  const json = execFileSync("cargo", ["run", "--quiet", "--locked", "--bin", "lesson_plan"], {
    cwd: repoRoot, encoding: "utf8", maxBuffer: 64 << 20, stdio: ["ignore", "pipe", "inherit"],
  });
  plan = JSON.parse(json);
  // LESSON_WALK_ONLY=id,id walks only those lessons (while writing one); the full walk checks the index.
  if (process.env.LESSON_WALK_ONLY) plan = plan.filter((l) => process.env.LESSON_WALK_ONLY.split(",").includes(l.id));
  session = await startSession();
});
after(async () => { await session?.close(); });

/** What shows that a step's view has computed (waited for once per step in the next-button walk). */
const VIEW_READY = {
  heatmaps: '[data-testid="head-heatmap"][data-rows]',
  kv: '[data-testid="kv-breakdown-row"]',
  compare: '[data-testid="variant-row"][data-variant]',
  bench: '[data-testid="bench-row"]',
  memory: '[data-testid="memory-row"]',
  backward: '[data-testid="softmax-jacobian"]',
  mla: '[data-testid="mla-max-diff"]',
  distance: '[data-testid="distance-tier"]',
};

async function waitForStep(app, lesson, step) {
  await app.page.waitForFunction(([l, s]) => {
    const el = document.querySelector('[data-testid="lesson-step"]');
    return el?.getAttribute("data-lesson") === l && el?.getAttribute("data-step") === String(s);
  }, [lesson, step], { timeout: 30_000 });
}

/** Presses a key with the reader's attention on the lesson text (a step that opens the enlarged head
 * focuses its panel, whose arrows step through heads). */
async function pressOnLesson(app, key) {
  await app.page.getByTestId("lesson-step").locator("h2").click();
  await app.page.keyboard.press(key);
}

/** The step as the page shows it matches the plan: view link, highlight, every live figure. */
async function assertStep(app, lesson, planned) {
  const at = `${lesson} step ${planned.step}`;
  await waitForStep(app, lesson, planned.step);
  const href = await app.page.getByTestId("lesson-open-view").getAttribute("href");
  assert.equal(href, "?" + planned.full_query, `${at}: the view is not configured as the lesson says`);
  const style = await app.page.getByTestId("lesson-highlight").evaluate((el) => el.textContent);
  assert.equal(style, planned.highlight_style, `${at}: highlight`);
  await assertFigures(app, planned, at);
}

async function assertFigures(app, planned, at) {
  const shown = await app.page.getByTestId("live-figure").evaluateAll((els) =>
    els.map((e) => [e.getAttribute("data-figure"), e.getAttribute("data-value")]));
  for (const [name, value] of shown) {
    assert.ok(name in planned.figures, `${at}: {${name}} is shown but the plan has no value for it`);
    assert.equal(value, planned.figures[name], `${at}: {${name}}`);
  }
  return shown.length;
}

describe("Lesson walk", () => {
  test("the index lists every lesson of the plan, in order", { skip: !!process.env.LESSON_WALK_ONLY }, async () => {
    const app = await AppPage.open(session, "?view=lesson");
    await app.page.getByTestId("lesson-link").first().waitFor();
    const ids = await app.page.getByTestId("lesson-link").evaluateAll((els) => els.map((e) => e.dataset.lesson));
    assert.deepEqual(ids, plan.map((l) => l.id));
    await app.close();
  });

  test("next: every step's view computes, and its figures and revealed answers equal the arithmetic", async () => {
    for (const lesson of plan) {
      const app = await AppPage.open(session, `?view=lesson&lesson=${lesson.id}&step=1`);
      for (const planned of lesson.steps) {
        await assertStep(app, lesson.id, planned);
        await app.page.waitForSelector(VIEW_READY[planned.view], { timeout: 90_000 });
        const reveal = app.page.getByTestId("check-reveal");
        if (await reveal.count()) {
          await reveal.click();
          await app.page.getByTestId("check-answer").waitFor();
          await assertFigures(app, planned, `${lesson.id} step ${planned.step}, answer revealed`);
        }
        if (planned.step < lesson.steps.length) await app.page.getByTestId("lesson-next").click();
      }
      assert.equal(await app.page.getByTestId("lesson-next").isDisabled(), true, lesson.id);
      app.assertNoConsoleErrors();
      await app.close();
    }
  });

  test("arrow keys: forward through every step and back to the first", async () => {
    for (const lesson of plan) {
      const app = await AppPage.open(session, `?view=lesson&lesson=${lesson.id}&step=1`);
      for (const planned of lesson.steps) {
        await assertStep(app, lesson.id, planned);
        if (planned.step < lesson.steps.length) await pressOnLesson(app, "ArrowRight");
      }
      for (let step = lesson.steps.length - 1; step >= 1; step--) {
        await pressOnLesson(app, "ArrowLeft");
        await waitForStep(app, lesson.id, step);
      }
      app.assertNoConsoleErrors();
      await app.close();
    }
  });

  test("deep links: every step opens as written", async () => {
    const app = await AppPage.open(session, "?view=lesson");
    for (const lesson of plan) {
      for (const planned of lesson.steps) {
        await app.page.goto(`${session.baseUrl}?view=lesson&lesson=${lesson.id}&step=${planned.step}`);
        await assertStep(app, lesson.id, planned);
      }
    }
    app.assertNoConsoleErrors();
    await app.close();
  });
});
