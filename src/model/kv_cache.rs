//! KV-cache memory: elements per token per layer, bytes per token, the total at a context, the
//! split by layer type, and the longest context that fits a memory budget.
//!
//! Per layer and token the cache holds:
//! - standard attention: `n_kv_heads * head_dim * 2` elements (K and V), or `* 1` with K=V;
//! - MLA: `kv_lora_rank + qk_rope_head_dim` elements (one latent plus the shared RoPE key), plus
//!   `index_head_dim` with DeepSeek V3.2's lightning indexer (its key, cached at the same dtype as the
//!   latent, as transformers' cache holds it; [`fp8_indexer_key_bytes`] gives DeepSeek's own fp8 form)
//!   in each layer that runs the indexer (every layer in V3.2; in GLM-5.2 the layers its
//!   `indexer_types` marks `full`, see [`crate::model::config::Mla::keeps_indexer_key`]);
//! - a layer that reuses another layer's cache (cross-layer sharing): nothing;
//! - a layer without softmax attention (state-space, linear attention, convolution, feed-forward
//!   only): nothing per token. Its recurrent state has a fixed size per sequence ([`state_bytes`]),
//!   the same at every context, and is counted apart from the KV cache.
//!
//! A layer holds [`LayerKind::cached_tokens`] tokens: all `n` for global layers, `min(n, W)` for
//! sliding, `min(n, C)` for chunked. Totals are summed in *bits* and divided by 8 once, rounding up,
//! so INT4 and 2-bit are exact. All arithmetic is checked `u128`: an absurd size gives
//! [`SizeOverflow`], never a panic or a wrapped number.

use std::fmt;

use super::config::Model;
use super::dtype::{DType, bits_to_bytes_ceil};
use super::params::model_params;
use super::schedule::LayerKind;

/// A figure does not fit in `u128` (only reachable with models that skipped validation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeOverflow;

impl fmt::Display for SizeOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("size too large to represent")
    }
}

impl std::error::Error for SizeOverflow {}

fn mul(a: u128, b: u128) -> Result<u128, SizeOverflow> {
    a.checked_mul(b).ok_or(SizeOverflow)
}

fn add(a: u128, b: u128) -> Result<u128, SizeOverflow> {
    a.checked_add(b).ok_or(SizeOverflow)
}

/// Cached elements per token that every layer of `kind` storing its own cache holds (0 without
/// attention): with an indexer that runs in only some layers, its key is left out here and counted
/// per layer by [`kv_elements_per_token_in_layer`].
pub fn kv_elements_per_token_per_layer(model: &Model, kind: LayerKind) -> u128 {
    if !kind.is_attention() {
        return 0;
    }
    if let Some(mla) = model.mla {
        let indexer = if mla.indexer_in_some_layers() { 0 } else { mla.index_head_dim.map_or(0, u128::from) };
        return u128::from(mla.kv_lora_rank) + u128::from(mla.qk_rope_head_dim) + indexer;
    }
    let g = model.geometry(kind);
    let tensors: u128 = if g.k_eq_v { 1 } else { 2 };
    u128::from(g.n_kv_heads) * u128::from(g.head_dim) * tensors
}

/// The indexer key's width when only some layers keep it (GLM-5.2), else `None` (it is then in
/// [`kv_elements_per_token_per_layer`], or there is none).
pub fn partial_indexer_elements(model: &Model) -> Option<u128> {
    model.mla.filter(|m| m.indexer_in_some_layers()).and_then(|m| m.index_head_dim).map(u128::from)
}

/// Cached elements per token of layer `layer` (of `kind`), if it stores its own cache: the elements
/// every layer of its kind holds, and the indexer key where only some layers keep one and this does.
pub fn kv_elements_per_token_in_layer(model: &Model, layer: usize, kind: LayerKind) -> u128 {
    let common = kv_elements_per_token_per_layer(model, kind);
    let keeps = |m: &crate::model::config::Mla| m.keeps_indexer_key(u32::try_from(layer).unwrap_or(u32::MAX));
    match (partial_indexer_elements(model), model.mla) {
        (Some(key), Some(m)) if kind.is_attention() && keeps(&m) => common + key,
        _ => common,
    }
}

