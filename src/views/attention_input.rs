//! What attention is computed over, shared by the heatmaps and the benchmark: the text (or `n`
//! generated tokens), the seed of the synthetic weights, and the mask with its window or chunk.
//!
//! The benchmark reads `n`, `mask`, `window` and `chunk` as filters: a link that names them runs just
//! those cases (a named chunked mask sized by the link's chunk), so whether the link named `mask`,
//! `window` or `chunk` is kept even when it names the default.

use super::link::{Accepted, LinkParams, Notice, parse_bounded};
use crate::model::Mask;
use crate::views::heatmaps::params::MAX_TEXT_CHARS;

pub const DEFAULT_TEXT: &str = "The cat sat on the mat because the cat was tired.";
/// Largest window / chunk accepted from a URL. Mask sizes are `u64` end to end, as in `Mask` and the
/// model's layer kinds (the arithmetic counts pairs of contexts past `u32`); only positions inside
/// one kernel run are `u32`.
pub const MAX_WINDOW_TOKENS: u64 = 1 << 20;
/// The window and the chunk before a link names one.
const DEFAULT_MASK_SIZE_TOKENS: u64 = 4;
/// Longest sequence a link may ask for (the kernels handle it; the naive baseline reports "does not fit").
pub const MAX_SEQ_TOKENS: u32 = 1 << 17;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionInput {
    pub text: String,
    /// Sequence length in tokens (URL `n=`): a generated input instead of the text, and the
    /// benchmark's case filter.
    pub seq_tokens: Option<u32>,
    pub seed: u64,
    /// The mask with its window or chunk (URL `mask=`, sized by `window=` or `chunk=`).
    pub mask: Mask,
    /// The window and the chunk the link named, kept while the mask is of another kind: the link
    /// writes both back, and switching to that kind takes its size up again. The mask's own size
    /// wins over the kept one of its kind (read them with `window_tokens()` / `chunk_tokens()`).
    pub kept_window_tokens: u64,
    pub kept_chunk_tokens: u64,
    /// Whether the link named `mask` / `window` / `chunk` itself (the benchmark then runs just those
    /// cases, sized as named).
    pub mask_given: bool,
    pub window_given: bool,
    pub chunk_given: bool,
}

impl Default for AttentionInput {
    fn default() -> Self {
        Self {
            text: DEFAULT_TEXT.to_string(),
            seq_tokens: None,
            seed: 1,
            mask: Mask::Causal,
            kept_window_tokens: DEFAULT_MASK_SIZE_TOKENS,
            kept_chunk_tokens: DEFAULT_MASK_SIZE_TOKENS,
            mask_given: false,
            window_given: false,
            chunk_given: false,
        }
    }
}

impl AttentionInput {
    /// The sliding window: the mask's own when it slides, else the one kept for it.
    pub fn window_tokens(&self) -> u64 {
        if let Mask::Sliding { window_tokens } = self.mask { window_tokens } else { self.kept_window_tokens }
    }

    /// The chunk: the mask's own when it is chunked, else the one kept for it.
    pub fn chunk_tokens(&self) -> u64 {
        if let Mask::Chunked { chunk_tokens } = self.mask { chunk_tokens } else { self.kept_chunk_tokens }
    }

    /// The mask the link chose over each layer's own: the one it names, or any but the causal
    /// default. `None`: each layer applies its own.
    pub fn chosen_mask(&self) -> Option<Mask> {
        (self.mask_given || self.mask != Mask::Causal).then_some(self.mask)
    }

    /// Sets the window and the chunk, resizing the mask when it is of that kind.
    fn set_sizes(&mut self, window_tokens: u64, chunk_tokens: u64) {
        (self.kept_window_tokens, self.kept_chunk_tokens) = (window_tokens, chunk_tokens);
        self.mask = self.mask.resized(window_tokens, chunk_tokens);
    }
}

