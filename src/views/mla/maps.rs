//! The drawn head of each form as the heatmap component takes it, and the inputs the view computes.

use std::sync::Arc;

use super::compute::MlaRun;
use super::inputs::MlaInputs;
use super::setup::setup;
use crate::live_attention::head_map::HeadMap;
use crate::model::Mask;
use crate::views::registry::Settings;

/// The drawn head's probabilities in one form (`absorbed` or expanded), every cell, keys named by
/// position (the tokens are synthetic).
pub fn head_map(run: &MlaRun, absorbed: bool) -> HeadMap {
    let n = run.n as u32;
    let positions = Arc::new((0..run.n).map(|i| i.to_string()).collect::<Vec<_>>());
    HeadMap {
        head: run.head as u32,
        kv_head: if absorbed { 0 } else { run.head as u32 },
        teaching: None,
        rows: n,
        cols: n,
        values: run.head_probs(absorbed, run.head).to_vec(),
        pooled: None,
        n_q: n,
        n_kv: n,
        row_tokens: positions.clone(),
        col_tokens: positions,
        mask: Mask::Causal,
        q_offset: 0,
        scores: None,
    }
}

/// What the view computes for `settings`, or why it cannot (widths past the kernels).
pub fn planned_inputs(settings: &Settings) -> Result<MlaInputs, String> {
    let s = setup(settings);
    if let Some(why) = s.sizes.refusal() {
        return Err(why);
    }
    let p = &settings.mla;
    let heads = p.qheads.min(s.sizes.heads) as usize;
    Ok(MlaInputs::seeded(s.sizes, p.tokens as usize, heads, settings.input.seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::views::mla::compute::run;

    #[test]
    fn the_drawn_heads_maps_are_the_runs_rows() {
        let (settings, _) = Settings::from_query("model=deepseek-v3&tokens=5&qheads=2&mhead=1");
        let inputs = planned_inputs(&settings).unwrap();
        assert_eq!((inputs.n, inputs.heads), (5, 2));
        let engine = Engine::Cpu { reason: "a test".into() };
        let r =
            pollster::block_on(run(&engine, &inputs, settings.mla.rot, settings.mla.shown_head() as usize)).unwrap();
        let (e, a) = (head_map(&r, false), head_map(&r, true));
        assert_eq!((e.head, e.kv_head, a.kv_head), (1, 1, 0));
        assert_eq!(e.values, r.expanded.probs[25..50]);
        assert_eq!(a.values, r.absorbed.probs[25..50]);
        // Row 0 sees only key 0.
        assert_eq!(e.values[..5], [1.0, 0.0, 0.0, 0.0, 0.0]);
    }
}
