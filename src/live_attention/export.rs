//! What an export of a head holds: the map itself when it has every probability; a pooled head
//! recomputed exactly (that head only) when it is small enough and the GPU takes it; otherwise its
//! pooled blocks, with a notice saying so.

use std::sync::Arc;

use super::HeadMap;
use super::batch::{KCache, Steering, batch_inputs, head_values};
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::{Engine, MapOutput};

/// Largest head an export writes with every probability (64 MiB of f32).
pub const EXACT_EXPORT_MAX_CELLS: u64 = 1 << 24;

/// Why the export of a pooled head (`n` = (n_q, n_kv), shown as `cells` = (rows, cols)) holds its
/// pooled blocks instead of every probability; `None` when every probability can be recomputed for
/// it (it fits [`EXACT_EXPORT_MAX_CELLS`] and the GPU takes its head width).
pub fn pooled_export_notice(head: u32, n: (u32, u32), cells: (u32, u32), gpu: bool) -> Option<String> {
    let all = u64::from(n.0) * u64::from(n.1);
    let reason = if all > EXACT_EXPORT_MAX_CELLS {
        format!("its {} x {} = {all} probabilities are more than an export holds ({EXACT_EXPORT_MAX_CELLS})", n.0, n.1)
    } else if !gpu {
        "without the GPU only the pooled blocks are computed".to_owned()
    } else {
        return None;
    };
    Some(format!("Head {head}: {reason}, so the file holds its {} x {} pooled blocks.", cells.0, cells.1))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_exports_hold_every_probability_up_to_64_mib() {
        // 4096 x 4096 = 2^24 cells: exactly at the limit.
        assert_eq!(pooled_export_notice(3, (4096, 4096), (160, 160), true), None);
        assert_eq!(
            pooled_export_notice(3, (4097, 4096), (160, 160), true).as_deref(),
            Some(
                "Head 3: its 4097 x 4096 = 16781312 probabilities are more than an export holds (16777216), so the file holds its 160 x 160 pooled blocks."
            )
        );
        assert!(pooled_export_notice(0, (512, 512), (160, 160), false).is_some_and(|n| n.contains("without the GPU")));
    }
}
