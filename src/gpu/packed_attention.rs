//! Owner of `shaders/packed_attention.wgsl`: attention of a decode step's queries (or a prefill's)
//! over a packed quantised KV cache, each K and V value dequantised as the kernel reads it, so the
//! bytes read are the scheme's ([`PackedLayout`]). A workgroup owns the query heads of one KV head
//! (each value decoded serves them all) and a slice of their keys ([`PackedPlan`]); where a launch
//! has several slices, the shader's `combine` weighs their outputs into O (flash-decoding).

use bytemuck::{Pod, Zeroable};

use crate::attention::AttentionShape;
use crate::gpu::kernel::{CpuTwin, Kernel, Launcher};
use crate::gpu::launch::{Binding, Dispatch};
use crate::gpu::{GpuContext, GpuError};
use crate::model::Mask;
use crate::model::kv_packed::{PackedCaches, PackedLayout};
use crate::model::kv_quant::KvTensor;
use crate::model::limits::{KERNEL_MAX_HEAD_DIM, kernels_take_head_dim};

/// Keep in sync with `Params` in `shaders/packed_attention.wgsl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct PackedAttentionParams {
    pub n_q: u32,
    pub n_kv: u32,
    pub h_q: u32,
    pub group: u32,
    pub kv_stride: u32,
    pub d: u32,
    pub mask_kind: u32,
    pub mask_size: u32,
    pub scale: f32,
    pub q_offset: u32,
    pub h_kv: u32,
    /// Tiles of [`PackedPlan::rows`] rows per KV head, and slices of each tile's keys.
    pub tiles: u32,
    pub splits: u32,
    pub words: u32,
    /// fp8: where each cache's tail of scales starts (in words), and 1 where it holds one a KV head.
    pub scale_tail: u32,
    pub scale_per_head: u32,
    /// KIVI: keys below these are packed, the rest f32 rows from these words on, in rings of
    /// `k_ring` / `v_ring` rows a head; a head's room for key blocks and packed values (`n_kv`,
    /// `n_kv` and zeros for other caches).
    pub k_packed: u32,
    pub v_packed: u32,
    pub k_f32_at: u32,
    pub v_f32_at: u32,
    pub k_ring: u32,
    pub v_ring: u32,
    pub k_blocks: u32,
    pub v_rows: u32,
}

/// Loops over the rows and owned channels written out natively (CPU adapters then keep the rows'
/// scores and accumulators in registers), kept as loops in the browser: the forward kernel's choice.
const UNROLL_BY_DEFAULT: bool = !cfg!(target_arch = "wasm32");

/// Invocations per workgroup (the shader's `WG`: its reductions and `reduced` array assume 64).
const WORKGROUP: u32 = 64;
/// Keys a workgroup scores at a time (the shader's `CHUNK`). A slice may hold fewer: keys are shared
/// evenly among the slices (200 keys make two slices of 100).
const CHUNK: u32 = 128;
/// Rows a workgroup may own (the shader's `reduced` holds 8 x 64), and queries' floats it stages.
const MAX_ROWS: u32 = 8;
const STAGED_FLOATS: u32 = 1024;
/// Workgroups a launch aims for, by slicing the keys (flash-decoding): enough for a GPU's cores
/// when a decode step has only a few KV heads' rows.
const TARGET_WORKGROUPS: u32 = 128;
/// Most slices of one tile's keys (what `combine` reads per output).
const MAX_SPLITS: u32 = 64;

/// The buffers of one launch: Q and O `[h_q, n_q, d]` f32, K and V packed `[h_kv, kv_stride, words]`.
pub struct PackedBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
}

/// One launch: the queries are the last `shape.n_q` of `shape.n_kv` positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PackedLaunch {
    pub shape: AttentionShape,
    pub kv_stride: u32,
    pub caches: PackedCaches,
    pub mask: Mask,
    pub scale: f32,
}

/// How a launch is cut up: rows a workgroup owns (query heads of one KV head, then queries), tiles
/// of them per KV head, and slices of each tile's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedPlan {
    pub rows: u32,
    pub tiles: u32,
    pub splits: u32,
}

