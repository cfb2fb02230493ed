//! Attention of one head written out step by step, in f64, for a small example: `S = Q·Kᵀ`, the
//! scaled scores, the mask, the softmax and `O = P·V`. Every step is kept so the UI can show the
//! numbers; the probabilities and outputs equal [`crate::cpu::reference`] (tested below).
//! [`Example`] cuts the example out of the explorer's inputs, for the page and the lessons' figures alike.

use crate::attention::layer_inputs::LayerInputs;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::row_softmax::row_softmax;
use crate::live_attention::HeadMap;
use crate::model::Mask;

/// Tokens in the step-through's example: few enough to read every number.
pub const STEP_TOKENS: usize = 6;

/// The step-through's example for one query head: the first [`STEP_TOKENS`] queries and keys of the
/// explorer's inputs. In self-attention queries and keys both start at position 0, so a causal-type
/// mask cuts the same top-left corner of the full matrix; cross-attention sees every key.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub head: u32,
    pub q_tokens: Vec<String>,
    pub kv_tokens: Vec<String>,
    pub mask: Mask,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub shape: AttentionShape,
    /// `1/√d`, as the kernels apply it.
    pub scale: f32,
}

impl Example {
    /// The example of query head `head` under `mask` (the explorer's mask for the layer).
    pub fn of(inputs: &LayerInputs, head: u32, mask: Mask) -> Self {
        Self::first(inputs, head, mask, STEP_TOKENS)
    }

    /// As [`Example::of`], with the first `tokens` queries and keys.
    pub fn first(inputs: &LayerInputs, head: u32, mask: Mask, tokens: usize) -> Self {
        let d = inputs.layout.head_dim as usize;
        let cross = inputs.is_cross();
        let (mut n_q, mut n_kv) = (inputs.q_tokens().len().min(tokens), inputs.kv_tokens().len().min(tokens));
        if !cross {
            n_q = n_q.min(n_kv);
            n_kv = n_q;
        }
        let (k, v) = inputs.kv_head(inputs.layout.kv_head(head));
        Self {
            head,
            q_tokens: inputs.q_tokens()[..n_q].to_vec(),
            kv_tokens: inputs.kv_tokens()[..n_kv].to_vec(),
            mask: if cross { Mask::Full } else { mask },
            q: inputs.q_head(head)[..n_q * d].to_vec(),
            k: k[..n_kv * d].to_vec(),
            v: v[..n_kv * d].to_vec(),
            shape: AttentionShape { h_q: 1, h_kv: 1, n_q: n_q as u32, n_kv: n_kv as u32, d: d as u32 },
            scale: 1.0 / (d as f32).sqrt(),
        }
    }

    pub fn problem(&self) -> AttentionProblem<'_> {
        AttentionProblem::new(&self.q, &self.k, &self.v, self.shape, self.mask, self.scale)
    }

    pub fn steps(&self) -> Steps {
        step_through(&self.problem())
    }
}

/// How far the example's f64 probabilities are from the CPU reference's, and from the kernel's where
/// the head's map holds them: exact (not pooled) and covering the example's corner, which a map of the
/// whole matrix does when its keys are the example's or a causal-type mask keeps the corner alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepChecks {
    pub worst_reference: f64,
    pub worst_gpu: Option<f64>,
}

impl StepChecks {
    /// The checks of `example`'s `steps`, with `map`, the head's map under the explorer's `mask`.
    pub fn of(example: &Example, steps: &Steps, mask: Mask, map: Option<&HeadMap>) -> Self {
        let reference = row_softmax(&example.problem());
        let worst_reference =
            steps.probs.iter().zip(&reference).map(|(a, &b)| (a - f64::from(b)).abs()).fold(0.0, f64::max);
        let (n_q, n_kv) = (steps.n_q, steps.n_kv);
        let covers = |m: &&HeadMap| {
            m.pooled.is_none() && (m.n_kv as usize == n_kv || (!matches!(mask, Mask::Full) && m.q_offset == 0))
        };
        // A map missing a cell of the corner (left incomplete by a newer request) is not compared.
        let worst_gpu = map.filter(covers).and_then(|m| {
            let mut worst = 0.0f64;
            for (i, j) in (0..n_q).flat_map(|i| (0..n_kv).map(move |j| (i, j))) {
                let cell = f64::from(*m.values.get(i * m.cols as usize + j)?);
                worst = worst.max((steps.probs[i * n_kv + j] - cell).abs());
            }
            Some(worst)
        });
        Self { worst_reference, worst_gpu }
    }
}

