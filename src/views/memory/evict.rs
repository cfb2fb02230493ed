//! What the memory view shows of eviction (`tech=evict`): one row per policy at the link's K (the
//! bytes the attention read, KL, top-1 agreement, loss, attention mass thrown away), the chart of KL
//! against K for every policy, the sizes measured, and the grid of which keys the chosen policy kept
//! at each step.

use crate::lm::forward::EvictionRecord;
use crate::lm::kv_quality::Quality;
use crate::model::Model;
use crate::model::kv_evict::{EvictPolicy, POLICIES, POOL_RADIUS, bytes_at_last_step, bytes_read, observation, sinks};
use crate::model::mask::Mask;
use crate::model::plot::{Axis, Scale};
use crate::model::schedule::LayerKind;
use crate::views::chart::{LineChartData, RefLine, Series};
use crate::views::memory::rows::{KL_FLOOR, cache_geometry};

/// One policy at one K, measured.
#[derive(Clone, Debug, PartialEq)]
pub struct EvictRow {
    pub policy: EvictPolicy,
    pub keep: usize,
    /// Bytes the attention read to decode the text's last token, every layer (`data-bytes-per-token`).
    pub bytes_last: u64,
    /// Bytes the attention read over the whole text.
    pub bytes_read: u64,
    pub quality: Quality,
    /// Full-cache attention mass on dropped keys, per query, averaged over heads and layers.
    pub dropped: f64,
}

pub fn evict_row(m: &Model, record: &EvictionRecord, quality: Quality) -> EvictRow {
    let (_, h_kv, d) = cache_geometry(m);
    EvictRow {
        policy: record.policy,
        keep: record.keep,
        bytes_last: bytes_at_last_step(&record.kept, h_kv, d),
        bytes_read: bytes_read(&record.kept, h_kv, d),
        quality,
        dropped: record.mean_dropped(),
    }
}

