//! What the explorer's controls offer and what a pick means: the input modes on offer, the mask
//! select's value and labels, the heads and token-count fields read as the link reads them, and the
//! copy-link button's words.

use super::input_mode::InputMode;
use super::params::{HeadSelection, MAX_GENERATED};
use crate::attention::tokens::TokenMode;
use crate::model::Mask;
use crate::views::attention_input::AttentionInput;

/// The input select's choices; cross-attention only with synthetic weights (real ones read one text).
pub fn input_choices(synthetic: bool) -> Vec<(InputMode, &'static str)> {
    [
        (InputMode::Text, "typed text"),
        (InputMode::Generated, "generated sequence"),
        (InputMode::Cross, "cross-attention (two texts)"),
    ]
    .into_iter()
    .filter(|(m, _)| *m != InputMode::Cross || synthetic)
    .collect()
}

/// The text field's label: in cross-attention it is the decoder's side.
pub fn text_label(mode: InputMode) -> &'static str {
    if mode == InputMode::Cross { "Queries from (decoder text)" } else { "Text" }
}

/// The mask select's value: `layer` (each layer's own mask, a link without `mask`) unless the link
/// names a mask or the mask is not the causal default.
pub fn mask_choice(input: &AttentionInput) -> &'static str {
    input.chosen_mask().map_or("layer", Mask::kind_name)
}

/// What the mask select's pick writes to `mask`: `layer` clears it.
pub fn mask_change(value: &str) -> Option<&str> {
    (value != "layer").then_some(value)
}

/// The option label of the mask kind named `kind` (one of [`Mask::KIND_NAMES`]).
pub fn mask_label(kind: &str) -> &str {
    if kind == Mask::Full.kind_name() { "full (bidirectional, encoder)" } else { kind }
}

/// A token mode's option label.
pub fn token_label(mode: TokenMode) -> &'static str {
    if mode == TokenMode::Word { "words" } else { "characters" }
}

/// The generated length typed, if it is one the page runs (1 to `MAX_GENERATED`); others are ignored.
pub fn generated_count(typed: &str) -> Option<u32> {
    typed.trim().parse::<u32>().ok().filter(|n| (1..=MAX_GENERATED).contains(n))
}

/// The heads field read as the link reads `heads`; an empty field is every head.
pub fn heads_field(typed: &str) -> Result<HeadSelection, String> {
    let text = typed.trim();
    HeadSelection::parse(if text.is_empty() { "all" } else { text })
}

/// The copy-link button's words: before a copy, and after one worked or failed.
pub fn copy_label(copied: Option<bool>) -> &'static str {
    match copied {
        Some(true) => "Link copied",
        Some(false) => "Copy failed: use the address bar",
        None => "Copy link",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_weights_offer_no_cross_attention() {
        let ids = |synthetic| input_choices(synthetic).into_iter().map(|(m, _)| m.id()).collect::<Vec<_>>();
        assert_eq!(ids(true), ["text", "generated", "cross"]);
        assert_eq!(ids(false), ["text", "generated"]);
        assert_eq!(text_label(InputMode::Cross), "Queries from (decoder text)");
        assert_eq!(text_label(InputMode::Generated), "Text");
    }

    #[test]
    fn the_mask_select_shows_the_layers_own_mask_unless_the_link_names_one() {
        let mut input = AttentionInput::default();
        assert_eq!(input.mask, Mask::Causal);
        assert_eq!(mask_choice(&input), "layer");
        input.mask_given = true;
        assert_eq!(mask_choice(&input), "causal");
        input.mask_given = false;
        input.mask = Mask::Full;
        assert_eq!(mask_choice(&input), "full");
        assert_eq!(mask_change("layer"), None);
        assert_eq!(mask_change("sliding"), Some("sliding"));
        assert_eq!(mask_label("full"), "full (bidirectional, encoder)");
        assert_eq!(mask_label("causal"), "causal");
        assert_eq!((token_label(TokenMode::Word), token_label(TokenMode::Char)), ("words", "characters"));
    }

    #[test]
    fn typed_fields_are_read_as_the_link_reads_them() {
        assert_eq!(generated_count(" 64 "), Some(64));
        assert_eq!(generated_count("0"), None);
        assert_eq!(generated_count(&(MAX_GENERATED + 1).to_string()), None);
        assert_eq!(generated_count("many"), None);
        assert_eq!(heads_field("  "), Ok(HeadSelection::All));
        assert_eq!(heads_field(" 0-2,5 ").map(|s| s.to_param()), Ok("0-2,5".to_string()));
        assert!(heads_field("x").is_err());
    }

    #[test]
    fn the_copy_button_says_what_happened() {
        assert_eq!(copy_label(None), "Copy link");
        assert_eq!(copy_label(Some(true)), "Link copied");
        assert_eq!(copy_label(Some(false)), "Copy failed: use the address bar");
    }
}
