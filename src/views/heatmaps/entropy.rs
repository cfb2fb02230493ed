//! How spread out a softmax row is, and why attention divides its scores by √d.
//!
//! The entropy of a row of probabilities, in bits (`-Σ p log2 p`), is 0 when one key takes everything
//! and `log2(k)` when `k` visible keys share it evenly. [`RowEntropy`] reads it for a row of the
//! step-through twice: with the `1/√d` scale (the probabilities attention uses) and without it (the
//! softmax of the raw scores). [`entropy_sweep`] shows the trend on synthetic rows: for random q and k
//! with unit-variance entries a raw score has spread √d, so without the scale rows get sharper as heads
//! get wider, while scaled rows keep the same spread whatever d.

use std::sync::OnceLock;

use super::step_through::{Steps, softmax};
use crate::attention::inputs::SplitMix64;

/// Entropy of a row of probabilities in bits; zero probabilities add nothing (`0 · log 0 = 0`).
pub fn entropy_bits(probs: &[f64]) -> f64 {
    let bits = -probs.iter().filter(|&&p| p > 0.0).map(|&p| p * p.log2()).sum::<f64>();
    // A single key gives -(1 · log2 1) = -0.0, which would print as "-0.000".
    if bits > 0.0 { bits } else { 0.0 }
}

/// One query row of the step-through: how many keys it sees and how spread its softmax is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowEntropy {
    pub visible_keys: usize,
    /// Entropy of the probabilities attention uses (scores scaled by `1/√d`), bits.
    pub scaled_bits: f64,
    /// Entropy of the softmax of the raw scores `q·k` (no scale), bits.
    pub unscaled_bits: f64,
    /// The largest entropy the row could have, `log2(visible keys)`: every visible key equal.
    pub max_bits: f64,
}

impl RowEntropy {
    /// Row `row` of `steps`, or `None` past the last row.
    pub fn of(steps: &Steps, row: usize) -> Option<Self> {
        if row >= steps.n_q {
            return None;
        }
        let n = steps.n_kv;
        let masked = &steps.masked[row * n..][..n];
        let raw: Vec<f64> = masked
            .iter()
            .zip(&steps.scores[row * n..][..n])
            .map(|(m, &s)| if m.is_finite() { s } else { f64::NEG_INFINITY })
            .collect();
        let visible_keys = masked.iter().filter(|m| m.is_finite()).count();
        Some(Self {
            visible_keys,
            scaled_bits: entropy_bits(&steps.probs[row * n..][..n]),
            unscaled_bits: entropy_bits(&softmax(&raw)),
            max_bits: if visible_keys == 0 { 0.0 } else { (visible_keys as f64).log2() },
        })
    }
}

/// Head widths of the synthetic sweep.
pub const SWEEP_DIMS: [u32; 5] = [16, 32, 64, 128, 256];
/// Keys in each synthetic row (a row's largest entropy is `log2` of this: 6 bits).
pub const SWEEP_KEYS: usize = 64;
/// Synthetic rows averaged per head width.
pub const SWEEP_ROWS: usize = 128;
/// The sweep's fixed seed: the table is the same for every page.
const SWEEP_SEED: u64 = 0x5CA1_E000;

/// One head width of the sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    pub d: u32,
    /// √d: the standard deviation of `q·k` when q and k have independent unit-variance entries.
    pub expected_spread: f64,
    /// The standard deviation of the raw scores actually drawn.
    pub measured_spread: f64,
    /// Mean entropy of the rows with the `1/√d` scale, bits.
    pub scaled_bits: f64,
    /// Mean entropy of the rows without it, bits.
    pub unscaled_bits: f64,
}

/// The sweep over [`SWEEP_DIMS`] on seeded random q and k (synthetic: entries uniform in
/// `[-√3, √3)`, which has variance 1), computed once.
pub fn entropy_sweep() -> &'static [SweepPoint] {
    static SWEEP: OnceLock<Vec<SweepPoint>> = OnceLock::new();
    SWEEP.get_or_init(|| SWEEP_DIMS.iter().map(|&d| sweep_point(d, SWEEP_SEED ^ u64::from(d))).collect())
}

