//! KV-cache memory against context length: one curve per layer kind and the total, sampled where
//! the shape changes (every window and chunk boundary), and the context range worth drawing.

use super::config::Model;
use super::dtype::DType;
use super::kv_cache::{ContextFit, SizeOverflow, kv_breakdown};
use super::plot::{Axis, sample_tokens};
use super::schedule::LayerKind;

/// Longest context a chart spans (the URL's own limit).
pub const MAX_CHART_TOKENS: u64 = 100_000_000;
/// Shortest context a chart spans, so that tiny contexts still show a slope.
pub const MIN_CHART_TOKENS: u64 = 64;

/// One line of the chart: a layer kind's cache (all its storing layers), or the total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvCurve {
    /// `None` for the total.
    pub kind: Option<LayerKind>,
    /// Layers of this kind that store a cache (all storing layers for the total).
    pub storing_layers: u32,
    /// `(context tokens, bytes)`, ascending in tokens.
    pub points: Vec<(u64, u128)>,
}

impl KvCurve {
    /// "10 global layers", "52 sliding (1,024) layers", "total (62 layers)".
    pub fn label(&self) -> String {
        match self.kind {
            None => format!("total ({} storing layers)", self.storing_layers),
            Some(LayerKind::Global) => format!("{} global layers", self.storing_layers),
            Some(LayerKind::Sliding { window_tokens }) => {
                format!("{} sliding layers (window {window_tokens})", self.storing_layers)
            }
            Some(LayerKind::Chunked { chunk_tokens }) => {
                format!("{} chunked layers (chunk {chunk_tokens})", self.storing_layers)
            }
            Some(kind) => format!("{} {} layers", self.storing_layers, kind.noun()),
        }
    }
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

/// One curve per layer kind (in the schedule's order) and the total last, at each of `samples`.
/// Kinds with no storing layer (all shared) are left out.
pub fn kv_curves(model: &Model, dtype: DType, samples: &[u64]) -> Result<Vec<KvCurve>, SizeOverflow> {
    let counts = model.schedule.counts();
    let mut curves: Vec<KvCurve> = Vec::with_capacity(counts.len() + 1);
    let mut total = KvCurve { kind: None, storing_layers: 0, points: Vec::with_capacity(samples.len()) };
    for &n in samples {
        let b = kv_breakdown(model, n, dtype)?;
        if curves.is_empty() {
            curves = b
                .rows
                .iter()
                .map(|r| KvCurve {
                    kind: Some(r.kind),
                    storing_layers: r.storing_layers,
                    points: Vec::with_capacity(samples.len()),
                })
                .collect();
            total.storing_layers = b.rows.iter().map(|r| r.storing_layers).sum();
        }
        for (curve, row) in curves.iter_mut().zip(&b.rows) {
            curve.points.push((n, row.bytes));
        }
        total.points.push((n, b.total_bytes));
    }
    curves.retain(|c| c.storing_layers > 0);
    curves.push(total);
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
    use crate::model::presets::preset;

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
        assert_eq!(sliding.kind, Some(LayerKind::Sliding { window_tokens: 1024 }));
        assert_eq!(sliding.points[1], (1024, 425_984 * 1024));
        // plateau: the same at 2048 and 131,072 tokens
        assert_eq!(sliding.points[2].1, 425_984 * 1024);
        assert_eq!(sliding.points[3].1, 425_984 * 1024);
        // 10 global layers * 16 * 128 * 2 * 2 B = 81,920 B per token, growing without bound
        assert_eq!(curves[1].points[3], (131_072, 81_920 * 131_072));
        // total = sum
        assert_eq!(curves[2].points[3].1, 425_984 * 1024 + 81_920 * 131_072);
        assert_eq!(curves[2].storing_layers, 62);
        assert!(curves[0].label().contains("52 sliding"));
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
}