/// Bytes one token adds to one layer of `kind` (rounded up to a whole byte for sub-byte types
/// with an odd element count; every real model has an even count, so this is exact for them).
pub fn kv_bytes_per_token_per_layer(model: &Model, kind: LayerKind, dtype: DType) -> u128 {
    bits_to_bytes_ceil(kv_elements_per_token_per_layer(model, kind).saturating_mul(dtype.bits().into()))
}

/// Bytes one token adds to all the layers of `kind` that store their own cache, the indexer keys of
/// those that keep one included (summed in bits, rounded up once).
pub fn kv_bytes_per_token_of_kind(model: &Model, kind: LayerKind, dtype: DType) -> u128 {
    let storing = model.kv_storing_layers();
    let layers = model.schedule.layers().iter().zip(&storing).enumerate().filter(|(_, (k, s))| **k == kind && **s);
    let elements: u128 = layers.map(|(l, _)| kv_elements_per_token_in_layer(model, l, kind)).sum();
    bits_to_bytes_ceil(elements.saturating_mul(dtype.bits().into()))
}

/// Bytes one token adds to the whole cache while every layer is still growing (context below the
/// smallest window): the sum over the layers that store a cache. This is the `kv-bytes-per-token`
/// figure; past a window, sliding layers stop growing (see [`kv_total_bytes`]).
pub fn kv_bytes_per_token(model: &Model, dtype: DType) -> Result<u128, SizeOverflow> {
    cache_bytes(model, dtype, |_| 1)
}

/// Whole-model cache at a context of `n_tokens`, in bytes (the `kv-total-bytes` figure).
pub fn kv_total_bytes(model: &Model, n_tokens: u64, dtype: DType) -> Result<u128, SizeOverflow> {
    cache_bytes(model, dtype, |kind| kind.cached_tokens(n_tokens))
}

/// Whole-model cache at `n_tokens` if no layer had a window or chunk: every layer that stores a cache
/// keeps all `n` tokens, with its own geometry (the "all global" comparison of a hybrid schedule).
pub fn kv_unwindowed_bytes(model: &Model, n_tokens: u64, dtype: DType) -> Result<u128, SizeOverflow> {
    cache_bytes(model, dtype, |_| n_tokens)
}

/// Whole-model cache at `n_tokens` counting only live tokens (chunked layers drop back at each
/// chunk boundary; see [`LayerKind::live_tokens`]). Equal to [`kv_total_bytes`] without chunked layers.
pub fn kv_live_bytes(model: &Model, n_tokens: u64, dtype: DType) -> Result<u128, SizeOverflow> {
    cache_bytes(model, dtype, |kind| kind.live_tokens(n_tokens))
}

/// Sum over the layers that store a cache of (elements per token x bits x `tokens(kind)`), summed in
/// bits and rounded up to bytes once, so sub-byte dtypes stay exact.
fn cache_bytes(model: &Model, dtype: DType, tokens: impl Fn(LayerKind) -> u64) -> Result<u128, SizeOverflow> {
    let mut bits: u128 = 0;
    let storing = model.kv_storing_layers();
    for (layer, (&kind, _)) in model.schedule.layers().iter().zip(&storing).enumerate().filter(|(_, (_, s))| **s) {
        let per_token = mul(kv_elements_per_token_in_layer(model, layer, kind), dtype.bits().into())?;
        bits = add(bits, mul(per_token, tokens(kind).into())?)?;
    }
    Ok(bits_to_bytes_ceil(bits))
}

/// Values of the lightning indexer's key that share one float32 scale in DeepSeek's inference code
/// (`block_size` in DeepSeek-V3.2-Exp `inference/model.py`).
pub const INDEXER_SCALE_BLOCK: u32 = 128;

