//! Twin of `shaders/distance_mass.wgsl`: each head's attention mass by distance, every probability
//! worked out from its row's log-sum-exp where it is summed (f64), none kept.

use std::ops::Range;

use super::scores::row_scores;
use crate::attention::AttentionProblem;

/// Slots a head's masses take: one per distance from −(n_kv − 1) (a key after the query, full masks
/// only) to n_kv − 1; distance δ is slot δ + n_kv − 1.
pub fn distance_slots(n_kv: u32) -> usize {
    (2 * u64::from(n_kv)).saturating_sub(1) as usize
}

/// `[h_q, 2 n_kv − 1]`: for each head and distance δ = (query position) − (key position), the mean over
/// the `n_q` queries of the probability `exp(scale · q·k − lse)` the query gives the key δ before it.
/// `p` needs no V; `lse` is `[h_q, n_q]`, the forward pass's natural log-sum-exp of each row.
pub fn distance_mass(p: &AttentionProblem, lse: &[f32]) -> Vec<f32> {
    let slots = distance_slots(p.shape.n_kv);
    let mut sums = vec![0.0f64; p.shape.h_q as usize * slots];
    for (h, head) in sums.chunks_mut(slots).enumerate() {
        add_rows(p, lse, h as u32, 0..p.shape.n_q, head);
    }
    means(&sums, p.shape.n_q)
}

/// Adds to `head` (head `h`'s sums, one per distance slot) the probabilities of its query rows `rows`:
/// [`distance_mass`] a piece at a time, for a caller that lets the page in between pieces.
pub fn add_rows(p: &AttentionProblem, lse: &[f32], h: u32, rows: Range<u32>, head: &mut [f64]) {
    let shape = p.shape;
    for i in rows {
        let row_lse = f64::from(lse[(h * shape.n_q + i) as usize]);
        let q_pos = shape.q_offset() + i;
        for (key, score) in row_scores(p, h, i).into_iter().enumerate() {
            if let Some(score) = score {
                head[q_pos as usize + shape.n_kv as usize - 1 - key] += (score - row_lse).exp();
            }
        }
    }
}

/// The sums over `n_q` queries as their means.
pub fn means(sums: &[f64], n_q: u32) -> Vec<f32> {
    let n_q = f64::from(n_q.max(1));
    sums.iter().map(|s| (s / n_q) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::cpu::flash_attention::flash_attention;
    use crate::cpu::row_softmax::row_softmax;
    use crate::model::Mask;

    #[test]
    fn two_tokens_by_hand() {
        // One head, d = 1, q = k = [1, 2], scale 1, causal. Query 0 sees key 0 alone: p = 1 at δ = 0.
        // Query 1 scores 2 (key 0) and 4 (key 1): p = e²/(e² + e⁴) at δ = 1, e⁴/(e² + e⁴) at δ = 0.
        let (q, k) = ([1.0, 2.0], [1.0, 2.0]);
        let shape = AttentionShape::square(1, 2, 1);
        let lse = [1.0f32, (2f64.exp() + 4f64.exp()).ln() as f32];
        let mass = distance_mass(&AttentionProblem::scores(&q, &k, shape, Mask::Causal, 1.0), &lse);
        let far = 2f64.exp() / (2f64.exp() + 4f64.exp());
        let want = [0.0, (1.0 + 1.0 - far) / 2.0, far / 2.0];
        assert_eq!(mass.len(), 3);
        for (got, want) in mass.iter().zip(want) {
            assert!((f64::from(*got) - want).abs() < 1e-7, "{mass:?}");
        }
    }

    #[test]
    fn masses_are_the_probabilities_summed_along_each_diagonal() {
        // GQA, queries as the last rows of the keys, each mask: the twin against the probabilities'
        // diagonals, and every head's masses summing to 1.
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 5, n_kv: 7, d: 3 };
        let value = |i: usize| ((i * 37 % 11) as f32 - 5.0) / 4.0;
        let q: Vec<f32> = (0..shape.q_len()).map(value).collect();
        let k: Vec<f32> = (0..shape.kv_len()).map(|i| value(i + 3)).collect();
        let v = vec![0.0; shape.kv_len()];
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 2 }, Mask::Chunked { chunk_tokens: 3 }] {
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, 0.7);
            let lse = flash_attention(&p).lse;
            let mass = distance_mass(&p, &lse);
            let probs = row_softmax(&p);
            let (n_q, n_kv) = (shape.n_q as usize, shape.n_kv as usize);
            for h in 0..shape.h_q as usize {
                let head = &mass[h * 13..][..13];
                assert!((head.iter().map(|&x| f64::from(x)).sum::<f64>() - 1.0).abs() < 1e-6, "{mask:?}");
                for (slot, &got) in head.iter().enumerate() {
                    let delta = slot as i64 - (n_kv as i64 - 1);
                    let diagonal: f64 = (0..n_q)
                        .filter_map(|i| {
                            let key = (i + n_kv - n_q) as i64 - delta;
                            (0..n_kv as i64)
                                .contains(&key)
                                .then(|| f64::from(probs[(h * n_q + i) * n_kv + key as usize]))
                        })
                        .sum();
                    assert!((f64::from(got) - diagonal / n_q as f64).abs() < 1e-6, "{mask:?} head {h} δ {delta}");
                }
            }
        }
    }
}
