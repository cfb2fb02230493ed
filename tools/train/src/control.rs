//! The induction-head control (issue 36): a model known to learn the circuit, trained by the same
//! code as the real one (`model::forward`, `model::loss`, `Trainer::step`: the same attention, RoPE,
//! causal mask, loss alignment, AdamW, weight decay and clipping) on data that only copying can
//! predict. Published replications of a 2-layer attention-only transformer on repeated random tokens
//! learn induction heads within a few thousand steps; if this one does not, the pipeline is at fault.
//!
//! A window is `<|endoftext|>` followed by segments R R (R of `min_len..=max_len` random ids from
//! `1..vocab`, each written twice) until the window is full. Progress is measured the way `evaluate`
//! does (`quality::induction_scores`): the loss on the first and second copy of 32 fixed repeated
//! sequences and each head's induction score, plus each head's previous-token score on them (the
//! first half of the circuit).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::bpe::Error;
use crate::model::{self, ModelConfig, Weights};
use crate::quality::{HeadScores, INDUCTION_LEN, induction_scores};
use crate::reference::repeated_sequence;
use crate::rng::Rng;
use crate::train::{TrainConfig, Trainer};

/// The id of `<|endoftext|>` in the shipped tokenizer; random ids are drawn from `1..vocab`.
pub const EOT: u32 = 0;

/// Lengths of the repeated segments.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Segments {
    pub min_len: usize,
    pub max_len: usize,
}

/// 32 to 63 tokens: two copies fill a 128-token window, and a copy is under 64 tokens behind its
/// original, inside the shipped layout's sliding window.
impl Default for Segments {
    fn default() -> Self {
        Self { min_len: 32, max_len: 63 }
    }
}

/// One training window of `context + 1` ids (inputs and shifted targets come from it).
pub fn repeated_window(context: usize, seg: Segments, vocab: usize, rng: &mut Rng) -> Vec<u32> {
    let mut w = vec![EOT];
    while w.len() < context + 1 {
        let n = seg.min_len + rng.below(seg.max_len - seg.min_len + 1);
        let r: Vec<u32> = (0..n).map(|_| 1 + rng.below(vocab - 1) as u32).collect();
        w.extend_from_slice(&r);
        w.extend_from_slice(&r);
    }
    w.truncate(context + 1);
    w
}

/// A batch of windows: inputs and next-token targets, (batch, context) each.
fn batch(cfg: &TrainConfig, rng: &mut Rng) -> candle_core::Result<(Tensor, Tensor)> {
    let t = cfg.context_tokens;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..cfg.batch {
        let w = repeated_window(t, cfg.copy_segments, cfg.model.vocab_size, rng);
        x.extend_from_slice(&w[..t]);
        y.extend_from_slice(&w[1..]);
    }
    Ok((Tensor::from_vec(x, (cfg.batch, t), &Device::Cpu)?, Tensor::from_vec(y, (cfg.batch, t), &Device::Cpu)?))
}

/// What one measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub first_copy_loss: f64,
    pub second_copy_loss: f64,
    /// [layer][head]: `induction` as `evaluate` measures it, `previous` on the same repeated sequences.
    pub heads: Vec<Vec<HeadScores>>,
}

impl Probe {
    /// The highest induction score and its (layer, head).
    pub fn best_induction(&self) -> (f64, usize, usize) {
        let mut best = (f64::NEG_INFINITY, 0, 0);
        for (l, heads) in self.heads.iter().enumerate() {
            for (h, s) in heads.iter().enumerate() {
                if s.induction > best.0 {
                    best = (s.induction, l, h);
                }
            }
        }
        best
    }

    /// The highest previous-token score.
    pub fn best_previous(&self) -> f64 {
        self.heads.iter().flatten().map(|s| s.previous).fold(0.0, f64::max)
    }

    /// `first_copy_loss,second_copy_loss,best_induction,best_layer,best_head,best_previous` (the columns
    /// of [`PROBE_COLUMNS`]).
    pub fn csv_columns(&self) -> String {
        let (best, l, h) = self.best_induction();
        let previous = self.best_previous();
        format!("{:.4},{:.4},{best:.4},{l},{h},{previous:.4}", self.first_copy_loss, self.second_copy_loss)
    }

    /// One line for the console.
    pub fn describe(&self) -> String {
        let (best, l, h) = self.best_induction();
        let previous = self.best_previous();
        format!(
            "copies {:.3} -> {:.3}  induction {best:.2} (layer {l} head {h})  previous {previous:.2}",
            self.first_copy_loss, self.second_copy_loss
        )
    }

    /// Measures `w` on the repeated sequences of `evaluate`.
    pub fn new(cfg: &ModelConfig, w: &Weights) -> Result<Probe, Error> {
        let mut heads = vec![vec![HeadScores::default(); cfg.query_heads]; cfg.layers];
        let (first_copy_loss, second_copy_loss) = induction_scores(cfg, w, EOT, &mut heads)?;
        previous_token_scores(cfg, w, &mut heads)?;
        Ok(Probe { first_copy_loss, second_copy_loss, heads })
    }
}