/// Bytes one token's indexer key takes in one layer as DeepSeek's inference code stores it: `dim`
/// fp8 values (`k_cache`, `float8_e4m3fn`) and a 4-byte float32 scale per [`INDEXER_SCALE_BLOCK`]
/// of them (`k_scale_cache`): 128 + 4 = 132 bytes for V3.2's 128-value key.
pub fn fp8_indexer_key_bytes(dim: u32) -> u128 {
    u128::from(dim) + 4 * u128::from(dim.div_ceil(INDEXER_SCALE_BLOCK))
}

/// [`kv_bytes_per_token`] with the indexer keys in DeepSeek's fp8 form ([`fp8_indexer_key_bytes`])
/// and the latent at `dtype`; `None` for a model without a lightning indexer.
pub fn kv_bytes_per_token_fp8_indexer(model: &Model, dtype: DType) -> Result<Option<u128>, SizeOverflow> {
    let Some(mla) = model.mla else { return Ok(None) };
    let Some(dim) = mla.index_head_dim else { return Ok(None) };
    let storing = model.kv_storing_layers();
    let attending =
        || model.schedule.layers().iter().zip(&storing).enumerate().filter(|(_, (k, s))| **s && k.is_attention());
    let layers = attending().count() as u128;
    let keys = attending().filter(|(l, _)| mla.keeps_indexer_key(u32::try_from(*l).unwrap_or(u32::MAX))).count();
    let latent_bits = mul(u128::from(mla.kv_lora_rank) + u128::from(mla.qk_rope_head_dim), dtype.bits().into())?;
    let key_bits = mul(mul(fp8_indexer_key_bytes(dim), 8)?, keys as u128)?;
    Ok(Some(bits_to_bytes_ceil(add(mul(latent_bits, layers)?, key_bits)?)))
}

/// The MLA layers' cache as transformers 4.57 holds it: `modeling_deepseek_v3.py` (lines 400-421,
/// the same in `deepseek_v2`) decompresses the latent and hands the cache each query head's key
/// (`qk_nope_head_dim + qk_rope_head_dim`, the RoPE part copied to every head) and value
/// (`v_head_dim`), instead of the latent and the shared RoPE key that DeepSeek's own inference code
/// keeps ([`kv_bytes_per_token`]). Bytes per token at `dtype`, the indexer's key not included; `None`
/// without MLA.
pub fn mla_decompressed_bytes_per_token(model: &Model, dtype: DType) -> Result<Option<u128>, SizeOverflow> {
    let Some(mla) = model.mla else { return Ok(None) };
    let storing = model.kv_storing_layers();
    let layers = model.schedule.layers().iter().zip(&storing).filter(|(k, s)| **s && k.is_attention()).count();
    let per_head = u128::from(mla.qk_nope_head_dim) + u128::from(mla.qk_rope_head_dim) + u128::from(mla.v_head_dim);
    let per_layer = mul(mul(u128::from(model.n_q_heads), per_head)?, dtype.bits().into())?;
    Ok(Some(bits_to_bytes_ceil(mul(per_layer, layers as u128)?)))
}

/// The recurrent state of one layer of `kind`, in bytes per sequence (0 for attention and
/// feed-forward-only layers).
pub fn state_bytes_per_layer(model: &Model, kind: LayerKind) -> u128 {
    model.state_geometry(kind).map_or(0, |g| g.bytes_per_layer())
}

/// The whole model's recurrent state per sequence, in bytes (the `state-bytes` figure): every
/// state-keeping layer's window and state, the same at every context length. 0 for a transformer.
pub fn state_bytes(model: &Model) -> Result<u128, SizeOverflow> {
    model
        .schedule
        .counts()
        .iter()
        .try_fold(0u128, |sum, c| add(sum, mul(state_bytes_per_layer(model, c.kind), c.layers.into())?))
}