impl PackedPlan {
    /// Rows as many as fit (every query head of a GQA group shares each value decoded, within the
    /// staged queries' 1,024 floats), and slices of at least one chunk of keys each until the launch
    /// has about [`TARGET_WORKGROUPS`].
    pub fn of(shape: AttentionShape) -> PackedPlan {
        // In u64: a shape is validated after planning (`params`), and an absurd one must not overflow here.
        let rows_total = u32::try_from(u64::from(shape.n_q) * u64::from(shape.group_size())).unwrap_or(u32::MAX).max(1);
        let rows = MAX_ROWS.min(STAGED_FLOATS / shape.d.max(1)).min(rows_total).max(1);
        let tiles = rows_total.div_ceil(rows);
        let base = tiles.saturating_mul(shape.h_kv).max(1);
        let splits = shape.n_kv.div_ceil(CHUNK).min(TARGET_WORKGROUPS.div_ceil(base)).clamp(1, MAX_SPLITS);
        PackedPlan { rows, tiles, splits }
    }

    /// Output channels each invocation owns while it adds p V: a few codes of one word, at most 32
    /// accumulators with the rows (the shader's `CH`), and enough for 64 invocations to cover a key.
    pub fn channels(&self, layout: PackedLayout) -> u32 {
        let per_word = 32 / layout.bits();
        layout.d.div_ceil(WORKGROUP).max(per_word.min(32 / self.rows).min(layout.d))
    }

    /// Floats of the slices' partial O and log-sum-exp (none with one slice).
    pub fn partial_floats(&self, shape: AttentionShape) -> u64 {
        if self.splits == 1 {
            return 0;
        }
        u64::from(self.splits) * u64::from(shape.h_q) * u64::from(shape.n_q) * (u64::from(shape.d) + 1)
    }
}

pub struct PackedAttention {
    launcher: Launcher<Self>,
    combine: Launcher<PackedCombine>,
    /// Bound as the partials of a launch of one slice, which writes O straight away.
    no_partials: wgpu::Buffer,
    /// The slices' partials, kept for the next launches (the largest any launch has needed): only
    /// this kernel's launches bind it, each pass's slices write every partial its `combine` reads,
    /// and a pass's two dispatches go in one submission with nothing of this kernel between them
    /// (every caller submits a prepared pass whole), so passes kept and submitted again share it too.
    partials: std::sync::Mutex<Option<wgpu::Buffer>>,
}

impl Kernel for PackedAttention {
    const NAME: &'static str = "packed_attention";
    const SOURCE: &'static str = include_str!("../../shaders/packed_attention.wgsl");
    const BINDINGS: &'static [Binding] = &[
        Binding::Uniform,
        Binding::ReadWrite,
        Binding::ReadWrite,
        Binding::ReadOnly,
        Binding::ReadOnly,
        Binding::ReadOnly,
    ];
    const CPU_TWIN: CpuTwin = CpuTwin::Named;
    type Params = PackedAttentionParams;

    /// One workgroup per (KV head, tile of rows, slice of keys).
    fn workgroups(p: &PackedAttentionParams) -> Option<u64> {
        Some(u64::from(p.h_kv) * u64::from(p.tiles) * u64::from(p.splits))
    }
}

/// `packed_attention.wgsl`'s `combine`: the slices' O weighed into O; binds the first three of
/// `main`'s bindings.
pub struct PackedCombine;

impl Kernel for PackedCombine {
    const NAME: &'static str = "packed_attention";
    const SOURCE: &'static str = PackedAttention::SOURCE;
    const ENTRY_POINT: &'static str = "combine";
    const BINDINGS: &'static [Binding] = &[Binding::Uniform, Binding::ReadWrite, Binding::ReadWrite];
    const CPU_TWIN: CpuTwin =
        CpuTwin::Skipped("the slices' weighted sum: tests compare the whole launch with packed_attention's twin");
    type Params = PackedAttentionParams;

    /// One workgroup per output row.
    fn workgroups(p: &PackedAttentionParams) -> Option<u64> {
        Some(u64::from(p.h_q) * u64::from(p.n_q))
    }
}

