//! Designed "teaching heads": query and key vectors built by hand so that each head's pattern is known
//! in advance, which lessons can point at.
//!
//! One designed key layout serves every teaching head (query heads of a GQA group share their keys), in
//! four blocks of a head's `d` dimensions:
//! - dim 0: the sink flag, 1 for the key at position 0, else 0;
//! - `pos` block: `u(j)`, pairs `(cos jω_m, sin jω_m) / sqrt(M)`, so `u(i)·u(j) = mean_m cos((i-j)ω_m)`,
//!   which is 1 at `i = j` and smaller elsewhere;
//! - `tok` block: a unit vector of the key's token (the same word gets the same vector);
//! - `prev` block: the unit vector of the token *before* the key (zero for the first key).
//!
//! Queries then pick a block: previous token `q_i = β u(i-1)`; sink `q_i = β e_0`; same token
//! `q_i = β tok(t_i)`; induction `q_i = β · prev-block(tok(t_i))` (attend to the key that *follows* an
//! earlier copy of the current token); local `q_i = β u_low(i)` on the low frequencies only (a smooth
//! bump over recent keys); diffuse `q_i = 0` (uniform over the visible keys). Each β is chosen from the
//! layout so the intended key wins by a fixed logit margin, after the kernel's `1/sqrt(d)` scale.

use std::collections::HashMap;

use super::inputs::{SplitMix64, token_hash};
use super::rope::AngleRows;

/// The designed heads, in the order they take query heads 0, 1, 2...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeachingHead {
    PreviousToken,
    FirstTokenSink,
    SameToken,
    Induction,
    Local,
    Diffuse,
}

impl TeachingHead {
    pub const ALL: [TeachingHead; 6] = [
        TeachingHead::PreviousToken,
        TeachingHead::FirstTokenSink,
        TeachingHead::SameToken,
        TeachingHead::Induction,
        TeachingHead::Local,
        TeachingHead::Diffuse,
    ];

    /// The designed head at query head `h`, if `h` is one of the first six.
    pub fn for_head(h: u32) -> Option<TeachingHead> {
        Self::ALL.get(h as usize).copied()
    }

    /// Stable id (test ids, lessons).
    pub fn id(self) -> &'static str {
        match self {
            TeachingHead::PreviousToken => "previous-token",
            TeachingHead::FirstTokenSink => "first-token-sink",
            TeachingHead::SameToken => "same-token",
            TeachingHead::Induction => "induction",
            TeachingHead::Local => "local",
            TeachingHead::Diffuse => "diffuse",
        }
    }

    /// What the pattern is, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            TeachingHead::PreviousToken => "previous token: each query looks one step back",
            TeachingHead::FirstTokenSink => "first-token sink: attention parks on token 0",
            TeachingHead::SameToken => "same token: looks at earlier copies of its own word",
            TeachingHead::Induction => "induction-like: looks at what followed an earlier copy of its word",
            TeachingHead::Local => "local: a smooth window over the last few tokens",
            TeachingHead::Diffuse => "diffuse: spreads evenly over everything it may see",
        }
    }
}

/// Logit margin (after scaling) by which the intended key beats the runner-up.
const MARGIN: f64 = 12.0;

/// Block sizes of the designed layout for head width `d` (`d >= 8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Frequencies in the positional block (it spans `2 * freqs` dims from dim 1).
    pub freqs: usize,
    /// Width of the token block and of the previous-token block.
    pub tok: usize,
}

impl Blocks {
    pub fn for_dim(d: usize) -> Self {
        let freqs = (d / 4).max(1);
        let tok = d.saturating_sub(1 + 2 * freqs) / 2;
        Self { freqs, tok }
    }
    fn pos0(&self) -> usize {
        1
    }
    fn tok0(&self) -> usize {
        1 + 2 * self.freqs
    }
    fn prev0(&self) -> usize {
        self.tok0() + self.tok
    }
}

/// Angular frequencies of the positional block: log-spaced from 2 rad down to 2e-4 rad per token.
pub fn frequencies(count: usize) -> Vec<f64> {
    (0..count).map(|m| if count == 1 { 2.0 } else { 2.0 * 1e-4f64.powf(m as f64 / (count - 1) as f64) }).collect()
}

/// Frequencies the local head uses (the slow ones).
const LOCAL_MAX_FREQ: f64 = 0.35;

/// `mean over the used m of (1 - cos(ω_m))`: how much `u(i)·u(j)` drops one token away.
fn drop_one(freqs: &[f64]) -> f64 {
    freqs.iter().map(|w| 1.0 - w.cos()).sum::<f64>() / freqs.len().max(1) as f64
}

