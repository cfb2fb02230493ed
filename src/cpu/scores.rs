//! What the attention twins share: one query row's scaled, masked scores, and their softmax.

use crate::attention::AttentionProblem;

/// Scaled, masked scores of one query row against every key, as f64; masked keys are `None`.
pub(super) fn row_scores(p: &AttentionProblem, h: u32, i: u32) -> Vec<Option<f64>> {
    let AttentionProblem { q, k, shape, mask, scale, .. } = *p;
    let d = shape.d as usize;
    let kv_h = shape.kv_head(h) as usize;
    let q_row = &q[((h * shape.n_q + i) as usize) * d..][..d];
    let q_pos = shape.q_offset() + i;
    (0..shape.n_kv)
        .map(|j| {
            mask.visible(q_pos, j).then(|| {
                let k_row = &k[(kv_h * shape.n_kv as usize + j as usize) * d..][..d];
                let dot: f64 = q_row.iter().zip(k_row).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                dot * f64::from(scale)
            })
        })
        .collect()
}

/// Softmax of one row of optional scores (masked entries get probability 0) and its log-sum-exp.
pub(super) fn softmax_row(scores: &[Option<f64>]) -> (Vec<f64>, f64) {
    let max = scores.iter().flatten().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return (vec![0.0; scores.len()], f64::NEG_INFINITY);
    }
    let exps: Vec<f64> = scores.iter().map(|s| s.map_or(0.0, |s| (s - max).exp())).collect();
    let sum: f64 = exps.iter().sum();
    (exps.iter().map(|e| e / sum).collect(), max + sum.ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_no_visible_key_is_zero_with_minus_infinite_lse() {
        // Sliding window 1 over keys 0..2 for a query at position 5 can't happen in self-attention,
        // so build it directly from the softmax of an all-masked row.
        let (p, lse) = softmax_row(&[None, None]);
        assert_eq!(p, vec![0.0, 0.0]);
        assert_eq!(lse, f64::NEG_INFINITY);
    }
}