impl LinkParams for AttentionInput {
    const KEYS: &'static [&'static str] = &["text", "mask", "window", "chunk", "seed", "n"];

    fn set(&mut self, key: &str, value: &str) -> Result<Accepted, String> {
        match key {
            "text" => {
                self.text = value.chars().take(MAX_TEXT_CHARS).collect();
                let chars = value.chars().count();
                if chars > MAX_TEXT_CHARS {
                    return Ok(Accepted::Adjusted(Notice(format!(
                        "The text had {chars} characters; only the first {MAX_TEXT_CHARS} are used."
                    ))));
                }
            }
            "mask" => {
                let (window_tokens, chunk_tokens) = (self.window_tokens(), self.chunk_tokens());
                self.mask = Mask::named(value, window_tokens, chunk_tokens)?;
                self.set_sizes(window_tokens, chunk_tokens);
                self.mask_given = true;
            }
            "window" => {
                self.set_sizes(parse_mask_size(value)?, self.chunk_tokens());
                self.window_given = true;
            }
            "chunk" => {
                self.set_sizes(self.window_tokens(), parse_mask_size(value)?);
                self.chunk_given = true;
            }
            "seed" => self.seed = value.parse().map_err(|_| format!("\"{value}\" is not a whole number"))?,
            "n" => self.seq_tokens = Some(parse_bounded(value, 1, MAX_SEQ_TOKENS)?),
            _ => return Err(format!("unknown parameter {key}")),
        }
        Ok(Accepted::Yes)
    }

    fn pairs(&self) -> Vec<(&'static str, String)> {
        let default = Self::default();
        let mut out = Vec::new();
        if self.text != default.text {
            out.push(("text", self.text.clone()));
        }
        if let Some(mask) = self.chosen_mask() {
            out.push(("mask", mask.kind_name().into()));
        }
        if self.window_tokens() != default.window_tokens() || self.window_given {
            out.push(("window", self.window_tokens().to_string()));
        }
        if self.chunk_tokens() != default.chunk_tokens() || self.chunk_given {
            out.push(("chunk", self.chunk_tokens().to_string()));
        }
        if self.seed != default.seed {
            out.push(("seed", self.seed.to_string()));
        }
        if let Some(n) = self.seq_tokens {
            out.push(("n", n.to_string()));
        }
        out
    }
}

/// A window or chunk from a link: 1 ..= [`MAX_WINDOW_TOKENS`] tokens.
fn parse_mask_size(value: &str) -> Result<u64, String> {
    let max = u32::try_from(MAX_WINDOW_TOKENS).unwrap_or(u32::MAX);
    parse_bounded(value, 1, max).map(u64::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::link::round_trip;

    #[test]
    fn every_parameter_round_trips() {
        let input = AttentionInput {
            text: "héllo & <b>world</b>".into(),
            seq_tokens: Some(4096),
            seed: 99,
            mask: Mask::Sliding { window_tokens: 3 },
            kept_window_tokens: 3,
            kept_chunk_tokens: 7,
            mask_given: true,
            window_given: true,
            chunk_given: true,
        };
        assert_eq!(round_trip(&input), input);
        assert!(AttentionInput::default().pairs().is_empty());
    }

    #[test]
    fn naming_the_default_mask_is_remembered() {
        let mut input = AttentionInput::default();
        input.set("mask", "causal").unwrap();
        input.set("window", "4").unwrap();
        assert_eq!(input.pairs(), vec![("mask", "causal".into()), ("window", "4".into())]);
    }

    #[test]
    fn the_mask_takes_its_size() {
        let mut input = AttentionInput::default();
        input.set("mask", "sliding").unwrap();
        input.set("window", "3").unwrap();
        assert_eq!(input.mask, Mask::Sliding { window_tokens: 3 });
        input.set("mask", "chunked").unwrap();
        input.set("chunk", "5").unwrap();
        assert_eq!(input.mask, Mask::Chunked { chunk_tokens: 5 });
        input.set("mask", "sliding").unwrap();
        assert_eq!(input.mask, Mask::Sliding { window_tokens: 3 }, "the window was kept");
        assert_eq!(input.pairs()[1..], [("window", "3".into()), ("chunk", "5".into())]);
    }

    #[test]
    fn long_text_is_cut_with_a_notice_and_bad_sizes_refused() {
        let mut input = AttentionInput::default();
        let long = "a".repeat(MAX_TEXT_CHARS + 5);
        assert!(matches!(input.set("text", &long), Ok(Accepted::Adjusted(_))));
        assert_eq!(input.text.len(), MAX_TEXT_CHARS);
        for (key, bad) in [("window", "0"), ("chunk", "99999999999"), ("seed", "-3"), ("n", "0"), ("mask", "diag")] {
            assert!(input.set(key, bad).is_err(), "{key}={bad}");
        }
    }
}
