//! Bytes a pass must move and its arithmetic intensity (FLOPs per byte): a prefill of `t` tokens
//! against the decode of one token at context `t`.
//!
//! Counted, at one element type for weights and cache alike:
//! - weights: the matrices the FLOPs multiply by ([`super::params::AttnParams::weights`] and the FFN), read once per
//!   pass. A prefill of many tokens routes them to every expert, so it reads every FFN weight; one
//!   decoded token reads only its active experts ([`ffn_active_params`]);
//! - KV cache: a prefill writes the cache of `t` tokens once ([`kv_total_bytes`]); a decode step
//!   reads, in every layer, the cached keys and values its query sees ([`super::schedule::LayerKind::live_tokens`]: at
//!   most the window in a sliding layer). A layer that reuses another's cache still reads it;
//! - recurrent state (state-space, linear-attention and convolution layers, [`state_bytes`]): a
//!   decode step reads each layer's state and writes it back updated, `2 ×` the state per token, at
//!   any context; a prefill writes it once at the end (the scan keeps it on chip in between). The
//!   state keeps the bytes per element its geometry gives, whatever the cache's element type. The
//!   mixers' weights count with the other weights.
//!
//! Activations, embeddings, the LM head and re-reads of K/V by a tiled prefill are left out: the
//! bytes are the least a pass can move, so a prefill's intensity is an upper bound.

use super::config::Model;
use super::dtype::{DType, bits_to_bytes_ceil};
use super::flops::{LayerFlops, model_decode_flops, model_prefill_flops};
use super::kv_cache::{SizeOverflow, kv_elements_per_token_in_layer, kv_total_bytes, state_bytes};
use super::params::{attn_params, ffn_active_params, ffn_params, mixer_params};

/// The FLOPs and bytes of one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    pub flops: LayerFlops,
    pub weight_bytes: u128,
    /// KV-cache bytes written (prefill) or read (decode).
    pub kv_bytes: u128,
    /// Recurrent-state bytes written once (prefill) or read and written back (decode); 0 in a
    /// transformer.
    pub state_bytes: u128,
}

impl Traffic {
    pub const fn bytes(&self) -> u128 {
        self.weight_bytes.saturating_add(self.kv_bytes).saturating_add(self.state_bytes)
    }

    /// FLOPs per byte moved; 0 when nothing moves.
    pub fn intensity(&self) -> f64 {
        let bytes = self.bytes();
        if bytes == 0 { 0.0 } else { self.flops.total() as f64 / bytes as f64 }
    }
}

/// A prefill of `n_tokens`: every layer weight read once, the cache of `n_tokens` written once.
pub fn prefill_traffic(model: &Model, n_tokens: u64, dtype: DType) -> Result<Traffic, SizeOverflow> {
    Ok(Traffic {
        flops: model_prefill_flops(model, n_tokens),
        weight_bytes: weight_bytes(model, dtype, ffn_params)?,
        kv_bytes: kv_total_bytes(model, n_tokens, dtype)?,
        state_bytes: state_bytes(model)?,
    })
}

/// One decoded token at context `context_tokens`: the weights it uses, and the cache its queries read.
pub fn decode_traffic(model: &Model, context_tokens: u64, dtype: DType) -> Result<Traffic, SizeOverflow> {
    Ok(Traffic {
        flops: model_decode_flops(model, context_tokens),
        weight_bytes: weight_bytes(model, dtype, ffn_active_params)?,
        kv_bytes: kv_read_bytes(model, context_tokens, dtype)?,
        state_bytes: state_bytes(model)?.checked_mul(2).ok_or(SizeOverflow)?,
    })
}

/// Bytes of the layers' matrix weights (attention, recurrent mixers), with `ffn` giving each layer's
/// FFN weights.
fn weight_bytes(model: &Model, dtype: DType, ffn: fn(&Model, u32) -> u128) -> Result<u128, SizeOverflow> {
    let mut weights: u128 = 0;
    for (layer, &kind) in (0u32..).zip(model.schedule.layers()) {
        weights = weights
            .checked_add(attn_params(model, kind).weights())
            .and_then(|w| w.checked_add(mixer_params(model, kind)))
            .and_then(|w| w.checked_add(ffn(model, layer)))
            .ok_or(SizeOverflow)?;
    }
    bits(weights, dtype)
}

/// Bytes of cache one decode step reads at `context_tokens`: per layer, its elements per token times
/// the keys its query sees, summed in bits and rounded up once.
pub fn kv_read_bytes(model: &Model, context_tokens: u64, dtype: DType) -> Result<u128, SizeOverflow> {
    let mut elements: u128 = 0;
    for (l, &kind) in model.schedule.layers().iter().enumerate() {
        let layer = kv_elements_per_token_in_layer(model, l, kind).checked_mul(kind.live_tokens(context_tokens).into());
        elements = layer.and_then(|e| elements.checked_add(e)).ok_or(SizeOverflow)?;
    }
    bits(elements, dtype)
}

