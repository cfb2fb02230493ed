//! A decoder-only checkpoint in Hugging Face's Llama / Qwen2 layout, loaded for the CPU forward
//! pass: the geometry from `config.json` (read by the same importer as every other config, so the
//! figures and the forward pass agree on the model), the weights from `model.safetensors` by their
//! transformers names, each checked for its shape.
//!
//! What is read: RMSNorm, rotary positions on the whole head or part of it, grouped-query attention
//! with optional Q/K/V biases, QK-norm on each head (Qwen3), causal (global) or sliding-window
//! layers, a SwiGLU MLP, tied or separate output weights. Anything else (MoE, latent attention,
//! other norms or MLPs) is refused with its name, before any weight is read.

use super::LmError;
use super::safetensors::SafeTensors;
use crate::attention::rope::Llama3Scaling;
use crate::model::config::{FfnKind, Model, NormKind, Positional};
use crate::model::hf_import::import_hf_config;
use crate::model::mask::Mask;

/// A checkpoint this large (parameters) is not loaded into host memory (the CPU pass, the shipped
/// model): larger ones stream to the GPU (`lm::weight_plan`).
const MAX_CPU_PARAMS: u128 = 64 << 20;

/// `y = x W^T + b` with `W` stored (out, in) as PyTorch keeps it.
pub struct Linear {
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub outputs: usize,
    pub inputs: usize,
}

/// QK-norm (Qwen3): RMSNorm weights, `[head_dim]` each, shared by every query head and by every
/// key head, applied to each head after its projection and before rotary positions.
pub struct QkNormWeights {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
}

pub struct LayerWeights {
    /// Which keys each query sees in this layer.
    pub mask: Mask,
    /// The layer's rotary positions (global layers may have their own base).
    pub positional: Positional,
    pub input_norm: Vec<f32>,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    pub qk_norm: Option<QkNormWeights>,
    pub post_attention_norm: Vec<f32>,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

/// A loaded checkpoint: its geometry and every weight as f32.
pub struct Checkpoint {
    pub model: Model,
    pub rms_norm_eps: f32,
    /// Llama 3.1's rotary scaling, on every layer.
    pub rope_scaling: Option<Llama3Scaling>,
    /// (vocab, d): the input embedding, and the output weights when they are tied.
    pub embed: Vec<f32>,
    pub layers: Vec<LayerWeights>,
    pub final_norm: Vec<f32>,
    /// (vocab, d) output weights when not tied to the embedding.
    pub lm_head: Option<Vec<f32>>,
}

impl Checkpoint {
    /// Reads `config.json` and `model.safetensors` (their contents).
    pub fn load(config_json: &str, safetensors: &[u8]) -> Result<Checkpoint, LmError> {
        let ModelConfig { model, rms_norm_eps, masks, rope_scaling } = ModelConfig::read(config_json)?;
        let params = crate::model::params::model_params(&model).total();
        if params > MAX_CPU_PARAMS {
            return Err(LmError(format!(
                "{params} parameters are too many to hold in this page's memory as f32 (at most {MAX_CPU_PARAMS})"
            )));
        }
        let file = SafeTensors::parse(safetensors)?;
        let g = Geometry::of(&model);
        let layers =
            masks.into_iter().enumerate().map(|(l, mask)| layer(&file, &model, l, mask)).collect::<Result<_, _>>()?;
        let embed = file.f32_tensor("model.embed_tokens.weight", &[g.vocab, g.d])?;
        let lm_head = match model.tie_embeddings {
            true => None,
            false => Some(file.f32_tensor("lm_head.weight", &[g.vocab, g.d])?),
        };
        let final_norm = file.f32_tensor("model.norm.weight", &[g.d])?;
        Ok(Checkpoint { model, rms_norm_eps, rope_scaling, embed, layers, final_norm, lm_head })
    }

    pub fn head_dim(&self) -> usize {
        self.model.attn.head_dim as usize
    }

    /// Widths of a token's query heads and of its key (or value) heads.
    pub fn widths(&self) -> (usize, usize) {
        let heads = |n: u32| n as usize * self.head_dim();
        (heads(self.model.n_q_heads), heads(self.model.attn.n_kv_heads))
    }

