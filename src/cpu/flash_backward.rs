//! Twin of `shaders/flash_backward.wgsl`: attention's gradients from dO, in f64, in the shader's
//! order (D per row; dQ row by row over its keys; dK and dV key by key over the rows that see it),
//! each probability recomputed from the forward's log-sum-exp.

use crate::attention::AttentionProblem;

/// dQ `[h_q, n_q, d]`, dK and dV `[h_kv, n_kv, d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradients {
    pub dq: Vec<f32>,
    pub dk: Vec<f32>,
    pub dv: Vec<f32>,
}

/// A forward pass and the gradients computed from it (by the GPU, or by the twins).
#[derive(Clone, Debug, PartialEq)]
pub struct Backward {
    pub forward: crate::cpu::flash_attention::Forward,
    pub grads: Gradients,
}

/// The forward's results the backward reads, and the loss's gradient with respect to O: `o` and `d_o`
/// are `[h_q, n_q, d]`, `lse` is `[h_q, n_q]` (`cpu::flash_attention`'s `Forward`).
#[derive(Clone, Copy, Debug)]
pub struct BackwardInputs<'a> {
    pub o: &'a [f32],
    pub lse: &'a [f32],
    pub d_o: &'a [f32],
}

/// Why these inputs do not fit `p`'s shape, if they do not.
pub fn check_inputs(p: &AttentionProblem, x: &BackwardInputs) -> Result<(), String> {
    p.validate(true)?;
    let rows = p.shape.h_q as usize * p.shape.n_q as usize;
    if x.o.len() != p.shape.q_len() || x.d_o.len() != p.shape.q_len() || x.lse.len() != rows {
        return Err(format!(
            "O and dO need {} values and lse {rows}; got {}, {} and {}",
            p.shape.q_len(),
            x.o.len(),
            x.d_o.len(),
            x.lse.len()
        ));
    }
    Ok(())
}

/// Multiply-adds of [`flash_backward`] per visible (row, key) pair and unit of head width: the score
/// and dO·v in each pass, then dQ in one and dK, dV in the other.
pub const MULTIPLY_ADDS_PER_PAIR_AND_DIM: u64 = 7;

/// Twin of `flash_backward.wgsl`'s two passes: dQ, dK, dV of `O = softmax(scale · Q Kᵀ + mask) V`
/// given dO (inputs as [`check_inputs`] wants them). A shared K/V head's gradient sums its query group.
pub fn flash_backward(p: &AttentionProblem, x: &BackwardInputs) -> Gradients {
    let s = p.shape;
    let d = s.d as usize;
    let rows = (s.h_q * s.n_q) as usize;
    // D = rowsum(dO ∘ O), one per (head, query) row.
    let delta: Vec<f64> = (0..rows).map(|r| dot(&x.d_o[r * d..][..d], &x.o[r * d..][..d])).collect();
    let mut dq = vec![0.0; s.q_len()];
    for h in 0..s.h_q {
        for i in 0..s.n_q {
            let row = (h * s.n_q + i) as usize;
            let kv = s.kv_head(h);
            let mut acc = vec![0.0f64; d];
            for j in 0..s.n_kv {
                if let Some((_, ds)) = pair_ds(p, x, &delta, h, i, j) {
                    add_scaled(&mut acc, ds, key_row(p.k, s.n_kv, kv, j, d));
                }
            }
            write_scaled(&mut dq[row * d..][..d], &acc, f64::from(p.scale));
        }
    }
    let (mut dk, mut dv) = (vec![0.0; s.kv_len()], vec![0.0; s.kv_len()]);
    let g = s.group_size();
    for kv in 0..s.h_kv {
        for j in 0..s.n_kv {
            let (mut acc_k, mut acc_v) = (vec![0.0f64; d], vec![0.0f64; d]);
            // Rows query-major, as the shader walks them: query i of each head of the group.
            for i in 0..s.n_q {
                for h in kv * g..(kv + 1) * g {
                    let row = (h * s.n_q + i) as usize;
                    if let Some((prob, ds)) = pair_ds(p, x, &delta, h, i, j) {
                        add_scaled(&mut acc_v, prob, &x.d_o[row * d..][..d]);
                        add_scaled(&mut acc_k, ds, &p.q[row * d..][..d]);
                    }
                }
            }
            let out = (kv * s.n_kv + j) as usize * d;
            write_scaled(&mut dk[out..][..d], &acc_k, f64::from(p.scale));
            write_scaled(&mut dv[out..][..d], &acc_v, 1.0);
        }
    }
    Gradients { dq, dk, dv }
}

