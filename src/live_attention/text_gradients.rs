//! Gradients on a real model (the trained model, or a dropped checkpoint kept in memory): the loss of the
//! text (or of one next token), its gradient down to one layer's per-head keys and values and its
//! W_Q, W_K, W_V, and what a step of size eta on those weights does. The forward pass runs where the
//! engine runs (the GPU, or the CPU tier); the backward runs on the CPU in f64 from the chosen
//! layer's input as that pass computed it (`lm::backward`'s [`GradientJob`], a step at a time with
//! the page let in between), except the chosen layer's attention, whose backward is the GPU's
//! FlashAttention-2 kernel where there is one (its twin on the CPU tier); then the pass runs again
//! with the stepped weights on the same tier, and the loss, the counted tokens' probabilities and one
//! head's attention row are read before and after. (The kernel checked against its twin on a layer's
//! heads is `gradients.rs`.)

use std::rc::Rc;

use super::LoadedLm;
use super::kv_groups::STOPPED;
use super::model_pass::run_steps;
use crate::attention::AttentionProblem;
use crate::cpu::flash_backward::Gradients;
use crate::engine::{AttentionGradients, Engine, Job};
use crate::event_loop::{breathe, resumed};
use crate::gpu::GpuContext;
use crate::gpu::kernels::Kernels;
use crate::gpu::lm_forward::{self, LmRequest, LmWeights};
use crate::lm::backward::{self, AttentionAsk, GradientJob, KeyNorms, LayerGradients, LossTarget, counted};
use crate::lm::checkpoint::Checkpoint;
use crate::lm::forward::CpuPass;
use crate::lm::grad_step::{MAX_ETA, TargetReading, read_targets, stepped};

/// What the page asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradAsk {
    pub layer: usize,
    /// The query head whose attention row is shown before and after the step.
    pub head: usize,
    pub target: LossTarget,
    /// The step size: 0 takes no step.
    pub eta: f64,
}

/// The gradients and the step's effect.
#[derive(Clone, Debug, PartialEq)]
pub struct TextGradients {
    pub ask: GradAsk,
    pub tokens: usize,
    /// Whether the forward passes ran on the GPU.
    pub on_gpu: bool,
    /// Whether the chosen layer's attention backward ran on the GPU (the rest of the backward runs on
    /// the CPU in f64).
    pub attention_on_gpu: bool,
    /// Per query head of the layer, per key position: the norms of that head's dK and dV there.
    pub key_norms: Vec<Vec<KeyNorms>>,
    /// The f64 backward's own loss: the pass's loss to f32's rounding.
    pub backward_loss: f64,
    /// ‖dW‖ over the layer's W_Q, W_K, W_V and their biases together.
    pub grad_norm: f64,
    /// The loss and the counted tokens' probabilities, by the forward pass before the step.
    pub before: TargetReading,
    /// The same after the step (none when eta is 0).
    pub after: Option<TargetReading>,
    /// The head's attention row shown: the query `row`, keys `first_key..=row` as the layer's mask
    /// lets it see (a sliding window starts later).
    pub row: usize,
    pub first_key: usize,
    pub row_before: Vec<f32>,
    pub row_after: Option<Vec<f32>>,
}

/// Why a model whose weights live on the GPU alone has no gradients here (the page says which
/// dropped checkpoints it keeps in memory before it gets here: `views::backward::host_copy`).
pub const STREAMED: &str = "This checkpoint's weights were streamed to the GPU without a copy in the page's memory, \
                            and the backward pass runs on the CPU from weights in memory.";

/// The query row whose attention is shown: the target's position, or for the text's loss the last
/// position it counts (the last token predicts nothing in the text).
pub fn query_row(target: LossTarget, tokens: usize) -> usize {
    match target {
        LossTarget::Text => tokens.saturating_sub(2),
        LossTarget::Token { position, .. } => position,
    }
}

