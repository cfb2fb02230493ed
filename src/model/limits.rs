//! The page's limits, in one place: the widest head the GPU kernels take, the memory one job may
//! hold, and the work the CPU reference may do in one call and between two yields to the browser.
//! Each is checked by the one function beside it.
//!
//! Memory: on wasm32 the page has 4 GiB at most, and a failed allocation aborts it without a word
//! (the panic hook never runs), so a job asks first whether its bytes fit. (The KV view's GPU memory,
//! URL `budget`, is the visitor's choice, not a limit of the page: see `model::budget`.)

use crate::model::units::format_bytes;

/// The widest head the kernels take: 1,024, so MLA's absorbed 576, Gemma 4's global 512 and imported
/// configs up to 1,024 run on the GPU. Their private arrays are sized for the head, and WGSL
/// allows 8 KiB of them per function, so past [`NARROW_HEAD_DIM`] the forward kernels keep one row
/// per invocation and, where its query and output rows would not fit together, re-read the query
/// from its buffer (see `gpu::flash_tiles`). Configs may declare heads up to
/// `model::config::bounds::MAX_CONFIG_HEAD_DIM`, and the app runs wider ones on the CPU.
pub const KERNEL_MAX_HEAD_DIM: u32 = 1024;

/// The widest head the kernels ran before they took wider ones: up to it, their code and tiles are
/// what they were (several rows per invocation on CPU adapters), and the CPU reference's work
/// limit is counted at it.
pub const NARROW_HEAD_DIM: u32 = 256;

/// Whether the GPU kernels take heads `head_dim` wide.
pub const fn kernels_take_head_dim(head_dim: u32) -> bool {
    head_dim <= KERNEL_MAX_HEAD_DIM
}

/// Bytes one job may hold, on the host and on the GPU alike: a quarter of wasm32's 4 GiB, so a job,
/// the page and the browser's own copies fit together.
pub const JOB_MAX_BYTES: u64 = 1 << 30;

/// The job's limit on this adapter: [`JOB_MAX_BYTES`], less where the adapter's largest buffer is
/// smaller (`None`: no GPU, the host limit only).
pub fn job_limit(max_buffer_bytes: Option<u64>) -> u64 {
    max_buffer_bytes.map_or(JOB_MAX_BYTES, |b| b.min(JOB_MAX_BYTES))
}

/// Largest number of (query, key) score pairs the CPU tier computes in one call (it is a teaching
/// fallback).
pub const CPU_MAX_SCORE_PAIRS: u64 = 4_000_000;
/// Largest number of multiply-adds one CPU call may take (pairs times head width): what the pair
/// bound allows at a 256-wide head, so wider heads cannot hold the page for longer.
pub const CPU_MAX_MULTIPLY_ADDS: u64 = CPU_MAX_SCORE_PAIRS * NARROW_HEAD_DIM as u64;
/// Multiply-adds of CPU-reference work between two yields to the browser's event loop: a few ms of
/// wasm, so input and rendering go on while a large fallback job runs (a job may take seconds).
pub const CPU_SLICE_MULTIPLY_ADDS: u64 = 2_000_000;

/// Multiply-adds of `Q·Kᵀ` in one live-attention engine call on the GPU: about 60 ms of a 9 GFLOP/s
/// software GPU, far less on a real one (a longer head is cut into slices of rows).
pub const GPU_BATCH_MULTIPLY_ADDS: u64 = 1 << 28;
/// The same on the CPU reference, which blocks the page while it runs: one small head's worth.
pub const CPU_BATCH_MULTIPLY_ADDS: u64 = 1 << 21;
/// Largest Q buffer of one live-attention batch (floats).
pub const BATCH_MAX_Q_FLOATS: u64 = 16 << 20;

/// Why a job is refused: what it needed and the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverJobLimit {
    pub bytes: u64,
    pub limit: u64,
}

/// "would need X of memory, more than the Y one job may use here": the caller names the job before it.
impl std::fmt::Display for OverJobLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "would need {} of memory, more than the {} one job may use here (a page has 4 GiB in all)",
            format_bytes(self.bytes.into()),
            format_bytes(self.limit.into())
        )
    }
}

impl std::error::Error for OverJobLimit {}

/// `Ok` when a job's `bytes` fit in `limit` ([`job_limit`]).
pub fn check_job_bytes(bytes: u64, limit: u64) -> Result<(), OverJobLimit> {
    if bytes <= limit { Ok(()) } else { Err(OverJobLimit { bytes, limit }) }
}

/// `a * b * …` in `u64`, saturating: sizes from a link can be large enough to wrap.
pub fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_take_heads_up_to_1024_wide() {
        for d in [256, 320, 512, 576, 1024] {
            assert!(kernels_take_head_dim(d), "{d}");
        }
        assert!(!kernels_take_head_dim(1025));
    }

    #[test]
    fn the_cpu_work_limit_is_the_pair_limit_at_a_256_wide_head() {
        // 4,000,000 pairs x 256 = 1,024,000,000 multiply-adds (the engine's checks are tested there).
        assert_eq!(CPU_MAX_MULTIPLY_ADDS, 1_024_000_000);
    }

    #[test]
    fn the_job_limit_is_a_gibibyte_or_the_adapters_largest_buffer() {
        assert_eq!(job_limit(None), 1_073_741_824);
        assert_eq!(job_limit(Some(256 << 20)), 268_435_456);
        assert_eq!(job_limit(Some(u64::MAX)), JOB_MAX_BYTES);
    }

    #[test]
    fn over_the_limit_is_refused_with_both_sizes() {
        assert_eq!(check_job_bytes(JOB_MAX_BYTES, JOB_MAX_BYTES), Ok(()));
        let over = check_job_bytes(JOB_MAX_BYTES + 1, JOB_MAX_BYTES).unwrap_err();
        let text = format!("This job {over}");
        assert!(text.starts_with("This job would need 1.07 GB"), "{text}");
        assert!(text.contains("than the 1.07 GB"), "{text}");
        assert_eq!(product(&[1 << 40, 1 << 40]), u64::MAX, "saturates instead of wrapping");
        assert_eq!(product(&[65_536, 128, 4]), 33_554_432);
    }
}
