//! Twin of `shaders/flash_attention.wgsl` (and of the kernels that compute the same output:
//! `flash_attention_subgroup`, `naive_attention`).

use crate::attention::AttentionProblem;
use crate::cpu::scores::{row_scores, softmax_row};

/// The result of a forward pass: `o` is `[h_q, n_q, d]`, `lse` is `[h_q, n_q]` (natural log-sum-exp of the
/// scaled, visible scores of each row).
///
/// A row that sees no key at all has `o = 0` and `lse = -inf`: there is nothing to average, and the
/// kernels report the same (documented in `shaders/flash_attention.wgsl`).
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    pub o: Vec<f32>,
    pub lse: Vec<f32>,
}

/// Twin of `flash_attention.wgsl` (and of the kernels that compute the same output): the forward pass
/// `O = softmax(scale * Q Kᵀ + mask) V` per query head, with GQA head sharing, and each row's log-sum-exp.
pub fn flash_attention(p: &AttentionProblem) -> Forward {
    let mut out = Forward::zeroed(p);
    for h in 0..p.shape.h_q {
        for i in 0..p.shape.n_q {
            flash_attention_row(p, h, i, &mut out);
        }
    }
    out
}

impl Forward {
    /// An output of the right size for `p`, every row still zero (rows are filled one at a time).
    pub fn zeroed(p: &AttentionProblem) -> Forward {
        Forward { o: vec![0.0; p.shape.q_len()], lse: vec![0.0; (p.shape.h_q * p.shape.n_q) as usize] }
    }
}

/// Row `i` of head `h` of [`flash_attention`], written into `out` (so a caller can compute the rows
/// in slices and let the page breathe between them).
pub fn flash_attention_row(p: &AttentionProblem, h: u32, i: u32, out: &mut Forward) {
    let (shape, v) = (&p.shape, p.v);
    let d = shape.d as usize;
    let kv_h = shape.kv_head(h) as usize;
    let (probs, row_lse) = softmax_row(&row_scores(p, h, i));
    let row = (h * shape.n_q + i) as usize;
    out.lse[row] = row_lse as f32;
    // Masked keys have probability 0 and add nothing: skipped, so a narrow window over a long input
    // costs its window, not the input.
    let visible: Vec<(usize, f64)> = probs.iter().copied().enumerate().filter(|&(_, pj)| pj != 0.0).collect();
    for c in 0..d {
        let acc: f64 = visible.iter().map(|&(j, pj)| pj * f64::from(v[(kv_h * shape.n_kv as usize + j) * d + c])).sum();
        out.o[row * d + c] = acc as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::cpu::row_softmax::row_softmax;
    use crate::model::Mask;

    #[test]
    fn two_tokens_by_hand() {
        // One head, d = 1: q = [1, 2], k = [1, 3], v = [10, 20], scale 1, causal.
        // Row 0 sees key 0 only: p = [1, 0], o = 10, lse = 1*1 = 1.
        // Row 1 scores 2*1 = 2 and 2*3 = 6: p1 = e^6 / (e^2 + e^6), o = 10 p0 + 20 p1.
        let shape = AttentionShape::square(1, 2, 1);
        let f =
            flash_attention(&AttentionProblem::new(&[1.0, 2.0], &[1.0, 3.0], &[10.0, 20.0], shape, Mask::Causal, 1.0));
        let p1 = 6f64.exp() / (2f64.exp() + 6f64.exp());
        assert!((f.o[0] - 10.0).abs() < 1e-6);
        assert!((f64::from(f.o[1]) - (10.0 * (1.0 - p1) + 20.0 * p1)).abs() < 1e-4);
        assert!((f.lse[0] - 1.0).abs() < 1e-6);
        assert!((f64::from(f.lse[1]) - (2f64.exp() + 6f64.exp()).ln()).abs() < 1e-5);
        let p = row_softmax(&AttentionProblem::scores(&[1.0, 2.0], &[1.0, 3.0], shape, Mask::Causal, 1.0));
        assert_eq!(p[1], 0.0);
        assert!((f64::from(p[3]) - p1).abs() < 1e-6);
    }
}