/// The sizes the chart measures: 4, 8, 16 and 32 where the text is longer (a K at or past the
/// text's length evicts nothing), and the link's K.
pub fn chart_sizes(keep: u32, tokens: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = [4, 8, 16, 32].into_iter().filter(|&k| k < tokens).collect();
    sizes.push(keep as usize);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The passes to run, in the table's order: every policy at every chart size, keep-everything once
/// (at the link's K, where it is the row the others are compared with).
pub fn planned_runs(keep: u32, tokens: usize) -> Vec<(usize, EvictPolicy)> {
    let sizes = chart_sizes(keep, tokens);
    let each = |size: usize| POLICIES.into_iter().filter(move |&p| p != EvictPolicy::Full || size == keep as usize);
    sizes.into_iter().flat_map(|size| each(size).map(move |p| (size, p))).collect()
}

/// What a policy keeps of K tokens, in words for the page.
pub fn policy_words(policy: EvictPolicy, keep: usize) -> String {
    let recent = keep - keep / 2;
    match policy {
        EvictPolicy::Full => "every token the layer's own mask lets through".into(),
        EvictPolicy::Window => format!("the most recent {keep} tokens"),
        EvictPolicy::Sinks => {
            let s = sinks(keep);
            format!("the first {s} tokens (sinks) and the most recent {}", keep - s)
        }
        EvictPolicy::HeavyHitters => {
            format!("the most recent {recent} and the {} older ones with the most attention so far", keep / 2)
        }
        EvictPolicy::SnapKv => format!(
            "the most recent {w} and the older ones the latest {w} queries attended to most (max-pooled over ±{POOL_RADIUS} positions)",
            w = observation(keep)
        ),
    }
}

/// The sliding layers' own window, if the model has any (the smallest).
pub fn sliding_window(m: &Model) -> Option<u64> {
    m.schedule
        .layers()
        .iter()
        .filter_map(|k| if let LayerKind::Sliding { window_tokens } = k { Some(*window_tokens) } else { None })
        .min()
}

/// What the page says above the rows.
pub fn heading(m: &Model, tokens: usize, keep: u32, on_gpu: bool) -> String {
    let window = sliding_window(m).map_or_else(String::new, |w| {
        format!(
            " Its sliding layers keep only {w} tokens anyway: a K of {w} or more changes only its full-attention \
             layers, so the chart's sizes (4 to 32) stay below {w}."
        )
    });
    let tier = if on_gpu {
        "on the GPU: the attention kernel reads each query's kept entries through an index list, which the \
         policy writes layer by layer from the Q and K the GPU computed"
    } else {
        "on the CPU (no WebGPU here)"
    };
    format!(
        "{}, the small model this project trained, decoding your text's {tokens} tokens one at a time (teacher \
         forced, {tier}): at each step every layer's cache admits the new token, evicts down to K = {keep} by \
         the policy, and every head of the layer reads only the kept keys and values (one kept set per layer, \
         attention scores summed over its heads). A policy decides from what it has seen so far only.{window} \
         Bytes are the f32 K and V the attention read. Positions before K evict nothing, and count in the \
         averages. A model this small is not a large one: its figures show the costs' order, not a production \
         model's.",
        m.name
    )
}

/// The row's cells beside the quality ones: K, bytes at the last step, bytes over the text, mass
/// thrown away.
pub fn evict_cells(r: &EvictRow) -> [String; 4] {
    [r.keep.to_string(), r.bytes_last.to_string(), r.bytes_read.to_string(), format!("{:.1} %", r.dropped * 100.0)]
}

/// The chart's lines: each evicting policy's KL (log axis, floored) against K.
const LINES: [(EvictPolicy, &str, &str); 4] = [
    (EvictPolicy::Window, "sliding window", "s0"),
    (EvictPolicy::Sinks, "sinks + window (StreamingLLM)", "s1"),
    (EvictPolicy::HeavyHitters, "heavy hitters (H2O)", "s2"),
    (EvictPolicy::SnapKv, "observation window (SnapKV-style)", "s3"),
];

pub fn chart(rows: &[EvictRow], model: &Model) -> LineChartData {
    let series = LINES
        .iter()
        .map(|&(policy, label, class)| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.policy == policy)
                .map(|r| (r.keep as f64, r.quality.kl.max(KL_FLOOR)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { label: label.into(), class, points }
        })
        .collect();
    let most_keep = rows.iter().map(|r| r.keep).max().unwrap_or(1) as f64;
    let most_kl = rows.iter().map(|r| r.quality.kl).fold(KL_FLOOR * 10.0, f64::max);
    let x = Scale::new(Axis::Linear, 0.0, most_keep * 1.05);
    let y = Scale::new(Axis::Log, KL_FLOOR, 10f64.powf(most_kl.log10().ceil()));
    let v_lines = sliding_window(model)
        .filter(|&w| (w as f64) < x.max)
        .map(|w| RefLine { value: w as f64, label: format!("sliding layers' window ({w})"), class: "ctx" })
        .into_iter()
        .collect();
    LineChartData {
        x_ticks: x.decimal_ticks(6).into_iter().map(|t| (t, format!("{t:.0}"))).collect(),
        y_ticks: y.decimal_ticks(8).into_iter().map(|t| (t, format!("{t:.0e}"))).collect(),
        x,
        y,
        series,
        h_lines: Vec::new(),
        v_lines,
        x_title: "kept tokens per layer (K)".into(),
        y_title: "KL from keeping everything (nats, log)".into(),
        description: format!(
            "KL divergence of {}'s next-token distributions under each eviction policy from keeping every token, \
             against the tokens each layer keeps.",
            model.name
        ),
    }
}

/// What one cell of the kept grid shows: query t (row) and key j (column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptCell {
    /// Read from the cache.
    Kept,
    /// The layer's mask lets it through, but the policy evicted it.
    Dropped,
    /// A later token, or one outside the layer's own window.
    Outside,
}

