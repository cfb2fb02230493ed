//! The benchmark's status lines: the adapter (and why a software one's timings are not a GPU's), why
//! it cannot run, its progress through the cases, and the measured FMA peak.

use std::fmt;

use crate::gpu::bench::BenchCase;
use crate::gpu::context::AdapterSummary;

pub const MEASURING_PEAK: &str = "Measuring this GPU's FMA throughput…";

/// The adapter and the timing source, and for a CPU-emulated adapter why its timings mislead.
pub fn adapter_text(adapter: &AdapterSummary, gpu_timestamps: bool) -> String {
    let timing = if gpu_timestamps { "GPU timestamp queries" } else { "wall clock around submit and readback" };
    let software_note = if adapter.is_cpu {
        " This is a CPU-emulated GPU: timings are not representative of real hardware. The tiled kernel is \
         timed in its unrolled form, the fastest here; compiling it takes seconds per head width (not \
         timed), which is why the explorer uses its loop form (a loaded model's passes switch to the \
         unrolled subgroup form for heads up to 32 wide, and their probability rows to the row softmax's \
         fast form at any width, once built after their first pass)."
    } else {
        ""
    };
    format!("Adapter: {adapter}. Timing: {timing}.{software_note}")
}

/// Why the benchmark cannot run on the CPU tier.
pub fn unavailable_text(reason: &str) -> String {
    format!("The benchmark times GPU kernels, and there is no WebGPU here ({reason}).")
}

pub fn run_label(case_count: usize) -> String {
    format!("Run {case_count} cases")
}

pub fn peak_failed_text(error: impl fmt::Display) -> String {
    format!("Could not measure the GPU: {error}")
}

pub fn fma_text(gflops: f64) -> String {
    format!("Measured WGSL FMA throughput: {gflops:.1} GFLOP/s")
}

/// Case `index` (from 0) of `total`, as it starts.
pub fn case_text(index: usize, total: usize, case: &BenchCase) -> String {
    format!(
        "Case {} of {total}: {} kernel, n = {}, {} heads, d = {}, {}…",
        index + 1,
        case.kernel.name(),
        case.shape.n_q,
        case.shape.h_q,
        case.shape.d,
        case.mask
    )
}

pub fn case_failed_text(index: usize, error: impl fmt::Display) -> String {
    format!("Case {} failed: {error}", index + 1)
}

/// The last line of a run: stopped, or done with every case; `None` after a failure (its line stays).
pub fn finished_text(stopped: bool, rows: usize, cases: usize) -> Option<String> {
    if stopped { Some("Stopped.".into()) } else { (rows == cases).then(|| format!("Done: {cases} cases.")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::AttentionShape;
    use crate::gpu::bench::BenchKernel;
    use crate::model::Mask;

    fn adapter(is_cpu: bool) -> AdapterSummary {
        AdapterSummary { name: String::new(), backend: "vulkan".into(), device_type: "Cpu".into(), is_cpu }
    }

    #[test]
    fn a_software_adapter_says_its_timings_are_not_a_gpus() {
        assert_eq!(adapter_text(&adapter(false), true), "Adapter: vulkan · Cpu. Timing: GPU timestamp queries.");
        let software = adapter_text(&adapter(true), false);
        assert!(software.starts_with(
            "Adapter: vulkan · Cpu (software fallback). Timing: wall clock around submit and readback. This is a CPU-emulated GPU"
        ));
        assert!(software.ends_with("and their probability rows to the row softmax's fast form at any width, once built after their first pass)."));
        assert_eq!(
            unavailable_text("forced"),
            "The benchmark times GPU kernels, and there is no WebGPU here (forced)."
        );
    }

    #[test]
    fn progress_through_the_cases() {
        let case = BenchCase {
            kernel: BenchKernel::Naive,
            shape: AttentionShape { h_q: 32, h_kv: 8, n_q: 1024, n_kv: 1024, d: 64 },
            mask: Mask::Sliding { window_tokens: 256 },
        };
        assert_eq!(
            case_text(2, 6, &case),
            "Case 3 of 6: naive kernel, n = 1024, 32 heads, d = 64, sliding (window 256)…"
        );
        assert_eq!(case_failed_text(2, "lost"), "Case 3 failed: lost");
        assert_eq!(run_label(6), "Run 6 cases");
        assert_eq!(fma_text(1234.56), "Measured WGSL FMA throughput: 1234.6 GFLOP/s");
        assert_eq!(peak_failed_text("lost"), "Could not measure the GPU: lost");
        assert_eq!(finished_text(false, 6, 6).as_deref(), Some("Done: 6 cases."));
        assert_eq!(finished_text(true, 2, 6).as_deref(), Some("Stopped."));
        assert_eq!(finished_text(false, 2, 6), None);
    }
}
