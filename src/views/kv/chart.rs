//! The KV view's chart: cache memory against context length, one line per layer type and the total,
//! with the budget left for the cache, the chosen context and the longest context that fits.

use super::KvParams;
use super::budget::budget_fit_of;
use crate::model::budget::format_gb;
use crate::model::curves::{CurveOf, KvCurve, chart_max_tokens, chart_samples, kv_curves};
use crate::model::kv_cache::state_bytes;
use crate::model::plot::{Axis, Scale, short_bytes_label, short_tokens_label};
use crate::model::schedule::LayerKind;
use crate::model::units::format_thousands;
use crate::model::{ContextFit, Model};
use crate::views::chart::{LineChartData, RefLine, Series};

/// Colours of the per-kind lines, in turn (the total has its own).
const SERIES_CLASSES: [&str; 4] = ["s0", "s1", "s2", "s3"];

/// The chart for `model` and the link's parameters; `None` when a size passes `u128`.
pub fn kv_chart(model: &Model, kv: &KvParams) -> Option<LineChartData> {
    let fit = budget_fit_of(model, kv)?;
    let max_tokens = chart_max_tokens(model, kv.ctx_tokens, fit.fit);
    // The fit gets its own line only when it falls inside the chart.
    let fit_tokens = match fit.fit {
        ContextFit::Tokens(n) if n <= max_tokens => Some(n),
        _ => None,
    };
    let mut extra = vec![kv.ctx_tokens];
    extra.extend(fit_tokens);
    let samples = chart_samples(model, kv.axis, max_tokens, &extra);
    let curves = kv_curves(model, kv.dtype, &samples).ok()?;
    // No budget line when nothing is left for the cache.
    let room_bytes = (fit.kv_room_bytes > 0).then_some(fit.kv_room_bytes);
    let x = Scale::new(kv.axis, if kv.axis == Axis::Log { 1.0 } else { 0.0 }, max_tokens as f64);
    let y = y_scale(&curves, kv.axis, room_bytes.unwrap_or(0));
    let budget_label = |room: u128| match fit.weights_bytes {
        Some(_) => format!(
            "{} GB budget − weights = {} for the cache",
            format_gb(kv.budget_bytes),
            short_bytes_label(room as f64)
        ),
        None => format!("{} GB budget", format_gb(kv.budget_bytes)),
    };
    let h_lines = room_bytes.map(|room| RefLine { value: room as f64, label: budget_label(room), class: "budget" });
    Some(LineChartData {
        x_ticks: x.binary_ticks(6).into_iter().map(|t| (t, short_tokens_label(t))).collect(),
        y_ticks: y.decimal_ticks(5).into_iter().map(|t| (t, short_bytes_label(t))).collect(),
        x,
        y,
        series: series(&curves, kv.axis),
        h_lines: h_lines.into_iter().collect(),
        v_lines: v_lines(kv.ctx_tokens, fit_tokens),
        x_title: "context length (tokens; K = 1,024)".into(),
        y_title: y_title(model, kv),
        description: format!(
            "KV cache of {} in {} against context length from 0 to {} tokens, {} axes.",
            model.name,
            kv.dtype.label(),
            format_thousands(max_tokens.into()),
            kv.axis.name()
        ),
    })
}

/// `KV cache, FP16 (GB = 10^9 B)`; with a recurrent state, what the total then means.
fn y_title(model: &Model, kv: &KvParams) -> String {
    if state_bytes(model).is_ok_and(|s| s > 0) {
        format!("KV cache, {} + state (GB = 10^9 B)", kv.dtype.label())
    } else {
        format!("KV cache, {} (GB = 10^9 B)", kv.dtype.label())
    }
}