/// P of query `i` of head `h` and key `j`, recomputed from lse; `None` where the mask hides the pair.
fn pair_p(p: &AttentionProblem, x: &BackwardInputs, h: u32, i: u32, j: u32) -> Option<f64> {
    let s = p.shape;
    if !p.mask.visible(s.q_offset() + i, j) {
        return None;
    }
    let d = s.d as usize;
    let row = (h * s.n_q + i) as usize;
    let score = f64::from(p.scale) * dot(&p.q[row * d..][..d], key_row(p.k, s.n_kv, s.kv_head(h), j, d));
    Some((score - f64::from(x.lse[row])).exp())
}

/// P and dS = P (dO·v - D) of the pair, or `None` where the mask hides it.
fn pair_ds(p: &AttentionProblem, x: &BackwardInputs, delta: &[f64], h: u32, i: u32, j: u32) -> Option<(f64, f64)> {
    let prob = pair_p(p, x, h, i, j)?;
    let s = p.shape;
    let d = s.d as usize;
    let row = (h * s.n_q + i) as usize;
    let dp = dot(&x.d_o[row * d..][..d], key_row(p.v, s.n_kv, s.kv_head(h), j, d));
    Some((prob, prob * (dp - delta[row])))
}

fn key_row(kv: &[f32], n_kv: u32, head: u32, j: u32, d: usize) -> &[f32] {
    &kv[(head * n_kv + j) as usize * d..][..d]
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}

fn add_scaled(acc: &mut [f64], weight: f64, row: &[f32]) {
    acc.iter_mut().zip(row).for_each(|(a, &x)| *a += weight * f64::from(x));
}

