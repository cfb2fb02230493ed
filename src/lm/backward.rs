//! The loss of a text and its gradient down to one layer's attention, on the CPU: a forward pass in
//! f64 that keeps what each layer from the chosen one up computed (its tape), then the backward pass
//! from the loss (mean next-token cross-entropy over the text, or one position's for a chosen next
//! token) through the output projection, the final norm and the layers above, to the chosen layer's
//! per-head Q, K and V (Q and K rotated, as the attention kernel reads them), and from there to the
//! gradients of its W_Q, W_K and W_V (`dW = dYᵀ X`, through QK-norm and the rotation where a family
//! has them). Attention's own backward is `cpu::flash_backward`, the twin of the GPU's kernel, one
//! query head at a time so that each head's share of a shared K/V head's gradient is seen.
//!
//! [`GradientJob`] runs it a step at a time (a layer, or four counted tokens of the loss) so the page
//! can yield between steps and cancel by dropping it. The layers below the chosen one may come from
//! another pass ([`layer_gradients_from`]: the GPU forward pass's hidden states); everything from the
//! chosen layer up is differentiated here, on the CPU.
//!
//! The same steps as `forward.rs` (pre-norm blocks, RMSNorm with Gemma's `1 + w`, rotary Q and K,
//! grouped-query attention under each layer's mask, a gated MLP, Gemma 3's output norms) in f64
//! rather than f32 storage; `backward_tests.rs` checks every gradient against central differences.

use super::LmError;
use super::backward_ops::{Rotation, activation, linear, linear_input_grad, rms_norm, rms_norm_grad, weight_grads};
use super::checkpoint::{Checkpoint, LayerWeights};
use super::forward::{MAX_CPU_BYTES, max_tokens};
use crate::attention::rope::RopeTable;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::cpu::flash_backward::{BackwardInputs, Gradients, flash_backward};

#[path = "backward_job.rs"]
mod job;
pub use job::GradientJob;

/// Which loss is differentiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossTarget {
    /// The mean cross-entropy of every next token of the text (positions 0 to t - 2).
    Text,
    /// The cross-entropy of `token` as the next token after `position`.
    Token { position: usize, token: u32 },
}

/// The (position, next token) pairs the loss of `target` counts.
pub fn counted(ids: &[u32], target: LossTarget) -> Vec<(usize, u32)> {
    match target {
        LossTarget::Text => (1..ids.len()).map(|i| (i - 1, ids[i])).collect(),
        LossTarget::Token { position, token } => vec![(position, token)],
    }
}

/// The gradient of a linear layer's weight (`[outputs, inputs]`) and bias.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearGrads {
    pub weight: Vec<f64>,
    pub bias: Option<Vec<f64>>,
}

/// How much one key position's key and value move a query head's loss: the norms of that head's share
/// of dK and dV at the position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyNorms {
    pub key: f64,
    pub value: f64,
}

/// The loss and its gradient with respect to one layer's attention inputs and projections.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerGradients {
    pub layer: usize,
    pub tokens: usize,
    pub loss: f64,
    /// dQ `[h_q, tokens, d]` and dK, dV `[h_kv, tokens, d]` of the Q, K (both rotated) and V the
    /// attention kernel reads; a shared K/V head's gradient sums its query group's.
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
    /// Per query head, per key position: the norms of that head's share of dK and dV.
    pub key_norms: Vec<Vec<KeyNorms>>,
    pub w_q: LinearGrads,
    pub w_k: LinearGrads,
    pub w_v: LinearGrads,
}

/// The loss of `ids` under `target` and its gradients at `layer` (see the module's comment), the
/// layers below run by the f64 forward pass: [`GradientJob`] run to its end.
pub fn layer_gradients(
    ck: &Checkpoint,
    ids: &[u32],
    target: LossTarget,
    layer: usize,
) -> Result<LayerGradients, LmError> {
    run(GradientJob::new(ck, ids, target, layer)?)
}

