//! Published models by id (the DESIGN.md contract). Values are those of the models' Hugging Face
//! `config.json` files (text towers only); Gemma 4 figures follow seed 004's table and the public
//! Gemma 4 configs. Where a value is uncertain or a simplification, the preset's `notes` say so.

use std::sync::OnceLock;

use super::config::{AttnGeometry, Biases, CrossLayerSharing, FfnKind, Mla, Model, Moe, NormKind, Positional};
use super::schedule::{LayerKind, Schedule};

/// A preset: id (URL `model=`), display name, the model, and the config fields it is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub id: &'static str,
    pub display_name: &'static str,
    pub model: Model,
    /// Hugging Face `config.json` fields (or paper quantities) the values come from.
    pub fields: &'static [&'static str],
    /// Simplifications and values we are unsure of.
    pub notes: &'static str,
}

/// Every preset id, in menu order.
pub const PRESET_IDS: [&str; 15] = [
    "transformer-base",
    "gpt2-small",
    "llama-2-7b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-4-maverick",
    "llama-4-scout",
    "mistral-7b",
    "qwen3-8b",
    "gemma-3-27b",
    "gemma-4-12b",
    "gemma-4-e4b",
    "deepseek-v2",
    "deepseek-v3",
];

/// All presets, built once.
pub fn all_presets() -> &'static [Preset] {
    static PRESETS: OnceLock<Vec<Preset>> = OnceLock::new();
    PRESETS.get_or_init(build_all)
}

/// The model of preset `id`, if there is one.
pub fn preset(id: &str) -> Option<&'static Model> {
    preset_info(id).map(|p| &p.model)
}

/// The whole preset record of `id`.
pub fn preset_info(id: &str) -> Option<&'static Preset> {
    all_presets().iter().find(|p| p.id == id)
}

const LLAMA_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "hidden_act",
    "vocab_size",
    "rope_theta",
    "max_position_embeddings",
    "tie_word_embeddings",
];

fn rope(theta: f64) -> Positional {
    Positional::Rope { theta, partial_rotary_factor: 1.0 }
}

fn gqa(kv: u32, head_dim: u32) -> AttnGeometry {
    AttnGeometry { n_kv_heads: kv, head_dim, k_eq_v: false }
}

/// A Llama-style decoder: RMSNorm, SwiGLU, RoPE, untied, no biases, all global.
#[expect(clippy::too_many_arguments, reason = "one argument per published config value keeps presets readable")]
fn llama_like(
    id: &str,
    name: &str,
    layers: u32,
    d: u64,
    heads: u32,
    kv: u32,
    ffn: u64,
    vocab: u64,
    theta: f64,
    max_pos: u64,
) -> Model {
    Model {
        id: id.into(),
        name: name.into(),
        attn: gqa(kv, 128),
        ffn_size: ffn,
        vocab_size: vocab,
        positional: rope(theta),
        max_position_embeddings: max_pos,
        ..Model::simple(layers, d, heads)
    }
}

