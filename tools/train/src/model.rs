//! The model: a decoder-only transformer in the layout of Hugging Face's Qwen2 (so its checkpoint
//! imports as `model_type: "qwen2"`): token embeddings tied to the output head, pre-norm blocks of
//! RMSNorm, grouped-query attention with RoPE (rotate-half convention) and biases on Q, K and V, and a
//! SwiGLU MLP, with a final RMSNorm. Layers follow a local:global schedule: in every group of
//! `global_every` layers the last attends to all earlier tokens and the others to a sliding window.
//!
//! RMSNorm and RoPE are composites of differentiable tensor ops (`rms_norm_slow`, `rope_slow`),
//! because candle's fused kernels have no backward pass; the masked softmax is an op of our own with
//! its backward pass (`softmax.rs`).

use std::collections::BTreeMap;

use candle_core::{D, Device, Result, Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::mla::Mla;
use crate::rng::Rng;
use crate::softmax::MaskedSoftmax;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub layers: usize,
    pub query_heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Width of the SwiGLU MLP; 0 makes an attention-only model (no MLP and no post-attention norm),
    /// the layout of the induction-head control (`control.rs`).
    pub intermediate_size: usize,
    /// Tokens a sliding layer sees, itself included: key k is visible from query q when
    /// `k <= q && q - k < sliding_window` (the rule of transformers' sliding-window mask).
    pub sliding_window: usize,
    /// Every `global_every`-th layer (1-based) is global; the others slide.
    pub global_every: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    /// Multi-head latent attention in place of grouped-query attention (`kv_heads` is then unused):
    /// only the attention variants (`variants.rs`) train it; checkpoints are GQA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
}

impl ModelConfig {
    pub fn is_global(&self, layer: usize) -> bool {
        (layer + 1).is_multiple_of(self.global_every)
    }

    /// Parameters, embeddings counted once (they are tied to the output head).
    pub fn parameters(&self) -> usize {
        let (d, q, kv) = (self.hidden_size, self.query_heads * self.head_dim, self.kv_heads * self.head_dim);
        let attention = match self.mla {
            Some(mla) => mla.layer_parameters(self),
            None => d * q + q + 2 * (d * kv + kv) + q * d,
        };
        // The MLP and the norm before it, when there is an MLP.
        let mlp = if self.has_mlp() { 3 * d * self.intermediate_size + d } else { 0 };
        self.vocab_size * d + self.layers * (attention + mlp + d) + d
    }

    pub fn has_mlp(&self) -> bool {
        self.intermediate_size > 0
    }

    /// Values one token caches in one layer: K and V per KV head, or MLA's latent and RoPE key.
    pub fn cached_values_per_layer(&self) -> usize {
        self.mla.map_or(2 * self.kv_heads * self.head_dim, |m| m.cached_values())
    }

    /// Width RoPE rotates: the whole head, or MLA's decoupled RoPE part.
    fn rope_width(&self) -> usize {
        self.mla.map_or(self.head_dim, |m| m.rope_dim)
    }
}

/// The trainable tensors, by their Hugging Face names (`model.layers.0.self_attn.q_proj.weight`, ...).
pub struct Weights {
    pub vars: BTreeMap<String, Var>,
}

