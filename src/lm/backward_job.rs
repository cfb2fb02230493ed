//! [`GradientJob`]: the backward pass of `backward.rs` cut into steps (a layer's forward, a few rows
//! of the loss, a layer's backward), so the page can run it between frames and drop it to cancel.

use super::{
    AttentionAsk, Checkpoint, LayerGradients, LinearGrads, LossTarget, Projected, Tape, attention_grads_of, check,
    heads_first, loss_row, weight_grads,
};
use crate::cpu::flash_backward::Gradients;
use crate::lm::LmError;
use crate::lm::checkpoint::Linear;

/// Counted tokens per loss step: each reads the whole output projection (4 x 4,096 x 192 multiply-
/// adds twice for the shipped model).
const PAIRS_PER_STEP: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// A layer below the chosen one, forward only.
    Below(usize),
    /// The chosen layer or one above it, forward, keeping its tape.
    Above(usize),
    /// Counted tokens `[a, b)` of the loss.
    Loss(usize, usize),
    /// A layer above the chosen one, backward.
    Back(usize),
    /// The chosen layer's backward down to its attention's output ([`GradientJob::attention_ask`]).
    ToAttention,
    /// The rest of the chosen layer's backward, and its weights' gradients.
    Chosen,
}

/// The chosen layer's backward, stopped at its attention: the gradient of the residual stream after
/// it, what the attention's backward reads, and its gradients once another tier gave them.
struct AtAttention {
    tape: Tape,
    dx2: Vec<f64>,
    ask: AttentionAsk,
    given: Option<Gradients>,
}

/// The gradients of [`super::layer_gradients`], a step at a time ([`GradientJob::step`]).
pub struct GradientJob<'a> {
    ck: &'a Checkpoint,
    tokens: usize,
    layer: usize,
    work: Vec<Step>,
    next: usize,
    x: Vec<f64>,
    tapes: Vec<Tape>,
    pairs: Vec<(usize, u32)>,
    loss: f64,
    dx: Vec<f64>,
    at_attention: Option<AtAttention>,
    result: Option<LayerGradients>,
}

impl<'a> GradientJob<'a> {
    /// A job whose layers below `layer` run in the f64 forward pass, after checking every setting.
    pub fn new(ck: &'a Checkpoint, ids: &[u32], target: LossTarget, layer: usize) -> Result<Self, LmError> {
        check(ck, ids, target, layer)?;
        let d = ck.model.d_model as usize;
        let x = crate::lm::forward::embed_gather(&ck.embed, ids, d, ck.style.embed_scale);
        Ok(Self::start(ck, ids, target, layer, 0, x.into_iter().map(f64::from).collect()))
    }

    /// A job from `input`, the stream entering `layer` as another pass computed it
    /// ([`super::layer_gradients_from`]).
    pub fn from_input(
        ck: &'a Checkpoint,
        ids: &[u32],
        target: LossTarget,
        layer: usize,
        input: &[f32],
    ) -> Result<Self, LmError> {
        check(ck, ids, target, layer)?;
        let want = ids.len() * ck.model.d_model as usize;
        if input.len() != want || input.iter().any(|v| !v.is_finite()) {
            return Err(LmError(format!("layer {layer}'s input needs {want} finite values, not {}", input.len())));
        }
        Ok(Self::start(ck, ids, target, layer, layer, input.iter().map(|&v| f64::from(v)).collect()))
    }

    fn start(ck: &'a Checkpoint, ids: &[u32], target: LossTarget, layer: usize, from: usize, x: Vec<f64>) -> Self {
        let layers = ck.layers.len();
        let pairs = super::counted(ids, target);
        let mut work: Vec<Step> = (from..layer).map(Step::Below).collect();
        work.extend((layer..layers).map(Step::Above));
        work.extend(
            (0..pairs.len()).step_by(PAIRS_PER_STEP).map(|a| Step::Loss(a, (a + PAIRS_PER_STEP).min(pairs.len()))),
        );
        work.extend((layer + 1..layers).rev().map(Step::Back));
        work.extend([Step::ToAttention, Step::Chosen]);
        let dx = vec![0.0; x.len()];
        let tapes = Vec::with_capacity(layers - layer);
        let (at_attention, result) = (None, None);
        Self { ck, tokens: ids.len(), layer, work, next: 0, x, tapes, pairs, loss: 0.0, dx, at_attention, result }
    }

