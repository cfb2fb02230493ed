//! Twin of `shaders/kv_pack.wgsl`: tokens' K (or V) vectors quantised into a packed cache, laid out
//! as [`PackedLayout`] says (codes in `u32` words, then the groups' scales; fp8's scale in the
//! cache's tail, set by the pack that starts the cache), one vector at a time.
//! The values a packed vector decodes to are those `cpu::kv_quant` rounds the same vector to: the
//! same f32 arithmetic, the codes kept instead of multiplied back.

use crate::cpu::kv_quant::round_float;
use crate::model::kv_packed::{KiviCache, PackedLayout, Packing};
use crate::model::kv_quant::KvTensor;

/// Where one launch's vectors come from and go: `x` holds `[heads, tokens, d]`; token `t` of head
/// `h` goes to row `start + t` of the head's `capacity` rows of the cache (`[heads, capacity, words]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackRows {
    pub heads: u32,
    pub tokens: u32,
    pub capacity: u32,
    pub start: u32,
}

impl PackRows {
    /// Why `x` of `x_len` floats and a cache of `cache_words` words cannot take this launch, if not.
    pub fn check(&self, layout: &PackedLayout, x_len: u64, cache_words: u64) -> Result<(), String> {
        let PackRows { heads, tokens, capacity, start } = *self;
        let vectors = u64::from(heads) * u64::from(tokens);
        let cache = layout.cache_words(heads, capacity);
        let fits = u64::from(start) + u64::from(tokens) <= u64::from(capacity);
        if !fits || vectors * u64::from(layout.d) > x_len || cache > cache_words || vectors > u64::from(u32::MAX) {
            return Err(format!(
                "kv_pack: {heads} heads x {tokens} tokens of {} values at row {start} of {capacity} do not fit \
                 {x_len} floats and a cache of {cache_words} words",
                layout.d
            ));
        }
        Ok(())
    }
}

/// Every vector of `x` packed into its rows of `packed` (and, for fp8 at row 0, the tail's scales
/// set from `x` first).
pub fn kv_pack(x: &[f32], packed: &mut [u32], rows: PackRows, layout: PackedLayout) -> Result<(), String> {
    rows.check(&layout, x.len() as u64, packed.len() as u64)?;
    let (d, words) = (layout.d as usize, layout.words() as usize);
    let tail = layout.tail_at(rows.heads, rows.capacity) as usize;
    let per_head = rows.tokens as usize * d;
    if rows.start == 0 && layout.tail_words(rows.heads) > 0 {
        for slot in 0..layout.tail_words(rows.heads) as usize {
            let values = if layout.tail_words(rows.heads) == 1 {
                &x[..rows.heads as usize * per_head]
            } else {
                &x[slot * per_head..(slot + 1) * per_head]
            };
            packed[tail + slot] = fp8_scale(values, &layout);
        }
    }
    for h in 0..rows.heads as usize {
        let shared =
            if layout.tail_words(rows.heads) > 0 { packed[tail + layout.tail_slot(h as u32) as usize] } else { 0 };
        for t in 0..rows.tokens as usize {
            let src = (h * rows.tokens as usize + t) * d;
            let dst = (h * rows.capacity as usize + rows.start as usize + t) * words;
            packed[dst..dst + words].copy_from_slice(&pack_vector(&x[src..src + d], &layout, shared));
        }
    }
    Ok(())
}

/// fp8's scale word for `values`: largest magnitude / the format's largest value (1 when all are
/// zero), as `cpu::kv_quant` scales the same values.
fn fp8_scale(values: &[f32], layout: &PackedLayout) -> u32 {
    let max = layout.fp8_format().map_or(1.0, |(_, _, max)| max);
    let amax = values.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    (if amax > 0.0 { amax / max } else { 1.0 }).to_bits()
}

