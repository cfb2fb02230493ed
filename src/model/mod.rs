//! Pure arithmetic of attention layouts: no wgpu, no web-sys, tested natively.
//!
//! - [`dtype`]: element types with exact bit widths (`fp32 fp16 bf16 fp8 int4 int2`).
//! - [`config`]: a model's attention geometry, schedule, FFN and embeddings; validation.
//! - [`schedule`]: per-layer attention kinds (global, sliding, chunked); [`mask`]: the one mask type
//!   (which keys a query sees; attended pairs), used by the arithmetic, the CPU reference and the kernels.
//! - [`kv_cache`]: KV bytes per token, totals at a context, breakdowns, memory budgets;
//!   [`kv_quant`]: quantised caches as runtimes store them (fp8, int8, grouped int4 / int2, KIVI):
//!   their exact bytes per token with their scales, and the groups that share a scale;
//!   [`kv_packed`]: the words a packed cache of such a scheme stores a token in (codes, then scales).
//! - [`params`]: attention parameters per layer and approximate model totals.
//! - [`flops`]: prefill and decode FLOPs and the attention-vs-projection crossover; [`intensity`]:
//!   the bytes a prefill or a decode step moves, and FLOPs per byte.
//! - [`variants`]: one base model re-expressed as MHA, GQA, MQA, MLA, sliding, hybrid, K=V, shared.
//! - [`encoding`]: the compact URL form (`cfg=`).
//! - [`reach`]: how far back information travels through stacked sliding, chunked and global layers.
//! - [`units`]: GB / GiB and parameter-count formatting; [`limits`]: the widest head the kernels take,
//!   the memory one job may use and the CPU reference's work, checked before anything runs.
//! - For the KV and compare views: [`curves`] (memory against context), [`budget`] (what fits a
//!   GPU), [`plot`] (chart scales), [`paging`] and [`decode_demo`] (the decode animation's pages and script).

pub mod budget;
pub mod config;
pub mod curves;
pub mod decode_demo;
pub mod dtype;
pub mod encoding;
pub mod flops;
pub mod intensity;
pub mod kv_cache;
pub mod kv_evict;
pub mod kv_packed;
pub mod kv_quant;
pub mod limits;
pub mod mask;
pub mod paging;
pub mod params;
pub mod plot;
pub mod reach;
pub mod schedule;
pub mod units;
pub mod variants;

#[cfg(test)]
mod figures_tests;
#[cfg(test)]
mod paging_pool_tests;

pub use config::{
    AttnGeometry, Biases, ConfigError, CrossLayerSharing, FfnKind, Mla, Model, Moe, NormKind, Positional,
    StateGeometry, States,
};
pub use dtype::DType;
pub use encoding::{EncodingError, decode_model, encode_model};
pub use flops::{
    LayerFlops, crossover_tokens, layer_decode_flops, layer_prefill_flops, model_decode_flops, model_prefill_flops,
};
pub use kv_cache::{
    ContextFit, KvBreakdown, KvRow, SizeOverflow, kv_breakdown, kv_bytes_per_token, kv_total_bytes, max_context_tokens,
    state_bytes,
};
pub use mask::Mask;
pub use params::{AttnParams, ModelParams, attn_params, attn_params_total, model_params};
pub use schedule::{LayerKind, Schedule, StateMixer};
pub use variants::{Variant, VariantFigures, apply_variant, compare_variants, standard_variants};
