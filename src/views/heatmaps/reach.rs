//! The layer strip's reach line: how far back information can travel through the model's layers up
//! to the chosen one ([`crate::model::reach`]), in words, with the arithmetic behind it.

use crate::model::reach::{Reach, stacked_reach};
use crate::model::units::format_thousands;
use crate::model::{LayerKind, Model};

/// What the strip says about the reach at the chosen layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReachLine {
    /// The reach itself: tokens back, or none when a global layer reaches everything.
    pub reach: Reach,
    pub text: String,
}

impl ReachLine {
    /// The `data-value` of the line: the tokens, or `all`.
    pub fn value(&self) -> String {
        match self.reach {
            Reach::Everything => "all".into(),
            Reach::Tokens(n) | Reach::AtMost(n) => n.to_string(),
        }
    }
}

fn t(n: u64) -> String {
    format_thousands(n.into())
}

/// The reach through layers `0..=layer` of `model` (a layer past the last counts as the last).
pub fn reach_line(model: &Model, layer: u32) -> ReachLine {
    let all = model.schedule.layers();
    let stack = &all[..(layer as usize + 1).min(all.len())];
    let last = stack.len().saturating_sub(1);
    let span = if last == 0 { "layer 0".to_string() } else { format!("layers 0 to {last}") };
    let reach = stacked_reach(stack);
    let text = match reach {
        Reach::Everything => {
            let first = stack.iter().position(|k| matches!(k, LayerKind::Global | LayerKind::Stateful(_)));
            let (first, kind) = first.map_or((0, LayerKind::Global), |l| (l, stack[l]));
            let is = match kind.state_mixer() {
                Some(mixer) => format!("is a {}, whose state folds in every earlier token", mixer.description()),
                None => "is global".to_string(),
            };
            format!(
                "Reach through {span}: the whole context. Layer {first} {is}: from there on, every token's \
                 output can carry information from every token before it."
            )
        }
        Reach::Tokens(n) => format!("Reach through {span}: {} tokens back at most. {}", t(n), why(stack, n)),
        Reach::AtMost(n) => format!(
            "Reach through {span}: at most {} tokens back (the sum of every window and chunk, less one each).",
            t(n)
        ),
    };
    ReachLine { reach, text }
}

/// The arithmetic of a reach without global layers.
fn why(stack: &[LayerKind], n: u64) -> String {
    let windows: Vec<u64> = stack
        .iter()
        .filter_map(|k| match *k {
            LayerKind::Sliding { window_tokens } => Some(window_tokens),
            _ => None,
        })
        .collect();
    let chunked = stack.iter().any(|k| matches!(k, LayerKind::Chunked { .. }));
    if chunked {
        return "A chunked layer reads back only to the start of its chunk, and every chunked layer cuts at \
                the same boundaries, so chunks do not add up; the windows between them do."
            .into();
    }
    match windows.first() {
        Some(&w) if windows.iter().all(|&x| x == w) => format!(
            "Each sliding layer (window {}: the token and the {} before it) carries information {} positions \
             further: {} × {} = {}.",
            t(w),
            t(w.saturating_sub(1)),
            t(w.saturating_sub(1)),
            windows.len(),
            t(w.saturating_sub(1)),
            t(n)
        ),
        _ => "Each sliding layer carries information its window less one further; the windows add up.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::preset;

    #[test]
    fn gemma_3_reaches_5_windows_then_everything() {
        let gemma = preset("gemma-3-27b").unwrap();
        // Layers 0-4 slide over 1,024 tokens: 5 x 1,023 = 5,115.
        let line = reach_line(gemma, 4);
        assert_eq!((line.reach, line.value()), (Reach::Tokens(5115), "5115".to_string()));
        assert_eq!(
            line.text,
            "Reach through layers 0 to 4: 5,115 tokens back at most. Each sliding layer (window 1,024: the token \
             and the 1,023 before it) carries information 1,023 positions further: 5 × 1,023 = 5,115."
        );
        let line = reach_line(gemma, 5);
        assert_eq!((line.reach, line.value()), (Reach::Everything, "all".to_string()));
        assert!(line.text.starts_with("Reach through layers 0 to 5: the whole context. Layer 5 is global"));
        assert!(reach_line(gemma, 0).text.starts_with("Reach through layer 0: 1,023 tokens back at most."));
    }

    #[test]
    fn mistral_and_llama_4() {
        // Mistral 7B v0.1: 32 sliding layers of 4,096: 32 x 4,095 = 131,040.
        assert_eq!(reach_line(preset("mistral-7b").unwrap(), 31).reach, Reach::Tokens(131_040));
        // Llama 4 Scout: chunks of 8,192 in layers 0-2 reach 8,191 back; layer 3 is global.
        let scout = preset("llama-4-scout").unwrap();
        let line = reach_line(scout, 2);
        assert_eq!(line.reach, Reach::Tokens(8191));
        assert!(line.text.contains("chunks do not add up"), "{}", line.text);
        assert_eq!(reach_line(scout, 3).reach, Reach::Everything);
        // A layer past the last counts as the last; Llama 3 is global from layer 0.
        assert_eq!(reach_line(preset("llama-3-8b").unwrap(), 99).reach, Reach::Everything);
    }

    #[test]
    fn a_recurrent_layer_reaches_everything_and_a_feed_forward_one_adds_nothing() {
        use crate::model::schedule::{Schedule, StateMixer};
        let sliding = LayerKind::Sliding { window_tokens: 5 };
        let mut m = Model::simple(4, 512, 8);
        m.schedule = Schedule::periodic(4, &[(1, sliding), (1, LayerKind::FeedForward), (1, sliding)]);
        // Two windows of 5: 2 x 4 = 8; the feed-forward layer between them moves nothing.
        let line = reach_line(&m, 2);
        assert_eq!(line.reach, Reach::Tokens(8));
        assert!(line.text.ends_with("2 × 4 = 8."), "{}", line.text);
        m.schedule = Schedule::periodic(4, &[(1, sliding), (1, LayerKind::Stateful(StateMixer::Ssm))]);
        let line = reach_line(&m, 1);
        assert_eq!(line.reach, Reach::Everything);
        assert!(
            line.text.starts_with(
                "Reach through layers 0 to 1: the whole context. Layer 1 is a state-space layer, whose state \
                 folds in every earlier token: from there on"
            ),
            "{}",
            line.text
        );
    }
}
