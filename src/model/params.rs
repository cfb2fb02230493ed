//! Parameter counts: the attention block of one layer (the `attn-params-per-layer` figure), and an
//! approximate whole-model total (embeddings, FFN or experts, norms) for the weights-included
//! memory budget.
//!
//! Attention parameters of one layer = projection weights + their biases + learned norms inside the
//! attention block (QK-norm, of `2 d_h`, or `(h + g) d_h` over the whole projections; MLA's two
//! latent norms) + attention sinks (one per query head). For standard attention with `h` query heads,
//! `g` KV heads of dimension `d_h` and model width `d`:
//! `Q = d h d_h`, `K = d g d_h`, `V = d g d_h` (0 with K=V), `O = h d_h d`.
//! For MLA: `Q = d r_q + r_q h (d_nope + d_rope)` (or `d h (d_nope + d_rope)` without a Q rank),
//! KV down `= d (r_kv + d_rope)`, KV up `= r_kv h (d_nope + d_v)`, `O = h d_v d`.
//! Layers that reuse another layer's cache are counted with their K/V projections, as checkpoints
//! ship them.

use super::config::{Model, Positional};
use super::schedule::LayerKind;

/// The attention block of one layer, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttnParams {
    /// Query path (for MLA with a Q rank: down- plus up-projection).
    pub q: u128,
    pub k: u128,
    pub v: u128,
    pub o: u128,
    /// MLA: hidden state to latent plus the shared RoPE key.
    pub mla_kv_down: u128,
    /// MLA: latent to per-head K (non-rotary part) and V.
    pub mla_kv_up: u128,
    pub biases: u128,
    /// QK-norm weights and MLA latent norms.
    pub norms: u128,
    /// Attention sinks: one learned logit per query head (GPT-OSS).
    pub sinks: u128,
}

impl AttnParams {
    /// Matrix weights only: what a prefill multiplies by (2 FLOPs per weight per token).
    pub const fn weights(&self) -> u128 {
        self.q + self.k + self.v + self.o + self.mla_kv_down + self.mla_kv_up
    }

    pub const fn total(&self) -> u128 {
        self.weights() + self.biases + self.norms + self.sinks
    }
}

/// Attention parameters of one layer of `kind` (all 0 for a layer without attention).
pub fn attn_params(model: &Model, kind: LayerKind) -> AttnParams {
    if !kind.is_attention() {
        return AttnParams::default();
    }
    let d = u128::from(model.d_model);
    let h = u128::from(model.n_q_heads);
    let sinks = if model.attn_sinks { h } else { 0 };
    if let Some(m) = model.mla {
        let rope = u128::from(m.qk_rope_head_dim);
        let nope = u128::from(m.qk_nope_head_dim);
        let dv = u128::from(m.v_head_dim);
        let r_kv = u128::from(m.kv_lora_rank);
        let (q, q_norm) = match m.q_lora_rank {
            Some(r_q) => {
                let r_q = u128::from(r_q);
                (d * r_q + r_q * h * (nope + rope), r_q)
            }
            None => (d * h * (nope + rope), 0),
        };
        let biases = if model.biases.qkv { h * (nope + rope) + r_kv + rope + h * (nope + dv) } else { 0 };
        return AttnParams {
            q,
            k: 0,
            v: 0,
            o: h * dv * d,
            mla_kv_down: d * (r_kv + rope),
            mla_kv_up: r_kv * h * (nope + dv),
            biases: biases + if model.biases.o { d } else { 0 },
            norms: q_norm + r_kv,
            sinks,
        };
    }
    let g = model.geometry(kind);
    let dh = u128::from(g.head_dim);
    let kv = u128::from(g.n_kv_heads);
    let q = d * h * dh;
    let k = d * kv * dh;
    let v = if g.k_eq_v { 0 } else { k };
    let mut biases = 0;
    if model.biases.qkv {
        biases += h * dh + kv * dh + if g.k_eq_v { 0 } else { kv * dh };
    }
    if model.biases.o {
        biases += d;
    }
    AttnParams {
        q,
        k,
        v,
        o: h * dh * d,
        mla_kv_down: 0,
        mla_kv_up: 0,
        biases,
        norms: match (model.qk_norm, model.qk_norm_per_head) {
            (false, _) => 0,
            (true, false) => model.norm.params(2 * dh),
            (true, true) => model.norm.params((h + kv) * dh),
        },
        sinks,
    }
}

