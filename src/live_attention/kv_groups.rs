//! For a view that measures something new of live attention with a job of its own: the request's
//! query heads in the heatmaps' batches (the heads of one KV group together, under the GPU's work and
//! Q-buffer caps), each batch's Q and K built in pieces with the page let in between, and a newer
//! request stopping the walk between batches and between pieces. The view's job runs on each batch.

use super::batch::{KCache, batch_inputs};
use super::plan::batches;
use super::request::Request;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::model::limits::{BATCH_MAX_Q_FLOATS, GPU_BATCH_MULTIPLY_ADDS};

/// What a walk returns when a newer request stopped it.
pub const STOPPED: &str = "stopped for a newer request";

/// `per_batch`'s result for each batch of `request`'s heads in order (their query heads are the
/// batches' concatenated, in the order the request lists them), each batch's problem holding its
/// heads' Q (`[heads, n_q, d]`) and their KV group's K, no V, at the scale 1/√d. Queries are the
/// last rows of the keys, so cross-attention with more queries than keys is refused.
pub async fn over_kv_group_batches<T>(
    request: &Request,
    keep_going: &dyn Fn() -> bool,
    mut per_batch: impl AsyncFnMut(&AttentionProblem<'_>) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let (n_q, n_kv, d) = (request.n_q(), request.n_kv(), request.layout.head_dim);
    if n_q > n_kv {
        return Err(format!("a batch takes at most as many queries as keys ({n_q} queries, {n_kv} keys)"));
    }
    let inputs = request.inputs();
    let per_head_work = u64::from(n_q) * u64::from(n_kv) * u64::from(d);
    let per_head_q = u64::from(n_q) * u64::from(d);
    let group = request.layout.group_size();
    let plan = batches(&request.heads, group, per_head_work, per_head_q, GPU_BATCH_MULTIPLY_ADDS, BATCH_MAX_Q_FLOATS);
    let mut k_cache = KCache::new();
    let mut out = Vec::with_capacity(plan.len());
    for heads in plan {
        let batch = batch_inputs(&inputs, &heads, &mut k_cache, keep_going).await.ok_or(STOPPED)?;
        let shape = AttentionShape { h_q: heads.len() as u32, h_kv: batch.h_kv, n_q, n_kv, d };
        let problem = AttentionProblem::scores(&batch.q, &batch.k, shape, request.mask, 1.0 / (d as f32).sqrt());
        out.push(per_batch(&problem).await?);
        if !keep_going() {
            return Err(STOPPED.into());
        }
    }
    Ok(out)
}
