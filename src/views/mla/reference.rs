//! The f64 reference of both forms, written as the formulas read, head by head: what the engine's
//! results are checked against, and the proof (in its tests) that the fold is exact.

use super::KeyRotation;
use super::inputs::{MlaInputs, rotate};

/// One head's attention over the sequence, causal: probabilities `[n, n]` (0 where masked) and
/// outputs `[n, value]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadResult {
    pub probs: Vec<f64>,
    pub out: Vec<f64>,
}

fn wide(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// `W x` for `W` stored `[rows, x.len()]`.
fn times(w: &[f32], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len()).map(|row| row.iter().zip(x).map(|(&a, b)| f64::from(a) * b).sum()).collect()
}

/// `Wᵀ y` for `W` stored `[y.len(), cols]`.
fn times_transposed(w: &[f32], y: &[f64], cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; cols];
    for (row, &yi) in w.chunks_exact(cols).zip(y) {
        for (o, &a) in out.iter_mut().zip(row) {
            *o += f64::from(a) * yi;
        }
    }
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Causal softmax attention of queries `q[i]` over keys `k[j]` and values `v[j]`, scores times `scale`.
fn attend(q: &[Vec<f64>], k: &[Vec<f64>], v: &[Vec<f64>], scale: f64) -> HeadResult {
    let n = q.len();
    let width = v.first().map_or(0, Vec::len);
    let (mut probs, mut out) = (vec![0.0; n * n], vec![0.0; n * width]);
    for i in 0..n {
        let scores: Vec<f64> = (0..=i).map(|j| dot(&q[i], &k[j]) * scale).collect();
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let sum: f64 = exps.iter().sum();
        for (j, e) in exps.iter().enumerate() {
            let p = e / sum;
            probs[i * n + j] = p;
            for (o, x) in out[i * width..][..width].iter_mut().zip(&v[j]) {
                *o += p * x;
            }
        }
    }
    HeadResult { probs, out }
}

/// Slices of one head's query parts and up-projections.
struct Head<'a> {
    q_nope: &'a [f32],
    q_rope: &'a [f32],
    w_uk: &'a [f32],
    w_uv: &'a [f32],
}

fn head<'a>(x: &'a MlaInputs, h: usize) -> Head<'a> {
    let s = &x.sizes;
    let (r, dr, dn, dv, n) = (s.latent as usize, s.rope as usize, s.nope as usize, s.value as usize, x.n);
    Head {
        q_nope: &x.q_nope[h * n * dn..][..n * dn],
        q_rope: &x.q_rope[h * n * dr..][..n * dr],
        w_uk: &x.w_uk[h * dn * r..][..dn * r],
        w_uv: &x.w_uv[h * dv * r..][..dv * r],
    }
}

/// Row `i` of `rows` (each `width` wide), in f64, rotated at position `i` when `turn`.
fn row(rows: &[f32], width: usize, i: usize, turn: bool, theta: f64) -> Vec<f64> {
    let mut out = wide(&rows[i * width..][..width]);
    if turn {
        rotate(&mut out, i, theta);
    }
    out
}

