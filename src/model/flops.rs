//! FLOPs of a prefill of `n` tokens, per layer: Q/K/V/O projections, the attention core (QK^T and
//! PV) with masks counted exactly, and the FFN; the same for one decoded token against a cache; plus
//! the crossover context where the attention core costs as much as the projections.
//!
//! Conventions: a multiply-add is 2 FLOPs. Projections cost `2 n W` for `W` projection weights
//! (biases, norms, RoPE and softmax are not counted: they are O(n d) or O(pairs) and small).
//! The core costs `2 d_qk P` for QK^T plus `2 d_v P` for PV per query head, where `P` is the exact
//! number of attended (query, key) pairs of the mask ([`Mask::attended_pairs`]). A prefill counts MLA
//! in its plain form (K and V rebuilt per head: `d_qk = d_nope + d_rope`, `d_v = v_head_dim`).
//!
//! Decoding one token at context `t` (the cache then holds `t` tokens, the new one included) is the
//! last row of a prefill of `t`: the projections and the FFN cost `2 W` for the token alone, and the
//! core reads the keys that row sees ([`LayerKind::live_tokens`]: at most the window in a sliding
//! layer). MLA decodes in its absorbed form: the up-projections are folded into the query and the
//! output, so each head scores the cached latent and RoPE key directly (`d_qk = r_kv + d_rope`) and
//! sums latents (`d_v = r_kv`); the folded weights are the same `W`, applied once per token.
//!
//! Layers without softmax attention ([`LayerKind::Stateful`]: state-space, linear-attention and
//! short-convolution mixers) have no projections to Q/K/V/O and no attention core. Their mixer's
//! weights ([`mixer_params`]: in and out projections, the convolution, the gates) cost 2 FLOPs per
//! weight per token, in a prefill as in a decode step, whatever the context. Not counted: the state
//! update itself (a few multiply-adds per state element per token, e.g. Mamba's `d_inner × d_state`
//! decay-and-add, against `~6 d_model × d_inner` weights it is a few percent), the scan's
//! discretisation, activations and norms. A feed-forward-only layer has its FFN and nothing else,
//! and [`super::params::has_ffn`] decides which layers have an FFN.

use super::config::Model;
use super::mask::Mask;
use super::params::{attn_params, ffn_active_params, mixer_params};
use super::schedule::LayerKind;

/// FLOPs of one layer (or a sum of layers) for a prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerFlops {
    pub projections: u128,
    pub attention_core: u128,
    /// The weights of recurrent mixers (state-space, linear attention, convolution): 0 in a
    /// transformer.
    pub mixer: u128,
    pub ffn: u128,
}

impl LayerFlops {
    pub const fn total(&self) -> u128 {
        self.projections + self.attention_core + self.mixer + self.ffn
    }
}

/// FLOPs of `n_tokens` tokens through the recurrent mixer of a layer of `kind`: 2 per mixer weight
/// per token (0 for attention and feed-forward layers; the state update is not counted).
pub fn mixer_flops(model: &Model, kind: LayerKind, n_tokens: u64) -> u128 {
    2u128.saturating_mul(n_tokens.into()).saturating_mul(mixer_params(model, kind))
}

/// `h * (d_qk + d_v)`: the core's FLOPs per attended pair, halved.
fn core_width(model: &Model, kind: LayerKind) -> u128 {
    let h = u128::from(model.n_q_heads);
    match model.mla {
        Some(m) => h * (u128::from(m.qk_nope_head_dim) + u128::from(m.qk_rope_head_dim) + u128::from(m.v_head_dim)),
        None => h * 2 * u128::from(model.geometry(kind).head_dim),
    }
}

/// `h * (d_qk + d_v)` of a decode step: as [`core_width`], but MLA reads its latent in absorbed form.
fn decode_core_width(model: &Model, kind: LayerKind) -> u128 {
    match model.mla {
        Some(m) => {
            let r_kv = u128::from(m.kv_lora_rank);
            u128::from(model.n_q_heads) * (2 * r_kv + u128::from(m.qk_rope_head_dim))
        }
        None => core_width(model, kind),
    }
}

