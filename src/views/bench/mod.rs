//! The benchmark view's model. Here its link parameters: `d` and `kernel`, with `n`, `mask`,
//! `window` and `chunk` (which sizes a named chunked mask) read from the shared [`AttentionInput`]; a
//! link that names any of them runs just the matching cases (`kernel=backward` the backward's, which
//! no other list includes).
//! [`controls`] holds the case filter's choices, [`rows`] the result table's cells, [`status`] every
//! other line the view shows.

pub mod controls;
pub mod paged;
pub mod rows;
pub mod status;

use super::attention_input::AttentionInput;
use super::link::{Accepted, LinkParams};
use crate::gpu::bench::{BenchFilter, BenchKernel, DEFAULT_WINDOW};
use crate::model::Mask;

/// Head widths a link may ask the benchmark for: those the GPU kernels are built for, up to the
/// widest they take (`model::limits::KERNEL_MAX_HEAD_DIM`).
pub const BENCH_LINK_HEAD_DIMS: [u32; 7] = [32, 64, 128, 256, 512, 576, 1024];

/// The benchmark in the view registry.
pub struct Bench;

impl crate::views::view_class::ViewClass for Bench {
    const ID: &'static str = "bench";
    const TITLE: &'static str = "Benchmark";
    type Params = BenchParams;

    /// Timings of kernels over seeded inputs.
    fn numbers_source(_: &crate::views::view_class::StepShows) -> crate::views::view_class::NumbersSource {
        crate::views::view_class::NumbersSource::Seeded
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BenchParams {
    /// Head dimension (URL `d=`): the benchmark's case filter.
    pub head_dim: Option<u32>,
    /// The one kernel to time (URL `kernel=`); `None`: the forward kernels.
    pub kernel: Option<BenchKernel>,
}

impl BenchParams {
    /// The cases a link asks for: each parameter it names narrows the list.
    pub fn filter(&self, input: &AttentionInput) -> BenchFilter {
        let size = mask_size(input);
        BenchFilter {
            n: input.seq_tokens,
            d: self.head_dim,
            mask: input.mask_given.then(|| input.mask.resized(size, size)),
            kernel: self.kernel,
            window: input.window_given.then(|| input.window_tokens()),
        }
    }

    /// Whether the link names a case (`n`, `d`, `mask` or `window`): the view then runs it unasked.
    pub fn names_a_case(&self, input: &AttentionInput) -> bool {
        self.filter(input) != BenchFilter::default()
    }
}

/// The window the cases use: the link's, else the benchmark's default.
pub fn window_tokens(input: &AttentionInput) -> u64 {
    if input.window_given { input.window_tokens() } else { DEFAULT_WINDOW }
}

/// Whether the cases' windowed mask is sized by the link's `chunk` (a named chunked mask with a
/// named chunk) rather than its `window`. The size control's key is `controls::size_key`.
pub fn sized_by_chunk(input: &AttentionInput) -> bool {
    input.mask_given && input.chunk_given && matches!(input.mask, Mask::Chunked { .. })
}

/// The size of the cases' windowed mask: a named chunked mask's chunk where the link names one,
/// else the window ([`window_tokens`]; a chunked mask named without a chunk takes it too).
pub fn mask_size(input: &AttentionInput) -> u64 {
    if sized_by_chunk(input) { input.chunk_tokens() } else { window_tokens(input) }
}

impl LinkParams for BenchParams {
    const KEYS: &'static [&'static str] = &["d", "kernel"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match (key, value.parse::<u32>()) {
            ("d", Ok(d)) if BENCH_LINK_HEAD_DIMS.contains(&d) => self.head_dim = Some(d),
            ("d", _) => {
                return Err(format!(
                    "\"{value}\" is not a supported head dimension (32, 64, 128, 256, 512, 576 or 1024)"
                ));
            }
            ("kernel", _) => self.kernel = Some(value.parse()?),
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let d = self.head_dim.map(|d| ("d", d.to_string()));
        d.into_iter().chain(self.kernel.map(|k| ("kernel", k.name().to_string()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        let params = BenchParams { head_dim: Some(128), kernel: None };
        assert_eq!(round_trip(&params), params);
        let backward = BenchParams { head_dim: None, kernel: Some(BenchKernel::Backward) };
        assert_eq!(round_trip(&backward), backward);
        assert_eq!(backward.pairs(), [("kernel", "backward".to_string())]);
        assert!(BenchParams::default().set("kernel", "fast").is_err());
        assert!(BenchParams::default().pairs().is_empty());
        assert!(BenchParams::default().set("d", "48").is_err());
        // Wide heads: Gemma 4's global 512, MLA's absorbed 576, the kernels' widest 1,024.
        for d in ["512", "576", "1024"] {
            assert!(BenchParams::default().set("d", d).is_ok(), "{d}");
        }
        assert!(BenchParams::default().set("d", "2048").is_err());
    }

    #[test]
    fn a_named_chunked_mask_takes_the_links_chunk_else_the_window() {
        let mask_of = |link: &[(&str, &str)]| {
            let mut input = AttentionInput::default();
            for (k, v) in link {
                input.set(k, v).unwrap();
            }
            (BenchParams::default().filter(&input).mask, sized_by_chunk(&input))
        };
        let chunked = |chunk_tokens| Some(Mask::Chunked { chunk_tokens });
        assert_eq!(mask_of(&[("mask", "chunked"), ("chunk", "1")]), (chunked(1), true));
        assert_eq!(mask_of(&[("chunk", "4096"), ("mask", "chunked")]), (chunked(4096), true));
        // Without a chunk the window sizes it, the link's or the benchmark's default.
        assert_eq!(mask_of(&[("mask", "chunked"), ("window", "64")]), (chunked(64), false));
        assert_eq!(mask_of(&[("mask", "chunked")]), (chunked(DEFAULT_WINDOW), false));
        // A chunk beside a sliding mask leaves the window in charge.
        let sliding = Some(Mask::Sliding { window_tokens: 8 });
        assert_eq!(mask_of(&[("mask", "sliding"), ("window", "8"), ("chunk", "2")]), (sliding, false));
    }

    #[test]
    fn only_what_the_link_names_narrows_the_cases() {
        let mut input = AttentionInput::default();
        assert_eq!(BenchParams::default().filter(&input), BenchFilter::default());
        assert!(!BenchParams::default().names_a_case(&input));
        assert!(BenchParams { head_dim: Some(64), kernel: None }.names_a_case(&input));
        let backward = BenchParams { head_dim: None, kernel: Some(BenchKernel::Backward) };
        assert!(backward.names_a_case(&input));
        assert_eq!(backward.filter(&input).kernel, Some(BenchKernel::Backward));
        input.set("n", "256").unwrap();
        input.set("mask", "sliding").unwrap();
        input.set("window", "16").unwrap();
        assert!(BenchParams::default().names_a_case(&input));
        let filter = BenchParams { head_dim: Some(64), kernel: None }.filter(&input);
        assert_eq!(
            filter,
            BenchFilter {
                n: Some(256),
                d: Some(64),
                mask: Some(Mask::Sliding { window_tokens: 16 }),
                kernel: None,
                window: Some(16)
            }
        );
    }
}
