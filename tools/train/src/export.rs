//! The checkpoint in a Hugging Face layout: `model.safetensors` (float16, Qwen2 tensor names, the
//! output head tied to the embeddings), `config.json` with `model_type: "qwen2"` and an explicit
//! `layer_types` list (3 sliding : 1 global), which both transformers and the app's importer read.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Result};
use serde_json::{Value, json};

use crate::model::{ModelConfig, Weights};

pub fn layer_types(cfg: &ModelConfig) -> Vec<&'static str> {
    (0..cfg.layers).map(|l| if cfg.is_global(l) { "full_attention" } else { "sliding_attention" }).collect()
}

/// The `config.json` of the checkpoint; `end_of_text` is the id of `<|endoftext|>`.
pub fn hf_config(cfg: &ModelConfig, end_of_text: u32) -> Value {
    json!({
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.query_heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": true,
        "use_sliding_window": true,
        "sliding_window": cfg.sliding_window,
        "layer_types": layer_types(cfg),
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "bos_token_id": end_of_text,
        "eos_token_id": end_of_text,
        "torch_dtype": "float16",
    })
}

/// Writes `model.safetensors` (float16) and `config.json` into `dir`.
pub fn save(dir: &Path, cfg: &ModelConfig, weights: &Weights, end_of_text: u32) -> Result<()> {
    if cfg.mla.is_some() {
        // The checkpoint is Qwen2's layout, which has no latent attention.
        return Err(candle_core::Error::Msg(
            "an MLA model has no Qwen2 checkpoint; only GQA layouts are exported".into(),
        ));
    }
    let mut tensors = HashMap::new();
    for (name, var) in &weights.vars {
        tensors.insert(name.clone(), var.as_tensor().to_dtype(DType::F16)?);
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))?;
    let text = serde_json::to_string_pretty(&hf_config(cfg, end_of_text))
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    std::fs::write(dir.join("config.json"), text + "\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn checkpoint_has_qwen2_names_float16_and_the_schedule() {
        let cfg = ModelConfig {
            vocab_size: 40,
            hidden_size: 16,
            layers: 4,
            query_heads: 4,
            kv_heads: 2,
            head_dim: 8,
            intermediate_size: 24,
            sliding_window: 5,
            global_every: 4,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-6,
            max_position_embeddings: 32,
            mla: None,
        };
        let weights = Weights::init(&cfg, 3, &Device::Cpu).unwrap();
        let dir = std::env::temp_dir().join(format!("attention-lab-train-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        save(&dir, &cfg, &weights, 0).unwrap();

        let loaded = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
        // 12 tensors a layer, the embedding and the final norm; no lm_head (tied).
        assert_eq!(loaded.len(), 4 * 12 + 2);
        assert!(!loaded.contains_key("lm_head.weight"));
        let q = &loaded["model.layers.3.self_attn.q_proj.weight"];
        assert_eq!((q.dtype(), q.dims()), (DType::F16, &[32usize, 16][..]));
        let original = weights.get("model.layers.3.self_attn.q_proj.weight").unwrap();
        let err = (q.to_dtype(DType::F32).unwrap() - original).unwrap().abs().unwrap().max_all().unwrap();
        assert!(err.to_scalar::<f32>().unwrap() < 1e-4, "float16 rounding of weights near 0.02");

        let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["model_type"], "qwen2");
        assert_eq!(config["head_dim"], 8);
        assert_eq!(config["num_key_value_heads"], 2);
        assert_eq!(
            config["layer_types"],
            json!(["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
