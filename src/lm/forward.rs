//! The CPU forward pass of a [`Checkpoint`]: logits for every position and every head's attention
//! probabilities, in f32 storage with f64 sums, as transformers' Llama / Qwen2 code computes them
//! (pre-norm blocks, RMSNorm, rotary Q and K, grouped-query attention under each layer's mask, a
//! SwiGLU MLP, a final norm, the output projection). It is the reference the GPU forward pass is
//! checked against, and serves short inputs where there is no GPU.
//!
//! Its steps are the CPU twins of the GPU pass's kernels (`src/gpu/lm_forward.rs`), named after
//! them: [`embed_gather`], [`rms_norm`], [`matmul`], [`rope`], [`swiglu`]; attention itself is
//! `flash_attention`'s and `row_softmax`'s.

use super::LmError;
use super::checkpoint::{Checkpoint, LayerWeights, Linear};
use crate::attention::rope::RopeTable;

/// The longest input the CPU pass takes (less where the model was trained on fewer positions, or its
/// buffers would pass [`MAX_CPU_BYTES`]).
pub const MAX_CPU_TOKENS: usize = 1024;

/// Host memory the pass may hold at once: every layer's probabilities (`layers x heads x tokens^2`
/// floats) plus the logits (`tokens x vocab`) and the activations. 4 x 8 x 128^2 x 4 B = 2 MiB for
/// the shipped model at its trained length.
pub const MAX_CPU_BYTES: u64 = 256 << 20;

/// What one pass returns.
#[derive(Debug)]
pub struct Forward {
    pub tokens: usize,
    /// (tokens, vocab) next-token logits.
    pub logits: Vec<f32>,
    /// Per layer, (query heads, tokens, tokens) attention probabilities; 0 outside the layer's mask.
    pub probs: Vec<Vec<f32>>,
    /// Per layer, (tokens, d) hidden states after it (the residual stream, before the final norm).
    pub hidden: Vec<Vec<f32>>,
}

impl Forward {
    /// The logits after token `i`.
    pub fn logits_at(&self, i: usize) -> &[f32] {
        let vocab = self.logits.len() / self.tokens;
        &self.logits[i * vocab..][..vocab]
    }

    /// Head `head`'s probabilities in `layer`, (tokens, tokens).
    pub fn head(&self, layer: usize, head: usize) -> &[f32] {
        let n = self.tokens * self.tokens;
        &self.probs[layer][head * n..][..n]
    }
}

/// The most tokens `ck` takes on the CPU: its trained length, [`MAX_CPU_TOKENS`], and what
/// [`MAX_CPU_BYTES`] holds.
pub fn max_tokens(ck: &Checkpoint) -> usize {
    let trained = usize::try_from(ck.model.max_position_embeddings).unwrap_or(usize::MAX);
    let fits = |t: usize| host_bytes(ck, t).is_some_and(|b| b <= MAX_CPU_BYTES);
    let mut t = trained.min(MAX_CPU_TOKENS);
    while t > 0 && !fits(t) {
        t /= 2;
    }
    t
}

/// Bytes the pass holds for `t` tokens (None past u64).
fn host_bytes(ck: &Checkpoint, t: usize) -> Option<u64> {
    let m = &ck.model;
    let t = t as u64;
    let heads = u64::from(m.n_q_heads);
    let probs = (ck.layers.len() as u64).checked_mul(heads)?.checked_mul(t.checked_mul(t)?)?;
    let logits = t.checked_mul(m.vocab_size)?;
    let widths = m.d_model.checked_mul(4)?.checked_add(m.ffn_size.checked_mul(3)?)?;
    let activations =
        t.checked_mul(widths.checked_add(heads.checked_mul(u64::from(m.attn.head_dim))?.checked_mul(3)?)?)?;
    probs.checked_add(logits)?.checked_add(activations)?.checked_mul(4)
}

pub fn forward(ck: &Checkpoint, ids: &[u32]) -> Result<Forward, LmError> {
    let t = ids.len();
    let most = max_tokens(ck);
    if t == 0 || t > most {
        return Err(LmError(format!(
            "The CPU forward pass of this model takes 1 to {most} tokens (its trained length, within {} MiB), not {t}",
            MAX_CPU_BYTES >> 20
        )));
    }
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= ck.vocab()) {
        return Err(LmError(format!("token id {bad} is outside the vocabulary of {}", ck.vocab())));
    }
    let d = ck.model.d_model as usize;
    let mut x = embed_gather(&ck.embed, ids, d);
    let mut probs = Vec::with_capacity(ck.layers.len());
    let mut hidden = Vec::with_capacity(ck.layers.len());
    for layer in &ck.layers {
        let h = rms_norm(&x, &layer.input_norm, ck.rms_norm_eps);
        let (attended, p) = attention(ck, layer, &h, t);
        add(&mut x, &linear(&attended, &layer.o));
        probs.push(p);
        let h = rms_norm(&x, &layer.post_attention_norm, ck.rms_norm_eps);
        add(&mut x, &mlp(layer, &h));
        hidden.push(x.clone());
    }
    let x = rms_norm(&x, &ck.final_norm, ck.rms_norm_eps);
    let head = ck.lm_head.as_deref().unwrap_or(&ck.embed);
    Ok(Forward { tokens: t, logits: matmul(&x, head, None, d), probs, hidden })
}