/// One vector's words: its scales first (each group's codes are taken against the scale as stored),
/// then its codes. `shared` is the tail's scale word that covers it (fp8; ignored otherwise).
pub fn pack_vector(values: &[f32], layout: &PackedLayout, shared: u32) -> Vec<u32> {
    let mut words = vec![0u32; layout.words() as usize];
    let code_words = layout.code_words() as usize;
    for (g, group) in values.chunks(layout.group().max(1) as usize).enumerate().take(layout.scale_words() as usize) {
        words[code_words + g] = scale_word(group, layout);
    }
    for (c, &v) in values.iter().enumerate() {
        let (word, shift) = layout.code_at(c as u32);
        let scale = layout.scale_at(c as u32).map_or(shared, |s| words[s as usize]);
        words[word as usize] |= code(v, scale, layout) << shift;
    }
    words
}

/// A group's scale word: int8's f32 scale (largest magnitude / 127); a grouped scheme's (and KIVI's
/// keys', over a block's tokens) f16 scale ((max - min) / levels) in the low half and f16 min in the
/// high half.
fn scale_word(group: &[f32], layout: &PackedLayout) -> u32 {
    let l = layout.levels() as f32;
    match layout.packing {
        Packing::F16 | Packing::Fp8 { .. } => 0,
        Packing::Int8 => (group.iter().fold(0.0f32, |m, v| m.max(v.abs())) / l).to_bits(),
        Packing::Grouped { .. } | Packing::ChannelBlocks { .. } => {
            let lo = group.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            f16_bits(round_f16((hi - lo) / l)) | (f16_bits(round_f16(lo)) << 16)
        }
    }
}

/// `v`'s code, against its group's scale word, in the code's own bits.
fn code(v: f32, scale_word: u32, layout: &PackedLayout) -> u32 {
    let l = layout.levels() as f32;
    match layout.packing {
        Packing::F16 => f16_bits(round_f16(v)),
        Packing::Int8 => {
            let scale = f32::from_bits(scale_word);
            let q = if scale > 0.0 { (v / scale).round_ties_even().clamp(-l, l) } else { 0.0 };
            (q as i32 as u32) & 0xff
        }
        Packing::Grouped { .. } | Packing::ChannelBlocks { .. } => {
            let (scale, min) = (f16_value(scale_word & 0xffff), f16_value(scale_word >> 16));
            if scale > 0.0 { ((v - min) / scale).round_ties_even().clamp(0.0, l) as u32 } else { 0 }
        }
        Packing::Fp8 { .. } => {
            let (mantissa, min_exp, max) = layout.fp8_format().unwrap_or((3, -6, 448.0));
            fp8_bits(round_float(v / f32::from_bits(scale_word), mantissa, min_exp, max), mantissa, min_exp)
        }
    }
}

/// KIVI's cache of `tensor` for a pass whose whole text is `x` (`[heads, tokens, d]`), laid out as
/// [`KiviCache`] says: K's blocks (each token's codes against its channel's scale word over the
/// block), V's packed vectors, then each head's f32 ring. The tokens of `x` joining an empty cache.
pub fn kivi_pack(x: &[f32], heads: u32, kivi: &KiviCache, tensor: KvTensor) -> Result<Vec<u32>, String> {
    let mut out = vec![0u32; kivi.words(tensor, heads) as usize];
    kivi_append(&mut out, x, heads, kivi, tensor)?;
    Ok(out)
}