/// [`layer_gradients`] from `input`, the residual stream entering `layer` (`[tokens, d_model]`) as
/// another pass computed it: the GPU's hidden states after `layer - 1` (or the scaled embeddings for
/// layer 0), so that the layers below run where that pass ran.
pub fn layer_gradients_from(
    ck: &Checkpoint,
    ids: &[u32],
    target: LossTarget,
    layer: usize,
    input: &[f32],
) -> Result<LayerGradients, LmError> {
    run(GradientJob::from_input(ck, ids, target, layer, input)?)
}

fn run(mut job: GradientJob) -> Result<LayerGradients, LmError> {
    while job.step() {}
    job.finish().ok_or_else(|| LmError("the backward pass stopped before its end".into()))
}

/// The residual stream entering `layer`, by the f64 forward pass of the embeddings and the layers below.
fn input_of(ck: &Checkpoint, ids: &[u32], layer: usize) -> Vec<f64> {
    let d = ck.model.d_model as usize;
    let mut x: Vec<f64> =
        super::forward::embed_gather(&ck.embed, ids, d, ck.style.embed_scale).into_iter().map(f64::from).collect();
    for l in 0..layer {
        let projected = Projected::of(ck, l, &x, ids.len());
        x = Tape::attend_and_mix(ck, l, x, projected, ids.len()).output;
    }
    x
}

/// The loss of `ids` under `target` by the f64 forward pass alone (the yardstick of the tests).
pub fn loss(ck: &Checkpoint, ids: &[u32], target: LossTarget) -> Result<f64, LmError> {
    check(ck, ids, target, ck.layers.len() - 1)?;
    let last = ck.layers.len() - 1;
    let (_, x) = tapes_from(ck, ids.len(), last, input_of(ck, ids, last), |_| {});
    Ok(loss_of(ck, &x, ids, target))
}

/// [`loss`] with the projections of `layer` changed by `nudge` (the tests' finite differences).
#[cfg(test)]
pub(crate) fn loss_nudged(
    ck: &Checkpoint,
    ids: &[u32],
    target: LossTarget,
    layer: usize,
    nudge: impl FnOnce(&mut Projected),
) -> f64 {
    let (_, x) = tapes_from(ck, ids.len(), layer, input_of(ck, ids, layer), nudge);
    loss_of(ck, &x, ids, target)
}

/// The f64 forward pass of `layer` and the layers above from `x` (the stream entering `layer`), with
/// `nudge` applied to `layer`'s projections; returns their tapes and the last layer's output.
fn tapes_from(
    ck: &Checkpoint,
    t: usize,
    layer: usize,
    mut x: Vec<f64>,
    nudge: impl FnOnce(&mut Projected),
) -> (Vec<Tape>, Vec<f64>) {
    let mut tapes = Vec::with_capacity(ck.layers.len() - layer);
    let mut nudge = Some(nudge);
    for l in layer..ck.layers.len() {
        let mut projected = Projected::of(ck, l, &x, t);
        if let Some(nudge) = nudge.take() {
            nudge(&mut projected);
        }
        let tape = Tape::attend_and_mix(ck, l, x, projected, t);
        x = tape.output.clone();
        tapes.push(tape);
    }
    (tapes, x)
}

