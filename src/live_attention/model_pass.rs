//! A loaded model's whole forward pass over some tokens with a memory technique applied to its KV
//! cache in every layer: rounded to a [`KvScheme`] (on the GPU or, without WebGPU, on the CPU), or
//! evicted down to a number of kept tokens by an [`EvictPolicy`] while decoding the tokens one at a
//! time (on the GPU, whose attention reads each query's kept entries only, or on the CPU). Every
//! position's logits, every layer's probabilities and head outputs come back; CPU passes run in
//! steps that let the browser in and stop for a newer request. The memory view compares them.

use std::rc::Rc;

use super::LoadedLm;
use super::kv_groups::STOPPED;
use crate::engine::{Engine, Job};
use crate::event_loop::{breathe, resumed};
use crate::gpu::GpuContext;
use crate::gpu::kernels::Kernels;
use crate::gpu::lm_forward::{self, LmRequest};
use crate::lm::forward::{CpuPass, EvictionRecord, ModelPass};
use crate::model::kv_evict::EvictPolicy;
use crate::model::kv_quant::KvScheme;
use crate::model::mask::Mask;

/// One whole pass, as the memory techniques compare them.
#[derive(Clone)]
pub struct ComparedPass {
    /// `[tokens, vocab]`: the next-token logits after every position.
    pub logits: Vec<f32>,
    /// Per layer, `[h_q, tokens, tokens]`.
    pub probs: Vec<Vec<f32>>,
    /// Per layer, `[tokens, h_q * d]`: every head's output before the output projection.
    pub attended: Vec<Vec<f32>>,
    pub on_gpu: bool,
}

impl LoadedLm {
    /// The pass over `ids` with the cache rounded to `scheme`. A CPU pass stops between steps once
    /// `keep_going` says no (a newer request), with an error.
    pub async fn pass_with_kv_scheme(
        &self,
        engine: &Rc<Engine>,
        ids: &[u32],
        scheme: KvScheme,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<ComparedPass, String> {
        let pass = TechniquePass { lm: self, engine, ids, technique: Technique::Rounded(scheme), keep_going };
        Ok(engine.run(&pass).await?.0)
    }

    /// The pass over `ids` decoded one token at a time, each layer's cache evicted down to `keep`
    /// tokens by `policy`, with the record of what each query read and what was dropped: on the GPU
    /// (`kept_attention` reading each query's kept entries only) or, without WebGPU, on the CPU.
    pub async fn pass_with_eviction(
        &self,
        engine: &Rc<Engine>,
        ids: &[u32],
        policy: EvictPolicy,
        keep: usize,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<(ComparedPass, EvictionRecord), String> {
        let pass = TechniquePass { lm: self, engine, ids, technique: Technique::Evicted(policy, keep), keep_going };
        let (out, record) = engine.run(&pass).await?;
        Ok((out, record.ok_or("the pass kept no record of its cache")?))
    }

    /// Each layer's mask, as its weights say (`None` where the weights live only on the GPU).
    pub fn layer_masks(&self) -> Option<Vec<Mask>> {
        Some(self.host()?.layers.iter().map(|l| l.mask).collect())
    }
}

/// What a [`TechniquePass`] does to the cache.
#[derive(Clone, Copy)]
enum Technique {
    /// Every K and V rounded to the scheme's values.
    Rounded(KvScheme),
    /// Decoded one token at a time, each layer's cache evicted down to this many tokens.
    Evicted(EvictPolicy, usize),
}

/// The pass with a technique on its cache, as a job of the engine: `gpu::lm_forward` on the GPU
/// (reading the rounded K/V, or each query's kept entries with a read-back of each layer's Q and K
/// between layers), the CPU pass without one. An evicting pass also gives its record.
struct TechniquePass<'a> {
    lm: &'a LoadedLm,
    engine: &'a Rc<Engine>,
    ids: &'a [u32],
    technique: Technique,
    keep_going: &'a dyn Fn() -> bool,
}

impl Job for TechniquePass<'_> {
    type Output = (ComparedPass, Option<EvictionRecord>);

    fn fits_gpu(&self) -> bool {
        true
    }

    async fn on_gpu(&self, ctx: &GpuContext, kernels: &Kernels) -> Result<Self::Output, String> {
        let weights = self.lm.gpu_weights(self.engine)?;
        let request = LmRequest { last_logits: None, probabilities: true, hidden_states: false, head_outputs: true };
        let out = match self.technique {
            Technique::Rounded(scheme) => {
                lm_forward::run_with_kv_scheme(ctx, kernels, &weights, self.ids, request, scheme)
                    .await
                    .map(|o| (o, None))
            }
            Technique::Evicted(policy, keep) => {
                lm_forward::run_with_eviction(ctx, kernels, &weights, self.ids, request, policy, keep)
                    .await
                    .map(|(o, record)| (o, Some(record)))
            }
        };
        resumed();
        let (out, record) = out.map_err(|e| e.to_string())?;
        Ok((ComparedPass { logits: out.logits, probs: out.probs, attended: out.attended, on_gpu: true }, record))
    }

    async fn on_cpu(&self, _: bool) -> Result<Self::Output, String> {
        let pass = CpuPass::new(self.lm.cpu_weights()?, self.ids, self.ids.len()).map_err(|e| e.0)?;
        let pass = match self.technique {
            Technique::Rounded(scheme) => pass.with_kv_scheme(scheme),
            Technique::Evicted(policy, keep) => pass.with_eviction(policy, keep),
        };
        run_on_cpu(pass, self.keep_going).await
    }
}

/// Runs a CPU pass's steps, letting the browser in between; stops once `keep_going` says no.
async fn run_on_cpu(
    mut pass: CpuPass<'_>,
    keep_going: &dyn Fn() -> bool,
) -> Result<(ComparedPass, Option<EvictionRecord>), String> {
    run_steps(&mut pass, keep_going).await?;
    let record = pass.take_eviction();
    let ModelPass { logits, probs, attended, .. } = pass.finish();
    Ok((ComparedPass { logits, probs, attended, on_gpu: false }, record))
}

/// Every step of `pass`, the browser let in between; an error once `keep_going` says no.
pub(super) async fn run_steps(pass: &mut CpuPass<'_>, keep_going: &dyn Fn() -> bool) -> Result<(), String> {
    while pass.step() {
        breathe().await;
        if !keep_going() {
            return Err(STOPPED.into());
        }
    }
    Ok(())
}
