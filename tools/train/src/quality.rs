//! How good the trained model is: held-out loss against unigram and bigram baselines, the loss on
//! repeated random sequences (first copy against second), and four scores per head.
//!
//! Head scores, each a mean attention probability:
//! - previous token: query `q` to key `q - 1`, over held-out windows (queries 1..);
//! - sink: query `q` to the window's first token, over the queries that can see it;
//! - local: query `q` to its 8 most recent keys (itself included), queries 7..;
//! - induction: on `<|endoftext|>` + R + R for random R of `INDUCTION_LEN` tokens, a query in the
//!   second copy holding R[i] to the key just after R[i]'s first occurrence (R[i+1] there), the
//!   token an induction head copies forward.

use candle_core::{Device, Tensor};
use serde::Serialize;

use crate::bpe::Error;
use crate::model::{self, ModelConfig, Weights};
use crate::reference::repeated_sequence;
use crate::rng::Rng;

/// Short enough that the sliding layers (window 64) see the whole repeat.
pub const INDUCTION_LEN: usize = 30;
const INDUCTION_SEQUENCES: usize = 32;
const SCORE_WINDOWS: usize = 32;
const LOCAL_KEYS: usize = 8;

#[derive(Debug, Clone, Default, Serialize)]
pub struct HeadScores {
    pub previous: f64,
    pub induction: f64,
    pub sink: f64,
    pub local: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Quality {
    /// Mean next-token loss over the whole held-out split in non-overlapping windows of the context.
    pub heldout_loss: f64,
    /// Add-one unigram from the training counts.
    pub unigram_loss: f64,
    /// Bigram interpolated with that unigram (the weight chosen on the held-out split: a flattering
    /// baseline).
    pub bigram_loss: f64,
    pub bigram_weight: f64,
    /// Loss on the first and the second copy of the repeated random sequences.
    pub repeat_first_copy_loss: f64,
    pub repeat_second_copy_loss: f64,
    /// [layer][head]
    pub heads: Vec<Vec<HeadScores>>,
}

pub fn measure(cfg: &ModelConfig, w: &Weights, train: &[u32], heldout: &[u32], eot: u32) -> Result<Quality, Error> {
    let (unigram_loss, bigram_loss, bigram_weight) = baselines(train, heldout, cfg.vocab_size);
    let mut heads = vec![vec![HeadScores::default(); cfg.query_heads]; cfg.layers];
    natural_text_scores(cfg, w, heldout, &mut heads)?;
    let (first, second) = induction_scores(cfg, w, eot, &mut heads)?;
    Ok(Quality {
        heldout_loss: heldout_loss(cfg, w, heldout)?,
        unigram_loss,
        bigram_loss,
        bigram_weight,
        repeat_first_copy_loss: first,
        repeat_second_copy_loss: second,
        heads,
    })
}

pub fn heldout_loss(cfg: &ModelConfig, w: &Weights, tokens: &[u32]) -> Result<f64, Error> {
    let t = cfg.max_position_embeddings;
    let offsets: Vec<usize> = (0..(tokens.len() - 1) / t).map(|i| i * t).collect();
    Ok(crate::train::mean_loss(cfg, w, tokens, &offsets, t, 16)?)
}

/// Cross-entropy (nats) of an add-one unigram and of the best interpolated bigram on `heldout`.
fn baselines(train: &[u32], heldout: &[u32], vocab: usize) -> (f64, f64, f64) {
    let mut unigram = vec![1.0f64; vocab];
    let mut bigram = std::collections::HashMap::<(u32, u32), f64>::new();
    for pair in train.windows(2) {
        unigram[pair[1] as usize] += 1.0;
        *bigram.entry((pair[0], pair[1])).or_default() += 1.0;
    }
    let total: f64 = unigram.iter().sum();
    let mut context = vec![0.0f64; vocab];
    for (&(a, _), &n) in &bigram {
        context[a as usize] += n;
    }
    let loss = |weight: f64| {
        let mut sum = 0.0;
        for pair in heldout.windows(2) {
            let p_uni = unigram[pair[1] as usize] / total;
            let seen = context[pair[0] as usize];
            let p_bi = if seen > 0.0 { bigram.get(&(pair[0], pair[1])).copied().unwrap_or(0.0) / seen } else { 0.0 };
            sum -= (weight * p_bi + (1.0 - weight) * p_uni).ln();
        }
        sum / (heldout.len() - 1) as f64
    };
    let (weight, best) =
        (1..20).map(|i| i as f64 * 0.05).map(|w| (w, loss(w))).min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    (loss(0.0), best, weight)
}

/// Previous-token, sink and local scores over evenly spaced held-out windows.
fn natural_text_scores(
    cfg: &ModelConfig,
    w: &Weights,
    tokens: &[u32],
    heads: &mut [Vec<HeadScores>],
) -> Result<(), Error> {
    let t = cfg.max_position_embeddings;
    let span = tokens.len() - t;
    for i in 0..SCORE_WINDOWS {
        let o = i * span / SCORE_WINDOWS;
        let probs = attention(cfg, w, &tokens[o..o + t])?;
        for (l, layer) in probs.iter().enumerate() {
            for (h, p) in layer.iter().enumerate() {
                let s = &mut heads[l][h];
                let window = if cfg.is_global(l) { t } else { cfg.sliding_window };
                s.previous += mean((1..t).map(|q| p[q][q - 1]));
                s.sink += mean((1..t.min(window)).map(|q| p[q][0]));
                s.local += mean((LOCAL_KEYS - 1..t).map(|q| p[q][q + 1 - LOCAL_KEYS..=q].iter().sum()));
            }
        }
    }
    for s in heads.iter_mut().flatten() {
        s.previous /= SCORE_WINDOWS as f64;
        s.sink /= SCORE_WINDOWS as f64;
        s.local /= SCORE_WINDOWS as f64;
    }
    Ok(())
}

/// Induction scores, and the mean loss on the first and second copies.
pub fn induction_scores(
    cfg: &ModelConfig,
    w: &Weights,
    eot: u32,
    heads: &mut [Vec<HeadScores>],
) -> Result<(f64, f64), Error> {
    let mut rng = Rng::new(0x1D0C_7105);
    let n = INDUCTION_LEN;
    let (mut first, mut second) = (0.0, 0.0);
    for _ in 0..INDUCTION_SEQUENCES {
        let ids = repeated_sequence(eot, cfg.vocab_size, n, &mut rng);
        let x = Tensor::from_vec(ids.clone(), (1, ids.len()), &Device::Cpu)?;
        let out = model::forward(cfg, w, &x, true)?;
        let log_probs = candle_nn::ops::log_softmax(&out.logits.squeeze(0)?, 1)?.to_vec2::<f32>()?;
        // Position p predicts ids[p + 1]: the first copy's tokens 2..=n, the second copy's n+2..=2n.
        first += mean((1..n).map(|p| -f64::from(log_probs[p][ids[p + 1] as usize])));
        second += mean((n + 1..2 * n).map(|p| -f64::from(log_probs[p][ids[p + 1] as usize])));
        for (l, layer) in out.probs.iter().enumerate() {
            for (h, p) in layer.squeeze(0)?.to_vec3::<f32>()?.iter().enumerate() {
                // Query n + 1 + i holds R[i], first seen at 1 + i; R[i + 1] follows it at 2 + i.
                heads[l][h].induction += mean((0..n - 1).map(|i| f64::from(p[n + 1 + i][2 + i])));
            }
        }
    }
    for s in heads.iter_mut().flatten() {
        s.induction /= INDUCTION_SEQUENCES as f64;
    }
    let k = INDUCTION_SEQUENCES as f64;
    Ok((first / k, second / k))
}

/// Every layer's probabilities for one window: [layer][head][query][key] as f64.
fn attention(cfg: &ModelConfig, w: &Weights, ids: &[u32]) -> Result<Vec<Vec<Vec<Vec<f64>>>>, Error> {
    let x = Tensor::from_vec(ids.to_vec(), (1, ids.len()), &Device::Cpu)?;
    let out = model::forward(cfg, w, &x, true)?;
    let mut layers = Vec::with_capacity(out.probs.len());
    for p in &out.probs {
        layers.push(p.squeeze(0)?.to_dtype(candle_core::DType::F64)?.to_vec3::<f64>()?);
    }
    Ok(layers)
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_on_a_tiny_stream() {
        // Train "0 1 0 1 0 1": unigram counts (add-one, vocab 2) of the successors: 0 twice, 1 three
        // times, plus one each: p(0) = 3/7, p(1) = 4/7.
        let (uni, bi, _) = baselines(&[0, 1, 0, 1, 0, 1], &[0, 1], 2);
        assert!((uni + (4.0f64 / 7.0).ln()).abs() < 1e-12, "{uni}");
        // After 0 always comes 1: the best weight is the largest tried, 0.95.
        assert!((bi + (0.95 + 0.05 * 4.0 / 7.0f64).ln()).abs() < 1e-12, "{bi}");
    }
}
