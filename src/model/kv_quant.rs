//! Quantised KV caches as runtimes store them: each scheme's exact bytes per token, its own scales
//! and zero points counted, and the groups of values that share a scale ([`QuantPass`]), which the
//! CPU twin (`cpu::kv_quant`) and the kernel (`shaders/kv_quant.wgsl`) both follow.
//!
//! [`DType`](super::DType) keeps its no-scale rule (the KV view's `dtype`); a [`KvScheme`] is a
//! runtime's choice: fp8 with an f32 scale per tensor or per head (vLLM's KV cache), int8 per token
//! (absmax, symmetric), int4 / int2 asymmetric per group of G along the head dimension with an f16
//! scale and an f16 minimum (llama.cpp's q4_1 layout), and KIVI (K per channel over groups of G
//! tokens, V per token in groups of G channels, the most recent R tokens left in full precision).

/// An 8-bit float format (OCP FP8): E4M3 (no infinities, largest 448) or E5M2 (largest 57,344).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8 {
    E4m3,
    E5m2,
}

/// What one fp8 scale covers: a whole layer's K (or V), or one KV head of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleScope {
    Tensor,
    Head,
}

/// How a KV cache stores its values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvScheme {
    /// The model's own f32 cache: nothing is rounded.
    #[default]
    Fp32,
    /// Each value rounded to f16, no scale.
    Fp16,
    /// Each value divided by an f32 scale (largest magnitude / the format's largest value), rounded
    /// to the fp8 format, and multiplied back.
    Fp8 { format: Fp8, scope: ScaleScope },
    /// Each token's head vector: 8-bit integers in -127..=127 times an f32 scale (largest magnitude / 127).
    Int8,
    /// `bits`-bit integers (4 or 2) per group of `group` values along the head dimension: value =
    /// q * scale + min, scale and min stored as f16.
    IntGroup { bits: u8, group: u32 },
    /// KIVI: K per channel over groups of `group` tokens, V per token in groups of `group` channels,
    /// `bits`-bit asymmetric with f16 scale and min; the last `recent` tokens stay f32.
    Kivi { bits: u8, group: u32, recent: u32 },
}

/// Which of a layer's two cached tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvTensor {
    K,
    V,
}

/// The rounding one group of values gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rounding {
    /// To a float format (`mantissa` bits, smallest normal exponent `min_exp`, largest finite value
    /// `max`), round to nearest even, subnormals kept, saturating; divided first by a scale (largest
    /// magnitude / `max`) when `scaled`.
    Float { mantissa: u32, min_exp: i32, max: f32, scaled: bool },
    /// Integers in `-levels..=levels` times an f32 scale (largest magnitude / `levels`).
    Symmetric { levels: u32 },
    /// Integers in `0..=levels` times an f16 scale ((max - min) / `levels`) plus an f16 min.
    Asymmetric { levels: u32 },
}

impl Rounding {
    pub const F16: Rounding = Rounding::Float { mantissa: 10, min_exp: -14, max: 65504.0, scaled: false };

    /// The rounding of an fp8 format (after its scale).
    pub fn fp8(format: Fp8) -> Rounding {
        match format {
            Fp8::E4m3 => Rounding::Float { mantissa: 3, min_exp: -6, max: 448.0, scaled: true },
            Fp8::E5m2 => Rounding::Float { mantissa: 2, min_exp: -14, max: 57344.0, scaled: true },
        }
    }
}

/// One rounding of a cached tensor: the tokens `0..tokens` of every head are cut into boxes of
/// `boxed = [heads, tokens, channels]` (clipped at the edges), and each box shares one scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantPass {
    pub rounding: Rounding,
    pub tokens: u32,
    pub boxed: [u32; 3],
}

/// Where a cached tensor's values are: `heads x tokens x d`, value (h, t, c) at
/// `h * head_stride + t * token_stride + c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    pub heads: u32,
    pub tokens: u32,
    pub d: u32,
    pub head_stride: u32,
    pub token_stride: u32,
}

impl QuantPass {
    /// Boxes along each axis of `layout` (heads, tokens, channels).
    pub fn boxes(&self, layout: &KvLayout) -> [u32; 3] {
        let [bh, bt, bc] = self.boxed.map(|b| b.max(1));
        [layout.heads.div_ceil(bh), self.tokens.min(layout.tokens).div_ceil(bt), layout.d.div_ceil(bc)]
    }

