//! Owner of `shaders/kv_pack.wgsl`: tokens' K (or V) vectors quantised into a packed KV cache
//! ([`PackedLayout`]: codes in `u32` words, then scales), where they stay in the scheme's own bits
//! until `packed_attention` reads and dequantises them.

use bytemuck::{Pod, Zeroable};

use crate::cpu::kv_pack::PackRows;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch, PipelineCache};
use crate::gpu::{GpuContext, GpuError};
use crate::model::kv_packed::{KiviCache, PackedLayout};
use crate::model::kv_quant::KvTensor;

/// Keep in sync with `Params` in `shaders/kv_pack.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct KvPackParams {
    pub heads: u32,
    /// Tokens the launch covers, from `first` on.
    pub tokens: u32,
    pub d: u32,
    pub capacity: u32,
    pub first: u32,
    /// 0: fp16; 1: int8 with an f32 scale; 2: grouped, f16 scale and min; 3: fp8, scale in the tail.
    pub kind: u32,
    pub bits: u32,
    pub scale_group: u32,
    pub levels: u32,
    pub code_words: u32,
    pub scale_words: u32,
    pub words: u32,
    /// fp8's format: fraction bits, smallest normal exponent, largest value.
    pub mantissa: u32,
    pub min_exp: i32,
    pub max_value: f32,
    /// Where the cache's tail of scales starts (in words), and its words (0 but for fp8).
    pub tail: u32,
    pub tail_words: u32,
    /// Tokens from here on are f32 rows (KIVI's), from word `f32_at`, token t in row t % `ring`;
    /// KIVI's key block.
    pub packed_tokens: u32,
    pub f32_at: u32,
    pub block: u32,
    /// x holds tokens `x_start..`, `x_tokens` a head (older ones are read from the ring).
    pub x_start: u32,
    pub x_tokens: u32,
    pub ring: u32,
    pub pad: u32,
}

/// Invocations (vectors) per workgroup (the shader's `WG`).
const WORKGROUP: u32 = 64;

pub struct KvPack {
    launcher: Launcher<Self>,
    /// `scales`: fp8's tail, one workgroup a scale word.
    scales: PipelineCache,
}

impl Kernel for KvPack {
    const NAME: &'static str = "kv_pack";
    const SOURCE: &'static str = include_str!("../../shaders/kv_pack.wgsl");
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadOnly, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = KvPackParams;

    /// One invocation per vector.
    fn workgroups(p: &KvPackParams) -> Option<u64> {
        Some((u64::from(p.heads) * u64::from(p.tokens)).div_ceil(u64::from(WORKGROUP)))
    }
}

impl KvPack {
    pub fn new(ctx: &GpuContext) -> Self {
        let launcher = Launcher::new(ctx);
        let scales = launcher.pipelines_of(ctx, Self::SOURCE, "scales");
        Self { launcher, scales }
    }

    /// Prepares the packing of `x` (`[heads, tokens, d]` f32) into `packed` (`[heads, capacity, words]`
    /// u32, then its tail) at `rows`, after checking that both hold what the launch covers: first, for
    /// fp8 starting the cache (row 0), the tail's scales from `x`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &wgpu::Buffer,
        packed: &wgpu::Buffer,
        rows: PackRows,
        layout: PackedLayout,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let params = params(rows, layout, [x.size() / 4, packed.size() / 4])?;
        let mut out = Vec::new();
        if params.tail_words > 0 && rows.start == 0 {
            let pipeline = self.scales.get(&ctx.device, &[("WG", WORKGROUP)]);
            out.push(self.launcher.dispatch_workgroups(
                ctx,
                pipeline,
                &params,
                &[x, packed],
                params.tail_words.into(),
            )?);
        }
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        out.push(self.launcher.dispatch(ctx, pipeline, &params, &[x, packed])?);
        Ok(out)
    }

    /// Prepares the tokens of `x` (`[heads, n, d]` f32: a pass's whole text, or a decode step's new
    /// tokens) joining KIVI's cache of `tensor`, `kivi` saying the cache after them, after checking
    /// that both buffers hold them: the launches of [`kivi_launches`] (`cpu::kv_pack::kivi_append`'s
    /// two phases).
    pub fn prepare_kivi(
        &self,
        ctx: &GpuContext,
        x: &wgpu::Buffer,
        packed: &wgpu::Buffer,
        (heads, new_tokens): (u32, u32),
        kivi: KiviCache,
        tensor: KvTensor,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let launches = kivi_launches(heads, new_tokens, kivi, tensor, [x.size() / 4, packed.size() / 4])?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        launches.iter().map(|params| self.launcher.dispatch(ctx, pipeline.clone(), params, &[x, packed])).collect()
    }
}

