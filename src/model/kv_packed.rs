//! A quantised KV cache as it is really stored: each token's K (or V) vector of one KV head packed
//! into `u32` words, its codes first, then the scales its groups need, so a decode cache of the
//! scheme holds exactly the bytes [`KvScheme::bytes_per_token`] counts (the memory view's figure).
//! `shaders/kv_pack.wgsl` writes this layout and `shaders/packed_attention.wgsl` reads it,
//! dequantising as it goes; their twins (`cpu::kv_pack`, `cpu::packed_attention`) follow it too.
//!
//! One vector of `d` values, in words:
//!
//! ```text
//! fp16          d/2 words: value c in bits 16 (c % 2) .. of word c / 2 (f16 bits)
//! int8          d/4 words of codes (-127..=127, two's complement bytes, lowest byte first),
//!               then 1 word: the f32 scale (largest magnitude / 127)
//! int4 / int2   d*bits/32 words of codes (0..=2^bits - 1, lowest bits first), then one word per
//!   in groups   group of G channels: its f16 scale in the low half and its f16 min in the high half
//!   of G        (llama.cpp's q4_1: value = code * scale + min)
//! fp8           d/4 words of codes (E4M3 or E5M2 bits, lowest byte first): value = fp8 * scale
//! ```
//!
//! fp8's scale is not in the vector: it covers a layer's whole K (or V), or one KV head of it (vLLM's
//! per-tensor and per-head scales), so it is kept once, after every head's rows: the cache's *tail*,
//! one f32 word (per tensor) or one a KV head. The pack that starts a cache (row 0) sets it from the
//! values it packs (largest magnitude / the format's largest value, as `kv_quant` rounds them); later
//! packs keep it, so values that outgrow it saturate, as they do in a runtime whose scales were
//! calibrated beforehand.
//!
//! KIVI's groups span tokens, so it has no packed form of this kind; its cache (a pass's, or a decode
//! cache's) is packed as [`KiviCache`] says: K in blocks of G tokens (each token's codes, then one
//! scale word per channel for the block: [`Packing::ChannelBlocks`]), V per token as int4 / int2 in
//! groups of G channels, and the tokens not yet quantised (the recent R, and K's partial block) as f32
//! rows in a ring after the packed ones.
//!
//! Codes never straddle a word (bits divide 32). Where `d * bits` is not a multiple of 32 the last
//! code word is padded, and [`PackedLayout::bytes_per_token_per_head`] counts the padding: it equals
//! the scheme's figure whenever `d * bits` is a multiple of 32 (every head width of 16 or more that is a
//! multiple of 16: all the presets, the trained model's 32).

use super::kv_quant::{Fp8, KvScheme, KvTensor, Rounding, ScaleScope};

/// How one vector's values are coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Packing {
    /// f16, two a word, no scale.
    F16,
    /// Symmetric int8 with one f32 scale a vector.
    Int8,
    /// Asymmetric `bits`-bit codes (4 or 2) with an f16 scale and min per group of `group` channels.
    Grouped { bits: u32, group: u32 },
    /// fp8 codes, the f32 scale in the cache's tail (one, or one a KV head when `per_head`).
    Fp8 { format: Fp8, per_head: bool },
    /// KIVI's keys: asymmetric `bits`-bit codes in blocks of `block` tokens, each token's codes and
    /// then, once a block, one word per channel (its f16 scale low, its f16 min high) over the
    /// block's tokens.
    ChannelBlocks { bits: u32, block: u32 },
}

/// Where one token's vector of one KV head keeps its codes and scales, for head width `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedLayout {
    pub packing: Packing,
    pub d: u32,
}

impl PackedLayout {
    /// The packed form of `scheme` at head width `d`: fp16, int8 and the grouped int4 / int2 (whose
    /// scales lie within a token, so a token is packed once, as it joins) and fp8 (its scale in the
    /// tail); `None` for the f32 cache, KIVI (whose groups of tokens are quantised together) and
    /// `d = 0`.
    pub fn of(scheme: KvScheme, d: u32) -> Option<PackedLayout> {
        let packing = match scheme {
            KvScheme::Fp16 => Packing::F16,
            KvScheme::Int8 => Packing::Int8,
            KvScheme::IntGroup { bits: bits @ (2 | 4), group } => {
                Packing::Grouped { bits: u32::from(bits), group: group.clamp(1, d.max(1)) }
            }
            KvScheme::Fp8 { format, scope } => Packing::Fp8 { format, per_head: scope == ScaleScope::Head },
            _ => return None,
        };
        (d > 0).then_some(PackedLayout { packing, d })
    }