/// The grid of one layer, row-major `[tokens, tokens]`: `kept[t]` are query t's kept keys, `lo(t)`
/// the first key its mask lets through.
pub fn kept_grid(kept: &[Vec<u32>], lo: impl Fn(u32) -> u32) -> Vec<KeptCell> {
    let t = kept.len();
    let mut cells = vec![KeptCell::Outside; t * t];
    for (i, row) in kept.iter().enumerate() {
        for j in lo(i as u32) as usize..=i {
            cells[i * t + j] = KeptCell::Dropped;
        }
        for &j in row {
            cells[i * t + j as usize] = KeptCell::Kept;
        }
    }
    cells
}

/// One layer's kept keys under the chosen policy, as the page draws them.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerGrid {
    pub layer: usize,
    pub tokens: usize,
    pub pixels: Vec<u32>,
    /// The keys the last query read.
    pub last_kept: Vec<u32>,
    /// The attention mass the full cache would have given the dropped keys, per query, averaged.
    pub dropped: f64,
    /// The same for each query: the full cache's attention (the mean of the layer's heads) on the
    /// keys it dropped.
    pub dropped_rows: Vec<f64>,
}

/// Every layer's grid of a run, `masks` the layers' own masks (keys outside a window are not
/// the policy's drops), each cell shaded by the attention the full cache gives it.
pub fn layer_grids(masks: &[Mask], record: &EvictionRecord) -> Vec<LayerGrid> {
    let layers = record.kept.iter().zip(masks).zip(&record.dropped).enumerate();
    layers
        .map(|(layer, ((kept, mask), &dropped))| {
            let tokens = kept.len();
            let cells = kept_grid(kept, |t| mask.key_range(t, tokens as u32).0);
            let full = record.full.get(layer).map_or(&[][..], Vec::as_slice);
            let weight = |i: usize, j: usize| full.get(i).and_then(|row| row.get(j)).copied().unwrap_or(0.0);
            let weights: Vec<f64> =
                (0..tokens * tokens).map(|c| weight(c / tokens.max(1), c % tokens.max(1))).collect();
            let dropped_rows = (0..tokens)
                .map(|i| {
                    (0..tokens)
                        .filter(|&j| cells[i * tokens + j] == KeptCell::Dropped)
                        .map(|j| weight(i, j))
                        .fold(0.0, |a, w| a + w)
                })
                .collect();
            let last_kept = kept.last().cloned().unwrap_or_default();
            LayerGrid { layer, tokens, pixels: grid_pixels(&cells, &weights), last_kept, dropped, dropped_rows }
        })
        .collect()
}

/// RGBA pixels (little-endian words, as a canvas takes them) of a grid: kept dark blue, dropped
/// orange, each paler the less attention the full cache gives the key (`weights`, per cell: full
/// colour at 1, a quarter of it at 0, by the square root between, so small weights still show);
/// outside light grey.
pub fn grid_pixels(cells: &[KeptCell], weights: &[f64]) -> Vec<u32> {
    let rgba = |[r, g, b]: [u32; 3]| r | (g << 8) | (b << 16) | (255 << 24);
    let shaded = |base: [u32; 3], w: f64| {
        let shade = 0.25 + 0.75 * w.clamp(0.0, 1.0).sqrt();
        rgba(base.map(|c| (255.0 - f64::from(255 - c) * shade).round() as u32))
    };
    cells
        .iter()
        .zip(weights.iter().copied().chain(std::iter::repeat(0.0)))
        .map(|(c, w)| match c {
            KeptCell::Kept => shaded(KEPT_RGB, w),
            KeptCell::Dropped => shaded(DROPPED_RGB, w),
            KeptCell::Outside => rgba([0xee; 3]),
        })
        .collect()
}

