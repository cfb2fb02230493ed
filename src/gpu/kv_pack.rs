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
    pub tokens: u32,
    pub d: u32,
    pub capacity: u32,
    pub start: u32,
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
    /// Tokens packed (all but for KIVI), where the f32 rows of the rest start, KIVI's key block.
    pub packed_tokens: u32,
    pub f32_at: u32,
    pub block: u32,
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

    /// Prepares the packing of `x` (`[heads, tokens, d]` f32, a pass's whole text) into KIVI's cache
    /// of `tensor` ([`KiviCache`]), after checking that both buffers hold it.
    pub fn prepare_kivi(
        &self,
        ctx: &GpuContext,
        x: &wgpu::Buffer,
        packed: &wgpu::Buffer,
        heads: u32,
        kivi: KiviCache,
        tensor: KvTensor,
    ) -> Result<Dispatch, GpuError> {
        let params = kivi_params(heads, kivi, tensor, [x.size() / 4, packed.size() / 4])?;
        let pipeline = self.launcher.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        self.launcher.dispatch(ctx, pipeline, &params, &[x, packed])
    }
}

/// The launch's params, after checking `rows` against `x`'s floats and the cache's words.
pub fn params(rows: PackRows, layout: PackedLayout, [floats, words]: [u64; 2]) -> Result<KvPackParams, GpuError> {
    rows.check(&layout, floats, words).map_err(GpuError::InvalidInput)?;
    let PackRows { heads, tokens, capacity, start } = rows;
    let (mantissa, min_exp, max_value) = layout.fp8_format().unwrap_or((0, 0, 0.0));
    let tail = u32::try_from(layout.tail_at(heads, capacity))
        .map_err(|_| GpuError::LimitExceeded(format!("a packed cache of {capacity} rows of {heads} heads")))?;
    Ok(KvPackParams {
        heads,
        tokens,
        d: layout.d,
        capacity,
        start,
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
        packed_tokens: tokens,
        f32_at: 0,
        block: layout.block_tokens(),
    })
}

/// The launch that packs KIVI's cache of `tensor` for `heads` heads, after checking `x`'s floats
/// and the cache's words.
pub fn kivi_params(
    heads: u32,
    kivi: KiviCache,
    tensor: KvTensor,
    [floats, words]: [u64; 2],
) -> Result<KvPackParams, GpuError> {
    let needed = kivi.words(tensor, heads);
    let values = u64::from(heads) * u64::from(kivi.tokens) * u64::from(kivi.d);
    if values > floats || needed > words || needed.max(values) > u64::from(u32::MAX) {
        return Err(GpuError::InvalidInput(format!(
            "kv_pack: KIVI's {tensor:?} of {heads} heads x {} tokens of {} values does not fit {floats} floats and \
             a cache of {words} words",
            kivi.tokens, kivi.d
        )));
    }
    let layout = kivi.layout(tensor);
    let packed_tokens = kivi.packed_tokens(tensor);
    let rows = PackRows { heads, tokens: packed_tokens, capacity: packed_tokens, start: 0 };
    Ok(KvPackParams {
        tokens: kivi.tokens,
        f32_at: kivi.f32_rows_at(tensor, heads) as u32,
        ..params(rows, layout, [values, needed])?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::{Fp8, KvScheme, ScaleScope};

    #[test]
    fn params_are_80_bytes() {
        assert_eq!(size_of::<KvPackParams>(), 80);
    }

    #[test]
    fn kivi_params_of_the_trained_model_s_text() {
        // KIVI int2, G = 32, R = 16, 98 tokens of 2 heads of 32 (kv_packed's hand test): K packs 64
        // tokens in blocks of 32, 2 code words a token, its f32 rows from word 384 of 2,560; V packs
        // 82 tokens of 3 words, f32 rows from 492 of 1,516.
        let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, 32, 98).unwrap();
        let k = kivi_params(2, kivi, KvTensor::K, [6272, 2560]).unwrap();
        assert_eq!(
            (k.kind, k.tokens, k.capacity, k.packed_tokens, k.f32_at, k.block, k.code_words),
            (4, 98, 64, 64, 384, 32, 2)
        );
        let v = kivi_params(2, kivi, KvTensor::V, [6272, 1516]).unwrap();
        assert_eq!(
            (v.kind, v.tokens, v.capacity, v.packed_tokens, v.f32_at, v.block, v.words),
            (2, 98, 82, 82, 492, 1, 3)
        );
        assert!(kivi_params(2, kivi, KvTensor::K, [6271, 2560]).is_err());
        assert!(kivi_params(2, kivi, KvTensor::V, [6272, 1515]).is_err());
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
