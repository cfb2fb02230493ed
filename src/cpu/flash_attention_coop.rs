//! Twin of `shaders/flash_attention_coop.wgsl`: the forward pass at the kernel's precision, which the
//! f64 reference ([`flash_attention`](super::flash_attention::flash_attention)) is not. Q (scaled), K,
//! V and each step's weights are rounded to f16 as the kernel stages them; products and sums are f32;
//! the online softmax runs in steps of `keys_per_step` keys as the kernel's does.
//!
//! The kernel's matrix units may sum a block's products in another order, and its steps start at its
//! workgroup's first key where this starts at the row's own (the same steps for full and causal masks):
//! both change only f32 rounding. What matters is the f16 rounding, and the tests below state how far it
//! lands from the f64 reference at the benchmark's shapes: the bound a GPU run of the kernel must meet.

use half::f16;

use crate::attention::AttentionProblem;
use crate::cpu::flash_attention::Forward;

/// The f16 tolerance: how far the kernel's O may land from the f64 reference's, element by element, at
/// inputs of the benchmark's size (|x| <= 1, scale 1/sqrt(d)); measured on this twin at the benchmark's
/// shapes (the test below), with room for the GPU's other summation order.
pub const F16_O_ABS: f32 = 1e-3;
/// The same for each row of O as a whole: ‖o - o_ref‖ <= this x ‖o_ref‖.
pub const F16_O_REL: f32 = 2e-3;
/// The same for each row's log-sum-exp, absolute.
pub const F16_LSE_ABS: f32 = 1e-3;

/// `x` rounded to the nearest f16 (ties to even), back as f32.
fn to_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Twin of `flash_attention_coop.wgsl`: O `[h_q, n_q, d]` and each row's log-sum-exp.
pub fn flash_attention_coop(p: &AttentionProblem, keys_per_step: u32) -> Forward {
    let mut out = Forward::zeroed(p);
    for h in 0..p.shape.h_q {
        for i in 0..p.shape.n_q {
            flash_attention_coop_row(p, keys_per_step, h, i, &mut out);
        }
    }
    out
}

