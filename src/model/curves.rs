//! KV-cache memory against context length: one curve per layer kind and the total, sampled where
//! the shape changes (every window and chunk boundary), and the context range worth drawing.

use super::config::Model;
use super::dtype::DType;
use super::kv_cache::{ContextFit, SizeOverflow, kv_breakdown, state_bytes};
use super::plot::{Axis, sample_tokens};
use super::schedule::LayerKind;

/// Longest context a chart spans (the URL's own limit).
pub const MAX_CHART_TOKENS: u64 = 100_000_000;
/// Shortest context a chart spans, so that tiny contexts still show a slope.
pub const MIN_CHART_TOKENS: u64 = 64;

/// What a line of the chart draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveOf {
    /// The cache of the storing layers of one kind.
    Kind(LayerKind),
    /// The recurrent state of the layers without attention (flat: the same at every context).
    State,
    /// Everything one sequence keeps: the whole cache plus the state.
    Total,
}

/// One line of the chart: a layer kind's cache (all its storing layers), the recurrent state, or the
/// total per sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvCurve {
    pub of: CurveOf,
    /// Layers of this kind that store a cache (all storing layers for the total; the layers that
    /// keep a state for the state line).
    pub storing_layers: u32,
    /// `(context tokens, bytes)`, ascending in tokens.
    pub points: Vec<(u64, u128)>,
    /// Whether the model keeps a recurrent state (the total then adds it, and says so).
    pub with_state: bool,
}

