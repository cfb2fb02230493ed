//! What an export of the explorer recomputes, with the live-attention service's batch code
//! ([`crate::live_attention::batch`]: a batch's inputs, its maps one engine call per piece).

use std::sync::Arc;

use super::head_map::HeadMap;
use super::jobs::pooled_export_notice;
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::{Engine, MapOutput};
use crate::live_attention::batch::{KCache, Steering, batch_inputs, head_values};

/// What to export for a head: the map itself when it holds every probability; a pooled one
/// recomputed exactly (this head only) when it is small enough and the GPU takes it; otherwise the
/// pooled blocks, with a notice saying so.
pub async fn map_for_export(
    engine: &Engine,
    inputs: &LayerInputs,
    map: Arc<HeadMap>,
    now_ms: &dyn Fn() -> f64,
) -> Result<(Arc<HeadMap>, Option<String>), String> {
    if map.pooled.is_none() {
        return Ok((map, None));
    }
    let gpu = engine.gpu_supports_dim(inputs.layout.head_dim);
    if let Some(why) = pooled_export_notice(map.head, (map.n_q, map.n_kv), (map.rows, map.cols), gpu) {
        return Ok((map, Some(why)));
    }
    let same_input = inputs.q_tokens().len() as u32 == map.n_q && inputs.kv_tokens().len() as u32 == map.n_kv;
    if !same_input {
        return Err("The view changed while exporting; export again once it has finished.".into());
    }
    let batch = batch_inputs(inputs, &[map.head], &mut KCache::new(), &|| true)
        .await
        .ok_or("The export was stopped; export again.")?;
    let steer = Steering { keep_going: &|| true, progress: &|_| {}, now_ms };
    let mut values = head_values(engine, inputs, &batch, map.mask, MapOutput::Exact, &mut 0.0, &steer).await?;
    let exact = HeadMap { rows: map.n_q, cols: map.n_kv, values: values.remove(0), pooled: None, ..(*map).clone() };
    Ok((Arc::new(exact), None))
}
