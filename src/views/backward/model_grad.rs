//! "Gradients on the model": what the backward view shows when real weights are chosen (the trained
//! model): the loss of the text, or of one next token (`target`), per head of the layer how much each
//! earlier token's key and value move that loss, and what a step of size `eta` on the layer's W_Q,
//! W_K and W_V does to the loss, the counted tokens' probabilities and one head's attention
//! ([`crate::live_attention::text_gradients`] computes them). Here: the link keys, the target
//! resolved on the model's tokens, and every sentence and bar the panel shows.

use super::{StepSize, TargetChoice};
use crate::live_attention::{GradAsk, TextGradients};
use crate::lm::backward::{KeyNorms, LossTarget};
use crate::views::attention_input::AttentionInput;
use crate::views::registry::Settings;

/// `choice` on the model's tokens `ids`: the target the backward differentiates.
pub fn resolve_target(choice: TargetChoice, ids: &[u32]) -> Result<LossTarget, String> {
    let t = ids.len();
    match choice {
        TargetChoice::Text => Ok(LossTarget::Text),
        TargetChoice::After(p) => match ids.get(p as usize + 1) {
            Some(&token) => Ok(LossTarget::Token { position: p as usize, token }),
            None => Err(format!(
                "Position {p} has no next token in the text, which is {t} tokens for this model (positions 0 to {}): \
                 the target is the token after a position, so pick one up to {}.",
                t.saturating_sub(1),
                t.saturating_sub(2)
            )),
        },
    }
}

/// The head whose attention row is shown: the explorer's enlarged one when the layer has it, else 0.
pub fn chosen_head(focus: Option<u32>, heads: u32) -> usize {
    focus.filter(|&f| f < heads).unwrap_or(0) as usize
}

/// What the panel's job reads from the link: a change to anything else (the Jacobian's row or
/// scale) does not rerun it.
#[derive(Clone, Debug, PartialEq)]
pub struct GradSettings {
    pub input: AttentionInput,
    pub layer: usize,
    pub focus: Option<u32>,
    pub target: TargetChoice,
    pub eta: StepSize,
}

impl GradSettings {
    pub fn of(s: &Settings) -> Self {
        GradSettings {
            input: s.input.clone(),
            layer: s.model.layer as usize,
            focus: s.explorer.focus,
            target: s.backward.target,
            eta: s.backward.eta,
        }
    }

    /// The job's request on the model's tokens `ids`, for a model of `heads` query heads.
    pub fn ask(&self, ids: &[u32], heads: u32) -> Result<GradAsk, String> {
        let target = resolve_target(self.target, ids)?;
        Ok(GradAsk { layer: self.layer, head: chosen_head(self.focus, heads), target, eta: self.eta.value() })
    }
}

/// One key position's bar: how much that token's key and value move the loss through one head.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyBar {
    pub position: usize,
    pub token: String,
    pub key: f64,
    pub value: f64,
    /// ‖(dK, dV)‖ at the position: √(key² + value²).
    pub norm: f64,
    /// `norm` over the layer's largest, 0 to 1 (every head on one scale).
    pub height: f64,
}

/// A query head's bars.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadBars {
    pub head: usize,
    pub largest: f64,
    pub bars: Vec<KeyBar>,
}

/// Every head's bars, scaled together so heads compare: the layer's largest norm is full height.
pub fn key_bars(norms: &[Vec<KeyNorms>], pieces: &[String]) -> Vec<HeadBars> {
    let norm = |n: &KeyNorms| n.key.hypot(n.value);
    let top = norms.iter().flatten().map(norm).fold(0.0, f64::max);
    norms
        .iter()
        .enumerate()
        .map(|(head, row)| {
            let bars: Vec<KeyBar> = row
                .iter()
                .enumerate()
                .map(|(position, n)| KeyBar {
                    position,
                    token: pieces.get(position).cloned().unwrap_or_default(),
                    key: n.key,
                    value: n.value,
                    norm: norm(n),
                    height: if top > 0.0 { norm(n) / top } else { 0.0 },
                })
                .collect();
            HeadBars { head, largest: bars.iter().map(|b| b.norm).fold(0.0, f64::max), bars }
        })
        .collect()
}

fn piece(pieces: &[String], i: usize) -> &str {
    pieces.get(i).map_or("", String::as_str)
}