fn build_all() -> Vec<Preset> {
    let sliding = |w| LayerKind::Sliding { window_tokens: w };
    let mut out = Vec::new();

    out.push(Preset {
        id: "transformer-base",
        display_name: "Transformer (base, 2017)",
        model: Model {
            id: "transformer-base".into(),
            name: "Transformer base".into(),
            ffn_kind: FfnKind::Mlp,
            ffn_size: 2048,
            vocab_size: 37_000,
            tie_embeddings: true,
            positional: Positional::Sinusoidal,
            biases: Biases { qkv: true, o: true, ffn: true },
            norm: NormKind::LayerNorm,
            max_position_embeddings: 512,
            ..Model::simple(6, 512, 8)
        },
        fields: &["d_model", "N (layers)", "h (heads)", "d_k", "d_ff", "vocab (shared BPE)"],
        notes: "Decoder stack only (6 layers of causal self-attention); the encoder and the decoder's \
                cross-attention are not modelled. Linear biases and the 512-token position limit are assumptions.",
    });

    out.push(Preset {
        id: "gpt2-small",
        display_name: "GPT-2 small (124M)",
        model: Model {
            id: "gpt2-small".into(),
            name: "GPT-2 small".into(),
            ffn_kind: FfnKind::Mlp,
            ffn_size: 3072,
            vocab_size: 50_257,
            tie_embeddings: true,
            positional: Positional::Learned { max_positions: 1024 },
            biases: Biases { qkv: true, o: true, ffn: true },
            norm: NormKind::LayerNorm,
            max_position_embeddings: 1024,
            ..Model::simple(12, 768, 12)
        },
        fields: &[
            "n_layer",
            "n_embd",
            "n_head",
            "n_inner (null: 4 * n_embd)",
            "vocab_size",
            "n_positions",
            "activation_function",
        ],
        notes: "",
    });

    out.push(Preset {
        id: "llama-2-7b",
        display_name: "Llama 2 7B",
        model: llama_like("llama-2-7b", "Llama 2 7B", 32, 4096, 32, 32, 11_008, 32_000, 10_000.0, 4096),
        fields: LLAMA_FIELDS,
        notes: "",
    });
    out.push(Preset {
        id: "llama-2-70b",
        display_name: "Llama 2 70B",
        model: llama_like("llama-2-70b", "Llama 2 70B", 80, 8192, 64, 8, 28_672, 32_000, 10_000.0, 4096),
        fields: LLAMA_FIELDS,
        notes: "",
    });
    out.push(Preset {
        id: "llama-3-8b",
        display_name: "Llama 3 8B",
        model: llama_like("llama-3-8b", "Llama 3 8B", 32, 4096, 32, 8, 14_336, 128_256, 500_000.0, 8192),
        fields: LLAMA_FIELDS,
        notes: "",
    });
    out.push(Preset {
        id: "llama-3-70b",
        display_name: "Llama 3 70B",
        model: llama_like("llama-3-70b", "Llama 3 70B", 80, 8192, 64, 8, 28_672, 128_256, 500_000.0, 8192),
        fields: LLAMA_FIELDS,
        notes: "",
    });

    const LLAMA4_FIELDS: &[&str] = &[
        "text_config.num_hidden_layers",
        "text_config.hidden_size",
        "text_config.num_attention_heads",
        "text_config.num_key_value_heads",
        "text_config.head_dim",
        "text_config.attention_chunk_size",
        "text_config.no_rope_layers",
        "text_config.intermediate_size",
        "text_config.intermediate_size_mlp",
        "text_config.num_local_experts",
        "text_config.num_experts_per_tok",
        "text_config.interleave_moe_layer_step",
        "text_config.vocab_size",
        "text_config.rope_theta",
        "text_config.max_position_embeddings",
    ];
    let llama4 = |id: &str, name: &str, experts: u32, step: u32, max_pos: u64| Model {
        schedule: Schedule::periodic(48, &[(3, LayerKind::Chunked { chunk_tokens: 8192 }), (1, LayerKind::Global)]),
        global_positional: Some(Positional::NoPe),
        moe: Some(Moe {
            n_routed_experts: experts,
            n_active_experts: 1,
            n_shared_experts: 1,
            expert_ffn_size: 8192,
            first_dense_layers: 0,
            layer_step: step,
        }),
        ..llama_like(id, name, 48, 5120, 40, 8, 16_384, 202_048, 500_000.0, max_pos)
    };
    out.push(Preset {
        id: "llama-4-maverick",
        display_name: "Llama 4 Maverick (17B active, 128 experts)",
        model: llama4("llama-4-maverick", "Llama 4 Maverick", 128, 2, 1_048_576),
        fields: LLAMA4_FIELDS,
        notes: "Every 4th layer is a global NoPE layer, the others chunked (8192) with RoPE. MoE on odd layers \
                (interleave step 2), dense SwiGLU 16384 elsewhere; the shared expert is taken to be 8192 wide.",
    });
    out.push(Preset {
        id: "llama-4-scout",
        display_name: "Llama 4 Scout (17B active, 16 experts)",
        model: llama4("llama-4-scout", "Llama 4 Scout", 16, 1, 10_485_760),
        fields: LLAMA4_FIELDS,
        notes: "Every 4th layer is a global NoPE layer, the others chunked (8192) with RoPE; MoE in every layer \
                with one shared expert taken to be 8192 wide.",
    });

    out.push(Preset {
        id: "mistral-7b",
        display_name: "Mistral 7B (v0.1)",
        model: Model {
            schedule: Schedule::uniform(32, sliding(4096)),
            ..llama_like("mistral-7b", "Mistral 7B", 32, 4096, 32, 8, 14_336, 32_000, 10_000.0, 32_768)
        },
        fields: &[
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "sliding_window",
            "vocab_size",
            "rope_theta",
            "max_position_embeddings",
        ],
        notes: "v0.1, whose every layer uses a 4096-token sliding window (later versions dropped the window).",
    });

    out.push(Preset {
        id: "qwen3-8b",
        display_name: "Qwen3 8B",
        model: Model {
            qk_norm: true,
            ..llama_like("qwen3-8b", "Qwen3 8B", 36, 4096, 32, 8, 12_288, 151_936, 1_000_000.0, 40_960)
        },
        fields: &[
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
            "rope_theta",
            "max_position_embeddings",
            "tie_word_embeddings",
        ],
        notes: "No QKV bias (unlike Qwen2); QK-norm counted in the attention parameters.",
    });

    let gemma_rope_global = Positional::Rope { theta: 1_000_000.0, partial_rotary_factor: 1.0 };
    out.push(Preset {
        id: "gemma-3-27b",
        display_name: "Gemma 3 27B",
        model: Model {
            id: "gemma-3-27b".into(),
            name: "Gemma 3 27B".into(),
            attn: gqa(16, 128),
            schedule: Schedule::periodic(62, &[(5, sliding(1024)), (1, LayerKind::Global)]),
            ffn_kind: FfnKind::GeGlu,
            ffn_size: 21_504,
            vocab_size: 262_208,
            tie_embeddings: true,
            positional: rope(10_000.0),
            global_positional: Some(gemma_rope_global),
            norms_per_layer: 4,
            qk_norm: true,
            max_position_embeddings: 131_072,
            ..Model::simple(62, 5376, 32)
        },
        fields: &[
            "text_config.num_hidden_layers",
            "text_config.hidden_size",
            "text_config.num_attention_heads",
            "text_config.num_key_value_heads",
            "text_config.head_dim",
            "text_config.sliding_window",
            "text_config.sliding_window_pattern",
            "text_config.intermediate_size",
            "text_config.rope_theta",
            "text_config.rope_local_base_freq",
            "text_config.vocab_size",
        ],
        notes: "62 layers in a 5 sliding : 1 global pattern give 52 sliding and 10 global layers. The global \
                layers' RoPE scaling (factor 8) does not change any figure here.",
    });

    const GEMMA4_FIELDS: &[&str] = &[
        "text_config.num_hidden_layers",
        "text_config.hidden_size",
        "text_config.num_attention_heads",
        "text_config.num_key_value_heads",
        "text_config.num_global_key_value_heads",
        "text_config.head_dim",
        "text_config.global_head_dim",
        "text_config.attention_k_eq_v",
        "text_config.layer_types",
        "text_config.sliding_window",
        "text_config.num_kv_shared_layers",
        "text_config.intermediate_size",
        "text_config.hidden_size_per_layer_input",
        "text_config.rope_parameters",
        "text_config.vocab_size",
        "text_config.max_position_embeddings",
    ];
    let gemma4_global_rope = Positional::Rope { theta: 1_000_000.0, partial_rotary_factor: 0.25 };
    out.push(Preset {
        id: "gemma-4-12b",
        display_name: "Gemma 4 12B",
        model: Model {
            id: "gemma-4-12b".into(),
            name: "Gemma 4 12B".into(),
            attn: gqa(8, 256),
            global_attn: Some(AttnGeometry { n_kv_heads: 1, head_dim: 512, k_eq_v: true }),
            schedule: Schedule::periodic_last_global(48, &[(5, sliding(1024)), (1, LayerKind::Global)]),
            ffn_kind: FfnKind::GeGlu,
            ffn_size: 15_360,
            vocab_size: 262_144,
            tie_embeddings: true,
            positional: rope(10_000.0),
            global_positional: Some(gemma4_global_rope),
            norms_per_layer: 4,
            qk_norm: true,
            max_position_embeddings: 262_144,
            ..Model::simple(48, 3840, 16)
        },
        fields: GEMMA4_FIELDS,
        notes: "K=V (attention_k_eq_v) is applied to the global layers only, with their single 512-dim KV head, \
                as the transformers implementation does; seed 004's prose says the sliding layers, which its own \
                arithmetic does not follow either. intermediate_size 15360 is from public configs, not the seed.",
    });
    out.push(Preset {
        id: "gemma-4-e4b",
        display_name: "Gemma 4 E4B",
        model: Model {
            id: "gemma-4-e4b".into(),
            name: "Gemma 4 E4B".into(),
            attn: gqa(2, 256),
            global_attn: Some(gqa(2, 512)),
            schedule: Schedule::periodic_last_global(42, &[(5, sliding(512)), (1, LayerKind::Global)]),
            cross_layer: CrossLayerSharing::ReuseLast { shared_layers: 18 },
            ffn_kind: FfnKind::GeGlu,
            ffn_size: 10_240,
            vocab_size: 262_144,
            tie_embeddings: true,
            positional: rope(10_000.0),
            global_positional: Some(gemma4_global_rope),
            norms_per_layer: 4,
            qk_norm: true,
            per_layer_input_dim: 256,
            max_position_embeddings: 131_072,
            ..Model::simple(42, 2560, 8)
        },
        fields: GEMMA4_FIELDS,
        notes: "Global layers use global_head_dim 512 with the local KV head count (2; num_global_key_value_heads \
                is null and K=V is off). The last 18 layers reuse the cache of the last earlier layer of their kind. \
                Per-layer input embeddings are counted approximately.",
    });

    let mla = Mla {
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
        q_lora_rank: Some(1536),
        qk_nope_head_dim: 128,
        v_head_dim: 128,
    };
    const DEEPSEEK_FIELDS: &[&str] = &[
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "intermediate_size",
        "moe_intermediate_size",
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "first_k_dense_replace",
        "moe_layer_freq",
        "vocab_size",
        "rope_theta",
        "max_position_embeddings",
    ];
    let deepseek = |id: &str, name: &str, layers: u32, d: u64, ffn: u64, moe: Moe, vocab: u64| Model {
        mla: Some(mla),
        moe: Some(moe),
        ..llama_like(id, name, layers, d, 128, 128, ffn, vocab, 10_000.0, 163_840)
    };
    out.push(Preset {
        id: "deepseek-v2",
        display_name: "DeepSeek-V2 (236B, MLA)",
        model: deepseek(
            "deepseek-v2",
            "DeepSeek-V2",
            60,
            5120,
            12_288,
            Moe {
                n_routed_experts: 160,
                n_active_experts: 6,
                n_shared_experts: 2,
                expert_ffn_size: 1536,
                first_dense_layers: 1,
                layer_step: 1,
            },
            102_400,
        ),
        fields: DEEPSEEK_FIELDS,
        notes: "RoPE scaling (YaRN) is not modelled; it changes no figure here.",
    });
    out.push(Preset {
        id: "deepseek-v3",
        display_name: "DeepSeek-V3 (671B, MLA)",
        model: deepseek(
            "deepseek-v3",
            "DeepSeek-V3",
            61,
            7168,
            18_432,
            Moe {
                n_routed_experts: 256,
                n_active_experts: 8,
                n_shared_experts: 1,
                expert_ffn_size: 2048,
                first_dense_layers: 3,
                layer_step: 1,
            },
            129_280,
        ),
        fields: DEEPSEEK_FIELDS,
        notes: "The multi-token-prediction module (about 14B parameters) is not counted.",
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_id_has_a_valid_preset() {
        assert_eq!(all_presets().len(), PRESET_IDS.len());
        for id in PRESET_IDS {
            let p = preset_info(id).unwrap_or_else(|| panic!("missing preset {id}"));
            assert_eq!(p.id, id);
            assert_eq!(p.model.id, id);
            assert!(!p.display_name.is_empty() && !p.fields.is_empty());
            assert_eq!(p.model.validate(), Ok(()), "{id}");
        }
        assert!(preset("gpt-5").is_none());
    }
}
