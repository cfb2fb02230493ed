//! What the heads write, on request: each head's attention output `softmax(scale · Q Kᵀ + mask) V`,
//! one engine call a head, for a view that measures what a change (evicting keys, quantising the
//! cache) does to the result rather than to the probabilities alone.

use super::kv_groups::STOPPED;
use crate::attention::layer_inputs::LayerInputs;
use crate::attention::{AttentionProblem, AttentionShape};
use crate::engine::Engine;
use crate::model::Mask;

/// Each of `heads`' outputs over `inputs` under `mask`, `[n_q, d]` a head in the order asked, on the
/// GPU or the CPU reference. Stops with an error once `keep_going` says no (asked before each head).
/// The kernels take queries as the last rows of the keys, so cross-attention with more queries than
/// keys is refused.
pub async fn head_outputs(
    engine: &Engine,
    inputs: &LayerInputs,
    heads: &[u32],
    mask: Mask,
    keep_going: &dyn Fn() -> bool,
) -> Result<Vec<Vec<f32>>, String> {
    let (n_q, n_kv) = (inputs.q_tokens().len() as u32, inputs.kv_tokens().len() as u32);
    if n_q > n_kv {
        return Err(format!("outputs are computed for at most as many queries as keys ({n_q} queries, {n_kv} keys)"));
    }
    let d = inputs.layout.head_dim;
    let shape = AttentionShape { h_q: 1, h_kv: 1, n_q, n_kv, d };
    let scale = 1.0 / (d as f32).sqrt();
    let mut out = Vec::with_capacity(heads.len());
    for &h in heads {
        if !keep_going() {
            return Err(STOPPED.into());
        }
        let q = inputs.q_head(h);
        let (k, v) = inputs.kv_head(inputs.layout.kv_head(h));
        out.push(engine.attention(&AttentionProblem::new(&q, &k, &v, shape, mask, scale)).await?.o);
    }
    Ok(out)
}
