//! Figures read from the heatmap explorer's own numbers, computed by the code the page runs for the
//! step's state: the step-through of the shown head ([`Example`]) and its row entropies
//! ([`RowEntropy`]), and how W_O mixes the layer's heads ([`head_mix`]). They exist for inputs the
//! explorer draws cell by cell (at most `EXACT_MAX_N` tokens), which is what lessons show.

use super::written::{Figure, Unit, number, whole};
use crate::attention::layer_inputs::LayerLayout;
use crate::model::Model;
use crate::views::heatmaps::entropy::RowEntropy;
use crate::views::heatmaps::head_mix::{head_mix, mix_row};
use crate::views::heatmaps::params::MixRow;
use crate::views::heatmaps::request::Request;
use crate::views::heatmaps::step_through::Example;
use crate::views::registry::Settings;

/// The explorer figure `name`, or `None` for a name that is not one of them or inputs too long.
pub(super) fn figure(name: &str, state: &Settings, model: &Model) -> Option<Figure> {
    let layout = || LayerLayout::of(model, state.model.layer);
    match name {
        "layer_head_dim" => Some(whole(layout().head_dim.into(), Unit::Count)),
        "random_score_spread" => Some(number(f64::from(layout().head_dim).sqrt(), Unit::Number)),
        "concat_width" => {
            let l = layout();
            Some(whole(u128::from(l.n_q_heads) * u128::from(l.head_dim), Unit::Count))
        }
        "mix_row" | "mix_top_head" | "mix_top_share" => mix_figure(name, state, &small_request(state, model)?),
        _ => step_figure(name, state, &small_request(state, model)?),
    }
}

/// The explorer's request when it is drawn cell by cell (short enough to rebuild its inputs).
fn small_request(state: &Settings, model: &Model) -> Option<Request> {
    super::sources::explorer(state, model).filter(Request::exact)
}

/// Figures of the step-through's last query row.
fn step_figure(name: &str, state: &Settings, request: &Request) -> Option<Figure> {
    let steps = Example::of(&request.inputs(), request.shown_head(state.explorer.focus)?, request.mask).steps();
    let row = steps.n_q.checked_sub(1)?;
    let n = steps.n_kv;
    let probs = &steps.probs[row * n..][..n];
    // The first key of largest probability.
    let top = (0..n).reduce(|best, j| if probs[j] > probs[best] { j } else { best })?;
    let entropy = || RowEntropy::of(&steps, row);
    Some(match name {
        "step_row" => whole(row as u128, Unit::Count),
        "step_visible_keys" => whole(entropy()?.visible_keys as u128, Unit::Count),
        "step_top_key" => whole(top as u128, Unit::Count),
        "step_top_score" => number(steps.scores[row * n + top], Unit::Number),
        "step_top_scaled" => number(steps.scaled[row * n + top], Unit::Number),
        "step_top_prob" => number(probs[top], Unit::Number),
        "row_entropy_scaled" => number(entropy()?.scaled_bits, Unit::Number),
        "row_entropy_unscaled" => number(entropy()?.unscaled_bits, Unit::Number),
        "entropy_max" => number(entropy()?.max_bits, Unit::Number),
        _ => return None,
    })
}

/// Figures of the head-mixing panel's token.
fn mix_figure(name: &str, state: &Settings, request: &Request) -> Option<Figure> {
    let row = mix_row(state.explorer.mix.and_then(MixRow::token), request.n_q() as usize);
    if name == "mix_row" {
        return Some(whole(row as u128, Unit::Count));
    }
    let top = head_mix(&request.inputs(), request.mask, row).ok()?.top()?;
    Some(match name {
        "mix_top_head" => whole(top.head.into(), Unit::Count),
        _ => number(top.share * 100.0, Unit::Percent),
    })
}

#[cfg(test)]
mod tests {
    use super::super::figure;
    use crate::attention::inputs::word_tokens;
    use crate::attention::layer_inputs::{LayerInputs, LayerLayout};
    use crate::catalog::presets::preset;
    use crate::model::Mask;
    use crate::views::heatmaps::entropy::RowEntropy;
    use crate::views::heatmaps::head_mix::head_mix;
    use crate::views::heatmaps::step_through::Example;
    use crate::views::registry::Settings;

    fn value(name: &str, query: &str) -> f64 {
        let (state, notices) = Settings::from_query(query);
        assert!(notices.is_empty(), "{notices:?}");
        figure(name, &state, &state.resolved_model()).unwrap_or_else(|| panic!("{name} at {query}")).value
    }

