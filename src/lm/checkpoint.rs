//! A decoder-only checkpoint in Hugging Face's Llama / Qwen2 / Gemma 3 layout, loaded for the CPU forward
//! pass: the geometry from `config.json` (read by the same importer as every other config, so the
//! figures and the forward pass agree on the model), the weights from `model.safetensors` by their
//! transformers names, each checked for its shape.
//!
//! What is read: RMSNorm, rotary positions on the whole head or part of it, grouped-query attention
//! with optional Q/K/V biases, QK-norm on each head (Qwen3), causal (global) or sliding-window
//! layers, a SwiGLU (or Gemma's GeGLU) MLP, tied or separate output weights, and Gemma 3's block
//! ([`BlockStyle`], and norms on the attention's and the MLP's outputs). Anything else (MoE, latent
//! attention, other norms or MLPs) is refused with its name, before any weight is read.

use super::LmError;
use super::model_config::{BlockStyle, ModelConfig};
use super::safetensors::{SafeTensors, TensorSource, Widened};
use super::weight_plan::{LayerSlot, norm_tensors};
use crate::attention::rope::Llama3Scaling;
use crate::model::config::{Model, Positional};
use crate::model::mask::Mask;

/// A checkpoint this large (parameters) is not loaded into host memory (the CPU pass, the shipped
/// model): larger ones stream to the GPU (`lm::weight_plan`).
const MAX_CPU_PARAMS: u128 = 64 << 20;

/// `y = x W^T + b` with `W` stored (out, in) as PyTorch keeps it.
#[derive(Clone)]
pub struct Linear {
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub outputs: usize,
    pub inputs: usize,
}

/// QK-norm (Qwen3, Gemma 3): RMSNorm weights, `[head_dim]` each, shared by every query head and by every
/// key head, applied to each head after its projection and before rotary positions.
#[derive(Clone)]
pub struct QkNormWeights {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
}

#[derive(Clone)]
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
    /// The norm before the MLP (Llama's `post_attention_layernorm`, Gemma's `pre_feedforward_layernorm`).
    pub mlp_norm: Vec<f32>,
    /// Gemma 3's norms on the attention's and the MLP's outputs, before each joins the residual stream.
    pub output_norms: Option<OutputNorms>,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

/// Norms on a block's outputs (Gemma 3's `post_attention_layernorm` and `post_feedforward_layernorm`).
#[derive(Clone)]
pub struct OutputNorms {
    pub attention: Vec<f32>,
    pub mlp: Vec<f32>,
}

/// A loaded checkpoint: its geometry and every weight as f32.
#[derive(Clone)]
pub struct Checkpoint {
    pub model: Model,
    pub rms_norm_eps: f32,
    pub style: BlockStyle,
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
        let config = read_config(config_json)?;
        Self::assemble(config, &SafeTensors::parse(safetensors)?)
    }

    /// [`Checkpoint::load`] from a file's tensors already widened to f32 (a step at a time, by the page).
    pub fn from_widened(config_json: &str, tensors: &Widened) -> Result<Checkpoint, LmError> {
        Self::assemble(read_config(config_json)?, tensors)
    }

    fn assemble(config: ModelConfig, file: &dyn TensorSource) -> Result<Checkpoint, LmError> {
        let ModelConfig { model, rms_norm_eps, masks, rope_scaling, style } = config;
        let g = Geometry::of(&model);
        let layers =
            masks.into_iter().enumerate().map(|(l, mask)| layer(file, &model, l, mask)).collect::<Result<_, _>>()?;
        let embed = file.f32_tensor("model.embed_tokens.weight", &[g.vocab, g.d])?;
        let lm_head = match model.tie_embeddings {
            true => None,
            false => Some(file.f32_tensor("lm_head.weight", &[g.vocab, g.d])?),
        };
        let final_norm = file.f32_tensor("model.norm.weight", &[g.d])?;
        Ok(Checkpoint { model, rms_norm_eps, style, rope_scaling, embed, layers, final_norm, lm_head })
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

/// What `config.json` says, refused where the model is too large to hold as f32.
fn read_config(config_json: &str) -> Result<ModelConfig, LmError> {
    let config = ModelConfig::read(config_json)?;
    let params = crate::model::params::model_params(&config.model).total();
    if params > MAX_CPU_PARAMS {
        return Err(LmError(format!(
            "{params} parameters are too many to hold in this page's memory as f32 (at most {MAX_CPU_PARAMS})"
        )));
    }
    Ok(config)
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

fn layer(file: &dyn TensorSource, m: &Model, l: usize, mask: Mask) -> Result<LayerWeights, LmError> {
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
    // The family's norm in `slot`, by its tensor name (None where the family has no such norm).
    let norm = |slot: LayerSlot| match norm_tensors(m).iter().find(|(_, s)| *s == slot) {
        Some((part, _)) => file.f32_tensor(&name(&format!("{part}.weight")), &[g.d]).map(Some),
        None => Ok(None),
    };
    let input_norm = norm(LayerSlot::InputNorm)?.expect("every family has one");
    let mlp_norm = norm(LayerSlot::MlpNorm)?.expect("every family has one");
    let output_norms = match (norm(LayerSlot::AttentionOutNorm)?, norm(LayerSlot::MlpOutNorm)?) {
        (Some(attention), Some(mlp)) => Some(OutputNorms { attention, mlp }),
        _ => None,
    };
    Ok(LayerWeights {
        mask,
        positional,
        input_norm,
        q: linear("self_attn.q_proj", g.q, g.d, qkv_bias)?,
        k: linear("self_attn.k_proj", g.kv, g.d, qkv_bias)?,
        v: linear("self_attn.v_proj", g.kv, g.d, qkv_bias)?,
        o: linear("self_attn.o_proj", g.d, g.q, false)?,
        qk_norm,
        mlp_norm,
        output_norms,
        gate: linear("mlp.gate_proj", g.ffn, g.d, false)?,
        up: linear("mlp.up_proj", g.ffn, g.d, false)?,
        down: linear("mlp.down_proj", g.d, g.ffn, false)?,
    })
}
