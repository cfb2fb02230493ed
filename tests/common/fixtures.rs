//! The family fixtures (`tests/data/fixtures/`, made by `cargo run -- fixtures` in tools/train) and
//! their candle-transformers reference logits, shared by the native test (`lm_fixtures.rs`) and the
//! in-browser one (`web.rs`): the files are compiled in, so both read the same bytes a user drops.
//!
//! Tolerance: each stored logit within `1e-4 + 1e-5 |want|` and the log-sum-exp within 1e-4
//! (candle sums in f32 in another order; the stored values are rounded to 1e-5; measured at most
//! 1.6e-5 on lavapipe and on the CPU); the ten largest logits name the same ids where their values
//! differ by more than the tolerance.

use serde::Deserialize;
use std::collections::BTreeMap;

const ABS: f64 = 1e-4;
const REL: f64 = 1e-5;

macro_rules! fixture {
    ($name:literal, $tokenizer:expr) => {
        FixtureFiles {
            name: $name,
            config: include_str!(concat!("../data/fixtures/", $name, "/config.json")),
            weights: include_bytes!(concat!("../data/fixtures/", $name, "/model.safetensors")),
            tokenizer: $tokenizer,
        }
    };
}

/// The tokenizer most fixtures use (the shipped model's).
pub const TOKENIZER: &str = include_str!("../../www/models/attention-lab-tiny/tokenizer.json");

/// One fixture's files.
#[derive(Clone, Copy)]
pub struct FixtureFiles {
    pub name: &'static str,
    pub config: &'static str,
    pub weights: &'static [u8],
    pub tokenizer: &'static str,
}

/// Every fixture, in reference.json's (alphabetical) order; SmolLM's has its own tokenizer (digits split first).
pub const FIXTURES: [FixtureFiles; 6] = [
    fixture!("gemma3", TOKENIZER),
    fixture!("llama3", TOKENIZER),
    fixture!("mistral", TOKENIZER),
    fixture!("qwen2", TOKENIZER),
    fixture!("qwen3", TOKENIZER),
    fixture!("smollm", include_str!("../data/fixtures/smollm/tokenizer.json")),
];

#[derive(Deserialize)]
pub struct Reference {
    pub fixtures: BTreeMap<String, FixtureReference>,
}

#[derive(Deserialize)]
pub struct FixtureReference {
    pub inputs: Vec<Input>,
    /// The library's ids for `tokenizer_reference::CASES`, for a fixture with its own tokenizer.
    #[serde(default)]
    pub tokenizer_cases: Vec<Case>,
}

#[derive(Deserialize)]
pub struct Case {
    pub text: String,
    pub ids: Vec<u32>,
}

#[derive(Deserialize)]
pub struct Input {
    pub text: String,
    pub ids: Vec<u32>,
    pub lse: f64,
    pub top10: Vec<(usize, f64)>,
    pub every16: Vec<f64>,
}

pub fn reference() -> Reference {
    serde_json::from_str(include_str!("../data/fixtures/reference.json")).expect("reference.json")
}

/// `logits` (one position) against the reference; returns the largest difference seen.
pub fn check(what: &str, logits: &[f32], want: &Input) -> f64 {
    let got = |i: usize| f64::from(logits[i]);
    let close = |g: f64, w: f64| (g - w).abs() <= ABS + REL * w.abs();
    let mut worst = 0.0f64;
    for (k, &w) in want.every16.iter().enumerate() {
        let g = got(16 * k);
        assert!(close(g, w), "{what}: logit {} is {g}, candle {w}", 16 * k);
        worst = worst.max((g - w).abs());
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max + logits.iter().map(|&v| (f64::from(v) - max).exp()).sum::<f64>().ln();
    assert!((lse - want.lse).abs() <= ABS, "{what}: log-sum-exp {lse}, candle {}", want.lse);
    for &(id, w) in &want.top10 {
        assert!(close(got(id), w), "{what}: top logit {id} is {}, candle {w}", got(id));
        worst = worst.max((got(id) - w).abs());
    }
    // The order of the ten largest, up to near ties.
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    for (rank, &(id, w)) in want.top10.iter().enumerate() {
        let mine = order[rank];
        assert!(mine == id || (got(mine) - w).abs() <= ABS, "{what}: rank {rank} is {mine}, candle {id}");
    }
    worst
}

/// A safetensors file split into two valid files (its first half of tensors, by name, then the
/// rest), as a sharded checkpoint stores them.
pub fn split_in_two(file: &[u8]) -> [Vec<u8>; 2] {
    let json_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&file[8..8 + json_len]).unwrap();
    let data = &file[8 + json_len..];
    let names: Vec<&String> = header.keys().filter(|k| *k != "__metadata__").collect();
    let (first, second) = names.split_at(names.len() / 2);
    [first, second].map(|part| {
        let (mut entries, mut bytes) = (serde_json::Map::new(), Vec::new());
        for &name in part {
            let mut entry = header[name].clone();
            let offsets: Vec<usize> =
                entry["data_offsets"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
            let start = bytes.len();
            bytes.extend_from_slice(&data[offsets[0]..offsets[1]]);
            entry["data_offsets"] = serde_json::json!([start, bytes.len()]);
            entries.insert(name.clone(), entry);
        }
        let json = serde_json::to_vec(&entries).unwrap();
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&json);
        out.extend_from_slice(&bytes);
        out
    })
}