/// The numbers at each step for `n_q` queries and `n_kv` keys of width `d`.
#[derive(Clone, Debug, PartialEq)]
pub struct Steps {
    pub n_q: usize,
    pub n_kv: usize,
    pub d: usize,
    pub scale: f64,
    /// `q_i · k_j`, `[n_q, n_kv]`.
    pub scores: Vec<f64>,
    /// `scale * q_i · k_j`.
    pub scaled: Vec<f64>,
    /// Scaled scores with masked entries at `-inf`.
    pub masked: Vec<f64>,
    /// Softmax of each masked row (0 where masked; a row with no visible key is all 0).
    pub probs: Vec<f64>,
    /// `P · V`, `[n_q, d]`.
    pub out: Vec<f64>,
}

/// Runs the steps of one head (`p.shape`'s head counts are not read): `q` is `[n_q, d]`, `k` and `v`
/// `[n_kv, d]`; query `i` sits at position `n_kv - n_q + i`, as in [`crate::attention::AttentionShape`].
pub fn step_through(p: &AttentionProblem) -> Steps {
    let AttentionProblem { q, k, v, mask, .. } = *p;
    let (n_q, n_kv, d) = (p.shape.n_q as usize, p.shape.n_kv as usize, p.shape.d as usize);
    let scale = f64::from(p.scale);
    let offset = n_kv.saturating_sub(n_q) as u32;
    let mut scores = Vec::with_capacity(n_q * n_kv);
    for i in 0..n_q {
        for j in 0..n_kv {
            let dot: f64 =
                q[i * d..][..d].iter().zip(&k[j * d..][..d]).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            scores.push(dot);
        }
    }
    let scaled: Vec<f64> = scores.iter().map(|s| s * scale).collect();
    let masked: Vec<f64> = scaled
        .iter()
        .enumerate()
        .map(|(x, &s)| if mask.visible(offset + (x / n_kv) as u32, (x % n_kv) as u32) { s } else { f64::NEG_INFINITY })
        .collect();
    let probs: Vec<f64> = masked.chunks(n_kv.max(1)).flat_map(softmax).collect();
    let mut out = vec![0.0; n_q * d];
    for i in 0..n_q {
        for j in 0..n_kv {
            let p = probs[i * n_kv + j];
            if p != 0.0 {
                for c in 0..d {
                    out[i * d + c] += p * f64::from(v[j * d + c]);
                }
            }
        }
    }
    Steps { n_q, n_kv, d, scale, scores, scaled, masked, probs, out }
}

/// Keys per tile in the step-through's online example: 2, so six keys take three tiles (the kernel's
/// own tiles hold 8 to 32 keys).
pub const EXAMPLE_KEYS_PER_TILE: usize = 2;

/// One tile of keys folded into a query row's running state, the way the tiled kernel does it.
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineStep {
    /// Keys `first..end` of the tile.
    pub first_key: usize,
    pub end_key: usize,
    /// Largest masked score in the tile (`-inf` when the mask hides all of it).
    pub tile_max: f64,
    /// Running max `m` after the tile.
    pub max: f64,
    /// `exp(m_old - m_new)`: what the sum and the output so far are multiplied by, so every term is
    /// relative to the new max (0 at the first tile: there is nothing yet; 1 when the max stays).
    pub rescale: f64,
    /// Running sum `l` of `exp(s - m)` after the tile.
    pub sum: f64,
    /// Running output, not yet divided by `l`: `sum of exp(s - m) * v` over the keys so far, for one
    /// column of V.
    pub out: f64,
}

