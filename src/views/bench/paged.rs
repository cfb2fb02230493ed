//! The benchmark view's paged-decode rows ([`crate::gpu::bench_paged`]): what the page says of them.

use crate::gpu::bench_lm::OpResult;
use crate::gpu::bench_paged::{CONTIGUOUS_APP, PAGED_SCATTERED};

/// The paged step's time over the contiguous one the app decodes with (median and fastest run), once
/// both rows are there.
pub fn paged_over_contiguous(rows: &[OpResult]) -> Option<(f64, f64)> {
    let find = |name: &str| rows.iter().find(|r| r.name == name);
    let (flat, paged) = (find(CONTIGUOUS_APP)?, find(PAGED_SCATTERED)?);
    (flat.ms_median > 0.0 && flat.ms_min > 0.0).then(|| (paged.ms_median / flat.ms_median, paged.ms_min / flat.ms_min))
}

/// The sentence under the rows.
pub fn paged_summary(rows: &[OpResult]) -> Option<String> {
    let (median, fastest) = paged_over_contiguous(rows)?;
    Some(format!(
        "Reading K and V through the page table, pages scattered over the pool, took {median:.2}x the time of the \
         app's contiguous decode (median; {fastest:.2}x for the fastest runs)."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, ms_median: f64, ms_min: f64) -> OpResult {
        OpResult {
            name: name.into(),
            shape: "1 query x 4096 cached, 32/8 heads, d 128".into(),
            launches: 1,
            ms_median,
            ms_min,
            gflops: 1.0,
            fma_gflops: 10.0,
        }
    }

    #[test]
    fn the_ratio_is_paged_over_the_apps_contiguous_decode() {
        let rows = [
            row(CONTIGUOUS_APP, 111.6, 49.5),
            row("decode contiguous (tiled)", 80.0, 40.0),
            row(PAGED_SCATTERED, 60.6, 38.7),
        ];
        let (median, fastest) = paged_over_contiguous(&rows).unwrap();
        // 60.6 / 111.6 = 0.5430; 38.7 / 49.5 = 0.7818.
        assert!((median - 0.543_01).abs() < 1e-4 && (fastest - 0.781_82).abs() < 1e-4);
        assert_eq!(
            paged_summary(&rows).unwrap(),
            "Reading K and V through the page table, pages scattered over the pool, took 0.54x the time of the app's \
             contiguous decode (median; 0.78x for the fastest runs)."
        );
        // Until the paged row is in (or with a zero time) there is nothing to say.
        assert_eq!(paged_summary(&rows[..2]), None);
        assert_eq!(paged_over_contiguous(&[row(CONTIGUOUS_APP, 0.0, 0.0), row(PAGED_SCATTERED, 1.0, 1.0)]), None);
    }
}