/// The expanded form of head `h`: keys and values decompressed from the latent, the RoPE parts
/// rotated, and with `KeyRotation::Whole` the decompressed parts too.
pub fn expanded(x: &MlaInputs, h: usize, rot: KeyRotation) -> HeadResult {
    let s = x.sizes;
    let (r, dr, dn) = (s.latent as usize, s.rope as usize, s.nope as usize);
    let hd = head(x, h);
    let whole = rot == KeyRotation::Whole;
    let (mut q, mut k, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..x.n {
        let c = wide(&x.latent[i * r..][..r]);
        let mut k_nope = times(hd.w_uk, &c);
        if whole {
            rotate(&mut k_nope, i, s.theta);
        }
        k_nope.extend(row(&x.k_rope, dr, i, true, s.theta));
        k.push(k_nope);
        v.push(times(hd.w_uv, &c));
        let mut qi = row(hd.q_nope, dn, i, whole, s.theta);
        qi.extend(row(hd.q_rope, dr, i, true, s.theta));
        q.push(qi);
    }
    attend(&q, &k, &v, s.scale())
}

/// The absorbed form of head `h`: the query folded into latent space (`W_UKᵀ q_nope`) beside its
/// rotated RoPE part, one shared key `[c; k_rope]`, the attention-weighted latent unfolded by `W_UV`.
/// It cannot rotate what it never builds, so it is the same whatever the rotation.
pub fn absorbed(x: &MlaInputs, h: usize) -> HeadResult {
    let s = x.sizes;
    let (r, dr, dn) = (s.latent as usize, s.rope as usize, s.nope as usize);
    let hd = head(x, h);
    let (mut q, mut k, mut latent) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..x.n {
        let c = wide(&x.latent[i * r..][..r]);
        let mut qi = times_transposed(hd.w_uk, &row(hd.q_nope, dn, i, false, s.theta), r);
        qi.extend(row(hd.q_rope, dr, i, true, s.theta));
        q.push(qi);
        let mut key = c.clone();
        key.extend(row(&x.k_rope, dr, i, true, s.theta));
        k.push(key);
        latent.push(c);
    }
    let in_latent = attend(&q, &k, &latent, s.scale());
    let out = in_latent.out.chunks_exact(r).flat_map(|o| times(hd.w_uv, o)).collect();
    HeadResult { probs: in_latent.probs, out }
}

/// Largest `|a − b|` over two equally long lists (0 for empty ones).
pub fn max_abs_diff<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| (x.into() - y.into()).abs()).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Mla;
    use crate::views::mla::setup::MlaSizes;

    fn small() -> MlaInputs {
        // A latent of 16, RoPE 4, heads of 6 + 4 and values of 5, over 9 tokens, 3 heads.
        let mla = Mla { kv_lora_rank: 16, qk_rope_head_dim: 4, qk_nope_head_dim: 6, v_head_dim: 5, ..Mla::DEEPSEEK };
        MlaInputs::seeded(MlaSizes::of(3, mla, 10_000.0), 9, 3, 42)
    }

    #[test]
    fn attention_by_hand_two_keys() {
        // Query [1], keys [0] and [ln 3] at scale 1: row 1's scores 0 and ln 3, so p = 1/4, 3/4;
        // values 4 and 8: output 1 + 6 = 7.
        let q = vec![vec![1.0], vec![1.0]];
        let k = vec![vec![0.0], vec![3f64.ln()]];
        let v = vec![vec![4.0], vec![8.0]];
        let r = attend(&q, &k, &v, 1.0);
        assert_eq!(r.probs[..2], [1.0, 0.0]);
        assert!((r.probs[2] - 0.25).abs() < 1e-15 && (r.probs[3] - 0.75).abs() < 1e-15);
        assert!((r.out[1] - 7.0).abs() < 1e-14 && r.out[0] == 4.0);
    }

    #[test]
    fn with_the_decoupled_key_both_forms_agree_to_rounding() {
        let x = small();
        for h in 0..3 {
            let (e, a) = (expanded(&x, h, KeyRotation::Decoupled), absorbed(&x, h));
            assert!(max_abs_diff(&e.probs, &a.probs) < 1e-9, "head {h}");
            assert!(max_abs_diff(&e.out, &a.out) < 1e-9, "head {h}");
            // The last row is neither one-hot nor flat: the check sees real attention.
            let last = &e.probs[9 * 8..];
            let (top, low) = (last.iter().copied().fold(0.0, f64::max), last.iter().copied().fold(1.0, f64::min));
            assert!(top < 0.9 && top > 2.0 / 9.0 && low > 1e-4, "head {h}: {last:?}");
        }
    }

    #[test]
    fn rotating_the_whole_key_breaks_the_fold() {
        let x = small();
        let (e, a) = (expanded(&x, 0, KeyRotation::Whole), absorbed(&x, 0));
        let diff = max_abs_diff(&e.probs, &a.probs);
        assert!(diff > 0.01, "{diff}");
        // Row 0 sees only key 0 in any form, and position 0 turns nothing: it still agrees.
        assert_eq!(e.probs[0], 1.0);
        assert!(max_abs_diff(&e.out[..5], &a.out[..5]) < 1e-12);
    }
}
