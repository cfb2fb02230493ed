//! One row per published model, in menu order: names, sizes, family shape, sources and notes.

use super::fields::{
    DEEPSEEK_FIELDS, GEMMA3_FIELDS, GEMMA4_FIELDS, GPT2_FIELDS, LLAMA_FIELDS, LLAMA4_FIELDS, MISTRAL_FIELDS,
    QWEN3_FIELDS, TRANSFORMER_FIELDS,
};
use super::row::{Gemma, Row, Shape, Size, gqa};
use crate::model::config::{AttnGeometry, CrossLayerSharing, Mla, Moe, Positional};
use crate::model::schedule::LayerKind;

const GLOBAL: LayerKind = LayerKind::Global;

const fn sliding(window_tokens: u64) -> LayerKind {
    LayerKind::Sliding { window_tokens }
}

/// Llama 4's routed experts: one active, one shared expert taken to be as wide as a routed one.
const fn llama4_moe(n_routed_experts: u32, layer_step: u32) -> Moe {
    Moe {
        n_routed_experts,
        n_active_experts: 1,
        n_shared_experts: 1,
        expert_ffn_size: 8192,
        first_dense_layers: 0,
        layer_step,
    }
}

/// DeepSeek V2 and V3 share their latent attention sizes.
const DEEPSEEK_MLA: Mla = Mla::DEEPSEEK;

/// Gemma 4's global layers: transformers' `proportional` RoPE over the 512-dim head, of which a quarter
/// (the 64 fastest pairs) turns.
const GEMMA4_GLOBAL_ROPE: Positional =
    Positional::Rope { theta: 1_000_000.0, partial_rotary_factor: 0.25, proportional: true, linear_factor: 1.0 };

/// Gemma 3's global layers: theta 1e6 with linear scaling by 8 (`rope_scaling`), which the local
/// layers do not have.
const GEMMA3_GLOBAL_ROPE: Positional =
    Positional::Rope { theta: 1_000_000.0, partial_rotary_factor: 1.0, proportional: false, linear_factor: 8.0 };