/// Twin of `embed_gather.wgsl`: the rows of `embed` (each `d` wide) of the tokens `ids` (each below
/// the vocabulary), `[tokens, d]`.
pub fn embed_gather(embed: &[f32], ids: &[u32], d: usize) -> Vec<f32> {
    ids.iter().flat_map(|&id| embed[id as usize * d..][..d].iter().copied()).collect()
}

/// Attention of one layer over `t` tokens: the heads' outputs (t, heads x head_dim) and their
/// probabilities (heads, t, t).
fn attention(ck: &Checkpoint, layer: &LayerWeights, h: &[f32], t: usize) -> (Vec<f32>, Vec<f32>) {
    let hd = ck.head_dim();
    let (heads, kv_heads) = (ck.model.n_q_heads as usize, ck.model.attn.n_kv_heads as usize);
    let (mut q, mut k, v) = (linear(h, &layer.q), linear(h, &layer.k), linear(h, &layer.v));
    let (q_width, kv_width) = (heads * hd, kv_heads * hd);
    let table = RopeTable::new(t, hd, layer.positional);
    rope(&mut q, q_width, hd, &table);
    rope(&mut k, kv_width, hd, &table);
    let scale = 1.0 / (hd as f64).sqrt();
    let mut out = vec![0.0f32; t * q_width];
    let mut probs = vec![0.0f32; heads * t * t];
    let mut weights = vec![0.0f64; t];
    for head in 0..heads {
        // Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
        let kv = head / (heads / kv_heads);
        for i in 0..t {
            let qi = &q[i * q_width + head * hd..][..hd];
            let (lo, hi) = layer.mask.key_range(i as u32, t as u32);
            let keys = lo as usize..hi as usize;
            for j in keys.clone() {
                weights[j] = dot(qi, &k[j * kv_width + kv * hd..][..hd]) * scale;
            }
            softmax(&mut weights[keys.clone()]);
            let row = &mut probs[(head * t + i) * t..][..t];
            let mut acc = vec![0.0f64; hd];
            for j in keys {
                row[j] = weights[j] as f32;
                for (a, &vj) in acc.iter_mut().zip(&v[j * kv_width + kv * hd..][..hd]) {
                    *a += weights[j] * f64::from(vj);
                }
            }
            for (o, a) in out[i * q_width + head * hd..][..hd].iter_mut().zip(acc) {
                *o = a as f32;
            }
        }
    }
    (out, probs)
}

/// Twin of `rope.wgsl` (its rotation; the kernel also moves each head into a `[heads, tokens, d]`
/// layout): every head (`head_dim` wide) of every token row of `x` (`[tokens, width]`, `width` a
/// multiple of `head_dim`) rotated as the token at its position (row i at position i).
pub fn rope(x: &mut [f32], width: usize, head_dim: usize, table: &RopeTable) {
    for (pos, token) in x.chunks_exact_mut(width).enumerate() {
        token.chunks_exact_mut(head_dim).for_each(|head| table.rotate(head, pos));
    }
}

/// `down(silu(gate(h)) * up(h))`.
fn mlp(layer: &LayerWeights, h: &[f32]) -> Vec<f32> {
    let gated = swiglu(&linear(h, &layer.gate), &linear(h, &layer.up));
    linear(&gated, &layer.down)
}

/// Twin of `swiglu.wgsl`: `silu(gate) * up` elementwise, `silu(g) = g / (1 + e^-g)`.
pub fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = f64::from(g);
            (g / (1.0 + (-g).exp()) * f64::from(u)) as f32
        })
        .collect()
}

/// Twin of `rms_norm.wgsl`: rows of `x` (each `weight.len()` wide) scaled to unit root-mean-square,
/// times `weight`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let d = weight.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let mean_square = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / d as f64;
        let inv = 1.0 / (mean_square + f64::from(eps)).sqrt();
        out.extend(row.iter().zip(weight).map(|(&v, &w)| (f64::from(v) * inv) as f32 * w));
    }
    out
}

fn linear(x: &[f32], l: &Linear) -> Vec<f32> {
    matmul(x, &l.weight, l.bias.as_deref(), l.inputs)
}

/// Twin of `matmul.wgsl`: rows of `x` (each `inputs` wide) times `weight^T` (`weight` stored
/// (outputs, inputs)), plus `bias`.
pub fn matmul(x: &[f32], weight: &[f32], bias: Option<&[f32]>, inputs: usize) -> Vec<f32> {
    let outputs = weight.len() / inputs;
    let mut out = Vec::with_capacity(x.len() / inputs * outputs);
    for row in x.chunks_exact(inputs) {
        for (o, w) in weight.chunks_exact(inputs).enumerate() {
            let b = bias.map_or(0.0, |b| f64::from(b[o]));
            out.push((dot(row, w) + b) as f32);
        }
    }
    out
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}

fn softmax(x: &mut [f64]) {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