/// Attention-core FLOPs (QK^T and PV) for a layer of `kind` under `mask`.
pub fn attention_core_flops(model: &Model, kind: LayerKind, mask: Mask, n_tokens: u64) -> u128 {
    2u128.saturating_mul(core_width(model, kind)).saturating_mul(mask.attended_pairs(n_tokens))
}

/// Projection FLOPs of a layer of `kind`: `2 n W`.
pub fn projection_flops(model: &Model, kind: LayerKind, n_tokens: u64) -> u128 {
    2 * u128::from(n_tokens) * attn_params(model, kind).weights()
}

/// Prefill FLOPs of layer `layer` with its own (causal) mask; `None` past the last layer.
pub fn layer_prefill_flops(model: &Model, layer: usize, n_tokens: u64) -> Option<LayerFlops> {
    let kind = model.schedule.kind(layer)?;
    let layer_u32 = u32::try_from(layer).ok()?;
    Some(LayerFlops {
        projections: projection_flops(model, kind, n_tokens),
        attention_core: Mask::of_layer(kind).map_or(0, |mask| attention_core_flops(model, kind, mask, n_tokens)),
        mixer: mixer_flops(model, kind, n_tokens),
        ffn: 2 * u128::from(n_tokens) * ffn_active_params(model, layer_u32),
    })
}

/// Prefill FLOPs summed over all layers (embedding lookup and the LM head are not included).
pub fn model_prefill_flops(model: &Model, n_tokens: u64) -> LayerFlops {
    sum_layers(model, |layer| layer_prefill_flops(model, layer, n_tokens))
}

fn sum_layers(model: &Model, of_layer: impl Fn(usize) -> Option<LayerFlops>) -> LayerFlops {
    let mut sum = LayerFlops::default();
    for layer in 0..model.schedule.len() {
        if let Some(f) = of_layer(layer) {
            sum.projections = sum.projections.saturating_add(f.projections);
            sum.attention_core = sum.attention_core.saturating_add(f.attention_core);
            sum.mixer = sum.mixer.saturating_add(f.mixer);
            sum.ffn = sum.ffn.saturating_add(f.ffn);
        }
    }
    sum
}

/// FLOPs of layer `layer` to decode one token at context `context_tokens`; `None` past the last layer.
pub fn layer_decode_flops(model: &Model, layer: usize, context_tokens: u64) -> Option<LayerFlops> {
    let kind = model.schedule.kind(layer)?;
    let layer_u32 = u32::try_from(layer).ok()?;
    let keys = Mask::of_layer(kind).map_or(0, |_| kind.live_tokens(context_tokens));
    Some(LayerFlops {
        projections: projection_flops(model, kind, 1),
        attention_core: 2u128.saturating_mul(decode_core_width(model, kind)).saturating_mul(keys.into()),
        mixer: mixer_flops(model, kind, 1),
        ffn: 2 * ffn_active_params(model, layer_u32),
    })
}

/// FLOPs to decode one token at context `context_tokens`, summed over all layers (as for a prefill,
/// the embedding lookup and the LM head are not included).
pub fn model_decode_flops(model: &Model, context_tokens: u64) -> LayerFlops {
    sum_layers(model, |layer| layer_decode_flops(model, layer, context_tokens))
}

/// MLA: FLOPs of one layer to rebuild the per-head K (no-RoPE part) and V of all `context_tokens`
/// cached tokens from their latents, what a decoder that expanded the cache would pay for each new
/// token; `None` without MLA. The absorbed form pays [`mla_absorbed_flops`] instead.
pub fn mla_expand_flops(model: &Model, context_tokens: u64) -> Option<u128> {
    mla_absorbed_flops(model).map(|f| f.saturating_mul(context_tokens.into()))
}