/// Attention parameters per layer kind: `(kind, layers of that kind, params of one such layer)`.
pub fn attn_params_by_kind(model: &Model) -> Vec<(LayerKind, u32, AttnParams)> {
    model.schedule.counts().into_iter().map(|c| (c.kind, c.layers, attn_params(model, c.kind))).collect()
}

/// Attention parameters of the whole model.
pub fn attn_params_total(model: &Model) -> u128 {
    model.schedule.layers().iter().map(|&k| attn_params(model, k).total()).sum()
}

/// Whether layer `layer` has a feed-forward block. Models with feed-forward-only layers
/// (Nemotron-H) keep their FFNs there and nowhere else; every other model has one in each layer
/// (a pure Mamba model has none: its FFN size is 0).
pub fn has_ffn(model: &Model, layer: u32) -> bool {
    !model.schedule.has_feed_forward_layers() || model.schedule.kind(layer as usize) == Some(LayerKind::FeedForward)
}

/// Recurrent mixer parameters of one layer of `kind` (0 for layers without one).
pub fn mixer_params(model: &Model, kind: LayerKind) -> u128 {
    model.state_geometry(kind).map_or(0, |g| g.params.into())
}

/// One FFN (dense, or one expert) of hidden size `f`: its matrices, and with FFN biases one bias per
/// output of each (`f` for each input-side matrix, `d` for the down projection).
fn ffn_block(model: &Model, f: u64) -> u128 {
    let d = u128::from(model.d_model);
    let f = u128::from(f);
    let mats = u128::from(model.ffn_kind.matrices());
    let bias = if model.biases.ffn { (mats - 1) * f + d } else { 0 };
    mats * d * f + bias
}

/// The router of an MoE layer: one score per expert from the hidden state, plus a bias per expert
/// when the FFN has biases (GPT-OSS).
fn router(model: &Model, moe: super::config::Moe) -> u128 {
    let experts = u128::from(moe.n_routed_experts);
    u128::from(model.d_model) * experts + if model.biases.ffn { experts } else { 0 }
}

/// FFN parameters of layer `layer` (dense, or all experts plus shared experts and router).
pub fn ffn_params(model: &Model, layer: u32) -> u128 {
    if !has_ffn(model, layer) {
        return 0;
    }
    match model.moe {
        Some(moe) if moe.is_moe_layer(layer) => {
            let per_expert = ffn_block(model, moe.expert_ffn_size);
            let experts = u128::from(moe.n_routed_experts) + u128::from(moe.n_shared_experts);
            router(model, moe) + experts * per_expert
        }
        _ => ffn_block(model, model.ffn_size),
    }
}

/// FFN parameters a token actually multiplies by in layer `layer` (MoE: router, top-k and shared).
pub fn ffn_active_params(model: &Model, layer: u32) -> u128 {
    if !has_ffn(model, layer) {
        return 0;
    }
    match model.moe {
        Some(moe) if moe.is_moe_layer(layer) => {
            let per_expert = ffn_block(model, moe.expert_ffn_size);
            router(model, moe) + (u128::from(moe.n_active_experts) + u128::from(moe.n_shared_experts)) * per_expert
        }
        _ => ffn_params(model, layer),
    }
}

/// The whole model's parameters by part (approximate: vision towers, MoE score biases, MTP heads
/// and other extras are not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelParams {
    pub embeddings: u128,
    /// Output projection; 0 when tied to the embeddings.
    pub lm_head: u128,
    /// Learned position table (GPT-2); 0 otherwise.
    pub positions: u128,
    /// Gemma's per-layer input embeddings and their projections.
    pub per_layer_inputs: u128,
    pub attention: u128,
    /// State-space, linear-attention and convolution mixers (0 for a transformer).
    pub mixers: u128,
    pub ffn: u128,
    /// Norm layers in every block plus the final norm.
    pub norms: u128,
    /// FFN parameters used per token (equals `ffn` for dense models).
    pub ffn_active: u128,
}

