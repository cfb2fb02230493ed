//! How the explorer's work is cut up for the GPU: heads in batches, long heads in slices of rows,
//! cross-attention in chunks of queries; and what an export can recompute.

/// Progress and timings the page shows (and the benchmark reads).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Progress {
    pub job: u64,
    pub done: usize,
    pub total: usize,
    /// Heads in the batch being computed, and the fraction of it done (long heads come in slices).
    pub batch: usize,
    pub partial: f64,
    pub finished: bool,
    pub error: Option<String>,
    /// From the request to the last head's pixels.
    pub total_ms: f64,
    /// Awaiting the engine (uploads, kernels, readback).
    pub kernel_ms: f64,
    /// Building the heads' inputs (embeddings, projections, positions) on the CPU, where the GPU
    /// waited for them (later batches' inputs are built while the GPU computes).
    pub inputs_ms: f64,
    /// Handing results to the heatmaps and drawing them.
    pub draw_ms: f64,
    pub on_gpu: bool,
    pub note: Option<String>,
}

/// Splits query heads into GPU batches: heads of one KV group go together (they share its K/V), and a
/// batch stays under `max_work` (multiply-adds of `Q·Kᵀ`, about what the GPU does per batch) and
/// `max_q_floats` (the Q buffer), so long sequences show progress head by head.
pub fn batches(
    heads: &[u32],
    group: u32,
    per_head_work: u64,
    per_head_q_floats: u64,
    max_work: u64,
    max_q_floats: u64,
) -> Vec<Vec<u32>> {
    let g = group.max(1);
    let mut out: Vec<Vec<u32>> = Vec::new();
    for &h in heads {
        let fits = out.last().is_some_and(|b: &Vec<u32>| {
            let next = b.len() as u64 + 1;
            b[0] / g == h / g
                && next * per_head_work <= max_work.max(per_head_work)
                && next * per_head_q_floats <= max_q_floats.max(per_head_q_floats)
        });
        match out.last_mut() {
            Some(b) if fits => b.push(h),
            _ => out.push(vec![h]),
        }
    }
    out
}

/// Query rows in chunks of at most `n_kv`: the kernels take queries as the last rows of the keys, so
/// cross-attention with more queries than keys (full mask: rows are independent) runs in pieces.
pub fn query_chunks(n_q: u32, n_kv: u32) -> Vec<(u32, u32)> {
    let step = n_kv.max(1);
    (0..n_q.div_ceil(step)).map(|c| (c * step, (n_q - c * step).min(step))).collect()
}

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

    #[test]
    fn batches_follow_groups_and_budgets() {
        let heads: Vec<u32> = (0..8).collect();
        // Group of 4, room for everything: one batch per KV group.
        assert_eq!(batches(&heads, 4, 10, 10, 1000, 1000), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // Work for two heads per batch.
        assert_eq!(batches(&heads, 4, 10, 10, 20, 1000), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // A head bigger than the budget still runs, alone.
        assert_eq!(batches(&[0, 1], 2, 50, 10, 20, 1000), vec![vec![0], vec![1]]);
        // Non-contiguous selections across groups.
        assert_eq!(batches(&[1, 3, 6], 4, 1, 1, 100, 100), vec![vec![1, 3], vec![6]]);
    }

    #[test]
    fn cross_attention_queries_come_in_chunks_of_the_keys() {
        assert_eq!(query_chunks(5, 2), vec![(0, 2), (2, 2), (4, 1)]);
        assert_eq!(query_chunks(3, 7), vec![(0, 3)]);
    }
}