/// The tokens of `new` (`[heads, n, d]`) joining KIVI's cache of `tensor`, `kivi` saying the cache
/// after them (`kivi.tokens - n` before): first the tokens this leaves the recent window quantised
/// (K's whole blocks, V's tokens; their values from the ring or `new`), then the new tokens still
/// waiting written to their ring rows. The two phases are `kv_pack.wgsl`'s two launches: a ring row
/// is read before a newer token takes it.
pub fn kivi_append(
    cache: &mut [u32],
    new: &[f32],
    heads: u32,
    kivi: &KiviCache,
    tensor: KvTensor,
) -> Result<(), String> {
    let d = kivi.d as usize;
    let n = new.len() / (heads as usize * d).max(1);
    let fits = n <= kivi.tokens as usize && kivi.tokens <= kivi.capacity && new.len() == heads as usize * n * d;
    if !fits || (cache.len() as u64) < kivi.words(tensor, heads) {
        return Err(format!(
            "kivi_pack: {heads} heads of {} values, {} floats, do not fit a cache of {} tokens in {} words",
            kivi.d,
            new.len(),
            kivi.tokens,
            cache.len()
        ));
    }
    let (end, start) = (kivi.tokens, kivi.tokens - n as u32);
    let before = kivi.holding(start);
    let (quantised, waiting) =
        (before.packed_tokens(tensor)..kivi.packed_tokens(tensor), start.max(kivi.packed_tokens(tensor))..end);
    let new_row = |h: u32, t: u32| &new[(h as usize * n + (t - start) as usize) * d..][..d];
    for h in 0..heads {
        // The tokens quantised now, read before anything is written (older ones from the ring).
        let rows: Vec<Vec<f32>> = quantised
            .clone()
            .map(|t| match t >= start {
                true => new_row(h, t).to_vec(),
                false => {
                    let at = kivi.f32_row_at(tensor, heads, h, t) as usize;
                    cache[at..at + d].iter().map(|&w| f32::from_bits(w)).collect()
                }
            })
            .collect();
        let row = |t: u32| rows[(t - quantised.start) as usize].as_slice();
        match tensor {
            KvTensor::K => pack_key_blocks(cache, kivi, h, quantised.clone(), row),
            KvTensor::V => {
                let layout = kivi.layout(tensor);
                for t in quantised.clone() {
                    let at = kivi.value_at(h, t) as usize;
                    cache[at..][..layout.words() as usize].copy_from_slice(&pack_vector(row(t), &layout, 0));
                }
            }
        }
        for t in waiting.clone() {
            let at = kivi.f32_row_at(tensor, heads, h, t) as usize;
            for (word, v) in cache[at..at + d].iter_mut().zip(new_row(h, t)) {
                *word = v.to_bits();
            }
        }
    }
    Ok(())
}

/// Head `h`'s key blocks over `tokens` (whole blocks) packed: each block's scale word a channel
/// (over its tokens), then each token's codes against them.
fn pack_key_blocks<'a>(
    out: &mut [u32],
    kivi: &KiviCache,
    h: u32,
    tokens: std::ops::Range<u32>,
    row: impl Fn(u32) -> &'a [f32],
) {
    let layout = &kivi.layout(KvTensor::K);
    let (block, code_words, d) = (layout.block_tokens(), layout.code_words() as usize, layout.d as usize);
    for b in tokens.start / block..tokens.end / block {
        let base = kivi.key_block_at(h, b) as usize;
        let scales_at = base + block as usize * code_words;
        for c in 0..d {
            let channel: Vec<f32> = (b * block..(b + 1) * block).map(|t| row(t)[c]).collect();
            out[scales_at + c] = scale_word(&channel, layout);
        }
        for j in 0..block {
            let codes = base + j as usize * code_words;
            out[codes..codes + code_words].fill(0);
            for (c, &v) in row(b * block + j).iter().enumerate() {
                let (word, shift) = layout.code_at(c as u32);
                out[codes + word as usize] |= code(v, out[scales_at + c], layout) << shift;
            }
        }
    }
}