/// Refuses a layer, a target or an input the pass does not take, and a tape past [`MAX_CPU_BYTES`],
/// before anything is allocated (a page checks before it runs the forward pass the job starts from).
pub fn check(ck: &Checkpoint, ids: &[u32], target: LossTarget, layer: usize) -> Result<(), LmError> {
    let (t, layers, vocab) = (ids.len(), ck.layers.len(), ck.vocab());
    let most = max_tokens(ck);
    if t == 0 || t > most {
        return Err(LmError(format!("Gradients of this model take 1 to {most} tokens, not {t}")));
    }
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(LmError(format!("token id {bad} is outside the vocabulary of {vocab}")));
    }
    if layer >= layers {
        return Err(LmError(format!("layer {layer} is past the model's {layers} layers")));
    }
    match target {
        LossTarget::Text if t < 2 => return Err(LmError("the loss of a text needs at least 2 tokens".into())),
        LossTarget::Token { position, .. } if position >= t => {
            return Err(LmError(format!("position {position} is past the text's {t} tokens")));
        }
        LossTarget::Token { token, .. } if token as usize >= vocab => {
            return Err(LmError(format!("target token {token} is outside the vocabulary of {vocab}")));
        }
        _ => {}
    }
    let bytes = tape_bytes(ck, t).and_then(|b| b.checked_mul((layers - layer) as u64));
    if bytes.is_none_or(|b| b > MAX_CPU_BYTES) {
        return Err(LmError(format!(
            "the backward pass from layer {layer} over {t} tokens would hold more than {} MiB",
            MAX_CPU_BYTES >> 20
        )));
    }
    Ok(())
}

/// Bytes of one layer's [`Tape`] over `t` tokens (None past u64).
pub fn tape_bytes(ck: &Checkpoint, t: usize) -> Option<u64> {
    let m = &ck.model;
    let (q_width, kv_width) = ck.widths();
    let per_token = m
        .d_model
        .checked_mul(7)?
        .checked_add(3 * q_width as u64 + 3 * kv_width as u64)?
        .checked_add(m.ffn_size.checked_mul(2)?)?
        .checked_add(u64::from(m.n_q_heads))?;
    per_token.checked_mul(t as u64)?.checked_mul(8)
}

/// The mean (or one position's) cross-entropy of the next tokens (the f64 forward's, for the tests).
fn loss_of(ck: &Checkpoint, x: &[f64], ids: &[u32], target: LossTarget) -> f64 {
    let pairs = counted(ids, target);
    let mut dx = vec![0.0; x.len()];
    pairs.iter().map(|&pair| loss_row(ck, x, pair, 1.0 / pairs.len() as f64, &mut dx)).sum()
}

/// `weight` times the cross-entropy of `next` after position `i`, with its gradient with respect to
/// the residual stream after the last layer (through the final norm and the output projection) added
/// to row `i` of `dx`.
fn loss_row(ck: &Checkpoint, x: &[f64], (i, next): (usize, u32), weight: f64, dx: &mut [f64]) -> f64 {
    let d = ck.model.d_model as usize;
    let head = ck.lm_head.as_deref().unwrap_or(&ck.embed);
    let (eps, offset) = (ck.rms_norm_eps, ck.style.norm_offset);
    let row = &x[i * d..][..d];
    let normed = rms_norm(row, &ck.final_norm, eps, offset);
    let logits: Vec<f64> =
        head.chunks_exact(d).map(|w| w.iter().zip(&normed).map(|(&w, x)| f64::from(w) * x).sum()).collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logits.iter().map(|l| (l - max).exp()).sum();
    let lse = max + sum.ln();
    // d loss / d logit = weight (softmax - one-hot).
    let mut d_normed = vec![0.0; d];
    for (v, (w, &l)) in head.chunks_exact(d).zip(&logits).enumerate() {
        let g = weight * ((l - lse).exp() - f64::from(u8::from(v == next as usize)));
        d_normed.iter_mut().zip(w).for_each(|(o, &w)| *o += g * f64::from(w));
    }
    let grad = rms_norm_grad(row, &ck.final_norm, eps, offset, &d_normed);
    dx[i * d..][..d].iter_mut().zip(grad).for_each(|(o, g)| *o += g);
    weight * (lse - logits[next as usize])
}

/// What one layer computed in the f64 forward pass, `[tokens, width]` each, kept for its backward.
struct Tape {
    x: Vec<f64>,
    h1: Vec<f64>,
    /// Q and K as projected (before QK-norm and rotation) and as the attention reads them.
    q_proj: Vec<f64>,
    k_proj: Vec<f64>,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    attended: Vec<f64>,
    /// `[h_q, tokens]` log-sum-exp of each head's scaled scores.
    lse: Vec<f64>,
    o: Vec<f64>,
    x2: Vec<f64>,
    gate: Vec<f64>,
    up: Vec<f64>,
    y: Vec<f64>,
    output: Vec<f64>,
}

