//! Multi-head latent attention in DeepSeek's form, for the attention variants (`variants.rs`). Each
//! token caches one normed latent of `kv_rank` values and one RoPE key of `rope_dim` values that every
//! head shares; per head, K's content part and V are decompressed from the latent, and each query has a
//! content part of `head_dim` and a RoPE part of `rope_dim`. The score is the sum of the two parts'
//! dot products over sqrt(head_dim + rope_dim). No biases, as in DeepSeek V2/V3.

use candle_core::{Result, Tensor};
use serde::{Deserialize, Serialize};

use crate::model::{Init, ModelConfig, Weights};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Mla {
    /// Width of the latent each token caches for K and V.
    pub kv_rank: usize,
    /// Width of the decoupled RoPE key (one, shared by the heads) and of each query's RoPE part.
    pub rope_dim: usize,
}

impl Mla {
    /// Values one token caches in one layer: the latent and the shared RoPE key.
    pub fn cached_values(&self) -> usize {
        self.kv_rank + self.rope_dim
    }

    /// Attention parameters of one layer (Q, the latent's down-projection and norm, its up-projection
    /// to every head's K content and V, and O).
    pub fn layer_parameters(&self, cfg: &ModelConfig) -> usize {
        let (d, h, hd, r, dr) = (cfg.hidden_size, cfg.query_heads, cfg.head_dim, self.kv_rank, self.rope_dim);
        d * h * (hd + dr) + d * (r + dr) + r + r * h * 2 * hd + h * hd * d
    }

    /// The layer's tensors, named as in DeepSeek's checkpoints.
    pub(crate) fn init_layer(
        &self,
        cfg: &ModelConfig,
        prefix: &str,
        residual_std: f64,
        add: &mut impl FnMut(String, &[usize], Init) -> Result<()>,
    ) -> Result<()> {
        let (d, h, hd, r, dr) = (cfg.hidden_size, cfg.query_heads, cfg.head_dim, self.kv_rank, self.rope_dim);
        add(format!("{prefix}.self_attn.q_proj.weight"), &[h * (hd + dr), d], Init::Normal(0.02))?;
        add(format!("{prefix}.self_attn.kv_a_proj_with_mqa.weight"), &[r + dr, d], Init::Normal(0.02))?;
        add(format!("{prefix}.self_attn.kv_a_layernorm.weight"), &[r], Init::Const(1.0))?;
        add(format!("{prefix}.self_attn.kv_b_proj.weight"), &[h * 2 * hd, r], Init::Normal(0.02))?;
        add(format!("{prefix}.self_attn.o_proj.weight"), &[d, h * hd], Init::Normal(residual_std))
    }

    /// Q and K, (batch, heads, tokens, head_dim + rope_dim), and V, (batch, heads, tokens, head_dim), of
    /// one layer from its normed input `x` (batch * tokens, hidden); `cos`/`sin` are RoPE's tables at
    /// `rope_dim`.
    pub fn qkv(
        &self,
        cfg: &ModelConfig,
        w: &Weights,
        prefix: &str,
        x: &Tensor,
        (b, t): (usize, usize),
        (cos, sin): (&Tensor, &Tensor),
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (h, hd, r, dr) = (cfg.query_heads, cfg.head_dim, self.kv_rank, self.rope_dim);
        let weight = |name: &str| w.get(&format!("{prefix}.self_attn.{name}.weight"));
        let rope = |x: Tensor| candle_nn::rotary_emb::rope_slow(&x.contiguous()?, cos, sin);
        let q = x.matmul(&weight("q_proj")?.t()?)?.reshape((b, t, h, hd + dr))?.transpose(1, 2)?;
        let q = Tensor::cat(&[&q.narrow(3, 0, hd)?, &rope(q.narrow(3, hd, dr)?)?], 3)?;
        let compressed = x.matmul(&weight("kv_a_proj_with_mqa")?.t()?)?;
        let latent = candle_nn::ops::rms_norm_slow(
            &compressed.narrow(1, 0, r)?.contiguous()?,
            weight("kv_a_layernorm")?,
            cfg.rms_norm_eps as f32,
        )?;
        let k_rope = rope(compressed.narrow(1, r, dr)?.reshape((b, t, 1, dr))?.transpose(1, 2)?)?;
        let kv = latent.matmul(&weight("kv_b_proj")?.t()?)?.reshape((b, t, h, 2 * hd))?.transpose(1, 2)?;
        let k = Tensor::cat(&[&kv.narrow(3, 0, hd)?, &k_rope.broadcast_as((b, h, t, dr))?], 3)?;
        Ok((q.contiguous()?, k.contiguous()?, kv.narrow(3, hd, hd)?.contiguous()?))
    }
}