fn bits(elements: u128, dtype: DType) -> Result<u128, SizeOverflow> {
    elements.checked_mul(dtype.bits().into()).map(bits_to_bytes_ceil).ok_or(SizeOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::config::CrossLayerSharing;
    use crate::model::flops::tests::small_hybrid;

    #[test]
    fn decode_bytes_and_intensity_by_hand() {
        // Two layers of d = 64, 4 query heads of 16 over 2 KV heads, SwiGLU 256: a global layer, then
        // a sliding one with a window of 4.
        let m = small_hybrid();
        let d = decode_traffic(&m, 10, DType::Fp16).unwrap();
        // Weights per layer: attention 12,288 + FFN 3 × 64 × 256 = 49,152, so 61,440; 2 layers at
        // 2 bytes: 245,760.
        assert_eq!(d.weight_bytes, 245_760);
        // Per token per layer the cache holds 2 KV heads × 16 × 2 (K, V) = 64 elements. The global
        // layer reads 10 tokens, the sliding one its 4: (640 + 256) × 2 bytes = 1,792.
        assert_eq!(d.kv_bytes, 1_792);
        assert_eq!(d.bytes(), 247_552);
        // 249,344 FLOPs (flops.rs) / 247,552 bytes = 1.00724: one FLOP per byte, as a 16-bit weight
        // used once (2 FLOPs per 2 bytes) gives.
        assert_eq!(d.flops.total(), 249_344);
        assert!((d.intensity() - 249_344.0 / 247_552.0).abs() < 1e-12);
        // At INT4 every byte holds four times as many elements: a quarter of the bytes.
        assert_eq!(decode_traffic(&m, 10, DType::Int4).unwrap().bytes(), 247_552 / 4);
    }

    #[test]
    fn prefill_bytes_and_intensity_by_hand() {
        let m = small_hybrid();
        let p = prefill_traffic(&m, 10, DType::Fp16).unwrap();
        assert_eq!(p.weight_bytes, 245_760);
        // The cache written: global 10 tokens, sliding 4, 64 elements each, 2 bytes: 1,792.
        assert_eq!(p.kv_bytes, 1_792);
        // FLOPs: projections 2 × 10 × 12,288 × 2 layers = 491,520; FFN 2 × 10 × 49,152 × 2 = 1,966,080;
        // core 256 per pair × (55 causal + 4 × 5/2 + 6 × 4 = 34 sliding pairs) = 22,784. Total 2,480,384.
        assert_eq!(p.flops.total(), 2_480_384);
        // 2,480,384 / 247,552 = 10.02: ten tokens share each weight read.
        assert!((p.intensity() - 2_480_384.0 / 247_552.0).abs() < 1e-12);
    }

    #[test]
    fn moe_decode_reads_only_active_experts_and_sharing_layers_still_read() {
        let mut m = Model::simple(2, 64, 4);
        m.moe = Some(crate::model::config::Moe {
            n_routed_experts: 8,
            n_active_experts: 2,
            n_shared_experts: 0,
            expert_ffn_size: 32,
            first_dense_layers: 0,
            layer_step: 1,
        });
        // Per layer: attention 4 × 64² = 16,384; router 64 × 8 = 512; an expert 3 × 64 × 32 = 6,144.
        // Prefill reads all 8 experts, decode 2 (at FP8, one byte each).
        let all = 2 * (16_384 + 512 + 8 * 6_144);
        let active = 2 * (16_384 + 512 + 2 * 6_144);
        assert_eq!(prefill_traffic(&m, 5, DType::Fp8).unwrap().weight_bytes, all);
        assert_eq!(decode_traffic(&m, 5, DType::Fp8).unwrap().weight_bytes, active);
        // Layers sharing in pairs store one cache but both read it: 2 × 5 tokens × 128 elements.
        m.cross_layer = CrossLayerSharing::Groups { group_size: 2 };
        assert_eq!(kv_read_bytes(&m, 5, DType::Fp8), Ok(2 * 5 * 128));
    }

    #[test]
    fn mla_reads_its_latent_once_per_layer() {
        let mut m = Model::simple(61, 7168, 128);
        m.mla = preset("deepseek-v3").and_then(|p| p.mla);
        // 61 layers × 1,000 tokens × (512 + 64) × 2 bytes = 70,272,000, whatever the 128 heads.
        assert_eq!(kv_read_bytes(&m, 1000, DType::Fp16), Ok(70_272_000));
        assert_eq!(decode_traffic(&m, 0, DType::Fp16).unwrap().kv_bytes, 0);
    }

    #[test]
    fn a_decoded_token_reads_and_writes_the_state() {
        use crate::model::decode_model;
        // Mamba, then attention (4 heads of 16, MHA), d = 64, SwiGLU 256 in both; the Mamba layer
        // keeps 100 conv elements at 2 B and 200 state elements at 4 B: 1,000 B, and has 5,000 weights.
        let m = decode_model("L2.d64.h4.pat1s-1g.ssm100-200-2-4-5000.fs256").unwrap();
        let d = decode_traffic(&m, 10, DType::Fp16).unwrap();
        // Weights: attention 4 × 64 × 64 = 16,384, mixer 5,000, two FFNs 2 × 3 × 64 × 256 = 98,304:
        // 119,688 weights × 2 B = 239,376.
        assert_eq!(d.weight_bytes, 239_376);
        // Cache: the attention layer reads 10 tokens × 4 × 16 × 2 elements × 2 B = 2,560.
        assert_eq!(d.kv_bytes, 2_560);
        // State: read and written back, 2 × 1,000 B.
        assert_eq!(d.state_bytes, 2_000);
        assert_eq!(d.bytes(), 239_376 + 2_560 + 2_000);
        // The prefill writes the state once.
        assert_eq!(prefill_traffic(&m, 10, DType::Fp16).unwrap().state_bytes, 1_000);
    }
}