    #[test]
    fn widths_by_hand() {
        // Llama 3 8B: head width 128, √128 = 11.3137; 32 query heads × 128 = 4,096 (its d_model).
        assert_eq!(value("random_score_spread", "model=llama-3-8b"), 128f64.sqrt());
        assert_eq!(value("concat_width", "model=llama-3-8b"), 4096.0);
        // Gemma 4 E4B: local layers (0) have heads of 256, global ones (5) of 512: √512 = 22.6274.
        assert_eq!(value("layer_head_dim", "model=gemma-4-e4b&layer=0"), 256.0);
        assert_eq!(value("layer_head_dim", "model=gemma-4-e4b&layer=5"), 512.0);
        assert_eq!(value("random_score_spread", "model=gemma-4-e4b&layer=5"), 512f64.sqrt());
        // GPT-2 small: 12 heads of 64, √64 = 8 exactly; 12 × 64 = 768.
        assert_eq!(value("random_score_spread", "model=gpt2-small"), 8.0);
        assert_eq!(value("concat_width", "model=gpt2-small"), 768.0);
    }

    #[test]
    fn the_designed_previous_token_head_reads_the_key_before() {
        // Head 0 with teach on is designed: each query looks one step back, by a logit margin of 12.
        // "a b c d e f g h": the example holds the first 6 tokens, so its last row is 5, which sees
        // 6 keys under the causal mask and puts nearly all of its weight on key 4.
        let q = "model=llama-3-8b&text=a b c d e f g h&heads=0&focus=0&steps=on";
        assert_eq!(value("step_row", q), 5.0);
        assert_eq!(value("step_visible_keys", q), 6.0);
        assert_eq!(value("step_top_key", q), 4.0);
        assert!(value("step_top_prob", q) > 0.999);
        assert!(value("row_entropy_scaled", q) < 0.01, "one key takes nearly everything");
        assert_eq!(value("entropy_max", q), 6f64.log2());
        // A sliding window of 2 leaves the last row keys 4 and 5: one bit at most.
        assert_eq!(value("step_visible_keys", &format!("{q}&mask=sliding&window=2")), 2.0);
        assert_eq!(value("entropy_max", &format!("{q}&mask=sliding&window=2")), 1.0);
    }

    #[test]
    fn step_figures_are_the_step_throughs_own_numbers() {
        // The seeded head 3 of GPT-2 small, layer 1: the figures equal the step-through computed here
        // directly, and the scaled score is the raw one times 1/√64 = 1/8.
        let q = "model=gpt2-small&layer=1&text=one two three four five&teach=off&heads=3";
        let layout = LayerLayout::of(preset("gpt2-small").unwrap(), 1);
        let inputs = LayerInputs::new(layout, word_tokens("one two three four five"), None, 1, false);
        let steps = Example::of(&inputs, 3, Mask::Causal).steps();
        let top = value("step_top_key", q) as usize;
        let at = 4 * 5 + top;
        assert_eq!(value("step_row", q), 4.0);
        assert_eq!(value("step_top_prob", q), steps.probs[at]);
        assert!(steps.probs[20..25].iter().all(|&p| p <= steps.probs[at]));
        assert_eq!(value("step_top_score", q), steps.scores[at]);
        assert_eq!(value("step_top_scaled", q), steps.scores[at] / 8.0);
        let row = RowEntropy::of(&steps, 4).unwrap();
        assert_eq!(value("row_entropy_scaled", q), row.scaled_bits);
        assert_eq!(value("row_entropy_unscaled", q), row.unscaled_bits);
        assert_eq!(value("entropy_max", q), 5f64.log2());
    }

    #[test]
    fn mix_figures_read_the_chosen_token() {
        let q = "model=gpt2-small&text=one two three four five&mix=2";
        assert_eq!(value("mix_row", q), 2.0);
        assert_eq!(value("mix_row", "model=gpt2-small&text=one two three four five&mix=40"), 4.0);
        assert_eq!(value("mix_row", "model=gpt2-small&text=one two three four five"), 4.0);
        assert_eq!(value("mix_row", "model=gpt2-small&text=one two three four five&mix=last"), 4.0);
        let layout = LayerLayout::of(preset("gpt2-small").unwrap(), 0);
        let inputs = LayerInputs::new(layout, word_tokens("one two three four five"), None, 1, true);
        let top = head_mix(&inputs, Mask::Causal, 2).unwrap().top().unwrap();
        assert_eq!(value("mix_top_head", q), f64::from(top.head));
        assert_eq!(value("mix_top_share", q), top.share * 100.0);
    }
}