/// The columns of [`Probe::csv_columns`].
pub const PROBE_COLUMNS: &str = "first_copy_loss,second_copy_loss,best_induction,best_layer,best_head,best_previous";

/// Mean attention from each query to the key before it, on 8 repeated sequences.
fn previous_token_scores(cfg: &ModelConfig, w: &Weights, heads: &mut [Vec<HeadScores>]) -> Result<(), Error> {
    let mut rng = Rng::new(0x9E7_7A1C);
    let runs = 8;
    for _ in 0..runs {
        let ids = repeated_sequence(EOT, cfg.vocab_size, INDUCTION_LEN, &mut rng);
        let x = Tensor::from_vec(ids.clone(), (1, ids.len()), &Device::Cpu)?;
        let out = model::forward(cfg, w, &x, true)?;
        for (l, layer) in out.probs.iter().enumerate() {
            for (h, p) in layer.squeeze(0)?.to_vec3::<f32>()?.iter().enumerate() {
                let sum: f64 = (1..ids.len()).map(|q| f64::from(p[q][q - 1])).sum();
                heads[l][h].previous += sum / (ids.len() - 1) as f64 / runs as f64;
            }
        }
    }
    Ok(())
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ControlSummary {
    pub steps_done: usize,
    pub tokens_seen: usize,
    pub wall_secs: f64,
    pub final_train_loss: f64,
    pub initial: Probe,
    pub last: Probe,
    /// The first evaluated step at which some head's induction score reached 0.4, if any.
    pub first_step_induction_0_4: Option<usize>,
}

/// Trains the control, writing `loss.csv` into `out` (step, tokens, lr, train loss since the previous
/// row, first- and second-copy loss, best induction score and its head, seconds).
/// The windows' segments are `cfg.copy_segments`.
pub fn run(cfg: &TrainConfig, out: &Path) -> Result<ControlSummary, Error> {
    let mut trainer = Trainer::new(cfg.clone(), Device::Cpu)?;
    let mut rng = Rng::new(cfg.seed ^ 0xC0_7201);
    let mut csv = std::fs::File::create(out.join("loss.csv"))?;
    writeln!(csv, "step,tokens,lr,train_loss,{PROBE_COLUMNS},elapsed_secs")?;
    let initial = Probe::new(&cfg.model, &trainer.weights)?;
    let start = Instant::now();
    let (mut sum, mut n, mut steps_done, mut final_train_loss) = (0.0, 0usize, 0, f64::NAN);
    let mut last = initial.clone();
    let mut first_step_induction_0_4 = None;
    for step in 0..cfg.steps {
        let (x, y) = batch(cfg, &mut rng)?;
        sum += trainer.step(step, &x, &y)?;
        n += 1;
        steps_done = step + 1;
        let secs = start.elapsed().as_secs_f64();
        let out_of_time = cfg.max_secs.is_some_and(|m| secs >= m);
        if (step + 1).is_multiple_of(cfg.eval_every) || step + 1 == cfg.steps || out_of_time {
            last = Probe::new(&cfg.model, &trainer.weights)?;
            final_train_loss = sum / n as f64;
            if last.best_induction().0 >= 0.4 && first_step_induction_0_4.is_none() {
                first_step_induction_0_4 = Some(step + 1);
            }
            let (tokens, lr) = ((step + 1) * cfg.batch * cfg.context_tokens, cfg.lr_at(step));
            writeln!(csv, "{},{tokens},{lr:.6e},{final_train_loss:.4},{},{secs:.1}", step + 1, last.csv_columns())?;
            csv.flush()?;
            println!("step {:>5}  train {final_train_loss:.4}  {}  {secs:.0} s", step + 1, last.describe());
            (sum, n) = (0.0, 0);
        }
        if out_of_time {
            break;
        }
    }
    let wall_secs = start.elapsed().as_secs_f64();
    Ok(ControlSummary {
        steps_done,
        tokens_seen: steps_done * cfg.batch * cfg.context_tokens,
        wall_secs,
        final_train_loss,
        initial,
        last,
        first_step_induction_0_4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_end_of_text_then_segments_written_twice() {
        let mut rng = Rng::new(2);
        let seg = Segments { min_len: 4, max_len: 6 };
        for _ in 0..100 {
            let w = repeated_window(40, seg, 20, &mut rng);
            assert_eq!((w.len(), w[0]), (41, EOT));
            assert!(w[1..].iter().all(|&id| (1..20).contains(&id)));
            // Walk the segments while a whole one of the longest length fits: each is followed by itself.
            let (mut at, mut complete) = (1, 0);
            while w.len() - at >= 2 * 6 {
                let n = (4..=6).find(|&n| w[at..at + n] == w[at + n..at + 2 * n]).expect("a repeated segment");
                at += 2 * n;
                complete += 1;
            }
            assert!(complete >= 3, "{complete} segments in {w:?}");
        }
    }
}
