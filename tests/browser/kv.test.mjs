// The KV view as a person drives it: open a link, read the exact figures, change the dtype, set a
// budget, import a config.json (pasted, chosen, dropped, malformed), share the link, run the decode.
// Every expected figure is computed by hand here, never read from the app.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startSession, REPO_ROOT } from "./harness.mjs";
import { AppPage } from "./app_page.mjs";

let session;
before(async () => { session = await startSession(); });
after(async () => { await session?.close(); });

const CONFIGS = join(REPO_ROOT, "tests", "data", "configs");
const config = (name) => readFileSync(join(CONFIGS, name), "utf8");

/** The exact integer an element carries in data-value, once it equals `expected` (figures update async). */
async function figure(app, testid, expected) {
  const locator = app.page.getByTestId(testid);
  if (expected !== undefined) {
    await app.page.waitForFunction(([id, v]) => document.querySelector(`[data-testid="${id}"]`)?.getAttribute("data-value") === v,
      [testid, String(expected)], { timeout: 15_000 }).catch(() => {});
  }
  return { value: await locator.getAttribute("data-value"), text: await locator.innerText() };
}

async function paste(app, text) {
  await app.page.locator("details.import summary").click();
  await app.page.getByTestId("config-input").fill(text);
  await app.page.getByTestId("config-import").click();
}