/// The launch's params, after checking `rows` against `x`'s floats and the cache's words.
pub fn params(rows: PackRows, layout: PackedLayout, [floats, words]: [u64; 2]) -> Result<KvPackParams, GpuError> {
    rows.check(&layout, floats, words).map_err(GpuError::InvalidInput)?;
    let PackRows { heads, tokens, capacity, start } = rows;
    let ends = start + tokens;
    let (mantissa, min_exp, max_value) = layout.fp8_format().unwrap_or((0, 0, 0.0));
    let tail = u32::try_from(layout.tail_at(heads, capacity))
        .map_err(|_| GpuError::LimitExceeded(format!("a packed cache of {capacity} rows of {heads} heads")))?;
    Ok(KvPackParams {
        heads,
        tokens,
        d: layout.d,
        capacity,
        first: start,
        kind: layout.shader_kind(),
        bits: layout.bits(),
        scale_group: layout.group(),
        levels: layout.levels(),
        code_words: layout.code_words(),
        scale_words: layout.scale_words(),
        words: layout.words(),
        mantissa,
        min_exp,
        max_value,
        tail,
        tail_words: layout.tail_words(heads),
        packed_tokens: ends,
        f32_at: 0,
        block: layout.block_tokens(),
        x_start: start,
        x_tokens: tokens,
        ring: 0,
        pad: 0,
    })
}