    /// Boxes in all.
    pub fn groups(&self, layout: &KvLayout) -> u64 {
        self.boxes(layout).iter().map(|&n| u64::from(n)).product()
    }
}

/// Group sizes a link may ask for.
pub const GROUPS: [u32; 5] = [8, 16, 32, 64, 128];

impl KvScheme {
    /// The schemes the memory view compares, at group size `group` and KIVI's `recent` tokens.
    pub fn compared(group: u32, recent: u32) -> [KvScheme; 9] {
        [
            KvScheme::Fp32,
            KvScheme::Fp16,
            KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Tensor },
            KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Tensor },
            KvScheme::Int8,
            KvScheme::IntGroup { bits: 4, group },
            KvScheme::IntGroup { bits: 2, group },
            KvScheme::Kivi { bits: 4, group, recent },
            KvScheme::Kivi { bits: 2, group, recent },
        ]
    }

    /// The row's name (`data-name`): `fp32`, `fp8-e4m3`, `int4-g32`, `kivi-int2`...
    pub fn name(self) -> String {
        match self {
            KvScheme::Fp32 => "fp32".into(),
            KvScheme::Fp16 => "fp16".into(),
            KvScheme::Fp8 { format, scope } => {
                let f = match format {
                    Fp8::E4m3 => "e4m3",
                    Fp8::E5m2 => "e5m2",
                };
                let s = match scope {
                    ScaleScope::Tensor => "",
                    ScaleScope::Head => "-head",
                };
                format!("fp8-{f}{s}")
            }
            KvScheme::Int8 => "int8".into(),
            KvScheme::IntGroup { bits, group } => format!("int{bits}-g{group}"),
            KvScheme::Kivi { bits, .. } => format!("kivi-int{bits}"),
        }
    }

    /// Tokens over which the per-token cost repeats: KIVI's K scales cover `group` tokens.
    pub fn block_tokens(self) -> u64 {
        match self {
            KvScheme::Kivi { group, .. } => u64::from(group.max(1)),
            _ => 1,
        }
    }

    /// Bits that one KV head's K and V take over [`Self::block_tokens`] tokens at head width `d`,
    /// scales and zero points included (per-tensor and per-head fp8 scales are fixed, not per token:
    /// [`Self::fixed_bytes`]).
    pub fn bits_per_block(self, d: u32) -> u64 {
        let d = u64::from(d);
        // Groups of `group` along the head dimension (the last one partial), each with an f16 scale
        // and an f16 min.
        let grouped = |bits: u8, group: u32| u64::from(bits) * d + d.div_ceil(u64::from(group.max(1))) * 32;
        match self {
            KvScheme::Fp32 => 2 * 32 * d,
            KvScheme::Fp16 => 2 * 16 * d,
            KvScheme::Fp8 { .. } => 2 * 8 * d,
            KvScheme::Int8 => 2 * (8 * d + 32),
            KvScheme::IntGroup { bits, group } => 2 * grouped(bits, group),
            KvScheme::Kivi { bits, group, .. } => {
                let g = u64::from(group.max(1));
                // K: `bits` per value, and each channel's f16 scale and min once per `group` tokens.
                let k = g * u64::from(bits) * d + d * 32;
                let v = g * grouped(bits, group);
                k + v
            }
        }
    }

    /// Exact bytes per cached token of a model with `layers` attention layers of `h_kv` KV heads of
    /// width `d`, scales and zero points included, in the steady state (fixed bytes aside): bits over
    /// one block of tokens, divided by 8 bits and the block's tokens, rounded up to a whole byte
    /// where they do not divide.
    pub fn bytes_per_token(self, layers: u32, h_kv: u32, d: u32) -> u64 {
        let heads = u64::from(layers) * u64::from(h_kv);
        (heads * self.bits_per_block(d)).div_ceil(8 * self.block_tokens())
    }

    /// Bytes that do not grow with the context: fp8's f32 scales (K and V of each layer, or of each
    /// KV head), and KIVI's `recent` tokens kept in f32 (beyond their quantised cost).
    pub fn fixed_bytes(self, layers: u32, h_kv: u32, d: u32) -> u64 {
        let (layers, h_kv, d) = (u64::from(layers), u64::from(h_kv), u64::from(d));
        match self {
            KvScheme::Fp8 { scope: ScaleScope::Tensor, .. } => layers * 2 * 4,
            KvScheme::Fp8 { scope: ScaleScope::Head, .. } => layers * h_kv * 2 * 4,
            KvScheme::Kivi { recent, .. } => layers * h_kv * 2 * u64::from(recent) * d * 4,
            _ => 0,
        }
    }

    /// What rounding `tensor` of a `tokens`-token cache gets (`None`: none, the f32 cache).
    /// Whether each token's values are rounded on their own (every group within one token's vector),
    /// so a decode cache can round a token once as it joins and never again.
    pub fn rounds_each_token_alone(self) -> bool {
        matches!(self, KvScheme::Fp32 | KvScheme::Fp16 | KvScheme::Int8 | KvScheme::IntGroup { .. })
    }

    pub fn pass(self, tensor: KvTensor, tokens: u32) -> Option<QuantPass> {
        let all = |rounding, boxed| Some(QuantPass { rounding, tokens, boxed });
        let asymmetric = |bits: u8| Rounding::Asymmetric { levels: (1u32 << bits.min(8)) - 1 };
        match self {
            KvScheme::Fp32 => None,
            KvScheme::Fp16 => all(Rounding::F16, [1, 1, u32::MAX]),
            KvScheme::Fp8 { format, scope: ScaleScope::Tensor } => all(Rounding::fp8(format), [u32::MAX; 3]),
            KvScheme::Fp8 { format, scope: ScaleScope::Head } => all(Rounding::fp8(format), [1, u32::MAX, u32::MAX]),
            KvScheme::Int8 => all(Rounding::Symmetric { levels: 127 }, [1, 1, u32::MAX]),
            KvScheme::IntGroup { bits, group } => all(asymmetric(bits), [1, 1, group]),
            KvScheme::Kivi { bits, group, recent } => {
                let older = tokens.saturating_sub(recent);
                let rounding = asymmetric(bits);
                Some(match tensor {
                    // Only whole groups of tokens are quantised; the rest wait in full precision.
                    KvTensor::K => QuantPass { rounding, tokens: older / group.max(1) * group, boxed: [1, group, 1] },
                    KvTensor::V => QuantPass { rounding, tokens: older, boxed: [1, 1, group] },
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped model's cache: 4 layers, 2 KV heads of width 32.
    fn tiny(s: KvScheme) -> u64 {
        s.bytes_per_token(4, 2, 32)
    }

    #[test]
    fn a_scheme_rounds_each_token_alone_when_its_boxes_hold_one_token() {
        for scheme in
            KvScheme::compared(32, 16).into_iter().chain([KvScheme::Fp8 { format: Fp8::E4m3, scope: ScaleScope::Head }])
        {
            let boxed = [KvTensor::K, KvTensor::V].map(|t| scheme.pass(t, 64).map_or(1, |p| p.boxed[1]));
            assert_eq!(scheme.rounds_each_token_alone(), boxed == [1, 1], "{}", scheme.name());
        }
    }

    #[test]
    fn bytes_per_token_of_the_tiny_model_by_hand() {
        // 4 layers x 2 KV heads = 8 head slots, each a K and a V vector of 32 values.
        // fp32: 8 x 2 x 32 x 4 B = 2048. fp16: 1024. fp8: 512 (its scales are fixed bytes).
        let [fp32, fp16, e4m3, e5m2, int8, int4, int2, kivi4, kivi2] = KvScheme::compared(32, 16).map(tiny);
        assert_eq!((fp32, fp16, e4m3, e5m2), (2048, 1024, 512, 512));
        // int8: each vector 32 B + an f32 scale 4 B = 36; x 16 vectors = 576.
        assert_eq!(int8, 576);
        // int4-g32: 32 x 4 bits = 16 B + one group's f16 scale and min 4 B = 20; x 16 = 320.
        assert_eq!(int4, 320);
        // int2-g32: 8 B + 4 B = 12; x 16 = 192.
        assert_eq!(int2, 192);
        // KIVI int4, G = 32: per head over 32 tokens, K is 32 x 32 x 4 bits + 32 channels x 32 bits
        // = 4096 + 1024, V is 32 tokens x (128 + 32) bits = 5120: 10240 bits / 32 tokens = 320 bits
        // = 40 B per head; x 8 heads = 320. KIVI int2: (2048 + 1024 + 32 x 96) / 32 = 192 bits = 24 B; x 8 = 192.
        assert_eq!((kivi4, kivi2), (320, 192));
    }

    #[test]
    fn group_size_changes_only_the_scales() {
        // int4-g16: 16 B of values + 2 groups x 4 B = 24 per vector; x 16 = 384.
        assert_eq!(tiny(KvScheme::IntGroup { bits: 4, group: 16 }), 384);
        // int4-g8: 16 + 4 x 4 = 32; x 16 = 512: as many bytes as fp8.
        assert_eq!(tiny(KvScheme::IntGroup { bits: 4, group: 8 }), 512);
        // A group wider than the head is one group per vector: g128 costs what g32 does at d = 32.
        assert_eq!(tiny(KvScheme::IntGroup { bits: 2, group: 128 }), 192);
        // KIVI int2, G = 128: K over 128 tokens: 128 x 64 + 32 x 32 = 9216 bits; V 128 x (64 + 32)
        // = 12288; 21504 / 128 = 168 bits = 21 B per head; x 8 = 168.
        assert_eq!(tiny(KvScheme::Kivi { bits: 2, group: 128, recent: 0 }), 168);
    }

    #[test]
    fn bytes_that_do_not_divide_round_up() {
        // One head of width 3, int2-g2: 6 bits + 2 groups x 32 = 70 bits per vector, 140 for K and V
        // = 17.5 B -> 18.
        assert_eq!(KvScheme::IntGroup { bits: 2, group: 2 }.bytes_per_token(1, 1, 3), 18);
    }

    #[test]
    fn fixed_bytes_by_hand() {
        let e4m3 = |scope| KvScheme::Fp8 { format: Fp8::E4m3, scope };
        // Per tensor: 4 layers x (K, V) x 4 B = 32; per head: x 2 heads = 64.
        assert_eq!(e4m3(ScaleScope::Tensor).fixed_bytes(4, 2, 32), 32);
        assert_eq!(e4m3(ScaleScope::Head).fixed_bytes(4, 2, 32), 64);
        // KIVI's 16 recent tokens in f32: 4 x 2 x 2 x 16 x 32 x 4 B = 32768.
        assert_eq!(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }.fixed_bytes(4, 2, 32), 32768);
        assert_eq!(KvScheme::Int8.fixed_bytes(4, 2, 32), 0);
    }

    #[test]
    fn names_follow_the_contract() {
        let names: Vec<String> = KvScheme::compared(32, 16).iter().map(|s| s.name()).collect();
        let want = ["fp32", "fp16", "fp8-e4m3", "fp8-e5m2", "int8", "int4-g32", "int2-g32", "kivi-int4", "kivi-int2"];
        assert_eq!(names, want);
    }

    #[test]
    fn passes_cut_the_cache_into_the_scheme_s_groups() {
        let layout = KvLayout { heads: 2, tokens: 100, d: 32, head_stride: 3200, token_stride: 32 };
        let count = |s: KvScheme, t| s.pass(t, 100).map(|p| p.groups(&layout));
        assert_eq!(count(KvScheme::Fp32, KvTensor::K), None);
        // fp8 per tensor: one group; int8: one per (head, token) = 200; int4-g16: 2 per vector = 400.
        assert_eq!(count(KvScheme::compared(32, 16)[2], KvTensor::K), Some(1));
        assert_eq!(count(KvScheme::Int8, KvTensor::V), Some(200));
        assert_eq!(count(KvScheme::IntGroup { bits: 4, group: 16 }, KvTensor::K), Some(400));
        // KIVI, G = 32, R = 16: 84 older tokens, so K's whole groups cover 64 tokens: 2 heads x 2
        // token groups x 32 channels = 128 groups; V's 84 tokens x 2 heads x 1 channel group = 168.
        let kivi = KvScheme::Kivi { bits: 2, group: 32, recent: 16 };
        assert_eq!(kivi.pass(KvTensor::K, 100).map(|p| p.tokens), Some(64));
        assert_eq!(count(kivi, KvTensor::K), Some(128));
        assert_eq!(count(kivi, KvTensor::V), Some(168));
        // Fewer tokens than the recent window: nothing is quantised.
        assert_eq!(kivi.pass(KvTensor::V, 10).map(|p| p.tokens), Some(0));
    }
}