    /// The kernels' code for the packing (`KIND_*` in `shaders/kv_pack.wgsl` and
    /// `shaders/packed_attention.wgsl`): 0 fp16, 1 int8, 2 grouped, 3 fp8, 4 KIVI's key blocks.
    pub fn shader_kind(&self) -> u32 {
        match self.packing {
            Packing::F16 => 0,
            Packing::Int8 => 1,
            Packing::Grouped { .. } => 2,
            Packing::Fp8 { .. } => 3,
            Packing::ChannelBlocks { .. } => 4,
        }
    }

    /// fp8's format as the kernels read it: (fraction bits, smallest normal exponent, largest
    /// value); `None` for the other packings.
    pub fn fp8_format(&self) -> Option<(u32, i32, f32)> {
        match self.packing {
            Packing::Fp8 { format, .. } => match Rounding::fp8(format) {
                Rounding::Float { mantissa, min_exp, max, .. } => Some((mantissa, min_exp, max)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Words after the heads' rows holding scales that span tokens: fp8's one scale, or one a KV
    /// head; none for the other packings.
    pub fn tail_words(&self, heads: u32) -> u32 {
        match self.packing {
            Packing::Fp8 { per_head: true, .. } => heads,
            Packing::Fp8 { per_head: false, .. } => 1,
            _ => 0,
        }
    }

    /// Which tail word holds KV head `head`'s scale.
    pub fn tail_slot(&self, head: u32) -> u32 {
        match self.packing {
            Packing::Fp8 { per_head: true, .. } => head,
            _ => 0,
        }
    }

    /// Where the tail starts: after `heads` heads of `capacity` rows (whole blocks of them for
    /// [`Packing::ChannelBlocks`]).
    pub fn tail_at(&self, heads: u32, capacity: u32) -> u64 {
        let blocks = u64::from(capacity.div_ceil(self.block_tokens()));
        u64::from(heads) * blocks * u64::from(self.block_words())
    }

    /// Tokens that share a block of scales: `block` for [`Packing::ChannelBlocks`], else 1.
    pub fn block_tokens(&self) -> u32 {
        match self.packing {
            Packing::ChannelBlocks { block, .. } => block.max(1),
            _ => 1,
        }
    }

    /// Words of one block: its tokens' codes, then one scale word a channel (one vector's words for
    /// the packings whose scales lie within a token).
    pub fn block_words(&self) -> u32 {
        match self.packing {
            Packing::ChannelBlocks { .. } => self.block_tokens() * self.code_words() + self.d,
            _ => self.words(),
        }
    }

    /// Words of a whole cache of `heads` heads of `capacity` rows: the rows and the tail.
    pub fn cache_words(&self, heads: u32, capacity: u32) -> u64 {
        self.tail_at(heads, capacity) + u64::from(self.tail_words(heads))
    }

    /// Bits of one code.
    pub fn bits(&self) -> u32 {
        match self.packing {
            Packing::F16 => 16,
            Packing::Int8 | Packing::Fp8 { .. } => 8,
            Packing::Grouped { bits, .. } | Packing::ChannelBlocks { bits, .. } => bits,
        }
    }

    /// Channels that share one scale word (the whole vector for int8 and fp8; fp16 has none; one
    /// channel, over a block's tokens, for KIVI's keys).
    pub fn group(&self) -> u32 {
        match self.packing {
            Packing::F16 | Packing::Int8 | Packing::Fp8 { .. } => self.d,
            Packing::Grouped { group, .. } => group,
            Packing::ChannelBlocks { .. } => 1,
        }
    }

    /// The largest code: 127 (int8, symmetric), 2^bits - 1 (grouped); 0 for fp16 and fp8 (floats).
    pub fn levels(&self) -> u32 {
        match self.packing {
            Packing::F16 | Packing::Fp8 { .. } => 0,
            Packing::Int8 => 127,
            Packing::Grouped { bits, .. } | Packing::ChannelBlocks { bits, .. } => (1 << bits) - 1,
        }
    }

    /// Words of codes.
    pub fn code_words(&self) -> u32 {
        (self.d * self.bits()).div_ceil(32)
    }

    /// Words of scales after the codes (fp8's scale is in the tail, KIVI's keys' after their block).
    pub fn scale_words(&self) -> u32 {
        match self.packing {
            Packing::F16 | Packing::Fp8 { .. } | Packing::ChannelBlocks { .. } => 0,
            Packing::Int8 => 1,
            Packing::Grouped { group, .. } => self.d.div_ceil(group),
        }
    }

    /// Words of one vector: codes and scales (codes only for KIVI's keys).
    pub fn words(&self) -> u32 {
        self.code_words() + self.scale_words()
    }

    /// Bytes one token takes in one KV head: its K and its V vector.
    pub fn bytes_per_token_per_head(&self) -> u64 {
        2 * u64::from(self.words()) * 4
    }

    /// The word holding channel `c`'s code, and the bit its code starts at.
    pub fn code_at(&self, c: u32) -> (u32, u32) {
        let bit = c * self.bits();
        (bit / 32, bit % 32)
    }

    /// The word holding channel `c`'s scale, counted from the vector's first word (`None` for fp16,
    /// which has none, and fp8, whose scale is in the tail).
    pub fn scale_at(&self, c: u32) -> Option<u32> {
        (self.scale_words() > 0).then(|| self.code_words() + c / self.group())
    }
}

/// KIVI's cache, packed: K's whole blocks of `group` older tokens per channel
/// ([`Packing::ChannelBlocks`]), V's older tokens per token in groups of `group` channels
/// ([`Packing::Grouped`]); the tokens [`KvScheme::pass`] leaves unquantised (the recent `recent`, and
/// K's partial block) as f32 rows in a ring after each tensor's packed ones (`[heads, ring, d]`, token
/// t in row t mod ring). Which tokens are quantised depends only on how many there are, and a token
/// once quantised keeps its codes (a block's scales cover its own tokens), so the cache of a pass over
/// a text ([`KiviCache::of`]) and a decode cache that grew to the same tokens ([`KiviCache::decoding`])
/// hold the same values: only their capacity and ring differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KiviCache {
    pub bits: u32,
    pub group: u32,
    pub recent: u32,
    pub d: u32,
    /// Tokens in the cache.
    pub tokens: u32,
    /// Tokens its buffers are laid out for: a pass's text, or a decode cache's most.
    pub capacity: u32,
    /// A decode cache: its ring holds the most unquantised tokens any length up to `capacity` has
    /// (a pass's holds exactly its text's).
    pub decoding: bool,
}

impl KiviCache {
    /// The cache of a pass over `tokens` tokens of `scheme` (KIVI at 4 or 2 bits) at head width `d`.
    pub fn of(scheme: KvScheme, d: u32, tokens: u32) -> Option<KiviCache> {
        match scheme {
            KvScheme::Kivi { bits: bits @ (2 | 4), group, recent } if d > 0 => Some(KiviCache {
                bits: u32::from(bits),
                group: group.max(1),
                recent,
                d,
                tokens,
                capacity: tokens,
                decoding: false,
            }),
            _ => None,
        }
    }

    /// An empty decode cache of `scheme` for up to `capacity` tokens: tokens join one pass at a time
    /// ([`KiviCache::holding`]), K's blocks and V's tokens quantised as they leave the recent window.
    pub fn decoding(scheme: KvScheme, d: u32, capacity: u32) -> Option<KiviCache> {
        KiviCache::of(scheme, d, capacity).map(|kivi| KiviCache { tokens: 0, decoding: true, ..kivi })
    }

    /// The same cache holding `tokens` tokens.
    pub fn holding(self, tokens: u32) -> KiviCache {
        KiviCache { tokens, ..self }
    }

    fn scheme(&self) -> KvScheme {
        KvScheme::Kivi { bits: self.bits as u8, group: self.group, recent: self.recent }
    }

    /// Tokens of `tensor` quantised in a cache of `tokens` tokens: K's whole blocks, V's older tokens
    /// (as `kv_quant` rounds them).
    fn packed_at(&self, tensor: KvTensor, tokens: u32) -> u32 {
        self.scheme().pass(tensor, tokens).map_or(0, |p| p.tokens.min(tokens))
    }

    /// Tokens of `tensor` held quantised now.
    pub fn packed_tokens(&self, tensor: KvTensor) -> u32 {
        self.packed_at(tensor, self.tokens)
    }

    /// Tokens of `tensor` a head's packed rows (or blocks) have room for: those quantised at capacity.
    pub fn packed_capacity(&self, tensor: KvTensor) -> u32 {
        self.packed_at(tensor, self.capacity)
    }

    /// How `tensor`'s quantised tokens are packed.
    pub fn layout(&self, tensor: KvTensor) -> PackedLayout {
        let packing = match tensor {
            KvTensor::K => Packing::ChannelBlocks { bits: self.bits, block: self.group },
            KvTensor::V => Packing::Grouped { bits: self.bits, group: self.group.clamp(1, self.d) },
        };
        PackedLayout { packing, d: self.d }
    }

    /// Rows of `tensor` kept in f32 now (a head's tokens after its packed ones).
    pub fn f32_rows(&self, tensor: KvTensor) -> u32 {
        self.tokens - self.packed_tokens(tensor)
    }

    /// Rows a head of `tensor`'s f32 ring: a pass's unquantised tokens; for a decode cache the most
    /// any length up to its capacity leaves (K: the recent R and a block short of G, so R + G - 1; V:
    /// R). None when no length leaves any.
    pub fn ring(&self, tensor: KvTensor) -> u32 {
        match (self.decoding, tensor) {
            (false, _) => self.capacity - self.packed_capacity(tensor),
            (true, KvTensor::K) => self.capacity.min(self.recent.saturating_add(self.group - 1)),
            (true, KvTensor::V) => self.capacity.min(self.recent),
        }
    }

    /// Where `tensor`'s f32 rows start, in words: after `heads` heads of packed tokens.
    pub fn f32_rows_at(&self, tensor: KvTensor, heads: u32) -> u64 {
        self.layout(tensor).tail_at(heads, self.packed_capacity(tensor))
    }

    /// The word where token `t` (not packed) of head `h` starts among `tensor`'s f32 rows.
    pub fn f32_row_at(&self, tensor: KvTensor, heads: u32, h: u32, t: u32) -> u64 {
        let ring = self.ring(tensor);
        let row = u64::from(h) * u64::from(ring) + u64::from(t % ring.max(1));
        self.f32_rows_at(tensor, heads) + row * u64::from(self.d)
    }

    /// Key blocks a head has room for.
    pub fn key_blocks(&self) -> u32 {
        self.packed_capacity(KvTensor::K) / self.group
    }

    /// The word where head `h`'s key block `b` starts (its codes, then its scales).
    pub fn key_block_at(&self, h: u32, b: u32) -> u64 {
        let block_words = self.layout(KvTensor::K).block_words();
        (u64::from(h) * u64::from(self.key_blocks()) + u64::from(b)) * u64::from(block_words)
    }

    /// The word where head `h`'s packed value of token `t` starts.
    pub fn value_at(&self, h: u32, t: u32) -> u64 {
        let words = self.layout(KvTensor::V).words();
        (u64::from(h) * u64::from(self.packed_capacity(KvTensor::V)) + u64::from(t)) * u64::from(words)
    }

    /// Words of `tensor`'s whole cache for `heads` KV heads.
    pub fn words(&self, tensor: KvTensor, heads: u32) -> u64 {
        let ring = u64::from(heads) * u64::from(self.ring(tensor)) * u64::from(self.d);
        self.f32_rows_at(tensor, heads) + ring
    }

    /// Bytes of one layer's K and V caches for `heads` KV heads.
    pub fn bytes(&self, heads: u32) -> u64 {
        4 * (self.words(KvTensor::K, heads) + self.words(KvTensor::V, heads))
    }

    /// Bytes of one layer's f32 rings for `heads` KV heads (a decode cache's fixed part).
    pub fn ring_bytes(&self, heads: u32) -> u64 {
        let rows = u64::from(self.ring(KvTensor::K)) + u64::from(self.ring(KvTensor::V));
        4 * u64::from(heads) * rows * u64::from(self.d)
    }
}

/// The K and V caches a packed attention launch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PackedCaches {
    /// K and V alike: `kv_stride` rows a KV head of [`PackedLayout`] vectors, then the tail.
    Rows(PackedLayout),
    /// KIVI's cache, a pass's or a decode cache's (the launch's keys are its tokens).
    Kivi(KiviCache),
}

impl From<PackedLayout> for PackedCaches {
    fn from(layout: PackedLayout) -> Self {
        PackedCaches::Rows(layout)
    }
}

impl PackedCaches {
    /// The head width the caches hold.
    pub fn d(&self) -> u32 {
        match self {
            PackedCaches::Rows(layout) => layout.d,
            PackedCaches::Kivi(kivi) => kivi.d,
        }
    }

    /// How V's vectors are packed (and K's, but for KIVI).
    pub fn values(&self) -> PackedLayout {
        match self {
            PackedCaches::Rows(layout) => *layout,
            PackedCaches::Kivi(kivi) => kivi.layout(KvTensor::V),
        }
    }

    /// Words `tensor`'s cache must hold for `heads` KV heads of `kv_stride` rows.
    pub fn words(&self, tensor: KvTensor, heads: u32, kv_stride: u32) -> u64 {
        match self {
            PackedCaches::Rows(layout) => layout.cache_words(heads, kv_stride),
            PackedCaches::Kivi(kivi) => kivi.words(tensor, heads),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trained_model_s_vectors_by_hand() {
        // d = 32. fp16: 32 x 16 bits = 16 words. int8: 8 words of codes + 1 scale = 9 words = 36 B.
        // int4-g32: 32 x 4 bits = 4 words + 1 group's scale/min word = 5 words = 20 B. int2-g32: 2 + 1.
        let words = |s| PackedLayout::of(s, 32).map(|l| l.words());
        assert_eq!(words(KvScheme::Fp16), Some(16));
        assert_eq!(words(KvScheme::Int8), Some(9));
        assert_eq!(words(KvScheme::IntGroup { bits: 4, group: 32 }), Some(5));
        assert_eq!(words(KvScheme::IntGroup { bits: 2, group: 32 }), Some(3));
        // int4-g8: 4 words of codes + 4 groups = 8 words.
        assert_eq!(words(KvScheme::IntGroup { bits: 4, group: 8 }), Some(8));
        // K and V of one head: int4-g32 is 2 x 20 = 40 B a token; the model's 4 layers x 2 KV heads
        // make it 8 x 40 = 320 B, the memory view's figure (kv_quant's hand test).
        let int4 = PackedLayout::of(KvScheme::IntGroup { bits: 4, group: 32 }, 32).unwrap();
        assert_eq!(int4.bytes_per_token_per_head(), 40);
        assert_eq!(8 * int4.bytes_per_token_per_head(), 320);
    }

    #[test]
    fn the_packed_bytes_are_the_scheme_s_bytes_per_token() {
        // Every scheme Generate offers, every group size, at widths whose codes fill whole words.
        for d in [16, 32, 64, 128, 256] {
            for group in crate::model::kv_quant::GROUPS {
                for scheme in [
                    KvScheme::Fp16,
                    KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
                    KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Head },
                    KvScheme::Int8,
                    KvScheme::IntGroup { bits: 4, group },
                    KvScheme::IntGroup { bits: 2, group },
                ] {
                    let layout = PackedLayout::of(scheme, d).unwrap();
                    let (layers, h_kv) = (4, 2);
                    let packed = u64::from(layers * h_kv) * layout.bytes_per_token_per_head();
                    assert_eq!(packed, scheme.bytes_per_token(layers, h_kv, d), "{} at d = {d}", scheme.name());
                }
            }
        }
    }

    #[test]
    fn a_width_off_the_word_grid_pads_its_last_code_word() {
        // d = 24, int2-g32: 48 bits of codes take 2 words (16 bits padding) + 1 scale word = 12 B a
        // vector, 24 B a token; the scheme counts 2 x (48 + 32) bits = 20 B.
        let layout = PackedLayout::of(KvScheme::IntGroup { bits: 2, group: 32 }, 24).unwrap();
        assert_eq!((layout.code_words(), layout.scale_words(), layout.group()), (2, 1, 24));
        assert_eq!(layout.bytes_per_token_per_head(), 24);
        assert_eq!(KvScheme::IntGroup { bits: 2, group: 32 }.bytes_per_token(1, 1, 24), 20);
    }

    #[test]
    fn codes_and_scales_are_where_the_shaders_look() {
        // int4-g16, d = 32: channel 9 is the second code of word 1 (bits 4..8); its scale word is
        // 4 (codes) + 9 / 16 = 4; channel 31 is bits 28..32 of word 3, scale word 5.
        let layout = PackedLayout::of(KvScheme::IntGroup { bits: 4, group: 16 }, 32).unwrap();
        assert_eq!((layout.code_at(9), layout.scale_at(9)), ((1, 4), Some(4)));
        assert_eq!((layout.code_at(31), layout.scale_at(31)), ((3, 28), Some(5)));
        // fp16: channel 3 is the high half of word 1, no scale; int8: channel 5 is byte 1 of word 1,
        // its scale the word after the 8 code words.
        let f16 = PackedLayout::of(KvScheme::Fp16, 32).unwrap();
        assert_eq!((f16.code_at(3), f16.scale_at(3)), ((1, 16), None));
        let int8 = PackedLayout::of(KvScheme::Int8, 32).unwrap();
        assert_eq!((int8.code_at(5), int8.scale_at(5), int8.levels()), ((1, 8), Some(8), 127));
    }

    #[test]
    fn kivi_alone_has_no_packed_form_per_token() {
        let schemes = KvScheme::compared(32, 16);
        let packed: Vec<String> =
            schemes.iter().filter(|s| PackedLayout::of(**s, 32).is_some()).map(|s| s.name()).collect();
        assert_eq!(packed, ["fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4-g32", "int2-g32"]);
        for s in schemes {
            let kivi = matches!(s, KvScheme::Kivi { .. });
            assert_eq!(PackedLayout::of(s, 32).is_some(), !kivi && s != KvScheme::Fp32);
        }
        assert_eq!(PackedLayout::of(KvScheme::Fp16, 0), None);
        // A group wider than the head is one group a vector.
        assert_eq!(PackedLayout::of(KvScheme::IntGroup { bits: 2, group: 128 }, 32).unwrap().group(), 32);
    }

    #[test]
    fn fp8_keeps_its_scales_in_the_tail() {
        // d = 32: 32 codes of 8 bits = 8 words a vector, no scale word in it; 2 KV heads x 10 rows =
        // 160 words, then the tail: one word per tensor, or one per head.
        let tensor = PackedLayout::of(KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor }, 32).unwrap();
        assert_eq!((tensor.words(), tensor.scale_at(5), tensor.code_at(5)), (8, None, (1, 8)));
        assert_eq!((tensor.tail_at(2, 10), tensor.tail_words(2), tensor.cache_words(2, 10)), (160, 1, 161));
        assert_eq!((tensor.tail_slot(0), tensor.tail_slot(1)), (0, 0));
        let head = PackedLayout::of(KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Head }, 32).unwrap();
        assert_eq!((head.tail_words(2), head.cache_words(2, 10), head.tail_slot(1)), (2, 162, 1));
        // The tail is the scheme's bytes that do not grow with the context: 4 layers x (K, V) x 4 B per
        // tensor, x 2 KV heads per head.
        let per_layer = |l: PackedLayout| 2 * 4 * u64::from(l.tail_words(2));
        let fixed = |scope| KvScheme::Fp8 { format: Fp8::E4m3, scope }.fixed_bytes(4, 2, 32);
        assert_eq!((4 * per_layer(tensor), 4 * per_layer(head)), (fixed(ScaleScope::Tensor), fixed(ScaleScope::Head)));
        assert_eq!((tensor.fp8_format(), head.fp8_format()), (Some((3, -6, 448.0)), Some((2, -14, 57344.0))));
        assert_eq!(PackedLayout::of(KvScheme::Int8, 32).unwrap().cache_words(2, 10), 2 * 10 * 9);
    }
    #[test]
    fn kivi_s_cache_of_the_trained_model_s_text_by_hand() {
        // KIVI int2, G = 32, R = 16, d = 32, 98 tokens: K packs (98 - 16) / 32 = 2 whole blocks (64
        // tokens), each 32 tokens x 2 code words + 32 scale words = 96 words, so 192 words a head; its
        // other 34 tokens are f32 rows (34 x 32 = 1,088 words). V packs 82 tokens of 2 code words + 1
        // scale word (246 words a head) and keeps 16 f32 rows (512 words).
        let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, 32, 98).unwrap();
        assert_eq!((kivi.packed_tokens(KvTensor::K), kivi.packed_tokens(KvTensor::V)), (64, 82));
        let keys = kivi.layout(KvTensor::K);
        assert_eq!((keys.code_words(), keys.block_tokens(), keys.block_words(), keys.shader_kind()), (2, 32, 96, 4));
        assert_eq!((kivi.f32_rows_at(KvTensor::K, 2), kivi.words(KvTensor::K, 2)), (384, 384 + 2 * 1088));
        assert_eq!((kivi.f32_rows_at(KvTensor::V, 2), kivi.words(KvTensor::V, 2)), (492, 492 + 2 * 512));
        // 2 heads x (192 + 1,088 + 246 + 512) words x 4 B = 16,304 B a layer, against 2 x 2 x 98 x 32 x
        // 4 = 50,176 B in f32.
        assert_eq!(kivi.bytes(2), 16_304);
        // Fewer tokens than R: nothing is packed; V's group wider than the head is one group a vector.
        let short = KiviCache::of(KvScheme::Kivi { bits: 4, group: 64, recent: 16 }, 32, 10).unwrap();
        assert_eq!((short.packed_tokens(KvTensor::K), short.f32_rows(KvTensor::V), short.bytes(1)), (0, 10, 2560));
        assert_eq!(short.layout(KvTensor::V).group(), 32);
        assert_eq!(KiviCache::of(KvScheme::Int8, 32, 10), None);
    }

