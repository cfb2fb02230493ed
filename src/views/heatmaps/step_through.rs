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
    fn equals_the_cpu_reference() {
        let (n, d) = (7usize, 16usize);
        let q: Vec<f32> = (0..n * d).map(|x| ((x * 37 % 23) as f32 - 11.0) / 7.0).collect();
        let k: Vec<f32> = (0..n * d).map(|x| ((x * 17 % 19) as f32 - 9.0) / 5.0).collect();
        let v: Vec<f32> = (0..n * d).map(|x| ((x * 7 % 13) as f32 - 6.0) / 3.0).collect();
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