/// Token-major dQ (rotated), dK (rotated) and dV of a layer's attention, and each query head's share of
/// dK and dV as norms per key position.
struct AttentionGrads {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    key_norms: Vec<Vec<KeyNorms>>,
}

/// The gradients a layer's backward returns.
struct Back {
    input: Vec<f64>,
    /// Token-major gradients of the rotated Q and K, of V, and of the Q and K projections.
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
    dq_proj: Vec<f64>,
    dk_proj: Vec<f64>,
    key_norms: Vec<Vec<KeyNorms>>,
}

/// A layer's input norm and projections: Q and K as projected and as the attention reads them
/// (after QK-norm and the rotation), and V.
pub(crate) struct Projected {
    h1: Vec<f64>,
    q_proj: Vec<f64>,
    k_proj: Vec<f64>,
    pub(crate) q: Vec<f64>,
    pub(crate) k: Vec<f64>,
    pub(crate) v: Vec<f64>,
}

impl Projected {
    fn of(ck: &Checkpoint, l: usize, x: &[f64], t: usize) -> Projected {
        let w = &ck.layers[l];
        let (eps, offset) = (ck.rms_norm_eps, ck.style.norm_offset);
        let hd = ck.head_dim();
        let (q_width, kv_width) = ck.widths();
        let rotation = Rotation::of(&RopeTable::scaled(0..t, hd, w.positional, ck.rope_scaling));
        let h1 = rms_norm(x, &w.input_norm, eps, offset);
        let (q_proj, k_proj, v) = (linear(&h1, &w.q), linear(&h1, &w.k), linear(&h1, &w.v));
        let rotated = |proj: &[f64], width: usize, norm: Option<&Vec<f32>>| {
            let mut heads = norm.map_or_else(|| proj.to_vec(), |n| rms_norm(proj, n, eps, offset));
            rotation.turn(&mut heads, width, hd, 1.0);
            heads
        };
        let q = rotated(&q_proj, q_width, w.qk_norm.as_ref().map(|n| &n.q));
        let k = rotated(&k_proj, kv_width, w.qk_norm.as_ref().map(|n| &n.k));
        Projected { h1, q_proj, k_proj, q, k, v }
    }
}

impl Tape {
    /// The rest of the layer after its projections: attention, W_O, the MLP and both residuals.
    fn attend_and_mix(ck: &Checkpoint, l: usize, x: Vec<f64>, p: Projected, t: usize) -> Tape {
        let w = &ck.layers[l];
        let (eps, offset) = (ck.rms_norm_eps, ck.style.norm_offset);
        let Projected { h1, q_proj, k_proj, q, k, v } = p;
        let (attended, lse) = attend(ck, w, (&q, &k, &v), t);
        let o = linear(&attended, &w.o);
        let out_norms = w.output_norms.as_ref();
        let mut x2 = x.clone();
        add(&mut x2, &out_norms.map_or_else(|| o.clone(), |n| rms_norm(&o, &n.attention, eps, offset)));
        let h2 = rms_norm(&x2, &w.mlp_norm, eps, offset);
        let (gate, up) = (linear(&h2, &w.gate), linear(&h2, &w.up));
        let gated: Vec<f64> = gate.iter().zip(&up).map(|(&g, &u)| activation(g, ck.style.gate).0 * u).collect();
        let y = linear(&gated, &w.down);
        let mut output = x2.clone();
        add(&mut output, &out_norms.map_or_else(|| y.clone(), |n| rms_norm(&y, &n.mlp, eps, offset)));
        Tape { x, h1, q_proj, k_proj, q, k, v, attended, lse, o, x2, gate, up, y, output }
    }

