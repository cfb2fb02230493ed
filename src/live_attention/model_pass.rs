//! A loaded model's whole forward pass over some tokens, its KV cache read as a [`KvScheme`] in
//! every layer: every position's logits and every layer's probabilities, on the GPU or, without
//! WebGPU, on the CPU in steps that let the browser in. The memory view measures each scheme with it.

use std::rc::Rc;

use super::LoadedLm;
use crate::engine::Engine;
use crate::event_loop::{breathe, resumed};
use crate::gpu::lm_forward::{self, LmRequest};
use crate::lm::forward::CpuPass;
use crate::model::kv_quant::KvScheme;

/// One whole pass, as the memory techniques compare them.
pub struct ModelPass {
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
    ) -> Result<ModelPass, String> {
        match engine.gpu() {
            Some((ctx, kernels)) => {
                let weights = self.gpu_weights(engine)?;
                let request =
                    LmRequest { last_logits: None, probabilities: true, hidden_states: false, head_outputs: true };
                let out = lm_forward::run_with_kv_scheme(ctx, kernels, &weights, ids, request, scheme).await;
                resumed();
                let out = out.map_err(|e| e.to_string())?;
                Ok(ModelPass { logits: out.logits, probs: out.probs, attended: out.attended, on_gpu: true })
            }
            None => {
                let mut pass =
                    CpuPass::new(self.cpu_weights()?, ids, ids.len()).map_err(|e| e.0)?.with_kv_scheme(scheme);
                while pass.step() {
                    breathe().await;
                    if !keep_going() {
                        return Err("stopped for a newer request".into());
                    }
                }
                let out = pass.finish();
                Ok(ModelPass { logits: out.logits, probs: out.probs, attended: out.attended, on_gpu: false })
            }
        }
    }
}
