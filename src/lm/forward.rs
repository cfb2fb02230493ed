//! The CPU forward pass of a [`Checkpoint`]: logits for every position and every head's attention
//! probabilities, in f32 storage with f64 sums, as transformers' Llama / Qwen2 / Gemma 3 code computes
//! them (pre-norm blocks, RMSNorm, rotary Q and K, grouped-query attention under each layer's mask, a
//! gated MLP, a final norm, the output projection; Gemma 3's scaled embedding, `1 + w` norms and norms
//! on each block's output). It is the reference the GPU forward pass is checked against, and serves
//! short inputs where there is no GPU.
//!
//! Its steps are the CPU twins of the GPU pass's kernels (`src/gpu/lm_forward.rs`), each in
//! `crate::cpu` under its kernel's name: [`embed_gather`], [`rms_norm`], [`matmul`], [`rope`],
//! [`swiglu`] (with either [`Gate`]); attention itself is `flash_attention`'s and `row_softmax`'s.

use super::LmError;
use super::checkpoint::{Checkpoint, LayerWeights, Linear};
pub use super::model_config::Gate;
use crate::attention::rope::RopeTable;
use crate::cpu::kept_attention::scaled_softmax;
pub(crate) use crate::cpu::kept_attention::softmax;
use crate::cpu::kv_quant::{kv_quant, kv_quant_scaled_by_first};
pub use crate::cpu::{embed_gather::embed_gather, matmul::matmul, rms_norm::rms_norm, rope::rope, swiglu::swiglu};
use crate::model::Model;
use crate::model::kv_evict::EvictPolicy;
use crate::model::kv_quant::{KvLayout, KvScheme, KvTensor};

#[path = "forward_evict.rs"]
mod evict;
pub use evict::{EvictionRecord, OWNERSHIP_RULES};

/// The longest input the CPU pass takes (less where the model was trained on fewer positions, or its
/// buffers would pass [`MAX_CPU_BYTES`]).
pub const MAX_CPU_TOKENS: usize = 1024;

/// Host memory the pass may hold at once: every layer's probabilities (`layers x heads x tokens^2`
/// floats) plus the logits kept (`rows x vocab`) and the activations. 4 x 8 x 128^2 x 4 B = 2 MiB for
/// the shipped model at its trained length.
pub const MAX_CPU_BYTES: u64 = 256 << 20;

/// What one pass returns.
#[derive(Debug)]
pub struct ModelPass {
    pub tokens: usize,
    /// (logit_rows, vocab) next-token logits of the last `logit_rows` positions.
    pub logits: Vec<f32>,
    pub logit_rows: usize,
    /// Per layer, (query heads, tokens, tokens) attention probabilities; 0 outside the layer's mask.
    pub probs: Vec<Vec<f32>>,
    /// Per layer, (tokens, d) hidden states after it (the residual stream, before the final norm).
    pub hidden: Vec<Vec<f32>>,
    /// Per layer, (tokens, query heads x head_dim) each head's attention output before W_O.
    pub attended: Vec<Vec<f32>>,
}