    /// The gradients of this layer's input and of its attention's inputs, given `d_out`'s.
    fn backward(&self, ck: &Checkpoint, l: usize, d_out: Vec<f64>) -> Back {
        let (dx2, d_attended) = self.backward_to_attention(ck, l, d_out);
        let grads = self.attention_grads(ck, &ck.layers[l], &d_attended);
        self.backward_from_attention(ck, l, dx2, grads)
    }

    /// The first half of [`Self::backward`]: through the MLP and W_O to the residual stream after
    /// attention (`dx2`) and the attended heads (`d_attended`, token-major).
    fn backward_to_attention(&self, ck: &Checkpoint, l: usize, d_out: Vec<f64>) -> (Vec<f64>, Vec<f64>) {
        let w = &ck.layers[l];
        let (eps, offset) = (ck.rms_norm_eps, ck.style.norm_offset);
        let out_norms = w.output_norms.as_ref();
        // The MLP: output = x2 + norm(down(act(gate) * up)).
        let dy = out_norms.map_or_else(|| d_out.clone(), |n| rms_norm_grad(&self.y, &n.mlp, eps, offset, &d_out));
        let d_gated = linear_input_grad(&dy, &w.down);
        let (mut d_gate, mut d_up) = (Vec::with_capacity(dy.len()), Vec::with_capacity(dy.len()));
        for ((&g, &u), &dm) in self.gate.iter().zip(&self.up).zip(&d_gated) {
            let (a, da) = activation(g, ck.style.gate);
            d_gate.push(dm * u * da);
            d_up.push(dm * a);
        }
        let mut dh2 = linear_input_grad(&d_gate, &w.gate);
        add(&mut dh2, &linear_input_grad(&d_up, &w.up));
        let mut dx2 = d_out;
        add(&mut dx2, &rms_norm_grad(&self.x2, &w.mlp_norm, eps, offset, &dh2));
        // Attention: x2 = x + norm(o), o = attended W_Oᵀ.
        let d_o = out_norms.map_or_else(|| dx2.clone(), |n| rms_norm_grad(&self.o, &n.attention, eps, offset, &dx2));
        (dx2, linear_input_grad(&d_o, &w.o))
    }

    /// The second half of [`Self::backward`]: from attention's gradients through the rotation, QK-norm
    /// and the projections to the layer's input.
    fn backward_from_attention(&self, ck: &Checkpoint, l: usize, dx2: Vec<f64>, grads: AttentionGrads) -> Back {
        let w = &ck.layers[l];
        let (eps, offset) = (ck.rms_norm_eps, ck.style.norm_offset);
        let AttentionGrads { dq, dk, dv, key_norms } = grads;
        let hd = ck.head_dim();
        let (q_width, kv_width) = ck.widths();
        let rotation = Rotation::of(&RopeTable::scaled(
            0..self.x.len() / ck.model.d_model as usize,
            hd,
            w.positional,
            ck.rope_scaling,
        ));
        let unrotated = |grad: &[f64], proj: &[f64], width: usize, norm: Option<&Vec<f32>>| {
            let mut g = grad.to_vec();
            rotation.turn(&mut g, width, hd, -1.0);
            norm.map_or(g.clone(), |n| rms_norm_grad(proj, n, eps, offset, &g))
        };
        let dq_proj = unrotated(&dq, &self.q_proj, q_width, w.qk_norm.as_ref().map(|n| &n.q));
        let dk_proj = unrotated(&dk, &self.k_proj, kv_width, w.qk_norm.as_ref().map(|n| &n.k));
        let mut dh1 = linear_input_grad(&dq_proj, &w.q);
        add(&mut dh1, &linear_input_grad(&dk_proj, &w.k));
        add(&mut dh1, &linear_input_grad(&dv, &w.v));
        let mut input = dx2;
        add(&mut input, &rms_norm_grad(&self.x, &w.input_norm, eps, offset, &dh1));
        Back { input, dq, dk, dv, dq_proj, dk_proj, key_norms }
    }

