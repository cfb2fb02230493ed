//! Rotary position embeddings (RoPE), as the Hugging Face Llama/Gemma code applies them.
//!
//! A head of `d` dimensions rotates `p = floor(d * fraction / 2)` pairs of dimensions (the partial
//! rotary fraction: 1 for Llama, 0.25 for Gemma 4's global layers); the rest pass through. Pair `j`
//! turns by `pos * w_j / factor` radians (`factor`: linear position scaling, 1 unless a config scales).
//! Two layouts exist:
//! - standard: the first `r = 2p` dimensions form a RoPE of their own, pairs `(j, j + p)` ("rotate
//!   half") with `w_j = theta^(-2j / r)`;
//! - proportional (transformers' `proportional`, Gemma 4): a RoPE over the whole head, pairs
//!   `(j, j + d/2)` with `w_j = theta^(-2j / d)`, of which only the `p` fastest turn.
//!
//! Either way `q_m · k_n` depends on positions only through `m - n`: each pair of `q` turns by
//! `m w_j`, of `k` by `n w_j`, and the dot product of two rotated pairs sees only the difference.

use std::f64::consts::TAU;
use std::ops::Range;

use crate::model::Positional;

/// Rotating dimensions for a head of `d` with the given fraction: `2 * floor(d * fraction / 2)`.
pub fn rotary_dims(d: usize, fraction: f64) -> usize {
    let r = (d as f64 * fraction.clamp(0.0, 1.0)).floor() as usize;
    (r / 2 * 2).min(d)
}

/// `theta^(-2j / r)` for `j < r/2`.
pub fn inverse_frequencies(rotary_dims: usize, theta: f64) -> Vec<f64> {
    let half = rotary_dims / 2;
    (0..half).map(|j| theta.powf(-(2.0 * j as f64) / rotary_dims as f64)).collect()
}

/// How one head turns: which dimensions pair up and how fast each pair rotates.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotary {
    /// The head's width `d`.
    pub head_dim: usize,
    /// Pair `j` is dimensions `(j, j + offset)`: `p` (standard) or `d/2` (proportional).
    pub offset: usize,
    /// Radians per position of each rotating pair `j < p`, fastest first (scaling applied).
    pub inv_freq: Vec<f64>,
}

impl Rotary {
    /// The rotation of a head of `d` under `positional`; `None` when it is not RoPE.
    pub fn of(d: usize, positional: Positional) -> Option<Rotary> {
        let Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor } = positional else {
            return None;
        };
        let pairs = rotary_dims(d, partial_rotary_factor) / 2;
        let (offset, span) = if proportional { (d / 2, d - d % 2) } else { (pairs, 2 * pairs) };
        let factor = if linear_factor > 0.0 && linear_factor.is_finite() { linear_factor } else { 1.0 };
        let inv_freq = (0..pairs).map(|j| theta.powf(-(2.0 * j as f64) / span as f64) / factor).collect();
        Some(Rotary { head_dim: d, offset, inv_freq })
    }

    /// Dimensions that rotate (two per pair).
    pub fn rotary_dims(&self) -> usize {
        2 * self.inv_freq.len()
    }

    /// Tokens for one full turn of each rotating pair, `2π / w_j`, shortest first.
    pub fn wavelengths(&self) -> Vec<f64> {
        self.inv_freq.iter().map(|w| TAU / w).collect()
    }
}

/// Llama 3.1's rotary scaling (`rope_scaling` with `rope_type: "llama3"`): pairs that turn fast
/// (wavelength under `original / high_freq_factor` tokens) keep their frequency, slow ones (over
/// `original / low_freq_factor`) turn `factor` times slower, and those between blend the two by where
/// their wavelength falls, as transformers' `_compute_llama3_parameters` does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Scaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    /// The context length the model was first trained on.
    pub original_max_positions: f64,
}

impl Llama3Scaling {
    /// The scaling, if its numbers make one (all positive and finite, low below high).
    pub fn new(factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_positions: f64) -> Option<Self> {
        let values = [factor, low_freq_factor, high_freq_factor, original_max_positions];
        (values.iter().all(|v| v.is_finite() && *v > 0.0) && low_freq_factor < high_freq_factor).then_some(Self {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_positions,
        })
    }