impl ModelPass {
    /// The logits after token `i` (one of the last `logit_rows`).
    pub fn logits_at(&self, i: usize) -> &[f32] {
        let vocab = self.logits.len() / self.logit_rows.max(1);
        assert!(i < self.tokens && i + self.logit_rows >= self.tokens, "no logits kept after token {i}");
        let row = i + self.logit_rows - self.tokens;
        &self.logits[row * vocab..][..vocab]
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
    max_tokens_of(&ck.model)
}

/// The most tokens a pass of `m` takes whose results the page holds (every layer's probabilities
/// and the last position's logits: the GPU pass reads them back too), as [`max_tokens`]. (A
/// 262,144-token vocabulary's logits for every position would cut Gemma 3 270M to 128 tokens.)
pub fn max_tokens_of(m: &Model) -> usize {
    let trained = usize::try_from(m.max_position_embeddings).unwrap_or(usize::MAX);
    let fits = |t: usize| host_bytes(m, t, 1).is_some_and(|b| b <= MAX_CPU_BYTES);
    let mut t = trained.min(MAX_CPU_TOKENS);
    while t > 0 && !fits(t) {
        t /= 2;
    }
    t
}

/// Bytes the pass holds for `t` tokens keeping `logit_rows` positions' logits (None past u64).
fn host_bytes(m: &Model, t: usize, logit_rows: usize) -> Option<u64> {
    let t = t as u64;
    let heads = u64::from(m.n_q_heads);
    let probs = (m.schedule.layers().len() as u64).checked_mul(heads)?.checked_mul(t.checked_mul(t)?)?;
    let logits = (logit_rows as u64).min(t).checked_mul(m.vocab_size)?;
    let widths = m.d_model.checked_mul(4)?.checked_add(m.ffn_size.checked_mul(3)?)?;
    let activations =
        t.checked_mul(widths.checked_add(heads.checked_mul(u64::from(m.attn.head_dim))?.checked_mul(3)?)?)?;
    probs.checked_add(logits)?.checked_add(activations)?.checked_mul(4)
}

pub fn forward(ck: &Checkpoint, ids: &[u32]) -> Result<ModelPass, LmError> {
    let mut pass = CpuPass::new(ck, ids, ids.len())?;
    while pass.step() {}
    Ok(pass.finish())
}

/// Query rows per step of [`CpuPass`]: at most about 5 million multiply-adds for the shipped model
/// (a few ms of wasm), so the page can let the browser in between steps.
const ROWS_PER_STEP: usize = 16;

/// One step of a [`CpuPass`]: a block of rows, or one head's attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// Rows' norm, Q/K/V projections and rotation in a layer.
    Qkv { layer: usize, rows: (usize, usize) },
    /// One query head's attention over every row.
    Head { layer: usize, head: usize },
    /// Rows' output projection and MLP, each added to the residual stream.
    Mix { layer: usize, rows: (usize, usize) },
    /// Rows' final norm and logits.
    Logits { rows: (usize, usize) },
}

/// The CPU forward pass cut into steps of a few ms each ([`CpuPass::step`]), so the page runs it
/// between frames; [`forward`] runs every step at once. Each row is computed exactly as a whole pass
/// computes it (norms, projections and MLP are row by row; attention is head by head).
pub struct CpuPass<'a> {
    ck: &'a Checkpoint,
    ids: Vec<u32>,
    work: Vec<Work>,
    next: usize,
    x: Vec<f32>,
    /// The current layer's rotated Q, K, V and attended heads, `[tokens, width]` each.
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attended: Vec<f32>,
    table: Option<RopeTable>,
    probs: Vec<Vec<f32>>,
    hidden: Vec<Vec<f32>>,
    /// Every finished layer's `attended`.
    attended_layers: Vec<Vec<f32>>,
    logits: Vec<f32>,
    logit_rows: usize,
    kv_scheme: KvScheme,
    /// Decoding's prompt (`with_kv_scheme_decoded`): its tokens alone set fp8's scales, and KIVI's
    /// row i reads the cache as it stood at max(prompt, i + 1) tokens.
    kv_prompt: Option<u32>,
    /// KIVI's K and V as computed, for the tokens a row's cache had not quantised yet (decoding).
    kv_unrounded: Option<(Vec<f32>, Vec<f32>)>,
    /// An evicting cache's policy, K, and what it kept (`with_eviction`).
    eviction: Option<EvictionRecord>,
}

