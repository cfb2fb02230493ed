//! What `config.json` says of a checkpoint the forward passes run ([`ModelConfig`]): its geometry
//! (read by the same importer as every other config, so the figures and the forward pass agree on
//! the model), its norms' epsilon, each layer's mask, and how its family's block differs from
//! Llama's ([`BlockStyle`]), after refusing every family and feature the passes do not implement.

use super::LmError;
use crate::attention::rope::Llama3Scaling;
use crate::catalog::hf_import::import_hf_config;
use crate::model::config::{FfnKind, Model, NormKind, Positional};
use crate::model::mask::Mask;

/// The MLP's gate, defined beside its twin kernel (the floor below this one).
pub use crate::cpu::swiglu::Gate;

/// What config.json says of a checkpoint the forward passes run: its geometry, its norms' epsilon,
/// each layer's mask and its family's block, after refusing every family and feature they do not
/// implement.
pub struct ModelConfig {
    pub model: Model,
    pub rms_norm_eps: f32,
    pub masks: Vec<Mask>,
    /// Llama 3.1's rotary scaling, on every layer (the layout's positions do not carry it).
    pub rope_scaling: Option<Llama3Scaling>,
    pub style: BlockStyle,
}

/// How a family's block differs from Llama's, as both forward passes apply it. Gemma 3's norms on
/// the attention's and the MLP's outputs are weights (`output_norms` of a layer), not a style.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockStyle {
    /// Added to every norm weight: Gemma stores `w` and scales by `1 + w` (1), others by `w` (0).
    pub norm_offset: f32,
    /// The embedding rows are multiplied by this before the first layer: `sqrt(d_model)` for Gemma
    /// (in f32, as transformers computes it for f32 weights), 1 otherwise.
    pub embed_scale: f32,
    pub gate: Gate,
    /// Attention logits are `q . k` times this: `1 / sqrt(head_dim)`, or Gemma's
    /// `1 / sqrt(query_pre_attn_scalar)`.
    pub attn_scale: f32,
}

impl BlockStyle {
    /// Llama's block for heads `head_dim` wide.
    pub fn llama(head_dim: u32) -> Self {
        Self { norm_offset: 0.0, embed_scale: 1.0, gate: Gate::Silu, attn_scale: 1.0 / (head_dim as f32).sqrt() }
    }
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
        let style = block_style(&config, &model)?;
        let rms_norm_eps = config
            .get("rms_norm_eps")
            .and_then(serde_json::Value::as_f64)
            .filter(|e| e.is_finite() && *e > 0.0)
            .ok_or_else(|| LmError("config.json: rms_norm_eps is missing or not a positive number".into()))?
            as f32;
        Ok(ModelConfig { model, rms_norm_eps, masks, rope_scaling, style })
    }
}

/// Families whose forward pass is this one (no extra multipliers, as Granite or MiniCPM add), with
/// plain, linearly scaled or Llama 3.1-scaled rotary positions; Gemma 3's text models with their
/// [`BlockStyle`] and four norms per layer.
const FAMILIES: [&str; 5] = ["llama", "mistral", "qwen2", "qwen3", GEMMA3];

/// Gemma 3's text-only checkpoints (270M, 1B); the larger ones wrap it with a vision tower.
const GEMMA3: &str = "gemma3_text";

