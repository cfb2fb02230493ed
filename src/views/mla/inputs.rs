//! The MLA view's seeded synthetic layer: one cached latent and RoPE key per token, each head's
//! query parts and up-projections. Not trained weights: uniform values from the link's seed, in
//! the layer's real widths. The down-projections that make the latent from the hidden state are
//! left out: both forms start from the same cache, and differ only after it.

use super::setup::MlaSizes;
use crate::attention::inputs::SplitMix64;

/// One layer's inputs for `heads` query heads over `n` tokens (f32, as the GPU reads them).
#[derive(Clone, Debug, PartialEq)]
pub struct MlaInputs {
    pub sizes: MlaSizes,
    pub n: usize,
    pub heads: usize,
    /// The cached latent c, `[n, latent]`.
    pub latent: Vec<f32>,
    /// The shared RoPE key before rotation, `[n, rope]`.
    pub k_rope: Vec<f32>,
    /// Each head's query part that meets the decompressed key, `[heads, n, nope]`.
    pub q_nope: Vec<f32>,
    /// Each head's query part that meets the RoPE key, before rotation, `[heads, n, rope]`.
    pub q_rope: Vec<f32>,
    /// Each head's key up-projection `W_UK`, `[heads, nope, latent]` (`k_nope = W_UK c`).
    pub w_uk: Vec<f32>,
    /// Each head's value up-projection `W_UV`, `[heads, value, latent]` (`v = W_UV c`).
    pub w_uv: Vec<f32>,
}

/// `len` uniform values in `[-amplitude, amplitude)` from its own stream of the seed.
fn seeded(len: usize, seed: u64, stream: u64, amplitude: f32) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..len).map(|_| rng.next_signed_unit() * amplitude).collect()
}

impl MlaInputs {
    /// Seeded inputs. Up-projections are scaled by √(3 / latent), so a decompressed key's values
    /// vary about as much as the latent's; queries by 4, so rows are neither flat nor one-hot.
    pub fn seeded(sizes: MlaSizes, n: usize, heads: usize, seed: u64) -> Self {
        let (r, dr, dn, dv) = (sizes.latent as usize, sizes.rope as usize, sizes.nope as usize, sizes.value as usize);
        let w_amp = (3.0 / r.max(1) as f32).sqrt();
        Self {
            sizes,
            n,
            heads,
            latent: seeded(n * r, seed, 1, 1.0),
            k_rope: seeded(n * dr, seed, 2, 1.0),
            q_nope: seeded(heads * n * dn, seed, 3, 4.0),
            q_rope: seeded(heads * n * dr, seed, 4, 4.0),
            w_uk: seeded(heads * dn * r, seed, 5, w_amp),
            w_uv: seeded(heads * dv * r, seed, 6, w_amp),
        }
    }
}

/// Rotates `x` (a vector of even width w) as RoPE does at position `pos`: pair `(j, j + w/2)` turns
/// by `pos · theta^(-2j/w)` (the rotate-half layout of Llama and DeepSeek's code).
pub fn rotate(x: &mut [f64], pos: usize, theta: f64) {
    let half = x.len() / 2;
    for j in 0..half {
        let angle = pos as f64 * theta.powf(-2.0 * j as f64 / x.len() as f64);
        let (s, c) = angle.sin_cos();
        let (a, b) = (x[j], x[j + half]);
        x[j] = a * c - b * s;
        x[j + half] = b * c + a * s;
    }
}

/// [`rotate`] of f32 values, computed in f64.
pub fn rotate_f32(x: &mut [f32], pos: usize, theta: f64) {
    let mut wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    rotate(&mut wide, pos, theta);
    for (out, v) in x.iter_mut().zip(wide) {
        *out = v as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Mla;

    #[test]
    fn rope_by_hand_and_relative_positions() {
        // Width 2, theta irrelevant for pair 0 (exponent 0): position 1 turns by 1 radian.
        let mut x = [1.0, 0.0];
        rotate(&mut x, 1, 10_000.0);
        assert!((x[0] - 1f64.cos()).abs() < 1e-15 && (x[1] - 1f64.sin()).abs() < 1e-15);
        // Rotated dot products depend only on the distance: (R_5 a)·(R_2 b) = (R_3 a)·b.
        let (a, b) = ([0.3, -1.2, 0.7, 0.4], [1.1, 0.2, -0.5, 0.9]);
        let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
        let (mut a5, mut b2, mut a3) = (a, b, a);
        rotate(&mut a5, 5, 100.0);
        rotate(&mut b2, 2, 100.0);
        rotate(&mut a3, 3, 100.0);
        assert!((dot(&a5, &b2) - dot(&a3, &b)).abs() < 1e-12);
    }

    #[test]
    fn seeded_inputs_have_the_layers_shapes_and_repeat() {
        let sizes = MlaSizes::of(128, Mla::DEEPSEEK, 1e4);
        let a = MlaInputs::seeded(sizes, 3, 2, 7);
        assert_eq!((a.latent.len(), a.k_rope.len()), (3 * 512, 3 * 64));
        assert_eq!((a.q_nope.len(), a.q_rope.len()), (2 * 3 * 128, 2 * 3 * 64));
        assert_eq!((a.w_uk.len(), a.w_uv.len()), (2 * 128 * 512, 2 * 128 * 512));
        assert_eq!(a, MlaInputs::seeded(sizes, 3, 2, 7));
        assert_ne!(a.latent, MlaInputs::seeded(sizes, 3, 2, 8).latent);
    }
}