    /// Steps in all (for a progress bar).
    pub fn steps(&self) -> usize {
        self.work.len()
    }

    /// Runs the next step; false once every step has run.
    pub fn step(&mut self) -> bool {
        let Some(&step) = self.work.get(self.next) else { return false };
        self.next += 1;
        let (ck, t) = (self.ck, self.tokens);
        match step {
            Step::Below(l) | Step::Above(l) => {
                let x = std::mem::take(&mut self.x);
                let projected = Projected::of(ck, l, &x, t);
                let tape = Tape::attend_and_mix(ck, l, x, projected, t);
                self.x = tape.output.clone();
                if matches!(step, Step::Above(_)) {
                    self.tapes.push(tape);
                }
            }
            Step::Loss(a, b) => {
                let weight = 1.0 / self.pairs.len() as f64;
                for &pair in &self.pairs[a..b] {
                    self.loss += loss_row(ck, &self.x, pair, weight, &mut self.dx);
                }
            }
            Step::Back(l) => {
                let tape = self.tapes.pop().expect("one tape per layer above");
                self.dx = tape.backward(ck, l, std::mem::take(&mut self.dx)).input;
            }
            Step::ToAttention => {
                let tape = self.tapes.pop().expect("the chosen layer's tape");
                let (dx2, d_attended) = tape.backward_to_attention(ck, self.layer, std::mem::take(&mut self.dx));
                let ask = tape.attention_ask(ck, &ck.layers[self.layer], &d_attended);
                self.at_attention = Some(AtAttention { tape, dx2, ask, given: None });
            }
            Step::Chosen => self.result = Some(self.chosen()),
        }
        true
    }

    /// Once the job has reached the chosen layer's attention (and until it goes on), what its backward
    /// reads: another tier may compute it and hand the gradients back ([`Self::give_attention`]); if
    /// none does, the next step computes them on the CPU (`cpu::flash_backward`).
    pub fn attention_ask(&self) -> Option<&AttentionAsk> {
        self.at_attention.as_ref().filter(|a| a.given.is_none()).map(|a| &a.ask)
    }

    /// The chosen layer's attention gradients, `[h_q, tokens, d]` each as [`Self::attention_ask`]'s
    /// problem has them (dK and dV of each query head's own copy of its K/V head); refused unless the
    /// job is waiting for them and the sizes match.
    pub fn give_attention(&mut self, grads: Gradients) -> Result<(), LmError> {
        let Some(at) = self.at_attention.as_mut().filter(|a| a.given.is_none()) else {
            return Err(LmError("the backward pass is not waiting for attention's gradients".into()));
        };
        let len = at.ask.shape.q_len();
        if [&grads.dq, &grads.dk, &grads.dv].iter().any(|g| g.len() != len || g.iter().any(|v| !v.is_finite())) {
            return Err(LmError(format!("attention's gradients need {len} finite values each")));
        }
        at.given = Some(grads);
        Ok(())
    }

    /// The gradients, once every step has run.
    pub fn finish(self) -> Option<LayerGradients> {
        self.result
    }

    fn chosen(&mut self) -> LayerGradients {
        let (ck, t, layer) = (self.ck, self.tokens, self.layer);
        let AtAttention { tape, dx2, ask, given } =
            self.at_attention.take().expect("the chosen layer's attention step");
        let grads = match given {
            Some(g) => attention_grads_of(ck, t, &g),
            None => tape.attention_grads_from(ck, &ask),
        };
        let back = tape.backward_from_attention(ck, layer, dx2, grads);
        let (q_width, kv_width) = ck.widths();
        let hd = ck.head_dim();
        let weights = &ck.layers[layer];
        let grads = |lin: &Linear, dy: &[f64]| {
            let (weight, bias) = weight_grads(&tape.h1, dy, lin.inputs, lin.outputs);
            LinearGrads { weight, bias: lin.bias.as_ref().map(|_| bias) }
        };
        LayerGradients {
            layer,
            tokens: t,
            loss: self.loss,
            dq: heads_first(&back.dq, t, q_width / hd, hd),
            dk: heads_first(&back.dk, t, kv_width / hd, hd),
            dv: heads_first(&back.dv, t, kv_width / hd, hd),
            key_norms: back.key_norms,
            w_q: grads(&weights.q, &back.dq_proj),
            w_k: grads(&weights.k, &back.dk_proj),
            w_v: grads(&weights.v, &back.dv),
        }
    }
}
