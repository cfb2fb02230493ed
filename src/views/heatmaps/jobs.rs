//! What an export of the explorer can recompute (how a job is cut up for the GPU is the live-attention
//! service's, [`crate::live_attention::plan`]).

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
}