    pub fn apply(&self, inv_freq: &mut [f64]) {
        let low_freq_wavelength = self.original_max_positions / self.low_freq_factor;
        let high_freq_wavelength = self.original_max_positions / self.high_freq_factor;
        for w in inv_freq {
            let wavelength = TAU / *w;
            if wavelength > low_freq_wavelength {
                *w /= self.factor;
            } else if wavelength >= high_freq_wavelength {
                let smooth = (self.original_max_positions / wavelength - self.low_freq_factor)
                    / (self.high_freq_factor - self.low_freq_factor);
                *w = (1.0 - smooth) * *w / self.factor + smooth * *w;
            }
        }
    }
}

/// The rotation angles of every position, computed once per (length, head width, positional scheme).
#[derive(Clone, Debug, PartialEq)]
pub struct RopeTable {
    /// Rotating dimensions `r` (even, `<= d`).
    pub rotary_dims: usize,
    /// Pair `j` is dimensions `(j, j + offset)`.
    offset: usize,
    /// The first position the table covers.
    first: usize,
    /// `cos` and `sin` of `pos * inv_freq[j]`, `[n, r/2]` each.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

/// `sin` and `cos` of `pos * w` for positions `0..n` and each frequency `w` of `freqs`, `[n, freqs.len()]`
/// each: exact evaluations every 64 positions and the angle-addition recurrence in f64 between them
/// (error below 1e-12 for 32k positions, and 64 times fewer sines than evaluating each; in WebAssembly
/// a sine is a slow software routine).
pub fn angle_table(n: usize, freqs: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let rows = AngleRows::new(0..n, freqs);
    (rows.sin, rows.cos)
}

/// `sin` and `cos` of `pos * w` for the positions of a range and each frequency `w` ([`angle_table`]
/// for a piece of the positions).
pub struct AngleRows {
    first: usize,
    freqs: usize,
    sin: Vec<f64>,
    cos: Vec<f64>,
}

impl AngleRows {
    pub fn new(positions: Range<usize>, freqs: &[f64]) -> Self {
        let first = positions.start;
        let size = positions.len() * freqs.len();
        let (mut sin, mut cos) = (Vec::with_capacity(size), Vec::with_capacity(size));
        for_each_angle(positions, freqs, |s, c| {
            sin.push(s);
            cos.push(c);
        });
        Self { first, freqs: freqs.len(), sin, cos }
    }

    /// `(sin, cos)` of frequency `m` at `pos`, if the range covers it.
    pub fn at(&self, pos: i64, m: usize) -> Option<(f64, f64)> {
        let row = usize::try_from(pos).ok()?.checked_sub(self.first)?;
        let i = row * self.freqs + m;
        Some((*self.sin.get(i)?, *self.cos.get(i)?))
    }
}

/// Calls `emit(sin, cos)` for every position of `positions` and, within it, every frequency of
/// `freqs`, in the order of a `[positions, freqs.len()]` table. Exact every 64th position, with the
/// recurrence between, started from the 64th at or before the range: any piece of a table equals the
/// same rows of the whole table.
fn for_each_angle(positions: Range<usize>, freqs: &[f64], mut emit: impl FnMut(f64, f64)) {
    let steps: Vec<(f64, f64)> = freqs.iter().map(|w| w.sin_cos()).collect();
    let mut now: Vec<(f64, f64)> = vec![(0.0, 1.0); freqs.len()];
    for pos in positions.start / 64 * 64..positions.end {
        let (exact, shown) = (pos % 64 == 0, pos >= positions.start);
        for ((state, &(step_s, step_c)), &w) in now.iter_mut().zip(&steps).zip(freqs) {
            if exact {
                *state = (pos as f64 * w).sin_cos();
            }
            let (s, c) = *state;
            if shown {
                emit(s, c);
            }
            *state = (s * step_c + c * step_s, c * step_c - s * step_s);
        }
    }
}

impl RopeTable {
    /// Angles for positions `0..n` ([`angle_table`]) of a head of `d` under `positional` (no
    /// rotation when it is not RoPE).
    pub fn new(n: usize, d: usize, positional: Positional) -> Self {
        Self::for_positions(0..n, d, positional)
    }

