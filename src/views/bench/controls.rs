//! The case filter's choices: each select's options, and what picking one writes into the link's
//! parameters. An option's value `all` (or anything else that does not parse) lifts that filter.

use super::BenchParams;
use crate::gpu::bench::{BENCH_DEFAULT_HEAD_DIMS, DEFAULT_WINDOW, SEQUENCE_LENGTHS};
use crate::model::MaskKind;
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

pub fn d_options(params: &BenchParams) -> Vec<SelectOption> {
    options("all", params.head_dim, BENCH_DEFAULT_HEAD_DIMS, |d| d.to_string())
}

pub fn mask_options(input: &AttentionInput) -> Vec<SelectOption> {
    options("full, causal, sliding", input.mask_given.then_some(input.mask), MaskKind::ALL, |k| k.name().into())
}

/// The window the cases use: the link's, else the benchmark's default.
pub fn window_tokens(input: &AttentionInput) -> u32 {
    if input.window_given { input.window_tokens } else { DEFAULT_WINDOW }
}

pub fn pick_n(input: &mut AttentionInput, value: &str) {
    input.seq_tokens = value.parse().ok();
}

pub fn pick_d(params: &mut BenchParams, value: &str) {
    params.head_dim = value.parse().ok();
}

pub fn pick_mask(input: &mut AttentionInput, value: &str) {
    match value.parse::<MaskKind>() {
        Ok(kind) => {
            input.mask = kind;
            input.mask_given = true;
        }
        Err(_) => input.mask_given = false,
    }
}

/// A whole number of at least one token; anything else leaves the window as it was (and says so:
/// `false`, nothing to rewrite).
pub fn pick_window(input: &mut AttentionInput, value: &str) -> bool {
    let Some(w) = value.trim().parse::<u32>().ok().filter(|&w| w >= 1) else { return false };
    input.window_tokens = w;
    input.window_given = true;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(options: &[SelectOption]) -> Vec<&str> {
        options.iter().map(|o| o.value.as_str()).collect()
    }

    fn selected(options: &[SelectOption]) -> Vec<&str> {
        options.iter().filter(|o| o.selected).map(|o| o.label.as_str()).collect()
    }

    #[test]
    fn all_is_selected_until_a_choice_is_picked() {
        let mut input = AttentionInput::default();
        let mut params = BenchParams::default();
        assert_eq!(values(&n_options(&input)), ["all", "256", "1024", "2048", "4096", "8192", "16384"]);
        assert_eq!(selected(&mask_options(&input)), ["full, causal, sliding"]);
        assert_eq!(selected(&d_options(&params)), ["all"]);
        pick_n(&mut input, "2048");
        pick_d(&mut params, "128");
        pick_mask(&mut input, "sliding");
        assert_eq!(selected(&n_options(&input)), ["2048"]);
        assert_eq!(selected(&d_options(&params)), ["128"]);
        assert_eq!(selected(&mask_options(&input)), ["sliding"]);
        pick_n(&mut input, "all");
        pick_d(&mut params, "all");
        pick_mask(&mut input, "all");
        assert_eq!((input.seq_tokens, params.head_dim, input.mask_given), (None, None, false));
    }

    #[test]
    fn a_length_from_the_link_joins_the_list() {
        let mut input = AttentionInput::default();
        pick_n(&mut input, "300");
        assert_eq!(values(&n_options(&input)).last(), Some(&"300"));
        assert_eq!(selected(&n_options(&input)), ["300"]);
    }

    #[test]
    fn the_window_is_the_default_until_a_whole_number_is_typed() {
        let mut input = AttentionInput::default();
        assert_eq!(window_tokens(&input), DEFAULT_WINDOW);
        for bad in ["0", "-3", "wide", ""] {
            assert!(!pick_window(&mut input, bad));
        }
        assert!(!input.window_given);
        assert!(pick_window(&mut input, " 64 "));
        assert_eq!(window_tokens(&input), 64);
    }
}
