//! What the memory view shows of a measurement: one row per scheme (bytes per token and quality),
//! the chart of KL against bytes per token, the chosen scheme's heads, and the sentences around them.

use crate::lm::kv_quality::{HeadChange, Quality, head_change, relative_error};
use crate::model::Model;
use crate::model::kv_quant::KvScheme;
use crate::model::plot::{Axis, Scale, short_bytes_label};
use crate::views::chart::{LineChartData, Series};

/// One compared scheme, measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeRow {
    pub scheme: KvScheme,
    /// `data-name`.
    pub name: String,
    /// Exact bytes per cached token of the whole model, scales included (`data-bytes-per-token`).
    pub bytes_per_token: u64,
    /// Bytes that do not grow with the text (fp8's scales, KIVI's recent tokens).
    pub fixed_bytes: u64,
    pub quality: Quality,
}

/// The model's cache geometry: attention layers, KV heads, head width.
pub fn cache_geometry(m: &Model) -> (u32, u32, u32) {
    (m.schedule.layers().len() as u32, m.attn.n_kv_heads, m.attn.head_dim)
}

pub fn scheme_row(m: &Model, scheme: KvScheme, quality: Quality) -> SchemeRow {
    let (layers, h_kv, d) = cache_geometry(m);
    SchemeRow {
        scheme,
        name: scheme.name(),
        bytes_per_token: scheme.bytes_per_token(layers, h_kv, d),
        fixed_bytes: scheme.fixed_bytes(layers, h_kv, d),
        quality,
    }
}

/// The smallest KL the chart's log axis shows; a row below it (the full-precision one, KL 0) sits on
/// the axis.
pub const KL_FLOOR: f64 = 1e-8;

/// The families the chart joins with a line each, by the names' prefixes.
const FAMILIES: [(&str, &str, &[&str]); 3] = [
    ("floats: fp32, fp16, fp8", "s0", &["fp32", "fp16", "fp8"]),
    ("integers: int8 per token, int4 / int2 per group", "s1", &["int8", "int4", "int2"]),
    ("KIVI", "s2", &["kivi"]),
];

/// KL (log axis, floored at [`KL_FLOOR`]) against bytes per token, one line per family of schemes.
pub fn chart(rows: &[SchemeRow], model_name: &str) -> LineChartData {
    let series: Vec<Series> = FAMILIES
        .iter()
        .map(|(label, class, prefixes)| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| prefixes.iter().any(|p| r.name.starts_with(p)))
                .map(|r| (r.bytes_per_token as f64, r.quality.kl.max(KL_FLOOR)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { label: (*label).into(), class, points }
        })
        .collect();
    let most_bytes = rows.iter().map(|r| r.bytes_per_token).max().unwrap_or(1) as f64;
    let most_kl = rows.iter().map(|r| r.quality.kl).fold(KL_FLOOR * 10.0, f64::max);
    let x = Scale::new(Axis::Linear, 0.0, most_bytes * 1.05);
    let y = Scale::new(Axis::Log, KL_FLOOR, 10f64.powf(most_kl.log10().ceil()));
    LineChartData {
        x_ticks: x.decimal_ticks(6).into_iter().map(|t| (t, short_bytes_label(t))).collect(),
        y_ticks: y.decimal_ticks(8).into_iter().map(|t| (t, format!("{t:.0e}"))).collect(),
        x,
        y,
        series,
        h_lines: Vec::new(),
        v_lines: Vec::new(),
        x_title: "bytes per cached token (scales included)".into(),
        y_title: "KL from full precision (nats, log)".into(),
        description: format!(
            "KL divergence of {model_name}'s next-token distributions from its full-precision pass against the \
             KV cache's bytes per token, for {} schemes.",
            rows.len()
        ),
    }
}

/// One head of the chosen scheme's pass against the full-precision one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadRow {
    pub layer: usize,
    pub head: usize,
    pub change: HeadChange,
    /// ‖o - o_full‖ / ‖o_full‖ of the head's output over every token (before W_O).
    pub output_error: f64,
}