impl Weights {
    /// Seeded initialisation: N(0, 0.02) for matrices and embeddings, the output projections of each
    /// block scaled by 1/sqrt(2 * layers) (GPT-2's residual scaling), norms at 1, biases at 0.
    pub fn init(cfg: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let mut rng = Rng::new(seed);
        let mut vars = BTreeMap::new();
        let residual_std = 0.02 / ((2 * cfg.layers) as f64).sqrt();
        let mut add = |name: String, shape: &[usize], init: Init| -> Result<()> {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = match init {
                Init::Normal(std) => (0..n).map(|_| (rng.normal() * std) as f32).collect(),
                Init::Const(c) => vec![c; n],
            };
            vars.insert(name, Var::from_tensor(&Tensor::from_vec(data, shape, device)?)?);
            Ok(())
        };
        let (d, q, kv, ff) =
            (cfg.hidden_size, cfg.query_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.intermediate_size);
        add("model.embed_tokens.weight".into(), &[cfg.vocab_size, d], Init::Normal(0.02))?;
        for l in 0..cfg.layers {
            let p = format!("model.layers.{l}");
            add(format!("{p}.input_layernorm.weight"), &[d], Init::Const(1.0))?;
            if let Some(mla) = cfg.mla {
                mla.init_layer(cfg, &p, residual_std, &mut add)?;
            } else {
                add(format!("{p}.self_attn.q_proj.weight"), &[q, d], Init::Normal(0.02))?;
                add(format!("{p}.self_attn.q_proj.bias"), &[q], Init::Const(0.0))?;
                add(format!("{p}.self_attn.k_proj.weight"), &[kv, d], Init::Normal(0.02))?;
                add(format!("{p}.self_attn.k_proj.bias"), &[kv], Init::Const(0.0))?;
                add(format!("{p}.self_attn.v_proj.weight"), &[kv, d], Init::Normal(0.02))?;
                add(format!("{p}.self_attn.v_proj.bias"), &[kv], Init::Const(0.0))?;
                add(format!("{p}.self_attn.o_proj.weight"), &[d, q], Init::Normal(residual_std))?;
            }
            if !cfg.has_mlp() {
                continue;
            }
            add(format!("{p}.post_attention_layernorm.weight"), &[d], Init::Const(1.0))?;
            add(format!("{p}.mlp.gate_proj.weight"), &[ff, d], Init::Normal(0.02))?;
            add(format!("{p}.mlp.up_proj.weight"), &[ff, d], Init::Normal(0.02))?;
            add(format!("{p}.mlp.down_proj.weight"), &[d, ff], Init::Normal(residual_std))?;
        }
        add("model.norm.weight".into(), &[d], Init::Const(1.0))?;
        Ok(Self { vars })
    }

    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.vars.get(name).map(Var::as_tensor).ok_or_else(|| candle_core::Error::Msg(format!("no weight {name}")))
    }
}

pub(crate) enum Init {
    Normal(f64),
    Const(f32),
}

/// What one forward pass returns.
pub struct Forward {
    /// (batch, tokens, vocab)
    pub logits: Tensor,
    /// Per layer, (batch, query heads, tokens, tokens) attention probabilities, when asked for.
    pub probs: Vec<Tensor>,
}

/// Runs the model on `ids` (batch, tokens) of u32.
///
/// Activations stay 2-D, (batch * tokens, features), outside attention: candle's backward pass of a
/// weight broadcast over a batch dimension would sum a per-batch copy of its gradient.
pub fn forward(cfg: &ModelConfig, w: &Weights, ids: &Tensor, keep_probs: bool) -> Result<Forward> {
    let (b, t) = ids.dims2()?;
    let device = ids.device();
    let embed = w.get("model.embed_tokens.weight")?;
    let mut x = embed.index_select(&ids.flatten_all()?, 0)?;
    let (cos, sin) = rope_tables(cfg.rope_theta, cfg.rope_width(), t, device)?;
    let eps = cfg.rms_norm_eps as f32;
    let mut probs = Vec::new();
    for l in 0..cfg.layers {
        let p = format!("model.layers.{l}");
        let h = candle_nn::ops::rms_norm_slow(&x, w.get(&format!("{p}.input_layernorm.weight"))?, eps)?;
        let (q, k, v) = match cfg.mla {
            Some(mla) => mla.qkv(cfg, w, &p, &h, (b, t), (&cos, &sin))?,
            None => gqa_qkv(cfg, w, &p, &h, (b, t), (&cos, &sin))?,
        };
        // The 1/sqrt(width) scale is applied to q, a smaller tensor than the scores.
        let scores = (&q / (q.dim(3)? as f64).sqrt())?.matmul(&k.t()?)?;
        let window = if cfg.is_global(l) { None } else { Some(cfg.sliding_window) };
        let att = scores.apply_op1(MaskedSoftmax { window })?;
        let o = att.matmul(&v)?.transpose(1, 2)?.reshape((b * t, cfg.query_heads * cfg.head_dim))?;
        if keep_probs {
            probs.push(att);
        }
        x = (x + linear(w, &o, &format!("{p}.self_attn.o_proj"), false)?)?;
        if !cfg.has_mlp() {
            continue;
        }
        let h = candle_nn::ops::rms_norm_slow(&x, w.get(&format!("{p}.post_attention_layernorm.weight"))?, eps)?;
        let gate = linear(w, &h, &format!("{p}.mlp.gate_proj"), false)?.silu()?;
        let up = linear(w, &h, &format!("{p}.mlp.up_proj"), false)?;
        x = (x + linear(w, &(gate * up)?, &format!("{p}.mlp.down_proj"), false)?)?;
    }
    let x = candle_nn::ops::rms_norm_slow(&x, w.get("model.norm.weight")?, eps)?;
    let logits = x.matmul(&embed.t()?)?.reshape((b, t, cfg.vocab_size))?;
    Ok(Forward { logits, probs })
}

