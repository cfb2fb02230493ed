//! Reading an exported checkpoint back: `config.json` into a [`ModelConfig`] and the float16
//! `model.safetensors` into f32 weights, so references and measurements use exactly the weights the
//! app loads (not the f32 weights the run ended with).

use std::path::Path;

use candle_core::{DType, Device, Var};
use serde_json::Value;

use crate::bpe::Error;
use crate::model::{ModelConfig, Weights};

/// The model of the checkpoint in `dir`.
pub fn load(dir: &Path) -> Result<(ModelConfig, Weights), Error> {
    let config: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
    let cfg = model_config(&config)?;
    let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)?;
    let mut vars = std::collections::BTreeMap::new();
    for (name, t) in tensors {
        vars.insert(name, Var::from_tensor(&t.to_dtype(DType::F32)?)?);
    }
    Ok((cfg, Weights { vars }))
}

/// The inverse of [`crate::export::hf_config`].
pub fn model_config(v: &Value) -> Result<ModelConfig, Error> {
    let n = |key: &str| -> Result<usize, Error> {
        Ok(v[key].as_u64().ok_or_else(|| format!("config.json: {key} is not a count"))? as usize)
    };
    let x = |key: &str| -> Result<f64, Error> { v[key].as_f64().ok_or_else(|| format!("config.json: {key}").into()) };
    let types: Vec<&str> =
        v["layer_types"].as_array().ok_or("config.json: no layer_types")?.iter().filter_map(Value::as_str).collect();
    let global_every = types.iter().position(|t| *t == "full_attention").ok_or("no full_attention layer")? + 1;
    let cfg = ModelConfig {
        vocab_size: n("vocab_size")?,
        hidden_size: n("hidden_size")?,
        layers: n("num_hidden_layers")?,
        query_heads: n("num_attention_heads")?,
        kv_heads: n("num_key_value_heads")?,
        head_dim: n("head_dim")?,
        intermediate_size: n("intermediate_size")?,
        sliding_window: n("sliding_window")?,
        global_every,
        rope_theta: x("rope_theta")?,
        rms_norm_eps: x("rms_norm_eps")?,
        max_position_embeddings: n("max_position_embeddings")?,
        mla: None,
    };
    if crate::export::layer_types(&cfg) != types {
        return Err("config.json: layer_types is not a repeating sliding...full pattern".into());
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_checkpoint_loads_back_as_float16_weights() {
        let cfg = ModelConfig { vocab_size: 40, max_position_embeddings: 32, ..crate::model::tests::tiny() };
        let weights = Weights::init(&cfg, 5, &Device::Cpu).unwrap();
        let dir = std::env::temp_dir().join(format!("attention-lab-train-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        crate::export::save(&dir, &cfg, &weights, 0).unwrap();
        let (back, loaded) = load(&dir).unwrap();
        assert_eq!(back, cfg);
        let name = "model.layers.1.mlp.up_proj.weight";
        let (a, b) = (weights.get(name).unwrap(), loaded.get(name).unwrap());
        let rounded = a.to_dtype(DType::F16).unwrap().to_dtype(DType::F32).unwrap();
        assert_eq!(rounded.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
