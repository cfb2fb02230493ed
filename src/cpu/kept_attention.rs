//! Twin of `shaders/kept_attention.wgsl`: attention in which each query reads only the positions its
//! evicting cache kept (the same list for every head of a layer). Probabilities are 0 at every
//! position not kept; f64 sums.

use crate::cpu::matmul::dot;

/// The heads and sizes of one launch: Q and O `[h_q, n_q, d]`, K and V `[h_q / group, kv_stride, d]`,
/// probabilities `[h_q, n_q, n_kv]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeptShape {
    pub h_q: u32,
    /// Query heads per KV head.
    pub group: u32,
    pub n_q: u32,
    pub n_kv: u32,
    pub kv_stride: u32,
    pub d: u32,
    pub scale: f32,
}

/// O and the probabilities, each query `i` attending over the positions `kept[i]` only.
pub fn kept_attention(q: &[f32], k: &[f32], v: &[f32], kept: &[Vec<u32>], s: KeptShape) -> (Vec<f32>, Vec<f32>) {
    let (n_q, n_kv, d) = (s.n_q as usize, s.n_kv as usize, s.d as usize);
    let mut o = vec![0.0; s.h_q as usize * n_q * d];
    let mut probs = vec![0.0; s.h_q as usize * n_q * n_kv];
    for head in 0..s.h_q as usize {
        let kv_base = head / s.group as usize * s.kv_stride as usize * d;
        let row = |p: u32| kv_base + p as usize * d;
        for (i, positions) in kept.iter().enumerate().take(n_q) {
            let r = head * n_q + i;
            let keys = positions.iter().map(|&p| &k[row(p)..][..d]);
            let weights = scaled_softmax(&q[r * d..][..d], keys, f64::from(s.scale));
            let mut acc = vec![0.0f64; d];
            for (&p, &w) in positions.iter().zip(&weights) {
                probs[r * n_kv + p as usize] = w as f32;
                for (a, &x) in acc.iter_mut().zip(&v[row(p)..][..d]) {
                    *a += w * f64::from(x);
                }
            }
            for (out, a) in o[r * d..][..d].iter_mut().zip(acc) {
                *out = a as f32;
            }
        }
    }
    (o, probs)
}

/// One query's softmax over `keys` of its scaled scores (f64): what an evicting cache's policy is
/// told of a step, and what its heads read.
pub fn scaled_softmax<'k>(query: &[f32], keys: impl Iterator<Item = &'k [f32]>, scale: f64) -> Vec<f64> {
    let mut weights: Vec<f64> = keys.map(|key| dot(query, key) * scale).collect();
    softmax(&mut weights);
    weights
}

/// `x` replaced by its softmax, in place (f64 throughout).
pub fn softmax(x: &mut [f64]) {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_kept_keys_by_hand() {
        // One head, d = 2, scale 1. Query 1 = (ln 3, 0) keeps keys 0 = (1, 0) and 2 = (0, 0) of three:
        // scores ln 3 and 0, so p = 3/4 and 1/4; key 1 (which would win) is not read.
        let q = [0.0, 0.0, 3f32.ln(), 0.0];
        let k = [1.0, 0.0, 9.0, 9.0, 0.0, 0.0];
        let v = [4.0, 8.0, 100.0, 100.0, 0.0, 4.0];
        let shape = KeptShape { h_q: 1, group: 1, n_q: 2, n_kv: 3, kv_stride: 3, d: 2, scale: 1.0 };
        let (o, p) = kept_attention(&q, &k, &v, &[vec![0], vec![0, 2]], shape);
        assert_eq!(&p[..3], [1.0, 0.0, 0.0]);
        assert!((p[3] - 0.75).abs() < 1e-7 && p[4] == 0.0 && (p[5] - 0.25).abs() < 1e-7, "{p:?}");
        // Query 0 reads key 0 alone: O = V_0; query 1: 3/4 (4, 8) + 1/4 (0, 4) = (3, 7).
        assert_eq!(&o[..2], [4.0, 8.0]);
        assert!((o[2] - 3.0).abs() < 1e-6 && (o[3] - 7.0).abs() < 1e-6, "{o:?}");
    }

    #[test]
    fn query_heads_share_their_kv_head() {
        // Two query heads on one KV head (group 2), equal queries: equal rows.
        let q = [1.0, 0.5, 1.0, 0.5];
        let (k, v) = ([0.5, 1.0, -1.0, 2.0], [1.0, 2.0, 3.0, 4.0]);
        let shape = KeptShape { h_q: 2, group: 2, n_q: 1, n_kv: 2, kv_stride: 2, d: 2, scale: 0.5 };
        let (o, p) = kept_attention(&q, &k, &v, &[vec![0, 1]], shape);
        assert_eq!((&o[..2], &p[..2]), (&o[2..], &p[2..]));
    }
}