/// The window and chunk sizes of a model: where its curves bend.
pub fn breakpoints(model: &Model) -> Vec<u64> {
    let mut out: Vec<u64> = model.schedule.counts().iter().filter_map(|c| c.kind.window_tokens()).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The context range worth drawing: past the chosen context, past the longest context that fits
/// the budget (so the crossing is on the chart), and past twice the largest window (so its plateau
/// shows); at most [`MAX_CHART_TOKENS`].
pub fn chart_max_tokens(model: &Model, ctx_tokens: u64, fit: ContextFit) -> u64 {
    let mut max = ctx_tokens.max(MIN_CHART_TOKENS);
    if let ContextFit::Tokens(n) = fit {
        max = max.max(n.saturating_add(n / 4));
    }
    if let Some(&w) = breakpoints(model).last() {
        max = max.max(w.saturating_mul(2));
    }
    max.min(MAX_CHART_TOKENS)
}

/// One curve per layer kind (in the schedule's order), then the recurrent state when the model keeps
/// one (a flat line), then the total per sequence (cache plus state) last, at each of `samples`.
/// Kinds with no storing layer (all shared, or without attention) are left out; so is the total of a
/// model that caches nothing (its state line is the whole).
pub fn kv_curves(model: &Model, dtype: DType, samples: &[u64]) -> Result<Vec<KvCurve>, SizeOverflow> {
    let state = state_bytes(model)?;
    let curve = |of, storing_layers| KvCurve {
        of,
        storing_layers,
        points: Vec::with_capacity(samples.len()),
        with_state: state > 0,
    };
    let mut curves: Vec<KvCurve> = Vec::new();
    let mut state_curve = curve(CurveOf::State, 0);
    let mut total = curve(CurveOf::Total, 0);
    for &n in samples {
        let b = kv_breakdown(model, n, dtype)?;
        if curves.is_empty() {
            curves = b.rows.iter().map(|r| curve(CurveOf::Kind(r.kind), r.storing_layers)).collect();
            total.storing_layers = b.rows.iter().map(|r| r.storing_layers).sum();
            state_curve.storing_layers = b.rows.iter().filter(|r| r.state_bytes > 0).map(|r| r.layers).sum();
        }
        for (curve, row) in curves.iter_mut().zip(&b.rows) {
            curve.points.push((n, row.bytes));
        }
        state_curve.points.push((n, b.state_bytes));
        total.points.push((n, b.total_bytes.checked_add(b.state_bytes).ok_or(SizeOverflow)?));
    }
    curves.retain(|c| c.storing_layers > 0);
    let caches = !curves.is_empty();
    if state > 0 {
        curves.push(state_curve);
    }
    if caches || state == 0 {
        curves.push(total);
    }
    Ok(curves)
}

/// Samples for a chart on `axis` up to `max_tokens`, including the model's breakpoints and `extra`
/// points (the chosen context, the budget's crossing).
pub fn chart_samples(model: &Model, axis: Axis, max_tokens: u64, extra: &[u64]) -> Vec<u64> {
    let mut marks = breakpoints(model);
    marks.extend_from_slice(extra);
    sample_tokens(axis, 0, max_tokens, 96, &marks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn model(id: &str) -> Model {
        preset(id).cloned().unwrap_or_else(|| panic!("{id}"))
    }

    #[test]
    fn gemma3_curves_plateau_and_grow() {
        let m = model("gemma-3-27b");
        let curves = kv_curves(&m, DType::Fp16, &[0, 1024, 2048, 131_072]).unwrap_or_default();
        assert_eq!(curves.len(), 3);
        // 52 sliding layers * 16 KV heads * 128 dims * 2 (K, V) * 2 B = 425,984 B per token
        let sliding = &curves[0];
        assert_eq!(sliding.of, CurveOf::Kind(LayerKind::Sliding { window_tokens: 1024 }));
        assert_eq!(sliding.points[1], (1024, 425_984 * 1024));
        // plateau: the same at 2048 and 131,072 tokens
        assert_eq!(sliding.points[2].1, 425_984 * 1024);
        assert_eq!(sliding.points[3].1, 425_984 * 1024);
        // 10 global layers * 16 * 128 * 2 * 2 B = 81,920 B per token, growing without bound
        assert_eq!(curves[1].points[3], (131_072, 81_920 * 131_072));
        // total = sum
        assert_eq!(curves[2].points[3].1, 425_984 * 1024 + 81_920 * 131_072);
        assert_eq!(curves[2].storing_layers, 62);
        assert_eq!(curves[0].storing_layers, 52);
    }

    #[test]
    fn chart_range() {
        let m = model("llama-3-8b");
        assert_eq!(chart_max_tokens(&m, 8192, ContextFit::Tokens(610_351)), 610_351 + 152_587);
        assert_eq!(chart_max_tokens(&m, 8192, ContextFit::WeightsDoNotFit), 8192);
        assert_eq!(chart_max_tokens(&m, 10, ContextFit::Unbounded), MIN_CHART_TOKENS);
        assert_eq!(chart_max_tokens(&m, 8192, ContextFit::Tokens(u64::MAX)), MAX_CHART_TOKENS);
        let mistral = model("mistral-7b");
        assert_eq!(chart_max_tokens(&mistral, 100, ContextFit::Unbounded), 8192);
        let s = chart_samples(&mistral, Axis::Linear, 8192, &[100]);
        assert!(s.contains(&4096) && s.contains(&100) && s.contains(&0) && s.contains(&8192));
    }

    #[test]
    fn a_hybrid_draws_its_state_flat_and_adds_it_to_the_total() {
        // 8 layers: 2 global (8 KV heads of 128: 2 × 8 × 128 × 2 × 2 B = 8,192 B per token) and 6
        // Mamba layers of (1,000 + 4,000) elements × 2 B: 60,000 B of state at every context.
        let m = crate::model::decode_model("L8.d1024.h8.kv8.hd128.pat3s-1g.ssm1000-4000-2-2-0.fs4096").unwrap();
        let curves = kv_curves(&m, DType::Fp16, &[0, 10, 1000]).unwrap();
        let of: Vec<CurveOf> = curves.iter().map(|c| c.of).collect();
        assert_eq!(of, [CurveOf::Kind(LayerKind::Global), CurveOf::State, CurveOf::Total]);
        assert_eq!(curves[1].points, [(0, 60_000), (10, 60_000), (1000, 60_000)]);
        assert_eq!(curves[1].storing_layers, 6);
        // 1,000 tokens: 8,192,000 B of cache + 60,000 B of state.
        assert_eq!(curves[2].points[2], (1000, 8_252_000));
        assert_eq!((curves[2].storing_layers, curves[2].with_state), (2, true));
        // A pure state-space model: the state line alone.
        let mamba = crate::model::decode_model("L4.d64.h1.kv1.hd1.pat1s.ssm10-20-2-4-0.fs0").unwrap();
        let curves = kv_curves(&mamba, DType::Fp16, &[0, 100]).unwrap();
        // 4 layers × (10 × 2 B + 20 × 4 B) = 400 B.
        assert_eq!(curves.len(), 1);
        assert_eq!((curves[0].of, curves[0].points[1]), (CurveOf::State, (100, 400)));
    }
}
