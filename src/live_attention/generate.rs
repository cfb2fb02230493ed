//! Generation's source of logits, chosen here once rather than in the panel that shows it: on the
//! GPU one token a pass against a KV cache prefilled with the prompt ([`GpuDecoder`]: f32 in pages
//! of one pool, or packed in a quantised scheme's bits), or, without
//! WebGPU, a whole CPU pass over the sequence for each token (no cache to keep, so the K/V scheme is
//! applied by rounding every token's K and V in that pass).

use std::rc::Rc;

use crate::engine::Engine;
use crate::model::kv_quant::KvScheme;
use crate::model::paging::PoolUse;

use super::{GpuDecoder, LoadedLm};

/// Where the next token's logits come from.
pub enum Generator {
    Gpu(GpuDecoder),
    Cpu(Rc<Engine>),
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
        let logits = cpu_logits(lm, &engine, ids, scheme).await?;
        Ok((Generator::Cpu(engine), logits))
    }

    /// The logits after `seq`, whose last token is the one just appended.
    pub async fn next(&mut self, lm: &LoadedLm, seq: &[u32], scheme: KvScheme) -> Result<Vec<f32>, String> {
        match self {
            Generator::Gpu(decoder) => decoder.next(*seq.last().ok_or("no tokens")?).await,
            Generator::Cpu(engine) => cpu_logits(lm, engine, seq, scheme).await,
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
            Generator::Cpu(_) => None,
        }
    }

    /// Bytes a token takes in the GPU's cache where it is packed in the scheme's bits; `None` for the
    /// f32 cache and for CPU passes (which round each token and keep f32).
    pub fn packed_bytes_per_token(&self) -> Option<u64> {
        match self {
            Generator::Gpu(decoder) => decoder.packed_bytes_per_token(),
            Generator::Cpu(_) => None,
        }
    }
}

/// The CPU pass's logits after `ids`: every token's K and V rounded to `scheme` (what rounding each
/// as it joins a cache gives, for the schemes Generate offers).
async fn cpu_logits(lm: &LoadedLm, engine: &Rc<Engine>, ids: &[u32], scheme: KvScheme) -> Result<Vec<f32>, String> {
    if scheme == KvScheme::Fp32 {
        return Ok(lm.pass(engine, ids, &|| true).await?.0.last_logits.clone());
    }
    let out = lm.pass_with_kv_scheme(engine, ids, scheme, &|| true).await?;
    let vocab = out.logits.len() / ids.len().max(1);
    Ok(out.logits[out.logits.len() - vocab..].to_vec())
}