/// KIVI's cache of `tensor` decoded, as the attention kernel dequantises it: `[heads, tokens, d]`.
pub fn kivi_unpack(cache: &[u32], heads: u32, kivi: &KiviCache, tensor: KvTensor) -> Vec<f32> {
    let layout = kivi.layout(tensor);
    let (d, packed) = (kivi.d as usize, kivi.packed_tokens(tensor));
    let (block, code_words) = (layout.block_tokens(), layout.code_words() as usize);
    let mut out = Vec::with_capacity(heads as usize * kivi.tokens as usize * d);
    for h in 0..heads {
        for t in 0..packed {
            out.extend((0..d).map(|c| {
                let (word, shift) = layout.code_at(c as u32);
                let (at, scale_at) = match tensor {
                    KvTensor::K => {
                        let base = kivi.key_block_at(h, t / block) as usize;
                        (base + (t % block) as usize * code_words, base + block as usize * code_words + c)
                    }
                    KvTensor::V => {
                        let base = kivi.value_at(h, t) as usize;
                        (base, base + layout.scale_at(c as u32).unwrap_or(0) as usize)
                    }
                };
                dequantise(cache[at + word as usize] >> shift, cache[scale_at], &layout)
            }));
        }
        for t in packed..kivi.tokens {
            let at = kivi.f32_row_at(tensor, heads, h, t) as usize;
            out.extend(cache[at..at + d].iter().map(|&w| f32::from_bits(w)));
        }
    }
    out
}

/// A packed vector's values, as the attention kernel dequantises them (`shared`: the tail's scale word
/// that covers it, for fp8).
pub fn unpack_vector(words: &[u32], layout: &PackedLayout, shared: u32) -> Vec<f32> {
    (0..layout.d)
        .map(|c| {
            let (word, shift) = layout.code_at(c);
            let scale = layout.scale_at(c).map_or(shared, |s| words[s as usize]);
            dequantise(words[word as usize] >> shift, scale, layout)
        })
        .collect()
}

/// Rows `0..rows` of each of `heads` heads of a packed cache of `capacity` rows, decoded (fp8 with its
/// head's scale from the tail): `[heads, rows, d]`.
pub fn unpack_rows(cache: &[u32], layout: &PackedLayout, heads: u32, capacity: u32, rows: u32) -> Vec<f32> {
    let words = layout.words() as usize;
    let tail = layout.tail_at(heads, capacity) as usize;
    let mut out = Vec::with_capacity(heads as usize * rows as usize * layout.d as usize);
    for h in 0..heads {
        let shared = if layout.tail_words(heads) > 0 { cache[tail + layout.tail_slot(h) as usize] } else { 0 };
        for row in 0..rows as usize {
            let at = (h as usize * capacity as usize + row) * words;
            out.extend(unpack_vector(&cache[at..at + words], layout, shared));
        }
    }
    out
}

/// One value from its code (in the low bits of `code`, higher bits ignored) and its scale word.
pub fn dequantise(code: u32, scale_word: u32, layout: &PackedLayout) -> f32 {
    match layout.packing {
        Packing::F16 => f16_value(code & 0xffff),
        Packing::Int8 => f32::from((code & 0xff) as u8 as i8) * f32::from_bits(scale_word),
        Packing::Grouped { bits, .. } | Packing::ChannelBlocks { bits, .. } => {
            let q = code & ((1 << bits) - 1);
            q as f32 * f16_value(scale_word & 0xffff) + f16_value(scale_word >> 16)
        }
        Packing::Fp8 { .. } => {
            let (mantissa, min_exp, _) = layout.fp8_format().unwrap_or((3, -6, 448.0));
            fp8_value(code & 0xff, mantissa, min_exp) * f32::from_bits(scale_word)
        }
    }
}

/// The fp8 bits of `r`, a value the format (`mantissa` fraction bits, smallest normal exponent
/// `min_exp`) holds exactly, by integer arithmetic as the shader does it; the sign is bit 7.
pub fn fp8_bits(r: f32, mantissa: u32, min_exp: i32) -> u32 {
    let a = r.abs();
    let sign = if r < 0.0 { 0x80 } else { 0 };
    if a < 2f32.powi(min_exp) {
        // A subnormal: a whole number of 2^(min_exp - mantissa).
        return sign | (a * 2f32.powi(mantissa as i32 - min_exp)) as u32;
    }
    let bits = a.to_bits();
    let exponent = ((bits >> 23) as i32 - 127 - min_exp + 1) as u32;
    sign | (exponent << mantissa) | ((bits & 0x7f_ffff) >> (23 - mantissa))
}

