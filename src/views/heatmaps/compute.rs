//! What an export of the explorer recomputes, with the live-attention service's batch code
//! ([`crate::live_attention::batch`]: a batch's inputs, its maps one engine call per piece, each
//! head's values made into a [`HeadMap`]), re-exported here for the explorer's code and tests.

use std::sync::Arc;

use super::head_map::HeadMap;
use super::jobs::pooled_export_notice;
use crate::attention::layer_inputs::LayerInputs;
use crate::engine::{Engine, MapOutput};
pub use crate::live_attention::batch::*;

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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::attention::layer_inputs::LayerLayout;
    use crate::attention::pooled::{Pool, PooledMap};
    use crate::attention::{AttentionProblem, AttentionShape};
    use crate::model::Mask;
    use crate::model::presets::preset;
    use crate::views::attention_input::AttentionInput;
    use crate::views::heatmaps::params::ExplorerParams;
    use crate::views::heatmaps::request::Request;
    use crate::views::heatmaps::request::{Screen, build_request};
    use crate::views::heatmaps::step_through::step_through;

    /// "the cat sat on mats" attending to "le chat": 5 queries over 2 keys, Llama 3 8B layer 0.
    fn cross_request() -> Request {
        let input = AttentionInput { text: "the cat sat on mats".into(), ..Default::default() };
        let explorer = ExplorerParams { src: Some("le chat".into()), ..Default::default() };
        let layout = LayerLayout::of(preset("llama-3-8b").unwrap(), 0);
        let screen = Screen { width_css_px: 1280.0, device_pixel_ratio: 1.0 };
        build_request(&input, &explorer, layout, screen).unwrap()
    }

    fn cross_inputs() -> LayerInputs {
        let req = cross_request();
        let kv_tokens = req.kv_tokens.as_ref().map(|t| t.to_vec());
        LayerInputs::new(req.layout.clone(), req.tokens.to_vec(), kv_tokens, req.seed, req.teach)
    }

    fn steer() -> Steering<'static> {
        Steering { keep_going: &|| true, progress: &|_| {}, now_ms: &|| 0.0 }
    }

    #[test]
    fn chunks_of_queries_put_together_equal_the_whole_rows() {
        // 5 queries over 2 keys run as three calls (rows 0-1, 2-3, 4); their rows, put back in order,
        // are each query's softmax over both keys, as the step-through computes it in one piece.
        let engine = Engine::Cpu { reason: "test".into() };
        let inputs = cross_inputs();
        let batch = pollster::block_on(batch_inputs(&inputs, &[0, 1], &mut KCache::new(), &|| true)).unwrap();
        let values =
            pollster::block_on(head_values(&engine, &inputs, &batch, Mask::Full, MapOutput::Exact, &mut 0.0, &steer()))
                .unwrap();
        let d = 128;
        let scale = 1.0 / (d as f32).sqrt();
        for (i, &h) in [0u32, 1].iter().enumerate() {
            let k = inputs.k_head(inputs.layout.kv_head(h));
            let expected = step_through(&AttentionProblem::new(
                &inputs.q_head(h),
                &k,
                &vec![0.0; k.len()],
                AttentionShape { h_q: 1, h_kv: 1, n_q: 5, n_kv: 2, d: d as u32 },
                Mask::Full,
                scale,
            ));
            assert_eq!(values[i].len(), 10);
            for (got, want) in values[i].iter().zip(&expected.probs) {
                assert!((f64::from(*got) - want).abs() < 1e-6, "head {h}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn a_stopped_batch_returns_what_it_has() {
        let engine = Engine::Cpu { reason: "test".into() };
        let inputs = cross_inputs();
        let batch = pollster::block_on(batch_inputs(&inputs, &[2], &mut KCache::new(), &|| true)).unwrap();
        let stop = Steering { keep_going: &|| false, ..steer() };
        // A newer request stops the inputs too, before their first piece, and nothing is cached.
        let mut cache = KCache::new();
        assert!(pollster::block_on(batch_inputs(&inputs, &[2], &mut cache, &|| false)).is_none());
        assert!(cache.is_empty());
        let values =
            pollster::block_on(head_values(&engine, &inputs, &batch, Mask::Full, MapOutput::Exact, &mut 0.0, &stop));
        assert_eq!(values.unwrap(), vec![Vec::<f32>::new()]);
    }

    #[test]
    fn maps_know_their_head_group_tokens_and_pooled_rows() {
        let maker = HeadMaker::new(Arc::new(cross_inputs()), &cross_request());
        let exact = maker.make(5, vec![0.5; 10], MapOutput::Exact);
        // Llama 3 8B: 4 query heads per KV head, so head 5 reads KV head 1.
        assert_eq!((exact.kv_head, exact.rows, exact.cols, exact.q_offset), (1, 5, 2, 0));
        assert_eq!((exact.row_tokens.len(), exact.col_tokens[1].as_str()), (5, "chat"));
        // Pooled in three query chunks of 2, 2 and 1 rows over 2 columns: 5 rows came back.
        let map = PooledMap::whole(5, 5, 2, Pool::Mean);
        let pooled = maker.make(0, vec![0.5; 10], MapOutput::Pooled(map));
        assert_eq!((pooled.rows, pooled.cols, pooled.pooled), (5, 2, Some(Pool::Mean)));
    }
}