/// The shared ingredients of every designed head for one sequence.
#[derive(Clone, Debug)]
pub struct Designer {
    pub d: usize,
    pub blocks: Blocks,
    freqs: Vec<f64>,
    /// Token -> its unit vector in the token block.
    token_vecs: HashMap<String, Vec<f32>>,
}

impl Designer {
    /// Token vectors: exactly orthogonal basis vectors when the distinct tokens (of queries and keys
    /// together, in order of first appearance) fit the block, else seeded random unit vectors.
    pub fn new(d: usize, q_tokens: &[String], kv_tokens: &[String], seed: u64) -> Self {
        let blocks = Blocks::for_dim(d);
        let mut distinct: Vec<&String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in q_tokens.iter().chain(kv_tokens) {
            if seen.insert(t) {
                distinct.push(t);
            }
        }
        let orthogonal = distinct.len() <= blocks.tok;
        let token_vecs = distinct
            .iter()
            .enumerate()
            .map(|(id, t)| {
                let v = if orthogonal {
                    (0..blocks.tok).map(|c| if c == id { 1.0 } else { 0.0 }).collect()
                } else {
                    let mut rng = SplitMix64::new(seed ^ token_hash(t) ^ 0x7465_6163_6800);
                    let raw: Vec<f32> = (0..blocks.tok).map(|_| rng.next_signed_unit()).collect();
                    let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                    raw.iter().map(|x| x / norm).collect()
                };
                ((*t).clone(), v)
            })
            .collect();
        let freqs = frequencies(blocks.freqs);
        Self { d, blocks, freqs, token_vecs }
    }

    fn tok_vec(&self, t: &str) -> &[f32] {
        self.token_vecs.get(t).map_or(&[], Vec::as_slice)
    }

    /// The angles rows `range` read (the previous-token head reads the position before each).
    fn angles_for(&self, range: &std::ops::Range<usize>) -> AngleRows {
        AngleRows::new(range.start.saturating_sub(1)..range.end, &self.freqs)
    }

    /// Writes `scale * u(pos)` into the positional block of `row`, keeping only frequencies `<= max_freq`
    /// (renormalised over them).
    fn put_pos(&self, row: &mut [f32], angles: &AngleRows, pos: i64, scale: f64, max_freq: f64) {
        let used = self.freqs.iter().filter(|&&w| w <= max_freq).count().max(1) as f64;
        let norm = scale / used.sqrt();
        for (m, &w) in self.freqs.iter().enumerate() {
            if w <= max_freq {
                let (s, c) = angles.at(pos, m).unwrap_or_else(|| (pos as f64 * w).sin_cos());
                row[self.blocks.pos0() + 2 * m] = (c * norm) as f32;
                row[self.blocks.pos0() + 2 * m + 1] = (s * norm) as f32;
            }
        }
    }

    /// Designed keys `[n_kv, d]` for key tokens at positions `0..n_kv`.
    pub fn keys(&self, kv_tokens: &[String]) -> Vec<f32> {
        self.keys_rows(kv_tokens, 0..kv_tokens.len())
    }

    /// Rows `range` of [`Designer::keys`], `[range, d]` (each key also carries the token before it).
    pub fn keys_rows(&self, kv_tokens: &[String], range: std::ops::Range<usize>) -> Vec<f32> {
        let d = self.d;
        let b = self.blocks;
        let mut k = vec![0.0f32; range.len() * d];
        let angles = self.angles_for(&range);
        for (j, row) in range.zip(k.chunks_mut(d)) {
            row[0] = if j == 0 { 1.0 } else { 0.0 };
            self.put_pos(row, &angles, j as i64, 1.0, f64::INFINITY);
            row[b.tok0()..b.tok0() + b.tok].copy_from_slice(self.tok_vec(&kv_tokens[j]));
            if j > 0 {
                row[b.prev0()..b.prev0() + b.tok].copy_from_slice(self.tok_vec(&kv_tokens[j - 1]));
            }
        }
        k
    }