/// Bytes from 0 (linear) or the power of ten below the smallest point (log) to 5% above the
/// highest of the total and the budget line.
fn y_scale(curves: &[KvCurve], axis: Axis, room_bytes: u128) -> Scale {
    let top_bytes = curves.iter().filter_map(|c| c.points.last()).map(|p| p.1).max().unwrap_or(1);
    let y_max = (top_bytes.max(room_bytes) as f64 * 1.05).max(1.0);
    let y_min = match axis {
        Axis::Linear => 0.0,
        Axis::Log => {
            let smallest =
                curves.iter().flat_map(|c| c.points.iter()).map(|p| p.1).filter(|&b| b > 0).min().unwrap_or(1);
            10f64.powf((smallest as f64).log10().floor())
        }
    };
    Scale::new(axis, y_min, y_max)
}

/// One series per curve; a log chart drops the zeros it cannot place.
fn series(curves: &[KvCurve], axis: Axis) -> Vec<Series> {
    let class = |i: usize, c: &KvCurve| match c.of {
        CurveOf::Total => "total",
        CurveOf::State => "state",
        CurveOf::Kind(_) => SERIES_CLASSES[i % SERIES_CLASSES.len()],
    };
    let drawable = |p: &&(u64, u128)| axis == Axis::Linear || (p.0 > 0 && p.1 > 0);
    let points = |c: &KvCurve| c.points.iter().filter(drawable).map(|&(n, b)| (n as f64, b as f64)).collect();
    curves
        .iter()
        .enumerate()
        .map(|(i, c)| Series { label: curve_label(c), class: class(i, c), points: points(c) })
        .collect()
}

/// A line's legend: "10 global layers", "52 sliding layers (window 1024)", "total (62 storing
/// layers)", "state of 28 recurrent layers (constant)", "total per sequence (cache of 4 layers + state)".
fn curve_label(curve: &KvCurve) -> String {
    match curve.of {
        CurveOf::Total if curve.with_state => {
            format!("total per sequence (cache of {} layers + state)", curve.storing_layers)
        }
        CurveOf::Total => format!("total ({} storing layers)", curve.storing_layers),
        CurveOf::State => format!("state of {} recurrent layers (constant)", curve.storing_layers),
        CurveOf::Kind(LayerKind::Global) => format!("{} global layers", curve.storing_layers),
        CurveOf::Kind(LayerKind::Sliding { window_tokens }) => {
            format!("{} sliding layers (window {window_tokens})", curve.storing_layers)
        }
        CurveOf::Kind(LayerKind::Chunked { chunk_tokens }) => {
            format!("{} chunked layers (chunk {chunk_tokens})", curve.storing_layers)
        }
        CurveOf::Kind(kind) => format!("{} {} layers", curve.storing_layers, kind.noun()),
    }
}

/// The chosen context and, when it is on the chart, the longest context that fits.
fn v_lines(ctx_tokens: u64, fit_tokens: Option<u64>) -> Vec<RefLine> {
    let ctx = RefLine {
        value: ctx_tokens as f64,
        label: format!("context {}", short_tokens_label(ctx_tokens as f64)),
        class: "ctx",
    };
    let fit = fit_tokens.map(|n| RefLine {
        value: n as f64,
        label: format!("fits up to {}", format_thousands(n.into())),
        class: "fit",
    });
    std::iter::once(ctx).chain(fit).collect()
}