impl PackedAttention {
    pub fn new(ctx: &GpuContext) -> Self {
        let no_partials = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("no partials"),
            size: 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let launcher = Launcher::new(ctx);
        launcher.pipelines().set_unrolled(UNROLL_BY_DEFAULT);
        Self { launcher, combine: Launcher::new(ctx), no_partials, partials: std::sync::Mutex::new(None) }
    }

    /// Prepares one launch (its slices, then `combine` where there are several), after checking the
    /// shape and that every buffer holds what it covers.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        b: &PackedBuffers<'_>,
        launch: PackedLaunch,
    ) -> Result<Vec<Dispatch>, GpuError> {
        let plan = PackedPlan::of(launch.shape);
        let params = params(launch, plan, [b.q, b.k, b.v, b.o].map(|x| x.size() / 4))?;
        let layout = launch.caches.values();
        let constants = [
            ("KIND", layout.shader_kind()),
            ("BITS", layout.bits()),
            ("SCALE_GROUP", layout.group()),
            ("FP8_MANTISSA", layout.fp8_format().map_or(3, |(mantissa, _, _)| mantissa)),
            ("FP8_BIAS", layout.fp8_format().map_or(7, |(_, min_exp, _)| (1 - min_exp) as u32)),
            ("D", layout.d),
            ("ROWS", plan.rows),
            ("PER_WORD", 32 / layout.bits()),
            ("CH", plan.channels(layout)),
            ("KIVI_CACHE", u32::from(matches!(launch.caches, PackedCaches::Kivi(_)))),
            (
                "K_BLOCK",
                if let PackedCaches::Kivi(kivi) = launch.caches { kivi.layout(KvTensor::K).block_tokens() } else { 1 },
            ),
        ];
        let pipeline = self.launcher.pipelines().get_specialised(&ctx.device, &constants, &[("WG", WORKGROUP)]);
        if plan.splits == 1 {
            return Ok(vec![self.launcher.dispatch(
                ctx,
                pipeline,
                &params,
                &[b.o, &self.no_partials, b.q, b.k, b.v],
            )?]);
        }
        let partials = self.partials_for(ctx, plan.partial_floats(launch.shape) * 4)?;
        let slices = self.launcher.dispatch(ctx, pipeline, &params, &[b.o, &partials, b.q, b.k, b.v])?;
        let combine = self.combine.pipelines().get(&ctx.device, &[("WG", WORKGROUP)]);
        Ok(vec![slices, self.combine.dispatch(ctx, combine, &params, &[b.o, &partials])?])
    }

    /// The kept partials buffer, made (larger) only when a launch needs more than it holds: not a new
    /// one per layer and decoded token.
    fn partials_for(&self, ctx: &GpuContext, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
        let mut kept = self.partials.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(buffer) = kept.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(buffer.clone());
        }
        let buffer = ctx.storage_output("packed partials", bytes)?;
        *kept = Some(buffer.clone());
        Ok(buffer)
    }

    /// Bytes of the kept partials buffer (0 before any launch of several slices).
    pub fn partials_bytes(&self) -> u64 {
        self.partials.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map_or(0, |b| b.size())
    }
}