/// One pass's per-layer results the head table compares: probabilities `[heads, tokens, tokens]` and
/// head outputs `[tokens, heads * d]`.
pub struct LayerOutputs<'a> {
    pub probs: &'a [Vec<f32>],
    pub attended: &'a [Vec<f32>],
}

/// Every head's change, the chosen pass (`got`) against the full-precision one.
pub fn head_rows(full: LayerOutputs, got: LayerOutputs, tokens: usize) -> Vec<HeadRow> {
    let n = tokens * tokens;
    let mut out = Vec::new();
    let layers = full.probs.iter().zip(got.probs).zip(full.attended.iter().zip(got.attended));
    for (layer, ((f, g), (fo, go))) in layers.enumerate() {
        if n == 0 || f.len() != g.len() || fo.len() != go.len() {
            continue;
        }
        let heads = f.len() / n;
        let errors = head_output_errors(fo, go, tokens, heads);
        for (head, (fh, gh)) in f.chunks_exact(n).zip(g.chunks_exact(n)).enumerate() {
            if let (Some(change), Some(&output_error)) = (head_change(fh, gh, tokens), errors.get(head)) {
                out.push(HeadRow { layer, head, change, output_error });
            }
        }
    }
    out
}

/// Each head's output relative error: `full` and `got` are `[tokens, heads * d]`.
pub fn head_output_errors(full: &[f32], got: &[f32], tokens: usize, heads: usize) -> Vec<f64> {
    if tokens == 0 || heads == 0 || full.len() != got.len() || !full.len().is_multiple_of(tokens * heads) {
        return Vec::new();
    }
    let d = full.len() / (tokens * heads);
    let head_of = |x: &[f32], h: usize| -> Vec<f32> {
        x.chunks_exact(heads * d).flat_map(|row| row[h * d..][..d].to_vec()).collect()
    };
    (0..heads).map(|h| relative_error(&head_of(full, h), &head_of(got, h))).collect()
}

/// What the page says above the table: the model, the text's length, where the passes ran and how
/// the cache is held there (on the GPU every scheme is packed in its own bits,
/// `gpu::lm_forward::run_with_kv_scheme`), that the model is small.
pub fn heading(m: &Model, tokens: usize, on_gpu: bool) -> String {
    let (layers, h_kv, d) = cache_geometry(m);
    let (tier, held) = if on_gpu {
        (
            "on the GPU",
            "fp16, fp8, int8, int4 and int2 are held packed in their own bits, the bytes per token shown (fp8's \
             scale for the whole text stored once); KIVI is packed too, K in blocks of G tokens with one scale \
             and min a channel, V per token, while its recent R tokens (and K's tokens short of a whole block) \
             stay f32 rows. The attention kernel dequantises them as it reads.",
        )
    } else {
        ("on the CPU (no WebGPU here)", "Bytes per token are computed for the scheme; the cache stays f32.")
    };
    format!(
        "{}, the small model this project trained ({layers} layers, {h_kv} KV heads of width {d}), over your text's \
         {tokens} tokens: each scheme's K and V are rounded {tier} to the values the scheme stores, in every \
         layer, and the model's own pass reads them. {held} A model this small is not a large one: its figures \
         show the costs' order, not a production model's.",
        m.name
    )
}

/// The table's cells of a row: KL, top-1 agreement, loss (or why there is none).
pub fn quality_cells(q: &Quality) -> [String; 3] {
    let loss = q.loss.map_or_else(|| "(one token: nothing to predict)".into(), |l| format!("{l:.4}"));
    [format!("{:.3e}", q.kl), format!("{:.1} %", q.top1 * 100.0), loss]
}