/// What the loss is of, in words.
pub fn target_words(target: LossTarget, pieces: &[String]) -> String {
    match target {
        LossTarget::Text => format!(
            "the whole text's loss (the mean cross-entropy of its {} next tokens)",
            pieces.len().saturating_sub(1)
        ),
        LossTarget::Token { position, .. } => format!(
            "the loss of “{}” as the next token after position {position} (“{}”)",
            piece(pieces, position + 1),
            piece(pieces, position)
        ),
    }
}

/// The panel's first line: the loss, the layer and the size of its weights' gradient.
pub fn headline(g: &TextGradients, pieces: &[String]) -> String {
    format!(
        "Over {} tokens, {}: {:.4} nats. Its gradient with respect to layer {}'s W_Q, W_K and W_V (and their biases) \
         has norm ‖dW‖ = {:.4}.",
        g.tokens,
        target_words(g.ask.target, pieces),
        g.before.loss,
        g.ask.layer,
        g.grad_norm
    )
}

/// Where each part ran: the passes on the engine's tier, the backward on the CPU but for the chosen
/// layer's attention, on the GPU where there is one.
pub fn tier_line(g: &TextGradients, layers: usize) -> String {
    let layer = g.ask.layer;
    let above = match layers.saturating_sub(layer + 1) {
        0 => String::new(),
        1 => format!(", layer {}", layer + 1),
        _ => format!(", layers {} to {}", layer + 1, layers - 1),
    };
    let passes =
        if g.after.is_some() { "The forward passes (before and after the step) ran" } else { "The forward pass ran" };
    let tier = if g.on_gpu { "on the GPU" } else { "on the CPU (no WebGPU here, or backend=cpu)" };
    let input = match (g.on_gpu, layer) {
        (true, l) if l > 0 => format!(" from layer {layer}'s input as the GPU computed it (layers 0 to {})", l - 1),
        (false, l) if l > 0 => format!(" from the embeddings (layers 0 to {} run again there)", l - 1),
        _ => " from the embeddings".to_string(),
    };
    let attention = if g.attention_on_gpu {
        "attention's part by the GPU's FlashAttention-2 backward (flash_backward.wgsl, each query head with its own \
         copy of its K/V head, the shares summed on the CPU)"
    } else {
        "attention's part by the twin of the GPU's FlashAttention-2 backward"
    };
    format!(
        "{passes} {tier}. The backward pass ran on the CPU in f64{input}: through the output projection, the final norm{above} \
         and layer {layer} itself, {attention}. Its loss, {:.6}, is the pass's to f32's rounding.",
        g.backward_loss
    )
}

/// What the step did, or that none was taken.
pub fn step_line(g: &TextGradients) -> String {
    match &g.after {
        None => "η = 0: no step taken. Give a step size (eta) to move the weights downhill and rerun the pass.".into(),
        Some(after) => {
            let change = after.loss - g.before.loss;
            format!(
                "A step of η = {} on W_Q, W_K and W_V (W − η dW, every other weight unchanged), then the whole forward \
                 pass again: the loss went from {:.4} to {:.4} nats ({change:+.4}). To first order it falls by \
                 η‖dW‖² = {:.4}; where the real change is much smaller, the step was too long for the loss to stay \
                 straight along it.",
                g.ask.eta,
                g.before.loss,
                after.loss,
                g.ask.eta * g.grad_norm * g.grad_norm
            )
        }
    }
}

/// What the bars are.
pub fn bars_caption(g: &TextGradients) -> String {
    format!(
        "Per query head of layer {}: for each key position, the norm of that head's share of dK and dV there, \
         √(‖dk‖² + ‖dv‖²): which earlier tokens' keys and values most change the loss through the head. Every \
         head on one scale (the tallest bar is the layer's largest); hover a bar for its key and value parts.",
        g.ask.layer
    )
}

/// A probability before and after the step, at a position of the text: a counted next token's (the
/// token after `position`), or the attention on the key at `position`.
#[derive(Clone, Debug, PartialEq)]
pub struct BeforeAfter {
    pub position: usize,
    pub token: String,
    pub before: f64,
    pub after: Option<f64>,
}

/// The counted tokens' probabilities, in the loss's order: each row's token is the one after its position.
pub fn target_rows(g: &TextGradients, pieces: &[String]) -> Vec<BeforeAfter> {
    let positions: Vec<usize> = match g.ask.target {
        LossTarget::Text => (0..g.tokens.saturating_sub(1)).collect(),
        LossTarget::Token { position, .. } => vec![position],
    };
    positions
        .into_iter()
        .enumerate()
        .map(|(i, position)| BeforeAfter {
            position,
            token: piece(pieces, position + 1).to_string(),
            before: g.before.probs.get(i).copied().unwrap_or(0.0),
            after: g.after.as_ref().and_then(|a| a.probs.get(i).copied()),
        })
        .collect()
}