fn write_scaled(out: &mut [f32], acc: &[f64], scale: f64) {
    out.iter_mut().zip(acc).for_each(|(o, &a)| *o = (a * scale) as f32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::cpu::flash_attention::flash_attention;
    use crate::model::Mask;

    #[test]
    fn one_query_two_keys_by_hand() {
        // d = 1, scale 1, full: q = 1, k = [0, ln 3] so P = [1/4, 3/4]; v = [2, 6] so o = 5.
        // dO = 1: dV = P = [0.25, 0.75]; dP = v = [2, 6]; D = dO·o = 5; dS = P (dP - D) = [-0.75, 0.75].
        // dQ = Σ dS k = 0.75 ln 3; dK = dS q = [-0.75, 0.75].
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: 2, d: 1 };
        let (q, k, v) = ([1.0], [0.0, 3f32.ln()], [2.0, 6.0]);
        let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Full, 1.0);
        let f = flash_attention(&p);
        assert!((f.o[0] - 5.0).abs() < 1e-6);
        let g = flash_backward(&p, &BackwardInputs { o: &f.o, lse: &f.lse, d_o: &[1.0] });
        assert!((g.dq[0] - 0.75 * 3f32.ln()).abs() < 1e-6, "{g:?}");
        assert!((g.dk[0] + 0.75).abs() < 1e-6 && (g.dk[1] - 0.75).abs() < 1e-6, "{g:?}");
        assert!((g.dv[0] - 0.25).abs() < 1e-6 && (g.dv[1] - 0.75).abs() < 1e-6, "{g:?}");
    }

    #[test]
    fn masked_pairs_and_blind_rows_give_nothing() {
        // Causal over one key per query: row 0 sees key 0 only, so P = 1 and dS = 1 (dP - D) = 0: dQ of
        // row 0 is 0. Key 1 is seen by row 1 alone.
        let shape = AttentionShape::square(1, 2, 1);
        let (q, k, v) = ([1.0, 2.0], [1.0, 3.0], [10.0, 20.0]);
        let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, 1.0);
        let f = flash_attention(&p);
        let g = flash_backward(&p, &BackwardInputs { o: &f.o, lse: &f.lse, d_o: &[1.0, 0.0] });
        assert_eq!(g.dq[0], 0.0);
        // dO of row 1 is 0: nothing reaches key 1, and key 0 gets row 0's whole dO as dV.
        assert_eq!((g.dk[1], g.dv[1]), (0.0, 0.0));
        assert!((g.dv[0] - 1.0).abs() < 1e-12);
    }

    /// Seeded values in [-amp, amp).
    fn values(len: usize, amp: f32, seed: u64) -> Vec<f32> {
        let mut rng = crate::attention::inputs::SplitMix64::new(seed);
        (0..len).map(|_| rng.next_signed_unit() * amp).collect()
    }

    /// The loss Σ dO ∘ O of the forward pass computed wholly in f64 (the yardstick for finite
    /// differences: its gradients with respect to Q, K and V are exactly dQ, dK and dV).
    fn loss(p: &AttentionProblem, q: &[f64], k: &[f64], v: &[f64], d_o: &[f32]) -> f64 {
        let s = p.shape;
        let d = s.d as usize;
        let mut total = 0.0;
        for h in 0..s.h_q {
            let kv = s.kv_head(h) as usize;
            for i in 0..s.n_q {
                let row = (h * s.n_q + i) as usize;
                let seen: Vec<usize> =
                    (0..s.n_kv).filter(|&j| p.mask.visible(s.q_offset() + i, j)).map(|j| j as usize).collect();
                let score = |j: usize| {
                    let dot: f64 = (0..d).map(|c| q[row * d + c] * k[(kv * s.n_kv as usize + j) * d + c]).sum();
                    dot * f64::from(p.scale)
                };
                let max = seen.iter().map(|&j| score(j)).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = seen.iter().map(|&j| (score(j) - max).exp()).sum();
                for &j in &seen {
                    let weight = (score(j) - max).exp() / sum;
                    let vj = &v[(kv * s.n_kv as usize + j) * d..][..d];
                    total += weight * (0..d).map(|c| f64::from(d_o[row * d + c]) * vj[c]).sum::<f64>();
                }
            }
        }
        total
    }

    /// Largest |twin - central difference| over every input, relative to the largest gradient.
    fn finite_difference_error(p: &AttentionProblem, d_o: &[f32]) -> f64 {
        let f = flash_attention(p);
        let g = flash_backward(p, &BackwardInputs { o: &f.o, lse: &f.lse, d_o });
        let wide = |x: &[f32]| x.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
        let (q, k, v) = (wide(p.q), wide(p.k), wide(p.v));
        let h = 1e-5;
        let mut worst: f64 = 0.0;
        let mut largest: f64 = 0.0;
        for (which, twin) in [(0, &g.dq), (1, &g.dk), (2, &g.dv)] {
            for idx in 0..twin.len() {
                let nudged = |delta: f64| {
                    let (mut q, mut k, mut v) = (q.clone(), k.clone(), v.clone());
                    [&mut q, &mut k, &mut v][which][idx] += delta;
                    loss(p, &q, &k, &v, d_o)
                };
                let numeric = (nudged(h) - nudged(-h)) / (2.0 * h);
                worst = worst.max((numeric - f64::from(twin[idx])).abs());
                largest = largest.max(numeric.abs());
            }
        }
        worst / largest
    }

    #[test]
    fn the_twin_matches_central_differences_of_the_forward_under_every_mask() {
        // Central differences in f64 (step 1e-5: truncation ~1e-10, rounding ~1e-11) of the loss
        // Σ dO ∘ O; the twin reads f32 O and lse, so it agrees to about f32's precision. Measured: at most
        // ~1e-7 of the largest gradient; asserted within 1e-5. GQA: 4 query heads over 2 KV heads.
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 7, n_kv: 9, d: 3 };
        let (q, k, v) = (values(shape.q_len(), 1.5, 1), values(shape.kv_len(), 1.5, 2), values(shape.kv_len(), 1.0, 3));
        let d_o = values(shape.q_len(), 1.0, 4);
        let masks = [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: 3 }, Mask::Chunked { chunk_tokens: 4 }];
        for mask in masks {
            let p = AttentionProblem::new(&q, &k, &v, shape, mask, 0.6);
            let error = finite_difference_error(&p, &d_o);
            assert!(error < 1e-5, "{mask:?}: relative error {error:e}");
        }
    }

    #[test]
    fn a_shared_kv_heads_gradient_is_the_sum_over_its_query_group() {
        // 4 query heads over 2 KV heads, each query head also run alone (MHA, one head) against its KV
        // head: dQ is the lone head's, and dK, dV of a KV head are the sum of its two query heads'.
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 6, n_kv: 6, d: 5 };
        let (q, k, v) = (values(shape.q_len(), 1.0, 5), values(shape.kv_len(), 1.0, 6), values(shape.kv_len(), 1.0, 7));
        let d_o = values(shape.q_len(), 1.0, 8);
        let p = AttentionProblem::new(&q, &k, &v, shape, Mask::Causal, 0.5);
        let f = flash_attention(&p);
        let layer = flash_backward(&p, &BackwardInputs { o: &f.o, lse: &f.lse, d_o: &d_o });
        let one = AttentionShape { h_q: 1, h_kv: 1, ..shape };
        let (q_len, kv_len) = (one.q_len(), one.kv_len());
        let mut summed_k = vec![0.0f64; shape.kv_len()];
        let mut summed_v = vec![0.0f64; shape.kv_len()];
        for h in 0..4usize {
            let kv = h / 2;
            let (qh, doh) = (&q[h * q_len..][..q_len], &d_o[h * q_len..][..q_len]);
            let (kh, vh) = (&k[kv * kv_len..][..kv_len], &v[kv * kv_len..][..kv_len]);
            let alone = AttentionProblem::new(qh, kh, vh, one, Mask::Causal, 0.5);
            let fh = flash_attention(&alone);
            let gh = flash_backward(&alone, &BackwardInputs { o: &fh.o, lse: &fh.lse, d_o: doh });
            assert_eq!(gh.dq, layer.dq[h * q_len..][..q_len], "head {h}: dQ");
            for idx in 0..kv_len {
                summed_k[kv * kv_len + idx] += f64::from(gh.dk[idx]);
                summed_v[kv * kv_len + idx] += f64::from(gh.dv[idx]);
            }
        }
        for idx in 0..shape.kv_len() {
            assert!((summed_k[idx] - f64::from(layer.dk[idx])).abs() < 1e-6, "dK[{idx}]");
            assert!((summed_v[idx] - f64::from(layer.dv[idx])).abs() < 1e-6, "dV[{idx}]");
        }
    }

    #[test]
    fn inputs_of_the_wrong_length_are_refused() {
        let shape = AttentionShape::square(1, 2, 1);
        let p = AttentionProblem::new(&[1.0, 2.0], &[1.0, 3.0], &[10.0, 20.0], shape, Mask::Causal, 1.0);
        let short = BackwardInputs { o: &[0.0; 2], lse: &[0.0], d_o: &[0.0; 2] };
        assert_eq!(check_inputs(&p, &short).unwrap_err(), "O and dO need 2 values and lse 2; got 2, 2 and 1");
    }
}
