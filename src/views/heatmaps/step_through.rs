//! Attention of one head written out step by step, in f64, for a small example: `S = Q·Kᵀ`, the
//! scaled scores, the mask, the softmax and `O = P·V`. Every step is kept so the UI can show the
//! numbers; the probabilities and outputs equal [`crate::attention::reference`] (tested below).

use crate::attention::AttentionProblem;

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
    let mut probs = vec![0.0; n_q * n_kv];
    for (row, out_row) in masked.chunks(n_kv.max(1)).zip(probs.chunks_mut(n_kv.max(1))) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if max == f64::NEG_INFINITY {
            continue;
        }
        let sum: f64 = row.iter().map(|s| (s - max).exp()).sum();
        for (p, s) in out_row.iter_mut().zip(row) {
            *p = (s - max).exp() / sum;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::attention::reference;
    use crate::model::Mask;

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
    fn equals_the_cpu_reference() {
        let (n, d) = (7usize, 16usize);
        let [q, k, v] = inputs(n, d);
        let shape = AttentionShape::square(1, n as u32, d as u32);
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }] {
            let problem = AttentionProblem::new(&q, &k, &v, shape, mask, 0.25);
            let s = step_through(&problem);
            let p = reference::row_softmax(&problem);
            let f = reference::flash_attention(&problem);
            assert!(s.probs.iter().zip(&p).all(|(a, &b)| (a - f64::from(b)).abs() < 1e-6), "{mask:?}");
            assert!(s.out.iter().zip(&f.o).all(|(a, &b)| (a - f64::from(b)).abs() < 1e-5), "{mask:?}");
        }
    }
}
