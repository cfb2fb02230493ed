//! The one memory budget every job of the page shares, checked before anything is allocated. On
//! wasm32 the page has 4 GiB of memory at most, and a failed allocation aborts it without a word (the
//! panic hook never runs), so a job asks first whether its bytes fit.

use crate::model::units::format_bytes;

/// Bytes one job may hold, on the host and on the GPU alike: a quarter of wasm32's 4 GiB, so a job,
/// the page and the browser's own copies fit together.
pub const JOB_BYTES: u64 = 1 << 30;

/// The job's limit on this adapter: [`JOB_BYTES`], less where the adapter's largest buffer is smaller
/// (`None`: no GPU, the host limit only).
pub fn job_limit(max_buffer_bytes: Option<u64>) -> u64 {
    max_buffer_bytes.map_or(JOB_BYTES, |b| b.min(JOB_BYTES))
}

/// Why a job is refused: what it needed and the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverBudget {
    pub bytes: u64,
    pub limit: u64,
}

impl OverBudget {
    /// A sentence for a notice: `what` is the job ("These 32 heads of 65,536 tokens").
    pub fn text(&self, what: &str) -> String {
        format!(
            "{what} would need {} of memory, more than the {} one job may use here (a page has 4 GiB in all)",
            format_bytes(self.bytes.into()),
            format_bytes(self.limit.into())
        )
    }
}

/// `Ok` when `bytes` fit in `limit`.
pub fn check(bytes: u64, limit: u64) -> Result<(), OverBudget> {
    if bytes <= limit { Ok(()) } else { Err(OverBudget { bytes, limit }) }
}

/// `a * b * …` in `u64`, saturating: sizes from a link can be large enough to wrap.
pub fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_a_gibibyte_or_the_adapters_largest_buffer() {
        assert_eq!(job_limit(None), 1_073_741_824);
        assert_eq!(job_limit(Some(256 << 20)), 268_435_456);
        assert_eq!(job_limit(Some(u64::MAX)), JOB_BYTES);
    }

    #[test]
    fn over_the_limit_is_refused_with_both_sizes() {
        assert_eq!(check(JOB_BYTES, JOB_BYTES), Ok(()));
        let over = check(JOB_BYTES + 1, JOB_BYTES).unwrap_err();
        let text = over.text("This job");
        assert!(text.starts_with("This job would need 1.07 GB"), "{text}");
        assert!(text.contains("than the 1.07 GB"), "{text}");
        assert_eq!(product(&[1 << 40, 1 << 40]), u64::MAX, "saturates instead of wrapping");
        assert_eq!(product(&[65_536, 128, 4]), 33_554_432);
    }
}