/// The value of fp8 bits `b` (the low 8 bits) in the format of [`fp8_bits`].
pub fn fp8_value(b: u32, mantissa: u32, min_exp: i32) -> f32 {
    let (e, m) = ((b & 0x7f) >> mantissa, b & ((1 << mantissa) - 1));
    let a = if e == 0 {
        m as f32 * 2f32.powi(min_exp - mantissa as i32)
    } else {
        f32::from_bits((((e as i32 - 1 + min_exp + 127) as u32) << 23) | (m << (23 - mantissa)))
    };
    if b & 0x80 != 0 { -a } else { a }
}

fn round_f16(v: f32) -> f32 {
    round_float(v, 10, -14, 65504.0)
}

/// The f16 bits of `r`, a value f16 holds exactly (finite, at most 65504 in magnitude), by integer
/// arithmetic as the shader does it (no conversion instruction whose rounding or subnormals vary).
pub fn f16_bits(r: f32) -> u32 {
    let a = r.abs();
    let sign = if r < 0.0 { 0x8000 } else { 0 };
    if a < 2f32.powi(-14) {
        // A subnormal f16: a whole number of 2^-24.
        return sign | (a * 2f32.powi(24)) as u32;
    }
    let bits = a.to_bits();
    sign | (((bits >> 23) - 112) << 10) | ((bits >> 13) & 0x3ff)
}