fn sweep_point(d: u32, seed: u64) -> SweepPoint {
    let mut rng = SplitMix64::new(seed);
    let mut unit = move || f64::from(rng.next_signed_unit()) * 3f64.sqrt();
    let (dim, scale) = (d as usize, 1.0 / f64::from(d).sqrt());
    let (mut sum_sq, mut scaled_bits, mut unscaled_bits) = (0.0, 0.0, 0.0);
    for _ in 0..SWEEP_ROWS {
        let q: Vec<f64> = (0..dim).map(|_| unit()).collect();
        let scores: Vec<f64> = (0..SWEEP_KEYS).map(|_| q.iter().map(|&a| a * unit()).sum()).collect();
        sum_sq += scores.iter().map(|s| s * s).sum::<f64>();
        let scaled: Vec<f64> = scores.iter().map(|s| s * scale).collect();
        scaled_bits += entropy_bits(&softmax(&scaled));
        unscaled_bits += entropy_bits(&softmax(&scores));
    }
    let rows = SWEEP_ROWS as f64;
    SweepPoint {
        d,
        expected_spread: f64::from(d).sqrt(),
        // Around the known mean 0.
        measured_spread: (sum_sq / (rows * SWEEP_KEYS as f64)).sqrt(),
        scaled_bits: scaled_bits / rows,
        unscaled_bits: unscaled_bits / rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{AttentionProblem, AttentionShape};
    use crate::model::Mask;
    use crate::views::heatmaps::step_through::step_through;

    #[test]
    fn entropy_by_hand() {
        // Two equal keys: one bit. Four equal keys: two bits. One key takes all: zero.
        assert_eq!(entropy_bits(&[0.5, 0.5]), 1.0);
        assert_eq!(entropy_bits(&[0.25; 4]), 2.0);
        assert_eq!(entropy_bits(&[1.0, 0.0, 0.0]), 0.0);
        assert!(entropy_bits(&[1.0]).is_sign_positive(), "no negative zero to print");
        // (1/2, 1/4, 1/4): 1/2 · 1 + 2 · 1/4 · 2 = 1.5 bits.
        assert_eq!(entropy_bits(&[0.5, 0.25, 0.25]), 1.5);
    }

    #[test]
    fn a_three_key_row_with_and_without_the_scale() {
        // d = 4, one query q = (1, 1, 1, 1) over keys k0 = 0, k1 = (½, ½, ½, ½), k2 = (1, 1, 1, 1) with
        // no mask: raw scores (0, 2, 4), scaled by 1/√4 = ½: (0, 1, 2).
        let q = [1.0f32; 4];
        let k = [0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0];
        let shape = AttentionShape { h_q: 1, h_kv: 1, n_q: 1, n_kv: 3, d: 4 };
        let steps = step_through(&AttentionProblem::new(&q, &k, &k, shape, Mask::Full, 0.5));
        let row = RowEntropy::of(&steps, 0).unwrap();
        // Scaled: p = (1, e, e²) / (1 + e + e²) = (0.0900306, 0.2447285, 0.6652410);
        // H = -Σ p log2 p = 0.31272 + 0.49698 + 0.39120 = 1.20089 bits.
        assert!((row.scaled_bits - 1.200_893).abs() < 1e-5, "{}", row.scaled_bits);
        // Unscaled: p = (1, e², e⁴) / (1 + e² + e⁴) = (0.0158762, 0.1173104, 0.8668133);
        // H = 0.09489 + 0.36268 + 0.17874 = 0.63631 bits: sharper without the scale.
        assert!((row.unscaled_bits - 0.636_311).abs() < 1e-5, "{}", row.unscaled_bits);
        assert_eq!((row.visible_keys, row.max_bits), (3, 3f64.log2()));
        assert_eq!(RowEntropy::of(&steps, 1), None);
    }

    #[test]
    fn masked_keys_count_neither_in_the_entropy_nor_its_maximum() {
        // Causal, two tokens, d = 1: row 0 sees one key (entropy 0 of max 0); row 1 sees two keys with
        // equal scores (q·k = 0 for both): exactly one bit, scaled or not.
        let (q, k) = ([1.0f32, 0.0], [0.0f32, 0.0]);
        let shape = AttentionShape::square(1, 2, 1);
        let steps = step_through(&AttentionProblem::new(&q, &k, &k, shape, Mask::Causal, 1.0));
        let first = RowEntropy::of(&steps, 0).unwrap();
        assert_eq!((first.visible_keys, first.max_bits, first.scaled_bits), (1, 0.0, 0.0));
        let second = RowEntropy::of(&steps, 1).unwrap();
        assert_eq!(
            (second.visible_keys, second.max_bits, second.scaled_bits, second.unscaled_bits),
            (2, 1.0, 1.0, 1.0)
        );
    }

    #[test]
    fn the_sweep_shows_raw_scores_spreading_as_sqrt_d_and_scaled_rows_staying_put() {
        let sweep = entropy_sweep();
        assert_eq!(sweep.iter().map(|p| p.d).collect::<Vec<_>>(), SWEEP_DIMS);
        let max_bits = (SWEEP_KEYS as f64).log2();
        for p in sweep {
            assert_eq!(p.expected_spread, f64::from(p.d).sqrt());
            // 8,192 draws: the measured spread is within a few percent of √d.
            assert!((p.measured_spread / p.expected_spread - 1.0).abs() < 0.05, "{p:?}");
            assert!(p.unscaled_bits < p.scaled_bits && p.scaled_bits < max_bits, "{p:?}");
            // Scores of spread 1 over 64 keys: about 5.3 bits of the 6, whatever d.
            assert!((p.scaled_bits - 5.3).abs() < 0.2, "{p:?}");
        }
        // Without the scale, every doubling of d makes the rows sharper.
        assert!(sweep.windows(2).all(|w| w[1].unscaled_bits < w[0].unscaled_bits), "{sweep:?}");
        assert!(sweep[4].unscaled_bits < 1.5, "d = 256: nearly one key per row, {:?}", sweep[4]);
        assert_eq!(entropy_sweep(), sweep, "seeded: the same every time");
    }
}