    /// As [`RopeTable::new`], for positions `positions` only (rows of a long input, a piece at a time).
    pub fn for_positions(positions: Range<usize>, d: usize, positional: Positional) -> Self {
        Self::scaled(positions, d, positional, None)
    }

    /// As [`RopeTable::for_positions`], with Llama 3.1's frequency scaling when a checkpoint has it.
    pub fn scaled(positions: Range<usize>, d: usize, positional: Positional, scaling: Option<Llama3Scaling>) -> Self {
        let mut rotary = Rotary::of(d, positional).unwrap_or(Rotary { head_dim: d, offset: 0, inv_freq: Vec::new() });
        if let Some(scaling) = scaling {
            scaling.apply(&mut rotary.inv_freq);
        }
        let size = positions.len() * rotary.inv_freq.len();
        let first = positions.start;
        let (mut sin, mut cos) = (Vec::with_capacity(size), Vec::with_capacity(size));
        // Written as f32 at once: no f64 tables twice the size to narrow afterwards.
        for_each_angle(positions, &rotary.inv_freq, |s, c| {
            sin.push(s as f32);
            cos.push(c as f32);
        });
        Self { rotary_dims: rotary.rotary_dims(), offset: rotary.offset, first, cos, sin }
    }

    /// Pair `j` is dimensions `(j, j + offset)`.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// `[cos, sin]` of every rotating pair at every position covered, `[positions, rotary_dims / 2]`
    /// (what the GPU's `rope.wgsl` turns by).
    pub fn cos_sin(&self) -> impl Iterator<Item = [f32; 2]> + '_ {
        self.cos.iter().zip(&self.sin).map(|(&c, &s)| [c, s])
    }