describe("KV view", () => {
  test("a link's figures equal the hand computation, and the dtype select changes them", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b&ctx=8192&dtype=fp16");
    // llama-3-8b: 32 layers * 8 kv heads * 128 dims * 2 (K, V) * 2 bytes = 131,072 bytes per token
    const perToken = 32 * 8 * 128 * 2 * 2;
    assert.equal(perToken, 131072);
    let f = await figure(app, "kv-bytes-per-token", perToken);
    assert.equal(f.value, String(perToken));
    assert.match(f.text, /131,072 bytes = 131\.07 KB \(128\.00 KiB\)/);
    // 131,072 B * 8,192 tokens = 1,073,741,824 B = 1.07 GB = exactly 1 GiB
    f = await figure(app, "kv-total-bytes", perToken * 8192);
    assert.equal(f.value, "1073741824");
    assert.match(f.text, /1\.07 GB \(1\.00 GiB\)/);
    // Q 4096x4096 + K 4096x(8*128) + V 4096x1024 + O 4096x4096 = 41,943,040 parameters
    f = await figure(app, "attn-params-per-layer", 2 * 4096 * 4096 + 2 * 4096 * 1024);
    assert.equal(f.value, "41943040");
    assert.match(await app.page.getByTestId("kv-bytes-per-token-formula").innerText(),
      /32 global layers × 8 KV heads × 128 dims × 2 \(K and V\) × 2 B = 131,072 B per token/);
    assert.match(await app.page.locator(".units-note").innerText(), /GB = 10\^9 bytes, GiB = 2\^30 bytes/);

    // INT4: 4 bits per element -> a quarter of FP16.
    await app.page.getByTestId("dtype-select").selectOption("int4");
    await app.waitForParam("dtype", "int4");
    assert.equal((await figure(app, "kv-bytes-per-token", 32768)).value, String(perToken / 4));
    assert.equal((await figure(app, "kv-total-bytes", 268435456)).value, String(perToken / 4 * 8192));
    assert.match(await app.page.getByTestId("kv-bytes-per-token-formula").innerText(), /× 4 bits ÷ 8 = 32,768 B per token/);

    // Context chip: 128K tokens at INT4 = 32,768 * 131,072 = 4,294,967,296 B.
    await app.page.locator('[data-testid="ctx-choice"][data-value="131072"]').click();
    await app.waitForParam("ctx", "131072");
    assert.equal((await figure(app, "kv-total-bytes", 4294967296)).value, "4294967296");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a hybrid model shows why: per-layer-type rows, plateau and growth", async () => {
    const app = await AppPage.open(session, "?view=kv&model=gemma-3-27b&ctx=131072&dtype=bf16");
    // gemma-3-27b: 62 layers in a 5 sliding (1024) : 1 global pattern -> 52 sliding + 10 global,
    // 16 KV heads of 128 dims. Per layer per token: 16 * 128 * 2 * 2 B = 8,192 B.
    const perLayerToken = 16 * 128 * 2 * 2;
    const sliding = 52 * perLayerToken * 1024; // capped at the window: 436,207,616
    const global = 10 * perLayerToken * 131072; // all tokens: 10,737,418,240
    assert.equal((await figure(app, "kv-bytes-per-token", 62 * perLayerToken)).value, String(62 * perLayerToken));
    assert.equal((await figure(app, "kv-total-bytes", sliding + global)).value, String(sliding + global));
    const rows = await app.page.getByTestId("kv-breakdown-row").evaluateAll((els) =>
      els.map((e) => [e.dataset.kind, e.dataset.bytes, e.dataset.cachedTokens]));
    assert.deepEqual(rows, [["sliding", String(sliding), "1024"], ["global", String(global), "131072"]]);
    assert.match(await app.page.getByTestId("kv-breakdown-row").first().innerText(), /min\(131,072, window 1,024\)/);
    // Which sliding cache the count follows, and what a static one allocates instead.
    assert.match(await app.page.getByTestId("sliding-note").innerText(), /counted at min\(n, W\) tokens.*all W = 1,024 slots \(fewer only when its maximum length is shorter\) at the first token/s);
    // Q 5376x4096 + K 5376x2048 + V 5376x2048 + O 4096x5376 + QK-norm 2 * 128 = 66,060,544
    const attn = 2 * 5376 * 4096 + 2 * 5376 * 2048 + 2 * 128;
    assert.equal((await figure(app, "attn-params-per-layer", attn)).value, String(attn));

    // The chart: one line per layer type plus the total, a budget line; axes switch to log.
    const chart = app.page.getByTestId("kv-chart");
    assert.equal(await chart.locator("path.series").count(), 3);
    assert.ok(await chart.locator("line.ref.budget").count() === 1, "the budget line is drawn");
    await app.page.getByTestId("axis-select").selectOption("log");
    await app.waitForParam("axis", "log");
    assert.equal(await app.page.getByTestId("kv-chart").locator("path.series").count(), 3);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a memory budget gives the longest context that fits, with or without the weights", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b&ctx=8192");
    const perToken = 131072;
    // 80 GB = 80e9 bytes (not GiB): floor(80e9 / 131,072) = 610,351 tokens.
    let fit = app.page.getByTestId("budget-fit");
    await app.page.waitForSelector('[data-testid="budget-fit"][data-value="610351"]');
    assert.equal(Math.floor(80e9 / perToken), 610351);
    assert.match(await fit.innerText(), /610,351 tokens/);

    // One-click 24 GB: floor(24e9 / 131,072) = 183,105.
    await app.page.locator('[data-testid="budget-preset"][data-gb="24"]').click();
    await app.waitForParam("budget", "24");
    await app.page.waitForSelector(`[data-testid="budget-fit"][data-value="${Math.floor(24e9 / perToken)}"]`);

    // Typed 141 GB with BF16 weights counted: Llama 3 8B has 8,030,261,248 parameters * 2 B.
    await app.page.getByTestId("budget-input").fill("141");
    await app.page.getByTestId("budget-input").press("Enter");
    await app.page.getByTestId("budget-input").blur();
    await app.waitForParam("budget", "141");
    await app.page.getByTestId("weights-select").selectOption("bf16");
    await app.waitForParam("weights", "bf16");
    const weights = 8030261248 * 2;
    assert.equal(await app.page.getByTestId("budget-weights").getAttribute("data-value"), String(weights));
    const expected = Math.floor((141e9 - weights) / perToken); // 124,939,477,504 / 131,072 -> 953,212
    await app.page.waitForSelector(`[data-testid="budget-fit"][data-value="${expected}"]`);
    assert.equal(await app.page.getByTestId("budget-at-ctx").getAttribute("data-fits"), "true");

    // A bad budget is refused with a message; the page keeps working.
    await app.page.getByTestId("budget-input").fill("lots");
    await app.page.getByTestId("budget-input").blur();
    assert.match(await app.page.getByTestId("budget-error").innerText(), /not a number of GB/);
    await app.page.getByTestId("dtype-select").selectOption("fp8");
    await figure(app, "kv-bytes-per-token", perToken / 2);

    // All-sliding Mistral 7B: the cache plateaus at 32 * 8 * 128 * 2 * 2 B * 4096 = 536,870,912 B, so any context fits.
    const mistral = await AppPage.open(session, "?view=kv&model=mistral-7b&ctx=32768");
    await mistral.page.waitForSelector('[data-testid="budget-fit"][data-value="unbounded"]');
    assert.equal((await figure(mistral, "kv-total-bytes", 536870912)).value, String(32 * 8 * 128 * 2 * 2 * 4096));
    await mistral.close();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("families with their own field names import exactly: Falcon 40B grouped, ChatGLM 3 with two KV groups, MPT with ALiBi", async () => {
    const app = await AppPage.open(session, "?view=kv&ctx=2048");
    // Falcon 40B keeps multi_query: true beside num_kv_heads: 8; the new decoder architecture uses the 8.
    await paste(app, config("falcon-40b.json"));
    await app.page.getByTestId("import-report").waitFor();
    assert.match(await app.page.getByTestId("import-readings").innerText(), /8 KV heads from num_kv_heads, not 1 from multi_query/);
    // 60 layers * 8 KV heads * 2 (K, V) * 64 dims * 2 B = 122,880 B per token; at 2,048 tokens 251,658,240.
    assert.equal((await figure(app, "kv-bytes-per-token", 122880)).value, "122880");
    assert.equal((await figure(app, "kv-total-bytes", 251658240)).value, "251658240");
    // ChatGLM 3 6B: 28 layers, multi_query_group_num 2 of kv_channels 128: 28 * 2 * 2 * 128 * 2 B = 28,672.
    // The import box is still open: a second file goes into the same field.
    await app.page.getByTestId("config-input").fill(config("chatglm3-6b.json"));
    await app.page.getByTestId("config-import").click();
    assert.equal((await figure(app, "kv-bytes-per-token", 28672)).value, "28672");
    // MPT 7B: ALiBi, read as such; its cache is MHA's, 32 layers * 32 heads * 2 * 128 * 2 B = 524,288.
    await app.page.getByTestId("config-input").fill(config("mpt-7b.json"));
    await app.page.getByTestId("config-import").click();
    assert.equal((await figure(app, "kv-bytes-per-token", 524288)).value, "524288");
    assert.match(await app.page.getByTestId("import-report").innerText(), /alibi/i);
    // Its heatmaps say they are drawn without ALiBi's bias, and the positions panel says it is not RoPE.
    await app.page.waitForFunction(() => new URL(location.href).searchParams.get("cfg")?.includes("alibi"));
    const heatmaps = new URL(app.page.url());
    heatmaps.searchParams.set("view", "heatmaps");
    heatmaps.searchParams.set("rope", "on");
    await app.page.goto(heatmaps.toString());
    assert.match(await app.page.getByTestId("layer-layout").innerText(), /ALiBi in the model .*computed without that bias/);
    assert.match(await app.page.getByTestId("rope-panel").innerText(), /ALiBi, not RoPE/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("hybrid and state-space configs import as such: Jamba's 4 attention layers, Mamba's state only, Falcon-H1 side by side", async () => {
    const app = await AppPage.open(session, "?view=kv&ctx=8192&dtype=bf16");
    // Jamba v0.1: attention at layers 4, 12, 20, 28 (attn_layer_period 8, offset 4), Mamba elsewhere.
    // KV: 4 layers * 8 KV heads * 128 dims * 2 (K, V) * 2 B = 16,384 B per token; at 8,192 tokens 134,217,728.
    // State: 28 Mamba layers * (8,192 channels * 4 conv inputs * 2 B (bf16) + 8,192 * 16 * 4 B (fp32 SSM state))
    //      = 28 * (65,536 + 524,288) = 16,515,072 B per sequence.
    await paste(app, config("jamba-v0.1.json"));
    await app.page.getByTestId("import-report").waitFor();
    assert.match(await app.page.getByTestId("import-readings").innerText(), /Recurrent state as transformers/);
    assert.equal((await figure(app, "kv-bytes-per-token", 16384)).value, "16384");
    assert.equal((await figure(app, "kv-total-bytes", 134217728)).value, "134217728");
    assert.equal((await figure(app, "state-bytes", 16515072)).value, "16515072");
    const rows = await app.page.getByTestId("kv-breakdown-row").evaluateAll((els) =>
      els.map((e) => [e.dataset.kind, e.dataset.layers, e.dataset.stateBytes]));
    assert.deepEqual(rows, [["ssm", "28", "16515072"], ["global", "4", "0"]]);
    // The link carries the layer kinds and the state: a fresh window shows the same figures.
    await app.page.waitForFunction(() => /pat4s-1g-3s/.test(new URL(location.href).searchParams.get("cfg") ?? ""));
    const shared = await AppPage.open(session, new URL(app.page.url()).search);
    assert.equal((await figure(shared, "state-bytes", 16515072)).value, "16515072");
    assert.equal((await figure(shared, "kv-bytes-per-token", 16384)).value, "16384");
    shared.assertNoConsoleErrors();
    await shared.close();

    // Mamba 2.8B (float32 checkpoint): no KV cache; 64 layers * (5,120 * 4 * 4 B + 5,120 * 16 * 4 B)
    // = 64 * 409,600 = 26,214,400 B per sequence.
    await app.page.getByTestId("config-input").fill(config("mamba-2.8b-hf.json"));
    await app.page.getByTestId("config-import").click();
    assert.equal((await figure(app, "state-bytes", 26214400)).value, "26214400");
    assert.equal((await figure(app, "kv-bytes-per-token", 0)).value, "0");
    assert.match(await app.page.getByTestId("state-note").innerText(), /No KV cache/);

    // Falcon-H1 7B: every one of 44 layers runs attention (2 KV heads of 128) and Mamba-2 side by side.
    // KV: 44 * 2 * 128 * 2 * 2 B = 45,056 B per token. State: 44 * ((3,072 + 2 * 256) * 4 * 2 B
    // + 24 heads * 128 * 256 * 4 B) = 44 * (28,672 + 3,145,728) = 139,673,600 B.
    await app.page.getByTestId("config-input").fill(config("falcon-h1-7b-base.json"));
    await app.page.getByTestId("config-import").click();
    assert.equal((await figure(app, "kv-bytes-per-token", 45056)).value, "45056");
    assert.equal((await figure(app, "state-bytes", 139673600)).value, "139673600");
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a pasted config.json is imported, reported, and shareable by link", async () => {
    const app = await AppPage.open(session, "?view=kv&ctx=8192");
    await paste(app, config("qwen2-7b.json"));
    const report = app.page.getByTestId("import-report");
    await report.waitFor();
    assert.match(await app.page.getByTestId("import-used").innerText(), /num_key_value_heads = 4/);
    assert.match(await app.page.getByTestId("import-warnings").innerText(), /use_sliding_window/);
    // qwen2-7b: 28 layers * 4 kv heads * 128 dims * 2 * 2 B = 57,344 B per token
    assert.equal((await figure(app, "kv-bytes-per-token", 57344)).value, String(28 * 4 * 128 * 2 * 2));
    // Q 3584^2 + K, V 3584 * 512 each + O 3584^2 + biases 3584 + 512 + 512 = 29,364,736
    assert.equal((await figure(app, "attn-params-per-layer", 29364736)).value,
      String(2 * 3584 * 3584 + 2 * 3584 * 512 + 3584 + 512 + 512));
    assert.equal(await app.page.getByTestId("model-select").inputValue(), "custom");
    const url = new URL(app.page.url());
    const cfg = url.searchParams.get("cfg");
    assert.ok(cfg && cfg.startsWith("L28.d3584.h28.kv4"), `cfg=${cfg}`);

    // The shared link, in a fresh window, shows the same model and figures.
    const shared = await AppPage.open(session, url.search);
    assert.equal((await figure(shared, "kv-total-bytes", 57344 * 8192)).value, String(57344 * 8192));
    assert.equal(await shared.page.getByTestId("model-select").inputValue(), "custom");
    shared.assertNoConsoleErrors();
    await shared.close();

    // Picking a preset again drops the custom model from the link.
    await app.page.getByTestId("model-select").selectOption("mistral-7b");
    await app.waitForParam("model", "mistral-7b");
    assert.equal(new URL(app.page.url()).searchParams.get("cfg"), null);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a config chosen as a file, and one dropped on the box, are imported", async () => {
    const app = await AppPage.open(session, "?view=kv&ctx=8192");
    await app.page.locator("details.import summary").click();
    // gemma-4-12b: 48 layers, 5:1 with the last global -> 40 sliding + 8 global.
    // sliding: 8 KV heads * 256 * 2 * 2 B = 8,192 B; global (K = V): 1 * 512 * 1 * 2 B = 1,024 B.
    await app.page.getByTestId("config-file").setInputFiles(join(CONFIGS, "gemma-4-12b.json"));
    await app.page.getByTestId("import-report").waitFor();
    assert.equal((await figure(app, "kv-bytes-per-token", 40 * 8192 + 8 * 1024)).value, "335872");
    assert.match(await app.page.getByTestId("import-used").innerText(), /text_config\.global_head_dim = 512/);

    // Drop deepseek-v3.json: MLA caches 512 + 64 per token per layer: 61 * 576 * 2 B = 70,272.
    const text = config("deepseek-v3.json");
    const dataTransfer = await app.page.evaluateHandle((t) => {
      const dt = new DataTransfer();
      dt.items.add(new File([t], "config.json", { type: "application/json" }));
      return dt;
    }, text);
    await app.page.getByTestId("config-input").dispatchEvent("drop", { dataTransfer });
    assert.equal((await figure(app, "kv-bytes-per-token", 70272)).value, String(61 * (512 + 64) * 2));
    // Which MLA form the figures follow: transformers caches each of the 128 heads' K (128 + 64) and
    // V (128) instead: 61 * 128 * 320 * 2 B = 4,997,120, 71.1 times 70,272.
    const note = await app.page.getByTestId("mla-note").innerText();
    assert.match(note, /DeepSeek's own inference code/);
    assert.match(note, /4,997,120 B per token at \w+16 for K and V alone, 71\.1 times the latent and RoPE key's 70,272 B/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the import report lists what a published file leaves unread, and which state it counts", async () => {
    const app = await AppPage.open(session, "?view=kv&ctx=8192");
    await app.page.locator("details.import summary").click();
    // SmolLM2-360M's hub file (verbatim): is_llama_config is the one key nothing reads; token ids,
    // dropout, initialisation and the transformers version are grouped apart as not relevant.
    await app.page.getByTestId("config-file").setInputFiles(join(CONFIGS, "smollm2-360m.json"));
    await app.page.getByTestId("import-report").waitFor();
    await app.page.waitForFunction(() => document.querySelector('[data-testid="import-used"]')?.innerText.includes("num_key_value_heads"));
    assert.deepEqual(await app.page.getByTestId("import-unread").locator("li").allInnerTexts(), ["is_llama_config"]);
    const notRelevant = await app.page.getByTestId("import-not-relevant").innerText();
    for (const key of ["bos_token_id", "eos_token_id", "transformers_version"]) assert.ok(notRelevant.includes(key), notRelevant);
    // Mamba 2.8B's hub file: a 4-input convolution window, as transformers allocates it, and the
    // runtimes that keep 3.
    await app.page.getByTestId("config-file").setInputFiles(join(CONFIGS, "mamba-2.8b-hf.json"));
    await app.page.waitForFunction(() => document.querySelector('[data-testid="import-readings"]')?.innerText.includes("convolution window"));
    assert.match(await app.page.getByTestId("import-readings").innerText(),
      /4-input convolution window in float32.*\(vLLM and TensorRT-LLM keep 3 inputs of the window, one fewer: the newest is in hand\)/s);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("malformed configs give a clear message and never break the page or inject HTML", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b");
    await paste(app, config("bad-truncated.json"));
    assert.match(await app.page.getByTestId("import-error").innerText(), /Could not import this config: not valid JSON/);
    await app.page.getByTestId("config-input").fill(config("bad-heads-not-divisible.json"));
    await app.page.getByTestId("config-import").click();
    await app.page.waitForFunction(() => /cannot be split/.test(document.querySelector('[data-testid="import-error"]')?.textContent));
    await app.page.getByTestId("config-input").fill("[1, 2, 3]");
    await app.page.getByTestId("config-import").click();
    await app.page.waitForFunction(() => /JSON object/.test(document.querySelector('[data-testid="import-error"]')?.textContent));
    // The model did not change and the page still answers.
    assert.equal((await figure(app, "kv-bytes-per-token", 131072)).value, "131072");
    await app.page.getByTestId("dtype-select").selectOption("fp32");
    assert.equal((await figure(app, "kv-bytes-per-token", 262144)).value, "262144");

    // Markup in a config is shown as text, never run.
    const hostile = JSON.parse(config("llama-3-8b.json"));
    hostile.model_type = '<img src=x onerror="window.__pwned=1">';
    await app.page.getByTestId("config-input").fill(JSON.stringify(hostile));
    await app.page.getByTestId("config-import").click();
    await app.page.getByTestId("import-report").waitFor();
    assert.match(await app.page.getByTestId("import-report").innerText(), /<img src=x/);
    assert.equal(await app.page.locator('[data-testid="import-report"] img').count(), 0);
    assert.equal(await app.page.evaluate(() => window.__pwned), undefined);

    // A broken cfg in a link falls back to the preset with a notice.
    const broken = await AppPage.open(session, "?view=kv&cfg=L32.d4096.h32.kv5");
    assert.match(await broken.page.getByTestId("url-notices").innerText(), /Ignored cfg/);
    assert.equal((await figure(broken, "kv-bytes-per-token", 131072)).value, "131072");
    await broken.close();
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the decode animation runs the paged GPU kernel token by token, with shared prompt pages", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b&dtype=fp16");
    await app.waitForEngine();
    assert.match(await app.adapterLine(), /^WebGPU: /);
    await app.page.getByTestId("decode-pace").selectOption("fast");
    await app.page.getByTestId("decode-start").click();
    await app.page.waitForSelector('[data-testid="decode-status"][data-state="done"]', { timeout: 240_000 });
    const status = await app.page.getByTestId("decode-status").evaluate((e) => ({ ...e.dataset }));
    // Each request runs 256 tokens; B reads A's whole 40-token prompt from A's pages.
    assert.equal(status.aTokens, "256");
    assert.equal(status.bTokens, "256");
    assert.equal(status.sharedTokens, "40");
    // The model's cache for A at 256 tokens: 256 * 131,072 B = 33,554,432 B.
    assert.equal(await app.page.getByTestId("decode-bytes").getAttribute("data-value"), String(256 * 131072));
    // While both ran, the 2 full prompt pages were stored once: 32 tokens * 131,072 B = 4,194,304 B.
    assert.equal(await app.page.getByTestId("decode-saved-bytes").getAttribute("data-value"), String(32 * 131072));
    const diff = Number(await app.page.getByTestId("decode-check").getAttribute("data-max-diff"));
    assert.ok(Number.isFinite(diff) && diff < 1e-3, `GPU vs CPU reference differs by ${diff}`);
    // Both requests ended and freed their pages; B's last 48 tokens took 3 of the pages A freed.
    const grid = app.page.getByTestId("page-grid");
    assert.equal(await grid.getAttribute("data-live-pages"), "0");
    assert.equal(await grid.getAttribute("data-recycled"), "3");
    const pool = await app.page.getByTestId("page-pool").evaluate((e) => ({ ...e.dataset }));
    assert.deepEqual([pool.usedBytes, pool.pages, pool.sharedPages, pool.copiedPages, pool.capacityPages], ["0", "0", "0", "1", "32"]);
    assert.equal(await app.page.locator('[data-testid="kv-chart"] circle.marker').count(), 1);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("the page pool shows the bytes its pages really hold, stopped mid-run", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b&dtype=fp16");
    await app.waitForEngine();
    await app.page.getByTestId("decode-pace").selectOption("fast");
    await app.page.getByTestId("decode-start").click();
    // B has arrived and written tokens of its own (so it has copied the partly filled prompt page).
    await app.page.waitForFunction(() => Number(document.querySelector('[data-testid="decode-status"]')?.dataset.bTokens) >= 60,
      null, { timeout: 240_000 });
    await app.page.getByTestId("decode-stop").click();
    await app.page.waitForSelector('[data-testid="decode-status"][data-state="stopped"]');
    const status = await app.page.getByTestId("decode-status").evaluate((e) => ({ ...e.dataset }));
    const pool = await app.page.getByTestId("page-pool").evaluate((e) => ({ ...e.dataset }));
    const [a, b] = [Number(status.aTokens), Number(status.bTokens)];
    const pages = (t) => Math.ceil(t / 16);
    // Each request's pages, less the 2 full prompt pages both read (until A ends at 256 and frees its own).
    const shared = a < 256 ? 2 : 0;
    const live = a < 256 ? pages(a) + pages(b) - shared : pages(b);
    // One page: 8 KV heads x 16 tokens x 128 dims x 4 B x 2 (K, V) = 131,072 B.
    assert.equal(pool.pages, String(live), `a ${a}, b ${b}`);
    assert.equal(pool.sharedPages, String(shared));
    assert.equal(pool.usedBytes, String(live * 131072));
    assert.equal(pool.copiedPages, "1");
    assert.match(await app.page.getByTestId("page-pool").innerText(), new RegExp(`^Pool in use: ${live} of 32 pages`));
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("windowed layers recycle their pages (a custom model from a link)", async () => {
    // 4 layers alternating sliding (window 64) and global, 4 query heads, 2 KV heads of 64 dims.
    const app = await AppPage.open(session, "?view=kv&cfg=L4.d256.h4.kv2.pat1w64-1g&dtype=fp16");
    await app.waitForEngine();
    // 2 sliding + 2 global layers * 2 heads * 64 dims * 2 * 2 B = 4 * 512 = 2,048 B per token
    assert.equal((await figure(app, "kv-bytes-per-token", 2048)).value, String(4 * 2 * 64 * 2 * 2));
    await app.page.getByTestId("decode-pace").selectOption("fast");
    await app.page.getByTestId("decode-start").click();
    await app.page.waitForSelector('[data-testid="decode-status"][data-state="done"]', { timeout: 240_000 });
    const sliding = app.page.locator('[data-testid="page-grid"][data-kind="sliding"]');
    const global = app.page.locator('[data-testid="page-grid"][data-kind="global"]');
    // A 64-token window keeps at most 64 / 16 + 1 = 5 pages per request, and pages leaving it were
    // recycled; both requests ended, so every page is back in the pool.
    assert.equal(await sliding.getAttribute("data-live-pages"), "0");
    assert.ok(Number(await sliding.getAttribute("data-recycled")) > 0, "sliding pages are recycled");
    // Global pages are freed only when A ends (at 256, B at 208): B's last 48 tokens take 3 of them.
    assert.equal(await global.getAttribute("data-recycled"), "3");
    // A's cache at 256 tokens: 2 sliding layers * 512 B * 64 + 2 global layers * 512 B * 256 = 327,680 B.
    assert.equal(await app.page.getByTestId("decode-bytes").getAttribute("data-value"), String(2 * 512 * 64 + 2 * 512 * 256));
    const diff = Number(await app.page.getByTestId("decode-check").getAttribute("data-max-diff"));
    assert.ok(diff < 1e-3, `GPU vs CPU reference differs by ${diff}`);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a hybrid (Jamba-like) link: attention rows cache, Mamba rows keep a constant state", async () => {
    // 32 layers in a 4 Mamba : 1 attention : 3 Mamba pattern -> 28 Mamba + 4 attention layers;
    // attention 8 KV heads of 128 dims; Mamba: 32,768 conv + 262,144 state elements, 2 B each.
    const cfg = "L32.d4096.h32.kv8.hd128.pat4s-1g-3s.ssm32768-262144-2-2-100000000.fs14336.v65536.nope.ctx262144";
    const app = await AppPage.open(session, `?view=kv&cfg=${cfg}&ctx=8192&dtype=fp16`);
    const state = 28 * (32768 * 2 + 262144 * 2); // 16,515,072 B per sequence
    const perToken = 4 * 8 * 128 * 2 * 2; // 16,384 B: attention layers only
    const cache = perToken * 8192; // 134,217,728 B
    let f = await figure(app, "state-bytes", state);
    assert.equal(f.value, String(state));
    assert.match(f.text, /16,515,072 bytes = 16\.52 MB \(15\.75 MiB\)/);
    assert.match(await app.page.getByTestId("state-bytes-formula").innerText(),
      /28 ssm layers × \(32,768 conv elements × 2 B \+ 262,144 state elements × 2 B\) = 16,515,072 B per sequence: constant per sequence, it does not grow with the context/);
    assert.equal((await figure(app, "kv-bytes-per-token", perToken)).value, String(perToken));
    assert.equal((await figure(app, "kv-total-bytes", cache)).value, String(cache));
    const rows = await app.page.getByTestId("kv-breakdown-row").evaluateAll((els) =>
      els.map((e) => [e.dataset.kind, e.dataset.layers, e.dataset.bytes, e.dataset.stateBytes]));
    assert.deepEqual(rows, [["ssm", "28", "0", String(state)], ["global", "4", String(cache), "0"]]);
    assert.match(await app.page.getByTestId("state-note").innerText(), /Only the 4 attention layers of 32 keep a KV cache/);
    // A sequence keeps 134,217,728 + 16,515,072 = 150,732,800 B: floor(80e9 / that) = 530 sequences.
    await app.page.waitForSelector('[data-testid="budget-sequences"][data-value="530"]');
    // Longest context: floor((80e9 − 16,515,072) / 16,384) = 4,881,804 tokens.
    await app.page.waitForSelector('[data-testid="budget-fit"][data-value="4881804"]');
    // The chart draws the state flat and a total per sequence.
    const legend = await app.page.locator('[data-testid="kv-chart"]').innerText();
    assert.match(legend, /state of 28 recurrent layers \(constant\)/);
    assert.match(legend, /total per sequence \(cache of 4 layers \+ state\)/);
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a pure state-space link has no KV cache, only a constant state", async () => {
    // 64 Mamba layers of 20,480 conv + 81,920 state elements at 2 B: 64 × 204,800 = 13,107,200 B.
    const cfg = "L64.d2560.h1.kv1.hd1.pat1s.ssm20480-81920-2-2-30000000.fs0.v50280.nope.np1.ctx2048";
    const app = await AppPage.open(session, `?view=kv&cfg=${cfg}&ctx=8192&dtype=fp16`);
    const state = 64 * (20480 * 2 + 81920 * 2);
    assert.equal((await figure(app, "state-bytes", state)).value, String(state));
    assert.equal((await figure(app, "kv-bytes-per-token", 0)).value, "0");
    const rows = await app.page.getByTestId("kv-breakdown-row").evaluateAll((els) =>
      els.map((e) => [e.dataset.kind, e.dataset.layers, e.dataset.bytes, e.dataset.stateBytes]));
    assert.deepEqual(rows, [["ssm", "64", "0", String(state)]]);
    assert.match(await app.page.getByTestId("state-note").innerText(), /No KV cache: none of the 64 layers runs softmax attention/);
    // Any context fits; floor(80e9 / 13,107,200) = 6,103 sequences side by side.
    await app.page.waitForSelector('[data-testid="budget-fit"][data-value="unbounded"]');
    await app.page.waitForSelector('[data-testid="budget-sequences"][data-value="6103"]');
    app.assertNoConsoleErrors();
    await app.close();
  });

  test("a context past the model's own is named, in the KV view and the compare view", async () => {
    // Llama 3 8B reads 8,192 tokens (max_position_embeddings): 131,072 is past it.
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b&ctx=131072");
    const notice = app.page.getByTestId("ctx-past-context");
    await notice.waitFor();
    assert.match(await notice.innerText(), /131,072 tokens is past Llama 3 8B's context of 8,192 tokens/);
    // Its own context is within it.
    await app.page.getByTestId("ctx-input").fill("8192");
    await app.page.getByTestId("ctx-input").press("Enter");
    await app.page.getByTestId("ctx-input").blur();
    await app.waitForParam("ctx", null);
    await notice.waitFor({ state: "detached" });
    app.assertNoConsoleErrors();
    await app.close();
    // Llama 3.1 8B, the same layout (2 x 32 x 8 x 128 x 2 = 131,072 bytes per token), reads 131,072 tokens.
    const long = await AppPage.open(session, "?view=kv&model=llama-3.1-8b&ctx=131072");
    assert.equal((await figure(long, "kv-total-bytes", 131072 * 131072)).value, String(131072 * 131072));
    assert.equal(await long.page.getByTestId("ctx-past-context").count(), 0);
    await long.close();
    const compare = await AppPage.open(session, "?view=compare&model=llama-3-8b&ctx=131072");
    await compare.page.getByTestId("ctx-past-context").waitFor();
    compare.assertNoConsoleErrors();
    await compare.close();
  });

  test("a transformer keeps no recurrent state", async () => {
    const app = await AppPage.open(session, "?view=kv&model=llama-3-8b");
    const f = await figure(app, "state-bytes", 0);
    assert.equal(f.value, "0");
    assert.match(f.text, /no recurrent state/);
    assert.equal(await app.page.getByTestId("state-note").count(), 0);
    await app.close();
  });
});