/// One layer type's share of the cache at a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvRow {
    pub kind: LayerKind,
    /// Layers of this kind.
    pub layers: u32,
    /// Of those, layers that store their own cache (the rest reuse another's).
    pub storing_layers: u32,
    pub elements_per_token_per_layer: u128,
    /// Of the storing layers, those that also keep an indexer key of `indexer_elements` (GLM-5.2's
    /// `full` indexer layers); 0 when every layer's key is in `elements_per_token_per_layer`.
    pub indexer_layers: u32,
    pub indexer_elements: u128,
    /// Tokens each storing layer holds at the context.
    pub cached_tokens: u64,
    /// Bytes for all storing layers of this kind.
    pub bytes: u128,
    /// Recurrent state of all layers of this kind, per sequence (0 for attention layers).
    pub state_bytes: u128,
}

/// The cache at a context, split by layer kind (rows in order of first appearance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvBreakdown {
    pub n_tokens: u64,
    pub dtype: DType,
    pub rows: Vec<KvRow>,
    /// Equal to [`kv_total_bytes`] (rows rounded separately could differ by a byte for sub-byte
    /// types; the total is rounded once).
    pub total_bytes: u128,
    /// Equal to [`state_bytes`]: constant in `n_tokens`, not part of `total_bytes`.
    pub state_bytes: u128,
}

pub fn kv_breakdown(model: &Model, n_tokens: u64, dtype: DType) -> Result<KvBreakdown, SizeOverflow> {
    let mut rows: Vec<KvRow> = Vec::new();
    let stores = model.kv_storing_layers();
    for c in model.schedule.counts() {
        let of_kind =
            || model.schedule.layers().iter().zip(&stores).enumerate().filter(|(_, (k, s))| **k == c.kind && **s);
        let storing_layers = u32::try_from(of_kind().count()).unwrap_or(u32::MAX);
        let elements = kv_elements_per_token_per_layer(model, c.kind);
        let indexer_elements = partial_indexer_elements(model).filter(|_| c.kind.is_attention()).unwrap_or(0);
        let with_key = of_kind().filter(|(l, _)| kv_elements_per_token_in_layer(model, *l, c.kind) > elements).count();
        let indexer_layers = u32::try_from(with_key).unwrap_or(u32::MAX);
        let cached_tokens = c.kind.cached_tokens(n_tokens);
        let per_token = add(mul(elements, storing_layers.into())?, mul(indexer_elements, indexer_layers.into())?)?;
        let bits = mul(mul(per_token, dtype.bits().into())?, cached_tokens.into())?;
        rows.push(KvRow {
            kind: c.kind,
            layers: c.layers,
            storing_layers,
            elements_per_token_per_layer: elements,
            indexer_layers,
            indexer_elements,
            cached_tokens,
            bytes: bits_to_bytes_ceil(bits),
            state_bytes: mul(state_bytes_per_layer(model, c.kind), c.layers.into())?,
        });
    }
    let (total_bytes, state_bytes) = (kv_total_bytes(model, n_tokens, dtype)?, state_bytes(model)?);
    Ok(KvBreakdown { n_tokens, dtype, rows, total_bytes, state_bytes })
}

/// Weights in memory at `dtype`: parameter count times bits, rounded up to bytes.
pub fn weights_bytes(model: &Model, dtype: DType) -> Result<u128, SizeOverflow> {
    Ok(bits_to_bytes_ceil(mul(model_params(model).total(), dtype.bits().into())?))
}

/// The answer to "how long a context fits in this memory?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextFit {
    /// The weights alone exceed the budget.
    WeightsDoNotFit,
    /// The longest context (tokens) whose cache fits; may be 0.
    Tokens(u64),
    /// Every layer is windowed or chunked and the plateau fits: any context fits.
    Unbounded,
}