/// The launches that add the last `new_tokens` tokens of `kivi` (the cache after them) to KIVI's
/// cache of `tensor` for `heads` heads, after checking `x`'s floats and the cache's words: the
/// tokens they leave the recent window quantised (older ones read from the ring), then the new ones
/// still waiting written to the ring. A pass over a whole text reads nothing from the ring, so one
/// launch does both. Launches with nothing to do are left out.
pub fn kivi_launches(
    heads: u32,
    new_tokens: u32,
    kivi: KiviCache,
    tensor: KvTensor,
    [floats, words]: [u64; 2],
) -> Result<Vec<KvPackParams>, GpuError> {
    let needed = kivi.words(tensor, heads);
    let values = u64::from(heads) * u64::from(new_tokens) * u64::from(kivi.d);
    if new_tokens > kivi.tokens
        || kivi.tokens > kivi.capacity
        || values > floats
        || needed > words
        || needed.max(values) > u64::from(u32::MAX)
    {
        return Err(GpuError::InvalidInput(format!(
            "kv_pack: KIVI's {tensor:?} of {heads} heads x {new_tokens} new tokens of {} values, {} of {} in the \
             cache, does not fit {floats} floats and a cache of {words} words",
            kivi.d, kivi.tokens, kivi.capacity
        )));
    }
    let start = kivi.tokens - new_tokens;
    let packed = kivi.packed_tokens(tensor);
    let ranges: [std::ops::Range<u32>; 2] = match start {
        0 => [0..kivi.tokens, 0..0],
        _ => [kivi.holding(start).packed_tokens(tensor)..packed, start.max(packed)..kivi.tokens],
    };
    let layout = kivi.layout(tensor);
    let capacity = kivi.packed_capacity(tensor);
    let base = params(PackRows { heads, tokens: 0, capacity, start: 0 }, layout, [0, needed])?;
    Ok(ranges
        .into_iter()
        .filter(|tokens| !tokens.is_empty())
        .map(|tokens| KvPackParams {
            tokens: tokens.len() as u32,
            first: tokens.start,
            packed_tokens: packed,
            f32_at: kivi.f32_rows_at(tensor, heads) as u32,
            x_start: start,
            x_tokens: new_tokens,
            ring: kivi.ring(tensor),
            ..base
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::{Fp8, KvScheme, ScaleScope};

    #[test]
    fn params_are_96_bytes() {
        assert_eq!(size_of::<KvPackParams>(), 96);
    }

    #[test]
    fn kivi_launches_of_the_trained_model_s_text_and_of_a_decode_cache() {
        // KIVI int2, G = 32, R = 16, 98 tokens of 2 heads of 32 (kv_packed's hand test). A pass: one
        // launch over the 98 tokens; K packs 64 in blocks of 32, 2 code words a token, its 34 f32
        // rows from word 384 of 2,560; V packs 82 tokens of 3 words, 16 f32 rows from 492 of 1,516.
        let scheme = KvScheme::Kivi { bits: 2, group: 32, recent: 16 };
        let kivi = KiviCache::of(scheme, 32, 98).unwrap();
        let [k] = kivi_launches(2, 98, kivi, KvTensor::K, [6272, 2560]).unwrap()[..] else { panic!("one launch") };
        assert_eq!((k.kind, k.first, k.tokens, k.capacity, k.packed_tokens), (4, 0, 98, 64, 64));
        assert_eq!((k.f32_at, k.ring, k.block, k.code_words, k.x_start, k.x_tokens), (384, 34, 32, 2, 0, 98));
        let [v] = kivi_launches(2, 98, kivi, KvTensor::V, [6272, 1516]).unwrap()[..] else { panic!("one launch") };
        assert_eq!(
            (v.kind, v.tokens, v.capacity, v.packed_tokens, v.f32_at, v.ring, v.words),
            (2, 98, 82, 82, 492, 16, 3)
        );
        assert!(kivi_launches(2, 98, kivi, KvTensor::K, [6271, 2560]).is_err());
        assert!(kivi_launches(2, 98, kivi, KvTensor::V, [6272, 1515]).is_err());
        // A decode cache for 128 (K: 3,584 words, its ring from 576). Token 97 joining quantises
        // nothing (still 64 keys), so one launch writes it to the ring. Token 111 completes K's
        // third block: 64..96 quantised (reading the ring), then 111 to the ring.
        let decoding = KiviCache::decoding(scheme, 32, 128).unwrap();
        let step = |tokens| kivi_launches(2, 1, decoding.holding(tokens), KvTensor::K, [64, 3584]).unwrap();
        let [write] = step(98)[..] else { panic!("one launch") };
        assert_eq!(
            (write.first, write.tokens, write.x_start, write.x_tokens, write.f32_at, write.ring),
            (97, 1, 97, 1, 576, 47)
        );
        let [quantise, write] = step(112)[..] else { panic!("two launches") };
        assert_eq!((quantise.first, quantise.tokens, quantise.packed_tokens, quantise.capacity), (64, 32, 96, 96));
        assert_eq!((write.first, write.tokens, write.x_start), (111, 1, 111));
        // More new tokens than the cache holds, or a cache past its capacity, are refused.
        assert!(kivi_launches(2, 99, kivi, KvTensor::K, [99_999, 99_999]).is_err());
        assert!(kivi_launches(2, 1, decoding.holding(129), KvTensor::K, [99_999, 99_999]).is_err());
    }

    #[test]
    fn params_of_int4_g32_and_a_cache_one_word_short() {
        // 2 heads x 3 tokens of 32 values at rows 5..8 of 8: int4-g32 is 4 code words + 1 scale word.
        let layout = PackedLayout::of(KvScheme::IntGroup { bits: 4, group: 32 }, 32).unwrap();
        let rows = PackRows { heads: 2, tokens: 3, capacity: 8, start: 5 };
        let p = params(rows, layout, [192, 80]).unwrap();
        assert_eq!((p.kind, p.bits, p.scale_group, p.levels, p.code_words, p.words), (2, 4, 32, 15, 4, 5));
        // The cache is 2 x 8 x 5 = 80 words: 79 is one short; 3 tokens from row 6 pass its 8 rows.
        assert!(params(rows, layout, [192, 79]).is_err());
        assert!(params(PackRows { start: 6, ..rows }, layout, [192, 80]).is_err());
    }

    #[test]
    fn fp8_params_point_at_the_tail() {
        // E5M2 per head, 2 heads x 8 rows of 32 values (8 words): the tail starts at 2 x 8 x 8 = 128
        // and holds 2 scales; a cache of 129 words is one short.
        let scheme = KvScheme::Fp8 { format: Fp8::E5m2, scope: ScaleScope::Head };
        let layout = PackedLayout::of(scheme, 32).unwrap();
        let rows = PackRows { heads: 2, tokens: 3, capacity: 8, start: 0 };
        let p = params(rows, layout, [192, 130]).unwrap();
        assert_eq!((p.kind, p.bits, p.scale_words, p.words), (3, 8, 0, 8));
        assert_eq!((p.mantissa, p.min_exp, p.max_value, p.tail, p.tail_words), (2, -14, 57344.0, 128, 2));
        assert!(params(rows, layout, [192, 129]).is_err());
    }
}
