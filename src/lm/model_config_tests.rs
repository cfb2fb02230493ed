//! What `ModelConfig` reads of a family's block, and what it refuses, on Gemma 3's fixture config
//! (`tests/data/fixtures/gemma3/config.json`, the real 270M's fields at small sizes) and variations.

use super::model_config::{BlockStyle, Gate, ModelConfig};
use crate::model::config::Positional;
use crate::model::mask::Mask;

const GEMMA3: &str = include_str!("../../tests/data/fixtures/gemma3/config.json");

/// The fixture's config with `key` set to `value` (`null` removes it).
fn gemma_with(key: &str, value: serde_json::Value) -> String {
    let mut config: serde_json::Value = serde_json::from_str(GEMMA3).unwrap();
    match value {
        serde_json::Value::Null => config.as_object_mut().unwrap().remove(key),
        v => config.as_object_mut().unwrap().insert(key.into(), v),
    };
    config.to_string()
}

fn refusal(config: &str) -> String {
    ModelConfig::read(config).err().expect("refused").0
}

fn theta(p: Positional) -> f64 {
    match p {
        Positional::Rope { theta, .. } => theta,
        other => panic!("not rotary: {other:?}"),
    }
}

#[test]
fn gemma3_reads_its_block_its_layers_and_their_rotary_bases() {
    let c = ModelConfig::read(GEMMA3).unwrap();
    // sqrt(64) = 8 exactly; 1 / sqrt(query_pre_attn_scalar = 32).
    let want = BlockStyle { norm_offset: 1.0, embed_scale: 8.0, gate: Gate::GeluTanh, attn_scale: 1.0 / 32f32.sqrt() };
    assert_eq!(c.style, want);
    assert_eq!(c.masks, [Mask::Sliding { window_tokens: 8 }, Mask::Causal]);
    assert_eq!(c.model.norms_per_layer, 4);
    assert!(c.model.qk_norm && c.model.tie_embeddings);
    let layers = c.model.schedule.layers();
    assert_eq!(theta(c.model.positional_for(layers[0])), 10_000.0);
    assert_eq!(theta(c.model.positional_for(layers[1])), 1_000_000.0);
    assert_eq!(c.rms_norm_eps, 1e-6);
}

#[test]
fn gemma3_scales_attention_by_query_pre_attn_scalar_not_the_head_width() {
    let read = |config: &str| ModelConfig::read(config).unwrap().style.attn_scale;
    assert_eq!(read(&gemma_with("query_pre_attn_scalar", 256.into())), 1.0 / 16.0);
    // Absent: transformers' default for Gemma 3, 256.
    assert_eq!(read(&gemma_with("query_pre_attn_scalar", serde_json::Value::Null)), 1.0 / 16.0);
    for bad in [serde_json::json!(-4), serde_json::json!("32"), serde_json::json!(0), serde_json::json!(1e-300)] {
        assert!(refusal(&gemma_with("query_pre_attn_scalar", bad)).contains("query_pre_attn_scalar"));
    }
}

#[test]
fn what_gemma3_pass_leaves_out_is_refused_by_name() {
    let softcap = refusal(&gemma_with("attn_logit_softcapping", 50.0.into()));
    assert_eq!(softcap, "This page's forward pass does not run soft-capping yet (attn_logit_softcapping)");
    assert!(refusal(&gemma_with("final_logit_softcapping", 30.0.into())).contains("final_logit_softcapping"));
    assert!(refusal(&gemma_with("use_bidirectional_attention", true.into())).contains("not bidirectional"));
    // Llama 3.1's scaling would reach the sliding layers; transformers 5's per-layer-type objects are
    // read only when plain or linear.
    let llama3 = serde_json::json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    assert!(refusal(&gemma_with("rope_scaling", llama3)).contains("llama3 rotary scaling"));
    let per_type = serde_json::json!({"full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}});
    let text = refusal(&gemma_with("rope_parameters", per_type));
    assert!(text.contains("yarn rotary scaling yet (rope_parameters.full_attention)"), "{text}");
    let plain = serde_json::json!({"full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}});
    assert!(ModelConfig::read(&gemma_with("rope_parameters", plain)).is_ok());
    // Exact (erf) GELU is another function: refused rather than approximated. Gemma reads
    // hidden_activation only, as its transformers code does.
    assert_eq!(
        refusal(&gemma_with("hidden_activation", "gelu".into())),
        "This page's forward pass gates its MLP with silu or gelu_pytorch_tanh, not \"gelu\""
    );
    let both = gemma_with("hidden_act", "gelu".into());
    assert_eq!(ModelConfig::read(&both).unwrap().style.gate, Gate::GeluTanh);
    // Gemma 2 and the multimodal Gemma 3 wrapper (weights under language_model.) are other families.
    for family in ["gemma2", "gemma3", "gemma"] {
        let text = refusal(&gemma_with("model_type", family.into()));
        assert!(text.starts_with("This page runs llama, mistral, qwen2, qwen3, gemma3_text checkpoints"), "{text}");
        assert!(text.ends_with(&format!("not model_type {family:?}")), "{text}");
    }
}

#[test]
fn llama_families_keep_llamas_block_with_their_activation() {
    let llama = |act: &str| {
        format!(
            r#"{{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "vocab_size": 100, "rms_norm_eps": 1e-5{act}}}"#
        )
    };
    let style = |config: &str| ModelConfig::read(config).unwrap().style;
    assert_eq!(style(&llama("")), BlockStyle::llama(16));
    assert_eq!(style(&llama("")).attn_scale, 0.25);
    assert_eq!(style(&llama(r#", "hidden_act": "silu""#)).gate, Gate::Silu);
    assert_eq!(style(&llama(r#", "hidden_act": "gelu_pytorch_tanh""#)).gate, Gate::GeluTanh);
    assert!(refusal(&llama(r#", "hidden_act": "tanh""#)).contains("not \"tanh\""));
}