impl OnlineStep {
    /// The output column had this tile been the last: `out / sum` (0 while no key was visible).
    pub fn output(&self) -> f64 {
        if self.sum > 0.0 { self.out / self.sum } else { 0.0 }
    }
}

/// Row `row` of `steps` computed online over `keys_per_tile` keys at a time, for column `col` of the
/// output (`v` is `[n_kv, d]`). After the last tile, `out / sum` is that column of O, and each
/// probability is `exp(s - max) / sum`: the softmax, without the row's scores ever stored together.
pub fn online_row(steps: &Steps, v: &[f32], row: usize, col: usize, keys_per_tile: usize) -> Vec<OnlineStep> {
    let (n_kv, d) = (steps.n_kv, steps.d);
    let Some(scores) = steps.masked.get(row * n_kv..(row + 1) * n_kv) else { return Vec::new() };
    let (mut max, mut sum, mut out) = (f64::NEG_INFINITY, 0.0, 0.0);
    let mut tiles = Vec::new();
    for first_key in (0..n_kv).step_by(keys_per_tile.max(1)) {
        let end_key = (first_key + keys_per_tile.max(1)).min(n_kv);
        let tile = &scores[first_key..end_key];
        let tile_max = tile.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // A wholly masked tile adds nothing and leaves the state alone (exp(-inf - -inf) would be NaN).
        let rescale = if tile_max == f64::NEG_INFINITY { 1.0 } else { (max - max.max(tile_max)).exp() };
        max = max.max(tile_max);
        sum *= rescale;
        out *= rescale;
        for (j, &s) in tile.iter().enumerate().filter(|(_, s)| **s > f64::NEG_INFINITY) {
            let weight = (s - max).exp();
            sum += weight;
            out += weight * v.get((first_key + j) * d + col).copied().map_or(0.0, f64::from);
        }
        tiles.push(OnlineStep { first_key, end_key, tile_max, max, rescale, sum, out });
    }
    tiles
}