    pub fn vocab(&self) -> usize {
        self.model.vocab_size as usize
    }
}

/// What config.json says of a checkpoint the forward passes run: its geometry, its norms' epsilon and
/// each layer's mask, after refusing every family and feature they do not implement.
pub struct ModelConfig {
    pub model: Model,
    pub rms_norm_eps: f32,
    pub masks: Vec<Mask>,
    /// Llama 3.1's rotary scaling, on every layer (the layout's positions do not carry it).
    pub rope_scaling: Option<Llama3Scaling>,
}

impl ModelConfig {
    pub fn read(config_json: &str) -> Result<ModelConfig, LmError> {
        let imported = import_hf_config(config_json).map_err(|e| LmError(format!("config.json: {e}")))?;
        let model = imported.model;
        let config: serde_json::Value = serde_json::from_str(config_json).map_err(|e| LmError(e.to_string()))?;
        let rope_scaling = supported_family(&config)?;
        // Llama 3.1's scaling replaces a linear one: never both (the pass would scale twice).
        let linear = |p: Positional| matches!(p, Positional::Rope { linear_factor, .. } if linear_factor != 1.0);
        if rope_scaling.is_some() && (linear(model.positional) || model.global_positional.is_some_and(linear)) {
            return Err(LmError("config.json: Llama 3.1's rotary scaling cannot be combined with a linear one".into()));
        }
        let masks = supported(&model)?;
        let rms_norm_eps = config
            .get("rms_norm_eps")
            .and_then(serde_json::Value::as_f64)
            .filter(|e| e.is_finite() && *e > 0.0)
            .ok_or_else(|| LmError("config.json: rms_norm_eps is missing or not a positive number".into()))?
            as f32;
        Ok(ModelConfig { model, rms_norm_eps, masks, rope_scaling })
    }
}

/// The sizes the weights are checked against.
struct Geometry {
    d: usize,
    vocab: usize,
    q: usize,
    kv: usize,
    ffn: usize,
}

impl Geometry {
    fn of(m: &Model) -> Geometry {
        let hd = m.attn.head_dim as usize;
        Geometry {
            d: m.d_model as usize,
            vocab: m.vocab_size as usize,
            q: m.n_q_heads as usize * hd,
            kv: m.attn.n_kv_heads as usize * hd,
            ffn: m.ffn_size as usize,
        }
    }
}

/// Families whose forward pass is exactly this one (no extra multipliers or embedding scales, as
/// Granite, MiniCPM or Gemma add), with plain, linearly scaled or Llama 3.1-scaled rotary positions.
const FAMILIES: [&str; 4] = ["llama", "mistral", "qwen2", "qwen3"];

/// Refuses a family or a rotary scaling the forward passes do not run; returns Llama 3.1's scaling
/// when the config asks for it (plain and linear scaling are in the layout's positions already).
fn supported_family(config: &serde_json::Value) -> Result<Option<Llama3Scaling>, LmError> {
    let text = |v: &serde_json::Value, key: &str| v.get(key).and_then(serde_json::Value::as_str).map(str::to_string);
    let family = text(config, "model_type").unwrap_or_default();
    if !FAMILIES.contains(&family.as_str()) {
        return Err(LmError(format!(
            "This page runs {} checkpoints (SmolLM's are llama), not model_type {family:?}",
            FAMILIES.join(", ")
        )));
    }
    let mut llama3 = None;
    let mut seen: Option<&serde_json::Value> = None;
    for key in ["rope_scaling", "rope_parameters"] {
        let Some(scaling) = config.get(key).filter(|v| !v.is_null()) else { continue };
        let kind = text(scaling, "rope_type").or_else(|| text(scaling, "type")).unwrap_or_else(|| "default".into());
        let parsed = match kind.as_str() {
            "default" | "linear" => None,
            "llama3" => Some(llama3_scaling(scaling, key)?),
            _ => {
                return Err(LmError(format!(
                    "This page's forward pass does not run {kind} rotary scaling yet ({key})"
                )));
            }
        };
        // Both keys, one of them Llama 3.1's: the layout reads one and the pass would apply the other.
        if let Some(first) = seen.filter(|_| llama3.is_some() || parsed.is_some()) {
            let fields = |v: &serde_json::Value| {
                [
                    "rope_type",
                    "type",
                    "factor",
                    "low_freq_factor",
                    "high_freq_factor",
                    "original_max_position_embeddings",
                ]
                .map(|k| v.get(k).cloned())
            };
            if fields(first) != fields(scaling) {
                return Err(LmError(
                    "config.json: rope_scaling and rope_parameters disagree about the rotary scaling".into(),
                ));
            }
        }
        seen = Some(scaling);
        llama3 = llama3.or(parsed);
    }
    Ok(llama3)
}

fn llama3_scaling(scaling: &serde_json::Value, key: &str) -> Result<Llama3Scaling, LmError> {
    let number = |name: &str| scaling.get(name).and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
    Llama3Scaling::new(
        number("factor"),
        number("low_freq_factor"),
        number("high_freq_factor"),
        number("original_max_position_embeddings"),
    )
    .ok_or_else(|| {
        LmError(format!(
            "config.json: {key} of type llama3 needs a positive factor, low_freq_factor below high_freq_factor and \
             original_max_position_embeddings"
        ))
    })
}

/// Each layer's mask, when the forward pass implements every part of `m`; else what it lacks.
fn supported(m: &Model) -> Result<Vec<Mask>, LmError> {
    fn lacks<T>(what: &str) -> Result<T, LmError> {
        Err(LmError(format!("This page's forward pass does not run {what} yet")))
    }
    if m.moe.is_some() || m.mla.is_some() || m.global_attn.is_some() {
        return lacks("mixture-of-experts, latent attention or per-layer-kind head geometry");
    }
    if m.qk_norm_per_head || m.attn_sinks || m.attn.k_eq_v || m.per_layer_input_dim > 0 || m.biases.o || m.biases.ffn {
        return lacks("QK-norm across all heads, attention sinks, K=V, per-layer inputs or output/MLP biases");
    }
    if m.norm != NormKind::RmsNorm || m.ffn_kind != FfnKind::SwiGlu || m.norms_per_layer != 2 {
        return lacks("norms other than RMSNorm before attention and MLP, or MLPs other than SwiGLU");
    }
    let rope = |p: Positional| matches!(p, Positional::Rope { proportional: false, .. });
    if !rope(m.positional) || m.global_positional.is_some_and(|p| !rope(p)) {
        return lacks("positions other than rotary embeddings");
    }
    m.schedule
        .layers()
        .iter()
        .map(|&kind| match Mask::of_layer(kind) {
            Some(mask @ (Mask::Causal | Mask::Sliding { .. })) => Ok(mask),
            _ => lacks("layers other than causal or sliding-window attention"),
        })
        .collect()
}

fn layer(file: &SafeTensors<'_>, m: &Model, l: usize, mask: Mask) -> Result<LayerWeights, LmError> {
    let g = Geometry::of(m);
    let positional = m.positional_for(m.schedule.layers()[l]);
    let name = |part: &str| format!("model.layers.{l}.{part}");
    let linear = |part: &str, outputs: usize, inputs: usize, bias: bool| -> Result<Linear, LmError> {
        let weight = file.f32_tensor(&name(&format!("{part}.weight")), &[outputs, inputs])?;
        let bias = if bias { Some(file.f32_tensor(&name(&format!("{part}.bias")), &[outputs])?) } else { None };
        Ok(Linear { weight, bias, outputs, inputs })
    };
    let qkv_bias = m.biases.qkv;
    let hd = m.attn.head_dim as usize;
    let qk_norm = match m.qk_norm {
        true => Some(QkNormWeights {
            q: file.f32_tensor(&name("self_attn.q_norm.weight"), &[hd])?,
            k: file.f32_tensor(&name("self_attn.k_norm.weight"), &[hd])?,
        }),
        false => None,
    };
    Ok(LayerWeights {
        mask,
        positional,
        input_norm: file.f32_tensor(&name("input_layernorm.weight"), &[g.d])?,
        q: linear("self_attn.q_proj", g.q, g.d, qkv_bias)?,
        k: linear("self_attn.k_proj", g.kv, g.d, qkv_bias)?,
        v: linear("self_attn.v_proj", g.kv, g.d, qkv_bias)?,
        o: linear("self_attn.o_proj", g.d, g.q, false)?,
        qk_norm,
        post_attention_norm: file.f32_tensor(&name("post_attention_layernorm.weight"), &[g.d])?,
        gate: linear("mlp.gate_proj", g.ffn, g.d, false)?,
        up: linear("mlp.up_proj", g.ffn, g.d, false)?,
        down: linear("mlp.down_proj", g.d, g.ffn, false)?,
    })
}
