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