/// MLA: FLOPs of one layer's up-projection weights (latent to per-head K and V) folded into the
/// decoded token's query and output: each weight multiplied once per token, whatever the context.
pub fn mla_absorbed_flops(model: &Model) -> Option<u128> {
    model.mla?;
    Some(2 * attn_params(model, LayerKind::Global).mla_kv_up)
}

/// Smallest context `n >= 1` at which a layer of `kind` under `mask` spends at least as many FLOPs
/// in the attention core as in its projections, or `None` if it never does.
///
/// With `A = h (d_qk + d_v)` and `W` projection weights the condition is `A * pairs(n) >= n * W`:
/// - full mask: `A n >= W`, so `n = ceil(W / A)`; for MHA (`W = 4 d^2`, `A = 2d`) that is `n = 2d`;
/// - causal: `A (n + 1) / 2 >= W`, so `n = ceil(2W / A) - 1`; for MHA `n = 4d - 1`: causal
///   masking halves the core, doubling the crossover;
/// - sliding `S`: as causal while `n <= S`; beyond, the core grows by `A S` per token against `W`,
///   so it crosses only if `A S > W`, at `n = ceil(A S (S - 1) / 2 / (A S - W))`;
/// - chunked: as causal within the first chunk; never after (pairs per token stay below `(C+1)/2`).
pub fn crossover_tokens(model: &Model, kind: LayerKind, mask: Mask) -> Option<u64> {
    let a = core_width(model, kind);
    let w = attn_params(model, kind).weights();
    if a == 0 {
        return None;
    }
    let causal = (2 * w).div_ceil(a).saturating_sub(1).max(1);
    let n = match mask {
        Mask::Full => w.div_ceil(a).max(1),
        Mask::Causal => causal,
        Mask::Sliding { window_tokens } => {
            let s = u128::from(window_tokens);
            if causal <= s {
                causal
            } else if a * s > w {
                (a * s * (s - 1) / 2).div_ceil(a * s - w).max(s + 1)
            } else {
                return None;
            }
        }
        Mask::Chunked { chunk_tokens } => {
            if causal <= u128::from(chunk_tokens) {
                causal
            } else {
                return None;
            }
        }
    };
    u64::try_from(n).ok()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::config::FfnKind;
    use crate::model::schedule::Schedule;

    fn brute_crossover(model: &Model, kind: LayerKind, mask: Mask, limit: u64) -> Option<u64> {
        (1..=limit).find(|&n| attention_core_flops(model, kind, mask, n) >= projection_flops(model, kind, n))
    }

    #[test]
    fn mha_crossover_is_2d_full_and_4d_minus_1_causal() {
        for (d, h) in [(64u64, 4u32), (512, 8), (5120, 40)] {
            let m = Model::simple(1, d, h);
            assert_eq!(crossover_tokens(&m, LayerKind::Global, Mask::Full), Some(2 * d));
            assert_eq!(crossover_tokens(&m, LayerKind::Global, Mask::Causal), Some(4 * d - 1));
            // Equality holds exactly at the crossover: 4 n^2 d = 8 n d^2 at n = 2d.
            let n = 2 * d;
            assert_eq!(
                attention_core_flops(&m, LayerKind::Global, Mask::Full, n),
                projection_flops(&m, LayerKind::Global, n)
            );
        }
    }

    #[test]
    fn crossover_matches_brute_force() {
        let mut m = Model::simple(1, 64, 4);
        for kv in [1u32, 2, 4] {
            m.attn.n_kv_heads = kv;
            for mask in [
                Mask::Full,
                Mask::Causal,
                Mask::Sliding { window_tokens: 50 },
                Mask::Sliding { window_tokens: 150 },
                Mask::Sliding { window_tokens: 300 },
                Mask::Chunked { chunk_tokens: 100 },
                Mask::Chunked { chunk_tokens: 400 },
            ] {
                let kind = LayerKind::Global;
                assert_eq!(crossover_tokens(&m, kind, mask), brute_crossover(&m, kind, mask, 5000), "kv {kv} {mask:?}");
            }
        }
    }

    #[test]
    fn maverick_layer_by_hand() {
        // d = 5120, 40 heads of 128, 8 KV heads, SwiGLU 16384, n = 4096.
        let mut m = Model::simple(1, 5120, 40);
        m.attn.n_kv_heads = 8;
        m.ffn_size = 16_384;
        m.ffn_kind = FfnKind::SwiGlu;
        let f = layer_prefill_flops(&m, 0, 4096).unwrap_or_default();
        // 2 * 4096 * (2 * 5120^2 + 2 * 5120 * 1024) = 515,396,075,520
        assert_eq!(f.projections, 515_396_075_520);
        // causal: 40 heads * 2 * (128 + 128) * (4096 * 4097 / 2) = 10240 * 16,781,312 = 171,840,634,880
        assert_eq!(f.attention_core, 171_840_634_880);
        // without the mask it would be 40 * 4 * 128 * 4096^2 = 343,597,383,680 (the seed's 2 x 171.8 G)
        assert_eq!(attention_core_flops(&m, LayerKind::Global, Mask::Full, 4096), 343_597_383_680);
        // FFN: 2 * 4096 * 3 * 5120 * 16384 = 2,061,584,302,080
        assert_eq!(f.ffn, 2_061_584_302_080);
        assert_eq!(layer_prefill_flops(&m, 1, 4096), None);
        assert_eq!(model_prefill_flops(&m, 4096), f);
    }

    /// Two layers of d = 64, 4 query heads of 16 over 2 KV heads, SwiGLU 256: a global layer, then a
    /// sliding one with a window of 4.
    pub(in crate::model) fn small_hybrid() -> Model {
        let mut m = Model::simple(2, 64, 4);
        m.attn.n_kv_heads = 2;
        m.ffn_size = 256;
        m.schedule = Schedule::periodic(2, &[(1, LayerKind::Global), (1, LayerKind::Sliding { window_tokens: 4 })]);
        m
    }

    #[test]
    fn decode_of_one_token_by_hand() {
        let m = small_hybrid();
        let f = model_decode_flops(&m, 10);
        // Attention weights per layer: Q 64 × 64 + K 64 × 32 + V 64 × 32 + O 64 × 64 = 12,288;
        // 2 FLOPs each, 2 layers: 49,152.
        assert_eq!(f.projections, 49_152);
        // Core per key: 2 × 4 heads × (16 + 16) = 256 FLOPs. The global layer reads all 10 keys
        // (2,560), the sliding one its window of 4 (1,024): 3,584.
        assert_eq!(f.attention_core, 3_584);
        // FFN: 2 × 3 × 64 × 256 = 98,304 per layer, 196,608 for both.
        assert_eq!(f.ffn, 196_608);
        assert_eq!(f.total(), 249_344);
        assert_eq!(layer_decode_flops(&m, 2, 10), None);
    }

    #[test]
    fn decode_is_the_last_row_of_a_prefill() {
        // Decoding token t costs what a prefill of t adds to a prefill of t - 1, mask by mask.
        let mut m = small_hybrid();
        for schedule in [
            Schedule::periodic(2, &[(1, LayerKind::Global), (1, LayerKind::Sliding { window_tokens: 4 })]),
            Schedule::uniform(2, LayerKind::Chunked { chunk_tokens: 3 }),
        ] {
            m.schedule = schedule;
            for t in 1..20u64 {
                let (now, before) = (model_prefill_flops(&m, t), model_prefill_flops(&m, t - 1));
                let step = model_decode_flops(&m, t);
                assert_eq!(step.projections, now.projections - before.projections, "t {t}");
                assert_eq!(step.attention_core, now.attention_core - before.attention_core, "t {t}");
                assert_eq!(step.ffn, now.ffn - before.ffn, "t {t}");
            }
        }
    }

    #[test]
    fn mla_decodes_in_absorbed_form() {
        // DeepSeek-V3's latent sizes on one layer: rank 512, RoPE 64, Q rank 1536, 128 heads of 128.
        let mut m = Model::simple(1, 7168, 128);
        m.mla = preset("deepseek-v3").and_then(|p| p.mla);
        let f = model_decode_flops(&m, 1000);
        // Each head scores 1,000 cached latents and RoPE keys (512 + 64) and sums latents (512):
        // 2 × 128 × (512 + 64 + 512) × 1,000 = 278,528,000.
        assert_eq!(f.attention_core, 278_528_000);
        // Weights: Q 7168 × 1536 + 1536 × 128 × 192 = 48,758,784; KV down 7168 × 576 = 4,128,768;
        // KV up 512 × 128 × 256 = 16,777,216; O 128 × 128 × 7168 = 117,440,512; sum 187,105,280.
        assert_eq!(f.projections, 2 * 187_105_280);
        // The up-projections once per token: 2 × 16,777,216; expanding 1,000 cached latents: 1,000×.
        assert_eq!(mla_absorbed_flops(&m), Some(33_554_432));
        assert_eq!(mla_expand_flops(&m, 1000), Some(33_554_432_000));
        assert_eq!(mla_absorbed_flops(&Model::simple(1, 64, 4)), None);
    }

    #[test]
    fn sliding_never_crosses_when_window_small() {
        let m = Model::simple(1, 4096, 32);
        // A S = 8192 * 64 < W = 4 * 4096^2: never.
        assert_eq!(crossover_tokens(&m, LayerKind::Global, Mask::Sliding { window_tokens: 64 }), None);
        assert_eq!(crossover_tokens(&m, LayerKind::Global, Mask::Chunked { chunk_tokens: 8192 }), None);
        assert_eq!(
            crossover_tokens(&m, LayerKind::Global, Mask::Chunked { chunk_tokens: 1 << 20 }),
            Some(4 * 4096 - 1)
        );
    }

    #[test]
    fn recurrent_and_feed_forward_only_layers_by_hand() {
        use crate::model::decode_model;
        // 4 layers of d = 64 (4 heads of 16, MHA), SwiGLU 256: Mamba, FFN-only, attention, FFN-only
        // (Nemotron-H's shape: FFNs only in the FFN-only layers), a mixer of 5,000 weights.
        let m = decode_model("L4.d64.h4.pat1s-1f-1g-1f.ssm100-200-2-4-5000.fs256").unwrap();
        let f = model_prefill_flops(&m, 10);
        // Projections: the attention layer only, 2 × 10 × 4 × 64 × 64 = 327,680.
        assert_eq!(f.projections, 327_680);
        // Core: the attention layer's causal 55 pairs × 2 × 4 heads × (16 + 16) = 14,080.
        assert_eq!(f.attention_core, 14_080);
        // Mixer: 2 × 10 tokens × 5,000 weights = 100,000; no attention work in that layer.
        assert_eq!(f.mixer, 100_000);
        // FFN: the two FFN-only layers, 2 × 10 × 3 × 64 × 256 each = 983,040 each, 1,966,080.
        assert_eq!(f.ffn, 1_966_080);
        assert_eq!(f.total(), 327_680 + 14_080 + 100_000 + 1_966_080);
        let ssm_layer = layer_decode_flops(&m, 0, 1000).unwrap();
        // Decoding: 2 × 5,000 = 10,000 in the Mamba layer at any context, nothing else there.
        assert_eq!(ssm_layer, LayerFlops { mixer: 10_000, ..Default::default() });
        assert_eq!(layer_decode_flops(&m, 0, 10), Some(ssm_layer));
        // The FFN-only layer: 2 × 3 × 64 × 256 = 98,304 and nothing else.
        assert_eq!(layer_decode_flops(&m, 1, 1000), Some(LayerFlops { ffn: 98_304, ..Default::default() }));
        // Without FFN-only layers (Jamba's shape) every layer has its FFN, the Mamba ones included.
        let jamba = decode_model("L2.d64.h4.pat1s-1g.ssm100-200-2-4-5000.fs256").unwrap();
        assert_eq!(model_decode_flops(&jamba, 10).ffn, 2 * 98_304);
    }
}