/// Largest `n` with `weights + state + kv_total_bytes(n) <= budget_bytes`, where the weights count
/// only when `weights_dtype` is given and `state` is the recurrent state of one sequence
/// ([`state_bytes`], 0 for a transformer). The cache never shrinks as `n` grows, so a binary search
/// is exact.
pub fn max_context_tokens(
    model: &Model,
    kv_dtype: DType,
    budget_bytes: u128,
    weights_dtype: Option<DType>,
) -> ContextFit {
    let weights = match weights_dtype.map(|d| weights_bytes(model, d)) {
        None => 0,
        Some(Ok(w)) => w,
        Some(Err(SizeOverflow)) => return ContextFit::WeightsDoNotFit,
    };
    let Some(left) = budget_bytes.checked_sub(weights) else {
        return ContextFit::WeightsDoNotFit;
    };
    // The state is there from the first token: a budget it overflows holds no context at all.
    let Some(left) = state_bytes(model).ok().and_then(|s| left.checked_sub(s)) else {
        return ContextFit::Tokens(0);
    };
    let fits = |n: u64| kv_total_bytes(model, n, kv_dtype).is_ok_and(|b| b <= left);
    if fits(u64::MAX) {
        let stores = model.kv_storing_layers();
        let grows = model.schedule.layers().iter().zip(&stores).any(|(k, &s)| k.is_global() && s);
        // Without a growing layer the cache stops at the largest window.
        return if grows { ContextFit::Tokens(u64::MAX) } else { ContextFit::Unbounded };
    }
    // Invariant: fits(lo) and !fits(hi).
    let (mut lo, mut hi) = (0u64, u64::MAX);
    if !fits(0) {
        return ContextFit::Tokens(0);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    ContextFit::Tokens(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{AttnGeometry, CrossLayerSharing, Mla};
    use crate::model::schedule::Schedule;

    fn llama3_8b_like() -> Model {
        let mut m = Model::simple(32, 4096, 32);
        m.attn.n_kv_heads = 8;
        m
    }

    #[test]
    fn gqa_per_token_by_hand() {
        let m = llama3_8b_like();
        // 32 layers * 8 kv heads * 2 (K,V) * 128 dims * 2 bytes = 131,072
        assert_eq!(kv_bytes_per_token(&m, DType::Fp16), Ok(131_072));
        // A naive calculator that ignores GQA uses 32 heads: 4x more.
        // 32 * 32 * 2 * 128 * 2 = 524,288
        assert_ne!(kv_bytes_per_token(&m, DType::Fp16), Ok(524_288));
        // INT4: 32 * 8 * 2 * 128 * 4 bits / 8 = 32,768
        assert_eq!(kv_bytes_per_token(&m, DType::Int4), Ok(32_768));
        // 2-bit: 16,384
        assert_eq!(kv_bytes_per_token(&m, DType::Int2), Ok(16_384));
        // 8192 tokens: 131072 * 8192 = 1,073,741,824 = 1 GiB
        assert_eq!(kv_total_bytes(&m, 8192, DType::Fp16), Ok(1 << 30));
        assert_eq!(kv_total_bytes(&m, 0, DType::Fp16), Ok(0));
    }

    #[test]
    fn ordering_mqa_gqa_mha_and_dtypes() {
        for kv in [1u32, 2, 4, 8, 16, 32] {
            let mut a = llama3_8b_like();
            a.attn.n_kv_heads = kv;
            let mut b = a.clone();
            b.attn.n_kv_heads = (kv * 2).min(32);
            for n in [1u64, 100, 8192] {
                for d in DType::ALL {
                    let ta = kv_total_bytes(&a, n, d).unwrap_or(0);
                    let tb = kv_total_bytes(&b, n, d).unwrap_or(0);
                    assert!(ta <= tb, "kv {kv} n {n} {d}");
                }
            }
        }
        // Wider dtypes never take less memory.
        let m = llama3_8b_like();
        let sizes: Vec<u128> = DType::ALL.iter().map(|&d| kv_total_bytes(&m, 1000, d).unwrap_or(0)).collect();
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn sliding_plateaus_after_window() {
        let mut m = llama3_8b_like();
        m.schedule = Schedule::uniform(32, LayerKind::Sliding { window_tokens: 4096 });
        let at_w = kv_total_bytes(&m, 4096, DType::Fp16).unwrap_or(0);
        // 131072 B/token * 4096 tokens = 536,870,912
        assert_eq!(at_w, 536_870_912);
        for n in [4097u64, 8192, 131_072, 1 << 40, u64::MAX] {
            assert_eq!(kv_total_bytes(&m, n, DType::Fp16), Ok(at_w));
        }
        // Below the window it grows linearly.
        assert_eq!(kv_total_bytes(&m, 100, DType::Fp16), Ok(131_072 * 100));
        assert_eq!(max_context_tokens(&m, DType::Fp16, at_w, None), ContextFit::Unbounded);
        assert_eq!(max_context_tokens(&m, DType::Fp16, at_w - 1, None), ContextFit::Tokens(4095));
    }

    #[test]
    fn k_eq_v_halves_and_sharing_stores_nothing() {
        let base = llama3_8b_like();
        let mut kv = base.clone();
        kv.attn.k_eq_v = true;
        for n in [1u64, 77, 8192] {
            for d in DType::ALL {
                assert_eq!(kv_total_bytes(&kv, n, d).unwrap_or(0) * 2, kv_total_bytes(&base, n, d).unwrap_or(0));
            }
        }
        let mut shared = base.clone();
        shared.cross_layer = CrossLayerSharing::Groups { group_size: 2 };
        assert_eq!(kv_bytes_per_token(&shared, DType::Fp16), Ok(65_536));
        shared.cross_layer = CrossLayerSharing::ReuseLast { shared_layers: 8 };
        // 24 storing layers * 8 * 2 * 128 * 2 = 98,304
        assert_eq!(kv_bytes_per_token(&shared, DType::Fp16), Ok(98_304));
    }

    #[test]
    fn mla_ignores_heads() {
        let mut m = Model::simple(61, 7168, 128);
        m.mla = Some(Mla::DEEPSEEK);
        // 61 layers * (512 + 64) * 2 bytes = 70,272
        assert_eq!(kv_bytes_per_token(&m, DType::Fp16), Ok(70_272));
        m.attn.n_kv_heads = 1;
        assert_eq!(kv_bytes_per_token(&m, DType::Fp16), Ok(70_272));
    }

    #[test]
    fn mla_decompressed_as_transformers_caches_it_by_hand() {
        let mut m = Model::simple(61, 7168, 128);
        assert_eq!(mla_decompressed_bytes_per_token(&m, DType::Fp16), Ok(None));
        m.mla = Some(Mla::DEEPSEEK);
        // 61 layers × 128 heads × (128 + 64 key + 128 value = 320) × 2 B = 4,997,120: 71.1x the latent's 70,272
        assert_eq!(mla_decompressed_bytes_per_token(&m, DType::Fp16), Ok(Some(4_997_120)));
        // The indexer's key is not part of it.
        m.mla = Some(Mla { index_head_dim: Some(128), ..Mla::DEEPSEEK });
        assert_eq!(mla_decompressed_bytes_per_token(&m, DType::Fp16), Ok(Some(4_997_120)));
        // 4 bits: 61 × 128 × 320 / 2 = 1,249,280
        assert_eq!(mla_decompressed_bytes_per_token(&m, DType::Int4), Ok(Some(1_249_280)));
    }

    #[test]
    fn hybrid_breakdown_and_global_override() {
        let mut m = Model::simple(12, 3840, 16);
        m.attn = AttnGeometry { n_kv_heads: 8, head_dim: 256, k_eq_v: false };
        m.global_attn = Some(AttnGeometry { n_kv_heads: 1, head_dim: 512, k_eq_v: true });
        m.schedule = Schedule::periodic(12, &[(5, LayerKind::Sliding { window_tokens: 1024 }), (1, LayerKind::Global)]);
        let b = kv_breakdown(&m, 131_072, DType::Fp16).unwrap_or_else(|_| unreachable!());
        assert_eq!(b.rows.len(), 2);
        // sliding: 10 layers * 8 * 2 * 256 * 1024 tokens * 2 B = 83,886,080
        assert_eq!(b.rows[0].bytes, 83_886_080);
        // global: 2 layers * 1 * 1 (K=V) * 512 * 131072 * 2 B = 268,435,456
        assert_eq!(b.rows[1].bytes, 268_435_456);
        assert_eq!(b.total_bytes, 83_886_080 + 268_435_456);
        assert_eq!(b.rows.iter().map(|r| r.bytes).sum::<u128>(), b.total_bytes);
    }

    #[test]
    fn unwindowed_keeps_every_token_in_every_storing_layer() {
        // 2 sliding layers (window 4) and 1 global, 1 KV head of 8, K and V, FP16: 32 B per token and
        // layer. At 10 tokens: windowed 2 × 32 × 4 + 32 × 10 = 576 B; unwindowed 3 × 32 × 10 = 960 B.
        let mut m = Model::simple(3, 8, 1);
        m.schedule = Schedule::from_layers(vec![
            LayerKind::Sliding { window_tokens: 4 },
            LayerKind::Sliding { window_tokens: 4 },
            LayerKind::Global,
        ]);
        assert_eq!(kv_total_bytes(&m, 10, DType::Fp16), Ok(576));
        assert_eq!(kv_unwindowed_bytes(&m, 10, DType::Fp16), Ok(960));
        // A layer that reuses a cache stores nothing either way: 2 × 32 × 10 = 640 B.
        m.cross_layer = CrossLayerSharing::ReuseLast { shared_layers: 1 };
        m.schedule = Schedule::uniform(3, LayerKind::Sliding { window_tokens: 4 });
        assert_eq!(kv_unwindowed_bytes(&m, 10, DType::Fp16), Ok(640));
    }

    #[test]
    fn chunked_live_sawtooth() {
        let mut m = llama3_8b_like();
        m.schedule = Schedule::uniform(32, LayerKind::Chunked { chunk_tokens: 8192 });
        assert_eq!(kv_total_bytes(&m, 8193, DType::Fp16), Ok(131_072 * 8192));
        assert_eq!(kv_live_bytes(&m, 8193, DType::Fp16), Ok(131_072));
        assert_eq!(kv_live_bytes(&m, 8192, DType::Fp16), Ok(131_072 * 8192));
    }

    #[test]
    fn budgets() {
        let m = llama3_8b_like();
        // 1 GiB holds exactly 8192 tokens at 131072 B/token.
        assert_eq!(max_context_tokens(&m, DType::Fp16, 1 << 30, None), ContextFit::Tokens(8192));
        assert_eq!(max_context_tokens(&m, DType::Fp16, (1 << 30) - 1, None), ContextFit::Tokens(8191));
        assert_eq!(max_context_tokens(&m, DType::Fp16, 0, None), ContextFit::Tokens(0));
        let w = weights_bytes(&m, DType::Fp16).unwrap_or(0);
        assert_eq!(max_context_tokens(&m, DType::Fp16, w + (1 << 30), Some(DType::Fp16)), ContextFit::Tokens(8192));
        assert_eq!(max_context_tokens(&m, DType::Fp16, w - 1, Some(DType::Fp16)), ContextFit::WeightsDoNotFit);
        // A huge budget never panics.
        assert!(matches!(max_context_tokens(&m, DType::Int2, u128::MAX, None), ContextFit::Tokens(_)));
    }

    /// 8 layers: attention at 4 (of 8), Mamba elsewhere; a 4,096-wide Mamba with a 4-tap convolution
    /// and a 16-wide state (Jamba's shape, fewer layers).
    fn small_hybrid() -> Model {
        use crate::model::config::StateGeometry;
        use crate::model::schedule::StateMixer;
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        let mut m = Model::simple(8, 4096, 32);
        m.attn.n_kv_heads = 8;
        m.schedule = Schedule::periodic(8, &[(4, ssm), (1, LayerKind::Global), (3, ssm)]);
        m.states.ssm = Some(StateGeometry {
            conv_elements: 8192 * 4,
            state_elements: 8192 * 16,
            conv_bytes: 2,
            state_bytes: 2,
            params: 1000,
        });
        m
    }

    #[test]
    fn hybrids_cache_attention_layers_only_and_keep_a_constant_state() {
        let m = small_hybrid();
        assert_eq!(m.validate(), Ok(()));
        // One attention layer: 8 KV heads x 128 x 2 tensors x 2 bytes = 4,096 B per token.
        assert_eq!(kv_bytes_per_token(&m, DType::Bf16), Ok(4096));
        assert_eq!(kv_total_bytes(&m, 1000, DType::Bf16), Ok(4_096_000));
        // 7 Mamba layers x (32,768 + 131,072) elements x 2 B = 2,293,760 B, at any context.
        assert_eq!(state_bytes(&m), Ok(2_293_760));
        let b = kv_breakdown(&m, 1000, DType::Bf16).unwrap();
        assert_eq!(b.state_bytes, 2_293_760);
        assert_eq!(b.total_bytes, 4_096_000);
        let ssm_row = b.rows.iter().find(|r| !r.kind.is_attention()).unwrap();
        assert_eq!((ssm_row.layers, ssm_row.storing_layers, ssm_row.bytes, ssm_row.state_bytes), (7, 0, 0, 2_293_760));
        // The state comes out of the budget before any token: 2,293,760 + 4,096 n <= budget.
        let budget = 2_293_760 + 4096 * 100;
        assert_eq!(max_context_tokens(&m, DType::Bf16, budget, None), ContextFit::Tokens(100));
        assert_eq!(max_context_tokens(&m, DType::Bf16, 2_293_759, None), ContextFit::Tokens(0));
        // A transformer has no state.
        assert_eq!(state_bytes(&Model::simple(2, 64, 4)), Ok(0));
    }

    #[test]
    fn attention_layers_running_a_mixer_beside_keep_both() {
        // Falcon-H1's shape: every layer has attention (KV) and Mamba-2 (state) side by side.
        let mut m = small_hybrid();
        m.schedule = Schedule::uniform(8, LayerKind::Global);
        m.states.beside_attention = Some(crate::model::schedule::StateMixer::Ssm);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(kv_bytes_per_token(&m, DType::Bf16), Ok(8 * 4096));
        assert_eq!(state_bytes(&m), Ok(8 * 327_680));
        assert_eq!(model_params(&m).mixers, 8 * 1000);
        m.states.beside_attention = None;
        assert!(m.validate().is_err(), "state sizes without a layer that keeps them");
    }

    #[test]
    fn a_pure_state_space_model_has_no_cache_and_fits_any_context() {
        let mut m = small_hybrid();
        m.schedule = Schedule::uniform(8, LayerKind::Stateful(crate::model::schedule::StateMixer::Ssm));
        assert_eq!(kv_bytes_per_token(&m, DType::Bf16), Ok(0));
        assert_eq!(state_bytes(&m), Ok(8 * 327_680));
        assert_eq!(max_context_tokens(&m, DType::Bf16, 8 * 327_680, None), ContextFit::Unbounded);
        assert!(!m.has_attention());
    }

    #[test]
    fn absurd_sizes_do_not_panic() {
        let mut m = Model::simple(4096, 1 << 20, 1 << 14);
        m.attn.head_dim = 1 << 14;
        assert!(kv_total_bytes(&m, u64::MAX, DType::Fp32).is_ok());
        // Unvalidated nonsense overflows cleanly.
        m.mla = Some(Mla {
            kv_lora_rank: u32::MAX,
            qk_rope_head_dim: u32::MAX,
            q_lora_rank: None,
            qk_nope_head_dim: 1,
            v_head_dim: 1,
            index_head_dim: Some(u32::MAX),
            ..Mla::DEEPSEEK
        });
        m.schedule = Schedule::uniform(1 << 20, LayerKind::Global);
        let r = kv_total_bytes(&m, u64::MAX, DType::Fp32);
        assert!(r.is_ok() || r == Err(SizeOverflow));
    }
}
