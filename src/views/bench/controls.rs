//! The case filter's choices: each select's options, and what picking one writes into the link's
//! parameters. An option's value `all` lifts that filter.

use super::BenchParams;
pub use super::{mask_size, window_tokens};
use crate::gpu::bench::{BENCH_DEFAULT_HEAD_DIMS, BenchKernel, SEQUENCE_LENGTHS};
use crate::model::Mask;
use crate::views::attention_input::AttentionInput;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectOption {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// `all` first (labelled `all_label`), then one option per choice named `name`; `current` is selected.
fn options<T: Copy + PartialEq>(
    all_label: &str,
    current: Option<T>,
    choices: impl IntoIterator<Item = T>,
    name: impl Fn(T) -> String,
) -> Vec<SelectOption> {
    let all = SelectOption { value: "all".into(), label: all_label.into(), selected: current.is_none() };
    let each =
        choices.into_iter().map(|c| SelectOption { value: name(c), label: name(c), selected: current == Some(c) });
    std::iter::once(all).chain(each).collect()
}

/// The sequence lengths, and the link's own when it names another.
pub fn n_options(input: &AttentionInput) -> Vec<SelectOption> {
    let current = input.seq_tokens;
    let mut lengths = SEQUENCE_LENGTHS.to_vec();
    lengths.extend(current.filter(|n| !lengths.contains(n)));
    options("all", current, lengths, |n| n.to_string())
}

/// The head widths, and the link's own when it names another (`d=256`).
pub fn d_options(params: &BenchParams) -> Vec<SelectOption> {
    let mut dims = BENCH_DEFAULT_HEAD_DIMS.to_vec();
    dims.extend(params.head_dim.filter(|d| !dims.contains(d)));
    options("all", params.head_dim, dims, |d| d.to_string())
}

/// The link key the size control writes, and its label: `chunk` while the cases' mask is a named
/// chunked one, else `window` (the sliding cases' window).
pub fn size_key(input: &AttentionInput) -> &'static str {
    if input.mask_given && matches!(input.mask, Mask::Chunked { .. }) { "chunk" } else { "window" }
}

pub fn mask_options(input: &AttentionInput) -> Vec<SelectOption> {
    let current = input.mask_given.then_some(input.mask.kind_name());
    options("full, causal, sliding", current, Mask::KIND_NAMES, |k| k.into())
}

/// The kernels: the forward ones (the default list), or one of them, or the backward alone.
pub fn kernel_options(params: &BenchParams) -> Vec<SelectOption> {
    options("tiled, naive, rows", params.kernel, BenchKernel::NAMED, |k| k.name().into())
}

/// What picking `value` in the select of `key` (`n`, `d` or `mask`) changes in the link: `all` lifts
/// that filter (the key is cleared), any other option is the key's value, read by its parser.
pub fn filter_change<'a>(key: &'a str, value: &'a str) -> (&'a str, Option<&'a str>) {
    (key, (value != "all").then_some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::bench::DEFAULT_WINDOW;
    use crate::views::registry::Settings;

    fn values(options: &[SelectOption]) -> Vec<&str> {
        options.iter().map(|o| o.value.as_str()).collect()
    }

    fn selected(options: &[SelectOption]) -> Vec<&str> {
        options.iter().filter(|o| o.selected).map(|o| o.label.as_str()).collect()
    }

    /// The settings after each (key, option) is picked, as the page applies them.
    fn pick(picks: &[(&str, &str)]) -> Settings {
        let mut settings = Settings::default();
        for &(key, value) in picks {
            match filter_change(key, value) {
                (key, Some(value)) => assert!(matches!(settings.set(key, value), Some(Ok(_))), "{key}={value}"),
                (key, None) => assert!(settings.clear(key)),
            }
        }
        settings
    }

    #[test]
    fn all_is_selected_until_a_choice_is_picked() {
        let s = Settings::default();
        assert_eq!(values(&n_options(&s.input)), ["all", "256", "1024", "2048", "4096", "8192", "16384"]);
        assert_eq!(selected(&mask_options(&s.input)), ["full, causal, sliding"]);
        assert_eq!(selected(&d_options(&s.bench)), ["all"]);
        assert_eq!(values(&kernel_options(&s.bench)), ["all", "tiled", "naive", "rows", "backward"]);
        assert_eq!(selected(&kernel_options(&s.bench)), ["tiled, naive, rows"]);
        assert_eq!(selected(&kernel_options(&pick(&[("kernel", "backward")]).bench)), ["backward"]);
        let s = pick(&[("n", "2048"), ("d", "128"), ("mask", "sliding")]);
        assert_eq!(selected(&n_options(&s.input)), ["2048"]);
        assert_eq!(selected(&d_options(&s.bench)), ["128"]);
        assert_eq!(selected(&mask_options(&s.input)), ["sliding"]);
        let s = pick(&[("n", "2048"), ("d", "128"), ("mask", "sliding"), ("n", "all"), ("d", "all"), ("mask", "all")]);
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn a_length_from_the_link_joins_the_list() {
        let s = pick(&[("n", "300"), ("d", "256")]);
        assert_eq!(values(&n_options(&s.input)).last(), Some(&"300"));
        assert_eq!(selected(&n_options(&s.input)), ["300"]);
        assert_eq!(selected(&d_options(&s.bench)), ["256"]);
    }

    #[test]
    fn the_size_control_writes_the_chunk_of_a_chunked_mask() {
        let mut s = pick(&[("mask", "chunked")]);
        assert_eq!((size_key(&s.input), mask_size(&s.input)), ("chunk", DEFAULT_WINDOW));
        let key = size_key(&s.input);
        assert!(matches!(s.set(key, "3"), Some(Ok(_))));
        assert_eq!((mask_size(&s.input), s.bench.filter(&s.input).mask), (3, Some(Mask::Chunked { chunk_tokens: 3 })));
        let s = pick(&[("mask", "sliding")]);
        assert_eq!(size_key(&s.input), "window");
        assert_eq!(size_key(&pick(&[]).input), "window");
    }

    #[test]
    fn the_window_is_the_default_until_the_link_names_one() {
        let mut s = Settings::default();
        assert_eq!(window_tokens(&s.input), DEFAULT_WINDOW);
        assert!(matches!(s.set("window", "64"), Some(Ok(_))));
        assert_eq!(window_tokens(&s.input), 64);
    }
}