/// `lm`'s gradients over `ids` as `ask` says, on `engine`; stops with an error once `keep_going` says
/// no (a newer request) at the next step.
pub async fn text_gradients(
    engine: &Rc<Engine>,
    lm: &LoadedLm,
    ids: &[u32],
    ask: GradAsk,
    keep_going: &dyn Fn() -> bool,
) -> Result<TextGradients, String> {
    let ck = lm.host().ok_or(STREAMED)?;
    check(ck, lm.max_tokens, ids, ask)?;
    let hidden = ask.layer > 0;
    let before = engine.run(&GradPass { ck, loaded: Some((lm, engine)), ids, hidden, keep_going }).await?;
    let job = match &before.hidden {
        Some(h) if hidden => GradientJob::from_input(ck, ids, ask.target, ask.layer, &h[ask.layer - 1]),
        _ => GradientJob::new(ck, ids, ask.target, ask.layer),
    };
    let (grads, attention_on_gpu) = run_backward(engine, job.map_err(|e| e.0)?, keep_going).await?;
    let pairs = counted(ids, ask.target);
    let (t, vocab) = (ids.len(), ck.vocab());
    let row = query_row(ask.target, t);
    let (first_key, end) = ck.layers[ask.layer].mask.key_range(row as u32, t as u32);
    let keys = first_key as usize..end as usize;
    let row_of = |probs: &[Vec<f32>]| -> Result<Vec<f32>, String> {
        let at = (ask.head * t + row) * t;
        let values =
            probs.get(ask.layer).and_then(|p| p.get(at..at + t)).ok_or("the pass returned no probabilities")?;
        Ok(values[keys.clone()].to_vec())
    };
    let mut out = TextGradients {
        ask,
        tokens: t,
        on_gpu: before.on_gpu,
        attention_on_gpu,
        key_norms: grads.key_norms.clone(),
        backward_loss: grads.loss,
        grad_norm: weight_grad_norm(&grads),
        before: read_targets(&before.logits, vocab, t, &pairs).map_err(|e| e.0)?,
        after: None,
        row,
        first_key: keys.start,
        row_before: row_of(&before.probs)?,
        row_after: None,
    };
    drop(before);
    if ask.eta > 0.0 {
        let new = stepped(ck, &grads, ask.eta).map_err(|e| e.0)?;
        let after = engine.run(&GradPass { ck: &new, loaded: None, ids, hidden: false, keep_going }).await?;
        out.after = Some(read_targets(&after.logits, vocab, t, &pairs).map_err(|e| e.0)?);
        out.row_after = Some(row_of(&after.probs)?);
    }
    Ok(out)
}

/// Refuses what the job cannot run before anything is allocated: the text's length, the layer and
/// target and the backward's tape (`backward::check`), the head and the step size.
fn check(ck: &Checkpoint, max_tokens: usize, ids: &[u32], ask: GradAsk) -> Result<(), String> {
    if ids.len() > max_tokens {
        return Err(format!("The text is {} tokens; this model reads at most {max_tokens}.", ids.len()));
    }
    backward::check(ck, ids, ask.target, ask.layer).map_err(|e| e.0)?;
    let heads = ck.model.n_q_heads as usize;
    if ask.head >= heads {
        return Err(format!("head {} is past the layer's {heads} query heads", ask.head));
    }
    if !(0.0..=MAX_ETA).contains(&ask.eta) {
        return Err(format!("the step size must be between 0 and {MAX_ETA}, not {}", ask.eta));
    }
    Ok(())
}

/// Runs `job` a step at a time; the chosen layer's attention backward is a job of the engine (the
/// GPU's FlashAttention-2 backward where there is one). Says whether that ran on the GPU.
async fn run_backward(
    engine: &Engine,
    mut job: GradientJob<'_>,
    keep_going: &dyn Fn() -> bool,
) -> Result<(LayerGradients, bool), String> {
    let mut attention_on_gpu = false;
    while job.step() {
        // A GPU step that fails (a size past the job limit, a lost device, a value not finite) leaves
        // the ask unanswered, and the job's next step computes the same with the CPU twin.
        if let Some(ask) = job.attention_ask()
            && let Ok(Some(grads)) = engine.run(&ChosenAttention { ask }).await
            && job.give_attention(grads).is_ok()
        {
            attention_on_gpu = true;
        }
        breathe().await;
        if !keep_going() {
            return Err(STOPPED.into());
        }
    }
    let grads = job.finish().ok_or("the backward pass stopped before its end")?;
    Ok((grads, attention_on_gpu))
}