    /// Designed queries `[n_q, d]` of `head` for query tokens at positions `pos0..pos0 + n_q`, for a
    /// kernel that multiplies scores by `1/sqrt(d)`; `n_kv` sizes the sink's margin.
    pub fn queries(&self, head: TeachingHead, q_tokens: &[String], pos0: usize, n_kv: usize) -> Vec<f32> {
        let d = self.d;
        let b = self.blocks;
        let unscale = (d as f64).sqrt();
        let mut q = vec![0.0f32; q_tokens.len() * d];
        let angles = self.angles_for(&(pos0..pos0 + q_tokens.len()));
        let all = self.freqs.clone();
        let slow: Vec<f64> = all.iter().copied().filter(|&w| w <= LOCAL_MAX_FREQ).collect();
        for (i, row) in q.chunks_mut(d).enumerate() {
            let pos = (pos0 + i) as i64;
            match head {
                TeachingHead::PreviousToken => {
                    self.put_pos(row, &angles, pos - 1, unscale * MARGIN / drop_one(&all), f64::INFINITY)
                }
                TeachingHead::FirstTokenSink => row[0] = (unscale * (MARGIN + (n_kv.max(1) as f64).ln())) as f32,
                TeachingHead::SameToken | TeachingHead::Induction => {
                    let at = if head == TeachingHead::SameToken { b.tok0() } else { b.prev0() };
                    let beta = (unscale * MARGIN) as f32;
                    for (dst, &v) in row[at..at + b.tok].iter_mut().zip(self.tok_vec(&q_tokens[i])) {
                        *dst = beta * v;
                    }
                }
                TeachingHead::Local => {
                    self.put_pos(row, &angles, pos, unscale * 0.15 / drop_one(&slow), LOCAL_MAX_FREQ)
                }
                TeachingHead::Diffuse => {}
            }
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{AttentionProblem, AttentionShape};
    use crate::cpu::reference::row_softmax;
    use crate::model::Mask;

    fn toks(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    fn head_probs(head: TeachingHead, tokens: &[String], d: usize, mask: Mask) -> Vec<f32> {
        let des = Designer::new(d, tokens, tokens, 1);
        let n = tokens.len();
        let q = des.queries(head, tokens, 0, n);
        let k = des.keys(tokens);
        let shape = AttentionShape::square(1, n as u32, d as u32);
        row_softmax(&AttentionProblem::scores(&q, &k, shape, mask, 1.0 / (d as f32).sqrt()))
    }

    fn argmax(row: &[f32]) -> usize {
        row.iter().enumerate().fold((0, f32::MIN), |b, (i, &p)| if p > b.1 { (i, p) } else { b }).0
    }

    #[test]
    fn blocks_fit_the_head() {
        for d in [8usize, 64, 128, 192, 256, 512] {
            let b = Blocks::for_dim(d);
            assert!(b.prev0() + b.tok <= d, "{d}: {b:?}");
        }
        assert_eq!(Blocks::for_dim(64), Blocks { freqs: 16, tok: 15 });
    }

    #[test]
    fn previous_token_head_looks_one_back() {
        let tokens: Vec<String> = crate::attention::tokens::generated_tokens(300, 2);
        let n = tokens.len();
        for d in [64usize, 128] {
            let p = head_probs(TeachingHead::PreviousToken, &tokens, d, Mask::Causal);
            for i in 1..n {
                let row = &p[i * n..][..n];
                assert_eq!(argmax(row), i - 1, "d {d} row {i}");
                assert!(row[i - 1] > 0.9, "d {d} row {i}: {}", row[i - 1]);
            }
        }
    }

    #[test]
    fn sink_same_token_induction_local_and_diffuse() {
        let tokens = toks("the cat sat on the mat and the cat ran");
        let n = tokens.len();
        let d = 64;
        let sink = head_probs(TeachingHead::FirstTokenSink, &tokens, d, Mask::Causal);
        assert!((1..n).all(|i| sink[i * n] > 0.99));
        // Same token: the second "cat" (8) splits between itself and the first "cat" (1).
        let same = head_probs(TeachingHead::SameToken, &tokens, d, Mask::Causal);
        assert!((same[8 * n + 1] - 0.5).abs() < 0.01 && (same[8 * n + 8] - 0.5).abs() < 0.01);
        // Induction: at the second "cat" (8) look at what followed the first "cat": "sat" (2).
        let ind = head_probs(TeachingHead::Induction, &tokens, d, Mask::Causal);
        assert!(ind[8 * n + 2] > 0.99, "{}", ind[8 * n + 2]);
        // Local: recent keys weigh more than old ones, and the row peaks on the query itself.
        let local = head_probs(TeachingHead::Local, &tokens, d, Mask::Causal);
        let row = &local[9 * n..][..n];
        assert_eq!(argmax(row), 9);
        assert!(row[9] > row[8] && row[8] > row[7] && row[7] > row[3]);
        // Diffuse: exactly uniform over the visible keys.
        let diffuse = head_probs(TeachingHead::Diffuse, &tokens, d, Mask::Causal);
        assert!((diffuse[4 * n + 2] - 0.2).abs() < 1e-6);
    }

    #[test]
    fn many_distinct_tokens_use_random_unit_vectors() {
        let tokens: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let des = Designer::new(64, &tokens, &tokens, 5);
        let v = des.tok_vec("w3");
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert_ne!(v, des.tok_vec("w4"));
    }
}