    #[test]
    fn kivi_s_decode_cache_by_hand() {
        // KIVI int2, G = 32, R = 16, d = 32, room for 128 tokens: at most (128 - 16) / 32 = 3 key
        // blocks (3 x 96 = 288 words a head) and 112 packed values (336 words a head). K's f32 ring
        // holds R + G - 1 = 47 rows (at 16 + 31 = 47 tokens none is packed yet), V's R = 16.
        let scheme = KvScheme::Kivi { bits: 2, group: 32, recent: 16 };
        let empty = KiviCache::decoding(scheme, 32, 128).unwrap();
        assert_eq!((empty.tokens, empty.key_blocks(), empty.packed_capacity(KvTensor::V)), (0, 3, 112));
        assert_eq!((empty.ring(KvTensor::K), empty.ring(KvTensor::V)), (47, 16));
        assert_eq!(empty.words(KvTensor::K, 2), 2 * 288 + 2 * 47 * 32);
        assert_eq!(empty.words(KvTensor::V, 2), 2 * 336 + 2 * 16 * 32);
        assert_eq!(empty.ring_bytes(2), 4 * 2 * (47 + 16) * 32);
        // At 98 tokens it quantises what the pass over 98 does; K's token 97 of head 1 is in ring row
        // 97 mod 47 = 3 of head 1: word 576 + (47 + 3) x 32 = 2,176. Head 1's block 1 starts at
        // (3 + 1) x 96 = 384 words; its value 5 at (112 + 5) x 3 = 351.
        let now = empty.holding(98);
        assert_eq!((now.packed_tokens(KvTensor::K), now.packed_tokens(KvTensor::V)), (64, 82));
        assert_eq!(now.f32_row_at(KvTensor::K, 2, 1, 97), 2176);
        assert_eq!((now.key_block_at(1, 1), now.value_at(1, 5)), (384, 351));
        // A pass's ring is its own unquantised rows, in the same ring order.
        let pass = KiviCache::of(scheme, 32, 98).unwrap();
        assert_eq!((pass.ring(KvTensor::K), pass.f32_row_at(KvTensor::K, 2, 0, 97)), (34, 384 + (97 % 34) * 32));
        // With R = 0 and G = 1 nothing waits: no ring.
        let none = KiviCache::decoding(KvScheme::Kivi { bits: 4, group: 1, recent: 0 }, 32, 8).unwrap();
        assert_eq!((none.ring(KvTensor::K), none.ring(KvTensor::V)), (0, 0));
    }

    #[test]
    fn a_whole_kivi_block_costs_the_scheme_s_bits() {
        // Where every token is packed (R = 0, whole blocks), the cache holds exactly the scheme's
        // bytes per token: KIVI's figure is its packed form's.
        for (bits, group, d) in [(2u8, 32u32, 32u32), (4, 16, 64), (2, 128, 128), (4, 8, 32)] {
            let scheme = KvScheme::Kivi { bits, group, recent: 0 };
            let tokens = 4 * group;
            let kivi = KiviCache::of(scheme, d, tokens).unwrap();
            assert_eq!(kivi.f32_rows(KvTensor::K) + kivi.f32_rows(KvTensor::V), 0);
            assert_eq!(kivi.bytes(3), u64::from(tokens) * scheme.bytes_per_token(1, 3, d), "{bits} {group} {d}");
        }
    }
}