/// The value of f16 bits `h` (the low 16 bits).
pub fn f16_value(h: u32) -> f32 {
    let (e, m) = ((h >> 10) & 0x1f, h & 0x3ff);
    let a = if e == 0 { m as f32 * 2f32.powi(-24) } else { f32::from_bits(((e + 112) << 23) | (m << 13)) };
    if h & 0x8000 != 0 { -a } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kv_quant::{kv_quant, round_group};
    use crate::model::kv_quant::{Fp8, KvLayout, KvScheme, ScaleScope};

    fn layout(scheme: KvScheme, d: u32) -> PackedLayout {
        PackedLayout::of(scheme, d).unwrap()
    }

    #[test]
    fn f16_bits_match_the_half_crate_both_ways() {
        for &v in &[1.0f32, -1.000_976_6, 0.1, 65504.0, -65504.0, 6.103_515_6e-5, 5.960_464_5e-8, 3.0e-6, 0.0] {
            let r = round_f16(v);
            let want = half::f16::from_f32(r).to_bits();
            assert_eq!(f16_bits(r), u32::from(want), "{v}");
            assert_eq!(f16_value(u32::from(want)), r, "{v}");
        }
    }

    #[test]
    fn int4_g4_by_hand() {
        // One group of 4: min 0, max 3 -> scale 3 / 15 = 0.2 (f16 0.19995117), min 0. 1.0 / 0.19995117
        // = 5.0012 -> code 5; 3.0 -> 15.003 -> 15; 0.5 -> 2.5006 -> 3.
        let l = layout(KvScheme::IntGroup { bits: 4, group: 4 }, 4);
        let words = pack_vector(&[0.0, 1.0, 3.0, 0.5], &l, 0);
        let scale = half::f16::from_f32(0.2);
        assert_eq!(words, [0x3f50, u32::from(scale.to_bits())]);
        let step = scale.to_f32();
        assert_eq!(unpack_vector(&words, &l, 0), [0.0, 5.0 * step, 15.0 * step, 3.0 * step]);
    }

    #[test]
    fn int8_by_hand() {
        // Largest 63.5: scale 0.5. Codes 127, 3 (1.3 / 0.5 = 2.6), -2 (-1.0 / 0.5), 0: bytes 7f 03 fe 00.
        let l = layout(KvScheme::Int8, 4);
        let words = pack_vector(&[63.5, 1.3, -1.0, 0.0], &l, 0);
        assert_eq!(words, [0x00fe_037f, 0.5f32.to_bits()]);
        assert_eq!(unpack_vector(&words, &l, 0), [63.5, 1.5, -1.0, 0.0]);
    }

    #[test]
    fn packed_vectors_decode_to_what_kv_quant_rounds_them_to() {
        // Values over many binades, a constant group and zeros: every scheme Generate offers, and
        // groups that do not divide the head.
        let d = 40u32;
        let values: Vec<f32> = (0..d)
            .map(|i| if i >= 32 { 0.25 } else { ((i * 37 % 23) as f32 - 11.0) * 2f32.powi(i as i32 % 9 - 6) })
            .collect();
        for scheme in [
            KvScheme::Fp16,
            KvScheme::Int8,
            KvScheme::IntGroup { bits: 4, group: 32 },
            KvScheme::IntGroup { bits: 2, group: 16 },
            KvScheme::IntGroup { bits: 4, group: 12 },
        ] {
            let pass = scheme.pass(KvTensor::K, 1).unwrap();
            let want: Vec<f32> =
                values.chunks(pass.boxed[2].min(d) as usize).flat_map(|g| round_group(g, pass.rounding)).collect();
            let l = layout(scheme, d);
            let words = pack_vector(&values, &l, 0);
            assert_eq!(words.len() as u32, l.words());
            assert_eq!(unpack_vector(&words, &l, 0), want, "{}", scheme.name());
        }
    }

    #[test]
    fn tokens_go_to_their_rows_and_bad_sizes_are_refused() {
        // 2 heads x 2 tokens of 4 values (fp16: 2 words a vector), into rows 1 and 2 of 3.
        let l = layout(KvScheme::Fp16, 4);
        let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let rows = PackRows { heads: 2, tokens: 2, capacity: 3, start: 1 };
        let mut packed = vec![7u32; 12];
        kv_pack(&x, &mut packed, rows, l).unwrap();
        // Head 0 row 0 is untouched; row 1 holds token 0 [0, 1, 2, 3]; head 1 row 2 holds [12..16).
        assert_eq!(&packed[..2], [7, 7]);
        assert_eq!(unpack_vector(&packed[2..4], &l, 0), [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(unpack_vector(&packed[10..12], &l, 0), [12.0, 13.0, 14.0, 15.0]);
        assert!(kv_pack(&x, &mut packed, PackRows { start: 2, ..rows }, l).unwrap_err().contains("do not fit"));
        assert!(kv_pack(&x[..15], &mut packed, rows, l).is_err());
        assert!(kv_pack(&x, &mut packed[..11], rows, l).is_err());
    }

    #[test]
    fn fp8_bits_and_values_by_hand_and_every_code_both_ways() {
        // E4M3: 448 = 1.75 x 2^8 is exponent field 8 + 7 = 15, fraction 110: 0x7e; the smallest
        // subnormal 2^-9 is 0x01; -1.0 is 0xb8. E5M2: 57,344 = 1.75 x 2^15 is 0x7b; 2^-16 is 0x01.
        assert_eq!((fp8_bits(448.0, 3, -6), fp8_bits(2f32.powi(-9), 3, -6), fp8_bits(-1.0, 3, -6)), (0x7e, 0x01, 0xb8));
        assert_eq!((fp8_bits(57344.0, 2, -14), fp8_bits(2f32.powi(-16), 2, -14)), (0x7b, 0x01));
        assert_eq!((fp8_value(0x7e, 3, -6), fp8_value(0xb8, 3, -6), fp8_value(0x7b, 2, -14)), (448.0, -1.0, 57344.0));
        // Every finite code but -0 decodes to a value the format holds and back to itself.
        for (mantissa, min_exp, max, nan_or_inf) in [(3, -6, 448.0, 0x7f..=0x7f), (2, -14, 57344.0, 0x7c..=0x7f)] {
            for b in (0u32..256).filter(|b| *b != 0x80 && !nan_or_inf.contains(&(b & 0x7f))) {
                let v = fp8_value(b, mantissa, min_exp);
                assert_eq!(round_float(v, mantissa, min_exp, max), v, "{b:#x}");
                assert_eq!(fp8_bits(v, mantissa, min_exp), b, "{b:#x} = {v}");
            }
        }
    }

    #[test]
    fn fp8_decodes_to_what_kv_quant_rounds_the_tensor_or_each_head_to() {
        // 2 heads x 3 tokens x 8 values over several binades; the whole pack starts the cache.
        let (heads, tokens, d) = (2u32, 3u32, 8u32);
        let x: Vec<f32> =
            (0..heads * tokens * d).map(|i| ((i * 29 % 17) as f32 - 8.0) * 2f32.powi(i as i32 % 7 - 3)).collect();
        for scope in [ScaleScope::Tensor, ScaleScope::Head] {
            for format in [Fp8::E4m3, Fp8::E5m2] {
                let scheme = KvScheme::Fp8 { format, scope };
                let l = layout(scheme, d);
                let rows = PackRows { heads, tokens, capacity: 4, start: 0 };
                let mut packed = vec![0u32; l.cache_words(heads, 4) as usize];
                kv_pack(&x, &mut packed, rows, l).unwrap();
                let pass = scheme.pass(KvTensor::K, tokens).unwrap();
                let per_box = (pass.boxed[0].min(heads) * tokens * d) as usize;
                let want: Vec<f32> = x.chunks(per_box).flat_map(|b| round_group(b, pass.rounding)).collect();
                let tail = l.tail_at(heads, 4) as usize;
                let got: Vec<f32> = (0..heads * tokens)
                    .flat_map(|i| {
                        let (h, t) = (i / tokens, i % tokens);
                        let at = ((h * 4 + t) * l.words()) as usize;
                        unpack_vector(&packed[at..at + l.words() as usize], &l, packed[tail + l.tail_slot(h) as usize])
                    })
                    .collect();
                assert_eq!(got, want, "{}", scheme.name());
            }
        }
    }

    #[test]
    fn a_later_fp8_pack_keeps_the_first_pack_s_scale_and_saturates() {
        // E4M3 per tensor: the first token's largest magnitude 2.0 sets the scale 2 / 448. A later
        // token of 4.0 is past 448 steps of it: it comes back as 2.0; 1.0 stays exact.
        let l = layout(KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor }, 4);
        let mut packed = vec![0u32; l.cache_words(1, 2) as usize];
        kv_pack(&[2.0, 0.5, 0.0, -1.0], &mut packed, PackRows { heads: 1, tokens: 1, capacity: 2, start: 0 }, l)
            .unwrap();
        assert_eq!(packed[2], (2.0f32 / 448.0).to_bits());
        kv_pack(&[4.0, 1.0, -8.0, 0.25], &mut packed, PackRows { heads: 1, tokens: 1, capacity: 2, start: 1 }, l)
            .unwrap();
        assert_eq!(packed[2], (2.0f32 / 448.0).to_bits());
        assert_eq!(unpack_vector(&packed[1..2], &l, packed[2]), [2.0, 1.0, -2.0, 0.25]);
        assert_eq!(unpack_vector(&packed[0..1], &l, packed[2]), [2.0, 0.5, 0.0, -1.0]);
    }
    #[test]
    fn kivi_s_packed_cache_decodes_to_what_kv_quant_rounds() {
        // Bit for bit, for K (blocks of tokens per channel) and V (per token), at several group sizes,
        // recent windows and text lengths (a partial K block, fewer tokens than R).
        let (heads, d) = (2u32, 24u32);
        for (bits, group, recent, tokens) in [(2u8, 8u32, 4u32, 37u32), (4, 16, 0, 32), (2, 32, 16, 98), (4, 8, 40, 20)]
        {
            let scheme = KvScheme::Kivi { bits, group, recent };
            let kivi = KiviCache::of(scheme, d, tokens).unwrap();
            let x: Vec<f32> = (0..heads * tokens * d).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
            for tensor in [KvTensor::K, KvTensor::V] {
                let packed = kivi_pack(&x, heads, &kivi, tensor).unwrap();
                assert_eq!(packed.len() as u64, kivi.words(tensor, heads));
                let mut rounded = x.clone();
                let layout = KvLayout { heads, tokens, d, head_stride: tokens * d, token_stride: d };
                if let Some(pass) = scheme.pass(tensor, tokens) {
                    kv_quant(&mut rounded, layout, &pass);
                }
                let decoded = kivi_unpack(&packed, heads, &kivi, tensor);
                let same = decoded.iter().zip(&rounded).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{} {tensor:?} G = {group} R = {recent} over {tokens} tokens", scheme.name());
            }
        }
        // Too few floats for the text is refused.
        let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 8, recent: 0 }, 8, 16).unwrap();
        assert!(kivi_pack(&[0.0; 127], 1, &kivi, KvTensor::K).unwrap_err().contains("do not fit"));
    }

    #[test]
    fn a_kivi_decode_cache_grown_a_token_at_a_time_holds_what_a_pass_over_its_tokens_does() {
        // A prompt of 5 tokens, then one token a step (and 7, 10 and 9 at a time) up to 59, in a cache
        // for 64: after every step its values are, bit for bit, those kv_quant rounds the tokens so far to
        // (KIVI's quantised tokens depend only on how many there are).
        let (heads, d) = (2u32, 16u32);
        let x: Vec<f32> = (0..heads * 64 * d).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.021).collect();
        let tokens_of = |h: u32, range: std::ops::Range<u32>| -> Vec<f32> {
            range.map(|t| ((h * 64 + t) * d) as usize).flat_map(|at| x[at..at + d as usize].to_vec()).collect()
        };
        for (bits, group, recent) in [(2u8, 8u32, 4u32), (4, 4, 0), (2, 16, 9), (4, 1, 3)] {
            let scheme = KvScheme::Kivi { bits, group, recent };
            let mut kivi = KiviCache::decoding(scheme, d, 64).unwrap();
            for tensor in [KvTensor::K, KvTensor::V] {
                let mut cache = vec![0u32; kivi.words(tensor, heads) as usize];
                let mut len = 0;
                for step in
                    [5, 1, 1, 1, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 10, 1, 1, 1, 1, 1, 1, 1, 9]
                {
                    let new: Vec<f32> = (0..heads).flat_map(|h| tokens_of(h, len..len + step)).collect();
                    kivi = kivi.holding(len + step);
                    kivi_append(&mut cache, &new, heads, &kivi, tensor).unwrap();
                    len += step;
                    let mut rounded: Vec<f32> = (0..heads).flat_map(|h| tokens_of(h, 0..len)).collect();
                    let layout = KvLayout { heads, tokens: len, d, head_stride: len * d, token_stride: d };
                    kv_quant(&mut rounded, layout, &scheme.pass(tensor, len).unwrap());
                    let decoded = kivi_unpack(&cache, heads, &kivi, tensor);
                    let same = decoded.iter().zip(&rounded).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same && decoded.len() == rounded.len(),
                        "{} {tensor:?} G = {group} R = {recent} at {len}",
                        scheme.name()
                    );
                }
            }
        }
    }

    #[test]
    fn a_kivi_key_block_by_hand() {
        // int2, G = 2, d = 1, one head, 2 tokens: channel 0's values 1 and 4 over the block give scale
        // (4 - 1) / 3 = 1 and min 1 (f16 bits 0x3c00 each): codes 0 and 3. The block is 1 code word
        // a token, then 1 scale word: [0, 3, 0x3c00_3c00].
        let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 2, recent: 0 }, 1, 2).unwrap();
        assert_eq!(kivi_pack(&[1.0, 4.0], 1, &kivi, KvTensor::K).unwrap(), [0, 3, 0x3c00_3c00]);
    }
}