impl ModelParams {
    pub const fn total(&self) -> u128 {
        self.embeddings
            + self.lm_head
            + self.positions
            + self.per_layer_inputs
            + self.attention
            + self.mixers
            + self.ffn
            + self.norms
    }

    /// Parameters one token uses (MoE: only its experts).
    pub const fn active(&self) -> u128 {
        self.total() - self.ffn + self.ffn_active
    }
}

pub fn model_params(model: &Model) -> ModelParams {
    let d = u128::from(model.d_model);
    let vocab = u128::from(model.vocab_size);
    let layers = u128::from(model.n_layers());
    let positions = match model.positional {
        Positional::Learned { max_positions } => u128::from(max_positions) * d,
        _ => 0,
    };
    let p = u128::from(model.per_layer_input_dim);
    ModelParams {
        embeddings: vocab * d,
        lm_head: if model.tie_embeddings { 0 } else { vocab * d },
        positions,
        // table (vocab x layers x p), model projection (d -> layers x p), per layer gate and projection.
        per_layer_inputs: vocab * layers * p + d * layers * p + 2 * d * p * layers,
        attention: attn_params_total(model),
        mixers: model.schedule.layers().iter().map(|&k| mixer_params(model, k)).sum(),
        ffn: (0..model.n_layers()).map(|l| ffn_params(model, l)).sum(),
        norms: model.norm.params((u128::from(model.norms_per_layer) * layers + 1) * d),
        ffn_active: (0..model.n_layers()).map(|l| ffn_active_params(model, l)).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{Biases, FfnKind, Mla, NormKind};

    #[test]
    fn llama2_7b_total_matches_published_count() {
        let mut m = Model::simple(32, 4096, 32);
        m.ffn_size = 11_008;
        m.vocab_size = 32_000;
        // attention per layer: 4 * 4096 * 4096 = 67,108,864
        assert_eq!(attn_params(&m, LayerKind::Global).total(), 67_108_864);
        // 32 * (67,108,864 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096 = 6,738,415,616
        assert_eq!(model_params(&m).total(), 6_738_415_616);
    }

    #[test]
    fn gpt2_small_total_matches_published_count() {
        let mut m = Model::simple(12, 768, 12);
        m.ffn_kind = FfnKind::Mlp;
        m.ffn_size = 3072;
        m.vocab_size = 50_257;
        m.tie_embeddings = true;
        m.positional = Positional::Learned { max_positions: 1024 };
        m.biases = Biases { qkv: true, o: true, ffn: true };
        m.norm = NormKind::LayerNorm;
        // attention: 4 * 768^2 + 3 * 768 (qkv bias) + 768 (o bias) = 2,362,368
        assert_eq!(attn_params(&m, LayerKind::Global).total(), 2_362_368);
        // 124,439,808 is GPT-2 small's well-known count.
        assert_eq!(model_params(&m).total(), 124_439_808);
    }

    #[test]
    fn gqa_and_k_eq_v_shrink_attention() {
        let mut m = Model::simple(1, 4096, 32);
        let mha = attn_params(&m, LayerKind::Global).total();
        m.attn.n_kv_heads = 8;
        // Q and O stay 4096^2; K and V drop to 4096 * 1024 each: 2 * 16,777,216 + 2 * 4,194,304
        assert_eq!(attn_params(&m, LayerKind::Global).total(), 41_943_040);
        assert!(attn_params(&m, LayerKind::Global).total() < mha);
        m.attn.k_eq_v = true;
        assert_eq!(attn_params(&m, LayerKind::Global).v, 0);
    }

    #[test]
    fn recurrent_mixers_and_feed_forward_only_layers() {
        use crate::model::config::StateGeometry;
        use crate::model::schedule::{Schedule, StateMixer};
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        // Nemotron-H's shape: Mamba, FFN-only and attention layers; FFNs only in the FFN layers.
        let mut m = Model::simple(4, 64, 4);
        m.ffn_size = 100;
        m.norms_per_layer = 1;
        m.schedule =
            Schedule::from_layers(vec![ssm, LayerKind::FeedForward, LayerKind::Global, LayerKind::FeedForward]);
        m.states.ssm =
            Some(StateGeometry { conv_elements: 1, state_elements: 1, conv_bytes: 2, state_bytes: 2, params: 777 });
        assert_eq!(m.validate(), Ok(()));
        let p = model_params(&m);
        assert_eq!(attn_params(&m, ssm).total(), 0);
        assert_eq!(p.attention, 4 * 64 * 64);
        assert_eq!(p.mixers, 777);
        // Two FFN layers of 3 x 64 x 100.
        assert_eq!(p.ffn, 2 * 3 * 64 * 100);
        assert_eq!(p.norms, (4 + 1) * 64);
        assert_eq!(p.total(), 2 * 32_000 * 64 + 16_384 + 777 + 38_400 + 320);
        // Without feed-forward-only layers every layer has its FFN (Jamba's Mamba layers do).
        m.schedule = Schedule::from_layers(vec![ssm, ssm, LayerKind::Global, ssm]);
        assert_eq!(model_params(&m).ffn, 4 * 3 * 64 * 100);
        assert_eq!(model_params(&m).mixers, 3 * 777);
    }

    #[test]
    fn norm_kinds_qk_norm_width_sinks_and_expert_biases() {
        let mut m = Model::simple(2, 64, 4);
        m.attn.n_kv_heads = 2;
        // Norms: (2 layers * 2 + final) * 64 = 320 weights; LayerNorm doubles them; none without parameters.
        for (norm, params) in [
            (NormKind::RmsNorm, 320),
            (NormKind::LayerNorm, 640),
            (NormKind::LayerNormNoBias, 320),
            (NormKind::NonParametric, 0),
        ] {
            m.norm = norm;
            assert_eq!(model_params(&m).norms, params, "{norm:?}");
        }
        m.norm = NormKind::RmsNorm;
        // QK-norm of one head (2 * 16) or over the projections ((4 + 2) * 16); 4 sinks.
        m.qk_norm = true;
        assert_eq!(attn_params(&m, LayerKind::Global).norms, 32);
        m.qk_norm_per_head = true;
        assert_eq!(attn_params(&m, LayerKind::Global).norms, 96);
        m.attn_sinks = true;
        let p = attn_params(&m, LayerKind::Global);
        assert_eq!((p.sinks, p.total()), (4, 64 * 64 * 2 + 2 * 64 * 32 + 96 + 4));
        // Experts with biases: each 3 * 64 * 8 + 2 * 8 + 64 = 1,616; router 64 * 4 + 4 = 260.
        m.moe = Some(crate::model::config::Moe {
            n_routed_experts: 4,
            n_active_experts: 1,
            n_shared_experts: 0,
            expert_ffn_size: 8,
            first_dense_layers: 0,
            layer_step: 1,
        });
        m.biases.ffn = true;
        assert_eq!((ffn_params(&m, 0), ffn_active_params(&m, 0)), (260 + 4 * 1_616, 260 + 1_616));
        m.biases.ffn = false;
        assert_eq!((ffn_params(&m, 0), ffn_active_params(&m, 0)), (256 + 4 * 1_536, 256 + 1_536));
    }

    #[test]
    fn mla_parts_by_hand() {
        let mut m = Model::simple(1, 7168, 128);
        m.mla = Some(Mla::DEEPSEEK);
        let p = attn_params(&m, LayerKind::Global);
        assert_eq!(p.q, 7168 * 1536 + 1536 * 128 * 192);
        assert_eq!(p.mla_kv_down, 7168 * 576);
        assert_eq!(p.mla_kv_up, 512 * 128 * 256);
        assert_eq!(p.o, 128 * 128 * 7168);
        assert_eq!(p.norms, 1536 + 512);
        // 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 + 2,048 = 187,107,328
        assert_eq!(p.total(), 187_107_328);
    }
}