const KEPT_RGB: [u32; 3] = [0x1d, 0x3d, 0x8f];
const DROPPED_RGB: [u32; 3] = [0xe7, 0x6f, 0x51];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    fn record(policy: EvictPolicy, keep: usize) -> EvictionRecord {
        // Four layers, three steps, keeping 1, 2, then 2 tokens; 0.125 dropped in each layer.
        let kept = vec![vec![0], vec![0, 1], vec![1, 2]];
        EvictionRecord { policy, keep, kept: vec![kept; 4], dropped: vec![0.125; 4], full: Vec::new() }
    }

    #[test]
    fn a_row_by_hand() {
        let m = preset("attention-lab-tiny").unwrap();
        let q = Quality { kl: 0.5, top1: 0.75, loss: Some(3.0) };
        let r = evict_row(m, &record(EvictPolicy::Window, 2), q);
        // 512 B a kept token a layer (2 KV heads x 32 x K and V x 4 B): last step 4 layers x 2 tokens;
        // over the text 4 x (1 + 2 + 2).
        assert_eq!((r.bytes_last, r.bytes_read, r.dropped), (4 * 2 * 512, 4 * 5 * 512, 0.125));
        assert_eq!(evict_cells(&r), ["2", "4096", "10240", "12.5 %"]);
    }

    #[test]
    fn sizes_below_the_text_and_the_link_s_k() {
        assert_eq!(chart_sizes(8, 12), [4, 8]);
        assert_eq!(chart_sizes(6, 100), [4, 6, 8, 16, 32]);
        assert_eq!(chart_sizes(48, 3), [48]);
    }

    #[test]
    fn the_heading_names_the_sliding_window() {
        let m = preset("attention-lab-tiny").unwrap();
        assert_eq!(sliding_window(m), Some(64));
        assert!(heading(m, 98, 16, false).contains("sliding layers keep only 64 tokens anyway"));
        assert!(heading(m, 98, 16, false).contains("on the CPU (no WebGPU here)"));
        assert!(heading(m, 98, 16, true).contains("reads each query's kept entries through an index list"));
    }

    #[test]
    fn the_chart_joins_each_policy_by_k() {
        let m = preset("attention-lab-tiny").unwrap();
        let q = |kl| Quality { kl, top1: 1.0, loss: None };
        let mut rows = vec![evict_row(m, &record(EvictPolicy::Full, 8), q(0.0))];
        rows.push(evict_row(m, &record(EvictPolicy::Sinks, 8), q(0.25)));
        rows.push(evict_row(m, &record(EvictPolicy::Sinks, 4), q(0.5)));
        let c = chart(&rows, m);
        assert_eq!(c.series.len(), 4);
        assert_eq!(c.series[1].points, [(4.0, 0.5), (8.0, 0.25)]);
        assert!(c.series[0].points.is_empty());
        // K up to 8: the sliding window of 64 is off the chart.
        assert!(c.v_lines.is_empty());
    }

    #[test]
    fn the_grid_by_hand() {
        // Three queries, a window of 2 (lo = t - 1): query 2 keeps [2] only, so key 1 is dropped and
        // key 0 is outside its window.
        let kept = vec![vec![0], vec![0, 1], vec![2]];
        let cells = kept_grid(&kept, |t| t.saturating_sub(1));
        use KeptCell::{Dropped as D, Kept as K, Outside as O};
        assert_eq!(cells, [K, O, O, K, K, O, O, D, K]);
        assert_eq!(grid_pixels(&[K], &[1.0])[0].to_le_bytes(), [0x1d, 0x3d, 0x8f, 255]);
    }

    #[test]
    fn every_policy_runs_at_every_size_and_keep_everything_once() {
        // A 20-token text: sizes 4, 8, 16 (32 is past the text) and the link's 12.
        let runs = planned_runs(12, 20);
        let sizes: Vec<usize> = runs.iter().map(|r| r.0).collect();
        assert_eq!(runs.len(), 4 * (POLICIES.len() - 1) + 1);
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            runs.iter().filter(|r| r.1 == EvictPolicy::Full).collect::<Vec<_>>(),
            vec![&(12, EvictPolicy::Full)]
        );
    }

    #[test]
    fn a_layers_grid_marks_kept_dropped_and_outside_its_window() {
        // Three queries. Layer 0 (causal): the last one reads keys 0 and 2 (key 1 dropped). Layer 1,
        // a window of 2 tokens (its own mask): the last one reads key 2 only, key 1 dropped inside its
        // window and key 0 outside it.
        let kept_0 = vec![vec![0], vec![0, 1], vec![0, 2]];
        let kept_1 = vec![vec![0], vec![0, 1], vec![2]];
        // The full cache's attention: layer 0's row 2 gives keys 0, 1, 2 a quarter, a quarter and a
        // half; layer 1's row 2 sees only keys 1 and 2, a half each.
        let full_0 = vec![vec![1.0], vec![0.5, 0.5], vec![0.25, 0.25, 0.5]];
        let full_1 = vec![vec![1.0], vec![0.5, 0.5], vec![0.0, 0.5, 0.5]];
        let record = EvictionRecord {
            policy: EvictPolicy::Window,
            keep: 2,
            kept: vec![kept_0, kept_1],
            dropped: vec![0.25 / 3.0, 0.5 / 3.0],
            full: vec![full_0, full_1],
        };
        let grids = layer_grids(&[Mask::Causal, Mask::Sliding { window_tokens: 2 }], &record);
        assert_eq!(grids.len(), 2);
        assert_eq!((grids[0].tokens, grids[0].last_kept.clone(), grids[1].last_kept.clone()), (3, vec![0, 2], vec![2]));
        // Row 2 dropped key 1: worth 0.25 in layer 0, 0.5 in layer 1. Each layer's rows average to its
        // dropped mass.
        assert_eq!(grids[0].dropped_rows, [0.0, 0.0, 0.25]);
        assert_eq!(grids[1].dropped_rows, [0.0, 0.0, 0.5]);
        for (grid, want) in grids.iter().zip(&record.dropped) {
            let mean = grid.dropped_rows.iter().sum::<f64>() / grid.dropped_rows.len() as f64;
            assert!((mean - want).abs() < 1e-12 && (grid.dropped - want).abs() < 1e-12, "{mean} {}", grid.dropped);
        }
        // Layer 1's row 2: key 0 outside its window, key 1 dropped, key 2 kept.
        let cells: Vec<u32> = grids[1].pixels[6..9].to_vec();
        assert_eq!(
            cells,
            [
                grid_pixels(&[KeptCell::Outside], &[0.0])[0],
                grid_pixels(&[KeptCell::Dropped], &[0.5])[0],
                grid_pixels(&[KeptCell::Kept], &[0.5])[0]
            ]
        );
        let px = |c, w| grid_pixels(&[c], &[w])[0];
        // Row 2 of layer 0: kept, dropped, kept, each at its weight; row 0 sees no later key.
        let row = [px(KeptCell::Kept, 0.25), px(KeptCell::Dropped, 0.25), px(KeptCell::Kept, 0.5)];
        assert_eq!(grids[0].pixels[6..9], row);
        assert_eq!(grids[0].pixels[2], px(KeptCell::Outside, 0.0));
        // Weight 1: the full colour; 0.25: shade 0.25 + 0.75 x 0.5 = 0.625, so red 0x1d = 29 becomes
        // 255 - 226 x 0.625 = 113.75 -> 114, green 61 -> 133.75 -> 134, blue 143 -> 185; 0: a quarter.
        assert_eq!(px(KeptCell::Kept, 1.0), 0x1d | (0x3d << 8) | (0x8f << 16) | (255 << 24));
        assert_eq!(px(KeptCell::Kept, 0.25), 114 | (134 << 8) | (185 << 16) | (255 << 24));
        // Dropped red 0xe7 = 231 at weight 0: 255 - 24 x 0.25 = 249.
        assert_eq!(px(KeptCell::Dropped, 0.0) & 0xff, 249);
    }

    #[test]
    fn each_policy_in_words() {
        assert_eq!(policy_words(EvictPolicy::Sinks, 8), "the first 4 tokens (sinks) and the most recent 4");
        assert_eq!(policy_words(EvictPolicy::Window, 16), "the most recent 16 tokens");
        assert_eq!(
            policy_words(EvictPolicy::HeavyHitters, 9),
            "the most recent 5 and the 4 older ones with the most attention so far"
        );
    }
}