    /// dQ, dK and dV (token-major) from the gradient of the attended heads, by `flash_backward` one query
    /// head at a time, with each head's share of dK and dV reduced to norms per key position.
    fn attention_grads(&self, ck: &Checkpoint, w: &LayerWeights, d_attended: &[f64]) -> AttentionGrads {
        self.attention_grads_from(ck, &self.attention_ask(ck, w, d_attended))
    }

    /// [`Self::attention_grads`] of the problem `ask` states (with this tape's f64 forward's outputs and
    /// log-sum-exp).
    fn attention_grads_from(&self, ck: &Checkpoint, ask: &AttentionAsk) -> AttentionGrads {
        let (t, hd) = (ask.shape.n_q as usize, ask.shape.d as usize);
        let head = |x: &[f32], h: usize| x[h * t * hd..][..t * hd].to_vec();
        let attended = self.attended_heads(ck);
        let per_head: Vec<Gradients> = (0..ask.shape.h_q as usize)
            .map(|h| {
                let (q, k, v) = (head(&ask.q, h), head(&ask.k, h), head(&ask.v, h));
                let (o, d_o) = (head(&attended, h), head(&ask.d_o, h));
                let lse: Vec<f32> = self.lse[h * t..][..t].iter().map(|&v| v as f32).collect();
                let shape = AttentionShape::square(1, t as u32, hd as u32);
                let problem = AttentionProblem::new(&q, &k, &v, shape, ask.mask, ask.scale);
                flash_backward(&problem, &BackwardInputs { o: &o, lse: &lse, d_o: &d_o })
            })
            .collect();
        let joined = |f: fn(&Gradients) -> &Vec<f32>| per_head.iter().flat_map(|g| f(g).iter().copied()).collect();
        attention_grads_of(ck, t, &Gradients { dq: joined(|g| &g.dq), dk: joined(|g| &g.dk), dv: joined(|g| &g.dv) })
    }

    /// What the chosen layer's attention backward reads, one query head at a time (each with its own
    /// copy of its K/V head, so each head's share of a shared K/V head's gradient comes out apart).
    fn attention_ask(&self, ck: &Checkpoint, w: &LayerWeights, d_attended: &[f64]) -> AttentionAsk {
        let hd = ck.head_dim();
        let (q_width, kv_width) = ck.widths();
        let t = self.x.len() / ck.model.d_model as usize;
        let heads = q_width / hd;
        let group = heads / (kv_width / hd);
        let per_head = |x: &[f64], width: usize, kv: bool| -> Vec<f32> {
            (0..heads)
                .flat_map(|h| {
                    let at = if kv { h / group } else { h } * hd;
                    (0..t).flat_map(move |i| x[i * width + at..][..hd].iter().map(|&v| v as f32))
                })
                .collect()
        };
        AttentionAsk {
            q: per_head(&self.q, q_width, false),
            k: per_head(&self.k, kv_width, true),
            v: per_head(&self.v, kv_width, true),
            d_o: per_head(d_attended, q_width, false),
            shape: AttentionShape::square(heads as u32, t as u32, hd as u32),
            mask: w.mask,
            scale: ck.style.attn_scale,
        }
    }

    /// The attended heads, `[h_q, tokens, d]` in f32.
    fn attended_heads(&self, ck: &Checkpoint) -> Vec<f32> {
        let hd = ck.head_dim();
        let (q_width, _) = ck.widths();
        let t = self.x.len() / ck.model.d_model as usize;
        heads_first(&self.attended, t, q_width / hd, hd).into_iter().map(|v| v as f32).collect()
    }
}

/// The chosen layer's attention as one problem of `h_q` heads, each with its own K and V: every query
/// head's rotated Q, its K/V head's rotated K and V, and the gradient of its attended output, `[h_q,
/// tokens, d]` in f32; the layer's mask and scale. [`GradientJob::attention_ask`] hands it out, so that
/// the GPU's FlashAttention-2 backward can compute what `cpu::flash_backward` would.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionAsk {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub d_o: Vec<f32>,
    pub shape: AttentionShape,
    pub mask: crate::model::Mask,
    pub scale: f32,
}

