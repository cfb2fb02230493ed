//! [`super`]'s pass decoding through an evicting KV cache, on the GPU: each layer's projections run,
//! the layer's Q and K come back, the host runs the layer's cache over the text
//! ([`crate::model::kv_evict::evict_layer`], the policy told each query's attention over what it
//! kept, as the CPU pass does), and `kept_attention` then reads only the kept keys and values of
//! each query, from the list the host wrote. One submission per layer, so the policy decides layer l
//! from what the layers before it computed with their own evictions.

use super::{LmOutput, LmRequest, LmWeights, Passing, PreparedLm, Step, prepare_pass};
use crate::attention::AttentionShape;
use crate::cpu::kept_attention::{KeptShape, scaled_softmax};
use crate::gpu::context::Scratch;
use crate::gpu::kept_attention::KeptBuffers;
use crate::gpu::launch::Dispatch;
use crate::gpu::{GpuContext, GpuError, Kernels};
use crate::lm::forward::EvictionRecord;
use crate::model::kv_evict::{EvictPolicy, LayerEviction, evict_layer, kept_list};

/// An evicting pass's cache: its policy and size, and the kept list each layer's attention reads
/// (rewritten before each layer's submission).
pub(super) struct Evicting<'a> {
    policy: EvictPolicy,
    keep: usize,
    list: Scratch<'a>,
}

/// The words of a kept list for `tokens` queries: offsets, then at most K positions a query (every
/// position before it when keeping everything).
pub(super) fn list_words(policy: EvictPolicy, keep: usize, tokens: u32) -> u64 {
    let t = u64::from(tokens);
    let per_query = if policy == EvictPolicy::Full { t } else { (keep as u64).clamp(1, t) };
    t + 1 + t * per_query
}

impl<'a> Evicting<'a> {
    pub(super) fn new(
        ctx: &'a GpuContext,
        policy: EvictPolicy,
        keep: usize,
        tokens: u32,
        request: LmRequest,
    ) -> Result<Self, GpuError> {
        if !request.probabilities {
            return Err(GpuError::InvalidInput("an evicting pass writes every layer's probabilities".into()));
        }
        let list = ctx.scratch_output("kept list", list_words(policy, keep, tokens) * 4)?;
        Ok(Self { policy, keep: keep.max(1), list })
    }

    /// A layer's attention over its kept entries, from `[q, k, v, o, probs]` (`[h, tokens, d]` each,
    /// probabilities `[h_q, tokens, tokens]`).
    pub(super) fn attention(
        &self,
        ctx: &GpuContext,
        kernels: &Kernels,
        [q, k, v, o, probs]: [&wgpu::Buffer; 5],
        shape: AttentionShape,
        scale: f32,
    ) -> Result<Dispatch, GpuError> {
        let AttentionShape { h_q, h_kv, n_q, n_kv, d } = shape;
        let s = KeptShape { h_q, group: h_q / h_kv.max(1), n_q, n_kv, kv_stride: n_kv, d, scale };
        kernels.kept.prepare(ctx, &KeptBuffers { q, k, v, kept: &self.list, o, probs }, s)
    }
}

/// The pass over `ids` with every layer's cache evicted down to `keep` tokens by `policy`, with the
/// record of what each query read and the attention it threw away. Every layer's probabilities come
/// back (`request.probabilities` is implied).
pub async fn run_with_eviction(
    ctx: &GpuContext,
    kernels: &Kernels,
    weights: &LmWeights,
    ids: &[u32],
    request: LmRequest,
    policy: EvictPolicy,
    keep: usize,
) -> Result<(LmOutput, EvictionRecord), GpuError> {
    let request = LmRequest { probabilities: true, ..request };
    let prepared = prepare_pass(ctx, kernels, weights, ids, request, Passing::Evicted(policy, keep)).await?;
    let keep = keep.max(1);
    let mut record = EvictionRecord::new(policy, keep, weights.layers.len());
    let mut from = 0;
    for (at, step) in prepared.steps.iter().enumerate() {
        if let Step::Evict(layer) = *step {
            prepared.submit_steps(ctx, &prepared.steps[from..at]);
            from = at + 1;
            record.push(prepared.evict(ctx, weights, layer).await?);
        }
    }
    prepared.submit_steps(ctx, &prepared.steps[from..]);
    Ok((prepared.read(ctx).await?, record))
}

impl PreparedLm<'_> {
    /// Layer `layer`'s cache run over the text from its Q and K (`[h, tokens, d]`, read back), its
    /// kept list written for `kept_attention`; returns the kept sets and what they drop.
    async fn evict(&self, ctx: &GpuContext, weights: &LmWeights, layer: usize) -> Result<LayerEviction, GpuError> {
        let evicting = self.eviction.as_ref().ok_or_else(|| GpuError::InvalidInput("not an evicting pass".into()))?;
        let g = self.geometry;
        let (t, d) = (self.tokens as usize, g.head_dim as usize);
        let [q, k]: [Vec<f32>; 2] = ctx
            .read_back_all(&[self.buffer("q"), self.buffer("k")])
            .await?
            .try_into()
            .map_err(|_| crate::gpu::kernels::readback_count())?;
        let (group, scale) = ((g.h_q / g.h_kv.max(1)) as usize, f64::from(weights.style.attn_scale));
        let attend = |head: usize, i: usize, keys: &[usize]| {
            let kv = head / group;
            scaled_softmax(&q[(head * t + i) * d..][..d], keys.iter().map(|&j| &k[(kv * t + j) * d..][..d]), scale)
        };
        let mask = weights.layers[layer].mask;
        let evicted = evict_layer(evicting.policy, evicting.keep, self.tokens, g.h_q as usize, mask, attend);
        let list = kept_list(&evicted.kept, self.tokens).map_err(GpuError::InvalidInput)?;
        if list.len() as u64 * 4 > evicting.list.size() {
            return Err(GpuError::InvalidInput(format!("{} kept entries pass the list's room", list.len())));
        }
        ctx.queue.write_buffer(&evicting.list, 0, bytemuck::cast_slice(&list));
        Ok(evicted)
    }
}
