// Helpers for the explorer tests: waiting for a computation, reading heads, downloads and .npz files.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

/** The explorer's state: job number, status, heads done. */
export async function explorerState(page) {
  return page.$eval('[data-testid="explorer"]', (e) => ({ job: Number(e.dataset.job), status: e.dataset.status, done: Number(e.dataset.headsDone), total: Number(e.dataset.headsTotal) }));
}

/** Waits until a computation newer than `afterJob` has finished and, when it is ready, every head's
 * figure is up (the page mounts the first figures a few heads a frame, after the job is done). */
export async function waitReady(page, afterJob = 0, timeout = 120_000) {
  await page.waitForFunction((job) => {
    const e = document.querySelector('[data-testid="explorer"]');
    if (!e || Number(e.dataset.job) <= job || e.dataset.status === "computing") return false;
    return e.dataset.status !== "ready" || !document.querySelector('[data-testid="head-placeholder"]');
  }, afterJob, { timeout });
  return explorerState(page);
}

/** Every displayed head: index, KV head, sizes and values. */
export async function heads(page) {
  return page.$$eval('[data-testid="head-heatmap"]', (els) => els.map((e) => ({
    head: Number(e.dataset.head),
    kvHead: Number(e.dataset.kvHead),
    rows: Number(e.dataset.rows),
    cols: Number(e.dataset.cols),
    nQ: Number(e.dataset.nQ),
    nKv: Number(e.dataset.nKv),
    teaching: e.dataset.teaching ?? null,
    pool: e.dataset.pool ?? null,
    probs: e.dataset.probs ? e.dataset.probs.split(",").map(Number) : null,
    pooled: e.dataset.pooled ? e.dataset.pooled.split(",").map(Number) : null,
  })));
}

/** Clicks `selector` and returns the downloaded file's name and bytes. */
export async function download(page, selector) {
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 30_000 }), page.locator(selector).click()]);
  const path = await dl.path();
  return { name: dl.suggestedFilename(), bytes: await readFile(path) };
}

/** Reads the arrays of an uncompressed .npz (what the app writes). */
export function readNpz(bytes) {
  const out = {};
  let at = 0;
  while (bytes.readUInt32LE(at) === 0x04034b50) {
    const size = bytes.readUInt32LE(at + 18);
    const nameLen = bytes.readUInt16LE(at + 26);
    const extra = bytes.readUInt16LE(at + 28);
    const name = bytes.subarray(at + 30, at + 30 + nameLen).toString();
    const data = bytes.subarray(at + 30 + nameLen + extra, at + 30 + nameLen + extra + size);
    out[name.replace(/\.npy$/, "")] = readNpy(data);
    at += 30 + nameLen + extra + size;
  }
  return out;
}

export function readNpy(data) {
  assert.equal(data.subarray(0, 6).toString("latin1"), "\x93NUMPY");
  const headerLen = data.readUInt16LE(8);
  const header = data.subarray(10, 10 + headerLen).toString();
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const descr = header.match(/'descr': '([^']*)'/)[1];
  const body = data.subarray(10 + headerLen);
  if (descr === "<f4") return { shape, values: Array.from({ length: body.length / 4 }, (_, i) => body.readFloatLE(i * 4)) };
  const width = Number(descr.slice(2));
  const strings = [];
  for (let i = 0; i < shape[0]; i++) {
    let s = "";
    for (let c = 0; c < width; c++) { const cp = body.readUInt32LE((i * width + c) * 4); if (cp) s += String.fromCodePoint(cp); }
    strings.push(s);
  }
  return { shape, values: strings };
}

export function argmax(row) {
  return row.reduce((best, x, i) => (x > row[best] ? i : best), 0);
}
