//! Generation's source of logits, chosen here once rather than in the panel that shows it: on the
//! GPU one token a pass against a KV cache prefilled with the prompt ([`GpuDecoder`]: f32 in pages
//! of one pool, or packed in a quantised scheme's bits, fp8's scales set from the prompt, KIVI's
//! tokens quantised as they leave its recent window), or, without WebGPU, a whole CPU pass over the
//! sequence for each token (no cache to keep, so the K/V scheme is applied by rounding every token's
//! K and V in that pass, each row reading them as the cache held them when it was decoded: fp8's
//! scales set by the prompt's tokens alone, KIVI's older tokens rounded and its recent ones not, as
//! the packed cache's are).

use std::rc::Rc;

use crate::engine::Engine;
use crate::lm::forward::CpuPass;
use crate::model::kv_quant::KvScheme;
use crate::model::paging::PoolUse;

use super::model_pass::run_steps;
use super::{GpuDecoder, LoadedLm};

/// Where the next token's logits come from.
pub enum Generator {
    Gpu(GpuDecoder),
    /// Whole CPU passes on this engine; the prompt's length is where decoding began (it sets fp8's
    /// scales, and the tokens KIVI's prefill quantised).
    Cpu {
        engine: Rc<Engine>,
        prompt: usize,
    },
}

impl Generator {
    /// The generator for `ids` with K and V stored as `scheme`, and the logits after `ids`.
    pub async fn start(
        lm: &LoadedLm,
        engine: Rc<Engine>,
        ids: &[u32],
        scheme: KvScheme,
    ) -> Result<(Generator, Vec<f32>), String> {
        if let Some(decoder) = lm.gpu_decoder(engine.clone(), ids, scheme).await {
            let (decoder, logits) = decoder?;
            return Ok((Generator::Gpu(decoder), logits));
        }
        let logits = cpu_logits(lm, &engine, ids, scheme, ids.len()).await?;
        Ok((Generator::Cpu { engine, prompt: ids.len() }, logits))
    }

    /// The logits after `seq`, whose last token is the one just appended.
    pub async fn next(&mut self, lm: &LoadedLm, seq: &[u32], scheme: KvScheme) -> Result<Vec<f32>, String> {
        match self {
            Generator::Gpu(decoder) => decoder.next(*seq.last().ok_or("no tokens")?).await,
            Generator::Cpu { engine, prompt } => cpu_logits(lm, engine, seq, scheme, *prompt).await,
        }
    }

    /// Whether the logits come from the GPU's cached decoding.
    pub fn on_gpu(&self) -> bool {
        matches!(self, Generator::Gpu(_))
    }

    /// The GPU's f32 cache's pool of pages as it is now (`None` for a packed cache and CPU passes).
    pub fn pool_use(&self) -> Option<PoolUse> {
        match self {
            Generator::Gpu(decoder) => decoder.pool_use(),
            Generator::Cpu { .. } => None,
        }
    }

    /// Bytes a token takes in the GPU's cache where it is packed in the scheme's bits; `None` for the
    /// f32 cache and for CPU passes (which round each token and keep f32).
    pub fn packed_bytes_per_token(&self) -> Option<u64> {
        match self {
            Generator::Gpu(decoder) => decoder.packed_bytes_per_token(),
            Generator::Cpu { .. } => None,
        }
    }
}

/// The CPU pass's logits after `ids`: every token's K and V rounded to `scheme` as a decode cache
/// prefilled with the first `prompt` tokens holds them (`CpuPass::with_kv_scheme_decoded`).
async fn cpu_logits(
    lm: &LoadedLm,
    engine: &Rc<Engine>,
    ids: &[u32],
    scheme: KvScheme,
    prompt: usize,
) -> Result<Vec<f32>, String> {
    if scheme == KvScheme::Fp32 {
        return Ok(lm.pass(engine, ids, &|| true).await?.0.last_logits.clone());
    }
    let pass = CpuPass::new(lm.cpu_weights()?, ids, 1).map_err(|e| e.0)?;
    let mut pass = pass.with_kv_scheme_decoded(scheme, prompt);
    run_steps(&mut pass, &|| true).await?;
    Ok(pass.finish().logits)
}
