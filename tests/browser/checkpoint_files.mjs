// A user's checkpoint files as the browser tests choose or drop them: the family fixtures
// (tests/data/fixtures, made by tools/train), whole or cut into shards as Hugging Face stores them.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");
export const FIXTURES = join(ROOT, "tests", "data", "fixtures");
export const TOKENIZER = join(ROOT, "www", "models", "attention-lab-tiny", "tokenizer.json");

/** A file for Playwright's `setInputFiles`. */
export const file = (name, buffer) => ({ name, mimeType: "application/octet-stream", buffer });

/** A fixture's files: its own tokenizer.json where it has one (SmolLM's splits digits), else the shipped one. */
export const fixtureFiles = (name) => [
  file("config.json", readFileSync(join(FIXTURES, name, "config.json"))),
  file("model.safetensors", readFileSync(join(FIXTURES, name, "model.safetensors"))),
  file("tokenizer.json", readFileSync(existsSync(join(FIXTURES, name, "tokenizer.json")) ? join(FIXTURES, name, "tokenizer.json") : TOKENIZER)),
];

/** A safetensors file cut into two shards and the index that names them, as Hugging Face stores them. */
export function sharded(bytes) {
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  const data = bytes.subarray(8 + headerLength);
  const names = Object.keys(header).filter((n) => n !== "__metadata__").sort();
  const halves = [names.slice(0, names.length / 2), names.slice(names.length / 2)];
  const weightMap = {};
  const shards = halves.map((part, i) => {
    const shardName = `model-0000${i + 1}-of-00002.safetensors`;
    const entries = {};
    const chunks = [];
    let at = 0;
    for (const name of part) {
      const [start, end] = header[name].data_offsets;
      chunks.push(data.subarray(start, end));
      entries[name] = { ...header[name], data_offsets: [at, at + end - start] };
      at += end - start;
      weightMap[name] = shardName;
    }
    const json = Buffer.from(JSON.stringify(entries));
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(json.length));
    return file(shardName, Buffer.concat([length, json, ...chunks]));
  });
  const index = file("model.safetensors.index.json", Buffer.from(JSON.stringify({ metadata: {}, weight_map: weightMap })));
  return [...shards, index];
}