/// The head table's cells: largest and mean change of probabilities, rows whose top key moved, the
/// output's relative error.
pub fn head_cells(h: &HeadRow, tokens: usize) -> [String; 4] {
    let c = h.change;
    [
        format!("{:.2e}", c.max_abs),
        format!("{:.2e}", c.mean_abs),
        format!("{} of {tokens}", c.top_key_changed),
        format!("{:.2e}", h.output_error),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn quality(kl: f64) -> Quality {
        Quality { kl, top1: 1.0, loss: Some(3.0) }
    }

    #[test]
    fn rows_of_the_trained_model_by_hand() {
        let m = preset("attention-lab-tiny").unwrap();
        assert_eq!(cache_geometry(m), (4, 2, 32));
        // int4-g32: 16 vectors (4 layers x 2 heads x K, V) of 16 B + 4 B = 320 B; no fixed bytes.
        let r = scheme_row(m, KvScheme::IntGroup { bits: 4, group: 32 }, quality(0.01));
        assert_eq!((r.name.as_str(), r.bytes_per_token, r.fixed_bytes), ("int4-g32", 320, 0));
    }

    #[test]
    fn the_chart_joins_each_family_by_bytes_and_floors_kl() {
        let m = preset("attention-lab-tiny").unwrap();
        let rows: Vec<SchemeRow> = KvScheme::compared(32, 16)
            .iter()
            .enumerate()
            .map(|(i, &s)| scheme_row(m, s, quality(i as f64 * 1e-3)))
            .collect();
        let c = chart(&rows, "Attention Lab tiny");
        // Floats: fp8 (2 rows, 512 B), fp16 1024, fp32 2048 (KL 0 -> the floor).
        let floats = &c.series[0].points;
        assert_eq!(floats.len(), 4);
        assert_eq!(floats[3], (2048.0, KL_FLOOR));
        assert_eq!(floats[0].0, 512.0);
        // Integers sorted by bytes: int2 192, int4 320, int8 576.
        let ints: Vec<f64> = c.series[1].points.iter().map(|p| p.0).collect();
        assert_eq!(ints, [192.0, 320.0, 576.0]);
        assert_eq!(c.series[2].points.len(), 2);
    }

    #[test]
    fn cells_as_written() {
        let q = Quality { kl: 0.012344, top1: 0.75, loss: Some(3.40101) };
        assert_eq!(quality_cells(&q), ["1.234e-2", "75.0 %", "3.4010"]);
        assert_eq!(quality_cells(&Quality { loss: None, ..q })[2], "(one token: nothing to predict)");
        let change = HeadChange { max_abs: 0.5, mean_abs: 0.125, top_key_changed: 2 };
        let h = HeadRow { layer: 0, head: 1, change, output_error: 0.03125 };
        assert_eq!(head_cells(&h, 9), ["5.00e-1", "1.25e-1", "2 of 9", "3.12e-2"]);
    }

    #[test]
    fn head_rows_by_hand() {
        // One layer, two heads of two tokens; head 1's second row moves its top key.
        let full = vec![vec![1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.75, 0.25]];
        let got = vec![vec![1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.25, 0.75]];
        // Outputs, [tokens 2, heads 2 x d 2]: head 0 is (3, 4) then (0, 0) in both passes; head 1
        // (0, 0), (3, 4) against (0, 0), (3, 5): relative error 1 / 5.
        let full_o = vec![vec![3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 3.0, 4.0]];
        let got_o = vec![vec![3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 3.0, 5.0]];
        let pass = |probs, attended| LayerOutputs { probs, attended };
        let rows = head_rows(pass(&full, &full_o), pass(&got, &got_o), 2);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].change.max_abs, rows[0].change.top_key_changed, rows[0].output_error), (0.0, 0, 0.0));
        assert_eq!((rows[1].head, rows[1].change.max_abs, rows[1].change.top_key_changed), (1, 0.5, 1));
        assert!((rows[1].output_error - 0.2).abs() < 1e-12);
        // Sizes that do not divide: nothing.
        assert!(head_output_errors(&[1.0; 3], &[1.0; 3], 2, 2).is_empty());
    }

    #[test]
    fn the_heading_names_the_tier_the_passes_ran_on() {
        let m = preset("attention-lab-tiny").unwrap();
        let gpu = heading(m, 33, true);
        assert!(gpu.contains("(4 layers, 2 KV heads of width 32), over your text's 33 tokens"));
        assert!(gpu.contains("rounded on the GPU") && gpu.contains("fp16, fp8, int8, int4 and int2 are held packed"));
        assert!(gpu.contains("KIVI is packed too, K in blocks of G tokens") && gpu.contains("stay f32 rows"));
        let cpu = heading(m, 33, false);
        assert!(cpu.contains("rounded on the CPU (no WebGPU here)") && cpu.contains("the cache stays f32"));
    }
}
