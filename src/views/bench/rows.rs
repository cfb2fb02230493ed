//! The result table's cells: one row per case, as text, and the values a script reads off it.

use crate::gpu::bench::BenchResult;
use crate::model::units::format_bytes;

/// One result's cells (kernel, n and d show as they are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowCells {
    /// `8 / 8`: query heads over KV heads.
    pub heads: String,
    /// `sliding 256`: the mask, with its window or chunk.
    pub mask: String,
    pub median_ms: String,
    pub min_ms: String,
    pub gflops: String,
    /// `42 %` of the adapter's measured FMA peak.
    pub of_peak: String,
    /// The GPU memory the case needs, after why it did not run if it did not.
    pub memory: String,
    /// For scripts: whether it ran on this device, its median time and throughput (empty when not).
    pub fits_value: String,
    pub ms_value: String,
    pub gflops_value: String,
}

/// A missing measurement.
const NONE: &str = "—";

impl RowCells {
    pub fn of(result: &BenchResult) -> Self {
        let ms = |ms: Option<f64>| ms.map_or_else(|| NONE.to_string(), |ms| format!("{ms:.2}"));
        let memory = format_bytes(u128::from(result.peak_bytes));
        RowCells {
            heads: format!("{} / {}", result.h_q, result.h_kv),
            mask: if result.window > 0 {
                format!("{} {}", result.mask, result.window)
            } else {
                result.mask.to_string()
            },
            median_ms: ms(result.ms_median),
            min_ms: ms(result.ms_min),
            gflops: result.gflops.map_or_else(|| NONE.into(), |g| format!("{g:.2}")),
            of_peak: result.fraction_of_peak().map_or_else(|| NONE.into(), |f| format!("{:.0} %", f * 100.0)),
            memory: match &result.note {
                Some(note) => format!("{note} ({memory})"),
                None => memory,
            },
            fits_value: result.ms_median.is_some().to_string(),
            ms_value: result.ms_median.map(|m| m.to_string()).unwrap_or_default(),
            gflops_value: result.gflops.map(|g| g.to_string()).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(ms_median: Option<f64>, gflops: Option<f64>) -> BenchResult {
        BenchResult {
            kernel: "tiled",
            n: 1024,
            h_q: 32,
            h_kv: 8,
            d: 128,
            mask: "sliding",
            window: 256,
            ms_median,
            ms_min: ms_median.map(|m| m - 0.2),
            gflops,
            fma_gflops: 400.0,
            peak_bytes: 4 << 20,
            note: None,
        }
    }

    #[test]
    fn a_measured_case_reads_as_a_fraction_of_the_fma_peak() {
        let cells = RowCells::of(&result(Some(1.25), Some(168.4)));
        assert_eq!((cells.heads.as_str(), cells.mask.as_str()), ("32 / 8", "sliding 256"));
        assert_eq!((cells.median_ms.as_str(), cells.min_ms.as_str()), ("1.25", "1.05"));
        assert_eq!((cells.gflops.as_str(), cells.of_peak.as_str()), ("168.40", "42 %"));
        assert_eq!(cells.memory, "4.19 MB (4.00 MiB)");
        assert_eq!(
            (cells.fits_value.as_str(), cells.ms_value.as_str(), cells.gflops_value.as_str()),
            ("true", "1.25", "168.4")
        );
    }

    #[test]
    fn a_case_that_does_not_fit_says_why_and_leaves_its_values_empty() {
        let mut r = result(None, None);
        (r.mask, r.window, r.note) = ("causal", 0, Some("does not fit".into()));
        let cells = RowCells::of(&r);
        assert_eq!(cells.mask, "causal");
        assert_eq!([&cells.median_ms, &cells.min_ms, &cells.gflops, &cells.of_peak], ["—"; 4]);
        assert_eq!(cells.memory, "does not fit (4.19 MB (4.00 MiB))");
        assert_eq!(
            (cells.fits_value.as_str(), cells.ms_value.as_str(), cells.gflops_value.as_str()),
            ("false", "", "")
        );
    }
}
