//! FLOPs of a prefill of `n` tokens, per layer: Q/K/V/O projections, the attention core (QK^T and
//! PV) with masks counted exactly, and the FFN; plus the crossover context where the attention core
//! costs as much as the projections.
//!
//! Conventions: a multiply-add is 2 FLOPs. Projections cost `2 n W` for `W` projection weights
//! (biases, norms, RoPE and softmax are not counted: they are O(n d) or O(pairs) and small).
//! The core costs `2 d_qk P` for QK^T plus `2 d_v P` for PV per query head, where `P` is the exact
//! number of attended (query, key) pairs of the mask ([`Mask::attended_pairs`]). MLA is counted in its
//! plain form (K and V rebuilt per head: `d_qk = d_nope + d_rope`, `d_v = v_head_dim`).

use super::config::Model;
use super::mask::Mask;
use super::params::{attn_params, ffn_active_params};
use super::schedule::LayerKind;

/// FLOPs of one layer (or a sum of layers) for a prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerFlops {
    pub projections: u128,
    pub attention_core: u128,
    pub ffn: u128,
}

impl LayerFlops {
    pub const fn total(&self) -> u128 {
        self.projections + self.attention_core + self.ffn
    }
}

/// `h * (d_qk + d_v)`: the core's FLOPs per attended pair, halved.
fn core_width(model: &Model, kind: LayerKind) -> u128 {
    let h = u128::from(model.n_q_heads);
    match model.mla {
        Some(m) => h * (u128::from(m.qk_nope_head_dim) + u128::from(m.qk_rope_head_dim) + u128::from(m.v_head_dim)),
        None => h * 2 * u128::from(model.geometry(kind).head_dim),
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
        ffn: 2 * u128::from(n_tokens) * ffn_active_params(model, layer_u32),
    })
}

/// Prefill FLOPs summed over all layers (embedding lookup and the LM head are not included).
pub fn model_prefill_flops(model: &Model, n_tokens: u64) -> LayerFlops {
    let mut sum = LayerFlops::default();
    for layer in 0..model.schedule.len() {
        if let Some(f) = layer_prefill_flops(model, layer, n_tokens) {
            sum.projections = sum.projections.saturating_add(f.projections);
            sum.attention_core = sum.attention_core.saturating_add(f.attention_core);
            sum.ffn = sum.ffn.saturating_add(f.ffn);
        }
    }
    sum
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
mod tests {
    use super::*;
    use crate::model::config::FfnKind;

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
}