/// Refuses a family or a rotary scaling the forward passes do not run; returns Llama 3.1's scaling
/// when the config asks for it (plain and linear scaling are in the layout's positions already).
fn supported_family(config: &serde_json::Value) -> Result<Option<Llama3Scaling>, LmError> {
    let text = |v: &serde_json::Value, key: &str| v.get(key).and_then(serde_json::Value::as_str).map(str::to_string);
    let family = text(config, "model_type").unwrap_or_default();
    if !FAMILIES.contains(&family.as_str()) {
        return Err(LmError(format!(
            "This page runs {} checkpoints (SmolLM's are llama; Gemma 3's text-only ones gemma3_text), not model_type \
             {family:?}",
            FAMILIES.join(", ")
        )));
    }
    let mut llama3 = None;
    let mut seen: Option<&serde_json::Value> = None;
    for key in ["rope_scaling", "rope_parameters"] {
        let Some(scaling) = config.get(key).filter(|v| !v.is_null()) else { continue };
        let kind_of = |v: &serde_json::Value| text(v, "rope_type").or_else(|| text(v, "type"));
        let refuse = |kind: &str, at: &str| {
            Err(LmError(format!("This page's forward pass does not run {kind} rotary scaling yet ({at})")))
        };
        // transformers 5 may write one object per layer type: the layout reads plain or linear ones.
        for layers in ["sliding_attention", "full_attention"] {
            match scaling.get(layers).map(kind_of) {
                Some(Some(kind)) if !matches!(kind.as_str(), "default" | "linear") => {
                    return refuse(&kind, &format!("{key}.{layers}"));
                }
                _ => {}
            }
        }
        let kind = kind_of(scaling).unwrap_or_else(|| "default".into());
        let parsed = match kind.as_str() {
            "default" | "linear" => None,
            // On every layer: Gemma 3 would keep it off its sliding layers.
            "llama3" if family != GEMMA3 => Some(llama3_scaling(scaling, key)?),
            _ => return refuse(&kind, key),
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
    let gated = matches!(m.ffn_kind, FfnKind::SwiGlu | FfnKind::GeGlu);
    if m.norm != NormKind::RmsNorm || !gated || !matches!(m.norms_per_layer, 2 | 4) {
        return lacks("norms other than RMSNorm before (and after) attention and MLP, or ungated MLPs");
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

/// The family's block: Gemma 3's norms, embedding scale, GELU gate and attention scale, or Llama's
/// with the config's activation. Refuses what Gemma 3's pass leaves out (soft-capping, bidirectional
/// attention) and activations neither pass runs.
fn block_style(config: &serde_json::Value, m: &Model) -> Result<BlockStyle, LmError> {
    let gemma = config.get("model_type").and_then(serde_json::Value::as_str) == Some(GEMMA3);
    // Each family's transformers code reads its own key, with its own default.
    let (key, default) = if gemma { ("hidden_activation", "gelu_pytorch_tanh") } else { ("hidden_act", "silu") };
    let activation = config.get(key).and_then(serde_json::Value::as_str);
    let gate = match activation.unwrap_or(default) {
        "silu" | "swish" => Gate::Silu,
        "gelu_pytorch_tanh" | "gelu_new" => Gate::GeluTanh,
        other => {
            return Err(LmError(format!(
                "This page's forward pass gates its MLP with silu or gelu_pytorch_tanh, not {other:?}"
            )));
        }
    };
    let llama = BlockStyle { gate, ..BlockStyle::llama(m.attn.head_dim) };
    if !gemma {
        return Ok(llama);
    }
    for key in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if config.get(key).is_some_and(|v| !v.is_null()) {
            return Err(LmError(format!("This page's forward pass does not run soft-capping yet ({key})")));
        }
    }
    if config.get("use_bidirectional_attention").and_then(serde_json::Value::as_bool) == Some(true) {
        return Err(LmError("This page's forward pass runs causal attention, not bidirectional".into()));
    }
    // transformers' default for Gemma 3 when the file is silent.
    let scalar = match config.get("query_pre_attn_scalar") {
        None => Some(256.0),
        Some(v) => v.as_f64(),
    };
    // A scale an f32 holds (not 0 or infinite), as the kernels take it.
    let attn_scale = scalar.filter(|s| *s > 0.0).map(|s| (1.0 / s.sqrt()) as f32).filter(|s| s.is_normal());
    let attn_scale = attn_scale
        .ok_or_else(|| LmError("config.json: query_pre_attn_scalar is not a usable positive number".into()))?;
    Ok(BlockStyle { norm_offset: 1.0, embed_scale: (m.d_model as f64).sqrt() as f32, gate, attn_scale })
}
