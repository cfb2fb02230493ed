//! Twin of `shaders/row_softmax.wgsl` (and of `row_softmax_subgroup`, and `attention_probs` over a
//! region).

use crate::attention::AttentionProblem;
use crate::cpu::scores::{row_scores, softmax_row};

/// Twin of `row_softmax.wgsl` (and of `attention_probs.wgsl` over a region): the attention probabilities
/// `P = softmax(scale * Q Kᵀ + mask)`, `[h_q, n_q, n_kv]`, masked entries 0.
pub fn row_softmax(p: &AttentionProblem) -> Vec<f32> {
    let shape = &p.shape;
    let mut out = Vec::with_capacity((shape.h_q * shape.n_q * shape.n_kv) as usize);
    for h in 0..shape.h_q {
        for i in 0..shape.n_q {
            row_softmax_row(p, h, i, &mut out);
        }
    }
    out
}

/// Twin of `row_softmax.wgsl`'s log-sum-exp output: row `i` of head `h`'s natural log of the sum of
/// its visible scores' exponentials (−∞ for a row that sees no key).
pub fn row_log_sum_exp(p: &AttentionProblem, h: u32, i: u32) -> f32 {
    softmax_row(&row_scores(p, h, i)).1 as f32
}

/// Row `i` of head `h` of [`row_softmax`], appended to `out`.
pub fn row_softmax_row(p: &AttentionProblem, h: u32, i: u32, out: &mut Vec<f32>) {
    let (probs, _) = softmax_row(&row_scores(p, h, i));
    out.extend(probs.iter().map(|&x| x as f32));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::model::Mask;

    #[test]
    fn rows_sum_to_one_and_huge_logits_stay_finite() {
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 5, n_kv: 9, d: 3 };
        let q: Vec<f32> = (0..shape.q_len()).map(|x| ((x * 37 % 11) as f32 - 5.0) * 1e3).collect();
        let k: Vec<f32> = (0..shape.kv_len()).map(|x| ((x * 13 % 7) as f32 - 3.0) * 1e1).collect();
        for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }] {
            let p = row_softmax(&AttentionProblem::scores(&q, &k, shape, mask, 1.0));
            for row in p.chunks(9) {
                assert!(row.iter().all(|x| x.is_finite()));
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{mask:?}");
            }
        }
    }
}
