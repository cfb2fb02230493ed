//! Twin of `shaders/kv_quant.wgsl`: a cached K or V replaced, in place, by the values a quantised
//! cache stores (quantise and dequantise in one go: what a kernel dequantising on read sees). Each
//! box of [`QuantPass`] shares one scale. The arithmetic is f32, as the shader's, so that both round
//! the same quotient: a tie broken differently would move a value by a whole step.

use crate::model::kv_quant::{KvLayout, QuantPass, Rounding};

/// Every box of `pass` over `x` (laid out as `layout`) rounded to the scheme's values.
pub fn kv_quant(x: &mut [f32], layout: KvLayout, pass: &QuantPass) {
    for_each_box(x, layout, pass, |values, _| round_group(values, pass.rounding));
}

/// As [`kv_quant`], each box's scale set by the values of its first `scale_tokens` tokens alone: a
/// decode cache whose fp8 scales were set from the prompt as it was packed, the later tokens' values
/// saturating past them (as `kv_pack` keeps the scale of the pack that started the cache). Schemes
/// whose boxes hold one token round as [`kv_quant`] does.
pub fn kv_quant_scaled_by_first(x: &mut [f32], layout: KvLayout, pass: &QuantPass, scale_tokens: u32) {
    for_each_box(x, layout, pass, |values, tokens| match pass.rounding {
        Rounding::Float { mantissa, min_exp, max, scaled: true } => {
            let first = values.iter().zip(tokens).filter(|&(_, &t)| t < scale_tokens);
            let amax = first.fold(0.0f32, |m, (v, _)| m.max(v.abs()));
            let scale = if amax > 0.0 { amax / max } else { 1.0 };
            values.iter().map(|&v| round_float(v / scale, mantissa, min_exp, max) * scale).collect()
        }
        rounding => round_group(values, rounding),
    });
}

/// `round` applied to every box of `pass` (its values, and the token each one belongs to).
fn for_each_box(x: &mut [f32], layout: KvLayout, pass: &QuantPass, mut round: impl FnMut(&[f32], &[u32]) -> Vec<f32>) {
    let [nh, nt, nc] = pass.boxes(&layout);
    let [bh, bt, bc] = pass.boxed.map(|b| b.max(1));
    let tokens = pass.tokens.min(layout.tokens);
    for g in 0..u64::from(nh) * u64::from(nt) * u64::from(nc) {
        let (h, t, c) = (g / u64::from(nt * nc), g / u64::from(nc) % u64::from(nt), g % u64::from(nc));
        let from = [h as u32 * bh, t as u32 * bt, c as u32 * bc];
        let to = [
            from[0].saturating_add(bh).min(layout.heads),
            from[1].saturating_add(bt).min(tokens),
            from[2].saturating_add(bc).min(layout.d),
        ];
        let (at, token): (Vec<usize>, Vec<u32>) = offsets(layout, from, to).unzip();
        let values: Vec<f32> = at.iter().map(|&i| x[i]).collect();
        for (i, v) in at.into_iter().zip(round(&values, &token)) {
            x[i] = v;
        }
    }
}

/// Where the values of the box `from..to` (heads, tokens, channels) are, each with its token.
fn offsets(layout: KvLayout, from: [u32; 3], to: [u32; 3]) -> impl Iterator<Item = (usize, u32)> {
    (from[0]..to[0]).flat_map(move |h| {
        (from[1]..to[1]).flat_map(move |t| {
            (from[2]..to[2]).map(move |c| ((h * layout.head_stride + t * layout.token_stride + c) as usize, t))
        })
    })
}

/// One group's values as the scheme stores them.
pub fn round_group(values: &[f32], rounding: Rounding) -> Vec<f32> {
    let amax = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    match rounding {
        Rounding::Float { mantissa, min_exp, max, scaled } => {
            let scale = if scaled && amax > 0.0 { amax / max } else { 1.0 };
            values.iter().map(|&v| round_float(v / scale, mantissa, min_exp, max) * scale).collect()
        }
        Rounding::Symmetric { levels } => {
            let scale = amax / levels as f32;
            let l = levels as f32;
            let q = |v: f32| if scale > 0.0 { (v / scale).round_ties_even().clamp(-l, l) * scale } else { 0.0 };
            values.iter().map(|&v| q(v)).collect()
        }
        Rounding::Asymmetric { levels } => {
            let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // Stored as f16, as llama.cpp's q4_1 stores its scale and min.
            let scale = round_float((hi - lo) / levels as f32, 10, -14, 65504.0);
            let min = round_float(lo, 10, -14, 65504.0);
            let l = levels as f32;
            let q = |v: f32| {
                if scale > 0.0 { ((v - min) / scale).round_ties_even().clamp(0.0, l) * scale + min } else { min }
            };
            values.iter().map(|&v| q(v)).collect()
        }
    }
}