/// The chosen head's attention row, in words.
pub fn attention_heading(g: &TextGradients, pieces: &[String]) -> String {
    format!(
        "Head {}'s attention from query {} (“{}”) over the keys it sees, before and after the step",
        g.ask.head,
        g.row,
        piece(pieces, g.row)
    )
}

/// The chosen head's attention on each key its row sees.
pub fn attention_cells(g: &TextGradients, pieces: &[String]) -> Vec<BeforeAfter> {
    g.row_before
        .iter()
        .enumerate()
        .map(|(i, &before)| {
            let position = g.first_key + i;
            let after = g.row_after.as_ref().and_then(|a| a.get(i)).map(|&p| f64::from(p));
            BeforeAfter { position, token: piece(pieces, position).to_string(), before: f64::from(before), after }
        })
        .collect()
}

/// What the panel says for synthetic weights.
pub fn needs_real_weights() -> &'static str {
    "Gradients on the model need real weights: this model's are synthetic (seeded random numbers in its layout), so \
     their gradients would say nothing about what the model learned. Choose Attention Lab tiny, the model trained \
     here, in the Model list to see the loss of your text differentiated down to a layer's keys and values, and a \
     step of gradient descent on its W_Q, W_K and W_V."
}

/// A list of numbers for a `data-` attribute: JSON, full precision.
pub fn json_numbers(values: impl IntoIterator<Item = f64>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live_attention::GradAsk;
    use crate::lm::grad_step::TargetReading;

    fn pieces(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_string()).collect()
    }

    fn result(target: LossTarget, eta: f64) -> TextGradients {
        TextGradients {
            ask: GradAsk { layer: 1, head: 2, target, eta },
            tokens: 4,
            on_gpu: true,
            attention_on_gpu: true,
            key_norms: vec![
                vec![KeyNorms { key: 3.0, value: 4.0 }, KeyNorms { key: 0.0, value: 0.0 }],
                vec![KeyNorms { key: 6.0, value: 8.0 }, KeyNorms { key: 1.0, value: 0.0 }],
            ],
            backward_loss: 2.0,
            grad_norm: 2.0,
            before: TargetReading { probs: vec![0.5, 0.25, 0.125], loss: 2.0 },
            after: (eta > 0.0).then(|| TargetReading { probs: vec![0.5, 0.5, 0.25], loss: 1.5 }),
            row: 2,
            first_key: 1,
            row_before: vec![0.75, 0.25],
            row_after: (eta > 0.0).then(|| vec![0.5, 0.5]),
        }
    }

    #[test]
    fn a_position_targets_the_text_s_next_token() {
        let ids = [10, 11, 12];
        assert_eq!(resolve_target(TargetChoice::Text, &ids), Ok(LossTarget::Text));
        assert_eq!(resolve_target(TargetChoice::After(1), &ids), Ok(LossTarget::Token { position: 1, token: 12 }));
        let why = resolve_target(TargetChoice::After(2), &ids).unwrap_err();
        assert!(why.starts_with("Position 2 has no next token in the text, which is 3 tokens"), "{why}");
        assert!(why.ends_with("pick one up to 1."), "{why}");
        assert_eq!((chosen_head(Some(5), 8), chosen_head(Some(8), 8), chosen_head(None, 8)), (5, 0, 0));
        let (settings, notices) = Settings::from_query("model=attention-lab-tiny&layer=2&focus=3&target=1&eta=0.5");
        assert!(notices.is_empty(), "{notices:?}");
        let ask = GradSettings::of(&settings).ask(&ids, 8).unwrap();
        assert_eq!(ask, GradAsk { layer: 2, head: 3, target: LossTarget::Token { position: 1, token: 12 }, eta: 0.5 });
    }

    #[test]
    fn bars_share_one_scale_across_heads() {
        // Norms √(3² + 4²) = 5, 0; √(6² + 8²) = 10, 1: the layer's largest (10) is full height.
        let g = result(LossTarget::Text, 0.1);
        let heads = key_bars(&g.key_norms, &pieces(&["a", "b"]));
        assert_eq!(heads.len(), 2);
        let heights: Vec<Vec<f64>> = heads.iter().map(|h| h.bars.iter().map(|b| b.height).collect()).collect();
        assert_eq!(heights, [vec![0.5, 0.0], vec![1.0, 0.1]]);
        assert_eq!((heads[0].largest, heads[1].largest), (5.0, 10.0));
        assert_eq!((heads[1].bars[0].token.as_str(), heads[1].bars[0].key, heads[1].bars[0].value), ("a", 6.0, 8.0));
        // A loss that does not move: every bar flat, none divided by zero.
        let flat = key_bars(&[vec![KeyNorms { key: 0.0, value: 0.0 }]], &[]);
        assert_eq!((flat[0].bars[0].height, flat[0].bars[0].token.as_str()), (0.0, ""));
        assert_eq!(json_numbers([5.0, 0.0, 0.1]), "[5.0,0.0,0.1]");
    }

    #[test]
    fn what_the_panel_says() {
        let words = pieces(&["The", " cat", " sat", "."]);
        let g = result(LossTarget::Text, 0.1);
        assert_eq!(
            headline(&g, &words),
            "Over 4 tokens, the whole text's loss (the mean cross-entropy of its 3 next tokens): 2.0000 nats. Its \
             gradient with respect to layer 1's W_Q, W_K and W_V (and their biases) has norm ‖dW‖ = 2.0000."
        );
        // η‖dW‖² = 0.1 × 4 = 0.4.
        let step = step_line(&g);
        assert!(step.contains("from 2.0000 to 1.5000 nats (-0.5000)") && step.contains("η‖dW‖² = 0.4000;"), "{step}");
        assert!(step_line(&result(LossTarget::Text, 0.0)).starts_with("η = 0: no step taken."));
        let tier = tier_line(&g, 4);
        assert!(tier.starts_with("The forward passes (before and after the step) ran on the GPU."), "{tier}");
        assert!(tier.contains("from layer 1's input as the GPU computed it (layers 0 to 0)"), "{tier}");
        assert!(tier.contains("the final norm, layers 2 to 3 and layer 1 itself"), "{tier}");
        assert!(tier.contains("layer 1 itself, attention's part by the GPU's FlashAttention-2 backward"), "{tier}");
        let cpu =
            tier_line(&TextGradients { on_gpu: false, attention_on_gpu: false, ..result(LossTarget::Text, 0.1) }, 2);
        assert!(
            cpu.contains("ran on the CPU (no WebGPU") && cpu.contains("the final norm and layer 1 itself"),
            "{cpu}"
        );
        assert!(cpu.contains("attention's part by the twin of the GPU's FlashAttention-2 backward."), "{cpu}");
        assert!(cpu.contains("in f64 from the embeddings (layers 0 to 0 run again there)"), "{cpu}");
        let no_step = tier_line(&result(LossTarget::Text, 0.0), 4);
        assert!(no_step.starts_with("The forward pass ran on the GPU. The backward pass ran on the CPU"), "{no_step}");
        let token = LossTarget::Token { position: 1, token: 9 };
        assert_eq!(target_words(token, &words), "the loss of “ sat” as the next token after position 1 (“ cat”)");
        assert_eq!(
            attention_heading(&g, &words),
            "Head 2's attention from query 2 (“ sat”) over the keys it sees, before and after the step"
        );
    }

    #[test]
    fn target_rows_and_the_attention_row_pair_before_with_after() {
        let words = pieces(&["The", " cat", " sat", "."]);
        let rows = target_rows(&result(LossTarget::Text, 0.1), &words);
        let got: Vec<(usize, &str, f64, Option<f64>)> =
            rows.iter().map(|r| (r.position, r.token.as_str(), r.before, r.after)).collect();
        assert_eq!(got, [(0, " cat", 0.5, Some(0.5)), (1, " sat", 0.25, Some(0.5)), (2, ".", 0.125, Some(0.25))]);
        let one = target_rows(&result(LossTarget::Token { position: 2, token: 3 }, 0.0), &words);
        assert_eq!(one, [BeforeAfter { position: 2, token: ".".into(), before: 0.5, after: None }]);
        let cells = attention_cells(&result(LossTarget::Text, 0.1), &words);
        assert_eq!(
            cells,
            [
                BeforeAfter { position: 1, token: " cat".into(), before: 0.75, after: Some(0.5) },
                BeforeAfter { position: 2, token: " sat".into(), before: 0.25, after: Some(0.5) },
            ]
        );
        assert!(needs_real_weights().contains("Choose Attention Lab tiny"));
    }
}
