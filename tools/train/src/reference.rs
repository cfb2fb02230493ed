//! Reference outputs of the exported checkpoint for fixed inputs, computed by this crate's candle
//! forward pass, which the app's own CPU forward pass must reproduce (`tests/data/tiny-model/`).
//!
//! Per input: the token ids; for every position the log-sum-exp of the logits and the five largest
//! logits with their ids; the whole logit vector of the last position; and for three query rows
//! (second, middle, last) every layer's and head's attention probabilities over all keys. Storing a
//! few rows of every head, not every row, and numbers rounded far below the tests' tolerances (logits
//! to 1e-4, probabilities to 1e-7) keeps the file small while every layer, head and mask (rows beyond
//! the sliding window included) is checked.

use candle_core::{D, Device, Tensor};
use serde_json::{Value, json};

use crate::bpe::Error;
use crate::model::{self, ModelConfig, Weights};
use crate::rng::Rng;

/// Prose, code, a text longer than the sliding window, and a repeated random sequence.
pub const PROSE: &str = "The borrow checker compares scopes to determine whether all borrows are valid. \
A reference must never outlive the value it refers to.";
pub const CODE: &str = "fn largest<T: PartialOrd>(list: &[T]) -> &T {\n    let mut largest = &list[0];\n    for item in \
list {\n        if item > largest {\n            largest = item;\n        }\n    }\n    largest\n}\n";

/// `<|endoftext|>` then `len` seeded random ids from `1..vocab` (every id but 0, which is
/// `<|endoftext|>` in this tokenizer), twice: the next token in the second
/// copy is predictable only by finding the current one in the first copy (induction).
pub fn repeated_sequence(eot: u32, vocab: usize, len: usize, rng: &mut Rng) -> Vec<u32> {
    let half: Vec<u32> = (0..len).map(|_| 1 + rng.below(vocab - 1) as u32).collect();
    std::iter::once(eot).chain(half.iter().copied()).chain(half.iter().copied()).collect()
}

/// The reference for each named input.
pub fn reference(
    cfg: &ModelConfig,
    w: &Weights,
    inputs: &[(String, Option<String>, Vec<u32>)],
) -> Result<Value, Error> {
    let mut out = Vec::new();
    for (name, text, ids) in inputs {
        out.push(one(cfg, w, name, text.as_deref(), ids)?);
    }
    Ok(json!({
        "about": "Reference outputs of www/models/attention-lab-tiny computed by tools/train (candle, f32, weights \
                  widened from the checkpoint's float16): `cargo run -- reference`",
        "inputs": out,
    }))
}

fn one(cfg: &ModelConfig, w: &Weights, name: &str, text: Option<&str>, ids: &[u32]) -> Result<Value, Error> {
    let t = ids.len();
    let x = Tensor::from_vec(ids.to_vec(), (1, t), &Device::Cpu)?;
    let f = model::forward(cfg, w, &x, true)?;
    let logits = f.logits.squeeze(0)?; // (t, vocab)
    let lse = logits.broadcast_sub(&logits.max_keepdim(D::Minus1)?)?.exp()?.sum_keepdim(D::Minus1)?.log()?;
    let lse = (lse + logits.max_keepdim(D::Minus1)?)?.squeeze(1)?.to_vec1::<f32>()?;
    let rows_of_logits = logits.to_vec2::<f32>()?;
    let top5: Vec<Value> = rows_of_logits
        .iter()
        .map(|row| json!(top(row, 5).iter().map(|&(i, v)| (i, logit(v))).collect::<Vec<_>>()))
        .collect();
    let mut rows = vec![1, t / 2, t - 1];
    rows.dedup();
    let mut probs = Vec::new(); // [layer][head][row][key]
    for layer in &f.probs {
        let heads = layer.squeeze(0)?.to_vec3::<f32>()?;
        let rows_of = |h: &Vec<Vec<f32>>| -> Vec<Vec<f64>> {
            rows.iter().map(|&r| h[r].iter().map(|&p| round(p, 1e7)).collect()).collect()
        };
        probs.push(heads.iter().map(rows_of).collect::<Vec<_>>());
    }
    Ok(json!({
        "name": name,
        "text": text,
        "ids": ids,
        "logsumexp": lse.iter().map(|&v| logit(v)).collect::<Vec<_>>(),
        "top5": top5,
        "last_logits": rows_of_logits[t - 1].iter().map(|&v| logit(v)).collect::<Vec<_>>(),
        "rows": rows,
        "probs": probs,
    }))
}

fn round(x: f32, scale: f64) -> f64 {
    (f64::from(x) * scale).round() / scale
}

fn logit(x: f32) -> f64 {
    round(x, 1e4)
}

/// The `k` largest entries of `row` as `[id, value]`, largest first.
fn top(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut ids: Vec<u32> = (0..row.len() as u32).collect();
    ids.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
    ids.into_iter().take(k).map(|i| (i, row[i as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_entries_and_repeated_sequences() {
        assert_eq!(top(&[0.5, 2.0, -1.0, 2.0], 3), vec![(1, 2.0), (3, 2.0), (0, 0.5)]);
        let s = repeated_sequence(0, 50, 10, &mut Rng::new(1));
        assert_eq!((s.len(), s[0]), (21, 0));
        assert_eq!(s[1..11], s[11..]);
        assert!(s[1..].iter().all(|&id| (1..50).contains(&id)));
    }
}