/// Token-major dQ, dK, dV (each query head's share of dK and dV summed into its K/V head) and each
/// head's norms per key position, from per-head gradients `[h_q, tokens, d]`.
fn attention_grads_of(ck: &Checkpoint, t: usize, g: &Gradients) -> AttentionGrads {
    let hd = ck.head_dim();
    let (q_width, kv_width) = ck.widths();
    let heads = q_width / hd;
    let group = heads / (kv_width / hd);
    let (mut dq, mut dk, mut dv) = (vec![0.0; t * q_width], vec![0.0; t * kv_width], vec![0.0; t * kv_width]);
    let norm = |x: &[f32]| x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
    let mut key_norms = Vec::with_capacity(heads);
    for h in 0..heads {
        let (kv, rows) = (h / group, h * t * hd..(h + 1) * t * hd);
        let (hq, hk, hv) = (&g.dq[rows.clone()], &g.dk[rows.clone()], &g.dv[rows]);
        key_norms.push(
            hk.chunks_exact(hd)
                .zip(hv.chunks_exact(hd))
                .map(|(k, v)| KeyNorms { key: norm(k), value: norm(v) })
                .collect(),
        );
        for i in 0..t {
            let widen = |out: &mut [f64], x: &[f32]| out.iter_mut().zip(x).for_each(|(o, &x)| *o += f64::from(x));
            widen(&mut dq[i * q_width + h * hd..][..hd], &hq[i * hd..][..hd]);
            widen(&mut dk[i * kv_width + kv * hd..][..hd], &hk[i * hd..][..hd]);
            widen(&mut dv[i * kv_width + kv * hd..][..hd], &hv[i * hd..][..hd]);
        }
    }
    AttentionGrads { dq, dk, dv, key_norms }
}

/// Every query head's softmax attention (f64) under the layer's mask: the attended heads `[tokens,
/// q_width]` and each row's log-sum-exp `[h_q, tokens]`.
fn attend(ck: &Checkpoint, w: &LayerWeights, (q, k, v): (&[f64], &[f64], &[f64]), t: usize) -> (Vec<f64>, Vec<f64>) {
    let hd = ck.head_dim();
    let (q_width, kv_width) = ck.widths();
    let heads = q_width / hd;
    let group = heads / (kv_width / hd);
    let scale = f64::from(ck.style.attn_scale);
    let (mut attended, mut lse) = (vec![0.0; t * q_width], vec![0.0; heads * t]);
    for h in 0..heads {
        let kv = h / group;
        for i in 0..t {
            let (lo, hi) = w.mask.key_range(i as u32, t as u32);
            let qi = &q[i * q_width + h * hd..][..hd];
            let key = |j: usize| &k[j * kv_width + kv * hd..][..hd];
            let scores: Vec<f64> = (lo as usize..hi as usize)
                .map(|j| qi.iter().zip(key(j)).map(|(a, b)| a * b).sum::<f64>() * scale)
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            lse[h * t + i] = max + sum.ln();
            let out = &mut attended[i * q_width + h * hd..][..hd];
            for (j, s) in (lo as usize..hi as usize).zip(&scores) {
                let p = (s - max).exp() / sum;
                out.iter_mut().zip(&v[j * kv_width + kv * hd..][..hd]).for_each(|(o, &v)| *o += p * v);
            }
        }
    }
    (attended, lse)
}

/// `[tokens, heads * d]` to `[heads, tokens, d]`.
fn heads_first(x: &[f64], tokens: usize, heads: usize, d: usize) -> Vec<f64> {
    (0..heads).flat_map(|h| (0..tokens).flat_map(move |t| x[(t * heads + h) * d..][..d].iter().copied())).collect()
}

fn add(x: &mut [f64], y: &[f64]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}