/// Q, K and V per query head of one grouped-query layer from its normed input `x`: query head h reads
/// KV head h / (query_heads / kv_heads), as transformers' repeat_kv.
fn gqa_qkv(
    cfg: &ModelConfig,
    w: &Weights,
    prefix: &str,
    x: &Tensor,
    (b, t): (usize, usize),
    (cos, sin): (&Tensor, &Tensor),
) -> Result<(Tensor, Tensor, Tensor)> {
    let heads = |name: &str, n: usize| -> Result<Tensor> {
        linear(w, x, &format!("{prefix}.self_attn.{name}"), true)?
            .reshape((b, t, n, cfg.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    };
    let q = candle_nn::rotary_emb::rope_slow(&heads("q_proj", cfg.query_heads)?, cos, sin)?;
    let k = candle_nn::rotary_emb::rope_slow(&heads("k_proj", cfg.kv_heads)?, cos, sin)?;
    let v = heads("v_proj", cfg.kv_heads)?;
    let group = cfg.query_heads / cfg.kv_heads;
    let repeat = |x: Tensor| -> Result<Tensor> {
        x.unsqueeze(2)?.broadcast_as((b, cfg.kv_heads, group, t, cfg.head_dim))?.reshape((
            b,
            cfg.query_heads,
            t,
            cfg.head_dim,
        ))
    };
    Ok((q, repeat(k)?, repeat(v)?))
}

/// `x W^T (+ b)` for 2-D `x`, with the weight `{name}.weight` stored (out, in) as in PyTorch.
fn linear(w: &Weights, x: &Tensor, name: &str, bias: bool) -> Result<Tensor> {
    let y = x.matmul(&w.get(&format!("{name}.weight"))?.t()?)?;
    if bias { y.broadcast_add(w.get(&format!("{name}.bias"))?) } else { Ok(y) }
}

/// Mean cross-entropy of next-token prediction: `logits` (batch, tokens, vocab), `targets` (batch, tokens).
/// The row maximum is subtracted for stability and detached: the result does not depend on it, and
/// candle's backward pass through `max` is costly.
pub fn loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let v = logits.dim(D::Minus1)?;
    let logits = logits.reshape(((), v))?;
    let shifted = logits.broadcast_sub(&logits.max_keepdim(D::Minus1)?.detach())?;
    let log_probs = shifted.broadcast_sub(&shifted.exp()?.sum_keepdim(D::Minus1)?.log()?)?;
    let picked = log_probs.gather(&targets.flatten_all()?.unsqueeze(1)?, 1)?;
    picked.mean_all()?.neg()
}

/// cos and sin of RoPE, (tokens, width / 2): pair i rotates at theta^(-2i / width).
fn rope_tables(theta: f64, width: usize, t: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = width / 2;
    let mut cos = Vec::with_capacity(t * half);
    let mut sin = Vec::with_capacity(t * half);
    for pos in 0..t {
        for i in 0..half {
            let angle = pos as f64 * theta.powf(-2.0 * i as f64 / width as f64);
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    Ok((Tensor::from_vec(cos, (t, half), device)?, Tensor::from_vec(sin, (t, half), device)?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn tiny() -> ModelConfig {
        ModelConfig {
            vocab_size: 50,
            hidden_size: 32,
            layers: 4,
            query_heads: 4,
            kv_heads: 2,
            head_dim: 8,
            intermediate_size: 48,
            sliding_window: 3,
            global_every: 4,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-6,
            max_position_embeddings: 64,
            mla: None,
        }
    }

    #[test]
    fn forward_shapes_and_masks() {
        let cfg = tiny();
        let dev = Device::Cpu;
        let w = Weights::init(&cfg, 1, &dev).unwrap();
        let n: usize = w.vars.values().map(|v| v.elem_count()).sum();
        assert_eq!(n, cfg.parameters());
        let ids = Tensor::from_vec((0..14u32).collect::<Vec<_>>(), (2, 7), &dev).unwrap();
        let out = forward(&cfg, &w, &ids, true).unwrap();
        assert_eq!(out.logits.dims(), [2, 7, 50]);
        assert_eq!(out.probs.len(), 4);
        // Layer 0 slides (window 3), layer 3 is global: row 6 sees keys 4..=6 or 0..=6.
        let row = |l: usize| out.probs[l].get(0).unwrap().get(1).unwrap().get(6).unwrap().to_vec1::<f32>().unwrap();
        let (sliding, global) = (row(0), row(3));
        assert!(sliding[..4].iter().all(|&p| p == 0.0) && sliding[4..].iter().all(|&p| p > 0.0));
        assert!(global.iter().all(|&p| p > 0.0));
        assert!((global.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    /// Issue 36's pipeline check: a logit depends on its own and earlier tokens only (the causal mask in
    /// every layer), and the loss at position p scores the target given for p (no second shift).
    #[test]
    fn logits_are_causal_and_the_loss_scores_each_position_against_its_target() {
        let cfg = tiny();
        let dev = Device::Cpu;
        let w = Weights::init(&cfg, 2, &dev).unwrap();
        let ids: Vec<u32> = (0..9u32).map(|i| (i * 7 + 3) % 50).collect();
        let logits = |ids: &[u32]| {
            let x = Tensor::from_vec(ids.to_vec(), (1, ids.len()), &dev).unwrap();
            forward(&cfg, &w, &x, false).unwrap().logits.squeeze(0).unwrap().to_vec2::<f32>().unwrap()
        };
        let base = logits(&ids);
        let mut changed = ids.clone();
        changed[5] = 49;
        let after = logits(&changed);
        assert_eq!(base[..5], after[..5], "positions before the change");
        assert!(base[5..].iter().zip(&after[5..]).all(|(a, b)| a != b), "every position from the change on");
        let targets: Vec<u32> = ids.iter().map(|&i| (i + 1) % 50).collect();
        let l = loss(
            &Tensor::new(base.clone(), &dev).unwrap().unsqueeze(0).unwrap(),
            &Tensor::from_vec(targets.clone(), (1, 9), &dev).unwrap(),
        )
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
        let by_hand = base
            .iter()
            .zip(&targets)
            .map(|(row, &t)| {
                let lse = row.iter().map(|&v| f64::from(v).exp()).sum::<f64>().ln();
                lse - f64::from(row[t as usize])
            })
            .sum::<f64>()
            / 9.0;
        assert!((f64::from(l) - by_hand).abs() < 1e-5, "{l} against {by_hand}");
    }

    #[test]
    fn attention_only_has_no_mlp_weights() {
        let cfg = ModelConfig { intermediate_size: 0, layers: 2, global_every: 1, ..tiny() };
        let w = Weights::init(&cfg, 1, &Device::Cpu).unwrap();
        assert!(w.vars.keys().all(|k| !k.contains("mlp") && !k.contains("post_attention")));
        let n: usize = w.vars.values().map(|v| v.elem_count()).sum();
        // Embedding 50 x 32; per layer: norm 32, Q 32x32+32, K and V 16x32+16 each, O 32x32; final norm 32.
        assert_eq!(n, 50 * 32 + 2 * (32 + 32 * 32 + 32 + 2 * (16 * 32 + 16) + 32 * 32) + 32);
        assert_eq!(n, cfg.parameters());
        let ids = Tensor::from_vec((0..6u32).collect::<Vec<_>>(), (1, 6), &Device::Cpu).unwrap();
        assert_eq!(forward(&cfg, &w, &ids, false).unwrap().logits.dims(), [1, 6, 50]);
    }
}