/// Row `i` of head `h` of [`flash_attention_coop`], written into `out`.
pub fn flash_attention_coop_row(p: &AttentionProblem, keys_per_step: u32, h: u32, i: u32, out: &mut Forward) {
    let shape = &p.shape;
    let d = shape.d as usize;
    let kv_h = shape.kv_head(h) as usize;
    let row = (h * shape.n_q + i) as usize;
    let q: Vec<f32> = p.q[row * d..][..d].iter().map(|&x| to_f16(x * p.scale)).collect();
    let (lo, hi) = p.mask.key_range(shape.q_offset() + i, shape.n_kv);
    let kv_row = |key: u32| (kv_h * shape.n_kv as usize + key as usize) * d;
    // Running max (the kernel's NO_SCORE before any key), sum and accumulator.
    let mut m = -3.0e38f32;
    let mut l = 0.0f32;
    let mut acc = vec![0.0f32; d];
    let mut key0 = lo;
    while key0 < hi {
        let keys = key0..(key0 + keys_per_step.max(1)).min(hi);
        let scores: Vec<f32> = keys
            .clone()
            .map(|key| p.k[kv_row(key)..][..d].iter().zip(&q).map(|(&k, &q)| q * to_f16(k)).sum())
            .collect();
        let m_new = scores.iter().copied().fold(m, f32::max);
        let alpha = (m - m_new).exp();
        let weights: Vec<f32> = scores.iter().map(|&s| to_f16((s - m_new).exp())).collect();
        l = l * alpha + weights.iter().sum::<f32>();
        for (e, a) in acc.iter_mut().enumerate() {
            let pv: f32 = keys.clone().zip(&weights).map(|(key, &w)| w * to_f16(p.v[kv_row(key) + e])).sum();
            *a = *a * alpha + pv;
        }
        m = m_new;
        key0 = keys.end;
    }
    let seen = l > 0.0;
    for (o, a) in out.o[row * d..][..d].iter_mut().zip(&acc) {
        *o = if seen { a / l } else { 0.0 };
    }
    out.lse[row] = if seen { m + l.ln() } else { f32::NEG_INFINITY };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::attention::inputs::SplitMix64;
    use crate::cpu::flash_attention::flash_attention_row;
    use crate::gpu::bench::{DEFAULT_WINDOW, HEAD_LAYOUTS};
    use crate::model::Mask;

    /// The kernel's keys per step (`matrix_units::CoopTiles::keys`).
    const KEYS: u32 = 16;

    #[test]
    fn inputs_are_rounded_to_f16_by_hand() {
        // One key, d = 1, scale 1: q = k = v = 1 + 2^-12, which f16 (10 fraction bits) rounds to 1.
        // The reference: lse = q k = 1 + 2^-11 + 2^-24, o = v. The twin: lse = 1 · 1 = 1, o = 1.
        let x = 1.0 + 2f32.powi(-12);
        let shape = AttentionShape::square(1, 1, 1);
        let x1 = [x];
        let p = AttentionProblem::new(&x1, &x1, &x1, shape, Mask::Causal, 1.0);
        let twin = flash_attention_coop(&p, KEYS);
        assert_eq!((twin.o[0], twin.lse[0]), (1.0, 1.0));
        let mut reference = Forward::zeroed(&p);
        flash_attention_row(&p, 0, 0, &mut reference);
        assert_eq!(reference.o[0], x);
        assert!((reference.lse[0] - (x * x)).abs() < 1e-7);
    }

    #[test]
    fn two_keys_over_two_steps_by_hand() {
        // d = 1, scale 1, full: q = 1, keys 0 and 2 (exact in f16), v = 1 and 3, one key a step.
        // Step 1: m = 0, l = 1, acc = 1. Step 2: m = 2, alpha = e^-2, p = 1: l = e^-2 + 1,
        // acc = e^-2 + 3. o = (e^-2 + 3) / (e^-2 + 1), lse = 2 + ln(1 + e^-2), up to f16's rounding of
        // e^-2 (relative 2^-11 at most).
        let shape = AttentionShape::square(1, 2, 1);
        let p = AttentionProblem::new(&[1.0, 1.0], &[0.0, 2.0], &[1.0, 3.0], shape, Mask::Full, 1.0);
        let twin = flash_attention_coop(&p, 1);
        let e = (-2f64).exp();
        let (o, lse) = ((e + 3.0) / (e + 1.0), 2.0 + (1.0 + e).ln());
        assert!((f64::from(twin.o[1]) - o).abs() < 1e-4, "{}", twin.o[1]);
        assert!((f64::from(twin.lse[1]) - lse).abs() < 1e-4, "{}", twin.lse[1]);
        // Row 9 of 10 queries over 4 keys with a window of 1 sees key 9, which does not exist: O = 0,
        // lse = -inf, as the kernel writes.
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 10, n_kv: 4, d: 1 };
        let (q, kv) = (vec![1.0; 10], vec![1.0; 4]);
        let none = flash_attention_coop(
            &AttentionProblem::new(&q, &kv, &kv, shape, Mask::Sliding { window_tokens: 1 }, 1.0),
            KEYS,
        );
        assert_eq!((none.o[9], none.lse[9]), (0.0, f32::NEG_INFINITY));
        assert_eq!((none.o[3], none.lse[3]), (1.0, 1.0));
    }

    /// The largest errors of the twin against the f64 reference over some rows.
    #[derive(Default, Debug)]
    struct Errors {
        /// Largest |o - o_ref| of one element.
        o_abs: f32,
        /// Largest ‖o - o_ref‖ / ‖o_ref‖ of one row.
        o_rel: f32,
        /// Largest |lse - lse_ref|.
        lse_abs: f32,
    }

    /// The benchmark's inputs for `shape` (`bench::run_case`: one SplitMix64 stream, Q then K then V).
    fn bench_inputs(shape: &AttentionShape) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut rng = SplitMix64::new(0x5eed);
        let mut take = |len: usize| (0..len).map(|_| rng.next_signed_unit()).collect::<Vec<f32>>();
        (take(shape.q_len()), take(shape.kv_len()), take(shape.kv_len()))
    }

    fn errors_on_rows(p: &AttentionProblem, rows: &[u32]) -> Errors {
        let d = p.shape.d as usize;
        let (mut twin, mut reference) = (Forward::zeroed(p), Forward::zeroed(p));
        let mut e = Errors::default();
        for h in 0..p.shape.h_q {
            for &i in rows {
                flash_attention_coop_row(p, KEYS, h, i, &mut twin);
                flash_attention_row(p, h, i, &mut reference);
                let row = (h * p.shape.n_q + i) as usize;
                let (got, want) = (&twin.o[row * d..][..d], &reference.o[row * d..][..d]);
                let diff: f32 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum::<f32>().sqrt();
                let norm: f32 = want.iter().map(|w| w * w).sum::<f32>().sqrt();
                e.o_abs = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(e.o_abs, f32::max);
                e.o_rel = e.o_rel.max(diff / norm);
                e.lse_abs = e.lse_abs.max((twin.lse[row] - reference.lse[row]).abs());
            }
        }
        e
    }

    /// The f16 tolerance, stated: at the benchmark's head layouts, widths 64 and 128, its full, causal
    /// and sliding masks, n = 256 and 1,024, with its seeded inputs (uniform in [-1, 1), scale 1/sqrt(d)),
    /// the twin's O is within [`F16_O_REL`] of the f64 reference's (row norms) and [`F16_O_ABS`] (each
    /// element), its lse within [`F16_LSE_ABS`]: the bound a GPU run of `flash_attention_coop.wgsl` must
    /// meet (`tests/gpu_kernels.rs`). Rows sampled: the first, a middle and the last ones of every head
    /// (`-- --nocapture` prints what was measured).
    #[test]
    fn the_f16_tolerance_at_the_benchmarks_shapes() {
        let mut worst = Errors::default();
        for n in [256u32, 1024] {
            for (h_q, h_kv) in HEAD_LAYOUTS {
                for d in [64u32, 128] {
                    let shape = AttentionShape { h_q, h_kv, n_q: n, n_kv: n, d };
                    let (q, k, v) = bench_inputs(&shape);
                    let scale = 1.0 / (d as f32).sqrt();
                    for mask in [Mask::Full, Mask::Causal, Mask::Sliding { window_tokens: DEFAULT_WINDOW }] {
                        let p = AttentionProblem::new(&q, &k, &v, shape, mask, scale);
                        let e = errors_on_rows(&p, &[0, 1, 17, n / 2, n - 2, n - 1]);
                        println!("n {n} {h_q}/{h_kv} d {d} {}: {e:?}", mask.kind_name());
                        assert!(e.o_rel <= F16_O_REL && e.o_abs <= F16_O_ABS && e.lse_abs <= F16_LSE_ABS, "{e:?}");
                        worst.o_rel = worst.o_rel.max(e.o_rel);
                        worst.lse_abs = worst.lse_abs.max(e.lse_abs);
                    }
                }
            }
        }
        // The check can fail: f16 rounding is visible, far above f32's (about 1e-7 relative).
        assert!(worst.o_rel > 1e-5 && worst.lse_abs > 1e-6, "{worst:?}");
    }
}