/// The decode animation's point on the chart: (tokens, bytes, label).
pub fn decode_marker(tokens: u64, bytes: u128) -> (f64, f64, String) {
    (tokens as f64, bytes as f64, format!("decode: {} tokens, {}", tokens, short_bytes_label(bytes as f64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;
    use crate::model::DType;

    fn chart(id: &str, kv: KvParams) -> LineChartData {
        kv_chart(preset(id).unwrap(), &kv).unwrap()
    }

    #[test]
    fn llama_3_8b_one_global_line_the_total_and_the_budget() {
        let d = chart("llama-3-8b", KvParams::default());
        let classes: Vec<&str> = d.series.iter().map(|s| s.class).collect();
        assert_eq!(classes, ["s0", "total"]);
        // Linear: both lines start at 0 tokens, 0 bytes.
        assert_eq!(d.series[1].points[0], (0.0, 0.0));
        // The cache alone has the whole 80 GB: the budget line sits at 8 × 10^10 B.
        assert_eq!(d.h_lines, vec![RefLine { value: 8e10, label: "80 GB budget".into(), class: "budget" }]);
        // 610,351 tokens fit: a line for the context (8K) and one for the fit.
        let labels: Vec<&str> = d.v_lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["context 8K", "fits up to 610,351"]);
        assert_eq!((d.y.min, d.y_title.as_str()), (0.0, "KV cache, FP16 (GB = 10^9 B)"));
        assert!(d.y.max >= 8e10 * 1.05, "the budget line fits under the top: {}", d.y.max);
        assert!(d.description.starts_with("KV cache of Llama 3 8B in FP16 against context length from 0 to "));
        assert!(d.description.ends_with(" tokens, linear axes."), "{}", d.description);
    }

    #[test]
    fn log_axes_drop_zeros_and_start_at_a_power_of_ten() {
        let kv = KvParams { axis: Axis::Log, dtype: DType::Bf16, ctx_tokens: 131_072, ..Default::default() };
        let d = chart("gemma-3-27b", kv);
        // Gemma 3 27B: sliding and global lines, and the total.
        assert_eq!(d.series.len(), 3);
        assert!(d.series.iter().flat_map(|s| &s.points).all(|&(n, b)| n > 0.0 && b > 0.0));
        assert_eq!(d.y.min.log10().fract(), 0.0, "{}", d.y.min);
        assert_eq!(d.x.min, 1.0);
    }

    #[test]
    fn counted_weights_shrink_the_budget_line() {
        // 141 GB − 16,060,522,496 B of BF16 weights = 124,939,477,504 B, 125 GB to 3 digits.
        let kv = KvParams { budget_bytes: 141_000_000_000, weights: Some(DType::Bf16), ..Default::default() };
        let d = chart("llama-3-8b", kv);
        assert_eq!(d.h_lines[0].value, 124_939_477_504.0);
        assert_eq!(d.h_lines[0].label, "141 GB budget − weights = 125 GB for the cache");
    }

    #[test]
    fn the_decode_marker_is_labelled() {
        // 1,000 tokens of Llama 3 8B at FP16: 131,072,000 B, 131 MB to 3 digits.
        assert_eq!(decode_marker(1000, 131_072_000), (1000.0, 131_072_000.0, "decode: 1000 tokens, 131 MB".into()));
    }

    #[test]
    fn a_hybrid_chart_has_a_flat_state_line_and_a_total_per_sequence() {
        // 2 global layers of 8 KV heads × 128 (8,192 B per token in FP16) and 6 Mamba layers keeping
        // 6 × (1,000 + 4,000) × 2 B = 60,000 B.
        let m = crate::model::decode_model("L8.d1024.h8.kv8.hd128.pat3s-1g.ssm1000-4000-2-2-0.fs4096").unwrap();
        let d = kv_chart(&m, &KvParams { ctx_tokens: 1000, ..Default::default() }).unwrap();
        let classes: Vec<&str> = d.series.iter().map(|s| s.class).collect();
        assert_eq!(classes, ["s0", "state", "total"]);
        assert!(d.series[1].points.iter().all(|p| p.1 == 60_000.0));
        assert_eq!(d.series[2].points[0], (0.0, 60_000.0));
        assert_eq!(d.y_title, "KV cache, FP16 + state (GB = 10^9 B)");
        // The total crosses the 80 GB budget where the state and the cache fill it:
        // (8 × 10^10 − 60,000) / 8,192 = 9,765,617.6 -> 9,765,617 tokens.
        assert_eq!(d.v_lines[1].label, "fits up to 9,765,617");
        let labels: Vec<&str> = d.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "2 global layers",
                "state of 6 recurrent layers (constant)",
                "total per sequence (cache of 2 layers + state)"
            ]
        );
    }

    #[test]
    fn gemma_3_s_legends_name_each_kind_with_its_window() {
        let labels: Vec<String> =
            chart("gemma-3-27b", KvParams::default()).series.into_iter().map(|s| s.label).collect();
        assert_eq!(labels, ["52 sliding layers (window 1024)", "10 global layers", "total (62 storing layers)"]);
    }
}