pub(super) const ROWS: [Row; 16] = [
    Row {
        id: "transformer-base",
        display_name: "Transformer (base, 2017)",
        name: "Transformer base",
        size: Size { layers: 6, hidden: 512, heads: 8, kv_heads: 8, head_dim: 64, ffn: 2048, vocab: 37_000 },
        max_positions: 512,
        shape: Shape::Classic { positional: Positional::Sinusoidal },
        fields: TRANSFORMER_FIELDS,
        notes: "Decoder stack only (6 layers of causal self-attention); the encoder and the decoder's \
                cross-attention are not modelled. Linear biases and the 512-token position limit are assumptions.",
    },
    Row {
        id: "gpt2-small",
        display_name: "GPT-2 small (124M)",
        name: "GPT-2 small",
        size: Size { layers: 12, hidden: 768, heads: 12, kv_heads: 12, head_dim: 64, ffn: 3072, vocab: 50_257 },
        max_positions: 1024,
        shape: Shape::Classic { positional: Positional::Learned { max_positions: 1024 } },
        fields: GPT2_FIELDS,
        notes: "",
    },
    Row {
        id: "llama-2-7b",
        display_name: "Llama 2 7B",
        name: "Llama 2 7B",
        size: Size { layers: 32, hidden: 4096, heads: 32, kv_heads: 32, head_dim: 128, ffn: 11_008, vocab: 32_000 },
        max_positions: 4096,
        shape: Shape::LlamaLike { rope_theta: 10_000.0, layers: GLOBAL, qk_norm: false },
        fields: LLAMA_FIELDS,
        notes: "",
    },
    Row {
        id: "llama-2-70b",
        display_name: "Llama 2 70B",
        name: "Llama 2 70B",
        size: Size { layers: 80, hidden: 8192, heads: 64, kv_heads: 8, head_dim: 128, ffn: 28_672, vocab: 32_000 },
        max_positions: 4096,
        shape: Shape::LlamaLike { rope_theta: 10_000.0, layers: GLOBAL, qk_norm: false },
        fields: LLAMA_FIELDS,
        notes: "",
    },
    Row {
        id: "llama-3-8b",
        display_name: "Llama 3 8B",
        name: "Llama 3 8B",
        size: Size { layers: 32, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, ffn: 14_336, vocab: 128_256 },
        max_positions: 8192,
        shape: Shape::LlamaLike { rope_theta: 500_000.0, layers: GLOBAL, qk_norm: false },
        fields: LLAMA_FIELDS,
        notes: "",
    },
    Row {
        id: "llama-3.1-8b",
        display_name: "Llama 3.1 8B (128K context)",
        name: "Llama 3.1 8B",
        size: Size { layers: 32, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, ffn: 14_336, vocab: 128_256 },
        max_positions: 131_072,
        shape: Shape::LlamaLike { rope_theta: 500_000.0, layers: GLOBAL, qk_norm: false },
        fields: LLAMA_FIELDS,
        notes: "Llama 3 8B's layout with a context of 131,072 tokens. Its llama3 rope_scaling (factor 8, \
                low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192: wavelengths past \
                8,192 tokens stretched 8 times, below 2,048 unchanged, blended between) is not modelled: the RoPE \
                panel draws the layers unscaled. The cache, parameters and FLOPs do not depend on it.",
    },
    Row {
        id: "llama-3-70b",
        display_name: "Llama 3 70B",
        name: "Llama 3 70B",
        size: Size { layers: 80, hidden: 8192, heads: 64, kv_heads: 8, head_dim: 128, ffn: 28_672, vocab: 128_256 },
        max_positions: 8192,
        shape: Shape::LlamaLike { rope_theta: 500_000.0, layers: GLOBAL, qk_norm: false },
        fields: LLAMA_FIELDS,
        notes: "",
    },
    Row {
        id: "llama-4-maverick",
        display_name: "Llama 4 Maverick (17B active, 128 experts)",
        name: "Llama 4 Maverick",
        size: Size { layers: 48, hidden: 5120, heads: 40, kv_heads: 8, head_dim: 128, ffn: 16_384, vocab: 202_048 },
        max_positions: 1_048_576,
        shape: Shape::Llama4 { rope_theta: 500_000.0, chunk_tokens: 8192, moe: llama4_moe(128, 2) },
        fields: LLAMA4_FIELDS,
        notes: "Every 4th layer is a global NoPE layer, the others chunked (8192) with RoPE. MoE on odd layers \
                (interleave step 2), dense SwiGLU 16384 elsewhere; the shared expert is taken to be 8192 wide. \
                The RoPE layers' llama3 scaling (rope_scaling) is not modelled: the RoPE panel draws them unscaled.",
    },
    Row {
        id: "llama-4-scout",
        display_name: "Llama 4 Scout (17B active, 16 experts)",
        name: "Llama 4 Scout",
        size: Size { layers: 48, hidden: 5120, heads: 40, kv_heads: 8, head_dim: 128, ffn: 16_384, vocab: 202_048 },
        max_positions: 10_485_760,
        shape: Shape::Llama4 { rope_theta: 500_000.0, chunk_tokens: 8192, moe: llama4_moe(16, 1) },
        fields: LLAMA4_FIELDS,
        notes: "Every 4th layer is a global NoPE layer, the others chunked (8192) with RoPE; MoE in every layer \
                with one shared expert taken to be 8192 wide. The RoPE layers' llama3 scaling (rope_scaling) is \
                not modelled: the RoPE panel draws them unscaled.",
    },
    Row {
        id: "mistral-7b",
        display_name: "Mistral 7B (v0.1)",
        name: "Mistral 7B",
        size: Size { layers: 32, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, ffn: 14_336, vocab: 32_000 },
        max_positions: 32_768,
        shape: Shape::LlamaLike { rope_theta: 10_000.0, layers: sliding(4096), qk_norm: false },
        fields: MISTRAL_FIELDS,
        notes: "v0.1, whose every layer uses a 4096-token sliding window (later versions dropped the window).",
    },
    Row {
        id: "qwen3-8b",
        display_name: "Qwen3 8B",
        name: "Qwen3 8B",
        size: Size { layers: 36, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, ffn: 12_288, vocab: 151_936 },
        max_positions: 40_960,
        shape: Shape::LlamaLike { rope_theta: 1_000_000.0, layers: GLOBAL, qk_norm: true },
        fields: QWEN3_FIELDS,
        notes: "No QKV bias (unlike Qwen2); QK-norm counted in the attention parameters.",
    },
    Row {
        id: "gemma-3-27b",
        display_name: "Gemma 3 27B",
        name: "Gemma 3 27B",
        size: Size { layers: 62, hidden: 5376, heads: 32, kv_heads: 16, head_dim: 128, ffn: 21_504, vocab: 262_208 },
        max_positions: 131_072,
        shape: Shape::Gemma(Gemma {
            local_per_global: 5,
            window: 1024,
            last_global: false,
            local_rope_theta: 10_000.0,
            global_rope: GEMMA3_GLOBAL_ROPE,
            global_attn: None,
            cross_layer: CrossLayerSharing::None,
            per_layer_input_dim: 0,
        }),
        fields: GEMMA3_FIELDS,
        notes: "62 layers in a 5 sliding : 1 global pattern give 52 sliding and 10 global layers. The global \
                layers' RoPE is scaled linearly by 8 (rope_scaling), which stretches their wavelengths and \
                changes no memory or compute figure.",
    },
    Row {
        id: "gemma-4-12b",
        display_name: "Gemma 4 12B",
        name: "Gemma 4 12B",
        size: Size { layers: 48, hidden: 3840, heads: 16, kv_heads: 8, head_dim: 256, ffn: 15_360, vocab: 262_144 },
        max_positions: 262_144,
        shape: Shape::Gemma(Gemma {
            local_per_global: 5,
            window: 1024,
            last_global: true,
            local_rope_theta: 10_000.0,
            global_rope: GEMMA4_GLOBAL_ROPE,
            global_attn: Some(AttnGeometry { n_kv_heads: 1, head_dim: 512, k_eq_v: true }),
            cross_layer: CrossLayerSharing::None,
            per_layer_input_dim: 0,
        }),
        fields: GEMMA4_FIELDS,
        notes: "K=V (attention_k_eq_v) is applied to the global layers only, with their single 512-dim KV head, \
                as the transformers implementation does; seed 004's prose says the sliding layers, which its own \
                arithmetic does not follow either. intermediate_size 15360 is from public configs, not the seed.",
    },
    Row {
        id: "gemma-4-e4b",
        display_name: "Gemma 4 E4B",
        name: "Gemma 4 E4B",
        size: Size { layers: 42, hidden: 2560, heads: 8, kv_heads: 2, head_dim: 256, ffn: 10_240, vocab: 262_144 },
        max_positions: 131_072,
        shape: Shape::Gemma(Gemma {
            local_per_global: 5,
            window: 512,
            last_global: true,
            local_rope_theta: 10_000.0,
            global_rope: GEMMA4_GLOBAL_ROPE,
            global_attn: Some(gqa(2, 512)),
            cross_layer: CrossLayerSharing::ReuseLast { shared_layers: 18 },
            per_layer_input_dim: 256,
        }),
        fields: GEMMA4_FIELDS,
        notes: "Global layers use global_head_dim 512 with the local KV head count (2; num_global_key_value_heads \
                is null and K=V is off). The last 18 layers reuse the cache of the last earlier layer of their kind. \
                Per-layer input embeddings are counted approximately.",
    },
    Row {
        id: "deepseek-v2",
        display_name: "DeepSeek-V2 (236B, MLA)",
        name: "DeepSeek-V2",
        size: Size { layers: 60, hidden: 5120, heads: 128, kv_heads: 128, head_dim: 128, ffn: 12_288, vocab: 102_400 },
        max_positions: 163_840,
        shape: Shape::Mla {
            rope_theta: 10_000.0,
            mla: DEEPSEEK_MLA,
            moe: Moe {
                n_routed_experts: 160,
                n_active_experts: 6,
                n_shared_experts: 2,
                expert_ffn_size: 1536,
                first_dense_layers: 1,
                layer_step: 1,
            },
        },
        fields: DEEPSEEK_FIELDS,
        notes: "RoPE scaling (YaRN) is not modelled: it changes no memory or compute figure, and the RoPE panel \
                draws the decoupled RoPE key unscaled.",
    },
    Row {
        id: "deepseek-v3",
        display_name: "DeepSeek-V3 (671B, MLA)",
        name: "DeepSeek-V3",
        size: Size { layers: 61, hidden: 7168, heads: 128, kv_heads: 128, head_dim: 128, ffn: 18_432, vocab: 129_280 },
        max_positions: 163_840,
        shape: Shape::Mla {
            rope_theta: 10_000.0,
            mla: DEEPSEEK_MLA,
            moe: Moe {
                n_routed_experts: 256,
                n_active_experts: 8,
                n_shared_experts: 1,
                expert_ffn_size: 2048,
                first_dense_layers: 3,
                layer_step: 1,
            },
        },
        fields: DEEPSEEK_FIELDS,
        notes: "The multi-token-prediction module (about 14B parameters) is not counted. RoPE scaling (YaRN) is \
                not modelled: the RoPE panel draws the decoupled RoPE key unscaled.",
    },
];