/// The launch's params under `plan`, after checking it against the buffers' lengths in 4-byte words
/// (q, k, v, o).
pub fn params(launch: PackedLaunch, plan: PackedPlan, words: [u64; 4]) -> Result<PackedAttentionParams, GpuError> {
    let PackedLaunch { shape, kv_stride, caches, mask, scale } = launch;
    let AttentionShape { h_q, h_kv, n_q, n_kv, d } = shape;
    let rows = u64::from(h_q) * u64::from(n_q) * u64::from(d);
    let [k_words, v_words] = [KvTensor::K, KvTensor::V].map(|t| caches.words(t, h_kv, kv_stride));
    let needs = [rows, k_words, v_words, rows];
    let biggest = rows.max(k_words).max(v_words).max(plan.partial_floats(shape));
    let fits = needs.iter().zip(words).all(|(&need, have)| need <= have) && biggest <= u64::from(u32::MAX);
    let kivi = match caches {
        PackedCaches::Kivi(kivi) => Some(kivi),
        PackedCaches::Rows(_) => None,
    };
    let whole_text = kivi.is_none_or(|kivi| kivi.tokens == n_kv && kivi.tokens <= kivi.capacity);
    if shape.validate().is_err()
        || !kernels_take_head_dim(d)
        || caches.d() != d
        || kv_stride < n_kv
        || !fits
        || !whole_text
    {
        return Err(GpuError::InvalidInput(format!(
            "packed_attention: {h_q} heads on {h_kv} x {n_q} queries x {n_kv} keys (stride {kv_stride}) x {d} \
             (at most {KERNEL_MAX_HEAD_DIM}; packed for d = {}) do not fit buffers of {words:?} words",
            caches.d()
        )));
    }
    let (mask_kind, mask_size) = mask.to_gpu();
    let layout = caches.values();
    // In u32: every word offset is within a cache of at most u32::MAX words (`fits`).
    let packed = |t| kivi.map_or(n_kv, |kivi| kivi.packed_tokens(t));
    let f32_at = |t| kivi.map_or(0, |kivi| kivi.f32_rows_at(t, h_kv) as u32);
    let ring = |t| kivi.map_or(0, |kivi| kivi.ring(t));
    Ok(PackedAttentionParams {
        n_q,
        n_kv,
        h_q,
        group: shape.group_size(),
        kv_stride,
        d,
        mask_kind,
        mask_size,
        scale,
        q_offset: shape.q_offset(),
        h_kv,
        tiles: plan.tiles,
        splits: plan.splits,
        words: layout.words(),
        scale_tail: layout.tail_at(h_kv, kv_stride) as u32,
        scale_per_head: u32::from(layout.tail_words(h_kv) > 1),
        k_packed: packed(KvTensor::K),
        v_packed: packed(KvTensor::V),
        k_f32_at: f32_at(KvTensor::K),
        v_f32_at: f32_at(KvTensor::V),
        k_ring: ring(KvTensor::K),
        v_ring: ring(KvTensor::V),
        k_blocks: kivi.map_or(0, |kivi| kivi.key_blocks()),
        v_rows: kivi.map_or(0, |kivi| kivi.packed_capacity(KvTensor::V)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kv_quant::KvScheme;

    #[test]
    fn plans_share_a_gqa_group_s_values_and_slice_long_caches() {
        // Llama 3 8B's decode step at 4,096 keys: a workgroup owns the 4 query heads of a KV head; 8
        // KV heads x 1 tile = 8 workgroups, so 16 slices of 256 keys make 128.
        let decode = AttentionShape { h_q: 32, h_kv: 8, n_q: 1, n_kv: 4096, d: 128 };
        let plan = PackedPlan::of(decode);
        assert_eq!(plan, PackedPlan { rows: 4, tiles: 1, splits: 16 });
        // Partials: 16 slices x 32 rows x (128 + 1) floats.
        assert_eq!(plan.partial_floats(decode), 16 * 32 * 129);
        // A prefill of 4 heads on 2 (128 tokens, d = 32): 256 rows of a KV head in
        // tiles of 8 (8 x 32 floats staged), one slice of the 128 keys (a chunk), no partials.
        let prefill = AttentionShape { h_q: 4, h_kv: 2, n_q: 128, n_kv: 128, d: 32 };
        assert_eq!(PackedPlan::of(prefill), PackedPlan { rows: 8, tiles: 32, splits: 1 });
        assert_eq!(PackedPlan::of(prefill).partial_floats(prefill), 0);
        // A head of 1,024 stages one row; 200 keys are cut into two slices of 100.
        let wide = AttentionShape { h_q: 2, h_kv: 1, n_q: 1, n_kv: 200, d: 1024 };
        assert_eq!(PackedPlan::of(wide), PackedPlan { rows: 1, tiles: 2, splits: 2 });
        // An absurd shape is planned without overflow (`params` then refuses it).
        let absurd = AttentionShape { h_q: 1 << 16, h_kv: 1, n_q: u32::MAX, n_kv: u32::MAX, d: 1024 };
        assert_eq!(PackedPlan::of(absurd).tiles, u32::MAX);
    }

    #[test]
    fn params_are_96_bytes() {
        assert_eq!(size_of::<PackedAttentionParams>(), 96);
    }

    #[test]
    fn params_refuse_short_buffers_and_a_layout_of_another_width() {
        // 4 query heads on 2 KV heads, 3 queries of 10 keys, stride 16, d = 32, int2-g32 (3 words):
        // Q/O 4 x 3 x 32 = 384 floats, each cache 2 x 16 x 3 = 96 words.
        let layout = PackedLayout::of(KvScheme::IntGroup { bits: 2, group: 32 }, 32).unwrap();
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 3, n_kv: 10, d: 32 };
        let launch = PackedLaunch { shape, kv_stride: 16, caches: layout.into(), mask: Mask::Causal, scale: 0.5 };
        let plan = PackedPlan::of(shape);
        let p = params(launch, plan, [384, 96, 96, 384]).unwrap();
        assert_eq!((p.group, p.q_offset, p.words, p.tiles, p.splits), (2, 7, 3, 1, 1));
        assert_eq!((p.k_packed, p.v_packed, p.k_f32_at, p.v_f32_at), (10, 10, 0, 0));
        assert!(params(launch, plan, [384, 95, 96, 384]).is_err());
        assert!(params(launch, plan, [384, 96, 96, 383]).is_err());
        assert!(params(PackedLaunch { kv_stride: 9, ..launch }, plan, [999; 4]).is_err());
        let other = PackedLayout::of(KvScheme::Fp16, 64).unwrap();
        assert!(params(PackedLaunch { caches: other.into(), ..launch }, plan, [9999; 4]).is_err());
    }

    #[test]
    fn kivi_params_point_at_its_blocks_and_f32_rows() {
        // KIVI int2, G = 32, R = 16, 98 tokens, 2 KV heads of 32 (kv_packed's hand test): K packs 64
        // tokens, its f32 rows from word 384, of 2,560 words; V packs 82, f32 rows from 492, of 1,516.
        use crate::model::kv_packed::KiviCache;
        let kivi = KiviCache::of(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, 32, 98).unwrap();
        let shape = AttentionShape { h_q: 4, h_kv: 2, n_q: 98, n_kv: 98, d: 32 };
        let launch =
            PackedLaunch { shape, kv_stride: 98, caches: PackedCaches::Kivi(kivi), mask: Mask::Causal, scale: 1.0 };
        let plan = PackedPlan::of(shape);
        let o = 4 * 98 * 32;
        let p = params(launch, plan, [o, 2560, 1516, o]).unwrap();
        assert_eq!((p.k_packed, p.v_packed, p.k_f32_at, p.v_f32_at, p.words), (64, 82, 384, 492, 3));
        assert_eq!((p.k_ring, p.v_ring, p.k_blocks, p.v_rows), (34, 16, 2, 82));
        // The same 98 tokens in a decode cache for 128: 3 key blocks and 112 values a head, rings of
        // 47 and 16 rows (kv_packed's hand test), so K's f32 rows start at 2 x 3 x 96 = 576.
        let decoding = KiviCache::decoding(KvScheme::Kivi { bits: 2, group: 32, recent: 16 }, 32, 128).unwrap();
        let caches = PackedCaches::Kivi(decoding.holding(98));
        let d = params(PackedLaunch { caches, ..launch }, plan, [o, 3584, 1696, o]).unwrap();
        assert_eq!((d.k_packed, d.v_packed, d.k_f32_at, d.v_f32_at), (64, 82, 576, 672));
        assert_eq!((d.k_ring, d.v_ring, d.k_blocks, d.v_rows), (47, 16, 3, 112));
        assert!(params(PackedLaunch { caches, ..launch }, plan, [o, 3583, 1696, o]).is_err());
        assert!(params(launch, plan, [o, 2559, 1516, o]).is_err());
        assert!(params(launch, plan, [o, 2560, 1515, o]).is_err());
        // Its keys are the cache's tokens, all of them.
        let fewer = AttentionShape { n_q: 97, n_kv: 97, ..shape };
        assert!(params(PackedLaunch { shape: fewer, ..launch }, PackedPlan::of(fewer), [99_999; 4]).is_err());
    }
}