impl<'a> CpuPass<'a> {
    /// A pass over `ids` returning the logits of the last `logit_rows` positions (all of them for the
    /// reference; the page needs only the last), after checking the input.
    pub fn new(ck: &'a Checkpoint, ids: &[u32], logit_rows: usize) -> Result<Self, LmError> {
        let t = ids.len();
        let most = max_tokens(ck);
        if t == 0 || t > most {
            return Err(LmError(format!(
                "The CPU forward pass of this model takes 1 to {most} tokens (its trained length, within {} MiB), not {t}",
                MAX_CPU_BYTES >> 20
            )));
        }
        // Every position's logits (the reference) may not fit where the last one's do.
        if host_bytes(&ck.model, t, logit_rows).is_none_or(|b| b > MAX_CPU_BYTES) {
            return Err(LmError(format!(
                "{logit_rows} positions' logits of {t} tokens pass the CPU pass's {} MiB",
                MAX_CPU_BYTES >> 20
            )));
        }
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= ck.vocab()) {
            return Err(LmError(format!("token id {bad} is outside the vocabulary of {}", ck.vocab())));
        }
        let blocks = |a: usize| (a..t).step_by(ROWS_PER_STEP).map(move |r| (r, (r + ROWS_PER_STEP).min(t)));
        let mut work = Vec::new();
        for layer in 0..ck.layers.len() {
            work.extend(blocks(0).map(|rows| Work::Qkv { layer, rows }));
            work.extend((0..ck.model.n_q_heads as usize).map(|head| Work::Head { layer, head }));
            work.extend(blocks(0).map(|rows| Work::Mix { layer, rows }));
        }
        let logit_rows = logit_rows.clamp(1, t);
        work.extend(blocks(t - logit_rows).map(|rows| Work::Logits { rows }));
        let (q_width, kv_width) = ck.widths();
        Ok(Self {
            ck,
            ids: ids.to_vec(),
            work,
            next: 0,
            x: embed_gather(&ck.embed, ids, ck.model.d_model as usize, ck.style.embed_scale),
            q: vec![0.0; t * q_width],
            k: vec![0.0; t * kv_width],
            v: vec![0.0; t * kv_width],
            attended: vec![0.0; t * q_width],
            table: None,
            probs: Vec::with_capacity(ck.layers.len()),
            hidden: Vec::with_capacity(ck.layers.len()),
            attended_layers: Vec::with_capacity(ck.layers.len()),
            logits: Vec::new(),
            logit_rows,
            kv_scheme: KvScheme::Fp32,
            kv_prompt: None,
            kv_unrounded: None,
            eviction: None,
        })
    }

    /// The same pass reading a cache stored as `scheme`: each layer's K (after its rotation) and V
    /// are rounded to the scheme's values before any head attends, as the GPU pass does (`kv_quant`).
    pub fn with_kv_scheme(mut self, scheme: KvScheme) -> Self {
        self.kv_scheme = scheme;
        self
    }

    /// As [`CpuPass::with_kv_scheme`], each row reading the cache as decoding holds it when the first
    /// `prompt` tokens were prefilled at once and each later token joined alone (Generate's,
    /// `kv_pack`): fp8's scales set by the prompt's tokens alone, later values saturating past them;
    /// KIVI's row i reading the tokens its cache had quantised at max(prompt, i + 1) tokens as
    /// rounded, the later ones as computed. Schemes that round each token alone read the same either way.
    pub fn with_kv_scheme_decoded(mut self, scheme: KvScheme, prompt: usize) -> Self {
        self.kv_prompt = Some(u32::try_from(prompt).unwrap_or(u32::MAX));
        self.with_kv_scheme(scheme)
    }

    /// The same pass decoding through an evicting cache of `keep` tokens per layer (at least 1): at
    /// each position the layer's cache admits the token, evicts by `policy`
    /// ([`crate::model::kv_evict`]), and every head of the layer reads only the kept keys and values.
    /// For causal and sliding layers (a bidirectional layer has no decoding order).
    pub fn with_eviction(mut self, policy: EvictPolicy, keep: usize) -> Self {
        self.eviction = Some(EvictionRecord::new(policy, keep, self.ck.layers.len()));
        self
    }

    /// What the evicting cache kept and the attention it threw away (after every step has run).
    pub fn take_eviction(&mut self) -> Option<EvictionRecord> {
        self.eviction.take()
    }

    /// Runs the next step; false once every step has run.
    pub fn step(&mut self) -> bool {
        let Some(&work) = self.work.get(self.next) else { return false };
        self.next += 1;
        match work {
            Work::Qkv { layer, rows } => self.qkv(layer, rows),
            Work::Head { layer, head } => self.head(layer, head),
            Work::Mix { layer, rows } => self.mix(layer, rows),
            Work::Logits { rows } => self.logits(rows),
        }
        true
    }

    /// The results (after every step has run).
    pub fn finish(self) -> ModelPass {
        let logit_rows = self.logit_rows;
        let (probs, hidden, attended) = (self.probs, self.hidden, self.attended_layers);
        ModelPass { tokens: self.ids.len(), logits: self.logits, logit_rows, probs, hidden, attended }
    }

    fn qkv(&mut self, l: usize, (a, b): (usize, usize)) {
        let (ck, layer, t) = (self.ck, &self.ck.layers[l], self.ids.len());
        let hd = ck.head_dim();
        let (q_width, kv_width) = ck.widths();
        if a == 0 {
            self.table = Some(RopeTable::scaled(0..t, hd, layer.positional, ck.rope_scaling));
            self.probs.push(vec![0.0; ck.model.n_q_heads as usize * t * t]);
        }
        let d = ck.model.d_model as usize;
        let norm = |x: &[f32], weight: &[f32]| checkpoint_norm(ck, x, weight);
        let h = norm(&self.x[a * d..b * d], &layer.input_norm);
        let table = self.table.as_ref().expect("set at row 0");
        let rotated = |lin: &Linear, width: usize, head_norm: Option<&[f32]>| {
            let mut rows = linear(&h, lin);
            for (i, token) in rows.chunks_exact_mut(width).enumerate() {
                for head in token.chunks_exact_mut(hd) {
                    if let Some(weight) = head_norm {
                        head.copy_from_slice(&norm(head, weight));
                    }
                    table.rotate(head, a + i);
                }
            }
            rows
        };
        let qk_norm = layer.qk_norm.as_ref();
        let q_rows = rotated(&layer.q, q_width, qk_norm.map(|n| n.q.as_slice()));
        self.q[a * q_width..b * q_width].copy_from_slice(&q_rows);
        let k_rows = rotated(&layer.k, kv_width, qk_norm.map(|n| n.k.as_slice()));
        self.k[a * kv_width..b * kv_width].copy_from_slice(&k_rows);
        self.v[a * kv_width..b * kv_width].copy_from_slice(&linear(&h, &layer.v));
        if b == t {
            self.quantise_kv();
        }
    }

    /// The layer's K and V (`[tokens, h_kv, d]`) rounded to the pass's KV scheme.
    fn quantise_kv(&mut self) {
        let (t, d) = (self.ids.len() as u32, self.ck.head_dim() as u32);
        let heads = self.ck.model.attn.n_kv_heads;
        let layout = KvLayout { heads, tokens: t, d, head_stride: d, token_stride: heads * d };
        if self.kv_prompt.is_some() && matches!(self.kv_scheme, KvScheme::Kivi { .. }) {
            self.kv_unrounded = Some((self.k.clone(), self.v.clone()));
        }
        for (tensor, x) in [(KvTensor::K, &mut self.k), (KvTensor::V, &mut self.v)] {
            match (self.kv_scheme.pass(tensor, t), self.kv_prompt) {
                (Some(pass), Some(first)) => kv_quant_scaled_by_first(x, layout, &pass, first),
                (Some(pass), None) => kv_quant(x, layout, &pass),
                (None, _) => {}
            }
        }
    }

    /// Query head `head`'s attention over every row: its probabilities and its slice of `attended`.
    fn head(&mut self, l: usize, head: usize) {
        if head == 0 && self.eviction.is_some() {
            self.evict_layer(l);
        }
        let (ck, t) = (self.ck, self.ids.len());
        let hd = ck.head_dim();
        let (q_width, _) = ck.widths();
        let kv = self.kv_head(head);
        for i in 0..t {
            let keys = self.keys_read(l, i);
            let weights = self.attend_row(head, i, &keys);
            let mut acc = vec![0.0f64; hd];
            for (&j, &w) in keys.iter().zip(&weights) {
                for (a, &vj) in acc.iter_mut().zip(self.kv_row(KvTensor::V, i, j, kv)) {
                    *a += w * f64::from(vj);
                }
            }
            let row = &mut self.probs.last_mut().expect("pushed by the layer's first rows")[(head * t + i) * t..][..t];
            for (&j, &w) in keys.iter().zip(&weights) {
                row[j] = w as f32;
            }
            for (o, a) in self.attended[i * q_width + head * hd..][..hd].iter_mut().zip(acc) {
                *o = a as f32;
            }
        }
    }

    /// Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
    fn kv_head(&self, head: usize) -> usize {
        head / (self.ck.model.n_q_heads / self.ck.model.attn.n_kv_heads) as usize
    }

    /// The keys query `i` reads in layer `l`: those its mask lets through, or the evicting cache's.
    fn keys_read(&self, l: usize, i: usize) -> Vec<usize> {
        if let Some(kept) = self.eviction.as_ref().and_then(|e| e.kept.get(l)) {
            return kept[i].iter().map(|&p| p as usize).collect();
        }
        let (lo, hi) = self.ck.layers[l].mask.key_range(i as u32, self.ids.len() as u32);
        (lo as usize..hi as usize).collect()
    }

    /// Head `head`'s softmax of query `i` over `keys` (f64).
    fn attend_row(&self, head: usize, i: usize, keys: &[usize]) -> Vec<f64> {
        let hd = self.ck.head_dim();
        let (q_width, _) = self.ck.widths();
        let kv = self.kv_head(head);
        let scale = f64::from(self.ck.style.attn_scale);
        let qi = &self.q[i * q_width + head * hd..][..hd];
        scaled_softmax(qi, keys.iter().map(|&j| self.kv_row(KvTensor::K, i, j, kv)), scale)
    }

    /// KV head `kv`'s `tensor` row of token `j` as query `i` reads it: rounded, or as computed where
    /// KIVI's cache had not quantised it yet when `i` was decoded.
    fn kv_row(&self, tensor: KvTensor, i: usize, j: usize, kv: usize) -> &[f32] {
        let hd = self.ck.head_dim();
        let (rounded, unrounded) = match (tensor, &self.kv_unrounded) {
            (KvTensor::K, raw) => (&self.k, raw.as_ref().map(|r| &r.0)),
            (KvTensor::V, raw) => (&self.v, raw.as_ref().map(|r| &r.1)),
        };
        let source = match (unrounded, self.kv_prompt) {
            (Some(raw), Some(prompt)) => {
                let cached = (prompt as usize).max(i + 1).min(self.ids.len()) as u32;
                let quantised = self.kv_scheme.pass(tensor, cached).map_or(0, |p| p.tokens as usize);
                if j < quantised { rounded } else { raw }
            }
            _ => rounded,
        };
        let kv_width = self.ck.widths().1;
        &source[j * kv_width + kv * hd..][..hd]
    }

    fn mix(&mut self, l: usize, (a, b): (usize, usize)) {
        let (ck, layer) = (self.ck, &self.ck.layers[l]);
        let d = ck.model.d_model as usize;
        let (q_width, _) = ck.widths();
        let norm = |x: &[f32], weight: &[f32]| checkpoint_norm(ck, x, weight);
        let out_norms = layer.output_norms.as_ref();
        // Each block's output joins the residual stream, through Gemma 3's norm where it has one.
        let join = |x: &mut [f32], out: Vec<f32>, weight: Option<&Vec<f32>>| match weight {
            Some(w) => add(x, &norm(&out, w)),
            None => add(x, &out),
        };
        let x = &mut self.x[a * d..b * d];
        join(x, linear(&self.attended[a * q_width..b * q_width], &layer.o), out_norms.map(|n| &n.attention));
        let h = norm(x, &layer.mlp_norm);
        join(x, mlp(layer, &h, ck.style.gate), out_norms.map(|n| &n.mlp));
        if b == self.ids.len() {
            self.hidden.push(self.x.clone());
            self.attended_layers.push(self.attended.clone());
        }
    }

    fn logits(&mut self, (a, b): (usize, usize)) {
        let ck = self.ck;
        let d = ck.model.d_model as usize;
        let x = checkpoint_norm(ck, &self.x[a * d..b * d], &ck.final_norm);
        let head = ck.lm_head.as_deref().unwrap_or(&ck.embed);
        self.logits.extend(matmul(&x, head, None, d));
    }
}

/// `down(act(gate(h)) * up(h))`.
fn mlp(layer: &LayerWeights, h: &[f32], gate: Gate) -> Vec<f32> {
    let gated = swiglu(&linear(h, &layer.gate), &linear(h, &layer.up), gate);
    linear(&gated, &layer.down)
}

/// [`rms_norm`] with the checkpoint's epsilon and its family's weight offset.
fn checkpoint_norm(ck: &Checkpoint, x: &[f32], weight: &[f32]) -> Vec<f32> {
    rms_norm(x, weight, ck.rms_norm_eps, ck.style.norm_offset)
}

fn linear(x: &[f32], l: &Linear) -> Vec<f32> {
    matmul(x, &l.weight, l.bias.as_deref(), l.inputs)
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