/// Softmax of one row of scores; `-inf` entries are masked and get 0. A row with no visible entry is
/// all 0 (nothing to attend to), never NaN.
pub fn softmax(row: &[f64]) -> Vec<f64> {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return vec![0.0; row.len()];
    }
    let exps: Vec<f64> = row.iter().map(|s| (s - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reference;

    #[test]
    fn two_tokens_by_hand() {
        // d = 1: q = [1, 2], k = [1, 3], v = [10, 20], scale 0.5, causal.
        let s = step_through(&AttentionProblem::new(
            &[1.0, 2.0],
            &[1.0, 3.0],
            &[10.0, 20.0],
            AttentionShape { h_q: 1, h_kv: 1, n_q: 2, n_kv: 2, d: 1 },
            Mask::Causal,
            0.5,
        ));
        assert_eq!(s.scores, vec![1.0, 3.0, 2.0, 6.0]);
        assert_eq!(s.scaled, vec![0.5, 1.5, 1.0, 3.0]);
        assert_eq!(s.masked[1], f64::NEG_INFINITY);
        assert_eq!(s.probs[..2], [1.0, 0.0]);
        let p1 = 3f64.exp() / (1f64.exp() + 3f64.exp());
        assert!((s.probs[3] - p1).abs() < 1e-15);
        assert!((s.out[1] - (10.0 * (1.0 - p1) + 20.0 * p1)).abs() < 1e-12);
    }

    #[test]
    fn online_by_hand() {
        // One query, d = 1, scale 1, full: scores [1, 3, 2, 5], v = [10, 20, 30, 40], two keys a tile.
        let s = step_through(&AttentionProblem::new(
            &[1.0],
            &[1.0, 3.0, 2.0, 5.0],
            &[10.0, 20.0, 30.0, 40.0],
            AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: 4, d: 1 },
            Mask::Full,
            1.0,
        ));
        let t = online_row(&s, &[10.0, 20.0, 30.0, 40.0], 0, 0, 2);
        assert_eq!(t.len(), 2);
        // Tile 1: m = 3, nothing to rescale yet (0), l = e^-2 + 1, o = 10 e^-2 + 20.
        let (e2, e3) = ((-2f64).exp(), (-3f64).exp());
        assert_eq!((t[0].first_key, t[0].end_key, t[0].tile_max, t[0].max, t[0].rescale), (0, 2, 3.0, 3.0, 0.0));
        assert!((t[0].sum - (e2 + 1.0)).abs() < 1e-15 && (t[0].out - (10.0 * e2 + 20.0)).abs() < 1e-12);
        // Tile 2: the max rises to 5, so l and o so far are multiplied by e^(3-5) = e^-2, then
        // e^(2-5) + e^0 is added: l = e^-4 + e^-2 + e^-3 + 1.
        assert_eq!((t[1].tile_max, t[1].max), (5.0, 5.0));
        assert!((t[1].rescale - e2).abs() < 1e-15);
        assert!((t[1].sum - (e2 * e2 + e2 + e3 + 1.0)).abs() < 1e-15);
        // And o / l is the softmax-weighted average, as computed whole; key 2's probability e^(2-5) / l.
        assert!((t[1].output() - s.out[0]).abs() < 1e-12);
        assert!((e3 / t[1].sum - s.probs[2]).abs() < 1e-15);
    }

    /// Q, K and V of `n` tokens of width `d`: small values of both signs, no two rows alike.
    fn inputs(n: usize, d: usize) -> [Vec<f32>; 3] {
        [(37, 23, 11.0, 7.0), (17, 19, 9.0, 5.0), (7, 13, 6.0, 3.0)]
            .map(|(a, m, mid, div)| (0..n * d).map(|x| ((x * a % m) as f32 - mid) / div).collect())
    }

    #[test]
    fn online_equals_the_whole_row_for_every_mask_and_tile_size() {
        let (n, d) = (6usize, 4usize);
        let [q, k, v] = inputs(n, d);
        let shape = AttentionShape::square(1, n as u32, d as u32);
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 2 }, Mask::Chunked { chunk_tokens: 4 }] {
            let s = step_through(&AttentionProblem::new(&q, &k, &v, shape, mask, 0.5));
            for (row, keys, col) in (0..n).flat_map(|r| (1..=n).map(move |t| (r, t, r % d))) {
                let tiles = online_row(&s, &v, row, col, keys);
                let last = tiles.last().unwrap();
                assert!((last.output() - s.out[row * d + col]).abs() < 1e-12, "{mask:?} row {row} tile {keys}");
                for j in 0..n {
                    let p = if s.masked[row * n + j] == f64::NEG_INFINITY {
                        0.0
                    } else {
                        (s.masked[row * n + j] - last.max).exp() / last.sum
                    };
                    assert!((p - s.probs[row * n + j]).abs() < 1e-12);
                }
                // Masked tiles (the start of a sliding row) leave the state as it was: no NaN.
                assert!(tiles.iter().all(|t| t.sum.is_finite() && t.out.is_finite()));
            }
        }
    }

    #[test]
    fn the_example_is_the_top_left_corner_of_the_whole_head() {
        use crate::attention::inputs::word_tokens;
        use crate::attention::layer_inputs::LayerLayout;
        use crate::catalog::presets::preset;
        // Ten tokens, causal: the example keeps 6 x 6, and its probabilities are the first six rows
        // and columns of the full 10 x 10 head (later keys are hidden from the first six queries).
        let layout = LayerLayout::of(preset("gpt2-small").unwrap(), 0);
        let tokens = word_tokens("a b c d e f g h i j");
        let inputs = LayerInputs::new(layout, tokens, None, 3, false);
        let example = Example::of(&inputs, 2, Mask::Causal);
        assert_eq!((example.shape.n_q, example.shape.n_kv, example.scale), (6, 6, 0.125));
        let s = example.steps();
        let (k, _) = inputs.kv_head(2);
        let q = inputs.q_head(2);
        let whole =
            row_softmax(&AttentionProblem::scores(&q, &k, AttentionShape::square(1, 10, 64), Mask::Causal, 0.125));
        for i in 0..6 {
            for j in 0..6 {
                assert!((s.probs[i * 6 + j] - f64::from(whole[i * 10 + j])).abs() < 1e-6, "({i}, {j})");
            }
        }
        // Cross-attention: queries and keys each cut to six, every key visible.
        let cross = LayerInputs::new(
            LayerLayout::of(preset("gpt2-small").unwrap(), 0),
            word_tokens("one two three"),
            Some(word_tokens("un deux trois quatre cinq six sept huit")),
            3,
            false,
        );
        let example = Example::of(&cross, 0, Mask::Causal);
        assert_eq!((example.shape.n_q, example.shape.n_kv, example.mask), (3, 6, Mask::Full));
        assert_eq!(example.kv_tokens.last().map(String::as_str), Some("six"));
    }

    #[test]
    fn the_checks_compare_only_a_map_that_holds_the_example_s_corner() {
        use crate::attention::inputs::word_tokens;
        use crate::attention::layer_inputs::LayerLayout;
        use crate::catalog::presets::preset;
        use std::sync::Arc;
        let tokens = word_tokens("a b c d e f g h i j");
        let inputs = LayerInputs::new(LayerLayout::of(preset("gpt2-small").unwrap(), 0), tokens, None, 3, false);
        let example = Example::of(&inputs, 2, Mask::Causal);
        let s = example.steps();
        // A whole 10 x 10 causal map whose corner is the example's probabilities, one cell off by 0.25.
        let mut values = vec![0.0f32; 100];
        for i in 0..6 {
            for j in 0..6 {
                values[i * 10 + j] = s.probs[i * 6 + j] as f32;
            }
        }
        values[5 * 10 + 2] += 0.25;
        let map = HeadMap {
            head: 2,
            kv_head: 2,
            teaching: None,
            rows: 10,
            cols: 10,
            values,
            pooled: None,
            n_q: 10,
            n_kv: 10,
            row_tokens: Arc::new(Vec::new()),
            col_tokens: Arc::new(Vec::new()),
            mask: Mask::Causal,
            q_offset: 0,
            scores: None,
        };
        let checks = StepChecks::of(&example, &s, Mask::Causal, Some(&map));
        assert!(checks.worst_reference < 1e-6, "{checks:?}");
        assert!((checks.worst_gpu.unwrap() - 0.25).abs() < 1e-6, "{checks:?}");
        // Under a full mask the later keys change the first rows: a 10-key map says nothing of 6 keys.
        assert_eq!(StepChecks::of(&example, &s, Mask::Full, Some(&map)).worst_gpu, None);
        let pooled = HeadMap { pooled: Some(crate::attention::pooled::Pool::Max), ..map };
        assert_eq!(StepChecks::of(&example, &s, Mask::Causal, Some(&pooled)).worst_gpu, None);
        assert_eq!(StepChecks::of(&example, &s, Mask::Causal, None).worst_gpu, None);
        // A map cut short before the corner's last row is not compared either.
        let short = HeadMap { values: vec![0.0; 10 * 5 + 5], pooled: None, ..pooled };
        assert_eq!(StepChecks::of(&example, &s, Mask::Causal, Some(&short)).worst_gpu, None);
    }

    #[test]
    fn equals_the_cpu_reference() {
        let (n, d) = (7usize, 16usize);
        let [q, k, v] = inputs(n, d);
        let shape = AttentionShape::square(1, n as u32, d as u32);
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }] {
            let problem = AttentionProblem::new(&q, &k, &v, shape, mask, 0.25);
            let s = step_through(&problem);
            let p = row_softmax(&problem);
            let f = reference::flash_attention(&problem);
            assert!(s.probs.iter().zip(&p).all(|(a, &b)| (a - f64::from(b)).abs() < 1e-6), "{mask:?}");
            assert!(s.out.iter().zip(&f.o).all(|(a, &b)| (a - f64::from(b)).abs() < 1e-5), "{mask:?}");
        }
    }
}