/// The chosen layer's attention backward ([`GradientJob::attention_ask`]) on the GPU: the engine's own
/// [`AttentionGradients`] job (the forward kernel's log-sum-exp, then `flash_backward`, every query
/// head with its own copy of its K/V head; a size past the job limit is refused there). On the CPU
/// tier it answers `None`: the job's own next step runs the twin (`cpu::flash_backward`, from its
/// f64 forward's outputs).
struct ChosenAttention<'a> {
    ask: &'a AttentionAsk,
}

impl ChosenAttention<'_> {
    fn problem(&self) -> AttentionProblem<'_> {
        let a = self.ask;
        AttentionProblem::new(&a.q, &a.k, &a.v, a.shape, a.mask, a.scale)
    }
}

impl Job for ChosenAttention<'_> {
    type Output = Option<Gradients>;

    fn fits_gpu(&self) -> bool {
        AttentionGradients { problem: &self.problem(), d_o: &self.ask.d_o }.fits_gpu()
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Option<Gradients>, String> {
        let out = AttentionGradients { problem: &self.problem(), d_o: &self.ask.d_o }.on_gpu(ctx, kernels).await;
        resumed();
        Ok(Some(out?.grads))
    }

    async fn on_cpu(&self, _: bool) -> Result<Option<Gradients>, String> {
        Ok(None)
    }
}

/// ‖dW‖₂ over W_Q, W_K, W_V and their biases.
pub fn weight_grad_norm(g: &LayerGradients) -> f64 {
    [&g.w_q, &g.w_k, &g.w_v]
        .iter()
        .flat_map(|l| l.weight.iter().chain(l.bias.iter().flatten()))
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt()
}

/// One pass's logits at every position, every layer's probabilities and, when asked, the hidden
/// states after every layer.
struct PassOut {
    logits: Vec<f32>,
    probs: Vec<Vec<f32>>,
    hidden: Option<Vec<Vec<f32>>>,
    on_gpu: bool,
}

/// A whole forward pass of `ck` as a job of the engine: `gpu::lm_forward` (with the loaded model's
/// weights already on the GPU, or `ck`'s uploaded for this pass: the stepped ones), or the CPU pass
/// in steps that let the page in.
struct GradPass<'a> {
    ck: &'a Checkpoint,
    loaded: Option<(&'a LoadedLm, &'a Rc<Engine>)>,
    ids: &'a [u32],
    hidden: bool,
    keep_going: &'a dyn Fn() -> bool,
}

impl Job for GradPass<'_> {
    type Output = PassOut;

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<PassOut, String> {
        let weights = match self.loaded {
            Some((lm, engine)) => lm.gpu_weights(engine)?,
            None => Rc::new(LmWeights::upload(ctx, self.ck).map_err(|e| e.to_string())?),
        };
        let request =
            LmRequest { last_logits: None, probabilities: true, hidden_states: self.hidden, head_outputs: false };
        let out = lm_forward::run(ctx, kernels, &weights, self.ids, request).await;
        resumed();
        let out = out.map_err(|e| e.to_string())?;
        let hidden = self.hidden.then_some(out.hidden);
        Ok(PassOut { logits: out.logits, probs: out.probs, hidden, on_gpu: true })
    }

    async fn on_cpu(&self, _: bool) -> Result<PassOut, String> {
        let mut pass = CpuPass::new(self.ck, self.ids, self.ids.len()).map_err(|e| e.0)?;
        run_steps(&mut pass, self.keep_going).await?;
        let out = pass.finish();
        Ok(PassOut { logits: out.logits, probs: out.probs, hidden: None, on_gpu: false })
    }
}