    /// Positions covered.
    pub fn len(&self) -> usize {
        if self.rotary_dims == 0 { 0 } else { self.cos.len() / (self.rotary_dims / 2) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rotates row `x` (one head's `d` values) as the token at `pos` (a position the table covers).
    pub fn rotate(&self, x: &mut [f32], pos: usize) {
        let half = self.rotary_dims / 2;
        if half == 0 {
            return;
        }
        let at = (pos - self.first) * half;
        let (c, s) = (&self.cos[at..][..half], &self.sin[at..][..half]);
        let off = self.offset;
        for j in 0..half {
            let (a, b) = (x[j], x[j + off]);
            x[j] = a * c[j] - b * s[j];
            x[j + off] = b * c[j] + a * s[j];
        }
    }

    /// Rotates every row of `x` (`[rows, d]`), row `i` at position `pos0 + i`.
    pub fn rotate_rows(&self, x: &mut [f32], d: usize, pos0: usize) {
        for (i, row) in x.chunks_mut(d).enumerate() {
            self.rotate(row, pos0 + i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_scaling_keeps_fast_pairs_slows_slow_ones_and_blends_between() {
        // Llama 3.1's numbers at head width 16, base 500,000: pair j's wavelength is 2π 500000^(j/8).
        let scaling = Llama3Scaling::new(8.0, 1.0, 4.0, 8192.0).unwrap();
        let plain = inverse_frequencies(16, 500_000.0);
        let mut scaled = plain.clone();
        scaling.apply(&mut scaled);
        // Wavelengths 6.3, 32, 167 and 862 tokens: under 8192 / 4 = 2048, kept.
        assert_eq!(&scaled[..4], &plain[..4]);
        // 4443 tokens, between 2048 and 8192: smooth = (8192 / 4443 - 1) / 3 = 0.28128, so the pair keeps
        // (1 - 0.28128) / 8 + 0.28128 = 0.37112 of its frequency.
        assert!((scaled[4] / plain[4] - 0.371_12).abs() < 1e-5, "{}", scaled[4] / plain[4]);
        // 22,900 tokens and slower: over 8192, eight times slower.
        for j in 5..8 {
            assert!((scaled[j] * 8.0 / plain[j] - 1.0).abs() < 1e-12);
        }
        assert_eq!(Llama3Scaling::new(8.0, 4.0, 1.0, 8192.0), None);
        assert_eq!(Llama3Scaling::new(f64::NAN, 1.0, 4.0, 8192.0), None);
    }

    fn rope(theta: f64, fraction: f64) -> Positional {
        Positional::Rope { theta, partial_rotary_factor: fraction, proportional: false, linear_factor: 1.0 }
    }

    #[test]
    fn a_table_in_pieces_of_any_length_equals_the_whole() {
        let whole = RopeTable::new(300, 128, rope(500_000.0, 1.0));
        let mut rows: Vec<f32> = (0..300 * 128).map(|i| (i as f32 * 0.013).sin()).collect();
        let mut pieces = rows.clone();
        whole.rotate_rows(&mut rows, 128, 0);
        // Pieces of 37 rows start between the exact positions (every 64th).
        for start in (0..300).step_by(37) {
            let end = (start + 37).min(300);
            let piece = RopeTable::for_positions(start..end, 128, rope(500_000.0, 1.0));
            assert_eq!(piece.len(), end - start);
            piece.rotate_rows(&mut pieces[start * 128..end * 128], 128, start);
        }
        assert_eq!(rows, pieces);
    }

    #[test]
    fn angle_table_matches_direct_evaluation() {
        let freqs = [1.0, 0.37, 1e-3, 2.5];
        let (sin, cos) = angle_table(5000, &freqs);
        for pos in [0, 1, 63, 64, 65, 1000, 4999] {
            for (j, &w) in freqs.iter().enumerate() {
                let (s, c) = (pos as f64 * w).sin_cos();
                assert!(
                    (sin[pos * 4 + j] - s).abs() < 1e-12 && (cos[pos * 4 + j] - c).abs() < 1e-12,
                    "pos {pos}, w {w}"
                );
            }
        }
    }

    #[test]
    fn dims_and_frequencies_by_hand() {
        assert_eq!(rotary_dims(128, 1.0), 128);
        assert_eq!(rotary_dims(512, 0.25), 128);
        assert_eq!(rotary_dims(6, 0.5), 2); // 3 -> even 2
        // r = 4, theta 100: 100^0 = 1, 100^(-2/4) = 0.1.
        let f = inverse_frequencies(4, 100.0);
        assert!((f[0] - 1.0).abs() < 1e-15 && (f[1] - 0.1).abs() < 1e-15);
    }

    #[test]
    fn rotation_by_hand() {
        // d = 4, theta 100, full rotation: pairs (0,2) turn by pos*1, (1,3) by pos*0.1.
        let t = RopeTable::new(3, 4, rope(100.0, 1.0));
        let mut x = [1.0, 1.0, 0.0, 0.0];
        t.rotate(&mut x, 2);
        assert!((x[0] - 2f32.cos()).abs() < 1e-6 && (x[2] - 2f32.sin()).abs() < 1e-6);
        assert!((x[1] - 0.2f32.cos()).abs() < 1e-6 && (x[3] - 0.2f32.sin()).abs() < 1e-6);
        // Position 0 is the identity.
        let mut y = [0.3, -0.7, 1.1, 2.0];
        t.rotate(&mut y, 0);
        assert_eq!(y, [0.3, -0.7, 1.1, 2.0]);
    }

    #[test]
    fn partial_rotation_leaves_the_tail_and_keeps_norms() {
        let t = RopeTable::new(10, 8, rope(10_000.0, 0.5));
        let mut x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        let before = norm(&x);
        t.rotate(&mut x, 7);
        assert_eq!(&x[4..], &[5.0, 6.0, 7.0, 8.0]);
        assert!((norm(&x) - before).abs() < 1e-4);
    }

    #[test]
    fn scores_depend_on_relative_position_only_and_recurrence_is_exact() {
        let t = RopeTable::new(5000, 16, rope(10_000.0, 1.0));
        let q0: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
        let k0: Vec<f32> = (0..16).map(|i| (i as f32 * 0.91).cos()).collect();
        let dot_at = |m: usize, n: usize| {
            let (mut q, mut k) = (q0.clone(), k0.clone());
            t.rotate(&mut q, m);
            t.rotate(&mut k, n);
            q.iter().zip(&k).map(|(a, b)| a * b).sum::<f32>()
        };
        assert!((dot_at(10, 3) - dot_at(4010, 4003)).abs() < 1e-3);
        // The recurrence agrees with direct evaluation far from a re-seed point.
        let inv = inverse_frequencies(16, 10_000.0);
        let half = 8;
        for pos in [63usize, 127, 4999] {
            for (j, inv_j) in inv.iter().enumerate().take(half) {
                assert!((t.cos[pos * half + j] as f64 - (pos as f64 * inv_j).cos()).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn proportional_rotation_turns_the_fastest_pairs_of_the_whole_head() {
        // Gemma 4's global layers: d = 512, fraction 0.25, theta 1e6, proportional. transformers:
        // rope_angles = int(0.25 * 512 // 2) = 64 pairs at 1e6^(-2j/512); pair j is dims (j, j + 256).
        let p = Positional::Rope { theta: 1e6, partial_rotary_factor: 0.25, proportional: true, linear_factor: 1.0 };
        let r = Rotary::of(512, p).unwrap();
        assert_eq!((r.rotary_dims(), r.offset, r.inv_freq.len()), (128, 256, 64));
        // j = 63: 1e6^(-126/512) = 10^(-6 * 0.24609375) = 10^-1.4765625 = 0.0333793...
        assert!((r.inv_freq[63] - 10f64.powf(-1.4765625)).abs() < 1e-15);
        // The standard layout would spread the same 64 pairs over 1e6^(-2j/128) instead.
        let standard = Rotary::of(512, rope(1e6, 0.25)).unwrap();
        assert_eq!(standard.offset, 64);
        assert!((standard.inv_freq[63] - 1e6f64.powf(-126.0 / 128.0)).abs() < 1e-18);
        // Rotating at position 3 moves dims 0..64 and 256..320 only.
        let t = RopeTable::new(4, 512, p);
        let mut x: Vec<f32> = (0..512).map(|i| 1.0 + i as f32 * 0.01).collect();
        let before = x.clone();
        t.rotate(&mut x, 3);
        let moved: Vec<usize> = (0..512).filter(|&i| x[i] != before[i]).collect();
        let expected: Vec<usize> = (0..64).chain(256..320).collect();
        assert_eq!(moved, expected);
        // Pair 0 turns by 3 radians: (x0, x256) -> (x0 cos 3 - x256 sin 3, x256 cos 3 + x0 sin 3).
        let (a, b) = (before[0], before[256]);
        assert!((x[0] - (a * 3f32.cos() - b * 3f32.sin())).abs() < 1e-5);
        assert!((x[256] - (b * 3f32.cos() + a * 3f32.sin())).abs() < 1e-5);
    }

    #[test]
    fn linear_scaling_stretches_every_wavelength() {
        // Gemma 3's global layers: theta 1e6, factor 8, d = 128. Pair 0 turns 1/8 radian per token, so
        // its wavelength is 8 * 2π = 50.27 tokens; without scaling 2π.
        let scaled =
            Positional::Rope { theta: 1e6, partial_rotary_factor: 1.0, proportional: false, linear_factor: 8.0 };
        let w = Rotary::of(128, scaled).unwrap().wavelengths();
        let plain = Rotary::of(128, rope(1e6, 1.0)).unwrap().wavelengths();
        assert!((w[0] - 8.0 * TAU).abs() < 1e-12 && (plain[0] - TAU).abs() < 1e-12);
        assert!(w.iter().zip(&plain).all(|(a, b)| (a / b - 8.0).abs() < 1e-12));
        assert_eq!(Rotary::of(128, Positional::NoPe), None);
    }
}