/// `v` rounded to a float format with `mantissa` fraction bits, smallest normal exponent `min_exp`
/// and largest finite value `max`: to nearest, ties to even, subnormals kept (below 2^min_exp the
/// step stays 2^(min_exp - mantissa)), past `max` saturating to `max` (fp8 caches saturate).
pub fn round_float(v: f32, mantissa: u32, min_exp: i32, max: f32) -> f32 {
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() { v } else { v.clamp(-max, max) };
    }
    let a = v.abs();
    // The binade of |v| from its bits (exact), floored at the smallest normal one.
    let exp = ((a.to_bits() >> 23) as i32 - 127).max(min_exp);
    let step = 2f32.powi(exp - mantissa as i32);
    let r = ((a / step).round_ties_even() * step).min(max);
    r.copysign(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::{Fp8, KvScheme, KvTensor, ScaleScope};

    const E4M3: (u32, i32, f32) = (3, -6, 448.0);
    const E5M2: (u32, i32, f32) = (2, -14, 57344.0);

    fn e4m3(v: f32) -> f32 {
        round_float(v, E4M3.0, E4M3.1, E4M3.2)
    }

    #[test]
    fn e4m3_by_hand() {
        // Between 1 and 2 the step is 2^-3 = 0.125: 1.0625 is a tie between 1 and 1.125 -> even
        // mantissa 1.0; 1.1875 is a tie between 1.125 (odd) and 1.25 -> 1.25.
        assert_eq!(e4m3(1.0625), 1.0);
        assert_eq!(e4m3(1.1875), 1.25);
        assert_eq!(e4m3(1.2), 1.25);
        assert_eq!(e4m3(-3.3), -3.25); // step 0.25 in [2, 4)
        // Largest 448 = 1.75 x 2^8; 460 saturates to 448 instead of rounding to 480 or infinity.
        assert_eq!(e4m3(460.0), 448.0);
        assert_eq!(e4m3(1e6), 448.0);
        // Subnormals: below 2^-6 the step is 2^-9. 3.4 x 2^-9 -> 3 x 2^-9; 2.5 x 2^-9 -> 2 x 2^-9
        // (tie to even); 0.4 x 2^-9 -> 0.
        let s = 2f32.powi(-9);
        assert_eq!(e4m3(3.4 * s), 3.0 * s);
        assert_eq!(e4m3(2.5 * s), 2.0 * s);
        assert_eq!(e4m3(0.4 * s), 0.0);
    }

    #[test]
    fn e5m2_by_hand() {
        let e5m2 = |v| round_float(v, E5M2.0, E5M2.1, E5M2.2);
        // Step 0.25 in [1, 2): 1.125 is a tie between 1 (even) and 1.25 -> 1; 1.375 -> 1.5 (even).
        assert_eq!(e5m2(1.125), 1.0);
        assert_eq!(e5m2(1.375), 1.5);
        assert_eq!(e5m2(60000.0), 57344.0);
        // Smallest subnormal 2^-16: 0.75 x 2^-16 rounds up to it.
        assert_eq!(e5m2(0.75 * 2f32.powi(-16)), 2f32.powi(-16));
    }

    #[test]
    fn f16_matches_the_half_crate() {
        for &v in &[1.0f32, 1.000_488_3, 0.1, -3.3, 65519.0, 70000.0, 1e-7, 6.1e-5, 2.98e-8] {
            let want = half::f16::from_f32(v).to_f32().clamp(-65504.0, 65504.0);
            assert_eq!(round_float(v, 10, -14, 65504.0), want, "{v}");
        }
    }

    #[test]
    fn fp8_scales_by_the_largest_magnitude() {
        // Largest |v| = 896 -> scale 896 / 448 = 2: 896 -> 448 x 2; 3 -> 1.5 -> 1.5 x 2 = 3;
        // 2.3 -> 1.15 -> 1.125 -> 2.25.
        let out =
            round_group(&[896.0, 3.0, -2.3], Rounding::Float { mantissa: 3, min_exp: -6, max: 448.0, scaled: true });
        assert_eq!(out, [896.0, 3.0, -2.25]);
    }

    #[test]
    fn a_scale_set_by_the_first_tokens_saturates_the_later_ones() {
        // One head of width 1, per tensor E4M3. Tokens 0-1 hold 2 and -448: scale 1. Token 2's 1000
        // saturates to 448 (the whole tensor's scale would have been 1000 / 448); its 3.3 rounds to
        // 3.25. Per token (int8) boxes ignore the first tokens.
        let layout = KvLayout { heads: 1, tokens: 4, d: 1, head_stride: 4, token_stride: 1 };
        let fp8 = KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor };
        let mut x = [2.0, -448.0, 1000.0, 3.3];
        kv_quant_scaled_by_first(&mut x, layout, &fp8.pass(KvTensor::K, 4).unwrap(), 2);
        assert_eq!(x, [2.0, -448.0, 448.0, 3.25]);
        let mut whole = [2.0, -448.0, 1000.0, 3.3];
        kv_quant(&mut whole, layout, &fp8.pass(KvTensor::K, 4).unwrap());
        assert_ne!(whole, x);
        let (mut a, mut b) = ([0.3, -1.7, 9.0, 0.01], [0.3, -1.7, 9.0, 0.01]);
        kv_quant_scaled_by_first(&mut a, layout, &KvScheme::Int8.pass(KvTensor::V, 4).unwrap(), 2);
        kv_quant(&mut b, layout, &KvScheme::Int8.pass(KvTensor::V, 4).unwrap());
        assert_eq!(a, b);
    }

    #[test]
    fn int8_absmax_by_hand() {
        // Largest |v| = 127 x 0.5 = 63.5: scale 0.5. 1.3 / 0.5 = 2.6 -> 3 -> 1.5; -0.25 / 0.5 = -0.5
        // -> -0 (tie to even) -> 0.
        let out = round_group(&[63.5, 1.3, -0.25], Rounding::Symmetric { levels: 127 });
        assert_eq!(out, [63.5, 1.5, 0.0]);
        assert_eq!(round_group(&[0.0, 0.0], Rounding::Symmetric { levels: 127 }), [0.0, 0.0]);
    }

    #[test]
    fn int2_asymmetric_by_hand() {
        // min -1, max 2: scale (2 - -1) / 3 = 1 (exact in f16), min -1. 0.4 -> (1.4) -> 1 -> 0;
        // 0.6 -> 1.6 -> 2 -> 1; 1.5 -> 2.5 -> 2 (tie to even) -> 1.
        let out = round_group(&[-1.0, 2.0, 0.4, 0.6, 1.5], Rounding::Asymmetric { levels: 3 });
        assert_eq!(out, [-1.0, 2.0, 0.0, 1.0, 1.0]);
        // The scale is stored as f16: 0.1 / 15 = 0.00666... -> f16 0.006664276; 0.1 itself comes
        // back as 15 of those steps = 0.09996414.
        let out = round_group(&[0.0, 0.1], Rounding::Asymmetric { levels: 15 });
        let step = half::f16::from_f32(0.1 / 15.0).to_f32();
        assert_eq!(out, [0.0, 15.0 * step]);
        // A constant group: scale 0, every value its f16 min.
        assert_eq!(
            round_group(&[0.3, 0.3], Rounding::Asymmetric { levels: 3 }),
            [half::f16::from_f32(0.3).to_f32(); 2]
        );
    }

    #[test]
    fn kivi_leaves_the_recent_tokens_and_rounds_k_per_channel() {
        // One head of width 2, 3 tokens, G = 2, R = 1: K's one whole group is tokens 0-1, per channel.
        // Channel 0 holds 0 and 3, channel 1 holds 1 and 4: scale 1 each, exact; token 2 stays.
        let layout = KvLayout { heads: 1, tokens: 3, d: 2, head_stride: 6, token_stride: 2 };
        let kivi = KvScheme::Kivi { bits: 2, group: 2, recent: 1 };
        let mut k = [0.0, 1.0, 3.0, 4.0, 0.123, 0.456];
        kv_quant(&mut k, layout, &kivi.pass(KvTensor::K, 3).unwrap());
        assert_eq!(k, [0.0, 1.0, 3.0, 4.0, 0.123, 0.456]);
        // Per token instead, token 0 [0, 1] would have rounded 1 to 3 steps of f16(1/3) = 0.99975586.
        let mut per_token = [0.0, 1.0, 3.0, 4.0, 0.123, 0.456];
        kv_quant(&mut per_token, layout, &kivi.pass(KvTensor::V, 3).unwrap());
        assert_eq!(per_token[..2], [0.0, 3.0 * half::f16::from_f32(1.0 / 3.0).to_f32()]);
        // V per token over channel groups of 2: token 0 [0, 0.9] -> scale 0.3 in f16; token 1
        // [3, 6] exact (scale 1); token 2 stays. 0.9 comes back as 3 steps of f16(0.3).
        let mut v = [0.0, 0.9, 3.0, 6.0, 0.123, 0.456];
        kv_quant(&mut v, layout, &kivi.pass(KvTensor::V, 3).unwrap());
        let step = half::f16::from_f32(0.3).to_f32();
        assert_eq!(v, [0.0, 3.0 * step, 3.0, 6.0, 0.123, 0.456]);
    }

    #[test]
    fn int4_groups_follow_the_layout_s_strides() {
        // Two heads of one token, d = 2, token-major ([token, head, d]: head stride 2, token stride 4),
        // one group per head: each head rounds on its own range, so [0, 15] (scale 1) and [0, 30]
        // (scale 2) are exact; one group over all four would have scale 2 and turn 15 into 16 (7.5 -> 8).
        let layout = KvLayout { heads: 2, tokens: 1, d: 2, head_stride: 2, token_stride: 4 };
        let mut x = [0.0, 15.0, 0.0, 30.0];
        kv_quant(&mut x, layout, &KvScheme::IntGroup { bits: 4, group: 2 }.pass(KvTensor::K, 1).unwrap());
        assert_eq!(x, [0.0, 15.0, 0.0, 30.0]);
    }
}
